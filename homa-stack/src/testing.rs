//! The endpoint as a host of homa-phy's test kit ([`homa_phy::testing`]),
//! so its two-endpoint driver serves homa-stack's own tests and every other
//! crate's.

use crate::phy::testing::Host;
use crate::phy::{Device, Instant};
use crate::Endpoint;

impl Host for Endpoint<'_> {
    fn poll<D: Device + ?Sized>(&mut self, now: Instant, device: &mut D) {
        Endpoint::poll(self, now, device);
    }
    fn poll_at(&self) -> Option<Instant> {
        Endpoint::poll_at(self)
    }
}
