//! RESEND in one place (docs/protocol.md 4.7): what a receiver asks for when
//! its peer falls silent (one RESEND per missing range, exactly), and what
//! a sender does with a RESEND (queue exactly the packets asked for that
//! were sent; BUSY when it owes nothing yet), at most the unscheduled
//! bytes per RESEND.

use super::rpc::State;
use super::types::Sender;
use super::{CtrlKind, Endpoint};
use crate::phy::Device;
use crate::stats::Drop;
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
            self.push_answer(&from, CtrlKind::RpcUnknown);
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
                self.push_answer(&from, CtrlKind::Busy);
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
            self.push_answer(&from, CtrlKind::Busy);
            return Some(i);
        }
        if !out.request_resend(offset, end, priority.min(top), cap, interval) {
            // Still a sign of life (above), but no more bytes this interval.
            net_debug!("homa: RESEND for rpc {}: over its ration", r.id);
            self.count_drop(Drop::RateLimited);
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

/// How many times a message's [`resend_cap`] bytes may go out again, by
/// RESEND or by restarts after RPC_UNKNOWN, without its receiver showing
/// progress (a GRANT above the highest one yet earns back what it grants
/// beyond).
///
/// A receiver that misses bytes asks for them once per
/// `Config::resend_interval`, and each answer delivers most of them: at
/// 30 % loss a window goes out again about 0.4 times, and what a longer
/// message needs again its receiver pays for with GRANTs as the bytes
/// arrive. A forger that names the RPC buys this many windows, then as
/// much as the GRANTs it also forges climb: at most the message once more
/// for each restart the server asks for (`MAX_RESTARTS`).
pub(crate) const RESEND_WINDOWS: u32 = 8;

/// What one outgoing message may still send again (see
/// [`RESEND_WINDOWS`]): forged RESENDs or RPC_UNKNOWNs from the peer's
/// address, however many, buy at most [`RESEND_PER_INTERVAL`] windows of
/// [`resend_cap`] bytes per RESEND interval (an honest receiver asks once
/// per interval) and [`RESEND_WINDOWS`] of them beyond what the receiver's
/// GRANTs earned back. Counted in packets and KiB to keep the RPC slot
/// small.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ration {
    /// Packets earned back by GRANTs less packets sent again.
    balance: i16,
    /// Packets left in the current interval.
    window: u16,
    /// Ticks before a new interval starts.
    hold: u16,
    /// The highest GRANT offset from the receiver, in KiB.
    heard: u16,
}

/// How many windows of [`resend_cap`] bytes one message may send again per
/// RESEND interval. An honest receiver's round asks for every range it
/// misses below its grant, which after a burst of losses can be more than
/// one window; a forger gains only speed, not bytes (those
/// [`RESEND_WINDOWS`] bounds).
pub(crate) const RESEND_PER_INTERVAL: u32 = 2;

/// `bytes` in packets of `seg` bytes, rounded up, saturating.
fn packets(bytes: u32, seg: u32) -> u16 {
    u16::try_from(bytes.div_ceil(seg.max(1))).unwrap_or(u16::MAX)
}

impl Ration {
    /// A message that has gone out no more than once.
    pub const fn new() -> Ration {
        Ration {
            balance: 0,
            window: 0,
            hold: 0,
            heard: 0,
        }
    }

    /// One tick passed.
    pub fn tick(&mut self) {
        self.hold = self.hold.saturating_sub(1);
    }

    /// How many bytes a request to send `want` bytes (in packets of `seg`)
    /// again may have now, for windows of `cap` bytes and RESENDs
    /// `interval` ticks apart; the caller then `spend`s what it queued.
    pub fn allow(&mut self, want: u32, cap: u32, interval: u32, seg: u32) -> u32 {
        if self.hold == 0 && want > 0 {
            // The receiver's next round comes `interval` ticks after this
            // one by its own clock: one tick less here keeps the two
            // clocks' phases from holding back an honest round.
            self.hold = u16::try_from(interval.saturating_sub(1).max(1)).unwrap_or(u16::MAX);
            self.window = packets(cap.saturating_mul(RESEND_PER_INTERVAL), seg);
        }
        let total = i32::from(packets(cap.saturating_mul(RESEND_WINDOWS), seg));
        let credit = u32::try_from(total + i32::from(self.balance)).unwrap_or(0);
        let allowed = credit.min(u32::from(self.window));
        want.min(allowed.saturating_mul(seg.max(1)))
    }

    /// `n` packets were queued to go out again.
    pub fn spend(&mut self, n: u32) {
        let n = u16::try_from(n).unwrap_or(u16::MAX);
        self.window = self.window.saturating_sub(n);
        self.balance = self
            .balance
            .saturating_sub(i16::try_from(n).unwrap_or(i16::MAX));
    }

    /// The receiver granted up to `offset`: what it granted beyond the
    /// highest GRANT yet it is taking in, so as many bytes (in packets of
    /// `seg`) may go out again.
    pub fn granted(&mut self, offset: u32, cap: u32, seg: u32) {
        let kib = u16::try_from(offset >> 10).unwrap_or(u16::MAX);
        if kib > self.heard {
            let more = packets(u32::from(kib - self.heard) << 10, seg);
            self.heard = kib;
            // Kept for later losses, but no more than the reserve: what
            // an early GRANT earned must not buy a forger a whole message.
            let most =
                i16::try_from(packets(cap.saturating_mul(RESEND_WINDOWS), seg)).unwrap_or(i16::MAX);
            self.balance = self
                .balance
                .saturating_add(i16::try_from(more).unwrap_or(i16::MAX))
                .min(most);
        }
    }

    /// The receiver lost the message and starts over: its GRANTs count
    /// from the start again.
    pub fn restart(&mut self) {
        self.heard = 0;
    }
}
