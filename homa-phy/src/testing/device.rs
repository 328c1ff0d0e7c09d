//! A device whose frames wait in queues a test can read and fill.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::vec::Vec;

use crate::{
    ChecksumCapabilities, Device, DeviceCapabilities, Instant, PacketMeta, RxToken, TxToken,
};

/// Spare frame buffers, shared by the devices of one wire: a frame the
/// host has read goes back here and the next frame sent reuses it, so once
/// [`reserve`](Self::reserve)d a wire moves frames without allocating.
#[derive(Debug, Clone, Default)]
pub struct FramePool(Rc<RefCell<Vec<Vec<u8>>>>);

impl FramePool {
    /// Keeps `frames` buffers of `mtu` bytes ready, and room to take back
    /// twice as many.
    pub fn reserve(&self, frames: usize, mtu: usize) {
        let mut spare = self.0.borrow_mut();
        spare.reserve(2 * frames);
        while spare.len() < frames {
            spare.push(Vec::with_capacity(mtu));
        }
    }

    /// A buffer of `len` bytes, each `fill`.
    pub fn take(&self, len: usize, fill: u8) -> Vec<u8> {
        let mut buf = self.0.borrow_mut().pop().unwrap_or_default();
        buf.clear();
        buf.resize(len, fill);
        buf
    }

    /// Takes back a frame nobody needs any more.
    pub fn give(&self, frame: Vec<u8>) {
        self.0.borrow_mut().push(frame);
    }

    /// Buffers ready.
    pub fn spare(&self) -> usize {
        self.0.borrow().len()
    }
}

/// One side of an in-memory wire: frames for the host wait in `rx`, frames
/// it sent in `tx` with their metadata. A transmit buffer starts as 0xa5
/// bytes, so a frame the host did not fill completely shows it.
#[derive(Debug, Default)]
pub struct TestDevice {
    /// Frames the host will receive, oldest first.
    pub rx: VecDeque<Vec<u8>>,
    /// Frames the host sent, oldest first.
    pub tx: VecDeque<(Vec<u8>, PacketMeta)>,
    /// At most this many frames wait in `tx`: `transmit` says no beyond.
    pub tx_limit: Option<usize>,
    /// The device's MTU (whole frame), when not the default 1514.
    pub mtu: Option<usize>,
    /// The checksum offload it reports (by default none: the host does
    /// every checksum). The device itself fills and checks nothing: a
    /// test that claims offload sees what the host leaves for the device.
    pub checksum: ChecksumCapabilities,
    /// How many more frames the host may receive; `None`: no limit.
    pub rx_budget: Option<usize>,
    /// Frames the host received.
    pub received: u64,
    /// Frames the host sent.
    pub transmitted: u64,
    /// Where read frames go back to (shared with the other side of a wire).
    pub pool: FramePool,
}

impl TestDevice {
    /// A device whose spare buffers come from `pool`.
    pub fn with_pool(pool: FramePool) -> TestDevice {
        TestDevice {
            pool,
            ..TestDevice::default()
        }
    }

    /// Keeps room for `frames` frames in each queue and in the pool.
    pub fn reserve(&mut self, frames: usize) {
        self.rx.reserve(frames);
        self.tx.reserve(frames);
        self.pool.reserve(frames, self.mtu.unwrap_or(1514));
    }

    /// Throws away the frames the host sent (their buffers go back to the
    /// pool).
    pub fn discard_sent(&mut self) {
        while let Some((f, _)) = self.tx.pop_front() {
            self.pool.give(f);
        }
    }

    /// Throws away the frames waiting for the host.
    pub fn discard_received(&mut self) {
        while let Some(f) = self.rx.pop_front() {
            self.pool.give(f);
        }
    }
}

/// A received frame; its buffer goes back to the pool once read.
#[derive(Debug)]
pub struct TestRx {
    frame: Vec<u8>,
    pool: FramePool,
}

impl Drop for TestRx {
    fn drop(&mut self) {
        self.pool.give(std::mem::take(&mut self.frame));
    }
}

/// Room for one frame, queued in `tx` once written.
#[derive(Debug)]
pub struct TestTx<'a> {
    tx: &'a mut VecDeque<(Vec<u8>, PacketMeta)>,
    transmitted: &'a mut u64,
    pool: &'a FramePool,
    meta: PacketMeta,
}

impl RxToken for TestRx {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.frame)
    }
}

impl TxToken for TestTx<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut buf = self.pool.take(len, 0xa5);
        let r = f(&mut buf);
        self.tx.push_back((buf, self.meta));
        *self.transmitted += 1;
        r
    }
    fn set_meta(&mut self, meta: PacketMeta) {
        self.meta = meta;
    }
}

impl Device for TestDevice {
    type RxToken<'a> = TestRx;
    type TxToken<'a> = TestTx<'a>;
    fn receive(&mut self, _: Instant) -> Option<(TestRx, TestTx<'_>)> {
        if self.rx_budget == Some(0) {
            return None;
        }
        let frame = self.rx.pop_front()?;
        if let Some(n) = self.rx_budget.as_mut() {
            *n -= 1;
        }
        self.received += 1;
        let rx = TestRx {
            frame,
            pool: self.pool.clone(),
        };
        let tx = TestTx {
            tx: &mut self.tx,
            transmitted: &mut self.transmitted,
            pool: &self.pool,
            meta: PacketMeta::default(),
        };
        Some((rx, tx))
    }
    fn transmit(&mut self, _: Instant) -> Option<TestTx<'_>> {
        if self.tx_limit.is_some_and(|l| self.tx.len() >= l) {
            return None;
        }
        Some(TestTx {
            tx: &mut self.tx,
            transmitted: &mut self.transmitted,
            pool: &self.pool,
            meta: PacketMeta::default(),
        })
    }
    fn capabilities(&self) -> DeviceCapabilities {
        let default = DeviceCapabilities::default();
        DeviceCapabilities {
            link_rate_mbps: Some(10_000),
            max_transmission_unit: self.mtu.unwrap_or(default.max_transmission_unit),
            checksum: self.checksum,
            ..default
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_keep_order_meta_and_limits_and_buffers_are_reused() {
        let mut d = TestDevice::default();
        d.reserve(4);
        assert_eq!(d.pool.spare(), 4);
        d.rx.push_back(vec![1, 2, 3]);
        let (rx, mut tx) = d.receive(Instant::ZERO).unwrap();
        assert_eq!(rx.consume(|f| f.to_vec()), [1, 2, 3]);
        tx.set_meta(PacketMeta::with_priority(5));
        tx.consume(2, |b| b[0] = 9);
        assert_eq!(
            d.tx.pop_front().unwrap(),
            (vec![9, 0xa5], PacketMeta::with_priority(5))
        );
        // One buffer out to the reply, the read frame's buffer back in.
        assert_eq!(d.pool.spare(), 4);
        assert_eq!((d.received, d.transmitted), (1, 1));
        d.tx_limit = Some(1);
        d.transmit(Instant::ZERO).unwrap().consume(1, |_| ());
        assert!(d.transmit(Instant::ZERO).is_none());
        d.discard_sent();
        d.rx.extend([vec![1], vec![2]]);
        d.rx_budget = Some(1);
        assert!(d.receive(Instant::ZERO).is_some());
        assert!(d.receive(Instant::ZERO).is_none(), "the budget is spent");
        d.mtu = Some(1000);
        assert_eq!(d.capabilities().max_transmission_unit, 1000);
    }
}
