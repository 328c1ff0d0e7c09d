//! Writes the small captures homa-dump's and the Wireshark dissector's tests
//! read, into `tools/data/` (or the directory given):
//!
//! ```text
//! cargo run -p homa-testkit --bin make-dump-captures [DIR]
//! ```
//!
//! - `every-type.pcapng`: Ethernet, nanosecond pcapng; every Homa packet
//!   type over IPv4 and IPv6, and the cases a dissector must get right: the
//!   `seg.offset` 0xFFFFFFFF sentinel, the 36- and 37-byte RESEND, RESEND
//!   of everything, ACK with `num_acks` 7 (clamped to 5), a piggy-backed
//!   ack, a retransmission, good, bad, zero and partial checksums, a VLAN
//!   tag, a TCP-hijacked DATA, an unknown type, a short packet, a DATA
//!   whose piggy-backed ack names an earlier RPC, and an IPv6 extension
//!   header.
//! - `snaplen.pcap`: the same frames cut at 128 bytes, as `tcpdump -s 128`,
//!   and `snaplen-96.pcap` cut at 96, which cuts headers too.
//! - `link-sll.pcap`, `link-sll2.pcap`, `link-raw.pcap`, `link-ipv4.pcap`,
//!   `link-ipv6.pcap`: a few of them under Linux cooked v1 (113) and v2
//!   (276) headers and as raw IP (101, 228, 229).
//!
//! Deterministic: running it again gives the same bytes. The capture of
//! known RPCs with losses comes from the loopback program instead:
//! `loopback --pcap tools/data/loss.pcap --rpcs 6 --max-size 6000
//! --loss 0.08 --seed 2 --concurrency 2`.

use std::path::{Path, PathBuf};

use homa_stack::wire::homa::{self, Ack, DataHeader, Kind, RESEND_ALL};
use homa_stack::wire::{
    checksum, EtherType, EthernetAddress, IpAddr, IpProtocol, Ipv4Addr, Ipv6Addr, VlanTag,
};

use homa_testkit::frames;

const A4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const A6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
const B6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);
const A_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
const B_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);
const CLIENT_PORT: u16 = 32768;
const SERVER_PORT: u16 = 500;

/// How the checksum field is filled.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sum {
    Zero,
    Good,
    /// Good, then one bit flipped.
    Bad,
    /// Only the pseudo-header sum, as Linux leaves it for the NIC.
    Partial,
}

/// One Homa packet to write, from A (client) or B (server).
struct Spec {
    from_client: bool,
    repr: homa::Repr<'static>,
    prio: u8,
    sum: Sum,
    /// Changes to the bytes after emitting (before the checksum).
    patch: fn(&mut Vec<u8>),
}

