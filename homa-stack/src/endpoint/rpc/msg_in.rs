//! The incoming message of an RPC: reassembly, granted bytes, bytes
//! remaining.

use crate::storage::{Holes, MessageBuf, Pool, PoolStore};

/// The most doublings of a slow sender's RESEND rounds (see [`Pace`]):
/// rounds after 40 and 80 ticks of silence at the defaults, so even the
/// most patient receiver asks twice before the 100-tick timeout. (It fits
/// `Pace`'s two bits.)
const MAX_PATIENCE: u8 = 3;

/// How a message's sender keeps pace with our RESEND rounds, in one byte
/// (it keeps the RPC slot within its size): how often it showed itself
/// slower than them, up to [`MAX_PATIENCE`] (the low two bits), and how
/// many ticks passed since new bytes last came, up to 3 (the next two).
///
/// A sender shows itself slower when it retransmits bytes we already had,
/// more than a whole tick after new bytes last came: our RESEND crossed
/// bytes it was sending anyway, and answering took its next turn to send,
/// so the next round, a silence later, would cross its next bytes too. (A
/// copy the wire duplicated or held back comes within a tick of the one
/// that brought the bytes, and shows nothing.) Each showing doubles the
/// wait for RESEND rounds (see `Rpc::on_tick`), and a patient round asks
/// for one packet of the missing tail, not all of it. A retransmission that
/// brings bytes we missed (a loss: asking was right) ends the patience.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pace(u8);

impl Pace {
    /// The patience bits.
    const PATIENCE: u8 = 0b11;
    /// One tick in the tick count, above the patience bits.
    const TICK: u8 = 0b100;
    /// The tick count's bits.
    const TICKS: u8 = 0b1100;

    /// A new message's sender: no patience, no tick counted.
    pub(super) const NEW: Pace = Pace(0);

    /// Doublings of the wait for RESEND rounds.
    pub(super) fn patience(self) -> u8 {
        self.0 & Self::PATIENCE
    }

    /// A tick passed.
    pub(super) fn tick(&mut self) {
        if self.0 & Self::TICKS != Self::TICKS {
            self.0 += Self::TICK;
        }
    }

    /// New bytes came, in a retransmission or not.
    pub(super) fn new_bytes(&mut self, retransmit: bool) {
        self.0 = if retransmit { 0 } else { self.patience() };
    }

    /// Bytes we had came again, in a retransmission or not.
    pub(super) fn duplicate(&mut self, retransmit: bool) {
        if retransmit && self.0 & Self::TICKS >= 2 * Self::TICK {
            let patience = (self.patience() + 1).min(MAX_PATIENCE);
            self.0 = (self.0 & Self::TICKS) | patience;
        }
    }
}

/// The incoming message of an RPC.
#[derive(Debug)]
pub(crate) struct MsgIn {
    /// Pool pages; `None` while waiting for pool space.
    pub(super) buf: Option<MessageBuf>,
    /// Which bytes arrived; the descriptors of the missing ones live in the
    /// message's own pages (`storage::holes`), so any loss pattern fits.
    pub(super) asm: Holes,
    /// Where the next RESEND round continues, when the device or the budget
    /// cut the last one short (0: from the start).
    pub(super) resend_from: u32,
    /// Needs grants beyond what the sender sends unscheduled: only such
    /// messages count against `max_incoming` (docs/protocol.md 4.4).
    pub(super) scheduled: bool,
    /// Offset the sender may send up to (initially its unscheduled bytes).
    pub(super) granted: u32,
    /// Offset below which the bytes were granted at least a RESEND
    /// interval before the next RESEND round can come: what that round
    /// asks for (the rest may still be on its way). Raised to `granted`
    /// whenever the sender shows progress, and after each round (see
    /// `Rpc::on_tick`).
    pub(super) due: u32,
    /// Priority of the last grant.
    pub(super) grant_priority: u8,
    /// A GRANT for `granted` is waiting to be sent.
    pub(super) grant_pending: bool,
    /// How the sender keeps pace with our RESEND rounds (see [`Pace`]).
    pub(super) pace: Pace,
}

impl MsgIn {
    /// A new incoming message; `incoming` is the sender's unscheduled bytes
    /// as the first packet seen announces them. That claim is not checked,
    /// so it counts for at most our own `unsched_bytes`: a forged packet
    /// claiming a whole megabyte cannot take the grant headroom (bytes that
    /// arrive beyond it are still accepted, grants are not enforced).
    pub(in crate::endpoint) fn new(length: u32, incoming: u32, unsched_bytes: u32) -> MsgIn {
        let granted = incoming.min(length).min(unsched_bytes);
        MsgIn {
            buf: None,
            asm: Holes::new(length),
            resend_from: 0,
            scheduled: granted < length,
            granted,
            due: granted,
            grant_priority: 0,
            grant_pending: false,
            pace: Pace::NEW,
        }
    }

    /// The message's length in bytes.
    pub fn length(&self) -> u32 {
        self.asm.message_length()
    }
    /// Bytes received.
    pub fn received(&self) -> u32 {
        self.asm.bytes_received()
    }
    /// Offset the sender may send up to.
    pub fn granted(&self) -> u32 {
        self.granted
    }
    /// Its pool pages; `None` while it waits for pool space.
    pub fn buf(&self) -> Option<&MessageBuf> {
        self.buf.as_ref()
    }
    /// Whether every byte arrived (into pool pages).
    pub fn is_complete(&self) -> bool {
        self.buf.is_some() && self.asm.is_complete()
    }
    /// Granted bytes that have not arrived.
    pub fn outstanding(&self) -> u32 {
        self.granted.saturating_sub(self.received())
    }

    /// The missing ranges that are due (every hole, and the tail up to
    /// `due`) from where the last round stopped, as (offset, length), into
    /// `ranges`; none while the message waits for pool pages. True when
    /// more remain than `ranges` holds.
    ///
    /// A hole is always due: bytes beyond it arrived, so the sender sent
    /// it before a silence of at least a RESEND interval. The tail is due
    /// only as far as it was granted that long ago: a slow sender may not
    /// have sent the rest yet, and asking for it would have it sent twice.
    pub(super) fn missing<const N: usize>(
        &mut self,
        pool: &mut Pool<'_>,
        ranges: &mut heapless::Vec<(u32, u32), N>,
    ) -> bool {
        let (asm, mut due, from) = (self.asm, self.due, self.resend_from);
        if self.pace.patience() > 0 {
            // A slow sender is asked only for its first missing byte's
            // packet: a round that crosses its sending costs it that one
            // packet, not the turn it sends in.
            due = due.min(asm.recv_end().saturating_add(1));
        }
        let Some(buf) = self.buf.as_mut() else {
            return false;
        };
        let mut store = PoolStore::new(pool, buf);
        for g in asm.missing(due, &mut store) {
            let Ok(g) = g else { break };
            if g.end <= from {
                continue;
            }
            if ranges.is_full() {
                return true;
            }
            let _ = ranges.push((g.start, g.end - g.start));
        }
        false
    }
}

/// Whether the first bytes of a message arriving at `offset` would leave a
/// hole before them too short to hold its descriptor (`storage::holes`):
/// such a packet can never be accepted, so it must not begin anything.
pub(in crate::endpoint) fn leaves_tiny_hole(offset: u32) -> bool {
    offset != 0 && offset < crate::storage::holes::DESCRIPTOR_LEN
}
