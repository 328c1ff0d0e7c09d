//! Each peer's, and each prefix's, share of the server RPC slots and pool
//! pages (`Config::peer_share`, `Config::share_prefix_v4` and `_v6`).
//!
//! A peer counts its server RPCs. The peers of one prefix (a /24 or a /64
//! by default) form a group, whose leader is the first of them to hold a
//! server RPC: it counts the group's server RPCs and the pool pages they
//! hold. A leader is found by its prefix in an index, and is not evicted
//! from the peer table while other peers of its group are there. A load is
//! the larger of the shares of the table and of the pool (in thousandths).
//!
//! Server RPCs are kept oldest first in one list. A new request that finds
//! the RPC table full, or whose message finds no pool pages, looks at the
//! first few and frees the first that gives way: one answered with its
//! response sent whole, whoever holds it (its client has the response, or,
//! if it was lost, finds the RPC gone with its RESEND and starts again), so
//! a flood of one-packet requests, from any number of addresses, cannot
//! keep the table; or, for a peer whose address stays within its share,
//! one the application does not hold, of another group if the newcomer's
//! own stays within its share and that group holds more than the
//! newcomer's would, or of the newcomer's own group if its address holds
//! more than the newcomer's would (so a neighbour's flood in the same /24
//! slows the neighbour). Those the application holds, and answered ones
//! still sending, move to the back of the list as they are passed over.
//! While no one else is refused a peer may use the whole table and pool.
//! O(1) per change of a group's counts, one hash and lookup per peer's
//! first server RPC, and at most [`EVICT_PROBES`] RPCs looked at for each
//! one sought (a request seeks one slot, or pages from at most
//! [`EVICT_PROBES`] RPCs).

use super::peer::{Peer, PeerSlot};
use super::rpc::State;
use super::Endpoint;
use crate::storage::NONE;
use crate::wire::IpAddr;

/// How many RPCs one request looks at for one to free (one the
/// application holds owes a response it is working on, and is passed over).
const EVICT_PROBES: usize = 4;

/// Peer `pi` of the table `peers` (a function of the table alone, so the
/// RPC table stays free to borrow beside it). Out of line on the
/// firmware, as `peer_at`: each is looked up at several places.
#[cfg_attr(target_os = "none", inline(never))]
fn peer_in(peers: &mut [PeerSlot], pi: u16) -> Option<&mut Peer> {
    peers.get_mut(usize::from(pi))?.peer.as_mut()
}

/// Peer `pi` of the table `peers`, to read.
#[cfg_attr(target_os = "none", inline(never))]
fn peer_at(peers: &[PeerSlot], pi: u16) -> Option<&Peer> {
    peers.get(usize::from(pi))?.peer.as_ref()
}

impl<'a> Endpoint<'a> {
    /// The load of `servers` server RPCs and `pages` pages: the larger of
    /// their shares of the table and of the pool, in thousandths.
    fn load_of(&self, servers: usize, pages: usize) -> usize {
        let of_table = servers * 1000 / self.rpcs.len().max(1);
        let of_pool = pages * 1000 / self.pool.total_pages().max(1);
        of_table.max(of_pool)
    }

    /// The leader of the group of `addr`'s prefix, if there is one, and
    /// the prefix's hash.
    fn group_of(&self, addr: IpAddr) -> (Option<u16>, u64) {
        let prefix = self.config.share_prefix(addr);
        let h = self.hash.addr(prefix);
        let is = |s: &PeerSlot| {
            s.peer
                .as_ref()
                .is_some_and(|p| self.config.share_prefix(p.addr) == prefix)
        };
        (self.groups.find(&self.peers[..], h, is), h)
    }

    /// Peer `pi`, about to hold its first server RPC, joins the group of
    /// its prefix, or leads a new one. Its leader.
    fn join_group(&mut self, pi: u16, addr: IpAddr) -> u16 {
        let leader = match self.group_of(addr) {
            // Pinned while it leads others: off the eviction order.
            (Some(g), _) => {
                self.peer_idle.remove(&mut self.peers[..], g);
                g
            }
            (None, h) => {
                self.groups.insert(&mut self.peers[..], pi, h);
                pi
            }
        };
        if let Some(l) = peer_in(&mut self.peers, leader) {
            l.members += 1;
        }
        leader
    }

    /// Peer `pi`, a member of `leader`'s group, is evicted: a group goes
    /// with its last member, and a leader no longer leading others may be
    /// evicted in turn.
    pub(super) fn left_group(&mut self, pi: u16, leader: u16) {
        if leader == pi {
            self.groups.remove(&mut self.peers[..], pi);
        } else if let Some(l) = peer_in(&mut self.peers, leader) {
            l.members -= 1;
            if l.idle() {
                self.peer_idle.push_back(&mut self.peers[..], leader);
            }
        }
    }

