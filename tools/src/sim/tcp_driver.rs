//! The TCP baselines: smoltcp on every host, over the same fabric.
//!
//! Each host is one smoltcp `Interface`. A message is a 12-byte header
//! (length, message id, big-endian) and the payload, written into a client
//! socket in order; it is complete when the server has read its last byte.
//! How a host pair's messages use connections is the [`TcpMode`]:
//! - `tcp-1` ([`TcpMode::Single`]): one persistent connection per ordered
//!   pair, opened before traffic starts; messages follow each other on its
//!   byte stream, so a short message waits behind every byte queued before
//!   it (head-of-line blocking);
//! - `tcp-mc` ([`TcpMode::Pool`]): a pool of connections per pair, as
//!   RAMCloud's TCP-MC and memcached-style clients keep: a message takes an
//!   idle connection (every byte of its last message acknowledged); with
//!   none idle it waits for the first connection free. The whole pool is
//!   open before traffic starts, so no message pays a handshake;
//! - `pias` ([`TcpMode::Pias`]): `tcp-mc` whose segments carry PIAS
//!   priorities ([`Pias`]) over the switches' 8 strict-priority queues.
//!
//! Set-up: every connection of every pair is opened before traffic, each
//! host with at most [`OPEN_WINDOW`] handshakes under way, so the SYNs do
//! not overflow the switch ports (a lost SYN waits for a retransmission
//! timeout) and set-up drops nothing in the default run.
//!
//! Scaling: a host's sockets are grouped per peer, one `SocketSet` holding
//! the connections to the peer and the ones from it. Each received frame
//! goes to the set of the peer that sent it (`poll_ingress_single`); a set
//! is polled for egress when its application wrote, when it received, or
//! when its deadline is due. Deadlines are kept per (host, peer).
//!
//! Settings ([`TcpSpec`]): Nagle off (as RPC systems set TCP_NODELAY);
//! delayed ACKs of the spec (homa-sim: 40 us, below the RTO; smoltcp still
//! acknowledges at once when more than a full segment is unacknowledged);
//! the socket buffers of the spec, which bound the bytes in flight per
//! connection; client keep-alives every 20 ms ([`KEEP_ALIVE_NS`]); a
//! minimum RTO of 200 us, as the Homa paper's baselines used (smoltcp's
//! fixed 1 s on a clock that runs 5,000 times as fast, see
//! [`CLOCK_SCALE`](super::tcp_device::CLOCK_SCALE)). Fixed by smoltcp 0.13:
//! fast retransmit after 3 duplicate ACKs; no ECN (so no DCTCP); and no
//! congestion window on the bytes in flight: its Reno and Cubic controllers
//! only decide whether a segment may go at all (`seq_to_transmit`), so none
//! is set.

use std::collections::{HashMap, VecDeque};

use crate::fabric::Fabric;
use homa_phy::{Device as _, Instant, RxToken as _};
use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::socket::tcp;
use smoltcp::wire::{HardwareAddress, IpAddress, IpCidr, Ipv4Address};

use super::event_loop::{Deadlines, Driver, NEVER};
use super::metrics::Outcomes;
use super::tcp_device::{fabric_time, ipv4_source, smol_duration, smol_time, Pias, SmolPort};
use super::traffic::{pattern_matches, payload_seed, Message};
use super::workload::Workload;
use crate::pattern_byte;

/// The port every host listens on.
pub const TCP_PORT: u16 = 5000;

/// Bytes in front of every message in the stream: length (4) and id (8).
pub const HEADER: usize = 12;

/// Client ports are `CLIENT_PORT_BASE + server host * max_conns + i` for
/// connection `i` of the pair.
const CLIENT_PORT_BASE: u16 = 10_000;

/// Keep-alive interval of every client socket, ns of fabric time. It stands
/// in for a zero-window probe that smoltcp 0.13 does not arm: when its
/// retransmission timer expires while the peer's window is closed, no timer
/// is left, and a lost window update stalled the connection for good (seen
/// on `paper` W5 with pias: 11 messages stuck with no deadline). The
/// keep-alive draws an ACK with the open window. Only idle connections
/// send it (any segment restarts the interval), and only senders need it.
pub const KEEP_ALIVE_NS: u64 = 20_000_000;

