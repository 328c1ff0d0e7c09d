//! The test kit: the pieces every test, fuzz target and tool of the
//! workspace shares, kept here once.
//!
//! | | needs |
//! |---|---|
//! | [`SplitMix64`]: the seeded generator (also behind the fault injector and the fabric) | |
//! | [`pattern_byte`], [`fill_pattern`], [`pattern_word`]: deterministic message payloads | |
//! | [`perf`]: homa-perf's message format (header and pattern), built and checked in pieces | |
//! | [`Host`]: what a [`Pair`] drives (homa-stack's `Endpoint` implements it) | |
//! | [`pattern`], [`pattern_matches`]: the same as a `Vec`, and its check | `std` |
//! | [`TestDevice`]: frames in queues, as a test inspects and injects them | `std` |
//! | [`frames`]: Ethernet, IPv4, IPv6 and ARP frames built from raw fields | `std` |
//! | [`Pair`]: two hosts on a wire with a delay, on a virtual clock | `std` |
//!
//! The frame builders write the headers byte by byte, independently of
//! homa-stack's wire module, so a frame a test crafts does not depend on
//! the code it tests.

mod pattern;
pub mod perf;

pub use crate::rng::SplitMix64;
pub use pattern::{fill_pattern, fill_pattern_at, pattern_byte, pattern_word};

#[cfg(feature = "std")]
mod device;
#[cfg(feature = "std")]
pub mod frames;
#[cfg(feature = "std")]
mod pair;

#[cfg(feature = "std")]
pub use device::{FramePool, TestDevice, TestRx, TestTx};
#[cfg(feature = "std")]
pub use pair::{Filter, Pair, Rewrite, Wired};
#[cfg(feature = "std")]
pub use pattern::{pattern, pattern_matches};

use crate::{Device, Instant};

/// A network host a [`Pair`] polls: homa-stack's `Endpoint`, or anything
/// with the same poll loop.
pub trait Host {
    /// Lets the host receive and send through `device` at `now`.
    fn poll<D: Device + ?Sized>(&mut self, now: Instant, device: &mut D);
    /// When the host next wants to be polled, if it waits for anything.
    fn poll_at(&self) -> Option<Instant>;
}
