//! Two endpoints over an in-memory wire, driven on a virtual clock: the
//! wire, its devices and the payload patterns are homa-phy's test kit
//! (`homa_phy::testing`), shared with every other crate's tests.

use super::*;
pub(crate) use crate::phy::testing::{frames, pattern, pattern_byte, TestDevice};
use crate::wire::homa;
use crate::wire::{EthernetAddress, Ipv4Addr};
use std::vec::Vec;

pub(crate) const A_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub(crate) const B_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
pub(crate) const A_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
pub(crate) const B_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);
/// The hash seed of the test endpoints: fixed, so runs repeat.
pub(crate) const SEED: u64 = 0x5eed_7e57_0000_0001;

pub(crate) fn endpoint(
    ip: Ipv4Addr,
    mac: EthernetAddress,
    rpcs: usize,
    pool: usize,
) -> Endpoint<'static> {
    endpoint_with(Config::new(ip, mac, SEED), rpcs, pool)
}

pub(crate) fn endpoint_with(config: Config, rpcs: usize, pool: usize) -> Endpoint<'static> {
    endpoint_with_peers(config, rpcs, 8, pool)
}

/// An endpoint over leaked tables (`'static`), `peers` peers and 4 sockets.
pub(crate) fn endpoint_with_peers(
    config: Config,
    rpcs: usize,
    peers: usize,
    pool: usize,
) -> Endpoint<'static> {
    let rpcs: &'static mut [RpcSlot] = Vec::leak((0..rpcs).map(|_| RpcSlot::EMPTY).collect());
    let peers: &'static mut [PeerSlot] = Vec::leak(vec![PeerSlot::EMPTY; peers]);
    let socks: &'static mut [SocketSlot] = Vec::leak(vec![SocketSlot::EMPTY; 4]);
    let pool: &'static mut [u8] = Vec::leak(vec![0u8; pool]);
    Endpoint::new(config, rpcs, peers, socks, pool, 4096).unwrap()
}

/// Two endpoints, a wire between them with a one-way delay, and a clock.
pub(crate) type Pair = crate::phy::testing::Pair<Endpoint<'static>, Endpoint<'static>>;

/// `Pair::linked`.
pub(crate) trait Linked {
    /// A pair that knows each other's link addresses.
    fn linked(rpcs: usize, pool: usize) -> Pair;
}

impl Linked for Pair {
    fn linked(rpcs: usize, pool: usize) -> Pair {
        let mut p = Pair::new(
            endpoint(A_IP, A_MAC, rpcs, pool),
            endpoint(B_IP, B_MAC, rpcs, pool),
        );
        p.a.add_neighbor(p.now, B_IP, B_MAC).unwrap();
        p.b.add_neighbor(p.now, A_IP, A_MAC).unwrap();
        p
    }
}

/// Sends one request from A to an echo server on B and returns the response.
pub(crate) fn echo_rpc(p: &mut Pair, len: usize) -> Vec<u8> {
    let server = p.b.bind(500).unwrap_or(SocketHandle(0));
    let client = p.a.socket().unwrap();
    let req = pattern(len, 7);
    let h = p.a.send_request(client, B_IP, 500, &req).unwrap();
    let mut resp = None;
    let ok = p.run_until(Duration::from_secs(5), |p| {
        while let Some(Event::Request { rpc, len: n, .. }) = p.b.recv(server) {
            let mut buf = vec![0; n];
            assert_eq!(p.b.message(rpc).unwrap().copy_to(&mut buf), n);
            p.b.reply(rpc, &buf).unwrap();
        }
        match p.a.recv(client) {
            Some(Event::Response { rpc, len: n }) => {
                assert_eq!(rpc, h);
                let mut buf = vec![0; n];
                p.a.message(rpc).unwrap().copy_to(&mut buf);
                p.a.release(rpc).unwrap();
                resp = Some(buf);
                true
            }
            Some(e) => panic!("unexpected {e:?}"),
            None => false,
        }
    });
    assert!(
        ok,
        "RPC of {len} bytes did not complete\nA: {}\nB: {}",
        p.a.stats(),
        p.b.stats()
    );
    let resp = resp.unwrap();
    assert_eq!(resp, req, "response of {len} bytes differs");
    resp
}

#[test]
#[cfg_attr(miri, ignore = "moves megabytes: too slow under Miri")]
fn rpcs_of_every_boundary_size_complete_byte_exact() {
    for &len in &[
        1usize, 100, 1423, 1424, 1425, 39_999, 40_000, 40_001, 100_000, 1_000_000,
    ] {
        let mut p = Pair::linked(16, 4 << 20);
        echo_rpc(&mut p, len);
        // The server frees its side once the ack arrives (NEED_ACK after 2 ticks).
        p.run_until(Duration::from_millis(20), |p| p.b.rpcs_in_use() == 0);
        assert_eq!(p.a.rpcs_in_use(), 0);
        assert_eq!(
            p.b.rpcs_in_use(),
            0,
            "server state for {len} bytes not freed"
        );
        assert_eq!(p.a.pool_free_bytes(), p.a.pool_capacity_bytes());
        assert_eq!(p.b.pool_free_bytes(), p.b.pool_capacity_bytes());
    }
}

