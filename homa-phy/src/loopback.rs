//! A device that receives what it transmits, over a fixed ring of frames.
//!
//! [`Loopback`] keeps up to `FRAMES` frames of at most `MTU` bytes each, in
//! FIFO order, with the [`PacketMeta`] they were sent with. It never allocates:
//! by default the ring lives inside the struct, so a `static` or a stack
//! variable holds it. Any storage that can lend a `[FrameSlot<MTU>; FRAMES]`
//! works too (see [`Loopback::with_storage`]), which is how a big ring ends up
//! on the heap without first being built on the stack ([`Loopback::boxed`]
//! under `std`).
//!
//! ```
//! use homa_phy::{Device, Instant, Loopback, RxToken, TxToken};
//!
//! let mut lo: Loopback<4> = Loopback::new();
//! let now = Instant::ZERO;
//! lo.transmit(now).unwrap().consume(3, |buf| buf.copy_from_slice(b"abc"));
//! let (rx, _tx) = lo.receive(now).unwrap();
//! assert_eq!(rx.consume(|frame| frame.to_vec()), b"abc");
//! assert!(lo.is_empty());
//! ```

use core::borrow::{Borrow, BorrowMut};

use crate::{ChecksumCapabilities, Device, DeviceCapabilities, Instant, PacketMeta};

/// One frame of a [`Loopback`] ring: up to `MTU` bytes and their metadata.
///
/// Its contents are private; it is public only so callers can provide the
/// ring's storage themselves (see [`Loopback::with_storage`]).
#[derive(Clone)]
pub struct FrameSlot<const MTU: usize> {
    len: usize,
    meta: PacketMeta,
    data: [u8; MTU],
}

impl<const MTU: usize> FrameSlot<MTU> {
    /// An empty slot, usable in `const` array initialisers.
    pub const EMPTY: FrameSlot<MTU> = FrameSlot {
        len: 0,
        meta: PacketMeta::with_priority(0),
        data: [0; MTU],
    };

    fn frame(&self) -> &[u8] {
        // `len <= MTU` is kept by `TxToken::consume`, so this cannot fail.
        self.data.get(..self.len).unwrap_or(&[])
    }
}

impl<const MTU: usize> Default for FrameSlot<MTU> {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl<const MTU: usize> core::fmt::Debug for FrameSlot<MTU> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("FrameSlot")
            .field("len", &self.len)
            .field("meta", &self.meta)
            .finish_non_exhaustive()
    }
}

/// A device whose transmitted frames come back as received frames, in order.
///
/// - `FRAMES`: how many frames the ring holds. When it is full,
///   [`transmit`](Device::transmit) returns `None` (backpressure, like a NIC
///   whose TX ring is full).
/// - `MTU`: the largest frame, reported as `max_transmission_unit`.
/// - `S`: where the ring lives; by default inside the struct.
///
/// Checksums are reported as [`ChecksumCapabilities::ignored`]: no bit can
/// flip in memory, so the stack need not compute or check them.
///
/// # Size
///
/// The default storage is `FRAMES * (MTU + ~40)` bytes inside the struct.
/// `Box::new(Loopback::<1024>::new())` builds those 1.5 MB on the stack first
/// (in debug builds, possibly twice) and can overflow a test thread's 2 MB
/// stack; use [`Loopback::boxed`] (or [`Loopback::with_storage`] over storage
/// you built on the heap) for big rings.
///
/// # Replies
///
/// [`receive`](Device::receive) takes the oldest frame off the ring and hands
/// out its slot to the RX token. The TX token returned with it writes into
/// another free slot; when the ring was full, there is none, and a frame
/// written through that reply token is discarded and counted in
/// [`dropped`](Loopback::dropped) (the token API has no way to refuse after it
/// was handed out).
pub struct Loopback<const FRAMES: usize, const MTU: usize = 1514, S = [FrameSlot<MTU>; FRAMES]> {
    slots: S,
    /// Index of the oldest queued frame.
    head: usize,
    /// Number of queued frames.
    len: usize,
    dropped: u64,
    checksum: ChecksumCapabilities,
}

impl<const FRAMES: usize, const MTU: usize> Loopback<FRAMES, MTU> {
    /// An empty loopback with its ring inside the struct.
    pub const fn new() -> Self {
        Loopback {
            slots: [FrameSlot::EMPTY; FRAMES],
            head: 0,
            len: 0,
            dropped: 0,
            checksum: ChecksumCapabilities::ignored(),
        }
    }
}

