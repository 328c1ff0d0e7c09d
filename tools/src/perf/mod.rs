//! homa-perf: a `cp_node`-style load generator for homa-stack on Linux
//! (TAP or AF_PACKET) and, for comparison, the kernel's TCP; plus the
//! namespace testbed that runs both side by side.
//!
//! One concern per module: [`cli`] (the command line: clap's definitions
//! and the checked options), [`addr`] (addresses), [`workload`] (message
//! sizes), [`arrivals`] (Poisson or closed-loop RPC sequence), [`payload`]
//! (what messages carry, so every byte is checked, and the server's checks
//! of untrusted requests), [`stats`] (histograms), [`progress`] (stderr
//! lines of a long run), [`report`] (tables and JSON), [`homa`] and [`tcp`]
//! (the client and server loops), [`netcfg`] (TAP and bridge set-up),
//! [`sys`] (the few kernel calls beyond homa-phy), [`testbed`]
//! (namespaces, bottleneck, CPU accounting, phases, orchestration).
//!
//! Imports go one way: the loops and the testbed read [`cli`]'s options;
//! [`cli`] and [`netcfg`] share [`addr`] and import neither each other nor
//! the testbed.

pub mod addr;
pub mod arrivals;
pub mod cli;
pub mod homa;
pub mod netcfg;
pub mod payload;
pub mod progress;
pub mod report;
pub mod stats;
pub mod sys;
pub mod tcp;
pub mod testbed;
pub mod workload;
