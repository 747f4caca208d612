//! `kansoku plot`: summaries drawn as the paper's figures (paper 004,
//! Figs. 2.2–2.17): a time series of the total traffic and of the top
//! aggregates, with a legend listing each label and its share.
//!
//! The top aggregates are the largest entries of all the summaries merged
//! into one; in each interval, every entry is counted under the most
//! specific top aggregate that contains it (the rest is not drawn, as in
//! the paper's figures). SVG and PNG come from `plotters`; HTML is a
//! self-contained page with the SVG inline, a table of the aggregates, and
//! each interval's entries to unfold (drill-down).

use std::fmt::Write as _;

use aguri::summary::format_time;
use aguri::{merge_all, Metric, Prefix, SectionKind, Summary, DEFAULT_BUDGET};
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

use crate::cli::{PlotArgs, PlotView};
use crate::cmd_profile::read_summaries;
use crate::error::{display_path, CliError, CliResult};

/// The font PNG and SVG text is laid out with (Debian: fonts-dejavu-core).
const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

struct Series {
    label: String,
    share: f64,
    /// (seconds since the epoch, rate) per interval.
    points: Vec<(f64, f64)>,
}

pub fn run(args: &PlotArgs) -> CliResult<i32> {
    let mut summaries = read_summaries(&args.inputs)?;
    if summaries.is_empty() {
        return Err(CliError::input("no summaries to plot"));
    }
    summaries.sort_by_key(|s| s.start_ns);
    let kind = match args.view {
        PlotView::Src => SectionKind::SrcAddress,
        PlotView::Dst => SectionKind::DstAddress,
        PlotView::Sport => SectionKind::SrcPort,
        PlotView::Dport => SectionKind::DstPort,
    };
    let metric = summaries[0].metric;
    let threshold = summaries[0].threshold;
    let whole = merge_all(&mut summaries.clone(), 0, DEFAULT_BUDGET, metric, threshold)
        .map_err(|e| CliError::input(e.to_string()))?;
    let Some(whole) = whole.first() else {
        return Err(CliError::input("no summaries to plot"));
    };
    let sec = whole.section(kind);
    let v = |b: u64, p: u64| match metric {
        Metric::Bytes => b,
        Metric::Packets => p,
    };
    let grand = v(sec.bytes, sec.packets).max(1);
    let mut top: Vec<(Prefix, u64)> = sec
        .entries
        .iter()
        .filter(|e| e.prefix.len > 0)
        .map(|e| (e.prefix, v(e.bytes, e.packets)))
        .collect();
    top.sort_by_key(|t| std::cmp::Reverse(t.1));
    top.truncate(args.top);

    let (unit, scale) = match metric {
        Metric::Bytes => ("Mbps", 8.0 / 1e6),
        Metric::Packets => ("pps", 1.0),
    };
    let rate = |s: &Summary, count: u64| {
        let secs = (s.end_ns.saturating_sub(s.start_ns) as f64 / 1e9).max(1e-3);
        count as f64 * scale / secs
    };
    let mut series = vec![Series {
        label: "total".into(),
        share: 100.0,
        points: Vec::new(),
    }];
    for (p, c) in &top {
        series.push(Series {
            label: p.to_string(),
            share: *c as f64 * 100.0 / grand as f64,
            points: Vec::new(),
        });
    }
    for s in &summaries {
        let sec = s.section(kind);
        let mut counts = vec![0u64; top.len()];
        for e in &sec.entries {
            // The most specific top aggregate containing the entry.
            let best = top
                .iter()
                .enumerate()
                .filter(|(_, (p, _))| p.contains(&e.prefix))
                .max_by_key(|(_, (p, _))| p.len);
            if let Some((i, _)) = best {
                counts[i] += v(e.bytes, e.packets);
            }
        }
        let t = s.start_ns as f64 / 1e9;
        series[0]
            .points
            .push((t, rate(s, v(sec.bytes, sec.packets))));
        for (i, c) in counts.iter().enumerate() {
            series[i + 1].points.push((t, rate(s, *c)));
        }
    }
    let title = format!("{} ({unit})", kind.name());
    load_font()?;
    let out = &args.output;
    let ext = out
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    let fail = |e: String| CliError::file(out, e);
    match ext.as_str() {
        "svg" => {
            let root = SVGBackend::new(out, (1024, 640)).into_drawing_area();
            draw(root, &series, &title).map_err(fail)?;
        }
        "png" => {
            let root = BitMapBackend::new(out, (1024, 640)).into_drawing_area();
            draw(root, &series, &title).map_err(fail)?;
        }
        "html" => {
            let mut svg = String::new();
            {
                let root = SVGBackend::with_string(&mut svg, (1024, 640)).into_drawing_area();
                draw(root, &series, &title).map_err(fail)?;
            }
            let page = html(&svg, &series, &summaries, kind, &title);
            std::fs::write(out, page).map_err(|e| CliError::file(out, e))?;
        }
        _ => {
            return Err(CliError::input(format!(
                "{}: unknown output type (expected .svg, .png or .html)",
                display_path(out)
            )))
        }
    }
    Ok(0)
}

