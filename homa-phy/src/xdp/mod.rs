//! An AF_XDP socket on one queue of a Linux interface, as a [`Device`].
//!
//! Frames move through memory shared with the kernel (the UMEM) and four
//! rings: the kernel takes empty frames from the fill ring and puts what it
//! received on the RX ring; we put frames to send on the TX ring and get
//! them back on the completion ring. [`XdpSocket::receive`] takes received
//! frames in batches and hands them out one by one; a transmit token
//! writes straight into a UMEM frame and puts it on the TX ring. None of
//! that is a system call. The kernel is woken only when a ring says it
//! sleeps (`XDP_USE_NEED_WAKEUP`): in copy mode, one `sendto` moves up to
//! 32 queued frames, and polling the socket's descriptor ([`wait`]) moves
//! them as well, so a loop that sleeps on the descriptor sends its frames
//! without a call of its own. Frames queued when the stack stops polling
//! go at the next [`XdpSocket::receive`], at 32, or at [`XdpSocket::flush`].
//!
//! An XDP program decides which frames of the interface reach the socket:
//! those for the endpoint's addresses (see [`XdpConfig::addresses`]); the
//! kernel keeps the rest. It is installed when the socket opens (in the
//! driver where the driver supports XDP, else in generic mode) or, when
//! another `XdpSocket` installed it already, shared; the last socket to
//! close removes it.
//!
//! Zero-copy (the NIC's DMA into the UMEM) is used where the driver
//! supports it, copy mode elsewhere (veth, TAP, most virtual interfaces).
//!
//! The rings and the UMEM are the xsk-rs crate's (over
//! libxdp), the program is loaded through libbpf; both libraries are built
//! from the sources their crates carry, which needs clang, m4, libelf and
//! zlib at build time (`.ci/run` installs them). Needs root (or
//! `CAP_NET_RAW`, `CAP_BPF` and `CAP_NET_ADMIN`).
//!
//! [`wait`]: crate::wait
#![allow(unsafe_code)]

mod steer;
#[cfg(test)]
mod tests;

use std::io;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::os::fd::{AsRawFd, RawFd};

use xsk_rs::config::{BindFlags, FrameSize, LibxdpFlags, QueueSize, SocketConfig, UmemConfig};
use xsk_rs::{CompQueue, FillQueue, FrameDesc, RxQueue, Socket, TxQueue, Umem};

use crate::tap::{context, interface_hwaddr, interface_index, interface_mtu};
use crate::{Device, DeviceCapabilities, Instant};
pub use steer::XdpMode;

/// Frames taken from the RX ring at once.
const RX_BATCH: usize = 64;
/// Frames the kernel sends per wake-up in copy mode (its `TX_BATCH_SIZE`):
/// the device wakes it when this many wait.
const TX_BATCH: u32 = 32;
/// Frames kept for transmission at the least.
const MIN_TX_FRAMES: u32 = 64;
/// `ARPHRD_ETHER`.
const ARPHRD_ETHER: u16 = 1;

/// Whether to ask for zero-copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpCopy {
    /// Zero-copy where the driver supports it, else copy mode.
    Auto,
    /// Copy mode only (`XDP_COPY`).
    Copy,
    /// Zero-copy only (`XDP_ZEROCOPY`); an error where the driver has none.
    ZeroCopy,
}

/// How an [`XdpSocket`] is set up.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct XdpConfig {
    /// The interface's receive queue to bind (traffic for the endpoint
    /// must arrive there: one queue, or flow steering to it).
    pub queue: u32,
    /// The endpoint's addresses: frames for them, ARP and neighbour
    /// solicitations for them are steered to the socket.
    pub addresses: Vec<IpAddr>,
    /// UMEM frames: the fill ring's share for reception, the rest for
    /// transmission.
    pub frames: u32,
    /// Bytes per frame, 2048 or 4096 (the frame less 256 bytes of XDP
    /// headroom bounds the MTU).
    pub frame_size: u32,
    /// Entries of each ring (RX, TX, fill, completion), a power of two.
    pub ring_size: u32,
    /// Zero-copy or copy mode.
    pub copy: XdpCopy,
    /// Where the steering program runs.
    pub mode: XdpMode,
}

