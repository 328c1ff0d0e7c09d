//! homa-perf's command line: clap's definitions, the checks that involve
//! more than one value (device, targets, sizes and pace), and the options
//! they give, which the client, server and testbed loops read (the Homa
//! and testbed options are clap's structs themselves, so the two are one
//! module).

use anyhow::Context as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use clap::builder::RangedU64ValueParser;
use clap::{Args, Parser, Subcommand, ValueEnum};
use homa_stack::wire::EthernetAddress;

use super::{DEFAULT_BOTTLENECK_MBPS, MAX_POOL_MB};
use crate::cli;
use crate::perf::addr::{is_private, parse_unicast_mac, Cidr};
use crate::perf::arrivals::Pace;
use crate::perf::payload::{request_len, ECHO, HEADER_LEN};
use crate::perf::workload::SizeDist;

const DEVICE_HELP: &str = "\
DEVICE (Homa over homa-stack, or the kernel's TCP), exactly one of:
  --tap NAME --ip ADDR/NN [--bridge BR] [--host-ip ADDR/NN]
        a TAP device, created and configured if it does not exist: joined to
        bridge BR (created if missing, with --host-ip as its address), or
        else given --host-ip (default: the first other address of the subnet)
  --iface NAME --ip ADDR/NN         an AF_PACKET socket on an existing interface
  --xdp NAME --ip ADDR/NN [--xdp-queue Q]
        an AF_XDP socket on queue Q (default 0) of an existing interface; an
        XDP program gives it the frames for --ip, the kernel keeps the rest
        (built with the `xdp` feature)
  --tcp                             kernel TCP, one connection per server,
                                    length-prefixed messages
--ip and --host-ip are host addresses of one subnet: IPv4 A.B.C.D/NN, private
(10/8, 172.16/12, 192.168/16) with a prefix of 8..=30, or IPv6 ADDR/NN,
unique-local (fc00::/7) with a prefix of 16..=126 (e.g. fd00::2/64; the
endpoint then speaks IPv6 only, on that address and its EUI-64 link-local
one). IPv6 servers are given as [ADDR]:PORT.";

/// Measure homa-stack over a TAP device or an AF_PACKET socket, and the
/// kernel's TCP the same way; `testbed` compares them under load in network
/// namespaces it builds and removes.
#[derive(Parser, Debug)]
#[command(name = "homa-perf", version, arg_required_else_help = true,
          mut_subcommands = |s: clap::Command| s.mut_args(cli::negative_values))]
pub struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub command: Sub,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Sub {
    /// Serve requests until --duration ends or SIGINT/SIGTERM; exits 1 if a
    /// request was corrupt or could not be answered.
    #[command(after_help = DEVICE_HELP)]
    #[command(mut_arg("pool_mb", |a| a.required(false).default_value("256")))]
    Server(ServerArgs),
    /// Issue requests for --duration seconds; exits 1 if any RPC failed,
    /// was corrupt or unfinished.
    #[command(after_help = DEVICE_HELP)]
    #[command(mut_arg("pool_mb", |a| a.required(false).default_value("64")))]
    Client(Box<ClientArgs>),
    /// Build the namespace testbed and compare Homa with TCP (root); exits 1
    /// if any RPC failed, was corrupt or refused, or was unfinished after a
    /// measured run's drain.
    Testbed(TestbedOpts),
    /// Remove leftover testbed namespaces (root).
    Cleanup,
}

/// The device options.
#[derive(Args, Debug, Clone)]
#[group(skip)]
#[command(group(clap::ArgGroup::new("device").required(true).multiple(false)))]
pub struct DeviceArgs {
    /// homa-stack over this TAP device (created if missing).
    #[arg(long, value_name = "NAME", group = "device", help_heading = "Device")]
    pub tap: Option<String>,
    /// homa-stack over an AF_PACKET socket on this existing interface.
    #[arg(long, value_name = "NAME", group = "device", help_heading = "Device")]
    pub iface: Option<String>,
    /// homa-stack over an AF_XDP socket on this existing interface.
    #[arg(long, value_name = "NAME", group = "device", help_heading = "Device")]
    pub xdp: Option<String>,
    /// The interface queue the AF_XDP socket binds (--xdp), 0..=255.
    #[arg(long, value_name = "Q", default_value_t = 0, help_heading = "Device",
          value_parser = clap::value_parser!(u32).range(0..=255))]
    pub xdp_queue: u32,
    /// The kernel's TCP instead of homa-stack.
    #[arg(long, group = "device", help_heading = "Device")]
    pub tcp: bool,
    /// homa-stack's address and subnet, IPv4 or IPv6 (--tap, --iface, --xdp).
    #[arg(long, value_name = "ADDR/NN", value_parser = Cidr::parse_host, help_heading = "Device")]
    pub ip: Option<Cidr>,
    /// Bridge to join a created TAP to (created if missing).
    #[arg(long, value_name = "BR", help_heading = "Device")]
    pub bridge: Option<String>,
    /// The kernel's address on the TAP or bridge (--tap), --ip's family.
    #[arg(long, value_name = "ADDR/NN", value_parser = Cidr::parse_host, help_heading = "Device")]
    pub host_ip: Option<Cidr>,
}

