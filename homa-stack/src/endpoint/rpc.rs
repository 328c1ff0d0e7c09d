//! RPC state: the client and server state machines, the outgoing message
//! (packetisation, granted, next byte to send, priorities) and the incoming
//! message (reassembly, granted, bytes remaining).

use crate::storage::{MessageBuf, Reassembly};
use crate::wire::Ipv4Addr;

/// Reassembly gaps an incoming message can track at once. A packet that would
/// open more is dropped and recovered by RESEND; eight (8 bytes each) keep a
/// slot under 256 bytes while riding out heavy loss.
pub const GAPS: usize = 8;

/// One entry of the caller-supplied RPC table.
#[derive(Debug)]
pub struct RpcSlot {
    pub(crate) rpc: Option<Rpc>,
}

impl RpcSlot {
    /// An empty slot, for building tables: `[RpcSlot::EMPTY; 64]`.
    pub const EMPTY: RpcSlot = RpcSlot { rpc: None };
}

impl Default for RpcSlot {
    fn default() -> Self {
        Self::EMPTY
    }
}

/// Where an RPC is in its life (protocol.md 4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    /// Client sending its request (response packets are accepted already).
    ClientOutgoing,
    /// Client receiving its response.
    ClientIncoming,
    /// Client finished, with a response or an error, until the app releases it.
    ClientDone,
    /// Server receiving a request.
    ServerIncoming,
    /// Server holds a complete request the application has not taken yet.
    ServerReady,
    /// The application has the request and owes a response.
    ServerInService,
    /// Server sending its response, then waiting for the client's ACK.
    ServerOutgoing,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::ClientOutgoing => "client-outgoing",
            State::ClientIncoming => "client-incoming",
            State::ClientDone => "client-done",
            State::ServerIncoming => "server-incoming",
            State::ServerReady => "server-ready",
            State::ServerInService => "server-in-service",
            State::ServerOutgoing => "server-outgoing",
        }
    }

    pub fn is_client(self) -> bool {
        matches!(
            self,
            State::ClientOutgoing | State::ClientIncoming | State::ClientDone
        )
    }
}

#[derive(Debug)]
pub(crate) struct Rpc {
    /// Local id: even for a client RPC, odd for a server RPC.
    pub id: u64,
    /// Index of the owning socket.
    pub socket: u16,
    /// Index of the peer in the peer table.
    pub peer: u16,
    pub peer_addr: Ipv4Addr,
    pub peer_port: u16,
    /// Our port in this RPC (the client port, or the server port).
    pub local_port: u16,
    pub state: State,
    pub out: Option<MsgOut>,
    pub inp: Option<MsgIn>,
    /// Ticks since DATA, GRANT or BUSY last arrived.
    pub silent_ticks: u32,
    /// Server: ticks since the whole response was handed to the NIC.
    pub done_ticks: u32,
    /// RESENDs for the incoming message's missing ranges are due.
    pub resend_due: bool,
    /// Server: a NEED_ACK is due.
    pub need_ack_due: bool,
    /// Client: the outcome is waiting for the application.
    pub error: Option<crate::endpoint::RpcError>,
    /// The application has been told about the current state.
    pub reported: bool,
    /// Arrival order, for FIFO choices and fair reporting.
    pub birth: u64,
}

impl Rpc {
    /// A new RPC in `state`; the one place the literal lives.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: u64,
        socket: u16,
        peer: u16,
        peer_addr: Ipv4Addr,
        peer_port: u16,
        local_port: u16,
        state: State,
        birth: u64,
    ) -> Rpc {
        Rpc {
            id,
            socket,
            peer,
            peer_addr,
            peer_port,
            local_port,
            state,
            out: None,
            inp: None,
            silent_ticks: 0,
            done_ticks: 0,
            resend_due: false,
            need_ack_due: false,
            error: None,
            reported: false,
            birth,
        }
    }
}

