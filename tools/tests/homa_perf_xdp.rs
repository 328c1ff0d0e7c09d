//! homa-perf over AF_XDP against homa-perf over TAP and over AF_PACKET, in
//! a network namespace of the test's own: each as client and as server,
//! every byte of every request and response checked, with 1% of the
//! frames dropped at each end each way. Root (namespaces, veth pairs,
//! BPF): `#[ignore = "needs root"]`, run by `sudo cargo test -p homa-tools
//! --features xdp --test homa_perf_xdp -- --ignored` and by CI.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

const EXE: &str = env!("CARGO_BIN_EXE_homa-perf");

/// A namespace with two veth pairs: `xa` (AF_XDP) to `xb`, which is
/// bridged to a TAP on `br0`, and `ya` (AF_XDP) to `yb` (AF_PACKET).
struct Netns(String);

fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .expect("the ip command");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Netns {
    /// Creates the namespace `prefix` followed by the process id.
    fn new(prefix: &str) -> Netns {
        // SAFETY: plain syscall without arguments.
        assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root");
        let ns = Netns(format!("{prefix}{}", std::process::id()));
        ip(&["netns", "add", &ns.0]);
        let n = ns.0.as_str();
        ip(&["-n", n, "link", "set", "lo", "up"]);
        for (a, b) in [("xa", "xb"), ("ya", "yb")] {
            ip(&["-n", n, "link", "add", a, "type", "veth", "peer", "name", b]);
        }
        ip(&["-n", n, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", n, "link", "set", "xb", "master", "br0"]);
        for dev in ["xa", "xb", "ya", "yb", "br0"] {
            ip(&["-n", n, "link", "set", dev, "up"]);
        }
        ns
    }

    fn homa_perf(&self, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.0, EXE]).args(args);
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// Every end drops 1% of its frames each way; debug builds on a shared
/// machine stall for over 100 ms at times, so the RPC timeout is 1 s.
const LOSSY: &[&str] = &["--drop-ppm", "10000", "--timeout-ticks", "1000", "--json"];

fn json_of(out: std::process::Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "no JSON report ({e}): {text:?} {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Starts a server with `device` arguments at 10.79.0.2; returns it ready.
fn server(ns: &Netns, device: &[&str]) -> Child {
    let mut args = vec!["server", "--ip", "10.79.0.2/24", "--duration", "40"];
    args.extend_from_slice(device);
    args.extend_from_slice(LOSSY);
    let mut child = ns
        .homa_perf(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the server");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("server ready") {
                let _ = tx.send(());
            } else {
                eprintln!("server: {line}");
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("the server did not get ready");
    child
}

/// A client with `device` arguments at 10.79.0.3 against the server
/// (started with `server_device`): every RPC completes, intact, both sides
/// saw the same count, and the loss made the senders retransmit.
fn exchange(ns: &Netns, server_device: &[&str], client_device: &[&str]) {
    let s = server(ns, server_device);
    let mut args = vec![
        "client",
        "--ip",
        "10.79.0.3/24",
        "--server",
        "10.79.0.2:500",
        "--size",
        "100,1500,30000,200000",
        "--outstanding",
        "4",
        "--duration",
        "3",
        "--drain",
        "10",
    ];
    args.extend_from_slice(client_device);
    args.extend_from_slice(LOSSY);
    let c = json_of(ns.homa_perf(&args).output().unwrap());
    // SAFETY: signals the server this test started; it reports and exits.
    unsafe { libc::kill(s.id() as libc::pid_t, libc::SIGTERM) };
    let s = json_of(s.wait_with_output().unwrap());
    let what = format!("server {server_device:?}, client {client_device:?}");
    assert!(c["completed"].as_u64().unwrap() >= 20, "{what}: {c}");
    for k in ["failed", "corrupt", "unfinished"] {
        assert_eq!(c[k], 0, "{what}: {k}: {c}");
    }
    assert_eq!(s["requests"], c["completed"], "{what}: {s}");
    assert_eq!(s["corrupt"], 0, "{what}: {s}");
    let resent = |v: &Value| v["extra"]["stack"]["retransmissions"].as_u64().unwrap();
    assert!(resent(&c) + resent(&s) > 0, "{what}: no loss was repaired");
    // The AF_XDP end really went through its rings.
    let xdp = if server_device[0] == "--xdp" { &s } else { &c };
    let dev = &xdp["extra"]["device"];
    assert!(dev["rx_frames"].as_u64().unwrap() > 100, "{what}: {dev}");
    assert!(dev["tx_frames"].as_u64().unwrap() > 100, "{what}: {dev}");
}

#[test]
#[ignore = "needs root"]
fn homa_perf_over_af_xdp_and_over_tap_exchange_rpcs_both_ways_with_loss() {
    let ns = Netns::new("hpxdt");
    let xdp: &[&str] = &["--xdp", "xa"];
    let tap: &[&str] = &["--tap", "hpt0", "--bridge", "br0"];
    exchange(&ns, xdp, tap);
    exchange(&ns, tap, xdp);
}

#[test]
#[ignore = "needs root"]
fn homa_perf_over_af_xdp_and_over_af_packet_exchange_rpcs_both_ways_with_loss() {
    let ns = Netns::new("hpxdp");
    let xdp: &[&str] = &["--xdp", "ya"];
    let packet: &[&str] = &["--iface", "yb"];
    exchange(&ns, xdp, packet);
    exchange(&ns, packet, xdp);
}
