//! homa-stack: Homa as a `no_std`, heap-free, sans-IO library.
//!
//! Homa is a datacenter RPC transport: message-based, receiver-driven (the
//! receiver GRANTs bytes to the sender with the fewest bytes left first), and
//! it uses the switches' priority queues so short messages pass long ones.
//! This crate speaks the wire format of the Linux kernel module (HomaModule
//! `main`, IP protocol 146).
//!
//! Layout, leaves first:
//! - [`wire`]: packet views (`Packet<T>`) and representations (`Repr`) for
//!   Ethernet, ARP, IPv4, IPv6, ICMP and every Homa packet type.
//! - [`time`]: `Instant` and `Duration` in nanoseconds (re-exported from homa-phy).
//! - [`storage`]: the message pool over caller memory, loss tracking both ways, and the
//!   lists, heap and index the endpoint keeps in its slot tables.
//! - [`config`]: every tunable of the Linux module with its default.
//! - [`endpoint`]: sockets, RPCs, the grant scheduler, the pacer, timers and
//!   the host layer (ARP, ICMP), driven by `poll(now, device)`.
//! - `asynch` (feature `async`): async request/reply for any executor, over
//!   a shared endpoint and a runner task, like embassy-net's `Stack`.
//! - [`stats`]: counters of every packet type, drop reason, grant and retransmission.
//!
//! # Example
//!
//! Two endpoints over in-memory devices wired back to back (homa-phy's
//! [`Loopback`](phy::Loopback) and [`Split`](phy::Split)); the client sends
//! one request, the server answers it. All memory comes from the caller:
//! here `Vec`s and arrays, on a microcontroller `static` buffers.
//!
//! ```
//! use homa_stack::endpoint::{PeerSlot, RpcSlot, SocketSlot};
//! use homa_stack::phy::{forward, Loopback, Split};
//! use homa_stack::time::{Duration, Instant};
//! use homa_stack::wire::{EthernetAddress, Ipv4Addr};
//! use homa_stack::{Config, Endpoint, Event};
//!
//! // Tables and a 64 KiB message pool (2 KiB pages) for each endpoint.
//! let (mut rpcs_a, mut rpcs_b) = ([RpcSlot::EMPTY; 8], [RpcSlot::EMPTY; 8]);
//! let (mut peers_a, mut peers_b) = ([PeerSlot::EMPTY; 4], [PeerSlot::EMPTY; 4]);
//! let (mut socks_a, mut socks_b) = ([SocketSlot::EMPTY; 2], [SocketSlot::EMPTY; 2]);
//! let (mut pool_a, mut pool_b) = (vec![0u8; 64 * 1024], vec![0u8; 64 * 1024]);
//!
//! let (ip_a, mac_a) = (Ipv4Addr::new(10, 0, 0, 1), EthernetAddress([2, 0, 0, 0, 0, 1]));
//! let (ip_b, mac_b) = (Ipv4Addr::new(10, 0, 0, 2), EthernetAddress([2, 0, 0, 0, 0, 2]));
//! // Each endpoint's secret hash seed: from the OS or a hardware RNG in
//! // real use (see `Config::new`), fixed here so the example repeats.
//! let mut a = Endpoint::new(
//!     Config::new(ip_a, mac_a, 0x5eed_a),
//!     &mut rpcs_a[..], &mut peers_a[..], &mut socks_a[..], &mut pool_a[..], 2048,
//! )
//! .unwrap();
//! let mut b = Endpoint::new(
//!     Config::new(ip_b, mac_b, 0x5eed_b),
//!     &mut rpcs_b[..], &mut peers_b[..], &mut socks_b[..], &mut pool_b[..], 2048,
//! )
//! .unwrap();
//!
//! // Each device: a receive queue and a transmit queue of 64 frames.
//! let mut dev_a: Split<Loopback<64>, Loopback<64>> = Split::new(Loopback::new(), Loopback::new());
//! let mut dev_b: Split<Loopback<64>, Loopback<64>> = Split::new(Loopback::new(), Loopback::new());
//!
//! let server = b.bind(500).unwrap();
//! let client = a.socket().unwrap();
//! // Only changes state: the next poll sends.
//! let rpc = a.send_request(client, ip_b, 500, b"ping").unwrap();
//!
//! // A virtual clock stepping 10 us; a real program sleeps until
//! // `poll_at()` or until a frame arrives.
//! let mut now = Instant::ZERO;
//! let mut answer = None;
//! while answer.is_none() && now < Instant::from_secs(1) {
//!     a.poll(now, &mut dev_a);
//!     forward(dev_a.tx_mut(), dev_b.rx_mut(), now);
//!     b.poll(now, &mut dev_b);
//!     forward(dev_b.tx_mut(), dev_a.rx_mut(), now);
//!     if let Some(Event::Request { rpc, .. }) = b.recv(server) {
//!         b.reply(rpc, b"pong").unwrap();
//!     }
//!     if let Some(Event::Response { rpc: done, len }) = a.recv(client) {
//!         assert_eq!(done, rpc);
//!         let mut buf = [0u8; 4];
//!         a.message(done).unwrap().copy_to(&mut buf[..len]);
//!         a.release(done).unwrap();
//!         answer = Some(buf);
//!     }
//!     now += Duration::from_micros(10);
//! }
//! assert_eq!(&answer.unwrap(), b"pong");
//! ```
//!
//! The repository's `examples/` has the same exchange over Linux TAP devices
//! with a wall-clock poll loop (`echo-server`, `echo-client`) and a Cortex-M4F
//! firmware with static memory.
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(all(feature = "log", feature = "defmt"))]
compile_error!("features `log` and `defmt` are mutually exclusive");

#[macro_use]
mod macros;

#[cfg(feature = "async")]
pub mod asynch;
pub mod config;
pub mod endpoint;
pub mod stats;
pub mod storage;
mod testing;
pub mod time;
pub mod wire;

pub use config::Config;
pub use endpoint::{
    Endpoint, EndpointResources, Event, PeerSlot, RpcError, RpcHandle, RpcInfo, RpcSlot, SendError,
    SocketHandle, SocketSlot,
};

pub use homa_phy as phy;
