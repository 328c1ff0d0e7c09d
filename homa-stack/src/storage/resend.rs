//! The sender's packet grid and its exact set of packets to retransmit.
//!
//! # Why
//!
//! A receiver sends one RESEND per missing range, often 20 to 30 at once
//! (protocol.md 4.7), and the sender retransmits "the original segments
//! overlapping" each range (protocol.md 4.7, receiving RESEND; boundaries
//! must be the original ones, protocol.md 4.3). A queue of a few byte ranges
//! that merges the rest into spans resends the received packets between
//! the gaps too: ten times the loss, measured against Linux. The sender knows
//! its own packet grid, so a bitmap over packet indices records every
//! request exactly in fixed memory: [`ResendSet`] is 128 bytes of bits plus
//! its grid, for any pattern of RESENDs, and a repeated RESEND marks nothing
//! new (forged or duplicated RESENDs cannot multiply the traffic).
//!
//! # Grid
//!
//! [`PacketGrid`]: packets of `seg` payload bytes, with one extra boundary
//! at the unscheduled limit so that no unscheduled packet runs past it
//! (protocol.md 4.2). [`PacketGrid::packet_at`] is the single definition of
//! that grid (the endpoint's `rpc::packet_at` computes the same).
//!
//! # Resolution
//!
//! [`RESEND_BITS`] = 1024 bits. A message of up to 1024 packets gets one bit
//! per packet and the set is exact: a 1,000,000-byte message (the largest
//! Homa message, protocol.md 4.9) has at most 1024 packets when
//! `seg >= 978`, or `seg >= 977` when the unscheduled limit falls on a packet
//! boundary. A message of more packets gets one bit per `k =
//! ceil(packets / 1024)` consecutive packets: marking any packet of a group
//! marks the group, so one request resends at most `k - 1` packets it did
//! not ask for at each end of its range. Clearing packets in the order
//! [`ResendSet::next`] returns them (as a sender does) is exact within a
//! group; the set remembers one partly resent group, and a request below it
//! makes it whole again (up to `k - 1` more packets sent twice); see
//! [`ResendSet::clear`].
//!
//! # Cost
//!
//! Every method is O(`RESEND_BITS / 64`) = 16 word operations at most; none
//! panics or allocates, for any offsets.

use core::fmt;
use core::num::NonZeroU32;

/// Bits of a [`ResendSet`]: the packets it tracks exactly.
pub const RESEND_BITS: usize = 1024;

const WORDS: usize = RESEND_BITS / 64;
const _: () = assert!(WORDS <= 16, "ResendSet::nonzero has a bit per word");

/// No packet index (a grid has at most `u32::MAX` packets, indices below).
const NONE: u32 = u32::MAX;

/// The packet containing byte `offset` of a message of `length` bytes cut
/// into `seg`-byte packets with one boundary forced at `unscheduled`:
/// `[start, end)`. For `offset < length`, `start <= offset < end`.
pub fn packet_at(offset: u32, seg: u32, unscheduled: u32, length: u32) -> (u32, u32) {
    packet_in(offset, at_least_one(seg), unscheduled, length)
}

/// [`packet_at`] with a divisor the compiler knows is not zero (no check
/// for a division by zero at each use).
fn packet_in(offset: u32, seg: NonZeroU32, unscheduled: u32, length: u32) -> (u32, u32) {
    if offset < unscheduled {
        let start = offset / seg * seg.get();
        (
            start,
            start.saturating_add(seg.get()).min(unscheduled).min(length),
        )
    } else {
        let start = unscheduled + (offset - unscheduled) / seg * seg.get();
        (start, start.saturating_add(seg.get()).min(length))
    }
}

/// `n`, or 1 for 0.
const fn at_least_one(n: u32) -> NonZeroU32 {
    match NonZeroU32::new(n) {
        Some(n) => n,
        None => NonZeroU32::MIN,
    }
}

/// How an outgoing message is cut into packets; see the
/// [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PacketGrid {
    seg: NonZeroU32,
    unscheduled: u32,
    length: u32,
}

impl PacketGrid {
    /// The grid of a `length`-byte message with `seg` payload bytes per
    /// packet (0 is taken as 1) and the unscheduled limit `unscheduled`.
    pub const fn new(seg: u32, unscheduled: u32, length: u32) -> Self {
        PacketGrid {
            seg: at_least_one(seg),
            unscheduled,
            length,
        }
    }

