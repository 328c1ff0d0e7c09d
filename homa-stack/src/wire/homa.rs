//! Homa packets (IP protocol 146): every packet type of the Linux
//! kernel module, byte for byte (docs/protocol.md section 3).
//!
//! Every packet starts with a 28-byte common header shaped like a TCP header
//! (so NICs can segment it) and continues with a type-specific part:
//!
//! | type | code | header bytes |
//! |---|---|---|
//! | DATA | 0x10 | 56 + payload |
//! | GRANT | 0x11 | 33 |
//! | RESEND | 0x12 | 37 (36 from upstream builds, accepted) |
//! | RPC_UNKNOWN, BUSY, FREEZE, NEED_ACK | 0x13, 0x14, 0x16, 0x17 | 28 |
//! | CUTOFFS | 0x15 | 62 |
//! | ACK | 0x18 | 80 |
//!
//! # Accessors never panic
//! [`Packet::check_len`] accepts a buffer of at least 28 bytes whose type is
//! known and which is at least as long as that type's header. Beyond that
//! contract, every getter reads its bytes with a bounds check and returns 0
//! (an empty slice for payloads, `None` for the optional RESEND priority) when
//! the buffer is too short for the field. So a getter of another type's field
//! (say `grant_offset` on a BUSY packet) reads whatever sits at that offset,
//! or 0, and **no getter panics on any buffer**, checked or not. The fields
//! of the packet's own type always lie inside the checked length. Setters
//! panic on a buffer too short for their field; they are used only to build
//! packets in buffers of [`Repr::buffer_len`] bytes.
//!
//! The buffer must be exactly the Homa packet (the IP payload, trimmed to the
//! IP length): the DATA payload is everything after byte 56.
//!
//! # Receive rules ([`Repr::parse`])
//! - `flags`, `window`, `urgent`, the unused `ack[3]` bytes, `doff`, `pad`
//!   and `checksum` are ignored (Linux sends flags 6 and urgent 0xb97d as TCP
//!   hijack markers; nobody verifies the checksum).
//! - DATA's offset is `seg.offset` unless that is [`OFFSET_IN_SEQUENCE`], in
//!   which case it is `sequence` (Linux sends the sentinel in every first
//!   transmission of a single-segment packet).
//! - DATA whose offset and length disagree with `message_length`, or whose
//!   `message_length` exceeds [`MAX_MESSAGE_LENGTH`], still parses: judging
//!   it needs RPC state, so the endpoint drops it.
//! - A 36-byte (upstream) RESEND gets the highest priority,
//!   `NUM_PRIORITIES - 1`.
//! - ACK's `num_acks` above [`MAX_ACKS`] is clamped to [`MAX_ACKS`].
//!
//! # Emit rules ([`Repr::emit`])
//! DATA carries its offset in both `sequence` and `seg.offset` (every receiver
//! understands that); control packets send `sequence` 0. `doff` is 14 for
//! DATA and 5 for control packets; `flags`, `window`, `urgent`, `ack[3]`,
//! `pad` and unused ACK entries are 0; the checksum is left 0 and filled
//! separately with [`Packet::fill_checksum`] if wanted.

use core::fmt;
use core::net::SocketAddr;

use byteorder::{ByteOrder, NetworkEndian};

use super::checksum;
use super::field::Field;
use super::{Error, IpAddr, IpProtocol, Result};

mod field {
    #![allow(non_snake_case)]
    use crate::wire::field::{Field, Rest};

    // Common header.
    pub const SPORT: Field = 0..2;
    pub const DPORT: Field = 2..4;
    pub const SEQUENCE: Field = 4..8;
    pub const COMMON_ACK: Field = 8..11;
    pub const TYPE: usize = 11;
    pub const DOFF: usize = 12;
    pub const FLAGS: usize = 13;
    pub const WINDOW: Field = 14..16;
    pub const CHECKSUM: Field = 16..18;
    pub const URGENT: Field = 18..20;
    pub const SENDER_ID: Field = 20..28;

    // DATA.
    pub const MESSAGE_LENGTH: Field = 28..32;
    pub const INCOMING: Field = 32..36;
    pub const ACK_CLIENT_ID: Field = 36..44;
    pub const ACK_SERVER_PORT: Field = 44..46;
    pub const CUTOFF_VERSION: Field = 46..48;
    pub const RETRANSMIT: usize = 48;
    pub const PAD: Field = 49..52;
    pub const SEG_OFFSET: Field = 52..56;
    pub const PAYLOAD: Rest = 56..;

    // GRANT.
    pub const GRANT_OFFSET: Field = 28..32;
    pub const GRANT_PRIORITY: usize = 32;

    // RESEND.
    pub const RESEND_OFFSET: Field = 28..32;
    pub const RESEND_LENGTH: Field = 32..36;
    pub const RESEND_PRIORITY: usize = 36;

    // CUTOFFS.
    pub const UNSCHED_CUTOFFS: Field = 28..60;
    pub const fn UNSCHED_CUTOFF(i: usize) -> Field {
        UNSCHED_CUTOFFS.start + 4 * i..UNSCHED_CUTOFFS.start + 4 * (i + 1)
    }
    pub const CUTOFFS_VERSION: Field = 60..62;

    // ACK: `num_acks`, then five 10-byte {client_id, server_port} entries.
    pub const NUM_ACKS: Field = 28..30;
    pub const ACK_ENTRY_LEN: usize = 10;
    pub const ACKS: Field = 30..80;
    pub const fn ACK_ENTRY_CLIENT_ID(i: usize) -> Field {
        ACKS.start + ACK_ENTRY_LEN * i..ACKS.start + ACK_ENTRY_LEN * i + 8
    }
    pub const fn ACK_ENTRY_SERVER_PORT(i: usize) -> Field {
        ACKS.start + ACK_ENTRY_LEN * i + 8..ACKS.start + ACK_ENTRY_LEN * (i + 1)
    }
}

/// Length of the common header that starts every packet.
pub const COMMON_HEADER_LEN: usize = field::SENDER_ID.end;
/// Length of the DATA header (the payload follows).
pub const DATA_HEADER_LEN: usize = field::SEG_OFFSET.end;
/// Length of a GRANT.
pub const GRANT_HEADER_LEN: usize = field::GRANT_PRIORITY + 1;
/// Length of a RESEND as the full module sends it (with a priority byte).
pub const RESEND_HEADER_LEN: usize = field::RESEND_PRIORITY + 1;
/// Length of a RESEND from an upstream (stripped) build, without priority.
pub const RESEND_UPSTREAM_HEADER_LEN: usize = field::RESEND_LENGTH.end;
/// Length of an RPC_UNKNOWN (common header only).
pub const RPC_UNKNOWN_HEADER_LEN: usize = COMMON_HEADER_LEN;
/// Length of a BUSY (common header only).
pub const BUSY_HEADER_LEN: usize = COMMON_HEADER_LEN;
/// Length of a FREEZE (common header only).
pub const FREEZE_HEADER_LEN: usize = COMMON_HEADER_LEN;
/// Length of a NEED_ACK (common header only).
pub const NEED_ACK_HEADER_LEN: usize = COMMON_HEADER_LEN;
/// Length of a CUTOFFS.
pub const CUTOFFS_HEADER_LEN: usize = field::CUTOFFS_VERSION.end;
/// Length of an ACK (always sent full size, whatever `num_acks`).
pub const ACK_HEADER_LEN: usize = field::ACKS.end;

/// Largest message Linux accepts (`message_length` above it fails RPC creation).
pub const MAX_MESSAGE_LENGTH: u32 = 1_000_000;
/// Entries in an ACK packet (`HOMA_MAX_ACKS_PER_PKT`).
pub const MAX_ACKS: usize = 5;
/// Priority levels; CUTOFFS carries one cutoff per level.
pub const NUM_PRIORITIES: usize = 8;
/// `seg.offset` value meaning "the offset is in `sequence`".
pub const OFFSET_IN_SEQUENCE: u32 = 0xFFFF_FFFF;
/// RESEND `length` meaning "I received nothing; resend all you have sent".
pub const RESEND_ALL: u32 = 0xFFFF_FFFF;

/// Priority given to a 36-byte RESEND, which carries none: the highest.
const UPSTREAM_RESEND_PRIORITY: u8 = NUM_PRIORITIES as u8 - 1;
/// `doff` (header length in 32-bit words) sent with DATA: 56 / 4.
const DOFF_DATA: u8 = (DATA_HEADER_LEN / 4) as u8;
/// `doff` sent with control packets: TCP's bare 20 bytes, which some NICs
/// insist on (Linux sends 5 since 2025-10).
const DOFF_CONTROL: u8 = 5;

enum_with_unknown! {
    /// The `type` byte of the common header.
    pub enum PacketType(u8) {
        /// Message bytes.
        Data = 0x10,
        /// Receiver to sender: send up to an offset, at a priority.
        Grant = 0x11,
        /// Receiver to sender: retransmit a range.
        Resend = 0x12,
        /// "I have no such RPC".
        RpcUnknown = 0x13,
        /// "Alive, intentionally not sending".
        Busy = 0x14,
        /// Receiver to sender: unscheduled priority cutoffs.
        Cutoffs = 0x15,
        /// Debugging: freeze the recipient's timetrace.
        Freeze = 0x16,
        /// Server to client: please ACK.
        NeedAck = 0x17,
        /// Client to server: these RPCs can be freed.
        Ack = 0x18,
    }
}

impl PacketType {
    /// The header length of this type as emitted (DATA without payload,
    /// RESEND with its priority byte); `None` for unknown types.
    pub const fn header_len(self) -> Option<usize> {
        match self {
            PacketType::Data => Some(DATA_HEADER_LEN),
            PacketType::Grant => Some(GRANT_HEADER_LEN),
            PacketType::Resend => Some(RESEND_HEADER_LEN),
            PacketType::RpcUnknown => Some(RPC_UNKNOWN_HEADER_LEN),
            PacketType::Busy => Some(BUSY_HEADER_LEN),
            PacketType::Cutoffs => Some(CUTOFFS_HEADER_LEN),
            PacketType::Freeze => Some(FREEZE_HEADER_LEN),
            PacketType::NeedAck => Some(NEED_ACK_HEADER_LEN),
            PacketType::Ack => Some(ACK_HEADER_LEN),
            PacketType::Unknown(_) => None,
        }
    }

    /// The shortest packet of this type accepted on receive.
    const fn min_len(self) -> Option<usize> {
        match self {
            // Upstream builds send RESEND without the priority byte.
            PacketType::Resend => Some(RESEND_UPSTREAM_HEADER_LEN),
            other => other.header_len(),
        }
    }
}

impl fmt::Display for PacketType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PacketType::Data => f.write_str("DATA"),
            PacketType::Grant => f.write_str("GRANT"),
            PacketType::Resend => f.write_str("RESEND"),
            PacketType::RpcUnknown => f.write_str("RPC_UNKNOWN"),
            PacketType::Busy => f.write_str("BUSY"),
            PacketType::Cutoffs => f.write_str("CUTOFFS"),
            PacketType::Freeze => f.write_str("FREEZE"),
            PacketType::NeedAck => f.write_str("NEED_ACK"),
            PacketType::Ack => f.write_str("ACK"),
            PacketType::Unknown(n) => write!(f, "0x{n:02x}"),
        }
    }
}

