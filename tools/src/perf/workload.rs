//! Message sizes: the W1..W5 distributions (as `cp_node` samples them,
//! capped at 1,000,000 bytes), any `bytes,cdf` CSV, or fixed sizes.
//!
//! Sampling as `cp_node` does, for the tables in `tools/data/workloads/`:
//! draw `u` uniform in `[0, 1)` and take the first row whose `cdf >= u`, no
//! interpolation (docs/benchmarks.md section 1).

use crate::Rng;

/// Homa's largest message; longer sizes in a CSV are capped to it.
pub const MAX_MESSAGE: u32 = 1_000_000;

/// The `cp_node` (1 MB cap) tables, built into the binary so it runs from
/// any directory and inside any network namespace.
const CP_NODE: [(&str, &str); 5] = [
    (
        "w1",
        include_str!("../../data/workloads/cp_node_1MB/w1.csv"),
    ),
    (
        "w2",
        include_str!("../../data/workloads/cp_node_1MB/w2.csv"),
    ),
    (
        "w3",
        include_str!("../../data/workloads/cp_node_1MB/w3.csv"),
    ),
    (
        "w4",
        include_str!("../../data/workloads/cp_node_1MB/w4.csv"),
    ),
    (
        "w5",
        include_str!("../../data/workloads/cp_node_1MB/w5.csv"),
    ),
];

/// A discrete distribution of message sizes.
#[derive(Debug, Clone, PartialEq)]
pub struct SizeDist {
    name: String,
    sizes: Vec<u32>,
    cdf: Vec<f64>,
    capped: bool,
}

impl SizeDist {
    /// Parses `spec`: `w1`..`w5` (the `cp_node` tables), a list of sizes
    /// (`100` or `100,1000`, equally likely), or the path of a CSV file.
    pub fn from_spec(spec: &str) -> anyhow::Result<SizeDist> {
        let lower = spec.to_ascii_lowercase();
        if let Some((name, text)) = CP_NODE.iter().find(|(n, _)| *n == lower) {
            return SizeDist::from_csv(name, text);
        }
        if !spec.is_empty() && spec.chars().all(|c| c.is_ascii_digit() || c == ',') {
            return SizeDist::fixed_spec(spec);
        }
        let text = std::fs::read_to_string(spec).map_err(|e| {
            anyhow::anyhow!("workload {spec}: not w1..w5, not sizes and not a readable file: {e}")
        })?;
        SizeDist::from_csv(spec, &text)
    }

