//! A host's fabric port as a `smoltcp::phy::Device`.
//!
//! smoltcp runs with the IP medium; this adapter adds and strips the
//! Ethernet header, taking the destination MAC from the fabric's address
//! plan (static neighbours, as the Homa hosts have, so no ARP). Frames keep
//! TOS 0, so the fabric puts every TCP frame in queue 0, unless a [`Pias`]
//! tagger marks the IPv4 TOS byte with a PIAS priority (its top 3 bits are
//! the priority the fabric reads, as a DSCP mark is for a switch). Checksums are neither computed nor checked, as for the
//! Homa hosts: the fabric never corrupts a frame.
//!
//! Time: smoltcp's clock runs [`CLOCK_SCALE`] times as fast as the fabric's.
//! smoltcp 0.13 fixes its minimum and initial retransmission timeout at 1 s
//! and measures round trips in whole milliseconds, constants made for the
//! Internet: at this scale its 1 s is 200 us of fabric time, the minimum RTO
//! of the Homa paper's TCP baselines, and a millisecond of round trip is
//! 0.2 us, so its RTT estimate resolves a datacenter's microseconds. Every
//! other smoltcp time (the delayed ACK) is set in fabric time through
//! [`smol_duration`].

use std::collections::HashMap;

use crate::fabric::Fabric;
use homa_phy::{Device as _, TxToken as _};
use smoltcp::phy::{self, ChecksumCapabilities, DeviceCapabilities, Medium};

/// Ethernet header length.
pub const ETH_HEADER: usize = 14;

/// smoltcp's clock over the fabric's: 1 ns of fabric time is 5 us of
/// smoltcp's time, so smoltcp's fixed 1 s minimum RTO is 200 us.
pub const CLOCK_SCALE: u64 = 5_000;

/// smoltcp's time for fabric time `ns`.
pub fn smol_time(ns: u64) -> smoltcp::time::Instant {
    smoltcp::time::Instant::from_micros((ns * (CLOCK_SCALE / 1000)) as i64)
}

/// The first fabric time at or after smoltcp time `t`.
pub fn fabric_time(t: smoltcp::time::Instant) -> u64 {
    (t.total_micros().max(0) as u64).div_ceil(CLOCK_SCALE / 1000)
}

/// smoltcp's duration for `ns` of fabric time.
pub fn smol_duration(ns: u64) -> smoltcp::time::Duration {
    smoltcp::time::Duration::from_micros(ns * (CLOCK_SCALE / 1000))
}

/// smoltcp's fixed minimum retransmission timeout in fabric time, ns.
pub const MIN_RTO_NS: u64 = 1_000_000_000 / CLOCK_SCALE;

/// The source IPv4 address of an Ethernet frame carrying IPv4, if it is one.
pub fn ipv4_source(frame: &[u8]) -> Option<[u8; 4]> {
    if frame.len() < ETH_HEADER + 20 || frame[12..14] != [0x08, 0x00] {
        return None;
    }
    frame[ETH_HEADER + 12..ETH_HEADER + 16].try_into().ok()
}

/// PIAS's priorities for the segments of one host's connections to one peer:
/// a data segment is tagged by the bytes its message had already sent before
/// it (its sequence number less the message's first), against the
/// workload's thresholds; a segment without payload (SYN, ACK, FIN) goes at
/// the top priority. Each connection carries one message at a time and gets
/// the next only when every byte of the last is acknowledged, so the first
/// data segment after [`Pias::start_message`] is the message's first.
#[derive(Debug, Clone)]
pub struct Pias {
    /// Ascending demotion thresholds in bytes already sent: below the first
    /// is priority 7, at or above the last priority 0.
    pub thresholds: [u32; 7],
    /// The local port of connection 0; connection `i` uses `base + i`.
    pub base: u16,
    /// Sequence number of each connection's current message's first byte,
    /// once seen.
    pub starts: Vec<Option<u32>>,
}

