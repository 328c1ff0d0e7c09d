//! The XDP program that steers homa-stack's frames to its AF_XDP socket,
//! and its installation on an interface.
//!
//! The program is a few dozen BPF instructions assembled here, so nothing
//! is compiled at build time and no object file is shipped: libbpf loads
//! the instructions and the kernel's verifier checks them. A frame goes to
//! the socket of the queue it arrived on when it is
//! - IPv4 or IPv6 addressed to one of the endpoint's addresses (Homa, and
//!   the ICMP echo that homa-stack answers);
//! - ARP whose target address is one of them (requests for it, and the
//!   replies to homa-stack's own requests);
//! - an IPv6 neighbour solicitation whose target is one of them;
//!
//! and everything else goes on to the kernel (`XDP_PASS`), as does a frame
//! for an address whose queue has no socket. The addresses live in a hash
//! map (16-byte keys, IPv4 as `::ffff:a.b.c.d`), the sockets in an XSKMAP
//! indexed by queue, so several endpoints (one per queue) share one
//! program: the first installs it, the others find it by name and add
//! themselves to its maps, and the last to leave detaches it.

use std::ffi::CString;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use libxdp_sys as sys;

/// The program's name in the kernel (`bpftool prog`, `ip link`): how a
/// second endpoint recognises it. The version changes with the maps'
/// layout or the program's meaning.
pub(crate) const PROG_NAME: &str = "homa_steer_v1";
const ADDRS_NAME: &str = "homa_addrs";
const XSKS_NAME: &str = "homa_xsks";
/// Queues the socket map holds (queue ids 0..256).
pub(crate) const MAX_QUEUES: u32 = 256;
/// Addresses the address map holds, over all endpoints on the interface.
const MAX_ADDRS: u32 = 64;

// XDP attach flags (linux/if_link.h).
const XDP_FLAGS_UPDATE_IF_NOEXIST: u32 = 1;
/// Generic XDP.
pub(crate) const XDP_FLAGS_SKB_MODE: u32 = 2;
/// XDP in the driver.
pub(crate) const XDP_FLAGS_DRV_MODE: u32 = 4;
const XDP_FLAGS_HW_MODE: u32 = 8;
const XDP_FLAGS_REPLACE: u32 = 16;

/// `XDP_PASS`, also the answer of `bpf_redirect_map` for an empty slot.
pub(crate) const XDP_PASS: u32 = 2;
/// `XDP_REDIRECT`.
#[cfg(test)]
pub(crate) const XDP_REDIRECT: u32 = 4;

/// How the program is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpMode {
    /// In the driver (`XDP_FLAGS_DRV_MODE`) where it has XDP support,
    /// else generic.
    Auto,
    /// In the driver; an interface whose driver has no XDP support is an
    /// error.
    Driver,
    /// Generic XDP (`XDP_FLAGS_SKB_MODE`): after the kernel has built its
    /// socket buffer; works on any interface, slower.
    Generic,
}

/// The 16-byte map key of an address: IPv6 as it is, IPv4 mapped.
pub(crate) fn key_of(addr: IpAddr) -> [u8; 16] {
    match addr {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    }
}

/// One BPF instruction, laid out as `struct bpf_insn`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Insn {
    code: u8,
    /// Destination register in the low nibble, source in the high one.
    regs: u8,
    off: i16,
    imm: i32,
}

// Opcode parts (linux/bpf_common.h, linux/bpf.h).
const LD: u8 = 0x00;
const LDX: u8 = 0x01;
const ST: u8 = 0x02;
const STX: u8 = 0x03;
const JMP: u8 = 0x05;
const ALU64: u8 = 0x07;
const W: u8 = 0x00;
const H: u8 = 0x08;
const B: u8 = 0x10;
const DW: u8 = 0x18;
const MEM: u8 = 0x60;
const IMM: u8 = 0x00;
const K: u8 = 0x00;
const X: u8 = 0x08;
const ADD: u8 = 0x00;
const MOV: u8 = 0xb0;
const JA: u8 = 0x00;
const JEQ: u8 = 0x10;
const JGT: u8 = 0x20;
const JNE: u8 = 0x50;
const CALL: u8 = 0x80;
const EXIT: u8 = 0x90;
/// `src_reg` of a 64-bit immediate load that names a map by descriptor.
const PSEUDO_MAP_FD: u8 = 1;
const HELPER_MAP_LOOKUP_ELEM: i32 = 1;
const HELPER_REDIRECT_MAP: i32 = 51;

