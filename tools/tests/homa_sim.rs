//! homa-sim end to end: short deterministic runs of both protocols on the
//! simulated fabric, the workload sampling rule, and the slowdown of a lone
//! message.

use homa_tools::fabric::Topology;
use homa_tools::sim::report::json;
use homa_tools::sim::traffic::Message;
use homa_tools::sim::{run, run_with, Protocol, SimOptions, Workload};

/// A rack run short enough for a debug build.
fn short_run(workload: &str, duration_us: u64) -> SimOptions {
    let mut o = SimOptions::new(Workload::load(workload).unwrap());
    o.duration_ns = duration_us * 1000;
    o.quiet = true;
    o
}

#[test]
fn short_rack_run_delivers_every_message_intact_with_both_protocols() {
    let mut o = short_run("w3", 300);
    o.load = 0.5;
    let r = run(&o).unwrap();
    assert!(r.messages > 100, "{} messages", r.messages);
    assert_eq!(r.results.len(), 2);
    for p in &r.results {
        let name = p.protocol.name();
        assert_eq!(p.sent, r.messages, "{name}");
        assert_eq!(p.completed, r.messages, "{name}");
        assert_eq!(p.verified, r.messages, "{name}");
        assert_eq!(p.failed, 0, "{name}");
    }
}

/// `--ipv6`: Homa runs over IPv6 on the fabric; every message arrives
/// intact from the client the server sees by its IPv6 address (a request
/// from an unknown or IPv4 peer would count in `unknown_requests`).
#[test]
fn short_ipv6_run_delivers_every_homa_message_intact() {
    let mut o = short_run("w3", 300);
    o.load = 0.5;
    o.protocols = vec![Protocol::Homa];
    o.ipv6 = true;
    let r = run(&o).unwrap();
    assert!(r.homa.ipv6);
    assert!(r.messages > 100, "{} messages", r.messages);
    let p = &r.results[0];
    assert_eq!(p.sent, r.messages);
    assert_eq!(p.verified, r.messages);
    assert_eq!(p.failed, 0);
    let counter = |name| p.counters.iter().find(|c| c.0 == name).unwrap().1;
    assert_eq!(counter("unknown_requests"), 0);
    assert_eq!(counter("endpoint_drops"), 0);
    let v: serde_json::Value = serde_json::from_str(&json(&r)).unwrap();
    assert_eq!(v["homa_config"]["ipv6"], true);
}

#[test]
fn same_seed_gives_identical_json_and_another_seed_does_not() {
    let mut o = short_run("w2", 100);
    let r = run(&o).unwrap();
    let a = json(&r);
    let b = json(&run(&o).unwrap());
    assert_eq!(a, b);
    let v: serde_json::Value = serde_json::from_str(&a).unwrap();
    assert_eq!(v["messages"], r.messages);
    assert_eq!(v["protocols"]["homa"]["sent"], r.messages);
    assert_eq!(v["protocols"]["tcp"]["verified"], r.results[1].verified);
    o.seed = 2;
    assert_ne!(a, json(&run(&o).unwrap()));
}

#[test]
fn sampler_takes_the_first_row_whose_cdf_reaches_u() {
    let w = Workload::parse("t", "bytes,cdf\n10,0.2\n20,0.2\n30,0.7\n40,1\n").unwrap();
    assert_eq!(w.sample(0.0), 10);
    assert_eq!(w.sample(0.2), 10);
    assert_eq!(w.sample(0.2000001), 30, "a row with no mass is never drawn");
    assert_eq!(w.sample(0.7), 30);
    assert_eq!(w.sample(0.70001), 40);
    assert_eq!(w.sample(0.9999999), 40);
}

#[test]
fn lone_homa_message_on_an_idle_fabric_has_slowdown_one() {
    for (topology, name) in [
        (Topology::Rack { hosts: 16 }, "rack"),
        (Topology::Paper, "paper"),
    ] {
        for (size, ipv6) in [1u32, 1_000, 5_000, 200_000]
            .into_iter()
            .flat_map(|s| [(s, false), (s, true)])
        {
            let mut o = short_run("w4", 10);
            o.ipv6 = ipv6;
            o.topology = topology;
            o.topology_name = name.into();
            o.protocols = vec![Protocol::Homa];
            o.warmup = 0.0;
            let m = Message {
                at: 0,
                src: 1,
                dst: 14 + (name == "paper") as u32 * 100,
                size,
            };
            let r = run_with(&o, Some(vec![m])).unwrap();
            let p = &r.results[0];
            assert_eq!(p.verified, 1);
            let b = p.buckets.iter().find(|b| b.count == 1).unwrap();
            assert!(
                (b.p50 - 1.0).abs() < 0.01,
                "{name}, {size} bytes, ipv6 {ipv6}: slowdown {}",
                b.p50
            );
        }
    }
}

/// Homa RPCs whose replies cannot be sent (2,000,000 bytes is over Homa's
/// limit) are failures, not successes: every message arrives, but every
/// RPC fails and none is measured.
#[test]
fn rpcs_whose_replies_fail_are_counted_as_failed() {
    let mut o = short_run("w2", 100);
    o.protocols = vec![Protocol::Homa];
    o.response_bytes = 2_000_000;
    let r = run(&o).unwrap();
    let p = &r.results[0];
    assert!(r.messages > 10, "{} messages", r.messages);
    assert_eq!(p.completed, r.messages);
    assert_eq!(p.verified, 0);
    assert_eq!(p.failed, r.messages);
    assert_eq!(p.short.count, 0);
    let reply_errors = p.counters.iter().find(|(k, _)| *k == "reply_errors");
    assert_eq!(reply_errors, Some(&("reply_errors", r.messages as u64)));
}

/// With replies that can be sent, every RPC completes and the run waits for
/// the responses before it ends.
#[test]
fn rpcs_with_responses_all_succeed() {
    let mut o = short_run("w2", 100);
    o.protocols = vec![Protocol::Homa];
    o.response_bytes = 1000;
    let r = run(&o).unwrap();
    let p = &r.results[0];
    assert_eq!(p.verified, r.messages);
    assert_eq!(p.failed, 0);
    for k in ["reply_errors", "bad_responses", "unanswered"] {
        assert!(
            p.counters.iter().all(|(n, v)| *n != k || *v == 0),
            "{k}: {:?}",
            p.counters
        );
    }
}

/// The chart names its run, marks slowdown 1 and the short messages, keeps
/// the legend right of the plot, and rasterises to a PNG.
#[test]
fn the_plot_is_drawn_as_svg_and_png() {
    use homa_tools::sim::plot;
    let mut o = short_run("w4", 200);
    o.protocols = vec![Protocol::Homa];
    let r = run(&o).unwrap();
    let svg = plot::svg(&r);
    assert!(
        svg.contains("W4 at load 0.80, rack topology (16 hosts)"),
        "{svg}"
    );
    assert!(svg.contains("slowdown 1 (ideal)"));
    assert!(svg.contains(&format!("short messages (&lt;= {} B", r.short_max_bytes)));
    assert!(svg.contains("Homa P99") && svg.contains("Homa P50"));
    let png = plot::png(&svg).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
}
