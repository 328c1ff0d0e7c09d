//! homa-perf's peer on a board: what the boards' firmware
//! (`examples/firmware`'s `board-firmware`, `examples/smartnic`) runs
//! against `homa-perf` on a Linux host, on homa-stack's async layer.
//!
//! - [`serve`] answers homa-perf clients as `homa-perf server` does
//!   ([`homa_phy::testing::perf`]'s format): a request shorter than the
//!   header is echoed, one asking for too long a reply is refused, any
//!   other is checked byte for byte and answered with the response its
//!   header asks for (a corrupt one too, and counted).
//! - [`call_rounds`] calls homa-perf servers with each of a list of sizes
//!   and checks every byte of every response.
//! - [`run_timed`] drives the stack's runner and measures the longest
//!   gap between two of its polls: how long the board left the network
//!   unanswered.
//!
//! Payloads are made and checked [`SLICE`] bytes at a time, with the
//! executor free to poll the network between slices, so a megabyte does
//! not silence the board: a request is checked in place in the pool; a
//! message to send is made in a buffer of the board's (`scratch`, as long
//! as the longest message) and copied into the pool in one go, as is a
//! response to check. The stack builds a message in one call
//! (`reply_with`, `call_with`) and holds a response only for one: a copy is
//! a fraction of the work of making or checking the bytes. Each board says
//! where its lines go (a [`Say`]) and what time it is; nothing here
//! allocates or is `unsafe`. The boards' addresses come from the build's
//! environment ([`BOARD`], [`SERVERS`]).
#![no_std]
#![forbid(unsafe_code)]

#[cfg(test)]
extern crate std;

mod addr;

use core::cell::{Cell, RefCell};
use core::fmt;
use core::future::poll_fn;
use core::task::Poll;

use homa_phy::testing::perf::{self, Answer, Header, Message, ECHO, HEADER_LEN};
use homa_stack::asynch::{Client, Clock, Interface, Request, Runner, Server, Stack};
use homa_stack::time::{Duration, Instant};
use homa_stack::wire::Ipv4Addr;

pub use addr::{ipv4_cidr, ipv4_list, BOARD, SERVERS};

