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
//! line `sent N completed N verified N failed N (timed out N, unresolved N,
//! unreachable N, mtu shrank N) leaked N`, the failures counted by kind.
//! The exit status is 0 only when every RPC was verified and nothing
//! leaked.
//!
//! `--ipv6` runs the same over IPv6 (both ends dual-stack, link addresses
//! from neighbour discovery; the default sizes are IPv6's boundaries).
//!
//! A run the machine's memory cannot hold (`--concurrency` sizes the
//! message pools) is refused before it starts, with its estimate, exit
//! status 2. A failed write (standard output or the `--pcap` file) is
//! reported and the exit status is 1.

use clap::Parser;
use homa_phy::fault::{FaultConfig, PPM};
use homa_phy::Duration;
use homa_testkit::memory;
use homa_testkit::soak::{self, Soak, SIZES, SIZES_V6};
use std::cell::RefCell;
use std::io::{self, ErrorKind, Write};
use std::process::ExitCode;
use std::rc::Rc;

/// Most RPCs in flight at once: each endpoint gets `(2K + 2) x 1.1 MB` of
/// message pool for K, so 1024 means about 2.3 GB each (refused up front
/// where that memory is not available).
const MAX_CONCURRENCY: u64 = 1024;

/// Largest message a soak sends, as Linux Homa allows.
const MAX_MESSAGE: u32 = 1_000_000;

/// A share of frames in `[0, 1]`.
fn fraction(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{s:?}: {e}"))?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{v} is not a fraction in [0, 1]"))
    }
}

/// A Homa client and server over in-memory devices (no root): one echo RPC
/// of each boundary size, or a soak of mixed sizes through injected faults.
#[derive(Parser, Debug)]
// A value such as `-0.1` is read as a value (refused by its range), not
// as an unknown option.
#[command(name = "loopback", version, mut_args = negative_values)]
struct Args {
    /// Write every frame to this pcap file.
    #[arg(long, value_name = "FILE")]
    pcap: Option<String>,
    /// Soak mode: this many RPCs of mixed sizes (1..=10000000).
    #[arg(long, value_name = "N",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=10_000_000))]
    rpcs: Option<usize>,
    /// RPCs in flight at once (1..=1024; default 1 for the boundary sizes,
    /// 8 in soak mode).
    #[arg(long, value_name = "K",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_CONCURRENCY))]
    concurrency: Option<usize>,
    /// Seed of sizes, payloads and faults.
    #[arg(long, value_name = "S", default_value_t = 1)]
    seed: u64,
    /// Share of frames dropped, in [0, 1].
    #[arg(long, value_name = "P", default_value_t = 0.0, value_parser = fraction)]
    loss: f64,
    /// Share of frames duplicated, in [0, 1].
    #[arg(long, value_name = "P", default_value_t = 0.0, value_parser = fraction)]
    dup: f64,
    /// Share of frames delayed behind later ones, in [0, 1].
    #[arg(long, value_name = "P", default_value_t = 0.0, value_parser = fraction)]
    reorder: f64,
    /// Share of frames with one bit flipped, in [0, 1] (turns checksums on).
    #[arg(long, value_name = "P", default_value_t = 0.0, value_parser = fraction)]
    corrupt: f64,
    /// Largest soak message, 1..=1000000 bytes.
    #[arg(long, value_name = "BYTES", default_value_t = MAX_MESSAGE,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_MESSAGE)))]
    max_size: u32,
    /// Every RPC over IPv6 (fd00::1 to fd00::2) instead of IPv4.
    #[arg(long)]
    ipv6: bool,
}

/// Lets an option's value start with a minus sign.
fn negative_values(a: clap::Arg) -> clap::Arg {
    let takes_value = a.get_action().takes_values();
    a.allow_negative_numbers(takes_value)
}

fn ppm(p: f64) -> u32 {
    (p * f64::from(PPM)) as u32
}

/// The first write error of an output, kept so that the run can go on and
/// report it at the end (a closed pipe, as with `| head`, is not one).
#[derive(Clone, Default)]
struct FirstError(Rc<RefCell<Option<io::Error>>>);

