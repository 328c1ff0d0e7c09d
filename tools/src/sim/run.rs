//! One homa-sim experiment: build the traffic once, run each protocol on its
//! own fresh fabric with the same messages, and collect the statistics.

use std::fs::File;
use std::io::BufWriter;
use std::sync::{Arc, Mutex};
use std::time::Instant as WallClock;

use crate::fabric::{Config as FabricConfig, Fabric, NodeId, Topology};
use homa_phy::pcap::PcapSink as _;
use homa_phy::{ChecksumCapabilities, PcapLinkType};

use super::baselines::{self, PiasSource};
use super::event_loop::{drive, host_busy, Driver, LoopStats, Plan, Progress};
use super::homa_config::{self, HomaParams, HomaStyle};
use super::homa_driver::{HomaDriver, HomaHostSpec};
use super::metrics::{buckets, Bucket, Ideal, Outcomes};
use super::packets::Packetiser;
use super::tcp_driver::{TcpDriver, TcpSpec, WindowSample};
use super::traffic::{self, Message, TrafficSpec};
use super::workload::{Workload, MAX_MESSAGE};
use homa_testkit::Storage;

pub use super::baselines::Protocol;

/// Default drop-tail buffer of each switch egress port, in frames (the
/// Homa paper's simulated baselines used 250-packet port queues).
pub const DEFAULT_SWITCH_BUFFER: usize = 250;

/// Where `--pcap` records: one host's link during one protocol's run.
#[derive(Debug, Clone)]
pub struct PcapSpec {
    /// The capture file.
    pub path: String,
    /// The host whose link is recorded.
    pub host: usize,
    /// The protocol whose run is recorded.
    pub protocol: Protocol,
}

/// Everything an experiment needs.
#[derive(Debug, Clone)]
pub struct SimOptions {
    /// `rack` or `paper`.
    pub topology_name: String,
    /// The fabric's shape.
    pub topology: Topology,
    /// The size distribution, uncapped.
    pub workload: Workload,
    /// Offered load, fraction of the host link rate in wire bytes.
    pub load: f64,
    /// Arrivals happen during this many ns.
    pub duration_ns: u64,
    /// Messages arriving in this first share of the duration are not
    /// measured.
    pub warmup: f64,
    /// After the last arrival, unfinished messages get this long.
    pub drain_ns: u64,
    /// Seed of traffic, fabric and endpoints.
    pub seed: u64,
    /// What to run, in order.
    pub protocols: Vec<Protocol>,
    /// Homa unscheduled bytes; `None`: one round trip.
    pub unsched_bytes: Option<u32>,
    /// Homa scheduled levels (= overcommitment); `None`: the paper's for
    /// W1..W5, else from the workload.
    pub sched_levels: Option<u8>,
    /// The paper's Homa or homa-stack's Linux defaults (sender, FIFO shares).
    pub style: HomaStyle,
    /// Homa pacer's NIC-queue limit, ns; `None`: the style's.
    pub nic_backlog_ns: Option<u64>,
    /// RPC slots per Homa host.
    pub rpc_slots: usize,
    /// Message pool per Homa host, bytes.
    pub pool_bytes: usize,
    /// 0: one-way Homa messages; otherwise the response length.
    pub response_bytes: usize,
    /// DCTCP's and PIAS's marking threshold, full-size packets per port.
    pub ecn_k: usize,
    /// PIAS's thresholds: the paper's scripts' (W1 to W5; other workloads
    /// fall back to the rule) or the equal-bytes rule.
    pub pias_source: PiasSource,
    /// Record, in every TCP baseline, the window of the connection that
    /// carries the first measured message of the largest size.
    pub trace_window: bool,
    /// Drop-tail buffer of each switch egress port, frames; `None`:
    /// unlimited.
    pub switch_buffer: Option<usize>,
    /// Record one host's link as a pcap file.
    pub pcap: Option<PcapSpec>,
    /// Homa over IPv6 instead of IPv4 (TCP stays on IPv4).
    pub ipv6: bool,
    /// Number of size buckets.
    pub buckets: usize,
    /// No progress lines.
    pub quiet: bool,
    /// Run the protocols at the same time, one thread each.
    pub parallel: bool,
}

