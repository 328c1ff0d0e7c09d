//! What a client or server run found, as a table for people and as JSON for
//! the testbed (which merges the clients' histograms).

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::stats::{Histogram, SizeBuckets};

/// The result of one client run; its JSON form is the fields' (with
/// `"kind": "client"` and `goodput_mbps` added).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClientReport {
    /// `homa` or `tcp`.
    #[serde(default)]
    pub protocol: String,
    /// Workload name and pacing, for the header line.
    #[serde(default)]
    pub workload: String,
    /// How RPCs were paced, in words.
    #[serde(default)]
    pub pace: String,
    /// Seconds during which RPCs were issued.
    pub duration_s: f64,
    /// Seconds from the start until the last RPC finished or was given up.
    pub elapsed_s: f64,
    /// RPCs that arrived during the run.
    pub issued: u64,
    /// RPCs whose response came back (verified or not).
    pub completed: u64,
    /// RPCs that failed (timeout, unreachable, connection lost, refused).
    pub failed: u64,
    /// Completed RPCs whose response differed from what was owed.
    pub corrupt: u64,
    /// RPCs still outstanding (or never sent) when the drain time ran out.
    pub unfinished: u64,
    /// Request bytes of completed RPCs.
    pub request_bytes: u64,
    /// Response bytes of completed RPCs.
    pub response_bytes: u64,
    /// Round-trip times by size.
    #[serde(with = "buckets_json")]
    pub rtt: SizeBuckets,
    /// User CPU seconds of the process.
    pub cpu_user_s: f64,
    /// System CPU seconds of the process.
    pub cpu_sys_s: f64,
    /// Protocol-specific counters (retransmissions, drops, ...).
    #[serde(default)]
    pub extra: Value,
}

/// [`SizeBuckets`] in its own JSON form.
mod buckets_json {
    use super::SizeBuckets;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(b: &SizeBuckets, s: S) -> Result<S::Ok, S::Error> {
        b.to_json().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SizeBuckets, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        SizeBuckets::from_json(&v).map_err(serde::de::Error::custom)
    }
}

/// `r`'s JSON form with `kind` added.
fn tagged<T: Serialize>(r: &T, kind: &str) -> Value {
    let mut v = serde_json::to_value(r).expect("a report is JSON");
    v["kind"] = json!(kind);
    v
}

impl ClientReport {
    /// Goodput: request bytes of completed RPCs per issuing second, Mbit/s.
    pub fn goodput_mbps(&self) -> f64 {
        if self.duration_s <= 0.0 {
            return 0.0;
        }
        self.request_bytes as f64 * 8.0 / self.duration_s / 1e6
    }

    /// JSON form.
    pub fn to_json(&self) -> Value {
        let mut v = tagged(self, "client");
        v["goodput_mbps"] = json!(self.goodput_mbps());
        v
    }

    /// Reads [`ClientReport::to_json`]'s form back.
    pub fn from_json(v: &Value) -> anyhow::Result<ClientReport> {
        ClientReport::deserialize(v).context("client report")
    }

    /// Adds another client's results (same workload) to these.
    pub fn merge(&mut self, o: &ClientReport) -> anyhow::Result<()> {
        self.rtt.merge(&o.rtt)?;
        self.duration_s = self.duration_s.max(o.duration_s);
        self.elapsed_s = self.elapsed_s.max(o.elapsed_s);
        self.issued += o.issued;
        self.completed += o.completed;
        self.failed += o.failed;
        self.corrupt += o.corrupt;
        self.unfinished += o.unfinished;
        self.request_bytes += o.request_bytes;
        self.response_bytes += o.response_bytes;
        self.cpu_user_s += o.cpu_user_s;
        self.cpu_sys_s += o.cpu_sys_s;
        add_counters(&mut self.extra, &o.extra);
        Ok(())
    }

    /// The table: one row per size bucket, then the totals.
    pub fn text(&self) -> String {
        let mut out = format!(
            "{} client: workload {}, {}, {:.1} s\n",
            self.protocol, self.workload, self.pace, self.duration_s
        );
        out += &rtt_table(&self.rtt);
        out += &format!(
            "issued {} completed {} failed {} corrupt {} unfinished {}\n\
             throughput {:.1} Mbit/s of requests ({} B), {} B of responses; \
             CPU {:.2} s user {:.2} s system\n",
            self.issued,
            self.completed,
            self.failed,
            self.corrupt,
            self.unfinished,
            self.goodput_mbps(),
            self.request_bytes,
            self.response_bytes,
            self.cpu_user_s,
            self.cpu_sys_s,
        );
        out += &extra_text(&self.extra);
        out
    }
}

