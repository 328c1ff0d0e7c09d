//! The receiver's grant scheduler (docs/protocol.md 4.4).
//!
//! Homa's receiver decides who may send: it grants bytes to at most
//! `max_overcommit` incoming messages at a time, those with the fewest bytes
//! still to receive first (ties: the oldest), and the best message of each
//! peer before a second one of any peer, so a peer with many messages cannot
//! keep the others waiting (the endpoint's queues keep each peer's
//! candidates in a heap of their own for this). Each active message is kept a
//! window ahead of what it has received, and the sum of granted-but-missing
//! bytes over all messages never exceeds `max_incoming`. The rank of a message
//! picks the priority its scheduled packets use, so the shortest message's
//! packets overtake the others in the switches. A small share of grants goes
//! to the oldest waiting message so long messages cannot starve.
//!
//! This module is pure: the endpoint describes its grantable messages as
//! [`Candidate`]s and applies the [`Decision`]s it gets back, so the scheduling
//! rules can be tested against docs/protocol.md's worked examples directly.

use crate::config::Config;
use crate::time::{Duration, Instant};
use heapless::Vec;

use super::timers::Timer;
use crate::phy::TxToken;
use crate::wire::EthernetAddress;

/// The hard cap on messages granted to at once (Linux `HOMA_MAX_GRANTS`).
pub const MAX_ACTIVE: usize = 8;

/// An incoming message that could use more grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// Opaque key of the message (the endpoint's RPC slot).
    pub key: u16,
    /// Opaque key of the sending peer, to spread grants across peers.
    pub peer: u16,
    /// Message length in bytes.
    pub length: u32,
    /// Bytes received so far.
    pub received: u32,
    /// Offset granted so far (unscheduled bytes included).
    pub granted: u32,
    /// Arrival order of the message (smaller is older).
    pub birth: u64,
}

impl Candidate {
    /// Bytes not yet received: the SRPT ranking key.
    pub fn remaining(&self) -> u32 {
        self.length.saturating_sub(self.received)
    }
    /// Granted bytes that have not arrived yet.
    pub fn outstanding(&self) -> u32 {
        self.granted.saturating_sub(self.received)
    }
    // Out of line on the firmware (smaller there); the compiler's choice on hosts.
    #[cfg_attr(target_os = "none", inline(never))]
    fn outranks(&self, other: &Candidate) -> bool {
        (self.remaining(), self.birth) < (other.remaining(), other.birth)
    }
}

/// A grant to send: raise the message's offset to `granted`, at `priority`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// The message's key.
    pub key: u16,
    /// The new granted offset.
    pub granted: u32,
    /// Priority for the message's scheduled packets.
    pub priority: u8,
}

/// Picks the active set: at most `max_overcommit` candidates, best ranked
/// first, at most one per peer while other peers wait, then the best of the
/// rest. Returned in rank order.
pub fn active_set(
    candidates: impl Iterator<Item = Candidate> + Clone,
    max_overcommit: u8,
) -> Vec<Candidate, MAX_ACTIVE> {
    let k = usize::from(max_overcommit).clamp(1, MAX_ACTIVE);
    // Pass 1: the best message of each peer, so one chatty peer cannot hold
    // every slot (Linux picks its eviction victim from a peer with several).
    let mut active: Vec<Candidate, MAX_ACTIVE> = Vec::new();
    for c in candidates.clone().filter(grantable) {
        match active.iter().position(|a| a.peer == c.peer) {
            Some(i) if c.outranks(&active[i]) => {
                remove_at(&mut active, i);
            }
            Some(_) => continue,
            None => {}
        }
        insert_ranked(&mut active, c, k);
    }
    // Pass 2: fill the free slots with the best messages not yet chosen.
    let free = k - active.len();
    if free > 0 {
        let mut rest: Vec<Candidate, MAX_ACTIVE> = Vec::new();
        for c in candidates.filter(grantable) {
            if !active.iter().any(|a| a.key == c.key) {
                insert_ranked(&mut rest, c, free);
            }
        }
        for c in rest {
            insert_ranked(&mut active, c, k);
        }
    }
    active
}

