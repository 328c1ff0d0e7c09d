//! Control packets a peer queued during a stall, delivered in one burst:
//! each RPC they name gets one reply.

use super::wire_bytes::{a_sends, b_sends, request, to_client, CLIENT_PORT, CONTROL_PRIORITY};
use super::*;
use crate::wire::homa::{Kind, Repr};
use crate::wire::IpAddr;

/// A RESEND from A naming its request `id` (B's RPC `id ^ 1`).
fn resend_of(id: u64, offset: u32) -> Vec<u8> {
    a_sends(&Repr {
        sport: CLIENT_PORT,
        dport: 500,
        sender_id: id,
        kind: Kind::Resend {
            offset,
            length: 1_000,
            priority: 7,
        },
    })
}

#[test]
fn a_burst_of_queued_resends_gets_one_reply_per_rpc() {
    // After a stall, a client's queued RESENDs arrive at once: four for
    // each of four requests the server is still computing, interleaved,
    // and two for one it never had. One poll reads them all; out go one
    // BUSY per request and one RPC_UNKNOWN, in the order of each RPC's
    // first RESEND (before: 16 BUSYs and two RPC_UNKNOWNs, the second
    // reaching the client after the first had made it restart).
    let mut ep = endpoint(B_IP, B_MAC, 8, 1 << 20);
    ep.bind(500).unwrap();
    let mut dev = TestDevice::default();
    let ids = [2u64, 4, 6, 8];
    for id in ids {
        let mut r = request(10, 10, 0, 1, b"0123456789");
        r.sender_id = id;
        dev.rx.push_back(a_sends(&r));
    }
    let mut now = Instant::from_millis(1);
    ep.poll(now, &mut dev);
    assert!(dev.tx.is_empty(), "requests alone are not answered");
    now += Duration::from_micros(60);
    for round in 0..4 {
        for id in ids {
            dev.rx.push_back(resend_of(id, round * 1_000));
        }
        if round < 2 {
            dev.rx.push_back(resend_of(10, 0));
        }
    }
    ep.poll(now, &mut dev);
    let reply = |id: u64, kind| {
        let mut r = to_client(kind);
        r.sender_id = id ^ 1;
        b_sends(CONTROL_PRIORITY, &r)
    };
    let out: Vec<Vec<u8>> = dev.tx.drain(..).map(|(f, _)| f).collect();
    let expected = vec![
        reply(2, Kind::Busy),
        reply(4, Kind::Busy),
        reply(6, Kind::Busy),
        reply(8, Kind::Busy),
        reply(10, Kind::RpcUnknown),
    ];
    assert_eq!(out, expected);
    assert_eq!(ep.stats().replies_coalesced, 13);
}

#[test]
fn replies_are_coalesced_only_for_the_same_rpc_peer_and_link() {
    // What differs is answered apart: the same id from another address
    // or another link address (a spoofed copy must not take the real
    // peer's answer), another port, or the same RPC in a later poll once
    // its reply went.
    let mut ep = endpoint(B_IP, B_MAC, 8, 1 << 20);
    ep.bind(500).unwrap();
    ep.bind(501).unwrap();
    let mut dev = TestDevice::default();
    let now = Instant::from_millis(1);
    let c_ip = Ipv4Addr::new(10, 0, 0, 3);
    let other_mac = EthernetAddress([2, 0, 0, 0, 0, 9]);
    let unknown = |from_mac: EthernetAddress, from: Ipv4Addr, dport: u16| {
        let repr = Repr {
            sport: CLIENT_PORT,
            dport,
            sender_id: 2,
            kind: Kind::Resend {
                offset: 0,
                length: 1_000,
                priority: 7,
            },
        };
        let mut body = vec![0; repr.buffer_len()];
        let mut p = homa::Packet::new_unchecked(&mut body[..]);
        repr.emit(&mut p);
        p.fill_checksum(&IpAddr::V4(from), &IpAddr::V4(B_IP));
        let ip = frames::ipv4(from, B_IP, frames::HOMA, 0, &body);
        frames::ethernet(from_mac.0, B_MAC.0, None, frames::IPV4, &ip)
    };
    for f in [
        unknown(A_MAC, A_IP, 500),
        unknown(A_MAC, A_IP, 500),
        unknown(other_mac, A_IP, 500),
        unknown(A_MAC, c_ip, 500),
        unknown(A_MAC, A_IP, 501),
    ] {
        dev.rx.push_back(f);
    }
    ep.poll(now, &mut dev);
    assert_eq!(dev.tx.len(), 4, "one for the repeat, four apart");
    assert_eq!(ep.stats().replies_coalesced, 1);
    dev.tx.clear();
    dev.rx.push_back(unknown(A_MAC, A_IP, 500));
    ep.poll(now + Duration::from_micros(10), &mut dev);
    assert_eq!(dev.tx.len(), 1, "a later poll answers again");
}
