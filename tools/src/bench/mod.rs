//! homa-bench: homa-stack against smoltcp 0.13 in one process and one run.
//!
//! Both stacks run two ends (Ethernet + IPv4, every checksum computed and
//! verified) over the same [`ring::Pair`] of in-memory rings on the same
//! virtual clock, in one thread. Rates come from the thread's CPU time
//! (both ends together), as the median of a few repetitions. Every reply
//! is checked, every RPC completes, and homa's tables and pools must be
//! empty at the end. docs/benchmarks.md section 3 explains the rows.

pub mod callgrind;
pub mod cpu;
pub mod frame;
pub mod homa;
pub mod ring;
pub mod smol;

use homa_stack::wire::{EthernetAddress, Ipv4Addr};

use cpu::median;
use homa::Checksums;

/// The client's address.
pub const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// The server's address.
pub const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// The client's link address.
pub const CLIENT_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 1]);
/// The server's link address.
pub const SERVER_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 2]);

/// The small message size.
pub const SMALL: usize = 100;
/// The large message size (Homa's largest).
pub const LARGE: usize = 1_000_000;

/// One timed run.
#[derive(Debug, Clone, Copy)]
pub struct Measure {
    /// RPCs, round trips or messages completed.
    pub ops: u64,
    /// Message bytes delivered.
    pub bytes: u64,
    /// Thread CPU seconds.
    pub secs: f64,
    /// Frames on the rings, both directions.
    pub frames: u64,
    /// Homa DATA packets the client sent (0 for smoltcp).
    pub data_packets: u64,
}

impl Measure {
    /// Operations per second.
    pub fn rate(&self) -> f64 {
        self.ops as f64 / self.secs
    }
    /// Goodput in Gbit/s.
    pub fn gbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.secs / 1e9
    }
}

const TEMPLATE_SEED: u64 = 0x5eed;

/// The pattern every message carries after its sequence number, computed
/// once so that filling and checking a message is a copy and a compare.
fn template() -> &'static [u8] {
    static TEMPLATE: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let mut t = vec![0u8; LARGE];
        crate::fill_pattern(TEMPLATE_SEED, &mut t);
        t
    })
}

/// Message `seq` (at most [`LARGE`] bytes): its sequence number in the
/// first 8 bytes (little-endian) and a fixed pattern after.
pub fn fill_payload(seq: u64, buf: &mut [u8]) {
    buf.copy_from_slice(&template()[..buf.len()]);
    let n = buf.len().min(8);
    buf[..n].copy_from_slice(&seq.to_le_bytes()[..n]);
}

/// Whether `buf` is message `seq` (see [`fill_payload`]).
pub fn check_payload(seq: u64, buf: &[u8]) -> bool {
    buf.len() >= 8
        && buf.len() <= LARGE
        && buf[..8] == seq.to_le_bytes()
        && buf[8..] == template()[8..buf.len()]
}

/// How much to run.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Repetitions of each measurement (the median is reported).
    pub reps: usize,
    /// 100-byte RPCs (and UDP round trips) per repetition.
    pub rpcs: u64,
    /// 1 MB messages per repetition.
    pub messages: u64,
    /// Frames parsed or emitted per repetition.
    pub frames: u64,
    /// 1 MB memcpys per repetition.
    pub copies: u64,
}

impl Options {
    /// The full run (a minute or so).
    pub const FULL: Options = Options {
        reps: 5,
        rpcs: 100_000,
        messages: 500,
        frames: 200_000,
        copies: 2_000,
    };
    /// A tiny amount of everything, to check that it all completes.
    pub const QUICK: Options = Options {
        reps: 1,
        rpcs: 50,
        messages: 3,
        frames: 100,
        copies: 3,
    };
}

/// What one measurement of [`single`] runs, for instruction counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Single {
    /// homa 100-byte RPCs, 1 outstanding, 16-slot tables.
    HomaRpc,
    /// homa 100-byte RPCs, 1,024 outstanding, 2,048-slot tables (R2's row).
    HomaRpc1024,
    /// homa 100-byte RPCs, 1 outstanding, 4,096-slot tables (R3's row).
    HomaRpcBigTable,
    /// smoltcp 100-byte UDP echoes, 1 outstanding.
    UdpEcho,
    /// homa 1,000,000-byte requests.
    HomaMb,
    /// smoltcp TCP bulk, 1,000,000-byte messages.
    TcpBulk,
    /// smoltcp 100-byte TCP request-responses over one connection, 1
    /// outstanding.
    TcpRr,
    /// [`HomaRpc`](Single::HomaRpc) over devices that do every checksum.
    HomaRpcOffload,
    /// [`HomaMb`](Single::HomaMb) over devices that do every checksum.
    HomaMbOffload,
}

