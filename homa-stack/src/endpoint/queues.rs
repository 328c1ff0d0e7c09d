//! The ordered queues an RPC sits in because of its state, kept in step with
//! it in one place (`refresh`, which the RPC table runs after every change
//! it lends an RPC for), so the pacer and the grant
//! scheduler read their next choice off the top of a heap instead of
//! walking the RPCs (docs/architecture.md, "Memory and bounds").
//!
//! - `send`: RPCs with DATA to send, retransmissions first, then fewest
//!   bytes left (SRPT), then oldest; `send_fifo` holds the same RPCs by age
//!   for the pacer's FIFO share. An RPC with no retransmission pending and
//!   at most `defer_min_bytes` left to send is in neither but in the list
//!   `send_short`, in the order it got there: such a message is never held
//!   back by the NIC-queue estimate, and Linux sends it when it is ready
//!   (docs/protocol.md 4.6), so a list does what a heap did, without the
//!   sifts that at 1,024 in flight were a fifth of an RPC's cost.
//! - `grant`: incoming messages that have pool space and are not fully
//!   granted, fewest bytes still to receive first, then oldest;
//!   `grant_fifo` the same by age for FIFO grants. The same candidates by
//!   peer: each peer slot holds a leftist heap of its own (`grants`, its
//!   best candidate at the root, same key), and `grant_best` holds the
//!   roots alone (one per peer with candidates, same key), so the scheduler
//!   finds every peer's best without a walk (docs/protocol.md 4.4: the
//!   active set is spread across peers). It is a heap of RPC slots like
//!   the others, so one copy of the heap code serves all five.
//! - `incoming`: the sum over scheduled messages with pool space of their
//!   granted-but-missing bytes, which grants may not push past
//!   `max_incoming`; each RPC's slot remembers its share (`Placed::counted`).
//! - parking: an RPC with DATA to send to a peer whose link address is not
//!   known yet is in neither send heap, and its peer counts it; when the
//!   peer resolves, its parked RPCs are put back (one pass over the live
//!   RPCs, once per peer resolution and only when some are parked).
//!
//! Every change of what decides these (an RPC's state, its messages'
//! offsets, its resend set, its pool space) goes through the RPC table
//! (`rpc::table`), the one place that lends an RPC for a change: it runs
//! the change and then `refresh` (or `refresh_sent` after DATA went out),
//! so no caller can forget it; the tests check after every poll that the
//! queues match a recomputation from the RPCs ([`Endpoint::check_queues`]).

use super::links::{HeapKeys, GRANT, GRANT_BEST, SEND};
use super::rpc::RpcSlot;
use super::Endpoint;
use crate::storage::{HeapLink, HeapNode, MeldLink, MeldNode, NONE};

/// One key type for the five heaps, so one copy of the heap code serves
/// them: a `u128` whose order is the tuple's.
///
/// - `SEND`: (no retransmission pending, bytes left to send once, birth);
/// - `GRANT` and `GRANT_BEST`: (bytes still to receive, birth);
/// - the by-age heaps: birth.
impl HeapNode for RpcSlot {
    type Key = u128;
    #[inline(always)]
    fn heap_link(&self, heap: u8) -> &HeapLink {
        self.queues.link(heap)
    }
    #[inline(always)]
    fn heap_link_mut(&mut self, heap: u8) -> &mut HeapLink {
        self.queues.link_mut(heap)
    }
    #[inline(always)]
    fn heap_key(&self, heap: u8) -> u128 {
        let Some(r) = self.rpc() else {
            return u128::MAX;
        };
        let keys = self.placed.keys();
        // The keys as the RPC's last refresh computed them (`Placed::keys`):
        // what the heaps are ordered by, read without walking its messages.
        // The high half is what the heap orders by first (none for the
        // by-age heaps), the birth breaks ties: one shift and one or
        // whichever the heap, as this runs twice per level of every sift.
        let (no_resend, left) = keys.send;
        let high = match heap {
            SEND => u64::from(no_resend) << 32 | u64::from(left),
            GRANT | GRANT_BEST => u64::from(keys.grant),
            _ => 0,
        };
        u128::from(high) << 64 | u128::from(r.birth())
    }
}

