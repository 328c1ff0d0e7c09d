//! `homa-perf testbed`: the Linux testbed of docs/benchmarks.md section 2, in
//! network namespaces this program makes and removes.
//!
//! Shape (all addresses private, 10.77.0.0/24, nothing in the caller's
//! namespace):
//!
//! ```text
//!   hpPID-c1 .. hpPID-cN (clients)          hpPID-s0 (server)
//!   [tap0]--br0--eth0                       eth0--br0--[tap0]
//!        (10.77.0.1x on br0: kernel TCP)         |
//!                  \                             | <- bottleneck: htb at R,
//!                   p1 .. pN --- br0 --- p0 -----+    8 strict-priority bands
//!                           hpPID-sw (switch)         chosen by IP TOS
//! ```
//!
//! In each host, homa-stack runs on `tap0` (10.77.0.10x) bridged with the
//! veth, and kernel TCP uses the bridge's own address (10.77.0.1x), so both
//! share the path. The switch's egress toward the server is the only rate
//! limit. Homa runs first, then TCP, with the same seeds and so the same
//! arrivals; each is a set of child processes of this program
//! (`ip netns exec NS homa-perf client|server ... --json`) whose reports
//! are merged here.
//!
//! One concern per file: `namespaces.rs` (addresses, namespaces, child
//! processes, clean-up), `bottleneck.rs` (the shaped switch port),
//! `cpu.rs` (CPU accounting), `phases.rs` (one protocol's run, its verdict
//! and its printing); this file runs the whole comparison.

mod bottleneck;
mod cpu;
mod namespaces;
mod phases;

use std::time::{Duration, Instant};

use serde_json::json;

use super::cli::{Only, TestbedOpts, DEFAULT_BOTTLENECK_MBPS};
use super::sys;
use super::workload::SizeDist;
use cpu::cores;
pub use namespaces::cleanup_leftovers;
use namespaces::Testbed;
use phases::{print_phase, probe_text, run_phase, strings, Load, Phase};

/// Builds the testbed, runs Homa then TCP, prints the comparison, and
/// removes everything. Needs root. Returns whether every RPC of every
/// phase (capacity probes included) succeeded.
pub fn run_testbed(o: &TestbedOpts) -> anyhow::Result<bool> {
    preflight()?;
    let dist = SizeDist::from_spec(&o.workload)?;
    let rate_bytes = o.load * f64::from(o.bottleneck_mbps) * 1e6 / 8.0;
    let total_rate = rate_bytes / dist.mean();
    let per_client = total_rate / o.clients as f64;
    let protocols = match o.only {
        Some(Only::Homa) => vec!["homa"],
        Some(Only::Tcp) => vec!["tcp"],
        None => vec!["homa", "tcp"],
    };
    let budget = Instant::now()
        + Duration::from_secs_f64(
            (o.duration_s + o.drain_s + o.probe_s + 60.0) * protocols.len() as f64,
        );
    let header = format!(
        "homa-perf testbed: {} clients -> 1 server (incast), workload {} (cp_node table{}; short = <= {} B), \
         Poisson open loop at {:.0}% of a {} Mbit/s bottleneck = {:.1} Mbit/s of requests ({:.1} RPC/s in all), \
         {}-byte responses, {} strict-priority bands by {}, {} s per protocol",
        o.clients,
        dist.name(),
        if dist.max() == 1_000_000 { ", sizes capped at 1,000,000 B" } else { "" },
        dist.short_max(),
        o.load * 100.0,
        o.bottleneck_mbps,
        rate_bytes * 8.0 / 1e6,
        total_rate,
        o.reply_len,
        o.bands,
        if o.ipv6 {
            "IPv6 traffic class (over IPv6)"
        } else {
            "IP TOS"
        },
        o.duration_s
    ) + if o.xdp { ", Homa over AF_XDP" } else { "" };
    if !o.json {
        crate::outln!("{header}")?;
        if o.bottleneck_mbps == DEFAULT_BOTTLENECK_MBPS {
            crate::outln!(
                "(the default bottleneck is {DEFAULT_BOTTLENECK_MBPS} Mbit/s, not 1 Gbit/s: on a 2-core machine \
                 homa-stack over TAP cannot carry 80% of 1 Gbit/s, every frame costing syscalls and three \
                 bridge hops; --bottleneck-mbps 1000 runs it anyway, and the capacity probes below say \
                 which resource limits)"
            )?;
        }
        crate::outln!(
            "Homa settings scaled to the bottleneck: unscheduled {} B, max incoming {} B, FIFO grants {} B, \
             RESEND after {} ms, timeout {} ms",
            o.unsched_bytes(), o.max_incoming(), o.fifo_grant_bytes(), o.resend_ticks, o.timeout_ticks
        )?;
    }
    let (probes, phases) = run_protocols(o, &protocols, per_client, budget)?;
    let bad = failures(&probes, &phases);
    for b in &bad {
        eprintln!("homa-perf: RPCs failed in the {b}");
    }
    report(o, &dist, &header, &probes, &phases)?;
    Ok(bad.is_empty())
}

/// Checks what the testbed needs (root, TAP) and removes what an earlier
/// run left.
fn preflight() -> anyhow::Result<()> {
    if !sys::is_root() {
        anyhow::bail!("the testbed needs root (network namespaces, TAP, tc)");
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        anyhow::bail!("/dev/net/tun does not exist (modprobe tun)");
    }
    sys::catch_stop_signals();
    let removed = cleanup_leftovers();
    if removed > 0 {
        eprintln!("homa-perf: removed {removed} namespaces left by earlier runs");
    }
    Ok(())
}

