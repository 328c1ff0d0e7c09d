//! Arbitrary bytes as one whole Ethernet frame: every layer is parsed and
//! pretty-printed, and every layer whose representation parsed is emitted
//! again into a buffer of its `buffer_len()` and parsed back, which must
//! give the same representation (up to what emit documents it drops). The
//! bytes after the Ethernet header are also read as an IPv4 and an IPv6
//! packet cut short by a capture.
//!
//! ```text
//! cargo +nightly fuzz run packet_parser -- -max_total_time=60
//! ```

#![no_main]

use core::fmt::{self, Write};

use libfuzzer_sys::fuzz_target;

use homa_stack::wire::pretty::{dissect, Link, Network, Transport};
use homa_stack::wire::{
    homa, icmpv4, icmpv6, ArpPacket, ArpRepr, EthernetFrame, EthernetRepr, Icmpv4Packet,
    Icmpv4Repr, Icmpv6Packet, Icmpv6Repr, Ipv4Packet, Ipv4Repr, Ipv6Addr, Ipv6Packet, Ipv6Repr,
    PrettyFrame,
};

/// A fixed buffer on the stack that keeps what fits and drops the rest, so
/// formatting needs no allocation and any length of output is fine.
struct Truncating {
    buf: [u8; 512],
    len: usize,
}

impl Write for Truncating {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self.buf.len() - self.len;
        let n = s.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

fuzz_target!(|frame: &[u8]| {
    let mut out = Truncating {
        buf: [0; 512],
        len: 0,
    };
    write!(out, "{}", PrettyFrame(frame)).expect("the sink never fails");

    truncated_views(frame.get(14..).unwrap_or(&[]));

    let d = dissect(frame);
    if let Link::Ethernet(repr) = d.link {
        ethernet_round_trip(&repr);
    }
    match d.network {
        Network::Arp(repr) => arp_round_trip(&repr),
        Network::Ipv4 { repr, .. } => ipv4_round_trip(&repr),
        Network::Ipv6(repr) => ipv6_round_trip(&repr),
        Network::None | Network::Other { .. } | Network::Malformed { .. } => {}
    }
    match &d.transport {
        Transport::Icmpv4 { repr, .. } => icmpv4_round_trip(repr),
        Transport::Icmpv6 { repr, .. } => {
            let Network::Ipv6(ip) = d.network else {
                panic!("ICMPv6 outside IPv6")
            };
            icmpv6_round_trip(&ip.src_addr, &ip.dst_addr, repr);
        }
        Transport::Homa { repr, .. } => homa_round_trip(repr),
        Transport::None
        | Transport::IcmpOther { .. }
        | Transport::Other { .. }
        | Transport::Malformed { .. } => {}
    }
});

/// The IP views of a capture cut short: every header accessor of a
/// truncated view stays in bounds, and what it holds of the payload is all
/// of it when the packet is whole.
fn truncated_views(ip: &[u8]) {
    if let Ok(p) = Ipv4Packet::new_truncated(ip) {
        let _ = (p.src_addr(), p.dst_addr(), p.next_header(), p.ident());
        let _ = (p.options(), p.verify_checksum(), p.frag_offset());
        if let Ok(whole) = Ipv4Packet::new_checked(ip) {
            assert_eq!(p.captured_payload(), whole.payload());
        }
    }
    if let Ok(p) = Ipv6Packet::new_truncated(ip) {
        let _ = (p.src_addr(), p.dst_addr(), p.next_header(), p.flow_label());
        if let Ok(whole) = Ipv6Packet::new_checked(ip) {
            assert_eq!(p.captured_payload(), whole.payload());
        }
    }
}

fn ethernet_round_trip(repr: &EthernetRepr) {
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut EthernetFrame::new_unchecked(&mut buf[..]));
    let frame = EthernetFrame::new_checked(&buf[..]).expect("emitted Ethernet header checks");
    assert_eq!(EthernetRepr::parse(&frame), Ok(*repr));
}

fn arp_round_trip(repr: &ArpRepr) {
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut ArpPacket::new_unchecked(&mut buf[..]));
    let packet = ArpPacket::new_checked(&buf[..]).expect("emitted ARP checks");
    assert_eq!(ArpRepr::parse(&packet), Ok(*repr));
}

/// The header is followed by `payload_len` zero bytes so the total length
/// it announces is there.
fn ipv4_round_trip(repr: &Ipv4Repr) {
    let mut buf = vec![0u8; repr.buffer_len() + repr.payload_len];
    repr.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]), true);
    let packet = Ipv4Packet::new_checked(&buf[..]).expect("emitted IPv4 checks");
    assert_eq!(Ipv4Repr::parse(&packet, true), Ok(*repr));
}

fn ipv6_round_trip(repr: &Ipv6Repr) {
    let mut buf = vec![0u8; repr.buffer_len() + repr.payload_len];
    repr.emit(&mut Ipv6Packet::new_unchecked(&mut buf[..]));
    let packet = Ipv6Packet::new_checked(&buf[..]).expect("emitted IPv6 checks");
    assert_eq!(Ipv6Repr::parse(&packet), Ok(*repr));
}

/// An unreachable message quotes at most `MAX_QUOTED_DATA` bytes on emit.
fn icmpv4_round_trip(repr: &Icmpv4Repr<'_>) {
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Icmpv4Packet::new_unchecked(&mut buf[..]), true);
    let packet = Icmpv4Packet::new_checked(&buf[..]).expect("emitted ICMPv4 checks");
    let expected = match *repr {
        Icmpv4Repr::DstUnreachable {
            reason,
            header,
            data,
        } => Icmpv4Repr::DstUnreachable {
            reason,
            header,
            data: &data[..data.len().min(icmpv4::MAX_QUOTED_DATA)],
        },
        other => other,
    };
    assert_eq!(Icmpv4Repr::parse(&packet, true), Ok(expected));
}

fn icmpv6_round_trip(src: &Ipv6Addr, dst: &Ipv6Addr, repr: &Icmpv6Repr<'_>) {
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(
        src,
        dst,
        &mut Icmpv6Packet::new_unchecked(&mut buf[..]),
        true,
    );
    let packet = Icmpv6Packet::new_checked(&buf[..]).expect("emitted ICMPv6 checks");
    let expected = match *repr {
        Icmpv6Repr::DstUnreachable {
            reason,
            header,
            data,
        } => Icmpv6Repr::DstUnreachable {
            reason,
            header,
            data: &data[..data.len().min(icmpv6::MAX_QUOTED_DATA)],
        },
        other => other,
    };
    assert_eq!(Icmpv6Repr::parse(src, dst, &packet, true), Ok(expected));
}

/// The whole representation is compared: for DATA that is every header
/// field and the payload bytes.
fn homa_round_trip(repr: &homa::Repr<'_>) {
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut homa::Packet::new_unchecked(&mut buf[..]));
    let packet = homa::Packet::new_checked(&buf[..]).expect("emitted Homa checks");
    let back = homa::Repr::parse(&packet).expect("emitted Homa parses");
    assert_eq!(back.sport, repr.sport);
    assert_eq!(back.dport, repr.dport);
    assert_eq!(back.sender_id, repr.sender_id);
    match (&back.kind, &repr.kind) {
        (
            homa::Kind::Data { header, payload },
            homa::Kind::Data {
                header: want_header,
                payload: want_payload,
            },
        ) => {
            assert_eq!(header, want_header);
            assert_eq!(payload, want_payload);
        }
        (kind, want) => assert_eq!(kind, want),
    }
}
