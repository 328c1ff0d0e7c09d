//! An indexed binary min-heap of slot indices whose array lives in the
//! slots themselves.
//!
//! # Why
//!
//! The sender sends the message with the fewest bytes left first (SRPT,
//! docs/protocol.md), the receiver grants to the few incoming messages with
//! the fewest bytes left, and timers fire in deadline order. Finding those
//! by walking the RPC table costs O(table) per packet; keeping
//! them in a heap costs O(log n) per change and O(1) to read the minimum.
//! The endpoint keeps no memory of its own beyond the tables, so the heap's
//! array is spread over the slots: slot `k` stores heap element `k` (a slot
//! index) in its [`HeapLink`] (`entry`), and every slot stores where its own
//! index sits in the heap (`pos`, [`NONE`] when absent). A heap
//! of `len` elements uses the `entry` fields of slots `0..len`, which exist
//! because the elements are `len` distinct slots. The [`Heap`] header is a
//! `u16` and the heap's number.
//!
//! # Keys
//! A slot type implements [`HeapNode`] once for all the heaps it can sit
//! in, which it tells apart by the number each [`Heap`] was made with
//! ([`Heap::new`]): it gives that heap's link and key (any `Ord` value read
//! from the slot, e.g. `(bytes_left, birth)`). One copy of the heap's code
//! then serves every heap of a slot type, whatever its number (on a
//! microcontroller each copy costs about a kilobyte of flash). After
//! changing a slot's key, call [`Heap::update`]; the heap is ordered by the
//! keys as they were at the last insert/update of each slot. Equal keys
//! come out in no particular order; add a tie-breaker (a birth counter) to
//! the key when order matters.
//! # Robustness
//!
//! No operation panics: an index out of range, [`NONE`], or an element not
//! in the heap makes the operation return `false`/`None` and change
//! nothing; links corrupted by the caller cannot make it index out of
//! bounds or loop (each sift takes at most `log2(len)` steps).
//!
//! # Example
//! ```
//! use homa_stack::storage::{Heap, HeapLink, HeapNode};
//! const SRPT: u8 = 0;
//! #[derive(Default)]
//! struct Slot { srpt: HeapLink, bytes_left: u32 }
//! impl HeapNode for Slot {
//!     type Key = u32;
//!     // One heap here: every number names it.
//!     fn heap_link(&self, _heap: u8) -> &HeapLink { &self.srpt }
//!     fn heap_link_mut(&mut self, _heap: u8) -> &mut HeapLink { &mut self.srpt }
//!     fn heap_key(&self, _heap: u8) -> u32 { self.bytes_left }
//! }
//! let mut slots: [Slot; 4] = Default::default();
//! let mut heap = Heap::new(SRPT);
//! for (i, left) in [(0, 900), (1, 300), (2, 600)] {
//!     slots[i].bytes_left = left;
//!     heap.insert(&mut slots, i as u16);
//! }
//! assert_eq!(heap.peek(&slots), Some(1));
//! slots[0].bytes_left = 100; // its key changed: tell the heap
//! heap.update(&mut slots, 0);
//! let mut first = heapless::Vec::<u16, 8>::new();
//! heap.smallest(&slots, 2, &mut first);
//! assert_eq!(first, [0, 1]);
//! assert!(heap.remove(&mut slots, 0));
//! assert_eq!(heap.pop(&mut slots), Some(1));
//! assert_eq!(heap.len(), 1);
//! ```

use core::fmt;

use super::NONE;

/// The most elements [`Heap::smallest`] returns in one call.
pub const MAX_SMALLEST: usize = 16;

/// The per-slot link of one kind of [`Heap`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct HeapLink {
    /// Heap element number `k` when this is slot `k` (a slot index); part of
    /// the heap's array, whether or not this slot is itself in the heap.
    entry: u16,
    /// Where this slot's own index sits in the heap, or [`NONE`].
    pos: u16,
}

