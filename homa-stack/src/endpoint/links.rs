//! What each RPC slot carries for the scheduling queues (`queues`): its
//! links in the five heaps, the heap numbers, and the keys its last
//! `refresh` computed. A leaf, so that the RPC table (`rpc`) can hold them
//! while `queues`, which orders the RPCs, sits above it.

use crate::storage::HeapLink;

/// The sender's SRPT heap (see `queues` for the five).
pub(crate) const SEND: u8 = 0;
/// The sender's by-age heap.
pub(crate) const SEND_FIFO: u8 = 1;
/// The receiver's grant-candidate heap.
pub(crate) const GRANT: u8 = 2;
/// The receiver's by-age candidate heap.
pub(crate) const GRANT_FIFO: u8 = 3;
/// Each peer's best grant candidate (the root of its `grants`), by the
/// `GRANT` key.
pub(crate) const GRANT_BEST: u8 = 4;

/// The per-slot links of the five heaps, by heap number.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct QueueLinks([HeapLink; 5]);

impl QueueLinks {
    pub(crate) const EMPTY: QueueLinks = QueueLinks([HeapLink::EMPTY; 5]);

    /// The links of heap `heap`.
    #[inline(always)]
    pub(crate) fn link(&self, heap: u8) -> &HeapLink {
        &self.0[link_index(heap)]
    }

    /// The links of heap `heap`, to change.
    #[inline(always)]
    pub(crate) fn link_mut(&mut self, heap: u8) -> &mut HeapLink {
        &mut self.0[link_index(heap)]
    }
}

/// The links of heap `heap` (a heap number above is taken as the last).
fn link_index(heap: u8) -> usize {
    usize::from(heap).min(usize::from(GRANT_BEST))
}

/// The changing parts of an RPC's keys in the send and grant heaps, as its
/// last `refresh` computed them: the heaps read them from here, and an
/// unchanged key needs no sift.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct HeapKeys {
    /// (no retransmission pending, bytes left to send once).
    pub(crate) send: (bool, u32),
    /// Bytes still to receive.
    pub(crate) grant: u32,
}
