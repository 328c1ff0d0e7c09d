//! Any [`embassy_net_driver::Driver`] as a [`Device`].
//!
//! embassy's drivers take a task [`Context`] instead of a timestamp, so they
//! can register the waker when they have nothing to give. [`DriverAdapter`]
//! borrows the driver and the current task's context for the length of one
//! poll of the stack, exactly as embassy-net does internally:
//!
//! ```
//! # use core::task::{Context, Waker};
//! # use homa_phy::{embassy::DriverAdapter, Device, Instant};
//! fn poll_once<D: embassy_net_driver::Driver>(driver: &mut D, cx: &mut Context<'_>, now: Instant) {
//!     let mut device = DriverAdapter::new(driver, Some(cx));
//!     // ... endpoint.poll(now, &mut device) ...
//!     # let _ = device.receive(now);
//! }
//! ```
//!
//! When the driver has no frame (or no room), it has registered the waker,
//! so the task sleeps until there is something to do or the stack's next
//! timer. Without a context (`None`, e.g. while only reading capabilities)
//! the adapter hands out no tokens.

use core::task::Context;

use embassy_net_driver as driver;

use crate::{Checksum, ChecksumCapabilities, Device, DeviceCapabilities, Instant, PacketMeta};

/// Adapts an embassy [`Driver`](driver::Driver) to [`Device`] for one poll.
pub struct DriverAdapter<'d, 'c, T: driver::Driver> {
    cx: Option<&'d mut Context<'c>>,
    inner: &'d mut T,
}

impl<'d, 'c, T: driver::Driver> DriverAdapter<'d, 'c, T> {
    /// Borrows `inner`, and `cx`, the context of the task polling the stack.
    pub fn new(inner: &'d mut T, cx: Option<&'d mut Context<'c>>) -> Self {
        DriverAdapter { cx, inner }
    }

    /// The driver's hardware address; it also tells the medium
    /// (`Ethernet` for Ethernet frames, `Ip` for an IP-native device).
    pub fn hardware_address(&self) -> driver::HardwareAddress {
        self.inner.hardware_address()
    }

    /// The MAC address, when the driver speaks Ethernet.
    pub fn ethernet_address(&self) -> Option<[u8; 6]> {
        match self.inner.hardware_address() {
            driver::HardwareAddress::Ethernet(mac) => Some(mac),
            _ => None,
        }
    }

    /// The link state, registering the waker for changes; `None` without a
    /// context.
    pub fn link_state(&mut self) -> Option<driver::LinkState> {
        let cx = self.cx.as_deref_mut()?;
        Some(self.inner.link_state(cx))
    }

    /// The driver.
    pub fn get_ref(&self) -> &T {
        self.inner
    }

    /// The driver, mutably.
    pub fn get_mut(&mut self) -> &mut T {
        self.inner
    }

    /// Gives the driver borrow back.
    pub fn into_inner(self) -> &'d mut T {
        self.inner
    }
}

/// Receive token of a [`DriverAdapter`].
pub struct RxTokenAdapter<T>(T);

/// Transmit token of a [`DriverAdapter`].
pub struct TxTokenAdapter<T>(T);

impl<T: driver::RxToken> crate::RxToken for RxTokenAdapter<T> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        self.0.consume(|frame| f(frame))
    }
}

impl<T: driver::TxToken> crate::TxToken for TxTokenAdapter<T> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        self.0.consume(len, f)
    }

    /// embassy drivers carry no per-frame metadata; the priority is dropped.
    fn set_meta(&mut self, _meta: PacketMeta) {}
}

fn checksum(c: driver::Checksum) -> Checksum {
    match c {
        driver::Checksum::Both => Checksum::Both,
        driver::Checksum::Rx => Checksum::Rx,
        driver::Checksum::Tx => Checksum::Tx,
        driver::Checksum::None => Checksum::None,
    }
}

/// Maps embassy's capabilities to ours: MTU and burst size carry over as they
/// are (both count the Ethernet header and not the FCS), IPv4/ICMP checksum
/// offload 1:1. embassy's UDP and TCP offload have no counterpart (Homa is
/// neither) and are ignored; Homa's own checksum is never offloaded by an
/// embassy driver, so it stays `Both`. The link rate is unknown.
fn capabilities(caps: &driver::Capabilities) -> DeviceCapabilities {
    DeviceCapabilities {
        max_transmission_unit: caps.max_transmission_unit,
        max_burst_size: caps.max_burst_size,
        checksum: ChecksumCapabilities {
            ipv4: checksum(caps.checksum.ipv4),
            icmpv4: checksum(caps.checksum.icmpv4),
            icmpv6: checksum(caps.checksum.icmpv6),
            homa: Checksum::Both,
        },
        link_rate_mbps: None,
    }
}

impl<T: driver::Driver> Device for DriverAdapter<'_, '_, T> {
    type RxToken<'a>
        = RxTokenAdapter<T::RxToken<'a>>
    where
        Self: 'a;
    type TxToken<'a>
        = TxTokenAdapter<T::TxToken<'a>>
    where
        Self: 'a;

