//! How to build a fabric: its shape, link rates, delays and buffers.

use core::fmt;

use homa_phy::time::Duration;
use homa_phy::ChecksumCapabilities;

/// The shape of the simulated network.
///
/// Every shape is a two-tier leaf/spine tree: racks of hosts under a
/// top-of-rack (ToR) switch, and (with more than one rack) aggregation
/// switches each wired to every ToR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    /// One ToR switch with `hosts` hosts (1..=254). `docs/benchmarks.md` uses 16.
    Rack {
        /// Number of hosts under the switch.
        hosts: usize,
    },
    /// The Homa paper's cluster: 144 hosts = 9 racks of 16, 4 aggregation
    /// switches. Same as `TwoTier { racks: 9, hosts_per_rack: 16, aggs: 4 }`.
    Paper,
    /// Any two-tier shape: `racks` (1..=256) racks of `hosts_per_rack`
    /// (1..=254) hosts, `aggs` aggregation switches (at least 1 when there is
    /// more than one rack). Traffic between racks is sprayed per packet,
    /// uniformly at random, over the ToR's uplinks.
    TwoTier {
        /// Number of racks (ToR switches).
        racks: usize,
        /// Hosts under each ToR.
        hosts_per_rack: usize,
        /// Aggregation switches; each ToR has one uplink to each.
        aggs: usize,
    },
}

impl Default for Topology {
    /// `Rack { hosts: 16 }`, the default of `docs/benchmarks.md`.
    fn default() -> Self {
        Topology::Rack { hosts: 16 }
    }
}

/// Everything tunable about a fabric. Build with [`Config::new`] (or
/// `Default`) and change the public fields; the defaults are those of
/// `docs/benchmarks.md` section 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// The shape of the network.
    pub topology: Topology,
    /// Seed of the fabric's random generator (uplink spraying). Same seed and
    /// same inputs give the same run.
    pub seed: u64,
    /// Rate of every host link (host NIC and ToR port toward a host), Mbit/s.
    /// Default 10,000.
    pub host_link_mbps: u32,
    /// Rate of every ToR to aggregation link, both ways, Mbit/s. Default 40,000.
    pub fabric_link_mbps: u32,
    /// Propagation delay of every link. Default zero.
    pub propagation_delay: Duration,
    /// Fixed delay inside each switch, from the frame's full arrival to its
    /// joining the egress queue. Default 250 ns.
    pub switch_delay: Duration,
    /// Host software delay on send, from `TxToken::consume` to the frame
    /// joining the NIC queue. Default 500 ns.
    pub host_send_delay: Duration,
    /// Host software delay on receive, from the frame's full arrival at the
    /// NIC to its being visible to `Device::receive`. Default 500 ns.
    pub host_rx_delay: Duration,
    /// Largest frame (without FCS) a host may send; larger ones are dropped
    /// and counted. Reported as the device MTU. Default 1514.
    pub mtu: usize,
    /// Buffer of each switch egress port in frame bytes (frames waiting plus
    /// the one being sent); a frame that does not fit is dropped (drop-tail)
    /// and counted. `None` (default) = unlimited.
    pub switch_buffer_bytes: Option<usize>,
    /// Buffer of each switch egress port in frames (frames waiting plus the
    /// one being sent), shared by its 8 priority queues; a frame arriving at
    /// a full port is dropped (drop-tail) and counted. `None` (default) =
    /// unlimited. Applies together with `switch_buffer_bytes`.
    pub switch_buffer_frames: Option<usize>,
    /// Host NIC egress with 8 strict-priority queues instead of one FIFO.
    /// Default `false`: real NICs have one queue and Homa paces its own.
    pub nic_priority_queues: bool,
    /// Host NIC ports also get the switch ports' buffer limits, ECN marking
    /// and pFabric scheduling, as the ns-2 simulations of DCTCP, PIAS and
    /// pFabric put the same queue on every link, the host's own included.
    /// Default `false`.
    pub nic_like_switch: bool,
    /// ECN marking threshold of each switch egress port in frame bytes:
    /// an ECN-capable IPv4 frame that finds more than this many bytes
    /// waiting (the frame being sent not counted) once it is queued is
    /// marked Congestion Experienced, as DCTCP's switches mark past K.
    /// `None` (default): no marking.
    pub ecn_threshold_bytes: Option<usize>,
    /// pFabric switch ports: one queue that sends the earliest frame of
    /// the flow whose queued frame has the lowest rank (bytes left, set
    /// with `SimTxToken::set_rank`) and, when full, drops the frame of the
    /// highest rank. Default `false`: strict priorities, drop-tail.
    pub pfabric: bool,
    /// Most frames a host NIC holds (accepted by `transmit` but not yet fully
    /// sent on the host link, software delay included); at the limit
    /// `Device::transmit` returns `None`. `None` (default) = unlimited.
    pub nic_queue_frames: Option<usize>,
    /// Checksum offload reported by every host port. Default: the stack
    /// computes and verifies everything, as over a real NIC.
    pub checksum: ChecksumCapabilities,
}

impl Config {
    /// The `docs/benchmarks.md` defaults for `topology`, with seed 0.
    pub fn new(topology: Topology) -> Config {
        Config {
            topology,
            seed: 0,
            host_link_mbps: 10_000,
            fabric_link_mbps: 40_000,
            propagation_delay: Duration::ZERO,
            switch_delay: Duration::from_nanos(250),
            host_send_delay: Duration::from_nanos(500),
            host_rx_delay: Duration::from_nanos(500),
            mtu: 1514,
            switch_buffer_bytes: None,
            switch_buffer_frames: None,
            nic_priority_queues: false,
            nic_like_switch: false,
            ecn_threshold_bytes: None,
            pfabric: false,
            nic_queue_frames: None,
            checksum: ChecksumCapabilities::default(),
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config::new(Topology::default())
    }
}

/// Why a [`Config`] cannot be built into a fabric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// Zero hosts, racks or hosts per rack.
    NoHosts,
    /// More than 254 hosts per rack or 256 racks: the 10.0.r.h addressing
    /// cannot name them.
    TooManyHosts,
    /// Several racks but no aggregation switch to join them.
    NoAggregation,
    /// A link rate of zero.
    ZeroLinkRate,
    /// An MTU below the 14-byte Ethernet header.
    MtuTooSmall,
    /// A NIC queue limit of zero frames: no host could ever send.
    ZeroNicQueue,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConfigError::NoHosts => "the topology has no hosts",
            ConfigError::TooManyHosts => "more than 254 hosts per rack or 256 racks",
            ConfigError::NoAggregation => "several racks need at least one aggregation switch",
            ConfigError::ZeroLinkRate => "a link rate is zero",
            ConfigError::MtuTooSmall => "the MTU is below the 14-byte Ethernet header",
            ConfigError::ZeroNicQueue => "a NIC queue limit of zero frames",
        })
    }
}

impl std::error::Error for ConfigError {}
