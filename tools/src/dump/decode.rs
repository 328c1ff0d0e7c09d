//! One captured frame taken apart: the link header of its link type, IPv4
//! or IPv6, and Homa, as far as the captured bytes go.
//!
//! A frame cut by the snap length still shows every header it holds: the IP
//! header is read without requiring the datagram's announced length, and a
//! Homa header that is complete is decoded with its payload marked as
//! truncated. ARP and ICMP, which need whole packets, go through
//! homa-stack's `wire::dissect`.

use std::net::IpAddr;

use homa_stack::wire::homa::{self, PacketType};
use homa_stack::wire::pretty::{Network, Transport as WireTransport, HIJACK_FLAGS, HIJACK_URGENT};
use homa_stack::wire::{checksum, dissect, EtherType, IpProtocol, Ipv4Addr, Ipv6Addr};

use super::reader::{
    Record, LINKTYPE_ETHERNET, LINKTYPE_IPV4, LINKTYPE_IPV6, LINKTYPE_LINUX_SLL,
    LINKTYPE_LINUX_SLL2, LINKTYPE_RAW, LINKTYPE_UNDECLARED,
};

/// An 802.1ad (QinQ) service tag, which homa-stack's wire module has no
/// name for; homa-dump shows what such frames carry.
const ETHERTYPE_QINQ: EtherType = EtherType::Unknown(0x88a8);

/// The link-layer header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    /// Ethernet II, with up to two VLAN tags (outer first).
    Ethernet {
        /// Source address.
        src: [u8; 6],
        /// Destination address.
        dst: [u8; 6],
        /// VLAN ids.
        vlans: Vec<u16>,
    },
    /// Linux cooked capture (v1 or v2).
    Sll {
        /// 1 or 2.
        version: u8,
        /// Packet type: 0 to us, 1 broadcast, 2 multicast, 3 to another
        /// host, 4 sent by us.
        pkttype: u16,
        /// ARPHRD_ type of the interface.
        hatype: u16,
        /// The link-layer source address (its first `halen` bytes, at most 8).
        addr: Vec<u8>,
        /// v2 only: the interface index.
        ifindex: Option<u32>,
    },
    /// No link header (raw IP).
    Raw,
}

/// An IPv4 or IPv6 header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ip {
    /// 4 or 6.
    pub version: u8,
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Protocol (IPv6: next header).
    pub proto: u8,
    /// TOS (IPv6: traffic class); Homa's priority is its top three bits.
    pub tos: u8,
    /// TTL or hop limit.
    pub ttl: u8,
    /// IPv4 identification (0 for IPv6).
    pub ident: u16,
    /// Header bytes.
    pub header_len: usize,
    /// Payload bytes the header announces.
    pub payload_len: usize,
    /// IPv4: the header checksum field and whether it is right.
    pub checksum: Option<(u16, bool)>,
    /// An IPv4 fragment other than a whole datagram.
    pub fragment: bool,
}

impl Ip {
    /// Homa's priority: TOS or traffic class `>> 5` (protocol.md 2.2).
    pub fn priority(&self) -> u8 {
        self.tos >> 5
    }
}

/// What the Homa checksum says (protocol.md 2.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HomaChecksum {
    /// Right over the TCP pseudo-header (protocol 6) and the packet.
    Ok,
    /// Wrong; the value that would be right.
    Bad(u16),
    /// The field is 0: not filled (upstream and older builds).
    Zero,
    /// The field holds only the pseudo-header sum: Linux computes checksums
    /// as CHECKSUM_PARTIAL and the NIC or kernel completes them after the
    /// capture point, so frames captured on the sending host look like this.
    Partial,
    /// Not all of the packet was captured.
    Unverified,
}

impl HomaChecksum {
    /// The word homa-dump prints.
    pub fn word(&self) -> &'static str {
        match self {
            HomaChecksum::Ok => "ok",
            HomaChecksum::Bad(_) => "bad",
            HomaChecksum::Zero => "zero",
            HomaChecksum::Partial => "partial",
            HomaChecksum::Unverified => "unverified",
        }
    }
}

