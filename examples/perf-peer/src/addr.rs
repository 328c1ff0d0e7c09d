//! Addresses from the build's environment, parsed at compile time: a board
//! built with `HOMA_BOARD_IP=192.168.7.2/24` gets that address without an
//! edit to its source, and a malformed value stops the build with a
//! message instead of starting a board on an address nobody meant.
//!
//! ```
//! use core::net::Ipv4Addr;
//! use homa_perf_peer::{ipv4_cidr, ipv4_list};
//!
//! const BOARD: (Ipv4Addr, u8) = ipv4_cidr(match option_env!("EXAMPLE_UNSET") {
//!     Some(v) => v,
//!     None => "10.0.0.2/24",
//! });
//! const SERVERS: ([Ipv4Addr; 4], usize) = ipv4_list("10.0.0.1,10.0.0.5");
//! assert_eq!(BOARD, (Ipv4Addr::new(10, 0, 0, 2), 24));
//! assert_eq!(&SERVERS.0[..SERVERS.1], [Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 5)]);
//! ```

use core::net::Ipv4Addr;

/// The board's address and prefix length: `HOMA_BOARD_IP` at build time
/// (`A.B.C.D/P`), 10.0.0.2/24 without it.
pub const BOARD: (Ipv4Addr, u8) = ipv4_cidr(match option_env!("HOMA_BOARD_IP") {
    Some(s) => s,
    None => "10.0.0.2/24",
});

/// The homa-perf servers a board's client calls, in turn:
/// `HOMA_BOARD_SERVERS` at build time (`A.B.C.D[,A.B.C.D...]`, up to 4),
/// 10.0.0.1 and 10.0.0.5 without it; the first `.1` of them.
pub const SERVERS: ([Ipv4Addr; 4], usize) = ipv4_list(match option_env!("HOMA_BOARD_SERVERS") {
    Some(s) => s,
    None => "10.0.0.1,10.0.0.5",
});

/// Parses the dotted quad `s[from..to]`.
const fn quad(s: &[u8], from: usize, to: usize) -> Ipv4Addr {
    let mut octets = [0u8; 4];
    let (mut i, mut n, mut digits, mut value) = (from, 0, 0, 0u32);
    while i <= to {
        if i == to || s[i] == b'.' {
            if digits == 0 || n == 4 {
                panic!("an IPv4 address is four numbers joined by dots");
            }
            octets[n] = value as u8;
            n += 1;
            digits = 0;
            value = 0;
        } else if s[i].is_ascii_digit() && digits < 3 {
            value = value * 10 + (s[i] - b'0') as u32;
            digits += 1;
            if value > 255 {
                panic!("an IPv4 address's numbers are 0..=255");
            }
        } else {
            panic!("an IPv4 address is four numbers 0..=255 joined by dots");
        }
        i += 1;
    }
    if n != 4 {
        panic!("an IPv4 address is four numbers joined by dots");
    }
    Ipv4Addr::new(octets[0], octets[1], octets[2], octets[3])
}

/// `A.B.C.D/P` (prefix 1..=30, the host part not all zeros or all ones)
/// as the address and its prefix length. Panics otherwise, which in a
/// `const` is a compile error.
pub const fn ipv4_cidr(s: &str) -> (Ipv4Addr, u8) {
    let b = s.as_bytes();
    let mut slash = 0;
    while slash < b.len() && b[slash] != b'/' {
        slash += 1;
    }
    if slash + 1 >= b.len() || b.len() - slash > 3 {
        panic!("give the board's address as A.B.C.D/P, the prefix 1..=30");
    }
    let addr = quad(b, 0, slash);
    let mut prefix = 0u32;
    let mut i = slash + 1;
    while i < b.len() {
        if !b[i].is_ascii_digit() {
            panic!("give the board's address as A.B.C.D/P, the prefix 1..=30");
        }
        prefix = prefix * 10 + (b[i] - b'0') as u32;
        i += 1;
    }
    if prefix < 1 || prefix > 30 {
        panic!("the board's prefix length is 1..=30");
    }
    let host = addr.to_bits() & (u32::MAX >> prefix);
    if host == 0 || host == u32::MAX >> prefix {
        panic!("the board's address is its subnet's or its broadcast address");
    }
    (addr, prefix as u8)
}

/// `A.B.C.D[,A.B.C.D...]`, one to `N` addresses: the array (unused
/// entries unspecified) and how many were given. Panics otherwise, which
/// in a `const` is a compile error.
pub const fn ipv4_list<const N: usize>(s: &str) -> ([Ipv4Addr; N], usize) {
    let b = s.as_bytes();
    let mut out = [Ipv4Addr::UNSPECIFIED; N];
    let (mut n, mut from, mut i) = (0, 0, 0);
    while i <= b.len() {
        if i == b.len() || b[i] == b',' {
            if n == N {
                panic!("too many addresses in the list");
            }
            out[n] = quad(b, from, i);
            n += 1;
            from = i + 1;
        }
        i += 1;
    }
    (out, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_as_written() {
        assert_eq!(
            ipv4_cidr("192.168.7.2/24"),
            (Ipv4Addr::new(192, 168, 7, 2), 24)
        );
        assert_eq!(ipv4_cidr("10.1.2.3/8"), (Ipv4Addr::new(10, 1, 2, 3), 8));
        let (l, n) = ipv4_list::<4>("10.0.0.1");
        assert_eq!(&l[..n], [Ipv4Addr::new(10, 0, 0, 1)]);
        let (l, n) = ipv4_list::<2>("1.2.3.4,255.0.0.9");
        assert_eq!(
            &l[..n],
            [Ipv4Addr::new(1, 2, 3, 4), Ipv4Addr::new(255, 0, 0, 9)]
        );
    }

    #[test]
    fn malformed_addresses_are_refused() {
        for bad in [
            "10.0.0.2",
            "10.0.0.2/",
            "10.0.0.2/31",
            "10.0.0.2/0",
            "10.0.0.0/24",
            "10.0.0.255/24",
            "10.0.0/24",
            "10.0.0.2.1/24",
            "10.0.0.256/24",
            "10..0.2/24",
            "10.0.0.2 /24",
            "10.0.0.0002/24",
            "/24",
        ] {
            assert!(
                std::panic::catch_unwind(|| ipv4_cidr(bad)).is_err(),
                "{bad} was accepted"
            );
        }
        for bad in [
            "",
            "10.0.0.1,",
            ",10.0.0.1",
            "10.0.0.1,10.0.0.2,10.0.0.3",
            "a",
        ] {
            assert!(
                std::panic::catch_unwind(|| ipv4_list::<2>(bad)).is_err(),
                "{bad} was accepted"
            );
        }
    }
}
