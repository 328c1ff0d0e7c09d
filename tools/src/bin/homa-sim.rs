//! homa-sim: message latency under load of many unchanged homa-stack
//! endpoints over a simulated datacenter fabric, next to the baselines the
//! Homa paper compared it with (PIAS, DCTCP, TCP with a connection pool,
//! and pFabric as the near-ideal reference) on the same fabric with the
//! same arrivals (docs/benchmarks.md section 1).
//!
//! Deterministic for a seed; needs no root and no network. Prints a table
//! (or `--json`), optionally a chart (`--plot`), and its own speed. The exit
//! status is 1 when any message of any protocol failed (was lost, arrived
//! corrupt, was unfinished at the end of the drain, or, with
//! `--response-bytes`, its response could not be sent or never came back),
//! or when an output could not be written; 2 for a usage error or a run
//! refused up front (one the memory cannot hold).

use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use homa_tools::cli;
use homa_tools::fabric::Topology;
use homa_tools::sim::baselines::{PiasSource, ECN_K};
use homa_tools::sim::homa_config::HomaStyle;
use homa_tools::sim::run::PcapSpec;
use homa_tools::sim::{plot, report, run, Protocol, SimOptions, Workload};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TopologyArg {
    /// 16 hosts on one switch, 10 Gbit/s.
    Rack,
    /// The Homa paper's 144 hosts in 9 racks.
    Paper,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ProtocolArg {
    /// homa-stack.
    Homa,
    /// PIAS over DCTCP, strict priorities at every port.
    Pias,
    /// DCTCP, ECN marking at every port.
    Dctcp,
    /// TCP (SACK), a connection pool per host pair, drop-tail queues.
    #[value(name = "tcp-mc")]
    TcpMc,
    /// pFabric, the near-ideal reference.
    Pfabric,
}

impl ProtocolArg {
    fn protocol(self) -> Protocol {
        match self {
            ProtocolArg::Homa => Protocol::Homa,
            ProtocolArg::Pias => Protocol::Pias,
            ProtocolArg::Dctcp => Protocol::Dctcp,
            ProtocolArg::TcpMc => Protocol::TcpMc,
            ProtocolArg::Pfabric => Protocol::Pfabric,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PiasArg {
    /// The Homa paper's scripts' values for W1 to W5 (the rule for others).
    Paper,
    /// Equal shares of the workload's bytes per priority.
    EqualBytes,
}

/// `--switch-buffer`: frames per switch egress port, `None` for unlimited.
#[derive(Debug, Clone, Copy)]
struct SwitchBuffer(Option<usize>);

fn switch_buffer(s: &str) -> Result<SwitchBuffer, String> {
    if s == "unlimited" {
        return Ok(SwitchBuffer(None));
    }
    match s.parse::<usize>() {
        Ok(n) if (1..=1_000_000).contains(&n) => Ok(SwitchBuffer(Some(n))),
        _ => Err(format!("{s} is not 1..=1000000 or unlimited")),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum StyleArg {
    /// The paper's Homa (sender and FIFO-grant choices of the paper).
    Paper,
    /// homa-stack's Linux defaults.
    Linux,
}

/// Message slowdowns of homa-stack, PIAS, DCTCP, TCP and pFabric under the
/// same load on a simulated datacenter fabric. Defaults: rack (16 hosts,
/// 10 Gbit/s), 250-frame drop-tail switch buffers, W4, load 0.8, 200 ms of
/// arrivals, seed 1, every protocol (one thread each unless --sequential).
/// Exits 1 when any message failed.
#[derive(Parser, Debug)]
#[command(name = "homa-sim", version, mut_args = homa_tools::cli::negative_values)]
struct Args {
    /// Fabric shape.
    #[arg(long, value_enum, default_value = "rack")]
    topology: TopologyArg,
    /// w1..w5, or a `bytes,cdf` CSV file.
    #[arg(long, value_name = "W|FILE.csv", default_value = "w4")]
    workload: String,
    /// Offered load, a fraction of the host link rate in (0, 1.5].
    #[arg(long, default_value_t = 0.8, value_parser = cli::load)]
    load: f64,
    /// Milliseconds of arrivals, in (0, 10000000).
    #[arg(long, value_name = "MS", default_value_t = 200.0, value_parser = cli::millis)]
    duration: f64,
    /// Seed of traffic, fabric and endpoints.
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
    /// Protocols to run, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "homa,pias,dctcp,tcp-mc,pfabric"
    )]
    protocols: Vec<ProtocolArg>,
    /// Drop-tail buffer of each switch egress port (and the baselines' host
    /// uplinks) in frames, 1..=1000000, or `unlimited` (pFabric keeps its
    /// own).
    #[arg(long, value_name = "FRAMES", default_value = "250", value_parser = switch_buffer)]
    switch_buffer: SwitchBuffer,
    /// Write the frames crossing one host's link to this pcap file
    /// (see --pcap-host and --pcap-protocol).
    #[arg(long, value_name = "FILE")]
    pcap: Option<String>,
    /// The host whose link --pcap records.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pcap_host: usize,
    /// The protocol whose run --pcap records.
    #[arg(long, value_enum, default_value = "homa")]
    pcap_protocol: ProtocolArg,
    /// JSON on stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// Also write the JSON to this file.
    #[arg(long, value_name = "FILE")]
    json_out: Option<String>,
    /// Write a chart: FILE.svg, or FILE.png in a build with the `png`
    /// feature (other names are refused).
    #[arg(long, value_name = "FILE.svg|FILE.png")]
    plot: Option<String>,
    /// Share of the duration not measured at the start, in [0, 1).
    #[arg(long, value_name = "FRACTION", default_value_t = 0.1, value_parser = cli::fraction_below_one)]
    warmup: f64,
    /// Milliseconds allowed after the last arrival, in (0, 10000000).
    #[arg(long, value_name = "MS", default_value_t = 200.0, value_parser = cli::millis)]
    drain: f64,
    /// Size buckets of the table, 1..=100.
    #[arg(long, value_name = "N", default_value_t = 10,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=100))]
    buckets: usize,
    /// No progress lines.
    #[arg(long)]
    quiet: bool,
    /// Run the protocols one after the other instead of in parallel.
    #[arg(long)]
    sequential: bool,
    /// Homa: the paper's choices or homa-stack's Linux defaults.
    #[arg(long, value_enum, default_value = "paper", help_heading = "Homa")]
    homa_style: StyleArg,
    /// Homa unscheduled bytes, 1..=1000000 (default: one round trip).
    #[arg(long, value_name = "N", help_heading = "Homa",
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    unsched_bytes: Option<u32>,
    /// Homa scheduled priority levels, 1..=7 (default: the paper's).
    #[arg(long, value_name = "N", help_heading = "Homa",
          value_parser = clap::value_parser!(u8).range(1..=7))]
    sched_levels: Option<u8>,
    /// Homa pacer's NIC-queue limit in ns, 0..=1000000000 (default: the style's).
    #[arg(long, value_name = "NS", help_heading = "Homa",
          value_parser = clap::value_parser!(u64).range(0..=1_000_000_000))]
    nic_backlog_ns: Option<u64>,
    /// RPC slots per Homa host, 1..=65535.
    #[arg(long, value_name = "N", default_value_t = 128, help_heading = "Homa",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=65_535))]
    rpc_slots: usize,
    /// Message pool per Homa host in MiB, 2..=4096.
    #[arg(long, value_name = "N", default_value_t = 128, help_heading = "Homa",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(2..=4096))]
    pool_mb: usize,
    /// Response length of each Homa RPC, 0..=1000000 (0: one-way messages).
    #[arg(long, value_name = "N", default_value_t = 0, help_heading = "Homa",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=u64::from(cli::MAX_MESSAGE)))]
    response_bytes: usize,
    /// Homa over IPv6 (host addresses fd00::rack:slot, 1,404 payload bytes per
    /// DATA packet); TCP stays on IPv4.
    #[arg(long, help_heading = "Homa")]
    ipv6: bool,
    /// DCTCP's marking threshold K in full-size packets per port, 1..=1000
    /// (pias and dctcp).
    #[arg(long, value_name = "PACKETS", default_value_t = ECN_K, help_heading = "Baselines",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1000))]
    ecn_k: usize,
    /// PIAS's demotion thresholds.
    #[arg(long, value_enum, default_value = "paper", help_heading = "Baselines")]
    pias_thresholds: PiasArg,
    /// Write the window of the connection carrying one message (the first
    /// measured one of the largest size) in every TCP baseline to this CSV
    /// file: protocol, time, window, bytes in flight, DCTCP's alpha.
    #[arg(long, value_name = "FILE.csv", help_heading = "Baselines")]
    cwnd_log: Option<String>,
}

