//! homa-stack as firmware: a `no_std`, heap-free program for a Cortex-M4F.
//!
//! Two endpoints, a client and a server, live in one image and exchange RPCs
//! over in-memory devices (two rings each, wired back to back with
//! `forward`). Every table, pool and ring is a `static` in `.bss`, handed out
//! once through `static_cell` (the big ones built at compile time, so never
//! on the stack); nothing is allocated. Time comes from SysTick (see
//! `homa_firmware::Clock`).
//!
//! The program sends one request of each size in `SIZES`, up to the largest
//! message Homa allows (the pools are sized for it), then the same again
//! with one frame in `LOSS_ONE_IN` dropped at random, so grants, RESEND and
//! retransmission run too. Each request and each reply is checked byte for
//! byte against a pattern. It prints its figures and `PASS` over semihosting
//! and exits with a status QEMU passes on.
#![no_std]
#![no_main]
#![forbid(unsafe_code)]

use core::fmt;
use core::mem::size_of;

use cortex_m::peripheral::DWT;
use cortex_m_rt::entry;
use cortex_m_semihosting::hprintln;
use panic_semihosting as _;
use static_cell::ConstStaticCell;

use homa_firmware::check::{fill, matches, reply_seed, request_seed};
use homa_firmware::pair::{
    CLIENT_POOL, LOSSY_SIZES, LOSS_ONE_IN, MAX_MSG, PEERS, PORT, RPCS, SERVER_IP, SERVER_POOL,
    SIZES, SOCKETS,
};
use homa_firmware::{finish, Clock};
use homa_phy::{forward, Device, Instant, Loopback, RxToken, Split, TxToken};
use homa_stack::endpoint::{PeerSlot, RpcSlot, SocketSlot};
use homa_stack::{Endpoint, Event, RpcHandle, SendError};

/// Frames per ring; four rings (each endpoint's receive and transmit ring).
const RING: usize = 8;

type Ring = Loopback<RING>;
type Dev = Split<&'static mut Ring, &'static mut Ring>;

static RINGS: ConstStaticCell<[Ring; 4]> =
    ConstStaticCell::new([Ring::new(), Ring::new(), Ring::new(), Ring::new()]);

/// An RPC not done in this much clock time fails the run.
const RPC_DEADLINE_MS: u64 = 10_000;

/// The two endpoints, their devices and the clock.
struct Pair {
    client: Endpoint<'static>,
    server: Endpoint<'static>,
    client_dev: Dev,
    server_dev: Dev,
    clock: Clock,
    /// Drop one frame in this many while moving them (0: none).
    loss: Loss,
}

/// Random frame loss.
struct Loss {
    /// Drop one frame in this many on average; 0: none.
    one_in: u32,
    /// xorshift32 state.
    rng: u32,
    dropped: u32,
}

impl Loss {
    fn drop_next(&mut self) -> bool {
        if self.one_in == 0 {
            return false;
        }
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.rng = x;
        x.is_multiple_of(self.one_in)
    }
}

/// Moves frames from one endpoint's transmit ring to the other's receive
/// ring, dropping some when `loss` says so.
fn carry(from: &mut Ring, to: &mut Ring, now: Instant, loss: &mut Loss) {
    if loss.one_in == 0 {
        forward(from, to, now);
        return;
    }
    // `forward` with a drop: check for room first so no frame is lost to a
    // full ring, only to the deliberate drop.
    while to.transmit(now).is_some() {
        let Some((rx, _)) = from.receive(now) else {
            return;
        };
        if loss.drop_next() {
            rx.consume(|_| ());
            loss.dropped += 1;
            continue;
        }
        let Some(mut tx) = to.transmit(now) else {
            return;
        };
        tx.set_meta(rx.meta());
        rx.consume(|frame| tx.consume(frame.len(), |buf| buf.copy_from_slice(frame)));
    }
}

