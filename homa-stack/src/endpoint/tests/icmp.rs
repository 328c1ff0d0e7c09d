//! ICMP and ICMPv6 errors about our Homa packets, as a forger would send
//! them: from any address, naming the client's (predictable) port. Only an
//! error whose quote names a live RPC (its id and both ports) is acted on;
//! net, host and address unreachable are soft (noted, the silence timeout
//! decides), fragmentation needed is a hint, and a port (or protocol)
//! unreachable ends only the RPC it names.

use super::*;
use crate::phy::testing::frames;
use crate::wire::homa::{DataHeader, Kind, Repr};
use crate::wire::IpAddr;

const EVIL_IP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 66);
const EVIL_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0x66]);
/// RPCs A has outstanding to B in each scene.
const RPCS: usize = 4;

/// A's RPCs to B's port 500, which B's application holds unanswered.
struct Scene {
    p: Pair,
    client: SocketHandle,
    handles: Vec<RpcHandle>,
    held: Vec<RpcHandle>,
    /// A's client port and the ids of its RPCs, as they are on the wire.
    port: u16,
    ids: Vec<u64>,
}

/// What became of A's RPCs: how many completed, and the failures.
#[derive(Debug, Default)]
struct Outcome {
    completed: usize,
    failed: Vec<(RpcHandle, RpcError, Instant)>,
}

impl Scene {
    /// A has sent [`RPCS`] requests to B (over IPv6 with `v6`), which B's
    /// application took and holds.
    fn new(p: Pair, dest: IpAddr) -> Scene {
        let mut p = p;
        let server = p.b.bind(500).unwrap();
        let client = p.a.socket().unwrap();
        let handles: Vec<RpcHandle> = (0..RPCS)
            .map(|i| {
                p.a.send_request(client, dest, 500, &pattern(100, i as u64))
                    .unwrap()
            })
            .collect();
        let mut held = Vec::new();
        assert!(p.run_until(Duration::from_millis(20), |p| {
            while let Some(Event::Request { rpc, .. }) = p.b.recv(server) {
                held.push(rpc);
            }
            held.len() == RPCS
        }));
        // The client's port and ids, read off the wire as a forger would.
        let (mut port, mut ids) = (0, Vec::new());
        for (_, to_b, f, _) in &p.log {
            let Some(homa) = homa_of(f).filter(|_| *to_b) else {
                continue;
            };
            let h = homa::Packet::new_unchecked(homa);
            port = h.sport();
            if !ids.contains(&h.sender_id()) {
                ids.push(h.sender_id());
            }
        }
        assert_eq!(ids.len(), RPCS);
        Scene {
            p,
            client,
            handles,
            held,
            port,
            ids,
        }
    }

    /// Feeds `frames` to A at once.
    fn inject(&mut self, frames: impl IntoIterator<Item = Vec<u8>>) {
        self.p.da.rx.extend(frames);
        let now = self.p.now;
        while !self.p.da.rx.is_empty() {
            self.p.a.poll(now, &mut self.p.da);
        }
    }

    /// Lets 2 ms pass (well past the 1 ms in which a forged error used to
    /// end RPCs), then B answers every request and the scene runs until
    /// each RPC has ended (or 1 s).
    fn finish(mut self) -> (Outcome, Pair) {
        let mut out = Outcome::default();
        let client = self.client;
        let collect = |p: &mut Pair, out: &mut Outcome| {
            while let Some(ev) = p.a.recv(client) {
                match ev {
                    Event::Response { rpc, .. } => {
                        out.completed += 1;
                        p.a.release(rpc).unwrap();
                    }
                    Event::Failed { rpc, error } => {
                        out.failed.push((rpc, error, p.now));
                        p.a.release(rpc).unwrap();
                    }
                    Event::Request { .. } => unreachable!("a client socket gets no requests"),
                }
            }
        };
        self.p.run_until(Duration::from_millis(2), |p| {
            collect(p, &mut out);
            false
        });
        for rpc in self.held.drain(..) {
            // An RPC B no longer holds (its client failed and said so) is fine.
            let _ = self.p.b.reply(rpc, b"ok");
        }
        self.p.run_until(Duration::from_secs(1), |p| {
            collect(p, &mut out);
            out.completed + out.failed.len() == RPCS
        });
        (out, self.p)
    }
}

