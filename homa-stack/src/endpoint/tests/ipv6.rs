//! Homa over IPv6, and both families in one endpoint: RPCs of the boundary
//! sizes, neighbour discovery, ICMPv6 echo and port unreachable, extension
//! headers.

use super::*;
use crate::phy::testing::frames;
use crate::wire::{IpAddr, Ipv6Addr};

const A6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
const B6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);

fn dual(ip: Ipv4Addr, ip6: Ipv6Addr, mac: EthernetAddress) -> Config {
    let mut c = Config::new(ip, mac, SEED);
    c.ipv6 = true;
    c.ipv6_addrs[0] = Some(ip6);
    c
}

/// Two dual-stack endpoints that know nothing of each other: every link
/// address comes from ARP or neighbour discovery.
fn pair(rpcs: usize, pool: usize) -> Pair {
    Pair::new(
        endpoint_with(dual(A_IP, A6, A_MAC), rpcs, pool),
        endpoint_with(dual(B_IP, B6, B_MAC), rpcs, pool),
    )
}

/// Serves on B port 500 and runs A's requests `reqs` (to `dest`) to
/// completion; returns the responses in order and the peers B saw.
fn echo_all(p: &mut Pair, reqs: &[(IpAddr, Vec<u8>)]) -> (Vec<Vec<u8>>, Vec<IpAddr>) {
    let server = p.b.bind(500).unwrap_or(SocketHandle(0));
    let client = p.a.socket().unwrap();
    let handles: Vec<RpcHandle> = reqs
        .iter()
        .map(|(dest, data)| p.a.send_request(client, *dest, 500, data).unwrap())
        .collect();
    let mut resps: Vec<Option<Vec<u8>>> = vec![None; reqs.len()];
    let mut peers = Vec::new();
    let ok = p.run_until(Duration::from_secs(5), |p| {
        while let Some(Event::Request { rpc, len, peer, .. }) = p.b.recv(server) {
            peers.push(peer);
            let mut buf = vec![0; len];
            p.b.message(rpc).unwrap().copy_to(&mut buf);
            p.b.reply(rpc, &buf).unwrap();
        }
        while let Some(ev) = p.a.recv(client) {
            let Event::Response { rpc, len } = ev else {
                panic!("unexpected {ev:?}");
            };
            let i = handles.iter().position(|h| *h == rpc).unwrap();
            let mut buf = vec![0; len];
            p.a.message(rpc).unwrap().copy_to(&mut buf);
            p.a.release(rpc).unwrap();
            resps[i] = Some(buf);
        }
        resps.iter().all(Option::is_some)
    });
    assert!(
        ok,
        "RPCs did not complete\nA: {}\nB: {}",
        p.a.stats(),
        p.b.stats()
    );
    (resps.into_iter().map(Option::unwrap).collect(), peers)
}

#[test]
#[cfg_attr(miri, ignore = "moves megabytes: too slow under Miri")]
fn rpcs_of_every_boundary_size_over_ipv6() {
    // 1,404 payload bytes per packet over IPv6 at MTU 1500.
    for len in [
        1usize, 1403, 1404, 1405, 39_999, 40_000, 40_001, 100_000, 1_000_000,
    ] {
        let mut p = pair(8, 4 << 20);
        let req = pattern(len, len as u64);
        let (resps, peers) = echo_all(&mut p, &[(IpAddr::V6(B6), req.clone())]);
        assert_eq!(resps[0], req, "{len} bytes");
        assert_eq!(peers, [IpAddr::V6(A6)]);
        // Every frame is IPv6 (ND and Homa), none above the MTU, and full
        // DATA packets carry 1,404 bytes.
        let mut full = 0;
        for (_, _, f, prio) in &p.log {
            assert_eq!(&f[12..14], &[0x86, 0xdd], "an IPv4 or ARP frame");
            assert!(f.len() <= 1514);
            // Traffic class = priority << 5, as Linux sets it; Homa's hop
            // limit is 64.
            let tc = (f[14] & 0x0f) << 4 | f[15] >> 4;
            if f[20] == 146 {
                assert_eq!((tc >> 5, f[21]), (*prio, 64));
            }
            if f[20] == 146 && f.len() == 14 + 40 + 56 + 1404 {
                full += 1;
            }
        }
        assert_eq!(full > 0, len >= 1404, "{len} bytes");
        assert_eq!(p.a.stats().arp_requests + p.b.stats().arp_requests, 0);
        // A solicits once and learns B from the one answer. B fills A's
        // address in from A's checked DATA (the solicitation of a stranger
        // teaches nothing), which anyone could have sent, so B solicits
        // once too and A answers; B's solicitation names the address A
        // holds for it, counted as learned again.
        assert_eq!((p.a.stats().ndp_solicits, p.b.stats().ndp_adverts), (1, 1));
        assert_eq!((p.b.stats().ndp_solicits, p.a.stats().ndp_adverts), (1, 1));
        assert_eq!(p.a.stats().ndp_learned, 2);
        assert_eq!(
            (p.a.rpcs_in_use(), p.a.pool_free_bytes()),
            (0, p.a.pool_capacity_bytes())
        );
    }
}