fn client(sender_id: u64, kind: Kind<'static>) -> homa::Repr<'static> {
    homa::Repr {
        sport: CLIENT_PORT,
        dport: SERVER_PORT,
        sender_id,
        kind,
    }
}

fn server(sender_id: u64, kind: Kind<'static>) -> homa::Repr<'static> {
    homa::Repr {
        sport: SERVER_PORT,
        dport: CLIENT_PORT,
        sender_id,
        kind,
    }
}

static PAYLOAD: [u8; 1400] = [0x5a; 1400];

fn data(offset: u32, len: usize, retransmit: bool, ack: Option<Ack>) -> Kind<'static> {
    Kind::Data {
        header: DataHeader {
            message_length: 4000,
            incoming: 2800,
            offset,
            retransmit,
            ack,
            cutoff_version: 3,
        },
        payload: &PAYLOAD[..len],
    }
}

fn nothing(_: &mut Vec<u8>) {}

fn specs() -> Vec<Spec> {
    let s = |from_client, repr, prio, sum| Spec {
        from_client,
        repr,
        prio,
        sum,
        patch: nothing,
    };
    let acks = homa::Repr {
        kind: Kind::Ack {
            acks: (2..=6)
                .map(|i| Ack {
                    client_id: i * 2,
                    server_port: SERVER_PORT,
                })
                .collect(),
        },
        ..client(10, Kind::NeedAck)
    };
    let two_acks = homa::Repr {
        kind: Kind::Ack {
            acks: [
                Ack {
                    client_id: 20,
                    server_port: SERVER_PORT,
                },
                Ack {
                    client_id: 22,
                    server_port: 501,
                },
            ]
            .into_iter()
            .collect(),
        },
        ..client(24, Kind::NeedAck)
    };
    vec![
        // A first transmission as Linux sends it: offset in `sequence` only.
        Spec {
            patch: |b| {
                b[52..56].copy_from_slice(&u32::MAX.to_be_bytes());
                b[13] = 6;
                b[18..20].copy_from_slice(&0xb97d_u16.to_be_bytes());
            },
            ..s(true, client(100, data(0, 1400, false, None)), 5, Sum::Good)
        },
        s(
            true,
            client(100, data(1400, 1400, false, None)),
            5,
            Sum::Zero,
        ),
        s(
            true,
            client(
                100,
                data(
                    2800,
                    1200,
                    true,
                    Some(Ack {
                        client_id: 98,
                        server_port: SERVER_PORT,
                    }),
                ),
            ),
            4,
            Sum::Partial,
        ),
        s(
            false,
            server(
                101,
                Kind::Grant {
                    offset: 4000,
                    priority: 3,
                },
            ),
            7,
            Sum::Good,
        ),
        s(
            false,
            server(
                101,
                Kind::Resend {
                    offset: 1400,
                    length: 1400,
                    priority: 6,
                },
            ),
            7,
            Sum::Good,
        ),
        // The upstream form: no priority byte.
        Spec {
            patch: |b| b.truncate(homa::RESEND_UPSTREAM_HEADER_LEN),
            ..s(
                false,
                server(
                    101,
                    Kind::Resend {
                        offset: 0,
                        length: 2800,
                        priority: 0,
                    },
                ),
                7,
                Sum::Zero,
            )
        },
        s(
            true,
            client(
                102,
                Kind::Resend {
                    offset: 0,
                    length: RESEND_ALL,
                    priority: 7,
                },
            ),
            7,
            Sum::Bad,
        ),
        s(false, server(103, Kind::RpcUnknown), 7, Sum::Good),
        s(false, server(101, Kind::Busy), 7, Sum::Good),
        s(
            false,
            server(
                0,
                Kind::Cutoffs {
                    unsched_cutoffs: [0x7fff_ffff, 0, 0, 0, 1_000_000, 15_000, 2_800, 200],
                    version: 3,
                },
            ),
            7,
            Sum::Good,
        ),
        s(false, server(101, Kind::Freeze), 7, Sum::Good),
        s(false, server(101, Kind::NeedAck), 7, Sum::Good),
        // num_acks 7 on the wire: receivers clamp it to 5.
        Spec {
            patch: |b| b[28..30].copy_from_slice(&7u16.to_be_bytes()),
            ..s(true, acks, 7, Sum::Good)
        },
        s(true, two_acks, 7, Sum::Zero),
        s(false, server(101, data(0, 600, false, None)), 6, Sum::Good),
    ]
}

/// The Homa bytes of `spec` between `src` and `dst`.
fn homa_bytes(spec: &Spec, src: IpAddr, dst: IpAddr) -> Vec<u8> {
    let mut b = frames::homa(&spec.repr);
    (spec.patch)(&mut b);
    let mut p = homa::Packet::new_unchecked(&mut b[..]);
    match spec.sum {
        Sum::Zero => p.set_checksum(0),
        Sum::Good => p.fill_checksum(&src, &dst),
        Sum::Bad => {
            p.fill_checksum(&src, &dst);
            let c = p.checksum();
            p.set_checksum(c ^ 0x0100);
        }
        Sum::Partial => {
            let len = b.len() as u32;
            let pseudo = match (src, dst) {
                (IpAddr::V4(s), IpAddr::V4(d)) => {
                    checksum::pseudo_header_v4(&s, &d, IpProtocol::Tcp, len)
                }
                (IpAddr::V6(s), IpAddr::V6(d)) => {
                    checksum::pseudo_header_v6(&s, &d, IpProtocol::Tcp, len)
                }
                _ => unreachable!("same family"),
            };
            b[16..18].copy_from_slice(&(checksum::fold(pseudo) as u16).to_be_bytes());
        }
    }
    b
}

/// The IP packet of `spec` (IPv4 or IPv6), protocol `proto`.
fn ip_packet(spec: &Spec, v6: bool, proto: IpProtocol) -> Vec<u8> {
    let tos = spec.prio << 5;
    if v6 {
        let (s, d) = if spec.from_client { (A6, B6) } else { (B6, A6) };
        let homa = homa_bytes(spec, s.into(), d.into());
        frames::ipv6(s, d, proto, tos, 64, &homa)
    } else {
        let (s, d) = if spec.from_client { (A4, B4) } else { (B4, A4) };
        let homa = homa_bytes(spec, s.into(), d.into());
        frames::ipv4(s, d, proto, tos, &homa)
    }
}

fn eth(from_client: bool, v6: bool, vlan: Option<VlanTag>, ip: &[u8]) -> Vec<u8> {
    let (s, d) = if from_client {
        (A_MAC, B_MAC)
    } else {
        (B_MAC, A_MAC)
    };
    let et = if v6 { EtherType::Ipv6 } else { EtherType::Ipv4 };
    frames::ethernet(s, d, vlan, et, ip)
}

/// Every Ethernet frame of `every-type.pcapng`.
fn every_type_frames() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for v6 in [false, true] {
        for spec in specs() {
            let ip = ip_packet(&spec, v6, IpProtocol::Homa);
            out.push(eth(spec.from_client, v6, None, &ip));
        }
    }
    let specs = specs();
    // A VLAN-tagged BUSY.
    let ip = ip_packet(&specs[8], false, IpProtocol::Homa);
    out.push(eth(
        false,
        false,
        Some(VlanTag {
            pcp: 3,
            dei: false,
            vid: 7,
        }),
        &ip,
    ));
    // Linux's TCP hijacking: the first DATA as TCP.
    let ip = ip_packet(&specs[0], false, IpProtocol::Tcp);
    out.push(eth(true, false, None, &ip));
    // An unknown type (0x19) and a packet shorter than its GRANT header.
    let mut unknown = frames::homa(&server(101, Kind::Busy));
    unknown[11] = 0x19;
    out.push(eth(
        false,
        false,
        None,
        &frames::ipv4(B4, A4, IpProtocol::Homa, 0xe0, &unknown),
    ));
    let mut short = frames::homa(&server(
        101,
        Kind::Grant {
            offset: 1,
            priority: 1,
        },
    ));
    short.truncate(30);
    out.push(eth(
        false,
        false,
        None,
        &frames::ipv4(B4, A4, IpProtocol::Homa, 0xe0, &short),
    ));
    // A new request whose DATA acks RPC 102 (piggy-backed ack).
    let acking = Spec {
        patch: nothing,
        from_client: true,
        repr: client(
            104,
            Kind::Data {
                header: DataHeader {
                    message_length: 100,
                    incoming: 100,
                    offset: 0,
                    retransmit: false,
                    ack: Some(Ack {
                        client_id: 102,
                        server_port: SERVER_PORT,
                    }),
                    cutoff_version: 0,
                },
                payload: &PAYLOAD[..100],
            },
        ),
        prio: 6,
        sum: Sum::Good,
    };
    let ip = ip_packet(&acking, false, IpProtocol::Homa);
    out.push(eth(true, false, None, &ip));
    // IPv6 with a hop-by-hop options header (8 bytes of padding) before a
    // BUSY.
    let busy = homa_bytes(&specs[8], B6.into(), A6.into());
    let mut ext = vec![146, 0, 1, 4, 0, 0, 0, 0];
    ext.extend_from_slice(&busy);
    let ip = frames::ipv6(B6, A6, IpProtocol::Unknown(0), 7 << 5, 64, &ext);
    out.push(eth(false, true, None, &ip));
    out
}

