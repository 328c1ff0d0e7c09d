//! smoltcp's side: two interfaces over the same [`Pair`] of rings as
//! homa-stack, Ethernet + IPv4 with every checksum computed and verified.

use std::collections::HashSet;

use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::socket::AnySocket;
use smoltcp::socket::{tcp, udp};
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr, IpEndpoint};

use super::cpu::measured;
use super::ring::{Clock, Pair};
use super::{check_payload, fill_payload, Measure, CLIENT_IP, CLIENT_MAC, SERVER_IP, SERVER_MAC};

/// The server's port.
const PORT: u16 = 7;
/// Virtual time a run may take before it counts as stalled.
const STALL_NS: u64 = 60_000_000_000;

fn ip(a: homa_stack::wire::Ipv4Addr) -> IpAddress {
    let [a, b, c, d] = a.octets();
    IpAddress::v4(a, b, c, d)
}

fn interface(pair: &mut Pair, a_side: bool, clock: Clock) -> Interface {
    let (addr, mac) = if a_side {
        (CLIENT_IP, CLIENT_MAC)
    } else {
        (SERVER_IP, SERVER_MAC)
    };
    let mut config = Config::new(HardwareAddress::Ethernet(EthernetAddress(mac.0)));
    config.random_seed = if a_side { 1 } else { 2 };
    let mut iface = if a_side {
        Interface::new(config, &mut pair.a(), clock.smol())
    } else {
        Interface::new(config, &mut pair.b(), clock.smol())
    };
    iface.update_ip_addrs(|addrs| {
        addrs
            .push(IpCidr::new(ip(addr), 24))
            .expect("room for an address");
    });
    iface
}

/// Both interfaces, their sockets, the rings and the clock.
struct Ends<'s> {
    client: Interface,
    server: Interface,
    csockets: SocketSet<'s>,
    ssockets: SocketSet<'s>,
    pair: Pair,
    clock: Clock,
}

impl<'s> Ends<'s> {
    fn new(ring: usize) -> Ends<'s> {
        let clock = Clock::new();
        let mut pair = Pair::new(ring);
        let client = interface(&mut pair, true, clock);
        let server = interface(&mut pair, false, clock);
        Ends {
            client,
            server,
            csockets: SocketSet::new(vec![]),
            ssockets: SocketSet::new(vec![]),
            pair,
            clock,
        }
    }

    fn poll_client(&mut self) {
        let now = self.clock.smol();
        self.client
            .poll(now, &mut self.pair.a(), &mut self.csockets);
    }

    fn poll_server(&mut self) {
        let now = self.clock.smol();
        self.server
            .poll(now, &mut self.pair.b(), &mut self.ssockets);
    }

    /// As homa's: the clock moves on, to the next timer when all is idle
    /// and the application has no work to hand over (`busy`).
    fn tick(&mut self, bytes: u64, busy: bool) {
        self.clock.advance(bytes);
        if bytes == 0 && !busy && !self.pair.pending() {
            let now = self.clock.smol();
            let next = [
                self.client.poll_at(now, &self.csockets),
                self.server.poll_at(now, &self.ssockets),
            ]
            .into_iter()
            .flatten()
            .min();
            if let Some(t) = next {
                self.clock.ns = self.clock.ns.max(t.total_micros() as u64 * 1000);
            }
        }
    }

    fn check_clean(&self) -> anyhow::Result<()> {
        if self.pair.dropped() > 0 {
            return Err(anyhow::anyhow!(
                "smoltcp: {} frames lost to full rings",
                self.pair.dropped()
            ));
        }
        Ok(())
    }
}

fn udp_socket(packets: usize, bytes: usize) -> udp::Socket<'static> {
    let buffer =
        || udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; packets], vec![0u8; bytes]);
    udp::Socket::new(buffer(), buffer())
}

