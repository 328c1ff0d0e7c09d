//! The bottleneck: the switch's egress toward the server, shaped with htb
//! into strict-priority bands chosen by the IP TOS bits, and its counters.

use anyhow::Context as _;
use serde_json::Value;

use crate::perf::cli::TestbedOpts;
use crate::perf::netcfg::{output, run};

/// htb at the bottleneck rate on the switch's port toward the server,
/// with one leaf per band: strict priority by htb `prio` (each leaf is
/// assured only 0.1% of the rate; everything else is borrowed in
/// priority order), a byte-limited FIFO per band, and u32 filters on
/// the TOS bits 7..5 (IPv4) or traffic-class bits 7..5 (IPv6), which
/// carry the Homa priority.
pub(super) fn install_bottleneck(sw: &str, o: &TestbedOpts) -> anyhow::Result<()> {
    let rate = format!("{}mbit", o.bottleneck_mbps);
    let assured = format!("{}kbit", o.bottleneck_mbps.max(8));
    let lowest = 10 + o.bands - 1;
    let tc = |args: &[&str]| {
        let mut a = vec!["-n", sw];
        a.extend_from_slice(args);
        run("tc", &a)
    };
    tc(&[
        "qdisc",
        "add",
        "dev",
        "p0",
        "root",
        "handle",
        "1:",
        "htb",
        "default",
        &lowest.to_string(),
        "r2q",
        "1000",
    ])?;
    tc(&[
        "class", "add", "dev", "p0", "parent", "1:", "classid", "1:1", "htb", "rate", &rate,
        "ceil", &rate,
    ])?;
    let limit = (u64::from(o.queue_kb) * 1000).to_string();
    for b in 0..o.bands {
        let class = format!("1:{}", 10 + b);
        tc(&[
            "class",
            "add",
            "dev",
            "p0",
            "parent",
            "1:1",
            "classid",
            &class,
            "htb",
            "rate",
            &assured,
            "ceil",
            &rate,
            "prio",
            &b.to_string(),
            "quantum",
            "1514",
        ])?;
        let handle = format!("{}:", 110 + u32::from(b));
        tc(&[
            "qdisc", "add", "dev", "p0", "parent", &class, "handle", &handle, "bfifo", "limit",
            &limit,
        ])?;
    }
    for p in 0u8..8 {
        // Homa priority 7 (highest) goes to band 0 (htb prio 0, served first).
        let band = (u32::from(7 - p) * u32::from(o.bands)) / 8;
        let tos = format!("0x{:02x}", p << 5);
        let flow = format!("1:{}", 10 + band);
        tc(&[
            "filter", "add", "dev", "p0", "parent", "1:", "protocol", "ip", "prio", "1", "u32",
            "match", "ip", "tos", &tos, "0xe0", "flowid", &flow,
        ])?;
        // The same bits of IPv6's traffic class (`--ipv6`).
        tc(&[
            "filter", "add", "dev", "p0", "parent", "1:", "protocol", "ipv6", "prio", "2", "u32",
            "match", "ip6", "priority", &tos, "0xe0", "flowid", &flow,
        ])?;
    }
    Ok(())
}

/// Counters of the bottleneck (root htb and each band's FIFO).
#[derive(Debug, Clone, Default)]
pub(super) struct Bottleneck {
    pub(super) bytes: u64,
    pub(super) packets: u64,
    pub(super) drops: u64,
    pub(super) overlimits: u64,
    pub(super) band_bytes: Vec<u64>,
    pub(super) band_drops: Vec<u64>,
}

impl Bottleneck {
    /// What the counters gained since `before`.
    pub(super) fn since(&self, before: &Bottleneck) -> Bottleneck {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        let each = |a: &[u64], b: &[u64]| a.iter().zip(b).map(|(a, b)| d(*a, *b)).collect();
        Bottleneck {
            bytes: d(self.bytes, before.bytes),
            packets: d(self.packets, before.packets),
            drops: d(self.drops, before.drops),
            overlimits: d(self.overlimits, before.overlimits),
            band_bytes: each(&self.band_bytes, &before.band_bytes),
            band_drops: each(&self.band_drops, &before.band_drops),
        }
    }
}

pub(super) fn read_bottleneck(sw: &str, bands: u8) -> anyhow::Result<Bottleneck> {
    let text = output("tc", &["-n", sw, "-s", "-j", "qdisc", "show", "dev", "p0"])?;
    let v: Value = serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("tc -j: {e}"))?;
    let mut b = Bottleneck {
        band_bytes: vec![0; bands as usize],
        band_drops: vec![0; bands as usize],
        ..Bottleneck::default()
    };
    for q in v.as_array().context("tc -j: not a list")? {
        let get = |k: &str| q[k].as_u64().unwrap_or(0);
        match q["kind"].as_str() {
            Some("htb") => {
                b.bytes = get("bytes");
                b.packets = get("packets");
                b.overlimits = get("overlimits");
            }
            Some("bfifo") => {
                let h = q["handle"].as_str().unwrap_or_default();
                if let Some(i) = h
                    .trim_end_matches(':')
                    .parse::<usize>()
                    .ok()
                    .and_then(|x| x.checked_sub(110))
                {
                    if i < b.band_bytes.len() {
                        b.band_bytes[i] = get("bytes");
                        b.band_drops[i] = get("drops");
                    }
                }
                b.drops += get("drops");
            }
            _ => {}
        }
    }
    Ok(b)
}

/// Frames the kernel dropped on their way to the homa-perf process of host
/// namespace `ns`: the TAP's transmit queue (kernel to reader) overflows
/// when the process falls behind. Not the bottleneck's drops, but losses
/// all the same, which the receivers recover with RESENDs.
pub(super) fn tap_queue_drops(ns: &str) -> anyhow::Result<u64> {
    let text = output("ip", &["-n", ns, "-j", "-s", "link", "show", "tap0"])?;
    let v: Value = serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("ip -j: {e}"))?;
    v[0]["stats64"]["tx"]["dropped"]
        .as_u64()
        .with_context(|| format!("ip -j -s link show tap0 in {ns}: no tx dropped count"))
}