/// Registers: the context, the packet's start and end, the frame pointer.
const R0: u8 = 0;
const R1: u8 = 1;
const R2: u8 = 2;
const R3: u8 = 3;
const CTX: u8 = 6;
const DATA: u8 = 7;
const END: u8 = 8;
const FP: u8 = 10;

/// Offsets into `struct xdp_md`.
const MD_DATA: i16 = 0;
const MD_DATA_END: i16 = 4;
const MD_RX_QUEUE_INDEX: i16 = 16;
/// The key lives on the stack at FP-16 .. FP.
const KEY: i16 = -16;

/// Jump targets, resolved when the program is finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Label {
    Ipv4,
    Arp,
    V4Key,
    Ipv6,
    Lookup,
    Redirect,
    Pass,
}

/// A BPF assembler just big enough for the program.
#[derive(Default)]
struct Asm {
    insns: Vec<Insn>,
    /// (instruction index, target) of each jump to patch.
    jumps: Vec<(usize, Label)>,
    labels: Vec<(Label, usize)>,
}

impl Asm {
    fn emit(&mut self, code: u8, dst: u8, src: u8, off: i16, imm: i32) {
        self.insns.push(Insn {
            code,
            regs: dst | (src << 4),
            off,
            imm,
        });
    }
    fn label(&mut self, l: Label) {
        self.labels.push((l, self.insns.len()));
    }
    fn mov_imm(&mut self, dst: u8, imm: i32) {
        self.emit(ALU64 | MOV | K, dst, 0, 0, imm);
    }
    fn mov(&mut self, dst: u8, src: u8) {
        self.emit(ALU64 | MOV | X, dst, src, 0, 0);
    }
    fn add_imm(&mut self, dst: u8, imm: i32) {
        self.emit(ALU64 | ADD | K, dst, 0, 0, imm);
    }
    fn load(&mut self, size: u8, dst: u8, src: u8, off: i16) {
        self.emit(LDX | size | MEM, dst, src, off, 0);
    }
    fn store(&mut self, size: u8, dst: u8, off: i16, src: u8) {
        self.emit(STX | size | MEM, dst, src, off, 0);
    }
    fn store_imm(&mut self, size: u8, dst: u8, off: i16, imm: i32) {
        self.emit(ST | size | MEM, dst, 0, off, imm);
    }
    fn jump(&mut self, op: u8, dst: u8, imm: i32, to: Label) {
        self.jumps.push((self.insns.len(), to));
        self.emit(JMP | op | K, dst, 0, 0, imm);
    }
    fn jump_reg(&mut self, op: u8, dst: u8, src: u8, to: Label) {
        self.jumps.push((self.insns.len(), to));
        self.emit(JMP | op | X, dst, src, 0, 0);
    }
    fn goto(&mut self, to: Label) {
        self.jump(JA, 0, 0, to);
    }
    /// `dst = map` (two instruction slots).
    fn load_map(&mut self, dst: u8, map: RawFd) {
        self.emit(LD | DW | IMM, dst, PSEUDO_MAP_FD, 0, map);
        self.emit(0, 0, 0, 0, 0);
    }
    fn call(&mut self, helper: i32) {
        self.emit(JMP | CALL, 0, 0, 0, helper);
    }
    fn exit(&mut self) {
        self.emit(JMP | EXIT, 0, 0, 0, 0);
    }
    /// Goes to `Pass` unless the packet holds at least `len` bytes (the
    /// verifier's proof that the loads that follow stay inside it).
    fn need(&mut self, len: i32) {
        self.mov(R2, DATA);
        self.add_imm(R2, len);
        self.jump_reg(JGT, R2, END, Label::Pass);
    }
    /// Copies 16 packet bytes at `off` into the key.
    fn key_from_packet(&mut self, off: i16) {
        self.load(DW, R3, DATA, off);
        self.store(DW, FP, KEY, R3);
        self.load(DW, R3, DATA, off + 8);
        self.store(DW, FP, KEY + 8, R3);
    }
    /// `r0` = the address map's entry for the key, or null.
    fn lookup(&mut self, addrs: RawFd) {
        self.load_map(R1, addrs);
        self.mov(R2, FP);
        self.add_imm(R2, i32::from(KEY));
        self.call(HELPER_MAP_LOOKUP_ELEM);
    }
    fn finish(mut self) -> Vec<Insn> {
        for (at, to) in std::mem::take(&mut self.jumps) {
            let target = self
                .labels
                .iter()
                .find(|(l, _)| *l == to)
                .map(|&(_, i)| i)
                .expect("every label the program jumps to is placed");
            self.insns[at].off = (target as isize - at as isize - 1) as i16;
        }
        self.insns
    }
}

