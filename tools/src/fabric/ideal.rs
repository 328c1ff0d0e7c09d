//! The ideal one-way time of a message in an empty fabric, the denominator of
//! the slowdown metric (`docs/benchmarks.md` section 1).
//!
//! The frames are all handed to the source host at time zero. They follow the
//! fabric's own model hop by hop: the send delay, FIFO serialisation on each
//! link a whole message shares (the source NIC link, the destination's ToR
//! port), a switch delay before every switch egress, propagation, and the
//! receive delay. The result is when the last frame becomes visible.
//!
//! For frames of non-increasing size (a message cut at the MTU) this comes to:
//! every frame serialised once at the host link rate, plus the first frame's
//! store-and-forward on each other link, plus the switch and host delays.
//!
//! Across racks with several uplinks each frame is sprayed on its own, so on
//! the two fabric links frames are modelled as never waiting for each other:
//! the best case. It is what the fabric does unless two frames of a message
//! pick the same uplink *and* the later one is much shorter (under a third of
//! the earlier, e.g. a short tail after one full frame), in which case the
//! real run can be slower by at most the tail's serialisation on a host link.
//! So the ideal is a lower bound that is exact in every other case.

use super::config::Config;
use super::timing::serialisation_time;
use super::topology::Layout;
use homa_phy::time::Duration;

pub(crate) fn ideal_time(
    cfg: &Config,
    layout: &Layout,
    src: usize,
    dst: usize,
    frames: &[usize],
) -> Duration {
    if frames.is_empty() {
        return Duration::ZERO;
    }
    let prop = cfg.propagation_delay.total_nanos();
    let switch_delay = cfg.switch_delay.total_nanos();
    // When each frame is ready to join the queue of the current hop.
    let mut ready = vec![cfg.host_send_delay.total_nanos(); frames.len()];
    let mut order: Vec<usize> = (0..frames.len()).collect();
    for (k, hop) in layout.path(cfg, src, dst).iter().enumerate() {
        if k > 0 {
            ready.iter_mut().for_each(|t| *t += switch_delay);
        }
        let ser = |i: usize| serialisation_time(frames[i], hop.rate_mbps).total_nanos();
        if hop.shared {
            // One FIFO: serve in order of readiness; a stable sort keeps
            // message order among frames ready at the same instant.
            order.sort_by_key(|&i| ready[i]);
            let mut free = 0;
            for &i in &order {
                free = ready[i].max(free) + ser(i);
                ready[i] = free;
            }
        } else {
            for (i, t) in ready.iter_mut().enumerate() {
                *t += ser(i);
            }
        }
        ready.iter_mut().for_each(|t| *t += prop);
    }
    let last = ready.into_iter().max().unwrap_or(0);
    Duration::from_nanos(last) + cfg.host_rx_delay
}

/// A message of `bytes` frame bytes cut into frames of `mtu` and a remainder.
pub(crate) fn split(bytes: usize, mtu: usize) -> Vec<usize> {
    let mut frames = vec![mtu; bytes / mtu];
    if bytes % mtu != 0 {
        frames.push(bytes % mtu);
    }
    frames
}

#[cfg(test)]
mod tests {
    use super::super::config::Topology;
    use super::*;

    fn ideal(topology: Topology, src: usize, dst: usize, frames: &[usize]) -> u64 {
        let cfg = Config::new(topology);
        let layout = Layout::new(topology).unwrap();
        ideal_time(&cfg, &layout, src, dst, frames).total_nanos()
    }

    #[test]
    fn single_frame_by_hand() {
        // 1514 B: 1231 ns at 10 Gbps, 308 ns at 40 Gbps.
        let rack = Topology::Rack { hosts: 16 };
        assert_eq!(ideal(rack, 0, 1, &[1514]), 500 + 1231 + 250 + 1231 + 500);
        let far = 500 + 1231 + 250 + 308 + 250 + 308 + 250 + 1231 + 500;
        assert_eq!(ideal(Topology::Paper, 0, 100, &[1514]), far);
        assert_eq!(ideal(Topology::Paper, 0, 15, &[1514]), 3712);
    }

    #[test]
    fn closed_form_for_an_mtu_split_message() {
        // All frames at the host rate once, plus the first frame's
        // store-and-forward on every other link, plus delays.
        let frames = split(10_000, 1514);
        assert_eq!(frames, [1514, 1514, 1514, 1514, 1514, 1514, 916]);
        let all: u64 = frames
            .iter()
            .map(|&f| serialisation_time(f, 10_000).total_nanos())
            .sum();
        let rack = Topology::Rack { hosts: 16 };
        assert_eq!(ideal(rack, 3, 4, &frames), 500 + 1231 + 250 + all + 500);
        assert_eq!(
            ideal(Topology::Paper, 3, 40, &frames),
            500 + 1231 + 250 + 308 + 250 + 308 + 250 + all + 500
        );
    }

    #[test]
    fn no_frames_take_no_time() {
        assert_eq!(ideal(Topology::Paper, 0, 1, &[]), 0);
        assert!(split(0, 1514).is_empty());
    }
}
