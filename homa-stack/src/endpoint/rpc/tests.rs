//! Per-state fixtures: an RPC built in each state over a small pool of its
//! own, without an endpoint, and the exact verdicts and transitions of the
//! methods that change it.

use super::*;
use crate::wire::homa::RESEND_ALL;
use crate::wire::Ipv4Addr;

/// Payload bytes per packet (IPv4 at MTU 1500).
const SEG: u32 = 1424;
/// Our `Config::unsched_bytes` (Linux's default).
const UNSCHED: u32 = 40_000;
/// Request and response lengths: two packets each.
const LEN: u32 = 2_000;
/// Highest priority.
const TOP: u8 = 7;
/// Silence rules small enough to walk through.
const RULES: TickRules = TickRules {
    timeout: 10,
    resend: 3,
    interval: 2,
    request_ack: 4,
    stale: 20,
};

/// A pool of 64 pages of 1 KiB over `mem`.
fn pool(mem: &mut [u8]) -> Pool<'_> {
    Pool::new(mem, 1024).unwrap()
}

fn peer_addr() -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2))
}

/// A DATA header of a `LEN`-byte message at `offset`.
fn data(offset: u32) -> DataHeader {
    DataHeader {
        message_length: LEN,
        incoming: LEN,
        ack: None,
        cutoff_version: 0,
        retransmit: false,
        offset,
    }
}

/// The payload of the packet at `offset` of a `LEN`-byte message.
fn payload(offset: u32) -> &'static [u8] {
    const BYTES: [u8; SEG as usize] = [0x5a; SEG as usize];
    &BYTES[..(LEN - offset).min(SEG) as usize]
}

/// Client sending a `len`-byte request, nothing sent yet.
fn client_outgoing(pool: &mut Pool<'_>, len: u32) -> Rpc {
    let buf = pool.alloc(len as usize).unwrap();
    let out = MsgOut::new(buf, len, SEG, UNSCHED.min(len));
    Rpc::client(2, 0, 0, peer_addr(), 500, 0x8000, 1, out)
}

/// Client whose request went out whole.
fn client_sent(pool: &mut Pool<'_>) -> Rpc {
    let mut r = client_outgoing(pool, LEN);
    send_all(&mut r);
    r
}

/// Client with the first packet of its response.
fn client_incoming(pool: &mut Pool<'_>) -> Rpc {
    let mut r = client_sent(pool);
    assert_eq!(
        r.on_data(&data(0), payload(0), pool, UNSCHED, true),
        DataVerdict::Stored
    );
    r
}

/// Client with its whole response.
fn client_done(pool: &mut Pool<'_>) -> Rpc {
    let mut r = client_incoming(pool);
    assert_eq!(
        r.on_data(&data(SEG), payload(SEG), pool, UNSCHED, true),
        DataVerdict::Completed
    );
    r
}

/// Server with the first packet of a request (its pages taken).
fn server_incoming(pool: &mut Pool<'_>) -> Rpc {
    let mut r = Rpc::server(
        3,
        0,
        0,
        peer_addr(),
        0x8000,
        500,
        1,
        Local::CHOSEN,
        MsgIn::new(LEN, LEN, UNSCHED),
    );
    assert_eq!(
        r.on_data(&data(0), payload(0), pool, UNSCHED, true),
        DataVerdict::Stored
    );
    r
}

/// Server with a whole request the application has not taken.
fn server_ready(pool: &mut Pool<'_>) -> Rpc {
    let mut r = server_incoming(pool);
    assert_eq!(
        r.on_data(&data(SEG), payload(SEG), pool, UNSCHED, true),
        DataVerdict::Completed
    );
    r
}

/// Server whose application holds the request.
fn server_in_service(pool: &mut Pool<'_>) -> Rpc {
    let mut r = server_ready(pool);
    assert_eq!(r.take_event(), Some(News::Request(LEN as usize)));
    r
}

/// Server sending a one-packet response, nothing sent yet.
fn server_outgoing(pool: &mut Pool<'_>) -> Rpc {
    let mut r = server_in_service(pool);
    let buf = pool.alloc(100).unwrap();
    assert!(r.reply(MsgOut::new(buf, 100, SEG, 100), pool));
    r
}

/// Hands every packet of the outgoing message to the "NIC".
fn send_all(r: &mut Rpc) {
    let length = r.outgoing().unwrap().length();
    let mut at = 0;
    while at < length {
        let (start, end) = packet_at(at, SEG, r.outgoing().unwrap().unscheduled(), length);
        assert!(r.data_header(start, end, false, SEG).is_some());
        r.data_sent(start, end, false);
        at = end;
    }
}

