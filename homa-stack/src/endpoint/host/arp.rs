//! ARP: answering requests for our address, learning peers' link
//! addresses (under the rules in `neighbour`), and asking for them.

use super::Reply;
use crate::config::{Config, PriorityEncoding};
use crate::endpoint::timers::Timer;
use crate::endpoint::Endpoint;
use crate::phy::{Device, TxToken};
use crate::stats::DropReason;
use crate::time::Instant;
use crate::wire::arp::{ArpOperation, ArpPacket, ArpRepr};
use crate::wire::ethernet::{EtherType, EthernetFrame, EthernetRepr, VlanTag};
use crate::wire::{EthernetAddress, IpAddr, Ipv4Addr};

impl<'a> Endpoint<'a> {
    /// ARP teaches link addresses (under the rules in `neighbour`): from a
    /// request for our address or a reply to us, whose Ethernet source
    /// agrees with the sender it names, for a peer we hold.
    pub(super) fn process_arp<'f>(
        &mut self,
        eth_src: EthernetAddress,
        payload: &[u8],
    ) -> Option<Reply<'f>> {
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
        // Checked above: for our address, from a unicast sender.
        if operation == ArpOperation::Request && !self.config.passive_host {
            self.stats.arp_replies += 1;
            return Some(Reply::Arp {
                dst_mac: source_hardware_addr,
                dst_ip: source_protocol_addr,
            });
        }
        None
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
        let len = eth.header_len() + arp.buffer_len();
        if !self.fits(len) {
            return;
        }
        tx.consume(len, |frame| {
            eth.emit(&mut EthernetFrame::new_unchecked(&mut *frame));
            arp.emit(&mut ArpPacket::new_unchecked(
                &mut frame[eth.header_len()..],
            ));
        });
        self.stats.tx_frames += 1;
    }

    /// Sends ARP requests (or neighbour solicitations) for peers with work
    /// waiting and no link address, or whose link address is in doubt, as
    /// often as each peer's entry allows (see `neighbour`): by broadcast,
    /// or by unicast to an address the peer proved. Walks only the resolve
    /// list (peers unresolved or in doubt), which a peer leaves once
    /// resolved and not in doubt.
    // Out of line on firmware: inlined into the poll loop it was larger.
    #[cfg_attr(target_os = "none", inline(never))]
    pub(in crate::endpoint) fn egress_arp<D: Device + ?Sized>(
        &mut self,
        now: Instant,
        device: &mut D,
    ) {
        if !self.timers.is_due(Timer::Resolve, now) {
            return;
        }
        // The next time one is due, for poll_at (`MAX`: none).
        let mut next = Instant::MAX;
        let mut due = |t: Instant| next = next.min(t);
        let mut cursor = self.resolving.front();
        while let Some(i) = cursor {
            cursor = self.resolving.next_of(&self.peers[..], i);
            let Some(p) = self.peers.get(usize::from(i)).and_then(|s| s.peer.as_ref()) else {
                self.resolving.remove(&mut self.peers[..], i);
                continue;
            };
            if !p.nbr.to_ask() {
                self.resolving.remove(&mut self.peers[..], i);
                continue;
            }
            let wanted_later = p.resolve_wanted();
            let at = p.nbr.next_probe();
            if now < at {
                if wanted_later {
                    due(at);
                }
                continue;
            }
            let addr = p.addr;
            if !wanted_later && !self.ctrl_waits_for(addr) {
                continue;
            }
            let Some(tx) = device.transmit(now) else {
                // Out of tokens: the rest waits for the next poll.
                self.timers.set(Timer::Resolve, now);
                return;
            };
            // One probe per doubt; another silence (or an unanswered
            // probe) raises it again.
            let Some(p) = self
                .peers
                .get_mut(usize::from(i))
                .and_then(|s| s.peer.as_mut())
            else {
                continue;
            };
            let unicast = p.nbr.probe_sent(now);
            if wanted_later {
                due(p.nbr.next_probe());
            }
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
        self.timers.set(Timer::Resolve, next);
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
