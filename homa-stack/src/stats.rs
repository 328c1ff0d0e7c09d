//! Counters in the spirit of `/proc/net/homa_metrics`: every packet type sent
//! and received, every drop by its reason, grants and retransmissions.
//!
//! Counters only grow (wrapping at 2^64, which no run reaches).

use core::fmt;

use crate::wire::homa::PacketType;

/// Counters indexed by Homa packet type (0x10..=0x18).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PerType {
    /// DATA.
    pub data: u64,
    /// GRANT.
    pub grant: u64,
    /// RESEND.
    pub resend: u64,
    /// RPC_UNKNOWN.
    pub rpc_unknown: u64,
    /// BUSY.
    pub busy: u64,
    /// CUTOFFS.
    pub cutoffs: u64,
    /// FREEZE.
    pub freeze: u64,
    /// NEED_ACK.
    pub need_ack: u64,
    /// ACK.
    pub ack: u64,
}

impl PerType {
    /// Counts one packet of type `ty` (unknown types are not counted).
    // Out of line on firmware, as `Drops::count`.
    #[cfg_attr(target_os = "none", inline(never))]
    pub fn count(&mut self, ty: PacketType) {
        let c = match ty {
            PacketType::Data => &mut self.data,
            PacketType::Grant => &mut self.grant,
            PacketType::Resend => &mut self.resend,
            PacketType::RpcUnknown => &mut self.rpc_unknown,
            PacketType::Busy => &mut self.busy,
            PacketType::Cutoffs => &mut self.cutoffs,
            PacketType::Freeze => &mut self.freeze,
            PacketType::NeedAck => &mut self.need_ack,
            PacketType::Ack => &mut self.ack,
            PacketType::Unknown(_) => return,
        };
        *c = c.wrapping_add(1);
    }
    /// Sum over all types.
    pub fn total(&self) -> u64 {
        self.data
            + self.grant
            + self.resend
            + self.rpc_unknown
            + self.busy
            + self.cutoffs
            + self.freeze
            + self.need_ack
            + self.ack
    }
}

/// Why a received frame or packet was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DropReason {
    /// Ethernet, IP, ARP, ICMP or Homa header did not parse.
    Malformed,
    /// Homa checksum verification failed.
    Checksum,
    /// Not addressed to this host (IP or Ethernet destination).
    NotForUs,
    /// An IP protocol or EtherType this stack does not handle.
    Unsupported,
    /// No socket bound to the destination port.
    UnknownPort,
    /// A packet for an RPC that does not exist (and needs no reply).
    UnknownRpc,
    /// DATA whose range is outside its message, or a bad message length.
    BadRange,
    /// DATA already received, or partly overlapping received data.
    Duplicate,
    /// DATA that would need more reassembly gaps than a slot holds.
    TooManyGaps,
    /// DATA for a message with no pool space yet.
    NoBuffer,
    /// A new incoming RPC found the RPC table full.
    RpcTableFull,
    /// The peer table was full with no idle peer to evict.
    PeerTableFull,
    /// The control-packet queue was full.
    ControlQueueFull,
    /// A packet for an RPC in a state that does not accept it.
    WrongState,
    /// A frame that could not be sent because the peer's link address is unknown.
    Unresolved,
    /// A packet from a peer not in the peer table that would need an entry.
    UnknownPeer,
    /// A well-formed packet of a type not acted on: FREEZE, ARP other than
    /// requests and replies, and ICMP messages other than echo, destination
    /// unreachable and neighbour discovery.
    NotHandled,
    /// A frame we would send is larger than the device's MTU.
    FrameTooBig,
    /// An RPC_UNKNOWN within a RESEND interval of the restart the last
    /// one caused (each restart sends DATA again), or a RESEND over its
    /// message's resend ration.
    RateLimited,
    /// A neighbour advertisement without the override flag for a peer whose
    /// known link address differs: not applied (RFC 4861 7.2.5).
    NoOverride,
    /// A frame tagged (802.1Q) for a VLAN that is not ours.
    WrongVlan,
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DropReason::Malformed => "malformed",
            DropReason::Checksum => "bad checksum",
            DropReason::NotForUs => "not for us",
            DropReason::Unsupported => "unsupported protocol",
            DropReason::UnknownPort => "no socket for port",
            DropReason::UnknownRpc => "unknown RPC",
            DropReason::BadRange => "DATA outside its message",
            DropReason::Duplicate => "duplicate DATA",
            DropReason::TooManyGaps => "too many reassembly gaps",
            DropReason::NoBuffer => "no pool space",
            DropReason::RpcTableFull => "RPC table full",
            DropReason::PeerTableFull => "peer table full",
            DropReason::ControlQueueFull => "control queue full",
            DropReason::WrongState => "RPC in wrong state",
            DropReason::Unresolved => "peer link address unknown",
            DropReason::UnknownPeer => "unknown peer",
            DropReason::NotHandled => "packet type not handled",
            DropReason::FrameTooBig => "frame larger than the device MTU",
            DropReason::RateLimited => "over its rate limit",
            DropReason::NoOverride => "advertisement without override for a known address",
            DropReason::WrongVlan => "frame for another VLAN",
        })
    }
}

