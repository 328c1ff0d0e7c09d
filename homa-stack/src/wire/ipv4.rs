//! The IPv4 header (RFC 791).
//!
//! Received packets may carry options (skipped) and Ethernet padding after
//! `total_len` (ignored: the payload ends at `total_len`). Fragments are not
//! reassembled: [`Ipv4Repr::parse`] rejects them, since Homa segments its
//! messages itself and Linux Homa sends with DF set.
//!
//! Emitted headers match Linux Homa: 20 bytes, identification 0, DF set, no
//! options; the TOS byte carries the priority (priority `p` is `tos = p << 5`).

use core::fmt;

use byteorder::{ByteOrder, NetworkEndian};

use super::checksum;
use super::{Error, IpProtocol, Ipv4Addr, Result};

mod field {
    use crate::wire::field::Field;

    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const LENGTH: Field = 2..4;
    pub const IDENT: Field = 4..6;
    pub const FLG_OFF: Field = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Field = 10..12;
    pub const SRC_ADDR: Field = 12..16;
    pub const DST_ADDR: Field = 16..20;
}

/// Length of a header without options.
pub const HEADER_LEN: usize = field::DST_ADDR.end;

/// The largest payload an IPv4 packet without options can carry.
pub const MAX_PAYLOAD_LEN: usize = u16::MAX as usize - HEADER_LEN;

const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const OFFSET_MASK: u16 = 0x1fff;

fn addr_from(bytes: &[u8]) -> Ipv4Addr {
    Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3])
}

