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
//! - [`config`]: every tunable of the Linux module with its default.
//! - [`endpoint`]: sockets, RPCs, the grant scheduler, the pacer, timers and
//!   the host layer (ARP, ICMP), driven by `poll(now, device)`.
//! - [`stats`]: counters of every packet type, drop reason, grant and retransmission.
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(all(feature = "log", feature = "defmt"))]
compile_error!("features `log` and `defmt` are mutually exclusive");

#[macro_use]
mod macros;

pub mod config;
pub mod endpoint;
pub mod stats;
pub mod storage;
pub mod time;
pub mod wire;

pub use config::Config;
pub use endpoint::{
    Endpoint, EndpointResources, Event, PeerSlot, RpcError, RpcHandle, RpcInfo, RpcSlot, SendError,
    SocketHandle, SocketSlot,
};

pub use homa_phy as phy;
