//! A meldable min-heap (a leftist heap) whose nodes are slots: many small
//! heaps over one slot table, each held by its owner as one `u16`.
//!
//! # Why
//!
//! The receiver spreads its grants across peers (docs/protocol.md 4.4): it
//! needs each peer's best incoming message, not only the globally best
//! ones. An indexed [`Heap`](super::Heap) spreads its array over the slots
//! of the table, so one table carries one heap of that kind; a heap per
//! peer needs nodes that point at each other instead. A leftist heap does
//! that with three links and a rank per slot, and every operation is a
//! walk down or up a path of at most [`MAX_RANK`] + 1 nodes: O(log n),
//! with no memory beyond the slots and the owner's root.
//!
//! # How
//!
//! Each member's [`MeldLink`] names its two children and its parent. The
//! rank of a member is one more than its right child's (an absent child has
//! rank 0), and no left child ranks below its right sibling, so the right
//! spine of a heap of `n` nodes has at most `log2(n + 1)` of them. Two
//! heaps merge along their right spines, the smaller key going on top; the
//! ranks are then fixed on the way back up the parent links (no recursion,
//! no stack). Removing any member merges its children into its place and
//! fixes ranks upward until one does not change; an update that leaves a
//! member between its parent and its children costs three key reads.
//!
//! # Keys
//!
//! [`MeldNode::meld_key`] reads the key from the slot (any `Ord` value).
//! After changing a member's key, call [`Meld::update`]: the heap is ordered
//! by the keys as they were at each member's last insert or update.
//!
//! # Robustness
//!
//! No operation panics or indexes out of bounds: an index out of range,
//! [`NONE`], or a slot in no heap makes it return `false`/`None` and change
//! nothing, and every loop stops after a fixed number of steps, so links
//! corrupted by the caller cannot make it loop. A member of one heap passed
//! to another heap's operation is refused when it is a root; otherwise it
//! is the caller's mistake (the heap cannot tell without a walk), and
//! leaves the heaps mis-ordered but memory-safe.
//!
//! # Example
//! ```
//! use homa_stack::storage::{Meld, MeldLink, MeldNode};
//! #[derive(Default)]
//! struct Slot { link: MeldLink, left: u32 }
//! impl MeldNode for Slot {
//!     type Key = u32;
//!     fn meld_link(&self) -> &MeldLink { &self.link }
//!     fn meld_link_mut(&mut self) -> &mut MeldLink { &mut self.link }
//!     fn meld_key(&self) -> u32 { self.left }
//! }
//! let mut slots: [Slot; 6] = Default::default();
//! // Two heaps over one table, each held as a root by its owner.
//! let (mut a, mut b) = (Meld::new(), Meld::new());
//! for (i, left) in [(0, 900), (1, 300), (2, 600)] {
//!     slots[i].left = left;
//!     a.insert(&mut slots, i as u16);
//! }
//! slots[3].left = 50;
//! b.insert(&mut slots, 3);
//! assert_eq!(a.peek(), Some(1));
//! slots[0].left = 100; // its key changed: tell its heap
//! a.update(&mut slots, 0);
//! assert_eq!(a.peek(), Some(0));
//! assert!(a.remove(&mut slots, 1));
//! assert!(!b.remove(&mut slots, 0), "the root of another heap");
//! assert_eq!(a.pop(&mut slots), Some(0));
//! assert_eq!(a.pop(&mut slots), Some(2));
//! assert_eq!((a.peek(), b.peek()), (None, Some(3)));
//! ```

use core::fmt;

use super::NONE;

/// The highest rank a member can have: a heap whose root has rank `r`
/// holds at least `2^r - 1` nodes, and a table holds fewer than `2^16`.
pub const MAX_RANK: u8 = 16;

/// Steps after which any walk stops: a merge goes down two right spines
/// (at most `2 * MAX_RANK` nodes) and back up, a removal up at most
/// `MAX_RANK + 1` nodes.
const STEPS: usize = 2 * MAX_RANK as usize + 2;

/// A slot's place in a [`Meld`] heap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MeldLink {
    left: u16,
    right: u16,
    parent: u16,
    /// 0 when in no heap, else one more than the right child's.
    rank: u8,
}

impl MeldLink {
    /// A slot in no heap.
    pub const EMPTY: MeldLink = MeldLink {
        left: NONE,
        right: NONE,
        parent: NONE,
        rank: 0,
    };

