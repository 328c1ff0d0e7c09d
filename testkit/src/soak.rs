//! The soak run shared by the `loopback` program and the loss-recovery
//! tests: RPCs of mixed sizes between a client and an echo server through
//! fault injection, every reply checked byte for byte, and a final count of
//! what is left in the tables and the pool.

use crate::duo::{self, Endpoints, Storage, CLIENT_IP, CLIENT_MAC, SERVER_IP, SERVER_MAC};
use homa_phy::fault::FaultConfig;
use homa_phy::testing::{fill_pattern, SplitMix64};
use homa_phy::{Duration, Instant};
use homa_stack::{Event, RpcError, RpcHandle};
use std::collections::HashMap;
use std::io::Write;
use std::net::IpAddr;

/// The echo server's port.
pub const PORT: u16 = 500;

/// The boundary sizes the default run sends, one RPC each.
pub const SIZES: [usize; 10] = [
    1, 100, 1423, 1424, 1425, 39_999, 40_000, 40_001, 100_000, 1_000_000,
];

/// The same over IPv6, whose packets carry 1,404 bytes at MTU 1500.
pub const SIZES_V6: [usize; 10] = [
    1, 100, 1403, 1404, 1405, 39_999, 40_000, 40_001, 100_000, 1_000_000,
];

/// A callback given each completed RPC's size, round-trip time and whether
/// its reply matched.
pub type OnComplete = Box<dyn FnMut(usize, Duration, bool)>;

/// What to run.
pub struct Soak {
    /// Sizes to send in order; when `None`, `rpcs` mixed sizes up to `max_size`.
    pub sizes: Option<Vec<usize>>,
    /// RPCs to send when sizes are mixed.
    pub rpcs: usize,
    /// Largest mixed size.
    pub max_size: usize,
    /// RPCs in flight at once.
    pub concurrency: usize,
    /// Faults applied to every frame on receipt.
    pub faults: FaultConfig,
    /// Seed of sizes, payloads and faults.
    pub seed: u64,
    /// Where to write a pcap of the client's frames.
    pub pcap: Option<Box<dyn Write>>,
    /// Stop delivering anything to the server after this many RPCs have
    /// been sent (the peer is gone), to exercise timeouts.
    pub server_vanishes_after: Option<usize>,
    /// Called for each completed RPC with its size and round-trip time.
    pub on_complete: Option<OnComplete>,
    /// Both ends dual-stack and every RPC over IPv6 (link addresses from
    /// neighbour discovery).
    pub ipv6: bool,
}

impl Soak {
    /// The default run: one RPC of each boundary size, no faults.
    pub fn sizes(sizes: &[usize]) -> Soak {
        Soak {
            sizes: Some(sizes.to_vec()),
            rpcs: sizes.len(),
            max_size: 1_000_000,
            concurrency: 1,
            faults: FaultConfig::new(),
            seed: 1,
            pcap: None,
            server_vanishes_after: None,
            ipv6: false,
            on_complete: None,
        }
    }

    /// Message-pool bytes of each endpoint: room for every RPC in flight
    /// (request and response) at the largest size, and two spare.
    fn pool_bytes(&self) -> usize {
        (self.concurrency * 2 + 2) * 1_100_000
    }

    /// RPC slots of each endpoint.
    fn rpc_slots(&self) -> usize {
        self.concurrency + 8
    }

    /// The memory [`run`] takes, about: both endpoints' pools and tables.
    pub fn memory_bytes(&self) -> u64 {
        let tables = self.rpc_slots() * std::mem::size_of::<homa_stack::endpoint::RpcSlot>();
        2 * (self.pool_bytes() + tables) as u64
    }

    /// `rpcs` mixed sizes, 8 at a time.
    pub fn mixed(rpcs: usize, seed: u64) -> Soak {
        Soak {
            sizes: None,
            rpcs,
            concurrency: 8,
            seed,
            ..Soak::sizes(&[])
        }
    }
}

/// What happened.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// RPCs sent.
    pub sent: usize,
    /// RPCs that got a response.
    pub completed: usize,
    /// Responses equal to their requests.
    pub verified: usize,
    /// RPCs that failed.
    pub failed: usize,
    /// Failures that were timeouts (`RpcError::TimedOut`).
    pub timed_out: usize,
    /// Failures for a peer whose link address never resolved
    /// (`RpcError::Unresolved`).
    pub unresolved: usize,
    /// Failures ICMP caused (`RpcError::PortUnreachable`,
    /// `RpcError::PeerUnreachable`).
    pub unreachable: usize,
    /// Failures for a device MTU that shrank (`RpcError::MtuShrank`).
    pub mtu_shrank: usize,
    /// RPC slots and pool bytes still in use at the end, both ends.
    pub leaked: usize,
    /// Virtual time the run took.
    pub elapsed: Duration,
    /// Retransmitted DATA packets, both ends.
    pub retransmissions: u64,
    /// Packets dropped by the stacks, both ends.
    pub drops: u64,
    /// Frames the pcap sink refused, and 1 more when its final flush
    /// failed: the capture is incomplete when this is not 0.
    pub pcap_errors: u64,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "sent {} completed {} verified {} failed {} (timed out {}, unresolved {}, \
             unreachable {}, mtu shrank {}) leaked {}",
            self.sent,
            self.completed,
            self.verified,
            self.failed,
            self.timed_out,
            self.unresolved,
            self.unreachable,
            self.mtu_shrank,
            self.leaked
        )
    }
}