/// One tick, counted and judged with no frame between.
fn tick(r: &mut Rpc, resolved: bool) -> TickVerdict {
    tick_by(r, &RULES, resolved)
}

/// [`tick`] by other `rules`.
fn tick_by(r: &mut Rpc, rules: &TickRules, resolved: bool) -> TickVerdict {
    r.count_tick(rules, resolved);
    r.on_tick(rules, resolved)
}

/// The verdicts of `n` ticks.
fn ticks(r: &mut Rpc, n: usize, resolved: bool) -> heapless::Vec<TickVerdict, 32> {
    (0..n).map(|_| tick(r, resolved)).collect()
}

#[test]
fn each_fixture_is_in_its_state() {
    let mut mem = [0u8; 64 * 1024];
    let mut p = pool(&mut mem);
    let states = [
        client_outgoing(&mut p, LEN).state(),
        client_incoming(&mut p).state(),
        client_done(&mut p).state(),
        server_incoming(&mut p).state(),
        server_ready(&mut p).state(),
        server_in_service(&mut p).state(),
        server_outgoing(&mut p).state(),
    ];
    assert_eq!(
        states,
        [
            State::ClientOutgoing,
            State::ClientIncoming,
            State::ClientDone,
            State::ServerIncoming,
            State::ServerReady,
            State::ServerInService,
            State::ServerOutgoing,
        ]
    );
}

#[test]
fn client_response_ends_the_request_and_completes() {
    let mut mem = [0u8; 64 * 1024];
    let mut p = pool(&mut mem);
    let free = p.free_bytes();
    let mut r = client_sent(&mut p);
    // The request holds 2 pages until the response's first packet.
    assert_eq!(p.free_bytes(), free - 2048);
    assert_eq!(
        r.on_data(&data(0), payload(0), &mut p, UNSCHED, true),
        DataVerdict::Stored
    );
    assert_eq!(r.state(), State::ClientIncoming);
    assert!(r.outgoing().is_none());
    // The response took the request's 2 pages.
    assert_eq!(p.free_bytes(), free - 2048);
    assert_eq!(r.incoming().unwrap().received(), SEG);
    assert_eq!(r.take_event(), None);
    assert_eq!(
        r.on_data(&data(0), payload(0), &mut p, UNSCHED, true),
        DataVerdict::Dropped(DropReason::Duplicate)
    );
    assert_eq!(
        r.on_data(&data(SEG), payload(SEG), &mut p, UNSCHED, true),
        DataVerdict::Completed
    );
    assert_eq!(r.state(), State::ClientDone);
    assert_eq!(r.take_event(), Some(News::Response(LEN as usize)));
    assert_eq!(r.take_event(), None, "reported once");
    assert_eq!(
        r.accepts_data(&data(0)),
        Err(DropReason::WrongState),
        "a finished RPC takes no DATA"
    );
}

#[test]
fn data_for_another_message_length_is_a_bad_range() {
    let mut mem = [0u8; 64 * 1024];
    let mut p = pool(&mut mem);
    let r = server_incoming(&mut p);
    let mut h = data(SEG);
    h.message_length = LEN + 1;
    assert_eq!(r.accepts_data(&h), Err(DropReason::BadRange));
    assert_eq!(r.accepts_data(&data(SEG)), Ok(()));
    // A message's first packet that would leave an untrackable hole.
    let fresh = client_sent(&mut p);
    assert_eq!(fresh.accepts_data(&data(3)), Err(DropReason::TooManyGaps));
}

#[test]
fn a_message_without_pages_asks_for_them() {
    let mut mem = [0u8; 64 * 1024];
    let mut p = pool(&mut mem);
    let mut r = client_sent(&mut p);
    assert_eq!(
        r.on_data(&data(0), payload(0), &mut p, UNSCHED, false),
        DataVerdict::NeedPages {
            len: LEN,
            server: false
        }
    );
    // The request ended all the same; the response waits for pages.
    assert_eq!(r.state(), State::ClientIncoming);
    assert!(r.incoming().unwrap().buf().is_none());
    let buf = p.alloc(LEN as usize).unwrap();
    r.give_pages(buf, &mut p);
    assert_eq!(
        r.on_data(&data(0), payload(0), &mut p, UNSCHED, false),
        DataVerdict::Stored
    );
}

