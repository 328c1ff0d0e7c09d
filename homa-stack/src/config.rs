//! Every tunable of the Linux module (docs/protocol.md 4.10) with its default, plus
//! the local addresses, link rate, MTU and priority encoding.
//!
//! Names follow the Linux sysctls (`net.homa.*`) so settings carry over.

use crate::time::Duration;
use crate::wire::{EthernetAddress, IpAddr, Ipv4Addr, Ipv6Addr};

/// Number of priority levels on the wire (CUTOFFS carries eight entries).
pub const NUM_PRIORITIES: usize = 8;

/// How the Homa priority of a frame is marked on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PriorityEncoding {
    /// IPv4 TOS = `priority << 5` (DSCP class selector), as Linux does.
    Tos,
    /// An 802.1Q tag with PCP = priority (VLAN id given), TOS 0.
    Vlan {
        /// VLAN id put in the tag (0 = priority-tagged frame).
        vid: u16,
    },
    /// No marking on the wire; `PacketMeta` still carries the priority.
    None,
}

/// IPv6 addresses beyond the link-local one an endpoint holds.
pub const MAX_IPV6_ADDRS: usize = 2;

/// Configuration of an endpoint.
///
/// Build with [`Config::new`] and change public fields; defaults are the
/// Linux module's. The hash seed has no default: the caller supplies it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct Config {
    /// This host's IPv4 address; `0.0.0.0` for an endpoint without IPv4.
    pub ipv4_addr: Ipv4Addr,
    /// Speak IPv6 too (off by default; needs the `ipv6` cargo feature,
    /// without which this is ignored). The endpoint then answers on its
    /// link-local address, [`Config::ipv6_link_local`] or, when that is
    /// `None`, the one derived from the Ethernet address by EUI-64
    /// (RFC 4291 appendix A), and on each address in [`Config::ipv6_addrs`].
    pub ipv6: bool,
    /// The IPv6 link-local address, if not derived from the MAC.
    pub ipv6_link_local: Option<Ipv6Addr>,
    /// Further (global or unique-local) IPv6 addresses.
    pub ipv6_addrs: [Option<Ipv6Addr>; MAX_IPV6_ADDRS],
    /// This host's Ethernet address.
    pub ethernet_addr: EthernetAddress,
    /// IP MTU in bytes (1500 gives 1424 payload bytes per DATA packet).
    /// The device's frame MTU caps it further.
    pub mtu: usize,
    /// The secret seed of the endpoint's keyed hash (see [`Config::new`]),
    /// from which the first client RPC id is also derived, one way.
    pub random_seed: u64,
    /// Link rate in Mbit/s for the pacer; the device's reported rate wins
    /// when it has one. Linux default 25000.
    pub link_mbps: u32,
    /// How priorities are marked on the wire.
    pub priority_encoding: PriorityEncoding,
    /// Send the TCP-style Homa checksum (Linux `main` does); off, the field
    /// is 0, as older and upstream Linux builds send it. Who computes it is
    /// the device's capabilities' (`ChecksumCapabilities::homa`): the
    /// endpoint fills it, or leaves the pseudo-header's sum in the field
    /// for a device that completes it (docs/architecture.md, "Checksums").
    pub homa_checksum_tx: bool,
    /// Verify non-zero Homa checksums on receive. Off by default: Linux never
    /// checks it, and frames read before the kernel completes it do not verify.
    /// On, the endpoint verifies them unless the device says it has.
    pub homa_checksum_rx: bool,

    /// Bytes sent before the first grant (`unsched_bytes`).
    pub unsched_bytes: u32,
    /// Fixed grant window in bytes; 0 = dynamic `max_incoming / (N + 1)`.
    pub window: u32,
    /// Cap on granted-but-not-received bytes over all messages.
    pub max_incoming: u32,
    /// Most messages granted to at once (at most 8).
    pub max_overcommit: u8,
    /// Bytes given by one FIFO grant to the oldest message.
    pub fifo_grant_increment: u32,
    /// Share of grants given FIFO, in thousandths (capped at 500).
    pub grant_fifo_fraction: u32,
    /// Share of pacer picks given to the oldest message, in thousandths.
    pub pacer_fifo_fraction: u32,
    /// Priority levels used (1..=8).
    pub num_priorities: u8,
    /// Unscheduled cutoffs announced to senders: entry i is the largest
    /// message length that uses priority i for its unscheduled bytes.
    pub unsched_cutoffs: [u32; NUM_PRIORITIES],
    /// Version of `unsched_cutoffs` echoed by senders.
    pub cutoff_version: u16,
    /// Most the pacer lets the estimated NIC queue grow for long messages.
    pub max_nic_est_backlog: Duration,
    /// Messages with at most this many bytes left bypass the NIC-queue check.
    pub defer_min_bytes: u32,
    /// Silent ticks before the first RESEND.
    pub resend_ticks: u32,
    /// Ticks between RESENDs.
    pub resend_interval: u32,
    /// Silent ticks before an RPC is aborted: a client RPC fails, a server
    /// RPC is freed, whatever it was waiting for. A client's RESENDs reset
    /// a server RPC's silence for at most
    /// [`RESEND_LIFE_TIMEOUTS`](crate::endpoint::RESEND_LIFE_TIMEOUTS) of
    /// these without progress.
    pub timeout_ticks: u32,
    /// Ticks after a response left before the server asks for an ACK.
    pub request_ack_ticks: u32,
    /// How long a peer's link address stays reachable after the peer's own
    /// checked packets last confirmed it (Linux's `base_reachable_time`,
    /// 30 s). A reachable address is never probed for an RPC's silence
    /// (a slow peer is no reason to doubt it); once unconfirmed this long,
    /// a silent RPC probes it, at most once per this interval while the
    /// probes are answered.
    pub reachable_time: Duration,
    /// Length of one timer tick (1 ms in Linux).
    pub tick: Duration,
    /// Most frames taken from the device in one `poll`.
    pub max_rx_per_poll: usize,
    /// Most frames sent in one `poll`.
    pub max_tx_per_poll: usize,
    /// The share of the RPC table, and of the message pool, one peer's
    /// server RPCs may keep while another peer's request finds the table
    /// or the pool full, in thousandths (1..=1000; default 250, a quarter).
    /// Shares are counted by address, and by prefix (see
    /// [`share_prefix_v4`](Self::share_prefix_v4)): the addresses of one
    /// prefix together have one share.
    ///
    /// A peer alone may use the whole table and pool: the share bites only
    /// when a new request finds no free slot, or its message no free pages.
    /// Then a server RPC whose response went out whole and waits only for
    /// its ACK is freed for it first, the oldest (its client, if the
    /// response was lost, finds the RPC gone with its RESEND and starts it
    /// again, as Homa intends). Failing that, if the request leaves its
    /// address and prefix within their share, the oldest server RPC the
    /// application does not hold of the prefix holding the largest share
    /// (of the table or of the pool, whichever is larger) is freed, if
    /// that prefix holds more than the request's own would (within the
    /// request's own prefix: of an address holding more than the request's
    /// would): a source flooding requests, from one address or many of a
    /// prefix, slows itself, not its neighbours. 1000 never frees one for
    /// the share.
    pub peer_share: u16,
    /// The bits of an IPv4 address that name its prefix for the shares
    /// (default 24; 32 counts by address alone, and more is taken as 32).
    pub share_prefix_v4: u8,
    /// The bits of an IPv6 address that name its prefix for the shares
    /// (default 64; 128 counts by address alone, and more is taken as 128).
    pub share_prefix_v6: u8,
    /// Share the host's addresses with another stack (default `false`).
    ///
    /// When `true` the endpoint answers neither ARP requests nor ICMP echo
    /// requests: the other stack, which owns the same IP and MAC address,
    /// answers them (e.g. smoltcp beside homa-stack on one NIC through
    /// `homa_phy::share`). The endpoint still learns its peers' link
    /// addresses from every ARP packet it sees and still sends its own ARP
    /// requests.
    pub passive_host: bool,
}

