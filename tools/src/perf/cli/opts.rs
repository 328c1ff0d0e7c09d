//! homa-perf's options once checked: what the client, server and testbed
//! loops read.

use std::net::SocketAddr;

use super::args::{HomaOpts, TestbedOpts};
use crate::perf::addr::Cidr;
use crate::perf::arrivals::Pace;
use crate::perf::payload::{request_len, HEADER_LEN};
use crate::perf::workload::SizeDist;

/// Where the messages go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// homa-stack over a TAP device.
    Tap {
        /// Interface name.
        name: String,
        /// homa-stack's own address and subnet (IPv4, or IPv6 for an
        /// IPv6-only endpoint).
        ip: Cidr,
        /// Bridge to join the TAP to, if it is created.
        bridge: Option<String>,
        /// Address for the kernel's side (the bridge's when one is made).
        host_ip: Option<Cidr>,
    },
    /// homa-stack over an AF_PACKET socket.
    Iface {
        /// Interface name.
        name: String,
        /// homa-stack's own address and subnet.
        ip: Cidr,
    },
    /// homa-stack over an AF_XDP socket.
    Xdp {
        /// Interface name.
        name: String,
        /// homa-stack's own address and subnet.
        ip: Cidr,
        /// The interface queue the socket binds.
        queue: u32,
    },
    /// The kernel's TCP.
    Tcp,
}

impl Transport {
    /// homa-stack's address and subnet, if Homa.
    pub fn homa_ip(&self) -> Option<Cidr> {
        match self {
            Transport::Tap { ip, .. } | Transport::Iface { ip, .. } | Transport::Xdp { ip, .. } => {
                Some(*ip)
            }
            Transport::Tcp => None,
        }
    }
}

/// `server` options.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerOpts {
    /// Device or TCP.
    pub transport: Transport,
    /// Endpoint settings (Homa).
    pub homa: HomaOpts,
    /// Homa port or TCP port.
    pub port: u16,
    /// TCP listening address.
    pub listen: SocketAddr,
    /// Stop after this many seconds (`None`: at a signal).
    pub duration_s: Option<f64>,
    /// Check every request byte.
    pub verify: bool,
    /// JSON output.
    pub json: bool,
    /// No progress lines.
    pub quiet: bool,
}

/// `client` options.
#[derive(Debug, Clone)]
pub struct ClientOpts {
    /// Device or TCP.
    pub transport: Transport,
    /// Endpoint settings (Homa).
    pub homa: HomaOpts,
    /// Servers, used in turn.
    pub targets: Vec<SocketAddr>,
    /// Request sizes.
    pub dist: SizeDist,
    /// Pacing.
    pub pace: Pace,
    /// Seconds during which RPCs are issued.
    pub duration_s: f64,
    /// Seconds allowed after that for outstanding RPCs.
    pub drain_s: f64,
    /// Response length, or [`ECHO`](crate::perf::payload::ECHO).
    pub reply_len: u32,
    /// Seed of sizes, arrivals and payloads.
    pub seed: u64,
    /// Check every response byte.
    pub verify: bool,
    /// JSON output.
    pub json: bool,
    /// Wall-clock start (Unix milliseconds), to start several clients together.
    pub start_at_ms: Option<u64>,
    /// No per-RPC error lines.
    pub quiet: bool,
}

impl ClientOpts {
    /// What a user should know of how requests are sent: that sizes under
    /// the payload header are raised to it when the header must carry a
    /// reply length (an echo of any size goes at its size).
    pub fn size_note(&self) -> Option<String> {
        let min = self.dist.min() as usize;
        (request_len(min, self.reply_len) > min).then(|| {
            format!(
                "requests under {HEADER_LEN} B are sent as {HEADER_LEN} B: their header carries \
                 --reply-len (with --reply-len echo they go at their size, without one)"
            )
        })
    }
}

/// A parsed command line.
#[derive(Debug, Clone)]
pub enum Command {
    /// Serve requests.
    Server(ServerOpts),
    /// Issue requests.
    Client(Box<ClientOpts>),
    /// Build the namespace testbed and compare Homa with TCP.
    Testbed(TestbedOpts),
    /// Remove leftover testbed namespaces.
    Cleanup,
}
