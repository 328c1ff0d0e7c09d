//! ICMP for IPv6 (RFC 4443): echo, destination unreachable, and the two
//! Neighbor Discovery messages (RFC 4861) address resolution needs.
//!
//! The checksum covers an IPv6 pseudo-header, so parse and emit take the
//! source and destination addresses of the enclosing packet.
//!
//! Neighbor solicitations and advertisements carry options after the target
//! address. The source (in a solicitation) or target (in an advertisement)
//! link-layer address option is read as an Ethernet address; other options
//! are skipped, and an option of length 0 or running past the message is an
//! error (RFC 4861 section 4.6). The checks that need the IP header (hop
//! limit 255, unspecified source without the option) belong to the caller.
//!
//! A destination-unreachable message quotes the offending packet. Its IPv6
//! header is read leniently (its `payload_len` may exceed the bytes quoted),
//! and on emit at most [`MAX_QUOTED_DATA`] bytes follow it, so the message
//! fits the IPv6 minimum MTU as RFC 4443 asks.

use core::fmt;

use byteorder::{ByteOrder, NetworkEndian};

use super::checksum;
use super::ipv6::{self, Ipv6Packet, Ipv6Repr};
use super::{Error, EthernetAddress, IpProtocol, Ipv6Addr, Result};

enum_with_unknown! {
    /// ICMPv6 message types.
    pub enum Icmpv6Message(u8) {
        /// Destination unreachable.
        DstUnreachable = 1,
        /// Packet too big.
        PktTooBig = 2,
        /// Time exceeded.
        TimeExceeded = 3,
        /// Parameter problem.
        ParamProblem = 4,
        /// Echo request.
        EchoRequest = 128,
        /// Echo reply.
        EchoReply = 129,
        /// Router solicitation.
        RouterSolicit = 133,
        /// Router advertisement.
        RouterAdvert = 134,
        /// Neighbor solicitation.
        NeighborSolicit = 135,
        /// Neighbor advertisement.
        NeighborAdvert = 136,
        /// Redirect.
        Redirect = 137,
    }
}

impl fmt::Display for Icmpv6Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Icmpv6Message::DstUnreachable => f.write_str("dst-unreachable"),
            Icmpv6Message::PktTooBig => f.write_str("packet too big"),
            Icmpv6Message::TimeExceeded => f.write_str("time exceeded"),
            Icmpv6Message::ParamProblem => f.write_str("parameter problem"),
            Icmpv6Message::EchoRequest => f.write_str("echo request"),
            Icmpv6Message::EchoReply => f.write_str("echo reply"),
            Icmpv6Message::RouterSolicit => f.write_str("router solicit"),
            Icmpv6Message::RouterAdvert => f.write_str("router advert"),
            Icmpv6Message::NeighborSolicit => f.write_str("neighbor solicit"),
            Icmpv6Message::NeighborAdvert => f.write_str("neighbor advert"),
            Icmpv6Message::Redirect => f.write_str("redirect"),
            Icmpv6Message::Unknown(n) => write!(f, "type {n}"),
        }
    }
}

enum_with_unknown! {
    /// Codes of the destination-unreachable message.
    pub enum Icmpv6DstUnreachable(u8) {
        /// No route to destination.
        NoRoute = 0,
        /// Communication administratively prohibited.
        AdminProhibit = 1,
        /// Beyond the scope of the source address.
        BeyondScope = 2,
        /// Address unreachable.
        AddrUnreachable = 3,
        /// Port unreachable.
        PortUnreachable = 4,
        /// Source address failed ingress/egress policy.
        FailedPolicy = 5,
        /// Reject route to destination.
        RejectRoute = 6,
    }
}

impl fmt::Display for Icmpv6DstUnreachable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Icmpv6DstUnreachable::NoRoute => f.write_str("no-route"),
            Icmpv6DstUnreachable::AdminProhibit => f.write_str("prohibited"),
            Icmpv6DstUnreachable::BeyondScope => f.write_str("beyond-scope"),
            Icmpv6DstUnreachable::AddrUnreachable => f.write_str("address"),
            Icmpv6DstUnreachable::PortUnreachable => f.write_str("port"),
            Icmpv6DstUnreachable::FailedPolicy => f.write_str("failed-policy"),
            Icmpv6DstUnreachable::RejectRoute => f.write_str("reject-route"),
            Icmpv6DstUnreachable::Unknown(n) => write!(f, "code {n}"),
        }
    }
}

mod field {
    use crate::wire::field::Field;

    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Field = 2..4;
    pub const UNUSED: Field = 4..8;
    pub const ECHO_IDENT: Field = 4..6;
    pub const ECHO_SEQNO: Field = 6..8;
    pub const NEIGH_FLAGS: usize = 4;
    pub const TARGET_ADDR: Field = 8..24;
}

/// Length of the ICMPv6 header (type, code, checksum and the 4-byte rest).
pub const HEADER_LEN: usize = field::UNUSED.end;
/// Length of a neighbor solicitation or advertisement before its options.
pub const NDP_HEADER_LEN: usize = field::TARGET_ADDR.end;
/// Length of a link-layer address option carrying an Ethernet address.
pub const LLADDR_OPTION_LEN: usize = 8;