#[test]
fn failing_frees_the_pages_and_reports_the_error_once() {
    let mut mem = [0u8; 64 * 1024];
    let mut p = pool(&mut mem);
    let free = p.free_bytes();
    let mut r = client_incoming(&mut p);
    assert!(r.fail(RpcError::PortUnreachable, &mut p));
    assert_eq!(r.state(), State::ClientFailed(RpcError::PortUnreachable));
    assert_eq!(r.state().name(), "client-failed");
    assert_eq!(p.free_bytes(), free);
    assert!(!r.fail(RpcError::TimedOut, &mut p), "failed already");
    assert_eq!(
        r.take_event(),
        Some(News::Failed(RpcError::PortUnreachable))
    );
    assert_eq!(r.take_event(), None);
    // A finished or server RPC cannot fail.
    assert!(!client_done(&mut p).fail(RpcError::TimedOut, &mut p));
    assert!(!server_incoming(&mut p).fail(RpcError::TimedOut, &mut p));
}

#[test]
fn the_request_is_taken_once_and_answered_once() {
    let mut mem = [0u8; 64 * 1024];
    let mut p = pool(&mut mem);
    let mut r = server_ready(&mut p);
    assert_eq!(r.take_event(), Some(News::Request(LEN as usize)));
    assert_eq!(r.state(), State::ServerInService);
    assert_eq!(r.take_event(), None);
    let free = p.free_bytes();
    let buf = p.alloc(100).unwrap();
    assert!(r.reply(MsgOut::new(buf, 100, SEG, 100), &mut p));
    assert_eq!(r.state(), State::ServerOutgoing);
    // The request's 2 pages went back, the response took 1.
    assert_eq!(p.free_bytes(), free + 2048 - 1024);
    assert!(r.incoming().is_none());
    // A second reply is refused and its pages go back.
    let buf = p.alloc(100).unwrap();
    assert!(!r.reply(MsgOut::new(buf, 100, SEG, 100), &mut p));
    assert_eq!(p.free_bytes(), free + 2048 - 1024);
}

#[test]
fn grants_count_only_for_a_message_being_sent() {
    let mut mem = [0u8; 256 * 1024];
    let mut p = Pool::new(&mut mem[..], 4096).unwrap();
    let mut r = client_outgoing(&mut p, 100_000);
    assert_eq!(r.outgoing().unwrap().granted(), UNSCHED);
    assert!(r.on_grant(50_000, 9, TOP, UNSCHED));
    let out = r.outgoing().unwrap();
    assert_eq!(out.granted(), 50_000);
    assert_eq!(out.sched_priority(), TOP, "capped at the top priority");
    // Beyond the message: granted up to its end.
    assert!(r.on_grant(200_000, 1, TOP, UNSCHED));
    assert_eq!(r.outgoing().unwrap().granted(), 100_000);
    assert!(!server_incoming(&mut p).on_grant(5_000, 1, TOP, UNSCHED));
    assert!(!server_in_service(&mut p).on_grant(5_000, 1, TOP, UNSCHED));
}

#[test]
fn resend_verdicts_by_state() {
    let mut mem = [0u8; 64 * 1024];
    let mut p = pool(&mut mem);
    let interval = RULES.interval;
    // A server that owes its response answers BUSY.
    for mut r in [
        server_incoming(&mut p),
        server_ready(&mut p),
        server_in_service(&mut p),
    ] {
        assert_eq!(
            r.on_resend(0, RESEND_ALL, 3, TOP, UNSCHED, interval),
            ResendVerdict::Busy
        );
    }
    // Nothing sent yet: BUSY.
    let mut r = client_outgoing(&mut p, LEN);
    assert_eq!(
        r.on_resend(0, RESEND_ALL, 3, TOP, UNSCHED, interval),
        ResendVerdict::Busy
    );
    // Sent: the range asked for goes again, retransmissions first.
    send_all(&mut r);
    assert_eq!(
        r.on_resend(SEG, 100, 3, TOP, UNSCHED, interval),
        ResendVerdict::Queued
    );
    let out = r.outgoing().unwrap();
    assert!(out.has_resend());
    assert_eq!(out.next_resend(), Some((SEG, LEN, 3)));
    assert_eq!(r.send_key(), (false, 0));
    assert!(r.wants_send());
    // Resent: nothing left to send.
    r.data_sent(SEG, LEN, true);
    assert!(!r.wants_send());
    assert_eq!(r.send_key(), (true, 0));
}

/// Ticks `r` until it has been silent long enough to ask (`RULES.resend`).
fn fall_silent(r: &mut Rpc) {
    while r.silent_ticks() < RULES.resend {
        tick(r, true);
    }
}

