//! The chart of `--plot`, drawn as the Homa paper draws its slowdown
//! figures: the x axis is spaced by the cumulative share of messages (each
//! size bucket as wide as the share of messages in it, labelled with the
//! sizes at its edges), the y axis is the slowdown on a log scale, with P50
//! (dashed) and P99 (solid) per protocol, a reference line at slowdown 1,
//! the short-message bucket shaded, a title naming workload, load and
//! topology, and the legend to the right of the plot, clear of the data.
//! Written as SVG; PNG is the same SVG rasterised by resvg, with the
//! `png` feature of homa-tools (off by default: resvg and its font stack
//! are most of homa-sim's build).

use std::fmt::Write as _;

use super::metrics::Bucket;
use super::run::SimResult;

const W: f64 = 900.0;
const H: f64 = 520.0;
const LEFT: f64 = 80.0;
/// Room right of the plot for the legend.
const RIGHT: f64 = 170.0;
const TOP: f64 = 70.0;
const BOTTOM: f64 = 75.0;
/// Lowest slowdown on the axis: below 1, so the reference line at 1 is
/// not hidden by the axis.
const Y_MIN: f64 = 0.5;

/// Fonts asked for, in order (DejaVu is what Debian installs by default).
const FONTS: &str = "DejaVu Sans, Liberation Sans, Arial, Helvetica, sans-serif";

fn colour(name: &str) -> &'static str {
    match name {
        "homa" => "#1f77b4",
        "tcp-1" => "#d62728",
        "tcp-mc" => "#ff7f0e",
        "pias" => "#2ca02c",
        _ => "#555555",
    }
}

fn display_name(name: &str) -> &str {
    match name {
        "homa" => "Homa",
        "tcp-1" => "TCP, 1 connection",
        "tcp-mc" => "TCP, connection pool",
        "pias" => "PIAS",
        n => n,
    }
}

/// What `--plot` writes, by the file's extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Scalable vector graphics (`.svg`).
    Svg,
    /// The SVG rasterised at twice its size (`.png`).
    Png,
}

impl Format {
    /// The format for `path`, or why none: an extension other than `.svg`
    /// or `.png`, or `.png` in a build without the `png` feature.
    pub fn of_path(path: &str) -> Result<Format, String> {
        let lower = path.to_ascii_lowercase();
        if lower.ends_with(".svg") {
            Ok(Format::Svg)
        } else if lower.ends_with(".png") {
            if cfg!(feature = "png") {
                Ok(Format::Png)
            } else {
                Err(format!(
                    "{path}: this homa-sim writes SVG only; PNG needs the png feature \
                     (cargo build --release -p homa-tools --features png)"
                ))
            }
        } else {
            Err(format!(
                "{path}: unknown chart format; --plot writes FILE.svg or FILE.png"
            ))
        }
    }
}

/// Writes the chart to `path` in the format its name asks for.
pub fn write(r: &SimResult, path: &str) -> Result<(), String> {
    let svg = svg(r);
    match Format::of_path(path)? {
        Format::Svg => std::fs::write(path, svg).map_err(|e| format!("{path}: {e}")),
        Format::Png => {
            let png = png(&svg)?;
            std::fs::write(path, png).map_err(|e| format!("{path}: {e}"))
        }
    }
}

/// Without the `png` feature there is no rasteriser ([`Format::of_path`]
/// refuses `.png` first).
#[cfg(not(feature = "png"))]
pub fn png(_svg: &str) -> Result<Vec<u8>, String> {
    Err("PNG needs homa-tools built with the png feature".into())
}

/// Rasterises `svg` to PNG bytes at twice its size, with the system's
/// fonts (text is left out, with a warning, when there are none).
#[cfg(feature = "png")]
pub fn png(svg: &str) -> Result<Vec<u8>, String> {
    use resvg::{tiny_skia, usvg};
    let mut opt = usvg::Options::default();
    let db = opt.fontdb_mut();
    db.load_system_fonts();
    if db.is_empty() {
        eprintln!(
            "homa-sim: no fonts found on this system, so the PNG has no text \
             (Debian: apt-get install fonts-dejavu-core)"
        );
    }
    let tree = usvg::Tree::from_str(svg, &opt).map_err(|e| format!("the chart's SVG: {e}"))?;
    let size = tree.size().to_int_size();
    let scale = 2;
    let mut pixmap = tiny_skia::Pixmap::new(size.width() * scale, size.height() * scale)
        .ok_or("the chart has no size")?;
    pixmap.fill(tiny_skia::Color::WHITE);
    resvg::render(
        &tree,
        tiny_skia::Transform::from_scale(scale as f32, scale as f32),
        &mut pixmap.as_mut(),
    );
    pixmap.encode_png().map_err(|e| format!("PNG: {e}"))
}

/// `315`, `1.4K`, `10K`, `1M`: a size for an axis label.
fn size_label(v: u32) -> String {
    let (x, unit) = match v {
        v if v >= 1_000_000 => (f64::from(v) / 1e6, "M"),
        v if v >= 1_000 => (f64::from(v) / 1e3, "K"),
        v => return v.to_string(),
    };
    let t = if x >= 100.0 || (x - x.round()).abs() < 0.05 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    };
    format!("{t}{unit}")
}

