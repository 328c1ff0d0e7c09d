//! What RPC_UNKNOWN and RESEND make a sender do: a request the server
//! forgot starts again, as often as the server keeps forgetting it within
//! the RPC's timeout, and never fails for that alone; what either packet
//! makes a message send again is rationed per RESEND interval and over the
//! message's life, however many of them a forger sends.

use super::hostile::homa_frame;
use super::*;
use crate::endpoint::rpc::RESEND_WINDOWS;
use crate::wire::homa::{Kind, Repr};

/// A control packet `kind` from B's server port 500 (B's address and MAC:
/// B's, or forged) naming A's client RPC `id` at A's client port `port`.
fn to_client(id: u64, port: u16, kind: Kind<'static>) -> Vec<u8> {
    let repr = Repr {
        sport: 500,
        dport: port,
        sender_id: id ^ 1,
        kind,
    };
    homa_frame(B_MAC, A_MAC, B_IP, A_IP, &repr)
}

/// Polls `ep` every 100 us for `d`, answering nothing; returns the bytes
/// it sent.
fn run_alone(
    ep: &mut Endpoint<'static>,
    dev: &mut TestDevice,
    now: &mut Instant,
    d: Duration,
) -> usize {
    let end = *now + d;
    let mut sent = 0;
    while *now < end {
        ep.poll(*now, dev);
        sent += dev.tx.drain(..).map(|f| f.0.len()).sum::<usize>();
        *now += Duration::from_micros(100);
    }
    sent
}

/// `n` requests of `len` bytes from A at once to B, whose table holds
/// `slots` RPCs and whose application answers each request `hold` after
/// it took it: how each ended (the response, or the error) and when,
/// after the requests were sent.
fn requests_to_a_full_table(
    n: usize,
    len: usize,
    slots: usize,
    hold: Duration,
) -> Vec<(Result<usize, RpcError>, Duration)> {
    let mut p = Pair::new(
        endpoint(A_IP, A_MAC, n + 4, 16 << 20),
        endpoint(B_IP, B_MAC, slots, 16 << 20),
    );
    p.a.add_neighbor(p.now, B_IP, B_MAC).unwrap();
    p.b.add_neighbor(p.now, A_IP, A_MAC).unwrap();
    let server = p.b.bind(500).unwrap();
    let client = p.a.socket().unwrap();
    let t0 = p.now;
    let rpcs: Vec<RpcHandle> = (0..n)
        .map(|i| {
            p.a.send_request(client, B_IP, 500, &pattern(len, i as u64))
                .unwrap()
        })
        .collect();
    let mut held: Vec<(RpcHandle, Instant)> = Vec::new();
    let mut ended = std::collections::HashMap::new();
    p.run_until(Duration::from_secs(2), |p| {
        while let Some(Event::Request { rpc, .. }) = p.b.recv(server) {
            held.push((rpc, p.now));
        }
        let now = p.now;
        held.retain(|&(rpc, at)| {
            if now < at + hold {
                return true;
            }
            p.b.reply(rpc, b"done").unwrap();
            false
        });
        while let Some(ev) = p.a.recv(client) {
            let (rpc, how) = match ev {
                Event::Response { rpc, len } => (rpc, Ok(len)),
                Event::Failed { rpc, error } => (rpc, Err(error)),
                Event::Request { .. } => unreachable!("a client socket"),
            };
            ended.insert(rpc, (how, now - t0));
            p.a.release(rpc).unwrap();
        }
        ended.len() == n
    });
    rpcs.iter()
        .map(|h| *ended.get(h).expect("every RPC ends"))
        .collect()
}

