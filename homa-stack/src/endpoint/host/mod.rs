//! The host layer: Ethernet in and out, ARP (`arp`), IPv4 and ICMP
//! (`ipv4`), IPv6, ICMPv6 and neighbour discovery (`ipv6`). Frames tagged
//! for another VLAN than ours are dropped first.
//!
//! It knows no RPC: what a received frame means for the endpoint it hands
//! up through [`HandUp`] (a Homa packet with its addresses, or an ICMP
//! error about our Homa packets), and the endpoint's input decides what
//! that does. What it keeps of other hosts is the neighbour cache, which is
//! the peer table (see `peer`).
//!
//! Frames that need an immediate answer (ARP requests, pings, packets to
//! closed ports) are answered through the transmit token the device hands out
//! with the received frame, so no frame is ever copied into a queue.

mod arp;
mod ipv4;
#[cfg(feature = "ipv6")]
pub(super) mod ipv6;

use super::types::{IpHeader, Local, Reply, Unreachable};
use super::Endpoint;
use crate::config::{Config, PriorityEncoding};
use crate::phy::{Device, DeviceCapabilities, PacketMeta, RxToken, TxToken};
use crate::stats::DropReason;
use crate::time::Instant;
use crate::wire::ethernet::{EtherType, EthernetFrame, EthernetRepr, VlanTag};
use crate::wire::icmpv4::{Icmpv4DstUnreachable, Icmpv4Repr};
#[cfg(feature = "ipv6")]
use crate::wire::icmpv6::{Icmpv6DstUnreachable, Icmpv6Repr};
use crate::wire::ipv4::{Ipv4Packet, Ipv4Repr};
use crate::wire::ipv6::{Ipv6Packet, Ipv6Repr};
use crate::wire::{ArpOperation, EthernetAddress, IpAddr, IpProtocol, Ipv6Addr};

/// IPv4 header length of every packet we send (no options).
pub(super) const IPV4_HEADER_LEN: usize = crate::wire::ipv4::HEADER_LEN;
/// IPv6 header length of every packet we send (no extension headers).
pub(super) const IPV6_HEADER_LEN: usize = crate::wire::ipv6::HEADER_LEN;

/// What the host layer hands up, and the only way it reaches the engine:
/// the endpoint's input implements it.
pub(super) trait HandUp {
    /// A Homa packet for one of our addresses; what to answer through the
    /// frame's transmit token, if anything (a port unreachable).
    fn homa<'f>(&mut self, now: Instant, packet: HomaIn<'f>) -> Option<Reply<'f>>;

    /// ICMP says a Homa packet of ours to `addr`, whose first bytes it
    /// quotes in `quote`, could not be delivered, for the reason `what`.
    fn unreachable(&mut self, addr: IpAddr, quote: &[u8], what: Unreachable);
}

/// A Homa packet for us, with its addresses.
#[derive(Clone, Copy)]
pub(super) struct HomaIn<'f> {
    /// The link address it came from.
    pub(super) mac: EthernetAddress,
    /// The IP header it came in: its addresses, and what an ICMP error
    /// about it would quote.
    pub(super) ip: IpHeader<'f>,
    /// The Homa packet: the IP payload past any extension headers.
    pub(super) body: &'f [u8],
}

impl<'a> Endpoint<'a> {
    /// Takes up to `max_rx_per_poll` frames from the device; true when
    /// the device had no more to give (false: it may hold more).
    pub(super) fn ingress<D: Device + ?Sized>(&mut self, now: Instant, device: &mut D) -> bool {
        for _ in 0..self.config.max_rx_per_poll {
            let Some((rx, tx)) = device.receive(now) else {
                return true;
            };
            self.stats.rx_frames += 1;
            rx.consume(|frame| {
                if let Some(reply) = self.process_frame(now, frame) {
                    self.send_reply(tx, reply);
                }
            });
        }
        false
    }

    /// A received frame: what to answer through its transmit token, if
    /// anything.
    // Out of line on firmware: inlined into a small program's poll loop,
    // its body is copied there and the firmware's `.text` is larger.
    #[cfg_attr(target_os = "none", inline(never))]
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

    /// Counts a dropped frame with a debug line saying what was wrong (the
    /// endpoint's input uses it too).
    // Out of line on firmware, as `count_drop`.
    #[cfg_attr(target_os = "none", inline(never))]
    pub(super) fn drop_frame<T>(&mut self, why: DropReason, what: &str) -> Option<T> {
        net_debug!("homa: drop ({}): {}", why, what);
        self.stats.drops.count(why);
        None
    }

    /// Counts a dropped packet with a debug line.
    // Out of line on firmware: a call is smaller than the counter's
    // address and the call to `Drops::count` at each drop site.
    #[cfg_attr(target_os = "none", inline(never))]
    pub(super) fn count_drop(&mut self, why: DropReason) {
        net_debug!("homa: drop: {}", why);
        self.stats.drops.count(why);
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
    /// Sends `reply` through the transmit token of the frame it answers.
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

    /// Whether a frame of `len` bytes fits the device; if not, it is counted
    /// as a drop and not sent (a device is never handed more than its MTU).
    pub(super) fn fits(&mut self, len: usize) -> bool {
        if len <= self.caps.max_transmission_unit {
            return true;
        }
        self.count_drop(DropReason::FrameTooBig);
        false
    }
}

/// Link-layer header length of the frames sent with this configuration.
pub(super) fn link_header_len(config: &Config) -> usize {
    match config.priority_encoding {
        PriorityEncoding::Vlan { .. } => 18,
        _ => 14,
    }
}
