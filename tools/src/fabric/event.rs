//! The event queue: a min-heap on (time, sequence number).
//!
//! The sequence number breaks ties in scheduling order, so events at the same
//! nanosecond always run in the same order and a run is reproducible.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::frame::Frame;
use super::topology::NodeId;

/// Something that happens at a point of virtual time.
#[derive(Debug)]
pub(crate) enum Event {
    /// A host's send software delay is over: the frame joins its NIC queue.
    NicEnqueue { host: usize, frame: Frame },
    /// The port (flat index) finished serialising its current frame.
    TxDone { port: usize },
    /// The frame's last bit reaches `node` after the link's propagation delay.
    Arrive { node: NodeId, frame: Frame },
    /// The switch delay is over: the frame joins egress port `port` (flat index).
    SwitchEnqueue { port: usize, frame: Frame },
    /// The receive software delay is over: the frame becomes visible to
    /// `Device::receive` on `host`. `arrived` is when it reached the NIC.
    Deliver {
        host: usize,
        data: Vec<u8>,
        arrived: u64,
    },
}

struct Entry {
    at: u64,
    seq: u64,
    event: Event,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    /// Reversed, so the max-heap pops the earliest (then first scheduled).
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// Pending events in time order.
#[derive(Default)]
pub(crate) struct EventQueue {
    heap: BinaryHeap<Entry>,
    seq: u64,
}

impl EventQueue {
    pub(crate) fn push(&mut self, at: u64, event: Event) {
        self.seq += 1;
        self.heap.push(Entry {
            at,
            seq: self.seq,
            event,
        });
    }

    /// Time of the earliest pending event.
    pub(crate) fn next_time(&self) -> Option<u64> {
        self.heap.peek().map(|e| e.at)
    }

    /// The earliest pending event if it is due at or before `limit`.
    pub(crate) fn pop_due(&mut self, limit: u64) -> Option<(u64, Event)> {
        if self.next_time()? > limit {
            return None;
        }
        self.heap.pop().map(|e| (e.at, e.event))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_by_time_then_scheduling_order() {
        let mut q = EventQueue::default();
        for (at, port) in [(5, 0), (3, 1), (5, 2), (3, 3), (9, 4)] {
            q.push(at, Event::TxDone { port });
        }
        assert_eq!(q.next_time(), Some(3));
        let mut order = Vec::new();
        while let Some((at, Event::TxDone { port })) = q.pop_due(5) {
            order.push((at, port));
        }
        assert_eq!(order, [(3, 1), (3, 3), (5, 0), (5, 2)]);
        assert_eq!(q.next_time(), Some(9));
    }
}