/// A Homa packet (or as much of its header as was captured).
#[derive(Debug, Clone)]
pub struct Homa<'a> {
    /// The captured bytes of the Homa packet (trimmed to the IP length).
    pub packet: homa::Packet<&'a [u8]>,
    /// The type byte (Unknown for a type outside 0x10..=0x18).
    pub ptype: PacketType,
    /// Bytes of the packet on the wire (from the IP header).
    pub wire_len: usize,
    /// Bytes of it captured.
    pub captured: usize,
    /// The type's header length.
    pub header_len: usize,
    /// The parsed packet, when its whole header was captured.
    pub repr: Option<homa::Repr<'a>>,
    /// Carried as TCP with Linux's hijack markers.
    pub hijacked: bool,
    /// The checksum's state.
    pub checksum: HomaChecksum,
}

impl Homa<'_> {
    /// The header is complete but the payload was cut by the snap length.
    pub fn truncated(&self) -> bool {
        self.captured < self.wire_len
    }
    /// DATA: payload bytes on the wire.
    pub fn payload_len(&self) -> usize {
        self.wire_len.saturating_sub(self.header_len)
    }
    /// DATA: payload bytes captured.
    pub fn captured_payload_len(&self) -> usize {
        self.captured.saturating_sub(self.header_len)
    }
    /// The common header (28 bytes) was captured.
    pub fn has_common_header(&self) -> bool {
        self.captured >= homa::COMMON_HEADER_LEN
    }
}

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

/// The layer above IP.
#[derive(Debug, Clone)]
pub enum Transport<'a> {
    /// Homa.
    Homa(Homa<'a>),
    /// ICMP, when the whole message was captured.
    Icmp(Foreign),
    /// Something else, shown as a note (`UDP, 40 bytes`, `fragment`).
    Other(String),
    /// A packet that cannot be read: what is wrong with it.
    Malformed(String),
}

/// The network layer.
#[derive(Debug, Clone)]
pub enum Net<'a> {
    /// IPv4 or IPv6.
    Ip(Ip, Transport<'a>),
    /// ARP.
    Arp(Foreign),
    /// Nothing to show above the link layer: a note (`ethertype 0x88cc`).
    Other(String),
    /// A frame that cannot be read above the link layer (or at it): what is
    /// wrong (`malformed IPv4: truncated`, an undeclared interface).
    Malformed(String),
}

/// A frame taken apart.
#[derive(Debug, Clone)]
pub struct Decoded<'a> {
    /// Its link header; `None` if it was not captured or the link type is
    /// not one homa-dump reads.
    pub link: Option<Link>,
    /// Everything above.
    pub net: Net<'a>,
}

impl Decoded<'_> {
    /// The Homa packet, if the frame is one.
    pub fn homa(&self) -> Option<&Homa<'_>> {
        match &self.net {
            Net::Ip(_, Transport::Homa(h)) => Some(h),
            _ => None,
        }
    }
    /// The IP header, if any.
    pub fn ip(&self) -> Option<&Ip> {
        match &self.net {
            Net::Ip(ip, _) => Some(ip),
            _ => None,
        }
    }
}