struct Pending {
    seed: u64,
    len: usize,
    started: Instant,
}

/// Runs a soak and reports what happened. With the environment variable
/// `SOAK_DEBUG` set, both endpoints' counters go to stderr at the end.
pub fn run(mut soak: Soak) -> Report {
    let checksums = soak.faults.corrupt_ppm > 0;
    let pool = soak.pool_bytes();
    let mut cmem = Storage::new(soak.rpc_slots(), pool);
    let mut smem = Storage::new(soak.rpc_slots(), pool);
    let mut cconf = duo::config(CLIENT_IP, CLIENT_MAC, soak.seed, checksums);
    let mut sconf = duo::config(SERVER_IP, SERVER_MAC, soak.seed + 1, checksums);
    let dest: IpAddr = if soak.ipv6 {
        cconf.ipv6 = true;
        cconf.ipv6_addrs[0] = Some(duo::CLIENT_IP6);
        sconf.ipv6 = true;
        sconf.ipv6_addrs[0] = Some(duo::SERVER_IP6);
        duo::SERVER_IP6.into()
    } else {
        SERVER_IP.into()
    };
    let client = cmem.endpoint(cconf);
    let server = smem.endpoint(sconf);
    let mut d = duo::duo(client, server, soak.faults, soak.seed, soak.pcap.take());
    let csock = d.a.socket().expect("a socket slot");
    let ssock = d.b.bind(PORT).expect("a socket slot");
    let total = soak.sizes.as_ref().map_or(soak.rpcs, Vec::len);

    let mut rng = SplitMix64::new(soak.seed);
    let mut pending: HashMap<RpcHandle, Pending> = HashMap::new();
    let mut r = Report::default();
    let mut buf = Vec::new();
    let start = d.now;
    d.run_until(Duration::from_secs(3600), |d| {
        while let Some(Event::Request { rpc, len, .. }) = d.b.recv(ssock) {
            buf.resize(len, 0);
            if let Some(m) = d.b.message(rpc) {
                m.copy_to(&mut buf);
            }
            if d.b.reply(rpc, &buf).is_err() {
                let _ = d.b.abort(rpc);
            }
        }
        while let Some(ev) = d.a.recv(csock) {
            match ev {
                Event::Response { rpc, len } => {
                    let Some(p) = pending.remove(&rpc) else {
                        continue;
                    };
                    r.completed += 1;
                    buf.resize(p.len, 0);
                    fill_pattern(p.seed, &mut buf);
                    let ok = len == p.len && d.a.message(rpc).is_some_and(|m| m.eq_bytes(&buf));
                    r.verified += usize::from(ok);
                    if let Some(f) = soak.on_complete.as_mut() {
                        f(p.len, d.now - p.started, ok);
                    }
                    let _ = d.a.release(rpc);
                }
                Event::Failed { rpc, error } => {
                    if pending.remove(&rpc).is_some() {
                        r.failed += 1;
                        match error {
                            RpcError::TimedOut => r.timed_out += 1,
                            RpcError::Unresolved => r.unresolved += 1,
                            RpcError::PortUnreachable | RpcError::PeerUnreachable => {
                                r.unreachable += 1
                            }
                            RpcError::MtuShrank => r.mtu_shrank += 1,
                        }
                    }
                    let _ = d.a.release(rpc);
                }
                Event::Request { .. } => {}
            }
        }
        // New requests go last, after this step's events freed room: an
        // idle pair would otherwise end the run with requests unsent.
        while r.sent < total && pending.len() < soak.concurrency {
            let len = match &soak.sizes {
                Some(sizes) => sizes[r.sent],
                None => mixed_size(&mut rng, soak.max_size),
            };
            let seed = rng.next_u64();
            buf.resize(len, 0);
            fill_pattern(seed, &mut buf);
            match d.a.send_request(csock, dest, PORT, &buf) {
                Ok(h) => {
                    pending.insert(
                        h,
                        Pending {
                            seed,
                            len,
                            started: d.now,
                        },
                    );
                    r.sent += 1;
                }
                Err(_) => break, // pool or table full: retry once RPCs finish
            }
        }
        if soak.server_vanishes_after.is_some_and(|n| r.sent >= n) {
            d.b_gone = true;
        }
        r.completed + r.failed >= total
    });
    if soak.server_vanishes_after.is_some() {
        // The server's own state is gone with it; only the client is judged.
        r.elapsed = d.now - start;
        r.leaked = duo::held(&d.a);
        return r;
    }
    d.drain(Duration::from_secs(1));
    r.pcap_errors = d.da.sink_errors() + u64::from(d.da.flush().is_err());
    r.elapsed = d.now - start;
    r.leaked = d.leaked();
    let (c, s) = (d.a.stats(), d.b.stats());
    r.retransmissions = c.retransmissions + s.retransmissions;
    r.drops = c.drops.total() + s.drops.total();
    // `SOAK_DEBUG=1` prints both endpoints' counters (drops by reason,
    // packets by type) to stderr, for digging into a run.
    if std::env::var_os("SOAK_DEBUG").is_some() {
        eprintln!("client {c}\nserver {s}");
    }
    r
}

/// Mixed sizes: mostly short, some medium, a few up to `max`.
fn mixed_size(rng: &mut SplitMix64, max: usize) -> usize {
    let r = rng.next_f64();
    let hi = if r < 0.6 {
        2_000
    } else if r < 0.9 {
        100_000
    } else {
        max
    };
    rng.range(1, hi.min(max) as u64) as usize
}
