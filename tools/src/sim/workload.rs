//! Message-size distributions: the W1..W5 CSVs (`bytes,cdf`, one row per
//! size, the last `cdf` = 1) and any file in the same format.
//!
//! Sampling follows the reference tools: draw `u` uniform in `[0, 1)` and
//! take the first row whose `cdf >= u`; no interpolation.

/// The built-in workloads, compiled into the binary so it runs from anywhere.
const BUILTIN: [(&str, &str); 5] = [
    ("w1", include_str!("../../data/workloads/w1.csv")),
    ("w2", include_str!("../../data/workloads/w2.csv")),
    ("w3", include_str!("../../data/workloads/w3.csv")),
    ("w4", include_str!("../../data/workloads/w4.csv")),
    ("w5", include_str!("../../data/workloads/w5.csv")),
];

/// Largest message Homa (and so the benchmark) sends; larger sizes are sent
/// as exactly this many bytes, as HomaModule's `cp_node` does.
pub const MAX_MESSAGE: u32 = 1_000_000;

/// A discrete message-size distribution.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// `w1`..`w5`, or the file's path.
    pub name: String,
    /// Sizes in bytes, strictly increasing.
    pub sizes: Vec<u32>,
    /// `cdf[i]` = fraction of messages of at most `sizes[i]` bytes.
    pub cdf: Vec<f64>,
}

impl Workload {
    /// `w1`..`w5` (any case), or the path of a CSV file.
    pub fn load(spec: &str) -> Result<Workload, String> {
        let lower = spec.to_ascii_lowercase();
        if let Some((name, text)) = BUILTIN.iter().find(|(n, _)| *n == lower) {
            return Workload::parse(name, text);
        }
        let text = std::fs::read_to_string(spec)
            .map_err(|e| format!("workload {spec}: not w1..w5 and not a readable file: {e}"))?;
        Workload::parse(spec, &text)
    }

    /// Parses a `bytes,cdf` table by the rules of [`crate::cdf`] (the
    /// reader homa-perf uses too). Sizes are kept uncapped (up to
    /// `u32::MAX`); see [`Workload::capped`].
    pub fn parse(name: &str, text: &str) -> Result<Workload, String> {
        let rows = crate::cdf::parse(name, text)?;
        let mut sizes = Vec::with_capacity(rows.len());
        for &(b, _) in &rows {
            sizes
                .push(u32::try_from(b).map_err(|_| {
                    format!("workload {name}: size {b} is over {} bytes", u32::MAX)
                })?);
        }
        Ok(Workload {
            name: name.to_string(),
            sizes,
            cdf: rows.iter().map(|&(_, c)| c).collect(),
        })
    }

    /// The same distribution with every size above `cap` sent as `cap`
    /// bytes: the mass of those rows moves to one row at `cap`.
    pub fn capped(&self, cap: u32) -> Workload {
        let keep = self.sizes.partition_point(|&s| s < cap);
        let mut sizes = self.sizes[..keep].to_vec();
        let mut cdf = self.cdf[..keep].to_vec();
        if keep < self.sizes.len() {
            sizes.push(cap);
            cdf.push(1.0);
        }
        Workload {
            name: self.name.clone(),
            sizes,
            cdf,
        }
    }

    /// Whether some size exceeds `cap`.
    pub fn exceeds(&self, cap: u32) -> bool {
        self.sizes.last().is_some_and(|&s| s > cap)
    }

    /// The size for `u` in `[0, 1)`: the first row with `cdf >= u`.
    pub fn sample(&self, u: f64) -> u32 {
        let i = self.cdf.partition_point(|&c| c < u);
        self.sizes[i.min(self.sizes.len() - 1)]
    }

