//! An SVG chart of P50 (dashed) and P99 (solid) slowdown against message
//! size, both axes logarithmic, one colour per protocol, like the Homa
//! paper's figures. Each point is a size bucket, drawn at its largest size.

use std::fmt::Write as _;

use super::report::headline;
use super::run::SimResult;

const W: f64 = 820.0;
const H: f64 = 520.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 70.0;

fn colour(name: &str) -> &'static str {
    match name {
        "homa" => "#1f77b4",
        "tcp" => "#d62728",
        _ => "#555555",
    }
}

/// What `--plot` writes, by the file's extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Scalable vector graphics (any name not ending in `.png`).
    Svg,
}

impl Format {
    /// The format for `path`.
    pub fn of_path(path: &str) -> Result<Format, String> {
        if path.to_ascii_lowercase().ends_with(".png") {
            return Err(format!("{path}: PNG output is not built in yet; use .svg"));
        }
        Ok(Format::Svg)
    }
}

/// Writes the chart to `path` in the format its name asks for.
pub fn write(r: &SimResult, path: &str) -> Result<(), String> {
    match Format::of_path(path)? {
        Format::Svg => std::fs::write(path, svg(r)).map_err(|e| format!("{path}: {e}")),
    }
}

/// The chart as an SVG document.
pub fn svg(r: &SimResult) -> String {
    let points = |f: fn(&super::metrics::Bucket) -> f64| {
        r.results
            .iter()
            .map(move |p| {
                let pts: Vec<(f64, f64)> = p
                    .buckets
                    .iter()
                    .filter(|b| b.count > 0)
                    .map(|b| (f64::from(b.max_bytes), f(b)))
                    .collect();
                (p.protocol.name(), pts)
            })
            .collect::<Vec<_>>()
    };
    let p50 = points(|b| b.p50);
    let p99 = points(|b| b.p99);
    let xs = p99.iter().flat_map(|(_, v)| v.iter().map(|p| p.0));
    let (xmin, xmax) = xs.fold((f64::MAX, 1.0f64), |(a, b), x| (a.min(x), b.max(x)));
    let xlo = xmin.min(xmax).max(1.0).log10().floor();
    let xhi = xmax.log10().ceil().max(xlo + 1.0);
    let ymax = p99
        .iter()
        .flat_map(|(_, v)| v.iter().map(|p| p.1))
        .fold(2.0f64, f64::max);
    let yhi = ymax.log10().ceil().max(1.0);
    let px = |x: f64| LEFT + (x.max(1.0).log10() - xlo) / (xhi - xlo) * (W - LEFT - RIGHT);
    let py = |y: f64| H - BOTTOM - y.max(1.0).log10() / yhi * (H - TOP - BOTTOM);

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let title = headline(r).replace('&', "and");
    let _ = writeln!(
        s,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="13">{}</text>"#,
        W / 2.0,
        title.trim_start_matches("homa-sim: ")
    );
    // Grid and ticks.
    let mut e = xlo;
    while e <= xhi + 1e-9 {
        let x = px(10f64.powf(e));
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{}" stroke="#ddd"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
            H - BOTTOM,
            H - BOTTOM + 18.0,
            size_label(10f64.powf(e))
        );
        e += 1.0;
    }
    let mut decade = 1.0;
    while decade <= 10f64.powf(yhi) + 1e-9 {
        for m in [1.0, 2.0, 5.0] {
            let v = decade * m;
            if v > 10f64.powf(yhi) + 1e-9 {
                break;
            }
            let y = py(v);
            let _ = writeln!(
                s,
                r##"<line x1="{LEFT}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{v}</text>"##,
                W - RIGHT,
                LEFT - 6.0,
                y + 4.0
            );
        }
        decade *= 10.0;
    }
    let _ = writeln!(
        s,
        r#"<rect x="{LEFT}" y="{TOP}" width="{}" height="{}" fill="none" stroke="black"/>"#,
        W - LEFT - RIGHT,
        H - TOP - BOTTOM
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">Message size (bytes, log scale)</text>"#,
        (LEFT + W - RIGHT) / 2.0,
        H - 20.0
    );
    let _ = writeln!(
        s,
        r#"<text x="20" y="{0}" text-anchor="middle" transform="rotate(-90 20 {0})">Slowdown (log scale)</text>"#,
        (TOP + H - BOTTOM) / 2.0
    );
    // Curves.
    for (series, dash) in [(&p50, r#" stroke-dasharray="6 4""#), (&p99, "")] {
        for (name, pts) in series.iter() {
            let path: Vec<String> = pts
                .iter()
                .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
                .collect();
            let _ = writeln!(
                s,
                r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="2"{dash}/>"#,
                path.join(" "),
                colour(name)
            );
            for &(x, y) in pts {
                let _ = writeln!(
                    s,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{}"/>"#,
                    px(x),
                    py(y),
                    colour(name)
                );
            }
        }
    }
    // Legend, on white so curves behind it stay readable.
    let _ = writeln!(
        s,
        r##"<rect x="{}" y="{}" width="110" height="{}" fill="white" fill-opacity="0.85" stroke="#999"/>"##,
        LEFT + 6.0,
        TOP + 4.0,
        r.results.len() as f64 * 36.0 + 6.0
    );
    let mut y = TOP + 16.0;
    for p in &r.results {
        for (label, dash) in [("P99", ""), ("P50", r#" stroke-dasharray="6 4""#)] {
            let name = p.protocol.name();
            let _ = writeln!(
                s,
                r#"<line x1="{0}" y1="{y}" x2="{1}" y2="{y}" stroke="{2}" stroke-width="2"{dash}/><text x="{3}" y="{4}">{5} {label}</text>"#,
                LEFT + 12.0,
                LEFT + 42.0,
                colour(name),
                LEFT + 48.0,
                y + 4.0,
                if name == "tcp" { "TCP" } else { "Homa" }
            );
            y += 18.0;
        }
    }
    s.push_str("</svg>\n");
    s
}

fn size_label(v: f64) -> String {
    match v {
        v if v >= 1e6 => format!("{}M", v / 1e6),
        v if v >= 1e3 => format!("{}K", v / 1e3),
        v => format!("{v}"),
    }
}
