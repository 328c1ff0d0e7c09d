//! A hash index over slot indices, chained through the slots, and the keyed
//! hash that feeds it.
//!
//! # Why
//!
//! Every incoming packet names its RPC by (peer address, RPC id), and every
//! packet for a server port names a socket; looking these up by walking the
//! tables costs O(table) per packet, and the endpoint's cost must not grow
//! with its tables (docs/architecture.md, "Memory and bounds"). A hash
//! index makes a lookup cost the length of one chain. Its memory must come
//! from the caller's tables like everything else, so the index spreads its
//! bucket array over the slots: slot `k` holds the head of bucket `k`
//! ([`IndexLink`]'s `bucket_head`), and each slot holds the next slot of
//! its own chain. With as many buckets as slots ([`Index::new`]), the
//! average chain is at most one element long for keys the hash spreads
//! evenly. The [`Index`] header is two `u16`s.
//!
//! The index stores no keys: [`Index::find`] takes the hash and a predicate
//! that compares the slot's own key fields; a slot in the index remembers
//! its bucket, so [`Index::remove`] needs no hash.
//!
//! # The hash, and how strong it is
//!
//! [`KeyedHash`] is SipHash-1-3 (the variant Rust's standard `HashMap`
//! uses) with a 128-bit key derived from a `u64` seed, meant to be
//! `Config::random_seed`. It buys two things:
//! - For keys nobody chose to collide, chains stay short: with `n` keys in
//!   `n` buckets the average chain has about one element and the longest a
//!   handful (the tests measure it).
//! - A peer picks its RPC ids and could otherwise pick ids that all land in
//!   one bucket, making every lookup walk a long chain. With a keyed hash,
//!   which ids collide depends on the key, which the peer does not know.
//!   This holds only as long as the seed stays secret: the key has at most
//!   the seed's 64 bits of entropy (fewer when the seed is not random, and
//!   none when it is a constant a peer can read), so `Config::new` takes it
//!   from the caller. Whatever a peer sees that depends on the seed (the
//!   first client RPC id, and where each peer's client ids start) comes
//!   from the keyed hash of a label no key of the index has, a one-way
//!   step, and never from the key or the seed directly. SipHash-1-3
//!   is a reduced-round SipHash: no practical key recovery against it is
//!   known, but it is not claimed to be a full-strength PRF. The index
//!   never misbehaves under collisions: they only cost time, bounded by the
//!   number of elements in the index.
//!
//! # Slot reuse
//!
//! A slot carries bucket `k`'s head whether or not the slot is in the
//! index, so a slot must never be reset wholesale (e.g. with a
//! `Slot::EMPTY` literal) while the index is in use: reset its other fields
//! and leave its [`IndexLink`] alone (the same holds for a
//! [`HeapLink`](super::HeapLink)).
//!
//! # Robustness
//!
//! No operation panics: an index out of range, [`NONE`], or an element not
//! in the index makes the operation return `false`/`None` and change
//! nothing; chain walks stop after [`Index::len`] steps even over links the
//! caller corrupted.
//!
//! # Example
//!
//! ```
//! use homa_stack::storage::{Index, IndexLink, IndexNode, KeyedHash};
//! use homa_stack::wire::Ipv4Addr;
//!
//! struct ById;
//! #[derive(Default)]
//! struct Slot { by_id: IndexLink, peer: Option<Ipv4Addr>, id: u64 }
//! impl IndexNode<ById> for Slot {
//!     fn index_link(&self) -> &IndexLink { &self.by_id }
//!     fn index_link_mut(&mut self) -> &mut IndexLink { &mut self.by_id }
//! }
//!
//! let hasher = KeyedHash::new(0x5eed);
//! let mut slots: [Slot; 8] = Default::default();
//! let mut index: Index<ById> = Index::new(&mut slots);
//!
//! let peer = Ipv4Addr::new(10, 0, 0, 2);
//! slots[3].peer = Some(peer);
//! slots[3].id = 42;
//! assert!(index.insert(&mut slots, 3, hasher.rpc_v4(peer, 42)));
//!
//! let h = hasher.rpc_v4(peer, 42);
//! let found = index.find(&slots, h, |s| s.peer == Some(peer) && s.id == 42);
//! assert_eq!(found, Some(3));
//! assert!(index.remove(&mut slots, 3));
//! assert_eq!(index.find(&slots, h, |s| s.id == 42), None);
//! ```

