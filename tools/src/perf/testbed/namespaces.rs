//! The testbed's network namespaces: the address plan, the switch and
//! host namespaces with their bridges and veths, the child processes run
//! inside them, and the clean-up of everything, also after a crash.

use anyhow::Context as _;
use std::io::{BufRead, BufReader, Read};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use super::bottleneck::install_bottleneck;
use crate::perf::cli::TestbedOpts;
use crate::perf::netcfg::{output, run};
use crate::perf::sys;

pub(super) const SUBNET: [u8; 3] = [10, 77, 0];
/// The IPv6 plan's /64 (`--ipv6`): `fd00:77::/64`, the same host numbers.
pub(super) const SUBNET6: [u16; 2] = [0xfd00, 0x77];
pub(super) const HOMA_PORT: u16 = 500;
pub(super) const TCP_PORT: u16 = 5000;

/// Prefix length of the testbed's subnet in the family chosen.
pub(super) fn prefix(ipv6: bool) -> u8 {
    if ipv6 {
        64
    } else {
        24
    }
}

fn host_addr(n: usize, ipv6: bool) -> IpAddr {
    if ipv6 {
        Ipv6Addr::new(SUBNET6[0], SUBNET6[1], 0, 0, 0, 0, 0, n as u16).into()
    } else {
        Ipv4Addr::new(SUBNET[0], SUBNET[1], SUBNET[2], n as u8).into()
    }
}

/// The kernel's address in host `host` (its bridge's), for TCP.
pub(super) fn kernel_ip(host: usize, ipv6: bool) -> IpAddr {
    host_addr(10 + host, ipv6)
}

/// homa-stack's address in host `host`.
pub(super) fn homa_ip(host: usize, ipv6: bool) -> IpAddr {
    host_addr(100 + host, ipv6)
}

pub(super) fn is_ours(name: &str) -> Option<u32> {
    // hp<pid>-<role>
    let rest = name.strip_prefix("hp")?;
    let (pid, role) = rest.split_once('-')?;
    if role.is_empty() || !pid.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

pub(super) fn namespaces() -> Vec<String> {
    output("ip", &["netns", "list"])
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect()
}

/// Kills what still runs in namespace `ns` (only testbed children can be
/// there) and deletes it.
pub(super) fn remove_namespace(ns: &str) {
    if let Ok(pids) = output("ip", &["netns", "pids", ns]) {
        for pid in pids.lines().filter_map(|p| p.trim().parse::<u32>().ok()) {
            sys::kill(pid, libc::SIGKILL);
        }
    }
    let _ = run("ip", &["netns", "del", ns]);
}

/// Removes testbed namespaces left by runs that are no longer alive;
/// returns how many.
pub fn cleanup_leftovers() -> usize {
    let mut n = 0;
    for ns in namespaces() {
        if let Some(pid) = is_ours(&ns) {
            if pid == std::process::id() || !std::path::Path::new(&format!("/proc/{pid}")).exists()
            {
                remove_namespace(&ns);
                n += 1;
            }
        }
    }
    n
}

/// The namespaces and child processes of one run; dropping it kills the
/// children and deletes the namespaces, whatever happened.
pub(super) struct Testbed {
    pub(super) tag: String,
    pub(super) made: Vec<String>,
    pub(super) children: Vec<Child>,
}

impl Drop for Testbed {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in self.made.iter().rev() {
            remove_namespace(ns);
        }
    }
}

impl Testbed {
    pub(super) fn ns(&self, role: &str) -> String {
        format!("{}-{role}", self.tag)
    }

