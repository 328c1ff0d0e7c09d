//! The AF_XDP device against the real kernel (root: namespaces, veth
//! pairs, BPF), and its checks that need none.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use super::steer::{self, XDP_PASS, XDP_REDIRECT};
use super::*;
use crate::{RxToken as _, TxToken as _};

const A4: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 2);
const B4: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 3);
const OTHER4: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 9);
const A6: Ipv6Addr = Ipv6Addr::new(0xfd99, 0, 0, 0, 0, 0, 0, 2);
const OTHER6: Ipv6Addr = Ipv6Addr::new(0xfd99, 0, 0, 0, 0, 0, 0, 9);

#[test]
fn sizes_that_cannot_work_are_refused_with_what_would() {
    let ok = XdpConfig::new(0, &[A4.into()]);
    ok.check("eth9", 1514).unwrap();
    let mut small = ok.clone();
    small.frames = 2048 + 63;
    let e = small.check("eth9", 1514).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    assert!(e.to_string().contains("too small"), "{e}");
    assert!(e.to_string().contains("at least 2112 frames"), "{e}");
    small.frames = 2048 + 64;
    small.check("eth9", 1514).unwrap();

    let e = ok.check("eth9", 9014).unwrap_err();
    assert!(e.to_string().contains("MTU (9000 bytes)"), "{e}");
    assert!(e.to_string().contains("3826 or below"), "{e}");
    ok.check("eth9", 3840).unwrap();
    let mut half = ok.clone();
    half.frame_size = 2048;
    let e = half.check("eth9", 1514 + 400).unwrap_err();
    assert!(e.to_string().contains("4096-byte frames"), "{e}");

    let mut odd = ok.clone();
    odd.ring_size = 1000;
    assert!(odd
        .check("eth9", 1514)
        .unwrap_err()
        .to_string()
        .contains("power of two"));
    let none = XdpConfig::new(0, &[]);
    assert!(none
        .check("eth9", 1514)
        .unwrap_err()
        .to_string()
        .contains("no address"));
}

#[test]
fn an_interface_that_is_not_ethernet_or_not_there_is_named() {
    let e = XdpSocket::new("lo", &XdpConfig::new(0, &[A4.into()])).unwrap_err();
    assert!(e.to_string().contains("not an Ethernet interface"), "{e}");
    let e = XdpSocket::new("nosuchif7", &XdpConfig::new(0, &[A4.into()])).unwrap_err();
    assert!(e.to_string().contains("nosuchif7"), "{e}");
}

// ---- frames -------------------------------------------------------------

fn eth(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn ipv4(dst: Ipv4Addr, protocol: u8, payload: &[u8]) -> Vec<u8> {
    let mut h = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, protocol, 0, 0];
    h.extend_from_slice(&Ipv4Addr::new(10, 99, 0, 50).octets());
    h.extend_from_slice(&dst.octets());
    h[2..4].copy_from_slice(&((20 + payload.len()) as u16).to_be_bytes());
    h.extend_from_slice(payload);
    eth(0x0800, &h)
}

fn arp(op: u16, tpa: Ipv4Addr) -> Vec<u8> {
    let mut a = vec![0, 1, 8, 0, 6, 4];
    a.extend_from_slice(&op.to_be_bytes());
    a.extend_from_slice(&[0x02, 0, 0, 0, 0, 2, 10, 99, 0, 50]);
    a.extend_from_slice(&[0; 6]);
    a.extend_from_slice(&tpa.octets());
    eth(0x0806, &a)
}

fn ipv6(dst: Ipv6Addr, next: u8, payload: &[u8]) -> Vec<u8> {
    let mut h = vec![0x60, 0, 0, 0];
    h.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    h.extend_from_slice(&[next, 255]);
    h.extend_from_slice(&OTHER6.octets());
    h.extend_from_slice(&dst.octets());
    h.extend_from_slice(payload);
    eth(0x86dd, &h)
}

