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
/// 2), so native-endian machine words (8 bytes, or 4 on 32-bit targets)
/// are added into an accumulator twice as wide (an add and an
/// add-with-carry per word; it cannot overflow on any slice), folded once
/// at the end, and the folded sum is byte-swapped on little-endian
/// machines. The result equals the word-by-word definition on
/// every input (a test compares the two).
///
/// On 64-bit targets long buffers go through one carry chain instead
/// (`sum_chained`): an add-with-carry per word.
pub fn sum(data: &[u8]) -> u32 {
    #[cfg(target_pointer_width = "64")]
    {
        let (acc, rest) = sum_chained(data);
        finish_native(acc, rest)
    }
    #[cfg(not(target_pointer_width = "64"))]
    {
        // Two accumulators: two carry chains the processor runs side by side.
        let (mut a, mut b) = (0, 0);
        let mut blocks = data.chunks_exact(BLOCK_BYTES);
        for block in &mut blocks {
            a += word(block, 0);
            b += word(block, 1);
            a += word(block, 2);
            b += word(block, 3);
        }
        finish_native(a + b, blocks.remainder())
    }
}

/// Words [`sum_chained`]'s loop adds per step.
#[cfg(target_pointer_width = "64")]
const CHAIN_WORDS: usize = 16;

/// The sum of `data` as native-endian words, but for fewer than 32
/// bytes, which it returns. Each 128-byte block's words are added in one
/// carry chain (the compiler makes it an add and fifteen adds-with-carry),
/// then one 64-byte block the same way if there is one, and the chains'
/// final carries are counted apart: a carry out of 64 bits is worth
/// 2^64, which is 1 modulo 2^16 - 1, so the count joins the sum as it
/// is. About 1.3 instructions per 8 bytes, against 2.4 for a word-wide
/// accumulator's add and add-with-carry per word and the loop.
#[cfg(target_pointer_width = "64")]
fn sum_chained(data: &[u8]) -> (Acc, &[u8]) {
    let (mut acc, mut carries) = (0u64, 0u64);
    let mut blocks = data.chunks_exact(CHAIN_WORDS * WORD_BYTES);
    for block in &mut blocks {
        let (s, c) = chain::<CHAIN_WORDS>(acc, block);
        acc = s;
        carries += u64::from(c);
    }
    let mut rest = blocks.remainder();
    let half = CHAIN_WORDS / 2 * WORD_BYTES;
    if rest.len() >= half {
        let (s, c) = chain::<{ CHAIN_WORDS / 2 }>(acc, rest);
        acc = s;
        carries += u64::from(c);
        rest = &rest[half..];
    }
    let mut acc = Acc::from(acc) + Acc::from(carries);
    if rest.len() >= BLOCK_BYTES {
        acc += word(rest, 0) + word(rest, 1) + word(rest, 2) + word(rest, 3);
        rest = &rest[BLOCK_BYTES..];
    }
    (acc, rest)
}

/// `acc` plus the first `N` words of `block` in one carry chain, and the
/// chain's carry out.
#[cfg(target_pointer_width = "64")]
#[inline(always)]
fn chain<const N: usize>(acc: u64, block: &[u8]) -> (u64, bool) {
    let (mut s, mut c) = acc.overflowing_add(native(block, 0));
    for k in 1..N {
        (s, c) = add_carry(s, native(block, k), c);
    }
    (s, c)
}

/// `a + b + carry` and its carry out, written the way the compiler turns
/// into one add-with-carry.
#[cfg(target_pointer_width = "64")]
#[inline(always)]
fn add_carry(a: u64, b: u64, carry: bool) -> (u64, bool) {
    let (s, c1) = a.overflowing_add(b);
    let (s, c2) = s.overflowing_add(u64::from(carry));
    (s, c1 | c2)
}

/// The `k`th native-endian machine word of a block.
#[cfg(target_pointer_width = "64")]
#[inline(always)]
fn native(block: &[u8], k: usize) -> u64 {
    let mut w = [0u8; WORD_BYTES];
    w.copy_from_slice(&block[WORD_BYTES * k..WORD_BYTES * (k + 1)]);
    u64::from_ne_bytes(w)
}

