//! The errors of the endpoint's API: why an RPC failed, and why a call was
//! refused. Small enums with `Display`, as smoltcp's per-operation errors.

use core::fmt;

use crate::config::ConfigError;
use crate::storage::PoolError;

/// Why a client RPC failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RpcError {
    /// The server was silent for `timeout_ticks`.
    TimedOut,
    /// An ICMP port unreachable naming the RPC (its id and ports) said no
    /// socket listens on the server port.
    PortUnreachable,
    /// An ICMP protocol unreachable naming the RPC said Homa does not run
    /// on the host; or an ICMP error said the host is unreachable (a soft
    /// error) and the server then stayed silent for `timeout_ticks`.
    PeerUnreachable,
    /// The peer's link address could not be resolved (no ARP reply) for
    /// `timeout_ticks`.
    Unresolved,
    /// The device's MTU shrank below the size the message was cut for.
    MtuShrank,
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RpcError::TimedOut => "timed out",
            RpcError::PortUnreachable => "port unreachable",
            RpcError::PeerUnreachable => "peer unreachable",
            RpcError::Unresolved => "peer address could not be resolved",
            RpcError::MtuShrank => "device MTU shrank below the message's packets",
        })
    }
}

impl core::error::Error for RpcError {}

/// Why a socket could not be created or bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum BindError {
    /// The socket table is full.
    TableFull,
    /// Server ports are 1..=0x7fff.
    InvalidPort,
    /// Another socket is bound to the port.
    InUse,
}

impl fmt::Display for BindError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BindError::TableFull => "socket table full",
            BindError::InvalidPort => "server ports are 1..=32767",
            BindError::InUse => "port in use",
        })
    }
}

impl core::error::Error for BindError {}

/// Why a request or response could not be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SendError {
    /// The RPC table is full: retry after RPCs complete.
    TableFull,
    /// The peer table is full of peers with live RPCs.
    PeerTableFull,
    /// The message pool has no room for the message now: retry later.
    PoolFull,
    /// Longer than 1,000,000 bytes, or longer than the whole pool.
    MessageTooLong,
    /// Homa has no zero-length messages.
    Empty,
    /// The socket handle is stale.
    NoSuchSocket,
    /// The RPC handle is stale or the RPC is not one that can take this call.
    NoSuchRpc,
    /// Port 0, a broadcast, multicast or unspecified address, or an address
    /// of a family the endpoint does not speak (see `Config::speaks`).
    InvalidDestination,
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SendError::TableFull => "RPC table full",
            SendError::PeerTableFull => "peer table full",
            SendError::PoolFull => "message pool full",
            SendError::MessageTooLong => "message too long",
            SendError::Empty => "empty message",
            SendError::NoSuchSocket => "no such socket",
            SendError::NoSuchRpc => "no such RPC",
            SendError::InvalidDestination => "invalid destination",
        })
    }
}

impl core::error::Error for SendError {}

/// What `Endpoint::new` found wrong with its storage or configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SetupError {
    /// A configuration value is out of range.
    Config(ConfigError),
    /// The pool buffer cannot hold one page, or the page size is invalid.
    Pool(PoolError),
    /// A table is empty or has more than 65535 entries.
    TableSize,
}

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetupError::Config(e) => write!(f, "configuration: {e}"),
            SetupError::Pool(e) => write!(f, "message pool: {e}"),
            SetupError::TableSize => f.write_str("tables need 1..=65535 entries"),
        }
    }
}

impl core::error::Error for SetupError {}
