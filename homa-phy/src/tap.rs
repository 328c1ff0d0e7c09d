//! A Linux TAP interface as a [`Device`], plus the few interface ioctls an
//! example needs (MTU, up/down, an IPv4 address) and [`wait`].
//!
//! Only `libc` is used. Every OS failure comes back as an [`io::Error`] whose
//! message names the interface; nothing here panics on an OS error. Errors on
//! the data path (a failed `read` or `write`) cannot be returned through the
//! token API, so they are counted ([`TapInterface::stats`]) and the last one is
//! kept ([`TapInterface::take_last_error`]).
//!
//! To use a TAP interface without root, create it once as root:
//!
//! ```text
//! ip tuntap add name tap0 mode tap user $USER
//! ip addr add 192.168.69.100/24 dev tap0
//! ip link set tap0 up
//! ```
#![allow(unsafe_code)]

use std::ffi::c_int;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::string::{String, ToString};
use std::vec::Vec;

use crate::{Device, DeviceCapabilities, Duration, Instant};

/// Length of an Ethernet header: Linux MTUs exclude it, ours include it.
const ETHERNET_HEADER: usize = 14;
/// Receive buffer size: the largest IP MTU Linux allows plus the header, so a
/// frame is never cut even if the MTU is raised after the device was opened.
pub(crate) const RX_BUFFER: usize = 65_535 + ETHERNET_HEADER;

/// Counters of a host device (TAP or raw socket).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct HostStats {
    /// Frames received and handed to the stack.
    pub rx_frames: u64,
    /// Failed reads (other than "nothing to read").
    pub rx_errors: u64,
    /// Frames sent.
    pub tx_frames: u64,
    /// Frames the kernel refused because its queue was full.
    pub tx_would_block: u64,
    /// Failed or short writes (other than a full queue).
    pub tx_errors: u64,
}

/// `errno` of the last failed call, as an `io::Error`.
fn last_os_error() -> io::Error {
    io::Error::last_os_error()
}

/// Wraps an OS error with the interface name and what was being done,
/// keeping its kind.
pub(crate) fn context(kind: &str, name: &str, what: &str, err: io::Error) -> io::Error {
    io::Error::new(err.kind(), std::format!("{kind} {name}: {what}: {err}"))
}

/// An `ifreq` carrying `name`, or `InvalidInput` if the kernel would not
/// take the name.
pub(crate) fn ifreq_for(name: &str) -> io::Result<libc::ifreq> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            std::format!(
                "interface {name:?}: a name must be 1 to {} bytes without NUL",
                libc::IFNAMSIZ - 1
            ),
        ));
    }
    // SAFETY: `ifreq` is plain old data (a name array and a union of
    // integers, addresses and a pointer); all zeros is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, &src) in ifr.ifr_name.iter_mut().zip(bytes) {
        *dst = src as libc::c_char;
    }
    Ok(ifr)
}

/// A throwaway socket to issue interface ioctls on.
fn control_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall with constant arguments.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(last_os_error());
    }
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Issues an interface ioctl carrying `ifr` on `fd`.
fn ifreq_ioctl(
    fd: BorrowedFd<'_>,
    request: libc::c_ulong,
    ifr: &mut libc::ifreq,
) -> io::Result<()> {
    // SAFETY: `ifr` is a valid, exclusively borrowed `ifreq`, which is what
    // every SIOC*IF* request and TUNSETIFF read and write.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), request as _, ifr as *mut libc::ifreq) };
    if rc < 0 {
        Err(last_os_error())
    } else {
        Ok(())
    }
}

/// An interface ioctl on a control socket, with the error naming the
/// interface.
fn interface_ioctl(
    name: &str,
    request: libc::c_ulong,
    what: &str,
    ifr: &mut libc::ifreq,
) -> io::Result<()> {
    let sock = control_socket().map_err(|e| context("interface", name, "socket(AF_INET)", e))?;
    ifreq_ioctl(sock.as_fd(), request, ifr).map_err(|e| context("interface", name, what, e))
}

