//! The homa-stack client and server over a TAP device, an AF_PACKET
//! socket or an AF_XDP socket, on the wall clock.
//!
//! The loop is the one a real program runs: `poll(now, device)`, handle the
//! events, then sleep until the endpoint's `poll_at`, the next arrival or a
//! frame, whichever is first ([`homa_phy::wait`]). Round-trip
//! times are measured from each RPC's scheduled arrival, so time an RPC
//! spent waiting for a free slot counts, as it does for TCP's socket buffer.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::fd::{AsRawFd, RawFd};

use homa_phy::{Device, Duration, Instant, PcapMode, PcapWriter, RawSocket, TapInterface};
use homa_stack::stats::Drops;
use homa_stack::wire::{EthernetAddress, IpAddr, Ipv4Addr};
use homa_stack::{Config, Endpoint, Event, RpcHandle, SendError, SocketHandle};
use homa_testkit::Storage;
use serde_json::{json, Value};

use super::arrivals::{Arrival, Arrivals, Pace};
use super::cli::{ClientOpts, HomaOpts, ServerOpts, Transport};
use super::netcfg::{self, CreatedBridge};
use super::payload::{self, fill, Answer, Header, Message, Refusal, HEADER_LEN};
use super::progress::{percentiles, Progress};
use super::report::{drops_text, ClientReport, ServerReport};
use super::stats::SizeBuckets;
use super::sys;
use super::workload::MAX_MESSAGE;

/// The wall clock as homa-phy time: nanoseconds since the run began.
#[derive(Debug, Clone, Copy)]
pub struct Clock(std::time::Instant);

impl Clock {
    /// A clock starting now.
    pub fn start() -> Clock {
        Clock(std::time::Instant::now())
    }
    /// Nanoseconds since the start.
    pub fn ns(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }
    /// The time for the endpoint.
    pub fn now(&self) -> Instant {
        Instant::from_nanos(self.ns())
    }
}

/// Caller-owned memory of an endpoint: 64 peers.
fn memory(o: &HomaOpts) -> Storage {
    Storage::with_peers(o.max_rpcs, 64, o.pool_mb << 20)
}

/// The device, opened, plus what the endpoint needs to know about it.
enum Opened {
    Tap(TapInterface),
    Raw(RawSocket),
    #[cfg(feature = "xdp")]
    Xdp(Box<homa_phy::XdpSocket>),
}

/// The device, its address, its own MAC if it has one, and the guard of
/// a bridge made for it.
type OpenDevice = (
    Opened,
    IpAddr,
    Option<EthernetAddress>,
    Option<CreatedBridge>,
);

/// Opens an AF_XDP socket on queue `queue` of `name` that gets the frames
/// for `ip` (and, when the endpoint has a MAC of its own, for the IPv6
/// link-local address derived from it; with the interface's MAC that
/// address is the kernel's).
#[cfg(feature = "xdp")]
fn open_xdp(
    name: &str,
    ip: IpAddr,
    queue: u32,
    mac: Option<EthernetAddress>,
) -> anyhow::Result<OpenDevice> {
    let if_mac = netcfg::interface_mac(name)?;
    let mut addrs = vec![ip];
    if let (IpAddr::V6(_), Some(m)) = (ip, mac.filter(|&m| m != if_mac)) {
        let mut c = Config::new(Ipv4Addr::UNSPECIFIED, m, 0);
        c.ipv6 = true;
        addrs.extend(c.link_local_v6().map(IpAddr::V6));
    }
    let mut config = homa_phy::XdpConfig::new(queue, &addrs);
    // Deep rings, as the TAP's 10,000-frame queue: a process descheduled
    // for 50 ms on a busy machine loses no frame (16,384 frames of 4 KiB,
    // 64 MiB, half of them for reception).
    config.ring_size = 8192;
    config.frames = 16384;
    let dev = homa_phy::XdpSocket::new(name, &config)?;
    Ok((Opened::Xdp(Box::new(dev)), ip, Some(if_mac), None))
}

#[cfg(not(feature = "xdp"))]
fn open_xdp(_: &str, _: IpAddr, _: u32, _: Option<EthernetAddress>) -> anyhow::Result<OpenDevice> {
    anyhow::bail!("this homa-perf was built without AF_XDP (cargo build --features homa-tools/xdp)")
}

fn open(transport: &Transport, mac: Option<EthernetAddress>) -> anyhow::Result<OpenDevice> {
    match transport {
        Transport::Tap {
            name,
            ip,
            bridge,
            host_ip,
        } => {
            let (tap, made) = netcfg::open_tap(name, *ip, bridge.as_deref(), *host_ip)?;
            Ok((Opened::Tap(tap), ip.addr, None, made))
        }
        Transport::Iface { name, ip } => {
            let raw = RawSocket::new(name)?;
            // Sharing a real interface: use its MAC, so the frames it
            // receives for us pass its filter.
            let mac = netcfg::interface_mac(name)?;
            Ok((Opened::Raw(raw), ip.addr, Some(mac), None))
        }
        Transport::Xdp { name, ip, queue } => open_xdp(name, ip.addr, *queue, mac),
        Transport::Tcp => Err(anyhow::anyhow!("not a Homa transport")),
    }
}

