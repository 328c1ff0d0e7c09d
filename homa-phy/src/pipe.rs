//! Wiring two in-memory devices back to back.
//!
//! Two endpoints on one host (tests, the loopback example, firmware demos)
//! each poll a [`Split`] device: frames arrive in one ring and leave through
//! another, so an endpoint never reads back what it sent (not even the reply
//! it wrote while handling a received frame). [`forward`] moves what one end
//! sent into the other end's receive ring; call it after each poll.

use crate::{ChecksumCapabilities, Device, DeviceCapabilities, Instant, RxToken, TxToken};

/// A device made of two: frames are received from `rx` and sent into `tx`.
///
/// With two [`Loopback`](crate::loopback::Loopback)s it is one end of an
/// in-memory wire: `forward(a.tx_mut(), b.rx_mut(), now)` delivers what `a`
/// sent to `b`. Capabilities are those of `tx`, but for the receive part of
/// each checksum, which is `rx`'s: what arrives was checked (or not) by `rx`.
#[derive(Debug, Default)]
pub struct Split<R, T> {
    rx: R,
    tx: T,
}

impl<R: Device, T: Device> Split<R, T> {
    /// A device receiving from `rx` and sending into `tx`.
    pub fn new(rx: R, tx: T) -> Self {
        Split { rx, tx }
    }
    /// The receive side.
    pub fn rx_mut(&mut self) -> &mut R {
        &mut self.rx
    }
    /// The transmit side.
    pub fn tx_mut(&mut self) -> &mut T {
        &mut self.tx
    }
    /// The receive side.
    pub fn rx_ref(&self) -> &R {
        &self.rx
    }
    /// The transmit side.
    pub fn tx_ref(&self) -> &T {
        &self.tx
    }
}

impl<R: Device, T: Device> Device for Split<R, T> {
    type RxToken<'a>
        = R::RxToken<'a>
    where
        Self: 'a;
    type TxToken<'a>
        = T::TxToken<'a>
    where
        Self: 'a;

    fn receive(&mut self, timestamp: Instant) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
        // Take the transmit slot first: a frame is never taken without a way
        // to answer it.
        let tx = self.tx.transmit(timestamp)?;
        let (rx, _) = self.rx.receive(timestamp)?;
        Some((rx, tx))
    }

    fn transmit(&mut self, timestamp: Instant) -> Option<Self::TxToken<'_>> {
        self.tx.transmit(timestamp)
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = self.tx.capabilities();
        caps.checksum =
            ChecksumCapabilities::join(&self.rx.capabilities().checksum, &caps.checksum);
        caps
    }
}

/// What [`forward`] moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Moved {
    /// Frames moved.
    pub frames: usize,
    /// Their total length in bytes.
    pub bytes: usize,
}

/// Moves every frame waiting on `from`'s receive side to `to`'s transmit
/// side, keeping each frame's priority. Stops early when `to` is full (the
/// remaining frames stay in `from`).
pub fn forward<A: Device + ?Sized, B: Device + ?Sized>(
    from: &mut A,
    to: &mut B,
    now: Instant,
) -> Moved {
    let mut moved = Moved::default();
    loop {
        // Check for room first so a frame is never taken and then lost.
        if to.transmit(now).is_none() {
            return moved;
        }
        let Some((rx, _)) = from.receive(now) else {
            return moved;
        };
        let Some(mut tx) = to.transmit(now) else {
            return moved;
        };
        tx.set_meta(rx.meta());
        let len = rx.consume(|frame| {
            tx.consume(frame.len(), |buf| buf.copy_from_slice(frame));
            frame.len()
        });
        moved.frames += 1;
        moved.bytes += len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loopback::Loopback;
    use crate::PacketMeta;

    #[test]
    fn frames_move_in_order_with_their_priority() {
        let mut a: Loopback<4> = Loopback::new();
        let mut b: Loopback<4> = Loopback::new();
        for (i, prio) in [(1u8, 7u8), (2, 3)] {
            let mut tx = a.transmit(Instant::ZERO).unwrap();
            tx.set_meta(PacketMeta::with_priority(prio));
            tx.consume(3, |buf| buf.fill(i));
        }
        assert_eq!(
            forward(&mut a, &mut b, Instant::ZERO),
            Moved {
                frames: 2,
                bytes: 6
            }
        );
        assert!(a.is_empty());
        for (i, prio) in [(1u8, 7u8), (2, 3)] {
            let (rx, _) = b.receive(Instant::ZERO).unwrap();
            assert_eq!(rx.meta().priority, prio);
            rx.consume(|f| assert_eq!(f, &[i; 3]));
        }
    }

    #[test]
    fn split_ends_never_read_their_own_frames() {
        let mut a: Split<Loopback<4>, Loopback<4>> = Split::new(Loopback::new(), Loopback::new());
        let mut b: Split<Loopback<4>, Loopback<4>> = Split::new(Loopback::new(), Loopback::new());
        a.transmit(Instant::ZERO)
            .unwrap()
            .consume(2, |buf| buf.copy_from_slice(b"hi"));
        assert!(
            a.receive(Instant::ZERO).is_none(),
            "a does not see its own frame"
        );
        forward(a.tx_mut(), b.rx_mut(), Instant::ZERO);
        let (rx, tx) = b.receive(Instant::ZERO).unwrap();
        rx.consume(|f| assert_eq!(f, b"hi"));
        tx.consume(3, |buf| buf.copy_from_slice(b"ack"));
        assert!(
            b.receive(Instant::ZERO).is_none(),
            "b does not see its own reply"
        );
        forward(b.tx_mut(), a.rx_mut(), Instant::ZERO);
        a.receive(Instant::ZERO)
            .unwrap()
            .0
            .consume(|f| assert_eq!(f, b"ack"));
    }

    #[test]
    fn a_split_takes_received_checksums_from_rx_and_sent_ones_from_tx() {
        use crate::Checksum;
        // The receive ring checks every checksum, the transmit ring fills
        // none: the stack verifies nothing and fills everything.
        let mut rx: Loopback<4> = Loopback::new();
        rx.set_checksum_capabilities(ChecksumCapabilities::ignored());
        let mut tx: Loopback<4, 1000> = Loopback::new();
        tx.set_checksum_capabilities(ChecksumCapabilities::default());
        let mut s = Split::new(rx, tx);
        let caps = s.capabilities();
        assert_eq!(caps.max_transmission_unit, 1000, "the MTU is tx's");
        let c = caps.checksum;
        for part in [c.ipv4, c.icmpv4, c.icmpv6, c.homa] {
            assert_eq!(part, Checksum::Tx);
        }
        // And the other way round, one protocol at a time.
        let one = ChecksumCapabilities {
            homa: Checksum::None,
            ..ChecksumCapabilities::default()
        };
        s.rx_mut()
            .set_checksum_capabilities(ChecksumCapabilities::default());
        s.tx_mut().set_checksum_capabilities(one);
        let c = s.capabilities().checksum;
        assert_eq!((c.ipv4, c.homa), (Checksum::Both, Checksum::Rx));
    }

    #[test]
    fn a_full_destination_keeps_frames_at_the_source() {
        let mut a: Loopback<4> = Loopback::new();
        let mut b: Loopback<1> = Loopback::new();
        for _ in 0..3 {
            a.transmit(Instant::ZERO)
                .unwrap()
                .consume(1, |buf| buf[0] = 9);
        }
        assert_eq!(forward(&mut a, &mut b, Instant::ZERO).frames, 1);
        assert_eq!(a.len(), 2);
    }
}
