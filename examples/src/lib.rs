//! Shared pieces of the example programs: command-line value checks and
//! homa-dump's implementation ([`dump`]). The payload patterns, the
//! generator and the soak run come from the test kit (`homa_phy::testing`,
//! `homa_testkit`).

pub mod bench;
pub mod cdf;
pub mod cli;
pub mod dump;
pub mod perf;
pub mod sim;

pub use homa_phy::testing::{fill_pattern, pattern_byte, SplitMix64 as Rng};
