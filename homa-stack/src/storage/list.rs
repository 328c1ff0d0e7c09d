//! An intrusive doubly linked list of slot indices, its links inside the
//! caller's slots.
//!
//! # Why
//!
//! The endpoint keeps its RPCs and peers in caller-supplied tables and must
//! not walk a table per packet, per application call or per poll
//! (docs/architecture.md). The queues it needs instead (live RPCs, each socket's ready
//! queue, each peer's RPCs, RPCs with control packets due, RPCs waiting for
//! pool pages, idle peers in LRU order, peers waiting for ARP) must also
//! live in caller memory and must not cap how many elements they hold below
//! the table size. An intrusive list does both: the [`List`] header is
//! 8 bytes kept wherever the caller likes, and each slot carries one
//! 6-byte [`ListLink`] per kind of list it can sit in. Every operation is
//! O(1) except [`List::clear`] and iteration.
//!
//! # How a slot joins several lists
//!
//! A slot type implements [`ListNode`] once, giving the link of each kind
//! of list it can sit in by a small number, the list's *kind*
//! ([`List::new`]). The same slot can then be in the ready queue and in its
//! peer's list at once, call sites stay `list.push_back(slots, i)`, and one
//! copy of the list code serves every kind of list of a slot type (on a
//! microcontroller that saves about a kilobyte of flash over a copy per
//! kind).
//!
//! Several lists may share one kind (one ready queue per socket): a slot is
//! in at most one of them at a time. Give each such list its own id
//! ([`List::with_id`]); a link records the id of the list it is in, so
//! [`List::contains`] and [`List::remove`] on the wrong list answer
//! `false` and change nothing. Lists that share a kind *and* an id cannot be
//! told apart: removing through the wrong one would corrupt both.
//!
//! # Robustness
//!
//! No operation panics: an index out of range of the slice, [`NONE`], or an
//! element not in this list makes the operation return `false`/`None` and
//! leaves everything unchanged. Iteration stops after [`List::len`] steps
//! even if the links were corrupted (a slot overwritten while linked).
//!
//! # Example
//!
//! ```
//! use homa_stack::storage::{List, ListLink, ListNode};
//!
//! const READY: u8 = 0; // the kind of the ready queue
//! #[derive(Default)]
//! struct Slot { ready: ListLink, value: u32 }
//! impl ListNode for Slot {
//!     // One kind of list here: every number names it.
//!     fn list_link(&self, _kind: u8) -> &ListLink { &self.ready }
//!     fn list_link_mut(&mut self, _kind: u8) -> &mut ListLink { &mut self.ready }
//! }
//!
//! let mut slots: [Slot; 4] = Default::default();
//! let mut queue = List::new(READY);
//! assert!(queue.push_back(&mut slots, 2));
//! assert!(queue.push_back(&mut slots, 0));
//! assert!(!queue.push_back(&mut slots, 2)); // already queued
//! assert!(!queue.push_back(&mut slots, 9)); // out of range
//!
//! // Walk with a cursor, removing as we go.
//! let mut cursor = queue.front();
//! while let Some(i) = cursor {
//!     cursor = queue.next_of(&slots, i);
//!     if i == 2 {
//!         queue.remove(&mut slots, i);
//!     }
//! }
//! assert_eq!(queue.iter(&slots).collect::<Vec<u16>>(), [0]);
//! assert_eq!(queue.pop_front(&mut slots), Some(0));
//! assert!(queue.is_empty());
//! ```

use core::fmt;

use super::NONE;

/// The per-slot link of one kind of [`List`]: neighbours and the id of the
/// list the slot is in ([`NONE`] when in none).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ListLink {
    prev: u16,
    next: u16,
    owner: u16,
}

impl ListLink {
    /// A slot in no list.
    pub const EMPTY: ListLink = ListLink {
        prev: NONE,
        next: NONE,
        owner: NONE,
    };

    /// Whether the slot is in some list of this link's kind.
    pub const fn is_linked(&self) -> bool {
        self.owner != NONE
    }
}

