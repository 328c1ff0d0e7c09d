//! One captured frame taken apart: the link header of its link type, IPv4
//! or IPv6, and Homa, as far as the captured bytes go.
//!
//! Every header is read through homa-stack's `wire` views. A frame cut by
//! the snap length still shows every header it holds: the IP header is read
//! through the views' truncated mode (`new_truncated`), which does not
//! require the datagram's announced length, and a Homa header that is
//! complete is decoded with its payload marked as truncated. IPv6 extension
//! headers are followed as homa-stack follows them, and past a fragment
//! header. ARP and ICMP, which need whole packets, go through
//! `wire::dissect`. Only the Linux cooked headers, a capture format rather
//! than a wire format, are read here.

use std::net::IpAddr;

use homa_phy::share::ipv6_upper_layer;
use homa_stack::wire::homa::{self, PacketType};
use homa_stack::wire::ipv6::HEADER_LEN as IPV6_HEADER_LEN;
use homa_stack::wire::pretty::is_hijacked;
use homa_stack::wire::{EtherType, EthernetFrame, IpProtocol, Ipv4Packet, Ipv6Packet, VlanTag};

use super::foreign::foreign;
pub use super::foreign::Foreign;

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

/// A link-layer address as colon-separated hex bytes.
pub fn mac_text(b: &[u8]) -> String {
    let parts: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
    parts.join(":")
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
    /// A fragment of a larger datagram.
    pub fragment: Option<Fragment>,
}

