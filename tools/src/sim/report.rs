//! The results as a terminal table and as JSON (serde_json, so names and
//! strings are always escaped correctly). The JSON holds no wall-clock
//! figure, so a seed gives the same bytes every time.

use std::fmt::Write as _;

use serde_json::{json, Value};

use super::metrics::Bucket;
use super::run::{ProtoResult, SimResult};
use super::tcp_device::MIN_RTO_NS;
use super::workload::MAX_MESSAGE;

/// The one-line description of the run.
pub fn headline(r: &SimResult) -> String {
    let o = &r.options;
    let cap = if r.capped {
        format!(" (sizes above {MAX_MESSAGE} bytes sent as {MAX_MESSAGE})")
    } else {
        String::new()
    };
    format!(
        "homa-sim: {} ({} hosts), workload {}{cap}, load {:.2}, {} us of arrivals, seed {}",
        o.topology_name,
        r.hosts,
        r.workload.name,
        o.load,
        o.duration_ns / 1000,
        o.seed
    )
}

fn homa_line(r: &SimResult) -> String {
    let h = &r.homa;
    let mode = match r.options.response_bytes {
        0 => "one-way messages".to_string(),
        n => format!("RPCs with {n}-byte responses"),
    };
    format!(
        "homa: {mode} over {}, unscheduled bytes {}, {} scheduled levels, overcommit {}, \
         cutoffs {:?}, NIC queue limit {} ns, {} style",
        if h.ipv6 { "IPv6" } else { "IPv4" },
        h.unsched_bytes,
        h.sched_levels,
        h.overcommit,
        h.cutoffs,
        h.nic_backlog_ns,
        h.style.name()
    )
}

fn cell(b: &Bucket) -> String {
    if b.count == 0 {
        format!("{:>8} {:>8} {:>8}", 0, "-", "-")
    } else {
        format!("{:>8} {:>8.2} {:>8.2}", b.count, b.p50, b.p99)
    }
}

fn tcp_line(r: &SimResult) -> String {
    let o = &r.options;
    format!(
        "tcp: smoltcp 0.13, socket buffers {} KiB for tcp-1 and {} KiB for tcp-mc and pias \
         (the window in flight: smoltcp's congestion control does not bound it), Nagle off, \
         {}, minimum RTO {} us (smoltcp's fixed 1 s on its faster clock); tcp-1 one connection per pair (head-of-line blocking); tcp-mc and pias pools \
         of {} connections per pair; every connection open before traffic; pias thresholds \
         {:?} bytes sent",
        o.tcp1_buffer >> 10,
        o.tcp_buffer >> 10,
        match o.tcp_ack_delay_ns {
            0 => "every segment acknowledged at once".to_string(),
            ns => format!("delayed ACKs up to {} us", ns / 1000),
        },
        MIN_RTO_NS / 1000,
        o.tcp_conns,
        r.pias_thresholds
    )
}

/// The baseline with the lowest short-message P99 slowdown, if one ran.
pub fn best_baseline(r: &SimResult) -> Option<&ProtoResult> {
    r.results
        .iter()
        .filter(|p| p.protocol.is_baseline() && p.short.count > 0)
        .min_by(|a, b| a.short.p99.total_cmp(&b.short.p99))
}

/// The best baseline's short-message P99 over Homa's, when both ran.
pub fn p99_ratio(r: &SimResult) -> Option<f64> {
    let homa = r
        .results
        .iter()
        .find(|p| p.protocol.name() == "homa" && p.short.count > 0)?;
    let best = best_baseline(r)?;
    (homa.short.p99 > 0.0).then(|| best.short.p99 / homa.short.p99)
}

/// The headline: each protocol's short-message P99 slowdown, its ratio to
/// Homa's, and its switch drops; then Homa against the best baseline.
pub fn headline_table(r: &SimResult) -> String {
    let mut s = String::new();
    let homa = r
        .results
        .iter()
        .find(|p| p.protocol.name() == "homa")
        .map(|p| p.short.p99);
    let _ = writeln!(
        s,
        "short messages (<= {} bytes), P99 slowdown:\n{:>8} {:>10} {:>8} {:>12}",
        r.short_max_bytes, "protocol", "P99", "/ homa", "switch drops"
    );
    for p in &r.results {
        let ratio = match homa {
            Some(h) if h > 0.0 => format!("{:.1}", p.short.p99 / h),
            _ => "-".into(),
        };
        let _ = writeln!(
            s,
            "{:>8} {:>10.2} {:>8} {:>12}",
            p.protocol.name(),
            p.short.p99,
            ratio,
            p.drops
        );
    }
    if let (Some(best), Some(x)) = (best_baseline(r), p99_ratio(r)) {
        let _ = writeln!(
            s,
            "best baseline: {}; its short-message P99 slowdown / Homa's = {x:.1}x",
            best.protocol.name()
        );
    }
    s
}