/// A loop to run with an endpoint over whichever device was opened.
trait Job {
    type Out;
    fn run<D: Device>(self, ep: &mut Endpoint<'_>, dev: &mut D, fd: RawFd) -> Self::Out;
}

/// Opens the transport's device, builds an endpoint for it and runs the job
/// `make` gives for the endpoint's address and MAC: the job's report, and
/// the stack's and the device's counters for its `extra`. A bridge the run
/// created is removed at the end (its guard outlives the device).
fn run_job<R, J: Job<Out = anyhow::Result<(R, Value)>>>(
    transport: &Transport,
    o: &HomaOpts,
    make: impl FnOnce(IpAddr, EthernetAddress) -> J,
) -> anyhow::Result<(R, Value)> {
    let (mut opened, ip, dev_mac, _bridge) = open(transport, o.mac)?;
    let mac = o.mac.or(dev_mac).unwrap_or_else(|| netcfg::mac_for(ip));
    let mut mem = memory(o);
    let mut ep = mem.try_endpoint(config(ip, mac, o)?)?;
    let (out, dev) = with_device(&mut opened, o, &mut ep, make(ip, mac))?;
    let (report, stack) = out?;
    Ok((report, json!({ "stack": stack, "device": dev })))
}

/// The `--pcap` file, if asked for.
struct Capture {
    path: String,
    file: BufWriter<File>,
}

fn pcap_sink(path: &Option<String>) -> anyhow::Result<Option<Capture>> {
    path.as_ref()
        .map(|p| {
            let f = File::create(p).map_err(|e| anyhow::anyhow!("--pcap {p}: {e}"))?;
            Ok(Capture {
                path: p.clone(),
                file: BufWriter::new(f),
            })
        })
        .transpose()
}

/// Runs `job` over the device, behind a fault injector dropping
/// `drop_ppm` of the frames each way and a pcap writer when asked; returns
/// its result and the device's counters.
fn with_device<J: Job>(
    opened: &mut Opened,
    o: &HomaOpts,
    ep: &mut Endpoint<'_>,
    job: J,
) -> anyhow::Result<(J::Out, Value)> {
    let sink = pcap_sink(&o.pcap)?;
    let (out, host) = match opened {
        Opened::Tap(t) => {
            let fd = t.as_raw_fd();
            (run_on(&mut *t, fd, sink, o.drop_ppm, ep, job)?, t.stats())
        }
        Opened::Raw(r) => {
            let fd = r.as_raw_fd();
            (run_on(&mut *r, fd, sink, o.drop_ppm, ep, job)?, r.stats())
        }
        #[cfg(feature = "xdp")]
        Opened::Xdp(x) => {
            let fd = x.as_raw_fd();
            let out = run_on(&mut **x, fd, sink, o.drop_ppm, ep, job)?;
            let s = x.stats();
            let dev = json!({
                "rx_frames": s.rx_frames,
                "rx_batches": s.rx_batches,
                "tx_frames": s.tx_frames,
                "tx_wakeups": s.tx_wakeups,
                "fill_wakeups": s.fill_wakeups,
                "tx_dropped": s.tx_dropped,
                "errors": s.errors,
                "kernel_rx_dropped": s.kernel_rx_dropped,
                "kernel_rx_ring_full": s.kernel_rx_ring_full,
                "kernel_fill_ring_empty": s.kernel_fill_ring_empty,
                "zero_copy": x.zero_copy(),
                "driver_mode": x.driver_mode(),
            });
            return Ok((out, dev));
        }
    };
    let dev = json!({
        "rx_frames": host.rx_frames,
        "rx_errors": host.rx_errors,
        "tx_frames": host.tx_frames,
        "tx_would_block": host.tx_would_block,
        "tx_errors": host.tx_errors,
    });
    Ok((out, dev))
}

/// Runs `job` on `dev`, behind the fault injector and the pcap writer when
/// asked (the capture records what the stack saw, after the faults). A
/// capture that cannot be written is an error: at once if its file header
/// cannot be, else at the end, after the run.
fn run_on<D: Device, J: Job>(
    dev: D,
    fd: RawFd,
    sink: Option<Capture>,
    drop_ppm: u32,
    ep: &mut Endpoint<'_>,
    job: J,
) -> anyhow::Result<J::Out> {
    fn pcap<D: Device, J: Job>(
        dev: D,
        fd: RawFd,
        sink: Option<Capture>,
        ep: &mut Endpoint<'_>,
        job: J,
    ) -> anyhow::Result<J::Out> {
        let Some(Capture { path, file }) = sink else {
            let mut dev = dev;
            return Ok(job.run(ep, &mut dev, fd));
        };
        let failed = |e: std::io::Error| anyhow::anyhow!("--pcap {path}: {e}");
        let mut w = PcapWriter::new(dev, file, PcapMode::Both);
        w.sink_mut().flush().map_err(failed)?;
        let out = job.run(ep, &mut w, fd);
        let lost = w.sink_errors();
        let (_, mut file) = w.into_parts();
        file.flush().map_err(failed)?;
        if lost > 0 {
            anyhow::bail!("--pcap {path}: {lost} frames could not be written");
        }
        Ok(out)
    }
    if drop_ppm == 0 {
        return pcap(dev, fd, sink, ep, job);
    }
    let mut faults = homa_phy::fault::FaultConfig::new();
    faults.drop_ppm = drop_ppm;
    let injector: homa_phy::fault::FaultInjector<D> =
        homa_phy::fault::FaultInjector::with_config(dev, 0x1055, faults);
    pcap(injector, fd, sink, ep, job)
}

/// The endpoint's configuration: IPv4-only for an IPv4 `ip`, IPv6-only
/// (that address and the EUI-64 link-local one) for an IPv6 one. The hash
/// seed is the operating system's: peers on a real network must not know
/// it (the workload's `--seed` makes the requests repeat, not the ids).
fn config(ip: IpAddr, mac: EthernetAddress, o: &HomaOpts) -> anyhow::Result<Config> {
    let seed = getrandom::u64().map_err(|e| anyhow::anyhow!("no random seed from the OS: {e}"))?;
    let mut c = match ip {
        IpAddr::V4(a) => Config::new(a, mac, seed),
        IpAddr::V6(a) => {
            let mut c = Config::new(Ipv4Addr::UNSPECIFIED, mac, seed);
            c.ipv6 = true;
            c.ipv6_addrs[0] = Some(a);
            c
        }
    };
    c.link_mbps = o.link_mbps;
    c.max_nic_est_backlog = Duration::from_micros(o.nic_backlog_us);
    // Unset options keep the Linux defaults `Config::new` chose.
    c.unsched_bytes = o.unsched_bytes.unwrap_or(c.unsched_bytes);
    c.max_incoming = o.max_incoming.unwrap_or(c.max_incoming);
    c.resend_ticks = o.resend_ticks.unwrap_or(c.resend_ticks);
    c.resend_interval = o.resend_ticks.unwrap_or(c.resend_interval);
    c.timeout_ticks = o.timeout_ticks.unwrap_or(c.timeout_ticks);
    c.fifo_grant_increment = o.fifo_grant_bytes.unwrap_or(c.fifo_grant_increment);
    Ok(c)
}

/// Every drop reason of the endpoint with its count, as a JSON object.
fn drop_reasons(d: &Drops) -> Value {
    json!({
        "malformed": d.malformed,
        "checksum": d.checksum,
        "not_for_us": d.not_for_us,
        "unsupported": d.unsupported,
        "unknown_port": d.unknown_port,
        "unknown_rpc": d.unknown_rpc,
        "bad_range": d.bad_range,
        "duplicate": d.duplicate,
        "too_many_gaps": d.too_many_gaps,
        "no_buffer": d.no_buffer,
        "rpc_table_full": d.rpc_table_full,
        "peer_table_full": d.peer_table_full,
        "control_queue_full": d.control_queue_full,
        "wrong_state": d.wrong_state,
        "unresolved": d.unresolved,
    })
}

/// `, drops N (reason n, ...)` for a progress line (empty when none).
fn drops_progress(ep: &Endpoint<'_>) -> String {
    let t = drops_text(&drop_reasons(&ep.stats().drops));
    if t.is_empty() {
        t
    } else {
        format!(", {t}")
    }
}

fn stack_counters(ep: &Endpoint<'_>, loop_stats: &Punctuality) -> Value {
    let s = ep.stats();
    json!({
        "loop": loop_stats.to_json(),
        "drop_reasons": drop_reasons(&s.drops),
        "rx_frames": s.rx_frames,
        "tx_frames": s.tx_frames,
        "rx_data_bytes": s.rx_data_bytes,
        "tx_data_bytes": s.tx_data_bytes,
        "retransmissions": s.retransmissions,
        "resends_requested": s.resends_requested,
        "timeouts": s.timeouts,
        "drops": s.drops.total(),
        "drops_no_buffer": s.drops.no_buffer,
        "drops_rpc_table_full": s.drops.rpc_table_full,
        "pacer_throttled": s.pacer_throttled,
        "grants_srpt": s.grants_srpt,
        "grants_fifo": s.grants_fifo,
        "arp_requests": s.arp_requests,
    })
}

/// How punctual the loop was: a loop that wakes late or works long keeps
/// the peer waiting, which is how a busy CPU shows up in Homa's timers.
#[derive(Debug, Default)]
struct Punctuality {
    /// Latest wake-up after a timed sleep, past its deadline.
    max_late_ns: u64,
    /// Timed wake-ups more than 10 ms late.
    late_over_10ms: u64,
    /// Longest stretch of work between two sleeps.
    max_busy_ns: u64,
    busy_since: u64,
}

impl Punctuality {
    fn to_json(&self) -> Value {
        json!({
            "max_wake_late_us": self.max_late_ns / 1000,
            "wakes_late_over_10ms": self.late_over_10ms,
            "max_busy_us": self.max_busy_ns / 1000,
        })
    }