/// An ICMPv6 neighbour solicitation (135) or advertisement (136) for
/// `target`, to `dst`.
fn nd(kind: u8, dst: Ipv6Addr, target: Ipv6Addr) -> Vec<u8> {
    let mut m = vec![kind, 0, 0, 0, 0, 0, 0, 0];
    m.extend_from_slice(&target.octets());
    ipv6(dst, 58, &m)
}

fn solicited_node(a: Ipv6Addr) -> Ipv6Addr {
    let o = a.octets();
    Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | u16::from(o[13]),
        u16::from_be_bytes([o[14], o[15]]),
    )
}

/// Frames of every kind the program tells apart, for us and not, whole
/// and cut short, and random bytes behind each EtherType.
fn corpus() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for dst in [A4, OTHER4] {
        for proto in [146, 1, 6, 17] {
            v.push(ipv4(dst, proto, &[0xab; 40]));
        }
        v.push(arp(1, dst));
        v.push(arp(2, dst));
    }
    for dst in [A6, OTHER6] {
        v.push(ipv6(dst, 146, &[0xcd; 60]));
        v.push(ipv6(dst, 58, &[128, 0, 0, 0, 0, 1, 0, 1]));
    }
    for target in [A6, OTHER6] {
        v.push(nd(135, solicited_node(target), target));
        v.push(nd(136, OTHER6, target)); // an advertisement to someone else
        v.push(nd(136, A6, target));
        let mut hop_by_hop = nd(135, solicited_node(target), target);
        hop_by_hop[20] = 0;
        v.push(hop_by_hop);
    }
    // Every prefix of a few: the bounds checks at each length.
    for f in [
        ipv4(A4, 146, &[]),
        arp(1, A4),
        nd(135, solicited_node(A6), A6),
    ] {
        for n in 14..f.len() {
            v.push(f[..n].to_vec());
        }
    }
    // VLAN-tagged (not steered) and random bytes behind each EtherType.
    v.push(eth(0x8100, &ipv4(A4, 146, &[1; 20])[12..]));
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..600 {
        let len = 14 + (i % 90);
        let mut f: Vec<u8> = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let et: [u8; 2] = [[0x08, 0x00], [0x08, 0x06], [0x86, 0xdd], [0x88, 0xb5]][i % 4];
        f[12..14].copy_from_slice(&et);
        // Some of them carry one of our addresses where it is read.
        if i % 3 == 0 && len >= 78 {
            match i % 4 {
                0 => f[30..34].copy_from_slice(&A4.octets()),
                1 => f[38..42].copy_from_slice(&A4.octets()),
                _ => {
                    f[20] = 58;
                    f[54] = 135;
                    f[62..78].copy_from_slice(&A6.octets());
                }
            }
        }
        v.push(f);
    }
    v
}

#[test]
fn the_model_steers_what_the_module_promises() {
    let ours = |k: &[u8]| k == steer::key_of(A4.into()) || k == steer::key_of(A6.into());
    let s = |f: &[u8]| steer::steers(f, ours);
    assert!(s(&ipv4(A4, 146, &[0; 8])));
    assert!(s(&ipv4(A4, 1, &[0; 8])));
    assert!(!s(&ipv4(OTHER4, 146, &[0; 8])));
    assert!(s(&arp(1, A4)) && s(&arp(2, A4)) && !s(&arp(1, OTHER4)));
    assert!(s(&ipv6(A6, 146, &[])) && !s(&ipv6(OTHER6, 146, &[])));
    assert!(s(&nd(135, solicited_node(A6), A6)));
    assert!(!s(&nd(135, solicited_node(OTHER6), OTHER6)));
    assert!(
        !s(&nd(136, OTHER6, A6)),
        "an advertisement for us, to another"
    );
    assert!(!s(&ipv4(A4, 146, &[])[..33]));
}

// ---- the kernel (root) --------------------------------------------------