impl XdpConfig {
    /// Queue `queue`, steering `addresses`; 4,096 frames of 4,096 bytes
    /// (16 MiB), rings of 2,048, zero-copy where possible, the program in
    /// the driver where possible.
    pub fn new(queue: u32, addresses: &[IpAddr]) -> XdpConfig {
        XdpConfig {
            queue,
            addresses: addresses.to_vec(),
            frames: 4096,
            frame_size: 4096,
            ring_size: 2048,
            copy: XdpCopy::Auto,
            mode: XdpMode::Auto,
        }
    }

    /// Frames left for transmission once the fill ring is full.
    fn tx_frames(&self) -> u32 {
        self.frames.saturating_sub(self.ring_size)
    }

    /// Checks the sizes against each other and against the interface's
    /// largest frame, `frame_mtu` bytes with the Ethernet header.
    fn check(&self, name: &str, frame_mtu: usize) -> io::Result<()> {
        let bad = |msg: String| {
            Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("AF_XDP on {name}: {msg}"),
            ))
        };
        if self.frame_size != 2048 && self.frame_size != 4096 {
            return bad(format!(
                "frame size {} is not 2048 or 4096",
                self.frame_size
            ));
        }
        if !self.ring_size.is_power_of_two() || !(64..=16384).contains(&self.ring_size) {
            return bad(format!(
                "ring size {} is not a power of two in 64..=16384",
                self.ring_size
            ));
        }
        if self.tx_frames() < MIN_TX_FRAMES {
            return bad(format!(
                "a UMEM of {} frames is too small: the fill ring takes {} and transmission needs \
                 at least {MIN_TX_FRAMES}, so give at least {} frames (or a smaller ring size)",
                self.frames,
                self.ring_size,
                self.ring_size + MIN_TX_FRAMES
            ));
        }
        let room = (self.frame_size - XDP_HEADROOM) as usize;
        if frame_mtu > room {
            return bad(format!(
                "its MTU ({} bytes) does not fit a UMEM frame of {} bytes ({room} after the \
                 XDP headroom): lower the MTU to {} or below (`ip link set dev {name} mtu ...`){}",
                frame_mtu - 14,
                self.frame_size,
                room - 14,
                if self.frame_size < 4096 {
                    ", or use 4096-byte frames"
                } else {
                    ""
                }
            ));
        }
        if self.addresses.is_empty() {
            return bad("no address to steer to the socket".into());
        }
        Ok(())
    }
}

/// `XDP_PACKET_HEADROOM`: what the kernel keeps in front of each frame.
const XDP_HEADROOM: u32 = 256;

/// Counters of an [`XdpSocket`]: its own, and the kernel's for the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct XdpStats {
    /// Frames received and handed to the stack.
    pub rx_frames: u64,
    /// Times the RX ring was read and held frames.
    pub rx_batches: u64,
    /// Frames put on the TX ring.
    pub tx_frames: u64,
    /// System calls that woke the kernel to send (`sendto`).
    pub tx_wakeups: u64,
    /// System calls that woke the kernel to fill (`recvfrom`).
    pub fill_wakeups: u64,
    /// Frames not sent: no free UMEM frame, or longer than a frame.
    pub tx_dropped: u64,
    /// Failed wake-ups (other than "busy, try again").
    pub errors: u64,
    /// The kernel's: frames it dropped for this socket (no fill entry,
    /// the RX ring full, or too long for a frame).
    pub kernel_rx_dropped: u64,
    /// The kernel's: frames it could not put on a full RX ring.
    pub kernel_rx_ring_full: u64,
    /// The kernel's: times it found the fill ring empty.
    pub kernel_fill_ring_empty: u64,
}

