//! homa-perf's command line: `server`, `client`, `testbed` and `cleanup`,
//! parsed by clap into the raw arguments below, then checked as a whole
//! (which device, which targets, which pace) into the options the loops run
//! with. Every value's accepted range is stated in its help and in the error
//! that refuses it.
//!
//! `args.rs` holds clap's definitions, the whole-line checks and the
//! checked options the rest of homa-perf reads.

mod args;

pub use args::{Cli, ClientOpts, Command, HomaOpts, Only, ServerOpts, Sub, TestbedOpts, Transport};

/// Default bottleneck rate of the testbed in Mbit/s (docs/testbed.md says
/// why it is not 1000 on a 2-core machine).
pub const DEFAULT_BOTTLENECK_MBPS: u32 = 200;

/// Largest message pool, MiB (per endpoint).
pub const MAX_POOL_MB: u64 = 4096;

/// Parses the words after the program name into the options, or the error
/// clap prints (usage errors, `--help` and `--version` included).
pub fn parse<I, T>(words: I) -> Result<Command, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::{CommandFactory, Parser};
    let words = std::iter::once(std::ffi::OsString::from("homa-perf"))
        .chain(words.into_iter().map(Into::into));
    let cli = Cli::try_parse_from(words)?;
    cli.command
        .check()
        .map_err(|e| Cli::command().error(clap::error::ErrorKind::ValueValidation, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::arrivals::Pace;
    use crate::perf::payload::ECHO;
    use std::net::Ipv4Addr;

    fn p(s: &str) -> Result<Command, clap::Error> {
        parse(s.split_whitespace())
    }

    #[test]
    fn a_tap_server_gets_its_defaults() {
        let Command::Server(s) = p("server --tap hp0 --ip 10.77.0.2/24").unwrap() else {
            panic!("not a server")
        };
        assert_eq!(s.port, 500);
        assert_eq!(s.duration_s, None);
        assert_eq!(s.homa.pool_mb, 256);
        assert!(s.verify);
        let Transport::Tap {
            name, ip, bridge, ..
        } = s.transport
        else {
            panic!("not a TAP")
        };
        assert_eq!((name.as_str(), ip.prefix, bridge), ("hp0", 24, None));
        assert_eq!(ip.default_peer().addr, Ipv4Addr::new(10, 77, 0, 1));
    }

    #[test]
    fn ipv6_addresses_are_accepted_for_homa() {
        let Command::Server(s) = p("server --tap hp0 --ip fd00::2/64").unwrap() else {
            panic!("not a server")
        };
        let Transport::Tap { ip, .. } = s.transport else {
            panic!("not a TAP")
        };
        assert_eq!(ip.to_string(), "fd00::2/64");
        assert_eq!(ip.default_peer().to_string(), "fd00::1/64");

        let cmd = p("client --tap hp1 --ip fd00::3/64 --host-ip fd00::1/64 \
                     --server [fd00::2]:500,[fd00::4]:501 --size 100 --rate 10 \
                     --neighbor fd00::2=02:00:00:00:00:02");
        let Command::Client(c) = cmd.unwrap() else {
            panic!("not a client")
        };
        let targets: Vec<String> = c.targets.iter().map(|t| t.to_string()).collect();
        assert_eq!(targets, ["[fd00::2]:500", "[fd00::4]:501"]);
        assert_eq!(
            c.homa.neighbors[0].0,
            "fd00::2".parse::<std::net::IpAddr>().unwrap()
        );

        let Command::Server(s) = p("server --tcp --listen [::1]:5001").unwrap() else {
            panic!("not a server")
        };
        assert_eq!(s.listen, "[::1]:5001".parse().unwrap());
    }

    #[test]
    fn ipv6_mistakes_say_what_is_accepted() {
        for (bad, says) in [
            (
                "server --tap t0 --ip 2001:db8::2/64",
                "unique-local (fc00::/7)",
            ),
            ("server --tap t0 --ip fd00::2/127", "16..=126"),
            ("server --tap t0 --ip fd00::/64", "host part zero"),
            (
                "server --tap t0 --ip fd00::2/64 --host-ip 10.0.0.1/24",
                "not in --ip's subnet",
            ),
            (
                "server --tap t0 --ip fd00::2/64 --host-ip fd00:1::1/64",
                "not in --ip's subnet",
            ),
            (
                "client --tap t --ip fd00::3/64 --server 10.0.0.2:500 --size 10 --rate 1",
                "on-link",
            ),
            (
                "client --tap t --ip 10.0.0.3/24 --server [fd00::2]:500 --size 10 --rate 1",
                "on-link",
            ),
            (
                "client --tap t --ip fd00::3/64 --server [fd00:0:0:1::2]:500 --size 10 --rate 1",
                "on-link",
            ),
            (
                "client --tcp --server [2001:db8::1]:5000 --size 10 --rate 1",
                "unique-local (fc00::/7) or loopback",
            ),
            (
                "client --tap t --ip fd00::3/64 --server [fd00::2]:40000 --size 10 --rate 1",
                "1..=32767",
            ),
            (
                "server --tcp --neighbor fe80::1=02:00:00:00:00:01",
                "unique-local",
            ),
        ] {
            let e = p(bad).expect_err(bad).to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn an_af_xdp_client_names_its_interface_and_queue() {
        let cmd = p("client --xdp eth1 --xdp-queue 3 --ip 10.77.0.3/24 \
                     --server 10.77.0.2:500 --size 100 --rate 10");
        let Command::Client(c) = cmd.unwrap() else {
            panic!("not a client")
        };
        let Transport::Xdp { name, ip, queue } = c.transport else {
            panic!("not AF_XDP")
        };
        assert_eq!(
            (name.as_str(), queue, ip.to_string().as_str()),
            ("eth1", 3, "10.77.0.3/24")
        );
        let e = p("server --xdp eth1").unwrap_err().to_string();
        assert!(e.contains("--xdp need --ip"), "{e}");
        assert!(p("server --xdp eth1 --tap t0 --ip 10.0.0.1/24").is_err());
        let e = p("server --xdp eth1 --xdp-queue 256 --ip 10.0.0.1/24").unwrap_err();
        assert!(e.to_string().contains("0..=255"), "{e}");
    }

    #[test]
    fn a_tcp_server_listens_on_5000_by_default() {
        let Command::Server(s) = p("server --tcp --duration 3").unwrap() else {
            panic!("not a server")
        };
        assert_eq!(s.listen, "0.0.0.0:5000".parse().unwrap());
        assert_eq!(s.duration_s, Some(3.0));
    }

    #[test]
    fn a_client_with_a_load_gets_a_poisson_rate() {
        let cmd = p("client --tap t1 --ip 10.77.0.3/24 --server 10.77.0.2:500 \
                     --workload w4 --load 0.5 --link-mbps 100 --reply-len 100 --json");
        let Command::Client(c) = cmd.unwrap() else {
            panic!("not a client")
        };
        let Pace::Poisson { per_sec } = c.pace else {
            panic!("not open loop")
        };
        // 0.5 * 100 Mbit/s = 6.25 MB/s over a 61,008-byte mean.
        assert!((per_sec - 6.25e6 / 61_008.1).abs() < 0.01, "{per_sec}");
        assert_eq!(c.reply_len, 100);
        assert_eq!(c.homa.pool_mb, 64);
        assert!(c.json);
    }

    #[test]
    fn a_closed_loop_echo_client_parses() {
        let Command::Client(c) =
            p("client --tcp --server 127.0.0.1:5000 --size 100,1000 --outstanding 4").unwrap()
        else {
            panic!("not a client")
        };
        assert_eq!(c.pace, Pace::Closed { outstanding: 4 });
        assert_eq!(c.reply_len, ECHO);
        assert_eq!(c.dist.bucket_bounds(), [100, 1000]);
    }

    #[test]
    fn mistakes_are_errors() {
        for bad in [
            "client --tcp --server 8.8.8.8:53 --size 10 --rate 1", // public target
            "client --tap t --ip 10.0.0.1/24 --server 10.0.1.1:500 --size 10 --rate 1", // off-link
            "client --tcp --server 127.0.0.1:5000 --size 10",      // no pace
            "client --tcp --server 127.0.0.1:5000 --size 10 --rate 1 --outstanding 2",
            "client --tcp --server 127.0.0.1:5000 --rate 1", // no size
            "client --tcp --server 127.0.0.1:5000 --size 10 --rate 1 extra", // stray word
            "client --tcp --server 127.0.0.1:5000 --size 10 --load 2.5",
            "client --tcp --server 127.0.0.1:5000 --size 10 --rate 1 --pool-mb 10000000",
            "client --tcp --server 127.0.0.1:5000 --size 0 --rate 1",
            "client --tcp --server 127.0.0.1:5000 --size 10 --rate 1 --reply-len 0",
            "server --tap t0",                        // no --ip
            "server --tap t0 --tcp --ip 10.0.0.1/24", // two devices
            "server",                                 // no device
            "server --tap t0 --ip 10.0.0.1/33",
            "server --tap t0 --ip 0.0.0.0/24",
            "server --tap t0 --ip 10.0.0.1/24 --host-ip 10.0.1.1/24",
            "server --tcp --bogus 1",
            "server --tcp --bogus", // unknown flag last
            "server --tcp --bridge br0",
            "server --tap t0 --ip 10.0.0.1/24 --listen 10.0.0.1:5000",
            "server --tcp --max-rpcs 100000",
            "server --tap t0 --ip 10.0.0.1/24 --port 40000",
            "server --tap t0 --ip 10.0.0.1/24 --mac 01:00:5e:00:00:01",
            "testbed --bands 9",
            "testbed --only udp",
            "testbed --load 2.5",
            "testbed --duration 0.1",
            "testbed extra",
            "fly",
            "",
        ] {
            assert!(p(bad).is_err(), "accepted: {bad}");
        }
    }

    #[test]
    fn range_errors_name_the_range() {
        let e = p("testbed --bands 9").unwrap_err().to_string();
        assert!(e.contains("1..=8"), "{e}");
        let e = p("testbed --load 2.5").unwrap_err().to_string();
        assert!(e.contains("(0, 1.5]"), "{e}");
        let e = p("server --tcp --pool-mb 10000000")
            .unwrap_err()
            .to_string();
        assert!(e.contains("1..=4096"), "{e}");
    }

    #[test]
    fn testbed_defaults_and_cleanup() {
        let Command::Testbed(t) = p("testbed").unwrap() else {
            panic!("not testbed")
        };
        assert_eq!((t.clients, t.bands, t.load), (4, 8, 0.8));
        assert_eq!((t.workload.as_str(), t.duration_s), ("w4", 20.0));
        assert_eq!(t.unsched_bytes(), 7120);
        assert!(matches!(p("cleanup").unwrap(), Command::Cleanup));
    }

    /// `--size 1` sends 1 byte (an echo, the default); asking for a reply
    /// length raises it to the header that carries it, and homa-perf says so.
    #[test]
    fn short_sizes_are_raised_only_to_carry_a_reply_length_and_said_so() {
        let client = |args: &str| {
            let line = format!("client --tcp --server 127.0.0.1:5000 --rate 10 {args}");
            let Command::Client(c) = p(&line).unwrap() else {
                panic!("not a client")
            };
            c
        };
        assert_eq!(client("--size 1").size_note(), None);
        assert_eq!(client("--size 1,40000 --reply-len echo").size_note(), None);
        assert_eq!(client("--size 12 --reply-len 100").size_note(), None);
        let note = client("--size 1,40000 --reply-len 100")
            .size_note()
            .unwrap();
        assert!(note.contains("sent as 12 B"), "{note}");
        let note = client("--workload w1 --reply-len 100").size_note().unwrap();
        assert!(note.contains("--reply-len"), "{note}");
    }

    #[test]
    fn the_command_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
