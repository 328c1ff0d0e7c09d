//! `homa-perf testbed`: the Linux testbed of benchmarks.md section 2, in
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

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::cli::{TestbedOpts, DEFAULT_BOTTLENECK_MBPS};
use super::netcfg::{mac_for, output, run};
use super::report::{drops_text, rtt_table, ClientReport, ServerReport};
use super::sys;
use super::workload::SizeDist;

const SUBNET: [u8; 3] = [10, 77, 0];
const HOMA_PORT: u16 = 500;
const TCP_PORT: u16 = 5000;

fn kernel_ip(host: usize) -> String {
    format!("{}.{}.{}.{}", SUBNET[0], SUBNET[1], SUBNET[2], 10 + host)
}

fn homa_ip(host: usize) -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::new(SUBNET[0], SUBNET[1], SUBNET[2], (100 + host) as u8)
}

fn is_ours(name: &str) -> Option<u32> {
    // hp<pid>-<role>
    let rest = name.strip_prefix("hp")?;
    let (pid, role) = rest.split_once('-')?;
    if role.is_empty() || !pid.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

fn namespaces() -> Vec<String> {
    output("ip", &["netns", "list"])
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect()
}

/// Kills what still runs in namespace `ns` (only testbed children can be
/// there) and deletes it.
fn remove_namespace(ns: &str) {
    if let Ok(pids) = output("ip", &["netns", "pids", ns]) {
        for pid in pids.lines().filter_map(|p| p.trim().parse::<u32>().ok()) {
            sys::kill(pid, libc::SIGKILL);
        }
    }
    let _ = run("ip", &["netns", "del", ns]);
}

/// Removes testbed namespaces left by runs that are no longer alive;
/// returns how many.
pub fn cleanup_leftovers() -> usize {
    let mut n = 0;
    for ns in namespaces() {
        if let Some(pid) = is_ours(&ns) {
            if pid == std::process::id() || !std::path::Path::new(&format!("/proc/{pid}")).exists()
            {
                remove_namespace(&ns);
                n += 1;
            }
        }
    }
    n
}

/// The namespaces and child processes of one run; dropping it kills the
/// children and deletes the namespaces, whatever happened.
struct Testbed {
    tag: String,
    made: Vec<String>,
    children: Vec<Child>,
}

impl Drop for Testbed {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in self.made.iter().rev() {
            remove_namespace(ns);
        }
    }
}

impl Testbed {
    fn ns(&self, role: &str) -> String {
        format!("{}-{role}", self.tag)
    }

