//! RESEND in one place (docs/protocol.md 4.7): what a receiver asks for when
//! its peer falls silent (one RESEND per missing range, exactly), and what
//! a sender does with a RESEND (queue exactly the packets asked for that
//! were sent; BUSY when it owes nothing yet), at most the unscheduled
//! bytes per RESEND.

use super::rpc::ResendVerdict;
use super::types::Sender;
use super::Endpoint;
use crate::phy::Device;
use crate::stats::DropReason;
use crate::time::Instant;
use crate::wire::homa::Kind;
use crate::wire::EthernetAddress;

impl<'a> Endpoint<'a> {
    pub(super) fn resend_pkt(&mut self, from: Sender, offset: u32, length: u32, priority: u8) {
        let Some(i) = self.find_rpc(from.addr, from.local_id, from.dport) else {
            self.push_answer(&from, Kind::RpcUnknown);
            return;
        };
        self.heard(i, from.mac);
        let top = self.config.highest_priority();
        let unsched = self.config.unsched_bytes;
        let interval = self.config.resend_interval;
        let verdict = self.with_rpc(i, |r, _| {
            r.on_resend(offset, length, priority, top, unsched, interval)
        });
        match verdict {
            Some(ResendVerdict::Busy) => {
                self.push_answer(&from, Kind::Busy);
            }
            Some(ResendVerdict::Rationed) => self.count_drop(DropReason::RateLimited),
            Some(ResendVerdict::Ignored) => self.count_drop(DropReason::WrongState),
            Some(ResendVerdict::Queued) | None => {}
        }
    }

    /// Asks for everything an incoming message misses: the next egress
    /// sends the RESENDs (see `emit_resends`). A flag, not a queue entry, so
    /// no RPC's request can be crowded out by others.
    pub(super) fn request_retrans(&mut self, slot: usize) {
        if let Some(mut r) = self.steady(slot) {
            r.ask_resend();
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
            let Some((mut r, pool)) = self.steady_pool(slot) else {
                return true;
            };
            let mut ranges: heapless::Vec<(u32, u32), CHUNK> = heapless::Vec::new();
            // Waiting for pool space (no pages): the sender must wait too.
            let more = r.resend_ranges(pool, &mut ranges);
            let (dst, local) = (r.peer_addr(), r.local());
            // Each RESEND's header: this one's with the range in.
            let mut repr = r.repr(Kind::NeedAck);
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
                repr.kind = Kind::Resend {
                    offset,
                    length,
                    priority: top,
                };
                self.emit_control(now, tx, mac, dst, local, &repr);
                self.stats.resends_requested += 1;
            }
            let last_end = ranges
                .last()
                .map_or(0, |&(o, l)| o.saturating_add(l).max(o.saturating_add(1)));
            let Some(mut r) = self.steady(slot) else {
                return true;
            };
            r.resend_sent(more, last_end);
            if !more {
                return true;
            }
        }
    }

    /// A RESEND round stopped before the range at `offset`: the next one
    /// starts there, so no range is asked for twice in a round.
    fn resend_resume(&mut self, slot: usize, offset: u32) {
        if let Some(mut r) = self.steady(slot) {
            r.resend_resume(offset);
        }
    }
}