/// `len`-byte UDP datagrams echoed by the server, `outstanding` at a time:
/// `count` round trips timed after `warmup` (which also resolves ARP).
pub fn udp_echo(
    len: usize,
    outstanding: usize,
    warmup: u64,
    count: u64,
) -> anyhow::Result<Measure> {
    let mut ends = Ends::new(4096);
    let slots = outstanding + 16;
    let bytes = slots * (len + 64);
    let mut client = udp_socket(slots, bytes);
    client
        .bind(5000)
        .map_err(|e| anyhow::anyhow!("udp bind: {e}"))?;
    let mut server = udp_socket(slots, bytes);
    server
        .bind(PORT)
        .map_err(|e| anyhow::anyhow!("udp bind: {e}"))?;
    let ch = ends.csockets.add(client);
    let sh = ends.ssockets.add(server);
    let echo = Echo {
        buf: vec![0u8; 1500],
    };
    timed(
        &mut ends,
        ch,
        sh,
        Window::new(outstanding, len),
        echo,
        warmup,
        count,
    )
}

/// `len`-byte requests over one TCP connection, each answered by a
/// `len`-byte response (the request echoed), `outstanding` at a time:
/// `count` request-responses timed after `warmup` (which also resolves ARP
/// and opens the connection). Nagle off at both ends, smoltcp's default
/// delayed ACKs: each ACK rides on the next segment the other way. The
/// harness does what the UDP echo's does: a set of sequence numbers in
/// flight, each response copied out and checked, each request copied out
/// and sent back.
pub fn tcp_rr(len: usize, outstanding: usize, warmup: u64, count: u64) -> anyhow::Result<Measure> {
    let mut ends = Ends::new(4096);
    let (ch, sh) = tcp_connection(&mut ends, (outstanding + 16) * len, true)?;
    let rr = Rr {
        response: vec![0u8; len],
        response_at: 0,
        scratch: vec![0u8; len],
        scratch_at: 0,
    };
    timed(
        &mut ends,
        ch,
        sh,
        Window::new(outstanding, len),
        rr,
        warmup,
        count,
    )
}

/// A client connecting to a server listening on [`PORT`], each socket with
/// `bytes` of send and of receive buffer and Nagle off at the client (and
/// at the server with `server_nagle_off`): their handles.
fn tcp_connection(
    ends: &mut Ends<'static>,
    bytes: usize,
    server_nagle_off: bool,
) -> anyhow::Result<(SocketHandle, SocketHandle)> {
    let buffer = || tcp::SocketBuffer::new(vec![0u8; bytes]);
    let mut client = tcp::Socket::new(buffer(), buffer());
    let mut server = tcp::Socket::new(buffer(), buffer());
    client.set_nagle_enabled(false);
    if server_nagle_off {
        server.set_nagle_enabled(false);
    }
    server
        .listen(PORT)
        .map_err(|e| anyhow::anyhow!("tcp listen: {e}"))?;
    let cx = ends.client.context();
    client
        .connect(cx, (ip(SERVER_IP), PORT), 5000)
        .map_err(|e| anyhow::anyhow!("tcp connect: {e}"))?;
    Ok((ends.csockets.add(client), ends.ssockets.add(server)))
}

/// The requests of a round-trip measurement: which are in flight, and the
/// next to send.
struct Window {
    outstanding: usize,
    len: usize,
    inflight: HashSet<u64>,
    next_seq: u64,
    /// The pattern, with the sequence number of the request in its first
    /// eight bytes.
    request: Vec<u8>,
}

impl Window {
    fn new(outstanding: usize, len: usize) -> Window {
        let mut request = vec![0u8; len];
        fill_payload(0, &mut request);
        Window {
            outstanding,
            len,
            inflight: HashSet::with_capacity(2 * outstanding),
            next_seq: 0,
            request,
        }
    }

    /// Room for another request, `issued` of `count` so far.
    fn room(&self, issued: u64, count: u64) -> bool {
        self.inflight.len() < self.outstanding && issued < count
    }

