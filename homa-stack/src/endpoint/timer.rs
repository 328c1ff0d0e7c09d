//! The 1 ms timer (docs/protocol.md 4.7, 4.8): silent ticks, RESEND, timeouts and
//! NEED_ACK.
//!
//! Every RPC the peer could be holding up counts silence: ticks without
//! progress from the peer (new DATA bytes, a GRANT while bytes are left to
//! send, BUSY for a client RPC, or for a sender a RESEND). Silence is not counted while the application holds the RPC, or
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
//! without any, the RPC is freed.

use super::rpc::State;
use super::{Endpoint, RpcError, ICMP_PER_TICK};

/// How many silence timeouts (`Config::timeout_ticks` each) a client's
/// RESENDs alone may keep a server RPC alive without progress; then it is
/// freed and counted in [`Stats::server_resend_limited`].
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

/// What the tick does with one RPC.
enum Verdict {
    /// Nothing: not silent.
    Quiet,
    /// Waiting on our own grants: count, and repeat the GRANT at RESEND times.
    OwnGrants,
    /// Silent on the peer.
    Silent,
}

impl<'a> Endpoint<'a> {
    pub(super) fn tick(&mut self) {
        self.icmp_budget = ICMP_PER_TICK;
        self.icmp_in_budget = ICMP_PER_TICK;
        let now = self.now;
        // One pass over the live RPCs, not the table; the cursor moves on
        // before an RPC may be freed.
        let mut cursor = self.live.front();
        // A control packet falls due while the RPC is borrowed: queue it
        // on the next turn.
        let mut due: Option<usize> = None;
        loop {
            if let Some(slot) = due.take() {
                self.control_due(slot);
            }
            let Some(i) = cursor else { break };
            cursor = self.live.next_of(&self.rpcs[..], i);
            let slot = usize::from(i);
            let Some(r) = self.rpcs[slot].rpc.as_mut() else {
                continue;
            };
            r.restarts.tick();
            if let Some(out) = r.out.as_mut() {
                out.ration.tick();
            }
            let resolved = self
                .peers
                .get(usize::from(r.peer))
                .and_then(|s| s.peer.as_ref())
                .is_some_and(|p| p.resolved());
            if !r.state.is_client() {
                // What RESENDs reset the silence of, they may not keep for
                // ever: only progress resets this count.
                let progress = match r.state {
                    State::ServerOutgoing => {
                        resolved && r.out.as_ref().is_some_and(|o| o.can_send_new())
                    }
                    State::ServerIncoming => r.inp.as_ref().is_some_and(|m| m.buf.is_some()),
                    _ => true,
                };
                if progress {
                    r.stale_ticks = 0;
                } else {
                    let limit = self
                        .config
                        .timeout_ticks
                        .saturating_mul(RESEND_LIFE_TIMEOUTS)
                        .min(u32::from(u16::MAX));
                    if u32::from(r.stale_ticks) + 1 >= limit {
                        net_debug!(
                            "homa: server rpc {} freed: RESENDs without progress for {} ticks",
                            r.id,
                            limit
                        );
                        self.stats.server_resend_limited += 1;
                        self.free_rpc(slot);
                        self.stats.server_freed += 1;
                        continue;
                    }
                    r.stale_ticks += 1;
                }
            }
            let verdict = match r.state {
                State::ClientDone | State::ServerReady | State::ServerInService => Verdict::Quiet,
                State::ServerOutgoing | State::ClientOutgoing => {
                    if r.state == State::ServerOutgoing {
                        let sent = r
                            .out
                            .as_ref()
                            .is_none_or(|o| o.next_xmit >= o.length && o.resend.is_empty());
                        if sent {
                            r.done_ticks = r.done_ticks.saturating_add(1);
                            if u32::from(r.done_ticks) >= self.config.request_ack_ticks.min(0xFFFF)
                            {
                                r.need_ack_due = true;
                                due = Some(slot);
                            }
                        } else {
                            r.done_ticks = 0;
                        }
                    }
                    let busy = r
                        .out
                        .as_ref()
                        .is_some_and(|o| o.can_send_new() || !o.resend.is_empty());
                    if busy && resolved {
                        Verdict::Quiet
                    } else {
                        Verdict::Silent
                    }
                }
                State::ClientIncoming | State::ServerIncoming => {
                    // Waiting for pool space counts as silence (unlike in
                    // Linux): with a bounded pool a message that can never
                    // fit would wait for ever.
                    let waiting_on_us = r.inp.as_ref().is_some_and(|m| {
                        m.buf.is_some() && m.asm.hole_count() == 0 && m.asm.recv_end() >= m.granted
                    });
                    if waiting_on_us && resolved {
                        Verdict::OwnGrants
                    } else {
                        Verdict::Silent
                    }
                }
            };
            if matches!(verdict, Verdict::Quiet) {
                r.silent_ticks = 0;
                continue;
            }
            // Saturating: a message waiting on our own grants never times
            // out, and a tick a millisecond wraps a u32 in 49.7 days.
            r.silent_ticks = r.silent_ticks.saturating_add(1);
            let silent = r.silent_ticks;
            let resend_time = silent >= self.config.resend_ticks
                // (Validated non-zero; `max` tells the compiler.)
                && (silent - self.config.resend_ticks).is_multiple_of(self.config.resend_interval.max(1));
            if matches!(verdict, Verdict::OwnGrants) {
                if resend_time {
                    if let Some(m) = r.inp.as_mut() {
                        m.grant_pending = true;
                        due = Some(slot);
                    }
                }
                continue;
            }
            if silent >= self.config.timeout_ticks {
                let error = if resolved {
                    RpcError::TimedOut
                } else {
                    RpcError::Unresolved
                };
                if r.state.is_client() {
                    net_debug!("homa: rpc {} failed: {}", r.id, error);
                    self.stats.timeouts += 1;
                    self.fail_client_rpc(slot, error);
                } else {
                    net_debug!("homa: server rpc {} timed out", r.id);
                    self.stats.server_timeouts += 1;
                    self.free_rpc(slot);
                    self.stats.server_freed += 1;
                }
            } else if resend_time {
                let peer = r.peer;
                // A sender has nothing to ask for: its peer's RESENDs and
                // GRANTs drive it, and the timeout ends it.
                let asks = !matches!(r.state, State::ServerOutgoing);
                if let Some(p) = self
                    .peers
                    .get_mut(usize::from(peer))
                    .and_then(|s| s.peer.as_mut())
                {
                    p.silent(now, self.config.reachable_time);
                }
                self.peer_doubted(peer);
                if asks && resolved {
                    self.request_retrans(slot);
                }
            }
        }
    }
}