impl<const FRAMES: usize, const MTU: usize> Default for Loopback<FRAMES, MTU> {
    fn default() -> Self {
        Self::new()
    }
}

/// A [`Loopback`] whose ring is on the heap.
#[cfg(feature = "std")]
pub type BoxedLoopback<const FRAMES: usize, const MTU: usize = 1514> =
    Loopback<FRAMES, MTU, std::boxed::Box<[FrameSlot<MTU>; FRAMES]>>;

#[cfg(feature = "std")]
impl<const FRAMES: usize, const MTU: usize> BoxedLoopback<FRAMES, MTU> {
    /// An empty loopback whose ring is allocated on the heap directly, slot by
    /// slot, so even a ring of many megabytes never passes through the stack.
    pub fn boxed() -> Self {
        let slots: std::boxed::Box<[FrameSlot<MTU>]> =
            std::vec![FrameSlot::EMPTY; FRAMES].into_boxed_slice();
        let slots = match slots.try_into() {
            Ok(array) => array,
            // The vector was built with exactly FRAMES elements.
            Err(_) => unreachable!("vec![_; FRAMES] has FRAMES elements"),
        };
        Loopback::with_storage(slots)
    }
}

impl<const FRAMES: usize, const MTU: usize, S> Loopback<FRAMES, MTU, S>
where
    S: BorrowMut<[FrameSlot<MTU>; FRAMES]>,
{
    /// An empty loopback over caller-provided storage: a `&'static mut` array
    /// on bare metal, a `Box` on a host. Whatever the slots held is ignored.
    pub fn with_storage(storage: S) -> Self {
        Loopback {
            slots: storage,
            head: 0,
            len: 0,
            dropped: 0,
            checksum: ChecksumCapabilities::ignored(),
        }
    }

    /// Sets the checksum capabilities reported. By default every checksum is
    /// left to the "device" (nothing in memory corrupts a frame); report
    /// `ChecksumCapabilities::default()` to have the stack fill them, e.g. so
    /// captures of the traffic show valid checksums.
    pub fn set_checksum_capabilities(&mut self, checksum: ChecksumCapabilities) {
        self.checksum = checksum;
    }

    /// Gives the storage back.
    pub fn into_storage(self) -> S {
        self.slots
    }

    /// Number of frames waiting to be received.
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether no frame is waiting.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many frames the ring holds.
    pub const fn capacity(&self) -> usize {
        FRAMES
    }

    /// Frames discarded because a reply token found the ring full.
    pub const fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Forgets every queued frame (in place, without touching the slots).
    pub fn clear(&mut self) {
        self.head = 0;
        self.len = 0;
    }

    /// Takes the oldest frame off the ring and lends it out mutably (for
    /// consumers whose receive tokens hand out `&mut [u8]`, as embassy's do).
    #[cfg_attr(not(feature = "embassy"), allow(dead_code))]
    pub(crate) fn pop_frame_mut(&mut self) -> Option<&mut [u8]> {
        if self.len == 0 {
            return None;
        }
        let index = self.head;
        self.head = (self.head + 1) % FRAMES;
        self.len -= 1;
        let slot = &mut self.slots.borrow_mut()[index];
        let len = slot.len;
        slot.data.get_mut(..len)
    }

    /// Index of the slot the next transmitted frame goes to, if one is free.
    fn tail(&self) -> Option<usize> {
        if self.len < FRAMES {
            Some((self.head + self.len) % FRAMES)
        } else {
            None
        }
    }
}

/// Receive token of a [`Loopback`]: the oldest frame.
pub struct LoopbackRxToken<'a, const MTU: usize> {
    slot: &'a FrameSlot<MTU>,
}

/// Transmit token of a [`Loopback`]: a free slot of its ring.
pub struct LoopbackTxToken<'a, const MTU: usize> {
    /// `None` for a reply token of a full ring: the frame is discarded.
    slot: Option<&'a mut FrameSlot<MTU>>,
    len: &'a mut usize,
    dropped: &'a mut u64,
    meta: PacketMeta,
}

impl<const MTU: usize> crate::RxToken for LoopbackRxToken<'_, MTU> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(self.slot.frame())
    }

    fn meta(&self) -> PacketMeta {
        self.slot.meta
    }
}

