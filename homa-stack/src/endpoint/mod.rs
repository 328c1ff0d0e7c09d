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
//! frames), `timer` (RESEND, timeouts, NEED_ACK) and `host` (Ethernet, ARP,
//! IPv4, IPv6 and neighbour discovery, ICMP: the host layer, which hands
//! Homa packets up and knows no RPC).

mod api;
mod ctrl;
mod error;
pub mod grant;
mod host;
mod input;
mod links;
mod neighbour;
mod output;
pub mod pacer;
mod peer;
mod queues;
mod resend;
mod resources;
mod rpc;
mod share;
mod timer;
mod timers;
mod types;

use heapless::Deque;
use managed::ManagedSlice;
use timers::{Timer, TimerTable};

use crate::config::Config;
use crate::phy::Device;
use crate::stats::Stats;
use crate::storage::{Heap, Index, KeyedHash, List, Pool};
use crate::time::{Duration, Instant};

pub use api::{Event, RpcHandle, RpcInfo, SocketHandle, SocketSlot, MIN_CLIENT_PORT};
use ctrl::{Ctrl, CtrlPacket, CTRL_QUEUE};
pub use error::{BindError, RpcError, SendError, SetupError};
pub use peer::PeerSlot;
pub use resources::{EndpointResources, DEFAULT_PAGE_SIZE};
pub use rpc::{RpcSlot, MAX_RESTARTS, RESEND_MAX_BYTES};
pub use timer::RESEND_LIFE_TIMEOUTS;

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
    /// Sequence number of the next client RPC; its id is built from it,
    /// its peer's secret offset and the RPC's slot (see `client_id`). It
    /// starts at a value drawn from the seed, so a rebooted host does not
    /// reuse the ids its previous life may have left in servers.
    next_seq: u64,
    /// RPC slots with no RPC, and slots with one, in the order they were
    /// taken (links in the slots).
    free: List,
    live: List,
    /// Incoming messages waiting for pool space, in the order they began
    /// to wait.
    waiters: List,
    /// RPCs with a GRANT, RESEND or NEED_ACK due.
    ctrl_due: List,
    /// Of `ctrl_due`, those skipped at the last egress for an unresolved
    /// peer: they wait for ARP, not for a poll.
    ctrl_blocked: usize,
    /// RPCs with DATA to send, in SRPT order and by age (see `queues`),
    /// but for those with a short message left: in `send_short`, in the
    /// order they became ready.
    send: Heap,
    send_fifo: Heap,
    send_short: List,
    /// Incoming messages that may get grants, in SRPT order and by age.
    grant: Heap,
    grant_fifo: Heap,
    /// Each peer's best grant candidate, best first (each peer's own
    /// candidates are in its slot's `grants`).
    grant_best: Heap,
    /// Granted-but-missing bytes of scheduled messages with pool space.
    incoming: u64,
    /// Socket slots with no socket; sockets by client and server port.
    socket_free: List,
    client_ports: Index<api::ClientPortTag>,
    server_ports: Index<api::ServerPortTag>,
    /// Peer slots with no peer, and peers no RPC refers to (eviction
    /// order); peers by address; peers whose link address is to be asked.
    peer_free: List,
    peer_idle: List,
    peer_addrs: Index<peer::PeerAddrTag>,
    /// Group leaders by their prefix (see `share`).
    groups: Index<peer::PrefixTag>,
    /// Server RPCs, oldest first, but those the application holds moved
    /// to the back: the candidates to free for a newcomer (see `share`).
    by_age: List,
    /// The peer `peer_index` found or made last: tried before the index,
    /// as RPCs come in runs to one peer (checked by address, so a slot
    /// reused for another peer is simply a miss).
    last_peer: u16,
    resolving: List,
    /// Server RPCs by (peer address, id), keyed by a secret hash.
    servers: Index<rpc::ServerTag>,
    /// The server RPC a DATA packet named last (see `data_server_rpc`).
    last_server: u16,
    hash: KeyedHash,
    /// Next automatic port to try.
    next_port: u16,
    /// Arrival counter for RPC births.
    births: u64,
    /// The tick, the FIFO grant clock, ARP and the pacer's hold.
    timers: TimerTable,
    /// A grant candidate or the incoming total changed (set by `refresh`
    /// only): the scheduler runs at the next egress.
    grants_dirty: bool,
    /// Payload bytes per DATA packet over IPv4 at the current MTU (IPv6's
    /// header is 20 bytes longer: `payload_for`).
    max_payload: u32,
    /// Link rate the pacer uses.
    link_mbps: u32,
    /// ICMP errors we may still send in this tick (bounds work under floods).
    icmp_budget: u32,
    /// The last poll's ingress stopped at `max_rx_per_poll` frames: the
    /// device may hold more, so the next poll is due at once (a runner
    /// woken only by new frames would otherwise sleep on them).
    rx_backlog: bool,
    /// The due tick is counted, not judged yet (see `poll`).
    tick_counted: bool,
    /// What the device said it can do, at the last poll.
    caps: crate::phy::DeviceCapabilities,
    /// The time of the last poll: application calls take no clock.
    now: Instant,
    /// The work of lookups in the indexes peers' packets choose keys for.
    #[cfg(any(test, fuzzing))]
    index_work: core::cell::Cell<IndexWork>,
}

