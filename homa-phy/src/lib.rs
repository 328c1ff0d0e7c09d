//! The device seam of homa-stack.
//!
//! A [`Device`] hands out tokens: [`Device::receive`] gives permission to read
//! one frame, [`Device::transmit`] permission to write one. The copy to or from
//! the hardware happens inside the token's `consume`, so a driver can lend out
//! slices of its own DMA rings and the stack never allocates. The signatures are
//! smoltcp's, so a smoltcp driver ports by renaming its imports.
//!
//! [`PacketMeta`] carries the Homa priority (0..=7) of a transmitted frame, so
//! a device with hardware priority queues can use it without parsing the
//! packet, and an optional receive timestamp.
//!
//! This crate knows frames and priorities, never Homa.
//!
//! # What is here
//!
//! | | `no_std`, no heap | needs |
//! |---|---|---|
//! | [`Loopback`]: a fixed ring of frames | yes | |
//! | [`FaultInjector`]: seeded drop, delay, reorder, duplicate, corrupt, rate limits | yes | |
//! | [`Tracer`]: every frame to a callback | yes | |
//! | [`PcapWriter`] over a [`PcapSink`]: captures for Wireshark/tcpdump | yes | files under `std` |
//! | `embassy::DriverAdapter`: any embassy-net driver | yes | feature `embassy` |
//! | `lan9118::Lan9118`: the SMSC LAN9118 Ethernet controller (MPS2 boards) as an embassy-net driver | yes | feature `lan9118` |
//! | [`Share`]: one device for homa-stack and another stack | yes | |
//! | `smoltcp::SmoltcpDevice`: any device as a smoltcp device (for smoltcp on a `Share` half) | yes | feature `smoltcp` |
//! | `share::driver::SharedDriver`: one embassy-net driver for two stacks | yes | feature `embassy` |
//! | `TapInterface`, `RawSocket`, `wait`: Linux host devices | no | `std`, Linux |
//! | `xdp::XdpSocket`: an AF_XDP socket on one queue of an interface, batched rings, its own XDP program | no | feature `xdp`, Linux |
//! | `testing`: the test kit (generator, payload patterns; devices, frames and a two-host driver under `std`) | partly | `testing`; `std` for the devices |
//!
//! Middleware wraps any device and is a device itself, so they stack:
//! `PcapWriter<FaultInjector<TapInterface>, File>` records what the stack
//! saw after the faults. Each has `get_ref`, `get_mut` and `into_inner`.
//!
//! # Using devices
//!
//! A [`Loopback`] is a ring: what the stack transmits it receives again.
//! [`Split`] joins a receive ring and a transmit ring into one device, and
//! [`forward`] moves frames from one device's transmit side to another's
//! receive side, which is how two endpoints are wired back to back in tests.
//! Middleware such as the [`FaultInjector`] wraps any device and is one.
//!
//! ```
//! use homa_phy::fault::{FaultConfig, FaultInjector};
//! use homa_phy::{forward, Device, Instant, Loopback, RxToken, Split, TxToken};
//!
//! let now = Instant::ZERO;
//! // Two devices of 8-frame rings, wired: a's transmissions reach b.
//! let mut a: Split<Loopback<8>, Loopback<8>> = Split::new(Loopback::new(), Loopback::new());
//! let mut b: Split<Loopback<8>, Loopback<8>> = Split::new(Loopback::new(), Loopback::new());
//! a.transmit(now).unwrap().consume(60, |frame| frame.fill(0xab));
//! forward(a.tx_mut(), b.rx_mut(), now);
//! let (rx, _reply) = b.receive(now).unwrap();
//! assert_eq!(rx.consume(|frame| (frame.len(), frame[0])), (60, 0xab));
//!
//! // The same device behind an injector that drops every frame it receives.
//! let mut faults = FaultConfig::new();
//! faults.drop_ppm = 1_000_000;
//! let mut lossy: FaultInjector<_> = FaultInjector::with_config(b, 7, faults);
//! a.transmit(now).unwrap().consume(60, |frame| frame.fill(0xcd));
//! forward(a.tx_mut(), lossy.get_mut().rx_mut(), now);
//! assert!(lossy.receive(now).is_none());
//! assert_eq!(lossy.stats().rx.dropped, 1);
//! ```
//!
//! # Writing a driver
//!
//! A NIC with one receive and one transmit buffer, as on many small
//! microcontrollers. `receive` copies a waiting frame into the RX buffer and
//! lends it out; `transmit` lends the TX buffer, and the frame goes out when
//! the stack has filled it. Both tokens borrow the device, so nothing is
//! copied twice and nothing is allocated. The register accesses are stubs
//! here.
//!
//! ```
//! use homa_phy::{Device, DeviceCapabilities, Instant, RxToken, TxToken};
//!
//! /// Largest frame: 1500-byte IP MTU plus the 14-byte Ethernet header.
//! const MTU: usize = 1514;
//!
//! /// The NIC's registers (stubbed: one frame waits, the TX FIFO is free).
//! mod nic {
//!     pub fn rx_frame_len() -> Option<usize> { Some(60) }
//!     pub fn read_rx_fifo(frame: &mut [u8]) { frame.fill(0xab) }
//!     pub fn tx_fifo_free() -> bool { true }
//!     pub fn write_tx_fifo(_frame: &[u8]) {}
//! }
//!
//! /// The driver. On bare metal it lives in a `static` (e.g. through
//! /// `static_cell`), so the two buffers are static memory.
//! pub struct EthPhy {
//!     rx_buffer: [u8; MTU],
//!     tx_buffer: [u8; MTU],
//! }
//!
//! impl EthPhy {
//!     pub const fn new() -> Self {
//!         EthPhy { rx_buffer: [0; MTU], tx_buffer: [0; MTU] }
//!     }
//! }
//!
//! impl Device for EthPhy {
//!     type RxToken<'a> = EthRxToken<'a>;
//!     type TxToken<'a> = EthTxToken<'a>;
//!
//!     fn receive(&mut self, _now: Instant) -> Option<(EthRxToken<'_>, EthTxToken<'_>)> {
//!         let len = nic::rx_frame_len()?;
//!         // A frame longer than the buffer is the hardware's doing, not the
//!         // stack's: drop it rather than panic (a real driver discards it in
//!         // the FIFO too).
//!         let frame = self.rx_buffer.get_mut(..len)?;
//!         nic::read_rx_fifo(frame);
//!         Some((EthRxToken(frame), EthTxToken(&mut self.tx_buffer)))
//!     }
//!
//!     fn transmit(&mut self, _now: Instant) -> Option<EthTxToken<'_>> {
//!         // No token without room: `consume` cannot fail afterwards.
//!         nic::tx_fifo_free().then(|| EthTxToken(&mut self.tx_buffer))
//!     }
//!
//!     fn capabilities(&self) -> DeviceCapabilities {
//!         let mut caps = DeviceCapabilities::default();
//!         caps.max_transmission_unit = MTU;
//!         // One TX buffer: the stack should not burst more than one frame.
//!         caps.max_burst_size = Some(1);
//!         caps
//!     }
//! }
//!
//! pub struct EthRxToken<'a>(&'a [u8]);
//!
//! impl RxToken for EthRxToken<'_> {
//!     fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
//!         f(self.0)
//!     }
//! }
//!
//! pub struct EthTxToken<'a>(&'a mut [u8; MTU]);
//!
//! impl TxToken for EthTxToken<'_> {
//!     fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
//!         // The stack never asks for more than `max_transmission_unit`.
//!         let frame = &mut self.0[..len];
//!         let result = f(frame);
//!         nic::write_tx_fifo(frame);
//!         result
//!     }
//! }
//!
//! let mut phy = EthPhy::new();
//! let (rx, _reply) = phy.receive(Instant::ZERO).unwrap();
//! assert_eq!(rx.consume(|frame| frame.len()), 60);
//! phy.transmit(Instant::ZERO).unwrap().consume(42, |frame| frame.fill(0));
//! ```
#![cfg_attr(not(any(test, feature = "std")), no_std)]
#![deny(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "embassy")]
pub mod embassy;
pub mod fault;
#[cfg(feature = "lan9118")]
pub mod lan9118;
pub mod loopback;
pub mod pcap;
pub mod pipe;
#[cfg(all(feature = "std", target_os = "linux"))]
pub mod raw_socket;
pub mod rng;
pub mod share;
#[cfg(feature = "smoltcp")]
pub mod smoltcp;
#[cfg(all(feature = "std", target_os = "linux"))]
pub mod tap;
#[cfg(feature = "testing")]
pub mod testing;
pub mod time;
pub mod tracer;
#[cfg(all(feature = "xdp", target_os = "linux"))]
pub mod xdp;

