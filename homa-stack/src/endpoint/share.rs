//! Each peer's share of the server RPC slots (`Config::peer_share`).
//!
//! Every peer keeps its server RPCs in a list (oldest first), and the peers
//! holding any sit in a heap by how many, the one holding the most on top.
//! A new request that finds the RPC table full, from a peer holding less
//! than its share, takes the slot of the top peer's oldest RPC the
//! application does not hold, if that peer holds more than its share: one
//! source flooding requests then slows itself, not its neighbours. While
//! no one else is refused a peer may use the whole table. O(log peers) per
//! server RPC made or freed, and at most [`EVICT_PROBES`] RPCs looked at
//! per request refused.

use super::peer::PeerSlot;
use super::rpc::{self, State};
use super::Endpoint;
use crate::storage::{HeapLink, HeapNode, List};
use crate::wire::IpAddr;

/// The number of the heap of peers by server RPCs held.
pub(super) const LOAD: u8 = 0;

/// How many of the top peer's oldest server RPCs are looked at for one the
/// application does not hold (one it holds owes a response it is working
/// on).
const EVICT_PROBES: usize = 4;

/// Peers are ordered by server RPCs held, most first.
impl HeapNode for PeerSlot {
    type Key = u16;
    fn heap_link(&self, _heap: u8) -> &HeapLink {
        &self.load
    }
    fn heap_link_mut(&mut self, _heap: u8) -> &mut HeapLink {
        &mut self.load
    }
    fn heap_key(&self, _heap: u8) -> u16 {
        let held = self.peer.as_ref().map_or(0, |p| p.servers.len());
        u16::MAX - u16::try_from(held).unwrap_or(u16::MAX)
    }
}

impl<'a> Endpoint<'a> {
    /// Server RPC slots one peer may hold while another is refused.
    fn peer_share(&self) -> usize {
        (self.rpcs.len() * usize::from(self.config.peer_share) / 1000).max(1)
    }

    /// The server RPCs peer `pi` holds.
    fn servers_of(&self, pi: u16) -> Option<List> {
        Some(self.peers.get(usize::from(pi))?.peer.as_ref()?.servers)
    }

    /// The new server RPC in `slot` counts for its peer `pi`.
    pub(super) fn share_taken(&mut self, slot: usize, pi: u16) {
        let Some(p) = self
            .peers
            .get_mut(usize::from(pi))
            .and_then(|s| s.peer.as_mut())
        else {
            return;
        };
        if p.servers.is_empty() {
            // Each peer's list has the peer's own id.
            p.servers = List::with_id(rpc::BY_PEER, pi);
        }
        p.servers.push_back(&mut self.rpcs[..], slot as u16);
        self.loads.upsert(&mut self.peers[..], pi);
    }

    /// The server RPC in `slot`, being freed, no longer counts for `pi`.
    pub(super) fn share_released(&mut self, slot: usize, pi: u16) {
        let Some(p) = self
            .peers
            .get_mut(usize::from(pi))
            .and_then(|s| s.peer.as_mut())
        else {
            return;
        };
        p.servers.remove(&mut self.rpcs[..], slot as u16);
        if p.servers.is_empty() {
            self.loads.remove(&mut self.peers[..], pi);
        } else {
            self.loads.update(&mut self.peers[..], pi);
        }
    }

    /// A new request from `addr` found the RPC table full: frees a slot
    /// for it if its peer holds less than its share and the peer holding
    /// the most holds more (see the module docs). Returns the slot freed.
    pub(super) fn make_room(&mut self, addr: IpAddr) -> Option<usize> {
        let share = self.peer_share();
        let mine = self
            .find_peer(addr)
            .and_then(|pi| self.servers_of(pi))
            .map_or(0, |l| l.len());
        if mine >= share {
            return None;
        }
        let top = self.loads.peek(&self.peers[..])?;
        let servers = self.servers_of(top)?;
        if servers.len() <= share {
            return None;
        }
        let mut cursor = servers.front();
        for _ in 0..EVICT_PROBES {
            let i = cursor?;
            cursor = servers.next_of(&self.rpcs[..], i);
            let slot = usize::from(i);
            let Some(r) = self.rpcs[slot].rpc.as_ref() else {
                continue;
            };
            if r.state == State::ServerInService {
                continue;
            }
            net_debug!(
                "homa: server rpc {} from {} freed: its peer holds more than its share",
                r.id,
                r.peer_addr
            );
            self.free_rpc(slot);
            self.stats.server_evicted += 1;
            self.stats.server_freed += 1;
            return Some(slot);
        }
        None
    }
}
