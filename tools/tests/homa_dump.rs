//! Runs the built homa-dump on the committed captures (tools/data/) and
//! on small captures written here (pcapng of both byte orders, pcap of both
//! byte orders and resolutions, damaged files).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use homa_stack::wire::homa::{self, Kind};
use homa_stack::wire::{EtherType, EthernetAddress, IpProtocol, Ipv4Addr, Ipv4Packet};
use homa_testkit::frames;

const DUMP: &str = env!("CARGO_BIN_EXE_homa-dump");

fn data(name: &str) -> String {
    format!("{}/data/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn run(args: &[&str]) -> Output {
    Command::new(DUMP)
        .args(args)
        .output()
        .expect("homa-dump runs")
}

fn stdout_lines(out: &Output) -> Vec<String> {
    String::from_utf8(out.stdout.clone())
        .expect("utf-8")
        .lines()
        .map(str::to_string)
        .collect()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The lines of a successful run.
fn lines(args: &[&str]) -> Vec<String> {
    let out = run(args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    stdout_lines(&out)
}

/// The JSON objects of a successful `--json` run.
fn json(args: &[&str]) -> Vec<Value> {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    lines(&all)
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// A file in cargo's per-test scratch directory.
fn scratch(name: &str, bytes: &[u8]) -> PathBuf {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::write(&path, bytes).expect("scratch file");
    path
}

// ---------------------------------------------------------------------------
// Text output.

#[test]
fn text_mode_prints_the_linux_data_frame_exactly() {
    let lines = lines(&[&data("sample.pcap")]);
    assert_eq!(
        lines[58],
        "59 0.005064000 DATA        10.0.0.1:32768 > 10.0.0.2:500 id 1234 off 1424 \
         len 1424/100000 incoming 40000 prio 5"
    );
}

#[test]
fn the_type_is_the_third_word_of_every_line() {
    let lines = lines(&[&data("sample.pcap")]);
    for (kind, rest) in [
        ("ARP", "request who-has 10.0.0.2 tell 10.0.0.1"),
        ("ARP", "reply 10.0.0.2 is-at 02:00:00:00:00:02"),
        (
            "ICMPv4",
            "10.0.0.2 > 10.0.0.1 echo request id 16962 seq 1 len 16",
        ),
        (
            "DATA",
            "10.0.0.1:32768 > 10.0.0.2:500 id 11754567417873563662 off 0 len 100/100 incoming 100 prio 6",
        ),
        ("GRANT", "10.0.0.2:500 > 10.0.0.1:32768 id 11754567417873694735 offset 50000"),
        ("CUTOFFS", "10.0.0.2:500 > 10.0.0.1:32768 id 11754567417873563663 cutoffs"),
        ("NEED_ACK", "10.0.0.2:500 > 10.0.0.1:32768 id 11754567417873694735 prio 7"),
        (
            "ACK",
            "10.0.0.1:32768 > 10.0.0.2:500 id 11754567417873694734 acks [11754567417873694734:500] prio 7",
        ),
        (
            "RESEND",
            "10.0.0.2:500 > 10.0.0.1:32768 id 1235 off 1424 len 2848 retx-prio 6",
        ),
        ("BUSY", "10.0.0.2:500 > 10.0.0.1:32768 id 1235 prio 7"),
        ("RPC_UNKNOWN", "10.0.0.2:500 > 10.0.0.1:32768 id 77 prio 7"),
        ("FREEZE", "10.0.0.2:500 > 10.0.0.1:32768 id 1235 prio 7"),
    ] {
        let line = format!("{kind:<11} {rest}");
        assert!(lines.iter().any(|l| l.contains(&line)), "missing {line:?}");
    }
    for l in &lines {
        let kind = l.split_whitespace().nth(2).unwrap();
        // The type starts at the same place after the number and time.
        let at = l.find(kind).unwrap();
        assert_eq!(l[at + 11..].chars().next(), Some(' '), "{l}");
    }
}

#[test]
fn link_addresses_only_with_e() {
    let plain = lines(&[&data("sample.pcap")]);
    assert!(!plain[2].contains("02:00:00:00:00:01"));
    let with = lines(&["-e", &data("sample.pcap")]);
    assert!(with[2].ends_with(", link 02:00:00:00:00:01 > 02:00:00:00:00:02"));
    let sll2 = lines(&["-e", &data("link-sll2.pcap")]);
    assert!(sll2[2].ends_with(", link cooked v2 Out 02:00:00:00:00:01 ifindex 2"));
    let vlan = lines(&["-e", &data("every-type.pcapng")]);
    assert!(vlan[30].ends_with("02:00:00:00:00:02 > 02:00:00:00:00:01 vlan 7"));
}

#[test]
fn timestamp_modes_and_count() {
    let time = |mode: &str| -> Vec<String> {
        lines(&["-t", mode, "-c", "3", &data("loss.pcap")])
            .iter()
            .map(|l| l.split_whitespace().nth(1).unwrap().to_string())
            .collect()
    };
    let abs = time("absolute");
    assert_eq!(abs.len(), 3);
    let ns = |s: &str| -> i64 {
        let (a, b) = s.split_once('.').unwrap();
        a.parse::<i64>().unwrap() * 1_000_000_000 + b.parse::<i64>().unwrap()
    };
    let rel = time("relative");
    let delta = time("delta");
    assert_eq!(rel[0], "0.000000000");
    assert_eq!(delta[0], "0.000000000");
    for i in 0..3 {
        assert_eq!(ns(&rel[i]), ns(&abs[i]) - ns(&abs[0]));
    }
    for i in 1..3 {
        assert_eq!(ns(&delta[i]), ns(&abs[i]) - ns(&abs[i - 1]));
    }
    // No time column: the type is the second word.
    let none = lines(&["-t", "none", "-c", "1", &data("sample.pcap")]);
    assert!(none[0].starts_with("1 ARP "), "{}", none[0]);
    assert_eq!(lines(&["-c", "5", &data("sample.pcap")]).len(), 5);
}

#[test]
fn verbose_shows_every_field_and_the_checksums() {
    let v = lines(&["-v", "-c", "3", &data("every-type.pcapng")]).join("\n");
    for needle in [
        "ip: v4 10.0.0.1 > 10.0.0.2 proto 146 tos 0xa0 (prio 5) ttl 64 len 1456 id 0 header checksum",
        "homa: sport 32768 dport 500 sequence 0 type 0x10 doff 14 flags 0x06 window 0 urgent 0xb97d sender_id 100",
        "checksum: 0x",
        "seg_offset 4294967295 (offset in sequence) offset 0 payload 1400 bytes (1400 captured)",
        "checksum: 0x0000 not filled",
        "partial: only the pseudo-header sum",
        "ack_client_id 98 ack_server_port 500 cutoff_version 3 retransmit 1",
    ] {
        assert!(v.contains(needle), "missing {needle:?} in\n{v}");
    }
}

// ---------------------------------------------------------------------------
// JSON.

#[test]
fn json_grant_has_the_protocol_field_names() {
    let frames = json(&[&data("sample.pcap")]);
    let g = &frames[20];
    assert_eq!(g["frame"], 21);
    assert_eq!(g["time"].as_f64(), Some(0.003012));
    assert_eq!(g["ip"]["priority"], 7);
    assert_eq!(g["ip"]["checksum_ok"], true);
    let h = &g["homa"];
    assert_eq!(h["type"], "GRANT");
    assert_eq!(h["sender_id"], 11_754_567_417_873_694_735u64);
    assert_eq!(h["offset"], 50000);
    assert_eq!(h["priority"], 0);
    assert_eq!(h["doff"], 5);
    assert_eq!(h["checksum"], 20423);
    assert_eq!(h["checksum_status"], "ok");
}

#[test]
fn json_keeps_the_capture_decimals() {
    let out = lines(&["--json", "-c", "1", &data("every-type.pcapng")]);
    assert!(
        out[0].starts_with(r#"{"frame":1,"time":1700000000.000000000,"caplen":1490,"len":1490,"#),
        "{}",
        out[0]
    );
}

#[test]
fn json_data_with_the_sentinel_shows_effective_and_raw_offsets() {
    let frames = json(&[&data("sample.pcap")]);
    let h = &frames[58]["homa"];
    assert_eq!(h["sequence"], 1424);
    assert_eq!(h["offset"], 1424);
    assert_eq!(h["seg_offset"], 4294967295u32);
    assert_eq!(h["flags"], 6);
    assert_eq!(h["urgent"], 47485);
    assert_eq!(h["message_length"], 100000);
    assert_eq!(h["incoming"], 40000);
    assert_eq!(h["payload_len"], 1424);
}

#[test]
fn json_resend_priority_is_null_for_the_36_byte_form_and_acks_are_clamped() {
    let frames = json(&[&data("every-type.pcapng")]);
    assert_eq!(frames[4]["homa"]["priority"], 6);
    assert_eq!(frames[4]["homa"]["wire_len"], 37);
    assert_eq!(frames[5]["homa"]["wire_len"], 36);
    assert_eq!(frames[5]["homa"]["priority"], Value::Null);
    assert_eq!(frames[6]["homa"]["length"], u32::MAX);
    let ack = &frames[12]["homa"];
    assert_eq!(ack["num_acks"], 7);
    assert_eq!(ack["acks"].as_array().unwrap().len(), 5);
    assert_eq!(frames[13]["homa"]["acks"][1]["server_port"], 501);
    let cutoffs = &frames[9]["homa"];
    assert_eq!(cutoffs["unsched_cutoffs"][4], 1000000);
    assert_eq!(cutoffs["cutoff_version"], 3);
}

#[test]
fn json_arp_and_icmp_objects() {
    let frames = json(&[&data("sample.pcap")]);
    assert_eq!(frames[0]["arp"]["operation"], 1);
    assert_eq!(frames[0]["arp"]["target_ip"], "10.0.0.2");
    assert_eq!(frames[10]["icmp"]["name"], "echo request");
    assert_eq!(frames[10]["icmp"]["checksum_ok"], true);
}

// ---------------------------------------------------------------------------
// Checksums.

#[test]
fn both_checksums_are_verified_and_reported() {
    let frames = json(&[&data("every-type.pcapng")]);
    let status = |i: usize| frames[i]["homa"]["checksum_status"].as_str().unwrap();
    assert_eq!(status(0), "ok");
    assert_eq!(status(1), "zero");
    assert_eq!(status(2), "partial");
    assert_eq!(status(6), "bad");
    // IPv6 too (its pseudo-header).
    assert_eq!(status(15), "ok");
    assert_eq!(status(17), "partial");
    assert_eq!(status(21), "bad");
    let bad = &frames[6]["homa"];
    assert_eq!(
        bad["checksum_expected"].as_u64().unwrap() ^ bad["checksum"].as_u64().unwrap(),
        0x0100
    );
    assert!(frames.iter().all(|f| f["ip"]["checksum_ok"] != false));

    // A damaged IPv4 header checksum.
    let mut frame = busy_frame();
    frame[14 + 10] ^= 0xff;
    let path = scratch("bad-ip-sum.pcap", &pcap(false, false, 1, &[(1, 0, &frame)]));
    let f = &json(&[path.to_str().unwrap()])[0];
    assert_eq!(f["ip"]["checksum_ok"], false);
    assert!(lines(&[path.to_str().unwrap()])[0].ends_with("[bad IPv4 header checksum]"));
}

// ---------------------------------------------------------------------------
// Link types, formats, standard input.

#[test]
fn every_link_type_decodes_the_same_homa_packets() {
    let eth = json(&[&data("every-type.pcapng")]);
    // The link captures hold frames 15, 4 and 14 over IPv4, then over IPv6.
    let v4: Vec<&Value> = [14, 3, 13].iter().map(|&i| &eth[i]["homa"]).collect();
    let v6: Vec<&Value> = [29, 18, 28].iter().map(|&i| &eth[i]["homa"]).collect();
    let both: Vec<&Value> = v4.iter().chain(v6.iter()).copied().collect();
    for (file, link, want) in [
        ("link-sll.pcap", "sll", &both),
        ("link-sll2.pcap", "sll2", &both),
        ("link-raw.pcap", "raw", &both),
        ("link-ipv4.pcap", "raw", &v4),
        ("link-ipv6.pcap", "raw", &v6),
    ] {
        let frames = json(&[&data(file)]);
        let homa: Vec<&Value> = frames.iter().map(|f| &f["homa"]).collect();
        assert_eq!(&homa, want, "{file}");
        assert!(frames.iter().all(|f| f["link"]["type"] == link), "{file}");
    }
}

#[test]
fn stdin_is_read_for_dash() {
    let mut child = Command::new(DUMP)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let sample = std::fs::read(data("sample.pcap")).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // In pieces, as a pipe from tcpdump delivers it.
    let writer = std::thread::spawn(move || {
        for piece in sample.chunks(7) {
            stdin.write_all(piece).unwrap();
        }
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(out.status.success());
    assert_eq!(stdout_lines(&out), lines(&[&data("sample.pcap")]));
}

// Frames and capture files built here.

const A_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
const B_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);

fn busy_frame() -> Vec<u8> {
    let repr = homa::Repr {
        sport: 500,
        dport: 32768,
        sender_id: 9,
        kind: Kind::Busy,
    };
    let (b, a) = (Ipv4Addr::new(10, 0, 0, 2), Ipv4Addr::new(10, 0, 0, 1));
    let ip = frames::ipv4(b, a, IpProtocol::Homa, 0x60, &frames::homa(&repr));
    frames::ethernet(B_MAC, A_MAC, None, EtherType::Ipv4, &ip)
}

const BUSY_TEXT: &str = "BUSY        10.0.0.2:500 > 10.0.0.1:32768 id 9 prio 3";

/// Writes pcapng blocks in one byte order.
struct Pcapng {
    big: bool,
    bytes: Vec<u8>,
}

impl Pcapng {
    fn u16(&self, v: u16) -> [u8; 2] {
        if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }
    fn u32(&self, v: u32) -> [u8; 4] {
        if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }
    fn block(&mut self, block_type: u32, body: &[u8]) {
        let mut body = body.to_vec();
        while !body.len().is_multiple_of(4) {
            body.push(0);
        }
        let total = (body.len() + 12) as u32;
        let (t, l) = (self.u32(block_type), self.u32(total));
        self.bytes.extend_from_slice(&t);
        self.bytes.extend_from_slice(&l);
        self.bytes.extend_from_slice(&body);
        self.bytes.extend_from_slice(&l);
    }
    fn shb(&mut self) {
        let mut body = Vec::new();
        body.extend_from_slice(&self.u32(0x1a2b_3c4d));
        body.extend_from_slice(&self.u16(1));
        body.extend_from_slice(&self.u16(0));
        body.extend_from_slice(&u64::MAX.to_le_bytes()); // section length unknown
        self.block(0x0a0d_0d0a, &body);
    }
    /// An interface; `tsresol` adds an if_name and an if_tsresol option.
    fn idb(&mut self, link_type: u16, tsresol: Option<u8>) {
        let mut body = Vec::new();
        body.extend_from_slice(&self.u16(link_type));
        body.extend_from_slice(&self.u16(0));
        body.extend_from_slice(&self.u32(0)); // no snap length
        if let Some(res) = tsresol {
            body.extend_from_slice(&self.u16(2)); // if_name
            body.extend_from_slice(&self.u16(3));
            body.extend_from_slice(b"lo\0\0");
            body.extend_from_slice(&self.u16(9)); // if_tsresol
            body.extend_from_slice(&self.u16(1));
            body.extend_from_slice(&[res, 0, 0, 0]);
            body.extend_from_slice(&[0, 0, 0, 0]); // opt_endofopt
        }
        self.block(1, &body);
    }
    fn epb(&mut self, iface: u32, ts: u64, frame: &[u8]) {
        let mut body = Vec::new();
        body.extend_from_slice(&self.u32(iface));
        body.extend_from_slice(&self.u32((ts >> 32) as u32));
        body.extend_from_slice(&self.u32(ts as u32));
        body.extend_from_slice(&self.u32(frame.len() as u32));
        body.extend_from_slice(&self.u32(frame.len() as u32));
        body.extend_from_slice(frame);
        self.block(6, &body);
    }
    fn spb(&mut self, frame: &[u8]) {
        let mut body = self.u32(frame.len() as u32).to_vec();
        body.extend_from_slice(frame);
        self.block(3, &body);
    }
}

/// Two sections of both byte orders, several interfaces, unknown blocks.
fn two_section_pcapng() -> Vec<u8> {
    let mut le = Pcapng {
        big: false,
        bytes: Vec::new(),
    };
    le.shb();
    le.idb(1, Some(9)); // nanoseconds
    le.block(0x0000_0bad, b"custom"); // skipped
    le.epb(0, 3_000_000_042, &busy_frame());
    le.spb(&busy_frame());
    le.idb(105, None); // 802.11: not read
    le.epb(1, 5_000_000, &busy_frame());
    let mut be = Pcapng {
        big: true,
        bytes: le.bytes,
    };
    be.shb();
    be.idb(1, None); // default microseconds
    be.epb(0, 7_000_001, &busy_frame());
    be.bytes
}

#[test]
fn pcapng_sections_of_both_byte_orders_with_tsresol_and_unknown_blocks() {
    let path = scratch("sections.pcapng", &two_section_pcapng());
    assert_eq!(
        lines(&[path.to_str().unwrap()]),
        [
            format!("1 3.000000042 {BUSY_TEXT}"),
            format!("2 - {BUSY_TEXT}"),
            "3 5.000000 -           [link type 105 is not supported]".to_string(),
            format!("4 7.000001 {BUSY_TEXT}"),
        ]
    );
    let frames = json(&[path.to_str().unwrap()]);
    assert_eq!(frames[1]["time"], Value::Null);
    assert_eq!(frames[2]["error"], "link type 105 is not supported");
    assert!(frames[2].get("note").is_none());
}

/// A classic pcap in the given byte order and resolution.
fn pcap(big: bool, nanos: bool, link_type: u32, frames: &[(u32, u32, &[u8])]) -> Vec<u8> {
    let u16b = |v: u16| {
        if big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let u32b = |v: u32| {
        if big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let mut out = Vec::new();
    out.extend_from_slice(&u32b(if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 }));
    out.extend_from_slice(&u16b(2));
    out.extend_from_slice(&u16b(4));
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&u32b(65535));
    out.extend_from_slice(&u32b(link_type));
    for &(secs, frac, frame) in frames {
        out.extend_from_slice(&u32b(secs));
        out.extend_from_slice(&u32b(frac));
        out.extend_from_slice(&u32b(frame.len() as u32));
        out.extend_from_slice(&u32b(frame.len() as u32));
        out.extend_from_slice(frame);
    }
    out
}

#[test]
fn pcap_in_both_byte_orders_and_resolutions() {
    let busy = busy_frame();
    for big in [false, true] {
        for nanos in [false, true] {
            let bytes = pcap(
                big,
                nanos,
                1,
                &[(1, 2, &busy), (1_700_000_000, 999_999, &busy)],
            );
            let path = scratch(&format!("pcap-{big}-{nanos}.pcap"), &bytes);
            let want = if nanos {
                ["1.000000002", "1700000000.000999999"]
            } else {
                ["1.000002", "1700000000.999999"]
            };
            assert_eq!(
                lines(&[path.to_str().unwrap()]),
                [
                    format!("1 {} {BUSY_TEXT}", want[0]),
                    format!("2 {} {BUSY_TEXT}", want[1]),
                ]
            );
        }
    }
}

// ---------------------------------------------------------------------------
// Damaged files.

/// Where each record (pcapng: block) of `bytes` starts and ends, and whether
/// it holds a frame. The first "record" of a pcap is its 24-byte header.
fn records(bytes: &[u8]) -> Vec<(usize, usize, bool)> {
    let le32 = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    let mut out = Vec::new();
    if bytes[..4] == [0x0a, 0x0d, 0x0d, 0x0a] {
        let mut at = 0;
        while at < bytes.len() {
            let len = le32(at + 4);
            let kind = le32(at);
            out.push((at, at + len, kind == 6 || kind == 3));
            at += len;
        }
    } else {
        out.push((0, 24, false));
        let mut at = 24;
        while at < bytes.len() {
            let len = 16 + le32(at + 8);
            out.push((at, at + len, true));
            at += len;
        }
    }
    out
}

/// Checks every cut of `bytes`: at a record boundary a shorter, valid
/// capture; inside the file header "not a capture"; inside a record an
/// error naming the frame and the record's offset, after printing every
/// frame before it, and exit status 1.
fn every_truncation(name: &str, bytes: &[u8]) {
    let full = lines(&[scratch(name, bytes).to_str().unwrap()]);
    let recs = records(bytes);
    let header_end = recs[0].1;
    for cut in 0..bytes.len() {
        let path = scratch(name, &bytes[..cut]);
        let out = run(&[path.to_str().unwrap()]);
        let err = stderr(&out);
        let done = recs.iter().filter(|r| r.1 <= cut).count();
        let frames = recs[..done].iter().filter(|r| r.2).count();
        let got = stdout_lines(&out);
        assert_eq!(got[..], full[..frames], "{name} cut at {cut}");
        if cut < header_end {
            assert_eq!(out.status.code(), Some(1), "{name} cut at {cut}");
            assert!(err.starts_with("homa-dump: "), "{name} cut at {cut}: {err}");
        } else if recs.iter().any(|r| r.1 == cut) {
            assert!(out.status.success(), "{name} cut at {cut}: {err}");
        } else {
            assert_eq!(out.status.code(), Some(1), "{name} cut at {cut}");
            let rec = recs.iter().find(|r| r.0 < cut && cut < r.1).unwrap();
            let want = format!(
                "truncated capture: the file ends inside the record of frame {} \
                 (record at byte offset {})",
                frames + 1,
                rec.0
            );
            assert!(err.contains(&want), "{name} cut at {cut}: {err}");
        }
    }
}

#[test]
fn every_truncation_of_a_pcap_is_a_clean_error() {
    every_truncation("cut.pcap", &std::fs::read(data("link-ipv4.pcap")).unwrap());
}

#[test]
fn every_truncation_of_a_pcapng_is_a_clean_error() {
    // Little-endian only: `records` reads lengths in that order.
    let mut le = Pcapng {
        big: false,
        bytes: Vec::new(),
    };
    le.shb();
    le.idb(1, Some(9));
    le.block(0x0000_0bad, b"custom");
    le.epb(0, 1, &busy_frame());
    le.spb(&busy_frame());
    every_truncation("cut.pcapng", &le.bytes);
}

#[test]
fn corrupt_records_exit_1_after_the_frames_before_them() {
    let busy = busy_frame();
    // A pcapng block whose trailing length disagrees.
    let mut le = Pcapng {
        big: false,
        bytes: Vec::new(),
    };
    le.shb();
    le.idb(1, None);
    le.epb(0, 1, &busy);
    let at = le.bytes.len();
    le.epb(0, 2, &busy);
    let end = le.bytes.len();
    le.bytes[end - 4] ^= 0x40;
    let path = scratch("bad-trailer.pcapng", &le.bytes);
    let out = run(&[path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout_lines(&out), [format!("1 0.000001 {BUSY_TEXT}")]);
    let err = stderr(&out);
    assert!(
        err.contains("corrupt capture: ") && err.contains(&format!("byte offset {at} (frame 2)")),
        "{err}"
    );

    // A pcap record claiming 4 GiB.
    let mut bytes = pcap(false, false, 1, &[(1, 0, &busy), (2, 0, &busy)]);
    let second = 24 + 16 + busy.len();
    bytes[second + 8..second + 12].copy_from_slice(&u32::MAX.to_le_bytes());
    let path = scratch("huge.pcap", &bytes);
    let out = run(&[path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout_lines(&out), [format!("1 1.000000 {BUSY_TEXT}")]);
    assert!(
        stderr(&out).contains(&format!("byte offset {second}")),
        "{}",
        stderr(&out)
    );
}

#[test]
fn bad_file_header_exits_1() {
    for (name, bytes) in [
        ("garbage.pcap", &b"this is not a capture at all"[..]),
        ("empty.pcap", &b""[..]),
        ("short.pcap", &[0xd4, 0xc3, 0xb2, 0xa1, 2, 0][..]),
        (
            "bad-shb.pcapng",
            &[0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0, 1, 2, 3, 4][..],
        ),
    ] {
        let path = scratch(name, bytes);
        let out = run(&[path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{name}");
        assert!(out.stdout.is_empty());
        assert!(stderr(&out).starts_with("homa-dump: "), "{name}");
    }
    let out = run(&["/nonexistent/capture.pcap"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn usage_errors_exit_2_and_help_exits_0() {
    let sample = data("sample.pcap");
    let sample = sample.as_str();
    for args in [
        &[][..],
        &["--jason", sample][..],
        &[sample, sample][..],
        &["--type", "DATUM", sample][..],
        &["--rpcs", "--stats", sample][..],
        // As tcpdump: a count of 0 is refused, not a run that shows nothing.
        &["-c", "0", sample][..],
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).starts_with("error: "), "{args:?}");
    }
    let out = run(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .contains("Usage: homa-dump"));
}

// ---------------------------------------------------------------------------
// Malformed IP.

/// `frame` (Ethernet + IPv4) with its IPv4 header changed by `edit` and
/// the header checksum filled again.
fn edit_ipv4(mut frame: Vec<u8>, edit: impl FnOnce(&mut Ipv4Packet<&mut [u8]>)) -> Vec<u8> {
    let mut ip = Ipv4Packet::new_unchecked(&mut frame[14..]);
    edit(&mut ip);
    ip.fill_checksum();
    frame
}

/// A frame captured whole (captured length = original length) that is
/// shorter than its IPv4 total length is malformed: no snap length cut it.
#[test]
fn a_whole_frame_shorter_than_its_ipv4_length_is_malformed() {
    let short = edit_ipv4(busy_frame(), |ip| {
        let len = ip.total_len();
        ip.set_total_len(len + 352);
    });
    let path = scratch("short-ipv4.pcap", &pcap(false, false, 1, &[(1, 0, &short)]));
    let path = path.to_str().unwrap();
    let j = &json(&[path])[0];
    let error = j["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with(
            "malformed IPv4: the header announces 380 payload bytes, the frame holds 28"
        ),
        "{j}"
    );
    assert!(j["homa"].is_null() && j["note"].is_null(), "{j}");
    let text = &lines(&[path])[0];
    assert!(!text.contains("captured"), "{text}");
    assert!(text.contains("[malformed IPv4: "), "{text}");
}

/// An IPv4 fragment of protocol 146 is an error that says what it is, at
/// any offset; a fragment of another protocol is only a note.
#[test]
fn an_ipv4_fragment_of_homa_is_an_error_that_says_so() {
    let first = edit_ipv4(busy_frame(), |ip| ip.set_more_frags(true));
    let later = edit_ipv4(busy_frame(), |ip| ip.set_frag_offset(1480));
    let udp = edit_ipv4(busy_frame(), |ip| {
        ip.set_more_frags(true);
        ip.set_next_header(IpProtocol::Udp);
    });
    let frames = [(1, 0, &first[..]), (1, 1, &later[..]), (1, 2, &udp[..])];
    let path = scratch("fragments.pcap", &pcap(false, false, 1, &frames));
    let j = json(&[path.to_str().unwrap()]);
    for (f, offset) in [(&j[0], "offset 0, more fragments"), (&j[1], "offset 1480")] {
        let error = f["error"].as_str().unwrap_or_default();
        assert_eq!(
            error,
            format!(
                "IPv4 fragment ({offset}) of protocol 146 (HOMA): Homa never sends IP fragments"
            ),
            "{f}"
        );
        assert!(f["homa"].is_null() && f["note"].is_null(), "{f}");
    }
    assert_eq!(
        j[2]["note"], "IPv4 fragment (offset 0, more fragments)",
        "{}",
        j[2]
    );
    assert!(j[2]["error"].is_null());
}

// ---------------------------------------------------------------------------
// Snap length.

#[test]
fn a_snap_length_capture_decodes_every_header_and_marks_the_payload() {
    let full = json(&[&data("every-type.pcapng")]);
    let cut = json(&[&data("snaplen.pcap")]);
    assert_eq!(full.len(), cut.len());
    let cut_text = lines(&[&data("snaplen.pcap")]);
    let mut truncated = 0;
    let mut cut_headers = 0;
    for (f, c) in full.iter().zip(&cut) {
        assert_eq!(f["ip"], c["ip"], "frame {}", f["frame"]);
        if f["homa"].is_null() {
            assert_eq!(f["note"], c["note"]);
            continue;
        }
        let (mut fh, mut ch) = (f["homa"].clone(), c["homa"].clone());
        let text = &cut_text[c["frame"].as_u64().unwrap() as usize - 1];
        if text.contains("[header truncated") {
            // An IPv6 ACK: 134 bytes, its header cut at 74 of 80 bytes. The
            // common header, num_acks and the whole entries (at most four) are there.
            cut_headers += 1;
            assert!(text.contains("[header truncated: 74 of 80 header bytes captured] prio 7"));
            for (k, v) in ch.as_object().unwrap() {
                match k.as_str() {
                    "truncated" | "checksum_status" | "captured_len" => {}
                    "acks" => {
                        let (got, all) = (v.as_array().unwrap(), fh[k].as_array().unwrap());
                        assert_eq!(got.len(), all.len().min(4));
                        assert_eq!(got[..], all[..got.len()]);
                    }
                    k => assert_eq!(&fh[k], v, "frame {} {k}", f["frame"]),
                }
            }
            continue;
        }
        if c["len"].as_u64() > c["caplen"].as_u64() {
            truncated += 1;
            assert_eq!(ch["truncated"], true);
            assert_eq!(ch["checksum_status"], "unverified");
            assert!(ch["captured_len"].as_u64() < ch["wire_len"].as_u64());
            assert_eq!(ch["payload_len"], fh["payload_len"]);
            for k in [
                "truncated",
                "checksum_status",
                "captured_len",
                "captured_payload_len",
            ] {
                fh.as_object_mut().unwrap().remove(k);
                ch.as_object_mut().unwrap().remove(k);
            }
            fh.as_object_mut().unwrap().remove("checksum_expected");
        }
        assert_eq!(fh, ch, "frame {}", f["frame"]);
    }
    // The DATA packets over 128 bytes: 3 + 1 per family, the hijacked one and
    // the last one.
    assert_eq!(truncated, 10);
    assert_eq!(cut_headers, 2);
    let text = lines(&[&data("snaplen.pcap")]);
    assert!(text[0].ends_with("prio 5 [truncated: 94 of 1456 bytes captured]"));
}

// ---------------------------------------------------------------------------
// Filters.

fn frame_numbers(args: &[&str]) -> Vec<u64> {
    json(args)
        .iter()
        .map(|f| f["frame"].as_u64().unwrap())
        .collect()
}

#[test]
fn filters_by_type_host_port_and_rpc_combine() {
    let every = data("every-type.pcapng");
    assert_eq!(
        frame_numbers(&["--type", "grant,BUSY", &every]),
        [4, 9, 19, 24, 31, 36]
    );
    assert_eq!(
        frame_numbers(&["--type", "RESEND", "--type", "CUTOFFS", &every]),
        [5, 6, 7, 10, 20, 21, 22, 25]
    );
    // fd00::2 is in every IPv6 frame.
    assert_eq!(
        frame_numbers(&["--host", "fd00::2", &every]),
        (16..=30).chain([36]).collect::<Vec<_>>()
    );
    assert_eq!(frame_numbers(&["--port", "501", &every]), Vec::<u64>::new());
    assert_eq!(frame_numbers(&["--port", "500", &every]).len(), 34);
    // RPC 100 (client) and 101 (server), either id given.
    let rpc: Vec<u64> = [
        1, 2, 3, 4, 5, 6, 9, 11, 12, 15, 16, 17, 18, 19, 20, 21, 24, 26, 27, 30, 31, 32, 36,
    ]
    .to_vec();
    assert_eq!(frame_numbers(&["--rpc", "100", &every]), rpc);
    assert_eq!(frame_numbers(&["--rpc", "101", &every]), rpc);
    // Combined: RPC 100's GRANTs over IPv6.
    assert_eq!(
        frame_numbers(&["--rpc", "101", "--type", "GRANT", "--host", "fd00::1", &every]),
        [19]
    );
    // A filter with -c counts the frames shown.
    assert_eq!(
        frame_numbers(&["--type", "DATA", "-c", "2", &every]),
        [1, 2]
    );
    // ARP passes a host filter naming it, not a Homa filter.
    let sample = data("sample.pcap");
    assert_eq!(
        frame_numbers(&["--host", "10.0.0.2", "-c", "2", &sample]),
        [1, 2]
    );
    assert!(!frame_numbers(&["--type", "DATA", &sample]).contains(&1));
}

// ---------------------------------------------------------------------------
// RPC view and statistics.

#[test]
fn rpc_view_of_known_rpcs_with_losses() {
    // Six echo RPCs (response = request), every one verified by loopback,
    // through 8% loss: one DATA packet was retransmitted.
    let rpcs = json(&["--rpcs", &data("loss.pcap")]);
    assert_eq!(rpcs.len(), 6);
    let mut retx = 0;
    let mut resends = 0;
    for r in &rpcs {
        assert_eq!(r["client"], "10.0.0.1:32768");
        assert_eq!(r["server"], "10.0.0.2:500");
        assert_eq!(r["id"].as_u64().unwrap() % 2, 0);
        let len = r["request_length"].as_u64().unwrap();
        assert!((1..=6000).contains(&len));
        assert_eq!(r["response_length"], r["request_length"], "{r}");
        assert!(r["request_bytes"].as_u64().unwrap() >= len);
        assert!(r["response_bytes"].as_u64().unwrap() >= len);
        assert_eq!(r["completed"], true, "{r}");
        assert_eq!(r["acked"], true, "{r}");
        assert!(r["duration_us"].as_f64().unwrap() > 0.0);
        retx += r["retransmitted_bytes"].as_u64().unwrap();
        resends += r["resends"].as_u64().unwrap();
    }
    assert!(retx > 0 && resends > 0, "the capture shows no recovery");
    // The RPC that lost its response's first packet: one RESEND for it,
    // and that packet sent again.
    let lossy = rpcs.iter().find(|r| r["resends"] == 1).unwrap();
    assert_eq!(lossy["response_length"], 1830);
    assert_eq!(lossy["response_packets"], 2);
    assert_eq!(lossy["retransmitted_bytes"], 1424);
    let text = lines(&["--rpcs", &data("loss.pcap")]);
    assert_eq!(text.len(), 6);
    assert!(
        text.iter().all(|l| l.ends_with("completed acked")),
        "{text:?}"
    );
    assert!(text.contains(
        &"rpc 13449639951778709520 10.0.0.1:32768 > 10.0.0.2:500 start 0.000005600 dur 1998.8 us \
          req 1830 B: 2 DATA 1830 B resp 1830 B: 2 DATA 1830 B retx 1424 B grants 0 resends 1 \
          busy 0 completed acked"
            .to_string()
    ));
}

#[test]
fn rpc_view_counts_every_kind_of_packet() {
    let rpcs = json(&["--rpcs", &data("every-type.pcapng")]);
    let r = &rpcs[0];
    assert_eq!(r["id"], 100);
    assert_eq!(r["request_length"], 4000);
    assert_eq!(r["response_length"], 4000);
    // Three DATA and the hijacked copy of the first.
    assert_eq!(r["request_packets"], 4);
    assert_eq!(r["request_bytes"], 5400);
    // 1200 flagged as retransmitted, 1400 sent again as TCP.
    assert_eq!(r["retransmitted_bytes"], 2600);
    assert_eq!(r["response_bytes"], 600);
    assert_eq!(r["grants"], 1);
    assert_eq!(r["resends"], 2);
    assert_eq!(r["busy"], 2);
    assert_eq!(r["completed"], false);
    assert_eq!(r["acked"], false);
    // RPC 102 is acked only by the ack piggy-backed on RPC 104's DATA;
    // RPC 10 by its own ACK; the CUTOFFS' "RPC" 0 not at all.
    let by_id = |id: u64| rpcs.iter().find(|r| r["id"] == id).unwrap();
    assert_eq!(by_id(102)["acked"], true);
    assert_eq!(by_id(10)["acked"], true);
    assert_eq!(by_id(0)["acked"], false);
}

#[test]
fn stats_count_types_priorities_and_incomplete_rpcs() {
    let s = &json(&["--stats", &data("every-type.pcapng")])[0];
    assert_eq!(s["frames"], 36);
    assert_eq!(s["homa_packets"], 34);
    assert_eq!(s["types"]["DATA"]["packets"], 10);
    assert_eq!(s["types"]["RESEND"]["packets"], 6);
    assert_eq!(s["types"]["RESEND"]["bytes"], 2 * (37 + 36 + 37));
    assert_eq!(s["types"]["ACK"]["bytes"], 4 * 80);
    assert_eq!(s["priorities"]["7"], 24);
    assert_eq!(s["bad_checksums"], 2);
    assert_eq!(s["rpcs"], 11);
    assert_eq!(s["incomplete"].as_array().unwrap().len(), 11);
    let loss = &json(&["--stats", &data("loss.pcap")])[0];
    assert_eq!(loss["rpcs"], 6);
    assert_eq!(loss["completed"], 6);
    let text = lines(&["--stats", &data("loss.pcap")]);
    assert!(
        text.contains(&"rpcs 6 completed 6 incomplete 0".to_string()),
        "{text:?}"
    );
}

// ---------------------------------------------------------------------------
// The committed captures are reproducible.

#[test]
fn the_sample_capture_holds_every_promised_packet_type() {
    // The capture is what make-sample-capture writes (testkit's tests).
    let text = lines(&[&data("sample.pcap")]).join("\n");
    for kind in [
        "ARP ",
        "ICMPv4 ",
        "DATA ",
        "GRANT ",
        "CUTOFFS ",
        "NEED_ACK ",
        "ACK ",
        "RESEND ",
        "BUSY ",
        "RPC_UNKNOWN ",
        "FREEZE ",
        "[header truncated: 26 of 1480 bytes captured]",
    ] {
        assert!(text.contains(kind), "sample.pcap lacks {kind:?}");
    }
}

// ---------------------------------------------------------------------------
// Robustness.

#[test]
fn decoding_any_prefix_or_damage_of_the_frames_does_not_panic() {
    use homa_tools::dump::reader::{Reader, Record};
    use homa_tools::dump::{decode, json as dump_json, print};
    let file = std::fs::File::open(data("every-type.pcapng")).unwrap();
    let mut reader = Reader::open(file).unwrap();
    let mut frames = Vec::new();
    while let Some(r) = reader.next_record().unwrap() {
        frames.push(r);
    }
    let mut decoded = 0u64;
    for (link_type, strip) in [(1, 0), (101, 14), (113, 0), (276, 0), (228, 14), (229, 14)] {
        for r in &frames {
            let body = &r.data[strip.min(r.data.len())..];
            let mut variants: Vec<Vec<u8>> = (0..=body.len().min(140))
                .map(|cut| body[..cut].to_vec())
                .collect();
            for at in 0..body.len().min(90) {
                let mut v = body.to_vec();
                v[at] ^= 0xa5;
                variants.push(v);
            }
            for v in variants {
                let record = Record {
                    time: None,
                    link_type,
                    orig_len: body.len(),
                    data: v,
                    offset: 0,
                };
                let d = decode::decode(&record);
                let _ = print::text(1, None, &record, &d, true, true);
                let _ = serde_json::to_string(&dump_json::frame_json(1, &record, &d)).unwrap();
                decoded += 1;
            }
        }
    }
    assert!(decoded > 10_000, "{decoded}");
}

#[test]
fn every_truncation_of_the_committed_pcapng_in_process() {
    use homa_tools::dump::reader::{ReadError, Reader};
    let bytes = std::fs::read(data("every-type.pcapng")).unwrap();
    let recs = records(&bytes);
    for cut in 0..bytes.len() {
        let prefix = std::io::Cursor::new(bytes[..cut].to_vec());
        let done = recs.iter().filter(|r| r.1 <= cut).count();
        let frames = recs[..done].iter().filter(|r| r.2).count() as u64;
        // A small first buffer (quicker to set up, and it must grow for
        // the 1.5 KB frames).
        let mut reader = match Reader::with_buffer(prefix, 1024) {
            Ok(r) => r,
            Err(ReadError::NotACapture(_)) if cut < recs[0].1 => continue,
            Err(e) => panic!("cut at {cut}: {e}"),
        };
        assert!(cut >= recs[0].1, "cut at {cut} opened");
        let end = loop {
            match reader.next_record() {
                Ok(Some(_)) => {}
                Ok(None) => break None,
                Err(e) => break Some(e),
            }
        };
        assert_eq!(reader.frames(), frames, "cut at {cut}");
        match end {
            None => assert!(recs.iter().any(|r| r.1 == cut), "cut at {cut} read clean"),
            Some(ReadError::Truncated { frame, offset }) => {
                let rec = recs.iter().find(|r| r.0 < cut && cut < r.1).unwrap();
                assert_eq!((frame, offset), (frames + 1, rec.0 as u64), "cut at {cut}");
            }
            Some(e) => panic!("cut at {cut}: {e}"),
        }
    }
}

#[test]
fn from_a_pipe_each_frame_is_printed_as_it_arrives() {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(DUMP)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let busy = busy_frame();
    let bytes = pcap(false, false, 1, &[(1, 0, &busy), (2, 0, &busy)]);
    let first = 24 + 16 + busy.len();
    let mut stdin = child.stdin.take().unwrap();
    // The header and one frame; the pipe stays open, as tcpdump's does.
    stdin.write_all(&bytes[..first]).unwrap();
    stdin.flush().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            tx.send(line.unwrap()).unwrap();
        }
    });
    let line = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("the first frame's line while the pipe is open");
    assert_eq!(line, format!("1 1.000000 {BUSY_TEXT}"));
    stdin.write_all(&bytes[first..]).unwrap();
    drop(stdin);
    assert!(child.wait().unwrap().success());
    reader.join().unwrap();
    assert_eq!(rx.recv().unwrap(), format!("2 2.000000 {BUSY_TEXT}"));
}

// Malformed frames and corrupt records.

#[test]
fn json_reports_malformed_frames_under_error_and_remarks_under_note() {
    let busy = busy_frame();
    let mut bad_version = busy.clone();
    bad_version[14] = 0x55; // IPv4 ethertype, IP version 5
    let mut lldp = busy.clone();
    lldp[12..14].copy_from_slice(&[0x88, 0xcc]);
    let bytes = pcap(
        false,
        false,
        1,
        &[
            (1, 0, &busy[..10]),
            (2, 0, &bad_version),
            (3, 0, &lldp),
            (4, 0, &busy),
        ],
    );
    let path = scratch("malformed.pcap", &bytes);
    let frames = json(&[path.to_str().unwrap()]);
    assert_eq!(frames.len(), 4);
    assert_eq!(frames[0]["frame"], 1);
    assert_eq!(frames[0]["error"], "malformed Ethernet: truncated");
    assert_eq!(frames[1]["error"], "malformed IPv4: version 5");
    for f in &frames[..2] {
        assert!(f.get("note").is_none(), "{f}");
    }
    assert_eq!(
        frames[2]["note"],
        format!("ethertype 0x88cc, {} bytes", busy.len() - 14)
    );
    for f in &frames[2..] {
        assert!(f.get("error").is_none(), "{f}");
    }
}

/// `bytes` with a classic pcap record's captured length replaced.
fn with_caplen(bytes: &[u8], record_at: usize, caplen: u32) -> Vec<u8> {
    let mut b = bytes.to_vec();
    b[record_at + 8..record_at + 12].copy_from_slice(&caplen.to_le_bytes());
    b
}

#[test]
fn a_corrupt_record_length_is_named_not_taken_for_a_short_file() {
    let bytes = std::fs::read(data("link-ipv4.pcap")).unwrap();
    let snaplen = u32::from_le_bytes(bytes[16..20].try_into().unwrap());
    let recs = records(&bytes);
    let second = recs.iter().filter(|r| r.2).nth(1).unwrap().0;
    let path = scratch("caplen.pcap", &with_caplen(&bytes, second, 0x7fff_ffff));
    let out = run(&[path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout_lines(&out).len(), 1, "the first frame is printed");
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "corrupt capture: invalid packet capture length 2147483647, bigger than snaplen \
             of {snaplen} in the record at byte offset {second} (frame 2)"
        )),
        "{err}"
    );
}

#[test]
fn bytes_overwritten_mid_file_are_reported_as_corrupt() {
    let mut bytes = std::fs::read(data("loss.pcap")).unwrap();
    let recs = records(&bytes);
    // 400 bytes over the record header in the middle of the file.
    let mid = recs[recs.len() / 2].0;
    bytes[mid - 100..mid + 300].fill(0xab);
    let path = scratch("overwritten.pcap", &bytes);
    let out = run(&[path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains(
            "corrupt capture: invalid packet capture length 2880154539, bigger than snaplen"
        ),
        "{err}"
    );
}
