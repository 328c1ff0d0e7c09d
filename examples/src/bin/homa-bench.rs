//! homa-bench: homa-stack against smoltcp 0.12 in one process and one run
//! (see the README's benchmark section).
//!
//! `homa-bench` runs everything and prints a table, then one `ratios:` line.
//! `--quick` runs a tiny amount of each, only to check that all completes.
//! `--reps N` sets the repetitions. `--only homa-rpc|udp-echo|homa-mb|tcp-bulk
//! --count N` runs one measurement of N operations once (for callgrind).

use std::process::ExitCode;

use homa_examples::args::Args;
use homa_examples::bench::{self, Options, Single};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("homa-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let args = Args::parse(&["quick", "help"])?;
    args.reject_unknown(&["quick", "help", "reps", "only", "count"])?;
    if args.flag("help") {
        println!(
            "usage: homa-bench [--quick] [--reps N]\n       homa-bench --only homa-rpc|udp-echo|homa-mb|tcp-bulk --count N"
        );
        return Ok(());
    }
    if let Some(which) = args.get_str("only") {
        let which: Single = which.parse()?;
        let count: u64 = args.get("count", 10_000)?;
        let m = bench::single(which, count)?;
        println!(
            "{which:?}: {} ops in {:.4} s CPU: {:.1} k ops/s, {:.2} Gbit/s, {} frames, {} DATA packets",
            m.ops,
            m.secs,
            m.rate() / 1e3,
            m.gbps(),
            m.frames,
            m.data_packets
        );
        return Ok(());
    }
    let mut o = if args.flag("quick") {
        Options::QUICK
    } else {
        Options::FULL
    };
    o.reps = args.get("reps", o.reps)?;
    let report = bench::run(o, |what| eprintln!("homa-bench: {what}"))?;
    print!("{}", report.table());
    println!("{}", report.ratios_line());
    Ok(())
}