/// A captured frame and its length on the wire.
type Captured = (Vec<u8>, usize);

/// A classic little-endian microsecond pcap.
fn pcap(link_type: u32, snaplen: u32, frames: &[Captured]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2_c3d4_u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&snaplen.to_le_bytes());
    out.extend_from_slice(&link_type.to_le_bytes());
    for (i, (frame, orig_len)) in frames.iter().enumerate() {
        out.extend_from_slice(&1_700_000_000_u32.to_le_bytes());
        out.extend_from_slice(&(i as u32 * 10).to_le_bytes());
        out.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        out.extend_from_slice(&(*orig_len as u32).to_le_bytes());
        out.extend_from_slice(frame);
    }
    out
}

/// A little-endian pcapng block.
fn block(out: &mut Vec<u8>, block_type: u32, body: &[u8]) {
    let mut body = body.to_vec();
    while !body.len().is_multiple_of(4) {
        body.push(0);
    }
    let total = (body.len() + 12) as u32;
    out.extend_from_slice(&block_type.to_le_bytes());
    out.extend_from_slice(&total.to_le_bytes());
    out.extend_from_slice(&body);
    out.extend_from_slice(&total.to_le_bytes());
}

/// A pcapng of Ethernet frames with nanosecond timestamps.
fn pcapng(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut shb = Vec::new();
    shb.extend_from_slice(&0x1a2b_3c4d_u32.to_le_bytes());
    shb.extend_from_slice(&1u16.to_le_bytes());
    shb.extend_from_slice(&0u16.to_le_bytes());
    shb.extend_from_slice(&u64::MAX.to_le_bytes());
    block(&mut out, 0x0a0d_0d0a, &shb);
    let mut idb = Vec::new();
    idb.extend_from_slice(&1u16.to_le_bytes());
    idb.extend_from_slice(&0u16.to_le_bytes());
    idb.extend_from_slice(&0u32.to_le_bytes());
    idb.extend_from_slice(&[9, 0, 1, 0, 9, 0, 0, 0]); // if_tsresol = 9
    idb.extend_from_slice(&[0, 0, 0, 0]);
    block(&mut out, 1, &idb);
    for (i, frame) in frames.iter().enumerate() {
        let ts = 1_700_000_000_000_000_000_u64 + i as u64 * 1_001;
        let mut epb = Vec::new();
        epb.extend_from_slice(&0u32.to_le_bytes());
        epb.extend_from_slice(&((ts >> 32) as u32).to_le_bytes());
        epb.extend_from_slice(&(ts as u32).to_le_bytes());
        epb.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        epb.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        epb.extend_from_slice(frame);
        block(&mut out, 6, &epb);
    }
    out
}

