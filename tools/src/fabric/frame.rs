//! A frame in flight and the priority rule for frames without metadata.

/// A frame travelling through the fabric.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Frame {
    /// The link-layer frame, without FCS.
    pub(crate) data: Vec<u8>,
    /// Strict-priority level 0 (lowest) to 7, fixed when the host sent it.
    pub(crate) priority: u8,
    /// Destination host, or `None` for a MAC no host has (dropped at the ToR).
    pub(crate) dst: Option<usize>,
    /// pFabric's priority: bytes its message has left, the lowest first.
    pub(crate) rank: u32,
    /// The connection the frame belongs to, so a pFabric port keeps its
    /// frames in order.
    pub(crate) flow: u32,
}

/// Marks an ECN-capable IPv4 frame Congestion Experienced (both ECN bits of
/// the TOS byte set), as a switch does past its marking threshold; the
/// header checksum, if filled, is recomputed. Returns whether it was
/// ECN-capable (other frames are left as they are).
pub(crate) fn mark_ce(frame: &mut [u8]) -> bool {
    if frame.len() < 34 || frame[12..14] != [0x08, 0x00] || frame[15] & 3 == 0 {
        return false;
    }
    frame[15] |= 3;
    let end = (14 + usize::from(frame[14] & 0x0f) * 4).min(frame.len());
    if frame[24..26] != [0, 0] && end >= 34 {
        let header = &mut frame[14..end];
        header[10..12].fill(0);
        let sum = homa_stack::wire::checksum::data(header);
        header[10..12].copy_from_slice(&sum.to_be_bytes());
    }
    true
}

/// The priority (0..=7) a switch reads from a frame's bytes, used for frames
/// sent without [`PacketMeta`](homa_phy::PacketMeta):
///
/// - 802.1Q / 802.1ad tag (EtherType 0x8100 / 0x88a8): the PCP, the top 3 bits
///   of the tag (an L2 switch trusts the tag before looking deeper);
/// - IPv4 (0x0800): the top 3 bits of the TOS byte, i.e. the DSCP class
///   selector, as Linux Homa encodes its priorities;
/// - IPv6 (0x86DD): the top 3 bits of the traffic class;
/// - anything else, or a frame too short to hold the field: 0.
pub fn priority_from_frame(frame: &[u8]) -> u8 {
    let byte = |i: usize| frame.get(i).copied();
    let ethertype = match (byte(12), byte(13)) {
        (Some(hi), Some(lo)) => u16::from_be_bytes([hi, lo]),
        _ => return 0,
    };
    let top3 = match ethertype {
        0x8100 | 0x88a8 => byte(14),
        0x0800 => byte(15),
        // The traffic class straddles bytes 14 and 15; its top 3 bits are
        // bits 3..1 of byte 14.
        0x86dd => byte(14).map(|b| (b & 0x0f) << 4),
        _ => None,
    };
    top3.map_or(0, |b| b >> 5)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eth(ethertype: u16, rest: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(rest);
        f
    }

    #[test]
    fn priority_from_each_encoding() {
        assert_eq!(priority_from_frame(&eth(0x0800, &[0x45, 0xb8])), 5);
        assert_eq!(priority_from_frame(&eth(0x8100, &[0xe0, 0x00])), 7);
        assert_eq!(priority_from_frame(&eth(0x88a8, &[0x60, 0x00])), 3);
        // Traffic class 0xc0 (CS6): version 6 nibble then 0xc, 0x0.
        assert_eq!(priority_from_frame(&eth(0x86dd, &[0x6c, 0x00])), 6);
        assert_eq!(priority_from_frame(&eth(0x0806, &[0xff, 0xff])), 0);
    }

    #[test]
    fn only_ecn_capable_ipv4_is_marked_and_its_checksum_stays_right() {
        let mut ip = [0u8; 20];
        ip[0] = 0x45;
        let mut f = eth(0x0800, &ip);
        assert!(!mark_ce(&mut f), "not ECN-capable");
        f[15] = 0xe2; // priority 7, ECT(0)
        let sum = homa_stack::wire::checksum::data(&f[14..34]);
        f[24..26].copy_from_slice(&sum.to_be_bytes());
        assert!(mark_ce(&mut f));
        assert_eq!(f[15], 0xe3);
        assert_eq!(homa_stack::wire::checksum::data(&f[14..34]), 0);
        let mut arp = eth(0x0806, &[0xff; 20]);
        assert!(!mark_ce(&mut arp));
        assert_eq!(arp[15], 0xff);
    }

    #[test]
    fn truncated_frames_get_priority_zero() {
        assert_eq!(priority_from_frame(&[]), 0);
        assert_eq!(priority_from_frame(&eth(0x0800, &[0x45])), 0);
        assert_eq!(priority_from_frame(&eth(0x8100, &[])), 0);
    }
}