impl std::str::FromStr for Single {
    type Err = String;
    fn from_str(s: &str) -> Result<Single, String> {
        Single::ALL
            .into_iter()
            .find(|w| w.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Single::ALL.iter().map(|w| w.name()).collect();
                format!("unknown measurement {s:?} ({})", names.join(", "))
            })
    }
}

impl Single {
    /// Every measurement.
    pub const ALL: [Single; 9] = [
        Single::HomaRpc,
        Single::HomaRpc1024,
        Single::HomaRpcBigTable,
        Single::UdpEcho,
        Single::HomaMb,
        Single::TcpBulk,
        Single::TcpRr,
        Single::HomaRpcOffload,
        Single::HomaMbOffload,
    ];

    /// Its name for `--only`.
    pub fn name(self) -> &'static str {
        match self {
            Single::HomaRpc => "homa-rpc",
            Single::HomaRpc1024 => "homa-rpc-1024",
            Single::HomaRpcBigTable => "homa-rpc-big-table",
            Single::UdpEcho => "udp-echo",
            Single::HomaMb => "homa-mb",
            Single::TcpBulk => "tcp-bulk",
            Single::TcpRr => "tcp-rr",
            Single::HomaRpcOffload => "homa-rpc-offload",
            Single::HomaMbOffload => "homa-mb-offload",
        }
    }
}

/// The line `--only` prints for a run of `which`.
pub fn summary(which: Single, m: &Measure) -> String {
    format!(
        "{which:?}: {} ops in {:.4} s CPU: {:.1} k ops/s, {:.2} Gbit/s, {} frames, {} DATA packets",
        m.ops,
        m.secs,
        m.rate() / 1e3,
        m.gbps(),
        m.frames,
        m.data_packets
    )
}

/// The operations and DATA packets of a [`summary`] line.
pub fn parse_summary(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().find(|l| l.contains(" ops in "))?;
    let words: Vec<&str> = line.split_ascii_whitespace().collect();
    let before = |word: &str| -> Option<u64> {
        let i = words.iter().position(|w| w.trim_end_matches(',') == word)?;
        words.get(i.checked_sub(1)?)?.parse().ok()
    };
    Some((before("ops")?, before("DATA")?))
}

/// Runs one measurement once, `count` operations after a short warm-up
/// (the mode for `valgrind --tool=callgrind`).
pub fn single(which: Single, count: u64) -> anyhow::Result<Measure> {
    match which {
        Single::HomaRpc => homa::rpcs(SMALL, 1, 16, 100, count),
        // The warm-up as the full run's: two windows' worth.
        Single::HomaRpc1024 => homa::rpcs(SMALL, 1024, 2048, 2048, count),
        Single::HomaRpcBigTable => homa::rpcs(SMALL, 1, 4096, 100, count),
        Single::UdpEcho => smol::udp_echo(SMALL, 1, 100, count),
        Single::HomaMb => homa::rpcs(LARGE, 1, 16, 2, count),
        Single::TcpBulk => smol::tcp_bulk(LARGE, 2, count),
        Single::TcpRr => smol::tcp_rr(SMALL, 1, 100, count),
        Single::HomaRpcOffload => homa::rpcs_with(Checksums::Device, SMALL, 1, 16, 100, count),
        Single::HomaMbOffload => homa::rpcs_with(Checksums::Device, LARGE, 1, 16, 2, count),
    }
}

/// One row of the table.
pub struct Row {
    /// What is measured.
    pub what: String,
    /// homa-stack's figure.
    pub homa: f64,
    /// smoltcp's (or the reference's) figure, if any.
    pub other: Option<f64>,
    /// The unit of both.
    pub unit: &'static str,
}

/// The whole report.
pub struct Report {
    /// The table.
    pub rows: Vec<Row>,
    /// R1..R6 of the ratios line.
    pub ratios: [f64; 6],
}

