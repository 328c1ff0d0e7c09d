//! The control queue: control packets that answer a received one (BUSY,
//! RPC_UNKNOWN, CUTOFFS) and ACKs, waiting for the next egress as the
//! `wire::homa` packets they go out as, at most `CTRL_QUEUE` of them; a
//! full queue drops and counts (timers recover). A BUSY or RPC_UNKNOWN
//! already queued for an RPC answers every packet naming it until it goes.

use super::timers::Timer;
use super::types::{Local, Sender};
use super::Endpoint;
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
    /// Our address it leaves from (an answer: the one the question came to).
    pub(super) local: Local,
    pub(super) packet: CtrlPacket,
}

/// What a queued control packet says.
#[derive(Debug, Clone)]
pub(super) enum CtrlPacket {
    /// The packet as it goes.
    Homa(Repr<'static>),
    /// An ACK packet, from our port `sport`, of whatever acks wait for the
    /// peer when it is sent (answering NEED_ACK promptly without one packet
    /// per NEED_ACK): known only then, as acks may ride on DATA meanwhile.
    AcksWaiting { sport: u16 },
}

impl Ctrl {
    /// The same BUSY or RPC_UNKNOWN as `other`, a reply whose every copy
    /// says the same: to the same address and link address, from the same
    /// address and port of ours, naming the same RPC. (Compared field by
    /// field, not by a derived `PartialEq`, whose code for every kind of
    /// packet the firmware would carry.)
    // Out of line on firmware: the queue's two halves each inlined it.
    #[cfg_attr(target_os = "none", inline(never))]
    fn same_reply(&self, other: &Ctrl) -> bool {
        let (CtrlPacket::Homa(a), CtrlPacket::Homa(b)) = (&self.packet, &other.packet) else {
            return false;
        };
        matches!(
            (&a.kind, &b.kind),
            (Kind::Busy, Kind::Busy) | (Kind::RpcUnknown, Kind::RpcUnknown)
        ) && (a.sport, a.dport, a.sender_id) == (b.sport, b.dport, b.sender_id)
            && self.addr == other.addr
            && self.link_addr == other.link_addr
            && self.local == other.local
    }
}

impl Sender {
    /// A control packet answering this one: ports swapped, our id.
    pub(super) fn answer(&self, kind: Kind<'static>) -> Ctrl {
        Ctrl {
            addr: self.addr,
            link_addr: Some(self.mac),
            local: self.local,
            packet: CtrlPacket::Homa(Repr {
                sport: self.dport,
                dport: self.sport,
                sender_id: self.local_id,
                kind,
            }),
        }
    }
}

/// The ACK packet of a batch of acks from our port `sport`: the last ack
/// names the RPC in the header, the others are its entries; `None` for no
/// acks.
#[cold]
pub(super) fn ack_packet(sport: u16, batch: &[Ack]) -> Option<Repr<'static>> {
    let (header, entries) = batch.split_last()?;
    let mut repr = Repr {
        sport,
        dport: header.server_port,
        sender_id: header.client_id,
        kind: Kind::Ack {
            acks: heapless::Vec::new(),
        },
    };
    // Filled in place (no copy of the entries through the stack). Never
    // full: a batch holds one ack more than an ACK has entries.
    if let Kind::Ack { acks } = &mut repr.kind {
        for &a in entries {
            let _ = acks.push(a);
        }
    }
    Some(repr)
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

    /// Whether a queued control packet waits for the link address of
    /// `addr` (its peer is asked for once, not until it answers).
    // Always inlined: on the firmware a call costs more code than the body.
    #[inline(always)]
    pub(super) fn ctrl_waits_for(&self, addr: IpAddr) -> bool {
        self.ctrl
            .iter()
            .any(|c| c.addr == addr && c.link_addr.is_none())
    }

    /// Queues `kind` as the answer to the packet `from` describes. Not
    /// inlined: each inlined answer built a whole `Ctrl` of its own.
    ///
    /// A BUSY or RPC_UNKNOWN is one reply per RPC, not per packet: when the
    /// same one already waits (to the same address and link address, from
    /// the same address of ours, naming the same RPC), it answers this
    /// packet too, and this one is counted in `Stats::replies_coalesced`.
    /// A peer that queued several RESENDs during a stall then gets one
    /// answer, not a BUSY each, or a second RPC_UNKNOWN that would reach it
    /// after the first made it restart the RPC. The queue holds at most
    /// `CTRL_QUEUE` packets, so the look costs that many comparisons.
    #[inline(never)]
    pub(super) fn push_answer(&mut self, from: &Sender, kind: Kind<'static>) -> bool {
        let answer = from.answer(kind);
        if self.ctrl.iter().any(|c| c.same_reply(&answer)) {
            self.stats.replies_coalesced += 1;
            return true;
        }
        self.push_ctrl(answer)
    }

    /// Sends a queued control packet to `mac`.
    pub(super) fn emit_ctrl<T: TxToken>(
        &mut self,
        now: Instant,
        tx: T,
        mac: EthernetAddress,
        c: Ctrl,
    ) {
        let repr = match c.packet {
            CtrlPacket::Homa(repr) => repr,
            CtrlPacket::AcksWaiting { sport } => {
                let Some(repr) = self.take_waiting_acks(c.addr, sport) else {
                    return;
                };
                repr
            }
        };
        self.emit_control(now, tx, mac, c.addr, c.local, &repr);
    }

    /// The ACK packet, from our port `sport`, of the acks waiting for the
    /// peer at `addr`, which it takes (its queued ACK packet is leaving);
    /// `None` for none, or a peer we no longer hold.
    fn take_waiting_acks(&mut self, addr: IpAddr, sport: u16) -> Option<Repr<'static>> {
        let pi = self.find_peer(addr)?;
        let peer = self.peers.get_mut(usize::from(pi))?.peer.as_mut()?;
        peer.ack_flush_queued = false;
        let repr = ack_packet(sport, &peer.acks);
        peer.acks.clear();
        repr
    }
}
