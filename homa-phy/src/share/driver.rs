//! One [`embassy_net_driver::Driver`] shared by homa-stack and embassy-net.
//!
//! embassy-net's `Runner` owns its driver, so the sharing state lives in a
//! [`SharedDriver`] that both halves borrow: [`SharedDriver::halves`] gives
//! two [`DriverHalf`]s, each an embassy [`Driver`](driver::Driver). Hand the
//! [`Side::Other`] half to `embassy_net::new` and poll homa-stack's endpoint
//! on the [`Side::Homa`] half through
//! [`DriverAdapter`](crate::embassy::DriverAdapter). Frames are routed as by
//! [`Share`](super::Share): see [`route`](super::route).
//!
//! ```
//! # use core::task::{Context, Waker};
//! use homa_phy::embassy::DriverAdapter;
//! use homa_phy::share::driver::SharedDriver;
//! use homa_phy::{Device, Instant};
//!
//! fn run<D: embassy_net_driver::Driver>(nic: D) {
//!     // On bare metal: a `StaticCell<SharedDriver<D>>`, so the halves are
//!     // `'static` and can be moved into tasks.
//!     let shared: SharedDriver<D> = SharedDriver::new(nic);
//!     let (mut homa, _for_embassy_net) = shared.halves();
//!     // In homa-stack's runner task, on every wake-up:
//!     let mut cx = Context::from_waker(Waker::noop());
//!     let mut device = DriverAdapter::new(&mut homa, Some(&mut cx));
//!     // ... endpoint.poll(now, &mut device) ...
//!     # let _ = device.receive(Instant::ZERO);
//! }
//! ```
//!
//! # Waking
//!
//! An embassy driver keeps one waker per event, the last one it was given,
//! so each half also keeps the waker of its own task. A half that takes a
//! frame for the other side from the driver wakes the other side; a half that
//! finds transmit room wakes the other side if it was waiting for room; a half
//! that sees the link state change wakes the other side. Both halves must
//! therefore keep being polled (as embassy-net's runner and a homa-stack
//! runner task are) for either to learn of every event.
//!
//! The halves are for one executor (the state is in `RefCell`s, not behind a
//! lock). Nothing here panics: a re-entrant call finds the state borrowed and
//! gets no token.

use core::cell::{Cell, RefCell};
use core::task::{Context, Waker};

use embassy_net_driver as driver;

use super::{Queues, ShareStats, Side};
use crate::{Instant, PacketMeta};

/// Per-side wakers.
#[derive(Default)]
struct Wakers {
    rx: [Option<Waker>; 2],
    tx: [Option<Waker>; 2],
}

fn store(slot: &mut Option<Waker>, waker: &Waker) {
    match slot {
        Some(w) if w.will_wake(waker) => {}
        _ => *slot = Some(waker.clone()),
    }
}

/// An embassy driver shared by two stacks (see the [module docs](self)).
pub struct SharedDriver<D, const FRAMES: usize = 4, const MTU: usize = 1518> {
    driver: RefCell<D>,
    queues: RefCell<Queues<FRAMES, MTU>>,
    wakers: RefCell<Wakers>,
    link: [Cell<Option<driver::LinkState>>; 2],
    /// Frames written through a transmit token after the driver had lost
    /// its room (or was busy); they were discarded.
    tx_lost: Cell<u64>,
    caps: driver::Capabilities,
    hardware_address: driver::HardwareAddress,
}

impl<D: driver::Driver, const FRAMES: usize, const MTU: usize> SharedDriver<D, FRAMES, MTU> {
    /// Shares `driver`. Its capabilities and hardware address are read once,
    /// here.
    pub fn new(driver: D) -> Self {
        SharedDriver {
            caps: driver.capabilities(),
            hardware_address: driver.hardware_address(),
            driver: RefCell::new(driver),
            queues: RefCell::new(Queues::new()),
            wakers: RefCell::new(Wakers::default()),
            link: [Cell::new(None), Cell::new(None)],
            tx_lost: Cell::new(0),
        }
    }

    /// homa-stack's half and the other stack's half.
    pub fn halves(
        &self,
    ) -> (
        DriverHalf<'_, D, FRAMES, MTU>,
        DriverHalf<'_, D, FRAMES, MTU>,
    ) {
        (self.half(Side::Homa), self.half(Side::Other))
    }

