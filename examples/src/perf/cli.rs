//! homa-perf's command line: `server`, `client`, `testbed` and `cleanup`.

use std::net::{Ipv4Addr, SocketAddrV4};

use homa_stack::wire::EthernetAddress;

use super::arrivals::Pace;
use super::payload::ECHO;
use super::workload::SizeDist;
use crate::args::Args;

/// The usage text.
pub const USAGE: &str = "\
usage:
  homa-perf server DEVICE [--port N] [--duration S] [--json] [HOMA OPTIONS]
  homa-perf client DEVICE --server IP:PORT[,IP:PORT...] SIZES PACE
                   [--duration S] [--drain S] [--reply-len N|echo] [--seed N]
                   [--json] [HOMA OPTIONS]
  homa-perf testbed [--clients 4] [--workload w4] [--load 0.8]
                   [--bottleneck-mbps N] [--bands 8] [--duration 20] [--drain 5]
                   [--queue-kb 1500] [--reply-len 100] [--seed 1]
                   [--only homa|tcp] [--json] [--nic-backlog-us N] [--rtt-us 250]
                   [--unsched-bytes N] [--max-incoming N] [--fifo-grant-bytes N]
                   [--resend-ticks 15] [--timeout-ticks 1000] [--probe 3]
  homa-perf cleanup            (or --cleanup: removes leftover testbed namespaces)

DEVICE (Homa over homa-stack, or the kernel's TCP):
  --tap NAME --ip A.B.C.D/NN [--bridge BR] [--host-ip A.B.C.D/NN]
        a TAP device, created and configured if it does not exist: joined to
        bridge BR (created if missing, with --host-ip as its address), or
        else given --host-ip (default: the first other address of the subnet)
  --iface NAME --ip A.B.C.D/NN      an AF_PACKET socket on an existing interface
  --tcp [--listen IP:PORT]          kernel TCP, one connection per server,
                                    length-prefixed messages (server default
                                    listens on 0.0.0.0:5000)
SIZES:  --size N[,N...] | --workload w1..w5 (cp_node tables, 1 MB cap) | FILE.csv
PACE:   --rate RPCS_PER_S | --load FRACTION (of --link-mbps, message bytes)
        | --outstanding N (closed loop)
HOMA OPTIONS: --port N (server; default 500 for Homa, 5000 for TCP)
        --link-mbps N (pacer rate, default 1000) --nic-backlog-us N (default 200)
        --mac XX:XX:XX:XX:XX:XX --neighbor IP=MAC[,IP=MAC] --pcap FILE
        --max-rpcs N --pool-mb N --no-verify --start-at-ms UNIX_MS --quiet
        --unsched-bytes N --max-incoming N --fifo-grant-bytes N --resend-ticks N
        --timeout-ticks N   (Homa's byte and timer settings; defaults are Linux's)";

/// An IPv4 address with a prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    /// The address.
    pub addr: Ipv4Addr,
    /// Prefix length, 0..=32.
    pub prefix: u8,
}

impl Cidr {
    /// Parses `A.B.C.D/NN`.
    pub fn parse(s: &str) -> Result<Cidr, String> {
        let (a, p) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?}: expected A.B.C.D/NN"))?;
        let addr: Ipv4Addr = a.parse().map_err(|e| format!("{s:?}: {e}"))?;
        let prefix: u8 = p.parse().map_err(|e| format!("{s:?}: {e}"))?;
        if prefix > 32 {
            return Err(format!("{s:?}: prefix over 32"));
        }
        Ok(Cidr { addr, prefix })
    }

    fn mask(&self) -> u32 {
        u32::MAX
            .checked_shl(32 - u32::from(self.prefix))
            .unwrap_or(0)
    }

    /// Whether `ip` is in this subnet.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        (u32::from(ip) ^ u32::from(self.addr)) & self.mask() == 0
    }

    /// The first address of the subnet other than this one (for the
    /// kernel's side of a TAP).
    pub fn default_peer(&self) -> Cidr {
        let net = u32::from(self.addr) & self.mask();
        let first = if net + 1 == u32::from(self.addr) {
            net + 2
        } else {
            net + 1
        };
        Cidr {
            addr: Ipv4Addr::from(first),
            prefix: self.prefix,
        }
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// Whether traffic to `ip` stays on this machine or a private network:
/// homa-perf refuses any other target.
pub fn is_private(ip: Ipv4Addr) -> bool {
    ip.is_private() || ip.is_loopback()
}

/// Parses `02:00:00:00:00:01`.
pub fn parse_mac(s: &str) -> Result<EthernetAddress, String> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return Err(format!("{s:?}: expected six hex bytes"));
    }
    let mut b = [0u8; 6];
    for (d, p) in b.iter_mut().zip(parts) {
        *d = u8::from_str_radix(p, 16).map_err(|e| format!("{s:?}: {e}"))?;
    }
    Ok(EthernetAddress(b))
}

