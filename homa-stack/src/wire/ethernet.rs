//! Ethernet II frames, optionally carrying one IEEE 802.1Q VLAN tag.
//!
//! The frame covers the destination address through the payload; there is no
//! preamble and no FCS (the device seam strips it). Ethernet has no length
//! field, so the payload is everything after the header, including any
//! padding to the 60-byte minimum; upper layers use their own length fields.
//!
//! One 802.1Q tag is understood: when the type field holds 0x8100, the tag
//! control information (priority, drop eligibility, VLAN id) and the inner
//! type follow, and the header is 18 bytes instead of 14. Stacked tags (QinQ)
//! are **not** unwrapped: in a frame with two tags the inner 0x8100 is
//! reported as the ether type ([`EtherType::Vlan`]) and the payload starts
//! with the second tag, so the stack drops it as an unknown protocol.

use core::fmt;

use byteorder::{ByteOrder, NetworkEndian};

use super::{Error, EthernetAddress, Result};

enum_with_unknown! {
    /// The Ethernet II type field (also the ARP protocol type).
    pub enum EtherType(u16) {
        /// Internet Protocol version 4.
        Ipv4 = 0x0800,
        /// Address Resolution Protocol.
        Arp = 0x0806,
        /// Internet Protocol version 6.
        Ipv6 = 0x86DD,
        /// An IEEE 802.1Q VLAN tag follows.
        Vlan = 0x8100,
    }
}

impl fmt::Display for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EtherType::Ipv4 => f.write_str("IPv4"),
            EtherType::Arp => f.write_str("ARP"),
            EtherType::Ipv6 => f.write_str("IPv6"),
            EtherType::Vlan => f.write_str("VLAN"),
            EtherType::Unknown(n) => write!(f, "0x{n:04x}"),
        }
    }
}

/// The tag control information of an 802.1Q tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct VlanTag {
    /// Priority code point, 0..=7 (higher bits are dropped on emit).
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier, 0..=4095 (higher bits are dropped on emit).
    pub vid: u16,
}

impl VlanTag {
    /// Splits a raw 16-bit tag control information field.
    pub const fn from_tci(tci: u16) -> VlanTag {
        VlanTag {
            pcp: (tci >> 13) as u8,
            dei: tci & 0x1000 != 0,
            vid: tci & 0x0fff,
        }
    }

    /// The raw 16-bit tag control information field.
    pub const fn tci(&self) -> u16 {
        ((self.pcp as u16 & 0x7) << 13) | ((self.dei as u16) << 12) | (self.vid & 0x0fff)
    }
}

impl fmt::Display for VlanTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "vlan {} pcp {}", self.vid, self.pcp)?;
        if self.dei {
            f.write_str(" dei")?;
        }
        Ok(())
    }
}

mod field {
    use crate::wire::field::{Field, Rest};

    pub const DESTINATION: Field = 0..6;
    pub const SOURCE: Field = 6..12;
    /// The type field, or the tag protocol identifier 0x8100 of a tagged frame.
    pub const ETHERTYPE: Field = 12..14;
    pub const VLAN_TCI: Field = 14..16;
    pub const VLAN_ETHERTYPE: Field = 16..18;

    pub const HEADER_LEN: usize = ETHERTYPE.end;
    pub const VLAN_HEADER_LEN: usize = VLAN_ETHERTYPE.end;

    pub const PAYLOAD: Rest = HEADER_LEN..;
    pub const VLAN_PAYLOAD: Rest = VLAN_HEADER_LEN..;
}

/// Length of an untagged Ethernet II header.
pub const HEADER_LEN: usize = field::HEADER_LEN;
/// Length of an Ethernet II header with one 802.1Q tag.
pub const VLAN_HEADER_LEN: usize = field::VLAN_HEADER_LEN;

