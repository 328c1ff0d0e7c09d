//! Per-peer state: address, link address, the unscheduled cutoffs the peer
//! announced and their version, and the acks waiting to be piggy-backed.
//!
//! The peer table doubles as the neighbour cache: Homa only ever sends to its
//! peers, so the link address lives with the rest of the peer's state.
//!
//! What a peer claims is not believed before it is checked. A link address
//! set by the application ([`add_neighbor`]) is never changed from the
//! network. Otherwise one is learned from ARP or neighbour discovery for our
//! address, or from a packet that passed every check for an RPC that exists
//! (and then only if none is known), and it is *confirmed* by the peer's
//! own checked packets from it. ARP and neighbour discovery are easy to
//! forge: they replace an address only while it is unconfirmed; naming
//! another address for a confirmed one, or a checked packet from another
//! address, only puts it in doubt, and it is probed (the old address kept
//! meanwhile). A confirmed address is probed by unicast to it (RFC 4861
//! 7.3.3, as Linux's neighbour cache does); after [`UNICAST_PROBES`]
//! unanswered probes its confirmation lapses and the link is asked by
//! broadcast, whose answer may then replace it. An RPC's silence is a reason
//! to probe only an address unconfirmed for `Config::reachable_time` (then
//! at most once per that time while answered), one never confirmed, or one
//! whose last probe is unanswered: a slow peer's silence is no reason to
//! doubt an address its packets confirm.
//!
//! [`add_neighbor`]: super::Endpoint::add_neighbor

use crate::config::NUM_PRIORITIES;
use crate::storage::{IndexLink, IndexNode, ListLink, ListNode, Meld};
use crate::time::{Duration, Instant};
use crate::wire::homa::{Ack, MAX_ACKS};
use crate::wire::{EthernetAddress, IpAddr};
use heapless::Vec;

use super::ctrl::{ack_packet, Ctrl, CtrlPacket};
use super::timers::Timer;

/// Acks one ACK packet holds in all: its five entries and the RPC its
/// common header names. A peer collects that many; a full batch moves into
/// the control queue as one ACK packet.
pub const ACK_BATCH: usize = MAX_ACKS + 1;

/// Unicast probes of a confirmed link address left unanswered before its
/// confirmation lapses and the link is asked by broadcast (Linux's
/// `ucast_solicit`).
pub const UNICAST_PROBES: u8 = 3;

