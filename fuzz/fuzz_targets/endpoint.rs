//! Arbitrary frames, interleaved with API calls and clock steps decoded from
//! the input, fed into an endpoint that holds live client and server RPCs.
//! The endpoint must never panic, its tables never exceed their capacity,
//! its pool accounting stays within bounds, and its counters agree with
//! what the device delivered.
//!
//! ```text
//! cargo +nightly fuzz run endpoint -- -max_total_time=60
//! ```

#![no_main]

use std::collections::VecDeque;

use libfuzzer_sys::fuzz_target;

use homa_phy::{Device, DeviceCapabilities, Duration, Instant, PacketMeta, RxToken, TxToken};
use homa_stack::endpoint::{PeerSlot, RpcSlot, SocketSlot};
use homa_stack::wire::homa::{Ack, DataHeader, Kind, Packet, Repr};
use homa_stack::wire::{EthernetAddress, IpAddr, Ipv4Addr};
use homa_stack::{Config, Endpoint, Event, RpcHandle};

const ME: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const PEER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const MY_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
const PEER_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);
const RPCS: usize = 8;

/// Frames in, frames counted out.
#[derive(Default)]
struct Dev {
    rx: VecDeque<Vec<u8>>,
    delivered: u64,
    sent: u64,
}

struct Rx(Vec<u8>);
struct Tx<'a>(&'a mut u64);

impl RxToken for Rx {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0)
    }
}

impl TxToken for Tx<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        *self.0 += 1;
        let mut buf = vec![0u8; len];
        f(&mut buf)
    }
    fn set_meta(&mut self, meta: PacketMeta) {
        assert!(meta.priority <= 7);
    }
}

impl Device for Dev {
    type RxToken<'a> = Rx;
    type TxToken<'a> = Tx<'a>;
    fn receive(&mut self, _: Instant) -> Option<(Rx, Tx<'_>)> {
        let f = self.rx.pop_front()?;
        self.delivered += 1;
        Some((Rx(f), Tx(&mut self.sent)))
    }
    fn transmit(&mut self, _: Instant) -> Option<Tx<'_>> {
        Some(Tx(&mut self.sent))
    }
    fn capabilities(&self) -> DeviceCapabilities {
        DeviceCapabilities::default()
    }
}

/// Reads the fuzzer's bytes as a little program.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn u8(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }
    fn u16(&mut self) -> u16 {
        u16::from(self.u8().unwrap_or(0)) << 8 | u16::from(self.u8().unwrap_or(0))
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
}

/// An Ethernet + IPv4 frame from the peer carrying `homa` (checksum filled).
fn frame(homa: &Repr<'_>) -> Vec<u8> {
    let hl = homa.buffer_len();
    let mut f = vec![0u8; 34 + hl];
    f[0..6].copy_from_slice(&MY_MAC.0);
    f[6..12].copy_from_slice(&PEER_MAC.0);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = homa_stack::wire::Ipv4Repr {
        src_addr: PEER,
        dst_addr: ME,
        next_header: homa_stack::wire::IpProtocol::Homa,
        payload_len: hl,
        hop_limit: 64,
        tos: 0,
    };
    ip.emit(
        &mut homa_stack::wire::Ipv4Packet::new_unchecked(&mut f[14..]),
        true,
    );
    let mut p = Packet::new_unchecked(&mut f[34..]);
    homa.emit(&mut p);
    p.fill_checksum(&IpAddr::V4(PEER), &IpAddr::V4(ME));
    f
}

