//! The Address Resolution Protocol (RFC 826).
//!
//! [`ArpPacket`] reads any hardware/protocol address lengths (the address
//! fields are located from `hlen`/`plen`), but [`ArpRepr`] only understands
//! Ethernet hardware addresses with IPv4 protocol addresses, the only pairing
//! this stack resolves. The packet is 28 bytes for that pairing; Ethernet
//! padding after it is ignored.

use core::fmt;

use byteorder::{ByteOrder, NetworkEndian};

use super::ethernet::EtherType;
use super::{Error, EthernetAddress, Ipv4Addr, Result};

enum_with_unknown! {
    /// The ARP hardware type.
    pub enum ArpHardware(u16) {
        /// Ethernet (10 Mb and up).
        Ethernet = 1,
    }
}

enum_with_unknown! {
    /// The ARP operation.
    pub enum ArpOperation(u16) {
        /// Who has the target protocol address?
        Request = 1,
        /// The source has the source protocol address.
        Reply = 2,
    }
}

impl fmt::Display for ArpOperation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArpOperation::Request => f.write_str("request"),
            ArpOperation::Reply => f.write_str("reply"),
            ArpOperation::Unknown(n) => write!(f, "op {n}"),
        }
    }
}

mod field {
    #![allow(non_snake_case)]
    use crate::wire::field::Field;

    pub const HTYPE: Field = 0..2;
    pub const PTYPE: Field = 2..4;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: Field = 6..8;

    pub const fn SHA(hlen: u8, _plen: u8) -> Field {
        let start = OPER.end;
        start..(start + hlen as usize)
    }
    pub const fn SPA(hlen: u8, plen: u8) -> Field {
        let start = SHA(hlen, plen).end;
        start..(start + plen as usize)
    }
    pub const fn THA(hlen: u8, plen: u8) -> Field {
        let start = SPA(hlen, plen).end;
        start..(start + hlen as usize)
    }
    pub const fn TPA(hlen: u8, plen: u8) -> Field {
        let start = THA(hlen, plen).end;
        start..(start + plen as usize)
    }
}

/// Length of the fixed part before the addresses.
pub const FIXED_LEN: usize = field::OPER.end;
/// Length of an Ethernet/IPv4 ARP packet.
pub const ETHERNET_IPV4_LEN: usize = field::TPA(6, 4).end;

