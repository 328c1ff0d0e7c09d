//! One NIC, two stacks: a device shared between homa-stack and another stack.
//!
//! A board needs TCP or UDP (DHCP, management, logging) beside Homa, but a
//! driver can be owned by only one stack. [`Share`] owns the [`Device`] and
//! hands out two halves, each a [`Device`] itself: [`Share::homa`] for
//! homa-stack and [`Share::other`] for the other stack (smoltcp, or
//! embassy-net through `driver::SharedDriver` under feature `embassy`).
//! Received frames are sorted by [`route`]:
//!
//! - IPv4 and IPv6 packets of IP protocol (next header) 146, and ICMP
//!   destination-unreachable errors that quote one, go to homa-stack;
//! - ARP and IPv6 neighbour solicitations and advertisements (ICMPv6 types
//!   135 and 136) go to both, so each stack learns the neighbours;
//! - everything else, including frames too short to classify, goes to the
//!   other stack.
//!
//! 802.1Q and 802.1ad tags (up to two) are looked through, and so are the
//! IPv6 extension headers homa-stack skips (hop-by-hop, destination
//! options, routing with no segments left; up to four). Both halves
//! transmit straight into the device. One IP address and one MAC serve both
//! stacks: the other stack answers ARP, neighbour discovery and pings, and
//! homa-stack runs with `Config::passive_host` so it answers neither.
//!
//! # Memory
//!
//! A frame has to be read to be classified, and the token API reads a frame
//! only once, so every frame is copied into the receive queue of the side(s)
//! it is for: two fixed rings of `FRAMES` frames of `MTU` bytes inside the
//! [`Share`] (`2 * FRAMES * (MTU + ~40)` bytes; no allocation). When a side's
//! queue is full, a frame for it is dropped and counted in
//! [`SideStats::dropped`]; a frame longer than `MTU` is dropped and counted in
//! [`ShareStats::too_long`]. Frames are taken from the device only when the
//! polled side's own queue is empty, at most `FRAMES` per call, so a side that
//! is never polled costs the other nothing but the copies.
//!
//! ```
//! use homa_phy::share::{Share, Side};
//! use homa_phy::{Device, Instant, Loopback, RxToken, TxToken};
//!
//! // A Homa frame (IPv4, protocol 146) and an ARP frame arrive.
//! let mut nic: Loopback<4> = Loopback::new();
//! let mut homa_frame = [0u8; 34];
//! homa_frame[12..14].copy_from_slice(&[0x08, 0x00]);
//! homa_frame[14] = 0x45;
//! homa_frame[23] = 146;
//! let mut arp_frame = [0u8; 42];
//! arp_frame[12..14].copy_from_slice(&[0x08, 0x06]);
//! for frame in [&homa_frame[..], &arp_frame[..]] {
//!     let tx = nic.transmit(Instant::ZERO).unwrap();
//!     tx.consume(frame.len(), |buf| buf.copy_from_slice(frame));
//! }
//!
//! let mut share: Share<_, 4> = Share::new(nic);
//! let now = Instant::ZERO;
//! let mut lens = Vec::new();
//! while let Some((rx, _)) = share.homa().receive(now) {
//!     lens.push(rx.consume(|f| f.len()));
//! }
//! assert_eq!(lens, [34, 42], "homa-stack sees its packet and the ARP");
//! let mut other = share.other();
//! let (rx, _) = other.receive(now).unwrap();
//! assert_eq!(rx.consume(|f| f.len()), 42, "the other stack sees the ARP");
//! assert!(other.receive(now).is_none());
//! assert_eq!(share.stats().side(Side::Other).frames, 1);
//! ```

#[cfg(feature = "embassy")]
pub mod driver;

use crate::loopback::LoopbackRxToken;
use crate::{Device, DeviceCapabilities, Instant, Loopback, PacketMeta, RxToken, TxToken};

/// IP protocol number (IPv6 next header) of Homa.
pub const IPPROTO_HOMA: u8 = 146;

