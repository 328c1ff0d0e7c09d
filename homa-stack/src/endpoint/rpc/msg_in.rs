//! The incoming message of an RPC: reassembly, granted bytes, bytes
//! remaining.

use crate::storage::{Holes, MessageBuf, Pool, PoolStore};

/// The incoming message of an RPC.
#[derive(Debug)]
pub(crate) struct MsgIn {
    /// Pool pages; `None` while waiting for pool space.
    pub(super) buf: Option<MessageBuf>,
    pub(super) length: u32,
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
    /// Priority of the last grant.
    pub(super) grant_priority: u8,
    /// A GRANT for `granted` is waiting to be sent.
    pub(super) grant_pending: bool,
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
            length,
            asm: Holes::new(length),
            resend_from: 0,
            scheduled: granted < length,
            granted,
            grant_priority: 0,
            grant_pending: false,
        }
    }

    /// The message's length in bytes.
    pub fn length(&self) -> u32 {
        self.length
    }
    /// Bytes received.
    pub fn received(&self) -> u32 {
        self.length - self.asm.bytes_remaining()
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

    /// The missing ranges below the grant from where the last round
    /// stopped, as (offset, length), into `ranges`; none while the message
    /// waits for pool pages. True when more remain than `ranges` holds.
    pub(super) fn missing<const N: usize>(
        &mut self,
        pool: &mut Pool<'_>,
        ranges: &mut heapless::Vec<(u32, u32), N>,
    ) -> bool {
        let (asm, granted, from) = (self.asm, self.granted, self.resend_from);
        let Some(buf) = self.buf.as_mut() else {
            return false;
        };
        let mut store = PoolStore::new(pool, buf);
        for g in asm.missing(granted, &mut store) {
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