    /// Writes the next sequence number into the request; returns it.
    fn next_request(&mut self) -> u64 {
        let seq = self.next_seq;
        self.request[..8].copy_from_slice(&seq.to_le_bytes());
        seq
    }

    /// The request `seq` went out.
    fn sent(&mut self, seq: u64) {
        self.next_seq += 1;
        self.inflight.insert(seq);
    }

    /// Takes the answer to `seq` out of the window if `bytes` are what was
    /// owed to it.
    fn answered(&mut self, seq: u64, bytes: &[u8]) -> bool {
        bytes.len() == self.len && self.inflight.remove(&seq) && check_payload(seq, bytes)
    }
}

/// The sequence number at the start of a request or answer.
fn seq_of(bytes: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?))
}

/// A request-answer protocol over the two ends, driven by [`exchange`].
trait RoundTrips {
    /// The protocol, for errors.
    const NAME: &'static str;
    /// What a request is called in errors.
    const REQUESTS: &'static str;
    /// The socket both ends use.
    type Socket: AnySocket<'static>;
    /// The client sends request `seq`; false if it cannot send yet.
    fn send(&mut self, s: &mut Self::Socket, req: &[u8], seq: u64) -> anyhow::Result<bool>;
    /// The client's next whole answer, if one arrived.
    fn answer(&mut self, s: &mut Self::Socket) -> anyhow::Result<Option<&[u8]>>;
    /// The server answers the requests that arrived.
    fn serve(&mut self, s: &mut Self::Socket) -> anyhow::Result<()>;
}

/// `warmup` round trips, then `count` timed; nothing may be lost on the
/// rings or left in flight.
fn timed<R: RoundTrips>(
    ends: &mut Ends<'static>,
    ch: SocketHandle,
    sh: SocketHandle,
    mut w: Window,
    mut proto: R,
    warmup: u64,
    count: u64,
) -> anyhow::Result<Measure> {
    exchange(ends, ch, sh, &mut w, &mut proto, warmup)?;
    let frames = ends.pair.frames();
    let (r, secs) = measured(|| exchange(ends, ch, sh, &mut w, &mut proto, count));
    r?;
    let frames = ends.pair.frames() - frames;
    ends.check_clean()?;
    if !w.inflight.is_empty() {
        return Err(anyhow::anyhow!("smoltcp: {} left in flight", R::REQUESTS));
    }
    Ok(Measure {
        ops: count,
        bytes: count * w.len as u64,
        secs,
        frames,
        data_packets: 0,
    })
}

/// Runs `count` round trips: requests out while the window has room,
/// answers in, the server's answers out, and the clock on, until all came
/// back.
fn exchange<R: RoundTrips>(
    ends: &mut Ends<'static>,
    ch: SocketHandle,
    sh: SocketHandle,
    w: &mut Window,
    proto: &mut R,
    count: u64,
) -> anyhow::Result<()> {
    let mut issued = 0u64;
    let mut done = 0u64;
    let end = ends.clock.ns + STALL_NS;
    while done < count {
        let client = ends.csockets.get_mut::<R::Socket>(ch);
        while w.room(issued, count) {
            let seq = w.next_request();
            if !proto.send(client, &w.request, seq)? {
                break;
            }
            w.sent(seq);
            issued += 1;
        }
        let before = ends.pair.bytes();
        ends.poll_client();
        let client = ends.csockets.get_mut::<R::Socket>(ch);
        while let Some(bytes) = proto.answer(client)? {
            match seq_of(bytes) {
                Some(seq) if w.answered(seq, bytes) => done += 1,
                seq => {
                    let n = bytes.len();
                    return Err(anyhow::anyhow!(
                        "{}: wrong answer (seq {seq:?}, {n} bytes)",
                        R::NAME
                    ));
                }
            }
        }
        ends.poll_server();
        proto.serve(ends.ssockets.get_mut::<R::Socket>(sh))?;
        let moved = ends.pair.bytes() - before;
        ends.tick(moved, w.room(issued, count));
        if ends.clock.ns > end {
            return Err(anyhow::anyhow!(
                "smoltcp {}: stalled after {done} of {count} {}",
                R::NAME,
                R::REQUESTS
            ));
        }
    }
    Ok(())
}