    /// Payload bytes per packet.
    pub const fn seg(&self) -> u32 {
        self.seg.get()
    }

    /// The unscheduled limit: a packet boundary.
    pub const fn unscheduled(&self) -> u32 {
        self.unscheduled
    }

    /// Message length.
    pub const fn length(&self) -> u32 {
        self.length
    }

    /// The boundary inside the message: `min(unscheduled, length)`.
    const fn split(&self) -> u32 {
        if self.unscheduled < self.length {
            self.unscheduled
        } else {
            self.length
        }
    }

    /// Packets below the split.
    const fn first_packets(&self) -> u32 {
        self.split().div_ceil(self.seg.get())
    }

    /// Number of packets.
    pub const fn packet_count(&self) -> u32 {
        self.first_packets() + (self.length - self.split()).div_ceil(self.seg.get())
    }

    /// The packet containing byte `offset`: `[start, end)`; see
    /// [`packet_at`].
    pub fn packet_at(&self, offset: u32) -> (u32, u32) {
        packet_in(offset, self.seg, self.unscheduled, self.length)
    }

    /// Index of the packet containing byte `offset`, or
    /// [`packet_count`](Self::packet_count) if `offset >= length`.
    pub fn index_of(&self, offset: u32) -> u32 {
        let split = self.split();
        if offset >= self.length {
            self.packet_count()
        } else if offset < split {
            offset / self.seg
        } else {
            self.first_packets() + (offset - split) / self.seg
        }
    }

    /// Packet `index` as `[start, end)`, if the message has it.
    pub fn packet(&self, index: u32) -> Option<(u32, u32)> {
        let first = self.first_packets();
        let split = self.split();
        let (start, limit) = if index < first {
            (index * self.seg.get(), split)
        } else {
            let start = (index - first)
                .checked_mul(self.seg.get())
                .and_then(|n| n.checked_add(split))?;
            (start, self.length)
        };
        (start < limit).then(|| (start, start.saturating_add(self.seg.get()).min(limit)))
    }
}

/// The packets of one outgoing message that must be sent again, with the
/// priority to send them at. See the [module docs](self).
///
/// ```
/// use homa_stack::storage::resend::{PacketGrid, ResendSet};
///
/// // 100 kB in 1424-byte packets, all sent once.
/// let mut set = ResendSet::new(PacketGrid::new(1424, 10_000, 100_000));
/// // Two RESENDs, one per gap, and a duplicate of the first.
/// assert_eq!(set.add(2848, 4272, 100_000, 7), 1);
/// assert_eq!(set.add(14_272, 17_120, 100_000, 7), 2);
/// assert_eq!(set.add(2848, 4272, 100_000, 7), 0);
/// let mut resent = Vec::new();
/// while let Some((start, end)) = set.next(0) {
///     resent.push((start, end)); // transmit it, then:
///     set.clear(start);
/// }
/// assert_eq!(resent, [(2848, 4272), (14_272, 15_696), (15_696, 17_120)]);
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct ResendSet {
    /// Bit `g` covers packets `g * per_bit .. (g + 1) * per_bit`.
    bits: [u64; WORDS],
    /// Bit `w` set: `bits[w]` is not zero (so `is_empty` reads one word).
    nonzero: u16,
    grid: PacketGrid,
    per_bit: NonZeroU32,
    /// Packets that intersect the highest `sent` given to `add`: no packet
    /// at or above is ever reported.
    sent_packets: u32,
    /// With `per_bit > 1`: in the group of packet `resume`, the packets
    /// below it have been sent again (`NONE`: no such group).
    resume: u32,
    priority: u8,
}

impl fmt::Debug for ResendSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResendSet")
            .field("grid", &self.grid)
            .field("per_bit", &self.per_bit)
            .field("marked", &self.len())
            .field("priority", &self.priority)
            .finish()
    }
}

impl ResendSet {
    /// An empty set for the packets of `grid`.
    pub const fn new(grid: PacketGrid) -> Self {
        let per_bit = grid.packet_count().div_ceil(RESEND_BITS as u32);
        ResendSet {
            bits: [0; WORDS],
            nonzero: 0,
            grid,
            per_bit: at_least_one(per_bit),
            sent_packets: 0,
            resume: NONE,
            priority: 0,
        }
    }