    /// Sleeps until `deadline_ns`, the endpoint's next poll, or a frame,
    /// and notes how long the work before it took and how late it woke.
    fn sleep(&mut self, ep: &Endpoint<'_>, clock: &Clock, fd: RawFd, deadline_ns: u64) {
        let now = clock.ns();
        self.max_busy_ns = self.max_busy_ns.max(now.saturating_sub(self.busy_since));
        let mut wait = deadline_ns.saturating_sub(now).min(100_000_000);
        if let Some(d) = ep.poll_delay(Instant::from_nanos(now)) {
            wait = wait.min(d.total_nanos());
        }
        if wait > 0 {
            let _ = homa_phy::wait(fd, Some(homa_phy::Duration::from_nanos(wait)));
        }
        let woke = clock.ns();
        // Only a wake-up at the timeout can be late; a frame ends it early.
        let late = woke.saturating_sub(now + wait);
        if late > 0 {
            self.max_late_ns = self.max_late_ns.max(late);
            self.late_over_10ms += u64::from(late > 10_000_000);
        }
        self.busy_since = woke;
    }
}

/// Runs a Homa server until its duration ends or a stop signal.
pub fn run_server(o: &ServerOpts) -> anyhow::Result<ServerReport> {
    let (mut report, extra) = run_job(&o.transport, &o.homa, |ip, mac| Server { o, ip, mac })?;
    report.extra = extra;
    Ok(report)
}

struct Server<'a> {
    o: &'a ServerOpts,
    ip: IpAddr,
    mac: EthernetAddress,
}