/// Where a board's lines go: its console (semihosting here).
pub type Say = fn(fmt::Arguments<'_>);

/// Bytes of a received message checked between two yields to the
/// executor: under QEMU about a fifth of a millisecond of work.
pub const SLICE: usize = 16 * 1024;

/// Gives the executor one turn: every other ready task runs before this
/// one goes on.
pub async fn yield_now() {
    let mut yielded = false;
    poll_fn(|cx| {
        if yielded {
            Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
    .await
}

/// What the board's peer did, for its report. One board's tasks share it
/// (one executor: plain cells).
#[derive(Debug, Default)]
pub struct Tally {
    answered: Cell<u64>,
    headerless: Cell<u64>,
    corrupt: Cell<u64>,
    refused: Cell<u64>,
    message_bytes: Cell<u64>,
    polls: Cell<u64>,
    last_poll_end: Cell<Option<Instant>>,
    longest_gap: Cell<Duration>,
    longest_poll: Cell<Duration>,
    gap_said: Cell<Duration>,
}

impl Tally {
    /// Nothing counted yet.
    pub const fn new() -> Tally {
        Tally {
            answered: Cell::new(0),
            headerless: Cell::new(0),
            corrupt: Cell::new(0),
            refused: Cell::new(0),
            message_bytes: Cell::new(0),
            polls: Cell::new(0),
            last_poll_end: Cell::new(None),
            longest_gap: Cell::new(Duration::ZERO),
            longest_poll: Cell::new(Duration::ZERO),
            gap_said: Cell::new(Duration::ZERO),
        }
    }

    /// Requests answered (headerless ones included).
    pub fn answered(&self) -> u64 {
        self.answered.get()
    }

    /// Requests shorter than the header, echoed unchecked.
    pub fn headerless(&self) -> u64 {
        self.headerless.get()
    }

    /// Requests whose bytes were not what their header promised.
    pub fn corrupt(&self) -> u64 {
        self.corrupt.get()
    }

    /// Requests not answered: too long a reply asked for, or no room.
    pub fn refused(&self) -> u64 {
        self.refused.get()
    }

    /// Bytes of the messages the board sent (requests and replies, each
    /// once): what the stack's DATA bytes sent exceed by retransmissions.
    pub fn message_bytes(&self) -> u64 {
        self.message_bytes.get()
    }

    /// The runner's polls so far.
    pub fn polls(&self) -> u64 {
        self.polls.get()
    }

    /// The longest time from the end of one poll of the runner to the
    /// start of the next: the network left unanswered.
    pub fn longest_gap(&self) -> Duration {
        self.longest_gap.get()
    }

    /// The longest poll.
    pub fn longest_poll(&self) -> Duration {
        self.longest_poll.get()
    }

    fn add(cell: &Cell<u64>, n: u64) -> u64 {
        let v = cell.get() + n;
        cell.set(v);
        v
    }

    fn poll_started(&self, now: Instant) {
        Self::add(&self.polls, 1);
        if let Some(end) = self.last_poll_end.get() {
            let gap = now.saturating_duration_since(end);
            if gap > self.longest_gap.get() {
                self.longest_gap.set(gap);
            }
        }
    }

    fn poll_ended(&self, start: Instant, now: Instant) {
        self.last_poll_end.set(Some(now));
        let took = now.saturating_duration_since(start);
        if took > self.longest_poll.get() {
            self.longest_poll.set(took);
        }
    }

    /// `network polls: N, longest gap X us, longest poll Y us`.
    pub fn say_polls(&self, say: Say) {
        self.gap_said.set(self.longest_gap());
        say(format_args!(
            "network polls: {}, longest gap {} us, longest poll {} us",
            self.polls(),
            self.longest_gap().total_micros(),
            self.longest_poll().total_micros()
        ));
    }
}

/// Drives `runner` forever, as [`Runner::run`] does, timing each poll by
/// `now` into `tally` ([`Tally::longest_gap`]).
pub async fn run_timed<I: Interface, C: Clock, const N: usize>(
    runner: &mut Runner<'_, '_, I, C, N>,
    tally: &Tally,
    mut now: impl FnMut() -> Instant,
) -> ! {
    loop {
        poll_fn(|cx| {
            let start = now();
            tally.poll_started(start);
            runner.poll_once(cx);
            tally.poll_ended(start, now());
            Poll::<()>::Pending
        })
        .await;
    }
}

/// Writes message `m` into `buf` (its first `buf.len()` bytes), a
/// [`SLICE`] at a time with a yield after each.
async fn fill_in_slices(m: &Message, buf: &mut [u8]) {
    for (k, piece) in buf.chunks_mut(SLICE).enumerate() {
        m.fill_at(k * SLICE, piece);
        yield_now().await;
    }
}

/// Whether `bytes` are message `want`, checked a [`SLICE`] at a time with a
/// yield after each.
async fn check_in_slices(want: &Message, bytes: &[u8]) -> bool {
    if bytes.len() != want.len() {
        return false;
    }
    for (k, piece) in bytes.chunks(SLICE).enumerate() {
        if !want.matches_at(k * SLICE, piece) {
            return false;
        }
        yield_now().await;
    }
    true
}

/// Whether `request` is `want`, checked in place a [`SLICE`] at a time
/// with a yield after each.
async fn check_request<const N: usize>(request: &Request<'_, '_, N>, want: &Message) -> bool {
    let len = request.len();
    if len != want.len() {
        return false;
    }
    let mut at = 0;
    while at < len {
        let end = (at + SLICE).min(len);
        let ok = request.read(|m| {
            m.range(at..end)
                .ok()
                .and_then(|chunks| want.check_from(at, chunks))
                == Some(end)
        });
        if ok != Some(true) {
            return false;
        }
        at = end;
        yield_now().await;
    }
    true
}

/// Answers homa-perf's requests on `server` forever, as `homa-perf server`
/// does: shorter than the header, echoed; a reply longer than `scratch`
/// asked for, refused (the request dropped, which aborts its RPC); any
/// other checked, counted corrupt when it is, and answered with the
/// response its header asks for, made in `scratch`. Says every refusal and
/// corrupt request, the count at each power of two, and the network's
/// longest gap when it grew.
pub async fn serve<const N: usize>(
    server: &mut Server<'_, '_, N>,
    scratch: &mut [u8],
    tally: &Tally,
    say: Say,
) -> ! {
    let max_reply = scratch.len();
    loop {
        let mut request = server.accept().await;
        let len = request.len();
        let mut head = [0u8; HEADER_LEN];
        let got = request.copy_to(&mut head);
        let replied = match perf::answer(&head[..got], len, max_reply) {
            Answer::Echo => {
                Tally::add(&tally.headerless, 1);
                request.reply(&head[..got]).map(|()| got)
            }
            Answer::TooLong { len: asked } => {
                let n = Tally::add(&tally.refused, 1);
                say(format_args!(
                    "server: a request of {len} B asks for {asked} B, over {max_reply} B ({n} refused)"
                ));
                continue;
            }
            Answer::Reply {
                request: want,
                response,
            } => {
                if !check_request(&request, &want).await {
                    let n = Tally::add(&tally.corrupt, 1);
                    say(format_args!(
                        "server: a request of {len} B is corrupt ({n} so far)"
                    ));
                }
                let reply = &mut scratch[..response.len()];
                fill_in_slices(&response, reply).await;
                request.reply(reply).map(|()| reply.len())
            }
        };
        match replied {
            Ok(sent) => {
                Tally::add(&tally.message_bytes, sent as u64);
                let n = Tally::add(&tally.answered, 1);
                if n.is_power_of_two() {
                    say(format_args!("server: {n} requests answered"));
                }
                if tally.longest_gap() > tally.gap_said.get() {
                    tally.say_polls(say);
                }
            }
            Err(e) => {
                let n = Tally::add(&tally.refused, 1);
                say(format_args!(
                    "server: no reply to a request of {len} B: {e} ({n} refused)"
                ));
            }
        }
    }
}

/// The calls of [`call_rounds`]: `rounds` rounds to each of `hosts` in
/// turn, each round one RPC of each of `sizes`, the first with payload
/// seed `seed` and each next one with the next seed.
#[derive(Debug, Clone, Copy)]
pub struct Rounds<'p> {
    /// homa-perf servers.
    pub hosts: &'p [Ipv4Addr],
    /// Their Homa port.
    pub port: u16,
    /// Rounds per server.
    pub rounds: usize,
    /// Request sizes of a round, in order: below the header an echo, sent
    /// at its size; from the header on, a request for a response of its
    /// own size.
    pub sizes: &'p [usize],
    /// The first payload seed.
    pub seed: u64,
}

impl Rounds<'_> {
    /// RPCs in all.
    pub fn calls(&self) -> usize {
        self.hosts.len() * self.rounds * self.sizes.len()
    }
}

/// Why [`call_rounds`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoundsError {
    /// A response's bytes were not those owed.
    Corrupt,
    /// An RPC failed.
    Failed,
    /// The stack's counts disagree with the calls made.
    Count,
    /// A message is longer than the buffer to make it in.
    TooLong,
}

impl fmt::Display for RoundsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RoundsError::Corrupt => "response corrupt",
            RoundsError::Failed => "call failed",
            RoundsError::Count => "final count",
            RoundsError::TooLong => "message longer than the scratch buffer",
        })
    }
}

