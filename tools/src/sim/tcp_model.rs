//! A TCP sender and receiver as the packet-level simulators of the Homa,
//! PIAS and pFabric papers model them (ns-2's full TCP with SACK), sans-IO:
//! times are arguments, segments go out through the caller.
//!
//! Why a model and not smoltcp: the baselines need DCTCP (ECN-capable
//! segments, the sender's marked fraction `alpha` and its window cut), a
//! settable initial window, and a congestion window that bounds the bytes
//! in flight; smoltcp 0.13 has no ECN and its window only decides whether a
//! segment may go. The published baselines were models of the same kind.
//!
//! Sender: the congestion window `cwnd` (in segments) starts at the initial
//! window, grows by one segment per acknowledgement in slow start and by
//! `1/cwnd` after, up to `max_window`. Bytes in flight (sent, neither
//! acknowledged, selectively acknowledged nor declared lost) never exceed
//! `cwnd` full segments: a segment goes only if it fits. Loss recovery is
//! SACK-style on the retransmission timeout: at a timeout every segment not
//! selectively acknowledged is declared lost and sent again, holes first,
//! with `cwnd` back to 1 and `ssthresh` at half; no fast retransmit on
//! duplicate acknowledgements, as the simulated PIAS and pFabric disabled
//! it (per-packet spraying reorders segments). DCTCP (`ecn`): data segments
//! are ECN-capable; the receiver echoes each segment's Congestion
//! Experienced mark in its acknowledgement; once per window of data the
//! sender updates `alpha = (1 - g) alpha + g F` (F: the fraction of bytes
//! acknowledged with an echo) and on an echo cuts `cwnd` to
//! `cwnd (1 - alpha / 2)`, at most once per window. After `probe_after`
//! timeouts in a row (pFabric) the sender only sends one-byte probes until
//! an acknowledgement comes back.
//!
//! Receiver: acknowledges every segment at once with the next byte it
//! expects, up to three SACK blocks (the one holding the segment just
//! received first) and the segment's CE mark; it keeps out-of-order bytes
//! until the hole before them fills.

use std::collections::{BTreeMap, VecDeque};

use super::event_loop::NEVER;

/// Payload bytes per full segment (a 1,500-byte IP MTU, 40 bytes of IPv4
/// and TCP headers), as the ns-2 baselines' 1,460-byte packets.
pub const MSS: u32 = 1460;

/// How the retransmission timeout is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rto {
    /// Always this many ns, never backed off (ns-2's `MinTcp`, which the
    /// simulated PIAS and pFabric ran).
    Fixed(u64),
    /// RFC 6298: smoothed round trip plus four deviations, at least `min`
    /// ns, doubled for each timeout in a row (up to 64 times).
    Estimated {
        /// The floor, ns.
        min: u64,
    },
}

/// A baseline's TCP settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TcpParams {
    /// Initial window, segments (also the window after an idle period of
    /// a timeout or more: slow-start restart).
    pub init_window: u32,
    /// Largest window, segments.
    pub max_window: u32,
    /// DCTCP: ECN-capable segments, `alpha`, the window cut.
    pub ecn: bool,
    /// DCTCP's gain `g` in the `alpha` update.
    pub dctcp_g: f64,
    /// The retransmission timeout.
    pub rto: Rto,
    /// Timeouts in a row after which only one-byte probes go (pFabric).
    pub probe_after: Option<u32>,
}

/// Counters of one sender.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Segments sent, retransmissions and probes included.
    pub segments: u64,
    /// Segments sent again after a timeout.
    pub retransmissions: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// One-byte probes.
    pub probes: u64,
    /// Window cuts on an ECN echo.
    pub ecn_cuts: u64,
    /// Times data waited because the window was full.
    pub window_limited: u64,
    /// Sends after which the bytes in flight exceeded the window (must
    /// stay 0).
    pub window_violations: u64,
}

impl SenderStats {
    /// Adds `o`'s counts.
    pub fn add(&mut self, o: &SenderStats) {
        self.segments += o.segments;
        self.retransmissions += o.retransmissions;
        self.timeouts += o.timeouts;
        self.probes += o.probes;
        self.ecn_cuts += o.ecn_cuts;
        self.window_limited += o.window_limited;
        self.window_violations += o.window_violations;
    }
}

/// A segment sent and not yet acknowledged cumulatively.
#[derive(Debug, Clone, Copy)]
struct Seg {
    start: u64,
    len: u32,
    sent_at: u64,
    retransmitted: bool,
    sacked: bool,
    lost: bool,
}

