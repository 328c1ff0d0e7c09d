//! One NIC, two stacks: on each of two hosts, homa-stack and smoltcp share
//! one device (`homa_phy::share`) and one IP and MAC address. Homa RPCs and
//! a smoltcp UDP echo run at the same time between the hosts, both complete
//! byte-exact, and every ARP request and ping is answered exactly once (by
//! smoltcp; homa-stack runs as a passive host). One host shares a
//! `homa_phy::Device`, the other, in the second test, an
//! `embassy_net_driver::Driver` written here.

use std::collections::VecDeque;
use std::task::{Context, Waker};

use homa_phy::embassy::DriverAdapter;
use homa_phy::share::driver::SharedDriver;
use homa_phy::share::{Share, ShareStats};
use homa_phy::smoltcp::{to_smoltcp, SmoltcpDevice};
use homa_phy::testing::{frames, pattern};
use homa_phy::{
    BoxedLoopback, ChecksumCapabilities, Device, Instant, Loopback, RxToken as _, Split,
    TxToken as _,
};
use homa_stack::{Config, Endpoint, Event, SocketHandle};
use homa_testkit::Storage;
use smoltcp::iface::{Interface, SocketSet};
use smoltcp::socket::udp;
use smoltcp::wire::{
    ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetFrame, EthernetProtocol,
    HardwareAddress, Icmpv4Packet, Icmpv4Repr, IpAddress, IpCidr, IpProtocol, Ipv4Address,
    Ipv4Packet,
};

const A_IP: Ipv4Address = Ipv4Address::new(10, 0, 0, 1);
const B_IP: Ipv4Address = Ipv4Address::new(10, 0, 0, 2);
const A_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const B_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
const HOMA_PORT: u16 = 99;
const ECHO_PORT: u16 = 7;
const RPC_SIZES: [usize; 6] = [1, 100, 1424, 1425, 5000, 100_000];
const DATAGRAMS: usize = 12;

/// The two stacks of one host, sharing its address.
struct Stacks {
    homa: Endpoint<'static>,
    iface: Interface,
    sockets: SocketSet<'static>,
    udp: smoltcp::iface::SocketHandle,
    homa_socket: SocketHandle,
}

impl Stacks {
    fn new(ip: Ipv4Address, mac: [u8; 6], udp_port: u16, homa_server: bool) -> Stacks {
        let mut config = Config::new(ip, homa_stack::wire::EthernetAddress(mac), 0x5eed);
        config.passive_host = true;
        let mut homa = Storage::new(16, 1 << 20).leak(config);
        let homa_socket = if homa_server {
            homa.bind(HOMA_PORT).unwrap()
        } else {
            homa.socket().unwrap()
        };

        let config = smoltcp::iface::Config::new(HardwareAddress::Ethernet(EthernetAddress(mac)));
        let mut lo: Loopback<1> = Loopback::new();
        let mut iface = Interface::new(
            config,
            &mut SmoltcpDevice(&mut lo),
            to_smoltcp(Instant::ZERO),
        );
        iface.update_ip_addrs(|a| a.push(IpCidr::new(IpAddress::Ipv4(ip), 24)).unwrap());
        let buffer =
            || udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; 16], vec![0; 32 * 1024]);
        let mut socket = udp::Socket::new(buffer(), buffer());
        socket.bind(udp_port).unwrap();
        let mut sockets = SocketSet::new(vec![]);
        let udp = sockets.add(socket);
        Stacks {
            homa,
            iface,
            sockets,
            udp,
            homa_socket,
        }
    }

    fn poll_homa(&mut self, now: Instant, device: &mut impl Device) {
        self.homa.poll(now, device);
    }

    fn poll_smol(&mut self, now: Instant, device: &mut impl Device) {
        self.iface.poll(
            to_smoltcp(now),
            &mut SmoltcpDevice(device),
            &mut self.sockets,
        );
    }

    fn udp(&mut self) -> &mut udp::Socket<'static> {
        self.sockets.get_mut::<udp::Socket>(self.udp)
    }

    /// The server's work: answer Homa requests and echo datagrams.
    fn serve(&mut self) {
        while let Some(event) = self.homa.recv(self.homa_socket) {
            let Event::Request { rpc, len, .. } = event else {
                panic!("server got {event:?}");
            };
            let mut buf = vec![0; len];
            self.homa.message(rpc).unwrap().copy_to(&mut buf);
            self.homa.reply(rpc, &buf).unwrap();
        }
        while let Ok((data, meta)) = self.udp().recv() {
            let (data, meta) = (data.to_vec(), meta);
            self.udp().send_slice(&data, meta).unwrap();
        }
    }
}

