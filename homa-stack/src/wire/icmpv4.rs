//! ICMP for IPv4 (RFC 792): echo and destination unreachable.
//!
//! The stack answers pings, sends port unreachable for Homa packets to
//! unbound ports, and aborts RPCs when a peer's unreachable message quotes
//! one of its packets. Other message types parse as errors.
//!
//! A destination-unreachable message quotes the offending IPv4 header and
//! the first bytes of its payload (for Homa: source and destination ports).
//! That quoted header is read leniently: its `total_len` may exceed the bytes
//! quoted and its checksum is not verified. On emit the header is rebuilt
//! from an [`Ipv4Repr`] (no options, id 0, DF, checksum filled) and at most
//! [`MAX_QUOTED_DATA`] payload bytes follow: as much as keeps the message
//! within 576 bytes (RFC 1812 4.3.2.3, as Linux sends), so that the quote
//! carries a Homa packet's id, not only the 8 bytes RFC 792 asks for.

use core::fmt;

use byteorder::{ByteOrder, NetworkEndian};

use super::checksum;
use super::ipv4::{self, Ipv4Packet, Ipv4Repr};
use super::{Error, Result};

enum_with_unknown! {
    /// ICMPv4 message types.
    pub enum Icmpv4Message(u8) {
        /// Echo reply.
        EchoReply = 0,
        /// Destination unreachable.
        DstUnreachable = 3,
        /// Redirect.
        Redirect = 5,
        /// Echo request.
        EchoRequest = 8,
        /// Router advertisement.
        RouterAdvert = 9,
        /// Router solicitation.
        RouterSolicit = 10,
        /// Time exceeded.
        TimeExceeded = 11,
        /// Parameter problem.
        ParamProblem = 12,
        /// Timestamp.
        Timestamp = 13,
        /// Timestamp reply.
        TimestampReply = 14,
    }
}

impl fmt::Display for Icmpv4Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Icmpv4Message::EchoReply => f.write_str("echo reply"),
            Icmpv4Message::DstUnreachable => f.write_str("dst-unreachable"),
            Icmpv4Message::Redirect => f.write_str("redirect"),
            Icmpv4Message::EchoRequest => f.write_str("echo request"),
            Icmpv4Message::RouterAdvert => f.write_str("router advert"),
            Icmpv4Message::RouterSolicit => f.write_str("router solicit"),
            Icmpv4Message::TimeExceeded => f.write_str("time exceeded"),
            Icmpv4Message::ParamProblem => f.write_str("parameter problem"),
            Icmpv4Message::Timestamp => f.write_str("timestamp"),
            Icmpv4Message::TimestampReply => f.write_str("timestamp reply"),
            Icmpv4Message::Unknown(n) => write!(f, "type {n}"),
        }
    }
}

enum_with_unknown! {
    /// Codes of the destination-unreachable message.
    pub enum Icmpv4DstUnreachable(u8) {
        /// Network unreachable.
        NetUnreachable = 0,
        /// Host unreachable.
        HostUnreachable = 1,
        /// Protocol unreachable.
        ProtoUnreachable = 2,
        /// Port unreachable.
        PortUnreachable = 3,
        /// Fragmentation needed and DF set.
        FragRequired = 4,
        /// Source route failed.
        SrcRouteFailed = 5,
        /// Destination network unknown.
        DstNetUnknown = 6,
        /// Destination host unknown.
        DstHostUnknown = 7,
        /// Source host isolated.
        SrcHostIsolated = 8,
        /// Network administratively prohibited.
        NetProhibited = 9,
        /// Host administratively prohibited.
        HostProhibited = 10,
        /// Network unreachable for the type of service.
        NetUnreachToS = 11,
        /// Host unreachable for the type of service.
        HostUnreachToS = 12,
        /// Communication administratively prohibited.
        CommProhibited = 13,
        /// Host precedence violation.
        HostPrecedViol = 14,
        /// Precedence cutoff in effect.
        PrecedCutoff = 15,
    }
}

