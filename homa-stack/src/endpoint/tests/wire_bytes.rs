//! Every kind of Homa packet the endpoint sends, compared byte for byte
//! with the frame the test kit builds for it: Ethernet and IPv4 from raw
//! fields (`frames`), the Homa header from its representation, the checksum
//! filled. Each test sets up the one situation that makes the endpoint send
//! that packet, so the expected packet follows from the scenario.

use super::*;
use crate::wire::homa::{Ack, DataHeader, Kind, Repr};
use crate::wire::IpAddr;

/// The client's port and its RPC's id in the requests these tests forge.
pub(super) const CLIENT_PORT: u16 = 40_000;
const CLIENT_ID: u64 = 2;
/// Control packets go at the highest of the default 8 priorities.
pub(super) const CONTROL_PRIORITY: u8 = 7;

/// The frame (`from_mac`, `from`) sends to (`to_mac`, `to`) carrying
/// `repr` at `priority` (the default `PriorityEncoding::Tos`: the priority
/// in the top 3 bits of the TOS byte).
fn expected(
    from_mac: EthernetAddress,
    from: Ipv4Addr,
    to_mac: EthernetAddress,
    to: Ipv4Addr,
    priority: u8,
    repr: &Repr<'_>,
) -> Vec<u8> {
    let mut body = vec![0; repr.buffer_len()];
    let mut p = homa::Packet::new_unchecked(&mut body[..]);
    repr.emit(&mut p);
    p.fill_checksum(&IpAddr::V4(from), &IpAddr::V4(to));
    let ip = frames::ipv4(from, to, frames::HOMA, priority << 5, &body);
    frames::ethernet(from_mac.0, to_mac.0, None, frames::IPV4, &ip)
}

/// A frame A sends B for `repr` (priority 0: B reads no priority).
pub(super) fn a_sends(repr: &Repr<'_>) -> Vec<u8> {
    expected(A_MAC, A_IP, B_MAC, B_IP, 0, repr)
}

/// The frame B sends A for `repr` at `priority`.
pub(super) fn b_sends(priority: u8, repr: &Repr<'_>) -> Vec<u8> {
    expected(B_MAC, B_IP, A_MAC, A_IP, priority, repr)
}

/// The frame A sends B for `repr` at `priority`.
fn a_sends_at(priority: u8, repr: &Repr<'_>) -> Vec<u8> {
    expected(A_MAC, A_IP, B_MAC, B_IP, priority, repr)
}

/// A's DATA for its request `CLIENT_ID`: `payload` at `offset` of a
/// `length`-byte message announcing `incoming` unscheduled bytes, echoing
/// cutoff version `cutoff_version`.
pub(super) fn request(
    length: u32,
    incoming: u32,
    offset: u32,
    cutoff_version: u16,
    payload: &[u8],
) -> Repr<'_> {
    Repr {
        sport: CLIENT_PORT,
        dport: 500,
        sender_id: CLIENT_ID,
        kind: Kind::Data {
            header: DataHeader {
                message_length: length,
                incoming,
                ack: None,
                cutoff_version,
                retransmit: false,
                offset,
            },
            payload,
        },
    }
}