/// The steering program over the address map `addrs` and the socket map
/// `xsks` (see the module's documentation for what it steers).
pub(crate) fn program(addrs: RawFd, xsks: RawFd) -> Vec<Insn> {
    let mut a = Asm::default();
    a.mov(CTX, R1);
    a.load(W, DATA, CTX, MD_DATA);
    a.load(W, END, CTX, MD_DATA_END);
    a.need(14);
    // The EtherType, loaded little-endian: 0x0800 reads as 0x0008.
    a.load(H, R3, DATA, 12);
    a.jump(JEQ, R3, 0x0008, Label::Ipv4);
    a.jump(JEQ, R3, 0x0608, Label::Arp);
    a.jump(JEQ, R3, 0xdd86, Label::Ipv6);
    a.goto(Label::Pass);

    a.label(Label::Ipv4);
    a.need(14 + 20);
    a.load(W, R3, DATA, 14 + 16); // destination address
    a.goto(Label::V4Key);

    a.label(Label::Arp);
    a.need(14 + 28);
    a.load(W, R3, DATA, 14 + 24); // target protocol address

    a.label(Label::V4Key);
    // ::ffff:a.b.c.d: ten zero bytes, two 0xff, the address.
    a.store_imm(DW, FP, KEY, 0);
    a.store_imm(W, FP, KEY + 8, 0xffff_0000_u32 as i32);
    a.store(W, FP, KEY + 12, R3);
    a.goto(Label::Lookup);

    a.label(Label::Ipv6);
    a.need(14 + 40);
    a.key_from_packet(14 + 24); // destination address
    a.lookup(addrs);
    a.jump(JNE, R0, 0, Label::Redirect);
    // A neighbour solicitation goes to a multicast group: its target says
    // whom it asks for. ICMPv6 right after the fixed header, type 135.
    a.need(14 + 40 + 24);
    a.load(B, R3, DATA, 14 + 6);
    a.jump(JNE, R3, 58, Label::Pass);
    a.load(B, R3, DATA, 14 + 40);
    a.jump(JNE, R3, 135, Label::Pass);
    a.key_from_packet(14 + 40 + 8);

    a.label(Label::Lookup);
    a.lookup(addrs);
    a.jump(JEQ, R0, 0, Label::Pass);

    a.label(Label::Redirect);
    a.load_map(R1, xsks);
    a.load(W, R2, CTX, MD_RX_QUEUE_INDEX);
    a.mov_imm(R3, XDP_PASS as i32);
    a.call(HELPER_REDIRECT_MAP);
    a.exit();

    a.label(Label::Pass);
    a.mov_imm(R0, XDP_PASS as i32);
    a.exit();
    a.finish()
}

/// What the program decides for `frame`, in Rust: whether it goes to the
/// socket (given that the queue has one) when `ours` says which 16-byte
/// keys are the endpoints'. The tests hold the kernel's verdicts on the
/// assembled program to it.
#[cfg(test)]
pub(crate) fn steers(frame: &[u8], ours: impl Fn(&[u8]) -> bool) -> bool {
    let mapped = |a: &[u8]| {
        let mut k = [0u8; 16];
        k[10..12].copy_from_slice(&[0xff, 0xff]);
        k[12..].copy_from_slice(a);
        k
    };
    if frame.len() < 14 {
        return false;
    }
    match [frame[12], frame[13]] {
        [0x08, 0x00] => frame.len() >= 34 && ours(&mapped(&frame[30..34])),
        [0x08, 0x06] => frame.len() >= 42 && ours(&mapped(&frame[38..42])),
        [0x86, 0xdd] => {
            frame.len() >= 54
                && (ours(&frame[38..54])
                    || (frame.len() >= 78
                        && frame[20] == 58
                        && frame[54] == 135
                        && ours(&frame[62..78])))
        }
        _ => false,
    }
}

