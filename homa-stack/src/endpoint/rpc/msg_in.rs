//! The incoming message of an RPC: reassembly, granted bytes, bytes
//! remaining.

use crate::storage::{Holes, MessageBuf};

/// The incoming message of an RPC.
#[derive(Debug)]
pub(crate) struct MsgIn {
    /// Pool pages; `None` while waiting for pool space.
    pub buf: Option<MessageBuf>,
    pub length: u32,
    /// Which bytes arrived; the descriptors of the missing ones live in the
    /// message's own pages (`storage::holes`), so any loss pattern fits.
    pub asm: Holes,
    /// Where the next RESEND round continues, when the device or the budget
    /// cut the last one short (0: from the start).
    pub resend_from: u32,
    /// Needs grants beyond what the sender sends unscheduled: only such
    /// messages count against `max_incoming` (docs/protocol.md 4.4).
    pub scheduled: bool,
    /// Offset the sender may send up to (initially its unscheduled bytes).
    pub granted: u32,
    /// Priority of the last grant.
    pub grant_priority: u8,
    /// A GRANT for `granted` is waiting to be sent.
    pub grant_pending: bool,
}

impl MsgIn {
    pub fn received(&self) -> u32 {
        self.length - self.asm.bytes_remaining()
    }
    pub fn is_complete(&self) -> bool {
        self.buf.is_some() && self.asm.is_complete()
    }
    /// Granted bytes that have not arrived.
    pub fn outstanding(&self) -> u32 {
        self.granted.saturating_sub(self.received())
    }
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
}