/// Builds the testbed and runs each protocol's capacity probe (when asked)
/// and measured phase; the testbed is removed when this returns.
fn run_protocols(
    o: &TestbedOpts,
    protocols: &[&str],
    per_client: f64,
    budget: Instant,
) -> anyhow::Result<(Vec<Phase>, Vec<Phase>)> {
    let mut tb = Testbed {
        tag: format!("hp{}", std::process::id()),
        made: Vec::new(),
        children: Vec::new(),
    };
    tb.build(o)?;
    let measured = Load {
        pace: strings(&["--rate", &per_client.to_string()]),
        duration_s: o.duration_s,
        drain_s: o.drain_s,
        offered_mbps: o.load * f64::from(o.bottleneck_mbps),
    };
    let probe = Load {
        pace: strings(&["--outstanding", "8"]),
        duration_s: o.probe_s,
        drain_s: 0.5,
        offered_mbps: f64::from(o.bottleneck_mbps),
    };
    let mut phases = Vec::new();
    let mut probes = Vec::new();
    for p in protocols {
        if Instant::now() > budget || sys::stop_requested() {
            anyhow::bail!("time budget exhausted or stopped");
        }
        if o.probe_s > 0.0 {
            eprintln!(
                "homa-perf: probing {p}'s capacity, closed loop, {} s ...",
                o.probe_s
            );
            let phase = run_phase(&mut tb, o, p, &probe)?;
            if !o.json {
                crate::outln!("{}", probe_text(&phase, o))?;
            }
            probes.push(phase);
        }
        eprintln!("homa-perf: running {p} for {} s ...", o.duration_s);
        let phase = run_phase(&mut tb, o, p, &measured)?;
        if !o.json {
            print_phase(&phase, o)?;
        }
        phases.push(phase);
    }
    drop(tb);
    Ok((probes, phases))
}

/// One line per probe or run in which RPCs failed.
fn failures(probes: &[Phase], phases: &[Phase]) -> Vec<String> {
    probes
        .iter()
        .map(|p| ("probe", p))
        .chain(phases.iter().map(|p| ("run", p)))
        .filter_map(|(what, p)| {
            let (c, s) = (&p.clients, &p.server);
            // A probe is cut off at its end by design: its unfinished RPCs
            // are not failures; a run's are (they were offered and not
            // answered within the drain time).
            let unfinished = if what == "run" { c.unfinished } else { 0 };
            let n = c.failed + c.corrupt + unfinished + s.failed + s.corrupt;
            (n > 0).then(|| {
                format!(
                    "{} {what}: {} failed, {} corrupt, {} unfinished, server refused {} ({} corrupt)",
                    p.protocol, c.failed, c.corrupt, c.unfinished, s.failed, s.corrupt
                )
            })
        })
        .collect()
}

/// The comparison, as JSON or as a table.
fn report(
    o: &TestbedOpts,
    dist: &SizeDist,
    header: &str,
    probes: &[Phase],
    phases: &[Phase],
) -> anyhow::Result<()> {
    let short = |p: &Phase| p.clients.rtt.short().percentile(0.99) as f64 / 1e3;
    let homa = phases.iter().find(|p| p.protocol == "homa");
    let tcp = phases.iter().find(|p| p.protocol == "tcp");
    let ratio = match (homa, tcp) {
        (Some(h), Some(t)) if short(h) > 0.0 => Some(short(t) / short(h)),
        _ => None,
    };
    if o.json {
        let v = json!({
            "testbed": header,
            "phases": phases.iter().map(|p| p.to_json(o, cores())).collect::<Vec<_>>(),
            "short_max_bytes": dist.short_max(),
            "short_p99_us": {
                "homa": homa.map(short),
                "tcp": tcp.map(short),
            },
            "tcp_over_homa": ratio,
            "capacity_probes": probes.iter().map(|p| json!({
                "protocol": p.protocol,
                "carried_mbps": p.carried_mbps(),
                "experiment_cpu": p.experiment_cpu,
                "verdict": probe_text(p, o),
            })).collect::<Vec<_>>(),
        });
        crate::outln!("{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(());
    }
    crate::outln!()?;
    crate::outln!(
        "{:>8} {:>12} {:>12} {:>12} {:>12} {:>11} {:>10} {:>8} {:>10}",
        "protocol",
        "short P50 us",
        "short P99 us",
        "all P99 us",
        "goodput Mb/s",
        "bottleneck",
        "completed",
        "failed",
        "unfinished"
    )?;
    for p in phases {
        let s = p.clients.rtt.short();
        crate::outln!(
            "{:>8} {:>12.1} {:>12.1} {:>12.1} {:>12.1} {:>10.0}% {:>10} {:>8} {:>10}",
            p.protocol,
            s.percentile(0.5) as f64 / 1e3,
            s.percentile(0.99) as f64 / 1e3,
            p.clients.rtt.all().percentile(0.99) as f64 / 1e3,
            p.clients.goodput_mbps(),
            p.carried_mbps() / f64::from(o.bottleneck_mbps) * 100.0,
            p.clients.completed,
            p.clients.failed + p.clients.corrupt,
            p.clients.unfinished
        )?;
    }
    match (homa, tcp, ratio) {
        (Some(h), Some(t), Some(r)) => crate::outln!(
            "short-message (<= {} B) P99: homa {:.1} us, tcp {:.1} us, tcp/homa = {:.1}x",
            dist.short_max(),
            short(h),
            short(t),
            r
        )?,
        _ => crate::outln!("short-message P99: only one protocol ran, no ratio")?,
    }
    Ok(())
}
