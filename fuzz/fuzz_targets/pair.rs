//! Two endpoints over in-memory devices whose frames the input mutates
//! (drops, byte changes, duplicates, truncations): every RPC that completes
//! must deliver exactly the bytes that were sent, and nothing may panic.
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
fn carry(from: &mut Ring, to: &mut Ring, input: &mut &[u8], now: Instant) -> usize {
    let mut n = 0;
    while let Some((rx, _)) = from.receive(now) {
        n += 1;
        let mut frame = rx.consume(|f| f.to_vec());
        let fate = take(input);
        let copies = match fate {
            0..=199 => 1,
            200..=219 => 0,
            220..=239 => {
                let at = usize::from(take(input)) << 8 | usize::from(take(input));
                let x = take(input) | 1;
                // Ethernet (14) and IPv4 (20) headers are left alone.
                if frame.len() > 34 {
                    let i = 34 + at % (frame.len() - 34);
                    frame[i] ^= x;
                }
                1
            }
            240..=249 => 2,
            _ => {
                let keep = usize::from(take(input)) << 8 | usize::from(take(input));
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

/// The next input byte; once the input runs out every frame passes.
fn take(input: &mut &[u8]) -> u8 {
    match input.split_first() {
        Some((&b, rest)) => {
            *input = rest;
            b
        }
        None => 0,
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = data;
    let (mut ra, mut rb): (Vec<RpcSlot>, Vec<RpcSlot>) = (
        (0..8).map(|_| RpcSlot::EMPTY).collect(),
        (0..8).map(|_| RpcSlot::EMPTY).collect(),
    );
    let (mut pa, mut pb) = (vec![PeerSlot::EMPTY; 2], vec![PeerSlot::EMPTY; 2]);
    let (mut sa, mut sb) = (vec![SocketSlot::EMPTY; 2], vec![SocketSlot::EMPTY; 2]);
    let (mut ma, mut mb) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
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
    let mut now = Instant::from_millis(1);
    let mut done = 0;
    for _ in 0..200_000 {
        a.poll(now, &mut *da);
        let m1 = carry(da.tx_mut(), db.rx_mut(), &mut input, now);
        b.poll(now, &mut *db);
        let m2 = carry(db.tx_mut(), da.rx_mut(), &mut input, now);
        while let Some(Event::Request { rpc, len, .. }) = b.recv(server) {
            let mut buf = vec![0u8; len];
            b.message(rpc).unwrap().copy_to(&mut buf);
            let _ = b.reply(rpc, &buf);
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
            break;
        }
        // Jump to the next timer when nothing moved.
        now = if m1 + m2 > 0 {
            now + Duration::from_micros(2)
        } else {
            match [a.poll_at(), b.poll_at()].into_iter().flatten().min() {
                Some(t) if t > now => t,
                _ => now + Duration::from_micros(2),
            }
        };
    }
    assert_eq!(done, sent.len(), "every RPC completes or fails");
});
