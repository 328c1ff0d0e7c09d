//! The RPC table: the caller's slots, the lists and index that find RPCs
//! in them, and the one place RPCs are put in, failed and freed.

use core::ops::Deref;

use crate::storage::{IndexLink, IndexNode, ListLink, ListNode, MeldLink, Pool};

use super::super::links::{Placed, QueueLinks};
use super::super::output::HomaTx;
use super::super::{Endpoint, RpcError, RpcHandle};
use super::{News, Rpc, TickRules, TickVerdict};

/// One entry of the caller-supplied RPC table: the RPC, and the links that
/// put it in the endpoint's queues and index without a walk over the table
/// (the queues themselves keep only a small header in the endpoint).
#[derive(Debug)]
pub struct RpcSlot {
    rpc: Option<Rpc>,
    /// In the lists, by kind: `TABLE` (the free or the live list),
    /// `READY` (its socket's ready queue), `CTRL` (RPCs with a GRANT,
    /// RESEND or NEED_ACK due), `WAIT` (messages waiting for pool space),
    /// `SHORT` (short messages to send, see `queues`), `BY_AGE` (the
    /// server RPCs by age, see `share`).
    lists: [ListLink; 6],
    /// In the index of server RPCs by (peer address, id).
    index: IndexLink,
    /// In the sender's and the grant scheduler's heaps.
    pub(in crate::endpoint) queues: QueueLinks,
    /// In its peer's heap of grant candidates (see `queues`).
    pub(in crate::endpoint) by_peer: MeldLink,
    /// What the queues and the peers' shares last counted for it.
    pub(in crate::endpoint) placed: Placed,
}

impl RpcSlot {
    /// An empty slot, for building tables: `[RpcSlot::EMPTY; 64]`.
    pub const EMPTY: RpcSlot = RpcSlot {
        rpc: None,
        lists: [ListLink::EMPTY; 6],
        index: IndexLink::EMPTY,
        queues: QueueLinks::EMPTY,
        by_peer: MeldLink::EMPTY,
        placed: Placed::EMPTY,
    };

    /// The RPC in this slot.
    #[inline(always)]
    pub(crate) fn rpc(&self) -> Option<&Rpc> {
        self.rpc.as_ref()
    }
}

/// The free and live lists of RPC slots (a kind of list, see
/// `storage::list`).
pub(crate) const TABLE: u8 = 0;
/// The sockets' ready queues.
pub(crate) const READY: u8 = 1;
/// The list of RPCs with control packets due.
pub(crate) const CTRL: u8 = 2;
/// The list of messages waiting for pool space.
pub(crate) const WAIT: u8 = 3;
/// The sender's list of short messages, in the order they became ready.
pub(crate) const SHORT: u8 = 4;
/// The server RPCs, oldest first (see `share`).
pub(crate) const BY_AGE: u8 = 5;
/// Marker of the server-RPC index.
pub(crate) struct ServerTag;

impl ListNode for RpcSlot {
    #[cfg_attr(not(target_os = "none"), inline(always))]
    fn list_link(&self, kind: u8) -> &ListLink {
        &self.lists[usize::from(kind.min(BY_AGE))]
    }
    #[cfg_attr(not(target_os = "none"), inline(always))]
    fn list_link_mut(&mut self, kind: u8) -> &mut ListLink {
        &mut self.lists[usize::from(kind.min(BY_AGE))]
    }
}

impl IndexNode<ServerTag> for RpcSlot {
    #[cfg_attr(not(target_os = "none"), inline(always))]
    fn index_link(&self) -> &IndexLink {
        &self.index
    }
    #[cfg_attr(not(target_os = "none"), inline(always))]
    fn index_link_mut(&mut self) -> &mut IndexLink {
        &mut self.index
    }
}

impl Default for RpcSlot {
    fn default() -> Self {
        Self::EMPTY
    }
}

/// The id of the client RPC in `slot` whose sequence number, as its peer
/// sees it, is `seq`: even, never 0 (an ack of 0 acks nothing: the top
/// bit is set), unique per peer (a peer's sequence never repeats within
/// 2^46 RPCs), and naming its slot in the low 16 bits (above the even
/// bit) so a response finds its RPC without a search. Each peer's
/// sequence starts at a secret point of its own (see
/// `Endpoint::id_offset`): the slot is no secret, but the 46 bits above it
/// tell a peer nothing of the ids another peer sees.
pub(in crate::endpoint) fn client_id(seq: u64, slot: usize) -> u64 {
    1 << 63 | (seq & 0x3fff_ffff_ffff) << 17 | (slot as u64) << 1
}

/// The slot a client id names.
pub(in crate::endpoint) fn client_slot(id: u64) -> usize {
    ((id >> 1) & 0xffff) as usize
}

