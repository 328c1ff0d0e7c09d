//! An `AF_PACKET` raw socket bound to one Linux interface, as a [`Device`].
//!
//! Unlike a TAP interface, this shares a real interface with the kernel: the
//! socket sees every frame the interface receives (the kernel's stack still
//! processes them too), and frames it sends go out of the interface. Frames
//! the host itself sends out of the interface are skipped, so a device never
//! receives its own or the kernel's outgoing traffic. Needs `CAP_NET_RAW`.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use crate::tap::{
    context, interface_index, interface_mtu, FdPort, HostRxToken, HostStats, HostTxToken,
};
use crate::{Device, DeviceCapabilities, Instant};

/// `sll_pkttype` of a frame this host sent (`linux/if_packet.h`).
const PACKET_OUTGOING: u8 = 4;
/// At most this many frames are read per `receive` call while skipping
/// outgoing ones, so one call's work stays bounded.
const MAX_SKIPPED: usize = 64;

/// `ETH_P_ALL` in network byte order, as `sockaddr_ll` wants it.
fn eth_p_all() -> u16 {
    (libc::ETH_P_ALL as u16).to_be()
}

/// An `AF_PACKET`/`SOCK_RAW` socket bound to one interface.
#[derive(Debug)]
pub struct RawSocket {
    port: FdPort,
}

impl RawSocket {
    /// Opens a non-blocking raw socket on interface `name`, receiving every
    /// protocol (`ETH_P_ALL`).
    pub fn new(name: &str) -> io::Result<RawSocket> {
        let index = interface_index(name)?;
        let mtu = interface_mtu(name)? + 14;
        // Protocol 0 receives nothing until `bind` names the protocol and the
        // interface; opening with ETH_P_ALL would queue frames from every
        // interface in the meantime.
        // SAFETY: plain syscall with constant arguments.
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        if fd < 0 {
            let err = io::Error::last_os_error();
            let what = match err.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EACCES) => {
                    "socket(AF_PACKET): raw sockets need CAP_NET_RAW: run as root, \
                     or `setcap cap_net_raw+ep` the program"
                }
                _ => "socket(AF_PACKET)",
            };
            return Err(context("raw socket on", name, what, err));
        }
        // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };

        // SAFETY: `sockaddr_ll` is plain data; all zeros is valid.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = eth_p_all();
        sll.sll_ifindex = index;
        // SAFETY: `sll` is a valid `sockaddr_ll` and the length says so.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(context(
                "raw socket on",
                name,
                "bind",
                io::Error::last_os_error(),
            ));
        }
        Ok(RawSocket {
            port: FdPort::new(fd, "raw socket on", name, mtu),
        })
    }

    /// The interface name.
    pub fn name(&self) -> &str {
        &self.port.name
    }

    /// What happened on the data path so far.
    pub fn stats(&self) -> HostStats {
        self.port.stats
    }

    /// The last data-path error (a failed read or write), if any.
    pub fn take_last_error(&mut self) -> Option<io::Error> {
        self.port.last_error.take()
    }
}

/// Reads the next frame the interface received into `buf`; `Ok(None)` when
/// none is waiting. Outgoing frames and frames too long for the buffer are
/// skipped (the latter counted as receive errors).
fn recv_frame(
    fd: BorrowedFd<'_>,
    buf: &mut [u8],
    stats: &mut HostStats,
) -> io::Result<Option<usize>> {
    for _ in 0..MAX_SKIPPED {
        // SAFETY: plain data; all zeros is valid.
        let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut from_len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        // SAFETY: the buffer and the address are valid for writes of the
        // lengths given. MSG_TRUNC makes the result the real frame length.
        let n = unsafe {
            libc::recvfrom(
                fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_TRUNC,
                (&mut from as *mut libc::sockaddr_ll).cast(),
                &mut from_len,
            )
        };
        if n < 0 {
            let err = io::Error::last_os_error();
            return match err.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
                _ => Err(err),
            };
        }
        let n = n as usize;
        if from.sll_pkttype == PACKET_OUTGOING {
            continue;
        }
        if n > buf.len() {
            stats.rx_errors += 1;
            continue;
        }
        return Ok(Some(n));
    }
    Ok(None)
}

impl AsRawFd for RawSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.port.fd.as_raw_fd()
    }
}

impl AsFd for RawSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.port.fd.as_fd()
    }
}

impl Device for RawSocket {
    type RxToken<'a> = HostRxToken<'a>;
    type TxToken<'a> = HostTxToken<'a>;

    fn receive(&mut self, _timestamp: Instant) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
        self.port.receive("recvfrom", recv_frame)
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
    use crate::{RxToken as _, TxToken as _};

    #[test]
    fn unknown_interface_error_names_it() {
        let err = RawSocket::new("nosuchif1").unwrap_err();
        assert!(err.to_string().contains("nosuchif1"), "{err}");
    }

    /// Sends a frame on `lo` through one socket and receives it on another.
    /// AF_PACKET sockets need CAP_NET_RAW.
    #[test]
    #[ignore = "needs root"]
    fn frame_sent_on_lo_arrives_on_another_socket() {
        let open = || RawSocket::new("lo").expect("an AF_PACKET socket (this test needs root)");
        let (mut a, mut b) = (open(), open());
        assert!(a.capabilities().max_transmission_unit > 1514);
        let mut frame = [0u8; 60];
        frame[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
        frame[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
        frame[12..14].copy_from_slice(&0x88b5u16.to_be_bytes()); // local experimental
        let marker = std::process::id().to_be_bytes();
        frame[14..18].copy_from_slice(&marker);
        a.transmit(Instant::ZERO)
            .unwrap()
            .consume(frame.len(), |buf| buf.copy_from_slice(&frame));
        assert_eq!(a.stats().tx_frames, 1, "{:?}", a.take_last_error());

        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        let mut found = false;
        while !found && std::time::Instant::now() < deadline {
            crate::tap::wait(b.as_raw_fd(), Some(crate::Duration::from_millis(50))).unwrap();
            while let Some((rx, _)) = b.receive(Instant::ZERO) {
                found |= rx.consume(|got| got == frame);
            }
        }
        assert!(found, "the frame did not arrive within 2 s");
    }
}