impl SimOptions {
    /// The defaults of `homa-sim`: `rack`, W4, 80%, every protocol,
    /// 250-frame switch buffers.
    pub fn new(workload: Workload) -> SimOptions {
        SimOptions {
            topology_name: "rack".into(),
            topology: Topology::Rack { hosts: 16 },
            workload,
            load: 0.8,
            duration_ns: 200_000_000,
            warmup: 0.1,
            drain_ns: 200_000_000,
            seed: 1,
            protocols: Protocol::ALL.to_vec(),
            unsched_bytes: None,
            sched_levels: None,
            style: HomaStyle::Paper,
            nic_backlog_ns: None,
            rpc_slots: 128,
            pool_bytes: 128 << 20,
            response_bytes: 0,
            ecn_k: baselines::ECN_K,
            pias_source: PiasSource::Paper,
            trace_window: false,
            switch_buffer: Some(DEFAULT_SWITCH_BUFFER),
            pcap: None,
            ipv6: false,
            buckets: 10,
            quiet: false,
            parallel: true,
        }
    }
}

/// What one protocol achieved.
#[derive(Debug, Clone)]
pub struct ProtoResult {
    /// The protocol.
    pub protocol: Protocol,
    /// Messages handed to the transport.
    pub sent: usize,
    /// Messages that arrived whole.
    pub completed: usize,
    /// Arrived messages whose bytes all matched.
    pub verified: usize,
    /// Messages that failed, arrived corrupt, or were unfinished at the end;
    /// with responses, also RPCs whose response failed or never came.
    pub failed: usize,
    /// Of `failed`, those still unfinished when the drain limit passed.
    pub unfinished: usize,
    /// Slowdown of the short messages.
    pub short: Bucket,
    /// Slowdown per size bucket.
    pub buckets: Vec<Bucket>,
    /// Slowdown of messages of 1 to 10 packets and of more.
    pub ranges: [Bucket; 2],
    /// Host-link utilisation while messages arrived (every frame counted).
    pub achieved_load: f64,
    /// All host-link busy time of the run, drain included, over the time
    /// messages arrived: the load the protocol carried in the end.
    pub carried_load: f64,
    /// Fabric time from the first arrival to the end, ns.
    pub sim_ns: u64,
    /// Wall time of the run (setup included), s.
    pub wall_s: f64,
    /// Link traversals of all frames.
    pub hops: u64,
    /// Frames the hosts sent.
    pub frames: u64,
    /// Frames dropped by full buffers (switch ports, and the baselines'
    /// host uplinks) after traffic started.
    pub drops: u64,
    /// Frames marked ECN Congestion Experienced.
    pub ecn_marks: u64,
    /// Protocol-specific counters, by name.
    pub counters: Vec<(&'static str, u64)>,
    /// The traced connection's window ([`SimOptions::trace_window`]),
    /// times from the message's arrival.
    pub window_trace: Vec<WindowSample>,
}

/// The whole experiment.
#[derive(Debug, Clone)]
pub struct SimResult {
    /// The options it ran with.
    pub options: SimOptions,
    /// Hosts in the fabric.
    pub hosts: usize,
    /// The workload as sent (sizes capped at [`MAX_MESSAGE`]).
    pub workload: Workload,
    /// Whether the cap changed the workload.
    pub capped: bool,
    /// Messages generated.
    pub messages: usize,
    /// Offered load of the generated messages (wire bytes, Homa's
    /// packetisation) over the host links.
    pub offered_load: f64,
    /// Homa settings used.
    pub homa: HomaParams,
    /// Upper size of the short messages.
    pub short_max_bytes: u32,
    /// Upper size of the messages of 1 to 10 packets (Homa's).
    pub ten_packets: u32,
    /// PIAS's demotion thresholds as run, and where they come from.
    pub pias: ([u32; 7], PiasSource),
    /// The other source's thresholds, when there are some.
    pub pias_other: Option<[u32; 7]>,
    /// The message whose window was traced, and its size.
    pub traced_message: Option<(usize, u32)>,
    /// The protocols' results, in the order run.
    pub results: Vec<ProtoResult>,
}

/// Memory of one message of the traffic: its [`Message`], twice for the
/// vector's growth.
const MESSAGE_BYTES: f64 = 2.0 * std::mem::size_of::<Message>() as f64;

/// Memory of one message in each protocol's run: its outcome, slowdown and
/// the queues that hold it. Measured: the peak resident size of
/// `homa-sim --workload w3 --duration D --json` grew by 400 bytes a message
/// (both protocols) from D = 5 to D = 20 ms.
const RESULT_BYTES: f64 = 200.0;

/// The fabric protocol `p` runs on (see [`baselines::ports`]).
pub fn fabric_config(o: &SimOptions, p: Protocol) -> FabricConfig {
    let mut c = FabricConfig::new(o.topology);
    c.seed = o.seed;
    // No frame is ever corrupted, so no host computes checksums (a
    // capture fills them).
    c.checksum = ChecksumCapabilities::ignored();
    c.switch_buffer_frames = o.switch_buffer;
    baselines::ports(&mut c, p, o.ecn_k);
    c
}

/// Runs the experiment: Poisson traffic from the options.
pub fn run(o: &SimOptions) -> Result<SimResult, String> {
    run_with(o, None)
}

/// Runs the experiment on the given messages instead of generated ones
/// (arrival times relative to the start of traffic; sizes at most
/// [`MAX_MESSAGE`]).
pub fn run_with(o: &SimOptions, given: Option<Vec<Message>>) -> Result<SimResult, String> {
    if !(o.load > 0.0 && o.load <= crate::cli::MAX_LOAD) {
        return Err(format!(
            "load {} is not in (0, {}]",
            o.load,
            crate::cli::MAX_LOAD
        ));
    }
    let probe = Fabric::new(fabric_config(o, Protocol::Homa)).map_err(|e| e.to_string())?;
    let hosts = probe.hosts();
    let link_mbps = probe.config().host_link_mbps;
    let workload = o.workload.capped(MAX_MESSAGE);
    let seg_only = Packetiser::new(probe.config().mtu, 1, o.ipv6);
    let unsched = o
        .unsched_bytes
        .unwrap_or_else(|| homa_config::rtt_unsched_bytes(&probe, &seg_only));
    let packets = Packetiser::new(probe.config().mtu, unsched as usize, o.ipv6);
    let sched = o
        .sched_levels
        .or_else(|| homa_config::paper_sched_levels(&workload.name))
        .unwrap_or_else(|| homa_config::sched_levels_for(&workload, unsched))
        .clamp(1, 7);
    let homa = HomaParams {
        unsched_bytes: unsched,
        overcommit: sched,
        sched_levels: sched,
        cutoffs: homa_config::cutoffs(&workload, unsched, sched),
        style: o.style,
        link_mbps,
        nic_backlog_ns: o.nic_backlog_ns.unwrap_or(o.style.nic_backlog_ns()),
        ipv6: o.ipv6,
    };
    let spec = TrafficSpec {
        hosts,
        load: o.load,
        link_mbps,
        mean_wire_bytes: workload.expect(|s| packets.wire_bytes(s as usize) as f64),
        duration_ns: o.duration_ns,
        seed: o.seed,
    };
    let messages = match given {
        Some(m) => m,
        None => {
            let expected = spec.expected_messages();
            homa_testkit::memory::check(
                (expected * (MESSAGE_BYTES + o.protocols.len() as f64 * RESULT_BYTES)) as u64,
                &format!(
                    "{} ms of arrivals (about {expected:.0} messages)",
                    o.duration_ns as f64 / 1e6
                ),
            )?;
            traffic::generate(&spec, &workload)
        }
    };
    if messages.iter().any(|m| {
        m.size == 0 || m.size > MAX_MESSAGE || m.src == m.dst || m.src.max(m.dst) as usize >= hosts
    }) {
        return Err("a message has a bad size or bad hosts".into());
    }
    let wire: f64 = messages
        .iter()
        .map(|m| packets.wire_bytes(m.size as usize) as f64)
        .sum();
    let capacity = hosts as f64 * f64::from(link_mbps) / 8000.0 * o.duration_ns as f64;
    let bounds = workload.bucket_bounds(o.buckets.max(1));
    let short_max = workload.sample(0.1);
    let rule = baselines::equal_bytes_thresholds(&workload);
    let paper = baselines::paper_thresholds(&workload.name, o.load);
    let (pias, pias_other) = match (paper, o.pias_source) {
        (Some(t), PiasSource::Paper) => ((t, PiasSource::Paper), Some(rule)),
        (p, _) => ((rule, PiasSource::EqualBytes), p),
    };
    if let Some(pc) = &o.pcap {
        if pc.host >= hosts {
            return Err(format!(
                "--pcap-host {} is not below {hosts} hosts",
                pc.host
            ));
        }
        if !o.protocols.contains(&pc.protocol) {
            return Err(format!("--pcap-protocol {} is not run", pc.protocol.name()));
        }
    }
    let warm = (o.duration_ns as f64 * o.warmup) as u64;
    let traced = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| o.trace_window && m.at >= warm)
        .max_by_key(|(i, m)| (m.size, std::cmp::Reverse(*i)))
        .map(|(i, _)| i);
    let shared = Shared {
        o,
        homa: &homa,
        messages: &messages,
        packets,
        bounds: &bounds,
        short_max,
        ten_packets: 10 * packets.seg as u32,
        hosts,
        pias: pias.0,
        traced,
    };
    let results: Vec<Result<ProtoResult, String>> = if o.parallel && o.protocols.len() > 1 {
        // The protocols share nothing but the read-only traffic: one
        // thread each.
        std::thread::scope(|scope| {
            let handles: Vec<_> = o
                .protocols
                .iter()
                .map(|&p| scope.spawn(move || run_one(&shared, p)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err("a protocol's run panicked".into()))
                })
                .collect()
        })
    } else {
        o.protocols.iter().map(|&p| run_one(&shared, p)).collect()
    };
    let results = results.into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok(SimResult {
        options: o.clone(),
        hosts,
        capped: o.workload.exceeds(MAX_MESSAGE),
        workload,
        messages: messages.len(),
        offered_load: wire / capacity,
        homa,
        short_max_bytes: short_max,
        ten_packets: shared.ten_packets,
        pias,
        pias_other,
        traced_message: traced.map(|id| (id, messages[id].size)),
        results,
    })
}

