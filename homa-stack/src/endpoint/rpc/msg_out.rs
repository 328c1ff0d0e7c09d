//! The outgoing message of an RPC: packetisation, granted bytes, the next
//! byte to send, priorities, and what it may send again.

use crate::storage::resend::{PacketGrid, ResendSet};
use crate::storage::MessageBuf;

/// How many times a message's [`resend_cap`] bytes may go out again, by
/// RESEND or by a request's first packet knocking again after
/// RPC_UNKNOWN, without its receiver showing progress (a GRANT above the
/// highest one yet earns back what it grants beyond).
///
/// A receiver that misses bytes asks for them once per
/// `Config::resend_interval`, and each answer delivers most of them: at
/// 30 % loss a window goes out again about 0.4 times, and what a longer
/// message needs again its receiver pays for with GRANTs as the bytes
/// arrive. A forger that names the RPC buys this many windows, then as
/// much as the GRANTs it also forges climb: at most the message once more
/// (GRANTs earn only above the highest one yet, and a request started
/// over by RPC_UNKNOWN goes again as first transmissions, not from here).
///
/// A receiver whose NIC drops most of every burst needs more than that
/// after it has granted the whole message, and has nothing left to pay
/// with: each RESEND interval in which it asks refills a spent reserve by
/// one packet, so its RPC still completes, slowly, instead of starving
/// until it times out. That is one full-size frame for at least one RESEND
/// (a 71-byte frame): a forger who names the RPC gains one per interval,
/// however many RESENDs it sends, and only for the RESEND life
/// (`RESEND_LIFE_TIMEOUTS` silence timeouts without new bytes to send:
/// then a server RPC is freed, and a client's request sends nothing again
/// until it has).
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
    /// Packets earned back by GRANTs (and RESEND intervals, while
    /// negative) less packets sent again.
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
            // A spent reserve refills by a packet each interval (see
            // `RESEND_WINDOWS`).
            self.balance += i16::from(self.balance < 0);
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
}

/// The outgoing message of an RPC.
#[derive(Debug)]
pub(crate) struct MsgOut {
    pub(super) buf: MessageBuf,
    pub(super) length: u32,
    /// Payload bytes per packet for this message (fixed for its life so
    /// retransmissions keep the original boundaries).
    pub(super) seg: u32,
    /// Bytes sent without grants.
    pub(super) unscheduled: u32,
    /// Bytes the receiver lets us send.
    pub(super) granted: u32,
    /// First byte not yet handed to the NIC (Linux `tx_end`).
    pub(super) next_xmit: u32,
    /// Priority of scheduled packets, from the last GRANT.
    pub(super) sched_priority: u8,
    /// Packets to send again (from RESEND or RPC_UNKNOWN), exactly those
    /// asked for: a bitmap over this message's packet grid.
    pub(super) resend: ResendSet,
    /// What RESENDs and knocks after RPC_UNKNOWN may still make it send
    /// again.
    pub(super) ration: Ration,
}

impl MsgOut {
    /// A message of `length` bytes in `buf`, cut in packets of `seg`
    /// payload bytes (until its first transmission cuts it for the device
    /// as it is then), of which `unscheduled` go without grants.
    #[cfg_attr(not(target_os = "none"), inline(always))]
    #[cfg_attr(target_os = "none", inline(never))]
    pub(in crate::endpoint) fn new(
        buf: MessageBuf,
        length: u32,
        seg: u32,
        unscheduled: u32,
    ) -> MsgOut {
        MsgOut {
            buf,
            length,
            seg,
            unscheduled,
            granted: unscheduled,
            next_xmit: 0,
            sched_priority: 0,
            resend: ResendSet::new(PacketGrid::new(seg, unscheduled, length)),
            ration: Ration::new(),
        }
    }

    /// The message's length in bytes.
    pub fn length(&self) -> u32 {
        self.length
    }
    /// Payload bytes per packet.
    pub fn seg(&self) -> u32 {
        self.seg
    }
    /// Bytes sent without grants.
    pub fn unscheduled(&self) -> u32 {
        self.unscheduled
    }
    /// Bytes the receiver lets us send.
    pub fn granted(&self) -> u32 {
        self.granted
    }
    /// First byte not yet handed to the NIC.
    pub fn next_xmit(&self) -> u32 {
        self.next_xmit
    }
    /// Priority of scheduled packets, from the last GRANT.
    pub fn sched_priority(&self) -> u8 {
        self.sched_priority
    }
    /// Whether packets wait to be sent again.
    pub fn has_resend(&self) -> bool {
        !self.resend.is_empty()
    }
    /// The next packet to send again, and its priority.
    pub fn next_resend(&self) -> Option<(u32, u32, u8)> {
        let (start, end) = self.resend.next(0)?;
        Some((start, end, self.resend.priority()))
    }

    /// Bytes not yet sent once.
    pub fn bytes_left(&self) -> u32 {
        self.length - self.next_xmit
    }

    /// Whether a first transmission is allowed now: the next packet starts
    /// below the granted offset (a whole packet goes even if the grant ends
    /// inside it).
    pub fn can_send_new(&self) -> bool {
        self.next_xmit < self.length && self.next_xmit < self.granted
    }

    /// Queues the packets of `[start, end)` (cut at the bytes sent so far)
    /// to be sent again, as far as the message's ration allows for
    /// windows of `cap` bytes every `interval` ticks; packets already
    /// queued are not queued twice. False when the ration allowed nothing.
    pub(super) fn request_resend(
        &mut self,
        start: u32,
        end: u32,
        priority: u8,
        cap: u32,
        interval: u32,
    ) -> bool {
        let end = end.min(self.next_xmit);
        if start >= end {
            return true;
        }
        let allowed = self.ration.allow(end - start, cap, interval, self.seg);
        if allowed == 0 {
            return false;
        }
        let added = self
            .resend
            .add(start, start + allowed, self.next_xmit, priority);
        self.ration.spend(added);
        true
    }

