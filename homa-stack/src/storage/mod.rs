//! Caller-backed storage: the message pool and the reassembly tracker.
//!
//! - [`pool`]: fixed-size pages carved from one caller buffer; every message
//!   (outgoing until acknowledged, incoming as it arrives) lives in a chain
//!   of them, addressed through a [`MessageBuf`].
//! - [`reassembly`]: which byte ranges of an incoming message have arrived
//!   (docs/protocol.md 4.3): `recv_end`, the gaps below it, and the ranges to ask
//!   for in RESEND.

pub mod pool;
pub mod reassembly;

pub use pool::{
    buffer_len_for, pages_for, usable_bytes, Chunks, MessageBuf, MessageRef, Pool, PoolError,
    MAX_MESSAGE_LEN, MIN_PAGE_SIZE,
};
pub use reassembly::{AddOutcome, Gap, Reassembly, DEFAULT_GAPS};