/// B's packet of `kind` for A's request: ports swapped, B's id for the
/// RPC (the client's id XOR 1).
pub(super) fn to_client(kind: Kind<'_>) -> Repr<'_> {
    Repr {
        sport: 500,
        dport: CLIENT_PORT,
        sender_id: CLIENT_ID ^ 1,
        kind,
    }
}

/// A server at B bound to port 500, with room for 4 RPCs and 1 MB of pool.
fn server() -> (Endpoint<'static>, SocketHandle, TestDevice) {
    let mut ep = endpoint(B_IP, B_MAC, 4, 1 << 20);
    let sock = ep.bind(500).unwrap();
    (ep, sock, TestDevice::default())
}

/// The IP frames `dev` holds, with the priority each was handed over at,
/// taken out (and the server's ARP question about the client's address,
/// which a request's source only fills in, dropped).
fn sent(dev: &mut TestDevice) -> Vec<(Vec<u8>, u8)> {
    dev.tx
        .drain(..)
        .filter(|(f, _)| f[12..14] != frames::ARP.to_be_bytes())
        .map(|(f, m)| (f, m.priority))
        .collect()
}

/// The Homa packet type of a sent IPv4 frame.
fn homa_type(frame: &[u8]) -> homa::PacketType {
    homa::PacketType::from(frame[14 + 20 + 11])
}

#[test]
fn busy_and_rpc_unknown_are_sent_byte_for_byte() {
    let (mut ep, _sock, mut dev) = server();
    let mut now = Instant::from_millis(1);
    // A whole 10-byte request: the server holds it, unanswered (our
    // cutoff version, 1, so no CUTOFFS).
    dev.rx
        .push_back(a_sends(&request(10, 10, 0, 1, b"0123456789")));
    ep.poll(now, &mut dev);
    assert_eq!(sent(&mut dev), vec![], "a request alone is not answered");
    now += Duration::from_micros(100);
    // A RESEND for the request: the server owes no response yet, so BUSY.
    // Then one for a request it never had (id 4): RPC_UNKNOWN, with the
    // server's id for it, 5.
    let resend = |id: u64| Repr {
        sport: CLIENT_PORT,
        dport: 500,
        sender_id: id,
        kind: Kind::Resend {
            offset: 0,
            length: 10,
            priority: 7,
        },
    };
    dev.rx.push_back(a_sends(&resend(CLIENT_ID)));
    dev.rx.push_back(a_sends(&resend(4)));
    ep.poll(now, &mut dev);
    let unknown = Repr {
        sender_id: 5,
        ..to_client(Kind::RpcUnknown)
    };
    assert_eq!(
        sent(&mut dev),
        vec![
            (b_sends(CONTROL_PRIORITY, &to_client(Kind::Busy)), 7),
            (b_sends(CONTROL_PRIORITY, &unknown), 7),
        ]
    );
}

#[test]
fn cutoffs_are_sent_byte_for_byte() {
    let (mut ep, _sock, mut dev) = server();
    // A request echoing cutoff version 0: the server's is 1, so it sends
    // its cutoffs: the defaults [0, 0, 0, 0, 1,000,000, 15,000, 2,800,
    // 200] with entry 0 announced as i32::MAX (as Linux does), version 1.
    dev.rx
        .push_back(a_sends(&request(10, 10, 0, 0, b"0123456789")));
    ep.poll(Instant::from_millis(1), &mut dev);
    let cutoffs = Kind::Cutoffs {
        unsched_cutoffs: [i32::MAX as u32, 0, 0, 0, 1_000_000, 15_000, 2_800, 200],
        version: 1,
    };
    assert_eq!(
        sent(&mut dev),
        vec![(b_sends(CONTROL_PRIORITY, &to_client(cutoffs)), 7)]
    );
}

/// A client at A with one socket (port `MIN_CLIENT_PORT`), B's link
/// address set by hand when `b_known` (which makes B a peer it holds).
fn client(b_known: bool) -> (Endpoint<'static>, TestDevice) {
    let mut ep = endpoint(A_IP, A_MAC, 4, 1 << 20);
    ep.socket().unwrap();
    if b_known {
        ep.add_neighbor(Instant::ZERO, B_IP, B_MAC).unwrap();
    }
    (ep, TestDevice::default())
}

/// B's NEED_ACK for A's client RPC `id` (B's id for it is `id ^ 1`).
fn need_ack(id: u64) -> Vec<u8> {
    let repr = Repr {
        sport: 500,
        dport: MIN_CLIENT_PORT,
        sender_id: id ^ 1,
        kind: Kind::NeedAck,
    };
    expected(B_MAC, B_IP, A_MAC, A_IP, 0, &repr)
}

/// A's ACK whose header names client RPC `id` and which carries `acks`.
fn ack(id: u64, acks: &[u64]) -> Repr<'static> {
    Repr {
        sport: MIN_CLIENT_PORT,
        dport: 500,
        sender_id: id,
        kind: Kind::Ack {
            acks: acks
                .iter()
                .map(|&client_id| Ack {
                    client_id,
                    server_port: 500,
                })
                .collect(),
        },
    }
}

#[test]
fn an_ack_for_a_stranger_is_sent_byte_for_byte() {
    // A NEED_ACK for a client RPC A does not have, from a peer it does not
    // hold: the ack goes alone, naming the RPC in its header.
    let (mut ep, mut dev) = client(false);
    dev.rx.push_back(need_ack(2));
    ep.poll(Instant::from_millis(1), &mut dev);
    assert_eq!(
        sent(&mut dev),
        vec![(a_sends_at(CONTROL_PRIORITY, &ack(2, &[])), 7)]
    );
}

#[test]
fn waiting_acks_go_in_one_packet_byte_for_byte() {
    // Two NEED_ACKs from a peer A holds, in one poll: both acks wait on the
    // peer, and the one ACK packet queued for the first takes both when it
    // goes. Its header names the last ack added (4), its entry the other.
    let (mut ep, mut dev) = client(true);
    dev.rx.push_back(need_ack(2));
    dev.rx.push_back(need_ack(4));
    ep.poll(Instant::from_millis(1), &mut dev);
    assert_eq!(
        sent(&mut dev),
        vec![(a_sends_at(CONTROL_PRIORITY, &ack(4, &[2])), 7)]
    );
}

