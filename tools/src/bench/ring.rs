//! Paired in-memory rings: what one end transmits is what the other end
//! receives, with no copy in between. Both homa-stack and smoltcp run over
//! the same [`Port`] type, so the device costs the same for both.

use homa_phy as hp;
use smoltcp::phy as sp;

/// The largest frame: Ethernet with a 1,500-byte IP MTU.
pub const FRAME: usize = 1514;

/// A ring of up to `capacity` frames of at most [`FRAME`] bytes, in FIFO order.
pub struct Ring {
    slots: Vec<[u8; FRAME]>,
    lens: Vec<usize>,
    head: usize,
    len: usize,
    /// Frames written into the ring.
    pub frames: u64,
    /// Bytes written into the ring.
    pub bytes: u64,
    /// Frames lost because a reply token found the ring full.
    pub dropped: u64,
}

impl Ring {
    /// An empty ring of `capacity` frames.
    pub fn new(capacity: usize) -> Ring {
        Ring {
            slots: vec![[0; FRAME]; capacity],
            lens: vec![0; capacity],
            head: 0,
            len: 0,
            frames: 0,
            bytes: 0,
            dropped: 0,
        }
    }

    /// Whether no frame waits.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn is_full(&self) -> bool {
        self.len == self.slots.len()
    }

    /// Takes the oldest frame off the ring; its slot stays untouched while
    /// the returned borrow lives.
    fn pop(&mut self) -> Option<&[u8]> {
        if self.len == 0 {
            return None;
        }
        let i = self.head;
        self.head = (self.head + 1) % self.slots.len();
        self.len -= 1;
        Some(&self.slots[i][..self.lens[i]])
    }

    /// The slot for a new frame of `len` bytes, if one is free.
    fn push(&mut self, len: usize) -> Option<&mut [u8]> {
        assert!(len <= FRAME, "frame of {len} bytes exceeds {FRAME}");
        if self.is_full() {
            return None;
        }
        let i = (self.head + self.len) % self.slots.len();
        self.len += 1;
        self.lens[i] = len;
        self.frames += 1;
        self.bytes += len as u64;
        Some(&mut self.slots[i][..len])
    }
}

/// The two directions between end A and end B.
pub struct Pair {
    a_to_b: Ring,
    b_to_a: Ring,
}

impl Pair {
    /// Two empty rings of `capacity` frames each.
    pub fn new(capacity: usize) -> Pair {
        Pair {
            a_to_b: Ring::new(capacity),
            b_to_a: Ring::new(capacity),
        }
    }

    /// End A's device: receives what B sent, sends to B.
    pub fn a(&mut self) -> Port<'_> {
        Port {
            rx: &mut self.b_to_a,
            tx: &mut self.a_to_b,
        }
    }

    /// End B's device.
    pub fn b(&mut self) -> Port<'_> {
        Port {
            rx: &mut self.a_to_b,
            tx: &mut self.b_to_a,
        }
    }

    /// Bytes written in both directions so far.
    pub fn bytes(&self) -> u64 {
        self.a_to_b.bytes + self.b_to_a.bytes
    }

    /// Frames written in both directions so far.
    pub fn frames(&self) -> u64 {
        self.a_to_b.frames + self.b_to_a.frames
    }

    /// Frames lost to a full ring in both directions.
    pub fn dropped(&self) -> u64 {
        self.a_to_b.dropped + self.b_to_a.dropped
    }

    /// Whether a frame waits in either direction.
    pub fn pending(&self) -> bool {
        !self.a_to_b.is_empty() || !self.b_to_a.is_empty()
    }
}

/// One end's device over a [`Pair`].
pub struct Port<'a> {
    rx: &'a mut Ring,
    tx: &'a mut Ring,
}

/// A received frame, read in place in its ring slot.
pub struct Rx<'a>(&'a [u8]);

/// Permission to write one frame into the transmit ring.
pub struct Tx<'a>(&'a mut Ring);

impl Tx<'_> {
    fn write<R>(self, len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
        let ring = self.0;
        match ring.push(len) {
            Some(slot) => f(slot),
            None => {
                // A reply token found the ring full: the frame is lost.
                ring.dropped += 1;
                let mut scratch = [0u8; FRAME];
                f(&mut scratch[..len])
            }
        }
    }
}

impl<'a> Port<'a> {
    fn take(&mut self) -> Option<(Rx<'_>, Tx<'_>)> {
        let frame = self.rx.pop()?;
        Some((Rx(frame), Tx(self.tx)))
    }

    fn give(&mut self) -> Option<Tx<'_>> {
        if self.tx.is_full() {
            None
        } else {
            Some(Tx(self.tx))
        }
    }
}