/// How many bytes after the quoted IPv6 header a destination-unreachable
/// message carries at most on emit: the message then fits in the IPv6
/// minimum MTU of 1280 (minus the IPv6 and ICMPv6 headers and the quoted
/// header).
pub const MAX_QUOTED_DATA: usize = 1280 - ipv6::HEADER_LEN - HEADER_LEN - ipv6::HEADER_LEN;

const FLAG_ROUTER: u8 = 0x80;
const FLAG_SOLICITED: u8 = 0x40;
const FLAG_OVERRIDE: u8 = 0x20;

const OPT_SOURCE_LLADDR: u8 = 1;
const OPT_TARGET_LLADDR: u8 = 2;

/// A view of an ICMPv6 message in a byte buffer (the IPv6 payload).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Icmpv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv6Packet<T> {
    /// Wraps a buffer without checking its length (for emitting).
    pub const fn new_unchecked(buffer: T) -> Icmpv6Packet<T> {
        Icmpv6Packet { buffer }
    }

    /// Wraps a buffer and checks that the header for its type fits.
    pub fn new_checked(buffer: T) -> Result<Icmpv6Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Ensures no accessor panics: 8 bytes, or 24 for neighbor solicitations
    /// and advertisements (which carry a target address).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN || len < self.header_len() {
            Err(Error)
        } else {
            Ok(())
        }
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// 24 for neighbor solicitations and advertisements, 8 otherwise: where
    /// the payload (options, echo data, quoted packet) starts.
    pub fn header_len(&self) -> usize {
        match self.msg_type() {
            Icmpv6Message::NeighborSolicit | Icmpv6Message::NeighborAdvert => NDP_HEADER_LEN,
            _ => HEADER_LEN,
        }
    }

    /// The message type.
    pub fn msg_type(&self) -> Icmpv6Message {
        Icmpv6Message::from(self.buffer.as_ref()[field::TYPE])
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

    /// The router flag of a neighbor advertisement.
    pub fn router_flag(&self) -> bool {
        self.buffer.as_ref()[field::NEIGH_FLAGS] & FLAG_ROUTER != 0
    }

    /// The solicited flag of a neighbor advertisement.
    pub fn solicited_flag(&self) -> bool {
        self.buffer.as_ref()[field::NEIGH_FLAGS] & FLAG_SOLICITED != 0
    }

    /// The override flag of a neighbor advertisement.
    pub fn override_flag(&self) -> bool {
        self.buffer.as_ref()[field::NEIGH_FLAGS] & FLAG_OVERRIDE != 0
    }

    /// The target address of a neighbor solicitation or advertisement.
    /// Other types have no such field; if their buffer is shorter than 24
    /// bytes this returns `::` rather than panicking.
    pub fn target_addr(&self) -> Ipv6Addr {
        match self.buffer.as_ref().get(field::TARGET_ADDR) {
            Some(bytes) => {
                let mut octets = [0u8; 16];
                octets.copy_from_slice(bytes);
                Ipv6Addr::from(octets)
            }
            None => Ipv6Addr::UNSPECIFIED,
        }
    }

    /// The message and the pseudo-header for `src`/`dst` sum to zero.
    /// Always true under `cfg(fuzzing)`, so fuzzers reach the code behind
    /// the check.
    pub fn verify_checksum(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        if cfg!(fuzzing) {
            return true;
        }
        let data = self.buffer.as_ref();
        checksum::finish(checksum::combine(&[
            pseudo_header(src, dst, data.len()),
            checksum::sum(data),
        ])) == 0
    }
}

fn pseudo_header(src: &Ipv6Addr, dst: &Ipv6Addr, len: usize) -> u32 {
    // An ICMPv6 message is an IPv6 payload, so its length fits in u32.
    checksum::pseudo_header_v6(src, dst, IpProtocol::Icmpv6, len as u32)
}

