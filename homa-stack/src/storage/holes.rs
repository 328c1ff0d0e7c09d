//! Reassembly tracking of one incoming message for any loss pattern, in
//! O(1) memory outside the message (RFC 815 style hole descriptors).
//!
//! # Why
//!
//! A receiver must know which bytes of a message have arrived so that it
//! copies each byte once and asks the sender for exactly what is missing
//! (protocol.md 4.3 and 4.7: the timer sends one RESEND per gap, plus one
//! for `[recv_end, granted)`). A fixed list of gaps kept beside the message
//! (storage/reassembly.rs) overflows under ordinary loss: a 1 MB message
//! at 5 % loss has about 35 gaps, and every packet that would open one more
//! is dropped and sent again. A list sized for the worst case would be large
//! for every RPC slot.
//!
//! The bytes that have not arrived yet are free space in the message's own
//! buffer, and every missing range ("hole") is at least 8 bytes long, so
//! each hole carries its own descriptor in its first 8 bytes. [`Holes`]
//! keeps only the list's ends and a hint, 32 bytes whatever the loss
//! pattern; the descriptors live in the buffer through a [`HoleStore`].
//!
//! # Descriptor layout
//!
//! The hole `[s, e)` stores at `s` two little-endian `u32`s:
//!
//! ```text
//! s+0..s+4  e      (end of the hole, exclusive)
//! s+4..s+8  next   (start of the next hole above, or 0xFFFF_FFFF for none)
//! ```
//!
//! Holes form a singly linked list in ascending order; `head` and `tail` are
//! kept in [`Holes`]. A payload arriving later overwrites its descriptor,
//! which is why [`Holes::add`] rewrites (moves) any descriptor in the way
//! before it returns [`AddOutcome::New`], and writes descriptors only outside
//! the packet's bytes.
//!
//! # Rules
//!
//! The rules of `homa_add_packet` (protocol.md 4.3), as in
//! storage/reassembly.rs:
//! - `offset == recv_end`: append.
//! - `offset > recv_end`: the hole `[recv_end, offset)` opens, then append.
//! - inside one hole: shrink it from the front or the back, remove it when
//!   filled exactly, or split it in two.
//! - anything else is a duplicate: lying in received data, or only partly
//!   overlapping a hole. Retransmissions keep the original packet
//!   boundaries, as Linux senders do.
//! - `len == 0`, `offset + len` overflowing or reaching past the message:
//!   out of range.
//!
//! And two limits of this representation:
//! - A packet that would leave a hole shorter than 8 bytes (no room for its
//!   descriptor) is dropped as [`AddOutcome::TinyHole`]. Senders cut
//!   messages into packets of hundreds of bytes; only a short packet at a
//!   boundary (the unscheduled limit) can make such a hole, and the packet
//!   that was dropped is accepted once the retransmissions of the same range
//!   arrive, for one of them fills the hole from an end that leaves no tiny
//!   remainder.
//! - At most `max_holes` holes ([`DEFAULT_MAX_HOLES`]); a packet needing one
//!   more is dropped as [`AddOutcome::TooManyGaps`]. This bounds the work of
//!   one packet, not the memory.
//!
//! # Cost
//!
//! `add` is O(1) (at most two descriptor loads and two stores) for an
//! in-order packet (no store access at all), a packet beyond `recv_end`,
//! a duplicate above the last hole or below the first, and a fill of the
//! hole after the last one filled: retransmissions arrive in the order the
//! RESENDs asked for them, ascending, and the hint (the last hole visited
//! and its predecessor) makes each one O(1). Anything else walks the list
//! from the hint (when the packet lies above it) or the head, past at most
//! [`MAX_WALK`] holes: a packet whose hole lies farther on is dropped as
//! [`AddOutcome::TooFar`], so no packet, however often replayed, buys a
//! walk over thousands of holes.
//!
//! # Failures
//!
//! Nothing panics or allocates, for any argument or store contents. A store
//! that fails, or holds a descriptor that cannot be right (not ascending,
//! beyond `recv_end`, shorter than 8 bytes), makes `add` return
//! [`AddOutcome::StoreFailed`] and leave the tracker as it was: every change
//! becomes visible through one final store (earlier stores only write free
//! space), so a failure before it leaves the list intact. One exception: a
//! packet shorter than a descriptor (8 bytes) that fills a hole's front
//! moves the hole's descriptor onto bytes of the old one, so a store that
//! fails between the two writes can damage the list; later calls then find
//! an impossible descriptor and answer `StoreFailed` (or drop the packet),
//! never panic. Over the endpoint's pool a store fails only for a foreign
//! buffer, which it never passes.

use core::fmt;
use core::iter::FusedIterator;
use core::ops::Range;

use super::pool::{MessageBuf, Pool};

/// Bytes of one hole descriptor, and so the shortest hole there can be.
pub const DESCRIPTOR_LEN: u32 = 8;

/// Hole capacity of [`Holes::new`]. A 1,000,000-byte message losing every
/// second 1,424-byte packet has 351 holes.
pub const DEFAULT_MAX_HOLES: u16 = 4096;

/// Holes one [`Holes::add`] may walk past, from where its search starts
/// (the hint, or the first hole), to find the packet's hole; a packet
/// farther on is dropped as [`AddOutcome::TooFar`]. Without a bound a
/// sender that cut its message into thousands of holes could replay one
/// packet that walks them all, every time: 4,096 descriptor loads, on a
/// host about 15 times the work of a full 1,424-byte DATA packet; bounded,
/// about that of one. Honest retransmissions come in ascending order and
/// the hint finds each at once, and a dropped one is asked for again.
pub const MAX_WALK: u16 = 128;

/// "No hole": never a hole start, as a hole is at least 8 bytes and ends
/// at most at `u32::MAX`.
const NONE: u32 = u32::MAX;

/// Where the hole descriptors live: the message's buffer, 8 bytes at a time.
///
/// Both methods are fallible so that a buffer behind a bounds-checked API
/// (the endpoint's [`Pool`], through [`PoolStore`]) maps its error to
/// [`AddOutcome::StoreFailed`].
pub trait HoleStore {
    /// The 8 bytes at `at`, or `None` if they cannot be read.
    fn load(&mut self, at: u32) -> Option<[u8; 8]>;
    /// Writes 8 bytes at `at`; `false` if they cannot be written.
    fn store(&mut self, at: u32, bytes: [u8; 8]) -> bool;
}

impl HoleStore for [u8] {
    fn load(&mut self, at: u32) -> Option<[u8; 8]> {
        let at = usize::try_from(at).ok()?;
        self.get(at..at.checked_add(8)?)?.try_into().ok()
    }

    fn store(&mut self, at: u32, bytes: [u8; 8]) -> bool {
        let Some(at) = usize::try_from(at).ok() else {
            return false;
        };
        let Some(end) = at.checked_add(8) else {
            return false;
        };
        match self.get_mut(at..end) {
            Some(slot) => {
                slot.copy_from_slice(&bytes);
                true
            }
            None => false,
        }
    }
}