#[test]
#[cfg_attr(miri, ignore = "moves megabytes: too slow under Miri")]
fn long_messages_are_granted_and_short_ones_are_not() {
    let mut p = Pair::linked(16, 4 << 20);
    echo_rpc(&mut p, 1000);
    assert_eq!(p.a.stats().tx.grant + p.b.stats().tx.grant, 0);
    let mut p = Pair::linked(16, 4 << 20);
    echo_rpc(&mut p, 100_000);
    // One GRANT each way: at the first packet the window of the one active
    // message (`max_incoming` / 2 = 200,000 bytes past what arrived) covers
    // the whole 100,000 bytes, so the first grant is the last.
    assert_eq!(p.b.stats().tx.grant, 1, "the server grants the request");
    assert_eq!(p.a.stats().tx.grant, 1, "the client grants the response");
}

#[test]
fn an_endpoint_with_nothing_to_grant_has_no_fifo_deadline() {
    // B holds a short request it has not answered: nothing to grant, so
    // its next wake-up is the tick, not a FIFO grant every interval.
    let mut p = Pair::linked(16, 1 << 20);
    let server = p.b.bind(500).unwrap();
    let client = p.a.socket().unwrap();
    p.a.send_request(client, B_IP, 500, &pattern(100, 1))
        .unwrap();
    assert!(p.run_until(Duration::from_millis(1), |p| p.b.recv(server).is_some()));
    let fifo = grant::fifo_interval(&p.b.config, p.b.link_mbps).unwrap();
    assert!(fifo < p.b.config.tick, "a FIFO deadline would come first");
    assert_eq!(p.b.timers.get(Timer::FifoGrant), None);
    assert_eq!(p.b.poll_at(), p.b.timers.get(Timer::Tick));
}

/// Runs a 1 MB request, then a 300 kB one, from A to B with one message
/// granted at a time; returns, when the shorter (which SRPT favours) has
/// arrived, B's FIFO grant count and the GRANTs B sent for the 1 MB
/// request until then, each with its priority.
fn fifo_grants_while_srpt_grants_another(fifo_fraction: u32) -> (u64, Vec<u8>) {
    let mut config = Config::new(B_IP, B_MAC, SEED);
    config.max_overcommit = 1;
    config.grant_fifo_fraction = fifo_fraction;
    config.fifo_grant_increment = 10_000;
    let mut p = Pair::new(
        endpoint(A_IP, A_MAC, 16, 4 << 20),
        endpoint_with(config, 16, 4 << 20),
    );
    p.a.add_neighbor(p.now, B_IP, B_MAC).unwrap();
    p.b.add_neighbor(p.now, A_IP, A_MAC).unwrap();
    p.link_mbps = Some(10_000);
    let server = p.b.bind(500).unwrap();
    let client = p.a.socket().unwrap();
    let long =
        p.a.send_request(client, B_IP, 500, &pattern(1_000_000, 1))
            .unwrap();
    p.a.send_request(client, B_IP, 500, &pattern(300_000, 2))
        .unwrap();
    let mut first = None;
    assert!(p.run_until(Duration::from_secs(1), |p| {
        match p.b.recv(server) {
            Some(Event::Request { len, .. }) => {
                first = Some((len, p.b.stats().grants_fifo));
                true
            }
            _ => false,
        }
    }));
    let (len, fifo) = first.unwrap();
    assert_eq!(len, 300_000, "SRPT completes the shorter request first");
    let mut grants = Vec::new();
    for (_, to_b, f, _) in &p.log {
        let Ok(h) = homa::Packet::new_checked(&f[34..]) else {
            continue;
        };
        if let (false, Ok(r)) = (*to_b, homa::Repr::parse(&h)) {
            if let homa::Kind::Grant { priority, .. } = r.kind {
                if r.sender_id == long.id() ^ 1 {
                    grants.push(priority);
                }
            }
        }
    }
    (fifo, grants)
}

#[test]
#[cfg_attr(miri, ignore = "moves megabytes: too slow under Miri")]
fn the_oldest_message_gets_fifo_grants_while_srpt_grants_a_shorter_one() {
    // 10 kB every 40 us at 20% of 10 Gbit/s; the shorter takes 240 us.
    // The oldest's first GRANTs are the FIFO grants, at priority 6
    // (docs/protocol.md 4.4), while SRPT still grants the shorter; its
    // SRPT grants (priority 0) begin once the shorter is granted whole.
    // Without FIFO grants it gets none at 6.
    let (fifo, grants) = fifo_grants_while_srpt_grants_another(200);
    let fifo = fifo as usize;
    assert!(fifo > 0);
    assert_eq!(grants[..fifo], vec![6; fifo], "{grants:?}");
    assert!(!grants[fifo..].contains(&6), "{grants:?}");
    let (none, grants) = fifo_grants_while_srpt_grants_another(0);
    assert_eq!(none, 0);
    assert!(!grants.contains(&6), "{grants:?}");
}

