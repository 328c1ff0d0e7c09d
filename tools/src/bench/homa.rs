//! homa-stack's side: a client and a server endpoint over a [`Pair`], used
//! only through the public `Endpoint` API.

use anyhow::Context as _;
use std::collections::HashMap;

use homa_stack::wire::{EthernetAddress, Ipv4Addr};
use homa_stack::{Config, Endpoint, Event, SocketHandle};
use homa_testkit::Storage;

use super::cpu::measured;
use super::ring::{Clock, Offloaded, Pair, LINK_MBPS};
use super::{check_payload, fill_payload, Measure, CLIENT_IP, CLIENT_MAC, SERVER_IP, SERVER_MAC};

/// The server's port.
const PORT: u16 = 99;
/// Pool page size (the test kit's `Storage` uses 4 KiB pages).
const PAGE: usize = 4096;
/// Virtual time a run may take before it counts as stalled.
const STALL_NS: u64 = 60_000_000_000;

/// An endpoint over `memory` with the benchmark's configuration.
fn endpoint(memory: &mut Storage, ip: Ipv4Addr, mac: EthernetAddress, seed: u64) -> Endpoint<'_> {
    // The benchmark repeats for a seed: the hash seed comes from it.
    let mut config = Config::new(ip, mac, seed);
    config.link_mbps = LINK_MBPS as u32;
    // Filled and verified, as smoltcp does UDP and TCP checksums.
    config.homa_checksum_tx = true;
    config.homa_checksum_rx = true;
    memory.endpoint(config)
}

/// Client and server, their sockets, the rings and the clock.
struct Ends<'a> {
    client: Endpoint<'a>,
    server: Endpoint<'a>,
    csock: SocketHandle,
    ssock: SocketHandle,
    pair: Pair,
    clock: Clock,
    checksums: Checksums,
}

impl<'a> Ends<'a> {
    fn new(
        client: &'a mut Storage,
        server: &'a mut Storage,
        ring: usize,
        checksums: Checksums,
    ) -> Ends<'a> {
        let clock = Clock::new();
        let mut client = endpoint(client, CLIENT_IP, CLIENT_MAC, 1);
        let mut server = endpoint(server, SERVER_IP, SERVER_MAC, 2);
        // Static neighbours: Homa hosts need no ARP in a datacenter.
        client
            .add_neighbor(clock.homa(), SERVER_IP, SERVER_MAC)
            .expect("room for a peer");
        server
            .add_neighbor(clock.homa(), CLIENT_IP, CLIENT_MAC)
            .expect("room for a peer");
        let csock = client.socket().expect("a client socket");
        let ssock = server.bind(PORT).expect("a server socket");
        Ends {
            client,
            server,
            csock,
            ssock,
            pair: Pair::new(ring),
            clock,
            checksums,
        }
    }

    /// Polls the client over its end of the rings.
    fn poll_client(&mut self) {
        let now = self.clock.homa();
        match self.checksums {
            Checksums::Software => self.client.poll(now, &mut self.pair.a()),
            Checksums::Device => self.client.poll(now, &mut Offloaded(self.pair.a())),
        }
    }

    /// Polls the server over its end of the rings.
    fn poll_server(&mut self) {
        let now = self.clock.homa();
        match self.checksums {
            Checksums::Software => self.server.poll(now, &mut self.pair.b()),
            Checksums::Device => self.server.poll(now, &mut Offloaded(self.pair.b())),
        }
    }

    /// After a step that moved `bytes`: the clock moves on, straight to the
    /// next timer when nothing moved, nothing waits and the application has
    /// no work to hand over (`busy`): a client about to issue its next
    /// request is not an idle link waiting for a timer.
    fn tick(&mut self, bytes: u64, busy: bool) {
        self.clock.advance(bytes);
        if bytes == 0 && !busy && !self.pair.pending() {
            let next = [self.client.poll_at(), self.server.poll_at()]
                .into_iter()
                .flatten()
                .min();
            if let Some(t) = next {
                self.clock.ns = self.clock.ns.max(t.total_nanos());
            }
        }
    }

    /// Runs until both ends hold no RPC and no pool page (the server frees
    /// its RPCs once acked), or fails after a virtual minute.
    fn drain(&mut self) -> anyhow::Result<()> {
        let end = self.clock.ns + STALL_NS;
        while self.clock.ns < end {
            if self.leaked() == 0 {
                return Ok(());
            }
            let before = self.pair.bytes();
            self.poll_client();
            self.poll_server();
            let moved = self.pair.bytes() - before;
            self.tick(moved, false);
        }
        Err(anyhow::anyhow!(
            "homa: {} RPCs or pool bytes left after the run",
            self.leaked()
        ))
    }

    /// Live RPCs and used pool bytes in both ends.
    fn leaked(&self) -> usize {
        self.client.rpcs_in_use()
            + self.server.rpcs_in_use()
            + (self.client.pool_capacity_bytes() - self.client.pool_free_bytes())
            + (self.server.pool_capacity_bytes() - self.server.pool_free_bytes())
    }

    /// Frames lost on the rings or failed RPCs are errors; packets the
    /// endpoints dropped or retransmitted on their own are noted on stderr
    /// (they are the stack's behaviour, and the run still completed).
    fn check_clean(&self, what: &str) -> anyhow::Result<()> {
        if self.pair.dropped() > 0 {
            return Err(anyhow::anyhow!(
                "homa: {} frames lost to full rings",
                self.pair.dropped()
            ));
        }
        for (who, ep) in [("client", &self.client), ("server", &self.server)] {
            let s = ep.stats();
            if s.client_failed > 0 || s.drops.checksum > 0 || s.drops.malformed > 0 {
                return Err(anyhow::anyhow!(
                    "homa {who}: {} failed RPCs, {} bad checksums, {} malformed",
                    s.client_failed,
                    s.drops.checksum,
                    s.drops.malformed
                ));
            }
            if s.drops.total() > 0 || s.retransmissions > 0 {
                // Only the kinds of drop that happened.
                let drops = format!("{:?}", s.drops);
                let kinds: Vec<&str> = drops
                    .trim_start_matches("Drops { ")
                    .trim_end_matches(" }")
                    .split(", ")
                    .filter(|kv| !kv.ends_with(": 0"))
                    .collect();
                note(format!(
                    "{what}: homa {who} dropped {} packets ({}), retransmitted {}",
                    s.drops.total(),
                    kinds.join(", "),
                    s.retransmissions
                ));
            }
        }
        Ok(())
    }
}