/// Where the messages go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// homa-stack over a TAP device.
    Tap {
        /// Interface name.
        name: String,
        /// homa-stack's own address and subnet.
        ip: Cidr,
        /// Bridge to join the TAP to, if it is created.
        bridge: Option<String>,
        /// Address for the kernel's side (the bridge's when one is made).
        host_ip: Option<Cidr>,
    },
    /// homa-stack over an AF_PACKET socket.
    Iface {
        /// Interface name.
        name: String,
        /// homa-stack's own address and subnet.
        ip: Cidr,
    },
    /// The kernel's TCP.
    Tcp,
}

impl Transport {
    /// homa-stack's address and subnet, if Homa.
    pub fn homa_ip(&self) -> Option<Cidr> {
        match self {
            Transport::Tap { ip, .. } | Transport::Iface { ip, .. } => Some(*ip),
            Transport::Tcp => None,
        }
    }
}

/// Settings of the homa-stack endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HomaOpts {
    /// Pacer link rate.
    pub link_mbps: u32,
    /// How far ahead of the wire the pacer may queue, in microseconds.
    pub nic_backlog_us: u64,
    /// homa-stack's MAC (default derived from its IP).
    pub mac: Option<EthernetAddress>,
    /// Static neighbours (no ARP for them).
    pub neighbors: Vec<(Ipv4Addr, EthernetAddress)>,
    /// Capture file.
    pub pcap: Option<String>,
    /// RPC slots.
    pub max_rpcs: usize,
    /// Message pool in MiB.
    pub pool_mb: usize,
    /// `Config::unsched_bytes` (None: the Linux default).
    pub unsched_bytes: Option<u32>,
    /// `Config::max_incoming` (None: the Linux default).
    pub max_incoming: Option<u32>,
    /// `Config::resend_ticks` and `resend_interval` (None: Linux's 5 ms).
    pub resend_ticks: Option<u32>,
    /// `Config::timeout_ticks` (None: 100 ms).
    pub timeout_ticks: Option<u32>,
    /// `Config::fifo_grant_increment` (None: the Linux default).
    pub fifo_grant_bytes: Option<u32>,
}

/// `server` options.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerOpts {
    /// Device or TCP.
    pub transport: Transport,
    /// Endpoint settings (Homa).
    pub homa: HomaOpts,
    /// Homa port or TCP port.
    pub port: u16,
    /// TCP listening address.
    pub listen: SocketAddrV4,
    /// Stop after this many seconds (`None`: at a signal).
    pub duration_s: Option<f64>,
    /// Check every request byte.
    pub verify: bool,
    /// JSON output.
    pub json: bool,
}

/// `client` options.
#[derive(Debug, Clone)]
pub struct ClientOpts {
    /// Device or TCP.
    pub transport: Transport,
    /// Endpoint settings (Homa).
    pub homa: HomaOpts,
    /// Servers, used in turn.
    pub targets: Vec<SocketAddrV4>,
    /// Request sizes.
    pub dist: SizeDist,
    /// Pacing.
    pub pace: Pace,
    /// Seconds during which RPCs are issued.
    pub duration_s: f64,
    /// Seconds allowed after that for outstanding RPCs.
    pub drain_s: f64,
    /// Response length, or [`ECHO`].
    pub reply_len: u32,
    /// Seed of sizes, arrivals and payloads.
    pub seed: u64,
    /// Check every response byte.
    pub verify: bool,
    /// JSON output.
    pub json: bool,
    /// Wall-clock start (Unix milliseconds), to start several clients together.
    pub start_at_ms: Option<u64>,
    /// No per-RPC error lines.
    pub quiet: bool,
}

