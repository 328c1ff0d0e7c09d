//! Shared pieces of the example programs: command-line value checks, payload
//! patterns, and two endpoints wired back to back on a virtual clock; and
//! homa-dump's implementation ([`dump`]).

pub mod bench;
pub mod cdf;
pub mod cli;
pub mod dump;
pub mod duo;
pub mod perf;
pub mod sim;
pub mod soak;

/// A deterministic payload: byte `i` of message `seed`.
pub fn pattern_byte(seed: u64, i: usize) -> u8 {
    let x = (i as u64).wrapping_add(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    (x ^ (x >> 7) ^ (x >> 17)).wrapping_mul(31) as u8
}

/// Fills `buf` with message `seed`'s pattern.
pub fn fill_pattern(seed: u64, buf: &mut [u8]) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = pattern_byte(seed, i);
    }
}

/// A small seeded generator (SplitMix64) for workloads and sizes.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in `[lo, hi]`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }
}