impl HeapLink {
    /// A slot in no heap, holding no heap element.
    pub const EMPTY: HeapLink = HeapLink {
        entry: NONE,
        pos: NONE,
    };
}

impl Default for HeapLink {
    fn default() -> HeapLink {
        HeapLink::EMPTY
    }
}

/// Access to a slot's [`HeapLink`] and key in each heap it can sit in,
/// named by the number the heap was made with.
pub trait HeapNode {
    /// The order of the heaps: the smallest key is at the top.
    type Key: Ord;
    /// The link used by heap number `heap`.
    fn heap_link(&self, heap: u8) -> &HeapLink;
    /// The same, mutably.
    fn heap_link_mut(&mut self, heap: u8) -> &mut HeapLink;
    /// This slot's current key in heap number `heap`.
    fn heap_key(&self, heap: u8) -> Self::Key;
}

/// An indexed binary min-heap over slot indices (see the module docs).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Heap {
    id: u8,
    len: u16,
}

impl Heap {
    /// An empty heap, number `id` among its slot type's heaps.
    pub const fn new(id: u8) -> Heap {
        Heap { id, len: 0 }
    }

    /// The number it was made with.
    pub const fn id(&self) -> u8 {
        self.id
    }

    /// Number of elements.
    pub const fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the heap has no element.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Heap element at position `p`.
#[cfg_attr(not(target_os = "none"), inline)]
#[cfg_attr(target_os = "none", inline(never))]
fn entry<T: HeapNode>(slots: &[T], h: u8, p: usize) -> Option<u16> {
    let e = slots.get(p)?.heap_link(h).entry;
    (e != NONE).then_some(e)
}

/// Key of the heap element at position `p`.
fn key_at<T: HeapNode>(slots: &[T], h: u8, p: usize) -> Option<T::Key> {
    let e = entry(slots, h, p)?;
    Some(slots.get(usize::from(e))?.heap_key(h))
}

/// Puts slot `i` at position `p`, both ways. (Out of line on the
/// firmware: six inlined copies cost more than the calls.)
#[cfg_attr(target_os = "none", inline(never))]
fn place<T: HeapNode>(slots: &mut [T], h: u8, p: usize, i: u16) {
    if let Some(s) = slots.get_mut(p) {
        s.heap_link_mut(h).entry = i;
    }
    if let Some(s) = slots.get_mut(usize::from(i)) {
        // p < len <= u16::MAX, checked by every caller.
        s.heap_link_mut(h).pos = u16::try_from(p).unwrap_or(NONE);
    }
}

impl Heap {
    /// Whether slot `i` is in this heap. O(1).
    #[inline]
    pub fn contains<T: HeapNode>(&self, slots: &[T], i: u16) -> bool {
        self.position(slots, i).is_some()
    }

    /// Where `i` sits, checked both ways.
    #[inline]
    fn position<T: HeapNode>(&self, slots: &[T], i: u16) -> Option<usize> {
        if i == NONE {
            return None;
        }
        let p = usize::from(slots.get(usize::from(i))?.heap_link(self.id).pos);
        (p < self.len() && entry(slots, self.id, p) == Some(i)).then_some(p)
    }

    /// The element with the smallest key. O(1).
    pub fn peek<T: HeapNode>(&self, slots: &[T]) -> Option<u16> {
        if self.len == 0 {
            return None;
        }
        entry(slots, self.id, 0)
    }

    /// Adds `i`. Returns `false` (and changes nothing) when `i` is out of
    /// range or already in the heap. O(log n).
    pub fn insert<T: HeapNode>(&mut self, slots: &mut [T], i: u16) -> bool {
        if i == NONE
            || usize::from(i) >= slots.len()
            || self.len() >= slots.len()
            || self.len == u16::MAX
            || self.contains(slots, i)
        {
            return false;
        }
        let p = self.len();
        place(slots, self.id, p, i);
        self.len += 1;
        self.sift_up(slots, p);
        true
    }

