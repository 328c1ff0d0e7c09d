//! How much memory a run may take, so that a program refuses options it
//! cannot run (with its estimate in the message) instead of aborting when
//! an allocation fails halfway.

/// Bytes this process can still allocate: the smaller of the memory the
/// kernel reports available (`MemAvailable`) and what the address-space
/// limit (`ulimit -v`) leaves. `None` when neither can be read.
pub fn available() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok();
    let free = meminfo
        .as_deref()
        .and_then(|m| field_kib(m, "MemAvailable:"));
    let limits = std::fs::read_to_string("/proc/self/limits").ok();
    let status = std::fs::read_to_string("/proc/self/status").ok();
    let room = limits
        .as_deref()
        .and_then(address_space_limit)
        .map(|limit| {
            let used = status.as_deref().and_then(|s| field_kib(s, "VmSize:"));
            limit.saturating_sub(used.unwrap_or(0))
        });
    match (free, room) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// `Ok` when `estimate` bytes fit in [`available`] memory (or it is
/// unknown); otherwise why not, naming `what` needs them.
pub fn check(estimate: u64, what: &str) -> Result<(), String> {
    match available() {
        Some(room) if estimate > room => Err(format!(
            "{what} needs about {} of memory, and {} is available",
            human(estimate),
            human(room)
        )),
        _ => Ok(()),
    }
}

/// `2.3 GB`, `512 MB`, `64 kB`: a byte count for a message.
pub fn human(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1e9 {
        format!("{:.1} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.0} MB", b / 1e6)
    } else {
        format!("{:.0} kB", b / 1e3)
    }
}

/// A `Name:   N kB` line of /proc/meminfo or /proc/self/status, in bytes.
fn field_kib(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    let kib: u64 = line[name.len()..].split_whitespace().next()?.parse().ok()?;
    Some(kib * 1024)
}

/// The soft "Max address space" of /proc/self/limits, in bytes.
fn address_space_limit(limits: &str) -> Option<u64> {
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max address space"))?;
    line["Max address space".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_fields_are_read_in_bytes() {
        assert_eq!(
            field_kib(
                "MemTotal: 10 kB\nMemAvailable:   2048 kB\n",
                "MemAvailable:"
            ),
            Some(2 << 20)
        );
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max address space         3000000000           unlimited            bytes\n";
        assert_eq!(address_space_limit(limits), Some(3_000_000_000));
        let unlimited =
            "Max address space         unlimited            unlimited            bytes\n";
        assert_eq!(address_space_limit(unlimited), None);
    }

    #[test]
    fn an_estimate_beyond_any_machine_is_refused_with_both_figures() {
        let e = check(u64::MAX / 2, "this run").unwrap_err();
        assert!(e.starts_with("this run needs about"), "{e}");
        assert!(e.contains("GB of memory, and"), "{e}");
        assert!(check(1, "one byte").is_ok());
        assert_eq!(human(2_300_000_000), "2.3 GB");
    }
}