/// The IP MTU of interface `name`, in Linux's meaning (without the Ethernet
/// header).
pub fn interface_mtu(name: &str) -> io::Result<usize> {
    let mut ifr = ifreq_for(name)?;
    interface_ioctl(name, libc::SIOCGIFMTU, "SIOCGIFMTU", &mut ifr)?;
    // SAFETY: SIOCGIFMTU filled the `ifru_mtu` member.
    let mtu = unsafe { ifr.ifr_ifru.ifru_mtu };
    usize::try_from(mtu).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            std::format!("interface {name}: negative MTU {mtu}"),
        )
    })
}

/// The index of interface `name`.
pub(crate) fn interface_index(name: &str) -> io::Result<c_int> {
    let mut ifr = ifreq_for(name)?;
    interface_ioctl(name, libc::SIOCGIFINDEX, "SIOCGIFINDEX", &mut ifr)?;
    // SAFETY: SIOCGIFINDEX filled the `ifru_ifindex` member.
    Ok(unsafe { ifr.ifr_ifru.ifru_ifindex })
}

/// The hardware type (`ARPHRD_*`, 1 for Ethernet) and address of
/// interface `name`.
#[cfg(feature = "xdp")]
pub(crate) fn interface_hwaddr(name: &str) -> io::Result<(u16, [u8; 6])> {
    let mut ifr = ifreq_for(name)?;
    interface_ioctl(name, libc::SIOCGIFHWADDR, "SIOCGIFHWADDR", &mut ifr)?;
    // SAFETY: SIOCGIFHWADDR filled the `ifru_hwaddr` member.
    let sa = unsafe { ifr.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (m, &b) in mac.iter_mut().zip(&sa.sa_data) {
        *m = b as u8;
    }
    Ok((sa.sa_family, mac))
}

/// Brings interface `name` up or down (`ip link set NAME up|down`).
/// Needs `CAP_NET_ADMIN`.
pub fn set_interface_up(name: &str, up: bool) -> io::Result<()> {
    let mut ifr = ifreq_for(name)?;
    interface_ioctl(name, libc::SIOCGIFFLAGS, "SIOCGIFFLAGS", &mut ifr)?;
    // SAFETY: SIOCGIFFLAGS filled the `ifru_flags` member.
    let flags = unsafe { ifr.ifr_ifru.ifru_flags };
    let up_flag = libc::IFF_UP as libc::c_short;
    ifr.ifr_ifru.ifru_flags = if up {
        flags | up_flag
    } else {
        flags & !up_flag
    };
    interface_ioctl(name, libc::SIOCSIFFLAGS, "SIOCSIFFLAGS", &mut ifr)
}

fn sockaddr_in(addr: [u8; 4]) -> libc::sockaddr {
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(addr),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: `sockaddr_in` and `sockaddr` are both 16 bytes of plain data;
    // the kernel reads the union member as a `sockaddr_in` for AF_INET.
    unsafe { std::mem::transmute::<libc::sockaddr_in, libc::sockaddr>(sin) }
}

/// Gives interface `name` the IPv4 address `addr/prefix_len`
/// (`ip addr add ADDR/PREFIX dev NAME`, replacing the primary address).
/// Needs `CAP_NET_ADMIN`.
pub fn set_ipv4_address(name: &str, addr: [u8; 4], prefix_len: u8) -> io::Result<()> {
    if prefix_len > 32 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            std::format!("interface {name}: IPv4 prefix length {prefix_len} is over 32"),
        ));
    }
    let mut ifr = ifreq_for(name)?;
    ifr.ifr_ifru.ifru_addr = sockaddr_in(addr);
    interface_ioctl(name, libc::SIOCSIFADDR, "SIOCSIFADDR", &mut ifr)?;
    let mask = u32::MAX
        .checked_shl(32 - u32::from(prefix_len))
        .unwrap_or(0);
    ifr.ifr_ifru.ifru_netmask = sockaddr_in(mask.to_be_bytes());
    interface_ioctl(name, libc::SIOCSIFNETMASK, "SIOCSIFNETMASK", &mut ifr)
}

