//! Arbitrary frames, interleaved with API calls and clock steps decoded from
//! the input, fed into an endpoint that holds live client and server RPCs.
//! The endpoint must never panic, its tables never exceed their capacity,
//! its pool accounting stays within bounds, and its counters agree with
//! what the device delivered.
//!
//! The input plays every part a hostile network can: a peer that answers
//! with any Homa packet, strangers with other addresses, forged Ethernet and
//! IPv4 headers (source MAC, addresses, protocol, lengths, VLAN tags), ARP,
//! and ICMP errors quoting what the endpoint sent; and over IPv6 (the
//! endpoint is dual-stack): Homa packets, extension-header chains,
//! neighbour discovery, echo and ICMPv6 errors, forged addresses and
//! lengths. The server answers with
//! responses of up to 1,000,000 bytes, so responses that wait for grants
//! (beyond `unsched_bytes`) are half sent when their client goes quiet.
//!
//! Two bounds hold at every poll. Amplification: the bytes the endpoint
//! sends stay within [`AMPLIFICATION`] times the bytes of the frames it
//! received, plus what the application's own messages may cost
//! ([`Traffic::allowance`]), so no packet, however often replayed, buys
//! sending beyond a fixed ratio. Work: no lookup in an index whose keys
//! peers choose (server RPCs, peers) examines more than [`MAX_PROBES`]
//! entries, and a poll makes at most [`LOOKUPS_PER_FRAME`] lookups per
//! frame it took or sent, so no packet buys a walk of a table.
//!
//! And no client RPC fails before its time: a failure is a timeout (or an
//! unresolved peer) at least `timeout_ticks` after the request was sent,
//! or ICMP's word after the endpoint took an ICMP error
//! ([`check_failure`]); whatever RPC_UNKNOWN, RESEND or BUSY the input
//! sends, none ends an RPC.
//!
//! Three inputs of the corpus were written by hand to hold the bounds to
//! account: `6acbcb9d…` fills the table with 29 requests whose ids share a
//! bucket under the key 0 and GRANTs two more of that bucket (a known key
//! would make every lookup walk them all: the work bound), `d5209102…`
//! answers the 45,000-byte request with RPC_UNKNOWN 60 times, 6 ms apart
//! (unrationed restarts would resend 40 kB each: the amplification bound;
//! a budget of restarts that failed the RPC would end it while its peer
//! answers: the failure check), and `e91055c7…` asks for its first 40,000 bytes again
//! with 60 RESENDs, 6 ms apart (unrationed, each would buy 40 kB: the
//! amplification bound).
//!
//! At the end of every input the clock runs past the timeouts with no input,
//! and then nothing may be held: no RPC, no pool page, and no peer beyond
//! what the peer table promises. The table is a neighbour cache evicted only
//! when full, so idle peers may stay; but an entry is made only for an RPC
//! (or `add_neighbor`), so every entry left is an address that had an RPC
//! during the run, and with no RPC left every entry but the two neighbours
//! set by hand (pinned) must be evictable (new peers, one after another,
//! must still fit).
//!
//! ```text
//! cargo +nightly fuzz run endpoint -- -max_total_time=60
//! EP_DEBUG=1 cargo +nightly fuzz run endpoint INPUT   # the stats at the end
//! ```

#![no_main]

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, OnceLock};

use libfuzzer_sys::fuzz_target;

use homa_phy::testing::{frames, pattern, TestDevice};
use homa_phy::{Duration, Instant};
use homa_stack::endpoint::{IndexWork, PeerSlot, RpcSlot, SocketSlot};
use homa_stack::wire::homa::{Ack, DataHeader, Kind, Repr};
use homa_stack::wire::icmpv6::Icmpv6DstUnreachable;
use homa_stack::wire::{
    EthernetAddress, Icmpv6Packet, Icmpv6Repr, IpAddr, IpProtocol, Ipv4Addr, Ipv6Addr, Ipv6Repr,
};
use homa_stack::endpoint::MAX_RESTARTS;
use homa_stack::{Config, Endpoint, Event, RpcError, RpcHandle, SendError};

const ME: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const PEER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const ME6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
const PEER6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);
/// ME6's solicited-node group, and all nodes.
const ME6_GROUP: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00, 1);
const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
const MY_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
const PEER_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);
const EVIL_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0x66]);
/// Enough RPCs that colliding ids stand out from chance (see `MAX_PROBES`).
const RPCS: usize = 32;
const PEERS: usize = 4;
/// Longest request or response.
const MAX_MESSAGE: usize = 1_000_000;
/// Room for two 1 MB messages and change.
const POOL: usize = 2_560 * 1024;
/// Frames the device remembers, for ICMP errors that quote them.
const SENT_KEPT: usize = 8;

