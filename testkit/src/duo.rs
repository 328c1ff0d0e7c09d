//! A client and a server endpoint on homa-phy's two-host [`Pair`], each
//! device behind a fault injector (the faults hit the frames it receives)
//! and the client's behind a pcap writer, on a 10 Gbit/s wire with 1 us of
//! delay.

use std::io::Write;

use homa_phy::fault::{FaultConfig, FaultInjector};
use homa_phy::testing::{Pair, TestDevice, Wired};
use homa_phy::{Duration, PcapMode, PcapWriter};
use homa_stack::endpoint::{PeerSlot, RpcSlot, SetupError, SocketSlot};
use homa_stack::wire::{EthernetAddress, Ipv4Addr};
use homa_stack::{Config, Endpoint};

/// One endpoint's device: a test device behind a fault injector.
pub type Side = FaultInjector<TestDevice, 16>;

/// The client's device also writes every frame it sends or receives to a
/// pcap sink (a discarding one unless asked).
pub type ClientSide = PcapWriter<Side, Box<dyn Write>>;

/// The client (`a`) and the server (`b`) with their devices and the clock.
pub type Duo<'a> = Pair<Endpoint<'a>, Endpoint<'a>, ClientSide, Side>;

/// The client's address.
pub const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// The server's address.
pub const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// The client's IPv6 address (beside its link-local one).
pub const CLIENT_IP6: std::net::Ipv6Addr = std::net::Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
/// The server's IPv6 address.
pub const SERVER_IP6: std::net::Ipv6Addr = std::net::Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);
/// The client's link address.
pub const CLIENT_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 1]);
/// The server's link address.
pub const SERVER_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 2]);

/// Frames the wire has room for without allocating.
pub const FRAMES: usize = 1024;

/// Caller-owned memory of one endpoint.
pub struct Storage {
    rpcs: Vec<RpcSlot>,
    peers: Vec<PeerSlot>,
    sockets: Vec<SocketSlot>,
    pool: Vec<u8>,
}

impl Storage {
    /// Room for `rpcs` RPCs, 4 peers, 4 sockets and a pool of `pool_bytes`.
    pub fn new(rpcs: usize, pool_bytes: usize) -> Storage {
        Storage::with_peers(rpcs, 4, pool_bytes)
    }

    /// Room for `rpcs` RPCs, `peers` peers, 4 sockets and a pool of
    /// `pool_bytes`.
    pub fn with_peers(rpcs: usize, peers: usize, pool_bytes: usize) -> Storage {
        Storage {
            rpcs: (0..rpcs).map(|_| RpcSlot::EMPTY).collect(),
            peers: vec![PeerSlot::EMPTY; peers],
            sockets: vec![SocketSlot::EMPTY; 4],
            pool: vec![0; pool_bytes],
        }
    }

    /// An endpoint over this memory, with 4 KiB pool pages, or why not.
    pub fn try_endpoint(&mut self, config: Config) -> Result<Endpoint<'_>, SetupError> {
        Endpoint::new(
            config,
            &mut self.rpcs[..],
            &mut self.peers[..],
            &mut self.sockets[..],
            &mut self.pool[..],
            4096,
        )
    }

    /// An endpoint over this memory, with 4 KiB pool pages.
    pub fn endpoint(&mut self, config: Config) -> Endpoint<'_> {
        self.try_endpoint(config).expect("valid configuration")
    }

    /// An endpoint over this memory, leaked, for a test or a program that
    /// keeps it to the end.
    pub fn leak(self, config: Config) -> Endpoint<'static> {
        Box::leak(Box::new(self)).endpoint(config)
    }
}

/// The configuration of one end; `seed` makes runs repeatable. Homa
/// checksums are always filled (as Linux `main` does) and verified when
/// `checksums` says frames may be corrupted.
pub fn config(ip: Ipv4Addr, mac: EthernetAddress, seed: u64, checksums: bool) -> Config {
    let mut c = Config::new(ip, mac, seed);
    c.link_mbps = 10_000;
    c.homa_checksum_tx = true;
    c.homa_checksum_rx = checksums;
    c
}

/// Wires `client` and `server`; `faults` apply to the frames each
/// receives, seeded from `seed`; `pcap` gets every frame the client sends
/// or receives. Nothing is logged and room for [`FRAMES`] frames is kept,
/// so the wire itself allocates nothing while it runs.
pub fn duo<'a>(
    client: Endpoint<'a>,
    server: Endpoint<'a>,
    faults: FaultConfig,
    seed: u64,
    pcap: Option<Box<dyn Write>>,
) -> Duo<'a> {
    let side = |seed, mut faults: FaultConfig, dev| {
        // Each frame meets the faults once, on receipt.
        faults.transmit_faults = false;
        FaultInjector::with_config(dev, seed, faults)
    };
    let client_dev = TestDevice::default();
    let server_dev = TestDevice::with_pool(client_dev.pool.clone());
    let sink: Box<dyn Write> = pcap.unwrap_or_else(|| Box::new(std::io::sink()));
    let mut d = Pair::with_devices(
        client,
        server,
        PcapWriter::new(side(seed, faults, client_dev), sink, PcapMode::Both),
        side(seed ^ 0x5a5a, faults, server_dev),
    );
    d.link_mbps = Some(10_000);
    d.delay = Duration::from_micros(1);
    d.logging = false;
    d.reserve(FRAMES);
    d
}

/// What a pair of endpoints can say about itself.
pub trait Endpoints {
    /// Live RPCs and unfreed pool bytes left in both ends.
    fn leaked(&self) -> usize;
    /// Gives both ends up to `limit` to collect acks and free their state.
    fn drain(&mut self, limit: Duration);
}

/// Live RPCs and unfreed pool bytes of one endpoint.
pub fn held(e: &Endpoint<'_>) -> usize {
    e.rpcs_in_use() + (e.pool_capacity_bytes() - e.pool_free_bytes())
}

impl<DA: Wired, DB: Wired> Endpoints for Pair<Endpoint<'_>, Endpoint<'_>, DA, DB> {
    fn leaked(&self) -> usize {
        held(&self.a) + held(&self.b)
    }
    fn drain(&mut self, limit: Duration) {
        self.run_until(limit, |d| d.leaked() == 0);
    }
}
