//! The Homa endpoint: sockets, RPCs and the poll loop.
//!
//! Sans-IO and poll-driven, like smoltcp and quinn-proto: application calls
//! ([`Endpoint::send_request`], [`Endpoint::reply`], ...) only change state;
//! [`Endpoint::poll`] reads frames from the device, runs the 1 ms timer when
//! due, and turns state into frames. [`Endpoint::poll_at`] tells when the next
//! poll is needed, so a loop can sleep exactly that long. The endpoint never
//! reads a clock and never allocates: every table and the message pool come
//! from the caller, and a full table gives an error or a counted drop.
//!
//! Inside, one file per concern: [`grant`] (the receiver's scheduler),
//! [`pacer`] (the sender's order and NIC-queue estimate), `peer`, `rpc`
//! (state), `input` (handling each Homa packet type), `output` (building
//! frames), `timer` (RESEND, timeouts, NEED_ACK) and `iface` (Ethernet, ARP,
//! IPv4, ICMP).

pub mod grant;
mod iface;
mod input;
mod output;
pub mod pacer;
mod peer;
mod resources;
mod rpc;
mod timer;

use core::fmt;

use heapless::Deque;
use managed::ManagedSlice;

use crate::config::{Config, ConfigError};
use crate::phy::Device;
use crate::stats::Stats;
use crate::storage::{MessageRef, Pool, PoolError};
use crate::time::{Duration, Instant};
use crate::wire::homa::{Ack, MAX_MESSAGE_LENGTH};
use crate::wire::{EthernetAddress, Ipv4Addr};

pub use peer::PeerSlot;
pub use resources::{EndpointResources, DEFAULT_PAGE_SIZE};
pub use rpc::RpcSlot;
use rpc::{MsgOut, Rpc, State};

/// The first automatic (client) port; server ports are below it.
pub const MIN_CLIENT_PORT: u16 = 0x8000;

/// Control packets that can wait for transmission at once.
const CTRL_QUEUE: usize = 32;

/// One entry of the caller-supplied socket table.
#[derive(Debug, Clone, Copy)]
pub struct SocketSlot {
    sock: Option<Socket>,
}

impl SocketSlot {
    /// An empty slot, for building tables: `[SocketSlot::EMPTY; 4]`.
    pub const EMPTY: SocketSlot = SocketSlot { sock: None };
}

impl Default for SocketSlot {
    fn default() -> Self {
        Self::EMPTY
    }
}

#[derive(Debug, Clone, Copy)]
struct Socket {
    /// Automatic port used as the source of this socket's requests.
    client_port: u16,
    /// Bound port on which the socket accepts requests.
    server_port: Option<u16>,
}

/// A socket: an index into the socket table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SocketHandle(u16);

/// An RPC: its slot and its id, so a handle to a freed slot is never mistaken
/// for the RPC that reuses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RpcHandle {
    slot: u16,
    id: u64,
}

impl RpcHandle {
    /// The RPC id as this endpoint knows it (even: we are the client; odd: server).
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl fmt::Display for RpcHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rpc {}", self.id)
    }
}

/// What [`Endpoint::rpc_info`] reports of one RPC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RpcInfo {
    /// Local id (even: client, odd: server).
    pub id: u64,
    /// The peer.
    pub peer: Ipv4Addr,
    /// The peer's port.
    pub peer_port: u16,
    /// Where the RPC is in its life, e.g. `"client-outgoing"`.
    pub state: &'static str,
    /// Length of the outgoing message (0 if none).
    pub out_length: u32,
    /// Bytes of it sent once.
    pub out_sent: u32,
    /// Bytes of it the receiver granted.
    pub out_granted: u32,
    /// Length of the incoming message (0 if none yet).
    pub in_length: u32,
    /// Bytes of it received.
    pub in_received: u32,
    /// Bytes of it granted to the sender.
    pub in_granted: u32,
    /// Whether the incoming message has its pool pages.
    pub in_has_buffer: bool,
    /// Ticks since DATA, GRANT or BUSY arrived.
    pub silent_ticks: u32,
}

/// Something the application should know about, from [`Endpoint::recv`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Event {
    /// A whole request arrived: read it with [`Endpoint::message`], answer
    /// with [`Endpoint::reply`].
    Request {
        /// The server RPC.
        rpc: RpcHandle,
        /// The client's address.
        peer: Ipv4Addr,
        /// The client's port.
        port: u16,
        /// Request length in bytes.
        len: usize,
    },
    /// A whole response arrived: read it with [`Endpoint::message`], then
    /// [`Endpoint::release`] the RPC.
    Response {
        /// The client RPC.
        rpc: RpcHandle,
        /// Response length in bytes.
        len: usize,
    },
    /// A client RPC failed; [`Endpoint::release`] it.
    Failed {
        /// The client RPC.
        rpc: RpcHandle,
        /// Why.
        error: RpcError,
    },
}

