//! homa-perf end to end: kernel TCP over loopback (always), homa-stack over
//! two TAP devices in a network namespace, and a one-second testbed run
//! (both need root with /dev/net/tun and `ip`: `#[ignore = "needs root"]`,
//! run by `sudo cargo test -p homa-tools --test homa_perf -- --ignored`
//! and by CI).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

const EXE: &str = env!("CARGO_BIN_EXE_homa-perf");

/// Fails, saying why, where the privileged tests cannot run.
fn assert_privileges() {
    // SAFETY: plain syscall without arguments.
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root");
    assert!(
        std::path::Path::new("/dev/net/tun").exists(),
        "this test needs /dev/net/tun"
    );
    assert!(
        Command::new("ip").arg("-V").output().is_ok(),
        "this test needs the ip command"
    );
}

/// A server child: its stderr is watched for the ready line.
fn start_server(cmd: &mut Command) -> (Child, mpsc::Receiver<()>) {
    let mut child = cmd
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
    (child, rx)
}

fn json_of(out: &Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "no JSON report ({e}): stdout {text:?} stderr {:?}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Asks a server to stop (it reports on SIGTERM) and reads its report.
fn stop(child: Child) -> Value {
    // SAFETY: signals a child this test started.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
    json_of(&child.wait_with_output().unwrap())
}

fn assert_clean_client(v: &Value) {
    assert_eq!(v["kind"], "client", "{v}");
    assert!(v["completed"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["failed"], 0, "{v}");
    assert_eq!(v["corrupt"], 0, "{v}");
}

/// A Homa client's run (`out`) finished every RPC cleanly, and the server,
/// stopped now, answered each and saw nothing corrupt.
fn homa_run_was_clean(out: &Output, server: Child) {
    let v = json_of(out);
    assert_clean_client(&v);
    assert_eq!(v["protocol"], "homa");
    assert_eq!(v["unfinished"], 0, "{v}");
    let s = stop(server);
    assert_eq!(s["requests"], v["completed"], "{s}");
    assert_eq!(s["corrupt"], 0, "{s}");
}

/// A TCP server on a free loopback port, ready: it and its address.
fn tcp_server() -> (Child, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let (server, ready) = start_server(Command::new(EXE).args([
        "server",
        "--tcp",
        "--listen",
        &listen,
        "--duration",
        "15",
        "--json",
    ]));
    ready
        .recv_timeout(Duration::from_secs(10))
        .expect("server ready");
    (server, listen)
}

#[test]
fn tcp_client_and_server_over_loopback() {
    let (server, listen) = tcp_server();
    let out = Command::new(EXE)
        .args([
            "client",
            "--tcp",
            "--server",
            &listen,
            "--size",
            "100,5000,200000",
            "--outstanding",
            "3",
            "--duration",
            "1",
            "--json",
        ])
        .output()
        .unwrap();
    let v = json_of(&out);
    assert_clean_client(&v);
    assert_eq!(v["protocol"], "tcp");
    let s = stop(server);
    assert_eq!(s["requests"], v["completed"], "{s}");
    assert_eq!(s["corrupt"], 0, "{s}");
}

/// `--size 1` sends 1 byte, which the server echoes (a request shorter
/// than the header has none); asking for a reply length raises it to the
/// 12-byte header that carries it, and the client says so.
#[test]
fn short_requests_go_at_their_size_unless_they_carry_a_reply_length() {
    for (reply_len, sent, answer) in [("echo", 1, 1), ("100", 12, 100)] {
        let (server, listen) = tcp_server();
        let out = Command::new(EXE)
            .args(["client", "--tcp", "--server", &listen, "--size", "1"])
            .args(["--reply-len", reply_len, "--outstanding", "1"])
            .args(["--duration", "0.5", "--json"])
            .output()
            .unwrap();
        let v = json_of(&out);
        assert_clean_client(&v);
        let n = v["completed"].as_u64().unwrap();
        assert_eq!(v["request_bytes"], sent * n, "{v}");
        assert_eq!(v["response_bytes"], answer * n, "{v}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.contains("sent as 12 B"), sent == 12, "{err}");
        let s = stop(server);
        assert_eq!(s["requests"], n, "{s}");
        assert_eq!(s["headerless"], if sent == 1 { n } else { 0 }, "{s}");
        assert_eq!(s["corrupt"], 0, "{s}");
    }
}

/// A network namespace of the test's own, deleted however the test ends.
struct Netns(String);

impl Netns {
    /// Creates the namespace `prefix` followed by the process id.
    fn new(prefix: &str) -> Netns {
        let ns = Netns(format!("{prefix}{}", std::process::id()));
        assert!(Command::new("ip")
            .args(["netns", "add", &ns.0])
            .status()
            .unwrap()
            .success());
        ns
    }

    /// `program` with `args`, to run inside the namespace.
    fn command(&self, program: &str, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.0, program]).args(args);
        c
    }

    /// Starts a homa-perf server on TAP device `tap` bridged to `br0`,
    /// where the host has `host_ip`, at address `ip`, for `duration`
    /// seconds; returns it once it is ready.
    fn tap_server(&self, tap: &str, host_ip: &str, ip: &str, duration: &str) -> Child {
        let (server, ready) = start_server(&mut self.command(
            EXE,
            &[
                "server",
                "--tap",
                tap,
                "--bridge",
                "br0",
                "--host-ip",
                host_ip,
                "--ip",
                ip,
                "--duration",
                duration,
                "--timeout-ticks",
                TIMEOUT_TICKS,
                "--json",
            ],
        ));
        ready
            .recv_timeout(Duration::from_secs(10))
            .expect("server ready");
        server
    }

    /// Runs a homa-perf client on TAP device `tap` bridged to `br0`, at
    /// address `ip`, against `server` for two seconds, four RPCs of
    /// `sizes` outstanding.
    fn tap_client(&self, tap: &str, ip: &str, server: &str, sizes: &str) -> Output {
        self.command(
            EXE,
            &[
                "client",
                "--tap",
                tap,
                "--bridge",
                "br0",
                "--ip",
                ip,
                "--server",
                server,
                "--size",
                sizes,
                "--outstanding",
                "4",
                "--duration",
                "2",
                "--timeout-ticks",
                TIMEOUT_TICKS,
                "--json",
            ],
        )
        .output()
        .unwrap()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// Debug builds on a shared 2-core machine stall for over 100 ms at times,
/// and every RPC times out on that much silence (docs/protocol.md 4.7):
/// both ends get 1 s, ten times Linux's 100 ms.
const TIMEOUT_TICKS: &str = "1000";

#[test]
#[ignore = "needs root"]
fn homa_client_and_server_over_tap_in_a_namespace() {
    assert_privileges();
    let ns = Netns::new("hpt");
    let server = ns.tap_server("hpt0", "10.77.9.1/24", "10.77.9.2/24", "15");
    let sizes = "100,1500,100000,1000000";
    let out = ns.tap_client("hpt1", "10.77.9.3/24", "10.77.9.2:500", sizes);
    homa_run_was_clean(&out, server);
}

#[test]
#[ignore = "needs root"]
fn over_ipv6_the_kernel_pings_and_resolves_the_endpoint_and_rpcs_complete() {
    assert_privileges();
    let ns = Netns::new("hp6t");
    let server = ns.tap_server("hp6t0", "fd00:77:9::1/64", "fd00:77:9::2/64", "20");

    // The kernel finds the endpoint by its own neighbour discovery (a
    // solicitation to the solicited-node group, our advertisement), then
    // gets its echo requests answered.
    let ping = ns
        .command("ping", &["-6", "-c", "3", "-W", "2", "fd00:77:9::2"])
        .output()
        .expect("ping (iputils-ping)");
    let ping_out = String::from_utf8_lossy(&ping.stdout);
    eprintln!("{ping_out}");
    assert!(
        ping.status.success(),
        "ping -6: {ping_out} {:?}",
        ping.stderr
    );
    assert!(
        ping_out.contains("3 packets transmitted, 3 received"),
        "{ping_out}"
    );
    let neigh = ns
        .command("ip", &["-6", "neigh", "show", "fd00:77:9::2", "dev", "br0"])
        .output()
        .unwrap();
    let neigh = String::from_utf8_lossy(&neigh.stdout);
    eprintln!("{neigh}");
    // The MAC homa-perf derives from fd00:77:9::2.
    assert!(neigh.contains("lladdr 02:06:00:00:00:02"), "{neigh:?}");

    // A second homa-stack endpoint, over IPv6 to the first.
    let sizes = "100,1404,1405,100000,1000000";
    let out = ns.tap_client("hp6t1", "fd00:77:9::3/64", "[fd00:77:9::2]:500", sizes);
    homa_run_was_clean(&out, server);
}

/// Whether interface `name` exists in namespace `ns`.
fn link_exists(ns: &Netns, name: &str) -> bool {
    ns.command("ip", &["link", "show", name])
        .output()
        .unwrap()
        .status
        .success()
}

/// A capture that cannot be written fails the run with a message that
/// names the file, for a server (at once, before serving) and a client; a
/// capture that can be written is complete, and the run is clean.
#[test]
#[ignore = "needs root"]
fn a_capture_that_cannot_be_written_fails_the_run() {
    assert_privileges();
    let ns = Netns::new("hpc");
    let tap = |name: &str, ip: &str| {
        vec![
            "--tap".to_string(),
            name.to_string(),
            "--bridge".into(),
            "br0".into(),
            "--host-ip".into(),
            "10.77.8.1/24".into(),
            "--ip".into(),
            ip.to_string(),
            "--pcap".into(),
            "/dev/full".into(),
        ]
    };
    let server: Vec<String> = ["server".to_string()]
        .into_iter()
        .chain(tap("hpc0", "10.77.8.2/24"))
        .chain(["--duration".into(), "5".into()])
        .collect();
    let client: Vec<String> = ["client".to_string()]
        .into_iter()
        .chain(tap("hpc1", "10.77.8.3/24"))
        .chain(
            [
                "--server",
                "10.77.8.2:500",
                "--size",
                "100",
                "--rate",
                "10",
                "--duration",
                "0.2",
            ]
            .map(String::from),
        )
        .collect();
    for args in [server, client] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = ns.command(EXE, &args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{}: {err}", args[0]);
        assert!(
            err.contains("homa-perf: --pcap /dev/full: No space left on device"),
            "{}: {err}",
            args[0]
        );
    }

    // A capture that can be written: the run is clean, the file holds it.
    let pcap = format!(
        "{}/hpc-{}.pcap",
        env!("CARGO_TARGET_TMPDIR"),
        std::process::id()
    );
    let (server, ready) = start_server(&mut ns.command(
        EXE,
        &[
            "server",
            "--tap",
            "hpc0",
            "--bridge",
            "br0",
            "--host-ip",
            "10.77.8.1/24",
            "--ip",
            "10.77.8.2/24",
            "--duration",
            "15",
            "--timeout-ticks",
            TIMEOUT_TICKS,
            "--json",
            "--pcap",
            &pcap,
        ],
    ));
    ready
        .recv_timeout(Duration::from_secs(10))
        .expect("server ready");
    let out = ns.tap_client("hpc1", "10.77.8.3/24", "10.77.8.2:500", "100,5000");
    homa_run_was_clean(&out, server);
    let bytes = std::fs::read(&pcap).unwrap();
    let _ = std::fs::remove_file(&pcap);
    // The file header and at least a request and a response.
    assert!(bytes.len() > 24 + 2 * (16 + 100), "{} bytes", bytes.len());
}

/// A bridge homa-perf created is removed when its run ends; one that
/// existed before is left as it was.
#[test]
#[ignore = "needs root"]
fn a_bridge_homa_perf_created_is_removed_after_the_run() {
    assert_privileges();
    let ns = Netns::new("hpb");
    let run = |bridge: &str| {
        let out = ns
            .command(
                EXE,
                &[
                    "server",
                    "--tap",
                    "hpb0",
                    "--bridge",
                    bridge,
                    "--host-ip",
                    "10.77.6.1/24",
                    "--ip",
                    "10.77.6.2/24",
                    "--duration",
                    "0.2",
                    "--quiet",
                ],
            )
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    run("hpbr");
    assert!(
        !link_exists(&ns, "hpbr"),
        "the bridge homa-perf made is left behind"
    );
    assert!(
        !link_exists(&ns, "hpb0"),
        "the TAP homa-perf made is left behind"
    );
    let made = ns
        .command("ip", &["link", "add", "hpkeep", "type", "bridge"])
        .status()
        .unwrap();
    assert!(made.success());
    run("hpkeep");
    assert!(
        link_exists(&ns, "hpkeep"),
        "a bridge that existed before was removed"
    );
}

#[test]
#[ignore = "needs root"]
fn a_short_testbed_run_compares_both_protocols_and_cleans_up() {
    short_testbed_run(&[]);
}

#[test]
#[ignore = "needs root"]
fn a_short_testbed_run_over_ipv6_compares_both_protocols_by_priority() {
    let v = short_testbed_run(&["--ipv6"]);
    assert!(v["testbed"].as_str().unwrap().contains("over IPv6"), "{v}");
    // Homa's packets reach more than one band: the bottleneck's IPv6
    // filters read the priority from the traffic class (unmatched
    // packets would all go to the lowest band).
    let homa = &v["phases"][0];
    assert_eq!(homa["protocol"], "homa");
    let bands = homa["bottleneck"]["band_bytes"].as_array().unwrap();
    let used = bands.iter().filter(|b| b.as_u64().unwrap() > 0).count();
    assert!(used > 1, "{bands:?}");
}

/// Runs a one-second testbed with `extra` options, checks it as a whole
/// (no failures, the exit status, no namespace left) and returns its JSON.
fn short_testbed_run(extra: &[&str]) -> Value {
    assert_privileges();
    let child = Command::new(EXE)
        .args([
            "testbed",
            "--clients",
            "2",
            "--duration",
            "1",
            "--drain",
            "2",
            "--probe",
            "1",
            "--json",
        ])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let tag = format!("hp{}-", child.id());
    let out = child.wait_with_output().unwrap();
    let v = json_of(&out);
    let probes = v["capacity_probes"].as_array().unwrap();
    assert_eq!(probes.len(), 2, "{v}");
    let phases = v["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 2);
    let mut unfinished = 0;
    for p in phases {
        assert_eq!(p["clients"]["failed"], 0, "{p}");
        assert_eq!(p["clients"]["corrupt"], 0, "{p}");
        assert_eq!(p["server"]["failed"], 0, "{p}");
        assert!(p["clients"]["completed"].as_u64().unwrap() > 0, "{p}");
        // Losses at the hosts' TAP queues are counted beside the
        // bottleneck's (they caused the retransmissions of runs with no
        // bottleneck drop).
        assert!(p["tap_queue_drops"]["server"].is_u64(), "{p}");
        assert!(p["tap_queue_drops"]["clients"].is_u64(), "{p}");
        unfinished += p["clients"]["unfinished"].as_u64().unwrap();
    }
    // The exit status says whether every RPC of the runs finished (a debug
    // build's Homa client can fall behind and leave a few unfinished).
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.success(), unfinished == 0, "{stderr}");
    if unfinished > 0 {
        assert!(stderr.contains("unfinished"), "{stderr}");
    }
    assert!(v["tcp_over_homa"].as_f64().unwrap() > 0.0, "{v}");
    let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&list.stdout).contains(&tag),
        "the testbed left namespaces behind"
    );
    v
}

/// Mistakes on the command line are refused before anything runs, with
/// exit status 2 and the accepted range; no arguments prints the usage.
#[test]
fn bad_command_lines_are_refused_with_status_2() {
    let run = |args: &[&str]| Command::new(EXE).args(args).output().unwrap();
    let none = run(&[]);
    assert_eq!(none.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&none.stderr).contains("Usage: homa-perf"));
    for (args, says) in [
        (
            &["server", "--tap", "t0", "--ip", "0.0.0.0/24"][..],
            "must be private",
        ),
        (
            &["server", "--tcp", "--pool-mb", "10000000"][..],
            "1..=4096",
        ),
        (
            &["server", "--tcp", "stray"][..],
            "unexpected argument 'stray'",
        ),
        (
            &["server", "--tcp", "--bogus"][..],
            "unexpected argument '--bogus'",
        ),
        (&["testbed", "--load", "2.5"][..], "(0, 1.5]"),
        // homa-stack's capture and fault injection are not the kernel's TCP.
        (
            &["server", "--tcp", "--pcap", "x.pcap"][..],
            "'--tcp' cannot be used with '--pcap <FILE>'",
        ),
        (
            &[
                "client",
                "--tcp",
                "--server",
                "127.0.0.1:1",
                "--size",
                "10",
                "--rate",
                "1",
                "--drop-ppm",
                "10",
            ][..],
            "'--tcp' cannot be used with '--drop-ppm <PPM>'",
        ),
        (
            &[
                "client",
                "--tcp",
                "--server",
                "127.0.0.1:1",
                "--size",
                "10",
                "--outstanding",
                "100000",
            ][..],
            "1..=65535",
        ),
    ] {
        let out = run(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
