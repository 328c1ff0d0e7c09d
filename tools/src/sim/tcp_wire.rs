//! The TCP model's segments on the wire: Ethernet, IPv4 (priority and ECN
//! in the TOS byte) and TCP with a SACK option, real headers so that a
//! capture reads as TCP in homa-dump and Wireshark. Checksums stay 0, as
//! the Homa hosts leave theirs (the fabric never corrupts); a capture fills
//! them.

/// Ethernet, IPv4 and TCP headers without options.
pub const HEADERS: usize = 14 + 20 + 20;

/// TCP flags the model uses.
const ACK: u8 = 0x10;
const PSH: u8 = 0x08;
const ECE: u8 = 0x40;

/// IPv4 ECN field values.
const ECT0: u8 = 0b10;
const CE: u8 = 0b11;

/// One segment's header fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Segment {
    /// Source and destination MAC.
    pub macs: ([u8; 6], [u8; 6]),
    /// Source and destination IPv4 address.
    pub ips: ([u8; 4], [u8; 4]),
    /// Source and destination port.
    pub ports: (u16, u16),
    /// Sequence number of the first payload byte.
    pub seq: u32,
    /// Next byte expected (acknowledgements).
    pub ack: u32,
    /// Strict priority (the TOS byte's top 3 bits).
    pub priority: u8,
    /// Data: ECN-capable. Received: Congestion Experienced.
    pub ecn: bool,
    /// Acknowledgement: echoes a CE mark.
    pub ece: bool,
    /// SACK blocks (sequence numbers), the first `.1` of them.
    pub sacks: ([(u32, u32); 3], usize),
}

impl Segment {
    /// The frame's length with `payload` bytes.
    pub fn frame_len(&self, payload: usize) -> usize {
        HEADERS + self.options_len() + payload
    }

    fn options_len(&self) -> usize {
        if self.sacks.1 == 0 {
            0
        } else {
            4 + 8 * self.sacks.1
        }
    }