#[test]
#[cfg_attr(miri, ignore = "moves 100 KB: minutes under Miri")]
fn both_families_at_once_share_one_endpoint() {
    let mut p = pair(16, 4 << 20);
    let reqs: Vec<(IpAddr, Vec<u8>)> = (0..8)
        .map(|i| {
            let dest = if i % 2 == 0 {
                IpAddr::V4(B_IP)
            } else {
                IpAddr::V6(B6)
            };
            (dest, pattern(3000 * (i + 1), i as u64))
        })
        .collect();
    let (resps, peers) = echo_all(&mut p, &reqs);
    for ((_, req), resp) in reqs.iter().zip(&resps) {
        assert_eq!(req, resp);
    }
    assert_eq!(peers.iter().filter(|a| a.is_ipv4()).count(), 4);
    assert_eq!(peers.iter().filter(|a| a.is_ipv6()).count(), 4);
    // One peer entry per family on each side, both resolved: A's each by
    // one answer to one question; B's each filled in from A's request and
    // asked about once (B's question names the address A holds, counted
    // by A as learned again).
    let (a, b) = (p.a.stats(), p.b.stats());
    assert_eq!((b.arp_requests, b.ndp_solicits), (1, 1));
    assert_eq!((a.arp_learned, a.ndp_learned), (2, 2));
}

#[test]
fn the_link_local_address_comes_from_the_mac_and_carries_rpcs() {
    let c = dual(A_IP, A6, A_MAC);
    // 02:00:00:00:00:01 -> fe80::0000:00ff:fe00:0001 (the U/L bit flipped).
    assert_eq!(c.link_local_v6(), Some("fe80::ff:fe00:1".parse().unwrap()));
    let mut p = pair(8, 1 << 20);
    let b_ll = p.b.config().link_local_v6().unwrap();
    let (resps, peers) = echo_all(&mut p, &[(IpAddr::V6(b_ll), pattern(5000, 1))]);
    assert_eq!(resps[0], pattern(5000, 1));
    // A answers from its link-local address to a link-local peer.
    assert_eq!(peers, [IpAddr::V6(p.a.config().link_local_v6().unwrap())]);
}

#[test]
fn an_ipv4_only_endpoint_refuses_ipv6_destinations() {
    let mut ep = endpoint(A_IP, A_MAC, 4, 1 << 16);
    let s = ep.socket().unwrap();
    assert_eq!(
        ep.send_request(s, B6, 500, b"x"),
        Err(SendError::InvalidDestination)
    );
}

#[test]
fn a_request_to_a_closed_port_over_ipv6_fails_with_port_unreachable() {
    closed_port_fails(&mut pair(4, 1 << 20), IpAddr::V6(B6));
}

