//! One phase of the testbed: a protocol's server and clients run for a
//! set time at a set pace, their reports merged, the bottleneck's and the
//! CPU's counters taken around it, and the verdict on what set the pace.

use anyhow::Context as _;
use std::net::SocketAddr;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::bottleneck::{read_bottleneck, tap_queue_drops, Bottleneck};
use super::cpu::{children_cpu, cores, machine_jiffies};
use super::namespaces::{homa_ip, kernel_ip, prefix, Testbed, HOMA_PORT, TCP_PORT};
use crate::perf::cli::TestbedOpts;
use crate::perf::netcfg::mac_for;
use crate::perf::report::{drops_text, rtt_table, ClientReport, ServerReport};
use crate::perf::sys;

/// What one protocol's run found.
#[derive(Debug, Clone)]
pub(super) struct Phase {
    pub(super) protocol: String,
    pub(super) clients: ClientReport,
    pub(super) server: ServerReport,
    pub(super) bottleneck: Bottleneck,
    pub(super) seconds: f64,
    pub(super) machine_busy: f64,
    /// homa-perf processes plus network softirq, as a fraction of all cores.
    pub(super) experiment_cpu: f64,
    /// Frames dropped at the hosts' TAP queues (a homa-perf process fell
    /// behind): the server's, and the clients' together.
    pub(super) tap_drops: (u64, u64),
    pub(super) offered_mbps: f64,
}

impl Phase {
    pub(super) fn carried_mbps(&self) -> f64 {
        self.bottleneck.bytes as f64 * 8.0 / self.seconds / 1e6
    }

    /// Whether the network, not the CPU, set the pace, and why: the
    /// bottleneck must have carried the offered load while it was offered
    /// (it carries headers too, so at least the offered message bytes),
    /// every RPC must have finished, and the experiment's own CPU (its
    /// processes and the kernel's network softirq) must have had headroom.
    pub(super) fn verdict(&self, o: &TestbedOpts, cores: f64) -> (bool, String) {
        let kept_up = self.carried_mbps() >= 0.97 * self.offered_mbps
            && self.clients.unfinished == 0
            && self.clients.failed == 0;
        let detail = format!(
            "bottleneck carried {:.1} Mbit/s for {:.1} Mbit/s of requests offered ({:.0}% busy, \
             {} throttling events, {} drops); {} frames dropped at the hosts' TAP queues (server {}, \
             clients {}: a homa-perf process fell behind); homa-perf processes + network softirq \
             used {:.0}% of {} cores, the whole machine (other users included) {:.0}%",
            self.carried_mbps(),
            self.offered_mbps,
            self.carried_mbps() / f64::from(o.bottleneck_mbps) * 100.0,
            self.bottleneck.overlimits,
            self.bottleneck.drops,
            self.tap_drops.0 + self.tap_drops.1,
            self.tap_drops.0,
            self.tap_drops.1,
            self.experiment_cpu * 100.0,
            cores,
            self.machine_busy * 100.0,
        );
        let hosts_behind = self.tap_drops.0 + self.tap_drops.1 > 0;
        let (ok, what) = match (kept_up, cpu_saturated(self.experiment_cpu)) {
            (true, false) if hosts_behind => (
                false,
                "HOSTS BEHIND: the offered load was carried, but a homa-perf process fell behind \
                 and lost frames at its TAP queue",
            ),
            (true, false) => (
                true,
                "network-bound: the bottleneck, not the CPU, limits throughput",
            ),
            (true, true) => (
                false,
                "CPU-BOUND: the offered load was carried but the CPU had no headroom",
            ),
            (false, true) => (
                false,
                "CPU-BOUND: the offered load was not carried in time and the CPU had no headroom",
            ),
            (false, false) => (
                false,
                "OVERLOADED: the offered load was not carried in time, with CPU to spare",
            ),
        };
        (ok, format!("{what} ({detail})"))
    }

    pub(super) fn to_json(&self, o: &TestbedOpts, cores: f64) -> Value {
        let (ok, verdict) = self.verdict(o, cores);
        json!({
            "protocol": self.protocol,
            "clients": self.clients.to_json(),
            "server": self.server.to_json(),
            "offered_mbps": self.offered_mbps,
            "goodput_mbps": self.clients.goodput_mbps(),
            "bottleneck": {
                "carried_mbps": self.carried_mbps(),
                "bytes": self.bottleneck.bytes,
                "packets": self.bottleneck.packets,
                "drops": self.bottleneck.drops,
                "overlimits": self.bottleneck.overlimits,
                "band_bytes": self.bottleneck.band_bytes,
                "band_drops": self.bottleneck.band_drops,
            },
            "tap_queue_drops": {
                "server": self.tap_drops.0,
                "clients": self.tap_drops.1,
            },
            "machine_cpu_busy": self.machine_busy,
            "experiment_cpu": self.experiment_cpu,
            "network_bound": ok,
            "verdict": verdict,
        })
    }
}