impl Pias {
    /// The priority of the IPv4 packet `ip` (TCP inside), remembering a
    /// message's first sequence number.
    pub fn priority(&mut self, ip: &[u8]) -> u8 {
        let Some((src_port, seq, payload)) = tcp_segment(ip) else {
            return 7;
        };
        let conn = usize::from(src_port.wrapping_sub(self.base));
        match self.starts.get_mut(conn) {
            Some(start) if payload > 0 => {
                let sent = seq.wrapping_sub(*start.get_or_insert(seq));
                let demotions = self.thresholds.iter().filter(|&&t| sent >= t).count();
                7 - demotions as u8
            }
            _ => 7,
        }
    }

    /// Connection `conn` starts a new message: its next data segment is the
    /// message's first.
    pub fn start_message(&mut self, conn: usize) {
        if let Some(start) = self.starts.get_mut(conn) {
            *start = None;
        }
    }
}

/// Source port, sequence number and payload length of a TCP segment in the
/// IPv4 packet `ip`, if it is one.
fn tcp_segment(ip: &[u8]) -> Option<(u16, u32, usize)> {
    let ihl = usize::from(ip.first()? & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([*ip.get(2)?, *ip.get(3)?]));
    if ip.get(9) != Some(&6) {
        return None;
    }
    let tcp = ip.get(ihl..total)?;
    let port = u16::from_be_bytes([*tcp.first()?, *tcp.get(1)?]);
    let seq = u32::from_be_bytes(tcp.get(4..8)?.try_into().ok()?);
    let offset = usize::from(tcp.get(12)? >> 4) * 4;
    Some((port, seq, tcp.len().checked_sub(offset)?))
}

/// One host's port, lent to smoltcp for one poll. `staged` is the frame
/// (Ethernet header included) that the next `receive` hands over.
pub struct SmolPort<'a> {
    /// The fabric.
    pub fabric: &'a mut Fabric,
    /// This host.
    pub host: usize,
    /// Every host's MAC by IPv4 address.
    pub macs: &'a HashMap<[u8; 4], [u8; 6]>,
    /// The frame to deliver, taken by `receive`.
    pub staged: Option<&'a [u8]>,
    /// PIAS tagging of sent segments, if the protocol is PIAS.
    pub pias: Option<&'a mut Pias>,
}

impl phy::Device for SmolPort<'_> {
    type RxToken<'b>
        = SmolRx<'b>
    where
        Self: 'b;
    type TxToken<'b>
        = SmolTx<'b>
    where
        Self: 'b;

    fn receive(
        &mut self,
        _timestamp: smoltcp::time::Instant,
    ) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
        let frame = self.staged.take()?;
        let tx = SmolTx {
            fabric: self.fabric,
            host: self.host,
            macs: self.macs,
            pias: self.pias.as_deref_mut(),
        };
        Some((SmolRx(&frame[ETH_HEADER..]), tx))
    }

    fn transmit(&mut self, _timestamp: smoltcp::time::Instant) -> Option<Self::TxToken<'_>> {
        Some(SmolTx {
            fabric: self.fabric,
            host: self.host,
            macs: self.macs,
            pias: self.pias.as_deref_mut(),
        })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ip;
        caps.max_transmission_unit = self.fabric.config().mtu - ETH_HEADER;
        caps.checksum = ChecksumCapabilities::ignored();
        caps
    }
}

/// A received IP packet.
pub struct SmolRx<'b>(&'b [u8]);

impl phy::RxToken for SmolRx<'_> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(self.0)
    }
}

/// Permission to send one IP packet from a host.
pub struct SmolTx<'b> {
    fabric: &'b mut Fabric,
    host: usize,
    macs: &'b HashMap<[u8; 4], [u8; 6]>,
    pias: Option<&'b mut Pias>,
}