/// Where [`route`] sends a received frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Route {
    /// Only homa-stack.
    Homa,
    /// Only the other stack.
    Other,
    /// Both (ARP, IPv6 neighbour discovery).
    Both,
}

impl Route {
    /// Whether a frame routed so goes to `side`.
    pub const fn includes(self, side: Side) -> bool {
        matches!(
            (self, side),
            (Route::Both, _) | (Route::Homa, Side::Homa) | (Route::Other, Side::Other)
        )
    }
}

/// One of the two stacks sharing a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Side {
    /// homa-stack.
    Homa,
    /// The other stack (smoltcp, embassy-net).
    Other,
}

impl Side {
    pub(crate) const fn index(self) -> usize {
        match self {
            Side::Homa => 0,
            Side::Other => 1,
        }
    }

    #[cfg_attr(not(feature = "embassy"), allow(dead_code))]
    pub(crate) const fn peer(self) -> Side {
        match self {
            Side::Homa => Side::Other,
            Side::Other => Side::Homa,
        }
    }
}

fn be16(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*bytes.get(at)?, *bytes.get(at + 1)?]))
}

/// Which stack an Ethernet frame (without FCS) is for. Never panics: a frame
/// too short or malformed to tell goes to [`Route::Other`], whose stack
/// counts and drops it.
pub fn route(frame: &[u8]) -> Route {
    route_checked(frame).unwrap_or(Route::Other)
}

fn route_checked(frame: &[u8]) -> Option<Route> {
    let mut ethertype = be16(frame, 12)?;
    let mut at = 14;
    // Up to two VLAN tags (802.1Q, or an 802.1ad outer tag).
    for _ in 0..2 {
        if ethertype != 0x8100 && ethertype != 0x88a8 {
            break;
        }
        ethertype = be16(frame, at + 2)?;
        at += 4;
    }
    let l3 = frame.get(at..)?;
    match ethertype {
        0x0806 => Some(Route::Both),
        0x0800 => route_ipv4(l3),
        0x86dd => route_ipv6(l3),
        _ => None,
    }
}

fn route_ipv4(ip: &[u8]) -> Option<Route> {
    let first = *ip.first()?;
    let ihl = usize::from(first & 0x0f) * 4;
    if first >> 4 != 4 || ihl < 20 {
        return None;
    }
    match *ip.get(9)? {
        IPPROTO_HOMA => Some(Route::Homa),
        // ICMP destination unreachable quoting a Homa packet: homa-stack
        // aborts the RPCs it concerns.
        1 => {
            let icmp = ip.get(ihl..)?;
            let quoted_protocol = *icmp.get(8 + 9)?;
            (*icmp.first()? == 3 && quoted_protocol == IPPROTO_HOMA).then_some(Route::Homa)
        }
        _ => None,
    }
}

/// IPv6 extension headers [`ipv6_upper_layer`] follows before giving up.
pub const MAX_IPV6_EXT_HEADERS: usize = 4;

fn route_ipv6(ip: &[u8]) -> Option<Route> {
    if *ip.first()? >> 4 != 6 {
        return None;
    }
    let (next, upper) = ipv6_upper_layer(*ip.get(6)?, ip.get(40..)?)?;
    match next {
        IPPROTO_HOMA => Some(Route::Homa),
        58 => {
            let icmp = upper;
            match *icmp.first()? {
                135 | 136 => Some(Route::Both),
                // Destination unreachable: the quoted header's next header.
                1 if *icmp.get(8 + 6)? == IPPROTO_HOMA => Some(Route::Homa),
                _ => None,
            }
        }
        _ => None,
    }
}

