//! Any [`Device`] as a [`smoltcp::phy::Device`] (feature `smoltcp`).
//!
//! The token signatures are the same in both crates, so the adapter only
//! forwards them and converts the timestamps. Its use is smoltcp on the
//! other half of a [`Share`](crate::share::Share), beside homa-stack on
//! the same NIC:
//!
//! ```
//! use homa_phy::smoltcp::{to_smoltcp, SmoltcpDevice};
//! use homa_phy::{Instant, Loopback, Share};
//! use smoltcp::phy::Device as _;
//!
//! let mut share: Share<Loopback<8>, 4> = Share::new(Loopback::new());
//! let now = Instant::from_millis(1);
//! // homa-stack polls one half: `endpoint.poll(now, &mut share.homa())`;
//! // smoltcp's interface the other:
//! let mut other = share.other();
//! let mut device = SmoltcpDevice(&mut other);
//! // `iface.poll(to_smoltcp(now), &mut device, &mut sockets)`
//! assert_eq!(device.capabilities().max_transmission_unit, 1514);
//! # let _ = to_smoltcp(now);
//! ```
//!
//! The medium is Ethernet and the MTU the device's; the checksum
//! capabilities are smoltcp's defaults (smoltcp computes and verifies every
//! checksum itself), whatever offload the device declares.

use ::smoltcp::phy;
use ::smoltcp::time::Instant as SmolInstant;

use crate::{Device, Instant, RxToken, TxToken};

/// Borrows a [`Device`] as a smoltcp device for one poll of an interface.
pub struct SmoltcpDevice<'d, D: ?Sized>(pub &'d mut D);

/// A receive token of the device, as smoltcp's.
pub struct SmoltcpRx<T>(T);

/// A transmit token of the device, as smoltcp's.
pub struct SmoltcpTx<T>(T);

impl<T: RxToken> phy::RxToken for SmoltcpRx<T> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        self.0.consume(f)
    }
}

impl<T: TxToken> phy::TxToken for SmoltcpTx<T> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        self.0.consume(len, f)
    }
}

/// smoltcp's timestamp of `t`.
pub fn to_smoltcp(t: Instant) -> SmolInstant {
    SmolInstant::from_micros(i64::try_from(t.total_micros()).unwrap_or(i64::MAX))
}

/// The timestamp of smoltcp's `t`; a time before zero is zero.
pub fn from_smoltcp(t: SmolInstant) -> Instant {
    Instant::from_micros(u64::try_from(t.total_micros()).unwrap_or(0))
}

impl<D: Device + ?Sized> phy::Device for SmoltcpDevice<'_, D> {
    type RxToken<'a>
        = SmoltcpRx<D::RxToken<'a>>
    where
        Self: 'a;
    type TxToken<'a>
        = SmoltcpTx<D::TxToken<'a>>
    where
        Self: 'a;

    fn receive(&mut self, t: SmolInstant) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
        let (rx, tx) = self.0.receive(from_smoltcp(t))?;
        Some((SmoltcpRx(rx), SmoltcpTx(tx)))
    }

    fn transmit(&mut self, t: SmolInstant) -> Option<Self::TxToken<'_>> {
        self.0.transmit(from_smoltcp(t)).map(SmoltcpTx)
    }

    fn capabilities(&self) -> phy::DeviceCapabilities {
        let mut caps = phy::DeviceCapabilities::default();
        caps.medium = phy::Medium::Ethernet;
        caps.max_transmission_unit = self.0.capabilities().max_transmission_unit;
        caps
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Loopback;
    use ::smoltcp::phy::{Device as _, RxToken as _, TxToken as _};

    #[test]
    fn frames_pass_both_ways_and_timestamps_convert() {
        let mut ring: Loopback<4> = Loopback::new();
        let now = SmolInstant::from_micros(1_500);
        assert_eq!(from_smoltcp(now), Instant::from_micros(1_500));
        assert_eq!(to_smoltcp(Instant::from_micros(1_500)), now);
        assert_eq!(from_smoltcp(SmolInstant::from_micros(-5)), Instant::ZERO);
        let mut dev = SmoltcpDevice(&mut ring);
        assert_eq!(dev.capabilities().max_transmission_unit, 1514);
        dev.transmit(now).unwrap().consume(60, |buf| buf.fill(0x5a));
        let (rx, _) = dev.receive(now).unwrap();
        assert_eq!(rx.consume(|f| (f.len(), f[59])), (60, 0x5a));
        assert!(dev.receive(now).is_none());
    }
}
