//! Homa packets (era D, IP protocol 146): every packet type of the Linux
//! kernel module, byte for byte (protocol.md section 3).
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

    /// Checks the TCP-style checksum (protocol.md 2.3): a pseudo-header with
    /// protocol 6 (TCP) and the Homa length, over the whole buffer.
    ///
    /// True when the field is 0 (not filled; upstream and older builds send
    /// that). False for a mixed IPv4/IPv6 address pair, which cannot be a
    /// real packet. Always true under `cfg(fuzzing)`. Linux never verifies,
    /// so a stack should count failures rather than drop.
    #[allow(unexpected_cfgs)]
    pub fn verify_checksum(&self, src: &IpAddr, dst: &IpAddr) -> bool {
        if cfg!(fuzzing) {
            return true;
        }
        let data = self.buffer.as_ref();
        let Some(pseudo) = pseudo_header(src, dst, data.len()) else {
            return false;
        };
        if self.checksum() == 0 {
            return true;
        }
        checksum::combine(&[pseudo, checksum::sum(data)]) == 0xffff
    }
}

/// The partial sum of the TCP pseudo-header Linux uses for Homa, or `None`
/// for a mixed address pair.
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
        let data = self.buffer.as_ref();
        if let Some(pseudo) = pseudo_header(src, dst, data.len()) {
            let sum = checksum::combine(&[pseudo, checksum::sum(data)]);
            self.set_checksum(checksum::finish(sum));
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
        let kind = match packet.packet_type() {
            PacketType::Data => {
                let ack = match packet.ack_client_id() {
                    0 => None,
                    client_id => Some(Ack {
                        client_id,
                        server_port: packet.ack_server_port(),
                    }),
                };
                Kind::Data {
                    header: DataHeader {
                        message_length: packet.message_length(),
                        incoming: packet.incoming(),
                        ack,
                        cutoff_version: packet.cutoff_version(),
                        retransmit: packet.retransmit(),
                        offset: packet.offset(),
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
            sport: packet.sport(),
            dport: packet.dport(),
            sender_id: packet.sender_id(),
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
    pub fn display_with(
        &self,
        src: IpAddr,
        dst: IpAddr,
        prio: Option<u8>,
    ) -> impl fmt::Display + '_ {
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
            Kind::Grant { offset, priority } => write!(f, " offset {offset} prio {priority}")?,
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
                write!(f, " prio {priority}")?;
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

struct DisplayWith<'r, 'a> {
    repr: &'r Repr<'a>,
    addrs: (IpAddr, IpAddr),
    prio: Option<u8>,
}

impl fmt::Display for DisplayWith<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.repr.write(f, Some(self.addrs), self.prio)
    }
}