    /// Parses `N[,N...]`: equally likely fixed sizes.
    pub fn fixed_spec(spec: &str) -> anyhow::Result<SizeDist> {
        let sizes = spec
            .split(',')
            .map(|s| {
                s.trim()
                    .parse::<u32>()
                    .map_err(|_| anyhow::anyhow!("size {s}: not a number in 1..={MAX_MESSAGE}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        SizeDist::fixed(&sizes)
    }

    /// Equally likely fixed sizes (each 1..=1,000,000).
    pub fn fixed(sizes: &[u32]) -> anyhow::Result<SizeDist> {
        let mut s: Vec<u32> = sizes.to_vec();
        s.sort_unstable();
        s.dedup();
        if s.is_empty() || s[0] == 0 || s[s.len() - 1] > MAX_MESSAGE {
            anyhow::bail!("sizes must be 1..={MAX_MESSAGE}");
        }
        // Equal weights per listed size, duplicates counted once.
        let n = s.len() as f64;
        let cdf = (1..=s.len()).map(|i| i as f64 / n).collect();
        let name = s.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        Ok(SizeDist {
            name,
            sizes: s,
            cdf,
            capped: false,
        })
    }

    /// Parses a `bytes,cdf` table by the rules of [`crate::cdf`] (the
    /// reader homa-sim uses too). Sizes over 1,000,000 are capped: their
    /// rows fold into one row at the cap.
    pub fn from_csv(name: &str, text: &str) -> anyhow::Result<SizeDist> {
        let rows = crate::cdf::parse(name, text)?;
        let (mut sizes, mut cdf): (Vec<u32>, Vec<f64>) = (Vec::new(), Vec::new());
        let mut capped = false;
        for (b, c) in rows {
            let size = b.min(u64::from(MAX_MESSAGE)) as u32;
            capped |= b > u64::from(MAX_MESSAGE);
            if sizes.last() == Some(&size) {
                *cdf.last_mut().expect("a row exists") = c;
            } else {
                sizes.push(size);
                cdf.push(c);
            }
        }
        Ok(SizeDist {
            name: name.to_string(),
            sizes,
            cdf,
            capped,
        })
    }

    /// The name given when it was made (`w4`, a path, or the sizes).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether sizes over 1,000,000 bytes were capped.
    pub fn capped(&self) -> bool {
        self.capped
    }

    /// One size: the first row with `cdf >= u` for `u` uniform in `[0, 1)`.
    pub fn sample(&self, rng: &mut Rng) -> u32 {
        let u = rng.next_f64();
        let i = self.cdf.partition_point(|&c| c < u);
        self.sizes[i.min(self.sizes.len() - 1)]
    }

    /// Mean size in bytes.
    pub fn mean(&self) -> f64 {
        let mut prev = 0.0;
        let mut sum = 0.0;
        for (&s, &c) in self.sizes.iter().zip(&self.cdf) {
            sum += f64::from(s) * (c - prev);
            prev = c;
        }
        sum
    }

    /// Smallest size.
    pub fn min(&self) -> u32 {
        self.sizes[0]
    }

    /// Largest size.
    pub fn max(&self) -> u32 {
        self.sizes[self.sizes.len() - 1]
    }

    /// Largest "short" size: the smallest sizes that together make up just
    /// over 10% of messages (HomaModule's `cperf.py` summary), or the
    /// smallest size when sizes are fixed.
    pub fn short_max(&self) -> u32 {
        let i = self.cdf.partition_point(|&c| c <= 0.10);
        self.sizes[i.min(self.sizes.len() - 1)]
    }

    /// Upper bounds of the size buckets that results are reported in,
    /// ascending, the first being [`SizeDist::short_max`] and the last
    /// [`SizeDist::max`]. Fixed sizes (at most 8) get one bucket each.
    pub fn bucket_bounds(&self) -> Vec<u32> {
        if self.sizes.len() <= 8 {
            return self.sizes.clone();
        }
        let short = self.short_max();
        let mut b = vec![short];
        for edge in [1_400, 10_000, 100_000, 1_000_000] {
            if edge > short && edge < self.max() {
                b.push(edge);
            }
        }
        b.push(self.max());
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn w4_has_the_documented_mean_short_size_and_cap() {
        let w4 = SizeDist::from_spec("W4").unwrap();
        assert!((w4.mean() - 61_008.1).abs() < 0.5, "{}", w4.mean());
        assert_eq!(w4.short_max(), 315);
        assert_eq!(w4.max(), 1_000_000);
        assert_eq!(w4.bucket_bounds(), [315, 1_400, 10_000, 100_000, 1_000_000]);
    }

    #[test]
    fn short_sizes_match_the_workloads_readme() {
        let expect = [("w1", 8), ("w2", 8), ("w3", 36), ("w4", 315), ("w5", 7_150)];
        for (w, short) in expect {
            assert_eq!(SizeDist::from_spec(w).unwrap().short_max(), short, "{w}");
        }
    }

    #[test]
    fn sampling_takes_the_first_row_with_cdf_at_least_u() {
        let d = SizeDist::from_csv("t", "bytes,cdf\n10,0.25\n20,0.5\n30,1\n").unwrap();
        let mut rng = Rng::new(3);
        let n = 40_000;
        let mut counts = [0usize; 3];
        for _ in 0..n {
            match d.sample(&mut rng) {
                10 => counts[0] += 1,
                20 => counts[1] += 1,
                30 => counts[2] += 1,
                s => panic!("size {s} is not in the table"),
            }
        }
        let frac = |c: usize| c as f64 / n as f64;
        assert!((frac(counts[0]) - 0.25).abs() < 0.01, "{counts:?}");
        assert!((frac(counts[1]) - 0.25).abs() < 0.01, "{counts:?}");
        assert!((frac(counts[2]) - 0.5).abs() < 0.01, "{counts:?}");
    }

    #[test]
    fn sample_mean_of_w4_approaches_the_table_mean() {
        let w4 = SizeDist::from_spec("w4").unwrap();
        let mut rng = Rng::new(11);
        let n = 200_000;
        let sum: f64 = (0..n).map(|_| f64::from(w4.sample(&mut rng))).sum();
        let mean = sum / n as f64;
        // W4's spread is large: allow 5%.
        assert!((mean / w4.mean() - 1.0).abs() < 0.05, "{mean}");
    }

    #[test]
    fn fixed_sizes_are_equally_likely_and_each_a_bucket() {
        let d = SizeDist::from_spec("100,1000").unwrap();
        assert_eq!(d.bucket_bounds(), [100, 1000]);
        assert_eq!(d.short_max(), 100);
        assert_eq!(d.mean(), 550.0);
        assert!(SizeDist::from_spec("0").is_err());
        assert!(SizeDist::from_spec("1000001").is_err());
    }

    #[test]
    fn bad_tables_are_refused_and_big_sizes_capped() {
        assert!(SizeDist::from_csv("t", "size,p\n1,1\n").is_err());
        assert!(SizeDist::from_csv("t", "bytes,cdf\n10,0.5\n5,1\n").is_err());
        assert!(SizeDist::from_csv("t", "bytes,cdf\n10,0.5\n20,0.4\n30,1\n").is_err());
        assert!(SizeDist::from_csv("t", "bytes,cdf\n10,0.5\n20,0.9\n").is_err());
        // Headerless files are read as homa-sim reads them.
        let plain = SizeDist::from_csv("t", "10,0.5\n20,1\n").unwrap();
        assert_eq!(
            plain,
            SizeDist::from_csv("t", "bytes,cdf\n10,0.5\n20,1\n").unwrap()
        );
        let d = SizeDist::from_csv("t", "bytes,cdf\n10,0.5\n2000000,0.9\n3000000,1\n").unwrap();
        assert!(d.capped());
        assert_eq!(d.max(), MAX_MESSAGE);
        let mut rng = Rng::new(1);
        assert!((0..1000).all(|_| d.sample(&mut rng) <= MAX_MESSAGE));
        assert_eq!(d.mean(), 5.0 + 0.5 * 1_000_000.0);
    }

    #[test]
    fn the_full_tables_parse_and_w5_is_capped() {
        let w5 = SizeDist::from_spec(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/data/workloads/w5.csv"
        ))
        .unwrap();
        assert!(w5.capped());
        let w1 = SizeDist::from_spec(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/data/workloads/w1.csv"
        ))
        .unwrap();
        assert!(!w1.capped());
        assert!((w1.mean() - 189.2).abs() < 0.1, "{}", w1.mean());
    }
}
