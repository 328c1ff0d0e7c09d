//! The baselines as their papers' simulations set them: the ns-2 scripts
//! the Homa paper ran PIAS, DCTCP and pFabric with (PlatformLab's
//! HomaSimulation, `ns2_Simulations/scripts`), on the same 144-host fabric.
//!
//! | | pias | dctcp | tcp-mc | pfabric |
//! |---|---|---|---|---|
//! | sender | DCTCP, SACK | DCTCP, SACK | SACK | SACK at line rate |
//! | initial / largest window (segments) | 7 / 249 | 7 / 249 | 7 / 249 | 12 / 12 |
//! | retransmission timeout | 200 us fixed | 200 us fixed | RFC 6298, 200 us floor | 24 us fixed, probes after 5 |
//! | ports (switches and host uplinks) | 8 strict priorities, ECN at K | one FIFO, ECN at K | one FIFO | pFabric, 13 packets |
//!
//! DCTCP's gain is 1/16 and K is 15 full packets per port; acknowledgements
//! go for every segment; every message takes an idle connection of its
//! host pair or opens another (the scripts' pools start at 10 and grow the
//! same way), so none waits for a connection or pays a handshake. The
//! scripts' drop-tail buffers are 150 packets for W1 to W3 and 250 for W4
//! and W5; here every protocol but pFabric has the same buffer
//! (`--switch-buffer`, 250 frames).

use crate::fabric::Config as FabricConfig;

use super::tcp_model::{Rto, TcpParams};
use super::workload::Workload;

/// A transport to measure (the baselines' settings: this module).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// homa-stack endpoints.
    Homa,
    /// PIAS: DCTCP senders, priorities by bytes sent, on strict-priority
    /// queues at every port, host uplinks included.
    Pias,
    /// DCTCP: ECN marking at every port, one queue.
    Dctcp,
    /// TCP with SACK over drop-tail queues, a connection pool per pair.
    TcpMc,
    /// pFabric, the near-ideal reference: line-rate senders, ports that
    /// serve the fewest bytes left first.
    Pfabric,
}

impl Protocol {
    /// Every protocol, in the order `homa-sim` runs them by default.
    pub const ALL: [Protocol; 5] = [
        Protocol::Homa,
        Protocol::Pias,
        Protocol::Dctcp,
        Protocol::TcpMc,
        Protocol::Pfabric,
    ];

    /// Lower-case name, as in `--protocols`.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Homa => "homa",
            Protocol::Pias => "pias",
            Protocol::Dctcp => "dctcp",
            Protocol::TcpMc => "tcp-mc",
            Protocol::Pfabric => "pfabric",
        }
    }

    /// Whether it is a baseline Homa is compared with (pFabric is the
    /// reference instead: it needs switches no datacenter has).
    pub fn is_baseline(self) -> bool {
        !matches!(self, Protocol::Homa | Protocol::Pfabric)
    }
}

/// DCTCP's marking threshold K in full-size packets, the scripts' value
/// for PIAS and DCTCP.
pub const ECN_K: usize = 15;

/// A full-size frame, bytes (what K and pFabric's buffer count in).
const FULL_FRAME: usize = 1514;

/// pFabric's port buffer in full-size packets: two round trips of the
/// fabric, as the pFabric paper sizes it (36 KB for its 14.6 us round
/// trip; the scripts' 13 packets for this fabric's 7.7 us).
pub const PFABRIC_BUFFER: usize = 13;

/// The minimum (and, for PIAS and DCTCP, fixed) retransmission timeout of
/// the TCP baselines, ns.
pub const TCP_RTO_NS: u64 = 200_000;

/// pFabric's retransmission timeout, ns: about three round trips.
pub const PFABRIC_RTO_NS: u64 = 24_000;

/// The sender settings of a TCP baseline; `None` for Homa.
pub fn tcp_params(p: Protocol) -> Option<TcpParams> {
    let dctcp = TcpParams {
        init_window: 7,
        max_window: 249,
        ecn: true,
        dctcp_g: 1.0 / 16.0,
        rto: Rto::Fixed(TCP_RTO_NS),
        probe_after: None,
    };
    match p {
        Protocol::Homa => None,
        Protocol::Pias | Protocol::Dctcp => Some(dctcp),
        Protocol::TcpMc => Some(TcpParams {
            ecn: false,
            rto: Rto::Estimated { min: TCP_RTO_NS },
            ..dctcp
        }),
        Protocol::Pfabric => Some(TcpParams {
            init_window: 12,
            max_window: 12,
            ecn: false,
            rto: Rto::Fixed(PFABRIC_RTO_NS),
            probe_after: Some(5),
            ..dctcp
        }),
    }
}

