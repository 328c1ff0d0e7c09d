//! Shares of a full table: floods spread over addresses and prefixes
//! beside a legitimate client, and the honest edges (a rack of clients in
//! one /24, a response evicted before its ACK).

use super::*;
use crate::stats::Stats;
use crate::wire::homa::{DataHeader, Kind, Repr};
use crate::wire::{IpAddr, Ipv6Addr};
use std::collections::VecDeque;

const A6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
const B6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);
const EVIL_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0x66]);

/// What a flood's requests are.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Requests {
    /// One packet: the server answers at once, and the answer waits for
    /// an ACK that never comes.
    Whole,
    /// The first 10 bytes of a 2,000-byte request: the rest never comes.
    Unfinished,
}

/// A Homa packet from `src` (at `EVIL_MAC`) to B, checksum filled.
fn frame_to_b(src: IpAddr, repr: &Repr<'_>) -> Vec<u8> {
    let dst = match src {
        IpAddr::V4(_) => IpAddr::V4(B_IP),
        IpAddr::V6(_) => IpAddr::V6(B6),
    };
    let mut body = vec![0; repr.buffer_len()];
    let mut p = homa::Packet::new_unchecked(&mut body[..]);
    repr.emit(&mut p);
    p.fill_checksum(&src, &dst);
    let (ip, ethertype) = match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            (frames::ipv4(s, d, frames::HOMA, 0, &body), frames::IPV4)
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            (frames::ipv6(s, d, frames::HOMA, 0, 64, &body), frames::IPV6)
        }
        _ => unreachable!("one family"),
    };
    frames::ethernet(EVIL_MAC.0, B_MAC.0, None, ethertype, &ip)
}

/// A request from `src` to B's port 500 with client id `id`.
fn request(src: IpAddr, id: u64, requests: Requests) -> Vec<u8> {
    let length = match requests {
        Requests::Whole => 10,
        Requests::Unfinished => 2000,
    };
    let repr = Repr {
        sport: 40_000,
        dport: 500,
        sender_id: id,
        kind: Kind::Data {
            header: DataHeader {
                message_length: length,
                incoming: length,
                ack: None,
                cutoff_version: 1,
                retransmit: false,
                offset: 0,
            },
            payload: b"0123456789",
        },
    };
    frame_to_b(src, &repr)
}

/// `n` addresses: `per` hosts in each of `prefixes` /24s (or /64s) from
/// `first`, host numbers from `host`.
fn addresses(v6: bool, first: u16, prefixes: u16, per: u16, host: u16) -> Vec<IpAddr> {
    let mut out = Vec::new();
    for p in first..first + prefixes {
        for h in host..host + per {
            out.push(if v6 {
                IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, p, 0, 0, 0, h))
            } else {
                IpAddr::V4(Ipv4Addr::new(10, 9, p as u8, h as u8))
            });
        }
    }
    out
}

/// A dual-stack configuration at `ip` and `ip6`.
fn dual(ip: Ipv4Addr, ip6: Ipv6Addr, mac: EthernetAddress) -> Config {
    let mut c = Config::new(ip, mac, SEED);
    c.ipv6 = cfg!(feature = "ipv6");
    c.ipv6_addrs[0] = Some(ip6);
    c
}

/// B serves with 64 RPC slots and 128 peers (answering every request at
/// once) while a flood sends 16 requests every 5 ms, taking its sources in
/// turn; A, at `a`, once the flood has run 30 ms, makes `n` 100-byte RPCs
/// one after another, 2 ms apart: how many of A's complete, and B's stats.
pub(super) fn beside_a_flood(
    config: Config,
    a: IpAddr,
    sources: &[IpAddr],
    requests: Requests,
    n: usize,
) -> (usize, Stats) {
    beside_a_lossy_flood(config, a, sources, requests, n, 0)
}