/// An RPC lent by the table for a change that cannot move it in the
/// scheduling queues or change its pages (silence, timers, control
/// packets due, reporting): only such changes are offered, so none needs
/// the queues brought in step. It reads as the RPC.
pub(in crate::endpoint) struct Steady<'r>(&'r mut Rpc);

impl Deref for Steady<'_> {
    type Target = Rpc;
    fn deref(&self) -> &Rpc {
        self.0
    }
}

impl Steady<'_> {
    /// See [`Rpc::on_busy`].
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub fn on_busy(&mut self) {
        self.0.on_busy()
    }
    /// See [`Rpc::count_tick`].
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub fn count_tick(&mut self, rules: &TickRules, resolved: bool) {
        self.0.count_tick(rules, resolved)
    }
    /// See [`Rpc::on_tick`].
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub fn on_tick(&mut self, rules: &TickRules, resolved: bool) -> TickVerdict {
        self.0.on_tick(rules, resolved)
    }
    /// See [`Rpc::note_unreachable`].
    pub fn note_unreachable(&mut self) {
        self.0.note_unreachable()
    }
    /// See [`Rpc::take_event`].
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub fn take_event(&mut self) -> Option<News> {
        self.0.take_event()
    }
    /// See [`Rpc::take_grant`].
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub fn take_grant(&mut self) -> Option<crate::wire::homa::Repr<'static>> {
        self.0.take_grant()
    }
    /// See [`Rpc::take_need_ack`].
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub fn take_need_ack(&mut self) -> Option<crate::wire::homa::Repr<'static>> {
        self.0.take_need_ack()
    }
    /// See [`Rpc::ask_resend`].
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub fn ask_resend(&mut self) {
        self.0.ask_resend()
    }
    /// See [`Rpc::resend_ranges`].
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub fn resend_ranges<const N: usize>(
        &mut self,
        pool: &mut Pool<'_>,
        ranges: &mut heapless::Vec<(u32, u32), N>,
    ) -> bool {
        self.0.resend_ranges(pool, ranges)
    }
    /// See [`Rpc::resend_sent`].
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub fn resend_sent(&mut self, more: bool, until: u32) {
        self.0.resend_sent(more, until)
    }
    /// See [`Rpc::resend_resume`].
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub fn resend_resume(&mut self, offset: u32) {
        self.0.resend_resume(offset)
    }
    /// See [`Rpc::saturate_ticks`].
    #[cfg(test)]
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub fn saturate_ticks(&mut self) {
        self.0.saturate_ticks()
    }
}

/// The RPC table: the one place RPCs are put in, changed, failed and
/// freed. It alone hands out `&mut Rpc`, and brings the scheduling queues
/// in step with the RPC after each change ([`Endpoint::with_rpc`]).
impl<'a> Endpoint<'a> {
    /// The RPC in `slot`.
    #[inline(always)]
    pub(in crate::endpoint) fn rpc_at(&self, slot: usize) -> Option<&Rpc> {
        self.rpcs.get(slot)?.rpc.as_ref()
    }

    /// The RPC `h` names, if it is still there.
    pub(in crate::endpoint) fn rpc(&self, h: RpcHandle) -> Option<&Rpc> {
        self.rpc_at(usize::from(h.slot))
            // Births are unique for the endpoint's life (a u64 count).
            .filter(|r| r.birth() == h.birth)
    }

    /// Runs `f` on the RPC in `slot` (`None` when the slot is empty), with
    /// the message pool, then brings the queues and its peer's share in
    /// step with it.
    #[inline]
    pub(in crate::endpoint) fn with_rpc<R>(
        &mut self,
        slot: usize,
        f: impl FnOnce(&mut Rpc, &mut Pool<'a>) -> R,
    ) -> Option<R> {
        let r = self.rpcs.get_mut(slot)?.rpc.as_mut()?;
        let out = f(r, &mut self.pool);
        self.refresh(slot);
        Some(out)
    }

    /// Runs `f`, which sends DATA of the RPC in `slot` and changes nothing
    /// else of it, with the pool and the one path Homa frames take; then
    /// moves the RPC in the send queues alone (see `refresh_sent`).
    #[inline]
    pub(in crate::endpoint) fn with_sent<R>(
        &mut self,
        slot: usize,
        f: impl FnOnce(&mut Rpc, &Pool<'a>, &mut HomaTx<'_>) -> R,
    ) -> Option<R> {
        let Endpoint {
            rpcs,
            pool,
            config,
            caps,
            pacer,
            stats,
            ..
        } = self;
        let r = rpcs.get_mut(slot)?.rpc.as_mut()?;
        let out = f(r, pool, &mut HomaTx::new(config, caps, pacer, stats));
        self.refresh_sent(slot);
        Some(out)
    }

    /// The RPC in `slot`, lent for a change that leaves its place in the
    /// queues as it is (see [`Steady`]).
    #[inline(always)]
    pub(in crate::endpoint) fn steady(&mut self, slot: usize) -> Option<Steady<'_>> {
        self.rpcs.get_mut(slot)?.rpc.as_mut().map(Steady)
    }

