//! Re-aggregation: summaries in, summaries of longer periods out.
//!
//! "Since AGURI also takes its own summaries as input, several at once,
//! short summaries can be combined into summaries of any longer period"
//! (MAWI WG 2001 §2.2). Every entry of every input summary is added, as the
//! prefix it is, into the four trees of its period; the trees fold and
//! aggregate as for packets. Counts are integers throughout, so the totals
//! of the output are exactly those of the input.

use core::fmt;

use crate::profile::Trees;
use crate::summary::Summary;
use crate::tree::Metric;

/// Why a summary could not be merged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MergeError {
    /// The merged counts would not fit in 64 bits.
    Overflow,
}

impl fmt::Display for MergeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MergeError::Overflow => f.write_str("merged counts overflow 64 bits"),
        }
    }
}

impl std::error::Error for MergeError {}

/// Merges summaries, given in time order, into periods of `interval_ns`
/// aligned to multiples of it (0: everything into one). A summary belongs to
/// the period its start lies in.
pub struct Merger {
    interval_ns: u64,
    metric: Metric,
    threshold: f64,
    trees: Trees,
    current: Option<(u64, u64, u64)>,
    totals: (u64, u64),
    non_ip: (u64, u64),
    /// The inputs' 2-D flows as items, while every input has them.
    items: Option<Vec<crate::flows2d::Item>>,
    coarsen: bool,
}

impl Merger {
    /// A merger writing summaries with `metric` and `threshold` (percent).
    pub fn new(interval_ns: u64, budget: usize, metric: Metric, threshold: f64) -> Merger {
        Merger {
            interval_ns,
            metric,
            threshold,
            trees: Trees::new(budget),
            current: None,
            totals: (0, 0),
            non_ip: (0, 0),
            items: Some(Vec::new()),
            coarsen: false,
        }
    }

    /// With aguri2's coarsening ([`crate::PatriciaTree::aggregate_with`]).
    pub fn coarsen(mut self, on: bool) -> Merger {
        self.coarsen = on;
        self
    }

    fn period(&self, ns: u64) -> u64 {
        ns.checked_div(self.interval_ns).unwrap_or(0)
    }

    /// Adds `s`; returns the previous period's summary if `s` starts a later one.
    /// A summary from an earlier period than the current one is merged
    /// into the current one, so nothing is dropped.
    pub fn add(&mut self, s: &Summary) -> Result<Option<Summary>, MergeError> {
        let period = self.period(s.start_ns);
        let mut done = None;
        match self.current {
            Some((p, start, end)) if period <= p => {
                self.current = Some((p, start.min(s.start_ns), end.max(s.end_ns)));
            }
            Some(_) => {
                done = self.finish();
                self.current = Some((period, s.start_ns, s.end_ns));
            }
            None => self.current = Some((period, s.start_ns, s.end_ns)),
        }
        let first = &s.sections[0];
        let b = self.totals.0.checked_add(first.bytes);
        let p = self.totals.1.checked_add(first.packets);
        let nb = self.non_ip.0.checked_add(s.non_ip_bytes);
        let np = self.non_ip.1.checked_add(s.non_ip_packets);
        let (Some(b), Some(p), Some(nb), Some(np)) = (b, p, nb, np) else {
            return Err(MergeError::Overflow);
        };
        if b.checked_add(nb).is_none() || p.checked_add(np).is_none() {
            return Err(MergeError::Overflow);
        }
        // Each section's entries add up to its totals (the reader checks),
        // and all four count the same packets, so no tree can overflow now.
        self.totals = (b, p);
        self.non_ip = (nb, np);
        for (tree, section) in self.trees.t.iter_mut().zip(&s.sections) {
            for e in &section.entries {
                tree.add_prefix(e.prefix.key, e.prefix.len, e.bytes, e.packets);
            }
        }
        // The 2-D view is merged when every summary of the period has one
        // (an empty summary has nothing to add).
        if s.flows.is_empty() && s.total_packets() > s.non_ip_packets {
            self.items = None;
        } else if let Some(items) = self.items.as_mut() {
            items.extend(s.flows.iter().flat_map(|f| f.items()));
        }
        Ok(done)
    }