/// The outgoing message of an RPC.
#[derive(Debug)]
pub(crate) struct MsgOut {
    pub buf: MessageBuf,
    pub length: u32,
    /// Payload bytes per packet for this message (fixed for its life so
    /// retransmissions keep the original boundaries).
    pub seg: u32,
    /// Bytes sent without grants.
    pub unscheduled: u32,
    /// Bytes the receiver lets us send.
    pub granted: u32,
    /// First byte not yet handed to the NIC (Linux `tx_end`).
    pub next_xmit: u32,
    /// Priority of scheduled packets, from the last GRANT.
    pub sched_priority: u8,
    /// Ranges to send again (from RESEND or RPC_UNKNOWN).
    pub resend: ResendQueue,
}

impl MsgOut {
    /// The packet containing byte `offset`: `[start, end)`. Packets are `seg`
    /// bytes, with one boundary forced at the unscheduled limit so no
    /// unscheduled byte goes past it (protocol.md 4.2).
    pub fn packet_at(&self, offset: u32) -> (u32, u32) {
        packet_at(offset, self.seg, self.unscheduled, self.length)
    }

    /// Bytes not yet sent once.
    pub fn bytes_left(&self) -> u32 {
        self.length - self.next_xmit
    }

    /// Whether a first transmission is allowed now: the next packet starts
    /// below the granted offset (a whole packet goes even if the grant ends
    /// inside it).
    pub fn can_send_new(&self) -> bool {
        self.next_xmit < self.length && self.next_xmit < self.granted
    }

    /// Queues `[start, end)` (cut at the bytes sent so far) to be sent again.
    pub fn request_resend(&mut self, start: u32, end: u32, priority: u8) {
        self.resend.add(start, end.min(self.next_xmit), priority);
    }
}

/// Byte ranges an outgoing message must send again, in order.
///
/// A receiver asks for each of its gaps separately; keeping them apart (up
/// to `RESEND_RANGES`) resends only what is missing. When more arrive than
/// fit, the two ranges closest together merge, which resends the bytes
/// between them too: wasteful, never wrong.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ResendQueue {
    ranges: [(u32, u32); RESEND_RANGES],
    len: u8,
    /// Priority of the retransmitted packets: the highest asked for.
    pub priority: u8,
}

/// Separate ranges a retransmission queue keeps.
pub const RESEND_RANGES: usize = 4;

impl ResendQueue {
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first range and its priority.
    pub fn front(&self) -> Option<(u32, u32, u8)> {
        (self.len > 0).then(|| (self.ranges[0].0, self.ranges[0].1, self.priority))
    }

    /// The end of the last range.
    pub fn end(&self) -> u32 {
        if self.len == 0 {
            0
        } else {
            self.ranges[usize::from(self.len) - 1].1
        }
    }

    pub fn add(&mut self, start: u32, end: u32, priority: u8) {
        if start >= end {
            return;
        }
        self.priority = if self.len == 0 {
            priority
        } else {
            self.priority.max(priority)
        };
        let mut list: heapless::Vec<(u32, u32), { RESEND_RANGES + 1 }> = heapless::Vec::new();
        let mut new = Some((start, end));
        for &r in &self.ranges[..usize::from(self.len)] {
            match new {
                // Overlapping or touching: absorb into the new range.
                Some((s, e)) if r.0 <= e && s <= r.1 => new = Some((s.min(r.0), e.max(r.1))),
                Some((s, e)) if e < r.0 => {
                    let _ = list.push((s, e));
                    new = None;
                    let _ = list.push(r);
                }
                _ => {
                    let _ = list.push(r);
                }
            }
        }
        if let Some(n) = new {
            let _ = list.push(n);
        }
        if list.len() > RESEND_RANGES {
            // Merge the two neighbours with the smallest hole between them.
            let i = (0..list.len() - 1)
                .min_by_key(|&i| list[i + 1].0 - list[i].1)
                .unwrap_or(0);
            list[i].1 = list[i + 1].1;
            list.remove(i + 1);
        }
        self.len = list.len() as u8;
        self.ranges[..list.len()].copy_from_slice(&list);
    }

    /// Everything below `sent_to` has been sent again: drop it.
    pub fn advance(&mut self, sent_to: u32) {
        let mut kept = 0;
        for i in 0..usize::from(self.len) {
            let (s, e) = self.ranges[i];
            if e > sent_to {
                self.ranges[kept] = (s.max(sent_to), e);
                kept += 1;
            }
        }
        self.len = kept as u8;
    }
}