/// `testbed` options.
#[derive(Debug, Clone)]
pub struct TestbedOpts {
    /// Client hosts.
    pub clients: usize,
    /// Workload spec (see [`SizeDist::from_spec`]).
    pub workload: String,
    /// Offered load as a fraction of the bottleneck (message bytes).
    pub load: f64,
    /// Bottleneck rate.
    pub bottleneck_mbps: u32,
    /// Strict-priority bands at the bottleneck (1..=8).
    pub bands: u8,
    /// Seconds per protocol.
    pub duration_s: f64,
    /// Drain seconds per protocol.
    pub drain_s: f64,
    /// Byte limit of each band's queue, in KB.
    pub queue_kb: u32,
    /// Response length.
    pub reply_len: u32,
    /// Base seed.
    pub seed: u64,
    /// Run only one protocol.
    pub only: Option<String>,
    /// JSON output.
    pub json: bool,
    /// Pacer queue allowance for the Homa endpoints.
    pub nic_backlog_us: u64,
    /// Homa's unscheduled bytes: one round trip's worth at the bottleneck
    /// (`--rtt-us`, default 250 us), in whole packets, unless given.
    pub unsched_bytes: u32,
    /// Homa's cap on granted-but-unreceived bytes: 8 round trips' worth
    /// unless given, so Homa's queue at the bottleneck stays well under its
    /// 5 ms RESEND timer.
    pub max_incoming: u32,
    /// Homa's FIFO grant size: two round trips' worth unless given.
    pub fifo_grant_bytes: u32,
    /// Homa's RESEND ticks (default 15 ms: see the README).
    pub resend_ticks: u32,
    /// Homa's timeout ticks (default 1000 ms: see the README).
    pub timeout_ticks: u32,
    /// Seconds of the closed-loop capacity probe per protocol (0: none).
    pub probe_s: f64,
}

/// A parsed command line.
#[derive(Debug, Clone)]
pub enum Command {
    /// Serve requests.
    Server(ServerOpts),
    /// Issue requests.
    Client(Box<ClientOpts>),
    /// Build the namespace testbed and compare Homa with TCP.
    Testbed(TestbedOpts),
    /// Remove leftover testbed namespaces.
    Cleanup,
    /// Print the usage.
    Help,
}

const DEVICE_OPTS: [&str; 7] = ["tap", "ip", "bridge", "host-ip", "iface", "tcp", "listen"];
const HOMA_OPTS: [&str; 15] = [
    "fifo-grant-bytes",
    "unsched-bytes",
    "max-incoming",
    "resend-ticks",
    "timeout-ticks",
    "link-mbps",
    "nic-backlog-us",
    "mac",
    "neighbor",
    "pcap",
    "max-rpcs",
    "pool-mb",
    "no-verify",
    "json",
    "quiet",
];
const FLAGS: [&str; 6] = ["tcp", "no-verify", "json", "quiet", "help", "cleanup"];

fn transport(a: &Args) -> Result<Transport, String> {
    let ip = a.get_str("ip").map(Cidr::parse).transpose()?;
    let given = [
        a.get_str("tap").is_some(),
        a.get_str("iface").is_some(),
        a.flag("tcp"),
    ];
    if given.iter().filter(|&&g| g).count() != 1 {
        return Err("give exactly one of --tap NAME, --iface NAME, --tcp".into());
    }
    if a.flag("tcp") {
        if ip.is_some() {
            return Err("--ip is for --tap/--iface; TCP uses the kernel's addresses".into());
        }
        return Ok(Transport::Tcp);
    }
    let ip = ip.ok_or("--tap and --iface need --ip A.B.C.D/NN (homa-stack's address)")?;
    if let Some(name) = a.get_str("tap") {
        let host_ip = a.get_str("host-ip").map(Cidr::parse).transpose()?;
        if host_ip.is_some_and(|h| h.addr == ip.addr) {
            return Err("--host-ip must differ from --ip".into());
        }
        return Ok(Transport::Tap {
            name: name.to_string(),
            ip,
            bridge: a.get_str("bridge").map(String::from),
            host_ip,
        });
    }
    if a.get_str("bridge").is_some() || a.get_str("host-ip").is_some() {
        return Err("--bridge and --host-ip are for --tap".into());
    }
    Ok(Transport::Iface {
        name: a.get_str("iface").unwrap_or_default().to_string(),
        ip,
    })
}

