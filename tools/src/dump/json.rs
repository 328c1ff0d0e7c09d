//! `--json`: one object per frame, with serde_json. The `homa` keys are the
//! field names of protocol.md section 3 (raw values from the packet, except
//! `offset`, which for DATA is after the 0xFFFFFFFF rule).

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

use homa_stack::wire::homa::{self, Kind, PacketType};

use super::decode::{mac_text, Decoded, Homa, HomaChecksum, Ip, Link, Net, Transport};
use super::reader::{Record, Timestamp};

/// A frame as `--json` prints it.
#[derive(Serialize, Default)]
pub struct FrameJson {
    /// Frame number, from 1.
    pub frame: u64,
    /// Capture time with the capture's decimals; null when the record has none.
    pub time: Option<Box<RawValue>>,
    /// Bytes captured.
    pub caplen: usize,
    /// Bytes on the wire.
    pub len: usize,
    /// The link header.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkJson>,
    /// The IP header.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip: Option<IpJson>,
    /// The Homa packet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub homa: Option<HomaJson>,
    /// ARP, from homa-stack's dissector.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arp: Option<Value>,
    /// ICMP, from homa-stack's dissector.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub icmp: Option<Value>,
    /// A remark on a frame that is fine but not shown in full (`UDP, 40
    /// bytes`, `fragment`, a snap-length cut).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Why the frame is malformed (`{"frame": N, "error": "..."}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A time as a JSON number with exactly the capture's decimals.
pub fn time_value(t: &Timestamp) -> Box<RawValue> {
    RawValue::from_string(t.to_string()).expect("a decimal number is JSON")
}

/// The link header.
#[derive(Serialize, Default)]
pub struct LinkJson {
    /// `ethernet`, `sll`, `sll2` or `raw`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Source address (Ethernet, or the cooked header's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub src: Option<String>,
    /// Ethernet destination.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dst: Option<String>,
    /// VLAN ids, outer first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub vlans: Vec<u16>,
    /// Cooked captures: the packet type.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pkttype: Option<u16>,
    /// Cooked v2: the interface index.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ifindex: Option<u32>,
}

/// The IP header.
#[derive(Serialize)]
pub struct IpJson {
    /// 4 or 6.
    pub version: u8,
    /// Source.
    pub src: String,
    /// Destination.
    pub dst: String,
    /// Protocol.
    pub proto: u8,
    /// TOS or traffic class.
    pub tos: u8,
    /// Homa priority (`tos >> 5`).
    pub priority: u8,
    /// TTL or hop limit.
    pub hop_limit: u8,
    /// Payload bytes the header announces.
    pub payload_len: usize,
    /// IPv4: the header checksum field.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checksum: Option<u16>,
    /// IPv4: whether the header checksum is right.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checksum_ok: Option<bool>,
}

/// An ACK entry.
#[derive(Serialize)]
pub struct AckJson {
    /// Client-side RPC id.
    pub client_id: u64,
    /// Server port.
    pub server_port: u16,
}

/// The Homa packet: every field of its type.
#[derive(Serialize, Default)]
pub struct HomaJson {
    /// `DATA`, `GRANT`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// The type byte.
    pub type_code: u8,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// Fields below are absent when the common header was not captured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sequence: Option<u32>,
    /// Header length in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub doff: Option<u8>,
    /// Flags byte.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flags: Option<u8>,
    /// Window (unused).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<u16>,
    /// Checksum field.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checksum: Option<u16>,
    /// `ok`, `bad`, `zero`, `partial` or `unverified`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checksum_status: Option<&'static str>,
    /// For a bad checksum: the right value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checksum_expected: Option<u16>,
    /// Urgent pointer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub urgent: Option<u16>,
    /// RPC id as the sender knows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sender_id: Option<u64>,
    /// Carried as TCP with Linux's hijack markers.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub hijacked: bool,
    /// Bytes of the Homa packet on the wire.
    pub wire_len: usize,
    /// Bytes of it captured.
    pub captured_len: usize,
    /// Not all of the packet was captured.
    pub truncated: bool,
    /// DATA.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_length: Option<u32>,
    /// DATA.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incoming: Option<u32>,
    /// DATA.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ack_client_id: Option<u64>,
    /// DATA.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ack_server_port: Option<u16>,
    /// DATA (echo) and CUTOFFS.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cutoff_version: Option<u16>,
    /// DATA.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retransmit: Option<bool>,
    /// DATA (effective), GRANT, RESEND.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<u32>,
    /// DATA: the raw seg.offset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seg_offset: Option<u32>,
    /// DATA: payload bytes on the wire.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_len: Option<usize>,
    /// DATA: payload bytes captured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub captured_payload_len: Option<usize>,
    /// RESEND.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub length: Option<u32>,
    /// GRANT, RESEND (null for a 36-byte RESEND).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<Option<u8>>,
    /// CUTOFFS.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unsched_cutoffs: Option<Vec<u32>>,
    /// ACK: the raw count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_acks: Option<u16>,
    /// ACK: the valid entries (at most 5).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acks: Option<Vec<AckJson>>,
}

/// The JSON record of a frame.
pub fn frame_json(n: u64, record: &Record, d: &Decoded<'_>) -> FrameJson {
    let mut out = FrameJson {
        frame: n,
        time: record.time.as_ref().map(time_value),
        caplen: record.data.len(),
        len: record.orig_len,
        link: d.link.as_ref().map(link_json),
        ..FrameJson::default()
    };
    match &d.net {
        Net::Ip(ip, transport) => {
            out.ip = Some(ip_json(ip));
            match transport {
                Transport::Homa(h) => out.homa = Some(homa_json(h)),
                Transport::Icmp(f) => out.icmp = Some(f.json.clone()),
                Transport::Other(note) => out.note = Some(note.clone()),
                Transport::Malformed(why) => out.error = Some(why.clone()),
            }
        }
        Net::Arp(f) => out.arp = Some(f.json.clone()),
        Net::Other(note) => out.note = Some(note.clone()),
        Net::Malformed(why) => out.error = Some(why.clone()),
    }
    out
}

fn link_json(link: &Link) -> LinkJson {
    match link {
        Link::Ethernet { src, dst, vlans } => LinkJson {
            kind: "ethernet",
            src: Some(mac_text(src)),
            dst: Some(mac_text(dst)),
            vlans: vlans.clone(),
            ..LinkJson::default()
        },
        Link::Sll {
            version,
            pkttype,
            addr,
            ifindex,
            ..
        } => LinkJson {
            kind: if *version == 1 { "sll" } else { "sll2" },
            src: Some(mac_text(addr)),
            pkttype: Some(*pkttype),
            ifindex: *ifindex,
            ..LinkJson::default()
        },
        Link::Raw => LinkJson {
            kind: "raw",
            ..LinkJson::default()
        },
    }
}

fn ip_json(ip: &Ip) -> IpJson {
    IpJson {
        version: ip.version,
        src: ip.src.to_string(),
        dst: ip.dst.to_string(),
        proto: ip.proto,
        tos: ip.tos,
        priority: ip.priority(),
        hop_limit: ip.ttl,
        payload_len: ip.payload_len,
        checksum: ip.checksum.map(|c| c.0),
        checksum_ok: ip.checksum.map(|c| c.1),
    }
}

/// Every field of `h` that was captured.
pub fn homa_json(h: &Homa<'_>) -> HomaJson {
    let p = &h.packet;
    let mut j = HomaJson {
        kind: h.ptype.to_string(),
        type_code: u8::from(h.ptype),
        sport: p.sport(),
        dport: p.dport(),
        hijacked: h.hijacked,
        wire_len: h.wire_len,
        captured_len: h.captured,
        truncated: h.truncated(),
        ..HomaJson::default()
    };
    if !h.has_common_header() {
        return j;
    }
    j.sequence = Some(p.sequence());
    j.doff = Some(p.doff());
    j.flags = Some(p.flags());
    j.window = Some(p.window());
    j.checksum = Some(p.checksum());
    j.checksum_status = Some(h.checksum.word());
    if let HomaChecksum::Bad(right) = h.checksum {
        j.checksum_expected = Some(right);
    }
    j.urgent = Some(p.urgent());
    j.sender_id = Some(p.sender_id());
    let Some(repr) = &h.repr else {
        partial_header(h, &mut j);
        return j;
    };
    match &repr.kind {
        Kind::Data { .. } => {
            j.message_length = Some(p.message_length());
            j.incoming = Some(p.incoming());
            j.ack_client_id = Some(p.ack_client_id());
            j.ack_server_port = Some(p.ack_server_port());
            j.cutoff_version = Some(p.cutoff_version());
            j.retransmit = Some(p.retransmit());
            j.offset = Some(p.offset());
            j.seg_offset = Some(p.seg_offset());
            j.payload_len = Some(h.payload_len());
            j.captured_payload_len = Some(h.captured_payload_len());
        }
        Kind::Grant { offset, priority } => {
            j.offset = Some(*offset);
            j.priority = Some(Some(*priority));
        }
        Kind::Resend { offset, length, .. } => {
            j.offset = Some(*offset);
            j.length = Some(*length);
            // A 36-byte (upstream) RESEND has no priority byte.
            j.priority = Some(if h.header_len > homa::RESEND_UPSTREAM_HEADER_LEN {
                p.resend_priority()
            } else {
                None
            });
        }
        Kind::Cutoffs {
            unsched_cutoffs,
            version,
        } => {
            j.unsched_cutoffs = Some(unsched_cutoffs.to_vec());
            j.cutoff_version = Some(*version);
        }
        Kind::Ack { acks } => {
            j.num_acks = Some(p.num_acks());
            j.acks = Some(
                acks.iter()
                    .map(|a| AckJson {
                        client_id: a.client_id,
                        server_port: a.server_port,
                    })
                    .collect(),
            );
        }
        Kind::RpcUnknown | Kind::Busy | Kind::Freeze | Kind::NeedAck => {}
    }
    debug_assert!(!matches!(h.ptype, PacketType::Unknown(_)));
    j
}

/// The type-specific fields of a header cut by the snap length: those
/// whose bytes were captured, in header order (as a dissector that stops at
/// the first missing byte shows them).
fn partial_header(h: &Homa<'_>, j: &mut HomaJson) {
    let p = &h.packet;
    let fits = |end: usize| h.captured >= end;
    match h.ptype {
        PacketType::Data => {
            let fields: [(usize, &mut dyn FnMut()); 6] = [
                (32, &mut || j.message_length = Some(p.message_length())),
                (36, &mut || j.incoming = Some(p.incoming())),
                (44, &mut || j.ack_client_id = Some(p.ack_client_id())),
                (46, &mut || j.ack_server_port = Some(p.ack_server_port())),
                (48, &mut || j.cutoff_version = Some(p.cutoff_version())),
                (49, &mut || j.retransmit = Some(p.retransmit())),
            ];
            for (end, set) in fields {
                if !fits(end) {
                    break;
                }
                set();
            }
        }
        PacketType::Grant if fits(32) => j.offset = Some(p.grant_offset()),
        PacketType::Resend if fits(32) => {
            j.offset = Some(p.resend_offset());
            if fits(36) {
                j.length = Some(p.resend_length());
            }
        }
        PacketType::Cutoffs => {
            let n = (h.captured.saturating_sub(homa::COMMON_HEADER_LEN) / 4).min(8);
            if n > 0 {
                j.unsched_cutoffs = Some((0..n).map(|i| p.unsched_cutoff(i)).collect());
            }
        }
        PacketType::Ack if fits(30) => {
            j.num_acks = Some(p.num_acks());
            let valid = usize::from(p.num_acks()).min(homa::MAX_ACKS);
            let whole = (h.captured - 30) / 10;
            j.acks = Some(
                (0..valid.min(whole))
                    .map(|i| {
                        let a = p.ack_entry(i);
                        AckJson {
                            client_id: a.client_id,
                            server_port: a.server_port,
                        }
                    })
                    .collect(),
            );
        }
        _ => {}
    }
}