impl fmt::Display for Icmpv4DstUnreachable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Icmpv4DstUnreachable::NetUnreachable => f.write_str("net"),
            Icmpv4DstUnreachable::HostUnreachable => f.write_str("host"),
            Icmpv4DstUnreachable::ProtoUnreachable => f.write_str("protocol"),
            Icmpv4DstUnreachable::PortUnreachable => f.write_str("port"),
            Icmpv4DstUnreachable::FragRequired => f.write_str("frag-required"),
            Icmpv4DstUnreachable::SrcRouteFailed => f.write_str("src-route-failed"),
            Icmpv4DstUnreachable::DstNetUnknown => f.write_str("net-unknown"),
            Icmpv4DstUnreachable::DstHostUnknown => f.write_str("host-unknown"),
            Icmpv4DstUnreachable::SrcHostIsolated => f.write_str("src-isolated"),
            Icmpv4DstUnreachable::NetProhibited => f.write_str("net-prohibited"),
            Icmpv4DstUnreachable::HostProhibited => f.write_str("host-prohibited"),
            Icmpv4DstUnreachable::NetUnreachToS => f.write_str("net-tos"),
            Icmpv4DstUnreachable::HostUnreachToS => f.write_str("host-tos"),
            Icmpv4DstUnreachable::CommProhibited => f.write_str("prohibited"),
            Icmpv4DstUnreachable::HostPrecedViol => f.write_str("precedence-violation"),
            Icmpv4DstUnreachable::PrecedCutoff => f.write_str("precedence-cutoff"),
            Icmpv4DstUnreachable::Unknown(n) => write!(f, "code {n}"),
        }
    }
}

mod field {
    use crate::wire::field::{Field, Rest};

    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Field = 2..4;
    pub const UNUSED: Field = 4..8;
    pub const ECHO_IDENT: Field = 4..6;
    pub const ECHO_SEQNO: Field = 6..8;
    pub const DATA: Rest = UNUSED.end..;
}

/// Length of the ICMPv4 header (type, code, checksum and the 4-byte rest).
pub const HEADER_LEN: usize = field::UNUSED.end;

/// How many payload bytes after the quoted IPv4 header a
/// destination-unreachable message carries at most on emit: the IPv4
/// packet is then at most 576 bytes (RFC 1812 4.3.2.3).
pub const MAX_QUOTED_DATA: usize = 576 - ipv4::HEADER_LEN - HEADER_LEN - ipv4::HEADER_LEN;

/// A view of an ICMPv4 message in a byte buffer (the IPv4 payload).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Icmpv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv4Packet<T> {
    /// Wraps a buffer without checking its length (for emitting).
    pub const fn new_unchecked(buffer: T) -> Icmpv4Packet<T> {
        Icmpv4Packet { buffer }
    }

    /// Wraps a buffer and checks that the 8-byte header fits.
    pub fn new_checked(buffer: T) -> Result<Icmpv4Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Ensures no accessor panics: the 8-byte header fits.
    pub fn check_len(&self) -> Result<()> {
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

    /// The message type.
    pub fn msg_type(&self) -> Icmpv4Message {
        Icmpv4Message::from(self.buffer.as_ref()[field::TYPE])
    }

    /// The message code.
    pub fn msg_code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// The checksum field.
    pub fn checksum(&self) -> u16 {
        NetworkEndian::read_u16(&self.buffer.as_ref()[field::CHECKSUM])
    }

    /// The identifier of an echo message.
    pub fn echo_ident(&self) -> u16 {
        NetworkEndian::read_u16(&self.buffer.as_ref()[field::ECHO_IDENT])
    }

    /// The sequence number of an echo message.
    pub fn echo_seq_no(&self) -> u16 {
        NetworkEndian::read_u16(&self.buffer.as_ref()[field::ECHO_SEQNO])
    }

    /// The whole message sums to zero. Always true under `cfg(fuzzing)`, so
    /// fuzzers reach the code behind the check.
    pub fn verify_checksum(&self) -> bool {
        if cfg!(fuzzing) {
            return true;
        }
        checksum::data(self.buffer.as_ref()) == 0
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Icmpv4Packet<&'a T> {
    /// The bytes after the 8-byte header: echo data, or the quoted datagram.
    pub fn data(&self) -> &'a [u8] {
        let data = self.buffer.as_ref();
        &data[field::DATA]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv4Packet<T> {
    /// Sets the message type.
    pub fn set_msg_type(&mut self, value: Icmpv4Message) {
        self.buffer.as_mut()[field::TYPE] = value.into();
    }

    /// Sets the message code.
    pub fn set_msg_code(&mut self, value: u8) {
        self.buffer.as_mut()[field::CODE] = value;
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        NetworkEndian::write_u16(&mut self.buffer.as_mut()[field::CHECKSUM], value);
    }

    /// Sets the identifier of an echo message.
    pub fn set_echo_ident(&mut self, value: u16) {
        NetworkEndian::write_u16(&mut self.buffer.as_mut()[field::ECHO_IDENT], value);
    }

    /// Sets the sequence number of an echo message.
    pub fn set_echo_seq_no(&mut self, value: u16) {
        NetworkEndian::write_u16(&mut self.buffer.as_mut()[field::ECHO_SEQNO], value);
    }

    /// Zeroes the 4 bytes after the checksum (unused in destination unreachable).
    pub fn clear_rest_of_header(&mut self) {
        self.buffer.as_mut()[field::UNUSED].fill(0);
    }

    /// Computes and writes the checksum over the whole buffer.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let value = checksum::data(self.buffer.as_ref());
        self.set_checksum(value);
    }

    /// The bytes after the header, mutably.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::DATA]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Icmpv4Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

impl<T: AsRef<[u8]>> fmt::Display for Icmpv4Packet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let packet = Icmpv4Packet::new_unchecked(self.buffer.as_ref());
        if packet.check_len().is_err() {
            return write!(f, "ICMPv4 (truncated, {} bytes)", packet.buffer.len());
        }
        match Icmpv4Repr::parse(&packet, false) {
            Ok(repr) => write!(f, "{repr}")?,
            Err(_) => write!(
                f,
                "ICMPv4 {} code {} len {}",
                packet.msg_type(),
                packet.msg_code(),
                packet.data().len()
            )?,
        }
        if !packet.verify_checksum() {
            f.write_str(" (bad checksum)")?;
        }
        Ok(())
    }
}