/// A read/write view of a Homa packet (common header, type-specific header
/// and, for DATA, the payload).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking it (for building packets).
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len) (for received bytes).
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Accepts the buffer if it holds a common header with a known type and
    /// is at least that type's header long (RESEND: 36 bytes, the upstream
    /// length). Linux drops the same packets.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < COMMON_HEADER_LEN {
            return Err(Error);
        }
        match self.packet_type().min_len() {
            Some(min) if len >= min => Ok(()),
            _ => Err(Error),
        }
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn get_u8(&self, index: usize) -> u8 {
        self.buffer.as_ref().get(index).copied().unwrap_or(0)
    }

    fn get_u16(&self, f: Field) -> u16 {
        self.buffer
            .as_ref()
            .get(f)
            .map_or(0, NetworkEndian::read_u16)
    }

    fn get_u32(&self, f: Field) -> u32 {
        self.buffer
            .as_ref()
            .get(f)
            .map_or(0, NetworkEndian::read_u32)
    }

    fn get_u64(&self, f: Field) -> u64 {
        self.buffer
            .as_ref()
            .get(f)
            .map_or(0, NetworkEndian::read_u64)
    }

    // Common header.

    /// Sender's port.
    pub fn sport(&self) -> u16 {
        self.get_u16(field::SPORT)
    }
    /// Destination port.
    pub fn dport(&self) -> u16 {
        self.get_u16(field::DPORT)
    }
    /// DATA: the offset of the first payload byte when `seg.offset` is
    /// [`OFFSET_IN_SEQUENCE`]; 0 in control packets.
    pub fn sequence(&self) -> u32 {
        self.get_u32(field::SEQUENCE)
    }
    /// Bytes 8..11, the high bytes of TCP's ack field; unused by Homa.
    pub fn common_ack(&self) -> [u8; 3] {
        let mut bytes = [0; 3];
        if let Some(b) = self.buffer.as_ref().get(field::COMMON_ACK) {
            bytes.copy_from_slice(b);
        }
        bytes
    }
    /// The packet type.
    pub fn packet_type(&self) -> PacketType {
        PacketType::from(self.get_u8(field::TYPE))
    }
    /// The header length in 32-bit words (the high nibble of byte 12): 14
    /// for DATA, 13 for interleaved GSO DATA, 5 for control packets.
    pub fn doff(&self) -> u8 {
        self.get_u8(field::DOFF) >> 4
    }
    /// TCP flags byte: 6 (SYN|RST, the hijack marker) from the full module, 0
    /// from upstream; ignored.
    pub fn flags(&self) -> u8 {
        self.get_u8(field::FLAGS)
    }
    /// TCP window; unused, ignored.
    pub fn window(&self) -> u16 {
        self.get_u16(field::WINDOW)
    }
    /// TCP-style checksum, or 0 when not filled.
    pub fn checksum(&self) -> u16 {
        self.get_u16(field::CHECKSUM)
    }
    /// TCP urgent pointer: 0xb97d (hijack marker) from the full module, 0
    /// from upstream; ignored.
    pub fn urgent(&self) -> u16 {
        self.get_u16(field::URGENT)
    }
    /// The RPC id as known to the sender (even for a client, odd for a server).
    pub fn sender_id(&self) -> u64 {
        self.get_u64(field::SENDER_ID)
    }

    // DATA.

    /// DATA: total bytes in the message.
    pub fn message_length(&self) -> u32 {
        self.get_u32(field::MESSAGE_LENGTH)
    }
    /// DATA: bytes the sender will send without further grants.
    pub fn incoming(&self) -> u32 {
        self.get_u32(field::INCOMING)
    }
    /// DATA: client id of a piggy-backed ack (0 = none).
    pub fn ack_client_id(&self) -> u64 {
        self.get_u64(field::ACK_CLIENT_ID)
    }
    /// DATA: server port of the piggy-backed ack.
    pub fn ack_server_port(&self) -> u16 {
        self.get_u16(field::ACK_SERVER_PORT)
    }
    /// DATA: the last CUTOFFS version received from the destination.
    pub fn cutoff_version(&self) -> u16 {
        self.get_u16(field::CUTOFF_VERSION)
    }
    /// DATA: sent in response to a RESEND (any non-zero byte).
    pub fn retransmit(&self) -> bool {
        self.get_u8(field::RETRANSMIT) != 0
    }
    /// DATA: the raw `seg.offset`, possibly [`OFFSET_IN_SEQUENCE`].
    pub fn seg_offset(&self) -> u32 {
        self.get_u32(field::SEG_OFFSET)
    }
    /// DATA: the message offset of the payload: `seg.offset`, or `sequence`
    /// when `seg.offset` is [`OFFSET_IN_SEQUENCE`].
    pub fn offset(&self) -> u32 {
        match self.seg_offset() {
            OFFSET_IN_SEQUENCE => self.sequence(),
            offset => offset,
        }
    }

    // GRANT.

    /// GRANT: the sender may transmit all bytes below this offset.
    pub fn grant_offset(&self) -> u32 {
        self.get_u32(field::GRANT_OFFSET)
    }
    /// GRANT: priority for the message's scheduled DATA.
    pub fn grant_priority(&self) -> u8 {
        self.get_u8(field::GRANT_PRIORITY)
    }

    // RESEND.

    /// RESEND: first byte to retransmit.
    pub fn resend_offset(&self) -> u32 {
        self.get_u32(field::RESEND_OFFSET)
    }
    /// RESEND: bytes to retransmit, or [`RESEND_ALL`].
    pub fn resend_length(&self) -> u32 {
        self.get_u32(field::RESEND_LENGTH)
    }
    /// RESEND: priority of the retransmitted packets; `None` for a 36-byte
    /// (upstream) RESEND.
    pub fn resend_priority(&self) -> Option<u8> {
        self.buffer.as_ref().get(field::RESEND_PRIORITY).copied()
    }

    // CUTOFFS.

    /// CUTOFFS: largest message length using unscheduled priority `i`; 0 for
    /// `i >= NUM_PRIORITIES`.
    pub fn unsched_cutoff(&self, i: usize) -> u32 {
        if i >= NUM_PRIORITIES {
            return 0;
        }
        self.get_u32(field::UNSCHED_CUTOFF(i))
    }
    /// CUTOFFS: the version of these cutoffs (echoed back in DATA).
    pub fn cutoffs_version(&self) -> u16 {
        self.get_u16(field::CUTOFFS_VERSION)
    }

    // ACK.

    /// ACK: the raw count of valid entries (receivers clamp it to [`MAX_ACKS`]).
    pub fn num_acks(&self) -> u16 {
        self.get_u16(field::NUM_ACKS)
    }
    /// ACK: entry `i`, valid or not; all zero for `i >= MAX_ACKS`.
    pub fn ack_entry(&self, i: usize) -> Ack {
        if i >= MAX_ACKS {
            return Ack::default();
        }
        Ack {
            client_id: self.get_u64(field::ACK_ENTRY_CLIENT_ID(i)),
            server_port: self.get_u16(field::ACK_ENTRY_SERVER_PORT(i)),
        }
    }

    /// Checks the TCP-style checksum (docs/protocol.md 2.3): a pseudo-header with
    /// protocol 6 (TCP) and the Homa length, over the whole buffer.
    ///
    /// True when the field is 0 (not filled; upstream and older builds send
    /// that). False for a mixed IPv4/IPv6 address pair, which cannot be a
    /// real packet. Unlike the IP and ICMP checks it is real under
    /// `cfg(fuzzing)` too: verification is optional in the endpoint, so
    /// fuzzers reach everything with it off, and the two-endpoint fuzz
    /// target relies on it to tell corrupted data from a bug.
    pub fn verify_checksum(&self, src: &IpAddr, dst: &IpAddr) -> bool {
        let data = self.buffer.as_ref();
        let Some(pseudo) = pseudo_header(src, dst, data.len()) else {
            return false;
        };
        if self.checksum() == 0 {
            return true;
        }
        checksum::combine(&[pseudo, checksum::sum(data)]) == 0xffff
    }

    /// The checksum the whole buffer should carry between `src` and `dst`,
    /// whatever its field holds now (what
    /// [`fill_checksum`](Self::fill_checksum) writes); `None` for a mixed
    /// IPv4/IPv6 address pair.
    pub fn expected_checksum(&self, src: &IpAddr, dst: &IpAddr) -> Option<u16> {
        let data = self.buffer.as_ref();
        let pseudo = pseudo_header(src, dst, data.len())?;
        // Adding the field's complement takes the field out of the sum.
        let sum = checksum::combine(&[pseudo, checksum::sum(data), u32::from(!self.checksum())]);
        Some(on_the_wire(checksum::finish(sum)))
    }
}

/// 0 on the wire means "not filled" and skips verification, so a computed 0
/// goes out as 0xffff, its ones'-complement twin (as UDP does); it verifies
/// the same.
fn on_the_wire(checksum: u16) -> u16 {
    match checksum {
        0 => 0xffff,
        c => c,
    }
}

/// The folded pseudo-header sum of a `len`-byte packet from `src` to `dst`
/// alone: what the checksum field holds when Linux leaves the checksum to
/// the NIC (CHECKSUM_PARTIAL) and the packet is captured before it is
/// completed. `None` for a mixed address pair.
pub fn partial_checksum(src: &IpAddr, dst: &IpAddr, len: usize) -> Option<u16> {
    // `fold` leaves at most 16 bits.
    pseudo_header(src, dst, len).map(|pseudo| checksum::fold(pseudo) as u16)
}

/// The partial sum of the TCP pseudo-header Linux uses for Homa, folded to
/// 16 bits, or `None` for a mixed address pair.
fn pseudo_header(src: &IpAddr, dst: &IpAddr, len: usize) -> Option<u32> {
    // A Homa packet fits in an IP datagram, so `len` fits in 32 bits.
    let len = len as u32;
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            Some(checksum::pseudo_header_v4(s, d, IpProtocol::Tcp, len))
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            Some(checksum::pseudo_header_v6(s, d, IpProtocol::Tcp, len))
        }
        _ => None,
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// DATA: the payload, everything after the 56-byte header (empty if the
    /// buffer is not longer).
    pub fn payload(&self) -> &'a [u8] {
        self.buffer.as_ref().get(field::PAYLOAD).unwrap_or(&[])
    }
}