/// What became of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answered {
    /// The reply was queued: request and reply lengths, and whether the
    /// request's bytes were the pattern its header promised.
    Sent {
        /// Request bytes.
        request: usize,
        /// Reply bytes.
        reply: usize,
        /// The request matched its pattern (or was not checked).
        intact: bool,
    },
    /// A request shorter than the header (homa-perf's short echoes, and
    /// Linux's own test clients' 1-byte requests) was echoed back
    /// unchecked: its length. Answered, so that its client does not retry
    /// until it times out, and counted as headerless.
    Echoed(usize),
    /// No room for the reply now: try again after the next poll.
    Retry,
    /// Refused; the RPC was aborted and freed, so it holds no slot.
    Refused(Refusal),
    /// The RPC was gone (aborted by its client).
    Gone,
}

/// Answers one request, treating its contents as untrusted: the header is
/// read and the reply length bounded by Homa's 1,000,000 bytes and the
/// pool before anything is allocated or filled, and a request that cannot
/// be answered is aborted, so that it holds no RPC slot or pool page. A
/// request shorter than the header has no reply length to read: it is
/// echoed.
pub fn answer(ep: &mut Endpoint<'_>, rpc: RpcHandle, verify: bool, resp: &mut Vec<u8>) -> Answered {
    let Some(m) = ep.message(rpc) else {
        return Answered::Gone;
    };
    let len = m.len();
    let mut head = [0u8; HEADER_LEN];
    let got = m.copy_to(&mut head);
    let max_reply = ep.pool_capacity_bytes().min(MAX_MESSAGE as usize);
    let (intact, echo) = match payload::answer(&head[..got], len, max_reply) {
        Answer::Echo => (None, true),
        Answer::TooLong { .. } => {
            let _ = ep.abort(rpc);
            return Answered::Refused(Refusal::ReplyTooLong);
        }
        Answer::Reply { request, response } => {
            let intact = !verify || request.matches(m.chunks());
            if response != request {
                fill(resp, response);
            }
            (Some(intact), response == request)
        }
    };
    if echo {
        // An echo sends back the bytes received, so a corrupted request
        // shows as a corrupted response at the client.
        resp.resize(len, 0);
        m.copy_to(resp);
    }
    match ep.reply(rpc, resp) {
        Ok(()) => match intact {
            Some(intact) => Answered::Sent {
                request: len,
                reply: resp.len(),
                intact,
            },
            None => Answered::Echoed(len),
        },
        Err(SendError::PoolFull) | Err(SendError::TableFull) => Answered::Retry,
        Err(SendError::NoSuchRpc) => Answered::Gone,
        Err(_) => {
            let _ = ep.abort(rpc);
            Answered::Refused(Refusal::ReplyFailed)
        }
    }
}

/// Counts one request's fate into the report; prints the first few
/// refusals (a hostile client could send millions).
fn count(r: &mut ServerReport, a: Answered, quiet: bool) {
    match a {
        Answered::Sent {
            request,
            reply,
            intact,
        } => {
            r.requests += 1;
            r.request_bytes += request as u64;
            r.response_bytes += reply as u64;
            r.corrupt += u64::from(!intact);
        }
        Answered::Echoed(len) => {
            r.requests += 1;
            r.headerless += 1;
            r.request_bytes += len as u64;
            r.response_bytes += len as u64;
        }
        Answered::Refused(why) => {
            r.failed += 1;
            *r.failures.entry(why.name().to_string()).or_default() += 1;
            if !quiet && r.failed <= 10 {
                eprintln!(
                    "homa-perf: request refused: {why}{}",
                    if r.failed == 10 {
                        " (further refusals are counted, not printed)"
                    } else {
                        ""
                    }
                );
            }
        }
        Answered::Retry | Answered::Gone => {}
    }
}

