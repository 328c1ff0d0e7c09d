//! The discrete-event loop shared by both protocols.
//!
//! Next time = the earliest of the fabric's next event, the earliest poll
//! deadline a driver holds, and the next message arrival. The loop advances
//! the fabric there, hands new messages to the driver, lets it poll the
//! hosts that received frames, then the hosts whose deadline is due. Nothing
//! else is ever polled, so an idle host costs nothing.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant as WallClock;

use crate::fabric::Fabric;
use homa_phy::Instant;

use super::metrics::Outcomes;
use super::traffic::Message;

/// No deadline.
pub const NEVER: u64 = u64::MAX;

/// Poll deadlines of many keys (hosts, or host/peer pairs) in a min-heap
/// with lazy invalidation: a key's current deadline lives in `due`, and a
/// heap entry that no longer matches it is skipped when it surfaces.
#[derive(Debug, Default)]
pub struct Deadlines {
    heap: BinaryHeap<Reverse<(u64, u32)>>,
    due: Vec<u64>,
}

impl Deadlines {
    /// `keys` keys, none with a deadline.
    pub fn new(keys: usize) -> Deadlines {
        Deadlines {
            heap: BinaryHeap::new(),
            due: vec![NEVER; keys],
        }
    }

    /// Replaces `key`'s deadline (`NEVER` removes it).
    pub fn set(&mut self, key: usize, at: u64) {
        if self.due[key] == at {
            return;
        }
        self.due[key] = at;
        if at != NEVER {
            self.heap.push(Reverse((at, key as u32)));
        }
    }

    /// Moves `key`'s deadline to `at` if that is earlier.
    pub fn at_most(&mut self, key: usize, at: u64) {
        if at < self.due[key] {
            self.set(key, at);
        }
    }

    /// The earliest deadline.
    pub fn earliest(&mut self) -> Option<u64> {
        while let Some(&Reverse((at, key))) = self.heap.peek() {
            if self.due[key as usize] == at {
                return Some(at);
            }
            self.heap.pop();
        }
        None
    }

    /// A key whose deadline is at or before `now`, its deadline cleared.
    pub fn pop_due(&mut self, now: u64) -> Option<usize> {
        while let Some(&Reverse((at, key))) = self.heap.peek() {
            if at > now {
                return None;
            }
            self.heap.pop();
            if self.due[key as usize] == at {
                self.due[key as usize] = NEVER;
                return Some(key as usize);
            }
        }
        None
    }
}

/// A protocol's hosts, driven by [`drive`]. Times are fabric nanoseconds.
pub trait Driver {
    /// Message `id` is handed to its source at `now`.
    fn submit(&mut self, fabric: &mut Fabric, now: u64, id: usize, out: &mut Outcomes);
    /// `host` has frames waiting.
    fn on_rx(&mut self, fabric: &mut Fabric, now: u64, host: usize, out: &mut Outcomes);
    /// The earliest poll deadline.
    fn next_deadline(&mut self) -> Option<u64>;
    /// Polls everything whose deadline is at or before `now`.
    fn run_due(&mut self, fabric: &mut Fabric, now: u64, out: &mut Outcomes);
    /// Whether work that outlives a message's arrival (an RPC's response)
    /// is finished; the loop ends only when it is.
    fn settled(&self) -> bool {
        true
    }
}

/// How far a [`drive`] call got.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoopStats {
    /// Loop iterations (distinct instants visited).
    pub steps: u64,
    /// Fabric time when the loop stopped, ns.
    pub end: u64,
    /// Fabric time when the last message arrived at its source, ns.
    pub arrivals_end: u64,
    /// Host-link busy time of all hosts summed when arrivals ended, ns.
    pub busy_at_arrivals_end: u64,
    /// The same when traffic started (filled in by the caller).
    pub busy_at_start: u64,
    /// The same when the loop stopped.
    pub busy_at_end: u64,
    /// Frames the switches had dropped when traffic started (set-up's),
    /// filled in by the caller.
    pub drops_at_start: u64,
}

/// Prints a progress line on stderr every few wall seconds.
pub struct Progress {
    label: String,
    started: WallClock,
    last: WallClock,
    quiet: bool,
}

impl Progress {
    /// A progress printer for `label`; `quiet` prints nothing.
    pub fn new(label: &str, quiet: bool) -> Progress {
        let now = WallClock::now();
        Progress {
            label: label.to_string(),
            started: now,
            last: now,
            quiet,
        }
    }

