//! Deterministic message payloads: byte `i` of message `seed` depends on
//! both, so a response checked against its request catches bytes from
//! another message and bytes at the wrong offset.

/// Byte `i` of message `seed`'s pattern.
pub fn pattern_byte(seed: u64, i: usize) -> u8 {
    let x = (i as u64).wrapping_add(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    (x ^ (x >> 7) ^ (x >> 17)).wrapping_mul(31) as u8
}

/// Fills `buf` with the start of message `seed`'s pattern.
pub fn fill_pattern(seed: u64, buf: &mut [u8]) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = pattern_byte(seed, i);
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
        for (i, b) in want.iter_mut().enumerate() {
            *b = pattern_byte(seed, start + i);
        }
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
