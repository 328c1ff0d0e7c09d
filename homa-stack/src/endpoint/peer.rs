//! Per-peer state: address, link address, the unscheduled cutoffs the peer
//! announced and their version, and the acks waiting to be piggy-backed.
//!
//! The peer table doubles as the neighbour cache: Homa only ever sends to its
//! peers, so the link address lives with the rest of the peer's state.
//!
//! What a peer claims is not believed before it is checked. A link address
//! is learned only from ARP for our address and from a packet that passed
//! every check for an RPC that exists (and then only if none is known); a
//! packet from another link address never changes it, it asks ARP again.
//! An entry confirmed longer ago than [`REACHABLE`] is stale and is
//! re-resolved (probed with ARP, the old address kept meanwhile) when an RPC
//! to the peer falls silent, as Linux's neighbour cache moves from
//! reachable to stale to probe.

use crate::config::NUM_PRIORITIES;
use crate::time::{Duration, Instant};
use crate::wire::homa::Ack;
use crate::wire::{EthernetAddress, Ipv4Addr};
use heapless::Vec;

/// Acks one ACK packet carries in its entries (`HOMA_MAX_ACKS_PER_PKT`).
pub const MAX_ACKS: usize = 5;

/// Acks one ACK packet holds in all: its five entries and the RPC its
/// common header names. A peer collects that many; a full batch moves into
/// the control queue as one ACK packet.
pub const ACK_BATCH: usize = MAX_ACKS + 1;

/// How long a link address stays reachable after it was last confirmed.
pub const REACHABLE: Duration = Duration::from_secs(30);

/// One entry of the caller-supplied peer table.
#[derive(Debug, Clone)]
pub struct PeerSlot {
    pub(crate) peer: Option<Peer>,
}

impl PeerSlot {
    /// An empty slot, for building tables: `[PeerSlot::EMPTY; 16]`.
    pub const EMPTY: PeerSlot = PeerSlot { peer: None };
}

impl Default for PeerSlot {
    fn default() -> Self {
        Self::EMPTY
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Peer {
    pub addr: Ipv4Addr,
    /// Learned from ARP, or from a checked packet for one of our RPCs.
    pub link_addr: Option<EthernetAddress>,
    /// When `link_addr` was last confirmed by a checked packet from it.
    pub confirmed: Instant,
    /// `link_addr` is in doubt: ask ARP again (keeping it meanwhile).
    pub probe: bool,
    /// When we last asked ARP for `link_addr`.
    pub arp_sent: Option<Instant>,
    /// The peer's cutoffs for our unscheduled packets to it.
    pub cutoffs: [u32; NUM_PRIORITIES],
    /// Version of `cutoffs`, echoed in our DATA (0 before any CUTOFFS).
    pub cutoff_version: u16,
    /// When we last sent CUTOFFS to this peer (at most one per tick).
    pub cutoffs_sent: Option<Instant>,
    /// Acks for the peer's server RPCs, popped into our DATA packets.
    pub acks: Vec<Ack, ACK_BATCH>,
    /// An ACK packet that takes `acks` when it is sent waits in the
    /// control queue (for NEED_ACK answers: one at a time per peer).
    pub ack_flush_queued: bool,
    /// RPCs that refer to this peer: it is not evicted while any do.
    pub rpcs: u16,
    /// Last time the peer was used, for least-recently-used eviction.
    pub last_used: Instant,
}

impl Peer {
    pub fn new(addr: Ipv4Addr, now: Instant) -> Peer {
        // Linux's initial cutoffs: everything unscheduled at priority 6 until
        // the peer tells us otherwise ([7] = 0, [6] = INT_MAX, rest 0).
        let mut cutoffs = [0; NUM_PRIORITIES];
        cutoffs[6] = i32::MAX as u32;
        Peer {
            addr,
            link_addr: None,
            confirmed: Instant::ZERO,
            probe: false,
            arp_sent: None,
            cutoffs,
            cutoff_version: 0,
            cutoffs_sent: None,
            acks: Vec::new(),
            ack_flush_queued: false,
            rpcs: 0,
            last_used: now,
        }
    }

    /// Priority of the unscheduled packets of a message of `length` bytes:
    /// the highest level whose cutoff covers the length.
    pub fn unsched_priority(&self, length: u32, num_priorities: u8) -> u8 {
        let n = usize::from(num_priorities.clamp(1, NUM_PRIORITIES as u8));
        (0..n)
            .rev()
            .find(|&i| self.cutoffs[i] >= length)
            .unwrap_or(0) as u8
    }

    /// Whether frames can be addressed to the peer.
    pub fn resolved(&self) -> bool {
        self.link_addr.is_some()
    }

    /// A checked packet for one of our RPCs came from `mac`: it confirms the
    /// known link address, fills a missing one, and casts doubt on a
    /// different one (which is then probed, never replaced from here).
    pub fn heard_from(&mut self, mac: EthernetAddress, now: Instant) {
        if !mac.is_unicast() {
            return;
        }
        match self.link_addr {
            Some(known) if known == mac => self.confirmed = now,
            Some(_) => self.probe = true,
            None => {
                self.link_addr = Some(mac);
                self.confirmed = now;
            }
        }
    }

    /// ARP told us the peer's link address. ARP is easy to forge, so it
    /// does not confirm the address: only the peer's own Homa packets do
    /// (a new address is unconfirmed, and probed again at the first silence).
    pub fn resolved_by_arp(&mut self, mac: EthernetAddress) {
        if self.link_addr != Some(mac) {
            self.link_addr = Some(mac);
            self.confirmed = Instant::ZERO;
        }
        self.probe = false;
    }

    /// An RPC to the peer fell silent: if the link address has not been
    /// confirmed for `REACHABLE`, or not since the silence began, ask ARP.
    pub fn silent(&mut self, silent_since: Instant, now: Instant) {
        if self.confirmed <= silent_since || now >= self.confirmed + REACHABLE {
            self.probe = true;
        }
    }

    /// Stores cutoffs received in a CUTOFFS packet.
    pub fn set_cutoffs(&mut self, cutoffs: [u32; NUM_PRIORITIES], version: u16) {
        self.cutoffs = cutoffs;
        self.cutoffs[0] = i32::MAX as u32;
        self.cutoff_version = version;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_peer_sends_unscheduled_at_priority_6() {
        let p = Peer::new(Ipv4Addr::new(10, 0, 0, 2), Instant::ZERO);
        assert_eq!(p.unsched_priority(1, 8), 6);
        assert_eq!(p.unsched_priority(1_000_000, 8), 6);
    }

    #[test]
    fn linux_default_cutoffs_map_sizes_to_7_6_5_4() {
        let mut p = Peer::new(Ipv4Addr::new(10, 0, 0, 2), Instant::ZERO);
        p.set_cutoffs([0, 0, 0, 0, 1_000_000, 15_000, 2_800, 200], 1);
        assert_eq!(p.unsched_priority(200, 8), 7);
        assert_eq!(p.unsched_priority(201, 8), 6);
        assert_eq!(p.unsched_priority(2_800, 8), 6);
        assert_eq!(p.unsched_priority(15_000, 8), 5);
        assert_eq!(p.unsched_priority(1_000_000, 8), 4);
        assert_eq!(p.cutoff_version, 1);
        // Fewer priority levels cap the choice.
        assert_eq!(p.unsched_priority(200, 4), 0);
    }
}
