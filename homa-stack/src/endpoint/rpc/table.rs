//! The RPC table: the caller's slots, the lists and index that find RPCs
//! in them, and the one place RPCs are put in, failed and freed.

use crate::storage::{IndexLink, IndexNode, ListLink, ListNode, MeldLink};

use super::super::links::QueueLinks;
use super::super::{RpcError, RpcHandle};
use super::{Rpc, State};

/// One entry of the caller-supplied RPC table: the RPC, and the links that
/// put it in the endpoint's queues and index without a walk over the table
/// (the queues themselves keep only a small header in the endpoint).
#[derive(Debug)]
pub struct RpcSlot {
    pub(crate) rpc: Option<Rpc>,
    /// In the lists, by kind: `TABLE` (the free or the live list),
    /// `READY` (its socket's ready queue), `CTRL` (RPCs with a GRANT,
    /// RESEND or NEED_ACK due), `WAIT` (messages waiting for pool space),
    /// `SHORT` (short messages to send, see `queues`), `BY_PEER` (its
    /// peer's server RPCs, see `share`).
    lists: [ListLink; 6],
    /// In the index of server RPCs by (peer address, id).
    index: IndexLink,
    /// In the sender's and the grant scheduler's heaps.
    pub(in crate::endpoint) queues: QueueLinks,
    /// In its peer's heap of grant candidates (see `queues`).
    pub(in crate::endpoint) by_peer: MeldLink,
}

impl RpcSlot {
    /// An empty slot, for building tables: `[RpcSlot::EMPTY; 64]`.
    pub const EMPTY: RpcSlot = RpcSlot {
        rpc: None,
        lists: [ListLink::EMPTY; 6],
        index: IndexLink::EMPTY,
        queues: QueueLinks::EMPTY,
        by_peer: MeldLink::EMPTY,
    };
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
/// Each peer's server RPCs, oldest first.
pub(crate) const BY_PEER: u8 = 5;
/// Marker of the server-RPC index.
pub(crate) struct ServerTag;

impl ListNode for RpcSlot {
    fn list_link(&self, kind: u8) -> &ListLink {
        &self.lists[usize::from(kind.min(BY_PEER))]
    }
    fn list_link_mut(&mut self, kind: u8) -> &mut ListLink {
        &mut self.lists[usize::from(kind.min(BY_PEER))]
    }
}

impl IndexNode<ServerTag> for RpcSlot {
    fn index_link(&self) -> &IndexLink {
        &self.index
    }
    fn index_link_mut(&mut self) -> &mut IndexLink {
        &mut self.index
    }
}

impl Default for RpcSlot {
    fn default() -> Self {
        Self::EMPTY
    }
}

/// The id of client RPC number `seq` in `slot`: even, unique per endpoint
/// (the sequence never repeats within 2^47 RPCs), and naming its slot so a
/// response finds its RPC without a search.
pub(in crate::endpoint) fn client_id(seq: u64, slot: usize) -> u64 {
    (((seq & 0x7fff_ffff_ffff) << 16) | slot as u64) << 1
}

/// The slot a client id names.
pub(in crate::endpoint) fn client_slot(id: u64) -> usize {
    ((id >> 1) & 0xffff) as usize
}

/// The RPC table: the one place RPCs are put in, failed and freed.
impl<'a> super::super::Endpoint<'a> {
    pub(in crate::endpoint) fn rpc(&self, h: RpcHandle) -> Option<&Rpc> {
        self.rpcs
            .get(usize::from(h.slot))?
            .rpc
            .as_ref()
            // Births are unique for the endpoint's life (a u64 count).
            .filter(|r| r.birth == h.birth)
    }

    /// Takes in the new RPC the caller has just put in free slot `slot`
    /// (built there, as an RPC is a few hundred bytes): its peer counts it
    /// and the slot leaves the free list. A client RPC (`server_hash`
    /// `None`) is brought in step with the queues now. A server RPC goes
    /// into the server index under `server_hash` (its `rpc` hash, from the
    /// lookup that missed) and is not refreshed here: only a DATA packet
    /// makes one, and `process_homa` refreshes the RPC a packet named after
    /// handling it.
    pub(in crate::endpoint) fn insert_rpc(&mut self, slot: usize, server_hash: Option<u64>) {
        let Some(peer) = self.rpc_peer(slot) else {
            return;
        };
        self.peer_taken(peer);
        let i = slot as u16;
        self.free.remove(&mut self.rpcs[..], i);
        self.live.push_back(&mut self.rpcs[..], i);
        if let Some(h) = server_hash {
            self.servers.insert(&mut self.rpcs[..], i, h);
            self.share_taken(slot, peer);
        }
        if server_hash.is_none() {
            // Nothing more to change: the new RPC takes its places.
            self.update_slot(slot, |_| ());
        }
    }

    /// A free RPC slot, if any (the free list's back: no search).
    pub(in crate::endpoint) fn free_slot(&self) -> Option<usize> {
        // The slot freed last: its cache lines are still warm, so a big
        // table costs what a small one does.
        self.free.back().map(usize::from)
    }

    /// The RPC in `slot` has something for the application: queue it on
    /// its socket (once).
    pub(in crate::endpoint) fn mark_ready(&mut self, slot: usize) {
        let Some(r) = self.rpcs.get_mut(slot).and_then(|s| s.rpc.as_mut()) else {
            return;
        };
        r.reported = false;
        let socket = usize::from(r.socket);
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
    pub(in crate::endpoint) fn fail_client_rpc(&mut self, slot: usize, error: RpcError) {
        let unfinished = self
            .rpcs
            .get(slot)
            .and_then(|s| s.rpc.as_ref())
            .is_some_and(|r| r.state.is_client() && r.state != State::ClientDone);
        if !unfinished {
            return;
        }
        // The queues read neither the pool nor the waiters: the pages go
        // back after the RPC has left its queues.
        let Some((out, inp)) = self.update_rpc(slot, |r| {
            r.state = State::ClientDone;
            r.error = Some(error);
            (r.out.take(), r.inp.take())
        }) else {
            return;
        };
        if let Some(out) = out {
            self.pool.free(out.buf);
        }
        if let Some(b) = inp.and_then(|m| m.buf) {
            self.pool.free(b);
        }
        self.waiters.remove(&mut self.rpcs[..], slot as u16);
        self.stats.client_failed += 1;
        self.mark_ready(slot);
    }

    /// Frees an RPC slot and its pool pages.
    pub(in crate::endpoint) fn free_rpc(&mut self, slot: usize) {
        self.unqueue(slot);
        // What freeing needs, read in place: the RPC is not moved out.
        let Some(r) = self.rpcs.get_mut(slot).and_then(|s| s.rpc.as_mut()) else {
            return;
        };
        let (socket, peer, server, pages) = (r.socket, r.peer, !r.state.is_client(), r.pages);
        let out = r.out.take().map(|o| o.buf);
        let inp = r.inp.take().and_then(|m| m.buf);
        self.rpcs[slot].rpc = None;
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
        if let Some(b) = out {
            self.pool.free(b);
        }
        if let Some(b) = inp {
            self.pool.free(b);
        }
    }
}