impl Job for Server<'_> {
    type Out = anyhow::Result<(ServerReport, Value)>;

    fn run<D: Device>(self, ep: &mut Endpoint<'_>, dev: &mut D, fd: RawFd) -> Self::Out {
        let o = self.o;
        let sock = ep.bind(o.port)?;
        let clock = Clock::start();
        for &(ip, mac) in &o.homa.neighbors {
            ep.add_neighbor(clock.now(), ip, mac)?;
        }
        sys::set_timer_slack_ns(1_000);
        eprintln!(
            "homa-perf: server ready: homa {} mac {}",
            std::net::SocketAddr::new(self.ip, o.port),
            self.mac
        );
        let end_ns = o.duration_s.map_or(u64::MAX, |s| (s * 1e9) as u64);
        let mut r = ServerReport {
            protocol: "homa".into(),
            ..ServerReport::default()
        };
        let mut resp = Vec::new();
        let mut retry: VecDeque<RpcHandle> = VecDeque::new();
        let mut punct = Punctuality::default();
        let mut progress = Progress::new("server", o.quiet, o.duration_s);
        while clock.ns() < end_ns && !sys::stop_requested() {
            ep.poll(clock.now(), dev);
            let now_ns = clock.ns();
            if progress.due(now_ns) {
                let rest = format!(
                    ", refused {}, corrupt {}{}",
                    r.failed,
                    r.corrupt,
                    drops_progress(ep)
                );
                progress.tick(now_ns, r.requests, &rest);
            }
            let mut todo: Vec<RpcHandle> = retry.drain(..).collect();
            while let Some(ev) = ep.recv(sock) {
                if let Event::Request { rpc, .. } = ev {
                    todo.push(rpc);
                }
            }
            for rpc in todo {
                let a = answer(ep, rpc, o.verify, &mut resp);
                if a == Answered::Retry {
                    retry.push_back(rpc);
                }
                if matches!(a, Answered::Refused(_)) {
                    progress.end_bar(); // count() may print a line
                }
                count(&mut r, a, o.quiet);
            }
            if retry.is_empty() {
                punct.sleep(ep, &clock, fd, end_ns);
            } else {
                ep.poll(clock.now(), dev);
            }
        }
        progress.end_bar();
        r.elapsed_s = clock.ns() as f64 / 1e9;
        (r.cpu_user_s, r.cpu_sys_s) = sys::cpu_seconds();
        Ok((r, stack_counters(ep, &punct)))
    }
}

/// Runs a Homa client: issues RPCs for the duration, waits for the
/// outstanding ones up to the drain time, and reports.
pub fn run_client(o: &ClientOpts) -> anyhow::Result<ClientReport> {
    let (mut report, extra) = run_job(&o.transport, &o.homa, |_, _| Client { o })?;
    report.extra = extra;
    Ok(report)
}

struct Client<'a> {
    o: &'a ClientOpts,
}

/// A client's report before its first RPC: what was asked for, nothing
/// counted yet.
pub fn empty_report(protocol: &str, o: &ClientOpts) -> ClientReport {
    ClientReport {
        protocol: protocol.into(),
        workload: o.dist.name().to_string(),
        pace: pace_text(o.pace),
        duration_s: o.duration_s,
        elapsed_s: 0.0,
        issued: 0,
        completed: 0,
        failed: 0,
        corrupt: 0,
        unfinished: 0,
        request_bytes: 0,
        response_bytes: 0,
        rtt: SizeBuckets::new(o.dist.bucket_bounds()),
        cpu_user_s: 0.0,
        cpu_sys_s: 0.0,
        extra: Value::Null,
    }
}

/// Describes the pacing for the report header.
pub fn pace_text(pace: Pace) -> String {
    match pace {
        Pace::Poisson { per_sec } => format!("Poisson {per_sec:.1} RPC/s"),
        Pace::Closed { outstanding } => format!("closed loop, {outstanding} outstanding"),
    }
}

/// Sleeps until the Unix time `ms`, if it is ahead (bounded to a minute).
pub fn sleep_until_unix_ms(ms: Option<u64>) {
    let Some(ms) = ms else { return };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    if ms > now {
        std::thread::sleep(std::time::Duration::from_millis((ms - now).min(60_000)));
    }
}

/// Everything the client keeps about one RPC in flight.
struct InFlight {
    a: Arrival,
    started_ns: u64,
}

