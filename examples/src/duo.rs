//! Two endpoints, a client and a server, on in-memory devices wired back to
//! back, driven on a virtual clock.
//!
//! Each endpoint polls its own device: a receive ring and a transmit ring
//! ([`Split`]) behind a fault injector (the faults hit the frames it
//! receives); after each poll the frames it sent move to the other's receive
//! ring. The clock models a link of `link_mbps` with a
//! one-way delay: moving frames costs their serialisation time, and an idle
//! pair jumps straight to the earliest timer, so a run takes as long as the
//! computer needs, not as long as the protocol's timers.

use homa_phy::fault::{FaultConfig, FaultInjector};
use homa_phy::{
    forward, BoxedLoopback, ChecksumCapabilities, Duration, Instant, PcapMode, PcapWriter, Split,
};
use homa_stack::endpoint::{PeerSlot, RpcSlot, SocketSlot};
use homa_stack::wire::{EthernetAddress, Ipv4Addr};
use homa_stack::{Config, Endpoint};
use std::io::Write;

/// Frames a ring holds.
pub const RING: usize = 1024;

/// A ring of frames.
pub type Ring = BoxedLoopback<RING>;

/// One endpoint's device: receive and transmit rings behind a fault injector.
pub type Side = FaultInjector<Split<Ring, Ring>, 16>;

fn side(seed: u64, mut faults: FaultConfig) -> Side {
    // Both ends have an injector: each frame meets the faults once, on receipt.
    faults.transmit_faults = false;
    // Real checksums on the wire, so captures of the run look valid.
    let mut tx = Ring::boxed();
    tx.set_checksum_capabilities(ChecksumCapabilities::default());
    FaultInjector::with_config(Split::new(Ring::boxed(), tx), seed, faults)
}

/// The client's device also writes every frame it sends or receives to a
/// pcap sink (a discarding one unless asked).
pub type ClientSide = PcapWriter<Side, Box<dyn Write>>;

/// Addresses of the two ends.
pub const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// The server's address.
pub const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// The client's link address.
pub const CLIENT_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 1]);
/// The server's link address.
pub const SERVER_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 2]);

/// Caller-owned memory of one endpoint.
pub struct Storage {
    rpcs: Vec<RpcSlot>,
    peers: Vec<PeerSlot>,
    sockets: Vec<SocketSlot>,
    pool: Vec<u8>,
}

impl Storage {
    /// Room for `rpcs` RPCs and a pool of `pool_bytes`.
    pub fn new(rpcs: usize, pool_bytes: usize) -> Storage {
        Storage {
            rpcs: (0..rpcs).map(|_| RpcSlot::EMPTY).collect(),
            peers: vec![PeerSlot::EMPTY; 4],
            sockets: vec![SocketSlot::EMPTY; 4],
            pool: vec![0; pool_bytes],
        }
    }

    /// An endpoint over this memory.
    pub fn endpoint(&mut self, config: Config) -> Endpoint<'_> {
        Endpoint::new(
            config,
            &mut self.rpcs[..],
            &mut self.peers[..],
            &mut self.sockets[..],
            &mut self.pool[..],
            4096,
        )
        .expect("valid configuration")
    }
}

/// The two ends and the clock.
pub struct Duo<'a> {
    /// The client endpoint.
    pub client: Endpoint<'a>,
    /// The server endpoint.
    pub server: Endpoint<'a>,
    /// The client's device.
    pub client_dev: ClientSide,
    /// The server's device.
    pub server_dev: Side,
    /// Virtual time.
    pub now: Instant,
    /// Link rate for the time model.
    pub link_mbps: u64,
    /// One-way delay of the wire.
    pub delay: Duration,
    /// The server has vanished: frames to it are lost and it is not polled.
    pub server_gone: bool,
}

/// The configuration of one end; `seed` makes runs repeatable. Homa
/// checksums are always filled (as Linux `main` does) and verified when
/// `checksums` says frames may be corrupted.
pub fn config(ip: Ipv4Addr, mac: EthernetAddress, seed: u64, checksums: bool) -> Config {
    let mut c = Config::new(ip, mac);
    c.random_seed = seed;
    c.link_mbps = 10_000;
    c.homa_checksum_tx = true;
    c.homa_checksum_rx = checksums;
    c
}

impl<'a> Duo<'a> {
    /// Wires `client` and `server`; faults apply to frames each receives.
    pub fn new(
        client: Endpoint<'a>,
        server: Endpoint<'a>,
        faults: FaultConfig,
        seed: u64,
        pcap: Option<Box<dyn Write>>,
    ) -> Duo<'a> {
        let sink: Box<dyn Write> = pcap.unwrap_or_else(|| Box::new(std::io::sink()));
        let mode = PcapMode::Both;
        Duo {
            client,
            server,
            client_dev: PcapWriter::new(side(seed, faults), sink, mode),
            server_dev: side(seed ^ 0x5a5a, faults),
            now: Instant::from_millis(1),
            link_mbps: 10_000,
            delay: Duration::from_micros(1),
            server_gone: false,
        }
    }

    /// Polls both ends once and moves the frames each sent; returns whether
    /// any frame moved.
    pub fn step(&mut self) -> bool {
        self.client.poll(self.now, &mut self.client_dev);
        let a = forward(
            self.client_dev.get_mut().get_mut().tx_mut(),
            self.server_dev.get_mut().rx_mut(),
            self.now,
        );
        if self.server_gone {
            self.server_dev.get_mut().rx_mut().clear();
        } else {
            self.server.poll(self.now, &mut self.server_dev);
        }
        let b = forward(
            self.server_dev.get_mut().tx_mut(),
            self.client_dev.get_mut().get_mut().rx_mut(),
            self.now,
        );
        let bytes = (a.bytes + b.bytes) as u64;
        if bytes > 0 {
            // Both directions share nothing, so the busier one sets the pace.
            let busiest = a.bytes.max(b.bytes) as u64 + 24 * (a.frames.max(b.frames) as u64);
            self.now += Duration::from_nanos(busiest * 8 * 1000 / self.link_mbps) + self.delay;
        }
        bytes > 0
    }

    /// Advances the clock to the next thing either end or a held frame waits
    /// for, when nothing moved in the last step.
    pub fn idle(&mut self) {
        let mut t = Instant::MAX;
        for at in [
            self.client.poll_at(),
            self.server.poll_at(),
            self.client_dev.get_ref().poll_at(),
            self.server_dev.poll_at(),
        ]
        .into_iter()
        .flatten()
        {
            t = t.min(at);
        }
        let pending = !self.client_dev.get_ref().get_ref().rx_ref().is_empty()
            || !self.server_dev.get_ref().rx_ref().is_empty();
        self.now = if pending || t <= self.now {
            self.now + Duration::from_nanos(100)
        } else if t == Instant::MAX {
            self.now + Duration::from_millis(1)
        } else {
            t
        };
    }

    /// Live RPCs and unfreed pool bytes left in both ends.
    pub fn leaked(&self) -> usize {
        self.client.rpcs_in_use()
            + self.server.rpcs_in_use()
            + (self.client.pool_capacity_bytes() - self.client.pool_free_bytes())
            + (self.server.pool_capacity_bytes() - self.server.pool_free_bytes())
    }

    /// Flushes the pcap file, if any.
    pub fn flush(&mut self) {
        let _ = self.client_dev.flush();
    }

    /// Gives the server's side time to collect acks and free its state.
    pub fn drain(&mut self, limit: Duration) {
        let end = self.now + limit;
        while self.now < end && self.leaked() > 0 {
            if !self.step() {
                self.idle();
            }
        }
    }
}