/// The Homa packet in an IPv4 or IPv6 frame, if it carries one.
fn homa_of(f: &[u8]) -> Option<&[u8]> {
    match u16::from_be_bytes([f[12], f[13]]) {
        frames::IPV4 if f[23] == frames::HOMA => Some(&f[34..]),
        frames::IPV6 if f[20] == frames::HOMA => Some(&f[54..]),
        _ => None,
    }
}

/// The first `len` bytes of a DATA packet from our `sport` to `dport`
/// carrying `sender_id`: what an ICMP error quotes of it.
fn quote(sport: u16, dport: u16, sender_id: u64, len: usize) -> Vec<u8> {
    let repr = Repr {
        sport,
        dport,
        sender_id,
        kind: Kind::Data {
            header: DataHeader {
                message_length: 100,
                incoming: 100,
                ack: None,
                cutoff_version: 0,
                retransmit: false,
                offset: 0,
            },
            payload: &[0x5a; 100],
        },
    };
    let mut body = vec![0; repr.buffer_len()];
    repr.emit(&mut homa::Packet::new_unchecked(&mut body[..]));
    body.truncate(len);
    body
}

/// An ICMP destination unreachable with `code` from the forger to A,
/// quoting an IPv4 header from A to B and the bytes `quoted`; built byte
/// by byte, so it may quote what no emitter would.
fn icmp4_error(code: u8, quoted: &[u8]) -> Vec<u8> {
    let mut icmp = vec![3, code, 0, 0, 0, 0, 0, 0];
    icmp.extend_from_slice(&frames::ipv4_header(A_IP, B_IP, frames::HOMA, 0, 156));
    icmp.extend_from_slice(quoted);
    let sum = frames::checksum(&icmp);
    icmp[2..4].copy_from_slice(&sum.to_be_bytes());
    let ip = frames::ipv4(EVIL_IP, A_IP, frames::ICMP, 0, &icmp);
    frames::ethernet(EVIL_MAC.0, A_MAC.0, None, frames::IPV4, &ip)
}

/// Every IPv4 destination-unreachable code, net (0) to precedence
/// cutoff (15).
const ALL_CODES: [u8; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];

/// A's unfinished RPCs to B outlive one forged error of each of `codes`
/// whose quote is `quoted(scene)`; what A counted of each, by reason.
fn survive_each_code_v4(
    codes: &[u8],
    quoted: impl Fn(&Scene) -> Vec<u8>,
) -> Vec<crate::stats::Stats> {
    codes
        .iter()
        .map(|&code| {
            let mut s = Scene::new(Pair::linked(16, 1 << 20), B_IP.into());
            let q = quoted(&s);
            s.inject([icmp4_error(code, &q)]);
            let (out, p) = s.finish();
            assert_eq!(
                (out.completed, out.failed.as_slice()),
                (RPCS, &[][..]),
                "code {code}: {out:?}"
            );
            *p.a.stats()
        })
        .collect()
}

#[test]
#[cfg_attr(miri, ignore = "sixteen scenes: slow under Miri")]
fn one_forged_icmp_error_naming_an_unused_id_ends_no_rpc() {
    // The client's port and B's port are right; the id was never used.
    let stats = survive_each_code_v4(&ALL_CODES, |s| quote(s.port, 500, s.ids[RPCS - 1] + 2, 28));
    for (code, st) in stats.iter().enumerate() {
        let ig = st.icmp_ignored;
        if code == 4 {
            assert_eq!(ig.path_mtu, 1, "code 4 is a path-MTU hint");
        } else {
            assert_eq!(ig.unknown_rpc, 1, "code {code}: {ig:?}");
        }
    }
}

