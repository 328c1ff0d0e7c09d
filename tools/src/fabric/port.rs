//! An egress port: its queues, the frame on the wire, and its counters.

use std::collections::VecDeque;

use super::frame::Frame;
use super::stats::PortStats;
use super::timing::serialisation_time;
use super::topology::NodeId;
use homa_phy::time::Duration;

/// A port's drop-tail buffer: frame bytes and frames it may hold (`None`:
/// no limit of that kind).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Limit {
    pub(crate) bytes: Option<usize>,
    pub(crate) frames: Option<usize>,
}

/// How a port queues, drops and marks frames.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Queueing {
    /// 8 strict-priority FIFOs instead of one.
    pub(crate) priorities: bool,
    /// pFabric: one queue sending the frame of the lowest rank first (the
    /// earliest of its flow) and dropping the highest rank when full.
    pub(crate) pfabric: bool,
    /// The drop-tail (for pFabric: drop-highest-rank) buffer.
    pub(crate) limit: Limit,
    /// Mark ECN-capable frames CE when the frames waiting then hold more
    /// than this many bytes.
    pub(crate) ecn_bytes: Option<usize>,
}

/// What became of a frame offered to a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Offer {
    /// Frames dropped for room: the one offered, or for pFabric queued
    /// ones of higher rank.
    pub(crate) dropped: u32,
    /// The offered frame was marked Congestion Experienced.
    pub(crate) marked: bool,
}

/// One egress port and the link leaving it.
#[derive(Debug)]
pub(crate) struct Port {
    node: NodeId,
    index: usize,
    peer: NodeId,
    rate_mbps: u32,
    /// One FIFO, or 8 strict-priority FIFOs indexed by priority.
    levels: Vec<VecDeque<Frame>>,
    queueing: Queueing,
    /// Frame bytes buffered: the queues plus the frame being serialised
    /// (store-and-forward keeps it until its last bit leaves).
    occupancy: usize,
    /// Frames buffered: queued plus the one being serialised.
    held: usize,
    in_service: Option<Frame>,
    frames: u64,
    bytes: u64,
    busy_ns: u64,
    max_occupancy: usize,
    drops: u64,
    marks: u64,
}

impl Port {
    pub(crate) fn new(
        node: NodeId,
        index: usize,
        peer: NodeId,
        rate_mbps: u32,
        queueing: Queueing,
    ) -> Port {
        let n = if queueing.priorities && !queueing.pfabric {
            8
        } else {
            1
        };
        Port {
            node,
            index,
            peer,
            rate_mbps,
            levels: (0..n).map(|_| VecDeque::new()).collect(),
            queueing,
            occupancy: 0,
            held: 0,
            in_service: None,
            frames: 0,
            bytes: 0,
            busy_ns: 0,
            max_occupancy: 0,
            drops: 0,
            marks: 0,
        }
    }

    pub(crate) fn peer(&self) -> NodeId {
        self.peer
    }

    /// Whether `len` more bytes in one more frame overflow the buffer.
    fn full(&self, len: usize) -> bool {
        let Limit { bytes, frames } = self.queueing.limit;
        bytes.is_some_and(|limit| self.occupancy + len > limit)
            || frames.is_some_and(|limit| self.held >= limit)
    }

    /// Queues `frame` unless the buffer is full (then the frame is dropped,
    /// or for pFabric the frame with the most bytes left, the later on a
    /// tie), and marks it CE past the ECN threshold.
    pub(crate) fn offer(&mut self, mut frame: Frame) -> Offer {
        let len = frame.data.len();
        let mut dropped = 0;
        while self.full(len) {
            dropped += 1;
            self.drops += 1;
            if !self.queueing.pfabric {
                return Offer {
                    dropped,
                    marked: false,
                };
            }
            let queue = &mut self.levels[0];
            match (0..queue.len()).max_by_key(|&i| queue[i].rank) {
                Some(i) if queue[i].rank > frame.rank => {
                    let out = queue.remove(i).expect("index in range");
                    self.occupancy -= out.data.len();
                    self.held -= 1;
                }
                _ => {
                    return Offer {
                        dropped,
                        marked: false,
                    }
                }
            }
        }
        let waiting = self.occupancy + len - self.in_service.as_ref().map_or(0, |f| f.data.len());
        let marked = self
            .queueing
            .ecn_bytes
            .is_some_and(|k| waiting > k && super::frame::mark_ce(&mut frame.data));
        self.marks += u64::from(marked);
        let level = if self.levels.len() == 1 {
            0
        } else {
            usize::from(frame.priority.min(7))
        };
        self.levels[level].push_back(frame);
        self.occupancy += len;
        self.held += 1;
        self.max_occupancy = self.max_occupancy.max(self.occupancy);
        Offer { dropped, marked }
    }