/// A network namespace with a veth pair `xa` <-> `xb` (each with `queues`
/// queues), which the current thread enters; it leaves and deletes it on
/// drop.
struct Netns {
    name: String,
    home: OwnedFd,
}

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
    fn new(tag: &str, queues: u32) -> Netns {
        // SAFETY: plain syscall.
        assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root");
        let name = format!("hpx{tag}{}", std::process::id());
        ip(&["netns", "add", &name]);
        let q = queues.to_string();
        ip(&[
            "-n",
            &name,
            "link",
            "add",
            "xa",
            "numrxqueues",
            &q,
            "numtxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            "xb",
            "numrxqueues",
            &q,
            "numtxqueues",
            &q,
        ]);
        for dev in ["xa", "xb", "lo"] {
            ip(&["-n", &name, "link", "set", dev, "up"]);
        }
        let open = |path: &str| {
            let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{path}: {e}"));
            OwnedFd::from(f)
        };
        let home = open("/proc/thread-self/ns/net");
        let ns = open(&format!("/var/run/netns/{name}"));
        // SAFETY: moves this thread (only) into the namespace.
        assert_eq!(
            unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) },
            0
        );
        Netns { name, home }
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // SAFETY: back to the namespace the thread came from.
        unsafe { libc::setns(self.home.as_raw_fd(), libc::CLONE_NEWNET) };
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// Runs the program on `frame` in the kernel (`BPF_PROG_TEST_RUN`).
fn verdict(prog: i32, frame: &[u8]) -> u32 {
    let mut out = vec![0u8; frame.len() + 512];
    // SAFETY: plain C struct; `sz` set below.
    let mut opts: libxdp_sys::bpf_test_run_opts = unsafe { std::mem::zeroed() };
    opts.sz = steer::opts_size!(libxdp_sys::bpf_test_run_opts, batch_size);
    opts.data_in = frame.as_ptr().cast();
    opts.data_size_in = frame.len() as u32;
    opts.data_out = out.as_mut_ptr().cast();
    opts.data_size_out = out.len() as u32;
    opts.repeat = 1;
    // SAFETY: the buffers are valid for the sizes given.
    let rc = unsafe { libxdp_sys::bpf_prog_test_run_opts(prog, &mut opts) };
    assert_eq!(
        rc,
        0,
        "test run of a {}-byte frame: {}",
        frame.len(),
        io::Error::last_os_error()
    );
    opts.retval
}

fn send(dev: &mut XdpSocket, frame: &[u8]) {
    let tx = dev.transmit(Instant::ZERO).expect("a free frame");
    tx.consume(frame.len(), |buf| buf.copy_from_slice(frame));
}

/// Receives frames on `dev` for up to two seconds, until `n` arrived.
fn receive_n(dev: &mut XdpSocket, n: usize) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let deadline = StdInstant::now() + StdDuration::from_secs(2);
    while got.len() < n && StdInstant::now() < deadline {
        crate::wait(dev.as_raw_fd(), Some(crate::Duration::from_millis(20))).unwrap();
        while let Some((rx, _)) = dev.receive(Instant::ZERO) {
            got.push(rx.consume(|f| f.to_vec()));
        }
    }
    got
}

/// The kernel runs the assembled program (it passes the verifier) and
/// decides as the Rust model does on every frame of the corpus.
#[test]
#[ignore = "needs root"]
fn the_kernel_runs_the_program_as_the_model_decides() {
    let _ns = Netns::new("v", 1);
    let dev = XdpSocket::new("xa", &XdpConfig::new(0, &[A4.into(), A6.into()])).unwrap();
    let ours = |k: &[u8]| k == steer::key_of(A4.into()) || k == steer::key_of(A6.into());
    let (mut steered, mut passed) = (0, 0);
    for f in corpus() {
        let want = if steer::steers(&f, ours) {
            XDP_REDIRECT
        } else {
            XDP_PASS
        };
        let got = verdict(dev.steering.prog_fd(), &f);
        assert_eq!(got, want, "frame {f:02x?}");
        if want == XDP_REDIRECT {
            steered += 1;
        } else {
            passed += 1;
        }
    }
    assert!(
        steered > 20 && passed > 100,
        "{steered} steered, {passed} passed"
    );
}