#[test]
#[cfg_attr(miri, ignore = "moves megabytes: too slow under Miri")]
fn data_packets_follow_linux_geometry_and_priorities() {
    let mut p = Pair::linked(16, 4 << 20);
    echo_rpc(&mut p, 100_000);
    let mut offsets = Vec::new();
    for (_, to_b, f, prio) in &p.log {
        let ip = &f[14..];
        let h = homa::Packet::new_checked(&ip[20..]).unwrap();
        if *to_b && h.packet_type() == homa::PacketType::Data {
            let r = homa::Repr::parse(&h).unwrap();
            let homa::Kind::Data { header, payload } = r.kind else {
                unreachable!()
            };
            assert_eq!(h.sequence(), header.offset, "both offset fields set");
            assert_eq!(h.doff(), 14);
            assert_eq!(header.message_length, 100_000);
            assert_eq!(ip[1] >> 5, *prio, "TOS carries the priority");
            if !header.retransmit {
                offsets.push((header.offset, payload.len()));
                if header.offset < 40_000 {
                    // A new peer sends unscheduled bytes at priority 6 (or by
                    // the cutoffs once they arrive: 4 for 100 kB).
                    assert!(*prio == 6 || *prio == 4, "unscheduled prio {prio}");
                    assert_eq!(header.incoming, 40_000);
                } else {
                    assert!(*prio <= 3, "scheduled prio {prio}");
                }
            }
        } else if h.packet_type() != homa::PacketType::Data {
            assert_eq!(*prio, 7, "control packets at the highest priority");
            assert_eq!(h.doff(), 5);
        }
    }
    offsets.sort();
    assert_eq!(offsets[0], (0, 1424));
    assert!(
        offsets.contains(&(39_872, 128)),
        "a packet boundary at the unscheduled limit"
    );
    assert!(offsets.contains(&(40_000, 1424)));
    assert_eq!(offsets.iter().map(|o| o.1).sum::<usize>(), 100_000);
}

/// The message lengths of A's first-transmission DATA packets, in the
/// order they went out.
fn data_lengths_from_a(p: &Pair) -> Vec<u32> {
    let mut lengths = Vec::new();
    for (_, to_b, f, _) in &p.log {
        let Ok(h) = homa::Packet::new_checked(&f[34..]) else {
            continue;
        };
        if *to_b && h.packet_type() == homa::PacketType::Data {
            if let Ok(homa::Repr {
                kind: homa::Kind::Data { header, .. },
                ..
            }) = homa::Repr::parse(&h)
            {
                if !header.retransmit {
                    lengths.push(header.message_length);
                }
            }
        }
    }
    lengths
}

#[test]
fn short_messages_go_first_in_the_order_they_were_sent() {
    // A 3,000-byte message, then three of at most defer_min_bytes (1000)
    // handed over in one go: the short ones are never held back and go
    // out in sendmsg order, as Linux sends them, before the longer one's
    // packets; SRPT orders only what is longer.
    let mut p = Pair::linked(16, 1 << 20);
    p.b.bind(500).unwrap();
    let client = p.a.socket().unwrap();
    for len in [3000, 900, 100, 1000] {
        p.a.send_request(client, B_IP, 500, &pattern(len, 1))
            .unwrap();
    }
    p.run_until(Duration::from_micros(50), |_| false);
    assert_eq!(data_lengths_from_a(&p), [900, 100, 1000, 3000, 3000, 3000]);
}

#[test]
#[cfg_attr(miri, ignore = "moves megabytes: too slow under Miri")]
fn sixty_four_concurrent_rpcs_of_mixed_sizes() {
    let mut p = Pair::linked(80, 16 << 20);
    let server = p.b.bind(500).unwrap();
    let client = p.a.socket().unwrap();
    let sizes: Vec<usize> = (0..64)
        .map(|i| [1, 100, 1500, 20_000, 40_001, 150_000, 7, 3000][i % 8] + i)
        .collect();
    let mut want = std::collections::HashMap::new();
    for (i, &n) in sizes.iter().enumerate() {
        let data = pattern(n, i as u64);
        let h = p.a.send_request(client, B_IP, 500, &data).unwrap();
        want.insert(h, data);
    }
    let mut done = 0;
    let ok = p.run_until(Duration::from_secs(10), |p| {
        while let Some(Event::Request { rpc, len, .. }) = p.b.recv(server) {
            let mut buf = vec![0; len];
            p.b.message(rpc).unwrap().copy_to(&mut buf);
            p.b.reply(rpc, &buf).unwrap();
        }
        while let Some(e) = p.a.recv(client) {
            let Event::Response { rpc, .. } = e else {
                panic!("{e:?}")
            };
            assert!(p.a.message(rpc).unwrap().eq_bytes(&want[&rpc]));
            p.a.release(rpc).unwrap();
            done += 1;
        }
        done == 64
    });
    assert!(ok, "only {done} of 64 completed");
    p.run_until(Duration::from_millis(50), |p| p.b.rpcs_in_use() == 0);
    // Acks that found no DATA to ride on went out five to an ACK packet.
    let acks: usize = p
        .log
        .iter()
        .filter(|(_, to_b, _, _)| *to_b)
        .filter_map(|(_, _, f, _)| {
            homa::Repr::parse(&homa::Packet::new_checked(&f[34..]).ok()?).ok()
        })
        .map(|r| match r.kind {
            homa::Kind::Ack { acks } => acks.len(),
            _ => 0,
        })
        .sum();
    assert!(
        p.a.stats().tx.ack > 0 && acks >= 5,
        "{} ACK packets carried {acks} acks",
        p.a.stats().tx.ack
    );
    assert_eq!(p.b.rpcs_in_use(), 0);
    assert_eq!(p.b.pool_free_bytes(), p.b.pool_capacity_bytes());
}

