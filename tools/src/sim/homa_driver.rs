//! Homa on every host: one unchanged homa-stack [`Endpoint`] per host on its
//! fabric port, driven by the event loop.
//!
//! A message is a request RPC. By default it is one-way, as in the paper:
//! the message is complete when the server's endpoint reports the whole
//! request (`Event::Request`); the driver checks its bytes, then frees the
//! server RPC and the client RPC through the API (`abort`), so no response,
//! ACK or NEED_ACK crosses the fabric. With `response_bytes > 0` the server
//! instead replies with that many bytes and the client releases the RPC when
//! the response arrives (full RPC life cycle; the responses add load).

use std::collections::{HashMap, VecDeque};

use crate::fabric::Fabric;
use homa_phy::Instant;
use homa_stack::stats::Stats;
use homa_stack::wire::{IpAddr, Ipv4Addr, Ipv6Addr};
use homa_stack::{Endpoint, Event, RpcHandle, SendError, SocketHandle};
use homa_testkit::Storage;

use super::event_loop::{Deadlines, Driver, NEVER};
use super::homa_config::HomaParams;
use super::metrics::Outcomes;
use super::traffic::{pattern_matches, payload_seed, Message};
use crate::fill_pattern;

/// The port every host serves on.
pub const PORT: u16 = 700;

/// The message id of warm-up messages.
const WARM_UP: usize = usize::MAX;

/// Warm-up messages one host has in flight at most.
pub const WARM_UP_WINDOW: usize = 8;

/// Most polls of one host at one instant before the driver moves on (a
/// guard: an endpoint that keeps asking for a poll without progress).
const MAX_ROUNDS: u32 = 10_000;

/// What the server does with a request.
#[derive(Debug, Clone, Copy)]
pub struct HomaHostSpec {
    /// 0: one-way messages; otherwise the response length.
    pub response_bytes: usize,
}

/// Counters of the driver itself (the endpoints keep their own).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HomaDriverStats {
    /// `send_request` found the RPC table full; the message waited.
    pub deferred_table: u64,
    /// `send_request` found the pool full; the message waited.
    pub deferred_pool: u64,
    /// The message waited behind earlier deferred messages of its host.
    pub deferred_behind: u64,
    /// Requests no message matched (should stay 0).
    pub unknown_requests: u64,
    /// Replies that could not be queued (server pool or table full, or
    /// longer than a message may be); each fails its RPC.
    pub reply_errors: u64,
    /// Responses of the wrong length; each fails its RPC.
    pub bad_responses: u64,
    /// RPCs whose request arrived but whose response had not when the run
    /// ended; each counts as failed.
    pub unanswered: u64,
    /// Times a host still wanted a poll after `MAX_ROUNDS` polls at once.
    pub stalls: u64,
    /// Most RPCs live at once on one host (sampled at every 64th send).
    pub max_rpcs: usize,
}

/// Every host's endpoint and the bookkeeping around them.
pub struct HomaDriver<'m> {
    eps: Vec<Endpoint<'m>>,
    socks: Vec<SocketHandle>,
    /// Each host's address in the family the run uses.
    ips: Vec<IpAddr>,
    /// Whether Homa runs over IPv6.
    ipv6: bool,
    deadlines: Deadlines,
    /// Messages whose `send_request` failed, per source host, in order.
    backlog: Vec<VecDeque<usize>>,
    /// (client host, client RPC id) -> the message ([`WARM_UP`] for the
    /// warm-up ones) and the client's handle, while the client RPC lives.
    by_rpc: HashMap<(u32, u64), (usize, RpcHandle)>,
    /// Warm-up messages not yet delivered.
    pub warming: usize,
    /// Peers each host has still to warm up with.
    warm_todo: Vec<VecDeque<u32>>,
    /// Warm-up messages each host has in flight.
    warm_inflight: Vec<usize>,
    messages: &'m [Message],
    seed: u64,
    spec: HomaHostSpec,
    buf: Vec<u8>,
    /// Every response (the same bytes each time).
    reply: Vec<u8>,
    scratch: Vec<u8>,
    stats: HomaDriverStats,
}

