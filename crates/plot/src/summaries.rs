//! Summaries drawn over time. By default as agurim draws them: stacked
//! areas of bits/s and packets/s side by side, one band per top aggregate
//! and `other` for the rest, from the same re-aggregation as `kansoku web`
//! (`webview::answer`), so the bands add up to the traffic. With
//! [`Style::Lines`], as the figures of the MAWI working group's report on
//! AGURI (docs/papers.md; chapter 2, Figs. 2.2–2.17), from `aguri::top_series`:
//! lines of the total and the top aggregates. Charts are [`crate::chart`]'s
//! (SVG or PNG, with the embedded font); HTML is a self-contained page with
//! the SVG inline, a table of the aggregates, and each interval's entries
//! to unfold.

use std::fmt::Write as _;
use std::path::Path;

use aguri::summary::format_time;
use aguri::{top_series, SectionKind, Series, Summary};
use plotters::prelude::{RGBColor, BLACK};
use plotters::style::Color;

use crate::chart::{self, Band, Chart, LineChart, Panel, StackedChart};
use crate::{Error, Result};

/// How summaries are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Style {
    /// Stacked areas of bits/s and packets/s side by side, as agurim draws
    /// them; what no top aggregate holds is the `other` band.
    Stacked,
    /// Lines of the total and the top aggregates in the summaries' metric.
    Lines,
}

/// What to draw of a series of summaries.
#[derive(Clone, Copy, Debug)]
pub struct SummaryPlot {
    /// Which view (source or destination addresses or ports).
    pub kind: SectionKind,
    /// How many aggregates to draw besides the total.
    pub top: usize,
    pub style: Style,
}

/// Draws `summaries` to `out`: `.svg`, `.png`, or `.html` (a page with the
/// chart inline). A time series needs two summaries or more.
pub fn plot_summaries(mut summaries: Vec<Summary>, plot: &SummaryPlot, out: &Path) -> Result<()> {
    match summaries.as_slice() {
        [] => return Err(Error::usage("no summaries to plot")),
        [one] => {
            return Err(Error::usage(format!(
                "one summary ({} to {}): a time series needs two or more (profile with -i to have one per \
                 interval); `kansoku profile --merge FILE` prints its aggregates",
                format_time(one.start_ns),
                format_time(one.end_ns)
            )))
        }
        _ => {}
    }
    let kind = plot.kind;
    let ext = out
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    if plot.style == Style::Stacked {
        return stacked(plot, summaries, out, &ext);
    }
    let (series, unit) =
        top_series(&mut summaries, kind, plot.top).map_err(|e| Error::input(e.to_string()))?;
    let title = format!("{} ({unit})", kind.name());
    let axis = TimeAxis::of(&series);
    let label = |u: &f64| axis.label(*u);
    let c = line_chart(&series, &axis, title.clone(), &label);
    let rows: Vec<(String, String)> = series
        .iter()
        .map(|s| (s.label.clone(), format!("{:.2}%", s.share)))
        .collect();
    write_chart(&c, out, &ext, &rows, &summaries, kind, &title)
}

/// Draws `c` to `out`: SVG or PNG, or an HTML page with `rows` under it.
fn write_chart(
    c: &impl Chart,
    out: &Path,
    ext: &str,
    rows: &[(String, String)],
    summaries: &[Summary],
    kind: SectionKind,
    title: &str,
) -> Result<()> {
    if ext == "html" {
        let page = html(&c.to_svg()?, rows, summaries, kind, title);
        std::fs::write(out, page).map_err(|e| Error::writing(out, e))
    } else {
        c.draw_file(out)
    }
}

/// The palette of the bands (agurim's colours are flot's defaults; these are
/// distinct on white and in grey print), `other` in light grey.
const BAND_COLORS: [RGBColor; 12] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
    RGBColor(188, 189, 34),
    RGBColor(57, 59, 121),
    RGBColor(99, 121, 57),
    RGBColor(132, 60, 57),
];