/// The ICMPv4 messages the stack understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Icmpv4Repr<'a> {
    /// Echo request (ping).
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Data to be echoed.
        data: &'a [u8],
    },
    /// Echo reply.
    EchoReply {
        /// Identifier, copied from the request.
        ident: u16,
        /// Sequence number, copied from the request.
        seq_no: u16,
        /// Data, copied from the request.
        data: &'a [u8],
    },
    /// Destination unreachable, quoting the datagram that caused it.
    DstUnreachable {
        /// The code.
        reason: Icmpv4DstUnreachable,
        /// The quoted IPv4 header; `payload_len` is from its `total_len`,
        /// which may exceed the bytes quoted.
        header: Ipv4Repr,
        /// The quoted bytes after that header (all of them on parse, at most
        /// [`MAX_QUOTED_DATA`] on emit).
        data: &'a [u8],
    },
}

impl<'a> Icmpv4Repr<'a> {
    /// Reads a message. Echo messages need code 0; destination unreachable
    /// needs a quoted IPv4 header (version 4, 20 <= ihl*4 <= bytes quoted,
    /// total_len >= ihl*4, fragment offset 0 so the transport header is
    /// there). Other types are errors, as is a wrong checksum when
    /// `verify_checksum` is set.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &Icmpv4Packet<&'a T>,
        verify_checksum: bool,
    ) -> Result<Icmpv4Repr<'a>> {
        packet.check_len()?;
        if verify_checksum && !packet.verify_checksum() {
            return Err(Error);
        }
        match (packet.msg_type(), packet.msg_code()) {
            (Icmpv4Message::EchoRequest, 0) => Ok(Icmpv4Repr::EchoRequest {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data: packet.data(),
            }),
            (Icmpv4Message::EchoReply, 0) => Ok(Icmpv4Repr::EchoReply {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data: packet.data(),
            }),
            (Icmpv4Message::DstUnreachable, code) => {
                let (header, data) = parse_quoted(packet.data())?;
                Ok(Icmpv4Repr::DstUnreachable {
                    reason: Icmpv4DstUnreachable::from(code),
                    header,
                    data,
                })
            }
            _ => Err(Error),
        }
    }

    /// The bytes [`emit`](Self::emit) writes: 8 plus the echo data, or 8 plus
    /// the 20-byte quoted header plus up to [`MAX_QUOTED_DATA`] quoted bytes.
    pub fn buffer_len(&self) -> usize {
        match self {
            Icmpv4Repr::EchoRequest { data, .. } | Icmpv4Repr::EchoReply { data, .. } => {
                HEADER_LEN + data.len()
            }
            Icmpv4Repr::DstUnreachable { data, .. } => {
                HEADER_LEN + ipv4::HEADER_LEN + data.len().min(MAX_QUOTED_DATA)
            }
        }
    }

    /// Writes the message into `packet`, whose buffer must be exactly
    /// [`buffer_len`](Self::buffer_len) bytes (the checksum covers all of
    /// it). With `fill_checksum` false the checksum is left 0.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut Icmpv4Packet<T>,
        fill_checksum: bool,
    ) {
        match *self {
            Icmpv4Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => emit_echo(packet, Icmpv4Message::EchoRequest, ident, seq_no, data),
            Icmpv4Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => emit_echo(packet, Icmpv4Message::EchoReply, ident, seq_no, data),
            Icmpv4Repr::DstUnreachable {
                reason,
                header,
                data,
            } => {
                packet.set_msg_type(Icmpv4Message::DstUnreachable);
                packet.set_msg_code(reason.into());
                packet.clear_rest_of_header();
                let quoted = packet.data_mut();
                header.emit(
                    &mut Ipv4Packet::new_unchecked(&mut quoted[..ipv4::HEADER_LEN]),
                    true,
                );
                let data = &data[..data.len().min(MAX_QUOTED_DATA)];
                quoted[ipv4::HEADER_LEN..][..data.len()].copy_from_slice(data);
            }
        }
        if fill_checksum {
            packet.fill_checksum();
        } else {
            packet.set_checksum(0);
        }
    }
}

