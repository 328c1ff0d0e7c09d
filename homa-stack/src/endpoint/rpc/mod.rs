//! An RPC and its transitions (docs/protocol.md 4.1): the client and server
//! state machines, their outgoing message (packetisation, grants, next byte
//! to send, priorities) and incoming message (reassembly, grants, bytes
//! remaining), and the table of RPCs.
//!
//! The RPC owns its fields: the endpoint reads them through accessors and
//! changes them only through methods that take what happened (a packet, a
//! tick, an application call) and return what the endpoint must do (a
//! verdict). Every change of state goes through [`Rpc::set_state`], which
//! logs it. The table ([`table`]) is the one place that hands out
//! `&mut Rpc`, and it brings the scheduling queues in step afterwards.

mod msg_in;
mod msg_out;
mod table;
#[cfg(test)]
mod tests;

use crate::stats::DropReason;
use crate::storage::holes::AddOutcome;
use crate::storage::{MessageBuf, Pool, PoolStore};
use crate::wire::homa::{DataHeader, Kind, Repr};
use crate::wire::IpAddr;

use super::links::HeapKeys;
use super::types::Local;
use super::RpcError;

pub(in crate::endpoint) use msg_in::leaves_tiny_hole;
pub(crate) use msg_in::MsgIn;
use msg_out::resend_cap;
pub use msg_out::RESEND_MAX_BYTES;
#[cfg(test)]
pub(crate) use msg_out::RESEND_WINDOWS;
pub(crate) use msg_out::{packet_at, MsgOut};
pub use table::RpcSlot;
pub(in crate::endpoint) use table::{client_id, client_slot};
pub(crate) use table::{ServerTag, BY_AGE, CTRL, READY, SHORT, TABLE, WAIT};

/// Where an RPC is in its life (docs/protocol.md 4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum State {
    /// Client sending its request (response packets are accepted already).
    ClientOutgoing,
    /// Client receiving its response.
    ClientIncoming,
    /// Client finished with its response, until the app releases it.
    ClientDone,
    /// Client finished with an error, until the app releases it.
    ClientFailed(RpcError),
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
    /// The state's name, as `RpcInfo` reports it.
    pub fn name(self) -> &'static str {
        match self {
            State::ClientOutgoing => "client-outgoing",
            State::ClientIncoming => "client-incoming",
            State::ClientDone => "client-done",
            State::ClientFailed(_) => "client-failed",
            State::ServerIncoming => "server-incoming",
            State::ServerReady => "server-ready",
            State::ServerInService => "server-in-service",
            State::ServerOutgoing => "server-outgoing",
        }
    }

    /// Whether we are the client.
    pub fn is_client(self) -> bool {
        matches!(
            self,
            State::ClientOutgoing
                | State::ClientIncoming
                | State::ClientDone
                | State::ClientFailed(_)
        )
    }

    /// A client RPC that has its outcome (a response or an error).
    pub fn is_finished(self) -> bool {
        matches!(self, State::ClientDone | State::ClientFailed(_))
    }

    /// States in which an RPC sends its outgoing message.
    pub fn sends(self) -> bool {
        matches!(
            self,
            State::ClientOutgoing | State::ClientIncoming | State::ServerOutgoing
        )
    }

    /// States in which an RPC takes DATA.
    pub fn receives(self) -> bool {
        matches!(
            self,
            State::ClientOutgoing | State::ClientIncoming | State::ServerIncoming
        )
    }

    /// States with news for the application (the RPC goes on its socket's
    /// ready queue).
    fn reportable(self) -> bool {
        matches!(
            self,
            State::ClientDone | State::ClientFailed(_) | State::ServerReady
        )
    }
}

/// An RPC: who it is with, its state, its messages and its timers' counts.
#[derive(Debug)]
pub(crate) struct Rpc {
    /// Local id: even for a client RPC, odd for a server RPC.
    id: u64,
    /// Index of the owning socket.
    socket: u16,
    /// Index of the peer in the peer table.
    peer: u16,
    peer_addr: IpAddr,
    peer_port: u16,
    /// Our port in this RPC (the client port, or the server port).
    local_port: u16,
    state: State,
    out: Option<MsgOut>,
    inp: Option<MsgIn>,
    /// Ticks since DATA, GRANT or BUSY last arrived.
    silent_ticks: u32,
    /// Server: ticks since the whole response was handed to the NIC
    /// (saturating; 16 bits, as `stale_ticks`, keep the slot small).
    done_ticks: u16,
    /// Ticks without progress (new request bytes, pool space, new bytes
    /// to send), which RESENDs may bridge for a bounded time only (see
    /// `timer`; 16 bits keep the slot small, and the bound is capped to
    /// fit): then a server RPC is freed, and a client's request sends
    /// nothing again until it progresses ([`RESENDS_SPENT`]).
    stale_ticks: u16,
    /// RESENDs for the incoming message's missing ranges are due.
    resend_due: bool,
    /// Server: a NEED_ACK is due.
    need_ack_due: bool,
    /// Client: the request's restarts by RPC_UNKNOWN (see `Restarts`).
    restarts: Restarts,
    /// The application has been told about the current state.
    reported: bool,
    /// Client: ICMP said its server is unreachable (a soft error, see
    /// `input`): if it times out, it fails as unreachable.
    unreachable: bool,
    /// Arrival order, for FIFO choices and fair reporting.
    birth: u64,
    /// Our address its packets leave from (a server RPC: the one asked).
    local: Local,
}