/// A view of an IPv4 packet in a byte buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wraps a buffer without checking its length (for emitting).
    pub const fn new_unchecked(buffer: T) -> Ipv4Packet<T> {
        Ipv4Packet { buffer }
    }

    /// Wraps a buffer and checks the header and total lengths against it.
    pub fn new_checked(buffer: T) -> Result<Ipv4Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Wraps the start of a captured packet whose payload may have been cut
    /// short by the capture's snap length, after
    /// [`check_header_len`](Self::check_header_len). Every accessor but
    /// [`payload`](Self::payload) then stays in bounds; take what was
    /// captured of the payload with [`captured_payload`](Self::captured_payload).
    pub fn new_truncated(buffer: T) -> Result<Ipv4Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_header_len()?;
        Ok(packet)
    }

    /// Ensures no accessor panics: the buffer holds the fixed header,
    /// `20 <= header_len <= total_len`, and `total_len` bytes fit.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error);
        }
        let header_len = usize::from(self.header_len());
        let total_len = usize::from(self.total_len());
        if header_len < HEADER_LEN || header_len > len || total_len < header_len || total_len > len
        {
            return Err(Error);
        }
        Ok(())
    }

    /// Ensures every header accessor stays in bounds: the buffer holds the
    /// header with its options and `20 <= header_len <= total_len`; the
    /// payload may be cut short.
    // `check_len` repeats these checks rather than calling this: the
    // firmware's .text comes out smaller that way.
    pub fn check_header_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error);
        }
        let header_len = usize::from(self.header_len());
        if header_len < HEADER_LEN || header_len > len || usize::from(self.total_len()) < header_len
        {
            return Err(Error);
        }
        Ok(())
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The version field (4 for a valid packet).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// The header length in bytes (the IHL field times 4).
    pub fn header_len(&self) -> u8 {
        (self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    /// The differentiated services code point (upper 6 bits of the TOS byte).
    pub fn dscp(&self) -> u8 {
        self.tos() >> 2
    }

    /// The explicit congestion notification bits (lower 2 bits of the TOS byte).
    pub fn ecn(&self) -> u8 {
        self.tos() & 0x03
    }

    /// The whole TOS byte: `dscp << 2 | ecn`.
    pub fn tos(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN]
    }

    /// The total length of header and payload in bytes.
    pub fn total_len(&self) -> u16 {
        NetworkEndian::read_u16(&self.buffer.as_ref()[field::LENGTH])
    }

    /// The identification field.
    pub fn ident(&self) -> u16 {
        NetworkEndian::read_u16(&self.buffer.as_ref()[field::IDENT])
    }

    fn flags_offset(&self) -> u16 {
        NetworkEndian::read_u16(&self.buffer.as_ref()[field::FLG_OFF])
    }

    /// The don't-fragment flag.
    pub fn dont_frag(&self) -> bool {
        self.flags_offset() & FLAG_DF != 0
    }

    /// The more-fragments flag.
    pub fn more_frags(&self) -> bool {
        self.flags_offset() & FLAG_MF != 0
    }

    /// The fragment offset in bytes (the field counts 8-byte units).
    pub fn frag_offset(&self) -> u16 {
        (self.flags_offset() & OFFSET_MASK) << 3
    }

    /// The time-to-live field.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// The protocol field.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.buffer.as_ref()[field::PROTOCOL])
    }

    /// The header checksum field.
    pub fn checksum(&self) -> u16 {
        NetworkEndian::read_u16(&self.buffer.as_ref()[field::CHECKSUM])
    }

    /// The source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        addr_from(&self.buffer.as_ref()[field::SRC_ADDR])
    }

    /// The destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        addr_from(&self.buffer.as_ref()[field::DST_ADDR])
    }

    /// The options between the fixed header and the payload.
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.header_len())]
    }

    /// The header (options included) sums to zero. Always true under
    /// `cfg(fuzzing)`, so fuzzers reach the code behind the check.
    pub fn verify_checksum(&self) -> bool {
        if cfg!(fuzzing) {
            return true;
        }
        let header = &self.buffer.as_ref()[..usize::from(self.header_len())];
        checksum::data(header) == 0
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Ipv4Packet<&'a T> {
    /// The payload: from the end of the header (options skipped) to
    /// `total_len`, excluding any link-layer padding.
    pub fn payload(&self) -> &'a [u8] {
        let range = usize::from(self.header_len())..usize::from(self.total_len());
        let data = self.buffer.as_ref();
        &data[range]
    }

    /// What the buffer holds of the payload: all of it for a checked packet,
    /// the captured part of a truncated one (see
    /// [`new_truncated`](Self::new_truncated)), empty if not even the header
    /// fits.
    pub fn captured_payload(&self) -> &'a [u8] {
        let data = self.buffer.as_ref();
        let Some(end) = data.get(field::LENGTH).map(NetworkEndian::read_u16) else {
            return &[];
        };
        let end = usize::from(end).min(data.len());
        data.get(usize::from(self.header_len())..end).unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Sets the version field.
    pub fn set_version(&mut self, value: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0x0f) | (value << 4);
    }

    /// Sets the header length in bytes (a multiple of 4, at most 60).
    pub fn set_header_len(&mut self, value: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0xf0) | ((value / 4) & 0x0f);
    }

    /// Sets the DSCP, keeping the ECN bits.
    pub fn set_dscp(&mut self, value: u8) {
        let ecn = self.ecn();
        self.set_tos((value << 2) | ecn);
    }

    /// Sets the ECN bits, keeping the DSCP.
    pub fn set_ecn(&mut self, value: u8) {
        let tos = (self.tos() & !0x03) | (value & 0x03);
        self.set_tos(tos);
    }

    /// Sets the whole TOS byte.
    pub fn set_tos(&mut self, value: u8) {
        self.buffer.as_mut()[field::DSCP_ECN] = value;
    }

    /// Sets the total length.
    pub fn set_total_len(&mut self, value: u16) {
        NetworkEndian::write_u16(&mut self.buffer.as_mut()[field::LENGTH], value);
    }

    /// Sets the identification field.
    pub fn set_ident(&mut self, value: u16) {
        NetworkEndian::write_u16(&mut self.buffer.as_mut()[field::IDENT], value);
    }

    fn set_flags_offset(&mut self, value: u16) {
        NetworkEndian::write_u16(&mut self.buffer.as_mut()[field::FLG_OFF], value);
    }

    /// Clears the flags and the fragment offset.
    pub fn clear_flags(&mut self) {
        self.set_flags_offset(0);
    }

    /// Sets or clears the don't-fragment flag.
    pub fn set_dont_frag(&mut self, value: bool) {
        let raw = self.flags_offset() & !FLAG_DF;
        self.set_flags_offset(if value { raw | FLAG_DF } else { raw });
    }

    /// Sets or clears the more-fragments flag.
    pub fn set_more_frags(&mut self, value: bool) {
        let raw = self.flags_offset() & !FLAG_MF;
        self.set_flags_offset(if value { raw | FLAG_MF } else { raw });
    }

    /// Sets the fragment offset in bytes (rounded down to 8-byte units).
    pub fn set_frag_offset(&mut self, value: u16) {
        let raw = (self.flags_offset() & !OFFSET_MASK) | (value >> 3);
        self.set_flags_offset(raw);
    }

    /// Sets the time-to-live field.
    pub fn set_hop_limit(&mut self, value: u8) {
        self.buffer.as_mut()[field::TTL] = value;
    }

    /// Sets the protocol field.
    pub fn set_next_header(&mut self, value: IpProtocol) {
        self.buffer.as_mut()[field::PROTOCOL] = value.into();
    }

    /// Sets the header checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        NetworkEndian::write_u16(&mut self.buffer.as_mut()[field::CHECKSUM], value);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, value: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&value.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, value: Ipv4Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&value.octets());
    }

    /// Computes and writes the header checksum (set the header length first).
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let header_len = usize::from(self.header_len());
        let value = checksum::data(&self.buffer.as_ref()[..header_len]);
        self.set_checksum(value);
    }

    /// The payload, mutably (set the header and total lengths first).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let range = usize::from(self.header_len())..usize::from(self.total_len());
        &mut self.buffer.as_mut()[range]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Ipv4Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