/// [`beside_a_flood`], losing one frame in `lose` at random between A and
/// B, each way (0: none).
fn beside_a_lossy_flood(
    config: Config,
    a: IpAddr,
    sources: &[IpAddr],
    requests: Requests,
    n: usize,
    lose: u64,
) -> (usize, Stats) {
    let mut p = Pair::new(
        endpoint_with(dual(A_IP, A6, A_MAC), 8, 1 << 20),
        endpoint_with_peers(config, 64, 128, 4 << 20),
    );
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    p.filter = Box::new(move |_, _, _| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        lose == 0 || !rng.is_multiple_of(lose)
    });
    let b = match a {
        IpAddr::V4(_) => IpAddr::V4(B_IP),
        IpAddr::V6(_) => IpAddr::V6(B6),
    };
    p.a.add_neighbor(p.now, b, B_MAC).unwrap();
    p.b.add_neighbor(p.now, a, A_MAC).unwrap();
    let server = p.b.bind(500).unwrap();
    let client = p.a.socket().unwrap();
    let (mut next_flood, mut id, mut source) = (p.now, 2, 0);
    let (mut current, mut made, mut completed, mut ended) = (None, 0, 0, 0);
    let mut next_rpc = p.now + Duration::from_millis(30);
    p.run_until(Duration::from_secs(10), |p| {
        if p.now >= next_flood {
            for _ in 0..16 {
                p.db.rx.push_back(request(sources[source], id, requests));
                (id, source) = (id + 2, (source + 1) % sources.len());
            }
            next_flood += Duration::from_millis(5);
        }
        while let Some(Event::Request { rpc, .. }) = p.b.recv(server) {
            p.b.reply(rpc, b"ok").unwrap();
        }
        let outcome = match p.a.recv(client) {
            Some(Event::Response { rpc, .. }) => Some((rpc, 1)),
            Some(Event::Failed { rpc, .. }) => Some((rpc, 0)),
            _ => None,
        };
        if let Some((rpc, ok)) = outcome {
            completed += ok;
            ended += 1;
            p.a.release(rpc).unwrap();
            current = None;
            next_rpc = p.now + Duration::from_millis(2);
        }
        if current.is_none() && made < n && p.now >= next_rpc {
            current = Some(p.a.send_request(client, b, 500, &pattern(100, made as u64)));
            made += 1;
        }
        ended == n
    });
    assert_eq!(ended, n, "A's RPCs neither completed nor failed");
    (completed, *p.b.stats())
}

/// A's 20 RPCs beside a flood from `sources`: at least 18 complete.
fn completes_beside(what: &str, a: IpAddr, sources: &[IpAddr], requests: Requests) -> Stats {
    let n = 20;
    let config = dual(B_IP, B6, B_MAC);
    let (completed, stats) = beside_a_flood(config, a, sources, requests, n);
    std::println!(
        "{what} ({requests:?}): {completed} of {n} completed; B refused {} requests and freed {}",
        stats.drops.rpc_table_full,
        stats.server_evicted
    );
    assert!(
        completed * 10 >= n * 9,
        "{what}: {completed} of {n} completed\n{stats}"
    );
    stats
}

#[test]
#[cfg_attr(miri, ignore = "seconds of virtual time: too slow under Miri")]
fn a_legitimate_client_beside_four_addresses_each_at_its_share_completes() {
    // Four addresses in four /24s: each holds 16 of the 64 slots, exactly
    // its share, so no share is exceeded; their RPCs are answered and wait
    // for ACKs that never come.
    let sources = addresses(false, 1, 4, 1, 1);
    let st = completes_beside("4 addresses", A_IP.into(), &sources, Requests::Whole);
    assert!(st.server_evicted > 0);
}

#[test]
#[cfg_attr(miri, ignore = "seconds of virtual time: too slow under Miri")]
fn a_legitimate_client_at_its_share_beside_floods_completes_under_loss() {
    // The honest edge: A in the flood's own /24 (its prefix over its
    // share, A's address within it), a full table, and one frame in ten
    // lost each way between A and B; and beside 4 addresses each at its
    // share. A's RPCs still complete (a lost response found freed before
    // its ACK restarts, as Homa intends).
    let own: Vec<IpAddr> = (100..116)
        .map(|h| IpAddr::V4(Ipv4Addr::new(10, 0, 0, h)))
        .collect();
    let four = addresses(false, 1, 4, 1, 1);
    for (what, sources, requests) in [
        ("16 of A's /24, unfinished", &own, Requests::Unfinished),
        ("16 of A's /24, answered", &own, Requests::Whole),
        ("4 addresses, answered", &four, Requests::Whole),
    ] {
        let n = 20;
        let config = dual(B_IP, B6, B_MAC);
        let (completed, st) = beside_a_lossy_flood(config, A_IP.into(), sources, requests, n, 10);
        std::println!(
            "{what}, 1 in 10 lost: {completed} of {n} completed; B refused {} and freed {}",
            st.drops.rpc_table_full,
            st.server_evicted
        );
        assert!(completed * 10 >= n * 9, "{what}: {completed} of {n}\n{st}");
    }
}