fn neighbor(s: &str) -> anyhow::Result<(IpAddr, EthernetAddress)> {
    let (ip, mac) = s
        .split_once('=')
        .with_context(|| format!("{s}: expected IP=MAC"))?;
    let ip: IpAddr = ip
        .parse()
        .map_err(|_| anyhow::anyhow!("{s}: {ip} is neither an IPv4 nor an IPv6 address"))?;
    if !is_private(ip) || ip.is_loopback() {
        anyhow::bail!(
            "{s}: the address must be private (10/8, 172.16/12, 192.168/16) or \
             unique-local (fc00::/7)"
        );
    }
    Ok((ip, parse_unicast_mac(mac)?))
}

/// homa-stack's settings (the server's and the client's).
#[derive(Args, Debug, Clone, PartialEq, Eq)]
#[command(next_help_heading = "Homa")]
pub struct HomaOpts {
    /// Pacer link rate, 1..=400000 Mbit/s.
    #[arg(long, value_name = "N", default_value_t = 1000,
          value_parser = clap::value_parser!(u32).range(1..=400_000))]
    pub link_mbps: u32,
    /// How far ahead of the wire the pacer queues, 0..=1000000 us.
    #[arg(long, value_name = "US", default_value_t = 200,
          value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub nic_backlog_us: u64,
    /// homa-stack's MAC (default: derived from --ip, or the interface's).
    #[arg(long, value_name = "XX:XX:XX:XX:XX:XX", value_parser = parse_unicast_mac)]
    pub mac: Option<EthernetAddress>,
    /// Static neighbours, no ARP for them.
    #[arg(long = "neighbor", value_name = "IP=MAC[,IP=MAC]", value_delimiter = ',', value_parser = neighbor)]
    pub neighbors: Vec<(IpAddr, EthernetAddress)>,
    /// Write every frame homa-stack sends and receives to this pcap file
    /// (not with --tcp: capture the kernel's TCP with tcpdump).
    #[arg(long, value_name = "FILE", conflicts_with = "tcp")]
    pub pcap: Option<String>,
    /// Frames dropped at random, in parts per million, 0..=1000000, each
    /// way (homa_phy's fault injector between the device and the stack).
    #[arg(long, value_name = "PPM", default_value_t = 0, conflicts_with = "tcp",
          value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub drop_ppm: u32,
    /// RPC slots, 1..=60000.
    #[arg(long, value_name = "N", default_value_t = 1024,
          value_parser = RangedU64ValueParser::<usize>::new().range(1..=60_000))]
    pub max_rpcs: usize,
    /// Message pool in MiB, 1..=4096.
    #[arg(long, value_name = "N", value_parser = RangedU64ValueParser::<usize>::new().range(1..=MAX_POOL_MB))]
    pub pool_mb: usize,
    /// Bytes sent before the first grant, 1..=1000000 (default Linux's).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub unsched_bytes: Option<u32>,
    /// Cap on granted-but-unreceived bytes, 1..=100000000 (default Linux's).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000_000))]
    pub max_incoming: Option<u32>,
    /// Bytes of one FIFO grant, 1..=1000000 (default Linux's).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub fifo_grant_bytes: Option<u32>,
    /// Silent ms before a RESEND and between RESENDs, 1..=100000 (default 5).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub resend_ticks: Option<u32>,
    /// Silent ms before an RPC fails, 1..=1000000 (default 100).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub timeout_ticks: Option<u32>,
}