/// A machine word, and the accumulator its sums go into (twice as wide: a
/// slice cannot hold enough words to overflow it).
#[cfg(target_pointer_width = "64")]
type Word = u64;
#[cfg(target_pointer_width = "64")]
type Acc = u128;
#[cfg(not(target_pointer_width = "64"))]
type Word = u32;
#[cfg(not(target_pointer_width = "64"))]
type Acc = u64;

const WORD_BYTES: usize = core::mem::size_of::<Word>();
/// The loops take four words at a time.
const BLOCK_BYTES: usize = 4 * WORD_BYTES;

/// The `k`th native-endian word of a block, widened.
#[inline(always)]
fn word(block: &[u8], k: usize) -> Acc {
    let mut w = [0u8; WORD_BYTES];
    w.copy_from_slice(&block[WORD_BYTES * k..WORD_BYTES * (k + 1)]);
    Acc::from(Word::from_ne_bytes(w))
}

/// Folds the accumulator to 64 bits, keeping its sum modulo 2^16 - 1.
#[inline(always)]
fn fold_acc(acc: Acc) -> u64 {
    #[cfg(target_pointer_width = "64")]
    {
        // 2^64 is 1 modulo 2^16 - 1: adding the halves keeps the sum.
        let acc = (acc as u64 as u128) + (acc >> 64);
        let acc = (acc as u64 as u128) + (acc >> 64);
        acc as u64
    }
    #[cfg(not(target_pointer_width = "64"))]
    {
        acc
    }
}

/// A [`sum`] of bytes that sit at `offset` in the summed data: a piece at
/// an odd offset has its bytes in the other halves of the 16-bit words, so
/// its sum is byte-swapped (RFC 1071 section 2).
pub fn at_offset(sum: u32, offset: usize) -> u32 {
    let folded = fold(sum) as u16;
    if offset & 1 == 1 {
        u32::from(folded.swap_bytes())
    } else {
        u32::from(folded)
    }
}

/// Adds `rest` (less than a block, starting at an even offset) to `acc` (a
/// sum of native-endian words), folds, and returns it as a big-endian sum.
fn finish_native(mut acc: Acc, rest: &[u8]) -> u32 {
    // Less than a block is left: its length's bits say which pieces it
    // holds (two words, one word, then on 64-bit targets a 4-byte word),
    // tested once each instead of a loop, as most sums are of short
    // headers.
    let mut rest = rest;
    if rest.len() >= 2 * WORD_BYTES {
        acc += word(rest, 0) + word(rest, 1);
        rest = &rest[2 * WORD_BYTES..];
    }
    if rest.len() >= WORD_BYTES {
        acc += word(rest, 0);
        rest = &rest[WORD_BYTES..];
    }
    if let [a, b, c, d, more @ ..] = rest {
        acc += Acc::from(u32::from_ne_bytes([*a, *b, *c, *d]));
        rest = more;
    }
    if let [a, b, more @ ..] = rest {
        acc += Acc::from(u16::from_ne_bytes([*a, *b]));
        rest = more;
    }
    if let [last] = rest {
        // The pad byte follows `last`, so `last` is the word's first byte.
        acc += Acc::from(u16::from_ne_bytes([*last, 0]));
    }
    // 2^32 is 1 modulo 2^16 - 1 too: folding by halves keeps the sum.
    let mut acc = fold_acc(acc);
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    let folded = fold(acc as u32) as u16;
    // Sums of native-endian words are the byte-swapped big-endian sum.
    let be = if cfg!(target_endian = "little") {
        folded.swap_bytes()
    } else {
        folded
    };
    u32::from(be)
}

