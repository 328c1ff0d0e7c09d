//! The TCP baselines on every host: [`tcp_model`](super::tcp_model)
//! connections over the fabric, in pools per host pair.
//!
//! A message is a 12-byte header (length, message id, big-endian) and the
//! payload, written on one connection of its (source, destination) pair;
//! it is complete when the receiver has read its last byte, every byte
//! checked. A message takes an idle connection (every byte it carried
//! acknowledged) or opens another, kept for later messages: no message
//! waits for a connection or pays a handshake. Client ports are
//! `CLIENT_PORT_BASE + i` for connection `i` of a pair, the server's
//! [`TCP_PORT`].
//!
//! Per segment the driver sets what the baseline's switches read: the PIAS
//! priority (by the bytes its message sent before it, against the
//! thresholds) in the TOS byte, ECN capability for DCTCP, pFabric's rank
//! (bytes its message has left) beside the frame. Acknowledgements go at
//! the top priority and rank 0.
//!
//! Timers: a pair's poll deadline is the earliest retransmission timeout
//! of its connections.

use crate::fabric::Fabric;
use homa_phy::{Device as _, Instant, PacketMeta, RxToken as _, TxToken as _};

use super::baselines::pias_priority;
use super::event_loop::{Deadlines, Driver, NEVER};
use super::metrics::Outcomes;
use super::tcp_model::{Out, Receiver, Sender, SenderStats, TcpParams};
use super::tcp_wire::Segment;
use super::traffic::{pattern_matches, payload_seed, Message};
use homa_phy::testing::fill_pattern_at;

/// The port every host listens on.
pub const TCP_PORT: u16 = 5000;

/// Bytes in front of every message in the stream: length (4) and id (8).
pub const HEADER: usize = 12;

/// The client port of a pair's connection 0.
const CLIENT_PORT_BASE: u16 = 10_000;

/// How the hosts' TCP runs.
#[derive(Debug, Clone, Copy)]
pub struct TcpSpec {
    /// The senders' settings.
    pub params: TcpParams,
    /// PIAS: the demotion thresholds.
    pub pias: Option<[u32; 7]>,
    /// pFabric: ranks on every segment.
    pub pfabric: bool,
    /// The message whose connection's window is traced, if any.
    pub trace: Option<usize>,
}

/// One sample of a connection's window: fabric time (ns), window and
/// bytes in flight (bytes), DCTCP's `alpha`.
pub type WindowSample = (u64, u64, u64, f64);

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

/// One connection: both halves, which talk only through frames.
struct Conn {
    tx: Sender,
    rx: Receiver,
    stream: Incoming,
    /// The message being sent: its id and first stream byte.
    msg: Option<(usize, u64)>,
    flow: u32,
}

/// Counters of the TCP driver.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpDriverStats {
    /// Frames that were not a segment of a known connection (should stay
    /// 0).
    pub bad_frames: u64,
    /// Stream headers naming no message of this pair (should stay 0).
    pub bad_headers: u64,
    /// Connections opened, all pairs.
    pub connections: u64,
    /// Most connections of one pair.
    pub max_per_pair: u64,
    /// The senders' counters, summed.
    pub senders: SenderStats,
}

/// Every host's connections.
pub struct TcpDriver<'m> {
    n: usize,
    spec: TcpSpec,
    ips: Vec<[u8; 4]>,
    macs: Vec<[u8; 6]>,
    /// Connections from `src` to `dst` at index `src * n + dst`.
    pairs: Vec<Vec<Conn>>,
    deadlines: Deadlines,
    messages: &'m [Message],
    seed: u64,
    scratch: Vec<u8>,
    stats: TcpDriverStats,
    /// The traced connection's window, sample by sample.
    pub trace: Vec<WindowSample>,
}

