//! Writes the seed corpus of the `packet_parser` fuzz target: one whole
//! Ethernet frame per file, named by what it holds.
//!
//! ```text
//! cargo run -p homa-testkit --bin make-fuzz-corpus [DIR]
//! ```
//!
//! DIR defaults to `fuzz/corpus/packet_parser` in the repository. The seeds
//! give the fuzzer one valid frame of every layer it should explore: ARP,
//! ICMPv4 echo and unreachable, IPv6 neighbor discovery, the Homa packet
//! types with fields (DATA, GRANT, RESEND, ACK, CUTOFFS) and a VLAN tag.

use std::path::PathBuf;

use homa_stack::wire::homa::{self, Ack, DataHeader, Kind};
use homa_stack::wire::{
    EtherType, EthernetAddress, Icmpv4DstUnreachable, Icmpv4Repr, Icmpv6Repr, IpProtocol, Ipv4Addr,
    Ipv4Repr, Ipv6Addr, VlanTag,
};

use homa_testkit::frames;

const A_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
const B_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);
const A_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const A_IP6: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
/// The solicited-node multicast address of fe80::2.
const B_SOLICITED: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00, 2);
const B_IP6: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2);

/// A Homa packet from A to B in an untagged IPv4 frame at priority `prio`.
fn homa_v4(repr: &homa::Repr<'_>, prio: u8) -> Vec<u8> {
    let ip = frames::ipv4(A_IP, B_IP, IpProtocol::Homa, prio << 5, &frames::homa(repr));
    frames::ethernet(A_MAC, B_MAC, None, EtherType::Ipv4, &ip)
}

fn repr(sender_id: u64, kind: Kind<'_>) -> homa::Repr<'_> {
    homa::Repr {
        sport: 32768,
        dport: 500,
        sender_id,
        kind,
    }
}

fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let arp_bytes = homa_phy::testing::frames::arp(1, A_MAC.0, A_IP, [0; 6], B_IP);

    let ping = frames::icmpv4(&Icmpv4Repr::EchoRequest {
        ident: 1,
        seq_no: 1,
        data: b"seed",
    });

    // B answers a Homa packet to a closed port: the quote holds its ports.
    let busy = frames::homa(&repr(2, Kind::Busy));
    let unreachable = frames::icmpv4(&Icmpv4Repr::DstUnreachable {
        reason: Icmpv4DstUnreachable::PortUnreachable,
        header: Ipv4Repr {
            src_addr: A_IP,
            dst_addr: B_IP,
            next_header: IpProtocol::Homa,
            payload_len: busy.len(),
            hop_limit: 64,
            tos: 0,
        },
        data: &busy[..8],
    });

    let solicit = frames::icmpv6(
        A_IP6,
        B_SOLICITED,
        &Icmpv6Repr::NeighborSolicit {
            target_addr: B_IP6,
            lladdr: Some(A_MAC),
        },
    );

    let payload: Vec<u8> = (0..64).collect();
    let data = repr(
        2,
        Kind::Data {
            header: DataHeader {
                message_length: 3000,
                incoming: 3000,
                ack: Some(Ack {
                    client_id: 4,
                    server_port: 500,
                }),
                cutoff_version: 1,
                retransmit: false,
                offset: 1424,
            },
            payload: &payload,
        },
    );
    let mut acks = heapless::Vec::new();
    for id in [2, 4] {
        acks.push(Ack {
            client_id: id,
            server_port: 500,
        })
        .expect("capacity 5");
    }
    let ipv4_frame = |ip: Vec<u8>| frames::ethernet(A_MAC, B_MAC, None, EtherType::Ipv4, &ip);
    vec![
        (
            "arp_request",
            frames::ethernet(
                A_MAC,
                EthernetAddress::BROADCAST,
                None,
                EtherType::Arp,
                &arp_bytes,
            ),
        ),
        (
            "icmpv4_echo_request",
            ipv4_frame(frames::ipv4(A_IP, B_IP, IpProtocol::Icmp, 0, &ping)),
        ),
        (
            "icmpv4_port_unreachable",
            frames::ethernet(
                B_MAC,
                A_MAC,
                None,
                EtherType::Ipv4,
                &frames::ipv4(B_IP, A_IP, IpProtocol::Icmp, 0, &unreachable),
            ),
        ),
        (
            "icmpv6_neighbor_solicit",
            frames::ethernet(
                A_MAC,
                EthernetAddress([0x33, 0x33, 0xff, 0, 0, 2]),
                None,
                EtherType::Ipv6,
                &frames::ipv6(A_IP6, B_SOLICITED, IpProtocol::Icmpv6, 0, 255, &solicit),
            ),
        ),
        ("homa_data", homa_v4(&data, 5)),
        (
            "homa_grant",
            homa_v4(
                &repr(
                    3,
                    Kind::Grant {
                        offset: 60_000,
                        priority: 2,
                    },
                ),
                7,
            ),
        ),
        (
            "homa_resend",
            homa_v4(
                &repr(
                    3,
                    Kind::Resend {
                        offset: 0,
                        length: homa::RESEND_ALL,
                        priority: 6,
                    },
                ),
                7,
            ),
        ),
        ("homa_ack", homa_v4(&repr(6, Kind::Ack { acks }), 7)),
        (
            "homa_cutoffs",
            homa_v4(
                &repr(
                    3,
                    Kind::Cutoffs {
                        unsched_cutoffs: [0, 0, 0, 0, 1_000_000, 15_000, 2800, 200],
                        version: 1,
                    },
                ),
                7,
            ),
        ),
        (
            "vlan_homa_busy",
            frames::ethernet(
                A_MAC,
                B_MAC,
                Some(VlanTag {
                    pcp: 5,
                    dei: false,
                    vid: 42,
                }),
                EtherType::Ipv4,
                &frames::ipv4(A_IP, B_IP, IpProtocol::Homa, 7 << 5, &busy),
            ),
        ),
        (
            "homa_data_ipv6",
            frames::ethernet(
                A_MAC,
                B_MAC,
                None,
                EtherType::Ipv6,
                &frames::ipv6(
                    A_IP6,
                    B_IP6,
                    IpProtocol::Homa,
                    4 << 5,
                    64,
                    &frames::homa(&data),
                ),
            ),
        ),
    ]
}

fn main() {
    let dir: PathBuf = std::env::args().nth(1).map_or_else(
        || concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz/corpus/packet_parser").into(),
        PathBuf::from,
    );
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for (name, frame) in seeds() {
        let path = dir.join(name);
        std::fs::write(&path, &frame).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        println!(
            "{} ({} bytes): {}",
            path.display(),
            frame.len(),
            homa_stack::wire::PrettyFrame(&frame)
        );
    }
}