/// An ICMPv6 message from `src` (at `mac`) to `dst`, checksummed.
fn icmpv6_frame(
    mac: EthernetAddress,
    dst_mac: EthernetAddress,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    hop_limit: u8,
    repr: &crate::wire::Icmpv6Repr<'_>,
) -> Vec<u8> {
    let mut body = vec![0u8; repr.buffer_len()];
    repr.emit(
        &src,
        &dst,
        &mut crate::wire::Icmpv6Packet::new_unchecked(&mut body[..]),
        true,
    );
    let ip = frames::ipv6(src, dst, 58, 0, hop_limit, &body);
    frames::ethernet(mac.0, dst_mac.0, None, 0x86dd, &ip)
}

/// Feeds `frame` to endpoint B and returns what it sent.
fn into_b(p: &mut Pair, frame: Vec<u8>) -> Vec<Vec<u8>> {
    p.db.rx.push_back(frame);
    let now = p.now;
    p.b.poll(now, &mut p.db);
    p.db.tx.drain(..).map(|(f, _)| f).collect()
}

/// The ICMPv6 message in an IPv6 frame.
fn icmpv6_of(f: &[u8]) -> crate::wire::Icmpv6Repr<'_> {
    let ip = crate::wire::Ipv6Packet::new_checked(&f[14..]).unwrap();
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    assert_eq!(ip.next_header(), crate::wire::IpProtocol::Icmpv6);
    let body = &f[54..54 + usize::from(ip.payload_len())];
    crate::wire::Icmpv6Repr::parse(
        &src,
        &dst,
        &crate::wire::Icmpv6Packet::new_checked(body).unwrap(),
        true,
    )
    .unwrap()
}

#[test]
fn ping6_gets_an_echo_reply() {
    use crate::wire::Icmpv6Repr;
    let mut p = pair(4, 1 << 16);
    let req = Icmpv6Repr::EchoRequest {
        ident: 7,
        seq_no: 9,
        data: b"ping6",
    };
    let out = into_b(&mut p, icmpv6_frame(A_MAC, B_MAC, A6, B6, 64, &req));
    assert_eq!(out.len(), 1);
    assert_eq!(&out[0][0..6], &A_MAC.0);
    assert_eq!(
        icmpv6_of(&out[0]),
        Icmpv6Repr::EchoReply {
            ident: 7,
            seq_no: 9,
            data: b"ping6"
        }
    );
    assert_eq!(p.b.stats().icmp_echo_replies, 1);
    // Counted once, as sent (the fuzzer found it counted twice); hop limit
    // 64 as Linux's replies (255 is for neighbour discovery only).
    assert_eq!(p.b.stats().tx_frames, 1);
    assert_eq!(out[0][21], 64);
    // From a group address, it is dropped as malformed, as over IPv4.
    let group = EthernetAddress([0x33, 0x33, 0, 0, 0, 1]);
    let out = into_b(&mut p, icmpv6_frame(group, B_MAC, A6, B6, 64, &req));
    assert!(out.is_empty());
    assert_eq!(p.b.stats().drops.malformed, 1);
}

#[test]
fn ipv6_packets_from_our_own_address_are_dropped() {
    // As over IPv4: a ping or a request claiming to come from us is no
    // other host's, and gets no answer or RPC.
    use crate::wire::Icmpv6Repr;
    let mut p = pair(4, 1 << 16);
    let _ = p.b.bind(500).unwrap();
    let req = Icmpv6Repr::EchoRequest {
        ident: 7,
        seq_no: 9,
        data: b"ping6",
    };
    assert!(into_b(&mut p, icmpv6_frame(A_MAC, B_MAC, B6, B6, 64, &req)).is_empty());
    let body = one_packet_request();
    let ip = frames::ipv6(B6, B6, 146, 0, 64, &body);
    let frame = frames::ethernet(A_MAC.0, B_MAC.0, None, 0x86dd, &ip);
    assert!(into_b(&mut p, frame).is_empty());
    assert_eq!(p.b.rpcs_in_use(), 0);
    assert_eq!(p.b.stats().drops.malformed, 2);
}