/// The amplification bound: each byte of a frame received may make the
/// endpoint send this many, beyond what the application's messages cost
/// (`Traffic::allowance`). Answers are one for one (RPC_UNKNOWN, BUSY,
/// ACK, GRANT for DATA, echo, ARP and neighbour replies); the most a
/// packet draws is one full DATA frame (1,514 bytes) for an RPC_UNKNOWN of
/// 62 bytes (24.4 times) once a request's starts are spent, or for a
/// RESEND of 71 once its message's reserve is spent (21.3 times), each at
/// most once per RESEND interval per message; and what a forged first
/// DATA of a long message draws before its RPC times out: about 20
/// RESENDs toward its source (`timeout_ticks / resend_interval`), 16 times
/// the smallest such DATA (accepted, as Linux does the same).
const AMPLIFICATION: u64 = 25;
/// Bytes of a DATA packet beyond its payload, at most: Ethernet with an
/// 802.1Q tag, IPv6, the DATA header.
const DATA_OVERHEAD: u64 = 18 + 40 + 56;
/// Payload bytes per DATA packet, at least (IPv6 at a 1500-byte MTU).
const MIN_SEGMENT: u64 = 1_400;
/// Control bytes over one message's life toward its peer, at most: the
/// RESENDs while it waits (one per `resend_interval` until
/// `timeout_ticks`), NEED_ACKs, its ACK, CUTOFFS, the ARP or neighbour
/// solicitations resolving the peer: 32 frames of up to 128 bytes.
const MESSAGE_CONTROL: u64 = 32 * 128;
/// Times a message's first [`RESEND_WINDOW`] bytes may go out again with no
/// received byte paying for them at [`AMPLIFICATION`]: the reserve of the
/// message's resend ration (`RESEND_WINDOWS`, spent by RESENDs and a
/// request's knocks after RPC_UNKNOWN).
const RESENDS_PER_MESSAGE: u64 = 8;
/// The most one RESEND makes the endpoint send again (and a request's
/// start after RPC_UNKNOWN at once): the configuration's unscheduled bytes
/// (at most `RESEND_MAX_BYTES`).
const RESEND_WINDOW: u64 = 40_000;
/// The work bound: the most index entries one lookup may examine. Keys are
/// secret (`secret_seed`), so the ids of any input are as good as random:
/// `RPCS` keys in as many buckets put 16 in one with a probability below
/// 1e-13, while ids chosen to collide under a known key put them all in
/// one (a lookup walks the table).
const MAX_PROBES: u32 = 16;
/// The work bound: lookups one poll (or one application call) may make per
/// frame it took or sent, plus one: each packet looks up its peer and its
/// RPC, an ACK each RPC it acks, a frame sent its peer.
const LOOKUPS_PER_FRAME: u64 = 8;

/// What the endpoint received and sent, for the amplification bound.
#[derive(Default, Debug)]
struct Traffic {
    /// Bytes of the frames the endpoint took from the device.
    rx_bytes: u64,
    /// Bytes of the frames it sent.
    tx_bytes: u64,
    /// What the application's messages may cost on the wire: each once
    /// with its headers (a request once more for each of its
    /// `MAX_RESTARTS` starts, as the forged GRANTs that follow one may draw
    /// it whole), [`RESENDS_PER_MESSAGE`] times again up to
    /// [`RESEND_WINDOW`], once again more as GRANTs above the highest yet
    /// earn back what they grant (at most the message), and
    /// [`MESSAGE_CONTROL`].
    messages: u64,
}

impl Traffic {
    /// A message of `len` bytes the application asked to send, a request
    /// or a response.
    fn message(&mut self, len: usize, request: bool) {
        let wire = |n: u64| n + n.div_ceil(MIN_SEGMENT).max(1) * DATA_OVERHEAD;
        let len = len as u64;
        let starts = if request { u64::from(MAX_RESTARTS) } else { 0 };
        self.messages += (2 + starts) * wire(len)
            + RESENDS_PER_MESSAGE * wire(len.min(RESEND_WINDOW))
            + MESSAGE_CONTROL;
    }

    /// The most the endpoint may have sent by now.
    fn allowance(&self) -> u64 {
        AMPLIFICATION * self.rx_bytes + self.messages
    }

