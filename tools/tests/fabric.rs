//! The simulated fabric against the model of `docs/benchmarks.md` section 1.

use homa_phy::{Device, Duration, Instant, PacketMeta, RxToken, TxToken};
use homa_tools::fabric::{serialisation_time, Config, Fabric, NodeId, Topology};

/// An EtherType no parser reads priority from, so only `PacketMeta` counts.
const TEST_ETHERTYPE: [u8; 2] = [0x88, 0xb5];

/// One frame as a host saw it arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Rx {
    host: usize,
    tag: u32,
    at: u64,
}

fn fabric(topology: Topology) -> Fabric {
    Fabric::new(Config::new(topology)).unwrap()
}

fn rack(hosts: usize) -> Fabric {
    fabric(Topology::Rack { hosts })
}

fn ns(d: Duration) -> u64 {
    d.total_nanos()
}

/// Frame of `len` bytes from `src` to `dst` carrying `tag` at bytes 20..24
/// (clear of the IPv4 TOS byte some tests set).
fn frame(f: &Fabric, src: usize, dst: usize, len: usize, tag: u32) -> Vec<u8> {
    let mut data = vec![0u8; len];
    data[..6].copy_from_slice(&f.host_mac(dst));
    data[6..12].copy_from_slice(&f.host_mac(src));
    data[12..14].copy_from_slice(&TEST_ETHERTYPE);
    data[20..24].copy_from_slice(&tag.to_be_bytes());
    data
}

/// Hands `data` to `src`'s NIC now, with `priority` as metadata if given.
fn send_raw(f: &mut Fabric, src: usize, data: &[u8], priority: Option<u8>) {
    let now = f.now();
    let mut dev = f.device(src);
    let mut tx = dev.transmit(now).expect("a transmit slot");
    if let Some(p) = priority {
        tx.set_meta(PacketMeta::with_priority(p));
    }
    tx.consume(data.len(), |buf| buf.copy_from_slice(data));
}

fn send(f: &mut Fabric, src: usize, dst: usize, len: usize, tag: u32, priority: Option<u8>) {
    let data = frame(f, src, dst, len, tag);
    send_raw(f, src, &data, priority);
}

/// Takes every frame visible now, from the hosts the fabric lists.
fn drain(f: &mut Fabric, hosts: &mut Vec<usize>, out: &mut Vec<Rx>) {
    f.hosts_with_rx(hosts);
    for &host in hosts.iter() {
        let now = f.now();
        let mut dev = f.device(host);
        while let Some((rx, _tx)) = dev.receive(now) {
            let at = rx.meta().rx_timestamp.unwrap().total_nanos();
            let tag = rx.consume(|b| u32::from_be_bytes([b[20], b[21], b[22], b[23]]));
            out.push(Rx { host, tag, at });
        }
    }
}

/// Runs until idle, collecting every delivery in the order hosts saw them.
fn run(f: &mut Fabric) -> Vec<Rx> {
    let (mut hosts, mut out) = (Vec::new(), Vec::new());
    while let Some(t) = f.next_event_time() {
        f.advance_to(t);
        drain(f, &mut hosts, &mut out);
    }
    out
}

fn ser10(len: usize) -> u64 {
    ns(serialisation_time(len, 10_000))
}

#[test]
fn frame_crosses_a_rack_in_exactly_the_model_latency() {
    let mut f = rack(16);
    send(&mut f, 0, 5, 1514, 1, None);
    let rx = run(&mut f);
    // send delay + host link + switch delay + ToR port + receive delay.
    let expected = 500 + 1231 + 250 + 1231 + 500;
    assert_eq!(
        rx,
        [Rx {
            host: 5,
            tag: 1,
            at: expected
        }]
    );
    assert_eq!(ns(f.ideal_one_way(0, 5, 1514)), expected);
    assert_eq!(f.stats().hops, 2);
    assert_eq!(f.stats().frames_delivered, 1);
}