/// Sets the ports a protocol runs on: the baselines' host uplinks get the
/// switch ports' queues (for PIAS its strict priorities), DCTCP and PIAS
/// mark at `ecn_k` packets, pFabric has its own scheduling and buffer.
pub fn ports(c: &mut FabricConfig, p: Protocol, ecn_k: usize) {
    if p == Protocol::Homa {
        return;
    }
    c.nic_like_switch = true;
    match p {
        Protocol::Pias => {
            c.nic_priority_queues = true;
            c.ecn_threshold_bytes = Some(ecn_k * FULL_FRAME);
        }
        Protocol::Dctcp => c.ecn_threshold_bytes = Some(ecn_k * FULL_FRAME),
        Protocol::Pfabric => {
            c.pfabric = true;
            c.switch_buffer_frames = None;
            c.switch_buffer_bytes = Some(PFABRIC_BUFFER * FULL_FRAME);
        }
        _ => {}
    }
}

/// Where PIAS's demotion thresholds come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PiasSource {
    /// The scripts' values for W1 to W5 (at load 0.5 or 0.8, the nearer).
    Paper,
    /// The rule for any workload: equal shares of bytes per priority.
    EqualBytes,
}

impl PiasSource {
    /// Its name in the output.
    pub fn name(self) -> &'static str {
        match self {
            PiasSource::Paper => "the paper's scripts",
            PiasSource::EqualBytes => "equal bytes per priority",
        }
    }
}

/// The thresholds (bytes a message has sent, ascending: up to the first
/// is the top priority) the scripts gave PIAS for W1 to W5 at load 0.8,
/// from PIAS's own optimisation for each workload (W5's were set in
/// 1,460-byte packets: 909 to 2,484).
const AT_LOAD_80: [[u32; 7]; 5] = [
    [183, 259, 287, 314, 332, 352, 367],
    [368, 410, 422, 435, 442, 451, 457],
    [436, 554, 633, 720, 784, 865, 939],
    [38210, 48958, 50905, 68384, 73799, 76588, 78129],
    [
        1327140, 1940340, 2406080, 2861600, 3128780, 3412020, 3626640,
    ],
];

/// The same at load 0.5 (W5: 1,059 to 2,184 packets).
const AT_LOAD_50: [[u32; 7]; 5] = [
    [207, 268, 287, 306, 318, 329, 336],
    [382, 414, 422, 431, 437, 441, 444],
    [466, 579, 631, 693, 736, 774, 799],
    [43898, 49621, 50878, 64461, 70549, 73131, 74788],
    [
        1546140, 2061520, 2398780, 2728740, 2931680, 3087900, 3188640,
    ],
];

/// The scripts' thresholds for workload `name` at `load` (the nearer of
/// 0.5 and 0.8), if it is one of W1 to W5.
pub fn paper_thresholds(name: &str, load: f64) -> Option<[u32; 7]> {
    let w = ["w1", "w2", "w3", "w4", "w5"]
        .iter()
        .position(|w| name.eq_ignore_ascii_case(w))?;
    Some(if load < 0.65 {
        AT_LOAD_50[w]
    } else {
        AT_LOAD_80[w]
    })
}

/// The equal-bytes rule: the bytes-sent boundaries that give each of the 8
/// priorities an equal share of the workload's bytes.
pub fn equal_bytes_thresholds(w: &Workload) -> [u32; 7] {
    let total = w.expect(f64::from);
    let mut t = [0u32; 7];
    for (k, slot) in t.iter_mut().enumerate() {
        let target = total * (k + 1) as f64 / 8.0;
        // E[min(S, a)] grows with a: bisect on it.
        let (mut lo, mut hi) = (1u32, w.sizes.last().copied().unwrap_or(1).max(1));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if w.expect(|s| f64::from(s.min(mid))) >= target {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        *slot = lo;
    }
    t
}

/// PIAS's priority (7 the top) of a segment whose message has sent `sent`
/// bytes before it: one level down for each threshold below `sent`.
pub fn pias_priority(thresholds: &[u32; 7], sent: u64) -> u8 {
    7 - thresholds.iter().filter(|&&t| u64::from(t) < sent).count() as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pias_demotes_past_each_threshold() {
        let t = [1_000, 2_000, 3_000, 4_000, 5_000, 6_000, 7_000];
        assert_eq!(pias_priority(&t, 0), 7);
        assert_eq!(pias_priority(&t, 1_000), 7);
        assert_eq!(pias_priority(&t, 1_001), 6);
        assert_eq!(pias_priority(&t, 9_999_999), 0);
        assert_eq!(paper_thresholds("W4", 0.8).unwrap()[0], 38_210);
        assert_eq!(paper_thresholds("w4", 0.5).unwrap()[0], 43_898);
        assert_eq!(paper_thresholds("mine.csv", 0.8), None);
        let w = Workload::load("w4").unwrap().capped(1_000_000);
        let e = equal_bytes_thresholds(&w);
        assert!(e.windows(2).all(|p| p[0] <= p[1]), "{e:?}");
    }
}