    /// Ignores `timestamp`: the driver works with the task context.
    fn receive(&mut self, _timestamp: Instant) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
        let cx = self.cx.as_deref_mut()?;
        let (rx, tx) = self.inner.receive(cx)?;
        Some((RxTokenAdapter(rx), TxTokenAdapter(tx)))
    }

    fn transmit(&mut self, _timestamp: Instant) -> Option<Self::TxToken<'_>> {
        let cx = self.cx.as_deref_mut()?;
        self.inner.transmit(cx).map(TxTokenAdapter)
    }

    fn capabilities(&self) -> DeviceCapabilities {
        capabilities(&self.inner.capabilities())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RxToken as _, TxToken as _};
    use core::task::Waker;
    use std::collections::VecDeque;
    use std::vec::Vec;

    /// A driver with a queue of received frames and room for `tx_room` sends.
    struct Mock {
        rx: VecDeque<Vec<u8>>,
        tx: Vec<Vec<u8>>,
        tx_room: usize,
        caps: driver::Capabilities,
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

        fn receive(&mut self, _cx: &mut Context) -> Option<(MockRx, MockTx<'_>)> {
            let frame = self.rx.pop_front()?;
            Some((MockRx(frame), MockTx(&mut self.tx)))
        }

        fn transmit(&mut self, _cx: &mut Context) -> Option<MockTx<'_>> {
            if self.tx.len() >= self.tx_room {
                return None;
            }
            Some(MockTx(&mut self.tx))
        }

        fn link_state(&mut self, _cx: &mut Context) -> driver::LinkState {
            driver::LinkState::Up
        }

        fn capabilities(&self) -> driver::Capabilities {
            self.caps.clone()
        }

        fn hardware_address(&self) -> driver::HardwareAddress {
            driver::HardwareAddress::Ethernet([2, 0, 0, 0, 0, 9])
        }
    }

    fn mock() -> Mock {
        Mock {
            rx: VecDeque::from([b"first".to_vec(), b"second".to_vec()]),
            tx: Vec::new(),
            tx_room: 2,
            caps: driver::Capabilities::default(),
        }
    }

    #[test]
    fn queued_frames_come_out_in_order_and_replies_go_back() {
        let mut driver = mock();
        let mut cx = Context::from_waker(Waker::noop());
        let mut dev = DriverAdapter::new(&mut driver, Some(&mut cx));
        let (rx, tx) = dev.receive(Instant::ZERO).unwrap();
        rx.consume(|frame| {
            assert_eq!(frame, b"first");
            tx.consume(5, |buf| buf.copy_from_slice(b"reply"));
        });
        let (rx, _) = dev.receive(Instant::ZERO).unwrap();
        assert_eq!(rx.consume(|f| f.to_vec()), b"second");
        assert!(dev.receive(Instant::ZERO).is_none());
        assert_eq!(driver.tx, [b"reply".to_vec()]);
    }

    #[test]
    fn transmit_returns_none_when_the_driver_has_no_room() {
        let mut driver = mock();
        driver.tx_room = 1;
        let mut cx = Context::from_waker(Waker::noop());
        let mut dev = DriverAdapter::new(&mut driver, Some(&mut cx));
        dev.transmit(Instant::ZERO)
            .unwrap()
            .consume(3, |b| b.copy_from_slice(b"abc"));
        assert!(dev.transmit(Instant::ZERO).is_none());
        assert_eq!(dev.get_ref().tx, [b"abc".to_vec()]);
    }

    #[test]
    fn without_a_context_no_tokens_but_capabilities_work() {
        let mut driver = mock();
        let mut dev = DriverAdapter::new(&mut driver, None);
        assert!(dev.receive(Instant::ZERO).is_none());
        assert!(dev.transmit(Instant::ZERO).is_none());
        assert!(dev.link_state().is_none());
        assert_eq!(dev.capabilities().max_transmission_unit, 0);
        assert_eq!(driver.rx.len(), 2, "no frame was taken");
    }

    #[test]
    fn capabilities_map_one_to_one_where_they_have_a_counterpart() {
        let mut driver = mock();
        driver.caps.max_transmission_unit = 1514;
        driver.caps.max_burst_size = Some(4);
        driver.caps.checksum.ipv4 = driver::Checksum::Tx;
        driver.caps.checksum.icmpv4 = driver::Checksum::None;
        driver.caps.checksum.icmpv6 = driver::Checksum::Rx;
        driver.caps.checksum.udp = driver::Checksum::None;
        driver.caps.checksum.tcp = driver::Checksum::None;
        let dev = DriverAdapter::new(&mut driver, None);
        let caps = dev.capabilities();
        assert_eq!(caps.max_transmission_unit, 1514);
        assert_eq!(caps.max_burst_size, Some(4));
        assert_eq!(caps.checksum.ipv4, Checksum::Tx);
        assert_eq!(caps.checksum.icmpv4, Checksum::None);
        assert_eq!(caps.checksum.icmpv6, Checksum::Rx);
        assert_eq!(
            caps.checksum.homa,
            Checksum::Both,
            "UDP/TCP offload is not Homa's"
        );
        assert_eq!(caps.link_rate_mbps, None);
    }

    #[test]
    fn link_state_and_address_pass_through() {
        let mut driver = mock();
        let mut cx = Context::from_waker(Waker::noop());
        let mut dev = DriverAdapter::new(&mut driver, Some(&mut cx));
        assert!(dev.link_state() == Some(driver::LinkState::Up));
        assert_eq!(dev.ethernet_address(), Some([2, 0, 0, 0, 0, 9]));
        assert_eq!(
            dev.hardware_address(),
            driver::HardwareAddress::Ethernet([2, 0, 0, 0, 0, 9])
        );
    }
}