    /// Each size with its probability.
    pub fn pmf(&self) -> impl Iterator<Item = (u32, f64)> + '_ {
        self.sizes
            .iter()
            .zip(&self.cdf)
            .scan(0.0, |prev, (&s, &c)| {
                let p = c - *prev;
                *prev = c;
                Some((s, p))
            })
    }

    /// The expected value of `f(size)`.
    pub fn expect(&self, f: impl Fn(u32) -> f64) -> f64 {
        self.pmf().map(|(s, p)| p * f(s)).sum()
    }

    /// Mean size in bytes.
    pub fn mean(&self) -> f64 {
        self.expect(f64::from)
    }

    /// Upper size of each of at most `n` buckets, from the workload's own
    /// sizes: half of them of (as nearly as the atoms allow) equal message
    /// count, the sizes where the CDF first reaches `k / m`, and the rest
    /// spaced evenly on a log scale from the smallest size to the largest
    /// (each the first workload size at or above it), duplicates removed.
    /// Equal counts alone put a heavy tail in one bucket (W3's largest
    /// tenth runs from 1.8 KB to 1 MB); the log-spaced edges split it.
    pub fn bucket_bounds(&self, n: usize) -> Vec<u32> {
        let (Some(&min), Some(&max)) = (self.sizes.first(), self.sizes.last()) else {
            return vec![1];
        };
        let n = n.max(1);
        let by_count = n.div_ceil(2);
        let mut out: Vec<u32> = (1..=by_count)
            .map(|k| self.sample(k as f64 / by_count as f64))
            .collect();
        let by_size = n - by_count;
        let ratio = f64::from(max) / f64::from(min.max(1));
        for j in 1..=by_size {
            let edge = f64::from(min.max(1)) * ratio.powf(j as f64 / (by_size + 1) as f64);
            let i = self.sizes.partition_point(|&s| f64::from(s) < edge);
            out.push(self.sizes[i.min(self.sizes.len() - 1)]);
        }
        out.push(max);
        out.sort_unstable();
        out.dedup();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> Workload {
        Workload::parse("t", "bytes,cdf\n10,0.25\n20,0.5\n30,0.9\n2000000,1\n").unwrap()
    }

    #[test]
    fn builtins_parse_with_their_documented_means() {
        let means = [189.2, 441.6, 2927.7, 127_796.6, 2_564_689.7];
        for (i, m) in means.iter().enumerate() {
            let w = Workload::load(&format!("W{}", i + 1)).unwrap();
            assert!((w.mean() - m).abs() / m < 1e-3, "{}: {}", w.name, w.mean());
        }
    }

    #[test]
    fn cap_moves_the_tail_mass_onto_the_cap() {
        let w = tiny().capped(1000);
        assert_eq!(w.sizes, [10, 20, 30, 1000]);
        assert_eq!(w.sample(0.95), 1000);
        assert!((w.mean() - (2.5 + 5.0 + 12.0 + 100.0)).abs() < 1e-9);
        // W4: 2.79% of messages exceed 1 MB; capped, the mean is
        // E[min(size, 1 MB)].
        let w4 = Workload::load("w4").unwrap();
        let expect = w4.expect(|s| f64::from(s.min(MAX_MESSAGE)));
        let capped = w4.capped(MAX_MESSAGE);
        assert!((capped.mean() - expect).abs() < 1e-6);
        assert!((1.0 - capped.cdf[capped.cdf.len() - 2] - 0.0279).abs() < 0.0005);
    }

    #[test]
    fn bad_files_are_rejected() {
        assert!(Workload::parse("x", "10,0.5\n5,1\n").is_err());
        assert!(Workload::parse("x", "10,0.5\n20,0.9\n").is_err());
        assert!(Workload::parse("x", "").is_err());
        assert!(Workload::parse("x", "10;1\n").is_err());
        // Another header is not skipped as if it were `bytes,cdf`.
        assert!(Workload::parse("x", "size,p\n1,1\n").is_err());
    }

    #[test]
    fn homa_perf_reads_a_file_the_same_way() {
        use crate::perf::workload::SizeDist;
        for text in [
            "10,0.25\n20,0.5\n30,1\n",
            "bytes,cdf\n10,0.25\n20,0.5\n30,1\n",
        ] {
            let w = Workload::parse("x", text).unwrap();
            let d = SizeDist::from_csv("x", text).unwrap();
            assert_eq!(w.mean(), d.mean());
            assert_eq!(w.sizes.last().copied(), Some(d.max()));
        }
        for bad in ["size,p\n1,1\n", "10,0.5\n", "10,0.5\n5,1\n"] {
            let a = Workload::parse("x", bad).unwrap_err();
            let b = SizeDist::from_csv("x", bad).unwrap_err();
            assert_eq!(a, b.to_string());
        }
    }

    #[test]
    fn buckets_follow_the_cdf_and_split_a_heavy_tail() {
        let w = tiny();
        // By count: 20 (half of messages), 2 MB; by size: the first sizes
        // at or above 10 x 200000^(1/3) and ^(2/3), both 2 MB.
        assert_eq!(w.bucket_bounds(4), [20, 2_000_000]);
        assert_eq!(w.bucket_bounds(10), [10, 20, 30, 2_000_000]);
        assert_eq!(w.bucket_bounds(1), [2_000_000]);
        // W3's largest tenth of messages spans 1.8 KB to 1 MB: the default
        // ten buckets must show it in more than one point.
        let w3 = Workload::load("w3").unwrap().capped(1_000_000);
        let b = w3.bucket_bounds(10);
        assert!(b.len() <= 10, "{b:?}");
        assert!(b.windows(2).all(|p| p[0] < p[1]), "{b:?}");
        assert!(b.iter().filter(|&&s| s > 1_843).count() >= 3, "{b:?}");
        assert_eq!(b.last(), Some(&1_000_000));
    }
}
