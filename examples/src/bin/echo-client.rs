//! An echo client over a Linux TAP interface: sends one request to an
//! echo server, checks that the response holds the same bytes, and prints it.
//!
//! ```text
//! sudo ip tuntap add name tap1 mode tap user $USER
//! sudo ip link set tap1 up
//! cargo run -p homa-examples --bin echo-client -- tap1 10.42.0.1 10.42.0.2 hello
//! cargo run -p homa-examples --bin echo-client -- tap1 fd42::1 fd42::2 hello
//! ```
//!
//! The arguments are the TAP interface, the client's own address, the
//! server's address (both IPv4 or both IPv6) and the message. The server must be reachable at the
//! Ethernet level (e.g. both TAPs on one bridge). The poll loop runs on the
//! wall clock and sleeps until the endpoint's next timer (`poll_at`) or until
//! a frame arrives.

use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::process::ExitCode;

use homa_phy::{wait, Instant, TapInterface};
use homa_stack::endpoint::{PeerSlot, RpcSlot, SocketSlot};
use homa_stack::wire::{EthernetAddress, Ipv4Addr};
use homa_stack::{Config, Endpoint, Event};

/// The Homa port of the echo server.
const SERVER_PORT: u16 = 500;
/// Give up after this long even if the endpoint has not timed the RPC out.
const DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

const USAGE: &str = "usage: echo-client TAP OWN_ADDRESS SERVER_ADDRESS MESSAGE
       (e.g. echo-client tap1 10.42.0.1 10.42.0.2 hello,
        or echo-client tap1 fd42::1 fd42::2 hello)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if matches!(&args[..], [a] if a == "--help" || a == "-h") {
        println!("Sends one Homa RPC to an echo server over a TAP interface and checks the reply.\n{USAGE}");
        return ExitCode::SUCCESS;
    }
    let [tap_name, ip, server_ip, message] = &args[..] else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let (Ok(ip), Ok(server_ip)) = (ip.parse::<IpAddr>(), server_ip.parse::<IpAddr>()) else {
        eprintln!("echo-client: {ip:?} and {server_ip:?} must be IP addresses");
        return ExitCode::from(2);
    };
    if ip.is_ipv4() != server_ip.is_ipv4() {
        eprintln!("echo-client: {ip} and {server_ip} must be of one family (IPv4 or IPv6)");
        return ExitCode::from(2);
    }
    match call(tap_name, ip, server_ip, message.as_bytes()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("echo-client: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A locally administered MAC address made from the address's last four
/// bytes.
fn mac_for(ip: IpAddr) -> EthernetAddress {
    let [a, b, c, d] = match ip {
        IpAddr::V4(v4) => v4.octets(),
        IpAddr::V6(v6) => {
            let o = v6.octets();
            [o[12], o[13], o[14], o[15]]
        }
    };
    EthernetAddress([0x02, 0x00, a, b, c, d])
}

fn call(tap_name: &str, ip: IpAddr, server_ip: IpAddr, request: &[u8]) -> std::io::Result<()> {
    let fail = |what: String| std::io::Error::other(what);
    let mut tap = TapInterface::new(tap_name)?;

    // The endpoint's memory: a few RPCs, 2 MiB of message pool in 4 KiB pages.
    let mut rpcs: Vec<RpcSlot> = (0..4).map(|_| RpcSlot::EMPTY).collect();
    let mut peers = [PeerSlot::EMPTY; 4];
    let mut sockets = [SocketSlot::EMPTY; 2];
    let mut pool = vec![0u8; 2 << 20];
    // A secret seed from the OS keys the endpoint's hash; RPC ids start
    // from it too, so a client run again does not reuse the ids of its last
    // run: the server may still hold those RPCs (the final ACK rides on
    // later packets) and would resend their old responses.
    let seed = getrandom::u64().map_err(|e| fail(format!("no random seed: {e}")))?;
    let config = match ip {
        IpAddr::V4(v4) => Config::new(v4, mac_for(ip), seed),
        IpAddr::V6(v6) => {
            // IPv6 only: link addresses from neighbour discovery.
            let mut c = Config::new(Ipv4Addr::UNSPECIFIED, mac_for(ip), seed);
            c.ipv6 = true;
            c.ipv6_addrs[0] = Some(v6);
            c
        }
    };
    let mut endpoint = Endpoint::new(
        config,
        &mut rpcs[..],
        &mut peers[..],
        &mut sockets[..],
        &mut pool[..],
        4096,
    )
    .map_err(|e| fail(format!("endpoint: {e}")))?;
    let socket = endpoint
        .socket()
        .map_err(|e| fail(format!("socket: {e}")))?;
    // Only queues the request: the first poll resolves the server's MAC
    // address (ARP or neighbour discovery), then sends.
    let rpc = endpoint
        .send_request(socket, server_ip, SERVER_PORT, request)
        .map_err(|e| fail(format!("send: {e}")))?;

    let start = std::time::Instant::now();
    let clock = || Instant::from_nanos(start.elapsed().as_nanos() as u64);
    let response = loop {
        endpoint.poll(clock(), &mut tap);
        match endpoint.recv(socket) {
            Some(Event::Response { rpc: done, len }) if done == rpc => {
                let mut response = vec![0u8; len];
                if let Some(m) = endpoint.message(rpc) {
                    m.copy_to(&mut response);
                }
                endpoint.release(rpc).map_err(|e| fail(format!("{e}")))?;
                break response;
            }
            Some(Event::Failed { error, .. }) => {
                return Err(fail(format!("RPC to {server_ip} failed: {error}")));
            }
            _ => {}
        }
        if start.elapsed() > DEADLINE {
            return Err(fail(format!("no answer from {server_ip} in {DEADLINE:?}")));
        }
        // Sleep until the next timer or a frame, and at most until the deadline.
        let limit = homa_phy::Duration::from_millis(100);
        let timeout = endpoint
            .poll_at()
            .map_or(limit, |at| (at - clock()).min(limit));
        wait(tap.as_raw_fd(), Some(timeout))?;
    };

    if response != request {
        return Err(fail(format!(
            "the response ({} bytes) differs from the request ({} bytes)",
            response.len(),
            request.len()
        )));
    }
    println!(
        "echo-client: {} answered {:?} in {:?}",
        server_ip,
        String::from_utf8_lossy(&response),
        start.elapsed()
    );
    Ok(())
}