/// From an IPv6 header's next-header value and the bytes after it, follows
/// hop-by-hop, destination-options and routing headers (the last only with
/// no segments left, so we are its final destination) to the upper-layer
/// header: its number and bytes. `None` for a header cut short, a routing
/// header with segments left, or more than [`MAX_IPV6_EXT_HEADERS`]. Any
/// other value (a fragment header, 44, among them) is returned as the
/// upper layer, for the caller to take or refuse. The one walk both the
/// splitter and homa-stack route by, so they agree on every packet.
pub fn ipv6_upper_layer(mut next: u8, mut rest: &[u8]) -> Option<(u8, &[u8])> {
    const HOP_BY_HOP: u8 = 0;
    const ROUTING: u8 = 43;
    const DEST_OPTIONS: u8 = 60;
    for _ in 0..=MAX_IPV6_EXT_HEADERS {
        if !matches!(next, HOP_BY_HOP | ROUTING | DEST_OPTIONS) {
            return Some((next, rest));
        }
        let [nh, len, _, segments_left, ..] = *rest else {
            return None;
        };
        if next == ROUTING && segments_left != 0 {
            return None;
        }
        next = nh;
        rest = rest.get((usize::from(len) + 1) * 8..)?;
    }
    None
}

/// Counters of one side of a [`Share`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct SideStats {
    /// Frames queued for this side.
    pub frames: u64,
    /// Frames for this side dropped because its queue was full.
    pub dropped: u64,
}

/// Counters of a [`Share`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct ShareStats {
    /// homa-stack's side.
    pub homa: SideStats,
    /// The other stack's side.
    pub other: SideStats,
    /// Frames longer than the queues' `MTU`, dropped.
    pub too_long: u64,
}

impl ShareStats {
    /// The counters of `side`.
    pub const fn side(&self, side: Side) -> &SideStats {
        match side {
            Side::Homa => &self.homa,
            Side::Other => &self.other,
        }
    }

    fn side_mut(&mut self, side: Side) -> &mut SideStats {
        match side {
            Side::Homa => &mut self.homa,
            Side::Other => &mut self.other,
        }
    }
}

/// The two receive queues of a shared device, with their counters.
pub(crate) struct Queues<const FRAMES: usize, const MTU: usize> {
    pub(crate) rings: [Loopback<FRAMES, MTU>; 2],
    pub(crate) stats: ShareStats,
}

impl<const FRAMES: usize, const MTU: usize> Queues<FRAMES, MTU> {
    pub(crate) const fn new() -> Self {
        Queues {
            rings: [Loopback::new(), Loopback::new()],
            stats: ShareStats {
                homa: SideStats {
                    frames: 0,
                    dropped: 0,
                },
                other: SideStats {
                    frames: 0,
                    dropped: 0,
                },
                too_long: 0,
            },
        }
    }

    /// Copies `frame` into the queue of each side it is routed to; returns
    /// the route.
    pub(crate) fn deliver(&mut self, frame: &[u8], meta: PacketMeta, now: Instant) -> Route {
        let route = route(frame);
        if frame.len() > MTU {
            self.stats.too_long += 1;
            return route;
        }
        for side in [Side::Homa, Side::Other] {
            if !route.includes(side) {
                continue;
            }
            let stats = self.stats.side_mut(side);
            match self.rings[side.index()].transmit(now) {
                Some(mut tx) => {
                    tx.set_meta(meta);
                    tx.consume(frame.len(), |buf| buf.copy_from_slice(frame));
                    stats.frames += 1;
                }
                None => stats.dropped += 1,
            }
        }
        route
    }
}

/// A device shared by homa-stack and another stack (see the
/// [module docs](self)).
///
/// `FRAMES` frames of up to `MTU` bytes wait in each side's receive queue;
/// the default `MTU` of 1518 holds a full Ethernet frame with an 802.1Q tag.
pub struct Share<D, const FRAMES: usize = 4, const MTU: usize = 1518> {
    device: D,
    queues: Queues<FRAMES, MTU>,
}

impl<D: Device, const FRAMES: usize, const MTU: usize> Share<D, FRAMES, MTU> {
    /// Shares `device`, with both queues empty.
    pub const fn new(device: D) -> Self {
        Share {
            device,
            queues: Queues::new(),
        }
    }

