//! The endpoint makes no heap allocation: a global allocator that counts
//! calls while an endpoint runs, across RPCs of every size, and through the
//! paths that end RPCs without a response: timeouts, ICMP, full tables, an
//! exhausted pool and a client that vanishes before acking.
//!
//! Each scenario runs inside the counting window from its first API call to
//! its last poll; everything the endpoints use (tables, pools, rings,
//! buffers) is allocated before. Counting is per thread, so the tests may
//! run in parallel.

use homa_phy::fault::FaultConfig;
use homa_phy::testing::Wired;
use homa_phy::Duration;
use homa_stack::{Endpoint, Event, RpcError, RpcHandle, SendError, SocketHandle};
use homa_testkit::duo::{self, Duo, Storage, CLIENT_IP, CLIENT_MAC, SERVER_IP, SERVER_MAC};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static WATCHING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn note_allocation() {
    // `try_with`: an allocation while the thread's locals are torn down
    // is not ours to count.
    let _ = WATCHING.try_with(|w| {
        if w.get() {
            ALLOCATIONS.with(|a| a.set(a.get() + 1));
        }
    });
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_allocation();
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_allocation();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f` and returns how many allocations this thread made meanwhile.
fn count<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let before = ALLOCATIONS.with(Cell::get);
    WATCHING.with(|w| w.set(true));
    let r = f();
    WATCHING.with(|w| w.set(false));
    (r, ALLOCATIONS.with(Cell::get) - before)
}

/// Runs `f` inside the counting window and fails if it allocated.
fn no_alloc<R>(scenario: &str, f: impl FnOnce() -> R) -> R {
    let (r, n) = count(f);
    assert_eq!(n, 0, "{scenario}: the endpoints allocated {n} times");
    r
}

/// A client and a server over `cmem` and `smem`, on a link with `faults`.
fn pair<'a>(cmem: &'a mut Storage, smem: &'a mut Storage, faults: FaultConfig) -> Duo<'a> {
    let client = cmem.endpoint(duo::config(CLIENT_IP, CLIENT_MAC, 1, true));
    let server = smem.endpoint(duo::config(SERVER_IP, SERVER_MAC, 2, true));
    duo::duo(client, server, faults, 7, None)
}

/// Steps the pair until `done` says so or `limit` of virtual time passed;
/// returns whether `done` was reached. No allocation of its own.
fn run(d: &mut Duo<'_>, limit: Duration, done: impl FnMut(&mut Duo<'_>) -> bool) -> bool {
    d.run_until(limit, done)
}

/// The client's next event for `sock`, released, as (rpc, Ok(len) or the
/// error).
fn client_event(
    ep: &mut Endpoint<'_>,
    sock: SocketHandle,
) -> Option<(RpcHandle, Result<usize, RpcError>)> {
    let (rpc, outcome) = match ep.recv(sock)? {
        Event::Response { rpc, len } => (rpc, Ok(len)),
        Event::Failed { rpc, error } => (rpc, Err(error)),
        Event::Request { .. } => panic!("a client socket got a request"),
    };
    ep.release(rpc).unwrap();
    Some((rpc, outcome))
}

#[test]
fn endpoints_make_no_heap_allocation_while_they_run() {
    // Everything the endpoints use is allocated here, before watching starts.
    let mut cmem = Storage::new(16, 4 << 20);
    let mut smem = Storage::new(16, 4 << 20);
    let mut faults = FaultConfig::new();
    faults.drop_ppm = 20_000;
    let mut d = pair(&mut cmem, &mut smem, faults);
    let csock = d.a.socket().unwrap();
    let ssock = d.b.bind(500).unwrap();
    let request = vec![0x5au8; 1_000_000];
    let mut reply_buf = vec![0u8; 1_000_000];
    let mut total = 0;
    for &len in &[1usize, 1424, 1425, 40_001, 100_000, 1_000_000] {
        let (h, n) = count(|| {
            d.a.send_request(csock, SERVER_IP, 500, &request[..len])
                .unwrap()
        });
        total += n;
        let (done, n) = count(|| {
            run(&mut d, Duration::from_secs(10), |d| {
                if let Some(Event::Request { rpc, len, .. }) = d.b.recv(ssock) {
                    d.b.message(rpc).unwrap().copy_to(&mut reply_buf[..len]);
                    d.b.reply(rpc, &reply_buf[..len]).unwrap();
                }
                if let Some(Event::Response { rpc, len: got }) = d.a.recv(csock) {
                    assert_eq!(rpc, h);
                    assert_eq!(got, len);
                    d.a.release(rpc).unwrap();
                    return true;
                }
                false
            })
        });
        total += n;
        assert!(done, "RPC of {len} bytes did not finish");
    }
    assert_eq!(total, 0, "the endpoints allocated {total} times");
    // The counter itself works: an allocation while watching is seen.
    let (_, n) = count(|| std::hint::black_box(vec![1u8; 16]));
    assert_eq!(n, 1);
}

#[test]
fn a_server_that_vanishes_times_out_without_allocating() {
    let (mut cmem, mut smem) = (Storage::new(16, 1 << 20), Storage::new(16, 1 << 20));
    let mut d = pair(&mut cmem, &mut smem, FaultConfig::new());
    let csock = d.a.socket().unwrap();
    let ssock = d.b.bind(500).unwrap();
    let request = vec![7u8; 100_000];
    let mut failed = [None; 2];
    let ended = no_alloc("server vanishes", || {
        // One RPC first, so the client knows the server's link address (a
        // peer that never answered ARP fails `Unresolved` instead).
        d.a.send_request(csock, SERVER_IP, 500, &request[..1])
            .unwrap();
        let answered = run(&mut d, Duration::from_secs(1), |d| {
            if let Some(Event::Request { rpc, .. }) = d.b.recv(ssock) {
                d.b.reply(rpc, &request[..1]).unwrap();
            }
            client_event(&mut d.a, csock).is_some()
        });
        assert!(answered);
        d.b_gone = true;
        d.a.send_request(csock, SERVER_IP, 500, &request[..1])
            .unwrap();
        d.a.send_request(csock, SERVER_IP, 500, &request).unwrap();
        let mut n = 0;
        run(&mut d, Duration::from_secs(2), |d| {
            while let Some((_, outcome)) = client_event(&mut d.a, csock) {
                failed[n] = Some(outcome);
                n += 1;
            }
            n == 2
        })
    });
    assert!(ended, "the RPCs to a vanished server never ended");
    assert_eq!(failed, [Some(Err(RpcError::TimedOut)); 2]);
    assert_eq!(d.a.stats().timeouts, 2);
    assert_eq!(d.a.rpcs_in_use(), 0);
    assert_eq!(d.a.pool_free_bytes(), d.a.pool_capacity_bytes());
}

#[test]
fn icmp_port_unreachable_both_ways_without_allocating() {
    let (mut cmem, mut smem) = (Storage::new(16, 1 << 20), Storage::new(16, 1 << 20));
    let mut d = pair(&mut cmem, &mut smem, FaultConfig::new());
    let csock = d.a.socket().unwrap();
    let ssock = d.b.bind(500).unwrap();
    let request = vec![7u8; 5_000];
    // Server to client: a request to a port nobody listens on.
    let outcome = no_alloc("ICMP from the server", || {
        d.a.send_request(csock, SERVER_IP, 501, &request).unwrap();
        let mut outcome = None;
        run(&mut d, Duration::from_secs(1), |d| {
            outcome = client_event(&mut d.a, csock).map(|(_, o)| o);
            outcome.is_some()
        });
        outcome
    });
    assert_eq!(outcome, Some(Err(RpcError::PortUnreachable)));
    // One per DATA packet that reached the closed port; the first failed
    // the RPC, the rest (each quoting 528 bytes) arrive after it.
    let sent = d.b.stats().icmp_unreachable_sent;
    assert!(sent >= 1);
    let all = no_alloc("ICMP errors after the failure", || {
        run(&mut d, Duration::from_millis(10), |d| {
            d.a.stats().icmp_unreachable_received == sent
        })
    });
    assert!(
        all,
        "{} ICMP errors sent, {} received",
        sent,
        d.a.stats().icmp_unreachable_received
    );
    // Client to server: the client's socket closes before the response,
    // whose DATA then finds no port; the server frees its RPC.
    let freed = no_alloc("ICMP from the client", || {
        let gone = d.a.socket().unwrap();
        d.a.send_request(gone, SERVER_IP, 500, &request).unwrap();
        let mut replied = false;
        run(&mut d, Duration::from_secs(1), |d| {
            if let Some(Event::Request { rpc, .. }) = d.b.recv(ssock) {
                d.a.close(gone);
                d.b.reply(rpc, &request).unwrap();
                replied = true;
            }
            replied && d.b.rpcs_in_use() == 0
        })
    });
    assert!(freed, "the server kept the response to a closed port");
    assert!(d.a.stats().icmp_unreachable_sent >= 1);
    assert!(d.b.stats().icmp_unreachable_received >= 1);
    assert_eq!(d.b.stats().server_timeouts, 0, "freed by ICMP");
    assert_eq!(d.b.pool_free_bytes(), d.b.pool_capacity_bytes());
}

#[test]
fn full_rpc_tables_on_both_sides_without_allocating() {
    // The client holds 8 RPCs, the server 4.
    let (mut cmem, mut smem) = (Storage::new(8, 1 << 20), Storage::new(4, 1 << 20));
    let mut d = pair(&mut cmem, &mut smem, FaultConfig::new());
    let csock = d.a.socket().unwrap();
    let ssock = d.b.bind(500).unwrap();
    let request = vec![7u8; 2_000];
    let mut held = [None; 4];
    let (table_full, completed, ended) = no_alloc("full tables", || {
        for _ in 0..8 {
            d.a.send_request(csock, SERVER_IP, 500, &request).unwrap();
        }
        let table_full = d.a.send_request(csock, SERVER_IP, 500, &request);
        // The server holds its first four requests until it has turned
        // others away for want of a slot.
        let mut n = 0;
        run(&mut d, Duration::from_millis(50), |d| {
            while let Some(Event::Request { rpc, .. }) = d.b.recv(ssock) {
                held[n] = Some(rpc);
                n += 1;
            }
            n == 4 && d.b.stats().drops.rpc_table_full > 0
        });
        for rpc in held.iter().flatten() {
            d.b.reply(*rpc, &request[..10]).unwrap();
        }
        let (mut completed, mut ended) = (0, 0);
        run(&mut d, Duration::from_secs(2), |d| {
            while let Some(Event::Request { rpc, .. }) = d.b.recv(ssock) {
                d.b.reply(rpc, &request[..10]).unwrap();
            }
            while let Some((_, outcome)) = client_event(&mut d.a, csock) {
                ended += 1;
                completed += usize::from(outcome.is_ok());
            }
            ended == 8
        });
        (table_full, completed, ended)
    });
    assert!(matches!(table_full, Err(SendError::TableFull)));
    assert_eq!(held.iter().flatten().count(), 4);
    assert!(d.b.stats().drops.rpc_table_full > 0);
    assert_eq!(ended, 8, "every RPC ends once the server answers");
    assert!(completed >= 4, "the held requests complete ({completed})");
}

#[test]
fn an_exhausted_pool_without_allocating() {
    // The server's pool takes one 600 kB request, not two; the client's
    // holds two requests, not three.
    let (mut cmem, mut smem) = (Storage::new(16, 1536 << 10), Storage::new(16, 1 << 20));
    let mut d = pair(&mut cmem, &mut smem, FaultConfig::new());
    let csock = d.a.socket().unwrap();
    let ssock = d.b.bind(500).unwrap();
    let request = vec![7u8; 600_000];
    let (refused, waited, outcomes) = no_alloc("pool exhaustion", || {
        let a = d.a.send_request(csock, SERVER_IP, 500, &request).unwrap();
        let mut first = None;
        run(&mut d, Duration::from_secs(1), |d| {
            if let Some(Event::Request { rpc, .. }) = d.b.recv(ssock) {
                first = Some(rpc);
            }
            first.is_some()
        });
        // The second request does not fit beside the first (held by the
        // server application): it waits for pool pages.
        let b = d.a.send_request(csock, SERVER_IP, 500, &request).unwrap();
        // A third is larger than what is left of the client's pool.
        let refused = d.a.send_request(csock, SERVER_IP, 500, &request);
        let waiting = |d: &Duo<'_>| d.b.rpc_info().any(|r| r.in_length > 0 && !r.in_has_buffer);
        let waited = run(&mut d, Duration::from_millis(5), |d| waiting(d));
        // Answering the first frees its pages; the second then completes.
        d.b.reply(first.unwrap(), &request[..1]).unwrap();
        let mut outcomes = [None, None];
        run(&mut d, Duration::from_secs(1), |d| {
            if let Some(Event::Request { rpc, .. }) = d.b.recv(ssock) {
                d.b.reply(rpc, &request[..1]).unwrap();
            }
            while let Some((rpc, outcome)) = client_event(&mut d.a, csock) {
                assert!(rpc == a || rpc == b);
                outcomes[usize::from(rpc == b)] = Some(outcome);
            }
            outcomes.iter().all(Option::is_some)
        });
        (refused, waited, outcomes)
    });
    assert!(matches!(refused, Err(SendError::PoolFull)), "{refused:?}");
    assert!(waited, "the second request never waited for pool pages");
    assert_eq!(outcomes, [Some(Ok(1)), Some(Ok(1))]);
    assert!(d.b.stats().drops.no_buffer > 0);
}

#[test]
fn a_client_that_vanishes_before_acking_without_allocating() {
    let (mut cmem, mut smem) = (Storage::new(16, 1 << 20), Storage::new(16, 1 << 20));
    let mut d = pair(&mut cmem, &mut smem, FaultConfig::new());
    let csock = d.a.socket().unwrap();
    let ssock = d.b.bind(500).unwrap();
    let response = vec![7u8; 100_000];
    let freed_after = no_alloc("client vanishes", || {
        d.a.send_request(csock, SERVER_IP, 500, &response[..100])
            .unwrap();
        // Run until the server has sent its whole response.
        run(&mut d, Duration::from_secs(1), |d| {
            if let Some(Event::Request { rpc, .. }) = d.b.recv(ssock) {
                d.b.reply(rpc, &response).unwrap();
            }
            d.b.rpc_info()
                .any(|r| r.out_length > 0 && r.out_sent == r.out_length)
        });
        // The client vanishes: it is never polled again and what is sent
        // to it is lost. The server asks for an ACK, then gives up.
        let gone_at = d.now;
        let end = d.now + Duration::from_secs(1);
        while d.now < end && d.b.rpcs_in_use() > 0 {
            d.b.poll(d.now, &mut d.db);
            d.db.wire().discard_sent();
            d.db.wire().discard_received();
            if d.b.rpcs_in_use() == 0 {
                // Freed at this poll; the next one may be far off (a
                // neighbour's probe), so the clock stops here.
                break;
            }
            d.now = match d.b.poll_at() {
                Some(t) if t > d.now => t,
                _ => d.now + Duration::from_micros(10),
            };
        }
        (d.b.rpcs_in_use() == 0).then(|| d.now - gone_at)
    });
    let after = freed_after.expect("the server kept a response nobody acks");
    let stats = d.b.stats();
    assert!(stats.tx.need_ack > 0, "the server never asked for an ACK");
    assert_eq!(stats.server_timeouts, 1);
    let config = d.b.config();
    let timeout = Duration::from_nanos(config.tick.total_nanos() * u64::from(config.timeout_ticks));
    assert!(
        after <= timeout + Duration::from_millis(5),
        "freed after {after:?}"
    );
    assert_eq!(d.b.pool_free_bytes(), d.b.pool_capacity_bytes());
}