#[test]
fn a_full_peer_table_evicts_an_idle_peer_and_finds_the_new_one() {
    // One peer slot: B, then C in the same slot, then B again.
    let c_ip = Ipv4Addr::new(10, 0, 0, 3);
    let a = endpoint_with_peers(Config::new(A_IP, A_MAC, SEED), 8, 1, 1 << 20);
    let mut p = Pair::new(a, endpoint(B_IP, B_MAC, 8, 1 << 20));
    echo_rpc(&mut p, 100);
    let client = p.a.socket().unwrap();
    let to_c = p.a.send_request(client, c_ip, 500, b"to C").unwrap();
    assert_eq!(p.a.stats().peers_evicted, 1, "B was idle: C takes its slot");
    p.a.abort(to_c).unwrap();
    // B's address must not be taken for the peer now in the slot B had.
    echo_rpc(&mut p, 100);
    assert_eq!(p.a.stats().peers_evicted, 2, "C was idle: B takes it back");
    assert_eq!(p.a.peers_in_use(), 1);
}

#[test]
fn tick_counters_at_their_limit_saturate_and_the_rpc_still_times_out() {
    // A server RPC whose response is sent whole counts ticks while it
    // waits for its ACK (and a message waiting on our grants counts its
    // silence without timing out); at their maximum a tick must neither
    // overflow (a panic in debug builds) nor wrap.
    let mut p = Pair::linked(8, 1 << 20);
    let server = p.b.bind(500).unwrap();
    let client = p.a.socket().unwrap();
    p.a.send_request(client, B_IP, 500, b"hi").unwrap();
    let answered = p.run_until(Duration::from_secs(1), |p| {
        while let Some(Event::Request { rpc, .. }) = p.b.recv(server) {
            p.b.reply(rpc, b"yo").unwrap();
        }
        matches!(p.a.recv(client), Some(Event::Response { .. }))
    });
    assert!(answered);
    let mut held = 0;
    for slot in 0..p.b.rpcs.len() {
        if let Some(mut r) = p.b.steady(slot) {
            r.saturate_ticks();
            held += 1;
        }
    }
    assert_eq!(held, 1, "the server holds the RPC until it is acked");
    let later = p.now + Duration::from_millis(5);
    p.b.poll(later, &mut TestDevice::default());
    assert_eq!(p.b.rpcs_in_use(), 0, "silent at the limit: timed out");
    assert_eq!(p.b.stats().server_timeouts, 1);
}

#[test]
fn full_rpc_table_is_an_error_not_a_panic() {
    let mut p = Pair::linked(2, 1 << 20);
    let client = p.a.socket().unwrap();
    assert_eq!(
        p.a.send_request(client, B_IP, 500, &[]),
        Err(SendError::Empty)
    );
    assert_eq!(
        p.a.send_request(client, B_IP, 500, &vec![0; 1_000_001]),
        Err(SendError::MessageTooLong)
    );
    p.a.send_request(client, B_IP, 500, b"x").unwrap();
    p.a.send_request(client, B_IP, 500, b"y").unwrap();
    assert_eq!(
        p.a.send_request(client, B_IP, 500, b"z"),
        Err(SendError::TableFull)
    );
    assert_eq!(p.a.rpcs_in_use(), 2);
}

#[test]
#[cfg_attr(miri, ignore = "moves megabytes: too slow under Miri")]
fn request_larger_than_free_pool_space_succeeds_once_space_frees() {
    // The server's pool holds one 300 kB message at a time: the second
    // request waits (its DATA dropped and counted) until the first is
    // answered and acked, then RESEND(0, all) restarts it.
    let mut a = endpoint(A_IP, A_MAC, 8, 4 << 20);
    let b = endpoint(B_IP, B_MAC, 8, 400 * 1024);
    a.add_neighbor(Instant::ZERO, B_IP, B_MAC).unwrap();
    let mut p = Pair::new(a, b);
    p.b.add_neighbor(p.now, A_IP, A_MAC).unwrap();
    let server = p.b.bind(500).unwrap();
    let client = p.a.socket().unwrap();
    let r1 = pattern(300_000, 1);
    let r2 = pattern(300_000, 2);
    p.a.send_request(client, B_IP, 500, &r1).unwrap();
    p.a.send_request(client, B_IP, 500, &r2).unwrap();
    let mut got = Vec::new();
    let mut held = Vec::new();
    let start = p.now;
    let ok = p.run_until(Duration::from_secs(5), |p| {
        while let Some(Event::Request { rpc, .. }) = p.b.recv(server) {
            held.push(rpc);
        }
        // Hold the first request 10 ms so the second must wait for space.
        if p.now > start + Duration::from_millis(10) {
            for rpc in held.drain(..) {
                p.b.reply(rpc, b"ok").unwrap();
            }
        }
        while let Some(Event::Response { rpc, .. }) = p.a.recv(client) {
            got.push(rpc);
            p.a.release(rpc).unwrap();
        }
        got.len() == 2
    });
    assert!(ok, "{got:?} stats {}", p.b.stats());
    // Every unscheduled packet of the second request came while the
    // first held the pool: 40,000 bytes cut at 1,424, 28 full packets and
    // one of 128, each dropped. Then it waited, sent nothing unasked, and
    // RESEND(0, all) found pages for it.
    assert_eq!(
        p.b.stats().drops.no_buffer,
        29,
        "the second request had to wait"
    );
}