    /// Polls `ep` once (one frame at most), counting the bytes in and out
    /// and checking both bounds.
    fn poll(&mut self, ep: &mut Endpoint<'_>, dev: &mut TestDevice, now: Instant) {
        let next = dev.rx.front().map_or(0, |f| f.len() as u64);
        let (received, sent) = (dev.received, dev.tx.len());
        dev.rx_budget = Some(1);
        ep.poll(now, dev);
        let took = dev.received - received;
        if took > 0 {
            self.rx_bytes += next;
        }
        let out = dev.tx.iter().skip(sent);
        self.tx_bytes += out.clone().map(|(f, _)| f.len() as u64).sum::<u64>();
        let frames = took + out.count() as u64;
        trim_sent(dev);
        assert!(
            self.tx_bytes <= self.allowance(),
            "amplification: {} bytes sent for {} received and {} of messages' allowance",
            self.tx_bytes,
            self.rx_bytes,
            self.messages
        );
        check_work(ep.take_index_work(), frames);
    }
}

/// The work bound over the lookups since the last check, made for
/// `frames` frames taken or sent.
fn check_work(w: IndexWork, frames: u64) {
    assert!(
        w.longest <= MAX_PROBES,
        "work: one lookup examined {} index entries ({w:?})",
        w.longest
    );
    assert!(
        w.lookups <= LOOKUPS_PER_FRAME * (frames + 1),
        "work: {} lookups for {frames} frames ({w:?})",
        w.lookups
    );
}

/// Bytes of every message sent (one allocation for all inputs).
fn payload() -> &'static [u8] {
    static P: OnceLock<Vec<u8>> = OnceLock::new();
    P.get_or_init(|| pattern(MAX_MESSAGE, 0x5a))
}

/// The pool's memory, kept from one input to the next and zeroed for each:
/// mapping 2.5 MB afresh costs more page faults than most inputs cost.
static POOL_MEM: Mutex<Vec<u8>> = Mutex::new(Vec::new());

/// The device: frames in, frames counted out, and only the last
/// `SENT_KEPT` frames sent kept (for ICMP errors that quote them). It hands
/// out one frame per poll (`rx_budget`), so the harness sees the RPC table
/// after each frame.
fn device() -> TestDevice {
    TestDevice {
        rx_budget: Some(0),
        ..TestDevice::default()
    }
}

/// Drops all but the last `SENT_KEPT` frames sent, checking each frame's
/// priority on the way.
fn trim_sent(dev: &mut TestDevice) {
    assert!(dev.tx.iter().all(|(_, meta)| meta.priority <= 7));
    while dev.tx.len() > SENT_KEPT {
        dev.tx.pop_front();
    }
}

/// Reads the fuzzer's bytes as a little program.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn u16(&mut self) -> u16 {
        u16::from(self.u8()) << 8 | u16::from(self.u8())
    }
    fn u32(&mut self) -> u32 {
        u32::from(self.u16()) << 16 | u32::from(self.u16())
    }
    fn bytes(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.0.len());
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head
    }
    /// An address: mostly the peer, else strangers, ourselves, any.
    fn addr(&mut self) -> Ipv4Addr {
        match self.u8() {
            0..=127 => PEER,
            b @ 128..=223 => Ipv4Addr::new(10, 0, 0, 3 + b % 6),
            224..=231 => ME,
            232 => Ipv4Addr::BROADCAST,
            233 => Ipv4Addr::new(224, 0, 0, 1),
            234 => Ipv4Addr::UNSPECIFIED,
            _ => Ipv4Addr::from(self.u32()),
        }
    }
    /// A link address: mostly the peer's, else a liar's, ours, any.
    fn mac(&mut self) -> EthernetAddress {
        match self.u8() {
            0..=127 => PEER_MAC,
            128..=191 => EVIL_MAC,
            192..=207 => MY_MAC,
            208..=215 => EthernetAddress::BROADCAST,
            _ => {
                let mut m = [0; 6];
                m.copy_from_slice(&self.u32().to_be_bytes().repeat(2)[..6]);
                EthernetAddress(m)
            }
        }
    }
    /// A message length up to `MAX_MESSAGE`: small ones often, large
    /// (scheduled) ones too.
    fn message_len(&mut self) -> usize {
        let len = match self.u8() {
            b @ 0..=127 => usize::from(b) * 24,
            128..=191 => usize::from(self.u16()),
            _ => usize::from(self.u16()) * 16,
        };
        len.clamp(1, MAX_MESSAGE)
    }
}

