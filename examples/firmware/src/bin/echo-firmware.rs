//! One NIC, two stacks, async: homa-stack and smoltcp share each host's
//! device through `homa_phy::Share`, one IP and one MAC per host.
//!
//! Two hosts, a board and a peer, joined by in-memory rings. On each,
//! homa-stack (a `homa_stack::asynch::Stack`, passive: it answers neither
//! ARP nor pings) and a smoltcp interface poll the two halves of the
//! host's `Share`. The board's smoltcp answers UDP echo on port 7 and its
//! homa-stack serves RPCs (a server task); the peer's client task awaits
//! Homa RPCs and UDP echoes at the same time and checks both byte for
//! byte. One runner task polls both hosts' stacks and carries the frames;
//! it sleeps until the earliest timer of the four stacks (the SysTick
//! alarm), a task's call, or a received datagram. Statics in `.bss`;
//! prints `PASS` over semihosting.
#![no_std]
#![no_main]
#![forbid(unsafe_code)]

use core::cell::{Cell, RefCell};
use core::future::poll_fn;
use core::task::{Context, Poll};

use cortex_m_rt::entry;
use cortex_m_semihosting::hprintln;
use embassy_executor::{Executor, Spawner};
use embassy_futures::join::join;
use panic_semihosting as _;
use smoltcp::iface::{Interface, SocketHandle, SocketSet, SocketStorage};
use smoltcp::socket::udp;
use smoltcp::wire::{HardwareAddress, IpAddress, IpCidr, IpEndpoint};
use static_cell::{ConstStaticCell, StaticCell};

use homa_firmware::alarm::AlarmClock;
use homa_firmware::check::{fill, matches, pattern, reply_seed, request_seed};
use homa_firmware::{finish, Clock};
use homa_phy::share::{Share, Side};
use homa_phy::smoltcp::{from_smoltcp, to_smoltcp, SmoltcpDevice};
use homa_phy::{forward, Instant, Loopback, Split};
use homa_stack::asynch::{Clock as _, Stack, WakerCell};
use homa_stack::endpoint::{PeerSlot, RpcSlot, SocketSlot};
use homa_stack::storage::{buffer_len_for, pages_for};
use homa_stack::wire::{EthernetAddress, Ipv4Addr};
use homa_stack::{Config, Endpoint};

const PAGE: usize = 4096;
/// The largest RPC here.
const MAX_MSG: usize = 200_000;
const POOL: usize = buffer_len_for(2 * pages_for(MAX_MSG, PAGE) + 8, PAGE);
const RPCS: usize = 8;
const PEERS: usize = 4;
const SOCKETS: usize = 2;
const RING: usize = 8;
/// Frames per side in each `Share`'s receive queues.
const QUEUE: usize = 4;

/// Homa RPC sizes, each beside one UDP echo of the length at the same index.
const SIZES: [usize; 5] = [1, 1424, 1425, 40_001, MAX_MSG];
const ECHO_LENS: [usize; 5] = [1, 100, 512, 1000, 1472];

const BOARD_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const PEER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const BOARD_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
const PEER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const HOMA_PORT: u16 = 99;
const ECHO_PORT: u16 = 7;
const PEER_UDP_PORT: u16 = 4000;

type Ring = Loopback<RING>;
type Nic = Split<&'static mut Ring, &'static mut Ring>;
type Shared = Share<Nic, QUEUE>;
type HomaStack = Stack<'static, 2>;