#[test]
fn ping_gets_an_echo_reply() {
    let mut p = Pair::linked(4, 1 << 20);
    let icmp = crate::wire::icmpv4::Icmpv4Repr::EchoRequest {
        ident: 7,
        seq_no: 9,
        data: b"ping",
    };
    let mut body = vec![0u8; icmp.buffer_len()];
    icmp.emit(
        &mut crate::wire::icmpv4::Icmpv4Packet::new_unchecked(&mut body[..]),
        true,
    );
    let ip = frames::ipv4(B_IP, A_IP, frames::ICMP, 0, &body);
    let frame = frames::ethernet(B_MAC.0, A_MAC.0, None, frames::IPV4, &ip);
    p.da.rx.push_back(frame);
    p.a.poll(p.now, &mut p.da);
    let (reply, _) = p.da.tx.pop_front().expect("an echo reply");
    let ipp = crate::wire::ipv4::Ipv4Packet::new_checked(&reply[14..]).unwrap();
    let ipr = crate::wire::ipv4::Ipv4Repr::parse(&ipp, true).unwrap();
    assert_eq!((ipr.src_addr, ipr.dst_addr), (A_IP, B_IP));
    let r = crate::wire::icmpv4::Icmpv4Repr::parse(
        &crate::wire::icmpv4::Icmpv4Packet::new_checked(ipp.payload()).unwrap(),
        true,
    )
    .unwrap();
    assert_eq!(
        r,
        crate::wire::icmpv4::Icmpv4Repr::EchoReply {
            ident: 7,
            seq_no: 9,
            data: b"ping"
        }
    );
    assert_eq!(p.a.stats().icmp_echo_replies, 1);
}

#[test]
fn peers_are_resolved_with_arp() {
    let mut p = Pair::new(
        endpoint(A_IP, A_MAC, 8, 1 << 20),
        endpoint(B_IP, B_MAC, 8, 1 << 20),
    );
    echo_rpc(&mut p, 5000);
    // A asks once and B answers once. B fills A's address in from A's
    // checked DATA and answers there without waiting, but anyone could
    // have sent that packet: B asks once too, and A answers.
    assert_eq!(p.a.stats().arp_requests, 1);
    assert_eq!(p.b.stats().arp_replies, 1);
    assert_eq!(p.b.stats().arp_requests, 1);
    assert_eq!(p.a.stats().arp_replies, 1);
}

#[test]
fn request_to_a_closed_port_fails_with_port_unreachable() {
    closed_port_fails(&mut Pair::linked(4, 1 << 20), B_IP.into());
}

/// A request from A to port 999 at `dest` (B, which has no socket there)
/// fails with `PortUnreachable` after B's one ICMP error, and frees.
pub(crate) fn closed_port_fails(p: &mut Pair, dest: crate::wire::IpAddr) {
    let client = p.a.socket().unwrap();
    let h = p.a.send_request(client, dest, 999, b"hello").unwrap();
    let mut ev = None;
    p.run_until(Duration::from_millis(50), |p| {
        ev = p.a.recv(client);
        ev.is_some()
    });
    assert_eq!(
        ev,
        Some(Event::Failed {
            rpc: h,
            error: RpcError::PortUnreachable
        })
    );
    assert_eq!(p.b.stats().icmp_unreachable_sent, 1);
    p.a.release(h).unwrap();
    assert_eq!(p.a.rpcs_in_use(), 0);
}

#[test]
#[cfg_attr(miri, ignore = "moves megabytes: too slow under Miri")]
fn lost_packets_are_recovered_by_resend() {
    for len in [1usize, 5000, 100_000, 300_000] {
        let mut p = Pair::linked(8, 4 << 20);
        // Lose one frame in seven, at random, in both directions.
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        p.filter = Box::new(move |_, _, _| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            !rng.is_multiple_of(7)
        });
        echo_rpc(&mut p, len);
        p.run_until(Duration::from_millis(200), |p| p.b.rpcs_in_use() == 0);
        assert_eq!(p.b.rpcs_in_use(), 0);
    }
}