impl<'m> TcpDriver<'m> {
    /// No connection yet; `messages` are the ones [`Driver::submit`] gets.
    pub fn new(
        fabric: &Fabric,
        spec: TcpSpec,
        messages: &'m [Message],
        seed: u64,
    ) -> TcpDriver<'m> {
        let n = fabric.hosts();
        TcpDriver {
            n,
            spec,
            ips: (0..n).map(|h| fabric.host_ip(h)).collect(),
            macs: (0..n).map(|h| fabric.host_mac(h)).collect(),
            pairs: (0..n * n).map(|_| Vec::new()).collect(),
            deadlines: Deadlines::new(n * n),
            messages,
            seed,
            scratch: Vec::new(),
            stats: TcpDriverStats::default(),
            trace: Vec::new(),
        }
    }

    /// The driver's counters, the senders' summed.
    pub fn stats(&self) -> TcpDriverStats {
        let mut s = self.stats;
        for c in self.pairs.iter().flatten() {
            s.senders.add(&c.tx.stats);
        }
        s
    }

    /// Sends what connection `ci` of pair `key` may, then files the pair's
    /// deadline.
    fn pump(&mut self, fabric: &mut Fabric, now: u64, key: usize, ci: usize) {
        let (src, dst) = (key / self.n, key % self.n);
        let c = &mut self.pairs[key][ci];
        let traced = self.spec.trace.is_some() && c.msg.map(|m| m.0) == self.spec.trace;
        while let Some(Out { start, len }) = c.tx.next_segment(now) {
            let Some((id, first)) = c.msg else { break };
            let m = self.messages[id];
            let priority = match &self.spec.pias {
                Some(t) => pias_priority(t, c.tx.sent_before(start)),
                None => 0,
            };
            let seg = Segment {
                macs: (self.macs[src], self.macs[dst]),
                ips: (self.ips[src], self.ips[dst]),
                ports: (CLIENT_PORT_BASE + ci as u16, TCP_PORT),
                seq: start as u32,
                priority,
                ecn: self.spec.params.ecn,
                ..Segment::default()
            };
            let rank = self
                .spec
                .pfabric
                .then(|| c.tx.bytes_left().min(u64::from(u32::MAX)) as u32);
            let seed = payload_seed(self.seed, id);
            transmit(
                fabric,
                src,
                &seg,
                len as usize,
                priority,
                rank.map(|r| (r, c.flow)),
                |buf| {
                    fill_message(seed, id, m.size, (start - first) as usize, buf);
                },
            );
        }
        if traced {
            self.trace
                .push((now, c.tx.window(), c.tx.in_flight(), c.tx.alpha()));
        }
        self.refile(key);
    }

    /// Files pair `key`'s deadline: its connections' earliest timeout.
    fn refile(&mut self, key: usize) {
        let due = self.pairs[key].iter().map(|c| c.tx.rto_at()).min();
        self.deadlines.set(key, due.unwrap_or(NEVER));
    }

    /// A data segment from `peer` reached `host` on connection `ci`:
    /// in-order bytes go to the stream reader, and an acknowledgement goes
    /// back at once.
    fn on_data(
        &mut self,
        fabric: &mut Fabric,
        now: u64,
        (peer, host, ci): (usize, usize, usize),
        seg: &Segment,
        payload: &[u8],
        out: &mut Outcomes,
    ) {
        let key = peer * self.n + host;
        let messages = self.messages;
        let seed = self.seed;
        let (stats, scratch) = (&mut self.stats, &mut self.scratch);
        let c = &mut self.pairs[key][ci];
        let at = unwrap_seq(c.rx.next(), seg.seq);
        let stream = &mut c.stream;
        let (ack, (blocks, count)) = c.rx.on_segment(at, payload, |bytes| {
            read_stream(
                stream,
                bytes,
                messages,
                seed,
                (peer, host),
                now,
                out,
                stats,
                scratch,
            );
        });
        let mut sacks = ([(0, 0); 3], count);
        for (wire, &(from, to)) in sacks.0.iter_mut().zip(&blocks[..count]) {
            *wire = (from as u32, to as u32);
        }
        let reply = Segment {
            macs: (self.macs[host], self.macs[peer]),
            ips: (self.ips[host], self.ips[peer]),
            ports: (TCP_PORT, seg.ports.0),
            ack: ack as u32,
            priority: if self.spec.pias.is_some() { 7 } else { 0 },
            ece: seg.ecn,
            sacks,
            ..Segment::default()
        };
        let rank = self.spec.pfabric.then_some((0, c.flow));
        transmit(fabric, host, &reply, 0, reply.priority, rank, |_| {});
    }

    /// An acknowledgement from `peer` reached `host` on connection `ci`.
    fn on_ack(
        &mut self,
        fabric: &mut Fabric,
        now: u64,
        (host, peer): (usize, usize),
        ci: usize,
        seg: &Segment,
    ) {
        let key = host * self.n + peer;
        let c = &mut self.pairs[key][ci];
        let base = c.tx.una();
        let ack = unwrap_seq(base, seg.ack);
        let mut sacks = [(0, 0); 3];
        for (s, &(from, to)) in sacks.iter_mut().zip(&seg.sacks.0[..seg.sacks.1]) {
            *s = (unwrap_seq(base, from), unwrap_seq(base, to));
        }
        c.tx.on_ack(now, ack, &sacks[..seg.sacks.1], seg.ece);
        if c.tx.idle() {
            c.msg = None;
        }
        self.pump(fabric, now, key, ci);
    }
}

/// Moves the next frame `host` received into `frame`; false when none is
/// left.
fn take_frame(fabric: &mut Fabric, host: usize, now: u64, frame: &mut Vec<u8>) -> bool {
    let mut port = fabric.device(host);
    let Some((rx, _)) = port.receive(Instant::from_nanos(now)) else {
        return false;
    };
    rx.consume(|d| {
        frame.clear();
        frame.extend_from_slice(d);
    });
    true
}

/// The stream position of wire sequence number `seq`, taken as the one
/// nearest to `near` (within 2 GB either way).
fn unwrap_seq(near: u64, seq: u32) -> u64 {
    let delta = seq.wrapping_sub(near as u32) as i32;
    near.wrapping_add_signed(i64::from(delta))
}

