//! Whole Ethernet frames, every layer parsed, on one line: a tcpdump for Homa.
//!
//! [`dissect`] walks a frame layer by layer (Ethernet, then ARP / IPv4 /
//! IPv6, then ICMPv4 / ICMPv6 / Homa) and returns each layer's
//! representation as far as it parses; [`PrettyFrame`] shows that as one
//! line. A Homa packet reads as [`homa::Repr::display_with`] does, with the
//! priority taken from the IP header (TOS or traffic class `>> 5`,
//! docs/protocol.md 2.2):
//!
//! ```text
//! 02:00:00:00:00:01 > 02:00:00:00:00:02, DATA 10.0.0.1:32768 > 10.0.0.2:500 id 1234 off 1424 len 1424/100000 incoming 40000 prio 5
//! 02:00:00:00:00:02 > 02:00:00:00:00:01 vlan 7 pcp 3, 10.0.0.2 > 10.0.0.1 ICMPv4 echo reply id 7 seq 9 len 4
//! 02:00:00:00:00:01 > 02:00:00:00:00:02, IPv4 10.0.0.1 > 10.0.0.2 HOMA tos 0x00 len 20 [malformed HOMA: truncated]
//! ```
//!
//! Every layer enters through `new_checked` and `Repr::parse`, so no input
//! panics and nothing allocates; a layer that does not parse ends the line
//! with a `[malformed LAYER: why]` note after what did parse. Checksums are
//! not required to be right, but a wrong IPv4 header or ICMP checksum is
//! noted. Homa's is not (no receiver checks it, docs/protocol.md 2.3).
//!
//! TCP packets carrying Linux's hijack markers (flags 6, urgent 0xb97d,
//! docs/protocol.md 2.4) are shown as the Homa packets they are, marked
//! ` hijacked`.

use core::fmt;

use super::homa;
use super::{
    ArpPacket, ArpRepr, EtherType, EthernetFrame, EthernetRepr, Icmpv4Message, Icmpv4Packet,
    Icmpv4Repr, Icmpv6Message, Icmpv6Packet, Icmpv6Repr, IpAddr, IpProtocol, Ipv4Packet, Ipv4Repr,
    Ipv6Packet, Ipv6Repr,
};

/// The TCP flags byte (SYN|RST) Linux puts on Homa packets sent as TCP.
pub const HIJACK_FLAGS: u8 = 6;
/// The TCP urgent pointer Linux puts on Homa packets sent as TCP.
pub const HIJACK_URGENT: u16 = 0xb97d;

/// Why a layer did not parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Problem {
    /// Shorter than its header, or than the length its header announces.
    Truncated,
    /// The IP version field disagrees with the ether type.
    Version(u8),
    /// An IPv4 fragment (only whole datagrams are dissected).
    Fragment,
    /// A Homa type byte outside 0x10..=0x18.
    UnknownType(u8),
    /// ARP for something other than Ethernet and IPv4.
    Unsupported,
    /// A field value the parser rejects (an ICMP code, a neighbor discovery
    /// option, a quoted header).
    BadField,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Truncated => f.write_str("truncated"),
            Problem::Version(v) => write!(f, "version {v}"),
            Problem::Fragment => f.write_str("fragment"),
            Problem::UnknownType(t) => write!(f, "unknown type 0x{t:02x}"),
            Problem::Unsupported => f.write_str("not Ethernet/IPv4"),
            Problem::BadField => f.write_str("bad field"),
        }
    }
}

/// The link layer of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Link {
    /// An Ethernet II header.
    Ethernet(EthernetRepr),
    /// Shorter than an Ethernet header (with its tag, if it announces one).
    Malformed,
}

/// The network layer of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Network {
    /// Nothing: the link layer did not parse.
    None,
    /// An ARP packet.
    Arp(ArpRepr),
    /// An IPv4 header.
    Ipv4 {
        /// The header.
        repr: Ipv4Repr,
        /// The header checksum is right.
        checksum_ok: bool,
    },
    /// An IPv6 fixed header.
    Ipv6(Ipv6Repr),
    /// An ether type this module does not dissect.
    Other {
        /// The ether type (inner, for a tagged frame).
        ethertype: EtherType,
        /// Bytes after the Ethernet header.
        len: usize,
    },
    /// A known ether type whose packet does not parse.
    Malformed {
        /// The ether type.
        ethertype: EtherType,
        /// Why.
        problem: Problem,
        /// Bytes after the Ethernet header.
        len: usize,
    },
}