/// One host's NIC as the test drives it: both stacks poll through it, and
/// frames move between it and the wire.
trait Board {
    fn poll(&mut self, now: Instant, stacks: &mut Stacks);
    /// Frames the host sent since the last call.
    fn sent(&mut self) -> Vec<Vec<u8>>;
    /// Delivers a frame; `false` when the NIC has no room now.
    fn deliver(&mut self, frame: &[u8]) -> bool;
    fn share_stats(&self) -> ShareStats;
}

/// A `homa_phy::Device` shared: a receive ring and a transmit ring.
type Nic = Split<BoxedLoopback<256>, BoxedLoopback<256>>;

fn nic() -> Nic {
    // Real checksums, so smoltcp (which verifies them) accepts every frame.
    let mut tx = BoxedLoopback::boxed();
    tx.set_checksum_capabilities(ChecksumCapabilities::default());
    Split::new(BoxedLoopback::boxed(), tx)
}

impl Board for Box<Share<Nic, 32>> {
    fn poll(&mut self, now: Instant, stacks: &mut Stacks) {
        stacks.poll_homa(now, &mut self.homa());
        stacks.poll_smol(now, &mut self.other());
    }
    fn sent(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while let Some((rx, _)) = self.get_mut().tx_mut().receive(Instant::ZERO) {
            out.push(rx.consume(|f| f.to_vec()));
        }
        out
    }
    fn deliver(&mut self, frame: &[u8]) -> bool {
        let Some(tx) = self.get_mut().rx_mut().transmit(Instant::ZERO) else {
            return false;
        };
        tx.consume(frame.len(), |b| b.copy_from_slice(frame));
        true
    }
    fn share_stats(&self) -> ShareStats {
        *self.stats()
    }
}

/// An embassy driver over two queues, with room for 64 frames to send.
#[derive(Default)]
struct WireDriver {
    rx: VecDeque<Vec<u8>>,
    tx: VecDeque<Vec<u8>>,
}

struct WireRx(Vec<u8>);
struct WireTx<'a>(&'a mut VecDeque<Vec<u8>>);

impl embassy_net_driver::RxToken for WireRx {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(mut self, f: F) -> R {
        f(&mut self.0)
    }
}

impl embassy_net_driver::TxToken for WireTx<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut buf = vec![0; len];
        let r = f(&mut buf);
        self.0.push_back(buf);
        r
    }
}

impl embassy_net_driver::Driver for WireDriver {
    type RxToken<'a> = WireRx;
    type TxToken<'a> = WireTx<'a>;
    fn receive(&mut self, _cx: &mut Context) -> Option<(WireRx, WireTx<'_>)> {
        if self.tx.len() >= 64 {
            return None;
        }
        let frame = self.rx.pop_front()?;
        Some((WireRx(frame), WireTx(&mut self.tx)))
    }
    fn transmit(&mut self, _cx: &mut Context) -> Option<WireTx<'_>> {
        (self.tx.len() < 64).then_some(WireTx(&mut self.tx))
    }
    fn link_state(&mut self, _cx: &mut Context) -> embassy_net_driver::LinkState {
        embassy_net_driver::LinkState::Up
    }
    fn capabilities(&self) -> embassy_net_driver::Capabilities {
        let mut caps = embassy_net_driver::Capabilities::default();
        caps.max_transmission_unit = 1514;
        caps
    }
    fn hardware_address(&self) -> embassy_net_driver::HardwareAddress {
        embassy_net_driver::HardwareAddress::Ethernet(B_MAC)
    }
}

