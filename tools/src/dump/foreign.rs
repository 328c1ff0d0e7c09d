//! ARP and ICMP, which homa-dump shows as homa-stack's dissector
//! (`wire::dissect`) does: the one-line text and a JSON object.

use serde_json::{json, Value};

use homa_stack::wire::pretty::{Link as WireLink, Network, Transport as WireTransport};
use homa_stack::wire::{
    dissect, ArpRepr, Dissection, EtherType, Icmpv4Repr, Icmpv6Repr, IpProtocol,
};

/// Another protocol, shown as homa-stack's dissector shows it.
#[derive(Debug, Clone)]
pub struct Foreign {
    /// The type column: `ARP`, `ICMPv4`, `ICMPv6`.
    pub kind: &'static str,
    /// The rest of the line.
    pub text: String,
    /// Its JSON object.
    pub json: serde_json::Value,
}

/// ARP or ICMP through homa-stack's dissector: the packet behind a
/// made-up Ethernet header.
pub fn foreign(ethertype: EtherType, packet: &[u8]) -> Option<Foreign> {
    let mut frame = Vec::with_capacity(14 + packet.len());
    frame.extend_from_slice(&[0; 12]);
    frame.extend_from_slice(&u16::from(ethertype).to_be_bytes());
    frame.extend_from_slice(packet);
    let d = dissect(&frame);
    let json = foreign_json(&d)?;
    let kind = match (&d.network, &d.transport) {
        (Network::Arp(_), _) => "ARP",
        (_, WireTransport::Icmpv4 { .. }) => "ICMPv4",
        (_, WireTransport::Icmpv6 { .. }) => "ICMPv6",
        (_, WireTransport::IcmpOther { ip_version: 4, .. }) => "ICMPv4",
        (_, WireTransport::IcmpOther { .. }) => "ICMPv6",
        _ => return None,
    };
    let text = d.to_string();
    // Drop the made-up link addresses and, for ARP, the protocol name.
    let text = text.split_once(", ").map_or(&text[..], |(_, rest)| rest);
    let text = text.strip_prefix("ARP ").unwrap_or(text);
    let text = text.replacen(&format!(" {kind} "), " ", 1);
    Some(Foreign { kind, text, json })
}

/// ARP or ICMP from homa-stack's dissection, as a JSON object.
fn foreign_json(d: &Dissection<'_>) -> Option<Value> {
    if let WireLink::Malformed = d.link {
        return None;
    }
    match (&d.network, &d.transport) {
        (Network::Arp(arp), _) => Some(arp_json(arp)),
        (_, WireTransport::Icmpv4 { repr, checksum_ok }) => Some(icmpv4_json(repr, *checksum_ok)),
        (_, WireTransport::Icmpv6 { repr, checksum_ok }) => Some(icmpv6_json(repr, *checksum_ok)),
        (
            _,
            WireTransport::IcmpOther {
                ip_version,
                msg_type,
                code,
                len,
            },
        ) => Some(json!({
            "version": ip_version, "type": msg_type, "code": code, "len": len,
        })),
        _ => None,
    }
}

fn arp_json(arp: &ArpRepr) -> Value {
    match *arp {
        ArpRepr::EthernetIpv4 {
            operation,
            source_hardware_addr,
            source_protocol_addr,
            target_hardware_addr,
            target_protocol_addr,
        } => json!({
            "operation": u16::from(operation),
            "sender_mac": source_hardware_addr.to_string(),
            "sender_ip": source_protocol_addr.to_string(),
            "target_mac": target_hardware_addr.to_string(),
            "target_ip": target_protocol_addr.to_string(),
        }),
        // ArpRepr is non-exhaustive; new kinds show their text form.
        #[allow(unreachable_patterns)]
        ref other => json!({ "summary": other.to_string() }),
    }
}

/// An ICMP echo request or reply of either version.
fn echo_json(icmp_type: u8, name: &str, ident: u16, seq_no: u16, data: &[u8]) -> Value {
    json!({"type": icmp_type, "code": 0, "name": name,
           "ident": ident, "seq_no": seq_no, "data_len": data.len()})
}

/// An ICMP destination unreachable of either version, with the addresses
/// and protocol of the header it quotes.
fn unreachable_json(
    icmp_type: u8,
    code: u8,
    reason: impl std::fmt::Display,
    quoted: (impl std::fmt::Display, impl std::fmt::Display, IpProtocol),
) -> Value {
    let (src, dst, proto) = quoted;
    json!({
        "type": icmp_type, "code": code, "name": "dst-unreachable",
        "reason": reason.to_string(),
        "quoted": {"src": src.to_string(), "dst": dst.to_string(), "proto": u8::from(proto)},
    })
}

fn icmpv4_json(repr: &Icmpv4Repr<'_>, checksum_ok: bool) -> Value {
    let mut v = match *repr {
        Icmpv4Repr::EchoRequest {
            ident,
            seq_no,
            data,
        } => echo_json(8, "echo request", ident, seq_no, data),
        Icmpv4Repr::EchoReply {
            ident,
            seq_no,
            data,
        } => echo_json(0, "echo reply", ident, seq_no, data),
        Icmpv4Repr::DstUnreachable { reason, header, .. } => {
            let quoted = (header.src_addr, header.dst_addr, header.next_header);
            unreachable_json(3, u8::from(reason), reason, quoted)
        }
        #[allow(unreachable_patterns)]
        ref other => json!({ "summary": other.to_string() }),
    };
    v["version"] = json!(4);
    v["checksum_ok"] = json!(checksum_ok);
    v
}

fn icmpv6_json(repr: &Icmpv6Repr<'_>, checksum_ok: bool) -> Value {
    let mut v = match *repr {
        Icmpv6Repr::EchoRequest {
            ident,
            seq_no,
            data,
        } => echo_json(128, "echo request", ident, seq_no, data),
        Icmpv6Repr::EchoReply {
            ident,
            seq_no,
            data,
        } => echo_json(129, "echo reply", ident, seq_no, data),
        Icmpv6Repr::DstUnreachable { reason, header, .. } => {
            let quoted = (header.src_addr, header.dst_addr, header.next_header);
            unreachable_json(1, u8::from(reason), reason, quoted)
        }
        Icmpv6Repr::NeighborSolicit {
            target_addr,
            lladdr,
        } => json!({"type": 135, "code": 0, "name": "neighbor solicit",
                    "target": target_addr.to_string(), "lladdr": lladdr.map(|a| a.to_string())}),
        Icmpv6Repr::NeighborAdvert {
            router,
            solicited,
            override_,
            target_addr,
            lladdr,
        } => json!({"type": 136, "code": 0, "name": "neighbor advert",
                    "target": target_addr.to_string(), "lladdr": lladdr.map(|a| a.to_string()),
                    "router": router, "solicited": solicited, "override": override_}),
        #[allow(unreachable_patterns)]
        ref other => json!({ "summary": other.to_string() }),
    };
    v["version"] = json!(6);
    v["checksum_ok"] = json!(checksum_ok);
    v
}