/// `drops N (reason n, ...)` from a `drop_reasons` object, the reasons
/// that occurred largest first; empty when nothing was dropped.
pub fn drops_text(reasons: &Value) -> String {
    let Some(m) = reasons.as_object() else {
        return String::new();
    };
    let mut v: Vec<(&str, u64)> = m
        .iter()
        .filter_map(|(k, n)| Some((k.as_str(), n.as_u64()?)))
        .filter(|&(_, n)| n > 0)
        .collect();
    if v.is_empty() {
        return String::new();
    }
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let total: u64 = v.iter().map(|&(_, n)| n).sum();
    let list: Vec<String> = v.iter().map(|(k, n)| format!("{k} {n}")).collect();
    format!("drops {total} ({})", list.join(", "))
}

/// The homa-stack counters worth a line, when there are any.
fn extra_text(extra: &Value) -> String {
    let st = &extra["stack"];
    if !st.is_object() {
        return String::new();
    }
    let drops = match drops_text(&st["drop_reasons"]) {
        t if t.is_empty() => "drops 0".to_string(),
        t => t,
    };
    format!(
        "homa-stack: tx frames {} (DATA {} B) rx frames {} retransmissions {} resends asked {} \
         timeouts {} {drops}; loop: woke up to {} us late ({} times over 10 ms), worked up to {} us \
         at a stretch\n",
        st["tx_frames"],
        st["tx_data_bytes"],
        st["rx_frames"],
        st["retransmissions"],
        st["resends_requested"],
        st["timeouts"],
        st["loop"]["max_wake_late_us"],
        st["loop"]["wakes_late_over_10ms"],
        st["loop"]["max_busy_us"],
    )
}

/// Adds the numeric counters of `b` into `a`, field by field, recursively;
/// fields named `max_*` keep the larger value instead.
pub fn add_counters(a: &mut Value, b: &Value) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, bv) in b {
                match a.get_mut(k) {
                    Some(av) if k.starts_with("max_") => {
                        if bv.as_f64() > av.as_f64() {
                            *av = bv.clone();
                        }
                    }
                    Some(av) => add_counters(av, bv),
                    None => {
                        a.insert(k.clone(), bv.clone());
                    }
                }
            }
        }
        (a @ Value::Number(_), Value::Number(b)) => {
            if let (Some(x), Some(y)) = (a.as_u64(), b.as_u64()) {
                *a = json!(x + y);
            } else if let (Some(x), Some(y)) = (a.as_f64(), b.as_f64()) {
                *a = json!(x + y);
            }
        }
        _ => {}
    }
}

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1e3)
}

/// Rows of P50/P99/P99.9 (microseconds) per size bucket and for all.
pub fn rtt_table(rtt: &SizeBuckets) -> String {
    let mut out = format!(
        "{:>12} {:>9} {:>11} {:>11} {:>11}\n",
        "size <= B", "RPCs", "P50 us", "P99 us", "P99.9 us"
    );
    let row = |label: String, h: &Histogram| {
        format!(
            "{:>12} {:>9} {:>11} {:>11} {:>11}\n",
            label,
            h.count(),
            us(h.percentile(0.5)),
            us(h.percentile(0.99)),
            us(h.percentile(0.999))
        )
    };
    for (i, b) in rtt.bounds().iter().enumerate() {
        out += &row(b.to_string(), rtt.bucket(i));
    }
    out += &row("all".into(), rtt.all());
    out
}