    /// homa-stack's half: a [`Device`] to poll the endpoint with.
    pub fn homa(&mut self) -> Half<'_, D, FRAMES, MTU> {
        self.half(Side::Homa)
    }

    /// The other stack's half: a [`Device`] to poll it with.
    pub fn other(&mut self) -> Half<'_, D, FRAMES, MTU> {
        self.half(Side::Other)
    }

    /// The half of `side`.
    pub fn half(&mut self, side: Side) -> Half<'_, D, FRAMES, MTU> {
        Half { share: self, side }
    }

    /// The counters.
    pub const fn stats(&self) -> &ShareStats {
        &self.queues.stats
    }

    /// Frames waiting in `side`'s queue.
    pub const fn queued(&self, side: Side) -> usize {
        self.queues.rings[side.index()].len()
    }

    /// The device.
    pub const fn get_ref(&self) -> &D {
        &self.device
    }

    /// The device, mutably (frames taken from it directly bypass the queues).
    pub fn get_mut(&mut self) -> &mut D {
        &mut self.device
    }

    /// Gives the device back; queued frames are lost.
    pub fn into_inner(self) -> D {
        self.device
    }

    /// Takes frames from the device until `side`'s queue has one, the device
    /// has none, or `FRAMES` were taken.
    fn fill(&mut self, side: Side, now: Instant) {
        for _ in 0..FRAMES {
            if !self.queues.rings[side.index()].is_empty() {
                return;
            }
            let Some((rx, _)) = self.device.receive(now) else {
                return;
            };
            let meta = rx.meta();
            let queues = &mut self.queues;
            rx.consume(|frame| queues.deliver(frame, meta, now));
        }
    }
}

/// One side of a [`Share`]: receives the frames routed to it, transmits
/// into the shared device.
pub struct Half<'s, D, const FRAMES: usize, const MTU: usize> {
    share: &'s mut Share<D, FRAMES, MTU>,
    side: Side,
}

impl<D: Device, const FRAMES: usize, const MTU: usize> Half<'_, D, FRAMES, MTU> {
    /// Which side this is.
    pub const fn side(&self) -> Side {
        self.side
    }
}