/// Setters. Each panics if the buffer is too short for its field.
impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_u16(&mut self, f: Field, value: u16) {
        NetworkEndian::write_u16(&mut self.buffer.as_mut()[f], value)
    }
    fn set_u32(&mut self, f: Field, value: u32) {
        NetworkEndian::write_u32(&mut self.buffer.as_mut()[f], value)
    }
    fn set_u64(&mut self, f: Field, value: u64) {
        NetworkEndian::write_u64(&mut self.buffer.as_mut()[f], value)
    }

    /// Sets the source port.
    pub fn set_sport(&mut self, value: u16) {
        self.set_u16(field::SPORT, value)
    }
    /// Sets the destination port.
    pub fn set_dport(&mut self, value: u16) {
        self.set_u16(field::DPORT, value)
    }
    /// Sets `sequence`.
    pub fn set_sequence(&mut self, value: u32) {
        self.set_u32(field::SEQUENCE, value)
    }
    /// Sets the unused bytes 8..11.
    pub fn set_common_ack(&mut self, value: [u8; 3]) {
        self.buffer.as_mut()[field::COMMON_ACK].copy_from_slice(&value)
    }
    /// Sets the packet type.
    pub fn set_packet_type(&mut self, value: PacketType) {
        self.buffer.as_mut()[field::TYPE] = value.into()
    }
    /// Sets the header length in 32-bit words (the low nibble becomes 0).
    pub fn set_doff(&mut self, words: u8) {
        self.buffer.as_mut()[field::DOFF] = words << 4
    }
    /// Sets the TCP flags byte.
    pub fn set_flags(&mut self, value: u8) {
        self.buffer.as_mut()[field::FLAGS] = value
    }
    /// Sets the window field.
    pub fn set_window(&mut self, value: u16) {
        self.set_u16(field::WINDOW, value)
    }
    /// Sets the checksum field (see [`fill_checksum`](Self::fill_checksum)).
    pub fn set_checksum(&mut self, value: u16) {
        self.set_u16(field::CHECKSUM, value)
    }
    /// Sets the urgent field.
    pub fn set_urgent(&mut self, value: u16) {
        self.set_u16(field::URGENT, value)
    }
    /// Sets the sender's RPC id.
    pub fn set_sender_id(&mut self, value: u64) {
        self.set_u64(field::SENDER_ID, value)
    }

    /// DATA: sets the message length.
    pub fn set_message_length(&mut self, value: u32) {
        self.set_u32(field::MESSAGE_LENGTH, value)
    }
    /// DATA: sets `incoming`.
    pub fn set_incoming(&mut self, value: u32) {
        self.set_u32(field::INCOMING, value)
    }
    /// DATA: sets the piggy-backed ack's client id (0 = none).
    pub fn set_ack_client_id(&mut self, value: u64) {
        self.set_u64(field::ACK_CLIENT_ID, value)
    }
    /// DATA: sets the piggy-backed ack's server port.
    pub fn set_ack_server_port(&mut self, value: u16) {
        self.set_u16(field::ACK_SERVER_PORT, value)
    }
    /// DATA: sets the echoed cutoff version.
    pub fn set_cutoff_version(&mut self, value: u16) {
        self.set_u16(field::CUTOFF_VERSION, value)
    }
    /// DATA: sets the retransmit byte to 1 or 0.
    pub fn set_retransmit(&mut self, value: bool) {
        self.buffer.as_mut()[field::RETRANSMIT] = u8::from(value)
    }
    /// DATA: sets `seg.offset`.
    pub fn set_seg_offset(&mut self, value: u32) {
        self.set_u32(field::SEG_OFFSET, value)
    }
    /// DATA: the payload, everything after the 56-byte header.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }

    /// GRANT: sets the granted offset.
    pub fn set_grant_offset(&mut self, value: u32) {
        self.set_u32(field::GRANT_OFFSET, value)
    }
    /// GRANT: sets the priority.
    pub fn set_grant_priority(&mut self, value: u8) {
        self.buffer.as_mut()[field::GRANT_PRIORITY] = value
    }

    /// RESEND: sets the first byte to retransmit.
    pub fn set_resend_offset(&mut self, value: u32) {
        self.set_u32(field::RESEND_OFFSET, value)
    }
    /// RESEND: sets the length (or [`RESEND_ALL`]).
    pub fn set_resend_length(&mut self, value: u32) {
        self.set_u32(field::RESEND_LENGTH, value)
    }
    /// RESEND: sets the priority byte (needs a 37-byte buffer).
    pub fn set_resend_priority(&mut self, value: u8) {
        self.buffer.as_mut()[field::RESEND_PRIORITY] = value
    }

    /// CUTOFFS: sets the cutoff of priority `i`.
    ///
    /// # Panics
    /// If `i >= NUM_PRIORITIES`.
    pub fn set_unsched_cutoff(&mut self, i: usize, value: u32) {
        assert!(i < NUM_PRIORITIES, "cutoff index out of range");
        self.set_u32(field::UNSCHED_CUTOFF(i), value)
    }
    /// CUTOFFS: sets the version.
    pub fn set_cutoffs_version(&mut self, value: u16) {
        self.set_u16(field::CUTOFFS_VERSION, value)
    }

    /// ACK: sets the raw entry count.
    pub fn set_num_acks(&mut self, value: u16) {
        self.set_u16(field::NUM_ACKS, value)
    }
    /// ACK: sets entry `i`.
    ///
    /// # Panics
    /// If `i >= MAX_ACKS`.
    pub fn set_ack_entry(&mut self, i: usize, ack: Ack) {
        assert!(i < MAX_ACKS, "ack index out of range");
        self.set_u64(field::ACK_ENTRY_CLIENT_ID(i), ack.client_id);
        self.set_u16(field::ACK_ENTRY_SERVER_PORT(i), ack.server_port)
    }

    /// Computes and writes the TCP-style checksum over the whole buffer
    /// (see [`verify_checksum`](Self::verify_checksum)). For a mixed
    /// IPv4/IPv6 address pair the field is set to 0 ("not filled"), which
    /// every receiver accepts.
    pub fn fill_checksum(&mut self, src: &IpAddr, dst: &IpAddr) {
        self.set_checksum(0);
        self.write_checksum(src, dst, true);
    }

    /// Writes the folded pseudo-header sum alone ([`partial_checksum`]),
    /// for a device to complete: summing the whole buffer with it in place
    /// and writing the complement gives what
    /// [`fill_checksum`](Self::fill_checksum) writes. 0 for a mixed
    /// IPv4/IPv6 address pair.
    pub fn seed_checksum(&mut self, src: &IpAddr, dst: &IpAddr) {
        self.set_checksum(0);
        self.write_checksum(src, dst, false);
    }

    /// [`fill_checksum`](Self::fill_checksum) when `whole`, else
    /// [`seed_checksum`](Self::seed_checksum), into a field that is 0 (as
    /// [`Repr::emit`] leaves it): one body, so a program that sends both
    /// ways carries the pseudo-header code once.
    pub(crate) fn write_checksum(&mut self, src: &IpAddr, dst: &IpAddr, whole: bool) {
        let data = self.buffer.as_ref();
        if let Some(pseudo) = pseudo_header(src, dst, data.len()) {
            // Both sums are folded to 16 bits: the seed goes as it is, the
            // whole sum complemented.
            let sum = if whole {
                checksum::combine(&[pseudo, checksum::sum(data)])
            } else {
                pseudo
            } as u16;
            self.set_checksum(if whole { on_the_wire(!sum) } else { sum });
        }
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// An acknowledgement of one RPC: the server can free its state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Ack {
    /// The client's id of the RPC.
    pub client_id: u64,
    /// The server port the RPC was sent to.
    pub server_port: u16,
}

impl fmt::Display for Ack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.client_id, self.server_port)
    }
}

/// The DATA-specific header fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DataHeader {
    /// Total bytes in the message.
    pub message_length: u32,
    /// Bytes the sender will send without further grants.
    pub incoming: u32,
    /// A piggy-backed ack for the destination. On the wire client id 0 means
    /// none, so an `Ack` with client id 0 is emitted as (and parses back to)
    /// `None`.
    pub ack: Option<Ack>,
    /// The last CUTOFFS version received from the destination (0 = none).
    pub cutoff_version: u16,
    /// Sent in response to a RESEND.
    pub retransmit: bool,
    /// Message offset of the payload's first byte.
    pub offset: u32,
}

/// What a packet says, by type.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Kind<'a> {
    /// Message bytes.
    Data {
        /// The DATA header fields.
        header: DataHeader,
        /// The bytes at `header.offset`.
        payload: &'a [u8],
    },
    /// The sender may transmit below `offset`, at `priority`.
    Grant {
        /// Granted offset.
        offset: u32,
        /// Priority for scheduled DATA.
        priority: u8,
    },
    /// Retransmit `length` bytes from `offset`.
    Resend {
        /// First byte to retransmit.
        offset: u32,
        /// Bytes to retransmit, or [`RESEND_ALL`].
        length: u32,
        /// Priority of the retransmitted packets.
        priority: u8,
    },
    /// "I have no such RPC".
    RpcUnknown,
    /// "Alive, intentionally not sending".
    Busy,
    /// Unscheduled priority cutoffs.
    Cutoffs {
        /// Entry i = largest message length using priority i.
        unsched_cutoffs: [u32; NUM_PRIORITIES],
        /// Version, echoed in later DATA.
        version: u16,
    },
    /// Freeze the timetrace (debugging).
    Freeze,
    /// Please ACK.
    NeedAck,
    /// These RPCs (besides the one in `sender_id`) can be freed.
    Ack {
        /// The acknowledged RPCs.
        acks: heapless::Vec<Ack, MAX_ACKS>,
    },
}

impl Kind<'_> {
    /// The packet type this kind is sent as.
    pub const fn packet_type(&self) -> PacketType {
        match self {
            Kind::Data { .. } => PacketType::Data,
            Kind::Grant { .. } => PacketType::Grant,
            Kind::Resend { .. } => PacketType::Resend,
            Kind::RpcUnknown => PacketType::RpcUnknown,
            Kind::Busy => PacketType::Busy,
            Kind::Cutoffs { .. } => PacketType::Cutoffs,
            Kind::Freeze => PacketType::Freeze,
            Kind::NeedAck => PacketType::NeedAck,
            Kind::Ack { .. } => PacketType::Ack,
        }
    }
}

/// A parsed Homa packet.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Repr<'a> {
    /// Sender's port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// The RPC id as known to the sender.
    pub sender_id: u64,
    /// The type-specific content.
    pub kind: Kind<'a>,
}