/// Why the run failed.
enum Failure {
    Send(SendError),
    Bind,
    Setup,
    Rpc(RpcHandle),
    BadRequest(usize),
    BadReply(usize),
    Deadline(usize),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Send(e) => write!(f, "send: {e}"),
            Failure::Bind => f.write_str("no socket"),
            Failure::Setup => f.write_str("set-up or final count"),
            Failure::Rpc(rpc) => write!(f, "unexpected event for {rpc}"),
            Failure::BadRequest(n) => write!(f, "request of {n} bytes corrupted"),
            Failure::BadReply(n) => write!(f, "reply of {n} bytes corrupted"),
            Failure::Deadline(n) => write!(f, "RPC of {n} bytes missed its deadline"),
        }
    }
}

impl Pair {
    /// One poll of each side and the frames carried both ways.
    fn step(&mut self, now: Instant) {
        self.client.poll(now, &mut self.client_dev);
        carry(
            self.client_dev.tx_mut(),
            self.server_dev.rx_mut(),
            now,
            &mut self.loss,
        );
        self.server.poll(now, &mut self.server_dev);
        carry(
            self.server_dev.tx_mut(),
            self.client_dev.rx_mut(),
            now,
            &mut self.loss,
        );
    }

    /// Whether nothing can happen before the next timer: no frame waiting
    /// and neither endpoint due.
    fn idle(&self, now: Instant) -> bool {
        let due = |at: Option<Instant>| at.is_some_and(|t| t <= now);
        self.client_dev.rx_ref().is_empty()
            && self.server_dev.rx_ref().is_empty()
            && self.client_dev.tx_ref().is_empty()
            && self.server_dev.tx_ref().is_empty()
            && !due(self.client.poll_at())
            && !due(self.server.poll_at())
    }

    /// One RPC of `len` bytes each way; returns the time it took.
    fn exchange(
        &mut self,
        client: homa_stack::SocketHandle,
        server: homa_stack::SocketHandle,
        len: usize,
    ) -> Result<u64, Failure> {
        let start = self.clock.now();
        // Built in place in the pool: no buffer of the message's size.
        let rpc = self
            .client
            .send_request_with(client, SERVER_IP, PORT, len, |w| fill(request_seed(len), w))
            .map_err(Failure::Send)?;
        loop {
            let now = self.clock.now();
            if now.saturating_duration_since(start).total_millis() > RPC_DEADLINE_MS {
                hprintln!("client: {}", self.client.stats());
                hprintln!("server: {}", self.server.stats());
                return Err(Failure::Deadline(len));
            }
            self.step(now);
            if let Some(Event::Request {
                rpc: srv, len: n, ..
            }) = self.server.recv(server)
            {
                let ok = self
                    .server
                    .message(srv)
                    .is_some_and(|m| matches(m, request_seed(n), n));
                if !ok {
                    return Err(Failure::BadRequest(n));
                }
                self.server
                    .reply_with(srv, n, |w| fill(reply_seed(n), w))
                    .map_err(Failure::Send)?;
            }
            match self.client.recv(client) {
                Some(Event::Response { rpc: done, len: n }) if done == rpc => {
                    let ok = n == len
                        && self
                            .client
                            .message(done)
                            .is_some_and(|m| matches(m, reply_seed(len), len));
                    self.client.release(done).map_err(Failure::Send)?;
                    if !ok {
                        return Err(Failure::BadReply(len));
                    }
                    let took = self.clock.now().saturating_duration_since(start);
                    return Ok(took.total_micros());
                }
                Some(Event::Failed { rpc, .. }) | Some(Event::Response { rpc, .. }) => {
                    return Err(Failure::Rpc(rpc))
                }
                Some(Event::Request { rpc, .. }) => return Err(Failure::Rpc(rpc)),
                None => {}
            }
            if self.idle(now) {
                // Sleep until the next SysTick, as real firmware would.
                cortex_m::asm::wfi();
            }
        }
    }
}

#[entry]
fn main() -> ! {
    finish(run())
}