/// Most handshakes one host has under way during set-up.
pub const OPEN_WINDOW: usize = 8;

/// Most polls of one pair at one instant (a guard against a socket that
/// keeps asking for a poll without progress).
const MAX_ROUNDS: u32 = 10_000;

/// How a host pair's messages use TCP connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpMode {
    /// One connection per pair; messages share its byte stream.
    Single,
    /// A pool of connections per pair, one message on each at a time.
    Pool,
    /// [`TcpMode::Pool`] with PIAS priorities: the demotion thresholds, in
    /// bytes a message has already sent (see [`pias_thresholds`]).
    Pias([u32; 7]),
}

/// How each host's sockets are set up.
#[derive(Debug, Clone, Copy)]
pub struct TcpSpec {
    /// Receive and transmit buffer of every socket, bytes.
    pub buffer_bytes: usize,
    /// One connection, or a pool.
    pub mode: TcpMode,
    /// Most connections of a pool per ordered pair (1 for `Single`).
    pub max_conns: usize,
    /// Longest delay of an ACK, ns of fabric time; 0: none.
    pub ack_delay_ns: u64,
}

/// PIAS's demotion thresholds for workload `w`: the bytes-sent boundaries
/// that give each of the 8 priorities an equal share of the bytes sent, so
/// every priority carries traffic and a message of the workload's smallest
/// sizes stays in the top one. (PIAS derives its thresholds from the
/// workload's size distribution; this equal-bytes split is the simple
/// derivation, stated in the output.)
pub fn pias_thresholds(w: &Workload) -> [u32; 7] {
    let total = w.expect(f64::from);
    let mut t = [0u32; 7];
    for (k, slot) in t.iter_mut().enumerate() {
        let target = total * (k + 1) as f64 / 8.0;
        // E[min(S, a)] grows with a: bisect on it.
        let (mut lo, mut hi) = (1u32, w.sizes.last().copied().unwrap_or(1).max(1));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if w.expect(|s| f64::from(s.min(mid))) >= target {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        *slot = lo;
    }
    t
}

/// A message being written into a client socket.
#[derive(Debug, Clone, Copy)]
struct Outgoing {
    seed: u64,
    header: [u8; HEADER],
    /// Header plus payload.
    total: usize,
    written: usize,
}

impl Outgoing {
    /// Writes the next bytes into `buf`; returns how many.
    fn fill(&mut self, buf: &mut [u8]) -> usize {
        let n = buf.len().min(self.total - self.written);
        let mut at = self.written;
        let mut rest = &mut buf[..n];
        if at < HEADER {
            let k = (HEADER - at).min(rest.len());
            rest[..k].copy_from_slice(&self.header[at..at + k]);
            rest = &mut rest[k..];
            at += k;
        }
        let start = at.saturating_sub(HEADER);
        for (i, b) in rest.iter_mut().enumerate() {
            *b = pattern_byte(self.seed, start + i);
        }
        self.written += n;
        n
    }
}

/// The server side of one connection: where it is in the stream.
#[derive(Debug, Clone, Copy, Default)]
struct Incoming {
    header: [u8; HEADER],
    /// Bytes of the current message read so far, header included.
    got: usize,
    id: usize,
    len: usize,
    seed: u64,
    intact: bool,
}

/// A connection this host opened to the peer, and the messages it is to
/// carry.
struct Client {
    handle: SocketHandle,
    sendq: VecDeque<Outgoing>,
    /// Established once (counted in [`TcpDriver::unestablished`]).
    up: bool,
}

/// A connection the peer opened to this host, and where its stream is.
struct Server {
    handle: SocketHandle,
    rx: Incoming,
    /// Established once.
    up: bool,
}

/// One host's half of its traffic with one peer.
struct Pair {
    set: SocketSet<'static>,
    clients: Vec<Client>,
    servers: Vec<Server>,
    /// Pool modes: messages waiting for an idle connection.
    waiting: VecDeque<Outgoing>,
    /// PIAS tagging of this host's segments to the peer.
    pias: Option<Pias>,
}

impl Pair {
    /// Whether client connection `i` can take a new message: established,
    /// nothing queued, every byte sent acknowledged.
    fn idle(&self, i: usize) -> bool {
        let c = &self.clients[i];
        let s = self.set.get::<tcp::Socket>(c.handle);
        c.sendq.is_empty() && s.state() == tcp::State::Established && s.send_queue() == 0
    }

    /// Marks the connections that became established since the last call;
    /// returns how many of them this host opened and how many the peer did.
    fn newly_up(&mut self) -> (usize, usize) {
        let up = |set: &SocketSet<'_>, h: SocketHandle| {
            set.get::<tcp::Socket>(h).state() == tcp::State::Established
        };
        let mut mine = 0;
        for c in self.clients.iter_mut().filter(|c| !c.up) {
            if up(&self.set, c.handle) {
                c.up = true;
                mine += 1;
            }
        }
        let mut theirs = 0;
        for s in self.servers.iter_mut().filter(|s| !s.up) {
            if up(&self.set, s.handle) {
                s.up = true;
                theirs += 1;
            }
        }
        (mine, theirs)
    }
}