#[test]
#[cfg_attr(miri, ignore = "a quarter second of a busy pair: too slow under Miri")]
fn a_request_that_finds_the_table_full_completes_once_a_slot_frees() {
    // No attacker: B has 16 RPC slots, and its application answers each
    // request 60 ms after taking it. Of 17 requests sent at once, the 17th
    // finds the table full: B drops it and answers each of A's RESENDs
    // (every 5 ms) with RPC_UNKNOWN, a dozen times before a slot frees. A
    // restarts it each time; RPC_UNKNOWN is no sign of life, so only the
    // silence timeout could end it, and a slot frees well within that:
    // every request completes, the 17th about 60 ms after the others.
    for len in [100, 40_000] {
        let ended = requests_to_a_full_table(17, len, 16, Duration::from_millis(60));
        let late: Vec<_> = ended
            .iter()
            .filter(|e| e.1 > Duration::from_millis(100))
            .collect();
        for (how, at) in &ended {
            assert_eq!(
                *how,
                Ok(4),
                "{len}-byte request ended after {at}: {ended:?}"
            );
        }
        assert_eq!(
            late.len(),
            1,
            "{len} bytes: one request waited for a slot: {ended:?}"
        );
        std::println!(
            "{len} bytes: the request that found the table full ended after {}",
            late[0].1
        );
        assert!(late[0].1 < Duration::from_millis(200), "{ended:?}");
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "a third of a second of a busy pair: too slow under Miri"
)]
fn forged_rpc_unknowns_do_not_end_an_rpc_the_server_serves() {
    // B takes A's request and computes for 300 ms (answering A's RESENDs
    // with BUSY); meanwhile RPC_UNKNOWN forged from B's address names the
    // request every 6 ms, 50 of them. None ends it: it completes when B
    // answers.
    for len in [100, 1_000_000] {
        let mut p = Pair::linked(8, 4 << 20);
        let server = p.b.bind(500).unwrap();
        let client = p.a.socket().unwrap();
        let port = p.a.client_port(client).unwrap();
        let h =
            p.a.send_request(client, B_IP, 500, &pattern(len, 3))
                .unwrap();
        let forged = to_client(h.id(), port, Kind::RpcUnknown);
        let t0 = p.now;
        let (mut held, mut sent, mut ended) = (None, 0, None);
        p.run_until(Duration::from_secs(1), |p| {
            if let Some(Event::Request { rpc, .. }) = p.b.recv(server) {
                held = Some((rpc, p.now));
            }
            if let Some((rpc, at)) = held {
                if p.now >= at + Duration::from_millis(300) {
                    p.b.reply(rpc, b"done").unwrap();
                    held = None;
                }
            }
            if sent < 50 && p.now >= t0 + Duration::from_millis(1 + 6 * sent) {
                p.da.rx.push_back(forged.clone());
                sent += 1;
            }
            ended = p.a.recv(client);
            ended.is_some()
        });
        assert_eq!(
            sent, 50,
            "{len} bytes: the RPC ended after {} forgeries",
            sent
        );
        assert_eq!(
            ended,
            Some(Event::Response { rpc: h, len: 4 }),
            "{len} bytes"
        );
        // B's BUSYs keep the RPC from falling silent, so most forgeries
        // answer no RESEND of A's and are dropped; those that come just as
        // A asks start it over once, then knock.
        let s = p.a.stats();
        assert!(s.restarts_spent < 10, "{len} bytes: {s:?}");
        assert!(s.drops.wrong_state >= 40, "{len} bytes: {s:?}");
    }
}

/// Payload bytes of a full DATA packet, and the frame's other bytes
/// (Ethernet, IPv4, the DATA header).
const SEG: usize = 1424;
const DATA_FRAME: usize = 14 + 20 + 56;

/// The most a message may send again before its ration refills by single
/// packets: `RESEND_WINDOWS` windows of 40,000 bytes (29 frames each), and
/// as many again earned back by the receiver's GRANTs.
const RESERVE: usize = 2 * RESEND_WINDOWS as usize * (40_000 + 29 * DATA_FRAME);

