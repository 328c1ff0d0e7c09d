//! The host layer: Ethernet in and out, ARP (answering, resolving peers),
//! IPv4, and ICMP (echo replies, port unreachable both ways). Frames
//! tagged for another VLAN than ours are dropped first.
//!
//! Frames that need an immediate answer (ARP requests, pings, packets to
//! closed ports) are answered through the transmit token the device hands out
//! with the received frame, so no frame is ever copied into a queue.

use super::peer::Claim;
use super::timers::Timer;
use super::types::{IpHeader, Local, Reply, Unreachable};
use super::Endpoint;
use crate::config::{Config, PriorityEncoding};
use crate::phy::{Device, DeviceCapabilities, PacketMeta, RxToken, TxToken};
use crate::stats::DropReason;
use crate::time::{Duration, Instant};
use crate::wire::arp::{ArpOperation, ArpPacket, ArpRepr};
use crate::wire::ethernet::{EtherType, EthernetFrame, EthernetRepr, VlanTag};
use crate::wire::icmpv4::{Icmpv4DstUnreachable, Icmpv4Message, Icmpv4Packet, Icmpv4Repr};
#[cfg(feature = "ipv6")]
use crate::wire::icmpv6::{Icmpv6DstUnreachable, Icmpv6Repr};
use crate::wire::ipv4::{Ipv4Packet, Ipv4Repr};
use crate::wire::ipv6::{Ipv6Packet, Ipv6Repr};
use crate::wire::{EthernetAddress, IpAddr, IpProtocol, Ipv4Addr, Ipv6Addr};

/// How long to wait before asking ARP again for the same peer.
const ARP_RETRY: Duration = Duration::from_millis(10);

/// IPv4 header length of every packet we send (no options).
pub(super) const IPV4_HEADER_LEN: usize = crate::wire::ipv4::HEADER_LEN;
/// IPv6 header length of every packet we send (no extension headers).
pub(super) const IPV6_HEADER_LEN: usize = crate::wire::ipv6::HEADER_LEN;

impl<'a> Endpoint<'a> {
    /// Takes up to `max_rx_per_poll` frames from the device.
    pub(super) fn ingress<D: Device + ?Sized>(&mut self, now: Instant, device: &mut D) {
        for _ in 0..self.config.max_rx_per_poll {
            let Some((rx, tx)) = device.receive(now) else {
                break;
            };
            self.stats.rx_frames += 1;
            rx.consume(|frame| {
                if let Some(reply) = self.process_frame(now, frame) {
                    self.send_reply(tx, reply);
                }
            });
        }
    }

