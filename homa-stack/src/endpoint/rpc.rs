//! RPC state: the client and server state machines, the outgoing message
//! (packetisation, granted, next byte to send, priorities) and the incoming
//! message (reassembly, granted, bytes remaining).

use crate::storage::resend::{PacketGrid, ResendSet};
use crate::storage::{Holes, IndexLink, IndexNode, ListLink, ListNode, MeldLink, MessageBuf};
use crate::wire::IpAddr;

use super::links::QueueLinks;
use super::{RpcError, RpcHandle};

/// One entry of the caller-supplied RPC table: the RPC, and the links that
/// put it in the endpoint's queues and index without a walk over the table
/// (the queues themselves keep only a small header in the endpoint).
#[derive(Debug)]
pub struct RpcSlot {
    pub(crate) rpc: Option<Rpc>,
    /// In the lists, by kind: `TABLE` (the free or the live list),
    /// `READY` (its socket's ready queue), `CTRL` (RPCs with a GRANT,
    /// RESEND or NEED_ACK due), `WAIT` (messages waiting for pool space),
    /// `SHORT` (short messages to send, see `queues`), `BY_PEER` (its
    /// peer's server RPCs, see `share`).
    lists: [ListLink; 6],
    /// In the index of server RPCs by (peer address, id).
    index: IndexLink,
    /// In the sender's and the grant scheduler's heaps.
    pub(super) queues: QueueLinks,
    /// In its peer's heap of grant candidates (see `queues`).
    pub(super) by_peer: MeldLink,
}

impl RpcSlot {
    /// An empty slot, for building tables: `[RpcSlot::EMPTY; 64]`.
    pub const EMPTY: RpcSlot = RpcSlot {
        rpc: None,
        lists: [ListLink::EMPTY; 6],
        index: IndexLink::EMPTY,
        queues: QueueLinks::EMPTY,
        by_peer: MeldLink::EMPTY,
    };
}

/// The free and live lists of RPC slots (a kind of list, see
/// `storage::list`).
pub(crate) const TABLE: u8 = 0;
/// The sockets' ready queues.
pub(crate) const READY: u8 = 1;
/// The list of RPCs with control packets due.
pub(crate) const CTRL: u8 = 2;
/// The list of messages waiting for pool space.
pub(crate) const WAIT: u8 = 3;
/// The sender's list of short messages, in the order they became ready.
pub(crate) const SHORT: u8 = 4;
/// Each peer's server RPCs, oldest first.
pub(crate) const BY_PEER: u8 = 5;
/// Marker of the server-RPC index.
pub(crate) struct ServerTag;

impl ListNode for RpcSlot {
    fn list_link(&self, kind: u8) -> &ListLink {
        &self.lists[usize::from(kind.min(BY_PEER))]
    }
    fn list_link_mut(&mut self, kind: u8) -> &mut ListLink {
        &mut self.lists[usize::from(kind.min(BY_PEER))]
    }
}

impl IndexNode<ServerTag> for RpcSlot {
    fn index_link(&self) -> &IndexLink {
        &self.index
    }
    fn index_link_mut(&mut self) -> &mut IndexLink {
        &mut self.index
    }
}

impl Default for RpcSlot {
    fn default() -> Self {
        Self::EMPTY
    }
}

/// Where an RPC is in its life (docs/protocol.md 4.1).
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
    pub peer_addr: IpAddr,
    pub peer_port: u16,
    /// Our port in this RPC (the client port, or the server port).
    pub local_port: u16,
    pub state: State,
    pub out: Option<MsgOut>,
    pub inp: Option<MsgIn>,
    /// Ticks since DATA, GRANT or BUSY last arrived.
    pub silent_ticks: u32,
    /// Server: ticks since the whole response was handed to the NIC
    /// (saturating; 16 bits, as `stale_ticks`, keep the slot small).
    pub done_ticks: u16,
    /// Server: ticks without progress (new request bytes, pool space, new
    /// response bytes to send), which RESENDs may bridge for a bounded time
    /// only (see `timer`; 16 bits keep the slot small, and the bound is
    /// capped to fit).
    pub stale_ticks: u16,
    /// RESENDs for the incoming message's missing ranges are due.
    pub resend_due: bool,
    /// Server: a NEED_ACK is due.
    pub need_ack_due: bool,
    /// Client: the request's restarts by RPC_UNKNOWN (see `Restarts`).
    pub restarts: Restarts,
    /// Server: the pool pages its messages hold, as its peer's share
    /// last counted them (see `share`).
    pub pages: u16,
    /// Client: the outcome is waiting for the application.
    pub error: Option<crate::endpoint::RpcError>,
    /// The application has been told about the current state.
    pub reported: bool,
    /// Arrival order, for FIFO choices and fair reporting.
    pub birth: u64,
    /// This RPC's share of the endpoint's incoming total (see `queues`).
    pub counted: u32,
    /// Has DATA to send but its peer is unresolved (see `queues`).
    pub parked: bool,
    /// Its heap keys at the last refresh (see `queues`).
    pub keys: super::links::HeapKeys,
    /// Our address its packets leave from (a server RPC: the one asked).
    pub local: super::types::Local,
}