/// The last OS error with what was being done and the interface named.
pub(crate) fn os_error(name: &str, what: &str, err: io::Error) -> io::Error {
    let hint = match err.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            ": AF_XDP needs root (CAP_NET_RAW for the socket, CAP_BPF and CAP_NET_ADMIN for \
             the program)"
        }
        _ => "",
    };
    io::Error::new(err.kind(), format!("AF_XDP on {name}: {what}: {err}{hint}"))
}

/// The `sz` of a libbpf options struct: up to the end of its last field.
/// libbpf refuses non-zero bytes past that, and the padding after it is
/// not ours to vouch for.
macro_rules! opts_size {
    ($t:ty, $last:ident) => {
        std::mem::offset_of!($t, $last) + {
            fn size_of_field<T>(_: impl FnOnce(&$t) -> &T) -> usize {
                std::mem::size_of::<T>()
            }
            size_of_field(|o: &$t| &o.$last)
        }
    };
}
#[cfg(test)]
pub(crate) use opts_size;

/// A `map_err` that adds what was being done on interface `name`.
fn err<'a>(name: &'a str, what: &'a str) -> impl FnOnce(io::Error) -> io::Error + 'a {
    move |e| os_error(name, what, e)
}

/// libbpf returns `-errno`.
fn check(rc: i32) -> io::Result<i32> {
    if rc < 0 {
        Err(io::Error::from_raw_os_error(-rc))
    } else {
        Ok(rc)
    }
}

fn owned(fd: i32) -> io::Result<OwnedFd> {
    let fd = check(fd)?;
    // SAFETY: libbpf just returned this descriptor and nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn cstring(s: &str) -> CString {
    CString::new(s).expect("the names here hold no NUL")
}

/// A map of the program's: created here, or found on the program.
fn create_map(
    kind: sys::bpf_map_type,
    name: &str,
    key: u32,
    value: u32,
    n: u32,
) -> io::Result<OwnedFd> {
    let name = cstring(name);
    // SAFETY: a NUL-terminated name; null options mean the defaults.
    owned(unsafe { sys::bpf_map_create(kind, name.as_ptr(), key, value, n, std::ptr::null()) })
}

/// Loads the program over the two maps; a verifier refusal comes back
/// with the verifier's log.
fn load_program(addrs: RawFd, xsks: RawFd) -> io::Result<OwnedFd> {
    let insns = program(addrs, xsks);
    let name = cstring(PROG_NAME);
    let license = cstring("Dual MIT/GPL");
    let mut log = vec![0u8; 64 * 1024];
    // SAFETY: all zeros is the "no options" value of this plain C struct.
    let mut opts: sys::bpf_prog_load_opts = unsafe { std::mem::zeroed() };
    opts.sz = opts_size!(sys::bpf_prog_load_opts, token_fd);
    opts.log_buf = log.as_mut_ptr().cast();
    opts.log_size = log.len() as u32;
    // SAFETY: `Insn` has `struct bpf_insn`'s layout (8 bytes: code, the
    // two register nibbles, off, imm); the pointers and lengths are valid
    // for the call.
    let fd = unsafe {
        sys::bpf_prog_load(
            sys::bpf_prog_type_BPF_PROG_TYPE_XDP,
            name.as_ptr(),
            license.as_ptr(),
            insns.as_ptr().cast(),
            insns.len(),
            &mut opts,
        )
    };
    owned(fd).map_err(|e| {
        let text = String::from_utf8_lossy(&log);
        let text = text.trim_end_matches('\0').trim();
        if text.is_empty() {
            e
        } else {
            io::Error::new(e.kind(), format!("{e}; the verifier said: {text}"))
        }
    })
}

fn prog_info(fd: RawFd, map_ids: &mut [u32]) -> io::Result<sys::bpf_prog_info> {
    // SAFETY: plain C struct; zeros ask for nothing but the fixed fields.
    let mut info: sys::bpf_prog_info = unsafe { std::mem::zeroed() };
    info.nr_map_ids = map_ids.len() as u32;
    info.map_ids = map_ids.as_mut_ptr() as u64;
    let mut len = std::mem::size_of::<sys::bpf_prog_info>() as u32;
    // SAFETY: `info` is valid for `len` bytes and its `map_ids` for
    // `nr_map_ids` entries.
    check(unsafe { sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) })?;
    Ok(info)
}