    /// Removes `i`. Returns `false` (and changes nothing) when `i` is not
    /// in the heap. O(log n).
    #[inline]
    pub fn remove<T: HeapNode>(&mut self, slots: &mut [T], i: u16) -> bool {
        // Inline: most calls find `i` absent and end here.
        let Some(p) = self.position(slots, i) else {
            return false;
        };
        self.remove_at(slots, p, i);
        true
    }

    /// Removes `i`, found at `p`.
    fn remove_at<T: HeapNode>(&mut self, slots: &mut [T], p: usize, i: u16) {
        let last = self.len() - 1;
        let moved = entry(slots, self.id, last);
        if let Some(s) = slots.get_mut(last) {
            s.heap_link_mut(self.id).entry = NONE;
        }
        if let Some(s) = slots.get_mut(usize::from(i)) {
            s.heap_link_mut(self.id).pos = NONE;
        }
        self.len -= 1;
        if p != last {
            if let Some(m) = moved {
                place(slots, self.id, p, m);
                if !self.sift_up(slots, p) {
                    self.sift_down(slots, p);
                }
            }
        }
    }

    /// Removes and returns the element with the smallest key. O(log n).
    pub fn pop<T: HeapNode>(&mut self, slots: &mut [T]) -> Option<u16> {
        let i = self.peek(slots)?;
        self.remove(slots, i).then_some(i)
    }

    /// Restores the order after `i`'s key changed. Returns `false` when `i`
    /// is not in the heap. O(log n).
    pub fn update<T: HeapNode>(&mut self, slots: &mut [T], i: u16) -> bool {
        let Some(p) = self.position(slots, i) else {
            return false;
        };
        // A lone element has nowhere to move (one message in flight).
        if self.len > 1 && !self.sift_up(slots, p) {
            self.sift_down(slots, p);
        }
        true
    }

    /// Inserts `i` if absent, else [`update`](Heap::update)s it. Returns
    /// `false` when `i` is out of range. O(log n).
    pub fn upsert<T: HeapNode>(&mut self, slots: &mut [T], i: u16) -> bool {
        self.update(slots, i) || self.insert(slots, i)
    }

    /// Writes into `out` (cleared first) the `k` elements with the smallest
    /// keys, smallest first, without changing the heap; at most
    /// `min(k, N, MAX_SMALLEST)` of them. A best-first walk of the implicit
    /// tree: the next smallest is always a child of one already taken, so
    /// it looks at no more than `2k + 1` elements, choosing each among at
    /// most `k` candidates (O(k²) comparisons, at most a few hundred).
    pub fn smallest<T: HeapNode, const N: usize>(
        &self,
        slots: &[T],
        k: usize,
        out: &mut heapless::Vec<u16, N>,
    ) {
        // The walk is generic over the slots only: one copy of it serves
        // every capacity of `out`.
        let mut found: heapless::Vec<u16, MAX_SMALLEST> = heapless::Vec::new();
        self.smallest_into(slots, k.min(N), &mut found);
        out.clear();
        let _ = out.extend_from_slice(&found);
    }

    /// [`smallest`](Heap::smallest) into a vector of the largest capacity.
    fn smallest_into<T: HeapNode>(
        &self,
        slots: &[T],
        k: usize,
        out: &mut heapless::Vec<u16, MAX_SMALLEST>,
    ) {
        out.clear();
        let k = k.min(MAX_SMALLEST).min(self.len());
        let mut cand: heapless::Vec<usize, { MAX_SMALLEST + 1 }> = heapless::Vec::new();
        if k > 0 {
            let _ = cand.push(0);
        }
        while out.len() < k {
            // The candidate with the smallest key.
            let mut best: Option<(usize, T::Key)> = None;
            for (c, &p) in cand.iter().enumerate() {
                let Some(key) = key_at(slots, self.id, p) else {
                    continue;
                };
                if best.as_ref().is_none_or(|(_, b)| key < *b) {
                    best = Some((c, key));
                }
            }
            let Some((c, _)) = best else {
                break;
            };
            let p = cand.swap_remove(c);
            let Some(e) = entry(slots, self.id, p) else {
                break;
            };
            if out.push(e).is_err() {
                break;
            }
            if out.len() < k {
                for child in [2 * p + 1, 2 * p + 2] {
                    if child < self.len() {
                        let _ = cand.push(child);
                    }
                }
            }
        }
    }