/// The UDP socket's memory: 4 datagrams of up to 1,500 bytes each way.
struct UdpMem {
    rx_meta: [udp::PacketMetadata; 4],
    tx_meta: [udp::PacketMetadata; 4],
    rx: [u8; 6000],
    tx: [u8; 6000],
    sockets: [SocketStorage<'static>; 1],
}

impl UdpMem {
    fn new() -> UdpMem {
        UdpMem {
            rx_meta: [udp::PacketMetadata::EMPTY; 4],
            tx_meta: [udp::PacketMetadata::EMPTY; 4],
            rx: [0; 6000],
            tx: [0; 6000],
            sockets: [SocketStorage::EMPTY; 1],
        }
    }
}

static RPC_TABLES: StaticCell<[[RpcSlot; RPCS]; 2]> = StaticCell::new();
static PEER_TABLES: StaticCell<[[PeerSlot; PEERS]; 2]> = StaticCell::new();
static SOCKET_TABLES: StaticCell<[[SocketSlot; SOCKETS]; 2]> = StaticCell::new();
static POOLS: ConstStaticCell<[[u8; POOL]; 2]> = ConstStaticCell::new([[0; POOL]; 2]);
static RINGS: ConstStaticCell<[Ring; 4]> =
    ConstStaticCell::new([Ring::new(), Ring::new(), Ring::new(), Ring::new()]);
static SHARES: StaticCell<[Shared; 2]> = StaticCell::new();
static UDP_MEM: StaticCell<[UdpMem; 2]> = StaticCell::new();
static BOARD_STACK: StaticCell<HomaStack> = StaticCell::new();
static PEER_STACK: StaticCell<HomaStack> = StaticCell::new();
static PEER_SMOL: StaticCell<RefCell<Smol>> = StaticCell::new();
static KICK: ConstStaticCell<WakerCell> = ConstStaticCell::new(WakerCell::new());
static DONE: ConstStaticCell<Cell<bool>> = ConstStaticCell::new(Cell::new(false));
static WORLD: StaticCell<World> = StaticCell::new();
static EXECUTOR: StaticCell<Executor> = StaticCell::new();

// ---- smoltcp on a Share half -------------------------------------------------

/// A host's smoltcp interface with one UDP socket.
struct Smol {
    iface: Interface,
    sockets: SocketSet<'static>,
    udp: SocketHandle,
}

impl Smol {
    fn new(
        ip: Ipv4Addr,
        mac: [u8; 6],
        port: u16,
        share: &mut Shared,
        mem: &'static mut UdpMem,
    ) -> Smol {
        let mut config = smoltcp::iface::Config::new(HardwareAddress::Ethernet(
            smoltcp::wire::EthernetAddress(mac),
        ));
        config.random_seed = u64::from(mac[5]);
        let mut iface = Interface::new(
            config,
            &mut SmoltcpDevice(&mut share.other()),
            to_smoltcp(Instant::ZERO),
        );
        iface.update_ip_addrs(|a| {
            let _ = a.push(IpCidr::new(IpAddress::Ipv4(ip), 24));
        });
        let rx = udp::PacketBuffer::new(&mut mem.rx_meta[..], &mut mem.rx[..]);
        let tx = udp::PacketBuffer::new(&mut mem.tx_meta[..], &mut mem.tx[..]);
        let mut socket = udp::Socket::new(rx, tx);
        if socket.bind(port).is_err() {
            finish(Err("udp bind"));
        }
        let mut sockets = SocketSet::new(&mut mem.sockets[..]);
        let udp = sockets.add(socket);
        Smol {
            iface,
            sockets,
            udp,
        }
    }

    fn poll(&mut self, now: Instant, share: &mut Shared) {
        let mut half = share.half(Side::Other);
        self.iface.poll(
            to_smoltcp(now),
            &mut SmoltcpDevice(&mut half),
            &mut self.sockets,
        );
    }

    /// Answers every datagram waiting with itself (the board's echo).
    fn echo(&mut self) -> bool {
        let socket = self.sockets.get_mut::<udp::Socket>(self.udp);
        let mut buf = [0u8; 1500];
        let mut any = false;
        while let Ok((n, meta)) = socket.recv_slice(&mut buf) {
            let _ = socket.send_slice(&buf[..n], meta.endpoint);
            any = true;
        }
        any
    }