    fn process_frame<'f>(&mut self, now: Instant, frame: &'f [u8]) -> Option<Reply<'f>> {
        let Ok(eth) = EthernetFrame::new_checked(frame) else {
            return self.drop_frame(DropReason::Malformed, "short Ethernet frame");
        };
        let dst = eth.dst_addr();
        #[cfg(feature = "ipv6")]
        let multicast = self.listens_v6(dst);
        #[cfg(not(feature = "ipv6"))]
        let multicast = false;
        if dst != self.config.ethernet_addr && !dst.is_broadcast() && !multicast {
            return self.drop_frame(DropReason::NotForUs, "frame for another host");
        }
        let src_mac = eth.src_addr();
        // A group address never sends: nothing from one is answered (to
        // every host on the link) or learned.
        if !src_mac.is_unicast() {
            return self.drop_frame(DropReason::Malformed, "frame from a group address");
        }
        if let Some(tag) = eth.vlan_tag() {
            if !self.our_vlan(tag.vid) {
                return self.drop_frame(DropReason::WrongVlan, "frame for another VLAN");
            }
        }
        let payload = eth.payload();
        match eth.ethertype() {
            EtherType::Arp => self.process_arp(src_mac, payload),
            EtherType::Ipv4 => self.process_ipv4(now, src_mac, payload),
            #[cfg(feature = "ipv6")]
            EtherType::Ipv6 if self.config.ipv6 => self.process_ipv6(now, src_mac, payload),
            _ => self.drop_frame(DropReason::Unsupported, "EtherType not handled"),
        }
    }

    /// Whether a frame tagged with VLAN id `vid` is ours: the id we tag
    /// with (`PriorityEncoding::Vlan`), or 0, which 802.1Q reads as no VLAN
    /// (a priority tag). Untagged frames are ours either way: our own ARP
    /// goes untagged.
    fn our_vlan(&self, vid: u16) -> bool {
        vid == 0
            || matches!(self.config.priority_encoding, PriorityEncoding::Vlan { vid: v } if v == vid)
    }

    /// Counts a dropped frame with a debug line saying what was wrong.
    pub(super) fn drop_frame<T>(&mut self, why: DropReason, what: &str) -> Option<T> {
        net_debug!("homa: drop ({}): {}", why, what);
        self.stats.drops.count(why);
        None
    }

    /// Counts a dropped packet with a debug line.
    pub(super) fn count_drop(&mut self, why: DropReason) {
        net_debug!("homa: drop: {}", why);
        self.stats.drops.count(why);
    }

    /// ARP teaches link addresses (under the rules in `peer`): from a
    /// request for our address or a reply to us, whose Ethernet source
    /// agrees with the sender it names, for a peer we hold.
    fn process_arp<'f>(&mut self, eth_src: EthernetAddress, payload: &[u8]) -> Option<Reply<'f>> {
        let Ok(repr) = ArpPacket::new_checked(payload).and_then(|p| ArpRepr::parse(&p)) else {
            return self.drop_frame(DropReason::Malformed, "bad ARP");
        };
        let ArpRepr::EthernetIpv4 {
            operation,
            source_hardware_addr,
            source_protocol_addr,
            target_protocol_addr,
            ..
        } = repr;
        if !matches!(operation, ArpOperation::Request | ArpOperation::Reply) {
            return self.drop_frame(DropReason::NotHandled, "ARP operation not handled");
        }
        if target_protocol_addr != self.config.ipv4_addr {
            return self.drop_frame(DropReason::NotForUs, "ARP for another host");
        }
        if source_hardware_addr != eth_src || !source_hardware_addr.is_unicast() {
            return self.drop_frame(DropReason::Malformed, "ARP sender differs from its frame");
        }
        let learned = self.learn(IpAddr::V4(source_protocol_addr), source_hardware_addr);
        if operation == ArpOperation::Reply && !learned {
            // A reply only teaches; this one had no peer to teach about.
            return self.drop_frame(
                DropReason::UnknownPeer,
                "ARP reply from a peer we do not hold",
            );
        }
        if operation == ArpOperation::Request
            && !self.config.passive_host
            && target_protocol_addr == self.config.ipv4_addr
            && source_hardware_addr.is_unicast()
        {
            self.stats.arp_replies += 1;
            return Some(Reply::Arp {
                dst_mac: source_hardware_addr,
                dst_ip: source_protocol_addr,
            });
        }
        None
    }

    /// Applies the link address ARP or neighbour discovery gave for a peer
    /// we hold (no entry is made for a stranger): taken, or refused and
    /// counted (see `Peer::claimed`); false for a stranger.
    pub(super) fn learn(&mut self, addr: IpAddr, mac: EthernetAddress) -> bool {
        let Some(i) = self.find_peer(addr) else {
            return false;
        };
        let Some(p) = self
            .peers
            .get_mut(usize::from(i))
            .and_then(|s| s.peer.as_mut())
        else {
            return false;
        };
        if p.claimed(mac) == Claim::Refused {
            net_debug!(
                "homa: link address claim for {} refused: kept, probed",
                addr
            );
            self.stats.link_addr_claims_refused += 1;
            self.peer_doubted(i);
            return true;
        }
        match addr {
            IpAddr::V4(_) => self.stats.arp_learned += 1,
            IpAddr::V6(_) => self.stats.ndp_learned += 1,
        }
        self.peer_resolved_now(i);
        true
    }

    fn process_ipv4<'f>(
        &mut self,
        now: Instant,
        src_mac: EthernetAddress,
        payload: &'f [u8],
    ) -> Option<Reply<'f>> {
        let verify = self.caps.checksum.ipv4.rx();
        let Ok(packet) = Ipv4Packet::new_checked(payload) else {
            return self.drop_frame(DropReason::Malformed, "bad IPv4 header");
        };
        let Ok(ip) = Ipv4Repr::parse(&packet, verify) else {
            return self.drop_frame(DropReason::Malformed, "bad IPv4 packet");
        };
        if ip.dst_addr != self.config.ipv4_addr {
            return self.drop_frame(DropReason::NotForUs, "IPv4 packet for another host");
        }
        // No host sends from these. Believed, they would make a peer and
        // be answered (to every host, or to ourselves).
        let src = ip.src_addr;
        if src.is_broadcast()
            || src.is_multicast()
            || src.is_unspecified()
            || src == self.config.ipv4_addr
        {
            return self.drop_frame(
                DropReason::Malformed,
                "IPv4 packet from an impossible source",
            );
        }
        let body = packet.payload();
        match ip.next_header {
            IpProtocol::Icmp => self.process_icmp(src_mac, &ip, body),
            IpProtocol::Homa => self.process_homa(now, src_mac, IpHeader::V4(ip), body),
            _ => self.drop_frame(DropReason::Unsupported, "IP protocol not handled"),
        }
    }

    fn process_icmp<'f>(
        &mut self,
        src_mac: EthernetAddress,
        ip: &Ipv4Repr,
        body: &'f [u8],
    ) -> Option<Reply<'f>> {
        let verify = self.caps.checksum.icmpv4.rx();
        let Ok(packet) = Icmpv4Packet::new_checked(body) else {
            return self.drop_frame(DropReason::Malformed, "bad ICMP");
        };
        let Ok(repr) = Icmpv4Repr::parse(&packet, verify) else {
            // Only a type we act on can fail to parse for its contents; an
            // intact message of another type is one we do not handle.
            let handled = matches!(
                packet.msg_type(),
                Icmpv4Message::EchoRequest
                    | Icmpv4Message::EchoReply
                    | Icmpv4Message::DstUnreachable
            );
            if !handled && (!verify || packet.verify_checksum()) {
                return self.drop_frame(DropReason::NotHandled, "ICMP type not handled");
            }
            return self.drop_frame(DropReason::Malformed, "bad ICMP");
        };
        match repr {
            Icmpv4Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => {
                if self.config.passive_host {
                    net_trace!("homa: echo request left to the other stack");
                    return None;
                }
                Some(Reply::Echo {
                    dst_mac: src_mac,
                    dst_ip: ip.src_addr,
                    ident,
                    seq_no,
                    data,
                })
            }
            Icmpv4Repr::DstUnreachable {
                reason,
                header,
                data,
            } => {
                self.stats.icmp_unreachable_received += 1;
                if header.next_header != IpProtocol::Homa
                    || header.src_addr != self.config.ipv4_addr
                    || data.len() < 4
                {
                    net_trace!("homa: ICMP unreachable for non-Homa traffic ignored");
                    return None;
                }
                let sport = u16::from_be_bytes([data[0], data[1]]);
                let dport = u16::from_be_bytes([data[2], data[3]]);
                let what = match reason {
                    Icmpv4DstUnreachable::PortUnreachable => Unreachable::Port,
                    _ => Unreachable::Host,
                };
                if self.icmp_in_budget == 0 {
                    return self
                        .drop_frame(DropReason::RateLimited, "ICMP error over the tick's budget");
                }
                self.icmp_in_budget -= 1;
                self.unreachable_pkt(IpAddr::V4(header.dst_addr), sport, dport, what);
                None
            }
            _ => self.drop_frame(DropReason::NotHandled, "ICMP type not handled"),
        }
    }

    /// Link-layer header length of the frames we send.
    pub(super) fn link_header_len(&self) -> usize {
        link_header_len(&self.config)
    }
}