#[test]
#[cfg_attr(miri, ignore = "seconds of virtual time: too slow under Miri")]
fn a_legitimate_client_beside_sixteen_addresses_of_its_own_prefix_completes() {
    // 16 addresses of A's own /24 (10.0.0.100 to 115), and of its /64.
    let v4: Vec<IpAddr> = (100..116)
        .map(|h| IpAddr::V4(Ipv4Addr::new(10, 0, 0, h)))
        .collect();
    completes_beside("16 addresses of A's /24", A_IP.into(), &v4, Requests::Whole);
    if cfg!(feature = "ipv6") {
        let v6: Vec<IpAddr> = (0x100..0x110)
            .map(|h| IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, h)))
            .collect();
        completes_beside("16 addresses of A's /64", A6.into(), &v6, Requests::Whole);
    }
}

#[test]
#[cfg_attr(miri, ignore = "seconds of virtual time: too slow under Miri")]
fn a_legitimate_client_beside_64_addresses_over_4_prefixes_completes() {
    let v4 = addresses(false, 1, 4, 16, 1);
    completes_beside(
        "64 addresses over 4 /24s",
        A_IP.into(),
        &v4,
        Requests::Whole,
    );
    if cfg!(feature = "ipv6") {
        let v6 = addresses(true, 1, 4, 16, 1);
        completes_beside("64 addresses over 4 /64s", A6.into(), &v6, Requests::Whole);
    }
}

#[test]
#[cfg_attr(miri, ignore = "seconds of virtual time: too slow under Miri")]
fn a_legitimate_client_beside_unfinished_requests_from_a_prefix_completes() {
    // Requests whose rest never comes are no answered RPCs: only the
    // prefix's share finds them. 16 addresses of another /24, of A's own
    // /24, and 64 over 4 /24s (each prefix at its share).
    let other = addresses(false, 1, 1, 16, 1);
    completes_beside(
        "16 addresses of a /24",
        A_IP.into(),
        &other,
        Requests::Unfinished,
    );
    let own: Vec<IpAddr> = (100..116)
        .map(|h| IpAddr::V4(Ipv4Addr::new(10, 0, 0, h)))
        .collect();
    completes_beside(
        "16 addresses of A's /24",
        A_IP.into(),
        &own,
        Requests::Unfinished,
    );
    let spread = addresses(false, 1, 4, 16, 1);
    completes_beside(
        "64 addresses over 4 /24s",
        A_IP.into(),
        &spread,
        Requests::Unfinished,
    );
}

/// Hosts on one switch, on a virtual clock: each frame reaches the host
/// its destination MAC names (a broadcast every other host) 2 us after it
/// was sent. Host `i` is at MAC 02:00:00:00:01:`i`.
struct Lan {
    now: Instant,
    hosts: Vec<(Endpoint<'static>, TestDevice)>,
    flight: VecDeque<(Instant, usize, Vec<u8>)>,
}

impl Lan {
    fn mac(i: usize) -> EthernetAddress {
        EthernetAddress([2, 0, 0, 0, 1, i as u8])
    }

    /// Delivers what arrived, polls every host, and sends what they sent.
    fn step(&mut self) {
        let now = self.now;
        while let Some(at) = self.flight.iter().position(|f| f.0 <= now) {
            let (_, to, f) = self.flight.remove(at).expect("found");
            self.hosts[to].1.rx.push_back(f);
        }
        let n = self.hosts.len();
        for from in 0..n {
            let (ep, dev) = &mut self.hosts[from];
            ep.poll(now, dev);
            while let Some((f, _)) = dev.tx.pop_front() {
                let arrive = now + Duration::from_micros(2);
                for to in 0..n {
                    let named = f[..6] == Self::mac(to).0 || f[..6] == frames::BROADCAST;
                    if to != from && named {
                        self.flight.push_back((arrive, to, f.clone()));
                    }
                }
            }
        }
    }

