//! homa-stack's async layer (`homa_stack::asynch`) on a small executor of
//! its own with virtual time: a task is polled only when its waker was
//! woken, and when no task is woken the clock jumps to the earliest timer;
//! with neither, the executor panics ("nothing woken"). So every test here
//! also checks that the layer wakes what it must: a missed wake is a
//! deadlock, reported, not a busy loop that happens to work.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use homa_stack::asynch::{CallError, Client, Clock, Runner, Stack, Wire};
use homa_stack::endpoint::{PeerSlot, RpcSlot, SocketSlot};
use homa_stack::storage::{MessageRef, MessageWriter};
use homa_stack::time::{Duration, Instant};
use homa_stack::wire::{EthernetAddress, Ipv4Addr};
use homa_stack::{Config, Endpoint, RpcError};

const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const PORT: u16 = 99;

// ---- the executor ---------------------------------------------------------

/// Virtual time and the timers the runners' clocks set.
#[derive(Default)]
struct Time {
    now: Cell<Instant>,
    /// One timer per clock (a later `wake_at` replaces the earlier).
    timers: RefCell<Vec<Option<(Instant, Waker)>>>,
}

/// A runner's clock on the virtual time.
struct SimClock {
    time: Rc<Time>,
    id: usize,
}

impl SimClock {
    fn new(time: &Rc<Time>) -> SimClock {
        let mut timers = time.timers.borrow_mut();
        timers.push(None);
        SimClock {
            time: time.clone(),
            id: timers.len() - 1,
        }
    }
}

impl Clock for SimClock {
    fn now(&mut self) -> Instant {
        self.time.now.get()
    }
    fn wake_at(&mut self, at: Instant, waker: &Waker) {
        self.time.timers.borrow_mut()[self.id] = Some((at, waker.clone()));
    }
}

struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::Relaxed);
    }
}

type Task<'a> = Pin<Box<dyn Future<Output = ()> + 'a>>;

/// Runs `main` and `tasks` until `main` completes; returns its output.
/// Each round polls the woken tasks and moves the clock 1 us; a round with
/// none woken moves it to the earliest timer instead.
fn run<'a, T>(time: &Time, main: impl Future<Output = T> + 'a, tasks: Vec<Task<'a>>) -> T {
    let mut main = Box::pin(main);
    let main_flag = Arc::new(Flag(AtomicBool::new(true)));
    let main_waker = Waker::from(main_flag.clone());
    let mut tasks: Vec<(Option<Task<'a>>, Arc<Flag>)> = tasks
        .into_iter()
        .map(|t| (Some(t), Arc::new(Flag(AtomicBool::new(true)))))
        .collect();
    for _round in 0..2_000_000u64 {
        let mut any = false;
        for (task, flag) in tasks.iter_mut() {
            if flag.0.swap(false, Ordering::Relaxed) {
                any = true;
                if let Some(t) = task {
                    let waker = Waker::from(flag.clone());
                    if t.as_mut().poll(&mut Context::from_waker(&waker)).is_ready() {
                        *task = None;
                    }
                }
            }
        }
        if main_flag.0.swap(false, Ordering::Relaxed) {
            any = true;
            if let Poll::Ready(out) = main.as_mut().poll(&mut Context::from_waker(&main_waker)) {
                return out;
            }
        }
        if any {
            time.now.set(time.now.get() + Duration::from_micros(1));
            continue;
        }
        // Nothing woken: jump to the earliest timer and fire it.
        let mut timers = time.timers.borrow_mut();
        let next = timers
            .iter()
            .enumerate()
            .filter_map(|(i, t)| t.as_ref().map(|(at, _)| (*at, i)))
            .min();
        let Some((at, i)) = next else {
            panic!("nothing woken and no timer set: a wake was missed");
        };
        let (_, waker) = timers[i].take().unwrap();
        drop(timers);
        time.now.set(time.now.get().max(at));
        waker.wake();
    }
    panic!("no end after 2,000,000 rounds");
}

/// Counts the polls of a future.
struct Counted<F> {
    inner: Pin<Box<F>>,
    polls: Rc<Cell<u32>>,
}

