//! CPU accounting of a phase: the machine's jiffies (busy, and the
//! network softirq where the kernel forwards the testbed's frames) and the
//! CPU time of the testbed's child processes.

use std::thread;

use super::namespaces::Testbed;
use crate::perf::sys;

/// Jiffies of the whole machine from /proc/stat: busy, softirq (where
/// the kernel forwards frames through bridges, veths and the bottleneck),
/// and total.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Jiffies {
    pub(super) busy: u64,
    pub(super) softirq: u64,
    pub(super) total: u64,
}

pub(super) fn machine_jiffies() -> Jiffies {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let line = text.lines().next().unwrap_or_default();
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = f.iter().take(8).sum();
    let idle = f.get(3).copied().unwrap_or(0) + f.get(4).copied().unwrap_or(0);
    Jiffies {
        busy: total - idle,
        softirq: f.get(6).copied().unwrap_or(0),
        total,
    }
}

/// CPU seconds of the testbed's child processes so far.
pub(super) fn children_cpu(tb: &Testbed) -> f64 {
    tb.children
        .iter()
        .map(|c| sys::process_cpu_seconds(c.id()))
        .sum()
}

pub(super) fn cores() -> f64 {
    thread::available_parallelism().map_or(1.0, |n| n.get() as f64)
}