    /// The half of `side` (more than one half of a side may exist; they
    /// share its queue).
    pub fn half(&self, side: Side) -> DriverHalf<'_, D, FRAMES, MTU> {
        DriverHalf { shared: self, side }
    }

    /// The counters; `None` while a frame is being read.
    pub fn stats(&self) -> Option<ShareStats> {
        self.queues.try_borrow().ok().map(|q| q.stats)
    }

    /// Frames discarded at transmit because the driver had no room by the
    /// time the token was used (see [`DriverHalf`]).
    pub fn tx_lost(&self) -> u64 {
        self.tx_lost.get()
    }

    /// The driver, to reach it directly (frames taken from it so bypass
    /// the queues).
    pub fn get_mut(&mut self) -> &mut D {
        self.driver.get_mut()
    }

    /// Gives the driver back; queued frames are lost.
    pub fn into_inner(self) -> D {
        self.driver.into_inner()
    }

    fn wake(&self, kind: fn(&mut Wakers) -> &mut [Option<Waker>; 2], side: Side) {
        if let Ok(mut w) = self.wakers.try_borrow_mut() {
            if let Some(waker) = kind(&mut w)[side.index()].take() {
                waker.wake();
            }
        }
    }

    fn wait(&self, kind: fn(&mut Wakers) -> &mut [Option<Waker>; 2], side: Side, cx: &Context) {
        if let Ok(mut w) = self.wakers.try_borrow_mut() {
            store(&mut kind(&mut w)[side.index()], cx.waker());
        }
    }

    /// Whether `side`'s queue has a frame, after taking frames from the
    /// driver while it has none (at most `FRAMES`).
    fn fill(&self, side: Side, cx: &mut Context) -> bool {
        let (Ok(mut driver), Ok(mut queues)) =
            (self.driver.try_borrow_mut(), self.queues.try_borrow_mut())
        else {
            return false;
        };
        for _ in 0..FRAMES {
            if !queues.rings[side.index()].is_empty() {
                return true;
            }
            // With no frame, the driver has registered this task's waker.
            let Some((rx, _)) = driver.receive(cx) else {
                return false;
            };
            let route = driver::RxToken::consume(rx, |frame| {
                queues.deliver(frame, PacketMeta::default(), Instant::ZERO)
            });
            if route.includes(side.peer()) {
                self.wake(|w| &mut w.rx, side.peer());
            }
        }
        let ready = !queues.rings[side.index()].is_empty();
        if !ready {
            // Stopped by the bound with frames possibly left: the driver did
            // not register us, so come back by ourselves.
            cx.waker().wake_by_ref();
        }
        ready
    }

    /// Whether the driver has transmit room now.
    fn tx_room(&self, side: Side, cx: &mut Context) -> bool {
        let Ok(mut driver) = self.driver.try_borrow_mut() else {
            return false;
        };
        let room = driver.transmit(cx).is_some();
        drop(driver);
        if room {
            self.wake(|w| &mut w.tx, side.peer());
        } else {
            self.wait(|w| &mut w.tx, side, cx);
        }
        room
    }
}

/// One side of a [`SharedDriver`], an embassy driver itself.
///
/// Its transmit token does not hold the driver's (the driver is shared): it
/// checks for room when handed out and takes the driver's token when used.
/// Used at once, as the stacks do, it finds the room it saw; if the other
/// side took that room in between, the frame is discarded and counted in
/// [`SharedDriver::tx_lost`].
pub struct DriverHalf<'d, D, const FRAMES: usize, const MTU: usize> {
    shared: &'d SharedDriver<D, FRAMES, MTU>,
    side: Side,
}

impl<D, const FRAMES: usize, const MTU: usize> DriverHalf<'_, D, FRAMES, MTU> {
    /// Which side this is.
    pub const fn side(&self) -> Side {
        self.side
    }
}

/// Receive token of a [`DriverHalf`]: the oldest frame of its queue.
pub struct HalfRxToken<'d, D, const FRAMES: usize, const MTU: usize> {
    shared: &'d SharedDriver<D, FRAMES, MTU>,
    side: Side,
}

/// Transmit token of a [`DriverHalf`]: room in the shared driver.
pub struct HalfTxToken<'d, D, const FRAMES: usize, const MTU: usize> {
    shared: &'d SharedDriver<D, FRAMES, MTU>,
}