#[test]
fn a_full_batch_of_acks_is_one_packet_byte_for_byte() {
    // Six NEED_ACKs in one poll fill the peer's batch (one ack in the
    // header, five entries): the batch is queued as it is, and the packet
    // queued for the first NEED_ACK finds nothing left to send. One ACK:
    // header 12 (the last added), entries 2 to 10.
    let (mut ep, mut dev) = client(true);
    for id in [2, 4, 6, 8, 10, 12] {
        dev.rx.push_back(need_ack(id));
    }
    ep.poll(Instant::from_millis(1), &mut dev);
    assert_eq!(
        sent(&mut dev),
        vec![(a_sends_at(CONTROL_PRIORITY, &ack(12, &[2, 4, 6, 8, 10])), 7)]
    );
}

#[test]
fn a_response_and_its_need_ack_are_sent_byte_for_byte() {
    let (mut ep, sock, mut dev) = server();
    let mut now = Instant::from_millis(1);
    dev.rx
        .push_back(a_sends(&request(10, 10, 0, 1, b"0123456789")));
    ep.poll(now, &mut dev);
    let Some(Event::Request { rpc, .. }) = ep.recv(sock) else {
        panic!("no request");
    };
    ep.reply(rpc, b"abcdefghij").unwrap();
    ep.poll(now, &mut dev);
    // The response, whole in one packet: at priority 6, where a peer's
    // initial cutoffs put every unscheduled byte (A never sent its own);
    // cutoff version 0 (none received from A).
    let data = Kind::Data {
        header: DataHeader {
            message_length: 10,
            incoming: 10,
            ack: None,
            cutoff_version: 0,
            retransmit: false,
            offset: 0,
        },
        payload: b"abcdefghij",
    };
    assert_eq!(sent(&mut dev), vec![(b_sends(6, &to_client(data)), 6)]);
    // No ACK comes: a server whose response is out asks for one at every
    // tick from the `request_ack_ticks`-th (2) on. Ticks run at 1, 2, 3 ms
    // (the first poll's, then every millisecond): the response went out
    // at 1 ms, so the ticks at 2 and 3 ms find it sent, and the first
    // NEED_ACK goes at 3 ms.
    let mut first = None;
    while first.is_none() && now < Instant::from_millis(5) {
        now += Duration::from_micros(100);
        ep.poll(now, &mut dev);
        first = sent(&mut dev).into_iter().next().map(|f| (now, f));
    }
    assert_eq!(
        first,
        Some((
            Instant::from_millis(3),
            (b_sends(CONTROL_PRIORITY, &to_client(Kind::NeedAck)), 7)
        ))
    );
}

#[test]
fn a_resend_is_sent_byte_for_byte() {
    let (mut ep, _sock, mut dev) = server();
    let mut now = Instant::from_millis(1);
    // The first 1,424 bytes of a 3,000-byte request, all of it unscheduled:
    // after `resend_ticks` (5) silent ticks the server asks for the rest,
    // 1,576 bytes from 1,424, at the highest priority.
    let payload = pattern(1424, 1);
    dev.rx
        .push_back(a_sends(&request(3000, 3000, 0, 1, &payload)));
    let end = now + Duration::from_millis(8);
    let mut frames = Vec::new();
    while now < end {
        ep.poll(now, &mut dev);
        frames.extend(sent(&mut dev));
        now += Duration::from_micros(100);
    }
    let resend = Kind::Resend {
        offset: 1424,
        length: 1576,
        priority: 7,
    };
    assert_eq!(
        frames.first(),
        Some(&(b_sends(CONTROL_PRIORITY, &to_client(resend)), 7))
    );
}

#[test]
fn a_grant_is_sent_byte_for_byte() {
    let (mut ep, _sock, mut dev) = server();
    // The first packet of a 100,000-byte request with 10,000 unscheduled
    // bytes: the server grants more at once. What it grants is the
    // scheduler's (tested in `grant`); here the frame around it is checked.
    let payload = pattern(1424, 1);
    dev.rx
        .push_back(a_sends(&request(100_000, 10_000, 0, 1, &payload)));
    ep.poll(Instant::from_millis(1), &mut dev);
    let frames = sent(&mut dev);
    assert_eq!(frames.len(), 1, "one GRANT");
    let (frame, prio) = &frames[0];
    assert_eq!(homa_type(frame), homa::PacketType::Grant);
    let p = homa::Packet::new_checked(&frame[34..]).unwrap();
    let (offset, priority) = (p.grant_offset(), p.grant_priority());
    assert!(offset > 10_000, "more than the unscheduled bytes");
    let grant = Kind::Grant { offset, priority };
    assert_eq!(
        (frame.clone(), *prio),
        (b_sends(CONTROL_PRIORITY, &to_client(grant)), 7)
    );
}
