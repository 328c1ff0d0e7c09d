//! Time from the Arm generic timer: the physical count (CNTPCT_EL0) at the
//! frequency in CNTFRQ_EL0 (62.5 MHz on QEMU's Cortex-A53). Nothing here
//! uses the timer's interrupt: the executor polls its tasks without pause
//! (the NIC is polled too), so a task that waits for an instant is simply
//! woken again at once and looks at the time once more.

use core::arch::asm;
use core::task::Waker;

use homa_phy::Instant;

/// The counter's frequency in Hz.
fn frequency() -> u64 {
    let hz: u64;
    // SAFETY: reads a system register, readable at EL1.
    unsafe { asm!("mrs {}, cntfrq_el0", out(reg) hz, options(nomem, nostack)) };
    hz.max(1)
}

/// The counter.
fn count() -> u64 {
    let n: u64;
    // SAFETY: reads a system register, readable at EL1. The `isb` keeps the
    // read from being done ahead of the code before it.
    unsafe { asm!("isb", "mrs {}, cntpct_el0", out(reg) n, options(nomem, nostack)) };
    n
}

/// `count` ticks of a `hz` counter in units of `1 / per_second` s, without
/// overflowing for any count.
fn scale(count: u64, hz: u64, per_second: u64) -> u64 {
    let whole = count / hz;
    let part = count % hz;
    whole
        .wrapping_mul(per_second)
        .wrapping_add(part * per_second / hz)
}

/// The time since the counter started (reset), for homa-stack.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    hz: u64,
}

impl Clock {
    /// The generic timer at its configured frequency.
    pub fn new() -> Clock {
        Clock { hz: frequency() }
    }

    /// The time now.
    pub fn now(&self) -> Instant {
        Instant::from_nanos(scale(count(), self.hz, 1_000_000_000))
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

impl homa_stack::asynch::Clock for Clock {
    fn now(&mut self) -> Instant {
        Clock::now(self)
    }

    /// Wakes at once: the spinning executor polls the runner again, and the
    /// runner looks at the time again (allowed: waking early is).
    fn wake_at(&mut self, _at: Instant, waker: &Waker) {
        waker.wake_by_ref();
    }
}

/// embassy-time's driver for embassy-net: microsecond ticks
/// (`tick-hz-1_000_000`) from the generic timer.
struct GenericTimer;

impl embassy_time_driver::Driver for GenericTimer {
    fn now(&self) -> u64 {
        scale(count(), frequency(), 1_000_000)
    }

    /// Wakes at once, as [`Clock::wake_at`] does; embassy-time's timers
    /// look at the time again when polled.
    fn schedule_wake(&self, _at: u64, waker: &Waker) {
        waker.wake_by_ref();
    }
}

embassy_time_driver::time_driver_impl!(static DRIVER: GenericTimer = GenericTimer);
