//! homa-sim: message latency under load of many unchanged homa-stack
//! endpoints over a simulated datacenter fabric, next to smoltcp TCP on the
//! same fabric with the same arrivals (docs/benchmarks.md section 1).
//!
//! Deterministic for a seed; needs no root and no network. Prints a table
//! (or `--json`), optionally an SVG chart (`--plot`), and its own speed.

use std::io::Write as _;
use std::process::ExitCode;

use homa_examples::args::Args;
use homa_examples::sim::homa_config::HomaStyle;
use homa_examples::sim::{plot, report, run, Protocol, SimOptions, Workload};
use homa_phy::sim::Topology;

const USAGE: &str =
    "usage: homa-sim [--topology rack|paper] [--workload w1..w5|FILE.csv] [--load 0.8]
                [--duration MS] [--seed N] [--protocols homa,tcp] [--json] [--json-out FILE] [--plot FILE.svg]
                [--warmup FRACTION] [--drain MS] [--buckets N] [--quiet] [--sequential]
  Homa:         [--homa-style paper|linux] [--unsched-bytes N] [--sched-levels N] [--nic-backlog-ns N]
                [--rpc-slots N]
                [--pool-mb N] [--response-bytes N (0 = one-way messages)]
  TCP:          [--tcp-buffer BYTES]
Defaults: rack (16 hosts, 10 Gbit/s), W4, load 0.8, 200 ms of arrivals, seed 1, homa and tcp
(one thread each unless --sequential).";

const OPTIONS: [&str; 23] = [
    "help",
    "topology",
    "workload",
    "load",
    "duration",
    "seed",
    "protocols",
    "json",
    "json-out",
    "plot",
    "warmup",
    "drain",
    "buckets",
    "quiet",
    "sequential",
    "unsched-bytes",
    "sched-levels",
    "homa-style",
    "nic-backlog-ns",
    "rpc-slots",
    "pool-mb",
    "response-bytes",
    "tcp-buffer",
];

fn main() -> ExitCode {
    match main_inner() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("homa-sim: {e}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn ms_to_ns(ms: f64, name: &str) -> Result<u64, String> {
    if !(ms > 0.0 && ms < 1e7) {
        return Err(format!(
            "--{name} must be a positive number of milliseconds"
        ));
    }
    Ok((ms * 1e6) as u64)
}

fn options(args: &Args) -> Result<SimOptions, String> {
    let workload = Workload::load(args.get_str("workload").unwrap_or("w4"))?;
    let mut o = SimOptions::new(workload);
    o.topology_name = args.get_str("topology").unwrap_or("rack").to_string();
    o.topology = match o.topology_name.as_str() {
        "rack" => Topology::Rack { hosts: 16 },
        "paper" => Topology::Paper,
        t => return Err(format!("unknown topology {t}: rack or paper")),
    };
    o.load = args.get("load", 0.8)?;
    o.duration_ns = ms_to_ns(args.get("duration", 200.0)?, "duration")?;
    o.drain_ns = ms_to_ns(args.get("drain", 200.0)?, "drain")?;
    o.warmup = args.get("warmup", 0.1)?;
    if !(0.0..1.0).contains(&o.warmup) {
        return Err("--warmup must be a fraction below 1".into());
    }
    o.seed = args.get("seed", 1)?;
    o.protocols = args
        .get_str("protocols")
        .unwrap_or("homa,tcp")
        .split(',')
        .map(|p| match p.trim() {
            "homa" => Ok(Protocol::Homa),
            "tcp" => Ok(Protocol::Tcp),
            other => Err(format!("unknown protocol {other}: homa or tcp")),
        })
        .collect::<Result<_, _>>()?;
    o.buckets = args.get("buckets", 10)?;
    o.quiet = args.flag("quiet");
    o.parallel = !args.flag("sequential");
    o.unsched_bytes = args
        .get_str("unsched-bytes")
        .map(str::parse)
        .transpose()
        .map_err(|e| format!("--unsched-bytes: {e}"))?;
    o.sched_levels = args
        .get_str("sched-levels")
        .map(str::parse)
        .transpose()
        .map_err(|e| format!("--sched-levels: {e}"))?;
    if o.sched_levels.is_some_and(|s| !(1..=7).contains(&s)) {
        return Err("--sched-levels must be 1..=7".into());
    }
    o.style = match args.get_str("homa-style").unwrap_or("paper") {
        "paper" => HomaStyle::Paper,
        "linux" => HomaStyle::Linux,
        s => return Err(format!("unknown --homa-style {s}: paper or linux")),
    };
    o.nic_backlog_ns = args
        .get_str("nic-backlog-ns")
        .map(str::parse)
        .transpose()
        .map_err(|e| format!("--nic-backlog-ns: {e}"))?;
    o.rpc_slots = args.get("rpc-slots", o.rpc_slots)?;
    o.pool_bytes = args.get::<usize>("pool-mb", o.pool_bytes >> 20)? << 20;
    o.response_bytes = args.get("response-bytes", 0)?;
    o.tcp_buffer = args.get("tcp-buffer", o.tcp_buffer)?;
    if o.rpc_slots == 0 || o.rpc_slots > 65_535 || o.pool_bytes < 2 << 20 || o.tcp_buffer < 2048 {
        return Err("--rpc-slots 1..=65535, --pool-mb >= 2, --tcp-buffer >= 2048".into());
    }
    Ok(o)
}

fn main_inner() -> Result<(), String> {
    let args = Args::parse(&["help", "json", "quiet", "sequential"])?;
    if args.flag("help") {
        println!("{USAGE}");
        return Ok(());
    }
    args.reject_unknown(&OPTIONS)?;
    let o = options(&args)?;
    let wall = std::time::Instant::now();
    let r = run(&o)?;
    let mut text = if args.flag("json") {
        report::json(&r)
    } else {
        format!(
            "{}total wall time {:.1} s\n",
            report::table(&r),
            wall.elapsed().as_secs_f64()
        )
    };
    if let Some(path) = args.get_str("json-out") {
        std::fs::write(path, report::json(&r)).map_err(|e| format!("{path}: {e}"))?;
    }
    if let Some(path) = args.get_str("plot") {
        std::fs::write(path, plot::svg(&r)).map_err(|e| format!("{path}: {e}"))?;
        if !args.flag("json") {
            text.push_str(&format!("plot written to {path}\n"));
        }
    }
    // A closed pipe (e.g. `| head`) is not an error worth a panic.
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    if args.flag("json") && !o.quiet {
        for p in &r.results {
            eprintln!("{}: {}", p.protocol.name(), report::speed(p));
        }
    }
    Ok(())
}