impl<D: Device, const FRAMES: usize, const MTU: usize> Device for Half<'_, D, FRAMES, MTU> {
    type RxToken<'a>
        = LoopbackRxToken<'a, MTU>
    where
        Self: 'a;
    type TxToken<'a>
        = D::TxToken<'a>
    where
        Self: 'a;

    /// The oldest frame for this side, with a transmit token of the device;
    /// `None` when no frame waits or the device has no transmit room (the
    /// frame then stays queued).
    fn receive(&mut self, now: Instant) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
        self.share.fill(self.side, now);
        let Share { device, queues } = &mut *self.share;
        let ring = &mut queues.rings[self.side.index()];
        if ring.is_empty() {
            return None;
        }
        let tx = device.transmit(now)?;
        let (rx, _) = ring.receive(now)?;
        Some((rx, tx))
    }

    fn transmit(&mut self, now: Instant) -> Option<Self::TxToken<'_>> {
        self.share.device.transmit(now)
    }

    fn capabilities(&self) -> DeviceCapabilities {
        self.share.device.capabilities()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    fn eth(ethertype: u16, payload: &[u8]) -> Vec<u8> {
        let mut f = std::vec![0u8; 12];
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    fn ipv4(protocol: u8, payload: &[u8]) -> Vec<u8> {
        let mut ip = std::vec![0u8; 20];
        ip[0] = 0x45;
        ip[9] = protocol;
        ip.extend_from_slice(payload);
        ip
    }

    fn ipv6(next_header: u8, payload: &[u8]) -> Vec<u8> {
        let mut ip = std::vec![0u8; 40];
        ip[0] = 0x60;
        ip[6] = next_header;
        ip.extend_from_slice(payload);
        ip
    }

    #[test]
    fn protocol_146_goes_to_homa_and_the_rest_to_the_other_stack() {
        assert_eq!(route(&eth(0x0800, &ipv4(146, &[0; 40]))), Route::Homa);
        assert_eq!(route(&eth(0x0800, &ipv4(17, &[0; 8]))), Route::Other);
        assert_eq!(route(&eth(0x0800, &ipv4(6, &[0; 20]))), Route::Other);
        assert_eq!(route(&eth(0x86dd, &ipv6(146, &[0; 40]))), Route::Homa);
        assert_eq!(route(&eth(0x86dd, &ipv6(17, &[0; 8]))), Route::Other);
        assert_eq!(route(&eth(0x88cc, &[0; 40])), Route::Other, "LLDP");
    }

    #[test]
    fn arp_and_neighbour_discovery_go_to_both() {
        assert_eq!(route(&eth(0x0806, &[0; 28])), Route::Both);
        for ty in [135, 136] {
            let icmp = [ty, 0, 0, 0, 0, 0, 0, 0];
            assert_eq!(route(&eth(0x86dd, &ipv6(58, &icmp))), Route::Both);
        }
        let router_solicitation = [133, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            route(&eth(0x86dd, &ipv6(58, &router_solicitation))),
            Route::Other
        );
    }

    #[test]
    fn pings_go_to_the_other_stack_and_errors_about_homa_to_homa() {
        let echo = [8, 0, 0, 0, 0, 1, 0, 1];
        assert_eq!(route(&eth(0x0800, &ipv4(1, &echo))), Route::Other);
        let mut unreachable = std::vec![3, 3, 0, 0, 0, 0, 0, 0];
        unreachable.extend_from_slice(&ipv4(146, &[0; 8]));
        assert_eq!(route(&eth(0x0800, &ipv4(1, &unreachable))), Route::Homa);
        unreachable[8 + 9] = 17;
        assert_eq!(route(&eth(0x0800, &ipv4(1, &unreachable))), Route::Other);
        let mut unreachable6 = std::vec![1, 4, 0, 0, 0, 0, 0, 0];
        unreachable6.extend_from_slice(&ipv6(146, &[0; 8]));
        assert_eq!(route(&eth(0x86dd, &ipv6(58, &unreachable6))), Route::Homa);
    }

    #[test]
    fn ipv6_extension_headers_are_looked_through_as_homa_stack_does() {
        // Hop-by-hop (8 bytes), then destination options (16), then Homa:
        // homa-stack skips them, so the splitter must give it the packet.
        let mut chain = std::vec![60, 0, 0, 0, 0, 0, 0, 0];
        chain.extend_from_slice(&[146, 1]);
        chain.extend_from_slice(&[0; 14 + 40]);
        assert_eq!(route(&eth(0x86dd, &ipv6(0, &chain))), Route::Homa);
        // A routing header with no segments left, then neighbour discovery.
        let mut nd = std::vec![58, 0, 0, 0, 0, 0, 0, 0, 135, 0, 0, 0];
        assert_eq!(route(&eth(0x86dd, &ipv6(43, &nd))), Route::Both);
        // Segments left: not for us to skip; and no more than homa-stack
        // follows (4), nor a header cut short.
        nd[3] = 1;
        assert_eq!(route(&eth(0x86dd, &ipv6(43, &nd))), Route::Other);
        let mut long = [0u8, 0, 0, 0, 0, 0, 0, 0].repeat(5);
        long[4 * 8] = 146;
        assert_eq!(route(&eth(0x86dd, &ipv6(0, &long))), Route::Other);
        assert_eq!(route(&eth(0x86dd, &ipv6(0, &chain[..12]))), Route::Other);
    }

    #[test]
    fn vlan_tags_are_looked_through() {
        let inner = eth(0x0800, &ipv4(146, &[0; 8]));
        let mut tagged = inner[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0xe0, 0x05]);
        tagged.extend_from_slice(&inner[12..]);
        assert_eq!(route(&tagged), Route::Homa);
        let mut qinq = inner[..12].to_vec();
        qinq.extend_from_slice(&[0x88, 0xa8, 0x00, 0x07, 0x81, 0x00, 0xe0, 0x05]);
        qinq.extend_from_slice(&inner[12..]);
        assert_eq!(route(&qinq), Route::Homa);
        let arp_tagged = [&[0u8; 12][..], &[0x81, 0x00, 0, 1, 0x08, 0x06], &[0; 28]].concat();
        assert_eq!(route(&arp_tagged), Route::Both);
    }

    #[test]
    fn every_prefix_of_every_kind_of_frame_routes_without_panicking() {
        let mut unreachable = std::vec![3, 3, 0, 0, 0, 0, 0, 0];
        unreachable.extend_from_slice(&ipv4(146, &[0; 8]));
        let frames = [
            eth(0x0800, &ipv4(146, &[0; 8])),
            eth(0x0800, &ipv4(1, &unreachable)),
            eth(0x86dd, &ipv6(58, &[135, 0, 0, 0])),
            [
                &[0u8; 12][..],
                &[0x81, 0x00, 0, 1, 0x88, 0xa8, 0, 2, 0x08, 0x00, 0x45],
            ]
            .concat(),
        ];
        for frame in &frames {
            for len in 0..frame.len() {
                let _ = route(&frame[..len]);
            }
        }
        // A short IPv4 header or a bad version is not Homa.
        assert_eq!(route(&eth(0x0800, &[0x45, 0, 0, 0])), Route::Other);
        let mut v5 = ipv4(146, &[]);
        v5[0] = 0x55;
        assert_eq!(route(&eth(0x0800, &v5)), Route::Other);
        let mut short_ihl = ipv4(146, &[]);
        short_ihl[0] = 0x44;
        assert_eq!(route(&eth(0x0800, &short_ihl)), Route::Other);
        assert_eq!(route(&[]), Route::Other);
    }

    #[test]
    fn random_frames_route_without_panicking_and_homa_is_found_behind_tags() {
        // xorshift64: frames of random length and bytes, with ethertypes,
        // tags and protocol bytes drawn from the values the router looks at.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let types: [u16; 6] = [0x0800, 0x86dd, 0x0806, 0x8100, 0x88a8, 0x1234];
        for _ in 0..20_000 {
            let len = (next() % 120) as usize;
            let mut f: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            let mut at = 12;
            while at + 2 <= f.len() && next() % 2 == 0 {
                let t = types[(next() % 6) as usize];
                f[at..at + 2].copy_from_slice(&t.to_be_bytes());
                at += 4;
            }
            if let Some(b) = f.get_mut(at + 2 + 9) {
                *b = [146, 1, 58, 17][(next() % 4) as usize];
            }
            let _ = route(&f);
        }
        // A well-formed Homa packet behind a tag, however the payload looks.
        for _ in 0..1000 {
            let payload: Vec<u8> = (0..(next() % 64)).map(|_| next() as u8).collect();
            let inner = eth(0x0800, &ipv4(146, &payload));
            let tagged = [&inner[..12], &[0x81, 0x00, 0x20, 0x01], &inner[12..]].concat();
            assert_eq!(route(&tagged), Route::Homa);
        }
    }

    fn send(dev: &mut impl Device, frame: &[u8]) {
        dev.transmit(Instant::ZERO)
            .unwrap()
            .consume(frame.len(), |b| b.copy_from_slice(frame));
    }

    fn drain(half: &mut impl Device) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while let Some((rx, _)) = half.receive(Instant::ZERO) {
            out.push(rx.consume(|f| f.to_vec()));
        }
        out
    }

    #[test]
    fn each_side_receives_its_frames_in_order_and_both_transmit_through_the_device() {
        let homa1 = eth(0x0800, &ipv4(146, &[1; 8]));
        let udp = eth(0x0800, &ipv4(17, &[2; 8]));
        let arp = eth(0x0806, &[3; 28]);
        let homa2 = eth(0x0800, &ipv4(146, &[4; 8]));
        let mut nic: Loopback<8> = Loopback::new();
        for f in [&homa1, &udp, &arp, &homa2] {
            send(&mut nic, f);
        }
        let mut share: Share<_, 4> = Share::new(nic);
        assert_eq!(drain(&mut share.homa()), [homa1, arp.clone(), homa2]);
        assert_eq!(drain(&mut share.other()), [udp, arp]);
        assert_eq!(share.stats().homa.frames, 3);
        assert_eq!(share.stats().other.frames, 2);

        send(&mut share.homa(), b"from homa");
        send(&mut share.other(), b"from the other");
        let mut nic = share.into_inner();
        assert_eq!(
            drain(&mut nic),
            [b"from homa".to_vec(), b"from the other".to_vec()]
        );
    }

    #[test]
    fn a_full_queue_drops_and_counts_and_the_other_side_goes_on() {
        let mut nic: Loopback<16> = Loopback::new();
        for i in 0..3u8 {
            send(&mut nic, &eth(0x0800, &ipv4(17, &[i; 8])));
        }
        let homa = eth(0x0800, &ipv4(146, &[9; 8]));
        send(&mut nic, &homa);
        let mut share: Share<_, 2> = Share::new(nic);
        // Homa's poll takes frames for the other side until its own arrives:
        // two fit the other queue, the third is dropped; 2 frames per call.
        let mut homa_half = share.homa();
        assert!(
            homa_half.receive(Instant::ZERO).is_none(),
            "2 frames per call"
        );
        let (rx, _) = homa_half.receive(Instant::ZERO).unwrap();
        assert_eq!(rx.consume(|f| f.to_vec()), homa);
        assert_eq!(share.stats().other.frames, 2);
        assert_eq!(share.stats().other.dropped, 1);
        assert_eq!(share.queued(Side::Other), 2);
        assert_eq!(drain(&mut share.other()).len(), 2);
    }

    #[test]
    fn frames_longer_than_the_queue_mtu_are_dropped_and_counted() {
        let mut nic: Loopback<4> = Loopback::new();
        send(&mut nic, &eth(0x0800, &ipv4(146, &[0; 100])));
        send(&mut nic, &eth(0x0800, &ipv4(146, &[0; 10])));
        let mut share: Share<_, 4, 64> = Share::new(nic);
        assert_eq!(drain(&mut share.homa()).len(), 1);
        assert_eq!(share.stats().too_long, 1);
    }

    #[test]
    fn a_frame_stays_queued_while_the_device_has_no_transmit_room() {
        // Split: frames come from one ring, and go out into one of 1 slot.
        let udp = eth(0x0800, &ipv4(17, &[0; 8]));
        let mut rx: Loopback<4> = Loopback::new();
        send(&mut rx, &udp);
        send(&mut rx, &eth(0x0800, &ipv4(146, &[1; 8])));
        let tx: Loopback<1> = Loopback::new();
        let mut share: Share<_, 4> = Share::new(crate::Split::new(rx, tx));
        let mut homa = share.homa();
        let (_, reply) = homa.receive(Instant::ZERO).unwrap();
        reply.consume(5, |b| b.copy_from_slice(b"reply"));
        assert_eq!(share.queued(Side::Other), 1);
        assert!(share.other().receive(Instant::ZERO).is_none(), "no room");
        assert_eq!(share.queued(Side::Other), 1, "the frame waits");
        share.get_mut().tx_mut().clear();
        assert_eq!(drain(&mut share.other()), [udp]);
    }

    #[test]
    fn received_metadata_is_kept() {
        let mut nic: Loopback<4> = Loopback::new();
        let mut tx = nic.transmit(Instant::ZERO).unwrap();
        let at = Instant::from_micros(7);
        tx.set_meta(PacketMeta::received_at(at));
        let f = eth(0x0800, &ipv4(146, &[0; 8]));
        tx.consume(f.len(), |b| b.copy_from_slice(&f));
        let mut share: Share<_, 4> = Share::new(nic);
        let mut half = share.homa();
        let (rx, _) = half.receive(Instant::ZERO).unwrap();
        assert_eq!(rx.meta().rx_timestamp, Some(at));
    }
}