/// Prints a note on stderr, once per distinct text (repetitions repeat them).
fn note(text: String) {
    thread_local! {
        static SEEN: std::cell::RefCell<std::collections::HashSet<String>> = Default::default();
    }
    if SEEN.with(|seen| seen.borrow_mut().insert(text.clone())) {
        eprintln!("homa-bench: note: {text}");
    }
}

/// The client's view of a run: requests in flight and what they carry.
struct Client {
    outstanding: usize,
    len: usize,
    /// The request being built (its first 8 bytes are the sequence number).
    request: Vec<u8>,
    /// A response copied out of the pool.
    response: Vec<u8>,
    /// Sequence numbers by RPC id: one `u64` hashed per operation, as the
    /// UDP echo's set of sequence numbers does.
    inflight: HashMap<u64, u64>,
    next_seq: u64,
}

/// Runs `count` RPCs of `len`-byte requests with up to `outstanding` in
/// flight, and returns after the last response. Short requests (up to 1,500
/// bytes) are echoed and the client checks each echo; long ones are checked
/// in place by the server, which answers with their 8-byte sequence number.
fn run(ends: &mut Ends<'_>, cl: &mut Client, count: u64) -> anyhow::Result<()> {
    let mut issued = 0u64;
    let mut done = 0u64;
    let mut scratch = vec![0u8; 1500];
    let end = ends.clock.ns + STALL_NS;
    while done < count {
        while cl.inflight.len() < cl.outstanding && issued < count {
            let seq = cl.next_seq;
            cl.next_seq += 1;
            cl.request[..8].copy_from_slice(&seq.to_le_bytes());
            let rpc = ends
                .client
                .send_request(ends.csock, SERVER_IP, PORT, &cl.request)
                .map_err(|e| anyhow::anyhow!("homa: send_request: {e}"))?;
            cl.inflight.insert(rpc.id(), seq);
            issued += 1;
        }
        let before = ends.pair.bytes();
        ends.poll_client();
        while let Some(ev) = ends.client.recv(ends.csock) {
            let Event::Response { rpc, len } = ev else {
                return Err(anyhow::anyhow!("homa client: unexpected {ev:?}"));
            };
            let seq = cl
                .inflight
                .remove(&rpc.id())
                .with_context(|| format!("homa: response for unknown {rpc}"))?;
            let msg = ends
                .client
                .message(rpc)
                .context("homa: no response message")?;
            let n = msg.copy_to(&mut cl.response);
            let ok = if cl.len <= 1500 {
                len == cl.len && n == cl.len && check_payload(seq, &cl.response[..n])
            } else {
                len == 8 && n == 8 && cl.response[..8] == seq.to_le_bytes()
            };
            if !ok {
                return Err(anyhow::anyhow!("homa: wrong response to RPC {seq}"));
            }
            ends.client
                .release(rpc)
                .map_err(|e| anyhow::anyhow!("homa: release: {e}"))?;
            done += 1;
        }
        ends.poll_server();
        while let Some(ev) = ends.server.recv(ends.ssock) {
            let Event::Request { rpc, len, .. } = ev else {
                return Err(anyhow::anyhow!("homa server: unexpected {ev:?}"));
            };
            let msg = ends
                .server
                .message(rpc)
                .context("homa: no request message")?;
            let reply_len = if len <= 1500 {
                msg.copy_to(&mut scratch[..len])
            } else {
                // Checked in place: the sequence number, then the pattern.
                msg.copy_to(&mut scratch[..8]);
                let seq = u64::from_le_bytes(scratch[..8].try_into().expect("8 bytes"));
                cl.request[..8].copy_from_slice(&seq.to_le_bytes());
                let mut at = 0;
                let mut same = msg.len() == cl.request.len();
                for chunk in msg.chunks() {
                    same &= chunk == &cl.request[at..at + chunk.len()];
                    at += chunk.len();
                }
                if !same {
                    return Err(anyhow::anyhow!("homa: request {seq} arrived wrong"));
                }
                8
            };
            ends.server
                .reply(rpc, &scratch[..reply_len])
                .map_err(|e| anyhow::anyhow!("homa: reply: {e}"))?;
        }
        let moved = ends.pair.bytes() - before;
        ends.tick(moved, cl.inflight.len() < cl.outstanding && issued < count);
        if ends.clock.ns > end {
            return Err(anyhow::anyhow!(
                "homa: stalled after {done} of {count} RPCs"
            ));
        }
    }
    Ok(())
}