impl<T: AsRef<[u8]>> fmt::Display for Ipv4Packet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = Ipv4Packet::new_unchecked(self.buffer.as_ref());
        if p.check_len().is_err() {
            return write!(f, "IPv4 (truncated, {} bytes)", p.buffer.len());
        }
        if p.version() != 4 {
            return write!(f, "IPv4 (version {})", p.version());
        }
        write!(
            f,
            "IPv4 {} > {} {} tos 0x{:02x} len {}",
            p.src_addr(),
            p.dst_addr(),
            p.next_header(),
            p.tos(),
            p.payload().len()
        )?;
        if p.more_frags() || p.frag_offset() != 0 {
            write!(f, " frag off {}", p.frag_offset())?;
            if p.more_frags() {
                f.write_str(" MF")?;
            }
        }
        Ok(())
    }
}

/// The IPv4 header fields the stack uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Ipv4Repr {
    /// Source address.
    pub src_addr: Ipv4Addr,
    /// Destination address.
    pub dst_addr: Ipv4Addr,
    /// The protocol of the payload.
    pub next_header: IpProtocol,
    /// Payload length in bytes (total length minus header length); at most
    /// [`MAX_PAYLOAD_LEN`] on emit.
    pub payload_len: usize,
    /// Time to live.
    pub hop_limit: u8,
    /// The whole TOS byte, `dscp << 2 | ecn`; Homa priority `p` is `p << 5`.
    pub tos: u8,
}