impl Job for Client<'_> {
    type Out = anyhow::Result<(ClientReport, Value)>;

    fn run<D: Device>(self, ep: &mut Endpoint<'_>, dev: &mut D, fd: RawFd) -> Self::Out {
        let o = self.o;
        let sock = ep.socket()?;
        sys::set_timer_slack_ns(1_000);
        sleep_until_unix_ms(o.start_at_ms);
        let mut c = ClientRun::new(o, sock, Clock::start());
        for &(ip, mac) in &o.homa.neighbors {
            ep.add_neighbor(c.clock.now(), ip, mac)?;
        }
        let mut stopped = false;
        let mut punct = Punctuality::default();
        loop {
            let now_ns = c.clock.ns();
            c.show_progress(ep, now_ns);
            stopped |= sys::stop_requested();
            let issuing = now_ns < c.dur_ns && !stopped;
            if issuing {
                c.issue(now_ns);
            }
            c.send_backlog(ep, now_ns);
            ep.poll(c.clock.now(), dev);
            let t_ns = c.clock.ns();
            let events = c.take_events(ep, t_ns);
            let idle = c.pending.is_empty() && c.backlog.is_empty();
            if (!issuing && idle) || stopped || t_ns >= c.end_ns {
                break;
            }
            if events > 0 {
                continue; // a closed loop refills at once
            }
            let wake = match (issuing, c.next) {
                (true, Some(a)) => a.at_ns.min(c.end_ns),
                _ => c.end_ns,
            };
            punct.sleep(ep, &c.clock, fd, wake);
        }
        let r = c.finish(ep, dev, fd);
        Ok((r, stack_counters(ep, &punct)))
    }
}

/// The client loop's state from one pass to the next.
struct ClientRun<'a> {
    o: &'a ClientOpts,
    sock: SocketHandle,
    clock: Clock,
    /// When issuing stops.
    dur_ns: u64,
    /// When waiting for the outstanding RPCs stops.
    end_ns: u64,
    arrivals: Arrivals,
    /// The next Poisson arrival (none in a closed loop).
    next: Option<Arrival>,
    /// Arrivals waiting for room in the endpoint.
    backlog: VecDeque<Arrival>,
    pending: HashMap<RpcHandle, InFlight>,
    /// The request being sent.
    buf: Vec<u8>,
    /// Which arrival `buf` holds, so a request waiting for room is not
    /// refilled on every pass.
    filled: Option<u64>,
    rtt: SizeBuckets,
    r: ClientReport,
    progress: Progress,
}

impl<'a> ClientRun<'a> {
    fn new(o: &'a ClientOpts, sock: SocketHandle, clock: Clock) -> Self {
        let dur_ns = (o.duration_s * 1e9) as u64;
        let mut arrivals = Arrivals::new(o.dist.clone(), o.pace, o.reply_len, o.seed);
        let next = match o.pace {
            Pace::Poisson { .. } => Some(arrivals.next_arrival()),
            Pace::Closed { .. } => None,
        };
        ClientRun {
            o,
            sock,
            clock,
            dur_ns,
            end_ns: dur_ns + (o.drain_s * 1e9) as u64,
            arrivals,
            next,
            backlog: VecDeque::new(),
            pending: HashMap::new(),
            buf: Vec::new(),
            filled: None,
            rtt: SizeBuckets::new(o.dist.bucket_bounds()),
            r: empty_report("homa", o),
            progress: Progress::new("client", o.quiet, Some(o.duration_s)),
        }
    }

    /// The progress line, once a second.
    fn show_progress(&mut self, ep: &Endpoint<'_>, now_ns: u64) {
        if self.progress.due(now_ns) {
            let rest = format!(
                "{}, failed {}, corrupt {}, in flight {}{}",
                percentiles(self.rtt.all()),
                self.r.failed,
                self.r.corrupt,
                self.pending.len() + self.backlog.len(),
                drops_progress(ep)
            );
            self.progress.tick(now_ns, self.r.completed, &rest);
        }
    }

    /// Queues the RPCs due by `now_ns`: the Poisson arrivals up to now, or
    /// enough to keep a closed loop's count outstanding.
    fn issue(&mut self, now_ns: u64) {
        match self.o.pace {
            Pace::Poisson { .. } => {
                while let Some(a) = self.next.filter(|a| a.at_ns <= now_ns) {
                    self.backlog.push_back(a);
                    self.r.issued += 1;
                    self.next = Some(self.arrivals.next_arrival());
                }
            }
            Pace::Closed { outstanding } => {
                while self.pending.len() + self.backlog.len() < outstanding {
                    let mut a = self.arrivals.next_arrival();
                    a.at_ns = now_ns;
                    self.backlog.push_back(a);
                    self.r.issued += 1;
                }
            }
        }
    }

    /// Sends the queued requests until the endpoint has no room.
    fn send_backlog(&mut self, ep: &mut Endpoint<'_>, now_ns: u64) {
        let o = self.o;
        while let Some(a) = self.backlog.front().copied() {
            let header = Header {
                reply_len: o.reply_len,
                seed: a.seed,
            };
            if self.filled != Some(a.index) {
                fill(&mut self.buf, Message::request(header, a.size as usize));
                self.filled = Some(a.index);
            }
            let t = o.targets[(a.index % o.targets.len() as u64) as usize];
            match ep.send_request(self.sock, t.ip(), t.port(), &self.buf) {
                Ok(h) => {
                    self.backlog.pop_front();
                    let started_ns = now_ns;
                    self.pending.insert(h, InFlight { a, started_ns });
                }
                Err(SendError::TableFull) | Err(SendError::PoolFull) => break,
                Err(e) => {
                    self.backlog.pop_front();
                    self.r.failed += 1;
                    if !o.quiet {
                        let line = format!("homa-perf: request of {} B not sent: {e}", a.len);
                        self.progress.note(&line);
                    }
                }
            }
        }
    }