#[cfg(feature = "embassy")]
pub use embassy::DriverAdapter;
pub use fault::{FaultConfig, FaultCounters, FaultInjector, FaultStats, RateLimit};
#[cfg(feature = "std")]
pub use loopback::BoxedLoopback;
pub use loopback::{FrameSlot, Loopback};
pub use pcap::{PcapLinkType, PcapMode, PcapSink, PcapWriter};
pub use pipe::{forward, Moved, Split};
#[cfg(all(feature = "std", target_os = "linux"))]
pub use raw_socket::RawSocket;
pub use share::Share;
#[cfg(all(feature = "std", target_os = "linux"))]
pub use tap::{wait, TapInterface};
pub use time::{Duration, Instant};
pub use tracer::{Tracer, TracerDirection, TracerPacket};
#[cfg(all(feature = "xdp", target_os = "linux"))]
pub use xdp::{XdpConfig, XdpSocket};

/// A network device: a source of received frames and a sink for frames to send.
pub trait Device {
    /// Permission to read one received frame.
    type RxToken<'a>: RxToken
    where
        Self: 'a;
    /// Permission to write one frame for transmission.
    type TxToken<'a>: TxToken
    where
        Self: 'a;

    /// A received frame and a transmit slot to answer it with, or `None` when no
    /// frame is waiting (or no transmit slot is free).
    ///
    /// `timestamp` is informational (middleware such as rate limiters uses it).
    fn receive(&mut self, timestamp: Instant) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)>;

    /// A transmit slot, or `None` when the device cannot take a frame now.
    fn transmit(&mut self, timestamp: Instant) -> Option<Self::TxToken<'_>>;

    /// What the device can do. Called often; keep it cheap.
    fn capabilities(&self) -> DeviceCapabilities;
}

