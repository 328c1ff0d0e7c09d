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
use cortex_m_semihosting::hprintln;
use embassy_executor::{Executor, Spawner};
use panic_semihosting as _;
use static_cell::{ConstStaticCell, StaticCell};

use homa_firmware::alarm::AlarmClock;
use homa_firmware::check::{fill, matches, reply_seed, request_seed};
use homa_firmware::pair::{LOSSY_SIZES, LOSS_ONE_IN, MAX_MSG, PORT, SERVER_IP, SIZES};
use homa_firmware::{finish, Clock};
use homa_stack::asynch::{CallError, Runner, Stack, Wire, WireEnd};
use homa_stack::{Endpoint, SendError};

/// Async sockets per stack.
const SLOTS: usize = 2;
/// Frames per direction on the wire.
const RING: usize = 8;

type HomaStack = Stack<'static, SLOTS>;
type End = WireEnd<'static, RING, 1514>;

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
    homa_firmware::serve(stack, PORT).await
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

#[entry]
fn main() -> ! {
    let Some(cp) = cortex_m::Peripherals::take() else {
        finish(Err("peripherals"))
    };
    let clock = Clock::start(cp.SYST);
    let Ok((client_ep, server_ep)) = homa_firmware::pair::endpoints() else {
        finish(Err("set-up"))
    };
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
