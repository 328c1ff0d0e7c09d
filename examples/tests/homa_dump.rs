//! Runs the built homa-dump on the committed sample capture and on small
//! captures written here (pcapng, microsecond pcap, damaged files).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use homa_stack::wire::homa::{self, Kind};
use homa_stack::wire::{
    ArpOperation, ArpPacket, ArpRepr, EtherType, EthernetAddress, EthernetFrame, EthernetRepr,
    IpProtocol, Ipv4Addr, Ipv4Packet, Ipv4Repr,
};

const DUMP: &str = env!("CARGO_BIN_EXE_homa-dump");
const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/sample.pcap");

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

/// A file in cargo's per-test scratch directory.
fn scratch(name: &str, bytes: &[u8]) -> PathBuf {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::write(&path, bytes).expect("scratch file");
    path
}

/// The line of frame `n`.
fn frame_line(lines: &[String], n: usize) -> &str {
    &lines[n - 1]
}

#[test]
fn text_mode_prints_the_linux_data_frame_exactly() {
    let out = run(&[SAMPLE]);
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = stdout_lines(&out);
    assert_eq!(
        frame_line(&lines, 57),
        "57 0.005064000 02:00:00:00:00:01 > 02:00:00:00:00:02, DATA 10.0.0.1:32768 > \
         10.0.0.2:500 id 1234 off 1424 len 1424/100000 incoming 40000 prio 5"
    );
}

#[test]
fn text_mode_shows_every_kind_of_frame_in_the_sample() {
    let out = run(&[SAMPLE]);
    let text = String::from_utf8(out.stdout).unwrap();
    for needle in [
        ", ARP request who-has 10.0.0.2 tell 10.0.0.1",
        ", ARP reply 10.0.0.2 is-at 02:00:00:00:00:02",
        "10.0.0.2 > 10.0.0.1 ICMPv4 echo request id 16962 seq 1 len 16",
        "10.0.0.1 > 10.0.0.2 ICMPv4 echo reply id 16962 seq 1 len 16",
        ", DATA 10.0.0.1:32768 > 10.0.0.2:500 id 2 off 0 len 100/100 incoming 100 prio 6",
        ", DATA 10.0.0.1:32768 > 10.0.0.2:500 id 4 off 0 len 1424/50000",
        ", GRANT 10.0.0.2:500 > 10.0.0.1:32768 id 5 offset 50000",
        ", CUTOFFS 10.0.0.2:500 > 10.0.0.1:32768 id 3 cutoffs",
        ", NEED_ACK 10.0.0.2:500 > 10.0.0.1:32768 id 5 prio 7",
        ", ACK 10.0.0.1:32768 > 10.0.0.2:500 id 4 acks [4:500] prio 7",
        ", RESEND 10.0.0.2:500 > 10.0.0.1:32768 id 1235 off 1424 len 2848 retx-prio 6",
        ", BUSY 10.0.0.2:500 > 10.0.0.1:32768 id 1235 prio 7",
        ", RPC_UNKNOWN 10.0.0.2:500 > 10.0.0.1:32768 id 77 prio 7",
        ", FREEZE 10.0.0.2:500 > 10.0.0.1:32768 id 1235 prio 7",
    ] {
        assert!(text.contains(needle), "missing {needle:?}");
    }
}

#[test]
fn truncated_frame_is_an_error_line_and_the_dump_goes_on_to_exit_0() {
    let out = run(&["--json", SAMPLE]);
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = stdout_lines(&out);
    assert_eq!(lines.len(), 58);
    assert_eq!(
        frame_line(&lines, 58),
        r#"{"frame": 58, "error": "malformed IPv4: truncated"}"#
    );
    let text = stdout_lines(&run(&[SAMPLE]));
    assert_eq!(
        frame_line(&text, 58),
        "58 0.005074000 02:00:00:00:00:01 > 02:00:00:00:00:02, [malformed IPv4: truncated, 46 bytes]"
    );
}

#[test]
fn json_grant_has_the_protocol_field_names() {
    let lines = stdout_lines(&run(&["--json", SAMPLE]));
    assert_eq!(
        frame_line(&lines, 19),
        r#"{"frame": 19, "time": 0.003012000, "len": 67, "eth": {"src": "02:00:00:00:00:02", "dst": "02:00:00:00:00:01", "vlan": null, "ethertype": 2048}, "ip": {"version": 4, "src": "10.0.0.2", "dst": "10.0.0.1", "proto": 146, "tos": 224, "priority": 7, "hop_limit": 64, "payload_len": 33, "checksum_ok": true}, "homa": {"type": "GRANT", "sport": 500, "dport": 32768, "sequence": 0, "doff": 5, "sender_id": 5, "checksum": 22138, "flags": 0, "urgent": 0, "offset": 50000, "priority": 0}}"#
    );
}