/// Stacked bits/s and packets/s of the top aggregates and `other`.
fn stacked(plot: &SummaryPlot, summaries: Vec<Summary>, out: &Path, ext: &str) -> Result<()> {
    let kind = plot.kind;
    let view = match kind {
        SectionKind::SrcAddress => webview::ViewKind::Src,
        SectionKind::DstAddress => webview::ViewKind::Dst,
        SectionKind::SrcPort => webview::ViewKind::Sport,
        SectionKind::DstPort => webview::ViewKind::Dport,
    };
    let threshold = summaries
        .first()
        .map_or(1.0, |s| s.threshold)
        .clamp(0.1, 100.0);
    let src = webview::MemorySource::new(summaries.clone());
    let cat = webview::DataSource::catalog(&src).map_err(|e| Error::input(e.to_string()))?;
    let q = webview::Query {
        view,
        from: Some(cat.first_ns / 1_000_000_000),
        to: Some(
            cat.last_ns
                .div_ceil(1_000_000_000)
                .max(cat.first_ns / 1_000_000_000 + 1),
        ),
        step: None,
        threshold,
        drill: None,
        drill_dst: None,
        probes: Vec::new(),
    };
    let a = webview::answer(&src, &cat, &q).map_err(|e| match e {
        webview::view::ViewError::Bad(b) => Error::usage(b.0),
        webview::view::ViewError::Source(s) => Error::input(s.0),
    })?;
    let mut top: Vec<&webview::view::Aggregate> =
        a.aggregates.iter().filter(|g| !g.catch_all).collect();
    top.sort_by_key(|g| std::cmp::Reverse((g.total.bytes, g.total.packets)));
    top.truncate(plot.top);
    let n = a.buckets.len();
    let step = a.step as f64;
    let share = |part: u64, whole: u64| {
        if whole == 0 {
            0.0
        } else {
            part as f64 * 100.0 / whole as f64
        }
    };
    let mut bands = Vec::new();
    let mut rows = Vec::new();
    let (mut bits, mut pps) = (Vec::new(), Vec::new());
    let series = |v: &[Option<u64>], scale: f64| -> Vec<f64> {
        v.iter()
            .map(|x| x.map_or(f64::NAN, |c| c as f64 * scale / step))
            .collect()
    };
    for (i, g) in top.iter().enumerate() {
        let (b, p) = (
            share(g.total.bytes, a.within.bytes),
            share(g.total.packets, a.within.packets),
        );
        bands.push(Band {
            label: format!("{} ({b:.2}% B, {p:.2}% P)", g.label),
            color: BAND_COLORS[i % BAND_COLORS.len()].to_rgba(),
        });
        rows.push((
            g.label.clone(),
            format!("{b:.2}% of bytes, {p:.2}% of packets"),
        ));
        bits.push(series(&g.bytes, 8.0));
        pps.push(series(&g.packets, 1.0));
    }
    // Everything else, catch-alls included: the bands add up to the traffic.
    let (mut ob, mut op) = (vec![f64::NAN; n], vec![f64::NAN; n]);
    let (mut tb, mut tp) = (0u64, 0u64);
    for g in a
        .aggregates
        .iter()
        .filter(|g| !top.iter().any(|t| t.label == g.label))
    {
        for (b, (x, y)) in g.bytes.iter().zip(&g.packets).enumerate() {
            if let (Some(x), Some(y)) = (x, y) {
                ob[b] = ob[b].max(0.0) + *x as f64 * 8.0 / step;
                op[b] = op[b].max(0.0) + *y as f64 / step;
            }
        }
        tb += g.total.bytes;
        tp += g.total.packets;
    }
    for (b, &c) in a.covered.iter().enumerate() {
        if c {
            ob[b] = ob[b].max(0.0);
            op[b] = op[b].max(0.0);
        }
    }
    let (b, p) = (share(tb, a.within.bytes), share(tp, a.within.packets));
    bands.push(Band {
        label: format!("other ({b:.2}% B, {p:.2}% P)"),
        color: RGBColor(190, 190, 190).to_rgba(),
    });
    rows.push((
        "other".into(),
        format!("{b:.2}% of bytes, {p:.2}% of packets"),
    ));
    bits.push(ob);
    pps.push(op);
    let times: Vec<f64> = a.buckets.iter().map(|&t| t as f64).collect();
    let axis = TimeAxis::between(a.from as f64, a.to as f64);
    let label = |u: &f64| axis.label(*u);
    let title = format!("{}: {} s buckets", kind.name(), a.step);
    let c = StackedChart {
        title: title.clone(),
        starts: times.iter().map(|&t| axis.u(t)).collect(),
        width: step / axis.step,
        bands,
        panels: vec![
            Panel {
                title: "bits/s".into(),
                values: bits,
            },
            Panel {
                title: "packets/s".into(),
                values: pps,
            },
        ],
        x_labels: Some(((axis.u(axis.end) - axis.u(axis.start)).ceil() as usize + 1).clamp(2, 8)),
        x_label_formatter: Some(&label),
    };
    write_chart(&c, out, ext, &rows, &summaries, kind, &title)
}

