//! RESEND in one place (docs/protocol.md 4.7): what a receiver asks for when
//! its peer falls silent (one RESEND per missing range, exactly), and what
//! a sender does with a RESEND (queue exactly the packets asked for that
//! were sent; BUSY when it owes nothing yet), at most the unscheduled
//! bytes per RESEND.

use super::rpc::State;
use super::types::Sender;
use super::Endpoint;
use crate::phy::Device;
use crate::stats::DropReason;
use crate::storage::PoolStore;
use crate::time::Instant;
use crate::wire::homa::{self, Kind, Repr, RESEND_ALL};
use crate::wire::EthernetAddress;

impl<'a> Endpoint<'a> {
    pub(super) fn resend_pkt(
        &mut self,
        from: Sender,
        offset: u32,
        length: u32,
        priority: u8,
    ) -> Option<usize> {
        let Some(i) = self.find_rpc(from.addr, from.local_id, from.dport) else {
            self.push_answer(&from, Kind::RpcUnknown);
            return None;
        };
        self.heard(i, from.mac);
        let top = self.config.highest_priority();
        let unsched_bytes = self.config.unsched_bytes;
        let interval = self.config.resend_interval;
        let r = self.rpc_mut(i)?;
        let out = match r.out.as_mut() {
            // A server still receiving or computing owes its response: BUSY
            // keeps the client from timing out (docs/protocol.md 4.7).
            Some(out)
                if r.state != State::ServerIncoming
                    && r.state != State::ServerReady
                    && r.state != State::ServerInService =>
            {
                out
            }
            _ => {
                // A client asking while its request waits for our pool
                // space is alive: the wait is ours, not its silence. (Not
                // a server naming our client RPC: only a message's
                // receiver asks, so that is no sign of life.)
                if !r.state.is_client() && r.inp.as_ref().is_some_and(|m| m.buf.is_none()) {
                    r.silent_ticks = 0;
                }
                self.push_answer(&from, Kind::Busy);
                return Some(i);
            }
        };
        // The receiver is alive and waiting for us: not silence.
        r.silent_ticks = 0;
        let tx_end = out.next_xmit;
        let end = if length == RESEND_ALL {
            tx_end
        } else {
            offset.saturating_add(length)
        };
        // One RESEND schedules at most `cap` bytes again, and grants at
        // most `cap` beyond what was sent (see `resend_cap`).
        let cap = resend_cap(unsched_bytes, out.seg);
        let end = end.min(out.length).min(offset.saturating_add(cap));
        // Lost-GRANT recovery: asking for bytes means they are granted.
        let grant = end.min(tx_end.saturating_add(cap));
        if grant > out.granted {
            out.granted = grant;
        }
        if offset >= tx_end {
            self.push_answer(&from, Kind::Busy);
            return Some(i);
        }
        if !out.request_resend(offset, end, priority.min(top), cap, interval) {
            // Still a sign of life (above), but no more bytes this interval.
            net_debug!("homa: RESEND for rpc {}: over its ration", r.id);
            self.count_drop(DropReason::RateLimited);
        }
        Some(i)
    }

    /// Asks for everything an incoming message misses: the next egress
    /// sends the RESENDs (see `emit_resends`). A flag, not a queue entry, so
    /// no RPC's request can be crowded out by others.
    pub(super) fn request_retrans(&mut self, slot: usize) {
        if let Some(r) = self.rpcs[slot].rpc.as_mut() {
            r.resend_due = true;
            self.control_due(slot);
        }
    }