#[test]
fn json_data_with_the_sentinel_shows_effective_and_raw_offsets() {
    let lines = stdout_lines(&run(&["--json", SAMPLE]));
    let line = frame_line(&lines, 57);
    for field in [
        r#""tos": 160, "priority": 5"#,
        r#""type": "DATA""#,
        r#""sequence": 1424"#,
        r#""sender_id": 1234"#,
        r#""flags": 6, "urgent": 47485"#,
        r#""message_length": 100000, "incoming": 40000"#,
        r#""offset": 1424, "seg_offset": 4294967295, "payload_len": 1424"#,
    ] {
        assert!(line.contains(field), "{field} not in {line}");
    }
}

#[test]
fn json_resend_priority_is_null_for_the_36_byte_form() {
    let lines = stdout_lines(&run(&["--json", SAMPLE]));
    assert!(frame_line(&lines, 52).ends_with(r#""offset": 1424, "length": 2848, "priority": 6}}"#));
    assert!(frame_line(&lines, 53).contains(r#""payload_len": 36"#));
    assert!(
        frame_line(&lines, 53).ends_with(r#""offset": 1424, "length": 2848, "priority": null}}"#)
    );
}

#[test]
fn json_ack_cutoffs_arp_and_icmp_objects() {
    let lines = stdout_lines(&run(&["--json", SAMPLE]));
    assert!(frame_line(&lines, 1).ends_with(
        r#""arp": {"operation": 1, "sender_mac": "02:00:00:00:00:01", "sender_ip": "10.0.0.1", "target_mac": "00:00:00:00:00:00", "target_ip": "10.0.0.2"}}"#
    ));
    assert!(frame_line(&lines, 4).ends_with(
        r#""unsched_cutoffs": [2147483647, 0, 0, 0, 1000000, 15000, 2800, 200], "cutoff_version": 1}}"#
    ));
    assert!(frame_line(&lines, 51)
        .ends_with(r#""num_acks": 1, "acks": [{"client_id": 4, "server_port": 500}]}}"#));
    assert!(frame_line(&lines, 9).ends_with(
        r#""icmp": {"version": 4, "type": 8, "code": 0, "name": "echo request", "ident": 16962, "seq_no": 1, "data_len": 16, "checksum_ok": true}}"#
    ));
}

#[test]
fn stdin_is_read_for_dash() {
    let mut child = Command::new(DUMP)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let sample = std::fs::read(SAMPLE).unwrap();
    child.stdin.take().unwrap().write_all(&sample).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(stdout_lines(&out), stdout_lines(&run(&[SAMPLE])));
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
    let mut homa = vec![0; repr.buffer_len()];
    repr.emit(&mut homa::Packet::new_unchecked(&mut homa[..]));
    let ip = Ipv4Repr {
        src_addr: Ipv4Addr::new(10, 0, 0, 2),
        dst_addr: Ipv4Addr::new(10, 0, 0, 1),
        next_header: IpProtocol::Homa,
        payload_len: homa.len(),
        hop_limit: 64,
        tos: 0x60,
    };
    let mut frame = vec![0; 14 + 20 + homa.len()];
    let eth = EthernetRepr {
        src_addr: B_MAC,
        dst_addr: A_MAC,
        vlan: None,
        ethertype: EtherType::Ipv4,
    };
    eth.emit(&mut EthernetFrame::new_unchecked(&mut frame[..]));
    ip.emit(&mut Ipv4Packet::new_unchecked(&mut frame[14..]), true);
    frame[34..].copy_from_slice(&homa);
    frame
}

fn arp_frame() -> Vec<u8> {
    let arp = ArpRepr::EthernetIpv4 {
        operation: ArpOperation::Request,
        source_hardware_addr: A_MAC,
        source_protocol_addr: Ipv4Addr::new(10, 0, 0, 1),
        target_hardware_addr: EthernetAddress([0; 6]),
        target_protocol_addr: Ipv4Addr::new(10, 0, 0, 2),
    };
    let mut frame = vec![0; 14 + arp.buffer_len()];
    let eth = EthernetRepr {
        src_addr: A_MAC,
        dst_addr: EthernetAddress::BROADCAST,
        vlan: None,
        ethertype: EtherType::Arp,
    };
    eth.emit(&mut EthernetFrame::new_unchecked(&mut frame[..]));
    arp.emit(&mut ArpPacket::new_unchecked(&mut frame[14..]));
    frame
}

const BUSY_TEXT: &str = "02:00:00:00:00:02 > 02:00:00:00:00:01, \
                         BUSY 10.0.0.2:500 > 10.0.0.1:32768 id 9 prio 3";
const ARP_TEXT: &str =
    "02:00:00:00:00:01 > ff:ff:ff:ff:ff:ff, ARP request who-has 10.0.0.2 tell 10.0.0.1";

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
        while body.len() % 4 != 0 {
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

#[test]
fn pcapng_sections_of_both_byte_orders_with_tsresol_and_unknown_blocks() {
    let mut le = Pcapng {
        big: false,
        bytes: Vec::new(),
    };
    le.shb();
    le.idb(1, Some(9)); // nanoseconds
    le.block(0x0000_0bad, b"custom"); // skipped
    le.epb(0, 3_000_000_042, &busy_frame());
    le.spb(&arp_frame());
    le.idb(101, None); // raw IP: not Ethernet
    le.epb(1, 5_000_000, &busy_frame());
    // A second section in big-endian order, default microsecond resolution.
    let mut be = Pcapng {
        big: true,
        bytes: le.bytes,
    };
    be.shb();
    be.idb(1, None);
    be.epb(0, 7_000_001, &busy_frame());
    let path = scratch("sections.pcapng", &be.bytes);

    let out = run(&[path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout_lines(&out),
        [
            format!("1 3.000000042 {BUSY_TEXT}"),
            format!("2 - {ARP_TEXT}"),
            "3 5.000000 [link type 101 is not Ethernet]".to_string(),
            format!("4 7.000001 {BUSY_TEXT}"),
        ]
    );
    let json = stdout_lines(&run(&["--json", path.to_str().unwrap()]));
    assert!(json[0].starts_with(r#"{"frame": 1, "time": 3.000000042, "len": 62,"#));
    assert!(json[1].starts_with(r#"{"frame": 2, "time": null, "len": 42,"#));
    assert_eq!(
        json[2],
        r#"{"frame": 3, "error": "link type 101 is not Ethernet"}"#
    );
}

/// A classic pcap with microsecond timestamps in the given byte order.
fn pcap_micros(big: bool, frames: &[(u32, u32, &[u8])]) -> Vec<u8> {
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
    out.extend_from_slice(&u32b(0xa1b2_c3d4));
    out.extend_from_slice(&u16b(2));
    out.extend_from_slice(&u16b(4));
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&u32b(65535));
    out.extend_from_slice(&u32b(1));
    for &(secs, micros, frame) in frames {
        out.extend_from_slice(&u32b(secs));
        out.extend_from_slice(&u32b(micros));
        out.extend_from_slice(&u32b(frame.len() as u32));
        out.extend_from_slice(&u32b(frame.len() as u32));
        out.extend_from_slice(frame);
    }
    out
}

#[test]
fn microsecond_pcap_in_both_byte_orders() {
    let busy = busy_frame();
    let arp = arp_frame();
    for big in [false, true] {
        let bytes = pcap_micros(big, &[(1, 2, &busy), (1_700_000_000, 999_999, &arp)]);
        let path = scratch(&format!("micros-{big}.pcap"), &bytes);
        let out = run(&[path.to_str().unwrap()]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(
            stdout_lines(&out),
            [
                format!("1 1.000002 {BUSY_TEXT}"),
                format!("2 1700000000.999999 {ARP_TEXT}"),
            ]
        );
        let json = stdout_lines(&run(&["--json", path.to_str().unwrap()]));
        assert!(json[0].starts_with(r#"{"frame": 1, "time": 1.000002, "len": 62,"#));
    }
}

#[test]
fn a_file_cut_inside_a_record_prints_what_it_has_and_exits_0() {
    let busy = busy_frame();
    let mut bytes = pcap_micros(false, &[(1, 0, &busy), (2, 0, &busy)]);
    bytes.truncate(bytes.len() - 10);
    let path = scratch("cut.pcap", &bytes);
    let out = run(&[path.to_str().unwrap()]);
    assert!(out.status.success());
    assert_eq!(stdout_lines(&out), [format!("1 1.000000 {BUSY_TEXT}")]);
    assert!(
        stderr(&out).contains("file ends inside a record after frame 1"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn bad_file_header_exits_1() {
    for (name, bytes) in [
        ("garbage.pcap", &b"this is not a capture"[..]),
        ("empty.pcap", &b""[..]),
        ("short.pcap", &[0xd4, 0xc3, 0xb2, 0xa1, 2, 0][..]),
        // A pcapng section header with a broken byte-order magic.
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
    for args in [&[][..], &["--jason", SAMPLE][..], &[SAMPLE, SAMPLE][..]] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains("Usage: homa-dump [--json] FILE"));
    }
    let out = run(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .starts_with("Usage: homa-dump [--json] FILE"));
}

#[test]
fn the_sample_generator_still_produces_every_promised_packet_type() {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("regenerated.pcap");
    let status = Command::new(env!("CARGO_BIN_EXE_make-sample-capture"))
        .arg(&path)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let text = String::from_utf8(run(&[path.to_str().unwrap()]).stdout).unwrap();
    for kind in [
        "ARP request",
        "ARP reply",
        "ICMPv4 echo request",
        "ICMPv4 echo reply",
        ", DATA ",
        ", GRANT ",
        ", CUTOFFS ",
        ", NEED_ACK ",
        ", ACK ",
        ", RESEND ",
        ", BUSY ",
        ", RPC_UNKNOWN ",
        ", FREEZE ",
        "[malformed IPv4: truncated",
    ] {
        assert!(text.contains(kind), "regenerated capture lacks {kind:?}");
    }
}