/// See [`MsgOut::packet_at`].
pub(crate) fn packet_at(offset: u32, seg: u32, unscheduled: u32, length: u32) -> (u32, u32) {
    let seg = seg.max(1);
    if offset < unscheduled {
        let start = offset / seg * seg;
        (start, (start + seg).min(unscheduled).min(length))
    } else {
        let start = unscheduled + (offset - unscheduled) / seg * seg;
        (start, start.saturating_add(seg).min(length))
    }
}

/// The incoming message of an RPC.
#[derive(Debug)]
pub(crate) struct MsgIn {
    /// Pool pages; `None` while waiting for pool space.
    pub buf: Option<MessageBuf>,
    pub length: u32,
    pub asm: Reassembly<GAPS>,
    /// Needs grants beyond what the sender sends unscheduled: only such
    /// messages count against `max_incoming` (protocol.md 4.4).
    pub scheduled: bool,
    /// Offset the sender may send up to (initially its unscheduled bytes).
    pub granted: u32,
    /// Priority of the last grant.
    pub grant_priority: u8,
    /// A GRANT for `granted` is waiting to be sent.
    pub grant_pending: bool,
}

impl MsgIn {
    pub fn received(&self) -> u32 {
        self.length - self.asm.bytes_remaining()
    }
    pub fn is_complete(&self) -> bool {
        self.buf.is_some() && self.asm.is_complete()
    }
    /// Granted bytes that have not arrived.
    pub fn outstanding(&self) -> u32 {
        self.granted.saturating_sub(self.received())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packets_split_at_the_unscheduled_limit() {
        // 1424-byte packets, 40000 unscheduled: packet 28 is cut at 40000.
        assert_eq!(packet_at(0, 1424, 40_000, 100_000), (0, 1424));
        assert_eq!(packet_at(39_871, 1424, 40_000, 100_000), (38_448, 39_872));
        assert_eq!(packet_at(39_872, 1424, 40_000, 100_000), (39_872, 40_000));
        assert_eq!(packet_at(39_999, 1424, 40_000, 100_000), (39_872, 40_000));
        assert_eq!(packet_at(40_000, 1424, 40_000, 100_000), (40_000, 41_424));
        assert_eq!(packet_at(99_999, 1424, 40_000, 100_000), (99_808, 100_000));
    }

    #[test]
    fn resend_ranges_stay_apart_merge_when_touching_and_when_full() {
        let mut q = ResendQueue::default();
        q.add(10, 20, 7);
        q.add(40, 50, 6);
        q.add(0, 5, 7);
        assert_eq!(q.ranges[..usize::from(q.len)], [(0, 5), (10, 20), (40, 50)]);
        q.add(18, 41, 7);
        assert_eq!(q.ranges[..usize::from(q.len)], [(0, 5), (10, 50)]);
        q.add(60, 70, 7);
        q.add(80, 90, 7);
        q.add(100, 101, 7);
        // Five ranges do not fit: the closest pair (0..5 and 10..50) merges.
        assert_eq!(
            q.ranges[..usize::from(q.len)],
            [(0, 50), (60, 70), (80, 90), (100, 101)]
        );
        q.advance(65);
        assert_eq!(q.front(), Some((65, 70, 7)));
        q.advance(200);
        assert!(q.is_empty());
        q.add(5, 5, 7);
        assert!(q.is_empty(), "empty ranges are ignored");
    }

    #[test]
    fn short_messages_are_one_packet() {
        assert_eq!(packet_at(0, 1424, 100, 100), (0, 100));
        assert_eq!(packet_at(0, 1424, 1424, 1424), (0, 1424));
        assert_eq!(packet_at(1424, 1424, 1425, 1425), (1424, 1425));
    }

    #[test]
    fn packetisation_covers_every_byte_once() {
        for &(len, unsched) in &[
            (1u32, 1u32),
            (40_001, 40_000),
            (100_000, 40_000),
            (3000, 3000),
            (1_000_000, 40_000),
        ] {
            let mut off = 0;
            let mut n = 0;
            while off < len {
                let (s, e) = packet_at(off, 1424, unsched, len);
                assert_eq!(s, off);
                assert!(e > s && e - s <= 1424);
                off = e;
                n += 1;
            }
            assert_eq!(off, len);
            assert!(n >= len.div_ceil(1424));
        }
    }
}
