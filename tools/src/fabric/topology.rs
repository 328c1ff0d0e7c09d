//! Who is wired to whom: switch and port numbering, routing, and the path
//! between two hosts. The numbering is public; see [`NodeId`].

use super::config::{Config, ConfigError, Topology};
use homa_phy::testing::SplitMix64 as Rng;

/// A node of the fabric.
///
/// Numbering, so drivers and tests can name ports:
/// - hosts `0..racks * hosts_per_rack`; host `h` sits in rack
///   `h / hosts_per_rack` at slot `h % hosts_per_rack`;
/// - switches: ToR `r` is switch `r` (`0..racks`), aggregation switch `a` is
///   switch `racks + a`;
/// - ToR ports `0..hosts_per_rack` lead down to the rack's hosts (port = slot),
///   ports `hosts_per_rack + a` lead up to aggregation switch `a`;
/// - aggregation switch port `r` leads down to ToR `r`;
/// - a host has one port, 0, leading to its ToR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NodeId {
    /// A host (index `0..hosts`).
    Host(usize),
    /// A switch (ToRs first, then aggregation switches).
    Switch(usize),
}

/// The resolved shape: every topology becomes racks x hosts + aggregation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    pub(crate) racks: usize,
    pub(crate) per_rack: usize,
    pub(crate) aggs: usize,
}

/// One link a frame crosses between two hosts, for the ideal-time model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hop {
    /// Rate of the link.
    pub(crate) rate_mbps: u32,
    /// Every frame of a message takes this very link (not a sprayed choice).
    pub(crate) shared: bool,
}

impl Layout {
    pub(crate) fn new(topology: Topology) -> Result<Layout, ConfigError> {
        let (racks, per_rack, aggs) = match topology {
            Topology::Rack { hosts } => (1, hosts, 0),
            Topology::Paper => (9, 16, 4),
            Topology::TwoTier {
                racks,
                hosts_per_rack,
                aggs,
            } => (racks, hosts_per_rack, aggs),
        };
        if racks == 0 || per_rack == 0 {
            return Err(ConfigError::NoHosts);
        }
        if racks > 256 || per_rack > 254 {
            return Err(ConfigError::TooManyHosts);
        }
        if racks > 1 && aggs == 0 {
            return Err(ConfigError::NoAggregation);
        }
        // A single rack has no use for aggregation switches.
        let aggs = if racks == 1 { 0 } else { aggs };
        Ok(Layout {
            racks,
            per_rack,
            aggs,
        })
    }

    pub(crate) fn hosts(&self) -> usize {
        self.racks * self.per_rack
    }
    pub(crate) fn switches(&self) -> usize {
        self.racks + self.aggs
    }
    pub(crate) fn rack_of(&self, host: usize) -> usize {
        host / self.per_rack
    }
    pub(crate) fn slot_of(&self, host: usize) -> usize {
        host % self.per_rack
    }
    fn is_tor(&self, switch: usize) -> bool {
        switch < self.racks
    }

    /// Ports of `node`.
    pub(crate) fn port_count(&self, node: NodeId) -> usize {
        match node {
            NodeId::Host(_) => 1,
            NodeId::Switch(s) if self.is_tor(s) => self.per_rack + self.aggs,
            NodeId::Switch(_) => self.racks,
        }
    }

    /// Index of port `port` of `node` in the fabric's flat port table: host
    /// NICs first, then ToR ports, then aggregation ports.
    pub(crate) fn port_index(&self, node: NodeId, port: usize) -> usize {
        let tor_ports = self.per_rack + self.aggs;
        match node {
            NodeId::Host(h) => h,
            NodeId::Switch(s) if self.is_tor(s) => self.hosts() + s * tor_ports + port,
            NodeId::Switch(s) => {
                self.hosts() + self.racks * tor_ports + (s - self.racks) * self.racks + port
            }
        }
    }