/// A segment to put on the wire: stream bytes `start..start + len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Out {
    /// First stream byte.
    pub start: u64,
    /// Bytes of payload.
    pub len: u32,
}

/// The sending half of a connection. Stream positions are byte offsets
/// from the connection's first byte.
#[derive(Debug, Clone)]
pub struct Sender {
    p: TcpParams,
    una: u64,
    nxt: u64,
    end: u64,
    msg_start: u64,
    segs: VecDeque<Seg>,
    /// Bytes of `segs` neither selectively acknowledged nor lost, plus an
    /// outstanding probe.
    in_flight: u64,
    /// Bytes of `segs` selectively acknowledged.
    sacked: u64,
    /// Segments of `segs` declared lost and not sent again yet.
    lost: usize,
    cwnd: f64,
    ssthresh: f64,
    alpha: f64,
    acked_total: u64,
    acked_marked: u64,
    alpha_seq: u64,
    recover: u64,
    after_timeout: bool,
    srtt: f64,
    rttvar: f64,
    backoff: u32,
    rto_at: u64,
    timeouts_in_row: u32,
    probing: bool,
    idle_since: u64,
    /// The sender's counters.
    pub stats: SenderStats,
}

impl Sender {
    /// An idle sender at `now`, its window at the initial window.
    pub fn new(p: TcpParams, now: u64) -> Sender {
        Sender {
            p,
            una: 0,
            nxt: 0,
            end: 0,
            msg_start: 0,
            segs: VecDeque::new(),
            in_flight: 0,
            sacked: 0,
            lost: 0,
            cwnd: f64::from(p.init_window),
            ssthresh: f64::from(p.max_window),
            alpha: 0.0,
            acked_total: 0,
            acked_marked: 0,
            alpha_seq: 0,
            recover: 0,
            after_timeout: false,
            srtt: 0.0,
            rttvar: 0.0,
            backoff: 0,
            rto_at: NEVER,
            timeouts_in_row: 0,
            probing: false,
            idle_since: now,
            stats: SenderStats::default(),
        }
    }

    /// The first stream byte not acknowledged.
    pub fn una(&self) -> u64 {
        self.una
    }

    /// Whether every byte written has been acknowledged.
    pub fn idle(&self) -> bool {
        self.una == self.end
    }

    /// Writes a message of `bytes` stream bytes behind everything written
    /// before (call when idle); returns its first stream byte. After an
    /// idle period of a timeout or more the window restarts from the
    /// initial window.
    pub fn start_message(&mut self, now: u64, bytes: u64) -> u64 {
        debug_assert!(self.idle());
        if now.saturating_sub(self.idle_since) >= self.rto() {
            self.cwnd = self.cwnd.min(f64::from(self.p.init_window));
        }
        self.msg_start = self.end;
        self.end += bytes;
        self.msg_start
    }

    /// The current message's bytes before stream byte `at`.
    pub fn sent_before(&self, at: u64) -> u64 {
        at - self.msg_start
    }

    /// pFabric's rank: the bytes written not yet acknowledged.
    pub fn bytes_left(&self) -> u64 {
        self.end - self.una - self.sacked
    }

    /// The congestion window in bytes (1 while probing).
    pub fn window(&self) -> u64 {
        if self.probing {
            1
        } else {
            self.cwnd as u64 * u64::from(MSS)
        }
    }

    /// Bytes in flight.
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// DCTCP's estimate of the marked fraction.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// When the retransmission timer fires, or [`NEVER`].
    pub fn rto_at(&self) -> u64 {
        self.rto_at
    }

    /// The retransmission timeout now, ns.
    fn rto(&self) -> u64 {
        match self.p.rto {
            Rto::Fixed(ns) => ns,
            Rto::Estimated { min } => {
                let base = ((self.srtt + 4.0 * self.rttvar) as u64).max(min);
                base << self.backoff.min(6)
            }
        }
    }

