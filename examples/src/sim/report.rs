//! The results as a terminal table and as JSON (written by hand: the shape
//! is small and fixed). The JSON holds no wall-clock figure, so a seed gives
//! the same bytes every time.

use std::fmt::Write as _;

use super::metrics::Bucket;
use super::run::{ProtoResult, SimResult};
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
        "homa: {mode}, unscheduled bytes {}, {} scheduled levels, overcommit {}, cutoffs {:?}, \
         NIC queue limit {} ns, {} style",
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

/// The ratio of TCP's short-message P99 to Homa's, when both ran.
pub fn p99_ratio(r: &SimResult) -> Option<f64> {
    let get = |name: &str| {
        r.results
            .iter()
            .find(|p| p.protocol.name() == name)
            .map(|p| p.short.p99)
    };
    match (get("homa"), get("tcp")) {
        (Some(h), Some(t)) if h > 0.0 => Some(t / h),
        _ => None,
    }
}

/// The terminal table, with run speed.
pub fn table(r: &SimResult) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}", headline(r));
    if r.results.iter().any(|p| p.protocol.name() == "homa") {
        let _ = writeln!(s, "{}", homa_line(r));
    }
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
            "{:>4}: sent {} completed {} verified {} failed {} (unfinished {}); link load {:.3} \
             while messages arrived, {:.3} carried in all",
            p.protocol.name(),
            p.sent,
            p.completed,
            p.verified,
            p.failed,
            p.unfinished,
            p.achieved_load,
            p.carried_load
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
    if let Some(x) = p99_ratio(r) {
        let _ = writeln!(s, "\nshort-message P99 slowdown: TCP / Homa = {x:.1}x");
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

fn json_bucket(b: &Bucket) -> String {
    format!(
        "{{\"max_bytes\": {}, \"count\": {}, \"p50\": {:.4}, \"p99\": {:.4}}}",
        b.max_bytes, b.count, b.p50, b.p99
    )
}

/// The results as JSON.
pub fn json(r: &SimResult) -> String {
    let o = &r.options;
    let mut s = String::from("{\n");
    let _ = writeln!(s, "  \"topology\": \"{}\",", o.topology_name);
    let _ = writeln!(s, "  \"hosts\": {},", r.hosts);
    let _ = writeln!(
        s,
        "  \"workload\": \"{}\",",
        r.workload.name.replace('"', "'")
    );
    let _ = writeln!(s, "  \"size_cap_bytes\": {MAX_MESSAGE},");
    let _ = writeln!(s, "  \"sizes_capped\": {},", r.capped);
    let _ = writeln!(s, "  \"load\": {},", o.load);
    let _ = writeln!(s, "  \"duration_us\": {},", o.duration_ns / 1000);
    let _ = writeln!(s, "  \"seed\": {},", o.seed);
    let _ = writeln!(s, "  \"messages\": {},", r.messages);
    let _ = writeln!(s, "  \"offered_load\": {:.4},", r.offered_load);
    let _ = writeln!(s, "  \"short_max_bytes\": {},", r.short_max_bytes);
    let h = &r.homa;
    let _ = writeln!(
        s,
        "  \"homa_config\": {{\"one_way\": {}, \"response_bytes\": {}, \"unsched_bytes\": {}, \
         \"sched_levels\": {}, \"overcommit\": {}, \"unsched_cutoffs\": {:?}, \"nic_backlog_ns\": {}, \"style\": \"{}\"}},",
        o.response_bytes == 0,
        o.response_bytes,
        h.unsched_bytes,
        h.sched_levels,
        h.overcommit,
        h.cutoffs,
        h.nic_backlog_ns,
        h.style.name()
    );
    if let Some(x) = p99_ratio(r) {
        let _ = writeln!(s, "  \"tcp_over_homa_short_p99\": {x:.4},");
    }
    s.push_str("  \"protocols\": {");
    for (i, p) in r.results.iter().enumerate() {
        s.push_str(if i == 0 { "\n" } else { ",\n" });
        let _ = writeln!(s, "    \"{}\": {{", p.protocol.name());
        let _ = writeln!(s, "      \"sent\": {},", p.sent);
        let _ = writeln!(s, "      \"completed\": {},", p.completed);
        let _ = writeln!(s, "      \"verified\": {},", p.verified);
        let _ = writeln!(s, "      \"failed\": {},", p.failed);
        let _ = writeln!(s, "      \"unfinished\": {},", p.unfinished);
        let _ = writeln!(s, "      \"achieved_load\": {:.4},", p.achieved_load);
        let _ = writeln!(s, "      \"carried_load\": {:.4},", p.carried_load);
        let _ = writeln!(s, "      \"short_count\": {},", p.short.count);
        let _ = writeln!(s, "      \"short_p50\": {:.4},", p.short.p50);
        let _ = writeln!(s, "      \"short_p99\": {:.4},", p.short.p99);
        let buckets: Vec<String> = p
            .buckets
            .iter()
            .map(|b| format!("        {}", json_bucket(b)))
            .collect();
        let _ = writeln!(s, "      \"buckets\": [\n{}\n      ],", buckets.join(",\n"));
        let counters: Vec<String> = p
            .counters
            .iter()
            .map(|(k, v)| format!("\"{k}\": {v}"))
            .collect();
        let _ = writeln!(s, "      \"counters\": {{{}}},", counters.join(", "));
        let _ = writeln!(s, "      \"simulated_us\": {}", p.sim_ns / 1000);
        s.push_str("    }");
    }
    s.push_str("\n  }\n}\n");
    s
}