    /// [`Endpoint::steady`] with the message pool.
    #[inline(always)]
    pub(in crate::endpoint) fn steady_pool(
        &mut self,
        slot: usize,
    ) -> Option<(Steady<'_>, &mut Pool<'a>)> {
        let r = self.rpcs.get_mut(slot)?.rpc.as_mut()?;
        Some((Steady(r), &mut self.pool))
    }

    /// Puts the new RPC `rpc` in free slot `slot`: its peer counts it and
    /// the slot leaves the free list. A client RPC (`server_hash` `None`)
    /// takes its places in the queues now. A server RPC goes into the
    /// server index under `server_hash` (its `rpc` hash, from the lookup
    /// that missed) and its peer's share; it has no pool pages yet, so it
    /// belongs in no queue, where an empty slot already is (the DATA that
    /// made it is stored next, through `with_rpc`).
    // Inlined on hosts, where the RPC is then built in its slot.
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub(in crate::endpoint) fn insert_rpc(
        &mut self,
        slot: usize,
        rpc: Rpc,
        server_hash: Option<u64>,
    ) {
        let Some(s) = self.rpcs.get_mut(slot) else {
            return;
        };
        // Its `placed` is empty: slots start so, and `free_rpc` leaves them so.
        let peer = s.rpc.insert(rpc).peer();
        self.peer_taken(peer);
        let i = slot as u16;
        self.free.remove(&mut self.rpcs[..], i);
        self.live.push_back(&mut self.rpcs[..], i);
        match server_hash {
            Some(h) => {
                self.servers.insert(&mut self.rpcs[..], i, h);
                self.share_taken(slot, peer);
            }
            None => self.refresh(slot),
        }
    }

    /// A free RPC slot, if any (the free list's back: no search).
    pub(in crate::endpoint) fn free_slot(&self) -> Option<usize> {
        // The slot freed last: its cache lines are still warm, so a big
        // table costs what a small one does.
        self.free.back().map(usize::from)
    }

    /// The RPC in `slot` has news for the application: queue it on its
    /// socket (once).
    pub(in crate::endpoint) fn mark_ready(&mut self, slot: usize) {
        let Some(r) = self.rpc_at(slot) else {
            return;
        };
        let socket = usize::from(r.socket());
        if let Some(s) = self.sockets.get_mut(socket).and_then(|s| s.sock.as_mut()) {
            s.ready.push_back(&mut self.rpcs[..], slot as u16);
        }
    }

    /// The RPC in `slot` has a GRANT, RESEND or NEED_ACK due.
    pub(in crate::endpoint) fn control_due(&mut self, slot: usize) {
        self.ctrl_due.push_back(&mut self.rpcs[..], slot as u16);
    }

    /// Ends an unfinished client RPC with `error`: its pages go back to the
    /// pool at once and the application is told through [`Event::Failed`].
    ///
    /// [`Event::Failed`]: super::super::Event::Failed
    pub(in crate::endpoint) fn fail_client_rpc(&mut self, slot: usize, error: RpcError) {
        // The queues read neither the pool nor the waiters: the pages go
        // back in the change, before the queues are brought in step.
        if self.with_rpc(slot, |r, pool| r.fail(error, pool)) != Some(true) {
            return;
        }
        self.waiters.remove(&mut self.rpcs[..], slot as u16);
        self.stats.client_failed += 1;
        self.mark_ready(slot);
    }

    /// Frees an RPC slot and its pool pages.
    pub(in crate::endpoint) fn free_rpc(&mut self, slot: usize) {
        self.unqueue(slot);
        // What freeing needs, read in place: the RPC is not moved out.
        let Some(s) = self.rpcs.get_mut(slot) else {
            return;
        };
        let Some(r) = s.rpc.as_mut() else {
            return;
        };
        let (socket, peer, server, pages) =
            (r.socket(), r.peer(), !r.state().is_client(), s.placed.pages);
        r.free_pages(&mut self.pool);
        s.rpc = None;
        s.placed = Placed::EMPTY;
        let i = slot as u16;
        self.live.remove(&mut self.rpcs[..], i);
        self.free.push_back(&mut self.rpcs[..], i);
        self.ctrl_due.remove(&mut self.rpcs[..], i);
        self.waiters.remove(&mut self.rpcs[..], i);
        if let Some(s) = self
            .sockets
            .get_mut(usize::from(socket))
            .and_then(|s| s.sock.as_mut())
        {
            s.ready.remove(&mut self.rpcs[..], i);
        }
        self.servers.remove(&mut self.rpcs[..], i);
        if server {
            self.share_released(slot, peer, pages);
        }
        self.peer_released(peer);
    }
}
