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
#![cfg_attr(not(any(test, feature = "std")), no_std)]
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod fault;
pub mod loopback;
pub mod pcap;
#[cfg(all(feature = "std", target_os = "linux"))]
pub mod raw_socket;
#[cfg(all(feature = "std", target_os = "linux"))]
pub mod tap;
pub mod time;
pub mod tracer;

pub use fault::{FaultConfig, FaultInjector, FaultStats};
#[cfg(feature = "std")]
pub use loopback::BoxedLoopback;
pub use loopback::{FrameSlot, Loopback};
pub use pcap::{PcapLinkType, PcapMode, PcapSink, PcapWriter};
#[cfg(all(feature = "std", target_os = "linux"))]
pub use raw_socket::RawSocket;
#[cfg(all(feature = "std", target_os = "linux"))]
pub use tap::{wait, TapInterface};
pub use time::{Duration, Instant};
pub use tracer::{Tracer, TracerDirection, TracerPacket};

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

/// Which checksums a device computes or verifies itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Checksum {
    /// The stack computes it on transmit and verifies it on receive.
    #[default]
    Both,
    /// The stack verifies it on receive only (the device fills it on transmit).
    Rx,
    /// The stack computes it on transmit only (the device verified it on receive).
    Tx,
    /// The device does both; the stack does neither.
    None,
}

impl Checksum {
    /// Whether the stack should verify received checksums.
    pub const fn rx(self) -> bool {
        matches!(self, Checksum::Both | Checksum::Rx)
    }
    /// Whether the stack should compute checksums on transmit.
    pub const fn tx(self) -> bool {
        matches!(self, Checksum::Both | Checksum::Tx)
    }
}

/// Per-protocol checksum offload of a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct ChecksumCapabilities {
    /// The IPv4 header checksum.
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
