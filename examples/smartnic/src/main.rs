//! A SmartNIC-class board on the wire: homa-stack and embassy-net on an
//! aarch64 core's virtio-net NIC.
//!
//! QEMU's `virt` board with a Cortex-A53, its `virtio-net-device` on a
//! virtio-mmio transport joined to a host TAP. The NIC
//! ([`homa_smartnic::virtio::VirtioNet`]) is shared through
//! `homa_phy::share::driver::SharedDriver`: homa-stack (passive: it answers
//! neither ARP nor pings) polls the Homa half, and embassy-net 0.9 the other
//! half, answering ARP, ping and UDP echo on port 7 for the same IP and MAC.
//! The peer is a Linux host running `homa-perf`:
//!
//! - a Homa server on port 500 answers `homa-perf client` requests as
//!   `homa-perf server` does (`homa_perf_peer::serve`): each checked byte
//!   for byte, a long one in slices with the network polled between them,
//!   then the response homa-perf asks for (an echo or its salted pattern;
//!   a request shorter than homa-perf's header is echoed);
//! - a client task calls each `homa-perf server` of `SERVERS` with each
//!   of [`SIZES`] for [`ROUNDS`] rounds (in `.ci/board-test` the second
//!   drops 1% of the frames) and checks every response byte; once all
//!   verified it prints `PASS` and keeps serving (the host ends QEMU).
//!
//! The board's address and the servers' come from the build's environment
//! (`HOMA_BOARD_IP`, `HOMA_BOARD_SERVERS`; `homa_perf_peer::BOARD`); the MAC
//! from QEMU's `mac=`. Messages up to 1,000,000 bytes either way. Statics
//! in `.bss`; nothing is allocated. It prints the longest gap between two
//! polls of the network (`network polls: ...`) as it grows.
#![no_std]
#![no_main]
#![deny(unsafe_code)]

use embassy_executor::{Executor, Spawner};
use embassy_futures::join::join;
use embassy_net::udp::{PacketMetadata, UdpSocket};
use embassy_net::{Ipv4Cidr, StackResources, StaticConfigV4};
use semihosting::println;
use static_cell::{ConstStaticCell, StaticCell};

use homa_perf_peer::{call_rounds, run_timed, serve, Rounds, Tally, BOARD, SERVERS};
use homa_phy::share::driver::{DriverHalf, SharedDriver};
use homa_smartnic::clock::Clock;
use homa_smartnic::virtio::{self, Buffers, VirtioNet, BUF, QUEUE};
use homa_smartnic::{finish, hash_seed};
use homa_stack::asynch::{EmbassyDriver, Runner, Stack};
use homa_stack::endpoint::{PeerSlot, RpcSlot, SocketSlot};
use homa_stack::storage::{buffer_len_for, pages_for, MAX_MESSAGE_LEN};
use homa_stack::wire::EthernetAddress;
use homa_stack::{Config, Endpoint};
use virtio_drivers::transport::mmio::MmioTransport;

const PAGE: usize = 4096;
/// The largest message either way: Homa's limit, 1,000,000 bytes.
const MAX_MSG: usize = MAX_MESSAGE_LEN;
/// A request and a response of each direction at once, and some pages for
/// responses still held until their ACK.
const POOL: usize = buffer_len_for(4 * pages_for(MAX_MSG, PAGE) + 32, PAGE);
const RPCS: usize = 16;
const PEERS: usize = 4;
const SOCKETS: usize = 2;
/// Async sockets on the stack (a server and a client).
const SLOTS: usize = 2;
/// Frames each side of the shared NIC can hold: as many as the NIC's
/// receive buffers and as many again, so that a half taking a second batch
/// in one poll (embassy-net does, after a frame of its own) finds room.
const SHARE_FRAMES: usize = 2 * QUEUE;
const SHARE_MTU: usize = 1518;

/// Homa port of the board's server and of homa-perf's (its default).
const HOMA_PORT: u16 = 500;
const ECHO_PORT: u16 = 7;
/// The board client's RPC sizes: 1 byte as an echo (homa-perf's header is
/// 12 bytes), the rest asking for a response of their own size.
const SIZES: [usize; 5] = [1, 1400, 1401, 40_000, MAX_MSG];
const ROUNDS: usize = 2;

type Nic = VirtioNet<MmioTransport<'static>>;
type Shared = SharedDriver<Nic, SHARE_FRAMES, SHARE_MTU>;
type Half = DriverHalf<'static, Nic, SHARE_FRAMES, SHARE_MTU>;
type HomaStack = Stack<'static, SLOTS>;

