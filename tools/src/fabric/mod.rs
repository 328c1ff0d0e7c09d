//! A packet-level model of a datacenter network on a virtual clock
//! (`docs/benchmarks.md` section 1).
//!
//! A [`Fabric`] holds hosts, links and switches. Each host has one NIC port,
//! usable as a [`Device`](homa_phy::Device) through [`Fabric::device`]; a driver
//! runs one stack per host and moves the clock with [`Fabric::advance_to`].
//! The fabric knows frames and priorities, never Homa.
//!
//! The model, per frame:
//! 1. `TxToken::consume` at `now`; after the host send delay the frame joins
//!    the NIC queue (one FIFO, or 8 strict-priority queues if configured).
//! 2. Each link serialises one frame at a time: `wire_bytes(len) * 8 / rate`
//!    (frame padded to 60 bytes, plus 24 bytes of preamble, FCS and
//!    inter-frame gap), rounded up to a whole nanosecond, then the
//!    propagation delay. Store-and-forward: a switch acts only once the last
//!    bit has arrived.
//! 3. A switch picks the egress port from the destination MAC (a ToR sprays
//!    traffic for other racks over its uplinks uniformly at random, per
//!    frame), waits the switch delay, then queues the frame in one of the
//!    port's 8 strict-priority FIFOs. A finite buffer drops the frame if it
//!    does not fit (drop-tail).
//! 4. At the destination host, after the receive delay, the frame is visible
//!    to `receive`; its `meta().rx_timestamp` is that instant.
//!
//! Priority: the [`PacketMeta`](homa_phy::PacketMeta) priority given with
//! `TxToken::set_meta`; a frame sent without it gets
//! [`priority_from_frame`] (802.1Q PCP, else the IPv4 TOS or IPv6 traffic
//! class top 3 bits, else 0). The priority is fixed when the host sends.
//!
//! Addresses: host `i` has MAC `02:00:00:00:hh:ll` (`i` big-endian), IPv4
//! `10.0.r.s` (rack `r`, slot in rack `s - 1`) and IPv6 `fd00::r:s`. Frames
//! travel by destination MAC whatever their network layer, so IPv4 and IPv6
//! are routed alike. Frames to a MAC no host has are dropped at the first
//! switch. Broadcast and multicast frames (ARP, neighbour discovery) are a
//! simplification: each other host gets a copy after the ideal one-way time of
//! that frame, without touching any link or queue.
//!
//! Everything runs in event order with ties broken by scheduling order, and
//! the only randomness is the seeded spraying, so a seed and the same inputs
//! give the same run.

mod addr;
mod config;
mod device;
mod event;
mod frame;
mod ideal;
mod port;
mod stats;
mod timing;
mod topology;

use std::collections::VecDeque;

pub use config::{Config, ConfigError, Topology};
pub use device::{HostPort, SimRxToken, SimTxToken};
pub use frame::priority_from_frame;
pub use stats::{Drops, PortStats, Stats};
pub use timing::{serialisation_time, wire_bytes, MIN_FRAME, WIRE_OVERHEAD};
pub use topology::NodeId;

use addr::Dest;
use event::{Event, EventQueue};
use frame::Frame;
use homa_phy::rng::SplitMix64 as Rng;
use port::Port;
use topology::Layout;

use homa_phy::time::{Duration, Instant};

/// A frame waiting in a host's receive queue.
#[derive(Debug)]
struct RxFrame {
    data: Vec<u8>,
    arrived: Instant,
    visible: Instant,
}

#[derive(Debug, Default)]
struct HostState {
    rx: VecDeque<RxFrame>,
    /// Frames accepted for sending and not yet fully on the host link.
    nic_backlog: usize,
    /// Already in `Fabric::rx_hosts`.
    listed: bool,
}

/// The simulated network: hosts, links, switches, and a virtual clock.
pub struct Fabric {
    cfg: Config,
    layout: Layout,
    now: u64,
    events: EventQueue,
    /// Every egress port: host NICs first (index = host), then switch ports.
    ports: Vec<Port>,
    hosts: Vec<HostState>,
    /// Hosts that received frames since `hosts_with_rx` last asked.
    rx_hosts: Vec<usize>,
    rng: Rng,
    stats: Stats,
    /// The host whose link [`Fabric::capture`] records, and where to.
    capture: Option<(usize, CaptureSink)>,
}

/// Takes each frame [`Fabric::capture`] records, with the instant its last
/// bit left the sender.
pub type CaptureSink = Box<dyn FnMut(Instant, &[u8]) + Send>;