/// Counters of the TCP driver.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpDriverStats {
    /// Frames that were not IPv4 from a known host (should stay 0).
    pub bad_frames: u64,
    /// Stream headers naming no message of this pair (should stay 0).
    pub bad_headers: u64,
    /// Times a pair still wanted a poll after `MAX_ROUNDS` polls at once.
    pub stalls: u64,
    /// Connections opened (before traffic), all pairs.
    pub opened: u64,
    /// Pool modes: messages that found no idle connection and waited.
    pub waited: u64,
    /// Connections smoltcp refused to start (should stay 0).
    pub open_errors: u64,
}

/// Every host's interface and connections.
pub struct TcpDriver<'m> {
    n: usize,
    spec: TcpSpec,
    ips: Vec<[u8; 4]>,
    ifaces: Vec<Interface>,
    /// Index `host * n + peer`; `None` on the diagonal.
    pairs: Vec<Option<Pair>>,
    macs: HashMap<[u8; 4], [u8; 6]>,
    hosts_by_ip: HashMap<[u8; 4], usize>,
    deadlines: Deadlines,
    messages: &'m [Message],
    seed: u64,
    staged: Vec<u8>,
    scratch: Vec<u8>,
    touched: Vec<usize>,
    is_touched: Vec<bool>,
    /// Per host: the peers to open its next connections to, in order.
    pending: Vec<VecDeque<usize>>,
    /// Per host: handshakes it started that are not established yet.
    opening: Vec<usize>,
    /// Connection ends (client and server sockets) not established yet.
    pub unestablished: usize,
    /// Per (host, peer): when the host last read bytes its peer sent.
    last_read: Vec<u64>,
    stats: TcpDriverStats,
}

fn socket(spec: &TcpSpec) -> tcp::Socket<'static> {
    let mut s = tcp::Socket::new(
        tcp::SocketBuffer::new(vec![0u8; spec.buffer_bytes]),
        tcp::SocketBuffer::new(vec![0u8; spec.buffer_bytes]),
    );
    s.set_nagle_enabled(false);
    s.set_ack_delay((spec.ack_delay_ns > 0).then(|| smol_duration(spec.ack_delay_ns)));
    s
}

/// The local port of client connection `i` to `server`.
fn client_port(spec: &TcpSpec, server: usize, i: usize) -> u16 {
    CLIENT_PORT_BASE + (server * spec.max_conns + i) as u16
}

