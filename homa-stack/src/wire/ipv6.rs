//! The fixed IPv6 header (RFC 8200).
//!
//! Only the 40-byte fixed header is read: extension headers are not parsed,
//! so a packet with one reports the extension's type as `next_header` and its
//! payload starts with that extension (the stack then drops it as an unknown
//! protocol). Jumbograms are not supported: payload length 0 is an empty
//! payload. Bytes after `payload_len` (Ethernet padding) are ignored.
//!
//! Emitted headers have flow label 0; the traffic class carries the Homa
//! priority (`p << 5`, as Linux Homa writes it).

use core::fmt;

use byteorder::{ByteOrder, NetworkEndian};

use super::{Error, IpProtocol, Ipv6Addr, Result};

mod field {
    use crate::wire::field::Field;

    pub const VER_TC_FLOW: Field = 0..4;
    pub const LENGTH: Field = 4..6;
    pub const NXT_HDR: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC_ADDR: Field = 8..24;
    pub const DST_ADDR: Field = 24..40;
}

/// Length of the fixed header.
pub const HEADER_LEN: usize = field::DST_ADDR.end;

fn addr_from(bytes: &[u8]) -> Ipv6Addr {
    let mut octets = [0u8; 16];
    octets.copy_from_slice(bytes);
    Ipv6Addr::from(octets)
}

/// A view of an IPv6 packet in a byte buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wraps a buffer without checking its length (for emitting).
    pub const fn new_unchecked(buffer: T) -> Ipv6Packet<T> {
        Ipv6Packet { buffer }
    }

    /// Wraps a buffer and checks that the header and the payload it
    /// announces fit.
    pub fn new_checked(buffer: T) -> Result<Ipv6Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Wraps the start of a captured packet whose payload may have been cut
    /// short by the capture's snap length, after
    /// [`check_header_len`](Self::check_header_len). Every accessor but
    /// [`payload`](Self::payload) then stays in bounds; take what was
    /// captured of the payload with [`captured_payload`](Self::captured_payload).
    pub fn new_truncated(buffer: T) -> Result<Ipv6Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_header_len()?;
        Ok(packet)
    }

    /// Ensures no accessor panics: `40 + payload_len` bytes fit.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN || len < HEADER_LEN + usize::from(self.payload_len()) {
            Err(Error)
        } else {
            Ok(())
        }
    }

    /// Ensures every header accessor stays in bounds: the buffer holds the
    /// fixed header; the payload may be cut short.
    pub fn check_header_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error)
        } else {
            Ok(())
        }
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn ver_tc_flow(&self) -> u32 {
        NetworkEndian::read_u32(&self.buffer.as_ref()[field::VER_TC_FLOW])
    }

    /// The version field (6 for a valid packet).
    pub fn version(&self) -> u8 {
        (self.ver_tc_flow() >> 28) as u8
    }

    /// The traffic class: `dscp << 2 | ecn`.
    pub fn traffic_class(&self) -> u8 {
        (self.ver_tc_flow() >> 20) as u8
    }

    /// The DSCP (upper 6 bits of the traffic class).
    pub fn dscp(&self) -> u8 {
        self.traffic_class() >> 2
    }

    /// The ECN bits (lower 2 bits of the traffic class).
    pub fn ecn(&self) -> u8 {
        self.traffic_class() & 0x03
    }

    /// The 20-bit flow label.
    pub fn flow_label(&self) -> u32 {
        self.ver_tc_flow() & 0x000f_ffff
    }

    /// The payload length field: bytes after the fixed header.
    pub fn payload_len(&self) -> u16 {
        NetworkEndian::read_u16(&self.buffer.as_ref()[field::LENGTH])
    }

    /// The next header field, as is (an extension header type if present).
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.buffer.as_ref()[field::NXT_HDR])
    }

    /// The hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// The source address.
    pub fn src_addr(&self) -> Ipv6Addr {
        addr_from(&self.buffer.as_ref()[field::SRC_ADDR])
    }

    /// The destination address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        addr_from(&self.buffer.as_ref()[field::DST_ADDR])
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Ipv6Packet<&'a T> {
    /// The `payload_len` bytes after the fixed header (padding excluded).
    pub fn payload(&self) -> &'a [u8] {
        let range = HEADER_LEN..HEADER_LEN + usize::from(self.payload_len());
        let data = self.buffer.as_ref();
        &data[range]
    }

    /// What the buffer holds of the payload: all of it for a checked packet,
    /// the captured part of a truncated one (see
    /// [`new_truncated`](Self::new_truncated)), empty if not even the fixed
    /// header fits.
    pub fn captured_payload(&self) -> &'a [u8] {
        let data = self.buffer.as_ref();
        let Some(len) = data.get(field::LENGTH).map(NetworkEndian::read_u16) else {
            return &[];
        };
        let end = (HEADER_LEN + usize::from(len)).min(data.len());
        data.get(HEADER_LEN..end).unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    fn set_ver_tc_flow(&mut self, value: u32) {
        NetworkEndian::write_u32(&mut self.buffer.as_mut()[field::VER_TC_FLOW], value);
    }

    /// Sets the version field.
    pub fn set_version(&mut self, value: u8) {
        let raw = (self.ver_tc_flow() & 0x0fff_ffff) | (u32::from(value & 0x0f) << 28);
        self.set_ver_tc_flow(raw);
    }

    /// Sets the traffic class.
    pub fn set_traffic_class(&mut self, value: u8) {
        let raw = (self.ver_tc_flow() & 0xf00f_ffff) | (u32::from(value) << 20);
        self.set_ver_tc_flow(raw);
    }

    /// Sets the DSCP, keeping the ECN bits.
    pub fn set_dscp(&mut self, value: u8) {
        let ecn = self.ecn();
        self.set_traffic_class((value << 2) | ecn);
    }

    /// Sets the ECN bits, keeping the DSCP.
    pub fn set_ecn(&mut self, value: u8) {
        let tc = (self.traffic_class() & !0x03) | (value & 0x03);
        self.set_traffic_class(tc);
    }

    /// Sets the flow label (higher bits than 20 are dropped).
    pub fn set_flow_label(&mut self, value: u32) {
        let raw = (self.ver_tc_flow() & 0xfff0_0000) | (value & 0x000f_ffff);
        self.set_ver_tc_flow(raw);
    }

    /// Sets the payload length.
    pub fn set_payload_len(&mut self, value: u16) {
        NetworkEndian::write_u16(&mut self.buffer.as_mut()[field::LENGTH], value);
    }

    /// Sets the next header field.
    pub fn set_next_header(&mut self, value: IpProtocol) {
        self.buffer.as_mut()[field::NXT_HDR] = value.into();
    }

    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, value: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = value;
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, value: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&value.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, value: Ipv6Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&value.octets());
    }

    /// The payload, mutably (set the payload length first).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let range = HEADER_LEN..HEADER_LEN + usize::from(self.payload_len());
        &mut self.buffer.as_mut()[range]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Ipv6Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

