//! The homa-stack tools: the simulator behind `homa-sim` ([`sim`], over the
//! packet-level datacenter fabric of [`fabric`]), the load
//! generator and testbed behind `homa-perf` ([`perf`]), the CPU benchmark
//! behind `homa-bench` ([`mod@bench`]), homa-dump's implementation ([`dump`]) and
//! the command-line value checks they share ([`cli`]). The payload patterns, the
//! generator and the soak run come from the test kit (`homa_phy::testing`,
//! `homa_testkit`).

pub mod bench;
pub mod cdf;
pub mod cli;
pub mod dump;
pub mod fabric;
pub mod perf;
pub mod sim;

pub use homa_phy::testing::{fill_pattern, pattern_byte, SplitMix64 as Rng};
