//! Per-frame costs: parsing and verifying one checksummed 1,514-byte frame,
//! emitting one with and without checksums, and a plain 1 MB memcpy.

use std::hint::black_box;

use homa_stack::wire::homa::{self, DataHeader, Kind, DATA_HEADER_LEN};
use homa_stack::wire::{
    EtherType, EthernetFrame, EthernetRepr, IpAddr, IpProtocol, Ipv4Packet, Ipv4Repr,
};
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire as sw;

use super::cpu::measured;
use super::ring::FRAME;
use super::{fill_payload, CLIENT_IP, CLIENT_MAC, SERVER_IP, SERVER_MAC};

const ETH: usize = 14;
const IP: usize = 20;
/// Payload of a full-size Homa DATA frame.
pub const HOMA_PAYLOAD: usize = FRAME - ETH - IP - DATA_HEADER_LEN;
/// Payload of a full-size UDP frame.
pub const UDP_PAYLOAD: usize = FRAME - ETH - IP - 8;

/// Writes a full-size Ethernet + IPv4 + Homa DATA frame carrying `payload`
/// into `buf`; with `checksum`, the IPv4 and Homa checksums are filled.
pub fn homa_emit(buf: &mut [u8], payload: &[u8], checksum: bool) {
    EthernetRepr {
        src_addr: CLIENT_MAC,
        dst_addr: SERVER_MAC,
        vlan: None,
        ethertype: EtherType::Ipv4,
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut buf[..]));
    let ip = Ipv4Repr {
        src_addr: CLIENT_IP,
        dst_addr: SERVER_IP,
        next_header: IpProtocol::Homa,
        payload_len: DATA_HEADER_LEN + payload.len(),
        hop_limit: 64,
        tos: 0,
    };
    ip.emit(&mut Ipv4Packet::new_unchecked(&mut buf[ETH..]), checksum);
    let repr = homa::Repr {
        sport: 0x8000,
        dport: 99,
        sender_id: 1234,
        kind: Kind::Data {
            header: DataHeader {
                message_length: 1_000_000,
                incoming: 60_000,
                offset: 14_000,
                ..DataHeader::default()
            },
            payload,
        },
    };
    let mut packet = homa::Packet::new_unchecked(&mut buf[ETH + IP..]);
    repr.emit(&mut packet);
    if checksum {
        packet.fill_checksum(&IpAddr::V4(CLIENT_IP), &IpAddr::V4(SERVER_IP));
    }
}

/// Parses and verifies a frame as the endpoint does on receipt: Ethernet,
/// IPv4 with its header checksum, the Homa checksum, the Homa header.
/// Returns the DATA payload length, or `None` when anything is wrong.
pub fn homa_parse(frame: &[u8]) -> Option<usize> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() != EtherType::Ipv4 {
        return None;
    }
    let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
    let repr = Ipv4Repr::parse(&ip, true).ok()?;
    if repr.next_header != IpProtocol::Homa {
        return None;
    }
    let packet = homa::Packet::new_checked(ip.payload()).ok()?;
    if !packet.verify_checksum(&IpAddr::V4(repr.src_addr), &IpAddr::V4(repr.dst_addr)) {
        return None;
    }
    match homa::Repr::parse(&packet).ok()?.kind {
        Kind::Data { payload, .. } => Some(payload.len()),
        _ => None,
    }
}

fn smol_addr(a: homa_stack::wire::Ipv4Addr) -> sw::Ipv4Address {
    let [a, b, c, d] = a.octets();
    sw::Ipv4Address::new(a, b, c, d)
}

fn caps(checksum: bool) -> ChecksumCapabilities {
    if checksum {
        ChecksumCapabilities::default()
    } else {
        ChecksumCapabilities::ignored()
    }
}

/// Writes a full-size Ethernet + IPv4 + UDP frame with smoltcp's wire
/// module; with `checksum`, the IPv4 and UDP checksums are filled.
pub fn smol_emit(buf: &mut [u8], payload: &[u8], checksum: bool) {
    let caps = caps(checksum);
    sw::EthernetRepr {
        src_addr: sw::EthernetAddress(CLIENT_MAC.0),
        dst_addr: sw::EthernetAddress(SERVER_MAC.0),
        ethertype: sw::EthernetProtocol::Ipv4,
    }
    .emit(&mut sw::EthernetFrame::new_unchecked(&mut buf[..]));
    let (src, dst) = (smol_addr(CLIENT_IP), smol_addr(SERVER_IP));
    sw::Ipv4Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: sw::IpProtocol::Udp,
        payload_len: 8 + payload.len(),
        hop_limit: 64,
    }
    .emit(&mut sw::Ipv4Packet::new_unchecked(&mut buf[ETH..]), &caps);
    sw::UdpRepr {
        src_port: 5000,
        dst_port: 7,
    }
    .emit(
        &mut sw::UdpPacket::new_unchecked(&mut buf[ETH + IP..]),
        &src.into(),
        &dst.into(),
        payload.len(),
        |p| p.copy_from_slice(payload),
        &caps,
    );
}

