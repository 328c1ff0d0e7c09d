//! One peer's entry in the neighbour cache: its link address, how far that
//! address is believed, and when to ask about it.
//!
//! # What is believed
//!
//! A link address comes from one of four places:
//! - the application ([`add_neighbor`]): pinned. Nothing from the network
//!   changes it, it is never probed, and its peer entry is never evicted;
//! - the Ethernet source of a request that makes a server RPC with a peer
//!   whose address is unknown (*heard*): the response may go there at once,
//!   but anyone on the link can send such a packet, so the peer is asked
//!   about by broadcast straight away;
//! - ARP or neighbour discovery naming the peer without our asking
//!   (*claimed*): asked about the same way;
//! - ARP or neighbour discovery answering our own question (*answered*).
//!
//! A heard or claimed address is believed no further than that: ARP or
//! neighbour discovery replaces it, and a checked Homa packet from another
//! address drops it (two sources and no answer: neither is used until the
//! answer comes). An address is *confirmed* once the peer proves it
//! receives there: it answers a probe sent to that address alone
//! (unicast), or a checked Homa packet for one of our RPCs comes from an
//! answered address. Only an answered or confirmed address is probed by
//! unicast (the forger who planted a heard or claimed one would answer).
//! A client RPC's peer never takes its address from a Homa packet: it is
//! resolved by ARP or neighbour discovery, as Linux does.
//!
//! A confirmed address is not replaced from the network, nor an answered
//! one by another voice before the next question may go (the first answer
//! stands, as with Linux's `locktime`): another address named for the peer
//! only puts it in doubt, and it is probed while kept. After
//! [`UNICAST_PROBES`] unanswered unicast probes the confirmation lapses
//! and the link is asked by broadcast, whose answer may replace it: a peer
//! that really moved.
//!
//! What stays possible: a host that answers our broadcast question about
//! the peer before the peer does (an ARP spoofer) is believed as the peer
//! would be, as on any Ethernet without link-layer security; no Homa
//! packet on its own plants or confirms an address.
//!
//! # How often it is asked about
//!
//! At most one probe per [`PROBE_INTERVAL`] (RFC 1122 2.3.2.1's rate, RFC
//! 4861's RetransTimer), doubling from the [`UNICAST_PROBES`]th unanswered
//! probe up to 16 s, whatever the RPC layer does; except to resolve a peer
//! with no address at all (at first, or once a heard or claimed one was
//! dropped), asked every [`RESOLVE_RETRY`] for its first [`RESOLVE_TRIES`]
//! unanswered tries, so that resolution under loss ends well within an
//! RPC's timeout. An RPC's silence is a reason to probe only
//! an address not confirmed, or confirmed longer ago than
//! `Config::reachable_time` and not probed for as long, or one whose last
//! probe is unanswered: a slow peer's silence is no reason to doubt an
//! address it proved.
//!
//! [`add_neighbor`]: super::Endpoint::add_neighbor

use crate::time::{Duration, Instant};
use crate::wire::EthernetAddress;

/// Unicast probes of an address left unanswered before its confirmation
/// lapses and the link is asked by broadcast (Linux's `ucast_solicit`, RFC
/// 4861's MAX_UNICAST_SOLICIT).
pub const UNICAST_PROBES: u8 = 3;

/// The least time between two probes of a peer's address (RFC 4861's
/// RetransTimer; RFC 1122 recommends at most one ARP request per second
/// per destination). It doubles for each probe past [`UNICAST_PROBES`]
/// left unanswered, up to 16 times.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(1);
const PROBE_INTERVAL_MS: u32 = PROBE_INTERVAL.total_millis() as u32;

/// Time between tries to resolve a peer with no link address.
pub const RESOLVE_RETRY: Duration = Duration::from_millis(10);
const RESOLVE_RETRY_MS: u32 = RESOLVE_RETRY.total_millis() as u32;

/// Unanswered tries to resolve a peer with no link address made every
/// [`RESOLVE_RETRY`]; later ones follow [`PROBE_INTERVAL`]. Ten tries span
/// a default RPC timeout (100 ms); under 30% loss each way all ten fail
/// about once in a thousand resolutions.
pub const RESOLVE_TRIES: u8 = 10;

