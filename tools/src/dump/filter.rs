//! Which frames to show. Kinds of filter combine with AND; the values of one
//! kind (`--type DATA,GRANT`, `--host A --host B`) with OR.

use std::net::IpAddr;

use homa_stack::wire::homa::PacketType;

use super::decode::{Decoded, Net};

/// The filters of the command line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Homa packet types.
    pub types: Vec<PacketType>,
    /// IP addresses, matching source or destination.
    pub hosts: Vec<IpAddr>,
    /// Homa ports, matching source or destination.
    pub ports: Vec<u16>,
    /// RPC ids, matching both sides: a client's id and the server's
    /// (client id with the low bit flipped, protocol.md 3.3).
    pub rpcs: Vec<u64>,
}

/// Every Homa packet type homa-stack knows (the type bytes are 0x10 to 0x18).
fn known_types() -> impl Iterator<Item = PacketType> {
    (0x10..=0x18u8)
        .map(PacketType::from)
        .filter(|t| !matches!(t, PacketType::Unknown(_)))
}

/// Parses a `--type` value: a type's name as homa-dump prints it, any case.
pub fn parse_type(s: &str) -> anyhow::Result<PacketType> {
    let upper = s.to_ascii_uppercase();
    known_types()
        .find(|t| t.to_string() == upper)
        .ok_or_else(|| {
            let names: Vec<String> = known_types().map(|t| t.to_string()).collect();
            anyhow::anyhow!("unknown Homa type {s:?} (one of {})", names.join(", "))
        })
}

impl Filter {
    /// No filter set: every frame passes.
    pub fn is_empty(&self) -> bool {
        *self == Filter::default()
    }

    /// Whether frame `d` passes. A Homa filter (type, port, RPC) passes
    /// only Homa packets whose common header was captured; a host filter
    /// passes any IP packet with that address, and ARP naming it.
    pub fn matches(&self, d: &Decoded<'_>) -> bool {
        if !self.hosts.is_empty() && !self.host_matches(d) {
            return false;
        }
        if self.types.is_empty() && self.ports.is_empty() && self.rpcs.is_empty() {
            return true;
        }
        let Some(h) = d.homa() else {
            return false;
        };
        if !self.types.is_empty() && !self.types.contains(&h.ptype) {
            return false;
        }
        let p = &h.packet;
        if !self.ports.is_empty()
            && !(h.captured >= 4
                && (self.ports.contains(&p.sport()) || self.ports.contains(&p.dport())))
        {
            return false;
        }
        if !self.rpcs.is_empty() {
            if !h.has_common_header() {
                return false;
            }
            let id = p.sender_id();
            if !self.rpcs.iter().any(|&r| id == r || id == r ^ 1) {
                return false;
            }
        }
        true
    }

    fn host_matches(&self, d: &Decoded<'_>) -> bool {
        match &d.net {
            Net::Ip(ip, _) => self.hosts.contains(&ip.src) || self.hosts.contains(&ip.dst),
            Net::Arp(f) => ["sender_ip", "target_ip"].iter().any(|k| {
                f.json[k]
                    .as_str()
                    .and_then(|s| s.parse::<IpAddr>().ok())
                    .is_some_and(|a| self.hosts.contains(&a))
            }),
            Net::Other(_) | Net::Malformed(_) => false,
        }
    }
}