static RPC_TABLE: StaticCell<[RpcSlot; RPCS]> = StaticCell::new();
static PEER_TABLE: StaticCell<[PeerSlot; PEERS]> = StaticCell::new();
static SOCKET_TABLE: StaticCell<[SocketSlot; SOCKETS]> = StaticCell::new();
static POOL_MEM: ConstStaticCell<[u8; POOL]> = ConstStaticCell::new([0; POOL]);
static RX_BUFS: ConstStaticCell<Buffers> = ConstStaticCell::new([[0; BUF]; QUEUE]);
static TX_BUFS: ConstStaticCell<Buffers> = ConstStaticCell::new([[0; BUF]; QUEUE]);
static SHARED: StaticCell<Shared> = StaticCell::new();
static STACK: StaticCell<HomaStack> = StaticCell::new();
static NET_RESOURCES: StaticCell<StackResources<2>> = StaticCell::new();
static UDP_MEM: ConstStaticCell<([u8; 1600], [u8; 1600], [u8; 1600])> =
    ConstStaticCell::new(([0; 1600], [0; 1600], [0; 1600]));
static EXECUTOR: StaticCell<Executor> = StaticCell::new();
static TALLY: StaticCell<Tally> = StaticCell::new();
/// Where the server makes its replies and the client its requests, a slice
/// at a time, and the client checks its responses.
static SERVER_SCRATCH: ConstStaticCell<[u8; MAX_MSG]> = ConstStaticCell::new([0; MAX_MSG]);
static CLIENT_SCRATCH: ConstStaticCell<[u8; MAX_MSG]> = ConstStaticCell::new([0; MAX_MSG]);

/// The board's lines, over semihosting.
fn say(line: core::fmt::Arguments<'_>) {
    println!("{}", line);
}

/// homa-stack's runner and embassy-net's in one task: every wake-up polls
/// both, homa-stack first, and `tally` times the gaps between polls. A half of the shared NIC that finds its own queue
/// empty takes up to `SHARE_FRAMES` frames from the NIC, queueing the other
/// side's; polled as two tasks, in an order the executor's run queue does
/// not fix, one half could take frames twice while the other has not read
/// its queue, and the second batch would find that queue full.
#[embassy_executor::task]
async fn runners(
    stack: &'static HomaStack,
    half: Half,
    clock: Clock,
    mut net: embassy_net::Runner<'static, Half>,
    tally: &'static Tally,
) -> ! {
    let mut homa = Runner::new(stack, EmbassyDriver(half), clock);
    join(run_timed(&mut homa, tally, || clock.now()), net.run())
        .await
        .0
}

/// UDP echo on port 7, answered by embassy-net.
#[embassy_executor::task]
async fn udp_echo(net: embassy_net::Stack<'static>) -> ! {
    let mem = UDP_MEM.take();
    let mut rx_meta = [PacketMetadata::EMPTY; 2];
    let mut tx_meta = [PacketMetadata::EMPTY; 2];
    let mut socket = UdpSocket::new(net, &mut rx_meta, &mut mem.0, &mut tx_meta, &mut mem.1);
    if socket.bind(ECHO_PORT).is_err() {
        finish(Err("udp bind"));
    }
    let mut echoed = 0u32;
    loop {
        let Ok((n, from)) = socket.recv_from(&mut mem.2).await else {
            continue;
        };
        if socket.send_to(&mem.2[..n], from.endpoint).await.is_ok() {
            echoed += 1;
            println!("udp echo: {} B to {} ({} so far)", n, from.endpoint, echoed);
        }
    }
}

/// Answers homa-perf's requests as `homa-perf server` does.
#[embassy_executor::task]
async fn server(stack: &'static HomaStack, tally: &'static Tally) -> ! {
    let Ok(mut server) = stack.bind(HOMA_PORT) else {
        finish(Err("bind"))
    };
    serve(&mut server, SERVER_SCRATCH.take(), tally, say).await
}

/// Prints homa-stack's counters, the network's polls and the shared NIC's
/// counters.
fn report(stack: &HomaStack, shared: &Shared, tally: &Tally) {
    homa_perf_peer::report(stack, tally, say);
    if let Some(s) = shared.stats() {
        println!(
            "nic share: homa {} frames ({} dropped), embassy-net {} frames ({} dropped), {} lost at transmit",
            s.homa.frames,
            s.homa.dropped,
            s.other.frames,
            s.other.dropped,
            shared.tx_lost()
        );
    }
}

