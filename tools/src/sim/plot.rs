//! The chart of `--plot`, drawn as the Homa paper draws its slowdown
//! figures: the x axis is spaced by the cumulative share of messages (each
//! size bucket as wide as the share of messages in it, labelled with the
//! sizes at its edges), the y axis is the slowdown on a log scale, with P50
//! (dashed) and P99 (solid) per protocol, a reference line at slowdown 1,
//! the short-message bucket shaded, a title naming workload, load and
//! topology, and the legend in a column right of the plot, clear of the
//! data and inside the canvas. Drawn with plotters as SVG; PNG is the same
//! SVG rasterised by resvg, with the `png` feature of homa-tools (off by
//! default: resvg and its font stack are most of homa-sim's build;
//! plotters' own bitmap backend would need font-kit and the system's
//! fontconfig to draw text).

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::metrics::Bucket;
use super::run::SimResult;

const W: u32 = 900;
const H: u32 = 520;
/// The legend's column, right of the plot: wide enough for its longest
/// label ("TCP, connection pool P50") in the 12-pixel font.
const LEGEND_W: u32 = 210;
/// The plot's width, about (for spacing the edge labels).
const PLOT_W: f64 = (W - LEGEND_W - 70) as f64;
const TOP: u32 = 70;
const BOTTOM: u32 = 55;
/// Lowest slowdown on the axis: below 1, so the reference line at 1 is
/// not hidden by the axis.
const Y_MIN: f64 = 0.5;

/// Fonts asked for, in order (DejaVu is what Debian installs by default).
const FONTS: &str = "DejaVu Sans, Liberation Sans, Arial, Helvetica, sans-serif";

const GRID: RGBColor = RGBColor(0xe4, 0xe4, 0xe4);
const SHORT: RGBColor = RGBColor(0xf2, 0xe8, 0xc9);
const SHORT_TEXT: RGBColor = RGBColor(0x7a, 0x5c, 0x00);
const GREY_TEXT: RGBColor = RGBColor(0x44, 0x44, 0x44);

type DrawError<B> = DrawingAreaErrorKind<<B as DrawingBackend>::ErrorType>;

fn colour(name: &str) -> RGBColor {
    match name {
        "homa" => RGBColor(0x1f, 0x77, 0xb4),
        "dctcp" => RGBColor(0xd6, 0x27, 0x28),
        "tcp-mc" => RGBColor(0xff, 0x7f, 0x0e),
        "pias" => RGBColor(0x2c, 0xa0, 0x2c),
        "pfabric" => RGBColor(0x94, 0x67, 0xbd),
        _ => RGBColor(0x55, 0x55, 0x55),
    }
}