/// Who does the checksums.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checksums {
    /// Both stacks, in software: every checksum filled and verified.
    Software,
    /// The devices (homa-stack only): the rings claim every checksum, so
    /// the stack fills and verifies none.
    Device,
}

/// 100-byte (or `len`-byte) RPCs, `outstanding` at a time, over RPC tables
/// of `table` slots: `count` timed after `warmup` untimed. Reports RPCs.
pub fn rpcs(
    len: usize,
    outstanding: usize,
    table: usize,
    warmup: u64,
    count: u64,
) -> anyhow::Result<Measure> {
    rpcs_with(Checksums::Software, len, outstanding, table, warmup, count)
}

/// [`rpcs`] with the checksums done by `checksums`.
pub fn rpcs_with(
    checksums: Checksums,
    len: usize,
    outstanding: usize,
    table: usize,
    warmup: u64,
    count: u64,
) -> anyhow::Result<Measure> {
    let pool = if len <= 1500 {
        // A request and a response page per RPC in flight, and room to spare.
        (2 * outstanding + 64) * (PAGE + 8)
    } else {
        4 * len + 64 * (PAGE + 8)
    };
    let mut cm = Storage::new(table, pool);
    let mut sm = Storage::new(table, pool);
    let mut ends = Ends::new(&mut cm, &mut sm, 4096, checksums);
    let mut request = vec![0u8; len];
    fill_payload(0, &mut request);
    let mut cl = Client {
        outstanding,
        len,
        request,
        response: vec![0u8; len.min(1500)],
        inflight: HashMap::with_capacity(2 * outstanding),
        next_seq: 0,
    };
    run(&mut ends, &mut cl, warmup)?;
    let frames = ends.pair.frames();
    let data = ends.client.stats().tx.data;
    let (r, secs) = measured(|| run(&mut ends, &mut cl, count));
    r?;
    let frames = ends.pair.frames() - frames;
    let data_packets = ends.client.stats().tx.data - data;
    ends.drain()?;
    ends.check_clean(&format!(
        "{len}-byte RPCs, {outstanding} outstanding, {table} slots"
    ))?;
    Ok(Measure {
        ops: count,
        bytes: count * len as u64,
        secs,
        frames,
        data_packets,
    })
}