/// Where a frame goes and what it carries.
pub(super) struct Route {
    pub dst_mac: EthernetAddress,
    pub dst: IpAddr,
    pub protocol: IpProtocol,
    pub ip_payload_len: usize,
    pub priority: u8,
    /// TTL or hop limit: [`HOP_LIMIT`], or 255 for neighbour discovery
    /// (RFC 4861 checks it arrived unrouted).
    pub hop_limit: u8,
    /// Our IPv6 source, when it must be a given one (an answer comes from
    /// the address it was sent to); `None`: chosen for `dst`.
    pub src_v6: Option<Ipv6Addr>,
}

/// The TTL / hop limit of what we send (Linux's default).
pub(super) const HOP_LIMIT: u8 = 64;

/// Length of the IP header we send to `dst` (no options, no extension
/// headers).
pub(super) const fn ip_header_len(dst: IpAddr) -> usize {
    match dst {
        IpAddr::V4(_) => IPV4_HEADER_LEN,
        IpAddr::V6(_) => IPV6_HEADER_LEN,
    }
}

/// Our source address for packets to `dst` (unspecified when we do not
/// speak its family; such packets are refused before they are built).
pub(super) fn src_for(config: &Config, dst: IpAddr, local: Local) -> IpAddr {
    match dst {
        IpAddr::V4(_) => IpAddr::V4(config.ipv4_addr),
        IpAddr::V6(d) => IpAddr::V6(src_v6(config, d, local.v6(config))),
    }
}