    fn maybe_print(&mut self, fabric: &Fabric, sim_end: u64, out: &Outcomes, total: usize) {
        if self.quiet || self.last.elapsed().as_secs_f64() < 5.0 {
            return;
        }
        self.last = WallClock::now();
        let wall = self.started.elapsed().as_secs_f64();
        let sim = fabric.now().total_nanos();
        eprintln!(
            "  {}: {:.2}/{:.2} ms simulated, {}/{} messages done, {:.0} hops/s, {:.0} s wall",
            self.label,
            sim as f64 / 1e6,
            sim_end as f64 / 1e6,
            out.finished(),
            total,
            fabric.stats().hops as f64 / wall,
            wall
        );
    }
}

/// Sum of the busy time of every host's link, ns.
pub fn host_busy(fabric: &Fabric) -> u64 {
    use crate::fabric::NodeId;
    (0..fabric.hosts())
        .filter_map(|h| fabric.port_stats(NodeId::Host(h), 0))
        .map(|p| p.busy.total_nanos())
        .sum()
}

/// What [`drive`] runs: messages whose arrival times count from `start`,
/// and the fabric time at which to give up.
#[derive(Debug, Clone, Copy)]
pub struct Plan<'a> {
    /// The messages, in order of arrival.
    pub messages: &'a [Message],
    /// Fabric time of arrival time 0, ns.
    pub start: u64,
    /// Fabric time at which the loop stops in any case, ns.
    pub limit: u64,
}

/// Runs the plan's messages until every one has an outcome, nothing is
/// left to do, the limit is reached, or `stop` says so.
pub fn drive<D: Driver>(
    fabric: &mut Fabric,
    driver: &mut D,
    plan: Plan<'_>,
    out: &mut Outcomes,
    progress: &mut Progress,
    mut stop: impl FnMut(&D) -> bool,
) -> LoopStats {
    let Plan {
        messages,
        start,
        limit,
    } = plan;
    let mut stats = LoopStats::default();
    let mut next = 0;
    let mut rx = Vec::new();
    let arrivals_end = start + messages.last().map_or(0, |m| m.at);
    let mut busy_noted = messages.is_empty();
    loop {
        let all_done = !messages.is_empty() && out.finished() == messages.len() && driver.settled();
        if stop(driver) || all_done {
            break;
        }
        let mut t = NEVER;
        if let Some(e) = fabric.next_event_time() {
            t = t.min(e.total_nanos());
        }
        if let Some(d) = driver.next_deadline() {
            t = t.min(d);
        }
        if let Some(m) = messages.get(next) {
            t = t.min(start + m.at);
        }
        if t == NEVER || t > limit {
            break;
        }
        let t = t.max(fabric.now().total_nanos());
        fabric.advance_to(Instant::from_nanos(t));
        stats.steps += 1;
        while let Some(m) = messages.get(next) {
            if start + m.at > t {
                break;
            }
            driver.submit(fabric, t, next, out);
            next += 1;
        }
        if !busy_noted && next == messages.len() {
            busy_noted = true;
            stats.arrivals_end = t;
            stats.busy_at_arrivals_end = host_busy(fabric);
        }
        fabric.hosts_with_rx(&mut rx);
        for &h in &rx {
            driver.on_rx(fabric, t, h, out);
        }
        driver.run_due(fabric, t, out);
        if stats.steps % 8192 == 0 {
            progress.maybe_print(fabric, arrivals_end, out, messages.len());
        }
    }
    if !busy_noted {
        stats.arrivals_end = fabric.now().total_nanos();
        stats.busy_at_arrivals_end = host_busy(fabric);
    }
    stats.end = fabric.now().total_nanos();
    stats.busy_at_end = host_busy(fabric);
    stats
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_pop_in_order_and_skip_replaced_entries() {
        let mut d = Deadlines::new(3);
        d.set(0, 50);
        d.set(1, 10);
        d.set(2, 30);
        d.set(1, 40); // replaces 10
        d.at_most(2, 60); // later: ignored
        d.at_most(0, 20); // earlier: taken
        assert_eq!(d.earliest(), Some(20));
        assert_eq!(d.pop_due(35), Some(0));
        assert_eq!(d.pop_due(35), Some(2));
        assert_eq!(d.pop_due(35), None);
        assert_eq!(d.earliest(), Some(40));
        d.set(1, NEVER);
        assert_eq!(d.earliest(), None);
    }
}