fn opt(a: &Args, name: &str) -> Result<Option<u32>, String> {
    a.get_str(name).map(|_| a.get(name, 0u32)).transpose()
}

fn homa_opts(a: &Args, default_pool_mb: usize) -> Result<HomaOpts, String> {
    let mut neighbors = Vec::new();
    if let Some(list) = a.get_str("neighbor") {
        for item in list.split(',') {
            let (ip, mac) = item
                .split_once('=')
                .ok_or_else(|| format!("--neighbor {item:?}: expected IP=MAC"))?;
            let ip: Ipv4Addr = ip.parse().map_err(|e| format!("--neighbor {ip:?}: {e}"))?;
            neighbors.push((ip, parse_mac(mac)?));
        }
    }
    let o = HomaOpts {
        link_mbps: a.get("link-mbps", 1000)?,
        nic_backlog_us: a.get("nic-backlog-us", 200)?,
        mac: a.get_str("mac").map(parse_mac).transpose()?,
        neighbors,
        pcap: a.get_str("pcap").map(String::from),
        max_rpcs: a.get("max-rpcs", 1024)?,
        pool_mb: a.get("pool-mb", default_pool_mb)?,
        unsched_bytes: opt(a, "unsched-bytes")?,
        max_incoming: opt(a, "max-incoming")?,
        resend_ticks: opt(a, "resend-ticks")?,
        timeout_ticks: opt(a, "timeout-ticks")?,
        fifo_grant_bytes: opt(a, "fifo-grant-bytes")?,
    };
    if [
        o.unsched_bytes,
        o.max_incoming,
        o.resend_ticks,
        o.timeout_ticks,
    ]
    .contains(&Some(0))
    {
        return Err(
            "--unsched-bytes, --max-incoming, --resend-ticks, --timeout-ticks must be > 0".into(),
        );
    }
    if o.link_mbps == 0 || !(1..=60_000).contains(&o.max_rpcs) || o.pool_mb == 0 {
        return Err("--link-mbps and --pool-mb must be > 0, --max-rpcs 1..=60000".into());
    }
    Ok(o)
}