impl<F: Future> Future for Counted<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.polls.set(self.polls.get() + 1);
        self.inner.as_mut().poll(cx)
    }
}

// ---- set-up ---------------------------------------------------------------

fn endpoint(ip: Ipv4Addr, mac: u8, rpcs: usize, pool: usize) -> Endpoint<'static> {
    endpoint_with(ip, mac, rpcs, pool, |_| {})
}

/// [`endpoint`] with its configuration changed by `tune`.
fn endpoint_with(
    ip: Ipv4Addr,
    mac: u8,
    rpcs: usize,
    pool: usize,
    tune: impl FnOnce(&mut Config),
) -> Endpoint<'static> {
    let mut config = Config::new(ip, EthernetAddress([2, 0, 0, 0, 0, mac]), u64::from(mac));
    tune(&mut config);
    Endpoint::new(
        config,
        Vec::leak((0..rpcs).map(|_| RpcSlot::EMPTY).collect()),
        Vec::leak(vec![PeerSlot::EMPTY; 4]),
        Vec::leak(vec![SocketSlot::EMPTY; 8]),
        Vec::leak(vec![0u8; pool]),
        4096,
    )
    .unwrap()
}

type Stack8 = Stack<'static, 8>;

/// What every test here starts from: virtual time, client and server
/// stacks of up to 8 async sockets each, and an in-memory wire between
/// them (no runner on it yet).
struct Net {
    time: Rc<Time>,
    cs: Stack8,
    ss: Stack8,
    wire: Wire<8>,
}

impl Net {
    /// `client_rpcs` RPC slots on the client (16 on the server), pools of
    /// `pool` bytes.
    fn new(client_rpcs: usize, pool: usize) -> Net {
        Net {
            time: Rc::new(Time::default()),
            cs: Stack::new(endpoint(CLIENT_IP, 1, client_rpcs, pool)),
            ss: Stack::new(endpoint(SERVER_IP, 2, 16, pool)),
            wire: Wire::new(),
        }
    }

    /// The two runners on the wire's ends.
    fn runners(&self) -> Vec<Task<'_>> {
        let (a, b) = self.wire.ends();
        let mut ra = Runner::new(&self.cs, a, SimClock::new(&self.time));
        let mut rb = Runner::new(&self.ss, b, SimClock::new(&self.time));
        vec![
            Box::pin(async move {
                ra.run().await;
            }),
            Box::pin(async move {
                rb.run().await;
            }),
        ]
    }

    /// The runners and a server task running [`serve`]; the count of
    /// requests it answered.
    fn serving(&self) -> (Vec<Task<'_>>, Rc<Cell<u32>>) {
        let answered = Rc::new(Cell::new(0));
        let mut tasks = self.runners();
        tasks.push(Box::pin(serve(&self.ss, answered.clone())));
        (tasks, answered)
    }

    /// Runs `main` beside `tasks` on this net's clock.
    fn run<'a, T>(&self, main: impl Future<Output = T> + 'a, tasks: Vec<Task<'a>>) -> T {
        run(&self.time, main, tasks)
    }
}

/// One call of `len` bytes of pattern `len` to [`serve`], its response
/// checked in place to be `len` bytes of pattern `!len`.
async fn checked_call(client: &mut Client<'_, 'static, 8>, len: usize) {
    let ok = client
        .call_with(SERVER_IP, PORT, len, fill(len as u32), |m| {
            matches(m, !(len as u32), len)
        })
        .await
        .unwrap();
    assert!(ok, "response of {len} bytes");
}

fn pattern(seed: u32, i: usize) -> u8 {
    let x = (i as u32).wrapping_add(seed.wrapping_mul(0x9e37_79b9));
    (x ^ (x >> 8) ^ (x >> 16).wrapping_mul(31)) as u8
}

fn fill(seed: u32) -> impl FnMut(&mut MessageWriter<'_, '_>) {
    move |w| {
        w.for_each_chunk(|at, piece| {
            for (j, b) in piece.iter_mut().enumerate() {
                *b = pattern(seed, at + j);
            }
        })
    }
}