impl Default for ListLink {
    fn default() -> ListLink {
        ListLink::EMPTY
    }
}

/// Access to a slot's [`ListLink`] for each kind of list it can sit in.
pub trait ListNode {
    /// The link used by lists of kind `kind`.
    fn list_link(&self, kind: u8) -> &ListLink;
    /// The same, mutably.
    fn list_link_mut(&mut self, kind: u8) -> &mut ListLink;
}

/// An intrusive doubly linked list of slot indices (see the module docs).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct List {
    head: u16,
    tail: u16,
    len: u16,
    id: u16,
    kind: u8,
}

impl List {
    /// An empty list of kind `kind` (which link of the slots it uses), id 0.
    pub const fn new(kind: u8) -> List {
        List::with_id(kind, 0)
    }

    /// An empty list of kind `kind` with its own id, for several lists
    /// sharing one kind. [`NONE`] is reserved and taken as `NONE - 1`.
    pub const fn with_id(kind: u8, id: u16) -> List {
        List {
            head: NONE,
            tail: NONE,
            len: 0,
            id: if id == NONE { NONE - 1 } else { id },
            kind,
        }
    }

    /// Its kind.
    pub const fn kind(&self) -> u8 {
        self.kind
    }

    /// This list's id.
    pub const fn id(&self) -> u16 {
        self.id
    }

    /// Number of elements.
    pub const fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the list has no element.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first element.
    pub const fn front(&self) -> Option<u16> {
        if self.head == NONE {
            None
        } else {
            Some(self.head)
        }
    }

    /// The last element.
    pub const fn back(&self) -> Option<u16> {
        if self.tail == NONE {
            None
        } else {
            Some(self.tail)
        }
    }
}

impl List {
    /// Whether slot `i` is in this list. O(1).
    pub fn contains<T: ListNode>(&self, slots: &[T], i: u16) -> bool {
        match slots.get(usize::from(i)) {
            Some(s) => i != NONE && s.list_link(self.kind).owner == self.id,
            None => false,
        }
    }

    /// The element after `i`, or `None` at the end or when `i` is not in
    /// this list. Read it before removing `i` to walk while removing.
    pub fn next_of<T: ListNode>(&self, slots: &[T], i: u16) -> Option<u16> {
        if !self.contains(slots, i) {
            return None;
        }
        let next = slots.get(usize::from(i))?.list_link(self.kind).next;
        (next != NONE).then_some(next)
    }

    /// The element before `i`, or `None` at the front or when `i` is not
    /// in this list.
    pub fn prev_of<T: ListNode>(&self, slots: &[T], i: u16) -> Option<u16> {
        if !self.contains(slots, i) {
            return None;
        }
        let prev = slots.get(usize::from(i))?.list_link(self.kind).prev;
        (prev != NONE).then_some(prev)
    }