    /// Runs until `done` or `limit` of virtual time passes.
    fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&mut Lan) -> bool) -> bool {
        let end = self.now + limit;
        while self.now < end {
            self.step();
            if done(self) {
                return true;
            }
            let next = self.hosts.iter().filter_map(|(ep, _)| ep.poll_at());
            let next = next.chain(self.flight.iter().map(|f| f.0)).min();
            self.now = next.map_or(end, |t| t.max(self.now + Duration::from_nanos(1)).min(end));
        }
        false
    }
}

/// A server with 16 RPC slots and `clients` clients, each at `address(i)`,
/// each making `rpcs` 100-byte RPCs one after another; the server answers
/// each request `service` after it came. Every RPC's outcome (completed or
/// the error), and the server's stats.
fn clients_of_a_full_table(
    address: impl Fn(usize) -> Ipv4Addr,
    clients: usize,
    rpcs: usize,
    service: Duration,
) -> (usize, Vec<RpcError>, Stats) {
    let server = endpoint_with_peers(Config::new(B_IP, Lan::mac(0), SEED), 16, 64, 1 << 20);
    let mut hosts = vec![(server, TestDevice::default())];
    for i in 1..=clients {
        let ep = endpoint(address(i), Lan::mac(i), 4, 1 << 20);
        hosts.push((ep, TestDevice::default()));
    }
    let mut lan = Lan {
        now: Instant::from_millis(1),
        hosts,
        flight: VecDeque::new(),
    };
    let sock = lan.hosts[0].0.bind(500).unwrap();
    let socks: Vec<SocketHandle> = (1..=clients)
        .map(|i| lan.hosts[i].0.socket().unwrap())
        .collect();
    let (mut made, mut busy) = (vec![0; clients + 1], vec![false; clients + 1]);
    let (mut completed, mut failed) = (0, Vec::new());
    let mut held: VecDeque<(Instant, RpcHandle)> = VecDeque::new();
    lan.run_until(Duration::from_secs(5), |lan| {
        let now = lan.now;
        while let Some(Event::Request { rpc, .. }) = lan.hosts[0].0.recv(sock) {
            held.push_back((now + service, rpc));
        }
        while held.front().is_some_and(|&(at, _)| at <= now) {
            let (_, rpc) = held.pop_front().unwrap();
            // A request freed under the application (its client gave up)
            // cannot be answered; that is its client's failure, counted there.
            let _ = lan.hosts[0].0.reply(rpc, b"ok");
        }
        for i in 1..=clients {
            let ep = &mut lan.hosts[i].0;
            match ep.recv(socks[i - 1]) {
                Some(Event::Response { rpc, .. }) => {
                    completed += 1;
                    ep.release(rpc).unwrap();
                    busy[i] = false;
                }
                Some(Event::Failed { rpc, error }) => {
                    failed.push(error);
                    ep.release(rpc).unwrap();
                    busy[i] = false;
                }
                _ => {}
            }
            if !busy[i] && made[i] < rpcs {
                ep.send_request(socks[i - 1], B_IP, 500, &pattern(100, made[i] as u64))
                    .unwrap();
                (busy[i], made[i]) = (true, made[i] + 1);
            }
        }
        completed + failed.len() == clients * rpcs
    });
    (completed, failed, *lan.hosts[0].0.stats())
}

#[test]
#[cfg_attr(miri, ignore = "seconds of virtual time: too slow under Miri")]
fn a_rack_of_honest_clients_in_one_prefix_completes_at_a_full_table() {
    // 24 clients of one /24 and a 16-slot server: every RPC completes,
    // whether the server answers at once (the table fills with responses
    // waiting for ACKs) or holds each request 1 ms (it fills with
    // requests in service, which are never freed for another).
    let rack = |i: usize| Ipv4Addr::new(10, 1, 0, i as u8);
    for service in [Duration::ZERO, Duration::from_millis(1)] {
        let (completed, failed, st) = clients_of_a_full_table(rack, 24, 10, service);
        std::println!(
            "a rack of 24, served in {service}: {completed} of 240 completed, failed {failed:?}; \
             the server refused {} requests and freed {}",
            st.drops.rpc_table_full,
            st.server_evicted
        );
        assert_eq!(
            (completed, failed.as_slice()),
            (240, &[][..]),
            "service {service}"
        );
    }
}

