//! The application's side of the endpoint: sockets, starting RPCs,
//! receiving requests and responses, replying, releasing, and what the
//! endpoint reports of itself. Every call only changes state; the next
//! [`Endpoint::poll`] turns it into frames.

use core::fmt;

use super::rpc::client_id;
use super::rpc::{MsgOut, News, Rpc, State, READY};
use super::Endpoint;
use super::{BindError, RpcError, SendError};
use crate::config::Config;
use crate::stats::Stats;
use crate::storage::{IndexLink, IndexNode, List, ListLink, ListNode};
use crate::storage::{MessageRef, MessageWriter};
use crate::time::Instant;
use crate::wire::homa::MAX_MESSAGE_LENGTH;
use crate::wire::{EthernetAddress, IpAddr};

/// The first automatic (client) port; server ports are below it.
pub const MIN_CLIENT_PORT: u16 = 0x8000;

/// One entry of the caller-supplied socket table, with the links that find
/// it by port (every packet names one) without a walk over the table.
#[derive(Debug, Clone, Copy)]
pub struct SocketSlot {
    pub(crate) sock: Option<Socket>,
    /// In the free list of socket slots.
    free: ListLink,
    /// In the index by client port, and by server port.
    by_client_port: IndexLink,
    by_server_port: IndexLink,
}

impl SocketSlot {
    /// An empty slot, for building tables: `[SocketSlot::EMPTY; 4]`.
    pub const EMPTY: SocketSlot = SocketSlot {
        sock: None,
        free: ListLink::EMPTY,
        by_client_port: IndexLink::EMPTY,
        by_server_port: IndexLink::EMPTY,
    };
}

/// The free list of socket slots (the one kind of list sockets have).
pub(crate) const SOCKET_FREE: u8 = 0;
/// Marker of the socket index by client port.
pub(crate) struct ClientPortTag;
/// Marker of the socket index by server port.
pub(crate) struct ServerPortTag;

impl ListNode for SocketSlot {
    fn list_link(&self, _kind: u8) -> &ListLink {
        &self.free
    }
    fn list_link_mut(&mut self, _kind: u8) -> &mut ListLink {
        &mut self.free
    }
}

impl IndexNode<ClientPortTag> for SocketSlot {
    fn index_link(&self) -> &IndexLink {
        &self.by_client_port
    }
    fn index_link_mut(&mut self) -> &mut IndexLink {
        &mut self.by_client_port
    }
}

impl IndexNode<ServerPortTag> for SocketSlot {
    fn index_link(&self) -> &IndexLink {
        &self.by_server_port
    }
    fn index_link_mut(&mut self) -> &mut IndexLink {
        &mut self.by_server_port
    }
}

impl Default for SocketSlot {
    fn default() -> Self {
        Self::EMPTY
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Socket {
    /// Automatic port used as the source of this socket's requests.
    pub(crate) client_port: u16,
    /// Bound port on which the socket accepts requests.
    pub(crate) server_port: Option<u16>,
    /// Its RPCs with something for the application, in order.
    pub(crate) ready: List,
}

/// A socket: an index into the socket table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SocketHandle(pub(crate) u16);

/// An RPC: its slot, its id and its birth (the endpoint's count of RPCs
/// made when it was made), so a handle to a freed slot is never mistaken
/// for the RPC that reuses it. The id alone would not do: a server RPC's id
/// is its client's choice, so a newcomer may bring the id of the RPC it
/// replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RpcHandle {
    pub(crate) slot: u16,
    pub(crate) id: u64,
    pub(crate) birth: u64,
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
    pub peer: IpAddr,
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
        peer: IpAddr,
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

impl<'a> Endpoint<'a> {
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
        self.live.len()
    }

    /// One record per live RPC, like Linux's `HOMAIOCINFO`: for debugging
    /// and monitoring.
    pub fn rpc_info(&self) -> impl Iterator<Item = RpcInfo> + '_ {
        self.live
            .iter(&self.rpcs[..])
            .filter_map(|i| self.rpc_at(usize::from(i)))
            .map(|r| {
                let (out, inp) = (r.outgoing(), r.incoming());
                RpcInfo {
                    id: r.id(),
                    peer: r.peer_addr(),
                    peer_port: r.peer_port(),
                    state: r.state().name(),
                    out_length: out.map_or(0, |o| o.length()),
                    out_sent: out.map_or(0, |o| o.next_xmit()),
                    out_granted: out.map_or(0, |o| o.granted()),
                    in_length: inp.map_or(0, |m| m.length()),
                    in_received: inp.map_or(0, |m| m.received()),
                    in_granted: inp.map_or(0, |m| m.granted()),
                    in_has_buffer: inp.is_some_and(|m| m.buf().is_some()),
                    silent_ticks: r.silent_ticks(),
                }
            })
    }