/// Hands one segment of `payload` bytes (written by `fill`) to `host`'s
/// NIC with its priority and, for pFabric, its rank and flow.
fn transmit(
    fabric: &mut Fabric,
    host: usize,
    seg: &Segment,
    payload: usize,
    priority: u8,
    rank: Option<(u32, u32)>,
    fill: impl FnOnce(&mut [u8]),
) {
    let now = fabric.now();
    let mut port = fabric.device(host);
    let Some(mut tx) = port.transmit(now) else {
        return;
    };
    tx.set_meta(PacketMeta::with_priority(priority));
    if let Some((rank, flow)) = rank {
        tx.set_rank(rank, flow);
    }
    tx.consume(seg.frame_len(payload), |frame| fill(seg.write(frame)));
}

/// Writes bytes `at..at + buf.len()` of message `id` as it goes on the
/// stream: the 12-byte header (size, id), then the payload pattern.
fn fill_message(seed: u64, id: usize, size: u32, at: usize, buf: &mut [u8]) {
    let mut header = [0u8; HEADER];
    header[..4].copy_from_slice(&size.to_be_bytes());
    header[4..].copy_from_slice(&(id as u64).to_be_bytes());
    let k = HEADER.saturating_sub(at).min(buf.len());
    if k > 0 {
        buf[..k].copy_from_slice(&header[at..at + k]);
    }
    fill_pattern_at(seed, (at + k).saturating_sub(HEADER), &mut buf[k..]);
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
            if rx.got < HEADER {
                continue;
            }
            let len = u32::from_be_bytes(rx.header[..4].try_into().expect("4 bytes"));
            let id = u64::from_be_bytes(rx.header[4..].try_into().expect("8 bytes"));
            (rx.len, rx.id) = (len as usize, id as usize);
            rx.seed = payload_seed(seed, rx.id);
            rx.intact = messages
                .get(rx.id)
                .is_some_and(|m| m.size == len && m.src as usize == src && m.dst as usize == dst);
            if !rx.intact {
                stats.bad_headers += 1;
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

impl Driver for TcpDriver<'_> {
    fn submit(&mut self, fabric: &mut Fabric, now: u64, id: usize, out: &mut Outcomes) {
        let m = self.messages[id];
        let key = m.src as usize * self.n + m.dst as usize;
        let pool = &mut self.pairs[key];
        let ci = match pool.iter().position(|c| c.msg.is_none()) {
            Some(i) => i,
            None => {
                pool.push(Conn {
                    tx: Sender::new(self.spec.params, now),
                    rx: Receiver::default(),
                    stream: Incoming::default(),
                    msg: None,
                    flow: self.stats.connections as u32,
                });
                self.stats.connections += 1;
                self.stats.max_per_pair = self.stats.max_per_pair.max(pool.len() as u64);
                pool.len() - 1
            }
        };
        let c = &mut pool[ci];
        let first = c.tx.start_message(now, (HEADER + m.size as usize) as u64);
        c.msg = Some((id, first));
        out.sent += 1;
        self.pump(fabric, now, key, ci);
    }

    fn on_rx(&mut self, fabric: &mut Fabric, now: u64, host: usize, out: &mut Outcomes) {
        let mut frame = Vec::new();
        while take_frame(fabric, host, now, &mut frame) {
            let parsed = Segment::parse(&frame).and_then(|(seg, payload)| {
                let peer = fabric.host_by_ip(seg.ips.0).filter(|&p| p != host)?;
                let (client, data) = match seg.ports {
                    (c, TCP_PORT) => (c, true),
                    (TCP_PORT, c) => (c, false),
                    _ => return None,
                };
                let ci = usize::from(client.checked_sub(CLIENT_PORT_BASE)?);
                let key = if data {
                    peer * self.n + host
                } else {
                    host * self.n + peer
                };
                (ci < self.pairs[key].len()).then_some((seg, payload, peer, ci, data))
            });
            match parsed {
                Some((seg, payload, peer, ci, true)) => {
                    self.on_data(fabric, now, (peer, host, ci), &seg, payload, out);
                }
                Some((seg, _, peer, ci, false)) => self.on_ack(fabric, now, (host, peer), ci, &seg),
                None => self.stats.bad_frames += 1,
            }
        }
    }

    fn next_deadline(&mut self) -> Option<u64> {
        self.deadlines.earliest()
    }

    fn run_due(&mut self, fabric: &mut Fabric, now: u64, _out: &mut Outcomes) {
        while let Some(key) = self.deadlines.pop_due(now) {
            for ci in 0..self.pairs[key].len() {
                let c = &mut self.pairs[key][ci];
                if c.tx.rto_at() <= now {
                    c.tx.on_timeout(now);
                    self.pump(fabric, now, key, ci);
                }
            }
            self.refile(key);
        }
    }
}
