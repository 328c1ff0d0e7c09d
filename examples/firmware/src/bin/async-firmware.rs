//! homa-stack's async layer as firmware: embassy-executor tasks on a
//! Cortex-M4F.
//!
//! Two endpoints, a client and a server, each shared as a
//! `homa_stack::asynch::Stack` with a runner task, joined by an in-memory
//! `Wire` whose ends wake the other end's runner. A client task awaits one
//! RPC of each of the example's sizes (up to Homa's 1,000,000 bytes), then
//! the lossy sizes with 1 frame in 10 dropped at random; a server task
//! answers. Every request and response is built and checked in place in
//! the pools. The runners sleep until the endpoint's next timer, a frame
//! or a task's call: the timer is the SysTick alarm of
//! `homa_firmware::alarm` (no `embassy-time` driver), and the executor
//! sleeps (`wfe`) when no task is woken. Statics are in `.bss`; nothing is
//! allocated. Prints `PASS` over semihosting.
#![no_std]
#![no_main]
#![forbid(unsafe_code)]

use core::mem::size_of;

use cortex_m_rt::entry;
use cortex_m_semihosting::{debug, hprintln};
use embassy_executor::{Executor, Spawner};
use panic_semihosting as _;
use static_cell::{ConstStaticCell, StaticCell};

use homa_firmware::alarm::AlarmClock;
use homa_firmware::check::{fill, matches, reply_seed, request_seed};
use homa_firmware::Clock;
use homa_stack::asynch::{CallError, Runner, Stack, Wire, WireEnd};
use homa_stack::endpoint::{PeerSlot, RpcSlot, SocketSlot};
use homa_stack::storage::{buffer_len_for, pages_for, MAX_MESSAGE_LEN};
use homa_stack::wire::{EthernetAddress, Ipv4Addr};
use homa_stack::{Config, Endpoint, SendError};

/// Pool page size.
const PAGE: usize = 4096;
/// The largest message the example sends: Homa's limit.
const MAX_MSG: usize = MAX_MESSAGE_LEN;
const MSG_PAGES: usize = pages_for(MAX_MSG, PAGE);
/// As in `homa-firmware`: the client holds a request and its response,
/// the server a request or response and the previous response until ACKed.
const CLIENT_POOL: usize = buffer_len_for(2 * MSG_PAGES, PAGE);
const SERVER_POOL: usize = buffer_len_for(MSG_PAGES + 16, PAGE);
const RPCS: usize = 8;
const PEERS: usize = 4;
const SOCKETS: usize = 2;
/// Async sockets per stack.
const SLOTS: usize = 2;
/// Frames per direction on the wire.
const RING: usize = 8;

const SIZES: [usize; 6] = [1, 100, 1424, 1425, 40_001, MAX_MSG];
const LOSSY_SIZES: [usize; 3] = [1425, 40_001, 200_000];
const LOSS_ONE_IN: u32 = 10;

const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const CLIENT_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
const SERVER_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);
const PORT: u16 = 99;

type HomaStack = Stack<'static, SLOTS>;
type End = WireEnd<'static, RING, 1514>;

static CLIENT_RPCS: StaticCell<[RpcSlot; RPCS]> = StaticCell::new();
static SERVER_RPCS: StaticCell<[RpcSlot; RPCS]> = StaticCell::new();
static CLIENT_PEERS: StaticCell<[PeerSlot; PEERS]> = StaticCell::new();
static SERVER_PEERS: StaticCell<[PeerSlot; PEERS]> = StaticCell::new();
static CLIENT_SOCKETS: StaticCell<[SocketSlot; SOCKETS]> = StaticCell::new();
static SERVER_SOCKETS: StaticCell<[SocketSlot; SOCKETS]> = StaticCell::new();
static CLIENT_POOL_MEM: ConstStaticCell<[u8; CLIENT_POOL]> = ConstStaticCell::new([0; CLIENT_POOL]);
static SERVER_POOL_MEM: ConstStaticCell<[u8; SERVER_POOL]> = ConstStaticCell::new([0; SERVER_POOL]);
static WIRE: ConstStaticCell<Wire<RING>> = ConstStaticCell::new(Wire::new());
static CLIENT_STACK: StaticCell<HomaStack> = StaticCell::new();
static SERVER_STACK: StaticCell<HomaStack> = StaticCell::new();
static EXECUTOR: StaticCell<Executor> = StaticCell::new();

#[embassy_executor::task(pool_size = 2)]
async fn runner(stack: &'static HomaStack, end: End, clock: AlarmClock) -> ! {
    let mut runner = Runner::new(stack, end, clock);
    runner.run().await
}

#[embassy_executor::task]
async fn server(stack: &'static HomaStack) -> ! {
    let mut server = match stack.bind(PORT) {
        Ok(s) => s,
        Err(_) => finish(Err("bind")),
    };
    loop {
        let mut request = server.accept().await;
        let n = request.len();
        if request.read(|m| matches(m, request_seed(n), n)) != Some(true) {
            finish(Err("request corrupted"));
        }
        if request.reply_with(n, |w| fill(reply_seed(n), w)).is_err() {
            finish(Err("reply"));
        }
    }
}