/// Where the link address came from (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// ARP or neighbour discovery, unasked (first: the default is zero).
    Claimed,
    /// The source of a stranger's request.
    Heard,
    /// ARP or neighbour discovery, answering our question.
    Answered,
    /// The application.
    Pinned,
}

/// Why the address is to be probed at the next chance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Doubt {
    None,
    /// An RPC to the peer fell silent.
    Silent,
    /// Another address was named for the peer, or it was never asked
    /// about (heard or claimed): asked by broadcast unless confirmed.
    Contested,
}

/// A checked Homa packet's source against the known address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Heard {
    /// The known address, or nothing to compare (a group address), or none
    /// known and none to fill in.
    Same,
    /// There was none: it was filled in (heard, to resolve at once).
    Filled,
    /// Another address than the known one: in doubt.
    Differs,
    /// Another address than a heard or claimed one: two sources no
    /// answer backs, so neither is used; the peer is resolved afresh.
    Dropped,
}

/// What became of a link address ARP or neighbour discovery named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Claim {
    /// Taken: there was none, or it replaced an unconfirmed one.
    Learned,
    /// The address already known.
    Kept,
    /// Another address than the one the application set or the peer
    /// confirmed: not applied (a confirmed one is probed).
    Refused,
}

/// A peer's neighbour-cache entry.
// In this order, aligned as a whole: laid out among the peer's byte-sized
// fields, a new peer's zeroes began at an odd offset, which pulled a
// 208-byte unaligned memory clear into the firmware.
#[derive(Debug, Clone)]
#[repr(C)]
pub(crate) struct Neighbour {
    /// When the peer last proved it receives at `mac`; `Instant::ZERO`:
    /// not since it was learned.
    confirmed: Instant,
    /// When the next probe may go (see the module doc); `Instant::ZERO`:
    /// at once.
    next: Instant,
    source: Source,
    doubt: Doubt,
    /// Probes sent since the last answer.
    unanswered: u8,
    /// The last probe went by broadcast.
    asked_all: bool,
    mac: Option<EthernetAddress>,
}

impl Neighbour {
    /// Nothing known yet.
    pub const fn new() -> Neighbour {
        Neighbour {
            mac: None,
            source: Source::Claimed,
            confirmed: Instant::ZERO,
            doubt: Doubt::None,
            unanswered: 0,
            asked_all: false,
            next: Instant::ZERO,
        }
    }

    /// The link address frames to the peer go to.
    pub fn mac(&self) -> Option<EthernetAddress> {
        self.mac
    }

    /// Whether the application set the address.
    pub fn pinned(&self) -> bool {
        self.source == Source::Pinned
    }

    /// Whether the address is missing or in doubt: the peer belongs on the
    /// resolve list.
    pub fn to_ask(&self) -> bool {
        self.mac.is_none() || self.doubt != Doubt::None
    }

    /// Whether the address is in doubt (a probe waits).
    pub fn doubted(&self) -> bool {
        self.doubt != Doubt::None
    }

    /// The application sets the address: pinned.
    pub fn pin(&mut self, mac: EthernetAddress) {
        *self = Neighbour {
            mac: Some(mac),
            source: Source::Pinned,
            ..Neighbour::new()
        };
    }

    /// The application no longer vouches for the address: it is kept, as
    /// if claimed, so it is asked about before it is believed further.
    pub fn unpin(&mut self) {
        if self.pinned() {
            self.source = Source::Claimed;
            self.doubt = Doubt::Contested;
        }
    }

    fn raise(&mut self, doubt: Doubt) {
        self.doubt = self.doubt.max(doubt);
    }

    /// The peer's own packets confirmed the address, or it answered: no
    /// doubt and no unanswered probe is left.
    fn settle(&mut self) {
        self.doubt = Doubt::None;
        self.unanswered = 0;
    }

    /// It answered at `now`: settled, and the next probe (of an address
    /// now known) waits a probe interval.
    fn answered(&mut self, now: Instant) {
        self.source = Source::Answered;
        self.settle();
        self.next = now + PROBE_INTERVAL;
    }