impl<'m> TcpDriver<'m> {
    /// An interface per host and `max_conns` connections per ordered pair
    /// of hosts, the first handshakes started now (call
    /// [`drive`](super::event_loop::drive) until
    /// [`TcpDriver::unestablished`] is 0 before sending).
    pub fn new(
        fabric: &mut Fabric,
        spec: TcpSpec,
        messages: &'m [Message],
        seed: u64,
    ) -> Result<TcpDriver<'m>, String> {
        let n = fabric.hosts();
        let max_conns = match spec.mode {
            TcpMode::Single => 1,
            _ => spec.max_conns,
        };
        let spec = TcpSpec { max_conns, ..spec };
        if max_conns == 0 || n * max_conns > usize::from(u16::MAX - CLIENT_PORT_BASE) {
            return Err(format!(
                "{max_conns} TCP connections per pair of {n} hosts: \
                 the client ports would not fit"
            ));
        }
        let ips: Vec<[u8; 4]> = (0..n).map(|h| fabric.host_ip(h)).collect();
        let macs: HashMap<_, _> = (0..n).map(|h| (ips[h], fabric.host_mac(h))).collect();
        let hosts_by_ip: HashMap<_, _> = (0..n).map(|h| (ips[h], h)).collect();
        let now = fabric.now().total_nanos();
        let mut ifaces = Vec::with_capacity(n);
        let mut pairs = Vec::with_capacity(n * n);
        let deadlines = Deadlines::new(n * n);
        for (h, &[a, b, c, d]) in ips.iter().enumerate() {
            let mut cfg = Config::new(HardwareAddress::Ip);
            cfg.random_seed = seed ^ ((h as u64) << 24);
            let mut port = SmolPort {
                fabric,
                host: h,
                macs: &macs,
                staged: None,
                pias: None,
            };
            let mut iface = Interface::new(cfg, &mut port, smol_time(now));
            iface.update_ip_addrs(|addrs| {
                let _ = addrs.push(IpCidr::new(IpAddress::v4(a, b, c, d), 16));
            });
            for p in 0..n {
                if p == h {
                    pairs.push(None);
                    continue;
                }
                let pias = match spec.mode {
                    TcpMode::Pias(thresholds) => Some(Pias {
                        thresholds,
                        base: client_port(&spec, p, 0),
                        starts: Vec::with_capacity(max_conns),
                    }),
                    _ => None,
                };
                pairs.push(Some(Pair {
                    set: SocketSet::new(Vec::with_capacity(2 * max_conns)),
                    clients: Vec::with_capacity(max_conns),
                    servers: Vec::with_capacity(max_conns),
                    waiting: VecDeque::new(),
                    pias,
                }));
            }
            ifaces.push(iface);
        }
        // Each host opens connection i to every peer before connection
        // i + 1 to any, starting with the next host up so the first SYNs
        // spread over the receivers.
        let pending = (0..n)
            .map(|h| {
                (0..max_conns)
                    .flat_map(|_| (1..n).map(move |q| (h + q) % n))
                    .collect()
            })
            .collect();
        let mut d = TcpDriver {
            n,
            spec,
            ips,
            ifaces,
            pairs,
            macs,
            hosts_by_ip,
            deadlines,
            messages,
            seed,
            staged: Vec::new(),
            scratch: Vec::new(),
            touched: Vec::new(),
            is_touched: vec![false; n * n],
            pending,
            opening: vec![0; n],
            unestablished: 2 * n * (n - 1) * max_conns,
            last_read: vec![now; n * n],
            stats: TcpDriverStats::default(),
        };
        for h in 0..n {
            d.start_opens(h, now)?;
        }
        Ok(d)
    }

    /// Starts host `h`'s next handshakes while it has fewer than
    /// [`OPEN_WINDOW`] under way.
    fn start_opens(&mut self, h: usize, now: u64) -> Result<(), String> {
        while self.opening[h] < OPEN_WINDOW {
            let Some(p) = self.pending[h].pop_front() else {
                return Ok(());
            };
            self.open(h, p)?;
            self.opening[h] += 1;
            self.deadlines.at_most(h * self.n + p, now);
        }
        Ok(())
    }

    /// The driver's counters.
    pub fn stats(&self) -> TcpDriverStats {
        self.stats
    }

    /// Reads what the server sockets of pair `key` hold, hands waiting
    /// messages to idle connections (opening more if the pool allows), and
    /// writes what the client sockets can take.
    fn app(&mut self, key: usize, now: u64, out: &mut Outcomes) {
        let (h, p) = (key / self.n, key % self.n);
        let messages = self.messages;
        let seed = self.seed;
        let stats = &mut self.stats;
        let scratch = &mut self.scratch;
        let last_read = &mut self.last_read[key];
        let Some(pair) = self.pairs[key].as_mut() else {
            return;
        };
        for srv in &mut pair.servers {
            let server = pair.set.get_mut::<tcp::Socket>(srv.handle);
            while server.can_recv() {
                let rx = &mut srv.rx;
                let r = server.recv(|buf| {
                    read_stream(rx, buf, messages, seed, (p, h), now, out, stats, scratch);
                    (buf.len(), ())
                });
                *last_read = now;
                if r.is_err() {
                    break;
                }
            }
        }
        for i in 0..pair.clients.len() {
            if pair.waiting.is_empty() {
                break;
            }
            if pair.idle(i) {
                let m = pair.waiting.pop_front().expect("checked non-empty");
                pair.clients[i].sendq.push_back(m);
                if let Some(pias) = pair.pias.as_mut() {
                    pias.start_message(i);
                }
            }
        }
        for c in &mut pair.clients {
            let client = pair.set.get_mut::<tcp::Socket>(c.handle);
            while let Some(front) = c.sendq.front_mut() {
                if !client.can_send() {
                    break;
                }
                let n = client.send(|buf| {
                    let n = front.fill(buf);
                    (n, n)
                });
                if front.written == front.total {
                    c.sendq.pop_front();
                }
                if !matches!(n, Ok(k) if k > 0) {
                    break;
                }
            }
        }
        if self.unestablished > 0 {
            let (mine, theirs) = pair.newly_up();
            self.unestablished -= mine + theirs;
            self.opening[h] -= mine;
            if mine > 0 && self.start_opens(h, now).is_err() {
                self.stats.open_errors += 1;
            }
        }
    }

    /// Opens another connection from `h` to `p`, with a listening socket at
    /// `p` to take it.
    fn open(&mut self, h: usize, p: usize) -> Result<(), String> {
        let n = self.n;
        let [a, b, c, d] = self.ips[p];
        // The listening socket first, so the SYN finds it.
        let mut server = socket(&self.spec);
        server
            .listen(TCP_PORT)
            .map_err(|e| format!("listen {p}: {e}"))?;
        let Some(peer) = self.pairs[p * n + h].as_mut() else {
            return Err(format!("no pair {p} -> {h}"));
        };
        let handle = peer.set.add(server);
        peer.servers.push(Server {
            handle,
            rx: Incoming::default(),
            up: false,
        });
        let Some(pair) = self.pairs[h * n + p].as_mut() else {
            return Err(format!("no pair {h} -> {p}"));
        };
        let i = pair.clients.len();
        let mut client = socket(&self.spec);
        client.set_keep_alive(Some(smol_duration(KEEP_ALIVE_NS)));
        let remote = (IpAddress::Ipv4(Ipv4Address::new(a, b, c, d)), TCP_PORT);
        let port = client_port(&self.spec, p, i);
        client
            .connect(self.ifaces[h].context(), remote, port)
            .map_err(|e| format!("connect {h} -> {p}: {e}"))?;
        let handle = pair.set.add(client);
        pair.clients.push(Client {
            handle,
            sendq: VecDeque::new(),
            up: false,
        });
        if let Some(pias) = pair.pias.as_mut() {
            pias.starts.push(None);
        }
        self.stats.opened += 1;
        Ok(())
    }

    /// Polls pair `key` until it has nothing more to send at `now`, and
    /// files its next deadline.
    fn service(&mut self, fabric: &mut Fabric, now: u64, key: usize, out: &mut Outcomes) {
        let h = key / self.n;
        let ts = smol_time(now);
        for _ in 0..MAX_ROUNDS {
            self.app(key, now, out);
            let Some(pair) = self.pairs[key].as_mut() else {
                return;
            };
            let mut port = SmolPort {
                fabric,
                host: h,
                macs: &self.macs,
                staged: None,
                pias: pair.pias.as_mut(),
            };
            self.ifaces[h].poll_egress(ts, &mut port, &mut pair.set);
            let at = self.ifaces[h]
                .poll_at(ts, &pair.set)
                .map_or(NEVER, fabric_time);
            if at > now {
                self.deadlines.set(key, at);
                return;
            }
        }
        self.stats.stalls += 1;
        self.deadlines.set(key, now + 1000);
    }
}