#[test]
#[cfg_attr(miri, ignore = "moves megabytes: too slow under Miri")]
fn a_receiver_that_loses_most_data_frames_still_gets_long_messages() {
    // A NIC with room for a few frames drops most of every burst: two in
    // three DATA frames are lost, each way, over and over. Each 400 kB
    // message then needs about twice its length sent again after its
    // receiver has granted it whole, far beyond what RESENDs may buy at
    // once; what they buy must still come back with time, so the RPC
    // completes rather than starving until it times out.
    let mut p = Pair::linked(8, 4 << 20);
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    p.filter = Box::new(move |_, _, f| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        f.len() < 1_000 || rng.is_multiple_of(3)
    });
    echo_rpc(&mut p, 400_000);
    assert!(
        p.a.stats().retransmissions + p.b.stats().retransmissions > 2 * 281,
        "less was sent again than the losses need: A {}, B {}",
        p.a.stats(),
        p.b.stats()
    );
}

#[test]
fn server_that_vanishes_makes_the_client_time_out() {
    let mut p = Pair::linked(4, 1 << 20);
    p.filter = Box::new(|_, to_b, _| !to_b);
    let client = p.a.socket().unwrap();
    let h = p.a.send_request(client, B_IP, 500, b"hello").unwrap();
    let mut ev = None;
    p.run_until(Duration::from_millis(500), |p| {
        ev = p.a.recv(client);
        ev.is_some()
    });
    assert_eq!(
        ev,
        Some(Event::Failed {
            rpc: h,
            error: RpcError::TimedOut
        })
    );
    // The request went whole at once; from then each tick is silence. A
    // RESEND at 5 silent ticks (`resend_ticks`) and every 5 more
    // (`resend_interval`) until the 100th, which fails the RPC instead:
    // at 5, 10, ..., 95, nineteen.
    assert_eq!(
        p.a.stats().tx.resend,
        19,
        "RESEND every 5 ms before the 100 ms timeout"
    );
}

#[test]
#[cfg_attr(miri, ignore = "moves megabytes: too slow under Miri")]
fn a_short_message_never_waits_behind_more_than_the_nic_backlog() {
    // At 10 Gbit/s a full frame takes ~1.24 us, so with the 5 us backlog
    // limit the pacer lets about five frames of a long message queue, and a
    // short message handed over then goes out at once.
    let mut p = Pair::linked(8, 4 << 20);
    let client = p.a.socket().unwrap();
    p.a.send_request(client, B_IP, 500, &pattern(1_000_000, 1))
        .unwrap();
    p.a.poll(p.now, &mut p.da);
    let long_frames = p.da.tx.len();
    assert!(
        (4..=6).contains(&long_frames),
        "{long_frames} frames of the long message queued"
    );
    // The poll's DATA loop ended at the pacer's hold, once.
    assert_eq!(p.a.stats().pacer_throttled, 1);
    p.a.send_request(client, B_IP, 500, b"short").unwrap();
    p.a.poll(p.now, &mut p.da);
    assert_eq!(
        p.da.tx.len(),
        long_frames + 1,
        "the short message went out, nothing more of the long one"
    );
    let (last, meta) = p.da.tx.back().unwrap();
    let h = homa::Packet::new_checked(&last[34..]).unwrap();
    assert_eq!(h.message_length(), 5);
    assert_eq!(meta.priority, 6, "unscheduled priority for a new peer");
    // Once the queue drains, the long message continues.
    p.now += Duration::from_micros(20);
    p.a.poll(p.now, &mut p.da);
    assert!(p.da.tx.len() > long_frames + 1);
}

#[test]
#[cfg_attr(miri, ignore = "moves megabytes: too slow under Miri")]
fn vlan_encoding_tags_frames_with_the_priority() {
    let mut ca = Config::new(A_IP, A_MAC, SEED);
    ca.priority_encoding = crate::config::PriorityEncoding::Vlan { vid: 42 };
    let mut cb = Config::new(B_IP, B_MAC, SEED);
    cb.priority_encoding = crate::config::PriorityEncoding::Vlan { vid: 42 };
    let mut p = Pair::new(endpoint_with(ca, 8, 1 << 20), endpoint_with(cb, 8, 1 << 20));
    p.a.add_neighbor(p.now, B_IP, B_MAC).unwrap();
    p.b.add_neighbor(p.now, A_IP, A_MAC).unwrap();
    echo_rpc(&mut p, 3000);
    let mut seen = 0;
    for (_, _, f, prio) in &p.log {
        let eth = crate::wire::ethernet::EthernetFrame::new_checked(&f[..]).unwrap();
        let tag = eth.vlan_tag().expect("every frame is tagged");
        assert_eq!((tag.vid, tag.pcp), (42, *prio));
        let ip = crate::wire::ipv4::Ipv4Packet::new_checked(eth.payload()).unwrap();
        assert_eq!(ip.tos(), 0, "TOS stays 0 with VLAN marking");
        seen += 1;
    }
    assert!(seen > 4);
}