/// The layer above IP.
// No defmt::Format: `homa::Packet` has none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport<'a> {
    /// Nothing: no IP layer.
    None,
    /// An ICMPv4 message of a type the stack understands.
    Icmpv4 {
        /// The message.
        repr: Icmpv4Repr<'a>,
        /// The checksum is right.
        checksum_ok: bool,
    },
    /// An ICMPv6 message of a type the stack understands.
    Icmpv6 {
        /// The message.
        repr: Icmpv6Repr<'a>,
        /// The checksum (over the pseudo-header) is right.
        checksum_ok: bool,
    },
    /// Another ICMP message type, well formed as far as its 8-byte header.
    IcmpOther {
        /// 4 or 6.
        ip_version: u8,
        /// The type byte.
        msg_type: u8,
        /// The code byte.
        code: u8,
        /// Bytes of the message.
        len: usize,
    },
    /// A Homa packet.
    Homa {
        /// What it says.
        repr: homa::Repr<'a>,
        /// The packet itself, for the fields `repr` does not keep (raw
        /// `sequence`, `seg.offset`, `doff`, `flags`, `checksum`, ...).
        packet: homa::Packet<&'a [u8]>,
        /// Carried as TCP with Linux's hijack markers.
        hijacked: bool,
    },
    /// A protocol this module does not dissect.
    Other {
        /// The IP protocol number.
        protocol: IpProtocol,
        /// Bytes of IP payload.
        len: usize,
    },
    /// A known protocol whose packet does not parse.
    Malformed {
        /// The protocol ([`IpProtocol::Homa`] for a hijacked TCP packet).
        protocol: IpProtocol,
        /// Why.
        problem: Problem,
        /// Bytes of IP payload.
        len: usize,
    },
}

/// A frame taken apart, layer by layer, as far as it parses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dissection<'a> {
    /// Bytes in the frame.
    pub len: usize,
    /// The Ethernet header.
    pub link: Link,
    /// ARP, IPv4 or IPv6.
    pub network: Network,
    /// ICMP or Homa.
    pub transport: Transport<'a>,
}

impl Dissection<'_> {
    /// The IP source and destination, if the network layer is IP.
    pub fn ip_addrs(&self) -> Option<(IpAddr, IpAddr)> {
        match self.network {
            Network::Ipv4 { repr, .. } => Some((repr.src_addr.into(), repr.dst_addr.into())),
            Network::Ipv6(repr) => Some((repr.src_addr.into(), repr.dst_addr.into())),
            _ => None,
        }
    }

    /// The Homa priority the IP header carries: TOS or traffic class `>> 5`.
    pub fn ip_priority(&self) -> Option<u8> {
        match self.network {
            Network::Ipv4 { repr, .. } => Some(repr.tos >> 5),
            Network::Ipv6(repr) => Some(repr.traffic_class >> 5),
            _ => None,
        }
    }
}

/// Takes an Ethernet frame apart. Never panics, never allocates.
pub fn dissect(frame: &[u8]) -> Dissection<'_> {
    let mut d = Dissection {
        len: frame.len(),
        link: Link::Malformed,
        network: Network::None,
        transport: Transport::None,
    };
    let Ok(eth_frame) = EthernetFrame::new_checked(frame) else {
        return d;
    };
    let Ok(eth) = EthernetRepr::parse(&eth_frame) else {
        return d;
    };
    d.link = Link::Ethernet(eth);
    let payload = eth_frame.payload();
    let malformed = |problem| Network::Malformed {
        ethertype: eth.ethertype,
        problem,
        len: payload.len(),
    };
    match eth.ethertype {
        EtherType::Arp => {
            d.network = match ArpPacket::new_checked(payload) {
                Err(_) => malformed(Problem::Truncated),
                Ok(packet) => match ArpRepr::parse(&packet) {
                    Ok(repr) => Network::Arp(repr),
                    Err(_) => malformed(Problem::Unsupported),
                },
            }
        }
        EtherType::Ipv4 => {
            // The version first: another version's header has other lengths.
            if let Some(version) = ip_version(payload).filter(|&v| v != 4) {
                d.network = malformed(Problem::Version(version));
                return d;
            }
            let Ok(packet) = Ipv4Packet::new_checked(payload) else {
                d.network = malformed(Problem::Truncated);
                return d;
            };
            // The version is 4 and the lengths fit: only a fragment fails.
            let Ok(repr) = Ipv4Repr::parse(&packet, false) else {
                d.network = malformed(Problem::Fragment);
                return d;
            };
            d.network = Network::Ipv4 {
                repr,
                checksum_ok: packet.verify_checksum(),
            };
            d.transport = match repr.next_header {
                IpProtocol::Icmp => icmpv4(packet.payload()),
                protocol => homa_or_other(protocol, packet.payload()),
            };
        }
        EtherType::Ipv6 => {
            if let Some(version) = ip_version(payload).filter(|&v| v != 6) {
                d.network = malformed(Problem::Version(version));
                return d;
            }
            let Ok(packet) = Ipv6Packet::new_checked(payload) else {
                d.network = malformed(Problem::Truncated);
                return d;
            };
            // Version and length were checked, so this cannot fail.
            let Ok(repr) = Ipv6Repr::parse(&packet) else {
                d.network = malformed(Problem::Truncated);
                return d;
            };
            d.network = Network::Ipv6(repr);
            d.transport = match repr.next_header {
                IpProtocol::Icmpv6 => icmpv6(&repr, packet.payload()),
                protocol => homa_or_other(protocol, packet.payload()),
            };
        }
        ethertype => {
            d.network = Network::Other {
                ethertype,
                len: payload.len(),
            }
        }
    }
    d
}

