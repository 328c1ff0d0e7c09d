//! Checksums a device does: what the endpoint leaves in each field for a
//! device that fills it (exact bytes), that it takes frames as the device
//! checked them, and that by default it fills and verifies every one.
//!
//! The expected frames are built from raw fields, their checksums summed
//! word by word here, apart from the library's own summing code.

use super::*;
use crate::phy::fault::{FaultConfig, FaultInjector, PPM};
use crate::phy::{Checksum, ChecksumCapabilities};
use crate::wire::homa::{DataHeader, Kind, Repr};
use crate::wire::IpAddr;

/// The ones'-complement sum of `data`, folded, not complemented.
fn folded(data: &[u8]) -> u16 {
    !frames::checksum(data)
}

/// The TCP-style pseudo-header of a `len`-byte Homa packet.
fn pseudo(src: IpAddr, dst: IpAddr, len: usize) -> Vec<u8> {
    let mut p = Vec::new();
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            p.extend_from_slice(&s.octets());
            p.extend_from_slice(&d.octets());
            p.extend_from_slice(&[0, 6]);
            p.extend_from_slice(&(len as u16).to_be_bytes());
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            p.extend_from_slice(&s.octets());
            p.extend_from_slice(&d.octets());
            p.extend_from_slice(&(len as u32).to_be_bytes());
            p.extend_from_slice(&[0, 0, 0, 6]);
        }
        _ => unreachable!("one family"),
    }
    p
}

/// What the Homa checksum field holds.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Field {
    /// The whole checksum, as the stack fills it.
    Filled,
    /// The pseudo-header's sum alone, for the device to complete.
    Seed,
    /// Nothing.
    Zero,
}

/// The Homa packet of `repr` from `src` to `dst` with its checksum field
/// as `field` says.
fn homa_body(repr: &Repr<'_>, src: IpAddr, dst: IpAddr, field: Field) -> Vec<u8> {
    let mut body = vec![0; repr.buffer_len()];
    repr.emit(&mut homa::Packet::new_unchecked(&mut body[..]));
    let sum = pseudo(src, dst, body.len());
    let value = match field {
        Field::Filled => {
            let mut all = sum;
            all.extend_from_slice(&body);
            frames::checksum(&all)
        }
        Field::Seed => folded(&sum),
        Field::Zero => 0,
    };
    body[16..18].copy_from_slice(&value.to_be_bytes());
    body
}

/// An IPv4 frame carrying `body`, its header checksum filled or left 0.
fn ipv4_frame(
    (from_mac, from): (EthernetAddress, Ipv4Addr),
    (to_mac, to): (EthernetAddress, Ipv4Addr),
    protocol: u8,
    tos: u8,
    body: &[u8],
    header_checksum: bool,
) -> Vec<u8> {
    let mut ip = frames::ipv4(from, to, protocol, tos, body);
    if !header_checksum {
        ip[10..12].fill(0);
    }
    frames::ethernet(from_mac.0, to_mac.0, None, frames::IPV4, &ip)
}

/// A's 10-byte request, client id 2 from port 40,000 to port 500, whole
/// in one packet (cutoff version 1, B's own, so B sends no CUTOFFS).
fn request(payload: &[u8]) -> Repr<'_> {
    Repr {
        sport: 40_000,
        dport: 500,
        sender_id: 2,
        kind: Kind::Data {
            header: DataHeader {
                message_length: payload.len() as u32,
                incoming: payload.len() as u32,
                ack: None,
                cutoff_version: 1,
                retransmit: false,
                offset: 0,
            },
            payload,
        },
    }
}

/// B's response to it: at priority 6 (a peer's initial cutoffs), cutoff
/// version 0 (none came from A).
fn response(payload: &[u8]) -> Repr<'_> {
    Repr {
        sport: 500,
        dport: 40_000,
        sender_id: 3,
        kind: Kind::Data {
            header: DataHeader {
                message_length: payload.len() as u32,
                incoming: payload.len() as u32,
                ack: None,
                cutoff_version: 0,
                retransmit: false,
                offset: 0,
            },
            payload,
        },
    }
}

