//! The view: a time range of one section, re-aggregated, as stacked series.
//!
//! Every entry of every summary in the range (within the drilled prefix,
//! if any) is added into one tree, which the threshold aggregates as aguri
//! does: that gives the aggregates of the range. Then each entry is
//! counted, in its summary's time bucket, under the most specific of those
//! aggregates that contains it. So the series add up, bucket by bucket, to
//! what the summaries hold (within the drilled prefix: to that prefix's
//! count), and each aggregate's total is the sum of its series.

use std::collections::HashMap;

use aguri::label::{port_key, KeyKind, Prefix, V4_MAPPED, V4_MAPPED_LEN};
use aguri::{Metric, PatriciaTree, SectionKind, DEFAULT_BUDGET};
use serde::Serialize;

use crate::params::{BadRequest, Params};
use crate::{Catalog, DataSource, SourceError};

const NS: u64 = 1_000_000_000;

/// The bucket lengths offered, in seconds.
pub const STEPS: [u64; 20] = [
    1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10_800, 21_600, 43_200, 86_400,
    172_800, 604_800,
];

/// At most this many buckets in a view.
pub const MAX_BUCKETS: u64 = 2000;
/// At most this many aggregates × buckets in an answer (about 40 MB of JSON).
pub const MAX_CELLS: usize = 1_000_000;
/// An automatic step aims at about this many buckets.
const AUTO_BUCKETS: u64 = 300;
/// Times are between the epoch and 2100-01-01.
pub const MAX_TIME_S: u64 = 4_102_444_800;

/// Which summary the view draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ViewKind {
    Src,
    Dst,
    Sport,
    Dport,
    /// Source × destination (the summaries' 2-D view).
    Srcdst,
}

impl ViewKind {
    pub const ALL: [ViewKind; 5] = [
        ViewKind::Src,
        ViewKind::Dst,
        ViewKind::Sport,
        ViewKind::Dport,
        ViewKind::Srcdst,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ViewKind::Src => "src",
            ViewKind::Dst => "dst",
            ViewKind::Sport => "sport",
            ViewKind::Dport => "dport",
            ViewKind::Srcdst => "srcdst",
        }
    }

    /// The 1-D section it draws (none for source × destination).
    fn section(self) -> Option<SectionKind> {
        match self {
            ViewKind::Src => Some(SectionKind::SrcAddress),
            ViewKind::Dst => Some(SectionKind::DstAddress),
            ViewKind::Sport => Some(SectionKind::SrcPort),
            ViewKind::Dport => Some(SectionKind::DstPort),
            ViewKind::Srcdst => None,
        }
    }
}

/// A request for a view, every field checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Query {
    pub view: ViewKind,
    /// Seconds since the epoch; `None`: the last day of data.
    pub from: Option<u64>,
    pub to: Option<u64>,
    /// Bucket length in seconds, one of [`STEPS`]; `None`: chosen.
    pub step: Option<u64>,
    /// Percent, in [0.1, 100].
    pub threshold: f64,
    /// The drilled-into aggregate (its source, for source × destination).
    pub drill: Option<Prefix>,
    /// The drilled-into destination, for source × destination.
    pub drill_dst: Option<Prefix>,
    /// Only these probes (a fleet store's); empty: all.
    pub probes: Vec<String>,
}

