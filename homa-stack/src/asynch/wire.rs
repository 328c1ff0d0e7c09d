//! An in-memory pair of devices with wakers, for tests and demos.

use core::cell::{Cell, RefCell, RefMut};
use core::task::{Context, Waker};

use super::{Interface, WakerCell};
use crate::phy::loopback::{LoopbackRxToken, LoopbackTxToken};
use crate::phy::{Device, DeviceCapabilities, Loopback, RxToken};
use crate::time::Instant;

/// Two ends of an in-memory link, each an [`Interface`] for a [`Runner`](super::Runner):
/// what one end sends waits in a ring of `FRAMES` frames of up to `MTU`
/// bytes until the other end receives it. An end that finds no frame
/// keeps its runner's waker and is woken by the other end's next send; an
/// end that finds no room is woken when the other end takes a frame.
///
/// [`Wire::set_loss`] drops frames at random, to exercise
/// retransmission. All state is in the struct (`const`-constructible, so a
/// `static` of it lies in `.bss`).
pub struct Wire<const FRAMES: usize, const MTU: usize = 1514> {
    /// `rings[i]`: frames on their way to end `i`.
    rings: [RefCell<Loopback<FRAMES, MTU>>; 2],
    /// `rx[i]`: end `i`'s runner, waiting for a frame.
    rx: [WakerCell; 2],
    /// `room[i]`: end `i`'s runner, waiting for room to send.
    room: [WakerCell; 2],
    /// Drop one frame in this many (0: none), and the xorshift32 state.
    loss: Cell<(u32, u32)>,
    dropped: Cell<u64>,
}

impl<const FRAMES: usize, const MTU: usize> Default for Wire<FRAMES, MTU> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const FRAMES: usize, const MTU: usize> Wire<FRAMES, MTU> {
    /// A link with both rings empty and no loss.
    pub const fn new() -> Self {
        Wire {
            rings: [RefCell::new(Loopback::new()), RefCell::new(Loopback::new())],
            rx: [WakerCell::new(), WakerCell::new()],
            room: [WakerCell::new(), WakerCell::new()],
            loss: Cell::new((0, 0)),
            dropped: Cell::new(0),
        }
    }

    /// The two ends.
    pub fn ends(&self) -> (WireEnd<'_, FRAMES, MTU>, WireEnd<'_, FRAMES, MTU>) {
        (WireEnd { wire: self, me: 0 }, WireEnd { wire: self, me: 1 })
    }

    /// Drops each frame with probability 1 in `one_in` (0: none), drawn
    /// from `seed` (at random, not periodically: a fixed period could lock
    /// onto a retransmission cycle and drop the same packet forever).
    pub fn set_loss(&self, one_in: u32, seed: u32) {
        self.loss.set((one_in, seed | 1));
    }

    /// Frames dropped so far.
    pub fn dropped(&self) -> u64 {
        self.dropped.get()
    }

    /// Frames waiting for end `end` (0 or 1).
    pub fn queued(&self, end: usize) -> usize {
        self.rings[end & 1].try_borrow().map_or(0, |r| r.len())
    }

    fn drop_next(&self) -> bool {
        let (one_in, mut x) = self.loss.get();
        if one_in == 0 {
            return false;
        }
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.loss.set((one_in, x));
        x % one_in == 0
    }
}

impl<const FRAMES: usize, const MTU: usize> core::fmt::Debug for Wire<FRAMES, MTU> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Wire")
            .field("queued", &[self.queued(0), self.queued(1)])
            .field("dropped", &self.dropped())
            .finish()
    }
}

/// One end of a [`Wire`].
#[derive(Debug)]
pub struct WireEnd<'w, const FRAMES: usize, const MTU: usize> {
    wire: &'w Wire<FRAMES, MTU>,
    me: usize,
}

impl<const FRAMES: usize, const MTU: usize> Interface for WireEnd<'_, FRAMES, MTU> {
    type Device<'d, 'c>
        = WireDevice<'d, FRAMES, MTU>
    where
        Self: 'd,
        'c: 'd;

    /// # Panics
    ///
    /// When the end is polled from inside its own poll (the rings are
    /// borrowed for the length of one).
    fn device<'d, 'c>(&'d mut self, cx: &'d mut Context<'c>) -> Self::Device<'d, 'c> {
        let wire = self.wire;
        WireDevice {
            rx: wire.rings[self.me].borrow_mut(),
            tx: wire.rings[1 - self.me].borrow_mut(),
            wire,
            me: self.me,
            waker: cx.waker(),
            sent: false,
            taken: false,
        }
    }
}

/// A [`WireEnd`]'s device for one poll; wakes the other end when dropped,
/// if a frame was sent to it or taken from it.
pub struct WireDevice<'d, const FRAMES: usize, const MTU: usize> {
    rx: RefMut<'d, Loopback<FRAMES, MTU>>,
    tx: RefMut<'d, Loopback<FRAMES, MTU>>,
    wire: &'d Wire<FRAMES, MTU>,
    me: usize,
    waker: &'d Waker,
    sent: bool,
    taken: bool,
}

impl<const FRAMES: usize, const MTU: usize> WireDevice<'_, FRAMES, MTU> {
    fn room(&mut self, now: Instant) -> bool {
        if self.tx.transmit(now).is_some() {
            return true;
        }
        self.wire.room[self.me].register(self.waker);
        false
    }
}

impl<const FRAMES: usize, const MTU: usize> Device for WireDevice<'_, FRAMES, MTU> {
    type RxToken<'a>
        = LoopbackRxToken<'a, MTU>
    where
        Self: 'a;
    type TxToken<'a>
        = LoopbackTxToken<'a, MTU>
    where
        Self: 'a;

    fn receive(&mut self, now: Instant) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
        // A frame is taken only with room to answer it.
        if !self.room(now) {
            return None;
        }
        loop {
            if self.rx.is_empty() {
                self.wire.rx[self.me].register(self.waker);
                return None;
            }
            self.taken = true;
            if !self.wire.drop_next() {
                break;
            }
            let (lost, _) = self.rx.receive(now)?;
            lost.consume(|_| ());
            self.wire.dropped.set(self.wire.dropped.get() + 1);
        }
        self.sent = true;
        let (rx, _) = self.rx.receive(now)?;
        let tx = self.tx.transmit(now)?;
        Some((rx, tx))
    }

    fn transmit(&mut self, now: Instant) -> Option<Self::TxToken<'_>> {
        if !self.room(now) {
            return None;
        }
        self.sent = true;
        self.tx.transmit(now)
    }

    fn capabilities(&self) -> DeviceCapabilities {
        self.tx.capabilities()
    }
}

impl<const FRAMES: usize, const MTU: usize> Drop for WireDevice<'_, FRAMES, MTU> {
    fn drop(&mut self) {
        let peer = 1 - self.me;
        if self.sent {
            self.wire.rx[peer].wake();
        }
        if self.taken {
            self.wire.room[peer].wake();
        }
    }
}

impl<const FRAMES: usize, const MTU: usize> core::fmt::Debug for WireDevice<'_, FRAMES, MTU> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("WireDevice")
            .field("end", &self.me)
            .finish_non_exhaustive()
    }
}