pub(super) fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

pub(super) fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// `--neighbor` of homa-perf: the hosts' Homa addresses and their MACs.
fn neighbors(o: &TestbedOpts, hosts: &mut dyn Iterator<Item = usize>) -> String {
    hosts
        .map(|h| format!("{}={}", homa_ip(h, o.ipv6), mac_for(homa_ip(h, o.ipv6))))
        .collect::<Vec<_>>()
        .join(",")
}

/// homa-perf's device and Homa options for host `h` of the testbed.
fn homa_device_args(o: &TestbedOpts, h: usize) -> Vec<String> {
    let v6 = o.ipv6;
    // Over AF_XDP the endpoint sits on the host's veth (a bridge port, so
    // it takes the endpoint's own MAC) instead of a TAP bridged to it.
    let mut a = if o.xdp {
        strings(&[
            "--xdp",
            "eth0",
            "--mac",
            &mac_for(homa_ip(h, v6)).to_string(),
        ])
    } else {
        strings(&["--tap", "tap0", "--bridge", "br0"])
    };
    a.extend(strings(&[
        "--ip",
        &format!("{}/{}", homa_ip(h, v6), prefix(v6)),
        "--link-mbps",
        &o.bottleneck_mbps.to_string(),
        "--nic-backlog-us",
        &o.nic_backlog_us.to_string(),
        "--unsched-bytes",
        &o.unsched_bytes().to_string(),
        "--max-incoming",
        &o.max_incoming().to_string(),
        "--fifo-grant-bytes",
        &o.fifo_grant_bytes().to_string(),
        "--resend-ticks",
        &o.resend_ticks.to_string(),
        "--timeout-ticks",
        &o.timeout_ticks.to_string(),
    ]));
    a
}

/// The command line of the testbed's server for the protocol.
fn server_args(o: &TestbedOpts, homa: bool) -> Vec<String> {
    // The testbed prints its own phases; the processes' progress lines
    // would interleave.
    let mut sargs = strings(&["server", "--json", "--quiet"]);
    if homa {
        sargs.extend(homa_device_args(o, 0));
        sargs.extend(strings(&[
            "--neighbor",
            &neighbors(o, &mut (1..=o.clients)),
            "--max-rpcs",
            "4096",
        ]));
    } else {
        sargs.extend(strings(&[
            "--tcp",
            "--listen",
            &SocketAddr::new(kernel_ip(0, o.ipv6), TCP_PORT).to_string(),
        ]));
    }
    sargs
}

/// How one phase loads the bottleneck.
pub(super) struct Load {
    /// Client arguments for the pacing (`--rate R` or `--outstanding N`).
    pub(super) pace: Vec<String>,
    /// Seconds of issuing.
    pub(super) duration_s: f64,
    /// Seconds allowed after that.
    pub(super) drain_s: f64,
    /// Offered message bytes, Mbit/s (the bottleneck rate for a probe).
    pub(super) offered_mbps: f64,
}

/// Runs one protocol over the testbed: its server, then its clients
/// paced by `load`, with the bottleneck's, the TAP queues' and the CPU's
/// counters read around the issuing period.
pub(super) fn run_phase(
    tb: &mut Testbed,
    o: &TestbedOpts,
    protocol: &str,
    load: &Load,
) -> anyhow::Result<Phase> {
    let homa = protocol == "homa";
    let (si, sout, sready) = tb.spawn("s0", &server_args(o, homa))?;
    if sready.recv_timeout(Duration::from_secs(10)).is_err() {
        anyhow::bail!("the {protocol} server did not start within 10 s");
    }
    let start_ms = unix_ms() + 1500;
    let mut clients = Vec::new();
    for c in 1..=o.clients {
        let args = client_args(o, c, homa, load, start_ms);
        let (i, out, _) = tb.spawn(&format!("c{c}"), &args)?;
        clients.push((i, out));
    }
    let counters = measure(tb, o, load, start_ms)?;
    if sys::stop_requested() {
        anyhow::bail!("stopped by a signal");
    }
    let limit = Instant::now() + Duration::from_secs_f64(load.drain_s + 20.0);
    let mut merged: Option<ClientReport> = None;
    for (i, out) in clients {
        tb.wait_child(i, limit)?;
        let rep = ClientReport::from_json(&report(&out, protocol, "client")?)?;
        match &mut merged {
            None => merged = Some(rep),
            Some(m) => m.merge(&rep)?,
        }
    }
    sys::kill(tb.children[si].id(), libc::SIGTERM);
    tb.wait_child(si, Instant::now() + Duration::from_secs(10))?;
    let server = ServerReport::from_json(&report(&sout, protocol, "server")?)?;
    Ok(Phase {
        protocol: protocol.to_string(),
        clients: merged.context("no clients")?,
        server,
        bottleneck: counters.bottleneck,
        seconds: counters.seconds,
        machine_busy: counters.machine_busy,
        tap_drops: counters.tap_drops,
        experiment_cpu: counters.experiment_cpu,
        offered_mbps: load.offered_mbps,
    })
}

