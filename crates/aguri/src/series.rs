//! Time series of a set of summaries, as paper 004 draws them (Figs.
//! 2.2–2.17): the total traffic and the top aggregates of one section over
//! time, each with its share of the whole.
//!
//! The top aggregates are the largest entries of all the summaries merged
//! into one; in each interval, every entry is counted under the most
//! specific top aggregate that contains it (the rest is not drawn, as in
//! the paper's figures). Rates are Mbit/s for byte counts and packets/s
//! for packet counts.

use crate::label::Prefix;
use crate::merge::{merge_all, MergeError};
use crate::profile::DEFAULT_BUDGET;
use crate::summary::{SectionKind, Summary};
use crate::tree::Metric;

/// One line of a plot.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// `total`, or the aggregate's label.
    pub label: String,
    /// Percent of all the traffic in the summaries.
    pub share: f64,
    /// (seconds since the epoch, rate) per interval.
    pub points: Vec<(f64, f64)>,
}

/// The total and the `top` largest aggregates of section `kind` in
/// `summaries` (sorted by start time first), and the rate unit (`Mbps`
/// or `pps`, from the summaries' metric). Empty for no summaries.
pub fn top_series(
    summaries: &mut [Summary],
    kind: SectionKind,
    top_n: usize,
) -> Result<(Vec<Series>, &'static str), MergeError> {
    summaries.sort_by_key(|s| s.start_ns);
    let Some(first) = summaries.first() else {
        return Ok((Vec::new(), ""));
    };
    let metric = first.metric;
    let threshold = first.threshold;
    let whole = merge_all(
        &mut summaries.to_vec(),
        0,
        DEFAULT_BUDGET,
        metric,
        threshold,
    )?;
    let Some(whole) = whole.first() else {
        return Ok((Vec::new(), ""));
    };
    let sec = whole.section(kind);
    let v = |b: u64, p: u64| metric.value(b, p);
    let grand = v(sec.bytes, sec.packets).max(1);
    let mut top: Vec<(Prefix, u64)> = sec
        .entries
        .iter()
        .filter(|e| e.prefix.len > 0)
        .map(|e| (e.prefix, v(e.bytes, e.packets)))
        .collect();
    top.sort_by_key(|t| std::cmp::Reverse(t.1));
    top.truncate(top_n);

    let (unit, scale) = match metric {
        Metric::Bytes | Metric::Either => ("Mbps", 8.0 / 1e6),
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
    for s in summaries.iter() {
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
    Ok((series, unit))
}
