//! Two endpoints over in-memory devices whose frames the input mutates
//! (drops, byte changes, duplicates, truncations): every RPC that completes
//! must deliver exactly the bytes that were sent, one that fails must have
//! timed out (the server is there: nothing else may end it), and nothing
//! may panic.
//! The input after the request sizes is a fault schedule, read in order and
//! then sampled at random, so faults go on for the whole run. When every RPC
//! has ended, the clock runs past the timeouts (faults still on) and both
//! ends must hold nothing: no RPC, no pool page, no peer but the other end,
//! and no peer entry pinned.
//! Homa checksums are on, so a changed byte is caught (a single changed byte
//! always changes a ones'-complement sum). Byte changes hit only the Homa
//! header and payload: the IPv4 header checksum is skipped under
//! `cfg(fuzzing)`, and a changed IP length could otherwise shorten a packet
//! in a way its Homa checksum happens to accept.
//!
//! ```text
//! cargo +nightly fuzz run pair -- -max_total_time=60
//! ```

#![no_main]

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Mutex;

use libfuzzer_sys::fuzz_target;

use homa_phy::testing::{pattern, Pair, SplitMix64};
use homa_phy::{Duration, Instant};
use homa_stack::endpoint::{PeerSlot, RpcSlot, SocketSlot};
use homa_stack::wire::{EthernetAddress, Ipv4Addr};
use homa_stack::{Config, Endpoint, Event, RpcError, RpcHandle};

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

fn config(ip: Ipv4Addr, last: u8) -> Config {
    let mut c = Config::new(ip, EthernetAddress([2, 0, 0, 0, 0, last]), u64::from(last));
    c.homa_checksum_rx = true;
    c.homa_checksum_tx = true;
    c
}

/// The next byte of the input's prefix (the request sizes); 0 once it runs
/// out.
fn take(input: &mut &[u8]) -> u8 {
    match input.split_first() {
        Some((&b, rest)) => {
            *input = rest;
            b
        }
        None => 0,
    }
}

/// What the input decided for the frame on the wire.
#[derive(Debug, Clone, Copy)]
enum Fate {
    Pass,
    Lose,
    /// XOR `x` into the byte `at` (modulo the length) past the Ethernet (14)
    /// and IPv4 (20) headers, which are left alone.
    Flip {
        at: usize,
        x: u8,
    },
    Twice,
    /// Keep this many bytes (modulo the length + 1).
    Cut(usize),
}

/// The fault schedule: the rest of the input, read once in order, then
/// sampled at random (seeded by the input) for as long as the run lasts, so
/// faults never stop and keep the input's mix of fates. Reading it in a
/// loop instead would phase-lock with the protocol's retransmissions (the
/// same packet destroyed every time it is resent, for ever); a lossy link
/// loses packets at random. An empty schedule lets every frame pass.
struct Faults {
    bytes: Vec<u8>,
    at: usize,
    rng: SplitMix64,
    /// The fate of the frame being carried.
    fate: Fate,
}

impl Faults {
    fn new(bytes: &[u8]) -> Faults {
        // FNV-1a of the schedule seeds the sampling.
        let seed = bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        Faults {
            bytes: bytes.to_vec(),
            at: 0,
            rng: SplitMix64::new(seed),
            fate: Fate::Pass,
        }
    }

    fn take(&mut self) -> u8 {
        if self.bytes.is_empty() {
            return 0;
        }
        if let Some(&b) = self.bytes.get(self.at) {
            self.at += 1;
            return b;
        }
        self.bytes[(self.rng.next_u64() % self.bytes.len() as u64) as usize]
    }

    /// Draws the next frame's fate.
    fn draw(&mut self) -> Fate {
        match self.take() {
            0..=199 => Fate::Pass,
            200..=219 => Fate::Lose,
            220..=239 => {
                let at = usize::from(self.take()) << 8 | usize::from(self.take());
                Fate::Flip {
                    at,
                    x: self.take() | 1,
                }
            }
            240..=249 => Fate::Twice,
            _ => Fate::Cut(usize::from(self.take()) << 8 | usize::from(self.take())),
        }
    }
}

/// Lets the input decide each frame's fate on `p`'s wire.
fn wire_faults(p: &mut Pair<Endpoint<'_>, Endpoint<'_>>, faults: Faults) {
    let faults = Rc::new(RefCell::new(faults));
    let f = faults.clone();
    p.filter = Box::new(move |_, _, _| {
        let mut f = f.borrow_mut();
        f.fate = f.draw();
        !matches!(f.fate, Fate::Lose)
    });
    let f = faults.clone();
    p.rewrite = Box::new(move |_, frame| {
        let fate = f.borrow().fate;
        match fate {
            Fate::Flip { at, x } if frame.len() > 34 => {
                let i = 34 + at % (frame.len() - 34);
                frame[i] ^= x;
            }
            Fate::Cut(keep) => frame.truncate(keep % (frame.len() + 1)),
            _ => {}
        }
        if std::env::var_os("PAIR_DEBUG").is_some() {
            eprintln!("{fate:?}: {}", homa_stack::wire::PrettyFrame(&frame[..]));
        }
    });
    p.duplicate = Box::new(move |_, _, _| matches!(faults.borrow().fate, Fate::Twice));
}

/// Both pools' memory, kept from one input to the next and zeroed for each
/// (mapping it afresh costs more page faults than short inputs cost).
static POOLS: Mutex<(Vec<u8>, Vec<u8>)> = Mutex::new((Vec::new(), Vec::new()));