#[test]
fn icmpv6_types_not_handled_are_counted_as_such() {
    // Router advertisements and MLD queries reach every host (all nodes):
    // well-formed, they are not handled, not malformed; with a bad
    // checksum, malformed.
    let mut p = pair(4, 1 << 16);
    let all = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
    let router = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 9);
    let all_mac = super::super::host::ipv6::multicast_mac(all);
    for (ty, good) in [(134u8, true), (130, true), (134, false)] {
        let mut body = vec![0u8; 24];
        body[0] = ty;
        let mut icmp = crate::wire::Icmpv6Packet::new_unchecked(&mut body[..]);
        icmp.fill_checksum(&router, &all);
        if !good {
            body[10] ^= 1;
        }
        let ip = frames::ipv6(router, all, 58, 0, 255, &body);
        let frame = frames::ethernet(A_MAC.0, all_mac.0, None, 0x86dd, &ip);
        assert!(into_b(&mut p, frame).is_empty());
    }
    let d = p.b.stats().drops;
    assert_eq!((d.not_handled, d.malformed), (2, 1), "{d:?}");
}

#[test]
fn neighbour_solicitations_for_our_addresses_are_answered() {
    use crate::wire::Icmpv6Repr;
    let mut p = pair(4, 1 << 16);
    let group = super::super::host::ipv6::solicited_node(B6);
    let group_mac = super::super::host::ipv6::multicast_mac(group);
    let ns = Icmpv6Repr::NeighborSolicit {
        target_addr: B6,
        lladdr: Some(A_MAC),
    };
    let out = into_b(&mut p, icmpv6_frame(A_MAC, group_mac, A6, group, 255, &ns));
    assert_eq!(out.len(), 1, "a solicited advertisement");
    assert_eq!(&out[0][0..6], &A_MAC.0);
    assert_eq!(out[0][21], 255, "hop limit 255");
    assert_eq!(
        icmpv6_of(&out[0]),
        Icmpv6Repr::NeighborAdvert {
            router: false,
            solicited: true,
            override_: true,
            target_addr: B6,
            lladdr: Some(B_MAC),
        }
    );
    // Duplicate address detection by another node (from ::): answered to
    // all nodes, not solicited, and nothing is learned of "::".
    let dad = Icmpv6Repr::NeighborSolicit {
        target_addr: B6,
        lladdr: None,
    };
    let out = into_b(
        &mut p,
        icmpv6_frame(A_MAC, group_mac, Ipv6Addr::UNSPECIFIED, group, 255, &dad),
    );
    assert_eq!(out.len(), 1);
    assert_eq!(&out[0][0..6], &[0x33, 0x33, 0, 0, 0, 1]);
    assert!(matches!(
        icmpv6_of(&out[0]),
        Icmpv6Repr::NeighborAdvert { solicited: false, target_addr, .. } if target_addr == B6
    ));
    // Another node's address, a hop limit below 255: no answer, counted.
    let other = Icmpv6Repr::NeighborSolicit {
        target_addr: A6,
        lladdr: Some(A_MAC),
    };
    let drops = p.b.stats().drops.total();
    assert!(into_b(
        &mut p,
        icmpv6_frame(A_MAC, group_mac, A6, group, 255, &other)
    )
    .is_empty());
    assert!(into_b(&mut p, icmpv6_frame(A_MAC, group_mac, A6, group, 64, &ns)).is_empty());
    assert_eq!(p.b.stats().drops.total(), drops + 2);
    // Strangers take no peer entry from neighbour discovery.
    assert_eq!(p.b.peers_in_use(), 0);
}