    /// Empties the set in place and gives it `grid`: what [`new`](Self::new)
    /// makes, where `new` writes the whole bitmap and this only the words
    /// of a set that holds marks (none, for a message never asked to send
    /// again).
    pub fn reset(&mut self, grid: PacketGrid) {
        if self.nonzero != 0 {
            self.bits = [0; WORDS];
            self.nonzero = 0;
        }
        self.per_bit = at_least_one(grid.packet_count().div_ceil(RESEND_BITS as u32));
        self.grid = grid;
        self.sent_packets = 0;
        self.resume = NONE;
        self.priority = 0;
    }

    /// The grid given to [`new`](Self::new).
    pub const fn grid(&self) -> &PacketGrid {
        &self.grid
    }

    /// Consecutive packets one bit covers (1: the set is exact).
    pub const fn per_bit(&self) -> u32 {
        self.per_bit.get()
    }

    /// Priority for the retransmissions: the highest asked for since the
    /// set was last empty.
    pub const fn priority(&self) -> u8 {
        self.priority
    }

    /// No packet is marked.
    pub fn is_empty(&self) -> bool {
        self.nonzero == 0
    }

    /// Marks every packet intersecting `[start, min(end, sent))`, where
    /// `sent` is the end of what has been transmitted once: a receiver
    /// cannot lose what was never sent. Packets already marked stay as they
    /// are; the priority becomes the highest asked. Returns how many
    /// packets were newly marked.
    pub fn add(&mut self, start: u32, end: u32, sent: u32, priority: u8) -> u32 {
        let end = end.min(sent).min(self.grid.length);
        if start >= end {
            return 0;
        }
        let before = self.len();
        self.priority = if before == 0 {
            priority
        } else {
            self.priority.max(priority)
        };
        let sent = sent.min(self.grid.length);
        // sent >= end > start >= 0, so sent - 1 is a byte of the message.
        self.sent_packets = self.sent_packets.max(self.grid.index_of(sent - 1) + 1);
        let (first, last) = (self.grid.index_of(start), self.grid.index_of(end - 1));
        let k = self.per_bit;
        if self.resume != NONE {
            let group = self.resume / k;
            let from = first.max(group.saturating_mul(k.get()));
            if (first / k..=last / k).contains(&group) && from < self.resume {
                // Packets of the partly resent group are asked for again.
                self.resume = NONE;
            }
        }
        self.set_bits(first / k, last / k);
        self.len() - before
    }

    /// Sets bits `from..=to` (both below `RESEND_BITS`).
    fn set_bits(&mut self, from: u32, to: u32) {
        for (w, word) in self.bits.iter_mut().enumerate() {
            let lo = (w as u32) * 64;
            let hi = lo + 63;
            if to < lo || from > hi {
                continue;
            }
            let a = from.max(lo) - lo;
            let b = to.min(hi) - lo;
            // Bits a..=b of this word.
            let mask = (u64::MAX >> (63 - (b - a))) << a;
            *word |= mask;
            self.nonzero |= 1 << w;
        }
    }

    // Out of line on the firmware (smaller there); the compiler's choice on hosts.
    #[cfg_attr(target_os = "none", inline(never))]
    fn bit(&self, group: u32) -> bool {
        self.bits
            .get((group / 64) as usize)
            .is_some_and(|w| w >> (group % 64) & 1 == 1)
    }

    fn clear_bit(&mut self, group: u32) {
        let i = (group / 64) as usize;
        if let Some(w) = self.bits.get_mut(i) {
            *w &= !(1 << (group % 64));
            if *w == 0 {
                self.nonzero &= !(1 << i);
            }
        }
    }

    /// The first set bit at or after `group`.
    fn next_bit(&self, group: u32) -> Option<u32> {
        let mut w = (group / 64) as usize;
        let mut word = *self.bits.get(w)? & (u64::MAX << (group % 64));
        loop {
            if word != 0 {
                return Some(w as u32 * 64 + word.trailing_zeros());
            }
            w += 1;
            word = *self.bits.get(w)?;
        }
    }

    /// The marked packets of `group` (set bit): `[lo, hi)` indices.
    fn group_span(&self, group: u32) -> (u32, u32) {
        let k = self.per_bit;
        let mut lo = group.saturating_mul(k.get());
        if self.resume != NONE && self.resume / k == group {
            lo = self.resume;
        }
        let hi = group
            .saturating_add(1)
            .saturating_mul(k.get())
            .min(self.sent_packets);
        (lo, hi)
    }

