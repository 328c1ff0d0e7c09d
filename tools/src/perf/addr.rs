//! Addresses on homa-perf's command line: an IPv4 or IPv6 address with its
//! subnet, MAC addresses, and which targets are allowed. Shared by the
//! options ([`super::cli`]) and the device set-up ([`super::netcfg`]).

use anyhow::Context as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use homa_stack::wire::EthernetAddress;

/// An IPv4 or IPv6 address with a prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    /// The address.
    pub addr: IpAddr,
    /// Prefix length, 0..=32 (IPv4) or 0..=128 (IPv6).
    pub prefix: u8,
}

impl Cidr {
    /// Parses `A.B.C.D/NN` or `IPV6/NN` (any address, and a prefix up to
    /// 32 or 128; see [`Cidr::parse_host`] for an interface's own address).
    pub fn parse(s: &str) -> anyhow::Result<Cidr> {
        let (a, p) = s
            .split_once('/')
            .with_context(|| format!("{s}: expected A.B.C.D/NN or IPV6/NN"))?;
        let addr: IpAddr = a
            .parse()
            .map_err(|_| anyhow::anyhow!("{s}: {a} is neither an IPv4 nor an IPv6 address"))?;
        let max = Cidr::bits(addr);
        let range = || anyhow::anyhow!("{s}: the prefix length must be 0..={max}");
        let prefix: u8 = p.parse().map_err(|_| range())?;
        if u32::from(prefix) > max {
            return Err(range());
        }
        Ok(Cidr { addr, prefix })
    }

    /// Parses the address of an interface homa-perf configures, with room
    /// in its subnet for the kernel's side and not the subnet's own
    /// address: IPv4, a private unicast address (10/8, 172.16/12,
    /// 192.168/16) with a prefix of 8..=30 that is neither its subnet's
    /// network nor its broadcast address; IPv6, a unique-local address
    /// (fc00::/7) with a prefix of 16..=126 that is not the subnet-router
    /// anycast address (host part zero).
    pub fn parse_host(s: &str) -> anyhow::Result<Cidr> {
        let c = Cidr::parse(s)?;
        match c.addr {
            IpAddr::V4(a) => {
                if !(8..=30).contains(&c.prefix) {
                    anyhow::bail!("{s}: an IPv4 prefix length must be 8..=30");
                }
                if !a.is_private() {
                    anyhow::bail!(
                        "{s}: an IPv4 address must be private (10/8, 172.16/12, 192.168/16)"
                    );
                }
                let host = c.host_bits();
                if host == 0 || host == !c.mask() & u128::from(u32::MAX) {
                    anyhow::bail!(
                        "{s}: the address is the subnet's network or broadcast address, not a host's"
                    );
                }
            }
            IpAddr::V6(a) => {
                if !(16..=126).contains(&c.prefix) {
                    anyhow::bail!("{s}: an IPv6 prefix length must be 16..=126");
                }
                if !is_unique_local(a) {
                    anyhow::bail!("{s}: an IPv6 address must be unique-local (fc00::/7)");
                }
                if c.host_bits() == 0 {
                    anyhow::bail!(
                        "{s}: the address is the subnet's own (host part zero), not a host's"
                    );
                }
            }
        }
        Ok(c)
    }

    /// Address length in bits: 32 or 128.
    fn bits(addr: IpAddr) -> u32 {
        match addr {
            IpAddr::V4(_) => 32,
            IpAddr::V6(_) => 128,
        }
    }

    /// The address as a number, right-aligned.
    fn value(addr: IpAddr) -> u128 {
        match addr {
            IpAddr::V4(a) => u128::from(u32::from(a)),
            IpAddr::V6(a) => u128::from(a),
        }
    }

    /// `v` (from [`Cidr::value`]) as an address of this one's family.
    fn same_family(&self, v: u128) -> IpAddr {
        match self.addr {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(v as u32)),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(v)),
        }
    }

    /// The subnet mask, right-aligned like [`Cidr::value`].
    fn mask(&self) -> u128 {
        let bits = Cidr::bits(self.addr);
        let all = u128::MAX >> (128 - bits);
        all & all.checked_shl(bits - u32::from(self.prefix)).unwrap_or(0)
    }

    fn host_bits(&self) -> u128 {
        let bits = Cidr::bits(self.addr);
        Cidr::value(self.addr) & !self.mask() & (u128::MAX >> (128 - bits))
    }

    /// Whether `ip` is in this subnet (never across families).
    pub fn contains(&self, ip: IpAddr) -> bool {
        ip.is_ipv4() == self.addr.is_ipv4()
            && (Cidr::value(ip) ^ Cidr::value(self.addr)) & self.mask() == 0
    }

    /// The first address of the subnet other than this one and the
    /// subnet's own (for the kernel's side of a TAP).
    pub fn default_peer(&self) -> Cidr {
        let net = Cidr::value(self.addr) & self.mask();
        let first = if net + 1 == Cidr::value(self.addr) {
            net + 2
        } else {
            net + 1
        };
        Cidr {
            addr: self.same_family(first),
            prefix: self.prefix,
        }
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// Whether `a` is an IPv6 unique-local address (fc00::/7, RFC 4193).
pub fn is_unique_local(a: Ipv6Addr) -> bool {
    a.segments()[0] & 0xfe00 == 0xfc00
}

/// Whether traffic to `ip` stays on this machine or a private network:
/// homa-perf refuses any other target. IPv4 private or loopback; IPv6
/// unique-local or loopback.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => a.is_private() || a.is_loopback(),
        IpAddr::V6(a) => is_unique_local(a) || a.is_loopback(),
    }
}