    /// Whether the slot is in a heap (some heap over its table).
    pub const fn is_linked(&self) -> bool {
        self.rank != 0
    }

    /// The slot's parent in its heap, [`NONE`] for a root or a slot in no
    /// heap.
    pub const fn parent(&self) -> u16 {
        self.parent
    }
}

impl Default for MeldLink {
    fn default() -> MeldLink {
        MeldLink::EMPTY
    }
}

/// Access to a slot's [`MeldLink`] and key.
pub trait MeldNode {
    /// The order of the heaps: the smallest key is at the root.
    type Key: Ord;
    /// The slot's link.
    fn meld_link(&self) -> &MeldLink;
    /// The same, mutably.
    fn meld_link_mut(&mut self) -> &mut MeldLink;
    /// The slot's current key.
    fn meld_key(&self) -> Self::Key;
}

/// A leftist min-heap over slot indices: its root, held by the owner (see
/// the module docs).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Meld {
    root: u16,
}

impl Meld {
    /// An empty heap.
    pub const EMPTY: Meld = Meld { root: NONE };

    /// An empty heap.
    pub const fn new() -> Meld {
        Meld::EMPTY
    }

    /// Whether the heap has no member.
    pub const fn is_empty(&self) -> bool {
        self.root == NONE
    }

    /// The member with the smallest key. O(1).
    pub const fn peek(&self) -> Option<u16> {
        if self.root == NONE {
            None
        } else {
            Some(self.root)
        }
    }
}

impl Default for Meld {
    fn default() -> Meld {
        Meld::EMPTY
    }
}

/// Slot `i`'s link, [`MeldLink::EMPTY`] for an index out of range.
#[cfg_attr(not(target_os = "none"), inline)]
#[cfg_attr(target_os = "none", inline(never))]
fn link<T: MeldNode>(slots: &[T], i: u16) -> MeldLink {
    slots
        .get(usize::from(i))
        .map_or(MeldLink::EMPTY, |s| *s.meld_link())
}

#[inline]
fn key<T: MeldNode>(slots: &[T], i: u16) -> Option<T::Key> {
    slots.get(usize::from(i)).map(|s| s.meld_key())
}

#[inline]
fn rank<T: MeldNode>(slots: &[T], i: u16) -> u8 {
    link(slots, i).rank
}

/// Changes slot `i`'s link (nothing for an index out of range).
#[inline]
fn edit<T: MeldNode>(slots: &mut [T], i: u16, f: impl FnOnce(&mut MeldLink)) {
    if let Some(s) = slots.get_mut(usize::from(i)) {
        f(s.meld_link_mut());
    }
}

/// Whether `a`'s key is above `b`'s (`false` when either is out of range).
#[inline]
fn above<T: MeldNode>(slots: &[T], a: u16, b: u16) -> bool {
    match (key(slots, a), key(slots, b)) {
        (Some(ka), Some(kb)) => ka > kb,
        _ => false,
    }
}

/// Restores `n`'s leftist order (the higher-ranked child on the left) and
/// its rank from its children's. Returns whether its rank changed.
#[inline]
fn fix<T: MeldNode>(slots: &mut [T], n: u16) -> bool {
    let l = link(slots, n);
    let (rl, rr) = (rank(slots, l.left), rank(slots, l.right));
    let (left, right, r) = if rl < rr {
        (l.right, l.left, rl)
    } else {
        (l.left, l.right, rr)
    };
    let new = r.saturating_add(1).min(MAX_RANK + 1);
    edit(slots, n, |m| {
        m.left = left;
        m.right = right;
        m.rank = new;
    });
    new != l.rank
}

/// Merges the heaps rooted at `a` and `b` (roots whose parent links the
/// caller sets afterwards) and returns the new root.
fn merge<T: MeldNode>(slots: &mut [T], mut a: u16, mut b: u16) -> u16 {
    if a == NONE {
        return b;
    }
    if b == NONE {
        return a;
    }
    if above(slots, a, b) {
        core::mem::swap(&mut a, &mut b);
    }
    let root = a;
    // Down the right spine of `cur`, `b` the root of what is left to merge.
    let mut cur = a;
    for _ in 0..STEPS {
        let r = link(slots, cur).right;
        if r == NONE || above(slots, r, b) {
            edit(slots, cur, |m| m.right = b);
            edit(slots, b, |m| m.parent = cur);
            if r == NONE {
                break;
            }
            cur = b;
            b = r;
        } else {
            cur = r;
        }
    }
    // Back up to the root: every node on the way got a new right subtree.
    for _ in 0..STEPS {
        fix(slots, cur);
        if cur == root {
            break;
        }
        cur = link(slots, cur).parent;
    }
    root
}