/// The device and token impls of one stack's device traits: homa-phy's and
/// smoltcp's have the same shape, and a port serves both alike.
macro_rules! port_device {
    ($device:ident, $instant:ty, $capabilities:expr) => {
        impl $device::Device for Port<'_> {
            type RxToken<'b>
                = Rx<'b>
            where
                Self: 'b;
            type TxToken<'b>
                = Tx<'b>
            where
                Self: 'b;

            fn receive(&mut self, _: $instant) -> Option<(Rx<'_>, Tx<'_>)> {
                self.take()
            }

            fn transmit(&mut self, _: $instant) -> Option<Tx<'_>> {
                self.give()
            }

            fn capabilities(&self) -> $device::DeviceCapabilities {
                $capabilities
            }
        }

        impl $device::RxToken for Rx<'_> {
            fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
                f(self.0)
            }
        }

        impl $device::TxToken for Tx<'_> {
            fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
                self.write(len, f)
            }
        }
    };
}

port_device!(hp, hp::Instant, {
    // Every checksum computed and verified by the stack, as smoltcp's
    // default capabilities below.
    let mut caps = hp::DeviceCapabilities::default();
    caps.max_transmission_unit = FRAME;
    caps.checksum = hp::ChecksumCapabilities::default();
    caps
});

port_device!(sp, smoltcp::time::Instant, {
    let mut caps = sp::DeviceCapabilities::default();
    caps.medium = sp::Medium::Ethernet;
    caps.max_transmission_unit = FRAME;
    caps.checksum = sp::ChecksumCapabilities::default();
    caps
});

/// A [`Port`] that tells homa-stack it does every checksum, so the stack
/// fills and verifies none: homa-stack's cost with checksums on the device.
/// A type of its own, so that the plain port's code, and smoltcp's over
/// it, stay as they are.
pub struct Offloaded<'a>(pub Port<'a>);

impl hp::Device for Offloaded<'_> {
    type RxToken<'b>
        = Rx<'b>
    where
        Self: 'b;
    type TxToken<'b>
        = Tx<'b>
    where
        Self: 'b;

    fn receive(&mut self, _: hp::Instant) -> Option<(Rx<'_>, Tx<'_>)> {
        self.0.take()
    }

    fn transmit(&mut self, _: hp::Instant) -> Option<Tx<'_>> {
        self.0.give()
    }

    fn capabilities(&self) -> hp::DeviceCapabilities {
        let mut caps = hp::Device::capabilities(&self.0);
        caps.checksum = hp::ChecksumCapabilities::ignored();
        caps
    }
}

/// Virtual time shared by both ends: each step costs the wire time of the
/// bytes it moved on a 100 Gbit/s link plus 100 ns, so timers behave as on
/// a fast network whatever the CPU speed. CPU time is measured separately.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    /// Nanoseconds since the start.
    pub ns: u64,
}

/// The link rate the clock models, in Mbit/s.
pub const LINK_MBPS: u64 = 100_000;

impl Clock {
    /// Time 1 ms (so that no timer is at zero).
    pub fn new() -> Clock {
        Clock { ns: 1_000_000 }
    }

    /// Moves on after a step that moved `bytes`.
    pub fn advance(&mut self, bytes: u64) {
        self.ns += 100 + bytes * 8 * 1000 / LINK_MBPS;
    }

    /// As homa-stack's instant.
    pub fn homa(&self) -> hp::Instant {
        hp::Instant::from_nanos(self.ns)
    }

    /// As smoltcp's instant (microseconds).
    pub fn smol(&self) -> smoltcp::time::Instant {
        smoltcp::time::Instant::from_micros((self.ns / 1000) as i64)
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use homa_phy::{Device, RxToken, TxToken};

    #[test]
    fn what_a_sends_b_receives_in_order_until_the_ring_is_full() {
        let mut pair = Pair::new(2);
        let now = hp::Instant::ZERO;
        for byte in [1u8, 2] {
            let mut a = pair.a();
            let tx = a.transmit(now).expect("room");
            tx.consume(60, |buf| buf.fill(byte));
        }
        assert!(pair.a().transmit(now).is_none(), "a full ring refuses");
        assert_eq!((pair.frames(), pair.bytes()), (2, 120));
        assert!(pair.a().receive(now).is_none(), "nothing came back to a");
        for byte in [1u8, 2] {
            let mut b = pair.b();
            let (rx, _) = b.receive(now).expect("a frame");
            assert_eq!(rx.consume(|f| f.to_vec()), vec![byte; 60]);
        }
        assert!(!pair.pending());
        assert_eq!(pair.dropped(), 0);
    }
}