    /// The first marked packet containing or following byte `from`, as
    /// `[start, end)`.
    pub fn next(&self, from: u32) -> Option<(u32, u32)> {
        let at = self.grid.index_of(from);
        let mut group = at / self.per_bit;
        loop {
            group = self.next_bit(group)?;
            let (lo, hi) = self.group_span(group);
            let lo = lo.max(at);
            if lo < hi {
                return self.grid.packet(lo);
            }
            group += 1;
        }
    }

    /// The end of the last marked packet (0 if none): what a retransmission
    /// announces as `incoming`.
    pub fn last_end(&self) -> u32 {
        let Some((w, word)) = self.bits.iter().enumerate().rev().find(|(_, &w)| w != 0) else {
            return 0;
        };
        let group = w as u32 * 64 + (63 - word.leading_zeros());
        let (_, hi) = self.group_span(group);
        hi.checked_sub(1)
            .and_then(|last| self.grid.packet(last))
            .map_or(0, |(_, end)| end)
    }

    /// Unmarks the packet containing byte `offset` once it has been sent
    /// again; returns whether it was marked and is no longer.
    ///
    /// With one packet per bit this is exact for any packet. With `k > 1`
    /// only the first marked packet of its group (the one
    /// [`next`](Self::next) returns) can be unmarked; the set remembers one
    /// partly resent group, and unmarking in another group makes the
    /// earlier one whole again (at most `k - 1` packets resent twice).
    /// Other packets stay marked.
    pub fn clear(&mut self, offset: u32) -> bool {
        let index = self.grid.index_of(offset);
        let group = index / self.per_bit;
        if offset >= self.grid.length || !self.bit(group) {
            return false;
        }
        let (lo, hi) = self.group_span(group);
        if index != lo {
            return false;
        }
        if index + 1 >= hi {
            self.clear_bit(group);
            if self.resume != NONE && self.resume / self.per_bit == group {
                self.resume = NONE;
            }
        } else {
            self.resume = index + 1;
        }
        true
    }

    /// Marked packets.
    pub fn len(&self) -> u32 {
        let k = u64::from(self.per_bit.get());
        let groups: u64 = self.bits.iter().map(|w| u64::from(w.count_ones())).sum();
        let mut packets = groups * k;
        if let Some(last) = self.sent_packets.checked_sub(1) {
            let group = last / self.per_bit;
            if self.bit(group) {
                // That group is cut at the packets sent.
                packets -= (u64::from(group) + 1) * k - u64::from(self.sent_packets);
            }
        }
        if self.resume != NONE && self.bit(self.resume / self.per_bit) {
            packets -= u64::from(self.resume % self.per_bit);
        }
        u32::try_from(packets).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::vec;
    use std::vec::Vec;

    fn drain(set: &mut ResendSet) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        while let Some(p) = set.next(0) {
            assert!(set.clear(p.0), "next() returned {p:?} but clear refused it");
            out.push(p);
        }
        out
    }

    #[test]
    fn sizes() {
        assert_eq!(core::mem::size_of::<[u64; WORDS]>(), 128);
        assert!(core::mem::size_of::<ResendSet>() <= 160);
    }

    #[test]
    fn grid_has_a_boundary_at_the_unscheduled_limit() {
        let g = PacketGrid::new(1424, 40_000, 100_000);
        assert_eq!(g.packet_at(0), (0, 1424));
        assert_eq!(g.packet_at(39_871), (38_448, 39_872));
        assert_eq!(g.packet_at(39_999), (39_872, 40_000));
        assert_eq!(g.packet_at(40_000), (40_000, 41_424));
        assert_eq!(g.packet_at(99_999), (99_808, 100_000));
        // 29 packets up to the limit (the last of 128 bytes), 43 after it.
        assert_eq!(g.packet_count(), 29 + 43);
        assert_eq!(g.index_of(39_999), 28);
        assert_eq!(g.index_of(40_000), 29);
        assert_eq!(g.packet(28), Some((39_872, 40_000)));
        assert_eq!(g.packet(71), Some((99_808, 100_000)));
        assert_eq!(g.packet(72), None);
        assert_eq!(g.index_of(100_000), 72);
        // A limit beyond the message, at 0, and a zero seg.
        let g = PacketGrid::new(1424, 1425, 1425);
        assert_eq!((g.packet(1), g.packet_count()), (Some((1424, 1425)), 2));
        let g = PacketGrid::new(100, 0, 250);
        assert_eq!((g.packet(2), g.packet_count()), (Some((200, 250)), 3));
        assert_eq!(PacketGrid::new(0, 0, 3).packet_count(), 3);
        assert_eq!(PacketGrid::new(1424, 0, 0).packet_count(), 0);
    }