/// A view of an Ethernet II frame in a byte buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps a buffer without checking its length (for emitting).
    pub const fn new_unchecked(buffer: T) -> EthernetFrame<T> {
        EthernetFrame { buffer }
    }

    /// Wraps a buffer and checks that the header, including a tag when the
    /// type field announces one, fits.
    pub fn new_checked(buffer: T) -> Result<EthernetFrame<T>> {
        let frame = Self::new_unchecked(buffer);
        frame.check_len()?;
        Ok(frame)
    }

    /// Ensures no accessor panics: the buffer holds the whole header.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN || (self.is_vlan_tagged() && len < VLAN_HEADER_LEN) {
            Err(Error)
        } else {
            Ok(())
        }
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// 14, or 18 when the frame carries an 802.1Q tag.
    pub fn header_len(&self) -> usize {
        if self.is_vlan_tagged() {
            VLAN_HEADER_LEN
        } else {
            HEADER_LEN
        }
    }

    /// The destination address.
    pub fn dst_addr(&self) -> EthernetAddress {
        EthernetAddress::from_bytes(&self.buffer.as_ref()[field::DESTINATION])
    }

    /// The source address.
    pub fn src_addr(&self) -> EthernetAddress {
        EthernetAddress::from_bytes(&self.buffer.as_ref()[field::SOURCE])
    }

    /// The type field at offset 12 as is: [`EtherType::Vlan`] for a tagged frame.
    pub fn outer_ethertype(&self) -> EtherType {
        EtherType::from(NetworkEndian::read_u16(
            &self.buffer.as_ref()[field::ETHERTYPE],
        ))
    }

    /// The frame carries an 802.1Q tag.
    pub fn is_vlan_tagged(&self) -> bool {
        self.outer_ethertype() == EtherType::Vlan
    }

    /// The 802.1Q tag, if the frame carries one.
    pub fn vlan_tag(&self) -> Option<VlanTag> {
        if self.is_vlan_tagged() {
            let tci = NetworkEndian::read_u16(&self.buffer.as_ref()[field::VLAN_TCI]);
            Some(VlanTag::from_tci(tci))
        } else {
            None
        }
    }

    /// The type of the payload: the inner type of a tagged frame (which is
    /// [`EtherType::Vlan`] again for a stacked tag; see the module docs).
    pub fn ethertype(&self) -> EtherType {
        if self.is_vlan_tagged() {
            EtherType::from(NetworkEndian::read_u16(
                &self.buffer.as_ref()[field::VLAN_ETHERTYPE],
            ))
        } else {
            self.outer_ethertype()
        }
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> EthernetFrame<&'a T> {
    /// The bytes after the header (and after the tag, if any).
    pub fn payload(&self) -> &'a [u8] {
        let data = self.buffer.as_ref();
        if self.is_vlan_tagged() {
            &data[field::VLAN_PAYLOAD]
        } else {
            &data[field::PAYLOAD]
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, value: EthernetAddress) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(value.as_bytes());
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, value: EthernetAddress) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(value.as_bytes());
    }

    /// Sets the type field at offset 12 ([`EtherType::Vlan`] to tag the frame).
    pub fn set_outer_ethertype(&mut self, value: EtherType) {
        NetworkEndian::write_u16(&mut self.buffer.as_mut()[field::ETHERTYPE], value.into());
    }

    /// Writes the tag control information; the outer type must be (or be
    /// set to) [`EtherType::Vlan`] for it to be read back.
    pub fn set_vlan_tag(&mut self, tag: VlanTag) {
        NetworkEndian::write_u16(&mut self.buffer.as_mut()[field::VLAN_TCI], tag.tci());
    }

    /// Sets the field [`ethertype`](Self::ethertype) reads: the inner type if
    /// the outer type is already [`EtherType::Vlan`], else the outer type.
    pub fn set_ethertype(&mut self, value: EtherType) {
        let range = if self.is_vlan_tagged() {
            field::VLAN_ETHERTYPE
        } else {
            field::ETHERTYPE
        };
        NetworkEndian::write_u16(&mut self.buffer.as_mut()[range], value.into());
    }

    /// The bytes after the header, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let range = if self.is_vlan_tagged() {
            field::VLAN_PAYLOAD
        } else {
            field::PAYLOAD
        };
        &mut self.buffer.as_mut()[range]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for EthernetFrame<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

impl<T: AsRef<[u8]>> fmt::Display for EthernetFrame<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match EthernetRepr::parse(&EthernetFrame::new_unchecked(self.buffer.as_ref())) {
            Ok(repr) => write!(f, "{repr}"),
            Err(_) => write!(
                f,
                "Ethernet (truncated, {} bytes)",
                self.buffer.as_ref().len()
            ),
        }
    }
}

