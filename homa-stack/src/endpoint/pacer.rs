//! The sender's transmit order and NIC-queue estimate (docs/protocol.md 4.6).
//!
//! Homa keeps the NIC queue short so that a short message handed over later
//! does not wait behind a long one already queued: `link_idle` estimates when
//! the NIC will have drained everything given to it (at the link rate
//! under-estimated by 1%), and a packet of a message with more than
//! `defer_min_bytes` left is held back while that estimate is more than
//! `max_nic_est_backlog` ahead of now. Held-back messages go in SRPT order
//! (fewest bytes left to send first), except that every
//! `1000 / pacer_fifo_fraction`-th pick goes to the oldest message so a long
//! message is never starved. Messages with at most `defer_min_bytes` left
//! are never held back: they go first, in the order they became ready, as
//! Linux sends them from `sendmsg`.

use super::timers::Timer;
use crate::time::{Duration, Instant};

/// Bytes a frame occupies on the wire beyond the frame itself: preamble and
/// start delimiter (8), FCS (4) and inter-frame gap (12), Linux's
/// `HOMA_ETH_FRAME_OVERHEAD`.
pub const ETH_FRAME_OVERHEAD: usize = 24;

/// The NIC-queue estimate and the FIFO pick counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pacer {
    /// When the NIC is estimated to have sent everything handed to it.
    link_idle: Instant,
    /// Picoseconds per wire byte at 99% of the link rate, split into whole
    /// nanoseconds and the remaining picoseconds (below 1000), so
    /// [`Pacer::wire_time`] needs no 64-bit division: on a 32-bit MCU that
    /// is a library routine of about a kilobyte.
    ns_per_byte: u32,
    /// See `ns_per_byte`.
    ps_rest: u32,
    /// Picks since the last FIFO pick.
    picks: u32,
}

impl Pacer {
    /// A pacer for a link of `link_mbps` Mbit/s.
    pub fn new(link_mbps: u32) -> Pacer {
        let mut p = Pacer {
            link_idle: Instant::ZERO,
            ns_per_byte: 0,
            ps_rest: 0,
            picks: 0,
        };
        p.set_rate(link_mbps);
        p
    }

    /// Changes the link rate (e.g. when the device reports its own).
    pub fn set_rate(&mut self, link_mbps: u32) {
        // 8 bits per byte at 0.99 * mbps Mbit/s: 8e6 / (0.99 * mbps) ps,
        // in 32 bits: a divisor past u32::MAX is past the dividend (0 ps).
        let ps = 99u32
            .checked_mul(link_mbps.max(1))
            .map_or(0, |d| 800_000_000 / d);
        self.ns_per_byte = ps / 1000;
        self.ps_rest = ps % 1000;
    }

    /// Time the link needs for a frame of `frame_len` bytes.
    pub fn wire_time(&self, frame_len: usize) -> Duration {
        let bytes = frame_len + ETH_FRAME_OVERHEAD;
        // bytes * ps / 1000, rounded down, with ps = 1000 * ns + rest and
        // bytes = 1000 * hi + lo: bytes * ns + hi * rest + lo * rest / 1000
        // (lo * rest < 10^6), with no 64-bit division.
        let (hi, lo) = (bytes / 1000, (bytes % 1000) as u32);
        let nanos = bytes as u64 * u64::from(self.ns_per_byte)
            + hi as u64 * u64::from(self.ps_rest)
            + u64::from(lo * self.ps_rest / 1000);
        Duration::from_nanos(nanos)
    }

    /// How far ahead of `now` the estimated NIC queue reaches.
    pub fn backlog(&self, now: Instant) -> Duration {
        self.link_idle - now
    }

    /// Whether a packet of a message with `bytes_left` to send may go now.
    /// Short messages always may (retransmissions do not ask).
    pub fn may_send(
        &self,
        now: Instant,
        bytes_left: u32,
        defer_min_bytes: u32,
        max_backlog: Duration,
    ) -> bool {
        bytes_left <= defer_min_bytes || self.backlog(now) <= max_backlog
    }

    /// When a held-back long message may go again.
    pub fn next_slot(&self, max_backlog: Duration) -> Instant {
        self.link_idle - max_backlog
    }

    /// Records a frame of `frame_len` bytes handed to the NIC at `now`.
    pub fn on_transmit(&mut self, now: Instant, frame_len: usize) {
        let start = if self.link_idle > now {
            self.link_idle
        } else {
            now
        };
        self.link_idle = start + self.wire_time(frame_len);
    }

    /// The clock went back to `now`: a NIC queue estimated to drain in the
    /// future the clock left drains now.
    pub fn rebase(&mut self, now: Instant) {
        self.link_idle = self.link_idle.min(now);
    }

    /// Whether this pick should go to the oldest message instead of the
    /// shortest: true once every `1000 / fifo_fraction` picks.
    pub fn fifo_turn(&mut self, fifo_fraction: u32) -> bool {
        if fifo_fraction == 0 {
            return false;
        }
        let period = (1000 / fifo_fraction.min(1000)).max(1);
        self.picks += 1;
        if self.picks >= period {
            self.picks = 0;
            true
        } else {
            false
        }
    }
}

/// A DATA packet chosen by the pacer.
pub(super) struct DataPick {
    pub(super) slot: usize,
    pub(super) start: u32,
    pub(super) end: u32,
    pub(super) priority: u8,
    pub(super) retransmit: bool,
}