#[test]
fn advertisements_from_strangers_and_homa_to_a_group_are_counted() {
    // A neighbour advertisement for an address we hold no peer for teaches
    // nothing (unknown peer); Homa to a multicast group is not for us.
    use crate::wire::Icmpv6Repr;
    let mut p = pair(4, 1 << 16);
    let _ = p.b.bind(500).unwrap();
    let all: Ipv6Addr = "ff02::1".parse().unwrap();
    let all_mac = super::super::host::ipv6::multicast_mac(all);
    for (solicited, dst, dst_mac) in [(true, B6, B_MAC), (false, all, all_mac)] {
        let na = Icmpv6Repr::NeighborAdvert {
            router: false,
            solicited,
            override_: true,
            target_addr: A6,
            lladdr: Some(A_MAC),
        };
        assert!(into_b(&mut p, icmpv6_frame(A_MAC, dst_mac, A6, dst, 255, &na)).is_empty());
    }
    let body = one_packet_request();
    let ip = frames::ipv6(A6, all, 146, 0, 64, &body);
    let frame = frames::ethernet(A_MAC.0, all_mac.0, None, 0x86dd, &ip);
    assert!(into_b(&mut p, frame).is_empty());
    assert_eq!(p.b.peers_in_use(), 0);
    let d = p.b.stats().drops;
    assert_eq!(
        (d.unknown_peer, d.not_for_us, d.total()),
        (2, 1, 3),
        "{d:?}"
    );
}

#[test]
fn advertisements_must_name_their_frames_source_and_answer_us() {
    use crate::wire::Icmpv6Repr;
    // A holds B6 as a peer (a request waits for it).
    let mut p = pair(4, 1 << 16);
    let c = p.a.socket().unwrap();
    p.a.send_request(c, B6, 500, b"x").unwrap();
    let evil = EthernetAddress([2, 0, 0, 0, 0, 0x66]);
    let na = |mac, solicited| Icmpv6Repr::NeighborAdvert {
        router: false,
        solicited,
        override_: true,
        target_addr: B6,
        lladdr: Some(mac),
    };
    let all: Ipv6Addr = "ff02::1".parse().unwrap();
    let all_mac = super::super::host::ipv6::multicast_mac(all);
    let now = p.now;
    // From another MAC than it advertises: dropped, nothing learned.
    p.da.rx
        .push_back(icmpv6_frame(evil, A_MAC, B6, A6, 255, &na(B_MAC, true)));
    p.a.poll(now, &mut p.da);
    assert_eq!(p.a.stats().ndp_learned, 0);
    // A asks B itself, once, for the waiting request.
    assert_eq!(p.a.stats().ndp_solicits, 1);
    // Unsolicited, to all nodes: not learned; A asked at this instant
    // already, and a doubt asks again no sooner than the retry interval.
    p.da.tx.clear();
    p.da.rx
        .push_back(icmpv6_frame(evil, all_mac, B6, all, 255, &na(evil, false)));
    p.a.poll(now, &mut p.da);
    assert_eq!(p.a.stats().ndp_learned, 0);
    assert_eq!(p.a.stats().ndp_solicits, 1);
    // An answer to us from the MAC it advertises: learned.
    p.da.rx
        .push_back(icmpv6_frame(B_MAC, A_MAC, B6, A6, 255, &na(B_MAC, true)));
    p.a.poll(now, &mut p.da);
    assert_eq!(p.a.stats().ndp_learned, 1);
}

/// B's second global address (beside `B6`).
const SECOND: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 0xb);

/// The dual-stack pair, B holding `SECOND` too.
fn b_with_second_address(rpcs: usize, pool: usize) -> Pair {
    let mut cfg = dual(B_IP, B6, B_MAC);
    cfg.ipv6_addrs[1] = Some(SECOND);
    Pair::new(
        endpoint_with(dual(A_IP, A6, A_MAC), rpcs, pool),
        endpoint_with(cfg, rpcs, pool),
    )
}

