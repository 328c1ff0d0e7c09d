//! Deterministic message payloads: byte `i` of message `seed` depends on
//! both, so a response checked against its request catches bytes from
//! another message and bytes at the wrong offset. homa-perf's requests
//! carry it on the wire, after their header.

/// Word `k` (bytes `8k..8k + 8`, little-endian) of message `seed`'s
/// pattern. Whole words let a fill or a check run eight bytes at a time.
pub fn pattern_word(seed: u64, k: usize) -> u64 {
    let mut z = seed.wrapping_add((k as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 31)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z ^ (z >> 29)
}

/// Byte `i` of message `seed`'s pattern.
pub fn pattern_byte(seed: u64, i: usize) -> u8 {
    pattern_word(seed, i / 8).to_le_bytes()[i % 8]
}

/// Fills `buf` with the start of message `seed`'s pattern.
pub fn fill_pattern(seed: u64, buf: &mut [u8]) {
    fill_pattern_at(seed, 0, buf);
}

/// Fills `buf` with bytes `offset..offset + buf.len()` of message `seed`'s
/// pattern.
pub fn fill_pattern_at(seed: u64, offset: usize, buf: &mut [u8]) {
    let head = ((8 - offset % 8) % 8).min(buf.len());
    let (first, rest) = buf.split_at_mut(head);
    for (j, b) in first.iter_mut().enumerate() {
        *b = pattern_byte(seed, offset + j);
    }
    let k0 = (offset + head) / 8;
    for (k, chunk) in rest.chunks_mut(8).enumerate() {
        let w = pattern_word(seed, k0 + k).to_le_bytes();
        chunk.copy_from_slice(&w[..chunk.len()]);
    }
}

/// The first `len` bytes of message `seed`'s pattern.
#[cfg(feature = "std")]
pub fn pattern(len: usize, seed: u64) -> std::vec::Vec<u8> {
    let mut v = std::vec![0; len];
    fill_pattern(seed, &mut v);
    v
}

/// Whether `bytes` are bytes `offset..` of message `seed`'s pattern. The
/// expected bytes are generated into `scratch` a block at a time, so both
/// loops vectorise and nothing is allocated once `scratch` has grown.
#[cfg(feature = "std")]
pub fn pattern_matches(
    seed: u64,
    offset: usize,
    bytes: &[u8],
    scratch: &mut std::vec::Vec<u8>,
) -> bool {
    const BLOCK: usize = 4096;
    scratch.resize(BLOCK, 0);
    bytes.chunks(BLOCK).enumerate().all(|(k, chunk)| {
        let start = offset + k * BLOCK;
        let want = &mut scratch[..chunk.len()];
        fill_pattern_at(seed, start, want);
        want == chunk
    })
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;

    #[test]
    fn patterns_differ_by_seed_and_by_offset() {
        let (a, b) = (pattern(4096, 1), pattern(4096, 2));
        assert_ne!(a, b);
        // A block moved by a few bytes does not match itself.
        assert_ne!(a[..1000], a[7..1007]);
        let mut buf = [0u8; 16];
        fill_pattern(1, &mut buf);
        assert_eq!(buf[..], a[..16]);
        // Any offset, aligned or not, continues the same pattern.
        for offset in [0, 1, 7, 8, 13] {
            let mut part = [0u8; 21];
            fill_pattern_at(1, offset, &mut part);
            assert_eq!(part[..], a[offset..offset + 21], "offset {offset}");
            assert_eq!(part[0], pattern_byte(1, offset));
        }
    }

    #[test]
    fn pattern_check_finds_one_wrong_byte_at_any_offset() {
        let mut scratch = std::vec::Vec::new();
        let full = pattern(10_000, 9);
        assert!(pattern_matches(9, 0, &full, &mut scratch));
        assert!(pattern_matches(9, 5000, &full[5000..], &mut scratch));
        assert!(!pattern_matches(8, 0, &full, &mut scratch));
        for at in [0, 4095, 4096, 9999] {
            let mut bad = full.clone();
            bad[at] ^= 1;
            assert!(!pattern_matches(9, 0, &bad, &mut scratch), "flip at {at}");
        }
    }
}