    /// The elements front to back.
    pub fn iter<'a, T: ListNode>(&self, slots: &'a [T]) -> Iter<'a, T> {
        Iter {
            slots,
            next: self.head,
            left: self.len,
            kind: self.kind,
        }
    }

    /// Whether `i` can join a list: in range, not the sentinel, in no list
    /// of this kind.
    fn can_link<T: ListNode>(&self, slots: &[T], i: u16) -> bool {
        i != NONE
            && slots
                .get(usize::from(i))
                .is_some_and(|s| !s.list_link(self.kind).is_linked())
    }

    /// Appends `i`. Returns `false` (and changes nothing) when `i` is out
    /// of range or already in a list of this kind. O(1).
    pub fn push_back<T: ListNode>(&mut self, slots: &mut [T], i: u16) -> bool {
        if !self.can_link(slots, i) {
            return false;
        }
        let old_tail = self.tail;
        if let Some(s) = slots.get_mut(usize::from(i)) {
            *s.list_link_mut(self.kind) = ListLink {
                prev: old_tail,
                next: NONE,
                owner: self.id,
            };
        }
        match slots.get_mut(usize::from(old_tail)) {
            Some(t) if old_tail != NONE => t.list_link_mut(self.kind).next = i,
            _ => self.head = i,
        }
        self.tail = i;
        self.len = self.len.saturating_add(1);
        true
    }

    /// Prepends `i`. Returns `false` (and changes nothing) when `i` is out
    /// of range or already in a list of this kind. O(1).
    pub fn push_front<T: ListNode>(&mut self, slots: &mut [T], i: u16) -> bool {
        if !self.can_link(slots, i) {
            return false;
        }
        let old_head = self.head;
        if let Some(s) = slots.get_mut(usize::from(i)) {
            *s.list_link_mut(self.kind) = ListLink {
                prev: NONE,
                next: old_head,
                owner: self.id,
            };
        }
        match slots.get_mut(usize::from(old_head)) {
            Some(h) if old_head != NONE => h.list_link_mut(self.kind).prev = i,
            _ => self.tail = i,
        }
        self.head = i;
        self.len = self.len.saturating_add(1);
        true
    }

    /// Unlinks `i`. Returns `false` (and changes nothing) when `i` is not
    /// in this list. O(1).
    pub fn remove<T: ListNode>(&mut self, slots: &mut [T], i: u16) -> bool {
        if !self.contains(slots, i) {
            return false;
        }
        let Some(s) = slots.get_mut(usize::from(i)) else {
            return false;
        };
        let ListLink { prev, next, .. } = *s.list_link(self.kind);
        *s.list_link_mut(self.kind) = ListLink::EMPTY;
        match slots.get_mut(usize::from(prev)) {
            Some(p) if prev != NONE => p.list_link_mut(self.kind).next = next,
            _ => self.head = next,
        }
        match slots.get_mut(usize::from(next)) {
            Some(n) if next != NONE => n.list_link_mut(self.kind).prev = prev,
            _ => self.tail = prev,
        }
        self.len = self.len.saturating_sub(1);
        true
    }

    /// Removes and returns the first element. O(1).
    pub fn pop_front<T: ListNode>(&mut self, slots: &mut [T]) -> Option<u16> {
        let i = self.front()?;
        self.remove(slots, i).then_some(i)
    }

    /// Removes and returns the last element. O(1).
    pub fn pop_back<T: ListNode>(&mut self, slots: &mut [T]) -> Option<u16> {
        let i = self.back()?;
        self.remove(slots, i).then_some(i)
    }

    /// Moves `i` to the back if it is in this list, or appends it if it is
    /// in no list of this kind (an LRU touch). Returns whether `i` is now at
    /// the back. O(1).
    pub fn move_to_back<T: ListNode>(&mut self, slots: &mut [T], i: u16) -> bool {
        self.remove(slots, i);
        self.push_back(slots, i)
    }

    /// Unlinks every element. O(len).
    pub fn clear<T: ListNode>(&mut self, slots: &mut [T]) {
        while self.pop_front(slots).is_some() {}
        // Whatever a corrupted chain left behind, the header is empty.
        *self = List::with_id(self.kind, self.id);
    }
}

impl fmt::Debug for List {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("List")
            .field("head", &self.head)
            .field("tail", &self.tail)
            .field("len", &self.len)
            .field("id", &self.id)
            .field("kind", &self.kind)
            .finish()
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for List {
    fn format(&self, f: defmt::Formatter) {
        defmt::write!(
            f,
            "List {{ head: {}, tail: {}, len: {}, id: {} }}",
            self.head,
            self.tail,
            self.len,
            self.id
        )
    }
}

/// Iterator over a [`List`]'s elements, front to back ([`List::iter`]).
pub struct Iter<'a, T> {
    slots: &'a [T],
    next: u16,
    left: u16,
    kind: u8,
}