impl<'a, T: AsRef<[u8]> + ?Sized> Icmpv6Packet<&'a T> {
    /// The bytes after [`header_len`](Self::header_len): echo data, the
    /// quoted packet, or neighbor discovery options.
    pub fn payload(&self) -> &'a [u8] {
        let start = self.header_len();
        let data = self.buffer.as_ref();
        &data[start..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv6Packet<T> {
    /// Sets the message type (set it first: it decides the header length).
    pub fn set_msg_type(&mut self, value: Icmpv6Message) {
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

    /// Zeroes the 4 bytes after the checksum (reserved or unused in
    /// destination unreachable and neighbor discovery; also the flags).
    pub fn clear_reserved(&mut self) {
        self.buffer.as_mut()[field::UNUSED].fill(0);
    }

    fn set_flag(&mut self, flag: u8, value: bool) {
        let b = &mut self.buffer.as_mut()[field::NEIGH_FLAGS];
        *b = if value { *b | flag } else { *b & !flag };
    }

    /// Sets the router flag of a neighbor advertisement.
    pub fn set_router_flag(&mut self, value: bool) {
        self.set_flag(FLAG_ROUTER, value);
    }

    /// Sets the solicited flag of a neighbor advertisement.
    pub fn set_solicited_flag(&mut self, value: bool) {
        self.set_flag(FLAG_SOLICITED, value);
    }

    /// Sets the override flag of a neighbor advertisement.
    pub fn set_override_flag(&mut self, value: bool) {
        self.set_flag(FLAG_OVERRIDE, value);
    }

    /// Sets the target address of a neighbor solicitation or advertisement.
    pub fn set_target_addr(&mut self, value: Ipv6Addr) {
        self.buffer.as_mut()[field::TARGET_ADDR].copy_from_slice(&value.octets());
    }

    /// Computes and writes the checksum over the whole buffer and the
    /// pseudo-header for `src`/`dst`.
    pub fn fill_checksum(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        self.set_checksum(0);
        let data = self.buffer.as_ref();
        let sum = checksum::combine(&[pseudo_header(src, dst, data.len()), checksum::sum(data)]);
        self.set_checksum(checksum::finish(sum));
    }

    /// The bytes after [`header_len`](Icmpv6Packet::header_len), mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        &mut self.buffer.as_mut()[start..]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Icmpv6Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// Shows the message without checking its checksum (the addresses of the
/// enclosing packet are not known here).
impl<T: AsRef<[u8]>> fmt::Display for Icmpv6Packet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let packet = Icmpv6Packet::new_unchecked(self.buffer.as_ref());
        if packet.check_len().is_err() {
            return write!(f, "ICMPv6 (truncated, {} bytes)", packet.buffer.len());
        }
        let any = Ipv6Addr::UNSPECIFIED;
        match Icmpv6Repr::parse(&any, &any, &packet, false) {
            Ok(repr) => write!(f, "{repr}"),
            Err(_) => {
                write!(
                    f,
                    "ICMPv6 {} code {} len {}",
                    packet.msg_type(),
                    packet.msg_code(),
                    packet.payload().len()
                )
            }
        }
    }
}

/// The ICMPv6 messages the stack understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Icmpv6Repr<'a> {
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
    /// Destination unreachable, quoting the packet that caused it.
    DstUnreachable {
        /// The code.
        reason: Icmpv6DstUnreachable,
        /// The quoted IPv6 header; its `payload_len` may exceed the bytes
        /// quoted.
        header: Ipv6Repr,
        /// The quoted bytes after that header (all of them on parse, at most
        /// [`MAX_QUOTED_DATA`] on emit).
        data: &'a [u8],
    },
    /// Neighbor solicitation: who has `target_addr`?
    NeighborSolicit {
        /// The address being resolved.
        target_addr: Ipv6Addr,
        /// The sender's link-layer address (source link-layer address option).
        lladdr: Option<EthernetAddress>,
    },
    /// Neighbor advertisement: `target_addr` is at `lladdr`.
    NeighborAdvert {
        /// The sender is a router.
        router: bool,
        /// Sent in response to a solicitation.
        solicited: bool,
        /// Replace an existing cache entry.
        override_: bool,
        /// The address being advertised.
        target_addr: Ipv6Addr,
        /// Its link-layer address (target link-layer address option).
        lladdr: Option<EthernetAddress>,
    },
}

impl<'a> Icmpv6Repr<'a> {
    /// Reads a message carried from `src` to `dst`. Echo and neighbor
    /// discovery messages need code 0; destination unreachable needs a
    /// quoted IPv6 header (40 bytes, version 6). Other types are errors, as
    /// are malformed neighbor discovery options and, when `verify_checksum`
    /// is set, a wrong checksum.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        src: &Ipv6Addr,
        dst: &Ipv6Addr,
        packet: &Icmpv6Packet<&'a T>,
        verify_checksum: bool,
    ) -> Result<Icmpv6Repr<'a>> {
        packet.check_len()?;
        if verify_checksum && !packet.verify_checksum(src, dst) {
            return Err(Error);
        }
        match (packet.msg_type(), packet.msg_code()) {
            (Icmpv6Message::EchoRequest, 0) => Ok(Icmpv6Repr::EchoRequest {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data: packet.payload(),
            }),
            (Icmpv6Message::EchoReply, 0) => Ok(Icmpv6Repr::EchoReply {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data: packet.payload(),
            }),
            (Icmpv6Message::DstUnreachable, code) => {
                let quoted = packet.payload();
                let ip = Ipv6Packet::new_unchecked(quoted);
                // Only the fixed-header accessors are used, after this check.
                if quoted.len() < ipv6::HEADER_LEN || ip.version() != 6 {
                    return Err(Error);
                }
                Ok(Icmpv6Repr::DstUnreachable {
                    reason: Icmpv6DstUnreachable::from(code),
                    header: Ipv6Repr {
                        src_addr: ip.src_addr(),
                        dst_addr: ip.dst_addr(),
                        next_header: ip.next_header(),
                        payload_len: usize::from(ip.payload_len()),
                        hop_limit: ip.hop_limit(),
                        traffic_class: ip.traffic_class(),
                    },
                    data: &quoted[ipv6::HEADER_LEN..],
                })
            }
            (Icmpv6Message::NeighborSolicit, 0) => Ok(Icmpv6Repr::NeighborSolicit {
                target_addr: packet.target_addr(),
                lladdr: find_lladdr(packet.payload(), OPT_SOURCE_LLADDR)?,
            }),
            (Icmpv6Message::NeighborAdvert, 0) => Ok(Icmpv6Repr::NeighborAdvert {
                router: packet.router_flag(),
                solicited: packet.solicited_flag(),
                override_: packet.override_flag(),
                target_addr: packet.target_addr(),
                lladdr: find_lladdr(packet.payload(), OPT_TARGET_LLADDR)?,
            }),
            _ => Err(Error),
        }
    }

    /// The bytes [`emit`](Self::emit) writes.
    pub fn buffer_len(&self) -> usize {
        match self {
            Icmpv6Repr::EchoRequest { data, .. } | Icmpv6Repr::EchoReply { data, .. } => {
                HEADER_LEN + data.len()
            }
            Icmpv6Repr::DstUnreachable { data, .. } => {
                HEADER_LEN + ipv6::HEADER_LEN + data.len().min(MAX_QUOTED_DATA)
            }
            Icmpv6Repr::NeighborSolicit { lladdr, .. }
            | Icmpv6Repr::NeighborAdvert { lladdr, .. } => match lladdr {
                Some(_) => NDP_HEADER_LEN + LLADDR_OPTION_LEN,
                None => NDP_HEADER_LEN,
            },
        }
    }

    /// Writes the message, to be carried from `src` to `dst`, into `packet`,
    /// whose buffer must be exactly [`buffer_len`](Self::buffer_len) bytes
    /// (the checksum covers all of it). With `fill_checksum` false the
    /// checksum is left 0.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        src: &Ipv6Addr,
        dst: &Ipv6Addr,
        packet: &mut Icmpv6Packet<T>,
        fill_checksum: bool,
    ) {
        match *self {
            Icmpv6Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => emit_echo(packet, Icmpv6Message::EchoRequest, ident, seq_no, data),
            Icmpv6Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => emit_echo(packet, Icmpv6Message::EchoReply, ident, seq_no, data),
            Icmpv6Repr::DstUnreachable {
                reason,
                header,
                data,
            } => {
                packet.set_msg_type(Icmpv6Message::DstUnreachable);
                packet.set_msg_code(reason.into());
                packet.clear_reserved();
                let quoted = packet.payload_mut();
                header.emit(&mut Ipv6Packet::new_unchecked(
                    &mut quoted[..ipv6::HEADER_LEN],
                ));
                let data = &data[..data.len().min(MAX_QUOTED_DATA)];
                quoted[ipv6::HEADER_LEN..][..data.len()].copy_from_slice(data);
            }
            Icmpv6Repr::NeighborSolicit {
                target_addr,
                lladdr,
            } => {
                packet.set_msg_type(Icmpv6Message::NeighborSolicit);
                packet.set_msg_code(0);
                packet.clear_reserved();
                packet.set_target_addr(target_addr);
                if let Some(lladdr) = lladdr {
                    emit_lladdr(packet.payload_mut(), OPT_SOURCE_LLADDR, lladdr);
                }
            }
            Icmpv6Repr::NeighborAdvert {
                router,
                solicited,
                override_,
                target_addr,
                lladdr,
            } => {
                packet.set_msg_type(Icmpv6Message::NeighborAdvert);
                packet.set_msg_code(0);
                packet.clear_reserved();
                packet.set_router_flag(router);
                packet.set_solicited_flag(solicited);
                packet.set_override_flag(override_);
                packet.set_target_addr(target_addr);
                if let Some(lladdr) = lladdr {
                    emit_lladdr(packet.payload_mut(), OPT_TARGET_LLADDR, lladdr);
                }
            }
        }
        if fill_checksum {
            packet.fill_checksum(src, dst);
        } else {
            packet.set_checksum(0);
        }
    }
}

