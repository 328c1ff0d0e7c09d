//! The Wireshark dissector (dissector/homa.lua) against homa-dump: tshark
//! decodes every committed capture with the dissector, and every field of
//! every frame, and the Info column, must equal what `homa-dump --json`
//! (and its text line) says.
//!
//! Needs tshark (Debian's `tshark` package), so the tests are ignored by
//! default and read as such; `cargo test -- --ignored` runs them, and then
//! a missing tshark fails them. CI installs tshark and runs them with the
//! other ignored tests.

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::Value;

const DUMP: &str = env!("CARGO_BIN_EXE_homa-dump");

fn data(name: &str) -> String {
    format!("{}/data/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn dissector() -> String {
    format!("{}/../dissector/homa.lua", env!("CARGO_MANIFEST_DIR"))
}

/// tshark's field names and the homa-dump JSON key each corresponds to.
const FIELDS: [(&str, &str); 31] = [
    ("homa.type", "type_code"),
    ("homa.sport", "sport"),
    ("homa.dport", "dport"),
    ("homa.sequence", "sequence"),
    ("homa.doff", "doff"),
    ("homa.flags", "flags"),
    ("homa.window", "window"),
    ("homa.checksum", "checksum"),
    ("homa.checksum.status", "checksum_status"),
    ("homa.checksum.expected", "checksum_expected"),
    ("homa.urgent", "urgent"),
    ("homa.sender_id", "sender_id"),
    ("homa.data.message_length", "message_length"),
    ("homa.data.incoming", "incoming"),
    ("homa.data.ack_client_id", "ack_client_id"),
    ("homa.data.ack_server_port", "ack_server_port"),
    ("homa.data.cutoff_version", "cutoff_version"),
    ("homa.data.retransmit", "retransmit"),
    ("homa.data.seg_offset", "seg_offset"),
    ("homa.data.offset", "offset"),
    ("homa.data.payload_len", "payload_len"),
    ("homa.grant.offset", "offset"),
    ("homa.grant.priority", "priority"),
    ("homa.resend.offset", "offset"),
    ("homa.resend.length", "length"),
    ("homa.resend.priority", "priority"),
    ("homa.cutoffs.cutoff", "unsched_cutoffs"),
    ("homa.cutoffs.version", "cutoff_version"),
    ("homa.ack.num_acks", "num_acks"),
    ("homa.ack.client_id", "acks.client_id"),
    ("homa.ack.server_port", "acks.server_port"),
];

/// Which of FIELDS a packet type has, beyond the common header.
fn type_prefix(type_code: u64) -> &'static str {
    match type_code {
        0x10 => "homa.data.",
        0x11 => "homa.grant.",
        0x12 => "homa.resend.",
        0x15 => "homa.cutoffs.",
        0x18 => "homa.ack.",
        _ => "none",
    }
}