fn matches(msg: MessageRef<'_>, seed: u32, len: usize) -> bool {
    let mut off = 0;
    for chunk in msg.chunks() {
        if chunk
            .iter()
            .enumerate()
            .any(|(j, &b)| b != pattern(seed, off + j))
        {
            return false;
        }
        off += chunk.len();
    }
    off == len && msg.len() == len
}

/// A server that answers every request with `len` bytes of pattern `!len`
/// after checking it is pattern `len`; counts what it answered.
async fn serve(stack: &Stack8, answered: Rc<Cell<u32>>) {
    let mut server = stack.bind(PORT).unwrap();
    loop {
        let mut req = server.accept().await;
        let n = req.len();
        assert_eq!(req.read(|m| matches(m, n as u32, n)), Some(true), "request");
        req.reply_with(n, fill(!(n as u32))).unwrap();
        answered.set(answered.get() + 1);
    }
}

// ---- tests ----------------------------------------------------------------

#[test]
fn calls_of_several_sizes_complete_with_their_responses_checked_in_place() {
    let net = Net::new(8, 2 << 20);
    let Net { cs, .. } = &net;
    let (tasks, answered) = net.serving();
    let sizes = [1, 100, 1424, 1425, 40_001, 500_000];
    let main = async {
        let mut client = cs.client().unwrap();
        for len in sizes {
            checked_call(&mut client, len).await;
        }
        // And the copying form, response into a caller buffer.
        let mut buf = [0u8; 2000];
        let request: Vec<u8> = (0..1500).map(|i| pattern(1500, i)).collect();
        let n = client
            .call(SERVER_IP, PORT, &request, &mut buf)
            .await
            .unwrap();
        assert_eq!(n, 1500);
        assert!((0..n).all(|i| buf[i] == pattern(!1500, i)));
        // A buffer too small: the error says how long, and nothing is kept.
        let mut small = [0u8; 10];
        let e = client.call(SERVER_IP, PORT, &request, &mut small).await;
        assert_eq!(e, Err(CallError::Truncated { len: 1500 }));
    };
    net.run(main, tasks);
    assert_eq!(answered.get(), sizes.len() as u32 + 2);
    cs.with(|ep| {
        assert_eq!(ep.rpcs_in_use(), 0, "every client RPC released");
        assert_eq!(ep.pool_free_bytes(), ep.pool_capacity_bytes());
        assert_eq!(ep.stats().client_completed, sizes.len() as u64 + 2);
    });
}