impl Fabric {
    /// Builds the fabric of `cfg`, idle, at time zero.
    pub fn new(cfg: Config) -> Result<Fabric, ConfigError> {
        let layout = topology::Layout::new(cfg.topology)?;
        if cfg.host_link_mbps == 0 || cfg.fabric_link_mbps == 0 {
            return Err(ConfigError::ZeroLinkRate);
        }
        if cfg.mtu < 14 {
            return Err(ConfigError::MtuTooSmall);
        }
        if cfg.nic_queue_frames == Some(0) {
            return Err(ConfigError::ZeroNicQueue);
        }
        let switch = port::Queueing {
            priorities: true,
            pfabric: cfg.pfabric,
            limit: port::Limit {
                bytes: cfg.switch_buffer_bytes,
                frames: cfg.switch_buffer_frames,
            },
            ecn_bytes: cfg.ecn_threshold_bytes,
        };
        let nic = port::Queueing {
            priorities: cfg.nic_priority_queues,
            ..if cfg.nic_like_switch {
                switch
            } else {
                port::Queueing::default()
            }
        };
        let ports = layout
            .all_ports()
            .map(|(node, index)| {
                let queueing = match node {
                    NodeId::Host(_) => nic,
                    NodeId::Switch(_) => switch,
                };
                let (peer, rate) = (layout.peer(node, index), layout.rate(&cfg, node, index));
                Port::new(node, index, peer, rate, queueing)
            })
            .collect();
        Ok(Fabric {
            cfg,
            layout,
            now: 0,
            events: EventQueue::default(),
            ports,
            hosts: (0..layout.hosts()).map(|_| HostState::default()).collect(),
            rx_hosts: Vec::new(),
            rng: Rng::new(cfg.seed),
            stats: Stats::default(),
            capture: None,
        })
    }

    /// The configuration the fabric was built from.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Number of hosts.
    pub fn hosts(&self) -> usize {
        self.layout.hosts()
    }

    /// Number of switches (ToRs `0..racks`, then aggregation switches).
    pub fn switches(&self) -> usize {
        self.layout.switches()
    }

    /// The rack (= its ToR's switch index) of `host`.
    pub fn rack_of(&self, host: usize) -> usize {
        self.layout.rack_of(host)
    }

    /// Number of ports of `node` (numbering: see [`NodeId`]).
    pub fn port_count(&self, node: NodeId) -> usize {
        self.layout.port_count(node)
    }

    /// MAC address of `host`: `02:00:00:00:hh:ll`.
    pub fn host_mac(&self, host: usize) -> [u8; 6] {
        addr::mac(host)
    }

    /// IPv4 address of `host`: `10.0.rack.(slot + 1)`.
    pub fn host_ip(&self, host: usize) -> [u8; 4] {
        addr::ip(&self.layout, host)
    }

    /// IPv6 address of `host`: `fd00::rack:(slot + 1)`.
    pub fn host_ipv6(&self, host: usize) -> [u8; 16] {
        addr::ipv6(&self.layout, host)
    }

    /// The host owning IPv6 address `ip`, if any.
    pub fn host_by_ipv6(&self, ip: [u8; 16]) -> Option<usize> {
        addr::host_by_ipv6(&self.layout, ip)
    }

    /// The host owning `mac`, if any.
    pub fn host_by_mac(&self, mac: [u8; 6]) -> Option<usize> {
        addr::host_by_mac(&self.layout, mac)
    }

    /// The host owning `ip`, if any.
    pub fn host_by_ip(&self, ip: [u8; 4]) -> Option<usize> {
        addr::host_by_ip(&self.layout, ip)
    }

