//! The same client and server over the kernel's TCP: one persistent
//! connection per server, each message preceded by its length (u32, LE),
//! TCP_NODELAY on, TOS 0 as ordinary TCP traffic.
//!
//! As with HomaModule's `cp_node`, messages on one connection are sent one
//! after the other, so a short request queued behind a long one waits for
//! it: that head-of-line blocking is part of what the comparison measures.
//! Round trips count from each RPC's scheduled arrival.
//!
//! Threads keep it simple: per connection a writer (sends requests as the
//! dispatcher hands them over) and a reader (matches responses in order);
//! per accepted connection on the server a thread that answers in order.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration as StdDuration;

use serde_json::json;

use super::arrivals::{Arrival, Arrivals, Pace};
use super::cli::{ClientOpts, ServerOpts};
use super::homa::{empty_report, sleep_until_unix_ms, Clock};
use super::payload::{self, fill, Answer, Header, Message, Refusal};
use super::progress::{percentiles, Progress};
use super::report::{ClientReport, ServerReport};
use super::stats::{Histogram, SizeBuckets};
use super::sys;
use super::workload::MAX_MESSAGE;

/// Longest message accepted on a connection (Homa's limit, plus slack).
const MAX_FRAME: usize = 1_000_000 + 64;
/// How often blocked reads and writes look at the clock and the stop flag.
const TICK: StdDuration = StdDuration::from_millis(50);

/// Why a transfer stopped early.
#[derive(Debug)]
enum Stop {
    /// The deadline passed or a stop was asked for.
    Deadline,
    /// The connection failed or closed.
    Io(String),
}

/// What a failed read or write means: a timeout or an interruption is
/// tried again unless `give_up` says stop; anything else ends the
/// connection.
fn retry_or_stop(e: std::io::Error, give_up: &dyn Fn() -> bool) -> Result<(), Stop> {
    match e.kind() {
        ErrorKind::WouldBlock | ErrorKind::TimedOut if give_up() => Err(Stop::Deadline),
        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted => Ok(()),
        _ => Err(Stop::Io(e.to_string())),
    }
}

/// Writes all of `buf`, waking every [`TICK`] to check `give_up`.
fn write_all(s: &mut TcpStream, buf: &[u8], give_up: &dyn Fn() -> bool) -> Result<(), Stop> {
    let mut off = 0;
    while off < buf.len() {
        match s.write(&buf[off..]) {
            Ok(0) => return Err(Stop::Io("connection closed".into())),
            Ok(n) => off += n,
            Err(e) => retry_or_stop(e, give_up)?,
        }
    }
    Ok(())
}

/// Fills `buf`, waking every [`TICK`] to check `give_up`. `Ok(false)`:
/// the peer closed the connection cleanly before the first byte.
fn read_exact(s: &mut TcpStream, buf: &mut [u8], give_up: &dyn Fn() -> bool) -> Result<bool, Stop> {
    let mut off = 0;
    while off < buf.len() {
        match s.read(&mut buf[off..]) {
            Ok(0) if off == 0 => return Ok(false),
            Ok(0) => return Err(Stop::Io("connection closed mid-message".into())),
            Ok(n) => off += n,
            Err(e) => retry_or_stop(e, give_up)?,
        }
    }
    Ok(true)
}

/// Reads one length-prefixed message into `buf`; `Ok(false)` at a clean end.
fn read_frame(
    s: &mut TcpStream,
    buf: &mut Vec<u8>,
    give_up: &dyn Fn() -> bool,
) -> Result<bool, Stop> {
    let mut len = [0u8; 4];
    if !read_exact(s, &mut len, give_up)? {
        return Ok(false);
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(Stop::Io(format!("message of {len} B is over the limit")));
    }
    buf.resize(len, 0);
    if !read_exact(s, buf, give_up)? {
        return Err(Stop::Io("connection closed mid-message".into()));
    }
    Ok(true)
}

