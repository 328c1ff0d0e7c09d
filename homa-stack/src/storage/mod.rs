//! Caller-backed storage: the message pool and the loss trackers.
//!
//! - [`pool`]: fixed-size pages carved from one caller buffer; every message
//!   (outgoing until acknowledged, incoming as it arrives) lives in a chain
//!   of them, addressed through a [`MessageBuf`].
//! - [`holes`]: which byte ranges of an incoming message have arrived
//!   (docs/protocol.md 4.3), for any loss pattern, with the descriptors of the
//!   missing ranges kept in the message's own unfilled bytes.
//! - [`resend`]: the sender's packet grid and the exact set of its packets
//!   to retransmit (docs/protocol.md 4.7), a bitmap over packet indices.
//!
//! And four structures over the endpoint's slot tables, so that it finds
//! what it needs without walking a table (docs/architecture.md): each keeps a header of
//! a few integers and per-slot links inside the caller's slots, addressed by
//! `u16` slot indices with [`NONE`] as "no slot".
//! - [`list`]: intrusive doubly linked lists (queues, LRU orders).
//! - [`heap`]: an indexed binary min-heap whose array is spread over the
//!   slots (SRPT order, grant candidates, deadlines).
//! - [`meld`]: leftist heaps whose nodes are the slots, many over one table,
//!   each held by its owner as a root (each peer's grant candidates).
//! - [`index`]: a hash index chained through the slots, with a keyed hash
//!   (RPC by peer and id, socket by port, peer by address).

pub mod heap;
pub mod holes;
pub mod index;
pub mod list;
pub mod meld;
pub mod pool;
pub mod resend;

pub use heap::{Heap, HeapLink, HeapNode, MAX_SMALLEST};
pub use holes::{HoleStore, Holes, PoolStore};
pub use index::{Index, IndexLink, IndexNode, KeyedHash};
pub use list::{List, ListLink, ListNode};
pub use meld::{Meld, MeldLink, MeldNode};
pub use pool::{
    buffer_len_for, pages_for, usable_bytes, Chunks, MessageBuf, MessageRef, MessageWriter, Pool,
    PoolError, MAX_MESSAGE_LEN, MIN_PAGE_SIZE,
};
pub use resend::{PacketGrid, ResendSet};

/// "No slot": the sentinel slot index of [`List`], [`Heap`], [`Meld`] and [`Index`]
/// links. Slot tables used with them hold at most `u16::MAX` entries, so
/// indices run from 0 to `NONE - 1`.
pub const NONE: u16 = u16::MAX;