    /// The host's NIC port as a [`Device`](homa_phy::Device).
    ///
    /// # Panics
    /// If `host >= self.hosts()`.
    pub fn device(&mut self, host: usize) -> HostPort<'_> {
        assert!(host < self.hosts(), "host {host} out of range");
        HostPort::new(self, host)
    }

    /// The current virtual time.
    pub fn now(&self) -> Instant {
        Instant::from_nanos(self.now)
    }

    /// When the next pending event happens, or `None` if the fabric is idle.
    pub fn next_event_time(&self) -> Option<Instant> {
        self.events.next_time().map(Instant::from_nanos)
    }

    /// Processes every event up to and including `t`, then sets the clock to
    /// `t` (the clock never goes back: an earlier `t` only does nothing).
    pub fn advance_to(&mut self, t: Instant) {
        let limit = t.total_nanos();
        while let Some((at, event)) = self.events.pop_due(limit) {
            self.now = at;
            self.process(event);
        }
        self.now = self.now.max(limit);
    }

    /// Processes events until none is left; the clock stops at the last one.
    /// Returns the time reached.
    pub fn run_until_idle(&mut self) -> Instant {
        while let Some(at) = self.events.next_time() {
            self.advance_to(Instant::from_nanos(at));
        }
        self.now()
    }

    /// Moves the hosts that received frames since the last call into `out`
    /// (cleared first), each once, in order of first delivery. A host whose
    /// queue was not emptied is listed again only when a new frame arrives;
    /// [`Fabric::rx_pending`] tells how many frames wait.
    pub fn hosts_with_rx(&mut self, out: &mut Vec<usize>) {
        out.clear();
        std::mem::swap(out, &mut self.rx_hosts);
        for &h in out.iter() {
            self.hosts[h].listed = false;
        }
    }

    /// Frames visible to `receive` on `host` and not yet taken.
    ///
    /// # Panics
    /// If `host >= self.hosts()`.
    pub fn rx_pending(&self, host: usize) -> usize {
        self.hosts[host].rx.len()
    }

    /// Frames `host` has accepted for sending that are not yet fully on its
    /// link (the quantity [`Config::nic_queue_frames`] limits).
    ///
    /// # Panics
    /// If `host >= self.hosts()`.
    pub fn nic_backlog(&self, host: usize) -> usize {
        self.hosts[host].nic_backlog
    }

    /// Hands every frame that crosses `host`'s link from now on, either way,
    /// to `sink`, in the order their last bits leave the sender (a capture at
    /// the link, as a tap on the cable would make). Replaces an earlier
    /// capture.
    ///
    /// # Panics
    /// If `host >= self.hosts()`.
    pub fn capture(&mut self, host: usize, sink: CaptureSink) {
        assert!(host < self.hosts(), "host {host} out of range");
        self.capture = Some((host, sink));
    }

    /// Fabric-wide counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Counters of port `port` of `node`, or `None` if there is no such port.
    pub fn port_stats(&self, node: NodeId, port: usize) -> Option<PortStats> {
        let exists = match node {
            NodeId::Host(h) => h < self.hosts(),
            NodeId::Switch(s) => s < self.switches(),
        } && port < self.layout.port_count(node);
        exists.then(|| self.ports[self.layout.port_index(node, port)].stats())
    }

    /// Counters of every port: host NICs, then switch ports by switch.
    pub fn all_port_stats(&self) -> impl Iterator<Item = PortStats> + '_ {
        self.ports.iter().map(Port::stats)
    }

    /// The ideal one-way time of a message of `frame_bytes` bytes (frame
    /// bytes as passed to `TxToken::consume`, headers included, FCS and wire
    /// overhead excluded) cut into MTU-sized frames plus a remainder, from
    /// `src` to `dst` in an empty fabric: all frames handed over at once, until
    /// the last is visible at `dst`. Zero bytes take zero time. See
    /// [`Fabric::ideal_one_way_frames`].
    pub fn ideal_one_way(&self, src: usize, dst: usize, frame_bytes: usize) -> Duration {
        self.ideal_one_way_frames(src, dst, &ideal::split(frame_bytes, self.cfg.mtu))
    }

    /// The ideal one-way time of a message sent as frames of the given
    /// lengths, in order, from `src` to `dst`, all handed over at once.
    ///
    /// Exact for the model: every frame serialised at the host link rate once,
    /// the first frame's store-and-forward on each other link (for frames of
    /// non-increasing size), the switch delays, propagation, and both host
    /// delays. Across racks with sprayed uplinks it assumes frames of one
    /// message do not queue behind each other on fabric links, so it is a
    /// lower bound there, exact except when a much shorter frame shares an
    /// uplink with the frame before it.
    pub fn ideal_one_way_frames(&self, src: usize, dst: usize, frames: &[usize]) -> Duration {
        ideal::ideal_time(&self.cfg, &self.layout, src, dst, frames)
    }

    /// Whether `host` can take one more frame to send.
    fn tx_slot_free(&self, host: usize) -> bool {
        self.cfg
            .nic_queue_frames
            .is_none_or(|limit| self.hosts[host].nic_backlog < limit)
    }

    fn pop_rx(&mut self, host: usize) -> Option<SimRxToken> {
        let f = self.hosts[host].rx.pop_front()?;
        Some(SimRxToken::new(f.data, f.arrived, f.visible))
    }

    /// A host hands a frame to its NIC at `now`, with its priority (if
    /// given) and its pFabric rank and flow.
    fn host_transmit(
        &mut self,
        host: usize,
        data: Vec<u8>,
        priority: Option<u8>,
        (rank, flow): (u32, u32),
    ) {
        self.stats.frames_sent += 1;
        self.stats.bytes_sent += data.len() as u64;
        if data.len() < 14 {
            self.stats.drops.malformed += 1;
            return;
        }
        if data.len() > self.cfg.mtu {
            self.stats.drops.oversize += 1;
            return;
        }
        let dst = match addr::destination(&self.layout, &data) {
            Dest::Group => return self.flood(host, data),
            Dest::Host(d) => Some(d),
            Dest::Unknown => None,
        };
        let priority = priority.unwrap_or_else(|| priority_from_frame(&data));
        let frame = Frame {
            data,
            priority,
            dst,
            rank,
            flow,
        };
        self.hosts[host].nic_backlog += 1;
        let at = self.now + self.cfg.host_send_delay.total_nanos();
        self.events.push(at, Event::NicEnqueue { host, frame });
    }

    /// Broadcast and multicast: a copy to every other host after the unloaded
    /// one-way time, bypassing links and queues.
    fn flood(&mut self, src: usize, data: Vec<u8>) {
        let rx_delay = self.cfg.host_rx_delay.total_nanos();
        for dst in (0..self.hosts()).filter(|&d| d != src) {
            let delay = self.ideal_one_way_frames(src, dst, &[data.len()]);
            let at = self.now + delay.total_nanos();
            let arrived = at - rx_delay;
            self.stats.broadcast_copies += 1;
            let data = data.clone();
            self.events.push(
                at,
                Event::Deliver {
                    host: dst,
                    data,
                    arrived,
                },
            );
        }
    }

    fn process(&mut self, event: Event) {
        match event {
            Event::NicEnqueue { host, frame } => self.enqueue(host, frame),
            Event::SwitchEnqueue { port, frame } => self.enqueue(port, frame),
            Event::TxDone { port } => self.tx_done(port),
            Event::Arrive { node, frame } => self.arrive(node, frame),
            Event::Deliver {
                host,
                data,
                arrived,
            } => self.deliver(host, data, arrived),
        }
    }

    /// `frame` joins egress port `port` (flat index) and the port starts
    /// sending if it was idle.
    fn enqueue(&mut self, port: usize, frame: Frame) {
        let offer = self.ports[port].offer(frame);
        self.stats.drops.buffer_full += u64::from(offer.dropped);
        if port < self.hosts() {
            self.hosts[port].nic_backlog -= offer.dropped as usize;
        }
        self.stats.ecn_marks += u64::from(offer.marked);
        self.start(port);
    }

    fn start(&mut self, port: usize) {
        if let Some(ser) = self.ports[port].start() {
            let at = self.now + ser.total_nanos();
            self.events.push(at, Event::TxDone { port });
        }
    }

    fn tx_done(&mut self, port: usize) {
        let Some(frame) = self.ports[port].finish() else {
            return;
        };
        self.stats.hops += 1;
        if port < self.hosts() {
            self.hosts[port].nic_backlog -= 1;
        }
        let node = self.ports[port].peer();
        if let Some((host, sink)) = &mut self.capture {
            if port == *host || node == NodeId::Host(*host) {
                sink(Instant::from_nanos(self.now), &frame.data);
            }
        }
        let prop = self.cfg.propagation_delay.total_nanos();
        if prop == 0 {
            self.arrive(node, frame);
        } else {
            self.events
                .push(self.now + prop, Event::Arrive { node, frame });
        }
        self.start(port);
    }

    /// The last bit of `frame` has reached `node`.
    fn arrive(&mut self, node: NodeId, frame: Frame) {
        match node {
            NodeId::Host(host) => {
                let at = self.now + self.cfg.host_rx_delay.total_nanos();
                let arrived = self.now;
                let data = frame.data;
                self.events.push(
                    at,
                    Event::Deliver {
                        host,
                        data,
                        arrived,
                    },
                );
            }
            NodeId::Switch(switch) => {
                let Some(dst) = frame.dst else {
                    self.stats.drops.unknown_destination += 1;
                    return;
                };
                let out = self.layout.route(switch, dst, &mut self.rng);
                let port = self.layout.port_index(node, out);
                let at = self.now + self.cfg.switch_delay.total_nanos();
                self.events.push(at, Event::SwitchEnqueue { port, frame });
            }
        }
    }

    fn deliver(&mut self, host: usize, data: Vec<u8>, arrived: u64) {
        self.stats.frames_delivered += 1;
        self.stats.bytes_delivered += data.len() as u64;
        let state = &mut self.hosts[host];
        state.rx.push_back(RxFrame {
            data,
            arrived: Instant::from_nanos(arrived),
            visible: Instant::from_nanos(self.now),
        });
        if !state.listed {
            state.listed = true;
            self.rx_hosts.push(host);
        }
    }
}

impl core::fmt::Debug for Fabric {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Fabric")
            .field("topology", &self.cfg.topology)
            .field("now", &self.now())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}
