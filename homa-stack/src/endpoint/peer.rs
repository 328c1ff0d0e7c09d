//! Per-peer state: address, neighbour-cache entry, the unscheduled cutoffs
//! the peer announced and their version, and the acks waiting to be
//! piggy-backed.
//!
//! The peer table doubles as the neighbour cache: Homa only ever sends to its
//! peers, so the link address lives with the rest of the peer's state (what
//! is believed of it, and when it is asked about: see `neighbour`). A peer
//! no RPC refers to waits on the idle list, the eviction order, unless the
//! application set its link address ([`add_neighbor`]): such a peer is
//! pinned, never evicted, so that no stranger's requests can push it out
//! and have its address learned again. A table full of pinned peers and
//! peers with RPCs takes no new peer: a request from a new address is
//! dropped (`drops.peer_table_full`), and a request to one or a new
//! neighbour is refused with [`SendError::PeerTableFull`] until
//! [`remove_neighbor`] unpins one or an RPC ends.
//!
//! [`add_neighbor`]: super::Endpoint::add_neighbor
//! [`remove_neighbor`]: super::Endpoint::remove_neighbor
//! [`SendError::PeerTableFull`]: super::SendError::PeerTableFull

use crate::config::NUM_PRIORITIES;
use crate::storage::{IndexLink, IndexNode, ListLink, ListNode, Meld};
use crate::time::Instant;
use crate::wire::homa::{Ack, MAX_ACKS};
use crate::wire::{EthernetAddress, IpAddr};
use heapless::Vec;

use super::ctrl::{ack_packet, Ctrl, CtrlPacket};
use super::neighbour::{Claim, Neighbour};
use super::timers::Timer;

/// Acks one ACK packet holds in all: its five entries and the RPC its
/// common header names. A peer collects that many; a full batch moves into
/// the control queue as one ACK packet.
pub const ACK_BATCH: usize = MAX_ACKS + 1;

/// One entry of the caller-supplied peer table, with the links that find
/// it by address and queue it without a walk over the table.
#[derive(Debug, Clone)]
pub struct PeerSlot {
    pub(crate) peer: Option<Peer>,
    /// In the free list, or the idle list (a peer no RPC refers to and
    /// not pinned, oldest first: the eviction order).
    table: ListLink,
    /// In the list of peers whose link address is unknown or in doubt.
    resolve: ListLink,
    /// In the index by address.
    by_addr: IndexLink,
    /// The peer's RPCs that are grant candidates, best at the root; a slot
    /// and not the `Peer`, as the links below (see `queues`).
    pub(crate) grants: Meld,
    /// As its prefix's group leader: in the index of leaders by prefix
    /// (see `share`).
    by_prefix: IndexLink,
}

impl PeerSlot {
    /// An empty slot, for building tables: `[PeerSlot::EMPTY; 16]`.
    pub const EMPTY: PeerSlot = PeerSlot {
        peer: None,
        table: ListLink::EMPTY,
        resolve: ListLink::EMPTY,
        by_addr: IndexLink::EMPTY,
        grants: Meld::EMPTY,
        by_prefix: IndexLink::EMPTY,
    };
}

/// The free and idle lists of peer slots (a kind of list).
pub(crate) const PEER_TABLE: u8 = 0;
/// The list of peers to resolve.
pub(crate) const RESOLVE: u8 = 1;
/// Marker of the peer index by address.
pub(crate) struct PeerAddrTag;
/// Marker of the index of group leaders by prefix.
pub(crate) struct PrefixTag;
impl ListNode for PeerSlot {
    fn list_link(&self, kind: u8) -> &ListLink {
        if kind == RESOLVE {
            &self.resolve
        } else {
            &self.table
        }
    }
    fn list_link_mut(&mut self, kind: u8) -> &mut ListLink {
        if kind == RESOLVE {
            &mut self.resolve
        } else {
            &mut self.table
        }
    }
}

impl IndexNode<PeerAddrTag> for PeerSlot {
    fn index_link(&self) -> &IndexLink {
        &self.by_addr
    }
    fn index_link_mut(&mut self) -> &mut IndexLink {
        &mut self.by_addr
    }
}

