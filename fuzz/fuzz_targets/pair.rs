//! Two endpoints over in-memory devices whose frames the input mutates
//! (drops, byte changes, duplicates, truncations): every RPC that completes
//! must deliver exactly the bytes that were sent, and nothing may panic.
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

use std::sync::Mutex;

use libfuzzer_sys::fuzz_target;

use homa_phy::{
    ChecksumCapabilities, Device, Duration, Instant, Loopback, RxToken, Split, TxToken,
};
use homa_stack::endpoint::{PeerSlot, RpcSlot, SocketSlot};
use homa_stack::wire::{EthernetAddress, Ipv4Addr};
use homa_stack::{Config, Endpoint, Event, RpcHandle};

type Ring = Loopback<128>;
type Side = Split<Ring, Ring>;

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

fn side() -> Box<Side> {
    let mut s = Box::new(Split::new(Ring::new(), Ring::new()));
    s.tx_mut()
        .set_checksum_capabilities(ChecksumCapabilities::default());
    s
}

fn config(ip: Ipv4Addr, last: u8) -> Config {
    let mut c = Config::new(ip, EthernetAddress([2, 0, 0, 0, 0, last]));
    c.homa_checksum_rx = true;
    c.homa_checksum_tx = true;
    c
}

fn payload(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(seed | 1).wrapping_add(seed))
        .collect()
}

/// Moves frames from `from` to `to`, letting the input decide each frame's
/// fate. Returns the number of frames that left `from`.
fn carry(from: &mut Ring, to: &mut Ring, input: &mut Faults<'_>, now: Instant) -> usize {
    let mut n = 0;
    while let Some((rx, _)) = from.receive(now) {
        n += 1;
        let mut frame = rx.consume(|f| f.to_vec());
        let fate = input.take();
        let copies = match fate {
            0..=199 => 1,
            200..=219 => 0,
            220..=239 => {
                let at = usize::from(input.take()) << 8 | usize::from(input.take());
                let x = input.take() | 1;
                // Ethernet (14) and IPv4 (20) headers are left alone.
                if frame.len() > 34 {
                    let i = 34 + at % (frame.len() - 34);
                    frame[i] ^= x;
                }
                1
            }
            240..=249 => 2,
            _ => {
                let keep = usize::from(input.take()) << 8 | usize::from(input.take());
                frame.truncate(keep % (frame.len() + 1));
                1
            }
        };
        if std::env::var_os("PAIR_DEBUG").is_some() {
            eprintln!(
                "fate {fate} copies {copies}: {}",
                homa_stack::wire::PrettyFrame(&frame)
            );
        }
        for _ in 0..copies {
            let Some(tx) = to.transmit(now) else { break };
            tx.consume(frame.len(), |b| b.copy_from_slice(&frame));
        }
    }
    n
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

/// The fault schedule: the rest of the input, read once in order, then
/// sampled at random (seeded by the input) for as long as the run lasts, so
/// faults never stop and keep the input's mix of fates. Reading it in a
/// loop instead would phase-lock with the protocol's retransmissions (the
/// same packet destroyed every time it is resent, for ever); a lossy link
/// loses packets at random. An empty schedule lets every frame pass.
struct Faults<'a> {
    bytes: &'a [u8],
    at: usize,
    rng: u64,
}