/// Two sockets on the two ends of a veth pair: a burst of frames for
/// B's address arrives whole and in order, sent with one wake-up per 32
/// frames; a frame for another address goes to B's kernel instead.
#[test]
#[ignore = "needs root"]
fn frames_cross_a_veth_pair_in_batches() {
    let _ns = Netns::new("p", 1);
    let mut a = XdpSocket::new("xa", &XdpConfig::new(0, &[A4.into()])).unwrap();
    let mut b = XdpSocket::new("xb", &XdpConfig::new(0, &[B4.into()])).unwrap();
    assert!(!a.zero_copy(), "veth has no zero-copy");
    assert!(a.driver_mode(), "veth has XDP in its driver");
    let burst: Vec<Vec<u8>> = (0..320u32)
        .map(|i| ipv4(B4, 146, &[&i.to_be_bytes()[..], &[i as u8; 100]].concat()))
        .collect();
    for f in &burst {
        send(&mut a, f);
    }
    let s = a.stats();
    assert_eq!(s.tx_frames, 320);
    assert_eq!(s.tx_wakeups, 10, "one wake-up per 32 frames: {s:?}");
    let got = receive_n(&mut b, burst.len());
    assert_eq!(got.len(), burst.len(), "{:?} {:?}", b.stats(), a.stats());
    assert!(got == burst, "the frames differ or came out of order");
    assert!(b.stats().rx_batches < 320, "{:?}", b.stats());

    // Not B's address: the kernel's, so the socket sees nothing.
    send(&mut a, &ipv4(OTHER4, 146, &[7; 50]));
    a.flush();
    assert!(receive_n(&mut b, 1).is_empty());
    // A frame for A goes the other way, through A's program.
    send(&mut b, &ipv4(A4, 146, &[9; 50]));
    b.flush();
    assert_eq!(receive_n(&mut a, 1), [ipv4(A4, 146, &[9; 50])]);
    assert_eq!(a.take_last_error().map(|e| e.to_string()), None);
}

/// A frame longer than a UMEM frame is dropped and counted, and the free
/// frame it would have taken stays free: more such frames than there are
/// transmit frames still leave every one for the frames that fit.
#[test]
#[ignore = "needs root"]
fn a_frame_too_long_for_the_umem_costs_no_frame() {
    let _ns = Netns::new("l", 1);
    let mut config = XdpConfig::new(0, &[A4.into()]);
    config.ring_size = 64;
    config.frames = 64 + MIN_TX_FRAMES;
    let mut a = XdpSocket::new("xa", &config).unwrap();
    let mut b = XdpSocket::new("xb", &XdpConfig::new(0, &[B4.into()])).unwrap();
    let too_long = a.room + 1;
    for _ in 0..2 * MIN_TX_FRAMES {
        let tx = a.transmit(Instant::ZERO).expect("a free frame");
        tx.consume(too_long, |buf| buf.fill(0xee));
    }
    assert_eq!(a.stats().tx_dropped, u64::from(2 * MIN_TX_FRAMES));
    assert_eq!(a.port.free.len(), MIN_TX_FRAMES as usize);
    let frame = ipv4(B4, 146, &[3; 60]);
    send(&mut a, &frame);
    a.flush();
    assert_eq!(receive_n(&mut b, 1), [frame]);
}

fn attached_prog(ifname: &str) -> u32 {
    let ifindex = crate::tap::interface_index(ifname).unwrap();
    // SAFETY: plain C struct; `sz` set below.
    let mut q: libxdp_sys::bpf_xdp_query_opts = unsafe { std::mem::zeroed() };
    q.sz = steer::opts_size!(libxdp_sys::bpf_xdp_query_opts, xdp_zc_max_segs);
    // SAFETY: a valid options struct.
    assert_eq!(unsafe { libxdp_sys::bpf_xdp_query(ifindex, 0, &mut q) }, 0);
    q.prog_id
}

