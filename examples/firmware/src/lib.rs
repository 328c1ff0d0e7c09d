//! What the firmware binaries share: the SysTick clock.
#![no_std]
#![forbid(unsafe_code)]

use core::sync::atomic::{AtomicU32, Ordering};

use cortex_m::peripheral::syst::SystClkSource;
use cortex_m::peripheral::SYST;
use cortex_m_rt::exception;
use homa_phy::Instant;

/// The core clock of QEMU's mps2-an386 (and of the real board's FPGA image).
pub const CPU_HZ: u32 = 25_000_000;
/// SysTick reload for a 1 ms interrupt.
const CYCLES_PER_MS: u32 = CPU_HZ / 1000;

/// Milliseconds since [`Clock::start`], counted by the SysTick interrupt.
static MILLIS: AtomicU32 = AtomicU32::new(0);

#[exception]
fn SysTick() {
    MILLIS.fetch_add(1, Ordering::Relaxed);
}

/// Monotonic time from SysTick: whole milliseconds from its interrupt, the
/// fraction from its down-counter. Resolution 40 ns at 25 MHz.
pub struct Clock {
    last: Instant,
}

impl Clock {
    /// Starts SysTick on the core clock with a 1 ms interrupt.
    pub fn start(mut syst: SYST) -> Clock {
        syst.set_clock_source(SystClkSource::Core);
        syst.set_reload(CYCLES_PER_MS - 1);
        syst.clear_current();
        syst.enable_interrupt();
        syst.enable_counter();
        Clock {
            last: Instant::ZERO,
        }
    }

    /// The time now.
    pub fn now(&mut self) -> Instant {
        let nanos = loop {
            let ms = MILLIS.load(Ordering::Relaxed);
            let left = SYST::get_current();
            if MILLIS.load(Ordering::Relaxed) == ms {
                let cycles = u64::from(CYCLES_PER_MS - 1 - left.min(CYCLES_PER_MS - 1));
                break u64::from(ms) * 1_000_000 + cycles * 1_000_000_000 / u64::from(CPU_HZ);
            }
        };
        // A read just after the counter reloaded but before the interrupt ran
        // would step back by up to 1 ms; never let time go backwards.
        self.last = self.last.max(Instant::from_nanos(nanos));
        self.last
    }
}