/// Calls homa-perf's servers from `client` of `stack` as `plan` says (messages of at most
/// `scratch.len()` bytes, made and checked there) and checks every byte of
/// every response; says one line per RPC (`round 1 (10.0.0.1):   40000 B ok in
/// 23723 us`), then the stack's client counts, which must be the calls
/// made. A failed first call of a round is tried again, up to 30 times (a
/// server may start after the board); any other failure ends the rounds.
/// Returns how many first calls were tried again.
pub async fn call_rounds<const N: usize>(
    stack: &Stack<'_, N>,
    client: &mut Client<'_, '_, N>,
    plan: &Rounds<'_>,
    scratch: &mut [u8],
    tally: &Tally,
    mut now: impl FnMut() -> Instant,
    say: Say,
) -> Result<u64, RoundsError> {
    let mut seed = plan.seed;
    let mut retried = 0u64;
    let mut round = 0;
    for &host in plan.hosts {
        for _ in 0..plan.rounds {
            round += 1;
            for (i, &size) in plan.sizes.iter().enumerate() {
                let reply_len = if size < HEADER_LEN { ECHO } else { size as u32 };
                let h = Header { reply_len, seed };
                let request = Message::request(h, size);
                let response = Message::response(h, request.len());
                if request.len().max(response.len()) > scratch.len() {
                    return Err(RoundsError::TooLong);
                }
                let start = now();
                let mut tries = 0;
                let r = loop {
                    let r = call(client, host, plan.port, &request, &response, scratch).await;
                    Tally::add(&tally.message_bytes, request.len() as u64);
                    tries += 1;
                    match r {
                        Err(_) if i == 0 && tries < 30 => retried += 1,
                        other => break other,
                    }
                };
                let us = now().saturating_duration_since(start).total_micros();
                match r {
                    Ok(true) => say(format_args!(
                        "round {round} ({host}): {size:>7} B ok in {us} us"
                    )),
                    Ok(false) => {
                        say(format_args!(
                            "round {round} ({host}): {size:>7} B: response corrupt"
                        ));
                        return Err(RoundsError::Corrupt);
                    }
                    Err(e) => {
                        say(format_args!("round {round} ({host}): {size:>7} B: {e}"));
                        return Err(RoundsError::Failed);
                    }
                }
                seed = seed.wrapping_add(1);
            }
        }
    }
    let (completed, failed) = stack.with(|ep| {
        let s = ep.stats();
        (s.client_completed, s.client_failed)
    });
    say(format_args!(
        "client: completed {completed}; failed {failed} (first calls tried again {retried})"
    ));
    if completed != plan.calls() as u64 || failed != retried {
        return Err(RoundsError::Count);
    }
    Ok(retried)
}

