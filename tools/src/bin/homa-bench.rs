//! homa-bench: homa-stack against smoltcp 0.13 in one process and one run
//! (docs/benchmarks.md section 3).
//!
//! `homa-bench` runs everything and prints a table, then one `ratios:` line.
//! `--quick` runs a tiny amount of each and prints the same rows: a check
//! that all completes, with rough figures.
//! `--reps N` sets the repetitions. `--only homa-rpc|homa-rpc-1024|
//! homa-rpc-big-table|udp-echo|homa-mb|tcp-bulk|tcp-rr|homa-rpc-offload|
//! homa-mb-offload --count N` runs one measurement of N operations once.
//! `--callgrind` runs each of them again under `valgrind --tool=callgrind`
//! and prints one `instructions:` line: instructions per operation (per
//! DATA packet for `data_packet`), in total and in the stack alone (see
//! `bench::callgrind`); the `_offload` rows are the stack's over devices
//! that do every checksum.

use std::process::ExitCode;

use clap::Parser;
use homa_tools::bench::{self, callgrind, Options, Single};

/// homa-stack against smoltcp 0.13, in one process and one run.
#[derive(Parser, Debug)]
#[command(name = "homa-bench", version, mut_args = homa_tools::cli::negative_values)]
struct Cli {
    /// A tiny amount of each measurement, the same rows: checks that all
    /// completes (the figures of so little work are rough).
    #[arg(long, conflicts_with = "only")]
    quick: bool,
    /// Instructions per operation of each row under valgrind's callgrind,
    /// on one `instructions:` line (with --quick: few operations, only to
    /// check that all completes).
    #[arg(long, conflicts_with_all = ["only", "reps"])]
    callgrind: bool,
    /// Repetitions of each measurement (the median is reported).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    reps: Option<u32>,
    /// Run one measurement once: homa-rpc, homa-rpc-1024 (1,024 in flight),
    /// homa-rpc-big-table (4,096-slot tables), udp-echo, homa-mb, tcp-bulk,
    /// tcp-rr (100-byte TCP request-responses), or homa-rpc-offload and
    /// homa-mb-offload (homa-rpc and homa-mb over devices that do every
    /// checksum).
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
            eprintln!("homa-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    if let Some(which) = cli.only {
        let m = bench::single(which, cli.count)?;
        return homa_tools::outln!("{}", bench::summary(which, &m));
    }
    if cli.callgrind {
        let exe = std::env::current_exe().map_err(|e| anyhow::anyhow!("no path to myself: {e}"))?;
        let mut figures = Vec::new();
        for row in callgrind::ROWS {
            eprintln!("homa-bench: {} under callgrind", row.name);
            let count = cli
                .quick
                .then_some(if row.per_data_packet { 1 } else { 200 });
            figures.push(callgrind::measure(&exe, row, count)?);
        }
        return homa_tools::outln!("{}", callgrind::line(&figures));
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
        eprintln!("homa-bench: a quick run: few operations, rough figures");
    }
    homa_tools::cli::write_stdout(&format!("{}{}\n", report.table(), report.ratios_line()))
}