/// The x extent of every bucket: (share of messages at or below its lower
/// edge, at or below its upper edge), from the workload as sent.
fn spans(r: &SimResult, buckets: &[Bucket]) -> Vec<(f64, f64)> {
    let w = &r.workload;
    let share = |size: u32| {
        let i = w.sizes.partition_point(|&s| s < size);
        w.cdf.get(i).copied().unwrap_or(1.0)
    };
    let mut lo = 0.0;
    buckets
        .iter()
        .map(|b| {
            let hi = share(b.max_bytes).max(lo);
            let s = (lo, hi);
            lo = hi;
            s
        })
        .collect()
}

/// The chart as an SVG document.
pub fn svg(r: &SimResult) -> String {
    let layout: &[Bucket] = r.results.first().map_or(&[], |p| &p.buckets[..]);
    let spans = spans(r, layout);
    let ymax = r
        .results
        .iter()
        .flat_map(|p| p.buckets.iter().filter(|b| b.count > 0).map(|b| b.p99))
        .fold(2.0f64, f64::max);
    let (ylo, yhi) = (Y_MIN.log10(), ymax.log10().ceil().max(1.0));
    let (x0, x1, y0, y1) = (LEFT, W - RIGHT, TOP, H - BOTTOM);
    let px = |share: f64| x0 + share.clamp(0.0, 1.0) * (x1 - x0);
    let py = |v: f64| y1 - (v.max(Y_MIN).log10() - ylo) / (yhi - ylo) * (y1 - y0);

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="{FONTS}" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let o = &r.options;
    let name = &r.workload.name;
    let name = if name.len() == 2 && name.starts_with('w') {
        name.to_uppercase()
    } else {
        name.clone()
    };
    let title = format!(
        "{name} at load {:.2}, {} topology ({} hosts): message slowdown",
        o.load, o.topology_name, r.hosts
    );
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="24" text-anchor="middle" font-size="15" font-weight="bold">{}</text>"#,
        (x0 + x1) / 2.0,
        xml(&title)
    );
    let sub = format!(
        "{} messages, {} us of arrivals, seed {}{}",
        r.messages,
        o.duration_ns / 1000,
        o.seed,
        if o.response_bytes > 0 {
            format!(", RPCs with {}-byte responses", o.response_bytes)
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="42" text-anchor="middle" fill="#444">{}</text>"##,
        (x0 + x1) / 2.0,
        xml(&sub)
    );
    // The short-message bucket, shaded and named.
    let short_hi = {
        let w = &r.workload;
        let i = w.sizes.partition_point(|&x| x < r.short_max_bytes);
        w.cdf.get(i).copied().unwrap_or(0.0)
    };
    let _ = writeln!(
        s,
        r##"<rect x="{x0:.1}" y="{y0:.1}" width="{:.1}" height="{:.1}" fill="#f2e8c9"/>"##,
        px(short_hi) - x0,
        y1 - y0
    );
    // Named above the plot, where no data can cover it.
    let _ = writeln!(
        s,
        r##"<rect x="{x0:.1}" y="{:.1}" width="10" height="10" fill="#f2e8c9" stroke="#c9b57a"/><text x="{:.1}" y="{:.1}" fill="#7a5c00">short messages (&lt;= {} B, {:.0}% of messages)</text>"##,
        y0 - 15.0,
        x0 + 14.0,
        y0 - 6.0,
        r.short_max_bytes,
        short_hi * 100.0
    );
    // Horizontal grid and slowdown labels: 1, 2, 5 per decade.
    let mut decade = 1.0f64;
    while decade.log10() <= yhi + 1e-9 {
        for m in [1.0f64, 2.0, 5.0] {
            let v = decade * m;
            if v.log10() > yhi + 1e-9 {
                break;
            }
            let y = py(v);
            let _ = writeln!(
                s,
                r##"<line x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="#e4e4e4"/><text x="{:.1}" y="{:.1}" text-anchor="end">{v}</text>"##,
                x0 - 6.0,
                y + 4.0
            );
        }
        decade *= 10.0;
    }
    // Bucket edges: a tick and the size at each, spaced by share.
    let xs: Vec<f64> = spans.iter().map(|&(_, hi)| px(hi)).collect();
    let labelled = label_edges(&xs, 34.0);
    for (i, b) in layout.iter().enumerate() {
        let x = xs[i];
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{y0}" x2="{x:.1}" y2="{:.1}" stroke="#e4e4e4"/>"##,
            y1 + 5.0
        );
        if labelled[i] {
            let _ = writeln!(
                s,
                r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                y1 + 18.0,
                size_label(b.max_bytes)
            );
        }
    }
    // The reference: a message as fast as on an empty fabric.
    let y = py(1.0);
    let _ = writeln!(
        s,
        r##"<line x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="#333" stroke-width="1.2" stroke-dasharray="2 3"/><text x="{:.1}" y="{:.1}" text-anchor="end" fill="#333">slowdown 1 (ideal)</text>"##,
        x1 - 4.0,
        y + 15.0
    );
    let _ = writeln!(
        s,
        r#"<rect x="{x0}" y="{y0}" width="{:.1}" height="{:.1}" fill="none" stroke="black"/>"#,
        x1 - x0,
        y1 - y0
    );
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">Message size (bytes): bucket edges, spaced by the share of messages</text>"#,
        (x0 + x1) / 2.0,
        H - 38.0
    );
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#444">0% to 100% of messages, smallest first</text>"##,
        (x0 + x1) / 2.0,
        H - 20.0
    );
    let _ = writeln!(
        s,
        r#"<text x="22" y="{0:.1}" text-anchor="middle" transform="rotate(-90 22 {0:.1})">Slowdown (log scale)</text>"#,
        (y0 + y1) / 2.0
    );
    // Curves: each bucket at the middle of its span.
    for p in &r.results {
        let name = p.protocol.name();
        for (dash, pick) in [
            (
                r#" stroke-dasharray="7 4""#,
                (|b: &Bucket| b.p50) as fn(&Bucket) -> f64,
            ),
            ("", |b: &Bucket| b.p99),
        ] {
            let pts: Vec<(f64, f64)> = p
                .buckets
                .iter()
                .zip(&spans)
                .filter(|(b, _)| b.count > 0)
                .map(|(b, &(lo, hi))| (px((lo + hi) / 2.0), py(pick(b))))
                .collect();
            let path: Vec<String> = pts.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
            let _ = writeln!(
                s,
                r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="2"{dash}/>"#,
                path.join(" "),
                colour(name)
            );
            for (x, y) in pts {
                let _ = writeln!(
                    s,
                    r#"<circle cx="{x:.1}" cy="{y:.1}" r="3" fill="{}"/>"#,
                    colour(name)
                );
            }
        }
    }
    // Legend, right of the plot.
    let lx = x1 + 18.0;
    let mut ly = y0 + 12.0;
    for p in &r.results {
        let name = p.protocol.name();
        for (label, dash) in [("P99", ""), ("P50", r#" stroke-dasharray="7 4""#)] {
            let _ = writeln!(
                s,
                r#"<line x1="{lx:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{}" stroke-width="2"{dash}/><circle cx="{:.1}" cy="{ly:.1}" r="3" fill="{}"/><text x="{:.1}" y="{:.1}">{} {label}</text>"#,
                lx + 34.0,
                colour(name),
                lx + 17.0,
                colour(name),
                lx + 42.0,
                ly + 4.0,
                display_name(name)
            );
            ly += 20.0;
        }
        ly += 6.0;
    }
    s.push_str("</svg>\n");
    s
}