/// Sleeps until `fd` is readable or `timeout` passes (`None`: no limit).
///
/// Returns `Ok(())` in both cases, and when a signal interrupts the wait:
/// the caller polls its device either way. The timeout has nanosecond
/// resolution (ppoll(2)): a pacer waiting 60 us for its next packet at
/// 200 Mbit/s must not sleep a whole millisecond. How late the kernel may
/// wake the thread is its timer slack (50 us by default, `PR_SET_TIMERSLACK`).
pub fn wait(fd: RawFd, timeout: Option<Duration>) -> io::Result<()> {
    let ts = timeout.map(|d| {
        let nanos = d.total_nanos();
        libc::timespec {
            tv_sec: libc::time_t::try_from(nanos / 1_000_000_000).unwrap_or(libc::time_t::MAX),
            tv_nsec: (nanos % 1_000_000_000) as libc::c_long,
        }
    });
    let tsp = ts
        .as_ref()
        .map_or(core::ptr::null(), |t| t as *const libc::timespec);
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid `pollfd`, count 1; a valid or null timespec; no
    // signal mask.
    let rc = unsafe { libc::ppoll(&mut pfd, 1, tsp, core::ptr::null()) };
    if rc < 0 {
        let err = last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
    Ok(())
}

/// Reads one datagram from a non-blocking fd into `buf`: `Ok(None)` when
/// there is nothing to read.
fn read_frame(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Option<usize>> {
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        let err = last_os_error();
        return match err.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
            _ => Err(err),
        };
    }
    Ok(usize::try_from(n).ok().filter(|&n| n > 0))
}

/// Writes one frame to a non-blocking fd. `Ok(false)` when the kernel queue
/// is full.
pub(crate) fn write_frame(fd: BorrowedFd<'_>, frame: &[u8]) -> io::Result<bool> {
    // SAFETY: `frame` is valid for reads of `frame.len()` bytes.
    let n = unsafe { libc::write(fd.as_raw_fd(), frame.as_ptr().cast(), frame.len()) };
    if n < 0 {
        let err = last_os_error();
        return match err.kind() {
            io::ErrorKind::WouldBlock => Ok(false),
            _ => Err(err),
        };
    }
    if usize::try_from(n).ok() != Some(frame.len()) {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            std::format!("short write: {n} of {} bytes", frame.len()),
        ));
    }
    Ok(true)
}

/// A Linux TAP interface: Ethernet frames to and from the kernel.
///
/// Dropping it closes the descriptor, which deletes the interface unless it
/// was made persistent (`ip tuntap add`).
#[derive(Debug)]
pub struct TapInterface {
    port: FdPort,
}

impl TapInterface {
    /// Opens TAP interface `name`, creating it if it does not exist
    /// (creating needs `CAP_NET_ADMIN`; attaching to one made with
    /// `ip tuntap add ... user $USER` does not).
    pub fn new(name: &str) -> io::Result<TapInterface> {
        let mut ifr = ifreq_for(name)?;
        // SAFETY: a NUL-terminated path and constant flags.
        let fd = unsafe {
            libc::open(
                c"/dev/net/tun".as_ptr(),
                libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            let err = last_os_error();
            let what = match err.raw_os_error() {
                Some(libc::ENOENT) => {
                    "/dev/net/tun does not exist: load the tun module (modprobe tun), \
                     or pass the device into the container (--device /dev/net/tun)"
                }
                Some(libc::EACCES) | Some(libc::EPERM) => {
                    "permission denied opening /dev/net/tun: run as root, \
                     or make the device accessible to this user"
                }
                _ => "open /dev/net/tun",
            };
            return Err(context("TAP", name, what, err));
        }
        // SAFETY: `fd` was just returned by open(2) and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };

        ifr.ifr_ifru.ifru_flags = (libc::IFF_TAP | libc::IFF_NO_PI) as libc::c_short;
        if let Err(err) = ifreq_ioctl(fd.as_fd(), libc::TUNSETIFF as libc::c_ulong, &mut ifr) {
            let hint = std::format!(
                "TUNSETIFF: creating a TAP interface needs CAP_NET_ADMIN: run as root, \
                 or create it beforehand with `ip tuntap add name {name} mode tap user $USER`"
            );
            let what = match err.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EACCES) => hint.as_str(),
                Some(libc::EBUSY) => {
                    "TUNSETIFF: the interface is already attached to another process"
                }
                Some(libc::EINVAL) => {
                    "TUNSETIFF: an interface of that name exists and is not a TAP"
                }
                _ => "TUNSETIFF",
            };
            return Err(context("TAP", name, what, err));
        }
        let mtu = interface_mtu(name)? + ETHERNET_HEADER;
        Ok(TapInterface {
            port: FdPort::new(fd, "TAP", name, mtu),
        })
    }

    /// The interface name.
    pub fn name(&self) -> &str {
        &self.port.name
    }

    /// Brings the interface up or down; see [`set_interface_up`].
    pub fn set_up(&self, up: bool) -> io::Result<()> {
        set_interface_up(&self.port.name, up)
    }

    /// Gives the kernel side of the interface an IPv4 address; see
    /// [`set_ipv4_address`].
    pub fn set_ipv4_address(&self, addr: [u8; 4], prefix_len: u8) -> io::Result<()> {
        set_ipv4_address(&self.port.name, addr, prefix_len)
    }

    /// What happened on the data path so far.
    pub fn stats(&self) -> HostStats {
        self.port.stats
    }

    /// The last data-path error (a failed read or write), if any, with the
    /// interface name in its message.
    pub fn take_last_error(&mut self) -> Option<io::Error> {
        self.port.last_error.take()
    }
}