/// What every protocol's run reads.
#[derive(Clone, Copy)]
struct Shared<'a> {
    o: &'a SimOptions,
    homa: &'a HomaParams,
    messages: &'a [Message],
    packets: Packetiser,
    bounds: &'a [u32],
    short_max: u32,
    ten_packets: u32,
    hosts: usize,
    pias: [u32; 7],
    traced: Option<usize>,
}

/// One protocol on its own fabric.
fn run_one(s: &Shared<'_>, p: Protocol) -> Result<ProtoResult, String> {
    let o = s.o;
    let mut fabric = Fabric::new(fabric_config(o, p)).map_err(|e| e.to_string())?;
    let capture = match &o.pcap {
        Some(pc) if pc.protocol == p => Some(Capture::start(&mut fabric, pc)?),
        _ => None,
    };
    let wall = WallClock::now();
    let mut progress = Progress::new(p.name(), o.quiet);
    let mut out = Outcomes::new(s.messages.len());
    let mut window_trace = Vec::new();
    let (start, ls, counters) = match baselines::tcp_params(p) {
        None => run_homa(o, &mut fabric, s.homa, s.messages, &mut out, &mut progress)?,
        Some(params) => {
            let spec = TcpSpec {
                params,
                pias: (p == Protocol::Pias).then_some(s.pias),
                pfabric: p == Protocol::Pfabric,
                trace: s.traced,
            };
            let (run, trace) = run_tcp(o, spec, &mut fabric, s.messages, &mut out, &mut progress);
            let arrival = s.traced.map_or(0, |id| run.0 + s.messages[id].at);
            window_trace = trace
                .into_iter()
                .map(|(t, w, f, a)| (t.saturating_sub(arrival), w, f, a))
                .collect();
            run
        }
    };
    if let Some(c) = capture {
        c.finish()?;
    }
    let unfinished = out.close();
    let wall_s = wall.elapsed().as_secs_f64();
    let mut ideal = Ideal::new(&fabric, s.packets);
    let warm = (o.duration_ns as f64 * o.warmup) as u64;
    let b = buckets(s.messages, &out, &mut ideal, s.bounds, start, warm);
    let short_bounds = [s.short_max, u32::MAX];
    let short = buckets(s.messages, &out, &mut ideal, &short_bounds, start, warm)[0];
    let range_bounds = [s.ten_packets, u32::MAX];
    let r = buckets(s.messages, &out, &mut ideal, &range_bounds, start, warm);
    let span = ls.arrivals_end.saturating_sub(start).max(1);
    let busy = ls.busy_at_arrivals_end.saturating_sub(ls.busy_at_start);
    Ok(ProtoResult {
        protocol: p,
        sent: out.sent,
        completed: out.completed,
        verified: out.verified,
        failed: out.failed,
        unfinished,
        short,
        buckets: b,
        ranges: [r[0], r[1]],
        achieved_load: busy as f64 / (s.hosts as f64 * span as f64),
        carried_load: ls.busy_at_end.saturating_sub(ls.busy_at_start) as f64
            / (s.hosts as f64 * span as f64),
        sim_ns: ls.end.saturating_sub(start),
        wall_s,
        hops: fabric.stats().hops,
        frames: fabric.stats().frames_sent,
        drops: fabric.stats().drops.buffer_full - ls.drops_at_start,
        ecn_marks: fabric.stats().ecn_marks,
        counters,
        window_trace,
    })
}