/// Which of the edges at `xs` (ascending) get a label, at least `gap`
/// apart: the last always (the largest size), then from right to left
/// each one far enough from the last labelled.
fn label_edges(xs: &[f64], gap: f64) -> Vec<bool> {
    let mut shown = vec![false; xs.len()];
    let mut last = f64::INFINITY;
    for (i, &x) in xs.iter().enumerate().rev() {
        if last - x >= gap {
            shown[i] = true;
            last = x;
        }
    }
    shown
}

/// Escapes text for SVG.
fn xml(t: &str) -> String {
    t.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_labels_are_short() {
        assert_eq!(size_label(315), "315");
        assert_eq!(size_label(1_400), "1.4K");
        assert_eq!(size_label(10_000), "10K");
        assert_eq!(size_label(1_000_000), "1M");
        assert_eq!(size_label(2_500_000), "2.5M");
    }

    #[test]
    fn formats_follow_the_extension() {
        assert_eq!(Format::of_path("a.svg"), Ok(Format::Svg));
        assert_eq!(Format::of_path("a.SVG"), Ok(Format::Svg));
        for bad in ["x.jpg", "plot", "a.svg.txt"] {
            let e = Format::of_path(bad).unwrap_err();
            assert!(e.contains("unknown chart format"), "{bad}: {e}");
        }
        if cfg!(feature = "png") {
            assert_eq!(Format::of_path("a.PNG"), Ok(Format::Png));
        } else {
            assert!(Format::of_path("a.png")
                .unwrap_err()
                .contains("png feature"));
        }
    }

    #[test]
    fn edge_labels_never_crowd_and_the_last_is_kept() {
        // The last two edges 8 px apart ("832K" and "1M" overlapped).
        let xs = [100.0, 200.0, 220.0, 700.0, 792.0, 800.0];
        assert_eq!(
            label_edges(&xs, 34.0),
            [true, false, true, true, false, true]
        );
        let shown: Vec<f64> = xs
            .iter()
            .zip(label_edges(&xs, 34.0))
            .filter(|(_, s)| *s)
            .map(|(x, _)| *x)
            .collect();
        assert!(shown.windows(2).all(|p| p[1] - p[0] >= 34.0), "{shown:?}");
    }
}