/// What a DATA packet did to an RPC ([`Rpc::on_data`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DataVerdict {
    /// New bytes stored; the message is not complete yet.
    Stored,
    /// New bytes stored, and they completed the message: the RPC has news
    /// for the application.
    Completed,
    /// The message has no pool pages and took none: the endpoint finds
    /// some (`len` bytes, for a server RPC when `server`) or makes it wait.
    NeedPages { len: u32, server: bool },
    /// Dropped, for this reason.
    Dropped(DropReason),
}

/// What a RESEND did to an RPC ([`Rpc::on_resend`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResendVerdict {
    /// The packets asked for are queued to go again.
    Queued,
    /// Nothing asked for was sent yet (or there is nothing to send): answer
    /// BUSY.
    Busy,
    /// Over the message's ration: nothing queued (counted as rate-limited).
    Rationed,
    /// A client RPC whose request is gone (answered, or failed): nothing
    /// to do (a wrong-state drop).
    Ignored,
}

/// What an RPC_UNKNOWN did to an RPC ([`Rpc::on_rpc_unknown`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnknownVerdict {
    /// The client request starts over.
    Restarted,
    /// The request's restarts are spent: its first packet goes again, as
    /// far as its resend ration allows, and its silence timeout decides.
    Spent,
    /// Restarted less than a RESEND interval ago: ignored (rate-limited).
    TooSoon,
    /// A server RPC whose client forgot it: free it.
    Forgotten,
    /// Nothing to do in this state (a wrong-state drop).
    Ignored,
}

/// What one tick did to an RPC ([`Rpc::on_tick`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TickVerdict {
    /// Not silent: its silence count is back to zero.
    Quiet,
    /// Silent one tick more, nothing due.
    Silent,
    /// A control packet is due (a repeated GRANT, a NEED_ACK): put the RPC
    /// on the control-due list.
    Due,
    /// Silent until a RESEND time: its peer's link address is in doubt,
    /// and with `due` a control packet is due as for `Due` (RESENDs for
    /// what it misses, or a NEED_ACK).
    Doubt { due: bool },
    /// A server RPC that RESENDs alone kept alive too long: free it.
    Stale,
    /// Silent for the timeout: a client RPC fails with this error, a
    /// server RPC is freed.
    TimedOut(RpcError),
}

/// The configuration a tick judges silence by (see `timer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TickRules {
    /// Silent ticks before an RPC times out.
    pub timeout: u32,
    /// Silent ticks before the first RESEND.
    pub resend: u32,
    /// Ticks between RESENDs (non-zero).
    pub interval: u32,
    /// Ticks a sent response waits before it asks for an ACK.
    pub request_ack: u32,
    /// Ticks without progress a server RPC may live on RESENDs.
    pub stale: u32,
}