impl Config {
    /// A configuration with the Linux defaults for the given addresses and
    /// a secret `random_seed`.
    ///
    /// The seed keys the hash of the index that finds an RPC from a packet's
    /// (address, id). Peers choose ids: one that knows the key can choose
    /// ids that all land in one bucket and make every packet walk the whole
    /// table. It must be unpredictable to peers and differ between hosts
    /// and boots, with as many of its 64 bits random as the platform allows:
    /// - on a host, from the operating system (`getrandom`);
    /// - on a microcontroller, from a hardware random number generator
    ///   (most Cortex-M parts with Ethernet have one), or failing that a
    ///   unique device id (a factory serial number, not the MAC, which
    ///   peers see) mixed with a boot counter kept in flash, so no two
    ///   boots share a seed.
    ///
    /// Nothing a peer can see is derived from it but through a one-way step
    /// (the first client id), so it does not leak. A constant seed (tests,
    /// deterministic simulations) is fine where no peer is hostile.
    pub const fn new(
        ipv4_addr: Ipv4Addr,
        ethernet_addr: EthernetAddress,
        random_seed: u64,
    ) -> Config {
        Config {
            ipv4_addr,
            ipv6: false,
            ipv6_link_local: None,
            ipv6_addrs: [None; MAX_IPV6_ADDRS],
            ethernet_addr,
            mtu: 1500,
            random_seed,
            link_mbps: 25_000,
            priority_encoding: PriorityEncoding::Tos,
            homa_checksum_tx: true,
            homa_checksum_rx: false,
            unsched_bytes: 40_000,
            window: 0,
            max_incoming: 400_000,
            max_overcommit: 8,
            fifo_grant_increment: 50_000,
            grant_fifo_fraction: 50,
            pacer_fifo_fraction: 50,
            num_priorities: 8,
            unsched_cutoffs: [0, 0, 0, 0, 1_000_000, 15_000, 2_800, 200],
            cutoff_version: 1,
            max_nic_est_backlog: Duration::from_micros(5),
            defer_min_bytes: 1000,
            resend_ticks: 5,
            resend_interval: 5,
            timeout_ticks: 100,
            request_ack_ticks: 2,
            reachable_time: Duration::from_secs(30),
            tick: Duration::from_millis(1),
            max_rx_per_poll: 64,
            max_tx_per_poll: 64,
            peer_share: 250,
            share_prefix_v4: 24,
            share_prefix_v6: 64,
            passive_host: false,
        }
    }