/// Consumes stream bytes at the server of pair (`src` -> `dst`), checking
/// every byte and completing messages.
#[allow(clippy::too_many_arguments)]
fn read_stream(
    rx: &mut Incoming,
    mut buf: &[u8],
    messages: &[Message],
    seed: u64,
    (src, dst): (usize, usize),
    now: u64,
    out: &mut Outcomes,
    stats: &mut TcpDriverStats,
    scratch: &mut Vec<u8>,
) {
    while !buf.is_empty() {
        if rx.got < HEADER {
            let k = (HEADER - rx.got).min(buf.len());
            rx.header[rx.got..rx.got + k].copy_from_slice(&buf[..k]);
            rx.got += k;
            buf = &buf[k..];
            if rx.got == HEADER {
                let mut len = [0u8; 4];
                let mut id = [0u8; 8];
                len.copy_from_slice(&rx.header[..4]);
                id.copy_from_slice(&rx.header[4..]);
                rx.len = u32::from_be_bytes(len) as usize;
                rx.id = u64::from_be_bytes(id) as usize;
                rx.seed = payload_seed(seed, rx.id);
                rx.intact = messages.get(rx.id).is_some_and(|m| {
                    m.size as usize == rx.len && m.src as usize == src && m.dst as usize == dst
                });
                if !rx.intact {
                    stats.bad_headers += 1;
                }
            } else {
                continue;
            }
        }
        let off = rx.got - HEADER;
        let k = (rx.len - off).min(buf.len());
        if rx.intact {
            rx.intact = pattern_matches(rx.seed, off, &buf[..k], scratch);
        }
        rx.got += k;
        buf = &buf[k..];
        if rx.got == HEADER + rx.len {
            if rx.id < messages.len() {
                out.complete(rx.id, now, rx.intact);
            }
            rx.got = 0;
        }
    }
}