    /// Every (node, port) in port-table order.
    pub(crate) fn all_ports(&self) -> impl Iterator<Item = (NodeId, usize)> + '_ {
        let hosts = (0..self.hosts()).map(|h| (NodeId::Host(h), 0));
        let switches = (0..self.switches()).flat_map(move |s| {
            let node = NodeId::Switch(s);
            (0..self.port_count(node)).map(move |p| (node, p))
        });
        hosts.chain(switches)
    }

    /// The node at the far end of port `port` of `node`.
    pub(crate) fn peer(&self, node: NodeId, port: usize) -> NodeId {
        match node {
            NodeId::Host(h) => NodeId::Switch(self.rack_of(h)),
            NodeId::Switch(s) if self.is_tor(s) => {
                if port < self.per_rack {
                    NodeId::Host(s * self.per_rack + port)
                } else {
                    NodeId::Switch(self.racks + port - self.per_rack)
                }
            }
            NodeId::Switch(_) => NodeId::Switch(port),
        }
    }

    /// Rate of the link out of port `port` of `node`: host links run at the
    /// host rate in both directions, ToR-aggregation links at the fabric rate.
    pub(crate) fn rate(&self, cfg: &Config, node: NodeId, port: usize) -> u32 {
        match self.peer(node, port) {
            NodeId::Host(_) => cfg.host_link_mbps,
            NodeId::Switch(_) if matches!(node, NodeId::Host(_)) => cfg.host_link_mbps,
            NodeId::Switch(_) => cfg.fabric_link_mbps,
        }
    }

    /// The egress port of `switch` toward host `dst`. A ToR sends traffic for
    /// another rack up a uniformly random uplink, drawn per frame (spraying).
    pub(crate) fn route(&self, switch: usize, dst: usize, rng: &mut Rng) -> usize {
        let rack = self.rack_of(dst);
        if !self.is_tor(switch) {
            rack
        } else if rack == switch {
            self.slot_of(dst)
        } else if self.aggs == 1 {
            self.per_rack
        } else {
            self.per_rack + rng.below(self.aggs as u64) as usize
        }
    }

    /// The links a frame from `src` to `dst` crosses, in order; the first is
    /// the source host's NIC link.
    pub(crate) fn path(&self, cfg: &Config, src: usize, dst: usize) -> Vec<Hop> {
        let host = |shared| Hop {
            rate_mbps: cfg.host_link_mbps,
            shared,
        };
        if self.rack_of(src) == self.rack_of(dst) {
            vec![host(true), host(true)]
        } else {
            // With several uplinks each frame picks its own, so frames of one
            // message do not necessarily queue behind each other there.
            let up = Hop {
                rate_mbps: cfg.fabric_link_mbps,
                shared: self.aggs == 1,
            };
            vec![host(true), up, up, host(true)]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_numbering_and_wiring() {
        let l = Layout::new(Topology::Paper).unwrap();
        assert_eq!((l.hosts(), l.switches()), (144, 13));
        assert_eq!(l.port_count(NodeId::Switch(0)), 20);
        assert_eq!(l.port_count(NodeId::Switch(9)), 9);
        assert_eq!(l.peer(NodeId::Host(17), 0), NodeId::Switch(1));
        assert_eq!(l.peer(NodeId::Switch(1), 1), NodeId::Host(17));
        assert_eq!(l.peer(NodeId::Switch(1), 18), NodeId::Switch(11));
        assert_eq!(l.peer(NodeId::Switch(11), 1), NodeId::Switch(1));
        // The flat table has one slot per port, no gaps or overlaps.
        let idx: Vec<usize> = l.all_ports().map(|(n, p)| l.port_index(n, p)).collect();
        assert_eq!(idx, (0..144 + 9 * 20 + 4 * 9).collect::<Vec<_>>());
    }

    #[test]
    fn rates_follow_link_kind() {
        let cfg = Config::new(Topology::Paper);
        let l = Layout::new(cfg.topology).unwrap();
        assert_eq!(l.rate(&cfg, NodeId::Host(0), 0), 10_000);
        assert_eq!(l.rate(&cfg, NodeId::Switch(0), 3), 10_000);
        assert_eq!(l.rate(&cfg, NodeId::Switch(0), 16), 40_000);
        assert_eq!(l.rate(&cfg, NodeId::Switch(9), 0), 40_000);
    }

    #[test]
    fn routing_goes_down_in_rack_and_up_otherwise() {
        let l = Layout::new(Topology::Paper).unwrap();
        let mut rng = Rng::new(3);
        assert_eq!(l.route(2, 35, &mut rng), 3);
        assert!((16..20).contains(&l.route(2, 100, &mut rng)));
        assert_eq!(l.route(10, 100, &mut rng), 6);
    }

    #[test]
    fn bad_shapes_are_rejected() {
        assert_eq!(
            Layout::new(Topology::Rack { hosts: 0 }),
            Err(ConfigError::NoHosts)
        );
        assert_eq!(
            Layout::new(Topology::Rack { hosts: 255 }),
            Err(ConfigError::TooManyHosts)
        );
        let t = Topology::TwoTier {
            racks: 2,
            hosts_per_rack: 2,
            aggs: 0,
        };
        assert_eq!(Layout::new(t), Err(ConfigError::NoAggregation));
    }
}