/// `homa-perf server`.
#[derive(Args, Debug, Clone)]
pub struct ServerArgs {
    #[command(flatten)]
    device: DeviceArgs,
    /// Homa port 1..=32767 (default 500), or TCP port 1..=65535 (default 5000).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    port: Option<u16>,
    /// TCP: the listening address, IP:PORT or [IPV6]:PORT (default 0.0.0.0
    /// and --port).
    #[arg(long, value_name = "IP:PORT")]
    listen: Option<SocketAddr>,
    /// Stop after this many seconds, 0..=86400 (default: at a signal).
    #[arg(long, value_name = "S", value_parser = cli::seconds)]
    duration: Option<f64>,
    /// Do not check request bytes.
    #[arg(long)]
    no_verify: bool,
    /// The report as JSON.
    #[arg(long)]
    json: bool,
    /// No progress lines.
    #[arg(long)]
    quiet: bool,
    #[command(flatten)]
    homa: HomaOpts,
}

/// `testbed --only`: the one protocol to run, homa-stack or the kernel's
/// TCP (no doc comments on the variants: clap would print them in the help).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Only {
    Homa,
    Tcp,
}

fn reply_len(s: &str) -> anyhow::Result<u32> {
    if s == "echo" {
        return Ok(ECHO);
    }
    match s.parse::<u32>() {
        Ok(n) if (1..=cli::MAX_MESSAGE).contains(&n) => Ok(n),
        _ => Err(anyhow::anyhow!(
            "{s} is not 1..={} or echo",
            cli::MAX_MESSAGE
        )),
    }
}

/// `homa-perf client`.
#[derive(Args, Debug, Clone)]
pub struct ClientArgs {
    #[command(flatten)]
    device: DeviceArgs,
    /// The servers, used in turn, each A.B.C.D:PORT or [IPV6]:PORT: private,
    /// unique-local or loopback, on-link (in --ip's subnet) for Homa.
    #[arg(
        long,
        value_name = "IP:PORT[,IP:PORT]",
        value_delimiter = ',',
        required = true
    )]
    server: Vec<SocketAddr>,
    /// Request sizes, equally likely, each 1..=1000000.
    #[arg(long, value_name = "N[,N]", group = "sizes")]
    size: Option<String>,
    /// Request sizes: w1..w5 (cp_node tables, 1 MB cap) or a `bytes,cdf` CSV.
    #[arg(long, value_name = "W|FILE.csv", group = "sizes")]
    workload: Option<String>,
    /// Open loop: Poisson arrivals at this many RPCs/s, in (0, 10000000].
    #[arg(long, value_name = "RPCS_PER_S", group = "pace", value_parser = cli::rate)]
    rate: Option<f64>,
    /// Open loop: Poisson arrivals carrying this share of --link-mbps in
    /// request bytes, in (0, 1.5].
    #[arg(long, value_name = "FRACTION", group = "pace", value_parser = cli::load)]
    load: Option<f64>,
    /// Closed loop: this many RPCs outstanding, 1..=65535.
    #[arg(long, value_name = "N", group = "pace",
          value_parser = RangedU64ValueParser::<usize>::new().range(1..=65_535))]
    outstanding: Option<usize>,
    /// Seconds of issuing RPCs, 0..=86400.
    #[arg(long, value_name = "S", default_value_t = 10.0, value_parser = cli::seconds)]
    duration: f64,
    /// Seconds allowed after that for outstanding RPCs, 0..=86400.
    #[arg(long, value_name = "S", default_value_t = 5.0, value_parser = cli::seconds)]
    drain: f64,
    /// Response length, 1..=1000000, or echo (the request back).
    #[arg(long, value_name = "N|echo", default_value = "echo", value_parser = reply_len)]
    reply_len: u32,
    /// Seed of sizes, arrivals and payloads.
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
    /// Start at this wall-clock time (Unix ms), to start clients together.
    #[arg(long, value_name = "UNIX_MS")]
    start_at_ms: Option<u64>,
    /// Do not check response bytes.
    #[arg(long)]
    no_verify: bool,
    /// The report as JSON.
    #[arg(long)]
    json: bool,
    /// No per-RPC error lines and no progress lines.
    #[arg(long)]
    quiet: bool,
    #[command(flatten)]
    homa: HomaOpts,
}