/// A view of an ARP packet in a byte buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Wraps a buffer without checking its length (for emitting).
    pub const fn new_unchecked(buffer: T) -> ArpPacket<T> {
        ArpPacket { buffer }
    }

    /// Wraps a buffer and checks that the four addresses fit.
    pub fn new_checked(buffer: T) -> Result<ArpPacket<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Ensures no accessor panics: the fixed part and the four addresses, of
    /// the lengths the packet announces, fit in the buffer.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < FIXED_LEN {
            return Err(Error);
        }
        if len < field::TPA(self.hardware_len(), self.protocol_len()).end {
            return Err(Error);
        }
        Ok(())
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The hardware type.
    pub fn hardware_type(&self) -> ArpHardware {
        ArpHardware::from(NetworkEndian::read_u16(&self.buffer.as_ref()[field::HTYPE]))
    }

    /// The protocol type.
    pub fn protocol_type(&self) -> EtherType {
        EtherType::from(NetworkEndian::read_u16(&self.buffer.as_ref()[field::PTYPE]))
    }

    /// The hardware address length in bytes.
    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }

    /// The protocol address length in bytes.
    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }

    /// The operation.
    pub fn operation(&self) -> ArpOperation {
        ArpOperation::from(NetworkEndian::read_u16(&self.buffer.as_ref()[field::OPER]))
    }

    /// The sender hardware address, `hardware_len()` bytes.
    pub fn source_hardware_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[field::SHA(self.hardware_len(), self.protocol_len())]
    }

    /// The sender protocol address, `protocol_len()` bytes.
    pub fn source_protocol_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[field::SPA(self.hardware_len(), self.protocol_len())]
    }

    /// The target hardware address, `hardware_len()` bytes.
    pub fn target_hardware_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[field::THA(self.hardware_len(), self.protocol_len())]
    }

    /// The target protocol address, `protocol_len()` bytes.
    pub fn target_protocol_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[field::TPA(self.hardware_len(), self.protocol_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Sets the hardware type.
    pub fn set_hardware_type(&mut self, value: ArpHardware) {
        NetworkEndian::write_u16(&mut self.buffer.as_mut()[field::HTYPE], value.into());
    }

    /// Sets the protocol type.
    pub fn set_protocol_type(&mut self, value: EtherType) {
        NetworkEndian::write_u16(&mut self.buffer.as_mut()[field::PTYPE], value.into());
    }

    /// Sets the hardware address length; set it before the addresses.
    pub fn set_hardware_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::HLEN] = value;
    }

    /// Sets the protocol address length; set it before the addresses.
    pub fn set_protocol_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::PLEN] = value;
    }

    /// Sets the operation.
    pub fn set_operation(&mut self, value: ArpOperation) {
        NetworkEndian::write_u16(&mut self.buffer.as_mut()[field::OPER], value.into());
    }

    /// Sets the sender hardware address.
    ///
    /// # Panics
    /// If `value` is not `hardware_len()` bytes long.
    pub fn set_source_hardware_addr(&mut self, value: &[u8]) {
        let range = field::SHA(self.hardware_len(), self.protocol_len());
        self.buffer.as_mut()[range].copy_from_slice(value);
    }

    /// Sets the sender protocol address.
    ///
    /// # Panics
    /// If `value` is not `protocol_len()` bytes long.
    pub fn set_source_protocol_addr(&mut self, value: &[u8]) {
        let range = field::SPA(self.hardware_len(), self.protocol_len());
        self.buffer.as_mut()[range].copy_from_slice(value);
    }

    /// Sets the target hardware address.
    ///
    /// # Panics
    /// If `value` is not `hardware_len()` bytes long.
    pub fn set_target_hardware_addr(&mut self, value: &[u8]) {
        let range = field::THA(self.hardware_len(), self.protocol_len());
        self.buffer.as_mut()[range].copy_from_slice(value);
    }

    /// Sets the target protocol address.
    ///
    /// # Panics
    /// If `value` is not `protocol_len()` bytes long.
    pub fn set_target_protocol_addr(&mut self, value: &[u8]) {
        let range = field::TPA(self.hardware_len(), self.protocol_len());
        self.buffer.as_mut()[range].copy_from_slice(value);
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for ArpPacket<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

impl<T: AsRef<[u8]>> fmt::Display for ArpPacket<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let packet = ArpPacket::new_unchecked(self.buffer.as_ref());
        if packet.check_len().is_err() {
            return write!(f, "ARP (truncated, {} bytes)", packet.buffer.len());
        }
        match ArpRepr::parse(&packet) {
            Ok(repr) => write!(f, "{repr}"),
            Err(_) => write!(
                f,
                "ARP {} htype {} ptype {} (unsupported)",
                packet.operation(),
                u16::from(packet.hardware_type()),
                packet.protocol_type()
            ),
        }
    }
}

fn ipv4_from(bytes: &[u8]) -> Ipv4Addr {
    Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3])
}

/// An ARP packet the stack understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum ArpRepr {
    /// Ethernet hardware addresses, IPv4 protocol addresses.
    EthernetIpv4 {
        /// Request, reply, or an unknown code (kept so it round-trips).
        operation: ArpOperation,
        /// Sender's MAC.
        source_hardware_addr: EthernetAddress,
        /// Sender's IPv4 address.
        source_protocol_addr: Ipv4Addr,
        /// Target's MAC (zero in a request).
        target_hardware_addr: EthernetAddress,
        /// Target's IPv4 address.
        target_protocol_addr: Ipv4Addr,
    },
}

