//! The results as a terminal table and as JSON (serde_json, so names and
//! strings are always escaped correctly). The JSON holds no wall-clock
//! figure, so a seed gives the same bytes every time.

use std::fmt::Write as _;

use serde_json::{json, Value};

use super::baselines::{PFABRIC_BUFFER, PFABRIC_RTO_NS, TCP_RTO_NS};
use super::metrics::Bucket;
use super::run::{ProtoResult, Protocol, SimResult};
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
    let other = match r.pias_other {
        Some(t) => format!(", the other source would give {t:?}"),
        None => String::new(),
    };
    format!(
        "baselines, as the Homa paper's ns-2 scripts set them: pias and dctcp DCTCP senders \
         (initial window 7, g 1/16, ECN marks at {} packets per port, {} us fixed RTO), tcp-mc \
         SACK TCP on drop-tail queues (RFC 6298 RTO, {} us floor), pfabric at line rate (window \
         12, {} us RTO, probes after 5 timeouts in a row; ports of {} packets, fewest bytes left \
         first); host uplinks queue as the switch ports do; every segment acknowledged, SACK, no \
         fast retransmit; each message on an idle connection of its pair or a new one; pias \
         thresholds {:?} bytes sent ({}){other}",
        o.ecn_k,
        TCP_RTO_NS / 1000,
        TCP_RTO_NS / 1000,
        PFABRIC_RTO_NS / 1000,
        PFABRIC_BUFFER,
        r.pias.0,
        r.pias.1.name(),
    )
}

/// A slowdown the headline compares, with its label.
type Metric = (String, fn(&ProtoResult) -> f64);

/// The slowdowns the headline compares: short-message P99, then P50 and
/// P99 of the messages of 1 to 10 packets and of more.
fn metrics(r: &SimResult) -> [Metric; 5] {
    let ten = r.ten_packets;
    [
        (format!("short (<= {} B) P99", r.short_max_bytes), |p| {
            p.short.p99
        }),
        (format!("1-10 packets (<= {ten} B) P50"), |p| {
            p.ranges[0].p50
        }),
        ("1-10 packets P99".into(), |p| p.ranges[0].p99),
        (format!("> 10 packets (> {ten} B) P50"), |p| p.ranges[1].p50),
        ("> 10 packets P99".into(), |p| p.ranges[1].p99),
    ]
}

/// The result of `protocol`, if it ran.
fn result(r: &SimResult, protocol: Protocol) -> Option<&ProtoResult> {
    r.results.iter().find(|p| p.protocol == protocol)
}