/// A peer's grant candidates are ordered by the `GRANT` key.
impl MeldNode for RpcSlot {
    type Key = u128;
    #[inline(always)]
    fn meld_link(&self) -> &MeldLink {
        &self.by_peer
    }
    #[inline(always)]
    fn meld_link_mut(&mut self) -> &mut MeldLink {
        &mut self.by_peer
    }
    #[inline(always)]
    fn meld_key(&self) -> u128 {
        self.heap_key(GRANT)
    }
}

/// What happened to a grant candidate, for its peer's heaps.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Change {
    Insert,
    Update,
    Remove,
}

/// Where an RPC belongs, computed from its state alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Placement {
    /// Has DATA to send (retransmissions, or new bytes it may send).
    wants_send: bool,
    /// Of those, has no retransmission pending and a short message left:
    /// belongs in `send_short`, not the send heaps.
    short: bool,
    /// Its peer's link address is known.
    resolved: bool,
    /// A grant candidate.
    grant: bool,
    /// Its share of the incoming total.
    counted: u32,
    /// Its keys in the SRPT heaps (see the `HeapNode` impl).
    keys: HeapKeys,
}

impl<'a> Endpoint<'a> {
    fn placement(&self, slot: usize) -> Option<Placement> {
        let r = self.rpc_at(slot)?;
        let wants_send = r.wants_send();
        let keys = r.keys();
        Some(Placement {
            wants_send,
            short: wants_send && self.short(keys.send),
            resolved: self.peer_resolved(r.peer()),
            grant: r.grant_candidate(),
            counted: r.counted(),
            keys,
        })
    }

    /// Brings the queues in step with the RPC in `slot` after a change to
    /// it (a slot with no RPC leaves them all). O(log n). For the RPC
    /// table alone, after the changes it lends the RPC for.
    pub(super) fn refresh(&mut self, slot: usize) {
        self.share_pages(slot);
        let i = slot as u16;
        let p = self.placement(slot).unwrap_or(Placement {
            wants_send: false,
            short: false,
            resolved: true,
            grant: false,
            counted: 0,
            keys: HeapKeys::default(),
        });
        let Some(s) = self.rpcs.get_mut(slot) else {
            return;
        };
        let (old_keys, peer) = s
            .rpc()
            .map_or((None, NONE), |r| (Some(s.placed.keys()), r.peer()));
        // The heaps read the keys stored in the slot: store the new ones
        // before any insert or sift.
        if old_keys.is_some() {
            s.placed.set_keys(p.keys);
        }
        self.queue_send(
            i,
            p.wants_send && p.resolved,
            p.short,
            old_keys.is_none_or(|k| k.send != p.keys.send),
        );
        let rpcs = &mut self.rpcs[..];
        let was_candidate = self.grant.contains(rpcs, i);
        if p.grant {
            if !was_candidate {
                self.grant.insert(rpcs, i);
                self.grant_fifo.insert(rpcs, i);
                self.peer_candidate(peer, i, Change::Insert);
            } else if old_keys.is_none_or(|k| k.grant != p.keys.grant)
                // The top whose key went down (DATA of a long message came)
                // stays on top of its peer's heap and of the heap of the
                // best too (one key orders all three): no sift.
                && !(old_keys.is_some_and(|k| p.keys.grant < k.grant)
                    && self.grant.peek(rpcs) == Some(i))
            {
                self.grant.update(rpcs, i);
                self.peer_candidate(peer, i, Change::Update);
            }
        } else if was_candidate {
            self.grant.remove(rpcs, i);
            self.grant_fifo.remove(rpcs, i);
            self.peer_candidate(peer, i, Change::Remove);
        }
        let rpcs = &mut self.rpcs[..];
        let park = p.wants_send && !p.resolved;
        let Some(s) = rpcs.get_mut(slot).filter(|s| s.rpc().is_some()) else {
            return;
        };
        let r = &mut s.placed;
        let old = core::mem::replace(&mut r.counted, p.counted);
        self.incoming = self.incoming - u64::from(old) + u64::from(p.counted);
        // Any change to a candidate, or to the headroom, may change grants.
        if was_candidate || p.grant || old != p.counted {
            self.grants_dirty = true;
        }
        if park != r.parked {
            r.parked = park;
            if let Some(peer) = self
                .peers
                .get_mut(usize::from(peer))
                .and_then(|s| s.peer.as_mut())
            {
                peer.parked = if park {
                    peer.parked.saturating_add(1)
                } else {
                    peer.parked.saturating_sub(1)
                };
            }
        }
    }