impl Query {
    /// The query of `/api/v1/view?...` (the page's URL holds the same).
    pub fn from_params(p: &Params) -> Result<Query, BadRequest> {
        p.only(&["view", "from", "to", "step", "threshold", "drill", "probe"])?;
        let view = match p.get("view")? {
            None => ViewKind::Src,
            Some(v) => *ViewKind::ALL
                .iter()
                .find(|k| k.name() == v)
                .ok_or_else(|| BadRequest::new("view: one of src, dst, sport, dport, srcdst"))?,
        };
        let time = |name: &str| -> Result<Option<u64>, BadRequest> {
            match p.get(name)? {
                None => Ok(None),
                Some(v) => {
                    let t = p.integer(name, v)?;
                    if t > MAX_TIME_S {
                        return Err(BadRequest::new(format!(
                            "{name}: seconds since 1970, before 2100 ({MAX_TIME_S})"
                        )));
                    }
                    Ok(Some(t))
                }
            }
        };
        let (from, to) = (time("from")?, time("to")?);
        if let (Some(f), Some(t)) = (from, to) {
            if f >= t {
                return Err(BadRequest::new("from must be before to"));
            }
        }
        let step = match p.get("step")? {
            None => None,
            Some(v) => {
                let s = p.integer("step", v)?;
                if !STEPS.contains(&s) {
                    return Err(BadRequest::new(format!(
                        "step: one of {} seconds",
                        STEPS.map(|s| s.to_string()).join(", ")
                    )));
                }
                Some(s)
            }
        };
        let threshold = match p.get("threshold")? {
            None => 1.0,
            Some(v) => {
                let t: f64 = v
                    .parse()
                    .ok()
                    .filter(|t: &f64| (0.1..=100.0).contains(t))
                    .ok_or_else(|| BadRequest::new("threshold: a percentage from 0.1 to 100"))?;
                t
            }
        };
        let (drill, drill_dst) = match (p.get("drill")?, view.section()) {
            (None | Some(""), _) => (None, None),
            (Some(v), Some(section)) => {
                let kind = section.key_kind();
                let d = Prefix::parse(kind, v).map_err(|e| {
                    BadRequest::new(format!("drill: not a {} label: {e}", kind_name(kind)))
                })?;
                (Some(d), None)
            }
            (Some(v), None) => {
                let pair = v.split_once(' ').and_then(|(a, b)| {
                    let a = Prefix::parse(KeyKind::Address, a).ok()?;
                    let b = Prefix::parse(KeyKind::Address, b).ok()?;
                    Some((a, b))
                });
                let (a, b) = pair.ok_or_else(|| {
                    BadRequest::new("drill: SRC DST, two prefixes (10.1.0.0/16 192.0.2.0/24)")
                })?;
                (Some(a), Some(b))
            }
        };
        let probes = match p.get("probe")? {
            None | Some("") => Vec::new(),
            Some(v) => {
                let names: Vec<String> = v.split(',').map(str::to_string).collect();
                let ok = |n: &String| {
                    !n.is_empty()
                        && n.len() <= 64
                        && n.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
                };
                if names.len() > 100 || !names.iter().all(ok) {
                    return Err(BadRequest::new(
                        "probe: names of letters, digits, _, - and ., separated by commas",
                    ));
                }
                names
            }
        };
        Ok(Query {
            view,
            from,
            to,
            step,
            threshold,
            drill,
            drill_dst,
            probes,
        })
    }
}

fn kind_name(k: KeyKind) -> &'static str {
    match k {
        KeyKind::Address => "prefix (10.1.0.0/16, 2001:db8::/32)",
        KeyKind::Port => "port range (4:6:443, 4:17:1024/6)",
    }
}

/// A count of bytes and packets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Count {
    pub bytes: u64,
    pub packets: u64,
}

impl Count {
    fn add(&mut self, bytes: u64, packets: u64) {
        self.bytes = self.bytes.saturating_add(bytes);
        self.packets = self.packets.saturating_add(packets);
    }
}

/// One aggregate of the view and its series.
#[derive(Debug, Serialize)]
pub struct Aggregate {
    pub label: String,
    /// A root (`0.0.0.0/0`, `::/0`, `4:0:0/8` ...): what is in no other
    /// aggregate, drawn as "other".
    pub catch_all: bool,
    /// Enclosing aggregates in the list.
    pub depth: usize,
    /// Over the range: the sums of `bytes` and `packets`.
    pub total: Count,
    /// Per bucket; `null` where no summary covers the bucket.
    pub bytes: Vec<Option<u64>>,
    pub packets: Vec<Option<u64>>,
}