    /// The prefix of `addr` its shares are counted in: its first
    /// `share_prefix_v4` (IPv4) or `share_prefix_v6` (IPv6) bits, the rest
    /// zero.
    #[cfg_attr(target_os = "none", inline(never))]
    pub fn share_prefix(&self, addr: IpAddr) -> IpAddr {
        /// The mask of the first `len` of `bits` bits.
        fn mask(len: u8, bits: u32) -> u128 {
            u128::MAX
                .checked_shl(bits.saturating_sub(u32::from(len)))
                .unwrap_or(0)
        }
        match addr {
            IpAddr::V4(a) => {
                let bits = a.to_bits() & mask(self.share_prefix_v4, 32) as u32;
                IpAddr::V4(Ipv4Addr::from_bits(bits))
            }
            // Without IPv6 the endpoint has no IPv6 peer.
            #[cfg(feature = "ipv6")]
            IpAddr::V6(a) => IpAddr::V6(Ipv6Addr::from_bits(
                a.to_bits() & mask(self.share_prefix_v6, 128),
            )),
            #[cfg(not(feature = "ipv6"))]
            IpAddr::V6(_) => addr,
        }
    }

    /// The IPv6 link-local address in use: configured, or derived from the
    /// Ethernet address by EUI-64 (`fe80::` + the MAC with `ff:fe` in the
    /// middle and the universal/local bit flipped). `None` without IPv6.
    pub const fn link_local_v6(&self) -> Option<Ipv6Addr> {
        if !self.ipv6 {
            return None;
        }
        if let Some(a) = self.ipv6_link_local {
            return Some(a);
        }
        let m = self.ethernet_addr.0;
        Some(Ipv6Addr::new(
            0xfe80,
            0,
            0,
            0,
            u16::from_be_bytes([m[0] ^ 0x02, m[1]]),
            u16::from_be_bytes([m[2], 0xff]),
            u16::from_be_bytes([0xfe, m[3]]),
            u16::from_be_bytes([m[4], m[5]]),
        ))
    }

    /// Whether `addr` is one of this endpoint's IPv6 addresses.
    pub fn has_ipv6_addr(&self, addr: Ipv6Addr) -> bool {
        self.ipv6 && (self.link_local_v6() == Some(addr) || self.ipv6_addrs.contains(&Some(addr)))
    }

    /// The source address for IPv6 packets to `dst`: the link-local address
    /// for a link-local destination, else the first of `ipv6_addrs` (the
    /// link-local one when there is none). `None` without IPv6.
    pub fn ipv6_src_for(&self, dst: Ipv6Addr) -> Option<Ipv6Addr> {
        let ll = self.link_local_v6()?;
        if dst.is_unicast_link_local() {
            return Some(ll);
        }
        Some(
            self.ipv6_addrs
                .iter()
                .flatten()
                .next()
                .copied()
                .unwrap_or(ll),
        )
    }

    /// Whether this endpoint can reach `addr`'s family.
    pub fn speaks(&self, addr: IpAddr) -> bool {
        match addr {
            IpAddr::V4(_) => !self.ipv4_addr.is_unspecified(),
            IpAddr::V6(_) => cfg!(feature = "ipv6") && self.ipv6,
        }
    }

    /// Highest priority used for scheduled packets: one below the highest
    /// level whose cutoff reaches the largest message (Linux `max_sched_prio`).
    pub fn max_sched_prio(&self) -> u8 {
        let n = usize::from(self.num_priorities.clamp(1, NUM_PRIORITIES as u8));
        for i in (0..n).rev() {
            if self.unsched_cutoffs[i] >= crate::wire::homa::MAX_MESSAGE_LENGTH {
                return i.saturating_sub(1) as u8;
            }
        }
        0
    }

    /// The cutoffs as announced on the wire: entry 0 forced to `i32::MAX` as
    /// Linux does when they are set.
    pub fn announced_cutoffs(&self) -> [u32; NUM_PRIORITIES] {
        let mut c = self.unsched_cutoffs;
        c[0] = i32::MAX as u32;
        c
    }