impl AsRawFd for TapInterface {
    fn as_raw_fd(&self) -> RawFd {
        self.port.fd.as_raw_fd()
    }
}

impl AsFd for TapInterface {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.port.fd.as_fd()
    }
}

/// The data path shared by [`TapInterface`] and
/// [`RawSocket`](crate::RawSocket): a non-blocking descriptor, a receive
/// buffer, counters and the last error, named for messages.
#[derive(Debug)]
pub(crate) struct FdPort {
    pub(crate) fd: OwnedFd,
    /// What kind of device, for error messages ("TAP", "raw socket on").
    kind: &'static str,
    pub(crate) name: String,
    mtu: usize,
    rx_buffer: Vec<u8>,
    tx_buffer: Vec<u8>,
    pub(crate) stats: HostStats,
    pub(crate) last_error: Option<io::Error>,
}

impl FdPort {
    pub(crate) fn new(fd: OwnedFd, kind: &'static str, name: &str, mtu: usize) -> FdPort {
        FdPort {
            fd,
            kind,
            name: name.to_string(),
            mtu,
            rx_buffer: std::vec![0; RX_BUFFER],
            tx_buffer: Vec::new(),
            stats: HostStats::default(),
            last_error: None,
        }
    }

    /// Reads one frame with `read` (named `op` in errors) and hands out the
    /// token pair; a failed read is counted and kept, never a panic.
    pub(crate) fn receive(
        &mut self,
        op: &str,
        read: impl FnOnce(BorrowedFd<'_>, &mut [u8], &mut HostStats) -> io::Result<Option<usize>>,
    ) -> Option<(HostRxToken<'_>, HostTxToken<'_>)> {
        let len = match read(self.fd.as_fd(), &mut self.rx_buffer, &mut self.stats) {
            Ok(Some(len)) => len,
            Ok(None) => return None,
            Err(err) => {
                self.stats.rx_errors += 1;
                self.last_error = Some(context(self.kind, &self.name, op, err));
                return None;
            }
        };
        self.stats.rx_frames += 1;
        Some((
            HostRxToken {
                frame: &self.rx_buffer[..len],
            },
            HostTxToken {
                fd: self.fd.as_fd(),
                kind: self.kind,
                name: &self.name,
                buffer: &mut self.tx_buffer,
                stats: &mut self.stats,
                last_error: &mut self.last_error,
            },
        ))
    }

    pub(crate) fn transmit(&mut self) -> HostTxToken<'_> {
        HostTxToken {
            fd: self.fd.as_fd(),
            kind: self.kind,
            name: &self.name,
            buffer: &mut self.tx_buffer,
            stats: &mut self.stats,
            last_error: &mut self.last_error,
        }
    }