/// The answer to a [`Query`].
#[derive(Debug, Serialize)]
pub struct ViewAnswer {
    pub view: ViewKind,
    /// The range drawn, aligned to the step: `[from, to)`, seconds.
    pub from: u64,
    pub to: u64,
    pub step: u64,
    pub threshold: f64,
    pub drill: Option<String>,
    /// Bucket starts, seconds.
    pub buckets: Vec<u64>,
    /// Whether a summary covers each bucket.
    pub covered: Vec<bool>,
    /// Summaries read, and the extent of the source.
    pub summaries: usize,
    pub first: u64,
    pub last: u64,
    /// Everything the summaries of the range counted (IP or not).
    pub total: Count,
    pub non_ip: Count,
    /// The section's count within the drilled prefix (all of it when
    /// not drilled): the sum of the aggregates' totals.
    pub within: Count,
    /// In preorder; each entry counted once, under the most specific
    /// aggregate that holds it.
    pub aggregates: Vec<Aggregate>,
    /// What the answer lacks, if anything (summaries without a 2-D view).
    pub note: Option<String>,
}

/// Why a view could not be made.
#[derive(Debug)]
pub enum ViewError {
    Bad(BadRequest),
    Source(SourceError),
}

impl From<BadRequest> for ViewError {
    fn from(e: BadRequest) -> Self {
        ViewError::Bad(e)
    }
}

impl From<SourceError> for ViewError {
    fn from(e: SourceError) -> Self {
        ViewError::Source(e)
    }
}

/// The smallest offered step at least `s` seconds (the largest if none).
fn step_at_least(s: u64) -> u64 {
    STEPS
        .iter()
        .copied()
        .find(|&x| x >= s)
        .unwrap_or(STEPS[STEPS.len() - 1])
}