/// Ethernet and IPv4 header fields of a crafted frame; the defaults are a
/// frame from the peer to us.
struct Envelope {
    src_mac: EthernetAddress,
    dst_mac: EthernetAddress,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: u8,
    /// Raw changes to the IPv4 header: (byte index, value).
    ip_pokes: Vec<(usize, u8)>,
    /// An 802.1Q tag (its TCI) between the addresses and the EtherType.
    vlan: Option<u16>,
    ethertype: [u8; 2],
    /// Bytes cut from (negative) or added to the end of the frame.
    trim: i8,
}

impl Envelope {
    fn from_peer(protocol: IpProtocol) -> Envelope {
        Envelope {
            src_mac: PEER_MAC,
            dst_mac: MY_MAC,
            src: PEER,
            dst: ME,
            protocol: protocol.into(),
            ip_pokes: Vec::new(),
            vlan: None,
            ethertype: [0x08, 0x00],
            trim: 0,
        }
    }

    /// Mutations the input asks for: one flag byte, then the fields its
    /// bits name.
    fn mutate(mut self, input: &mut Input<'_>) -> Envelope {
        let flags = input.u8();
        if flags & 1 != 0 {
            self.src_mac = input.mac();
        }
        if flags & 2 != 0 {
            self.dst_mac = input.mac();
        }
        if flags & 4 != 0 {
            self.src = input.addr();
        }
        if flags & 8 != 0 {
            self.dst = match input.u8() {
                0..=127 => ME,
                _ => input.addr(),
            };
        }
        if flags & 16 != 0 {
            self.protocol = match input.u8() {
                0..=63 => IpProtocol::Homa.into(),
                64..=127 => IpProtocol::Icmp.into(),
                128..=159 => IpProtocol::Udp.into(),
                _ => input.u8(),
            };
        }
        if flags & 32 != 0 {
            // Version/IHL, total length, flags/fragment offset, TTL, or any
            // byte of the header.
            for _ in 0..=(input.u8() % 3) {
                let at = match input.u8() % 5 {
                    0 => 0,
                    1 => 2,
                    2 => 3,
                    3 => 6,
                    _ => usize::from(input.u8()) % 20,
                };
                let v = input.u8();
                self.ip_pokes.push((at, v));
            }
        }
        if flags & 64 != 0 {
            self.vlan = Some(input.u16());
        }
        if flags & 128 != 0 {
            match input.u8() % 3 {
                0 => self.ethertype = [0x08, 0x06],
                1 => self.ethertype = [0x86, 0xdd],
                _ => self.ethertype = input.u16().to_be_bytes(),
            }
            self.trim = input.u8() as i8;
        }
        self
    }

    /// The frame: Ethernet, IPv4 (checksum filled before any poke), `body`.
    fn frame(&self, body: &[u8]) -> Vec<u8> {
        let mut ip = frames::ipv4_header(self.src, self.dst, self.protocol, 0, body.len()).to_vec();
        for &(at, v) in &self.ip_pokes {
            ip[at] = v;
        }
        ip.extend_from_slice(body);
        let ethertype = u16::from_be_bytes(self.ethertype);
        let mut f = frames::ethernet(self.src_mac.0, self.dst_mac.0, self.vlan, ethertype, &ip);
        let len = f.len() as isize + isize::from(self.trim);
        f.resize(len.clamp(0, 1514) as usize, 0);
        f
    }
}

/// A Homa packet in `env`, its checksum over the envelope's addresses (so
/// a forged source passes the check, as a liar's packet would).
fn homa_frame(env: &Envelope, homa: &Repr<'_>) -> Vec<u8> {
    env.frame(&homa_testkit::frames::homa_checksummed(
        homa,
        env.src.into(),
        env.dst.into(),
    ))
}

/// An ARP packet from `mac`/`ip`, a request or reply aimed at us.
fn arp_frame(input: &mut Input<'_>) -> Vec<u8> {
    let (sha, spa) = (input.mac(), input.addr());
    let op = input.u8();
    let operation = if op & 1 == 0 { 1 } else { 2 };
    let tha = if op & 2 == 0 { MY_MAC } else { input.mac() };
    let tpa = if op & 4 == 0 { ME } else { input.addr() };
    let arp = frames::arp(operation, sha.0, spa, tha.0, tpa);
    let dst = if op & 8 == 0 {
        EthernetAddress::BROADCAST
    } else {
        MY_MAC
    };
    // The frame's source may differ from the ARP sender.
    let src = if op & 16 == 0 { sha } else { input.mac() };
    frames::ethernet(src.0, dst.0, None, frames::ARP, &arp)
}