impl Report {
    /// The ratios line, printed last.
    pub fn ratios_line(&self) -> String {
        let [r1, r2, r3, r4, r5, r6] = self.ratios;
        format!(
            "ratios: rpc_vs_udp={r1:.3} scale_1024={r2:.3} big_table={r3:.3} mb_vs_tcp={r4:.3} mb_vs_memcpy={r5:.3} csum_vs_smoltcp={r6:.3}"
        )
    }

    /// The table as text.
    pub fn table(&self) -> String {
        let mut s = format!(
            "{:<72} {:>12} {:>12} {:>7}\n",
            "measure (median of repetitions, thread CPU time; ratio > 1: homa faster)",
            "homa-stack",
            "smoltcp",
            "ratio"
        );
        for r in &self.rows {
            let other = r.other.map_or(String::new(), |o| fmt_num(o, r.unit));
            // Rates: homa / smoltcp; times: smoltcp / homa. Above 1, homa
            // is the faster.
            let ratio = r.other.map_or(String::new(), |o| {
                let x = if r.unit == "ns" {
                    o / r.homa
                } else {
                    r.homa / o
                };
                format!("{x:.3}")
            });
            s += &format!(
                "{:<72} {:>12} {:>12} {:>7}\n",
                r.what,
                fmt_num(r.homa, r.unit),
                other,
                ratio
            );
        }
        s
    }
}

fn fmt_num(v: f64, unit: &str) -> String {
    match unit {
        "/s" if v >= 1e6 => format!("{:.3} M/s", v / 1e6),
        "/s" => format!("{:.1} k/s", v / 1e3),
        "Gbit/s" => format!("{v:.2} Gb/s"),
        "ns" => format!("{v:.1} ns"),
        _ => format!("{v:.3}"),
    }
}

fn repeat(reps: usize, mut f: impl FnMut() -> anyhow::Result<f64>) -> anyhow::Result<f64> {
    let mut v = Vec::with_capacity(reps);
    for _ in 0..reps {
        v.push(f()?);
    }
    Ok(median(&v))
}

/// Runs every measurement; `progress` gets a line as each starts.
pub fn run(o: Options, mut progress: impl FnMut(&str)) -> anyhow::Result<Report> {
    let plan = Plan {
        o,
        quick: o.reps == 1 && o.rpcs < 1000,
    };
    let mut rows = Vec::new();
    let (homa_at, udp_at) = plan.round_trips(&mut rows, &mut progress)?;
    let big = plan.big_tables(&mut rows, &mut progress)?;
    let (mb, tcp) = plan.bulk(&mut rows, &mut progress)?;
    progress("memcpy of 1 MB");
    let memcpy = repeat(o.reps, || Ok(frame::time_memcpy(o.copies) * 8.0 / 1e9))?;
    rows.push(Row {
        what: "memcpy of 1,000,000 bytes (the ceiling)".into(),
        homa: memcpy,
        other: None,
        unit: "Gbit/s",
    });
    let (parse_homa, parse_smol) = plan.frames(&mut rows, &mut progress, memcpy)?;
    let ratios = [
        homa_at[0] / udp_at[0],
        homa_at[2] / homa_at[0],
        big / homa_at[0],
        mb / tcp,
        mb / memcpy,
        parse_smol / parse_homa,
    ];
    Ok(Report { rows, ratios })
}

/// How much of each measurement a run does.
struct Plan {
    o: Options,
    /// A check that everything completes, not a measurement.
    quick: bool,
}

impl Plan {
    /// RPCs per repetition with `outstanding` in flight: with many in
    /// flight, a quick run of few RPCs would never fill the window.
    fn count(&self, outstanding: usize) -> u64 {
        if self.quick {
            self.o.rpcs.max(2 * outstanding as u64)
        } else {
            self.o.rpcs
        }
    }

    /// RPCs before the measurement starts.
    fn warm(&self, outstanding: usize) -> u64 {
        (2 * outstanding as u64).max(self.o.rpcs / 50).max(10)
    }

    /// RPC table slots for `outstanding` in flight.
    fn table(&self, outstanding: usize) -> usize {
        (2 * outstanding).max(16)
    }