fuzz_target!(|data: &[u8]| {
    let mut input = data;
    let (mut ra, mut rb): (Vec<RpcSlot>, Vec<RpcSlot>) = (
        (0..8).map(|_| RpcSlot::EMPTY).collect(),
        (0..8).map(|_| RpcSlot::EMPTY).collect(),
    );
    let (mut pa, mut pb) = (vec![PeerSlot::EMPTY; 2], vec![PeerSlot::EMPTY; 2]);
    let (mut sa, mut sb) = (vec![SocketSlot::EMPTY; 2], vec![SocketSlot::EMPTY; 2]);
    let mut pools = POOLS.lock().unwrap_or_else(|e| e.into_inner());
    let (ma, mb) = &mut *pools;
    for m in [&mut *ma, &mut *mb] {
        m.clear();
        m.resize(1 << 20, 0);
    }
    let a = Endpoint::new(
        config(A, 1),
        &mut ra[..],
        &mut pa[..],
        &mut sa[..],
        &mut ma[..],
        2048,
    )
    .unwrap();
    let b = Endpoint::new(
        config(B, 2),
        &mut rb[..],
        &mut pb[..],
        &mut sb[..],
        &mut mb[..],
        2048,
    )
    .unwrap();
    let mut p = Pair::new(a, b);
    p.logging = false;
    let server = p.b.bind(500).unwrap();
    let client = p.a.socket().unwrap();

    // Up to four requests whose sizes come from the input.
    let mut sent: Vec<(RpcHandle, Vec<u8>)> = Vec::new();
    for i in 0..(take(&mut input) % 5) {
        let len = (usize::from(take(&mut input)) << 8 | usize::from(take(&mut input))) * 3 + 1;
        let data = pattern(len.min(200_000), u64::from(i));
        if let Ok(h) = p.a.send_request(client, B, 500, &data) {
            sent.push((h, data));
        }
    }
    wire_faults(&mut p, Faults::new(input));
    let mut done = 0;
    // When every RPC had ended: from then on the clock runs out.
    let mut ended: Option<Instant> = None;
    let config = p.b.config();
    let linger =
        Duration::from_nanos(config.tick.total_nanos() * (u64::from(config.timeout_ticks) + 20));
    // The earliest an RPC may fail: its timeout, `timeout_ticks` ticks
    // after its request (the first tick maybe at once).
    let timeout = Duration::from_nanos(
        config.tick.total_nanos() * u64::from(config.timeout_ticks.saturating_sub(1)),
    );
    let sent_at = p.now;
    // The step limit is for the RPCs; the clock running out after them is
    // bounded by `linger` alone.
    for step in 0.. {
        if ended.is_none() && step >= 200_000 {
            break;
        }
        p.step();
        while let Some(Event::Request { rpc, len, .. }) = p.b.recv(server) {
            let mut buf = vec![0u8; len];
            p.b.message(rpc).unwrap().copy_to(&mut buf);
            if p.b.reply(rpc, &buf).is_err() {
                // A server that cannot answer lets the RPC go.
                let _ = p.b.abort(rpc);
            }
        }
        while let Some(ev) = p.a.recv(client) {
            match ev {
                Event::Response { rpc, len } => {
                    let (_, want) = sent
                        .iter()
                        .find(|(h, _)| *h == rpc)
                        .expect("a response to a request we sent");
                    assert_eq!(len, want.len());
                    let mut got = vec![0u8; len];
                    p.a.message(rpc).unwrap().copy_to(&mut got);
                    let first = got.iter().zip(want).position(|(x, y)| x != y);
                    assert!(
                        first.is_none(),
                        "response bytes differ from the request at {first:?}"
                    );
                    p.a.release(rpc).unwrap();
                    done += 1;
                }
                Event::Failed { rpc, error } => {
                    // Only the silence timeout ends an RPC whose server
                    // is there (an unresolved peer is silence too).
                    let at = sent_at;
                    assert!(
                        matches!(error, RpcError::TimedOut | RpcError::Unresolved)
                            && p.now >= at + timeout,
                        "an RPC failed ({error}) {:?} after its request",
                        p.now - at
                    );
                    p.a.release(rpc).unwrap();
                    done += 1;
                }
                Event::Request { .. } => unreachable!(),
            }
        }
        if done == sent.len() {
            let since = *ended.get_or_insert(p.now);
            let idle = p.a.rpcs_in_use() + p.b.rpcs_in_use() == 0 && p.flight.is_empty();
            if idle || p.now >= since + linger {
                break;
            }
        }
        // Jump to the next arrival or timer (at least a tick once every
        // RPC has ended, so the clock runs out quickly).
        p.now = match p.next_time() {
            t if t > p.now && t < Instant::MAX => t,
            _ if ended.is_some() => p.now + Duration::from_millis(1),
            _ => p.now + Duration::from_micros(2),
        };
    }
    let now = p.now;
    assert_eq!(
        done,
        sent.len(),
        "every RPC completes or fails; at {now:?} client {:?} server {:?}",
        p.a.rpc_info().collect::<Vec<_>>(),
        p.b.rpc_info().collect::<Vec<_>>()
    );
    let ended = ended.expect("every RPC ended");
    for (name, ep) in [("client", &p.a), ("server", &p.b)] {
        let left: Vec<_> = ep.rpc_info().collect();
        assert!(
            left.is_empty(),
            "{name}: state held {:?} after every RPC ended: {left:?}",
            now - ended
        );
        assert_eq!(
            ep.pool_free_bytes(),
            ep.pool_capacity_bytes(),
            "{name}: pool leaked"
        );
        // Each end only ever had RPCs with the other.
        assert!(ep.peers_in_use() <= 1, "{name}: a stranger holds a peer");
    }
    // No peer entry is pinned: a table's worth of new peers still fits.
    for i in 0..2u8 {
        let h =
            p.a.send_request(client, Ipv4Addr::new(10, 9, 0, i), 500, &[1])
                .expect("a new peer fits once every RPC ended");
        p.a.abort(h).unwrap();
    }
});