#[test]
fn rpc_unknown_restarts_a_request_once_per_interval() {
    let mut mem = [0u8; 64 * 1024];
    let mut p = pool(&mut mem);
    let mut r = client_sent(&mut p);
    // Not silent long enough to have asked: no answer to us.
    assert_eq!(
        r.on_rpc_unknown(RULES.interval, RULES.resend, 6, UNSCHED),
        UnknownVerdict::Ignored
    );
    for _ in 0..MAX_RESTARTS {
        fall_silent(&mut r);
        assert_eq!(
            r.on_rpc_unknown(RULES.interval, RULES.resend, 6, UNSCHED),
            UnknownVerdict::Restarted
        );
        // It starts over: nothing sent, its unscheduled bytes granted.
        let out = r.outgoing().unwrap();
        assert_eq!((out.next_xmit(), out.granted()), (0, LEN));
        assert!(!out.has_resend());
        assert_eq!(r.send_key(), (true, LEN));
        send_all(&mut r);
        assert_eq!(
            r.on_rpc_unknown(RULES.interval, RULES.resend, 6, UNSCHED),
            UnknownVerdict::TooSoon
        );
        for _ in 0..RULES.interval {
            tick(&mut r, true);
        }
    }
    fall_silent(&mut r);
    // Its restarts are spent: its first packet goes again, at the
    // priority given, and it goes on.
    assert_eq!(
        r.on_rpc_unknown(RULES.interval, RULES.resend, 6, UNSCHED),
        UnknownVerdict::Spent
    );
    assert_eq!(r.outgoing().unwrap().next_resend(), Some((0, SEG, 6)));
    assert_eq!(r.state(), State::ClientOutgoing);
    assert_eq!(
        server_outgoing(&mut p).on_rpc_unknown(RULES.interval, RULES.resend, 6, UNSCHED),
        UnknownVerdict::Forgotten
    );
    assert_eq!(
        client_incoming(&mut p).on_rpc_unknown(RULES.interval, RULES.resend, 6, UNSCHED),
        UnknownVerdict::Ignored
    );
}

#[test]
fn rpc_unknown_past_the_restarts_never_fails_the_request() {
    let mut mem = [0u8; 64 * 1024];
    let mut p = pool(&mut mem);
    let mut r = client_sent(&mut p);
    let rules = TickRules {
        timeout: 1000,
        ..RULES
    };
    for i in 0..100 {
        for _ in 0..rules.interval {
            tick_by(&mut r, &rules, true);
        }
        fall_silent(&mut r);
        let want = if i < MAX_RESTARTS {
            UnknownVerdict::Restarted
        } else {
            UnknownVerdict::Spent
        };
        assert_eq!(
            r.on_rpc_unknown(rules.interval, rules.resend, 6, UNSCHED),
            want
        );
        send_all(&mut r);
        r.data_sent(0, SEG, true);
    }
    assert_eq!(r.state(), State::ClientOutgoing);
}

#[test]
fn a_client_waiting_for_its_response_resends_then_times_out() {
    let mut mem = [0u8; 64 * 1024];
    let mut p = pool(&mut mem);
    let mut r = client_sent(&mut p);
    use TickVerdict::*;
    // RESENDs at 3, 5, 7 and 9 silent ticks; the timeout at 10.
    let expected = [
        Silent,
        Silent,
        Doubt { due: true },
        Silent,
        Doubt { due: true },
        Silent,
        Doubt { due: true },
        Silent,
        Doubt { due: true },
        TimedOut(RpcError::TimedOut),
    ];
    assert_eq!(ticks(&mut r, 10, true)[..], expected[..]);
    assert_eq!(r.control_due(), (false, true, false));
    assert_eq!(r.silent_ticks(), 10);
    // BUSY is a sign of life.
    r.on_busy();
    assert_eq!(r.silent_ticks(), 0);
}

#[test]
fn an_unresolved_peer_asks_for_nothing_and_fails_unresolved() {
    let mut mem = [0u8; 64 * 1024];
    let mut p = pool(&mut mem);
    // Unsent bytes to an unresolved peer are silence too.
    let mut r = client_outgoing(&mut p, LEN);
    let v = ticks(&mut r, 10, false);
    assert_eq!(v[2], TickVerdict::Doubt { due: false });
    assert_eq!(v[9], TickVerdict::TimedOut(RpcError::Unresolved));
    assert_eq!(r.control_due(), (false, false, false));
}

#[test]
fn states_not_waiting_on_the_peer_are_quiet() {
    let mut mem = [0u8; 64 * 1024];
    let mut p = pool(&mut mem);
    for mut r in [
        client_done(&mut p),
        server_ready(&mut p),
        server_in_service(&mut p),
    ] {
        assert!(ticks(&mut r, 20, false)
            .iter()
            .all(|v| *v == TickVerdict::Quiet));
    }
    // A client sending to a resolved peer is busy, not silent.
    let mut r = client_outgoing(&mut p, LEN);
    assert!(ticks(&mut r, 20, true)
        .iter()
        .all(|v| *v == TickVerdict::Quiet));
}