    /// Removes every element. O(len).
    pub fn clear<T: HeapNode>(&mut self, slots: &mut [T]) {
        for p in 0..self.len() {
            if let Some(e) = entry(slots, self.id, p) {
                if let Some(s) = slots.get_mut(usize::from(e)) {
                    s.heap_link_mut(self.id).pos = NONE;
                }
            }
            if let Some(s) = slots.get_mut(p) {
                s.heap_link_mut(self.id).entry = NONE;
            }
        }
        self.len = 0;
    }

    /// Moves the element at `p` up while its parent's key is larger.
    /// Returns whether it moved.
    fn sift_up<T: HeapNode>(&self, slots: &mut [T], mut p: usize) -> bool {
        // The top has no parent: no key to read (most inserts into a
        // short heap land there).
        if p == 0 {
            return false;
        }
        let (Some(i), Some(key)) = (entry(slots, self.id, p), key_at(slots, self.id, p)) else {
            return false;
        };
        let start = p;
        while p > 0 {
            let parent = (p - 1) / 2;
            let (Some(pi), Some(pkey)) = (
                entry(slots, self.id, parent),
                key_at(slots, self.id, parent),
            ) else {
                break;
            };
            if pkey <= key {
                break;
            }
            place(slots, self.id, p, pi);
            p = parent;
        }
        if p == start {
            // Not moved: `i` is where it was.
            return false;
        }
        place(slots, self.id, p, i);
        true
    }