fn run() -> Result<(), Failure> {
    let mut cp = cortex_m::Peripherals::take().ok_or(Failure::Setup)?;
    // The cycle counter, where the core has one (QEMU models none).
    cp.DCB.enable_trace();
    cp.DWT.enable_cycle_counter();
    let cycles_start = DWT::cycle_count();

    let [r0, r1, r2, r3] = RINGS.take();
    let (client, server) = homa_firmware::pair::endpoints().map_err(|_| Failure::Setup)?;
    let mut pair = Pair {
        client,
        server,
        client_dev: Split::new(r0, r1),
        server_dev: Split::new(r2, r3),
        clock: Clock::start(cp.SYST),
        loss: Loss {
            one_in: 0,
            rng: 0x1234_5678,
            dropped: 0,
        },
    };
    let srv = pair.server.bind(PORT).map_err(|_| Failure::Bind)?;
    let cli = pair.client.socket().map_err(|_| Failure::Bind)?;

    hprintln!("homa-stack firmware: Cortex-M4F, two endpoints, in-memory devices");
    hprintln!(
        "size_of: RpcSlot {} B, PeerSlot {} B, SocketSlot {} B, Endpoint {} B",
        size_of::<RpcSlot>(),
        size_of::<PeerSlot>(),
        size_of::<SocketSlot>(),
        size_of::<Endpoint<'static>>()
    );
    hprintln!(
        "RAM per endpoint: rpcs {}x{} = {} B, peers {}x{} = {} B, sockets {}x{} = {} B",
        RPCS,
        size_of::<RpcSlot>(),
        RPCS * size_of::<RpcSlot>(),
        PEERS,
        size_of::<PeerSlot>(),
        PEERS * size_of::<PeerSlot>(),
        SOCKETS,
        size_of::<SocketSlot>(),
        SOCKETS * size_of::<SocketSlot>()
    );
    hprintln!(
        "pools: client {} B ({} B of messages), server {} B ({} B); rings 4x{} = {} B",
        CLIENT_POOL,
        pair.client.pool_capacity_bytes(),
        SERVER_POOL,
        pair.server.pool_capacity_bytes(),
        size_of::<Ring>(),
        4 * size_of::<Ring>(),
    );

    // The largest message is Homa's limit; one byte more is refused.
    match pair
        .client
        .send_request_with(cli, SERVER_IP, PORT, MAX_MSG + 1, |_| {})
    {
        Ok(rpc) => return Err(Failure::Rpc(rpc)),
        Err(SendError::MessageTooLong) => {}
        Err(e) => return Err(Failure::Send(e)),
    }

    for (pass, sizes, loss) in [(1, &SIZES[..], 0), (2, &LOSSY_SIZES[..], LOSS_ONE_IN)] {
        pair.loss.one_in = loss;
        if loss == 0 {
            hprintln!("pass {}: no loss", pass);
        } else {
            hprintln!("pass {}: frames dropped at random, 1 in {}", pass, loss);
        }
        for &len in sizes {
            let before = *pair.client.stats();
            let before_srv = *pair.server.stats();
            let us = pair.exchange(cli, srv, len)?;
            let (c, s) = (pair.client.stats(), pair.server.stats());
            hprintln!(
                "  {:>7} B: ok in {} us; frames {}; retransmitted {}; grants {}",
                len,
                us,
                (c.tx_frames - before.tx_frames) + (s.tx_frames - before_srv.tx_frames),
                (c.retransmissions - before.retransmissions)
                    + (s.retransmissions - before_srv.retransmissions),
                (c.tx.grant - before.tx.grant) + (s.tx.grant - before_srv.tx.grant),
            );
        }
    }
    let (c, s) = (pair.client.stats(), pair.server.stats());
    hprintln!(
        "totals: frames dropped {}; RESENDs {}; retransmissions {}; completed {}; failed {}",
        pair.loss.dropped,
        c.tx.resend + s.tx.resend,
        c.retransmissions + s.retransmissions,
        c.client_completed,
        c.client_failed
    );
    let cycles = DWT::cycle_count().wrapping_sub(cycles_start);
    hprintln!(
        "clock: {} ms by SysTick; DWT cycles {}",
        pair.clock.now().total_millis(),
        cycles
    );
    if c.client_completed != (SIZES.len() + LOSSY_SIZES.len()) as u64 || c.client_failed != 0 {
        return Err(Failure::Setup);
    }
    Ok(())
}