/// Counters of dropped packets, one per [`DropReason`] reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Drops {
    /// [`DropReason::Malformed`].
    pub malformed: u64,
    /// [`DropReason::Checksum`].
    pub checksum: u64,
    /// [`DropReason::NotForUs`].
    pub not_for_us: u64,
    /// [`DropReason::Unsupported`].
    pub unsupported: u64,
    /// [`DropReason::UnknownPort`].
    pub unknown_port: u64,
    /// [`DropReason::UnknownRpc`].
    pub unknown_rpc: u64,
    /// [`DropReason::BadRange`].
    pub bad_range: u64,
    /// [`DropReason::Duplicate`].
    pub duplicate: u64,
    /// [`DropReason::TooManyGaps`].
    pub too_many_gaps: u64,
    /// [`DropReason::NoBuffer`].
    pub no_buffer: u64,
    /// [`DropReason::RpcTableFull`].
    pub rpc_table_full: u64,
    /// [`DropReason::PeerTableFull`].
    pub peer_table_full: u64,
    /// [`DropReason::ControlQueueFull`].
    pub control_queue_full: u64,
    /// [`DropReason::WrongState`].
    pub wrong_state: u64,
    /// [`DropReason::Unresolved`].
    pub unresolved: u64,
    /// [`DropReason::UnknownPeer`].
    pub unknown_peer: u64,
    /// [`DropReason::NotHandled`].
    pub not_handled: u64,
    /// [`DropReason::FrameTooBig`].
    pub frame_too_big: u64,
    /// [`DropReason::RateLimited`].
    pub rate_limited: u64,
    /// [`DropReason::NoOverride`].
    pub no_override: u64,
    /// [`DropReason::WrongVlan`].
    pub wrong_vlan: u64,
}