#[test]
fn frame_crosses_the_paper_fabric_in_exactly_the_model_latency() {
    for (dst, expected, hops) in [
        (15, 500 + 1231 + 250 + 1231 + 500, 2),
        (
            100,
            500 + 1231 + 250 + 308 + 250 + 308 + 250 + 1231 + 500,
            4,
        ),
    ] {
        let mut f = fabric(Topology::Paper);
        f.advance_to(Instant::from_micros(3));
        send(&mut f, 0, dst, 1514, 7, None);
        let rx = run(&mut f);
        assert_eq!(rx.len(), 1);
        assert_eq!((rx[0].host, rx[0].at), (dst, 3000 + expected));
        assert_eq!(ns(f.ideal_one_way(0, dst, 1514)), expected);
        assert_eq!(f.stats().hops, hops);
    }
}

#[test]
fn rx_token_reports_visible_and_nic_arrival_times() {
    let mut f = rack(2);
    send(&mut f, 0, 1, 100, 0, None);
    f.run_until_idle();
    let (rx, _) = f.device(1).receive(Instant::ZERO).unwrap();
    let visible = rx.meta().rx_timestamp.unwrap();
    assert_eq!(visible, f.now());
    assert_eq!(visible - rx.arrived_at(), Duration::from_nanos(500));
}

#[test]
fn propagation_delay_adds_once_per_link() {
    let mut cfg = Config::new(Topology::Paper);
    cfg.propagation_delay = Duration::from_nanos(1000);
    let mut f = Fabric::new(cfg).unwrap();
    send(&mut f, 1, 140, 600, 0, None);
    let rx = run(&mut f);
    let ser40 = ns(serialisation_time(600, 40_000));
    assert_eq!((ser10(600), ser40), (500, 125));
    let base = 500 + 500 + 250 + 125 + 250 + 125 + 250 + 500 + 500;
    assert_eq!(rx[0].at, base + 4 * 1000);
    assert_eq!(ns(f.ideal_one_way(1, 140, 600)), base + 4 * 1000);
}

/// Sends `frames` back to back at time zero and returns the last delivery.
fn message_time(f: &mut Fabric, src: usize, dst: usize, frames: &[usize]) -> u64 {
    for (i, &len) in frames.iter().enumerate() {
        send(f, src, dst, len, i as u32, None);
    }
    let rx = run(f);
    assert_eq!(rx.len(), frames.len());
    rx.iter().map(|r| r.at).max().unwrap()
}

#[test]
fn ideal_time_matches_a_multi_frame_message_on_an_idle_fabric() {
    // 10,000 bytes = 6 x 1514 + 916: a short tail, but over a third of a frame.
    let cases = [
        (Topology::Rack { hosts: 16 }, 2, 9),
        (Topology::Paper, 20, 30),
        (Topology::Paper, 20, 130),
    ];
    for (topology, src, dst) in cases {
        for seed in 0..4 {
            let mut cfg = Config::new(topology);
            cfg.seed = seed;
            let mut f = Fabric::new(cfg).unwrap();
            let ideal = ns(f.ideal_one_way(src, dst, 10_000));
            let frames = [1514, 1514, 1514, 1514, 1514, 1514, 916];
            assert_eq!(ideal, ns(f.ideal_one_way_frames(src, dst, &frames)));
            assert_eq!(
                message_time(&mut f, src, dst, &frames),
                ideal,
                "{topology:?}"
            );
        }
    }
}

#[test]
fn ideal_time_matches_equal_frames_and_single_frames() {
    for topology in [Topology::Rack { hosts: 16 }, Topology::Paper] {
        for frames in [&[1000usize; 5][..], &[64], &[1514]] {
            let mut f = fabric(topology);
            let ideal = ns(f.ideal_one_way_frames(3, 12, frames));
            assert_eq!(message_time(&mut f, 3, 12, frames), ideal);
            let mut f = fabric(topology);
            let dst = f.hosts() - 1;
            let ideal = ns(f.ideal_one_way_frames(3, dst, frames));
            assert_eq!(message_time(&mut f, 3, dst, frames), ideal);
        }
    }
}

#[test]
fn ideal_time_is_a_tight_lower_bound_for_a_short_tail_across_racks() {
    // A tiny tail may overtake the full frame on another uplink (the ideal)
    // or follow it on the same one (slower by the tail's last-hop time).
    let frames = [1514, 64];
    let (mut exact, mut slower) = (0, 0);
    for seed in 0..16 {
        let mut cfg = Config::new(Topology::Paper);
        cfg.seed = seed;
        let mut f = Fabric::new(cfg).unwrap();
        let ideal = ns(f.ideal_one_way_frames(0, 50, &frames));
        let t = message_time(&mut f, 0, 50, &frames);
        if t == ideal {
            exact += 1;
        } else {
            assert_eq!(t, ideal + ser10(64));
            slower += 1;
        }
    }
    assert!(exact > 0 && slower > 0, "exact {exact}, slower {slower}");
}