impl Rpc {
    /// A new client RPC sending its request `out`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn client(
        id: u64,
        socket: u16,
        peer: u16,
        peer_addr: IpAddr,
        peer_port: u16,
        local_port: u16,
        birth: u64,
        out: MsgOut,
    ) -> Rpc {
        let mut r = Rpc::new(
            id,
            socket,
            peer,
            peer_addr,
            peer_port,
            local_port,
            State::ClientOutgoing,
            birth,
        );
        r.out = Some(out);
        r
    }

    /// A new server RPC receiving its request `inp` at our address `local`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn server(
        id: u64,
        socket: u16,
        peer: u16,
        peer_addr: IpAddr,
        peer_port: u16,
        local_port: u16,
        birth: u64,
        local: Local,
        inp: MsgIn,
    ) -> Rpc {
        let mut r = Rpc::new(
            id,
            socket,
            peer,
            peer_addr,
            peer_port,
            local_port,
            State::ServerIncoming,
            birth,
        );
        r.local = local;
        r.inp = Some(inp);
        r
    }

    /// A new RPC in `state`; the one place the literal lives.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn new(
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
            reported: false,
            unreachable: false,
            birth,
            local: Local::CHOSEN,
        }
    }

    /// Every change of state: logged, and a state with news for the
    /// application is not reported yet.
    #[cfg_attr(not(target_os = "none"), inline(always))]
    fn set_state(&mut self, state: State) {
        net_trace!(
            "homa: rpc {} {} -> {}",
            self.id,
            self.state.name(),
            state.name()
        );
        self.state = state;
        if state.reportable() {
            self.reported = false;
        }
    }

    /// Whether this is the RPC with local id `id` shared with `addr` at our
    /// port `port`: what a packet must name to be for it.
    #[inline]
    pub fn names(&self, addr: IpAddr, id: u64, port: u16) -> bool {
        self.id == id && self.peer_addr == addr && self.local_port == port
    }

    /// Local id: even for a client RPC, odd for a server RPC.
    pub fn id(&self) -> u64 {
        self.id
    }
    /// Index of the owning socket.
    pub fn socket(&self) -> u16 {
        self.socket
    }
    /// Index of the peer in the peer table.
    pub fn peer(&self) -> u16 {
        self.peer
    }
    /// The peer's address.
    pub fn peer_addr(&self) -> IpAddr {
        self.peer_addr
    }
    /// The peer's port.
    pub fn peer_port(&self) -> u16 {
        self.peer_port
    }
    /// Our port in this RPC.
    pub fn local_port(&self) -> u16 {
        self.local_port
    }
    /// Our address its packets leave from.
    pub fn local(&self) -> Local {
        self.local
    }
    /// Where it is in its life.
    pub fn state(&self) -> State {
        self.state
    }
    /// Arrival order.
    pub fn birth(&self) -> u64 {
        self.birth
    }
    /// Ticks since the peer last showed life.
    pub fn silent_ticks(&self) -> u32 {
        self.silent_ticks
    }
    /// The outgoing message, once there is one.
    pub fn outgoing(&self) -> Option<&MsgOut> {
        self.out.as_ref()
    }
    /// The incoming message, once its first packet came.
    pub fn incoming(&self) -> Option<&MsgIn> {
        self.inp.as_ref()
    }
    /// The control packets it has due: (GRANT, RESENDs, NEED_ACK).
    pub fn control_due(&self) -> (bool, bool, bool) {
        let grant = self.inp.as_ref().is_some_and(|m| m.grant_pending);
        (grant, self.resend_due, self.need_ack_due)
    }

    /// A header from this RPC to its peer carrying `kind`.
    pub fn repr<'p>(&self, kind: Kind<'p>) -> Repr<'p> {
        Repr {
            sport: self.local_port,
            dport: self.peer_port,
            sender_id: self.id,
            kind,
        }
    }

    /// Has DATA to send: retransmissions, or new bytes it may send.
    #[inline]
    pub fn wants_send(&self) -> bool {
        self.out
            .as_ref()
            .is_some_and(|o| !o.resend.is_empty() || (self.state.sends() && o.can_send_new()))
    }

    /// Its key in the send heaps: (no retransmission pending, bytes left
    /// to send once).
    #[inline]
    pub fn send_key(&self) -> (bool, u32) {
        self.out
            .as_ref()
            .map_or((true, u32::MAX), |o| (o.resend.is_empty(), o.bytes_left()))
    }

    /// Its heap keys (see `queues`).
    pub fn keys(&self) -> HeapKeys {
        HeapKeys {
            send: self.send_key(),
            grant: self
                .inp
                .as_ref()
                .map_or(u32::MAX, |m| m.length() - m.received()),
        }
    }

    /// Whether it may get grants: receiving, with pool pages, not granted
    /// whole.
    pub fn grant_candidate(&self) -> bool {
        matches!(self.state, State::ClientIncoming | State::ServerIncoming)
            && self
                .inp
                .as_ref()
                .is_some_and(|m| m.buf.is_some() && m.granted < m.length())
    }

    /// Its share of the endpoint's incoming total: the granted-but-missing
    /// bytes of a scheduled message with pool pages.
    pub fn counted(&self) -> u32 {
        self.inp
            .as_ref()
            .filter(|m| m.buf.is_some() && m.scheduled)
            .map_or(0, |m| m.outstanding())
    }

    /// The pool pages its messages hold.
    pub fn pages_held(&self) -> usize {
        self.inp
            .as_ref()
            .and_then(|m| m.buf.as_ref())
            .map_or(0, |b| b.page_count())
            + self.out.as_ref().map_or(0, |o| o.buf.page_count())
    }

    /// Whether DATA described by `h` may come to this RPC: the state takes
    /// DATA, and the message is the one begun (or may begin there). Changes
    /// nothing; [`Rpc::on_data`] stores it.
    pub fn accepts_data(&self, h: &DataHeader) -> Result<(), DropReason> {
        if !self.state.receives() {
            return Err(DropReason::WrongState);
        }
        match self.inp.as_ref() {
            Some(m) if m.length() != h.message_length => Err(DropReason::BadRange),
            // The message's first bytes: reassembly must be able to begin there.
            None if leaves_tiny_hole(h.offset) => Err(DropReason::TooManyGaps),
            _ => Ok(()),
        }
    }

    /// DATA `payload` at `h.offset` that [`Rpc::accepts_data`] let in. The
    /// response's first packet ends the request (the server answers only a
    /// whole one: its pages go back to the pool). The message takes pool
    /// pages when it has none, if `alloc` allows. `unsched` is our
    /// `Config::unsched_bytes`.
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub fn on_data(
        &mut self,
        h: &DataHeader,
        payload: &[u8],
        pool: &mut Pool<'_>,
        unsched: u32,
        alloc: bool,
    ) -> DataVerdict {
        if matches!(self.state, State::ClientOutgoing) {
            self.set_state(State::ClientIncoming);
            if let Some(out) = self.out.take() {
                pool.free(out.buf);
            }
        }
        let server = !self.state.is_client();
        let m = self
            .inp
            .get_or_insert_with(|| MsgIn::new(h.message_length, h.incoming, unsched));
        if m.buf.is_none() {
            let got = if alloc {
                pool.alloc(m.length() as usize).ok()
            } else {
                None
            };
            match got {
                Some(b) => m.buf = Some(b),
                None => {
                    return DataVerdict::NeedPages {
                        len: m.length(),
                        server,
                    }
                }
            }
        }
        let len = payload.len() as u32;
        let Some(buf) = m.buf.as_mut() else {
            return DataVerdict::Dropped(DropReason::NoBuffer);
        };
        match m.asm.add(h.offset, len, &mut PoolStore::new(pool, buf)) {
            // Only new bytes are progress: a replayed packet must not keep
            // an RPC (and its pool pages) alive.
            AddOutcome::New => {
                self.silent_ticks = 0;
                m.pace.new_bytes(h.retransmit);
            }
            AddOutcome::Duplicate => {
                // A retransmission of bytes we had may show a slow sender.
                m.pace.duplicate(h.retransmit);
                return DataVerdict::Dropped(DropReason::Duplicate);
            }
            AddOutcome::OutOfRange | AddOutcome::StoreFailed => {
                return DataVerdict::Dropped(DropReason::BadRange)
            }
            AddOutcome::TooManyGaps | AddOutcome::TinyHole | AddOutcome::TooFar => {
                return DataVerdict::Dropped(DropReason::TooManyGaps)
            }
        }
        // Cannot fail: the tracker accepted the range inside the message.
        let _ = pool.write_at(buf, h.offset as usize, payload);
        // The sender may overshoot a grant to the end of a packet that
        // began inside it. A packet beyond the grant (a lie, or bytes the
        // sender took) grants nothing: counted as granted, its end would
        // make the whole message granted-but-missing and take the grant
        // headroom from every other message.
        if h.offset < m.granted {
            m.granted = m.granted.max(h.offset + len);
        }
        // Progress: the next RESEND round is a whole silence away, so all
        // granted so far will be overdue by then if it has not come.
        m.due = m.granted;
        if !m.is_complete() {
            return DataVerdict::Stored;
        }
        match self.state {
            State::ClientIncoming => self.set_state(State::ClientDone),
            State::ServerIncoming => self.set_state(State::ServerReady),
            _ => return DataVerdict::Stored,
        }
        DataVerdict::Completed
    }

    /// Pool pages `buf` for the incoming message that had none (freed if
    /// it has some, or there is none).
    pub fn give_pages(&mut self, buf: MessageBuf, pool: &mut Pool<'_>) {
        match self.inp.as_mut().filter(|m| m.buf.is_none()) {
            Some(m) => m.buf = Some(buf),
            None => pool.free(buf),
        }
    }

    /// Pool pages `buf` came for the incoming message that waited for them:
    /// its sender is asked to start again, so the silence starts again too.
    pub fn pages_came(&mut self, buf: MessageBuf, pool: &mut Pool<'_>) {
        self.give_pages(buf, pool);
        self.silent_ticks = 0;
    }

    /// A GRANT up to `offset` at `priority` (capped at `top`) for the
    /// message we send; `unsched` is our `Config::unsched_bytes`. False if
    /// we send nothing now (a wrong-state drop).
    pub fn on_grant(&mut self, offset: u32, priority: u8, top: u8, unsched: u32) -> bool {
        if !matches!(self.state, State::ClientOutgoing | State::ServerOutgoing) {
            return false;
        }
        let Some(out) = self.out.as_mut() else {
            return false;
        };
        let left = out.next_xmit < out.length;
        let cap = resend_cap(unsched, out.seg);
        out.ration.granted(offset.min(out.length), cap, out.seg);
        out.granted = out.granted.max(offset.min(out.length));
        out.sched_priority = priority.min(top);
        // Only a GRANT for a message we still send is a sign of life: one
        // for a request still arriving, or for a message sent whole
        // (repeated instead of an ACK), must not keep the RPC and its
        // pages alive.
        if left {
            self.silent_ticks = 0;
        }
        true
    }

    /// A RESEND for `[offset, offset + length)` (`length` may be
    /// `RESEND_ALL`) at `priority` (capped at `top`); `unsched` is our
    /// `Config::unsched_bytes`, `interval` the RESEND interval in ticks.
    pub fn on_resend(
        &mut self,
        offset: u32,
        length: u32,
        priority: u8,
        top: u8,
        unsched: u32,
        interval: u32,
    ) -> ResendVerdict {
        let owes = matches!(
            self.state,
            State::ServerIncoming | State::ServerReady | State::ServerInService
        );
        let out = match self.out.as_mut() {
            // A server still receiving or computing owes its response: BUSY
            // keeps the client from timing out (docs/protocol.md 4.7).
            Some(out) if !owes => out,
            // Our request is answered (or failed): nothing to send, and
            // only a server says BUSY.
            _ if self.state.is_client() => return ResendVerdict::Ignored,
            _ => {
                // A client asking while its request waits for our pool
                // space is alive: the wait is ours, not its silence.
                if self.inp.as_ref().is_some_and(|m| m.buf.is_none()) {
                    self.silent_ticks = 0;
                }
                return ResendVerdict::Busy;
            }
        };
        // A client waiting for our response is alive: not silence. (Not a
        // server naming our request: as in Linux it shows life with BUSY
        // when we ask, and RESENDs, easily forged, must not keep a request
        // to a dead server and its pages for ever, docs/protocol.md 4.7.)
        if !self.state.is_client() {
            self.silent_ticks = 0;
        }
        let tx_end = out.next_xmit;
        let end = if length == crate::wire::homa::RESEND_ALL {
            tx_end
        } else {
            offset.saturating_add(length)
        };
        // One RESEND schedules at most `cap` bytes again, and grants at
        // most `cap` beyond what was sent (see `resend_cap`).
        let cap = resend_cap(unsched, out.seg);
        let end = end.min(out.length).min(offset.saturating_add(cap));
        // Lost-GRANT recovery: asking for bytes means they are granted.
        let grant = end.min(tx_end.saturating_add(cap));
        if grant > out.granted {
            out.granted = grant;
        }
        if offset >= tx_end {
            return ResendVerdict::Busy;
        }
        if self.stale_ticks == RESENDS_SPENT
            || !out.request_resend(offset, end, priority.min(top), cap, interval)
        {
            // Still a sign of life (above), but no more bytes this interval.
            net_debug!("homa: RESEND for rpc {}: over its ration", self.id);
            return ResendVerdict::Rationed;
        }
        ResendVerdict::Queued
    }

    /// BUSY from the server: it is alive.
    pub fn on_busy(&mut self) {
        self.silent_ticks = 0;
    }

    /// An RPC_UNKNOWN: the peer has no such RPC. A client request silent
    /// long enough to have asked (`resend` ticks) starts over at most once
    /// per `interval` ticks and [`MAX_RESTARTS`] times (its unscheduled
    /// packets go again, at most `unsched` bytes of them, see
    /// `resend_cap`); after that its first packet goes again at
    /// `priority`, from its resend ration. A server RPC's client has gone.
    pub fn on_rpc_unknown(
        &mut self,
        interval: u32,
        resend: u32,
        priority: u8,
        unsched: u32,
    ) -> UnknownVerdict {
        match self.state {
            // A server says RPC_UNKNOWN only in answer to our RESEND, which
            // goes only after `resend` silent ticks: one that comes sooner
            // (the server showed life since, or we were still sending)
            // answers nothing we asked, whoever sent it.
            State::ClientOutgoing if self.silent_ticks < resend => {
                net_debug!("homa: RPC_UNKNOWN for rpc {}: not asked", self.id);
                UnknownVerdict::Ignored
            }
            State::ClientOutgoing => {
                let spent = self.stale_ticks == RESENDS_SPENT;
                let Some(out) = self.out.as_mut() else {
                    return UnknownVerdict::Ignored;
                };
                let cap = resend_cap(unsched, out.seg);
                match self.restarts.restart(interval) {
                    Restart::Over => {
                        // Linux sends everything sent so far again; here
                        // the request starts over as a new message whose
                        // unscheduled bytes go at once (a 28-byte packet,
                        // easily forged, must not buy a megabyte) and the
                        // rest when the server grants or asks for it
                        // (docs/protocol.md 4.7).
                        out.start_over(cap);
                        UnknownVerdict::Restarted
                    }
                    Restart::Knock => {
                        // The server may still lack room: its first packet
                        // is enough for it to take the request and ask for
                        // the rest, and costs a forger's packet no more.
                        if !spent {
                            let _ = out.request_resend(0, 1, priority, cap, interval);
                        }
                        net_debug!("homa: RPC_UNKNOWN for rpc {}: restarts spent", self.id);
                        UnknownVerdict::Spent
                    }
                    Restart::TooSoon => {
                        net_debug!("homa: RPC_UNKNOWN for rpc {}: restarted lately", self.id);
                        UnknownVerdict::TooSoon
                    }
                }
            }
            s if !s.is_client() => UnknownVerdict::Forgotten,
            _ => {
                net_debug!("homa: RPC_UNKNOWN for rpc {} ignored", self.id);
                UnknownVerdict::Ignored
            }
        }
    }

    /// The scheduler grants the incoming message up to `granted` at
    /// `priority`: a GRANT is due. False if that raises nothing.
    ///
    /// A grant made while the peer was heard since the last tick is as old
    /// as the silence when a RESEND round comes, so the round may ask for
    /// it; one made during a silence waits for the round after (see
    /// `MsgIn::due`).
    pub fn grant(&mut self, granted: u32, priority: u8) -> bool {
        let heard = self.silent_ticks == 0;
        match self.inp.as_mut() {
            Some(m) if granted > m.granted => {
                if heard {
                    m.due = granted;
                }
                m.granted = granted;
                m.grant_priority = priority;
                m.grant_pending = true;
                true
            }
            _ => false,
        }
    }

    /// The application answers the request with `out`: the request's
    /// pages go back to the pool. False (and `out`'s pages back to the
    /// pool) unless the application holds the request.
    pub fn reply(&mut self, out: MsgOut, pool: &mut Pool<'_>) -> bool {
        if !matches!(self.state, State::ServerInService) {
            pool.free(out.buf);
            return false;
        }
        self.free_request(pool);
        self.out = Some(out);
        self.set_state(State::ServerOutgoing);
        self.silent_ticks = 0;
        self.done_ticks = 0;
        true
    }

    /// Gives a server RPC's request pages back to the pool.
    pub fn free_request(&mut self, pool: &mut Pool<'_>) {
        if let Some(b) = self.inp.take().and_then(|m| m.buf) {
            pool.free(b);
        }
    }

    /// Ends an unfinished client RPC with `error`: its pages go back to the
    /// pool at once. False (nothing changed) if it is no unfinished client
    /// RPC.
    pub fn fail(&mut self, error: RpcError, pool: &mut Pool<'_>) -> bool {
        if !self.state.is_client() || self.state.is_finished() {
            return false;
        }
        self.set_state(State::ClientFailed(error));
        if let Some(out) = self.out.take() {
            pool.free(out.buf);
        }
        if let Some(b) = self.inp.take().and_then(|m| m.buf) {
            pool.free(b);
        }
        true
    }

    /// Gives the RPC's pages back to the pool, as it is freed.
    pub fn free_pages(&mut self, pool: &mut Pool<'_>) {
        if let Some(out) = self.out.take() {
            pool.free(out.buf);
        }
        if let Some(b) = self.inp.take().and_then(|m| m.buf) {
            pool.free(b);
        }
    }

    /// The news for the application, once: a request to serve (the
    /// application holds it from now), a response, or a failure.
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub fn take_event(&mut self) -> Option<News> {
        if self.reported || !self.state.reportable() {
            return None;
        }
        self.reported = true;
        let len = self.inp.as_ref().map_or(0, |m| m.length() as usize);
        Some(match self.state {
            State::ServerReady => {
                self.set_state(State::ServerInService);
                News::Request(len)
            }
            State::ClientFailed(e) => News::Failed(e),
            _ => News::Response(len),
        })
    }

    /// One tick fell due, with the peer's link address known (`resolved`)
    /// or not: advances the RPC's tick counts (its silence, a NEED_ACK's
    /// wait, its restart and resend rations' intervals). The endpoint
    /// counts a tick before it reads a poll's frames and judges it
    /// ([`Rpc::on_tick`]) after them: what a frame ends (a silence) it ends
    /// before the silence is judged, and what a frame starts (a silence, a
    /// restart's hold) starts after the tick, which fell due first.
    pub fn count_tick(&mut self, rules: &TickRules, resolved: bool) {
        self.restarts.tick();
        if let Some(out) = self.out.as_mut() {
            out.ration.tick();
        }
        if let Some(m) = self.inp.as_mut() {
            m.pace.tick();
        }
        if matches!(self.state, State::ServerOutgoing) {
            self.count_done(rules.request_ack);
        }
        // Whom it waits on as the tick fell due: what the poll's frames
        // then queue (a RESEND's bytes to send again) is no sign of the
        // peer's life; only what resets the silence itself is.
        self.silent_ticks = if self.waiting(resolved) == Waiting::No {
            0
        } else {
            // Saturating: a message waiting on our own grants never times
            // out, and a tick a millisecond wraps a u32 in 49.7 days.
            self.silent_ticks.saturating_add(1)
        };
    }

    /// Whom the RPC waits on, with its peer's link address known
    /// (`resolved`) or not.
    fn waiting(&self, resolved: bool) -> Waiting {
        match self.state {
            State::ClientDone
            | State::ClientFailed(_)
            | State::ServerReady
            | State::ServerInService => Waiting::No,
            State::ServerOutgoing | State::ClientOutgoing => {
                let busy = self
                    .out
                    .as_ref()
                    .is_some_and(|o| o.can_send_new() || !o.resend.is_empty());
                if busy && resolved {
                    Waiting::No
                } else {
                    Waiting::OnPeer
                }
            }
            State::ClientIncoming | State::ServerIncoming => {
                // Waiting for pool space counts as silence (unlike in
                // Linux): with a bounded pool a message that can never
                // fit would wait for ever.
                let waiting_on_us = self.inp.as_ref().is_some_and(|m| {
                    m.buf.is_some() && m.asm.hole_count() == 0 && m.asm.recv_end() >= m.granted
                });
                if waiting_on_us && resolved {
                    Waiting::OnUs
                } else {
                    Waiting::OnPeer
                }
            }
        }
    }

    /// The tick [`Rpc::count_tick`] counted, judged once the poll's frames
    /// are read: says what is due or over.
    pub fn on_tick(&mut self, rules: &TickRules, resolved: bool) -> TickVerdict {
        if self.stale(rules.stale, resolved) {
            if !self.state.is_client() {
                net_debug!(
                    "homa: server rpc {} freed: RESENDs without progress for {} ticks",
                    self.id,
                    rules.stale
                );
                return TickVerdict::Stale;
            }
            // A client's request: nothing more goes again (as the server
            // frees its RPC) until it has new bytes to send.
            self.stale_ticks = RESENDS_SPENT;
        }
        let mut due = matches!(self.state, State::ServerOutgoing) && self.need_ack_due;
        let waiting = self.waiting(resolved);
        if waiting == Waiting::No {
            return if due {
                TickVerdict::Due
            } else {
                TickVerdict::Quiet
            };
        }
        let silent = self.silent_ticks;
        // RESEND times: at `resend` ticks of silence, then every
        // `interval`; for a sender shown to be slower than that (see
        // `msg_in::Pace`) both are doubled, once per showing.
        let patience = self.inp.as_ref().map_or(0, |m| m.pace.patience());
        let (first, every) = (rules.resend << patience, rules.interval.max(1) << patience);
        let resend_time = silent >= first && (silent - first).is_multiple_of(every);
        if waiting == Waiting::OnUs {
            // The sender waits on our grants: repeat the GRANT so it knows
            // we are alive.
            if resend_time {
                if let Some(m) = self.inp.as_mut() {
                    m.grant_pending = true;
                    due = true;
                }
            }
            return if due {
                TickVerdict::Due
            } else {
                TickVerdict::Silent
            };
        }
        if silent >= rules.timeout {
            let error = if !resolved {
                RpcError::Unresolved
            } else if self.unreachable {
                RpcError::PeerUnreachable
            } else {
                RpcError::TimedOut
            };
            return TickVerdict::TimedOut(error);
        }
        if !resend_time {
            return if due {
                TickVerdict::Due
            } else {
                TickVerdict::Silent
            };
        }
        // A sender has nothing to ask for: its peer's RESENDs and GRANTs
        // drive it, and the timeout ends it.
        if !matches!(self.state, State::ServerOutgoing) && resolved {
            self.resend_due = true;
            due = true;
        }
        TickVerdict::Doubt { due }
    }

    /// The count of ticks without progress, which RESENDs may not bridge
    /// for ever: true when it reached `limit`.
    fn stale(&mut self, limit: u32, resolved: bool) -> bool {
        let progress = match self.state {
            State::ServerOutgoing | State::ClientOutgoing => {
                resolved && self.out.as_ref().is_some_and(|o| o.can_send_new())
            }
            State::ServerIncoming => self.inp.as_ref().is_some_and(|m| m.buf.is_some()),
            _ => true,
        };
        if progress {
            self.stale_ticks = 0;
            return false;
        }
        if u32::from(self.stale_ticks) + 1 >= limit {
            return true;
        }
        self.stale_ticks += 1;
        false
    }

    /// A server's count of ticks since its response went out whole: a
    /// NEED_ACK falls due every tick from `request_ack` on.
    fn count_done(&mut self, request_ack: u32) {
        let sent = self
            .out
            .as_ref()
            .is_none_or(|o| o.next_xmit >= o.length && o.resend.is_empty());
        if !sent {
            self.done_ticks = 0;
            return;
        }
        self.done_ticks = self.done_ticks.saturating_add(1);
        if u32::from(self.done_ticks) >= request_ack.min(0xFFFF) {
            self.need_ack_due = true;
        }
    }

    /// ICMP said the peer is unreachable (a soft error): a client RPC
    /// that times out fails as unreachable instead.
    pub fn note_unreachable(&mut self) {
        self.unreachable = self.state.is_client();
    }

    /// The GRANT due, taken: its header.
    pub fn take_grant(&mut self) -> Option<Repr<'static>> {
        let m = self.inp.as_mut().filter(|m| m.grant_pending)?;
        m.grant_pending = false;
        let kind = Kind::Grant {
            offset: m.granted,
            priority: m.grant_priority,
        };
        Some(self.repr(kind))
    }

    /// The NEED_ACK due, taken: its header.
    pub fn take_need_ack(&mut self) -> Option<Repr<'static>> {
        if !core::mem::take(&mut self.need_ack_due) {
            return None;
        }
        Some(self.repr(Kind::NeedAck))
    }

    /// RESENDs for everything the incoming message misses are due: the
    /// sender said (NEED_ACK) it sent the whole message, so all of it is
    /// overdue.
    pub fn ask_resend(&mut self) {
        if let Some(m) = self.inp.as_mut() {
            m.due = m.granted;
        }
        self.resend_due = true;
    }

    /// The next ranges of a RESEND round, into `ranges` (each gap, and the
    /// missing tail as far as it is overdue, see `MsgIn::due`; everything
    /// when nothing has arrived; none while the message waits for pool
    /// pages). True when more remain than `ranges` holds.
    pub fn resend_ranges<const N: usize>(
        &mut self,
        pool: &mut Pool<'_>,
        ranges: &mut heapless::Vec<(u32, u32), N>,
    ) -> bool {
        match self.inp.as_mut() {
            Some(m) => m.missing(pool, ranges),
            None => {
                let _ = ranges.push((0, crate::wire::homa::RESEND_ALL));
                false
            }
        }
    }

    /// A RESEND round went out up to `until` (exclusive): with `more`
    /// ranges left the next round goes on from there; else the round is
    /// over and nothing is due.
    pub fn resend_sent(&mut self, more: bool, until: u32) {
        if let Some(m) = self.inp.as_mut() {
            m.resend_from = if more { until } else { 0 };
            if !more {
                // The next round is an interval away: what is granted now
                // is overdue then.
                m.due = m.granted;
            }
        }
        if !more {
            self.resend_due = false;
        }
    }

    /// A RESEND round stopped before the range at `offset`: the next one
    /// starts there, so no range is asked for twice in a round.
    pub fn resend_resume(&mut self, offset: u32) {
        if let Some(m) = self.inp.as_mut() {
            // Ranges ending at or before `resend_from` are skipped, and the
            // ones before this end before its start.
            m.resend_from = offset;
        }
    }

    /// The header of the DATA packet `[start, end)` about to go (cut for
    /// packets of `seg` payload bytes if it is the message's first). A
    /// retransmission announces the end of what was asked for (Linux sends
    /// the end of the resent range), a first transmission the unscheduled
    /// bytes.
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub fn data_header(
        &mut self,
        start: u32,
        end: u32,
        retransmit: bool,
        seg: u32,
    ) -> Option<DataHeader> {
        let out = self.out.as_mut()?;
        if !retransmit && out.next_xmit == 0 {
            // Cut at the first transmission, for the device as it is now.
            out.cut(seg);
        }
        let incoming = if retransmit {
            out.resend.last_end().max(end)
        } else {
            out.unscheduled
        };
        Some(DataHeader {
            message_length: out.length,
            incoming,
            ack: None,
            cutoff_version: 0,
            retransmit,
            offset: start,
        })
    }

    /// Copies the outgoing message's bytes from `start` into `dst`.
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub fn read_out(&mut self, pool: &Pool<'_>, start: u32, dst: &mut [u8]) {
        if let Some(out) = self.out.as_mut() {
            // Cannot fail: the range lies inside the message.
            let _ = pool.read_at(&mut out.buf, start as usize, dst);
        }
    }

    /// DATA `[start, end)` went to the NIC.
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub fn data_sent(&mut self, start: u32, end: u32, retransmit: bool) {
        let Some(out) = self.out.as_mut() else {
            return;
        };
        if retransmit {
            let _ = out.resend.clear(start);
        } else {
            out.next_xmit = end;
        }
    }

    /// Test support: every tick count at its maximum.
    #[cfg(test)]
    pub fn saturate_ticks(&mut self) {
        self.done_ticks = u16::MAX;
        self.silent_ticks = u32::MAX;
    }
}