/// Permission to read one received frame.
pub trait RxToken {
    /// Hands the frame to `f` and returns what `f` returns.
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R;

    /// Metadata of the received frame (e.g. a hardware timestamp).
    fn meta(&self) -> PacketMeta {
        PacketMeta::default()
    }
}

/// Permission to write one frame.
pub trait TxToken {
    /// Hands a buffer of exactly `len` bytes to `f`, which fills it with one
    /// whole link-layer frame (without FCS); the frame is sent when `f` returns.
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R;

    /// Sets the metadata of the frame about to be written (its priority).
    fn set_meta(&mut self, meta: PacketMeta) {
        let _ = meta;
    }
}

/// Per-frame metadata passed alongside the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct PacketMeta {
    /// Homa priority of a transmitted frame, 0 (lowest) to 7 (highest).
    pub priority: u8,
    /// When the frame was received, if the device knows.
    pub rx_timestamp: Option<Instant>,
}

impl PacketMeta {
    /// Metadata for a frame to be sent at `priority` (clamped to 0..=7).
    pub const fn with_priority(priority: u8) -> PacketMeta {
        PacketMeta {
            priority: if priority > 7 { 7 } else { priority },
            rx_timestamp: None,
        }
    }
    /// Metadata for a frame received at `at`.
    pub const fn received_at(at: Instant) -> PacketMeta {
        PacketMeta {
            priority: 0,
            rx_timestamp: Some(at),
        }
    }
}

/// What the stack still does for one checksum; the device does the rest.
///
/// Named as smoltcp names it, by the stack's part: `Both` (the default)
/// leaves filling on transmit and verifying on receive to the stack, `None`
/// leaves both to the device. [`ChecksumCapabilities`] says what a device
/// that takes a part over must do, and what the stack leaves for it.
///
/// `None` is the zero value: an in-memory device reporting
/// [`ChecksumCapabilities::ignored`] (as [`Loopback::new`] does) is then all
/// zeros, so a `static` of it goes to `.bss` and costs no flash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Checksum {
    /// The stack computes it on transmit and verifies it on receive.
    #[default]
    Both = 3,
    /// The stack verifies it on receive only (the device fills it on transmit).
    Rx = 1,
    /// The stack computes it on transmit only (the device verified it on receive).
    Tx = 2,
    /// The device does both; the stack does neither.
    None = 0,
}