/// Answers `q` from `src` (whose catalog is `cat`).
pub fn answer(src: &dyn DataSource, cat: &Catalog, q: &Query) -> Result<ViewAnswer, ViewError> {
    let finest = cat.levels.first().map_or(1, |l| l.interval_s.max(1));
    // A stray file from the far future cannot move times past what the
    // parameters allow (nor overflow them).
    let last = cat.last_ns.div_ceil(NS).min(MAX_TIME_S);
    let first = (cat.first_ns / NS).min(MAX_TIME_S - 1);
    let to = q.to.unwrap_or(last.max(1));
    let from = q.from.unwrap_or_else(|| {
        to.saturating_sub(86_400)
            .max(first.min(to.saturating_sub(1)))
    });
    if from >= to {
        return Err(BadRequest::new("from must be before to").into());
    }
    let step = match q.step {
        Some(s) => s.max(step_at_least(finest)),
        None => step_at_least(finest.max((to - from).div_ceil(AUTO_BUCKETS))),
    };
    let from = from - from % step;
    let to = to.div_ceil(step) * step;
    let n = (to - from) / step;
    if n > MAX_BUCKETS {
        return Err(BadRequest::new(format!(
            "the range holds {n} buckets of {step} s: at most {MAX_BUCKETS}; choose a longer step or a shorter range"
        ))
        .into());
    }
    let n = n as usize;
    if let Some(p) = q.probes.iter().find(|p| !cat.probes.contains(p)) {
        return Err(BadRequest::new(format!("probe: no probe '{p}' here")).into());
    }
    let (sums, count) = match src.bucketed(&q.probes, from * NS, to * NS, step * NS)? {
        Some(b) => (b.summaries, b.count),
        None => {
            let v = src.summaries(&q.probes, from * NS, to * NS, step * NS)?;
            let n = v.len();
            (v, n)
        }
    };
    let Some(kind) = q.view.section() else {
        return answer_2d(q, &sums, (from, to, step, n), (first, last, count));
    };
    let key_kind = kind.key_kind();
    let within = |p: &Prefix| q.drill.is_none_or(|d| d.contains(p));

    // The aggregates of the whole range.
    let mut pins: Vec<(u128, u8)> = match key_kind {
        KeyKind::Address => vec![(V4_MAPPED, V4_MAPPED_LEN)],
        KeyKind::Port => vec![(port_key(4, 0, 0), 8), (port_key(6, 0, 0), 8)],
    };
    if let Some(d) = q.drill {
        if !pins.contains(&(d.key, d.len)) && d.len > 0 {
            pins.push((d.key, d.len));
        }
    }
    let mut tree = PatriciaTree::new(key_kind, DEFAULT_BUDGET, &pins);
    let mut total = Count::default();
    let mut non_ip = Count::default();
    if !fits(&sums) {
        return Err(ViewError::Source(SourceError(OVERFLOW.into())));
    }
    for s in &sums {
        total.add(s.total_bytes(), s.total_packets());
        non_ip.add(s.non_ip_bytes, s.non_ip_packets);
        for e in &s.section(kind).entries {
            if within(&e.prefix) {
                tree.add_prefix(e.prefix.key, e.prefix.len, e.bytes, e.packets);
            }
        }
    }
    let mut aggs: Vec<Prefix> = tree
        .aggregate(Metric::Either, q.threshold)
        .into_iter()
        .filter(|e| e.bytes > 0 || e.packets > 0)
        .map(|e| e.prefix)
        .collect();
    // Nothing folds above the drilled prefix (it is pinned), but should
    // anything lie outside it, it is the drilled prefix's own.
    if let Some(d) = q.drill {
        for a in &mut aggs {
            if !d.contains(a) {
                *a = d;
            }
        }
    }
    let root = q.drill.unwrap_or(Prefix::new(key_kind, 0, 0));
    if !aggs.contains(&root) {
        aggs.insert(0, root);
    }
    aggs.sort_by_key(|p| (p.key, p.len));
    aggs.dedup();
    // Preorder: by key, then shorter first.
    let index: HashMap<(u128, u8), usize> = aggs
        .iter()
        .enumerate()
        .map(|(i, p)| ((p.key, p.len), i))
        .collect();
    let mut lengths: Vec<u8> = aggs.iter().map(|p| p.len).collect();
    lengths.sort_unstable_by(|a, b| b.cmp(a));
    lengths.dedup();
    let holder = |p: &Prefix| -> usize {
        for &len in lengths.iter().filter(|&&l| l <= p.len) {
            let a = Prefix::new(key_kind, p.key, len);
            if let Some(&i) = index.get(&(a.key, a.len)) {
                return i;
            }
        }
        index[&(root.key, root.len)]
    };

    if aggs.len().saturating_mul(n) > MAX_CELLS {
        return Err(BadRequest::new(format!(
            "{} aggregates over {n} buckets are too many to draw (at most {MAX_CELLS} values): raise the threshold or the step",
            aggs.len()
        ))
        .into());
    }
    let mut bytes = vec![vec![None::<u64>; n]; aggs.len()];
    let mut packets = vec![vec![None::<u64>; n]; aggs.len()];
    let mut covered = vec![false; n];
    for s in &sums {
        let b0 = cover(s, (from, step), &mut covered);
        for e in &s.section(kind).entries {
            if !within(&e.prefix) || (e.bytes == 0 && e.packets == 0) {
                continue;
            }
            let i = holder(&e.prefix);
            let cell = &mut bytes[i][b0];
            *cell = Some(cell.unwrap_or(0).saturating_add(e.bytes));
            let cell = &mut packets[i][b0];
            *cell = Some(cell.unwrap_or(0).saturating_add(e.packets));
        }
    }
    // Aggregates that hold nothing in the range are not shown (the root
    // of an empty range aside, so that an answer always has one).
    let mut within_count = Count::default();
    let mut out: Vec<Aggregate> = Vec::with_capacity(aggs.len());
    let mut stack: Vec<Prefix> = Vec::new();
    for (i, p) in aggs.iter().enumerate() {
        let (b, k, t) = series(
            std::mem::take(&mut bytes[i]),
            std::mem::take(&mut packets[i]),
            &covered,
        );
        if t == Count::default() {
            continue;
        }
        while stack.last().is_some_and(|top| !top.contains(p)) {
            stack.pop();
        }
        let depth = stack.len();
        stack.push(*p);
        within_count.add(t.bytes, t.packets);
        out.push(Aggregate {
            label: p.to_string(),
            catch_all: p.is_catch_all(),
            depth,
            total: t,
            bytes: b,
            packets: k,
        });
    }
    if out.is_empty() {
        out.push(Aggregate {
            label: root.to_string(),
            catch_all: root.is_catch_all(),
            depth: 0,
            total: Count::default(),
            bytes: covered.iter().map(|&c| c.then_some(0)).collect(),
            packets: covered.iter().map(|&c| c.then_some(0)).collect(),
        });
    }
    let aggregates = out;
    Ok(ViewAnswer {
        view: q.view,
        from,
        to,
        step,
        threshold: q.threshold,
        drill: q.drill.map(|d| d.to_string()),
        buckets: (0..n as u64).map(|i| from + i * step).collect(),
        covered,
        summaries: count,
        first,
        last,
        total,
        non_ip,
        within: within_count,
        aggregates,
        note: None,
    })
}