impl ArpRepr {
    /// Reads a packet; anything but Ethernet (htype 1, hlen 6) over IPv4
    /// (ptype 0x0800, plen 4) is an error.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &ArpPacket<&T>) -> Result<ArpRepr> {
        packet.check_len()?;
        if packet.hardware_type() != ArpHardware::Ethernet
            || packet.protocol_type() != EtherType::Ipv4
            || packet.hardware_len() != 6
            || packet.protocol_len() != 4
        {
            return Err(Error);
        }
        // The lengths are known now: the addresses are read at their fixed
        // places, from a buffer checked once.
        let b = &packet.buffer.as_ref()[..ETHERNET_IPV4_LEN];
        Ok(ArpRepr::EthernetIpv4 {
            operation: packet.operation(),
            source_hardware_addr: EthernetAddress::from_bytes(&b[field::SHA(6, 4)]),
            source_protocol_addr: ipv4_from(&b[field::SPA(6, 4)]),
            target_hardware_addr: EthernetAddress::from_bytes(&b[field::THA(6, 4)]),
            target_protocol_addr: ipv4_from(&b[field::TPA(6, 4)]),
        })
    }

    /// The bytes [`emit`](Self::emit) writes (28).
    pub const fn buffer_len(&self) -> usize {
        match self {
            ArpRepr::EthernetIpv4 { .. } => ETHERNET_IPV4_LEN,
        }
    }

    /// Writes the packet into the first [`buffer_len`](Self::buffer_len)
    /// bytes of `packet`.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut ArpPacket<T>) {
        match *self {
            ArpRepr::EthernetIpv4 {
                operation,
                source_hardware_addr,
                source_protocol_addr,
                target_hardware_addr,
                target_protocol_addr,
            } => {
                // The addresses sit at fixed places for this pairing: written
                // there directly (no length read back to place each), into a
                // buffer checked once.
                let b = &mut packet.buffer.as_mut()[..ETHERNET_IPV4_LEN];
                NetworkEndian::write_u16(&mut b[field::HTYPE], ArpHardware::Ethernet.into());
                NetworkEndian::write_u16(&mut b[field::PTYPE], EtherType::Ipv4.into());
                b[field::HLEN] = 6;
                b[field::PLEN] = 4;
                NetworkEndian::write_u16(&mut b[field::OPER], operation.into());
                b[field::SHA(6, 4)].copy_from_slice(source_hardware_addr.as_bytes());
                b[field::SPA(6, 4)].copy_from_slice(&source_protocol_addr.octets());
                b[field::THA(6, 4)].copy_from_slice(target_hardware_addr.as_bytes());
                b[field::TPA(6, 4)].copy_from_slice(&target_protocol_addr.octets());
            }
        }
    }
}