/// One RPC, its request made in `scratch` and its response copied there
/// to be checked: whether the response was `response`.
async fn call<const N: usize>(
    client: &mut Client<'_, '_, N>,
    host: Ipv4Addr,
    port: u16,
    request: &Message,
    response: &Message,
    scratch: &mut [u8],
) -> Result<bool, homa_stack::asynch::CallError> {
    let len = request.len();
    fill_in_slices(request, &mut scratch[..len]).await;
    // The request is read from `scratch` when the RPC starts, the response
    // written there when it ends.
    let scratch = RefCell::new(scratch);
    let got = client
        .call_with(
            host,
            port,
            len,
            |w| {
                // Cannot fail: the message was sized for the request.
                let _ = w.write_at(0, &scratch.borrow()[..len]);
            },
            |m| (m.len() == response.len()).then(|| m.copy_to(&mut scratch.borrow_mut()[..])),
        )
        .await?;
    let scratch = scratch.into_inner();
    Ok(match got {
        Some(n) => check_in_slices(response, &scratch[..n]).await,
        None => false,
    })
}

/// Says homa-stack's counters of `stack` and the network's polls: `homa-stack:
/// rx frames .. tx frames .. (DATA .. B for .. B of messages) ...`.
pub fn report<const N: usize>(stack: &Stack<'_, N>, tally: &Tally, say: Say) {
    stack.with(|ep| {
        let s = ep.stats();
        say(format_args!(
            "homa-stack: rx frames {} tx frames {} (DATA {} B for {} B of messages) \
             retransmissions {} resends asked {} timeouts {} drops {}",
            s.rx_frames,
            s.tx_frames,
            s.tx_data_bytes,
            tally.message_bytes(),
            s.retransmissions,
            s.resends_requested,
            s.timeouts,
            s.drops.total()
        ));
    });
    tally.say_polls(say);
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::future::Future;
    use core::pin::{pin, Pin};
    use core::task::{Context, Waker};
    use homa_stack::asynch::{Wire, WireEnd};
    use homa_stack::endpoint::{PeerSlot, RpcSlot, SocketSlot};
    use homa_stack::wire::EthernetAddress;
    use homa_stack::{Config, Endpoint};
    use std::boxed::Box;
    use std::vec;

    const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 4);
    const BOARD_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
    const PORT: u16 = 500;

    /// A clock that moves 10 us on each look and wakes at once.
    struct Steps(Instant);

    impl Clock for Steps {
        fn now(&mut self) -> Instant {
            self.0 += Duration::from_micros(10);
            self.0
        }
        fn wake_at(&mut self, _at: Instant, waker: &Waker) {
            waker.wake_by_ref();
        }
    }

    fn stack(ip: Ipv4Addr, last: u8) -> &'static Stack<'static, 2> {
        let config = Config::new(ip, EthernetAddress([2, 0, 0, 0, 0, last]), u64::from(last));
        let endpoint = Endpoint::new(
            config,
            &mut Box::leak(Box::new([RpcSlot::EMPTY; 8]))[..],
            &mut Box::leak(Box::new([PeerSlot::EMPTY; 2]))[..],
            &mut Box::leak(Box::new([SocketSlot::EMPTY; 2]))[..],
            &mut vec![0u8; 512 * 1024].leak()[..],
            4096,
        )
        .unwrap();
        Box::leak(Box::new(Stack::new(endpoint)))
    }

    fn say(_: fmt::Arguments<'_>) {}

    fn step<F: Future + ?Sized>(f: Pin<&mut F>) -> Poll<F::Output> {
        f.poll(&mut Context::from_waker(Waker::noop()))
    }

    type End = WireEnd<'static, 16, 1514>;

    /// The board (a stack serving homa-perf's format) and a client stack
    /// on one wire, both runners polled, with `client` run against it
    /// until it finishes.
    fn against_the_board<T>(
        tally: &'static Tally,
        client: impl FnOnce(&'static Stack<'static, 2>) -> Pin<Box<dyn Future<Output = T>>>,
    ) -> T {
        let wire: &'static Wire<16> = Box::leak(Box::new(Wire::new()));
        let (end_c, end_b) = wire.ends();
        let (c, b) = (stack(CLIENT_IP, 4), stack(BOARD_IP, 2));
        let mut run_c: Runner<'_, '_, End, Steps, 2> = Runner::new(c, end_c, Steps(Instant::ZERO));
        let mut run_b: Runner<'_, '_, End, Steps, 2> = Runner::new(b, end_b, Steps(Instant::ZERO));
        let mut server = b.bind(PORT).unwrap();
        let scratch = vec![0u8; 100_000].leak();
        let mut serve = pin!(serve(&mut server, scratch, tally, say));
        let (mut run_c, mut run_b) = (pin!(run_c.run()), pin!(run_b.run()));
        let mut main = client(c);
        for _ in 0..2_000_000 {
            let _ = step(run_c.as_mut());
            let _ = step(run_b.as_mut());
            let _ = step(serve.as_mut());
            if let Poll::Ready(out) = step(main.as_mut()) {
                return out;
            }
        }
        panic!("the client did not finish");
    }

    /// What the board's server answers `request` with, if anything.
    fn answer_to(request: std::vec::Vec<u8>, tally: &'static Tally) -> Option<std::vec::Vec<u8>> {
        against_the_board(tally, move |c| {
            Box::pin(async move {
                let mut client = c.client().unwrap();
                let mut buf = vec![0u8; 200_000];
                // A refused request gets no answer: its RPC times out.
                let n = client.call(BOARD_IP, PORT, &request, &mut buf).await.ok()?;
                Some(buf[..n].to_vec())
            })
        })
    }

    fn bytes(m: &Message) -> std::vec::Vec<u8> {
        let mut v = vec![0u8; m.len()];
        m.fill_at(0, &mut v);
        v
    }

    /// A Linux client's 1-byte request, or any shorter than the header, is
    /// sent back as it came: its client does not retry until it times out.
    #[test]
    fn requests_shorter_than_the_header_are_echoed() {
        for request in [vec![0x5a], vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]] {
            let tally = Box::leak(Box::new(Tally::new()));
            assert_eq!(answer_to(request.clone(), tally), Some(request));
            assert_eq!((tally.answered(), tally.headerless()), (1, 1));
            assert_eq!((tally.corrupt(), tally.refused()), (0, 0));
        }
    }

    /// Requests with a header get the response it asks for, checked in
    /// slices (40,000 bytes is three); a corrupt one is answered too, and
    /// counted.
    #[test]
    fn requests_get_the_response_their_header_asks_for() {
        let cases = [
            (
                Header {
                    reply_len: 100,
                    seed: 1,
                },
                12,
            ),
            (
                Header {
                    reply_len: 3,
                    seed: 2,
                },
                1400,
            ),
            (
                Header {
                    reply_len: ECHO,
                    seed: 3,
                },
                40_000,
            ),
            (
                Header {
                    reply_len: 40_000,
                    seed: 4,
                },
                20,
            ),
        ];
        for (h, size) in cases {
            let tally = Box::leak(Box::new(Tally::new()));
            let request = bytes(&Message::request(h, size));
            let got = answer_to(request, tally).expect("answered");
            assert_eq!(got, bytes(&Message::response(h, size)), "{h:?}");
            assert_eq!((tally.answered(), tally.corrupt()), (1, 0));
        }
        let h = Header {
            reply_len: ECHO,
            seed: 5,
        };
        let mut request = bytes(&Message::request(h, 40_000));
        request[39_999] ^= 1;
        let tally = Box::leak(Box::new(Tally::new()));
        let got = answer_to(request, tally).expect("answered");
        assert_eq!(got, bytes(&Message::request(h, 40_000)));
        assert_eq!((tally.answered(), tally.corrupt()), (1, 1));
    }

    /// A header asking for more than the board holds is refused, and its
    /// RPC freed: the client gets no answer (each time it asks again, the
    /// request is refused again).
    #[test]
    fn replies_longer_than_the_board_allows_are_refused() {
        let tally = Box::leak(Box::new(Tally::new()));
        let h = Header {
            reply_len: 100_001,
            seed: 6,
        };
        assert_eq!(answer_to(bytes(&Message::request(h, 100)), tally), None);
        assert_eq!(tally.answered(), 0);
        assert!(tally.refused() >= 1);
    }

    /// The board's client rounds against the board's own server: every
    /// size, an echo below the header, every byte checked.
    #[test]
    fn client_rounds_pass_against_the_server() {
        static HOSTS: [Ipv4Addr; 1] = [BOARD_IP];
        static SIZES: [usize; 6] = [1, 11, 12, 1400, 1401, 40_000];
        let tally = Box::leak(Box::new(Tally::new()));
        let plan = Rounds {
            hosts: &HOSTS,
            port: PORT,
            rounds: 2,
            sizes: &SIZES,
            seed: 77,
        };
        let r = against_the_board(tally, move |c| {
            Box::pin(async move {
                let mut t = Instant::ZERO;
                let client_tally = Tally::new();
                let mut scratch = vec![0u8; 40_000];
                let mut client = c.client().unwrap();
                let r = call_rounds(
                    c,
                    &mut client,
                    &plan,
                    &mut scratch,
                    &client_tally,
                    move || {
                        t += Duration::from_micros(1);
                        t
                    },
                    say,
                )
                .await;
                (r, client_tally.message_bytes())
            })
        });
        // Each request once, at its size: those under the header are echoes.
        let sent: usize = SIZES.iter().sum();
        assert_eq!(r, (Ok(0), 2 * sent as u64));
        assert_eq!(tally.answered(), 12);
        assert_eq!((tally.headerless(), tally.corrupt()), (4, 0));
    }

    /// The longest gap is the longest time between the end of one poll
    /// and the start of the next, whatever ran in between.
    #[test]
    fn the_longest_gap_between_polls_is_measured() {
        let wire: Wire<4> = Wire::new();
        let (end, _) = wire.ends();
        let b = stack(BOARD_IP, 2);
        let mut runner = Runner::new(b, end, Steps(Instant::ZERO));
        let tally = Tally::new();
        let now = Cell::new(Instant::ZERO);
        let mut run = pin!(run_timed(&mut runner, &tally, || now.get()));
        for gap_us in [300, 7_000, 50, 2_000] {
            let _ = step(run.as_mut());
            now.set(now.get() + Duration::from_micros(gap_us));
        }
        let _ = step(run.as_mut());
        assert_eq!(tally.polls(), 5);
        assert_eq!(tally.longest_gap(), Duration::from_micros(7_000));
        assert_eq!(tally.longest_poll(), Duration::ZERO);
    }
}