/// One entry of the caller-supplied peer table, with the links that find
/// it by address and queue it without a walk over the table.
#[derive(Debug, Clone)]
pub struct PeerSlot {
    pub(crate) peer: Option<Peer>,
    /// In the free list, or the idle list (a peer no RPC refers to, oldest
    /// first: the eviction order).
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

#[derive(Debug, Clone)]
pub(crate) struct Peer {
    pub addr: IpAddr,
    /// Set by the application, learned from ARP or neighbour discovery, or
    /// from a checked packet for one of our RPCs.
    pub link_addr: Option<EthernetAddress>,
    /// `link_addr` was set by the application: the network never changes
    /// it, and it is never probed.
    pub fixed: bool,
    /// When `link_addr` was last confirmed by a checked packet from it;
    /// `Instant::ZERO`: never (ARP or neighbour discovery alone taught it).
    pub confirmed: Instant,
    /// `link_addr` is in doubt: probe it at the next egress (keeping it
    /// meanwhile).
    pub probe: bool,
    /// Probes of `link_addr` sent since it was last confirmed or answered.
    pub probes: u8,
    /// When we last asked ARP or neighbour discovery about the peer;
    /// `Instant::ZERO`: never (not an `Option`: it keeps the slot small).
    pub arp_sent: Instant,
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
    /// As a leader: the pool pages those hold.
    pub pages: u32,
    /// Of those, RPCs with DATA waiting for the link address (`queues`).
    pub parked: u16,
    /// Last time the peer was used, for least-recently-used eviction.
    pub last_used: Instant,
}

impl Peer {
    pub fn new(addr: IpAddr, now: Instant) -> Peer {
        // Linux's initial cutoffs: everything unscheduled at priority 6 until
        // the peer tells us otherwise ([7] = 0, [6] = INT_MAX, rest 0).
        let mut cutoffs = [0; NUM_PRIORITIES];
        cutoffs[6] = i32::MAX as u32;
        Peer {
            addr,
            link_addr: None,
            fixed: false,
            confirmed: Instant::ZERO,
            probe: false,
            probes: 0,
            arp_sent: Instant::ZERO,
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

    /// Whether its link address is wanted until it comes (asked again
    /// every `ARP_RETRY`): while an RPC waits to send to it (parked) or,
    /// with RPCs, while its address is in doubt; not for a finished RPC the
    /// application has yet to release.
    pub fn resolve_wanted(&self) -> bool {
        self.parked > 0 || (self.probe && self.rpcs > 0)
    }

    /// Whether it may be evicted: no RPC refers to it, and it leads no
    /// group with other peers in it.
    pub fn idle(&self) -> bool {
        self.rpcs == 0 && self.members <= 1
    }

    /// Whether frames can be addressed to the peer.
    pub fn resolved(&self) -> bool {
        self.link_addr.is_some()
    }

    /// A checked packet for one of our RPCs came from `mac`: it confirms the
    /// known link address (ending any doubt), fills a missing one, and casts
    /// doubt on a different one (which is then probed, never replaced from
    /// here; one the application set is not even probed).
    pub fn heard_from(&mut self, mac: EthernetAddress, now: Instant) {
        if !mac.is_unicast() {
            return;
        }
        match self.link_addr {
            Some(known) if known == mac => {
                self.confirmed = now;
                self.answered();
            }
            Some(_) => self.probe = !self.fixed,
            None => {
                self.link_addr = Some(mac);
                self.confirmed = now;
            }
        }
    }

    /// ARP or neighbour discovery says the peer is at `mac` (a request for
    /// our address, or an answer to us, from `mac` itself). It fills a
    /// missing address and replaces an unconfirmed one; for one the
    /// application set it does nothing, and for a confirmed one it only
    /// raises doubt (see the module doc). It never confirms: only the
    /// peer's own Homa packets do.
    pub fn claimed(&mut self, mac: EthernetAddress) -> Claim {
        match self.link_addr {
            Some(known) if known == mac => {
                self.answered();
                Claim::Kept
            }
            _ if self.fixed => Claim::Refused,
            Some(_) if self.confirmed != Instant::ZERO => {
                self.probe = true;
                Claim::Refused
            }
            _ => {
                self.link_addr = Some(mac);
                self.confirmed = Instant::ZERO;
                self.answered();
                Claim::Learned
            }
        }
    }

    /// A claim that may not replace the address (an advertisement that is
    /// unsolicited or without the override flag) names `mac`: a different
    /// address is put in doubt, unless the application set it. Whether it
    /// differs. (Only neighbour discovery has such claims.)
    #[cfg(feature = "ipv6")]
    pub fn disputed(&mut self, mac: EthernetAddress) -> bool {
        let differs = self.link_addr.is_some_and(|known| known != mac);
        self.probe |= differs && !self.fixed;
        differs
    }

    /// The known address was confirmed or answered for: no doubt is left.
    fn answered(&mut self) {
        self.probe = false;
        self.probes = 0;
    }

    /// An RPC to the peer fell silent (at a RESEND time): probe an address
    /// never confirmed, one whose last probe is unanswered, or one
    /// unconfirmed for `reachable` and not probed for as long; never one
    /// the application set, nor one the peer's packets confirmed within
    /// `reachable` (the peer is slow, not moved).
    pub fn silent(&mut self, now: Instant, reachable: Duration) {
        if self.fixed {
            return;
        }
        let stale = now >= self.confirmed + reachable
            && (self.arp_sent == Instant::ZERO || now >= self.arp_sent + reachable);
        if !self.resolved() || self.confirmed == Instant::ZERO || self.probes > 0 || stale {
            self.probe = true;
        }
    }

    /// A probe goes out now: to the known address while it is confirmed
    /// and fewer than [`UNICAST_PROBES`] went unanswered (`Some`), else
    /// by broadcast (`None`; the confirmation lapses, so that an answer
    /// may replace the address).
    pub fn probe_sent(&mut self, now: Instant) -> Option<EthernetAddress> {
        self.arp_sent = now;
        self.probe = false;
        if self.probes >= UNICAST_PROBES {
            self.confirmed = Instant::ZERO;
        }
        let to = self.link_addr.filter(|_| self.confirmed != Instant::ZERO);
        if self.link_addr.is_some() {
            self.probes = self.probes.saturating_add(1);
        }
        to
    }

    /// Stores cutoffs received in a CUTOFFS packet.
    pub fn set_cutoffs(&mut self, cutoffs: [u32; NUM_PRIORITIES], version: u16) {
        self.cutoffs = cutoffs;
        self.cutoffs[0] = i32::MAX as u32;
        self.cutoff_version = version;
    }
}

/// What became of a link address ARP or neighbour discovery named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Claim {
    /// Taken: there was none, or it replaced an unconfirmed one.
    Learned,
    /// The address already known.
    Kept,
    /// Another address than the one the application set or the peer's
    /// packets confirmed: not applied (a confirmed one is probed).
    Refused,
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
    /// that has been idle (referred to by no RPC) longest: the idle list's
    /// front, so no walk.
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
    /// peer joins the back of the eviction order.
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
            .is_some_and(|p| p.probe || !p.resolved())
        {
            self.resolving.push_back(&mut self.peers[..], pi);
            self.timers.set(Timer::Resolve, Instant::ZERO);
        }
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
        let link_addr = peer.link_addr;
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
            .is_some_and(|p| p.link_addr.is_some())
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