impl Ipv4Repr {
    /// Reads a packet: version 4, any options skipped, not a fragment, and
    /// when `verify_checksum` is set, a correct header checksum.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &Ipv4Packet<&T>,
        verify_checksum: bool,
    ) -> Result<Ipv4Repr> {
        packet.check_len()?;
        if packet.version() != 4 {
            return Err(Error);
        }
        if verify_checksum && !packet.verify_checksum() {
            return Err(Error);
        }
        if packet.more_frags() || packet.frag_offset() != 0 {
            return Err(Error);
        }
        Ok(Ipv4Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.total_len() - u16::from(packet.header_len())),
            hop_limit: packet.hop_limit(),
            tos: packet.tos(),
        })
    }

    /// The bytes [`emit`](Self::emit) writes: the 20-byte header.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header into the first 20 bytes of `packet`: version 4, no
    /// options, identification 0, DF set. With `fill_checksum` false the
    /// checksum is left 0 for the device to fill.
    ///
    /// A `payload_len` above [`MAX_PAYLOAD_LEN`] is a caller bug; the total
    /// length is then written as 65535.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut Ipv4Packet<T>,
        fill_checksum: bool,
    ) {
        // The header is built in a local array, where every index is known
        // to be in bounds, and copied out with one length check.
        let mut header = [0u8; HEADER_LEN];
        header[field::VER_IHL] = 0x40 | (HEADER_LEN / 4) as u8;
        header[field::DSCP_ECN] = self.tos;
        // MAX_PAYLOAD_LEN + HEADER_LEN is u16::MAX, so the cast is exact.
        let total_len = (HEADER_LEN + self.payload_len.min(MAX_PAYLOAD_LEN)) as u16;
        header[field::LENGTH].copy_from_slice(&total_len.to_be_bytes());
        // Identification 0; flags: DF only; fragment offset 0.
        header[field::FLG_OFF].copy_from_slice(&FLAG_DF.to_be_bytes());
        header[field::TTL] = self.hop_limit;
        header[field::PROTOCOL] = self.next_header.into();
        header[field::SRC_ADDR].copy_from_slice(&self.src_addr.octets());
        header[field::DST_ADDR].copy_from_slice(&self.dst_addr.octets());
        if fill_checksum {
            let sum = checksum::data(&header);
            header[field::CHECKSUM].copy_from_slice(&sum.to_be_bytes());
        }
        packet.buffer.as_mut()[..HEADER_LEN].copy_from_slice(&header);
    }
}

