//! A Homa client and server over in-memory devices, no root needed.
//!
//! By default sends one echo RPC of each boundary size from 1 byte to
//! 1,000,000 bytes, checks every reply byte for byte, and prints each RPC's
//! size and round-trip time in virtual time (10 Gbit/s link, 1 us one way).
//!
//! Soak mode (`--rpcs N`) runs N RPCs of mixed sizes, `--concurrency` at a
//! time, through fault injection (`--loss`, `--dup`, `--reorder`,
//! `--corrupt`, as fractions; checksums are on whenever `--corrupt` is set),
//! reproducibly for `--seed`, and ends with the line
//! `sent N completed N verified N failed N leaked N`.

use homa_examples::args::Args;
use homa_examples::duo::{self, Duo, Storage, CLIENT_IP, CLIENT_MAC, SERVER_IP, SERVER_MAC};
use homa_examples::{fill_pattern, Rng};
use homa_phy::fault::{FaultConfig, PPM};
use homa_phy::{Duration, Instant};
use homa_stack::{Event, RpcHandle};
use std::collections::HashMap;
use std::process::ExitCode;

const SIZES: [usize; 10] = [
    1, 100, 1423, 1424, 1425, 39_999, 40_000, 40_001, 100_000, 1_000_000,
];
const PORT: u16 = 500;

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

/// One RPC the client has in flight.
struct Pending {
    seed: u64,
    len: usize,
    started: Instant,
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
    let seed: u64 = args.get("seed", 1)?;
    let mut faults = FaultConfig::new();
    faults.drop_ppm = ppm(&args, "loss")?;
    faults.duplicate_ppm = ppm(&args, "dup")?;
    faults.reorder_ppm = ppm(&args, "reorder")?;
    faults.corrupt_ppm = ppm(&args, "corrupt")?;
    faults.reorder_timeout = Duration::from_micros(50);
    let checksums = faults.corrupt_ppm > 0;
    let soak = args.get_str("rpcs").is_some();
    let total: usize = args.get("rpcs", SIZES.len())?;
    let concurrency: usize = if soak { args.get("concurrency", 8)? } else { 1 };
    let max_size: usize = args.get("max-size", 1_000_000)?;
    if concurrency == 0 || max_size == 0 || max_size > 1_000_000 {
        return Err("--concurrency must be > 0 and --max-size in 1..=1000000".into());
    }
    let pcap: Option<Box<dyn std::io::Write>> = match args.get_str("pcap") {
        Some(path) => {
            let f = std::fs::File::create(path).map_err(|e| format!("{path}: {e}"))?;
            Some(Box::new(std::io::BufWriter::new(f)))
        }
        None => None,
    };

    let pool = (concurrency * 2 + 2) * 1_100_000;
    let mut cmem = Storage::new(concurrency + 8, pool);
    let mut smem = Storage::new(concurrency + 8, pool);
    let client = cmem.endpoint(duo::config(CLIENT_IP, CLIENT_MAC, seed, checksums));
    let server = smem.endpoint(duo::config(SERVER_IP, SERVER_MAC, seed + 1, checksums));
    let mut d = Duo::new(client, server, faults, seed, pcap);
    let csock = d.client.socket().map_err(|e| e.to_string())?;
    let ssock = d.server.bind(PORT).map_err(|e| e.to_string())?;

    let mut rng = Rng::new(seed);
    let mut pending: HashMap<RpcHandle, Pending> = HashMap::new();
    let (mut sent, mut completed, mut verified, mut failed) = (0usize, 0usize, 0usize, 0usize);
    let mut buf = Vec::new();
    let deadline = d.now + Duration::from_secs(3600);
    while completed + failed < total && d.now < deadline {
        while sent < total && pending.len() < concurrency {
            let len = if soak {
                soak_size(&mut rng, max_size)
            } else {
                SIZES[sent]
            };
            let seed = rng.next_u64();
            buf.resize(len, 0);
            fill_pattern(seed, &mut buf);
            match d.client.send_request(csock, SERVER_IP, PORT, &buf) {
                Ok(h) => {
                    pending.insert(
                        h,
                        Pending {
                            seed,
                            len,
                            started: d.now,
                        },
                    );
                    sent += 1;
                }
                Err(_) => break, // pool or table full: retry once RPCs finish
            }
        }
        let moved = d.step();
        while let Some(Event::Request { rpc, len, .. }) = d.server.recv(ssock) {
            buf.resize(len, 0);
            if let Some(m) = d.server.message(rpc) {
                m.copy_to(&mut buf);
            }
            if d.server.reply(rpc, &buf).is_err() {
                let _ = d.server.abort(rpc);
            }
        }
        while let Some(ev) = d.client.recv(csock) {
            match ev {
                Event::Response { rpc, len } => {
                    let p = pending.remove(&rpc).ok_or("response for an unknown RPC")?;
                    completed += 1;
                    buf.resize(p.len, 0);
                    fill_pattern(p.seed, &mut buf);
                    let ok =
                        len == p.len && d.client.message(rpc).is_some_and(|m| m.eq_bytes(&buf));
                    if ok {
                        verified += 1;
                    } else {
                        eprintln!("rpc {} of {} bytes: response differs", rpc.id(), p.len);
                    }
                    if !soak {
                        let rtt = d.now - p.started;
                        println!(
                            "{:>9} bytes  rtt {:>9.1} us  {}",
                            p.len,
                            rtt.total_nanos() as f64 / 1e3,
                            if ok { "ok" } else { "MISMATCH" }
                        );
                    }
                    let _ = d.client.release(rpc);
                }
                Event::Failed { rpc, error } => {
                    let p = pending.remove(&rpc).ok_or("failure of an unknown RPC")?;
                    eprintln!("rpc {} of {} bytes failed: {error}", rpc.id(), p.len);
                    failed += 1;
                    let _ = d.client.release(rpc);
                }
                Event::Request { .. } => {}
            }
        }
        if !moved {
            d.idle();
        }
    }
    d.drain(Duration::from_secs(1));
    d.flush();
    let leaked = d.leaked();
    if soak {
        let (c, s) = (d.client.stats(), d.server.stats());
        println!(
            "virtual time {:.3} s, retransmissions {}, resends {}, drops client {} server {}, faults client {:?} server {:?}",
            (d.now - Instant::ZERO).total_micros() as f64 / 1e6,
            c.retransmissions + s.retransmissions,
            c.resends_requested + s.resends_requested,
            c.drops.total(),
            s.drops.total(),
            d.client_dev.get_ref().stats().rx,
            d.server_dev.stats().rx,
        );
    }
    println!(
        "sent {sent} completed {completed} verified {verified} failed {failed} leaked {leaked}"
    );
    Ok(if verified == total && leaked == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Mixed sizes: mostly short, some medium, a few up to `max`.
fn soak_size(rng: &mut Rng, max: usize) -> usize {
    let r = rng.next_f64();
    let hi = if r < 0.6 {
        2_000
    } else if r < 0.9 {
        100_000
    } else {
        max
    };
    rng.range(1, hi.min(max) as u64) as usize
}