impl Drops {
    /// Counts one drop.
    // Out of line on firmware: inlined at each of the drop sites, the
    // 64-bit increment cost more than the call.
    #[cfg_attr(target_os = "none", inline(never))]
    pub fn count(&mut self, why: DropReason) {
        let c = match why {
            DropReason::Malformed => &mut self.malformed,
            DropReason::Checksum => &mut self.checksum,
            DropReason::NotForUs => &mut self.not_for_us,
            DropReason::Unsupported => &mut self.unsupported,
            DropReason::UnknownPort => &mut self.unknown_port,
            DropReason::UnknownRpc => &mut self.unknown_rpc,
            DropReason::BadRange => &mut self.bad_range,
            DropReason::Duplicate => &mut self.duplicate,
            DropReason::TooManyGaps => &mut self.too_many_gaps,
            DropReason::NoBuffer => &mut self.no_buffer,
            DropReason::RpcTableFull => &mut self.rpc_table_full,
            DropReason::PeerTableFull => &mut self.peer_table_full,
            DropReason::ControlQueueFull => &mut self.control_queue_full,
            DropReason::WrongState => &mut self.wrong_state,
            DropReason::Unresolved => &mut self.unresolved,
            DropReason::UnknownPeer => &mut self.unknown_peer,
            DropReason::NotHandled => &mut self.not_handled,
            DropReason::FrameTooBig => &mut self.frame_too_big,
            DropReason::RateLimited => &mut self.rate_limited,
            DropReason::NoOverride => &mut self.no_override,
            DropReason::WrongVlan => &mut self.wrong_vlan,
        };
        *c = c.wrapping_add(1);
    }
    /// Sum over all reasons.
    pub fn total(&self) -> u64 {
        self.malformed
            + self.checksum
            + self.not_for_us
            + self.unsupported
            + self.unknown_port
            + self.unknown_rpc
            + self.bad_range
            + self.duplicate
            + self.too_many_gaps
            + self.no_buffer
            + self.rpc_table_full
            + self.peer_table_full
            + self.control_queue_full
            + self.wrong_state
            + self.unresolved
            + self.unknown_peer
            + self.not_handled
            + self.frame_too_big
            + self.rate_limited
            + self.no_override
            + self.wrong_vlan
    }
}

/// Received ICMP and ICMPv6 errors about Homa packets that ended no RPC,
/// by reason. Only a port (or, over IPv4, protocol) unreachable whose quote
/// names a live RPC ends it; everything else is counted here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct IcmpIgnored {
    /// The quoted packet is no Homa packet from one of our addresses.
    pub not_homa: u64,
    /// The quote is too short to carry the Homa id (the 28-byte common
    /// header): it names no RPC.
    pub short_quote: u64,
    /// The quote names no RPC of ours: an id, a port or an address that
    /// no live RPC has.
    pub unknown_rpc: u64,
    /// A port or protocol unreachable naming an RPC with nothing to end: a
    /// finished client RPC, or a server RPC not sending its response.
    pub wrong_state: u64,
    /// A soft error naming a live RPC (net, host or address unreachable,
    /// prohibited, no route, and every other code but port and protocol
    /// unreachable): noted on a client RPC, which fails as unreachable
    /// only if its silence timeout comes (RFC 1122 4.2.3.9, RFC 5927).
    pub soft: u64,
    /// Fragmentation needed, or ICMPv6 packet too big: a path-MTU hint,
    /// never a reason to end an RPC; the endpoint's packets keep their size.
    pub path_mtu: u64,
}