    fn poll_at(&mut self, now: Instant) -> Option<Instant> {
        self.iface
            .poll_at(to_smoltcp(now), &self.sockets)
            .map(from_smoltcp)
    }
}

// ---- the runner: both hosts, four stacks ------------------------------------

/// Everything the runner polls.
struct World {
    board: &'static HomaStack,
    peer: &'static HomaStack,
    board_smol: Smol,
    peer_smol: &'static RefCell<Smol>,
    /// The board's and the peer's devices.
    shares: &'static mut [Shared; 2],
    clock: AlarmClock,
    kick: &'static WakerCell,
    /// Set by the client when all its checks passed.
    done: &'static Cell<bool>,
}

impl World {
    /// Polls every stack and carries frames until the wire is quiet, then
    /// sets the wake-up.
    fn step(&mut self, cx: &mut Context<'_>) {
        if self.done.get() {
            self.report();
        }
        self.board.register_runner(cx.waker());
        self.peer.register_runner(cx.waker());
        self.kick.register(cx.waker());
        let [board_nic, peer_nic] = &mut *self.shares;
        let mut now = self.clock.now();
        let mut next = [None; 4];
        for _ in 0..16 {
            now = self.clock.now();
            next[0] = self.board.poll(now, &mut board_nic.homa());
            self.board_smol.poll(now, board_nic);
            if self.board_smol.echo() {
                self.board_smol.poll(now, board_nic);
            }
            next[1] = self.peer.poll(now, &mut peer_nic.homa());
            let mut peer_smol = self.peer_smol.borrow_mut();
            peer_smol.poll(now, peer_nic);
            next[2] = self.board_smol.poll_at(now);
            next[3] = peer_smol.poll_at(now);
            drop(peer_smol);
            let moved = forward(
                board_nic.get_mut().tx_mut(),
                peer_nic.get_mut().rx_mut(),
                now,
            )
            .frames
                + forward(
                    peer_nic.get_mut().tx_mut(),
                    board_nic.get_mut().rx_mut(),
                    now,
                )
                .frames;
            if moved == 0 && queued(board_nic) + queued(peer_nic) == 0 {
                break;
            }
        }
        let busy = queued(board_nic) + queued(peer_nic) > 0;
        match next.iter().flatten().min() {
            _ if busy => cx.waker().wake_by_ref(),
            Some(&t) if t <= now => cx.waker().wake_by_ref(),
            Some(&t) => self.clock.wake_at(t, cx.waker()),
            None => {}
        }
    }
}

impl World {
    /// What each stack on the board saw, then `PASS`.
    fn report(&mut self) -> ! {
        for (name, nic, stack) in [
            ("board", &self.shares[0], self.board),
            ("peer", &self.shares[1], self.peer),
        ] {
            let routed = nic.stats();
            let (arp, pings) =
                stack.with(|ep| (ep.stats().arp_replies, ep.stats().icmp_echo_replies));
            hprintln!(
                "{}: frames to homa-stack {}, to smoltcp {}, dropped {}; homa-stack answered ARP {} times, pings {}",
                name,
                routed.homa.frames,
                routed.other.frames,
                routed.homa.dropped + routed.other.dropped + routed.too_long,
                arp,
                pings
            );
            if arp != 0 || pings != 0 {
                finish(Err("homa-stack answered for the shared address"));
            }
        }
        finish(Ok::<(), &str>(()))
    }
}

/// Frames waiting anywhere on a host's side: its receive ring and both
/// of its `Share`'s queues.
fn queued(nic: &Shared) -> usize {
    nic.get_ref().rx_ref().len() + nic.queued(Side::Homa) + nic.queued(Side::Other)
}

#[embassy_executor::task]
async fn runner(world: &'static mut World) -> ! {
    poll_fn(|cx| {
        world.step(cx);
        Poll::<()>::Pending
    })
    .await;
    finish(Err("runner ended"))
}

// ---- the tasks ---------------------------------------------------------------

#[embassy_executor::task]
async fn server(stack: &'static HomaStack) -> ! {
    homa_firmware::serve(stack, HOMA_PORT).await
}

/// Sends one datagram of pattern `seed` to the board's echo port and
/// awaits it back; whether it came back whole and from there.
async fn echo(smol: &RefCell<Smol>, kick: &WakerCell, seed: u32, len: usize) -> bool {
    let mut out = [0u8; 1500];
    for (i, b) in out[..len].iter_mut().enumerate() {
        *b = pattern(seed, i);
    }
    let board = IpEndpoint::new(IpAddress::Ipv4(BOARD_IP), ECHO_PORT);
    {
        let mut s = smol.borrow_mut();
        let udp = s.udp;
        if s.sockets
            .get_mut::<udp::Socket>(udp)
            .send_slice(&out[..len], board)
            .is_err()
        {
            return false;
        }
    }
    kick.wake();
    let mut back = [0u8; 1500];
    let (n, from) = poll_fn(|cx| {
        let mut s = smol.borrow_mut();
        let udp = s.udp;
        let socket = s.sockets.get_mut::<udp::Socket>(udp);
        match socket.recv_slice(&mut back) {
            Ok((n, meta)) => Poll::Ready((n, meta.endpoint)),
            Err(_) => {
                socket.register_recv_waker(cx.waker());
                Poll::Pending
            }
        }
    })
    .await;
    n == len && from == board && back[..n] == out[..len]
}

#[embassy_executor::task]
async fn client(
    stack: &'static HomaStack,
    smol: &'static RefCell<Smol>,
    kick: &'static WakerCell,
    done: &'static Cell<bool>,
) -> ! {
    let Ok(mut client) = stack.client() else {
        finish(Err("socket"))
    };
    for (i, (&len, &echo_len)) in SIZES.iter().zip(ECHO_LENS.iter()).enumerate() {
        // The RPC and the echo at the same time, on the same devices.
        let rpc = client.call_with(
            BOARD_IP,
            HOMA_PORT,
            len,
            |w| fill(request_seed(len), w),
            |m| matches(m, reply_seed(len), len),
        );
        let (rpc, echoed) = join(rpc, echo(smol, kick, i as u32, echo_len)).await;
        match rpc {
            Ok(true) => {}
            Ok(false) => finish(Err("reply corrupted")),
            Err(e) => {
                hprintln!("{}", e);
                finish(Err("call failed"))
            }
        }
        if !echoed {
            finish(Err("echo wrong"));
        }
        hprintln!("  Homa {:>6} B and UDP echo {:>4} B: ok", len, echo_len);
    }
    // The runner reports what the stacks saw and ends the run.
    done.set(true);
    kick.wake();
    core::future::pending().await
}

fn endpoint(
    ip: Ipv4Addr,
    mac: [u8; 6],
    rpcs: &'static mut [RpcSlot],
    peers: &'static mut [PeerSlot],
    sockets: &'static mut [SocketSlot],
    pool: &'static mut [u8],
) -> Endpoint<'static> {
    let mut config = Config::new(ip, EthernetAddress(mac), homa_firmware::hash_seed(mac));
    // The other stack answers ARP and pings for the shared address.
    config.passive_host = true;
    match Endpoint::new(config, rpcs, peers, sockets, pool, PAGE) {
        Ok(ep) => ep,
        Err(_) => finish(Err("set-up")),
    }
}

