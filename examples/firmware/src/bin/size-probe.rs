//! The smallest useful homa-stack firmware, for measuring code size: one
//! endpoint over one in-memory ring, SysTick time, no output and a panic
//! handler that only stops. Features pick the roles it uses: `client` (send
//! requests, read responses) and `server` (take requests, reply); with
//! neither it only polls (ARP, ICMP, and the Homa paths `poll` reaches);
//! `share` puts the ring behind `homa_phy::Share`, as beside a second stack. It
//! builds but has no peer, so it is for `arm-none-eabi-size`, not for running.
#![no_std]
#![no_main]
#![forbid(unsafe_code)]

use cortex_m_rt::entry;
use static_cell::ConstStaticCell;

use homa_firmware::Clock;
use homa_phy::Loopback;
use homa_stack::wire::{EthernetAddress, Ipv4Addr};
use homa_stack::Config;
#[cfg(any(feature = "client", feature = "server"))]
use homa_stack::Event;

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    loop {
        cortex_m::asm::wfi();
    }
}

#[cfg(not(feature = "share"))]
static RING: ConstStaticCell<Loopback<8>> = ConstStaticCell::new(Loopback::new());
/// With `share`, the ring is shared with another stack (whose frames this
/// probe only drains) through the splitter, with 4-frame queues.
#[cfg(feature = "share")]
static SHARE: ConstStaticCell<homa_phy::Share<Loopback<8>, 4>> =
    ConstStaticCell::new(homa_phy::Share::new(Loopback::new()));

// With `defmt`, defmt-semihosting is the global logger homa-stack's lines
// go to.
#[cfg(feature = "defmt")]
use defmt_semihosting as _;

#[cfg(any(feature = "client", feature = "server"))]
const PORT: u16 = 99;

/// With `log`, a logger that formats every line (as one writing to a UART
/// would) and counts the bytes, so the formatting code is really linked.
#[cfg(feature = "log")]
mod logger {
    use core::fmt::{self, Write};
    use core::sync::atomic::{AtomicU32, Ordering};

    static BYTES: AtomicU32 = AtomicU32::new(0);
    struct Count;
    impl Write for Count {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            BYTES.fetch_add(s.len() as u32, Ordering::Relaxed);
            Ok(())
        }
    }
    struct Sink;
    impl log::Log for Sink {
        fn enabled(&self, _: &log::Metadata<'_>) -> bool {
            true
        }
        fn log(&self, record: &log::Record<'_>) {
            let _ = writeln!(Count, "{} {}", record.level(), record.args());
        }
        fn flush(&self) {}
    }
    static SINK: Sink = Sink;

    pub fn install() {
        let _ = log::set_logger(&SINK);
        log::set_max_level(log::LevelFilter::Trace);
    }
}

#[entry]
fn main() -> ! {
    let cp = cortex_m::Peripherals::take().expect("first take");
    let mut clock = Clock::start(cp.SYST);
    #[cfg(feature = "log")]
    logger::install();
    #[allow(unused_mut)]
    let mut config = Config::new(
        Ipv4Addr::new(10, 0, 0, 1),
        EthernetAddress([2, 0, 0, 0, 0, 1]),
        homa_firmware::hash_seed([2, 0, 0, 0, 0, 1]),
    );
    // With IPv6 the probe is dual-stack and its client talks IPv6.
    #[cfg(feature = "ipv6")]
    {
        config.ipv6 = true;
    }
    let mut ep = homa_firmware::probe::endpoint(config);
    #[cfg(not(feature = "share"))]
    let dev = RING.take();
    #[cfg(feature = "share")]
    let share = SHARE.take();
    #[cfg(any(feature = "client", feature = "server"))]
    let mut buf = [0u8; 100];
    #[cfg(feature = "server")]
    let server = ep.bind(PORT).expect("free port");
    #[cfg(feature = "client")]
    let client = ep.socket().expect("free socket");
    #[cfg(all(feature = "client", not(feature = "ipv6")))]
    let peer = Ipv4Addr::new(10, 0, 0, 2);
    #[cfg(all(feature = "client", feature = "ipv6"))]
    let peer = homa_stack::wire::Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0xff, 0xfe00, 2);
    #[cfg(feature = "client")]
    let _ = ep.send_request(client, peer, PORT, &buf);
    loop {
        #[cfg(not(feature = "share"))]
        ep.poll(clock.now(), dev);
        #[cfg(feature = "share")]
        {
            use homa_phy::{Device, RxToken};
            let now = clock.now();
            ep.poll(now, &mut share.homa());
            let mut other = share.other();
            while let Some((rx, _)) = other.receive(now) {
                rx.consume(|_| ());
            }
        }
        #[cfg(feature = "server")]
        if let Some(Event::Request { rpc, .. }) = ep.recv(server) {
            let n = ep.message(rpc).map_or(0, |m| m.copy_to(&mut buf));
            let _ = ep.reply(rpc, &buf[..n]);
        }
        #[cfg(feature = "client")]
        match ep.recv(client) {
            Some(Event::Response { rpc, .. }) => {
                let n = ep.message(rpc).map_or(0, |m| m.copy_to(&mut buf));
                let _ = ep.release(rpc);
                let _ = ep.send_request(client, peer, PORT, &buf[..n.max(1)]);
            }
            Some(Event::Failed { rpc, .. }) => {
                let _ = ep.release(rpc);
            }
            _ => {}
        }
        if ep.poll_at().is_none_or(|t| t > clock.now()) {
            cortex_m::asm::wfi();
        }
    }
}