    /// A checked Homa packet for one of our RPCs came from `mac`;
    /// `request` when it is our server RPC's, whose source may fill a
    /// missing address while no question about the peer is out. It
    /// confirms an answered address it matches, fills a missing one
    /// (heard: to resolve at once), and casts doubt on a different one: it
    /// never replaces one, and one no answer backs (heard or claimed) is
    /// dropped until an answer comes.
    pub fn heard(&mut self, mac: EthernetAddress, request: bool, now: Instant) -> Heard {
        if !mac.is_unicast() {
            return Heard::Same;
        }
        match self.mac {
            Some(known) if known == mac => {
                if self.source == Source::Answered {
                    self.confirmed = now;
                    self.settle();
                }
                Heard::Same
            }
            None if request && self.unanswered == 0 => {
                self.mac = Some(mac);
                self.source = Source::Heard;
                self.confirmed = Instant::ZERO;
                self.doubt = Doubt::Contested;
                Heard::Filled
            }
            None => Heard::Same,
            Some(_) if self.pinned() => Heard::Differs,
            Some(_) if matches!(self.source, Source::Heard | Source::Claimed) => {
                // Resolved afresh, at a resolution's pace: its RPCs wait.
                self.mac = None;
                self.doubt = Doubt::None;
                self.next = now;
                Heard::Dropped
            }
            Some(_) => {
                self.raise(Doubt::Contested);
                Heard::Differs
            }
        }
    }

    /// ARP or neighbour discovery says the peer is at `mac` (a request for
    /// our address, or an answer to us, from `mac` itself). While a probe
    /// of ours is unanswered, it is the answer: it confirms the address
    /// when the probe went to it alone, and makes a heard or claimed one
    /// answered. Another address fills a missing one and replaces an
    /// unconfirmed one (answered when it answers a broadcast, else claimed
    /// and asked about), except an answered one until the next probe may
    /// go; for one the application set it does nothing, and for a
    /// confirmed one (or an answered one meanwhile) it only raises doubt.
    pub fn claimed(&mut self, mac: EthernetAddress, now: Instant) -> Claim {
        let answer = self.unanswered > 0;
        match self.mac {
            Some(known) if known == mac => {
                // (A pinned address is never probed: never answered.)
                if answer {
                    if self.source == Source::Answered && !self.asked_all {
                        self.confirmed = now;
                    }
                    self.answered(now);
                }
                Claim::Kept
            }
            _ if self.pinned() => Claim::Refused,
            // Confirmed; or answered, and this is no answer but a second
            // voice before the next question may go (the first answer
            // stands, as with Linux's `locktime`).
            Some(_)
                if self.confirmed != Instant::ZERO
                    || (self.source == Source::Answered
                        && !(answer && self.asked_all)
                        && now < self.next) =>
            {
                self.raise(Doubt::Contested);
                Claim::Refused
            }
            _ => {
                self.mac = Some(mac);
                self.confirmed = Instant::ZERO;
                if answer && self.asked_all {
                    self.answered(now);
                } else {
                    self.source = Source::Claimed;
                    self.doubt = Doubt::Contested;
                }
                Claim::Learned
            }
        }
    }

    /// A claim that may not replace the address (a neighbour advertisement
    /// that is unsolicited or without the override flag) names `mac`: a
    /// different address is put in doubt, unless the application set it.
    /// Whether it differs.
    #[cfg(feature = "ipv6")]
    pub fn disputed(&mut self, mac: EthernetAddress) -> bool {
        let differs = self.mac.is_some_and(|known| known != mac);
        if differs && !self.pinned() {
            self.raise(Doubt::Contested);
        }
        differs
    }

    /// An RPC to the peer fell silent (at a RESEND time): probe an address
    /// not confirmed, one whose last probe is unanswered, or one confirmed
    /// longer than `reachable` ago and not probed for about as long (since
    /// the time the last probe allowed the next); never one the application
    /// set, nor one confirmed within `reachable` (the peer is slow, not
    /// moved).
    pub fn silent(&mut self, now: Instant, reachable: Duration) {
        if self.pinned() {
            return;
        }
        let stale = now >= self.confirmed.max(self.next) + reachable;
        // Without an address there is nothing to doubt: resolution goes on
        // while an RPC waits to send.
        let doubt = self.confirmed == Instant::ZERO || self.unanswered > 0 || stale;
        if self.mac.is_some() && doubt {
            self.raise(Doubt::Silent);
        }
    }