/// A pcap file the fabric writes one host's link into.
struct Capture {
    path: String,
    file: Arc<Mutex<CaptureFile>>,
}

/// The open capture and whether a write failed.
struct CaptureFile {
    out: BufWriter<File>,
    failed: bool,
}

impl Capture {
    /// Creates the file, writes its header, and hands the fabric a sink.
    fn start(fabric: &mut Fabric, pc: &PcapSpec) -> Result<Capture, String> {
        let file = File::create(&pc.path).map_err(|e| format!("{}: {e}", pc.path))?;
        let mut out = BufWriter::new(file);
        out.global_header(PcapLinkType::Ethernet)
            .map_err(|e| format!("{}: {e}", pc.path))?;
        let file = Arc::new(Mutex::new(CaptureFile { out, failed: false }));
        let sink = Arc::clone(&file);
        let mut copy = Vec::new();
        fabric.capture(
            pc.host,
            Box::new(move |at, frame| {
                copy.clear();
                copy.extend_from_slice(frame);
                fill_checksums(&mut copy);
                let mut f = sink.lock().unwrap_or_else(|e| e.into_inner());
                if !f.failed && f.out.packet(at, &copy).is_err() {
                    f.failed = true;
                }
            }),
        );
        Ok(Capture {
            path: pc.path.clone(),
            file,
        })
    }