impl<T: AsRef<[u8]>> fmt::Display for Ipv6Packet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match Ipv6Repr::parse(&Ipv6Packet::new_unchecked(self.buffer.as_ref())) {
            Ok(repr) => write!(f, "{repr}"),
            Err(_) => write!(f, "IPv6 (malformed, {} bytes)", self.buffer.as_ref().len()),
        }
    }
}

/// The fixed IPv6 header fields the stack uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Ipv6Repr {
    /// Source address.
    pub src_addr: Ipv6Addr,
    /// Destination address.
    pub dst_addr: Ipv6Addr,
    /// The next header field, as is.
    pub next_header: IpProtocol,
    /// Bytes after the fixed header; at most 65535 on emit.
    pub payload_len: usize,
    /// Hop limit.
    pub hop_limit: u8,
    /// The traffic class, `dscp << 2 | ecn`; Homa priority `p` is `p << 5`.
    pub traffic_class: u8,
}

impl Ipv6Repr {
    /// Reads the fixed header: version 6 and the payload fits the buffer.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Ipv6Packet<&T>) -> Result<Ipv6Repr> {
        packet.check_len()?;
        if packet.version() != 6 {
            return Err(Error);
        }
        Ok(Ipv6Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.payload_len()),
            hop_limit: packet.hop_limit(),
            traffic_class: packet.traffic_class(),
        })
    }

    /// The bytes [`emit`](Self::emit) writes: the 40-byte fixed header.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the fixed header into the first 40 bytes of `packet`, with flow
    /// label 0. A `payload_len` above 65535 is a caller bug; it is then
    /// written as 65535.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Ipv6Packet<T>) {
        packet.set_ver_tc_flow(0);
        packet.set_version(6);
        packet.set_traffic_class(self.traffic_class);
        packet.set_payload_len(u16::try_from(self.payload_len).unwrap_or(u16::MAX));
        packet.set_next_header(self.next_header);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
    }
}