fn grantable(c: &Candidate) -> bool {
    c.remaining() > 0 && c.granted < c.length
}

/// Inserts `c` in rank order into `list`, keeping at most `k` entries.
fn insert_ranked(list: &mut Vec<Candidate, MAX_ACTIVE>, c: Candidate, k: usize) {
    let pos = list
        .iter()
        .position(|a| c.outranks(a))
        .unwrap_or(list.len());
    if pos >= k {
        return;
    }
    if list.len() == k {
        list.pop();
    }
    // Cannot fail: the length is below k <= MAX_ACTIVE here. Appended, then
    // swapped down to `pos`: `Vec::insert` would link a `memmove` (about
    // 1.5 KiB of flash on a Cortex-M) to move at most 7 entries.
    if list.push(c).is_ok() {
        for j in (pos + 1..list.len()).rev() {
            swap_next(list, j - 1);
        }
    }
}

/// Removes entry `i`, keeping the order of the rest (as `Vec::remove`,
/// without its `memmove`, see [`insert_ranked`]).
fn remove_at(list: &mut Vec<Candidate, MAX_ACTIVE>, i: usize) {
    for j in i + 1..list.len() {
        swap_next(list, j - 1);
    }
    list.pop();
}

/// Swaps entries `j` and `j + 1` by copies (`slice::swap` may overlap, so
/// it moves through `memmove` too).
fn swap_next(list: &mut [Candidate], j: usize) {
    if let [a, b, ..] = list.get_mut(j..).unwrap_or_default() {
        core::mem::swap(a, b);
    }
}

/// The grant window for `num_active` active messages.
pub fn window(config: &Config, num_active: usize) -> u32 {
    if config.window != 0 {
        config.window
    } else {
        config.max_incoming / (num_active as u32 + 1)
    }
}

/// The scheduled priority of the message at `rank` (0 = best) among
/// `num_active`: `max_sched_prio - rank`, shifted down when few messages are
/// active so they use the lowest levels (docs/protocol.md 4.4).
pub fn priority(max_sched_prio: u8, rank: usize, num_active: usize) -> u8 {
    let mut p = i32::from(max_sched_prio) - rank as i32;
    let extra = i32::from(max_sched_prio) + 1 - num_active as i32;
    if extra > 0 {
        p -= extra;
    }
    p.max(0) as u8
}

/// Grants for the active set, in rank order. `total_incoming` is the sum of
/// granted-but-not-received bytes over *all* incoming messages; grants are
/// capped so it never passes `max_incoming`. A message that gets nothing for
/// lack of headroom is served first when headroom returns, because ranks are
/// recomputed every time.
pub fn decide(
    config: &Config,
    active: &[Candidate],
    mut total_incoming: u32,
) -> Vec<Decision, MAX_ACTIVE> {
    let mut out = Vec::new();
    let win = window(config, active.len());
    let max_sched = config.max_sched_prio();
    for (rank, c) in active.iter().enumerate() {
        let target = c.received.saturating_add(win).min(c.length);
        if target <= c.granted {
            continue;
        }
        let headroom = config.max_incoming.saturating_sub(total_incoming);
        let delta = (target - c.granted).min(headroom);
        if delta == 0 {
            continue;
        }
        total_incoming += delta;
        let _ = out.push(Decision {
            key: c.key,
            granted: c.granted + delta,
            priority: priority(max_sched, rank, active.len()),
        });
    }
    out
}

/// Whether FIFO grants are on: a share of the link and an increment.
fn fifo_grants_on(config: &Config) -> bool {
    config.grant_fifo_fraction != 0 && config.fifo_grant_increment != 0
}

