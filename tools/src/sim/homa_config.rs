//! Homa's settings for a workload and topology, as the paper chose them:
//! scheduled priority levels and overcommitment per workload, unscheduled
//! cutoffs that split the unscheduled bytes evenly over the unscheduled
//! levels, and one round trip of unscheduled bytes.

use crate::fabric::Fabric;
use homa_stack::config::{PriorityEncoding, NUM_PRIORITIES};
use homa_stack::time::Duration;
use homa_stack::wire::homa::MAX_MESSAGE_LENGTH;
use homa_stack::wire::{EthernetAddress, Ipv4Addr, Ipv6Addr};
use homa_stack::Config;

use super::packets::Packetiser;
use super::workload::Workload;

/// The paper's scheduled levels (= degree of overcommitment) for W1..W5.
pub fn paper_sched_levels(workload: &str) -> Option<u8> {
    match workload.to_ascii_lowercase().as_str() {
        "w1" => Some(1),
        "w2" => Some(3),
        "w3" => Some(4),
        "w4" | "w5" => Some(7),
        _ => None,
    }
}

/// Scheduled levels for any other workload: the unscheduled levels get the
/// share of the 8 that unscheduled bytes have of all bytes (at least 1,
/// at most 7), the rest are scheduled.
pub fn sched_levels_for(w: &Workload, unsched_bytes: u32) -> u8 {
    let unsched = w.expect(|s| f64::from(s.min(unsched_bytes)));
    let share = unsched / w.mean().max(1.0);
    let levels = (share * NUM_PRIORITIES as f64).round().clamp(1.0, 7.0) as u8;
    NUM_PRIORITIES as u8 - levels
}

/// Unscheduled bytes covering one round trip between the farthest hosts:
/// a full DATA frame out, a minimum-size GRANT back, in whole DATA packets.
pub fn rtt_unsched_bytes(fabric: &Fabric, packets: &Packetiser) -> u32 {
    let mtu = fabric.config().mtu;
    let far = fabric.hosts() - 1;
    let rtt =
        fabric.ideal_one_way_frames(0, far, &[mtu]) + fabric.ideal_one_way_frames(far, 0, &[60]);
    let per_packet = crate::fabric::serialisation_time(mtu, fabric.config().host_link_mbps);
    let n = rtt.total_nanos().div_ceil(per_packet.total_nanos().max(1));
    (n as usize * packets.seg) as u32
}

/// Cutoffs for `sched` scheduled levels (0..sched) and `8 - sched`
/// unscheduled ones (sched..8, the highest for the shortest messages), each
/// unscheduled level carrying about the same share of unscheduled bytes.
/// Entry `sched` covers every length, which makes `sched - 1` the highest
/// scheduled priority.
pub fn cutoffs(w: &Workload, unsched_bytes: u32, sched: u8) -> [u32; NUM_PRIORITIES] {
    let sched = usize::from(sched.clamp(1, 7));
    let levels = NUM_PRIORITIES - sched;
    let mut c = [0u32; NUM_PRIORITIES];
    c[sched] = MAX_MESSAGE_LENGTH;
    let total = w.expect(|s| f64::from(s.min(unsched_bytes)));
    let mut cum = 0.0;
    let mut k = 1;
    for (s, p) in w.pmf() {
        cum += p * f64::from(s.min(unsched_bytes));
        while k < levels && cum >= total * k as f64 / levels as f64 - 1e-9 {
            // Level 7 for the first share, 6 for the next, ...
            c[NUM_PRIORITIES - k] = s.min(MAX_MESSAGE_LENGTH - 1);
            k += 1;
        }
    }
    c
}

/// Everything homa-sim sets in each endpoint's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HomaParams {
    /// Unscheduled bytes per message (`Config::unsched_bytes`), also the
    /// fixed grant window.
    pub unsched_bytes: u32,
    /// Most messages granted at once (`Config::max_overcommit`).
    pub overcommit: u8,
    /// Scheduled priority levels.
    pub sched_levels: u8,
    /// `Config::unsched_cutoffs`.
    pub cutoffs: [u32; NUM_PRIORITIES],
    /// How the sender and the FIFO shares are set.
    pub style: HomaStyle,
    /// Host link rate, Mbit/s.
    pub link_mbps: u32,
    /// Most the pacer lets the estimated NIC queue reach
    /// (`Config::max_nic_est_backlog`), ns.
    pub nic_backlog_ns: u64,
    /// Homa over IPv6 (each host's fabric IPv6 address) instead of IPv4.
    pub ipv6: bool,
}