fn emit_echo<T: AsRef<[u8]> + AsMut<[u8]>>(
    packet: &mut Icmpv6Packet<T>,
    msg_type: Icmpv6Message,
    ident: u16,
    seq_no: u16,
    data: &[u8],
) {
    packet.set_msg_type(msg_type);
    packet.set_msg_code(0);
    packet.set_echo_ident(ident);
    packet.set_echo_seq_no(seq_no);
    packet.payload_mut()[..data.len()].copy_from_slice(data);
}

/// Writes a link-layer address option (length 1 = 8 bytes) at the start of
/// `options`.
fn emit_lladdr(options: &mut [u8], kind: u8, lladdr: EthernetAddress) {
    options[0] = kind;
    options[1] = (LLADDR_OPTION_LEN / 8) as u8;
    options[2..LLADDR_OPTION_LEN].copy_from_slice(lladdr.as_bytes());
}

/// Walks neighbor discovery options and returns the address in the first
/// option of type `kind`. Every option is checked, even after a match: one
/// of length 0, or one running past the message, makes the message invalid.
/// Each step consumes at least 8 bytes, so the walk is bounded.
fn find_lladdr(options: &[u8], kind: u8) -> Result<Option<EthernetAddress>> {
    let mut rest = options;
    let mut found = None;
    while !rest.is_empty() {
        let (opt_kind, len) = match rest {
            [opt_kind, units, ..] => (*opt_kind, usize::from(*units) * 8),
            _ => return Err(Error),
        };
        if len == 0 || len > rest.len() {
            return Err(Error);
        }
        if opt_kind == kind && found.is_none() {
            // len >= 8, so the six address bytes after type and length exist.
            found = Some(EthernetAddress::from_bytes(&rest[2..8]));
        }
        rest = &rest[len..];
    }
    Ok(found)
}