#[test]
#[cfg_attr(miri, ignore = "many scenes: slow under Miri")]
fn forged_errors_with_a_right_id_and_a_wrong_port_end_no_rpc() {
    // The right id, with B's port or ours wrong, or the two swapped (as
    // if A were B's client on B's port).
    let stats = [
        survive_each_code_v4(&ALL_CODES, |s| quote(s.port, 501, s.ids[0], 28)),
        survive_each_code_v4(&ALL_CODES, |s| quote(s.port ^ 1, 500, s.ids[0], 28)),
        survive_each_code_v4(&ALL_CODES, |s| quote(500, s.port, s.ids[0], 28)),
    ];
    for st in stats.iter().flatten() {
        let ig = st.icmp_ignored;
        assert_eq!(ig.unknown_rpc + ig.path_mtu, 1, "{ig:?}");
    }
}

#[test]
#[cfg_attr(miri, ignore = "many scenes: slow under Miri")]
fn quotes_too_short_to_carry_the_id_end_no_rpc() {
    // The RFC 792 minimum (8 bytes: the ports), and one byte short of the
    // id's end: neither names an RPC, whatever its ports.
    let stats: Vec<_> = [8, 4, 20, 27, 0]
        .into_iter()
        .map(|len| {
            let stats = survive_each_code_v4(&ALL_CODES, |s| quote(s.port, 500, s.ids[0], len));
            (len, stats)
        })
        .collect();
    for (len, stats) in stats {
        for (code, st) in stats.iter().enumerate() {
            let ig = st.icmp_ignored;
            assert_eq!(
                ig.short_quote + ig.path_mtu,
                1,
                "{len} bytes, code {code}: {ig:?}"
            );
        }
    }
}

#[test]
#[cfg_attr(miri, ignore = "many scenes: slow under Miri")]
fn soft_errors_naming_a_live_rpc_are_noted_and_the_timeout_decides() {
    // Net (0), host (1), source route (5), unknown net (6) and host (7),
    // isolated (8), prohibited (9, 10, 13), for the type of service (11,
    // 12), precedence (14, 15): soft (RFC 1122 4.2.3.9, RFC 5927). The RPC
    // they name completes once B answers; fragmentation needed (4) is a
    // path-MTU hint and ends nothing either.
    let codes = [0u8, 1, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];
    let stats = survive_each_code_v4(&codes, |s| quote(s.port, 500, s.ids[0], 56));
    for (&code, st) in codes.iter().zip(&stats) {
        let ig = st.icmp_ignored;
        let (noted, hint) = if code == 4 { (0, 1) } else { (1, 0) };
        assert_eq!((ig.soft, ig.path_mtu), (noted, hint), "code {code}");
    }
    // When B is really gone, the RPC named by the host unreachable fails
    // at the silence timeout (100 ms from B's last packet), as peer
    // unreachable; the others at the same tick, as timed out.
    let mut s = Scene::new(Pair::linked(16, 1 << 20), B_IP.into());
    let start = s.p.now;
    let named = s.handles[0];
    let q = quote(s.port, 500, s.ids[0], 56);
    s.inject([icmp4_error(1, &q)]);
    s.p.b_gone = true;
    s.held.clear();
    let (out, _) = s.finish();
    assert_eq!(out.completed, 0);
    assert_eq!(out.failed.len(), RPCS);
    for &(rpc, error, at) in &out.failed {
        let want = if rpc == named {
            RpcError::PeerUnreachable
        } else {
            RpcError::TimedOut
        };
        assert_eq!(error, want);
        assert!(at >= start + Duration::from_millis(90), "failed at {at}");
        assert_eq!(at, out.failed[0].2);
    }
}

#[test]
#[cfg_attr(miri, ignore = "several scenes: slow under Miri")]
fn port_or_protocol_unreachable_naming_a_live_rpc_fails_it_alone() {
    for (code, error) in [
        (3, RpcError::PortUnreachable),
        (2, RpcError::PeerUnreachable),
    ] {
        let mut s = Scene::new(Pair::linked(16, 1 << 20), B_IP.into());
        let named = s.handles[1];
        let q = quote(s.port, 500, s.ids[1], 28);
        s.inject([icmp4_error(code, &q)]);
        let (out, _) = s.finish();
        assert_eq!(out.completed, RPCS - 1, "code {code}: {out:?}");
        assert_eq!(out.failed.len(), 1);
        assert_eq!((out.failed[0].0, out.failed[0].1), (named, error));
    }
}