impl Meld {
    /// Where `i` hangs: `Some(parent)` (NONE for the root) when `i` is a
    /// member as far as its links and this heap's root tell.
    #[inline]
    fn place<T: MeldNode>(&self, slots: &[T], i: u16) -> Option<u16> {
        let l = slots.get(usize::from(i))?.meld_link();
        if i == NONE || !l.is_linked() {
            return None;
        }
        let p = l.parent;
        let ok = if p == NONE {
            self.root == i
        } else {
            let pl = link(slots, p);
            pl.left == i || pl.right == i
        };
        ok.then_some(p)
    }

    /// Adds `i`. Returns `false` (and changes nothing) when `i` is out of
    /// range or already in a heap. O(log n).
    pub fn insert<T: MeldNode>(&mut self, slots: &mut [T], i: u16) -> bool {
        if i == NONE || link(slots, i).is_linked() || usize::from(i) >= slots.len() {
            return false;
        }
        edit(slots, i, |m| {
            *m = MeldLink {
                rank: 1,
                ..MeldLink::EMPTY
            }
        });
        self.root = merge(slots, self.root, i);
        edit(slots, self.root, |m| m.parent = NONE);
        true
    }

    /// Removes `i`. Returns `false` (and changes nothing) when `i` is not a
    /// member. O(log n).
    pub fn remove<T: MeldNode>(&mut self, slots: &mut [T], i: u16) -> bool {
        let Some(p) = self.place(slots, i) else {
            return false;
        };
        let l = link(slots, i);
        edit(slots, i, |m| *m = MeldLink::EMPTY);
        for c in [l.left, l.right] {
            edit(slots, c, |m| m.parent = NONE);
        }
        let m = merge(slots, l.left, l.right);
        edit(slots, m, |ml| ml.parent = p);
        if p == NONE {
            self.root = m;
            return true;
        }
        edit(slots, p, |pl| {
            if pl.left == i {
                pl.left = m;
            } else {
                pl.right = m;
            }
        });
        // Up while ranks change: each step's new (or old) rank is one more
        // than the last, so at most MAX_RANK + 1 steps.
        let mut n = p;
        for _ in 0..STEPS {
            if !fix(slots, n) {
                break;
            }
            n = link(slots, n).parent;
            if n == NONE {
                break;
            }
        }
        true
    }

    /// Restores the order after `i`'s key changed. Returns `false` when `i`
    /// is not a member. O(1) when `i` still sits between its parent and its
    /// children, else O(log n).
    #[inline]
    pub fn update<T: MeldNode>(&mut self, slots: &mut [T], i: u16) -> bool {
        let Some(p) = self.place(slots, i) else {
            return false;
        };
        let l = link(slots, i);
        let in_order = (p == NONE || !above(slots, p, i))
            && (l.left == NONE || !above(slots, i, l.left))
            && (l.right == NONE || !above(slots, i, l.right));
        if !in_order {
            self.remove(slots, i);
            self.insert(slots, i);
        }
        true
    }

    /// Removes and returns the member with the smallest key. O(log n).
    pub fn pop<T: MeldNode>(&mut self, slots: &mut [T]) -> Option<u16> {
        let i = self.peek()?;
        self.remove(slots, i).then_some(i)
    }