/// Host 0 and host 1 each send `n` full frames to host 2 at time zero: they
/// arrive at the ToR twice as fast as its port to host 2 drains them.
fn backlog(f: &mut Fabric, n: u32, priority: u8) {
    for i in 0..n {
        send(f, 0, 2, 1514, i, Some(priority));
        send(f, 1, 2, 1514, 100 + i, Some(priority));
    }
}

/// Delivery order at host 2 of the backlog plus one frame (tag 999) from host
/// 3 sent at 5 us with `priority`; without metadata the frame carries it as
/// an IPv4 TOS byte, or with `ipv6` an IPv6 traffic class (both priority << 5).
fn overtake(priority: u8, meta: bool, ipv6: bool) -> Vec<Rx> {
    let mut f = rack(4);
    backlog(&mut f, 8, 1);
    f.advance_to(Instant::from_micros(5));
    let mut data = frame(&f, 3, 2, 1514, 999);
    let class = priority << 5;
    let head = if ipv6 {
        // Version 6, then the traffic class across the next two nibbles.
        [0x86, 0xdd, 0x60 | class >> 4, (class & 0x0f) << 4]
    } else {
        [0x08, 0x00, 0x45, class]
    };
    data[12..16].copy_from_slice(&head);
    send_raw(&mut f, 3, &data, meta.then_some(priority));
    run(&mut f)
}

#[test]
fn high_priority_frame_overtakes_a_switch_backlog() {
    for (meta, ipv6) in [(true, false), (false, false), (false, true)] {
        let rx = overtake(7, meta, ipv6);
        let pos = rx.iter().position(|r| r.tag == 999).unwrap();
        // At 5 us + 500 + 1231 + 250 = 6981 ns the port is on its 5th frame
        // (frames leave every 1231 ns from 1981 ns); the rest wait behind.
        assert_eq!(pos, 5, "meta {meta}, ipv6 {ipv6}");
        let start_of_6th = 1981 + 5 * 1231;
        assert_eq!(rx[pos].at, start_of_6th + 1231 + 500);
        // The low-priority frames keep their own order.
        let low: Vec<u32> = rx.iter().map(|r| r.tag).filter(|&t| t != 999).collect();
        assert_eq!(&low[..6], [0, 100, 1, 101, 2, 102]);
    }
    // At the backlog's priority it waits behind the 10 frames that reached
    // the switch before it (each host's k-th at 1981 + 1231k ns, k < 5).
    let rx = overtake(1, true, false);
    assert_eq!(rx.iter().position(|r| r.tag == 999), Some(10));
}

#[test]
fn fifo_within_a_priority_in_order_of_arrival() {
    let mut f = rack(3);
    // Host 1 starts 600 ns after host 0, so arrivals at the switch interleave
    // without ties: host 0's frame k at 1981 + 1231k, host 1's 600 ns later.
    for i in 0..10 {
        send(&mut f, 0, 2, 1514, i, Some(4));
    }
    f.advance_to(Instant::from_nanos(600));
    for i in 0..10 {
        send(&mut f, 1, 2, 1514, 100 + i, Some(4));
    }
    let tags: Vec<u32> = run(&mut f).iter().map(|r| r.tag).collect();
    let expected: Vec<u32> = (0..10).flat_map(|i| [i, 100 + i]).collect();
    assert_eq!(tags, expected);
}

#[test]
fn nic_is_fifo_by_default_and_can_have_priority_queues() {
    for nic_priority_queues in [false, true] {
        let mut cfg = Config::new(Topology::Rack { hosts: 2 });
        cfg.nic_priority_queues = nic_priority_queues;
        let mut f = Fabric::new(cfg).unwrap();
        for i in 0..4 {
            send(&mut f, 0, 1, 1514, i, Some(0));
        }
        send(&mut f, 0, 1, 1514, 9, Some(6));
        let tags: Vec<u32> = run(&mut f).iter().map(|r| r.tag).collect();
        // The first frame is already on the wire when the NIC can choose.
        let expected: &[u32] = if nic_priority_queues {
            &[0, 9, 1, 2, 3]
        } else {
            &[0, 1, 2, 3, 9]
        };
        assert_eq!(tags, expected);
    }
}