#[embassy_executor::task]
async fn client(stack: &'static HomaStack, wire: &'static Wire<RING>, mut clock: Clock) -> ! {
    let mut client = match stack.client() {
        Ok(c) => c,
        Err(_) => finish(Err("socket")),
    };
    // One byte over Homa's limit is refused before anything is sent.
    let too_long = client
        .call_with(SERVER_IP, PORT, MAX_MSG + 1, |_| {}, |_| ())
        .await;
    if too_long != Err(CallError::Send(SendError::MessageTooLong)) {
        finish(Err("1,000,001 bytes not refused"));
    }
    for (pass, sizes, loss) in [(1, &SIZES[..], 0), (2, &LOSSY_SIZES[..], LOSS_ONE_IN)] {
        wire.set_loss(loss, 0x1234_5678);
        if loss == 0 {
            hprintln!("pass {}: no loss", pass);
        } else {
            hprintln!("pass {}: frames dropped at random, 1 in {}", pass, loss);
        }
        for &len in sizes {
            let start = clock.now();
            let ok = client
                .call_with(
                    SERVER_IP,
                    PORT,
                    len,
                    |w| fill(request_seed(len), w),
                    |m| matches(m, reply_seed(len), len),
                )
                .await;
            let us = clock.now().saturating_duration_since(start).total_micros();
            match ok {
                Ok(true) => hprintln!("  {:>7} B: ok in {} us", len, us),
                Ok(false) => finish(Err("reply corrupted")),
                Err(e) => {
                    hprintln!("  {:>7} B: {}", len, e);
                    finish(Err("call failed"))
                }
            }
        }
    }
    let (completed, failed, retransmitted) = stack.with(|ep| {
        let s = ep.stats();
        (s.client_completed, s.client_failed, s.retransmissions)
    });
    hprintln!(
        "totals: frames dropped {}; client retransmissions {}; completed {}; failed {}; clock {} ms",
        wire.dropped(),
        retransmitted,
        completed,
        failed,
        clock.now().total_millis()
    );
    let all = (SIZES.len() + LOSSY_SIZES.len()) as u64;
    finish(if completed == all && failed == 0 {
        Ok(())
    } else {
        Err("final count")
    })
}

/// Prints the verdict and leaves QEMU with its exit status.
fn finish(verdict: Result<(), &str>) -> ! {
    match verdict {
        Ok(()) => hprintln!("PASS"),
        Err(why) => hprintln!("FAIL: {}", why),
    }
    debug::exit(if verdict.is_ok() {
        debug::EXIT_SUCCESS
    } else {
        debug::EXIT_FAILURE
    });
    loop {
        cortex_m::asm::wfi();
    }
}

fn endpoint(
    ip: Ipv4Addr,
    mac: EthernetAddress,
    rpcs: &'static mut [RpcSlot],
    peers: &'static mut [PeerSlot],
    sockets: &'static mut [SocketSlot],
    pool: &'static mut [u8],
) -> Endpoint<'static> {
    match Endpoint::new(Config::new(ip, mac), rpcs, peers, sockets, pool, PAGE) {
        Ok(ep) => ep,
        Err(_) => finish(Err("set-up")),
    }
}

#[entry]
fn main() -> ! {
    let Some(cp) = cortex_m::Peripherals::take() else {
        finish(Err("peripherals"))
    };
    let clock = Clock::start(cp.SYST);
    let client_ep = endpoint(
        CLIENT_IP,
        CLIENT_MAC,
        &mut CLIENT_RPCS.init_with(|| [RpcSlot::EMPTY; RPCS])[..],
        &mut CLIENT_PEERS.init_with(|| [PeerSlot::EMPTY; PEERS])[..],
        &mut CLIENT_SOCKETS.init_with(|| [SocketSlot::EMPTY; SOCKETS])[..],
        &mut CLIENT_POOL_MEM.take()[..],
    );
    let server_ep = endpoint(
        SERVER_IP,
        SERVER_MAC,
        &mut SERVER_RPCS.init_with(|| [RpcSlot::EMPTY; RPCS])[..],
        &mut SERVER_PEERS.init_with(|| [PeerSlot::EMPTY; PEERS])[..],
        &mut SERVER_SOCKETS.init_with(|| [SocketSlot::EMPTY; SOCKETS])[..],
        &mut SERVER_POOL_MEM.take()[..],
    );
    let client_stack: &'static HomaStack = CLIENT_STACK.init_with(|| Stack::new(client_ep));
    let server_stack: &'static HomaStack = SERVER_STACK.init_with(|| Stack::new(server_ep));
    let wire: &'static Wire<RING> = WIRE.take();
    let (client_end, server_end) = wire.ends();

    hprintln!("homa-stack async firmware: embassy-executor, two stacks, one in-memory wire");
    hprintln!(
        "size_of: Stack<{}> {} B (Endpoint {} B), Wire<{}> {} B",
        SLOTS,
        size_of::<HomaStack>(),
        size_of::<Endpoint<'static>>(),
        RING,
        size_of::<Wire<RING>>()
    );

    let executor = EXECUTOR.init_with(Executor::new);
    executor.run(move |spawner: Spawner| {
        let spawned = [
            spawner.spawn(runner(
                client_stack,
                client_end,
                AlarmClock::new(clock.clone(), 0),
            )),
            spawner.spawn(runner(
                server_stack,
                server_end,
                AlarmClock::new(clock.clone(), 1),
            )),
            spawner.spawn(server(server_stack)),
            spawner.spawn(client(client_stack, wire, clock)),
        ];
        if spawned.iter().any(|s| s.is_err()) {
            finish(Err("spawn"));
        }
    })
}