    /// Takes the socket's events at `t_ns`; returns how many there were.
    fn take_events(&mut self, ep: &mut Endpoint<'_>, t_ns: u64) -> usize {
        let mut events = 0;
        while let Some(ev) = ep.recv(self.sock) {
            events += 1;
            match ev {
                Event::Response { rpc, len } => self.on_response(ep, rpc, len, t_ns),
                Event::Failed { rpc, error } => {
                    if let Some(f) = self.pending.remove(&rpc) {
                        self.r.failed += 1;
                        if !self.o.quiet {
                            self.progress.note(&format!(
                                "homa-perf: RPC {} of {} B failed at {:.3} s, {:.1} ms after it was sent: {error}",
                                rpc.id(),
                                f.a.len,
                                t_ns as f64 / 1e9,
                                (t_ns - f.started_ns) as f64 / 1e6
                            ));
                        }
                    }
                    let _ = ep.release(rpc);
                }
                Event::Request { .. } => {}
            }
        }
        events
    }

    /// Counts a response, checked against what its request asked for.
    fn on_response(&mut self, ep: &mut Endpoint<'_>, rpc: RpcHandle, len: usize, t_ns: u64) {
        let o = self.o;
        let Some(f) = self.pending.remove(&rpc) else {
            let _ = ep.release(rpc);
            return;
        };
        let header = Header {
            reply_len: o.reply_len,
            seed: f.a.seed,
        };
        let ok = !o.verify || {
            let want = Message::response(header, f.a.len as usize);
            ep.message(rpc).is_some_and(|m| want.matches(m.chunks()))
        };
        let r = &mut self.r;
        r.completed += 1;
        r.request_bytes += u64::from(f.a.len);
        r.response_bytes += len as u64;
        if ok {
            self.rtt.record(f.a.size, t_ns.saturating_sub(f.a.at_ns));
        } else {
            r.corrupt += 1;
            if !o.quiet {
                self.progress.note(&format!(
                    "homa-perf: response to a {} B request (seed {}) is corrupt",
                    f.a.len, f.a.seed
                ));
            }
        }
        let _ = ep.release(rpc);
    }

    /// Gives up the RPCs still outstanding, lets the last acks out, and
    /// returns the report.
    fn finish<D: Device>(mut self, ep: &mut Endpoint<'_>, dev: &mut D, fd: RawFd) -> ClientReport {
        self.progress.end_bar();
        let clock = self.clock;
        let mut r = self.r;
        r.elapsed_s = clock.ns() as f64 / 1e9;
        r.unfinished = (self.pending.len() + self.backlog.len()) as u64;
        for (rpc, _) in self.pending.drain() {
            let _ = ep.abort(rpc);
        }
        // A little longer, so the acks of the last responses reach the
        // server and it frees those RPCs.
        let linger = clock.ns() + 20_000_000;
        let mut tail = Punctuality::default();
        while clock.ns() < linger {
            ep.poll(clock.now(), dev);
            tail.sleep(ep, &clock, fd, linger);
        }
        r.rtt = self.rtt;
        (r.cpu_user_s, r.cpu_sys_s) = sys::cpu_seconds();
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use homa_phy::fault::FaultConfig;
    use homa_testkit::duo::{self, Duo, Storage, CLIENT_IP, CLIENT_MAC, SERVER_IP, SERVER_MAC};

    const PORT: u16 = 500;

    /// A client and a server over a fault-free wire, with the client's
    /// socket and the server's bound to [`PORT`].
    fn client_and_server<'a>(
        cm: &'a mut Storage,
        sm: &'a mut Storage,
    ) -> (Duo<'a>, homa_stack::SocketHandle, homa_stack::SocketHandle) {
        let client = cm.endpoint(duo::config(CLIENT_IP, CLIENT_MAC, 1, false));
        let server = sm.endpoint(duo::config(SERVER_IP, SERVER_MAC, 2, false));
        let mut d = duo::duo(client, server, FaultConfig::new(), 3, None);
        let csock = d.a.socket().unwrap();
        let ssock = d.b.bind(PORT).unwrap();
        (d, csock, ssock)
    }

    /// Runs the pair until the server has a request, answers it as
    /// `homa-perf server` does and returns what happened.
    fn serve_one(
        d: &mut Duo<'_>,
        sock: homa_stack::SocketHandle,
        r: &mut ServerReport,
        resp: &mut Vec<u8>,
    ) -> Answered {
        let mut answered = None;
        d.run_until(Duration::from_secs(1), |d| {
            if let Some(Event::Request { rpc, .. }) = d.b.recv(sock) {
                let a = answer(&mut d.b, rpc, true, resp);
                count(r, a, true);
                answered = Some(a);
            }
            answered.is_some()
        });
        answered.expect("no request reached the server")
    }