    /// RESENDs for every range an incoming message misses: each gap, the
    /// granted-but-missing tail, or everything when nothing has arrived.
    /// Returns false if the device refused a frame (the RPC stays due).
    pub(super) fn emit_resends<D: Device + ?Sized>(
        &mut self,
        now: Instant,
        device: &mut D,
        mac: EthernetAddress,
        slot: usize,
        budget: &mut usize,
    ) -> bool {
        /// Ranges gathered per pass over the message's holes.
        const CHUNK: usize = 16;
        let top = self.config.highest_priority();
        let mut first = true;
        loop {
            let Some(r) = self.rpcs[slot].rpc.as_mut() else {
                return true;
            };
            let mut ranges: heapless::Vec<(u32, u32), CHUNK> = heapless::Vec::new();
            let mut more = false;
            match r.inp.as_mut() {
                Some(m) => {
                    let (asm, granted, from) = (m.asm, m.granted, m.resend_from);
                    // Waiting for pool space (no pages): the sender must wait too.
                    if let Some(buf) = m.buf.as_mut() {
                        let mut store = PoolStore::new(&mut self.pool, buf);
                        for g in asm.missing(granted, &mut store) {
                            let Ok(g) = g else { break };
                            if g.end <= from {
                                continue;
                            }
                            if ranges.is_full() {
                                more = true;
                                break;
                            }
                            let _ = ranges.push((g.start, g.end - g.start));
                        }
                    }
                }
                None => {
                    let _ = ranges.push((0, homa::RESEND_ALL));
                }
            }
            let (sport, dport, id, dst, local) =
                (r.local_port, r.peer_port, r.id, r.peer_addr, r.local);
            for &(offset, length) in ranges.iter() {
                if !first {
                    // The caller counts one frame; count the rest here.
                    if *budget <= 1 {
                        self.resend_resume(slot, offset);
                        return false;
                    }
                    *budget -= 1;
                }
                let Some(tx) = device.transmit(now) else {
                    self.resend_resume(slot, offset);
                    return false;
                };
                first = false;
                let repr = Repr {
                    sport,
                    dport,
                    sender_id: id,
                    kind: Kind::Resend {
                        offset,
                        length,
                        priority: top,
                    },
                };
                self.emit_control(now, tx, mac, dst, local, &repr);
                self.stats.resends_requested += 1;
            }
            let last_end = ranges
                .last()
                .map_or(0, |&(o, l)| o.saturating_add(l).max(o.saturating_add(1)));
            let Some(r) = self.rpcs[slot].rpc.as_mut() else {
                return true;
            };
            if more {
                if let Some(m) = r.inp.as_mut() {
                    m.resend_from = last_end;
                }
                continue;
            }
            if let Some(m) = r.inp.as_mut() {
                m.resend_from = 0;
            }
            r.resend_due = false;
            return true;
        }
    }

    /// A RESEND round stopped before the range at `offset`: the next one
    /// starts there, so no range is asked for twice in a round.
    fn resend_resume(&mut self, slot: usize, offset: u32) {
        if let Some(m) = self.rpcs[slot].rpc.as_mut().and_then(|r| r.inp.as_mut()) {
            // Ranges ending at or before `resend_from` are skipped, and the
            // ones before this end before its start.
            m.resend_from = offset;
        }
    }
}

/// The most DATA bytes one received control packet can make us send
/// again: a RESEND, or an RPC_UNKNOWN restarting a request, schedules again
/// the packets holding one range of at most this many bytes already sent
/// (fewer when `Config::unsched_bytes` is smaller, see `resend_cap`), and
/// a RESEND grants at most as many new ones.
///
/// A control packet costs its sender 28 to 70 bytes and proves nothing, so
/// what it buys must not grow with the message or the configuration: 64 KiB
/// covers the Linux default of 40,000 unscheduled bytes (and 60,000 at
/// 9,000-byte MTUs), about 1,000 times the packet that asks. Anything
/// larger is asked for again in the receiver's next RESEND round.
pub const RESEND_MAX_BYTES: u32 = 64 * 1024;

/// The most one RESEND may make a sender send: that many bytes again, and
/// that many new ones granted beyond what was sent (Linux takes the whole
/// range, docs/protocol.md 4.7).
///
/// A RESEND costs 37 bytes and proves nothing, so taken whole it buys a
/// megabyte (a 27,000-fold reflection towards whoever the RESEND names,
/// repeatable once the retransmission is out). The bound is what Homa
/// sends any receiver that has said nothing at all: the unscheduled bytes
/// (at least one packet of `seg` bytes), and never more than
/// [`RESEND_MAX_BYTES`]. An honest receiver rarely misses more in one
/// range (its window is granted a packet at a time as bytes arrive), and
/// when it does it asks again for what is still missing in its next
/// round, so recovery takes more rounds but never fails.
pub(super) fn resend_cap(unsched_bytes: u32, seg: u32) -> u32 {
    unsched_bytes.min(RESEND_MAX_BYTES).max(seg).max(1)
}