#[test]
fn finite_buffer_drops_tail_and_counts() {
    let buffer = 4 * 1514;
    let mut cfg = Config::new(Topology::Rack { hosts: 3 });
    cfg.switch_buffer_bytes = Some(buffer);
    let mut f = Fabric::new(cfg).unwrap();
    backlog(&mut f, 20, 0);
    let rx = run(&mut f);
    let drops = f.stats().drops;
    let port = f.port_stats(NodeId::Switch(0), 2).unwrap();
    assert!(drops.buffer_full > 0);
    assert_eq!(drops.total(), drops.buffer_full);
    assert_eq!(rx.len() as u64 + drops.buffer_full, 40);
    assert_eq!(port.drops, drops.buffer_full);
    assert_eq!(port.max_queue_bytes, buffer);

    // Unlimited (the default): nothing lost, the queue grows past that size.
    let mut f = rack(3);
    backlog(&mut f, 20, 0);
    assert_eq!(run(&mut f).len(), 40);
    assert_eq!(f.stats().drops.total(), 0);
    assert!(f.port_stats(NodeId::Switch(0), 2).unwrap().max_queue_bytes > buffer);
}

#[test]
fn finite_buffer_in_frames_drops_tail_whatever_the_frame_size() {
    // 60-byte frames: a byte limit of 4 full frames would hold 100 of them.
    let mut cfg = Config::new(Topology::Rack { hosts: 3 });
    cfg.switch_buffer_frames = Some(4);
    let mut f = Fabric::new(cfg).unwrap();
    for tag in 0..20 {
        send(&mut f, 0, 2, 60, tag, None);
        send(&mut f, 1, 2, 60, 100 + tag, Some(7));
    }
    let rx = run(&mut f);
    let drops = f.stats().drops.buffer_full;
    let port = f.port_stats(NodeId::Switch(0), 2).unwrap();
    assert!(drops > 0);
    assert_eq!(rx.len() as u64 + drops, 40);
    assert_eq!(port.drops, drops);
    // Frames held (queued and on the wire) never passed 4.
    assert!(port.max_queue_bytes <= 4 * 60, "{}", port.max_queue_bytes);
}

/// `nic_like_switch`: a host's own uplink drops past the switch buffer and
/// marks past the ECN threshold as the switch ports do (ECN-capable IPv4
/// frames only), and its backlog counts the dropped frames out.
#[test]
fn host_uplinks_like_switches_drop_and_mark() {
    let mut cfg = Config::new(Topology::Rack { hosts: 2 });
    cfg.nic_like_switch = true;
    cfg.switch_buffer_frames = Some(4);
    cfg.ecn_threshold_bytes = Some(2 * 1514);
    let mut f = Fabric::new(cfg).unwrap();
    for tag in 0..10 {
        let mut data = frame(&f, 0, 1, 1514, tag);
        // IPv4, ECN-capable (ECT(0)) for the even tags.
        data[12..16].copy_from_slice(&[0x08, 0x00, 0x45, if tag % 2 == 0 { 2 } else { 0 }]);
        send_raw(&mut f, 0, &data, None);
    }
    assert_eq!(f.nic_backlog(0), 10);
    let rx = run(&mut f);
    let nic = f.port_stats(NodeId::Host(0), 0).unwrap();
    // The first frame goes on the wire at once; 3 more fit behind it.
    assert_eq!(
        (rx.len(), nic.drops, f.stats().drops.buffer_full),
        (4, 6, 6)
    );
    assert_eq!(f.nic_backlog(0), 0);
    // Tags 0..4 were queued: 2 waiting frames are within K, the third
    // (tag 3, not ECN-capable) is past it but left as it is.
    assert_eq!((nic.marks, f.stats().ecn_marks), (0, 0));
    let mut f = Fabric::new(cfg).unwrap();
    for tag in 0..4 {
        let mut data = frame(&f, 0, 1, 1514, tag);
        data[12..16].copy_from_slice(&[0x08, 0x00, 0x45, 2]);
        send_raw(&mut f, 0, &data, None);
    }
    run(&mut f);
    assert_eq!(f.stats().ecn_marks, 1, "the third waiting frame");
    // Without the option the NIC keeps one unlimited FIFO.
    cfg.nic_like_switch = false;
    let mut f = Fabric::new(cfg).unwrap();
    for tag in 0..10 {
        send(&mut f, 0, 1, 1514, tag, None);
    }
    assert_eq!(run(&mut f).len(), 10);
}