/// Takes `record` apart. Never panics.
pub fn decode(record: &Record) -> Decoded<'_> {
    let data = &record.data[..];
    let (link, ethertype, rest) = match record.link_type {
        LINKTYPE_ETHERNET => match ethernet(data) {
            Some(parts) => parts,
            None => return malformed(None, "malformed Ethernet: truncated"),
        },
        LINKTYPE_LINUX_SLL => match sll1(data) {
            Some(parts) => parts,
            None => return malformed(None, "malformed Linux cooked header: truncated"),
        },
        LINKTYPE_LINUX_SLL2 => match sll2(data) {
            Some(parts) => parts,
            None => return malformed(None, "malformed Linux cooked v2 header: truncated"),
        },
        LINKTYPE_RAW => {
            let ethertype = match data.first().map(|b| b >> 4) {
                Some(6) => EtherType::Ipv6,
                _ => EtherType::Ipv4,
            };
            (Link::Raw, ethertype, data)
        }
        LINKTYPE_IPV4 => (Link::Raw, EtherType::Ipv4, data),
        LINKTYPE_IPV6 => (Link::Raw, EtherType::Ipv6, data),
        LINKTYPE_UNDECLARED => return malformed(None, "frame of an undeclared interface"),
        other => return malformed(None, &format!("link type {other} is not supported")),
    };
    let net = match ethertype {
        EtherType::Ipv4 | EtherType::Ipv6 => ip(ethertype, rest),
        EtherType::Arp => match foreign(EtherType::Arp, rest) {
            Some(f) => Net::Arp(f),
            None => Net::Malformed(format!("malformed ARP ({} bytes)", rest.len())),
        },
        other => Net::Other(format!(
            "ethertype 0x{:04x}, {} bytes",
            u16::from(other),
            rest.len()
        )),
    };
    Decoded {
        link: Some(link),
        net,
    }
}

fn malformed(link: Option<Link>, text: &str) -> Decoded<'static> {
    Decoded {
        link,
        net: Net::Malformed(text.to_string()),
    }
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Ethernet II with optional 802.1Q / 802.1ad tags.
fn ethernet(data: &[u8]) -> Option<(Link, EtherType, &[u8])> {
    let dst: [u8; 6] = data.get(0..6)?.try_into().ok()?;
    let src: [u8; 6] = data.get(6..12)?.try_into().ok()?;
    let mut at = 12;
    let mut vlans = Vec::new();
    let mut ethertype = EtherType::from(be16(data, at)?);
    while (ethertype == EtherType::Vlan || ethertype == ETHERTYPE_QINQ) && vlans.len() < 2 {
        vlans.push(be16(data, at + 2)? & 0x0fff);
        at += 4;
        ethertype = EtherType::from(be16(data, at)?);
    }
    Some((
        Link::Ethernet { src, dst, vlans },
        ethertype,
        &data[at + 2..],
    ))
}

/// Linux cooked v1: pkttype, hatype, halen, 8 address bytes, protocol.
fn sll1(data: &[u8]) -> Option<(Link, EtherType, &[u8])> {
    let pkttype = be16(data, 0)?;
    let hatype = be16(data, 2)?;
    let halen = usize::from(be16(data, 4)?).min(8);
    let addr = data.get(6..6 + halen)?.to_vec();
    let ethertype = EtherType::from(be16(data, 14)?);
    let link = Link::Sll {
        version: 1,
        pkttype,
        hatype,
        addr,
        ifindex: None,
    };
    Some((link, ethertype, data.get(16..)?))
}

/// Linux cooked v2: protocol, reserved, ifindex, hatype, pkttype, halen,
/// 8 address bytes.
fn sll2(data: &[u8]) -> Option<(Link, EtherType, &[u8])> {
    let ethertype = EtherType::from(be16(data, 0)?);
    let ifindex = be32(data, 4)?;
    let hatype = be16(data, 8)?;
    let pkttype = u16::from(*data.get(10)?);
    let halen = usize::from(*data.get(11)?).min(8);
    let addr = data.get(12..12 + halen)?.to_vec();
    let link = Link::Sll {
        version: 2,
        pkttype,
        hatype,
        addr,
        ifindex: Some(ifindex),
    };
    Some((link, ethertype, data.get(20..)?))
}

