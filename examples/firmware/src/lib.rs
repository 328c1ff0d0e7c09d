//! What the firmware binaries share: the SysTick clock, the message
//! pattern the programs check, and (feature `async`) the async runners'
//! timer on SysTick.
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
    let _ms = MILLIS.fetch_add(1, Ordering::Relaxed) + 1;
    #[cfg(feature = "async")]
    alarm::on_tick(_ms);
}

/// Monotonic time from SysTick: whole milliseconds from its interrupt, the
/// fraction from its down-counter. Resolution 40 ns at 25 MHz.
#[derive(Clone)]
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

/// The test messages: byte `i` of message `seed`, cheap and different for
/// every offset within a page and every message.
pub mod check {
    use homa_stack::storage::{MessageRef, MessageWriter};

    /// Byte `i` of the test message `seed`.
    pub fn pattern(seed: u32, i: usize) -> u8 {
        let x = (i as u32).wrapping_add(seed.wrapping_mul(0x9e37_79b9));
        (x ^ (x >> 8) ^ (x >> 16).wrapping_mul(31)) as u8
    }

    /// Writes pattern `seed` into a message being built in place in the pool.
    pub fn fill(seed: u32, w: &mut MessageWriter<'_, '_>) {
        w.for_each_chunk(|at, piece| {
            for (j, b) in piece.iter_mut().enumerate() {
                *b = pattern(seed, at + j);
            }
        });
    }

    /// Whether a received message is exactly `len` bytes of pattern `seed`,
    /// read in place from the pool's pages.
    pub fn matches(msg: MessageRef<'_>, seed: u32, len: usize) -> bool {
        if msg.len() != len {
            return false;
        }
        let mut off = 0;
        for chunk in msg.chunks() {
            for (j, &b) in chunk.iter().enumerate() {
                if b != pattern(seed, off + j) {
                    return false;
                }
            }
            off += chunk.len();
        }
        off == len
    }

    /// Seed of the request of `len` bytes.
    pub fn request_seed(len: usize) -> u32 {
        len as u32
    }

    /// Seed of its reply (different, so an echo would fail).
    pub fn reply_seed(len: usize) -> u32 {
        !(len as u32)
    }
}

/// The async runners' timer (feature `async`): each [`AlarmClock`] has one
/// alarm slot, checked by the SysTick interrupt every millisecond, which
/// wakes the runner's waker once its instant has come. Instead of an
/// `embassy-time` driver: the runner needs only "now" and "wake me at",
/// and the 1 ms SysTick already runs for the clock.
#[cfg(feature = "async")]
pub mod alarm {
    use core::cell::RefCell;
    use core::sync::atomic::Ordering;
    use core::task::Waker;

    use cortex_m::interrupt::{self, Mutex};
    use homa_phy::Instant;

    use super::{Clock, MILLIS};

    /// Alarm slots: one per runner.
    pub const ALARMS: usize = 2;

    /// An alarm: the millisecond count at which to wake, and whom.
    type Alarm = Option<(u32, Waker)>;

    /// One alarm per slot.
    static SLOTS: Mutex<RefCell<[Alarm; ALARMS]>> =
        Mutex::new(RefCell::new([const { None }; ALARMS]));

    /// From the SysTick interrupt: wakes the alarms due at `ms`.
    pub(crate) fn on_tick(ms: u32) {
        interrupt::free(|cs| {
            for slot in SLOTS.borrow(cs).borrow_mut().iter_mut() {
                if slot.as_ref().is_some_and(|(at, _)| *at <= ms) {
                    if let Some((_, waker)) = slot.take() {
                        waker.wake();
                    }
                }
            }
        });
    }

    /// The SysTick [`Clock`] with alarm slot `slot`: a
    /// [`homa_stack::asynch::Clock`] for one runner. The alarm's resolution
    /// is the 1 ms tick: an instant within the current millisecond wakes
    /// the runner at once (it polls again after the other tasks ran).
    pub struct AlarmClock {
        clock: Clock,
        slot: usize,
    }

    impl AlarmClock {
        /// Alarm slot `slot` (below [`ALARMS`]) on `clock`.
        pub fn new(clock: Clock, slot: usize) -> AlarmClock {
            AlarmClock {
                clock,
                slot: slot % ALARMS,
            }
        }
    }

    impl homa_stack::asynch::Clock for AlarmClock {
        fn now(&mut self) -> Instant {
            self.clock.now()
        }

        fn wake_at(&mut self, at: Instant, waker: &Waker) {
            let ms = at.total_millis();
            let ms = u32::try_from(ms).unwrap_or(u32::MAX);
            interrupt::free(|cs| {
                if ms <= MILLIS.load(Ordering::Relaxed) {
                    waker.wake_by_ref();
                    return;
                }
                let mut slots = SLOTS.borrow(cs).borrow_mut();
                match &mut slots[self.slot] {
                    Some((t, w)) if w.will_wake(waker) => *t = ms,
                    other => *other = Some((ms, waker.clone())),
                }
            });
        }
    }
}
