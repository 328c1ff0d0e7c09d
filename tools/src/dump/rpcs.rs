//! `--rpcs` and `--stats`: the packets of a capture gathered per RPC and per
//! type.
//!
//! An RPC is named by its client address and port, its server address and
//! port, and the client's id (even; the server's is that id with the low bit
//! set, protocol.md 3.3). A packet whose `sender_id` is even was sent by the
//! client; odd, by the server.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};

use serde::Serialize;
use serde_json::value::RawValue;

use homa_stack::wire::homa::Kind;

use super::decode::{Decoded, Homa};
use super::json::time_value;
use super::reader::Timestamp;

/// Byte ranges seen of one message.
#[derive(Debug, Default, Clone)]
struct Coverage {
    /// Disjoint, sorted `[start, end)` ranges.
    ranges: Vec<(u64, u64)>,
}

impl Coverage {
    /// Adds `[start, end)`; returns how many of its bytes were already seen.
    fn add(&mut self, start: u64, end: u64) -> u64 {
        if end <= start {
            return 0;
        }
        let mut seen = 0;
        let mut lo = start;
        let mut hi = end;
        let mut kept = Vec::with_capacity(self.ranges.len() + 1);
        for &(s, e) in &self.ranges {
            if e < lo || s > hi {
                kept.push((s, e));
            } else {
                seen += e.min(end).saturating_sub(s.max(start));
                lo = lo.min(s);
                hi = hi.max(e);
            }
        }
        kept.push((lo, hi));
        kept.sort_unstable();
        self.ranges = kept;
        seen
    }

    /// Every byte of `[0, len)` was seen.
    fn complete(&self, len: u64) -> bool {
        len == 0
            || self
                .ranges
                .first()
                .is_some_and(|&(s, e)| s == 0 && e >= len)
    }
}

/// One direction of an RPC: its message.
#[derive(Debug, Default, Clone)]
struct Message {
    length: Option<u32>,
    packets: u64,
    bytes: u64,
    retx_bytes: u64,
    coverage: Coverage,
}

impl Message {
    fn data(&mut self, message_length: u32, offset: u32, len: usize, flagged: bool) {
        self.length.get_or_insert(message_length);
        self.packets += 1;
        self.bytes += len as u64;
        let start = u64::from(offset);
        let again = self.coverage.add(start, start + len as u64);
        // A packet the sender marked as a retransmission counts whole;
        // otherwise the bytes the capture had already seen.
        self.retx_bytes += if flagged { len as u64 } else { again };
    }

    fn complete(&self) -> bool {
        self.length
            .is_some_and(|l| self.coverage.complete(u64::from(l)))
    }
}

#[derive(Debug, Clone, Default)]
struct Rpc {
    first: Option<Timestamp>,
    last: Option<Timestamp>,
    /// When the response's last missing byte arrived.
    done: Option<Timestamp>,
    request: Message,
    response: Message,
    grants: u64,
    resends: u64,
    busy: u64,
    need_acks: u64,
    unknowns: u64,
    acked: bool,
    packets: u64,
}

impl Rpc {
    fn completed(&self) -> bool {
        self.request.complete() && self.response.complete()
    }
}

/// `(client, server, client id)`.
type Key = (SocketAddr, SocketAddr, u64);
/// An RPC as acks name it: the client's address without its port (not part
/// of a server's key, protocol.md 3.3), the server, the client's id.
type ServerKey = (IpAddr, SocketAddr, u64);

/// Per-type counters.
#[derive(Debug, Default, Clone, Serialize)]
pub struct TypeStats {
    /// Packets.
    pub packets: u64,
    /// Bytes of Homa packets on the wire (header and payload).
    pub bytes: u64,
}

/// Gathers packets into RPCs and counters.
#[derive(Debug, Default)]
pub struct Tracker {
    rpcs: HashMap<Key, Rpc>,
    /// In order of first appearance.
    order: Vec<Key>,
    /// The RPCs under the name acks give them.
    by_server: HashMap<ServerKey, Vec<Key>>,
    types: BTreeMap<String, TypeStats>,
    priorities: BTreeMap<u8, u64>,
    frames: u64,
    homa_packets: u64,
    truncated: u64,
    bad_checksums: u64,
    first: Option<Timestamp>,
}

impl Tracker {
    /// An empty tracker.
    pub fn new() -> Tracker {
        Tracker::default()
    }

    /// Counts one frame.
    pub fn add(&mut self, time: Option<Timestamp>, d: &Decoded<'_>) {
        self.frames += 1;
        if self.first.is_none() {
            self.first = time;
        }
        let (Some(ip), Some(h)) = (d.ip(), d.homa()) else {
            return;
        };
        self.homa_packets += 1;
        let t = self.types.entry(h.ptype.to_string()).or_default();
        t.packets += 1;
        t.bytes += h.wire_len as u64;
        *self.priorities.entry(ip.priority()).or_default() += 1;
        if h.truncated() {
            self.truncated += 1;
        }
        // The frames the listing marks: a bad Homa or IPv4 header checksum.
        if matches!(h.checksum, super::decode::HomaChecksum::Bad(_))
            || matches!(ip.checksum, Some((_, false)))
        {
            self.bad_checksums += 1;
        }
        if !h.has_common_header() {
            return;
        }
        self.add_rpc_packet(time, ip.src, ip.dst, h);
    }