#[test]
fn capture_sees_both_directions_of_one_host_link() {
    use std::sync::{Arc, Mutex};
    let mut f = rack(3);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    f.capture(
        1,
        Box::new(move |at, frame| {
            let tag = u32::from_be_bytes([frame[20], frame[21], frame[22], frame[23]]);
            sink.lock().unwrap().push((at.total_nanos(), tag));
        }),
    );
    send(&mut f, 0, 1, 1514, 1, None);
    send(&mut f, 1, 2, 1514, 2, None);
    send(&mut f, 0, 2, 1514, 3, None);
    run(&mut f);
    // Host 1's NIC sends tag 2 after its send delay and one serialisation;
    // the ToR's port to host 1 sends tag 1 a switch delay and a
    // serialisation later. Tag 3 never crosses host 1's link.
    let ser = ser10(1514);
    assert_eq!(
        *seen.lock().unwrap(),
        [(500 + ser, 2), (500 + ser + 250 + ser, 1)]
    );
}

/// Racks 0 and 1 send many frames to rack 2 and within rack 0, with the
/// uplinks oversubscribed, so spraying choices change the timing.
fn busy_run(seed: u64) -> Vec<Rx> {
    let mut cfg = Config::new(Topology::Paper);
    cfg.seed = seed;
    let mut f = Fabric::new(cfg).unwrap();
    for round in 0..10u32 {
        for src in 0..32 {
            let dst = if src % 3 == 0 {
                (src + 5) % 16
            } else {
                32 + src % 16
            };
            let len = 200 + (src * 37 + round as usize * 101) % 1300;
            send(
                &mut f,
                src,
                dst,
                len,
                round * 1000 + src as u32,
                Some((src % 8) as u8),
            );
        }
        f.advance_to(f.now() + Duration::from_nanos(700));
    }
    run(&mut f)
}

#[test]
fn same_seed_and_inputs_give_identical_runs() {
    let a = busy_run(42);
    assert_eq!(a.len(), 320);
    assert_eq!(a, busy_run(42));
    assert_ne!(a, busy_run(43));
}

#[test]
fn spraying_uses_all_four_uplinks() {
    let mut f = fabric(Topology::Paper);
    for i in 0..400 {
        send(&mut f, 0, 16 + i as usize % 16, 500, i, None);
    }
    assert_eq!(run(&mut f).len(), 400);
    let up: Vec<u64> = (16..20)
        .map(|p| f.port_stats(NodeId::Switch(0), p).unwrap().frames)
        .collect();
    assert_eq!(up.iter().sum::<u64>(), 400);
    assert!(up.iter().all(|&n| n >= 60), "{up:?}");
    // Each aggregation switch passed its share down to ToR 1.
    for (a, &n) in up.iter().enumerate() {
        assert_eq!(f.port_stats(NodeId::Switch(9 + a), 1).unwrap().frames, n);
    }
}

#[test]
fn broadcast_reaches_every_other_host_once_at_the_unloaded_time() {
    let mut f = fabric(Topology::Paper);
    let mut arp = frame(&f, 5, 0, 42, 77);
    arp[..6].copy_from_slice(&[0xff; 6]);
    send_raw(&mut f, 5, &arp, None);
    let rx = run(&mut f);
    assert_eq!(rx.len(), 143);
    let mut hosts: Vec<usize> = rx.iter().map(|r| r.host).collect();
    hosts.sort_unstable();
    assert_eq!(hosts, (0..144).filter(|&h| h != 5).collect::<Vec<_>>());
    for r in &rx {
        assert_eq!(r.tag, 77);
        assert_eq!(r.at, ns(f.ideal_one_way_frames(5, r.host, &[42])));
    }
    assert_eq!(f.stats().broadcast_copies, 143);
    assert_eq!(f.stats().hops, 0);
}

