//! A host's NIC port seen as a [`Device`].

use super::Fabric;
use homa_phy::time::Instant;
use homa_phy::{Device, DeviceCapabilities, PacketMeta, RxToken, TxToken};

/// The NIC port of one host, borrowed from the [`Fabric`].
///
/// Time is the fabric's: the `timestamp` arguments of the `Device` methods are
/// ignored and frames are sent at [`Fabric::now`].
#[derive(Debug)]
pub struct HostPort<'f> {
    fabric: &'f mut Fabric,
    host: usize,
}

impl<'f> HostPort<'f> {
    pub(super) fn new(fabric: &'f mut Fabric, host: usize) -> HostPort<'f> {
        HostPort { fabric, host }
    }

    /// The host this port belongs to.
    pub fn host(&self) -> usize {
        self.host
    }
}

impl Device for HostPort<'_> {
    type RxToken<'a>
        = SimRxToken
    where
        Self: 'a;
    type TxToken<'a>
        = SimTxToken<'a>
    where
        Self: 'a;

    /// The oldest visible frame, unless the NIC queue limit leaves no slot to
    /// answer with (then the frame stays queued).
    fn receive(&mut self, _timestamp: Instant) -> Option<(SimRxToken, SimTxToken<'_>)> {
        if !self.fabric.tx_slot_free(self.host) {
            return None;
        }
        let rx = self.fabric.pop_rx(self.host)?;
        Some((rx, SimTxToken::new(self.fabric, self.host)))
    }

    /// A slot, unless [`Config::nic_queue_frames`](super::Config) frames are
    /// already waiting for the host link.
    fn transmit(&mut self, _timestamp: Instant) -> Option<SimTxToken<'_>> {
        if !self.fabric.tx_slot_free(self.host) {
            return None;
        }
        Some(SimTxToken::new(self.fabric, self.host))
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let cfg = self.fabric.config();
        let mut caps = DeviceCapabilities::default();
        caps.max_transmission_unit = cfg.mtu;
        caps.max_burst_size = cfg.nic_queue_frames;
        caps.checksum = cfg.checksum;
        caps.link_rate_mbps = Some(cfg.host_link_mbps);
        caps
    }
}

/// A received frame, owned.
#[derive(Debug)]
pub struct SimRxToken {
    data: Vec<u8>,
    arrived: Instant,
    visible: Instant,
}

impl SimRxToken {
    pub(super) fn new(data: Vec<u8>, arrived: Instant, visible: Instant) -> SimRxToken {
        SimRxToken {
            data,
            arrived,
            visible,
        }
    }

    /// When the frame's last bit reached the NIC (before the receive delay).
    pub fn arrived_at(&self) -> Instant {
        self.arrived
    }
}

impl RxToken for SimRxToken {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.data)
    }

    /// `rx_timestamp` is when the frame became visible to `receive`, after
    /// the host receive delay: the end of the one-way path that
    /// [`Fabric::ideal_one_way`] measures.
    fn meta(&self) -> PacketMeta {
        PacketMeta::received_at(self.visible)
    }
}

/// Permission to send one frame from a host.
#[derive(Debug)]
pub struct SimTxToken<'f> {
    fabric: &'f mut Fabric,
    host: usize,
    priority: Option<u8>,
    rank: (u32, u32),
}

impl<'f> SimTxToken<'f> {
    fn new(fabric: &'f mut Fabric, host: usize) -> SimTxToken<'f> {
        SimTxToken {
            fabric,
            host,
            priority: None,
            rank: (0, 0),
        }
    }

    /// Gives the frame its pFabric rank (bytes its message has left; 0,
    /// the default, goes first) and its flow (the connection, whose frames
    /// a pFabric port keeps in order).
    pub fn set_rank(&mut self, rank: u32, flow: u32) {
        self.rank = (rank, flow);
    }
}

impl TxToken for SimTxToken<'_> {
    /// Lends a zeroed buffer of `len` bytes; the frame is sent at
    /// [`Fabric::now`] once `f` returns.
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut data = vec![0u8; len];
        let result = f(&mut data);
        self.fabric
            .host_transmit(self.host, data, self.priority, self.rank);
        result
    }

    /// Gives the frame the priority of `meta` (clamped to 7); without this
    /// call the priority is read from the frame's bytes.
    fn set_meta(&mut self, meta: PacketMeta) {
        self.priority = Some(meta.priority.min(7));
    }
}