/// The high nibble of the first byte, if there is one.
fn ip_version(packet: &[u8]) -> Option<u8> {
    packet.first().map(|b| b >> 4)
}

fn icmpv4(data: &[u8]) -> Transport<'_> {
    let Ok(packet) = Icmpv4Packet::new_checked(data) else {
        return Transport::Malformed {
            protocol: IpProtocol::Icmp,
            problem: Problem::Truncated,
            len: data.len(),
        };
    };
    match Icmpv4Repr::parse(&packet, false) {
        Ok(repr) => Transport::Icmpv4 {
            repr,
            checksum_ok: packet.verify_checksum(),
        },
        // The types the stack parses failed on a field; others are just
        // not dissected.
        Err(_) => match packet.msg_type() {
            Icmpv4Message::EchoRequest
            | Icmpv4Message::EchoReply
            | Icmpv4Message::DstUnreachable => Transport::Malformed {
                protocol: IpProtocol::Icmp,
                problem: Problem::BadField,
                len: data.len(),
            },
            msg_type => Transport::IcmpOther {
                ip_version: 4,
                msg_type: msg_type.into(),
                code: packet.msg_code(),
                len: data.len(),
            },
        },
    }
}

fn icmpv6<'a>(ip: &Ipv6Repr, data: &'a [u8]) -> Transport<'a> {
    let Ok(packet) = Icmpv6Packet::new_checked(data) else {
        return Transport::Malformed {
            protocol: IpProtocol::Icmpv6,
            problem: Problem::Truncated,
            len: data.len(),
        };
    };
    match Icmpv6Repr::parse(&ip.src_addr, &ip.dst_addr, &packet, false) {
        Ok(repr) => Transport::Icmpv6 {
            repr,
            checksum_ok: packet.verify_checksum(&ip.src_addr, &ip.dst_addr),
        },
        Err(_) => match packet.msg_type() {
            Icmpv6Message::EchoRequest
            | Icmpv6Message::EchoReply
            | Icmpv6Message::DstUnreachable
            | Icmpv6Message::NeighborSolicit
            | Icmpv6Message::NeighborAdvert => Transport::Malformed {
                protocol: IpProtocol::Icmpv6,
                problem: Problem::BadField,
                len: data.len(),
            },
            msg_type => Transport::IcmpOther {
                ip_version: 6,
                msg_type: msg_type.into(),
                code: packet.msg_code(),
                len: data.len(),
            },
        },
    }
}

/// Homa if the protocol is 146, or TCP with the hijack markers.
fn homa_or_other(protocol: IpProtocol, data: &[u8]) -> Transport<'_> {
    let hijacked = protocol == IpProtocol::Tcp && is_hijacked(data);
    if protocol != IpProtocol::Homa && !hijacked {
        return Transport::Other {
            protocol,
            len: data.len(),
        };
    }
    let malformed = |problem| Transport::Malformed {
        protocol: IpProtocol::Homa,
        problem,
        len: data.len(),
    };
    let packet = homa::Packet::new_unchecked(data);
    if packet.check_len().is_err() {
        // The type byte is at offset 11; a shorter packet is truncated anyway.
        return match packet.packet_type() {
            homa::PacketType::Unknown(t) if data.len() >= homa::COMMON_HEADER_LEN => {
                malformed(Problem::UnknownType(t))
            }
            _ => malformed(Problem::Truncated),
        };
    }
    match homa::Repr::parse(&packet) {
        Ok(repr) => Transport::Homa {
            repr,
            packet,
            hijacked,
        },
        // `check_len` passed, so parse cannot fail; stay total anyway.
        Err(_) => malformed(Problem::Truncated),
    }
}