#[test]
fn unknown_short_and_oversize_frames_are_dropped_and_counted() {
    let mut f = rack(4);
    let mut stray = frame(&f, 0, 1, 100, 0);
    stray[..6].copy_from_slice(&[0x02, 0, 0, 0, 0xff, 0xff]);
    send_raw(&mut f, 0, &stray, None);
    send_raw(&mut f, 0, &[0u8; 13], None);
    send(&mut f, 0, 1, 1515, 0, None);
    assert!(run(&mut f).is_empty());
    let d = f.stats().drops;
    assert_eq!((d.unknown_destination, d.malformed, d.oversize), (1, 1, 1));
    assert_eq!(f.stats().frames_sent, 3);
    assert_eq!(f.stats().frames_delivered, 0);
}

#[test]
fn nic_queue_limit_refuses_transmit_until_the_link_drains() {
    let mut cfg = Config::new(Topology::Rack { hosts: 2 });
    cfg.nic_queue_frames = Some(2);
    let mut f = Fabric::new(cfg).unwrap();
    assert_eq!(f.device(0).capabilities().max_burst_size, Some(2));
    send(&mut f, 0, 1, 1514, 0, None);
    send(&mut f, 0, 1, 1514, 1, None);
    assert!(f.device(0).transmit(Instant::ZERO).is_none());
    assert_eq!(f.nic_backlog(0), 2);
    // The first frame leaves the host link at 500 + 1231 ns.
    f.advance_to(Instant::from_nanos(1730));
    let now = f.now();
    assert!(f.device(0).transmit(now).is_none());
    f.advance_to(Instant::from_nanos(1731));
    assert_eq!(f.nic_backlog(0), 1);
    let now = f.now();
    assert!(f.device(0).transmit(now).is_some());
}

#[test]
fn capabilities_report_mtu_and_host_link_rate() {
    let mut cfg = Config::new(Topology::Paper);
    cfg.mtu = 9014;
    cfg.host_link_mbps = 25_000;
    let mut f = Fabric::new(cfg).unwrap();
    let caps = f.device(3).capabilities();
    assert_eq!(caps.max_transmission_unit, 9014);
    assert_eq!(caps.link_rate_mbps, Some(25_000));
    assert_eq!(caps.max_burst_size, None);
    assert_eq!(
        rack(16).device(0).capabilities().max_transmission_unit,
        1514
    );
}

#[test]
fn hosts_with_rx_lists_each_receiving_host_once() {
    let mut f = rack(8);
    send(&mut f, 0, 3, 100, 0, None);
    send(&mut f, 1, 3, 100, 1, None);
    send(&mut f, 2, 6, 100, 2, None);
    f.run_until_idle();
    let mut hosts = Vec::new();
    f.hosts_with_rx(&mut hosts);
    hosts.sort_unstable();
    assert_eq!(hosts, [3, 6]);
    assert_eq!(f.rx_pending(3), 2);
    f.hosts_with_rx(&mut hosts);
    assert!(hosts.is_empty());
}

#[test]
fn ten_thousand_frames_never_exceed_a_link_rate() {
    // Two senders share the ToR port to host 2: 10,000 frames of varied size,
    // tagged with their index in `sizes`.
    let mut f = rack(3);
    let mut sizes = Vec::new();
    for i in 0..5_000usize {
        for src in 0..2 {
            let len = 60 + (i * 7919 + src * 104_729) % 1455;
            send(&mut f, src, 2, len, sizes.len() as u32, None);
            sizes.push(len);
        }
    }
    let rx = run(&mut f);
    assert_eq!(rx.len(), 10_000);
    // The port sends one frame at a time, so consecutive deliveries are at
    // least the later frame's serialisation apart.
    for pair in rx.windows(2) {
        let gap = pair[1].at - pair[0].at;
        assert!(gap >= ser10(sizes[pair[1].tag as usize]), "{pair:?}");
    }
    let total: u64 = sizes.iter().map(|&l| ser10(l)).sum();
    let port = f.port_stats(NodeId::Switch(0), 2).unwrap();
    assert_eq!((port.frames, port.busy.total_nanos()), (10_000, total));
    // And the whole run took no less than all of it back to back.
    let first = rx[0].at - 500 - ser10(sizes[rx[0].tag as usize]);
    assert!(rx[9_999].at - 500 - first >= total);
}
