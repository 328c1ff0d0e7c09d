//! Counters of the fabric and of each port.

use super::topology::NodeId;
use homa_phy::time::Duration;

/// Fabric-wide counters since the fabric was built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Stats {
    /// Frames handed to host transmit tokens (including ones then dropped).
    pub frames_sent: u64,
    /// Frame bytes (without FCS) handed to host transmit tokens.
    pub bytes_sent: u64,
    /// Frames made visible to a host's `receive` (broadcast copies included).
    pub frames_delivered: u64,
    /// Frame bytes made visible to a host's `receive`.
    pub bytes_delivered: u64,
    /// Link traversals: a frame crossing one link is one hop. Broadcast copies
    /// bypass the links and add none.
    pub hops: u64,
    /// Copies of broadcast and multicast frames scheduled for delivery.
    pub broadcast_copies: u64,
    /// Frames marked ECN Congestion Experienced by a port past its
    /// threshold ([`Config::ecn_threshold_bytes`](super::Config)).
    pub ecn_marks: u64,
    /// Frames dropped, by reason.
    pub drops: Drops,
}

/// Dropped frames, by reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Drops {
    /// A finite egress buffer was full: a switch port's, or a host NIC's
    /// with [`Config::nic_like_switch`](super::Config).
    pub buffer_full: u64,
    /// The destination MAC belongs to no host (dropped at the first switch).
    pub unknown_destination: u64,
    /// Shorter than an Ethernet header (dropped at the sending host).
    pub malformed: u64,
    /// Longer than the MTU (dropped at the sending host).
    pub oversize: u64,
}

impl Drops {
    /// All drops together.
    pub const fn total(&self) -> u64 {
        self.buffer_full + self.unknown_destination + self.malformed + self.oversize
    }
}

/// Counters of one egress port and the link leaving it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PortStats {
    /// The node the port belongs to.
    pub node: NodeId,
    /// The port's number on that node.
    pub port: usize,
    /// The node at the other end of the link.
    pub peer: NodeId,
    /// Link rate, Mbit/s.
    pub rate_mbps: u32,
    /// Frames fully sent on the link.
    pub frames: u64,
    /// Frame bytes fully sent on the link.
    pub bytes: u64,
    /// Total serialisation time of the frames put on the link; divided by the
    /// elapsed time it is the link's utilisation.
    pub busy: Duration,
    /// Frame bytes buffered now (queued plus the frame on the wire).
    pub queue_bytes: usize,
    /// Largest `queue_bytes` ever reached.
    pub max_queue_bytes: usize,
    /// Frames dropped because the buffer was full.
    pub drops: u64,
    /// Frames marked ECN Congestion Experienced.
    pub marks: u64,
}
