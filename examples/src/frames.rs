//! Building whole Ethernet frames from wire representations, for the
//! programs that write sample captures and fuzz seeds. Included by path
//! (`#[path = "../frames.rs"] mod frames;`): the examples crate has no library.

#![allow(dead_code)] // Each program uses a different part.

use homa_stack::wire::homa;
use homa_stack::wire::{
    EtherType, EthernetAddress, EthernetFrame, EthernetRepr, Icmpv4Packet, Icmpv4Repr,
    Icmpv6Packet, Icmpv6Repr, IpProtocol, Ipv4Addr, Ipv4Packet, Ipv4Repr, Ipv6Addr, Ipv6Packet,
    Ipv6Repr, VlanTag,
};

/// An Ethernet frame around `payload`, tagged when `vlan` is given.
pub fn ethernet(
    src: EthernetAddress,
    dst: EthernetAddress,
    vlan: Option<VlanTag>,
    ethertype: EtherType,
    payload: &[u8],
) -> Vec<u8> {
    let repr = EthernetRepr {
        src_addr: src,
        dst_addr: dst,
        vlan,
        ethertype,
    };
    let mut frame = vec![0; repr.buffer_len() + payload.len()];
    repr.emit(&mut EthernetFrame::new_unchecked(&mut frame[..]));
    frame[repr.buffer_len()..].copy_from_slice(payload);
    frame
}

/// An IPv4 packet around `payload`, header checksum filled, TTL 64.
pub fn ipv4(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: IpProtocol,
    tos: u8,
    payload: &[u8],
) -> Vec<u8> {
    let repr = Ipv4Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: protocol,
        payload_len: payload.len(),
        hop_limit: 64,
        tos,
    };
    let mut packet = vec![0; repr.buffer_len() + payload.len()];
    repr.emit(&mut Ipv4Packet::new_unchecked(&mut packet[..]), true);
    packet[repr.buffer_len()..].copy_from_slice(payload);
    packet
}

/// An IPv6 packet around `payload`.
pub fn ipv6(
    src: Ipv6Addr,
    dst: Ipv6Addr,
    protocol: IpProtocol,
    traffic_class: u8,
    hop_limit: u8,
    payload: &[u8],
) -> Vec<u8> {
    let repr = Ipv6Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: protocol,
        payload_len: payload.len(),
        hop_limit,
        traffic_class,
    };
    let mut packet = vec![0; repr.buffer_len() + payload.len()];
    repr.emit(&mut Ipv6Packet::new_unchecked(&mut packet[..]));
    packet[repr.buffer_len()..].copy_from_slice(payload);
    packet
}

/// A Homa packet's bytes (checksum left 0).
pub fn homa(repr: &homa::Repr<'_>) -> Vec<u8> {
    let mut packet = vec![0; repr.buffer_len()];
    repr.emit(&mut homa::Packet::new_unchecked(&mut packet[..]));
    packet
}

/// An ICMPv4 message's bytes, checksum filled.
pub fn icmpv4(repr: &Icmpv4Repr<'_>) -> Vec<u8> {
    let mut packet = vec![0; repr.buffer_len()];
    repr.emit(&mut Icmpv4Packet::new_unchecked(&mut packet[..]), true);
    packet
}

/// An ICMPv6 message's bytes, checksum filled for `src` to `dst`.
pub fn icmpv6(src: Ipv6Addr, dst: Ipv6Addr, repr: &Icmpv6Repr<'_>) -> Vec<u8> {
    let mut packet = vec![0; repr.buffer_len()];
    repr.emit(
        &src,
        &dst,
        &mut Icmpv6Packet::new_unchecked(&mut packet[..]),
        true,
    );
    packet
}