impl Rpc {
    /// Whether this is the RPC with local id `id` shared with `addr` at our
    /// port `port`: what a packet must name to be for it.
    #[inline]
    pub fn names(&self, addr: IpAddr, id: u64, port: u16) -> bool {
        self.id == id && self.peer_addr == addr && self.local_port == port
    }

    /// A new RPC in `state`; the one place the literal lives.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn new(
        id: u64,
        socket: u16,
        peer: u16,
        peer_addr: IpAddr,
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
            stale_ticks: 0,
            resend_due: false,
            need_ack_due: false,
            restarts: Restarts(0),
            pages: 0,
            error: None,
            reported: false,
            birth,
            counted: 0,
            parked: false,
            keys: super::links::HeapKeys::default(),
            local: super::types::Local::CHOSEN,
        }
    }
}

/// What an RPC_UNKNOWN naming a client request may do (see
/// [`Rpc::restart`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Restart {
    /// Send the request again.
    Now,
    /// The last restart was less than a RESEND interval ago: ignore it.
    TooSoon,
    /// The server forgot the request [`MAX_RESTARTS`] times already.
    Exhausted,
}

/// How many times RPC_UNKNOWN may restart one client request; the next
/// one fails it with [`RpcError::ServerForgot`].
///
/// An RPC_UNKNOWN is easily forged from the server's address, and each
/// restart sends up to the unscheduled bytes again (see
/// [`RESEND_MAX_BYTES`](super::RESEND_MAX_BYTES)), so restarts are rationed:
/// at most one per `Config::resend_interval` (an honest server says
/// RPC_UNKNOWN only in answer to our RESEND, which goes no faster), and
/// this many in all. A server loses a request only when every packet of it
/// (or of its last restart) was lost, or its table was full: at 30 % loss
/// a one-packet request needs a ninth restart about once in 50,000 RPCs,
/// while a forger buys at most this many times the unscheduled bytes.
pub const MAX_RESTARTS: u8 = 8;

/// How often RPC_UNKNOWN restarted a client request, and the ticks before
/// it may again, in one `u16` (it keeps the slot within its size): the
/// count in the top 4 bits, the ticks in the low 12 (a longer
/// `Config::resend_interval` holds for 4,095 ticks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Restarts(u16);

impl Restarts {
    const HOLD: u16 = 0x0fff;

    /// Restarts so far.
    pub fn count(self) -> u8 {
        (self.0 >> 12) as u8
    }

    /// One tick passed.
    pub fn tick(&mut self) {
        if self.0 & Self::HOLD != 0 {
            self.0 -= 1;
        }
    }

    /// An RPC_UNKNOWN names this client request: whether it may start
    /// again now, at most once per `interval` ticks and [`MAX_RESTARTS`]
    /// times in all (a restart it allows is counted here).
    pub fn restart(&mut self, interval: u32) -> Restart {
        if self.0 & Self::HOLD != 0 {
            return Restart::TooSoon;
        }
        let count = self.count();
        if count >= MAX_RESTARTS {
            return Restart::Exhausted;
        }
        let hold = u16::try_from(interval.min(u32::from(Self::HOLD))).unwrap_or(Self::HOLD);
        self.0 = (u16::from(count + 1) << 12) | hold;
        Restart::Now
    }
}