/// Where the messages without an outcome stood when a run ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unfinished {
    /// Pool modes: waiting for a free connection of their pair.
    pub waiting: u64,
    /// `tcp-1`: behind an earlier unfinished message on their pair's byte
    /// stream.
    pub behind: u64,
    /// The first unfinished message of their connection, being sent.
    pub heads: u64,
    /// Bytes of all unfinished messages.
    pub bytes: u64,
    /// The longest time since a receiver with an unfinished message from
    /// its peer last read a byte from that peer, ns.
    pub max_idle_ns: u64,
}

impl TcpDriver<'_> {
    /// Where each message without an outcome in `out` stands at `now`.
    pub fn unfinished(&self, out: &Outcomes, now: u64) -> Unfinished {
        let mut u = Unfinished::default();
        let mut waiting = vec![false; self.messages.len()];
        for pair in self.pairs.iter().flatten() {
            for m in &pair.waiting {
                let mut id = [0u8; 8];
                id.copy_from_slice(&m.header[4..]);
                if let Some(w) = waiting.get_mut(u64::from_be_bytes(id) as usize) {
                    *w = true;
                }
            }
        }
        let mut stream_busy = vec![false; self.n * self.n];
        for (id, m) in self.messages.iter().enumerate() {
            if out.done(id) {
                continue;
            }
            let (src, dst) = (m.src as usize, m.dst as usize);
            u.bytes += u64::from(m.size);
            let rx_key = dst * self.n + src;
            let idle = now.saturating_sub(self.last_read[rx_key]);
            u.max_idle_ns = u.max_idle_ns.max(idle);
            if waiting[id] {
                u.waiting += 1;
            } else if self.spec.mode == TcpMode::Single && stream_busy[src * self.n + dst] {
                u.behind += 1;
            } else {
                stream_busy[src * self.n + dst] = true;
                u.heads += 1;
            }
        }
        u
    }
}