impl<S: HoleStore + ?Sized> HoleStore for &mut S {
    fn load(&mut self, at: u32) -> Option<[u8; 8]> {
        (**self).load(at)
    }

    fn store(&mut self, at: u32, bytes: [u8; 8]) -> bool {
        (**self).store(at, bytes)
    }
}

/// A [`HoleStore`] over one message's pages in a [`Pool`].
pub struct PoolStore<'s, 'p> {
    pool: &'s mut Pool<'p>,
    buf: &'s mut MessageBuf,
}

impl<'s, 'p> PoolStore<'s, 'p> {
    /// Descriptors of `buf`'s holes, stored in its pages of `pool`.
    pub fn new(pool: &'s mut Pool<'p>, buf: &'s mut MessageBuf) -> Self {
        PoolStore { pool, buf }
    }
}

impl HoleStore for PoolStore<'_, '_> {
    fn load(&mut self, at: u32) -> Option<[u8; 8]> {
        let mut out = [0; 8];
        let at = usize::try_from(at).ok()?;
        self.pool.read_at(self.buf, at, &mut out).ok()?;
        Some(out)
    }

    fn store(&mut self, at: u32, bytes: [u8; 8]) -> bool {
        usize::try_from(at).is_ok_and(|at| self.pool.write_at(self.buf, at, &bytes).is_ok())
    }
}

/// What [`Holes::add`] did with a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[must_use]
pub enum AddOutcome {
    /// Accepted: copy the payload into `[offset, offset + len)` now.
    New,
    /// Dropped: the packet lies in received data or only partly overlaps a
    /// hole.
    Duplicate,
    /// Dropped: `len == 0`, `offset + len` overflows, or the packet reaches
    /// past the message length.
    OutOfRange,
    /// Dropped: accepting it needs one more hole than `max_holes`.
    TooManyGaps,
    /// Dropped: accepting it would leave a hole shorter than
    /// [`DESCRIPTOR_LEN`] bytes.
    TinyHole,
    /// Dropped: finding its place would walk past more than [`MAX_WALK`]
    /// holes; the tracker is unchanged.
    TooFar,
    /// Dropped: the store failed or holds an impossible descriptor; the
    /// tracker is unchanged. The message cannot be trusted to complete.
    StoreFailed,
}

/// The store failed, or holds an impossible descriptor, while listing the
/// missing ranges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct StoreError;

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("hole descriptor store failed or is inconsistent")
    }
}

impl core::error::Error for StoreError {}

#[derive(Clone, Copy)]
struct Desc {
    end: u32,
    next: u32,
}

impl Desc {
    fn encode(self) -> [u8; 8] {
        let [e0, e1, e2, e3] = self.end.to_le_bytes();
        let [n0, n1, n2, n3] = self.next.to_le_bytes();
        [e0, e1, e2, e3, n0, n1, n2, n3]
    }

    /// The descriptor of the hole at `at`, if it can be one below
    /// `recv_end`: at least 8 bytes, followed by received bytes, and the
    /// next hole (if any) above those.
    fn decode(bytes: [u8; 8], at: u32, recv_end: u32) -> Option<Desc> {
        let [e0, e1, e2, e3, n0, n1, n2, n3] = bytes;
        let end = u32::from_le_bytes([e0, e1, e2, e3]);
        let next = u32::from_le_bytes([n0, n1, n2, n3]);
        let long_enough = end.checked_sub(at).is_some_and(|len| len >= DESCRIPTOR_LEN);
        let next_ok = next == NONE || (next > end && next < recv_end);
        (long_enough && end < recv_end && next_ok).then_some(Desc { end, next })
    }
}

/// Tracks which bytes of one incoming message have arrived, for any loss
/// pattern, keeping the missing ranges' descriptors in the message buffer.
/// See the [module docs](self).
///
/// ```
/// use homa_stack::storage::holes::{AddOutcome, Holes};
///
/// let mut message = [0u8; 4000];
/// let mut holes = Holes::new(4000);
/// // Packets of 1000 bytes; the second is lost.
/// for offset in [0, 2000, 3000] {
///     assert_eq!(holes.add(offset, 1000, &mut message[..]), AddOutcome::New);
///     // Only now is the payload copied in.
///     message[offset as usize..][..1000].fill(7);
/// }
/// let missing: Vec<_> = holes.missing(4000, &mut message[..]).collect();
/// assert_eq!(missing, [Ok(1000..2000)]);
/// // Its retransmission completes the message.
/// assert_eq!(holes.add(1000, 1000, &mut message[..]), AddOutcome::New);
/// message[1000..2000].fill(7);
/// assert!(holes.is_complete() && message.iter().all(|&b| b == 7));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Holes {
    message_length: u32,
    recv_end: u32,
    bytes_received: u32,
    /// First hole's start, or `NONE`.
    head: u32,
    /// Last hole's start, or `NONE`.
    tail: u32,
    /// A hole start (or `NONE`): the hole at or after the last one
    /// visited, where the next ascending retransmission lands.
    hint: u32,
    /// The hole before `hint`, or `NONE` if `hint` is the head.
    hint_prev: u32,
    hole_count: u16,
    max_holes: u16,
}

impl Holes {
    /// A tracker for a message of `message_length` bytes with nothing
    /// received, allowing [`DEFAULT_MAX_HOLES`] holes. A zero-length message
    /// is complete at once and rejects every packet.
    pub const fn new(message_length: u32) -> Self {
        Self::with_max_holes(message_length, DEFAULT_MAX_HOLES)
    }

    /// A tracker allowing at most `max_holes` holes at a time.
    pub const fn with_max_holes(message_length: u32, max_holes: u16) -> Self {
        Holes {
            message_length,
            recv_end: 0,
            bytes_received: 0,
            head: NONE,
            tail: NONE,
            hint: NONE,
            hint_prev: NONE,
            hole_count: 0,
            max_holes,
        }
    }

    /// Records a packet carrying bytes `[offset, offset + len)`; see
    /// [`AddOutcome`] and the module docs for the rules. On
    /// [`AddOutcome::New`] the caller must write the payload into the same
    /// buffer `store` reaches, before the next call; this call wrote nothing
    /// inside `[offset, offset + len)`.
    pub fn add<S: HoleStore + ?Sized>(
        &mut self,
        offset: u32,
        len: u32,
        store: &mut S,
    ) -> AddOutcome {
        let end = match offset.checked_add(len) {
            Some(end) if len > 0 && end <= self.message_length => end,
            _ => return AddOutcome::OutOfRange,
        };
        let done = if offset >= self.recv_end {
            self.append(offset, end, store)
        } else {
            self.fill(offset, end, store)
        };
        match done {
            Ok(()) => {
                // Accepted bytes are disjoint and within the message, so
                // this never exceeds message_length; saturate regardless.
                self.bytes_received = self.bytes_received.saturating_add(len);
                AddOutcome::New
            }
            Err(outcome) => outcome,
        }
    }