    fn add_rpc_packet(&mut self, time: Option<Timestamp>, src: IpAddr, dst: IpAddr, h: &Homa<'_>) {
        let p = &h.packet;
        let id = p.sender_id();
        let from_client = id & 1 == 0;
        let (client, server) = if from_client {
            (
                SocketAddr::new(src, p.sport()),
                SocketAddr::new(dst, p.dport()),
            )
        } else {
            (
                SocketAddr::new(dst, p.dport()),
                SocketAddr::new(src, p.sport()),
            )
        };
        let key = (client, server, id & !1);
        let rpc = self.rpcs.entry(key).or_insert_with(|| {
            self.order.push(key);
            self.by_server
                .entry((client.ip(), server, key.2))
                .or_default()
                .push(key);
            Rpc::default()
        });
        rpc.packets += 1;
        if rpc.first.is_none() {
            rpc.first = time;
        }
        if time.is_some() {
            rpc.last = time;
        }
        let Some(repr) = &h.repr else {
            return;
        };
        let mut acks: Vec<ServerKey> = Vec::new();
        match &repr.kind {
            Kind::Data { header, .. } => {
                let was_done = rpc.completed();
                let msg = if from_client {
                    &mut rpc.request
                } else {
                    &mut rpc.response
                };
                msg.data(
                    header.message_length,
                    header.offset,
                    h.payload_len(),
                    header.retransmit,
                );
                if !was_done && rpc.completed() {
                    rpc.done = time;
                }
                if let Some(ack) = header.ack {
                    // A piggy-backed ack names an RPC the destination
                    // serves and the sender is the client of.
                    acks.push((src, SocketAddr::new(dst, ack.server_port), ack.client_id));
                }
            }
            Kind::Grant { .. } => rpc.grants += 1,
            Kind::Resend { .. } => rpc.resends += 1,
            Kind::Busy => rpc.busy += 1,
            Kind::NeedAck => rpc.need_acks += 1,
            Kind::RpcUnknown => rpc.unknowns += 1,
            Kind::Ack { acks: entries } => {
                if from_client {
                    rpc.acked = true;
                }
                for a in entries.iter() {
                    acks.push((src, SocketAddr::new(dst, a.server_port), a.client_id));
                }
            }
            Kind::Cutoffs { .. } | Kind::Freeze => {}
        }
        for server_key in acks {
            for key in self.by_server.get(&server_key).into_iter().flatten() {
                if let Some(rpc) = self.rpcs.get_mut(key) {
                    rpc.acked = true;
                }
            }
        }
    }

    /// One record per RPC, in order of first appearance.
    pub fn rpc_records(&self) -> Vec<RpcRecord> {
        self.order
            .iter()
            .map(|key| {
                let rpc = &self.rpcs[key];
                let end = if rpc.completed() { rpc.done } else { rpc.last };
                let duration_us = match (rpc.first, end) {
                    (Some(a), Some(b)) => Some((b.total_nanos() - a.total_nanos()) as f64 / 1e3),
                    _ => None,
                };
                let start = match (self.first, rpc.first) {
                    (Some(f), Some(s)) => Some(super::print::seconds(
                        s.total_nanos() - f.total_nanos(),
                        s.digits,
                    )),
                    _ => None,
                };
                RpcRecord {
                    id: key.2,
                    client: key.0.to_string(),
                    server: key.1.to_string(),
                    request_length: rpc.request.length,
                    response_length: rpc.response.length,
                    start: start.and_then(|s| RawValue::from_string(s).ok()),
                    start_time: rpc.first.as_ref().map(time_value),
                    duration_us,
                    request_packets: rpc.request.packets,
                    request_bytes: rpc.request.bytes,
                    response_packets: rpc.response.packets,
                    response_bytes: rpc.response.bytes,
                    retransmitted_bytes: rpc.request.retx_bytes + rpc.response.retx_bytes,
                    grants: rpc.grants,
                    resends: rpc.resends,
                    busy: rpc.busy,
                    need_acks: rpc.need_acks,
                    rpc_unknowns: rpc.unknowns,
                    packets: rpc.packets,
                    completed: rpc.completed(),
                    acked: rpc.acked,
                }
            })
            .collect()
    }

    /// The `--stats` summary.
    pub fn stats(&self) -> Stats {
        let rpcs = self.rpc_records();
        Stats {
            frames: self.frames,
            homa_packets: self.homa_packets,
            truncated_packets: self.truncated,
            bad_checksums: self.bad_checksums,
            types: self.types.clone(),
            priorities: self
                .priorities
                .iter()
                .map(|(p, n)| (p.to_string(), *n))
                .collect(),
            rpcs: rpcs.len(),
            completed: rpcs.iter().filter(|r| r.completed).count(),
            incomplete: rpcs.into_iter().filter(|r| !r.completed).collect(),
        }
    }
}