use core::fmt;
use core::marker::PhantomData;

use super::NONE;
use crate::wire::{IpAddr, Ipv4Addr};

/// The per-slot link of one kind of [`Index`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct IndexLink {
    /// First slot of bucket `k` when this is slot `k`; part of the index's
    /// bucket array, whether or not this slot is itself in the index.
    bucket_head: u16,
    /// Next slot in this slot's chain.
    next: u16,
    /// The bucket this slot is in, `NONE` when it is in no index of this
    /// kind: removal needs no hash.
    bucket: u16,
}

impl IndexLink {
    /// A slot in no index, heading an empty bucket.
    pub const EMPTY: IndexLink = IndexLink {
        bucket_head: NONE,
        next: NONE,
        bucket: NONE,
    };

    /// Whether the slot is in an index of this link's kind.
    pub const fn is_linked(&self) -> bool {
        self.bucket != NONE
    }
}

impl Default for IndexLink {
    fn default() -> IndexLink {
        IndexLink::EMPTY
    }
}

/// Access to a slot's [`IndexLink`] for the indexes tagged `Tag`.
pub trait IndexNode<Tag> {
    /// The link used by indexes of this tag.
    fn index_link(&self) -> &IndexLink;
    /// The same, mutably.
    fn index_link_mut(&mut self) -> &mut IndexLink;
}

/// A hash index over slot indices (see the module docs).
pub struct Index<Tag> {
    buckets: u16,
    len: u16,
    _tag: PhantomData<fn() -> Tag>,
}

impl<Tag> Index<Tag> {
    /// An empty index with one bucket per slot (at most `NONE`), resetting
    /// every slot's link of this tag. O(slots), once.
    pub fn new<T: IndexNode<Tag>>(slots: &mut [T]) -> Index<Tag> {
        for s in slots.iter_mut() {
            *s.index_link_mut() = IndexLink::EMPTY;
        }
        Index {
            buckets: u16::try_from(slots.len()).unwrap_or(NONE),
            len: 0,
            _tag: PhantomData,
        }
    }

    /// Number of buckets.
    pub const fn buckets(&self) -> usize {
        self.buckets as usize
    }

    /// Number of elements.
    pub const fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the index has no element.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bucket of `hash`: its high 32 bits scaled to the bucket count
    /// (no division; every bucket count works).
    pub const fn bucket_of(&self, hash: u64) -> u16 {
        // < buckets <= u16::MAX, so the cast keeps every bit.
        (((hash >> 32) * self.buckets as u64) >> 32) as u16
    }

    /// Whether slot `i` is in an index of this tag. O(1).
    pub fn contains<T: IndexNode<Tag>>(&self, slots: &[T], i: u16) -> bool {
        i != NONE
            && slots
                .get(usize::from(i))
                .is_some_and(|s| s.index_link().is_linked())
    }

