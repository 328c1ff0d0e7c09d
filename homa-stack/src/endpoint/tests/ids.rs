//! Client ids on the wire: unique, even, never 0, and what one server sees
//! of them predicts nothing of the ids another server sees (a forger that
//! knows an RPC's id can name it with RPC_UNKNOWN, RESEND or BUSY).

use super::*;
use crate::wire::IpAddr;

/// The 46-bit sequence part of a client id (above the slot's 16 bits,
/// below the top bit).
fn seq_part(id: u64) -> u64 {
    (id >> 17) & SEQ
}

/// The sequence part's bits.
const SEQ: u64 = 0x3fff_ffff_ffff;

#[test]
fn ids_seen_by_one_server_predict_nothing_of_another_servers() {
    // A sends 16 rounds of one request to each of 16 servers in turn. A
    // server sees every id A gives it: consecutive numbers apart by the
    // RPCs A made meanwhile. It must learn nothing of the id of A's next
    // RPC to another server: that id's sequence part lies anywhere in 2^46
    // values, not next to its own (one counter for all servers would put
    // it within a few numbers).
    let mut a = endpoint_with_peers(Config::new(A_IP, A_MAC, SEED), 32, 32, 1 << 20);
    let client = a.socket().unwrap();
    let servers: Vec<IpAddr> = (0..16)
        .map(|i| IpAddr::V4(Ipv4Addr::new(10, 0, 1, i)))
        .collect();
    let mut ids: Vec<(usize, u64)> = Vec::new();
    for _ in 0..16 {
        for (s, &server) in servers.iter().enumerate() {
            let h = a.send_request(client, server, 500, b"hello").unwrap();
            ids.push((s, h.id()));
            a.abort(h).unwrap();
        }
    }
    let mut seen = std::collections::HashSet::new();
    for &(_, id) in &ids {
        assert_eq!(id & 1, 0, "a client id is even");
        assert_ne!(id, 0, "an ack of 0 acks nothing");
        assert!(seen.insert(id), "id {id:#x} twice");
    }
    // The next id one server's last id predicts best: its own next one.
    // For every other server the distance is as good as random.
    let mut near = 0;
    for pair in ids.windows(2) {
        let ((s, id), (t, next)) = (pair[0], pair[1]);
        assert_ne!(s, t);
        let d = seq_part(next).wrapping_sub(seq_part(id)) & SEQ;
        let d = d.min(SEQ + 1 - d);
        if d < 1 << 32 {
            near += 1;
        }
    }
    assert_eq!(
        near,
        0,
        "{near} of {} ids next to another server's",
        ids.len() - 1
    );
    // To one server, ids follow each other by the RPCs made meanwhile
    // (16 here): they are unique, and a server that forgot an RPC does not
    // see its id come back soon.
    for s in 0..servers.len() {
        let mine: Vec<u64> = ids.iter().filter(|e| e.0 == s).map(|e| e.1).collect();
        for pair in mine.windows(2) {
            let d = seq_part(pair[1]).wrapping_sub(seq_part(pair[0])) & SEQ;
            assert_eq!(d, 16, "server {s}");
        }
    }
}

#[test]
fn an_id_names_its_slot_and_a_forged_one_names_none() {
    // A response finds its RPC by the slot its id names, without a search;
    // an id naming no slot of the table (or the slot of another RPC) finds
    // nothing.
    let mut p = Pair::linked(8, 1 << 20);
    echo_rpc(&mut p, 100);
    let client = p.a.socket().unwrap();
    let h = p.a.send_request(client, B_IP, 500, b"hi").unwrap();
    let port = p.a.client_port(client).unwrap();
    let addr = IpAddr::V4(B_IP);
    assert!(p.a.find_rpc(addr, h.id(), port).is_some());
    for forged in [h.id() ^ 2, h.id() + (1 << 17), h.id() ^ 1 << 63, 0] {
        assert_eq!(p.a.find_rpc(addr, forged, port), None, "{forged:#x}");
    }
}