/// Why a client RPC failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RpcError {
    /// The server was silent for `timeout_ticks`.
    TimedOut,
    /// ICMP said no socket listens on the server port.
    PortUnreachable,
    /// ICMP said the host or the Homa protocol is unreachable.
    PeerUnreachable,
    /// The peer's link address could not be resolved (no ARP reply) for
    /// `timeout_ticks`.
    Unresolved,
    /// The device's MTU shrank below the size the message was cut for.
    MtuShrank,
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RpcError::TimedOut => "timed out",
            RpcError::PortUnreachable => "port unreachable",
            RpcError::PeerUnreachable => "peer unreachable",
            RpcError::Unresolved => "peer address could not be resolved",
            RpcError::MtuShrank => "device MTU shrank below the message's packets",
        })
    }
}

impl core::error::Error for RpcError {}

/// Why a socket could not be created or bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum BindError {
    /// The socket table is full.
    TableFull,
    /// Server ports are 1..=0x7fff.
    InvalidPort,
    /// Another socket is bound to the port.
    InUse,
}

impl fmt::Display for BindError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BindError::TableFull => "socket table full",
            BindError::InvalidPort => "server ports are 1..=32767",
            BindError::InUse => "port in use",
        })
    }
}

impl core::error::Error for BindError {}

/// Why a request or response could not be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SendError {
    /// The RPC table is full: retry after RPCs complete.
    TableFull,
    /// The peer table is full of peers with live RPCs.
    PeerTableFull,
    /// The message pool has no room for the message now: retry later.
    PoolFull,
    /// Longer than 1,000,000 bytes, or longer than the whole pool.
    MessageTooLong,
    /// Homa has no zero-length messages.
    Empty,
    /// The socket handle is stale.
    NoSuchSocket,
    /// The RPC handle is stale or the RPC is not one that can take this call.
    NoSuchRpc,
    /// The destination is not a unicast address or port 0.
    InvalidDestination,
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SendError::TableFull => "RPC table full",
            SendError::PeerTableFull => "peer table full",
            SendError::PoolFull => "message pool full",
            SendError::MessageTooLong => "message too long",
            SendError::Empty => "empty message",
            SendError::NoSuchSocket => "no such socket",
            SendError::NoSuchRpc => "no such RPC",
            SendError::InvalidDestination => "invalid destination",
        })
    }
}

impl core::error::Error for SendError {}

/// What `Endpoint::new` found wrong with its storage or configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SetupError {
    /// A configuration value is out of range.
    Config(ConfigError),
    /// The pool buffer cannot hold one page, or the page size is invalid.
    Pool(PoolError),
    /// A table is empty or has more than 65535 entries.
    TableSize,
}

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetupError::Config(e) => write!(f, "configuration: {e}"),
            SetupError::Pool(e) => write!(f, "message pool: {e}"),
            SetupError::TableSize => f.write_str("tables need 1..=65535 entries"),
        }
    }
}

impl core::error::Error for SetupError {}

/// A control packet waiting to be sent.
#[derive(Debug, Clone)]
struct Ctrl {
    addr: Ipv4Addr,
    /// Link address when known at queue time (replies to strangers).
    link_addr: Option<EthernetAddress>,
    sport: u16,
    dport: u16,
    sender_id: u64,
    kind: CtrlKind,
}

#[derive(Debug, Clone)]
enum CtrlKind {
    Resend {
        offset: u32,
        length: u32,
        priority: u8,
    },
    RpcUnknown,
    Busy,
    Cutoffs,
    /// An ACK packet of a full batch of acks: the first names the RPC in
    /// the header (`sender_id` and `dport` come from it), the rest are its
    /// entries.
    Acks(heapless::Vec<Ack, { peer::ACK_BATCH }>),
    /// An ACK packet of whatever acks wait for the peer when it is sent
    /// (answering NEED_ACK promptly without one packet per NEED_ACK).
    AcksWaiting,
}