/// `homa-perf testbed`: its options as given, and the Homa settings derived
/// from them.
#[derive(Args, Debug, Clone)]
pub struct TestbedOpts {
    /// Client hosts, 1..=32.
    #[arg(long, value_name = "N", default_value_t = 4,
          value_parser = RangedU64ValueParser::<usize>::new().range(1..=32))]
    pub clients: usize,
    /// Request sizes: w1..w5, `N[,N]` or a `bytes,cdf` CSV.
    #[arg(long, value_name = "W", default_value = "w4")]
    pub workload: String,
    /// Offered load, a fraction of the bottleneck in (0, 1.5].
    #[arg(long, value_name = "FRACTION", default_value_t = 0.8, value_parser = cli::load)]
    pub load: f64,
    /// Bottleneck rate, 1..=100000 Mbit/s.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_BOTTLENECK_MBPS,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub bottleneck_mbps: u32,
    /// Strict-priority bands at the bottleneck, 1..=8.
    #[arg(long, value_name = "N", default_value_t = 8,
          value_parser = clap::value_parser!(u8).range(1..=8))]
    pub bands: u8,
    /// Seconds per protocol, 0.5..=3600.
    #[arg(long = "duration", value_name = "S", default_value_t = 20.0, value_parser = testbed_seconds)]
    pub duration_s: f64,
    /// Drain seconds per protocol, 0..=86400.
    #[arg(long = "drain", value_name = "S", default_value_t = 5.0, value_parser = cli::seconds)]
    pub drain_s: f64,
    /// Byte limit of each band's queue, 1..=1000000 KB.
    #[arg(long, value_name = "KB", default_value_t = 1500,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub queue_kb: u32,
    /// Response length, 12..=1000000.
    #[arg(long, value_name = "N", default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(HEADER_LEN as i64..=i64::from(cli::MAX_MESSAGE)))]
    pub reply_len: u32,
    /// Base seed.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
    /// Run only one protocol.
    #[arg(long, value_enum)]
    pub only: Option<Only>,
    /// The results as JSON.
    #[arg(long)]
    pub json: bool,
    /// Both protocols over IPv6 (fd00:77::/64) instead of IPv4 (10.77.0.0/24).
    #[arg(long)]
    pub ipv6: bool,
    /// Homa over AF_XDP on each host's veth instead of a bridged TAP.
    #[arg(long)]
    pub xdp: bool,
    /// Seconds of the closed-loop capacity probe per protocol, 0..=3600 (0: none).
    #[arg(long = "probe", value_name = "S", default_value_t = 3.0, value_parser = probe_seconds)]
    pub probe_s: f64,
    /// Pacer queue allowance of the Homa endpoints, 0..=1000000 us.
    #[arg(long, value_name = "US", default_value_t = 200, help_heading = "Homa",
          value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub nic_backlog_us: u64,
    /// Round trip the byte settings are scaled to, 1..=1000000 us.
    #[arg(long, value_name = "US", default_value_t = 250, help_heading = "Homa",
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub rtt_us: u32,
    /// Unscheduled bytes, 1..=1000000 (default: one --rtt-us at the bottleneck).
    #[arg(long, value_name = "N", help_heading = "Homa",
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub unsched_bytes: Option<u32>,
    /// Granted-but-unreceived cap, 1..=100000000 (default 8 x unscheduled).
    #[arg(long, value_name = "N", help_heading = "Homa",
          value_parser = clap::value_parser!(u32).range(1..=100_000_000))]
    pub max_incoming: Option<u32>,
    /// FIFO grant size, 1..=1000000 (default 2 x unscheduled).
    #[arg(long, value_name = "N", help_heading = "Homa",
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub fifo_grant_bytes: Option<u32>,
    /// RESEND ticks (ms), 1..=100000.
    #[arg(long, value_name = "N", default_value_t = 15, help_heading = "Homa",
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub resend_ticks: u32,
    /// Timeout ticks (ms), 1..=1000000.
    #[arg(long, value_name = "N", default_value_t = 1000, help_heading = "Homa",
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub timeout_ticks: u32,
}

fn testbed_seconds(s: &str) -> anyhow::Result<f64> {
    let v = cli::seconds(s)?;
    if (0.5..=3600.0).contains(&v) {
        Ok(v)
    } else {
        Err(anyhow::anyhow!("{v} is not in [0.5, 3600] seconds"))
    }
}