    /// [`refresh`](Endpoint::refresh) after DATA of the RPC in `slot` went
    /// out (the pacer's path, once per DATA packet): sending changes only
    /// the outgoing message's offsets and resend set, so only its place in
    /// the send heaps can change; its grant candidacy, its incoming share
    /// stay as they were, and so does its peer's resolution unless the
    /// send did not happen for want of a link address (then the full
    /// `refresh` parks it). The tests' queue check after every poll covers
    /// this shortcut as it does `refresh`.
    pub(super) fn refresh_sent(&mut self, slot: usize) {
        let i = slot as u16;
        let Some(r) = self.rpc_at(slot) else {
            return;
        };
        let (wants_send, key, peer) = (r.wants_send(), r.send_key(), r.peer());
        // A message sent whole (a short one, in its one packet) leaves the
        // send queues whatever its peer: one that sent was not parked.
        if wants_send && !self.peer_resolved(peer) {
            return self.refresh(slot);
        }
        let old = self.rpcs[slot].placed.replace_send(key);
        let short = wants_send && self.short(key);
        // The common case of a long message: the heap's top sent new bytes
        // and still has more than a short message left. Its key only went
        // down, so it stays on top and the heap needs no sift.
        if wants_send && !short && key <= old && self.send.peek(&self.rpcs[..]) == Some(i) {
            return;
        }
        self.queue_send(i, wants_send, short, old != key);
    }

    /// Whether a message with this send key (no retransmission pending,
    /// bytes left to send) waits in `send_short`.
    fn short(&self, (no_resend, left): (bool, u32)) -> bool {
        no_resend && left <= self.config.defer_min_bytes
    }

    /// Puts RPC `i` where its DATA waits: in `send_short` (`sends` and
    /// `short`), in both send heaps (`sends` alone; sifted when
    /// `key_changed`), or nowhere.
    // Inlined on hosts: its three callers pass constants that fold most of it away.
    #[cfg_attr(not(target_os = "none"), inline(always))]
    fn queue_send(&mut self, i: u16, sends: bool, short: bool, key_changed: bool) {
        let rpcs = &mut self.rpcs[..];
        if sends && short {
            if self.send.remove(rpcs, i) {
                self.send_fifo.remove(rpcs, i);
            }
            // Already in the list: it keeps its place.
            self.send_short.push_back(rpcs, i);
            return;
        }
        // Mostly empty: the header says so without reading the slot.
        if !self.send_short.is_empty() {
            self.send_short.remove(rpcs, i);
        }
        // The by-age heap's keys (births) never change: insert or remove only.
        if sends {
            if self.send.insert(rpcs, i) {
                self.send_fifo.insert(rpcs, i);
            } else if key_changed {
                self.send.update(rpcs, i);
            }
        } else if self.send.remove(rpcs, i) {
            self.send_fifo.remove(rpcs, i);
        }
    }

    /// Takes the RPC in `slot` out of every queue, before it is freed.
    pub(super) fn unqueue(&mut self, slot: usize) {
        let i = slot as u16;
        self.queue_send(i, false, false, false);
        let rpcs = &mut self.rpcs[..];
        if self.grant.remove(rpcs, i) {
            self.grant_fifo.remove(rpcs, i);
            self.grants_dirty = true;
            let peer = self.rpc_peer(slot).unwrap_or(NONE);
            self.peer_candidate(peer, i, Change::Remove);
        }
        let Some(peer) = self.rpc_peer(slot) else {
            return;
        };
        let r = &mut self.rpcs[slot].placed;
        let counted = core::mem::take(&mut r.counted);
        if counted != 0 {
            self.incoming -= u64::from(counted);
            self.grants_dirty = true;
        }
        if core::mem::take(&mut r.parked) {
            if let Some(p) = self
                .peers
                .get_mut(usize::from(peer))
                .and_then(|s| s.peer.as_mut())
            {
                p.parked = p.parked.saturating_sub(1);
            }
        }
    }