/// UDP echo: each datagram is a request, echoed as its answer.
struct Echo {
    buf: Vec<u8>,
}

impl RoundTrips for Echo {
    const NAME: &'static str = "udp";
    const REQUESTS: &'static str = "datagrams";
    type Socket = udp::Socket<'static>;

    fn send(&mut self, s: &mut Self::Socket, req: &[u8], _: u64) -> anyhow::Result<bool> {
        let dest = IpEndpoint::new(ip(SERVER_IP), PORT);
        s.send_slice(req, dest)
            .map_err(|e| anyhow::anyhow!("udp send: {e}"))?;
        Ok(true)
    }

    fn answer(&mut self, s: &mut Self::Socket) -> anyhow::Result<Option<&[u8]>> {
        Ok(match s.recv_slice(&mut self.buf) {
            Ok((n, _)) => Some(&self.buf[..n]),
            Err(_) => None,
        })
    }

    fn serve(&mut self, s: &mut Self::Socket) -> anyhow::Result<()> {
        while let Ok((n, meta)) = s.recv_slice(&mut self.buf) {
            s.send_slice(&self.buf[..n], meta.endpoint)
                .map_err(|e| anyhow::anyhow!("udp echo: {e}"))?;
        }
        Ok(())
    }
}

/// TCP request-response: fixed-length requests on one stream, each
/// echoed as its response.
struct Rr {
    /// The response being read, `response_at` bytes of it so far.
    response: Vec<u8>,
    response_at: usize,
    /// The request being read at the server, `scratch_at` bytes so far.
    scratch: Vec<u8>,
    scratch_at: usize,
}

/// Reads into `buf` from `*at` on; true once `buf` is full (and `*at`
/// back at 0 for the next).
fn read_whole(sock: &mut tcp::Socket<'_>, buf: &mut [u8], at: &mut usize) -> anyhow::Result<bool> {
    let n = sock
        .recv_slice(&mut buf[*at..])
        .map_err(|e| anyhow::anyhow!("tcp recv: {e}"))?;
    *at += n;
    if *at < buf.len() {
        return Ok(false);
    }
    *at = 0;
    Ok(true)
}

impl RoundTrips for Rr {
    const NAME: &'static str = "tcp";
    const REQUESTS: &'static str = "requests";
    type Socket = tcp::Socket<'static>;

    fn send(&mut self, s: &mut Self::Socket, req: &[u8], seq: u64) -> anyhow::Result<bool> {
        // Until the handshake is done there is nowhere to send.
        if !s.may_send() {
            return Ok(false);
        }
        let n = s
            .send_slice(req)
            .map_err(|e| anyhow::anyhow!("tcp send: {e}"))?;
        if n != req.len() {
            return Err(anyhow::anyhow!(
                "tcp: request {seq} did not fit ({n} bytes)"
            ));
        }
        Ok(true)
    }

    fn answer(&mut self, s: &mut Self::Socket) -> anyhow::Result<Option<&[u8]>> {
        if s.can_recv() && read_whole(s, &mut self.response, &mut self.response_at)? {
            Ok(Some(&self.response))
        } else {
            Ok(None)
        }
    }

    fn serve(&mut self, s: &mut Self::Socket) -> anyhow::Result<()> {
        while s.can_recv() {
            if !read_whole(s, &mut self.scratch, &mut self.scratch_at)? {
                break;
            }
            let n = s
                .send_slice(&self.scratch)
                .map_err(|e| anyhow::anyhow!("tcp send: {e}"))?;
            if n != self.scratch.len() {
                return Err(anyhow::anyhow!("tcp: response did not fit ({n} bytes)"));
            }
        }
        Ok(())
    }
}