fn map_info(fd: RawFd) -> io::Result<sys::bpf_map_info> {
    // SAFETY: plain C struct.
    let mut info: sys::bpf_map_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<sys::bpf_map_info>() as u32;
    // SAFETY: `info` is valid for `len` bytes.
    check(unsafe { sys::bpf_map_get_info_by_fd(fd, &mut info, &mut len) })?;
    Ok(info)
}

fn name_of(raw: &[std::ffi::c_char]) -> String {
    raw.iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8 as char)
        .collect()
}

/// The XDP program attached to interface `ifindex` (any mode), and the
/// mode flag it is attached in.
fn attached(ifindex: i32) -> io::Result<Option<(u32, u32)>> {
    // SAFETY: plain C struct; `sz` set below.
    let mut q: sys::bpf_xdp_query_opts = unsafe { std::mem::zeroed() };
    q.sz = opts_size!(sys::bpf_xdp_query_opts, xdp_zc_max_segs);
    // SAFETY: `q` is a valid, sized options struct.
    check(unsafe { sys::bpf_xdp_query(ifindex, 0, &mut q) })?;
    Ok(if q.drv_prog_id != 0 {
        Some((q.drv_prog_id, XDP_FLAGS_DRV_MODE))
    } else if q.skb_prog_id != 0 {
        Some((q.skb_prog_id, XDP_FLAGS_SKB_MODE))
    } else if q.hw_prog_id != 0 {
        Some((q.hw_prog_id, XDP_FLAGS_HW_MODE))
    } else {
        None
    })
}

/// The steering program already attached to the interface, if there is
/// one: its descriptor and its maps' (program, addresses, sockets), and its
/// attach mode; an error if the interface runs another program.
fn find(name: &str, ifindex: i32, mode: XdpMode) -> io::Result<Option<([OwnedFd; 3], u32)>> {
    let Some((id, attach_mode)) =
        attached(ifindex).map_err(err(name, "querying its XDP program"))?
    else {
        return Ok(None);
    };
    // SAFETY: plain call.
    let prog = owned(unsafe { sys::bpf_prog_get_fd_by_id(id) })
        .map_err(err(name, "opening its XDP program"))?;
    let mut ids = [0u32; 4];
    let info =
        prog_info(prog.as_raw_fd(), &mut ids).map_err(err(name, "reading its XDP program"))?;
    let prog_name = name_of(&info.name);
    let wrong_mode = match mode {
        XdpMode::Driver => attach_mode != XDP_FLAGS_DRV_MODE,
        XdpMode::Generic => attach_mode != XDP_FLAGS_SKB_MODE,
        XdpMode::Auto => false,
    };
    if prog_name != PROG_NAME || info.nr_map_ids != 2 || wrong_mode {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "AF_XDP on {name}: the interface already runs XDP program {id} ({prog_name:?}{}), \
                 not homa-phy's steering program {PROG_NAME:?} in the mode asked for: remove it \
                 (`ip link set dev {name} xdp off`) or use another interface",
                if wrong_mode { ", in another mode" } else { "" }
            ),
        ));
    }
    let (mut addrs, mut xsks) = (None, None);
    for &map_id in &ids[..2] {
        // SAFETY: plain call.
        let fd = owned(unsafe { sys::bpf_map_get_fd_by_id(map_id) })
            .map_err(err(name, "opening the steering program's maps"))?;
        let info =
            map_info(fd.as_raw_fd()).map_err(err(name, "reading the steering program's maps"))?;
        if info.type_ == sys::bpf_map_type_BPF_MAP_TYPE_XSKMAP {
            xsks = Some(fd);
        } else if info.type_ == sys::bpf_map_type_BPF_MAP_TYPE_HASH && info.key_size == 16 {
            addrs = Some(fd);
        }
    }
    let (Some(addrs), Some(xsks)) = (addrs, xsks) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("AF_XDP on {name}: program {id} is named {PROG_NAME:?} but has other maps"),
        ));
    };
    Ok(Some(([prog, addrs, xsks], attach_mode)))
}

/// Creates the maps and loads the program over them: (program,
/// addresses, sockets).
fn load(name: &str) -> io::Result<[OwnedFd; 3]> {
    let addrs = create_map(
        sys::bpf_map_type_BPF_MAP_TYPE_HASH,
        ADDRS_NAME,
        16,
        4,
        MAX_ADDRS,
    )
    .map_err(err(name, "creating the address map"))?;
    let xsks = create_map(
        sys::bpf_map_type_BPF_MAP_TYPE_XSKMAP,
        XSKS_NAME,
        4,
        4,
        MAX_QUEUES,
    )
    .map_err(err(name, "creating the socket map"))?;
    let prog = load_program(addrs.as_raw_fd(), xsks.as_raw_fd())
        .map_err(err(name, "loading the steering program"))?;
    Ok([prog, addrs, xsks])
}