impl Board for SharedDriver<WireDriver, 32> {
    fn poll(&mut self, now: Instant, stacks: &mut Stacks) {
        // Both stacks are polled on every step, so the task context's waker
        // is not needed here (the unit tests of `share::driver` cover it).
        let mut cx = Context::from_waker(Waker::noop());
        let (mut homa, mut other) = self.halves();
        stacks.poll_homa(now, &mut DriverAdapter::new(&mut homa, Some(&mut cx)));
        stacks.poll_smol(now, &mut DriverAdapter::new(&mut other, Some(&mut cx)));
    }
    fn sent(&mut self) -> Vec<Vec<u8>> {
        self.get_mut().tx.drain(..).collect()
    }
    fn deliver(&mut self, frame: &[u8]) -> bool {
        self.get_mut().rx.push_back(frame.to_vec());
        true
    }
    fn share_stats(&self) -> ShareStats {
        self.stats().unwrap()
    }
}

/// Runs both stacks of both hosts for at most `limit` of virtual time,
/// calling `done` after each step.
fn run(
    a: &mut dyn Board,
    sa: &mut Stacks,
    b: &mut dyn Board,
    sb: &mut Stacks,
    limit: homa_phy::Duration,
    mut done: impl FnMut(&mut Stacks, &mut Stacks) -> bool,
) -> bool {
    let mut now = Instant::from_millis(1);
    let end = now + limit;
    let mut to_b = VecDeque::new();
    let mut to_a = VecDeque::new();
    while now < end {
        a.poll(now, sa);
        b.poll(now, sb);
        to_b.extend(a.sent());
        to_a.extend(b.sent());
        while to_b.front().is_some_and(|f: &Vec<u8>| b.deliver(f)) {
            to_b.pop_front();
        }
        while to_a.front().is_some_and(|f: &Vec<u8>| a.deliver(f)) {
            to_a.pop_front();
        }
        sb.serve();
        if done(sa, sb) {
            return true;
        }
        now += homa_phy::Duration::from_micros(20);
    }
    false
}

/// Homa RPCs of every size in `RPC_SIZES` and `DATAGRAMS` UDP echoes, all
/// started at once from A; both kinds complete, byte-exact.
fn rpcs_and_udp_echo_at_once(a: &mut dyn Board, b: &mut dyn Board) {
    let mut sa = Stacks::new(A_IP, A_MAC, 5000, false);
    let mut sb = Stacks::new(B_IP, B_MAC, ECHO_PORT, true);
    let mut pending: Vec<_> = RPC_SIZES
        .iter()
        .enumerate()
        .map(|(i, &len)| {
            let req = pattern(len, i as u64);
            let h = sa
                .homa
                .send_request(sa.homa_socket, B_IP, HOMA_PORT, &req)
                .unwrap();
            (h, req)
        })
        .collect();
    let mut datagrams: Vec<Vec<u8>> = (0..DATAGRAMS)
        .map(|i| pattern(64 + 100 * i, i as u64))
        .collect();
    for d in &datagrams {
        sa.udp()
            .send_slice(d, (IpAddress::Ipv4(B_IP), ECHO_PORT))
            .unwrap();
    }
    let ok = run(
        a,
        &mut sa,
        b,
        &mut sb,
        homa_phy::Duration::from_secs(2),
        |sa, _| {
            while let Some(event) = sa.homa.recv(sa.homa_socket) {
                let Event::Response { rpc, len } = event else {
                    panic!("client got {event:?}");
                };
                let i = pending.iter().position(|(h, _)| *h == rpc).unwrap();
                let (_, req) = pending.swap_remove(i);
                let mut buf = vec![0; len];
                sa.homa.message(rpc).unwrap().copy_to(&mut buf);
                assert_eq!(buf, req, "Homa response of {} bytes", req.len());
                sa.homa.release(rpc).unwrap();
            }
            while let Ok((data, meta)) = sa.udp().recv() {
                assert_eq!(meta.endpoint.addr, IpAddress::Ipv4(B_IP));
                let i = datagrams.iter().position(|d| d == data).expect("an echo");
                datagrams.swap_remove(i);
            }
            pending.is_empty() && datagrams.is_empty()
        },
    );
    assert!(
        ok,
        "{} RPCs and {} datagrams left\nA: {}\nB: {}",
        pending.len(),
        datagrams.len(),
        sa.homa.stats(),
        sb.homa.stats()
    );
    for (name, s, board) in [("A", &sa, &*a), ("B", &sb, &*b)] {
        let st = s.homa.stats();
        assert_eq!(st.arp_replies, 0, "{name}: a passive host answers no ARP");
        assert_eq!(st.drops.unsupported, 0, "{name}: Homa saw only its frames");
        let share = board.share_stats();
        assert_eq!(
            (share.homa.dropped, share.other.dropped, share.too_long),
            (0, 0, 0),
            "{name}"
        );
        assert!(share.other.frames > 0 && share.homa.frames > 0, "{name}");
    }
    assert!(
        sa.homa.stats().arp_requests >= 1,
        "homa-stack resolved its peer with its own ARP, answered by smoltcp"
    );
}