fn frame(out: &mut Vec<u8>, msg: &[u8]) {
    out.clear();
    out.extend_from_slice(&(msg.len() as u32).to_le_bytes());
    out.extend_from_slice(msg);
}

fn stream_for(s: &TcpStream) -> anyhow::Result<()> {
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(TICK))?;
    s.set_write_timeout(Some(TICK))?;
    Ok(())
}

/// What one connection's reader found.
/// What the reader threads have seen so far, for the progress line.
#[derive(Default)]
struct Live {
    completed: u64,
    corrupt: u64,
    rtt: Histogram,
}

/// Prints the client's progress once a second until `done`.
fn progress_thread(
    o: &ClientOpts,
    clock: Clock,
    live: Arc<Mutex<Live>>,
    done: Arc<AtomicBool>,
) -> Option<thread::JoinHandle<()>> {
    if o.quiet {
        return None;
    }
    let duration_s = o.duration_s;
    Some(thread::spawn(move || {
        let mut p = Progress::new("client", false, Some(duration_s));
        while !done.load(Ordering::SeqCst) {
            thread::sleep(StdDuration::from_millis(100));
            let now = clock.ns();
            if p.due(now) {
                let l = live.lock().expect("no panics hold it");
                let rest = format!("{}, corrupt {}", percentiles(&l.rtt), l.corrupt);
                let n = l.completed;
                drop(l);
                p.tick(now, n, &rest);
            }
        }
        p.end_bar();
    }))
}

#[derive(Default)]
struct ReaderResult {
    completed: u64,
    corrupt: u64,
    failed: u64,
    request_bytes: u64,
    response_bytes: u64,
    rtt: Option<SizeBuckets>,
}

/// One connection of the client.
struct Conn {
    /// Requests written (or being written) and not yet answered, in order.
    fifo: Mutex<VecDeque<Arrival>>,
    /// The writer has finished.
    writer_done: AtomicBool,
    /// The connection broke.
    broken: AtomicBool,
}

/// When a client's transfers stop: at its drain deadline or on a stop
/// signal.
#[derive(Clone, Copy)]
struct Deadline {
    clock: Clock,
    end_ns: u64,
}

impl Deadline {
    fn passed(&self) -> bool {
        self.clock.ns() >= self.end_ns || sys::stop_requested()
    }
}

/// Runs the TCP client.
pub fn run_client(o: &ClientOpts) -> anyhow::Result<ClientReport> {
    sys::set_timer_slack_ns(1_000);
    let streams = connect(o)?;
    sleep_until_unix_ms(o.start_at_ms);
    let clock = Clock::start();
    let dur_ns = (o.duration_s * 1e9) as u64;
    let deadline = Deadline {
        clock,
        end_ns: dur_ns + (o.drain_s * 1e9) as u64,
    };
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let live = Arc::new(Mutex::new(Live::default()));
    let finished = Arc::new(AtomicBool::new(false));
    let progress = progress_thread(o, clock, live.clone(), finished.clone());
    let (mut senders, mut writers, mut readers, mut conns) = (vec![], vec![], vec![], vec![]);
    for s in streams {
        let conn = Arc::new(Conn {
            fifo: Mutex::new(VecDeque::new()),
            writer_done: AtomicBool::new(false),
            broken: AtomicBool::new(false),
        });
        conns.push(conn.clone());
        let (tx, rx) = mpsc::channel::<Arrival>();
        senders.push(tx);
        let ws = s.try_clone()?;
        let (wconn, reply_len) = (conn.clone(), o.reply_len);
        writers.push(thread::spawn(move || {
            write_requests(ws, &wconn, &rx, reply_len, deadline)
        }));
        let reader = Reader {
            conn,
            clock,
            deadline,
            reply_len,
            verify: o.verify,
            quiet: o.quiet,
            done: done_tx.clone(),
            live: live.clone(),
        };
        let bounds = o.dist.bucket_bounds();
        readers.push(thread::spawn(move || reader.run(s, bounds)));
    }
    drop(done_tx);
    let issued = dispatch(o, clock, dur_ns, &senders, &done_rx);
    drop(senders);
    for w in writers {
        let _ = w.join();
    }
    let results: Vec<_> = readers.into_iter().map(|h| h.join()).collect();
    finished.store(true, Ordering::SeqCst);
    if let Some(p) = progress {
        let _ = p.join();
    }
    let mut r = empty_report("tcp", o);
    r.issued = issued;
    for res in results {
        let res = res.map_err(|_| anyhow::anyhow!("a reader thread panicked"))?;
        r.completed += res.completed;
        r.corrupt += res.corrupt;
        r.failed += res.failed;
        r.request_bytes += res.request_bytes;
        r.response_bytes += res.response_bytes;
        if let Some(h) = res.rtt {
            r.rtt.merge(&h)?;
        }
    }
    r.elapsed_s = clock.ns() as f64 / 1e9;
    r.unfinished = issued.saturating_sub(r.completed + r.failed);
    (r.cpu_user_s, r.cpu_sys_s) = sys::cpu_seconds();
    let broken = conns
        .iter()
        .filter(|c| c.broken.load(Ordering::SeqCst))
        .count();
    r.extra = json!({ "connections": conns.len(), "broken_connections": broken });
    Ok(r)
}

