//! All of an endpoint's memory in one value, sized at compile time, the way
//! embassy-net takes its `StackResources`.
//!
//! [`EndpointResources`] holds the RPC, peer and socket tables and the
//! message pool as arrays; [`Endpoint::new_with`] builds an endpoint over
//! it with pages of [`DEFAULT_PAGE_SIZE`]. [`Endpoint::new`] stays for sizes
//! known only at run time or storage from elsewhere (slices, `Vec`s).
//!
//! ```
//! use homa_stack::endpoint::{EndpointResources, DEFAULT_PAGE_SIZE};
//! use homa_stack::storage::buffer_len_for;
//! use homa_stack::wire::{EthernetAddress, Ipv4Addr};
//! use homa_stack::{Config, Endpoint};
//!
//! // 8 RPCs, 4 peers, 2 sockets, and a pool of 16 pages.
//! const POOL: usize = buffer_len_for(16, DEFAULT_PAGE_SIZE);
//! let mut resources = EndpointResources::<8, 4, 2, POOL>::new();
//! # let seed_from_rng = || 0x0123_4567_89ab_cdef;
//! let (ip, mac) = (Ipv4Addr::new(10, 0, 0, 1), EthernetAddress([2, 0, 0, 0, 0, 1]));
//! let config = Config::new(ip, mac, seed_from_rng());
//! let mut endpoint = Endpoint::new_with(config, &mut resources).unwrap();
//! assert_eq!(endpoint.pool_capacity_bytes(), 16 * DEFAULT_PAGE_SIZE);
//! let socket = endpoint.bind(99).unwrap();
//! # let _ = socket;
//! ```
//!
//! The value is as big as its pool: on a microcontroller put it in a
//! `static` (e.g. through `static_cell`), not on a small stack.

use super::{Endpoint, PeerSlot, RpcSlot, SetupError, SocketSlot};
use crate::config::Config;

/// The page size [`Endpoint::new_with`] splits the pool into.
///
/// 4 KiB: a 1,000,000-byte message takes 245 pages, and a short message
/// wastes at most one page.
pub const DEFAULT_PAGE_SIZE: usize = 4096;

/// An endpoint's tables and message pool, sized by its parameters:
///
/// - `RPCS`: live RPCs at once (client and server); full means
///   `SendError::TableFull` or a counted drop of a new request;
/// - `PEERS`: hosts talked to at once;
/// - `SOCKETS`: sockets;
/// - `POOL_BYTES`: bytes of pool storage, 4 bytes of each page's share
///   going to the page table: `storage::buffer_len_for(pages,
///   DEFAULT_PAGE_SIZE)` gives exactly `pages` pages.
///
/// Each table needs 1..=65535 entries and the pool at least one page, or
/// [`Endpoint::new_with`] fails with [`SetupError`].
pub struct EndpointResources<
    const RPCS: usize,
    const PEERS: usize,
    const SOCKETS: usize,
    const POOL_BYTES: usize,
> {
    rpcs: [RpcSlot; RPCS],
    peers: [PeerSlot; PEERS],
    sockets: [SocketSlot; SOCKETS],
    pool: [u8; POOL_BYTES],
}

impl<const RPCS: usize, const PEERS: usize, const SOCKETS: usize, const POOL_BYTES: usize>
    EndpointResources<RPCS, PEERS, SOCKETS, POOL_BYTES>
{
    /// Empty tables and a zeroed pool; `const`, so it can initialise a
    /// `static`.
    pub const fn new() -> Self {
        EndpointResources {
            rpcs: [RpcSlot::EMPTY; RPCS],
            peers: [PeerSlot::EMPTY; PEERS],
            sockets: [SocketSlot::EMPTY; SOCKETS],
            pool: [0; POOL_BYTES],
        }
    }
}

impl<const RPCS: usize, const PEERS: usize, const SOCKETS: usize, const POOL_BYTES: usize> Default
    for EndpointResources<RPCS, PEERS, SOCKETS, POOL_BYTES>
{
    fn default() -> Self {
        Self::new()
    }
}

