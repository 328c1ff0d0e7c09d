//! Frames built from raw fields, byte by byte: Ethernet (optionally
//! 802.1Q-tagged), IPv4 (header checksum filled), IPv6 and ARP. Each
//! builder returns the whole packet, so they nest:
//! `ethernet(src, dst, None, IPV4, &ipv4(a, b, HOMA, 0, &body))`.

use core::net::{Ipv4Addr, Ipv6Addr};
use std::vec::Vec;

/// The EtherType of IPv4.
pub const IPV4: u16 = 0x0800;
/// The EtherType of ARP.
pub const ARP: u16 = 0x0806;
/// The EtherType of IPv6.
pub const IPV6: u16 = 0x86dd;
/// The EtherType of an 802.1Q tag.
pub const VLAN: u16 = 0x8100;
/// The IP protocol number of ICMP.
pub const ICMP: u8 = 1;
/// The IP protocol number of ICMPv6.
pub const ICMPV6: u8 = 58;
/// The IP protocol number of Homa.
pub const HOMA: u8 = 146;
/// The broadcast link address.
pub const BROADCAST: [u8; 6] = [0xff; 6];

/// The Internet checksum (RFC 1071) of `data`.
pub fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An Ethernet frame from `src` to `dst` around `payload`; with `vlan`, an
/// 802.1Q tag carrying that TCI (priority in the top 3 bits, VLAN id in
/// the low 12).
pub fn ethernet(
    src: [u8; 6],
    dst: [u8; 6],
    vlan: Option<u16>,
    ethertype: u16,
    payload: &[u8],
) -> Vec<u8> {
    let mut f = Vec::with_capacity(18 + payload.len());
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    if let Some(tci) = vlan {
        f.extend_from_slice(&VLAN.to_be_bytes());
        f.extend_from_slice(&tci.to_be_bytes());
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// An IPv4 header (20 bytes, no options): identification 0, Don't
/// Fragment, TTL 64, header checksum filled.
pub fn ipv4_header(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: u8,
    tos: u8,
    payload_len: usize,
) -> [u8; 20] {
    let mut h = [0u8; 20];
    h[0] = 0x45;
    h[1] = tos;
    h[2..4].copy_from_slice(&((20 + payload_len) as u16).to_be_bytes());
    h[6] = 0x40; // DF
    h[8] = 64;
    h[9] = protocol;
    h[12..16].copy_from_slice(&src.octets());
    h[16..20].copy_from_slice(&dst.octets());
    let sum = checksum(&h);
    h[10..12].copy_from_slice(&sum.to_be_bytes());
    h
}

/// An IPv4 packet around `payload` (see [`ipv4_header`]).
pub fn ipv4(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, tos: u8, payload: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(20 + payload.len());
    p.extend_from_slice(&ipv4_header(src, dst, protocol, tos, payload.len()));
    p.extend_from_slice(payload);
    p
}

/// An IPv6 packet around `payload` (flow label 0, no extension headers).
pub fn ipv6(
    src: Ipv6Addr,
    dst: Ipv6Addr,
    next_header: u8,
    traffic_class: u8,
    hop_limit: u8,
    payload: &[u8],
) -> Vec<u8> {
    let mut p = Vec::with_capacity(40 + payload.len());
    p.push(0x60 | traffic_class >> 4);
    p.push(traffic_class << 4);
    p.extend_from_slice(&[0, 0]);
    p.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    p.push(next_header);
    p.push(hop_limit);
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.octets());
    p.extend_from_slice(payload);
    p
}

/// An ARP request (`operation` 1) or reply (2) for Ethernet and IPv4,
/// from the sender (`sha`, `spa`) about the target (`tha`, `tpa`).
pub fn arp(operation: u16, sha: [u8; 6], spa: Ipv4Addr, tha: [u8; 6], tpa: Ipv4Addr) -> [u8; 28] {
    let mut a = [0u8; 28];
    a[0..2].copy_from_slice(&1u16.to_be_bytes()); // Ethernet
    a[2..4].copy_from_slice(&IPV4.to_be_bytes());
    a[4] = 6;
    a[5] = 4;
    a[6..8].copy_from_slice(&operation.to_be_bytes());
    a[8..14].copy_from_slice(&sha);
    a[14..18].copy_from_slice(&spa.octets());
    a[18..24].copy_from_slice(&tha);
    a[24..28].copy_from_slice(&tpa.octets());
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv4_header_checksums_to_zero_and_nests_in_a_tagged_frame() {
        let ip = ipv4(
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
            HOMA,
            0xa0,
            b"abc",
        );
        assert_eq!(ip.len(), 23);
        assert_eq!(checksum(&ip[..20]), 0, "a filled header sums to zero");
        assert_eq!(&ip[2..4], &[0, 23]);
        assert_eq!(ip[9], HOMA);
        let f = ethernet([2; 6], BROADCAST, Some(0xa02a), IPV4, &ip);
        assert_eq!(&f[..6], &BROADCAST);
        assert_eq!(&f[12..18], &[0x81, 0x00, 0xa0, 0x2a, 0x08, 0x00]);
        assert_eq!(&f[18..], &ip[..]);
    }

    #[test]
    fn checksum_matches_rfc_1071s_example() {
        // RFC 1071 section 3: the sum of 00 01 f2 03 f4 f5 f6 f7 is 0xddf2.
        assert_eq!(
            checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            !0xddf2
        );
        assert_eq!(checksum(&[0xff]), !0xff00, "an odd byte is padded");
    }

    #[test]
    fn ipv6_and_arp_put_each_field_in_place() {
        let p = ipv6(
            Ipv6Addr::LOCALHOST,
            Ipv6Addr::UNSPECIFIED,
            ICMPV6,
            0xab,
            255,
            &[1, 2],
        );
        assert_eq!(&p[..8], &[0x6a, 0xb0, 0, 0, 0, 2, 58, 255]);
        assert_eq!(p[23], 1);
        assert_eq!(p.len(), 42);
        let a = arp(
            1,
            [2; 6],
            Ipv4Addr::new(1, 2, 3, 4),
            [0; 6],
            Ipv4Addr::new(5, 6, 7, 8),
        );
        assert_eq!(&a[..8], &[0, 1, 8, 0, 6, 4, 0, 1]);
        assert_eq!(&a[14..18], &[1, 2, 3, 4]);
        assert_eq!(&a[24..], &[5, 6, 7, 8]);
    }
}
