//! `kansoku plot`: summaries drawn as the paper's figures (paper 004,
//! Figs. 2.2–2.17), from `aguri::top_series`: a time series of the total
//! traffic and of the top aggregates, with a legend listing each label and
//! its share. The chart is the bench crate's `LineChart` (SVG or PNG, with
//! the embedded font); HTML is a self-contained page with the SVG inline, a
//! table of the aggregates, and each interval's entries to unfold.

use std::fmt::Write as _;

use aguri::summary::format_time;
use aguri::{top_series, SectionKind, Series, Summary};
use bench::plot::{self as chart, LineChart};
use pipeline::{display_path, read_summaries, Error, Report};
use plotters::prelude::{RGBColor, BLACK};
use plotters::style::Color;

use crate::args::{PlotArgs, PlotView};

pub fn run(args: &PlotArgs) -> pipeline::Result<Report> {
    let mut summaries = read_summaries(&args.inputs)?;
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
    let kind = match args.view {
        PlotView::Src => SectionKind::SrcAddress,
        PlotView::Dst => SectionKind::DstAddress,
        PlotView::Sport => SectionKind::SrcPort,
        PlotView::Dport => SectionKind::DstPort,
    };
    let (series, unit) =
        top_series(&mut summaries, kind, args.top).map_err(|e| Error::input(e.to_string()))?;
    let title = format!("{} ({unit})", kind.name());
    let out = &args.output;
    let ext = out
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    let axis = TimeAxis::of(&series);
    let label = |u: &f64| axis.label(*u);
    let c = line_chart(&series, &axis, title.clone(), &label);
    if ext == "html" {
        let page = html(&c.to_svg()?, &series, &summaries, kind, &title);
        std::fs::write(out, page).map_err(|e| Error::output(display_path(out), &e))?;
    } else {
        c.draw_file(out)?;
    }
    Ok(Report::default())
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
