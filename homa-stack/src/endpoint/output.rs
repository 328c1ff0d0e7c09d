//! Egress: control packets first (priority 7), then GRANTs from the
//! scheduler, then DATA in the pacer's order, while the device takes frames
//! and the NIC-queue estimate allows. Each frame is built in place in the
//! transmit token's buffer; message bytes are copied once, from the pool.

use super::iface::{emit_headers, link_header_len, Route, IPV4_HEADER_LEN};
use super::rpc::State;
use super::{grant, Endpoint};
use crate::phy::{Device, PacketMeta, TxToken};
use crate::stats::Drop;
use crate::storage::PoolStore;
use crate::time::Instant;
use crate::wire::homa::{self, DataHeader, Kind, Repr};
use crate::wire::{EthernetAddress, IpAddr, IpProtocol, Ipv4Addr};

/// States in which an RPC sends its outgoing message.
fn sending(state: State) -> bool {
    matches!(
        state,
        State::ClientOutgoing | State::ClientIncoming | State::ServerOutgoing
    )
}

/// A DATA packet chosen by the pacer.
struct DataPick {
    slot: usize,
    start: u32,
    end: u32,
    priority: u8,
    retransmit: bool,
}

impl<'a> Endpoint<'a> {
    pub(super) fn egress<D: Device + ?Sized>(&mut self, now: Instant, device: &mut D) {
        self.throttled_until = None;
        self.egress_arp(now, device);
        let mut budget = self.config.max_tx_per_poll;
        while budget > 0 {
            let Some(c) = self.ctrl.front() else { break };
            let Some(mac) = c.link_addr.or_else(|| self.link_addr_of(c.addr)) else {
                self.ctrl.pop_front();
                self.count_drop(Drop::Unresolved);
                continue;
            };
            let Some(tx) = device.transmit(now) else {
                return;
            };
            let Some(c) = self.ctrl.pop_front() else {
                break;
            };
            self.emit_ctrl(now, tx, mac, &c);
            budget -= 1;
        }
        if self.grants_dirty {
            self.grants_dirty = false;
            self.schedule_grants();
        }
        if now >= self.next_fifo_grant {
            self.fifo_grant();
            self.next_fifo_grant = grant::next_fifo(&self.config, self.link_mbps, now);
        }
        if !self.emit_rpc_control(now, device, &mut budget) {
            return;
        }
        let mut prev: Option<DataPick> = None;
        while budget > 0 {
            let fifo_turn = self.pacer.fifo_turn(self.config.pacer_fifo_fraction);
            let next = match &prev {
                Some(p) if !fifo_turn => self.continue_pick(now, p),
                _ => None,
            };
            let Some(pick) = next.or_else(|| self.pick_data(now, fifo_turn)) else {
                return;
            };
            let Some(tx) = device.transmit(now) else {
                return;
            };
            self.emit_data(now, tx, &pick);
            prev = Some(pick);
            budget -= 1;
        }
    }

    fn link_addr_of(&self, addr: Ipv4Addr) -> Option<EthernetAddress> {
        self.peers
            .iter()
            .filter_map(|p| p.peer.as_ref())
            .find(|p| p.addr == addr)?
            .link_addr
    }

    /// Runs the SRPT scheduler over every grantable message and marks the
    /// ones whose grant grew.
    fn schedule_grants(&mut self) {
        let active = grant::active_set(self.grant_candidates(), self.config.max_overcommit);
        let total: u32 = self
            .rpcs
            .iter()
            .filter_map(|s| s.rpc.as_ref()?.inp.as_ref())
            .filter(|m| m.buf.is_some() && m.scheduled)
            .map(|m| m.outstanding())
            .fold(0u32, |a, b| a.saturating_add(b));
        for d in grant::decide(&self.config, &active, total) {
            self.apply_grant(d);
            self.stats.grants_srpt += 1;
        }
    }

    /// Gives the oldest waiting message its FIFO share.
    fn fifo_grant(&mut self) {
        if grant::fifo_interval(&self.config, self.link_mbps).is_none() {
            return;
        }
        let active = grant::active_set(self.grant_candidates(), self.config.max_overcommit);
        if let Some(d) = grant::fifo_decision(&self.config, self.grant_candidates(), &active) {
            self.apply_grant(d);
            self.stats.grants_fifo += 1;
        }
    }