fn share_board() -> Box<Share<Nic, 32>> {
    Box::new(Share::new(nic()))
}

#[test]
fn homa_rpcs_and_a_smoltcp_udp_echo_share_one_device_per_host() {
    rpcs_and_udp_echo_at_once(&mut share_board(), &mut share_board());
}

#[test]
fn the_same_through_an_embassy_driver_on_one_host() {
    let mut b: SharedDriver<WireDriver, 32> = SharedDriver::new(WireDriver::default());
    rpcs_and_udp_echo_at_once(&mut share_board(), &mut b);
}

/// An echo request from `src` to B, with valid checksums.
fn ping_to_b(src: Ipv4Address, src_mac: [u8; 6]) -> Vec<u8> {
    let icmp = Icmpv4Repr::EchoRequest {
        ident: 1,
        seq_no: 2,
        data: b"ping",
    };
    let mut body = vec![0; icmp.buffer_len()];
    let caps = smoltcp::phy::ChecksumCapabilities::default();
    icmp.emit(&mut Icmpv4Packet::new_unchecked(&mut body[..]), &caps);
    let ip = frames::ipv4(src, B_IP, frames::ICMP, 0, &body);
    frames::ethernet(src_mac, B_MAC, None, frames::IPV4, &ip)
}

/// Who has B's address, asked by (`mac`, `ip`), broadcast from `from`.
fn arp_for_b(from: [u8; 6], mac: [u8; 6], ip: Ipv4Address) -> Vec<u8> {
    let arp = frames::arp(1, mac, ip, [0; 6], B_IP);
    frames::ethernet(from, frames::BROADCAST, None, frames::ARP, &arp)
}

/// A third host asks for B's address and pings it: one answer each, from
/// smoltcp, whichever NIC B has.
fn arp_and_ping_answered_once(b: &mut dyn Board) {
    let mut sb = Stacks::new(B_IP, B_MAC, ECHO_PORT, true);
    let c_ip = Ipv4Address::new(10, 0, 0, 9);
    // The frame comes from the MAC the ARP names: the endpoint learns only
    // from ARP whose sender agrees with its frame.
    let request = arp_for_b(A_MAC, [2, 0, 0, 0, 0, 9], c_ip);
    let ping = ping_to_b(c_ip, [2, 0, 0, 0, 0, 9]);
    let caps = smoltcp::phy::ChecksumCapabilities::default();
    assert!(b.deliver(&request) && b.deliver(&ping));
    let mut now = Instant::from_millis(1);
    let mut sent = Vec::new();
    for _ in 0..10 {
        b.poll(now, &mut sb);
        sent.extend(b.sent());
        now += homa_phy::Duration::from_micros(100);
    }
    let mut arp_replies = 0;
    let mut echo_replies = 0;
    for f in &sent {
        let eth = EthernetFrame::new_checked(&f[..]).unwrap();
        match eth.ethertype() {
            EthernetProtocol::Arp => {
                let r = ArpRepr::parse(&ArpPacket::new_checked(eth.payload()).unwrap()).unwrap();
                let ArpRepr::EthernetIpv4 { operation, .. } = r else {
                    unreachable!()
                };
                assert_eq!(operation, ArpOperation::Reply);
                arp_replies += 1;
            }
            EthernetProtocol::Ipv4 => {
                let p = Ipv4Packet::new_checked(eth.payload()).unwrap();
                assert_eq!(p.next_header(), IpProtocol::Icmp);
                let r = Icmpv4Repr::parse(&Icmpv4Packet::new_checked(p.payload()).unwrap(), &caps)
                    .unwrap();
                assert!(
                    matches!(r, Icmpv4Repr::EchoReply { seq_no: 2, .. }),
                    "{r:?}"
                );
                echo_replies += 1;
            }
            other => panic!("unexpected {other}"),
        }
    }
    assert_eq!((arp_replies, echo_replies), (1, 1), "one answer each");
    assert_eq!(sb.homa.stats().icmp_echo_replies, 0);
    assert_eq!(sb.homa.stats().arp_replies, 0);
    assert_eq!(b.share_stats().homa.frames, 1, "homa-stack saw the ARP");
}