/// The command line of client `c` for the protocol, paced by `load` and
/// starting at the Unix time `start_ms`.
fn client_args(o: &TestbedOpts, c: usize, homa: bool, load: &Load, start_ms: u64) -> Vec<String> {
    let target = if homa {
        SocketAddr::new(homa_ip(0, o.ipv6), HOMA_PORT)
    } else {
        SocketAddr::new(kernel_ip(0, o.ipv6), TCP_PORT)
    };
    let mut a = strings(&[
        "client",
        "--json",
        "--quiet",
        "--server",
        &target.to_string(),
        "--workload",
        &o.workload,
        "--duration",
        &load.duration_s.to_string(),
        "--drain",
        &load.drain_s.to_string(),
        "--reply-len",
        &o.reply_len.to_string(),
        "--seed",
        &(o.seed * 1000 + c as u64).to_string(),
        "--start-at-ms",
        &start_ms.to_string(),
    ]);
    a.extend(load.pace.iter().cloned());
    if homa {
        a.extend(homa_device_args(o, c));
        a.extend(strings(&[
            "--neighbor",
            &neighbors(o, &mut std::iter::once(0)),
        ]));
    } else {
        a.push("--tcp".into());
    }
    a
}

/// The JSON report a process printed on `out`.
fn report(out: &mpsc::Receiver<String>, protocol: &str, who: &str) -> anyhow::Result<Value> {
    let text = out.recv_timeout(Duration::from_secs(5)).unwrap_or_default();
    serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{protocol} {who} printed no report ({e}): {text:?}"))
}

/// What the counters around a phase's issuing period say.
struct Counters {
    bottleneck: Bottleneck,
    seconds: f64,
    machine_busy: f64,
    tap_drops: (u64, u64),
    experiment_cpu: f64,
}

/// Waits for the clients' start at `start_ms`, then reads the bottleneck's,
/// the TAP queues' and the CPU's counters before and after the issuing
/// period.
fn measure(tb: &Testbed, o: &TestbedOpts, load: &Load, start_ms: u64) -> anyhow::Result<Counters> {
    let sw = tb.ns("sw");
    let wait_start = start_ms.saturating_sub(unix_ms());
    thread::sleep(Duration::from_millis(wait_start));
    let hosts: Vec<String> = std::iter::once("s0".to_string())
        .chain((1..=o.clients).map(|c| format!("c{c}")))
        .map(|h| tb.ns(&h))
        .collect();
    // A Homa process creates its TAP when it starts (the TCP phases have
    // none), so a TAP not there has dropped nothing.
    let taps = |hosts: &[String]| -> Vec<u64> {
        hosts
            .iter()
            .map(|ns| tap_queue_drops(ns).unwrap_or(0))
            .collect()
    };
    let taps0 = taps(&hosts);
    let before = read_bottleneck(&sw, o.bands)?;
    let cpu0 = machine_jiffies();
    let procs0 = children_cpu(tb);
    let t0 = Instant::now();
    let issue_end = t0 + Duration::from_secs_f64(load.duration_s);
    while Instant::now() < issue_end && !sys::stop_requested() {
        thread::sleep(Duration::from_millis(50));
    }
    let after = read_bottleneck(&sw, o.bands)?;
    // Read while the hosts' processes (and so their TAPs) still exist.
    let taps1 = taps(&hosts);
    let tap_drops: Vec<u64> = taps1
        .iter()
        .zip(&taps0)
        .map(|(a, b)| a.saturating_sub(*b))
        .collect();
    let cpu1 = machine_jiffies();
    let procs1 = children_cpu(tb);
    let seconds = t0.elapsed().as_secs_f64();
    let d = |a: u64, b: u64| a.saturating_sub(b);
    let total = d(cpu1.total, cpu0.total).max(1) as f64;
    let softirq = d(cpu1.softirq, cpu0.softirq) as f64 / total;
    Ok(Counters {
        bottleneck: after.since(&before),
        seconds,
        machine_busy: d(cpu1.busy, cpu0.busy) as f64 / total,
        tap_drops: (tap_drops[0], tap_drops[1..].iter().sum()),
        experiment_cpu: (procs1 - procs0) / (seconds * cores()) + softirq,
    })
}