/// The result of one server run; its JSON form is the fields' (with
/// `"kind": "server"` added).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerReport {
    /// `homa` or `tcp`.
    #[serde(default)]
    pub protocol: String,
    /// Seconds the server ran.
    pub elapsed_s: f64,
    /// Requests answered.
    pub requests: u64,
    /// Requests whose bytes differed from their pattern.
    pub corrupt: u64,
    /// Requests refused (bad header, reply too long, reply not sent).
    pub failed: u64,
    /// Requests shorter than the header, answered with their own bytes
    /// unchecked (counted in `requests` too). Absent from reports of
    /// servers that predate it.
    #[serde(default)]
    pub headerless: u64,
    /// `failed` by reason ([`super::payload::Refusal::name`]).
    pub failures: std::collections::BTreeMap<String, u64>,
    /// Request bytes received.
    pub request_bytes: u64,
    /// Response bytes sent.
    pub response_bytes: u64,
    /// User CPU seconds.
    pub cpu_user_s: f64,
    /// System CPU seconds.
    pub cpu_sys_s: f64,
    /// Protocol-specific counters.
    #[serde(default)]
    pub extra: Value,
}

impl ServerReport {
    /// JSON form.
    pub fn to_json(&self) -> Value {
        tagged(self, "server")
    }

    /// Reads [`ServerReport::to_json`]'s form back.
    pub fn from_json(v: &Value) -> anyhow::Result<ServerReport> {
        ServerReport::deserialize(v).context("server report")
    }

    /// One line for people (two with homa-stack counters).
    pub fn text(&self) -> String {
        let line = format!(
            "{} server: {:.1} s, {} requests ({} corrupt, {} headerless), {} refused{}, {} B in, \
             {} B out, CPU {:.2} s user {:.2} s system\n",
            self.protocol,
            self.elapsed_s,
            self.requests,
            self.corrupt,
            self.headerless,
            self.failed,
            if self.failures.is_empty() {
                String::new()
            } else {
                let v: Vec<String> = self
                    .failures
                    .iter()
                    .map(|(k, n)| format!("{k} {n}"))
                    .collect();
                format!(" ({})", v.join(", "))
            },
            self.request_bytes,
            self.response_bytes,
            self.cpu_user_s,
            self.cpu_sys_s
        );
        line + &extra_text(&self.extra)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(rtts: &[(u32, u64)]) -> ClientReport {
        let mut rtt = SizeBuckets::new(vec![100, 1000]);
        for &(s, r) in rtts {
            rtt.record(s, r);
        }
        ClientReport {
            protocol: "homa".into(),
            workload: "100,1000".into(),
            pace: "closed loop".into(),
            duration_s: 2.0,
            elapsed_s: 2.1,
            issued: rtts.len() as u64,
            completed: rtts.len() as u64,
            failed: 0,
            corrupt: 0,
            unfinished: 0,
            request_bytes: 250_000,
            response_bytes: 100,
            rtt,
            cpu_user_s: 0.5,
            cpu_sys_s: 0.25,
            extra: json!({"retransmissions": 3, "loop": {"max_busy_us": rtts.len()}}),
        }
    }

    #[test]
    fn client_reports_round_trip_and_merge() {
        let a = report(&[(100, 5_000), (1000, 9_000)]);
        let back = ClientReport::from_json(&a.to_json()).unwrap();
        assert_eq!(back.rtt, a.rtt);
        assert_eq!(
            (back.completed, back.cpu_user_s, back.cpu_sys_s),
            (2, 0.5, 0.25)
        );
        assert_eq!(back.goodput_mbps(), 1.0);
        let mut m = back;
        m.merge(&report(&[(50, 7_000)])).unwrap();
        assert_eq!(m.completed, 3);
        assert_eq!(m.rtt.short().count(), 2);
        assert_eq!(m.extra["retransmissions"], 6);
        assert_eq!(m.extra["loop"]["max_busy_us"], 2); // the larger, not the sum
        assert!(m.text().contains("completed 3 failed 0"));
        let reasons = json!({"duplicate": 3, "unknown_rpc": 9, "checksum": 0});
        assert_eq!(
            drops_text(&reasons),
            "drops 12 (unknown_rpc 9, duplicate 3)"
        );
        assert_eq!(drops_text(&json!({"duplicate": 0})), "");
    }

    #[test]
    fn server_reports_round_trip() {
        let s = ServerReport {
            protocol: "tcp".into(),
            elapsed_s: 1.0,
            requests: 5,
            corrupt: 0,
            failed: 1,
            headerless: 2,
            failures: [("reply_too_long".to_string(), 1)].into_iter().collect(),
            request_bytes: 500,
            response_bytes: 60,
            cpu_user_s: 0.1,
            cpu_sys_s: 0.2,
            extra: json!({}),
        };
        assert_eq!(ServerReport::from_json(&s.to_json()).unwrap(), s);
    }
}