/// A fragment's byte offset and whether more fragments follow.
pub type Fragment = (usize, bool);

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
    // A frame captured whole cannot be cut short by the snap length.
    let whole_frame = record.data.len() >= record.orig_len;
    let net = match ethertype {
        EtherType::Ipv4 | EtherType::Ipv6 => ip(ethertype, rest, whole_frame),
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

/// Ethernet II with up to two 802.1Q / 802.1ad tags.
fn ethernet(data: &[u8]) -> Option<(Link, EtherType, &[u8])> {
    let frame = EthernetFrame::new_checked(data).ok()?;
    let mut vlans: Vec<u16> = frame.vlan_tag().map(|tag| tag.vid).into_iter().collect();
    let mut ethertype = frame.ethertype();
    let mut rest = frame.payload();
    // `wire` unwraps one 802.1Q tag; a service tag, or a tag behind the
    // first, is unwrapped here: its control information, then the type.
    while (ethertype == EtherType::Vlan || ethertype == ETHERTYPE_QINQ) && vlans.len() < 2 {
        let [tci_hi, tci_lo, type_hi, type_lo, ..] = *rest else {
            return None;
        };
        vlans.push(VlanTag::from_tci(u16::from_be_bytes([tci_hi, tci_lo])).vid);
        ethertype = EtherType::from(u16::from_be_bytes([type_hi, type_lo]));
        rest = &rest[4..];
    }
    let link = Link::Ethernet {
        src: frame.src_addr().0,
        dst: frame.dst_addr().0,
        vlans,
    };
    Some((link, ethertype, rest))
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

/// The IP layer; `ethertype` says which version the link layer announced,
/// `whole_frame` whether the capture holds all of the frame (so a datagram
/// longer than what was captured is malformed, not cut by the snap length).
fn ip(ethertype: EtherType, data: &[u8], whole_frame: bool) -> Net<'_> {
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
        ipv4(data).ok_or("truncated")
    } else {
        ipv6(data)
    };
    let (ip, payload) = match parsed {
        Ok(parts) => parts,
        Err(why) => {
            return Net::Malformed(format!("malformed {name}: {why}, {} bytes", data.len()))
        }
    };
    // What was captured of the payload, without link-layer padding.
    let captured = &payload[..payload.len().min(ip.payload_len)];
    let whole = captured.len() == ip.payload_len;
    if !whole && whole_frame {
        let why = format!(
            "malformed {name}: the header announces {} payload bytes, the frame holds {}",
            ip.payload_len,
            captured.len()
        );
        return Net::Ip(ip, Transport::Malformed(why));
    }
    let transport = if let Some((offset, more)) = ip.fragment {
        let what = format!(
            "{name} fragment (offset {offset}{})",
            if more { ", more fragments" } else { "" }
        );
        if ip.proto == u8::from(IpProtocol::Homa) {
            // Homa never sends IP fragments: such a packet is not Homa's.
            Transport::Malformed(format!(
                "{what} of protocol 146 (HOMA): Homa never sends IP fragments"
            ))
        } else {
            Transport::Other(what)
        }
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

/// The IPv4 header, and what was captured of the payload it announces.
fn ipv4(data: &[u8]) -> Option<(Ip, &[u8])> {
    let packet = Ipv4Packet::new_truncated(data).ok()?;
    let header_len = usize::from(packet.header_len());
    let ip = Ip {
        version: 4,
        src: packet.src_addr().into(),
        dst: packet.dst_addr().into(),
        proto: packet.next_header().into(),
        tos: packet.tos(),
        ttl: packet.hop_limit(),
        ident: packet.ident(),
        header_len,
        payload_len: usize::from(packet.total_len()) - header_len,
        checksum: Some((packet.checksum(), packet.verify_checksum())),
        fragment: (packet.more_frags() || packet.frag_offset() != 0)
            .then(|| (usize::from(packet.frag_offset()), packet.more_frags())),
    };
    Some((ip, packet.captured_payload()))
}

/// The IPv6 fragment header's number, which homa-stack does not follow.
const IPV6_FRAGMENT: u8 = 44;
/// Fragment headers followed before the packet is taken as malformed.
const IPV6_MAX_FRAGMENT_HEADERS: usize = 1;

/// The IPv6 header with its extension headers, and what was captured of
/// the payload after them; or why they cannot be read.
fn ipv6(data: &[u8]) -> Result<(Ip, &[u8]), &'static str> {
    let packet = Ipv6Packet::new_truncated(data).map_err(|_| "truncated")?;
    let payload = packet.captured_payload();
    let (proto, upper, fragment) = upper_layer(packet.next_header().into(), payload)
        .ok_or("extension headers cut short, too many or routed on")?;
    let extensions = payload.len() - upper.len();
    let ip = Ip {
        version: 6,
        src: packet.src_addr().into(),
        dst: packet.dst_addr().into(),
        proto,
        tos: packet.traffic_class(),
        ttl: packet.hop_limit(),
        ident: 0,
        header_len: IPV6_HEADER_LEN + extensions,
        payload_len: usize::from(packet.payload_len()) - extensions,
        checksum: None,
        fragment,
    };
    Ok((ip, upper))
}

/// Follows the extension headers from `next` over `rest` as homa-stack does
/// ([`ipv6_upper_layer`]), and past a fragment header, which it does not
/// follow: the upper-layer protocol, its captured bytes, and, for a fragment
/// of a larger datagram, its byte offset and whether more follow.
fn upper_layer(mut next: u8, mut rest: &[u8]) -> Option<(u8, &[u8], Option<Fragment>)> {
    let mut fragment = None;
    for _ in 0..=IPV6_MAX_FRAGMENT_HEADERS {
        let (proto, upper) = ipv6_upper_layer(next, rest)?;
        if proto != IPV6_FRAGMENT {
            return Some((proto, upper, fragment));
        }
        // Next header, reserved, then the offset (8-byte units) above the
        // more-fragments bit.
        let [nh, _, offset_hi, offset_lo, ..] = *upper else {
            return None;
        };
        let offset_flags = u16::from_be_bytes([offset_hi, offset_lo]);
        let (offset, more) = (usize::from(offset_flags >> 3) * 8, offset_flags & 1 != 0);
        if offset != 0 || more {
            fragment = Some((offset, more));
        }
        next = nh;
        rest = upper.get(8..)?;
    }
    None
}

/// The header length of a Homa type; RESEND's depends on the wire length
/// (36 bytes from upstream builds, 37 from the full module).
pub fn header_len(ptype: PacketType, wire_len: usize) -> Option<usize> {
    match ptype {
        PacketType::Resend if wire_len < homa::RESEND_HEADER_LEN => {
            Some(homa::RESEND_UPSTREAM_HEADER_LEN)
        }
        other => other.header_len(),
    }
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
    let packet = homa::Packet::new_unchecked(data);
    let field = packet.checksum();
    if field == 0 {
        return HomaChecksum::Zero;
    }
    if packet.verify_checksum(src, dst) {
        return HomaChecksum::Ok;
    }
    if homa::partial_checksum(src, dst, data.len()) == Some(field) {
        return HomaChecksum::Partial;
    }
    // A mixed address pair cannot occur: both come from one IP header.
    HomaChecksum::Bad(packet.expected_checksum(src, dst).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use homa_stack::wire::{checksum, Ipv4Addr};

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
        assert_eq!(ip.fragment, None);
        assert_eq!(payload.len(), 28);
        // A fragment with an offset.
        let mut frag = rest.clone();
        frag[10..12].copy_from_slice(&0x0008u16.to_be_bytes());
        let frag = ipv6(&v6(60, frag.len() as u16, &frag)).unwrap().0.fragment;
        assert_eq!(frag, Some((8, false)));
        // Extension headers longer than the payload, or than the capture.
        assert!(ipv6(&v6(60, 8, &rest)).is_err());
        assert!(ipv6(&v6(60, rest.len() as u16, &rest[..12])).is_err());
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