    fn add_ns(&mut self, role: &str) -> Result<String, String> {
        let ns = self.ns(role);
        run("ip", &["netns", "add", &ns])?;
        self.made.push(ns.clone());
        // No IPv6 chatter on the testbed's links.
        let _ = run(
            "ip",
            &[
                "netns",
                "exec",
                &ns,
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ],
        );
        run("ip", &["-n", &ns, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Builds the switch, the hosts and the bottleneck.
    fn build(&mut self, o: &TestbedOpts) -> Result<(), String> {
        let sw = self.add_ns("sw")?;
        run("ip", &["-n", &sw, "link", "add", "br0", "type", "bridge"])?;
        run("ip", &["-n", &sw, "link", "set", "br0", "up"])?;
        for h in 0..=o.clients {
            let role = if h == 0 {
                "s0".to_string()
            } else {
                format!("c{h}")
            };
            let host = self.add_ns(&role)?;
            let port = format!("p{h}");
            run(
                "ip",
                &[
                    "-n", &sw, "link", "add", &port, "type", "veth", "peer", "name", "eth0",
                    "netns", &host,
                ],
            )?;
            run(
                "ip",
                &["-n", &sw, "link", "set", &port, "master", "br0", "up"],
            )?;
            run("ip", &["-n", &host, "link", "add", "br0", "type", "bridge"])?;
            run(
                "ip",
                &["-n", &host, "link", "set", "eth0", "master", "br0", "up"],
            )?;
            let addr = format!("{}/24", kernel_ip(h));
            run("ip", &["-n", &host, "addr", "add", &addr, "dev", "br0"])?;
            run("ip", &["-n", &host, "link", "set", "br0", "up"])?;
        }
        self.bottleneck(&sw, o)
    }

    /// htb at the bottleneck rate on the switch's port toward the server,
    /// with one leaf per band: strict priority by htb `prio` (each leaf is
    /// assured only 0.1% of the rate; everything else is borrowed in
    /// priority order), a byte-limited FIFO per band, and u32 filters on
    /// the TOS bits 7..5, which carry the Homa priority.
    fn bottleneck(&self, sw: &str, o: &TestbedOpts) -> Result<(), String> {
        let rate = format!("{}mbit", o.bottleneck_mbps);
        let assured = format!("{}kbit", o.bottleneck_mbps.max(8));
        let lowest = 10 + o.bands - 1;
        let tc = |args: &[&str]| {
            let mut a = vec!["-n", sw];
            a.extend_from_slice(args);
            run("tc", &a)
        };
        tc(&[
            "qdisc",
            "add",
            "dev",
            "p0",
            "root",
            "handle",
            "1:",
            "htb",
            "default",
            &lowest.to_string(),
            "r2q",
            "1000",
        ])?;
        tc(&[
            "class", "add", "dev", "p0", "parent", "1:", "classid", "1:1", "htb", "rate", &rate,
            "ceil", &rate,
        ])?;
        let limit = (u64::from(o.queue_kb) * 1000).to_string();
        for b in 0..o.bands {
            let class = format!("1:{}", 10 + b);
            tc(&[
                "class",
                "add",
                "dev",
                "p0",
                "parent",
                "1:1",
                "classid",
                &class,
                "htb",
                "rate",
                &assured,
                "ceil",
                &rate,
                "prio",
                &b.to_string(),
                "quantum",
                "1514",
            ])?;
            let handle = format!("{}:", 110 + u32::from(b));
            tc(&[
                "qdisc", "add", "dev", "p0", "parent", &class, "handle", &handle, "bfifo", "limit",
                &limit,
            ])?;
        }
        for p in 0u8..8 {
            // Homa priority 7 (highest) goes to band 0 (htb prio 0, served first).
            let band = (u32::from(7 - p) * u32::from(o.bands)) / 8;
            let tos = format!("0x{:02x}", p << 5);
            let flow = format!("1:{}", 10 + band);
            tc(&[
                "filter", "add", "dev", "p0", "parent", "1:", "protocol", "ip", "prio", "1", "u32",
                "match", "ip", "tos", &tos, "0xe0", "flowid", &flow,
            ])?;
        }
        Ok(())
    }

    /// Starts `homa-perf ARGS` inside namespace `role`; returns its index
    /// and the receivers of its stdout (whole) and its "ready" line.
    fn spawn(
        &mut self,
        role: &str,
        args: &[String],
    ) -> Result<(usize, mpsc::Receiver<String>, mpsc::Receiver<()>), String> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let ns = self.ns(role);
        let mut child = Command::new("ip")
            .args(["netns", "exec", &ns])
            .arg(exe)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("ip netns exec {ns}: {e}"))?;
        let (out_tx, out_rx) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::channel();
        let mut stdout = child.stdout.take().ok_or("no stdout")?;
        thread::spawn(move || {
            let mut s = String::new();
            let _ = stdout.read_to_string(&mut s);
            let _ = out_tx.send(s);
        });
        let stderr = child.stderr.take().ok_or("no stderr")?;
        let label = role.to_string();
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("server ready") {
                    let _ = ready_tx.send(());
                } else {
                    eprintln!("  [{label}] {line}");
                }
            }
        });
        self.children.push(child);
        Ok((self.children.len() - 1, out_rx, ready_rx))
    }

    /// Waits for child `i` to exit, up to `limit`; kills it after that.
    fn wait_child(&mut self, i: usize, limit: Instant) -> Result<(), String> {
        loop {
            match self.children[i].try_wait() {
                Ok(Some(_)) => return Ok(()),
                Ok(None) => {}
                Err(e) => return Err(e.to_string()),
            }
            if Instant::now() >= limit {
                let _ = self.children[i].kill();
                let _ = self.children[i].wait();
                return Err("a child process overran its time and was killed".into());
            }
            thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Counters of the bottleneck (root htb and each band's FIFO).
#[derive(Debug, Clone, Default)]
struct Bottleneck {
    bytes: u64,
    packets: u64,
    drops: u64,
    overlimits: u64,
    band_bytes: Vec<u64>,
    band_drops: Vec<u64>,
}

fn read_bottleneck(sw: &str, bands: u8) -> Result<Bottleneck, String> {
    let text = output("tc", &["-n", sw, "-s", "-j", "qdisc", "show", "dev", "p0"])?;
    let v: Value = serde_json::from_str(&text).map_err(|e| format!("tc -j: {e}"))?;
    let mut b = Bottleneck {
        band_bytes: vec![0; bands as usize],
        band_drops: vec![0; bands as usize],
        ..Bottleneck::default()
    };
    for q in v.as_array().ok_or("tc -j: not a list")? {
        let get = |k: &str| q[k].as_u64().unwrap_or(0);
        match q["kind"].as_str() {
            Some("htb") => {
                b.bytes = get("bytes");
                b.packets = get("packets");
                b.overlimits = get("overlimits");
            }
            Some("bfifo") => {
                let h = q["handle"].as_str().unwrap_or_default();
                if let Some(i) = h
                    .trim_end_matches(':')
                    .parse::<usize>()
                    .ok()
                    .and_then(|x| x.checked_sub(110))
                {
                    if i < b.band_bytes.len() {
                        b.band_bytes[i] = get("bytes");
                        b.band_drops[i] = get("drops");
                    }
                }
                b.drops += get("drops");
            }
            _ => {}
        }
    }
    Ok(b)
}

/// Jiffies of the whole machine from /proc/stat: busy, softirq (where
/// the kernel forwards frames through bridges, veths and the bottleneck),
/// and total.
#[derive(Debug, Clone, Copy, Default)]
struct Jiffies {
    busy: u64,
    softirq: u64,
    total: u64,
}

fn machine_jiffies() -> Jiffies {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let line = text.lines().next().unwrap_or_default();
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = f.iter().take(8).sum();
    let idle = f.get(3).copied().unwrap_or(0) + f.get(4).copied().unwrap_or(0);
    Jiffies {
        busy: total - idle,
        softirq: f.get(6).copied().unwrap_or(0),
        total,
    }
}

/// CPU seconds of the testbed's child processes so far.
fn children_cpu(tb: &Testbed) -> f64 {
    tb.children
        .iter()
        .map(|c| sys::process_cpu_seconds(c.id()))
        .sum()
}

/// What one protocol's run found.
#[derive(Debug, Clone)]
struct Phase {
    protocol: String,
    clients: ClientReport,
    server: ServerReport,
    bottleneck: Bottleneck,
    seconds: f64,
    machine_busy: f64,
    /// homa-perf processes plus network softirq, as a fraction of all cores.
    experiment_cpu: f64,
    offered_mbps: f64,
}

impl Phase {
    fn carried_mbps(&self) -> f64 {
        self.bottleneck.bytes as f64 * 8.0 / self.seconds / 1e6
    }

    /// Whether the network, not the CPU, set the pace, and why: the
    /// bottleneck must have carried the offered load while it was offered
    /// (it carries headers too, so at least the offered message bytes),
    /// every RPC must have finished, and the experiment's own CPU (its
    /// processes and the kernel's network softirq) must have had headroom.
    fn verdict(&self, o: &TestbedOpts, cores: f64) -> (bool, String) {
        let kept_up = self.carried_mbps() >= 0.97 * self.offered_mbps
            && self.clients.unfinished == 0
            && self.clients.failed == 0;
        let cpu_ok = self.experiment_cpu < 0.9;
        let detail = format!(
            "bottleneck carried {:.1} Mbit/s for {:.1} Mbit/s of requests offered ({:.0}% busy, \
             {} throttling events, {} drops); homa-perf processes + network softirq used {:.0}% of {} cores, \
             the whole machine (other users included) {:.0}%",
            self.carried_mbps(),
            self.offered_mbps,
            self.carried_mbps() / f64::from(o.bottleneck_mbps) * 100.0,
            self.bottleneck.overlimits,
            self.bottleneck.drops,
            self.experiment_cpu * 100.0,
            cores,
            self.machine_busy * 100.0,
        );
        if !kept_up {
            (
                false,
                format!(
                    "CPU-BOUND or overloaded: the offered load was not carried in time ({detail})"
                ),
            )
        } else if !cpu_ok {
            (false, format!("CPU-BOUND: the offered load was carried but the CPU had no headroom ({detail})"))
        } else {
            (
                true,
                format!("network-bound: the bottleneck, not the CPU, limits throughput ({detail})"),
            )
        }
    }

    fn to_json(&self, o: &TestbedOpts, cores: f64) -> Value {
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
            "machine_cpu_busy": self.machine_busy,
            "experiment_cpu": self.experiment_cpu,
            "network_bound": ok,
            "verdict": verdict,
        })
    }
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Runs one protocol over the testbed.
/// How one phase loads the bottleneck.
struct Load {
    /// Client arguments for the pacing (`--rate R` or `--outstanding N`).
    pace: Vec<String>,
    /// Seconds of issuing.
    duration_s: f64,
    /// Seconds allowed after that.
    drain_s: f64,
    /// Offered message bytes, Mbit/s (the bottleneck rate for a probe).
    offered_mbps: f64,
}

fn run_phase(
    tb: &mut Testbed,
    o: &TestbedOpts,
    protocol: &str,
    load: &Load,
) -> Result<Phase, String> {
    let homa = protocol == "homa";
    let r = o.bottleneck_mbps.to_string();
    let backlog = o.nic_backlog_us.to_string();
    let neighbors = |hosts: &mut dyn Iterator<Item = usize>| {
        hosts
            .map(|h| format!("{}={}", homa_ip(h), mac_for(homa_ip(h))))
            .collect::<Vec<_>>()
            .join(",")
    };
    let homa_dev = |h: usize| {
        let v = strings(&[
            "--tap",
            "tap0",
            "--bridge",
            "br0",
            "--ip",
            &format!("{}/24", homa_ip(h)),
            "--link-mbps",
            &r,
            "--nic-backlog-us",
            &backlog,
            "--unsched-bytes",
            &o.unsched_bytes.to_string(),
            "--max-incoming",
            &o.max_incoming.to_string(),
            "--fifo-grant-bytes",
            &o.fifo_grant_bytes.to_string(),
            "--resend-ticks",
            &o.resend_ticks.to_string(),
            "--timeout-ticks",
            &o.timeout_ticks.to_string(),
        ]);
        v
    };
    // The testbed prints its own phases; the processes' progress lines
    // would interleave.
    let mut sargs = strings(&["server", "--json", "--quiet"]);
    if homa {
        sargs.extend(homa_dev(0));
        sargs.extend(strings(&[
            "--neighbor",
            &neighbors(&mut (1..=o.clients)),
            "--max-rpcs",
            "4096",
        ]));
    } else {
        sargs.extend(strings(&[
            "--tcp",
            "--listen",
            &format!("{}:{TCP_PORT}", kernel_ip(0)),
        ]));
    }
    let (si, sout, sready) = tb.spawn("s0", &sargs)?;
    if sready.recv_timeout(Duration::from_secs(10)).is_err() {
        return Err(format!("the {protocol} server did not start within 10 s"));
    }
    let start_ms = unix_ms() + 1500;
    let target = if homa {
        format!("{}:{HOMA_PORT}", homa_ip(0))
    } else {
        format!("{}:{TCP_PORT}", kernel_ip(0))
    };
    let mut clients = Vec::new();
    for c in 1..=o.clients {
        let mut a = strings(&[
            "client",
            "--json",
            "--quiet",
            "--server",
            &target,
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
            a.extend(homa_dev(c));
            a.extend(strings(&[
                "--neighbor",
                &neighbors(&mut std::iter::once(0)),
            ]));
        } else {
            a.push("--tcp".into());
        }
        clients.push(tb.spawn(&format!("c{c}"), &a)?);
    }
    // Measure over the issuing period.
    let sw = tb.ns("sw");
    let wait_start = start_ms.saturating_sub(unix_ms());
    thread::sleep(Duration::from_millis(wait_start));
    let before = read_bottleneck(&sw, o.bands)?;
    let cpu0 = machine_jiffies();
    let procs0 = children_cpu(tb);
    let t0 = Instant::now();
    let issue_end = t0 + Duration::from_secs_f64(load.duration_s);
    while Instant::now() < issue_end && !sys::stop_requested() {
        thread::sleep(Duration::from_millis(50));
    }
    let after = read_bottleneck(&sw, o.bands)?;
    let cpu1 = machine_jiffies();
    let procs1 = children_cpu(tb);
    let seconds = t0.elapsed().as_secs_f64();
    if sys::stop_requested() {
        return Err("stopped by a signal".into());
    }
    let limit = Instant::now() + Duration::from_secs_f64(load.drain_s + 20.0);
    let mut merged: Option<ClientReport> = None;
    for (i, out, _) in clients {
        tb.wait_child(i, limit)?;
        let text = out.recv_timeout(Duration::from_secs(5)).unwrap_or_default();
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| format!("{protocol} client printed no report ({e}): {text:?}"))?;
        let rep = ClientReport::from_json(&v)?;
        match &mut merged {
            None => merged = Some(rep),
            Some(m) => m.merge(&rep)?,
        }
    }
    sys::kill(tb.children[si].id(), libc::SIGTERM);
    tb.wait_child(si, Instant::now() + Duration::from_secs(10))?;
    let text = sout
        .recv_timeout(Duration::from_secs(5))
        .unwrap_or_default();
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| format!("{protocol} server printed no report ({e}): {text:?}"))?;
    let server = ServerReport::from_json(&v)?;
    let d = |a: u64, b: u64| a.saturating_sub(b);
    let bottleneck = Bottleneck {
        bytes: d(after.bytes, before.bytes),
        packets: d(after.packets, before.packets),
        drops: d(after.drops, before.drops),
        overlimits: d(after.overlimits, before.overlimits),
        band_bytes: after
            .band_bytes
            .iter()
            .zip(&before.band_bytes)
            .map(|(a, b)| d(*a, *b))
            .collect(),
        band_drops: after
            .band_drops
            .iter()
            .zip(&before.band_drops)
            .map(|(a, b)| d(*a, *b))
            .collect(),
    };
    let total = d(cpu1.total, cpu0.total).max(1) as f64;
    let busy = d(cpu1.busy, cpu0.busy) as f64 / total;
    let softirq = d(cpu1.softirq, cpu0.softirq) as f64 / total;
    let experiment_cpu = (procs1 - procs0) / (seconds * cores()) + softirq;
    Ok(Phase {
        protocol: protocol.to_string(),
        clients: merged.ok_or("no clients")?,
        server,
        bottleneck,
        seconds,
        machine_busy: busy,
        experiment_cpu,
        offered_mbps: load.offered_mbps,
    })
}

fn cores() -> f64 {
    thread::available_parallelism().map_or(1.0, |n| n.get() as f64)
}

/// Builds the testbed, runs Homa then TCP, prints the comparison, and
/// removes everything. Needs root.
pub fn run_testbed(o: &TestbedOpts) -> Result<(), String> {
    if !sys::is_root() {
        return Err("the testbed needs root (network namespaces, TAP, tc)".into());
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        return Err("/dev/net/tun does not exist (modprobe tun)".into());
    }
    sys::catch_stop_signals();
    let removed = cleanup_leftovers();
    if removed > 0 {
        eprintln!("homa-perf: removed {removed} namespaces left by earlier runs");
    }
    let dist = SizeDist::from_spec(&o.workload)?;
    let rate_bytes = o.load * f64::from(o.bottleneck_mbps) * 1e6 / 8.0;
    let total_rate = rate_bytes / dist.mean();
    let per_client = total_rate / o.clients as f64;
    let protocols: Vec<&str> = match o.only.as_deref() {
        Some(p) => vec![p],
        None => vec!["homa", "tcp"],
    };
    let budget = Instant::now()
        + Duration::from_secs_f64(
            (o.duration_s + o.drain_s + o.probe_s + 60.0) * protocols.len() as f64,
        );
    let header = format!(
        "homa-perf testbed: {} clients -> 1 server (incast), workload {} (cp_node table{}; short = <= {} B), \
         Poisson open loop at {:.0}% of a {} Mbit/s bottleneck = {:.1} Mbit/s of requests ({:.1} RPC/s in all), \
         {}-byte responses, {} strict-priority bands by IP TOS, {} s per protocol",
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
        o.duration_s
    );
    if !o.json {
        println!("{header}");
        if o.bottleneck_mbps == DEFAULT_BOTTLENECK_MBPS {
            println!(
                "(the default bottleneck is {DEFAULT_BOTTLENECK_MBPS} Mbit/s, not 1 Gbit/s: on a 2-core machine \
                 homa-stack over TAP cannot carry 80% of 1 Gbit/s, every frame costing syscalls and three \
                 bridge hops; --bottleneck-mbps 1000 runs it anyway, and the capacity probes below say \
                 which resource limits)"
            );
        }
        println!(
            "Homa settings scaled to the bottleneck: unscheduled {} B, max incoming {} B, FIFO grants {} B, \
             RESEND after {} ms, timeout {} ms",
            o.unsched_bytes, o.max_incoming, o.fifo_grant_bytes, o.resend_ticks, o.timeout_ticks
        );
    }
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
    for p in &protocols {
        if Instant::now() > budget || sys::stop_requested() {
            return Err("time budget exhausted or stopped".into());
        }
        if o.probe_s > 0.0 {
            eprintln!(
                "homa-perf: probing {p}'s capacity, closed loop, {} s ...",
                o.probe_s
            );
            let phase = run_phase(&mut tb, o, p, &probe)?;
            if !o.json {
                println!("{}", probe_text(&phase, o));
            }
            probes.push(phase);
        }
        eprintln!("homa-perf: running {p} for {} s ...", o.duration_s);
        let phase = run_phase(&mut tb, o, p, &measured)?;
        if !o.json {
            print_phase(&phase, o);
        }
        phases.push(phase);
    }
    drop(tb);
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
        println!(
            "{}",
            serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    println!();
    println!(
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
    );
    for p in &phases {
        let s = p.clients.rtt.short();
        println!(
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
        );
    }
    match (homa, tcp, ratio) {
        (Some(h), Some(t), Some(r)) => println!(
            "short-message (<= {} B) P99: homa {:.1} us, tcp {:.1} us, tcp/homa = {:.1}x",
            dist.short_max(),
            short(h),
            short(t),
            r
        ),
        _ => println!("short-message P99: only one protocol ran, no ratio"),
    }
    Ok(())
}

/// The capacity probe's finding: can this protocol, on this CPU, fill the
/// bottleneck? If it can, the bottleneck is what limits throughput.
fn probe_text(p: &Phase, o: &TestbedOpts) -> String {
    let util = p.carried_mbps() / f64::from(o.bottleneck_mbps);
    let verdict = if util >= 0.9 {
        "the bottleneck, not the CPU, limits throughput"
    } else {
        "CPU-BOUND: it cannot fill the bottleneck on this machine"
    };
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

fn print_phase(p: &Phase, o: &TestbedOpts) {
    println!("\n== {} ==", p.protocol);
    print!("{}", rtt_table(&p.clients.rtt));
    let c = &p.clients;
    println!(
        "issued {} completed {} failed {} corrupt {} unfinished {}; server answered {} ({} corrupt), refused {}",
        c.issued, c.completed, c.failed, c.corrupt, c.unfinished, p.server.requests, p.server.corrupt,
        p.server.failed
    );
    println!(
        "bottleneck carried {:.1} Mbit/s ({:.0}% of {}), bytes per band (highest first) {:?}, drops {:?}",
        p.carried_mbps(),
        p.carried_mbps() / f64::from(o.bottleneck_mbps) * 100.0,
        o.bottleneck_mbps,
        p.bottleneck.band_bytes,
        p.bottleneck.band_drops
    );
    println!(
        "CPU seconds: clients {:.1} user + {:.1} system, server {:.1} user + {:.1} system",
        c.cpu_s.0, c.cpu_s.1, p.server.cpu_s.0, p.server.cpu_s.1
    );
    for (who, extra) in [("clients", &c.extra), ("server", &p.server.extra)] {
        let st = &extra["stack"];
        if st.is_object() {
            let drops = match drops_text(&st["drop_reasons"]) {
                t if t.is_empty() => "drops 0".to_string(),
                t => t,
            };
            println!(
                "homa-stack {who}: tx frames {} rx frames {} retransmissions {} resends asked {} \
                 timeouts {} {drops}",
                st["tx_frames"],
                st["rx_frames"],
                st["retransmissions"],
                st["resends_requested"],
                st["timeouts"],
            );
        }
    }
    println!("verdict: {}", p.verdict(o, cores()).1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_namespace_names_are_recognised() {
        assert_eq!(is_ours("hp123-sw"), Some(123));
        assert_eq!(is_ours("hp7-c1"), Some(7));
        assert_eq!(is_ours("hp-sw"), None);
        assert_eq!(is_ours("hp12x-sw"), None);
        assert_eq!(is_ours("hp12-"), None);
        assert_eq!(is_ours("other"), None);
    }

    #[test]
    fn addresses_are_in_the_private_testbed_subnet() {
        assert_eq!(kernel_ip(0), "10.77.0.10");
        assert_eq!(homa_ip(3), std::net::Ipv4Addr::new(10, 77, 0, 103));
        assert!(homa_ip(32).is_private());
    }
}
