//! The echo examples end to end: `echo-server` and `echo-client` over two
//! TAP interfaces on a bridge, inside a network namespace this test creates
//! and deletes. Needs root (TAP interfaces, namespaces): run with
//! `sudo cargo test -p homa-examples --test echo_tap -- --ignored`; CI does.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const SERVER: &str = env!("CARGO_BIN_EXE_echo-server");
const CLIENT: &str = env!("CARGO_BIN_EXE_echo-client");
const SERVER_IP: &str = "10.78.0.2";
const CLIENT_IP: &str = "10.78.0.1";
const SERVER_IP6: &str = "fd78::2";
const CLIENT_IP6: &str = "fd78::1";
/// The kernel's own address on the bridge, for `ping`.
const BRIDGE_IP: &str = "10.78.0.100/24";

/// The namespace and the server in it; dropping it stops the server and
/// deletes the namespace with its bridge and TAP interfaces, however the
/// test ends.
struct Scratch {
    ns: String,
    server: Option<Child>,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(mut server) = self.server.take() {
            let _ = server.kill();
            let _ = server.wait();
        }
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
    }
}

impl Scratch {
    /// `program args` inside the namespace.
    fn command(&self, program: &str, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns, program]).args(args);
        c
    }

    /// Runs `ip args` inside the namespace and insists that it succeeds.
    fn ip(&self, args: &[&str]) {
        let out = self.command("ip", args).output().expect("run ip");
        assert!(
            out.status.success(),
            "ip {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn text(out: &Output) -> String {
    format!(
        "status {}, stdout {:?}, stderr {:?}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
#[ignore = "needs root"]
fn echo_client_gets_its_bytes_back_from_echo_server_over_tap() {
    // SAFETY: a syscall without arguments.
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root");
    assert!(
        std::path::Path::new("/dev/net/tun").exists(),
        "this test needs /dev/net/tun"
    );

    let mut scratch = Scratch {
        ns: format!("homa-echo-{}", std::process::id()),
        server: None,
    };
    let status = Command::new("ip")
        .args(["netns", "add", &scratch.ns])
        .status()
        .expect("the ip command (iproute2)");
    assert!(status.success(), "ip netns add {}", scratch.ns);
    scratch.ip(&["link", "set", "lo", "up"]);
    scratch.ip(&["link", "add", "br0", "type", "bridge"]);
    for tap in ["tap0", "tap1"] {
        scratch.ip(&["tuntap", "add", "name", tap, "mode", "tap"]);
        scratch.ip(&["link", "set", tap, "master", "br0"]);
        scratch.ip(&["link", "set", tap, "up"]);
    }
    scratch.ip(&["addr", "add", BRIDGE_IP, "dev", "br0"]);
    scratch.ip(&["link", "set", "br0", "up"]);

    // The server prints one line when it listens and one per request.
    let mut server = scratch
        .command(SERVER, &["tap0", SERVER_IP, SERVER_IP6])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start echo-server");
    let stdout = server.stdout.take().unwrap();
    scratch.server = Some(server);
    let (lines_tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    let next_line = || lines.recv_timeout(Duration::from_secs(10));
    let ready = next_line().expect("echo-server did not start");
    assert!(
        ready.contains("listening on 10.78.0.2, fd78::2 port 500"),
        "{ready}"
    );

    // The endpoint answers ARP and ICMP echo for its address.
    let ping = scratch
        .command("ping", &["-c", "1", "-W", "2", SERVER_IP])
        .output()
        .expect("ping (iputils-ping)");
    assert!(ping.status.success(), "ping {SERVER_IP}: {}", text(&ping));

    // One short RPC, then one of 100,000 bytes (70 packets, granted).
    let long: String = (0..100_000u32)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    // Then one byte over IPv6 (neighbour discovery instead of ARP).
    for (client_ip, server_ip, message) in [
        (CLIENT_IP, SERVER_IP, "hello, homa"),
        (CLIENT_IP, SERVER_IP, long.as_str()),
        (CLIENT_IP6, SERVER_IP6, "!"),
    ] {
        let out = scratch
            .command(CLIENT, &["tap1", client_ip, server_ip, message])
            .output()
            .expect("run echo-client");
        assert!(out.status.success(), "echo-client: {}", text(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let answered = format!("echo-client: {server_ip} answered {message:?} in ");
        assert!(stdout.starts_with(&answered), "{}", text(&out));
        let served = next_line().expect("echo-server logged no request");
        let expected = format!("echo-server: {} bytes from {client_ip}:", message.len());
        assert!(served.starts_with(&expected), "{served}");
    }
}