fn probe_seconds(s: &str) -> anyhow::Result<f64> {
    let v = cli::seconds(s)?;
    if v <= 3600.0 {
        Ok(v)
    } else {
        Err(anyhow::anyhow!("{v} is not in [0, 3600] seconds"))
    }
}

impl DeviceArgs {
    fn transport(&self) -> anyhow::Result<Transport> {
        if self.tap.is_none() && (self.bridge.is_some() || self.host_ip.is_some()) {
            anyhow::bail!("--bridge and --host-ip are for --tap");
        }
        if self.tcp {
            if self.ip.is_some() {
                anyhow::bail!("--ip is for --tap/--iface/--xdp; TCP uses the kernel's addresses");
            }
            return Ok(Transport::Tcp);
        }
        let ip = self.ip.context(
            "--tap, --iface and --xdp need --ip A.B.C.D/NN or IPV6/NN (homa-stack's address)",
        )?;
        if let Some(name) = &self.xdp {
            return Ok(Transport::Xdp {
                name: name.clone(),
                ip,
                queue: self.xdp_queue,
            });
        }
        if let Some(name) = &self.tap {
            if let Some(h) = self.host_ip {
                if h.addr == ip.addr {
                    anyhow::bail!("--host-ip must differ from --ip");
                }
                if h.prefix != ip.prefix || !ip.contains(h.addr) {
                    anyhow::bail!("--host-ip {h} is not in --ip's subnet {ip}");
                }
            }
            return Ok(Transport::Tap {
                name: name.clone(),
                ip,
                bridge: self.bridge.clone(),
                host_ip: self.host_ip,
            });
        }
        Ok(Transport::Iface {
            name: self.iface.clone().unwrap_or_default(),
            ip,
        })
    }
}

impl ServerArgs {
    fn check(&self) -> anyhow::Result<ServerOpts> {
        let transport = self.device.transport()?;
        let tcp = transport == Transport::Tcp;
        if self.listen.is_some() && !tcp {
            anyhow::bail!("--listen is for --tcp");
        }
        let port = self.port.unwrap_or(if tcp { 5000 } else { 500 });
        if !tcp && !(1..0x8000).contains(&port) {
            anyhow::bail!("--port {port}: Homa server ports are 1..=32767");
        }
        Ok(ServerOpts {
            transport,
            homa: self.homa.clone(),
            port,
            listen: self
                .listen
                .unwrap_or(SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), port)),
            duration_s: self.duration,
            verify: !self.no_verify,
            json: self.json,
            quiet: self.quiet,
        })
    }
}

impl ClientArgs {
    fn check(&self) -> anyhow::Result<ClientOpts> {
        let transport = self.device.transport()?;
        for t in &self.server {
            if !is_private(t.ip()) {
                anyhow::bail!(
                    "--server {t}: only private (10/8, 172.16/12, 192.168/16), unique-local \
                     (fc00::/7) or loopback addresses are allowed"
                );
            }
            if let Some(ip) = transport.homa_ip() {
                if !ip.contains(t.ip()) || t.ip() == ip.addr {
                    anyhow::bail!(
                        "--server {t} is not another host in {ip}: homa-stack has no router, \
                         the server must be on-link"
                    );
                }
                if !(1..0x8000).contains(&t.port()) {
                    anyhow::bail!("--server {t}: Homa server ports are 1..=32767");
                }
            } else if t.port() == 0 {
                anyhow::bail!("--server {t}: the port must be 1..=65535");
            }
        }
        let dist = match (&self.size, &self.workload) {
            (Some(s), None) => SizeDist::fixed_spec(s)?,
            (None, Some(w)) => SizeDist::from_spec(w)?,
            _ => {
                anyhow::bail!("give one of --size N[,N...] or --workload W")
            }
        };
        let homa = self.homa.clone();
        let pace = match (self.rate, self.load, self.outstanding) {
            (Some(per_sec), None, None) => Pace::Poisson { per_sec },
            (None, Some(load), None) => {
                let bytes_per_sec = load * f64::from(homa.link_mbps) * 1e6 / 8.0;
                Pace::Poisson {
                    per_sec: bytes_per_sec / dist.mean(),
                }
            }
            (None, None, Some(outstanding)) => Pace::Closed { outstanding },
            _ => anyhow::bail!("give one of --rate, --load, --outstanding"),
        };
        Ok(ClientOpts {
            transport,
            homa,
            targets: self.server.clone(),
            dist,
            pace,
            duration_s: self.duration,
            drain_s: self.drain,
            reply_len: self.reply_len,
            seed: self.seed,
            verify: !self.no_verify,
            json: self.json,
            start_at_ms: self.start_at_ms,
            quiet: self.quiet,
        })
    }
}

