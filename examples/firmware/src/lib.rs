//! What the firmware binaries share: the SysTick clock, the message
//! pattern the programs check, the verdict they print ([`finish`]), the two
//! endpoints of `homa-firmware` and `async-firmware` ([`pair`]), the
//! probes' endpoint ([`probe`]), and (feature `async`) the async runners'
//! timer on SysTick.
#![no_std]
// Only the embassy-time driver's registration (`time_driver`) is unsafe: an
// exported symbol.
#![deny(unsafe_code)]

use core::fmt::Display;
use core::sync::atomic::{AtomicU32, Ordering};

use cortex_m::peripheral::syst::SystClkSource;
use cortex_m::peripheral::SYST;
use cortex_m_rt::exception;
use cortex_m_semihosting::{debug, hprintln};
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
    #[cfg(feature = "board")]
    time_driver::on_tick(_ms);
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

/// The secret hash seed of the endpoint with link address `mac`.
///
/// A real board reads its hardware random number generator here, or mixes
/// a unique device id with a boot counter kept in flash (see
/// `Config::new`). QEMU's mps2-an386 has neither, so the example mixes a
/// build-time constant with the link address: fixed for each endpoint,
/// which is safe only because no peer of these in-memory wires is hostile.
pub const fn hash_seed(mac: [u8; 6]) -> u64 {
    let mut m = [0u8; 8];
    let mut i = 0;
    while i < 6 {
        m[i] = mac[i];
        i += 1;
    }
    u64::from_le_bytes(m) ^ 0x9e37_79b9_7f4a_7c15
}

/// Prints the verdict over semihosting, `PASS` or `FAIL: why`, and leaves
/// QEMU with the matching exit status.
pub fn finish(verdict: Result<(), impl Display>) -> ! {
    let ok = verdict.is_ok();
    match verdict {
        Ok(()) => hprintln!("PASS"),
        Err(why) => hprintln!("FAIL: {}", why),
    }
    debug::exit(if ok {
        debug::EXIT_SUCCESS
    } else {
        debug::EXIT_FAILURE
    });
    loop {
        cortex_m::asm::wfi();
    }
}

/// The client and the server of `homa-firmware` and `async-firmware`: their
/// addresses, table sizes, pools and the sizes they exchange, and the two
/// endpoints over statics in `.bss`.
pub mod pair {
    use homa_stack::endpoint::SetupError;
    use homa_stack::endpoint::{PeerSlot, RpcSlot, SocketSlot};
    use homa_stack::storage::{buffer_len_for, pages_for, MAX_MESSAGE_LEN};
    use homa_stack::wire::{EthernetAddress, Ipv4Addr};
    use homa_stack::{Config, Endpoint};
    use static_cell::{ConstStaticCell, StaticCell};

    /// Pool page size.
    pub const PAGE: usize = 4096;
    /// The largest message the programs send: Homa's limit, 1,000,000 bytes.
    pub const MAX_MSG: usize = MAX_MESSAGE_LEN;
    /// Pages of one largest message.
    const MSG_PAGES: usize = pages_for(MAX_MSG, PAGE);
    /// The client holds its request (kept for retransmission until the
    /// response completes it) and the response.
    pub const CLIENT_POOL: usize = buffer_len_for(2 * MSG_PAGES, PAGE);
    /// The server frees a request before it allocates the response, but it
    /// may still hold the previous response until the client's ACK arrives
    /// (on the first DATA of the next request), so a few pages more.
    pub const SERVER_POOL: usize = buffer_len_for(MSG_PAGES + 16, PAGE);

    /// RPC slots per endpoint.
    pub const RPCS: usize = 8;
    /// Peer slots per endpoint.
    pub const PEERS: usize = 4;
    /// Socket slots per endpoint.
    pub const SOCKETS: usize = 2;

    /// Request sizes: one byte, a small message, one full packet, one byte
    /// more than a packet, one byte more than the unscheduled limit (so it
    /// needs a grant), and the largest message.
    pub const SIZES: [usize; 6] = [1, 100, 1424, 1425, 40_001, MAX_MSG];
    /// Sizes sent again with frames dropped.
    pub const LOSSY_SIZES: [usize; 3] = [1425, 40_001, 200_000];
    /// In the lossy pass, each frame is dropped with probability 1 in this
    /// many, at random: a periodic drop can lock onto a retransmission cycle
    /// of the same length and drop the same packet forever.
    pub const LOSS_ONE_IN: u32 = 10;

