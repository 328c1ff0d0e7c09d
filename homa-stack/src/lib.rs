//! homa-stack: Homa as a `no_std`, heap-free, sans-IO library.
//!
//! Homa is a datacenter RPC transport: message-based, receiver-driven (the
//! receiver GRANTs bytes to the sender with the fewest bytes left first), and
//! it uses the switches' priority queues so short messages pass long ones.
//! This crate speaks the wire format of the Linux kernel module ("era D", IP
//! protocol 146).
//!
//! Layout, leaves first:
//! - [`wire`]: packet views (`Packet<T>`) and representations (`Repr`) for
//!   Ethernet, ARP, IPv4, IPv6, ICMP and every Homa packet type.
//! - [`time`]: `Instant` and `Duration` in nanoseconds (re-exported from homa-phy).
//! - [`storage`]: the message pool over caller memory and the reassembly tracker.
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(all(feature = "log", feature = "defmt"))]
compile_error!("features `log` and `defmt` are mutually exclusive");

#[macro_use]
mod macros;

pub mod storage;
pub mod time;
pub mod wire;

pub use homa_phy as phy;