/// Our IPv6 source for `dst`: `given`, else the one the configuration
/// chooses, else unspecified. Without the `ipv6` feature no packet goes to
/// an IPv6 address (`Config::speaks` refuses them), so the choosing code is
/// left out of IPv4-only builds.
fn src_v6(config: &Config, dst: Ipv6Addr, given: Option<Ipv6Addr>) -> Ipv6Addr {
    #[cfg(feature = "ipv6")]
    let chosen = given.or_else(|| config.ipv6_src_for(dst));
    #[cfg(not(feature = "ipv6"))]
    let chosen = {
        let _ = (config, dst);
        given
    };
    chosen.unwrap_or(Ipv6Addr::UNSPECIFIED)
}

/// Writes the Ethernet and IP headers of a frame along `to`, with the
/// priority marked as the configuration says (IPv4 TOS or IPv6 traffic
/// class `priority << 5`, as Linux sets them, or the 802.1Q PCP); returns
/// the offset where the IP payload starts.
pub(super) fn emit_headers(
    config: &Config,
    caps: &DeviceCapabilities,
    frame: &mut [u8],
    to: &Route,
) -> usize {
    let (vlan, tos) = match config.priority_encoding {
        PriorityEncoding::Tos => (None, to.priority << 5),
        PriorityEncoding::Vlan { vid } => (
            Some(VlanTag {
                pcp: to.priority,
                dei: false,
                vid,
            }),
            0,
        ),
        PriorityEncoding::None => (None, 0),
    };
    let eth = EthernetRepr {
        src_addr: config.ethernet_addr,
        dst_addr: to.dst_mac,
        vlan,
        ethertype: match to.dst {
            IpAddr::V4(_) => EtherType::Ipv4,
            IpAddr::V6(_) => EtherType::Ipv6,
        },
    };
    eth.emit(&mut EthernetFrame::new_unchecked(&mut *frame));
    let l2 = eth.header_len();
    match to.dst {
        IpAddr::V4(dst) => {
            let ip = Ipv4Repr {
                src_addr: config.ipv4_addr,
                dst_addr: dst,
                next_header: to.protocol,
                payload_len: to.ip_payload_len,
                hop_limit: to.hop_limit,
                tos,
            };
            ip.emit(
                &mut Ipv4Packet::new_unchecked(&mut frame[l2..]),
                caps.checksum.ipv4.tx(),
            );
            l2 + IPV4_HEADER_LEN
        }
        IpAddr::V6(dst) => {
            let ip = Ipv6Repr {
                src_addr: src_v6(config, dst, to.src_v6),
                dst_addr: dst,
                next_header: to.protocol,
                payload_len: to.ip_payload_len,
                hop_limit: to.hop_limit,
                traffic_class: tos,
            };
            ip.emit(&mut Ipv6Packet::new_unchecked(&mut frame[l2..]));
            l2 + IPV6_HEADER_LEN
        }
    }
}