/// The transmit side, which a transmit token borrows, and the counters.
struct TxPort {
    queue: TxQueue,
    /// Frames of ours, free for transmission.
    free: Vec<FrameDesc>,
    /// Frames on the TX ring or in the kernel, not yet completed.
    in_flight: u32,
    /// Frames put on the TX ring since the kernel was last woken.
    unkicked: u32,
    stats: XdpStats,
    last_error: Option<io::Error>,
}

impl TxPort {
    /// Wakes the kernel for the frames on the TX ring, if it sleeps.
    fn wake(&mut self, name: &str) {
        self.unkicked = 0;
        if self.queue.needs_wakeup() {
            self.stats.tx_wakeups += 1;
            if let Err(e) = self.queue.wakeup() {
                self.stats.errors += 1;
                self.last_error = Some(context("AF_XDP on", name, "sendto", e));
            }
        }
    }

    /// Puts a filled frame of ours on the TX ring, and wakes the kernel
    /// for every `TX_BATCH` of them.
    fn send(&mut self, desc: FrameDesc, name: &str) {
        // SAFETY: the frame is ours and filled; the kernel owns it from
        // here until it comes back on the completion ring.
        if unsafe { self.queue.produce_one(&desc) } == 1 {
            self.in_flight += 1;
            self.unkicked += 1;
            self.stats.tx_frames += 1;
        } else {
            // The TX ring is as large as the frames we keep, so it cannot
            // be full while we hold a free frame; count it if it is.
            self.free.push(desc);
            self.stats.tx_dropped += 1;
        }
        if self.unkicked >= TX_BATCH {
            self.wake(name);
        }
    }
}

/// An AF_XDP socket on one queue of an interface, with its UMEM and the
/// steering program; see the [module](self) documentation.
pub struct XdpSocket {
    name: String,
    mtu: usize,
    /// Bytes a UMEM frame holds.
    room: usize,
    ring_size: u32,
    mac: [u8; 6],
    zero_copy: bool,
    umem: Umem,
    fill: FillQueue,
    comp: CompQueue,
    rx: RxQueue,
    /// The socket's descriptor (owned by the queues).
    fd: RawFd,
    /// The TX ring, its frames and the counters.
    port: TxPort,
    /// Received frames the stack has read, for the fill ring.
    used: Vec<FrameDesc>,
    /// Received frames not yet handed out: `batch[next..len]`.
    batch: Vec<FrameDesc>,
    next: usize,
    len: usize,
    /// Dropped after the socket's rings: removes its map entries and, the
    /// last one out, the program.
    steering: steer::Steering,
}

impl std::fmt::Debug for XdpSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpSocket")
            .field("name", &self.name)
            .field("zero_copy", &self.zero_copy)
            .field("stats", &self.port.stats)
            .finish_non_exhaustive()
    }
}

