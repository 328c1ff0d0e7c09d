//! Setting up the host side: the TAP device (created and configured when it
//! does not exist), a bridge to join it to, and running `ip`/`tc`.

use std::net::IpAddr;
use std::path::Path;
use std::process::Command;

use homa_phy::TapInterface;
use homa_stack::wire::EthernetAddress;

use super::addr::Cidr;

/// Runs a program (`ip`, `tc`) and fails with its stderr if it fails.
pub fn run(program: &str, args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| anyhow::anyhow!("{program}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(anyhow::anyhow!(
            "`{program} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Runs a program and returns its stdout.
pub fn output(program: &str, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| anyhow::anyhow!("{program}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(anyhow::anyhow!(
            "`{program} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Whether interface `name` exists in this network namespace.
pub fn interface_exists(name: &str) -> bool {
    !name.contains('/') && Path::new("/sys/class/net").join(name).exists()
}

/// The MAC address of interface `name`.
pub fn interface_mac(name: &str) -> anyhow::Result<EthernetAddress> {
    let path = Path::new("/sys/class/net").join(name).join("address");
    let text =
        std::fs::read_to_string(&path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    super::addr::parse_mac(text.trim())
}

/// A locally administered MAC derived from an IP address (`02:00:a:b:c:d`
/// from IPv4 `a.b.c.d`, `02:06:` and the last four bytes from IPv6), so
/// every homa-stack instance has its own.
pub fn mac_for(ip: IpAddr) -> EthernetAddress {
    match ip {
        IpAddr::V4(a) => {
            let o = a.octets();
            EthernetAddress([0x02, 0x00, o[0], o[1], o[2], o[3]])
        }
        IpAddr::V6(a) => {
            let o = a.octets();
            EthernetAddress([0x02, 0x06, o[12], o[13], o[14], o[15]])
        }
    }
}

/// Stops the kernel from sending IPv6 chatter (router solicitations,
/// MLD) on an interface we made; best effort.
fn quiet_ipv6(name: &str) {
    let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{name}/disable_ipv6"), "1");
}

/// Gives interface `name` the address `a`. An IPv6 one skips duplicate
/// address detection (`nodad`): the subnet is ours, and the kernel would
/// otherwise not use the address for a second or more.
fn add_address(name: &str, a: Cidr) -> anyhow::Result<()> {
    let a = a.to_string();
    let mut args = vec!["addr", "add", &a, "dev", name];
    if a.contains(':') {
        args.push("nodad");
    }
    run("ip", &args)
}

/// A bridge this run created, removed when dropped: unless an interface
/// other than the run's TAP is still on it (another run joined it), which
/// is then left in place with a note.
#[derive(Debug)]
pub struct CreatedBridge {
    name: String,
    tap: String,
}

impl Drop for CreatedBridge {
    fn drop(&mut self) {
        let members = std::fs::read_dir(format!("/sys/class/net/{}/brif", self.name));
        let others: Vec<String> = members
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|m| *m != self.tap)
            .collect();
        let outcome = if others.is_empty() {
            run("ip", &["link", "del", &self.name])
        } else {
            Err(anyhow::anyhow!(
                "bridge {} left in place: {} still on it",
                self.name,
                others.join(", ")
            ))
        };
        if let Err(e) = outcome {
            eprintln!("homa-perf: {e}");
        }
    }
}

/// Creates bridge `name` if it does not exist, with `addr` when given, and
/// brings it up. The kernel's IPv6 is turned off on it unless `addr` is
/// IPv6. Returns whether it was created.
pub fn ensure_bridge(name: &str, addr: Option<Cidr>) -> anyhow::Result<bool> {
    let created = !interface_exists(name);
    if created {
        run("ip", &["link", "add", name, "type", "bridge"])?;
        match addr {
            Some(a) if a.addr.is_ipv6() => {}
            _ => quiet_ipv6(name),
        }
        if let Some(a) = addr {
            add_address(name, a)?;
        }
    }
    run("ip", &["link", "set", name, "up"])?;
    Ok(created)
}

/// Opens TAP `name`. When it does not exist yet, it is created and
/// configured: joined to `bridge` (made if missing, with `host_ip`), or else
/// given `host_ip` (default: [`Cidr::default_peer`] of `ip`); its queue
/// toward us is lengthened so that a descheduled reader loses no frames;
/// then it is brought up. An existing TAP is used as it is. Returns the
/// TAP and, when the bridge was made here, its guard.
pub fn open_tap(
    name: &str,
    ip: Cidr,
    bridge: Option<&str>,
    host_ip: Option<Cidr>,
) -> anyhow::Result<(TapInterface, Option<CreatedBridge>)> {
    let existed = interface_exists(name);
    let tap = TapInterface::new(name)?;
    if existed {
        return Ok((tap, None));
    }
    let host = host_ip.unwrap_or_else(|| ip.default_peer());
    // The kernel's IPv6 stays on only where it has an IPv6 address (and
    // does neighbour discovery with ours).
    if bridge.is_some() || host.addr.is_ipv4() {
        quiet_ipv6(name);
    }
    run("ip", &["link", "set", name, "txqueuelen", "10000"])?;
    let mut made = None;
    match bridge {
        Some(br) => {
            if ensure_bridge(br, host_ip)? {
                made = Some(CreatedBridge {
                    name: br.to_string(),
                    tap: name.to_string(),
                });
            }
            run("ip", &["link", "set", name, "master", br])?;
        }
        None => match host.addr {
            IpAddr::V4(a) => tap.set_ipv4_address(a.octets(), host.prefix)?,
            IpAddr::V6(_) => add_address(name, host)?,
        },
    }
    tap.set_up(true)?;
    Ok((tap, made))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_are_local_and_follow_the_ip() {
        let m = mac_for(std::net::Ipv4Addr::new(10, 77, 0, 5).into());
        assert_eq!(m, EthernetAddress([2, 0, 10, 77, 0, 5]));
        let m = mac_for("fd00::a:4d00:5".parse().unwrap());
        assert_eq!(m, EthernetAddress([2, 6, 0x4d, 0, 0, 5]));
        assert!(interface_exists("lo"));
        assert!(!interface_exists("../lo"));
        assert_eq!(interface_mac("lo").unwrap(), EthernetAddress([0; 6]));
    }
}