/// Folds a partial sum to 16 bits (without complementing).
#[inline]
pub fn fold(acc: u32) -> u32 {
    // Two steps reach 16 bits from any u32, without a loop's branch: the
    // first leaves at most 0x1_fffe, the second at most 0xffff.
    let acc = (acc & 0xffff) + (acc >> 16);
    (acc & 0xffff) + (acc >> 16)
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
/// bytes carried with `protocol`, folded to 16 bits.
pub fn pseudo_header_v4(src: &Ipv4Addr, dst: &Ipv4Addr, protocol: IpProtocol, length: u32) -> u32 {
    // An address's two big-endian 16-bit words are its halves as a u32:
    // no call to `sum` for 8 bytes (this runs for every packet).
    let (s, d) = (src.to_bits(), dst.to_bits());
    let mut acc = (s >> 16) + (s & 0xffff) + (d >> 16) + (d & 0xffff);
    acc += u32::from(u8::from(protocol));
    acc += length & 0xffff;
    acc += length >> 16;
    fold(acc)
}

/// Partial sum of the IPv6 pseudo-header (RFC 8200 section 8.1), folded to
/// 16 bits.
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
        #[test]
        fn fold_gives_what_folding_until_16_bits_gives(acc in any::<u32>()) {
            // The loop it replaced, which folds until 16 bits are left,
            // is the reference.
            let mut reference = acc;
            while reference > 0xffff {
                reference = (reference & 0xffff) + (reference >> 16);
            }
            prop_assert_eq!(fold(acc), reference);
        }

        #[test]
        fn pseudo_headers_sum_like_their_bytes(
            v4 in any::<[u8; 8]>(),
            v6 in any::<[u8; 32]>(),
            length in any::<u16>(),
            big in any::<u32>(),
        ) {
            // The RFC 768 and RFC 8200 layouts, summed by the reference.
            let (s4, d4) = (Ipv4Addr::from(<[u8; 4]>::try_from(&v4[..4]).unwrap()),
                Ipv4Addr::from(<[u8; 4]>::try_from(&v4[4..]).unwrap()));
            let mut bytes = v4.to_vec();
            bytes.extend_from_slice(&[0, 146]);
            bytes.extend_from_slice(&length.to_be_bytes());
            prop_assert_eq!(
                fold(pseudo_header_v4(&s4, &d4, IpProtocol::Homa, u32::from(length))),
                fold(reference_sum(&bytes))
            );
            let (s6, d6) = (Ipv6Addr::from(<[u8; 16]>::try_from(&v6[..16]).unwrap()),
                Ipv6Addr::from(<[u8; 16]>::try_from(&v6[16..]).unwrap()));
            let mut bytes = v6.to_vec();
            bytes.extend_from_slice(&big.to_be_bytes());
            bytes.extend_from_slice(&[0, 0, 0, 146]);
            prop_assert_eq!(
                fold(pseudo_header_v6(&s6, &d6, IpProtocol::Homa, big)),
                fold(reference_sum(&bytes))
            );
        }

        #[test]
        fn pieces_at_their_offsets_combine_to_the_whole(
            data in proptest::collection::vec(any::<u8>(), 0..1500),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..4),
        ) {
            let mut at: Vec<usize> = cuts.iter().map(|c| c.index(data.len() + 1)).collect();
            at.push(0);
            at.push(data.len());
            at.sort_unstable();
            let parts: Vec<u32> = at
                .windows(2)
                .map(|w| at_offset(sum(&data[w[0]..w[1]]), w[0]))
                .collect();
            prop_assert_eq!(combine(&parts), reference_sum(&data));
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
    fn lengths_over_whole_and_part_blocks_match_the_reference() {
        // None to two 128-byte blocks of the carry chain, then what is
        // left on each side of its 64- and 32-byte steps.
        check_lengths((0..3).flat_map(|blocks| {
            [0, 1, 31, 32, 33, 63, 64, 65, 95, 96, 97, 127].map(|rest| 128 * blocks + rest)
        }));
    }

    /// Where sums of 16-bit words reach 2^32: an accumulator too narrow
    /// would overflow past here.
    const BLOCK: usize = 1 << 17;

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
                BLOCK + 31,
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