/// A Homa endpoint: one IPv4 address, its sockets and RPCs, over any `Device`.
pub struct Endpoint<'a> {
    config: Config,
    rpcs: ManagedSlice<'a, RpcSlot>,
    peers: ManagedSlice<'a, PeerSlot>,
    sockets: ManagedSlice<'a, SocketSlot>,
    pool: Pool<'a>,
    ctrl: Deque<Ctrl, CTRL_QUEUE>,
    pacer: pacer::Pacer,
    stats: Stats,
    /// Sequence number of the next client RPC; its id is built from it and
    /// the RPC's slot (see `client_id`).
    next_seq: u64,
    /// Slot of the server RPC found last: packets come in bursts per RPC.
    last_server_slot: core::cell::Cell<usize>,
    /// Next automatic port to try.
    next_port: u16,
    /// Arrival counter for RPC births.
    births: u64,
    next_tick: Instant,
    next_fifo_grant: Instant,
    /// Something changed that may change grants.
    grants_dirty: bool,
    /// Pool space was freed: messages waiting for buffers may get some.
    pool_freed: bool,
    /// Payload bytes per DATA packet at the current MTU.
    max_payload: u32,
    /// Link rate the pacer uses.
    link_mbps: u32,
    /// ICMP errors we may still send in this tick (bounds work under floods).
    icmp_budget: u32,
    /// DATA is waiting and the pacer holds it until this instant.
    throttled_until: Option<Instant>,
    /// Some RPC may have a GRANT, RESEND or NEED_ACK due (cleared by a scan
    /// that finds none left), so egress need not scan every slot each poll.
    rpc_ctrl_due: bool,
    /// Some RPC may hold a result the application has not been told of.
    maybe_ready: bool,
    /// Some incoming message may be waiting for pool space.
    waiting_for_buffers: bool,
    /// Where the next scan for per-RPC control packets starts, so that when
    /// the device or the budget runs out, no RPC is always last.
    ctrl_cursor: usize,
    /// What the device said it can do, at the last poll.
    caps: crate::phy::DeviceCapabilities,
    /// The time of the last poll: application calls take no clock.
    now: Instant,
}

/// The id of client RPC number `seq` in `slot`: even, unique per endpoint
/// (the sequence never repeats within 2^47 RPCs), and naming its slot so a
/// response finds its RPC without a search.
fn client_id(seq: u64, slot: usize) -> u64 {
    (((seq & 0x7fff_ffff_ffff) << 16) | slot as u64) << 1
}

/// The slot a client id names.
fn client_slot(id: u64) -> usize {
    ((id >> 1) & 0xffff) as usize
}

/// ICMP errors sent per tick at most.
pub(super) const ICMP_PER_TICK: u32 = 32;

impl<'a> Endpoint<'a> {
    /// An endpoint over caller-supplied tables and message pool memory.
    ///
    /// `pool` is split into pages of `page_size` bytes (a power of two; 4 bytes
    /// of each page's share go to the page table). Messages up to 1,000,000
    /// bytes are accepted when the pool can hold them.
    pub fn new(
        config: Config,
        rpcs: impl Into<ManagedSlice<'a, RpcSlot>>,
        peers: impl Into<ManagedSlice<'a, PeerSlot>>,
        sockets: impl Into<ManagedSlice<'a, SocketSlot>>,
        pool: &'a mut [u8],
        page_size: usize,
    ) -> Result<Endpoint<'a>, SetupError> {
        config.validate().map_err(SetupError::Config)?;
        let rpcs = rpcs.into();
        let peers = peers.into();
        let sockets = sockets.into();
        for len in [rpcs.len(), peers.len(), sockets.len()] {
            if len == 0 || len > usize::from(u16::MAX) {
                return Err(SetupError::TableSize);
            }
        }
        let pool = Pool::new(pool, page_size).map_err(SetupError::Pool)?;
        let max_payload = (config.mtu - 20 - crate::wire::homa::DATA_HEADER_LEN) as u32;
        let link_mbps = config.link_mbps;
        let first_seq = 1 + (config.random_seed & 0xffff_ffff);
        let mut ep = Endpoint {
            pacer: pacer::Pacer::new(link_mbps),
            config,
            rpcs,
            peers,
            sockets,
            pool,
            ctrl: Deque::new(),
            stats: Stats::default(),
            next_seq: first_seq,
            last_server_slot: core::cell::Cell::new(0),
            next_port: MIN_CLIENT_PORT,
            births: 0,
            next_tick: Instant::ZERO,
            next_fifo_grant: Instant::ZERO,
            grants_dirty: false,
            pool_freed: false,
            max_payload,
            link_mbps,
            icmp_budget: ICMP_PER_TICK,
            throttled_until: None,
            rpc_ctrl_due: false,
            maybe_ready: false,
            waiting_for_buffers: false,
            ctrl_cursor: 0,
            caps: crate::phy::DeviceCapabilities::default(),
            now: Instant::ZERO,
        };
        for s in ep.rpcs.iter_mut() {
            s.rpc = None;
        }
        for s in ep.peers.iter_mut() {
            s.peer = None;
        }
        for s in ep.sockets.iter_mut() {
            s.sock = None;
        }
        Ok(ep)
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Live RPCs (client and server).
    pub fn rpcs_in_use(&self) -> usize {
        self.rpcs.iter().filter(|s| s.rpc.is_some()).count()
    }