/// The IP layer; `ethertype` says which version the link layer announced.
fn ip(ethertype: EtherType, data: &[u8]) -> Net<'_> {
    let name = if ethertype == EtherType::Ipv6 {
        "IPv6"
    } else {
        "IPv4"
    };
    let version = data.first().map(|b| b >> 4);
    let expected = if ethertype == EtherType::Ipv6 { 6 } else { 4 };
    if let Some(v) = version.filter(|&v| v != expected) {
        return Net::Malformed(format!("malformed {name}: version {v}"));
    }
    let parsed = if expected == 4 {
        ipv4(data)
    } else {
        ipv6(data)
    };
    let Some((ip, payload)) = parsed else {
        return Net::Malformed(format!("malformed {name}: truncated, {} bytes", data.len()));
    };
    // What was captured of the payload, without link-layer padding.
    let captured = &payload[..payload.len().min(ip.payload_len)];
    let whole = captured.len() == ip.payload_len;
    let transport = if ip.fragment {
        Transport::Other("fragment".into())
    } else {
        match ip.proto {
            146 => homa_transport(&ip, captured, false),
            6 if is_hijacked(captured) => homa_transport(&ip, captured, true),
            1 | 58 if whole => {
                let ethertype = if ip.version == 6 {
                    EtherType::Ipv6
                } else {
                    EtherType::Ipv4
                };
                let end = ip.header_len + ip.payload_len;
                match foreign(ethertype, &data[..end]) {
                    Some(f) => Transport::Icmp(f),
                    None => Transport::Malformed(format!(
                        "malformed {}: {} bytes",
                        IpProtocol::from(ip.proto),
                        ip.payload_len
                    )),
                }
            }
            proto => Transport::Other(format!(
                "{}, {} bytes{}",
                IpProtocol::from(proto),
                ip.payload_len,
                if whole { "" } else { " [truncated]" }
            )),
        }
    };
    Net::Ip(ip, transport)
}

fn ipv4(data: &[u8]) -> Option<(Ip, &[u8])> {
    let header_len = usize::from(data.first()? & 0x0f) * 4;
    if header_len < 20 {
        return None;
    }
    let header = data.get(..header_len)?;
    let total = usize::from(be16(header, 2)?);
    if total < header_len {
        return None;
    }
    let src = Ipv4Addr::from(be32(header, 12)?);
    let dst = Ipv4Addr::from(be32(header, 16)?);
    let frag = be16(header, 6)?;
    let ip = Ip {
        version: 4,
        src: src.into(),
        dst: dst.into(),
        proto: header[9],
        tos: header[1],
        ttl: header[8],
        ident: be16(header, 4)?,
        header_len,
        payload_len: total - header_len,
        checksum: Some((be16(header, 10)?, checksum::data(header) == 0)),
        // More fragments, or a fragment offset.
        fragment: frag & 0x3fff != 0,
    };
    Some((ip, &data[header_len..]))
}

/// IPv6 extension headers skipped on the way to the transport: hop-by-hop
/// options, routing, fragment, destination options.
const IPV6_HOP_BY_HOP: u8 = 0;
const IPV6_ROUTING: u8 = 43;
const IPV6_FRAGMENT: u8 = 44;
const IPV6_DEST_OPTS: u8 = 60;
/// More extension headers than this are taken as malformed.
const IPV6_MAX_EXTENSIONS: usize = 8;

fn ipv6(data: &[u8]) -> Option<(Ip, &[u8])> {
    let header = data.get(..40)?;
    let src: [u8; 16] = header[8..24].try_into().ok()?;
    let dst: [u8; 16] = header[24..40].try_into().ok()?;
    let word = be32(header, 0)?;
    let plen = usize::from(be16(header, 4)?);
    let mut next = header[6];
    let mut at = 40;
    let mut fragment = false;
    for _ in 0..IPV6_MAX_EXTENSIONS {
        match next {
            IPV6_HOP_BY_HOP | IPV6_ROUTING | IPV6_DEST_OPTS => {
                next = *data.get(at)?;
                at += (usize::from(*data.get(at + 1)?) + 1) * 8;
            }
            IPV6_FRAGMENT => {
                next = *data.get(at)?;
                // An offset or the more-fragments bit: part of a datagram.
                fragment |= be16(data, at + 2)? & 0xfff9 != 0;
                at += 8;
            }
            _ => break,
        }
    }
    if at - 40 > plen || at > data.len() {
        return None;
    }
    let ip = Ip {
        version: 6,
        src: Ipv6Addr::from(src).into(),
        dst: Ipv6Addr::from(dst).into(),
        proto: next,
        tos: ((word >> 20) & 0xff) as u8,
        ttl: header[7],
        ident: 0,
        header_len: at,
        payload_len: plen - (at - 40),
        checksum: None,
        fragment,
    };
    Some((ip, &data[at..]))
}

