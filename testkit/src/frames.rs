//! Whole frames from homa-stack's wire types: the typed face of
//! [`homa_phy::testing::frames`] (which writes the Ethernet, IPv4 and IPv6
//! headers), plus Homa and ICMP messages emitted from their `Repr`s. For
//! the programs that write sample captures and fuzz seeds, and the fuzz
//! targets.

use homa_phy::testing::frames as raw;
use homa_stack::wire::homa;
use homa_stack::wire::{
    EtherType, EthernetAddress, Icmpv4Packet, Icmpv4Repr, Icmpv6Packet, Icmpv6Repr, IpAddr,
    IpProtocol, Ipv4Addr, Ipv6Addr, VlanTag,
};

/// The 802.1Q TCI of `tag`: priority, drop eligibility, VLAN id.
pub fn tci(tag: VlanTag) -> u16 {
    u16::from(tag.pcp & 7) << 13 | u16::from(tag.dei) << 12 | (tag.vid & 0x0fff)
}

/// An Ethernet frame around `payload`, tagged when `vlan` is given.
pub fn ethernet(
    src: EthernetAddress,
    dst: EthernetAddress,
    vlan: Option<VlanTag>,
    ethertype: EtherType,
    payload: &[u8],
) -> Vec<u8> {
    raw::ethernet(src.0, dst.0, vlan.map(tci), ethertype.into(), payload)
}

/// An IPv4 packet around `payload`, header checksum filled, TTL 64.
pub fn ipv4(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: IpProtocol,
    tos: u8,
    payload: &[u8],
) -> Vec<u8> {
    raw::ipv4(src, dst, protocol.into(), tos, payload)
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
    raw::ipv6(src, dst, protocol.into(), traffic_class, hop_limit, payload)
}

/// A Homa packet's bytes (checksum left 0).
pub fn homa(repr: &homa::Repr<'_>) -> Vec<u8> {
    let mut packet = vec![0; repr.buffer_len()];
    repr.emit(&mut homa::Packet::new_unchecked(&mut packet[..]));
    packet
}

/// A Homa packet's bytes, checksum filled for `src` to `dst`.
pub fn homa_checksummed(repr: &homa::Repr<'_>, src: IpAddr, dst: IpAddr) -> Vec<u8> {
    let mut packet = homa(repr);
    homa::Packet::new_unchecked(&mut packet[..]).fill_checksum(&src, &dst);
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

#[cfg(test)]
mod tests {
    use super::*;
    use homa_stack::wire::{EthernetFrame, Ipv4Packet, Ipv4Repr};

    #[test]
    fn frames_built_here_parse_back_with_homa_stacks_wire_module() {
        let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let repr = homa::Repr {
            sport: 1,
            dport: 2,
            sender_id: 3,
            kind: homa::Kind::Busy,
        };
        let body = homa_checksummed(&repr, a.into(), b.into());
        let tag = VlanTag {
            pcp: 5,
            dei: true,
            vid: 42,
        };
        let f = ethernet(
            EthernetAddress([2; 6]),
            EthernetAddress([4; 6]),
            Some(tag),
            EtherType::Ipv4,
            &ipv4(a, b, IpProtocol::Homa, 0xa0, &body),
        );
        let eth = EthernetFrame::new_checked(&f[..]).unwrap();
        assert_eq!(eth.vlan_tag(), Some(tag));
        assert_eq!(eth.ethertype(), EtherType::Ipv4);
        let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
        let ipr = Ipv4Repr::parse(&ip, true).unwrap();
        assert_eq!((ipr.src_addr, ipr.dst_addr, ipr.tos), (a, b, 0xa0));
        let h = homa::Packet::new_checked(ip.payload()).unwrap();
        assert!(h.verify_checksum(&a.into(), &b.into()));
        assert_eq!(homa::Repr::parse(&h).unwrap(), repr);
    }
}