/// The terminal table, with run speed.
pub fn table(r: &SimResult) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}", headline(r));
    if r.results.iter().any(|p| p.protocol.name() == "homa") {
        let _ = writeln!(s, "{}", homa_line(r));
    }
    if r.results.iter().any(|p| p.protocol.is_baseline()) {
        let _ = writeln!(s, "{}", tcp_line(r));
    }
    let _ = writeln!(
        s,
        "switch buffers: {}",
        match r.options.switch_buffer {
            Some(n) => format!("{n} frames per egress port, drop-tail"),
            None => "unlimited".into(),
        }
    );
    let _ = writeln!(
        s,
        "{} messages, offered load {:.3} (wire bytes); slowdown = one-way time / ideal time, \
         messages arriving in the first {:.0}% not counted",
        r.messages,
        r.offered_load,
        r.options.warmup * 100.0
    );
    let _ = write!(s, "\n{:>12}", "size <=");
    for p in &r.results {
        let _ = write!(s, " | {:^26}", p.protocol.name());
    }
    let _ = write!(s, "\n{:>12}", "bytes");
    for _ in &r.results {
        let _ = write!(s, " | {:>8} {:>8} {:>8}", "count", "P50", "P99");
    }
    s.push('\n');
    let rows = r.results.first().map_or(0, |p| p.buckets.len());
    for i in 0..rows {
        let _ = write!(s, "{:>12}", r.results[0].buckets[i].max_bytes);
        for p in &r.results {
            let _ = write!(s, " | {}", cell(&p.buckets[i]));
        }
        s.push('\n');
    }
    let _ = write!(s, "{:>12}", format!("short<={}", r.short_max_bytes));
    for p in &r.results {
        let _ = write!(s, " | {}", cell(&p.short));
    }
    s.push_str("\n\n");
    for p in &r.results {
        let _ = writeln!(
            s,
            "{:>6}: sent {} completed {} verified {} failed {} (unfinished {}); link load {:.3} \
             while messages arrived, {:.3} carried in all; {} switch drops",
            p.protocol.name(),
            p.sent,
            p.completed,
            p.verified,
            p.failed,
            p.unfinished,
            p.achieved_load,
            p.carried_load,
            p.drops
        );
        let counters: Vec<String> = p
            .counters
            .iter()
            .filter(|(_, v)| *v != 0)
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        if !counters.is_empty() {
            let _ = writeln!(s, "      {}", counters.join(", "));
        }
        let _ = writeln!(s, "      {}", speed(p));
    }
    s.push('\n');
    s.push_str(&headline_table(r));
    s
}

/// Wall time and simulation speed of one protocol's run.
pub fn speed(p: &ProtoResult) -> String {
    let wall = p.wall_s.max(1e-9);
    format!(
        "wall {:.1} s: {:.0} simulated us per wall s, {:.2} M packet hops per wall s",
        p.wall_s,
        p.sim_ns as f64 / 1e3 / wall,
        p.hops as f64 / 1e6 / wall
    )
}

/// Rounds to 4 decimals: slowdowns and loads need no more, and the JSON
/// stays readable.
fn r4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

fn json_bucket(b: &Bucket) -> Value {
    json!({
        "max_bytes": b.max_bytes,
        "count": b.count,
        "p50": r4(b.p50),
        "p99": r4(b.p99),
    })
}

/// The results as a JSON value (keys in alphabetical order).
pub fn json_value(r: &SimResult) -> Value {
    let o = &r.options;
    let h = &r.homa;
    let mut protocols = serde_json::Map::new();
    for p in &r.results {
        let counters: serde_json::Map<String, Value> = p
            .counters
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        protocols.insert(
            p.protocol.name().to_string(),
            json!({
                "sent": p.sent,
                "completed": p.completed,
                "verified": p.verified,
                "failed": p.failed,
                "unfinished": p.unfinished,
                "achieved_load": r4(p.achieved_load),
                "carried_load": r4(p.carried_load),
                "short_count": p.short.count,
                "short_p50": r4(p.short.p50),
                "short_p99": r4(p.short.p99),
                "buckets": p.buckets.iter().map(json_bucket).collect::<Vec<_>>(),
                "counters": counters,
                "switch_drops": p.drops,
                "simulated_us": p.sim_ns / 1000,
            }),
        );
    }
    let mut v = json!({
        "topology": o.topology_name,
        "hosts": r.hosts,
        "workload": r.workload.name,
        "size_cap_bytes": MAX_MESSAGE,
        "sizes_capped": r.capped,
        "load": o.load,
        "duration_us": o.duration_ns / 1000,
        "seed": o.seed,
        "messages": r.messages,
        "offered_load": r4(r.offered_load),
        "short_max_bytes": r.short_max_bytes,
        "homa_config": {
            "one_way": o.response_bytes == 0,
            "response_bytes": o.response_bytes,
            "unsched_bytes": h.unsched_bytes,
            "sched_levels": h.sched_levels,
            "overcommit": h.overcommit,
            "unsched_cutoffs": h.cutoffs,
            "nic_backlog_ns": h.nic_backlog_ns,
            "style": h.style.name(),
            "ipv6": h.ipv6,
        },
        "tcp_config": {
            "buffer_bytes": o.tcp_buffer,
            "tcp_1_buffer_bytes": o.tcp1_buffer,
            "max_connections_per_pair": o.tcp_conns,
            "min_rto_us": MIN_RTO_NS / 1000,
            "ack_delay_us": o.tcp_ack_delay_ns / 1000,
            "pias_thresholds": r.pias_thresholds,
        },
        "switch_buffer_frames": o.switch_buffer,
        "protocols": protocols,
    });
    if let (Some(best), Some(x)) = (best_baseline(r), p99_ratio(r)) {
        v["best_baseline"] = json!(best.protocol.name());
        v["best_baseline_over_homa_short_p99"] = json!(r4(x));
    }
    v
}

/// The results as pretty-printed JSON, ending in a newline.
pub fn json(r: &SimResult) -> String {
    let mut s = serde_json::to_string_pretty(&json_value(r)).expect("a Value always serialises");
    s.push('\n');
    s
}