    /// Flushes the file; any failed write is an error.
    fn finish(self) -> Result<(), String> {
        let mut f = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let flushed = std::io::Write::flush(&mut f.out);
        if f.failed || flushed.is_err() {
            return Err(format!("{}: writing the capture failed", self.path));
        }
        Ok(())
    }
}

/// Completes in a captured frame the checksums the simulated hosts leave to
/// their NICs (they run without: the fabric never corrupts a frame), as a
/// NIC with checksum offload would: the IPv4 header's, and TCP's or Homa's
/// over IPv4 or IPv6.
pub fn fill_checksums(frame: &mut [u8]) {
    use homa_stack::wire::{checksum, homa, IpAddr, IpProtocol, Ipv4Addr, Ipv6Addr};
    let ip = |b: &[u8]| -> [u8; 4] { b.try_into().expect("4 bytes") };
    let ip6 = |b: &[u8]| -> [u8; 16] { b.try_into().expect("16 bytes") };
    let (proto, src, dst, range) = match frame.get(12..14) {
        Some([0x08, 0x00]) if frame.len() >= 34 => {
            let ihl = usize::from(frame[14] & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([frame[16], frame[17]]));
            if ihl < 20 || 14 + total > frame.len() || total < ihl {
                return;
            }
            frame[24..26].fill(0);
            let sum = checksum::data(&frame[14..14 + ihl]);
            frame[24..26].copy_from_slice(&sum.to_be_bytes());
            let src = IpAddr::V4(Ipv4Addr::from(ip(&frame[26..30])));
            let dst = IpAddr::V4(Ipv4Addr::from(ip(&frame[30..34])));
            (frame[23], src, dst, 14 + ihl..14 + total)
        }
        Some([0x86, 0xdd]) if frame.len() >= 54 => {
            let len = usize::from(u16::from_be_bytes([frame[18], frame[19]]));
            if 54 + len > frame.len() {
                return;
            }
            let src = IpAddr::V6(Ipv6Addr::from(ip6(&frame[22..38])));
            let dst = IpAddr::V6(Ipv6Addr::from(ip6(&frame[38..54])));
            (frame[20], src, dst, 54..54 + len)
        }
        _ => return,
    };
    let payload = &mut frame[range];
    match (proto, src, dst) {
        (146, ..) if payload.len() >= homa::COMMON_HEADER_LEN => {
            homa::Packet::new_unchecked(payload).fill_checksum(&src, &dst);
        }
        (6, IpAddr::V4(s), IpAddr::V4(d)) if payload.len() >= 20 => {
            payload[16..18].fill(0);
            let pseudo = checksum::pseudo_header_v4(&s, &d, IpProtocol::Tcp, payload.len() as u32);
            let sum = checksum::finish(checksum::combine(&[pseudo, checksum::sum(payload)]));
            payload[16..18].copy_from_slice(&sum.to_be_bytes());
        }
        _ => {}
    }
}