/// A's request frame to B, every checksum filled.
fn request_frame(payload: &[u8]) -> Vec<u8> {
    let (a, b) = (IpAddr::V4(A_IP), IpAddr::V4(B_IP));
    let body = homa_body(&request(payload), a, b, Field::Filled);
    ipv4_frame((A_MAC, A_IP), (B_MAC, B_IP), frames::HOMA, 0, &body, true)
}

/// A device reporting `checksum`.
fn device(checksum: ChecksumCapabilities) -> TestDevice {
    TestDevice {
        checksum,
        ..TestDevice::default()
    }
}

/// Capabilities in which the stack's part is `homa` for Homa and `ip` for
/// the IPv4 header and both ICMPs.
fn caps(ip: Checksum, homa: Checksum) -> ChecksumCapabilities {
    let mut c = ChecksumCapabilities::default();
    c.ipv4 = ip;
    c.icmpv4 = ip;
    c.icmpv6 = ip;
    c.homa = homa;
    c
}

/// Server B on port 500 over `dev`: takes `frame`, and the requests it
/// delivered, each answered with its own bytes; then what B sent to A's
/// link address (its question about a new client's link address, sent to
/// all, left out: these tests are about the frames to the client).
fn serve(config: Config, dev: &mut TestDevice, frame: Vec<u8>) -> (Vec<Vec<u8>>, Stats) {
    let mut ep = endpoint_with(config, 4, 1 << 20);
    let sock = ep.bind(500).unwrap();
    let now = Instant::from_millis(1);
    dev.rx.push_back(frame);
    ep.poll(now, dev);
    while let Some(Event::Request { rpc, len, .. }) = ep.recv(sock) {
        let mut buf = vec![0; len];
        ep.message(rpc).unwrap().copy_to(&mut buf);
        ep.reply(rpc, &buf).unwrap();
    }
    ep.poll(now, dev);
    let sent = dev
        .tx
        .drain(..)
        .map(|(f, _)| f)
        .filter(|f| f[..6] == A_MAC.0)
        .collect();
    (sent, *ep.stats())
}

#[test]
fn a_device_that_fills_checksums_gets_its_fields_left_for_it() {
    let (a, b) = (IpAddr::V4(A_IP), IpAddr::V4(B_IP));
    let config = Config::new(B_IP, B_MAC, SEED);
    let mut no_homa_checksum = config.clone();
    no_homa_checksum.homa_checksum_tx = false;
    use Checksum::{Both, None as Neither, Rx, Tx};
    // (device's capabilities, configuration, IPv4 header checksum filled,
    // Homa checksum field). `Tx` (the device checks on receive) leaves
    // transmit to the stack; `Rx` and `None` leave it to the device.
    let cases = [
        (caps(Both, Both), &config, true, Field::Filled),
        (caps(Tx, Tx), &config, true, Field::Filled),
        (caps(Both, Rx), &config, true, Field::Seed),
        (caps(Rx, Both), &config, false, Field::Filled),
        (caps(Neither, Neither), &config, false, Field::Seed),
        (caps(Both, Both), &no_homa_checksum, true, Field::Zero),
        (caps(Both, Neither), &no_homa_checksum, true, Field::Zero),
    ];
    for (checksum, config, ip, field) in cases {
        let mut dev = device(checksum);
        let (sent, _) = serve(config.clone(), &mut dev, request_frame(b"abcdefghij"));
        let body = homa_body(&response(b"abcdefghij"), b, a, field);
        let expected = ipv4_frame(
            (B_MAC, B_IP),
            (A_MAC, A_IP),
            frames::HOMA,
            6 << 5,
            &body,
            ip,
        );
        assert_eq!(sent, vec![expected], "{checksum:?}, {field:?}");
    }
}

