//! `homa-sim`: many unchanged homa-stack endpoints, and smoltcp TCP for
//! comparison, over the simulated datacenter fabric of [`crate::fabric`]
//! (docs/benchmarks.md section 1). One file per concern:
//!
//! - [`workload`]: the W1..W5 size distributions and sampling;
//! - [`packets`]: Homa's packetisation (wire bytes, frames);
//! - [`traffic`]: Poisson arrivals, the same for every protocol;
//! - [`event_loop`]: the discrete-event loop and poll deadlines;
//! - [`homa_config`], [`homa_driver`]: Homa's settings and hosts;
//! - [`tcp_device`], [`tcp_driver`]: the smoltcp adapter and hosts;
//! - [`metrics`]: outcomes and slowdown statistics;
//! - [`run`](mod@run): one experiment; [`report`], [`plot`]: table, JSON, SVG.

pub mod event_loop;
pub mod homa_config;
pub mod homa_driver;
pub mod metrics;
pub mod packets;
pub mod plot;
pub mod report;
pub mod run;
pub mod tcp_device;
pub mod tcp_driver;
pub mod traffic;
pub mod workload;

pub use run::{run, run_with, Protocol, SimOptions, SimResult};
pub use workload::Workload;