    /// The client's address.
    pub const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    /// The server's address.
    pub const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
    /// The client's link address.
    pub const CLIENT_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
    /// The server's link address.
    pub const SERVER_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);
    /// The server's port.
    pub const PORT: u16 = 99;

    // The tables' empty slots are not all-zero bytes (`None` is a niche value
    // of the RPC state), so as `const` statics they would go to `.data` and
    // cost flash as well; `StaticCell` keeps them in `.bss` and fills them at
    // start.
    static CLIENT_RPCS: StaticCell<[RpcSlot; RPCS]> = StaticCell::new();
    static SERVER_RPCS: StaticCell<[RpcSlot; RPCS]> = StaticCell::new();
    static CLIENT_PEERS: StaticCell<[PeerSlot; PEERS]> = StaticCell::new();
    static SERVER_PEERS: StaticCell<[PeerSlot; PEERS]> = StaticCell::new();
    static CLIENT_SOCKETS: StaticCell<[SocketSlot; SOCKETS]> = StaticCell::new();
    static SERVER_SOCKETS: StaticCell<[SocketSlot; SOCKETS]> = StaticCell::new();
    // Zero-filled memory is built at compile time in `.bss`, never on the
    // stack.
    static CLIENT_POOL_MEM: ConstStaticCell<[u8; CLIENT_POOL]> =
        ConstStaticCell::new([0; CLIENT_POOL]);
    static SERVER_POOL_MEM: ConstStaticCell<[u8; SERVER_POOL]> =
        ConstStaticCell::new([0; SERVER_POOL]);

    /// The client's and the server's endpoints over their statics. Call it
    /// once: the statics are handed out only once (a second call panics).
    /// (`#[inline]`: compiled only into the programs that call it; built
    /// into this library, it changes how LTO inlines `size-probe`'s `main`.)
    #[inline]
    pub fn endpoints() -> Result<(Endpoint<'static>, Endpoint<'static>), SetupError> {
        let client = Endpoint::new(
            Config::new(CLIENT_IP, CLIENT_MAC, super::hash_seed(CLIENT_MAC.0)),
            &mut CLIENT_RPCS.init_with(|| [RpcSlot::EMPTY; RPCS])[..],
            &mut CLIENT_PEERS.init_with(|| [PeerSlot::EMPTY; PEERS])[..],
            &mut CLIENT_SOCKETS.init_with(|| [SocketSlot::EMPTY; SOCKETS])[..],
            &mut CLIENT_POOL_MEM.take()[..],
            PAGE,
        )?;
        let server = Endpoint::new(
            Config::new(SERVER_IP, SERVER_MAC, super::hash_seed(SERVER_MAC.0)),
            &mut SERVER_RPCS.init_with(|| [RpcSlot::EMPTY; RPCS])[..],
            &mut SERVER_PEERS.init_with(|| [PeerSlot::EMPTY; PEERS])[..],
            &mut SERVER_SOCKETS.init_with(|| [SocketSlot::EMPTY; SOCKETS])[..],
            &mut SERVER_POOL_MEM.take()[..],
            PAGE,
        )?;
        Ok((client, server))
    }
}

/// The endpoint of `size-probe` and `async-probe`: 8 RPCs, 4 peers, 2
/// sockets and 32 pages of 2 KiB, over statics in `.bss`.
pub mod probe {
    use homa_stack::endpoint::{PeerSlot, RpcSlot, SocketSlot};
    use homa_stack::{Config, Endpoint};
    use static_cell::{ConstStaticCell, StaticCell};

    /// Pool page size.
    const PAGE: usize = 2048;
    static RPCS: StaticCell<[RpcSlot; 8]> = StaticCell::new();
    static PEERS: StaticCell<[PeerSlot; 4]> = StaticCell::new();
    static SOCKETS: StaticCell<[SocketSlot; 2]> = StaticCell::new();
    static POOL: ConstStaticCell<[u8; 32 * (PAGE + 4)]> =
        ConstStaticCell::new([0; 32 * (PAGE + 4)]);