/// Whom an RPC waits on, for the tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Waiting {
    /// Not waiting on anyone (not silent).
    No,
    /// On our own grants.
    OnUs,
    /// On the peer.
    OnPeer,
}

/// News for the application from [`Rpc::take_event`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum News {
    /// A request of this many bytes to serve.
    Request(usize),
    /// A response of this many bytes.
    Response(usize),
    /// The RPC failed.
    Failed(RpcError),
}

/// What an RPC_UNKNOWN naming a client request may do (see
/// [`Rpc::on_rpc_unknown`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Restart {
    /// Start the request over.
    Over,
    /// Its restarts are spent: send its first packet again.
    Knock,
    /// The last restart was less than a RESEND interval ago: ignore it.
    TooSoon,
}

/// How many times RPC_UNKNOWN may start one client request over; later
/// ones send its first packet again (knock), and none fails it.
///
/// An RPC_UNKNOWN is easily forged from the server's address. A start
/// sends the unscheduled bytes again (at most
/// [`RESEND_MAX_BYTES`](super::RESEND_MAX_BYTES)) and lets the server's
/// GRANTs draw the whole message again, so starts are rationed: only in
/// answer to our RESEND (the RPC silent for `Config::resend_ticks`), at
/// most one per `Config::resend_interval` (an honest server says
/// RPC_UNKNOWN only in answer to a RESEND, which goes no faster), and this
/// many in all. A server forgets a request when every packet of it was
/// lost, its table was full, or it dropped the RPC (an abort, a timeout):
/// two starts give a request it took and dropped twice its whole message
/// at once. Beyond them a packet suffices: a server with room takes the
/// request from its first packet and asks for the rest, which the resend
/// ration pays for; a knock costs a forger's packet no more than one DATA
/// packet, and a server whose table is full is knocked at until a slot
/// frees, for as long as the RPC's silence timeout allows (Linux never
/// fails a client RPC on RPC_UNKNOWN).
pub const MAX_RESTARTS: u8 = 2;