#[test]
fn a_sent_response_asks_for_its_ack_then_times_out() {
    let mut mem = [0u8; 64 * 1024];
    let mut p = pool(&mut mem);
    let mut r = server_outgoing(&mut p);
    // Unsent: busy.
    assert_eq!(tick(&mut r, true), TickVerdict::Quiet);
    send_all(&mut r);
    use TickVerdict::*;
    // NEED_ACK every tick from the 4th; a sender asks for no RESENDs.
    let expected = [
        Silent,
        Silent,
        Doubt { due: false },
        Due,
        Doubt { due: true },
        Due,
        Doubt { due: true },
        Due,
        Doubt { due: true },
        TimedOut(RpcError::TimedOut),
    ];
    assert_eq!(ticks(&mut r, 10, true)[..], expected[..]);
    assert_eq!(r.control_due(), (false, false, true));
    let need_ack = r.take_need_ack().unwrap();
    assert_eq!(
        (need_ack.sport, need_ack.dport, need_ack.sender_id),
        (500, 0x8000, 3)
    );
    assert_eq!(need_ack.kind, Kind::NeedAck);
    assert_eq!(r.take_need_ack(), None);
}

#[test]
fn a_message_waiting_on_our_grants_repeats_its_grant() {
    let mut mem = [0u8; 256 * 1024];
    let mut p = Pool::new(&mut mem[..], 4096).unwrap();
    // A 100,000-byte request of which the 40,000 unscheduled bytes came.
    let mut r = Rpc::server(
        3,
        0,
        0,
        peer_addr(),
        0x8000,
        500,
        1,
        Local::CHOSEN,
        MsgIn::new(100_000, UNSCHED, UNSCHED),
    );
    let chunk = [0u8; 1000];
    for i in 0..40 {
        let mut h = data(i * 1000);
        h.message_length = 100_000;
        h.incoming = UNSCHED;
        assert_eq!(
            r.on_data(&h, &chunk, &mut p, UNSCHED, true),
            DataVerdict::Stored
        );
    }
    assert!(r.grant_candidate());
    assert_eq!(r.counted(), 0, "everything granted arrived");
    assert!(r.grant(50_000, 2));
    assert!(!r.grant(45_000, 2), "no raise");
    assert_eq!(r.counted(), 10_000);
    let grant = r.take_grant().unwrap();
    assert_eq!(
        grant.kind,
        Kind::Grant {
            offset: 50_000,
            priority: 2
        }
    );
    assert_eq!(r.take_grant(), None);
    // The sender is granted more than it sent: silence on the peer.
    assert_eq!(tick(&mut r, true), TickVerdict::Silent);
    // It sends the granted bytes; then it waits on us, which never
    // times out but repeats the GRANT at RESEND times.
    for i in 40..50 {
        let mut h = data(i * 1000);
        h.message_length = 100_000;
        h.incoming = UNSCHED;
        assert_eq!(
            r.on_data(&h, &chunk, &mut p, UNSCHED, true),
            DataVerdict::Stored
        );
    }
    use TickVerdict::*;
    let expected = [
        Silent, Silent, Due, Silent, Due, Silent, Due, Silent, Due, Silent, Due, Silent,
    ];
    assert_eq!(ticks(&mut r, 12, true)[..], expected[..]);
    assert_eq!(r.control_due(), (true, false, false));
}

#[test]
fn a_request_waiting_for_pool_pages_is_freed_when_stale() {
    // No pages: the request never took any.
    let mut r = Rpc::server(
        3,
        0,
        0,
        peer_addr(),
        0x8000,
        500,
        1,
        Local::CHOSEN,
        MsgIn::new(LEN, LEN, UNSCHED),
    );
    // Its client's RESENDs keep it from timing out (the wait is ours) ...
    let mut v = heapless::Vec::<TickVerdict, 32>::new();
    for _ in 0..RULES.stale {
        assert_eq!(
            r.on_resend(0, RESEND_ALL, 3, TOP, UNSCHED, RULES.interval),
            ResendVerdict::Busy
        );
        v.push(tick(&mut r, true)).unwrap();
    }
    // ... but not for ever: no progress for `stale` ticks frees it.
    assert_eq!(
        v[..19]
            .iter()
            .filter(|x| **x == TickVerdict::Silent)
            .count(),
        19
    );
    assert_eq!(v[19], TickVerdict::Stale);
}