/// Which Homa: the paper's, or homa-stack's Linux defaults for the sender
/// and the FIFO shares. Both use the per-workload cutoffs, overcommitment,
/// unscheduled bytes and grant window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HomaStyle {
    /// As the paper describes Homa: the sender sends every message in SRPT
    /// order and hands the NIC a packet only when it is (by the pacer's
    /// estimate) idle; no FIFO grants, no FIFO pacer picks.
    Paper,
    /// homa-stack's (= Linux's) defaults: messages of at most 1000 bytes
    /// bypass the pacer, the NIC queue may reach 5 us, 5% of grants and of
    /// pacer picks go to the oldest message.
    Linux,
}

impl HomaStyle {
    /// `paper` or `linux`.
    pub fn name(self) -> &'static str {
        match self {
            HomaStyle::Paper => "paper",
            HomaStyle::Linux => "linux",
        }
    }

    /// The NIC-queue limit of this style on `fabric`, ns.
    pub fn nic_backlog_ns(self) -> u64 {
        match self {
            HomaStyle::Paper => 0,
            HomaStyle::Linux => LINUX_NIC_BACKLOG_NS,
        }
    }
}

/// homa-stack's default `max_nic_est_backlog` (Linux's `max_nic_queue_ns`).
pub const LINUX_NIC_BACKLOG_NS: u64 = 5_000;

impl HomaParams {
    /// The endpoint configuration of one host with addresses `ip` and
    /// `ip6` (the latter enabled only with [`HomaParams::ipv6`]).
    pub fn config(&self, ip: [u8; 4], ip6: [u8; 16], mac: [u8; 6], seed: u64) -> Config {
        // The simulation repeats for a seed: the hash seed comes from it.
        let mut c = Config::new(Ipv4Addr::from(ip), EthernetAddress(mac), seed);
        if self.ipv6 {
            c.ipv6 = true;
            c.ipv6_addrs[0] = Some(Ipv6Addr::from(ip6));
        }
        c.link_mbps = self.link_mbps;
        c.priority_encoding = PriorityEncoding::Tos;
        c.unsched_bytes = self.unsched_bytes;
        // The paper keeps one round trip of bytes granted per active message.
        c.window = self.unsched_bytes;
        c.max_overcommit = self.overcommit;
        c.num_priorities = NUM_PRIORITIES as u8;
        c.unsched_cutoffs = self.cutoffs;
        c.max_nic_est_backlog = Duration::from_nanos(self.nic_backlog_ns);
        if self.style == HomaStyle::Paper {
            // Every message goes through the pacer, so the sender's order
            // is SRPT for all of them, not FIFO in the NIC for short ones.
            c.defer_min_bytes = 0;
            // The paper's Homa has no FIFO shares (Linux added them against
            // starvation; its FIFO grants go out at level 6, an unscheduled
            // level for most workloads here).
            c.grant_fifo_fraction = 0;
            c.pacer_fifo_fraction = 0;
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cutoffs_split_unscheduled_bytes_evenly() {
        // Four sizes, equally likely, all unscheduled.
        let w = Workload::parse("t", "100,0.25\n200,0.5\n300,0.75\n400,1\n").unwrap();
        let c = cutoffs(&w, 10_000, 4);
        assert_eq!(c[4], MAX_MESSAGE_LENGTH);
        // Unscheduled bytes 100+200+300+400 = 1000 (per 4 messages): the
        // cumulative sum first reaches 250 at 200, 500 at 300, 750 at 400.
        assert_eq!(&c[5..], &[400, 300, 200]);
        let mut cfg = Config::new(
            Ipv4Addr::new(10, 0, 0, 1),
            EthernetAddress([2, 0, 0, 0, 0, 1]),
            1,
        );
        cfg.unsched_cutoffs = c;
        assert_eq!(cfg.max_sched_prio(), 3);
    }

    #[test]
    fn one_unscheduled_level_covers_everything() {
        let w = Workload::load("w4").unwrap();
        let c = cutoffs(&w, 9_000, 7);
        assert_eq!(c, [0, 0, 0, 0, 0, 0, 0, MAX_MESSAGE_LENGTH]);
    }

    #[test]
    fn paper_levels_and_the_fallback_rule() {
        assert_eq!(paper_sched_levels("W2"), Some(3));
        assert_eq!(paper_sched_levels("x.csv"), None);
        // All bytes unscheduled: 7 unscheduled levels, 1 scheduled.
        let w = Workload::parse("t", "100,1\n").unwrap();
        assert_eq!(sched_levels_for(&w, 10_000), 1);
    }
}
