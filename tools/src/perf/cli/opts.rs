//! homa-perf's options once checked: what the client, server and testbed
//! loops read.

use std::net::{IpAddr, SocketAddr};

use homa_stack::wire::EthernetAddress;

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

/// Settings of the homa-stack endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HomaOpts {
    /// Pacer link rate.
    pub link_mbps: u32,
    /// How far ahead of the wire the pacer may queue, in microseconds.
    pub nic_backlog_us: u64,
    /// homa-stack's MAC (default derived from its IP).
    pub mac: Option<EthernetAddress>,
    /// Static neighbours (no ARP for them).
    pub neighbors: Vec<(IpAddr, EthernetAddress)>,
    /// Capture file.
    pub pcap: Option<String>,
    /// Frames dropped at random each way, in parts per million.
    pub drop_ppm: u32,
    /// RPC slots.
    pub max_rpcs: usize,
    /// Message pool in MiB.
    pub pool_mb: usize,
    /// `Config::unsched_bytes` (None: the Linux default).
    pub unsched_bytes: Option<u32>,
    /// `Config::max_incoming` (None: the Linux default).
    pub max_incoming: Option<u32>,
    /// `Config::resend_ticks` and `resend_interval` (None: Linux's 5 ms).
    pub resend_ticks: Option<u32>,
    /// `Config::timeout_ticks` (None: 100 ms).
    pub timeout_ticks: Option<u32>,
    /// `Config::fifo_grant_increment` (None: the Linux default).
    pub fifo_grant_bytes: Option<u32>,
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

/// `testbed` options.
#[derive(Debug, Clone)]
pub struct TestbedOpts {
    /// Client hosts.
    pub clients: usize,
    /// Workload spec (see [`SizeDist::from_spec`]).
    pub workload: String,
    /// Offered load as a fraction of the bottleneck (message bytes).
    pub load: f64,
    /// Bottleneck rate.
    pub bottleneck_mbps: u32,
    /// Strict-priority bands at the bottleneck (1..=8).
    pub bands: u8,
    /// Seconds per protocol.
    pub duration_s: f64,
    /// Drain seconds per protocol.
    pub drain_s: f64,
    /// Byte limit of each band's queue, in KB.
    pub queue_kb: u32,
    /// Response length.
    pub reply_len: u32,
    /// Base seed.
    pub seed: u64,
    /// Run only one protocol (`homa` or `tcp`).
    pub only: Option<String>,
    /// JSON output.
    pub json: bool,
    /// Pacer queue allowance for the Homa endpoints.
    pub nic_backlog_us: u64,
    /// Homa's unscheduled bytes: one round trip's worth at the bottleneck
    /// (`--rtt-us`, default 250 us), in whole packets, unless given.
    pub unsched_bytes: u32,
    /// Homa's cap on granted-but-unreceived bytes: 8 round trips' worth
    /// unless given, so Homa's queue at the bottleneck stays well under its
    /// 5 ms RESEND timer.
    pub max_incoming: u32,
    /// Homa's FIFO grant size: two round trips' worth unless given.
    pub fifo_grant_bytes: u32,
    /// Homa's RESEND ticks (default 15 ms: see docs/testbed.md).
    pub resend_ticks: u32,
    /// Homa's timeout ticks (default 1000 ms: see docs/testbed.md).
    pub timeout_ticks: u32,
    /// Seconds of the closed-loop capacity probe per protocol (0: none).
    pub probe_s: f64,
    /// Run both protocols over IPv6 (fd00:77::/64) instead of IPv4.
    pub ipv6: bool,
    /// Homa over AF_XDP on the hosts' veths instead of bridged TAPs.
    pub xdp: bool,
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