/// The header of an Ethernet II frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EthernetRepr {
    /// Source address.
    pub src_addr: EthernetAddress,
    /// Destination address.
    pub dst_addr: EthernetAddress,
    /// The 802.1Q tag, if any.
    pub vlan: Option<VlanTag>,
    /// The type of the payload (the inner type when tagged). With `vlan:
    /// None`, [`EtherType::Vlan`] emits an untagged frame whose payload must
    /// start with a tag; it parses back as a tagged frame.
    pub ethertype: EtherType,
}

impl EthernetRepr {
    /// Reads the header of a frame; fails only if the header is truncated.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(frame: &EthernetFrame<&T>) -> Result<EthernetRepr> {
        frame.check_len()?;
        Ok(EthernetRepr {
            src_addr: frame.src_addr(),
            dst_addr: frame.dst_addr(),
            vlan: frame.vlan_tag(),
            ethertype: frame.ethertype(),
        })
    }

    /// 14, or 18 with a tag.
    pub const fn header_len(&self) -> usize {
        if self.vlan.is_some() {
            VLAN_HEADER_LEN
        } else {
            HEADER_LEN
        }
    }

    /// The bytes [`emit`](Self::emit) writes: the header (the payload is the
    /// upper layer's).
    pub const fn buffer_len(&self) -> usize {
        self.header_len()
    }

    /// Writes the header into the first [`header_len`](Self::header_len)
    /// bytes of `frame`.
    ///
    /// # Panics
    /// If the buffer is shorter than `header_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut EthernetFrame<T>) {
        frame.set_dst_addr(self.dst_addr);
        frame.set_src_addr(self.src_addr);
        match self.vlan {
            Some(tag) => {
                frame.set_outer_ethertype(EtherType::Vlan);
                frame.set_vlan_tag(tag);
                frame.set_ethertype(self.ethertype);
            }
            None => frame.set_outer_ethertype(self.ethertype),
        }
    }
}