#[test]
fn a_homa_checksum_the_device_checked_is_not_verified_again() {
    let mut config = Config::new(B_IP, B_MAC, SEED);
    config.homa_checksum_rx = true;
    let mut bad = request_frame(b"abcdefghij");
    bad[34 + 16] ^= 0x55;
    // (the stack's part for Homa, whether the request gets through).
    for (homa, delivered) in [
        (Checksum::Both, false),
        (Checksum::Rx, false),
        (Checksum::Tx, true),
        (Checksum::None, true),
    ] {
        let mut dev = device(caps(Checksum::Both, homa));
        let (sent, stats) = serve(config.clone(), &mut dev, bad.clone());
        assert_eq!(sent.len(), usize::from(delivered), "{homa:?}");
        assert_eq!(stats.drops.checksum, u64::from(!delivered), "{homa:?}");
    }
    // Without `homa_checksum_rx` nothing is verified, whatever the device.
    let mut dev = device(ChecksumCapabilities::default());
    let (sent, stats) = serve(Config::new(B_IP, B_MAC, SEED), &mut dev, bad);
    assert_eq!((sent.len(), stats.drops.checksum), (1, 0));
}

#[test]
fn an_ipv4_header_the_device_checked_is_not_verified_again() {
    let mut bad = request_frame(b"abcdefghij");
    bad[14 + 10] ^= 0x55;
    for (ip, delivered) in [
        (Checksum::Both, false),
        (Checksum::Rx, false),
        (Checksum::Tx, true),
        (Checksum::None, true),
    ] {
        let mut dev = device(caps(ip, Checksum::Both));
        let (sent, stats) = serve(Config::new(B_IP, B_MAC, SEED), &mut dev, bad.clone());
        assert_eq!(sent.len(), usize::from(delivered), "{ip:?}");
        assert_eq!(stats.drops.malformed, u64::from(!delivered), "{ip:?}");
    }
}

/// An ICMP echo message (request 8, reply 0) with its checksum `filled`
/// or 0.
fn echo(kind: u8, data: &[u8], filled: bool) -> Vec<u8> {
    let mut m = vec![kind, 0, 0, 0, 0, 7, 0, 9];
    m.extend_from_slice(data);
    if filled {
        let sum = frames::checksum(&m);
        m[2..4].copy_from_slice(&sum.to_be_bytes());
    }
    m
}

#[test]
fn pings_leave_icmp_checksums_to_the_device_both_ways() {
    let good = echo(8, b"ping", true);
    let mut bad = good.clone();
    bad[2] ^= 0x55;
    // (the stack's part for IPv4 and ICMP, the ping's message, whether it
    // is answered, with the reply's checksums filled).
    use Checksum::{Both, None as Neither, Rx, Tx};
    for (ip, ping, answered, filled) in [
        (Both, &good, true, true),
        (Both, &bad, false, true),
        (Rx, &good, true, false),
        (Rx, &bad, false, false),
        (Tx, &bad, true, true),
        (Neither, &bad, true, false),
    ] {
        let mut dev = device(caps(ip, Both));
        let frame = ipv4_frame((A_MAC, A_IP), (B_MAC, B_IP), frames::ICMP, 0, ping, true);
        let (sent, stats) = serve(Config::new(B_IP, B_MAC, SEED), &mut dev, frame);
        let expected: Vec<Vec<u8>> = if answered {
            let reply = echo(0, b"ping", filled);
            // Answers go at the highest priority, 7.
            vec![ipv4_frame(
                (B_MAC, B_IP),
                (A_MAC, A_IP),
                frames::ICMP,
                7 << 5,
                &reply,
                filled,
            )]
        } else {
            vec![]
        };
        assert_eq!(sent, expected, "{ip:?}, {ping:?}");
        assert_eq!(stats.drops.malformed, u64::from(!answered), "{ip:?}");
    }
}

