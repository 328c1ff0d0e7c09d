//! How a message becomes frames on the wire, as homa-stack cuts it: the
//! basis of the offered load (wire bytes) and of each message's ideal time.

use crate::fabric::wire_bytes;
use homa_stack::wire::homa::DATA_HEADER_LEN;

/// The Ethernet header in front of every Homa packet.
pub const LINK_HEADER: usize = 14;

/// The IPv4 header of a Homa packet (no options).
pub const IPV4_HEADER: usize = 20;

/// The IPv6 header of a Homa packet (no extension headers).
pub const IPV6_HEADER: usize = 40;

/// Homa's packetisation of a message for a fabric of frame MTU `mtu`
/// (Ethernet header included, as the fabric counts it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packetiser {
    /// Payload bytes per DATA packet.
    pub seg: usize,
    /// Unscheduled bytes: one packet boundary is forced here.
    pub unsched: usize,
    /// Ethernet and IP headers in front of each Homa header.
    pub headers: usize,
}

impl Packetiser {
    /// The cut homa-stack makes with `unsched_bytes` and an IP MTU of
    /// `mtu - 14` (at most 1500, the endpoint's default `Config::mtu`), over
    /// IPv4 or, with `ipv6`, over IPv6 (20 bytes less payload per packet).
    pub fn new(frame_mtu: usize, unsched_bytes: usize, ipv6: bool) -> Packetiser {
        let ip_mtu = (frame_mtu - LINK_HEADER).min(1500);
        let ip_header = if ipv6 { IPV6_HEADER } else { IPV4_HEADER };
        Packetiser {
            seg: ip_mtu - ip_header - DATA_HEADER_LEN,
            unsched: unsched_bytes.max(1),
            headers: LINK_HEADER + ip_header,
        }
    }

    /// Frame lengths (without FCS) of a message of `len` bytes, in order.
    pub fn frames(&self, len: usize) -> Vec<usize> {
        let mut out = Vec::with_capacity(len / self.seg + 2);
        self.for_each_frame(len, |f| out.push(f));
        out
    }

    /// Bytes the message occupies on a link: every frame padded, plus
    /// preamble, FCS and inter-frame gap.
    pub fn wire_bytes(&self, len: usize) -> usize {
        let mut total = 0;
        self.for_each_frame(len, |f| total += wire_bytes(f));
        total
    }

    fn for_each_frame(&self, len: usize, mut f: impl FnMut(usize)) {
        let unsched = self.unsched.min(len);
        let mut off = 0;
        while off < len {
            let limit = if off < unsched { unsched } else { len };
            let end = (off + self.seg).min(limit);
            f(self.headers + DATA_HEADER_LEN + end - off);
            off = end;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_at_the_unscheduled_limit() {
        let p = Packetiser::new(1514, 10_000, false);
        assert_eq!(p.seg, 1424);
        let f = p.frames(12_000);
        // 8 packets up to 10000 (the 8th cut at 10000), then 2 for 2000.
        assert_eq!(f.len(), 10);
        assert_eq!(f[0], 1514);
        assert_eq!(f[7], 90 + 10_000 - 7 * 1424);
        assert_eq!(f[9], 90 + 2000 - 1424);
        assert_eq!(f.iter().map(|x| x - 90).sum::<usize>(), 12_000);
        assert_eq!(p.frames(1), [91]);
        assert_eq!(p.wire_bytes(1), 115);
    }

    #[test]
    fn ipv6_packets_carry_1404_bytes_behind_110_bytes_of_headers() {
        let p = Packetiser::new(1514, 10_000, true);
        assert_eq!(p.seg, 1404);
        let f = p.frames(3_000);
        assert_eq!(f, [1514, 1514, 110 + 3_000 - 2 * 1404]);
        assert_eq!(p.frames(1), [111]);
    }
}
