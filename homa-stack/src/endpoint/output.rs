//! Egress: control packets first (priority 7), then GRANTs from the
//! scheduler, then DATA in the pacer's order, while the device takes frames
//! and the NIC-queue estimate allows. Each frame is built in place in the
//! transmit token's buffer; message bytes are copied once, from the pool.

use super::iface::{emit_headers, ip_header_len, link_header_len, src_for, Route, HOP_LIMIT};
use super::pacer::DataPick;
use super::timers::Timer;
use super::types::Local;
use super::Endpoint;
use crate::phy::{Device, PacketMeta, TxToken};
use crate::stats::DropReason;
use crate::time::Instant;
use crate::wire::homa::{self, Kind, PacketType, Repr};
use crate::wire::{EthernetAddress, IpAddr, IpProtocol};

impl<'a> Endpoint<'a> {
    pub(super) fn egress<D: Device + ?Sized>(&mut self, now: Instant, device: &mut D) {
        self.timers.stop(Timer::Pacer);
        self.egress_arp(now, device);
        // The device says how many frames it takes in a row.
        let mut budget = self
            .config
            .max_tx_per_poll
            .min(self.caps.max_burst_size.unwrap_or(usize::MAX));
        while budget > 0 {
            let Some(c) = self.ctrl.front() else { break };
            let Some(mac) = c.link_addr.or_else(|| self.link_addr_of(c.addr)) else {
                self.ctrl.pop_front();
                self.count_drop(DropReason::Unresolved);
                continue;
            };
            let Some(tx) = device.transmit(now) else {
                return;
            };
            let Some(c) = self.ctrl.pop_front() else {
                break;
            };
            self.emit_ctrl(now, tx, mac, c);
            budget -= 1;
        }
        if self.grants_dirty {
            self.schedule_grants();
            self.grants_dirty = false;
        }
        self.fifo_clock(now);
        if !self.emit_rpc_control(now, device, &mut budget) {
            return;
        }
        // A FIFO turn is counted only when there is something to pick.
        while budget > 0 && !(self.send.is_empty() && self.send_short.is_empty()) {
            let fifo_turn = self.pacer.fifo_turn(self.config.pacer_fifo_fraction);
            let Some(pick) = self.pick_data(now, fifo_turn) else {
                return;
            };
            let Some(tx) = device.transmit(now) else {
                return;
            };
            self.emit_data(now, tx, &pick);
            budget -= 1;
        }
    }

    fn link_addr_of(&self, addr: IpAddr) -> Option<EthernetAddress> {
        let pi = self.find_peer(addr)?;
        self.peers.get(usize::from(pi))?.peer.as_ref()?.link_addr
    }