fuzz_target!(|data: &[u8]| {
    let mut rpcs: Vec<RpcSlot> = (0..RPCS).map(|_| RpcSlot::EMPTY).collect();
    let mut peers = vec![PeerSlot::EMPTY; 2];
    let mut socks = vec![SocketSlot::EMPTY; 2];
    let mut pool = vec![0u8; 256 * 1024];
    let mut config = Config::new(ME, MY_MAC);
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
    let mut now = Instant::from_millis(1);
    ep.add_neighbor(now, PEER, PEER_MAC).unwrap();
    let server = ep.bind(500).unwrap();
    let client = ep.socket().unwrap();
    let client_port = ep.client_port(client).unwrap();
    let payload = vec![0x5au8; 70_000];
    let mut live: Vec<RpcHandle> = Vec::new();
    for len in [1usize, 1500, 45_000] {
        live.push(ep.send_request(client, PEER, 500, &payload[..len]).unwrap());
    }
    let mut dev = Dev::default();
    let mut input = Input(data);
    let mut steps = 0;
    while let Some(op) = input.u8() {
        steps += 1;
        if steps > 2_000 {
            break;
        }
        match op % 6 {
            0 => {
                let len = usize::from(input.u16()) % 1515;
                dev.rx.push_back(input.bytes(len).to_vec());
            }
            1 => {
                // A well-formed Homa packet with fuzzed fields, aimed at live RPCs.
                let ids: Vec<u64> = live.iter().map(|h| h.id()).collect();
                let pick = input.u8().unwrap_or(0);
                let sender_id = match ids.get(usize::from(pick) % (ids.len() + 2)) {
                    Some(id) => id ^ 1,
                    None => u64::from(input.u32()),
                };
                let (sport, dport) = match input.u8().unwrap_or(0) % 4 {
                    0 => (500, client_port),
                    1 => (client_port, 500),
                    2 => (input.u16(), 500),
                    _ => (input.u16(), input.u16()),
                };
                let body_len = usize::from(input_len(&mut input));
                let body = input.bytes(body_len).to_vec();
                let kind = match input.u8().unwrap_or(0) % 9 {
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
                        priority: input.u8().unwrap_or(0),
                    },
                    2 => Kind::Resend {
                        offset: input.u32(),
                        length: input.u32(),
                        priority: input.u8().unwrap_or(0),
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
                dev.rx.push_back(frame(&Repr {
                    sport,
                    dport,
                    sender_id,
                    kind,
                }));
            }
            2 => {
                let len = usize::from(input.u16()) % payload.len();
                if let Ok(h) = ep.send_request(client, PEER, 500, &payload[..len.max(1)]) {
                    live.push(h);
                }
            }
            3 => {
                let reply_len = usize::from(input.u16()) % 3000;
                while let Some(ev) = ep.recv(server) {
                    if let Event::Request { rpc, len, .. } = ev {
                        assert_eq!(ep.message(rpc).map(|m| m.len()), Some(len));
                        let _ = ep.reply(rpc, &payload[..reply_len.max(1)]);
                    }
                }
                while let Some(ev) = ep.recv(client) {
                    let rpc = match ev {
                        Event::Response { rpc, len } => {
                            assert_eq!(ep.message(rpc).map(|m| m.len()), Some(len));
                            rpc
                        }
                        Event::Failed { rpc, .. } => rpc,
                        Event::Request { .. } => panic!("a client socket got a request"),
                    };
                    ep.release(rpc).unwrap();
                    live.retain(|h| *h != rpc);
                }
            }
            4 => now += Duration::from_micros(u64::from(input.u16()) * 10),
            _ => {
                if let Some(h) = live.pop() {
                    let _ = ep.abort(h);
                }
            }
        }
        ep.poll(now, &mut dev);
        assert!(ep.rpcs_in_use() <= RPCS);
        assert!(ep.peers_in_use() <= 2);
        assert!(ep.pool_free_bytes() <= capacity);
        let stats = ep.stats();
        assert_eq!(stats.rx_frames, dev.delivered);
        assert!(stats.rx.total() <= stats.rx_frames);
        assert_eq!(stats.tx_frames, dev.sent);
        assert!(ep.poll_at().is_some() || ep.rpcs_in_use() == 0);
    }
    // Run the clock out: every RPC ends (completes, times out or is freed)
    // and nothing is left in the tables or the pool.
    for _ in 0..1000 {
        now += Duration::from_millis(1);
        ep.poll(now, &mut dev);
        while let Some(ev) = ep.recv(client) {
            if let Event::Response { rpc, .. } | Event::Failed { rpc, .. } = ev {
                ep.release(rpc).unwrap();
            }
        }
        while let Some(Event::Request { rpc, .. }) = ep.recv(server) {
            let _ = ep.abort(rpc);
        }
    }
    // Server RPCs waiting for an ACK give up after timeout_ticks of silence.
    for _ in 0..120 {
        now += Duration::from_millis(1);
        ep.poll(now, &mut dev);
    }
    let left: Vec<_> = ep.rpc_info().collect();
    assert!(left.is_empty(), "state leaked: {left:?}");
    assert_eq!(ep.pool_free_bytes(), capacity, "pool leaked");
});

/// A short payload length (mostly small, sometimes a full packet).
fn input_len(input: &mut Input<'_>) -> u16 {
    match input.u8().unwrap_or(0) {
        b @ 0..=200 => u16::from(b),
        _ => 1424,
    }
}
