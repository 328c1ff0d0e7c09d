//! homa-bench: homa-stack against smoltcp 0.13 in one process and one run
//! (docs/benchmarks.md section 3).
//!
//! `homa-bench` runs everything and prints a table, then one `ratios:` line.
//! `--quick` runs a tiny amount of each, only to check that all completes,
//! and prints only that it did (figures of so little work mean nothing).
//! `--reps N` sets the repetitions. `--only homa-rpc|homa-rpc-1024|
//! homa-rpc-big-table|udp-echo|homa-mb|tcp-bulk --count N` runs one
//! measurement of N operations once (for callgrind).

use std::process::ExitCode;

use clap::Parser;
use homa_tools::bench::{self, Options, Single};

/// homa-stack against smoltcp 0.13, in one process and one run.
#[derive(Parser, Debug)]
#[command(name = "homa-bench", version, about)]
struct Cli {
    /// A tiny amount of each measurement: checks that all completes.
    #[arg(long, conflicts_with = "only")]
    quick: bool,
    /// Repetitions of each measurement (the median is reported).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    reps: Option<u32>,
    /// Run one measurement once: homa-rpc, homa-rpc-1024 (1,024 in flight),
    /// homa-rpc-big-table (4,096-slot tables), udp-echo, homa-mb or tcp-bulk.
    #[arg(long, value_parser = |s: &str| s.parse::<Single>())]
    only: Option<Single>,
    /// Operations for --only.
    #[arg(long, default_value_t = 10_000, requires = "only",
          value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    count: u64,
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("homa-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<(), String> {
    if let Some(which) = cli.only {
        let m = bench::single(which, cli.count)?;
        return homa_tools::outln!(
            "{which:?}: {} ops in {:.4} s CPU: {:.1} k ops/s, {:.2} Gbit/s, {} frames, {} DATA packets",
            m.ops,
            m.secs,
            m.rate() / 1e3,
            m.gbps(),
            m.frames,
            m.data_packets
        );
    }
    let mut o = if cli.quick {
        Options::QUICK
    } else {
        Options::FULL
    };
    if let Some(reps) = cli.reps {
        o.reps = reps as usize;
    }
    let report = bench::run(o, |what| eprintln!("homa-bench: {what}"))?;
    if cli.quick {
        return homa_tools::outln!(
            "homa-bench: quick run completed ({} measurements; run without --quick for figures)",
            report.rows.len()
        );
    }
    homa_tools::cli::write_stdout(&format!("{}{}\n", report.table(), report.ratios_line()))
}