    fn emit_data<T: TxToken>(&mut self, now: Instant, mut tx: T, pick: &DataPick) {
        let payload_len = (pick.end - pick.start) as usize;
        let Some(r) = self.rpc_at(pick.slot).filter(|r| r.outgoing().is_some()) else {
            return;
        };
        let (dst, local, client, pi) = (r.peer_addr(), r.local(), r.state().is_client(), r.peer());
        let frame_len = link_header_len(&self.config)
            + ip_header_len(dst)
            + homa::DATA_HEADER_LEN
            + payload_len;
        if !self.fits(frame_len) {
            // Cut for a larger MTU than the device now has (it shrank while
            // the message was out): its packets can never go.
            if client {
                self.fail_client_rpc(pick.slot, super::RpcError::MtuShrank);
            } else {
                self.free_rpc(pick.slot);
                self.stats.server_freed += 1;
            }
            return;
        }
        let max_payload = self.payload_for(dst);
        let Some(peer) = self.peers[usize::from(pi)].peer.as_mut() else {
            return;
        };
        let Some(mac) = peer.link_addr else { return };
        let (ack, cutoff_version) = (peer.acks.pop(), peer.cutoff_version);
        let homa_len = homa::DATA_HEADER_LEN + payload_len;
        tx.set_meta(PacketMeta::with_priority(pick.priority));
        let sent = self.with_sent(pick.slot, |r, pool, config, caps| {
            let mut header = r.data_header(pick.start, pick.end, pick.retransmit, max_payload)?;
            header.ack = ack;
            header.cutoff_version = cutoff_version;
            let repr = r.repr(Kind::Data {
                header,
                payload: &[],
            });
            let src = src_for(config, dst, local);
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
                        hop_limit: HOP_LIMIT,
                        src_v6: local.v6(config),
                    },
                );
                let mut packet = homa::Packet::new_unchecked(&mut frame[at..]);
                repr.emit(&mut packet);
                let payload = &mut packet.payload_mut()[..payload_len];
                // Copied, then summed: the copy moves whole vector registers and
                // the sum rereads the bytes from the L1 cache, fewer instructions
                // than one pass that sums as it copies, and no slower.
                r.read_out(pool, pick.start, payload);
                if config.homa_checksum_tx && caps.checksum.homa.tx() {
                    packet.fill_checksum(&src, &dst);
                }
            });
            net_trace!(
                "homa: tx {}",
                repr.display_with(src, dst, Some(pick.priority))
            );
            r.data_sent(pick.start, pick.end, pick.retransmit);
            Some(())
        });
        if sent.flatten().is_none() {
            return;
        }
        self.pacer.on_transmit(now, frame_len);
        let stats = &mut self.stats;
        stats.tx.data += 1;
        stats.tx_frames += 1;
        stats.tx_data_bytes += payload_len as u64;
        if pick.retransmit {
            stats.retransmissions += 1;
        }
    }

    /// Sends the GRANTs, RESENDs and NEED_ACKs that RPCs have due, in the
    /// order they fell due (the control-due list: no scan of the table).
    /// An RPC leaves the list when all it had due went out; one whose peer
    /// is still being resolved stays, and is counted in `ctrl_blocked` so
    /// `poll_at` does not spin on it. Returns false when the device or the
    /// budget ran out.
    fn emit_rpc_control<D: Device + ?Sized>(
        &mut self,
        now: Instant,
        device: &mut D,
        budget: &mut usize,
    ) -> bool {
        let mut blocked = 0;
        let mut cursor = self.ctrl_due.front();
        while let Some(i) = cursor {
            cursor = self.ctrl_due.next_of(&self.rpcs[..], i);
            let slot = usize::from(i);
            let Some(r) = self.rpc_at(slot) else {
                self.ctrl_due.remove(&mut self.rpcs[..], i);
                continue;
            };
            let (grant, resend_due, need_ack_due) = r.control_due();
            if !(grant || resend_due || need_ack_due) {
                self.ctrl_due.remove(&mut self.rpcs[..], i);
                continue;
            }
            let Some(mac) = self.link_addr_of(r.peer_addr()) else {
                blocked += 1;
                continue;
            };
            let due = [
                (grant, PacketType::Grant),
                (resend_due, PacketType::Resend),
                (need_ack_due, PacketType::NeedAck),
            ];
            for (due, kind) in due {
                if !due {
                    continue;
                }
                let sent = *budget > 0
                    && match kind {
                        PacketType::Grant => device
                            .transmit(now)
                            .map(|tx| self.emit_grant(now, tx, mac, slot))
                            .is_some(),
                        PacketType::Resend => self.emit_resends(now, device, mac, slot, budget),
                        // NEED_ACK, the only other kind in the list.
                        _ => device
                            .transmit(now)
                            .map(|tx| self.emit_need_ack(now, tx, mac, slot))
                            .is_some(),
                    };
                if !sent {
                    self.ctrl_blocked = blocked;
                    return false;
                }
                *budget = budget.saturating_sub(1);
            }
            self.ctrl_due.remove(&mut self.rpcs[..], i);
        }
        self.ctrl_blocked = blocked;
        true
    }

    fn emit_need_ack<T: TxToken>(
        &mut self,
        now: Instant,
        tx: T,
        mac: EthernetAddress,
        slot: usize,
    ) {
        let Some(mut r) = self.steady(slot) else {
            return;
        };
        let Some(repr) = r.take_need_ack() else {
            return;
        };
        let (dst, local) = (r.peer_addr(), r.local());
        self.emit_control(now, tx, mac, dst, local, &repr);
    }

    /// Sends a control packet at the highest priority.
    pub(super) fn emit_control<T: TxToken>(
        &mut self,
        now: Instant,
        mut tx: T,
        mac: EthernetAddress,
        dst: IpAddr,
        local: Local,
        repr: &Repr<'_>,
    ) {
        let prio = self.config.highest_priority();
        let homa_len = repr.buffer_len();
        let frame_len = link_header_len(&self.config) + ip_header_len(dst) + homa_len;
        if !self.fits(frame_len) {
            return;
        }
        tx.set_meta(PacketMeta::with_priority(prio));
        let (config, caps) = (&self.config, &self.caps);
        let src = src_for(config, dst, local);
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
                    hop_limit: HOP_LIMIT,
                    src_v6: local.v6(config),
                },
            );
            let mut packet = homa::Packet::new_unchecked(&mut frame[at..]);
            repr.emit(&mut packet);
            if config.homa_checksum_tx && caps.checksum.homa.tx() {
                packet.fill_checksum(&src, &dst);
            }
        });
        self.pacer.on_transmit(now, frame_len);
        self.stats.tx.count(u8::from(repr.kind.packet_type()));
        self.stats.tx_frames += 1;
        net_trace!("homa: tx {}", repr.display_with(src, dst, Some(prio)));
    }
}
