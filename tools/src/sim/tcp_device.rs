//! A host's fabric port as a `smoltcp::phy::Device`.
//!
//! smoltcp runs with the IP medium; this adapter adds and strips the
//! Ethernet header, taking the destination MAC from the fabric's address
//! plan (static neighbours, as the Homa hosts have, so no ARP). Frames keep
//! TOS 0 and are sent without a priority, so the fabric puts every TCP
//! frame in queue 0. Checksums are neither computed nor checked, as for the
//! Homa hosts: the fabric never corrupts a frame.
//!
//! Time: smoltcp counts microseconds, the fabric nanoseconds. smoltcp is
//! polled at fabric instants and told `floor(ns / 1000)` microseconds; its
//! deadlines come back as whole microseconds.

use std::collections::HashMap;

use crate::fabric::Fabric;
use homa_phy::{Device as _, TxToken as _};
use smoltcp::phy::{self, ChecksumCapabilities, DeviceCapabilities, Medium};

/// Ethernet header length.
pub const ETH_HEADER: usize = 14;

/// smoltcp's time for fabric time `ns`.
pub fn smol_time(ns: u64) -> smoltcp::time::Instant {
    smoltcp::time::Instant::from_micros((ns / 1000) as i64)
}

/// Fabric time of smoltcp time `t`.
pub fn fabric_time(t: smoltcp::time::Instant) -> u64 {
    t.total_micros().max(0) as u64 * 1000
}

/// The source IPv4 address of an Ethernet frame carrying IPv4, if it is one.
pub fn ipv4_source(frame: &[u8]) -> Option<[u8; 4]> {
    if frame.len() < ETH_HEADER + 20 || frame[12..14] != [0x08, 0x00] {
        return None;
    }
    frame[ETH_HEADER + 12..ETH_HEADER + 16].try_into().ok()
}

/// One host's port, lent to smoltcp for one poll. `staged` is the frame
/// (Ethernet header included) that the next `receive` hands over.
pub struct SmolPort<'a> {
    /// The fabric.
    pub fabric: &'a mut Fabric,
    /// This host.
    pub host: usize,
    /// Every host's MAC by IPv4 address.
    pub macs: &'a HashMap<[u8; 4], [u8; 6]>,
    /// The frame to deliver, taken by `receive`.
    pub staged: Option<&'a [u8]>,
}

impl phy::Device for SmolPort<'_> {
    type RxToken<'b>
        = SmolRx<'b>
    where
        Self: 'b;
    type TxToken<'b>
        = SmolTx<'b>
    where
        Self: 'b;

    fn receive(
        &mut self,
        _timestamp: smoltcp::time::Instant,
    ) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
        let frame = self.staged.take()?;
        let tx = SmolTx {
            fabric: self.fabric,
            host: self.host,
            macs: self.macs,
        };
        Some((SmolRx(&frame[ETH_HEADER..]), tx))
    }

    fn transmit(&mut self, _timestamp: smoltcp::time::Instant) -> Option<Self::TxToken<'_>> {
        Some(SmolTx {
            fabric: self.fabric,
            host: self.host,
            macs: self.macs,
        })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ip;
        caps.max_transmission_unit = self.fabric.config().mtu - ETH_HEADER;
        caps.checksum = ChecksumCapabilities::ignored();
        caps
    }
}

/// A received IP packet.
pub struct SmolRx<'b>(&'b [u8]);

impl phy::RxToken for SmolRx<'_> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(self.0)
    }
}

/// Permission to send one IP packet from a host.
pub struct SmolTx<'b> {
    fabric: &'b mut Fabric,
    host: usize,
    macs: &'b HashMap<[u8; 4], [u8; 6]>,
}

impl phy::TxToken for SmolTx<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let now = self.fabric.now();
        let src_mac = self.fabric.host_mac(self.host);
        let macs = self.macs;
        let mut port = self.fabric.device(self.host);
        let Some(tx) = port.transmit(now) else {
            // A NIC queue limit (homa-sim sets none): the frame is lost.
            return f(&mut vec![0u8; len]);
        };
        tx.consume(ETH_HEADER + len, |frame| {
            let r = f(&mut frame[ETH_HEADER..]);
            // The packet is written first: its destination picks the MAC.
            let dst = &frame[ETH_HEADER + 16..ETH_HEADER + 20];
            let dst_mac = macs
                .get(&[dst[0], dst[1], dst[2], dst[3]])
                .copied()
                .unwrap_or([0xff; 6]);
            frame[0..6].copy_from_slice(&dst_mac);
            frame[6..12].copy_from_slice(&src_mac);
            frame[12..14].copy_from_slice(&[0x08, 0x00]);
            r
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_conversion_truncates_to_microseconds() {
        assert_eq!(smol_time(1_999).total_micros(), 1);
        assert_eq!(fabric_time(smol_time(5_000)), 5_000);
    }

    #[test]
    fn source_address_of_ipv4_frames_only() {
        let mut f = [0u8; 34];
        f[12] = 0x08;
        f[26..30].copy_from_slice(&[10, 0, 1, 2]);
        assert_eq!(ipv4_source(&f), Some([10, 0, 1, 2]));
        f[13] = 0x06; // ARP
        assert_eq!(ipv4_source(&f), None);
        assert_eq!(ipv4_source(&f[..20]), None);
    }
}