#[test]
fn arp_goes_out_on_our_vlan() {
    // On a trunk, an untagged ARP reaches the native VLAN, not the one our
    // Homa frames are tagged for: resolution must use the same VLAN id
    // (at PCP 0, ARP carries no Homa priority).
    let mut ca = Config::new(A_IP, A_MAC, SEED);
    ca.priority_encoding = crate::config::PriorityEncoding::Vlan { vid: 42 };
    let mut cb = Config::new(B_IP, B_MAC, SEED);
    cb.priority_encoding = crate::config::PriorityEncoding::Vlan { vid: 42 };
    let mut p = Pair::new(endpoint_with(ca, 8, 1 << 20), endpoint_with(cb, 8, 1 << 20));
    echo_rpc(&mut p, 100);
    let mut arps = 0;
    for (_, _, f, _) in &p.log {
        let eth = crate::wire::ethernet::EthernetFrame::new_checked(&f[..]).unwrap();
        let tag = eth.vlan_tag().expect("every frame is tagged");
        assert_eq!(tag.vid, 42);
        if eth.ethertype() == crate::wire::ethernet::EtherType::Arp {
            assert_eq!(tag.pcp, 0, "ARP carries no Homa priority");
            arps += 1;
        }
    }
    assert!(arps >= 2, "a request and its reply, tagged ({arps} seen)");
}

#[test]
#[cfg_attr(miri, ignore = "moves megabytes: too slow under Miri")]
fn none_encoding_leaves_tos_zero_but_meta_carries_priority() {
    let mut ca = Config::new(A_IP, A_MAC, SEED);
    ca.priority_encoding = crate::config::PriorityEncoding::None;
    let mut p = Pair::new(
        endpoint_with(ca, 8, 1 << 20),
        endpoint(B_IP, B_MAC, 8, 1 << 20),
    );
    p.a.add_neighbor(p.now, B_IP, B_MAC).unwrap();
    p.b.add_neighbor(p.now, A_IP, A_MAC).unwrap();
    echo_rpc(&mut p, 100);
    let (_, _, f, prio) = p.log.iter().find(|(_, to_b, _, _)| *to_b).unwrap();
    assert_eq!(f[15], 0, "TOS 0");
    assert_eq!(
        *prio, 6,
        "the first request to a new peer goes at priority 6 (no cutoffs yet)"
    );
}

#[test]
fn slot_sizes_stay_small() {
    // An RPC slot holds no message data (that lives in the pool): its
    // biggest part is the sender's exact retransmission bitmap (128 bytes;
    // the receiver's missing ranges live in the message's own pages), then
    // the links that put it in the endpoint's queues, heaps and index (6
    // bytes per list, 4 per heap, 6 for the index, 8 for its place in its
    // peer's heap of grant candidates; the fifth heap, of each peer's best
    // candidate, took it from 392 to 400) instead of table walks, and the
    // heap keys it was last queued with (12 bytes: unchanged keys need no
    // sift); the peer's address holds IPv4 or IPv6 (17 bytes); a client's
    // restart ration (2 bytes) and the link in the list of server RPCs by
    // age (6 bytes); the outgoing message's resend ration (8 bytes).
    let rpc = core::mem::size_of::<RpcSlot>();
    assert!(rpc <= 424, "RpcSlot is {rpc} bytes");
    // A peer holds one ACK packet's worth of acks (6 x 10 bytes), its
    // neighbour entry (the link address, where it came from, when it was
    // confirmed and when to probe next: 32 bytes), and its links
    // (free/idle and resolve lists, the index by address) with the root of
    // its candidates' heap; its address is IPv4 or IPv6. It counts its
    // server RPCs, and as the leader of its prefix's group holds the
    // group's counts, with a link in the index of leaders by prefix.
    assert!(
        core::mem::size_of::<PeerSlot>() <= 264,
        "PeerSlot is {} bytes",
        core::mem::size_of::<PeerSlot>()
    );
}

/// Makes a frame look like what Linux `main` puts on the wire (docs/protocol.md
/// 10): flags 6 and urgent 0xb97d on every packet, `seg.offset` 0xFFFFFFFF
/// on first transmissions of DATA (the offset only in `sequence`), and a
/// checksum holding only the pseudo-header seed, which does not verify.
fn linuxify(frame: &mut [u8]) {
    if frame.len() < 34 + homa::COMMON_HEADER_LEN || frame[23] != 146 {
        return;
    }
    let mut p = homa::Packet::new_unchecked(&mut frame[34..]);
    p.set_flags(6);
    p.set_urgent(0xb97d);
    if p.packet_type() == homa::PacketType::Data && !p.retransmit() {
        p.set_seg_offset(homa::OFFSET_IN_SEQUENCE);
    }
    p.set_checksum(0x1234);
}

#[test]
#[cfg_attr(miri, ignore = "moves megabytes: too slow under Miri")]
fn rpcs_with_a_peer_that_sends_like_linux_complete() {
    for len in [1usize, 1425, 40_001, 300_000] {
        let mut p = Pair::linked(8, 4 << 20);
        // B plays the Linux host: everything it sends is rewritten.
        p.rewrite = Box::new(|to_b, f| {
            if !to_b {
                linuxify(f);
            }
        });
        echo_rpc(&mut p, len);
        assert_eq!(
            p.a.stats().drops.checksum,
            0,
            "checksums are not verified by default"
        );
        // And the other way round: the client A sends like Linux.
        let mut p = Pair::linked(8, 4 << 20);
        p.rewrite = Box::new(|to_b, f| {
            if to_b {
                linuxify(f);
            }
        });
        echo_rpc(&mut p, len);
    }
}