/// A tshark value as a number (decimal or 0x hex), or as it is.
fn normalize(s: &str) -> String {
    s.split(',')
        .map(|v| {
            let n = match v.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16).ok(),
                None => v.parse::<u64>().ok(),
            };
            n.map_or(v.to_string(), |n| n.to_string())
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// homa-dump's JSON value as tshark prints it.
fn expected(homa: &Value, key: &str) -> Option<String> {
    if let Some((list, item)) = key.split_once('.') {
        let entries = homa.get(list)?.as_array()?;
        if entries.is_empty() {
            return None;
        }
        let items: Vec<String> = entries.iter().map(|e| e[item].to_string()).collect();
        return Some(items.join(","));
    }
    let v = homa.get(key)?;
    Some(match (key, v) {
        (_, Value::Null) => return None,
        ("checksum_status", Value::String(s)) => match s.as_str() {
            "bad" => "0",
            "ok" => "1",
            "unverified" => "2",
            "zero" => "3",
            "partial" => "4",
            other => panic!("checksum status {other}"),
        }
        .to_string(),
        (_, Value::Bool(b)) => u8::from(*b).to_string(),
        (_, Value::Array(a)) => a.iter().map(Value::to_string).collect::<Vec<_>>().join(","),
        (_, v) => v.to_string(),
    })
}

/// Fails, saying why, when tshark is not installed.
fn require_tshark() {
    assert!(
        Command::new("tshark").arg("--version").output().is_ok(),
        "tshark is not installed (apt-get install tshark)"
    );
}

/// tshark's fields per frame: frame number, then FIELDS, then the Info column.
fn tshark(capture: &str) -> Vec<Vec<String>> {
    let mut cmd = Command::new("tshark");
    cmd.args(["-n", "-X"])
        .arg(format!("lua_script:{}", dissector()))
        .args(["-o", "homa.check_checksum:TRUE", "-r", capture])
        .args(["-T", "fields", "-E", "separator=/t", "-E", "occurrence=a"])
        .args(["-E", "aggregator=,", "-E", "quote=n", "-e", "frame.number"]);
    for (field, _) in FIELDS {
        cmd.args(["-e", field]);
    }
    cmd.args(["-e", "_ws.col.Info"]);
    let out = cmd.output().expect("tshark runs");
    assert!(
        out.status.success(),
        "tshark on {capture}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

fn homa_dump(args: &[&str]) -> String {
    let out = Command::new(DUMP).args(args).output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

/// Compares tshark with homa-dump on every frame of `capture`; returns how
/// many Homa frames were compared.
fn compare(capture: &str) -> usize {
    let rows = tshark(capture);
    let frames: Vec<Value> = homa_dump(&["--json", capture])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let text: Vec<String> = homa_dump(&["-t", "none", capture])
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(rows.len(), frames.len(), "{capture}: frame count");
    let mut compared = 0;
    for ((row, frame), line) in rows.iter().zip(&frames).zip(&text) {
        let n = &frame["frame"];
        assert_eq!(row[0], n.to_string(), "{capture}");
        let got: BTreeMap<&str, String> = FIELDS
            .iter()
            .zip(&row[1..])
            .filter(|(_, v)| !v.is_empty())
            .map(|((field, _), v)| (*field, normalize(v)))
            .collect();
        let info = row.last().unwrap();
        let homa = &frame["homa"];
        let error = frame["error"].as_str().unwrap_or("");
        if homa.is_null() {
            if error.starts_with("malformed HOMA") {
                assert_eq!(info, &format!("[{error}]"), "{capture} frame {n}");
            } else {
                assert!(got.is_empty(), "{capture} frame {n}: {got:?}");
            }
            continue;
        }
        let prefix = type_prefix(homa["type_code"].as_u64().unwrap());
        let want: BTreeMap<&str, String> = FIELDS
            .iter()
            .filter(|(field, _)| {
                field.matches('.').count() == 1
                    || field.starts_with("homa.checksum.")
                    || field.starts_with(prefix)
            })
            .filter_map(|(field, key)| expected(homa, key).map(|v| (*field, v)))
            .collect();
        assert_eq!(got, want, "{capture} frame {n}");
        // The Info column is homa-dump's line without number and padding.
        let (_, rest) = line.split_once(' ').unwrap();
        let (kind, rest) = rest.split_once(' ').unwrap();
        assert_eq!(
            info,
            &format!("{kind} {}", rest.trim_start()),
            "{capture} frame {n}"
        );
        compared += 1;
    }
    compared
}

#[test]
#[ignore = "needs tshark"]
fn tshark_with_the_dissector_agrees_with_homa_dump_on_every_frame() {
    require_tshark();
    let mut total = 0;
    for (capture, homa_frames) in [
        ("every-type.pcapng", 34),
        ("snaplen.pcap", 34),
        ("snaplen-96.pcap", 34),
        ("sample.pcap", 54),
        ("loss.pcap", 26),
        ("link-sll.pcap", 6),
        ("link-sll2.pcap", 6),
        ("link-raw.pcap", 6),
        ("link-ipv4.pcap", 3),
        ("link-ipv6.pcap", 3),
    ] {
        let n = compare(&data(capture));
        assert_eq!(n, homa_frames, "{capture}: Homa frames compared");
        total += n;
    }
    eprintln!("compared {total} Homa frames field by field");
}

/// The detail view (`tshark -V`) names every Homa field's value: no
/// "Unknown (N)" from a value table that lists only a sentinel, and the
/// sentinels themselves explained.
#[test]
#[ignore = "needs tshark"]
fn tshark_detail_view_shows_offsets_and_lengths_as_numbers() {
    require_tshark();
    let out = Command::new("tshark")
        .args(["-n", "-X"])
        .arg(format!("lua_script:{}", dissector()))
        .args(["-r", &data("every-type.pcapng"), "-V", "-O", "homa"])
        .output()
        .expect("tshark runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let homa_lines: Vec<&str> = text.lines().filter(|l| l.starts_with("    ")).collect();
    assert!(!homa_lines.is_empty());
    // The capture holds a frame of an unknown type on purpose: its Type
    // is the one field that may say "Unknown".
    let unknown: Vec<&&str> = homa_lines
        .iter()
        .filter(|l| l.contains("Unknown (") && !l.trim_start().starts_with("Type: "))
        .collect();
    assert!(unknown.is_empty(), "{unknown:#?}");
    let seg: Vec<&&str> = homa_lines
        .iter()
        .filter(|l| l.trim_start().starts_with("Segment offset: "))
        .collect();
    assert!(!seg.is_empty(), "no DATA frame in the capture");
    assert!(
        seg.iter().any(|l| l.trim() == "Segment offset: 0"),
        "{seg:#?}"
    );
    assert!(
        seg.iter()
            .any(|l| l.contains("4294967295 (offset is in the sequence field)")),
        "{seg:#?}"
    );
}
