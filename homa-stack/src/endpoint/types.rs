//! Leaf types the host layer and the engine share: where a packet came
//! from and went to, which of our addresses answers, and what the host
//! layer hands up or sends back. They import nothing else from the endpoint,
//! so the host layer (`host`) and the engine (`input`, `ctrl`,
//! `rpc`, `peer`) both sit above them.

use crate::config::Config;
use crate::wire::ipv4::Ipv4Repr;
#[cfg(feature = "ipv6")]
use crate::wire::ipv6::Ipv6Repr;
use crate::wire::{EthernetAddress, IpAddr, Ipv4Addr, Ipv6Addr};

/// Who sent a packet and to which of our ports.
#[derive(Clone, Copy)]
pub(super) struct Sender {
    pub(super) addr: IpAddr,
    pub(super) mac: EthernetAddress,
    /// The sender's port.
    pub(super) sport: u16,
    /// Our port.
    pub(super) dport: u16,
    /// Our id for the RPC (`sender_id XOR 1`).
    pub(super) local_id: u64,
    /// Our address it came to.
    pub(super) local: Local,
}

/// The IP header a Homa packet came in.
#[derive(Clone, Copy)]
pub(super) enum IpHeader<'f> {
    /// The IPv4 header (an error about the packet quotes it, and the body).
    V4(Ipv4Repr),
    /// Keeps `'f` in use without IPv6.
    #[cfg(not(feature = "ipv6"))]
    #[allow(dead_code)]
    Never(core::marker::PhantomData<&'f ()>, core::convert::Infallible),
    /// The fixed header and everything after it (extension headers too).
    #[cfg(feature = "ipv6")]
    V6 { header: Ipv6Repr, payload: &'f [u8] },
}

impl IpHeader<'_> {
    /// (source, destination).
    pub(super) fn addrs(&self) -> (IpAddr, IpAddr) {
        match self {
            IpHeader::V4(h) => (IpAddr::V4(h.src_addr), IpAddr::V4(h.dst_addr)),
            #[cfg(not(feature = "ipv6"))]
            IpHeader::Never(_, never) => match *never {},
            #[cfg(feature = "ipv6")]
            IpHeader::V6 { header, .. } => {
                (IpAddr::V6(header.src_addr), IpAddr::V6(header.dst_addr))
            }
        }
    }
}

/// What an ICMP error said of one of our Homa packets, as the host layer
/// hands it to the endpoint (which acts on it only when the quote names a
/// live RPC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unreachable {
    /// No socket on the peer's port: the RPC named fails.
    Port,
    /// Homa does not run on the peer (IPv4 protocol unreachable): the RPC
    /// named fails.
    Protocol,
    /// Net, host or address unreachable, and the other codes: soft errors
    /// (RFC 1122 4.2.3.9, RFC 5927), noted; the silence timeout decides.
    Soft,
    /// Fragmentation needed, or packet too big: a path-MTU hint.
    PathMtu,
}

/// An answer to a received frame, built while the frame is still borrowed.
pub(super) enum Reply<'f> {
    Arp {
        dst_mac: EthernetAddress,
        dst_ip: Ipv4Addr,
    },
    Echo {
        dst_mac: EthernetAddress,
        dst_ip: Ipv4Addr,
        ident: u16,
        seq_no: u16,
        data: &'f [u8],
    },
    PortUnreachable {
        dst_mac: EthernetAddress,
        dst_ip: Ipv4Addr,
        header: Ipv4Repr,
        data: &'f [u8],
    },
    #[cfg(feature = "ipv6")]
    Echo6 {
        dst_mac: EthernetAddress,
        /// The address the request was sent to: the reply comes from it.
        src_ip: Ipv6Addr,
        dst_ip: Ipv6Addr,
        ident: u16,
        seq_no: u16,
        data: &'f [u8],
    },
    #[cfg(feature = "ipv6")]
    PortUnreachable6 {
        dst_mac: EthernetAddress,
        src_ip: Ipv6Addr,
        dst_ip: Ipv6Addr,
        header: Ipv6Repr,
        data: &'f [u8],
    },
    #[cfg(feature = "ipv6")]
    /// A neighbour advertisement for our `target` (solicited: to the
    /// soliciting node; else to all nodes, answering duplicate address
    /// detection).
    Advert {
        dst_mac: EthernetAddress,
        dst_ip: Ipv6Addr,
        target: Ipv6Addr,
        solicited: bool,
    },
}

/// Which of our addresses packets for an RPC leave from: the one its peer
/// sent to, so that a host with several IPv6 addresses answers from the
/// address it was asked at (the peer matches answers by address).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Local(u8);

impl Local {
    /// The destination chooses ([`Config::ipv6_src_for`]): what a client,
    /// IPv4, and a packet to link-local or our first global address use.
    pub(super) const CHOSEN: Local = Local(0);

    /// The address `addr` (a packet's destination, one of ours) as a source.
    pub(super) fn of(config: &Config, addr: IpAddr) -> Local {
        match addr {
            IpAddr::V4(_) => Local::CHOSEN,
            // Without the feature, no packet to an IPv6 address is taken.
            #[cfg(not(feature = "ipv6"))]
            IpAddr::V6(_) => {
                let _ = config;
                Local::CHOSEN
            }
            #[cfg(feature = "ipv6")]
            IpAddr::V6(a) => config
                .ipv6_addrs
                .iter()
                .position(|&k| k == Some(a))
                .map_or(Local::CHOSEN, |k| Local(k as u8 + 1)),
        }
    }

    /// The IPv6 address it names; `None` when the destination chooses.
    pub(super) fn v6(self, config: &Config) -> Option<Ipv6Addr> {
        // Without the feature every RPC's `Local` is `CHOSEN`.
        if !cfg!(feature = "ipv6") {
            return None;
        }
        let k = usize::from(self.0).checked_sub(1)?;
        config.ipv6_addrs.get(k).copied().flatten()
    }
}