/// Calls homa-perf's servers with every size, checks every response byte.
#[embassy_executor::task]
async fn client(
    stack: &'static HomaStack,
    shared: &'static Shared,
    tally: &'static Tally,
    clock: Clock,
) -> ! {
    let Ok(mut homa) = stack.client() else {
        finish(Err("socket"))
    };
    let plan = Rounds {
        hosts: &SERVERS.0[..SERVERS.1],
        port: HOMA_PORT,
        rounds: ROUNDS,
        sizes: &SIZES,
        seed: 0x00a6_4000_0000_0001,
    };
    let scratch = CLIENT_SCRATCH.take();
    let verdict = call_rounds(stack, &mut homa, &plan, scratch, tally, || clock.now(), say).await;
    report(stack, shared, tally);
    if let Err(e) = verdict {
        finish(Err(e));
    }
    println!("PASS");
    // Keep serving: the host's client may still be running.
    loop {
        core::future::pending::<()>().await;
    }
}

/// The program, entered from [`homa_smartnic::boot`] (an exported symbol).
#[allow(unsafe_code)]
#[no_mangle]
extern "C" fn smartnic_main() -> ! {
    let clock = Clock::new();
    // SAFETY: this is QEMU `virt`, and only this NIC uses its virtio-mmio
    // windows.
    #[allow(unsafe_code)]
    let Some(transport) = (unsafe { virtio::find_net() }) else {
        finish(Err("no virtio-net device"))
    };
    let nic = match VirtioNet::new(transport, RX_BUFS.take(), TX_BUFS.take()) {
        Ok(nic) => nic,
        Err(e) => finish(Err(e)),
    };
    let mac = nic.mac();
    let shared: &'static Shared = SHARED.init_with(|| SharedDriver::new(nic));
    let (homa_half, net_half) = shared.halves();

    let mut config = Config::new(BOARD.0, EthernetAddress(mac), hash_seed(mac));
    // embassy-net answers ARP and pings for the shared address.
    config.passive_host = true;
    // Emulated, on a shared host: either side can stall for tens of
    // milliseconds, longer than the default 100 ticks of silence before
    // an RPC is aborted; 5 s, as homa-perf's `--timeout-ticks 5000`.
    config.timeout_ticks = 5000;
    // Each poll reads all that embassy-net's half may have queued for it.
    config.max_rx_per_poll = SHARE_FRAMES;
    let endpoint = match Endpoint::new(
        config,
        &mut RPC_TABLE.init_with(|| core::array::from_fn(|_| RpcSlot::default()))[..],
        &mut PEER_TABLE.init_with(|| core::array::from_fn(|_| PeerSlot::default()))[..],
        &mut SOCKET_TABLE.init_with(|| core::array::from_fn(|_| SocketSlot::default()))[..],
        POOL_MEM.take(),
        PAGE,
    ) {
        Ok(ep) => ep,
        Err(_) => finish(Err("set-up")),
    };
    let stack: &'static HomaStack = STACK.init_with(|| Stack::new(endpoint));

    let net_config = embassy_net::Config::ipv4_static(StaticConfigV4 {
        address: Ipv4Cidr::new(BOARD.0, BOARD.1),
        gateway: None,
        dns_servers: Default::default(),
    });
    let seed = u64::from_le_bytes([mac[0], mac[1], mac[2], mac[3], mac[4], mac[5], 0xa6, 0x40]);
    let (net, net_run) = embassy_net::new(
        net_half,
        net_config,
        NET_RESOURCES.init_with(StackResources::new),
        seed,
    );

    println!(
        "board: virtio-net MAC {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}, {}/{}; Homa port {}, UDP echo port {}, largest message {} B",
        mac[0], mac[1], mac[2], mac[3], mac[4], mac[5], BOARD.0, BOARD.1, HOMA_PORT, ECHO_PORT, MAX_MSG
    );
    let tally: &'static Tally = TALLY.init_with(Tally::new);

    let executor = EXECUTOR.init_with(Executor::new);
    executor.run(move |spawner: Spawner| {
        let spawned = [
            spawner.spawn(runners(stack, homa_half, clock, net_run, tally)),
            spawner.spawn(udp_echo(net)),
            spawner.spawn(server(stack, tally)),
            spawner.spawn(client(stack, shared, tally, clock)),
        ];
        if spawned.iter().any(|s| s.is_err()) {
            finish(Err("spawn"));
        }
    })
}