fn display_name(name: &str) -> &str {
    match name {
        "homa" => "Homa",
        "dctcp" => "DCTCP",
        "tcp-mc" => "TCP, connection pool",
        "pias" => "PIAS",
        "pfabric" => "pFabric",
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
    let svg = svg(r)?;
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

/// The chart as an SVG document, drawn with plotters: the plot on the
/// left, the legend in a column of its own on the right, inside the canvas.
pub fn svg(r: &SimResult) -> Result<String, String> {
    let mut out = String::new();
    draw(
        r,
        SVGBackend::with_string(&mut out, (W, H)).into_drawing_area(),
    )
    .map_err(|e| format!("the chart: {e}"))?;
    Ok(out)
}

/// A `size`-pixel text style anchored at `h`, `v`.
fn text(size: f64, h: HPos, v: VPos) -> TextStyle<'static> {
    TextStyle::from((FONTS, size).into_font()).pos(Pos::new(h, v))
}

fn draw<B: DrawingBackend>(r: &SimResult, root: DrawingArea<B, Shift>) -> Result<(), DrawError<B>>
where
    B::ErrorType: 'static,
{
    let layout: &[Bucket] = r.results.first().map_or(&[], |p| &p.buckets[..]);
    let spans = spans(r, layout);
    let ymax = r
        .results
        .iter()
        .flat_map(|p| p.buckets.iter().filter(|b| b.count > 0).map(|b| b.p99))
        .fold(2.0f64, f64::max);
    let yhi = 10f64.powf(ymax.log10().ceil().max(1.0));
    root.fill(&WHITE)?;
    let (left, legend) = root.split_horizontally(W - LEGEND_W);

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
    let centre = |size| text(size, HPos::Center, VPos::Top);
    let mid = (left.dim_in_pixel().0 / 2) as i32;
    let bold = TextStyle::from((FONTS, 15.0, FontStyle::Bold).into_font());
    left.draw_text(
        &title,
        &bold.pos(Pos::new(HPos::Center, VPos::Top)),
        (mid, 12),
    )?;
    left.draw_text(&sub, &centre(12.0).color(&GREY_TEXT), (mid, 32))?;

    // Bucket edges: a tick and the size at each (those far enough apart),
    // spaced by share; slowdowns 1, 2, 5 per decade.
    let xs: Vec<f64> = spans.iter().map(|&(_, hi)| hi).collect();
    let labelled = label_edges(&xs, 34.0 / PLOT_W);
    let decades = (Y_MIN.log10().floor() as i32 + 1)..=(yhi.log10().round() as i32);
    let ys: Vec<f64> = decades
        .flat_map(|d| [1.0, 2.0, 5.0].map(|m| m * 10f64.powi(d)))
        .filter(|&v| v <= yhi * 1.0001)
        .collect();
    let mut chart = ChartBuilder::on(&left)
        .margin_top(TOP)
        .margin_right(10)
        .x_label_area_size(BOTTOM)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..1f64, (Y_MIN..yhi).log_scale().with_key_points(ys))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .bold_line_style(GRID)
        .label_style((FONTS, 12.0))
        .axis_desc_style((FONTS, 12.0))
        .x_desc("Message size (bytes): bucket edges, spaced by the share of messages; 0% to 100% of messages, smallest first")
        .y_desc("Slowdown (log scale)")
        .y_label_formatter(&|v| format!("{v}"))
        .draw()?;

    // The short-message bucket, shaded, and named above the plot.
    let short_hi = {
        let w = &r.workload;
        let i = w.sizes.partition_point(|&x| x < r.short_max_bytes);
        w.cdf.get(i).copied().unwrap_or(0.0)
    };
    chart.draw_series([Rectangle::new(
        [(0.0, Y_MIN), (short_hi, yhi)],
        SHORT.filled(),
    )])?;
    let edges = xs
        .iter()
        .map(|&x| PathElement::new([(x, Y_MIN), (x, yhi)], GRID));
    chart.draw_series(edges)?;
    let below = text(12.0, HPos::Center, VPos::Top);
    for ((x, b), shown) in xs.iter().zip(layout).zip(&labelled) {
        let (px, py) = chart.backend_coord(&(*x, Y_MIN));
        left.draw(&PathElement::new([(px, py), (px, py + 5)], BLACK))?;
        if *shown {
            left.draw_text(&size_label(b.max_bytes), &below, (px, py + 8))?;
        }
    }
    let (x0, y0) = chart.plotting_area().get_base_pixel();
    left.draw(&Rectangle::new(
        [(x0, y0 - 15), (x0 + 10, y0 - 5)],
        SHORT.filled(),
    ))?;
    let note = format!(
        "short messages (<= {} B, {:.0}% of messages)",
        r.short_max_bytes,
        short_hi * 100.0
    );
    left.draw_text(
        &note,
        &(FONTS, 12.0).into_font().color(&SHORT_TEXT),
        (x0 + 14, y0 - 16),
    )?;

    // The reference: a message as fast as on an empty fabric.
    let ideal = DashedLineSeries::new([(0.0, 1.0), (1.0, 1.0)], 2, 3, BLACK.stroke_width(1));
    chart.draw_series(ideal)?;
    let right = text(12.0, HPos::Right, VPos::Top);
    chart.draw_series([Text::new("slowdown 1 (ideal)", (0.99, 0.95), right)])?;

    // Curves: each bucket at the middle of its span; P99 solid, P50 dashed.
    for p in &r.results {
        let c = colour(p.protocol.name());
        for (pct, pick) in [
            ("P99", (|b: &Bucket| b.p99) as fn(&Bucket) -> f64),
            ("P50", |b| b.p50),
        ] {
            let pts: Vec<(f64, f64)> = p
                .buckets
                .iter()
                .zip(&spans)
                .filter(|(b, _)| b.count > 0)
                .map(|(b, &(lo, hi))| ((lo + hi) / 2.0, pick(b).max(Y_MIN)))
                .collect();
            let style = c.stroke_width(2);
            if pct == "P99" {
                chart.draw_series(LineSeries::new(pts.clone(), style))?;
            } else {
                chart.draw_series(DashedLineSeries::new(pts.clone(), 7, 4, style))?;
            }
            chart.draw_series(pts.iter().map(|&xy| Circle::new(xy, 3, c.filled())))?;
        }
    }

    // The legend, in its own column: a sample of each line and its name.
    let font = text(12.0, HPos::Left, VPos::Center);
    let mut y = y0 + 12;
    for p in &r.results {
        let c = colour(p.protocol.name());
        for pct in ["P99", "P50"] {
            let line = [(4, y), (38, y)];
            if pct == "P99" {
                legend.draw(&PathElement::new(line, c.stroke_width(2)))?;
            } else {
                legend.draw(&PathElement::new([(4, y), (14, y)], c.stroke_width(2)))?;
                legend.draw(&PathElement::new([(21, y), (31, y)], c.stroke_width(2)))?;
            }
            legend.draw(&Circle::new((21, y), 3, c.filled()))?;
            let label = format!("{} {pct}", display_name(p.protocol.name()));
            legend.draw_text(&label, &font, (44, y))?;
            y += 20;
        }
        y += 6;
    }
    root.present()
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