    /// Moves the element at `p` down while a child's key is smaller.
    fn sift_down<T: HeapNode>(&self, slots: &mut [T], mut p: usize) {
        let len = self.len();
        // A leaf has no child: no key to read.
        if 2 * p + 1 >= len {
            return;
        }
        let (Some(i), Some(key)) = (entry(slots, self.id, p), key_at(slots, self.id, p)) else {
            return;
        };
        let start = p;
        loop {
            let left = 2 * p + 1;
            if left >= len {
                break;
            }
            // Each child's entry is read once: it names the slot whose key
            // is compared and, for the smaller, what moves up.
            let Some(l) = entry(slots, self.id, left) else {
                break;
            };
            let Some(lkey) = slots.get(usize::from(l)).map(|s| s.heap_key(self.id)) else {
                break;
            };
            let right = (left + 1 < len)
                .then(|| entry(slots, self.id, left + 1))
                .flatten()
                .and_then(|r| Some((r, slots.get(usize::from(r))?.heap_key(self.id))));
            let (child, ci, ckey) = match right {
                Some((r, rkey)) if rkey < lkey => (left + 1, r, rkey),
                _ => (left, l, lkey),
            };
            if ckey >= key {
                break;
            }
            place(slots, self.id, p, ci);
            p = child;
        }
        if p != start {
            place(slots, self.id, p, i);
        }
    }
}

impl fmt::Debug for Heap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Heap")
            .field("id", &self.id)
            .field("len", &self.len)
            .finish()
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for Heap {
    fn format(&self, f: defmt::Formatter) {
        defmt::write!(f, "Heap {{ id: {}, len: {} }}", self.id, self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::list::{List, ListLink, ListNode};
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use std::vec::Vec;

    const SRPT: u8 = 0;
    const DEADLINE: u8 = 1;
    const LIVE: u8 = 0;

    #[derive(Clone, Copy, Default, Debug)]
    struct Slot {
        srpt: HeapLink,
        deadline: HeapLink,
        live: ListLink,
        left: u32,
        when: u64,
    }

    impl HeapNode for Slot {
        type Key = u64;
        fn heap_link(&self, heap: u8) -> &HeapLink {
            if heap == SRPT {
                &self.srpt
            } else {
                &self.deadline
            }
        }
        fn heap_link_mut(&mut self, heap: u8) -> &mut HeapLink {
            if heap == SRPT {
                &mut self.srpt
            } else {
                &mut self.deadline
            }
        }
        fn heap_key(&self, heap: u8) -> u64 {
            if heap == SRPT {
                u64::from(self.left)
            } else {
                self.when
            }
        }
    }

    impl ListNode for Slot {
        fn list_link(&self, _kind: u8) -> &ListLink {
            &self.live
        }
        fn list_link_mut(&mut self, _kind: u8) -> &mut ListLink {
            &mut self.live
        }
    }

    /// The heap property and both directions of the position links.
    fn check_invariants(heap: &Heap, slots: &[Slot]) {
        for p in 0..heap.len() {
            let e = entry(slots, heap.id(), p).expect("entry");
            assert_eq!(
                usize::from(slots[usize::from(e)].heap_link(heap.id()).pos),
                p
            );
            if p > 0 {
                let parent = (p - 1) / 2;
                assert!(key_at(slots, heap.id(), parent) <= key_at(slots, heap.id(), p));
            }
        }
        let members = (0..slots.len() as u16)
            .filter(|&i| heap.contains(slots, i))
            .count();
        assert_eq!(members, heap.len());
    }

    #[test]
    fn pops_in_key_order() {
        let mut slots = [Slot::default(); 8];
        let mut h = Heap::new(SRPT);
        for (i, left) in [50u32, 10, 70, 30, 20, 60, 40, 0].into_iter().enumerate() {
            slots[i].left = left;
            assert!(h.insert(&mut slots, i as u16));
            check_invariants(&h, &slots);
        }
        let mut out = Vec::new();
        while let Some(i) = h.pop(&mut slots) {
            out.push(slots[usize::from(i)].left);
            check_invariants(&h, &slots);
        }
        assert_eq!(out, [0, 10, 20, 30, 40, 50, 60, 70]);
    }

    #[test]
    fn absent_out_of_range_and_duplicates_are_refused() {
        let mut slots = [Slot::default(); 3];
        let mut h = Heap::new(SRPT);
        assert!(!h.remove(&mut slots, 0));
        assert!(!h.update(&mut slots, 0));
        assert_eq!(h.peek(&slots), None);
        assert_eq!(h.pop(&mut slots), None);
        assert!(h.insert(&mut slots, 1));
        assert!(!h.insert(&mut slots, 1), "duplicate");
        assert!(!h.insert(&mut slots, 3), "out of range");
        assert!(!h.insert(&mut slots, NONE));
        assert!(!h.upsert(&mut slots, 3));
        assert!(!h.remove(&mut slots, 0), "absent");
        assert!(!h.remove(&mut slots, 7));
        assert!(!h.contains(&slots, NONE));
        // Slot 0 holds the heap's entry 0 without being in the heap.
        assert_eq!(slots[0].srpt.entry, 1);
        assert!(!h.contains(&slots, 0));
        assert_eq!(h.len(), 1);
        assert!(h.remove(&mut slots, 1));
        assert!(!h.remove(&mut slots, 1));
        assert!(h.is_empty());
    }

    #[test]
    fn update_moves_both_ways() {
        let mut slots = [Slot::default(); 6];
        let mut h = Heap::new(SRPT);
        for i in 0..6u16 {
            slots[usize::from(i)].left = (u32::from(i) + 1) * 10;
            h.insert(&mut slots, i);
        }
        slots[5].left = 1;
        assert!(h.update(&mut slots, 5));
        assert_eq!(h.peek(&slots), Some(5));
        slots[5].left = 1000;
        slots[0].left = 999;
        h.update(&mut slots, 5);
        h.update(&mut slots, 0);
        check_invariants(&h, &slots);
        assert_eq!(h.peek(&slots), Some(1));
        let mut order = Vec::new();
        while let Some(i) = h.pop(&mut slots) {
            order.push(i);
        }
        assert_eq!(order, [1, 2, 3, 4, 0, 5]);
    }

    #[test]
    fn smallest_takes_at_most_the_capacity_and_the_length() {
        let mut slots = [Slot::default(); 30];
        let mut h = Heap::new(SRPT);
        let mut out = heapless::Vec::<u16, 4>::new();
        h.smallest(&slots, 3, &mut out);
        assert!(out.is_empty());
        for i in 0..30u16 {
            slots[usize::from(i)].left = (u32::from(i) * 7919) % 31;
            h.insert(&mut slots, i);
        }
        h.smallest(&slots, 10, &mut out);
        let keys: Vec<u32> = out.iter().map(|&i| slots[usize::from(i)].left).collect();
        // i * 14 mod 31 for i < 30: every residue but 17, once each.
        assert_eq!(keys, [0, 1, 2, 3]);
        let mut big = heapless::Vec::<u16, 64>::new();
        h.smallest(&slots, 64, &mut big);
        assert_eq!(big.len(), MAX_SMALLEST);
        h.smallest(&slots, 0, &mut big);
        assert!(big.is_empty());
        assert_eq!(h.len(), 30, "smallest leaves the heap as it is");
        check_invariants(&h, &slots);
    }

    #[test]
    fn full_table_of_1000() {
        let mut slots = std::vec![Slot::default(); 1000];
        let mut h = Heap::new(SRPT);
        for i in 0..1000u16 {
            slots[usize::from(i)].left = (u32::from(i) * 617) % 1000;
            assert!(h.insert(&mut slots, i));
        }
        assert_eq!(h.len(), 1000);
        check_invariants(&h, &slots);
        for i in (0..1000u16).step_by(3) {
            slots[usize::from(i)].left = 5000 - u32::from(i);
            assert!(h.update(&mut slots, i));
        }
        check_invariants(&h, &slots);
        let mut last = 0;
        while let Some(i) = h.pop(&mut slots) {
            let k = slots[usize::from(i)].left;
            assert!(k >= last);
            last = k;
        }
        assert!(slots.iter().all(|s| s.srpt == HeapLink::EMPTY));
    }

    #[test]
    fn two_heaps_and_a_list_on_one_slot_type() {
        let mut slots = [Slot::default(); 5];
        let mut srpt = Heap::new(SRPT);
        let mut timers = Heap::new(DEADLINE);
        let mut live = List::new(LIVE);
        for i in 0..5u16 {
            slots[usize::from(i)].left = u32::from(i);
            slots[usize::from(i)].when = 100 - u64::from(i);
            srpt.insert(&mut slots, i);
            timers.insert(&mut slots, i);
            live.push_back(&mut slots, i);
        }
        assert_eq!(srpt.peek(&slots), Some(0));
        assert_eq!(timers.peek(&slots), Some(4));
        srpt.remove(&mut slots, 0);
        live.remove(&mut slots, 4);
        assert_eq!(srpt.peek(&slots), Some(1));
        assert_eq!(timers.peek(&slots), Some(4));
        check_invariants(&srpt, &slots);
        check_invariants(&timers, &slots);
        assert!(live.iter(&slots).eq(0..4));
    }

    #[test]
    fn clear_and_corruption_never_panic() {
        let mut slots = [Slot::default(); 6];
        let mut h = Heap::new(SRPT);
        for i in 0..6u16 {
            slots[usize::from(i)].left = 6 - u32::from(i);
            h.insert(&mut slots, i);
        }
        h.clear(&mut slots);
        assert!(h.is_empty());
        assert!(slots.iter().all(|s| s.srpt == HeapLink::EMPTY));
        for i in 0..6u16 {
            h.insert(&mut slots, i);
        }
        // The caller wiped links while in the heap.
        slots[0].srpt = HeapLink { entry: 40, pos: 9 };
        slots[3].srpt = HeapLink::EMPTY;
        for i in 0..8u16 {
            h.update(&mut slots, i);
            h.remove(&mut slots, i);
        }
        let mut out = heapless::Vec::<u16, 8>::new();
        h.smallest(&slots, 8, &mut out);
        let _ = h.pop(&mut slots);
        h.clear(&mut slots);
        assert!(h.is_empty());
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u16, u32),
        Remove(u16),
        Update(u16, u32),
        Pop,
        Smallest(usize),
    }

    fn op(n: u16) -> impl Strategy<Value = Op> {
        let i = 0..n + 2;
        // Few distinct keys, so ties are common.
        let key = 0u32..20;
        prop_oneof![
            (i.clone(), key.clone()).prop_map(|(i, k)| Op::Insert(i, k)),
            i.clone().prop_map(Op::Remove),
            (i, key).prop_map(|(i, k)| Op::Update(i, k)),
            Just(Op::Pop),
            (0usize..10).prop_map(Op::Smallest),
        ]
    }

    /// Against a `BTreeMap<slot, key>`: membership, the minimum key, the
    /// `k` smallest keys in order, after every step.
    fn run(n: u16, ops: &[Op]) {
        let mut slots = std::vec![Slot::default(); usize::from(n)];
        let mut h = Heap::new(SRPT);
        let mut model: BTreeMap<u16, u32> = BTreeMap::new();
        let sorted = |m: &BTreeMap<u16, u32>| {
            let mut v: Vec<u32> = m.values().copied().collect();
            v.sort();
            v
        };
        for op in ops {
            match *op {
                Op::Insert(i, k) => {
                    let ok = i < n && !model.contains_key(&i);
                    if i < n && ok {
                        slots[usize::from(i)].left = k;
                    }
                    assert_eq!(h.insert(&mut slots, i), ok);
                    if ok {
                        model.insert(i, k);
                    }
                }
                Op::Remove(i) => {
                    assert_eq!(h.remove(&mut slots, i), model.remove(&i).is_some());
                }
                Op::Update(i, k) => {
                    let ok = model.contains_key(&i);
                    if ok {
                        slots[usize::from(i)].left = k;
                        model.insert(i, k);
                    }
                    assert_eq!(h.update(&mut slots, i), ok);
                }
                Op::Pop => {
                    let min = sorted(&model).first().copied();
                    let got = h.pop(&mut slots);
                    assert_eq!(got.map(|i| slots[usize::from(i)].left), min);
                    if let Some(i) = got {
                        assert!(model.remove(&i).is_some());
                    }
                }
                Op::Smallest(k) => {
                    let mut out = heapless::Vec::<u16, 8>::new();
                    h.smallest(&slots, k, &mut out);
                    let want: Vec<u32> = sorted(&model).into_iter().take(k.min(8)).collect();
                    let got: Vec<u32> = out.iter().map(|&i| slots[usize::from(i)].left).collect();
                    assert_eq!(got, want);
                    let mut distinct = out.to_vec();
                    distinct.sort();
                    distinct.dedup();
                    assert_eq!(distinct.len(), out.len());
                    assert!(out.iter().all(|i| model.contains_key(i)));
                }
            }
            check_invariants(&h, &slots);
            assert_eq!(h.len(), model.len());
            for i in 0..n + 2 {
                assert_eq!(h.contains(&slots, i), model.contains_key(&i));
            }
            assert_eq!(
                h.peek(&slots).map(|i| slots[usize::from(i)].left),
                sorted(&model).first().copied()
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: if cfg!(miri) { 4 } else { ProptestConfig::default().cases },
            ..ProptestConfig::default()
        })]

        /// Random operation sequences agree with a `BTreeMap` model.
        #[test]
        #[cfg_attr(miri, ignore)]
        fn random_operations_match_the_model(
            (n, ops) in (1u16..40).prop_flat_map(|n| {
                (Just(n), proptest::collection::vec(op(n), 1..200))
            })
        ) {
            run(n, &ops);
        }
    }
}