    /// Keeps peer `pi`'s candidate heap, and `grant_best`, in step with the
    /// `grant` heap's `change` of candidate `i` (its key already stored).
    /// O(log n): when the peer's best candidate changes, the old one leaves
    /// `grant_best` and the new one enters; when the best stays best with
    /// a new key, it is sifted, only if other peers have candidates too (a
    /// heap of one has no order to restore).
    #[inline]
    fn peer_candidate(&mut self, pi: u16, i: u16, change: Change) {
        let rpcs = &mut self.rpcs[..];
        let Some(ps) = self.peers.get_mut(usize::from(pi)) else {
            return;
        };
        let old = ps.grants.peek();
        match change {
            Change::Insert => ps.grants.insert(rpcs, i),
            Change::Update => ps.grants.update(rpcs, i),
            Change::Remove => ps.grants.remove(rpcs, i),
        };
        let best = ps.grants.peek();
        if best != old {
            if let Some(o) = old {
                self.grant_best.remove(rpcs, o);
            }
            if let Some(b) = best {
                self.grant_best.insert(rpcs, b);
            }
        } else if best == Some(i) && self.grant_best.len() > 1 {
            self.grant_best.update(rpcs, i);
        }
    }

    /// The peer `pi` got its link address: its parked RPCs may send. Or
    /// it lost it (see `neighbour`): those that wait to send park.
    pub(super) fn peer_resolved_now(&mut self, pi: u16) {
        let Some(p) = self
            .peers
            .get(usize::from(pi))
            .and_then(|s| s.peer.as_ref())
        else {
            return;
        };
        let lost = !p.resolved();
        if p.parked == 0 && !lost {
            return;
        }
        let mut cursor = self.live.front();
        while let Some(i) = cursor {
            cursor = self.live.next_of(&self.rpcs[..], i);
            let slot = usize::from(i);
            let s = &self.rpcs[slot];
            if (s.placed.parked || lost) && s.rpc().is_some_and(|r| r.peer() == pi) {
                // Nothing to change but its place.
                self.with_rpc(slot, |_, _| ());
            }
        }
    }

