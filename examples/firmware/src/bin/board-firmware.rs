//! A board on the wire: homa-stack and embassy-net on the board's own NIC.
//!
//! The mps2-an386's LAN9118 Ethernet controller (`homa_phy::lan9118`) is
//! shared through `homa_phy::share::driver::SharedDriver`: homa-stack
//! (passive: it answers neither ARP nor pings) polls the Homa half, and
//! embassy-net 0.9 the other half, answering ARP, ping and UDP echo on
//! port 7 for the same IP and MAC. Under QEMU the NIC is joined to a host
//! TAP (`-nic tap,model=lan9118,...`), so the peer is a Linux host running
//! `homa-perf`:
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
//! from QEMU's `mac=` (the controller's EEPROM). Statics in `.bss`; nothing
//! is allocated. It prints the longest gap between two polls of the
//! network (`network polls: ...`) as it grows.
#![no_std]
#![no_main]
#![deny(unsafe_code)]

use cortex_m_rt::entry;
use cortex_m_semihosting::hprintln;
use embassy_executor::{Executor, Spawner};
use embassy_net::udp::{PacketMetadata, UdpSocket};
use embassy_net::{Ipv4Cidr, StackResources, StaticConfigV4};
use panic_semihosting as _;
use static_cell::{ConstStaticCell, StaticCell};

use homa_firmware::alarm::AlarmClock;
use homa_firmware::{finish, Clock};
use homa_perf_peer::{call_rounds, run_timed, serve, Rounds, Tally, BOARD, SERVERS};
use homa_phy::lan9118::{Lan9118, Mmio, MPS2_BASE};
use homa_phy::share::driver::{DriverHalf, SharedDriver};
use homa_stack::asynch::{EmbassyDriver, Runner, Stack};
use homa_stack::endpoint::{PeerSlot, RpcSlot, SocketSlot};
use homa_stack::storage::{buffer_len_for, pages_for};
use homa_stack::wire::EthernetAddress;
use homa_stack::{Config, Endpoint};

const PAGE: usize = 4096;
/// The largest message either way: 400 kB, so the pool holds a request and
/// a response of each of the two directions at once in the board's 4 MiB.
const MAX_MSG: usize = 400_000;
const POOL: usize = buffer_len_for(4 * pages_for(MAX_MSG, PAGE) + 8, PAGE);
const RPCS: usize = 16;
/// Granted-but-unreceived bytes the board allows over all messages: what
/// the LAN9118's receive FIFO holds (QEMU's model: about 10 kB).
const NIC_RX_BYTES: u32 = 8 * 1024;
const PEERS: usize = 4;
const SOCKETS: usize = 2;
/// Async sockets on the stack (a server and a client).
const SLOTS: usize = 2;

/// Homa port of the board's server and of homa-perf's (its default).
const HOMA_PORT: u16 = 500;
const ECHO_PORT: u16 = 7;
/// The board client's RPC sizes: 1 byte as an echo (homa-perf's header is
/// 12 bytes), the rest asking for a response of their own size.
const SIZES: [usize; 5] = [1, 1400, 1401, 40_000, MAX_MSG];
const ROUNDS: usize = 2;

type Nic = Lan9118<Mmio>;
type Shared = SharedDriver<Nic>;
type Half = DriverHalf<'static, Nic, 4, 1518>;
type HomaStack = Stack<'static, SLOTS>;

static RPC_TABLE: StaticCell<[RpcSlot; RPCS]> = StaticCell::new();
static PEER_TABLE: StaticCell<[PeerSlot; PEERS]> = StaticCell::new();
static SOCKET_TABLE: StaticCell<[SocketSlot; SOCKETS]> = StaticCell::new();
static POOL_MEM: ConstStaticCell<[u8; POOL]> = ConstStaticCell::new([0; POOL]);
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
    hprintln!("{}", line);
}

/// homa-stack's runner, `tally` timing the gaps between its polls by
/// `clock`.
#[embassy_executor::task]
async fn homa_runner(
    stack: &'static HomaStack,
    half: Half,
    alarm: AlarmClock,
    tally: &'static Tally,
    mut clock: Clock,
) -> ! {
    let mut runner = Runner::new(stack, EmbassyDriver(half), alarm);
    run_timed(&mut runner, tally, move || clock.now()).await
}