impl<'m> HomaDriver<'m> {
    /// One endpoint per fabric host over `mem` (one [`Storage`] per host),
    /// each with every other host as a static neighbour, in the family of
    /// [`HomaParams::ipv6`].
    pub fn new(
        fabric: &mut Fabric,
        mem: &'m mut [Storage],
        params: &HomaParams,
        spec: HomaHostSpec,
        messages: &'m [Message],
        seed: u64,
    ) -> Result<HomaDriver<'m>, String> {
        let n = fabric.hosts();
        let ips: Vec<IpAddr> = (0..n)
            .map(|h| {
                if params.ipv6 {
                    IpAddr::V6(Ipv6Addr::from(fabric.host_ipv6(h)))
                } else {
                    IpAddr::V4(Ipv4Addr::from(fabric.host_ip(h)))
                }
            })
            .collect();
        let mut eps = Vec::with_capacity(n);
        let mut socks = Vec::with_capacity(n);
        let now = fabric.now();
        for (h, m) in mem.iter_mut().enumerate().take(n) {
            let cfg = params.config(
                fabric.host_ip(h),
                fabric.host_ipv6(h),
                fabric.host_mac(h),
                seed ^ (h as u64) << 20,
            );
            let mut ep = m.try_endpoint(cfg).map_err(|e| format!("host {h}: {e}"))?;
            socks.push(ep.bind(PORT).map_err(|e| e.to_string())?);
            for (p, ip) in ips.iter().enumerate() {
                if p != h {
                    let mac = homa_stack::wire::EthernetAddress(fabric.host_mac(p));
                    ep.add_neighbor(now, *ip, mac).map_err(|e| e.to_string())?;
                }
            }
            eps.push(ep);
        }
        Ok(HomaDriver {
            eps,
            socks,
            ips,
            ipv6: params.ipv6,
            deadlines: Deadlines::new(n),
            backlog: vec![VecDeque::new(); n],
            by_rpc: HashMap::new(),
            warming: 0,
            warm_todo: vec![VecDeque::new(); n],
            warm_inflight: vec![0; n],
            messages,
            seed,
            spec,
            buf: Vec::new(),
            reply: Vec::new(),
            scratch: Vec::new(),
            stats: HomaDriverStats::default(),
        })
    }

    /// The driver's own counters.
    pub fn stats(&self) -> HomaDriverStats {
        self.stats
    }

    /// At the end of a run: every RPC whose request arrived but whose
    /// response did not fails (counted in [`HomaDriverStats::unanswered`]).
    pub fn fail_unanswered(&mut self, out: &mut Outcomes) {
        for &(id, _) in self.by_rpc.values() {
            if id != WARM_UP && out.finish_time(id).is_some() {
                self.stats.unanswered += 1;
                out.fail_after_arrival(id);
            }
        }
    }

    /// The endpoints' counters, summed over hosts (the fields used here).
    pub fn endpoint_totals(&self) -> EndpointTotals {
        let mut t = EndpointTotals::default();
        for ep in &self.eps {
            let s: &Stats = ep.stats();
            t.retransmissions += s.retransmissions;
            t.resends_requested += s.resends_requested;
            t.timeouts += s.timeouts;
            t.drops += s.drops.total();
            t.tx_frames += s.tx_frames;
            t.grants += s.grants_srpt + s.grants_fifo;
        }
        t
    }

    /// Tries to hand message `id` to its source endpoint.
    fn try_send(&mut self, id: usize) -> Result<(), SendError> {
        let m = self.messages[id];
        let h = m.src as usize;
        self.buf.resize(m.size as usize, 0);
        fill_pattern(payload_seed(self.seed, id), &mut self.buf);
        let dst = self.ips[m.dst as usize];
        let rpc = self.eps[h].send_request(self.socks[h], dst, PORT, &self.buf)?;
        if id % 64 == 0 {
            // A count scans every slot: sampled, not taken on every send.
            let live = self.eps[h].rpcs_in_use();
            self.stats.max_rpcs = self.stats.max_rpcs.max(live);
        }
        self.by_rpc.insert((m.src, rpc.id()), (id, rpc));
        Ok(())
    }

    /// Sends a 1-byte one-way message from every host to every other one,
    /// so that every pair has exchanged CUTOFFS before traffic starts (as
    /// Linux hosts that have talked before have). At most [`WARM_UP_WINDOW`]
    /// per host are in flight, so no table overflows. Run the loop until
    /// [`HomaDriver::warming`] is 0 and it is idle.
    pub fn warm_up(&mut self, fabric: &Fabric) {
        let now = fabric.now().total_nanos();
        let n = self.eps.len();
        for h in 0..n {
            self.warm_todo[h] = (0..n as u32).filter(|&p| p as usize != h).collect();
            self.warming += n - 1;
            self.deadlines.set(h, now);
        }
    }

    /// Starts host `h`'s next warm-up messages while its window allows.
    fn send_warm_ups(&mut self, h: usize) {
        while self.warm_inflight[h] < WARM_UP_WINDOW {
            let Some(&p) = self.warm_todo[h].front() else {
                return;
            };
            let Ok(rpc) = self.eps[h].send_request(self.socks[h], self.ips[p as usize], PORT, &[0])
            else {
                return;
            };
            self.warm_todo[h].pop_front();
            self.warm_inflight[h] += 1;
            self.by_rpc.insert((h as u32, rpc.id()), (WARM_UP, rpc));
        }
    }

    /// Sends waiting messages of host `h` in order while they fit.
    fn flush_backlog(&mut self, h: usize) {
        while let Some(&id) = self.backlog[h].front() {
            if self.try_send(id).is_err() {
                return;
            }
            self.backlog[h].pop_front();
        }
    }

    /// Polls host `h` until it has nothing more to do at `now`, handles its
    /// events, and files its next deadline.
    fn service(&mut self, fabric: &mut Fabric, now: u64, h: usize, out: &mut Outcomes) {
        let t = Instant::from_nanos(now);
        for _ in 0..MAX_ROUNDS {
            if !self.backlog[h].is_empty() {
                self.flush_backlog(h);
            }
            if !self.warm_todo[h].is_empty() {
                self.send_warm_ups(h);
            }
            self.eps[h].poll(t, &mut fabric.device(h));
            let acted = self.events(fabric, now, h, out);
            let next = self.eps[h].poll_at().map_or(NEVER, |a| a.total_nanos());
            if !acted && fabric.rx_pending(h) == 0 && next > now {
                self.deadlines.set(h, next);
                return;
            }
        }
        self.stats.stalls += 1;
        self.deadlines.set(h, now + 1);
    }

    /// Handles every event of host `h`; returns whether any API call was
    /// made that may need another poll.
    fn events(&mut self, fabric: &Fabric, now: u64, h: usize, out: &mut Outcomes) -> bool {
        let mut acted = false;
        while let Some(ev) = self.eps[h].recv(self.socks[h]) {
            acted = true;
            match ev {
                Event::Request { rpc, peer, len, .. } => {
                    self.request(fabric, now, h, rpc, peer, len, out)
                }
                Event::Response { rpc, len } => {
                    // The request was timed when it arrived; a response of
                    // the wrong length still fails the RPC.
                    if let Some(id) = self.forget(h, rpc) {
                        if len != self.spec.response_bytes {
                            self.stats.bad_responses += 1;
                            out.fail_after_arrival(id);
                        }
                    }
                    let _ = self.eps[h].release(rpc);
                }
                Event::Failed { rpc, .. } => {
                    if let Some(id) = self.forget(h, rpc) {
                        // Before its request arrived, or (an RPC) after.
                        out.fail(id);
                        out.fail_after_arrival(id);
                    }
                    let _ = self.eps[h].release(rpc);
                }
            }
        }
        acted
    }

    /// The message of client RPC `rpc` of host `h`, no longer tracked.
    fn forget(&mut self, h: usize, rpc: RpcHandle) -> Option<usize> {
        let (id, _) = self.by_rpc.remove(&(h as u32, rpc.id()))?;
        (id != WARM_UP).then_some(id)
    }

    #[allow(clippy::too_many_arguments)]
    fn request(
        &mut self,
        fabric: &Fabric,
        now: u64,
        h: usize,
        rpc: RpcHandle,
        peer: IpAddr,
        len: usize,
        out: &mut Outcomes,
    ) {
        // A peer of the other family than the run's is no client of ours.
        let client = match peer {
            IpAddr::V4(a) if !self.ipv6 => fabric.host_by_ip(a.octets()),
            IpAddr::V6(a) if self.ipv6 => fabric.host_by_ipv6(a.octets()),
            _ => None,
        };
        let entry = client.and_then(|c| Some((c, self.by_rpc.get(&(c as u32, rpc.id() ^ 1))?)));
        let Some((client, &(id, handle))) = entry else {
            self.stats.unknown_requests += 1;
            let _ = self.eps[h].abort(rpc);
            return;
        };
        if id == WARM_UP {
            self.warming -= 1;
            self.warm_inflight[client] -= 1;
            self.by_rpc.remove(&(client as u32, handle.id()));
            let _ = self.eps[h].abort(rpc);
            let _ = self.eps[client].abort(handle);
            self.deadlines.at_most(client, now);
            return;
        }
        let m = self.messages[id];
        let seed = payload_seed(self.seed, id);
        let scratch = &mut self.scratch;
        let intact = len == m.size as usize
            && m.dst as usize == h
            && self.eps[h].message(rpc).is_some_and(|msg| {
                let mut off = 0;
                msg.chunks().all(|c| {
                    let ok = pattern_matches(seed, off, c, scratch);
                    off += c.len();
                    ok
                })
            });
        out.complete(id, now, intact);
        if self.spec.response_bytes == 0 {
            // One-way: both ends learn out of band that the message arrived.
            let _ = self.eps[h].abort(rpc);
            self.by_rpc.remove(&(client as u32, handle.id()));
            let _ = self.eps[client].abort(handle);
            self.deadlines.at_most(client, now);
        } else {
            if self.reply.len() != self.spec.response_bytes {
                self.reply = vec![0x5a; self.spec.response_bytes];
            }
            if self.eps[h].reply(rpc, &self.reply).is_err() {
                // The client would only learn of it by timing out: fail the
                // RPC at both ends now.
                self.stats.reply_errors += 1;
                out.fail_after_arrival(id);
                let _ = self.eps[h].abort(rpc);
                self.by_rpc.remove(&(client as u32, handle.id()));
                let _ = self.eps[client].abort(handle);
                self.deadlines.at_most(client, now);
            }
        }
    }
}