#[test]
#[cfg_attr(miri, ignore = "many RPCs: slow under Miri")]
fn a_client_whose_response_was_freed_before_its_ack_restarts_and_completes() {
    // B (4 slots) answers A; the response is lost. C's requests, also
    // answered, fill the table, and the fourth frees A's RPC, the one that
    // has waited longest for its ACK. A's RESEND finds no RPC, B answers
    // RPC_UNKNOWN, A starts again, and its new request takes the slot of
    // C's oldest: A's RPC completes.
    let mut p = Pair::linked(4, 1 << 20);
    let mut dropped = false;
    p.filter = Box::new(move |_, to_b, f| {
        // Homa (IPv4 protocol at 23) DATA (its type at 34 + 11).
        let response = !to_b && f[23] == frames::HOMA && f[45] == 0x10;
        let drop = response && !dropped;
        dropped |= drop;
        !drop
    });
    let server = p.b.bind(500).unwrap();
    let client = p.a.socket().unwrap();
    let h = p.a.send_request(client, B_IP, 500, b"hello").unwrap();
    assert!(p.run_until(Duration::from_millis(2), |p| {
        match p.b.recv(server) {
            Some(Event::Request { rpc, .. }) => p.b.reply(rpc, b"world").is_ok(),
            _ => false,
        }
    }));
    p.run_until(Duration::from_micros(100), |_| false);
    let c = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3));
    for id in 1..=4 {
        p.db.rx.push_back(request(c, 2 * id, Requests::Whole));
    }
    let mut response = None;
    assert!(p.run_until(Duration::from_millis(100), |p| {
        while let Some(Event::Request { rpc, .. }) = p.b.recv(server) {
            p.b.reply(rpc, b"world").unwrap();
        }
        response = p.a.recv(client);
        response.is_some()
    }));
    assert_eq!(response, Some(Event::Response { rpc: h, len: 5 }));
    assert!(
        p.a.stats().rx.rpc_unknown >= 1,
        "A restarted\nA: {}\nB: {}",
        p.a.stats(),
        p.b.stats()
    );
    assert!(p.b.stats().server_evicted >= 2, "{}", p.b.stats());
}

#[test]
fn a_prefix_over_its_share_gives_way_where_each_address_alone_would_not() {
    // Eight addresses of 10.9.1.0/24 fill B's 8 slots with one unfinished
    // request each (an eighth of the table: within any share). A request
    // from A's /24 takes the slot of the prefix's oldest request; counted
    // by address alone (prefix length 32), no address holds more than A
    // would, and A's is refused. A ninth address of the flood's /24 is
    // refused either way: its prefix holds more than its share.
    let flood = addresses(false, 1, 1, 9, 1);
    for (prefix, evicted) in [(24, true), (32, false)] {
        let mut config = Config::new(B_IP, B_MAC, SEED);
        config.share_prefix_v4 = prefix;
        let mut ep = endpoint_with_peers(config, 8, 16, 1 << 20);
        let mut dev = TestDevice::default();
        let now = Instant::from_millis(1);
        ep.bind(500).unwrap();
        for (i, &src) in flood[..8].iter().enumerate() {
            dev.rx
                .push_back(request(src, 2 * i as u64 + 2, Requests::Unfinished));
        }
        ep.poll(now, &mut dev);
        assert_eq!(ep.rpcs_in_use(), 8);
        dev.rx
            .push_back(request(flood[8], 100, Requests::Unfinished));
        dev.rx
            .push_back(request(A_IP.into(), 2, Requests::Unfinished));
        ep.poll(now, &mut dev);
        let from_a = ep.rpc_info().any(|r| r.peer == IpAddr::V4(A_IP));
        let from_ninth = ep.rpc_info().any(|r| r.peer == flood[8]);
        assert_eq!((from_a, from_ninth), (evicted, false), "prefix /{prefix}");
        assert_eq!(ep.stats().server_evicted, u64::from(evicted));
        // The one freed was the prefix's oldest.
        assert_eq!(ep.rpc_info().any(|r| r.peer == flood[0]), !evicted);
    }
}
