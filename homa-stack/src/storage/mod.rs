//! Caller-backed storage: the message pool and the reassembly trackers.
//!
//! - [`pool`]: fixed-size pages carved from one caller buffer; every message
//!   (outgoing until acknowledged, incoming as it arrives) lives in a chain
//!   of them, addressed through a [`MessageBuf`].
//! - [`holes`]: which byte ranges of an incoming message have arrived
//!   (docs/protocol.md 4.3), for any loss pattern, with the descriptors of the
//!   missing ranges kept in the message's own unfilled bytes.
//! - [`resend`]: the sender's packet grid and the exact set of its packets
//!   to retransmit (docs/protocol.md 4.7), a bitmap over packet indices.
//! - [`reassembly`]: the same with a fixed list of gaps beside the message
//!   (the endpoint's tracker until it moves to [`holes`]).

pub mod holes;
pub mod pool;
pub mod reassembly;
pub mod resend;

pub use holes::{HoleStore, Holes, PoolStore};
pub use pool::{
    buffer_len_for, pages_for, usable_bytes, Chunks, MessageBuf, MessageRef, MessageWriter, Pool,
    PoolError, MAX_MESSAGE_LEN, MIN_PAGE_SIZE,
};
pub use reassembly::{AddOutcome, Gap, Reassembly, DEFAULT_GAPS};
pub use resend::{PacketGrid, ResendSet};