impl<const MTU: usize> crate::TxToken for LoopbackTxToken<'_, MTU> {
    /// # Panics
    ///
    /// If `len` exceeds `MTU`, the `max_transmission_unit` the loopback
    /// reports: that is a bug in the caller, not something the network can
    /// cause.
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(mut self, len: usize, f: F) -> R {
        assert!(
            len <= MTU,
            "Loopback: frame of {len} bytes exceeds the MTU of {MTU}"
        );
        // One call of `f` for both cases, so its body is inlined once.
        let mut junk;
        let buf = match self.slot.as_deref_mut() {
            Some(slot) => &mut slot.data[..len],
            None => {
                // The ring is full and every slot is lent out; give `f` a
                // throwaway buffer on the stack (MTU bytes, cleared only on
                // this rare path) rather than growing every loopback by a
                // spare slot.
                junk = [0u8; MTU];
                &mut junk[..len]
            }
        };
        let r = f(buf);
        match self.slot {
            Some(slot) => {
                slot.len = len;
                slot.meta = self.meta;
                *self.len += 1;
            }
            None => *self.dropped += 1,
        }
        r
    }

    fn set_meta(&mut self, meta: PacketMeta) {
        self.meta = meta;
    }
}

impl<const FRAMES: usize, const MTU: usize, S> Device for Loopback<FRAMES, MTU, S>
where
    S: BorrowMut<[FrameSlot<MTU>; FRAMES]>,
{
    type RxToken<'a>
        = LoopbackRxToken<'a, MTU>
    where
        Self: 'a;
    type TxToken<'a>
        = LoopbackTxToken<'a, MTU>
    where
        Self: 'a;

    fn receive(&mut self, _timestamp: Instant) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
        if self.len == 0 {
            return None;
        }
        let rx_index = self.head;
        self.head = (self.head + 1) % FRAMES;
        self.len -= 1;
        // After the pop the free slots are everything outside the queue,
        // including `rx_index`, which the RX token still reads: the reply may
        // use any free slot but that one.
        let tx_index = self.tail().filter(|&i| i != rx_index);
        let slots: &mut [FrameSlot<MTU>; FRAMES] = self.slots.borrow_mut();
        let (rx_slot, tx_slot) = match tx_index {
            None => (&slots[rx_index], None),
            Some(tx) if tx < rx_index => {
                let (low, high) = slots.split_at_mut(rx_index);
                (&high[0], Some(&mut low[tx]))
            }
            Some(tx) => {
                let (low, high) = slots.split_at_mut(tx);
                (&low[rx_index], Some(&mut high[0]))
            }
        };
        Some((
            LoopbackRxToken { slot: rx_slot },
            LoopbackTxToken {
                slot: tx_slot,
                len: &mut self.len,
                dropped: &mut self.dropped,
                meta: PacketMeta::default(),
            },
        ))
    }

    fn transmit(&mut self, _timestamp: Instant) -> Option<Self::TxToken<'_>> {
        let tail = self.tail()?;
        let slots: &mut [FrameSlot<MTU>; FRAMES] = self.slots.borrow_mut();
        Some(LoopbackTxToken {
            slot: Some(&mut slots[tail]),
            len: &mut self.len,
            dropped: &mut self.dropped,
            meta: PacketMeta::default(),
        })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        DeviceCapabilities {
            max_transmission_unit: MTU,
            checksum: self.checksum,
            ..DeviceCapabilities::default()
        }
    }
}