impl fmt::Display for EthernetRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Ethernet {} > {} type {}",
            self.src_addr, self.dst_addr, self.ethertype
        )?;
        if let Some(tag) = self.vlan {
            write!(f, " {tag}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use proptest::prelude::*;

    const SRC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x01]);
    const DST: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x02]);

    /// An untagged IPv4 frame from SRC to broadcast with a 4-byte payload.
    static FRAME_BYTES: [u8; 18] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // destination
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // source
        0x08, 0x00, // IPv4
        0xaa, 0xbb, 0xcc, 0xdd, // payload
    ];

    /// An IPv6 frame tagged with VLAN 5, priority 3, with a 4-byte payload.
    static VLAN_FRAME_BYTES: [u8; 22] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, // destination
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // source
        0x81, 0x00, // 802.1Q tag protocol identifier
        0x60, 0x05, // pcp 3, dei 0, vid 5
        0x86, 0xdd, // IPv6
        0xaa, 0xbb, 0xcc, 0xdd, // payload
    ];

    /// Two stacked tags (outer vid 100, inner vid 5) around IPv4.
    static QINQ_FRAME_BYTES: [u8; 22] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, // destination
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // source
        0x81, 0x00, 0x00, 0x64, // outer tag, vid 100
        0x81, 0x00, 0x00, 0x05, // inner tag, vid 5
        0x08, 0x00, // IPv4
    ];

    fn repr() -> EthernetRepr {
        EthernetRepr {
            src_addr: SRC,
            dst_addr: EthernetAddress::BROADCAST,
            vlan: None,
            ethertype: EtherType::Ipv4,
        }
    }

    fn vlan_repr() -> EthernetRepr {
        EthernetRepr {
            src_addr: SRC,
            dst_addr: DST,
            vlan: Some(VlanTag {
                pcp: 3,
                dei: false,
                vid: 5,
            }),
            ethertype: EtherType::Ipv6,
        }
    }

    #[test]
    fn deconstruct() {
        let frame = EthernetFrame::new_checked(&FRAME_BYTES[..]).unwrap();
        assert_eq!(frame.dst_addr(), EthernetAddress::BROADCAST);
        assert_eq!(frame.src_addr(), SRC);
        assert_eq!(frame.outer_ethertype(), EtherType::Ipv4);
        assert_eq!(frame.ethertype(), EtherType::Ipv4);
        assert!(!frame.is_vlan_tagged());
        assert_eq!(frame.vlan_tag(), None);
        assert_eq!(frame.header_len(), 14);
        assert_eq!(frame.payload(), &[0xaa, 0xbb, 0xcc, 0xdd]);
    }

    #[test]
    fn deconstruct_vlan() {
        let frame = EthernetFrame::new_checked(&VLAN_FRAME_BYTES[..]).unwrap();
        assert_eq!(frame.dst_addr(), DST);
        assert_eq!(frame.src_addr(), SRC);
        assert_eq!(frame.outer_ethertype(), EtherType::Vlan);
        assert_eq!(frame.ethertype(), EtherType::Ipv6);
        assert_eq!(
            frame.vlan_tag(),
            Some(VlanTag {
                pcp: 3,
                dei: false,
                vid: 5
            })
        );
        assert_eq!(frame.header_len(), 18);
        assert_eq!(frame.payload(), &[0xaa, 0xbb, 0xcc, 0xdd]);
    }

    #[test]
    fn construct() {
        let mut bytes = [0u8; 18];
        let mut frame = EthernetFrame::new_unchecked(&mut bytes[..]);
        frame.set_dst_addr(EthernetAddress::BROADCAST);
        frame.set_src_addr(SRC);
        frame.set_ethertype(EtherType::Ipv4);
        frame
            .payload_mut()
            .copy_from_slice(&[0xaa, 0xbb, 0xcc, 0xdd]);
        assert_eq!(bytes, FRAME_BYTES);
    }

    #[test]
    fn construct_vlan() {
        let mut bytes = [0u8; 22];
        let mut frame = EthernetFrame::new_unchecked(&mut bytes[..]);
        frame.set_dst_addr(DST);
        frame.set_src_addr(SRC);
        frame.set_outer_ethertype(EtherType::Vlan);
        frame.set_vlan_tag(VlanTag {
            pcp: 3,
            dei: false,
            vid: 5,
        });
        frame.set_ethertype(EtherType::Ipv6);
        frame
            .payload_mut()
            .copy_from_slice(&[0xaa, 0xbb, 0xcc, 0xdd]);
        assert_eq!(bytes, VLAN_FRAME_BYTES);
    }

    #[test]
    fn parse() {
        let frame = EthernetFrame::new_checked(&FRAME_BYTES[..]).unwrap();
        assert_eq!(EthernetRepr::parse(&frame), Ok(repr()));
        let frame = EthernetFrame::new_checked(&VLAN_FRAME_BYTES[..]).unwrap();
        assert_eq!(EthernetRepr::parse(&frame), Ok(vlan_repr()));
    }

    #[test]
    fn emit() {
        let mut bytes = FRAME_BYTES;
        bytes[..14].fill(0);
        let repr = repr();
        assert_eq!(repr.buffer_len(), 14);
        repr.emit(&mut EthernetFrame::new_unchecked(&mut bytes[..14]));
        assert_eq!(bytes, FRAME_BYTES);
    }

    #[test]
    fn emit_vlan() {
        let mut bytes = VLAN_FRAME_BYTES;
        bytes[..18].fill(0);
        let repr = vlan_repr();
        assert_eq!(repr.header_len(), 18);
        repr.emit(&mut EthernetFrame::new_unchecked(&mut bytes[..18]));
        assert_eq!(bytes, VLAN_FRAME_BYTES);
    }

    #[test]
    fn stacked_tags_report_the_inner_tag_as_ethertype() {
        let frame = EthernetFrame::new_checked(&QINQ_FRAME_BYTES[..]).unwrap();
        let repr = EthernetRepr::parse(&frame).unwrap();
        assert_eq!(repr.vlan.map(|t| t.vid), Some(100));
        assert_eq!(repr.ethertype, EtherType::Vlan);
        assert_eq!(frame.payload(), &[0x00, 0x05, 0x08, 0x00]);
    }

    // Ethernet has no length field: a shorter payload is a valid frame, so
    // only truncations into the header must fail.
    #[test]
    fn every_truncated_header_is_an_error() {
        for len in 0..HEADER_LEN {
            assert_eq!(
                EthernetFrame::new_checked(&FRAME_BYTES[..len]),
                Err(Error),
                "{len}"
            );
        }
        for len in 0..VLAN_HEADER_LEN {
            assert_eq!(
                EthernetFrame::new_checked(&VLAN_FRAME_BYTES[..len]),
                Err(Error),
                "{len}"
            );
            assert_eq!(
                EthernetRepr::parse(&EthernetFrame::new_unchecked(&VLAN_FRAME_BYTES[..len])),
                Err(Error),
                "{len}"
            );
        }
    }

    #[test]
    fn vlan_tci_round_trips_every_field() {
        let tag = VlanTag {
            pcp: 7,
            dei: true,
            vid: 0xfff,
        };
        assert_eq!(tag.tci(), 0xffff);
        assert_eq!(VlanTag::from_tci(0xffff), tag);
        assert_eq!(VlanTag::from_tci(0x6005).tci(), 0x6005);
    }

    #[test]
    fn display() {
        let mut repr = repr();
        repr.vlan = Some(VlanTag {
            pcp: 3,
            dei: false,
            vid: 5,
        });
        assert_eq!(
            repr.to_string(),
            "Ethernet 02:00:00:00:00:01 > ff:ff:ff:ff:ff:ff type IPv4 vlan 5 pcp 3"
        );
        assert_eq!(
            EthernetFrame::new_unchecked(&FRAME_BYTES[..]).to_string(),
            "Ethernet 02:00:00:00:00:01 > ff:ff:ff:ff:ff:ff type IPv4"
        );
        assert_eq!(
            EthernetFrame::new_unchecked(&FRAME_BYTES[..3]).to_string(),
            "Ethernet (truncated, 3 bytes)"
        );
        assert_eq!(EtherType::Unknown(0x88cc).to_string(), "0x88cc");
    }

    fn arb_addr() -> impl Strategy<Value = EthernetAddress> {
        any::<[u8; 6]>().prop_map(EthernetAddress)
    }

    fn arb_repr() -> impl Strategy<Value = EthernetRepr> {
        let tag = (0u8..8, any::<bool>(), 0u16..4096).prop_map(|(pcp, dei, vid)| VlanTag {
            pcp,
            dei,
            vid,
        });
        (
            arb_addr(),
            arb_addr(),
            proptest::option::of(tag),
            any::<u16>(),
        )
            .prop_map(|(src_addr, dst_addr, vlan, ty)| EthernetRepr {
                src_addr,
                dst_addr,
                vlan,
                ethertype: EtherType::from(ty),
            })
            // An untagged 0x8100 frame is a tagged frame once parsed.
            .prop_filter("untagged VLAN type", |r| {
                r.vlan.is_some() || r.ethertype != EtherType::Vlan
            })
    }

    proptest! {
        #[test]
        fn parse_inverts_emit(repr in arb_repr()) {
            let mut bytes = [0u8; VLAN_HEADER_LEN];
            let buf = &mut bytes[..repr.buffer_len()];
            repr.emit(&mut EthernetFrame::new_unchecked(&mut *buf));
            let frame = EthernetFrame::new_checked(&*buf).unwrap();
            prop_assert_eq!(EthernetRepr::parse(&frame), Ok(repr));
        }

        #[test]
        fn arbitrary_bytes_never_panic(
            tagged in any::<bool>(),
            mut bytes in proptest::collection::vec(any::<u8>(), 0..40),
        ) {
            if tagged && bytes.len() >= HEADER_LEN {
                bytes[12..14].copy_from_slice(&[0x81, 0x00]);
            }
            let _ = EthernetRepr::parse(&EthernetFrame::new_unchecked(&bytes[..]));
            let _ = EthernetFrame::new_unchecked(&bytes[..]).to_string();
            if let Ok(frame) = EthernetFrame::new_checked(&bytes[..]) {
                let _ = (frame.dst_addr(), frame.src_addr(), frame.vlan_tag());
                let _ = (frame.ethertype(), frame.payload(), frame.header_len());
            }
        }
    }
}