    /// Checks the whole heap (for tests: O(n)): parent links match child
    /// links, no child's key is below its parent's, ranks are as the links
    /// say and leftist. Returns the number of members.
    pub fn check<T: MeldNode>(&self, slots: &[T]) -> Result<usize, &'static str> {
        if self.root == NONE {
            return Ok(0);
        }
        if link(slots, self.root).parent != NONE {
            return Err("the root has a parent");
        }
        // A walk over the tree along its links: down to the first child,
        // back up from a left child to its right sibling.
        let (mut n, mut down, mut count) = (self.root, true, 0usize);
        let mut prev = NONE;
        for _ in 0..slots.len().saturating_mul(3).saturating_add(3) {
            let l = slots
                .get(usize::from(n))
                .map(|s| *s.meld_link())
                .ok_or("a link out of range")?;
            let next = if down {
                count += 1;
                let (rl, rr) = (rank(slots, l.left), rank(slots, l.right));
                if Some(l.rank) != rr.checked_add(1) || rl < rr {
                    return Err("a rank is wrong or not leftist");
                }
                for c in [l.left, l.right] {
                    if c != NONE && (link(slots, c).parent != n || above(slots, n, c)) {
                        return Err("a child's parent link or key is wrong");
                    }
                }
                if l.left == NONE && l.right != NONE {
                    return Err("a right child without a left one");
                }
                if l.left != NONE {
                    l.left
                } else {
                    down = false;
                    prev = n;
                    l.parent
                }
            } else if prev == l.left && l.right != NONE {
                down = true;
                l.right
            } else {
                prev = n;
                l.parent
            };
            if next == NONE {
                return Ok(count);
            }
            n = next;
        }
        Err("the links loop")
    }
}