fn emit_echo<T: AsRef<[u8]> + AsMut<[u8]>>(
    packet: &mut Icmpv4Packet<T>,
    msg_type: Icmpv4Message,
    ident: u16,
    seq_no: u16,
    data: &[u8],
) {
    packet.set_msg_type(msg_type);
    packet.set_msg_code(0);
    packet.set_echo_ident(ident);
    packet.set_echo_seq_no(seq_no);
    packet.data_mut()[..data.len()].copy_from_slice(data);
}

/// Reads the IPv4 header quoted by an error message and the bytes after it.
fn parse_quoted(quoted: &[u8]) -> Result<(Ipv4Repr, &[u8])> {
    if quoted.len() < ipv4::HEADER_LEN {
        return Err(Error);
    }
    // Only the fixed-header accessors are used, and 20 bytes are there.
    let ip = Ipv4Packet::new_unchecked(quoted);
    let header_len = ip.header_len();
    if ip.version() != 4
        || usize::from(header_len) < ipv4::HEADER_LEN
        || usize::from(header_len) > quoted.len()
        || ip.total_len() < u16::from(header_len)
        || ip.frag_offset() != 0
    {
        return Err(Error);
    }
    let header = Ipv4Repr {
        src_addr: ip.src_addr(),
        dst_addr: ip.dst_addr(),
        next_header: ip.next_header(),
        payload_len: usize::from(ip.total_len() - u16::from(header_len)),
        hop_limit: ip.hop_limit(),
        tos: ip.tos(),
    };
    Ok((header, &quoted[usize::from(header_len)..]))
}