impl fmt::Display for ArpRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ArpRepr::EthernetIpv4 {
                operation: ArpOperation::Request,
                source_protocol_addr,
                target_protocol_addr,
                ..
            } => write!(
                f,
                "ARP request who-has {target_protocol_addr} tell {source_protocol_addr}"
            ),
            ArpRepr::EthernetIpv4 {
                operation: ArpOperation::Reply,
                source_hardware_addr,
                source_protocol_addr,
                ..
            } => write!(
                f,
                "ARP reply {source_protocol_addr} is-at {source_hardware_addr}"
            ),
            ArpRepr::EthernetIpv4 {
                operation,
                source_hardware_addr,
                source_protocol_addr,
                target_hardware_addr,
                target_protocol_addr,
            } => write!(
                f,
                "ARP {operation} {source_protocol_addr} ({source_hardware_addr}) > \
                 {target_protocol_addr} ({target_hardware_addr})"
            ),
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use proptest::prelude::*;

    /// 02:00:00:00:00:01 (10.0.0.1) asks who has 10.0.0.2.
    static REQUEST_BYTES: [u8; 28] = [
        0x00, 0x01, // Ethernet
        0x08, 0x00, // IPv4
        0x06, 0x04, // hlen, plen
        0x00, 0x01, // request
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // sender MAC
        0x0a, 0x00, 0x00, 0x01, // sender IP
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // target MAC (unknown)
        0x0a, 0x00, 0x00, 0x02, // target IP
    ];

    fn request_repr() -> ArpRepr {
        ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Request,
            source_hardware_addr: EthernetAddress([0x02, 0, 0, 0, 0, 0x01]),
            source_protocol_addr: Ipv4Addr::new(10, 0, 0, 1),
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: Ipv4Addr::new(10, 0, 0, 2),
        }
    }

    #[test]
    fn deconstruct() {
        let packet = ArpPacket::new_checked(&REQUEST_BYTES[..]).unwrap();
        assert_eq!(packet.hardware_type(), ArpHardware::Ethernet);
        assert_eq!(packet.protocol_type(), EtherType::Ipv4);
        assert_eq!(packet.hardware_len(), 6);
        assert_eq!(packet.protocol_len(), 4);
        assert_eq!(packet.operation(), ArpOperation::Request);
        assert_eq!(packet.source_hardware_addr(), &[0x02, 0, 0, 0, 0, 0x01]);
        assert_eq!(packet.source_protocol_addr(), &[10, 0, 0, 1]);
        assert_eq!(packet.target_hardware_addr(), &[0; 6]);
        assert_eq!(packet.target_protocol_addr(), &[10, 0, 0, 2]);
    }

    #[test]
    fn construct() {
        let mut bytes = [0xa5u8; 28];
        let mut packet = ArpPacket::new_unchecked(&mut bytes[..]);
        packet.set_hardware_type(ArpHardware::Ethernet);
        packet.set_protocol_type(EtherType::Ipv4);
        packet.set_hardware_len(6);
        packet.set_protocol_len(4);
        packet.set_operation(ArpOperation::Request);
        packet.set_source_hardware_addr(&[0x02, 0, 0, 0, 0, 0x01]);
        packet.set_source_protocol_addr(&[10, 0, 0, 1]);
        packet.set_target_hardware_addr(&[0; 6]);
        packet.set_target_protocol_addr(&[10, 0, 0, 2]);
        assert_eq!(bytes, REQUEST_BYTES);
    }

    #[test]
    fn parse() {
        let packet = ArpPacket::new_checked(&REQUEST_BYTES[..]).unwrap();
        assert_eq!(ArpRepr::parse(&packet), Ok(request_repr()));
    }

    #[test]
    fn emit() {
        let repr = request_repr();
        assert_eq!(repr.buffer_len(), 28);
        let mut bytes = [0xa5u8; 28];
        repr.emit(&mut ArpPacket::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, REQUEST_BYTES);
    }

    #[test]
    fn ethernet_padding_is_ignored() {
        let mut bytes = [0u8; 46];
        bytes[..28].copy_from_slice(&REQUEST_BYTES);
        let packet = ArpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(ArpRepr::parse(&packet), Ok(request_repr()));
    }

    #[test]
    fn every_truncation_is_an_error() {
        for len in 0..REQUEST_BYTES.len() {
            let bytes = &REQUEST_BYTES[..len];
            assert_eq!(ArpPacket::new_checked(bytes), Err(Error), "{len}");
            assert_eq!(
                ArpRepr::parse(&ArpPacket::new_unchecked(bytes)),
                Err(Error),
                "{len}"
            );
        }
    }

    #[test]
    fn other_address_types_are_rejected() {
        // Each (offset, value) breaks one of htype, ptype, hlen, plen; the
        // buffer is long enough that only the type check can reject it.
        for (offset, value) in [(1, 6), (2, 0x86), (4, 8), (5, 16)] {
            let mut bytes = [0u8; 64];
            bytes[..28].copy_from_slice(&REQUEST_BYTES);
            bytes[offset] = value;
            let packet = ArpPacket::new_checked(&bytes[..]).unwrap();
            assert_eq!(ArpRepr::parse(&packet), Err(Error), "offset {offset}");
        }
    }

    #[test]
    fn unknown_operation_round_trips() {
        let mut bytes = REQUEST_BYTES;
        bytes[7] = 9;
        let repr = ArpRepr::parse(&ArpPacket::new_checked(&bytes[..]).unwrap()).unwrap();
        let ArpRepr::EthernetIpv4 { operation, .. } = repr;
        assert_eq!(operation, ArpOperation::Unknown(9));
        let mut out = [0u8; 28];
        repr.emit(&mut ArpPacket::new_unchecked(&mut out[..]));
        assert_eq!(out, bytes);
    }

    #[test]
    fn display() {
        assert_eq!(
            request_repr().to_string(),
            "ARP request who-has 10.0.0.2 tell 10.0.0.1"
        );
        let reply = ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Reply,
            source_hardware_addr: EthernetAddress([0x02, 0, 0, 0, 0, 0x02]),
            source_protocol_addr: Ipv4Addr::new(10, 0, 0, 2),
            target_hardware_addr: EthernetAddress([0x02, 0, 0, 0, 0, 0x01]),
            target_protocol_addr: Ipv4Addr::new(10, 0, 0, 1),
        };
        assert_eq!(
            reply.to_string(),
            "ARP reply 10.0.0.2 is-at 02:00:00:00:00:02"
        );
        assert_eq!(
            ArpPacket::new_unchecked(&REQUEST_BYTES[..]).to_string(),
            "ARP request who-has 10.0.0.2 tell 10.0.0.1"
        );
        assert_eq!(
            ArpPacket::new_unchecked(&REQUEST_BYTES[..5]).to_string(),
            "ARP (truncated, 5 bytes)"
        );
    }

    fn arb_repr() -> impl Strategy<Value = ArpRepr> {
        (
            any::<u16>(),
            any::<[u8; 6]>(),
            any::<u32>(),
            any::<[u8; 6]>(),
            any::<u32>(),
        )
            .prop_map(|(op, sha, spa, tha, tpa)| ArpRepr::EthernetIpv4 {
                operation: ArpOperation::from(op),
                source_hardware_addr: EthernetAddress(sha),
                source_protocol_addr: Ipv4Addr::from(spa),
                target_hardware_addr: EthernetAddress(tha),
                target_protocol_addr: Ipv4Addr::from(tpa),
            })
    }

    proptest! {
        #[test]
        fn parse_inverts_emit(repr in arb_repr()) {
            let mut bytes = [0u8; ETHERNET_IPV4_LEN];
            repr.emit(&mut ArpPacket::new_unchecked(&mut bytes[..]));
            let packet = ArpPacket::new_checked(&bytes[..]).unwrap();
            prop_assert_eq!(ArpRepr::parse(&packet), Ok(repr));
        }

        #[test]
        fn arbitrary_bytes_never_panic(
            plausible in any::<bool>(),
            mut bytes in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            if plausible && bytes.len() >= FIXED_LEN {
                bytes[..6].copy_from_slice(&REQUEST_BYTES[..6]);
            }
            let _ = ArpRepr::parse(&ArpPacket::new_unchecked(&bytes[..]));
            let _ = ArpPacket::new_unchecked(&bytes[..]).to_string();
            if let Ok(p) = ArpPacket::new_checked(&bytes[..]) {
                let _ = (p.source_hardware_addr(), p.source_protocol_addr());
                let _ = (p.target_hardware_addr(), p.target_protocol_addr());
                let _ = (p.operation(), p.hardware_type(), p.protocol_type());
            }
        }
    }
}
