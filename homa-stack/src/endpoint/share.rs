//! Each peer's share of the server RPC slots and pool pages
//! (`Config::peer_share`).
//!
//! Every peer keeps its server RPCs in a list (oldest first), and the peers
//! holding any sit in a heap by their load, the larger of their shares of
//! the RPC table and of the pool (in thousandths), the most loaded on top.
//! A new request that finds the RPC table full, or whose message finds no
//! pool pages, from a peer that would stay within its share, frees the top
//! peer's oldest RPCs the application does not hold, if that peer holds
//! more than its share: one source flooding requests then slows itself,
//! not its neighbours. While no one else is refused a peer may use the
//! whole table and pool. O(log peers) per change of a peer's load, and at
//! most [`EVICT_PROBES`] RPCs looked at per request refused.

use super::peer::{Peer, PeerSlot};
use super::rpc::{self, State};
use super::Endpoint;
use crate::storage::{HeapLink, HeapNode, List};
use crate::wire::IpAddr;

/// The number of the heap of peers by load.
pub(super) const LOAD: u8 = 0;

/// How many of the top peer's oldest server RPCs one request looks at for
/// ones to free (one the application holds owes a response it is working
/// on, and is passed over).
const EVICT_PROBES: usize = 4;

/// Peer `pi` of the table `peers` (a function of the table alone, so the
/// RPC table stays free to borrow beside it).
fn peer_in(peers: &mut [PeerSlot], pi: u16) -> Option<&mut Peer> {
    peers.get_mut(usize::from(pi))?.peer.as_mut()
}

/// Peers are ordered by load, most first.
impl HeapNode for PeerSlot {
    type Key = u16;
    fn heap_link(&self, _heap: u8) -> &HeapLink {
        &self.load
    }
    fn heap_link_mut(&mut self, _heap: u8) -> &mut HeapLink {
        &mut self.load
    }
    fn heap_key(&self, _heap: u8) -> u16 {
        u16::MAX - self.peer.as_ref().map_or(0, |p| p.load)
    }
}

impl<'a> Endpoint<'a> {
    /// The load of a peer holding `servers` server RPCs and `pages` pages:
    /// the larger of its shares of the table and of the pool, in
    /// thousandths.
    fn load_of(&self, servers: usize, pages: usize) -> usize {
        let of_table = servers * 1000 / self.rpcs.len().max(1);
        let of_pool = pages * 1000 / self.pool.total_pages().max(1);
        of_table.max(of_pool)
    }

    /// Peer `pi`'s server RPCs and pages changed: its load and place in
    /// the heap follow.
    fn refresh_load(&mut self, pi: u16) {
        let Some(p) = self
            .peers
            .get(usize::from(pi))
            .and_then(|s| s.peer.as_ref())
        else {
            return;
        };
        let (servers, pages) = (p.servers.len(), p.pages as usize);
        let load = self.load_of(servers, pages).min(usize::from(u16::MAX)) as u16;
        let Some(p) = peer_in(&mut self.peers, pi) else {
            return;
        };
        p.load = load;
        if servers == 0 {
            self.loads.remove(&mut self.peers[..], pi);
        } else {
            self.loads.upsert(&mut self.peers[..], pi);
        }
    }

    /// The new server RPC in `slot` counts for its peer `pi`.
    pub(super) fn share_taken(&mut self, slot: usize, pi: u16) {
        let Some(p) = peer_in(&mut self.peers, pi) else {
            return;
        };
        if p.servers.is_empty() {
            // Each peer's list has the peer's own id.
            p.servers = List::with_id(rpc::BY_PEER, pi);
        }
        p.servers.push_back(&mut self.rpcs[..], slot as u16);
        self.refresh_load(pi);
    }

    /// The server RPC in `slot`, being freed with the `pages` it was
    /// counted for, no longer counts for its peer `pi`.
    pub(super) fn share_released(&mut self, slot: usize, pi: u16, pages: u16) {
        let Some(p) = peer_in(&mut self.peers, pi) else {
            return;
        };
        p.servers.remove(&mut self.rpcs[..], slot as u16);
        p.pages = p.pages.saturating_sub(u32::from(pages));
        self.refresh_load(pi);
    }