/// Registers DejaVu Sans as plotters' sans-serif font (SVG and PNG text).
pub(crate) fn load_font() -> CliResult<()> {
    let bytes = std::fs::read(FONT).map_err(|e| {
        CliError::input(format!(
            "{FONT}: {e} (plots need the DejaVu Sans font: apt-get install fonts-dejavu-core)"
        ))
    })?;
    // plotters keeps registered fonts for the life of the process.
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    register_font("sans-serif", FontStyle::Normal, bytes)
        .map_err(|_| CliError::input(format!("{FONT}: not a usable font")))
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    series: &[Series],
    title: &str,
) -> Result<(), String> {
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    root.fill(&WHITE).map_err(e)?;
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0.0f64);
    for s in series {
        for &(x, y) in &s.points {
            x0 = x0.min(x);
            x1 = x1.max(x);
            y1 = y1.max(y);
        }
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let y1 = if y1 > 0.0 { y1 * 1.1 } else { 1.0 };
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..x1, 0.0..y1)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_labels(6)
        .x_label_formatter(&|x| {
            let t = format_time((x.max(0.0) * 1e9) as u64);
            // "2026/01/01 00:05:00" out of aguri's time form.
            t.rsplit_once('(')
                .map(|(_, r)| r.trim_end_matches(')').chars().take(16).collect())
                .unwrap_or(t)
        })
        .draw()
        .map_err(e)?;
    for (i, s) in series.iter().enumerate() {
        let color = if i == 0 {
            BLACK.to_rgba()
        } else {
            Palette99::pick(i - 1).to_rgba()
        };
        let style = ShapeStyle::from(&color).stroke_width(if i == 0 { 3 } else { 2 });
        chart
            .draw_series(LineSeries::new(s.points.iter().copied(), style))
            .map_err(e)?
            .label(format!("{} ({:.2}%)", s.label, s.share))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(e)?;
    root.present().map_err(|x| x.to_string())
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn html(
    svg: &str,
    series: &[Series],
    summaries: &[Summary],
    kind: SectionKind,
    title: &str,
) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>kansoku: {t}</title>\
         <style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #ccc;padding:2px 8px;text-align:right}}td:first-child{{text-align:left}}\
         pre{{background:#f6f6f6;padding:1em}}</style></head><body>\n<h1>{t}</h1>\n{svg}\n\
         <h2>Top aggregates</h2>\n<table><tr><th>label</th><th>share</th></tr>\n",
        t = escape(title)
    );
    for s in series {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{:.2}%</td></tr>",
            escape(&s.label),
            s.share
        );
    }
    h.push_str("</table>\n<h2>Intervals</h2>\n");
    for s in summaries {
        let sec = s.section(kind);
        let _ = write!(
            h,
            "<details><summary>{} — {} bytes, {} packets, {} entries</summary><pre>",
            escape(&format_time(s.start_ns)),
            sec.bytes,
            sec.packets,
            sec.entries.len()
        );
        for e in &sec.entries {
            let _ = writeln!(
                h,
                "{}\t{} {}",
                escape(&e.prefix.to_string()),
                e.bytes,
                e.packets
            );
        }
        h.push_str("</pre></details>\n");
    }
    h.push_str("</body></html>\n");
    h
}
