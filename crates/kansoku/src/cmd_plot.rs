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
use plotters::prelude::{SeriesLabelPosition, BLACK};
use plotters::style::Color;

use crate::args::{PlotArgs, PlotView};

pub fn run(args: &PlotArgs) -> pipeline::Result<Report> {
    let mut summaries = read_summaries(&args.inputs)?;
    if summaries.is_empty() {
        return Err(Error::usage("no summaries to plot"));
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
    // "2026/01/01 00:05" out of aguri's time form.
    let label = |x: &f64| {
        let t = format_time((x.max(0.0) * 1e9) as u64);
        t.rsplit_once('(')
            .map(|(_, r)| r.trim_end_matches(')').chars().take(16).collect())
            .unwrap_or(t)
    };
    let c = line_chart(&series, title.clone(), &label);
    if ext == "html" {
        let page = html(&c.to_svg()?, &series, &summaries, kind, &title);
        std::fs::write(out, page).map_err(|e| Error::output(display_path(out), &e))?;
    } else {
        c.draw_file(out)?;
    }
    Ok(Report::default())
}

/// The total in thick black, the aggregates in the palette's colours.
fn line_chart<'a>(
    series: &[Series],
    title: String,
    label: chart::LabelFormatter<'a>,
) -> LineChart<'a> {
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0.0f64);
    for &(x, y) in series.iter().flat_map(|s| &s.points) {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let lines = series
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let name = format!("{} ({:.2}%)", s.label, s.share);
            let mut l = chart::Series::new(name, s.points.clone(), i.saturating_sub(1));
            if i == 0 {
                l.color = BLACK.to_rgba();
                l.width = 3;
            }
            l
        })
        .collect();
    LineChart {
        title,
        x: x0..x1,
        y: 0.0..if y1 > 0.0 { y1 * 1.1 } else { 1.0 },
        x_desc: None,
        y_desc: None,
        x_labels: Some(6),
        x_label_formatter: Some(label),
        y_label_area: 70,
        legend: SeriesLabelPosition::UpperRight,
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
