//! The 1 ms timer (docs/protocol.md 4.7, 4.8): silent ticks, RESEND, timeouts and
//! NEED_ACK.
//!
//! Every RPC the peer could be holding up counts silence: ticks without
//! progress from the peer (new DATA bytes, a GRANT while bytes are left to
//! send, BUSY for a client RPC, or for a server's response a RESEND; a
//! server naming our request with RESEND shows no life, as in Linux).
//! Silence is not counted while the application holds the RPC, or
//! while it has granted bytes of its own to send to a resolved peer. A
//! message whose every granted byte has arrived waits on our own grant
//! scheduler, not on the peer: it never times out for that, but re-sends its
//! GRANT every `resend_interval` so the sender knows we are alive (Linux
//! repeats GRANTs too, docs/protocol.md 10). Everything else times out after
//! `timeout_ticks` of silence, whatever it waits for:
//! - a client RPC fails with [`RpcError::TimedOut`], or with
//!   [`RpcError::Unresolved`] if the peer never answered ARP;
//! - a server RPC is freed, also while it sends its response or waits for
//!   the client's ACK (Linux never times those out; a client that vanished,
//!   or never existed, would pin the slot and its pool pages for ever).
//!
//! RESENDs go out at `resend_ticks` of silence, then every
//! `resend_interval`, and at the same moments the peer's link address is
//! probed if a silence is reason to doubt it (see `peer`). A server
//! whose response is out asks for an ACK every tick after
//! `request_ack_ticks`.
//!
//! RESENDs reset the silence of a server RPC whose response is out or whose
//! request waits for pool space, and GRANTs that of one still being sent,
//! but neither is progress: after [`RESEND_LIFE_TIMEOUTS`] timeouts
//! without any, the RPC is freed. A client's request gets the same life:
//! after as long without new bytes to send, RESENDs and RPC_UNKNOWN make it
//! send nothing again (it still waits for its response, which BUSY may
//! keep it doing, as in Linux).

use super::rpc::{TickRules, TickVerdict};
use super::{Endpoint, RpcError, ICMP_PER_TICK};

/// How many silence timeouts (`Config::timeout_ticks` each) a client's
/// RESENDs alone may keep a server RPC alive without progress; then it is
/// freed and counted in [`Stats::server_resend_limited`]. A client's
/// request that long without new bytes to send sends nothing again after
/// (its resends end with the same life).
///
/// A RESEND resets the silence of a server RPC whose response is out (its
/// client still misses bytes) or whose request waits for our pool space
/// (the wait is ours): both are alive, and Linux never times them out
/// (docs/protocol.md 4.7). But a RESEND costs its sender 37 bytes and
/// proves nothing, so repeated ones could hold the slot and its pages for
/// ever. An honest client recovers its losses in a few RESEND rounds (each
/// round asks for every missing range, one every `resend_interval`): ten
/// timeouts (1 s at the defaults, 200 rounds) is far beyond what loss or
/// a busy pool needs, and still bounds what a peer can make us hold.
/// (The bound is capped at 65,535 ticks.)
///
/// [`Stats::server_resend_limited`]: crate::stats::Stats::server_resend_limited
pub const RESEND_LIFE_TIMEOUTS: u32 = 10;

impl<'a> Endpoint<'a> {
    /// The 1 ms tick falls due, before the poll's frames are read: the
    /// per-tick ICMP budgets refill and every live RPC counts it
    /// (`Rpc::count_tick`); [`Endpoint::judge_tick`] follows once the
    /// frames are read.
    pub(super) fn count_tick(&mut self) {
        self.icmp_budget = ICMP_PER_TICK;
        self.tick_pass(false);
    }

    /// What the tick judges silence by, from the configuration.
    fn tick_rules(&self) -> TickRules {
        let c = &self.config;
        TickRules {
            timeout: c.timeout_ticks,
            resend: c.resend_ticks,
            // Validated non-zero; `max` tells the compiler.
            interval: c.resend_interval.max(1),
            request_ack: c.request_ack_ticks,
            stale: c
                .timeout_ticks
                .saturating_mul(RESEND_LIFE_TIMEOUTS)
                .min(u32::from(u16::MAX)),
        }
    }

    /// The counted tick, judged after the poll's frames: each live RPC's
    /// verdict is acted on (a RESEND round, a timeout).
    pub(super) fn judge_tick(&mut self) {
        self.tick_pass(true);
    }

    /// One pass over the live RPCs, not the table: each one counts the
    /// tick, or (`judge`) has it judged and its verdict acted on (the
    /// cursor moves on before an RPC may be freed).
    fn tick_pass(&mut self, judge: bool) {
        let rules = self.tick_rules();
        let mut cursor = self.live.front();
        while let Some(i) = cursor {
            cursor = self.live.next_of(&self.rpcs[..], i);
            let slot = usize::from(i);
            let Some(peer) = self.rpc_peer(slot) else {
                continue;
            };
            let resolved = self.peer_resolved(peer);
            let Some(mut r) = self.steady(slot) else {
                continue;
            };
            if judge {
                let verdict = r.on_tick(&rules, resolved);
                self.tick_verdict(slot, peer, verdict);
            } else {
                r.count_tick(&rules, resolved);
            }
        }
    }

    /// Does what the tick's `verdict` on the RPC in `slot` (with peer
    /// `peer`) asks.
    fn tick_verdict(&mut self, slot: usize, peer: u16, verdict: TickVerdict) {
        match verdict {
            TickVerdict::Quiet | TickVerdict::Silent => {}
            TickVerdict::Due => self.control_due(slot),
            TickVerdict::Doubt { due } => {
                self.peer_silent(peer);
                if due {
                    self.control_due(slot);
                }
            }
            TickVerdict::Stale => {
                self.stats.server_resend_limited += 1;
                self.free_rpc(slot);
                self.stats.server_freed += 1;
            }
            TickVerdict::TimedOut(error) => self.timed_out(slot, error),
        }
    }

    /// The RPC in `slot` was silent for the timeout: a client RPC fails
    /// with `error`, a server RPC is freed.
    fn timed_out(&mut self, slot: usize, error: RpcError) {
        let Some(r) = self.rpc_at(slot) else {
            return;
        };
        if r.state().is_client() {
            net_debug!("homa: rpc {} failed: {}", r.id(), error);
            self.stats.timeouts += 1;
            self.fail_client_rpc(slot, error);
        } else {
            net_debug!("homa: server rpc {} timed out", r.id());
            self.stats.server_timeouts += 1;
            self.free_rpc(slot);
            self.stats.server_freed += 1;
        }
    }

    /// An RPC with peer `pi` is silent at a RESEND time: the peer's link
    /// address may be stale, so it is probed when the doubt is reason
    /// enough (see `peer`).
    fn peer_silent(&mut self, pi: u16) {
        let (now, reachable) = (self.now, self.config.reachable_time);
        if let Some(p) = self
            .peers
            .get_mut(usize::from(pi))
            .and_then(|s| s.peer.as_mut())
        {
            p.nbr.silent(now, reachable);
        }
        self.peer_doubted(pi);
    }
}