/// One line of `--rpcs`.
#[derive(Debug, Serialize)]
pub struct RpcRecord {
    /// The client's id (even).
    pub id: u64,
    /// Client address and port.
    pub client: String,
    /// Server address and port.
    pub server: String,
    /// Request bytes (DATA `message_length`), if any request DATA was seen.
    pub request_length: Option<u32>,
    /// Response bytes, likewise.
    pub response_length: Option<u32>,
    /// Seconds from the capture's first frame to the RPC's first packet.
    pub start: Option<Box<RawValue>>,
    /// The time of its first packet.
    pub start_time: Option<Box<RawValue>>,
    /// Microseconds from its first packet to the last byte of its response
    /// (to its last packet if it did not complete).
    pub duration_us: Option<f64>,
    /// DATA packets client to server.
    pub request_packets: u64,
    /// DATA payload bytes client to server.
    pub request_bytes: u64,
    /// DATA packets server to client.
    pub response_packets: u64,
    /// DATA payload bytes server to client.
    pub response_bytes: u64,
    /// Payload bytes sent again: whole packets marked `retransmit`, and
    /// bytes the capture had seen before.
    pub retransmitted_bytes: u64,
    /// GRANT packets.
    pub grants: u64,
    /// RESEND packets.
    pub resends: u64,
    /// BUSY packets.
    pub busy: u64,
    /// NEED_ACK packets.
    pub need_acks: u64,
    /// RPC_UNKNOWN packets.
    pub rpc_unknowns: u64,
    /// Homa packets of the RPC.
    pub packets: u64,
    /// Every byte of request and response was seen.
    pub completed: bool,
    /// The client acknowledged it (ACK, or an ack in DATA or in an ACK's list).
    pub acked: bool,
}

impl RpcRecord {
    /// The text line.
    pub fn text(&self) -> String {
        let len = |l: Option<u32>| l.map_or("-".to_string(), |l| l.to_string());
        format!(
            "rpc {} {} > {} start {} dur {} us req {} B: {} DATA {} B resp {} B: {} DATA {} B \
             retx {} B grants {} resends {} busy {} {}{}",
            self.id,
            self.client,
            self.server,
            self.start.as_ref().map_or("-", |s| s.get()),
            self.duration_us
                .map_or("-".to_string(), |d| format!("{d:.1}")),
            len(self.request_length),
            self.request_packets,
            self.request_bytes,
            len(self.response_length),
            self.response_packets,
            self.response_bytes,
            self.retransmitted_bytes,
            self.grants,
            self.resends,
            self.busy,
            if self.completed {
                "completed"
            } else {
                "INCOMPLETE"
            },
            if self.acked { " acked" } else { "" },
        )
    }
}

/// What `--stats` prints.
#[derive(Debug, Serialize)]
pub struct Stats {
    /// Frames counted (after filters).
    pub frames: u64,
    /// Of them, Homa packets.
    pub homa_packets: u64,
    /// Homa packets cut by the snap length.
    pub truncated_packets: u64,
    /// Homa packets whose checksum (not zero, not partial) or IPv4 header
    /// checksum is wrong.
    pub bad_checksums: u64,
    /// Packets and bytes per type.
    pub types: BTreeMap<String, TypeStats>,
    /// Homa packets per IP priority.
    pub priorities: BTreeMap<String, u64>,
    /// RPCs seen.
    pub rpcs: usize,
    /// Of them, completed.
    pub completed: usize,
    /// The RPCs that did not complete.
    pub incomplete: Vec<RpcRecord>,
}

impl Stats {
    /// The text form.
    pub fn text(&self) -> String {
        let mut s = format!(
            "frames {} homa {} truncated {} bad-checksum {}\n",
            self.frames, self.homa_packets, self.truncated_packets, self.bad_checksums
        );
        for (name, t) in &self.types {
            s.push_str(&format!(
                "type {name:<11} packets {:>8} bytes {:>12}\n",
                t.packets, t.bytes
            ));
        }
        for (p, n) in &self.priorities {
            s.push_str(&format!("priority {p} packets {n}\n"));
        }
        s.push_str(&format!(
            "rpcs {} completed {} incomplete {}\n",
            self.rpcs,
            self.completed,
            self.incomplete.len()
        ));
        for r in &self.incomplete {
            s.push_str(&r.text());
            s.push('\n');
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coverage_counts_repeats_and_completion() {
        let mut c = Coverage::default();
        assert_eq!(c.add(0, 100), 0);
        assert_eq!(c.add(200, 300), 0);
        assert!(!c.complete(300));
        assert_eq!(c.add(50, 250), 100);
        assert!(c.complete(300));
        assert_eq!(c.add(0, 300), 300);
        assert_eq!(c.ranges, [(0, 300)]);
        assert!(Coverage::default().complete(0));
    }
}