    /// A server RPC of peer `pi` comes (`servers` 1) or goes (-1), with
    /// `pages` pages more or fewer: its peer's and group's counts follow.
    fn count(&mut self, pi: u16, servers: i16, pages: i32) {
        let Some(p) = peer_in(&mut self.peers, pi) else {
            return;
        };
        p.served = p.served.wrapping_add_signed(servers);
        let mut g = p.group;
        if g == NONE {
            let addr = p.addr;
            g = self.join_group(pi, addr);
            if let Some(p) = peer_in(&mut self.peers, pi) {
                p.group = g;
            }
        }
        if let Some(l) = peer_in(&mut self.peers, g) {
            l.grouped = l.grouped.wrapping_add_signed(servers);
            l.pages = l.pages.wrapping_add_signed(pages);
        }
    }

    /// The new server RPC in `slot` counts for its peer `pi` and its
    /// group, and is the youngest by age.
    pub(super) fn share_taken(&mut self, slot: usize, pi: u16) {
        self.by_age.push_back(&mut self.rpcs[..], slot as u16);
        self.count(pi, 1, 0);
    }

    /// The server RPC in `slot`, being freed with the `pages` it was
    /// counted for, no longer counts for its peer `pi` and its group.
    pub(super) fn share_released(&mut self, slot: usize, pi: u16, pages: u16) {
        self.by_age.remove(&mut self.rpcs[..], slot as u16);
        self.count(pi, -1, -i32::from(pages));
    }

    /// The server RPC in `slot` may have taken or given back pool pages:
    /// its group's count follows (called at every refresh, so at every
    /// change of its messages).
    pub(super) fn share_pages(&mut self, slot: usize) {
        let Some(s) = self.rpcs.get_mut(slot) else {
            return;
        };
        let Some(r) = s.rpc().filter(|r| !r.state().is_client()) else {
            return;
        };
        let held = u16::try_from(r.pages_held()).unwrap_or(u16::MAX);
        if held == s.placed.pages {
            return;
        }
        let pi = r.peer();
        let was = core::mem::replace(&mut s.placed.pages, held);
        self.count(pi, 0, i32::from(held) - i32::from(was));
    }

    /// The share of the RPC table peer `pi` (`NONE`: a stranger) holds,
    /// with `more` RPCs.
    fn address_load(&self, pi: u16, more: usize) -> usize {
        let served = self
            .peers
            .get(usize::from(pi))
            .and_then(|s| s.peer.as_ref())
            .map_or(0, |p| usize::from(p.served));
        self.load_of(served + more, 0)
    }

    /// Frees the server RPC in `slot` for a newcomer: its slot and pages.
    fn evict(&mut self, slot: usize) -> (usize, usize) {
        let pages = self
            .rpcs
            .get(slot)
            .map_or(0, |s| usize::from(s.placed.pages));
        net_debug!("homa: server rpc in slot {} freed for a newcomer", slot);
        self.free_rpc(slot);
        self.stats.server_evicted += 1;
        self.stats.server_freed += 1;
        (slot, pages)
    }

    /// Frees, for a newcomer from `addr` that would take `servers` more
    /// RPCs and `pages` more pages, the oldest server RPC that gives way,
    /// as the module docs say (with `with_pages`, one holding pages). Its
    /// slot and pages. At most [`EVICT_PROBES`] RPCs are looked at.
    fn evict_for(
        &mut self,
        addr: IpAddr,
        servers: usize,
        pages: usize,
        with_pages: bool,
    ) -> Option<(usize, usize)> {
        let share = usize::from(self.config.peer_share);
        let mine = self.address_load(self.find_peer(addr).unwrap_or(NONE), servers);
        // A share of 1000 never frees one by the shares.
        let within = share < 1000 && mine <= share;
        let own = self.group_of(addr).0;
        let ours = own
            .and_then(|g| peer_at(&self.peers, g))
            .map_or((servers, pages), |l| {
                (usize::from(l.grouped) + servers, l.pages as usize + pages)
            });
        let ours = self.load_of(ours.0, ours.1);
        let mut cursor = self.by_age.front();
        for _ in 0..EVICT_PROBES {
            let i = cursor?;
            cursor = self.by_age.next_of(&self.rpcs[..], i);
            let s = self.rpcs.get(usize::from(i))?;
            let r = s.rpc()?;
            let (gives, held) = match r.outgoing() {
                // Answered: freed once its response is sent whole.
                Some(o) => (o.next_xmit() >= o.length() && !o.has_resend(), true),
                None if matches!(r.state(), State::ServerInService) => (false, true),
                // Within the newcomer's own group, only an address holding
                // more than the newcomer would gives way; from another
                // group, a group holding more than the newcomer's would
                // gives way to one within its share.
                None if within => {
                    let p = peer_at(&self.peers, r.peer())?;
                    let g = p.group;
                    let gives = if own == Some(g) {
                        self.load_of(usize::from(p.served), 0) > mine
                    } else {
                        let l = peer_at(&self.peers, g)?;
                        ours <= share
                            && self.load_of(usize::from(l.grouped), l.pages as usize) > ours
                    };
                    (gives, false)
                }
                None => (false, false),
            };
            if gives && !(with_pages && s.placed.pages == 0) {
                return Some(self.evict(usize::from(i)));
            }
            if held {
                // The application holds it, or its response is still
                // being sent: to the back, and the next look starts past it.
                self.by_age.remove(&mut self.rpcs[..], i);
                self.by_age.push_back(&mut self.rpcs[..], i);
            }
        }
        None
    }

