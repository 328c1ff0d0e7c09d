//! Wiring two in-memory devices back to back.
//!
//! Two endpoints on one host (tests, the loopback example, firmware demos)
//! each poll their own [`Loopback`](crate::loopback::Loopback): what an
//! endpoint transmits waits in its ring until [`forward`] moves it into the
//! other ring, so neither endpoint ever reads its own frames. Call `forward`
//! right after each poll.

use crate::{Device, Instant, RxToken, TxToken};

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
pub fn forward<A: Device + ?Sized, B: Device + ?Sized>(from: &mut A, to: &mut B, now: Instant) -> Moved {
    let mut moved = Moved::default();
    loop {
        // Check for room first so a frame is never taken and then lost.
        if to.transmit(now).is_none() {
            return moved;
        }
        let Some((rx, _)) = from.receive(now) else { return moved };
        let Some(mut tx) = to.transmit(now) else { return moved };
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
        assert_eq!(forward(&mut a, &mut b, Instant::ZERO), Moved { frames: 2, bytes: 6 });
        assert!(a.is_empty());
        for (i, prio) in [(1u8, 7u8), (2, 3)] {
            let (rx, _) = b.receive(Instant::ZERO).unwrap();
            assert_eq!(rx.meta().priority, prio);
            rx.consume(|f| assert_eq!(f, &[i; 3]));
        }
    }

    #[test]
    fn a_full_destination_keeps_frames_at_the_source() {
        let mut a: Loopback<4> = Loopback::new();
        let mut b: Loopback<1> = Loopback::new();
        for _ in 0..3 {
            a.transmit(Instant::ZERO).unwrap().consume(1, |buf| buf[0] = 9);
        }
        assert_eq!(forward(&mut a, &mut b, Instant::ZERO).frames, 1);
        assert_eq!(a.len(), 2);
    }
}