#[entry]
fn main() -> ! {
    let Some(cp) = cortex_m::Peripherals::take() else {
        finish(Err("peripherals"))
    };
    let clock = Clock::start(cp.SYST);
    let [board_rpcs, peer_rpcs] = RPC_TABLES.init_with(|| [const { [RpcSlot::EMPTY; RPCS] }; 2]);
    let [board_peers, peer_peers] =
        PEER_TABLES.init_with(|| [const { [PeerSlot::EMPTY; PEERS] }; 2]);
    let [board_socks, peer_socks] = SOCKET_TABLES.init_with(|| [[SocketSlot::EMPTY; SOCKETS]; 2]);
    let [board_pool, peer_pool] = POOLS.take();
    let board = endpoint(
        BOARD_IP,
        BOARD_MAC,
        board_rpcs,
        board_peers,
        board_socks,
        board_pool,
    );
    let peer = endpoint(
        PEER_IP, PEER_MAC, peer_rpcs, peer_peers, peer_socks, peer_pool,
    );
    let board: &'static HomaStack = BOARD_STACK.init_with(|| Stack::new(board));
    let peer: &'static HomaStack = PEER_STACK.init_with(|| Stack::new(peer));

    // Board: receives from ring 0, sends into ring 1; the peer the other way.
    let [r0, r1, r2, r3] = RINGS.take();
    let shares = SHARES.init_with(|| {
        [
            Share::new(Split::new(r0, r1)),
            Share::new(Split::new(r2, r3)),
        ]
    });
    let [board_mem, peer_mem] = UDP_MEM.init_with(|| [UdpMem::new(), UdpMem::new()]);
    let board_smol = Smol::new(BOARD_IP, BOARD_MAC, ECHO_PORT, &mut shares[0], board_mem);
    let peer_smol: &'static RefCell<Smol> = PEER_SMOL.init_with(|| {
        RefCell::new(Smol::new(
            PEER_IP,
            PEER_MAC,
            PEER_UDP_PORT,
            &mut shares[1],
            peer_mem,
        ))
    });
    let kick: &'static WakerCell = KICK.take();
    let done: &'static Cell<bool> = DONE.take();

    hprintln!("homa-stack async firmware with smoltcp: one device, two stacks, per host");
    let world = WORLD.init_with(|| World {
        board,
        peer,
        board_smol,
        peer_smol,
        shares,
        clock: AlarmClock::new(clock.clone(), 0),
        kick,
        done,
    });
    EXECUTOR
        .init_with(Executor::new)
        .run(move |spawner: Spawner| {
            let spawned = [
                spawner.spawn(runner(world)),
                spawner.spawn(server(board)),
                spawner.spawn(client(peer, peer_smol, kick, done)),
            ];
            if spawned.iter().any(|s| s.is_err()) {
                finish(Err("spawn"));
            }
        })
}
