//! Egress: control packets first (priority 7), then GRANTs from the
//! scheduler, then DATA in the pacer's order, while the device takes frames
//! and the NIC-queue estimate allows. Each frame is built in place in the
//! transmit token's buffer; message bytes are copied once, from the pool.

use super::host::{emit_headers, ip_header_len, link_header_len, src_for, Route, HOP_LIMIT};
use super::pacer::{DataPick, Pacer};
use super::timers::Timer;
use super::types::Local;
use super::Endpoint;
use crate::config::Config;
use crate::phy::{Device, DeviceCapabilities, PacketMeta, TxToken};
use crate::stats::{DropReason, Stats};
use crate::time::Instant;
use crate::wire::homa::{self, Kind, Repr};
use crate::wire::{EthernetAddress, IpAddr, IpProtocol};

/// Where and how a Homa packet goes: the peer's link and IP addresses,
/// which of our addresses it leaves from, and its priority.
#[derive(Clone, Copy)]
pub(super) struct HomaRoute {
    pub(super) mac: EthernetAddress,
    pub(super) dst: IpAddr,
    pub(super) local: Local,
    pub(super) priority: u8,
}

/// What building a Homa frame uses of the endpoint, borrowed apart from
/// the RPC table and the pool (DATA's payload comes from those while its
/// frame is built).
pub(super) struct HomaTx<'e> {
    config: &'e Config,
    caps: &'e DeviceCapabilities,
    pacer: &'e mut Pacer,
    stats: &'e mut Stats,
}

impl<'e> HomaTx<'e> {
    /// The frame path over what it reads and counts.
    pub(super) fn new(
        config: &'e Config,
        caps: &'e DeviceCapabilities,
        pacer: &'e mut Pacer,
        stats: &'e mut Stats,
    ) -> Self {
        HomaTx {
            config,
            caps,
            pacer,
            stats,
        }
    }

    /// Sends one Homa packet, DATA or control, along `route`: link and IP
    /// headers, the header of `repr`, the `payload_len` bytes `payload`
    /// writes after it (DATA's message bytes; none for control packets),
    /// the checksum. The one place Homa frames are built. A frame larger
    /// than the device takes is counted as a drop and not sent.
    pub(super) fn emit_homa<T: TxToken>(
        &mut self,
        now: Instant,
        mut tx: T,
        route: &HomaRoute,
        repr: &Repr<'_>,
        payload_len: usize,
        payload: impl FnOnce(&mut [u8]),
    ) {
        let HomaTx {
            config,
            caps,
            pacer,
            stats,
        } = self;
        let dst = route.dst;
        let homa_len = repr.buffer_len() + payload_len;
        let frame_len = link_header_len(config) + ip_header_len(dst) + homa_len;
        if frame_len > caps.max_transmission_unit {
            net_debug!("homa: drop: {}", DropReason::FrameTooBig);
            stats.drops.count(DropReason::FrameTooBig);
            return;
        }
        tx.set_meta(PacketMeta::with_priority(route.priority));
        let src = src_for(config, dst, route.local);
        tx.consume(frame_len, |frame| {
            let at = emit_headers(
                config,
                caps,
                frame,
                &Route {
                    dst_mac: route.mac,
                    dst,
                    protocol: IpProtocol::Homa,
                    ip_payload_len: homa_len,
                    priority: route.priority,
                    hop_limit: HOP_LIMIT,
                    src_v6: route.local.v6(config),
                },
            );
            let mut packet = homa::Packet::new_unchecked(&mut frame[at..]);
            repr.emit(&mut packet);
            // Control packets have no payload, nor room for DATA's header.
            if payload_len > 0 {
                payload(&mut packet.payload_mut()[..payload_len]);
            }
            // Filled here, or seeded for the device to complete (homa-phy's
            // `ChecksumCapabilities` says what it needs).
            if config.homa_checksum_tx {
                packet.write_checksum(&src, &dst, caps.checksum.homa.tx());
            }
        });
        pacer.on_transmit(now, frame_len);
        stats.tx.count(repr.kind.packet_type());
        stats.tx_frames += 1;
        net_trace!(
            "homa: tx {}",
            repr.display_with(src, dst, Some(route.priority))
        );
    }
}

/// What an RPC can have due at an egress, in the order it goes out.
#[derive(Clone, Copy)]
enum Due {
    Grant,
    Resend,
    NeedAck,
}

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
        self.peers.get(usize::from(pi))?.peer.as_ref()?.nbr.mac()
    }

    fn emit_data<T: TxToken>(&mut self, now: Instant, tx: T, pick: &DataPick) {
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
        let Some(mac) = peer.nbr.mac() else { return };
        let (ack, cutoff_version) = (peer.acks.pop(), peer.cutoff_version);
        let route = HomaRoute {
            mac,
            dst,
            local,
            priority: pick.priority,
        };
        self.with_sent(pick.slot, |r, pool, wire| {
            let Some(mut header) =
                r.data_header(pick.start, pick.end, pick.retransmit, max_payload)
            else {
                return;
            };
            header.ack = ack;
            header.cutoff_version = cutoff_version;
            let repr = r.repr(Kind::Data {
                header,
                payload: &[],
            });
            // Copied, then summed: the copy moves whole vector registers and
            // the sum rereads the bytes from the L1 cache, fewer instructions
            // than one pass that sums as it copies, and no slower.
            wire.emit_homa(now, tx, &route, &repr, payload_len, |payload| {
                r.read_out(pool, pick.start, payload)
            });
            wire.stats.tx_data_bytes += payload_len as u64;
            if pick.retransmit {
                wire.stats.retransmissions += 1;
            }
            r.data_sent(pick.start, pick.end, pick.retransmit);
        });
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
                (grant, Due::Grant),
                (resend_due, Due::Resend),
                (need_ack_due, Due::NeedAck),
            ];
            for (due, what) in due {
                if !due {
                    continue;
                }
                let sent = *budget > 0
                    && match what {
                        Due::Grant => device
                            .transmit(now)
                            .map(|tx| self.emit_grant(now, tx, mac, slot))
                            .is_some(),
                        Due::Resend => self.emit_resends(now, device, mac, slot, budget),
                        Due::NeedAck => device
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
        tx: T,
        mac: EthernetAddress,
        dst: IpAddr,
        local: Local,
        repr: &Repr<'_>,
    ) {
        let route = HomaRoute {
            mac,
            dst,
            local,
            priority: self.config.highest_priority(),
        };
        let mut wire = HomaTx {
            config: &self.config,
            caps: &self.caps,
            pacer: &mut self.pacer,
            stats: &mut self.stats,
        };
        wire.emit_homa(now, tx, &route, repr, 0, |_| {});
    }
}