/// Parses and verifies a frame as smoltcp's interface does: Ethernet, IPv4
/// with its checksum, UDP with its checksum. Returns the payload length.
pub fn smol_parse(frame: &[u8]) -> Option<usize> {
    let caps = ChecksumCapabilities::default();
    let eth = sw::EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() != sw::EthernetProtocol::Ipv4 {
        return None;
    }
    let ip = sw::Ipv4Packet::new_checked(eth.payload()).ok()?;
    let repr = sw::Ipv4Repr::parse(&ip, &caps).ok()?;
    if repr.next_header != sw::IpProtocol::Udp {
        return None;
    }
    let udp = sw::UdpPacket::new_checked(ip.payload()).ok()?;
    sw::UdpRepr::parse(&udp, &repr.src_addr.into(), &repr.dst_addr.into(), &caps).ok()?;
    Some(udp.payload().len())
}

/// The frames the parse measurements read, each checked first.
pub struct Frames {
    /// A checksummed Homa DATA frame.
    pub homa: Vec<u8>,
    /// A checksummed UDP frame.
    pub udp: Vec<u8>,
    payload: Vec<u8>,
}

impl Frames {
    /// Both frames, verified by both parsers (and a corrupted copy of
    /// each rejected, so the parsers do check).
    pub fn new() -> anyhow::Result<Frames> {
        let mut payload = vec![0u8; HOMA_PAYLOAD.max(UDP_PAYLOAD)];
        fill_payload(7, &mut payload);
        let mut homa = vec![0u8; FRAME];
        homa_emit(&mut homa, &payload[..HOMA_PAYLOAD], true);
        let mut udp = vec![0u8; FRAME];
        smol_emit(&mut udp, &payload[..UDP_PAYLOAD], true);
        if homa_parse(&homa) != Some(HOMA_PAYLOAD) || smol_parse(&udp) != Some(UDP_PAYLOAD) {
            return Err(anyhow::anyhow!("a test frame does not parse"));
        }
        let (mut bad_homa, mut bad_udp) = (homa.clone(), udp.clone());
        bad_homa[FRAME - 100] ^= 1;
        bad_udp[FRAME - 100] ^= 1;
        if homa_parse(&bad_homa).is_some() || smol_parse(&bad_udp).is_some() {
            return Err(anyhow::anyhow!("a corrupted frame passes its checksum"));
        }
        Ok(Frames { homa, udp, payload })
    }
}

impl Default for Frames {
    fn default() -> Self {
        Self::new().expect("test frames")
    }
}

/// Seconds per call of `parse` on `frame`, over `n` calls.
pub fn time_parse(parse: fn(&[u8]) -> Option<usize>, frame: &[u8], n: u64) -> anyhow::Result<f64> {
    let (ok, secs) = measured(|| {
        let mut ok = 0u64;
        for _ in 0..n {
            ok += u64::from(parse(black_box(frame)).is_some());
        }
        ok
    });
    if ok != n {
        return Err(anyhow::anyhow!("{} of {n} parses failed", n - ok));
    }
    Ok(secs / n as f64)
}

/// Seconds per full-size frame emitted by `emit`, over `n` frames.
pub fn time_emit(
    emit: fn(&mut [u8], &[u8], bool),
    frames: &Frames,
    udp: bool,
    checksum: bool,
    n: u64,
) -> f64 {
    let payload = &frames.payload[..if udp { UDP_PAYLOAD } else { HOMA_PAYLOAD }];
    let mut buf = vec![0u8; FRAME];
    let ((), secs) = measured(|| {
        for _ in 0..n {
            emit(black_box(&mut buf), black_box(payload), checksum);
        }
    });
    black_box(&buf);
    secs / n as f64
}

/// Bytes per second of `copy_from_slice` of 1,000,000 bytes, over `n` copies.
pub fn time_memcpy(n: u64) -> f64 {
    let mut src = vec![0u8; 1_000_000];
    fill_payload(3, &mut src);
    let mut dst = vec![0u8; 1_000_000];
    let ((), secs) = measured(|| {
        for _ in 0..n {
            dst.copy_from_slice(black_box(&src));
            black_box(&mut dst);
        }
    });
    assert_eq!(dst, src);
    n as f64 * 1e6 / secs
}