impl IndexNode<PrefixTag> for PeerSlot {
    fn index_link(&self) -> &IndexLink {
        &self.by_prefix
    }
    fn index_link_mut(&mut self) -> &mut IndexLink {
        &mut self.by_prefix
    }
}

impl Default for PeerSlot {
    fn default() -> Self {
        Self::EMPTY
    }
}

// In this order: laid out by the compiler, a new peer was built through a
// temporary whose zeroes began at an odd offset, which pulled a 208-byte
// unaligned memory clear into the firmware. What is left undefined (the
// link address while unknown, the acks' storage) comes last.
#[derive(Debug, Clone)]
#[repr(C)]
pub(crate) struct Peer {
    /// Last time the peer was used, for least-recently-used eviction.
    pub last_used: Instant,
    /// The peer's cutoffs for our unscheduled packets to it.
    pub cutoffs: [u32; NUM_PRIORITIES],
    /// As a leader: the pool pages its group's server RPCs hold.
    pub pages: u32,
    /// Version of `cutoffs`, echoed in our DATA (0 before any CUTOFFS).
    pub cutoff_version: u16,
    /// RPCs that refer to this peer: it is not evicted while any do.
    pub rpcs: u16,
    /// Of those, our server RPCs (see `share`).
    pub served: u16,
    /// The leader of the group of peers of its prefix, which counts their
    /// share (itself, or `NONE` before its first server RPC; see `share`).
    pub group: u16,
    /// As a leader: the peers of its group, itself included (it is not
    /// evicted while others are in it).
    pub members: u16,
    /// As a leader: the group's server RPCs.
    pub grouped: u16,
    /// RPCs with DATA waiting for the link address (`queues`).
    pub parked: u16,
    /// An ACK packet that takes `acks` when it is sent waits in the
    /// control queue (for NEED_ACK answers: one at a time per peer).
    pub ack_flush_queued: bool,
    pub addr: IpAddr,
    /// Its link address and what is believed of it.
    pub nbr: Neighbour,
    /// When we last sent CUTOFFS to this peer (at most one per tick).
    pub cutoffs_sent: Option<Instant>,
    /// Acks for the peer's server RPCs, popped into our DATA packets.
    pub acks: Vec<Ack, ACK_BATCH>,
}