    #[test]
    fn a_megabyte_fits_one_bit_per_packet_from_seg_978() {
        for unscheduled in [0, 10_000, 60_000, 1_000_000] {
            let g = PacketGrid::new(978, unscheduled, 1_000_000);
            assert!(g.packet_count() <= 1024, "{unscheduled}");
            assert_eq!(ResendSet::new(g).per_bit(), 1);
        }
        assert_eq!(PacketGrid::new(977, 0, 1_000_000).packet_count(), 1024);
        assert_eq!(PacketGrid::new(977, 1000, 1_000_000).packet_count(), 1025);
        let set = ResendSet::new(PacketGrid::new(977, 1000, 1_000_000));
        assert_eq!(set.per_bit(), 2);
    }

    #[test]
    fn add_marks_intersecting_packets_clipped_at_sent() {
        let g = PacketGrid::new(1000, 0, 10_000);
        let mut set = ResendSet::new(g);
        assert!(set.is_empty());
        // 1500..3500 touches packets 1, 2 and 3.
        assert_eq!(set.add(1500, 3500, 10_000, 5), 3);
        assert_eq!(set.len(), 3);
        assert_eq!(set.priority(), 5);
        assert_eq!(set.next(0), Some((1000, 2000)));
        assert_eq!(set.next(2500), Some((2000, 3000)));
        assert_eq!(set.next(3000), Some((3000, 4000)));
        assert_eq!(set.next(4000), None);
        assert_eq!(set.last_end(), 4000);
        // Nothing beyond what was sent; nothing for an empty range.
        assert_eq!(set.add(6000, 9000, 7000, 7), 1);
        assert_eq!(set.next(4000), Some((6000, 7000)));
        assert_eq!(set.add(8000, 9000, 7000, 7), 0);
        assert_eq!(set.add(5000, 5000, 10_000, 7), 0);
        assert_eq!(set.add(u32::MAX, 10, u32::MAX, 7), 0);
        assert_eq!(set.len(), 4);
        assert_eq!(set.priority(), 7);
    }

    #[test]
    fn repeated_resends_mark_nothing_twice() {
        let g = PacketGrid::new(1424, 10_000, 1_000_000);
        let mut set = ResendSet::new(g);
        assert_eq!(set.add(20_000, 30_000, 1_000_000, 6), 8);
        for _ in 0..100 {
            assert_eq!(set.add(20_000, 30_000, 1_000_000, 6), 0);
            assert_eq!(set.add(21_000, 22_000, 1_000_000, 6), 0);
        }
        assert_eq!(set.len(), 8);
        assert_eq!(drain(&mut set).len(), 8);
        assert!(set.is_empty());
    }

    #[test]
    fn one_resend_per_gap_resends_exactly_those_packets() {
        // 1 MB, 1424-byte packets, 30 gaps of 1 to 3 packets each, asked
        // for with one RESEND each in a burst (Linux sends these 20 to 30
        // at a time), some asked twice.
        let g = PacketGrid::new(1424, 60_000, 1_000_000);
        let mut set = ResendSet::new(g);
        assert_eq!(set.per_bit(), 1);
        let mut lost = Vec::new();
        for gap in 0..30u32 {
            let first = 5 + gap * 23;
            let n = 1 + gap % 3;
            lost.extend(first..first + n);
            let (start, _) = g.packet(first).unwrap();
            let (_, end) = g.packet(first + n - 1).unwrap();
            set.add(start, end, 1_000_000, 7);
            if gap % 4 == 0 {
                assert_eq!(set.add(start, end, 1_000_000, 7), 0);
            }
        }
        assert_eq!(set.len() as usize, lost.len());
        let sent: Vec<(u32, u32)> = drain(&mut set);
        let want: Vec<(u32, u32)> = lost.iter().map(|&i| g.packet(i).unwrap()).collect();
        assert_eq!(sent, want);
        assert_eq!(set.len(), 0);
    }

