//! Round-trip-time histograms (HdrHistogram, 3 significant digits, so a
//! percentile is within 0.1% of the true value; the exact minimum, maximum
//! and sum kept beside it), mergeable across processes through their JSON
//! form, and per-size-bucket sets of them.

use anyhow::Context as _;
use hdrhistogram::Histogram as Hdr;
use serde_json::{json, Value};

/// Significant decimal digits the histogram keeps.
const SIGFIG: u8 = 3;

/// A histogram of nanosecond values.
#[derive(Debug, Clone)]
pub struct Histogram {
    hdr: Hdr<u64>,
    sum: u128,
    min: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl PartialEq for Histogram {
    fn eq(&self, o: &Histogram) -> bool {
        self.count() == o.count()
            && (self.sum, self.min, self.max) == (o.sum, o.min, o.max)
            && self.recorded().eq(o.recorded())
    }
}

impl Eq for Histogram {}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Histogram {
        Histogram {
            hdr: Hdr::new(SIGFIG).expect("3 significant digits are supported"),
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }

    /// Records one value (values beyond HdrHistogram's range, about 146
    /// years in nanoseconds, are recorded at its top).
    pub fn record(&mut self, v: u64) {
        if self.hdr.record(v).is_err() {
            self.hdr.saturating_record(v);
        }
        self.sum += u128::from(v);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &Histogram) {
        // An auto-resizing histogram takes any other one.
        self.hdr
            .add(&other.hdr)
            .expect("auto-resizing histograms always add");
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.hdr.len()
    }

    /// Mean value, 0 when empty.
    pub fn mean(&self) -> f64 {
        if self.count() == 0 {
            0.0
        } else {
            self.sum as f64 / self.count() as f64
        }
    }

    /// Largest value (exact), 0 when empty.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The value at quantile `q` (0..=1), clamped to the recorded minimum
    /// and maximum (exactly the minimum for `q = 0` and the maximum for
    /// `q = 1`); 0 when empty.
    pub fn percentile(&self, q: f64) -> u64 {
        if self.count() == 0 {
            return 0;
        }
        let q = q.clamp(0.0, 1.0);
        if q <= 0.0 {
            return self.min;
        }
        if q >= 1.0 {
            return self.max;
        }
        self.hdr.value_at_quantile(q).clamp(self.min, self.max)
    }

    /// (value, count) of every non-empty bucket, the value being the
    /// highest the bucket stands for.
    fn recorded(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.hdr
            .iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()))
    }

    /// JSON form: totals and the non-empty buckets as `[value, count]`.
    pub fn to_json(&self) -> Value {
        let buckets: Vec<Value> = self.recorded().map(|(v, c)| json!([v, c])).collect();
        json!({
            "count": self.count(),
            "sum_ns": self.sum as f64,
            "min_ns": if self.count() == 0 { 0 } else { self.min },
            "max_ns": self.max,
            "buckets": buckets,
        })
    }

    /// Reads [`Histogram::to_json`]'s form back.
    pub fn from_json(v: &Value) -> anyhow::Result<Histogram> {
        let mut h = Histogram::new();
        let buckets = v["buckets"]
            .as_array()
            .context("histogram without buckets")?;
        for b in buckets {
            let value = b[0].as_u64().context("bad bucket value")?;
            let c = b[1].as_u64().context("bad bucket count")?;
            h.hdr
                .record_n(value, c)
                .map_err(|e| anyhow::anyhow!("bucket value {value}: {e:?}"))?;
        }
        if h.count() != v["count"].as_u64().unwrap_or(u64::MAX) {
            anyhow::bail!("histogram count does not match its buckets");
        }
        h.sum = v["sum_ns"].as_f64().unwrap_or(0.0) as u128;
        h.min = if h.count() == 0 {
            u64::MAX
        } else {
            v["min_ns"].as_u64().unwrap_or(0)
        };
        h.max = v["max_ns"].as_u64().unwrap_or(0);
        Ok(h)
    }
}

/// Round-trip times kept per message-size bucket, plus all together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizeBuckets {
    bounds: Vec<u32>,
    hists: Vec<Histogram>,
    all: Histogram,
}

impl SizeBuckets {
    /// Buckets with these ascending upper bounds (the last takes anything
    /// larger too).
    pub fn new(bounds: Vec<u32>) -> SizeBuckets {
        let hists = vec![Histogram::new(); bounds.len()];
        SizeBuckets {
            bounds,
            hists,
            all: Histogram::new(),
        }
    }

    /// Records the round trip of a message of `size` bytes.
    pub fn record(&mut self, size: u32, rtt_ns: u64) {
        let i = self
            .bounds
            .partition_point(|&b| b < size)
            .min(self.bounds.len().saturating_sub(1));
        if let Some(h) = self.hists.get_mut(i) {
            h.record(rtt_ns);
        }
        self.all.record(rtt_ns);
    }

