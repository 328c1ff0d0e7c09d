//! Wire formats: zero-copy packet views and their parsed representations.
//!
//! Every header follows one recipe (smoltcp's):
//! - `Packet<T: AsRef<[u8]>>` is a typed view over a byte buffer. Untrusted
//!   bytes enter **only** through `Packet::new_checked`, which calls
//!   `check_len`; after it succeeds, no accessor panics on any input.
//!   Captures cut short by a snap length may enter IPv4 and IPv6 through
//!   `new_truncated` instead, which checks only the header: then every
//!   accessor but `payload` stays in bounds, and `captured_payload` gives
//!   what was captured.
//!   Frames are built through `Packet::new_unchecked` over a buffer of exactly
//!   `Repr::buffer_len()` bytes (a reused buffer holding an old packet could
//!   make a length check fail nondeterministically).
//! - `Repr` holds the fields the stack understands. `Repr::parse` never panics
//!   on any bytes; `Repr::emit` never panics on a buffer of `buffer_len()`.
//! - Multi-byte fields are big-endian (network order).
//! - Errors carry no payload: [`Error`] is a unit struct, cheap on the hot path.
//!
//! Addresses are `core::net::{Ipv4Addr, Ipv6Addr, IpAddr}` and [`EthernetAddress`].

use core::fmt;

pub mod arp;
pub mod checksum;
pub mod ethernet;
pub mod homa;
pub mod icmpv4;
pub mod icmpv6;
pub mod ipv4;
pub mod ipv6;
pub mod pretty;

pub use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub use self::arp::{ArpOperation, ArpPacket, ArpRepr};
pub use self::ethernet::{EtherType, EthernetFrame, EthernetRepr, VlanTag};
pub use self::icmpv4::{Icmpv4DstUnreachable, Icmpv4Message, Icmpv4Packet, Icmpv4Repr};
pub use self::icmpv6::{Icmpv6DstUnreachable, Icmpv6Message, Icmpv6Packet, Icmpv6Repr};
pub use self::ipv4::{Ipv4Packet, Ipv4Repr};
pub use self::ipv6::{Ipv6Packet, Ipv6Repr};
pub use self::pretty::{dissect, Dissection, PrettyFrame};

/// A packet could not be parsed (too short, malformed, unsupported) or a
/// representation could not be emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Error;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("wire::Error")
    }
}

impl core::error::Error for Error {}

/// The result of parsing or emitting.
pub type Result<T> = core::result::Result<T, Error>;

/// Byte ranges of header fields, used by every `mod field`.
pub(crate) mod field {
    /// A fixed field.
    pub type Field = core::ops::Range<usize>;
    /// Everything from an offset to the end.
    pub type Rest = core::ops::RangeFrom<usize>;
}

/// A six-byte Ethernet (EUI-48) address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: EthernetAddress = EthernetAddress([0xff; 6]);

    /// Builds an address from a slice of exactly six bytes.
    ///
    /// # Panics
    /// If `data` is not six bytes long (callers pass fixed-size fields).
    pub fn from_bytes(data: &[u8]) -> EthernetAddress {
        let mut bytes = [0; 6];
        bytes.copy_from_slice(data);
        EthernetAddress(bytes)
    }
    /// The raw bytes.
    pub const fn as_bytes(&self) -> &[u8] {
        &self.0
    }
    /// Not multicast and not all zeroes.
    pub fn is_unicast(&self) -> bool {
        self.0[0] & 0x01 == 0 && self.0 != [0; 6]
    }
    /// ff:ff:ff:ff:ff:ff.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }
    /// The group bit is set (broadcast included).
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }
}

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

enum_with_unknown! {
    /// IP protocol numbers (the IPv4 `protocol` and IPv6 `next header` fields).
    pub enum IpProtocol(u8) {
        /// ICMP for IPv4.
        Icmp = 1,
        /// TCP (Homa's checksum pseudo-header uses this number).
        Tcp = 6,
        /// UDP.
        Udp = 17,
        /// ICMP for IPv6.
        Icmpv6 = 58,
        /// Homa (IANA-assigned since 2024-10-25).
        Homa = 146,
    }
}

impl fmt::Display for IpProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpProtocol::Icmp => f.write_str("ICMP"),
            IpProtocol::Tcp => f.write_str("TCP"),
            IpProtocol::Udp => f.write_str("UDP"),
            IpProtocol::Icmpv6 => f.write_str("ICMPv6"),
            IpProtocol::Homa => f.write_str("HOMA"),
            IpProtocol::Unknown(n) => write!(f, "0x{n:02x}"),
        }
    }
}