impl<'a> Faults<'a> {
    fn new(bytes: &'a [u8]) -> Faults<'a> {
        // FNV-1a of the schedule seeds the sampling.
        let rng = bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        Faults { bytes, at: 0, rng }
    }

    fn take(&mut self) -> u8 {
        if self.bytes.is_empty() {
            return 0;
        }
        if let Some(&b) = self.bytes.get(self.at) {
            self.at += 1;
            return b;
        }
        // splitmix64
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        self.bytes[(z % self.bytes.len() as u64) as usize]
    }
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
    let mut a = Endpoint::new(
        config(A, 1),
        &mut ra[..],
        &mut pa[..],
        &mut sa[..],
        &mut ma[..],
        2048,
    )
    .unwrap();
    let mut b = Endpoint::new(
        config(B, 2),
        &mut rb[..],
        &mut pb[..],
        &mut sb[..],
        &mut mb[..],
        2048,
    )
    .unwrap();
    let (mut da, mut db) = (side(), side());
    let server = b.bind(500).unwrap();
    let client = a.socket().unwrap();

    // Up to four requests whose sizes come from the input.
    let mut sent: Vec<(RpcHandle, Vec<u8>)> = Vec::new();
    for i in 0..(take(&mut input) % 5) {
        let len = (usize::from(take(&mut input)) << 8 | usize::from(take(&mut input))) * 3 + 1;
        let data = payload(i, len.min(200_000));
        if let Ok(h) = a.send_request(client, B, 500, &data) {
            sent.push((h, data));
        }
    }
    let mut faults = Faults::new(input);
    let mut now = Instant::from_millis(1);
    let mut done = 0;
    // When every RPC had ended: from then on the clock runs out.
    let mut ended: Option<Instant> = None;
    let config = b.config();
    let linger =
        Duration::from_nanos(config.tick.total_nanos() * (u64::from(config.timeout_ticks) + 20));
    // The step limit is for the RPCs; the clock running out after them is
    // bounded by `linger` alone.
    for step in 0.. {
        if ended.is_none() && step >= 200_000 {
            break;
        }
        a.poll(now, &mut *da);
        let m1 = carry(da.tx_mut(), db.rx_mut(), &mut faults, now);
        b.poll(now, &mut *db);
        let m2 = carry(db.tx_mut(), da.rx_mut(), &mut faults, now);
        while let Some(Event::Request { rpc, len, .. }) = b.recv(server) {
            let mut buf = vec![0u8; len];
            b.message(rpc).unwrap().copy_to(&mut buf);
            if b.reply(rpc, &buf).is_err() {
                // A server that cannot answer lets the RPC go.
                let _ = b.abort(rpc);
            }
        }
        while let Some(ev) = a.recv(client) {
            match ev {
                Event::Response { rpc, len } => {
                    let (_, want) = sent
                        .iter()
                        .find(|(h, _)| *h == rpc)
                        .expect("a response to a request we sent");
                    assert_eq!(len, want.len());
                    let mut got = vec![0u8; len];
                    a.message(rpc).unwrap().copy_to(&mut got);
                    let first = got.iter().zip(want).position(|(x, y)| x != y);
                    assert!(
                        first.is_none(),
                        "response bytes differ from the request at {first:?}"
                    );
                    a.release(rpc).unwrap();
                    done += 1;
                }
                Event::Failed { rpc, .. } => {
                    a.release(rpc).unwrap();
                    done += 1;
                }
                Event::Request { .. } => unreachable!(),
            }
        }
        if done == sent.len() {
            let since = *ended.get_or_insert(now);
            let idle = a.rpcs_in_use() + b.rpcs_in_use() == 0 && m1 + m2 == 0;
            if idle || now >= since + linger {
                break;
            }
        }
        // Jump to the next timer when nothing moved (at least a tick once
        // every RPC has ended, so the clock runs out quickly).
        now = if m1 + m2 > 0 {
            now + Duration::from_micros(2)
        } else {
            match [a.poll_at(), b.poll_at()].into_iter().flatten().min() {
                Some(t) if t > now => t,
                _ if ended.is_some() => now + Duration::from_millis(1),
                _ => now + Duration::from_micros(2),
            }
        };
    }
    assert_eq!(
        done,
        sent.len(),
        "every RPC completes or fails; at {now:?} client {:?} server {:?}",
        a.rpc_info().collect::<Vec<_>>(),
        b.rpc_info().collect::<Vec<_>>()
    );
    let ended = ended.expect("every RPC ended");
    for (name, ep) in [("client", &a), ("server", &b)] {
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
        let h = a
            .send_request(client, Ipv4Addr::new(10, 9, 0, i), 500, &[1])
            .expect("a new peer fits once every RPC ended");
        a.abort(h).unwrap();
    }
});
