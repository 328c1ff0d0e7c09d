//! Writes `tools/data/sample.pcap`, the capture homa-dump's tests read.
//!
//! ```text
//! cargo run -p homa-testkit --bin make-sample-capture [OUT.pcap]
//! ```
//!
//! Two homa-stack endpoints, A (client, 10.0.0.1) and B (server on port
//! 500, 10.0.0.2), talk over an in-memory wire on a virtual clock; A's
//! device is wrapped in homa-phy's `PcapWriter`, so the capture is what A's
//! NIC saw: an ARP exchange, a ping from B, a 100-byte RPC and a
//! 50,000-byte RPC (DATA, GRANT, CUTOFFS, NEED_ACK, ACK). Then hand-made
//! frames follow for what two healthy endpoints do not send: RESEND (37 and
//! 36 bytes), BUSY, RPC_UNKNOWN, FREEZE, a DATA as Linux sends it
//! (`seg.offset` 0xFFFFFFFF, flags 6, urgent 0xb97d, checksum filled) and a
//! frame cut by the snap length. Everything is deterministic, so running
//! this again gives the same bytes.

use homa_phy::pcap::{PcapMode, PcapSink, PcapWriter};
use homa_phy::testing::{Pair, TestDevice};
use homa_phy::Duration;
use homa_stack::wire::homa::{self, DataHeader, Kind};
use homa_stack::wire::{EtherType, EthernetAddress, Icmpv4Repr, IpAddr, IpProtocol, Ipv4Addr};
use homa_stack::{Config, Endpoint, Event, SocketHandle};
use homa_testkit::{frames, Storage};

/// An untagged IPv4 frame.
fn ethernet(src: EthernetAddress, dst: EthernetAddress, payload: &[u8]) -> Vec<u8> {
    frames::ethernet(src, dst, None, EtherType::Ipv4, payload)
}

const A_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const A_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
const B_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);
const SERVER_PORT: u16 = 500;
/// One-way delay of the wire.
const DELAY: Duration = Duration::from_micros(2);

fn endpoint(ip: Ipv4Addr, mac: EthernetAddress) -> Endpoint<'static> {
    // A fixed seed: the capture is a checked-in sample that must repeat.
    Storage::new(8, 1 << 20).leak(Config::new(ip, mac, 1))
}

/// Two endpoints, the wire between them (2 us one way), and the virtual
/// clock; A's device is recorded.
type Net = Pair<Endpoint<'static>, Endpoint<'static>, PcapWriter<TestDevice, Vec<u8>>>;

/// What the capture does with the two endpoints.
trait Capture {
    fn rpc(&mut self, client: SocketHandle, server: SocketHandle, len: usize);
    fn settle(&mut self);
    fn record(&mut self, frame: &[u8]);
}

impl Capture for Net {
    /// One RPC from A to B's server; B answers with 100 bytes.
    fn rpc(&mut self, client: SocketHandle, server: SocketHandle, len: usize) {
        let request: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        self.a
            .send_request(client, B_IP, SERVER_PORT, &request)
            .expect("request accepted");
        let ok = self.run_until(Duration::from_secs(1), |n| {
            while let Some(Event::Request { rpc, .. }) = n.b.recv(server) {
                n.b.reply(rpc, &[0x42; 100]).expect("reply accepted");
            }
            match n.a.recv(client) {
                Some(Event::Response { rpc, .. }) => {
                    n.a.release(rpc).expect("release");
                    true
                }
                Some(other) => panic!("unexpected {other:?}"),
                None => false,
            }
        });
        assert!(ok, "the {len}-byte RPC did not complete");
    }

    /// Lets time pass (timers fire: NEED_ACK, ACK) until the wire is quiet
    /// and B has freed every RPC.
    fn settle(&mut self) {
        self.run_until(Duration::from_millis(50), |n| {
            n.b.rpcs_in_use() == 0 && n.flight.is_empty()
        });
    }

    /// Records a frame by hand at the current time, as if A's NIC saw it.
    fn record(&mut self, frame: &[u8]) {
        self.now += Duration::from_micros(10);
        let now = self.now;
        self.da.sink_mut().packet(now, frame).expect("Vec sink");
    }
}

/// A Homa frame from B to A (the direction of most control packets).
fn homa_b_to_a(repr: &homa::Repr<'_>, tos: u8, len: Option<usize>) -> Vec<u8> {
    let mut packet = frames::homa(repr);
    if let Some(len) = len {
        packet.truncate(len);
    }
    ethernet(
        B_MAC,
        A_MAC,
        &frames::ipv4(B_IP, A_IP, IpProtocol::Homa, tos, &packet),
    )
}