#[test]
fn arp_and_ping_are_answered_once_by_smoltcp_through_a_device() {
    arp_and_ping_answered_once(&mut share_board());
}

#[test]
fn arp_and_ping_are_answered_once_by_smoltcp_through_a_driver() {
    arp_and_ping_answered_once(&mut SharedDriver::<WireDriver, 32>::new(
        WireDriver::default(),
    ));
}

/// `passive_host` alone, without the splitter: an endpoint given an ARP
/// request and a ping answers neither, yet learns the asker's address from
/// the ARP it saw and sends its request straight there (asking once, by
/// broadcast, who has it: an unasked claim is believed no further until
/// answered).
#[test]
fn a_passive_endpoint_answers_no_arp_or_ping_but_learns_from_arp() {
    let mut sb = Stacks::new(B_IP, B_MAC, ECHO_PORT, true);
    // B starts an RPC to A, so it has a peer to learn about.
    let client = sb.homa.socket().unwrap();
    sb.homa
        .send_request(client, A_IP, HOMA_PORT, b"hello")
        .unwrap();
    // The frame comes from the MAC the ARP names: the endpoint learns only
    // from ARP whose sender agrees with its frame.
    let request = arp_for_b(A_MAC, A_MAC, A_IP);
    let mut nic = nic();
    for frame in [request, ping_to_b(A_IP, A_MAC)] {
        nic.rx_mut()
            .transmit(Instant::ZERO)
            .unwrap()
            .consume(frame.len(), |b| b.copy_from_slice(&frame));
    }
    sb.poll_homa(Instant::from_millis(1), &mut nic);
    let mut sent = Vec::new();
    while let Some((rx, _)) = nic.tx_mut().receive(Instant::ZERO) {
        sent.push(rx.consume(|f| f.to_vec()));
    }
    assert!(nic.rx_ref().is_empty(), "both frames were read");
    let st = sb.homa.stats();
    assert_eq!((st.arp_replies, st.icmp_echo_replies), (0, 0));
    assert_eq!(st.arp_requests, 1, "A's address is asked about once");
    let arp = |f: &Vec<u8>| EthernetFrame::new_checked(&f[..]).unwrap().ethertype();
    let (asked, sent): (Vec<_>, Vec<_>) = sent
        .into_iter()
        .partition(|f| arp(f) == EthernetProtocol::Arp);
    assert_eq!(asked.len(), 1);
    let eth = EthernetFrame::new_checked(&asked[0][..]).unwrap();
    assert_eq!(eth.dst_addr(), EthernetAddress::BROADCAST);
    assert!(!sent.is_empty());
    for f in &sent {
        let eth = EthernetFrame::new_checked(&f[..]).unwrap();
        assert_eq!(eth.ethertype(), EthernetProtocol::Ipv4, "no other ARP");
        assert_eq!(eth.dst_addr(), EthernetAddress(A_MAC));
        let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
        assert_eq!(ip.next_header(), IpProtocol::Unknown(146), "no echo reply");
    }
}

/// Without `passive_host` the same endpoint answers both: the flag is what
/// keeps it quiet.
#[test]
fn an_active_endpoint_answers_arp_and_ping() {
    let mut config = Config::new(B_IP, homa_stack::wire::EthernetAddress(B_MAC), 0x5eed);
    config.passive_host = false;
    let mut homa = Storage::with_peers(2, 2, 1 << 16).leak(config);
    // The frame comes from the MAC the ARP names: the endpoint learns only
    // from ARP whose sender agrees with its frame.
    let request = arp_for_b(A_MAC, A_MAC, A_IP);
    let mut nic = nic();
    for frame in [request, ping_to_b(A_IP, A_MAC)] {
        nic.rx_mut()
            .transmit(Instant::ZERO)
            .unwrap()
            .consume(frame.len(), |b| b.copy_from_slice(&frame));
    }
    homa.poll(Instant::from_millis(1), &mut nic);
    assert_eq!(homa.stats().arp_replies, 1);
    assert_eq!(homa.stats().icmp_echo_replies, 1);
    assert_eq!(nic.tx_ref().len(), 2);
}