impl<const FRAMES: usize, const MTU: usize, S> core::fmt::Debug for Loopback<FRAMES, MTU, S>
where
    S: Borrow<[FrameSlot<MTU>; FRAMES]>,
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Loopback")
            .field("len", &self.len)
            .field("capacity", &FRAMES)
            .field("mtu", &MTU)
            .field("dropped", &self.dropped)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RxToken as _, TxToken as _};

    const T0: Instant = Instant::ZERO;

    fn send<D: Device>(dev: &mut D, bytes: &[u8], meta: PacketMeta) -> bool {
        match dev.transmit(T0) {
            Some(mut tx) => {
                tx.set_meta(meta);
                tx.consume(bytes.len(), |buf| buf.copy_from_slice(bytes));
                true
            }
            None => false,
        }
    }

    fn recv<D: Device>(dev: &mut D) -> Option<(std::vec::Vec<u8>, PacketMeta)> {
        let (rx, _tx) = dev.receive(T0)?;
        let meta = rx.meta();
        Some((rx.consume(|f| f.to_vec()), meta))
    }

    #[test]
    fn frames_come_back_in_fifo_order_with_their_meta() {
        let mut lo: Loopback<4, 64> = Loopback::new();
        for i in 0..3u8 {
            assert!(send(&mut lo, &[i; 10], PacketMeta::with_priority(i + 2)));
        }
        assert_eq!(lo.len(), 3);
        for i in 0..3u8 {
            let (frame, meta) = recv(&mut lo).unwrap();
            assert_eq!(frame, [i; 10]);
            assert_eq!(meta, PacketMeta::with_priority(i + 2));
        }
        assert!(lo.is_empty());
        assert!(recv(&mut lo).is_none());
    }

    #[test]
    fn transmit_returns_none_when_full_and_wraps_after_draining() {
        let mut lo: Loopback<3, 16> = Loopback::default();
        assert_eq!(lo.capacity(), 3);
        for round in 0..5u8 {
            for i in 0..3u8 {
                assert!(send(&mut lo, &[round, i], PacketMeta::default()));
            }
            assert!(lo.transmit(T0).is_none(), "a full ring takes no frame");
            for i in 0..3u8 {
                assert_eq!(recv(&mut lo).unwrap().0, [round, i]);
            }
        }
    }

    #[test]
    fn unconsumed_tx_token_queues_nothing() {
        let mut lo: Loopback<2, 16> = Loopback::new();
        let _unused = lo.transmit(T0).unwrap();
        assert!(lo.is_empty());
    }

    #[test]
    fn reply_token_uses_another_slot_and_is_queued_after_the_rest() {
        let mut lo: Loopback<3, 16> = Loopback::new();
        send(&mut lo, b"a", PacketMeta::default());
        send(&mut lo, b"b", PacketMeta::default());
        let (rx, mut tx) = lo.receive(T0).unwrap();
        tx.set_meta(PacketMeta::with_priority(5));
        // Reply while the received frame is still borrowed, as the stack does.
        let got = rx.consume(|frame| {
            tx.consume(5, |buf| buf.copy_from_slice(b"reply"));
            frame.to_vec()
        });
        assert_eq!(got, b"a");
        assert_eq!(recv(&mut lo).unwrap().0, b"b");
        let (reply, meta) = recv(&mut lo).unwrap();
        assert_eq!(reply, b"reply");
        assert_eq!(meta.priority, 5);
        assert_eq!(lo.dropped(), 0);
    }

    #[test]
    fn reply_token_of_a_full_ring_discards_and_counts() {
        let mut lo: Loopback<2, 16> = Loopback::new();
        send(&mut lo, b"a", PacketMeta::default());
        send(&mut lo, b"b", PacketMeta::default());
        let (rx, tx) = lo.receive(T0).unwrap();
        let got = rx.consume(|frame| {
            tx.consume(1, |buf| buf[0] = b'x');
            frame.to_vec()
        });
        assert_eq!(got, b"a");
        assert_eq!(lo.dropped(), 1);
        assert_eq!(recv(&mut lo).unwrap().0, b"b");
        assert!(lo.is_empty());
    }

    #[test]
    fn capabilities_report_mtu_and_ignored_checksums() {
        let lo: Loopback<1, 9000> = Loopback::new();
        let caps = lo.capabilities();
        assert_eq!(caps.max_transmission_unit, 9000);
        assert_eq!(caps.checksum, ChecksumCapabilities::ignored());
        let lo: Loopback<1> = Loopback::new();
        assert_eq!(lo.capabilities().max_transmission_unit, 1514);
    }

    #[test]
    #[should_panic(expected = "exceeds the MTU")]
    fn oversized_transmit_panics_with_a_message() {
        let mut lo: Loopback<1, 16> = Loopback::new();
        lo.transmit(T0).unwrap().consume(17, |_| ());
    }

    #[test]
    #[cfg(feature = "std")]
    fn a_1024_frame_ring_is_built_on_the_heap() {
        // 1024 x 1514 bytes: far beyond a test thread's 2 MB stack if built
        // there (more so in debug builds, which copy it).
        let mut lo = BoxedLoopback::<1024>::boxed();
        for i in 0..1024u32 {
            assert!(send(&mut lo, &i.to_be_bytes(), PacketMeta::default()));
        }
        assert!(lo.transmit(T0).is_none());
        assert_eq!(recv(&mut lo).unwrap().0, 0u32.to_be_bytes());
        assert_eq!(lo.len(), 1023);
    }

    #[test]
    fn works_over_borrowed_static_style_storage() {
        let mut storage = [FrameSlot::<32>::EMPTY; 2];
        let mut lo: Loopback<2, 32, _> = Loopback::with_storage(&mut storage);
        send(&mut lo, b"xyz", PacketMeta::default());
        assert_eq!(recv(&mut lo).unwrap().0, b"xyz");
    }
}