    /// Writes the headers into `frame` (of [`Segment::frame_len`]) and
    /// returns where the payload goes.
    pub fn write<'f>(&self, frame: &'f mut [u8]) -> &'f mut [u8] {
        let opts = self.options_len();
        frame[0..6].copy_from_slice(&self.macs.1);
        frame[6..12].copy_from_slice(&self.macs.0);
        frame[12..14].copy_from_slice(&[0x08, 0x00]);
        let ip = &mut frame[14..];
        let total = (ip.len() as u16).to_be_bytes();
        let ecn = if self.ecn { ECT0 } else { 0 };
        ip[..10].copy_from_slice(&[
            0x45,
            self.priority << 5 | ecn,
            total[0],
            total[1],
            0,
            0,
            0x40,
            0,
            64,
            6,
        ]);
        ip[12..16].copy_from_slice(&self.ips.0);
        ip[16..20].copy_from_slice(&self.ips.1);
        let tcp = &mut ip[20..];
        tcp[0..2].copy_from_slice(&self.ports.0.to_be_bytes());
        tcp[2..4].copy_from_slice(&self.ports.1.to_be_bytes());
        tcp[4..8].copy_from_slice(&self.seq.to_be_bytes());
        tcp[8..12].copy_from_slice(&self.ack.to_be_bytes());
        tcp[12] = ((20 + opts as u8) / 4) << 4;
        tcp[13] = ACK | if self.ece { ECE } else { PSH };
        tcp[14..16].copy_from_slice(&u16::MAX.to_be_bytes());
        if opts > 0 {
            tcp[20..24].copy_from_slice(&[1, 1, 5, 2 + 8 * self.sacks.1 as u8]);
            for (k, (from, to)) in self.sacks.0[..self.sacks.1].iter().enumerate() {
                tcp[24 + 8 * k..28 + 8 * k].copy_from_slice(&from.to_be_bytes());
                tcp[28 + 8 * k..32 + 8 * k].copy_from_slice(&to.to_be_bytes());
            }
        }
        &mut tcp[20 + opts..]
    }

    /// The segment in `frame` and its payload, if it is a well-formed
    /// IPv4 TCP segment.
    pub fn parse(frame: &[u8]) -> Option<(Segment, &[u8])> {
        if frame.get(12..14)? != [0x08, 0x00] {
            return None;
        }
        let ip = frame.get(14..)?;
        let ihl = usize::from(ip.first()? & 0x0f) * 4;
        let total = usize::from(u16::from_be_bytes([*ip.get(2)?, *ip.get(3)?]));
        if ip[0] >> 4 != 4 || ihl < 20 || ip.get(9) != Some(&6) || total > ip.len() {
            return None;
        }
        let tcp = ip.get(ihl..total)?;
        let offset = usize::from(tcp.get(12)? >> 4) * 4;
        let options = tcp.get(20..offset)?;
        let word =
            |b: &[u8], at: usize| u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        let mut s = Segment {
            macs: (frame[6..12].try_into().ok()?, frame[0..6].try_into().ok()?),
            ips: (ip[12..16].try_into().ok()?, ip[16..20].try_into().ok()?),
            ports: (
                u16::from_be_bytes([tcp[0], tcp[1]]),
                u16::from_be_bytes([tcp[2], tcp[3]]),
            ),
            seq: word(tcp, 4),
            ack: word(tcp, 8),
            priority: ip[1] >> 5,
            ecn: ip[1] & 3 == CE,
            ece: tcp[13] & ECE != 0,
            sacks: ([(0, 0); 3], 0),
        };
        let mut at = 0;
        while let Some(&kind) = options.get(at) {
            match kind {
                0 => break,
                1 => at += 1,
                _ => {
                    let len = usize::from(*options.get(at + 1)?);
                    let body = options.get(at + 2..at + len.max(2))?;
                    if kind == 5 {
                        for block in body.chunks_exact(8).take(3 - s.sacks.1) {
                            s.sacks.0[s.sacks.1] = (word(block, 0), word(block, 4));
                            s.sacks.1 += 1;
                        }
                    }
                    at += len.max(2);
                }
            }
        }
        Some((s, &tcp[offset..]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_round_trip_with_sack_blocks_and_ecn() {
        let s = Segment {
            macs: ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]),
            ips: ([10, 0, 0, 1], [10, 0, 0, 2]),
            ports: (10_003, 5000),
            seq: u32::MAX - 3,
            ack: 77,
            priority: 6,
            ecn: false,
            ece: true,
            sacks: ([(100, 200), (300, 400), (0, 0)], 2),
        };
        let mut frame = vec![0u8; s.frame_len(5)];
        s.write(&mut frame).copy_from_slice(b"hello");
        assert_eq!(frame.len(), 14 + 20 + 20 + 20 + 5);
        assert_eq!(frame[15], 6 << 5, "priority, not ECN-capable");
        let (back, payload) = Segment::parse(&frame).unwrap();
        assert_eq!(back, s);
        assert_eq!(payload, b"hello");
        // A switch's CE mark reads back as `ecn`.
        let data = Segment {
            ecn: true,
            ece: false,
            sacks: ([(0, 0); 3], 0),
            ..s
        };
        let mut frame = vec![0u8; data.frame_len(0)];
        data.write(&mut frame);
        assert_eq!(frame[15] & 3, ECT0);
        assert!(!Segment::parse(&frame).unwrap().0.ecn);
        frame[15] |= CE;
        assert!(Segment::parse(&frame).unwrap().0.ecn);
        // Cut short anywhere, or not TCP: refused, never a panic.
        for n in 0..frame.len() {
            assert!(Segment::parse(&frame[..n]).is_none(), "{n}");
        }
        frame[14 + 9] = 17;
        assert!(Segment::parse(&frame).is_none());
    }
}