fn options(a: &Args) -> Result<SimOptions, String> {
    let workload = Workload::load(&a.workload)?;
    let mut o = SimOptions::new(workload);
    (o.topology_name, o.topology) = match a.topology {
        TopologyArg::Rack => ("rack".into(), Topology::Rack { hosts: 16 }),
        TopologyArg::Paper => ("paper".into(), Topology::Paper),
    };
    o.load = a.load;
    o.duration_ns = (a.duration * 1e6) as u64;
    o.drain_ns = (a.drain * 1e6) as u64;
    o.warmup = a.warmup;
    o.seed = a.seed;
    o.protocols = Vec::new();
    for p in &a.protocols {
        let p = p.protocol();
        if !o.protocols.contains(&p) {
            o.protocols.push(p);
        }
    }
    o.buckets = a.buckets;
    o.quiet = a.quiet;
    o.parallel = !a.sequential;
    o.unsched_bytes = a.unsched_bytes;
    o.sched_levels = a.sched_levels;
    o.style = match a.homa_style {
        StyleArg::Paper => HomaStyle::Paper,
        StyleArg::Linux => HomaStyle::Linux,
    };
    o.nic_backlog_ns = a.nic_backlog_ns;
    o.rpc_slots = a.rpc_slots;
    o.pool_bytes = a.pool_mb << 20;
    o.response_bytes = a.response_bytes;
    o.ecn_k = a.ecn_k;
    o.pias_source = match a.pias_thresholds {
        PiasArg::Paper => PiasSource::Paper,
        PiasArg::EqualBytes => PiasSource::EqualBytes,
    };
    o.trace_window = a.cwnd_log.is_some();
    o.switch_buffer = a.switch_buffer.0;
    o.pcap = a.pcap.as_ref().map(|path| PcapSpec {
        path: path.clone(),
        host: a.pcap_host,
        protocol: a.pcap_protocol.protocol(),
    });
    o.ipv6 = a.ipv6;
    if let Some(p) = &a.plot {
        plot::Format::of_path(p)?;
    }
    // Files the run will write are created now, so a bad path fails before
    // the run rather than after it.
    for path in [&a.json_out, &a.plot, &a.pcap, &a.cwnd_log]
        .into_iter()
        .flatten()
    {
        std::fs::File::create(path).map_err(|e| format!("{path}: {e}"))?;
    }
    Ok(o)
}