/// All counters of an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct Stats {
    /// Frames taken from the device.
    pub rx_frames: u64,
    /// Frames handed to the device.
    pub tx_frames: u64,
    /// Homa packets received, by type.
    pub rx: PerType,
    /// Homa packets sent, by type.
    pub tx: PerType,
    /// Drops by reason.
    pub drops: Drops,
    /// DATA payload bytes received and accepted.
    pub rx_data_bytes: u64,
    /// DATA payload bytes sent (first transmissions and retransmissions).
    pub tx_data_bytes: u64,
    /// DATA packets sent again in answer to RESEND or RPC_UNKNOWN.
    pub retransmissions: u64,
    /// GRANTs sent by the SRPT scheduler.
    pub grants_srpt: u64,
    /// GRANTs sent to the oldest message (FIFO share).
    pub grants_fifo: u64,
    /// RESENDs sent by the timer.
    pub resends_requested: u64,
    /// Times the pacer held a long message back because the NIC queue was full.
    pub pacer_throttled: u64,
    /// ARP requests sent.
    pub arp_requests: u64,
    /// ARP replies sent.
    pub arp_replies: u64,
    /// ICMP echo replies sent.
    pub icmp_echo_replies: u64,
    /// ICMP destination-unreachable messages sent.
    pub icmp_unreachable_sent: u64,
    /// ICMP destination-unreachable messages received.
    pub icmp_unreachable_received: u64,
    /// Received ICMP errors that ended no RPC, by reason.
    pub icmp_ignored: IcmpIgnored,
    /// Client RPCs completed with a response.
    pub client_completed: u64,
    /// Client RPCs that failed (timeout, port or peer unreachable).
    pub client_failed: u64,
    /// Client RPCs that timed out.
    pub timeouts: u64,
    /// Server RPCs freed (by ACK, RPC_UNKNOWN or timeout).
    pub server_freed: u64,
    /// RPC_UNKNOWNs naming a request whose restarts ([`MAX_RESTARTS`])
    /// were spent: its first packet went again (at most once per
    /// `resend_interval`, from its resend ration), and the RPC was left to
    /// its silence timeout, never failed for them.
    ///
    /// [`MAX_RESTARTS`]: crate::endpoint::MAX_RESTARTS
    pub restarts_spent: u64,
    /// Server RPCs freed after `timeout_ticks` of silence from the client
    /// (also while sending the response or waiting for its ACK).
    pub server_timeouts: u64,
    /// Server RPCs freed because RESENDs, or GRANTs that granted nothing
    /// new, had kept them alive with no progress for
    /// [`RESEND_LIFE_TIMEOUTS`] times `timeout_ticks` (a response sent
    /// whole and never acked, one waiting for grants that do not come, or
    /// a request that never got pool space).
    ///
    /// [`RESEND_LIFE_TIMEOUTS`]: crate::endpoint::RESEND_LIFE_TIMEOUTS
    pub server_resend_limited: u64,
    /// BUSY and RPC_UNKNOWN replies not queued because the same reply to
    /// the same RPC was already waiting to go (a burst of RESENDs naming
    /// one RPC gets one answer).
    pub replies_coalesced: u64,
    /// Acks not queued because the peer's ack list was full while its ACK
    /// packet waited to be sent (the server's NEED_ACK recovers them).
    pub acks_dropped: u64,
    /// Link addresses of peers confirmed or learned by ARP.
    pub arp_learned: u64,
    /// Checked packets whose source link address differed from the known
    /// one (the peer is probed with ARP; the address is not changed).
    pub link_addr_mismatches: u64,
    /// ARP or neighbour-discovery packets that named another link address
    /// for a peer set by the application or confirmed by its own packets:
    /// not applied (a confirmed one is probed instead).
    pub link_addr_claims_refused: u64,
    /// Peers evicted from a full peer table.
    pub peers_evicted: u64,
    /// Server RPCs freed to make room (a slot or pool pages) for a new
    /// request: answered ones waiting for their ACK first, else ones of the
    /// group of peers holding the most (see
    /// [`Config::peer_share`](crate::Config::peer_share)); also counted in
    /// `server_freed`.
    pub server_evicted: u64,
    /// IPv6 neighbour solicitations sent (resolving a peer).
    pub ndp_solicits: u64,
    /// IPv6 neighbour advertisements sent (answering a solicitation).
    pub ndp_adverts: u64,
    /// Link addresses of peers learned by neighbour discovery.
    pub ndp_learned: u64,
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "frames rx {} tx {}", self.rx_frames, self.tx_frames)?;
        writeln!(f, "rx {:?}", self.rx)?;
        writeln!(f, "tx {:?}", self.tx)?;
        writeln!(f, "drops {:?}", self.drops)?;
        write!(
            f,
            "data bytes rx {} tx {} retransmissions {} grants srpt {} fifo {} resends {} throttled {} \
             completed {} failed {} timeouts {} server freed {}",
            self.rx_data_bytes,
            self.tx_data_bytes,
            self.retransmissions,
            self.grants_srpt,
            self.grants_fifo,
            self.resends_requested,
            self.pacer_throttled,
            self.client_completed,
            self.client_failed,
            self.timeouts,
            self.server_freed
        )
    }
}