impl Checksum {
    /// The value in which the stack verifies on receive when `rx` and
    /// computes on transmit when `tx`.
    pub const fn new(rx: bool, tx: bool) -> Checksum {
        match (rx, tx) {
            (true, true) => Checksum::Both,
            (true, false) => Checksum::Rx,
            (false, true) => Checksum::Tx,
            (false, false) => Checksum::None,
        }
    }
    /// Whether the stack should verify received checksums.
    pub const fn rx(self) -> bool {
        matches!(self, Checksum::Both | Checksum::Rx)
    }
    /// Whether the stack should compute checksums on transmit.
    pub const fn tx(self) -> bool {
        matches!(self, Checksum::Both | Checksum::Tx)
    }
}

/// Per-protocol checksum offload of a device: for each checksum, what the
/// stack still does ([`Checksum`]). The default is [`Checksum::Both`]
/// everywhere: every checksum filled and verified in software.
///
/// A device that takes over the **receive** part of a checksum (`Tx` or
/// `None`) hands the stack only frames in which that checksum is right: it
/// drops the others, or its driver checks in software what the hardware
/// could not (virtio-net marks each frame it checked; the others are the
/// driver's to check). The stack takes such a frame as it comes: one with a
/// wrong checksum is accepted as sound.
///
/// A device that takes over the **transmit** part (`Rx` or `None`)
/// completes the checksum in every frame that carries it. What the stack
/// leaves in the field for it:
///
/// - `ipv4`: 0 in the header checksum; the header is always 20 bytes (the
///   stack sends no options).
/// - `icmpv4`, `icmpv6`: 0 in the ICMP checksum; a device that fills ICMPv6
///   adds the IPv6 pseudo-header itself, as NICs that know ICMPv6 do.
/// - `homa`: the folded sum of the TCP-style pseudo-header (source,
///   destination, protocol 6 and the Homa length, over IPv4 or IPv6 alike),
///   not complemented, as Linux leaves it for the NIC (docs/protocol.md
///   2.3). The field is at byte 16 of the Homa header, which follows the IP
///   header directly (no IPv4 options, no IPv6 extension headers in what the
///   stack sends). A device that sums from a start offset to the end of the
///   frame and stores the complement at a further offset completes it
///   knowing neither Homa nor the addresses: virtio-net's `NEEDS_CSUM` with
///   `csum_start` at the Homa header and `csum_offset` 16.
///
/// Whether Homa packets carry a checksum at all, and whether received ones
/// are checked at all, is the stack's configuration (homa-stack's
/// `Config::homa_checksum_tx` and `homa_checksum_rx`); the capability says
/// only who does the work. A device that checks Homa checksums on receive
/// uses the same pseudo-header and passes a checksum of 0 (sent by Linux
/// builds that fill none).
///
/// Middleware reports the capabilities of what it wraps; one that changes
/// frames after the device's checks or before its fills reports the stack's
/// part instead ([`FaultInjector`]), and a device made of two takes each
/// part from its own half ([`Split`], [`ChecksumCapabilities::join`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct ChecksumCapabilities {
    /// The IPv4 header checksum (IPv6 has none).
    pub ipv4: Checksum,
    /// ICMPv4.
    pub icmpv4: Checksum,
    /// ICMPv6.
    pub icmpv6: Checksum,
    /// The TCP-style Homa checksum.
    pub homa: Checksum,
}

impl ChecksumCapabilities {
    /// The device handles every checksum; the stack computes and checks none.
    /// Used by in-memory devices where no bit can flip.
    pub const fn ignored() -> ChecksumCapabilities {
        ChecksumCapabilities {
            ipv4: Checksum::None,
            icmpv4: Checksum::None,
            icmpv6: Checksum::None,
            homa: Checksum::None,
        }
    }