#[embassy_executor::task]
async fn net_runner(mut runner: embassy_net::Runner<'static, Half>) -> ! {
    runner.run().await
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
            hprintln!("udp echo: {} B to {} ({} so far)", n, from.endpoint, echoed);
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

/// Calls homa-perf's servers with every size, checks every response byte,
/// then prints homa-stack's counters, the network's polls and the shared
/// NIC's counters.
#[embassy_executor::task]
async fn client(
    stack: &'static HomaStack,
    shared: &'static Shared,
    tally: &'static Tally,
    mut clock: Clock,
) -> ! {
    let Ok(mut homa) = stack.client() else {
        finish(Err("socket"))
    };
    let plan = Rounds {
        hosts: &SERVERS.0[..SERVERS.1],
        port: HOMA_PORT,
        rounds: ROUNDS,
        sizes: &SIZES,
        seed: 0x00b0_a4d0_0000_0001,
    };
    let scratch = CLIENT_SCRATCH.take();
    let verdict = call_rounds(stack, &mut homa, &plan, scratch, tally, || clock.now(), say).await;
    homa_perf_peer::report(stack, tally, say);
    if let Some(s) = shared.stats() {
        hprintln!(
            "nic share: homa {} frames ({} dropped), embassy-net {} frames ({} dropped), {} lost at transmit",
            s.homa.frames,
            s.homa.dropped,
            s.other.frames,
            s.other.dropped,
            shared.tx_lost()
        );
    }
    if let Err(e) = verdict {
        finish(Err(e));
    }
    hprintln!("PASS");
    // Keep serving: the host's client may still be running.
    loop {
        core::future::pending::<()>().await;
    }
}

#[entry]
fn main() -> ! {
    let Some(cp) = cortex_m::Peripherals::take() else {
        finish(Err("peripherals"))
    };
    let clock = Clock::start(cp.SYST);
    // SAFETY: the mps2-an386's LAN9118 register window, used only here.
    #[allow(unsafe_code)]
    let regs = unsafe { Mmio::new(MPS2_BASE) };
    let nic = match Lan9118::new(regs, None) {
        Ok(nic) => nic,
        Err(_) => finish(Err("no LAN9118")),
    };
    let mac = nic.mac();
    let shared: &'static Shared = SHARED.init_with(|| SharedDriver::new(nic));
    let (homa_half, net_half) = shared.halves();

    let mut config = Config::new(BOARD.0, EthernetAddress(mac), homa_firmware::hash_seed(mac));
    // embassy-net answers ARP and pings for the shared address.
    config.passive_host = true;
    // An emulated board on a shared host can be descheduled for tens of
    // milliseconds: a silent peer fails an RPC after 5 s, not 100 ms (the
    // host side's homa-perf runs with the same timeout).
    config.timeout_ticks = 5_000;
    // What the NIC can take at once: the LAN9118's RX FIFO holds about six
    // full frames and drops the rest of a burst, so the board grants no
    // more than that in flight (Linux's default, 400 kB, had the host send
    // 200 kB at once, most of it dropped).
    config.max_incoming = NIC_RX_BYTES;
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
    let seed = u64::from_le_bytes([mac[0], mac[1], mac[2], mac[3], mac[4], mac[5], 0x5a, 0xa5]);
    let (net, net_run) = embassy_net::new(
        net_half,
        net_config,
        NET_RESOURCES.init_with(StackResources::new),
        seed,
    );

    hprintln!(
        "board: LAN9118 MAC {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}, {}/{}; Homa port {}, UDP echo port {}, largest message {} B",
        mac[0], mac[1], mac[2], mac[3], mac[4], mac[5], BOARD.0, BOARD.1, HOMA_PORT, ECHO_PORT, MAX_MSG
    );
    let tally: &'static Tally = TALLY.init_with(Tally::new);

    let executor = EXECUTOR.init_with(Executor::new);
    executor.run(move |spawner: Spawner| {
        let spawned = [
            spawner.spawn(homa_runner(
                stack,
                homa_half,
                AlarmClock::new(clock.clone(), 0),
                tally,
                clock.clone(),
            )),
            spawner.spawn(net_runner(net_run)),
            spawner.spawn(udp_echo(net)),
            spawner.spawn(server(stack, tally)),
            spawner.spawn(client(stack, shared, tally, clock)),
        ];
        if spawned.iter().any(|s| s.is_err()) {
            finish(Err("spawn"));
        }
    })
}