/// A TCP segment with Linux's Homa markers (protocol.md 2.4).
fn is_hijacked(data: &[u8]) -> bool {
    data.len() >= 20 && data[13] == HIJACK_FLAGS && be16(data, 18) == Some(HIJACK_URGENT)
}

/// The header length of a Homa type; RESEND's depends on the wire length
/// (36 bytes from upstream builds, 37 from the full module).
pub fn header_len(ptype: PacketType, wire_len: usize) -> Option<usize> {
    Some(match ptype {
        PacketType::Data => homa::DATA_HEADER_LEN,
        PacketType::Grant => homa::GRANT_HEADER_LEN,
        PacketType::Resend if wire_len >= homa::RESEND_HEADER_LEN => homa::RESEND_HEADER_LEN,
        PacketType::Resend => homa::RESEND_UPSTREAM_HEADER_LEN,
        PacketType::Cutoffs => 62,
        PacketType::Ack => 80,
        PacketType::RpcUnknown | PacketType::Busy | PacketType::Freeze | PacketType::NeedAck => {
            homa::COMMON_HEADER_LEN
        }
        PacketType::Unknown(_) => return None,
    })
}

fn homa_transport<'a>(ip: &Ip, captured: &'a [u8], hijacked: bool) -> Transport<'a> {
    let wire_len = ip.payload_len;
    let packet = homa::Packet::new_unchecked(captured);
    if wire_len <= 11 {
        return Transport::Malformed(format!(
            "malformed HOMA: {wire_len} bytes, shorter than the common header"
        ));
    }
    if captured.len() <= 11 {
        return Transport::Other(format!(
            "HOMA [header truncated: {} of {wire_len} bytes captured]",
            captured.len()
        ));
    }
    let ptype = packet.packet_type();
    let Some(header_len) = header_len(ptype, wire_len) else {
        return Transport::Malformed(format!(
            "malformed HOMA: unknown type 0x{:02x}",
            u8::from(ptype)
        ));
    };
    if wire_len < header_len {
        return Transport::Malformed(format!(
            "malformed HOMA: {ptype} of {wire_len} bytes, shorter than its {header_len}-byte header"
        ));
    }
    let repr = if captured.len() >= header_len {
        homa::Packet::new_checked(captured)
            .ok()
            .and_then(|p| homa::Repr::parse(&p).ok())
    } else {
        None
    };
    let checksum = if captured.len() < wire_len {
        HomaChecksum::Unverified
    } else {
        homa_checksum(&ip.src, &ip.dst, captured)
    };
    Transport::Homa(Homa {
        packet,
        ptype,
        wire_len,
        captured: captured.len(),
        header_len,
        repr,
        hijacked,
        checksum,
    })
}

/// The Homa checksum's state (protocol.md 2.3): TCP-style over the whole
/// packet with a protocol-6 pseudo-header.
pub fn homa_checksum(src: &IpAddr, dst: &IpAddr, data: &[u8]) -> HomaChecksum {
    let field = be16(data, 16).unwrap_or(0);
    if field == 0 {
        return HomaChecksum::Zero;
    }
    let len = data.len() as u32;
    let pseudo = match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => checksum::pseudo_header_v4(s, d, IpProtocol::Tcp, len),
        (IpAddr::V6(s), IpAddr::V6(d)) => checksum::pseudo_header_v6(s, d, IpProtocol::Tcp, len),
        _ => return HomaChecksum::Bad(0),
    };
    let all = checksum::combine(&[pseudo, checksum::sum(data)]);
    if all == 0xffff {
        return HomaChecksum::Ok;
    }
    // CHECKSUM_PARTIAL leaves the folded pseudo-header sum in the field.
    if u32::from(field) == checksum::fold(pseudo) {
        return HomaChecksum::Partial;
    }
    // The sum without the field, complemented, is the right value.
    let without = checksum::combine(&[pseudo, checksum::sum(data), u32::from(!field)]);
    HomaChecksum::Bad(checksum::finish(without))
}