/// TCP bulk transfer of `count` messages of `len` bytes (each laid out as
/// a homa request: sequence number, then the pattern), checked in place by
/// the receiver, after `warmup` messages; nagle off, smoltcp's default
/// delayed ACKs, 1 MiB socket buffers.
pub fn tcp_bulk(len: usize, warmup: u64, count: u64) -> anyhow::Result<Measure> {
    let mut ends = Ends::new(4096);
    // Nagle off at the sender; delayed ACKs as smoltcp's default (an ACK
    // for every second full segment), as bulk TCP runs.
    let (ch, sh) = tcp_connection(&mut ends, 1 << 20, false)?;
    let mut message = vec![0u8; len];
    fill_payload(0, &mut message);
    let mut st = Bulk {
        len,
        message,
        sent: 0,
        received: 0,
    };
    bulk(&mut ends, ch, sh, &mut st, warmup)?;
    let frames = ends.pair.frames();
    let (r, secs) = measured(|| bulk(&mut ends, ch, sh, &mut st, count));
    r?;
    let frames = ends.pair.frames() - frames;
    ends.check_clean()?;
    Ok(Measure {
        ops: count,
        bytes: count * len as u64,
        secs,
        frames,
        data_packets: 0,
    })
}

struct Bulk {
    len: usize,
    /// The message being sent, its sequence number in the first 8 bytes.
    message: Vec<u8>,
    /// Stream bytes handed to the socket and checked at the receiver.
    sent: u64,
    received: u64,
}

fn bulk(
    ends: &mut Ends<'_>,
    ch: SocketHandle,
    sh: SocketHandle,
    st: &mut Bulk,
    count: u64,
) -> anyhow::Result<()> {
    let len = st.len as u64;
    let target = st.received + count * len;
    let end = ends.clock.ns + STALL_NS;
    let mut expect = st.message.clone();
    while st.received < target {
        {
            let sock = ends.csockets.get_mut::<tcp::Socket>(ch);
            while st.sent < target && sock.can_send() {
                let at = (st.sent % len) as usize;
                if at == 0 {
                    st.message[..8].copy_from_slice(&(st.sent / len).to_le_bytes());
                }
                let n = sock
                    .send_slice(&st.message[at..])
                    .map_err(|e| anyhow::anyhow!("tcp send: {e}"))?;
                if n == 0 {
                    break;
                }
                st.sent += n as u64;
            }
        }
        let before = ends.pair.bytes();
        ends.poll_client();
        ends.poll_server();
        {
            let sock = ends.ssockets.get_mut::<tcp::Socket>(sh);
            // Until the handshake is done there is nothing to read.
            while sock.may_recv() {
                let received = st.received;
                let r = sock.recv(|buf| {
                    // At most up to the end of the current message.
                    let at = (received % len) as usize;
                    let n = buf.len().min(st.len - at);
                    if at == 0 && n > 0 {
                        expect[..8].copy_from_slice(&(received / len).to_le_bytes());
                    }
                    (n, (n, buf[..n] == expect[at..at + n]))
                });
                match r {
                    Ok((0, _)) => break,
                    Ok((n, true)) => st.received += n as u64,
                    Ok((_, false)) => return Err(anyhow::anyhow!("tcp: stream arrived wrong")),
                    Err(e) => return Err(anyhow::anyhow!("tcp recv: {e}")),
                }
            }
        }
        let moved = ends.pair.bytes() - before;
        let busy = st.sent < target && ends.csockets.get_mut::<tcp::Socket>(ch).can_send();
        ends.tick(moved, busy);
        if ends.clock.ns > end {
            return Err(anyhow::anyhow!(
                "smoltcp tcp: stalled at {} of {target} bytes",
                st.received
            ));
        }
    }
    Ok(())
}
