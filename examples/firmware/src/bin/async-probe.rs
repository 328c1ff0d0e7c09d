//! `size-probe` on the async layer, for measuring what it costs: the same
//! endpoint, ring, pool and roles (a client calling in a loop, a server
//! echoing), as a `homa_stack::asynch::Stack` driven by a `Runner` task on
//! embassy-executor, with the SysTick alarm as its timer. No output and a
//! panic handler that only stops; it builds but has no peer, so it is for
//! `arm-none-eabi-size`, not for running.
#![no_std]
#![no_main]
#![forbid(unsafe_code)]

use core::task::Context;

use cortex_m_rt::entry;
use embassy_executor::{Executor, Spawner};
use static_cell::{ConstStaticCell, StaticCell};

use homa_firmware::alarm::AlarmClock;
use homa_firmware::Clock;
use homa_phy::Loopback;
use homa_stack::asynch::{Interface, Runner, Stack};
use homa_stack::wire::{EthernetAddress, Ipv4Addr};
use homa_stack::Config;

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    loop {
        cortex_m::asm::wfi();
    }
}

const PORT: u16 = 99;
type HomaStack = Stack<'static, 2>;

static RING: ConstStaticCell<Loopback<8>> = ConstStaticCell::new(Loopback::new());
static STACK: StaticCell<HomaStack> = StaticCell::new();
static EXECUTOR: StaticCell<Executor> = StaticCell::new();

/// The ring as the runner's device. A real driver would register the
/// runner's waker for its receive interrupt; the ring has none.
struct Ring(&'static mut Loopback<8>);

impl Interface for Ring {
    type Device<'d, 'c>
        = &'d mut Loopback<8>
    where
        Self: 'd,
        'c: 'd;

    fn device<'d, 'c>(&'d mut self, _cx: &'d mut Context<'c>) -> Self::Device<'d, 'c> {
        &mut *self.0
    }
}

#[embassy_executor::task]
async fn runner(stack: &'static HomaStack, ring: Ring, clock: AlarmClock) -> ! {
    let mut runner = Runner::new(stack, ring, clock);
    runner.run().await
}

#[embassy_executor::task]
async fn server(stack: &'static HomaStack) -> ! {
    let mut server = stack.bind(PORT).expect("free port");
    let mut buf = [0u8; 100];
    loop {
        let mut request = server.accept().await;
        let n = request.copy_to(&mut buf);
        let _ = request.reply(&buf[..n]);
    }
}

#[embassy_executor::task]
async fn client(stack: &'static HomaStack) -> ! {
    let mut client = stack.client().expect("free socket");
    let peer = Ipv4Addr::new(10, 0, 0, 2);
    let mut buf = [0u8; 100];
    let mut n = buf.len();
    loop {
        let request = buf;
        n = client
            .call(peer, PORT, &request[..n.max(1)], &mut buf)
            .await
            .unwrap_or(1);
    }
}

#[entry]
fn main() -> ! {
    let cp = cortex_m::Peripherals::take().expect("first take");
    let clock = Clock::start(cp.SYST);
    let config = Config::new(
        Ipv4Addr::new(10, 0, 0, 1),
        EthernetAddress([2, 0, 0, 0, 0, 1]),
        homa_firmware::hash_seed([2, 0, 0, 0, 0, 1]),
    );
    let ep = homa_firmware::probe::endpoint(config);
    let stack: &'static HomaStack = STACK.init_with(|| Stack::new(ep));
    let ring = Ring(RING.take());
    EXECUTOR
        .init_with(Executor::new)
        .run(move |spawner: Spawner| {
            spawner
                .spawn(runner(stack, ring, AlarmClock::new(clock, 0)))
                .expect("task slot");
            spawner.spawn(server(stack)).expect("task slot");
            spawner.spawn(client(stack)).expect("task slot");
        })
}