/// Marks the buckets (of `step` seconds from `from`) summary `s` covers;
/// returns the one it starts in, where its counts go.
fn cover(s: &aguri::Summary, (from, step): (u64, u64), covered: &mut [bool]) -> usize {
    let last = covered.len().saturating_sub(1);
    let bucket = |ns: u64| (((ns / NS).saturating_sub(from) / step) as usize).min(last);
    let b0 = bucket(s.start_ns);
    let b1 = bucket(s.end_ns.saturating_sub(1).max(s.start_ns));
    for c in &mut covered[b0..=b1] {
        *c = true;
    }
    b0
}

const OVERFLOW: &str = "the summaries of the range count more than 64 bits hold";

/// Whether the summaries' totals add up within 64 bits (each summary's
/// entries add up to its totals, which its reader checked, so then no sum
/// the view makes can overflow).
fn fits(sums: &[std::sync::Arc<aguri::Summary>]) -> bool {
    let mut t = (0u64, 0u64);
    for s in sums {
        let b = s.sections[0].bytes.checked_add(s.non_ip_bytes);
        let p = s.sections[0].packets.checked_add(s.non_ip_packets);
        match (
            b.and_then(|b| t.0.checked_add(b)),
            p.and_then(|p| t.1.checked_add(p)),
        ) {
            (Some(b), Some(p)) => t = (b, p),
            _ => return false,
        }
    }
    true
}

/// An aggregate's per-bucket counts with 0 in covered buckets that had
/// none, and their sums.
fn series(
    mut bytes: Vec<Option<u64>>,
    mut packets: Vec<Option<u64>>,
    covered: &[bool],
) -> (Vec<Option<u64>>, Vec<Option<u64>>, Count) {
    for v in [&mut bytes, &mut packets] {
        for (x, &c) in v.iter_mut().zip(covered) {
            if c && x.is_none() {
                *x = Some(0);
            }
        }
    }
    let sum = |v: &[Option<u64>]| v.iter().flatten().fold(0u64, |a, &x| a.saturating_add(x));
    let t = Count {
        bytes: sum(&bytes),
        packets: sum(&packets),
    };
    (bytes, packets, t)
}