#[test]
fn echo_replies_come_from_the_address_pinged_and_none_go_to_the_unspecified() {
    use crate::wire::Icmpv6Repr;
    let mut p = b_with_second_address(4, 1 << 16);
    let req = Icmpv6Repr::EchoRequest {
        ident: 1,
        seq_no: 2,
        data: b"x",
    };
    let out = into_b(&mut p, icmpv6_frame(A_MAC, B_MAC, A6, SECOND, 64, &req));
    assert_eq!(out.len(), 1);
    assert_eq!(
        &out[0][22..38],
        &SECOND.octets(),
        "source = the address pinged"
    );
    // From `::` (only duplicate address detection may use it): no answer,
    // no peer entry.
    let out = into_b(
        &mut p,
        icmpv6_frame(A_MAC, B_MAC, Ipv6Addr::UNSPECIFIED, B6, 64, &req),
    );
    assert!(out.is_empty());
    assert_eq!((p.b.rpcs_in_use(), p.b.peers_in_use()), (0, 0));
}

#[test]
fn a_server_with_two_addresses_answers_from_the_one_asked() {
    // B holds B6 and SECOND; A asks at SECOND. A matches answers by
    // address, so every Homa packet of B's (DATA, and GRANTs for the long
    // request) must come from SECOND.
    let mut p = b_with_second_address(8, 1 << 20);
    let reqs: Vec<(IpAddr, Vec<u8>)> = [100usize, 60_000]
        .iter()
        .map(|&n| (IpAddr::V6(SECOND), pattern(n, n as u64)))
        .collect();
    let (resps, peers) = echo_all(&mut p, &reqs);
    for ((_, req), resp) in reqs.iter().zip(&resps) {
        assert_eq!(req, resp);
    }
    assert!(peers.iter().all(|&a| a == IpAddr::V6(A6)));
    let from_b: Vec<&Vec<u8>> = p
        .log
        .iter()
        .filter(|(_, to_b, f, _)| {
            !*to_b && f.len() > 54 && f[12..14] == [0x86, 0xdd] && f[20] == 146
        })
        .map(|(_, _, f, _)| f)
        .collect();
    let kinds: Vec<homa::PacketType> = from_b
        .iter()
        .map(|f| homa::Packet::new_checked(&f[54..]).unwrap().packet_type())
        .collect();
    assert!(kinds.contains(&homa::PacketType::Data), "{kinds:?}");
    assert!(kinds.contains(&homa::PacketType::Grant), "{kinds:?}");
    for f in from_b {
        assert_eq!(&f[22..38], &SECOND.octets(), "B's Homa source address");
    }
}

/// The Homa body of a one-packet, 4-byte request to port 500.
fn one_packet_request() -> Vec<u8> {
    let data = homa::Repr {
        sport: 40_000,
        dport: 500,
        sender_id: 2,
        kind: homa::Kind::Data {
            header: homa::DataHeader {
                message_length: 4,
                incoming: 4,
                ack: None,
                cutoff_version: 0,
                retransmit: false,
                offset: 0,
            },
            payload: b"ping",
        },
    };
    let mut body = vec![0; data.buffer_len()];
    data.emit(&mut homa::Packet::new_unchecked(&mut body[..]));
    body
}

/// A's link address for B6.
fn b6_link(p: &Pair) -> Option<EthernetAddress> {
    let i = p.a.find_peer(IpAddr::V6(B6)).unwrap();
    p.a.peers[usize::from(i)].peer.as_ref().unwrap().nbr.mac()
}

