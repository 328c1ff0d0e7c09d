//! Handling of each received Homa packet type (docs/protocol.md 4.1 to 4.8).
//!
//! Every packet is judged against the RPC it names, found by
//! (peer address, local id): local id = `sender_id XOR 1`, so even ids are our
//! client RPCs and odd ids our server RPCs. Anything that does not fit is
//! dropped with a counter and a debug line; nothing here can panic or grow
//! state beyond the tables.

use super::host::{HandUp, HomaIn};
use super::neighbour::Heard;
use super::rpc::{leaves_tiny_hole, DataVerdict, MsgIn, Rpc, State, UnknownVerdict};
use super::types::{IpHeader, Local, Reply, Sender, Unreachable};
use super::{Endpoint, RpcError};
use crate::stats::DropReason;
use crate::storage::MessageBuf;
use crate::time::Instant;
use crate::wire::homa::{self, DataHeader, Kind, MAX_MESSAGE_LENGTH};
use crate::wire::{EthernetAddress, IpAddr};

/// What the host layer hands up comes in here.
impl HandUp for Endpoint<'_> {
    fn homa<'f>(&mut self, now: Instant, packet: HomaIn<'f>) -> Option<Reply<'f>> {
        self.process_homa(now, packet)
    }

    fn unreachable(&mut self, addr: IpAddr, quote: &[u8], what: Unreachable) {
        self.unreachable_pkt(addr, quote, what);
    }
}

