//! RPC state: the client and server state machines, the outgoing message
//! (packetisation, granted, next byte to send, priorities) and the incoming
//! message (reassembly, granted, bytes remaining).

use crate::storage::{MessageBuf, Reassembly};
use crate::wire::Ipv4Addr;

/// Reassembly gaps an incoming message can track at once. A packet that would
/// open more is dropped and recovered by RESEND; four keeps a slot small.
pub const GAPS: usize = 4;

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
    /// Client: the outcome is waiting for the application.
    pub error: Option<crate::endpoint::RpcError>,
    /// The application has been told about the current state.
    pub reported: bool,
    /// Arrival order, for FIFO choices and fair reporting.
    pub birth: u64,
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
    /// A range to send again, at a priority (from RESEND or RPC_UNKNOWN).
    pub resend: Option<(u32, u32, u8)>,
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

    /// Adds `[start, end)` to the pending retransmission range.
    pub fn request_resend(&mut self, start: u32, end: u32, priority: u8) {
        let end = end.min(self.next_xmit);
        if start >= end {
            return;
        }
        self.resend = Some(match self.resend {
            Some((s, e, p)) => (s.min(start), e.max(end), p.max(priority)),
            None => (start, end, priority),
        });
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