#[test]
fn endpoints_whose_devices_do_every_checksum_exchange_rpcs() {
    // Nothing on the in-memory wire completes what the senders leave, so
    // the RPCs complete only if neither end verifies what its device
    // claims to have checked: IPv4 headers sent with checksum 0, Homa
    // packets with the seed.
    let config = |ip, mac| {
        let mut c = Config::new(ip, mac, SEED);
        c.homa_checksum_rx = true;
        c
    };
    let da = device(ChecksumCapabilities::ignored());
    let db = TestDevice {
        checksum: ChecksumCapabilities::ignored(),
        ..TestDevice::with_pool(da.pool.clone())
    };
    let mut p = Pair::with_devices(
        endpoint_with(config(A_IP, A_MAC), 8, 4 << 20),
        endpoint_with(config(B_IP, B_MAC), 8, 4 << 20),
        da,
        db,
    );
    p.a.add_neighbor(p.now, B_IP, B_MAC).unwrap();
    p.b.add_neighbor(p.now, A_IP, A_MAC).unwrap();
    for len in [1, 1425, 100_000] {
        echo_rpc(&mut p, len);
    }
    let homa: Vec<_> = p.log.iter().filter(|l| l.2[23] == frames::HOMA).collect();
    // At least the DATA packets: 1 + 2 + 71 each way.
    assert!(homa.len() >= 148, "{} Homa frames", homa.len());
    for (_, to_b, f, _) in homa {
        let (src, dst) = if *to_b { (A_IP, B_IP) } else { (B_IP, A_IP) };
        assert_eq!(f[24..26], [0, 0], "IPv4 header checksum left 0");
        let seed = folded(&pseudo(src.into(), dst.into(), f.len() - 34));
        assert_eq!(
            f[50..52],
            seed.to_be_bytes(),
            "Homa checksum left as the seed"
        );
    }
    assert_eq!(p.a.stats().drops.total() + p.b.stats().drops.total(), 0);
}

#[test]
fn a_corrupting_injector_over_a_device_that_checks_hides_no_flip() {
    // Every frame B receives has one bit flipped after its device, which
    // claims to check every checksum, saw it. The injector gives the
    // checks back to B's stack, so no flipped request reaches the
    // application: each delivered request is one A sent, byte for byte
    // (a flip in the source MAC, which no checksum covers, changes none
    // of it).
    let mut faults = FaultConfig::new();
    faults.corrupt_ppm = PPM;
    faults.transmit_faults = false;
    let mut dev: FaultInjector<TestDevice> =
        FaultInjector::with_config(device(ChecksumCapabilities::ignored()), 3, faults);
    let mut config = Config::new(B_IP, B_MAC, SEED);
    config.homa_checksum_rx = true;
    let mut ep = endpoint_with(config, 256, 1 << 20);
    let sock = ep.bind(500).unwrap();
    let sent: Vec<Vec<u8>> = (0..200u64)
        .map(|i| {
            let payload = pattern(32, i);
            let mut repr = request(&payload);
            repr.sender_id = 2 * (i + 1);
            let body = homa_body(&repr, IpAddr::V4(A_IP), IpAddr::V4(B_IP), Field::Filled);
            let frame = ipv4_frame((A_MAC, A_IP), (B_MAC, B_IP), frames::HOMA, 0, &body, true);
            dev.get_mut().rx.push_back(frame);
            payload
        })
        .collect();
    let now = Instant::from_millis(1);
    for _ in 0..8 {
        ep.poll(now, &mut dev);
    }
    assert_eq!(dev.stats().rx.corrupted, 200);
    let mut delivered = 0;
    while let Some(Event::Request { rpc, len, .. }) = ep.recv(sock) {
        let mut buf = vec![0; len];
        ep.message(rpc).unwrap().copy_to(&mut buf);
        let i = rpc.id() / 2 - 1;
        assert_eq!(Some(&buf), sent.get(i as usize), "request {i}");
        delivered += 1;
    }
    let d = ep.stats().drops;
    assert!(d.checksum > 100, "{d:?}");
    assert_eq!(delivered + d.total(), 200, "{d:?}");
}

