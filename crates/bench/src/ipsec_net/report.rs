//! How `--part link` reports: the result tables (ours beside the paper's
//! figures), the checks of the paper's ordering, and one chart a test.

use std::io::Write;
use std::path::Path;

use pipeline::{Error, Result};
use plot::{Chart, LineChart, Series};

use crate::harness::table::{self, Align};
use crate::ipsec_net::netperf::Test;

use super::{figure, find, paper_figure, Row};

pub(super) fn write_link_tables(
    out: &mut dyn Write,
    rows: &[Row],
    families: &[u8],
    rate: Option<&str>,
    hog: bool,
) -> Result<()> {
    writeln!(
        out,
        "# bench ipsec, part (b): the paper's tests between two namespaces{}{}\n",
        rate.map_or(String::new(), |r| format!(", link {r}")),
        if hog {
            ", CPU hog on the sender's core"
        } else {
            ""
        }
    )
    .map_err(Error::stdout)?;
    let mut tests: Vec<Test> = Vec::new();
    for r in rows {
        if let Some(t) = r.kind {
            if !tests.contains(&t) {
                tests.push(t);
            }
        }
    }
    let mut configs: Vec<&str> = Vec::new();
    for r in rows {
        if !configs.contains(&r.config.as_str()) {
            configs.push(&r.config);
        }
    }
    for t in &tests {
        let unit = if t.is_stream() { "Mbit/s" } else { "trans/s" };
        writeln!(out, "\n## {}\n", t.name()).map_err(Error::stdout)?;
        let mut cols: Vec<(String, Align)> = vec![("config".into(), Align::Left)];
        for ip in families {
            cols.push((format!("IPv{ip} {unit}"), Align::Right));
            cols.push(("/ NONE".into(), Align::Right));
            cols.push(("paper / NONE".into(), Align::Right));
            if matches!(t, Test::UdpStream { .. } | Test::UdpRr { .. }) {
                cols.push(("loss".into(), Align::Right));
            }
            cols.push((
                if t.is_stream() { "delay ms" } else { "RTT ms" }.into(),
                Align::Right,
            ));
            cols.push(("jitter ms".into(), Align::Right));
            cols.push(("CPU A/B".into(), Align::Right));
        }
        let cols_ref: Vec<(&str, Align)> = cols.iter().map(|(n, a)| (n.as_str(), *a)).collect();
        table::header(out, &cols_ref).map_err(Error::stdout)?;
        for c in &configs {
            let mut cells = vec![c.to_string()];
            for &ip in families {
                let r = find(rows, c, ip, t);
                let none = find(rows, "none", ip, t).map(|r| figure(&r.outcome));
                let paper = r.and_then(|r| r.paper_label).and_then(|p| {
                    Some(paper_figure(t, p, ip == 6)? / paper_figure(t, "NONE", ip == 6)?)
                });
                match r {
                    Some(r) => {
                        let f = figure(&r.outcome);
                        cells.push(format!("{f:.2}"));
                        cells.push(
                            none.filter(|n| *n > 0.0)
                                .map_or("n/a".into(), |n| format!("{:.2}", f / n)),
                        );
                        cells.push(paper.map_or("".into(), |p| format!("{p:.2}")));
                        if matches!(t, Test::UdpStream { .. } | Test::UdpRr { .. }) {
                            cells.push(
                                r.outcome
                                    .loss
                                    .map_or("".into(), |l| format!("{:.1}%", l * 100.0)),
                            );
                        }
                        cells.push(r.outcome.delay_ms.map_or("".into(), |d| format!("{d:.3}")));
                        cells.push(r.outcome.jitter_ms.map_or("".into(), |d| format!("{d:.3}")));
                        cells.push(
                            r.carrier_cpu
                                .iter()
                                .map(|c| format!("{:.0}%", c * 100.0))
                                .collect::<Vec<_>>()
                                .join("/"),
                        );
                    }
                    None => {
                        let n = if matches!(t, Test::UdpStream { .. } | Test::UdpRr { .. }) {
                            7
                        } else {
                            6
                        };
                        cells.extend(std::iter::repeat_n(String::new(), n));
                    }
                }
            }
            table::row(out, &cells).map_err(Error::stdout)?;
        }
    }
    Ok(())
}

/// Per-second lines, one chart per test and IP version.
pub(super) fn plot_link(dir: &Path, rows: &[Row]) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::output(pipeline::display_path(dir), &e))?;
    let mut keys: Vec<(u8, Test)> = Vec::new();
    for r in rows {
        if let Some(t) = r.kind {
            if !keys.contains(&(r.ip, t)) {
                keys.push((r.ip, t));
            }
        }
    }
    for (ip, t) in keys {
        let series: Vec<Series> = rows
            .iter()
            .filter(|r| r.ip == ip && r.kind == Some(t))
            .enumerate()
            .map(|(i, r)| {
                let pts = r
                    .outcome
                    .per_second
                    .iter()
                    .enumerate()
                    .map(|(s, x)| {
                        let y = if t.is_stream() {
                            x.mbit_s
                        } else {
                            x.count as f64
                        };
                        (s as f64 + 1.0, y)
                    })
                    .collect();
                Series::new(r.config.clone(), pts, i)
            })
            .collect();
        let file = dir.join(format!("ipsec-{}-v{ip}.svg", slug(&t.name())));
        draw(
            &t.name(),
            ip,
            &series,
            if t.is_stream() {
                "Mbit/s received"
            } else {
                "transactions/s"
            },
            &file,
        )?;
    }
    Ok(())
}

fn slug(s: &str) -> String {
    let mut o = String::new();
    for ch in s.chars() {
        if ch.is_ascii_alphanumeric() {
            o.push(ch.to_ascii_lowercase());
        } else if !o.ends_with('-') {
            o.push('-');
        }
    }
    o.trim_matches('-').to_string()
}

pub(super) fn draw(
    title: &str,
    ip: u8,
    series: &[Series],
    y_desc: &str,
    file: &Path,
) -> Result<()> {
    let xmax = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(1.0f64, f64::max);
    let ymax = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0f64, f64::max);
    LineChart {
        title: format!("{title}, IPv{ip}, per second"),
        x: 0.0..xmax + 1.0,
        y: 0.0..(ymax * 1.15).max(1.0),
        x_desc: Some("second"),
        y_desc: Some(y_desc),
        x_labels: None,
        x_label_formatter: None,
        y_label_area: 70,
        series: series.to_vec(),
    }
    .draw_file(file)
}