    /// Peers in the peer table.
    pub fn peers_in_use(&self) -> usize {
        self.peers.len() - self.peer_free.len()
    }

    /// Free bytes of the message pool (whole pages).
    pub fn pool_free_bytes(&self) -> usize {
        self.pool.free_bytes()
    }

    /// Total bytes of the message pool (whole pages).
    pub fn pool_capacity_bytes(&self) -> usize {
        self.pool.capacity_bytes()
    }

    /// Sets the link address of `addr` (IPv4 or IPv6) by hand: no ARP or
    /// neighbour discovery is needed for it, none changes it, it is never
    /// probed, and its peer entry is pinned: never evicted for another
    /// peer, however many strangers send requests. A peer table full of
    /// pinned peers and peers with RPCs takes no new peer (see
    /// [`remove_neighbor`](Self::remove_neighbor)).
    pub fn add_neighbor(
        &mut self,
        now: Instant,
        addr: impl Into<IpAddr>,
        link_addr: EthernetAddress,
    ) -> Result<(), SendError> {
        let addr = addr.into();
        let p = self.peer_index(addr, now).ok_or(SendError::PeerTableFull)?;
        if let Some(peer) = self
            .peers
            .get_mut(usize::from(p))
            .and_then(|s| s.peer.as_mut())
        {
            peer.nbr.pin(link_addr);
        }
        self.peer_idle.remove(&mut self.peers[..], p);
        self.peer_resolved_now(p);
        Ok(())
    }

    /// Undoes [`add_neighbor`](Self::add_neighbor) for `addr`: its link
    /// address is kept but believed only as if ARP had named it unasked
    /// (it is asked about when next used), and its peer entry may be
    /// evicted once no RPC refers to it. False when `addr` had no address
    /// set by hand.
    pub fn remove_neighbor(&mut self, addr: impl Into<IpAddr>) -> bool {
        let Some(p) = self.find_peer(addr.into()) else {
            return false;
        };
        let Some(peer) = self
            .peers
            .get_mut(usize::from(p))
            .and_then(|s| s.peer.as_mut())
            .filter(|peer| peer.nbr.pinned())
        else {
            return false;
        };
        peer.nbr.unpin();
        if peer.idle() {
            self.peer_idle.push_back(&mut self.peers[..], p);
        }
        self.peer_doubted(p);
        true
    }

    /// A client socket with an automatic port (0x8000 and up).
    pub fn socket(&mut self) -> Result<SocketHandle, BindError> {
        let slot = self.socket_free.front().ok_or(BindError::TableFull)?;
        let port = self.free_client_port().ok_or(BindError::TableFull)?;
        self.socket_free.pop_front(&mut self.sockets[..]);
        self.sockets[usize::from(slot)].sock = Some(Socket {
            client_port: port,
            server_port: None,
            ready: List::with_id(READY, slot),
        });
        let h = self.hash.port(port);
        self.client_ports.insert(&mut self.sockets[..], slot, h);
        Ok(SocketHandle(slot))
    }

    /// A socket that accepts requests on `port` (1..=0x7fff); it can also
    /// send requests from its own automatic port.
    pub fn bind(&mut self, port: u16) -> Result<SocketHandle, BindError> {
        if port == 0 || port >= MIN_CLIENT_PORT {
            return Err(BindError::InvalidPort);
        }
        if self.server_socket(port).is_some() {
            return Err(BindError::InUse);
        }
        let h = self.socket()?;
        if let Some(s) = self
            .sockets
            .get_mut(usize::from(h.0))
            .and_then(|s| s.sock.as_mut())
        {
            s.server_port = Some(port);
        }
        let hash = self.hash.port(port);
        self.server_ports.insert(&mut self.sockets[..], h.0, hash);
        Ok(h)
    }

    /// The socket serving `port`, found in the index by server port.
    pub(super) fn server_socket(&self, port: u16) -> Option<u16> {
        self.server_ports
            .find(&self.sockets[..], self.hash.port(port), |s| {
                s.sock.is_some_and(|k| k.server_port == Some(port))
            })
    }