    /// When the next probe may go (see the module doc).
    pub fn next_probe(&self) -> Instant {
        self.next
    }

    /// A probe goes out now: to the known address alone while it is
    /// confirmed, or answered and not contested, and fewer than
    /// [`UNICAST_PROBES`] went unanswered (`Some`); else by broadcast
    /// (`None`; past that many, the confirmation lapses, so that an answer
    /// may replace the address).
    pub fn probe_sent(&mut self, now: Instant) -> Option<EthernetAddress> {
        if self.unanswered >= UNICAST_PROBES {
            self.confirmed = Instant::ZERO;
        }
        let believed = self.confirmed != Instant::ZERO
            || (self.source == Source::Answered && self.doubt != Doubt::Contested);
        let to = self
            .mac
            .filter(|_| believed && self.unanswered < UNICAST_PROBES);
        self.asked_all = to.is_none();
        self.doubt = Doubt::None;
        self.unanswered = self.unanswered.saturating_add(1);
        // Resolving, a few quick tries; then a probe interval, doubling
        // from the last free try on.
        let (quick, free) = match self.mac {
            None => (self.unanswered < RESOLVE_TRIES, RESOLVE_TRIES),
            Some(_) => (false, UNICAST_PROBES),
        };
        let millis = if quick {
            RESOLVE_RETRY_MS
        } else {
            PROBE_INTERVAL_MS << self.unanswered.saturating_sub(free).min(4)
        };
        self.next = now + Duration::from_millis(u64::from(millis));
        to
    }

    /// `now` went backwards: no stamp may stay in the future it left.
    pub fn rebase(&mut self, now: Instant) {
        self.confirmed = self.confirmed.min(now);
        self.next = self.next.min(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
    const EVIL: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0x66]);
    const T: Instant = Instant::from_millis(1);

    /// An address resolved by a broadcast question and its answer.
    fn answered() -> Neighbour {
        let mut n = Neighbour::new();
        assert_eq!(n.probe_sent(T), None, "nothing known: by broadcast");
        assert_eq!(n.claimed(M, T), Claim::Learned);
        n
    }

    #[test]
    fn a_request_fills_a_missing_address_but_never_confirms_it() {
        let mut n = Neighbour::new();
        assert_eq!(n.heard(EVIL, false, T), Heard::Same, "not for a client RPC");
        assert_eq!(n.mac(), None);
        assert_eq!(n.heard(EVIL, true, T), Heard::Filled);
        assert_eq!(n.mac(), Some(EVIL));
        // More packets from it confirm nothing: it is asked about by
        // broadcast, and a claim replaces it.
        assert_eq!(n.heard(EVIL, true, T), Heard::Same);
        assert!(n.doubted());
        assert_eq!(n.probe_sent(T), None);
        assert_eq!(n.claimed(M, T), Claim::Learned);
        assert_eq!(n.mac(), Some(M));
        // Heard from two places before an answer: neither is used, and
        // nothing is filled in again until the answer comes.
        let mut two = Neighbour::new();
        assert_eq!(two.heard(EVIL, true, T), Heard::Filled);
        assert_eq!(two.probe_sent(T), None);
        assert_eq!(two.heard(M, true, T), Heard::Dropped);
        assert_eq!((two.mac(), two.heard(M, true, T)), (None, Heard::Same));
        assert_eq!(two.claimed(M, T), Claim::Learned);
        assert_eq!(two.mac(), Some(M));
        // The answer is believed; the peer's own packets confirm it.
        assert_eq!(n.heard(M, true, T), Heard::Same);
        assert_eq!(n.claimed(EVIL, T), Claim::Refused);
    }

    #[test]
    fn an_unasked_claim_is_asked_about_and_never_confirmed_by_homa() {
        let mut n = Neighbour::new();
        assert_eq!(n.claimed(EVIL, T), Claim::Learned);
        assert!(n.doubted(), "asked about at once");
        assert_eq!(n.heard(EVIL, true, T), Heard::Same);
        assert_eq!(n.probe_sent(T), None, "by broadcast");
        assert_eq!(n.claimed(M, T), Claim::Learned, "replaced by the answer");
    }