/// The OS error inside an xsk-rs error, if it carries one.
fn source_errno(e: &(dyn std::error::Error + 'static)) -> Option<io::Error> {
    let io = e.source()?.downcast_ref::<io::Error>()?;
    Some(match io.raw_os_error() {
        Some(n) => io::Error::from_raw_os_error(n),
        None => io::Error::new(io.kind(), io.to_string()),
    })
}

impl XdpSocket {
    /// Opens an AF_XDP socket on queue `config.queue` of interface `name`
    /// and steers the frames for `config.addresses` to it.
    ///
    /// The errors say what to do: not root, an interface that does not
    /// exist or is not Ethernet, a queue another socket holds, a UMEM too
    /// small for its rings or for the interface's MTU, another XDP program
    /// on the interface, a driver without XDP when driver mode is asked
    /// for.
    pub fn new(name: &str, config: &XdpConfig) -> io::Result<XdpSocket> {
        let ifindex = interface_index(name)?;
        let (hw_type, mac) = interface_hwaddr(name)?;
        if hw_type != ARPHRD_ETHER {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("AF_XDP on {name}: not an Ethernet interface (ARPHRD type {hw_type})"),
            ));
        }
        let mtu = interface_mtu(name)? + 14;
        config.check(name, mtu)?;
        let ring = QueueSize::new(config.ring_size).map_err(|e| invalid(name, &e))?;
        let umem_config = UmemConfig::builder()
            .frame_size(FrameSize::new(config.frame_size).map_err(|e| invalid(name, &e))?)
            .fill_queue_size(ring)
            .comp_queue_size(ring)
            .frame_headroom(0)
            .build()
            .map_err(|e| invalid(name, &e))?;
        let frames = NonZeroU32::new(config.frames).expect("checked above: frames > ring size");
        let (umem, descs) = Umem::new(umem_config, frames, false).map_err(|e| {
            let err = source_errno(&e).unwrap_or_else(|| io::Error::other(e.to_string()));
            let what = match err.raw_os_error() {
                Some(libc::ENOBUFS) | Some(libc::ENOMEM) => format!(
                    "registering a UMEM of {} MiB (locked memory: raise `ulimit -l`, or run as \
                     root, or give fewer frames)",
                    (u64::from(config.frames) * u64::from(config.frame_size)) >> 20
                ),
                Some(libc::EAFNOSUPPORT) => {
                    "this kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS)".to_string()
                }
                _ => "creating the UMEM".to_string(),
            };
            steer::os_error(name, &what, err)
        })?;
        let (tx, rx, fill, comp, zero_copy) = bind(name, config, &umem)?;
        let fd = rx.fd().as_raw_fd();
        let steering = steer::Steering::attach(
            name,
            ifindex,
            config.mode,
            config.queue,
            fd,
            &config.addresses,
        )?;
        let rx_frames = config.ring_size as usize;
        let mut dev = XdpSocket {
            name: name.to_string(),
            mtu,
            room: (config.frame_size - XDP_HEADROOM) as usize,
            ring_size: config.ring_size,
            mac,
            zero_copy,
            umem,
            fill,
            comp,
            rx,
            fd,
            port: TxPort {
                queue: tx,
                free: descs[rx_frames..].to_vec(),
                in_flight: 0,
                unkicked: 0,
                stats: XdpStats::default(),
                last_error: None,
            },
            used: descs[..rx_frames].to_vec(),
            batch: vec![FrameDesc::default(); RX_BATCH],
            next: 0,
            len: 0,
            steering,
        };
        dev.refill();
        Ok(dev)
    }

    /// The interface name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The interface's MAC address (the endpoint's, unless it has one of
    /// its own and the interface accepts it: a bridge port, promiscuous).
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// Whether the socket is bound in zero-copy mode.
    pub fn zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// Whether the steering program runs in the driver (else generic).
    pub fn driver_mode(&self) -> bool {
        self.steering.attach_mode == steer::XDP_FLAGS_DRV_MODE
    }

    /// Whether the steering program was already on the interface (another
    /// socket's), rather than installed by this one.
    pub fn shares_program(&self) -> bool {
        self.steering.reused
    }

    /// The counters, the kernel's for this socket included.
    pub fn stats(&self) -> XdpStats {
        let mut s = self.port.stats;
        if let Ok(k) = self.rx.fd().xdp_statistics() {
            s.kernel_rx_dropped = k.rx_dropped();
            s.kernel_rx_ring_full = k.rx_ring_full();
            s.kernel_fill_ring_empty = k.rx_fill_ring_empty_descs();
        }
        s
    }

    /// The last failed wake-up, if any.
    pub fn take_last_error(&mut self) -> Option<io::Error> {
        self.port.last_error.take()
    }

    /// Wakes the kernel for the frames on the TX ring, if it sleeps; what
    /// the next [`XdpSocket::receive`] and a poll of the descriptor do
    /// anyway.
    pub fn flush(&mut self) {
        self.port.wake(&self.name);
    }

    /// Takes the sent frames back from the completion ring.
    fn reclaim(&mut self) {
        let p = &mut self.port;
        if p.in_flight == 0 {
            return;
        }
        let start = p.free.len();
        p.free
            .resize(start + p.in_flight as usize, FrameDesc::default());
        // SAFETY: the completion ring hands back frames of this UMEM that
        // the kernel is done with.
        let n = unsafe { self.comp.consume(&mut p.free[start..]) };
        p.free.truncate(start + n);
        p.in_flight -= n as u32;
    }

    /// Gives the frames the stack has read back to the fill ring, and wakes
    /// the kernel if it waits for them.
    fn refill(&mut self) {
        if !self.used.is_empty() {
            // SAFETY: these frames are ours (from the RX ring, read, and
            // no token refers to them any more: tokens borrow `self`).
            let n = unsafe { self.fill.produce(&self.used) };
            // All or nothing: the fill ring holds every RX frame, so it
            // always has room for the ones we hold.
            if n > 0 {
                self.used.clear();
            }
        }
        if self.fill.needs_wakeup() {
            self.port.stats.fill_wakeups += 1;
            // SAFETY: an empty, non-blocking receive on our socket.
            let rc = unsafe {
                libc::recvfrom(
                    self.fd,
                    std::ptr::null_mut(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            };
            if rc < 0 {
                let e = io::Error::last_os_error();
                if !matches!(
                    e.raw_os_error(),
                    Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENETDOWN)
                ) {
                    self.port.stats.errors += 1;
                    self.port.last_error = Some(context("AF_XDP on", &self.name, "recvfrom", e));
                }
            }
        }
    }
}