impl Peer {
    pub fn new(addr: IpAddr, now: Instant) -> Peer {
        // Linux's initial cutoffs: everything unscheduled at priority 6 until
        // the peer tells us otherwise ([7] = 0, [6] = INT_MAX, rest 0).
        let mut cutoffs = [0; NUM_PRIORITIES];
        cutoffs[6] = i32::MAX as u32;
        Peer {
            addr,
            nbr: Neighbour::new(),
            cutoffs,
            cutoff_version: 0,
            cutoffs_sent: None,
            acks: Vec::new(),
            ack_flush_queued: false,
            rpcs: 0,
            served: 0,
            group: crate::storage::NONE,
            members: 0,
            grouped: 0,
            pages: 0,
            parked: 0,
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

    /// Whether its link address is wanted until it comes, or a doubt
    /// about it is to be probed: while an RPC waits to send to it
    /// (parked) or, with RPCs, while its address is in doubt; not for a
    /// finished RPC the application has yet to release.
    pub fn resolve_wanted(&self) -> bool {
        self.parked > 0 || (self.nbr.doubted() && self.rpcs > 0)
    }

    /// Whether it may be evicted: no RPC refers to it, it leads no group
    /// with other peers in it, and the application did not pin it.
    pub fn idle(&self) -> bool {
        self.rpcs == 0 && self.members <= 1 && !self.nbr.pinned()
    }

    /// Whether frames can be addressed to the peer.
    pub fn resolved(&self) -> bool {
        self.nbr.mac().is_some()
    }

    /// Stores cutoffs received in a CUTOFFS packet.
    pub fn set_cutoffs(&mut self, cutoffs: [u32; NUM_PRIORITIES], version: u16) {
        self.cutoffs = cutoffs;
        self.cutoffs[0] = i32::MAX as u32;
        self.cutoff_version = version;
    }
}

/// The peer table: finding, creating and evicting peers, and their acks.
impl<'a> super::Endpoint<'a> {
    /// The index of the peer at `addr`, if it is in the table (a lookup
    /// in the index by address, not a walk).
    pub(super) fn find_peer(&self, addr: IpAddr) -> Option<u16> {
        let h = self.hash.addr(addr);
        let is = |s: &PeerSlot| s.peer.as_ref().is_some_and(|p| p.addr == addr);
        #[cfg(any(test, fuzzing))]
        let is = self.counting(is);
        self.peer_addrs.find(&self.peers[..], h, is)
    }

    /// The index of the peer at `addr`, created if needed: only for an RPC
    /// about to exist (a request we send, or one that arrived), so strangers
    /// that hold no RPC never take an entry. A full table evicts the peer
    /// that has been idle (referred to by no RPC, and not pinned) longest:
    /// the idle list's front, so no walk.
    pub(super) fn peer_index(&mut self, addr: IpAddr, now: Instant) -> Option<u16> {
        let last = self.last_peer;
        let is_last = self
            .peers
            .get(usize::from(last))
            .and_then(|s| s.peer.as_ref())
            .is_some_and(|p| p.addr == addr);
        if is_last {
            return Some(last);
        }
        if let Some(i) = self.find_peer(addr) {
            self.last_peer = i;
            return Some(i);
        }
        let i = match self.peer_free.pop_front(&mut self.peers[..]) {
            Some(i) => i,
            None => match self.peer_idle.pop_front(&mut self.peers[..]) {
                Some(i) => {
                    self.forget_peer(i);
                    self.stats.peers_evicted += 1;
                    i
                }
                None => {
                    self.count_drop(crate::stats::DropReason::PeerTableFull);
                    return None;
                }
            },
        };
        let slot = usize::from(i);
        self.peers[slot].peer = Some(Peer::new(addr, now));
        let h = self.hash.addr(addr);
        self.peer_addrs.insert(&mut self.peers[..], i, h);
        self.peer_idle.push_back(&mut self.peers[..], i);
        self.resolving.push_back(&mut self.peers[..], i);
        self.last_peer = i;
        Some(i)
    }

    /// Takes an evicted peer out of the index, the resolve list and its
    /// group.
    fn forget_peer(&mut self, i: u16) {
        self.peer_addrs.remove(&mut self.peers[..], i);
        self.resolving.remove(&mut self.peers[..], i);
        if let Some(p) = self.peers[usize::from(i)].peer.take() {
            self.left_group(i, p.group);
        }
    }

    /// An RPC now refers to peer `pi`: it is not evictable.
    pub(super) fn peer_taken(&mut self, pi: u16) {
        let now = self.now;
        if let Some(p) = self
            .peers
            .get_mut(usize::from(pi))
            .and_then(|s| s.peer.as_mut())
        {
            p.rpcs = p.rpcs.saturating_add(1);
            p.last_used = now;
        }
        self.peer_idle.remove(&mut self.peers[..], pi);
        // An RPC now waits for this peer's link address, or needs the one in
        // doubt while no RPC did: ask at once.
        self.peer_doubted(pi);
    }

    /// An RPC that referred to peer `pi` is gone: with the last one, the
    /// peer joins the back of the eviction order, unless pinned.
    pub(super) fn peer_released(&mut self, pi: u16) {
        let Some(p) = self
            .peers
            .get_mut(usize::from(pi))
            .and_then(|s| s.peer.as_mut())
        else {
            return;
        };
        p.rpcs = p.rpcs.saturating_sub(1);
        if p.idle() {
            self.peer_idle.push_back(&mut self.peers[..], pi);
        }
    }

    /// Peer `pi`'s link address may be missing or have come into doubt: if
    /// so, ARP is asked at the next egress (the resolve list holds the
    /// peers to ask about).
    pub(super) fn peer_doubted(&mut self, pi: u16) {
        if self
            .peers
            .get(usize::from(pi))
            .and_then(|s| s.peer.as_ref())
            .is_some_and(|p| p.nbr.to_ask())
        {
            self.resolving.push_back(&mut self.peers[..], pi);
            self.timers.set(Timer::Resolve, Instant::ZERO);
        }
    }

    /// Applies the link address ARP or neighbour discovery gave for a peer
    /// we hold (no entry is made for a stranger): taken, or refused and
    /// counted (see `Neighbour::claimed`); false for a stranger.
    // Out of line on firmware: inlined into the frame handler it was larger.
    #[cfg_attr(target_os = "none", inline(never))]
    pub(super) fn learn(&mut self, addr: IpAddr, mac: EthernetAddress) -> bool {
        let now = self.now;
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
        match p.nbr.claimed(mac, now) {
            Claim::Refused => {
                net_debug!("homa: link address claim for {} refused: kept", addr);
                self.stats.link_addr_claims_refused += 1;
            }
            claim => {
                #[cfg(feature = "ipv6")]
                match addr {
                    IpAddr::V4(_) => self.stats.arp_learned += 1,
                    IpAddr::V6(_) => self.stats.ndp_learned += 1,
                }
                // Without IPv6 only ARP teaches.
                #[cfg(not(feature = "ipv6"))]
                {
                    self.stats.arp_learned += 1;
                }
                if claim == Claim::Learned {
                    self.peer_resolved_now(i);
                }
            }
        }
        // A refused or unasked claim leaves the address in doubt, to be
        // asked about.
        self.peer_doubted(i);
        true
    }

    /// Queues the ack of a completed client RPC on its peer.
    pub(super) fn queue_ack(&mut self, slot: usize) {
        let Some(r) = self.rpc_at(slot) else {
            return;
        };
        let ack = Ack {
            client_id: r.id(),
            server_port: r.peer_port(),
        };
        let (pi, addr, sport) = (r.peer(), r.peer_addr(), r.local_port());
        self.add_ack(pi, addr, sport, ack, false);
    }

    /// Adds an ack to the peer's batch: acks ride on the next DATA to that
    /// peer, and each full batch becomes one ACK packet. With `now`, an ACK
    /// packet taking what waits goes out at the next poll anyway (one queued
    /// per peer at a time). Acks are unreliable (docs/protocol.md 4.8): when the
    /// control queue is full they are dropped, counted, and the server's
    /// NEED_ACK asks again.
    pub(super) fn add_ack(&mut self, pi: u16, addr: IpAddr, sport: u16, ack: Ack, now: bool) {
        let Some(peer) = self
            .peers
            .get_mut(usize::from(pi))
            .and_then(|s| s.peer.as_mut())
        else {
            return;
        };
        let _ = peer.acks.push(ack);
        let link_addr = peer.nbr.mac();
        let (packet, lost) = if peer.acks.is_full() {
            let lost = peer.acks.len() as u64;
            let repr = ack_packet(sport, &peer.acks);
            peer.acks.clear();
            let Some(repr) = repr else {
                return;
            };
            (CtrlPacket::Homa(repr), lost)
        } else if now && !peer.ack_flush_queued {
            peer.ack_flush_queued = true;
            (CtrlPacket::AcksWaiting { sport }, 0)
        } else {
            return;
        };
        let queued = self.push_ctrl(Ctrl {
            addr,
            link_addr,
            // Acks are a client's: its chosen address, as its requests.
            local: super::types::Local::CHOSEN,
            packet,
        });
        if !queued {
            self.stats.acks_dropped += lost;
            if let Some(p) = self
                .peers
                .get_mut(usize::from(pi))
                .and_then(|s| s.peer.as_mut())
            {
                p.ack_flush_queued = false;
            }
        }
    }

    // Out of line on the firmware (smaller there); the compiler's choice on hosts.
    #[cfg_attr(target_os = "none", inline(never))]
    pub(super) fn peer_resolved(&self, peer: u16) -> bool {
        self.peers
            .get(usize::from(peer))
            .and_then(|p| p.peer.as_ref())
            .is_some_and(|p| p.resolved())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_peer_sends_unscheduled_at_priority_6() {
        let p = Peer::new(
            IpAddr::V4(crate::wire::Ipv4Addr::new(10, 0, 0, 2)),
            Instant::ZERO,
        );
        assert_eq!(p.unsched_priority(1, 8), 6);
        assert_eq!(p.unsched_priority(1_000_000, 8), 6);
    }

    #[test]
    fn linux_default_cutoffs_map_sizes_to_7_6_5_4() {
        let mut p = Peer::new(
            IpAddr::V4(crate::wire::Ipv4Addr::new(10, 0, 0, 2)),
            Instant::ZERO,
        );
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
