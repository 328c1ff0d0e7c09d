//! `homa-sim`: many unchanged homa-stack endpoints, and the baselines the
//! Homa paper compared it with (PIAS, DCTCP, TCP, pFabric), over the
//! simulated datacenter fabric of [`crate::fabric`] (docs/benchmarks.md
//! section 1). One file per concern:
//!
//! - [`workload`]: the W1..W5 size distributions and sampling;
//! - [`packets`]: Homa's packetisation (wire bytes, frames);
//! - [`traffic`]: Poisson arrivals, the same for every protocol;
//! - [`event_loop`]: the discrete-event loop and poll deadlines;
//! - [`homa_config`], [`homa_driver`]: Homa's settings and hosts;
//! - [`baselines`]: the baselines' published settings;
//! - [`tcp_model`], [`tcp_wire`], [`tcp_driver`]: the baselines' TCP (a
//!   model, as their simulators had), its segments, and its hosts;
//! - [`metrics`]: outcomes and slowdown statistics;
//! - [`run`](mod@run): one experiment; [`report`], [`plot`]: table, JSON, SVG.

pub mod baselines;
pub mod event_loop;
pub mod homa_config;
pub mod homa_driver;
pub mod metrics;
pub mod packets;
pub mod plot;
pub mod report;
pub mod run;
pub mod tcp_driver;
pub mod tcp_model;
pub mod tcp_wire;
pub mod traffic;
pub mod workload;

pub use run::{run, run_with, Protocol, SimOptions, SimResult};
pub use workload::Workload;