#[test]
#[cfg_attr(miri, ignore = "32 requests of 1 MB: too slow under Miri")]
fn forged_rpc_unknowns_buy_two_starts_and_then_a_packet_each() {
    // A has 32 requests of 1 MB out to B, which is gone (or whose table is
    // full): each sent its 40,000 unscheduled bytes and waits. RPC_UNKNOWN
    // forged from B's address names them in turn, one every 20 us, for
    // 200 ms (each RPC named every 640 us). A forgery counts only when it
    // could answer a RESEND of A's (the RPC silent 5 ms), once per RESEND
    // interval: each request starts over `MAX_RESTARTS` times (its
    // unscheduled bytes again), then its first packet goes again each
    // time, and the silence timeout ends it.
    let mut ep = endpoint(A_IP, A_MAC, 36, 40 << 20);
    let mut dev = TestDevice::default();
    let mut now = Instant::from_millis(1);
    ep.add_neighbor(now, B_IP, B_MAC).unwrap();
    let client = ep.socket().unwrap();
    let port = ep.client_port(client).unwrap();
    let request = vec![7u8; 1_000_000];
    let rpcs: Vec<RpcHandle> = (0..32)
        .map(|_| ep.send_request(client, B_IP, 500, &request).unwrap())
        .collect();
    while ep.rpc_info().any(|r| r.out_sent < 40_000) {
        run_alone(&mut ep, &mut dev, &mut now, Duration::from_micros(100));
    }
    let forged: Vec<Vec<u8>> = rpcs
        .iter()
        .map(|h| to_client(h.id(), port, Kind::RpcUnknown))
        .collect();
    let (mut sent, mut n, mut forged_bytes) = (0, 0, 0);
    let data = ep.stats().tx.data;
    let end = now + Duration::from_millis(200);
    while now < end {
        let f = &forged[n % forged.len()];
        dev.rx.push_back(f.clone());
        forged_bytes += f.len();
        n += 1;
        ep.poll(now, &mut dev);
        sent += dev.tx.drain(..).map(|f| f.0.len()).sum::<usize>();
        now += Duration::from_micros(20);
    }
    let s = ep.stats();
    std::println!(
        "{n} forged RPC_UNKNOWN ({forged_bytes} bytes) for 32 requests of 1 MB: {sent} bytes \
         sent ({:.1} per forged byte), {} DATA packets, {} knocks",
        sent as f64 / forged_bytes as f64,
        s.tx.data - data,
        s.restarts_spent
    );
    // Per request: the starts (40,000 bytes in 29 frames each), then at
    // most one packet per RESEND interval from A's first RESEND (5 ms) to
    // its timeout (100 ms), and those RESENDs (75-byte frames); each start
    // restarts the silence.
    let starts = usize::from(MAX_RESTARTS) * (40_000 + 29 * DATA_FRAME);
    let knocks = 19 * (SEG + DATA_FRAME);
    let resends = 21 * 75;
    assert!(
        sent <= 32 * (starts + knocks + resends),
        "{n} forged RPC_UNKNOWN bought {sent} bytes"
    );
    // Each start sends its 29 packets, each knock one.
    assert_eq!(
        s.tx.data - data,
        32 * 29 * u64::from(MAX_RESTARTS) + s.restarts_spent
    );
    assert!(s.restarts_spent <= 32 * 19, "{s:?}");
    // Every request timed out: none was failed for the forgeries.
    let mut timed_out = 0;
    while let Some(e) = ep.recv(client) {
        assert!(
            matches!(
                e,
                Event::Failed {
                    error: RpcError::TimedOut,
                    ..
                }
            ),
            "{e:?}"
        );
        timed_out += 1;
    }
    assert_eq!(timed_out, 32);
}

/// A's request of `len` bytes to B, whose application aborts it the first
/// `forget` times it arrives whole and then answers it: how long it took,
/// or `None` when it did not complete within 2 s.
fn forgotten(len: usize, forget: usize) -> Option<Duration> {
    let mut p = Pair::linked(8, 4 << 20);
    let server = p.b.bind(500).unwrap();
    let client = p.a.socket().unwrap();
    let req = pattern(len, 9);
    let h = p.a.send_request(client, B_IP, 500, &req).unwrap();
    let (mut seen, t0) = (0, p.now);
    let mut done = None;
    p.run_until(Duration::from_secs(2), |p| {
        while let Some(Event::Request { rpc, .. }) = p.b.recv(server) {
            seen += 1;
            if seen <= forget {
                p.b.abort(rpc).unwrap();
                continue;
            }
            assert!(p.b.message(rpc).unwrap().eq_bytes(&req));
            p.b.reply(rpc, b"ok").unwrap();
        }
        if let Some(e) = p.a.recv(client) {
            done = Some(e);
        }
        done.is_some()
    });
    match done {
        Some(Event::Response { rpc, .. }) if rpc == h => Some(p.now - t0),
        _ => None,
    }
}

#[test]
#[cfg_attr(miri, ignore = "moves megabytes: too slow under Miri")]
fn requests_the_server_forgets_are_sent_again_and_complete() {
    // B's application aborts A's request each time it arrives whole, then
    // answers it. A 1 MB request forgotten `MAX_RESTARTS` times starts
    // over each time and goes again at once; one forgotten more often
    // knocks, and B asks for the rest with RESENDs, which A's resend
    // ration pays for (quickly for requests the ration covers); a short
    // request knocks as long as B forgets it.
    for (len, forget, within) in [
        (1_000_000, usize::from(MAX_RESTARTS), 20),
        (300_000, 3, 100),
        (600_000, 3, 150),
        (100, 10, 100),
    ] {
        let took = forgotten(len, forget);
        std::println!("{len} bytes forgotten {forget} times: took {took:?}");
        let took = took.unwrap_or_else(|| panic!("{len} bytes forgotten {forget} times failed"));
        assert!(took < Duration::from_millis(within), "{len} bytes: {took}");
    }
}

