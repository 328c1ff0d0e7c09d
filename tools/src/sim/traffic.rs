//! The offered traffic: open-loop Poisson arrivals, uniformly random
//! source and destination, sizes from the workload. Generated once from the
//! seed, so every protocol gets exactly the same messages at the same times.

use super::workload::Workload;
use crate::Rng;

/// One message to deliver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message {
    /// When the source hands it to its transport, in ns after traffic starts.
    pub at: u64,
    /// Sending host.
    pub src: u32,
    /// Receiving host (never `src`).
    pub dst: u32,
    /// Payload bytes.
    pub size: u32,
}

/// The seed of message `id`'s payload pattern in a run seeded `seed`.
pub fn payload_seed(seed: u64, id: usize) -> u64 {
    Rng::new(seed ^ (id as u64).wrapping_mul(0xd1b5_4a32_d192_ed69)).next_u64()
}

pub use homa_phy::testing::pattern_matches;

/// What to generate.
#[derive(Debug, Clone, Copy)]
pub struct TrafficSpec {
    /// Number of hosts.
    pub hosts: usize,
    /// Offered load per host, as a fraction of the host link rate.
    pub load: f64,
    /// Host link rate, Mbit/s.
    pub link_mbps: u32,
    /// Mean wire bytes of one message (headers included).
    pub mean_wire_bytes: f64,
    /// Arrivals stop after this many ns.
    pub duration_ns: u64,
    /// Seed of the arrival process.
    pub seed: u64,
}

impl TrafficSpec {
    /// Messages per second each host sends.
    pub fn rate_per_host(&self) -> f64 {
        self.load * f64::from(self.link_mbps) * 1e6 / 8.0 / self.mean_wire_bytes
    }

    /// Messages [`generate`] makes, on average.
    pub fn expected_messages(&self) -> f64 {
        self.rate_per_host() * self.hosts as f64 * self.duration_ns as f64 / 1e9
    }
}

/// Every message of the run, in order of arrival. The superposition of one
/// Poisson process per host is one Poisson process of the summed rate whose
/// arrivals pick their source uniformly; that is what is drawn here.
pub fn generate(spec: &TrafficSpec, workload: &Workload) -> Vec<Message> {
    let mut rng = Rng::new(spec.seed ^ 0x7261_6666_6963);
    let total_rate = spec.rate_per_host() * spec.hosts as f64;
    let mut out = Vec::new();
    if spec.hosts < 2 || total_rate <= 0.0 {
        return out;
    }
    let mut t = 0.0f64;
    loop {
        // Exponential gap in ns; 1 - u is in (0, 1], so the log is finite.
        t += -(1.0 - rng.next_f64()).ln() / total_rate * 1e9;
        if t >= spec.duration_ns as f64 {
            return out;
        }
        let src = rng.range(0, spec.hosts as u64 - 1) as u32;
        let mut dst = rng.range(0, spec.hosts as u64 - 2) as u32;
        if dst >= src {
            dst += 1;
        }
        let size = workload.sample(rng.next_f64());
        out.push(Message {
            at: t as u64,
            src,
            dst,
            size,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_sources_and_destinations() {
        let w = Workload::parse("t", "100,0.5\n1000,1\n").unwrap();
        let spec = TrafficSpec {
            hosts: 4,
            load: 0.5,
            link_mbps: 10_000,
            mean_wire_bytes: 1000.0,
            duration_ns: 10_000_000,
            seed: 3,
        };
        // 0.5 * 1.25e9 B/s / 1000 B = 625k messages/s per host.
        assert!((spec.rate_per_host() - 625_000.0).abs() < 1e-6);
        let m = generate(&spec, &w);
        let expect = 4.0 * 625_000.0 * 0.01;
        assert!(
            (m.len() as f64 - expect).abs() < 0.03 * expect,
            "{}",
            m.len()
        );
        assert!(m.windows(2).all(|p| p[0].at <= p[1].at));
        assert!(m.iter().all(|x| x.src != x.dst && x.src < 4 && x.dst < 4));
        for h in 0..4 {
            let n = m.iter().filter(|x| x.dst == h).count() as f64;
            assert!((n / m.len() as f64 - 0.25).abs() < 0.02);
        }
        assert_eq!(m, generate(&spec, &w));
    }
}