/// Start time, loop figures (with the busy time at the start filled in) and
/// counters of one protocol's run.
type RunOut = (u64, LoopStats, Vec<(&'static str, u64)>);

fn run_homa(
    o: &SimOptions,
    fabric: &mut Fabric,
    params: &HomaParams,
    messages: &[Message],
    out: &mut Outcomes,
    progress: &mut Progress,
) -> Result<RunOut, String> {
    let n = fabric.hosts();
    let mut mem: Vec<Storage> = (0..n)
        .map(|_| Storage::with_peers(o.rpc_slots, n + 4, o.pool_bytes))
        .collect();
    let spec = HomaHostSpec {
        response_bytes: o.response_bytes,
    };
    let mut d = HomaDriver::new(fabric, &mut mem, params, spec, messages, o.seed)?;
    // Every pair exchanges CUTOFFS first, as TCP opens its connections.
    d.warm_up(fabric);
    let mut none = Outcomes::new(0);
    let setup_limit = fabric.now().total_nanos() + 1_000_000_000;
    drive(
        fabric,
        &mut d,
        Plan {
            messages: &[],
            start: 0,
            limit: setup_limit,
        },
        &mut none,
        progress,
        |_| false,
    );
    if d.warming > 0 {
        return Err(format!("{} Homa warm-up messages never arrived", d.warming));
    }
    let (setup_ns, start, ls) = measure(o, fabric, &mut d, messages, out, progress);
    d.fail_unanswered(out);
    let s = d.stats();
    let e = d.endpoint_totals();
    let counters = vec![
        ("setup_ns", setup_ns),
        ("setup_drops", ls.drops_at_start),
        ("deferred_table_full", s.deferred_table),
        ("deferred_pool_full", s.deferred_pool),
        ("deferred_behind", s.deferred_behind),
        ("max_rpcs_per_host", s.max_rpcs as u64),
        ("unknown_requests", s.unknown_requests),
        ("reply_errors", s.reply_errors),
        ("bad_responses", s.bad_responses),
        ("unanswered", s.unanswered),
        ("stalls", s.stalls),
        ("retransmissions", e.retransmissions),
        ("resends_requested", e.resends_requested),
        ("timeouts", e.timeouts),
        ("endpoint_drops", e.drops),
        ("grants", e.grants),
    ];
    Ok((start, ls, counters))
}

/// The measured part of a run, after its driver's set-up: messages start on
/// the next whole microsecond after `setup_ns` and run for the duration plus
/// the drain. Returns (setup_ns, start, loop statistics).
fn measure<D: Driver>(
    o: &SimOptions,
    fabric: &mut Fabric,
    d: &mut D,
    messages: &[Message],
    out: &mut Outcomes,
    progress: &mut Progress,
) -> (u64, u64, LoopStats) {
    let setup_ns = fabric.now().total_nanos();
    let start = setup_ns.div_ceil(1_000) * 1_000 + 1_000;
    let busy0 = host_busy(fabric);
    let drops0 = fabric.stats().drops.buffer_full;
    let limit = start + o.duration_ns + o.drain_ns;
    let plan = Plan {
        messages,
        start,
        limit,
    };
    let mut ls = drive(fabric, d, plan, out, progress, |_| false);
    ls.busy_at_start = busy0;
    ls.drops_at_start = drops0;
    (setup_ns, start, ls)
}

fn run_tcp(
    o: &SimOptions,
    spec: TcpSpec,
    fabric: &mut Fabric,
    messages: &[Message],
    out: &mut Outcomes,
    progress: &mut Progress,
) -> (RunOut, Vec<WindowSample>) {
    let mut d = TcpDriver::new(fabric, spec, messages, o.seed);
    let (_, start, ls) = measure(o, fabric, &mut d, messages, out, progress);
    let s = d.stats();
    let nic_drops = (0..fabric.hosts())
        .filter_map(|h| fabric.port_stats(NodeId::Host(h), 0))
        .map(|p| p.drops)
        .sum();
    let t = s.senders;
    let counters = vec![
        ("bad_frames", s.bad_frames),
        ("bad_headers", s.bad_headers),
        ("connections", s.connections),
        ("max_connections_per_pair", s.max_per_pair),
        ("segments", t.segments),
        ("retransmissions", t.retransmissions),
        ("timeouts", t.timeouts),
        ("probes", t.probes),
        ("ecn_window_cuts", t.ecn_cuts),
        ("window_limited", t.window_limited),
        ("window_violations", t.window_violations),
        ("nic_drops", nic_drops),
    ];
    ((start, ls, counters), d.trace)
}