/// The baseline with the lowest value of `f` (0 means no message), and
/// that value.
fn best(r: &SimResult, f: fn(&ProtoResult) -> f64) -> Option<(&ProtoResult, f64)> {
    r.results
        .iter()
        .filter(|p| p.protocol.is_baseline() && f(p) > 0.0)
        .map(|p| (p, f(p)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
}

/// Per metric: the best baseline and its value over Homa's, and Homa's
/// over pFabric's (when they ran and measured something).
type Ratios = (Option<(Protocol, f64)>, Option<f64>);

fn ratios(r: &SimResult, f: fn(&ProtoResult) -> f64) -> Ratios {
    let homa = result(r, Protocol::Homa).map(f).filter(|&h| h > 0.0);
    let vs_best = homa.and_then(|h| best(r, f).map(|(p, v)| (p.protocol, v / h)));
    let pfabric = result(r, Protocol::Pfabric).map(f).filter(|&v| v > 0.0);
    let vs_pfabric = homa.zip(pfabric).map(|(h, v)| h / v);
    (vs_best, vs_pfabric)
}

/// The baseline with the lowest short-message P99 slowdown, if one ran.
pub fn best_baseline(r: &SimResult) -> Option<&ProtoResult> {
    best(r, |p| p.short.p99).map(|b| b.0)
}

/// The best baseline's short-message P99 over Homa's, when both ran.
pub fn p99_ratio(r: &SimResult) -> Option<f64> {
    ratios(r, |p| p.short.p99).0.map(|b| b.1)
}

/// The headline: per size range each protocol's slowdown, the best
/// baseline over Homa and Homa over pFabric; then each protocol's drops
/// and ECN marks.
pub fn headline_table(r: &SimResult) -> String {
    let mut s = String::new();
    let _ = write!(s, "slowdown by size range:\n{:>32}", "");
    for p in &r.results {
        let _ = write!(s, " {:>8}", p.protocol.name());
    }
    let _ = writeln!(
        s,
        " | {:>20} | {:>14}",
        "best baseline / homa", "homa / pfabric"
    );
    for (label, f) in metrics(r) {
        let _ = write!(s, "{label:>32}");
        for p in &r.results {
            let _ = write!(s, " {:>8.2}", f(p));
        }
        let (vs_best, vs_pfabric) = ratios(r, f);
        let best = vs_best.map_or("-".into(), |(p, x)| format!("{x:.2}x ({})", p.name()));
        let pf = vs_pfabric.map_or("-".into(), |x| format!("{x:.2}x"));
        let _ = writeln!(s, " | {best:>20} | {pf:>14}");
    }
    let _ = write!(s, "{:>32}", "drops, ECN marks");
    for p in &r.results {
        let _ = write!(s, " {:>8}", format!("{},{}", p.drops, p.ecn_marks));
    }
    s.push('\n');
    if let (Some(best), Some(x)) = (best_baseline(r), p99_ratio(r)) {
        let _ = writeln!(
            s,
            "best baseline for short messages: {}; its P99 slowdown / Homa's = {x:.2}x",
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
    if r.results.iter().any(|p| p.protocol != Protocol::Homa) {
        let _ = writeln!(s, "{}", tcp_line(r));
    }
    let _ = writeln!(
        s,
        "switch buffers: {} (the baselines' host uplinks too; pfabric's: its own)",
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
             while messages arrived, {:.3} carried in all; {} drops, {} ECN marks",
            p.protocol.name(),
            p.sent,
            p.completed,
            p.verified,
            p.failed,
            p.unfinished,
            p.achieved_load,
            p.carried_load,
            p.drops,
            p.ecn_marks
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

/// The traced windows as CSV: protocol, microseconds since the message
/// arrived, window and bytes in flight (bytes), DCTCP's alpha.
pub fn window_csv(r: &SimResult) -> String {
    let mut s = String::from("protocol,time_us,window_bytes,in_flight_bytes,alpha\n");
    for p in &r.results {
        for &(t, w, f, a) in &p.window_trace {
            let _ = writeln!(
                s,
                "{},{:.3},{w},{f},{a:.4}",
                p.protocol.name(),
                t as f64 / 1e3
            );
        }
    }
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
                "one_to_ten_packets": json_bucket(&p.ranges[0]),
                "over_ten_packets": json_bucket(&p.ranges[1]),
                "buckets": p.buckets.iter().map(json_bucket).collect::<Vec<_>>(),
                "counters": counters,
                "drops": p.drops,
                "ecn_marks": p.ecn_marks,
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
        "ten_packets_max_bytes": r.ten_packets,
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
        "baselines": {
            "ecn_k_packets": o.ecn_k,
            "rto_us": TCP_RTO_NS / 1000,
            "pfabric_rto_us": PFABRIC_RTO_NS / 1000,
            "pfabric_buffer_packets": PFABRIC_BUFFER,
            "pias_thresholds": r.pias.0,
            "pias_thresholds_from": r.pias.1.name(),
            "pias_thresholds_other": r.pias_other,
        },
        "switch_buffer_frames": o.switch_buffer,
        "protocols": protocols,
    });
    let ranges: Vec<Value> = metrics(r)
        .into_iter()
        .map(|(label, f)| {
            let (vs_best, vs_pfabric) = ratios(r, f);
            json!({
                "metric": label,
                "best_baseline": vs_best.map(|b| b.0.name()),
                "best_baseline_over_homa": vs_best.map(|b| r4(b.1)),
                "homa_over_pfabric": vs_pfabric.map(r4),
            })
        })
        .collect();
    v["ratios"] = json!(ranges);
    v
}

/// The results as pretty-printed JSON, ending in a newline.
pub fn json(r: &SimResult) -> String {
    let mut s = serde_json::to_string_pretty(&json_value(r)).expect("a Value always serialises");
    s.push('\n');
    s
}