impl<'a> Endpoint<'a> {
    fn send_reply<T: TxToken>(&mut self, mut tx: T, reply: Reply<'_>) {
        let top = self.config.highest_priority();
        tx.set_meta(PacketMeta::with_priority(top));
        match reply {
            Reply::Arp { dst_mac, dst_ip } => {
                self.emit_arp(tx, ArpOperation::Reply, dst_mac, dst_ip)
            }
            Reply::Echo {
                dst_mac,
                dst_ip,
                ident,
                seq_no,
                data,
            } => {
                let icmp = Icmpv4Repr::EchoReply {
                    ident,
                    seq_no,
                    data,
                };
                self.emit_icmp(tx, dst_mac, dst_ip, &icmp, top);
                self.stats.icmp_echo_replies += 1;
            }
            Reply::PortUnreachable {
                dst_mac,
                dst_ip,
                header,
                data,
            } => {
                let icmp = Icmpv4Repr::DstUnreachable {
                    reason: Icmpv4DstUnreachable::PortUnreachable,
                    header,
                    data,
                };
                self.emit_icmp(tx, dst_mac, dst_ip, &icmp, top);
                self.stats.icmp_unreachable_sent += 1;
            }
            #[cfg(feature = "ipv6")]
            Reply::Echo6 {
                dst_mac,
                src_ip,
                dst_ip,
                ident,
                seq_no,
                data,
            } => {
                let icmp = Icmpv6Repr::EchoReply {
                    ident,
                    seq_no,
                    data,
                };
                self.emit_icmpv6(tx, dst_mac, Some(src_ip), dst_ip, &icmp, top);
                self.stats.icmp_echo_replies += 1;
            }
            #[cfg(feature = "ipv6")]
            Reply::PortUnreachable6 {
                dst_mac,
                src_ip,
                dst_ip,
                header,
                data,
            } => {
                let icmp = Icmpv6Repr::DstUnreachable {
                    reason: Icmpv6DstUnreachable::PortUnreachable,
                    header,
                    data,
                };
                self.emit_icmpv6(tx, dst_mac, Some(src_ip), dst_ip, &icmp, top);
                self.stats.icmp_unreachable_sent += 1;
            }
            #[cfg(feature = "ipv6")]
            Reply::Advert {
                dst_mac,
                dst_ip,
                target,
                solicited,
            } => {
                let icmp = Icmpv6Repr::NeighborAdvert {
                    router: false,
                    solicited,
                    override_: true,
                    target_addr: target,
                    lladdr: Some(self.config.ethernet_addr),
                };
                self.emit_icmpv6(tx, dst_mac, Some(target), dst_ip, &icmp, top);
                self.stats.ndp_adverts += 1;
            }
        }
    }

    fn emit_icmp<T: TxToken>(
        &mut self,
        tx: T,
        dst_mac: EthernetAddress,
        dst_ip: Ipv4Addr,
        icmp: &Icmpv4Repr<'_>,
        priority: u8,
    ) {
        let fill = self.caps.checksum.icmpv4.tx();
        let route = Route {
            dst_mac,
            dst: IpAddr::V4(dst_ip),
            protocol: IpProtocol::Icmp,
            ip_payload_len: icmp.buffer_len(),
            priority,
            hop_limit: HOP_LIMIT,
            src_v6: None,
        };
        self.emit_ip(tx, &route, |body| {
            icmp.emit(&mut Icmpv4Packet::new_unchecked(body), fill)
        });
    }

    /// Sends one frame along `route` whose IP payload `body` writes (an
    /// answer or an ARP-like request; not DATA), if it fits the device.
    pub(super) fn emit_ip<T: TxToken>(
        &mut self,
        tx: T,
        route: &Route,
        body: impl FnOnce(&mut [u8]),
    ) {
        let len = self.link_header_len() + ip_header_len(route.dst) + route.ip_payload_len;
        if !self.fits(len) {
            return;
        }
        tx.consume(len, |frame| {
            let at = emit_headers(&self.config, &self.caps, frame, route);
            if let Some(b) = frame.get_mut(at..) {
                body(b);
            }
        });
        self.stats.tx_frames += 1;
    }

    /// Sends an ARP packet to `dst_mac`: a reply to `dst_ip`, or a request
    /// for it (broadcast, or a unicast probe of a known address).
    pub(super) fn emit_arp<T: TxToken>(
        &mut self,
        tx: T,
        operation: ArpOperation,
        dst_mac: EthernetAddress,
        dst_ip: Ipv4Addr,
    ) {
        let arp = ArpRepr::EthernetIpv4 {
            operation,
            source_hardware_addr: self.config.ethernet_addr,
            source_protocol_addr: self.config.ipv4_addr,
            target_hardware_addr: if operation == ArpOperation::Request {
                EthernetAddress([0; 6])
            } else {
                dst_mac
            },
            target_protocol_addr: dst_ip,
        };
        let eth = EthernetRepr {
            src_addr: self.config.ethernet_addr,
            dst_addr: dst_mac,
            vlan: arp_vlan(&self.config),
            ethertype: EtherType::Arp,
        };
        if !self.fits(eth.header_len() + arp.buffer_len()) {
            return;
        }
        tx.consume(eth.header_len() + arp.buffer_len(), |frame| {
            eth.emit(&mut EthernetFrame::new_unchecked(&mut *frame));
            arp.emit(&mut ArpPacket::new_unchecked(
                &mut frame[eth.header_len()..],
            ));
        });
        self.stats.tx_frames += 1;
    }