/// How many times a message's [`resend_cap`](super::resend::resend_cap) bytes may go out again, by
/// RESEND or by restarts after RPC_UNKNOWN, without its receiver showing
/// progress (a GRANT above the highest one yet earns back what it grants
/// beyond).
///
/// A receiver that misses bytes asks for them once per
/// `Config::resend_interval`, and each answer delivers most of them: at
/// 30 % loss a window goes out again about 0.4 times, and what a longer
/// message needs again its receiver pays for with GRANTs as the bytes
/// arrive. A forger that names the RPC buys this many windows, then as
/// much as the GRANTs it also forges climb: at most the message once more
/// for each restart the server asks for (`MAX_RESTARTS`).
///
/// A receiver whose NIC drops most of every burst needs more than that
/// after it has granted the whole message, and has nothing left to pay
/// with: each RESEND interval in which it asks refills a spent reserve by
/// one packet, so its RPC still completes, slowly, instead of starving
/// until it times out. That is one full-size frame for at least one RESEND
/// (a 71-byte frame): a forger who names the RPC gains one per interval of
/// its life, however many RESENDs it sends.
pub(crate) const RESEND_WINDOWS: u32 = 8;

/// What one outgoing message may still send again (see
/// [`RESEND_WINDOWS`]): forged RESENDs or RPC_UNKNOWNs from the peer's
/// address, however many, buy at most [`RESEND_PER_INTERVAL`] windows of
/// [`resend_cap`](super::resend::resend_cap) bytes per RESEND interval (an honest receiver asks once
/// per interval) and [`RESEND_WINDOWS`] of them beyond what the receiver's
/// GRANTs earned back. Counted in packets and KiB to keep the RPC slot
/// small.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ration {
    /// Packets earned back by GRANTs (and RESEND intervals, while
    /// negative) less packets sent again.
    balance: i16,
    /// Packets left in the current interval.
    window: u16,
    /// Ticks before a new interval starts.
    hold: u16,
    /// The highest GRANT offset from the receiver, in KiB.
    heard: u16,
}

/// How many windows of [`resend_cap`](super::resend::resend_cap) bytes one message may send again per
/// RESEND interval. An honest receiver's round asks for every range it
/// misses below its grant, which after a burst of losses can be more than
/// one window; a forger gains only speed, not bytes (those
/// [`RESEND_WINDOWS`] bounds).
pub(crate) const RESEND_PER_INTERVAL: u32 = 2;

/// `bytes` in packets of `seg` bytes, rounded up, saturating.
fn packets(bytes: u32, seg: u32) -> u16 {
    u16::try_from(bytes.div_ceil(seg.max(1))).unwrap_or(u16::MAX)
}

impl Ration {
    /// A message that has gone out no more than once.
    pub const fn new() -> Ration {
        Ration {
            balance: 0,
            window: 0,
            hold: 0,
            heard: 0,
        }
    }

    /// One tick passed.
    pub fn tick(&mut self) {
        self.hold = self.hold.saturating_sub(1);
    }

    /// How many bytes a request to send `want` bytes (in packets of `seg`)
    /// again may have now, for windows of `cap` bytes and RESENDs
    /// `interval` ticks apart; the caller then `spend`s what it queued.
    pub fn allow(&mut self, want: u32, cap: u32, interval: u32, seg: u32) -> u32 {
        if self.hold == 0 && want > 0 {
            // The receiver's next round comes `interval` ticks after this
            // one by its own clock: one tick less here keeps the two
            // clocks' phases from holding back an honest round.
            self.hold = u16::try_from(interval.saturating_sub(1).max(1)).unwrap_or(u16::MAX);
            self.window = packets(cap.saturating_mul(RESEND_PER_INTERVAL), seg);
            // A spent reserve refills by a packet each interval (see
            // `RESEND_WINDOWS`).
            self.balance += i16::from(self.balance < 0);
        }
        let total = i32::from(packets(cap.saturating_mul(RESEND_WINDOWS), seg));
        let credit = u32::try_from(total + i32::from(self.balance)).unwrap_or(0);
        let allowed = credit.min(u32::from(self.window));
        want.min(allowed.saturating_mul(seg.max(1)))
    }

    /// `n` packets were queued to go out again.
    pub fn spend(&mut self, n: u32) {
        let n = u16::try_from(n).unwrap_or(u16::MAX);
        self.window = self.window.saturating_sub(n);
        self.balance = self
            .balance
            .saturating_sub(i16::try_from(n).unwrap_or(i16::MAX));
    }

