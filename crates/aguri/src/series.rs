//! Time series of a set of summaries, as MAWI WG 2001 draws them (Figs.
//! 2.2–2.17): the total traffic and the top aggregates of one section over
//! time, each with its share of the whole.
//!
//! The top aggregates are the largest entries of all the summaries merged
//! into one, catch-alls left out (`0.0.0.0/0` is everything IPv4, not an
//! aggregate); in each interval, every entry is counted under the most
//! specific top aggregate that contains it, and what no top aggregate holds
//! is the last series, `other`, so that the series add up to the total.
//! Where summaries are missing (a time between one's end and the next
//! one's start), every series has a point whose rate is NaN: a gap, which
//! a chart draws as a break in the line. Rates are Mbit/s for byte counts
//! and packets/s for packet counts.

use crate::label::Prefix;
use crate::merge::{merge_all, MergeError};
use crate::profile::DEFAULT_BUDGET;
use crate::summary::{SectionKind, Summary};
use crate::tree::Metric;

/// A summary starting more than this after the last one ended leaves a
/// gap: time no summary covers.
const GAP_NS: u64 = 1_000_000_000;

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
        .filter(|e| !e.prefix.is_catch_all())
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
    let in_top: u64 = top.iter().map(|t| t.1).sum();
    series.push(Series {
        label: "other".to_string(),
        share: grand.saturating_sub(in_top) as f64 * 100.0 / grand as f64,
        points: Vec::new(),
    });
    let mut last_end: Option<u64> = None;
    for s in summaries.iter() {
        // A summary missing before this one: a break in every line. (An
        // interval without traffic has a summary of its own, at zero.)
        if last_end.is_some_and(|e| s.start_ns > e.saturating_add(GAP_NS)) {
            let t = last_end.unwrap_or(0) as f64 / 1e9;
            for line in &mut series {
                line.points.push((t, f64::NAN));
            }
        }
        last_end = Some(s.end_ns);
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
        let all = v(sec.bytes, sec.packets);
        series[0].points.push((t, rate(s, all)));
        for (i, c) in counts.iter().enumerate() {
            series[i + 1].points.push((t, rate(s, *c)));
        }
        let other = all.saturating_sub(counts.iter().sum());
        if let Some(o) = series.last_mut() {
            o.points.push((t, rate(s, other)));
        }
    }
    Ok((series, unit))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{FlowKey, ProfilerConfig};

    #[test]
    fn series_add_up_with_other_and_break_where_summaries_are_missing() {
        let mut p = ProfilerConfig {
            interval_ns: 60_000_000_000,
            ..ProfilerConfig::default()
        }
        .build()
        .unwrap();
        let key = |src: &str, port: u16| FlowKey {
            src: src.parse().unwrap(),
            dst: "10.9.9.9".parse().unwrap(),
            protocol: 6,
            src_port: port,
            dst_port: 80,
        };
        let t0 = 1_800_000_000_000_000_000u64;
        let mut out = Vec::new();
        // Minutes 0-2, then nothing written for minutes 3-4, then 5-6.
        for m in [0u64, 1, 2, 5, 6] {
            for i in 0..300u64 {
                let src = format!("192.0.{}.{}", i % 3, i % 200);
                out.extend(p.add(
                    t0 + m * 60_000_000_000 + i * 1_000_000,
                    &key(&src, 1000 + i as u16),
                    500,
                ));
            }
        }
        out.extend(p.finish());
        // The profiler wrote the quiet minutes as nothing here (the stage
        // writes empty summaries): a gap between minute 2's end and 5.
        let (series, unit) = top_series(&mut out, SectionKind::SrcAddress, 3).unwrap();
        assert_eq!(unit, "Mbps");
        assert_eq!(series.last().unwrap().label, "other");
        assert!(
            series.iter().all(|s| !s.label.ends_with("/0")),
            "{series:?}"
        );
        let n = series[0].points.len();
        assert_eq!(n, 6, "five summaries and a break");
        for i in 0..n {
            let total = series[0].points[i].1;
            let parts: f64 = series[1..].iter().map(|s| s.points[i].1).sum();
            if total.is_nan() {
                assert!(series.iter().all(|s| s.points[i].1.is_nan()));
                assert_eq!(i, 3, "the break is where the summaries are missing");
            } else {
                assert!(
                    (total - parts).abs() < 1e-9 * total.max(1.0),
                    "{i}: {total} != {parts}"
                );
            }
        }
        let shares: f64 = series[1..].iter().map(|s| s.share).sum();
        assert!((shares - 100.0).abs() < 1e-6, "{shares}");
    }
}