/// Endpoint counters summed over all hosts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EndpointTotals {
    /// DATA packets sent again.
    pub retransmissions: u64,
    /// RESENDs asked for.
    pub resends_requested: u64,
    /// RPCs that timed out.
    pub timeouts: u64,
    /// Frames or packets dropped by the endpoints, every reason.
    pub drops: u64,
    /// Frames sent.
    pub tx_frames: u64,
    /// GRANTs decided.
    pub grants: u64,
}

impl Driver for HomaDriver<'_> {
    fn submit(&mut self, _fabric: &mut Fabric, now: u64, id: usize, out: &mut Outcomes) {
        let h = self.messages[id].src as usize;
        out.sent += 1;
        if self.backlog[h].is_empty() {
            match self.try_send(id) {
                Ok(()) => {}
                Err(e) => {
                    match e {
                        SendError::PoolFull => self.stats.deferred_pool += 1,
                        _ => self.stats.deferred_table += 1,
                    }
                    self.backlog[h].push_back(id);
                }
            }
        } else {
            self.stats.deferred_behind += 1;
            self.backlog[h].push_back(id);
        }
        self.deadlines.at_most(h, now);
    }

    fn on_rx(&mut self, fabric: &mut Fabric, now: u64, host: usize, out: &mut Outcomes) {
        self.service(fabric, now, host, out);
    }

    fn next_deadline(&mut self) -> Option<u64> {
        self.deadlines.earliest()
    }

    fn run_due(&mut self, fabric: &mut Fabric, now: u64, out: &mut Outcomes) {
        while let Some(h) = self.deadlines.pop_due(now) {
            self.service(fabric, now, h, out);
        }
    }

    fn settled(&self) -> bool {
        self.by_rpc.is_empty()
    }
}