    /// Incoming messages that have pool space and are not fully granted.
    fn grant_candidates(&self) -> impl Iterator<Item = grant::Candidate> + Clone + '_ {
        self.rpcs.iter().enumerate().filter_map(|(i, s)| {
            let r = s.rpc.as_ref()?;
            if !matches!(r.state, State::ClientIncoming | State::ServerIncoming) {
                return None;
            }
            let m = r.inp.as_ref()?;
            m.buf.as_ref()?;
            if m.granted >= m.length {
                return None;
            }
            Some(grant::Candidate {
                key: i as u16,
                peer: r.peer,
                length: m.length,
                received: m.received(),
                granted: m.granted,
                birth: r.birth,
            })
        })
    }

    fn apply_grant(&mut self, d: grant::Decision) {
        if let Some(m) = self.rpcs[usize::from(d.key)]
            .rpc
            .as_mut()
            .and_then(|r| r.inp.as_mut())
        {
            if d.granted > m.granted {
                m.granted = d.granted;
                m.grant_priority = d.priority;
                m.grant_pending = true;
                self.rpc_ctrl_due = true;
            }
        }
    }

    /// Chooses the next DATA packet: a pending retransmission first, else the
    /// message with the fewest bytes left (or, on a FIFO turn, the oldest),
    /// if the NIC-queue estimate lets it go. Scans every RPC.
    fn pick_data(&mut self, now: Instant, fifo_turn: bool) -> Option<DataPick> {
        let mut srpt: Option<(u32, u64, usize)> = None;
        let mut oldest: Option<(u64, usize)> = None;
        for (i, s) in self.rpcs.iter().enumerate() {
            let Some(r) = s.rpc.as_ref() else { continue };
            let Some(out) = r.out.as_ref() else { continue };
            if !self.peer_resolved(r.peer) {
                continue;
            }
            if !out.resend.is_empty() {
                return self.resend_pick(i);
            }
            if !sending(r.state) || !out.can_send_new() {
                continue;
            }
            let left = out.bytes_left();
            if srpt.is_none_or(|(l, b, _)| (left, r.birth) < (l, b)) {
                srpt = Some((left, r.birth, i));
            }
            if oldest.is_none_or(|(b, _)| r.birth < b) {
                oldest = Some((r.birth, i));
            }
        }
        let (_, _, best) = srpt?;
        let mut order: heapless::Vec<usize, 2> = heapless::Vec::new();
        if let Some((_, o)) = oldest.filter(|&(_, o)| fifo_turn && o != best) {
            let _ = order.push(o);
        }
        let _ = order.push(best);
        for slot in order {
            if let Some(p) = self.new_data_pick(now, slot) {
                return Some(p);
            }
        }
        self.stats.pacer_throttled += 1;
        self.throttled_until = Some(self.pacer.next_slot(self.config.max_nic_est_backlog));
        None
    }

    /// The packet after `prev` from the same RPC, when it is still the right
    /// choice without a scan: its retransmission goes on, or it was the
    /// shortest message and stays so while it sends (its bytes left only
    /// shrink). `None` means scan again.
    fn continue_pick(&mut self, now: Instant, prev: &DataPick) -> Option<DataPick> {
        let out = self.rpcs[prev.slot].rpc.as_ref()?.out.as_ref()?;
        match (prev.retransmit, !out.resend.is_empty()) {
            (true, true) => self.resend_pick(prev.slot),
            (false, false) if out.can_send_new() => self.new_data_pick(now, prev.slot),
            _ => None,
        }
    }

    /// The next packet of `slot`'s pending retransmission.
    fn resend_pick(&self, slot: usize) -> Option<DataPick> {
        let out = self.rpcs[slot].rpc.as_ref()?.out.as_ref()?;
        let (start, end) = out.resend.next(0)?;
        let priority = out.resend.priority();
        Some(DataPick {
            slot,
            start,
            end,
            priority,
            retransmit: true,
        })
    }

    /// The next new packet of `slot`, if the pacer lets it go now.
    fn new_data_pick(&self, now: Instant, slot: usize) -> Option<DataPick> {
        let r = self.rpcs[slot].rpc.as_ref()?;
        let out = r.out.as_ref()?;
        let c = &self.config;
        if !self.pacer.may_send(
            now,
            out.bytes_left(),
            c.defer_min_bytes,
            c.max_nic_est_backlog,
        ) {
            return None;
        }
        // A message not started yet is cut for the device as it is now
        // (it may have been queued before the first poll saw the device).
        let seg = if out.next_xmit == 0 {
            self.max_payload
        } else {
            out.seg
        };
        let (start, end) = super::rpc::packet_at(out.next_xmit, seg, out.unscheduled, out.length);
        let priority = if start < out.unscheduled {
            let peer = self.peers[usize::from(r.peer)].peer.as_ref()?;
            peer.unsched_priority(out.length, c.num_priorities)
        } else {
            out.sched_priority
        };
        Some(DataPick {
            slot,
            start,
            end,
            priority,
            retransmit: false,
        })
    }

    fn emit_data<T: TxToken>(&mut self, now: Instant, mut tx: T, pick: &DataPick) {
        let payload_len = (pick.end - pick.start) as usize;
        let frame_len =
            link_header_len(&self.config) + IPV4_HEADER_LEN + homa::DATA_HEADER_LEN + payload_len;
        if !self.fits(frame_len) {
            // Cut for a larger MTU than the device now has (it shrank while
            // the message was out): its packets can never go.
            let client = self.rpcs[pick.slot]
                .rpc
                .as_ref()
                .is_some_and(|r| r.state.is_client());
            if client {
                self.fail_client_rpc(pick.slot, super::RpcError::MtuShrank);
            } else {
                self.free_rpc(pick.slot);
                self.stats.server_freed += 1;
            }
            return;
        }
        let max_payload = self.max_payload;
        let Endpoint {
            config,
            caps,
            rpcs,
            peers,
            pool,
            stats,
            pacer,
            ..
        } = self;
        let Some(r) = rpcs[pick.slot].rpc.as_mut() else {
            return;
        };
        let Some(peer) = peers[usize::from(r.peer)].peer.as_mut() else {
            return;
        };
        let Some(mac) = peer.link_addr else { return };
        let Some(out) = r.out.as_mut() else { return };
        if !pick.retransmit && out.next_xmit == 0 {
            // Cut at the first transmission, for the device as it is now.
            out.cut(max_payload);
        }
        // A retransmission announces the end of what was asked for (Linux
        // sends the end of the resent range), a first transmission the
        // unscheduled bytes.
        let incoming = if pick.retransmit {
            out.resend.last_end().max(pick.end)
        } else {
            out.unscheduled
        };
        let repr = Repr {
            sport: r.local_port,
            dport: r.peer_port,
            sender_id: r.id,
            kind: Kind::Data {
                header: DataHeader {
                    message_length: out.length,
                    incoming,
                    ack: peer.acks.pop(),
                    cutoff_version: peer.cutoff_version,
                    retransmit: pick.retransmit,
                    offset: pick.start,
                },
                payload: &[],
            },
        };
        let homa_len = homa::DATA_HEADER_LEN + payload_len;
        tx.set_meta(PacketMeta::with_priority(pick.priority));
        let dst = r.peer_addr;
        tx.consume(frame_len, |frame| {
            let at = emit_headers(
                config,
                caps,
                frame,
                &Route {
                    dst_mac: mac,
                    dst,
                    protocol: IpProtocol::Homa,
                    ip_payload_len: homa_len,
                    priority: pick.priority,
                },
            );
            let mut packet = homa::Packet::new_unchecked(&mut frame[at..]);
            repr.emit(&mut packet);
            // Cannot fail: the range lies inside the message.
            let _ = pool.read_at(
                &mut out.buf,
                pick.start as usize,
                &mut packet.payload_mut()[..payload_len],
            );
            if config.homa_checksum_tx && caps.checksum.homa.tx() {
                packet.fill_checksum(&IpAddr::V4(config.ipv4_addr), &IpAddr::V4(dst));
            }
        });
        pacer.on_transmit(now, frame_len);
        stats.tx.data += 1;
        stats.tx_frames += 1;
        stats.tx_data_bytes += payload_len as u64;
        net_trace!(
            "homa: tx {}",
            repr.display_with(
                IpAddr::V4(config.ipv4_addr),
                IpAddr::V4(dst),
                Some(pick.priority)
            )
        );
        if pick.retransmit {
            stats.retransmissions += 1;
            let _ = out.resend.clear(pick.start);
        } else {
            out.next_xmit = pick.end;
        }
    }

    /// Sends the GRANTs, RESENDs and NEED_ACKs that RPCs have due, starting
    /// the scan where the last one stopped. Returns false when the device or
    /// the budget ran out.
    fn emit_rpc_control<D: Device + ?Sized>(
        &mut self,
        now: Instant,
        device: &mut D,
        budget: &mut usize,
    ) -> bool {
        if !self.rpc_ctrl_due {
            return true;
        }
        let mut unsent = false;
        let n = self.rpcs.len();
        for k in 0..n {
            let slot = (self.ctrl_cursor + k) % n;
            let Some(r) = self.rpcs[slot].rpc.as_ref() else {
                continue;
            };
            let grant = r.inp.as_ref().is_some_and(|m| m.grant_pending);
            if !(grant || r.resend_due || r.need_ack_due) {
                continue;
            }
            let Some(mac) = self.link_addr_of(r.peer_addr) else {
                unsent = true;
                continue;
            };
            let resend_due = r.resend_due;
            let need_ack_due = r.need_ack_due;
            for (due, kind) in [(grant, 0), (resend_due, 1), (need_ack_due, 2)] {
                if !due {
                    continue;
                }
                if *budget == 0 {
                    self.ctrl_cursor = slot;
                    return false;
                }
                let sent = match kind {
                    0 => device
                        .transmit(now)
                        .map(|tx| self.emit_grant(now, tx, mac, slot))
                        .is_some(),
                    1 => self.emit_resends(now, device, mac, slot, budget),
                    _ => device
                        .transmit(now)
                        .map(|tx| self.emit_need_ack(now, tx, mac, slot))
                        .is_some(),
                };
                if !sent {
                    self.ctrl_cursor = slot;
                    return false;
                }
                *budget = budget.saturating_sub(1);
            }
        }
        self.ctrl_cursor = (self.ctrl_cursor + 1) % n;
        // Everything due went out, but for peers still being resolved.
        self.rpc_ctrl_due = unsent;
        true
    }

    /// RESENDs for every range an incoming message misses: each gap, the
    /// granted-but-missing tail, or everything when nothing has arrived.
    /// Returns false if the device refused a frame (the RPC stays due).
    fn emit_resends<D: Device + ?Sized>(
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
            let (sport, dport, id, dst) = (r.local_port, r.peer_port, r.id, r.peer_addr);
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
                self.emit_control(now, tx, mac, dst, &repr);
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

    fn emit_need_ack<T: TxToken>(
        &mut self,
        now: Instant,
        tx: T,
        mac: EthernetAddress,
        slot: usize,
    ) {
        let Some(r) = self.rpcs[slot].rpc.as_mut() else {
            return;
        };
        r.need_ack_due = false;
        let repr = Repr {
            sport: r.local_port,
            dport: r.peer_port,
            sender_id: r.id,
            kind: Kind::NeedAck,
        };
        let dst = r.peer_addr;
        self.emit_control(now, tx, mac, dst, &repr);
    }

    fn emit_grant<T: TxToken>(&mut self, now: Instant, tx: T, mac: EthernetAddress, slot: usize) {
        let Some(r) = self.rpcs[slot].rpc.as_mut() else {
            return;
        };
        let Some(m) = r.inp.as_mut() else { return };
        m.grant_pending = false;
        let repr = Repr {
            sport: r.local_port,
            dport: r.peer_port,
            sender_id: r.id,
            kind: Kind::Grant {
                offset: m.granted,
                priority: m.grant_priority,
            },
        };
        let dst = r.peer_addr;
        self.emit_control(now, tx, mac, dst, &repr);
    }

    /// Sends a control packet at the highest priority.
    pub(super) fn emit_control<T: TxToken>(
        &mut self,
        now: Instant,
        mut tx: T,
        mac: EthernetAddress,
        dst: Ipv4Addr,
        repr: &Repr<'_>,
    ) {
        let prio = self.config.highest_priority();
        let homa_len = repr.buffer_len();
        let frame_len = link_header_len(&self.config) + IPV4_HEADER_LEN + homa_len;
        if !self.fits(frame_len) {
            return;
        }
        tx.set_meta(PacketMeta::with_priority(prio));
        let (config, caps) = (&self.config, &self.caps);
        tx.consume(frame_len, |frame| {
            let at = emit_headers(
                config,
                caps,
                frame,
                &Route {
                    dst_mac: mac,
                    dst,
                    protocol: IpProtocol::Homa,
                    ip_payload_len: homa_len,
                    priority: prio,
                },
            );
            let mut packet = homa::Packet::new_unchecked(&mut frame[at..]);
            repr.emit(&mut packet);
            if config.homa_checksum_tx && caps.checksum.homa.tx() {
                packet.fill_checksum(&IpAddr::V4(config.ipv4_addr), &IpAddr::V4(dst));
            }
        });
        self.pacer.on_transmit(now, frame_len);
        self.stats.tx.count(u8::from(repr.kind.packet_type()));
        self.stats.tx_frames += 1;
        net_trace!(
            "homa: tx {}",
            repr.display_with(
                IpAddr::V4(self.config.ipv4_addr),
                IpAddr::V4(dst),
                Some(prio)
            )
        );
    }
}
