//! The IPv6 host layer: IPv6 in (extension headers skipped or refused),
//! ICMPv6 (echo replies, destination unreachable both ways) and the parts of
//! neighbour discovery a host needs (RFC 4861): answering solicitations for
//! our addresses, soliciting for peers, learning from advertisements.
//!
//! The neighbour cache is the peer table, shared with ARP and under the same
//! rules (see `peer`): a link address is learned from neighbour discovery
//! (whose link-address option must name the frame's own source) or a
//! checked Homa packet, for a peer we hold, and is re-resolved when in
//! doubt. An advertisement without the override flag fills a missing link
//! address but never replaces a different one (RFC 4861 7.2.5). Duplicate
//! address detection for our own addresses is not done (a documented
//! non-goal): we answer other nodes' detection for our addresses, so a
//! duplicate elsewhere finds us.

use super::{HandUp, HomaIn, Route, HOP_LIMIT, IPV6_HEADER_LEN};
use crate::endpoint::types::{IpHeader, Reply, Unreachable};
use crate::endpoint::Endpoint;
use crate::phy::TxToken;
use crate::stats::DropReason;
use crate::time::Instant;
use crate::wire::icmpv6::{Icmpv6DstUnreachable, Icmpv6Message, Icmpv6Packet, Icmpv6Repr};
use crate::wire::ipv6::{Ipv6Packet, Ipv6Repr};
use crate::wire::{EthernetAddress, IpAddr, IpProtocol, Ipv6Addr};

/// The extension-header walk, shared with the splitter so the two agree.
use crate::phy::share::ipv6_upper_layer as skip_extension_headers;

/// The all-nodes multicast address `ff02::1`.
const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

/// The solicited-node multicast address of `addr` (`ff02::1:ffXX:XXXX`).
pub fn solicited_node(addr: Ipv6Addr) -> Ipv6Addr {
    let o = addr.octets();
    Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | u16::from(o[13]),
        u16::from_be_bytes([o[14], o[15]]),
    )
}

/// The Ethernet address an IPv6 multicast address maps to (`33:33` and its
/// low 32 bits, RFC 2464).
pub fn multicast_mac(addr: Ipv6Addr) -> EthernetAddress {
    let o = addr.octets();
    EthernetAddress([0x33, 0x33, o[12], o[13], o[14], o[15]])
}

/// What a neighbour advertisement says of its target.
struct Advert {
    target: Ipv6Addr,
    lladdr: Option<EthernetAddress>,
    solicited: bool,
    override_: bool,
}