/// An ICMP destination unreachable quoting a frame we sent (its IPv4 header
/// and the start of its payload), from whoever the envelope says.
fn icmp_frame(input: &mut Input<'_>, dev: &TestDevice) -> Option<Vec<u8>> {
    let pick = usize::from(input.u8());
    let (quoted, _) = dev.tx.get(pick % dev.tx.len().max(1))?;
    // Only IPv4 frames are worth quoting.
    if quoted.len() < 34 || quoted[12..14] != [0x08, 0x00] {
        return None;
    }
    let code = match input.u8() {
        0..=127 => 3,
        128..=191 => 1,
        b => b % 16,
    };
    let keep = match input.u8() {
        0..=191 => 28,
        b => usize::from(b) * 8,
    };
    let ip = &quoted[14..];
    let mut body = vec![3, code, 0, 0, 0, 0, 0, 0];
    body.extend_from_slice(&ip[..keep.min(ip.len())]);
    let sum = frames::checksum(&body);
    body[2..4].copy_from_slice(&sum.to_be_bytes());
    let env = Envelope::from_peer(IpProtocol::Icmp).mutate(input);
    Some(env.frame(&body))
}

/// An IPv6 frame around `body` (upper-layer header `next`): from the peer
/// to us unless the input forges the source, the destination (our
/// solicited-node group, all nodes, another address), the hop limit, the
/// payload length or the MACs, or puts a chain of extension headers
/// (hop-by-hop, routing with or without segments left, destination
/// options, fragment) in front.
fn v6_frame(input: &mut Input<'_>, next: u8, body: &[u8]) -> Vec<u8> {
    let flags = input.u8();
    let src = if flags & 1 == 0 {
        PEER6
    } else {
        Ipv6Addr::from((u128::from(input.u32()) << 96) | u128::from(input.u16()))
    };
    let dst = match (flags >> 1) & 3 {
        0 => ME6,
        1 => ME6_GROUP,
        2 => ALL_NODES,
        _ => Ipv6Addr::from(u128::from(input.u32()) | (0xfe80 << 112)),
    };
    let hop_limit = if flags & 8 == 0 { 255 } else { input.u8() };
    let mut first = next;
    let mut payload = body.to_vec();
    if flags & 16 != 0 {
        for _ in 0..=(input.u8() % 5) {
            let kind = [0u8, 43, 60, 44][usize::from(input.u8() % 4)];
            let units = input.u8() % 2;
            let mut h = vec![0u8; (usize::from(units) + 1) * 8];
            h[0] = first;
            h[1] = units;
            h[3] = input.u8() % 2; // a routing header's segments left
            h.extend_from_slice(&payload);
            payload = h;
            first = kind;
        }
    }
    let mut ip = frames::ipv6(src, dst, first, 0, hop_limit, &payload);
    if flags & 32 != 0 {
        ip[4..6].copy_from_slice(&input.u16().to_be_bytes());
    }
    let src_mac = if flags & 64 == 0 {
        PEER_MAC
    } else {
        input.mac()
    };
    let dst_mac = if flags & 128 == 0 {
        MY_MAC
    } else {
        EthernetAddress([0x33, 0x33, 0xff, 0, 0, 1])
    };
    let mut f = frames::ethernet(src_mac.0, dst_mac.0, None, 0x86dd, &ip);
    f.truncate(1514);
    f
}

/// An ICMPv6 message: echo request, neighbour solicitation or
/// advertisement (for us, the peer or a stranger, with or without a link
/// address option, maybe naming another MAC than the frame's), or a
/// destination unreachable quoting a frame we sent.
fn icmpv6_frame(input: &mut Input<'_>, dev: &TestDevice) -> Option<Vec<u8>> {
    let addr = |input: &mut Input<'_>| match input.u8() % 4 {
        0 => ME6,
        1 => PEER6,
        _ => Ipv6Addr::from(u128::from(input.u32()) | (0xfd00 << 112)),
    };
    let lladdr = match input.u8() % 3 {
        0 => None,
        1 => Some(PEER_MAC),
        _ => Some(input.mac()),
    };
    let n = usize::from(input.u8());
    let data = input.bytes(n).to_vec();
    let quoted;
    let repr = match input.u8() % 4 {
        0 => Icmpv6Repr::EchoRequest {
            ident: input.u16(),
            seq_no: input.u16(),
            data: &data,
        },
        1 => Icmpv6Repr::NeighborSolicit {
            target_addr: addr(input),
            lladdr,
        },
        2 => Icmpv6Repr::NeighborAdvert {
            router: false,
            solicited: true,
            override_: true,
            target_addr: addr(input),
            lladdr,
        },
        _ => {
            let pick = usize::from(input.u8());
            let (frame, _) = dev.tx.get(pick % dev.tx.len().max(1))?;
            if frame.len() < 54 || frame[12..14] != [0x86, 0xdd] {
                return None;
            }
            let ip = homa_stack::wire::Ipv6Packet::new_checked(&frame[14..]).ok()?;
            let header = Ipv6Repr::parse(&ip).ok()?;
            quoted = frame[54..].to_vec();
            Icmpv6Repr::DstUnreachable {
                reason: Icmpv6DstUnreachable::from(input.u8() % 8),
                header,
                data: &quoted,
            }
        }
    };
    let mut body = vec![0u8; repr.buffer_len()];
    repr.emit(
        &PEER6,
        &ME6,
        &mut Icmpv6Packet::new_unchecked(&mut body[..]),
        true,
    );
    Some(v6_frame(input, IpProtocol::Icmpv6.into(), &body))
}

