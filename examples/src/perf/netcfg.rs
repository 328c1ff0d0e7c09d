//! Setting up the host side: the TAP device (created and configured when it
//! does not exist), a bridge to join it to, and running `ip`/`tc`.

use std::io;
use std::path::Path;
use std::process::Command;

use homa_phy::TapInterface;
use homa_stack::wire::EthernetAddress;

use super::addr::Cidr;

/// Runs a program (`ip`, `tc`) and fails with its stderr if it fails.
pub fn run(program: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{program} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Runs a program and returns its stdout.
pub fn output(program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
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
pub fn interface_mac(name: &str) -> Result<EthernetAddress, String> {
    let path = Path::new("/sys/class/net").join(name).join("address");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    super::addr::parse_mac(text.trim())
}

/// A locally administered MAC derived from an IPv4 address
/// (`02:00:a:b:c:d`), so every homa-stack instance has its own.
pub fn mac_for(ip: std::net::Ipv4Addr) -> EthernetAddress {
    let o = ip.octets();
    EthernetAddress([0x02, 0x00, o[0], o[1], o[2], o[3]])
}

/// Stops the kernel from sending IPv6 chatter (router solicitations,
/// MLD) on an interface we made; best effort.
fn quiet_ipv6(name: &str) {
    let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{name}/disable_ipv6"), "1");
}

/// Creates bridge `name` if it does not exist, with `addr` when given, and
/// brings it up.
pub fn ensure_bridge(name: &str, addr: Option<Cidr>) -> Result<(), String> {
    if !interface_exists(name) {
        run("ip", &["link", "add", name, "type", "bridge"])?;
        quiet_ipv6(name);
        if let Some(a) = addr {
            run("ip", &["addr", "add", &a.to_string(), "dev", name])?;
        }
    }
    run("ip", &["link", "set", name, "up"])
}

/// Opens TAP `name`. When it does not exist yet, it is created and
/// configured: joined to `bridge` (made if missing, with `host_ip`), or else
/// given `host_ip` (default: [`Cidr::default_peer`] of `ip`); its queue
/// toward us is lengthened so that a descheduled reader loses no frames;
/// then it is brought up. An existing TAP is used as it is.
pub fn open_tap(
    name: &str,
    ip: Cidr,
    bridge: Option<&str>,
    host_ip: Option<Cidr>,
) -> Result<TapInterface, String> {
    let existed = interface_exists(name);
    let tap = TapInterface::new(name).map_err(|e| e.to_string())?;
    if existed {
        return Ok(tap);
    }
    quiet_ipv6(name);
    run("ip", &["link", "set", name, "txqueuelen", "10000"])?;
    match bridge {
        Some(br) => {
            ensure_bridge(br, host_ip)?;
            run("ip", &["link", "set", name, "master", br])?;
        }
        None => {
            let h = host_ip.unwrap_or_else(|| ip.default_peer());
            tap.set_ipv4_address(h.addr.octets(), h.prefix)
                .map_err(|e| e.to_string())?;
        }
    }
    tap.set_up(true).map_err(|e: io::Error| e.to_string())?;
    Ok(tap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_are_local_and_follow_the_ip() {
        let m = mac_for(std::net::Ipv4Addr::new(10, 77, 0, 5));
        assert_eq!(m, EthernetAddress([2, 0, 10, 77, 0, 5]));
        assert!(interface_exists("lo"));
        assert!(!interface_exists("../lo"));
        assert_eq!(interface_mac("lo").unwrap(), EthernetAddress([0; 6]));
    }
}