    /// `[offset, end)` at or beyond `recv_end`.
    fn append<S: HoleStore + ?Sized>(
        &mut self,
        offset: u32,
        end: u32,
        store: &mut S,
    ) -> Result<(), AddOutcome> {
        if offset > self.recv_end {
            if offset - self.recv_end < DESCRIPTOR_LEN {
                return Err(AddOutcome::TinyHole);
            }
            if self.hole_count >= self.max_holes {
                return Err(AddOutcome::TooManyGaps);
            }
            let start = self.recv_end;
            // Free space below the packet; visible only once linked.
            self.put(store, start, offset, NONE)?;
            if self.tail == NONE {
                self.head = start;
            } else {
                let tail = self.get(store, self.tail)?;
                self.put(store, self.tail, tail.end, start)?;
            }
            if self.hint == NONE {
                // Everything visited lies below the new hole.
                self.hint = start;
                self.hint_prev = self.tail;
            }
            self.tail = start;
            self.hole_count += 1;
        }
        self.recv_end = end;
        Ok(())
    }

    /// `[offset, end)` starting below `recv_end`.
    fn fill<S: HoleStore + ?Sized>(
        &mut self,
        offset: u32,
        end: u32,
        store: &mut S,
    ) -> Result<(), AddOutcome> {
        if self.head == NONE || offset < self.head {
            return Err(AddOutcome::Duplicate);
        }
        if offset >= self.tail {
            // Often a duplicate of recent in-order data: answer it in O(1).
            let tail = self.get(store, self.tail)?;
            if offset >= tail.end {
                return Err(AddOutcome::Duplicate);
            }
        }
        let (mut prev, mut at) = if self.hint != NONE && self.hint <= offset {
            (self.hint_prev, self.hint)
        } else {
            (NONE, self.head)
        };
        // Descriptors ascend strictly, so the walk ends; the count only
        // guards against a store whose chain is longer than it should be.
        let mut budget = self.hole_count;
        let mut walk = MAX_WALK;
        let hole = loop {
            let hole = self.get(store, at)?;
            if offset < hole.end {
                break hole;
            }
            if hole.next == NONE || offset < hole.next {
                // Between two holes (or above the last): received data.
                return Err(AddOutcome::Duplicate);
            }
            budget = budget.checked_sub(1).ok_or(AddOutcome::StoreFailed)?;
            walk = walk.checked_sub(1).ok_or(AddOutcome::TooFar)?;
            prev = at;
            at = hole.next;
        };
        if end > hole.end {
            return Err(AddOutcome::Duplicate);
        }
        let (left, right) = (offset - at, hole.end - end);
        if (1..DESCRIPTOR_LEN).contains(&left) || (1..DESCRIPTOR_LEN).contains(&right) {
            return Err(AddOutcome::TinyHole);
        }
        match (left == 0, right == 0) {
            (true, true) => {
                self.link(store, prev, hole.next)?;
                if self.tail == at {
                    self.tail = prev;
                }
                self.hole_count -= 1;
                self.set_hint(hole.next, prev);
            }
            (true, false) => {
                // The hole now starts at `end`: its descriptor moves there.
                self.put(store, end, hole.end, hole.next)?;
                self.link(store, prev, end)?;
                if self.tail == at {
                    self.tail = end;
                }
                self.set_hint(end, prev);
            }
            (false, true) => {
                self.put(store, at, offset, hole.next)?;
                self.set_hint(at, prev);
            }
            (false, false) => {
                if self.hole_count >= self.max_holes {
                    return Err(AddOutcome::TooManyGaps);
                }
                self.put(store, end, hole.end, hole.next)?;
                self.put(store, at, offset, end)?;
                if self.tail == at {
                    self.tail = end;
                }
                self.hole_count += 1;
                self.set_hint(end, at);
            }
        }
        Ok(())
    }

    /// Points `prev`'s descriptor (or `head` if `prev` is `NONE`) at `next`.
    fn link<S: HoleStore + ?Sized>(
        &mut self,
        store: &mut S,
        prev: u32,
        next: u32,
    ) -> Result<(), AddOutcome> {
        if prev == NONE {
            self.head = next;
        } else {
            let desc = self.get(store, prev)?;
            self.put(store, prev, desc.end, next)?;
        }
        Ok(())
    }

    fn set_hint(&mut self, hint: u32, prev: u32) {
        self.hint = hint;
        self.hint_prev = if hint == NONE { NONE } else { prev };
    }

    fn get<S: HoleStore + ?Sized>(&self, store: &mut S, at: u32) -> Result<Desc, AddOutcome> {
        store
            .load(at)
            .and_then(|bytes| Desc::decode(bytes, at, self.recv_end))
            .ok_or(AddOutcome::StoreFailed)
    }

    #[cfg_attr(target_os = "none", inline(never))]
    fn put<S: HoleStore + ?Sized>(
        &self,
        store: &mut S,
        at: u32,
        end: u32,
        next: u32,
    ) -> Result<(), AddOutcome> {
        if store.store(at, Desc { end, next }.encode()) {
            Ok(())
        } else {
            Err(AddOutcome::StoreFailed)
        }
    }

    /// What to ask the sender for, ascending: every hole, then
    /// `[recv_end, granted)` (with `granted` capped at the message length)
    /// if that is nonempty. The timer sends one RESEND per range
    /// (protocol.md 4.7). A store failure yields one `Err` and ends the
    /// iteration.
    pub fn missing<'s, S: HoleStore + ?Sized>(
        &self,
        granted: u32,
        store: &'s mut S,
    ) -> Missing<'s, S> {
        let tail = self.recv_end..granted.min(self.message_length);
        Missing {
            store,
            at: self.head,
            left: self.hole_count,
            recv_end: self.recv_end,
            tail: (!tail.is_empty()).then_some(tail),
            done: false,
        }
    }

    /// The message length given to [`new`](Self::new).
    pub const fn message_length(&self) -> u32 {
        self.message_length
    }

    /// Highest byte received + 1 (0 before any packet).
    pub const fn recv_end(&self) -> u32 {
        self.recv_end
    }

    /// Bytes accepted so far.
    pub const fn bytes_received(&self) -> u32 {
        self.bytes_received
    }

    /// Bytes still missing: `message_length - bytes_received`.
    pub const fn bytes_remaining(&self) -> u32 {
        self.message_length.saturating_sub(self.bytes_received)
    }

    /// Every byte has arrived (then no descriptor is left in the buffer).
    pub const fn is_complete(&self) -> bool {
        self.bytes_received >= self.message_length
    }

    /// Number of holes below `recv_end`.
    pub const fn hole_count(&self) -> usize {
        self.hole_count as usize
    }

    /// The hole capacity given at construction.
    pub const fn max_holes(&self) -> usize {
        self.max_holes as usize
    }
}

/// Iterator of [`Holes::missing`].
pub struct Missing<'s, S: ?Sized> {
    store: &'s mut S,
    at: u32,
    left: u16,
    recv_end: u32,
    tail: Option<Range<u32>>,
    done: bool,
}

