//! The endpoint's deadlines in one table: which ones exist is an enum, when
//! each is due an array entry. The next wake-up and a step back of the
//! clock are loops over the table, not a merge of loose fields.

use crate::time::{Duration, Instant};

/// A deadline of the endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Timer {
    /// The 1 ms tick: silence, RESEND, timeouts, NEED_ACK (see `timer`).
    /// Always armed; it wakes `poll_at` only while an RPC lives.
    Tick,
    /// The next FIFO grant; armed only while a message awaits grants (see
    /// `grant::fifo_clock`).
    FifoGrant,
    /// An ARP request or neighbour solicitation to send (`Instant::ZERO`:
    /// at the next egress), so `poll_at` need not walk the resolve list.
    Resolve,
    /// DATA is waiting and the pacer holds it until then (set by an egress
    /// that could not send; cleared at the next).
    Pacer,
}

impl Timer {
    /// Every timer, in the table's order.
    pub(super) const ALL: [Timer; 4] =
        [Timer::Tick, Timer::FifoGrant, Timer::Resolve, Timer::Pacer];
}

/// When each [`Timer`] is due. [`Instant::MAX`], the end of the clock,
/// stands for "not armed": a deadline there never comes.
///
/// Each entry holds its deadline's nanoseconds plus one (wrapping), so that
/// the disarmed table is all zeros and an entry decodes with one
/// subtraction: a zeroed table costs the firmware no fill code.
#[derive(Debug, Clone, Copy)]
pub(super) struct TimerTable {
    at: [u64; Timer::ALL.len()],
}

impl TimerTable {
    /// The tick due at once, the rest disarmed.
    pub(super) fn new() -> TimerTable {
        let mut t = TimerTable {
            at: [0; Timer::ALL.len()],
        };
        t.set(Timer::Tick, Instant::ZERO);
        t
    }

    /// Arms `timer` for `at` (replacing any earlier deadline).
    #[inline]
    pub(super) fn set(&mut self, timer: Timer, at: Instant) {
        self.at[timer as usize] = at.total_nanos().wrapping_add(1);
    }

    /// Disarms `timer`.
    #[inline]
    pub(super) fn stop(&mut self, timer: Timer) {
        self.set(timer, Instant::MAX);
    }

    /// Arms `timer` for `at`, or disarms it for `None`.
    pub(super) fn update(&mut self, timer: Timer, at: Option<Instant>) {
        self.set(timer, at.unwrap_or(Instant::MAX));
    }

    /// When `timer` is due (`Instant::MAX`: not armed).
    #[inline]
    pub(super) fn due(&self, timer: Timer) -> Instant {
        Instant::from_nanos(self.at[timer as usize].wrapping_sub(1))
    }

    /// When `timer` is due, if armed.
    #[inline]
    pub(super) fn get(&self, timer: Timer) -> Option<Instant> {
        Some(self.due(timer)).filter(|&t| t != Instant::MAX)
    }

    /// Whether `timer` is armed and due at `now`.
    #[inline]
    pub(super) fn is_due(&self, timer: Timer, now: Instant) -> bool {
        let t = self.due(timer);
        t != Instant::MAX && t <= now
    }

    /// The earliest deadline of the armed timers `wakes` accepts.
    pub(super) fn next(&self, wakes: impl Fn(Timer) -> bool) -> Option<Instant> {
        let mut next = Instant::MAX;
        for timer in Timer::ALL {
            if wakes(timer) {
                next = next.min(self.due(timer));
            }
        }
        Some(next).filter(|&t| t != Instant::MAX)
    }

    /// The clock went back to `now`: no deadline stays beyond it, but the
    /// tick, which a step back is no reason to run, stays up to one `tick`
    /// ahead.
    pub(super) fn rebase(&mut self, now: Instant, tick: Duration) {
        for timer in Timer::ALL {
            let limit = match timer {
                Timer::Tick => now + tick,
                _ => now,
            };
            if let Some(t) = self.get(timer) {
                self.set(timer, t.min(limit));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Instant {
        Instant::from_millis(n)
    }

    #[test]
    fn the_next_deadline_is_the_earliest_armed_one_that_wakes() {
        let mut t = TimerTable::new();
        assert_eq!(t.next(|_| true), Some(Instant::ZERO), "the first tick");
        t.set(Timer::Tick, ms(5));
        t.set(Timer::Pacer, ms(3));
        t.set(Timer::FifoGrant, ms(4));
        assert_eq!(t.next(|_| true), Some(ms(3)));
        assert_eq!(t.next(|k| k != Timer::Pacer), Some(ms(4)));
        t.update(Timer::FifoGrant, None);
        assert_eq!(t.next(|k| k != Timer::Pacer), Some(ms(5)));
        assert_eq!(t.next(|k| k == Timer::Resolve), None);
        assert!(t.is_due(Timer::Tick, ms(5)) && !t.is_due(Timer::Tick, ms(4)));
        assert!(!t.is_due(Timer::Resolve, ms(100)), "not armed");
        t.stop(Timer::Tick);
        assert_eq!(t.next(|k| k != Timer::Pacer), None);
        // The end of the clock never comes: a deadline there is none.
        t.set(Timer::Resolve, Instant::MAX);
        assert_eq!(t.get(Timer::Resolve), None);
        assert!(!t.is_due(Timer::Resolve, Instant::MAX));
        t.set(Timer::Resolve, Instant::ZERO);
        assert!(t.is_due(Timer::Resolve, Instant::ZERO));
    }

    #[test]
    fn a_step_back_pulls_deadlines_to_now_and_the_tick_to_one_tick_ahead() {
        let mut t = TimerTable::new();
        t.set(Timer::Tick, ms(1_000));
        t.set(Timer::Resolve, ms(900));
        t.set(Timer::Pacer, ms(2));
        t.rebase(ms(10), Duration::from_millis(1));
        assert_eq!(t.get(Timer::Tick), Some(ms(11)));
        assert_eq!(t.get(Timer::Resolve), Some(ms(10)));
        assert_eq!(t.get(Timer::Pacer), Some(ms(2)), "earlier ones stay");
        assert_eq!(t.get(Timer::FifoGrant), None, "unarmed ones stay unarmed");
    }
}