    /// A new request from `addr` found the RPC table full: frees a slot
    /// for it (see the module docs). Returns the slot.
    pub(super) fn make_room(&mut self, addr: IpAddr) -> Option<usize> {
        self.evict_for(addr, 1, 0, false).map(|(slot, _)| slot)
    }

    /// The server RPC in `slot` found no pool pages for its `len`-byte
    /// request (or others waiting for them): frees pages for it (see the
    /// module docs). Whether the pages freed cover `len` bytes: then the
    /// request takes them at once, and what others wait for is not touched.
    pub(super) fn make_pages(&mut self, slot: usize, len: usize) -> bool {
        let need = crate::storage::pages_for(len, self.pool.page_size());
        let Some(addr) = self.rpc_at(slot).map(|r| r.peer_addr()) else {
            return false;
        };
        let mut freed = 0;
        for _ in 0..EVICT_PROBES {
            let Some((_, pages)) = self.evict_for(addr, 0, need, true) else {
                return false;
            };
            freed += pages;
            if freed >= need {
                return true;
            }
        }
        false
    }
}

#[cfg(any(test, fuzzing))]
impl Endpoint<'_> {
    /// Checks the shares against the RPCs: every server RPC is in the list
    /// by age and counted by its peer and its group, every group's pages
    /// add up (peer tables of up to 1,024 entries; larger ones are not
    /// checked).
    pub(super) fn check_shares(&self) -> Result<(), &'static str> {
        /// What the RPCs say a peer, and the group it leads, hold.
        #[derive(Clone, Copy, Default)]
        struct Held {
            served: u16,
            in_group: u16,
            members: u16,
            pages: u32,
        }
        let mut held = [Held::default(); 1024];
        if self.peers.len() > held.len() {
            return Ok(());
        }
        let mut served = 0;
        for (i, s) in self.rpcs.iter().enumerate() {
            let Some(r) = s.rpc().filter(|r| !r.state().is_client()) else {
                continue;
            };
            let pi = usize::from(r.peer());
            let g = self.peers[pi].peer.as_ref().map_or(NONE, |p| p.group);
            if !self.by_age.contains(&self.rpcs[..], i as u16) {
                return Err("a server RPC is not in the list by age");
            }
            served += 1;
            let pages = u32::from(s.placed.pages);
            held.get_mut(pi).ok_or("too many peers to check")?.served += 1;
            let l = held
                .get_mut(usize::from(g))
                .ok_or("too many peers to check")?;
            (l.in_group, l.pages) = (l.in_group + 1, l.pages + pages);
        }
        for p in self.peers.iter().filter_map(|s| s.peer.as_ref()) {
            if let Some(l) = held.get_mut(usize::from(p.group)) {
                l.members += 1;
            }
        }
        for (pi, s) in self.peers.iter().enumerate() {
            let Some(p) = s.peer.as_ref() else { continue };
            let h = held.get(pi).ok_or("too many peers to check")?;
            if p.served != h.served {
                return Err("a peer's counts are stale");
            }
            if p.served > 0 && p.group == NONE {
                return Err("a peer holding server RPCs is in no group");
            }
            let leads = p.group == pi as u16;
            if leads != self.groups.contains(&self.peers[..], pi as u16) {
                return Err("the index of leaders disagrees with the groups");
            }
            if leads && self.group_of(p.addr).0 != Some(pi as u16) {
                return Err("a leader is not found by its prefix");
            }
            let prefix = self.config.share_prefix(p.addr);
            let leader = self
                .peers
                .get(usize::from(p.group))
                .and_then(|s| s.peer.as_ref());
            if p.group != NONE
                && leader.is_none_or(|l| {
                    l.group != p.group || self.config.share_prefix(l.addr) != prefix
                })
            {
                return Err("a peer's leader leads another prefix");
            }
            if p.members != h.members {
                return Err("a leader's member count is stale");
            }
            if p.grouped != h.in_group || p.pages != h.pages {
                return Err("a group's counts are stale");
            }
        }
        if served != self.by_age.len() {
            return Err("the list by age holds what it should not");
        }
        Ok(())
    }
}