    /// If the port is idle and has a frame queued, puts the next one on the
    /// wire and returns its serialisation time: the highest priority (oldest
    /// first), or for pFabric the earliest frame of the flow whose frame has
    /// the lowest rank.
    pub(crate) fn start(&mut self) -> Option<Duration> {
        if self.in_service.is_some() {
            return None;
        }
        let frame = if self.queueing.pfabric {
            let queue = &mut self.levels[0];
            let best = (0..queue.len()).min_by_key(|&i| queue[i].rank)?;
            let flow = queue[best].flow;
            let first = (0..=best).find(|&i| queue[i].flow == flow)?;
            queue.remove(first)?
        } else {
            self.levels
                .iter_mut()
                .rev()
                .find_map(|queue| queue.pop_front())?
        };
        let ser = serialisation_time(frame.data.len(), self.rate_mbps);
        self.busy_ns += ser.total_nanos();
        self.in_service = Some(frame);
        Some(ser)
    }

    /// The frame on the wire has been fully sent; returns it.
    pub(crate) fn finish(&mut self) -> Option<Frame> {
        let frame = self.in_service.take()?;
        self.occupancy -= frame.data.len();
        self.held -= 1;
        self.frames += 1;
        self.bytes += frame.data.len() as u64;
        Some(frame)
    }

