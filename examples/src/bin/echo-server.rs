//! An echo server over a Linux TAP interface: every request is answered with
//! its own bytes.
//!
//! ```text
//! sudo ip tuntap add name tap0 mode tap user $USER
//! sudo ip link set tap0 up
//! cargo run -p homa-examples --bin echo-server -- tap0 10.42.0.2
//! cargo run -p homa-examples --bin echo-server -- tap0 10.42.0.2 fd42::2
//! ```
//!
//! The endpoint owns the addresses given, at most one IPv4 and two IPv6
//! (the kernel side of the TAP needs none): it answers ARP, neighbour
//! discovery and ICMP echo for them, and Homa RPCs to port 500.
//! The poll loop runs on the wall clock and sleeps until the endpoint's next
//! timer (`poll_at`) or until a frame arrives, whichever comes first.

use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::process::ExitCode;

use homa_phy::{wait, Instant, TapInterface};
use homa_stack::config::MAX_IPV6_ADDRS;
use homa_stack::endpoint::{PeerSlot, RpcSlot, SocketSlot};
use homa_stack::wire::{EthernetAddress, Ipv4Addr};
use homa_stack::{Config, Endpoint, Event};

/// The Homa port the server listens on.
const PORT: u16 = 500;
/// Largest Homa message.
const MAX_MESSAGE: usize = 1_000_000;

const USAGE: &str = "usage: echo-server TAP ADDRESS...  (e.g. echo-server tap0 10.42.0.2 fd42::2)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if matches!(&args[..], [a] if a == "--help" || a == "-h") {
        println!(
            "Answers Homa RPCs to port {PORT} over a TAP interface with their own bytes.\n{USAGE}"
        );
        return ExitCode::SUCCESS;
    }
    let Some((tap_name, addrs)) = args.split_first().filter(|(_, a)| !a.is_empty()) else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let config = match config(addrs) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("echo-server: {e}");
            return ExitCode::from(2);
        }
    };
    match serve(tap_name, config, addrs) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("echo-server: {e}");
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

/// The endpoint's configuration for `addrs`: at most one IPv4 address and
/// [`MAX_IPV6_ADDRS`] IPv6 ones (IPv6 on when there is any).
fn config(addrs: &[String]) -> Result<Config, String> {
    let mut ips = Vec::new();
    for a in addrs {
        ips.push(
            a.parse::<IpAddr>()
                .map_err(|_| format!("{a:?} is not an IPv4 or IPv6 address"))?,
        );
    }
    let v4: Vec<_> = ips.iter().filter(|a| a.is_ipv4()).collect();
    let v6: Vec<_> = ips
        .iter()
        .filter_map(|a| match a {
            IpAddr::V6(v6) => Some(*v6),
            IpAddr::V4(_) => None,
        })
        .collect();
    if v4.len() > 1 || v6.len() > MAX_IPV6_ADDRS {
        return Err(format!(
            "at most one IPv4 and {MAX_IPV6_ADDRS} IPv6 addresses"
        ));
    }
    let ipv4 = match v4.first() {
        Some(IpAddr::V4(a)) => *a,
        _ => Ipv4Addr::UNSPECIFIED,
    };
    // A secret seed from the OS keys the hash of the RPC index: peers
    // choose ids, and must not be able to choose ids that collide.
    let seed = getrandom::u64().map_err(|e| format!("no random seed: {e}"))?;
    let mut config = Config::new(ipv4, mac_for(ips[0]), seed);
    config.ipv6 = !v6.is_empty();
    for (slot, a) in config.ipv6_addrs.iter_mut().zip(v6) {
        *slot = Some(a);
    }
    Ok(config)
}

fn serve(tap_name: &str, config: Config, addrs: &[String]) -> std::io::Result<()> {
    let mut tap = TapInterface::new(tap_name)?;

    // The endpoint's memory: 64 RPCs, 2 MiB of message pool in 4 KiB pages.
    let mut rpcs: Vec<RpcSlot> = (0..64).map(|_| RpcSlot::EMPTY).collect();
    let mut peers = [PeerSlot::EMPTY; 16];
    let mut sockets = [SocketSlot::EMPTY; 2];
    let mut pool = vec![0u8; 2 << 20];
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
    println!(
        "echo-server: listening on {} port {PORT} ({tap_name})",
        addrs.join(", ")
    );

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
