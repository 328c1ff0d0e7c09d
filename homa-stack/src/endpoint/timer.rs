//! The 1 ms timer (protocol.md 4.7, 4.8): silent ticks, RESEND, timeouts and
//! NEED_ACK.
//!
//! Silence is counted only while an RPC waits on its peer: not while the
//! application holds it, not while it has granted data of its own to send,
//! not while it waits for its own grants. (A message waiting for pool space
//! does count silence, unlike in Linux: a bounded pool could otherwise hold
//! it forever.) RESENDs go out at
//! `resend_ticks`, then every `resend_interval`; at `timeout_ticks` a client
//! RPC fails with [`RpcError::TimedOut`] and a server RPC is dropped. A
//! server whose response is out asks for an ACK every tick after
//! `request_ack_ticks` and, unlike Linux, gives up after
//! `need_ack_timeout_ticks` so a vanished client cannot pin its state.

use super::rpc::State;
use super::{Endpoint, RpcError, ICMP_PER_TICK};

impl<'a> Endpoint<'a> {
    pub(super) fn tick(&mut self) {
        self.icmp_budget = ICMP_PER_TICK;
        for slot in 0..self.rpcs.len() {
            let Some(r) = self.rpcs[slot].rpc.as_mut() else {
                continue;
            };
            match r.state {
                State::ClientDone | State::ServerReady | State::ServerInService => {
                    r.silent_ticks = 0;
                    continue;
                }
                State::ServerOutgoing => {
                    let sent = r
                        .out
                        .as_ref()
                        .is_none_or(|o| o.next_xmit >= o.length && o.resend.is_empty());
                    r.silent_ticks = 0;
                    if !sent {
                        r.done_ticks = 0;
                        continue;
                    }
                    r.done_ticks += 1;
                    if r.done_ticks > self.config.need_ack_timeout_ticks {
                        net_debug!("homa: server rpc {} freed without ACK", r.id);
                        self.free_rpc(slot);
                        self.stats.server_freed += 1;
                        self.stats.server_ack_timeouts += 1;
                    } else if r.done_ticks >= self.config.request_ack_ticks {
                        r.need_ack_due = true;
                        self.rpc_ctrl_due = true;
                    }
                    continue;
                }
                State::ClientOutgoing => {
                    if r.out
                        .as_ref()
                        .is_some_and(|o| o.can_send_new() || !o.resend.is_empty())
                    {
                        r.silent_ticks = 0;
                        continue;
                    }
                }
                State::ClientIncoming | State::ServerIncoming => {
                    // Waiting for our own grants is not the peer's silence.
                    // Waiting for pool space is: Linux exempts it too, but
                    // with a bounded pool a message that can never fit would
                    // wait forever, so it times out like any other.
                    let waiting_on_us = r.inp.as_ref().is_some_and(|m| {
                        m.buf.is_some() && m.asm.gap_count() == 0 && m.asm.recv_end() >= m.granted
                    });
                    if waiting_on_us {
                        r.silent_ticks = 0;
                        continue;
                    }
                }
            }
            r.silent_ticks += 1;
            let silent = r.silent_ticks;
            if silent >= self.config.timeout_ticks {
                self.stats.timeouts += 1;
                if r.state.is_client() {
                    net_debug!("homa: rpc {} timed out", r.id);
                    r.state = State::ClientDone;
                    r.error = Some(RpcError::TimedOut);
                    r.reported = false;
                    self.maybe_ready = true;
                    self.stats.client_failed += 1;
                    self.grants_dirty = true;
                } else {
                    net_debug!("homa: server rpc {} timed out", r.id);
                    self.free_rpc(slot);
                    self.stats.server_freed += 1;
                }
            } else if silent >= self.config.resend_ticks
                && (silent - self.config.resend_ticks) % self.config.resend_interval == 0
            {
                self.request_retrans(slot);
            }
        }
    }
}