    /// The server RPC in `slot` may have taken or given back pool pages:
    /// its peer's count follows (called at every refresh, so at every
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
        if let Some(p) = peer_in(&mut self.peers, pi) {
            p.pages = (p.pages + u32::from(held)).saturating_sub(u32::from(was));
        }
        self.refresh_load(pi);
    }

    /// The peer on top of the heap, if it holds more than its share and
    /// is not `except`; its server RPCs.
    fn over_share(&self, except: Option<u16>) -> Option<List> {
        let top = self.loads.peek(&self.peers[..])?;
        let p = self.peers.get(usize::from(top))?.peer.as_ref()?;
        (Some(top) != except && p.load > self.config.peer_share).then_some(p.servers)
    }

    /// Frees the oldest of `servers` the application does not hold (and,
    /// if `with_pages`, that holds pool pages), looking at
    /// [`EVICT_PROBES`] at most. Returns the slot freed and its pages.
    fn evict_one(&mut self, servers: List, with_pages: bool) -> Option<(usize, usize)> {
        let mut cursor = servers.front();
        for _ in 0..EVICT_PROBES {
            let i = cursor?;
            cursor = servers.next_of(&self.rpcs[..], i);
            let slot = usize::from(i);
            let s = &self.rpcs[slot];
            let Some(r) = s.rpc() else {
                continue;
            };
            if matches!(r.state(), State::ServerInService) || (with_pages && s.placed.pages == 0) {
                continue;
            }
            net_debug!(
                "homa: server rpc {} from {} freed: its peer holds more than its share",
                r.id(),
                r.peer_addr()
            );
            let pages = usize::from(s.placed.pages);
            self.free_rpc(slot);
            self.stats.server_evicted += 1;
            self.stats.server_freed += 1;
            return Some((slot, pages));
        }
        None
    }

    /// Peer `pi`'s load if it held `servers` more RPCs and `pages` more
    /// pages.
    fn load_with(&self, pi: Option<u16>, servers: usize, pages: usize) -> usize {
        let (s, p) = pi
            .and_then(|pi| self.peers.get(usize::from(pi))?.peer.as_ref())
            .map_or((0, 0), |p| (p.servers.len(), p.pages as usize));
        self.load_of(s + servers, p + pages)
    }

    /// A new request from `addr` found the RPC table full: frees a slot
    /// for it if its peer would stay within its share and the most loaded
    /// peer is beyond its own (see the module docs). Returns the slot.
    pub(super) fn make_room(&mut self, addr: IpAddr) -> Option<usize> {
        let pi = self.find_peer(addr);
        if self.load_with(pi, 1, 0) > usize::from(self.config.peer_share) {
            return None;
        }
        let servers = self.over_share(pi)?;
        self.evict_one(servers, false).map(|(slot, _)| slot)
    }

    /// The server RPC in `slot` found no pool pages for its `len`-byte
    /// request (or others waiting for them): frees pages of the most loaded
    /// peer, while it is beyond its share, if the RPC's peer would stay
    /// within its own. Whether the pages freed cover `len` bytes: then the
    /// request takes them at once, and what others wait for is not touched.
    pub(super) fn make_pages(&mut self, slot: usize, len: usize) -> bool {
        let need = crate::storage::pages_for(len, self.pool.page_size());
        let pi = self.rpc_peer(slot);
        if self.load_with(pi, 0, need) > usize::from(self.config.peer_share) {
            return false;
        }
        let mut freed = 0;
        for _ in 0..EVICT_PROBES {
            let Some(servers) = self.over_share(pi) else {
                return false;
            };
            let Some((_, pages)) = self.evict_one(servers, true) else {
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
    /// Checks the shares against the RPCs: every server RPC is in its
    /// peer's list and its pages in its peer's count, and every peer
    /// holding any is in the heap with its load up to date.
    pub(super) fn check_shares(&self) -> Result<(), &'static str> {
        let (mut servers, mut pages) = (0usize, 0u64);
        for (i, s) in self.rpcs.iter().enumerate() {
            let Some(r) = s.rpc().filter(|r| !r.state().is_client()) else {
                continue;
            };
            let listed = self
                .peers
                .get(usize::from(r.peer()))
                .and_then(|p| p.peer.as_ref())
                .is_some_and(|p| p.servers.contains(&self.rpcs[..], i as u16));
            if !listed {
                return Err("a server RPC is not in its peer's list");
            }
            servers += 1;
            pages += u64::from(s.placed.pages);
        }
        let (mut listed, mut counted, mut loaded) = (0usize, 0u64, 0usize);
        for (pi, p) in self.peers.iter().enumerate() {
            let Some(p) = p.peer.as_ref() else { continue };
            listed += p.servers.len();
            counted += u64::from(p.pages);
            if p.servers.is_empty() {
                continue;
            }
            loaded += 1;
            if !self.loads.contains(&self.peers[..], pi as u16) {
                return Err("a peer holding server RPCs is not in the load heap");
            }
            if usize::from(p.load) != self.load_of(p.servers.len(), p.pages as usize) {
                return Err("a peer's load is stale");
            }
        }
        if listed != servers || counted != pages || loaded != self.loads.len() {
            return Err("peer shares out of step with the server RPCs");
        }
        Ok(())
    }
}