fn invalid(name: &str, e: &dyn std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("AF_XDP on {name}: {e}"),
    )
}

/// The socket bound to the queue: zero-copy first when allowed, then copy.
#[allow(clippy::type_complexity)]
fn bind(
    name: &str,
    config: &XdpConfig,
    umem: &Umem,
) -> io::Result<(TxQueue, RxQueue, FillQueue, CompQueue, bool)> {
    let iface = name.parse().map_err(|e| invalid(name, &e))?;
    let ring = QueueSize::new(config.ring_size).map_err(|e| invalid(name, &e))?;
    let tries: &[(BindFlags, bool)] = match config.copy {
        XdpCopy::Auto => &[
            (BindFlags::XDP_ZEROCOPY, true),
            (BindFlags::XDP_COPY, false),
        ],
        XdpCopy::Copy => &[(BindFlags::XDP_COPY, false)],
        XdpCopy::ZeroCopy => &[(BindFlags::XDP_ZEROCOPY, true)],
    };
    let mut last = None;
    for &(flags, zero_copy) in tries {
        let socket_config = SocketConfig::builder()
            .rx_queue_size(ring)
            .tx_queue_size(ring)
            .libxdp_flags(LibxdpFlags::XSK_LIBXDP_FLAGS_INHIBIT_PROG_LOAD)
            .bind_flags(flags | BindFlags::XDP_USE_NEED_WAKEUP)
            .build();
        // SAFETY: the program is our own (libxdp's is inhibited) and the
        // UMEM is this socket's alone.
        match unsafe { Socket::new(socket_config, umem, &iface, config.queue) } {
            Ok((tx, rx, Some((fill, comp)))) => return Ok((tx, rx, fill, comp, zero_copy)),
            Ok(_) => {
                return Err(io::Error::other(format!(
                    "AF_XDP on {name}: the UMEM came without fill and completion rings"
                )))
            }
            Err(e) => {
                let err = source_errno(&e).unwrap_or_else(|| io::Error::other(e.to_string()));
                let q = config.queue;
                let what = match err.raw_os_error() {
                    Some(libc::EBUSY) => {
                        return Err(steer::os_error(
                            name,
                            &format!("queue {q} is already bound to another AF_XDP socket"),
                            err,
                        ))
                    }
                    Some(libc::EINVAL) => format!(
                        "binding queue {q} (does the interface have it? `ethtool -l {name}`)"
                    ),
                    Some(libc::EOPNOTSUPP) if zero_copy => {
                        "binding in zero-copy mode (the driver has none)".to_string()
                    }
                    _ => format!("binding queue {q}"),
                };
                last = Some(steer::os_error(name, &what, err));
            }
        }
    }
    Err(last.expect("at least one bind was tried"))
}