#[test]
#[cfg_attr(miri, ignore = "ten thousand frames: slow under Miri")]
fn a_flood_of_forged_errors_ends_no_rpc_and_costs_a_lookup_each() {
    // 10,000 errors of every code in one poll, with our ports right and
    // ids guessed: client ids (even, as A's are) near A's and server ids
    // (odd), which are looked up in the index.
    let mut s = Scene::new(Pair::linked(16, 1 << 20), B_IP.into());
    let (port, base) = (s.port, s.ids[0]);
    let _ = s.p.a.take_index_work();
    let flood = (0..10_000u64).map(|i| {
        let id = if i % 2 == 0 {
            base.wrapping_add(2 * (i + 64))
        } else {
            base ^ (i << 8) | 1
        };
        icmp4_error((i % 16) as u8, &quote(port, 500, id, 28))
    });
    s.inject(flood);
    let work = s.p.a.take_index_work();
    let (out, p) = s.finish();
    std::println!("10,000 forged errors: {out:?}; index work {work:?}");
    assert_eq!((out.completed, out.failed.len()), (RPCS, 0), "{out:?}");
    let st = *p.a.stats();
    let ig = st.icmp_ignored;
    assert_eq!(st.icmp_unreachable_received, 10_000);
    assert_eq!(ig.unknown_rpc + ig.path_mtu, 10_000, "{ig:?}");
    // A lookup each: the server ids in the index, the client ids by the
    // slot they name; no lookup walks more than a short chain.
    assert!(work.lookups <= 5_000 && work.longest <= 4, "{work:?}");
}

#[test]
fn our_own_port_unreachable_names_the_rpc_it_answers() {
    // The README's example: a request to a port B does not serve fails
    // with port unreachable; B's error quotes the request's common header
    // (its id with it), not only the 8 bytes RFC 792 asks for.
    closed_port_fails(&mut Pair::linked(4, 1 << 20), B_IP.into());
    let mut p = Pair::linked(4, 1 << 20);
    let client = p.a.socket().unwrap();
    p.a.send_request(client, B_IP, 999, &pattern(3000, 1))
        .unwrap();
    p.run_until(Duration::from_millis(20), |p| p.a.recv(client).is_some());
    let icmp = p
        .log
        .iter()
        .find(|(_, to_b, f, _)| !to_b && f[23] == frames::ICMP)
        .map(|(_, _, f, _)| f.clone())
        .unwrap();
    // RFC 1812 4.3.2.3: as much as fits in 576 bytes.
    assert_eq!(icmp.len(), 14 + 576);
}

#[cfg(feature = "ipv6")]
mod v6 {
    use super::*;
    use crate::wire::Ipv6Addr;