    /// The slots whose hash falls in `hash`'s bucket, most recently
    /// inserted first. Other keys share buckets: compare the slot's fields.
    pub fn chain<'a, T: IndexNode<Tag>>(&self, slots: &'a [T], hash: u64) -> Chain<'a, T, Tag> {
        let head = slots
            .get(usize::from(self.bucket_of(hash)))
            .map_or(NONE, |s| s.index_link().bucket_head);
        Chain {
            slots,
            next: head,
            left: self.len,
            _tag: PhantomData,
        }
    }

    /// The first slot in `hash`'s chain for which `matches` holds. O(chain).
    pub fn find<T: IndexNode<Tag>>(
        &self,
        slots: &[T],
        hash: u64,
        mut matches: impl FnMut(&T) -> bool,
    ) -> Option<u16> {
        self.chain(slots, hash)
            .find(|&i| slots.get(usize::from(i)).is_some_and(&mut matches))
    }

    /// Adds `i` under `hash`. Returns `false` (and changes nothing) when
    /// `i` is out of range or already in an index of this tag. O(1).
    pub fn insert<T: IndexNode<Tag>>(&mut self, slots: &mut [T], i: u16, hash: u64) -> bool {
        if i == NONE || usize::from(i) >= slots.len() || self.contains(slots, i) {
            return false;
        }
        let b = usize::from(self.bucket_of(hash));
        let Some(head) = slots.get(b).map(|s| s.index_link().bucket_head) else {
            return false;
        };
        if let Some(s) = slots.get_mut(usize::from(i)) {
            let link = s.index_link_mut();
            link.next = head;
            link.bucket = b as u16;
        }
        if let Some(s) = slots.get_mut(b) {
            s.index_link_mut().bucket_head = i;
        }
        self.len = self.len.saturating_add(1);
        true
    }

    /// Removes `i` from its bucket's chain. Returns `false` (and changes
    /// nothing) when `i` is in no index of this tag or not in its chain.
    /// O(chain).
    pub fn remove<T: IndexNode<Tag>>(&mut self, slots: &mut [T], i: u16) -> bool {
        let Some(b) = slots
            .get(usize::from(i))
            .map(|s| usize::from(s.index_link().bucket))
            .filter(|&b| b != usize::from(NONE))
        else {
            return false;
        };
        let mut prev = NONE;
        let mut cur = match slots.get(b) {
            Some(s) => s.index_link().bucket_head,
            None => return false,
        };
        let mut left = self.len;
        while cur != i {
            if cur == NONE || left == 0 {
                return false;
            }
            left -= 1;
            prev = cur;
            cur = match slots.get(usize::from(cur)) {
                Some(s) => s.index_link().next,
                None => return false,
            };
        }
        let next = match slots.get_mut(usize::from(i)) {
            Some(s) => {
                let link = s.index_link_mut();
                let next = link.next;
                link.next = NONE;
                link.bucket = NONE;
                next
            }
            None => return false,
        };
        let before = if prev == NONE { b } else { usize::from(prev) };
        if let Some(s) = slots.get_mut(before) {
            let link = s.index_link_mut();
            if prev == NONE {
                link.bucket_head = next;
            } else {
                link.next = next;
            }
        }
        self.len = self.len.saturating_sub(1);
        true
    }
}

impl<Tag> Clone for Index<Tag> {
    fn clone(&self) -> Index<Tag> {
        *self
    }
}

impl<Tag> Copy for Index<Tag> {}

impl<Tag> PartialEq for Index<Tag> {
    fn eq(&self, other: &Index<Tag>) -> bool {
        (self.buckets, self.len) == (other.buckets, other.len)
    }
}

impl<Tag> Eq for Index<Tag> {}

impl<Tag> fmt::Debug for Index<Tag> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Index")
            .field("buckets", &self.buckets)
            .field("len", &self.len)
            .finish()
    }
}

#[cfg(feature = "defmt")]
impl<Tag> defmt::Format for Index<Tag> {
    fn format(&self, f: defmt::Formatter) {
        defmt::write!(
            f,
            "Index {{ buckets: {}, len: {} }}",
            self.buckets,
            self.len
        )
    }
}

/// Iterator over one bucket's chain ([`Index::chain`]).
pub struct Chain<'a, T, Tag> {
    slots: &'a [T],
    next: u16,
    left: u16,
    _tag: PhantomData<fn() -> Tag>,
}

impl<T: IndexNode<Tag>, Tag> Iterator for Chain<'_, T, Tag> {
    type Item = u16;

    fn next(&mut self) -> Option<u16> {
        if self.left == 0 || self.next == NONE {
            return None;
        }
        let i = self.next;
        self.next = self.slots.get(usize::from(i))?.index_link().next;
        self.left -= 1;
        Some(i)
    }
}

/// SipHash-1-3 keyed from a seed, over the keys the endpoint looks up (see
/// the module docs for what it protects against and what it does not).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct KeyedHash {
    k0: u64,
    k1: u64,
}

/// One step of splitmix64: spreads a seed over 64 bits, a bijection.
const fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

// Inlined on hosts (speed); on the firmware one out-of-line round takes
// less code than five inlined copies of it in every hash.
#[cfg_attr(not(target_os = "none"), inline(always))]
#[cfg_attr(target_os = "none", inline(never))]
fn sip_round(v: &mut [u64; 4]) {
    v[0] = v[0].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(13) ^ v[0];
    v[0] = v[0].rotate_left(32);
    v[2] = v[2].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(16) ^ v[2];
    v[0] = v[0].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(21) ^ v[0];
    v[2] = v[2].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(17) ^ v[2];
    v[2] = v[2].rotate_left(32);
}