impl<'a> Endpoint<'a> {
    /// A Homa packet the host layer handed up: its `body`, which came in
    /// `ip` (the IP header as received, which an ICMP error would quote)
    /// from `mac`.
    fn process_homa<'f>(&mut self, now: Instant, arrived: HomaIn<'f>) -> Option<Reply<'f>> {
        // Read in place: the IP header is copied only for a port
        // unreachable, which quotes it.
        let (mac, body) = (arrived.mac, arrived.body);
        let (src, dst) = arrived.ip.addrs();
        let Ok(packet) = homa::Packet::new_checked(body) else {
            return self.drop_frame(DropReason::Malformed, "bad Homa header");
        };
        if self.config.homa_checksum_rx
            && self.caps.checksum.homa.rx()
            && !packet.verify_checksum(&src, &dst)
        {
            return self.drop_frame(DropReason::Checksum, "Homa checksum mismatch");
        }
        let Ok(repr) = homa::Repr::parse(&packet) else {
            return self.drop_frame(DropReason::Malformed, "bad Homa packet");
        };
        self.stats.rx.count(repr.kind.packet_type());
        net_trace!("homa: rx {}", repr.display_with(src, dst, None));
        let from = Sender {
            addr: src,
            mac,
            sport: repr.sport,
            dport: repr.dport,
            local_id: repr.sender_id ^ 1,
            local: Local::of(&self.config, dst),
        };
        let server_side = from.local_id & 1 == 1;
        // A packet for a port with no socket, or a request for a socket that
        // does not serve, gets ICMP port unreachable (docs/protocol.md 2.5).
        let socket = if server_side {
            self.server_socket(from.dport)
        } else {
            self.client_socket(from.dport)
        };
        let Some(socket) = socket else {
            // A server's id (a response, or a server's control packet) for
            // a port a socket serves: that port is no client port of ours,
            // so no such RPC, as Linux finds (docs/protocol.md 4.1); not
            // a closed port.
            if !server_side && self.server_socket(from.dport).is_some() {
                self.no_client_rpc(from, repr.kind);
                return None;
            }
            if self.icmp_budget == 0 || !mac.is_unicast() {
                return self.drop_frame(DropReason::UnknownPort, "no socket for port");
            }
            self.icmp_budget -= 1;
            self.count_drop(DropReason::UnknownPort);
            return Some(match arrived.ip {
                // IPv4 quotes the header and what fits in 576 bytes
                // (RFC 1812), the Homa id with it.
                IpHeader::V4(header) => Reply::PortUnreachable {
                    dst_mac: mac,
                    dst_ip: header.src_addr,
                    header,
                    data: body,
                },
                // IPv6 quotes as much as fits in 1280 bytes (RFC 4443).
                #[cfg(not(feature = "ipv6"))]
                IpHeader::Never(_, never) => match never {},
                #[cfg(feature = "ipv6")]
                IpHeader::V6 { header, payload } => Reply::PortUnreachable6 {
                    dst_mac: mac,
                    src_ip: header.dst_addr,
                    dst_ip: header.src_addr,
                    header,
                    data: payload,
                },
            });
        };
        // Each handler changes the RPC the packet names through the RPC
        // table, which brings the queues in step with it.
        match repr.kind {
            Kind::Data { header, payload } => self.data_pkt(now, from, socket, &header, payload),
            Kind::Grant { offset, priority } => self.grant_pkt(from, offset, priority),
            Kind::Resend {
                offset,
                length,
                priority,
            } => self.resend_pkt(from, offset, length, priority),
            Kind::RpcUnknown => self.rpc_unknown_pkt(from),
            Kind::Busy => self.busy_pkt(from),
            Kind::Cutoffs {
                unsched_cutoffs,
                version,
            } => self.cutoffs_pkt(from, unsched_cutoffs, version),
            Kind::Freeze => self.count_drop(DropReason::NotHandled),
            Kind::NeedAck => self.need_ack_pkt(from),
            Kind::Ack { ref acks } => self.ack_pkt(from, acks),
        }
        None
    }

    /// BUSY: the server of our client RPC is alive. Only a server sends
    /// BUSY (docs/protocol.md 4.7): one naming our server RPC is no sign
    /// of life, and must not keep the RPC (and its pages) from timing out.
    fn busy_pkt(&mut self, from: Sender) {
        match self.find_rpc(from.addr, from.local_id, from.dport) {
            Some(i) if from.local_id & 1 == 0 => {
                self.heard(i, from.mac);
                if let Some(mut r) = self.steady(i) {
                    r.on_busy();
                }
            }
            Some(_) => self.count_drop(DropReason::WrongState),
            None => self.count_drop(DropReason::UnknownRpc),
        }
    }

    /// A packet naming our client RPC `from.local_id` came to a server
    /// port, which no client RPC uses: it is handled as one for no RPC
    /// (docs/protocol.md 4.1). RESEND gets RPC_UNKNOWN, NEED_ACK an ACK,
    /// ACK and CUTOFFS are applied; the rest is dropped and counted.
    #[cold]
    fn no_client_rpc(&mut self, from: Sender, kind: Kind<'_>) {
        net_debug!(
            "homa: {} naming client rpc {} at server port {}: no such RPC",
            kind.packet_type(),
            from.local_id,
            from.dport
        );
        match kind {
            Kind::Resend { .. } => {
                self.push_answer(&from, Kind::RpcUnknown);
            }
            Kind::NeedAck => self.ack_unknown(from),
            Kind::Ack { acks } => self.ack_pkt(from, &acks),
            Kind::Cutoffs {
                unsched_cutoffs,
                version,
            } => self.cutoffs_pkt(from, unsched_cutoffs, version),
            Kind::Freeze => self.count_drop(DropReason::NotHandled),
            Kind::Data { .. } | Kind::Grant { .. } | Kind::Busy | Kind::RpcUnknown => {
                self.count_drop(DropReason::UnknownRpc)
            }
        }
    }

    /// CUTOFFS, for a peer we already hold (one with RPCs, or recently): a
    /// stranger's CUTOFFS must not take a table entry.
    fn cutoffs_pkt(
        &mut self,
        from: Sender,
        cutoffs: [u32; crate::config::NUM_PRIORITIES],
        version: u16,
    ) {
        match self.find_peer(from.addr) {
            Some(p) => {
                if let Some(peer) = self
                    .peers
                    .get_mut(usize::from(p))
                    .and_then(|s| s.peer.as_mut())
                {
                    peer.set_cutoffs(cutoffs, version);
                }
            }
            None => self.count_drop(DropReason::UnknownPeer),
        }
    }

    /// ACK: frees the server RPC its header names and those of its entries.
    fn ack_pkt(&mut self, from: Sender, acks: &[homa::Ack]) {
        let mut freed = self.ack_rpc(from.addr, from.local_id, from.dport);
        for a in acks.iter() {
            freed |= self.ack_rpc(from.addr, a.client_id ^ 1, a.server_port);
        }
        if !freed {
            self.count_drop(DropReason::UnknownRpc);
        }
    }

    /// The slot of the RPC with local id `id` shared with `addr` at our
    /// port `port` (Linux looks RPCs up per socket: the right peer at
    /// another of our ports names no RPC). Client ids name their slot;
    /// server RPCs are searched in the index.
    pub(super) fn find_rpc(&self, addr: IpAddr, id: u64, port: u16) -> Option<usize> {
        if id & 1 == 0 {
            let slot = super::rpc::client_slot(id);
            let named = |s: &&super::RpcSlot| s.rpc().is_some_and(|r| r.names(addr, id, port));
            return self.rpcs.get(slot).filter(named).map(|_| slot);
        }
        self.find_server_rpc(addr, id, port, self.hash.rpc(addr, id))
    }

    /// The slot of the server RPC `id` from `addr` at `port`, whose index
    /// hash `h` the caller has (to insert the RPC under it when it is new).
    fn find_server_rpc(&self, addr: IpAddr, id: u64, port: u16, h: u64) -> Option<usize> {
        let is = |s: &super::RpcSlot| s.rpc().is_some_and(|r| r.names(addr, id, port));
        #[cfg(any(test, fuzzing))]
        let is = self.counting(is);
        self.servers.find(&self.rpcs[..], h, is).map(usize::from)
    }

    /// A packet that passed every check came for the RPC in `slot` from
    /// `mac`: its peer's link address is confirmed, filled in (a request's
    /// only), or put in doubt; never replaced from here (see `neighbour`).
    pub(super) fn heard(&mut self, slot: usize, mac: EthernetAddress) {
        let now = self.now;
        let Some(r) = self.rpc_at(slot) else {
            return;
        };
        let (pi, request) = (r.peer(), !r.state().is_client());
        let Some(p) = self
            .peers
            .get_mut(usize::from(pi))
            .and_then(|s| s.peer.as_mut())
        else {
            return;
        };
        match p.nbr.heard(mac, request, now) {
            Heard::Same => return,
            Heard::Filled => {}
            Heard::Differs | Heard::Dropped => {
                net_debug!("homa: checked packet from another link address: in doubt");
                self.stats.link_addr_mismatches += 1;
            }
        }
        // Filled, or dropped: its RPCs that wait to send are placed anew.
        self.peer_resolved_now(pi);
        self.peer_doubted(pi);
    }

    /// The peer-table index of the RPC in `slot`, if there is one.
    pub(super) fn rpc_peer(&self, slot: usize) -> Option<u16> {
        Some(self.rpc_at(slot)?.peer())
    }

    /// A DATA packet, for the RPC it names (found or created).
    fn data_pkt(
        &mut self,
        now: Instant,
        from: Sender,
        socket: u16,
        h: &DataHeader,
        payload: &[u8],
    ) {
        // What the packet's own fields can be judged by is judged before
        // any state is made or changed: an RPC, its state, a link address.
        let fits = u32::try_from(payload.len())
            .ok()
            .filter(|&len| len > 0)
            .and_then(|len| h.offset.checked_add(len))
            .is_some_and(|end| end <= h.message_length);
        if h.message_length == 0
            || h.message_length > MAX_MESSAGE_LENGTH
            || h.message_length as usize > self.pool.capacity_bytes()
            || !fits
        {
            return self.count_drop(DropReason::BadRange);
        }
        // The ack it carries is believed only now (and before a new RPC
        // needs a slot, which it may free).
        if let Some(ack) = h.ack {
            self.ack_rpc(from.addr, ack.client_id ^ 1, ack.server_port);
        }
        let slot = if from.local_id & 1 == 1 {
            self.data_server_rpc(now, from, socket, h)
        } else {
            let i = self.find_rpc(from.addr, from.local_id, from.dport);
            if i.is_none() {
                self.count_drop(DropReason::UnknownRpc);
            }
            i
        };
        if let Some(slot) = slot {
            self.store_data(now, slot, from, h, payload);
        }
    }

    /// DATA for the RPC in `slot`: its message begins, or gets bytes.
    fn store_data(
        &mut self,
        now: Instant,
        slot: usize,
        from: Sender,
        h: &DataHeader,
        payload: &[u8],
    ) {
        let Some(r) = self.rpc_at(slot) else {
            return;
        };
        // Every check against the RPC comes before anything changes.
        if let Err(why) = r.accepts_data(h) {
            return self.count_drop(why);
        }
        self.heard(slot, from.mac);
        self.check_cutoff_version(now, slot, from, h.cutoff_version);
        let unsched = self.config.unsched_bytes;
        // Messages that wait for pool space get it first (`give_pages`).
        let mut alloc = self.waiters.is_empty();
        // The pages `give_pages` found, for a second turn (one call of
        // `on_data` in the code keeps the firmware small).
        let (mut given, mut second) = (None, false);
        let verdict = loop {
            let verdict = self.with_rpc(slot, |r, pool| {
                if let Some(buf) = given.take() {
                    r.give_pages(buf, pool);
                }
                r.on_data(h, payload, pool, unsched, alloc)
            });
            match verdict {
                Some(DataVerdict::NeedPages { len, server }) if !second => {
                    let Some(buf) = self.give_pages(slot, len as usize, server) else {
                        self.waiters.push_back(&mut self.rpcs[..], slot as u16);
                        // Linux drops the data and restarts the flow with
                        // RESEND(0, all) once space frees (give_waiting_buffers).
                        self.count_drop(DropReason::NoBuffer);
                        self.give_waiting_buffers();
                        return;
                    };
                    (given, second, alloc) = (Some(buf), true, false);
                }
                v => break v,
            }
        };
        match verdict {
            Some(DataVerdict::Stored) => self.stats.rx_data_bytes += payload.len() as u64,
            Some(DataVerdict::Completed) => {
                self.stats.rx_data_bytes += payload.len() as u64;
                // Our client RPCs have even ids.
                if from.local_id & 1 == 0 {
                    self.stats.client_completed += 1;
                }
                self.mark_ready(slot);
            }
            Some(DataVerdict::Dropped(why)) => self.count_drop(why),
            Some(DataVerdict::NeedPages { .. }) => self.count_drop(DropReason::NoBuffer),
            None => {}
        }
    }

    /// Pool pages for the incoming message of `len` bytes in `slot`.
    /// Messages that wait for pool space get it first, in the order they
    /// began to wait: a newcomer (a forged replay, say) must not take what
    /// a waiting message is owed, unless pages were freed for a request
    /// from a peer within its share (see `share`). `None`: none now.
    fn give_pages(&mut self, slot: usize, len: usize, server: bool) -> Option<MessageBuf> {
        let mut got = if self.waiters.is_empty() {
            self.pool.alloc(len).ok()
        } else {
            None
        };
        if got.is_none() && server && self.make_pages(slot, len) {
            got = self.pool.alloc(len).ok();
        }
        got
    }

    /// The server RPC a request's DATA names, found or made. The one found
    /// last is tried first: a long request's packets come in a run (it is
    /// matched by id and address, so a reused slot is only a miss).
    fn data_server_rpc(
        &mut self,
        now: Instant,
        from: Sender,
        socket: u16,
        h: &DataHeader,
    ) -> Option<usize> {
        let last = usize::from(self.last_server);
        let is_last = self.rpc_at(last);
        if is_last.is_some_and(|r| r.names(from.addr, from.local_id, from.dport)) {
            return Some(last);
        }
        // One hash for the lookup and, when the request is new, the insert.
        let hash = self.hash.rpc(from.addr, from.local_id);
        let slot = match self.find_server_rpc(from.addr, from.local_id, from.dport, hash) {
            Some(i) => i,
            None => {
                if leaves_tiny_hole(h.offset) {
                    self.count_drop(DropReason::TooManyGaps);
                    return None;
                }
                self.new_server_rpc(now, from, socket, h, hash)?
            }
        };
        self.last_server = slot as u16;
        Some(slot)
    }

    fn new_server_rpc(
        &mut self,
        now: Instant,
        from: Sender,
        socket: u16,
        h: &DataHeader,
        hash: u64,
    ) -> Option<usize> {
        let Some(slot) = self.free_slot().or_else(|| self.make_room(from.addr)) else {
            return self.drop_frame(DropReason::RpcTableFull, "no RPC slot for a new request");
        };
        let peer = self.peer_index(from.addr, now)?;
        self.births += 1;
        let inp = MsgIn::new(h.message_length, h.incoming, self.config.unsched_bytes);
        // Answers leave from the address the request came to.
        let rpc = Rpc::server(
            from.local_id,
            socket,
            peer,
            from.addr,
            from.sport,
            from.dport,
            self.births,
            from.local,
            inp,
        );
        self.insert_rpc(slot, rpc, Some(hash));
        net_trace!(
            "homa: new server rpc {} from {}:{}",
            from.local_id,
            from.addr,
            from.sport
        );
        Some(slot)
    }

    /// A sender echoing an old cutoff version gets our CUTOFFS, at most once
    /// per tick per peer, so a peer that ignores them cannot make us flood.
    fn check_cutoff_version(&mut self, now: Instant, slot: usize, from: Sender, version: u16) {
        if version == self.config.cutoff_version {
            return;
        }
        let Some(p) = self.rpc_peer(slot) else {
            return;
        };
        let tick = self.config.tick;
        let Some(peer) = self
            .peers
            .get_mut(usize::from(p))
            .and_then(|s| s.peer.as_mut())
        else {
            return;
        };
        if peer.cutoffs_sent.is_some_and(|t| now < t + tick) {
            return;
        }
        peer.cutoffs_sent = Some(now);
        let cutoffs = Kind::Cutoffs {
            unsched_cutoffs: self.config.announced_cutoffs(),
            version: self.config.cutoff_version,
        };
        self.push_answer(&from, cutoffs);
    }

    fn grant_pkt(&mut self, from: Sender, offset: u32, priority: u8) {
        let Some(i) = self.find_rpc(from.addr, from.local_id, from.dport) else {
            return self.count_drop(DropReason::UnknownRpc);
        };
        let top = self.config.highest_priority();
        let unsched = self.config.unsched_bytes;
        match self.with_rpc(i, |r, _| r.on_grant(offset, priority, top, unsched)) {
            Some(true) => self.heard(i, from.mac),
            Some(false) => self.count_drop(DropReason::WrongState),
            None => {}
        }
    }

    fn rpc_unknown_pkt(&mut self, from: Sender) {
        let Some(i) = self.find_rpc(from.addr, from.local_id, from.dport) else {
            return self.count_drop(DropReason::UnknownRpc);
        };
        let c = &self.config;
        let (interval, resend, unsched) = (c.resend_interval, c.resend_ticks, c.unsched_bytes);
        // A request's first packet knocking again goes at the highest
        // priority, as the retransmissions a Linux receiver asks for with
        // RESEND do (docs/protocol.md 4.7).
        let prio = c.highest_priority();
        match self.with_rpc(i, |r, _| r.on_rpc_unknown(interval, resend, prio, unsched)) {
            Some(UnknownVerdict::Spent) => self.stats.restarts_spent += 1,
            Some(UnknownVerdict::TooSoon) => self.count_drop(DropReason::RateLimited),
            Some(UnknownVerdict::Restarted) | None => {}
            Some(UnknownVerdict::Forgotten) => {
                self.free_rpc(i);
                self.stats.server_freed += 1;
            }
            Some(UnknownVerdict::Ignored) => self.count_drop(DropReason::WrongState),
        }
    }

    fn need_ack_pkt(&mut self, from: Sender) {
        let rpc = self.find_rpc(from.addr, from.local_id, from.dport);
        // Only a server asks, naming our client RPC (an even local id):
        // one naming a server RPC is answered with nothing.
        if from.local_id & 1 == 1 {
            let why = if rpc.is_some() {
                DropReason::WrongState
            } else {
                DropReason::UnknownRpc
            };
            return self.count_drop(why);
        }
        if let Some(i) = rpc {
            let Some(r) = self.rpc_at(i) else { return };
            if matches!(r.state(), State::ClientOutgoing | State::ClientIncoming) {
                // Still missing response bytes: ask for them instead of acking.
                self.request_retrans(i);
                return;
            }
        }
        self.ack_unknown(from);
    }

    /// Acks our client RPC `from.local_id`, complete or released already
    /// (its ack was lost), with whatever else waits for that peer, in one
    /// packet at the next poll.
    fn ack_unknown(&mut self, from: Sender) {
        match self.find_peer(from.addr) {
            Some(pi) => {
                let ack = homa::Ack {
                    client_id: from.local_id,
                    server_port: from.sport,
                };
                self.add_ack(pi, from.addr, from.dport, ack, true);
            }
            // A peer we no longer hold: this ack alone, in the header (the
            // answer's id and port are the ack's), with no entries.
            None => {
                self.push_answer(
                    &from,
                    Kind::Ack {
                        acks: heapless::Vec::new(),
                    },
                );
            }
        }
    }

    /// Frees our server RPC `id` from `addr` served on `port`, if its response
    /// is out: the client has it. True if it freed one.
    fn ack_rpc(&mut self, addr: IpAddr, id: u64, port: u16) -> bool {
        if id & 1 == 0 {
            return false;
        }
        let Some(i) = self.find_rpc(addr, id, port) else {
            return false;
        };
        let Some(r) = self.rpc_at(i) else {
            return false;
        };
        if !matches!(r.state(), State::ServerOutgoing) {
            return false;
        }
        self.free_rpc(i);
        self.stats.server_freed += 1;
        true
    }
}