/// A client's `stale_ticks` once RESENDs kept its request without progress
/// for the RESEND life (`RESEND_LIFE_TIMEOUTS`): what RESENDs and
/// RPC_UNKNOWN would make it send again is refused until it progresses (a
/// server RPC is freed instead). Never reached by counting: the life is
/// capped at 65,535 ticks.
const RESENDS_SPENT: u16 = u16::MAX;

/// How often RPC_UNKNOWN started a client request over, and the ticks
/// before it may act again, in one `u16` (it keeps the slot within its
/// size): the count in the top 4 bits, the ticks in the low 12 (a longer
/// `Config::resend_interval` holds for 4,095 ticks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Restarts(u16);

impl Restarts {
    const HOLD: u16 = 0x0fff;

    /// One tick passed.
    pub fn tick(&mut self) {
        if self.0 & Self::HOLD != 0 {
            self.0 -= 1;
        }
    }

    /// An RPC_UNKNOWN names this client request: whether it may start over
    /// now (at most once per `interval` ticks, [`MAX_RESTARTS`] times in
    /// all), or knock again.
    pub fn restart(&mut self, interval: u32) -> Restart {
        if self.0 & Self::HOLD != 0 {
            return Restart::TooSoon;
        }
        let count = (self.0 >> 12) as u8;
        let hold = u16::try_from(interval.min(u32::from(Self::HOLD))).unwrap_or(Self::HOLD);
        if count >= MAX_RESTARTS {
            self.0 = (self.0 & !Self::HOLD) | hold;
            return Restart::Knock;
        }
        self.0 = (u16::from(count + 1) << 12) | hold;
        Restart::Over
    }
}