    /// The next segment to send at `now`, if the window allows one: a
    /// probe while probing, else the first segment declared lost, else new
    /// bytes.
    pub fn next_segment(&mut self, now: u64) -> Option<Out> {
        if self.probing {
            if self.in_flight > 0 || self.una == self.end {
                return None;
            }
            self.in_flight = 1;
            self.stats.probes += 1;
            return Some(self.sent(now, self.una, 1));
        }
        let window = self.window();
        if self.lost > 0 {
            let i = self.segs.iter().position(|s| s.lost)?;
            let len = self.segs[i].len;
            if self.in_flight + u64::from(len) > window {
                self.stats.window_limited += 1;
                return None;
            }
            let s = &mut self.segs[i];
            (s.lost, s.retransmitted, s.sent_at) = (false, true, now);
            let start = s.start;
            self.lost -= 1;
            self.in_flight += u64::from(len);
            self.stats.retransmissions += 1;
            return Some(self.sent(now, start, len));
        }
        if self.nxt >= self.end {
            return None;
        }
        let len = (self.end - self.nxt).min(u64::from(MSS)) as u32;
        if self.in_flight + u64::from(len) > window {
            self.stats.window_limited += 1;
            return None;
        }
        self.segs.push_back(Seg {
            start: self.nxt,
            len,
            sent_at: now,
            retransmitted: false,
            sacked: false,
            lost: false,
        });
        let start = self.nxt;
        self.nxt += u64::from(len);
        self.in_flight += u64::from(len);
        Some(self.sent(now, start, len))
    }

    /// Counts a segment sent, checks the window, arms the timer.
    fn sent(&mut self, now: u64, start: u64, len: u32) -> Out {
        self.stats.segments += 1;
        if self.in_flight > self.window() {
            self.stats.window_violations += 1;
        }
        debug_assert_eq!(self.in_flight, self.counted_in_flight());
        if self.rto_at == NEVER {
            self.rto_at = now + self.rto();
        }
        Out { start, len }
    }

    /// The bytes in flight counted from the segments, as a check of the
    /// running count.
    fn counted_in_flight(&self) -> u64 {
        let segs: u64 = self
            .segs
            .iter()
            .filter(|s| !s.sacked && !s.lost)
            .map(|s| u64::from(s.len))
            .sum();
        segs + u64::from(self.probing && self.in_flight > 0)
    }

    /// An acknowledgement at `now` of every byte before `ack`, the SACK
    /// blocks `sacks` (stream ranges) and, with DCTCP, whether it echoes a
    /// CE mark. Acknowledgements of bytes never sent are ignored.
    pub fn on_ack(&mut self, now: u64, ack: u64, sacks: &[(u64, u64)], ece: bool) {
        if ack > self.nxt.max(self.una + u64::from(self.probing)) || ack < self.una {
            return;
        }
        if self.probing {
            self.probing = false;
            self.in_flight = 0;
        }
        let advanced = ack > self.una;
        let mut newly = 0;
        let mut rtt = None;
        while let Some(s) = self.segs.front_mut() {
            if s.start >= ack {
                break;
            }
            let cut = (ack - s.start).min(u64::from(s.len));
            if s.sacked {
                self.sacked -= cut;
            } else {
                newly += cut;
                if !s.lost {
                    self.in_flight -= cut;
                }
            }
            if cut < u64::from(s.len) {
                (s.start, s.len) = (ack, s.len - cut as u32);
                break;
            }
            if !s.retransmitted {
                rtt = Some(now - s.sent_at);
            }
            self.lost -= usize::from(s.lost);
            self.segs.pop_front();
        }
        self.una = ack;
        for &(from, to) in sacks {
            let first = self.segs.partition_point(|s| s.start < from);
            for s in self.segs.range_mut(first..) {
                if s.start + u64::from(s.len) > to {
                    break;
                }
                if !s.sacked {
                    s.sacked = true;
                    newly += u64::from(s.len);
                    self.sacked += u64::from(s.len);
                    if s.lost {
                        s.lost = false;
                        self.lost -= 1;
                    } else {
                        self.in_flight -= u64::from(s.len);
                    }
                }
            }
        }
        if let Some(sample) = rtt {
            self.sample_rtt(sample as f64);
        }
        if self.p.ecn {
            self.dctcp(ack, newly, ece);
        }
        if advanced {
            if !(self.p.ecn && ece) {
                self.cwnd += if self.cwnd < self.ssthresh {
                    1.0
                } else {
                    1.0 / self.cwnd
                };
                self.cwnd = self.cwnd.min(f64::from(self.p.max_window));
            }
            self.timeouts_in_row = 0;
            self.backoff = 0;
            self.rto_at = if self.segs.is_empty() {
                NEVER
            } else {
                now + self.rto()
            };
            if self.idle() {
                self.idle_since = now;
            }
        }
    }

