//! Receive-side reassembly tracking for one incoming message (docs/protocol.md
//! 4.3, Linux `homa_add_packet`).
//!
//! The tracker knows which bytes have arrived, not the bytes themselves:
//! the caller copies a packet's payload into the message's pool pages only
//! when [`Reassembly::add`] says [`AddOutcome::New`], so every byte is
//! written exactly once.
//!
//! State: `recv_end` (highest byte received + 1) and a sorted list of gaps
//! `[start, end)` below it. Rules, as Linux applies them:
//! - `offset == recv_end`: append.
//! - `offset > recv_end`: the gap `[recv_end, offset)` opens, then append.
//! - inside one gap: shrink the gap from the front or the back, remove it
//!   when filled exactly, or split it in two.
//! - anything else is dropped as a duplicate: lying in received data, or
//!   only partly overlapping a gap (crossing either gap edge; every gap is
//!   followed by received bytes, so this covers packets that start in a gap
//!   and run past `recv_end`). Retransmissions must therefore keep the
//!   original packet boundaries, as Linux senders do.
//!
//! Linux keeps gaps in an unbounded list; here the list has a fixed
//! capacity `GAPS` ([`DEFAULT_GAPS`] = 4). A packet that would need one
//! more gap is dropped ([`AddOutcome::TooManyGaps`]); the timer's RESEND
//! for the existing gaps and the tail brings it back later, and filling a
//! gap from either end never needs a new slot.
//!
//! Gaps carry no creation time (Linux keeps one, but nothing here asks for
//! a gap by age: the timer asks for every gap after a silence), so a gap is
//! 8 bytes: `size_of::<Reassembly<4>>() == 48` and
//! `size_of::<Reassembly<8>>() == 80`.
//!
//! No method panics, allocates or does more than `O(GAPS)` work, for any
//! `offset`/`len`.

use core::fmt;
use core::ops::Range;

/// Gap capacity of [`Reassembly`] when none is named.
pub const DEFAULT_GAPS: usize = 4;

/// A range of missing bytes below `recv_end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Gap {
    /// First missing byte.
    pub start: u32,
    /// One past the last missing byte (`start < end`).
    pub end: u32,
}

impl Gap {
    const EMPTY: Gap = Gap { start: 0, end: 0 };

    /// The gap as a byte range.
    pub const fn range(&self) -> Range<u32> {
        self.start..self.end
    }
}

/// What [`Reassembly::add`] did with a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[must_use]
pub enum AddOutcome {
    /// The bytes were accepted: copy them into the message now.
    New,
    /// Dropped: the packet lies in received data or only partly overlaps a
    /// gap (see the module docs).
    Duplicate,
    /// Dropped: `len == 0`, `offset + len` overflows, or the packet reaches
    /// past the message length.
    OutOfRange,
    /// Dropped: accepting it needs one more gap than the capacity allows.
    TooManyGaps,
}

/// Tracks which bytes of one incoming message have arrived; `GAPS` is the
/// gap capacity (at most 255). See the [module docs](self).
#[derive(Clone)]
pub struct Reassembly<const GAPS: usize = DEFAULT_GAPS> {
    message_length: u32,
    recv_end: u32,
    bytes_received: u32,
    gap_count: u8,
    /// `gaps[..gap_count]`, ascending and disjoint, each below `recv_end`
    /// and separated by received bytes.
    gaps: [Gap; GAPS],
}

impl<const GAPS: usize> fmt::Debug for Reassembly<GAPS> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reassembly")
            .field("message_length", &self.message_length)
            .field("recv_end", &self.recv_end)
            .field("bytes_received", &self.bytes_received)
            .field("gaps", &self.gaps_slice())
            .finish()
    }
}

impl<const GAPS: usize> Reassembly<GAPS> {
    const CAPACITY_FITS_U8: () = assert!(GAPS <= u8::MAX as usize, "GAPS must be at most 255");

