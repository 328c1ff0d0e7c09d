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

/// What the queues and the peers' shares last counted for the RPC in a
/// slot, kept beside its links (written by `queues` and `share` alone):
/// the heaps order by its keys, and freeing it takes back its counts. The
/// keys are stored flat (not as a `HeapKeys`), which keeps the slot small.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Placed {
    /// Its send key at the last refresh: no retransmission pending, and
    /// bytes left to send once.
    no_resend: bool,
    left: u32,
    /// Its grant key at the last refresh: bytes still to receive.
    grant: u32,
    /// Its share of the endpoint's incoming total.
    pub(crate) counted: u32,
    /// Has DATA to send but its peer is unresolved.
    pub(crate) parked: bool,
    /// Server: the pool pages its messages hold, as its group's share last
    /// counted them (see `share`; 16 bits keep the slot small).
    pub(crate) pages: u16,
}

impl Placed {
    /// Nothing counted: a new or empty slot.
    pub(crate) const EMPTY: Placed = Placed {
        no_resend: false,
        left: 0,
        grant: 0,
        counted: 0,
        parked: false,
        pages: 0,
    };

    /// Its heap keys at the last refresh.
    #[inline(always)]
    pub(crate) fn keys(&self) -> HeapKeys {
        HeapKeys {
            send: (self.no_resend, self.left),
            grant: self.grant,
        }
    }

    /// Stores the heap keys a refresh computed.
    #[inline(always)]
    pub(crate) fn set_keys(&mut self, keys: HeapKeys) {
        (self.no_resend, self.left) = keys.send;
        self.grant = keys.grant;
    }

    /// Stores a new send key, and returns the one it replaces.
    #[inline(always)]
    pub(crate) fn replace_send(&mut self, send: (bool, u32)) -> (bool, u32) {
        let old = (self.no_resend, self.left);
        (self.no_resend, self.left) = send;
        old
    }
}