#[test]
#[cfg_attr(miri, ignore = "moves megabytes: too slow under Miri")]
fn a_reply_that_does_not_fit_leaves_the_request_readable() {
    // The server holds two 100 kB requests in a 356 kB pool; a 300 kB
    // response does not fit even with one request's pages given back, so
    // reply fails and that request can still be read and answered with
    // something that fits.
    let mut a = endpoint(A_IP, A_MAC, 8, 4 << 20);
    let b = endpoint(B_IP, B_MAC, 8, 350 * 1024);
    a.add_neighbor(Instant::ZERO, B_IP, B_MAC).unwrap();
    let mut p = Pair::new(a, b);
    p.b.add_neighbor(p.now, A_IP, A_MAC).unwrap();
    let server = p.b.bind(500).unwrap();
    let client = p.a.socket().unwrap();
    let (r1, r2) = (pattern(100_000, 3), pattern(100_000, 4));
    p.a.send_request(client, B_IP, 500, &r1).unwrap();
    p.a.send_request(client, B_IP, 500, &r2).unwrap();
    let mut got = Vec::new();
    p.run_until(Duration::from_secs(1), |p| {
        while let Some(Event::Request { rpc, .. }) = p.b.recv(server) {
            got.push(rpc);
        }
        got.len() == 2
    });
    assert_eq!(got.len(), 2);
    let rpc = got[0];
    assert_eq!(
        p.b.reply(rpc, &pattern(300_000, 5)),
        Err(SendError::PoolFull)
    );
    let m = p.b.message(rpc).expect("the request is still there");
    assert!(m.eq_bytes(&r1) || m.eq_bytes(&r2));
    // A response that fits once the request's pages are given back.
    p.b.reply(rpc, &pattern(200_000, 6)).unwrap();
    let ok = p.run_until(Duration::from_secs(1), |p| {
        matches!(p.a.recv(client), Some(Event::Response { len: 200_000, .. }))
    });
    assert!(ok);
}

mod hostile;
mod icmp;
mod ids;
#[cfg(feature = "ipv6")]
mod ipv6;
// These four drive thousands of polls over seconds of virtual time (floods,
// probes over 6 s, slow peers moving megabytes, restarts under forged
// packets): minutes each under Miri, so they run natively only.
#[cfg(not(miri))]
mod neighbours;
mod offload;
#[cfg(not(miri))]
mod restart;
#[cfg(not(miri))]
mod shares;
#[cfg(not(miri))]
mod slow;
mod wire_bytes;

#[test]
#[cfg_attr(miri, ignore = "moves megabytes: too slow under Miri")]
fn messages_are_built_and_read_in_place() {
    // A request built in the pool piece by piece, answered with a response
    // built the same way, both read through their page pieces: no buffer of
    // the message's size on either side.
    let mut p = Pair::linked(8, 4 << 20);
    let server = p.b.bind(500).unwrap();
    let client = p.a.socket().unwrap();
    let len = 300_001;
    let byte = |i: usize| pattern_byte(3, i);
    let mut pieces = 0;
    let h =
        p.a.send_request_with(client, B_IP, 500, len, |w| {
            assert_eq!(w.len(), len);
            w.for_each_chunk(|at, piece| {
                pieces += 1;
                for (k, b) in piece.iter_mut().enumerate() {
                    *b = byte(at + k);
                }
            })
        })
        .unwrap();
    assert!(pieces > 1, "the request spans pages");
    let mut answered = false;
    let ok = p.run_until(Duration::from_secs(1), |p| {
        if let Some(Event::Request { rpc, len: n, .. }) = p.b.recv(server) {
            // Check the request in place, then answer with its length.
            let m = p.b.message(rpc).unwrap();
            let mut at = 0;
            for c in m.chunks() {
                assert!(c.iter().enumerate().all(|(k, b)| *b == byte(at + k)));
                at += c.len();
            }
            assert_eq!(at, n);
            p.b.reply_with(rpc, 8, |w| {
                w.write_at(0, &(n as u64).to_be_bytes()).unwrap();
                assert!(w.write_at(1, &[0; 8]).is_err(), "past the end");
            })
            .unwrap();
            answered = true;
        }
        matches!(p.a.recv(client), Some(Event::Response { rpc, len: 8 }) if rpc == h)
    });
    assert!(ok && answered);
    let mut got = [0u8; 8];
    p.a.message(h).unwrap().copy_to(&mut got);
    assert_eq!(u64::from_be_bytes(got), len as u64);
    p.a.release(h).unwrap();
    // Nothing is started for a message Homa refuses, and the closure does
    // not run.
    let e =
        p.a.send_request_with(client, B_IP, 500, 1_000_001, |_| panic!("ran"));
    assert_eq!(e, Err(SendError::MessageTooLong));
}