/// Source × destination: the flows of the summaries' 2-D views in the
/// range, re-aggregated as aguri3 does ([`aguri::flows2d::TwoD`]) over the
/// range's source and destination aggregates. A drill-down into `S D`
/// takes the traffic the top view counted in flows within `S × D` and
/// aggregates it again, nothing folding above `S` and `D`: its flows add
/// up to those flows.
fn answer_2d(
    q: &Query,
    sums: &[std::sync::Arc<aguri::Summary>],
    (from, to, step, n): (u64, u64, u64, usize),
    (first, last, count): (u64, u64, usize),
) -> Result<ViewAnswer, ViewError> {
    use aguri::flows2d::{Item, TwoD};
    let mut total = Count::default();
    let mut non_ip = Count::default();
    let mut covered = vec![false; n];
    let mut items: Vec<(usize, Item)> = Vec::new();
    if !fits(sums) {
        return Err(ViewError::Source(SourceError(OVERFLOW.into())));
    }
    let mut without = 0usize;
    let mut flowless = vec![false; n];
    for s in sums {
        total.add(s.total_bytes(), s.total_packets());
        non_ip.add(s.non_ip_bytes, s.non_ip_packets);
        let b0 = cover(s, (from, step), &mut covered);
        if s.flows.is_empty() && s.sections[0].packets > 0 && !flowless[b0] {
            flowless[b0] = true;
            without += 1;
        }
        for f in &s.flows {
            items.extend(f.items().map(|it| (b0, it)));
        }
    }
    // The 1-D aggregates of the items' sources and destinations.
    let aggs = |items: &[(usize, Item)], dst: bool, pin: Option<Prefix>| -> Vec<Prefix> {
        let mut pins = vec![(V4_MAPPED, V4_MAPPED_LEN)];
        pins.extend(pin.map(|p| (p.key, p.len)));
        let mut t = PatriciaTree::new(KeyKind::Address, DEFAULT_BUDGET, &pins);
        for (_, it) in items {
            let p = if dst { it.dst } else { it.src };
            t.add_prefix(p.key, p.len, it.bytes, it.packets);
        }
        t.aggregate(Metric::Either, q.threshold)
            .into_iter()
            .filter(|e| e.bytes > 0 || e.packets > 0)
            .map(|e| e.prefix)
            .collect()
    };
    let build = |items: &[(usize, Item)], roots: Option<(Prefix, Prefix)>| {
        let (rs, rd): (Vec<Prefix>, Vec<Prefix>) = match roots {
            Some((s, d)) => (vec![s], vec![d]),
            None => (Vec::new(), Vec::new()),
        };
        TwoD::build(
            items.iter().map(|x| x.1),
            &aggs(items, false, rs.first().copied()),
            &aggs(items, true, rd.first().copied()),
            (&rs, &rd),
            Metric::Either,
            q.threshold,
        )
    };
    let top = build(&items, None);
    let (view, items) = match (q.drill, q.drill_dst) {
        (Some(s), Some(d)) => {
            let kept: Vec<(usize, Item)> = items
                .into_iter()
                .filter(|(_, it)| {
                    top.flow_of(it).is_some_and(|i| {
                        s.contains(&top.flows[i].src) && d.contains(&top.flows[i].dst)
                    })
                })
                .collect();
            (build(&kept, Some((s, d))), kept)
        }
        _ => (top, items),
    };
    let m = view.flows.len();
    if m.saturating_mul(n) > MAX_CELLS {
        return Err(BadRequest::new(format!(
            "{m} flows over {n} buckets are too many to draw (at most {MAX_CELLS} values): raise the threshold or the step"
        ))
        .into());
    }
    let mut bytes = vec![vec![None::<u64>; n]; m];
    let mut packets = vec![vec![None::<u64>; n]; m];
    for (b, it) in &items {
        if let Some(i) = view.flow_of(it) {
            let cell = &mut bytes[i][*b];
            *cell = Some(cell.unwrap_or(0).saturating_add(it.bytes));
            let cell = &mut packets[i][*b];
            *cell = Some(cell.unwrap_or(0).saturating_add(it.packets));
        }
    }
    let mut within = Count::default();
    let mut aggregates = Vec::with_capacity(m);
    for (i, f) in view.flows.iter().enumerate() {
        let (b, k, t) = series(
            std::mem::take(&mut bytes[i]),
            std::mem::take(&mut packets[i]),
            &covered,
        );
        if t == Count::default() {
            continue;
        }
        within.add(t.bytes, t.packets);
        let depth = view
            .flows
            .iter()
            .filter(|g| *g != f && g.src.contains(&f.src) && g.dst.contains(&f.dst))
            .count();
        aggregates.push(Aggregate {
            label: format!("{} {}", f.src, f.dst),
            catch_all: f.src.is_catch_all() && f.dst.is_catch_all(),
            depth,
            total: t,
            bytes: b,
            packets: k,
        });
    }
    Ok(ViewAnswer {
        view: q.view,
        from,
        to,
        step,
        threshold: q.threshold,
        drill: match (q.drill, q.drill_dst) {
            (Some(s), Some(d)) => Some(format!("{s} {d}")),
            _ => None,
        },
        buckets: (0..n as u64).map(|i| from + i * step).collect(),
        covered,
        summaries: count,
        first,
        last,
        total,
        non_ip,
        within,
        aggregates,
        note: (without > 0).then(|| {
            format!("{without} of the {n} buckets hold summaries without a 2-D view (profile with --2d)")
        }),
    })
}