/// The capacity probe's finding: can this protocol, on this CPU, fill the
/// bottleneck? If it can, the bottleneck is what limits throughput.
/// Whether the experiment's CPU share (its processes and the network
/// softirq, a fraction of all cores) leaves no headroom.
fn cpu_saturated(experiment_cpu: f64) -> bool {
    experiment_cpu >= 0.9
}

/// What limited a capacity probe, from both figures: how full the
/// bottleneck was (`util`, a fraction of its rate) and how busy the CPU.
fn probe_limit(util: f64, experiment_cpu: f64) -> &'static str {
    match (util >= 0.9, cpu_saturated(experiment_cpu)) {
        (true, false) => "the bottleneck, not the CPU, limits throughput",
        (true, true) => {
            "the bottleneck was full and the CPU had no headroom: either may limit throughput"
        }
        (false, true) => "CPU-BOUND: it cannot fill the bottleneck on this machine",
        (false, false) => {
            "neither the bottleneck nor the CPU was saturated: the closed loop's window limits it"
        }
    }
}

pub(super) fn probe_text(p: &Phase, o: &TestbedOpts) -> String {
    let util = p.carried_mbps() / f64::from(o.bottleneck_mbps);
    let verdict = probe_limit(util, p.experiment_cpu);
    format!(
        "capacity probe ({} closed loop, 8 RPCs per client, {:.0} s): bottleneck carried {:.1} Mbit/s \
         ({:.0}% of {}), homa-perf + softirq CPU {:.0}% of {} cores: {verdict}",
        p.protocol,
        o.probe_s,
        p.carried_mbps(),
        util * 100.0,
        o.bottleneck_mbps,
        p.experiment_cpu * 100.0,
        cores()
    )
}

pub(super) fn print_phase(p: &Phase, o: &TestbedOpts) -> anyhow::Result<()> {
    crate::outln!("\n== {} ==", p.protocol)?;
    crate::cli::write_stdout(&rtt_table(&p.clients.rtt))?;
    let c = &p.clients;
    crate::outln!(
        "issued {} completed {} failed {} corrupt {} unfinished {}; server answered {} ({} corrupt), refused {}",
        c.issued, c.completed, c.failed, c.corrupt, c.unfinished, p.server.requests, p.server.corrupt,
        p.server.failed
    )?;
    crate::outln!(
        "bottleneck carried {:.1} Mbit/s ({:.0}% of {}), bytes per band (highest first) {:?}, drops {:?}",
        p.carried_mbps(),
        p.carried_mbps() / f64::from(o.bottleneck_mbps) * 100.0,
        o.bottleneck_mbps,
        p.bottleneck.band_bytes,
        p.bottleneck.band_drops
    )?;
    crate::outln!(
        "CPU seconds: clients {:.1} user + {:.1} system, server {:.1} user + {:.1} system",
        c.cpu_user_s,
        c.cpu_sys_s,
        p.server.cpu_user_s,
        p.server.cpu_sys_s
    )?;
    for (who, extra) in [("clients", &c.extra), ("server", &p.server.extra)] {
        let st = &extra["stack"];
        if st.is_object() {
            let drops = match drops_text(&st["drop_reasons"]) {
                t if t.is_empty() => "drops 0".to_string(),
                t => t,
            };
            crate::outln!(
                "homa-stack {who}: tx frames {} rx frames {} retransmissions {} resends asked {} \
                 timeouts {} {drops}",
                st["tx_frames"],
                st["rx_frames"],
                st["retransmissions"],
                st["resends_requested"],
                st["timeouts"],
            )?;
        }
    }
    crate::outln!("verdict: {}", p.verdict(o, cores()).1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A verdict follows both figures: a full bottleneck with a CPU at 96%
    /// is not "the bottleneck, not the CPU".
    #[test]
    fn the_probe_verdict_names_what_was_saturated() {
        assert_eq!(
            probe_limit(0.95, 0.5),
            "the bottleneck, not the CPU, limits throughput"
        );
        let both = probe_limit(0.95, 0.96);
        assert!(both.contains("CPU had no headroom"), "{both}");
        assert!(!both.contains("not the CPU"), "{both}");
        assert!(probe_limit(0.5, 0.96).starts_with("CPU-BOUND"));
        assert!(probe_limit(0.5, 0.3).starts_with("neither"));
    }
}