impl fmt::Debug for Meld {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Meld").field("root", &self.root).finish()
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for Meld {
    fn format(&self, f: defmt::Formatter) {
        defmt::write!(f, "Meld {{ root: {} }}", self.root)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::vec::Vec;

    #[derive(Clone, Copy, Default, Debug)]
    struct Slot {
        link: MeldLink,
        key: u32,
    }

    impl MeldNode for Slot {
        type Key = u32;
        fn meld_link(&self) -> &MeldLink {
            &self.link
        }
        fn meld_link_mut(&mut self) -> &mut MeldLink {
            &mut self.link
        }
        fn meld_key(&self) -> u32 {
            self.key
        }
    }

    fn slots(keys: &[u32]) -> Vec<Slot> {
        keys.iter()
            .map(|&key| Slot {
                key,
                ..Slot::default()
            })
            .collect()
    }

    #[test]
    fn pops_in_key_order() {
        let mut s = slots(&[50, 10, 70, 30, 20, 60, 40, 0, 35, 5]);
        let mut h = Meld::new();
        for i in 0..s.len() as u16 {
            assert!(h.insert(&mut s, i));
            assert_eq!(h.check(&s), Ok(usize::from(i) + 1));
        }
        let mut out = Vec::new();
        while let Some(i) = h.pop(&mut s) {
            out.push(s[usize::from(i)].key);
            h.check(&s).unwrap();
        }
        assert_eq!(out, [0, 5, 10, 20, 30, 35, 40, 50, 60, 70]);
        assert!(s.iter().all(|s| s.link == MeldLink::EMPTY));
    }

    #[test]
    fn bad_input_is_refused_and_changes_nothing() {
        let mut s = slots(&[3, 2, 1, 0]);
        let (mut a, mut b) = (Meld::new(), Meld::new());
        assert!(!a.remove(&mut s, 0));
        assert!(!a.update(&mut s, 0));
        assert_eq!(a.pop(&mut s), None);
        assert!(a.insert(&mut s, 0));
        assert!(a.insert(&mut s, 1));
        assert!(!a.insert(&mut s, 1), "already a member");
        assert!(!b.insert(&mut s, 0), "a member of another heap");
        assert!(!a.insert(&mut s, 4), "out of range");
        assert!(!a.insert(&mut s, NONE));
        assert!(!a.remove(&mut s, NONE));
        assert!(!a.remove(&mut s, 9));
        assert!(!a.remove(&mut s, 2), "in no heap");
        assert!(b.insert(&mut s, 2));
        assert!(!a.remove(&mut s, 2), "the root of another heap");
        assert!(!a.update(&mut s, 2));
        assert_eq!((a.check(&s), b.check(&s)), (Ok(2), Ok(1)));
        assert_eq!((a.peek(), b.peek()), (Some(1), Some(2)));
    }

    #[test]
    fn update_moves_both_ways_and_is_free_in_place() {
        let mut s = slots(&[10, 20, 30, 40, 50, 60]);
        let mut h = Meld::new();
        for i in 0..6 {
            h.insert(&mut s, i);
        }
        let before: Vec<MeldLink> = s.iter().map(|s| s.link).collect();
        s[0].key = 5;
        assert!(h.update(&mut s, 0));
        let after: Vec<MeldLink> = s.iter().map(|s| s.link).collect();
        assert_eq!(before, after, "still the minimum: nothing moves");
        s[5].key = 1;
        h.update(&mut s, 5);
        assert_eq!(h.peek(), Some(5));
        s[5].key = 1000;
        s[0].key = 999;
        h.update(&mut s, 5);
        h.update(&mut s, 0);
        h.check(&s).unwrap();
        let mut order = Vec::new();
        while let Some(i) = h.pop(&mut s) {
            order.push(i);
        }
        assert_eq!(order, [1, 2, 3, 4, 0, 5]);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "60,000 nodes: minutes under Miri; the small tests cover the paths"
    )]
    fn removal_from_a_deep_heap_of_60000_stays_leftist() {
        // Decreasing keys make every insert a new root with the old heap
        // as its left child: a left spine 60,000 long, right spines of one.
        let n = 60_000u16;
        let mut s: Vec<Slot> = (0..n)
            .map(|i| Slot {
                key: u32::from(n - i),
                ..Slot::default()
            })
            .collect();
        let mut h = Meld::new();
        for i in 0..n {
            assert!(h.insert(&mut s, i));
        }
        // Balanced ones too: every key once, then remove from the middle.
        for i in (0..n).step_by(7) {
            assert!(h.remove(&mut s, i));
        }
        for i in (0..n).step_by(7) {
            s[usize::from(i)].key = u32::from(i) * 31 % 1000;
            assert!(h.insert(&mut s, i));
        }
        for i in (3..n).step_by(5) {
            s[usize::from(i)].key ^= 0x55;
            assert!(h.update(&mut s, i));
        }
        let members = usize::from(n);
        assert_eq!(h.check(&s), Ok(members));
        let mut last = 0;
        while let Some(i) = h.pop(&mut s) {
            let k = s[usize::from(i)].key;
            assert!(k >= last);
            last = k;
        }
    }

    #[test]
    fn corrupted_links_never_panic_or_loop() {
        let mut s = slots(&[6, 5, 4, 3, 2, 1, 0, 7]);
        let mut h = Meld::new();
        for i in 0..8 {
            h.insert(&mut s, i);
        }
        s[0].link = MeldLink {
            left: 3,
            right: 40,
            parent: 0,
            rank: 200,
        };
        s[3].link.parent = 3;
        s[5].link.left = 5;
        for i in 0..10u16 {
            s[usize::from(i % 8)].key = u32::from(i) * 3 % 7;
            h.update(&mut s, i);
            h.remove(&mut s, i);
            h.insert(&mut s, i);
            let _ = h.check(&s);
        }
        s[1].link.rank = 255;
        s[2].link.parent = 1;
        let _ = h.check(&s);
        // Links corrupted into a cycle may hand out a slot again: the
        // caller's loop is bounded, each pop is.
        for _ in 0..100 {
            if h.pop(&mut s).is_none() {
                break;
            }
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u16, bool, u32),
        Remove(u16, bool),
        Update(u16, u32),
        Pop(bool),
    }

    fn op(n: u16) -> impl Strategy<Value = Op> {
        let i = 0..n + 2;
        // Few distinct keys, so ties are common.
        let key = 0u32..20;
        prop_oneof![
            (i.clone(), any::<bool>(), key.clone()).prop_map(|(i, h, k)| Op::Insert(i, h, k)),
            (i.clone(), any::<bool>()).prop_map(|(i, h)| Op::Remove(i, h)),
            (i, key).prop_map(|(i, k)| Op::Update(i, k)),
            any::<bool>().prop_map(Op::Pop),
        ]
    }

    /// Two heaps over one table against a `Vec` of (slot, heap, key): the
    /// members, each root the minimum of its heap, and the links' invariants
    /// after every step.
    fn run(n: u16, ops: &[Op]) {
        let mut s = std::vec![Slot::default(); usize::from(n)];
        let mut heaps = [Meld::new(), Meld::new()];
        let mut model: Vec<(u16, bool, u32)> = Vec::new();
        let heap_of = |m: &[(u16, bool, u32)], i| m.iter().find(|e| e.0 == i).map(|e| e.1);
        for op in ops {
            match *op {
                Op::Insert(i, h, k) => {
                    let ok = i < n && heap_of(&model, i).is_none();
                    if ok {
                        s[usize::from(i)].key = k;
                        model.push((i, h, k));
                    }
                    assert_eq!(heaps[usize::from(h)].insert(&mut s, i), ok);
                }
                Op::Remove(i, h) => {
                    // Only a member's own heap may be asked (see the docs).
                    let ok = heap_of(&model, i) == Some(h);
                    if ok || heap_of(&model, i).is_none() {
                        assert_eq!(heaps[usize::from(h)].remove(&mut s, i), ok);
                        model.retain(|e| e.0 != i);
                    }
                }
                Op::Update(i, k) => {
                    let h = heap_of(&model, i);
                    if let Some(h) = h {
                        s[usize::from(i)].key = k;
                        model.iter_mut().find(|e| e.0 == i).unwrap().2 = k;
                        assert!(heaps[usize::from(h)].update(&mut s, i));
                    } else {
                        assert!(!heaps[0].update(&mut s, i));
                    }
                }
                Op::Pop(h) => {
                    let min = model.iter().filter(|e| e.1 == h).map(|e| e.2).min();
                    let got = heaps[usize::from(h)].pop(&mut s);
                    assert_eq!(got.map(|i| s[usize::from(i)].key), min);
                    if let Some(i) = got {
                        assert_eq!(heap_of(&model, i), Some(h));
                        model.retain(|e| e.0 != i);
                    }
                }
            }
            for h in [false, true] {
                let heap = &heaps[usize::from(h)];
                let members = model.iter().filter(|e| e.1 == h).count();
                assert_eq!(heap.check(&s), Ok(members));
                let min = model.iter().filter(|e| e.1 == h).map(|e| e.2).min();
                assert_eq!(heap.peek().map(|i| s[usize::from(i)].key), min);
            }
            for (i, slot) in s.iter().enumerate() {
                let member = heap_of(&model, i as u16).is_some();
                assert_eq!(slot.link.is_linked(), member);
                if !member {
                    assert_eq!(slot.link, MeldLink::EMPTY);
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: if cfg!(miri) { 4 } else { ProptestConfig::default().cases },
            ..ProptestConfig::default()
        })]

        /// Random operation sequences agree with a `Vec` model.
        #[test]
        #[cfg_attr(miri, ignore = "a model check over hundreds of operations: too slow under Miri")]
        fn random_corruption_never_panics(
            (n, steps) in (1u16..20).prop_flat_map(|n| {
                let link = (0..n + 3, 0..n + 3, 0..n + 3, any::<u8>());
                (Just(n), proptest::collection::vec((op(n), link, any::<bool>()), 1..100))
            })
        ) {
            let mut s = std::vec![Slot::default(); usize::from(n)];
            let mut heaps = [Meld::new(), Meld::new()];
            // Indices past the table stand for NONE and out-of-range links.
            let idx = |x: u16| if x >= n + 2 { NONE } else { x };
            for (op, (l, r, p, rank), corrupt) in steps {
                if corrupt {
                    let i = usize::from(l % n);
                    s[i].link = MeldLink { left: idx(r), right: idx(p), parent: idx(l), rank };
                }
                match op {
                    Op::Insert(i, h, k) => {
                        if let Some(slot) = s.get_mut(usize::from(i)) {
                            slot.key = k;
                        }
                        heaps[usize::from(h)].insert(&mut s, i);
                    }
                    Op::Remove(i, h) => {
                        heaps[usize::from(h)].remove(&mut s, i);
                    }
                    Op::Update(i, k) => {
                        if let Some(slot) = s.get_mut(usize::from(i)) {
                            slot.key = k;
                        }
                        heaps[usize::from(i & 1)].update(&mut s, i);
                    }
                    Op::Pop(h) => {
                        heaps[usize::from(h)].pop(&mut s);
                    }
                }
                for h in &heaps {
                    let _ = h.check(&s);
                }
            }
        }

        #[test]
        #[cfg_attr(miri, ignore = "a model check over hundreds of operations: too slow under Miri")]
        fn random_operations_match_the_model(
            (n, ops) in (1u16..40).prop_flat_map(|n| {
                (Just(n), proptest::collection::vec(op(n), 1..200))
            })
        ) {
            run(n, &ops);
        }
    }
}