#[test]
fn an_advertisement_without_override_does_not_replace_a_known_address() {
    // RFC 4861 7.2.5: a solicited advertisement without the override flag
    // fills a missing link address but must not replace a different known
    // one (an anycast or proxy answer, or a forger racing the owner).
    use crate::wire::Icmpv6Repr;
    let mut p = pair(4, 1 << 16);
    let c = p.a.socket().unwrap();
    p.a.send_request(c, B6, 500, b"x").unwrap();
    let evil = EthernetAddress([2, 0, 0, 0, 0, 0x66]);
    let na = |mac, override_| Icmpv6Repr::NeighborAdvert {
        router: false,
        solicited: true,
        override_,
        target_addr: B6,
        lladdr: Some(mac),
    };
    let now = p.now;
    let advertise = |p: &mut Pair, mac: EthernetAddress, override_: bool| {
        p.da.rx
            .push_back(icmpv6_frame(mac, A_MAC, B6, A6, 255, &na(mac, override_)));
        p.a.poll(now, &mut p.da);
        p.da.tx.clear();
    };
    // No address known yet: one without the flag is learned (unasked: A
    // asks about it at once).
    advertise(&mut p, B_MAC, false);
    assert_eq!(b6_link(&p), Some(B_MAC));
    // Another address without the flag: kept as it was, counted.
    advertise(&mut p, evil, false);
    assert_eq!(b6_link(&p), Some(B_MAC), "replaced without override");
    assert_eq!(p.a.stats().drops.no_override, 1);
    // Another one with it, answering A's question: applied; then the same
    // address without the flag: no drop.
    advertise(&mut p, evil, true);
    assert_eq!(b6_link(&p), Some(evil));
    advertise(&mut p, evil, false);
    assert_eq!(p.a.stats().drops.no_override, 1);
    assert_eq!(p.a.stats().ndp_learned, 3);
    // A second voice with the flag, answering nothing, before the next
    // question may go: the first answer stands (see `neighbour`).
    advertise(&mut p, B_MAC, true);
    assert_eq!(b6_link(&p), Some(evil));
    assert_eq!(p.a.stats().link_addr_claims_refused, 1);
}

// A forged neighbour solicitation, or a solicited advertisement with the
// override flag, must not rewrite a known neighbour (see `peer`).

/// A forged solicitation for A6 from B6 at `EVIL`, to A6's group.
fn forged_solicitation() -> Vec<u8> {
    use super::super::host::ipv6::{multicast_mac, solicited_node};
    let group = solicited_node(A6);
    let ns = crate::wire::Icmpv6Repr::NeighborSolicit {
        target_addr: A6,
        lladdr: Some(EVIL),
    };
    icmpv6_frame(EVIL, multicast_mac(group), B6, group, 255, &ns)
}

/// A forged solicited advertisement with the override flag: B6 is at `EVIL`.
fn forged_override_advert() -> Vec<u8> {
    let na = crate::wire::Icmpv6Repr::NeighborAdvert {
        router: false,
        solicited: true,
        override_: true,
        target_addr: B6,
        lladdr: Some(EVIL),
    };
    icmpv6_frame(EVIL, A_MAC, B6, A6, 255, &na)
}

const EVIL: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0x66]);

#[test]
#[cfg_attr(miri, ignore = "moves megabytes: too slow under Miri")]
fn forged_solicitations_and_adverts_do_not_replace_a_neighbour_the_application_set() {
    use super::hostile::forgeries_redirect_nothing;
    for forged in [forged_solicitation(), forged_override_advert()] {
        let mut p = pair(8, 1 << 20);
        p.a.add_neighbor(p.now, B6, B_MAC).unwrap();
        p.b.add_neighbor(p.now, A6, A_MAC).unwrap();
        let run = forgeries_redirect_nothing(&mut p, B6.into(), forged);
        assert!(run.probes_to.is_empty(), "{:?}", run.probes_to);
    }
}

#[test]
#[cfg_attr(miri, ignore = "moves megabytes: too slow under Miri")]
fn forged_solicitations_and_adverts_do_not_replace_a_confirmed_neighbour() {
    use super::hostile::{forgeries_redirect_nothing, probed_by_unicast_at_a_bounded_rate};
    for forged in [forged_solicitation(), forged_override_advert()] {
        let mut p = pair(8, 1 << 20);
        echo_all(&mut p, &[(B6.into(), pattern(100, 1))]);
        let run = forgeries_redirect_nothing(&mut p, B6.into(), forged);
        probed_by_unicast_at_a_bounded_rate(&run);
    }
}

#[test]
#[cfg_attr(miri, ignore = "moves megabytes: too slow under Miri")]
fn a_slow_peer_is_not_probed_during_1_mb_transfers_over_ipv6() {
    let mut p = pair(8, 4 << 20);
    let rate = super::hostile::probes_during_1_mb_transfers(&mut p, B6.into());
    std::println!("neighbour solicitations per second over IPv6, A and B: {rate:?}");
}