    /// 100-byte RPCs against UDP echoes at 1, 64 and 1024 outstanding:
    /// the rates of both at each.
    fn round_trips(
        &self,
        rows: &mut Vec<Row>,
        progress: &mut impl FnMut(&str),
    ) -> anyhow::Result<(Vec<f64>, Vec<f64>)> {
        let (mut homa_at, mut udp_at) = (Vec::new(), Vec::new());
        for n in [1usize, 64, 1024] {
            progress(&format!("100-byte RPCs, {n} outstanding"));
            let (warm, count) = (self.warm(n), self.count(n));
            let h = repeat(self.o.reps, || {
                Ok(homa::rpcs(SMALL, n, self.table(n), warm, count)?.rate())
            })?;
            let u = repeat(self.o.reps, || {
                Ok(smol::udp_echo(SMALL, n, warm, count)?.rate())
            })?;
            rows.push(Row {
                what: format!(
                    "100-byte RPC vs UDP echo round trips, {n} outstanding ({}-slot tables)",
                    self.table(n)
                ),
                homa: h,
                other: Some(u),
                unit: "/s",
            });
            homa_at.push(h);
            udp_at.push(u);
        }
        Ok((homa_at, udp_at))
    }

    /// One RPC in flight with 4,096-slot tables: its rate.
    fn big_tables(
        &self,
        rows: &mut Vec<Row>,
        progress: &mut impl FnMut(&str),
    ) -> anyhow::Result<f64> {
        progress("100-byte RPCs, 1 outstanding, 4,096-slot tables");
        // A fifth of the RPCs: this row is the slowest, and its rate is as
        // steady over fewer.
        let count = (self.count(1) / 5).max(10);
        let big = repeat(self.o.reps, || {
            Ok(homa::rpcs(SMALL, 1, 4096, self.warm(1), count)?.rate())
        })?;
        rows.push(Row {
            what: "100-byte RPC, 1 outstanding, 4,096-slot tables".into(),
            homa: big,
            other: None,
            unit: "/s",
        });
        Ok(big)
    }

    /// 1 MB requests against TCP bulk transfer: both goodputs.
    fn bulk(
        &self,
        rows: &mut Vec<Row>,
        progress: &mut impl FnMut(&str),
    ) -> anyhow::Result<(f64, f64)> {
        progress("1,000,000-byte requests vs TCP bulk");
        let messages = self.o.messages;
        let mb = repeat(self.o.reps, || {
            Ok(homa::rpcs(LARGE, 1, 16, 2, messages)?.gbps())
        })?;
        let tcp = repeat(self.o.reps, || {
            Ok(smol::tcp_bulk(LARGE, 2, messages)?.gbps())
        })?;
        rows.push(Row {
            what: "1,000,000-byte request goodput vs TCP bulk goodput".into(),
            homa: mb,
            other: Some(tcp),
            unit: "Gbit/s",
        });
        Ok((mb, tcp))
    }

