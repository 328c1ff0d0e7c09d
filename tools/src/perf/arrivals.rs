//! The sequence of RPCs a client issues: for each one its size, its payload
//! seed and, open-loop, its arrival time. The same seed gives the same
//! sequence whatever the protocol, so Homa and TCP see the same arrivals.

use super::payload::request_len;
use super::workload::SizeDist;
use crate::Rng;

/// How a client paces its RPCs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pace {
    /// Open loop: Poisson arrivals at this many RPCs per second, whatever
    /// the replies do.
    Poisson {
        /// Mean arrivals per second.
        per_sec: f64,
    },
    /// Closed loop: this many RPCs outstanding, a new one as each finishes.
    Closed {
        /// RPCs kept in flight.
        outstanding: usize,
    },
}

/// One RPC to issue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// Its place in the sequence, from 0.
    pub index: u64,
    /// Scheduled time from the start of the run in nanoseconds (open loop);
    /// 0 in a closed loop, where the RPC starts when a slot frees.
    pub at_ns: u64,
    /// Size drawn from the distribution; results are bucketed by it.
    pub size: u32,
    /// Length sent: the size, raised to the payload header's length when
    /// the header must carry a reply length (as `cp_node` raises every
    /// request); an echo is sent at its size ([`request_len`]).
    pub len: u32,
    /// Seed of the payload pattern.
    pub seed: u64,
}

/// The generator of [`Arrival`]s.
#[derive(Debug, Clone)]
pub struct Arrivals {
    rng: Rng,
    dist: SizeDist,
    pace: Pace,
    reply_len: u32,
    clock_ns: f64,
    index: u64,
}

impl Arrivals {
    /// Arrivals of sizes from `dist`, paced by `pace`, of requests asking
    /// for `reply_len` (homa-perf's header), reproducible for `seed`.
    pub fn new(dist: SizeDist, pace: Pace, reply_len: u32, seed: u64) -> Arrivals {
        Arrivals {
            rng: Rng::new(seed),
            dist,
            pace,
            reply_len,
            clock_ns: 0.0,
            index: 0,
        }
    }

    /// The pacing.
    pub fn pace(&self) -> Pace {
        self.pace
    }

    /// The size distribution.
    pub fn dist(&self) -> &SizeDist {
        &self.dist
    }

    /// The next RPC.
    pub fn next_arrival(&mut self) -> Arrival {
        if let Pace::Poisson { per_sec } = self.pace {
            // Exponential gaps: -ln(1 - u) / rate, with 1 - u in (0, 1].
            let u = self.rng.next_f64();
            self.clock_ns += -(1.0 - u).ln() / per_sec * 1e9;
        }
        let size = self.dist.sample(&mut self.rng);
        let seed = self.rng.next_u64();
        let a = Arrival {
            index: self.index,
            at_ns: match self.pace {
                Pace::Poisson { .. } => self.clock_ns as u64,
                Pace::Closed { .. } => 0,
            },
            size,
            // At most 1,000,000: a size is, and so is the header.
            len: request_len(size as usize, self.reply_len) as u32,
            seed,
        };
        self.index += 1;
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::payload::{ECHO, HEADER_LEN};

    #[test]
    fn poisson_arrivals_have_the_asked_rate_and_repeat_for_a_seed() {
        let dist = SizeDist::from_spec("w4").unwrap();
        let pace = Pace::Poisson { per_sec: 1000.0 };
        let mut a = Arrivals::new(dist.clone(), pace, 100, 5);
        let mut b = Arrivals::new(dist, pace, 100, 5);
        let mut last = 0;
        for _ in 0..20_000 {
            let x = a.next_arrival();
            assert_eq!(x, b.next_arrival());
            assert!(x.at_ns >= last);
            last = x.at_ns;
        }
        // 20,000 arrivals at 1000/s take about 20 s (sd ~0.14 s).
        let secs = last as f64 / 1e9;
        assert!((secs - 20.0).abs() < 1.0, "{secs}");
    }

    #[test]
    fn lengths_are_raised_to_a_header_carrying_a_reply_length_only() {
        let ones = |reply_len| {
            Arrivals::new(
                SizeDist::from_spec("1").unwrap(),
                Pace::Closed { outstanding: 1 },
                reply_len,
                1,
            )
        };
        let mut a = ones(100);
        let x = a.next_arrival();
        assert_eq!((x.size, x.len, x.at_ns), (1, HEADER_LEN as u32, 0));
        assert_eq!(a.next_arrival().index, 1);
        // An echo needs no header: sent at its size.
        let x = ones(ECHO).next_arrival();
        assert_eq!((x.size, x.len), (1, 1));
    }
}