impl fmt::Display for Ipv6Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "IPv6 {} > {} {} tc 0x{:02x} len {}",
            self.src_addr, self.dst_addr, self.next_header, self.traffic_class, self.payload_len
        )
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use proptest::prelude::*;

    /// fe80::1 > fe80::2, Homa, traffic class 0xc0 (priority 6), hop limit
    /// 64, 8 bytes of payload.
    static PACKET_BYTES: [u8; 48] = [
        0x6c, 0x00, 0x00, 0x00, // version 6, tc 0xc0, flow 0
        0x00, 0x08, 0x92, 0x40, // payload 8, Homa, hop limit 64
        0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // source
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, //
        0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // destination
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, //
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // payload
    ];

    const PAYLOAD: [u8; 8] = [1, 2, 3, 4, 5, 6, 7, 8];
    const SRC: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
    const DST: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2);

    fn repr() -> Ipv6Repr {
        Ipv6Repr {
            src_addr: SRC,
            dst_addr: DST,
            next_header: IpProtocol::Homa,
            payload_len: 8,
            hop_limit: 64,
            traffic_class: 0xc0,
        }
    }

    fn parse(bytes: &[u8]) -> Result<Ipv6Repr> {
        Ipv6Repr::parse(&Ipv6Packet::new_checked(bytes)?)
    }

    #[test]
    fn deconstruct() {
        let packet = Ipv6Packet::new_checked(&PACKET_BYTES[..]).unwrap();
        assert_eq!(packet.version(), 6);
        assert_eq!(packet.traffic_class(), 0xc0);
        assert_eq!(packet.dscp(), 48);
        assert_eq!(packet.ecn(), 0);
        assert_eq!(packet.flow_label(), 0);
        assert_eq!(packet.payload_len(), 8);
        assert_eq!(packet.next_header(), IpProtocol::Homa);
        assert_eq!(packet.hop_limit(), 64);
        assert_eq!(packet.src_addr(), SRC);
        assert_eq!(packet.dst_addr(), DST);
        assert_eq!(packet.payload(), &PAYLOAD);
    }

    #[test]
    fn construct() {
        let mut bytes = [0u8; 48];
        let mut packet = Ipv6Packet::new_unchecked(&mut bytes[..]);
        packet.set_version(6);
        packet.set_dscp(48);
        packet.set_ecn(0);
        packet.set_flow_label(0);
        packet.set_payload_len(8);
        packet.set_next_header(IpProtocol::Homa);
        packet.set_hop_limit(64);
        packet.set_src_addr(SRC);
        packet.set_dst_addr(DST);
        packet.payload_mut().copy_from_slice(&PAYLOAD);
        assert_eq!(bytes, PACKET_BYTES);
    }

    #[test]
    fn parse_vector() {
        assert_eq!(parse(&PACKET_BYTES), Ok(repr()));
    }

    #[test]
    fn emit() {
        let repr = repr();
        assert_eq!(repr.buffer_len(), 40);
        let mut bytes = [0xa5u8; 48];
        repr.emit(&mut Ipv6Packet::new_unchecked(&mut bytes[..40]));
        bytes[40..].copy_from_slice(&PAYLOAD);
        assert_eq!(bytes, PACKET_BYTES);
    }

    #[test]
    fn padding_after_payload_len_is_ignored() {
        let mut bytes = [0u8; 60];
        bytes[..48].copy_from_slice(&PACKET_BYTES);
        let packet = Ipv6Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.payload(), &PAYLOAD);
        assert_eq!(Ipv6Repr::parse(&packet), Ok(repr()));
    }

    #[test]
    fn every_truncation_is_an_error() {
        for len in 0..PACKET_BYTES.len() {
            let bytes = &PACKET_BYTES[..len];
            assert_eq!(Ipv6Packet::new_checked(bytes), Err(Error), "{len}");
            assert_eq!(
                Ipv6Repr::parse(&Ipv6Packet::new_unchecked(bytes)),
                Err(Error),
                "{len}"
            );
        }
    }

    #[test]
    fn a_truncated_view_reads_the_header_and_the_captured_payload() {
        for len in 0..PACKET_BYTES.len() {
            let bytes = &PACKET_BYTES[..len];
            let Ok(p) = Ipv6Packet::new_truncated(bytes) else {
                assert!(len < HEADER_LEN, "{len}");
                assert!(Ipv6Packet::new_unchecked(bytes)
                    .captured_payload()
                    .is_empty());
                continue;
            };
            assert!(len >= HEADER_LEN, "{len}");
            assert_eq!((p.src_addr(), p.dst_addr()), (SRC, DST));
            assert_eq!((p.payload_len(), p.next_header()), (8, IpProtocol::Homa));
            assert_eq!(p.captured_payload(), &PAYLOAD[..len - HEADER_LEN]);
        }
        // A whole packet reads the same either way, padding excluded.
        let mut padded = PACKET_BYTES.to_vec();
        padded.extend_from_slice(&[0; 6]);
        let p = Ipv6Packet::new_truncated(&padded[..]).unwrap();
        assert_eq!(p.captured_payload(), &PAYLOAD[..]);
    }

    #[test]
    fn version_other_than_six_is_an_error() {
        let mut bytes = PACKET_BYTES;
        bytes[0] = 0x4c;
        assert_eq!(parse(&bytes), Err(Error));
    }

    #[test]
    fn payload_len_beyond_the_buffer_is_an_error() {
        let mut bytes = PACKET_BYTES;
        bytes[5] = 9;
        assert_eq!(parse(&bytes), Err(Error));
    }

    #[test]
    fn extension_headers_are_reported_as_next_header() {
        // Hop-by-hop options (0): reported as is, payload starts with it.
        let mut bytes = PACKET_BYTES;
        bytes[6] = 0;
        let packet = Ipv6Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(
            Ipv6Repr::parse(&packet).map(|r| r.next_header),
            Ok(IpProtocol::Unknown(0))
        );
        assert_eq!(packet.payload(), &PAYLOAD);
    }

    #[test]
    fn version_class_and_flow_label_do_not_overlap() {
        let mut bytes = PACKET_BYTES;
        let mut packet = Ipv6Packet::new_unchecked(&mut bytes[..]);
        packet.set_flow_label(0xfffff);
        packet.set_ecn(3);
        assert_eq!(packet.version(), 6);
        assert_eq!(packet.traffic_class(), 0xc3);
        assert_eq!(packet.flow_label(), 0xfffff);
        packet.set_flow_label(0x12345);
        assert_eq!(&bytes[..4], &[0x6c, 0x31, 0x23, 0x45]);
    }

    #[test]
    fn display() {
        assert_eq!(
            repr().to_string(),
            "IPv6 fe80::1 > fe80::2 HOMA tc 0xc0 len 8"
        );
        assert_eq!(
            Ipv6Packet::new_unchecked(&PACKET_BYTES[..]).to_string(),
            "IPv6 fe80::1 > fe80::2 HOMA tc 0xc0 len 8"
        );
        assert_eq!(
            Ipv6Packet::new_unchecked(&PACKET_BYTES[..47]).to_string(),
            "IPv6 (malformed, 47 bytes)"
        );
    }

    fn arb_repr() -> impl Strategy<Value = Ipv6Repr> {
        (
            any::<u128>(),
            any::<u128>(),
            any::<u8>(),
            0..=usize::from(u16::MAX),
            any::<u8>(),
            any::<u8>(),
        )
            .prop_map(
                |(src, dst, next, payload_len, hop_limit, traffic_class)| Ipv6Repr {
                    src_addr: Ipv6Addr::from(src),
                    dst_addr: Ipv6Addr::from(dst),
                    next_header: IpProtocol::from(next),
                    payload_len,
                    hop_limit,
                    traffic_class,
                },
            )
    }

    proptest! {
        #[test]
        fn parse_inverts_emit(repr in arb_repr()) {
            let mut bytes = vec![0u8; HEADER_LEN + repr.payload_len];
            repr.emit(&mut Ipv6Packet::new_unchecked(&mut bytes[..]));
            prop_assert_eq!(parse(&bytes), Ok(repr));
        }

        #[test]
        fn arbitrary_bytes_never_panic(
            plausible in any::<bool>(),
            mut bytes in proptest::collection::vec(any::<u8>(), 0..80),
        ) {
            if plausible && bytes.len() >= HEADER_LEN {
                bytes[0] = 0x60 | (bytes[0] & 0x0f);
                let len = (bytes.len() - HEADER_LEN) as u16;
                bytes[4..6].copy_from_slice(&len.to_be_bytes());
            }
            let _ = Ipv6Repr::parse(&Ipv6Packet::new_unchecked(&bytes[..]));
            let _ = Ipv6Packet::new_unchecked(&bytes[..]).to_string();
            if let Ok(p) = Ipv6Packet::new_checked(&bytes[..]) {
                let _ = (p.payload(), p.src_addr(), p.dst_addr(), p.flow_label());
            }
            let _ = Ipv6Packet::new_unchecked(&bytes[..]).captured_payload();
            if let Ok(p) = Ipv6Packet::new_truncated(&bytes[..]) {
                let _ = (p.captured_payload(), p.src_addr(), p.dst_addr(), p.flow_label());
            }
        }
    }
}
