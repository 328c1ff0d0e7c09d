//! homa-sim end to end: short deterministic runs of every protocol on the
//! simulated fabric, loss recovery through small buffers, the baselines'
//! behaviour (connection pools, windows, PIAS priorities on host uplinks),
//! packet captures, the workload sampling rule, and the slowdown of a lone
//! message; and the baselines' TCP model driven by hand.

use homa_tools::fabric::Topology;
use homa_tools::sim::report::json;
use homa_tools::sim::run::PcapSpec;
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
fn short_rack_run_delivers_every_message_intact_with_every_protocol() {
    let mut o = short_run("w3", 300);
    o.load = 0.5;
    let r = run(&o).unwrap();
    assert!(r.messages > 100, "{} messages", r.messages);
    assert_eq!(r.options.switch_buffer, Some(250));
    let names: Vec<_> = r.results.iter().map(|p| p.protocol.name()).collect();
    assert_eq!(names, ["homa", "pias", "dctcp", "tcp-mc", "pfabric"]);
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
    assert_eq!(v["protocols"]["pias"]["verified"], r.results[1].verified);
    assert_eq!(v["protocols"]["pfabric"]["verified"], r.results[4].verified);
    assert_eq!(v["switch_buffer_frames"], 250);
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

/// The right edge of an SVG `<text>` element, estimated: its x, its
/// anchor, and 0.6 em a character (DejaVu Sans, the fonts Debian has,
/// averages less).
fn text_right_edge(element: &str, body: &str) -> f64 {
    let attr = |name: &str| {
        let at = element
            .find(&format!(" {name}=\""))
            .map(|i| i + name.len() + 3)?;
        let end = element[at..].find('"')? + at;
        Some(element[at..end].to_string())
    };
    let x: f64 = attr("x").and_then(|v| v.parse().ok()).unwrap_or(0.0);
    let size: f64 = attr("font-size")
        .and_then(|v| v.trim_end_matches("px").parse().ok())
        .unwrap_or(12.0);
    let chars = body
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    let width = chars.chars().count() as f64 * 0.6 * size;
    match attr("text-anchor").as_deref() {
        Some("middle") => x + width / 2.0,
        Some("end") => x,
        _ => x + width,
    }
}

/// The chart names its run, marks slowdown 1 and the short messages, and
/// keeps every label inside its canvas (the legend's longest names, the
/// TCP baselines', included); it rasterises to a PNG (with the `png`
/// feature, as CI builds it) whose right edge no text runs into.
#[test]
fn the_plot_is_drawn_as_svg_and_png_inside_its_canvas() {
    use homa_tools::sim::plot;
    let r = run(&short_run("w4", 200)).unwrap();
    assert!(
        r.results.len() > 1,
        "every protocol, the baselines' labels too"
    );
    let svg = plot::svg(&r).unwrap();
    assert!(
        svg.contains("W4 at load 0.80, rack topology (16 hosts)"),
        "{svg}"
    );
    assert!(svg.contains("slowdown 1 (ideal)"));
    assert!(svg.contains(&format!("short messages (&lt;= {} B", r.short_max_bytes)));
    assert!(svg.contains("Homa P99") && svg.contains("Homa P50"));
    let width: f64 = {
        let at = svg.find("width=\"").unwrap() + 7;
        svg[at..at + svg[at..].find('"').unwrap()].parse().unwrap()
    };
    let mut texts = 0;
    for piece in svg.split("<text").skip(1) {
        let (element, rest) = piece.split_once('>').unwrap();
        let body = rest.split("</text>").next().unwrap();
        let right = text_right_edge(element, body);
        assert!(
            right <= width,
            "{body:?} ends at about {right}, past {width}"
        );
        texts += 1;
    }
    assert!(texts > 10, "{texts} texts");
    if cfg!(feature = "png") {
        let png = plot::png(&svg).unwrap();
        if let Some(dir) = std::env::var_os("HOMA_PLOT_DIR") {
            std::fs::write(std::path::Path::new(&dir).join("plot.png"), &png).unwrap();
        }
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        #[cfg(feature = "png")]
        {
            let pixmap = resvg::tiny_skia::Pixmap::decode_png(&png).unwrap();
            let (w, h) = (pixmap.width(), pixmap.height());
            for x in w - 4..w {
                for y in 0..h {
                    let p = pixmap.pixel(x, y).unwrap();
                    let white = (p.red(), p.green(), p.blue()) == (255, 255, 255);
                    assert!(white, "the PNG's right edge is drawn on at ({x}, {y})");
                }
            }
        }
    } else {
        assert!(plot::png(&svg).is_err());
    }
}

/// Switch buffers of 8 frames (below DCTCP's K; pFabric keeps its 13
/// packets) drop packets of every protocol; each protocol's own loss
/// recovery still delivers every message intact within the default 200 ms
/// drain, and the drops are reported per protocol.
#[test]
fn every_protocol_recovers_what_small_switch_buffers_drop() {
    let mut o = short_run("w4", 300);
    o.switch_buffer = Some(8);
    let r = run(&o).unwrap();
    assert!(r.messages > 20, "{} messages", r.messages);
    let v: serde_json::Value = serde_json::from_str(&json(&r)).unwrap();
    for p in &r.results {
        let name = p.protocol.name();
        assert!(p.drops > 0, "{name}: no drops");
        assert_eq!(p.verified, r.messages, "{name}");
        assert_eq!(p.failed, 0, "{name}");
        assert_eq!(v["protocols"][name]["drops"], p.drops, "{name}");
    }
    let homa = &r.results[0];
    let counter = |name| homa.counters.iter().find(|c| c.0 == name).unwrap().1;
    assert!(counter("retransmissions") > 0);
}

/// The TCP baselines' pools: eight 100-byte messages sent at once between
/// one pair each open a connection of their own and none waits; a ninth
/// sent once they are all acknowledged reuses one.
#[test]
fn a_message_takes_an_idle_connection_or_opens_one_and_never_waits() {
    for p in [
        Protocol::Pias,
        Protocol::Dctcp,
        Protocol::TcpMc,
        Protocol::Pfabric,
    ] {
        let mut o = short_run("w4", 100);
        o.protocols = vec![p];
        o.warmup = 0.0;
        let m = |at, size| Message {
            at,
            src: 1,
            dst: 0,
            size,
        };
        let mut msgs = vec![m(0, 100); 8];
        msgs.push(m(50_000, 100));
        let r = run_with(&o, Some(msgs)).unwrap();
        let res = &r.results[0];
        let counter = |name| res.counters.iter().find(|c| c.0 == name).unwrap().1;
        assert_eq!(res.verified, 9, "{p:?}");
        assert_eq!(counter("connections"), 8, "{p:?}");
        let slowest = res.buckets.iter().map(|b| b.p99).fold(0.0, f64::max);
        assert!(slowest < 2.0, "{p:?}: slowdown {slowest}");
    }
}

/// The slowdown of a 100-byte message from host 1 sent while host 1 is
/// sending four 1 MB messages to other hosts (200 us in: past PIAS's first
/// thresholds, so demoted).
fn short_behind_long(p: Protocol) -> f64 {
    let mut o = short_run("w4", 100);
    o.protocols = vec![p];
    o.warmup = 0.0;
    let m = |at, dst, size| Message {
        at,
        src: 1,
        dst,
        size,
    };
    let mut msgs: Vec<Message> = (2..6).map(|d| m(0, d, 1_000_000)).collect();
    msgs.push(m(200_000, 0, 100));
    let r = run_with(&o, Some(msgs)).unwrap();
    let p = &r.results[0];
    assert_eq!(p.verified, 5);
    // Buckets ascend by size: the first holding a message holds the short one.
    p.buckets.iter().find(|b| b.count == 1).unwrap().p99
}

/// PIAS runs on the strict-priority queues of the switches at its hosts'
/// uplinks too, as the paper's simulation had them: its short message
/// overtakes the long messages' frames queued in its own host's NIC, where
/// DCTCP's (one FIFO, as in its simulation) waits behind them.
#[test]
fn pias_gets_priority_queues_on_the_host_uplinks() {
    let o = short_run("w4", 100);
    let pias = homa_tools::sim::run::fabric_config(&o, Protocol::Pias);
    assert!(pias.nic_priority_queues && pias.nic_like_switch);
    let dctcp = homa_tools::sim::run::fabric_config(&o, Protocol::Dctcp);
    assert!(!dctcp.nic_priority_queues && dctcp.nic_like_switch);
    let with = short_behind_long(Protocol::Pias);
    let without = short_behind_long(Protocol::Dctcp);
    assert!(with < 2.0, "pias {with}");
    assert!(without > 4.0 * with, "dctcp {without}, pias {with}");
}

/// Every TCP baseline keeps its bytes in flight within its congestion
/// window at every send (the senders count any send past it), and the
/// window does bound them: data waits for it many times. DCTCP and PIAS
/// are marked and cut their windows; the others see no mark.
#[test]
fn tcp_baselines_never_have_more_in_flight_than_their_window() {
    let mut o = short_run("w4", 500);
    o.protocols = vec![
        Protocol::Pias,
        Protocol::Dctcp,
        Protocol::TcpMc,
        Protocol::Pfabric,
    ];
    let r = run(&o).unwrap();
    for p in &r.results {
        let name = p.protocol.name();
        let counter = |k| p.counters.iter().find(|c| c.0 == k).unwrap().1;
        assert_eq!(p.verified, r.messages, "{name}");
        assert!(counter("segments") > 1_000, "{name}");
        assert_eq!(counter("window_violations"), 0, "{name}");
        assert!(
            counter("window_limited") > 100,
            "{name}: {}",
            counter("window_limited")
        );
        let dctcp = matches!(p.protocol, Protocol::Pias | Protocol::Dctcp);
        assert_eq!(p.ecn_marks > 0, dctcp, "{name}: {} marks", p.ecn_marks);
        assert_eq!(counter("ecn_window_cuts") > 0, dctcp, "{name}");
    }
}

/// The records (time ns, frame) of a pcap file with nanosecond times.
fn pcap_records(bytes: &[u8]) -> Vec<(u64, Vec<u8>)> {
    assert_eq!(&bytes[..4], &0xa1b2_3c4du32.to_le_bytes());
    let le = |b: &[u8]| u32::from_le_bytes(b.try_into().unwrap());
    let (mut at, mut out) = (24, Vec::new());
    while at < bytes.len() {
        let h = &bytes[at..at + 16];
        let t = u64::from(le(&h[..4])) * 1_000_000_000 + u64::from(le(&h[4..8]));
        let len = le(&h[8..12]) as usize;
        assert_eq!(len, le(&h[12..16]) as usize, "whole frames");
        out.push((t, bytes[at + 16..at + 16 + len].to_vec()));
        at += 16 + len;
    }
    out
}

fn temp_path(name: &str) -> String {
    let dir = std::env::temp_dir().join(format!("homa-sim-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name).to_string_lossy().into_owned()
}

/// PIAS tags each data segment, through the IPv4 TOS byte the switches
/// read, by the bytes its message sent before it, against the thresholds
/// derived from the workload; segments without data go at the top.
#[test]
fn pias_tags_each_segment_by_the_bytes_its_message_already_sent() {
    let path = temp_path("pias.pcap");
    let mut o = short_run("w4", 100);
    o.protocols = vec![Protocol::Pias];
    o.pcap = Some(PcapSpec {
        path: path.clone(),
        host: 1,
        protocol: Protocol::Pias,
    });
    let m = |at, size| Message {
        at,
        src: 1,
        dst: 0,
        size,
    };
    let r = run_with(&o, Some(vec![m(0, 300_000), m(400_000, 300_000)])).unwrap();
    assert_eq!(r.results[0].verified, 2);
    let t = r.pias.0;
    assert!(t.windows(2).all(|w| w[0] <= w[1]), "{t:?}");
    let mut first_seq = std::collections::HashMap::new();
    let mut seen = [0usize; 8];
    for (_, f) in pcap_records(&std::fs::read(&path).unwrap()) {
        let ip = &f[14..];
        assert_eq!(ip[9], 6, "TCP only");
        let priority = ip[1] >> 5;
        let ihl = usize::from(ip[0] & 15) * 4;
        let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
        let tcp = &ip[ihl..total];
        let payload = tcp.len() - usize::from(tcp[12] >> 4) * 4;
        let from_host_1 = f[6..12] == [2, 0, 0, 0, 0, 1];
        if payload == 0 || !from_host_1 {
            assert_eq!(priority, 7, "control segment");
            continue;
        }
        let port = u16::from_be_bytes([tcp[0], tcp[1]]);
        let seq = u32::from_be_bytes(tcp[4..8].try_into().unwrap());
        // Both messages go on the pool's first connection, one after the
        // other: the second starts where the first's 12-byte header and
        // 300,000 bytes end.
        let start = *first_seq.entry(port).or_insert(seq);
        let mut sent = seq.wrapping_sub(start);
        if sent >= 300_012 {
            sent -= 300_012;
        }
        let expected = 7 - t.iter().filter(|&&x| sent > x).count() as u8;
        assert_eq!(priority, expected, "{sent} bytes sent");
        seen[usize::from(priority)] += 1;
    }
    assert!(seen[7] >= 2, "{seen:?}");
    assert!(
        seen[..7].iter().filter(|&&n| n > 0).count() >= 2,
        "{seen:?}"
    );
    let _ = std::fs::remove_file(&path);
}

/// Runs homa-sim with `args` and homa-dump with `dump` on the capture it
/// wrote to `path`; returns homa-dump's output.
fn sim_then_dump(args: &[&str], path: &str, dump: &[&str]) -> String {
    use std::process::Command;
    let sim = Command::new(env!("CARGO_BIN_EXE_homa-sim"))
        .args([
            "--duration",
            "0.2",
            "--quiet",
            "--pcap",
            path,
            "--pcap-host",
            "3",
        ])
        .args(args)
        .output()
        .unwrap();
    assert!(
        sim.status.success(),
        "{}",
        String::from_utf8_lossy(&sim.stderr)
    );
    let out = Command::new(env!("CARGO_BIN_EXE_homa-dump"))
        .args(dump)
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `homa-sim --pcap` writes host 3's link as a NIC with checksum offload
/// would put it on the wire: every checksum filled. homa-dump decodes a
/// Homa run's frames as Homa with no complaint and right checksums, a
/// PIAS run's as TCP with right IPv4 header checksums (and the TCP
/// checksums verify).
#[test]
fn pcap_captures_decode_cleanly_with_right_checksums() {
    use homa_stack::wire::{checksum, IpProtocol, Ipv4Addr};
    let path = temp_path("homa.pcap");
    let text = sim_then_dump(&["--protocols", "homa"], &path, &["--json"]);
    let mut frames = 0;
    let mut data = 0;
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if v.get("frame").is_none() {
            continue;
        }
        frames += 1;
        assert!(v.get("error").is_none() && v.get("note").is_none(), "{v}");
        assert!(v["homa"].is_object(), "{v}");
        assert_eq!(v["ip"]["checksum_ok"], true, "{v}");
        assert_eq!(v["homa"]["checksum_status"], "ok", "{v}");
        data += usize::from(v["homa"]["type"] == "DATA");
    }
    assert!(frames > 50 && data > 0, "{frames} frames, {data} DATA");
    let stats = sim_then_dump(&["--protocols", "homa"], &path, &["--stats"]);
    assert!(stats.contains(" bad-checksum 0\n"), "{stats}");

    let text = sim_then_dump(
        &["--protocols", "pias", "--pcap-protocol", "pias"],
        &path,
        &["--json"],
    );
    let mut tcp = 0;
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if v.get("frame").is_some() {
            assert_eq!(v["ip"]["proto"], 6, "{v}");
            assert_eq!(v["ip"]["checksum_ok"], true, "{v}");
            tcp += 1;
        }
    }
    let records = pcap_records(&std::fs::read(&path).unwrap());
    assert_eq!(records.len(), tcp);
    for (_, f) in &records {
        let ip = &f[14..];
        let seg = &ip[20..usize::from(u16::from_be_bytes([ip[2], ip[3]]))];
        let (src, dst) = (
            Ipv4Addr::from([ip[12], ip[13], ip[14], ip[15]]),
            Ipv4Addr::from([ip[16], ip[17], ip[18], ip[19]]),
        );
        let pseudo = checksum::pseudo_header_v4(&src, &dst, IpProtocol::Tcp, seg.len() as u32);
        assert_eq!(checksum::combine(&[pseudo, checksum::sum(seg)]), 0xffff);
    }
    assert!(tcp > 50, "{tcp} frames");
    let _ = std::fs::remove_file(&path);
}

/// homa-dump's `--stats` counts a bad checksum exactly where its listing
/// marks one: here a capture with one IPv4 header checksum broken.
#[test]
fn homa_dump_stats_count_the_checksums_its_listing_marks() {
    let path = temp_path("broken.pcap");
    sim_then_dump(&["--protocols", "homa"], &path, &["--stats"]);
    let mut bytes = std::fs::read(&path).unwrap();
    // The first record's IPv4 header checksum: global header 24, record
    // header 16, Ethernet 14, then 10 bytes into the IPv4 header.
    bytes[24 + 16 + 14 + 10] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let dump = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_homa-dump"))
            .args(args)
            .arg(&path)
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    let listing = dump(&[]);
    assert_eq!(
        listing.matches("[bad IPv4 header checksum]").count(),
        1,
        "{listing}"
    );
    let stats = dump(&["--stats"]);
    assert!(stats.contains(" bad-checksum 1\n"), "{stats}");
    let _ = std::fs::remove_file(&path);
}

/// The baselines' TCP model alone, driven by hand: windows, DCTCP's cut,
/// SACK recovery, pFabric's probes, the receiver's reassembly.
mod tcp_model {
    use homa_tools::sim::event_loop::NEVER;
    use homa_tools::sim::tcp_model::*;

    const DCTCP: TcpParams = TcpParams {
        init_window: 7,
        max_window: 249,
        ecn: true,
        dctcp_g: 1.0 / 16.0,
        rto: Rto::Fixed(200_000),
        probe_after: None,
    };

    const M: u64 = MSS as u64;

    fn drain(s: &mut Sender, now: u64) -> Vec<Out> {
        std::iter::from_fn(|| s.next_segment(now)).collect()
    }

    #[test]
    fn the_initial_window_bounds_the_first_flight() {
        let mut s = Sender::new(DCTCP, 0);
        s.start_message(0, 100 * M + 10);
        let first = drain(&mut s, 0);
        assert_eq!(first.len(), 7);
        assert_eq!(
            first[6],
            Out {
                start: 6 * M,
                len: MSS
            }
        );
        assert_eq!((s.in_flight(), s.window()), (7 * M, 7 * M));
        assert_eq!(s.stats.window_limited, 1);
        // Slow start: two acknowledgements open the window by two and let
        // four more go.
        s.on_ack(10, M, &[], false);
        s.on_ack(11, 2 * M, &[], false);
        assert_eq!(drain(&mut s, 10).len(), 4);
        assert_eq!(s.in_flight(), 9 * M);
        assert_eq!(s.window(), 9 * M);
        assert_eq!(s.stats.window_violations, 0);
    }

    #[test]
    fn a_short_message_goes_whole_and_idles_the_sender() {
        let mut s = Sender::new(DCTCP, 0);
        s.start_message(0, 112);
        assert_eq!(drain(&mut s, 0), [Out { start: 0, len: 112 }]);
        assert!(!s.idle());
        assert_eq!(s.rto_at(), 200_000);
        s.on_ack(5_000, 112, &[], false);
        assert!(s.idle());
        assert_eq!(s.rto_at(), NEVER);
        // The next message continues the stream.
        assert_eq!(s.start_message(6_000, 20), 112);
        assert_eq!(s.sent_before(112 + 5), 5);
    }

    #[test]
    fn a_timeout_resends_only_what_sack_did_not_cover() {
        let mut s = Sender::new(DCTCP, 0);
        s.start_message(0, 7 * M);
        drain(&mut s, 0);
        // Segment 1 and 3 lost: the others are selectively acknowledged.
        s.on_ack(10, M, &[(2 * M, 3 * M), (4 * M, 7 * M)], false);
        assert_eq!(s.in_flight(), 2 * M);
        assert!(s.bytes_left() == 2 * M);
        assert!(drain(&mut s, 10).is_empty(), "nothing new to send");
        s.on_timeout(199_999);
        assert_eq!(s.stats.timeouts, 0, "not due yet");
        s.on_timeout(200_010);
        assert_eq!((s.stats.timeouts, s.window(), s.in_flight()), (1, M, 0));
        // cwnd 1: one hole at a time, lowest first.
        assert_eq!(drain(&mut s, 200_010), [Out { start: M, len: MSS }]);
        s.on_ack(200_020, 2 * M, &[(4 * M, 7 * M)], false);
        assert_eq!(
            drain(&mut s, 200_020),
            [Out {
                start: 3 * M,
                len: MSS
            }]
        );
        s.on_ack(200_030, 7 * M, &[], false);
        assert!(s.idle());
        assert_eq!(s.stats.retransmissions, 2);
        assert_eq!(s.stats.window_violations, 0);
    }

    #[test]
    fn dctcp_cuts_by_half_alpha_once_per_window() {
        let mut s = Sender::new(DCTCP, 0);
        s.start_message(0, 1000 * M);
        drain(&mut s, 0);
        // The first window all marked: alpha = g, cwnd cut by g / 2.
        for k in 1..=7 {
            s.on_ack(k, k * M, &[], true);
        }
        assert!((s.alpha() - 1.0 / 16.0).abs() < 1e-9, "{}", s.alpha());
        assert_eq!(s.stats.ecn_cuts, 1);
        assert_eq!(s.window(), (7.0 * (1.0 - 1.0 / 32.0)) as u64 * M);
        // The next update still counts the marked acknowledgements since
        // the first (6 of 7 segments); the one after only unmarked ones,
        // so alpha decays.
        let g = 1.0 / 16.0;
        drain(&mut s, 8);
        s.on_ack(8, 8 * M, &[], false);
        let a2 = (1.0 - g) * g + g * 6.0 / 7.0;
        assert!((s.alpha() - a2).abs() < 1e-9, "{}", s.alpha());
        for k in 9..=13 {
            s.on_ack(k, k * M, &[], false);
        }
        drain(&mut s, 14);
        s.on_ack(14, 14 * M, &[], false);
        assert!((s.alpha() - (1.0 - g) * a2).abs() < 1e-9, "{}", s.alpha());
        assert_eq!(s.stats.ecn_cuts, 1);
        // Plain TCP ignores echoes.
        let mut t = Sender::new(
            TcpParams {
                ecn: false,
                ..DCTCP
            },
            0,
        );
        t.start_message(0, 100 * M);
        drain(&mut t, 0);
        t.on_ack(1, M, &[], true);
        assert_eq!((t.stats.ecn_cuts, t.window()), (0, 8 * M));
    }

    #[test]
    fn pfabric_probes_after_five_timeouts_in_a_row() {
        let p = TcpParams {
            init_window: 12,
            max_window: 12,
            ecn: false,
            rto: Rto::Fixed(24_000),
            probe_after: Some(5),
            ..DCTCP
        };
        let mut s = Sender::new(p, 0);
        s.start_message(0, 3 * M);
        assert_eq!(drain(&mut s, 0).len(), 3);
        let mut now = 0;
        for _ in 0..4 {
            now += 24_000;
            s.on_timeout(now);
            assert!(!drain(&mut s, now).is_empty());
        }
        now += 24_000;
        s.on_timeout(now);
        assert_eq!(drain(&mut s, now), [Out { start: 0, len: 1 }]);
        assert_eq!((s.window(), s.in_flight()), (1, 1));
        // An acknowledgement of the probe ends probing; slow start resumes
        // with the rest of the first segment.
        s.on_ack(now + 5, 1, &[], false);
        assert_eq!(s.window(), 2 * M);
        let next = drain(&mut s, now + 5);
        assert_eq!(
            next[0],
            Out {
                start: 1,
                len: MSS - 1
            }
        );
        assert_eq!(next.len(), 2);
        assert_eq!(s.stats.probes, 1);
        assert_eq!(s.stats.window_violations, 0);
    }

    #[test]
    fn estimated_timeout_backs_off_and_acks_of_unsent_bytes_are_ignored() {
        let mut s = Sender::new(
            TcpParams {
                rto: Rto::Estimated { min: 200_000 },
                ..DCTCP
            },
            0,
        );
        s.start_message(0, 2 * M);
        drain(&mut s, 0);
        s.on_ack(1_000, 5 * M, &[], false);
        assert_eq!(s.in_flight(), 2 * M, "bytes never sent");
        s.on_timeout(200_000);
        assert_eq!(s.rto_at(), 200_000 + 400_000);
        s.on_ack(200_100, 2 * M, &[], false);
        assert!(s.idle());
    }

    #[test]
    fn receiver_reorders_and_reports_the_newest_block_first() {
        let mut r = Receiver::default();
        let mut got = Vec::new();
        let seg = |k: u8| vec![k; 10];
        let (ack, sacks) = r.on_segment(20, &seg(2), |b| got.extend_from_slice(b));
        assert_eq!((ack, sacks.1, sacks.0[0]), (0, 1, (20, 30)));
        let (_, sacks) = r.on_segment(40, &seg(4), |b| got.extend_from_slice(b));
        assert_eq!(&sacks.0[..sacks.1], [(40, 50), (20, 30)]);
        let (_, sacks) = r.on_segment(30, &seg(3), |b| got.extend_from_slice(b));
        assert_eq!(&sacks.0[..sacks.1], [(20, 50)]);
        assert!(got.is_empty());
        let (ack, sacks) = r.on_segment(0, &[0; 15], |b| got.extend_from_slice(b));
        assert_eq!((ack, sacks.1), (15, 1));
        // A retransmission overlapping what arrived delivers only the rest.
        let (ack, sacks) = r.on_segment(10, &seg(1), |b| got.extend_from_slice(b));
        assert_eq!((ack, sacks.1), (50, 0));
        let mut want = vec![0; 15];
        want.extend([1; 5]);
        want.extend([2; 10]);
        want.extend([3; 10]);
        want.extend([4; 10]);
        assert_eq!(got, want);
    }
}
