//! Homa loses nothing and leaks nothing when frames are lost, duplicated,
//! reordered or corrupted: RPCs of mixed sizes up to 1,000,000 bytes between
//! two endpoints through fault injection all complete byte-exact, and both
//! ends' tables and pools are empty afterwards.

use homa_phy::fault::{FaultConfig, PPM};
use homa_testkit::soak::{run, Soak};

fn soak(rpcs: usize, seed: u64, faults: FaultConfig) {
    let mut s = Soak::mixed(rpcs, seed);
    s.faults = faults;
    let r = run(s);
    assert_eq!(
        (r.sent, r.completed, r.verified, r.failed),
        (rpcs, rpcs, rpcs, 0),
        "{r}"
    );
    assert_eq!(r.leaked, 0, "{r}");
}

fn loss(fraction: f64) -> FaultConfig {
    let mut f = FaultConfig::new();
    f.drop_ppm = (fraction * f64::from(PPM)) as u32;
    f
}

#[test]
fn one_percent_loss() {
    soak(1000, 11, loss(0.01));
}

#[test]
fn ten_percent_loss() {
    soak(1000, 12, loss(0.10));
}

#[test]
fn thirty_percent_loss() {
    soak(500, 13, loss(0.30));
}

#[test]
fn duplication_and_reordering() {
    let mut f = FaultConfig::new();
    f.duplicate_ppm = PPM / 20;
    f.reorder_ppm = PPM / 20;
    f.reorder_timeout = homa_phy::Duration::from_micros(50);
    soak(1000, 14, f);
}

#[test]
fn single_bit_corruption_with_checksums() {
    let mut f = FaultConfig::new();
    f.corrupt_ppm = PPM / 50;
    soak(1000, 15, f);
}

/// 5% loss, 2% duplicates, 2% reordered, 1% corrupted.
fn everything() -> FaultConfig {
    let mut f = loss(0.05);
    f.duplicate_ppm = PPM / 50;
    f.reorder_ppm = PPM / 50;
    f.corrupt_ppm = PPM / 100;
    f.reorder_timeout = homa_phy::Duration::from_micros(50);
    f
}

#[test]
fn everything_at_once() {
    soak(1000, 16, everything());
}

#[test]
fn a_vanished_server_makes_every_outstanding_rpc_time_out() {
    let mut s = Soak::mixed(40, 17);
    s.server_vanishes_after = Some(20);
    let r = run(s);
    assert_eq!(r.sent, 40, "{r}");
    assert_eq!(
        r.completed + r.failed,
        r.sent,
        "every RPC ends one way or the other: {r}"
    );
    assert!(
        r.failed >= 20,
        "at least every RPC sent after the server vanished fails: {r}"
    );
    assert_eq!(r.timed_out, r.failed, "every failure is a timeout");
    assert_eq!(r.leaked, 0, "the client freed everything: {r}");
}

#[test]
fn everything_at_once_over_ipv6() {
    // The same faults over IPv6: neighbour discovery through the loss, and
    // corrupted frames caught by the Homa checksum over the IPv6
    // pseudo-header.
    let mut s = Soak::mixed(1000, 18);
    s.faults = everything();
    s.ipv6 = true;
    let r = run(s);
    assert_eq!(
        (r.sent, r.completed, r.verified, r.failed),
        (1000, 1000, 1000, 0),
        "{r}"
    );
    assert_eq!(r.leaked, 0, "{r}");
}