/// SipHash-`C`-`D` of the message made of `words` (little-endian) then the
/// `len % 8` bytes of `tail`, `len` bytes in all.
#[inline(always)]
fn siphash<const C: usize, const D: usize>(
    k0: u64,
    k1: u64,
    words: &[u64],
    tail: u64,
    len: u64,
) -> u64 {
    let mut v = [
        k0 ^ 0x736f_6d65_7073_6575,
        k1 ^ 0x646f_7261_6e64_6f6d,
        k0 ^ 0x6c79_6765_6e65_7261,
        k1 ^ 0x7465_6462_7974_6573,
    ];
    for &m in words {
        v[3] ^= m;
        for _ in 0..C {
            sip_round(&mut v);
        }
        v[0] ^= m;
    }
    let b = (len << 56) | tail;
    v[3] ^= b;
    for _ in 0..C {
        sip_round(&mut v);
    }
    v[0] ^= b;
    v[2] ^= 0xff;
    for _ in 0..D {
        sip_round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

impl KeyedHash {
    /// A hash keyed from `seed` (meant to be `Config::random_seed`).
    pub const fn new(seed: u64) -> KeyedHash {
        let k0 = splitmix64(seed);
        KeyedHash {
            k0,
            k1: splitmix64(k0 ^ seed.rotate_left(32)),
        }
    }

    /// A value derived from the key one way, for what peers may see: the
    /// hash of the 8-byte message `label`, a length no key of the index has.
    /// Finding the key from outputs is no easier than trying every seed
    /// (the reduced rounds weaken SipHash against distinguishers, not
    /// against recovering the key from an output).
    pub fn derive(&self, label: u64) -> u64 {
        self.hash(&[label], 0, 8)
    }

    fn hash(&self, words: &[u64], tail: u64, len: u64) -> u64 {
        siphash::<1, 3>(self.k0, self.k1, words, tail, len)
    }

    /// Hash of an RPC key over IPv4: the id's 8 bytes then the address's 4.
    pub fn rpc_v4(&self, addr: Ipv4Addr, id: u64) -> u64 {
        self.hash(&[id], u64::from(u32::from_le_bytes(addr.octets())), 12)
    }

    /// Hash of an RPC key over IPv6: the address's 16 bytes then the id's 8.
    pub fn rpc_v6(&self, addr: [u8; 16], id: u64) -> u64 {
        let (hi, lo) = split16(addr);
        self.hash(&[hi, lo, id], 0, 24)
    }

    /// Hash of an RPC key of either family.
    pub fn rpc(&self, addr: IpAddr, id: u64) -> u64 {
        match addr {
            IpAddr::V4(a) => self.rpc_v4(a, id),
            IpAddr::V6(a) => self.rpc_v6(a.octets(), id),
        }
    }

    /// Hash of a peer address of either family.
    pub fn addr(&self, addr: IpAddr) -> u64 {
        match addr {
            IpAddr::V4(a) => self.addr_v4(a),
            IpAddr::V6(a) => self.addr_v6(a.octets()),
        }
    }

    /// Hash of an IPv4 address (a peer): its 4 bytes.
    pub fn addr_v4(&self, addr: Ipv4Addr) -> u64 {
        self.hash(&[], u64::from(u32::from_le_bytes(addr.octets())), 4)
    }

    /// Hash of an IPv6 address (a peer): its 16 bytes.
    pub fn addr_v6(&self, addr: [u8; 16]) -> u64 {
        let (hi, lo) = split16(addr);
        self.hash(&[hi, lo], 0, 16)
    }

    /// Hash of a port (a socket). Not SipHash: sockets are made only by the
    /// local application, so no peer can choose ports that collide, and
    /// every packet looks one up; a keyed multiply (Fibonacci hashing, whose
    /// high bits pick the bucket) spreads them at a fraction of the cost.
    pub fn port(&self, port: u16) -> u64 {
        (u64::from(port) ^ self.k0).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ self.k1
    }
}

/// The two little-endian words of 16 bytes.
fn split16(a: [u8; 16]) -> (u64, u64) {
    let [b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15] = a;
    (
        u64::from_le_bytes([b0, b1, b2, b3, b4, b5, b6, b7]),
        u64::from_le_bytes([b8, b9, b10, b11, b12, b13, b14, b15]),
    )
}

impl fmt::Debug for KeyedHash {
    // The key is a secret: never print it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeyedHash { .. }")
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for KeyedHash {
    fn format(&self, f: defmt::Formatter) {
        defmt::write!(f, "KeyedHash {{ .. }}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::list::{List, ListLink, ListNode};
    use proptest::prelude::*;
    use std::collections::HashMap;
    use std::vec::Vec;

    struct ById;
    struct ByPort;
    const LIVE: u8 = 0;

    #[derive(Clone, Copy, Default, Debug)]
    struct Slot {
        by_id: IndexLink,
        by_port: IndexLink,
        live: ListLink,
        key: u64,
        port: u16,
    }

    impl IndexNode<ById> for Slot {
        fn index_link(&self) -> &IndexLink {
            &self.by_id
        }
        fn index_link_mut(&mut self) -> &mut IndexLink {
            &mut self.by_id
        }
    }

    impl IndexNode<ByPort> for Slot {
        fn index_link(&self) -> &IndexLink {
            &self.by_port
        }
        fn index_link_mut(&mut self) -> &mut IndexLink {
            &mut self.by_port
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

    /// SipHash over raw bytes through the same word path, for the tests.
    fn sip_bytes<const C: usize, const D: usize>(k0: u64, k1: u64, bytes: &[u8]) -> u64 {
        let chunks = bytes.chunks_exact(8);
        let rest = chunks.remainder();
        let words: Vec<u64> = chunks
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let mut tail = [0u8; 8];
        tail[..rest.len()].copy_from_slice(rest);
        siphash::<C, D>(k0, k1, &words, u64::from_le_bytes(tail), bytes.len() as u64)
    }

    #[test]
    fn siphash_2_4_matches_the_reference_vector() {
        // The SipHash paper's vector: key 00..0f, message 00..0e.
        let k0 = u64::from_le_bytes([0, 1, 2, 3, 4, 5, 6, 7]);
        let k1 = u64::from_le_bytes([8, 9, 10, 11, 12, 13, 14, 15]);
        let msg: Vec<u8> = (0..15).collect();
        assert_eq!(sip_bytes::<2, 4>(k0, k1, &msg), 0xa129_ca61_49be_45e5);
    }

    #[test]
    #[allow(deprecated)]
    fn siphash_2_4_matches_std_for_every_length() {
        use std::hash::{Hasher, SipHasher};
        let (k0, k1) = (0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210);
        let msg: Vec<u8> = (0..40u8).map(|b| b.wrapping_mul(37)).collect();
        for len in 0..=msg.len() {
            let mut std_hasher = SipHasher::new_with_keys(k0, k1);
            std_hasher.write(&msg[..len]);
            assert_eq!(
                sip_bytes::<2, 4>(k0, k1, &msg[..len]),
                std_hasher.finish(),
                "len {len}"
            );
        }
    }

    #[test]
    fn key_hashes_are_siphash_1_3_of_their_bytes() {
        let h = KeyedHash::new(77);
        let addr = Ipv4Addr::new(10, 1, 2, 3);
        let id = 0x1122_3344_5566_7788u64;
        let v6: [u8; 16] = core::array::from_fn(|i| i as u8 * 3);
        let bytes = |parts: &[&[u8]]| parts.concat();
        let r = |b: &[u8]| sip_bytes::<1, 3>(h.k0, h.k1, b);
        assert_eq!(
            h.rpc_v4(addr, id),
            r(&bytes(&[&id.to_le_bytes(), &addr.octets()]))
        );
        assert_eq!(h.rpc_v6(v6, id), r(&bytes(&[&v6, &id.to_le_bytes()])));
        assert_eq!(h.addr_v4(addr), r(&addr.octets()));
        assert_eq!(h.addr_v6(v6), r(&v6));
        // Ports in a row land in different buckets of a small index.
        let idx: Index<()> = Index {
            buckets: 16,
            len: 0,
            _tag: core::marker::PhantomData,
        };
        let buckets: std::collections::BTreeSet<u16> =
            (32768..32784).map(|p| idx.bucket_of(h.port(p))).collect();
        assert!(buckets.len() >= 8, "{buckets:?}");
    }

    #[test]
    fn the_seed_changes_which_keys_collide() {
        let (a, b) = (KeyedHash::new(1), KeyedHash::new(2));
        let peer = Ipv4Addr::new(10, 0, 0, 9);
        let differ = (0..64u64)
            .filter(|&id| a.rpc_v4(peer, id) != b.rpc_v4(peer, id))
            .count();
        assert_eq!(differ, 64);
        assert_eq!(format!("{a:?}"), "KeyedHash { .. }");
        assert_ne!(KeyedHash::new(0), KeyedHash::new(1));
    }

    #[test]
    fn chains_stay_short_for_1000_sequential_ids_in_1000_buckets() {
        // Sequential ids from one peer, as a client allocates them.
        let hasher = KeyedHash::new(0x1234_5678_9abc_def0);
        let mut slots = std::vec![Slot::default(); 1000];
        let mut index: Index<ById> = Index::new(&mut slots);
        let peer = Ipv4Addr::new(192, 168, 1, 7);
        for i in 0..1000u16 {
            let id = 2 * u64::from(i) + 1000;
            slots[usize::from(i)].key = id;
            assert!(index.insert(&mut slots, i, hasher.rpc_v4(peer, id)));
        }
        assert_eq!(index.len(), 1000);
        let mut per_bucket = std::vec![0usize; 1000];
        for s in &slots {
            let h = hasher.rpc_v4(peer, s.key);
            per_bucket[usize::from(index.bucket_of(h))] += 1;
        }
        let longest = *per_bucket.iter().max().unwrap();
        let used = per_bucket.iter().filter(|&&n| n > 0).count();
        // Balls into bins: about 1 - 1/e of the buckets used, the longest
        // chain around 5; a constant multiplier would put them all in a few.
        assert!(longest <= 8, "longest chain {longest}");
        assert!(used >= 550, "{used} buckets used");
        for (i, s) in slots.iter().enumerate() {
            let h = hasher.rpc_v4(peer, s.key);
            assert_eq!(index.find(&slots, h, |t| t.key == s.key), Some(i as u16));
            assert!(index.chain(&slots, h).count() <= longest);
        }
        for i in 0..1000u16 {
            assert!(index.remove(&mut slots, i));
        }
        assert!(index.is_empty());
        assert!(slots.iter().all(|s| s.by_id == IndexLink::EMPTY));
    }

    #[test]
    fn absent_and_out_of_range() {
        let mut slots = [Slot::default(); 4];
        let mut index: Index<ById> = Index::new(&mut slots);
        assert_eq!(index.buckets(), 4);
        assert!(!index.remove(&mut slots, 1));
        assert!(index.insert(&mut slots, 1, 5 << 32));
        assert!(!index.insert(&mut slots, 1, 5 << 32), "duplicate");
        assert!(!index.insert(&mut slots, 4, 0), "out of range");
        assert!(!index.insert(&mut slots, NONE, 0));
        assert!(!index.remove(&mut slots, 4));
        assert!(!index.remove(&mut slots, 0), "absent");
        assert!(index.contains(&slots, 1));
        assert_eq!(index.find(&slots, 5 << 32, |_| true), Some(1));
        assert!(index.remove(&mut slots, 1));
        assert!(!index.remove(&mut slots, 1), "twice");
        assert_eq!(index.find(&slots, 5 << 32, |_| true), None);

        let mut none: [Slot; 0] = [];
        let mut empty: Index<ById> = Index::new(&mut none);
        assert!(!empty.insert(&mut none, 0, 0));
        assert_eq!(empty.find(&none, 123, |_| true), None);
    }

    #[test]
    fn two_indexes_and_a_list_on_one_slot_type() {
        let hasher = KeyedHash::new(9);
        let mut slots = [Slot::default(); 6];
        let mut by_id: Index<ById> = Index::new(&mut slots);
        let mut by_port: Index<ByPort> = Index::new(&mut slots);
        let mut live = List::new(LIVE);
        for i in 0..6u16 {
            let s = &mut slots[usize::from(i)];
            s.key = u64::from(i) * 100;
            s.port = 4000 + i % 3;
            let (k, p) = (s.key, s.port);
            by_id.insert(&mut slots, i, hasher.rpc_v6([1; 16], k));
            by_port.insert(&mut slots, i, hasher.port(p));
            live.push_back(&mut slots, i);
        }
        let on_4001: Vec<u16> = by_port
            .chain(&slots, hasher.port(4001))
            .filter(|&i| slots[usize::from(i)].port == 4001)
            .collect();
        assert_eq!(on_4001, [4, 1], "most recent first");
        assert!(by_id.remove(&mut slots, 4));
        assert_eq!(
            by_port.find(&slots, hasher.port(4001), |s| s.port == 4001),
            Some(4)
        );
        assert_eq!(
            by_id.find(&slots, hasher.rpc_v6([1; 16], 400), |s| s.key == 400),
            None
        );
        assert!(live.iter(&slots).eq(0..6));
    }

    #[test]
    fn corrupted_links_never_panic_or_loop() {
        let mut slots = [Slot::default(); 4];
        let mut index: Index<ById> = Index::new(&mut slots);
        for i in 0..4u16 {
            index.insert(&mut slots, i, 0);
        }
        slots[0].by_id.next = 3; // a cycle: 3 -> 2 -> 1 -> 0 -> 3
        slots[1].by_id.bucket_head = 99;
        assert_eq!(index.chain(&slots, 0).count(), 4);
        assert_eq!(index.find(&slots, 0, |s| s.key == 1), None);
        slots[2].by_id.bucket = 77;
        for i in 0..5u16 {
            index.remove(&mut slots, i);
        }
        let _ = index.chain(&slots, u64::MAX).count();
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u16, u64),
        Remove(u16),
        Find(u64),
    }

    fn op(n: u16) -> impl Strategy<Value = Op> {
        let i = 0..n + 2;
        // Few distinct keys, so chains and duplicates are common.
        let key = 0u64..30;
        prop_oneof![
            (i.clone(), key.clone()).prop_map(|(i, k)| Op::Insert(i, k)),
            i.prop_map(Op::Remove),
            key.prop_map(Op::Find),
        ]
    }

    /// Against a `HashMap<slot, key>`: every key finds exactly the slots
    /// holding it, after every step. Index buckets are few, so chains mix
    /// keys.
    fn run(n: u16, seed: u64, ops: &[Op]) {
        let hasher = KeyedHash::new(seed);
        let h = |k: u64| hasher.rpc_v4(Ipv4Addr::new(10, 0, 0, 1), k);
        let mut slots = std::vec![Slot::default(); usize::from(n)];
        let mut index: Index<ById> = Index::new(&mut slots);
        let mut model: HashMap<u16, u64> = HashMap::new();
        for op in ops {
            match *op {
                Op::Insert(i, k) => {
                    let ok = i < n && !model.contains_key(&i);
                    if ok {
                        slots[usize::from(i)].key = k;
                    }
                    assert_eq!(index.insert(&mut slots, i, h(k)), ok);
                    if ok {
                        model.insert(i, k);
                    }
                }
                Op::Remove(i) => {
                    let k = model.get(&i).copied();
                    assert_eq!(index.remove(&mut slots, i), k.is_some());
                    model.remove(&i);
                }
                Op::Find(k) => {
                    let found = index.find(&slots, h(k), |s| s.key == k);
                    match found {
                        Some(i) => assert_eq!(model.get(&i), Some(&k)),
                        None => assert!(!model.values().any(|&v| v == k)),
                    }
                }
            }
            assert_eq!(index.len(), model.len());
            for i in 0..n + 2 {
                assert_eq!(index.contains(&slots, i), model.contains_key(&i));
            }
            for k in 0..30u64 {
                let mut got: Vec<u16> = index
                    .chain(&slots, h(k))
                    .filter(|&i| slots[usize::from(i)].key == k)
                    .collect();
                let mut want: Vec<u16> = model
                    .iter()
                    .filter(|(_, &v)| v == k)
                    .map(|(&i, _)| i)
                    .collect();
                got.sort();
                want.sort();
                assert_eq!(got, want, "key {k}");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: if cfg!(miri) { 4 } else { ProptestConfig::default().cases },
            ..ProptestConfig::default()
        })]

        /// Random operation sequences agree with a `HashMap` model.
        #[test]
        #[cfg_attr(miri, ignore)]
        fn random_operations_match_the_model(
            (n, seed, ops) in (1u16..40).prop_flat_map(|n| {
                (Just(n), any::<u64>(), proptest::collection::vec(op(n), 1..200))
            })
        ) {
            run(n, seed, &ops);
        }
    }
}