impl<'a> Repr<'a> {
    /// Parses a packet by the receive rules of the module docs. Checks the
    /// length itself, so it never panics, even on an unchecked packet.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&'a T>) -> Result<Repr<'a>> {
        packet.check_len()?;
        // The fixed headers read through arrays of their length (which
        // `check_len` saw): the compiler then drops every field's check.
        let bytes = packet.buffer.as_ref();
        let common =
            Packet::new_unchecked(&bytes.first_chunk::<COMMON_HEADER_LEN>().ok_or(Error)?[..]);
        let kind = match common.packet_type() {
            PacketType::Data => {
                let data = Packet::new_unchecked(
                    &bytes.first_chunk::<DATA_HEADER_LEN>().ok_or(Error)?[..],
                );
                let ack = match data.ack_client_id() {
                    0 => None,
                    client_id => Some(Ack {
                        client_id,
                        server_port: data.ack_server_port(),
                    }),
                };
                Kind::Data {
                    header: DataHeader {
                        message_length: data.message_length(),
                        incoming: data.incoming(),
                        ack,
                        cutoff_version: data.cutoff_version(),
                        retransmit: data.retransmit(),
                        offset: data.offset(),
                    },
                    payload: packet.payload(),
                }
            }
            PacketType::Grant => Kind::Grant {
                offset: packet.grant_offset(),
                priority: packet.grant_priority(),
            },
            PacketType::Resend => Kind::Resend {
                offset: packet.resend_offset(),
                length: packet.resend_length(),
                priority: packet.resend_priority().unwrap_or(UPSTREAM_RESEND_PRIORITY),
            },
            PacketType::RpcUnknown => Kind::RpcUnknown,
            PacketType::Busy => Kind::Busy,
            PacketType::Cutoffs => {
                let mut unsched_cutoffs = [0; NUM_PRIORITIES];
                for (i, cutoff) in unsched_cutoffs.iter_mut().enumerate() {
                    *cutoff = packet.unsched_cutoff(i);
                }
                Kind::Cutoffs {
                    unsched_cutoffs,
                    version: packet.cutoffs_version(),
                }
            }
            PacketType::Freeze => Kind::Freeze,
            PacketType::NeedAck => Kind::NeedAck,
            PacketType::Ack => {
                let count = usize::from(packet.num_acks()).min(MAX_ACKS);
                let mut acks = heapless::Vec::new();
                for i in 0..count {
                    // Cannot fail: `count <= MAX_ACKS` is the capacity.
                    let _ = acks.push(packet.ack_entry(i));
                }
                Kind::Ack { acks }
            }
            // `check_len` rejected unknown types.
            PacketType::Unknown(_) => return Err(Error),
        };
        Ok(Repr {
            sport: common.sport(),
            dport: common.dport(),
            sender_id: common.sender_id(),
            kind,
        })
    }

    /// The packet type.
    pub const fn packet_type(&self) -> PacketType {
        self.kind.packet_type()
    }

    /// The header length as emitted (DATA: 56, without payload).
    pub const fn header_len(&self) -> usize {
        match self.kind {
            Kind::Data { .. } => DATA_HEADER_LEN,
            Kind::Grant { .. } => GRANT_HEADER_LEN,
            Kind::Resend { .. } => RESEND_HEADER_LEN,
            Kind::RpcUnknown => RPC_UNKNOWN_HEADER_LEN,
            Kind::Busy => BUSY_HEADER_LEN,
            Kind::Cutoffs { .. } => CUTOFFS_HEADER_LEN,
            Kind::Freeze => FREEZE_HEADER_LEN,
            Kind::NeedAck => NEED_ACK_HEADER_LEN,
            Kind::Ack { .. } => ACK_HEADER_LEN,
        }
    }

    /// The whole packet length: the header plus, for DATA, the payload.
    pub const fn buffer_len(&self) -> usize {
        match self.kind {
            Kind::Data { payload, .. } => DATA_HEADER_LEN + payload.len(),
            _ => self.header_len(),
        }
    }

    /// Writes the packet by the emit rules of the module docs: the header,
    /// and for DATA `payload` right after it. Bytes beyond
    /// [`buffer_len`](Self::buffer_len) are not touched, so an endpoint can
    /// emit a DATA header with an empty payload slice and copy the payload
    /// itself (the Homa packet length is then 56 + what it copied).
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        if let Kind::Data { header, payload } = &self.kind {
            // The most sent header is built in an array of its length,
            // where no field needs a check, and copied out with one.
            let mut bytes = [0u8; DATA_HEADER_LEN];
            let mut h = Packet::new_unchecked(&mut bytes[..]);
            let ack = header.ack.unwrap_or_default();
            h.set_sport(self.sport);
            h.set_dport(self.dport);
            h.set_sequence(header.offset);
            h.set_packet_type(PacketType::Data);
            h.set_doff(DOFF_DATA);
            h.set_sender_id(self.sender_id);
            h.set_message_length(header.message_length);
            h.set_incoming(header.incoming);
            h.set_ack_client_id(ack.client_id);
            h.set_ack_server_port(ack.server_port);
            h.set_cutoff_version(header.cutoff_version);
            h.set_retransmit(header.retransmit);
            h.set_seg_offset(header.offset);
            let buffer = packet.buffer.as_mut();
            assert!(
                buffer.len() >= DATA_HEADER_LEN + payload.len(),
                "buffer too short"
            );
            let (head, rest) = buffer.split_at_mut(DATA_HEADER_LEN);
            head.copy_from_slice(&bytes);
            rest[..payload.len()].copy_from_slice(payload);
            return;
        }
        // One check up front lets the compiler drop the per-field ones.
        let header_len = match self.kind {
            Kind::Data { .. } => DATA_HEADER_LEN,
            _ => COMMON_HEADER_LEN,
        };
        assert!(
            packet.buffer.as_ref().len() >= header_len,
            "buffer too short"
        );
        let sequence = match &self.kind {
            Kind::Data { header, .. } => header.offset,
            _ => 0,
        };
        let doff = match self.kind {
            Kind::Data { .. } => DOFF_DATA,
            _ => DOFF_CONTROL,
        };
        packet.set_sport(self.sport);
        packet.set_dport(self.dport);
        packet.set_sequence(sequence);
        packet.set_common_ack([0; 3]);
        packet.set_packet_type(self.packet_type());
        packet.set_doff(doff);
        packet.set_flags(0);
        packet.set_window(0);
        packet.set_checksum(0);
        packet.set_urgent(0);
        packet.set_sender_id(self.sender_id);
        match &self.kind {
            Kind::Data { header, payload } => {
                let ack = header.ack.unwrap_or_default();
                packet.set_message_length(header.message_length);
                packet.set_incoming(header.incoming);
                packet.set_ack_client_id(ack.client_id);
                packet.set_ack_server_port(ack.server_port);
                packet.set_cutoff_version(header.cutoff_version);
                packet.set_retransmit(header.retransmit);
                packet.buffer.as_mut()[field::PAD].fill(0);
                packet.set_seg_offset(header.offset);
                packet.payload_mut()[..payload.len()].copy_from_slice(payload);
            }
            Kind::Grant { offset, priority } => {
                packet.set_grant_offset(*offset);
                packet.set_grant_priority(*priority);
            }
            Kind::Resend {
                offset,
                length,
                priority,
            } => {
                packet.set_resend_offset(*offset);
                packet.set_resend_length(*length);
                packet.set_resend_priority(*priority);
            }
            Kind::RpcUnknown | Kind::Busy | Kind::Freeze | Kind::NeedAck => {}
            Kind::Cutoffs {
                unsched_cutoffs,
                version,
            } => {
                for (i, cutoff) in unsched_cutoffs.iter().enumerate() {
                    packet.set_unsched_cutoff(i, *cutoff);
                }
                packet.set_cutoffs_version(*version);
            }
            Kind::Ack { acks } => {
                // `acks.len() <= MAX_ACKS`, so the cast is exact.
                packet.set_num_acks(acks.len() as u16);
                for i in 0..MAX_ACKS {
                    packet.set_ack_entry(i, acks.get(i).copied().unwrap_or_default());
                }
            }
        }
    }

    /// The one-line form of [`Display`](fmt::Display) with addresses, and
    /// the IP priority when known:
    /// `DATA 10.0.0.1:32768 > 10.0.0.2:500 id 1234 off 1424 len 1424/100000 incoming 40000 prio 5`.
    /// IPv6 addresses are bracketed (`[fd00::1]:500`).
    pub fn display_with(&self, src: IpAddr, dst: IpAddr, prio: Option<u8>) -> DisplayWith<'_, 'a> {
        DisplayWith {
            repr: self,
            addrs: (src, dst),
            prio,
        }
    }

    fn write(
        &self,
        f: &mut fmt::Formatter<'_>,
        addrs: Option<(IpAddr, IpAddr)>,
        prio: Option<u8>,
    ) -> fmt::Result {
        write!(f, "{} ", self.packet_type())?;
        match addrs {
            Some((src, dst)) => write!(
                f,
                "{} > {}",
                SocketAddr::new(src, self.sport),
                SocketAddr::new(dst, self.dport)
            )?,
            None => write!(f, "{} > {}", self.sport, self.dport)?,
        }
        write!(f, " id {}", self.sender_id)?;
        match &self.kind {
            Kind::Data { header, payload } => {
                write!(
                    f,
                    " off {} len {}/{} incoming {}",
                    header.offset,
                    payload.len(),
                    header.message_length,
                    header.incoming
                )?;
                if let Some(ack) = header.ack {
                    write!(f, " ack {ack}")?;
                }
                if header.retransmit {
                    f.write_str(" retx")?;
                }
                if header.cutoff_version != 0 {
                    write!(f, " cv {}", header.cutoff_version)?;
                }
            }
            // The packet's own priority field is labelled apart from the
            // IP priority the frame travelled at (` prio P` at the end).
            Kind::Grant { offset, priority } => {
                write!(f, " offset {offset} sched-prio {priority}")?
            }
            Kind::Resend {
                offset,
                length,
                priority,
            } => {
                write!(f, " off {offset} len ")?;
                match *length {
                    RESEND_ALL => f.write_str("all")?,
                    length => write!(f, "{length}")?,
                }
                write!(f, " retx-prio {priority}")?;
            }
            Kind::RpcUnknown | Kind::Busy | Kind::Freeze | Kind::NeedAck => {}
            Kind::Cutoffs {
                unsched_cutoffs,
                version,
            } => write!(f, " cutoffs {unsched_cutoffs:?} version {version}")?,
            Kind::Ack { acks } => {
                f.write_str(" acks [")?;
                for (i, ack) in acks.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{ack}")?;
                }
                f.write_str("]")?;
            }
        }
        if let Some(prio) = prio {
            write!(f, " prio {prio}")?;
        }
        Ok(())
    }
}

/// One line: `DATA 32768 > 500 id 1234 off 1424 len 1424/100000 incoming 40000`
/// (len is payload length / message length; ` ack C:P`, ` retx` and ` cv V`
/// follow when present).
impl fmt::Display for Repr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, None, None)
    }
}

/// A packet's one-line form with addresses and priority, from
/// [`Repr::display_with`]: `Display`, and `defmt::Format` under feature
/// `defmt` (the same fields, formatted on the host, payload left out).
pub struct DisplayWith<'r, 'a> {
    repr: &'r Repr<'a>,
    addrs: (IpAddr, IpAddr),
    prio: Option<u8>,
}