/// The steering program on one interface, with this endpoint's entries
/// in its maps; dropping it removes them, and detaches the program when
/// no endpoint's address is left.
#[derive(Debug)]
pub(crate) struct Steering {
    name: String,
    ifindex: i32,
    queue: u32,
    prog: OwnedFd,
    addrs: OwnedFd,
    xsks: OwnedFd,
    keys: Vec<[u8; 16]>,
    /// `XDP_FLAGS_DRV_MODE` or `XDP_FLAGS_SKB_MODE`: how it is attached.
    pub(crate) attach_mode: u32,
    /// Whether another endpoint had installed it.
    pub(crate) reused: bool,
}

impl Steering {
    /// Installs the program on interface `name` (index `ifindex`), or
    /// finds the one already there, and steers `addresses` arriving on
    /// `queue` to the socket `xsk`.
    pub(crate) fn attach(
        name: &str,
        ifindex: i32,
        mode: XdpMode,
        queue: u32,
        xsk: RawFd,
        addresses: &[IpAddr],
    ) -> io::Result<Steering> {
        if queue >= MAX_QUEUES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("AF_XDP on {name}: queue {queue} is past the steering map's {MAX_QUEUES}"),
            ));
        }
        // Two tries: another endpoint may install the program between our
        // look and our attach.
        for _ in 0..2 {
            let (fds, attach_mode, reused) = match find(name, ifindex, mode)? {
                Some((fds, attach_mode)) => (fds, attach_mode, true),
                None => (load(name)?, 0, false),
            };
            let [prog, addrs, xsks] = fds;
            let st = Steering {
                name: name.to_string(),
                ifindex,
                queue,
                prog,
                addrs,
                xsks,
                keys: Vec::new(),
                attach_mode,
                reused,
            }
            .add(xsk, addresses)?;
            if reused {
                return Ok(st);
            }
            match st.install(mode) {
                Ok(st) => return Ok(st),
                Err(e)
                    if e.raw_os_error() == Some(libc::EBUSY)
                        || e.raw_os_error() == Some(libc::EEXIST) =>
                {
                    continue
                }
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::ResourceBusy,
            format!("AF_XDP on {name}: the XDP program on the interface kept changing"),
        ))
    }

    /// Attaches the freshly loaded program, in the driver where it can be.
    fn install(mut self, mode: XdpMode) -> io::Result<Steering> {
        let modes: &[u32] = match mode {
            XdpMode::Auto => &[XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE],
            XdpMode::Driver => &[XDP_FLAGS_DRV_MODE],
            XdpMode::Generic => &[XDP_FLAGS_SKB_MODE],
        };
        let mut last = None;
        for &m in modes {
            let flags = XDP_FLAGS_UPDATE_IF_NOEXIST | m;
            // SAFETY: plain call with descriptors we own; null options.
            let rc = unsafe {
                sys::bpf_xdp_attach(self.ifindex, self.prog.as_raw_fd(), flags, std::ptr::null())
            };
            match check(rc) {
                Ok(_) => {
                    self.attach_mode = m;
                    return Ok(self);
                }
                // No XDP in this driver: try generic.
                Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => last = Some(e),
                Err(e) => {
                    if matches!(e.raw_os_error(), Some(libc::EBUSY) | Some(libc::EEXIST)) {
                        return Err(e);
                    }
                    return Err(os_error(&self.name, "attaching the steering program", e));
                }
            }
        }
        let e = last.unwrap_or_else(|| io::Error::from_raw_os_error(libc::EOPNOTSUPP));
        let what = if mode == XdpMode::Driver {
            "the interface's driver has no XDP support (generic mode works on any interface)"
        } else {
            "the interface supports no XDP, not even generic"
        };
        Err(os_error(&self.name, what, e))
    }

    /// Puts the socket and the addresses in the maps.
    fn add(mut self, xsk: RawFd, addresses: &[IpAddr]) -> io::Result<Steering> {
        let queue = self.queue;
        let value = queue;
        // SAFETY: key and value point at 4-byte values, the map's sizes.
        let rc = unsafe {
            sys::bpf_map_update_elem(
                self.xsks.as_raw_fd(),
                (&queue as *const u32).cast(),
                (&xsk as *const RawFd).cast(),
                u64::from(sys::BPF_ANY),
            )
        };
        check(rc).map_err(|e| os_error(&self.name, "adding the socket to the steering map", e))?;
        for &a in addresses {
            let key = key_of(a);
            // SAFETY: a 16-byte key and a 4-byte value, the map's sizes.
            let rc = unsafe {
                sys::bpf_map_update_elem(
                    self.addrs.as_raw_fd(),
                    key.as_ptr().cast(),
                    (&value as *const u32).cast(),
                    u64::from(sys::BPF_ANY),
                )
            };
            check(rc).map_err(|e| {
                let what =
                    format!("adding {a} to the steering map (it holds {MAX_ADDRS} addresses)");
                os_error(&self.name, &what, e)
            })?;
            self.keys.push(key);
        }
        Ok(self)
    }

    /// The program's descriptor (tests run it on frames).
    #[cfg(test)]
    pub(crate) fn prog_fd(&self) -> RawFd {
        self.prog.as_raw_fd()
    }
}