/// Why homa-sim stopped, by exit status.
enum Failure {
    /// Options refused or a run that could not start: exit status 2.
    Usage(String),
    /// A result that could not be written: exit status 1.
    Output(String),
}

fn main() -> ExitCode {
    let args = Args::parse();
    match main_inner(&args) {
        Ok(code) => code,
        Err(Failure::Usage(e)) => {
            eprintln!("homa-sim: {e}");
            ExitCode::from(2)
        }
        Err(Failure::Output(e)) => {
            eprintln!("homa-sim: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main_inner(args: &Args) -> Result<ExitCode, Failure> {
    let o = options(args).map_err(Failure::Usage)?;
    let wall = std::time::Instant::now();
    let r = run(&o).map_err(Failure::Usage)?;
    let mut text = if args.json {
        report::json(&r)
    } else {
        format!(
            "{}total wall time {:.1} s\n",
            report::table(&r),
            wall.elapsed().as_secs_f64()
        )
    };
    if let Some(path) = &args.json_out {
        std::fs::write(path, report::json(&r))
            .map_err(|e| Failure::Output(format!("{path}: {e}")))?;
    }
    if let Some(path) = &args.cwnd_log {
        std::fs::write(path, report::window_csv(&r))
            .map_err(|e| Failure::Output(format!("{path}: {e}")))?;
        if let (false, Some((id, size))) = (args.json, r.traced_message) {
            text.push_str(&format!(
                "window of message {id} ({size} bytes) written to {path}\n"
            ));
        }
    }
    if let Some(path) = &args.plot {
        plot::write(&r, path).map_err(Failure::Output)?;
        if !args.json {
            text.push_str(&format!("plot written to {path}\n"));
        }
    }
    cli::write_stdout(&text).map_err(|e| Failure::Output(format!("{e:#}")))?;
    if args.json && !o.quiet {
        for p in &r.results {
            eprintln!("{}: {}", p.protocol.name(), report::speed(p));
        }
    }
    let failed: Vec<String> = r
        .results
        .iter()
        .filter(|p| p.failed > 0)
        .map(|p| format!("{} {} of {}", p.protocol.name(), p.failed, p.sent))
        .collect();
    if failed.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("homa-sim: messages failed: {}", failed.join(", "));
        Ok(ExitCode::FAILURE)
    }
}