    /// Whether a frame of `len` bytes fits the device; if not, it is counted
    /// as a drop and not sent (a device is never handed more than its MTU).
    pub(super) fn fits(&mut self, len: usize) -> bool {
        if len <= self.caps.max_transmission_unit {
            return true;
        }
        self.count_drop(DropReason::FrameTooBig);
        false
    }

    /// Sends ARP requests (or neighbour solicitations) for peers with work
    /// waiting and no link address, or whose link address is in doubt (at
    /// most once per `ARP_RETRY` each): by broadcast, or by unicast to a
    /// confirmed address (see `peer`). Walks only the resolve list (peers
    /// unresolved or in doubt), which a peer leaves once resolved and not
    /// in doubt.
    pub(super) fn egress_arp<D: Device + ?Sized>(&mut self, now: Instant, device: &mut D) {
        if !self.timers.is_due(Timer::Resolve, now) {
            return;
        }
        // The next time one is due, for poll_at.
        let mut next: Option<Instant> = None;
        let mut due = |t: Instant| next = Some(next.map_or(t, |n: Instant| n.min(t)));
        let mut cursor = self.resolving.front();
        while let Some(i) = cursor {
            cursor = self.resolving.next_of(&self.peers[..], i);
            let Some(p) = self.peers.get(usize::from(i)).and_then(|s| s.peer.as_ref()) else {
                self.resolving.remove(&mut self.peers[..], i);
                continue;
            };
            if p.resolved() && !p.probe {
                self.resolving.remove(&mut self.peers[..], i);
                continue;
            }
            // Wanted while an RPC waits to send to it (parked) or, with
            // RPCs, while its address is in doubt; not for a finished RPC
            // the application has yet to release.
            let wanted_later = p.parked > 0 || (p.probe && p.rpcs > 0);
            let t = p.arp_sent;
            if t != Instant::ZERO && now < t + ARP_RETRY {
                if wanted_later {
                    due(t + ARP_RETRY);
                }
                continue;
            }
            let addr = p.addr;
            let wanted = wanted_later
                || self
                    .ctrl
                    .iter()
                    .any(|c| c.addr == addr && c.link_addr.is_none());
            if !wanted {
                continue;
            }
            let Some(tx) = device.transmit(now) else {
                // Out of tokens: the rest waits for the next poll.
                self.timers.set(Timer::Resolve, now);
                return;
            };
            if wanted_later {
                due(now + ARP_RETRY);
            }
            // One probe per doubt; another silence (or an unanswered
            // probe) raises it again.
            let unicast = self
                .peers
                .get_mut(usize::from(i))
                .and_then(|s| s.peer.as_mut())
                .and_then(|p| p.probe_sent(now));
            match addr {
                IpAddr::V4(a) => {
                    let to = unicast.unwrap_or(EthernetAddress::BROADCAST);
                    self.emit_arp(tx, ArpOperation::Request, to, a);
                    self.stats.arp_requests += 1;
                }
                #[cfg(feature = "ipv6")]
                IpAddr::V6(a) => self.emit_solicit(tx, a, unicast),
                // Not reached: without IPv6 no peer is IPv6.
                #[cfg(not(feature = "ipv6"))]
                IpAddr::V6(_) => {}
            }
        }
        self.timers.update(Timer::Resolve, next);
    }
}

/// The 802.1Q tag of frames that carry no Homa priority (ARP): our VLAN at
/// PCP 0, so that they reach the hosts our Homa frames reach on a trunk;
/// none when the tag only carries priority (VLAN id 0) or there is none.
fn arp_vlan(config: &Config) -> Option<VlanTag> {
    match config.priority_encoding {
        PriorityEncoding::Vlan { vid } if vid != 0 => Some(VlanTag {
            pcp: 0,
            dei: false,
            vid,
        }),
        _ => None,
    }
}

/// Link-layer header length of the frames sent with this configuration.
pub(super) fn link_header_len(config: &Config) -> usize {
    match config.priority_encoding {
        PriorityEncoding::Vlan { .. } => 18,
        _ => 14,
    }
}