// Manual: a derive would ask `T: Clone`, which a walk over shared slots
// does not need.
impl<T> Clone for Iter<'_, T> {
    fn clone(&self) -> Self {
        Iter {
            slots: self.slots,
            next: self.next,
            left: self.left,
            kind: self.kind,
        }
    }
}

impl<T: ListNode> Iterator for Iter<'_, T> {
    type Item = u16;

    fn next(&mut self) -> Option<u16> {
        if self.left == 0 || self.next == NONE {
            return None;
        }
        let i = self.next;
        self.next = self.slots.get(usize::from(i))?.list_link(self.kind).next;
        self.left -= 1;
        Some(i)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(usize::from(self.left)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;
    use std::vec::Vec;

    const A: u8 = 0;
    const B: u8 = 1;

    #[derive(Clone, Copy, Default, Debug)]
    struct Slot {
        a: ListLink,
        b: ListLink,
    }

    impl ListNode for Slot {
        fn list_link(&self, kind: u8) -> &ListLink {
            if kind == A {
                &self.a
            } else {
                &self.b
            }
        }
        fn list_link_mut(&mut self, kind: u8) -> &mut ListLink {
            if kind == A {
                &mut self.a
            } else {
                &mut self.b
            }
        }
    }

    fn collect(list: &List, slots: &[Slot]) -> Vec<u16> {
        list.iter(slots).collect()
    }

    /// Walks the links both ways and checks them against `model`.
    fn check(list: &List, slots: &[Slot], model: &VecDeque<u16>) {
        let forward = collect(list, slots);
        assert_eq!(forward, model.iter().copied().collect::<Vec<_>>());
        let mut backward = Vec::new();
        let mut c = list.back();
        while let Some(i) = c {
            backward.push(i);
            c = list.prev_of(slots, i);
        }
        backward.reverse();
        assert_eq!(backward, forward);
        assert_eq!(list.len(), model.len());
        assert_eq!(list.is_empty(), model.is_empty());
        assert_eq!(list.front(), model.front().copied());
        assert_eq!(list.back(), model.back().copied());
        for i in 0..slots.len() as u16 {
            assert_eq!(list.contains(slots, i), model.contains(&i), "contains({i})");
        }
    }

    #[test]
    fn push_pop_fifo_order() {
        let mut slots = [Slot::default(); 5];
        let mut l = List::new(A);
        for i in [3, 1, 4, 0] {
            assert!(l.push_back(&mut slots, i));
        }
        assert_eq!(collect(&l, &slots), [3, 1, 4, 0]);
        assert_eq!(l.pop_front(&mut slots), Some(3));
        assert_eq!(l.pop_back(&mut slots), Some(0));
        assert!(l.push_front(&mut slots, 2));
        assert_eq!(collect(&l, &slots), [2, 1, 4]);
    }

    #[test]
    fn removing_absent_or_out_of_range_is_a_no_op() {
        let mut slots = [Slot::default(); 4];
        let mut l = List::new(A);
        assert!(!l.remove(&mut slots, 0), "empty list");
        l.push_back(&mut slots, 1);
        l.push_back(&mut slots, 2);
        let before = l;
        assert!(!l.remove(&mut slots, 0), "not linked");
        assert!(!l.remove(&mut slots, 4), "out of range");
        assert!(!l.remove(&mut slots, NONE), "sentinel");
        assert!(!l.push_back(&mut slots, 4));
        assert!(!l.push_front(&mut slots, NONE));
        assert_eq!(l.next_of(&slots, 9), None);
        assert_eq!(l.prev_of(&slots, 9), None);
        assert!(!l.contains(&slots, 9));
        assert_eq!(l, before);
        assert_eq!(collect(&l, &slots), [1, 2]);
        assert!(l.remove(&mut slots, 1));
        assert!(!l.remove(&mut slots, 1), "second removal");
        assert_eq!(collect(&l, &slots), [2]);
    }

    #[test]
    fn lists_sharing_a_tag_keep_apart_by_id() {
        let mut slots = [Slot::default(); 4];
        let mut x = List::with_id(A, 0);
        let mut y = List::with_id(A, 1);
        x.push_back(&mut slots, 0);
        x.push_back(&mut slots, 1);
        y.push_back(&mut slots, 2);
        assert!(
            !y.push_back(&mut slots, 1),
            "a slot is in one list per kind"
        );
        assert!(!y.remove(&mut slots, 1), "wrong list");
        assert!(!y.contains(&slots, 0));
        assert_eq!(y.next_of(&slots, 0), None);
        assert_eq!(collect(&x, &slots), [0, 1]);
        assert_eq!(collect(&y, &slots), [2]);
        assert_eq!(List::with_id(A, NONE).id(), NONE - 1);
    }

    #[test]
    fn one_slot_in_two_lists_of_different_tags() {
        let mut slots = [Slot::default(); 3];
        let mut a = List::new(A);
        let mut b = List::new(B);
        a.push_back(&mut slots, 0);
        a.push_back(&mut slots, 1);
        b.push_back(&mut slots, 1);
        b.push_back(&mut slots, 0);
        assert!(a.remove(&mut slots, 1));
        assert_eq!(collect(&a, &slots), [0]);
        assert_eq!(collect(&b, &slots), [1, 0]);
        assert!(b.contains(&slots, 1));
    }

    #[test]
    fn cursor_removing_while_walking() {
        let mut slots = [Slot::default(); 10];
        let mut l = List::new(A);
        for i in 0..10 {
            l.push_back(&mut slots, i);
        }
        let mut c = l.front();
        while let Some(i) = c {
            c = l.next_of(&slots, i);
            if i % 3 != 1 {
                assert!(l.remove(&mut slots, i));
            }
        }
        assert_eq!(collect(&l, &slots), [1, 4, 7]);
    }

    #[test]
    fn move_to_back_and_clear() {
        let mut slots = [Slot::default(); 4];
        let mut l = List::new(A);
        for i in 0..4 {
            l.push_back(&mut slots, i);
        }
        assert!(l.move_to_back(&mut slots, 0));
        assert!(l.move_to_back(&mut slots, 2));
        assert_eq!(collect(&l, &slots), [1, 3, 0, 2]);
        l.clear(&mut slots);
        assert!(l.is_empty());
        assert!(slots.iter().all(|s| !s.a.is_linked()));
    }

    #[test]
    fn full_table_of_1000() {
        let mut slots = std::vec![Slot::default(); 1000];
        let mut l = List::new(A);
        for i in 0..1000 {
            assert!(l.push_back(&mut slots, i));
        }
        assert_eq!(l.len(), 1000);
        assert!((0..1000).all(|i| !l.push_front(&mut slots, i)));
        assert!(l.iter(&slots).eq(0..1000));
        for i in (0..1000).step_by(2) {
            assert!(l.remove(&mut slots, i));
        }
        assert!(l.iter(&slots).eq((1..1000).step_by(2)));
    }

    #[test]
    fn corrupted_links_never_panic_or_loop() {
        let mut slots = [Slot::default(); 4];
        let mut l = List::new(A);
        for i in 0..3 {
            l.push_back(&mut slots, i);
        }
        // The caller overwrote links while linked: a cycle and a wild index.
        slots[1].a.next = 0;
        slots[0].a.prev = 77;
        assert_eq!(l.iter(&slots).count(), 3);
        l.remove(&mut slots, 0);
        l.remove(&mut slots, 1);
        let _ = l.iter(&slots).count();
        l.clear(&mut slots);
        assert!(l.is_empty());
    }

    #[derive(Clone, Debug)]
    enum Op {
        PushBack(bool, u16),
        PushFront(bool, u16),
        Remove(bool, u16),
        PopFront(bool),
        PopBack(bool),
        MoveToBack(bool, u16),
        /// Walk list `x` with a cursor, removing the elements `i % m == 0`.
        SweepRemove(bool, u16),
    }

    fn op(n: u16) -> impl Strategy<Value = Op> {
        // Indices up to n + 2 so out-of-range ones are exercised too.
        let i = 0..n + 2;
        prop_oneof![
            (any::<bool>(), i.clone()).prop_map(|(x, i)| Op::PushBack(x, i)),
            (any::<bool>(), i.clone()).prop_map(|(x, i)| Op::PushFront(x, i)),
            (any::<bool>(), i.clone()).prop_map(|(x, i)| Op::Remove(x, i)),
            any::<bool>().prop_map(Op::PopFront),
            any::<bool>().prop_map(Op::PopBack),
            (any::<bool>(), i).prop_map(|(x, i)| Op::MoveToBack(x, i)),
            (any::<bool>(), 1u16..5).prop_map(|(x, m)| Op::SweepRemove(x, m)),
        ]
    }

    /// Two lists sharing a kind (ids 0 and 1) plus one of another kind over
    /// the same slots, against `VecDeque`s.
    fn run(n: u16, ops: &[Op]) {
        let mut slots = std::vec![Slot::default(); usize::from(n)];
        let mut lists: [List; 2] = [List::with_id(A, 0), List::with_id(A, 1)];
        let mut other = List::new(B);
        let mut models: [VecDeque<u16>; 2] = Default::default();
        let mut other_model = VecDeque::new();
        for op in ops {
            let in_any = |m: &[VecDeque<u16>; 2], i: u16| m.iter().any(|q| q.contains(&i));
            match *op {
                Op::PushBack(x, i) | Op::PushFront(x, i) => {
                    let x = usize::from(x);
                    let ok = i < n && !in_any(&models, i);
                    let back = matches!(op, Op::PushBack(..));
                    let got = if back {
                        lists[x].push_back(&mut slots, i)
                    } else {
                        lists[x].push_front(&mut slots, i)
                    };
                    assert_eq!(got, ok);
                    if ok {
                        if back {
                            models[x].push_back(i)
                        } else {
                            models[x].push_front(i)
                        }
                    }
                    // Keep the other-kind list busy with the same slots.
                    if other.remove(&mut slots, i) {
                        other_model.retain(|&j| j != i);
                    } else if other.push_back(&mut slots, i) {
                        other_model.push_back(i);
                    }
                }
                Op::Remove(x, i) => {
                    let x = usize::from(x);
                    let pos = models[x].iter().position(|&j| j == i);
                    assert_eq!(lists[x].remove(&mut slots, i), pos.is_some());
                    if let Some(p) = pos {
                        models[x].remove(p);
                    }
                }
                Op::PopFront(x) => {
                    let x = usize::from(x);
                    assert_eq!(lists[x].pop_front(&mut slots), models[x].pop_front());
                }
                Op::PopBack(x) => {
                    let x = usize::from(x);
                    assert_eq!(lists[x].pop_back(&mut slots), models[x].pop_back());
                }
                Op::MoveToBack(x, i) => {
                    let x = usize::from(x);
                    let other_has = models[1 - x].contains(&i);
                    let ok = i < n && !other_has;
                    assert_eq!(lists[x].move_to_back(&mut slots, i), ok);
                    if ok {
                        models[x].retain(|&j| j != i);
                        models[x].push_back(i);
                    }
                }
                Op::SweepRemove(x, m) => {
                    let x = usize::from(x);
                    let mut c = lists[x].front();
                    while let Some(i) = c {
                        c = lists[x].next_of(&slots, i);
                        if i % m == 0 {
                            assert!(lists[x].remove(&mut slots, i));
                        }
                    }
                    models[x].retain(|&j| j % m != 0);
                }
            }
            check(&lists[0], &slots, &models[0]);
            check(&lists[1], &slots, &models[1]);
            check(&other, &slots, &other_model);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: if cfg!(miri) { 4 } else { ProptestConfig::default().cases },
            ..ProptestConfig::default()
        })]

        /// Random operation sequences on three lists over one slot table
        /// agree with `VecDeque` models after every step.
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