    /// The socket whose requests leave from `port`.
    pub(super) fn client_socket(&self, port: u16) -> Option<u16> {
        self.client_ports
            .find(&self.sockets[..], self.hash.port(port), |s| {
                s.sock.is_some_and(|k| k.client_port == port)
            })
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
        if self
            .sockets
            .get(usize::from(socket.0))
            .is_none_or(|s| s.sock.is_none())
        {
            return;
        }
        // Its RPCs go first (out of its ready queue), then the socket.
        let mut cursor = self.live.front();
        while let Some(i) = cursor {
            cursor = self.live.next_of(&self.rpcs[..], i);
            let i = usize::from(i);
            if self.rpc_at(i).is_some_and(|r| r.socket() == socket.0) {
                self.free_rpc(i);
            }
        }
        let i = socket.0;
        if self.sockets[usize::from(i)].sock.take().is_some() {
            self.client_ports.remove(&mut self.sockets[..], i);
            self.server_ports.remove(&mut self.sockets[..], i);
        }
        self.socket_free.push_back(&mut self.sockets[..], i);
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
            if self.client_socket(p).is_none() {
                return Some(p);
            }
        }
        None
    }

    /// Starts an RPC: sends `data` as a request to `port` at `dest` (an
    /// IPv4 or IPv6 address; the endpoint must speak its family). The data
    /// is copied into the pool; the next `poll` starts sending it.
    pub fn send_request(
        &mut self,
        socket: SocketHandle,
        dest: impl Into<IpAddr>,
        port: u16,
        data: &[u8],
    ) -> Result<RpcHandle, SendError> {
        self.send_request_with(socket, dest, port, data.len(), |w| {
            // Cannot fail: the message was sized for the data.
            let _ = w.write_at(0, data);
        })
    }

    /// Starts an RPC whose `len`-byte request `fill` builds in place in the
    /// pool (no copy from a buffer of the caller's): `fill` gets a
    /// [`MessageWriter`] over the message's pages and must write all `len`
    /// bytes. Errors as [`Endpoint::send_request`]; `fill` runs only once
    /// the RPC can start.
    pub fn send_request_with(
        &mut self,
        socket: SocketHandle,
        dest: impl Into<IpAddr>,
        port: u16,
        len: usize,
        fill: impl FnOnce(&mut MessageWriter<'_, 'a>),
    ) -> Result<RpcHandle, SendError> {
        let sock = self
            .sockets
            .get(usize::from(socket.0))
            .and_then(|s| s.sock)
            .ok_or(SendError::NoSuchSocket)?;
        let dest = dest.into();
        let unicast = match dest {
            IpAddr::V4(d) => !(d.is_broadcast() || d.is_multicast() || d.is_unspecified()),
            IpAddr::V6(d) => !(d.is_multicast() || d.is_unspecified()),
        };
        if port == 0 || !unicast || !self.config.speaks(dest) {
            return Err(SendError::InvalidDestination);
        }
        let slot = self.free_slot().ok_or(SendError::TableFull)?;
        let now = self.now;
        let peer = self.peer_index(dest, now).ok_or(SendError::PeerTableFull)?;
        let out = self.new_msgout(peer, len, fill)?;
        let id = client_id(self.next_seq.wrapping_add(self.id_offset(dest)), slot);
        self.next_seq = self.next_seq.wrapping_add(1);
        self.births += 1;
        let rpc = Rpc::client(
            id,
            socket.0,
            peer,
            dest,
            port,
            sock.client_port,
            self.births,
            out,
        );
        self.insert_rpc(slot, rpc, None);
        net_trace!(
            "homa: rpc {} request of {} bytes to {}:{}",
            id,
            len,
            dest,
            port
        );
        Ok(RpcHandle {
            slot: slot as u16,
            id,
            birth: self.births,
        })
    }

    /// Checks a message length against Homa's and the pool's limits.
    fn check_len(&self, len: usize) -> Result<(), SendError> {
        if len == 0 {
            return Err(SendError::Empty);
        }
        if len > MAX_MESSAGE_LENGTH as usize || len > self.pool.capacity_bytes() {
            return Err(SendError::MessageTooLong);
        }
        Ok(())
    }

    /// An outgoing message of `len` bytes built in the pool by `fill`.
    #[inline(never)]
    fn new_msgout(
        &mut self,
        peer: u16,
        len: usize,
        fill: impl FnOnce(&mut MessageWriter<'_, 'a>),
    ) -> Result<MsgOut, SendError> {
        self.check_len(len)?;
        let seg = self
            .peers
            .get(usize::from(peer))
            .and_then(|s| s.peer.as_ref())
            .map_or(self.max_payload, |p| self.payload_for(p.addr));
        let mut buf = self.pool.alloc(len).map_err(|_| SendError::PoolFull)?;
        fill(&mut MessageWriter::new(&mut self.pool, &mut buf));
        let length = len as u32;
        let unscheduled = self.config.unsched_bytes.min(length).max(1);
        if let Some(p) = self
            .peers
            .get_mut(usize::from(peer))
            .and_then(|s| s.peer.as_mut())
        {
            p.last_used = self.now;
        }
        Ok(MsgOut::new(buf, length, seg, unscheduled))
    }

    /// The next event for `socket`: a request to serve, a response, or a
    /// failed RPC, oldest first.
    pub fn recv(&mut self, socket: SocketHandle) -> Option<Event> {
        // The socket's ready queue, in the order its RPCs became ready.
        loop {
            let sock = self.sockets.get_mut(usize::from(socket.0))?.sock.as_mut()?;
            let i = usize::from(sock.ready.pop_front(&mut self.rpcs[..])?);
            let Some(mut r) = self.steady(i) else {
                continue;
            };
            let Some(news) = r.take_event() else {
                continue;
            };
            let rpc = RpcHandle {
                slot: i as u16,
                id: r.id(),
                birth: r.birth(),
            };
            return Some(match news {
                News::Request(len) => Event::Request {
                    rpc,
                    peer: r.peer_addr(),
                    port: r.peer_port(),
                    len,
                },
                News::Response(len) => Event::Response { rpc, len },
                News::Failed(error) => Event::Failed { rpc, error },
            });
        }
    }

    /// The received message of an RPC: the request of a server RPC in
    /// service, or the response of a completed client RPC.
    pub fn message(&self, rpc: RpcHandle) -> Option<MessageRef<'_>> {
        let r = self.rpc(rpc)?;
        if !matches!(r.state(), State::ServerInService | State::ClientDone) {
            return None;
        }
        let buf = r.incoming()?.buf()?;
        Some(self.pool.message(buf))
    }

    /// Answers a request taken with [`Endpoint::recv`]. The response is
    /// copied into the pool and the request's memory freed. When the pool
    /// has no room even with the request's pages, the call fails with
    /// [`SendError::PoolFull`] and the request stays readable for a retry.
    pub fn reply(&mut self, rpc: RpcHandle, data: &[u8]) -> Result<(), SendError> {
        self.reply_with(rpc, data.len(), |w| {
            // Cannot fail: the message was sized for the data.
            let _ = w.write_at(0, data);
        })
    }

    /// Answers a request with a `len`-byte response that `fill` builds in
    /// place in the pool (see [`Endpoint::send_request_with`]). Read what
    /// the response needs of the request before: the request's pages may be
    /// given to the response. Errors as [`Endpoint::reply`].
    pub fn reply_with(
        &mut self,
        rpc: RpcHandle,
        len: usize,
        fill: impl FnOnce(&mut MessageWriter<'_, 'a>),
    ) -> Result<(), SendError> {
        let peer = match self.rpc(rpc) {
            Some(r) if matches!(r.state(), State::ServerInService) => r.peer(),
            _ => return Err(SendError::NoSuchRpc),
        };
        let slot = usize::from(rpc.slot);
        self.check_len(len)?;
        let pages = self.pool.free_pages();
        let needed = crate::storage::pages_for(len, self.pool.page_size());
        if needed > pages {
            // The request's own pages may be what the response needs:
            // give them up only if that makes room, so a failed reply
            // leaves the request readable for a retry.
            let request_pages = self
                .rpc_at(slot)
                .and_then(|r| r.incoming()?.buf())
                .map_or(0, |b| b.page_count());
            if pages + request_pages < needed {
                return Err(SendError::PoolFull);
            }
            self.with_rpc(slot, |r, pool| r.free_request(pool));
        }
        let out = self.new_msgout(peer, len, fill)?;
        self.with_rpc(slot, |r, pool| r.reply(out, pool));
        Ok(())
    }

    /// Frees a finished client RPC (after its response was read or its
    /// failure seen), and queues the ack that lets the server free its side.
    pub fn release(&mut self, rpc: RpcHandle) -> Result<(), SendError> {
        let state = match self.rpc(rpc) {
            Some(r) if r.state().is_client() => r.state(),
            _ => return Err(SendError::NoSuchRpc),
        };
        if matches!(state, State::ClientDone) {
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
}