#[test]
fn a_runner_polls_again_at_once_while_its_device_holds_frames() {
    // The server reads one frame a poll; four requests reach its ring at
    // once. The wire wakes its runner for the first, and wakes it again
    // only for a new frame, so the runner must poll again by itself while
    // the device may hold more: all four are read within microseconds.
    // (Before, it slept until the endpoint's next tick, and nothing else
    // woke it: this test spun until the executor gave up.)
    let mut net = Net::new(8, 1 << 20);
    net.ss = Stack::new(endpoint_with(SERVER_IP, 2, 16, 1 << 20, |c| {
        c.max_rx_per_poll = 1;
    }));
    let Net { cs, ss, time, .. } = &net;
    // Bound, never accepted: the server holds each request it reads.
    let _server = ss.bind(PORT).unwrap();
    let mut tasks = net.runners();
    for k in 0..4u8 {
        let cs = &cs;
        tasks.push(Box::pin(async move {
            let mut client = cs.client().unwrap();
            let mut buf = [0u8; 8];
            let _ = client.call(SERVER_IP, PORT, &[k; 3], &mut buf).await;
        }));
    }
    // Watched through the wire, which wakes nobody (a call on the stack
    // would wake its runner).
    let wire = &net.wire;
    let mut since = None;
    let main = std::future::poll_fn(|cx| {
        let queued = wire.queued(1);
        if since.is_none() && queued >= 2 {
            since = Some(time.now.get());
        }
        match since {
            Some(t) if queued == 0 => Poll::Ready(time.now.get() - t),
            _ => {
                // Polled every round a task runs, not woken by the server.
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        }
    });
    let took = net.run(main, tasks);
    assert!(took < Duration::from_micros(20), "{took}");
    ss.with(|ep| assert_eq!(ep.rpcs_in_use(), 4));
}

#[test]
fn calls_complete_through_random_loss() {
    let net = Net::new(8, 1 << 20);
    let Net { cs, ss, wire, .. } = &net;
    wire.set_loss(10, 0x1234_5678);
    let (tasks, _) = net.serving();
    let main = async {
        let mut client = cs.client().unwrap();
        for len in [1425, 40_001, 200_000] {
            checked_call(&mut client, len).await;
        }
    };
    net.run(main, tasks);
    assert!(
        wire.dropped() > 10,
        "frames were dropped: {}",
        wire.dropped()
    );
    assert!(
        cs.with(|ep| ep.stats().retransmissions) + ss.with(|ep| ep.stats().retransmissions) > 0
    );
}

#[test]
fn concurrent_calls_are_in_service_at_the_server_at_once() {
    let net = Net::new(8, 1 << 20);
    let Net { cs, ss, .. } = &net;
    let mut tasks = net.runners();
    // The server answers only once it holds four requests: the calls must
    // all be under way together, or this never ends.
    tasks.push(Box::pin(async {
        let mut server = ss.bind(PORT).unwrap();
        let mut held = Vec::new();
        while held.len() < 4 {
            held.push(server.accept().await);
        }
        for mut req in held {
            let mut buf = [0u8; 8];
            let n = req.copy_to(&mut buf);
            let answer: Vec<u8> = buf[..n].iter().map(|b| b + 1).collect();
            req.reply(&answer).unwrap();
        }
        std::future::pending::<()>().await;
    }));
    let finished = Rc::new(RefCell::new(Vec::new()));
    for k in 0..4u8 {
        let (cs, finished) = (&cs, finished.clone());
        tasks.push(Box::pin(async move {
            let mut client = cs.client().unwrap();
            let mut buf = [0u8; 8];
            let n = client
                .call(SERVER_IP, PORT, &[k; 3], &mut buf)
                .await
                .unwrap();
            assert_eq!(&buf[..n], &[k + 1; 3]);
            finished.borrow_mut().push(k);
        }));
    }
    let done = finished.clone();
    let main = std::future::poll_fn(move |cx| {
        if done.borrow().len() == 4 {
            Poll::Ready(())
        } else {
            // Polled again only when some task runs: every round.
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    });
    net.run(main, tasks);
    let mut f = finished.borrow().clone();
    f.sort();
    assert_eq!(f, [0, 1, 2, 3]);
}

#[test]
fn an_accept_loop_serves_many_clients_in_turn() {
    let net = Net::new(8, 1 << 20);
    let Net { cs, .. } = &net;
    let (tasks, answered) = net.serving();
    let main = async {
        for round in 0..3 {
            // A fresh client each round: sockets are opened and closed.
            let mut client = cs.client().unwrap();
            for i in 0..10usize {
                let len = 1 + round * 1000 + i * 37;
                checked_call(&mut client, len).await;
            }
        }
    };
    net.run(main, tasks);
    assert_eq!(answered.get(), 30);
    assert_eq!(cs.with(|ep| ep.rpcs_in_use()), 0);
}

#[test]
fn a_dropped_call_future_aborts_and_frees_its_rpc() {
    let net = Net::new(8, 1 << 20);
    let Net { cs, ss, .. } = &net;
    let tasks = net.runners();
    // A server socket that never accepts: requests arrive and wait.
    let server = ss.bind(PORT).unwrap();
    let capacity = cs.with(|ep| ep.pool_capacity_bytes());
    let main = async {
        let mut client = cs.client().unwrap();
        {
            let mut call = Box::pin(client.call_with(SERVER_IP, PORT, 30_000, fill(1), |_| ()));
            // Poll it until the request has reached the server.
            std::future::poll_fn(|cx| {
                assert!(call.as_mut().poll(cx).is_pending());
                if ss.with(|ep| ep.rpcs_in_use()) == 1 {
                    Poll::Ready(())
                } else {
                    cx.waker().wake_by_ref();
                    Poll::Pending
                }
            })
            .await;
            cs.with(|ep| {
                assert_eq!(ep.rpcs_in_use(), 1);
                assert!(ep.pool_free_bytes() < capacity);
            });
        } // the call future is dropped here
        cs.with(|ep| {
            assert_eq!(ep.rpcs_in_use(), 0, "the RPC was aborted");
            assert_eq!(ep.pool_free_bytes(), capacity, "and its request freed");
        });
        // The server answers now; the next call on the same client gets its
        // own response, not the aborted one's.
        let answered = Rc::new(Cell::new(0));
        drop(server);
        let mut serve = Box::pin(serve(ss, answered.clone()));
        let mut buf = [0u8; 8];
        let request = [pattern(1, 0)];
        let mut call = Box::pin(client.call(SERVER_IP, PORT, &request, &mut buf));
        let n = std::future::poll_fn(|cx| {
            let _ = serve.as_mut().poll(cx);
            match call.as_mut().poll(cx) {
                Poll::Ready(r) => Poll::Ready(r),
                Poll::Pending => {
                    cx.waker().wake_by_ref();
                    Poll::Pending
                }
            }
        })
        .await;
        drop(call);
        assert_eq!(n, Ok(1));
        assert_eq!(buf[0], pattern(!1, 0));
    };
    net.run(main, tasks);
    assert_eq!(cs.with(|ep| ep.rpcs_in_use()), 0);
}

#[test]
fn a_waiting_call_is_woken_by_the_runner_and_not_polled_in_a_loop() {
    let net = Net::new(8, 1 << 20);
    let Net { cs, .. } = &net;
    let (tasks, _) = net.serving();
    let polls = Rc::new(Cell::new(0));
    let main = Counted {
        inner: Box::pin(async {
            let mut client = cs.client().unwrap();
            // 100 frames each way at least: many runner polls.
            client
                .call_with(SERVER_IP, PORT, 150_000, fill(150_000), |m| {
                    matches(m, !150_000, 150_000)
                })
                .await
                .unwrap()
        }),
        polls: polls.clone(),
    };
    assert!(net.run(main, tasks));
    // Polled once to start, then (about) once when the response is in;
    // the executor never polls a task that was not woken, so completing at
    // all shows the wake.
    assert!(polls.get() <= 3, "polled {} times", polls.get());
    assert!(cs.with(|ep| ep.stats().rx_frames) > 100);
}

#[test]
fn a_call_without_room_waits_and_is_woken_when_an_rpc_finishes() {
    // Two RPC slots on the client: the third call must wait for one.
    let net = Net::new(2, 1 << 20);
    let Net { cs, .. } = &net;
    let (mut tasks, answered) = net.serving();
    let finished = Rc::new(Cell::new(0));
    for k in 0..3usize {
        let (cs, finished) = (&cs, finished.clone());
        tasks.push(Box::pin(async move {
            let mut client = cs.client().unwrap();
            let len = 50_000 + k;
            checked_call(&mut client, len).await;
            finished.set(finished.get() + 1);
        }));
    }
    let done = finished.clone();
    let waited = Rc::new(Cell::new(false));
    let saw = waited.clone();
    let cs_ref = &cs;
    let main = std::future::poll_fn(move |cx| {
        if cs_ref.with(|ep| ep.rpcs_in_use()) == 2 && done.get() == 0 {
            saw.set(true);
        }
        if done.get() == 3 {
            Poll::Ready(())
        } else {
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    });
    net.run(main, tasks);
    assert!(waited.get(), "both slots were in use at once");
    assert_eq!(answered.get(), 3);
}

#[test]
fn a_call_to_a_port_nobody_serves_fails_and_is_released() {
    let net = Net::new(8, 1 << 20);
    let Net { cs, .. } = &net;
    let tasks = net.runners();
    let main = async {
        let mut client = cs.client().unwrap();
        let mut buf = [0u8; 8];
        client.call(SERVER_IP, 1234, b"x", &mut buf).await
    };
    let r = net.run(main, tasks);
    assert!(
        matches!(
            r,
            Err(CallError::Rpc(
                RpcError::PortUnreachable | RpcError::TimedOut
            ))
        ),
        "{r:?}"
    );
    assert_eq!(cs.with(|ep| ep.rpcs_in_use()), 0);
}

// ---- over an embassy-net driver -------------------------------------------

/// One direction of an in-memory link between two embassy drivers, with
/// the receiving driver's waker.
#[derive(Default)]
struct Lane {
    frames: std::collections::VecDeque<Vec<u8>>,
    waker: Option<Waker>,
}

/// An embassy-net driver on one end of two lanes: it registers the
/// context's waker when it has no frame, and wakes the other end's when it
/// sends one.
struct ChanDriver {
    rx: Rc<RefCell<Lane>>,
    tx: Rc<RefCell<Lane>>,
}

struct ChanRx(Vec<u8>);
struct ChanTx(Rc<RefCell<Lane>>);

impl embassy_net_driver::RxToken for ChanRx {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(mut self, f: F) -> R {
        f(&mut self.0)
    }
}

impl embassy_net_driver::TxToken for ChanTx {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut frame = vec![0; len];
        let r = f(&mut frame);
        let mut lane = self.0.borrow_mut();
        lane.frames.push_back(frame);
        if let Some(w) = lane.waker.take() {
            w.wake();
        }
        r
    }
}

impl embassy_net_driver::Driver for ChanDriver {
    type RxToken<'a> = ChanRx;
    type TxToken<'a> = ChanTx;

    fn receive(&mut self, cx: &mut Context) -> Option<(ChanRx, ChanTx)> {
        let mut rx = self.rx.borrow_mut();
        match rx.frames.pop_front() {
            Some(f) => Some((ChanRx(f), ChanTx(self.tx.clone()))),
            None => {
                rx.waker = Some(cx.waker().clone());
                None
            }
        }
    }

    fn transmit(&mut self, _cx: &mut Context) -> Option<ChanTx> {
        Some(ChanTx(self.tx.clone()))
    }

    fn link_state(&mut self, _cx: &mut Context) -> embassy_net_driver::LinkState {
        embassy_net_driver::LinkState::Up
    }

    fn capabilities(&self) -> embassy_net_driver::Capabilities {
        let mut caps = embassy_net_driver::Capabilities::default();
        caps.max_transmission_unit = 1514;
        caps
    }

    fn hardware_address(&self) -> embassy_net_driver::HardwareAddress {
        embassy_net_driver::HardwareAddress::Ethernet([2, 0, 0, 0, 0, 9])
    }
}

#[test]
fn runners_over_embassy_drivers_are_woken_by_the_drivers() {
    use homa_stack::asynch::EmbassyDriver;
    let net = Net::new(8, 1 << 20);
    let Net { cs, ss, .. } = &net;
    let (ab, ba) = (Rc::default(), Rc::default());
    let client_nic = ChanDriver {
        rx: Rc::clone(&ba),
        tx: Rc::clone(&ab),
    };
    let server_nic = ChanDriver { rx: ab, tx: ba };
    let mut ra = Runner::new(cs, EmbassyDriver(client_nic), SimClock::new(&net.time));
    let mut rb = Runner::new(ss, EmbassyDriver(server_nic), SimClock::new(&net.time));
    let answered = Rc::new(Cell::new(0));
    let tasks: Vec<Task<'_>> = vec![
        Box::pin(async move {
            ra.run().await;
        }),
        Box::pin(async move {
            rb.run().await;
        }),
        Box::pin(serve(ss, answered.clone())),
    ];
    let main = async {
        let mut client = cs.client().unwrap();
        for len in [1, 1425, 100_000] {
            checked_call(&mut client, len).await;
        }
    };
    net.run(main, tasks);
    assert_eq!(answered.get(), 3);
}