    /// The receiver granted up to `offset`: what it granted beyond the
    /// highest GRANT yet it is taking in, so as many bytes (in packets of
    /// `seg`) may go out again.
    pub fn granted(&mut self, offset: u32, cap: u32, seg: u32) {
        let kib = u16::try_from(offset >> 10).unwrap_or(u16::MAX);
        if kib > self.heard {
            let more = packets(u32::from(kib - self.heard) << 10, seg);
            self.heard = kib;
            // Kept for later losses, but no more than the reserve: what
            // an early GRANT earned must not buy a forger a whole message.
            let most =
                i16::try_from(packets(cap.saturating_mul(RESEND_WINDOWS), seg)).unwrap_or(i16::MAX);
            self.balance = self
                .balance
                .saturating_add(i16::try_from(more).unwrap_or(i16::MAX))
                .min(most);
        }
    }

    /// The receiver lost the message and starts over: its GRANTs count
    /// from the start again.
    pub fn restart(&mut self) {
        self.heard = 0;
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
    /// Packets to send again (from RESEND or RPC_UNKNOWN), exactly those
    /// asked for: a bitmap over this message's packet grid.
    pub resend: ResendSet,
    /// What RESENDs and restarts may still make it send again.
    pub ration: Ration,
}

impl MsgOut {
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

    /// Queues the packets of `[start, end)` (cut at the bytes sent so far)
    /// to be sent again, as far as the message's ration allows for
    /// windows of `cap` bytes every `interval` ticks; packets already
    /// queued are not queued twice. False when the ration allowed nothing.
    pub fn request_resend(
        &mut self,
        start: u32,
        end: u32,
        priority: u8,
        cap: u32,
        interval: u32,
    ) -> bool {
        let end = end.min(self.next_xmit);
        if start >= end {
            return true;
        }
        let allowed = self.ration.allow(end - start, cap, interval, self.seg);
        if allowed == 0 {
            return false;
        }
        let added = self
            .resend
            .add(start, start + allowed, self.next_xmit, priority);
        self.ration.spend(added);
        true
    }

    /// Fixes the packet size at the first transmission.
    pub fn cut(&mut self, seg: u32) {
        self.seg = seg;
        self.resend = ResendSet::new(PacketGrid::new(seg, self.unscheduled, self.length));
    }
}

/// See [`MsgOut::packet_at`]; the grid's one home is `storage::resend`.
pub(crate) fn packet_at(offset: u32, seg: u32, unscheduled: u32, length: u32) -> (u32, u32) {
    crate::storage::resend::packet_at(offset, seg, unscheduled, length)
}

/// The incoming message of an RPC.
#[derive(Debug)]
pub(crate) struct MsgIn {
    /// Pool pages; `None` while waiting for pool space.
    pub buf: Option<MessageBuf>,
    pub length: u32,
    /// Which bytes arrived; the descriptors of the missing ones live in the
    /// message's own pages (`storage::holes`), so any loss pattern fits.
    pub asm: Holes,
    /// Where the next RESEND round continues, when the device or the budget
    /// cut the last one short (0: from the start).
    pub resend_from: u32,
    /// Needs grants beyond what the sender sends unscheduled: only such
    /// messages count against `max_incoming` (docs/protocol.md 4.4).
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

/// The id of client RPC number `seq` in `slot`: even, unique per endpoint
/// (the sequence never repeats within 2^47 RPCs), and naming its slot so a
/// response finds its RPC without a search.
pub(super) fn client_id(seq: u64, slot: usize) -> u64 {
    (((seq & 0x7fff_ffff_ffff) << 16) | slot as u64) << 1
}

/// The slot a client id names.
pub(super) fn client_slot(id: u64) -> usize {
    ((id >> 1) & 0xffff) as usize
}

/// The RPC table: the one place RPCs are put in, failed and freed.
impl<'a> super::Endpoint<'a> {
    pub(super) fn rpc(&self, h: RpcHandle) -> Option<&Rpc> {
        self.rpcs
            .get(usize::from(h.slot))?
            .rpc
            .as_ref()
            // Births are unique for the endpoint's life (a u64 count).
            .filter(|r| r.birth == h.birth)
    }