/// How often the oldest message gets a FIFO grant: the time to send
/// `fifo_grant_increment` bytes at `grant_fifo_fraction` of the link rate.
/// `None` when FIFO grants are off.
pub fn fifo_interval(config: &Config, link_mbps: u32) -> Option<Duration> {
    if !fifo_grants_on(config) {
        return None;
    }
    let fraction = config.grant_fifo_fraction.min(500);
    // bits / (Mbit/s * fraction / 1000) in ns = bits * 1e6 / (mbps * fraction).
    let bits = u64::from(config.fifo_grant_increment) * 8;
    let rate = u64::from(link_mbps.max(1)) * u64::from(fraction);
    Some(Duration::from_nanos(div_u64(bits * 1_000_000, rate)))
}

/// `n / d` rounded down, `0` for `d == 0`. A 64-bit `/` is a library call
/// of about a kilobyte of flash on a 32-bit MCU, so there it is
/// [`shift_subtract`]; on a 64-bit host it is the instruction (the endpoint
/// asks once per poll that is due a FIFO grant).
fn div_u64(n: u64, d: u64) -> u64 {
    if cfg!(target_pointer_width = "64") {
        n.checked_div(d).unwrap_or(0)
    } else {
        shift_subtract(n, d)
    }
}

/// `n / d` rounded down (`0` for `d == 0`) by shift and subtract, one
/// quotient bit per step.
fn shift_subtract(n: u64, d: u64) -> u64 {
    if d == 0 {
        return 0;
    }
    let (mut q, mut r) = (0u64, 0u64);
    for bit in (0..64).rev() {
        // r < d before the shift, so r * 2 + 1 < 2 * d: when the shift
        // carries out of 64 bits the true remainder is past d.
        let carry = r >> 63;
        r = (r << 1) | ((n >> bit) & 1);
        if carry != 0 || r >= d {
            r = r.wrapping_sub(d);
            q |= 1 << bit;
        }
    }
    q
}

/// The FIFO grant due at `now`, if any: the oldest candidate that is not in
/// the active set (active ones are granted anyway) gets `fifo_grant_increment`
/// more bytes at priority `num_priorities - 2`.
pub fn fifo_decision(
    config: &Config,
    candidates: impl Iterator<Item = Candidate>,
    active: &[Candidate],
) -> Option<Decision> {
    let oldest = candidates
        .filter(|c| c.granted < c.length && !active.iter().any(|a| a.key == c.key))
        .min_by_key(|c| c.birth)?;
    Some(Decision {
        key: oldest.key,
        granted: oldest
            .granted
            .saturating_add(config.fifo_grant_increment)
            .min(oldest.length),
        priority: config.num_priorities.saturating_sub(2),
    })
}

/// Candidates the scheduler looks at: the best of the grant heap, and the
/// best of each of the `max_overcommit` peers whose best is best (each
/// peer's own heap has its best at the root; those roots are in a heap of
/// their own). Pass 1 of [`active_set`] so sees the best message of every peer it
/// can choose, however many better messages another peer has; pass 2 fills
/// free slots from the global best, which holds every message it can take.
const CONSIDERED: usize = 2 * MAX_ACTIVE;

/// Applying the scheduler: the endpoint's grantable messages in, GRANTs out.
impl<'a> super::Endpoint<'a> {
    /// Runs the SRPT scheduler over the best grant candidates and marks the
    /// ones whose grant grew. O(log n) per grant; no walk over the RPCs.
    pub(super) fn schedule_grants(&mut self) {
        let active = active_set(self.grant_candidates(), self.config.max_overcommit);
        let total = u32::try_from(self.incoming).unwrap_or(u32::MAX);
        for d in decide(&self.config, &active, total) {
            self.apply_grant(d);
            self.stats.grants_srpt += 1;
        }
    }

