//! Addresses on homa-perf's command line: an IPv4 address with its subnet,
//! MAC addresses, and which targets are allowed. Shared by the options
//! ([`super::cli`]) and the device set-up ([`super::netcfg`]).

use std::net::Ipv4Addr;

use homa_stack::wire::EthernetAddress;

/// An IPv4 address with a prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    /// The address.
    pub addr: Ipv4Addr,
    /// Prefix length, 0..=32.
    pub prefix: u8,
}

impl Cidr {
    /// Parses `A.B.C.D/NN` (any address and prefix up to 32; see
    /// [`Cidr::parse_host`] for an interface's own address).
    pub fn parse(s: &str) -> Result<Cidr, String> {
        let (a, p) = s
            .split_once('/')
            .ok_or_else(|| format!("{s}: expected A.B.C.D/NN"))?;
        let addr: Ipv4Addr = a.parse().map_err(|e| format!("{s}: {e}"))?;
        let prefix: u8 = p
            .parse()
            .map_err(|_| format!("{s}: the prefix length must be 0..=32"))?;
        if prefix > 32 {
            return Err(format!("{s}: the prefix length must be 0..=32"));
        }
        Ok(Cidr { addr, prefix })
    }

    /// Parses the address of an interface homa-perf configures: a private
    /// unicast address (10/8, 172.16/12, 192.168/16) with a prefix of
    /// 8..=30 that is neither its subnet's network nor its broadcast
    /// address, so that the subnet has room for the kernel's side.
    pub fn parse_host(s: &str) -> Result<Cidr, String> {
        let c = Cidr::parse(s)?;
        if !(8..=30).contains(&c.prefix) {
            return Err(format!("{s}: the prefix length must be 8..=30"));
        }
        if !c.addr.is_private() {
            return Err(format!(
                "{s}: the address must be private (10/8, 172.16/12, 192.168/16)"
            ));
        }
        let host = u32::from(c.addr) & !c.mask();
        if host == 0 || host == !c.mask() {
            return Err(format!(
                "{s}: the address is the subnet's network or broadcast address, not a host's"
            ));
        }
        Ok(c)
    }

    fn mask(&self) -> u32 {
        u32::MAX
            .checked_shl(32 - u32::from(self.prefix))
            .unwrap_or(0)
    }

    /// Whether `ip` is in this subnet.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        (u32::from(ip) ^ u32::from(self.addr)) & self.mask() == 0
    }

    /// The first address of the subnet other than this one (for the
    /// kernel's side of a TAP).
    pub fn default_peer(&self) -> Cidr {
        let net = u32::from(self.addr) & self.mask();
        let first = if net + 1 == u32::from(self.addr) {
            net + 2
        } else {
            net + 1
        };
        Cidr {
            addr: Ipv4Addr::from(first),
            prefix: self.prefix,
        }
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// Whether traffic to `ip` stays on this machine or a private network:
/// homa-perf refuses any other target.
pub fn is_private(ip: Ipv4Addr) -> bool {
    ip.is_private() || ip.is_loopback()
}

/// Parses `02:00:00:00:00:01`.
pub fn parse_mac(s: &str) -> Result<EthernetAddress, String> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return Err(format!("{s}: expected six hex bytes XX:XX:XX:XX:XX:XX"));
    }
    let mut b = [0u8; 6];
    for (d, p) in b.iter_mut().zip(parts) {
        *d = u8::from_str_radix(p, 16)
            .map_err(|_| format!("{s}: expected six hex bytes XX:XX:XX:XX:XX:XX"))?;
    }
    Ok(EthernetAddress(b))
}

/// Parses a MAC address a host may own: not zero, not multicast/broadcast.
pub fn parse_unicast_mac(s: &str) -> Result<EthernetAddress, String> {
    let m = parse_mac(s)?;
    if m.0 == [0; 6] || m.0[0] & 1 == 1 {
        return Err(format!(
            "{s}: not a unicast address (zero, or the multicast bit is set)"
        ));
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_and_mac_parse() {
        let c = Cidr::parse("192.168.1.1/24").unwrap();
        assert!(c.contains(Ipv4Addr::new(192, 168, 1, 200)));
        assert!(!c.contains(Ipv4Addr::new(192, 168, 2, 1)));
        assert_eq!(c.default_peer().addr, Ipv4Addr::new(192, 168, 1, 2));
        assert_eq!(
            parse_mac("02:00:0a:4d:00:01").unwrap(),
            EthernetAddress([2, 0, 10, 77, 0, 1])
        );
        assert!(parse_mac("02:00").is_err());
        assert!(parse_unicast_mac("01:00:5e:00:00:01").is_err());
        assert!(parse_unicast_mac("00:00:00:00:00:00").is_err());
    }

    #[test]
    fn a_host_address_is_a_private_unicast_host_of_its_subnet() {
        assert!(Cidr::parse_host("10.77.0.2/24").is_ok());
        for bad in [
            "0.0.0.0/24",     // unspecified: the network address
            "10.77.0.0/24",   // network
            "10.77.0.255/24", // broadcast
            "8.8.8.8/24",     // public
            "127.0.0.1/8",    // loopback
            "10.0.0.1/31",    // no room for a peer
            "10.0.0.1/33",
            "10.0.0.1",
        ] {
            assert!(Cidr::parse_host(bad).is_err(), "accepted {bad}");
        }
    }
}
