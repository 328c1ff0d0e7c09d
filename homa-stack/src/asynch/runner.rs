//! The runner: polls the endpoint, sleeps until the next timer, a frame
//! or a task's call. Executor-agnostic through [`Clock`] and [`Interface`].

use core::cell::RefCell;
use core::future::poll_fn;
use core::task::{Context, Poll, Waker};

use super::Stack;
use crate::phy::Device;
use crate::time::Instant;

/// Time for a [`Runner`]: the executor's (or the board's) clock and timer.
///
/// With embassy-time, `now` is `embassy_time::Instant::now()` converted to
/// nanoseconds and `wake_at` is `embassy_time_driver::schedule_wake`; on
/// bare metal, a timer interrupt that wakes the waker when `at` has come.
pub trait Clock {
    /// The time now; it should not go backwards.
    fn now(&mut self) -> Instant;

    /// Arranges for `waker` to be woken at `at` or soon after. Waking
    /// earlier is allowed (the runner looks at the time again); a later
    /// call replaces the earlier one.
    fn wake_at(&mut self, at: Instant, waker: &Waker);
}

/// The device of a [`Runner`], handed out for one poll together with the
/// runner task's [`Context`]: when it has no frame to give, the device
/// registers the context's waker and wakes it when one arrives.
pub trait Interface {
    /// The device for one poll.
    type Device<'d, 'c>: Device
    where
        Self: 'd,
        'c: 'd;

    /// The device for one poll by the task of `cx`.
    fn device<'d, 'c>(&'d mut self, cx: &'d mut Context<'c>) -> Self::Device<'d, 'c>;
}

/// One waker, kept until woken: for a device's "frame arrived" (see
/// [`Interface`]) or a stack's runner. For one executor; an interrupt
/// handler needs a critical-section cell instead.
#[derive(Debug, Default)]
pub struct WakerCell(RefCell<Option<Waker>>);

impl WakerCell {
    /// An empty cell.
    pub const fn new() -> Self {
        WakerCell(RefCell::new(None))
    }

    /// Keeps `waker` (replacing another task's).
    pub fn register(&self, waker: &Waker) {
        if let Ok(mut slot) = self.0.try_borrow_mut() {
            super::store(&mut slot, waker);
        }
    }

    /// Wakes the kept waker, if any, and forgets it.
    pub fn wake(&self) {
        let waker = self.0.try_borrow_mut().ok().and_then(|mut w| w.take());
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// Drives a [`Stack`] over an [`Interface`]: polls the endpoint whenever
/// the runner task is woken (a frame, the endpoint's timer, a task's call)
/// and otherwise sleeps. Run [`Runner::run`] in a task of its own.
pub struct Runner<'s, 'a, I, C, const N: usize> {
    stack: &'s Stack<'a, N>,
    interface: I,
    clock: C,
}

impl<'s, 'a, I: Interface, C: Clock, const N: usize> Runner<'s, 'a, I, C, N> {
    /// A runner for `stack` over `interface`, timed by `clock`.
    pub fn new(stack: &'s Stack<'a, N>, interface: I, clock: C) -> Self {
        Runner {
            stack,
            interface,
            clock,
        }
    }

    /// The interface.
    pub fn interface_mut(&mut self) -> &mut I {
        &mut self.interface
    }

    /// One poll, from the task of `cx`: polls the endpoint at the clock's
    /// time, then arranges the next wake-up (the endpoint's `poll_at`, a
    /// frame, or a task's call; at once when the endpoint is due already,
    /// after the executor has run the other tasks).
    pub fn poll_once(&mut self, cx: &mut Context<'_>) {
        // Registered before the poll: a call made during it still wakes us.
        self.stack.register_runner(cx.waker());
        let now = self.clock.now();
        let at = {
            let mut device = self.interface.device(cx);
            self.stack.poll(now, &mut device)
        };
        match at {
            Some(t) if t <= now => cx.waker().wake_by_ref(),
            Some(t) => self.clock.wake_at(t, cx.waker()),
            None => {}
        }
    }

    /// Runs the stack forever.
    pub async fn run(&mut self) -> ! {
        poll_fn(|cx| {
            self.poll_once(cx);
            Poll::<()>::Pending
        })
        .await;
        unreachable!("the runner's future never completes")
    }
}

impl<I, C, const N: usize> core::fmt::Debug for Runner<'_, '_, I, C, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Runner").finish_non_exhaustive()
    }
}

/// An [`embassy_net_driver::Driver`] as an [`Interface`] (feature
/// `embassy`): each poll goes through [`DriverAdapter`](crate::phy::DriverAdapter),
/// so the driver registers the runner's waker for the next frame. A
/// [`SharedDriver`](crate::phy::share::driver::SharedDriver) half works
/// too, beside embassy-net on the other half.
#[cfg(feature = "embassy")]
#[derive(Debug)]
pub struct EmbassyDriver<T>(pub T);

#[cfg(feature = "embassy")]
impl<T: embassy_net_driver::Driver> Interface for EmbassyDriver<T> {
    type Device<'d, 'c>
        = crate::phy::DriverAdapter<'d, 'c, T>
    where
        Self: 'd,
        'c: 'd;

    fn device<'d, 'c>(&'d mut self, cx: &'d mut Context<'c>) -> Self::Device<'d, 'c> {
        crate::phy::DriverAdapter::new(&mut self.0, Some(cx))
    }
}