/// What lookups in the indexes of server RPCs and peers cost, whose keys
/// (ids, addresses) peers choose: tests and fuzzing bound the work a packet
/// buys with it ([`Endpoint::take_index_work`]).
#[cfg(any(test, fuzzing))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexWork {
    /// Lookups made.
    pub lookups: u64,
    /// Index entries they examined (a chain walk's length, to the match).
    pub probes: u64,
    /// The most entries one lookup examined.
    pub longest: u32,
}

/// The label of the first client sequence number in [`KeyedHash::derive`].
const FIRST_ID_LABEL: u64 = u64::from_le_bytes(*b"first id");

/// The id in [`KeyedHash::rpc`] whose hash with a peer's address is the
/// offset of that peer's client ids (see `Endpoint::id_offset`): no RPC
/// has it (client ids are never 0, and keys of the server-RPC index are
/// odd local ids).
const ID_OFFSET_LABEL: u64 = 0;

/// ICMP errors sent per tick at most.
pub(super) const ICMP_PER_TICK: u32 = 32;

impl<'a> Endpoint<'a> {
    /// Where the client ids `addr` sees start: a keyed hash of the address,
    /// one way (see `storage::index`). One sequence numbers every client
    /// RPC, so the ids of two RPCs to one peer are as far apart as the RPCs
    /// (unique, never reused soon), while ids to another peer are offset by
    /// a secret: the ids a server sees predict nothing of another's.
    fn id_offset(&self, addr: crate::wire::IpAddr) -> u64 {
        self.hash.rpc(addr, ID_OFFSET_LABEL)
    }

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
        let hash = KeyedHash::new(config.random_seed);
        // Ids go on the wire: derived from the key one way, so they reveal
        // nothing of it (see `storage::index`).
        let first_seq = 1 + (hash.derive(FIRST_ID_LABEL) & 0xffff_ffff);
        let mut rpcs = rpcs;
        for s in rpcs.iter_mut() {
            *s = RpcSlot::EMPTY;
        }
        let servers = Index::new(&mut rpcs[..]);
        let mut free = List::with_id(rpc::TABLE, 0);
        for i in 0..rpcs.len() {
            free.push_back(&mut rpcs[..], i as u16);
        }
        let mut sockets = sockets;
        for s in sockets.iter_mut() {
            *s = SocketSlot::EMPTY;
        }
        let client_ports = Index::new(&mut sockets[..]);
        let server_ports = Index::new(&mut sockets[..]);
        let mut socket_free = List::new(api::SOCKET_FREE);
        for i in 0..sockets.len() {
            socket_free.push_back(&mut sockets[..], i as u16);
        }
        let mut peers = peers;
        for s in peers.iter_mut() {
            *s = PeerSlot::EMPTY;
        }
        let peer_addrs = Index::new(&mut peers[..]);
        let groups = Index::new(&mut peers[..]);
        let mut peer_free = List::with_id(peer::PEER_TABLE, 0);
        for i in 0..peers.len() {
            peer_free.push_back(&mut peers[..], i as u16);
        }
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
            free,
            live: List::with_id(rpc::TABLE, 1),
            ctrl_due: List::new(rpc::CTRL),
            waiters: List::new(rpc::WAIT),
            ctrl_blocked: 0,
            send: Heap::new(links::SEND),
            send_fifo: Heap::new(links::SEND_FIFO),
            send_short: List::new(rpc::SHORT),
            grant: Heap::new(links::GRANT),
            grant_fifo: Heap::new(links::GRANT_FIFO),
            grant_best: Heap::new(links::GRANT_BEST),
            incoming: 0,
            socket_free,
            client_ports,
            server_ports,
            peer_free,
            peer_idle: List::with_id(peer::PEER_TABLE, 1),
            peer_addrs,
            groups,
            by_age: List::new(rpc::BY_AGE),
            last_peer: 0,
            resolving: List::new(peer::RESOLVE),
            servers,
            last_server: 0,
            hash,
            next_port: MIN_CLIENT_PORT,
            births: 0,
            timers: TimerTable::new(),
            grants_dirty: false,
            max_payload,
            link_mbps,
            icmp_budget: ICMP_PER_TICK,
            rx_backlog: false,
            tick_counted: false,
            caps: crate::phy::DeviceCapabilities::default(),
            now: Instant::ZERO,
            #[cfg(any(test, fuzzing))]
            index_work: core::cell::Cell::new(IndexWork::default()),
        };
        // What the payload size and pacing rate are until a device says
        // otherwise (`poll` adapts again only when its capabilities change).
        ep.adapt_to_device();
        Ok(ep)
    }

    /// Processes received frames, runs the timer when due and sends what is
    /// ready. Call it again by [`Endpoint::poll_at`], and after any
    /// application call that should send something.
    ///
    /// A tick that falls due is counted before the frames are read (they
    /// came after it fell due) and judged after them: the timer judges an
    /// RPC's silence, times it out or asks for what its peer has not sent
    /// only once every frame the device already holds has been read, so a
    /// frame that waited in the device (a slow poller) is never asked for
    /// again, nor its RPC failed. When a poll's ingress stops at
    /// `Config::max_rx_per_poll` frames, the judgement waits for the next
    /// poll (which [`Endpoint::poll_at`] makes due at once), but never more
    /// than a tick: a device that is never empty delays timers, never
    /// stops them.
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
        let caps = device.capabilities();
        if caps != self.caps {
            self.caps = caps;
            self.adapt_to_device();
        }
        let tick = self.timers.is_due(Timer::Tick, now);
        if tick && !self.tick_counted {
            self.count_tick();
            self.tick_counted = true;
        }
        let drained = self.ingress(now, device);
        self.rx_backlog = !drained;
        if !self.waiters.is_empty() {
            self.give_waiting_buffers();
        }
        if tick {
            let due = self.timers.due(Timer::Tick);
            let late = now >= due + self.config.tick;
            if drained || late {
                self.judge_tick();
                self.tick_counted = false;
                // One tick per poll: a late poll does not count missed
                // ticks as silence.
                let next = if late {
                    now + self.config.tick
                } else {
                    due + self.config.tick
                };
                self.timers.set(Timer::Tick, next);
            }
        }
        self.egress(now, device);
        // Unit tests and fuzzing check the queues against the RPCs at every
        // poll (a panic here is a bug for the fuzzer to find).
        #[cfg(any(all(test, not(miri)), fuzzing))]
        {
            // The check's own lookups are not the packets' work.
            let work = self.index_work.get();
            if let Err(e) = self.check_queues() {
                panic!("queues out of step at {now}: {e}");
            }
            self.index_work.set(work);
        }
    }

    /// `matches` for one lookup in an index of peer-chosen keys, counting
    /// the lookup and each entry it examines in [`IndexWork`].
    #[cfg(any(test, fuzzing))]
    fn counting<'s, T>(
        &'s self,
        mut matches: impl FnMut(&T) -> bool + 's,
    ) -> impl FnMut(&T) -> bool + 's {
        let mut w = self.index_work.get();
        w.lookups += 1;
        self.index_work.set(w);
        let mut probes = 0;
        move |slot| {
            probes += 1;
            let mut w = self.index_work.get();
            w.probes += 1;
            w.longest = w.longest.max(probes);
            self.index_work.set(w);
            matches(slot)
        }
    }

    /// The index work done since the last call (see [`IndexWork`]), and a
    /// fresh count from here.
    #[cfg(any(test, fuzzing))]
    pub fn take_index_work(&self) -> IndexWork {
        self.index_work.take()
    }

    /// `now` went backwards: nothing may stay scheduled or stamped in the
    /// future it left.
    fn rebase(&mut self, now: Instant) {
        net_debug!("homa: clock went back from {} to {}", self.now, now);
        self.timers.rebase(now, self.config.tick);
        self.pacer.rebase(now);
        for p in self.peers.iter_mut().filter_map(|p| p.peer.as_mut()) {
            p.nbr.rebase(now);
            p.last_used = p.last_used.min(now);
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

    /// Payload bytes per DATA packet to `addr` at the current MTU: MTU - 20
    /// - 56 over IPv4, MTU - 40 - 56 over IPv6 (1,424 and 1,404 at 1500).
    pub(super) fn payload_for(&self, addr: crate::wire::IpAddr) -> u32 {
        match addr {
            crate::wire::IpAddr::V4(_) => self.max_payload,
            crate::wire::IpAddr::V6(_) => self.max_payload.saturating_sub(20).max(1),
        }
    }

    /// When [`Endpoint::poll`] should run next: `Some(t)` with `t <= now`
    /// means at once; `None` means only when a frame arrives or the
    /// application calls in.
    pub fn poll_at(&self) -> Option<Instant> {
        // O(1): queue heads and counters only.
        // A short message is never held back: it goes at the next poll.
        if !self.ctrl.is_empty()
            || self.rx_backlog
            || !self.send_short.is_empty()
            || self.grants_dirty
            || self.ctrl_due.len() > self.ctrl_blocked
            || self.waiter_fits()
        {
            return Some(Instant::ZERO);
        }
        let top = self.send.peek(&self.rpcs[..]);
        if let Some(top) = top {
            // DATA the pacer does not hold, or a retransmission, which it
            // never holds, goes at once.
            let resend = self
                .rpc_at(usize::from(top))
                .and_then(|r| r.outgoing())
                .is_some_and(|o| o.has_resend());
            if resend || self.timers.get(Timer::Pacer).is_none() {
                return Some(Instant::ZERO);
            }
        }
        self.timers.next(|timer| match timer {
            // The tick matters only to live RPCs; the pacer's hold only
            // while DATA waits.
            Timer::Tick => !self.live.is_empty(),
            Timer::Pacer => top.is_some(),
            Timer::FifoGrant | Timer::Resolve => true,
        })
    }

    /// [`Endpoint::poll_at`] relative to `now`: `Some(Duration::ZERO)` means
    /// poll at once, `None` means no timer is pending.
    pub fn poll_delay(&self, now: Instant) -> Option<Duration> {
        self.poll_at().map(|t| t - now)
    }

    /// Gives pool pages to messages that were waiting for them, in the
    /// order they began to wait, and asks their senders to start again
    /// (Linux sends RESEND(0, all)). O(1) when the first cannot fit yet.
    fn give_waiting_buffers(&mut self) {
        while let Some(i) = self.waiters.front() {
            let slot = usize::from(i);
            let len = self
                .rpc_at(slot)
                .and_then(|r| r.incoming())
                .filter(|m| m.buf().is_none())
                .map(|m| m.length());
            let Some(len) = len else {
                // Not waiting any more (cannot happen: leaving the wait
                // takes it off the list); drop it from the list.
                self.waiters.pop_front(&mut self.rpcs[..]);
                continue;
            };
            let Ok(buf) = self.pool.alloc(len as usize) else {
                return;
            };
            self.waiters.pop_front(&mut self.rpcs[..]);
            let prio = self.config.num_priorities.saturating_sub(2);
            let resend = self.with_rpc(slot, |r, pool| {
                r.pages_came(buf, pool);
                Ctrl {
                    addr: r.peer_addr(),
                    link_addr: None,
                    local: r.local(),
                    packet: CtrlPacket::Homa(crate::wire::homa::Repr {
                        sport: r.local_port(),
                        dport: r.peer_port(),
                        sender_id: r.id(),
                        kind: crate::wire::homa::Kind::Resend {
                            offset: 0,
                            length: crate::wire::homa::RESEND_ALL,
                            priority: prio,
                        },
                    }),
                }
            });
            if let Some(c) = resend {
                self.push_ctrl(c);
            }
        }
    }

    /// Whether the first waiting message would get its pages now.
    fn waiter_fits(&self) -> bool {
        let Some(i) = self.waiters.front() else {
            return false;
        };
        let len = self
            .rpc_at(usize::from(i))
            .and_then(|r| r.incoming())
            .map_or(0, |m| m.length() as usize);
        crate::storage::pages_for(len, self.pool.page_size()) <= self.pool.free_pages()
    }
}

#[cfg(test)]
mod tests;