impl TestbedOpts {
    /// Homa's unscheduled bytes: one round trip's worth at the bottleneck
    /// (`--rtt-us`), in whole packets, unless given.
    pub fn unsched_bytes(&self) -> u32 {
        let rtt_bytes = u64::from(self.bottleneck_mbps) * u64::from(self.rtt_us) / 8;
        let whole = (rtt_bytes.div_ceil(1424).max(1) * 1424).min(1_000_000) as u32;
        self.unsched_bytes.unwrap_or(whole)
    }

    /// Homa's cap on granted-but-unreceived bytes: 8 round trips' worth
    /// unless given, so Homa's queue at the bottleneck stays well under its
    /// 5 ms RESEND timer.
    pub fn max_incoming(&self) -> u32 {
        let default = self.unsched_bytes().saturating_mul(8).min(100_000_000);
        self.max_incoming.unwrap_or(default)
    }

    /// Homa's FIFO grant size: two round trips' worth unless given.
    pub fn fifo_grant_bytes(&self) -> u32 {
        let default = self.unsched_bytes().saturating_mul(2).min(1_000_000);
        self.fifo_grant_bytes.unwrap_or(default)
    }
}

impl Sub {
    /// The options the programs run with: the checks that involve more
    /// than one value (the device and the targets, sizes and pace).
    pub fn check(&self) -> anyhow::Result<Command> {
        Ok(match self {
            Sub::Server(a) => Command::Server(a.check()?),
            Sub::Client(a) => Command::Client(Box::new(a.check()?)),
            Sub::Testbed(a) => {
                SizeDist::from_spec(&a.workload)?;
                Command::Testbed(a.clone())
            }
            Sub::Cleanup => Command::Cleanup,
        })
    }
}

/// Where the messages go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// homa-stack over a TAP device.
    Tap {
        /// Interface name.
        name: String,
        /// homa-stack's own address and subnet (IPv4, or IPv6 for an
        /// IPv6-only endpoint).
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
    /// homa-stack over an AF_XDP socket.
    Xdp {
        /// Interface name.
        name: String,
        /// homa-stack's own address and subnet.
        ip: Cidr,
        /// The interface queue the socket binds.
        queue: u32,
    },
    /// The kernel's TCP.
    Tcp,
}

impl Transport {
    /// homa-stack's address and subnet, if Homa.
    pub fn homa_ip(&self) -> Option<Cidr> {
        match self {
            Transport::Tap { ip, .. } | Transport::Iface { ip, .. } | Transport::Xdp { ip, .. } => {
                Some(*ip)
            }
            Transport::Tcp => None,
        }
    }
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
    pub listen: SocketAddr,
    /// Stop after this many seconds (`None`: at a signal).
    pub duration_s: Option<f64>,
    /// Check every request byte.
    pub verify: bool,
    /// JSON output.
    pub json: bool,
    /// No progress lines.
    pub quiet: bool,
}

/// `client` options.
#[derive(Debug, Clone)]
pub struct ClientOpts {
    /// Device or TCP.
    pub transport: Transport,
    /// Endpoint settings (Homa).
    pub homa: HomaOpts,
    /// Servers, used in turn.
    pub targets: Vec<SocketAddr>,
    /// Request sizes.
    pub dist: SizeDist,
    /// Pacing.
    pub pace: Pace,
    /// Seconds during which RPCs are issued.
    pub duration_s: f64,
    /// Seconds allowed after that for outstanding RPCs.
    pub drain_s: f64,
    /// Response length, or [`ECHO`](crate::perf::payload::ECHO).
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

impl ClientOpts {
    /// What a user should know of how requests are sent: that sizes under
    /// the payload header are raised to it when the header must carry a
    /// reply length (an echo of any size goes at its size).
    pub fn size_note(&self) -> Option<String> {
        let min = self.dist.min() as usize;
        (request_len(min, self.reply_len) > min).then(|| {
            format!(
                "requests under {HEADER_LEN} B are sent as {HEADER_LEN} B: their header carries \
                 --reply-len (with --reply-len echo they go at their size, without one)"
            )
        })
    }
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
}