/// A TCP segment with Linux's Homa markers (docs/protocol.md 2.4). The common
/// header is at least 20 bytes, like TCP's.
pub fn is_hijacked(data: &[u8]) -> bool {
    let packet = homa::Packet::new_unchecked(data);
    data.len() >= 20 && packet.flags() == HIJACK_FLAGS && packet.urgent() == HIJACK_URGENT
}

impl fmt::Display for Dissection<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let eth = match self.link {
            Link::Ethernet(eth) => eth,
            Link::Malformed => {
                return write!(f, "[malformed Ethernet: truncated, {} bytes]", self.len);
            }
        };
        write!(f, "{} > {}", eth.src_addr, eth.dst_addr)?;
        if let Some(tag) = eth.vlan {
            write!(f, " {tag}")?;
        }
        f.write_str(", ")?;
        match self.network {
            Network::None => Ok(()),
            Network::Arp(repr) => write!(f, "{repr}"),
            Network::Other { ethertype, len } => write!(f, "type {ethertype} len {len}"),
            Network::Malformed {
                ethertype,
                problem,
                len,
            } => write!(f, "[malformed {ethertype}: {problem}, {len} bytes]"),
            Network::Ipv4 { repr, checksum_ok } => {
                self.fmt_transport(f, &repr)?;
                if !checksum_ok {
                    f.write_str(" [bad IPv4 checksum]")?;
                }
                Ok(())
            }
            Network::Ipv6(repr) => self.fmt_transport(f, &repr),
        }
    }
}

impl Dissection<'_> {
    /// The part after the Ethernet header of an IP packet; `ip` is the
    /// IPv4 or IPv6 representation, shown when the transport has no
    /// addresses of its own or did not parse.
    fn fmt_transport(&self, f: &mut fmt::Formatter<'_>, ip: &dyn fmt::Display) -> fmt::Result {
        let Some((src, dst)) = self.ip_addrs() else {
            return Ok(());
        };
        match &self.transport {
            Transport::None => write!(f, "{ip}"),
            Transport::Homa { repr, hijacked, .. } => {
                write!(f, "{}", repr.display_with(src, dst, self.ip_priority()))?;
                if *hijacked {
                    f.write_str(" hijacked")?;
                }
                Ok(())
            }
            Transport::Icmpv4 { repr, checksum_ok } => {
                write!(f, "{src} > {dst} {repr}")?;
                if !checksum_ok {
                    f.write_str(" [bad ICMPv4 checksum]")?;
                }
                Ok(())
            }
            Transport::Icmpv6 { repr, checksum_ok } => {
                write!(f, "{src} > {dst} {repr}")?;
                if !checksum_ok {
                    f.write_str(" [bad ICMPv6 checksum]")?;
                }
                Ok(())
            }
            Transport::IcmpOther {
                ip_version,
                msg_type,
                code,
                len,
            } => {
                write!(f, "{src} > {dst} ")?;
                if *ip_version == 4 {
                    write!(f, "ICMPv4 {}", Icmpv4Message::from(*msg_type))?;
                } else {
                    write!(f, "ICMPv6 {}", Icmpv6Message::from(*msg_type))?;
                }
                write!(f, " code {code} len {len}")
            }
            Transport::Other { .. } => write!(f, "{ip}"),
            Transport::Malformed {
                protocol, problem, ..
            } => write!(f, "{ip} [malformed {protocol}: {problem}]"),
        }
    }
}

/// Shows a whole Ethernet frame on one line (see the module docs).
///
/// ```
/// use homa_stack::wire::PrettyFrame;
/// assert_eq!(
///     PrettyFrame(&[0u8; 5]).to_string(),
///     "[malformed Ethernet: truncated, 5 bytes]"
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrettyFrame<'a>(pub &'a [u8]);

