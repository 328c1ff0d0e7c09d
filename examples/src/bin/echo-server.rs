//! An echo server over a Linux TAP interface: every request is answered with
//! its own bytes.
//!
//! ```text
//! sudo ip tuntap add name tap0 mode tap user $USER
//! sudo ip link set tap0 up
//! cargo run -p homa-examples --bin echo-server -- tap0 10.42.0.2
//! ```
//!
//! The endpoint owns the address given (the kernel side of the TAP needs
//! none): it answers ARP and ICMP echo for it, and Homa RPCs to port 500.
//! The poll loop runs on the wall clock and sleeps until the endpoint's next
//! timer (`poll_at`) or until a frame arrives, whichever comes first.

use std::net::Ipv4Addr as StdIpv4;
use std::os::fd::AsRawFd;
use std::process::ExitCode;

use homa_phy::{wait, Instant, TapInterface};
use homa_stack::endpoint::{PeerSlot, RpcSlot, SocketSlot};
use homa_stack::wire::{EthernetAddress, Ipv4Addr};
use homa_stack::{Config, Endpoint, Event};

/// The Homa port the server listens on.
const PORT: u16 = 500;
/// Largest Homa message.
const MAX_MESSAGE: usize = 1_000_000;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [tap_name, ip] = &args[..] else {
        eprintln!("usage: echo-server TAP IPV4   (e.g. echo-server tap0 10.42.0.2)");
        return ExitCode::from(2);
    };
    let Ok(ip) = ip.parse::<StdIpv4>() else {
        eprintln!("echo-server: {ip:?} is not an IPv4 address");
        return ExitCode::from(2);
    };
    match serve(tap_name, ip) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("echo-server: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A locally administered MAC address made from the IPv4 address.
fn mac_for(ip: StdIpv4) -> EthernetAddress {
    let [a, b, c, d] = ip.octets();
    EthernetAddress([0x02, 0x00, a, b, c, d])
}

fn serve(tap_name: &str, ip: StdIpv4) -> std::io::Result<()> {
    let mut tap = TapInterface::new(tap_name)?;

    // The endpoint's memory: 64 RPCs, 2 MiB of message pool in 4 KiB pages.
    let mut rpcs: Vec<RpcSlot> = (0..64).map(|_| RpcSlot::EMPTY).collect();
    let mut peers = [PeerSlot::EMPTY; 16];
    let mut sockets = [SocketSlot::EMPTY; 2];
    let mut pool = vec![0u8; 2 << 20];
    // A secret seed from the OS keys the hash of the RPC index: peers
    // choose ids, and must not be able to choose ids that collide.
    let seed =
        getrandom::u64().map_err(|e| std::io::Error::other(format!("no random seed: {e}")))?;
    let config = Config::new(Ipv4Addr::from(ip.octets()), mac_for(ip), seed);
    let mut endpoint = Endpoint::new(
        config,
        &mut rpcs[..],
        &mut peers[..],
        &mut sockets[..],
        &mut pool[..],
        4096,
    )
    .map_err(|e| std::io::Error::other(format!("endpoint: {e}")))?;
    let socket = endpoint
        .bind(PORT)
        .map_err(|e| std::io::Error::other(format!("bind port {PORT}: {e}")))?;
    println!("echo-server: listening on {ip} port {PORT} ({tap_name})");

    // Homa time is nanoseconds from any origin: here, the program's start.
    let start = std::time::Instant::now();
    let clock = || Instant::from_nanos(start.elapsed().as_nanos() as u64);
    let mut message = vec![0u8; MAX_MESSAGE];
    loop {
        endpoint.poll(clock(), &mut tap);
        while let Some(event) = endpoint.recv(socket) {
            let Event::Request {
                rpc,
                peer,
                port,
                len,
            } = event
            else {
                continue; // a server socket sees only requests
            };
            let request = &mut message[..len];
            if let Some(m) = endpoint.message(rpc) {
                m.copy_to(request);
            }
            match endpoint.reply(rpc, request) {
                Ok(()) => println!("echo-server: {len} bytes from {peer}:{port}"),
                Err(e) => {
                    eprintln!("echo-server: cannot answer {peer}:{port}: {e}");
                    let _ = endpoint.abort(rpc);
                }
            }
        }
        if let Some(e) = tap.take_last_error() {
            eprintln!("echo-server: {e}");
        }
        // The reply only changed state: poll_at is now, and the next poll
        // sends it. With no timer pending, sleep until a frame arrives.
        let timeout = endpoint.poll_at().map(|at| at - clock());
        wait(tap.as_raw_fd(), timeout)?;
    }
}