    /// The current period's summary, if anything was added.
    pub fn finish(&mut self) -> Option<Summary> {
        let (_, start, end) = self.current.take()?;
        let mut s = Summary {
            start_ns: start,
            end_ns: end,
            metric: self.metric,
            threshold: self.threshold,
            non_ip_bytes: self.non_ip.0,
            non_ip_packets: self.non_ip.1,
            sections: self
                .trees
                .sections(self.metric, self.threshold, self.coarsen),
            flows: Vec::new(),
        };
        if let Some(items) = self.items.replace(Vec::new()) {
            let aggs = |i: usize| -> Vec<crate::label::Prefix> {
                s.sections[i].entries.iter().map(|e| e.prefix).collect()
            };
            s.flows =
                crate::flows2d::aggregate(items, &aggs(0), &aggs(1), self.metric, self.threshold);
        }
        self.trees.clear();
        self.totals = (0, 0);
        self.non_ip = (0, 0);
        Some(s)
    }
}

/// Merges `summaries` (sorted here by start time) into periods of `interval_ns`.
pub fn merge_all(
    summaries: &mut [Summary],
    interval_ns: u64,
    budget: usize,
    metric: Metric,
    threshold: f64,
) -> Result<Vec<Summary>, MergeError> {
    merge_with(
        summaries,
        Merger::new(interval_ns, budget, metric, threshold),
    )
}

/// [`merge_all`] with a merger of one's own settings.
pub fn merge_with(summaries: &mut [Summary], mut m: Merger) -> Result<Vec<Summary>, MergeError> {
    summaries.sort_by_key(|s| (s.start_ns, s.end_ns));
    let mut out = Vec::new();
    for s in summaries.iter() {
        out.extend(m.add(s)?);
    }
    out.extend(m.finish());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{FlowKey, ProfilerConfig};
    use rand::{Rng, SeedableRng};

    #[test]
    fn merged_totals_are_exact() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
        let mut p = ProfilerConfig {
            interval_ns: 300_000_000_000,
            budget: 64,
            ..Default::default()
        }
        .build()
        .unwrap();
        let mut fives = Vec::new();
        let (mut bytes, mut packets) = (0u64, 0u64);
        let t0 = 1_795_316_400_000_000_000u64; // on the hour
        for i in 0..20_000u64 {
            let k = FlowKey {
                src: std::net::IpAddr::V4(rng.gen::<u32>().into()),
                dst: std::net::IpAddr::V4(rng.gen::<u32>().into()),
                protocol: 6,
                src_port: rng.gen(),
                dst_port: 80,
            };
            let len = rng.gen_range(64..1500);
            bytes += u64::from(len);
            packets += 1;
            fives.extend(p.add(t0 + 7 + i * 180_000_000, &k, len));
        }
        fives.extend(p.finish());
        assert_eq!(fives.len(), 12);
        let hour = merge_all(&mut fives, 3_600_000_000_000, 64, Metric::Bytes, 1.0).unwrap();
        assert_eq!(hour.len(), 1);
        for s in &hour[0].sections {
            assert_eq!((s.bytes, s.packets), (bytes, packets));
            let sum = s
                .entries
                .iter()
                .fold((0, 0), |a, e| (a.0 + e.bytes, a.1 + e.packets));
            assert_eq!(sum, (bytes, packets));
        }
        assert_eq!(hour[0].start_ns, t0 + 7);
        // Empty summaries (intervals without a packet) merge as nothing,
        // and an hour of only empty ones is an empty hour.
        let five = 300_000_000_000;
        for i in 0..12 {
            let start = t0 + 3_600_000_000_000 + i * five;
            fives.push(Summary::empty(start, start + five, Metric::Either, 1.0));
        }
        let hours = merge_all(&mut fives, 3_600_000_000_000, 64, Metric::Bytes, 1.0).unwrap();
        assert_eq!(hours.len(), 2);
        assert_eq!(
            (hours[0].total_bytes(), hours[0].total_packets()),
            (bytes, packets)
        );
        assert_eq!((hours[1].total_bytes(), hours[1].total_packets()), (0, 0));
        assert_eq!(hours[1].start_ns, t0 + 3_600_000_000_000);
    }
}
