//! A middleware device that shows every frame to a callback.
//!
//! [`Tracer`] calls its writer for every received frame before the stack sees
//! it, and for every transmitted frame after the stack has filled it. It does
//! not decode anything (this crate knows frames, not Homa); the writer gets
//! the bytes, the direction and the metadata, and [`TracerPacket`]'s
//! `Display` prints the length and the first bytes in hex.
//!
//! ```
//! use homa_phy::{Device, Instant, Loopback, Tracer, TracerPacket, TxToken};
//!
//! fn print(at: Instant, packet: TracerPacket<'_>) {
//!     println!("{at} {packet}");
//! }
//! let mut dev: Tracer<Loopback<4>> = Tracer::new(Loopback::new(), print);
//! dev.transmit(Instant::ZERO).unwrap().consume(4, |b| b.copy_from_slice(b"\x01\x02\x03\x04"));
//! // prints "0.000000s TX 4 bytes prio 0: 01020304"
//! ```

use core::cell::RefCell;
use core::fmt;

use crate::{Device, DeviceCapabilities, Instant, PacketMeta};

/// Which way a traced frame went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TracerDirection {
    /// Received: from the device towards the stack.
    Rx,
    /// Transmitted: from the stack towards the device.
    Tx,
}

/// One frame shown to a [`Tracer`]'s writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TracerPacket<'a> {
    /// The whole link-layer frame.
    pub buffer: &'a [u8],
    /// Which way it went.
    pub direction: TracerDirection,
    /// Its metadata: for RX what the device reported, for TX what the stack set.
    pub meta: PacketMeta,
}

/// How many leading bytes `Display` shows.
const HEX_PREFIX: usize = 32;

impl fmt::Display for TracerPacket<'_> {
    /// `RX 60 bytes prio 0: 0200...` with at most 32 bytes in hex, then `...`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dir = match self.direction {
            TracerDirection::Rx => "RX",
            TracerDirection::Tx => "TX",
        };
        write!(
            f,
            "{dir} {} bytes prio {}:",
            self.buffer.len(),
            self.meta.priority
        )?;
        if !self.buffer.is_empty() {
            f.write_str(" ")?;
        }
        for byte in self.buffer.iter().take(HEX_PREFIX) {
            write!(f, "{byte:02x}")?;
        }
        if self.buffer.len() > HEX_PREFIX {
            f.write_str("...")?;
        }
        Ok(())
    }
}

/// A [`Device`] that shows every frame to `writer`.
///
/// `F` is any `FnMut(Instant, TracerPacket)`; the default names the plain
/// function pointer type, as in `Tracer<D>`. The timestamp is the one given
/// to `receive`/`transmit`.
pub struct Tracer<D: Device, F = fn(Instant, TracerPacket<'_>)>
where
    F: FnMut(Instant, TracerPacket<'_>),
{
    inner: D,
    // Both tokens of a `receive` need the writer; they never call it at the
    // same time (RX before the stack runs, TX after), so a RefCell suffices,
    // and a failed borrow only skips a trace line.
    writer: RefCell<F>,
}

impl<D: Device, F: FnMut(Instant, TracerPacket<'_>)> Tracer<D, F> {
    /// Wraps `inner`, calling `writer` for every frame.
    pub fn new(inner: D, writer: F) -> Self {
        Tracer {
            inner,
            writer: RefCell::new(writer),
        }
    }

    /// The wrapped device.
    pub fn get_ref(&self) -> &D {
        &self.inner
    }

    /// The wrapped device, mutably.
    pub fn get_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    /// The writer, mutably (e.g. to read what a closure collected).
    pub fn writer_mut(&mut self) -> &mut F {
        self.writer.get_mut()
    }

    /// Unwraps the device.
    pub fn into_inner(self) -> D {
        self.inner
    }

    /// Unwraps the device and the writer.
    pub fn into_parts(self) -> (D, F) {
        (self.inner, self.writer.into_inner())
    }
}

fn trace<F: FnMut(Instant, TracerPacket<'_>)>(
    writer: &RefCell<F>,
    timestamp: Instant,
    packet: TracerPacket<'_>,
) {
    if let Ok(mut writer) = writer.try_borrow_mut() {
        (*writer)(timestamp, packet);
    }
}

/// Receive token of a [`Tracer`].
pub struct TracerRxToken<'a, T, F> {
    token: T,
    writer: &'a RefCell<F>,
    timestamp: Instant,
}

/// Transmit token of a [`Tracer`].
pub struct TracerTxToken<'a, T, F> {
    token: T,
    writer: &'a RefCell<F>,
    timestamp: Instant,
    meta: PacketMeta,
}