    /// Takes in the new RPC the caller has just put in free slot `slot`
    /// (built there, as an RPC is a few hundred bytes): its peer counts it
    /// and the slot leaves the free list. A client RPC (`server_hash`
    /// `None`) is brought in step with the queues now. A server RPC goes
    /// into the server index under `server_hash` (its `rpc` hash, from the
    /// lookup that missed) and is not refreshed here: only a DATA packet
    /// makes one, and `process_homa` refreshes the RPC a packet named after
    /// handling it.
    pub(super) fn insert_rpc(&mut self, slot: usize, server_hash: Option<u64>) {
        let Some(peer) = self.rpc_peer(slot) else {
            return;
        };
        self.peer_taken(peer);
        let i = slot as u16;
        self.free.remove(&mut self.rpcs[..], i);
        self.live.push_back(&mut self.rpcs[..], i);
        if let Some(h) = server_hash {
            self.servers.insert(&mut self.rpcs[..], i, h);
            self.share_taken(slot, peer);
        }
        if server_hash.is_none() {
            // Nothing more to change: the new RPC takes its places.
            self.update_slot(slot, |_| ());
        }
    }

    /// A free RPC slot, if any (the free list's back: no search).
    pub(super) fn free_slot(&self) -> Option<usize> {
        // The slot freed last: its cache lines are still warm, so a big
        // table costs what a small one does.
        self.free.back().map(usize::from)
    }

    /// The RPC in `slot` has something for the application: queue it on
    /// its socket (once).
    pub(super) fn mark_ready(&mut self, slot: usize) {
        let Some(r) = self.rpcs.get_mut(slot).and_then(|s| s.rpc.as_mut()) else {
            return;
        };
        r.reported = false;
        let socket = usize::from(r.socket);
        if let Some(s) = self.sockets.get_mut(socket).and_then(|s| s.sock.as_mut()) {
            s.ready.push_back(&mut self.rpcs[..], slot as u16);
        }
    }

    /// The RPC in `slot` has a GRANT, RESEND or NEED_ACK due.
    pub(super) fn control_due(&mut self, slot: usize) {
        self.ctrl_due.push_back(&mut self.rpcs[..], slot as u16);
    }

    /// Ends an unfinished client RPC with `error`: its pages go back to the
    /// pool at once and the application is told through [`Event::Failed`].
    pub(super) fn fail_client_rpc(&mut self, slot: usize, error: RpcError) {
        let unfinished = self
            .rpcs
            .get(slot)
            .and_then(|s| s.rpc.as_ref())
            .is_some_and(|r| r.state.is_client() && r.state != State::ClientDone);
        if !unfinished {
            return;
        }
        // The queues read neither the pool nor the waiters: the pages go
        // back after the RPC has left its queues.
        let Some((out, inp)) = self.update_rpc(slot, |r| {
            r.state = State::ClientDone;
            r.error = Some(error);
            (r.out.take(), r.inp.take())
        }) else {
            return;
        };
        if let Some(out) = out {
            self.pool.free(out.buf);
        }
        if let Some(b) = inp.and_then(|m| m.buf) {
            self.pool.free(b);
        }
        self.waiters.remove(&mut self.rpcs[..], slot as u16);
        self.stats.client_failed += 1;
        self.mark_ready(slot);
    }

    /// Frees an RPC slot and its pool pages.
    pub(super) fn free_rpc(&mut self, slot: usize) {
        self.unqueue(slot);
        // What freeing needs, read in place: the RPC is not moved out.
        let Some(r) = self.rpcs.get_mut(slot).and_then(|s| s.rpc.as_mut()) else {
            return;
        };
        let (socket, peer, server, pages) = (r.socket, r.peer, !r.state.is_client(), r.pages);
        let out = r.out.take().map(|o| o.buf);
        let inp = r.inp.take().and_then(|m| m.buf);
        self.rpcs[slot].rpc = None;
        let i = slot as u16;
        self.live.remove(&mut self.rpcs[..], i);
        self.free.push_back(&mut self.rpcs[..], i);
        self.ctrl_due.remove(&mut self.rpcs[..], i);
        self.waiters.remove(&mut self.rpcs[..], i);
        if let Some(s) = self
            .sockets
            .get_mut(usize::from(socket))
            .and_then(|s| s.sock.as_mut())
        {
            s.ready.remove(&mut self.rpcs[..], i);
        }
        self.servers.remove(&mut self.rpcs[..], i);
        if server {
            self.share_released(slot, peer, pages);
        }
        self.peer_released(peer);
        if let Some(b) = out {
            self.pool.free(b);
        }
        if let Some(b) = inp {
            self.pool.free(b);
        }
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