fn known(extra: &[&'static str]) -> Vec<&'static str> {
    let mut k: Vec<&str> = DEVICE_OPTS
        .iter()
        .chain(HOMA_OPTS.iter())
        .copied()
        .collect();
    k.extend_from_slice(extra);
    k.push("help");
    k
}

fn seconds(a: &Args, name: &str, default: f64) -> Result<f64, String> {
    let s: f64 = a.get(name, default)?;
    if !(0.0..=86_400.0).contains(&s) {
        return Err(format!("--{name} must be 0..=86400 seconds"));
    }
    Ok(s)
}

fn server(a: &Args) -> Result<ServerOpts, String> {
    a.reject_unknown(&known(&["port", "duration"]))?;
    let transport = transport(a)?;
    let tcp = transport == Transport::Tcp;
    let port: u16 = a.get("port", if tcp { 5000 } else { 500 })?;
    if !tcp && !(1..0x8000).contains(&port) {
        return Err("Homa server ports are 1..=32767".into());
    }
    let listen = match a.get_str("listen") {
        Some(l) if tcp => l.parse().map_err(|e| format!("--listen {l:?}: {e}"))?,
        Some(_) => return Err("--listen is for --tcp".into()),
        None => SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port),
    };
    Ok(ServerOpts {
        transport,
        homa: homa_opts(a, 256)?,
        port,
        listen,
        duration_s: a
            .get_str("duration")
            .map(|_| seconds(a, "duration", 0.0))
            .transpose()?,
        verify: !a.flag("no-verify"),
        json: a.flag("json"),
    })
}

fn client(a: &Args) -> Result<ClientOpts, String> {
    a.reject_unknown(&known(&[
        "server",
        "size",
        "workload",
        "rate",
        "load",
        "outstanding",
        "duration",
        "drain",
        "reply-len",
        "seed",
        "start-at-ms",
    ]))?;
    let transport = transport(a)?;
    if a.get_str("listen").is_some() {
        return Err("--listen is for the server".into());
    }
    let list = a.get_str("server").ok_or("client needs --server IP:PORT")?;
    let targets = list
        .split(',')
        .map(|t| t.parse().map_err(|e| format!("--server {t:?}: {e}")))
        .collect::<Result<Vec<SocketAddrV4>, String>>()?;
    for t in &targets {
        if !is_private(*t.ip()) {
            return Err(format!(
                "--server {t}: only private (10/8, 172.16/12, 192.168/16) or loopback \
                 addresses are allowed"
            ));
        }
        if let Some(ip) = transport.homa_ip() {
            if !ip.contains(*t.ip()) {
                return Err(format!(
                    "--server {t} is not in {ip}: homa-stack has no router, the server must be on-link"
                ));
            }
            if !(1..0x8000).contains(&t.port()) {
                return Err(format!("--server {t}: Homa server ports are 1..=32767"));
            }
        }
    }
    let dist = match (a.get_str("size"), a.get_str("workload")) {
        (Some(s), None) => SizeDist::from_spec(s)?,
        (None, Some(w)) => SizeDist::from_spec(w)?,
        _ => return Err("give one of --size N[,N...] or --workload W".into()),
    };
    let homa = homa_opts(a, 64)?;
    let pace = match (
        a.get_str("rate"),
        a.get_str("load"),
        a.get_str("outstanding"),
    ) {
        (Some(_), None, None) => {
            let per_sec: f64 = a.get("rate", 0.0)?;
            if !(per_sec > 0.0 && per_sec.is_finite()) {
                return Err("--rate must be > 0".into());
            }
            Pace::Poisson { per_sec }
        }
        (None, Some(_), None) => {
            let load: f64 = a.get("load", 0.0)?;
            if !(load > 0.0 && load <= 10.0) {
                return Err("--load must be in (0, 10]".into());
            }
            let bytes_per_sec = load * f64::from(homa.link_mbps) * 1e6 / 8.0;
            Pace::Poisson {
                per_sec: bytes_per_sec / dist.mean(),
            }
        }
        (None, None, Some(_)) => {
            let outstanding: usize = a.get("outstanding", 1)?;
            if outstanding == 0 {
                return Err("--outstanding must be > 0".into());
            }
            Pace::Closed { outstanding }
        }
        _ => return Err("give one of --rate, --load, --outstanding".into()),
    };
    let reply_len = match a.get_str("reply-len") {
        None | Some("echo") => ECHO,
        Some(s) => {
            let n: u32 = s.parse().map_err(|e| format!("--reply-len {s:?}: {e}"))?;
            if n == 0 || n > 1_000_000 {
                return Err("--reply-len must be 1..=1000000 or echo".into());
            }
            n
        }
    };
    Ok(ClientOpts {
        transport,
        homa,
        targets,
        dist,
        pace,
        duration_s: seconds(a, "duration", 10.0)?,
        drain_s: seconds(a, "drain", 5.0)?,
        reply_len,
        seed: a.get("seed", 1)?,
        verify: !a.flag("no-verify"),
        json: a.flag("json"),
        start_at_ms: a
            .get_str("start-at-ms")
            .map(|_| a.get("start-at-ms", 0))
            .transpose()?,
        quiet: a.flag("quiet"),
    })
}

fn testbed(a: &Args) -> Result<TestbedOpts, String> {
    a.reject_unknown(&[
        "clients",
        "workload",
        "load",
        "bottleneck-mbps",
        "bands",
        "duration",
        "drain",
        "queue-kb",
        "reply-len",
        "seed",
        "only",
        "json",
        "nic-backlog-us",
        "rtt-us",
        "unsched-bytes",
        "max-incoming",
        "fifo-grant-bytes",
        "resend-ticks",
        "timeout-ticks",
        "probe",
        "help",
    ])?;
    let bottleneck_mbps: u32 = a.get("bottleneck-mbps", super::testbed::DEFAULT_BOTTLENECK_MBPS)?;
    let rtt_us: u32 = a.get("rtt-us", 250)?;
    let rtt_bytes = u64::from(bottleneck_mbps) * u64::from(rtt_us) / 8;
    let unsched = (rtt_bytes.div_ceil(1424).max(1) * 1424).min(1_000_000) as u32;
    let o = TestbedOpts {
        clients: a.get("clients", 4)?,
        workload: a.get("workload", "w4".to_string())?,
        load: a.get("load", 0.8)?,
        bottleneck_mbps,
        bands: a.get("bands", 8)?,
        duration_s: seconds(a, "duration", 20.0)?,
        drain_s: seconds(a, "drain", 5.0)?,
        queue_kb: a.get("queue-kb", 1500)?,
        reply_len: a.get("reply-len", 100)?,
        seed: a.get("seed", 1)?,
        only: a.get_str("only").map(String::from),
        json: a.flag("json"),
        nic_backlog_us: a.get("nic-backlog-us", 200)?,
        unsched_bytes: a.get("unsched-bytes", unsched)?,
        max_incoming: a.get("max-incoming", unsched.saturating_mul(8))?,
        fifo_grant_bytes: a.get("fifo-grant-bytes", unsched.saturating_mul(2))?,
        resend_ticks: a.get("resend-ticks", 15)?,
        timeout_ticks: a.get("timeout-ticks", 1000)?,
        probe_s: seconds(a, "probe", 3.0)?,
    };
    if o.resend_ticks == 0 || o.timeout_ticks == 0 || o.unsched_bytes == 0 || o.max_incoming == 0 {
        return Err("Homa's byte and tick settings must be > 0".into());
    }
    SizeDist::from_spec(&o.workload)?;
    if !(1..=32).contains(&o.clients) {
        return Err("--clients must be 1..=32".into());
    }
    if !(o.load > 0.0 && o.load <= 1.5) {
        return Err("--load must be in (0, 1.5]".into());
    }
    if !(1..=8).contains(&o.bands) {
        return Err("--bands must be 1..=8".into());
    }
    if !(1..=100_000).contains(&o.bottleneck_mbps) || o.queue_kb == 0 {
        return Err("--bottleneck-mbps must be 1..=100000 and --queue-kb > 0".into());
    }
    if o.duration_s < 0.5 || o.duration_s > 3600.0 {
        return Err("--duration must be 0.5..=3600 seconds".into());
    }
    if !(12..=1_000_000).contains(&o.reply_len) {
        return Err("--reply-len must be 12..=1000000".into());
    }
    if let Some(p) = &o.only {
        if p != "homa" && p != "tcp" {
            return Err("--only takes homa or tcp".into());
        }
    }
    Ok(o)
}

/// Parses the words after the program name.
pub fn parse(words: Vec<String>) -> Result<Command, String> {
    let a = Args::parse_from(words, &FLAGS)?;
    if a.flag("cleanup") {
        return Ok(Command::Cleanup);
    }
    let mode = a.positional.first().map(String::as_str);
    if a.flag("help") || mode.is_none() {
        return Ok(Command::Help);
    }
    if a.positional.len() > 1 {
        return Err(format!("unexpected argument {:?}", a.positional[1]));
    }
    match mode {
        Some("server") => Ok(Command::Server(server(&a)?)),
        Some("client") => Ok(Command::Client(Box::new(client(&a)?))),
        Some("testbed") => Ok(Command::Testbed(testbed(&a)?)),
        Some("cleanup") => Ok(Command::Cleanup),
        Some(m) => Err(format!(
            "unknown mode {m:?}: server, client, testbed or cleanup"
        )),
        None => Ok(Command::Help),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Command, String> {
        parse(s.split_whitespace().map(String::from).collect())
    }

    #[test]
    fn a_tap_server_gets_its_defaults() {
        let Command::Server(s) = p("server --tap hp0 --ip 10.77.0.2/24").unwrap() else {
            panic!("not a server")
        };
        assert_eq!(s.port, 500);
        assert_eq!(s.duration_s, None);
        assert!(s.verify);
        let Transport::Tap {
            name, ip, bridge, ..
        } = s.transport
        else {
            panic!("not a TAP")
        };
        assert_eq!((name.as_str(), ip.prefix, bridge), ("hp0", 24, None));
        assert_eq!(ip.default_peer().addr, Ipv4Addr::new(10, 77, 0, 1));
    }

    #[test]
    fn a_tcp_server_listens_on_5000_by_default() {
        let Command::Server(s) = p("server --tcp --duration 3").unwrap() else {
            panic!("not a server")
        };
        assert_eq!(s.listen, "0.0.0.0:5000".parse().unwrap());
        assert_eq!(s.duration_s, Some(3.0));
    }

    #[test]
    fn a_client_with_a_load_gets_a_poisson_rate() {
        let cmd = p("client --tap t1 --ip 10.77.0.3/24 --server 10.77.0.2:500 \
                     --workload w4 --load 0.5 --link-mbps 100 --reply-len 100 --json");
        let Command::Client(c) = cmd.unwrap() else {
            panic!("not a client")
        };
        let Pace::Poisson { per_sec } = c.pace else {
            panic!("not open loop")
        };
        // 0.5 * 100 Mbit/s = 6.25 MB/s over a 61,008-byte mean.
        assert!((per_sec - 6.25e6 / 61_008.1).abs() < 0.01, "{per_sec}");
        assert_eq!(c.reply_len, 100);
        assert!(c.json);
    }

    #[test]
    fn a_closed_loop_echo_client_parses() {
        let Command::Client(c) =
            p("client --tcp --server 127.0.0.1:5000 --size 100,1000 --outstanding 4").unwrap()
        else {
            panic!("not a client")
        };
        assert_eq!(c.pace, Pace::Closed { outstanding: 4 });
        assert_eq!(c.reply_len, ECHO);
        assert_eq!(c.dist.bucket_bounds(), [100, 1000]);
    }

    #[test]
    fn mistakes_are_errors() {
        for bad in [
            "client --tcp --server 8.8.8.8:53 --size 10 --rate 1", // public target
            "client --tap t --ip 10.0.0.1/24 --server 10.0.1.1:500 --size 10 --rate 1", // off-link
            "client --tcp --server 127.0.0.1:5000 --size 10",      // no pace
            "client --tcp --server 127.0.0.1:5000 --size 10 --rate 1 --outstanding 2",
            "client --tcp --server 127.0.0.1:5000 --rate 1", // no size
            "server --tap t0",                               // no --ip
            "server --tap t0 --tcp --ip 10.0.0.1/24",
            "server --tap t0 --ip 10.0.0.1/33",
            "server --tcp --bogus 1",
            "server --tap t0 --ip 10.0.0.1/24 --port 40000",
            "testbed --bands 9",
            "testbed --only udp",
            "fly",
        ] {
            assert!(p(bad).is_err(), "accepted: {bad}");
        }
    }

    #[test]
    fn testbed_defaults_and_cleanup() {
        let Command::Testbed(t) = p("testbed").unwrap() else {
            panic!("not testbed")
        };
        assert_eq!((t.clients, t.bands, t.load), (4, 8, 0.8));
        assert_eq!((t.workload.as_str(), t.duration_s), ("w4", 20.0));
        assert!(matches!(p("--cleanup").unwrap(), Command::Cleanup));
        assert!(matches!(p("cleanup").unwrap(), Command::Cleanup));
        assert!(matches!(p("").unwrap(), Command::Help));
    }

    #[test]
    fn cidr_and_mac_parse() {
        let c = Cidr::parse("192.168.1.1/24").unwrap();
        assert!(c.contains(Ipv4Addr::new(192, 168, 1, 200)));
        assert!(!c.contains(Ipv4Addr::new(192, 168, 2, 1)));
        assert_eq!(c.default_peer().addr, Ipv4Addr::new(192, 168, 1, 2));
        assert_eq!(
            parse_mac("02:00:0a:4d:00:01").unwrap(),
            EthernetAddress([2, 0, 10, 77, 0, 1])
        );
        assert!(parse_mac("02:00").is_err());
    }
}