    #[test]
    fn coarse_bits_resend_at_most_k_minus_1_extra_at_each_end() {
        // 5000 packets of 100 bytes: k = 5.
        let g = PacketGrid::new(100, 0, 500_000);
        let mut set = ResendSet::new(g);
        assert_eq!(set.per_bit(), 5);
        // Packets 12..=13 lie in group 2 (packets 10..15).
        assert_eq!(set.add(1200, 1400, 500_000, 3), 5);
        let sent = drain(&mut set);
        assert_eq!(sent.len(), 5);
        assert!(sent.contains(&(1200, 1300)) && sent.contains(&(1300, 1400)));
        // A group is cut at the packets sent.
        let mut set = ResendSet::new(g);
        assert_eq!(set.add(4_000, 4_300, 4_300, 3), 3);
        assert_eq!(drain(&mut set), [(4000, 4100), (4100, 4200), (4200, 4300)]);
    }

    /// `reset` leaves exactly what `new` makes, whatever was marked, part
    /// resent or sent before, and for another grid too.
    #[test]
    fn reset_in_place_equals_a_new_set() {
        let coarse = PacketGrid::new(100, 0, 500_000);
        let exact = PacketGrid::new(1424, 10_000, 100_000);
        let mut set = ResendSet::new(coarse);
        set.add(1000, 1500, 500_000, 3);
        set.add(400_000, 480_000, 500_000, 6);
        assert!(set.clear(1000));
        set.reset(exact);
        assert_eq!(set, ResendSet::new(exact));
        assert!(set.is_empty() && set.next(0).is_none() && set.last_end() == 0);
        assert_eq!(set.add(0, 100_000, 2848, 1), 2);
        set.reset(coarse);
        assert_eq!(set, ResendSet::new(coarse));
        assert_eq!(set.per_bit(), 5);
        set.reset(coarse);
        assert_eq!(set, ResendSet::new(coarse));
    }

    #[test]
    fn coarse_bits_resume_inside_a_group() {
        let g = PacketGrid::new(100, 0, 500_000);
        let mut set = ResendSet::new(g);
        set.add(1000, 1500, 500_000, 3);
        // Out-of-order clears do nothing; in-order ones advance.
        assert!(!set.clear(1200));
        assert!(set.clear(1000));
        assert!(set.clear(1100));
        assert_eq!(set.len(), 3);
        assert_eq!(set.next(0), Some((1200, 1300)));
        // Asking again for a packet already resent marks the group again.
        assert_eq!(set.add(1000, 1100, 500_000, 3), 2);
        assert_eq!(set.next(0), Some((1000, 1100)));
        // Asking for one still marked changes nothing.
        assert!(set.clear(1000));
        assert_eq!(set.add(1400, 1500, 500_000, 3), 0);
        assert_eq!(set.len(), 4);
    }

    #[test]
    fn empty_and_degenerate_grids_never_panic() {
        for g in [
            PacketGrid::new(1424, 0, 0),
            PacketGrid::new(0, 0, u32::MAX),
            PacketGrid::new(1, u32::MAX, u32::MAX),
            PacketGrid::new(u32::MAX, 7, u32::MAX),
        ] {
            let mut set = ResendSet::new(g);
            for (s, e) in [(0, u32::MAX), (u32::MAX - 1, u32::MAX), (5, 3)] {
                let _ = set.add(s, e, u32::MAX, 1);
                let _ = set.next(s);
                let _ = set.clear(s);
                let _ = set.last_end();
                let _ = set.len();
            }
        }
    }

