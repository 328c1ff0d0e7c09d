//! Host addresses and destination lookup.
//!
//! Host `i` has the locally administered unicast MAC `02:00:00:00:hh:ll`, where
//! `hh:ll` is `i` as a big-endian 16-bit number, and the IPv4 address
//! `10.0.r.s` where `r` is its rack and `s` its slot in the rack plus one (so
//! no host ends in `.0`), and the IPv6 address `fd00::r:s` (the same rack and
//! slot plus one in its last two 16-bit groups). The fabric forwards on the
//! destination MAC only, so IPv4 and IPv6 frames travel alike; the IP
//! addresses are a convention for the stacks running on top.

use super::topology::Layout;

/// Where a frame is headed, from its destination MAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dest {
    /// A host of the fabric.
    Host(usize),
    /// Broadcast or multicast (the I/G bit is set): flooded to all others.
    Group,
    /// A unicast MAC no host has.
    Unknown,
}

pub(crate) fn mac(host: usize) -> [u8; 6] {
    let [hh, ll] = (host as u16).to_be_bytes();
    [0x02, 0, 0, 0, hh, ll]
}

pub(crate) fn ip(layout: &Layout, host: usize) -> [u8; 4] {
    // Layout::new bounds racks to 256 and slots to 254, so both fit a byte.
    [
        10,
        0,
        layout.rack_of(host) as u8,
        layout.slot_of(host) as u8 + 1,
    ]
}

pub(crate) fn ipv6(layout: &Layout, host: usize) -> [u8; 16] {
    let [_, _, r, s] = ip(layout, host);
    let mut a = [0u8; 16];
    a[..2].copy_from_slice(&[0xfd, 0x00]);
    a[13] = r;
    a[15] = s;
    a
}

pub(crate) fn host_by_mac(layout: &Layout, mac: [u8; 6]) -> Option<usize> {
    match mac {
        [0x02, 0, 0, 0, hh, ll] => {
            let host = usize::from(u16::from_be_bytes([hh, ll]));
            (host < layout.hosts()).then_some(host)
        }
        _ => None,
    }
}

pub(crate) fn host_by_ip(layout: &Layout, ip: [u8; 4]) -> Option<usize> {
    match ip {
        [10, 0, r, s] if s >= 1 => {
            let (rack, slot) = (usize::from(r), usize::from(s) - 1);
            (rack < layout.racks && slot < layout.per_rack).then_some(rack * layout.per_rack + slot)
        }
        _ => None,
    }
}

pub(crate) fn host_by_ipv6(layout: &Layout, ip: [u8; 16]) -> Option<usize> {
    let prefix = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    match ip {
        [head @ .., r, 0, s] if head == prefix => host_by_ip(layout, [10, 0, r, s]),
        _ => None,
    }
}

/// The destination of `frame`, which must hold at least an Ethernet header.
pub(crate) fn destination(layout: &Layout, frame: &[u8]) -> Dest {
    let mut dst = [0u8; 6];
    match frame.get(..6) {
        Some(bytes) => dst.copy_from_slice(bytes),
        None => return Dest::Unknown,
    }
    if dst[0] & 1 != 0 {
        Dest::Group
    } else {
        host_by_mac(layout, dst).map_or(Dest::Unknown, Dest::Host)
    }
}

#[cfg(test)]
mod tests {
    use super::super::config::Topology;
    use super::*;

    #[test]
    fn addresses_round_trip() {
        let l = Layout::new(Topology::Paper).unwrap();
        assert_eq!(mac(0x123), [2, 0, 0, 0, 1, 0x23]);
        assert_eq!(ip(&l, 17), [10, 0, 1, 2]);
        for h in 0..l.hosts() {
            assert_eq!(host_by_mac(&l, mac(h)), Some(h));
            assert_eq!(host_by_ip(&l, ip(&l, h)), Some(h));
        }
        assert_eq!(
            ipv6(&l, 17),
            [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 2]
        );
        for h in 0..l.hosts() {
            assert_eq!(host_by_ipv6(&l, ipv6(&l, h)), Some(h));
        }
        let mut other = ipv6(&l, 3);
        other[1] = 1;
        assert_eq!(host_by_ipv6(&l, other), None);
        other = ipv6(&l, 3);
        other[14] = 1;
        assert_eq!(host_by_ipv6(&l, other), None);
        assert_eq!(host_by_mac(&l, mac(144)), None);
        assert_eq!(host_by_ip(&l, [10, 0, 9, 1]), None);
        assert_eq!(host_by_ip(&l, [10, 0, 0, 0]), None);
    }

    #[test]
    fn destination_classes() {
        let l = Layout::new(Topology::Rack { hosts: 4 }).unwrap();
        let mut f = [0u8; 14];
        f[..6].copy_from_slice(&mac(3));
        assert_eq!(destination(&l, &f), Dest::Host(3));
        f[..6].copy_from_slice(&[0xff; 6]);
        assert_eq!(destination(&l, &f), Dest::Group);
        f[..6].copy_from_slice(&mac(4));
        assert_eq!(destination(&l, &f), Dest::Unknown);
    }
}