impl<D: driver::Driver, const FRAMES: usize, const MTU: usize> driver::RxToken
    for HalfRxToken<'_, D, FRAMES, MTU>
{
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, f: F) -> R {
        // The queue stays borrowed while `f` runs; `f` answers through the
        // transmit token, which borrows only the driver.
        let Ok(mut queues) = self.shared.queues.try_borrow_mut() else {
            return f(&mut []);
        };
        match queues.rings[self.side.index()].pop_frame_mut() {
            Some(frame) => f(frame),
            None => f(&mut []),
        }
    }
}

impl<D: driver::Driver, const FRAMES: usize, const MTU: usize> driver::TxToken
    for HalfTxToken<'_, D, FRAMES, MTU>
{
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut cx = Context::from_waker(Waker::noop());
        if let Ok(mut driver) = self.shared.driver.try_borrow_mut() {
            if let Some(tx) = driver.transmit(&mut cx) {
                return tx.consume(len, f);
            }
        }
        self.shared.tx_lost.set(self.shared.tx_lost.get() + 1);
        let mut junk = [0u8; MTU];
        f(&mut junk[..len.min(MTU)])
    }
}

impl<D: driver::Driver, const FRAMES: usize, const MTU: usize> driver::Driver
    for DriverHalf<'_, D, FRAMES, MTU>
{
    type RxToken<'a>
        = HalfRxToken<'a, D, FRAMES, MTU>
    where
        Self: 'a;
    type TxToken<'a>
        = HalfTxToken<'a, D, FRAMES, MTU>
    where
        Self: 'a;

    fn receive(&mut self, cx: &mut Context) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
        if !self.shared.fill(self.side, cx) {
            self.shared.wait(|w| &mut w.rx, self.side, cx);
            return None;
        }
        if !self.shared.tx_room(self.side, cx) {
            return None;
        }
        let shared = self.shared;
        Some((
            HalfRxToken {
                shared,
                side: self.side,
            },
            HalfTxToken { shared },
        ))
    }

    fn transmit(&mut self, cx: &mut Context) -> Option<Self::TxToken<'_>> {
        self.shared.tx_room(self.side, cx).then_some(HalfTxToken {
            shared: self.shared,
        })
    }

    fn link_state(&mut self, cx: &mut Context) -> driver::LinkState {
        let Ok(mut driver) = self.shared.driver.try_borrow_mut() else {
            return self.shared.link[self.side.index()]
                .get()
                .unwrap_or(driver::LinkState::Down);
        };
        let state = driver.link_state(cx);
        drop(driver);
        self.shared.link[self.side.index()].set(Some(state));
        // The driver now wakes this task on a change, not the other side's:
        // tell the other side when it has not seen this state yet.
        if self.shared.link[self.side.peer().index()].get() != Some(state) {
            self.shared.wake(|w| &mut w.rx, self.side.peer());
        }
        state
    }

    /// The driver's, with the MTU capped at the queues' `MTU`: a larger
    /// frame could not be received through the queues, nor written whole
    /// by a token whose room was taken (it writes into an `MTU`-byte
    /// scratch buffer).
    fn capabilities(&self) -> driver::Capabilities {
        let mut caps = self.shared.caps.clone();
        caps.max_transmission_unit = caps.max_transmission_unit.min(MTU);
        caps
    }

    fn hardware_address(&self) -> driver::HardwareAddress {
        self.shared.hardware_address
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use driver::{Driver as _, RxToken as _, TxToken as _};
    use std::collections::VecDeque;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;
    use std::vec::Vec;

    /// A driver with queued frames, a transmit log with room for `room`
    /// frames, and the waker it was last given.
    #[derive(Default)]
    struct Mock {
        rx: VecDeque<Vec<u8>>,
        tx: Vec<Vec<u8>>,
        room: usize,
        link: Option<driver::LinkState>,
        last_rx_waker: Option<Waker>,
        /// The MTU it reports; 0 for 1514.
        mtu: usize,
    }

    struct MockRx(Vec<u8>);
    struct MockTx<'a>(&'a mut Vec<Vec<u8>>);

    impl driver::RxToken for MockRx {
        fn consume<R, F: FnOnce(&mut [u8]) -> R>(mut self, f: F) -> R {
            f(&mut self.0)
        }
    }

    impl driver::TxToken for MockTx<'_> {
        fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
            let mut buf = std::vec![0; len];
            let r = f(&mut buf);
            self.0.push(buf);
            r
        }
    }

    impl driver::Driver for Mock {
        type RxToken<'a> = MockRx;
        type TxToken<'a> = MockTx<'a>;
        fn receive(&mut self, cx: &mut Context) -> Option<(MockRx, MockTx<'_>)> {
            let Some(frame) = self.rx.pop_front() else {
                self.last_rx_waker = Some(cx.waker().clone());
                return None;
            };
            Some((MockRx(frame), MockTx(&mut self.tx)))
        }
        fn transmit(&mut self, _cx: &mut Context) -> Option<MockTx<'_>> {
            (self.tx.len() < self.room).then_some(MockTx(&mut self.tx))
        }
        fn link_state(&mut self, _cx: &mut Context) -> driver::LinkState {
            self.link.unwrap_or(driver::LinkState::Up)
        }
        fn capabilities(&self) -> driver::Capabilities {
            let mut caps = driver::Capabilities::default();
            caps.max_transmission_unit = if self.mtu == 0 { 1514 } else { self.mtu };
            caps
        }
        fn hardware_address(&self) -> driver::HardwareAddress {
            driver::HardwareAddress::Ethernet([2, 0, 0, 0, 0, 7])
        }
    }

    /// A waker counting its wakes.
    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn counter() -> (Arc<Count>, Waker) {
        let c = Arc::new(Count(AtomicUsize::new(0)));
        (c.clone(), Waker::from(c))
    }

    fn frame(ethertype: u16, protocol: u8, fill: u8) -> Vec<u8> {
        let mut f = std::vec![0u8; 12];
        f.extend_from_slice(&ethertype.to_be_bytes());
        let mut ip = std::vec![fill; 28];
        ip[0] = 0x45;
        ip[9] = protocol;
        f.extend_from_slice(&ip);
        f
    }

    fn take(half: &mut impl driver::Driver, cx: &mut Context) -> Option<Vec<u8>> {
        let (rx, _) = half.receive(cx)?;
        Some(rx.consume(|f| f.to_vec()))
    }

    #[test]
    fn frames_are_routed_and_the_other_side_is_woken_for_its_own() {
        let homa = frame(0x0800, 146, 1);
        let udp = frame(0x0800, 17, 2);
        let arp = frame(0x0806, 0, 3);
        let mock = Mock {
            rx: VecDeque::from([udp.clone(), homa.clone(), arp.clone()]),
            room: 8,
            ..Mock::default()
        };
        let shared: SharedDriver<Mock> = SharedDriver::new(mock);
        let (mut h, mut o) = shared.halves();
        let (homa_count, homa_waker) = counter();
        let (other_count, other_waker) = counter();
        let mut hcx = Context::from_waker(&homa_waker);
        let mut ocx = Context::from_waker(&other_waker);

        // embassy-net's task polls first and sleeps: the driver has frames
        // for it, but suppose they arrive later: empty the mock for a moment.
        let waiting = core::mem::take(&mut shared.driver.borrow_mut().rx);
        assert!(take(&mut o, &mut ocx).is_none());
        shared.driver.borrow_mut().rx = waiting;
        // homa-stack's task takes the UDP frame off the driver first: the
        // other side is woken for it.
        assert_eq!(take(&mut h, &mut hcx), Some(homa));
        assert_eq!(other_count.0.load(Ordering::SeqCst), 1);
        assert_eq!(take(&mut h, &mut hcx), Some(arp.clone()));
        assert!(take(&mut h, &mut hcx).is_none());
        assert_eq!(take(&mut o, &mut ocx), Some(udp));
        assert_eq!(take(&mut o, &mut ocx), Some(arp));
        assert!(take(&mut o, &mut ocx).is_none());
        assert_eq!(homa_count.0.load(Ordering::SeqCst), 0);
        let stats = shared.stats().unwrap();
        assert_eq!((stats.homa.frames, stats.other.frames), (2, 2));
        // The last to find nothing is the one the driver wakes.
        assert!(shared
            .driver
            .borrow()
            .last_rx_waker
            .as_ref()
            .unwrap()
            .will_wake(&other_waker));
    }

    #[test]
    fn replies_and_sends_from_both_sides_go_through_the_driver() {
        let mock = Mock {
            rx: VecDeque::from([frame(0x0800, 146, 1)]),
            room: 3,
            ..Mock::default()
        };
        let shared: SharedDriver<Mock> = SharedDriver::new(mock);
        let (mut h, mut o) = shared.halves();
        let mut cx = Context::from_waker(Waker::noop());
        let (rx, tx) = h.receive(&mut cx).unwrap();
        rx.consume(|f| {
            assert_eq!(f[23], 146);
            tx.consume(5, |b| b.copy_from_slice(b"reply"));
        });
        o.transmit(&mut cx)
            .unwrap()
            .consume(3, |b| b.copy_from_slice(b"udp"));
        h.transmit(&mut cx)
            .unwrap()
            .consume(4, |b| b.copy_from_slice(b"homa"));
        assert!(o.transmit(&mut cx).is_none(), "the driver is full");
        assert_eq!(o.capabilities().max_transmission_unit, 1514);
        assert_eq!(
            h.hardware_address(),
            driver::HardwareAddress::Ethernet([2, 0, 0, 0, 0, 7])
        );
        assert_eq!(
            shared.into_inner().tx,
            [b"reply".to_vec(), b"udp".to_vec(), b"homa".to_vec()]
        );
    }

    #[test]
    fn a_side_waiting_for_room_is_woken_when_the_other_finds_some() {
        let shared: SharedDriver<Mock> = SharedDriver::new(Mock::default());
        let (mut h, mut o) = shared.halves();
        let (homa_count, homa_waker) = counter();
        assert!(h.transmit(&mut Context::from_waker(&homa_waker)).is_none());
        shared.driver.borrow_mut().room = 1;
        let mut cx = Context::from_waker(Waker::noop());
        assert!(o.transmit(&mut cx).is_some());
        assert_eq!(homa_count.0.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_token_whose_room_was_taken_discards_its_frame_and_counts_it() {
        let shared: SharedDriver<Mock> = SharedDriver::new(Mock {
            room: 1,
            ..Mock::default()
        });
        let (mut h, mut o) = shared.halves();
        let mut cx = Context::from_waker(Waker::noop());
        let late = h.transmit(&mut cx).unwrap();
        o.transmit(&mut cx)
            .unwrap()
            .consume(2, |b| b.copy_from_slice(b"ok"));
        late.consume(4, |b| b.copy_from_slice(b"lost"));
        assert_eq!(shared.tx_lost(), 1);
        assert_eq!(shared.into_inner().tx, [b"ok".to_vec()]);
    }

    #[test]
    fn a_lost_frame_of_the_largest_size_a_half_reports_is_written_whole() {
        // A jumbo-frame driver under the default 1518-byte queues: a token
        // whose room was taken hands its writer a scratch buffer of `MTU`
        // bytes, so no half may report more (a stack's writer indexes the
        // whole length it asked for, and would panic).
        let shared: SharedDriver<Mock> = SharedDriver::new(Mock {
            room: 1,
            mtu: 9014,
            ..Mock::default()
        });
        let (mut h, mut o) = shared.halves();
        let mtu = h.capabilities().max_transmission_unit;
        assert_eq!(mtu, 1518);
        assert_eq!(o.capabilities().max_transmission_unit, 1518);
        let mut cx = Context::from_waker(Waker::noop());
        let late = h.transmit(&mut cx).unwrap();
        o.transmit(&mut cx)
            .unwrap()
            .consume(2, |b| b.copy_from_slice(b"ok"));
        late.consume(mtu, |b| {
            assert_eq!(b.len(), mtu);
            b.fill(1);
        });
        assert_eq!(shared.tx_lost(), 1);
    }

    #[test]
    fn a_link_change_seen_by_one_side_wakes_the_other() {
        let shared: SharedDriver<Mock> = SharedDriver::new(Mock::default());
        let (mut h, mut o) = shared.halves();
        let (other_count, other_waker) = counter();
        let mut ocx = Context::from_waker(&other_waker);
        let mut hcx = Context::from_waker(Waker::noop());
        assert!(take(&mut o, &mut ocx).is_none(), "the other side sleeps");
        assert!(h.link_state(&mut hcx) == driver::LinkState::Up);
        assert_eq!(other_count.0.load(Ordering::SeqCst), 1);
        assert!(o.link_state(&mut ocx) == driver::LinkState::Up);
        assert!(take(&mut o, &mut ocx).is_none());
        assert!(h.link_state(&mut hcx) == driver::LinkState::Up);
        assert_eq!(other_count.0.load(Ordering::SeqCst), 1, "no change");
    }
}