impl FirstError {
    fn keep<T>(&self, r: io::Result<T>) {
        if let Err(e) = &r {
            self.note(e);
        }
    }

    fn note(&self, e: &io::Error) {
        let mut first = self.0.borrow_mut();
        if first.is_none() && e.kind() != ErrorKind::BrokenPipe {
            *first = Some(io::Error::new(e.kind(), e.to_string()));
        }
    }

    fn take(&self) -> Option<io::Error> {
        self.0.borrow_mut().take()
    }
}

/// A writer that keeps its first error in a [`FirstError`] (the pcap
/// writer only counts refused records).
struct Keeping<W> {
    inner: W,
    error: FirstError,
}

impl<W: Write> Write for Keeping<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let r = self.inner.write(buf);
        if let Err(e) = &r {
            self.error.note(e);
        }
        r
    }

    fn flush(&mut self) -> io::Result<()> {
        let r = self.inner.flush();
        if let Err(e) = &r {
            self.error.note(e);
        }
        r
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let mut s = soak_of(&args);
    if let Err(e) = memory::check(
        s.memory_bytes(),
        &format!("a run of {} RPCs at a time", s.concurrency),
    ) {
        eprintln!("loopback: {e}");
        return ExitCode::from(2);
    }
    let pcap_error = FirstError::default();
    if let Some(path) = &args.pcap {
        match std::fs::File::create(path) {
            Ok(f) => {
                s.pcap = Some(Box::new(io::BufWriter::new(Keeping {
                    inner: f,
                    error: pcap_error.clone(),
                })))
            }
            Err(e) => {
                eprintln!("loopback: {path}: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let stdout_error = FirstError::default();
    let soak_mode = s.sizes.is_none();
    if !soak_mode {
        let error = stdout_error.clone();
        s.on_complete = Some(Box::new(move |len, rtt: Duration, ok| {
            let us = rtt.total_nanos() as f64 / 1e3;
            error.keep(writeln!(
                io::stdout(),
                "{len:>9} bytes  rtt {us:>9.1} us  {}",
                if ok { "ok" } else { "MISMATCH" }
            ));
        }));
    }
    let total = s.sizes.as_ref().map_or(s.rpcs, Vec::len);
    let r = soak::run(s);
    let mut out = io::stdout().lock();
    if soak_mode {
        stdout_error.keep(writeln!(
            out,
            "virtual time {:.3} s, retransmissions {}, drops {}, timeouts {}",
            r.elapsed.total_micros() as f64 / 1e6,
            r.retransmissions,
            r.drops,
            r.timed_out
        ));
    }
    stdout_error.keep(writeln!(out, "{r}").and_then(|()| out.flush()));
    let mut wrote = true;
    if let Some(e) = stdout_error.take() {
        eprintln!("loopback: standard output: {e}");
        wrote = false;
    }
    if let Some(path) = &args.pcap {
        if let Some(e) = pcap_error.take() {
            eprintln!("loopback: {path}: {e}");
            wrote = false;
        } else if r.pcap_errors > 0 {
            eprintln!("loopback: {path}: {} records not written", r.pcap_errors);
            wrote = false;
        }
    }
    if wrote && r.verified == total && r.leaked == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The run the arguments ask for (without its outputs).
fn soak_of(args: &Args) -> Soak {
    let mut faults = FaultConfig::new();
    faults.drop_ppm = ppm(args.loss);
    faults.duplicate_ppm = ppm(args.dup);
    faults.reorder_ppm = ppm(args.reorder);
    faults.corrupt_ppm = ppm(args.corrupt);
    faults.reorder_timeout = Duration::from_micros(50);
    let mut s = match args.rpcs {
        Some(n) => Soak::mixed(n, 1),
        None if args.ipv6 => Soak::sizes(&SIZES_V6),
        None => Soak::sizes(&SIZES),
    };
    s.ipv6 = args.ipv6;
    s.seed = args.seed;
    s.faults = faults;
    s.concurrency = args.concurrency.unwrap_or(s.concurrency);
    s.max_size = args.max_size as usize;
    s
}
