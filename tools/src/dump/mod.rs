//! homa-dump: tcpdump for Homa. Reads a pcap or pcapng capture (or standard
//! input) and prints one line per frame, one JSON object per frame, one
//! line per RPC (`--rpcs`) or a summary (`--stats`).
//!
//! The pieces: [`reader`] (capture files), [`decode`] (link, IP and Homa
//! headers, tolerant of snap-length cuts; ARP and ICMP through [`foreign`]),
//! [`filter`], [`print`](mod@print) (text),
//! [`json`] and [`rpcs`] (the RPC view and the statistics).
//!
//! Exit status: 0 when the capture was read to its end; 1 when it cannot be
//! opened, is not a capture, or is truncated or corrupt (after printing
//! every frame before the damage); 2 for a usage error.

pub mod decode;
pub mod filter;
pub mod foreign;
pub mod json;
pub mod print;
pub mod reader;
pub mod rpcs;

use std::fs::File;
use std::io::{self, BufWriter, ErrorKind, Read, Write};
use std::net::IpAddr;
use std::process::ExitCode;

use clap::Parser;
use homa_stack::wire::homa::PacketType;

use self::filter::Filter;
use self::print::{Clock, TimeMode};
use self::reader::Reader;
use self::rpcs::Tracker;

/// The command line.
#[derive(Debug, Parser)]
#[command(
    name = "homa-dump",
    mut_args = crate::cli::negative_values,
    about = "Prints the Homa packets of a pcap or pcapng capture, tcpdump style",
    after_help = "Link types: Ethernet, Linux cooked v1 and v2 (tcpdump -i any), raw IPv4/IPv6.\n\
                  Live: tcpdump -i eth0 -U -w - ip proto 146 | homa-dump -\n\
                  Exit status: 0 capture read to its end, 1 unreadable, truncated or corrupt\n\
                  capture (after printing what it could), 2 usage error."
)]
pub struct Options {
    /// The capture file; `-` reads standard input.
    pub file: String,
    /// One JSON object per frame (with --rpcs: per RPC; with --stats: one).
    #[arg(long)]
    pub json: bool,
    /// Show link-layer addresses.
    #[arg(short = 'e')]
    pub link: bool,
    /// Show every header field and the checksums, on indented lines.
    #[arg(short, long)]
    pub verbose: bool,
    /// Time column: absolute, relative (to the first frame shown), delta
    /// (since the previous one) or none.
    #[arg(short = 't', long = "time", value_enum, default_value = "absolute")]
    pub time: TimeMode,
    /// Stop after N frames shown (N >= 1).
    #[arg(short = 'c', value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Only these Homa types, named as printed (DATA, NEED_ACK, ...; any
    /// case); repeat or separate with commas.
    #[arg(long = "type", value_name = "TYPE", value_delimiter = ',', value_parser = filter::parse_type)]
    pub types: Vec<PacketType>,
    /// Only packets from or to this address.
    #[arg(long = "host", value_name = "ADDR")]
    pub hosts: Vec<IpAddr>,
    /// Only Homa packets from or to this port.
    #[arg(long = "port", value_name = "PORT")]
    pub ports: Vec<u16>,
    /// Only the packets of this RPC, both sides (the server's id is the
    /// client's with the low bit flipped).
    #[arg(long = "rpc", value_name = "ID")]
    pub rpcs: Vec<u64>,
    /// One line per RPC instead of per frame.
    #[arg(long = "rpcs", conflicts_with = "stats")]
    pub rpcs_view: bool,
    /// Per-type counts and bytes, priorities used, and the RPCs that did
    /// not complete.
    #[arg(long)]
    pub stats: bool,
}

impl Options {
    fn filter(&self) -> Filter {
        Filter {
            types: self.types.clone(),
            hosts: self.hosts.clone(),
            ports: self.ports.clone(),
            rpcs: self.rpcs.clone(),
        }
    }
}

/// Runs homa-dump with the process's arguments.
pub fn main() -> ExitCode {
    let opts = match Options::try_parse() {
        Ok(opts) => opts,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let input: Box<dyn Read + Send> = if opts.file == "-" {
        Box::new(io::stdin())
    } else {
        match File::open(&opts.file) {
            Ok(f) => Box::new(f),
            Err(e) => {
                eprintln!("homa-dump: {}: {e}", opts.file);
                return ExitCode::from(1);
            }
        }
    };
    let stdout = io::stdout().lock();
    match run(&opts, input, BufWriter::new(stdout)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Output(e)) if e.kind() == ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(Failure::Output(e)) => {
            eprintln!("homa-dump: standard output: {e}");
            ExitCode::from(1)
        }
        Err(Failure::Input(e)) => {
            eprintln!("homa-dump: {}: {e}", opts.file);
            ExitCode::from(1)
        }
    }
}

/// Why a run failed.
#[derive(Debug)]
pub enum Failure {
    /// The capture could not be read to its end.
    Input(reader::ReadError),
    /// Writing failed.
    Output(io::Error),
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Self {
        Failure::Output(e)
    }
}

/// Reads the capture from `input` and writes what `opts` asks to `out`.
/// On damage, everything before it is written (and flushed) first.
pub fn run(
    opts: &Options,
    input: Box<dyn Read + Send>,
    mut out: impl Write,
) -> Result<(), Failure> {
    let mut reader = Reader::open(input).map_err(Failure::Input)?;
    let filter = opts.filter();
    let mut clock = Clock::new(opts.time);
    let mut tracker = Tracker::new();
    let aggregate = opts.rpcs_view || opts.stats;
    // From a pipe (`tcpdump -U -w - | homa-dump -`) each frame is shown as
    // it arrives, not when the output buffer fills.
    let live = opts.file == "-";
    let mut shown = 0u64;
    let mut damage = None;
    loop {
        if opts.count.is_some_and(|c| shown >= c) {
            break;
        }
        let record = match reader.next_record() {
            Ok(Some(record)) => record,
            Ok(None) => break,
            Err(e) => {
                damage = Some(e);
                break;
            }
        };
        let n = reader.frames();
        let d = decode::decode(&record);
        if !filter.matches(&d) {
            continue;
        }
        shown += 1;
        if aggregate {
            tracker.add(record.time, &d);
        } else if opts.json {
            let j = json::frame_json(n, &record, &d);
            serde_json::to_writer(&mut out, &j).map_err(io::Error::from)?;
            out.write_all(b"\n")?;
            if live {
                out.flush()?;
            }
        } else {
            let time = clock.column(record.time);
            let line = print::text(n, time.as_deref(), &record, &d, opts.link, opts.verbose);
            writeln!(out, "{line}")?;
            if live {
                out.flush()?;
            }
        }
    }
    if opts.rpcs_view {
        for r in tracker.rpc_records() {
            if opts.json {
                serde_json::to_writer(&mut out, &r).map_err(io::Error::from)?;
                out.write_all(b"\n")?;
            } else {
                writeln!(out, "{}", r.text())?;
            }
        }
    } else if opts.stats {
        let s = tracker.stats();
        if opts.json {
            serde_json::to_writer(&mut out, &s).map_err(io::Error::from)?;
            out.write_all(b"\n")?;
        } else {
            write!(out, "{}", s.text())?;
        }
    }
    out.flush()?;
    match damage {
        Some(e) => Err(Failure::Input(e)),
        None => Ok(()),
    }
}