    /// Runs the FIFO grant clock at an egress. It runs only while some
    /// message awaits grants: the first FIFO grant is due one interval
    /// after one starts waiting, and an endpoint with nothing to grant has
    /// no FIFO deadline, so `poll_at` does not wake it for one.
    #[inline]
    pub(super) fn fifo_clock(&mut self, now: Instant) {
        // The common case, nothing to grant, without the frame of the rest.
        if self.grant.is_empty() {
            self.timers.stop(Timer::FifoGrant);
        } else {
            self.fifo_clock_run(now);
        }
    }

    fn fifo_clock_run(&mut self, now: Instant) {
        match self.timers.get(Timer::FifoGrant) {
            Some(t) if now < t => return,
            Some(_) => self.fifo_grant(),
            // A message started waiting: the clock starts.
            None => {}
        }
        let next = fifo_interval(&self.config, self.link_mbps).map(|d| now + d);
        self.timers.update(Timer::FifoGrant, next);
    }

    /// Gives the oldest waiting message its FIFO share.
    pub(super) fn fifo_grant(&mut self) {
        if self.grant.is_empty() || !fifo_grants_on(&self.config) {
            return;
        }
        let active = active_set(self.grant_candidates(), self.config.max_overcommit);
        // The oldest candidates: at most MAX_ACTIVE of them are active, so
        // one more is enough to find the oldest that is not.
        let mut oldest: Vec<u16, { MAX_ACTIVE + 1 }> = Vec::new();
        self.grant_fifo
            .smallest(&self.rpcs[..], MAX_ACTIVE + 1, &mut oldest);
        let candidates = oldest.iter().filter_map(|&i| self.candidate(i));
        if let Some(d) = fifo_decision(&self.config, candidates, &active) {
            self.apply_grant(d);
            self.stats.grants_fifo += 1;
        }
    }