/// Linux cooked v1 header: sent by us (4) or to us (0), ARPHRD_ETHER.
fn sll1(from_client: bool, v6: bool, ip: &[u8]) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend_from_slice(&(if from_client { 4u16 } else { 0 }).to_be_bytes());
    h.extend_from_slice(&1u16.to_be_bytes());
    h.extend_from_slice(&6u16.to_be_bytes());
    let mac = if from_client { A_MAC } else { B_MAC };
    h.extend_from_slice(&mac.0);
    h.extend_from_slice(&[0, 0]);
    h.extend_from_slice(&(if v6 { 0x86ddu16 } else { 0x0800 }).to_be_bytes());
    h.extend_from_slice(ip);
    h
}

/// Linux cooked v2 header, interface 2.
fn sll2(from_client: bool, v6: bool, ip: &[u8]) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend_from_slice(&(if v6 { 0x86ddu16 } else { 0x0800 }).to_be_bytes());
    h.extend_from_slice(&[0, 0]);
    h.extend_from_slice(&2u32.to_be_bytes());
    h.extend_from_slice(&1u16.to_be_bytes());
    h.push(if from_client { 4 } else { 0 });
    h.push(6);
    let mac = if from_client { A_MAC } else { B_MAC };
    h.extend_from_slice(&mac.0);
    h.extend_from_slice(&[0, 0]);
    h.extend_from_slice(ip);
    h
}

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    println!("wrote {} bytes to {}", bytes.len(), path.display());
}

fn main() {
    let dir: PathBuf = std::env::args().nth(1).map_or_else(
        || concat!(env!("CARGO_MANIFEST_DIR"), "/../tools/data").into(),
        PathBuf::from,
    );
    let every = every_type_frames();
    write(&dir, "every-type.pcapng", &pcapng(&every));

    let cut: Vec<Captured> = every
        .iter()
        .map(|f| (f[..f.len().min(128)].to_vec(), f.len()))
        .collect();
    write(&dir, "snaplen.pcap", &pcap(1, 128, &cut));
    let cut: Vec<Captured> = every
        .iter()
        .map(|f| (f[..f.len().min(96)].to_vec(), f.len()))
        .collect();
    write(&dir, "snaplen-96.pcap", &pcap(1, 96, &cut));

    // A short DATA, a GRANT, an ACK, over IPv4 and IPv6.
    let specs = specs();
    let picks = [&specs[14], &specs[3], &specs[13]];
    let mut links: [(&str, u32, Vec<Captured>); 5] = [
        ("link-sll.pcap", 113, Vec::new()),
        ("link-sll2.pcap", 276, Vec::new()),
        ("link-raw.pcap", 101, Vec::new()),
        ("link-ipv4.pcap", 228, Vec::new()),
        ("link-ipv6.pcap", 229, Vec::new()),
    ];
    for v6 in [false, true] {
        for spec in picks {
            let ip = ip_packet(spec, v6, IpProtocol::Homa);
            let c = spec.from_client;
            for (name, _, frames) in links.iter_mut() {
                let frame = match *name {
                    "link-sll.pcap" => sll1(c, v6, &ip),
                    "link-sll2.pcap" => sll2(c, v6, &ip),
                    "link-raw.pcap" => ip.clone(),
                    "link-ipv4.pcap" if !v6 => ip.clone(),
                    "link-ipv6.pcap" if v6 => ip.clone(),
                    _ => continue,
                };
                let len = frame.len();
                frames.push((frame, len));
            }
        }
    }
    for (name, link_type, frames) in &links {
        write(&dir, name, &pcap(*link_type, 65535, frames));
    }
}
