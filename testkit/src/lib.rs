//! The workspace's test kit for what needs homa-stack's types: two
//! endpoints on a faulty wire ([`duo`]), the soak run behind the
//! `loopback` program and the loss-recovery tests ([`soak`]), frames
//! built from homa-stack's wire representations ([`frames`]), and the
//! memory check of the programs that size their runs ([`memory`]).
//!
//! Everything that needs no homa-stack type (the generator, payload
//! patterns, test devices, raw frame builders and the two-host driver
//! itself) is in [`homa_phy::testing`], so that homa-stack's own unit
//! tests share it too; this crate builds on it. Not published: it serves
//! the integration tests (`tests/`), the tools (`tools/`) and the fuzz
//! targets (`fuzz/`).

pub mod duo;
pub mod frames;
pub mod memory;
pub mod soak;

pub use duo::Storage;