fn control(sender_id: u64, kind: Kind<'static>) -> homa::Repr<'static> {
    homa::Repr {
        sport: SERVER_PORT,
        dport: 32768,
        sender_id,
        kind,
    }
}

/// DATA as the Linux module sends a first transmission (docs/protocol.md 2.4):
/// the offset only in `sequence`, `seg.offset` 0xFFFFFFFF, the TCP hijack
/// markers, a TCP-style checksum, priority 5 in the TOS byte.
fn linux_data() -> Vec<u8> {
    let payload = vec![0x6c; 1424];
    let repr = homa::Repr {
        sport: 32768,
        dport: SERVER_PORT,
        sender_id: 1234,
        kind: Kind::Data {
            header: DataHeader {
                message_length: 100_000,
                incoming: 40_000,
                offset: 1424,
                ..DataHeader::default()
            },
            payload: &payload,
        },
    };
    let mut packet = vec![0; repr.buffer_len()];
    let mut p = homa::Packet::new_unchecked(&mut packet[..]);
    repr.emit(&mut p);
    p.set_seg_offset(homa::OFFSET_IN_SEQUENCE);
    p.set_flags(6);
    p.set_urgent(0xb97d);
    p.fill_checksum(&IpAddr::V4(A_IP), &IpAddr::V4(B_IP));
    ethernet(
        A_MAC,
        B_MAC,
        &frames::ipv4(A_IP, B_IP, IpProtocol::Homa, 5 << 5, &packet),
    )
}

fn ping_from_b() -> Vec<u8> {
    let echo = Icmpv4Repr::EchoRequest {
        ident: 0x4242,
        seq_no: 1,
        data: b"homa-dump sample",
    };
    let icmp = frames::icmpv4(&echo);
    ethernet(
        B_MAC,
        A_MAC,
        &frames::ipv4(B_IP, A_IP, IpProtocol::Icmp, 0, &icmp),
    )
}

fn main() {
    let out = std::env::args().nth(1).unwrap_or_else(|| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../tools/data/sample.pcap").into()
    });
    let a = endpoint(A_IP, A_MAC);
    let b = endpoint(B_IP, B_MAC);
    let da = PcapWriter::new(TestDevice::default(), Vec::new(), PcapMode::Both);
    let mut net: Net = Pair::with_devices(a, b, da, TestDevice::default());
    assert_eq!(net.delay, DELAY);
    let server = net.b.bind(SERVER_PORT).expect("bind");
    let client = net.a.socket().expect("socket");

    // No neighbor entries: the first request starts with ARP.
    net.rpc(client, server, 100);
    net.settle();

    // B pings A; A answers.
    let ping = ping_from_b();
    net.flight.push_back((net.now + DELAY, false, ping));
    net.run_until(Duration::from_millis(1), |n| n.flight.is_empty());

    // Beyond the 40,000 unscheduled bytes B must GRANT the rest.
    net.rpc(client, server, 50_000);
    net.settle();

    // Hand-made frames.
    let resend = control(
        1235,
        Kind::Resend {
            offset: 1424,
            length: 2848,
            priority: 6,
        },
    );
    let frames = [
        homa_b_to_a(&resend, 7 << 5, None),
        // Upstream builds send RESEND without the priority byte.
        homa_b_to_a(&resend, 7 << 5, Some(homa::RESEND_UPSTREAM_HEADER_LEN)),
        homa_b_to_a(&control(1235, Kind::Busy), 7 << 5, None),
        homa_b_to_a(&control(77, Kind::RpcUnknown), 7 << 5, None),
        homa_b_to_a(&control(1235, Kind::Freeze), 7 << 5, None),
        linux_data(),
    ];
    for frame in &frames {
        net.record(frame);
    }
    // A full-size DATA frame of which only 60 bytes were captured.
    let cut = linux_data();
    net.now += Duration::from_micros(10);
    let now = net.now;
    let sink = net.da.sink_mut();
    sink.packet_header(now, 60).expect("Vec sink");
    // packet_header wrote incl_len = orig_len = 60; orig_len is the last
    // four bytes and must say how long the frame really was.
    let at = sink.len() - 4;
    sink[at..].copy_from_slice(&(cut.len() as u32).to_le_bytes());
    sink.extend_from_slice(&cut[..60]);

    assert_eq!(net.da.sink_errors(), 0);
    let (_, pcap) = net.da.into_parts();
    std::fs::write(&out, &pcap).unwrap_or_else(|e| panic!("writing {out}: {e}"));
    println!("wrote {} bytes to {out}", pcap.len());
}