    const A6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
    const B6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);
    const EVIL6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x66);

    /// Dual-stack endpoints A and B that know each other's link addresses.
    fn pair() -> Pair {
        let config = |ip, ip6, mac| {
            let mut c = Config::new(ip, mac, SEED);
            c.ipv6 = true;
            c.ipv6_addrs[0] = Some(ip6);
            c
        };
        let mut p = Pair::new(
            endpoint_with(config(A_IP, A6, A_MAC), 16, 1 << 20),
            endpoint_with(config(B_IP, B6, B_MAC), 16, 1 << 20),
        );
        p.a.add_neighbor(p.now, IpAddr::V6(B6), B_MAC).unwrap();
        p.b.add_neighbor(p.now, IpAddr::V6(A6), A_MAC).unwrap();
        p
    }

    /// An ICMPv6 message (its type, code and the rest) from the forger to
    /// A, checksummed here; built byte by byte, so it may be of a type no
    /// emitter of ours writes.
    fn icmp6(mut body: Vec<u8>) -> Vec<u8> {
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&EVIL6.octets());
        pseudo.extend_from_slice(&A6.octets());
        pseudo.extend_from_slice(&(body.len() as u32).to_be_bytes());
        pseudo.extend_from_slice(&[0, 0, 0, frames::ICMPV6]);
        pseudo.extend_from_slice(&body);
        let sum = frames::checksum(&pseudo);
        body[2..4].copy_from_slice(&sum.to_be_bytes());
        let ip = frames::ipv6(EVIL6, A6, frames::ICMPV6, 0, 64, &body);
        frames::ethernet(EVIL_MAC.0, A_MAC.0, None, frames::IPV6, &ip)
    }

    /// An ICMPv6 error of `ty` (1: destination unreachable, 2: packet too
    /// big) with `code`, quoting an IPv6 header from A to B and the bytes
    /// `quoted`.
    fn icmp6_error(ty: u8, code: u8, quoted: &[u8]) -> Vec<u8> {
        // Packet too big carries the MTU (1280) where the other is unused.
        let mut body = vec![ty, code, 0, 0, 0, 0, 5 * u8::from(ty == 2), 0];
        let mut header = frames::ipv6(A6, B6, frames::HOMA, 0, 64, &[]);
        header[4..6].copy_from_slice(&156u16.to_be_bytes());
        body.extend_from_slice(&header);
        body.extend_from_slice(quoted);
        icmp6(body)
    }

    /// What a forged error quotes, given what the forger saw of a scene.
    type Quote<'a> = &'a dyn Fn(&Scene) -> Vec<u8>;

    /// A scene over IPv6 with the one error `error(scene)`: what became of
    /// A's RPCs, A's stats, and A's RPC handles.
    fn scene(error: impl Fn(&Scene) -> Vec<u8>) -> (Outcome, crate::stats::Stats, Vec<RpcHandle>) {
        let mut s = Scene::new(pair(), IpAddr::V6(B6));
        let f = error(&s);
        s.inject([f]);
        let handles = s.handles.clone();
        let (out, p) = s.finish();
        (out, *p.a.stats(), handles)
    }

    #[test]
    #[cfg_attr(miri, ignore = "many scenes: slow under Miri")]
    fn forged_icmpv6_errors_naming_no_rpc_end_none() {
        // Every code (no route, prohibited, beyond scope, address, port,
        // policy, reject route, and one unassigned) with an unused id, a
        // wrong port, or a quote too short for the id.
        for code in 0..=7u8 {
            let quotes: [Quote; 4] = [
                &|s| quote(s.port, 500, s.ids[RPCS - 1] + 2, 28),
                &|s| quote(s.port, 501, s.ids[0], 28),
                &|s| quote(s.port ^ 1, 500, s.ids[0], 28),
                &|s| quote(s.port, 500, s.ids[0], 27),
            ];
            for q in quotes {
                let (out, st, _) = scene(|s| icmp6_error(1, code, &q(s)));
                assert_eq!((out.completed, out.failed.len()), (RPCS, 0), "code {code}");
                let ig = st.icmp_ignored;
                assert_eq!(ig.unknown_rpc + ig.short_quote, 1, "code {code}: {ig:?}");
            }
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "several scenes: slow under Miri")]
    fn address_unreachable_is_soft_and_port_unreachable_ends_the_rpc_it_names() {
        // Every code but port unreachable naming a live RPC: noted, and
        // the RPC completes.
        for code in [0u8, 1, 2, 3, 5, 6] {
            let (out, st, _) = scene(|s| icmp6_error(1, code, &quote(s.port, 500, s.ids[0], 56)));
            assert_eq!((out.completed, out.failed.len()), (RPCS, 0), "code {code}");
            assert_eq!(st.icmp_ignored.soft, 1);
        }
        // Port unreachable naming it: that RPC alone fails.
        let (out, _, handles) = scene(|s| icmp6_error(1, 4, &quote(s.port, 500, s.ids[2], 28)));
        assert_eq!(out.completed, RPCS - 1);
        assert_eq!(
            (out.failed[0].0, out.failed[0].1),
            (handles[2], RpcError::PortUnreachable)
        );
    }

    #[test]
    fn packet_too_big_is_a_hint_and_ends_nothing() {
        // Packet too big (MTU 1280) naming a live RPC.
        let (out, st, _) = scene(|s| icmp6_error(2, 0, &quote(s.port, 500, s.ids[0], 56)));
        assert_eq!((out.completed, out.failed.len()), (RPCS, 0));
        assert_eq!(st.icmp_ignored.path_mtu, 1);
    }
}
