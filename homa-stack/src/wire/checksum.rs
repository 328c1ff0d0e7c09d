//! The Internet checksum (RFC 1071) and IP pseudo-headers.
//!
//! Sums are kept as unfolded `u32` partial sums so pieces can be combined;
//! [`finish`] folds and complements. A computed checksum of zero is sent as
//! zero (Homa and ICMP have no "no checksum" encoding, unlike UDP).

use super::{IpProtocol, Ipv4Addr, Ipv6Addr};

/// The ones'-complement sum of `data` as big-endian 16-bit words (an odd final
/// byte is padded with zero), folded to 16 bits but not complemented.
///
/// Fast on long buffers: the ones'-complement sum does not depend on how the
/// words are grouped or in which byte order they are read (RFC 1071 section
/// 2), so 4-byte native-endian words are added into a 64-bit accumulator
/// (the compiler can vectorise that loop), folded once per block of
/// 64 KiB, and the folded sum is byte-swapped on little-endian
/// machines. The result equals the word-by-word definition on every input
/// (a test compares the two).
pub fn sum(data: &[u8]) -> u32 {
    let mut acc: u64 = 0;
    let mut blocks = data.chunks_exact(BLOCK);
    for block in &mut blocks {
        acc += sum_words(block);
        // Fold between blocks so no length can overflow the accumulator.
        acc = fold64(acc);
    }
    let tail = blocks.remainder();
    acc += sum_words(tail);
    // What `sum_words` left: at most 3 bytes, starting at an even offset.
    let mut rest = tail.chunks_exact(4).remainder();
    if let [a, b, more @ ..] = rest {
        acc += u64::from(u16::from_ne_bytes([*a, *b]));
        rest = more;
    }
    if let [last] = rest {
        // The pad byte follows `last`, so `last` is the word's first byte.
        acc += u64::from(u16::from_ne_bytes([*last, 0]));
    }
    let folded = fold64(acc) as u16;
    // Sums of native-endian words are the byte-swapped big-endian sum.
    let be = if cfg!(target_endian = "little") {
        folded.swap_bytes()
    } else {
        folded
    };
    u32::from(be)
}

/// Bytes summed between two folds in [`sum`]: small enough that the 64-bit
/// accumulator cannot overflow (each 4-byte word adds less than 2^32).
const BLOCK: usize = 1 << 16;

/// The sum of `data`'s whole 4-byte native-endian words (any 0 to 3 trailing
/// bytes are left to the caller). At most `BLOCK` bytes, so it cannot
/// overflow: 2^14 words of less than 2^32 each.
fn sum_words(data: &[u8]) -> u64 {
    let mut acc: u64 = 0;
    for word in data.chunks_exact(4) {
        acc += u64::from(u32::from_ne_bytes([word[0], word[1], word[2], word[3]]));
    }
    acc
}

/// Folds a 64-bit sum of 16-bit words to 16 bits (end-around carry).
fn fold64(mut acc: u64) -> u64 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc
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
    use proptest::prelude::*;

    /// The definition, word by word with a fold after each (the
    /// implementation [`sum`] replaced), kept as the reference.
    fn reference_sum(data: &[u8]) -> u32 {
        let mut acc: u32 = 0;
        let mut chunks = data.chunks_exact(2);
        for pair in &mut chunks {
            acc += u32::from(u16::from_be_bytes([pair[0], pair[1]]));
            acc = (acc & 0xffff) + (acc >> 16);
        }
        if let [last] = chunks.remainder() {
            acc += u32::from(*last) << 8;
        }
        fold(acc)
    }

    proptest! {
        #[test]
        fn matches_the_reference_on_any_bytes(data in proptest::collection::vec(any::<u8>(), 0..3000)) {
            prop_assert_eq!(sum(&data), reference_sum(&data));
        }

        #[test]
        fn matches_the_reference_on_any_sub_slice(
            data in proptest::collection::vec(any::<u8>(), 0..600),
            start in 0usize..600,
        ) {
            // Slices that start at any alignment in memory.
            let start = start.min(data.len());
            prop_assert_eq!(sum(&data[start..]), reference_sum(&data[start..]));
        }

        #[test]
        fn matches_the_reference_on_mostly_ones(
            len in 0usize..2000,
            zeros in proptest::collection::vec(any::<prop::sample::Index>(), 0..4),
        ) {
            // All-0xff and near it: the sums where carries pile up.
            let mut data = vec![0xffu8; len];
            for z in zeros {
                if len > 0 {
                    data[z.index(len)] = 0;
                }
            }
            prop_assert_eq!(sum(&data), reference_sum(&data));
        }
    }

    fn check_lengths(lengths: impl Iterator<Item = usize>) {
        for len in lengths {
            for fill in [0x00u8, 0x01, 0x80, 0xfe, 0xff] {
                let data = vec![fill; len];
                assert_eq!(sum(&data), reference_sum(&data), "len {len} fill {fill:#x}");
            }
            let ramp: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            assert_eq!(sum(&ramp), reference_sum(&ramp), "ramp len {len}");
        }
    }

    #[test]
    fn short_lengths_match_the_reference() {
        // Empty, odd and even lengths, each with uniform and varied bytes.
        check_lengths(0..70);
        assert_eq!(sum(&[]), 0);
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn lengths_around_a_block_match_the_reference() {
        check_lengths(
            [
                BLOCK - 3,
                BLOCK - 1,
                BLOCK,
                BLOCK + 1,
                BLOCK + 2,
                3 * BLOCK + 5,
            ]
            .into_iter(),
        );
    }

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
