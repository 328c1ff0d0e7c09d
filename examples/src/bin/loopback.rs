//! A Homa client and server over in-memory devices, no root needed.
//!
//! By default sends one echo RPC of each boundary size from 1 byte to
//! 1,000,000 bytes, checks every reply byte for byte, and prints each RPC's
//! size and round-trip time in virtual time (10 Gbit/s link, 1 us one way).
//!
//! Soak mode (`--rpcs N`) runs N RPCs of mixed sizes, `--concurrency` at a
//! time, through fault injection (`--loss`, `--dup`, `--reorder`,
//! `--corrupt`, as fractions applied once per frame; checksums are on
//! whenever `--corrupt` is set), reproducibly for `--seed`, and ends with the
//! line `sent N completed N verified N failed N leaked N`.

use homa_examples::args::Args;
use homa_examples::soak::{self, Soak, SIZES};
use homa_phy::fault::{FaultConfig, PPM};
use homa_phy::Duration;
use std::process::ExitCode;

const USAGE: &str = "usage: loopback [--pcap FILE] [--rpcs N] [--concurrency K] [--seed S]
                [--loss P] [--dup P] [--reorder P] [--corrupt P] [--max-size BYTES]";

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("loopback: {e}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn ppm(args: &Args, name: &str) -> Result<u32, String> {
    let p: f64 = args.get(name, 0.0)?;
    if !(0.0..=1.0).contains(&p) {
        return Err(format!("--{name} must be a fraction in 0..=1"));
    }
    Ok((p * f64::from(PPM)) as u32)
}

fn run() -> Result<ExitCode, String> {
    let args = Args::parse(&["help"])?;
    if args.flag("help") {
        println!("{USAGE}");
        return Ok(ExitCode::SUCCESS);
    }
    args.reject_unknown(&[
        "help",
        "pcap",
        "rpcs",
        "concurrency",
        "seed",
        "loss",
        "dup",
        "reorder",
        "corrupt",
        "max-size",
    ])?;
    let mut faults = FaultConfig::new();
    faults.drop_ppm = ppm(&args, "loss")?;
    faults.duplicate_ppm = ppm(&args, "dup")?;
    faults.reorder_ppm = ppm(&args, "reorder")?;
    faults.corrupt_ppm = ppm(&args, "corrupt")?;
    faults.reorder_timeout = Duration::from_micros(50);
    let mut s = match args.get_str("rpcs") {
        Some(_) => Soak::mixed(args.get("rpcs", 0)?, 1),
        None => Soak::sizes(&SIZES),
    };
    let soak_mode = s.sizes.is_none();
    s.seed = args.get("seed", 1)?;
    s.faults = faults;
    s.concurrency = args.get("concurrency", s.concurrency)?;
    s.max_size = args.get("max-size", 1_000_000)?;
    if s.concurrency == 0 || s.max_size == 0 || s.max_size > 1_000_000 {
        return Err("--concurrency must be > 0 and --max-size in 1..=1000000".into());
    }
    if let Some(path) = args.get_str("pcap") {
        let f = std::fs::File::create(path).map_err(|e| format!("{path}: {e}"))?;
        s.pcap = Some(Box::new(std::io::BufWriter::new(f)));
    }
    if !soak_mode {
        s.on_complete = Some(Box::new(|len, rtt: Duration, ok| {
            let us = rtt.total_nanos() as f64 / 1e3;
            println!(
                "{len:>9} bytes  rtt {us:>9.1} us  {}",
                if ok { "ok" } else { "MISMATCH" }
            );
        }));
    }
    let total = s.sizes.as_ref().map_or(s.rpcs, Vec::len);
    let r = soak::run(s);
    if soak_mode {
        println!(
            "virtual time {:.3} s, retransmissions {}, drops {}, timeouts {}",
            r.elapsed.total_micros() as f64 / 1e6,
            r.retransmissions,
            r.drops,
            r.timed_out
        );
    }
    println!("{r}");
    Ok(if r.verified == total && r.leaked == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