    /// The receive parts of `rx` with the transmit parts of `tx`: the
    /// capabilities of a device that receives through one device and sends
    /// through another.
    pub const fn join(
        rx: &ChecksumCapabilities,
        tx: &ChecksumCapabilities,
    ) -> ChecksumCapabilities {
        ChecksumCapabilities {
            ipv4: Checksum::new(rx.ipv4.rx(), tx.ipv4.tx()),
            icmpv4: Checksum::new(rx.icmpv4.rx(), tx.icmpv4.tx()),
            icmpv6: Checksum::new(rx.icmpv6.rx(), tx.icmpv6.tx()),
            homa: Checksum::new(rx.homa.rx(), tx.homa.tx()),
        }
    }
}

/// What a device can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct DeviceCapabilities {
    /// Largest whole link-layer frame without FCS. For Ethernet this is the IP
    /// MTU plus 14 (18 with an 802.1Q tag), unlike Linux's meaning of "MTU".
    pub max_transmission_unit: usize,
    /// How many MTU-sized frames the device takes in a row; `None` = no limit.
    pub max_burst_size: Option<usize>,
    /// Checksum offload.
    pub checksum: ChecksumCapabilities,
    /// Link rate in Mbit/s when known; the pacer uses it to estimate the NIC queue.
    pub link_rate_mbps: Option<u32>,
}

impl Default for DeviceCapabilities {
    fn default() -> Self {
        DeviceCapabilities {
            max_transmission_unit: 1514,
            max_burst_size: None,
            checksum: ChecksumCapabilities::default(),
            link_rate_mbps: None,
        }
    }
}

impl DeviceCapabilities {
    /// The IP MTU of an Ethernet device: the frame MTU less the 14-byte header.
    pub const fn ip_mtu(&self) -> usize {
        self.max_transmission_unit.saturating_sub(14)
    }
}

impl<D: Device + ?Sized> Device for &mut D {
    type RxToken<'a>
        = D::RxToken<'a>
    where
        Self: 'a;
    type TxToken<'a>
        = D::TxToken<'a>
    where
        Self: 'a;
    fn receive(&mut self, timestamp: Instant) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
        (**self).receive(timestamp)
    }
    fn transmit(&mut self, timestamp: Instant) -> Option<Self::TxToken<'_>> {
        (**self).transmit(timestamp)
    }
    fn capabilities(&self) -> DeviceCapabilities {
        (**self).capabilities()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checksum offload with each protocol at a different part.
    fn mixed() -> ChecksumCapabilities {
        ChecksumCapabilities {
            ipv4: Checksum::Tx,
            icmpv4: Checksum::Rx,
            icmpv6: Checksum::None,
            homa: Checksum::Both,
        }
    }

    fn ring() -> Loopback<4, 600> {
        let mut l = Loopback::new();
        l.set_checksum_capabilities(mixed());
        l
    }

    #[test]
    fn middleware_reports_the_checksum_offload_of_what_it_wraps() {
        let want = ring().capabilities();
        assert_eq!(want.checksum, mixed());
        let mut l = ring();
        let by_ref: &mut Loopback<4, 600> = &mut l;
        assert_eq!(Device::capabilities(&by_ref), want, "&mut D");
        let t = Tracer::new(ring(), |_: Instant, _: TracerPacket<'_>| {});
        assert_eq!(t.capabilities(), want, "Tracer");
        let p = PcapWriter::new(ring(), std::vec::Vec::new(), PcapMode::Both);
        assert_eq!(p.capabilities(), want, "PcapWriter");
        let f: FaultInjector<_> = FaultInjector::new(ring(), 1);
        assert_eq!(f.capabilities(), want, "FaultInjector without corruption");
        let s = Split::new(ring(), ring());
        assert_eq!(s.capabilities(), want, "Split of two alike");
        let mut share: Share<_, 2, 600> = Share::new(ring());
        assert_eq!(
            share.homa().capabilities(),
            want,
            "Share, homa-stack's half"
        );
        assert_eq!(share.other().capabilities(), want, "Share, the other half");
    }

    #[test]
    fn a_checksum_is_made_of_its_two_parts() {
        for c in [Checksum::Both, Checksum::Rx, Checksum::Tx, Checksum::None] {
            assert_eq!(Checksum::new(c.rx(), c.tx()), c);
        }
        assert!(Checksum::Rx.rx() && !Checksum::Rx.tx());
        assert!(Checksum::Tx.tx() && !Checksum::Tx.rx());
    }
}
