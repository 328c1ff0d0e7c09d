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

/// One egress port and the link leaving it.
#[derive(Debug)]
pub(crate) struct Port {
    node: NodeId,
    index: usize,
    peer: NodeId,
    rate_mbps: u32,
    /// One FIFO, or 8 strict-priority FIFOs indexed by priority.
    levels: Vec<VecDeque<Frame>>,
    /// Drop-tail limits on `occupancy` and on `held`, if any.
    buffer_limit: Limit,
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
}

impl Port {
    pub(crate) fn new(
        node: NodeId,
        index: usize,
        peer: NodeId,
        rate_mbps: u32,
        priority_queues: bool,
        buffer_limit: Limit,
    ) -> Port {
        let n = if priority_queues { 8 } else { 1 };
        Port {
            node,
            index,
            peer,
            rate_mbps,
            levels: (0..n).map(|_| VecDeque::new()).collect(),
            buffer_limit,
            occupancy: 0,
            held: 0,
            in_service: None,
            frames: 0,
            bytes: 0,
            busy_ns: 0,
            max_occupancy: 0,
            drops: 0,
        }
    }

    pub(crate) fn peer(&self) -> NodeId {
        self.peer
    }

    /// Queues `frame` unless the buffer is full; on a drop-tail drop the
    /// frame is counted and discarded and `false` returned.
    pub(crate) fn offer(&mut self, frame: Frame) -> bool {
        let len = frame.data.len();
        let Limit { bytes, frames } = self.buffer_limit;
        if bytes.is_some_and(|limit| self.occupancy + len > limit)
            || frames.is_some_and(|limit| self.held >= limit)
        {
            self.drops += 1;
            return false;
        }
        let level = if self.levels.len() == 1 {
            0
        } else {
            usize::from(frame.priority.min(7))
        };
        self.levels[level].push_back(frame);
        self.occupancy += len;
        self.held += 1;
        self.max_occupancy = self.max_occupancy.max(self.occupancy);
        true
    }

    /// If the port is idle and has a frame queued, puts the highest-priority
    /// one (oldest first) on the wire and returns its serialisation time.
    pub(crate) fn start(&mut self) -> Option<Duration> {
        if self.in_service.is_some() {
            return None;
        }
        let frame = self
            .levels
            .iter_mut()
            .rev()
            .find_map(|queue| queue.pop_front())?;
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(tag: u8, len: usize, priority: u8) -> Frame {
        Frame {
            data: vec![tag; len],
            priority,
            dst: Some(0),
        }
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
        let mut p = Port::new(
            NodeId::Switch(0),
            0,
            NodeId::Host(0),
            10_000,
            true,
            Limit::default(),
        );
        for (tag, prio) in [(1, 0), (2, 3), (3, 0), (4, 7), (5, 3)] {
            assert!(p.offer(frame(tag, 100, prio)));
        }
        assert_eq!(drain(&mut p), [4, 2, 5, 1, 3]);
    }

    #[test]
    fn single_queue_ignores_priority() {
        let mut p = Port::new(
            NodeId::Host(0),
            0,
            NodeId::Switch(0),
            10_000,
            false,
            Limit::default(),
        );
        for (tag, prio) in [(1, 0), (2, 7), (3, 3)] {
            assert!(p.offer(frame(tag, 100, prio)));
        }
        assert_eq!(drain(&mut p), [1, 2, 3]);
    }

    #[test]
    fn drop_tail_counts_bytes_including_the_frame_on_the_wire() {
        let mut p = Port::new(
            NodeId::Switch(0),
            0,
            NodeId::Host(0),
            10_000,
            true,
            Limit {
                bytes: Some(250),
                frames: None,
            },
        );
        assert!(p.offer(frame(1, 100, 0)));
        assert!(p.start().is_some());
        assert!(p.offer(frame(2, 100, 0)));
        assert!(!p.offer(frame(3, 100, 7)));
        assert!(p.offer(frame(4, 50, 0)));
        let s = p.stats();
        assert_eq!((s.drops, s.queue_bytes, s.max_queue_bytes), (1, 250, 250));
    }

    #[test]
    fn drop_tail_counts_frames_including_the_frame_on_the_wire() {
        let limit = Limit {
            bytes: None,
            frames: Some(2),
        };
        let mut p = Port::new(NodeId::Switch(0), 0, NodeId::Host(0), 10_000, true, limit);
        assert!(p.offer(frame(1, 1500, 0)));
        assert!(p.start().is_some());
        assert!(p.offer(frame(2, 60, 0)));
        // Full: a third frame is dropped whatever its priority.
        assert!(!p.offer(frame(3, 60, 7)));
        assert_eq!(p.finish().unwrap().data[0], 1);
        assert!(p.offer(frame(4, 60, 7)));
        assert_eq!(drain(&mut p), [4, 2]);
        assert_eq!(p.stats().drops, 1);
    }
}