    /// A tracker for a message of `message_length` bytes with nothing
    /// received. A zero-length message is complete at once and rejects
    /// every packet.
    pub const fn new(message_length: u32) -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::CAPACITY_FITS_U8;
        Reassembly {
            message_length,
            recv_end: 0,
            bytes_received: 0,
            gap_count: 0,
            gaps: [Gap::EMPTY; GAPS],
        }
    }

    /// Records a packet carrying bytes `[offset, offset + len)`; see
    /// [`AddOutcome`] and the module docs for the rules.
    pub fn add(&mut self, offset: u32, len: u32) -> AddOutcome {
        let end = match offset.checked_add(len) {
            Some(end) if len > 0 && end <= self.message_length => end,
            _ => return AddOutcome::OutOfRange,
        };
        if offset >= self.recv_end {
            if offset > self.recv_end {
                let count = self.gap_count as usize;
                let Some(slot) = self.gaps.get_mut(count) else {
                    return AddOutcome::TooManyGaps;
                };
                // Above every existing gap, so the list stays sorted.
                *slot = Gap {
                    start: self.recv_end,
                    end: offset,
                };
                self.gap_count += 1;
            }
            self.recv_end = end;
            return self.accept(len);
        }

        let count = self.gap_count as usize;
        let Some(index) = self.gaps[..count]
            .iter()
            .position(|gap| gap.start <= offset && offset < gap.end)
        else {
            // Starts in received data.
            return AddOutcome::Duplicate;
        };
        let gap = self.gaps[index];
        if end > gap.end {
            // Runs past the gap into received data or beyond recv_end.
            return AddOutcome::Duplicate;
        }
        match (offset == gap.start, end == gap.end) {
            (true, true) => {
                self.gaps.copy_within(index + 1..count, index);
                self.gap_count -= 1;
            }
            (true, false) => self.gaps[index].start = end,
            (false, true) => self.gaps[index].end = offset,
            (false, false) => {
                if count == GAPS {
                    return AddOutcome::TooManyGaps;
                }
                self.gaps.copy_within(index + 1..count, index + 2);
                self.gaps[index].end = offset;
                self.gaps[index + 1] = Gap {
                    start: end,
                    end: gap.end,
                };
                self.gap_count += 1;
            }
        }
        self.accept(len)
    }

    fn accept(&mut self, len: u32) -> AddOutcome {
        // Accepted bytes are disjoint and within the message, so this never
        // exceeds message_length; saturate rather than trust that.
        self.bytes_received = self.bytes_received.saturating_add(len);
        AddOutcome::New
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

    /// Every byte has arrived.
    pub const fn is_complete(&self) -> bool {
        self.bytes_received >= self.message_length
    }

    /// Number of open gaps.
    pub const fn gap_count(&self) -> usize {
        self.gap_count as usize
    }

    /// Gap capacity (`GAPS`).
    pub const fn gap_capacity(&self) -> usize {
        GAPS
    }

    /// The gaps below `recv_end`, ascending.
    pub fn gaps(&self) -> impl ExactSizeIterator<Item = Gap> + '_ {
        self.gaps_slice().iter().copied()
    }

    /// What to ask the sender for: every gap, then `[recv_end, granted)`
    /// (with `granted` capped at the message length) if that is nonempty.
    /// The timer sends one RESEND per range.
    pub fn missing_ranges(&self, granted: u32) -> impl Iterator<Item = Range<u32>> + '_ {
        let tail = self.recv_end..granted.min(self.message_length);
        self.gaps()
            .map(|gap| gap.range())
            .chain(Some(tail).filter(|tail| !tail.is_empty()))
    }

    fn gaps_slice(&self) -> &[Gap] {
        self.gaps.get(..self.gap_count as usize).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::vec;
    use std::vec::Vec;

    fn gaps<const G: usize>(r: &Reassembly<G>) -> Vec<(u32, u32)> {
        r.gaps().map(|g| (g.start, g.end)).collect()
    }

    fn state<const G: usize>(r: &Reassembly<G>) -> (u32, u32, Vec<(u32, u32)>) {
        (r.recv_end(), r.bytes_received(), gaps(r))
    }

    /// 0..1000 received except the gap 300..600.
    fn with_gap() -> Reassembly<4> {
        let mut r = Reassembly::<4>::new(2000);
        assert_eq!(r.add(0, 300), AddOutcome::New);
        assert_eq!(r.add(600, 400), AddOutcome::New);
        assert_eq!(gaps(&r), [(300, 600)]);
        r
    }

    #[test]
    fn sizes_are_as_documented() {
        assert_eq!(core::mem::size_of::<Gap>(), 8);
        assert_eq!(core::mem::size_of::<Reassembly<4>>(), 48);
        assert_eq!(core::mem::size_of::<Reassembly<8>>(), 80);
        assert_eq!(core::mem::size_of::<Reassembly>(), 48);
    }

    #[test]
    fn in_order_packets_append_and_complete() {
        let mut r = Reassembly::<4>::new(3000);
        assert_eq!(r.bytes_remaining(), 3000);
        assert!(!r.is_complete());
        assert_eq!(r.add(0, 1400), AddOutcome::New);
        assert_eq!(r.add(1400, 1400), AddOutcome::New);
        assert_eq!(state(&r), (2800, 2800, vec![]));
        assert_eq!(r.bytes_remaining(), 200);
        assert_eq!(r.add(2800, 200), AddOutcome::New);
        assert!(r.is_complete());
        assert_eq!(r.bytes_remaining(), 0);
        assert_eq!(r.message_length(), 3000);
    }

    #[test]
    fn packet_beyond_recv_end_opens_a_gap() {
        let mut r = Reassembly::<4>::new(5000);
        assert_eq!(r.add(1000, 500), AddOutcome::New);
        assert_eq!(state(&r), (1500, 500, vec![(0, 1000)]));
        assert_eq!(r.add(2000, 100), AddOutcome::New);
        assert_eq!(state(&r), (2100, 600, vec![(0, 1000), (1500, 2000)]));
    }

    #[test]
    fn packet_at_gap_front_shrinks_it_from_the_front() {
        let mut r = with_gap();
        assert_eq!(r.add(300, 100), AddOutcome::New);
        assert_eq!(state(&r), (1000, 800, vec![(400, 600)]));
    }

    #[test]
    fn packet_at_gap_back_shrinks_it_from_the_back() {
        let mut r = with_gap();
        assert_eq!(r.add(500, 100), AddOutcome::New);
        assert_eq!(state(&r), (1000, 800, vec![(300, 500)]));
    }

    #[test]
    fn packet_filling_gap_exactly_removes_it() {
        let mut r = with_gap();
        assert_eq!(r.add(300, 300), AddOutcome::New);
        assert_eq!(state(&r), (1000, 1000, vec![]));
    }

    #[test]
    fn packet_in_gap_middle_splits_it_keeping_the_time() {
        let mut r = with_gap();
        assert_eq!(r.add(400, 100), AddOutcome::New);
        assert_eq!(state(&r), (1000, 800, vec![(300, 400), (500, 600)]));
        // The split keeps the list sorted with gaps on either side.
        assert_eq!(r.add(1500, 100), AddOutcome::New);
        assert_eq!(r.add(1200, 100), AddOutcome::New);
        assert_eq!(
            gaps(&r),
            [(300, 400), (500, 600), (1000, 1200), (1300, 1500)]
        );
    }

    #[test]
    fn exact_duplicate_of_received_bytes_is_dropped() {
        let mut r = with_gap();
        let before = state(&r);
        assert_eq!(r.add(0, 300), AddOutcome::Duplicate);
        assert_eq!(r.add(600, 400), AddOutcome::Duplicate);
        assert_eq!(r.add(700, 10), AddOutcome::Duplicate);
        assert_eq!(state(&r), before);
    }

    #[test]
    fn packet_partly_overlapping_a_gap_is_dropped() {
        let mut r = with_gap();
        let before = state(&r);
        // From received data into the gap.
        assert_eq!(r.add(200, 200), AddOutcome::Duplicate);
        // From the gap into received data.
        assert_eq!(r.add(500, 200), AddOutcome::Duplicate);
        // Over the whole gap and both neighbours.
        assert_eq!(r.add(200, 500), AddOutcome::Duplicate);
        assert_eq!(state(&r), before);
    }

    #[test]
    fn packet_partly_overlapping_received_region_is_dropped() {
        let mut r = Reassembly::<4>::new(2000);
        assert_eq!(r.add(0, 1000), AddOutcome::New);
        assert_eq!(r.add(900, 200), AddOutcome::Duplicate);
        assert_eq!(state(&r), (1000, 1000, vec![]));
        // A packet starting in the last gap and running past recv_end.
        let mut r = with_gap();
        assert_eq!(r.add(1500, 100), AddOutcome::New);
        assert_eq!(gaps(&r), [(300, 600), (1000, 1500)]);
        assert_eq!(r.add(1400, 300), AddOutcome::Duplicate);
        assert_eq!(state(&r), (1600, 800, vec![(300, 600), (1000, 1500)]));
    }

    #[test]
    fn out_of_range_packets_are_rejected() {
        let mut r = with_gap();
        let before = state(&r);
        assert_eq!(r.add(1000, 0), AddOutcome::OutOfRange);
        assert_eq!(r.add(1900, 101), AddOutcome::OutOfRange);
        assert_eq!(r.add(2000, 1), AddOutcome::OutOfRange);
        assert_eq!(r.add(u32::MAX, 1), AddOutcome::OutOfRange);
        assert_eq!(state(&r), before);
        assert_eq!(r.add(1000, 1000), AddOutcome::New);
    }

    #[test]
    fn offset_plus_len_overflowing_u32_is_out_of_range() {
        let mut r = Reassembly::<4>::new(u32::MAX);
        assert_eq!(r.add(10, u32::MAX - 5), AddOutcome::OutOfRange);
        assert_eq!(r.add(u32::MAX, u32::MAX), AddOutcome::OutOfRange);
        assert_eq!(state(&r), (0, 0, vec![]));
        assert_eq!(r.add(u32::MAX - 1, 1), AddOutcome::New);
        assert_eq!(state(&r), (u32::MAX, 1, vec![(0, u32::MAX - 1)]));
    }

    #[test]
    fn too_many_gaps_drops_the_packet_and_keeps_state() {
        let mut r = Reassembly::<2>::new(10_000);
        assert_eq!(r.add(100, 100), AddOutcome::New);
        assert_eq!(r.add(300, 100), AddOutcome::New);
        let full = state(&r);
        assert_eq!(full, (400, 200, vec![(0, 100), (200, 300)]));
        // A third gap beyond recv_end.
        assert_eq!(r.add(500, 100), AddOutcome::TooManyGaps);
        // A split of an existing gap.
        assert_eq!(r.add(50, 10), AddOutcome::TooManyGaps);
        assert_eq!(state(&r), full);
        // Work that needs no new gap still goes through.
        assert_eq!(r.add(400, 100), AddOutcome::New);
        assert_eq!(r.add(0, 10), AddOutcome::New);
        assert_eq!(r.add(250, 50), AddOutcome::New);
        assert_eq!(state(&r), (500, 360, vec![(10, 100), (200, 250)]));
    }

    #[test]
    fn zero_gap_capacity_accepts_only_in_order_data() {
        let mut r = Reassembly::<0>::new(100);
        assert_eq!(r.add(10, 10), AddOutcome::TooManyGaps);
        assert_eq!(r.add(0, 10), AddOutcome::New);
        assert_eq!(r.gap_capacity(), 0);
    }

    #[test]
    fn zero_length_message_is_complete_and_rejects_everything() {
        let mut r = Reassembly::<4>::new(0);
        assert!(r.is_complete());
        assert_eq!(r.add(0, 1), AddOutcome::OutOfRange);
        assert_eq!(r.missing_ranges(100).count(), 0);
    }

    #[test]
    #[allow(clippy::single_range_in_vec_init)]
    fn missing_ranges_are_gaps_then_tail_up_to_granted() {
        let mut r = with_gap();
        let ranges: Vec<_> = r.missing_ranges(1500).collect();
        assert_eq!(ranges, [300..600, 1000..1500]);
        // Granted beyond the message is capped at its length.
        let ranges: Vec<_> = r.missing_ranges(u32::MAX).collect();
        assert_eq!(ranges, [300..600, 1000..2000]);
        // No tail once everything granted has arrived.
        let ranges: Vec<_> = r.missing_ranges(1000).collect();
        assert_eq!(ranges, [300..600]);
        let ranges: Vec<_> = r.missing_ranges(0).collect();
        assert_eq!(ranges, [300..600]);
        assert_eq!(r.add(300, 300), AddOutcome::New);
        assert_eq!(r.missing_ranges(1000).count(), 0);
    }

    /// Byte-per-byte model: which bytes arrived, and when recv_end first
    /// jumped over each byte that was skipped.
    struct Model {
        got: Vec<bool>,
        recv_end: u32,
        capacity: usize,
    }

    impl Model {
        fn new(len: u32, capacity: usize) -> Model {
            Model {
                got: vec![false; len as usize],
                recv_end: 0,
                capacity,
            }
        }

        /// Maximal runs of missing bytes below recv_end.
        fn gaps(&self) -> Vec<(u32, u32)> {
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

        fn add(&mut self, offset: u32, len: u32) -> AddOutcome {
            let end = match offset.checked_add(len) {
                Some(end) if len > 0 && end as usize <= self.got.len() => end,
                _ => return AddOutcome::OutOfRange,
            };
            let (o, e) = (offset as usize, end as usize);
            // Byte recv_end - 1 is always received, so a packet of only new
            // bytes lies wholly below recv_end (in one gap) or at/above it.
            if self.got[o..e].iter().any(|&b| b) {
                return AddOutcome::Duplicate;
            }
            let full = self.gaps().len() >= self.capacity;
            if offset >= self.recv_end {
                if offset > self.recv_end && full {
                    return AddOutcome::TooManyGaps;
                }
                self.recv_end = end;
            } else {
                let split = o > 0 && !self.got[o - 1] && end < self.recv_end && !self.got[e];
                if split && full {
                    return AddOutcome::TooManyGaps;
                }
            }
            self.got[o..e].iter_mut().for_each(|b| *b = true);
            AddOutcome::New
        }
    }

    fn packet(message_len: u32) -> impl Strategy<Value = (u32, u32)> {
        let len = message_len.max(1);
        prop_oneof![
            // Aligned to a 128-byte segmentation.
            (0..len.div_ceil(128), 1u32..=2).prop_map(|(k, n)| (k * 128, n * 128)),
            // Arbitrary boundaries.
            (0..len + 64, 0u32..600),
            // Huge values: overflow and far out of range.
            (any::<u32>(), any::<u32>()),
        ]
    }

    fn run_differential<const G: usize>(message_len: u32, ops: &[(u32, u32)], granted: u32) {
        let mut r = Reassembly::<G>::new(message_len);
        let mut m = Model::new(message_len, G);
        for (step, &(offset, len)) in ops.iter().enumerate() {
            let got = r.add(offset, len);
            let want = m.add(offset, len);
            assert_eq!(got, want, "add({offset}, {len}) at step {step}");
            let received = m.got.iter().filter(|&&b| b).count() as u32;
            assert_eq!(r.recv_end(), m.recv_end);
            assert_eq!(r.bytes_received(), received);
            assert_eq!(r.bytes_remaining(), message_len - received);
            assert_eq!(r.is_complete(), received == message_len);
            assert_eq!(gaps(&r), m.gaps());
            let tail = m.recv_end..granted.min(message_len);
            let mut want_ranges: Vec<Range<u32>> = m.gaps().iter().map(|g| g.0..g.1).collect();
            if !tail.is_empty() {
                want_ranges.push(tail);
            }
            assert_eq!(r.missing_ranges(granted).collect::<Vec<_>>(), want_ranges);
        }
    }

    proptest! {
        /// The tracker agrees with the byte model on outcome, recv_end,
        /// bytes received, gaps (with times) and missing ranges.
        #[test]
        fn tracker_matches_byte_model(
            (message_len, ops) in (0u32..=4096).prop_flat_map(|len| {
                (Just(len), proptest::collection::vec(packet(len), 1..60))
            }),
            granted in 0u32..5000,
        ) {
            run_differential::<4>(message_len, &ops, granted);
            run_differential::<2>(message_len, &ops, granted);
        }

        /// Packets of a random segmentation, delivered in any order with
        /// duplicates and then retransmitted by original segment for every
        /// missing range, write each byte exactly once and complete the
        /// message.
        #[test]
        fn every_byte_accepted_exactly_once(
            (message_len, sizes) in (1u32..=4096).prop_flat_map(|len| {
                (Just(len), proptest::collection::vec(1u32..=300, 14..=4096))
            }),
            order_seed in proptest::collection::vec(any::<prop::sample::Index>(), 0..80),
            shuffle_keys in proptest::collection::vec(any::<u64>(), 4096),
        ) {
            let mut segments = Vec::new();
            let mut at = 0;
            for size in sizes {
                if at == message_len {
                    break;
                }
                let len = size.min(message_len - at);
                segments.push((at, len));
                at += len;
            }
            prop_assume!(at == message_len);
            // Every segment once plus random duplicates, in a random order.
            let mut deliveries: Vec<(u64, (u32, u32))> = segments
                .iter()
                .copied()
                .chain(order_seed.iter().map(|i| *i.get(&segments)))
                .enumerate()
                .map(|(i, s)| (shuffle_keys[i % shuffle_keys.len()], s))
                .collect();
            deliveries.sort_by_key(|&(key, _)| key);

            let mut r = Reassembly::<3>::new(message_len);
            let mut writes = vec![0u32; message_len as usize];
            let mut deliver = |r: &mut Reassembly<3>, (offset, len): (u32, u32)| {
                if r.add(offset, len) == AddOutcome::New {
                    for w in &mut writes[offset as usize..(offset + len) as usize] {
                        *w += 1;
                    }
                }
            };
            for (_, seg) in deliveries {
                deliver(&mut r, seg);
            }
            // The timer's RESENDs; original boundaries make each round fill
            // every range from its front.
            for _round in 1..=3 {
                let missing: Vec<Range<u32>> = r.missing_ranges(message_len).collect();
                for range in missing {
                    for &(offset, len) in &segments {
                        if offset < range.end && offset + len > range.start {
                            deliver(&mut r, (offset, len));
                        }
                    }
                }
            }
            prop_assert!(r.is_complete());
            prop_assert_eq!(r.bytes_remaining(), 0);
            prop_assert_eq!(r.gap_count(), 0);
            prop_assert!(writes.iter().all(|&w| w == 1));
        }
    }
}
