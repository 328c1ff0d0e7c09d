//! RPC state: the client and server state machines, the outgoing message
//! (packetisation, granted, next byte to send, priorities) and the incoming
//! message (reassembly, granted, bytes remaining), and the table of RPCs.

mod msg_in;
mod msg_out;
mod table;

use crate::wire::IpAddr;

pub(crate) use msg_in::MsgIn;
#[cfg(test)]
pub(crate) use msg_out::RESEND_WINDOWS;
pub(crate) use msg_out::{packet_at, MsgOut, Ration};
pub use table::RpcSlot;
pub(in crate::endpoint) use table::{client_id, client_slot};
pub(crate) use table::{ServerTag, BY_PEER, CTRL, READY, SHORT, TABLE, WAIT};

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
        let hold = u16::try_from(interval).map_or(Self::HOLD, |t| t.min(Self::HOLD));
        self.0 = (u16::from(count + 1) << 12) | hold;
        Restart::Now
    }
}