#[cfg(feature = "ipv6")]
mod ipv6 {
    use super::*;
    use crate::wire::Ipv6Addr;

    const A6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
    const B6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);

    fn ipv6_frame(
        (from_mac, from): (EthernetAddress, Ipv6Addr),
        (to_mac, to): (EthernetAddress, Ipv6Addr),
        next_header: u8,
        traffic_class: u8,
        body: &[u8],
    ) -> Vec<u8> {
        let ip = frames::ipv6(from, to, next_header, traffic_class, 64, body);
        frames::ethernet(from_mac.0, to_mac.0, None, frames::IPV6, &ip)
    }

    fn config() -> Config {
        let mut c = Config::new(B_IP, B_MAC, SEED);
        c.ipv6 = true;
        c.ipv6_addrs[0] = Some(B6);
        c
    }

    #[test]
    fn the_seed_over_ipv6_covers_the_ipv6_pseudo_header() {
        let (a, b) = (IpAddr::V6(A6), IpAddr::V6(B6));
        for (homa, field) in [
            (Checksum::Both, Field::Filled),
            (Checksum::Rx, Field::Seed),
            (Checksum::None, Field::Seed),
        ] {
            let body = homa_body(&request(b"abcdefghij"), a, b, Field::Filled);
            let frame = ipv6_frame((A_MAC, A6), (B_MAC, B6), frames::HOMA, 0, &body);
            let mut dev = device(caps(Checksum::Both, homa));
            let (sent, _) = serve(config(), &mut dev, frame);
            let body = homa_body(&response(b"abcdefghij"), b, a, field);
            let expected = ipv6_frame((B_MAC, B6), (A_MAC, A6), frames::HOMA, 6 << 5, &body);
            assert_eq!(sent, vec![expected], "{homa:?}");
        }
    }

    /// An ICMPv6 echo message (request 128, reply 129) from `src` to
    /// `dst`, its checksum `filled` or 0.
    fn echo6(kind: u8, src: Ipv6Addr, dst: Ipv6Addr, filled: bool) -> Vec<u8> {
        let mut m = vec![kind, 0, 0, 0, 0, 7, 0, 9];
        m.extend_from_slice(b"ping6");
        if filled {
            let mut all = src.octets().to_vec();
            all.extend_from_slice(&dst.octets());
            all.extend_from_slice(&(m.len() as u32).to_be_bytes());
            all.extend_from_slice(&[0, 0, 0, 58]);
            all.extend_from_slice(&m);
            m[2..4].copy_from_slice(&frames::checksum(&all).to_be_bytes());
        }
        m
    }

    #[test]
    fn pings_over_ipv6_leave_icmpv6_checksums_to_the_device_both_ways() {
        let good = echo6(128, A6, B6, true);
        let mut bad = good.clone();
        bad[3] ^= 0x55;
        use Checksum::{Both, None as Neither, Rx, Tx};
        for (icmp, ping, answered, filled) in [
            (Both, &good, true, true),
            (Both, &bad, false, true),
            (Rx, &good, true, false),
            (Tx, &bad, true, true),
            (Neither, &bad, true, false),
        ] {
            let mut dev = device(caps(icmp, Both));
            let frame = ipv6_frame((A_MAC, A6), (B_MAC, B6), frames::ICMPV6, 0, ping);
            let (sent, stats) = serve(config(), &mut dev, frame);
            let expected: Vec<Vec<u8>> = if answered {
                let reply = echo6(129, B6, A6, filled);
                vec![ipv6_frame(
                    (B_MAC, B6),
                    (A_MAC, A6),
                    frames::ICMPV6,
                    7 << 5,
                    &reply,
                )]
            } else {
                vec![]
            };
            assert_eq!(sent, expected, "{icmp:?}, {ping:?}");
            assert_eq!(stats.drops.malformed, u64::from(!answered), "{icmp:?}");
        }
    }
}
