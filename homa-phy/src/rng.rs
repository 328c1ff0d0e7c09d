//! SplitMix64, the generator behind the fault injector, the fabric and the
//! test kit: tiny, fast, and fully determined by its seed (any seed
//! works), so runs are reproducible without a `rand` dependency.

/// A SplitMix64 generator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator whose whole sequence is fixed by `seed`.
    pub const fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// The next 32 random bits (the high half of [`next_u64`](Self::next_u64)).
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// A value in `0..n` (`n > 0`), by multiply-shift: the bias is below
    /// 2^-32 for any `n` below 2^32.
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `[lo, hi]` (`lo <= hi`).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence_and_different_seeds_differ() {
        let (mut a, mut b, mut c) = (SplitMix64::new(7), SplitMix64::new(7), SplitMix64::new(8));
        let xs: [u64; 16] = core::array::from_fn(|_| a.next_u64());
        let ys: [u64; 16] = core::array::from_fn(|_| b.next_u64());
        let zs: [u64; 16] = core::array::from_fn(|_| c.next_u64());
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
    }

    #[test]
    fn the_first_output_is_splitmix64s() {
        // SplitMix64 from state 0: the first output of the reference
        // generator.
        assert_eq!(SplitMix64::new(0).next_u64(), 0xe220_a839_7b1d_cdaf);
    }

    #[test]
    fn below_and_range_stay_in_bounds_and_hit_every_value() {
        let mut r = SplitMix64::new(1);
        let mut seen = [0u32; 4];
        for _ in 0..1000 {
            seen[r.below(4) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| n > 150), "{seen:?}");
        let mut seen = [0u32; 3];
        for _ in 0..1000 {
            let v = r.range(5, 7);
            assert!((5..=7).contains(&v));
            seen[(v - 5) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| n > 200), "{seen:?}");
        for _ in 0..1000 {
            let f = r.next_f64();
            assert!((0.0..1.0).contains(&f));
        }
    }
}