    pub(super) fn add_ns(&mut self, role: &str, ipv6: bool) -> anyhow::Result<String> {
        let ns = self.ns(role);
        run("ip", &["netns", "add", &ns])?;
        self.made.push(ns.clone());
        // No IPv6 chatter on the testbed's links, unless the run is IPv6.
        let off = if ipv6 { "0" } else { "1" };
        let all = format!("net.ipv6.conf.all.disable_ipv6={off}");
        let default = format!("net.ipv6.conf.default.disable_ipv6={off}");
        let _ = run(
            "ip",
            &["netns", "exec", &ns, "sysctl", "-qw", &all, &default],
        );
        run("ip", &["-n", &ns, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Builds the switch, the hosts and the bottleneck.
    pub(super) fn build(&mut self, o: &TestbedOpts) -> anyhow::Result<()> {
        let sw = self.add_ns("sw", o.ipv6)?;
        run("ip", &["-n", &sw, "link", "add", "br0", "type", "bridge"])?;
        run("ip", &["-n", &sw, "link", "set", "br0", "up"])?;
        for h in 0..=o.clients {
            let role = if h == 0 {
                "s0".to_string()
            } else {
                format!("c{h}")
            };
            let host = self.add_ns(&role, o.ipv6)?;
            let port = format!("p{h}");
            run(
                "ip",
                &[
                    "-n", &sw, "link", "add", &port, "type", "veth", "peer", "name", "eth0",
                    "netns", &host,
                ],
            )?;
            run(
                "ip",
                &["-n", &sw, "link", "set", &port, "master", "br0", "up"],
            )?;
            run("ip", &["-n", &host, "link", "add", "br0", "type", "bridge"])?;
            run(
                "ip",
                &["-n", &host, "link", "set", "eth0", "master", "br0", "up"],
            )?;
            let addr = format!("{}/{}", kernel_ip(h, o.ipv6), prefix(o.ipv6));
            // nodad: an IPv6 address is usable at once, not after DAD.
            let mut args = vec!["-n", &host, "addr", "add", &addr, "dev", "br0"];
            if o.ipv6 {
                args.push("nodad");
            }
            run("ip", &args)?;
            run("ip", &["-n", &host, "link", "set", "br0", "up"])?;
        }
        install_bottleneck(&sw, o)
    }
    /// Starts `homa-perf ARGS` inside namespace `role`; returns its index
    /// and the receivers of its stdout (whole) and its "ready" line.
    pub(super) fn spawn(
        &mut self,
        role: &str,
        args: &[String],
    ) -> anyhow::Result<(usize, mpsc::Receiver<String>, mpsc::Receiver<()>)> {
        let exe = std::env::current_exe()?;
        let ns = self.ns(role);
        let mut child = Command::new("ip")
            .args(["netns", "exec", &ns])
            .arg(exe)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| anyhow::anyhow!("ip netns exec {ns}: {e}"))?;
        let (out_tx, out_rx) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::channel();
        let mut stdout = child.stdout.take().context("no stdout")?;
        thread::spawn(move || {
            let mut s = String::new();
            let _ = stdout.read_to_string(&mut s);
            let _ = out_tx.send(s);
        });
        let stderr = child.stderr.take().context("no stderr")?;
        let label = role.to_string();
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("server ready") {
                    let _ = ready_tx.send(());
                } else {
                    eprintln!("  [{label}] {line}");
                }
            }
        });
        self.children.push(child);
        Ok((self.children.len() - 1, out_rx, ready_rx))
    }

    /// Waits for child `i` to exit, up to `limit`; kills it after that.
    pub(super) fn wait_child(&mut self, i: usize, limit: Instant) -> anyhow::Result<()> {
        loop {
            match self.children[i].try_wait() {
                Ok(Some(_)) => return Ok(()),
                Ok(None) => {}
                Err(e) => return Err(e.into()),
            }
            if Instant::now() >= limit {
                let _ = self.children[i].kill();
                let _ = self.children[i].wait();
                anyhow::bail!("a child process overran its time and was killed");
            }
            thread::sleep(Duration::from_millis(50));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_namespace_names_are_recognised() {
        assert_eq!(is_ours("hp123-sw"), Some(123));
        assert_eq!(is_ours("hp7-c1"), Some(7));
        assert_eq!(is_ours("hp-sw"), None);
        assert_eq!(is_ours("hp12x-sw"), None);
        assert_eq!(is_ours("hp12-"), None);
        assert_eq!(is_ours("other"), None);
    }

    #[test]
    fn addresses_are_in_the_private_testbed_subnet() {
        assert_eq!(kernel_ip(0, false).to_string(), "10.77.0.10");
        assert_eq!(homa_ip(3, false).to_string(), "10.77.0.103");
        assert!(crate::perf::addr::is_private(homa_ip(32, false)));
        assert_eq!(kernel_ip(0, true).to_string(), "fd00:77::a");
        assert_eq!(homa_ip(3, true).to_string(), "fd00:77::67");
        let subnet = crate::perf::addr::Cidr::parse_host("fd00:77::1/64").unwrap();
        assert!(subnet.contains(homa_ip(32, true)));
        assert!(subnet.contains(kernel_ip(32, true)));
    }
}