fuzz_target!(|data: &[u8]| {
    let payload = payload();
    let mut rpcs: Vec<RpcSlot> = (0..RPCS).map(|_| RpcSlot::EMPTY).collect();
    let mut peers = vec![PeerSlot::EMPTY; PEERS];
    let mut socks = [SocketSlot::EMPTY; 2];
    let mut pool = POOL_MEM.lock().unwrap_or_else(|e| e.into_inner());
    pool.clear();
    pool.resize(POOL, 0);
    let mut config = Config::new(ME, MY_MAC, secret_seed(data));
    config.ipv6 = true;
    config.ipv6_addrs[0] = Some(ME6);
    config.homa_checksum_rx = data.first().is_some_and(|b| b & 1 == 1);
    let mut ep = Endpoint::new(
        config,
        &mut rpcs[..],
        &mut peers[..],
        &mut socks[..],
        &mut pool[..],
        2048,
    )
    .unwrap();
    let capacity = ep.pool_capacity_bytes();
    let timeout_ticks = ep.config().timeout_ticks;
    let mut now = Instant::from_millis(1);
    // Addresses that may hold a peer entry: ours by `add_neighbor`, each
    // request's destination, and the peer of any RPC seen after a frame.
    let mut had_rpc: HashSet<IpAddr> = HashSet::new();
    had_rpc.insert(PEER.into());
    ep.add_neighbor(now, PEER, PEER_MAC).unwrap();
    had_rpc.insert(PEER6.into());
    ep.add_neighbor(now, PEER6, PEER_MAC).unwrap();
    let server = ep.bind(500).unwrap();
    let client = ep.socket().unwrap();
    let client_port = ep.client_port(client).unwrap();
    let mut live: Vec<RpcHandle> = Vec::new();
    // When each request was sent, for the failure check.
    let mut sent_at: HashMap<RpcHandle, Instant> = HashMap::new();
    let mut traffic = Traffic::default();
    for len in [1usize, 1500, 45_000] {
        let h = ep.send_request(client, PEER, 500, &payload[..len]).unwrap();
        live.push(h);
        sent_at.insert(h, now);
        traffic.message(len, true);
    }
    check_work(ep.take_index_work(), 0);
    let mut dev = device();
    let mut input = Input(data);
    let mut steps = 0;
    while !input.0.is_empty() {
        let op = input.u8();
        steps += 1;
        if steps > 2_000 {
            break;
        }
        match op % 11 {
            0 => {
                let len = usize::from(input.u16()) % 1515;
                dev.rx.push_back(input.bytes(len).to_vec());
            }
            1 | 2 => {
                // A well-formed Homa packet with fuzzed fields, aimed at
                // live RPCs; op 2 also forges its Ethernet and IP headers.
                let env = Envelope::from_peer(IpProtocol::Homa);
                let env = if op % 11 == 2 {
                    env.mutate(&mut input)
                } else {
                    env
                };
                let ids: Vec<u64> = live.iter().map(|h| h.id()).collect();
                let pick = input.u8();
                let sender_id = match ids.get(usize::from(pick) % (ids.len() + 2)) {
                    Some(id) => id ^ 1,
                    None => u64::from(input.u32()),
                };
                let (sport, dport) = match input.u8() % 4 {
                    0 => (500, client_port),
                    1 => (client_port, 500),
                    2 => (input.u16(), 500),
                    _ => (input.u16(), input.u16()),
                };
                let body_len = usize::from(input_len(&mut input));
                let body = input.bytes(body_len).to_vec();
                let kind = match input.u8() % 9 {
                    0 => Kind::Data {
                        header: DataHeader {
                            message_length: input.u32() % 1_100_000,
                            incoming: input.u32(),
                            ack: Some(Ack {
                                client_id: input.u32().into(),
                                server_port: input.u16(),
                            }),
                            cutoff_version: input.u16(),
                            retransmit: false,
                            offset: input.u32() % 1_100_000,
                        },
                        payload: &body,
                    },
                    1 => Kind::Grant {
                        offset: input.u32(),
                        priority: input.u8(),
                    },
                    2 => Kind::Resend {
                        offset: input.u32(),
                        length: input.u32(),
                        priority: input.u8(),
                    },
                    3 => Kind::RpcUnknown,
                    4 => Kind::Busy,
                    5 => Kind::Cutoffs {
                        unsched_cutoffs: [input.u32(); 8],
                        version: input.u16(),
                    },
                    6 => Kind::NeedAck,
                    7 => Kind::Freeze,
                    _ => {
                        let mut acks = heapless::Vec::new();
                        for id in &ids {
                            let _ = acks.push(Ack {
                                client_id: id & !1,
                                server_port: 500,
                            });
                        }
                        Kind::Ack { acks }
                    }
                };
                let repr = Repr {
                    sport,
                    dport,
                    sender_id,
                    kind,
                };
                // Every fourth packet comes over IPv6.
                if input.u8() % 4 == 0 {
                    let body =
                        homa_testkit::frames::homa_checksummed(&repr, PEER6.into(), ME6.into());
                    dev.rx
                        .push_back(v6_frame(&mut input, IpProtocol::Homa.into(), &body));
                } else {
                    dev.rx.push_back(homa_frame(&env, &repr));
                }
            }
            3 => {
                let dest = match input.u8() {
                    0..=191 => PEER,
                    _ => input.addr(),
                };
                let len = input.message_len();
                // Even a failed request may leave its peer's entry.
                had_rpc.insert(dest.into());
                if let Ok(h) = ep.send_request(client, dest, 500, &payload[..len]) {
                    live.push(h);
                    sent_at.insert(h, now);
                    traffic.message(len, true);
                }
                check_work(ep.take_index_work(), 0);
            }
            4 => {
                let reply_len = input.message_len();
                let mut calls = 0;
                while let Some(ev) = ep.recv(server) {
                    calls += 1;
                    if let Event::Request { rpc, len, .. } = ev {
                        assert_eq!(ep.message(rpc).map(|m| m.len()), Some(len));
                        if ep.reply(rpc, &payload[..reply_len]).is_ok() {
                            traffic.message(reply_len, false);
                        } else {
                            // A server that cannot answer lets the RPC go.
                            let _ = ep.abort(rpc);
                        }
                    }
                }
                while let Some(ev) = ep.recv(client) {
                    calls += 1;
                    let rpc = match ev {
                        Event::Response { rpc, len } => {
                            assert_eq!(ep.message(rpc).map(|m| m.len()), Some(len));
                            rpc
                        }
                        Event::Failed { rpc, error } => {
                            check_failure(&ep, &sent_at, rpc, error, now);
                            rpc
                        }
                        Event::Request { .. } => panic!("a client socket got a request"),
                    };
                    ep.release(rpc).unwrap();
                    live.retain(|h| *h != rpc);
                }
                check_work(ep.take_index_work(), calls);
            }
            5 => now += Duration::from_micros(u64::from(input.u16()) * 10),
            6 => {
                if let Some(h) = live.pop() {
                    let _ = ep.abort(h);
                }
            }
            7 => dev.rx.push_back(arp_frame(&mut input)),
            9 => {
                if let Some(f) = icmpv6_frame(&mut input, &dev) {
                    dev.rx.push_back(f);
                }
            }
            10 => {
                // Raw bytes after an IPv6 header (any next header).
                let next = input.u8();
                let len = usize::from(input.u16()) % 1460;
                let body = input.bytes(len).to_vec();
                dev.rx.push_back(v6_frame(&mut input, next, &body));
            }
            _ => {
                if let Some(f) = icmp_frame(&mut input, &dev) {
                    dev.rx.push_back(f);
                }
            }
        }
        // One frame per poll, then a look at who holds RPCs.
        loop {
            traffic.poll(&mut ep, &mut dev, now);
            had_rpc.extend(ep.rpc_info().map(|r| r.peer));
            check(&ep, &dev, capacity);
            if dev.rx.is_empty() {
                break;
            }
        }
        assert!(ep.poll_at().is_some() || ep.rpcs_in_use() == 0);
    }
    // Run the clock out with no input: every RPC ends (completes, times out
    // or is freed). Each RPC in the table can wait for its grants behind
    // the others and then for `timeout_ticks`; the rest is margin.
    let ticks = (RPCS as u32 + 2) * (timeout_ticks + 10);
    for _ in 0..ticks {
        now += Duration::from_millis(1);
        traffic.poll(&mut ep, &mut dev, now);
        while let Some(ev) = ep.recv(client) {
            match ev {
                Event::Response { rpc, .. } => ep.release(rpc).unwrap(),
                Event::Failed { rpc, error } => {
                    check_failure(&ep, &sent_at, rpc, error, now);
                    ep.release(rpc).unwrap();
                }
                Event::Request { .. } => {}
            }
        }
        while let Some(Event::Request { rpc, .. }) = ep.recv(server) {
            let _ = ep.abort(rpc);
        }
        check(&ep, &dev, capacity);
        if ep.rpcs_in_use() == 0 && ep.poll_at().is_none() {
            break;
        }
    }
    if std::env::var_os("EP_DEBUG").is_some() {
        eprintln!("{}\n{traffic:?}", ep.stats());
    }
    let left: Vec<_> = ep.rpc_info().collect();
    assert!(left.is_empty(), "state leaked: {left:?}");
    assert_eq!(ep.pool_free_bytes(), capacity, "pool leaked");
    // Peers: only addresses that had an RPC hold an entry, and with no RPC
    // left none is pinned but the neighbours set by hand: a table's worth
    // of new peers, one after another, still fits.
    assert!(
        ep.peers_in_use() <= had_rpc.len(),
        "{} peers held, only {} addresses had RPCs: {had_rpc:?}",
        ep.peers_in_use(),
        had_rpc.len()
    );
    for i in 0..PEERS {
        let dest = Ipv4Addr::new(10, 9, 0, i as u8);
        match ep.send_request(client, dest, 500, &payload[..1]) {
            Ok(h) => ep.abort(h).unwrap(),
            Err(SendError::PeerTableFull) => panic!("peer table pinned with no RPC left"),
            Err(e) => panic!("a request to a new peer failed: {e}"),
        }
    }
    assert_eq!(ep.rpcs_in_use(), 0);
});