/// The sender's pick of the next DATA packet.
impl<'a> super::Endpoint<'a> {
    /// Chooses the next DATA packet: a pending retransmission first; on a
    /// FIFO turn the oldest message with more than `defer_min_bytes` left;
    /// then the short message that has waited longest (never held back);
    /// else the message with the fewest bytes left, if the NIC-queue
    /// estimate lets it go. All are the fronts of heaps or of a list
    /// (`queues`): O(1) here, O(log n) when the pick's RPC is refreshed.
    pub(super) fn pick_data(&mut self, now: Instant, fifo_turn: bool) -> Option<DataPick> {
        let best = self.send.peek(&self.rpcs[..]).map(usize::from);
        if let Some(best) = best.filter(|&b| {
            self.rpc_at(b)
                .and_then(|r| r.outgoing())
                .is_some_and(|o| o.has_resend())
        }) {
            return self.resend_pick(best);
        }
        let oldest = self
            .send_fifo
            .peek(&self.rpcs[..])
            .map(usize::from)
            .filter(|&o| fifo_turn && Some(o) != best);
        let short = self.send_short.front().map(usize::from);
        // The candidates in order, without an iterator chain's branches.
        let (mut order, mut n) = ([0usize; 3], 0);
        for slot in [oldest, short, best] {
            let Some(s) = slot else { continue };
            order[n] = s;
            n += 1;
        }
        for &slot in &order[..n] {
            if let Some(p) = self.new_data_pick(now, slot) {
                return Some(p);
            }
        }
        self.stats.pacer_throttled += 1;
        let until = self.pacer.next_slot(self.config.max_nic_est_backlog);
        self.timers.set(Timer::Pacer, until);
        None
    }

    /// The next packet of `slot`'s pending retransmission.
    pub(super) fn resend_pick(&self, slot: usize) -> Option<DataPick> {
        let (start, end, priority) = self.rpc_at(slot)?.outgoing()?.next_resend()?;
        Some(DataPick {
            slot,
            start,
            end,
            priority,
            retransmit: true,
        })
    }

    /// The next new packet of `slot`, if the pacer lets it go now.
    pub(super) fn new_data_pick(&self, now: Instant, slot: usize) -> Option<DataPick> {
        let r = self.rpc_at(slot)?;
        let out = r.outgoing()?;
        let c = &self.config;
        if !self.pacer.may_send(
            now,
            out.bytes_left(),
            c.defer_min_bytes,
            c.max_nic_est_backlog,
        ) {
            return None;
        }
        // A message not started yet is cut for the device as it is now
        // (it may have been queued before the first poll saw the device).
        let seg = if out.next_xmit() == 0 {
            self.payload_for(r.peer_addr())
        } else {
            out.seg()
        };
        let (start, end) =
            super::rpc::packet_at(out.next_xmit(), seg, out.unscheduled(), out.length());
        let priority = if start < out.unscheduled() {
            let peer = self.peers.get(usize::from(r.peer()))?.peer.as_ref()?;
            peer.unsched_priority(out.length(), c.num_priorities)
        } else {
            out.sched_priority()
        };
        Some(DataPick {
            slot,
            start,
            end,
            priority,
            retransmit: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_time_at_10_gbps_is_about_1_23_us_for_a_full_frame() {
        let p = Pacer::new(10_000);
        // 1514 + 24 = 1538 bytes at 9.9 Gbit/s = 1242.8 ns.
        let t = p.wire_time(1514).total_nanos();
        assert!((1240..=1245).contains(&t), "{t}");
    }

    #[test]
    fn wire_time_is_bytes_times_picoseconds_per_byte_rounded_down() {
        for mbps in [
            0,
            1,
            7,
            100,
            1_000,
            9_999,
            10_000,
            25_000,
            100_000,
            u32::MAX,
        ] {
            let p = Pacer::new(mbps);
            let ps = 800_000_000 / (99 * u64::from(mbps.max(1)));
            for frame in [
                0,
                1,
                60,
                999,
                1000,
                1514,
                9000,
                65_535,
                1 << 20,
                123_456_789,
            ] {
                let bytes = (frame + ETH_FRAME_OVERHEAD) as u64;
                assert_eq!(
                    p.wire_time(frame).total_nanos(),
                    bytes * ps / 1000,
                    "{mbps} Mbit/s, {frame} bytes"
                );
            }
        }
    }

    #[test]
    fn backlog_grows_with_each_frame_and_drains_with_time() {
        let mut p = Pacer::new(10_000);
        let now = Instant::from_micros(100);
        for _ in 0..10 {
            p.on_transmit(now, 1514);
        }
        let b = p.backlog(now);
        assert!(
            b > Duration::from_micros(12) && b < Duration::from_micros(13),
            "{b}"
        );
        assert_eq!(p.backlog(now + Duration::from_micros(20)), Duration::ZERO);
        // An idle link starts counting from now, not from the past.
        let later = Instant::from_millis(5);
        p.on_transmit(later, 1514);
        assert!(p.backlog(later) < Duration::from_micros(2));
    }

    #[test]
    fn long_messages_wait_for_the_queue_short_ones_do_not() {
        let mut p = Pacer::new(10_000);
        let now = Instant::from_micros(1);
        for _ in 0..10 {
            p.on_transmit(now, 1514);
        }
        let max = Duration::from_micros(5);
        assert!(!p.may_send(now, 100_000, 1000, max));
        assert!(p.may_send(now, 1000, 1000, max));
        assert!(p.may_send(p.next_slot(max), 100_000, 1000, max));
    }

    #[test]
    fn fifo_turn_every_twentieth_pick_at_50_per_mille() {
        let mut p = Pacer::new(25_000);
        let turns: usize = (0..200).filter(|_| p.fifo_turn(50)).count();
        assert_eq!(turns, 10);
        assert!(!(0..100).any(|_| p.fifo_turn(0)));
    }
}