impl<'a> Endpoint<'a> {
    /// Our IPv6 addresses: the link-local one, then the configured ones.
    fn our_v6(&self) -> impl Iterator<Item = Ipv6Addr> + '_ {
        self.config
            .link_local_v6()
            .into_iter()
            .chain(self.config.ipv6_addrs.iter().flatten().copied())
    }

    /// Whether frames to the multicast Ethernet address `mac` are ours:
    /// all nodes, or the solicited-node group of one of our addresses.
    pub(super) fn listens_v6(&self, mac: EthernetAddress) -> bool {
        self.config.ipv6
            && mac.0[..2] == [0x33, 0x33]
            && (mac == multicast_mac(ALL_NODES)
                || self
                    .our_v6()
                    .any(|a| multicast_mac(solicited_node(a)) == mac))
    }

    /// Whether an IPv6 packet to `dst` is for us.
    fn accepts_v6(&self, dst: Ipv6Addr) -> bool {
        dst == ALL_NODES || self.our_v6().any(|a| a == dst || solicited_node(a) == dst)
    }

    /// An IPv6 packet for us: ICMPv6 is taken in here, Homa handed up.
    pub(super) fn process_ipv6<'f>(
        &mut self,
        now: Instant,
        src_mac: EthernetAddress,
        payload: &'f [u8],
    ) -> Option<Reply<'f>> {
        // new_checked refuses a payload length beyond the frame.
        let Ok(packet) = Ipv6Packet::new_checked(payload) else {
            return self.drop_frame(DropReason::Malformed, "bad IPv6 header");
        };
        let Ok(ip) = Ipv6Repr::parse(&packet) else {
            return self.drop_frame(DropReason::Malformed, "bad IPv6 packet");
        };
        if !self.accepts_v6(ip.dst_addr) {
            return self.drop_frame(DropReason::NotForUs, "IPv6 packet for another host");
        }
        if ip.src_addr.is_multicast() {
            return self.drop_frame(
                DropReason::Malformed,
                "IPv6 packet from a multicast address",
            );
        }
        // As over IPv4: one from our own address is no other host's.
        if self.our_v6().any(|a| a == ip.src_addr) {
            return self.drop_frame(DropReason::Malformed, "IPv6 packet from our own address");
        }
        // Only duplicate address detection's solicitations come from `::`
        // (checked in process_icmpv6); nothing else may.
        if ip.src_addr.is_unspecified() && ip.next_header != IpProtocol::Icmpv6 {
            return self.drop_frame(
                DropReason::Malformed,
                "IPv6 packet from the unspecified address",
            );
        }
        // Past the fixed header, up to its payload length (trailing frame
        // padding is not ours).
        let rest = &payload[IPV6_HEADER_LEN..IPV6_HEADER_LEN + ip.payload_len];
        let Some((next, body)) = skip_extension_headers(u8::from(ip.next_header), rest) else {
            return self.drop_frame(
                DropReason::Unsupported,
                "IPv6 extension header not handled (fragment, routing with segments left, or too many)",
            );
        };
        match IpProtocol::from(next) {
            IpProtocol::Icmpv6 => self.process_icmpv6(src_mac, &ip, body),
            IpProtocol::Homa if !ip.dst_addr.is_multicast() => {
                let packet = HomaIn {
                    mac: src_mac,
                    ip: IpHeader::V6 {
                        header: ip,
                        payload: rest,
                    },
                    body,
                };
                self.homa(now, packet)
            }
            IpProtocol::Homa => self.drop_frame(DropReason::NotForUs, "Homa to a multicast group"),
            _ => self.drop_frame(DropReason::Unsupported, "IPv6 next header not handled"),
        }
    }

    fn process_icmpv6<'f>(
        &mut self,
        src_mac: EthernetAddress,
        ip: &Ipv6Repr,
        body: &'f [u8],
    ) -> Option<Reply<'f>> {
        let verify = self.caps.checksum.icmpv6.rx();
        let Ok(packet) = Icmpv6Packet::new_checked(body) else {
            return self.drop_frame(DropReason::Malformed, "bad ICMPv6");
        };
        let Ok(repr) = Icmpv6Repr::parse(&ip.src_addr, &ip.dst_addr, &packet, verify) else {
            // As for ICMPv4: an intact message of a type we do not act on
            // (router advertisements, MLD) is not handled, not malformed.
            let handled = matches!(
                packet.msg_type(),
                Icmpv6Message::EchoRequest
                    | Icmpv6Message::EchoReply
                    | Icmpv6Message::DstUnreachable
                    | Icmpv6Message::NeighborSolicit
                    | Icmpv6Message::NeighborAdvert
            );
            if !handled && (!verify || packet.verify_checksum(&ip.src_addr, &ip.dst_addr)) {
                // Packet too big is a path-MTU hint: our packets keep
                // their size, and no RPC ends for it.
                if packet.msg_type() == Icmpv6Message::PktTooBig {
                    self.stats.icmp_ignored.path_mtu += 1;
                    net_trace!("homa: ICMPv6 packet too big ignored");
                    return None;
                }
                return self.drop_frame(DropReason::NotHandled, "ICMPv6 type not handled");
            }
            return self.drop_frame(DropReason::Malformed, "bad ICMPv6");
        };
        if ip.src_addr.is_unspecified() && !matches!(repr, Icmpv6Repr::NeighborSolicit { .. }) {
            return self.drop_frame(DropReason::Malformed, "ICMPv6 from the unspecified address");
        }
        match repr {
            Icmpv6Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => self.echo_request_v6(src_mac, ip, ident, seq_no, data),
            // Neighbour discovery comes from the link itself (RFC 4861 7.1.1).
            Icmpv6Repr::NeighborSolicit { .. } | Icmpv6Repr::NeighborAdvert { .. }
                if ip.hop_limit != 255 =>
            {
                self.drop_frame(
                    DropReason::Malformed,
                    "neighbour discovery with hop limit below 255",
                )
            }
            Icmpv6Repr::NeighborSolicit {
                target_addr,
                lladdr,
            } => self.neighbor_solicit(src_mac, ip, target_addr, lladdr),
            Icmpv6Repr::NeighborAdvert {
                target_addr,
                lladdr,
                solicited,
                override_,
                ..
            } => {
                let advert = Advert {
                    target: target_addr,
                    lladdr,
                    solicited,
                    override_,
                };
                self.neighbor_advert(src_mac, ip, advert)
            }
            Icmpv6Repr::DstUnreachable {
                reason,
                header,
                data,
            } => self.unreachable_v6(reason, &header, data),
            Icmpv6Repr::EchoReply { .. } => {
                self.drop_frame(DropReason::NotHandled, "ICMPv6 type not handled")
            }
        }
    }

    /// An echo request to one of our unicast addresses is answered from it
    /// (unless another stack on the host answers).
    fn echo_request_v6<'f>(
        &mut self,
        src_mac: EthernetAddress,
        ip: &Ipv6Repr,
        ident: u16,
        seq_no: u16,
        data: &'f [u8],
    ) -> Option<Reply<'f>> {
        if ip.dst_addr.is_multicast() {
            return self.drop_frame(DropReason::NotHandled, "multicast echo request");
        }
        if self.config.passive_host {
            net_trace!("homa: echo request left to the other stack");
            return None;
        }
        Some(Reply::Echo6 {
            dst_mac: src_mac,
            src_ip: ip.dst_addr,
            dst_ip: ip.src_addr,
            ident,
            seq_no,
            data,
        })
    }

    /// A neighbour solicitation for one of our addresses: its sender's link
    /// address is learned if we hold it as a peer, and it is answered (to
    /// all nodes when it is another node's duplicate address detection).
    fn neighbor_solicit<'f>(
        &mut self,
        src_mac: EthernetAddress,
        ip: &Ipv6Repr,
        target: Ipv6Addr,
        lladdr: Option<EthernetAddress>,
    ) -> Option<Reply<'f>> {
        if !self.our_v6().any(|a| a == target) {
            return self.drop_frame(DropReason::NotForUs, "solicitation for another address");
        }
        let dad = ip.src_addr.is_unspecified();
        if let Some(mac) = lladdr {
            // As ARP: the option must name the frame's own source.
            if dad || mac != src_mac || !mac.is_unicast() {
                return self.drop_frame(
                    DropReason::Malformed,
                    "solicitation's link address differs from its frame",
                );
            }
            // A stranger's address is not kept; it is answered.
            let _ = self.learn(IpAddr::V6(ip.src_addr), mac);
        }
        if self.config.passive_host {
            return None;
        }
        Some(if dad {
            // Another node checks the address: tell all nodes it is ours.
            Reply::Advert {
                dst_mac: multicast_mac(ALL_NODES),
                dst_ip: ALL_NODES,
                target,
                solicited: false,
            }
        } else {
            Reply::Advert {
                dst_mac: src_mac,
                dst_ip: ip.src_addr,
                target,
                solicited: true,
            }
        })
    }

    /// A neighbour advertisement. As ARP: the advertised address must be
    /// the frame's own source (no third party redirects a peer), and only
    /// an answer to us (solicited, unicast) is learned; an unsolicited one
    /// for a peer we hold only puts its known address in doubt, so we ask
    /// ourselves.
    fn neighbor_advert<'f>(
        &mut self,
        src_mac: EthernetAddress,
        ip: &Ipv6Repr,
        advert: Advert,
    ) -> Option<Reply<'f>> {
        let Some(mac) = advert.lladdr else {
            return self.drop_frame(
                DropReason::Malformed,
                "advertisement without a link address",
            );
        };
        if !mac.is_unicast() || mac != src_mac {
            return self.drop_frame(
                DropReason::Malformed,
                "advertisement's link address differs from its frame",
            );
        }
        let held = if advert.solicited && !ip.dst_addr.is_multicast() {
            if !advert.override_ && self.known_other(advert.target, mac) {
                return self.drop_frame(
                    DropReason::NoOverride,
                    "advertisement without override for a known, different address",
                );
            }
            self.learn(IpAddr::V6(advert.target), mac)
        } else {
            self.unsolicited_advert(advert.target, mac)
        };
        if !held {
            return self.drop_frame(
                DropReason::UnknownPeer,
                "advertisement for a peer we do not hold",
            );
        }
        None
    }

    /// A destination unreachable about a Homa packet of ours: handed up,
    /// sorted by what it means (only port unreachable is a hard error).
    fn unreachable_v6<'f>(
        &mut self,
        reason: Icmpv6DstUnreachable,
        header: &Ipv6Repr,
        data: &[u8],
    ) -> Option<Reply<'f>> {
        self.stats.icmp_unreachable_received += 1;
        let ours = self.our_v6().any(|a| a == header.src_addr);
        if header.next_header != IpProtocol::Homa || !ours {
            self.stats.icmp_ignored.not_homa += 1;
            net_trace!("homa: ICMPv6 unreachable for non-Homa traffic ignored");
            return None;
        }
        let what = match reason {
            Icmpv6DstUnreachable::PortUnreachable => Unreachable::Port,
            _ => Unreachable::Soft,
        };
        self.unreachable(IpAddr::V6(header.dst_addr), data, what);
        None
    }

    /// Whether we hold `target` with a link address other than `mac`. An
    /// advertisement without the override flag must not replace it (RFC
    /// 4861 7.2.5: an anycast or proxy answer, or a forger racing the
    /// owner); it only puts it in doubt, so it is probed.
    fn known_other(&mut self, target: Ipv6Addr, mac: EthernetAddress) -> bool {
        self.disputed(target, mac).unwrap_or(false)
    }

    /// An unsolicited advertisement says `target` is at `mac`: a peer we
    /// hold that has no link address yet, or a different one, is asked
    /// about (a solicitation at the next egress); nothing is replaced.
    /// False when we hold no such peer.
    fn unsolicited_advert(&mut self, target: Ipv6Addr, mac: EthernetAddress) -> bool {
        self.disputed(target, mac).is_some()
    }

    /// Puts the link address of peer `target` in doubt if it is not `mac`
    /// (see `Peer::disputed`); whether it differed, `None` for a stranger.
    /// The probe interval still applies: a flood of forged adverts buys at
    /// most one solicitation per `neighbour::PROBE_INTERVAL`.
    fn disputed(&mut self, target: Ipv6Addr, mac: EthernetAddress) -> Option<bool> {
        let pi = self.find_peer(IpAddr::V6(target))?;
        let p = self.peers.get_mut(usize::from(pi))?.peer.as_mut()?;
        let differs = p.nbr.disputed(mac);
        self.peer_doubted(pi);
        Some(differs)
    }

    /// Sends an ICMPv6 message to `dst_ip` at `dst_mac`.
    /// From `src`, or the address chosen for `dst_ip` when `None`.
    pub(super) fn emit_icmpv6<T: TxToken>(
        &mut self,
        tx: T,
        dst_mac: EthernetAddress,
        src: Option<Ipv6Addr>,
        dst_ip: Ipv6Addr,
        icmp: &Icmpv6Repr<'_>,
        priority: u8,
    ) {
        let Some(src) = src.or_else(|| self.config.ipv6_src_for(dst_ip)) else {
            return;
        };
        let fill = self.caps.checksum.icmpv6.tx();
        let route = Route {
            dst_mac,
            dst: IpAddr::V6(dst_ip),
            protocol: IpProtocol::Icmpv6,
            ip_payload_len: icmp.buffer_len(),
            priority,
            hop_limit: match icmp {
                Icmpv6Repr::NeighborSolicit { .. } | Icmpv6Repr::NeighborAdvert { .. } => 255,
                _ => HOP_LIMIT,
            },
            src_v6: Some(src),
        };
        self.emit_ip(tx, &route, |body| {
            icmp.emit(&src, &dst_ip, &mut Icmpv6Packet::new_unchecked(body), fill)
        });
    }

    /// Asks for `target`'s link address: at its known address `unicast`
    /// (a probe, RFC 4861 7.3.3), or at its solicited-node group.
    pub(super) fn emit_solicit<T: TxToken>(
        &mut self,
        tx: T,
        target: Ipv6Addr,
        unicast: Option<EthernetAddress>,
    ) {
        let group = solicited_node(target);
        let (dst_mac, dst) = match unicast {
            Some(mac) => (mac, target),
            None => (multicast_mac(group), group),
        };
        let icmp = Icmpv6Repr::NeighborSolicit {
            target_addr: target,
            lladdr: Some(self.config.ethernet_addr),
        };
        let top = self.config.highest_priority();
        self.emit_icmpv6(tx, dst_mac, None, dst, &icmp, top);
        self.stats.ndp_solicits += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn solicited_node_addresses_and_their_macs() {
        let a: Ipv6Addr = "fe80::2:0:ff:fe00:1".parse().unwrap();
        assert_eq!(
            solicited_node(a),
            "ff02::1:ff00:1".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(
            multicast_mac(solicited_node(a)),
            EthernetAddress([0x33, 0x33, 0xff, 0x00, 0x00, 0x01])
        );
    }

    #[test]
    fn extension_headers_are_skipped_or_refused() {
        const HOP_BY_HOP: u8 = 0;
        const ROUTING: u8 = 43;
        const DEST_OPTIONS: u8 = 60;
        // Hop-by-hop (8 bytes) then destination options (16 bytes) then Homa.
        let mut b = [0u8; 8 + 16 + 4];
        b[0] = DEST_OPTIONS;
        b[8] = 146;
        b[9] = 1;
        let (next, rest) = skip_extension_headers(HOP_BY_HOP, &b).unwrap();
        assert_eq!((next, rest.len()), (146, 4));
        // A routing header with segments left is not for us to skip.
        let mut r = [0u8; 8];
        r[0] = 146;
        r[3] = 1;
        assert!(skip_extension_headers(ROUTING, &r).is_none());
        r[3] = 0;
        assert_eq!(skip_extension_headers(ROUTING, &r).unwrap().0, 146);
        // Truncated, and a fragment header (44) passes through to be refused.
        assert!(skip_extension_headers(HOP_BY_HOP, &b[..6]).is_none());
        assert_eq!(skip_extension_headers(44, &b).unwrap().0, 44);
        // A chain longer than the bound.
        let chain = [HOP_BY_HOP, 0, 0, 0, 0, 0, 0, 0].repeat(6);
        assert!(skip_extension_headers(HOP_BY_HOP, &chain).is_none());
    }
}