    /// Checks every queue against a recomputation from the RPCs: that each
    /// RPC is in the heaps its state asks for and no other, that the
    /// incoming total and the parked counts add up, and that the heaps give
    /// the minimum a scan finds. For tests and fuzzing, after a poll.
    #[cfg(any(test, fuzzing))]
    pub fn check_queues(&self) -> Result<(), &'static str> {
        let rpcs = &self.rpcs[..];
        let mut incoming = 0u64;
        let (mut senders, mut candidates, mut shorts) = (0usize, 0usize, 0usize);
        let mut parked = [0u16; 4096];
        let (mut best_send, mut best_grant) = (None, None);
        for slot in 0..rpcs.len() {
            let i = slot as u16;
            let Some(p) = self.placement(slot) else {
                if self.send.contains(rpcs, i)
                    || self.send_short.contains(rpcs, i)
                    || self.grant.contains(rpcs, i)
                {
                    return Err("an empty slot is queued");
                }
                continue;
            };
            let Some(r) = rpcs[slot].rpc() else {
                continue;
            };
            let placed = &rpcs[slot].placed;
            let short = p.wants_send && p.resolved && p.short;
            let sends = p.wants_send && p.resolved && !p.short;
            if self.send.contains(rpcs, i) != sends || self.send_fifo.contains(rpcs, i) != sends {
                return Err("send heaps disagree with an RPC's state");
            }
            if self.send_short.contains(rpcs, i) != short {
                return Err("the short-message list disagrees with an RPC's state");
            }
            shorts += usize::from(short);
            if self.grant.contains(rpcs, i) != p.grant
                || self.grant_fifo.contains(rpcs, i) != p.grant
            {
                return Err("grant heaps disagree with an RPC's state");
            }
            if (sends || short || p.grant) && placed.keys() != p.keys {
                return Err("an RPC's heap keys changed without a refresh");
            }
            if placed.counted != p.counted {
                return Err("an RPC's incoming share is stale");
            }
            if placed.parked != (p.wants_send && !p.resolved) {
                return Err("an RPC's parking is stale");
            }
            if placed.parked {
                if let Some(c) = parked.get_mut(usize::from(r.peer())) {
                    *c += 1;
                }
            }
            incoming += u64::from(p.counted);
            senders += usize::from(sends);
            candidates += usize::from(p.grant);
            if sends {
                let k = rpcs[slot].heap_key(SEND);
                if best_send.is_none_or(|b| k < b) {
                    best_send = Some(k);
                }
            }
            if p.grant {
                let k = rpcs[slot].heap_key(GRANT);
                if best_grant.is_none_or(|b| k < b) {
                    best_grant = Some(k);
                }
                // Up the parent links to a root: its own peer's.
                let mut n = i;
                for _ in 0..rpcs.len() {
                    match rpcs[usize::from(n)].by_peer.parent() {
                        NONE => break,
                        up => n = up,
                    }
                }
                let own = self.peers.get(usize::from(r.peer())).map(|s| s.grants);
                if own.and_then(|h| h.peek()) != Some(n) {
                    return Err("a candidate is not in its peer's heap");
                }
            } else if rpcs[slot].by_peer != MeldLink::EMPTY {
                return Err("an RPC that is no candidate is in a peer's heap");
            }
        }
        if incoming != self.incoming {
            return Err("the incoming total is stale");
        }
        if senders != self.send.len()
            || candidates != self.grant.len()
            || shorts != self.send_short.len()
        {
            return Err("a heap holds an RPC it should not");
        }
        let top_send = self
            .send
            .peek(rpcs)
            .map(|i| rpcs[usize::from(i)].heap_key(SEND));
        let top_grant = self
            .grant
            .peek(rpcs)
            .map(|i| rpcs[usize::from(i)].heap_key(GRANT));
        if top_send != best_send || top_grant != best_grant {
            return Err("a heap's top is not the minimum");
        }
        let sockets = &self.sockets[..];
        for (si, s) in sockets.iter().enumerate() {
            let i = si as u16;
            if self.socket_free.contains(sockets, i) != s.sock.is_none() {
                return Err("the socket free list disagrees with the table");
            }
            let Some(k) = s.sock else { continue };
            if self.client_socket(k.client_port) != Some(i)
                || k.server_port
                    .is_some_and(|p| self.server_socket(p) != Some(i))
            {
                return Err("a socket is not found by its port");
            }
        }
        let peers = &self.peers[..];
        let (mut in_peer_heaps, mut with_candidates) = (0usize, 0usize);
        for (pi, s) in peers.iter().enumerate() {
            let i = pi as u16;
            in_peer_heaps += s.grants.check(rpcs)?;
            let root = s.grants.peek();
            if root.is_some_and(|r| !self.grant_best.contains(rpcs, r)) {
                return Err("a peer's best candidate is not in the heap of the best");
            }
            with_candidates += usize::from(root.is_some());
            if self.peer_free.contains(peers, i) != s.peer.is_none() {
                return Err("the peer free list disagrees with the table");
            }
            let Some(p) = s.peer.as_ref() else { continue };
            if parked.get(pi).is_some_and(|&n| p.parked != n) {
                return Err("a peer's parked count is stale");
            }
            if self.peer_idle.contains(peers, i) != p.idle() {
                return Err("the idle-peer list disagrees with the RPC and member counts and pins");
            }
            if self.find_peer(p.addr) != Some(i) {
                return Err("a peer is not found by its address");
            }
            if p.nbr.to_ask() && !self.resolving.contains(peers, i) {
                return Err("a peer to resolve is not in the resolve list");
            }
        }
        // Every peer's best is in `grant_best` and it holds as many: no other.
        if in_peer_heaps != candidates || with_candidates != self.grant_best.len() {
            return Err("the peers' heaps or the heap of the best hold RPCs they should not");
        }
        let top_best = self
            .grant_best
            .peek(rpcs)
            .map(|r| rpcs[usize::from(r)].heap_key(GRANT_BEST));
        if top_best != best_grant {
            return Err("the top of the heap of the best is not the best candidate");
        }
        self.check_shares()
    }
}