impl<T: crate::RxToken, F: FnMut(Instant, TracerPacket<'_>)> crate::RxToken
    for TracerRxToken<'_, T, F>
{
    fn consume<R, G: FnOnce(&[u8]) -> R>(self, f: G) -> R {
        let meta = self.token.meta();
        let (writer, timestamp) = (self.writer, self.timestamp);
        self.token.consume(|buffer| {
            let packet = TracerPacket {
                buffer,
                direction: TracerDirection::Rx,
                meta,
            };
            trace(writer, timestamp, packet);
            f(buffer)
        })
    }

    fn meta(&self) -> PacketMeta {
        self.token.meta()
    }
}

impl<T: crate::TxToken, F: FnMut(Instant, TracerPacket<'_>)> crate::TxToken
    for TracerTxToken<'_, T, F>
{
    fn consume<R, G: FnOnce(&mut [u8]) -> R>(self, len: usize, f: G) -> R {
        let (writer, timestamp, meta) = (self.writer, self.timestamp, self.meta);
        self.token.consume(len, |buffer| {
            let r = f(buffer);
            let packet = TracerPacket {
                buffer,
                direction: TracerDirection::Tx,
                meta,
            };
            trace(writer, timestamp, packet);
            r
        })
    }

    fn set_meta(&mut self, meta: PacketMeta) {
        self.meta = meta;
        self.token.set_meta(meta);
    }
}

impl<D: Device, F: FnMut(Instant, TracerPacket<'_>)> Device for Tracer<D, F> {
    type RxToken<'a>
        = TracerRxToken<'a, D::RxToken<'a>, F>
    where
        Self: 'a;
    type TxToken<'a>
        = TracerTxToken<'a, D::TxToken<'a>, F>
    where
        Self: 'a;

    fn receive(&mut self, timestamp: Instant) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
        let (rx, tx) = self.inner.receive(timestamp)?;
        Some((
            TracerRxToken {
                token: rx,
                writer: &self.writer,
                timestamp,
            },
            TracerTxToken {
                token: tx,
                writer: &self.writer,
                timestamp,
                meta: PacketMeta::default(),
            },
        ))
    }

    fn transmit(&mut self, timestamp: Instant) -> Option<Self::TxToken<'_>> {
        let tx = self.inner.transmit(timestamp)?;
        Some(TracerTxToken {
            token: tx,
            writer: &self.writer,
            timestamp,
            meta: PacketMeta::default(),
        })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        self.inner.capabilities()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Loopback, RxToken as _, TxToken as _};
    use std::string::{String, ToString};
    use std::vec::Vec;

    type Log = Vec<(Instant, TracerDirection, Vec<u8>, u8)>;

    fn logger(log: &mut Log) -> impl FnMut(Instant, TracerPacket<'_>) + '_ {
        |at, p| log.push((at, p.direction, p.buffer.to_vec(), p.meta.priority))
    }

    #[test]
    fn every_frame_is_traced_with_direction_time_and_meta() {
        let mut log = Log::new();
        let mut dev = Tracer::new(Loopback::<4, 64>::new(), logger(&mut log));
        let t1 = Instant::from_micros(1);
        let t2 = Instant::from_micros(2);
        let mut tx = dev.transmit(t1).unwrap();
        tx.set_meta(PacketMeta::with_priority(3));
        tx.consume(3, |b| b.copy_from_slice(b"abc"));
        let (rx, reply) = dev.receive(t2).unwrap();
        assert_eq!(rx.meta().priority, 3);
        rx.consume(|frame| {
            // The reply is traced after the received frame it answers.
            reply.consume(2, |b| b.copy_from_slice(b"ok"));
            assert_eq!(frame, b"abc");
        });
        drop(dev);
        assert_eq!(
            log,
            [
                (t1, TracerDirection::Tx, b"abc".to_vec(), 3),
                (t2, TracerDirection::Rx, b"abc".to_vec(), 3),
                (t2, TracerDirection::Tx, b"ok".to_vec(), 0),
            ]
        );
    }

    #[test]
    fn rx_is_traced_before_the_stack_sees_the_frame_and_tx_after() {
        let traced = core::cell::Cell::new(0);
        let mut dev = Tracer::new(Loopback::<2, 16>::new(), |_, _| {
            traced.set(traced.get() + 1)
        });
        let before_fill = dev.transmit(Instant::ZERO).unwrap().consume(1, |b| {
            b[0] = 0;
            traced.get()
        });
        assert_eq!(before_fill, 0, "TX is traced once the stack filled it");
        assert_eq!(traced.get(), 1);
        let (rx, _) = dev.receive(Instant::ZERO).unwrap();
        let when_stack_sees_it = rx.consume(|_| traced.get());
        assert_eq!(when_stack_sees_it, 2, "RX was traced before the stack ran");
    }

    #[test]
    fn tx_is_traced_with_what_the_stack_wrote() {
        let mut log = Log::new();
        let mut dev = Tracer::new(Loopback::<1, 16>::new(), logger(&mut log));
        dev.transmit(Instant::ZERO)
            .unwrap()
            .consume(4, |b| b.copy_from_slice(b"full"));
        drop(dev);
        assert_eq!(log[0].2, b"full");
    }

    #[test]
    fn display_shows_length_priority_and_a_hex_prefix() {
        let p = TracerPacket {
            buffer: &[0x02, 0x00, 0xff],
            direction: TracerDirection::Rx,
            meta: PacketMeta::with_priority(7),
        };
        assert_eq!(p.to_string(), "RX 3 bytes prio 7: 0200ff");
        let long = [0xabu8; 40];
        let p = TracerPacket {
            buffer: &long,
            direction: TracerDirection::Tx,
            meta: PacketMeta::default(),
        };
        let want: String = "TX 40 bytes prio 0: ".to_string() + &"ab".repeat(32) + "...";
        assert_eq!(p.to_string(), want);
    }

    #[test]
    fn works_with_a_plain_function_pointer() {
        fn nothing(_: Instant, _: TracerPacket<'_>) {}
        let mut dev: Tracer<Loopback<1, 16>> = Tracer::new(Loopback::new(), nothing);
        assert!(dev.transmit(Instant::ZERO).is_some());
        assert_eq!(dev.capabilities(), dev.get_ref().capabilities());
    }
}
