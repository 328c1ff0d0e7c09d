//! How long a frame occupies a link.

use homa_phy::time::Duration;

/// Bytes a frame costs on the wire beyond its own: preamble and start
/// delimiter (8), FCS (4) and the inter-frame gap (12).
pub const WIRE_OVERHEAD: usize = 24;

/// Shortest frame on the wire without FCS; a MAC pads shorter ones.
pub const MIN_FRAME: usize = 60;

/// Bytes a frame of `frame_len` (without FCS) occupies on the wire: padded to
/// [`MIN_FRAME`], plus [`WIRE_OVERHEAD`]. Use it to count wire load.
pub const fn wire_bytes(frame_len: usize) -> usize {
    let padded = if frame_len < MIN_FRAME {
        MIN_FRAME
    } else {
        frame_len
    };
    padded + WIRE_OVERHEAD
}

/// Time to serialise a frame of `frame_len` at `rate_mbps`, rounded up to
/// whole nanoseconds so that no link ever carries more than its rate.
pub const fn serialisation_time(frame_len: usize, rate_mbps: u32) -> Duration {
    let bits_x1000 = wire_bytes(frame_len) as u64 * 8 * 1000;
    let rate = rate_mbps as u64;
    Duration::from_nanos(bits_x1000.div_ceil(rate))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_frame_at_10_and_40_gbps() {
        // 1538 wire bytes: 1230.4 ns at 10 Gbps, 307.6 ns at 40 Gbps.
        assert_eq!(serialisation_time(1514, 10_000).total_nanos(), 1231);
        assert_eq!(serialisation_time(1514, 40_000).total_nanos(), 308);
        // 1538 * 8 / 100 Gbps = 123.04 ns, rounded up.
        assert_eq!(serialisation_time(1514, 100_000).total_nanos(), 124);
    }

    #[test]
    fn short_frames_are_padded() {
        assert_eq!(wire_bytes(42), 84);
        assert_eq!(wire_bytes(60), 84);
        assert_eq!(wire_bytes(61), 85);
        assert_eq!(serialisation_time(1, 10_000).total_nanos(), 68);
    }
}