/// A second socket (another queue) shares the first one's program; the
/// program stays while either is open and goes with the last. A second
/// socket on a bound queue is refused, saying so.
#[test]
#[ignore = "needs root"]
fn sockets_share_the_program_and_the_last_removes_it() {
    let _ns = Netns::new("s", 2);
    let first = XdpSocket::new("xa", &XdpConfig::new(0, &[A4.into()])).unwrap();
    assert!(!first.shares_program());
    let id = attached_prog("xa");
    assert_ne!(id, 0);

    let e = XdpSocket::new("xa", &XdpConfig::new(0, &[B4.into()])).unwrap_err();
    assert!(e.to_string().contains("queue 0 is already bound"), "{e}");

    let second = XdpSocket::new("xa", &XdpConfig::new(1, &[B4.into()])).unwrap();
    assert!(second.shares_program());
    assert_eq!(attached_prog("xa"), id);
    drop(first);
    assert_eq!(attached_prog("xa"), id, "the second socket still needs it");
    drop(second);
    assert_eq!(attached_prog("xa"), 0, "the last socket removes it");
    // Out of range: the veth has two queues.
    let e = XdpSocket::new("xa", &XdpConfig::new(5, &[A4.into()])).unwrap_err();
    assert!(e.to_string().contains("queue 5"), "{e}");
}

/// Another XDP program on the interface is left alone, and named.
#[test]
#[ignore = "needs root"]
fn another_program_on_the_interface_is_named_not_replaced() {
    let _ns = Netns::new("o", 1);
    ip(&["link", "set", "dev", "xa", "xdpgeneric", "off"]);
    // r0 = XDP_PASS; exit, as a program of someone else's.
    let insns: [u64; 2] = [0x0000_0002_0000_00b7, 0x0000_0000_0000_0095];
    let name = std::ffi::CString::new("someone_else").unwrap();
    let license = std::ffi::CString::new("GPL").unwrap();
    // SAFETY: two valid instructions; null options.
    let prog = unsafe {
        libxdp_sys::bpf_prog_load(
            libxdp_sys::bpf_prog_type_BPF_PROG_TYPE_XDP,
            name.as_ptr(),
            license.as_ptr(),
            insns.as_ptr().cast(),
            2,
            std::ptr::null_mut(),
        )
    };
    assert!(prog >= 0, "{}", io::Error::last_os_error());
    // SAFETY: libbpf returned the descriptor.
    let prog = unsafe { OwnedFd::from_raw_fd(prog) };
    let ifindex = crate::tap::interface_index("xa").unwrap();
    // SAFETY: plain call (generic mode).
    let rc = unsafe { libxdp_sys::bpf_xdp_attach(ifindex, prog.as_raw_fd(), 2, std::ptr::null()) };
    assert_eq!(rc, 0);
    let e = XdpSocket::new("xa", &XdpConfig::new(0, &[A4.into()])).unwrap_err();
    assert!(e.to_string().contains("\"someone_else\""), "{e}");
    assert!(e.to_string().contains("xdp off"), "{e}");
    assert_ne!(attached_prog("xa"), 0, "their program is still there");
}

/// Without the capabilities (a thread that dropped them all), the error
/// says what is needed.
#[test]
#[ignore = "needs root"]
fn without_privileges_the_error_says_what_is_needed() {
    let _ns = Netns::new("c", 1);
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let header = Header {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
        pid: 0,
    };
    let data = [
        Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        },
        Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        },
    ];
    // Capabilities are per thread: a new one (in this thread's namespace)
    // drops them for good and tries.
    let e = std::thread::scope(|s| {
        s.spawn(|| {
            // SAFETY: capset with a valid header and two data words.
            let rc = unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) };
            assert_eq!(rc, 0, "{}", io::Error::last_os_error());
            XdpSocket::new("xa", &XdpConfig::new(0, &[A4.into()])).unwrap_err()
        })
        .join()
        .unwrap()
    });
    assert!(e.to_string().contains("needs root"), "{e}");
}