    #[test]
    fn a_confirmed_address_is_probed_where_it_is_and_its_answer_keeps_it() {
        let mut n = answered();
        assert_eq!(
            n.heard(M, false, T),
            Heard::Same,
            "the peer's packets confirm"
        );
        assert_eq!(n.claimed(EVIL, T), Claim::Refused);
        assert!(n.doubted());
        assert_eq!(n.probe_sent(T), Some(M), "probed where it is");
        assert_eq!(n.claimed(M, T), Claim::Kept);
        assert!(!n.doubted());
        // Unanswered probes: three by unicast, then the confirmation lapses
        // and a broadcast's answer may replace it.
        let to: Vec<_> = (0..4).map(|_| n.probe_sent(T)).collect();
        assert_eq!(to, [Some(M), Some(M), Some(M), None]);
        assert_eq!(n.claimed(EVIL, T), Claim::Learned);
    }

    #[test]
    fn an_answer_to_a_unicast_probe_confirms() {
        let mut n = answered();
        n.silent(T, Duration::from_secs(30));
        assert_eq!(n.probe_sent(T), Some(M), "an answered address: unicast");
        assert_eq!(n.claimed(M, T), Claim::Kept);
        // Confirmed, it is not probed for silence within the reachable
        // time, and another address named for it is only a doubt.
        n.silent(T, Duration::from_secs(30));
        assert!(!n.doubted());
        assert_eq!(n.claimed(EVIL, T), Claim::Refused);
        assert!(n.doubted());
        assert_eq!(n.probe_sent(T), Some(M), "probed where it is");
    }

    #[test]
    fn probes_are_spaced_and_back_off_while_unanswered() {
        let mut n = Neighbour::new();
        let mut now = T;
        // Resolution: ten tries 10 ms apart, then a second, doubling.
        let mut gaps = Vec::new();
        for _ in 0..17 {
            n.probe_sent(now);
            let next = n.next_probe();
            gaps.push((next - now).total_millis());
            now = next;
        }
        assert_eq!(gaps[..9], [10; 9]);
        assert_eq!(
            gaps[9..],
            [1000, 2000, 4000, 8000, 16_000, 16_000, 16_000, 16_000]
        );
        // A known address: three unicast probes a second apart, then
        // broadcasts, doubling.
        let mut n = answered();
        let mut to = Vec::new();
        gaps.clear();
        for _ in 0..7 {
            to.push(n.probe_sent(now));
            let next = n.next_probe();
            gaps.push((next - now).total_millis());
            now = next;
        }
        assert_eq!(to, [Some(M), Some(M), Some(M), None, None, None, None]);
        assert_eq!(gaps, [1000, 1000, 1000, 2000, 4000, 8000, 16_000]);
    }

    #[test]
    fn a_dropped_address_is_resolved_at_a_resolutions_pace() {
        // A request's source, asked about (the next question a second
        // away), then contradicted by a checked packet from elsewhere
        // before the answer: no address, and its RPCs wait, so the next
        // question may go at once, and the next ones 10 ms apart.
        let mut n = Neighbour::new();
        assert_eq!(n.heard(EVIL, true, T), Heard::Filled);
        assert_eq!(n.probe_sent(T), None);
        assert_eq!(n.next_probe(), T + PROBE_INTERVAL);
        let later = T + Duration::from_millis(50);
        assert_eq!(n.heard(M, true, later), Heard::Dropped);
        assert_eq!(n.next_probe(), later);
        assert_eq!(n.probe_sent(later), None);
        assert_eq!(n.next_probe(), later + RESOLVE_RETRY);
    }

    #[test]
    fn a_pinned_address_is_never_changed_or_doubted() {
        let mut n = Neighbour::new();
        n.pin(M);
        assert_eq!(n.heard(EVIL, true, T), Heard::Differs);
        assert_eq!(n.claimed(EVIL, T), Claim::Refused);
        n.silent(T, Duration::ZERO);
        assert!(!n.to_ask());
        n.unpin();
        assert!(n.doubted(), "asked about once no longer vouched for");
        assert_eq!(n.claimed(EVIL, T), Claim::Learned);
    }
}