    pub(crate) fn capabilities(&self) -> DeviceCapabilities {
        DeviceCapabilities {
            max_transmission_unit: self.mtu,
            ..DeviceCapabilities::default()
        }
    }
}

/// Receive token of a [`TapInterface`] or [`RawSocket`](crate::RawSocket):
/// a frame already read from the kernel.
pub struct HostRxToken<'a> {
    pub(crate) frame: &'a [u8],
}

impl crate::RxToken for HostRxToken<'_> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(self.frame)
    }
}

/// Transmit token of a [`TapInterface`] or [`RawSocket`](crate::RawSocket).
pub struct HostTxToken<'a> {
    pub(crate) fd: BorrowedFd<'a>,
    pub(crate) kind: &'static str,
    pub(crate) name: &'a str,
    pub(crate) buffer: &'a mut Vec<u8>,
    pub(crate) stats: &'a mut HostStats,
    pub(crate) last_error: &'a mut Option<io::Error>,
}

impl crate::TxToken for HostTxToken<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        self.buffer.clear();
        self.buffer.resize(len, 0);
        let r = f(self.buffer);
        match write_frame(self.fd, self.buffer) {
            Ok(true) => self.stats.tx_frames += 1,
            Ok(false) => self.stats.tx_would_block += 1,
            Err(err) => {
                self.stats.tx_errors += 1;
                *self.last_error = Some(context(self.kind, self.name, "write", err));
            }
        }
        r
    }
}

impl Device for TapInterface {
    type RxToken<'a> = HostRxToken<'a>;
    type TxToken<'a> = HostTxToken<'a>;

    fn receive(&mut self, _timestamp: Instant) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
        self.port.receive("read", |fd, buf, _| read_frame(fd, buf))
    }

    fn transmit(&mut self, _timestamp: Instant) -> Option<Self::TxToken<'_>> {
        Some(self.port.transmit())
    }

    fn capabilities(&self) -> DeviceCapabilities {
        self.port.capabilities()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixDatagram;

    #[test]
    fn wait_has_sub_millisecond_resolution() {
        let (a, _b) = UnixDatagram::pair().unwrap();
        let mut best = std::time::Duration::MAX;
        for _ in 0..20 {
            let start = std::time::Instant::now();
            wait(a.as_raw_fd(), Some(Duration::from_micros(300))).unwrap();
            let took = start.elapsed();
            assert!(took >= std::time::Duration::from_micros(300), "{took:?}");
            best = best.min(took);
        }
        // poll(2)'s millisecond unit would never take under 1 ms; the best
        // of 20 tries survives a busy machine.
        assert!(best < std::time::Duration::from_millis(1), "{best:?}");
    }

    #[test]
    fn bad_names_are_refused_with_the_name_in_the_message() {
        for name in ["", "sixteen-bytes-xx", "nul\0"] {
            let err = TapInterface::new(name).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
            assert!(err.to_string().contains(&std::format!("{name:?}")), "{err}");
        }
    }

    #[test]
    fn errors_of_an_unknown_interface_name_it() {
        let err = interface_mtu("nosuchif0").unwrap_err();
        assert!(err.to_string().contains("nosuchif0"), "{err}");
        assert!(err.to_string().contains("SIOCGIFMTU"), "{err}");
    }

    #[test]
    fn wait_returns_at_the_timeout_or_when_readable() {
        let (a, b) = UnixDatagram::pair().unwrap();
        let start = std::time::Instant::now();
        wait(a.as_raw_fd(), Some(Duration::from_millis(30))).unwrap();
        let waited = start.elapsed();
        assert!(waited >= std::time::Duration::from_millis(30), "{waited:?}");

        b.send(b"x").unwrap();
        let start = std::time::Instant::now();
        wait(a.as_raw_fd(), Some(Duration::from_secs(10))).unwrap();
        assert!(start.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn loopback_interface_mtu_is_readable() {
        // `lo` exists in every network namespace.
        assert!(interface_mtu("lo").unwrap() >= 1500);
    }
}