    /// DCTCP's `alpha` update (once per window of data) and window cut (on
    /// an echo, once per window or after a timeout).
    fn dctcp(&mut self, ack: u64, newly: u64, ece: bool) {
        let acked = if newly == 0 { u64::from(MSS) } else { newly };
        self.acked_total += acked;
        if ece {
            self.acked_marked += acked;
        }
        if ack > self.alpha_seq {
            let f = self.acked_marked as f64 / self.acked_total as f64;
            self.alpha = (1.0 - self.p.dctcp_g) * self.alpha + self.p.dctcp_g * f;
            (self.acked_total, self.acked_marked) = (0, 0);
            self.alpha_seq = self.nxt;
        }
        if ece && (ack > self.recover || self.after_timeout) {
            self.recover = self.nxt;
            self.after_timeout = false;
            self.cwnd = (self.cwnd * (1.0 - self.alpha / 2.0)).max(1.0);
            self.ssthresh = self.cwnd;
            self.stats.ecn_cuts += 1;
        }
    }

    /// RFC 6298's smoothed round trip and its deviation.
    fn sample_rtt(&mut self, r: f64) {
        if self.srtt == 0.0 {
            (self.srtt, self.rttvar) = (r, r / 2.0);
        } else {
            self.rttvar = 0.75 * self.rttvar + 0.25 * (self.srtt - r).abs();
            self.srtt = 0.875 * self.srtt + 0.125 * r;
        }
    }

    /// The retransmission timer, if due at `now`: every segment not
    /// selectively acknowledged is lost, the window falls to one segment.
    pub fn on_timeout(&mut self, now: u64) {
        if self.rto_at > now {
            return;
        }
        self.stats.timeouts += 1;
        self.timeouts_in_row += 1;
        self.ssthresh = (self.cwnd / 2.0).max(2.0);
        self.cwnd = 1.0;
        for s in self.segs.iter_mut().filter(|s| !s.sacked && !s.lost) {
            s.lost = true;
            self.lost += 1;
        }
        self.in_flight = 0;
        self.after_timeout = true;
        self.backoff += 1;
        self.probing = self
            .p
            .probe_after
            .is_some_and(|k| self.timeouts_in_row >= k);
        self.rto_at = if self.segs.is_empty() && !self.probing {
            NEVER
        } else {
            now + self.rto()
        };
    }
}

/// Up to three SACK blocks, stream ranges.
pub type Sacks = ([(u64, u64); 3], usize);

/// The receiving half of a connection.
#[derive(Debug, Clone, Default)]
pub struct Receiver {
    nxt: u64,
    ooo: BTreeMap<u64, Vec<u8>>,
}

impl Receiver {
    /// The next stream byte expected.
    pub fn next(&self) -> u64 {
        self.nxt
    }

    /// Takes the segment of stream bytes from `at`, hands every byte now in
    /// order to `deliver`, and returns the acknowledgement: the next byte
    /// expected and the SACK blocks.
    pub fn on_segment(
        &mut self,
        at: u64,
        payload: &[u8],
        mut deliver: impl FnMut(&[u8]),
    ) -> (u64, Sacks) {
        let end = at + payload.len() as u64;
        if at <= self.nxt {
            if end > self.nxt {
                deliver(&payload[(self.nxt - at) as usize..]);
                self.nxt = end;
            }
            while let Some(entry) = self.ooo.first_entry() {
                if *entry.key() > self.nxt {
                    break;
                }
                let (from, bytes) = entry.remove_entry();
                let to = from + bytes.len() as u64;
                if to > self.nxt {
                    deliver(&bytes[(self.nxt - from) as usize..]);
                    self.nxt = to;
                }
            }
        } else {
            let longer = self.ooo.get(&at).is_none_or(|b| b.len() < payload.len());
            if longer {
                self.ooo.insert(at, payload.to_vec());
            }
        }
        (self.nxt, self.sacks(at))
    }

    /// The out-of-order ranges merged, the one holding `recent` first,
    /// then the lowest others.
    fn sacks(&self, recent: u64) -> Sacks {
        let mut blocks: Vec<(u64, u64)> = Vec::new();
        for (&from, bytes) in &self.ooo {
            let to = from + bytes.len() as u64;
            match blocks.last_mut() {
                Some(last) if from <= last.1 => last.1 = last.1.max(to),
                _ => blocks.push((from, to)),
            }
        }
        if let Some(i) = blocks.iter().position(|b| b.0 <= recent && recent < b.1) {
            let b = blocks.remove(i);
            blocks.insert(0, b);
        }
        let mut out = ([(0, 0); 3], blocks.len().min(3));
        out.0[..out.1].copy_from_slice(&blocks[..out.1]);
        out
    }
}