impl Drop for Steering {
    fn drop(&mut self) {
        for key in &self.keys {
            // SAFETY: a 16-byte key, the map's size.
            unsafe { sys::bpf_map_delete_elem(self.addrs.as_raw_fd(), key.as_ptr().cast()) };
        }
        // The kernel removes a closed socket from the map itself; this
        // covers a socket that outlives the steering.
        let queue = self.queue;
        // SAFETY: a 4-byte key.
        unsafe { sys::bpf_map_delete_elem(self.xsks.as_raw_fd(), (&queue as *const u32).cast()) };
        let mut next = [0u8; 16];
        // SAFETY: a null key asks for the first; `next` holds a key.
        let empty = unsafe {
            sys::bpf_map_get_next_key(
                self.addrs.as_raw_fd(),
                std::ptr::null(),
                next.as_mut_ptr().cast(),
            )
        } < 0;
        if empty {
            // SAFETY: plain C struct; `sz` set below.
            let mut opts: sys::bpf_xdp_attach_opts = unsafe { std::mem::zeroed() };
            opts.sz = opts_size!(sys::bpf_xdp_attach_opts, old_prog_fd);
            opts.old_prog_fd = self.prog.as_raw_fd();
            // Only if it is still this program (XDP_FLAGS_REPLACE).
            // SAFETY: valid options; -1 detaches.
            unsafe {
                sys::bpf_xdp_attach(
                    self.ifindex,
                    -1,
                    self.attach_mode | XDP_FLAGS_REPLACE,
                    &opts,
                )
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jumps_land_on_their_labels_and_maps_take_two_slots() {
        let p = program(3, 4);
        // Every jump stays inside the program.
        for (i, insn) in p.iter().enumerate() {
            if insn.code & 0x07 == JMP && insn.code & 0xf0 != CALL && insn.code & 0xf0 != EXIT {
                let to = i as isize + 1 + insn.off as isize;
                assert!((0..p.len() as isize).contains(&to), "jump at {i} to {to}");
            }
        }
        // The last two instructions: r0 = XDP_PASS; exit.
        let n = p.len();
        assert_eq!(
            p[n - 2],
            Insn {
                code: ALU64 | MOV | K,
                regs: R0,
                off: 0,
                imm: XDP_PASS as i32
            }
        );
        assert_eq!(p[n - 1].code, JMP | EXIT);
        let maps: Vec<i32> = p
            .iter()
            .filter(|i| i.code == LD | DW | IMM)
            .map(|i| {
                assert_eq!(i.regs >> 4, PSEUDO_MAP_FD);
                i.imm
            })
            .collect();
        assert_eq!(maps, [3, 3, 4]);
        assert_eq!(std::mem::size_of::<Insn>(), 8);
    }

    #[test]
    fn ipv4_keys_are_mapped_addresses() {
        let k = key_of("10.1.2.3".parse().unwrap());
        assert_eq!(k, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 1, 2, 3]);
        let k = key_of("fd00::7".parse().unwrap());
        assert_eq!(k[0..2], [0xfd, 0]);
        assert_eq!(k[15], 7);
    }
}