    /// A sender with a [`ResendSet`] and a receiver with
    /// [`Holes`](super::super::holes::Holes) over a lossy link: one RESEND
    /// per missing range each round, every retransmission lossy too. Each
    /// lost transmission is sent again exactly once, and nothing else is.
    #[test]
    #[cfg_attr(miri, ignore)] // a megabyte of payload
    fn with_holes_only_lost_packets_are_sent_again() {
        use super::super::holes::{AddOutcome, Holes};
        const LEN: u32 = 1_000_000;
        let grid = PacketGrid::new(1424, 60_000, LEN);
        let mut buf = vec![0u8; LEN as usize];
        let mut holes = Holes::new(LEN);
        let mut set = ResendSet::new(grid);
        // xorshift: about 1 in 20 transmissions lost (5 %).
        let mut rng = 0x2545_F491_4F6C_DD1Du64;
        let mut lossy = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng.is_multiple_of(20)
        };
        let mut lost = 0u32;
        let mut resent = 0u32;
        let mut transmit = |holes: &mut Holes, buf: &mut Vec<u8>, (s, e): (u32, u32)| {
            if lossy() {
                lost += 1;
                return;
            }
            assert_eq!(
                holes.add(s, e - s, &mut buf[..]),
                AddOutcome::New,
                "{s}..{e}"
            );
            buf[s as usize..e as usize].fill(0x5A);
        };
        for i in 0..grid.packet_count() {
            transmit(&mut holes, &mut buf, grid.packet(i).unwrap());
        }
        let mut rounds = 0;
        while !holes.is_complete() {
            rounds += 1;
            assert!(rounds < 20);
            let asked: Vec<_> = holes
                .missing(LEN, &mut buf[..])
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            for range in asked {
                let _ = set.add(range.start, range.end, LEN, 7);
            }
            while let Some(p) = set.next(0) {
                assert!(set.clear(p.0));
                resent += 1;
                transmit(&mut holes, &mut buf, p);
            }
        }
        assert!(lost > 20, "the link lost {lost}");
        assert_eq!(resent, lost);
        assert!(buf.iter().all(|&b| b == 0x5A));
    }

    /// Model: one flag per packet, plus what was sent.
    struct Model {
        grid: PacketGrid,
        marked: Vec<bool>,
    }

    impl Model {
        fn add(&mut self, start: u32, end: u32, sent: u32) {
            let end = end.min(sent).min(self.grid.length());
            for (i, m) in self.marked.iter_mut().enumerate() {
                let (s, e) = self.grid.packet(i as u32).unwrap();
                if start < end && s < end && e > start {
                    *m = true;
                }
            }
        }
        fn next(&self, from: u32) -> Option<(u32, u32)> {
            (0..self.marked.len() as u32)
                .filter(|&i| self.marked[i as usize])
                .map(|i| self.grid.packet(i).unwrap())
                .find(|&(_, e)| e > from)
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Add(u32, u32, u8),
        Next(u32),
        Clear(u32),
        /// Sends the packet `next(0)` returns.
        ClearNext,
        /// Empties the set in place (as `MsgOut` does when its message
        /// starts over).
        Reset,
    }

    fn op(len: u32) -> impl Strategy<Value = Op> {
        let l = len.max(1);
        prop_oneof![
            (0..l + 100, 0..l + 100, any::<u8>()).prop_map(|(a, b, p)| Op::Add(a, b, p)),
            (0..l + 100).prop_map(Op::Next),
            (0..l + 100).prop_map(Op::Clear),
            Just(Op::ClearNext),
            Just(Op::Reset),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: if cfg!(miri) { 4 } else { ProptestConfig::default().cases },
            ..ProptestConfig::default()
        })]

        /// With one packet per bit the set equals the per-packet model
        /// after every operation.
        #[test]
        fn exact_set_matches_the_packet_model(
            (length, ops) in (0u32..=20_000).prop_flat_map(|len| {
                (Just(len), proptest::collection::vec(op(len), 1..80))
            }),
            seg in prop_oneof![Just(1424u32), 20u32..3000],
            unscheduled in 0u32..25_000,
            sent_frac in 0u32..=100,
        ) {
            let grid = PacketGrid::new(seg, unscheduled, length);
            prop_assume!(grid.packet_count() <= RESEND_BITS as u32);
            let mut set = ResendSet::new(grid);
            let mut model = Model { grid, marked: vec![false; grid.packet_count() as usize] };
            let sent = (u64::from(length) * u64::from(sent_frac) / 100) as u32;
            let mut top: Option<u8> = None;
            for op in ops {
                match op {
                    Op::Add(a, b, p) => {
                        let before = model.marked.iter().filter(|&&m| m).count();
                        model.add(a, b, sent);
                        let after = model.marked.iter().filter(|&&m| m).count();
                        prop_assert_eq!(set.add(a, b, sent, p) as usize, after - before);
                        if a < b.min(sent).min(length) {
                            top = Some(if before == 0 { p } else { top.unwrap_or(p).max(p) });
                        }
                    }
                    Op::Next(from) => prop_assert_eq!(set.next(from), model.next(from)),
                    Op::Clear(at) => {
                        let i = grid.index_of(at) as usize;
                        let was = model.marked.get(i).copied().unwrap_or(false);
                        prop_assert_eq!(set.clear(at), was);
                        if was { model.marked[i] = false; }
                    }
                    Op::ClearNext => {
                        if let Some((s, _)) = model.next(0) {
                            prop_assert!(set.clear(s));
                            model.marked[grid.index_of(s) as usize] = false;
                        }
                    }
                    Op::Reset => {
                        set.reset(grid);
                        prop_assert_eq!(&set, &ResendSet::new(grid));
                        model.marked.iter_mut().for_each(|m| *m = false);
                        top = None;
                    }
                }
                let count = model.marked.iter().filter(|&&m| m).count();
                prop_assert_eq!(set.len() as usize, count);
                prop_assert_eq!(set.is_empty(), count == 0);
                prop_assert_eq!(set.next(0), model.next(0));
                let last = model.marked.iter().rposition(|&m| m)
                    .map_or(0, |i| grid.packet(i as u32).unwrap().1);
                prop_assert_eq!(set.last_end(), last);
                if let (Some(t), false) = (top, set.is_empty()) {
                    prop_assert_eq!(set.priority(), t);
                }
            }
        }

        /// With several packets per bit, whatever was asked and not yet
        /// resent is still marked, and draining in order resends at most
        /// k - 1 extra packets at each end of every request.
        #[test]
        #[cfg_attr(miri, ignore = "up to 50,000 packets: 15+ minutes under Miri; runs natively")]
        fn coarse_set_never_loses_a_request(
            length in 100_000u32..=1_000_000,
            seg in 20u32..200,
            // Mostly overlapping requests near the front, so that packets
            // already resent are asked for again.
            requests in proptest::collection::vec(
                prop_oneof![
                    3 => (0u32..10_000, 1u32..2_000),
                    1 => (0u32..1_000_000, 1u32..5_000),
                ],
                1..40,
            ),
            clears in proptest::collection::vec(0usize..12, 40),
        ) {
            let grid = PacketGrid::new(seg, 30_000, length);
            let mut set = ResendSet::new(grid);
            let k = set.per_bit();
            prop_assume!(k > 1);
            let mut model = Model { grid, marked: vec![false; grid.packet_count() as usize] };
            let mut budget = 0u64;
            // k - 1 at each end of a request, and k - 1 when it lands below
            // a partly resent group (whose progress is then forgotten).
            for (i, &(start, len)) in requests.iter().enumerate() {
                let end = start.saturating_add(len);
                model.add(start, end, length);
                let _ = set.add(start, end, length, 1);
                budget += 3 * u64::from(k - 1);
                // Resend a few in order, as a sender between RESENDs.
                for _ in 0..clears[i] {
                    let Some(p) = set.next(0) else { break };
                    prop_assert!(set.clear(p.0));
                    model.marked[grid.index_of(p.0) as usize] = false;
                }
                for (j, &m) in model.marked.iter().enumerate() {
                    if m {
                        let (s, _) = grid.packet(j as u32).unwrap();
                        prop_assert!(set.next(s).is_some_and(|p| p.0 == s), "packet {} lost", j);
                    }
                }
            }
            let outstanding = model.marked.iter().filter(|&&m| m).count() as u64;
            let drained = drain(&mut set).len() as u64;
            prop_assert!(drained >= outstanding);
            prop_assert!(drained <= outstanding + budget, "{} > {} + {}", drained, outstanding, budget);
        }

        /// The grid tiles the message: packets are contiguous, each
        /// `packet_at` of its bytes, and no packet crosses the limit.
        #[test]
        fn grid_tiles_the_message(
            length in 0u32..50_000,
            seg in 1u32..3000,
            unscheduled in 0u32..60_000,
        ) {
            let g = PacketGrid::new(seg, unscheduled, length);
            let mut at = 0;
            for i in 0..g.packet_count() {
                let (s, e) = g.packet(i).unwrap();
                prop_assert_eq!(s, at);
                prop_assert!(e > s && e - s <= seg);
                prop_assert!(!(s < unscheduled && e > unscheduled));
                prop_assert_eq!(g.packet_at(s), (s, e));
                prop_assert_eq!(g.packet_at(e - 1), (s, e));
                prop_assert_eq!(g.index_of(s), i);
                prop_assert_eq!(g.index_of(e - 1), i);
                at = e;
            }
            prop_assert_eq!(at, length);
            prop_assert_eq!(g.packet(g.packet_count()), None);
        }
    }
}