/// Parses `02:00:00:00:00:01`.
pub fn parse_mac(s: &str) -> anyhow::Result<EthernetAddress> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        anyhow::bail!("{s}: expected six hex bytes XX:XX:XX:XX:XX:XX");
    }
    let mut b = [0u8; 6];
    for (d, p) in b.iter_mut().zip(parts) {
        *d = u8::from_str_radix(p, 16)
            .map_err(|_| anyhow::anyhow!("{s}: expected six hex bytes XX:XX:XX:XX:XX:XX"))?;
    }
    Ok(EthernetAddress(b))
}

/// Parses a MAC address a host may own: not zero, not multicast/broadcast.
pub fn parse_unicast_mac(s: &str) -> anyhow::Result<EthernetAddress> {
    let m = parse_mac(s)?;
    if m.0 == [0; 6] || m.0[0] & 1 == 1 {
        anyhow::bail!("{s}: not a unicast address (zero, or the multicast bit is set)");
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_and_mac_parse() {
        let c = Cidr::parse("192.168.1.1/24").unwrap();
        assert!(c.contains(Ipv4Addr::new(192, 168, 1, 200).into()));
        assert!(!c.contains(Ipv4Addr::new(192, 168, 2, 1).into()));
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

    #[test]
    fn ipv6_subnets_contain_their_hosts_only() {
        let c = Cidr::parse_host("fd00::2/64").unwrap();
        assert_eq!(c.prefix, 64);
        assert!(c.contains("fd00::ffff:1".parse().unwrap()));
        assert!(!c.contains("fd00:0:0:1::1".parse().unwrap()));
        assert!(!c.contains("10.0.0.1".parse().unwrap()), "across families");
        assert_eq!(c.default_peer().addr, "fd00::1".parse::<IpAddr>().unwrap());
        let c = Cidr::parse_host("fd00::1/64").unwrap();
        assert_eq!(c.default_peer().addr, "fd00::2".parse::<IpAddr>().unwrap());
        let c = Cidr::parse_host("fd12:3456::8:1/126").unwrap();
        assert!(c.contains("fd12:3456::8:3".parse().unwrap()));
        assert!(!c.contains("fd12:3456::8:4".parse().unwrap()));
        assert_eq!(c.to_string(), "fd12:3456::8:1/126");
        // An IPv4 address in a /0 is in it; no IPv6 one is.
        let any = Cidr::parse("0.0.0.0/0").unwrap();
        assert!(any.contains("8.8.8.8".parse().unwrap()));
        assert!(!any.contains("fd00::1".parse().unwrap()));
    }

    #[test]
    fn an_ipv6_host_address_is_unique_local_and_not_its_subnets() {
        for good in ["fd00::2/64", "fc00::1/16", "fdff:1:2:3::5/126"] {
            assert!(Cidr::parse_host(good).is_ok(), "refused {good}");
        }
        for (bad, why) in [
            ("fd00::/64", "host part zero"),
            ("fd00::1:0:0:0:0/64", "host part zero"),
            ("2001:db8::1/64", "unique-local"),
            ("fe80::1/64", "unique-local"),
            ("::1/128", "16..=126"),
            ("fd00::1/127", "16..=126"),
            ("fd00::1/8", "16..=126"),
            ("fd00::1/129", "0..=128"),
            ("fd00::1", "IPV6/NN"),
            ("fd00::g/64", "neither"),
        ] {
            let e = Cidr::parse_host(bad).expect_err(bad);
            assert!(e.to_string().contains(why), "{bad}: {e}");
        }
        assert!(is_private("fd00::1".parse().unwrap()));
        assert!(is_private("::1".parse().unwrap()));
        assert!(!is_private("2001:db8::1".parse().unwrap()));
        assert!(!is_private("fe80::1".parse().unwrap()));
    }
}