    /// Highest priority level (control packets use it).
    pub fn highest_priority(&self) -> u8 {
        self.num_priorities.clamp(1, NUM_PRIORITIES as u8) - 1
    }

    /// Checks that the values make sense together.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=NUM_PRIORITIES as u8).contains(&self.num_priorities) {
            return Err(ConfigError::Priorities);
        }
        if self.max_overcommit == 0 || self.max_overcommit > 8 {
            return Err(ConfigError::Overcommit);
        }
        if self.mtu < 20 + crate::wire::homa::DATA_HEADER_LEN + 1 || self.mtu > 65_535 {
            return Err(ConfigError::Mtu);
        }
        if self.tick == Duration::ZERO || self.link_mbps == 0 {
            return Err(ConfigError::Timing);
        }
        if self.resend_interval == 0 {
            return Err(ConfigError::Timing);
        }
        if !(1..=1000).contains(&self.peer_share) {
            return Err(ConfigError::PeerShare);
        }
        Ok(())
    }
}

/// A configuration value out of range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ConfigError {
    /// `num_priorities` not in 1..=8.
    Priorities,
    /// `max_overcommit` not in 1..=8.
    Overcommit,
    /// MTU too small for one byte of DATA, or over 65535.
    Mtu,
    /// A zero tick, resend interval or link rate.
    Timing,
    /// `peer_share` not in 1..=1000.
    PeerShare,
}

impl core::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            ConfigError::Priorities => "num_priorities must be 1..=8",
            ConfigError::Overcommit => "max_overcommit must be 1..=8",
            ConfigError::Mtu => "MTU must leave room for a DATA header and at most 65535",
            ConfigError::Timing => "tick, resend_interval and link_mbps must be non-zero",
            ConfigError::PeerShare => "peer_share must be 1..=1000",
        })
    }
}

impl core::error::Error for ConfigError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_prefixes_keep_their_first_bits() {
        let mut c = Config::new(Ipv4Addr::new(10, 0, 0, 1), EthernetAddress([2; 6]), 0);
        let v4 = |a, b, c, d| IpAddr::V4(Ipv4Addr::new(a, b, c, d));
        let v6 = IpAddr::V6(Ipv6Addr::new(0xfd00, 1, 2, 0x3456, 7, 8, 9, 10));
        // Without IPv6 no IPv6 address is a peer's: it is kept whole.
        let v6_prefix = |a, b, c, d| {
            let p = IpAddr::V6(Ipv6Addr::new(a, b, c, d, 0, 0, 0, 0));
            if cfg!(feature = "ipv6") {
                p
            } else {
                v6
            }
        };
        assert_eq!(c.share_prefix(v4(10, 1, 2, 77)), v4(10, 1, 2, 0));
        assert_eq!(c.share_prefix(v6), v6_prefix(0xfd00, 1, 2, 0x3456));
        (c.share_prefix_v4, c.share_prefix_v6) = (20, 52);
        assert_eq!(c.share_prefix(v4(10, 1, 0x3f, 77)), v4(10, 1, 0x30, 0));
        assert_eq!(c.share_prefix(v6), v6_prefix(0xfd00, 1, 2, 0x3000));
        (c.share_prefix_v4, c.share_prefix_v6) = (0, 0);
        assert_eq!(c.share_prefix(v4(10, 1, 2, 77)), v4(0, 0, 0, 0));
        for (v4_len, v6_len) in [(32, 128), (33, 200), (255, 255)] {
            (c.share_prefix_v4, c.share_prefix_v6) = (v4_len, v6_len);
            assert_eq!(c.share_prefix(v4(10, 1, 2, 77)), v4(10, 1, 2, 77));
            assert_eq!(c.share_prefix(v6), v6);
        }
    }

    #[test]
    fn linux_defaults_give_max_sched_prio_3() {
        let c = Config::new(
            Ipv4Addr::new(10, 0, 0, 1),
            EthernetAddress([2, 0, 0, 0, 0, 1]),
            1,
        );
        assert_eq!(c.max_sched_prio(), 3);
        assert_eq!(c.highest_priority(), 7);
        assert!(c.validate().is_ok());
    }

    #[test]
    fn w4_preset_cutoffs_give_max_sched_prio_6() {
        let mut c = Config::new(
            Ipv4Addr::new(10, 0, 0, 1),
            EthernetAddress([2, 0, 0, 0, 0, 1]),
            1,
        );
        c.unsched_cutoffs = [
            1_000_000, 1_000_000, 1_000_000, 1_000_000, 1_000_000, 1_000_000, 1_000_000, 68_608,
        ];
        assert_eq!(c.max_sched_prio(), 5);
    }
}