impl fmt::Display for DisplayWith<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.repr.write(f, Some(self.addrs), self.prio)
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for DisplayWith<'_, '_> {
    fn format(&self, f: defmt::Formatter<'_>) {
        let r = self.repr;
        let (src, dst) = self.addrs;
        defmt::write!(
            f,
            "{} {}:{} > {}:{} id {}",
            r.packet_type(),
            src,
            r.sport,
            dst,
            r.dport,
            r.sender_id
        );
        match &r.kind {
            Kind::Data { header, payload } => {
                defmt::write!(
                    f,
                    " off {} len {}/{} incoming {}",
                    header.offset,
                    payload.len(),
                    header.message_length,
                    header.incoming
                );
                if let Some(ack) = header.ack {
                    defmt::write!(f, " ack {}:{}", ack.client_id, ack.server_port);
                }
                if header.retransmit {
                    defmt::write!(f, " retx");
                }
                if header.cutoff_version != 0 {
                    defmt::write!(f, " cv {}", header.cutoff_version);
                }
            }
            Kind::Grant { offset, priority } => {
                defmt::write!(f, " offset {} sched-prio {}", offset, priority)
            }
            Kind::Resend {
                offset,
                length,
                priority,
            } => defmt::write!(f, " off {} len {} retx-prio {}", offset, length, priority),
            Kind::RpcUnknown | Kind::Busy | Kind::Freeze | Kind::NeedAck => {}
            Kind::Cutoffs {
                unsched_cutoffs,
                version,
            } => defmt::write!(f, " cutoffs {} version {}", unsched_cutoffs, version),
            Kind::Ack { acks } => defmt::write!(f, " acks {}", acks.as_slice()),
        }
        if let Some(prio) = self.prio {
            defmt::write!(f, " prio {}", prio);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Ipv4Addr, Ipv6Addr};
    use proptest::prelude::*;

    // Vectors built by hand from the tables of docs/protocol.md 3.2-3.9.

    /// Canonical DATA: client 32768 -> server 500, id 1234, offset 1424 in
    /// both `sequence` and `seg.offset`, ack 1232:500, retransmit, cv 1.
    static DATA_BYTES: [u8; 64] = [
        0x80, 0x00, 0x01, 0xf4, // sport 32768, dport 500
        0x00, 0x00, 0x05, 0x90, // sequence 1424
        0x00, 0x00, 0x00, 0x10, // ack[3], type DATA
        0xe0, 0x00, 0x00, 0x00, // doff 14, flags, window
        0x00, 0x00, 0x00, 0x00, // checksum, urgent
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0xd2, // sender_id 1234
        0x00, 0x01, 0x86, 0xa0, // message_length 100000
        0x00, 0x00, 0x9c, 0x40, // incoming 40000
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0xd0, // ack.client_id 1232
        0x01, 0xf4, 0x00, 0x01, // ack.server_port 500, cutoff_version 1
        0x01, 0x00, 0x00, 0x00, // retransmit, pad
        0x00, 0x00, 0x05, 0x90, // seg.offset 1424
        b'p', b'a', b'y', b'l', b'o', b'a', b'd', b'!', // payload
    ];

    /// DATA as Linux main sends a first transmission: seg.offset is the
    /// sentinel and the offset (1424) is only in `sequence`; hijack markers
    /// (flags 6, urgent 0xb97d) and a TCP-style checksum for
    /// 10.0.0.1 -> 10.0.0.2 (0xeff8, computed independently).
    static DATA_LINUX_BYTES: [u8; 60] = [
        0x80, 0x01, 0x00, 0x63, // sport 32769, dport 99
        0x00, 0x00, 0x05, 0x90, // sequence 1424
        0x00, 0x00, 0x00, 0x10, // ack[3], type DATA
        0xe0, 0x06, 0x00, 0x00, // doff 14, flags SYN|RST, window
        0xef, 0xf8, 0xb9, 0x7d, // checksum, urgent
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, // sender_id 2
        0x00, 0x00, 0x0b, 0xb8, // message_length 3000
        0x00, 0x00, 0x0b, 0xb8, // incoming 3000
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // no ack
        0x00, 0x00, 0x00, 0x00, // ack.server_port, cutoff_version
        0x00, 0x00, 0x00, 0x00, // retransmit, pad
        0xff, 0xff, 0xff, 0xff, // seg.offset: "see sequence"
        b'a', b'b', b'c', b'd', // payload
    ];

    /// What this crate emits for the same packet.
    static DATA_LINUX_CANONICAL: [u8; 60] = [
        0x80, 0x01, 0x00, 0x63, // sport 32769, dport 99
        0x00, 0x00, 0x05, 0x90, // sequence 1424
        0x00, 0x00, 0x00, 0x10, // ack[3], type DATA
        0xe0, 0x00, 0x00, 0x00, // doff 14, flags, window
        0x00, 0x00, 0x00, 0x00, // checksum, urgent
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, // sender_id 2
        0x00, 0x00, 0x0b, 0xb8, // message_length 3000
        0x00, 0x00, 0x0b, 0xb8, // incoming 3000
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // no ack
        0x00, 0x00, 0x00, 0x00, // ack.server_port, cutoff_version
        0x00, 0x00, 0x00, 0x00, // retransmit, pad
        0x00, 0x00, 0x05, 0x90, // seg.offset 1424
        b'a', b'b', b'c', b'd', // payload
    ];

    static GRANT_BYTES: [u8; 33] = [
        0x01, 0xf4, 0x80, 0x00, // sport 500, dport 32768
        0x00, 0x00, 0x00, 0x00, // sequence
        0x00, 0x00, 0x00, 0x11, // ack[3], type GRANT
        0x50, 0x00, 0x00, 0x00, // doff 5, flags, window
        0x00, 0x00, 0x00, 0x00, // checksum, urgent
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0xd3, // sender_id 1235
        0x00, 0x03, 0x12, 0xd0, // offset 201424
        0x03, // priority 3
    ];

    static RESEND_BYTES: [u8; 37] = [
        0x01, 0xf4, 0x80, 0x00, // sport 500, dport 32768
        0x00, 0x00, 0x00, 0x00, // sequence
        0x00, 0x00, 0x00, 0x12, // ack[3], type RESEND
        0x50, 0x00, 0x00, 0x00, // doff 5, flags, window
        0x00, 0x00, 0x00, 0x00, // checksum, urgent
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0xd3, // sender_id 1235
        0x00, 0x00, 0x4e, 0x20, // offset 20000
        0x00, 0x00, 0x05, 0x90, // length 1424
        0x06, // priority 6
    ];

    /// An upstream (stripped) RESEND: 36 bytes, no priority, "resend all".
    static RESEND_UPSTREAM_BYTES: [u8; 36] = [
        0x01, 0xf4, 0x80, 0x00, // sport 500, dport 32768
        0x00, 0x00, 0x00, 0x00, // sequence
        0x00, 0x00, 0x00, 0x12, // ack[3], type RESEND
        0x50, 0x00, 0x00, 0x00, // doff 5, flags, window
        0x00, 0x00, 0x00, 0x00, // checksum, urgent
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0xd3, // sender_id 1235
        0x00, 0x00, 0x00, 0x00, // offset 0
        0xff, 0xff, 0xff, 0xff, // length: all
    ];

    /// The same RESEND as emitted: 37 bytes with the highest priority.
    static RESEND_UPSTREAM_CANONICAL: [u8; 37] = [
        0x01, 0xf4, 0x80, 0x00, // sport 500, dport 32768
        0x00, 0x00, 0x00, 0x00, // sequence
        0x00, 0x00, 0x00, 0x12, // ack[3], type RESEND
        0x50, 0x00, 0x00, 0x00, // doff 5, flags, window
        0x00, 0x00, 0x00, 0x00, // checksum, urgent
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0xd3, // sender_id 1235
        0x00, 0x00, 0x00, 0x00, // offset 0
        0xff, 0xff, 0xff, 0xff, // length: all
        0x07, // priority 7
    ];

    static RPC_UNKNOWN_BYTES: [u8; 28] = [
        0x01, 0xf4, 0x80, 0x00, // sport 500, dport 32768
        0x00, 0x00, 0x00, 0x00, // sequence
        0x00, 0x00, 0x00, 0x13, // ack[3], type RPC_UNKNOWN
        0x50, 0x00, 0x00, 0x00, // doff 5, flags, window
        0x00, 0x00, 0x00, 0x00, // checksum, urgent
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0xd3, // sender_id 1235
    ];

    static BUSY_BYTES: [u8; 28] = [
        0x01, 0xf4, 0x80, 0x00, // sport 500, dport 32768
        0x00, 0x00, 0x00, 0x00, // sequence
        0x00, 0x00, 0x00, 0x14, // ack[3], type BUSY
        0x50, 0x00, 0x00, 0x00, // doff 5, flags, window
        0x00, 0x00, 0x00, 0x00, // checksum, urgent
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0xd5, // sender_id 1237
    ];

    /// FREEZE with an id above i64::MAX (ids print unsigned).
    static FREEZE_BYTES: [u8; 28] = [
        0x80, 0x00, 0x01, 0xf4, // sport 32768, dport 500
        0x00, 0x00, 0x00, 0x00, // sequence
        0x00, 0x00, 0x00, 0x16, // ack[3], type FREEZE
        0x50, 0x00, 0x00, 0x00, // doff 5, flags, window
        0x00, 0x00, 0x00, 0x00, // checksum, urgent
        0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, // sender_id
    ];

    static NEED_ACK_BYTES: [u8; 28] = [
        0x01, 0xf4, 0x80, 0x00, // sport 500, dport 32768
        0x00, 0x00, 0x00, 0x00, // sequence
        0x00, 0x00, 0x00, 0x17, // ack[3], type NEED_ACK
        0x50, 0x00, 0x00, 0x00, // doff 5, flags, window
        0x00, 0x00, 0x00, 0x00, // checksum, urgent
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0xd3, // sender_id 1235
    ];

    static CUTOFFS_BYTES: [u8; 62] = [
        0x01, 0xf4, 0x80, 0x00, // sport 500, dport 32768
        0x00, 0x00, 0x00, 0x00, // sequence
        0x00, 0x00, 0x00, 0x15, // ack[3], type CUTOFFS
        0x50, 0x00, 0x00, 0x00, // doff 5, flags, window
        0x00, 0x00, 0x00, 0x00, // checksum, urgent
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0xd3, // sender_id 1235
        0x7f, 0xff, 0xff, 0xff, // cutoff 0: INT_MAX
        0x00, 0x00, 0x9c, 0x40, // cutoff 1: 40000
        0x00, 0x00, 0x4e, 0x20, // cutoff 2: 20000
        0x00, 0x00, 0x27, 0x10, // cutoff 3: 10000
        0x00, 0x00, 0x13, 0x88, // cutoff 4: 5000
        0x00, 0x00, 0x07, 0xd0, // cutoff 5: 2000
        0x00, 0x00, 0x03, 0xe8, // cutoff 6: 1000
        0x00, 0x00, 0x01, 0xf4, // cutoff 7: 500
        0x00, 0x03, // cutoff_version 3
    ];

    static ACK_BYTES: [u8; 80] = [
        0x80, 0x00, 0x01, 0xf4, // sport 32768, dport 500
        0x00, 0x00, 0x00, 0x00, // sequence
        0x00, 0x00, 0x00, 0x18, // ack[3], type ACK
        0x50, 0x00, 0x00, 0x00, // doff 5, flags, window
        0x00, 0x00, 0x00, 0x00, // checksum, urgent
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0xd2, // sender_id 1234
        0x00, 0x02, // num_acks 2
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0xd0, 0x01, 0xf4, // 1232:500
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0xce, 0x01, 0xf5, // 1230:501
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // unused
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // unused
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // unused
    ];

    /// An ACK claiming 7 entries: receivers use the 5 that exist.
    static ACK_CLAMPED_BYTES: [u8; 80] = [
        0x80, 0x00, 0x01, 0xf4, // sport 32768, dport 500
        0x00, 0x00, 0x00, 0x00, // sequence
        0x00, 0x00, 0x00, 0x18, // ack[3], type ACK
        0x50, 0x00, 0x00, 0x00, // doff 5, flags, window
        0x00, 0x00, 0x00, 0x00, // checksum, urgent
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0c, // sender_id 12
        0x00, 0x07, // num_acks 7
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x01, 0xf4, // 2:500
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x01, 0xf4, // 4:500
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x06, 0x01, 0xf5, // 6:501
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08, 0x01, 0xf6, // 8:502
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x01, 0xf7, // 10:503
    ];

    /// The same ACK as emitted: `num_acks` 5.
    static ACK_CLAMPED_CANONICAL: [u8; 80] = [
        0x80, 0x00, 0x01, 0xf4, // sport 32768, dport 500
        0x00, 0x00, 0x00, 0x00, // sequence
        0x00, 0x00, 0x00, 0x18, // ack[3], type ACK
        0x50, 0x00, 0x00, 0x00, // doff 5, flags, window
        0x00, 0x00, 0x00, 0x00, // checksum, urgent
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0c, // sender_id 12
        0x00, 0x05, // num_acks 5
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x01, 0xf4, // 2:500
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x01, 0xf4, // 4:500
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x06, 0x01, 0xf5, // 6:501
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08, 0x01, 0xf6, // 8:502
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x01, 0xf7, // 10:503
    ];

    fn acks(list: &[(u64, u16)]) -> heapless::Vec<Ack, MAX_ACKS> {
        list.iter()
            .map(|&(client_id, server_port)| Ack {
                client_id,
                server_port,
            })
            .collect()
    }

    fn data_repr() -> Repr<'static> {
        Repr {
            sport: 32768,
            dport: 500,
            sender_id: 1234,
            kind: Kind::Data {
                header: DataHeader {
                    message_length: 100_000,
                    incoming: 40_000,
                    ack: Some(Ack {
                        client_id: 1232,
                        server_port: 500,
                    }),
                    cutoff_version: 1,
                    retransmit: true,
                    offset: 1424,
                },
                payload: b"payload!",
            },
        }
    }

    fn data_linux_repr() -> Repr<'static> {
        Repr {
            sport: 32769,
            dport: 99,
            sender_id: 2,
            kind: Kind::Data {
                header: DataHeader {
                    message_length: 3000,
                    incoming: 3000,
                    ack: None,
                    cutoff_version: 0,
                    retransmit: false,
                    offset: 1424,
                },
                payload: b"abcd",
            },
        }
    }

    fn control(sport: u16, dport: u16, sender_id: u64, kind: Kind<'static>) -> Repr<'static> {
        Repr {
            sport,
            dport,
            sender_id,
            kind,
        }
    }

    fn grant_repr() -> Repr<'static> {
        let kind = Kind::Grant {
            offset: 201_424,
            priority: 3,
        };
        control(500, 32768, 1235, kind)
    }

    fn resend_repr() -> Repr<'static> {
        let kind = Kind::Resend {
            offset: 20_000,
            length: 1424,
            priority: 6,
        };
        control(500, 32768, 1235, kind)
    }

    fn resend_upstream_repr() -> Repr<'static> {
        let kind = Kind::Resend {
            offset: 0,
            length: RESEND_ALL,
            priority: 7,
        };
        control(500, 32768, 1235, kind)
    }

    fn rpc_unknown_repr() -> Repr<'static> {
        control(500, 32768, 1235, Kind::RpcUnknown)
    }

    fn busy_repr() -> Repr<'static> {
        control(500, 32768, 1237, Kind::Busy)
    }

    fn freeze_repr() -> Repr<'static> {
        control(32768, 500, 0x8877_6655_4433_2211, Kind::Freeze)
    }

    fn need_ack_repr() -> Repr<'static> {
        control(500, 32768, 1235, Kind::NeedAck)
    }

    fn cutoffs_repr() -> Repr<'static> {
        let kind = Kind::Cutoffs {
            unsched_cutoffs: [0x7fff_ffff, 40000, 20000, 10000, 5000, 2000, 1000, 500],
            version: 3,
        };
        control(500, 32768, 1235, kind)
    }

    fn ack_repr() -> Repr<'static> {
        let kind = Kind::Ack {
            acks: acks(&[(1232, 500), (1230, 501)]),
        };
        control(32768, 500, 1234, kind)
    }

    fn ack_clamped_repr() -> Repr<'static> {
        let kind = Kind::Ack {
            acks: acks(&[(2, 500), (4, 500), (6, 501), (8, 502), (10, 503)]),
        };
        control(32768, 500, 12, kind)
    }

    struct Vector {
        name: &'static str,
        /// The bytes as received.
        bytes: &'static [u8],
        /// What emitting the parsed repr gives.
        canonical: &'static [u8],
        repr: fn() -> Repr<'static>,
        display: &'static str,
    }

    const VECTORS: &[Vector] = &[
        Vector {
            name: "DATA",
            bytes: &DATA_BYTES,
            canonical: &DATA_BYTES,
            repr: data_repr,
            display: "DATA 32768 > 500 id 1234 off 1424 len 8/100000 incoming 40000 \
                      ack 1232:500 retx cv 1",
        },
        Vector {
            name: "DATA (Linux sentinel)",
            bytes: &DATA_LINUX_BYTES,
            canonical: &DATA_LINUX_CANONICAL,
            repr: data_linux_repr,
            display: "DATA 32769 > 99 id 2 off 1424 len 4/3000 incoming 3000",
        },
        Vector {
            name: "GRANT",
            bytes: &GRANT_BYTES,
            canonical: &GRANT_BYTES,
            repr: grant_repr,
            display: "GRANT 500 > 32768 id 1235 offset 201424 sched-prio 3",
        },
        Vector {
            name: "RESEND",
            bytes: &RESEND_BYTES,
            canonical: &RESEND_BYTES,
            repr: resend_repr,
            display: "RESEND 500 > 32768 id 1235 off 20000 len 1424 retx-prio 6",
        },
        Vector {
            name: "RESEND (upstream, 36 bytes)",
            bytes: &RESEND_UPSTREAM_BYTES,
            canonical: &RESEND_UPSTREAM_CANONICAL,
            repr: resend_upstream_repr,
            display: "RESEND 500 > 32768 id 1235 off 0 len all retx-prio 7",
        },
        Vector {
            name: "RPC_UNKNOWN",
            bytes: &RPC_UNKNOWN_BYTES,
            canonical: &RPC_UNKNOWN_BYTES,
            repr: rpc_unknown_repr,
            display: "RPC_UNKNOWN 500 > 32768 id 1235",
        },
        Vector {
            name: "BUSY",
            bytes: &BUSY_BYTES,
            canonical: &BUSY_BYTES,
            repr: busy_repr,
            display: "BUSY 500 > 32768 id 1237",
        },
        Vector {
            name: "FREEZE",
            bytes: &FREEZE_BYTES,
            canonical: &FREEZE_BYTES,
            repr: freeze_repr,
            display: "FREEZE 32768 > 500 id 9833440827789222417",
        },
        Vector {
            name: "NEED_ACK",
            bytes: &NEED_ACK_BYTES,
            canonical: &NEED_ACK_BYTES,
            repr: need_ack_repr,
            display: "NEED_ACK 500 > 32768 id 1235",
        },
        Vector {
            name: "CUTOFFS",
            bytes: &CUTOFFS_BYTES,
            canonical: &CUTOFFS_BYTES,
            repr: cutoffs_repr,
            display: "CUTOFFS 500 > 32768 id 1235 cutoffs [2147483647, 40000, 20000, \
                      10000, 5000, 2000, 1000, 500] version 3",
        },
        Vector {
            name: "ACK",
            bytes: &ACK_BYTES,
            canonical: &ACK_BYTES,
            repr: ack_repr,
            display: "ACK 32768 > 500 id 1234 acks [1232:500, 1230:501]",
        },
        Vector {
            name: "ACK (num_acks 7)",
            bytes: &ACK_CLAMPED_BYTES,
            canonical: &ACK_CLAMPED_CANONICAL,
            repr: ack_clamped_repr,
            display: "ACK 32768 > 500 id 12 acks [2:500, 4:500, 6:501, 8:502, 10:503]",
        },
    ];

    fn parse(bytes: &[u8]) -> Result<Repr<'_>> {
        Repr::parse(&Packet::new_checked(bytes)?)
    }

    fn emit(repr: &Repr<'_>) -> std::vec::Vec<u8> {
        let mut buffer = std::vec![0u8; repr.buffer_len()];
        repr.emit(&mut Packet::new_unchecked(&mut buffer[..]));
        buffer
    }

    #[test]
    fn vectors_cover_every_packet_type() {
        for code in 0x10..=0x18u8 {
            let ty = PacketType::from(code);
            assert!(
                VECTORS.iter().any(|v| (v.repr)().packet_type() == ty),
                "{ty}"
            );
        }
    }

    #[test]
    fn deconstruct_data() {
        let p = Packet::new_checked(&DATA_BYTES[..]).unwrap();
        assert_eq!(p.sport(), 32768);
        assert_eq!(p.dport(), 500);
        assert_eq!(p.sequence(), 1424);
        assert_eq!(p.common_ack(), [0; 3]);
        assert_eq!(p.packet_type(), PacketType::Data);
        assert_eq!(p.doff(), 14);
        assert_eq!(p.flags(), 0);
        assert_eq!(p.window(), 0);
        assert_eq!(p.checksum(), 0);
        assert_eq!(p.urgent(), 0);
        assert_eq!(p.sender_id(), 1234);
        assert_eq!(p.message_length(), 100_000);
        assert_eq!(p.incoming(), 40_000);
        assert_eq!(p.ack_client_id(), 1232);
        assert_eq!(p.ack_server_port(), 500);
        assert_eq!(p.cutoff_version(), 1);
        assert!(p.retransmit());
        assert_eq!(p.seg_offset(), 1424);
        assert_eq!(p.offset(), 1424);
        assert_eq!(p.payload(), b"payload!");
    }

    #[test]
    fn deconstruct_data_with_offset_sentinel() {
        let p = Packet::new_checked(&DATA_LINUX_BYTES[..]).unwrap();
        assert_eq!(p.sport(), 32769);
        assert_eq!(p.dport(), 99);
        assert_eq!(p.sequence(), 1424);
        assert_eq!(p.packet_type(), PacketType::Data);
        assert_eq!(p.doff(), 14);
        assert_eq!(p.flags(), 6);
        assert_eq!(p.checksum(), 0xeff8);
        assert_eq!(p.urgent(), 0xb97d);
        assert_eq!(p.sender_id(), 2);
        assert_eq!(p.message_length(), 3000);
        assert_eq!(p.incoming(), 3000);
        assert_eq!(p.ack_client_id(), 0);
        assert_eq!(p.ack_server_port(), 0);
        assert_eq!(p.cutoff_version(), 0);
        assert!(!p.retransmit());
        assert_eq!(p.seg_offset(), OFFSET_IN_SEQUENCE);
        assert_eq!(p.offset(), 1424);
        assert_eq!(p.payload(), b"abcd");
    }

    #[test]
    fn a_real_seg_offset_wins_over_sequence() {
        let mut bytes = DATA_BYTES;
        Packet::new_unchecked(&mut bytes[..]).set_sequence(7);
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.offset(), 1424);
    }

    #[test]
    fn deconstruct_grant() {
        let p = Packet::new_checked(&GRANT_BYTES[..]).unwrap();
        assert_eq!((p.sport(), p.dport(), p.sequence()), (500, 32768, 0));
        assert_eq!(p.packet_type(), PacketType::Grant);
        assert_eq!(p.doff(), 5);
        assert_eq!(p.sender_id(), 1235);
        assert_eq!(p.grant_offset(), 201_424);
        assert_eq!(p.grant_priority(), 3);
    }

    #[test]
    fn deconstruct_resend() {
        let p = Packet::new_checked(&RESEND_BYTES[..]).unwrap();
        assert_eq!((p.sport(), p.dport(), p.sequence()), (500, 32768, 0));
        assert_eq!(p.packet_type(), PacketType::Resend);
        assert_eq!(p.doff(), 5);
        assert_eq!(p.sender_id(), 1235);
        assert_eq!(p.resend_offset(), 20_000);
        assert_eq!(p.resend_length(), 1424);
        assert_eq!(p.resend_priority(), Some(6));
    }

    #[test]
    fn deconstruct_upstream_resend() {
        let p = Packet::new_checked(&RESEND_UPSTREAM_BYTES[..]).unwrap();
        assert_eq!(p.packet_type(), PacketType::Resend);
        assert_eq!(p.sender_id(), 1235);
        assert_eq!(p.resend_offset(), 0);
        assert_eq!(p.resend_length(), RESEND_ALL);
        assert_eq!(p.resend_priority(), None);
    }

    #[test]
    fn deconstruct_header_only_types() {
        let cases: [(&[u8], PacketType, u16, u16, u64); 4] = [
            (&RPC_UNKNOWN_BYTES, PacketType::RpcUnknown, 500, 32768, 1235),
            (&BUSY_BYTES, PacketType::Busy, 500, 32768, 1237),
            (
                &FREEZE_BYTES,
                PacketType::Freeze,
                32768,
                500,
                0x8877_6655_4433_2211,
            ),
            (&NEED_ACK_BYTES, PacketType::NeedAck, 500, 32768, 1235),
        ];
        for (bytes, ty, sport, dport, id) in cases {
            let p = Packet::new_checked(bytes).unwrap();
            assert_eq!(p.packet_type(), ty);
            assert_eq!((p.sport(), p.dport()), (sport, dport), "{ty}");
            assert_eq!(p.sequence(), 0, "{ty}");
            assert_eq!(p.doff(), 5, "{ty}");
            assert_eq!(p.sender_id(), id, "{ty}");
        }
    }

    #[test]
    fn deconstruct_cutoffs() {
        let p = Packet::new_checked(&CUTOFFS_BYTES[..]).unwrap();
        assert_eq!(p.packet_type(), PacketType::Cutoffs);
        assert_eq!(p.sender_id(), 1235);
        let cutoffs: std::vec::Vec<u32> =
            (0..NUM_PRIORITIES).map(|i| p.unsched_cutoff(i)).collect();
        assert_eq!(
            cutoffs,
            [0x7fff_ffff, 40000, 20000, 10000, 5000, 2000, 1000, 500]
        );
        assert_eq!(p.cutoffs_version(), 3);
    }

    #[test]
    fn deconstruct_ack() {
        let p = Packet::new_checked(&ACK_BYTES[..]).unwrap();
        assert_eq!(p.packet_type(), PacketType::Ack);
        assert_eq!((p.sport(), p.dport()), (32768, 500));
        assert_eq!(p.sender_id(), 1234);
        assert_eq!(p.num_acks(), 2);
        let entries: std::vec::Vec<Ack> = (0..MAX_ACKS).map(|i| p.ack_entry(i)).collect();
        assert_eq!(
            &entries[..],
            &acks(&[(1232, 500), (1230, 501), (0, 0), (0, 0), (0, 0)])[..]
        );
    }

    #[test]
    fn deconstruct_ack_with_too_many_entries() {
        let p = Packet::new_checked(&ACK_CLAMPED_BYTES[..]).unwrap();
        assert_eq!(p.num_acks(), 7);
        assert_eq!(
            p.ack_entry(4),
            Ack {
                client_id: 10,
                server_port: 503
            }
        );
    }

    #[test]
    fn parse_gives_the_exact_repr() {
        for v in VECTORS {
            assert_eq!(parse(v.bytes), Ok((v.repr)()), "{}", v.name);
        }
    }

    #[test]
    fn emit_gives_the_exact_bytes() {
        for v in VECTORS {
            let repr = (v.repr)();
            assert_eq!(repr.buffer_len(), v.canonical.len(), "{}", v.name);
            assert_eq!(&emit(&repr)[..], v.canonical, "{}", v.name);
            // Every byte is written: stale contents don't leak.
            let mut buffer = std::vec![0xa5u8; repr.buffer_len()];
            repr.emit(&mut Packet::new_unchecked(&mut buffer[..]));
            assert_eq!(&buffer[..], v.canonical, "{} over a dirty buffer", v.name);
        }
    }

    #[test]
    fn header_len_is_the_type_header() {
        for v in VECTORS {
            let repr = (v.repr)();
            assert_eq!(
                Some(repr.header_len()),
                repr.packet_type().header_len(),
                "{}",
                v.name
            );
        }
        assert_eq!(data_repr().header_len(), 56);
        assert_eq!(data_repr().buffer_len(), 64);
    }

    #[test]
    fn header_lengths_match_the_spec() {
        assert_eq!(COMMON_HEADER_LEN, 28);
        assert_eq!(DATA_HEADER_LEN, 56);
        assert_eq!(GRANT_HEADER_LEN, 33);
        assert_eq!(RESEND_HEADER_LEN, 37);
        assert_eq!(RESEND_UPSTREAM_HEADER_LEN, 36);
        assert_eq!(RPC_UNKNOWN_HEADER_LEN, 28);
        assert_eq!(BUSY_HEADER_LEN, 28);
        assert_eq!(FREEZE_HEADER_LEN, 28);
        assert_eq!(NEED_ACK_HEADER_LEN, 28);
        assert_eq!(CUTOFFS_HEADER_LEN, 62);
        assert_eq!(ACK_HEADER_LEN, 80);
        assert_eq!(PacketType::Unknown(0x19).header_len(), None);
    }

    #[test]
    fn every_truncation_below_the_type_header_is_rejected() {
        for v in VECTORS {
            let ty = Packet::new_unchecked(v.bytes).packet_type();
            let min = match ty {
                PacketType::Resend => 36,
                _ => ty.header_len().unwrap(),
            };
            for n in 0..min {
                assert_eq!(parse(&v.bytes[..n]), Err(Error), "{} cut to {n}", v.name);
                // `parse` checks the length itself, too.
                let unchecked = Packet::new_unchecked(&v.bytes[..n]);
                assert_eq!(Repr::parse(&unchecked), Err(Error), "{} cut to {n}", v.name);
            }
        }
    }

    #[test]
    fn a_cut_data_payload_parses_as_a_shorter_payload() {
        for v in &VECTORS[..2] {
            for n in DATA_HEADER_LEN..v.bytes.len() {
                match parse(&v.bytes[..n]) {
                    Ok(Repr {
                        kind: Kind::Data { payload, .. },
                        ..
                    }) => {
                        assert_eq!(payload, &v.bytes[DATA_HEADER_LEN..n])
                    }
                    other => panic!("{} cut to {n}: {other:?}", v.name),
                }
            }
        }
    }

    #[test]
    fn a_resend_cut_to_36_bytes_gets_the_highest_priority() {
        let repr = parse(&RESEND_BYTES[..36]).unwrap();
        let Kind::Resend { priority, .. } = repr.kind else {
            panic!("{repr:?}")
        };
        assert_eq!(priority, 7);
    }

    #[test]
    fn types_outside_data_to_ack_are_rejected() {
        for code in [0x00, 0x0f, 0x19, 0xff] {
            let mut bytes = [0u8; 100];
            bytes[..80].copy_from_slice(&ACK_BYTES);
            bytes[11] = code;
            assert_eq!(
                Packet::new_checked(&bytes[..]),
                Err(Error),
                "type {code:#x}"
            );
        }
    }

    #[test]
    fn ignored_fields_do_not_change_the_repr() {
        for v in VECTORS {
            let mut bytes = v.bytes.to_vec();
            let mut p = Packet::new_unchecked(&mut bytes[..]);
            p.set_flags(6);
            p.set_urgent(0xb97d);
            p.set_window(0x1234);
            p.set_common_ack([1, 2, 3]);
            p.set_checksum(0xbeef);
            p.set_doff(13);
            assert_eq!(parse(&bytes), Ok((v.repr)()), "{}", v.name);
        }
    }

    #[test]
    fn data_pad_is_ignored() {
        let mut bytes = DATA_BYTES;
        bytes[49..52].copy_from_slice(&[9, 9, 9]);
        assert_eq!(parse(&bytes), Ok(data_repr()));
    }

    #[test]
    fn data_inconsistent_with_its_message_length_still_parses() {
        let mut bytes = DATA_BYTES;
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.set_message_length(MAX_MESSAGE_LENGTH + 1);
        p.set_seg_offset(MAX_MESSAGE_LENGTH + 1000);
        let repr = parse(&bytes).unwrap();
        let Kind::Data { header, .. } = repr.kind else {
            panic!("{repr:?}")
        };
        assert_eq!(header.offset, MAX_MESSAGE_LENGTH + 1000);
        assert_eq!(header.message_length, MAX_MESSAGE_LENGTH + 1);
    }

    #[test]
    fn construct_data_with_setters() {
        let mut bytes = [0xa5u8; 64];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.set_sport(32768);
        p.set_dport(500);
        p.set_sequence(1424);
        p.set_common_ack([0; 3]);
        p.set_packet_type(PacketType::Data);
        p.set_doff(14);
        p.set_flags(0);
        p.set_window(0);
        p.set_checksum(0);
        p.set_urgent(0);
        p.set_sender_id(1234);
        p.set_message_length(100_000);
        p.set_incoming(40_000);
        p.set_ack_client_id(1232);
        p.set_ack_server_port(500);
        p.set_cutoff_version(1);
        p.set_retransmit(true);
        p.buffer[49..52].fill(0);
        p.set_seg_offset(1424);
        p.payload_mut().copy_from_slice(b"payload!");
        assert_eq!(bytes, DATA_BYTES);
    }

    #[test]
    fn construct_control_types_with_setters() {
        let mut grant = [0u8; 33];
        let mut p = Packet::new_unchecked(&mut grant[..]);
        p.set_sport(500);
        p.set_dport(32768);
        p.set_packet_type(PacketType::Grant);
        p.set_doff(5);
        p.set_sender_id(1235);
        p.set_grant_offset(201_424);
        p.set_grant_priority(3);
        assert_eq!(grant, GRANT_BYTES);

        let mut resend = GRANT_BYTES.to_vec();
        resend.extend_from_slice(&[0; 4]);
        let mut p = Packet::new_unchecked(&mut resend[..]);
        p.set_packet_type(PacketType::Resend);
        p.set_resend_offset(20_000);
        p.set_resend_length(1424);
        p.set_resend_priority(6);
        assert_eq!(resend, RESEND_BYTES);

        let mut cutoffs = [0u8; 62];
        cutoffs[..28].copy_from_slice(&GRANT_BYTES[..28]);
        let mut p = Packet::new_unchecked(&mut cutoffs[..]);
        p.set_packet_type(PacketType::Cutoffs);
        for (i, c) in [0x7fff_ffff, 40000, 20000, 10000, 5000, 2000, 1000, 500]
            .into_iter()
            .enumerate()
        {
            p.set_unsched_cutoff(i, c);
        }
        p.set_cutoffs_version(3);
        assert_eq!(cutoffs, CUTOFFS_BYTES);

        let mut ack = [0u8; 80];
        ack[..28].copy_from_slice(&DATA_BYTES[..28]);
        let mut p = Packet::new_unchecked(&mut ack[..]);
        p.set_sequence(0);
        p.set_packet_type(PacketType::Ack);
        p.set_doff(5);
        p.set_num_acks(2);
        p.set_ack_entry(
            0,
            Ack {
                client_id: 1232,
                server_port: 500,
            },
        );
        p.set_ack_entry(
            1,
            Ack {
                client_id: 1230,
                server_port: 501,
            },
        );
        assert_eq!(ack, ACK_BYTES);
    }

    #[test]
    fn getters_of_other_types_do_not_panic_on_short_packets() {
        let p = Packet::new_checked(&BUSY_BYTES[..]).unwrap();
        assert_eq!(p.message_length(), 0);
        assert_eq!(p.seg_offset(), 0);
        assert_eq!(p.payload(), &[] as &[u8]);
        assert_eq!(p.grant_offset(), 0);
        assert_eq!(p.grant_priority(), 0);
        assert_eq!(p.resend_priority(), None);
        assert_eq!(p.unsched_cutoff(7), 0);
        assert_eq!(p.cutoffs_version(), 0);
        assert_eq!(p.num_acks(), 0);
        assert_eq!(p.ack_entry(4), Ack::default());
        // Indices past the arrays read nothing, even when bytes follow.
        let mut long = [0xffu8; 200];
        long[..80].copy_from_slice(&ACK_CLAMPED_BYTES);
        let p = Packet::new_checked(&long[..]).unwrap();
        assert_eq!(p.ack_entry(MAX_ACKS), Ack::default());
        assert_eq!(p.unsched_cutoff(NUM_PRIORITIES), 0);
    }

    #[test]
    fn emit_does_not_touch_bytes_past_the_packet() {
        let mut repr = data_linux_repr();
        let mut buffer = [0xaau8; 100];
        repr.emit(&mut Packet::new_unchecked(&mut buffer[..]));
        assert_eq!(&buffer[..60], &DATA_LINUX_CANONICAL[..]);
        assert!(buffer[60..].iter().all(|&b| b == 0xaa));

        // A header with an empty payload slice: the caller writes the payload.
        if let Kind::Data { payload, .. } = &mut repr.kind {
            *payload = &[];
        }
        let mut buffer = [0xaau8; 100];
        repr.emit(&mut Packet::new_unchecked(&mut buffer[..]));
        assert_eq!(&buffer[..56], &DATA_LINUX_CANONICAL[..56]);
        assert!(buffer[56..].iter().all(|&b| b == 0xaa));
    }

    #[test]
    fn an_ack_with_client_id_zero_is_no_ack() {
        let mut repr = data_repr();
        if let Kind::Data { header, .. } = &mut repr.kind {
            header.ack = Some(Ack {
                client_id: 0,
                server_port: 500,
            });
        }
        let bytes = emit(&repr);
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!((p.ack_client_id(), p.ack_server_port()), (0, 500));
        let Kind::Data { header, .. } = parse(&bytes).unwrap().kind else {
            unreachable!()
        };
        assert_eq!(header.ack, None);
    }

    #[test]
    fn display_is_one_line_per_type() {
        for v in VECTORS {
            assert_eq!(std::format!("{}", (v.repr)()), v.display, "{}", v.name);
        }
    }

    #[test]
    fn display_with_addresses_and_priority() {
        let repr = Repr {
            kind: Kind::Data {
                header: DataHeader {
                    message_length: 100_000,
                    incoming: 40_000,
                    offset: 1424,
                    ..DataHeader::default()
                },
                payload: &[0; 1424],
            },
            ..data_repr()
        };
        let v4 = |last| IpAddr::V4(Ipv4Addr::new(10, 0, 0, last));
        assert_eq!(
            std::format!("{}", repr.display_with(v4(1), v4(2), Some(5))),
            "DATA 10.0.0.1:32768 > 10.0.0.2:500 id 1234 off 1424 len 1424/100000 incoming 40000 prio 5"
        );
        assert_eq!(
            std::format!("{repr}"),
            "DATA 32768 > 500 id 1234 off 1424 len 1424/100000 incoming 40000"
        );
        let v6 = |last| IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, last));
        assert_eq!(
            std::format!("{}", busy_repr().display_with(v6(1), v6(2), None)),
            "BUSY [fd00::1]:500 > [fd00::2]:32768 id 1237"
        );
    }

    #[test]
    fn packet_type_names() {
        let names: std::vec::Vec<std::string::String> = (0x10..=0x19u8)
            .map(|c| std::format!("{}", PacketType::from(c)))
            .collect();
        assert_eq!(
            names,
            [
                "DATA",
                "GRANT",
                "RESEND",
                "RPC_UNKNOWN",
                "BUSY",
                "CUTOFFS",
                "FREEZE",
                "NEED_ACK",
                "ACK",
                "0x19"
            ]
        );
    }

    const SRC4: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    const DST4: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
    const SRC6: IpAddr = IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1));
    const DST6: IpAddr = IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2));

    #[test]
    fn a_linux_checksum_verifies() {
        let p = Packet::new_checked(&DATA_LINUX_BYTES[..]).unwrap();
        assert!(p.verify_checksum(&SRC4, &DST4));
        assert!(!p.verify_checksum(&DST4, &IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3))));
    }

    #[test]
    fn fill_checksum_matches_linux() {
        let mut bytes = DATA_LINUX_BYTES;
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.set_checksum(0x1234);
        p.fill_checksum(&SRC4, &DST4);
        assert_eq!(p.checksum(), 0xeff8);
    }

    #[test]
    fn a_filled_checksum_verifies_and_any_flipped_bit_fails() {
        for (src, dst) in [(SRC4, DST4), (SRC6, DST6)] {
            let mut bytes = emit(&data_repr());
            Packet::new_unchecked(&mut bytes[..]).fill_checksum(&src, &dst);
            assert!(Packet::new_checked(&bytes[..])
                .unwrap()
                .verify_checksum(&src, &dst));
            for bit in 0..bytes.len() * 8 {
                let mut flipped = bytes.clone();
                flipped[bit / 8] ^= 1 << (bit % 8);
                let p = Packet::new_unchecked(&flipped[..]);
                assert!(!p.verify_checksum(&src, &dst), "{src}: bit {bit}");
            }
        }
    }

    #[test]
    fn the_expected_checksum_ignores_the_field() {
        // Linux's packet carries 0xeff8; any other field value expects it too.
        for field in [0xeff8, 0, 0x1234, 0xffff] {
            let mut bytes = DATA_LINUX_BYTES;
            Packet::new_unchecked(&mut bytes[..]).set_checksum(field);
            let p = Packet::new_unchecked(&bytes[..]);
            assert_eq!(
                p.expected_checksum(&SRC4, &DST4),
                Some(0xeff8),
                "{field:#x}"
            );
            assert_eq!(p.expected_checksum(&SRC4, &DST6), None);
        }
    }

    #[test]
    fn the_partial_checksum_is_the_folded_pseudo_header() {
        let len = DATA_LINUX_BYTES.len();
        let IpAddr::V4(s) = SRC4 else { unreachable!() };
        let IpAddr::V4(d) = DST4 else { unreachable!() };
        let pseudo = checksum::pseudo_header_v4(&s, &d, IpProtocol::Tcp, len as u32);
        assert_eq!(
            partial_checksum(&SRC4, &DST4, len),
            Some(checksum::fold(pseudo) as u16)
        );
        assert_eq!(partial_checksum(&SRC6, &DST4, len), None);
    }

    #[test]
    fn a_seed_completed_by_start_and_offset_is_the_filled_checksum() {
        // What a device that offloads the checksum does with the seed in
        // place: the ones'-complement sum of the whole Homa packet (word by
        // word, RFC 1071), complemented, written at offset 16.
        fn complete(bytes: &mut [u8]) {
            let mut sum: u32 = bytes
                .chunks(2)
                .map(|w| u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)])))
                .sum();
            while sum > 0xffff {
                sum = (sum & 0xffff) + (sum >> 16);
            }
            bytes[16..18].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        }
        let mut linux = DATA_LINUX_BYTES;
        Packet::new_unchecked(&mut linux[..]).seed_checksum(&SRC4, &DST4);
        complete(&mut linux);
        assert_eq!(linux, DATA_LINUX_BYTES, "Linux's own checksum, 0xeff8");
        for (src, dst) in [(SRC4, DST4), (SRC6, DST6)] {
            let mut filled = emit(&data_repr());
            Packet::new_unchecked(&mut filled[..]).fill_checksum(&src, &dst);
            let mut seeded = emit(&data_repr());
            let mut p = Packet::new_unchecked(&mut seeded[..]);
            p.seed_checksum(&src, &dst);
            assert_eq!(
                Some(p.checksum()),
                partial_checksum(&src, &dst, seeded.len())
            );
            complete(&mut seeded);
            assert_eq!(seeded, filled, "{src}");
        }
        let mut mixed = emit(&data_repr());
        Packet::new_unchecked(&mut mixed[..]).seed_checksum(&SRC6, &DST4);
        assert_eq!(Packet::new_unchecked(&mixed[..]).checksum(), 0);
    }

    #[test]
    fn a_zero_checksum_field_verifies() {
        let p = Packet::new_checked(&DATA_BYTES[..]).unwrap();
        assert_eq!(p.checksum(), 0);
        assert!(p.verify_checksum(&SRC4, &DST4));
        assert!(p.verify_checksum(&SRC6, &DST6));
    }

    #[test]
    fn mixed_address_families_neither_verify_nor_fill() {
        let mut bytes = DATA_LINUX_BYTES;
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        assert!(!p.verify_checksum(&SRC4, &DST6));
        p.fill_checksum(&SRC6, &DST4);
        assert_eq!(p.checksum(), 0);
        assert!(!p.verify_checksum(&SRC6, &DST4));
    }

    /// Arbitrary reprs; DATA payloads are attached by the test (they borrow).
    fn arb_repr() -> impl Strategy<Value = Repr<'static>> {
        let ack = (any::<u64>(), any::<u16>()).prop_map(|(client_id, server_port)| Ack {
            client_id,
            server_port,
        });
        let data_ack = (1..=u64::MAX, any::<u16>()).prop_map(|(client_id, server_port)| Ack {
            client_id,
            server_port,
        });
        let data = (
            any::<u32>(),
            any::<u32>(),
            proptest::option::of(data_ack),
            any::<u16>(),
            any::<bool>(),
            any::<u32>(),
        )
            .prop_map(
                |(message_length, incoming, ack, cutoff_version, retransmit, offset)| Kind::Data {
                    header: DataHeader {
                        message_length,
                        incoming,
                        ack,
                        cutoff_version,
                        retransmit,
                        offset,
                    },
                    payload: &[],
                },
            );
        let kind = prop_oneof![
            data,
            (any::<u32>(), any::<u8>())
                .prop_map(|(offset, priority)| Kind::Grant { offset, priority }),
            (any::<u32>(), any::<u32>(), any::<u8>()).prop_map(|(offset, length, priority)| {
                Kind::Resend {
                    offset,
                    length,
                    priority,
                }
            }),
            Just(Kind::RpcUnknown),
            Just(Kind::Busy),
            (proptest::array::uniform8(any::<u32>()), any::<u16>()).prop_map(
                |(unsched_cutoffs, version)| Kind::Cutoffs {
                    unsched_cutoffs,
                    version
                }
            ),
            Just(Kind::Freeze),
            Just(Kind::NeedAck),
            proptest::collection::vec(ack, 0..=MAX_ACKS).prop_map(|list| Kind::Ack {
                acks: list.into_iter().collect()
            }),
        ];
        (any::<u16>(), any::<u16>(), any::<u64>(), kind).prop_map(
            |(sport, dport, sender_id, kind)| Repr {
                sport,
                dport,
                sender_id,
                kind,
            },
        )
    }

    /// Calls every getter and formatter; the point is that none panics.
    fn touch_everything<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) {
        let _ = (
            p.sport(),
            p.dport(),
            p.sequence(),
            p.common_ack(),
            p.packet_type(),
        );
        let _ = (
            p.doff(),
            p.flags(),
            p.window(),
            p.checksum(),
            p.urgent(),
            p.sender_id(),
        );
        let _ = (
            p.message_length(),
            p.incoming(),
            p.ack_client_id(),
            p.ack_server_port(),
        );
        let _ = (
            p.cutoff_version(),
            p.retransmit(),
            p.seg_offset(),
            p.offset(),
            p.payload(),
        );
        let _ = (p.grant_offset(), p.grant_priority());
        let _ = (p.resend_offset(), p.resend_length(), p.resend_priority());
        let _ = (p.cutoffs_version(), p.num_acks());
        for i in 0..=NUM_PRIORITIES {
            let _ = p.unsched_cutoff(i);
        }
        for i in 0..=MAX_ACKS {
            let _ = p.ack_entry(i);
        }
        let _ = p.verify_checksum(&SRC4, &DST4);
        let _ = p.verify_checksum(&SRC6, &DST6);
        let _ = std::format!("{}", p.packet_type());
    }

    proptest! {
        #[test]
        fn parse_of_emit_is_identity(repr in arb_repr(), payload in proptest::collection::vec(any::<u8>(), 0..100)) {
            let mut repr = repr;
            if let Kind::Data { payload: p, .. } = &mut repr.kind {
                *p = &payload[..];
            }
            let bytes = emit(&repr);
            prop_assert_eq!(bytes.len(), repr.buffer_len());
            prop_assert_eq!(parse(&bytes), Ok(repr));
        }

        #[test]
        fn arbitrary_bytes_never_panic(
            mut bytes in proptest::collection::vec(any::<u8>(), 0..120),
            ty in proptest::option::of(0x10..=0x18u8),
        ) {
            // Mostly known types, so parsing gets past the type check.
            if let (Some(ty), Some(b)) = (ty, bytes.get_mut(field::TYPE)) {
                *b = ty;
            }
            touch_everything(&Packet::new_unchecked(&bytes[..]));
            if let Ok(p) = Packet::new_checked(&bytes[..]) {
                touch_everything(&p);
                let repr = Repr::parse(&p);
                prop_assert!(repr.is_ok());
                if let Ok(repr) = repr {
                    let _ = std::format!("{repr}");
                    let _ = std::format!("{}", repr.display_with(SRC6, DST6, Some(7)));
                    // A repr is never longer than its packet (but for the
                    // priority byte of a 36-byte RESEND), and re-emits.
                    prop_assert!(repr.buffer_len() <= bytes.len() + 1);
                    let again = emit(&repr);
                    prop_assert_eq!(parse(&again), Ok(repr));
                }
            }
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "searches 65536 ids: too slow under Miri")]
    fn a_computed_zero_checksum_is_sent_as_ffff_and_verifies() {
        let src = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        let dst = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
        let mut buf = [0u8; COMMON_HEADER_LEN];
        buf[11] = 0x14; // BUSY
                        // Find the sender id whose checksum comes out as zero.
        let id = (0..=u64::from(u16::MAX))
            .find(|&id| {
                let mut p = Packet::new_unchecked(&mut buf[..]);
                p.set_sender_id(id);
                p.set_checksum(0);
                let data = p.as_ref();
                let sum = checksum::combine(&[
                    pseudo_header(&src, &dst, data.len()).unwrap(),
                    checksum::sum(data),
                ]);
                checksum::finish(sum) == 0
            })
            .expect("some id gives a zero checksum");
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_sender_id(id);
        p.fill_checksum(&src, &dst);
        assert_eq!(p.checksum(), 0xffff);
        assert!(p.verify_checksum(&src, &dst));
        // A flipped bit is caught, although the checksum was "zero".
        let mut q = Packet::new_unchecked(&mut buf[..]);
        q.set_sender_id(id ^ 1);
        assert!(!q.verify_checksum(&src, &dst));
    }
}
