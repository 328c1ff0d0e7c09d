//! The endpoint makes no heap allocation: a global allocator that counts
//! calls while an endpoint runs, across RPCs of every size.

use homa_examples::duo::{self, Duo, Storage, CLIENT_IP, CLIENT_MAC, SERVER_IP, SERVER_MAC};
use homa_phy::fault::FaultConfig;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

struct Counting;

static WATCHING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if WATCHING.load(Ordering::SeqCst) {
            ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
        }
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if WATCHING.load(Ordering::SeqCst) {
            ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f` and returns how many allocations it made.
fn count<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    WATCHING.store(true, Ordering::SeqCst);
    let r = f();
    WATCHING.store(false, Ordering::SeqCst);
    (r, ALLOCATIONS.load(Ordering::SeqCst) - before)
}

#[test]
fn endpoints_make_no_heap_allocation_while_they_run() {
    // Everything the endpoints use is allocated here, before watching starts.
    let mut cmem = Storage::new(16, 4 << 20);
    let mut smem = Storage::new(16, 4 << 20);
    let client = cmem.endpoint(duo::config(CLIENT_IP, CLIENT_MAC, 1, true));
    let server = smem.endpoint(duo::config(SERVER_IP, SERVER_MAC, 2, true));
    let mut faults = FaultConfig::new();
    faults.drop_ppm = 20_000;
    let mut d = Duo::new(client, server, faults, 7, None);
    let csock = d.client.socket().unwrap();
    let ssock = d.server.bind(500).unwrap();
    let request = vec![0x5au8; 1_000_000];
    let mut reply_buf = vec![0u8; 1_000_000];
    let mut total = 0;
    for &len in &[1usize, 1424, 1425, 40_001, 100_000, 1_000_000] {
        let (h, n) = count(|| {
            d.client
                .send_request(csock, SERVER_IP, 500, &request[..len])
                .unwrap()
        });
        total += n;
        let mut done = false;
        for _ in 0..2_000_000 {
            let (moved, n) = count(|| {
                let moved = d.step();
                if let Some(homa_stack::Event::Request { rpc, len, .. }) = d.server.recv(ssock) {
                    d.server
                        .message(rpc)
                        .unwrap()
                        .copy_to(&mut reply_buf[..len]);
                    d.server.reply(rpc, &reply_buf[..len]).unwrap();
                }
                if let Some(homa_stack::Event::Response { rpc, len: got }) = d.client.recv(csock) {
                    assert_eq!(rpc, h);
                    assert_eq!(got, len);
                    d.client.release(rpc).unwrap();
                    done = true;
                }
                moved
            });
            total += n;
            if done {
                break;
            }
            if !moved {
                d.idle();
            }
        }
        assert!(done, "RPC of {len} bytes did not finish");
    }
    assert_eq!(total, 0, "the endpoints allocated {total} times");
    // The counter itself works: an allocation while watching is seen.
    let (_, n) = count(|| std::hint::black_box(vec![1u8; 16]));
    assert_eq!(n, 1);
}