impl fmt::Display for PrettyFrame<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", dissect(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::homa::{Ack, DataHeader, Kind, NUM_PRIORITIES};
    use crate::wire::{
        ArpOperation, EthernetAddress, Icmpv4DstUnreachable, Ipv4Addr, Ipv6Addr, VlanTag,
    };
    use std::string::{String, ToString};
    use std::vec;
    use std::vec::Vec;

    const A_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
    const B_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);
    const A_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const B_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
    const A_IP6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
    const B_IP6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);
    const ETH_PREFIX: &str = "02:00:00:00:00:01 > 02:00:00:00:00:02, ";

    fn eth(ethertype: EtherType, vlan: Option<VlanTag>, payload: &[u8]) -> Vec<u8> {
        let repr = EthernetRepr {
            src_addr: A_MAC,
            dst_addr: B_MAC,
            vlan,
            ethertype,
        };
        let mut frame = vec![0; repr.buffer_len() + payload.len()];
        repr.emit(&mut EthernetFrame::new_unchecked(&mut frame[..]));
        frame[repr.buffer_len()..].copy_from_slice(payload);
        frame
    }

    fn ipv4(protocol: IpProtocol, tos: u8, payload: &[u8]) -> Vec<u8> {
        let repr = Ipv4Repr {
            src_addr: A_IP,
            dst_addr: B_IP,
            next_header: protocol,
            payload_len: payload.len(),
            hop_limit: 64,
            tos,
        };
        let mut packet = vec![0; repr.buffer_len() + payload.len()];
        repr.emit(&mut Ipv4Packet::new_unchecked(&mut packet[..]), true);
        packet[repr.buffer_len()..].copy_from_slice(payload);
        packet
    }

    fn ipv6(protocol: IpProtocol, traffic_class: u8, payload: &[u8]) -> Vec<u8> {
        let repr = Ipv6Repr {
            src_addr: A_IP6,
            dst_addr: B_IP6,
            next_header: protocol,
            payload_len: payload.len(),
            hop_limit: 64,
            traffic_class,
        };
        let mut packet = vec![0; repr.buffer_len() + payload.len()];
        repr.emit(&mut Ipv6Packet::new_unchecked(&mut packet[..]));
        packet[repr.buffer_len()..].copy_from_slice(payload);
        packet
    }

    fn homa_bytes(repr: &homa::Repr<'_>) -> Vec<u8> {
        let mut packet = vec![0; repr.buffer_len()];
        repr.emit(&mut homa::Packet::new_unchecked(&mut packet[..]));
        packet
    }

    fn homa_v4(repr: &homa::Repr<'_>, tos: u8) -> Vec<u8> {
        eth(
            EtherType::Ipv4,
            None,
            &ipv4(IpProtocol::Homa, tos, &homa_bytes(repr)),
        )
    }

    fn pretty(frame: &[u8]) -> String {
        PrettyFrame(frame).to_string()
    }

    fn control(sport: u16, dport: u16, id: u64, kind: Kind<'static>) -> homa::Repr<'static> {
        homa::Repr {
            sport,
            dport,
            sender_id: id,
            kind,
        }
    }

    #[test]
    fn homa_data_reads_like_display_with_and_tos_priority() {
        let payload = [0x5a; 1424];
        let repr = homa::Repr {
            sport: 32768,
            dport: 500,
            sender_id: 1234,
            kind: Kind::Data {
                header: DataHeader {
                    message_length: 100_000,
                    incoming: 40_000,
                    offset: 1424,
                    ..DataHeader::default()
                },
                payload: &payload,
            },
        };
        assert_eq!(
            pretty(&homa_v4(&repr, 0xa0)),
            std::format!(
                "{ETH_PREFIX}DATA 10.0.0.1:32768 > 10.0.0.2:500 id 1234 off 1424 \
                 len 1424/100000 incoming 40000 prio 5"
            )
        );
    }

    #[test]
    fn homa_control_packets_show_their_fields() {
        let grant = control(
            500,
            32768,
            1235,
            Kind::Grant {
                offset: 201_424,
                priority: 3,
            },
        );
        assert_eq!(
            pretty(&homa_v4(&grant, 0xe0)),
            std::format!(
                "{ETH_PREFIX}GRANT 10.0.0.1:500 > 10.0.0.2:32768 id 1235 offset 201424 sched-prio 3 prio 7"
            )
        );
        let resend = control(
            500,
            32768,
            1235,
            Kind::Resend {
                offset: 0,
                length: homa::RESEND_ALL,
                priority: 6,
            },
        );
        assert_eq!(
            pretty(&homa_v4(&resend, 0)),
            std::format!(
                "{ETH_PREFIX}RESEND 10.0.0.1:500 > 10.0.0.2:32768 id 1235 off 0 len all retx-prio 6 prio 0"
            )
        );
        let mut acks = heapless::Vec::new();
        acks.push(Ack {
            client_id: 10,
            server_port: 500,
        })
        .unwrap();
        let ack = control(32768, 500, 12, Kind::Ack { acks });
        assert_eq!(
            pretty(&homa_v4(&ack, 0)),
            std::format!(
                "{ETH_PREFIX}ACK 10.0.0.1:32768 > 10.0.0.2:500 id 12 acks [10:500] prio 0"
            )
        );
        let cutoffs = control(
            500,
            32768,
            13,
            Kind::Cutoffs {
                unsched_cutoffs: [1, 2, 3, 4, 5, 6, 7, 8],
                version: 2,
            },
        );
        assert_eq!(
            pretty(&homa_v4(&cutoffs, 0)),
            std::format!(
                "{ETH_PREFIX}CUTOFFS 10.0.0.1:500 > 10.0.0.2:32768 id 13 \
                 cutoffs [1, 2, 3, 4, 5, 6, 7, 8] version 2 prio 0"
            )
        );
        for (kind, name) in [
            (Kind::Busy, "BUSY"),
            (Kind::RpcUnknown, "RPC_UNKNOWN"),
            (Kind::Freeze, "FREEZE"),
            (Kind::NeedAck, "NEED_ACK"),
        ] {
            let repr = control(500, 32768, 13, kind);
            assert_eq!(
                pretty(&homa_v4(&repr, 0x20)),
                std::format!("{ETH_PREFIX}{name} 10.0.0.1:500 > 10.0.0.2:32768 id 13 prio 1")
            );
        }
        assert_eq!(NUM_PRIORITIES, 8);
    }

    #[test]
    fn homa_over_ipv6_takes_priority_from_the_traffic_class() {
        let repr = control(500, 32768, 7, Kind::Busy);
        let frame = eth(
            EtherType::Ipv6,
            None,
            &ipv6(IpProtocol::Homa, 0xc0, &homa_bytes(&repr)),
        );
        assert_eq!(
            pretty(&frame),
            std::format!("{ETH_PREFIX}BUSY [fd00::1]:500 > [fd00::2]:32768 id 7 prio 6")
        );
    }

    #[test]
    fn hijacked_tcp_is_shown_as_homa() {
        let repr = control(500, 32768, 7, Kind::NeedAck);
        let mut homa = homa_bytes(&repr);
        homa[13] = 6; // flags SYN|RST
        homa[18..20].copy_from_slice(&[0xb9, 0x7d]); // urgent
        let frame = eth(EtherType::Ipv4, None, &ipv4(IpProtocol::Tcp, 0, &homa));
        assert_eq!(
            pretty(&frame),
            std::format!("{ETH_PREFIX}NEED_ACK 10.0.0.1:500 > 10.0.0.2:32768 id 7 prio 0 hijacked")
        );
        // Without the urgent marker it is plain TCP.
        homa[18] = 0;
        let frame = eth(EtherType::Ipv4, None, &ipv4(IpProtocol::Tcp, 0, &homa));
        assert_eq!(
            pretty(&frame),
            std::format!("{ETH_PREFIX}IPv4 10.0.0.1 > 10.0.0.2 TCP tos 0x00 len 28")
        );
    }

    #[test]
    fn vlan_tag_is_shown_after_the_addresses() {
        let repr = control(500, 32768, 7, Kind::Busy);
        let frame = eth(
            EtherType::Ipv4,
            Some(VlanTag {
                pcp: 3,
                dei: false,
                vid: 7,
            }),
            &ipv4(IpProtocol::Homa, 0, &homa_bytes(&repr)),
        );
        assert_eq!(
            pretty(&frame),
            "02:00:00:00:00:01 > 02:00:00:00:00:02 vlan 7 pcp 3, \
             BUSY 10.0.0.1:500 > 10.0.0.2:32768 id 7 prio 0"
        );
    }

    #[test]
    fn arp_request_and_reply() {
        let request = ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Request,
            source_hardware_addr: A_MAC,
            source_protocol_addr: A_IP,
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: B_IP,
        };
        let mut arp = vec![0; request.buffer_len()];
        request.emit(&mut ArpPacket::new_unchecked(&mut arp[..]));
        assert_eq!(
            pretty(&eth(EtherType::Arp, None, &arp)),
            std::format!("{ETH_PREFIX}ARP request who-has 10.0.0.2 tell 10.0.0.1")
        );
        // An ARP for another protocol parses up to the ARP layer only.
        arp[2] = 0x86;
        arp[3] = 0xdd;
        assert_eq!(
            pretty(&eth(EtherType::Arp, None, &arp)),
            std::format!("{ETH_PREFIX}[malformed ARP: not Ethernet/IPv4, 28 bytes]")
        );
    }

    #[test]
    fn icmpv4_echo_and_unreachable() {
        let echo = Icmpv4Repr::EchoRequest {
            ident: 7,
            seq_no: 9,
            data: b"ping",
        };
        let mut icmp = vec![0; echo.buffer_len()];
        echo.emit(&mut Icmpv4Packet::new_unchecked(&mut icmp[..]), true);
        let frame = eth(EtherType::Ipv4, None, &ipv4(IpProtocol::Icmp, 0, &icmp));
        assert_eq!(
            pretty(&frame),
            std::format!("{ETH_PREFIX}10.0.0.1 > 10.0.0.2 ICMPv4 echo request id 7 seq 9 len 4")
        );
        // A flipped data byte breaks the ICMP checksum, which is noted.
        icmp[9] ^= 1;
        let frame = eth(EtherType::Ipv4, None, &ipv4(IpProtocol::Icmp, 0, &icmp));
        assert!(pretty(&frame).ends_with("len 4 [bad ICMPv4 checksum]"));

        let quoted = Ipv4Repr {
            src_addr: B_IP,
            dst_addr: A_IP,
            next_header: IpProtocol::Homa,
            payload_len: 100,
            hop_limit: 64,
            tos: 0,
        };
        let unreachable = Icmpv4Repr::DstUnreachable {
            reason: Icmpv4DstUnreachable::PortUnreachable,
            header: quoted,
            data: &[0x80, 0x00, 0x01, 0xf4, 0, 0, 0, 0],
        };
        let mut icmp = vec![0; unreachable.buffer_len()];
        unreachable.emit(&mut Icmpv4Packet::new_unchecked(&mut icmp[..]), true);
        let frame = eth(EtherType::Ipv4, None, &ipv4(IpProtocol::Icmp, 0, &icmp));
        assert_eq!(
            pretty(&frame),
            std::format!(
                "{ETH_PREFIX}10.0.0.1 > 10.0.0.2 ICMPv4 dst-unreachable {} \
                 (IPv4 10.0.0.2 > 10.0.0.1 HOMA tos 0x00 len 100) data 8",
                Icmpv4DstUnreachable::PortUnreachable
            )
        );
    }

    #[test]
    fn icmp_types_the_stack_does_not_parse_are_named() {
        // Time exceeded: type 11, code 0, unused, then quoted bytes.
        let mut icmp = vec![11, 0, 0, 0, 0, 0, 0, 0];
        let sum = crate::wire::checksum::finish(crate::wire::checksum::sum(&icmp));
        icmp[2..4].copy_from_slice(&sum.to_be_bytes());
        let frame = eth(EtherType::Ipv4, None, &ipv4(IpProtocol::Icmp, 0, &icmp));
        assert_eq!(
            pretty(&frame),
            std::format!("{ETH_PREFIX}10.0.0.1 > 10.0.0.2 ICMPv4 time exceeded code 0 len 8")
        );
    }

    #[test]
    fn icmpv6_neighbor_solicit_and_echo() {
        let solicit = Icmpv6Repr::NeighborSolicit {
            target_addr: B_IP6,
            lladdr: Some(A_MAC),
        };
        let mut icmp = vec![0; solicit.buffer_len()];
        solicit.emit(
            &A_IP6,
            &B_IP6,
            &mut Icmpv6Packet::new_unchecked(&mut icmp[..]),
            true,
        );
        let frame = eth(EtherType::Ipv6, None, &ipv6(IpProtocol::Icmpv6, 0, &icmp));
        assert_eq!(
            pretty(&frame),
            std::format!(
                "{ETH_PREFIX}fd00::1 > fd00::2 ICMPv6 neighbor solicit who-has fd00::2 \
                 lladdr 02:00:00:00:00:01"
            )
        );
        let echo = Icmpv6Repr::EchoReply {
            ident: 1,
            seq_no: 2,
            data: b"xyz",
        };
        let mut icmp = vec![0; echo.buffer_len()];
        // Checksummed for other addresses: noted as bad.
        echo.emit(
            &B_IP6,
            &A_IP6,
            &mut Icmpv6Packet::new_unchecked(&mut icmp[..]),
            true,
        );
        icmp[2] ^= 0xff;
        let frame = eth(EtherType::Ipv6, None, &ipv6(IpProtocol::Icmpv6, 0, &icmp));
        assert_eq!(
            pretty(&frame),
            std::format!(
                "{ETH_PREFIX}fd00::1 > fd00::2 ICMPv6 echo reply id 1 seq 2 len 3 [bad ICMPv6 checksum]"
            )
        );
    }

    #[test]
    fn unknown_ether_type_and_ip_protocol_show_their_numbers() {
        assert_eq!(
            pretty(&eth(EtherType::Unknown(0x88cc), None, &[0; 46])),
            std::format!("{ETH_PREFIX}type 0x88cc len 46")
        );
        let frame = eth(EtherType::Ipv4, None, &ipv4(IpProtocol::Udp, 0x10, &[0; 8]));
        assert_eq!(
            pretty(&frame),
            std::format!("{ETH_PREFIX}IPv4 10.0.0.1 > 10.0.0.2 UDP tos 0x10 len 8")
        );
    }

    #[test]
    fn malformed_layers_show_what_parsed_and_why() {
        assert_eq!(
            pretty(&[0; 13]),
            "[malformed Ethernet: truncated, 13 bytes]"
        );
        // An IPv4 header announcing more bytes than the frame has.
        let mut ip = ipv4(IpProtocol::Homa, 0, &[0; 40]);
        ip.truncate(30);
        assert_eq!(
            pretty(&eth(EtherType::Ipv4, None, &ip)),
            std::format!("{ETH_PREFIX}[malformed IPv4: truncated, 30 bytes]")
        );
        // An IPv6 header in an IPv4 ether type.
        let ip = ipv6(IpProtocol::Homa, 0, &[]);
        assert_eq!(
            pretty(&eth(EtherType::Ipv4, None, &ip)),
            std::format!("{ETH_PREFIX}[malformed IPv4: version 6, 40 bytes]")
        );
        // A fragment.
        let mut ip = ipv4(IpProtocol::Homa, 0, &[0; 8]);
        ip[6] = 0x20; // more fragments
        assert_eq!(
            pretty(&eth(EtherType::Ipv4, None, &ip)),
            std::format!("{ETH_PREFIX}[malformed IPv4: fragment, 28 bytes]")
        );
        // A Homa packet shorter than the common header.
        let frame = eth(EtherType::Ipv4, None, &ipv4(IpProtocol::Homa, 0, &[0; 20]));
        assert_eq!(
            pretty(&frame),
            std::format!(
                "{ETH_PREFIX}IPv4 10.0.0.1 > 10.0.0.2 HOMA tos 0x00 len 20 [malformed HOMA: truncated]"
            )
        );
        // An unknown Homa type.
        let mut homa = [0u8; 28];
        homa[11] = 0x05;
        let frame = eth(EtherType::Ipv4, None, &ipv4(IpProtocol::Homa, 0, &homa));
        assert_eq!(
            pretty(&frame),
            std::format!(
                "{ETH_PREFIX}IPv4 10.0.0.1 > 10.0.0.2 HOMA tos 0x00 len 28 \
                 [malformed HOMA: unknown type 0x05]"
            )
        );
        // A GRANT one byte short.
        let grant = control(
            1,
            2,
            3,
            Kind::Grant {
                offset: 1,
                priority: 1,
            },
        );
        let mut homa = homa_bytes(&grant);
        homa.pop();
        let frame = eth(EtherType::Ipv4, None, &ipv4(IpProtocol::Homa, 0, &homa));
        assert!(pretty(&frame).ends_with("len 32 [malformed HOMA: truncated]"));
        // A wrong IPv4 header checksum is noted at the end.
        let repr = control(500, 32768, 7, Kind::Busy);
        let mut frame = homa_v4(&repr, 0);
        frame[14 + 10] ^= 0xff;
        assert!(pretty(&frame).ends_with("id 7 prio 0 [bad IPv4 checksum]"));
    }

    #[test]
    fn every_prefix_and_bit_flip_of_a_frame_formats_without_panicking() {
        let payload = [1u8; 64];
        let repr = homa::Repr {
            sport: 1,
            dport: 2,
            sender_id: 3,
            kind: Kind::Data {
                header: DataHeader::default(),
                payload: &payload,
            },
        };
        let frame = homa_v4(&repr, 0);
        for len in 0..=frame.len() {
            let _ = pretty(&frame[..len]);
        }
        for bit in 0..frame.len() * 8 {
            let mut flipped = frame.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            let _ = pretty(&flipped);
        }
    }

    #[test]
    fn dissection_keeps_the_homa_packet_for_raw_fields() {
        let repr = control(
            500,
            32768,
            7,
            Kind::Grant {
                offset: 10,
                priority: 2,
            },
        );
        let frame = homa_v4(&repr, 0x40);
        let d = dissect(&frame);
        assert_eq!(d.len, frame.len());
        assert_eq!(d.ip_priority(), Some(2));
        assert_eq!(d.ip_addrs(), Some((A_IP.into(), B_IP.into())));
        match d.transport {
            Transport::Homa {
                repr: parsed,
                packet,
                hijacked,
            } => {
                assert_eq!(parsed, repr);
                assert_eq!(packet.doff(), 5);
                assert!(!hijacked);
            }
            other => panic!("not Homa: {other:?}"),
        }
    }
}