/// One connection to each target.
fn connect(o: &ClientOpts) -> anyhow::Result<Vec<TcpStream>> {
    o.targets
        .iter()
        .map(|t| {
            let s = TcpStream::connect_timeout(t, StdDuration::from_secs(5))
                .map_err(|e| anyhow::anyhow!("connect {t}: {e}"))?;
            stream_for(&s)?;
            Ok(s)
        })
        .collect()
}

/// A connection's writer: sends each request the dispatcher hands over,
/// noting it in the connection's FIFO first.
fn write_requests(
    mut s: TcpStream,
    conn: &Conn,
    rx: &mpsc::Receiver<Arrival>,
    reply_len: u32,
    deadline: Deadline,
) {
    let give_up = || deadline.passed();
    let (mut msg, mut out) = (Vec::new(), Vec::new());
    loop {
        let a = match rx.recv_timeout(TICK) {
            Ok(a) => a,
            Err(mpsc::RecvTimeoutError::Timeout) if !give_up() => continue,
            Err(_) => break,
        };
        if conn.broken.load(Ordering::SeqCst) {
            break;
        }
        let header = Header {
            reply_len,
            seed: a.seed,
        };
        fill(&mut msg, Message::request(header, a.size as usize));
        frame(&mut out, &msg);
        conn.fifo.lock().expect("no panics hold it").push_back(a);
        match write_all(&mut s, &out, &give_up) {
            Ok(()) => {}
            Err(Stop::Deadline) => break,
            Err(Stop::Io(e)) => {
                eprintln!("homa-perf: tcp write: {e}");
                conn.broken.store(true, Ordering::SeqCst);
                break;
            }
        }
    }
    conn.writer_done.store(true, Ordering::SeqCst);
}

/// A connection's reader: matches responses to the requests in its FIFO.
struct Reader {
    conn: Arc<Conn>,
    clock: Clock,
    deadline: Deadline,
    reply_len: u32,
    verify: bool,
    quiet: bool,
    /// Told of every response, for a closed loop to issue the next RPC.
    done: mpsc::Sender<()>,
    live: Arc<Mutex<Live>>,
}

