//! The control queue: GRANT-less control packets (RESEND answers, BUSY,
//! RPC_UNKNOWN, CUTOFFS, ACK) waiting for the next egress, at most
//! `CTRL_QUEUE` of them; a full queue drops and counts (timers recover).

use super::timers::Timer;
use super::types::{Local, Sender};
use super::{peer, Endpoint};
use crate::phy::TxToken;
use crate::time::Instant;
use crate::wire::homa::{Ack, Kind, Repr};
use crate::wire::{EthernetAddress, IpAddr};

/// Control packets that can wait for transmission at once.
pub(super) const CTRL_QUEUE: usize = 32;

/// A control packet waiting to be sent.
#[derive(Debug, Clone)]
pub(super) struct Ctrl {
    pub(super) addr: IpAddr,
    /// Link address when known at queue time (replies to strangers).
    pub(super) link_addr: Option<EthernetAddress>,
    pub(super) sport: u16,
    pub(super) dport: u16,
    pub(super) sender_id: u64,
    pub(super) kind: CtrlKind,
    /// Our address it leaves from (an answer: the one the question came to).
    pub(super) local: Local,
}

#[derive(Debug, Clone)]
pub(super) enum CtrlKind {
    Resend {
        offset: u32,
        length: u32,
        priority: u8,
    },
    RpcUnknown,
    Busy,
    Cutoffs,
    /// An ACK packet of a full batch of acks: the first names the RPC in
    /// the header (`sender_id` and `dport` come from it), the rest are its
    /// entries.
    Acks(heapless::Vec<Ack, { peer::ACK_BATCH }>),
    /// An ACK packet of whatever acks wait for the peer when it is sent
    /// (answering NEED_ACK promptly without one packet per NEED_ACK).
    AcksWaiting,
}

impl Sender {
    /// A control packet answering this one: ports swapped, our id.
    pub(super) fn answer(&self, kind: CtrlKind) -> Ctrl {
        Ctrl {
            addr: self.addr,
            link_addr: Some(self.mac),
            sport: self.dport,
            dport: self.sport,
            sender_id: self.local_id,
            kind,
            local: self.local,
        }
    }
}

impl<'a> Endpoint<'a> {
    /// Queues a control packet; false (and a counted drop) when the queue
    /// is full.
    pub(super) fn push_ctrl(&mut self, c: Ctrl) -> bool {
        if c.link_addr.is_none() {
            // Its peer may need resolving first (see `egress_arp`).
            self.timers.set(Timer::Resolve, Instant::ZERO);
        }
        if self.ctrl.push_back(c).is_err() {
            self.count_drop(crate::stats::DropReason::ControlQueueFull);
            return false;
        }
        true
    }

    /// Queues `kind` as the answer to the packet `from` describes. Not
    /// inlined: each inlined answer built a whole `Ctrl` of its own.
    #[inline(never)]
    pub(super) fn push_answer(&mut self, from: &Sender, kind: CtrlKind) -> bool {
        self.push_ctrl(from.answer(kind))
    }

    pub(super) fn emit_ctrl<T: TxToken>(
        &mut self,
        now: Instant,
        tx: T,
        mac: EthernetAddress,
        c: Ctrl,
    ) {
        let (mut sender_id, mut dport) = (c.sender_id, c.dport);
        let kind = match c.kind {
            CtrlKind::Resend {
                offset,
                length,
                priority,
            } => Kind::Resend {
                offset,
                length,
                priority,
            },
            CtrlKind::RpcUnknown => Kind::RpcUnknown,
            CtrlKind::Busy => Kind::Busy,
            CtrlKind::Cutoffs => Kind::Cutoffs {
                unsched_cutoffs: self.config.announced_cutoffs(),
                version: self.config.cutoff_version,
            },
            kind @ (CtrlKind::Acks(_) | CtrlKind::AcksWaiting) => {
                let mut batch = match kind {
                    CtrlKind::Acks(batch) => batch,
                    _ => {
                        // What waits for the peer now (some may have ridden
                        // on DATA since this was queued).
                        let Some(pi) = self.find_peer(c.addr) else {
                            return;
                        };
                        let Some(peer) = self
                            .peers
                            .get_mut(usize::from(pi))
                            .and_then(|s| s.peer.as_mut())
                        else {
                            return;
                        };
                        peer.ack_flush_queued = false;
                        core::mem::take(&mut peer.acks)
                    }
                };
                // The first ack names the RPC in the header.
                let Some(first) = batch.pop() else {
                    return;
                };
                sender_id = first.client_id;
                dport = first.server_port;
                Kind::Ack {
                    acks: batch.into_iter().collect(),
                }
            }
        };
        let repr = Repr {
            sport: c.sport,
            dport,
            sender_id,
            kind,
        };
        self.emit_control(now, tx, mac, c.addr, c.local, &repr);
    }
}