/// Tick spacings the time axis chooses from, in seconds: round times.
const STEPS: [u64; 18] = [
    1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10_800, 21_600, 43_200, 86_400,
];

/// The time axis: x is drawn in units of a round step from a round origin,
/// so that the chart's evenly spaced ticks (whole numbers) fall on round
/// times (00:00, 00:05, 00:10 ... rather than 00:00, 00:01, 00:03).
struct TimeAxis {
    origin: f64,
    step: f64,
    /// Whether labels carry the date (the range spans more than a day).
    dated: bool,
    start: f64,
    end: f64,
}

impl TimeAxis {
    fn of(series: &[Series]) -> TimeAxis {
        let (mut x0, mut x1) = (f64::MAX, f64::MIN);
        for &(x, _) in series.iter().flat_map(|s| &s.points) {
            x0 = x0.min(x);
            x1 = x1.max(x);
        }
        TimeAxis::between(x0, x1)
    }

    /// The axis from `x0` to `x1` seconds.
    fn between(x0: f64, mut x1: f64) -> TimeAxis {
        if x1 <= x0 {
            x1 = x0 + 1.0;
        }
        let span = x1 - x0;
        let step = STEPS
            .iter()
            .map(|&s| s as f64)
            .find(|&s| span / s <= 8.0)
            .unwrap_or_else(|| (span / 8.0 / 86_400.0).ceil() * 86_400.0);
        TimeAxis {
            origin: (x0 / step).floor() * step,
            step,
            dated: span > 86_400.0 || (x0 / 86_400.0).floor() != (x1 / 86_400.0).floor(),
            start: x0,
            end: x1,
        }
    }

    fn u(&self, t: f64) -> f64 {
        (t - self.origin) / self.step
    }

    /// "03:05" (or "11/22 03:05" across days; seconds when the step is).
    fn label(&self, u: f64) -> String {
        let t = (self.origin + u * self.step).round().max(0.0) as u64;
        let full = format_time(t * 1_000_000_000);
        // aguri's form ends "(2026/11/22 03:17:08.813105)".
        let inner = full
            .rsplit_once('(')
            .map_or(full.as_str(), |(_, r)| r.trim_end_matches(')'));
        let (date, time) = inner.split_once(' ').unwrap_or(("", inner));
        let time = if self.step < 60.0 {
            &time[..time.len().min(8)]
        } else {
            &time[..time.len().min(5)]
        };
        if self.dated {
            format!("{} {time}", date.get(5..).unwrap_or(date))
        } else {
            time.to_string()
        }
    }
}

/// The total in thick black, the aggregates in the palette's colours,
/// `other` in grey.
fn line_chart<'a>(
    series: &[Series],
    axis: &TimeAxis,
    title: String,
    label: chart::LabelFormatter<'a>,
) -> LineChart<'a> {
    let mut y1 = 0.0f64;
    for &(_, y) in series.iter().flat_map(|s| &s.points) {
        if y.is_finite() {
            y1 = y1.max(y);
        }
    }
    let last = series.len().saturating_sub(1);
    let lines = series
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let name = format!("{} ({:.2}%)", s.label, s.share);
            let points = s.points.iter().map(|&(x, y)| (axis.u(x), y)).collect();
            let mut l = chart::Series::new(name, points, i.saturating_sub(1));
            if i == 0 {
                l.color = BLACK.to_rgba();
                l.width = 3;
            } else if i == last && s.label == "other" {
                l.color = RGBColor(150, 150, 150).to_rgba();
            }
            l
        })
        .collect();
    let (u0, u1) = (axis.u(axis.start), axis.u(axis.end));
    LineChart {
        title,
        x: u0..u1,
        y: 0.0..if y1 > 0.0 { y1 * 1.1 } else { 1.0 },
        x_desc: None,
        y_desc: None,
        x_labels: Some(((u1 - u0).ceil() as usize + 1).clamp(2, 10)),
        x_label_formatter: Some(label),
        y_label_area: 70,
        series: lines,
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn html(
    svg: &str,
    rows: &[(String, String)],
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
    for (label, share) in rows {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td></tr>",
            escape(label),
            escape(share)
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
