//! What happened to each message, and the slowdown statistics built from it.
//!
//! Slowdown = measured one-way time / the message's ideal time in an empty
//! fabric. P50 and P99 (nearest rank) per size bucket; the first bucket is
//! the short messages.

use std::collections::HashMap;

use crate::fabric::Fabric;

use super::packets::Packetiser;
use super::traffic::Message;

/// Not finished yet.
const OPEN: u64 = u64::MAX;

/// The fate of every message of one protocol's run.
#[derive(Debug, Clone)]
pub struct Outcomes {
    /// When each message finished (ns, fabric time), or `u64::MAX`.
    end: Vec<u64>,
    /// Each message's bytes arrived intact.
    ok: Vec<bool>,
    /// Each message failed for good.
    dead: Vec<bool>,
    /// Messages handed to the transport (including ones it deferred).
    pub sent: usize,
    /// Messages that arrived whole at their receiver.
    pub completed: usize,
    /// Completed messages whose every byte matched.
    pub verified: usize,
    /// Messages that failed, arrived corrupt, never arrived, or (as RPCs)
    /// whose response failed.
    pub failed: usize,
}

impl Outcomes {
    /// Room for `n` messages.
    pub fn new(n: usize) -> Outcomes {
        Outcomes {
            end: vec![OPEN; n],
            ok: vec![false; n],
            dead: vec![false; n],
            sent: 0,
            completed: 0,
            verified: 0,
            failed: 0,
        }
    }

    /// Message `id` arrived whole at `at`; `intact` if its bytes matched.
    /// A second report for the same message is ignored.
    pub fn complete(&mut self, id: usize, at: u64, intact: bool) {
        if self.end[id] != OPEN || self.dead[id] {
            return;
        }
        self.end[id] = at;
        self.ok[id] = intact;
        self.completed += 1;
        if intact {
            self.verified += 1;
        } else {
            self.failed += 1;
        }
    }

    /// Message `id` arrived, but its RPC failed afterwards (its response
    /// could not be sent or never came back): it counts as failed and is
    /// left out of the slowdowns. Does nothing unless it had arrived.
    pub fn fail_after_arrival(&mut self, id: usize) {
        if self.end[id] == OPEN || self.dead[id] {
            return;
        }
        self.dead[id] = true;
        if self.ok[id] {
            self.ok[id] = false;
            self.verified -= 1;
            self.failed += 1;
        }
    }

    /// Message `id` failed (the transport gave up on it).
    pub fn fail(&mut self, id: usize) {
        if self.end[id] != OPEN || self.dead[id] {
            return;
        }
        self.dead[id] = true;
        self.failed += 1;
    }

    /// Whether message `id` has an outcome.
    pub fn done(&self, id: usize) -> bool {
        self.end[id] != OPEN || self.dead[id]
    }

    /// Messages with an outcome.
    pub fn finished(&self) -> usize {
        self.completed + (self.failed - (self.completed - self.verified))
    }

    /// Counts every message still without an outcome as failed.
    pub fn close(&mut self) -> usize {
        let mut n = 0;
        for id in 0..self.end.len() {
            if !self.done(id) {
                self.dead[id] = true;
                self.failed += 1;
                n += 1;
            }
        }
        n
    }

    /// When message `id` finished, if it arrived intact.
    pub fn finish_time(&self, id: usize) -> Option<u64> {
        (self.end[id] != OPEN && self.ok[id]).then_some(self.end[id])
    }
}

/// Slowdown statistics of one size bucket.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    /// Largest message size in the bucket.
    pub max_bytes: u32,
    /// Messages measured.
    pub count: usize,
    /// Median slowdown (0 when empty).
    pub p50: f64,
    /// 99th-percentile slowdown (0 when empty).
    pub p99: f64,
}

/// Ideal one-way times, cached by size and whether both ends share a rack
/// (the only things the fabric's ideal depends on).
pub struct Ideal<'f> {
    fabric: &'f Fabric,
    packets: Packetiser,
    cache: HashMap<(u32, bool), u64>,
}

impl<'f> Ideal<'f> {
    /// Ideal times on `fabric` for messages cut by `packets`.
    pub fn new(fabric: &'f Fabric, packets: Packetiser) -> Ideal<'f> {
        Ideal {
            fabric,
            packets,
            cache: HashMap::new(),
        }
    }

    /// The ideal one-way time of `m`, in ns: its Homa frames from `src` to
    /// `dst` in an empty fabric (`Fabric::ideal_one_way_frames`).
    pub fn of(&mut self, m: &Message) -> u64 {
        let (src, dst) = (m.src as usize, m.dst as usize);
        let local = self.fabric.rack_of(src) == self.fabric.rack_of(dst);
        let (fabric, packets) = (self.fabric, self.packets);
        *self.cache.entry((m.size, local)).or_insert_with(|| {
            let frames = packets.frames(m.size as usize);
            fabric.ideal_one_way_frames(src, dst, &frames).total_nanos()
        })
    }
}

/// The value at quantile `q` of sorted `v` (nearest rank); 0 when empty.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Per-bucket P50/P99 slowdowns of the messages that arrived after the
/// warm-up (`at >= warmup_ns`) and arrived intact. `bounds` are the buckets'
/// upper sizes (a message goes in the first bucket that holds it); `start`
/// is the fabric time at which traffic began.
pub fn buckets(
    messages: &[Message],
    outcomes: &Outcomes,
    ideal: &mut Ideal<'_>,
    bounds: &[u32],
    start: u64,
    warmup_ns: u64,
) -> Vec<Bucket> {
    let mut per: Vec<Vec<f64>> = vec![Vec::new(); bounds.len()];
    for (id, m) in messages.iter().enumerate() {
        if m.at < warmup_ns {
            continue;
        }
        let Some(end) = outcomes.finish_time(id) else {
            continue;
        };
        let b = bounds
            .partition_point(|&x| x < m.size)
            .min(bounds.len() - 1);
        let took = end.saturating_sub(start + m.at);
        per[b].push(took as f64 / ideal.of(m).max(1) as f64);
    }
    bounds
        .iter()
        .zip(per.iter_mut())
        .map(|(&max_bytes, v)| {
            v.sort_by(f64::total_cmp);
            Bucket {
                max_bytes,
                count: v.len(),
                p50: percentile(v, 0.5),
                p99: percentile(v, 0.99),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 50.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&v[..1], 0.99), 1.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }

    #[test]
    fn outcomes_count_each_message_once() {
        let mut o = Outcomes::new(4);
        o.complete(0, 10, true);
        o.complete(0, 20, true);
        o.complete(1, 10, false);
        o.fail(2);
        o.fail(0);
        assert_eq!((o.completed, o.verified, o.failed), (2, 1, 2));
        assert_eq!(o.finished(), 3);
        assert_eq!(o.close(), 1);
        assert_eq!(o.failed, 3);
        assert_eq!(o.finish_time(0), Some(10));
        assert_eq!(o.finish_time(1), None);
    }
}