    pub(crate) fn stats(&self) -> PortStats {
        PortStats {
            node: self.node,
            port: self.index,
            peer: self.peer,
            rate_mbps: self.rate_mbps,
            frames: self.frames,
            bytes: self.bytes,
            busy: Duration::from_nanos(self.busy_ns),
            queue_bytes: self.occupancy,
            max_queue_bytes: self.max_occupancy,
            drops: self.drops,
            marks: self.marks,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(tag: u8, len: usize, priority: u8) -> Frame {
        ranked(tag, len, priority, 0, 0)
    }

    fn ranked(tag: u8, len: usize, priority: u8, rank: u32, flow: u32) -> Frame {
        Frame {
            data: vec![tag; len],
            priority,
            dst: Some(0),
            rank,
            flow,
        }
    }

    fn port(priorities: bool, limit: Limit) -> Port {
        let q = Queueing {
            priorities,
            limit,
            ..Queueing::default()
        };
        Port::new(NodeId::Switch(0), 0, NodeId::Host(0), 10_000, q)
    }

    fn drain(port: &mut Port) -> Vec<u8> {
        let mut tags = Vec::new();
        while port.start().is_some() {
            tags.push(port.finish().unwrap().data[0]);
        }
        tags
    }

    #[test]
    fn strict_priority_then_fifo() {
        let mut p = port(true, Limit::default());
        for (tag, prio) in [(1, 0), (2, 3), (3, 0), (4, 7), (5, 3)] {
            assert_eq!(p.offer(frame(tag, 100, prio)).dropped, 0);
        }
        assert_eq!(drain(&mut p), [4, 2, 5, 1, 3]);
    }

    #[test]
    fn single_queue_ignores_priority() {
        let mut p = port(false, Limit::default());
        for (tag, prio) in [(1, 0), (2, 7), (3, 3)] {
            assert_eq!(p.offer(frame(tag, 100, prio)).dropped, 0);
        }
        assert_eq!(drain(&mut p), [1, 2, 3]);
    }

    #[test]
    fn drop_tail_counts_bytes_including_the_frame_on_the_wire() {
        let mut p = port(
            true,
            Limit {
                bytes: Some(250),
                frames: None,
            },
        );
        assert_eq!(p.offer(frame(1, 100, 0)).dropped, 0);
        assert!(p.start().is_some());
        assert_eq!(p.offer(frame(2, 100, 0)).dropped, 0);
        assert_eq!(p.offer(frame(3, 100, 7)).dropped, 1);
        assert_eq!(p.offer(frame(4, 50, 0)).dropped, 0);
        let s = p.stats();
        assert_eq!((s.drops, s.queue_bytes, s.max_queue_bytes), (1, 250, 250));
    }

    #[test]
    fn drop_tail_counts_frames_including_the_frame_on_the_wire() {
        let limit = Limit {
            bytes: None,
            frames: Some(2),
        };
        let mut p = port(true, limit);
        assert_eq!(p.offer(frame(1, 1500, 0)).dropped, 0);
        assert!(p.start().is_some());
        assert_eq!(p.offer(frame(2, 60, 0)).dropped, 0);
        // Full: a third frame is dropped whatever its priority.
        assert_eq!(p.offer(frame(3, 60, 7)).dropped, 1);
        assert_eq!(p.finish().unwrap().data[0], 1);
        assert_eq!(p.offer(frame(4, 60, 7)).dropped, 0);
        assert_eq!(drain(&mut p), [4, 2]);
        assert_eq!(p.stats().drops, 1);
    }

    /// pFabric sends the flow of the lowest rank first, that flow's frames
    /// in the order they came; when full it drops the highest rank, the
    /// frame offered on a tie.
    #[test]
    fn pfabric_sends_the_fewest_bytes_left_first_and_drops_the_most() {
        let limit = Limit {
            bytes: None,
            frames: Some(4),
        };
        let q = Queueing {
            pfabric: true,
            limit,
            ..Queueing::default()
        };
        let mut p = Port::new(NodeId::Switch(0), 0, NodeId::Host(0), 10_000, q);
        // Flow 1's earlier frame carries a higher rank than its later one
        // (its bytes left shrank as acknowledgements came).
        for (tag, rank, flow) in [(1, 900, 1), (2, 5_000, 2), (3, 300, 1), (4, 700, 3)] {
            assert_eq!(p.offer(ranked(tag, 100, 0, rank, flow)).dropped, 0);
        }
        // Full: a frame ranked 800 pushes out flow 2's 5,000; one ranked
        // 900 (the highest now, tied) is itself dropped.
        assert_eq!(p.offer(ranked(5, 100, 0, 800, 4)).dropped, 1);
        assert_eq!(p.offer(ranked(6, 100, 0, 900, 5)).dropped, 1);
        assert_eq!(p.stats().drops, 2);
        // Flow 1 (rank 300) goes first, oldest frame first.
        assert_eq!(drain(&mut p), [1, 3, 4, 5]);
    }

    #[test]
    fn ecn_marks_capable_frames_once_the_waiting_bytes_pass_k() {
        let q = Queueing {
            ecn_bytes: Some(150),
            ..Queueing::default()
        };
        let mut p = Port::new(NodeId::Switch(0), 0, NodeId::Host(0), 10_000, q);
        let ect = |tag| {
            let mut f = ranked(tag, 100, 0, 0, 0);
            f.data[12..16].copy_from_slice(&[0x08, 0x00, 0x45, 0x02]);
            f
        };
        // The frame on the wire does not count; the second waiting frame
        // brings the queue to 200 > 150 bytes.
        assert!(!p.offer(ect(1)).marked);
        assert!(p.start().is_some());
        assert!(!p.offer(ect(2)).marked);
        assert!(p.offer(ect(3)).marked);
        assert!(!p.offer(frame(4, 100, 0)).marked, "not ECN-capable");
        assert_eq!(p.stats().marks, 1);
        p.finish();
        let marked: Vec<u8> = std::iter::from_fn(|| p.start().and_then(|_| p.finish()))
            .map(|f| f.data[15] & 3)
            .collect();
        assert_eq!(marked, [2, 3, 0]);
    }
}