    /// Parsing and emitting one full frame, and the goodput bound they
    /// set (as a share of `memcpy`): the parse times of Homa and UDP.
    fn frames(
        &self,
        rows: &mut Vec<Row>,
        progress: &mut impl FnMut(&str),
        memcpy: f64,
    ) -> anyhow::Result<(f64, f64)> {
        let (reps, n) = (self.o.reps, self.o.frames);
        progress("per-frame parse and emit");
        let frames = frame::Frames::new()?;
        let parse_homa = repeat(reps, || {
            Ok(frame::time_parse(frame::homa_parse, &frames.homa, n)? * 1e9)
        })?;
        let parse_smol = repeat(reps, || {
            Ok(frame::time_parse(frame::smol_parse, &frames.udp, n)? * 1e9)
        })?;
        rows.push(Row {
            what: "parse + verify one checksummed 1,514-byte frame (Homa DATA vs UDP)".into(),
            homa: parse_homa,
            other: Some(parse_smol),
            unit: "ns",
        });
        let mut emit_with_checksums = 0.0;
        for checksum in [true, false] {
            let h = repeat(reps, || {
                Ok(frame::time_emit(frame::homa_emit, &frames, false, checksum, n) * 1e9)
            })?;
            let s = repeat(reps, || {
                Ok(frame::time_emit(frame::smol_emit, &frames, true, checksum, n) * 1e9)
            })?;
            rows.push(Row {
                what: format!(
                    "emit one 1,514-byte frame, {} checksums",
                    if checksum { "with" } else { "without" }
                ),
                homa: h,
                other: Some(s),
                unit: "ns",
            });
            if checksum {
                emit_with_checksums = h;
            }
        }
        // Each DATA packet of a transfer is emitted once and parsed once,
        // both on this thread: their cost alone bounds the goodput,
        // whatever the protocol work and copies around them cost.
        let bound = frame::HOMA_PAYLOAD as f64 * 8.0 / (emit_with_checksums + parse_homa);
        rows.push(Row {
            what: format!(
                "1 MB goodput bound: DATA emit + parse alone ({:.3} of memcpy)",
                bound / memcpy
            ),
            homa: bound,
            other: None,
            unit: "Gbit/s",
        });
        Ok((parse_homa, parse_smol))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_check_only_their_own_sequence_number() {
        let mut buf = vec![0u8; SMALL];
        fill_payload(42, &mut buf);
        assert!(check_payload(42, &buf));
        assert!(!check_payload(43, &buf));
        buf[SMALL - 1] ^= 1;
        assert!(!check_payload(42, &buf));
    }

    #[test]
    fn the_quick_run_completes_every_measurement() {
        let mut started = Vec::new();
        let report = run(Options::QUICK, |what| started.push(what.to_string()))
            .expect("every measurement completes");
        assert_eq!(started.len(), 7, "{started:?}");
        assert_eq!(report.rows.len(), 10);
        for r in &report.rows {
            assert!(r.homa.is_finite() && r.homa > 0.0, "{}: {}", r.what, r.homa);
        }
        assert!(report.ratios.iter().all(|r| r.is_finite() && *r > 0.0));
        let line = report.ratios_line();
        assert!(line.starts_with("ratios: rpc_vs_udp="), "{line}");
        assert_eq!(line.split(' ').count(), 7, "{line}");
    }

    #[test]
    fn single_measurements_count_what_they_ran() {
        let m = single(Single::HomaRpc, 20).expect("homa RPCs");
        assert_eq!((m.ops, m.bytes), (20, 20 * SMALL as u64));
        // A request and a response DATA packet per RPC at least.
        assert!(m.data_packets >= 20 && m.frames >= 40, "{m:?}");
        let m = single(Single::HomaMb, 1).expect("a 1 MB request");
        assert!(
            m.data_packets as usize >= LARGE / frame::HOMA_PAYLOAD,
            "{m:?}"
        );
        let m = single(Single::UdpEcho, 20).expect("UDP echoes");
        assert_eq!(m.frames, 40);
        let m = single(Single::TcpBulk, 1).expect("TCP bulk");
        assert_eq!(m.bytes, LARGE as u64);
        let m = single(Single::HomaRpcOffload, 20).expect("homa RPCs, checksums offloaded");
        assert_eq!((m.ops, m.bytes), (20, 20 * SMALL as u64));
        let m = single(Single::HomaMbOffload, 1).expect("a 1 MB request, checksums offloaded");
        assert!(
            m.data_packets as usize >= LARGE / frame::HOMA_PAYLOAD,
            "{m:?}"
        );
        let m = single(Single::TcpRr, 20).expect("TCP request-responses");
        assert_eq!((m.ops, m.bytes), (20, 20 * SMALL as u64));
        // A request and a response segment each, the ACKs riding on them
        // (a delayed ACK may add one at the end).
        assert!((40..=41).contains(&m.frames), "{m:?}");
    }

    #[test]
    fn measurements_parse_from_the_names_the_help_gives() {
        assert_eq!("tcp-rr".parse::<Single>(), Ok(Single::TcpRr));
        assert_eq!("homa-mb".parse::<Single>(), Ok(Single::HomaMb));
        let e = "tcp".parse::<Single>().expect_err("no such measurement");
        assert!(e.contains("homa-rpc-big-table, udp-echo"), "{e}");
    }

    #[test]
    fn a_summary_gives_back_its_counts() {
        let m = Measure {
            ops: 3,
            bytes: 3_000_000,
            secs: 0.5,
            frames: 4_300,
            data_packets: 2_112,
        };
        let line = summary(Single::HomaMb, &m);
        assert_eq!(parse_summary(&line), Some((3, 2_112)), "{line}");
        assert_eq!(parse_summary("nothing here"), None);
    }
}
