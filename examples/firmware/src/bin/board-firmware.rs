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
//! - a Homa server on port 500 answers `homa-perf client` requests, each
//!   checked byte for byte (homa-perf's header and pattern), with the
//!   response homa-perf asks for (an echo or its salted pattern);
//! - a client task calls `homa-perf server` at [`HOST_IP`] with each of
//!   [`SIZES`] for [`ROUNDS`] rounds, then the one at [`LOSSY_HOST_IP`]
//!   (run with 1% of the frames dropped) as many rounds, and checks every
//!   response byte; once all verified it prints `PASS` and keeps serving
//!   (the host ends QEMU).
//!
//! Board address 10.0.0.2/24, MAC from QEMU's `mac=` (the controller's
//! EEPROM). Statics in `.bss`; nothing is allocated.
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
use homa_phy::lan9118::{Lan9118, Mmio, MPS2_BASE};
use homa_phy::share::driver::{DriverHalf, SharedDriver};
use homa_phy::testing::fill_pattern_at;
use homa_stack::asynch::{EmbassyDriver, Runner, Stack};
use homa_stack::endpoint::{PeerSlot, RpcSlot, SocketSlot};
use homa_stack::storage::{buffer_len_for, pages_for, MessageRef, MessageWriter};
use homa_stack::wire::{EthernetAddress, Ipv4Addr};
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

/// The board's address.
const BOARD_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// homa-perf's address (its server for the board's client).
const HOST_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// A second homa-perf server, which drops frames.
const LOSSY_HOST_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 5);
/// Homa port of both servers (homa-perf's default).
const HOMA_PORT: u16 = 500;
const ECHO_PORT: u16 = 7;
/// The board client's RPC sizes (homa-perf's: requests shorter than its
/// 12-byte header are raised to it).
const SIZES: [usize; 5] = [1, 1400, 1401, 40_000, MAX_MSG];
const ROUNDS: usize = 2;

// homa-perf's message format (tools/src/perf/payload.rs): a 12-byte header
// (`reply_len` u32 LE, u32::MAX for an echo; `seed` u64 LE), the rest the
// test kit's pattern of `seed` (a response: of `seed ^ RESPONSE_SALT`).
const HEADER_LEN: usize = 12;
const ECHO: u32 = u32::MAX;
const RESPONSE_SALT: u64 = 0x5250_4c59_5250_4c59;

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

/// Writes homa-perf's message `seed` with `header` into `w`.
fn fill(w: &mut MessageWriter<'_, '_>, seed: u64, header: [u8; HEADER_LEN]) {
    w.for_each_chunk(|at, piece| {
        fill_pattern_at(seed, at, piece);
        for (j, b) in piece.iter_mut().enumerate() {
            if let Some(&h) = header.get(at + j) {
                *b = h;
            }
        }
    });
}

/// The header at the start of `msg`, if it has one.
fn header(msg: &MessageRef<'_>) -> Option<[u8; HEADER_LEN]> {
    let mut h = [0; HEADER_LEN];
    (msg.len() >= HEADER_LEN && msg.copy_to(&mut h) == HEADER_LEN).then_some(h)
}

/// Whether every byte of `msg` after the header is pattern `seed`.
fn pattern_ok(msg: &MessageRef<'_>, seed: u64) -> bool {
    let mut at = 0;
    let mut want = [0u8; 64];
    for chunk in msg.chunks() {
        for (k, block) in chunk.chunks(want.len()).enumerate() {
            let off = at + k * want.len();
            let want = &mut want[..block.len()];
            fill_pattern_at(seed, off, want);
            for (j, (&got, &w)) in block.iter().zip(want.iter()).enumerate() {
                if off + j >= HEADER_LEN && got != w {
                    return false;
                }
            }
        }
        at += chunk.len();
    }
    at == msg.len()
}

fn seed_of(h: &[u8; HEADER_LEN]) -> u64 {
    let mut s = [0; 8];
    s.copy_from_slice(&h[4..]);
    u64::from_le_bytes(s)
}