    /// A request whose first bytes are not a homa-perf header (here a
    /// reply length of 453,971,840 bytes) is refused before any reply is
    /// built, and its RPC is freed at once.
    #[test]
    fn a_request_asking_for_a_huge_reply_is_refused_and_freed() {
        let (mut cm, mut sm) = (Storage::new(8, 4 << 20), Storage::new(8, 4 << 20));
        let (mut d, csock, ssock) = client_and_server(&mut cm, &mut sm);
        let mut req = vec![7u8; 100];
        req[..4].copy_from_slice(&453_971_840u32.to_le_bytes());
        d.a.send_request(csock, SERVER_IP, PORT, &req).unwrap();
        let (mut r, mut resp) = (ServerReport::default(), Vec::new());
        let a = serve_one(&mut d, ssock, &mut r, &mut resp);
        assert_eq!(a, Answered::Refused(Refusal::ReplyTooLong));
        assert_eq!(resp.capacity(), 0, "a reply was built");
        assert_eq!(d.b.rpcs_in_use(), 0, "the refused RPC holds a slot");
        assert_eq!(
            d.b.pool_free_bytes(),
            d.b.pool_capacity_bytes(),
            "the refused request holds pool pages"
        );
        assert_eq!((r.requests, r.failed), (0, 1));
        assert_eq!(r.failures.get("reply_too_long"), Some(&1));
    }

    /// A request shorter than the 12-byte header (a Linux client's 1-byte
    /// request) is echoed, not dropped: its client gets an answer instead
    /// of retrying until it times out. It counts as headerless, not failed.
    #[test]
    fn a_request_shorter_than_the_header_is_echoed_and_counted_headerless() {
        let (mut cm, mut sm) = (Storage::new(8, 4 << 20), Storage::new(8, 4 << 20));
        let (mut d, csock, ssock) = client_and_server(&mut cm, &mut sm);
        let (mut r, mut resp) = (ServerReport::default(), Vec::new());
        for req in [&[0x5a][..], &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11][..]] {
            let rpc = d.a.send_request(csock, SERVER_IP, PORT, req).unwrap();
            let a = serve_one(&mut d, ssock, &mut r, &mut resp);
            assert_eq!(a, Answered::Echoed(req.len()));
            let answered = d.run_until(Duration::from_secs(1), |d| match d.a.recv(csock) {
                Some(Event::Response { rpc: got, len }) if got == rpc => {
                    assert_eq!(len, req.len());
                    assert!(d.a.message(rpc).unwrap().eq_bytes(req));
                    let _ = d.a.release(rpc);
                    true
                }
                _ => false,
            });
            assert!(answered, "the {}-byte request was not answered", req.len());
        }
        assert_eq!((r.requests, r.headerless, r.failed), (2, 2, 0));
        assert!(r.to_json()["headerless"] == 2, "{}", r.to_json());
    }

    /// More bad requests than the server has RPC slots do not stop it from
    /// answering a good one afterwards: each is freed as it is refused.
    #[test]
    fn refused_requests_do_not_fill_the_rpc_table() {
        let (mut cm, mut sm) = (Storage::new(64, 4 << 20), Storage::new(8, 4 << 20));
        let (mut d, csock, ssock) = client_and_server(&mut cm, &mut sm);
        let (mut r, mut resp) = (ServerReport::default(), Vec::new());
        let mut bad = vec![0u8; 100];
        bad[..4].copy_from_slice(&2_000_000u32.to_le_bytes());
        for _ in 0..20 {
            d.a.send_request(csock, SERVER_IP, PORT, &bad).unwrap();
            let a = serve_one(&mut d, ssock, &mut r, &mut resp);
            assert_eq!(a, Answered::Refused(Refusal::ReplyTooLong));
        }
        assert_eq!(d.b.rpcs_in_use(), 0);
        let h = Header {
            reply_len: 300,
            seed: 9,
        };
        let mut good = Vec::new();
        fill(&mut good, Message::request(h, 1000));
        let rpc = d.a.send_request(csock, SERVER_IP, PORT, &good).unwrap();
        let a = serve_one(&mut d, ssock, &mut r, &mut resp);
        assert_eq!(
            a,
            Answered::Sent {
                request: 1000,
                reply: 300,
                intact: true
            }
        );
        let mut expect = Vec::new();
        fill(&mut expect, Message::response(h, 1000));
        let answered = d.run_until(Duration::from_secs(1), |d| match d.a.recv(csock) {
            Some(Event::Response { rpc: got, len }) if got == rpc => {
                assert_eq!(len, 300);
                assert!(d.a.message(rpc).unwrap().eq_bytes(&expect));
                true
            }
            _ => false,
        });
        assert!(answered, "the good request was not answered");
        assert_eq!((r.requests, r.failed), (1, 20));
    }
}