impl<'a> Endpoint<'a> {
    /// ICMP says a Homa packet of ours to `addr`, quoted in `quote`, could
    /// not be delivered. Anyone can send that, naming our (predictable)
    /// ports, so only an error whose quote names a live RPC (its id, our
    /// port and the peer's) is believed, and it costs one lookup, as any
    /// packet. Port and protocol unreachable end the RPC: a client RPC
    /// fails, a server RPC sending its response is freed (the client is
    /// gone, docs/protocol.md 2.5). Every other code is soft (RFC 1122
    /// 4.2.3.9, RFC 5927: routers say it of transient faults, and a forger
    /// can too): noted on a client RPC, whose silence timeout, if it comes,
    /// fails it as unreachable; fragmentation needed is a path-MTU hint.
    /// What ends nothing is counted by reason (`Stats::icmp_ignored`).
    pub(super) fn unreachable_pkt(&mut self, addr: IpAddr, quote: &[u8], what: Unreachable) {
        let ignored = &mut self.stats.icmp_ignored;
        if what == Unreachable::PathMtu {
            ignored.path_mtu += 1;
            net_trace!("homa: ICMP fragmentation needed ignored");
            return;
        }
        // Our packets' sender id is our local id.
        if quote.len() < homa::COMMON_HEADER_LEN {
            ignored.short_quote += 1;
            net_debug!("homa: ICMP error quoting too little to name an RPC");
            return;
        }
        let q = homa::Packet::new_unchecked(quote);
        let found = self
            .find_rpc(addr, q.sender_id(), q.sport())
            .filter(|&i| self.rpc_at(i).is_some_and(|r| r.peer_port() == q.dport()));
        let Some((i, state)) = found.and_then(|i| Some((i, self.rpc_at(i)?.state()))) else {
            self.stats.icmp_ignored.unknown_rpc += 1;
            net_debug!("homa: ICMP error naming no RPC ignored");
            return;
        };
        let error = match what {
            Unreachable::Port => RpcError::PortUnreachable,
            Unreachable::Protocol => RpcError::PeerUnreachable,
            _ => {
                self.stats.icmp_ignored.soft += 1;
                if let Some(mut r) = self.steady(i) {
                    r.note_unreachable();
                }
                net_debug!("homa: rpc {}: soft ICMP error noted", q.sender_id());
                return;
            }
        };
        if state.is_client() && !state.is_finished() {
            net_debug!("homa: rpc {} aborted by ICMP: {}", q.sender_id(), error);
            self.fail_client_rpc(i, error);
        } else if matches!(state, State::ServerOutgoing) {
            net_debug!(
                "homa: server rpc {} freed by ICMP: {}",
                q.sender_id(),
                error
            );
            self.free_rpc(i);
            self.stats.server_freed += 1;
        } else {
            self.stats.icmp_ignored.wrong_state += 1;
        }
    }
}