impl phy::TxToken for SmolTx<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let now = self.fabric.now();
        let src_mac = self.fabric.host_mac(self.host);
        let macs = self.macs;
        let mut pias = self.pias;
        let mut port = self.fabric.device(self.host);
        let Some(tx) = port.transmit(now) else {
            // A NIC queue limit (homa-sim sets none): the frame is lost.
            return f(&mut vec![0u8; len]);
        };
        tx.consume(ETH_HEADER + len, |frame| {
            let r = f(&mut frame[ETH_HEADER..]);
            // The packet is written first: its destination picks the MAC.
            let dst = &frame[ETH_HEADER + 16..ETH_HEADER + 20];
            let dst_mac = macs
                .get(&[dst[0], dst[1], dst[2], dst[3]])
                .copied()
                .unwrap_or([0xff; 6]);
            frame[0..6].copy_from_slice(&dst_mac);
            frame[6..12].copy_from_slice(&src_mac);
            frame[12..14].copy_from_slice(&[0x08, 0x00]);
            if let Some(pias) = pias.as_mut() {
                let priority = pias.priority(&frame[ETH_HEADER..]);
                frame[ETH_HEADER + 1] = priority << 5;
            }
            r
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smoltcp_clock_runs_fast_so_its_one_second_rto_is_200_us() {
        assert_eq!(smol_time(1_999).total_micros(), 9_995);
        assert_eq!(fabric_time(smol_time(5_003)), 5_003);
        // A deadline between two nanoseconds is rounded up, never early.
        assert_eq!(
            fabric_time(smoltcp::time::Instant::from_micros(5 * 7 + 1)),
            8
        );
        assert_eq!(MIN_RTO_NS, 200_000);
        assert_eq!(
            smol_time(MIN_RTO_NS) - smol_time(0),
            smoltcp::time::Duration::from_secs(1)
        );
        assert_eq!(smol_duration(1_000_000).total_millis(), 5_000);
    }

    /// An IPv4 packet holding a TCP segment from `port` with `seq` and
    /// `payload` bytes.
    fn segment(port: u16, seq: u32, payload: usize) -> Vec<u8> {
        let mut p = vec![0u8; 40 + payload];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&((40 + payload) as u16).to_be_bytes());
        p[9] = 6;
        p[20..22].copy_from_slice(&port.to_be_bytes());
        p[24..28].copy_from_slice(&seq.to_be_bytes());
        p[32] = 5 << 4;
        p
    }

    #[test]
    fn pias_demotes_by_bytes_the_message_already_sent() {
        let thresholds = [1_000, 2_000, 3_000, 4_000, 5_000, 6_000, 7_000];
        let mut pias = Pias {
            thresholds,
            base: 100,
            starts: vec![None, None],
        };
        // Connection 1's message starts near the top of sequence space.
        let isn = u32::MAX - 500;
        assert_eq!(pias.priority(&segment(101, isn, 1_000)), 7);
        assert_eq!(
            pias.priority(&segment(101, isn.wrapping_add(1_000), 1_000)),
            6
        );
        assert_eq!(
            pias.priority(&segment(101, isn.wrapping_add(2_500), 100)),
            5
        );
        // A retransmission of the first segment is still priority 7.
        assert_eq!(pias.priority(&segment(101, isn, 1_000)), 7);
        assert_eq!(
            pias.priority(&segment(101, isn.wrapping_add(9_000), 100)),
            0
        );
        // Segments without payload, and of other ports, go at the top.
        assert_eq!(pias.priority(&segment(101, isn.wrapping_add(9_000), 0)), 7);
        assert_eq!(pias.priority(&segment(5000, 77, 500)), 7);
        // The next message on connection 1 starts over at priority 7.
        pias.start_message(1);
        assert_eq!(pias.priority(&segment(101, 123, 1_400)), 7);
        assert_eq!(pias.priority(&segment(101, 123 + 1_400, 1_400)), 6);
        // A truncated packet is not parsed.
        assert_eq!(pias.priority(&segment(101, 123 + 9_000, 100)[..30]), 7);
    }

    #[test]
    fn source_address_of_ipv4_frames_only() {
        let mut f = [0u8; 34];
        f[12] = 0x08;
        f[26..30].copy_from_slice(&[10, 0, 1, 2]);
        assert_eq!(ipv4_source(&f), Some([10, 0, 1, 2]));
        f[13] = 0x06; // ARP
        assert_eq!(ipv4_source(&f), None);
        assert_eq!(ipv4_source(&f[..20]), None);
    }
}