impl Reader {
    fn run(self, mut s: TcpStream, bounds: Vec<u32>) -> ReaderResult {
        let conn = &self.conn;
        let mut res = ReaderResult::default();
        let mut rtt = SizeBuckets::new(bounds);
        let mut buf = Vec::new();
        let finished = || {
            conn.writer_done.load(Ordering::SeqCst)
                && conn.fifo.lock().expect("no panics hold it").is_empty()
        };
        let stop = || self.deadline.passed() || finished();
        loop {
            match read_frame(&mut s, &mut buf, &stop) {
                Ok(true) => {}
                Ok(false) => break,
                Err(Stop::Deadline) => break,
                Err(Stop::Io(e)) => {
                    eprintln!("homa-perf: tcp read: {e}");
                    conn.broken.store(true, Ordering::SeqCst);
                    break;
                }
            }
            let t = self.clock.ns();
            let Some(a) = conn.fifo.lock().expect("no panics hold it").pop_front() else {
                eprintln!("homa-perf: tcp: a response nobody asked for");
                conn.broken.store(true, Ordering::SeqCst);
                break;
            };
            let ok = !self.verify || {
                let header = Header {
                    reply_len: self.reply_len,
                    seed: a.seed,
                };
                Message::response(header, a.len as usize).matches([&buf[..]])
            };
            res.completed += 1;
            res.request_bytes += u64::from(a.len);
            res.response_bytes += buf.len() as u64;
            self.count_live(ok, t.saturating_sub(a.at_ns));
            if ok {
                rtt.record(a.size, t.saturating_sub(a.at_ns));
            } else {
                res.corrupt += 1;
                if !self.quiet {
                    eprintln!(
                        "homa-perf: tcp response to a {} B request is corrupt",
                        a.len
                    );
                }
            }
            let _ = self.done.send(());
        }
        if conn.broken.load(Ordering::SeqCst) {
            // What was sent on a broken connection will not be answered.
            res.failed += conn
                .fifo
                .lock()
                .expect("no panics hold it")
                .drain(..)
                .count() as u64;
        }
        res.rtt = Some(rtt);
        res
    }

    /// Counts a response for the progress line.
    fn count_live(&self, ok: bool, rtt_ns: u64) {
        let mut l = self.live.lock().expect("no panics hold it");
        l.completed += 1;
        l.corrupt += u64::from(!ok);
        if ok {
            l.rtt.record(rtt_ns);
        }
    }
}

/// Hands the arrivals to the connections in turn until the run's duration
/// ends: Poisson arrivals at their times, or a closed loop's next RPC as
/// each response comes back. Returns how many were issued.
fn dispatch(
    o: &ClientOpts,
    clock: Clock,
    dur_ns: u64,
    senders: &[mpsc::Sender<Arrival>],
    done_rx: &mpsc::Receiver<()>,
) -> u64 {
    let mut arrivals = Arrivals::new(o.dist.clone(), o.pace, o.reply_len, o.seed);
    let mut issued = 0u64;
    let mut send = |a: Arrival| {
        issued += 1;
        let i = (a.index % senders.len() as u64) as usize;
        let _ = senders[i].send(a);
    };
    // A closed loop's RPC is due as soon as it is issued.
    let next_now = |arrivals: &mut Arrivals| {
        let mut a = arrivals.next_arrival();
        a.at_ns = clock.ns();
        a
    };
    match o.pace {
        Pace::Poisson { .. } => loop {
            let a = arrivals.next_arrival();
            if a.at_ns >= dur_ns {
                break;
            }
            while clock.ns() < a.at_ns {
                if sys::stop_requested() {
                    break;
                }
                let wait = (a.at_ns - clock.ns()).min(50_000_000);
                thread::sleep(StdDuration::from_nanos(wait));
            }
            if sys::stop_requested() {
                break;
            }
            send(a);
        },
        Pace::Closed { outstanding } => {
            for _ in 0..outstanding {
                send(next_now(&mut arrivals));
            }
            while clock.ns() < dur_ns && !sys::stop_requested() {
                let left = StdDuration::from_nanos(dur_ns.saturating_sub(clock.ns()));
                match done_rx.recv_timeout(left.min(TICK)) {
                    Ok(()) => send(next_now(&mut arrivals)),
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                }
            }
        }
    }
    issued
}