/// ARP or ICMP through homa-stack's dissector: the packet behind a
/// made-up Ethernet header.
fn foreign(ethertype: EtherType, packet: &[u8]) -> Option<Foreign> {
    let mut frame = Vec::with_capacity(14 + packet.len());
    frame.extend_from_slice(&[0; 12]);
    frame.extend_from_slice(&u16::from(ethertype).to_be_bytes());
    frame.extend_from_slice(packet);
    let d = dissect(&frame);
    let json = super::json::foreign_json(&d)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv6 header announcing `plen` payload bytes, then `rest`.
    fn v6(next: u8, plen: u16, rest: &[u8]) -> Vec<u8> {
        let mut p = vec![0x60, 0, 0, 0];
        p.extend_from_slice(&plen.to_be_bytes());
        p.extend_from_slice(&[next, 64]);
        p.extend_from_slice(&[0xfd; 32]);
        p.extend_from_slice(rest);
        p
    }

    #[test]
    fn ipv6_extension_headers_are_skipped() {
        // Destination options (8 bytes), then a whole-datagram fragment
        // header (offset 0, no more fragments), then Homa.
        let mut rest = vec![44, 0, 1, 4, 0, 0, 0, 0];
        rest.extend_from_slice(&[146, 0, 0, 0, 0, 0, 0, 1]);
        rest.extend_from_slice(&[0; 28]);
        let p = v6(60, rest.len() as u16, &rest);
        let (ip, payload) = ipv6(&p).unwrap();
        assert_eq!((ip.proto, ip.header_len, ip.payload_len), (146, 56, 28));
        assert!(!ip.fragment);
        assert_eq!(payload.len(), 28);
        // A fragment with an offset.
        let mut frag = rest.clone();
        frag[10..12].copy_from_slice(&0x0008u16.to_be_bytes());
        assert!(ipv6(&v6(60, frag.len() as u16, &frag)).unwrap().0.fragment);
        // Extension headers longer than the payload, or than the capture.
        assert!(ipv6(&v6(60, 8, &rest)).is_none());
        assert!(ipv6(&v6(60, rest.len() as u16, &rest[..12])).is_none());
    }

    #[test]
    fn homa_checksum_states() {
        let src: IpAddr = Ipv4Addr::new(10, 0, 0, 1).into();
        let dst: IpAddr = Ipv4Addr::new(10, 0, 0, 2).into();
        let mut packet = vec![0u8; 28];
        packet[11] = 0x14;
        assert_eq!(homa_checksum(&src, &dst, &packet), HomaChecksum::Zero);
        let mut p = homa::Packet::new_unchecked(&mut packet[..]);
        p.fill_checksum(&src, &dst);
        let good = p.checksum();
        assert_eq!(homa_checksum(&src, &dst, &packet), HomaChecksum::Ok);
        packet[16..18].copy_from_slice(&(good ^ 0x0101).to_be_bytes());
        assert_eq!(homa_checksum(&src, &dst, &packet), HomaChecksum::Bad(good));
        let IpAddr::V4(s) = src else { unreachable!() };
        let IpAddr::V4(d) = dst else { unreachable!() };
        let pseudo = checksum::fold(checksum::pseudo_header_v4(&s, &d, IpProtocol::Tcp, 28));
        packet[16..18].copy_from_slice(&(pseudo as u16).to_be_bytes());
        assert_eq!(homa_checksum(&src, &dst, &packet), HomaChecksum::Partial);
    }
}