    /// The best-ranked grant candidates (fewest bytes to receive first),
    /// then the best of each of the best peers not among them, each once.
    pub(super) fn grant_candidates(&self) -> impl Iterator<Item = Candidate> + Clone + '_ {
        let mut best: Vec<u16, { CONSIDERED + MAX_ACTIVE }> = Vec::new();
        self.grant.smallest(&self.rpcs[..], CONSIDERED, &mut best);
        // With every candidate taken, so is every peer's best.
        if self.grant.len() > CONSIDERED {
            let mut roots: Vec<u16, MAX_ACTIVE> = Vec::new();
            let k = usize::from(self.config.max_overcommit);
            self.grant_best.smallest(&self.rpcs[..], k, &mut roots);
            for r in roots {
                if !best.contains(&r) {
                    let _ = best.push(r);
                }
            }
        }
        best.into_iter().filter_map(|i| self.candidate(i))
    }

    /// The RPC in slot `i` as the scheduler sees it.
    fn candidate(&self, i: u16) -> Option<Candidate> {
        let r = self.rpc_at(usize::from(i))?;
        let m = r.incoming()?;
        Some(Candidate {
            key: i,
            peer: r.peer(),
            length: m.length(),
            received: m.received(),
            granted: m.granted(),
            birth: r.birth(),
        })
    }

    pub(super) fn apply_grant(&mut self, d: Decision) {
        let slot = usize::from(d.key);
        let raises = self
            .rpc_at(slot)
            .and_then(|r| r.incoming())
            .is_some_and(|m| d.granted > m.granted());
        if !raises {
            return;
        }
        // The scheduler's own grant is no reason to run it again.
        let dirty = self.grants_dirty;
        self.with_rpc(slot, |r, _| r.grant(d.granted, d.priority));
        self.grants_dirty = dirty;
        self.control_due(slot);
    }

    pub(super) fn emit_grant<T: TxToken>(
        &mut self,
        now: Instant,
        tx: T,
        mac: EthernetAddress,
        slot: usize,
    ) {
        let Some(mut r) = self.steady(slot) else {
            return;
        };
        let Some(repr) = r.take_grant() else { return };
        let (dst, local) = (r.peer_addr(), r.local());
        self.emit_control(now, tx, mac, dst, local, &repr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{EthernetAddress, Ipv4Addr};

    fn config() -> Config {
        Config::new(
            Ipv4Addr::new(10, 0, 0, 1),
            EthernetAddress([2, 0, 0, 0, 0, 1]),
            1,
        )
    }

    fn cand(
        key: u16,
        peer: u16,
        length: u32,
        received: u32,
        granted: u32,
        birth: u64,
    ) -> Candidate {
        Candidate {
            key,
            peer,
            length,
            received,
            granted,
            birth,
        }
    }

    #[test]
    fn first_packet_of_1mb_message_is_granted_to_201424() {
        // docs/protocol.md 4.4: 1424 bytes of a 1 MB message arrived, 40000 were
        // unscheduled, nothing else active: window 200000, GRANT 201424.
        let c = config();
        let m = cand(1, 1, 1_000_000, 1424, 40_000, 0);
        let active = active_set([m].into_iter(), c.max_overcommit);
        let total_incoming = m.outstanding();
        assert_eq!(total_incoming, 38_576);
        let d = decide(&c, &active, total_incoming);
        assert_eq!(
            d.as_slice(),
            &[Decision {
                key: 1,
                granted: 201_424,
                priority: 0
            }]
        );
    }

    #[test]
    fn four_active_messages_get_priorities_3_2_1_0() {
        let c = config();
        let ms = [
            cand(10, 1, 400_000, 0, 0, 3),
            cand(11, 2, 100_000, 0, 0, 2),
            cand(12, 3, 300_000, 0, 0, 1),
            cand(13, 4, 200_000, 0, 0, 0),
        ];
        let active = active_set(ms.into_iter(), c.max_overcommit);
        let keys: std::vec::Vec<u16> = active.iter().map(|a| a.key).collect();
        assert_eq!(keys, [11, 13, 12, 10]);
        let d = decide(&c, &active, 0);
        let prios: std::vec::Vec<u8> = d.iter().map(|d| d.priority).collect();
        assert_eq!(prios, [3, 2, 1, 0]);
    }

    #[test]
    fn priority_uses_lowest_levels_when_few_are_active() {
        assert_eq!(priority(3, 0, 1), 0);
        assert_eq!(priority(3, 0, 2), 1);
        assert_eq!(priority(3, 1, 2), 0);
        assert_eq!(priority(3, 0, 8), 3);
        assert_eq!(priority(3, 7, 8), 0);
    }

    #[test]
    fn ties_go_to_the_oldest() {
        let c = config();
        let ms = [cand(1, 1, 100_000, 0, 0, 9), cand(2, 2, 100_000, 0, 0, 4)];
        let active = active_set(ms.into_iter(), 1);
        assert_eq!(active[0].key, 2);
        let _ = c;
    }

    #[test]
    fn at_most_max_overcommit_are_active() {
        let ms: std::vec::Vec<Candidate> = (0..20)
            .map(|i| cand(i, i, 100_000 + u32::from(i), 0, 0, 0))
            .collect();
        let active = active_set(ms.iter().copied(), 8);
        assert_eq!(active.len(), 8);
        assert!(active
            .windows(2)
            .all(|w| w[0].remaining() <= w[1].remaining()));
        assert_eq!(active[0].key, 0);
        let active = active_set(ms.iter().copied(), 3);
        assert_eq!(active.len(), 3);
    }

    #[test]
    fn one_message_per_peer_while_other_peers_wait() {
        // Peer 1 has the three shortest messages, peer 2 one longer message:
        // with two slots, peer 2 still gets one.
        let ms = [
            cand(1, 1, 10_000, 0, 0, 0),
            cand(2, 1, 11_000, 0, 0, 0),
            cand(3, 1, 12_000, 0, 0, 0),
            cand(4, 2, 90_000, 0, 0, 0),
        ];
        let active = active_set(ms.into_iter(), 2);
        let keys: std::vec::Vec<u16> = active.iter().map(|a| a.key).collect();
        assert_eq!(keys, [1, 4]);
        // With four slots the rest of peer 1's messages fill in.
        let active = active_set(ms.into_iter(), 4);
        assert_eq!(active.len(), 4);
    }

    #[test]
    fn total_incoming_is_capped_by_max_incoming() {
        let c = config();
        // Two messages, window 400000/3 = 133333 each, but 350000 already outstanding.
        let ms = [
            cand(1, 1, 1_000_000, 0, 0, 0),
            cand(2, 2, 1_000_000, 10, 0, 1),
        ];
        let active = active_set(ms.into_iter(), 8);
        let d = decide(&c, &active, 350_000);
        let total: u32 = d.iter().map(|d| d.granted).sum();
        assert_eq!(total, 50_000);
        assert_eq!(d.len(), 1, "the second message is needy: no headroom left");
    }

    #[test]
    fn fixed_window_and_message_end_cap_grants() {
        let mut c = config();
        c.window = 10_000;
        let ms = [cand(1, 1, 45_000, 40_000, 40_000, 0)];
        let d = decide(&c, &active_set(ms.into_iter(), 8), 0);
        assert_eq!(d[0].granted, 45_000);
        let ms = [cand(1, 1, 100_000, 40_000, 40_000, 0)];
        let d = decide(&c, &active_set(ms.into_iter(), 8), 0);
        assert_eq!(d[0].granted, 50_000);
    }

    #[test]
    fn no_grant_when_already_granted_far_enough() {
        let c = config();
        let ms = [cand(1, 1, 1_000_000, 1424, 201_424, 0)];
        assert!(decide(&c, &active_set(ms.into_iter(), 8), 200_000).is_empty());
    }

    #[test]
    fn fifo_interval_matches_linux_defaults() {
        // 50000 bytes at 25000 Mbit/s * 50/1000 = 1250 Mbit/s: 320 us.
        assert_eq!(
            fifo_interval(&config(), 25_000),
            Some(Duration::from_micros(320))
        );
        let mut c = config();
        c.grant_fifo_fraction = 0;
        assert_eq!(fifo_interval(&c, 25_000), None);
    }

    #[test]
    #[cfg_attr(miri, ignore = "arithmetic only, 2 minutes under Miri; runs natively")]
    fn shift_subtract_is_integer_division() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..10_000 {
            let (n, d) = (next(), next() >> (next() % 64));
            if d != 0 {
                assert_eq!(shift_subtract(n, d), n / d, "{n} / {d}");
            }
        }
        for (n, d) in [(0, 1), (u64::MAX, 1), (u64::MAX, u64::MAX), (5, u64::MAX)] {
            assert_eq!(shift_subtract(n, d), n / d);
        }
        assert_eq!(shift_subtract(u64::MAX - 1, (1 << 63) + 1), 1);
        assert_eq!(shift_subtract(7, 0), 0);
        assert_eq!(div_u64(7, 0), 0);
        assert_eq!(div_u64(u64::MAX, 3), u64::MAX / 3);
    }

    #[test]
    fn fifo_grant_goes_to_oldest_inactive_message_at_priority_6() {
        let c = config();
        let ms = [
            cand(1, 1, 50_000, 0, 40_000, 5),
            cand(2, 2, 900_000, 0, 40_000, 1),
            cand(3, 3, 800_000, 0, 40_000, 2),
        ];
        let active = active_set(ms.into_iter(), 1);
        assert_eq!(active[0].key, 1);
        let d = fifo_decision(&c, ms.into_iter(), &active).unwrap();
        assert_eq!(
            d,
            Decision {
                key: 2,
                granted: 90_000,
                priority: 6
            }
        );
    }
}