impl fmt::Display for Icmpv6Repr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Icmpv6Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => {
                write!(
                    f,
                    "ICMPv6 echo request id {ident} seq {seq_no} len {}",
                    data.len()
                )
            }
            Icmpv6Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => {
                write!(
                    f,
                    "ICMPv6 echo reply id {ident} seq {seq_no} len {}",
                    data.len()
                )
            }
            Icmpv6Repr::DstUnreachable {
                reason,
                header,
                data,
            } => {
                write!(
                    f,
                    "ICMPv6 dst-unreachable {reason} ({header}) data {}",
                    data.len()
                )
            }
            Icmpv6Repr::NeighborSolicit {
                target_addr,
                lladdr,
            } => {
                write!(f, "ICMPv6 neighbor solicit who-has {target_addr}")?;
                if let Some(lladdr) = lladdr {
                    write!(f, " lladdr {lladdr}")?;
                }
                Ok(())
            }
            Icmpv6Repr::NeighborAdvert {
                router,
                solicited,
                override_,
                target_addr,
                lladdr,
            } => {
                write!(f, "ICMPv6 neighbor advert {target_addr}")?;
                if let Some(lladdr) = lladdr {
                    write!(f, " is-at {lladdr}")?;
                }
                for (set, name) in [
                    (router, " router"),
                    (solicited, " solicited"),
                    (override_, " override"),
                ] {
                    if *set {
                        f.write_str(name)?;
                    }
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use proptest::prelude::*;

    const A1: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
    const A2: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2);
    /// The solicited-node multicast address of A2.
    const SNM2: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00, 2);
    const MAC1: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x01]);
    const MAC2: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x02]);

    const ECHO_DATA: [u8; 8] = [0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17];

    /// Echo request id 1 seq 2, A1 > A2; checksum 0x365d.
    static ECHO_BYTES: [u8; 16] = [
        0x80, 0x00, 0x36, 0x5d, // type 128, code 0, checksum
        0x00, 0x01, 0x00, 0x02, // id 1, seq 2
        0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, // data
    ];

    /// A1 (MAC1) asks who has A2, sent to A2's solicited-node address;
    /// checksum 0x7a97.
    static NS_BYTES: [u8; 32] = [
        0x87, 0x00, 0x7a, 0x97, // type 135, code 0, checksum
        0x00, 0x00, 0x00, 0x00, // reserved
        0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // target A2
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, //
        0x01, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // source lladdr MAC1
    ];

    /// A2 answers A1: A2 is at MAC2, solicited and override; checksum 0x181a.
    static NA_BYTES: [u8; 32] = [
        0x88, 0x00, 0x18, 0x1a, // type 136, code 0, checksum
        0x60, 0x00, 0x00, 0x00, // S, O
        0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // target A2
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, //
        0x02, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02, // target lladdr MAC2
    ];

    const QUOTED_DATA: [u8; 8] = [0x9c, 0x40, 0x0f, 0xa0, 0x01, 0x02, 0x03, 0x04];

    /// A2 tells A1 port unreachable, quoting a Homa packet A1 > A2 whose
    /// payload length (48) exceeds the 8 bytes quoted; checksum 0x5628.
    static UNREACHABLE_BYTES: [u8; 56] = [
        0x01, 0x04, 0x56, 0x28, // type 1, code 4 (port), checksum
        0x00, 0x00, 0x00, 0x00, // unused
        0x6c, 0x00, 0x00, 0x00, 0x00, 0x30, 0x92, 0x40, // quoted IPv6 header
        0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, //
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, //
        0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, //
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, //
        0x9c, 0x40, 0x0f, 0xa0, 0x01, 0x02, 0x03, 0x04, // sport, dport, ...
    ];

    fn echo_repr() -> Icmpv6Repr<'static> {
        Icmpv6Repr::EchoRequest {
            ident: 1,
            seq_no: 2,
            data: &ECHO_DATA,
        }
    }

    fn ns_repr() -> Icmpv6Repr<'static> {
        Icmpv6Repr::NeighborSolicit {
            target_addr: A2,
            lladdr: Some(MAC1),
        }
    }

    fn na_repr() -> Icmpv6Repr<'static> {
        Icmpv6Repr::NeighborAdvert {
            router: false,
            solicited: true,
            override_: true,
            target_addr: A2,
            lladdr: Some(MAC2),
        }
    }

    fn unreachable_repr() -> Icmpv6Repr<'static> {
        Icmpv6Repr::DstUnreachable {
            reason: Icmpv6DstUnreachable::PortUnreachable,
            header: Ipv6Repr {
                src_addr: A1,
                dst_addr: A2,
                next_header: IpProtocol::Homa,
                payload_len: 48,
                hop_limit: 64,
                traffic_class: 0xc0,
            },
            data: &QUOTED_DATA,
        }
    }

    /// Each vector with the addresses of the packet that carries it.
    fn vectors() -> [(&'static [u8], Ipv6Addr, Ipv6Addr, Icmpv6Repr<'static>); 4] {
        [
            (&ECHO_BYTES, A1, A2, echo_repr()),
            (&NS_BYTES, A1, SNM2, ns_repr()),
            (&NA_BYTES, A2, A1, na_repr()),
            (&UNREACHABLE_BYTES, A2, A1, unreachable_repr()),
        ]
    }

    fn parse<'a>(
        src: &Ipv6Addr,
        dst: &Ipv6Addr,
        bytes: &'a [u8],
        verify: bool,
    ) -> Result<Icmpv6Repr<'a>> {
        Icmpv6Repr::parse(src, dst, &Icmpv6Packet::new_checked(bytes)?, verify)
    }

    /// `bytes` with the checksum refilled for `src`/`dst`.
    fn refilled<const N: usize>(mut bytes: [u8; N], src: &Ipv6Addr, dst: &Ipv6Addr) -> [u8; N] {
        Icmpv6Packet::new_unchecked(&mut bytes[..]).fill_checksum(src, dst);
        bytes
    }

    #[test]
    fn deconstruct_echo() {
        let packet = Icmpv6Packet::new_checked(&ECHO_BYTES[..]).unwrap();
        assert_eq!(packet.msg_type(), Icmpv6Message::EchoRequest);
        assert_eq!(packet.msg_code(), 0);
        assert_eq!(packet.checksum(), 0x365d);
        assert_eq!(packet.echo_ident(), 1);
        assert_eq!(packet.echo_seq_no(), 2);
        assert_eq!(packet.header_len(), 8);
        assert_eq!(packet.payload(), &ECHO_DATA);
        assert!(packet.verify_checksum(&A1, &A2));
    }

    #[test]
    fn deconstruct_neighbor_messages() {
        let ns = Icmpv6Packet::new_checked(&NS_BYTES[..]).unwrap();
        assert_eq!(ns.msg_type(), Icmpv6Message::NeighborSolicit);
        assert_eq!(ns.header_len(), 24);
        assert_eq!(ns.target_addr(), A2);
        assert_eq!(ns.payload(), &NS_BYTES[24..]);
        assert!(ns.verify_checksum(&A1, &SNM2));
        let na = Icmpv6Packet::new_checked(&NA_BYTES[..]).unwrap();
        assert_eq!(na.msg_type(), Icmpv6Message::NeighborAdvert);
        assert!(!na.router_flag());
        assert!(na.solicited_flag());
        assert!(na.override_flag());
        assert_eq!(na.target_addr(), A2);
        assert!(na.verify_checksum(&A2, &A1));
    }

    #[test]
    fn deconstruct_unreachable() {
        let packet = Icmpv6Packet::new_checked(&UNREACHABLE_BYTES[..]).unwrap();
        assert_eq!(packet.msg_type(), Icmpv6Message::DstUnreachable);
        assert_eq!(packet.msg_code(), 4);
        assert_eq!(packet.payload(), &UNREACHABLE_BYTES[8..]);
        assert!(packet.verify_checksum(&A2, &A1));
    }

    #[test]
    fn construct_neighbor_advert() {
        let mut bytes = [0xa5u8; 32];
        let mut packet = Icmpv6Packet::new_unchecked(&mut bytes[..]);
        packet.set_msg_type(Icmpv6Message::NeighborAdvert);
        packet.set_msg_code(0);
        packet.clear_reserved();
        packet.set_router_flag(false);
        packet.set_solicited_flag(true);
        packet.set_override_flag(true);
        packet.set_target_addr(A2);
        packet
            .payload_mut()
            .copy_from_slice(&[0x02, 0x01, 0x02, 0, 0, 0, 0, 0x02]);
        packet.fill_checksum(&A2, &A1);
        assert_eq!(bytes, NA_BYTES);
    }

    #[test]
    fn construct_echo() {
        let mut bytes = [0xa5u8; 16];
        let mut packet = Icmpv6Packet::new_unchecked(&mut bytes[..]);
        packet.set_msg_type(Icmpv6Message::EchoRequest);
        packet.set_msg_code(0);
        packet.set_echo_ident(1);
        packet.set_echo_seq_no(2);
        packet.payload_mut().copy_from_slice(&ECHO_DATA);
        packet.fill_checksum(&A1, &A2);
        assert_eq!(bytes, ECHO_BYTES);
    }

    #[test]
    fn parse_vectors() {
        for (bytes, src, dst, repr) in vectors() {
            assert_eq!(parse(&src, &dst, bytes, true), Ok(repr), "{repr}");
        }
    }

    #[test]
    fn emit_vectors() {
        for (bytes, src, dst, repr) in vectors() {
            assert_eq!(repr.buffer_len(), bytes.len(), "{repr}");
            let mut out = [0xa5u8; 56];
            let out = &mut out[..bytes.len()];
            repr.emit(
                &src,
                &dst,
                &mut Icmpv6Packet::new_unchecked(&mut *out),
                true,
            );
            assert_eq!(&*out, bytes, "{repr}");
        }
    }

    #[test]
    fn every_truncation_is_an_error() {
        for (bytes, src, dst, _) in vectors() {
            for len in 0..bytes.len() {
                assert_eq!(parse(&src, &dst, &bytes[..len], true), Err(Error), "{len}");
            }
        }
    }

    #[test]
    fn structural_truncations_fail_even_unverified() {
        // Into the target address, into the option, into the quoted header.
        let cases: [(&[u8], core::ops::Range<usize>); 3] = [
            (&NS_BYTES, 0..24),
            (&NS_BYTES, 25..32),
            (&UNREACHABLE_BYTES, 0..48),
        ];
        for (bytes, lens) in cases {
            for len in lens {
                assert_eq!(parse(&A1, &A2, &bytes[..len], false), Err(Error), "{len}");
            }
        }
    }

    #[test]
    fn bad_checksum_fails_only_when_verified() {
        // The right bytes with another destination (swapping source and
        // destination would not do: the pseudo-header sum is symmetric).
        assert_eq!(parse(&A1, &SNM2, &ECHO_BYTES, true), Err(Error));
        assert_eq!(parse(&A1, &SNM2, &ECHO_BYTES, false), Ok(echo_repr()));
        let mut bytes = ECHO_BYTES;
        bytes[3] ^= 0x01;
        assert_eq!(parse(&A1, &A2, &bytes, true), Err(Error));
        assert_eq!(parse(&A1, &A2, &bytes, false), Ok(echo_repr()));
    }

    #[test]
    fn option_of_length_zero_is_an_error() {
        let mut bytes = NS_BYTES;
        bytes[25] = 0;
        let bytes = refilled(bytes, &A1, &SNM2);
        assert_eq!(parse(&A1, &SNM2, &bytes, true), Err(Error));
    }

    #[test]
    fn option_running_past_the_message_is_an_error() {
        let mut bytes = NS_BYTES;
        bytes[25] = 2;
        let bytes = refilled(bytes, &A1, &SNM2);
        assert_eq!(parse(&A1, &SNM2, &bytes, true), Err(Error));
    }

    #[test]
    fn unknown_options_are_skipped() {
        // A nonce option (14), then the source link-layer address.
        let mut bytes = [0u8; 40];
        bytes[..24].copy_from_slice(&NS_BYTES[..24]);
        bytes[24..32].copy_from_slice(&[14, 1, 1, 2, 3, 4, 5, 6]);
        bytes[32..].copy_from_slice(&NS_BYTES[24..]);
        let bytes = refilled(bytes, &A1, &SNM2);
        assert_eq!(parse(&A1, &SNM2, &bytes, true), Ok(ns_repr()));
    }

    #[test]
    fn an_advert_ignores_a_source_lladdr_option() {
        // Type 1 (source) in an advertisement is not the target's address.
        let mut bytes = NA_BYTES;
        bytes[24] = OPT_SOURCE_LLADDR;
        let bytes = refilled(bytes, &A2, &A1);
        match parse(&A2, &A1, &bytes, true) {
            Ok(Icmpv6Repr::NeighborAdvert { lladdr, .. }) => assert_eq!(lladdr, None),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn neighbor_messages_without_options() {
        let ns = Icmpv6Repr::NeighborSolicit {
            target_addr: A2,
            lladdr: None,
        };
        assert_eq!(ns.buffer_len(), 24);
        let mut bytes = [0u8; 24];
        ns.emit(
            &A1,
            &SNM2,
            &mut Icmpv6Packet::new_unchecked(&mut bytes[..]),
            true,
        );
        assert_eq!(parse(&A1, &SNM2, &bytes, true), Ok(ns));
    }

    #[test]
    fn emit_caps_the_quoted_data() {
        let long = [0x55u8; 1500];
        let repr = Icmpv6Repr::DstUnreachable {
            reason: Icmpv6DstUnreachable::PortUnreachable,
            header: Ipv6Repr {
                src_addr: A1,
                dst_addr: A2,
                next_header: IpProtocol::Homa,
                payload_len: 1460,
                hop_limit: 64,
                traffic_class: 0,
            },
            data: &long,
        };
        // The message plus its IPv6 header is exactly the minimum MTU.
        assert_eq!(repr.buffer_len() + ipv6::HEADER_LEN, 1280);
        let mut bytes = vec![0u8; repr.buffer_len()];
        repr.emit(
            &A2,
            &A1,
            &mut Icmpv6Packet::new_unchecked(&mut bytes[..]),
            true,
        );
        assert_eq!(&bytes[48..], &long[..MAX_QUOTED_DATA]);
    }

    #[test]
    fn quoted_header_of_another_version_is_an_error() {
        let mut bytes = UNREACHABLE_BYTES;
        bytes[8] = 0x4c;
        let bytes = refilled(bytes, &A2, &A1);
        assert_eq!(parse(&A2, &A1, &bytes, true), Err(Error));
    }

    #[test]
    fn other_types_and_nonzero_codes_are_errors() {
        for (ty, code) in [(2u8, 0u8), (134, 0), (128, 1), (135, 1), (136, 1)] {
            let mut bytes = NS_BYTES;
            bytes[0] = ty;
            bytes[1] = code;
            let bytes = refilled(bytes, &A1, &SNM2);
            assert_eq!(parse(&A1, &SNM2, &bytes, true), Err(Error), "{ty}/{code}");
        }
    }

    #[test]
    fn target_addr_of_a_short_non_ndp_message_is_unspecified() {
        let packet = Icmpv6Packet::new_checked(&ECHO_BYTES[..]).unwrap();
        assert_eq!(packet.target_addr(), Ipv6Addr::UNSPECIFIED);
    }

    #[test]
    fn display() {
        let data = [0u8; 56];
        let echo = Icmpv6Repr::EchoRequest {
            ident: 1,
            seq_no: 2,
            data: &data,
        };
        assert_eq!(echo.to_string(), "ICMPv6 echo request id 1 seq 2 len 56");
        assert_eq!(
            ns_repr().to_string(),
            "ICMPv6 neighbor solicit who-has fe80::2 lladdr 02:00:00:00:00:01"
        );
        assert_eq!(
            Icmpv6Packet::new_unchecked(&NA_BYTES[..]).to_string(),
            "ICMPv6 neighbor advert fe80::2 is-at 02:00:00:00:00:02 solicited override"
        );
        assert_eq!(
            unreachable_repr().to_string(),
            "ICMPv6 dst-unreachable port (IPv6 fe80::1 > fe80::2 HOMA tc 0xc0 len 48) data 8"
        );
        assert_eq!(
            Icmpv6Packet::new_unchecked(&NS_BYTES[..20]).to_string(),
            "ICMPv6 (truncated, 20 bytes)"
        );
    }

    fn arb_ipv6_repr() -> impl Strategy<Value = Ipv6Repr> {
        (
            any::<u128>(),
            any::<u128>(),
            any::<u8>(),
            any::<u16>(),
            any::<u8>(),
            any::<u8>(),
        )
            .prop_map(|(src, dst, next, len, hop_limit, traffic_class)| Ipv6Repr {
                src_addr: Ipv6Addr::from(src),
                dst_addr: Ipv6Addr::from(dst),
                next_header: IpProtocol::from(next),
                payload_len: usize::from(len),
                hop_limit,
                traffic_class,
            })
    }

    /// Everything a repr needs; `make_repr` borrows the data from it.
    #[derive(Debug, Clone)]
    struct Parts {
        kind: u8,
        ident: u16,
        seq_no: u16,
        code: u8,
        header: Ipv6Repr,
        data: Vec<u8>,
        flags: (bool, bool, bool),
        target: u128,
        lladdr: Option<[u8; 6]>,
    }

    fn arb_parts() -> impl Strategy<Value = Parts> {
        (
            (0u8..5, any::<u16>(), any::<u16>(), any::<u8>()),
            arb_ipv6_repr(),
            proptest::collection::vec(any::<u8>(), 0..64),
            any::<(bool, bool, bool)>(),
            any::<u128>(),
            proptest::option::of(any::<[u8; 6]>()),
        )
            .prop_map(
                |((kind, ident, seq_no, code), header, data, flags, target, lladdr)| Parts {
                    kind,
                    ident,
                    seq_no,
                    code,
                    header,
                    data,
                    flags,
                    target,
                    lladdr,
                },
            )
    }

    fn make_repr(p: &Parts) -> Icmpv6Repr<'_> {
        let (ident, seq_no, data) = (p.ident, p.seq_no, &p.data[..]);
        let target_addr = Ipv6Addr::from(p.target);
        let lladdr = p.lladdr.map(EthernetAddress);
        match p.kind {
            0 => Icmpv6Repr::EchoRequest {
                ident,
                seq_no,
                data,
            },
            1 => Icmpv6Repr::EchoReply {
                ident,
                seq_no,
                data,
            },
            2 => Icmpv6Repr::DstUnreachable {
                reason: Icmpv6DstUnreachable::from(p.code),
                header: p.header,
                data,
            },
            3 => Icmpv6Repr::NeighborSolicit {
                target_addr,
                lladdr,
            },
            _ => Icmpv6Repr::NeighborAdvert {
                router: p.flags.0,
                solicited: p.flags.1,
                override_: p.flags.2,
                target_addr,
                lladdr,
            },
        }
    }

    proptest! {
        #[test]
        fn parse_inverts_emit(parts in arb_parts(), src in any::<u128>(), dst in any::<u128>()) {
            let (src, dst) = (Ipv6Addr::from(src), Ipv6Addr::from(dst));
            let repr = make_repr(&parts);
            let mut bytes = vec![0u8; repr.buffer_len()];
            repr.emit(&src, &dst, &mut Icmpv6Packet::new_unchecked(&mut bytes[..]), true);
            prop_assert_eq!(parse(&src, &dst, &bytes, true), Ok(repr));
        }

        #[test]
        fn arbitrary_bytes_never_panic(
            kind in 0usize..6,
            mut bytes in proptest::collection::vec(any::<u8>(), 0..80),
        ) {
            // Steer most inputs to a known type (and, for NDP, short options
            // and a plausible quoted version) so the per-type code runs.
            if !bytes.is_empty() {
                bytes[0] = [1, 128, 129, 135, 136, bytes[0]][kind];
            }
            if bytes.len() > 1 && kind != 5 {
                bytes[1] = 0;
            }
            if bytes.len() > 8 && kind == 0 {
                bytes[8] = 0x60 | (bytes[8] & 0x0f);
            }
            if bytes.len() > 25 && (kind == 3 || kind == 4) {
                bytes[25] %= 4;
            }
            for verify in [false, true] {
                let p = Icmpv6Packet::new_unchecked(&bytes[..]);
                let _ = Icmpv6Repr::parse(&A1, &A2, &p, verify);
            }
            let _ = Icmpv6Packet::new_unchecked(&bytes[..]).to_string();
            if let Ok(p) = Icmpv6Packet::new_checked(&bytes[..]) {
                let _ = (p.payload(), p.target_addr(), p.echo_ident(), p.router_flag());
            }
        }
    }
}