impl<S: HoleStore + ?Sized> Iterator for Missing<'_, S> {
    type Item = Result<Range<u32>, StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.at == NONE {
            if self.left != 0 {
                // The chain ended before hole_count holes.
                self.done = true;
                return Some(Err(StoreError));
            }
            self.done = self.tail.is_none();
            return self.tail.take().map(Ok);
        }
        let desc = match self.left.checked_sub(1) {
            Some(left) => {
                self.left = left;
                self.store
                    .load(self.at)
                    .and_then(|bytes| Desc::decode(bytes, self.at, self.recv_end))
            }
            None => None,
        };
        let Some(desc) = desc else {
            self.done = true;
            return Some(Err(StoreError));
        };
        let range = self.at..desc.end;
        self.at = desc.next;
        Some(Ok(range))
    }
}

impl<S: HoleStore + ?Sized> FusedIterator for Missing<'_, S> {}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::vec;
    use std::vec::Vec;

    /// A store over a byte vector that counts accesses, records where it
    /// wrote, and can be told to fail.
    struct TestStore {
        bytes: Vec<u8>,
        loads: usize,
        stores: Vec<u32>,
        /// Operations (loads + stores) left before every one fails.
        fail_after: Option<usize>,
    }

    impl TestStore {
        fn new(len: u32) -> TestStore {
            TestStore {
                bytes: vec![0xAA; len as usize],
                loads: 0,
                stores: Vec::new(),
                fail_after: None,
            }
        }

        fn tick(&mut self) -> bool {
            match &mut self.fail_after {
                Some(0) => false,
                Some(n) => {
                    *n -= 1;
                    true
                }
                None => true,
            }
        }
    }

    impl HoleStore for TestStore {
        fn load(&mut self, at: u32) -> Option<[u8; 8]> {
            self.loads += 1;
            if !self.tick() {
                return None;
            }
            self.bytes[..].load(at)
        }

        fn store(&mut self, at: u32, bytes: [u8; 8]) -> bool {
            if !self.tick() {
                return false;
            }
            self.stores.push(at);
            self.bytes[..].store(at, bytes)
        }
    }

    fn holes(h: &Holes, store: &mut TestStore) -> Vec<(u32, u32)> {
        h.missing(0, store)
            .map(|r| r.map(|r| (r.start, r.end)))
            .collect::<Result<_, _>>()
            .expect("store is consistent")
    }

    fn state(h: &Holes, store: &mut TestStore) -> (u32, u32, Vec<(u32, u32)>) {
        (h.recv_end(), h.bytes_received(), holes(h, store))
    }

    /// 0..1000 received except the hole 300..600.
    fn with_hole() -> (Holes, TestStore) {
        let mut s = TestStore::new(2000);
        let mut h = Holes::new(2000);
        assert_eq!(h.add(0, 300, &mut s), AddOutcome::New);
        assert_eq!(h.add(600, 400, &mut s), AddOutcome::New);
        assert_eq!(holes(&h, &mut s), [(300, 600)]);
        (h, s)
    }

    /// A 1 MB message with `DEFAULT_MAX_HOLES` holes: one-byte packets
    /// every 10 bytes (each hole 9 bytes), as only a hostile sender cuts.
    fn riddled() -> (Holes, TestStore) {
        let mut s = TestStore::new(1_000_000);
        let mut h = Holes::new(1_000_000);
        for k in 0..=u32::from(DEFAULT_MAX_HOLES) {
            assert_eq!(h.add(k * 10, 1, &mut s), AddOutcome::New);
        }
        assert_eq!(h.hole_count(), usize::from(DEFAULT_MAX_HOLES));
        (h, s)
    }

    #[test]
    fn one_packet_walks_a_bounded_number_of_holes() {
        // A duplicate of received data between the last two holes, replayed
        // at will, walked every hole from the first (4,096 descriptor loads
        // per packet): the walk stops after MAX_WALK and drops the packet.
        let (mut h, mut s) = riddled();
        let before = h;
        let most = usize::from(MAX_WALK) + 2;
        for (offset, len) in [(4095 * 10, 1), (4094 * 10 + 5, 3), (4000 * 10 + 1, 9)] {
            s.loads = 0;
            let got = h.add(offset, len, &mut s);
            assert!(
                s.loads <= most,
                "add({offset}, {len}) made {} loads",
                s.loads
            );
            assert_eq!(got, AddOutcome::TooFar, "add({offset}, {len})");
            assert_eq!(h, before);
        }
        // Within the bound the walk answers as ever: a duplicate, a tiny
        // hole, a fill; and the hint then reaches the next hole at once.
        let near = MAX_WALK as u32 * 10;
        assert_eq!(h.add(near, 1, &mut s), AddOutcome::Duplicate);
        assert_eq!(h.add(near - 7, 2, &mut s), AddOutcome::TinyHole);
        assert_eq!(h.add(near - 9, 9, &mut s), AddOutcome::New);
        s.loads = 0;
        assert_eq!(h.add(near + 1, 9, &mut s), AddOutcome::New);
        assert!(s.loads <= 2, "{} loads", s.loads);
    }

    #[test]
    fn tracker_is_32_bytes() {
        assert_eq!(core::mem::size_of::<Holes>(), 32);
    }

    #[test]
    fn descriptor_is_little_endian_end_then_next() {
        let mut s = TestStore::new(100);
        let mut h = Holes::new(100);
        assert_eq!(h.add(40, 10, &mut s), AddOutcome::New);
        assert_eq!(s.bytes[0..8], [40, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF]);
        assert_eq!(h.add(60, 10, &mut s), AddOutcome::New);
        assert_eq!(s.bytes[0..8], [40, 0, 0, 0, 50, 0, 0, 0]);
        assert_eq!(s.bytes[50..58], [60, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF]);
    }

    #[test]
    fn in_order_packets_append_without_touching_the_store() {
        let mut s = TestStore::new(3000);
        let mut h = Holes::new(3000);
        assert_eq!(h.bytes_remaining(), 3000);
        assert!(!h.is_complete());
        assert_eq!(h.add(0, 1400, &mut s), AddOutcome::New);
        assert_eq!(h.add(1400, 1400, &mut s), AddOutcome::New);
        assert_eq!(h.bytes_remaining(), 200);
        assert_eq!(h.add(2800, 200, &mut s), AddOutcome::New);
        assert!(h.is_complete());
        assert_eq!(h.bytes_remaining(), 0);
        assert_eq!(h.message_length(), 3000);
        assert_eq!((s.loads, s.stores.len()), (0, 0));
        assert_eq!(state(&h, &mut s), (3000, 3000, vec![]));
    }

    #[test]
    fn packet_beyond_recv_end_opens_a_hole() {
        let mut s = TestStore::new(5000);
        let mut h = Holes::new(5000);
        assert_eq!(h.add(1000, 500, &mut s), AddOutcome::New);
        assert_eq!(state(&h, &mut s), (1500, 500, vec![(0, 1000)]));
        assert_eq!(h.add(2000, 100, &mut s), AddOutcome::New);
        assert_eq!(
            state(&h, &mut s),
            (2100, 600, vec![(0, 1000), (1500, 2000)])
        );
        assert_eq!(h.hole_count(), 2);
    }

    #[test]
    fn packet_at_hole_front_shrinks_it_from_the_front() {
        let (mut h, mut s) = with_hole();
        assert_eq!(h.add(300, 100, &mut s), AddOutcome::New);
        assert_eq!(state(&h, &mut s), (1000, 800, vec![(400, 600)]));
    }

    #[test]
    fn packet_at_hole_back_shrinks_it_from_the_back() {
        let (mut h, mut s) = with_hole();
        assert_eq!(h.add(500, 100, &mut s), AddOutcome::New);
        assert_eq!(state(&h, &mut s), (1000, 800, vec![(300, 500)]));
    }

    #[test]
    fn packet_filling_hole_exactly_removes_it() {
        let (mut h, mut s) = with_hole();
        assert_eq!(h.add(300, 300, &mut s), AddOutcome::New);
        assert_eq!(state(&h, &mut s), (1000, 1000, vec![]));
        assert_eq!(h.hole_count(), 0);
        // With the list empty, a new hole becomes head and tail again.
        assert_eq!(h.add(1500, 100, &mut s), AddOutcome::New);
        assert_eq!(holes(&h, &mut s), [(1000, 1500)]);
    }

    #[test]
    fn packet_in_hole_middle_splits_it() {
        let (mut h, mut s) = with_hole();
        assert_eq!(h.add(400, 100, &mut s), AddOutcome::New);
        assert_eq!(state(&h, &mut s), (1000, 800, vec![(300, 400), (500, 600)]));
        assert_eq!(h.add(1500, 100, &mut s), AddOutcome::New);
        assert_eq!(h.add(1200, 100, &mut s), AddOutcome::New);
        assert_eq!(
            holes(&h, &mut s),
            [(300, 400), (500, 600), (1000, 1200), (1300, 1500)]
        );
    }

    #[test]
    fn removing_first_middle_and_last_holes_keeps_the_list() {
        let mut s = TestStore::new(1000);
        let mut h = Holes::new(1000);
        for off in [100, 300, 500, 700] {
            assert_eq!(h.add(off, 100, &mut s), AddOutcome::New);
        }
        assert_eq!(h.hole_count(), 4);
        // Last, first, then a middle one.
        assert_eq!(h.add(600, 100, &mut s), AddOutcome::New);
        assert_eq!(h.add(0, 100, &mut s), AddOutcome::New);
        assert_eq!(h.add(200, 100, &mut s), AddOutcome::New);
        assert_eq!(holes(&h, &mut s), [(400, 500)]);
        // The tail is right: a new hole links after (400, 500).
        assert_eq!(h.add(900, 100, &mut s), AddOutcome::New);
        assert_eq!(holes(&h, &mut s), [(400, 500), (800, 900)]);
    }

    #[test]
    fn duplicates_are_dropped_and_change_nothing() {
        let (mut h, mut s) = with_hole();
        let before = (h, state(&h, &mut s));
        assert_eq!(h.add(0, 300, &mut s), AddOutcome::Duplicate);
        assert_eq!(h.add(600, 400, &mut s), AddOutcome::Duplicate);
        assert_eq!(h.add(700, 10, &mut s), AddOutcome::Duplicate);
        // Partly overlapping the hole, from either side or both.
        assert_eq!(h.add(200, 200, &mut s), AddOutcome::Duplicate);
        assert_eq!(h.add(500, 200, &mut s), AddOutcome::Duplicate);
        assert_eq!(h.add(200, 500, &mut s), AddOutcome::Duplicate);
        assert_eq!((h, state(&h, &mut s)), before);
    }

    #[test]
    fn packet_from_the_last_hole_past_recv_end_is_a_duplicate() {
        let (mut h, mut s) = with_hole();
        assert_eq!(h.add(1500, 100, &mut s), AddOutcome::New);
        assert_eq!(h.add(1400, 300, &mut s), AddOutcome::Duplicate);
        assert_eq!(
            state(&h, &mut s),
            (1600, 800, vec![(300, 600), (1000, 1500)])
        );
    }

    #[test]
    fn out_of_range_packets_are_rejected() {
        let (mut h, mut s) = with_hole();
        let before = h;
        assert_eq!(h.add(1000, 0, &mut s), AddOutcome::OutOfRange);
        assert_eq!(h.add(1900, 101, &mut s), AddOutcome::OutOfRange);
        assert_eq!(h.add(2000, 1, &mut s), AddOutcome::OutOfRange);
        assert_eq!(h.add(u32::MAX, 1, &mut s), AddOutcome::OutOfRange);
        assert_eq!(h.add(10, u32::MAX - 5, &mut s), AddOutcome::OutOfRange);
        assert_eq!(h, before);
        assert_eq!(h.add(1000, 1000, &mut s), AddOutcome::New);
        assert!(h.is_complete() == (h.bytes_received() == 2000));
    }

    #[test]
    fn zero_length_message_is_complete_and_rejects_everything() {
        let mut s = TestStore::new(0);
        let mut h = Holes::new(0);
        assert!(h.is_complete());
        assert_eq!(h.add(0, 1, &mut s), AddOutcome::OutOfRange);
        assert_eq!(h.missing(100, &mut s).count(), 0);
    }

    #[test]
    fn a_hole_shorter_than_a_descriptor_is_refused() {
        let mut s = TestStore::new(2000);
        let mut h = Holes::new(2000);
        // Beyond recv_end: a gap of 7 is refused, 8 is fine.
        assert_eq!(h.add(7, 10, &mut s), AddOutcome::TinyHole);
        assert_eq!(h, Holes::new(2000));
        assert_eq!(h.add(8, 92, &mut s), AddOutcome::New);
        assert_eq!(holes(&h, &mut s), [(0, 8)]);
        assert_eq!(h.add(0, 8, &mut s), AddOutcome::New);
        // Inside the hole 300..600.
        let (mut h, mut s) = with_hole();
        let before = h;
        assert_eq!(h.add(300, 293, &mut s), AddOutcome::TinyHole);
        assert_eq!(h.add(307, 293, &mut s), AddOutcome::TinyHole);
        assert_eq!(h.add(301, 100, &mut s), AddOutcome::TinyHole);
        assert_eq!(h.add(400, 199, &mut s), AddOutcome::TinyHole);
        assert_eq!(h, before);
        assert_eq!(h.add(308, 284, &mut s), AddOutcome::New);
        assert_eq!(holes(&h, &mut s), [(300, 308), (592, 600)]);
    }

    #[test]
    fn too_many_gaps_drops_the_packet_and_keeps_state() {
        let mut s = TestStore::new(10_000);
        let mut h = Holes::with_max_holes(10_000, 2);
        assert_eq!(h.max_holes(), 2);
        assert_eq!(h.add(100, 100, &mut s), AddOutcome::New);
        assert_eq!(h.add(300, 100, &mut s), AddOutcome::New);
        let full = h;
        assert_eq!(h.add(500, 100, &mut s), AddOutcome::TooManyGaps);
        assert_eq!(h.add(40, 10, &mut s), AddOutcome::TooManyGaps);
        assert_eq!(h, full);
        // Work needing no new hole still goes through.
        assert_eq!(h.add(400, 100, &mut s), AddOutcome::New);
        assert_eq!(h.add(0, 10, &mut s), AddOutcome::New);
        assert_eq!(h.add(250, 50, &mut s), AddOutcome::New);
        assert_eq!(state(&h, &mut s), (500, 360, vec![(10, 100), (200, 250)]));
        let mut s = TestStore::new(100);
        let mut h = Holes::with_max_holes(100, 0);
        assert_eq!(h.add(10, 10, &mut s), AddOutcome::TooManyGaps);
        assert_eq!(h.add(0, 10, &mut s), AddOutcome::New);
    }

    #[test]
    #[allow(clippy::single_range_in_vec_init)]
    fn missing_is_holes_then_tail_up_to_granted() {
        let (mut h, mut s) = with_hole();
        let ranges = |h: &Holes, s: &mut TestStore, granted| {
            h.missing(granted, s)
                .collect::<Result<Vec<_>, _>>()
                .unwrap()
        };
        assert_eq!(ranges(&h, &mut s, 1500), [300..600, 1000..1500]);
        assert_eq!(ranges(&h, &mut s, u32::MAX), [300..600, 1000..2000]);
        assert_eq!(ranges(&h, &mut s, 1000), [300..600]);
        assert_eq!(ranges(&h, &mut s, 0), [300..600]);
        assert_eq!(h.add(300, 300, &mut s), AddOutcome::New);
        assert_eq!(ranges(&h, &mut s, 1000), []);
    }

    #[test]
    fn ascending_refills_are_constant_work() {
        let mut s = TestStore::new(100_000);
        let mut h = Holes::new(100_000);
        for k in (0..100).filter(|k| k % 2 == 1) {
            s.loads = 0;
            assert_eq!(h.add(k * 1000, 1000, &mut s), AddOutcome::New);
            assert!(s.loads <= 1, "opening a hole: {} loads", s.loads);
        }
        assert_eq!(h.hole_count(), 50);
        for k in (0..100).filter(|k| k % 2 == 0) {
            // Two packets per hole: the front, then the rest.
            for (off, len) in [(k * 1000, 400), (k * 1000 + 400, 600)] {
                s.loads = 0;
                s.stores.clear();
                assert_eq!(h.add(off, len, &mut s), AddOutcome::New);
                assert!(s.loads <= 2, "refill at {off}: {} loads", s.loads);
                assert!(s.stores.len() <= 2);
            }
        }
        assert!(h.is_complete());
        // A duplicate of in-order data above the last hole costs one load.
        let mut h = Holes::new(100_000);
        assert_eq!(h.add(1000, 1000, &mut s), AddOutcome::New);
        assert_eq!(h.add(2000, 50_000, &mut s), AddOutcome::New);
        s.loads = 0;
        assert_eq!(h.add(40_000, 1000, &mut s), AddOutcome::Duplicate);
        assert_eq!(s.loads, 1);
    }

    #[test]
    fn a_failing_store_is_an_error_and_changes_nothing() {
        // Fail at every possible point of every kind of change.
        let cases: &[(u32, u32)] = &[
            (1500, 100), // opens a hole after the existing one
            (300, 300),  // removes the head
            (300, 100),  // shrinks from the front
            (500, 100),  // shrinks from the back
            (400, 100),  // splits
            (1000, 10),  // duplicate above the last hole (one load)
        ];
        for &(offset, len) in cases {
            for fail_after in 0..4 {
                let (mut h, mut s) = with_hole();
                assert_eq!(h.add(1200, 100, &mut s), AddOutcome::New);
                let before = h;
                let listed = holes(&h, &mut s);
                s.fail_after = Some(fail_after);
                let outcome = h.add(offset, len, &mut s);
                s.fail_after = None;
                if outcome == AddOutcome::StoreFailed {
                    assert_eq!(h, before, "add({offset}, {len}) failing after {fail_after}");
                    assert_eq!(holes(&h, &mut s), listed);
                } else {
                    assert!(
                        matches!(outcome, AddOutcome::New | AddOutcome::Duplicate),
                        "{outcome:?}"
                    );
                }
            }
        }
        // Listing the holes through a failing store ends in one error.
        let (h, mut s) = with_hole();
        s.fail_after = Some(0);
        let listed: Vec<_> = h.missing(2000, &mut s).collect();
        assert_eq!(listed, [Err(StoreError)]);
        // A store too short for the message fails cleanly as well.
        let mut short = [0u8; 10];
        let mut h = Holes::new(2000);
        assert_eq!(h.add(0, 20, &mut short[..]), AddOutcome::New);
        let before = h;
        assert_eq!(h.add(1000, 10, &mut short[..]), AddOutcome::StoreFailed);
        assert_eq!(h, before);
    }

    #[test]
    fn garbage_descriptors_are_reported_not_followed() {
        let (mut h, mut s) = with_hole();
        // The hole's descriptor claims to end past recv_end.
        s.bytes[300..308].copy_from_slice(&[0xFF, 0xFF, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF]);
        assert_eq!(h.add(400, 10, &mut s), AddOutcome::StoreFailed);
        let listed: Vec<_> = h.missing(0, &mut s).collect();
        assert_eq!(listed, [Err(StoreError)]);
    }

    #[test]
    #[cfg_attr(miri, ignore)] // a million bytes checked one by one
    fn one_megabyte_with_every_second_packet_lost_then_refilled() {
        const LEN: u32 = 1_000_000;
        const SEG: u32 = 1424;
        let packets: Vec<(u32, u32)> = (0..LEN.div_ceil(SEG))
            .map(|i| (i * SEG, SEG.min(LEN - i * SEG)))
            .collect();
        let payload = |at: u32| (at.wrapping_mul(2_654_435_761) >> 24) as u8;
        let mut buf = vec![0u8; LEN as usize];
        let mut h = Holes::new(LEN);
        let deliver = |h: &mut Holes, buf: &mut Vec<u8>, (off, len): (u32, u32)| {
            let outcome = h.add(off, len, &mut buf[..]);
            if outcome == AddOutcome::New {
                for at in off..off + len {
                    buf[at as usize] = payload(at);
                }
            }
            outcome
        };
        for &p in packets.iter().skip(1).step_by(2) {
            assert_eq!(deliver(&mut h, &mut buf, p), AddOutcome::New);
        }
        // 703 packets; the odd ones (351) arrived; the even ones before
        // the last received packet are holes, the last packet is the tail.
        assert_eq!(packets.len(), 703);
        assert_eq!(h.hole_count(), 351);
        let asked: Vec<Range<u32>> = h
            .missing(LEN, &mut buf[..])
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(asked.len(), 352);
        assert!(asked
            .iter()
            .zip(packets.iter().step_by(2))
            .all(|(r, &(off, len))| *r == (off..off + len)));
        for &p in packets.iter().step_by(2) {
            assert_eq!(deliver(&mut h, &mut buf, p), AddOutcome::New);
        }
        assert!(h.is_complete());
        assert_eq!(h.bytes_received(), LEN);
        assert_eq!(h.hole_count(), 0);
        assert!((0..LEN).all(|at| buf[at as usize] == payload(at)));
    }

    /// Byte model: which bytes arrived.
    struct Model {
        got: Vec<bool>,
        recv_end: u32,
        max_holes: usize,
    }

    impl Model {
        fn new(len: u32, max_holes: u16) -> Model {
            Model {
                got: vec![false; len as usize],
                recv_end: 0,
                max_holes: max_holes.into(),
            }
        }

        /// Maximal runs of missing bytes below recv_end.
        fn holes(&self) -> Vec<(u32, u32)> {
            let mut out = Vec::new();
            let mut i = 0;
            while i < self.recv_end as usize {
                if self.got[i] {
                    i += 1;
                    continue;
                }
                let start = i;
                while i < self.recv_end as usize && !self.got[i] {
                    i += 1;
                }
                out.push((start as u32, i as u32));
            }
            out
        }

        /// `add`, for a tracker whose search for a packet below
        /// `recv_end` starts at the hole beginning at `start` (its hint or
        /// its head): the walk past more than `MAX_WALK` holes is the one
        /// rule that depends on where the search starts.
        fn add_from(&mut self, offset: u32, len: u32, start: u32) -> AddOutcome {
            let in_range = offset
                .checked_add(len)
                .is_some_and(|end| len > 0 && end as usize <= self.got.len());
            let holes = self.holes();
            let (first, last) = match (holes.first(), holes.last()) {
                (Some(f), Some(l)) => (f.0, l.1),
                _ => return self.add(offset, len),
            };
            // The checks made before any walk: range, above recv_end (no
            // walk), below the first hole, in the data after the last.
            if !in_range || offset >= self.recv_end || offset < first || offset >= last {
                return self.add(offset, len);
            }
            let i = holes
                .iter()
                .position(|h| h.0 == start)
                .expect("the search starts at a hole");
            // The first hole from there ending above the packet: its own,
            // or (when the packet lies in data before it) the one after.
            let j = i + holes[i..].iter().position(|h| offset < h.1).unwrap();
            let passed = if offset < holes[j].0 {
                j - 1 - i
            } else {
                j - i
            };
            if passed > usize::from(MAX_WALK) {
                return AddOutcome::TooFar;
            }
            self.add(offset, len)
        }

        fn add(&mut self, offset: u32, len: u32) -> AddOutcome {
            let end = match offset.checked_add(len) {
                Some(end) if len > 0 && end as usize <= self.got.len() => end,
                _ => return AddOutcome::OutOfRange,
            };
            let (o, e) = (offset as usize, end as usize);
            // Byte recv_end - 1 is always received, so a packet of only new
            // bytes lies wholly in one hole or at/above recv_end.
            if self.got[o..e].iter().any(|&b| b) {
                return AddOutcome::Duplicate;
            }
            let full = self.holes().len() >= self.max_holes;
            let tiny = |n: usize| (1..DESCRIPTOR_LEN as usize).contains(&n);
            if offset >= self.recv_end {
                let gap = (offset - self.recv_end) as usize;
                if tiny(gap) {
                    return AddOutcome::TinyHole;
                }
                if gap > 0 && full {
                    return AddOutcome::TooManyGaps;
                }
                self.recv_end = end;
            } else {
                let mut s = o;
                while s > 0 && !self.got[s - 1] {
                    s -= 1;
                }
                let mut t = e;
                while t < self.recv_end as usize && !self.got[t] {
                    t += 1;
                }
                let (left, right) = (o - s, t - e);
                if tiny(left) || tiny(right) {
                    return AddOutcome::TinyHole;
                }
                if left > 0 && right > 0 && full {
                    return AddOutcome::TooManyGaps;
                }
            }
            self.got[o..e].iter_mut().for_each(|b| *b = true);
            AddOutcome::New
        }
    }

    fn payload_byte(step: usize, at: u32) -> u8 {
        (at ^ (step as u32).wrapping_mul(0x9E37_79B9)).to_le_bytes()[0] | 1
    }

    /// Feeds `ops` to the tracker and the model and compares everything
    /// after each: outcome, counters, holes, missing ranges, that no
    /// descriptor was written inside the packet, and that every received
    /// byte still reads back as written.
    ///
    /// `fail[step % fail.len()]`, when `Some(n)`, makes the store fail from
    /// its `n`-th access on during that step; a `StoreFailed` outcome must
    /// then leave everything as it was (the model skips the packet).
    fn run_differential(
        message_len: u32,
        max_holes: u16,
        ops: &[(u32, u32)],
        granted: u32,
        fail: &[Option<usize>],
    ) {
        let mut h = Holes::with_max_holes(message_len, max_holes);
        let mut m = Model::new(message_len, max_holes);
        let mut s = TestStore::new(message_len);
        let mut written = vec![0u8; message_len as usize];
        for (step, &(offset, len)) in ops.iter().enumerate() {
            s.stores.clear();
            let before = h;
            let start = if h.hint != NONE && h.hint <= offset {
                h.hint
            } else {
                h.head
            };
            s.fail_after = fail.get(step % fail.len().max(1)).copied().flatten();
            let armed = s.fail_after.is_some();
            let got = h.add(offset, len, &mut s);
            s.fail_after = None;
            if got == AddOutcome::StoreFailed && armed && len < DESCRIPTOR_LEN {
                // The one documented exception (module docs, Failures): a
                // packet shorter than a descriptor at a hole's front moves
                // the descriptor onto itself, so a store failing then can
                // damage the list. Later calls must still be safe.
                assert_eq!(h, before);
                for &(o, l) in &ops[step..] {
                    let _ = h.add(o, l, &mut s);
                }
                let _ = h.missing(granted, &mut s).count();
                return;
            }
            let want = if got == AddOutcome::StoreFailed && armed {
                assert_eq!(h, before, "state changed by a failed add({offset}, {len})");
                AddOutcome::StoreFailed
            } else {
                m.add_from(offset, len, start)
            };
            assert_eq!(got, want, "add({offset}, {len}) at step {step}");
            let end = offset.saturating_add(len);
            for &at in &s.stores {
                assert!(
                    at + DESCRIPTOR_LEN <= offset || at >= end,
                    "descriptor at {at} inside packet {offset}..{end}"
                );
            }
            if got == AddOutcome::New {
                for at in offset..end {
                    let byte = payload_byte(step, at);
                    s.bytes[at as usize] = byte;
                    written[at as usize] = byte;
                }
            }
            let received = m.got.iter().filter(|&&b| b).count() as u32;
            assert_eq!(h.recv_end(), m.recv_end);
            assert_eq!(h.bytes_received(), received);
            assert_eq!(h.bytes_remaining(), message_len - received);
            assert_eq!(h.is_complete(), received == message_len);
            let model_holes = m.holes();
            assert_eq!(h.hole_count(), model_holes.len());
            assert_eq!(holes(&h, &mut s), model_holes);
            let tail = m.recv_end..granted.min(message_len);
            let mut want_ranges: Vec<Range<u32>> = model_holes.iter().map(|g| g.0..g.1).collect();
            if !tail.is_empty() {
                want_ranges.push(tail);
            }
            let got_ranges: Vec<Range<u32>> = h
                .missing(granted, &mut s)
                .collect::<Result<_, _>>()
                .unwrap();
            assert_eq!(got_ranges, want_ranges);
            for (at, &got) in m.got.iter().enumerate() {
                if got {
                    assert_eq!(s.bytes[at], written[at], "byte {at} after step {step}");
                }
            }
        }
    }

    fn arbitrary_packet(message_len: u32) -> impl Strategy<Value = (u32, u32)> {
        let len = message_len.max(1);
        prop_oneof![
            (0..len.div_ceil(64), 1u32..=3).prop_map(|(k, n)| (k * 64, n * 64)),
            (0..len + 64, 0u32..400),
            (0..len + 64, 0u32..12),
            (any::<u32>(), any::<u32>()),
        ]
    }

    /// The packets of a grid of `seg` bytes with one extra boundary at
    /// `unscheduled`, as a sender cuts a message.
    fn grid(len: u32, seg: u32, unscheduled: u32) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < len {
            let limit = if at < unscheduled {
                unscheduled.min(len)
            } else {
                len
            };
            let end = (at + seg).min(limit);
            out.push((at, end - at));
            at = end;
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: if cfg!(miri) { 4 } else { ProptestConfig::default().cases },
            ..ProptestConfig::default()
        })]

        /// Arbitrary (offset, len) pairs: the tracker agrees with the byte
        /// model in every outcome and every state.
        #[test]
        #[cfg_attr(miri, ignore)] // minutes per case under Miri
        fn arbitrary_packets_match_the_byte_model(
            (message_len, ops) in (0u32..=3000).prop_flat_map(|len| {
                (Just(len), proptest::collection::vec(arbitrary_packet(len), 1..60))
            }),
            granted in 0u32..4000,
            max_holes in prop_oneof![Just(2u16), Just(4), Just(DEFAULT_MAX_HOLES)],
            fail in proptest::collection::vec(
                prop_oneof![3 => Just(None), 1 => (0usize..5).prop_map(Some)],
                1..8,
            ),
        ) {
            run_differential(message_len, max_holes, &ops, granted, &fail);
        }

        /// Packets of a fixed grid, lost, duplicated and reordered, then
        /// retransmitted in ascending order per missing range (as RESENDs
        /// ask): the tracker agrees with the model throughout and the
        /// message completes.
        #[test]
        #[cfg_attr(miri, ignore)] // minutes per case under Miri
        fn grid_packets_with_loss_match_the_model_and_complete(
            message_len in 1u32..=6000,
            seg in prop_oneof![Just(8u32), 9u32..200, Just(1424)],
            unscheduled in 0u32..7000,
            keys in proptest::collection::vec((any::<u16>(), 0u8..10), 1..120),
        ) {
            let packets = grid(message_len, seg, unscheduled);
            // Each packet: lost (0..3), once, or twice, at a random place.
            let mut deliveries: Vec<(u16, (u32, u32))> = Vec::new();
            for (i, &p) in packets.iter().enumerate() {
                let (key, fate) = keys[i % keys.len()];
                let copies = match fate { 0..=2 => 0, 3..=8 => 1, _ => 2 };
                for c in 0..copies {
                    deliveries.push((key.wrapping_add(c * 7919), p));
                }
            }
            deliveries.sort_by_key(|&(key, _)| key);
            let mut ops: Vec<(u32, u32)> = deliveries.into_iter().map(|(_, p)| p).collect();
            // RESEND rounds: the model says what is missing after the ops so
            // far; the sender resends every grid packet intersecting each
            // range, ascending.
            let mut h = Holes::new(message_len);
            let mut buf = vec![0u8; message_len as usize];
            for &(off, len) in &ops {
                let _ = h.add(off, len, &mut buf[..]);
            }
            for _round in 0..4 {
                let missing: Vec<Range<u32>> = h
                    .missing(message_len, &mut buf[..])
                    .collect::<Result<_, _>>()
                    .unwrap();
                for range in missing {
                    for &(off, len) in &packets {
                        if off < range.end && off + len > range.start {
                            ops.push((off, len));
                            let _ = h.add(off, len, &mut buf[..]);
                        }
                    }
                }
            }
            prop_assert!(h.is_complete(), "{:?}", h);
            run_differential(message_len, DEFAULT_MAX_HOLES, &ops, message_len, &[]);
        }

        /// Whatever the store holds, nothing panics and every call ends.
        #[test]
        fn garbage_in_the_store_never_panics(
            message_len in 0u32..=2000,
            ops in proptest::collection::vec((0u32..2100, 0u32..300), 1..40),
            garbage in proptest::collection::vec((0usize..2000, any::<u8>()), 0..40),
        ) {
            let mut buf = vec![0u8; message_len as usize];
            let mut h = Holes::new(message_len);
            for (i, &(off, len)) in ops.iter().enumerate() {
                if let Some(&(at, byte)) = garbage.get(i) {
                    if let Some(b) = buf.get_mut(at) {
                        *b = byte;
                    }
                }
                let _ = h.add(off, len, &mut buf[..]);
                prop_assert!(h.missing(u32::MAX, &mut buf[..]).count() <= h.hole_count() + 1);
            }
        }
    }

    /// The same differential check, small enough for Miri.
    #[test]
    fn fixed_sequence_matches_the_byte_model() {
        let ops = [
            (100, 50),
            (300, 60),
            (0, 50),
            (50, 50),
            (200, 40),
            (150, 50),
            (240, 60),
            (300, 60),
            (500, 3),
            (407, 20),
            (360, 40),
            (400, 7),
            (360, 47),
            (427, 73),
        ];
        run_differential(600, 3, &ops, 600, &[]);
        run_differential(600, 3, &ops, 600, &[None, Some(0), Some(1), None, Some(2)]);
    }

    #[test]
    fn pool_store_keeps_descriptors_in_message_pages() {
        let mut memory = vec![0u8; super::super::pool::buffer_len_for(64, 64)];
        let mut pool = Pool::new(&mut memory[..], 64).unwrap();
        let mut buf = pool.alloc(3000).unwrap();
        let mut h = Holes::new(3000);
        {
            let mut store = PoolStore::new(&mut pool, &mut buf);
            assert_eq!(h.add(1000, 100, &mut store), AddOutcome::New);
            assert_eq!(h.add(2000, 100, &mut store), AddOutcome::New);
            let ranges: Vec<_> = h
                .missing(3000, &mut store)
                .collect::<Result<_, _>>()
                .unwrap();
            assert_eq!(ranges, [0..1000, 1100..2000, 2100..3000]);
        }
        // The descriptor of the hole at 1100 is in the message's bytes.
        let mut raw = [0u8; 8];
        pool.read_at(&mut buf, 1100, &mut raw).unwrap();
        assert_eq!(raw, [0xD0, 0x07, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF]);
        // A descriptor past the message's pages fails cleanly.
        let mut h = Holes::new(10_000);
        let mut store = PoolStore::new(&mut pool, &mut buf);
        assert_eq!(h.add(0, 3100, &mut store), AddOutcome::New);
        assert_eq!(h.add(3200, 10, &mut store), AddOutcome::StoreFailed);
        assert_eq!(h.recv_end(), 3100);
    }
}