impl Driver for TcpDriver<'_> {
    fn submit(&mut self, _fabric: &mut Fabric, now: u64, id: usize, out: &mut Outcomes) {
        let m = self.messages[id];
        let key = m.src as usize * self.n + m.dst as usize;
        let mut header = [0u8; HEADER];
        header[..4].copy_from_slice(&m.size.to_be_bytes());
        header[4..].copy_from_slice(&(id as u64).to_be_bytes());
        let msg = Outgoing {
            seed: payload_seed(self.seed, id),
            header,
            total: HEADER + m.size as usize,
            written: 0,
        };
        if let Some(pair) = self.pairs[key].as_mut() {
            if self.spec.mode == TcpMode::Single {
                pair.clients[0].sendq.push_back(msg);
            } else {
                // It waits if the idle connections are all promised to
                // messages already waiting.
                let idle = (0..pair.clients.len()).filter(|&i| pair.idle(i)).count();
                if idle <= pair.waiting.len() {
                    self.stats.waited += 1;
                }
                pair.waiting.push_back(msg);
            }
        }
        out.sent += 1;
        self.deadlines.at_most(key, now);
    }

    fn on_rx(&mut self, fabric: &mut Fabric, now: u64, host: usize, out: &mut Outcomes) {
        let ts = smol_time(now);
        let t = Instant::from_nanos(now);
        loop {
            let got = {
                let mut port = fabric.device(host);
                match port.receive(t) {
                    Some((rx, _)) => {
                        let staged = &mut self.staged;
                        rx.consume(|d| {
                            staged.clear();
                            staged.extend_from_slice(d);
                        });
                        true
                    }
                    None => false,
                }
            };
            if !got {
                break;
            }
            let peer = ipv4_source(&self.staged).and_then(|ip| self.hosts_by_ip.get(&ip).copied());
            let key = match peer {
                Some(p) if p != host => host * self.n + p,
                _ => {
                    self.stats.bad_frames += 1;
                    continue;
                }
            };
            let Some(pair) = self.pairs[key].as_mut() else {
                continue;
            };
            let mut port = SmolPort {
                fabric,
                host,
                macs: &self.macs,
                staged: Some(&self.staged),
                pias: pair.pias.as_mut(),
            };
            self.ifaces[host].poll_ingress_single(ts, &mut port, &mut pair.set);
            if !self.is_touched[key] {
                self.is_touched[key] = true;
                self.touched.push(key);
            }
        }
        let touched = std::mem::take(&mut self.touched);
        for &key in &touched {
            self.is_touched[key] = false;
            self.service(fabric, now, key, out);
        }
        self.touched = touched;
        self.touched.clear();
    }

    fn next_deadline(&mut self) -> Option<u64> {
        self.deadlines.earliest()
    }

    fn run_due(&mut self, fabric: &mut Fabric, now: u64, out: &mut Outcomes) {
        while let Some(key) = self.deadlines.pop_due(now) {
            self.service(fabric, now, key, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_reader_checks_headers_and_bytes_across_splits() {
        let messages = [
            Message {
                at: 0,
                src: 1,
                dst: 0,
                size: 5,
            },
            Message {
                at: 0,
                src: 1,
                dst: 0,
                size: 3,
            },
        ];
        let mut stream = Vec::new();
        for (id, m) in messages.iter().enumerate() {
            let mut o = Outgoing {
                seed: payload_seed(9, id),
                header: [0; HEADER],
                total: HEADER + m.size as usize,
                written: 0,
            };
            o.header[..4].copy_from_slice(&m.size.to_be_bytes());
            o.header[4..].copy_from_slice(&(id as u64).to_be_bytes());
            let mut b = vec![0u8; o.total];
            assert_eq!(o.fill(&mut b[..7]), 7);
            assert_eq!(o.fill(&mut b[7..]), o.total - 7);
            stream.extend_from_slice(&b);
        }
        let mut out = Outcomes::new(2);
        let mut stats = TcpDriverStats::default();
        let mut rx = Incoming::default();
        let mut scratch = Vec::new();
        for chunk in stream.chunks(4) {
            read_stream(
                &mut rx,
                chunk,
                &messages,
                9,
                (1, 0),
                77,
                &mut out,
                &mut stats,
                &mut scratch,
            );
        }
        assert_eq!((out.completed, out.verified), (2, 2));
        assert_eq!(out.finish_time(1), Some(77));
        // One flipped payload byte fails that message only.
        stream[HEADER + 1] ^= 1;
        let mut out = Outcomes::new(2);
        let mut rx = Incoming::default();
        read_stream(
            &mut rx,
            &stream,
            &messages,
            9,
            (1, 0),
            5,
            &mut out,
            &mut stats,
            &mut scratch,
        );
        assert_eq!((out.completed, out.verified), (2, 1));
        assert_eq!(stats.bad_headers, 0);
    }
}