#[embassy_executor::task]
async fn homa_runner(stack: &'static HomaStack, half: Half, clock: AlarmClock) -> ! {
    let mut runner = Runner::new(stack, EmbassyDriver(half), clock);
    runner.run().await
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

/// Answers homa-perf's requests: each checked, then the response asked for.
#[embassy_executor::task]
async fn server(stack: &'static HomaStack) -> ! {
    let Ok(mut server) = stack.bind(HOMA_PORT) else {
        finish(Err("bind"))
    };
    let (mut served, mut refused) = (0u32, 0u32);
    loop {
        let mut request = server.accept().await;
        let n = request.len();
        let checked = request.read(|m| header(&m).filter(|h| pattern_ok(&m, seed_of(h))));
        let Some(Some(h)) = checked else {
            refused += 1;
            hprintln!(
                "server: request of {} B corrupt or headerless ({} refused)",
                n,
                refused
            );
            continue;
        };
        let reply_len = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
        let (len, seed) = if reply_len == ECHO {
            (n, seed_of(&h))
        } else {
            (
                (reply_len as usize).max(HEADER_LEN),
                seed_of(&h) ^ RESPONSE_SALT,
            )
        };
        if len > MAX_MSG || request.reply_with(len, |w| fill(w, seed, h)).is_err() {
            refused += 1;
            hprintln!("server: no reply of {} B ({} refused)", len, refused);
            continue;
        }
        served += 1;
        if served.is_power_of_two() {
            hprintln!("server: {} requests answered", served);
        }
    }
}

/// Calls homa-perf's server with every size, checks every response byte.
#[embassy_executor::task]
async fn client(stack: &'static HomaStack, mut clock: Clock) -> ! {
    let Ok(mut client) = stack.client() else {
        finish(Err("socket"))
    };
    let mut seed = 0x00b0_a4d0_0000_0001u64;
    // First calls that failed and were tried again (a host's server not
    // up yet); every other failure ends the run.
    let mut retried = 0u64;
    for round in 1..=2 * ROUNDS {
        let host = if round <= ROUNDS {
            HOST_IP
        } else {
            LOSSY_HOST_IP
        };
        for &size in &SIZES {
            let len = size.max(HEADER_LEN);
            let mut h = [0; HEADER_LEN];
            h[..4].copy_from_slice(&(size as u32).to_le_bytes());
            h[4..].copy_from_slice(&seed.to_le_bytes());
            let reply_len = len;
            let start = clock.now();
            // A host's server may start after the board: a failed first
            // call of a round is tried again, up to 30 times.
            let mut tries = 0;
            let ok = loop {
                let r = client
                    .call_with(
                        host,
                        HOMA_PORT,
                        len,
                        |w| fill(w, seed, h),
                        |m| {
                            m.len() == reply_len
                                && header(&m) == Some(h)
                                && pattern_ok(&m, seed ^ RESPONSE_SALT)
                        },
                    )
                    .await;
                tries += 1;
                match r {
                    Err(_) if size == SIZES[0] && tries < 30 => {
                        retried += 1;
                        continue;
                    }
                    other => break other,
                }
            };
            let us = clock.now().saturating_duration_since(start).total_micros();
            match ok {
                Ok(true) => hprintln!("round {} ({}): {:>7} B ok in {} us", round, host, size, us),
                Ok(false) => finish(Err("response corrupt")),
                Err(e) => {
                    hprintln!("round {}: {:>7} B: {}", round, size, e);
                    finish(Err("call failed"))
                }
            }
            seed = seed.wrapping_add(1);
        }
    }
    let (completed, failed) = stack.with(|ep| {
        let s = ep.stats();
        (s.client_completed, s.client_failed)
    });
    hprintln!(
        "client: completed {}; failed {} (first calls tried again {})",
        completed,
        failed,
        retried
    );
    if completed as usize != 2 * ROUNDS * SIZES.len() || failed != retried {
        finish(Err("final count"));
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

    let mut config = Config::new(
        BOARD_IP,
        EthernetAddress(mac),
        homa_firmware::hash_seed(mac),
    );
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
        address: Ipv4Cidr::new(BOARD_IP, 24),
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
        "board: LAN9118 MAC {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}, {}; Homa port {}, UDP echo port {}, largest message {} B",
        mac[0], mac[1], mac[2], mac[3], mac[4], mac[5], BOARD_IP, HOMA_PORT, ECHO_PORT, MAX_MSG
    );

    let executor = EXECUTOR.init_with(Executor::new);
    executor.run(move |spawner: Spawner| {
        let spawned = [
            spawner.spawn(homa_runner(
                stack,
                homa_half,
                AlarmClock::new(clock.clone(), 0),
            )),
            spawner.spawn(net_runner(net_run)),
            spawner.spawn(udp_echo(net)),
            spawner.spawn(server(stack)),
            spawner.spawn(client(stack, clock)),
        ];
        if spawned.iter().any(|s| s.is_err()) {
            finish(Err("spawn"));
        }
    })
}
