//! The Internet checksum (RFC 1071) and IP pseudo-headers.
//!
//! Sums are kept as unfolded `u32` partial sums so pieces can be combined;
//! [`finish`] folds and complements. A computed checksum of zero is sent as
//! zero (Homa and ICMP have no "no checksum" encoding, unlike UDP).

use super::{IpProtocol, Ipv4Addr, Ipv6Addr};

/// The ones'-complement sum of `data` as big-endian 16-bit words (an odd final
/// byte is padded with zero), not yet folded.
pub fn sum(data: &[u8]) -> u32 {
    let mut acc: u32 = 0;
    let mut chunks = data.chunks_exact(2);
    for pair in &mut chunks {
        acc = acc.wrapping_add(u32::from(u16::from_be_bytes([pair[0], pair[1]])));
        // Fold early so the accumulator never overflows, whatever the length.
        acc = (acc & 0xffff) + (acc >> 16);
    }
    if let [last] = chunks.remainder() {
        acc = acc.wrapping_add(u32::from(*last) << 8);
    }
    fold(acc)
}

/// Folds a partial sum to 16 bits (without complementing).
pub fn fold(mut acc: u32) -> u32 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc
}

/// Combines partial sums.
pub fn combine(parts: &[u32]) -> u32 {
    fold(parts.iter().fold(0u32, |a, p| fold(a.wrapping_add(*p))))
}

/// The checksum field value for a finished sum: the folded ones' complement.
pub fn finish(acc: u32) -> u16 {
    !(fold(acc) as u16)
}

/// The checksum of `data` alone (e.g. the IPv4 header, ICMPv4).
pub fn data(data: &[u8]) -> u16 {
    finish(sum(data))
}

/// Partial sum of the IPv4 pseudo-header for a transport segment of `length`
/// bytes carried with `protocol`.
pub fn pseudo_header_v4(src: &Ipv4Addr, dst: &Ipv4Addr, protocol: IpProtocol, length: u32) -> u32 {
    let mut acc = sum(&src.octets()) + sum(&dst.octets());
    acc += u32::from(u8::from(protocol));
    acc += length & 0xffff;
    acc += length >> 16;
    fold(acc)
}

/// Partial sum of the IPv6 pseudo-header (RFC 8200 section 8.1).
pub fn pseudo_header_v6(src: &Ipv6Addr, dst: &Ipv6Addr, protocol: IpProtocol, length: u32) -> u32 {
    let mut acc = sum(&src.octets()) + sum(&dst.octets());
    acc += u32::from(u8::from(protocol));
    acc += length & 0xffff;
    acc += length >> 16;
    fold(acc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // The worked example of RFC 1071 section 3: sum 0xddf2, checksum 0x220d.
        let bytes = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(sum(&bytes), 0xddf2);
        assert_eq!(data(&bytes), 0x220d);
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(sum(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
    }

    #[test]
    fn a_buffer_with_its_checksum_sums_to_all_ones() {
        let mut bytes = [
            0x45u8, 0, 0, 0x54, 0x12, 0x34, 0x40, 0, 0x40, 0x01, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        let c = data(&bytes);
        bytes[10..12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(sum(&bytes), 0xffff);
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn long_buffers_do_not_overflow() {
        let bytes = [0xffu8; 200_000];
        assert_eq!(sum(&bytes), 0xffff);
    }
}