    /// One record per live RPC, like Linux's `HOMAIOCINFO`: for debugging
    /// and monitoring.
    pub fn rpc_info(&self) -> impl Iterator<Item = RpcInfo> + '_ {
        self.rpcs
            .iter()
            .filter_map(|s| s.rpc.as_ref())
            .map(|r| RpcInfo {
                id: r.id,
                peer: r.peer_addr,
                peer_port: r.peer_port,
                state: r.state.name(),
                out_length: r.out.as_ref().map_or(0, |o| o.length),
                out_sent: r.out.as_ref().map_or(0, |o| o.next_xmit),
                out_granted: r.out.as_ref().map_or(0, |o| o.granted),
                in_length: r.inp.as_ref().map_or(0, |m| m.length),
                in_received: r.inp.as_ref().map_or(0, |m| m.received()),
                in_granted: r.inp.as_ref().map_or(0, |m| m.granted),
                in_has_buffer: r.inp.as_ref().is_some_and(|m| m.buf.is_some()),
                silent_ticks: r.silent_ticks,
            })
    }

    /// Peers in the peer table.
    pub fn peers_in_use(&self) -> usize {
        self.peers.iter().filter(|s| s.peer.is_some()).count()
    }

    /// Free bytes of the message pool (whole pages).
    pub fn pool_free_bytes(&self) -> usize {
        self.pool.free_bytes()
    }

    /// Total bytes of the message pool (whole pages).
    pub fn pool_capacity_bytes(&self) -> usize {
        self.pool.capacity_bytes()
    }

    /// Sets the link address of `addr` by hand (no ARP needed for it).
    pub fn add_neighbor(
        &mut self,
        now: Instant,
        addr: Ipv4Addr,
        link_addr: EthernetAddress,
    ) -> Result<(), SendError> {
        let p = self.peer_index(addr, now).ok_or(SendError::PeerTableFull)?;
        if let Some(peer) = self.peers[usize::from(p)].peer.as_mut() {
            peer.link_addr = Some(link_addr);
        }
        Ok(())
    }

    /// A client socket with an automatic port (0x8000 and up).
    pub fn socket(&mut self) -> Result<SocketHandle, BindError> {
        let slot = self
            .sockets
            .iter()
            .position(|s| s.sock.is_none())
            .ok_or(BindError::TableFull)?;
        let port = self.free_client_port().ok_or(BindError::TableFull)?;
        self.sockets[slot].sock = Some(Socket {
            client_port: port,
            server_port: None,
        });
        Ok(SocketHandle(slot as u16))
    }

    /// A socket that accepts requests on `port` (1..=0x7fff); it can also
    /// send requests from its own automatic port.
    pub fn bind(&mut self, port: u16) -> Result<SocketHandle, BindError> {
        if port == 0 || port >= MIN_CLIENT_PORT {
            return Err(BindError::InvalidPort);
        }
        if self
            .sockets
            .iter()
            .any(|s| matches!(s.sock, Some(k) if k.server_port == Some(port)))
        {
            return Err(BindError::InUse);
        }
        let h = self.socket()?;
        if let Some(s) = self.sockets[usize::from(h.0)].sock.as_mut() {
            s.server_port = Some(port);
        }
        Ok(h)
    }

    /// The socket's automatic (client) port.
    pub fn client_port(&self, socket: SocketHandle) -> Option<u16> {
        self.sockets
            .get(usize::from(socket.0))?
            .sock
            .map(|s| s.client_port)
    }

    /// Closes a socket, dropping all its RPCs without telling peers (like
    /// Linux `close`: servers will time out NEED_ACKs, clients get RPC_UNKNOWN).
    pub fn close(&mut self, socket: SocketHandle) {
        let Some(slot) = self.sockets.get_mut(usize::from(socket.0)) else {
            return;
        };
        slot.sock = None;
        for i in 0..self.rpcs.len() {
            if matches!(&self.rpcs[i].rpc, Some(r) if r.socket == socket.0) {
                self.free_rpc(i);
            }
        }
    }

    /// An automatic port no socket uses; `None` when all 32768 are taken.
    fn free_client_port(&mut self) -> Option<u16> {
        for _ in MIN_CLIENT_PORT..=u16::MAX {
            let p = self.next_port;
            self.next_port = if p == u16::MAX {
                MIN_CLIENT_PORT
            } else {
                p + 1
            };
            if !self
                .sockets
                .iter()
                .any(|s| matches!(s.sock, Some(k) if k.client_port == p))
            {
                return Some(p);
            }
        }
        None
    }

    /// Starts an RPC: sends `data` as a request to `port` at `dest`. The data
    /// is copied into the pool; the next `poll` starts sending it.
    pub fn send_request(
        &mut self,
        socket: SocketHandle,
        dest: Ipv4Addr,
        port: u16,
        data: &[u8],
    ) -> Result<RpcHandle, SendError> {
        let sock = self
            .sockets
            .get(usize::from(socket.0))
            .and_then(|s| s.sock)
            .ok_or(SendError::NoSuchSocket)?;
        if port == 0 || dest.is_broadcast() || dest.is_multicast() || dest.is_unspecified() {
            return Err(SendError::InvalidDestination);
        }
        let slot = self
            .rpcs
            .iter()
            .position(|s| s.rpc.is_none())
            .ok_or(SendError::TableFull)?;
        let now = self.now;
        let peer = self.peer_index(dest, now).ok_or(SendError::PeerTableFull)?;
        let out = self.new_msgout(peer, data)?;
        let id = client_id(self.next_seq, slot);
        self.next_seq = self.next_seq.wrapping_add(1).max(1);
        self.births += 1;
        let mut rpc = Rpc::new(
            id,
            socket.0,
            peer,
            dest,
            port,
            sock.client_port,
            State::ClientOutgoing,
            self.births,
        );
        rpc.out = Some(out);
        self.insert_rpc(slot, rpc);
        net_trace!(
            "homa: rpc {} request of {} bytes to {}:{}",
            id,
            data.len(),
            dest,
            port
        );
        Ok(RpcHandle {
            slot: slot as u16,
            id,
        })
    }

    fn new_msgout(&mut self, peer: u16, data: &[u8]) -> Result<MsgOut, SendError> {
        if data.is_empty() {
            return Err(SendError::Empty);
        }
        if data.len() > MAX_MESSAGE_LENGTH as usize || data.len() > self.pool.capacity_bytes() {
            return Err(SendError::MessageTooLong);
        }
        let mut buf = self
            .pool
            .alloc(data.len())
            .map_err(|_| SendError::PoolFull)?;
        // Cannot fail: the buffer was just sized for the data.
        let _ = self.pool.write_at(&mut buf, 0, data);
        let length = data.len() as u32;
        let unscheduled = self.config.unsched_bytes.min(length).max(1);
        if let Some(p) = self.peers[usize::from(peer)].peer.as_mut() {
            p.last_used = self.now;
        }
        Ok(MsgOut {
            buf,
            length,
            seg: self.max_payload,
            unscheduled,
            granted: unscheduled,
            next_xmit: 0,
            sched_priority: 0,
            resend: crate::storage::resend::ResendSet::new(
                crate::storage::resend::PacketGrid::new(self.max_payload, unscheduled, length),
            ),
        })
    }

    /// The next event for `socket`: a request to serve, a response, or a
    /// failed RPC, oldest first.
    pub fn recv(&mut self, socket: SocketHandle) -> Option<Event> {
        if !self.maybe_ready {
            return None;
        }
        let mut best: Option<(u64, usize)> = None;
        let mut others = false;
        for (i, s) in self.rpcs.iter().enumerate() {
            let Some(r) = &s.rpc else { continue };
            if r.reported || !matches!(r.state, State::ServerReady | State::ClientDone) {
                continue;
            }
            if r.socket != socket.0 {
                others = true;
            } else if best.is_none_or(|(b, _)| r.birth < b) {
                best = Some((r.birth, i));
            }
        }
        if best.is_none() && !others {
            self.maybe_ready = false;
        }
        let (_, i) = best?;
        let r = self.rpcs[i].rpc.as_mut()?;
        r.reported = true;
        let rpc = RpcHandle {
            slot: i as u16,
            id: r.id,
        };
        let len = r.inp.as_ref().map_or(0, |m| m.length as usize);
        Some(match (r.state, r.error) {
            (State::ServerReady, _) => {
                r.state = State::ServerInService;
                Event::Request {
                    rpc,
                    peer: r.peer_addr,
                    port: r.peer_port,
                    len,
                }
            }
            (_, Some(error)) => Event::Failed { rpc, error },
            _ => Event::Response { rpc, len },
        })
    }

    /// The received message of an RPC: the request of a server RPC in
    /// service, or the response of a completed client RPC.
    pub fn message(&self, rpc: RpcHandle) -> Option<MessageRef<'_>> {
        let r = self.rpc(rpc)?;
        if !matches!(r.state, State::ServerInService | State::ClientDone) {
            return None;
        }
        let buf = r.inp.as_ref()?.buf.as_ref()?;
        Some(self.pool.message(buf))
    }

    /// Answers a request taken with [`Endpoint::recv`]. The response is
    /// copied into the pool and the request's memory freed. When the pool
    /// has no room even with the request's pages, the call fails with
    /// [`SendError::PoolFull`] and the request stays readable for a retry.
    pub fn reply(&mut self, rpc: RpcHandle, data: &[u8]) -> Result<(), SendError> {
        let peer = match self.rpc(rpc) {
            Some(r) if r.state == State::ServerInService => r.peer,
            _ => return Err(SendError::NoSuchRpc),
        };
        let slot = usize::from(rpc.slot);
        let out = match self.new_msgout(peer, data) {
            Err(SendError::PoolFull) => {
                // The request's own pages may be what the response needs:
                // give them up only if that makes room, so a failed reply
                // leaves the request readable for a retry.
                let request_pages = self.rpcs[slot]
                    .rpc
                    .as_ref()
                    .and_then(|r| r.inp.as_ref()?.buf.as_ref())
                    .map_or(0, |b| b.page_count());
                let needed = crate::storage::pages_for(data.len(), self.pool.page_size());
                if self.pool.free_pages() + request_pages < needed {
                    return Err(SendError::PoolFull);
                }
                self.free_request(slot);
                self.new_msgout(peer, data)?
            }
            other => other?,
        };
        self.free_request(slot);
        if let Some(r) = self.rpcs[slot].rpc.as_mut() {
            r.out = Some(out);
            r.state = State::ServerOutgoing;
            r.silent_ticks = 0;
            r.done_ticks = 0;
        }
        Ok(())
    }

    /// Gives a server RPC's request pages back to the pool.
    fn free_request(&mut self, slot: usize) {
        if let Some(inp) = self.rpcs[slot].rpc.as_mut().and_then(|r| r.inp.take()) {
            if let Some(b) = inp.buf {
                self.pool.free(b);
                self.pool_freed = true;
            }
        }
    }

    /// Frees a finished client RPC (after its response was read or its
    /// failure seen), and queues the ack that lets the server free its side.
    pub fn release(&mut self, rpc: RpcHandle) -> Result<(), SendError> {
        let (state, error) = match self.rpc(rpc) {
            Some(r) if r.state.is_client() => (r.state, r.error),
            _ => return Err(SendError::NoSuchRpc),
        };
        if state == State::ClientDone && error.is_none() {
            self.queue_ack(usize::from(rpc.slot));
        }
        self.free_rpc(usize::from(rpc.slot));
        Ok(())
    }

    /// Abandons an RPC at once. A client RPC is freed without telling the
    /// server (which will find out through RPC_UNKNOWN); a server RPC is
    /// freed without a response (the client will time out or restart).
    pub fn abort(&mut self, rpc: RpcHandle) -> Result<(), SendError> {
        if self.rpc(rpc).is_none() {
            return Err(SendError::NoSuchRpc);
        }
        self.free_rpc(usize::from(rpc.slot));
        Ok(())
    }

    fn rpc(&self, h: RpcHandle) -> Option<&Rpc> {
        self.rpcs
            .get(usize::from(h.slot))?
            .rpc
            .as_ref()
            .filter(|r| r.id == h.id)
    }

    /// Puts a new RPC in `slot`; its peer counts it.
    fn insert_rpc(&mut self, slot: usize, rpc: Rpc) {
        if let Some(p) = self.peers[usize::from(rpc.peer)].peer.as_mut() {
            p.rpcs = p.rpcs.saturating_add(1);
            p.last_used = self.now;
        }
        self.rpcs[slot].rpc = Some(rpc);
    }

    /// Ends an unfinished client RPC with `error`: its pages go back to the
    /// pool at once and the application is told through [`Event::Failed`].
    fn fail_client_rpc(&mut self, slot: usize, error: RpcError) {
        let Some(r) = self.rpcs.get_mut(slot).and_then(|s| s.rpc.as_mut()) else {
            return;
        };
        if !r.state.is_client() || r.state == State::ClientDone {
            return;
        }
        r.state = State::ClientDone;
        r.error = Some(error);
        r.reported = false;
        let out = r.out.take();
        let inp = r.inp.take();
        if let Some(out) = out {
            self.pool.free(out.buf);
        }
        if let Some(b) = inp.and_then(|m| m.buf) {
            self.pool.free(b);
        }
        self.pool_freed = true;
        self.maybe_ready = true;
        self.grants_dirty = true;
        self.stats.client_failed += 1;
    }

    /// Frees an RPC slot and its pool pages.
    fn free_rpc(&mut self, slot: usize) {
        let Some(r) = self.rpcs[slot].rpc.take() else {
            return;
        };

        if let Some(p) = self.peers[usize::from(r.peer)].peer.as_mut() {
            p.rpcs = p.rpcs.saturating_sub(1);
        }
        if let Some(out) = r.out {
            self.pool.free(out.buf);
        }
        if let Some(inp) = r.inp {
            if let Some(b) = inp.buf {
                self.pool.free(b);
            }
        }
        self.pool_freed = true;
        self.grants_dirty = true;
    }

    /// The index of the peer at `addr`, if it is in the table.
    fn find_peer(&self, addr: Ipv4Addr) -> Option<u16> {
        self.peers
            .iter()
            .position(|p| matches!(&p.peer, Some(p) if p.addr == addr))
            .map(|i| i as u16)
    }

    /// The index of the peer at `addr`, created if needed: only for an RPC
    /// about to exist (a request we send, or one that arrived), so strangers
    /// that hold no RPC never take an entry. A full table evicts the least
    /// recently used peer no RPC refers to; peers count their RPCs, so this
    /// is one pass over the peer table.
    fn peer_index(&mut self, addr: Ipv4Addr, now: Instant) -> Option<u16> {
        if let Some(i) = self.find_peer(addr) {
            return Some(i);
        }
        let free = self.peers.iter().position(|p| p.peer.is_none());
        let slot = match free {
            Some(i) => i,
            None => {
                let victim = self
                    .peers
                    .iter()
                    .enumerate()
                    .filter_map(|(i, p)| p.peer.as_ref().map(|p| (i, p)))
                    .filter(|(_, p)| p.rpcs == 0)
                    .min_by_key(|(_, p)| p.last_used)
                    .map(|(i, _)| i);
                match victim {
                    Some(i) => {
                        self.stats.peers_evicted += 1;
                        i
                    }
                    None => {
                        self.count_drop(crate::stats::Drop::PeerTableFull);
                        return None;
                    }
                }
            }
        };
        self.peers[slot].peer = Some(peer::Peer::new(addr, now));
        Some(slot as u16)
    }

    /// Queues the ack of a completed client RPC on its peer.
    fn queue_ack(&mut self, slot: usize) {
        let Some(r) = self.rpcs[slot].rpc.as_ref() else {
            return;
        };
        let ack = Ack {
            client_id: r.id,
            server_port: r.peer_port,
        };
        let (pi, addr, sport) = (r.peer, r.peer_addr, r.local_port);
        self.add_ack(pi, addr, sport, ack, false);
    }

    /// Adds an ack to the peer's batch: acks ride on the next DATA to that
    /// peer, and each full batch becomes one ACK packet. With `now`, an ACK
    /// packet taking what waits goes out at the next poll anyway (one queued
    /// per peer at a time). Acks are unreliable (docs/protocol.md 4.8): when the
    /// control queue is full they are dropped, counted, and the server's
    /// NEED_ACK asks again.
    fn add_ack(&mut self, pi: u16, addr: Ipv4Addr, sport: u16, ack: Ack, now: bool) {
        let Some(peer) = self.peers[usize::from(pi)].peer.as_mut() else {
            return;
        };
        let _ = peer.acks.push(ack);
        let link_addr = peer.link_addr;
        let kind = if peer.acks.is_full() {
            CtrlKind::Acks(core::mem::take(&mut peer.acks))
        } else if now && !peer.ack_flush_queued {
            peer.ack_flush_queued = true;
            CtrlKind::AcksWaiting
        } else {
            return;
        };
        let lost = match &kind {
            CtrlKind::Acks(batch) => batch.len() as u64,
            _ => 0,
        };
        let queued = self.push_ctrl(Ctrl {
            addr,
            link_addr,
            sport,
            dport: 0,
            sender_id: 0,
            kind,
        });
        if !queued {
            self.stats.acks_dropped += lost;
            if let Some(p) = self.peers[usize::from(pi)].peer.as_mut() {
                p.ack_flush_queued = false;
            }
        }
    }

    /// Queues a control packet; false (and a counted drop) when the queue
    /// is full.
    fn push_ctrl(&mut self, c: Ctrl) -> bool {
        if self.ctrl.push_back(c).is_err() {
            self.count_drop(crate::stats::Drop::ControlQueueFull);
            return false;
        }
        true
    }

    /// Processes received frames, runs the timer when due and sends what is
    /// ready. Call it again by [`Endpoint::poll_at`], and after any
    /// application call that should send something.
    ///
    /// Time is the caller's: `now` should not go backwards, but nothing
    /// breaks if it does or if it jumps. A jump ahead runs one tick, not one
    /// per missed millisecond (a late poll is not silence). A step back
    /// pulls every deadline and timestamp that lies beyond the new `now`
    /// back to it, so one poll with a clock a day ahead delays nothing
    /// once the clock is right again.
    pub fn poll<D: Device + ?Sized>(&mut self, now: Instant, device: &mut D) {
        if now < self.now {
            self.rebase(now);
        }
        self.now = now;
        self.caps = device.capabilities();
        self.adapt_to_device();
        if now >= self.next_tick {
            self.tick();
            // One tick per poll: a late poll does not count missed ticks as silence.
            self.next_tick = if now >= self.next_tick + self.config.tick {
                now + self.config.tick
            } else {
                self.next_tick + self.config.tick
            };
        }
        self.ingress(now, device);
        if self.pool_freed {
            self.pool_freed = false;
            self.give_waiting_buffers();
        }
        self.egress(now, device);
    }

    /// `now` went backwards: nothing may stay scheduled or stamped in the
    /// future it left.
    fn rebase(&mut self, now: Instant) {
        net_debug!("homa: clock went back from {} to {}", self.now, now);
        self.next_tick = self.next_tick.min(now + self.config.tick);
        self.next_fifo_grant = self.next_fifo_grant.min(now);
        self.pacer.rebase(now);
        for p in self.peers.iter_mut().filter_map(|p| p.peer.as_mut()) {
            p.confirmed = p.confirmed.min(now);
            p.last_used = p.last_used.min(now);
            p.arp_sent = p.arp_sent.map(|t| t.min(now));
            p.cutoffs_sent = p.cutoffs_sent.map(|t| t.min(now));
        }
    }

    fn adapt_to_device(&mut self) {
        let caps = &self.caps;
        let link_overhead = 14
            + if matches!(
                self.config.priority_encoding,
                crate::config::PriorityEncoding::Vlan { .. }
            ) {
                4
            } else {
                0
            };
        let ip_mtu = self
            .config
            .mtu
            .min(caps.max_transmission_unit.saturating_sub(link_overhead));
        let payload = ip_mtu
            .saturating_sub(20 + crate::wire::homa::DATA_HEADER_LEN)
            .max(1);
        self.max_payload = payload as u32;
        let mbps = caps.link_rate_mbps.unwrap_or(self.config.link_mbps);
        if mbps != self.link_mbps {
            self.link_mbps = mbps;
            self.pacer.set_rate(mbps);
        }
    }

    /// When [`Endpoint::poll`] should run next: `Some(t)` with `t <= now`
    /// means at once; `None` means only when a frame arrives or the
    /// application calls in.
    pub fn poll_at(&self) -> Option<Instant> {
        if !self.ctrl.is_empty() || self.grants_dirty || self.rpc_ctrl_due {
            return Some(Instant::ZERO);
        }
        let mut at: Option<Instant> = None;
        let mut earliest = |t: Instant| at = Some(at.map_or(t, |a: Instant| a.min(t)));
        let mut any_rpc = false;
        for r in self.rpcs.iter().filter_map(|s| s.rpc.as_ref()) {
            any_rpc = true;
            if let Some(out) = &r.out {
                if !out.resend.is_empty() {
                    return Some(Instant::ZERO);
                }
                if out.can_send_new() && self.peer_resolved(r.peer) {
                    match self.throttled_until {
                        Some(t) => earliest(t),
                        None => return Some(Instant::ZERO),
                    }
                }
            }
        }
        if any_rpc {
            earliest(self.next_tick);
            if self.config.grant_fifo_fraction > 0 {
                earliest(self.next_fifo_grant);
            }
        }
        at
    }

    /// [`Endpoint::poll_at`] relative to `now`: `Some(Duration::ZERO)` means
    /// poll at once, `None` means no timer is pending.
    pub fn poll_delay(&self, now: Instant) -> Option<Duration> {
        self.poll_at().map(|t| t - now)
    }

    fn peer_resolved(&self, peer: u16) -> bool {
        self.peers
            .get(usize::from(peer))
            .and_then(|p| p.peer.as_ref())
            .is_some_and(|p| p.link_addr.is_some())
    }

    /// Gives pool pages to messages that were waiting for them, oldest first,
    /// and asks their senders to start again (Linux sends RESEND(0, all)).
    fn give_waiting_buffers(&mut self) {
        if !self.waiting_for_buffers {
            return;
        }
        loop {
            let waiting = self
                .rpcs
                .iter()
                .enumerate()
                .filter_map(|(i, s)| s.rpc.as_ref().map(|r| (i, r)))
                .filter(|(_, r)| r.inp.as_ref().is_some_and(|m| m.buf.is_none()))
                .min_by_key(|(_, r)| r.birth)
                .map(|(i, r)| (i, r.inp.as_ref().map_or(0, |m| m.length)));
            let Some((i, len)) = waiting else {
                self.waiting_for_buffers = false;
                return;
            };
            let Ok(buf) = self.pool.alloc(len as usize) else {
                return;
            };
            let prio = self.config.num_priorities.saturating_sub(2);
            let Some(r) = self.rpcs[i].rpc.as_mut() else {
                return;
            };
            if let Some(m) = r.inp.as_mut() {
                m.buf = Some(buf);
            }
            r.silent_ticks = 0;
            let c = Ctrl {
                addr: r.peer_addr,
                link_addr: None,
                sport: r.local_port,
                dport: r.peer_port,
                sender_id: r.id,
                kind: CtrlKind::Resend {
                    offset: 0,
                    length: crate::wire::homa::RESEND_ALL,
                    priority: prio,
                },
            };
            self.push_ctrl(c);
            self.grants_dirty = true;
        }
    }
}

#[cfg(test)]
mod tests;