    /// The probe's endpoint with `config`. Call it once (the statics are
    /// handed out only once); panics on an invalid `config`. Always
    /// inlined: called from the library, LTO compiles `size-probe`'s
    /// `main` differently (larger), and the probe would no longer measure
    /// the same code as with the set-up written in `main`.
    #[inline(always)]
    pub fn endpoint(config: Config) -> Endpoint<'static> {
        Endpoint::new(
            config,
            &mut RPCS.init_with(|| [RpcSlot::EMPTY; 8])[..],
            &mut PEERS.init_with(|| [PeerSlot::EMPTY; 4])[..],
            &mut SOCKETS.init_with(|| [SocketSlot::EMPTY; 2])[..],
            &mut POOL.take()[..],
            PAGE,
        )
        .expect("valid set-up")
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

/// The server task of the async programs (feature `async`): binds `port`
/// on `stack` and answers every request, checked in place to be pattern
/// [`request_seed`](check::request_seed), with as many bytes of pattern
/// [`reply_seed`](check::reply_seed). Any failure ends the run
/// ([`finish`]).
#[cfg(feature = "async")]
pub async fn serve<const N: usize>(stack: &homa_stack::asynch::Stack<'static, N>, port: u16) -> ! {
    use check::{fill, matches, reply_seed, request_seed};
    let Ok(mut server) = stack.bind(port) else {
        finish(Err("bind"))
    };
    loop {
        let mut request = server.accept().await;
        let n = request.len();
        if request.read(|m| matches(m, request_seed(n), n)) != Some(true) {
            finish(Err("request corrupted"));
        }
        if request.reply_with(n, |w| fill(reply_seed(n), w)).is_err() {
            finish(Err("reply"));
        }
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

/// embassy-time's driver (feature `board`, for embassy-net) on the SysTick
/// millisecond count: a tick is 1 ms (embassy-time-driver's `tick-hz-1_000`),
/// and the SysTick interrupt wakes the waiters whose instant has come.
#[cfg(feature = "board")]
pub mod time_driver {
    use core::cell::RefCell;
    use core::sync::atomic::Ordering;
    use core::task::Waker;

    use cortex_m::interrupt::{self, Mutex};

    use super::MILLIS;

    /// Tasks that can wait at once; one more is woken at once instead (a
    /// spurious wake: it asks again).
    const WAITERS: usize = 4;

    /// A waiting task: the tick at which to wake it, and its waker.
    type Waiter = Option<(u64, Waker)>;

    static WAITING: Mutex<RefCell<[Waiter; WAITERS]>> =
        Mutex::new(RefCell::new([const { None }; WAITERS]));

    /// The driver.
    pub struct SysTickDriver;

    impl embassy_time_driver::Driver for SysTickDriver {
        fn now(&self) -> u64 {
            u64::from(MILLIS.load(Ordering::Relaxed))
        }

        fn schedule_wake(&self, at: u64, waker: &Waker) {
            interrupt::free(|cs| {
                if at <= self.now() {
                    waker.wake_by_ref();
                    return;
                }
                let mut waiting = WAITING.borrow(cs).borrow_mut();
                if let Some((t, _)) = waiting
                    .iter_mut()
                    .flatten()
                    .find(|(_, w)| w.will_wake(waker))
                {
                    *t = (*t).min(at);
                } else if let Some(free) = waiting.iter_mut().find(|w| w.is_none()) {
                    *free = Some((at, waker.clone()));
                } else {
                    waker.wake_by_ref();
                }
            });
        }
    }

    #[allow(unsafe_code)]
    mod register {
        embassy_time_driver::time_driver_impl!(static DRIVER: super::SysTickDriver = super::SysTickDriver);
    }

    /// From the SysTick interrupt: wakes the waiters due at `ms`.
    pub(crate) fn on_tick(ms: u32) {
        interrupt::free(|cs| {
            for slot in WAITING.borrow(cs).borrow_mut().iter_mut() {
                if slot.as_ref().is_some_and(|(at, _)| *at <= u64::from(ms)) {
                    if let Some((_, waker)) = slot.take() {
                        waker.wake();
                    }
                }
            }
        });
    }
}