impl AsRawFd for XdpSocket {
    /// The socket's descriptor: readable when frames wait on the RX ring;
    /// polling it also moves the TX ring in copy mode.
    fn as_raw_fd(&self) -> RawFd {
        self.fd
    }
}

/// A received frame, in the UMEM.
pub struct XdpRxToken<'a> {
    frame: &'a [u8],
}

impl crate::RxToken for XdpRxToken<'_> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(self.frame)
    }
}

/// A frame to send: written straight into a UMEM frame.
pub struct XdpTxToken<'a> {
    umem: &'a Umem,
    /// Bytes a frame holds.
    room: usize,
    name: &'a str,
    port: &'a mut TxPort,
}

impl crate::TxToken for XdpTxToken<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let port = self.port;
        // A frame too long for a UMEM frame takes none from the free list.
        let free = if len <= self.room {
            port.free.pop()
        } else {
            None
        };
        let Some(mut desc) = free else {
            // No frame (an RX token's partner when all are in flight) or
            // longer than one: the stack's bytes go nowhere.
            port.stats.tx_dropped += 1;
            return f(&mut vec![0; len]);
        };
        // SAFETY: `desc` is a free frame of this UMEM: neither the kernel
        // nor another token holds it.
        let mut data = unsafe { self.umem.data_mut(&mut desc) };
        data.cursor().set_pos(len);
        let r = f(data.contents_mut());
        port.send(desc, self.name);
        r
    }
}

impl Device for XdpSocket {
    type RxToken<'a> = XdpRxToken<'a>;
    type TxToken<'a> = XdpTxToken<'a>;

    fn receive(&mut self, _timestamp: Instant) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
        if self.next == self.len {
            // Frames the kernel has not taken off the TX ring: wake it (if
            // it sleeps) before looking for more to receive.
            if self.port.queue.nb_free_exact() < self.ring_size {
                self.flush();
            }
            self.reclaim();
            self.refill();
            // SAFETY: the RX ring hands us frames of this UMEM.
            self.len = unsafe { self.rx.consume(&mut self.batch) };
            self.next = 0;
            if self.len == 0 {
                return None;
            }
            self.port.stats.rx_batches += 1;
        }
        let desc = self.batch[self.next];
        self.next += 1;
        // Back to the fill ring at the next refill, which cannot come
        // before the token is gone (it borrows the device).
        self.used.push(desc);
        self.port.stats.rx_frames += 1;
        // SAFETY: the frame came off the RX ring and stays ours until the
        // next refill, after the token's lifetime.
        let frame = unsafe { self.umem.data(&desc) }.contents();
        let tx = XdpTxToken {
            umem: &self.umem,
            room: self.room,
            name: &self.name,
            port: &mut self.port,
        };
        Some((XdpRxToken { frame }, tx))
    }

    fn transmit(&mut self, _timestamp: Instant) -> Option<Self::TxToken<'_>> {
        if self.port.free.is_empty() {
            self.reclaim();
            if self.port.free.is_empty() {
                // Everything is in the kernel: make sure it is moving.
                self.flush();
                self.reclaim();
            }
        }
        if self.port.free.is_empty() {
            return None;
        }
        Some(XdpTxToken {
            umem: &self.umem,
            room: self.room,
            name: &self.name,
            port: &mut self.port,
        })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        DeviceCapabilities {
            max_transmission_unit: self.mtu,
            ..DeviceCapabilities::default()
        }
    }
}