    /// Upper bounds of the buckets.
    pub fn bounds(&self) -> &[u32] {
        &self.bounds
    }

    /// The histogram of bucket `i`.
    pub fn bucket(&self, i: usize) -> &Histogram {
        &self.hists[i]
    }

    /// The first bucket: short messages.
    pub fn short(&self) -> &Histogram {
        &self.hists[0]
    }

    /// Every message.
    pub fn all(&self) -> &Histogram {
        &self.all
    }

    /// Adds `other`'s values; both must have the same bounds.
    pub fn merge(&mut self, other: &SizeBuckets) -> anyhow::Result<()> {
        if self.bounds != other.bounds {
            anyhow::bail!(
                "size buckets differ: {:?} vs {:?}",
                self.bounds,
                other.bounds
            );
        }
        for (a, b) in self.hists.iter_mut().zip(&other.hists) {
            a.merge(b);
        }
        self.all.merge(&other.all);
        Ok(())
    }

    /// JSON form, including P50/P99/P99.9 in microseconds for readers.
    pub fn to_json(&self) -> Value {
        let row = |h: &Histogram| {
            json!({
                "p50_us": h.percentile(0.5) as f64 / 1e3,
                "p99_us": h.percentile(0.99) as f64 / 1e3,
                "p999_us": h.percentile(0.999) as f64 / 1e3,
                "hist": h.to_json(),
            })
        };
        let buckets: Vec<Value> = self
            .bounds
            .iter()
            .zip(&self.hists)
            .map(|(b, h)| {
                let mut v = row(h);
                v["max_bytes"] = json!(b);
                v
            })
            .collect();
        json!({ "buckets": buckets, "all": row(&self.all) })
    }

    /// Reads [`SizeBuckets::to_json`]'s form back.
    pub fn from_json(v: &Value) -> anyhow::Result<SizeBuckets> {
        let list = v["buckets"].as_array().context("no buckets")?;
        let mut bounds = Vec::new();
        let mut hists = Vec::new();
        for b in list {
            bounds.push(
                b["max_bytes"]
                    .as_u64()
                    .context("bucket without max_bytes")? as u32,
            );
            hists.push(Histogram::from_json(&b["hist"])?);
        }
        Ok(SizeBuckets {
            bounds,
            hists,
            all: Histogram::from_json(&v["all"]["hist"])?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_1_to_10000_are_within_a_tenth_of_a_percent() {
        let mut h = Histogram::new();
        for v in 1..=10_000u64 {
            h.record(v * 1000);
        }
        for (q, exact) in [
            (0.5, 5_000_000.0),
            (0.99, 9_900_000.0),
            (0.999, 9_990_000.0),
        ] {
            let got = h.percentile(q) as f64;
            assert!((got / exact - 1.0).abs() < 0.001, "q {q}: {got} vs {exact}");
        }
        assert_eq!(h.percentile(1.0), 10_000_000);
        assert_eq!(h.percentile(0.0), 1000);
        assert_eq!(h.count(), 10_000);
        assert_eq!(Histogram::new().percentile(0.5), 0);
    }

    #[test]
    fn small_values_are_exact_and_a_single_value_is_every_percentile() {
        let mut h = Histogram::new();
        for v in [3, 1, 2] {
            h.record(v);
        }
        assert_eq!(h.percentile(0.5), 2);
        let mut one = Histogram::new();
        one.record(123_456);
        assert_eq!(one.percentile(0.5), 123_456);
        assert_eq!(one.percentile(0.999), 123_456);
    }

    #[test]
    fn merge_and_json_round_trip_keep_every_value() {
        let (mut a, mut b) = (Histogram::new(), Histogram::new());
        for v in 0..1000u64 {
            a.record(v * 37);
            b.record(v * 1_000_003);
        }
        let mut m = a.clone();
        m.merge(&b);
        assert_eq!(m.count(), 2000);
        assert_eq!(m.max(), 999 * 1_000_003);
        let back = Histogram::from_json(&m.to_json()).unwrap();
        assert_eq!(back, m);
    }

    #[test]
    fn size_buckets_split_by_size_and_round_trip() {
        let mut s = SizeBuckets::new(vec![100, 1000]);
        s.record(50, 10);
        s.record(100, 20);
        s.record(101, 30);
        s.record(5000, 40); // beyond the last bound: the last bucket
        assert_eq!(s.short().count(), 2);
        assert_eq!(s.bucket(1).count(), 2);
        assert_eq!(s.all().count(), 4);
        let back = SizeBuckets::from_json(&s.to_json()).unwrap();
        assert_eq!(back, s);
        let mut other = SizeBuckets::new(vec![100]);
        assert!(other.merge(&s).is_err());
    }
}