impl<'a> Endpoint<'a> {
    /// An endpoint over `resources`, its pool in pages of
    /// [`DEFAULT_PAGE_SIZE`]; the same as [`Endpoint::new`] over the
    /// resources' arrays, so whatever they held before (e.g. from an
    /// endpoint dropped earlier) is forgotten.
    pub fn new_with<
        const RPCS: usize,
        const PEERS: usize,
        const SOCKETS: usize,
        const POOL_BYTES: usize,
    >(
        config: Config,
        resources: &'a mut EndpointResources<RPCS, PEERS, SOCKETS, POOL_BYTES>,
    ) -> Result<Endpoint<'a>, SetupError> {
        let EndpointResources {
            rpcs,
            peers,
            sockets,
            pool,
        } = resources;
        Endpoint::new(
            config,
            &mut rpcs[..],
            &mut peers[..],
            &mut sockets[..],
            &mut pool[..],
            DEFAULT_PAGE_SIZE,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::{BindError, Event, SendError};
    use crate::phy::{forward, Loopback, Split};
    use crate::storage::buffer_len_for;
    use crate::time::{Duration, Instant};
    use crate::wire::{EthernetAddress, Ipv4Addr};

    const A_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const B_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
    const A_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
    const B_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);
    const SEED: u64 = 0x5eed;
    const POOL: usize = buffer_len_for(8, DEFAULT_PAGE_SIZE);

    type Small = EndpointResources<4, 2, 2, POOL>;

    #[test]
    fn the_endpoint_gets_the_sizes_of_its_resources() {
        let mut res = Small::new();
        let mut ep = Endpoint::new_with(Config::new(A_IP, A_MAC, SEED), &mut res).unwrap();
        assert_eq!(ep.pool_capacity_bytes(), 8 * DEFAULT_PAGE_SIZE);
        assert_eq!(ep.pool_free_bytes(), 8 * DEFAULT_PAGE_SIZE);
        // Two sockets, then the table is full.
        let s = ep.socket().unwrap();
        ep.bind(99).unwrap();
        assert_eq!(ep.socket(), Err(BindError::TableFull));
        // Four RPCs, then the table is full.
        for _ in 0..4 {
            ep.send_request(s, B_IP, 99, b"hello").unwrap();
        }
        assert_eq!(
            ep.send_request(s, B_IP, 99, b"hello"),
            Err(SendError::TableFull)
        );
        assert_eq!(ep.rpcs_in_use(), 4);
    }

    #[test]
    fn resources_too_small_are_refused() {
        let config = Config::new(A_IP, A_MAC, SEED);
        let mut no_rpcs = EndpointResources::<0, 2, 2, POOL>::new();
        assert_eq!(
            Endpoint::new_with(config.clone(), &mut no_rpcs).err(),
            Some(SetupError::TableSize)
        );
        let mut no_pages = EndpointResources::<4, 2, 2, 100>::new();
        assert!(matches!(
            Endpoint::new_with(config, &mut no_pages).err(),
            Some(SetupError::Pool(_))
        ));
    }

    #[test]
    fn reused_resources_start_empty() {
        let mut res = Small::new();
        {
            let mut ep = Endpoint::new_with(Config::new(A_IP, A_MAC, SEED), &mut res).unwrap();
            let s = ep.socket().unwrap();
            ep.send_request(s, B_IP, 99, b"left behind").unwrap();
        }
        let ep = Endpoint::new_with(Config::new(A_IP, A_MAC, SEED), &mut res).unwrap();
        assert_eq!(ep.rpcs_in_use(), 0);
        assert_eq!(ep.pool_free_bytes(), ep.pool_capacity_bytes());
    }

    #[test]
    fn two_endpoints_over_resources_complete_an_rpc() {
        let mut a_res = Small::new();
        let mut b_res = Small::new();
        let mut a = Endpoint::new_with(Config::new(A_IP, A_MAC, SEED), &mut a_res).unwrap();
        let mut b = Endpoint::new_with(Config::new(B_IP, B_MAC, SEED), &mut b_res).unwrap();
        let mut a_dev = Split::new(Loopback::<16>::new(), Loopback::<16>::new());
        let mut b_dev = Split::new(Loopback::<16>::new(), Loopback::<16>::new());
        let client = a.socket().unwrap();
        let server = b.bind(99).unwrap();
        let request = [7u8; 5000];
        let rpc = a.send_request(client, B_IP, 99, &request).unwrap();
        let mut now = Instant::from_millis(1);
        let mut response = None;
        for _ in 0..1000 {
            a.poll(now, &mut a_dev);
            forward(a_dev.tx_mut(), b_dev.rx_mut(), now);
            b.poll(now, &mut b_dev);
            while let Some(Event::Request { rpc, len, .. }) = b.recv(server) {
                let m = b.message(rpc).unwrap();
                assert!(m.eq_bytes(&request) && len == request.len());
                b.reply(rpc, b"done").unwrap();
            }
            forward(b_dev.tx_mut(), a_dev.rx_mut(), now);
            if let Some(ev) = a.recv(client) {
                response = Some(ev);
                break;
            }
            now += Duration::from_micros(10);
        }
        assert_eq!(response, Some(Event::Response { rpc, len: 4 }));
        assert!(a.message(rpc).unwrap().eq_bytes(b"done"));
        a.release(rpc).unwrap();
        assert_eq!(a.rpcs_in_use(), 0);
    }
}