/// What A did under [`resends_every_5_ms_for_10_s`].
struct Outcome {
    /// Bytes A sent from the first forgery on.
    sent: usize,
    /// DATA packets A sent again in the last 8.9 s (after the RESEND life
    /// of 1 s, from when the request went out whole).
    late: u64,
    /// When the request failed, and why, if it did.
    failed: Option<(Duration, RpcError)>,
    /// Bytes A sent after it failed.
    after: usize,
    /// Pool bytes held at the end.
    held: usize,
}

/// A's 1 MB request to B, sent whole (B granted it), then a RESEND(0,
/// 40,000) forged from B's address every 5 ms for 10 s, with B's BUSY
/// every 5 ms too when `busy` (B alive and computing).
fn resends_every_5_ms_for_10_s(busy: bool) -> Outcome {
    let (mut ep, mut dev, mut now, client, _) =
        super::hostile::a_request_sent_whole(Config::new(A_IP, A_MAC, SEED));
    let port = ep.client_port(client).unwrap();
    let id = ep.rpc_info().next().unwrap().id;
    let resend = to_client(
        id,
        port,
        Kind::Resend {
            offset: 0,
            length: 40_000,
            priority: 0,
        },
    );
    let busy_frame = to_client(id, port, Kind::Busy);
    let t0 = now;
    let (mut sent, mut failed, mut early, mut after) = (0, None, None, 0);
    while now < t0 + Duration::from_secs(10) {
        if now >= t0 + Duration::from_millis(1_100) {
            early.get_or_insert(ep.stats().retransmissions);
        }
        dev.rx.push_back(resend.clone());
        if busy {
            dev.rx.push_back(busy_frame.clone());
        }
        let bytes = run_alone(&mut ep, &mut dev, &mut now, Duration::from_millis(5));
        sent += bytes;
        if failed.is_some() {
            after += bytes;
        }
        if let Some(Event::Failed { error, .. }) = ep.recv(client) {
            failed.get_or_insert((now - t0, error));
        }
    }
    let late = ep.stats().retransmissions - early.unwrap_or(0);
    let held = ep.pool_capacity_bytes() - ep.pool_free_bytes();
    Outcome {
        sent,
        late,
        failed,
        after,
        held,
    }
}

#[test]
#[cfg_attr(miri, ignore = "ten seconds of 100 us polls: too slow under Miri")]
fn forged_resends_do_not_keep_a_request_to_a_dead_server() {
    // B is gone; a RESEND forged from its address every 5 ms names A's
    // 1 MB request. RESENDs are no sign of the server's life (it shows it
    // with BUSY when asked): the request times out as if they never came,
    // and its pages go back to the pool; what it sent again meanwhile is
    // its ration's reserve.
    let Outcome {
        sent,
        failed,
        after,
        held,
        ..
    } = resends_every_5_ms_for_10_s(false);
    std::println!("a forged RESEND every 5 ms, server gone: {sent} bytes sent, {failed:?}");
    let (at, error) = failed.expect("the forged RESENDs kept the request for 10 s");
    assert_eq!(error, RpcError::TimedOut);
    assert!(at <= Duration::from_millis(110), "failed after {at}");
    assert_eq!(held, 0, "the request's pages are held");
    // RESENDs naming the failed RPC get nothing (only a server says BUSY).
    assert_eq!(after, 0, "bytes sent after the request failed");
    assert!(
        sent <= RESERVE + 20 * (SEG + DATA_FRAME + 75),
        "{sent} bytes"
    );
}

#[test]
#[cfg_attr(miri, ignore = "ten seconds of 100 us polls: too slow under Miri")]
fn forged_resends_buy_resends_for_the_resend_life_only() {
    // B is alive and computing (its BUSY every 5 ms keeps A's request
    // waiting, as Linux's would); a RESEND forged from its address every
    // 5 ms for 10 s asks for the request's first 40,000 bytes again. What
    // the request sends again is its ration's reserve, then a packet per
    // RESEND interval, for `RESEND_LIFE_TIMEOUTS` timeouts (1 s) without
    // new bytes to send: then nothing more, as a server frees an RPC that
    // RESENDs alone kept that long. The request still waits for B.
    let Outcome {
        sent, late, failed, ..
    } = resends_every_5_ms_for_10_s(true);
    std::println!("a forged RESEND every 5 ms, server alive: {sent} bytes sent in 10 s");
    assert_eq!(failed, None);
    assert_eq!(late, 0, "DATA sent again after the RESEND life");
    let life = 200 * (SEG + DATA_FRAME);
    // A's own RESENDs for the response, one per interval (B's BUSY
    // answers each).
    let asks = 2_000 * 75;
    assert!(sent <= RESERVE + life + asks, "{sent} bytes");
}