    /// The receiver lost the message (RPC_UNKNOWN): it goes again as a new
    /// one, cut afresh, its first `cap` bytes at once (at most its
    /// unscheduled bytes) and the rest as the receiver grants or asks for
    /// it. What it may send again stays as spent, and GRANTs earn nothing
    /// below the highest one yet: the bytes go again as first
    /// transmissions, paced by the receiver, not from the ration.
    pub(super) fn start_over(&mut self, cap: u32) {
        self.next_xmit = 0;
        self.granted = self.unscheduled.min(cap);
        self.recut();
    }

    /// Fixes the packet size at the first transmission. Nothing has gone
    /// out yet, so nothing is marked to go again: the set is re-cut in
    /// place, and left alone when the size is the one it was made for
    /// (the usual case: the device's packet size did not change since).
    pub(super) fn cut(&mut self, seg: u32) {
        // The firmware re-cuts every time: there the compare would cost
        // up to 208 bytes of code for a rebuild once per message.
        if cfg!(target_os = "none") || seg != self.seg {
            self.seg = seg;
            self.recut();
        }
    }

    /// An empty resend set for the message's grid: written in place on
    /// hosts (see `ResendSet::reset`), built anew on the firmware, whose
    /// one copy of `ResendSet::new` is the smaller code.
    #[inline(always)]
    fn recut(&mut self) {
        let grid = PacketGrid::new(self.seg, self.unscheduled, self.length);
        if cfg!(target_os = "none") {
            self.resend = ResendSet::new(grid);
        } else {
            self.resend.reset(grid);
        }
    }
}

/// See [`MsgOut::packet_at`]; the grid's one home is `storage::resend`.
pub(crate) fn packet_at(offset: u32, seg: u32, unscheduled: u32, length: u32) -> (u32, u32) {
    crate::storage::resend::packet_at(offset, seg, unscheduled, length)
}

/// The most DATA bytes one received control packet can make us send
/// again: a RESEND schedules again the packets holding one range of at
/// most this many bytes already sent (fewer when `Config::unsched_bytes`
/// is smaller, see `resend_cap`) and grants at most as many new ones, and
/// an RPC_UNKNOWN starting a request over sends at most as many of its
/// first bytes at once.
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
pub(in crate::endpoint) fn resend_cap(unsched_bytes: u32, seg: u32) -> u32 {
    unsched_bytes.min(RESEND_MAX_BYTES).max(seg).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packets_split_at_the_unscheduled_limit() {
        // 1424-byte packets, 40000 unscheduled: packet 28 is cut at 40000.
        assert_eq!(packet_at(0, 1424, 40_000, 100_000), (0, 1424));
        assert_eq!(packet_at(39_871, 1424, 40_000, 100_000), (38_448, 39_872));
        assert_eq!(packet_at(39_872, 1424, 40_000, 100_000), (39_872, 40_000));
        assert_eq!(packet_at(39_999, 1424, 40_000, 100_000), (39_872, 40_000));
        assert_eq!(packet_at(40_000, 1424, 40_000, 100_000), (40_000, 41_424));
        assert_eq!(packet_at(99_999, 1424, 40_000, 100_000), (99_808, 100_000));
    }

    /// Cutting for the packet size it was made for leaves the message as
    /// it is; another size re-cuts its resend set; starting over empties
    /// the set: each as a new message of that size would be.
    #[test]
    fn cut_and_start_over_leave_the_set_a_new_one_would_have() {
        let mut mem = [0u8; crate::storage::buffer_len_for(200, 1024)];
        let mut pool = crate::storage::Pool::new(&mut mem[..], 1024).unwrap();
        let mut m = MsgOut::new(pool.alloc(100_000).unwrap(), 100_000, 1424, 10_000);
        let fresh = |seg| ResendSet::new(PacketGrid::new(seg, 10_000, 100_000));
        m.cut(1424);
        assert_eq!((m.seg, &m.resend), (1424, &fresh(1424)));
        m.cut(1000);
        assert_eq!((m.seg, &m.resend), (1000, &fresh(1000)));
        m.next_xmit = 50_000;
        assert!(m.request_resend(0, 20_000, 4, 64 * 1024, 10));
        assert!(m.has_resend());
        assert_eq!(m.next_resend(), Some((0, 1000, 4)));
        m.start_over(10_000);
        assert_eq!((m.next_xmit, m.granted), (0, 10_000));
        assert!(!m.has_resend());
        assert_eq!(m.resend, fresh(1000));
        pool.free(m.buf);
    }

    #[test]
    fn short_messages_are_one_packet() {
        assert_eq!(packet_at(0, 1424, 100, 100), (0, 100));
        assert_eq!(packet_at(0, 1424, 1424, 1424), (0, 1424));
        assert_eq!(packet_at(1424, 1424, 1425, 1425), (1424, 1425));
    }

    #[test]
    fn packetisation_covers_every_byte_once() {
        for &(len, unsched) in &[
            (1u32, 1u32),
            (40_001, 40_000),
            (100_000, 40_000),
            (3000, 3000),
            (1_000_000, 40_000),
        ] {
            let mut off = 0;
            let mut n = 0;
            while off < len {
                let (s, e) = packet_at(off, 1424, unsched, len);
                assert_eq!(s, off);
                assert!(e > s && e - s <= 1424);
                off = e;
                n += 1;
            }
            assert_eq!(off, len);
            assert!(n >= len.div_ceil(1424));
        }
    }
}