/// The endpoint's hash seed: a hash of the whole input. Fixed for an input
/// (a failure repeats), yet no input can choose ids that collide under it:
/// changing any byte changes the key, as no peer can aim at a secret key.
fn secret_seed(data: &[u8]) -> u64 {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut h = DefaultHasher::new();
    data.hash(&mut h);
    h.finish()
}

/// A client RPC's failure is one of its time (see the module doc): a
/// timeout, or a peer never resolved, after `timeout_ticks` ticks, which
/// (ticks being at least `tick` apart, the first one maybe at once) span
/// at least `timeout_ticks - 1` ticks' time from its request; an ICMP
/// error's word only once the endpoint took one. Anything else (a budget
/// of restarts giving up while the peer still answers, say) fails the
/// input.
fn check_failure(
    ep: &Endpoint<'_>,
    sent_at: &HashMap<RpcHandle, Instant>,
    rpc: RpcHandle,
    error: RpcError,
    now: Instant,
) {
    let sent = sent_at.get(&rpc).expect("a failure of a request we sent");
    let config = ep.config();
    let ticks = u64::from(config.timeout_ticks.saturating_sub(1));
    let timeout = Duration::from_nanos(config.tick.total_nanos() * ticks);
    match error {
        RpcError::TimedOut | RpcError::Unresolved => assert!(
            now >= *sent + timeout,
            "an RPC failed ({error}) {:?} after its request, before its timeout",
            now - *sent
        ),
        RpcError::PortUnreachable | RpcError::PeerUnreachable => assert!(
            ep.stats().icmp_unreachable_received > 0,
            "an RPC failed ({error}) with no ICMP error taken"
        ),
        other => panic!("an RPC failed ({other}) {:?} after its request", now - *sent),
    }
}

/// Bounds that hold after every poll.
fn check(ep: &Endpoint<'_>, dev: &TestDevice, capacity: usize) {
    assert!(ep.rpcs_in_use() <= RPCS);
    assert!(ep.peers_in_use() <= PEERS);
    assert!(ep.pool_free_bytes() <= capacity);
    let stats = ep.stats();
    assert_eq!(stats.rx_frames, dev.received);
    assert!(stats.rx.total() <= stats.rx_frames);
    assert_eq!(stats.tx_frames, dev.transmitted);
}

/// A short payload length (mostly small, sometimes a full packet).
fn input_len(input: &mut Input<'_>) -> u16 {
    match input.u8() {
        b @ 0..=200 => u16::from(b),
        _ => 1424,
    }
}