/// Runs the TCP server until its duration ends or a stop signal.
pub fn run_server(o: &ServerOpts) -> anyhow::Result<ServerReport> {
    let listener =
        TcpListener::bind(o.listen).map_err(|e| anyhow::anyhow!("listen {}: {e}", o.listen))?;
    listener.set_nonblocking(true)?;
    eprintln!("homa-perf: server ready: tcp {}", o.listen);
    let clock = Clock::start();
    let end_ns = o.duration_s.map_or(u64::MAX, |s| (s * 1e9) as u64);
    let stop = Arc::new(AtomicBool::new(false));
    // The connection threads' totals.
    let totals = Arc::new(Mutex::new(ServerReport::default()));
    let mut handlers = Vec::new();
    let mut connections = 0u64;
    let mut progress = Progress::new("server", o.quiet, o.duration_s);
    while clock.ns() < end_ns && !sys::stop_requested() {
        let now = clock.ns();
        if progress.due(now) {
            let t = totals.lock().expect("no panics hold it");
            let rest = format!(
                ", refused {}, corrupt {}, connections {connections}",
                t.failed, t.corrupt
            );
            let n = t.requests;
            drop(t);
            progress.tick(now, n, &rest);
        }
        match listener.accept() {
            Ok((s, _)) => {
                connections += 1;
                s.set_nonblocking(false)?;
                stream_for(&s)?;
                let (stop, totals, verify) = (stop.clone(), totals.clone(), o.verify);
                handlers.push(thread::spawn(move || serve(s, &stop, &totals, verify)));
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                thread::sleep(StdDuration::from_millis(10))
            }
            Err(e) => eprintln!("homa-perf: accept: {e}"),
        }
    }
    progress.end_bar();
    stop.store(true, Ordering::SeqCst);
    for h in handlers {
        let _ = h.join();
    }
    let mut r = totals.lock().expect("no panics hold it").clone();
    r.protocol = "tcp".into();
    r.elapsed_s = clock.ns() as f64 / 1e9;
    (r.cpu_user_s, r.cpu_sys_s) = sys::cpu_seconds();
    r.extra = json!({ "connections": connections });
    Ok(r)
}

/// Answers the requests of one connection in order until it closes or the
/// server stops.
fn serve(mut s: TcpStream, stop: &AtomicBool, totals: &Mutex<ServerReport>, verify: bool) {
    let give_up = || stop.load(Ordering::SeqCst) || sys::stop_requested();
    let (mut req, mut resp, mut out) = (Vec::new(), Vec::new(), Vec::new());
    loop {
        match read_frame(&mut s, &mut req, &give_up) {
            Ok(true) => {}
            Ok(false) | Err(Stop::Deadline) => return,
            Err(Stop::Io(e)) => {
                eprintln!("homa-perf: tcp server read: {e}");
                return;
            }
        }
        // The request is untrusted: its header is read, and the reply
        // bounded, before anything is built. A request that cannot be
        // answered ends the connection (its client sees it fail).
        let (ok, echo) = match payload::answer(&req, req.len(), MAX_MESSAGE as usize) {
            Answer::Echo => (None, true),
            Answer::TooLong { .. } => {
                let why = Refusal::ReplyTooLong;
                eprintln!("homa-perf: tcp request refused: {why}; closing the connection");
                let mut t = totals.lock().expect("no panics hold it");
                t.failed += 1;
                *t.failures.entry(why.name().to_string()).or_default() += 1;
                return;
            }
            Answer::Reply { request, response } => {
                if response != request {
                    fill(&mut resp, response);
                }
                (
                    Some(!verify || request.matches([&req[..]])),
                    response == request,
                )
            }
        };
        if echo {
            // The bytes received go back, so a corrupted request shows as
            // a corrupted response at the client.
            resp.clear();
            resp.extend_from_slice(&req);
        }
        frame(&mut out, &resp);
        if write_all(&mut s, &out, &give_up).is_err() {
            return;
        }
        let mut t = totals.lock().expect("no panics hold it");
        t.requests += 1;
        t.corrupt += u64::from(ok == Some(false));
        t.headerless += u64::from(ok.is_none());
        t.request_bytes += req.len() as u64;
        t.response_bytes += resp.len() as u64;
    }
}