impl fmt::Display for Icmpv4Repr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Icmpv4Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => {
                write!(
                    f,
                    "ICMPv4 echo request id {ident} seq {seq_no} len {}",
                    data.len()
                )
            }
            Icmpv4Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => {
                write!(
                    f,
                    "ICMPv4 echo reply id {ident} seq {seq_no} len {}",
                    data.len()
                )
            }
            Icmpv4Repr::DstUnreachable {
                reason,
                header,
                data,
            } => {
                write!(
                    f,
                    "ICMPv4 dst-unreachable {reason} ({header}) data {}",
                    data.len()
                )
            }
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::wire::{IpProtocol, Ipv4Addr};
    use proptest::prelude::*;

    const ECHO_DATA: [u8; 8] = [0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17];

    /// Echo request id 1 seq 2 with 8 bytes of data; checksum 0xabac.
    static ECHO_BYTES: [u8; 16] = [
        0x08, 0x00, 0xab, 0xac, // type 8, code 0, checksum
        0x00, 0x01, 0x00, 0x02, // id 1, seq 2
        0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, // data
    ];

    const QUOTED_DATA: [u8; 8] = [0x9c, 0x40, 0x0f, 0xa0, 0x01, 0x02, 0x03, 0x04];

    /// Port unreachable quoting a Homa packet 10.0.0.2 > 10.0.0.1 whose
    /// total length (48) exceeds what is quoted (20 + 8); ICMP checksum
    /// 0x4d16, quoted IPv4 checksum 0x257a.
    static UNREACHABLE_BYTES: [u8; 36] = [
        0x03, 0x03, 0x4d, 0x16, // type 3, code 3 (port), checksum
        0x00, 0x00, 0x00, 0x00, // unused
        0x45, 0xc0, 0x00, 0x30, 0x00, 0x00, 0x40, 0x00, // quoted IPv4 header
        0x40, 0x92, 0x25, 0x7a, 0x0a, 0x00, 0x00, 0x02, //
        0x0a, 0x00, 0x00, 0x01, //
        0x9c, 0x40, 0x0f, 0xa0, 0x01, 0x02, 0x03, 0x04, // sport 40000, dport 4000, ...
    ];

    fn echo_repr() -> Icmpv4Repr<'static> {
        Icmpv4Repr::EchoRequest {
            ident: 1,
            seq_no: 2,
            data: &ECHO_DATA,
        }
    }

    fn quoted_header() -> Ipv4Repr {
        Ipv4Repr {
            src_addr: Ipv4Addr::new(10, 0, 0, 2),
            dst_addr: Ipv4Addr::new(10, 0, 0, 1),
            next_header: IpProtocol::Homa,
            payload_len: 28,
            hop_limit: 64,
            tos: 0xc0,
        }
    }

    fn unreachable_repr() -> Icmpv4Repr<'static> {
        Icmpv4Repr::DstUnreachable {
            reason: Icmpv4DstUnreachable::PortUnreachable,
            header: quoted_header(),
            data: &QUOTED_DATA,
        }
    }

    fn parse(bytes: &[u8], verify: bool) -> Result<Icmpv4Repr<'_>> {
        Icmpv4Repr::parse(&Icmpv4Packet::new_checked(bytes)?, verify)
    }

    #[test]
    fn deconstruct_echo() {
        let packet = Icmpv4Packet::new_checked(&ECHO_BYTES[..]).unwrap();
        assert_eq!(packet.msg_type(), Icmpv4Message::EchoRequest);
        assert_eq!(packet.msg_code(), 0);
        assert_eq!(packet.checksum(), 0xabac);
        assert_eq!(packet.echo_ident(), 1);
        assert_eq!(packet.echo_seq_no(), 2);
        assert_eq!(packet.data(), &ECHO_DATA);
        assert!(packet.verify_checksum());
    }

    #[test]
    fn construct_echo() {
        let mut bytes = [0xa5u8; 16];
        let mut packet = Icmpv4Packet::new_unchecked(&mut bytes[..]);
        packet.set_msg_type(Icmpv4Message::EchoRequest);
        packet.set_msg_code(0);
        packet.set_echo_ident(1);
        packet.set_echo_seq_no(2);
        packet.data_mut().copy_from_slice(&ECHO_DATA);
        packet.fill_checksum();
        assert_eq!(bytes, ECHO_BYTES);
    }

    #[test]
    fn parse_echo() {
        assert_eq!(parse(&ECHO_BYTES, true), Ok(echo_repr()));
    }

    #[test]
    fn emit_echo() {
        let repr = echo_repr();
        assert_eq!(repr.buffer_len(), 16);
        let mut bytes = [0xa5u8; 16];
        repr.emit(&mut Icmpv4Packet::new_unchecked(&mut bytes[..]), true);
        assert_eq!(bytes, ECHO_BYTES);
    }

    #[test]
    fn echo_reply_round_trips() {
        let repr = Icmpv4Repr::EchoReply {
            ident: 7,
            seq_no: 9,
            data: &ECHO_DATA,
        };
        let mut bytes = [0u8; 16];
        repr.emit(&mut Icmpv4Packet::new_unchecked(&mut bytes[..]), true);
        assert_eq!(bytes[0], 0);
        assert_eq!(parse(&bytes, true), Ok(repr));
    }

    #[test]
    fn deconstruct_unreachable() {
        let packet = Icmpv4Packet::new_checked(&UNREACHABLE_BYTES[..]).unwrap();
        assert_eq!(packet.msg_type(), Icmpv4Message::DstUnreachable);
        assert_eq!(packet.msg_code(), 3);
        assert_eq!(packet.checksum(), 0x4d16);
        assert_eq!(packet.data(), &UNREACHABLE_BYTES[8..]);
        assert!(packet.verify_checksum());
    }

    #[test]
    fn parse_unreachable() {
        assert_eq!(parse(&UNREACHABLE_BYTES, true), Ok(unreachable_repr()));
    }

    #[test]
    fn emit_unreachable() {
        let repr = unreachable_repr();
        assert_eq!(repr.buffer_len(), 36);
        let mut bytes = [0xa5u8; 36];
        repr.emit(&mut Icmpv4Packet::new_unchecked(&mut bytes[..]), true);
        assert_eq!(bytes, UNREACHABLE_BYTES);
    }

    #[test]
    fn emit_quotes_what_fits_in_576_bytes() {
        // With its own IPv4 header the message is 576 bytes at most.
        let long = [0x55u8; 1000];
        let repr = Icmpv4Repr::DstUnreachable {
            reason: Icmpv4DstUnreachable::PortUnreachable,
            header: quoted_header(),
            data: &long,
        };
        assert_eq!(repr.buffer_len(), 576 - 20);
        let mut bytes = [0u8; 556];
        repr.emit(&mut Icmpv4Packet::new_unchecked(&mut bytes[..]), true);
        assert_eq!(&bytes[28..], &long[..528]);
    }

    #[test]
    fn parse_takes_every_quoted_byte() {
        // Quote 12 payload bytes instead of 8 (total_len 48 still exceeds it).
        let mut bytes = [0u8; 40];
        bytes[..36].copy_from_slice(&UNREACHABLE_BYTES);
        bytes[36..].copy_from_slice(&[0x21, 0x22, 0x23, 0x24]);
        Icmpv4Packet::new_unchecked(&mut bytes[..]).fill_checksum();
        match parse(&bytes, true) {
            Ok(Icmpv4Repr::DstUnreachable { header, data, .. }) => {
                assert_eq!(header, quoted_header());
                assert_eq!(data, &bytes[28..]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn quoted_header_checksum_is_not_verified() {
        let mut bytes = UNREACHABLE_BYTES;
        bytes[18] ^= 0xff;
        Icmpv4Packet::new_unchecked(&mut bytes[..]).fill_checksum();
        assert_eq!(parse(&bytes, true), Ok(unreachable_repr()));
    }

    #[test]
    fn every_truncation_is_an_error() {
        for vector in [&ECHO_BYTES[..], &UNREACHABLE_BYTES[..]] {
            for len in 0..vector.len() {
                assert_eq!(parse(&vector[..len], true), Err(Error), "{len}");
            }
        }
    }

    #[test]
    fn truncations_inside_the_quoted_header_fail_even_unverified() {
        for len in 0..HEADER_LEN + ipv4::HEADER_LEN {
            assert_eq!(parse(&UNREACHABLE_BYTES[..len], false), Err(Error), "{len}");
        }
    }

    #[test]
    fn bad_checksum_fails_only_when_verified() {
        let mut bytes = ECHO_BYTES;
        bytes[3] ^= 0x01;
        assert_eq!(parse(&bytes, true), Err(Error));
        assert_eq!(parse(&bytes, false), Ok(echo_repr()));
    }

    #[test]
    fn malformed_quoted_headers_are_errors() {
        // Version 6, ihl 4, total_len below the header length, non-zero
        // fragment offset; the outer checksum is refilled each time.
        for (offset, value) in [(8, 0x65), (8, 0x44), (11, 0x10), (15, 0x01)] {
            let mut bytes = UNREACHABLE_BYTES;
            bytes[offset] = value;
            Icmpv4Packet::new_unchecked(&mut bytes[..]).fill_checksum();
            assert_eq!(parse(&bytes, true), Err(Error), "offset {offset}");
        }
    }

    #[test]
    fn other_types_and_echo_codes_are_errors() {
        for (ty, code) in [(11u8, 0u8), (5, 1), (8, 1), (0, 3)] {
            let mut bytes = ECHO_BYTES;
            bytes[0] = ty;
            bytes[1] = code;
            Icmpv4Packet::new_unchecked(&mut bytes[..]).fill_checksum();
            assert_eq!(parse(&bytes, true), Err(Error), "type {ty} code {code}");
        }
    }

    #[test]
    fn display() {
        let data = [0u8; 56];
        let repr = Icmpv4Repr::EchoRequest {
            ident: 1,
            seq_no: 2,
            data: &data,
        };
        assert_eq!(repr.to_string(), "ICMPv4 echo request id 1 seq 2 len 56");
        assert_eq!(
            unreachable_repr().to_string(),
            "ICMPv4 dst-unreachable port (IPv4 10.0.0.2 > 10.0.0.1 HOMA tos 0xc0 len 28) data 8"
        );
        let mut bytes = ECHO_BYTES;
        bytes[0] = 13;
        assert_eq!(
            Icmpv4Packet::new_unchecked(&bytes[..]).to_string(),
            "ICMPv4 timestamp code 0 len 8 (bad checksum)"
        );
        assert_eq!(
            Icmpv4Packet::new_unchecked(&ECHO_BYTES[..4]).to_string(),
            "ICMPv4 (truncated, 4 bytes)"
        );
    }

    fn arb_ipv4_repr() -> impl Strategy<Value = Ipv4Repr> {
        (
            any::<u32>(),
            any::<u32>(),
            any::<u8>(),
            0..=ipv4::MAX_PAYLOAD_LEN,
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

    /// A repr and the data it borrows; data stays within what emit writes.
    fn arb_repr_parts() -> impl Strategy<Value = (u8, u16, u16, u8, Ipv4Repr, Vec<u8>)> {
        (
            0u8..3,
            any::<u16>(),
            any::<u16>(),
            any::<u8>(),
            arb_ipv4_repr(),
            proptest::collection::vec(any::<u8>(), 0..=MAX_QUOTED_DATA),
        )
    }

    fn make_repr(parts: &(u8, u16, u16, u8, Ipv4Repr, Vec<u8>)) -> Icmpv4Repr<'_> {
        let (kind, ident, seq_no, code, header, data) = parts;
        let (ident, seq_no, data) = (*ident, *seq_no, &data[..]);
        match kind {
            0 => Icmpv4Repr::EchoRequest {
                ident,
                seq_no,
                data,
            },
            1 => Icmpv4Repr::EchoReply {
                ident,
                seq_no,
                data,
            },
            _ => Icmpv4Repr::DstUnreachable {
                reason: Icmpv4DstUnreachable::from(*code),
                header: *header,
                data,
            },
        }
    }

    proptest! {
        #[test]
        fn parse_inverts_emit(parts in arb_repr_parts()) {
            let repr = make_repr(&parts);
            let mut bytes = vec![0u8; repr.buffer_len()];
            repr.emit(&mut Icmpv4Packet::new_unchecked(&mut bytes[..]), true);
            prop_assert_eq!(parse(&bytes, true), Ok(repr));
        }

        #[test]
        fn arbitrary_bytes_never_panic(
            kind in 0u8..4,
            mut bytes in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            // Steer most inputs to a known type so the per-type code runs.
            if !bytes.is_empty() {
                bytes[0] = [0, 3, 8, bytes[0]][usize::from(kind)];
            }
            if kind == 1 && bytes.len() > HEADER_LEN {
                bytes[HEADER_LEN] = 0x40 | (bytes[HEADER_LEN] & 0x0f);
            }
            for verify in [false, true] {
                let _ = Icmpv4Repr::parse(&Icmpv4Packet::new_unchecked(&bytes[..]), verify);
            }
            let _ = Icmpv4Packet::new_unchecked(&bytes[..]).to_string();
            if let Ok(p) = Icmpv4Packet::new_checked(&bytes[..]) {
                let _ = (p.data(), p.echo_ident(), p.echo_seq_no(), p.msg_type());
            }
        }
    }
}