impl fmt::Display for Ipv4Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "IPv4 {} > {} {} tos 0x{:02x} len {}",
            self.src_addr, self.dst_addr, self.next_header, self.tos, self.payload_len
        )
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use proptest::prelude::*;

    /// 10.0.0.1 > 10.0.0.2, Homa, priority 6 (TOS 0xc0), DF, TTL 64, 8 bytes
    /// of payload; checksum 0x258e.
    static PACKET_BYTES: [u8; 28] = [
        0x45, 0xc0, 0x00, 0x1c, // version 4, ihl 5, tos 0xc0, total 28
        0x00, 0x00, 0x40, 0x00, // id 0, DF, offset 0
        0x40, 0x92, 0x25, 0x8e, // ttl 64, Homa, checksum
        0x0a, 0x00, 0x00, 0x01, // source
        0x0a, 0x00, 0x00, 0x02, // destination
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // payload
    ];

    /// The same with four bytes of options (NOP NOP NOP EOL); checksum 0x2289.
    static OPTIONS_BYTES: [u8; 32] = [
        0x46, 0xc0, 0x00, 0x20, // version 4, ihl 6, tos 0xc0, total 32
        0x00, 0x00, 0x40, 0x00, // id 0, DF, offset 0
        0x40, 0x92, 0x22, 0x89, // ttl 64, Homa, checksum
        0x0a, 0x00, 0x00, 0x01, // source
        0x0a, 0x00, 0x00, 0x02, // destination
        0x01, 0x01, 0x01, 0x00, // options
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // payload
    ];

    const PAYLOAD: [u8; 8] = [1, 2, 3, 4, 5, 6, 7, 8];

    fn repr() -> Ipv4Repr {
        Ipv4Repr {
            src_addr: Ipv4Addr::new(10, 0, 0, 1),
            dst_addr: Ipv4Addr::new(10, 0, 0, 2),
            next_header: IpProtocol::Homa,
            payload_len: 8,
            hop_limit: 64,
            tos: 0xc0,
        }
    }

    /// Parses `bytes` as far as it gets, for the malformed-input tests.
    fn parse(bytes: &[u8], verify: bool) -> Result<Ipv4Repr> {
        Ipv4Repr::parse(&Ipv4Packet::new_checked(bytes)?, verify)
    }

    /// PACKET_BYTES with one byte changed and the checksum over the first
    /// 20 bytes refilled.
    fn patched(offset: usize, value: u8) -> [u8; 28] {
        let mut bytes = PACKET_BYTES;
        bytes[offset] = value;
        bytes[10..12].fill(0);
        let sum = checksum::data(&bytes[..HEADER_LEN]);
        bytes[10..12].copy_from_slice(&sum.to_be_bytes());
        bytes
    }

    #[test]
    fn deconstruct() {
        let packet = Ipv4Packet::new_checked(&PACKET_BYTES[..]).unwrap();
        assert_eq!(packet.version(), 4);
        assert_eq!(packet.header_len(), 20);
        assert_eq!(packet.tos(), 0xc0);
        assert_eq!(packet.dscp(), 48);
        assert_eq!(packet.ecn(), 0);
        assert_eq!(packet.total_len(), 28);
        assert_eq!(packet.ident(), 0);
        assert!(packet.dont_frag());
        assert!(!packet.more_frags());
        assert_eq!(packet.frag_offset(), 0);
        assert_eq!(packet.hop_limit(), 64);
        assert_eq!(packet.next_header(), IpProtocol::Homa);
        assert_eq!(packet.checksum(), 0x258e);
        assert_eq!(packet.src_addr(), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(packet.dst_addr(), Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(packet.options(), &[] as &[u8]);
        assert!(packet.verify_checksum());
        assert_eq!(packet.payload(), &PAYLOAD);
    }

    #[test]
    fn construct() {
        let mut bytes = [0xa5u8; 28];
        let mut packet = Ipv4Packet::new_unchecked(&mut bytes[..]);
        packet.set_version(4);
        packet.set_header_len(20);
        packet.set_dscp(48);
        packet.set_ecn(0);
        packet.set_total_len(28);
        packet.set_ident(0);
        packet.clear_flags();
        packet.set_dont_frag(true);
        packet.set_more_frags(false);
        packet.set_frag_offset(0);
        packet.set_hop_limit(64);
        packet.set_next_header(IpProtocol::Homa);
        packet.set_src_addr(Ipv4Addr::new(10, 0, 0, 1));
        packet.set_dst_addr(Ipv4Addr::new(10, 0, 0, 2));
        packet.fill_checksum();
        packet.payload_mut().copy_from_slice(&PAYLOAD);
        assert_eq!(bytes, PACKET_BYTES);
    }

    #[test]
    fn parse_vector() {
        assert_eq!(parse(&PACKET_BYTES, true), Ok(repr()));
    }

    #[test]
    fn emit() {
        let repr = repr();
        assert_eq!(repr.buffer_len(), 20);
        let mut bytes = [0xa5u8; 28];
        repr.emit(&mut Ipv4Packet::new_unchecked(&mut bytes[..20]), true);
        bytes[20..].copy_from_slice(&PAYLOAD);
        assert_eq!(bytes, PACKET_BYTES);
    }

    #[test]
    fn emit_without_checksum_leaves_it_zero() {
        let mut bytes = [0xa5u8; 20];
        repr().emit(&mut Ipv4Packet::new_unchecked(&mut bytes[..]), false);
        assert_eq!(&bytes[10..12], &[0, 0]);
        assert_eq!(&bytes[..10], &PACKET_BYTES[..10]);
        assert_eq!(&bytes[12..], &PACKET_BYTES[12..20]);
    }

    #[test]
    fn options_are_skipped() {
        let packet = Ipv4Packet::new_checked(&OPTIONS_BYTES[..]).unwrap();
        assert_eq!(packet.header_len(), 24);
        assert_eq!(packet.options(), &[1, 1, 1, 0]);
        assert_eq!(packet.payload(), &PAYLOAD);
        assert_eq!(Ipv4Repr::parse(&packet, true), Ok(repr()));
    }

    #[test]
    fn padding_after_total_len_is_ignored() {
        let mut bytes = [0u8; 46];
        bytes[..28].copy_from_slice(&PACKET_BYTES);
        let packet = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.payload(), &PAYLOAD);
        assert_eq!(Ipv4Repr::parse(&packet, true), Ok(repr()));
    }

    #[test]
    fn a_truncated_view_reads_the_header_and_the_captured_payload() {
        for vector in [&PACKET_BYTES[..], &OPTIONS_BYTES[..]] {
            let header_len = usize::from(vector[0] & 0x0f) * 4;
            for len in 0..vector.len() {
                let bytes = &vector[..len];
                let Ok(p) = Ipv4Packet::new_truncated(bytes) else {
                    assert!(len < header_len, "{len}");
                    assert!(Ipv4Packet::new_unchecked(bytes)
                        .captured_payload()
                        .is_empty());
                    continue;
                };
                assert!(len >= header_len, "{len}");
                assert_eq!(p.src_addr(), Ipv4Addr::new(10, 0, 0, 1));
                assert_eq!(usize::from(p.total_len()), vector.len());
                assert_eq!(p.next_header(), IpProtocol::Homa);
                assert!(p.verify_checksum(), "{len}");
                assert_eq!(p.captured_payload(), &PAYLOAD[..len - header_len]);
            }
            // A whole packet reads the same either way, padding excluded.
            let mut padded = vector.to_vec();
            padded.extend_from_slice(&[0; 6]);
            let p = Ipv4Packet::new_truncated(&padded[..]).unwrap();
            assert_eq!(
                p.captured_payload(),
                Ipv4Packet::new_checked(vector).unwrap().payload()
            );
        }
        // A total length shorter than the header is refused.
        assert_eq!(Ipv4Packet::new_truncated(&patched(3, 19)[..]), Err(Error));
    }

    #[test]
    fn every_truncation_is_an_error() {
        for vector in [&PACKET_BYTES[..], &OPTIONS_BYTES[..]] {
            for len in 0..vector.len() {
                let bytes = &vector[..len];
                assert_eq!(Ipv4Packet::new_checked(bytes), Err(Error), "{len}");
                assert_eq!(
                    Ipv4Repr::parse(&Ipv4Packet::new_unchecked(bytes), false),
                    Err(Error),
                    "{len}"
                );
            }
        }
    }

    #[test]
    fn ihl_below_five_is_an_error() {
        assert_eq!(parse(&patched(0, 0x44), false), Err(Error));
    }

    #[test]
    fn ihl_beyond_the_buffer_is_an_error() {
        // ihl 15 = 60 bytes, more than the 28 there are (and than total_len).
        assert_eq!(parse(&patched(0, 0x4f), false), Err(Error));
    }

    #[test]
    fn total_len_below_header_len_is_an_error() {
        assert_eq!(parse(&patched(3, 19), false), Err(Error));
    }

    #[test]
    fn total_len_beyond_the_buffer_is_an_error() {
        assert_eq!(parse(&patched(3, 29), false), Err(Error));
    }

    #[test]
    fn version_other_than_four_is_an_error() {
        assert_eq!(parse(&patched(0, 0x65), false), Err(Error));
    }

    #[test]
    fn fragments_are_errors() {
        // MF set (first fragment), then offset 8 bytes (last fragment).
        assert_eq!(parse(&patched(6, 0x20), true), Err(Error));
        assert_eq!(parse(&patched(7, 0x01), true), Err(Error));
        // DF alone (the vector) and no flags at all are fine.
        assert_eq!(parse(&patched(6, 0x00), true), Ok(repr()));
    }

    #[test]
    fn bad_checksum_fails_only_when_verified() {
        let mut bytes = PACKET_BYTES;
        bytes[11] ^= 0x01;
        assert_eq!(parse(&bytes, true), Err(Error));
        assert_eq!(parse(&bytes, false), Ok(repr()));
    }

    #[test]
    fn tos_dscp_and_ecn_share_one_byte() {
        let mut bytes = PACKET_BYTES;
        let mut packet = Ipv4Packet::new_unchecked(&mut bytes[..]);
        packet.set_ecn(1);
        assert_eq!(packet.tos(), 0xc1);
        packet.set_dscp(8);
        assert_eq!((packet.tos(), packet.dscp(), packet.ecn()), (0x21, 8, 1));
    }

    #[test]
    fn flags_and_offset_are_independent() {
        let mut bytes = PACKET_BYTES;
        let mut packet = Ipv4Packet::new_unchecked(&mut bytes[..]);
        packet.set_frag_offset(1480);
        packet.set_more_frags(true);
        packet.set_dont_frag(false);
        assert_eq!(packet.frag_offset(), 1480);
        assert!(packet.more_frags());
        assert!(!packet.dont_frag());
        assert_eq!(&bytes[6..8], &[0x20, 0xb9]);
    }

    #[test]
    fn display() {
        let mut repr = repr();
        repr.payload_len = 100;
        assert_eq!(
            repr.to_string(),
            "IPv4 10.0.0.1 > 10.0.0.2 HOMA tos 0xc0 len 100"
        );
        assert_eq!(
            Ipv4Packet::new_unchecked(&PACKET_BYTES[..]).to_string(),
            "IPv4 10.0.0.1 > 10.0.0.2 HOMA tos 0xc0 len 8"
        );
        assert_eq!(
            Ipv4Packet::new_unchecked(&patched(6, 0x20)[..]).to_string(),
            "IPv4 10.0.0.1 > 10.0.0.2 HOMA tos 0xc0 len 8 frag off 0 MF"
        );
        assert_eq!(
            Ipv4Packet::new_unchecked(&PACKET_BYTES[..27]).to_string(),
            "IPv4 (truncated, 27 bytes)"
        );
    }

    fn arb_repr() -> impl Strategy<Value = Ipv4Repr> {
        (
            any::<u32>(),
            any::<u32>(),
            any::<u8>(),
            0..=MAX_PAYLOAD_LEN,
            any::<u8>(),
            any::<u8>(),
        )
            .prop_map(|(src, dst, proto, payload_len, hop_limit, tos)| Ipv4Repr {
                src_addr: Ipv4Addr::from(src),
                dst_addr: Ipv4Addr::from(dst),
                next_header: IpProtocol::from(proto),
                payload_len,
                hop_limit,
                tos,
            })
    }

    proptest! {
        #[test]
        fn parse_inverts_emit(repr in arb_repr()) {
            // Only the header is written; the payload bytes can stay zero.
            let mut bytes = vec![0u8; HEADER_LEN + repr.payload_len];
            repr.emit(&mut Ipv4Packet::new_unchecked(&mut bytes[..]), true);
            prop_assert_eq!(parse(&bytes, true), Ok(repr));
        }

        #[test]
        fn arbitrary_bytes_never_panic(
            plausible in any::<bool>(),
            mut bytes in proptest::collection::vec(any::<u8>(), 0..80),
        ) {
            // Half the inputs get a plausible version and total length, so
            // the checks past check_len run too.
            if plausible && bytes.len() >= HEADER_LEN {
                bytes[0] = 0x40 | (bytes[0] & 0x0f);
                let len = bytes.len() as u16;
                bytes[2..4].copy_from_slice(&len.to_be_bytes());
            }
            for verify in [false, true] {
                let _ = Ipv4Repr::parse(&Ipv4Packet::new_unchecked(&bytes[..]), verify);
            }
            let _ = Ipv4Packet::new_unchecked(&bytes[..]).to_string();
            if let Ok(p) = Ipv4Packet::new_checked(&bytes[..]) {
                let _ = (p.payload(), p.options(), p.verify_checksum());
                let _ = (p.src_addr(), p.dst_addr(), p.next_header(), p.frag_offset());
            }
            let _ = Ipv4Packet::new_unchecked(&bytes[..]).captured_payload();
            if let Ok(p) = Ipv4Packet::new_truncated(&bytes[..]) {
                let _ = (p.captured_payload(), p.options(), p.verify_checksum());
                let _ = (p.src_addr(), p.dst_addr(), p.next_header(), p.frag_offset());
            }
        }
    }
}
