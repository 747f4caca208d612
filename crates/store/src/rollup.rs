//! Re-aggregation at the server: `kansoku store merge` and the web view's
//! buckets.
//!
//! Two steps run in ClickHouse, in temporary tables of one HTTP session:
//!
//! 1. **Each summary once, without a row-level `GROUP BY id`.** A summary's
//!    entries add up, in each of the four views, to its totals, which its
//!    `summaries` row holds; so one pass sums each id's entry rows, and an
//!    id whose rows add up to four times its totals has them exactly once
//!    (a repeated send adds a whole copy, a send cut short only adds rows).
//!    When every id in the range is so, which is all but always, the rows
//!    are summed as they are; otherwise only the others (repeated, or
//!    orphans whose summary row never came) are set apart, the repeated
//!    ones de-duplicated row by row and the orphans left out. Grouping
//!    every row by its id, which exactness before merges would otherwise
//!    need, takes a hash table of every row: for a year of ten probes, 233M
//!    rows, 18.16 ran out of 18 GiB; this needs one entry per summary.
//! 2. **The threshold folding.** In a period with totals T, a prefix whose
//!    bytes and packets both stay below the threshold share of T can hold
//!    no reported entry: everything under it folds into its nearest
//!    reported ancestor, which lies above it. So the server computes the
//!    *heavy* prefixes (every ancestor of every entry whose sums reach the
//!    threshold, a few hundred per view) and replaces each maximal light
//!    prefix's entries by one entry at their longest common prefix (the
//!    node the Patricia tree would hold for them), keeping the pinned
//!    family roots (`::ffff:0:0/96`, the IPv4 and IPv6 port families) and
//!    their ancestors apart. The tree built from that reduced set folds to
//!    exactly what the full set folds to (the nodes above every light
//!    prefix are the same, and so are the counts reaching them); the client
//!    builds it from a few hundred rows per period rather than every
//!    distinct key of a year.
//!
//! The answer is what `kansoku profile --merge` gives on the same
//! summaries whenever its `--budget` holds every key of a period (a smaller
//! budget makes the file merge reclaim leaves in the order it read them, an
//! approximation the store does not make).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use aguri::label::{mask, Prefix};
use aguri::{Entry, Merger, Metric, Summary};

use crate::client::{Client, StoreError};
use crate::schema::{add_flow_row, blank, filter, seal, u, ByPair};

/// How long one statement of a re-aggregation may take (a year of a
/// fleet is seconds; the default timeout is for small statements).
const LONG: Duration = Duration::from_secs(1800);

/// A re-aggregation: which summaries, into which periods, how folded.
#[derive(Clone, Debug)]
pub struct MergeSpec {
    /// Probes (all when empty).
    pub probes: Vec<String>,
    /// Summaries starting in `[from_ns, to_ns)`.
    pub from_ns: u64,
    pub to_ns: u64,
    /// Periods of this length aligned to multiples of it (0: one period).
    pub interval_ns: u64,
    pub metric: Metric,
    /// Percent, as `profile --threshold`.
    pub threshold: f64,
    /// aguri2's coarsening, as `profile --coarsen`.
    pub coarsen: bool,
    /// Nodes per tree at the least (raised to hold every reduced key).
    pub budget: usize,
}

/// What a re-aggregation read: summaries in, rows the server sent back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MergeStats {
    pub summaries: u64,
    /// Summaries whose rows were there more than once (de-duplicated row by row).
    pub repeated: u64,
    /// Ids with entry rows and no summary row (a send cut short and never
    /// repeated): not counted.
    pub orphans: u64,
    /// Distinct (period, view, prefix) keys summed at the server.
    pub keys: u64,
    /// Rows left after the folding (what crossed the network).
    pub reduced: u64,
}

static SESSIONS: AtomicU64 = AtomicU64::new(0);

/// One HTTP session of the server (its temporary tables live as long).
struct Session<'a> {
    c: &'a Client,
    id: String,
}

impl<'a> Session<'a> {
    fn new(c: &'a Client) -> Session<'a> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let n = SESSIONS.fetch_add(1, Ordering::Relaxed);
        let id = format!("kansoku-{}-{nanos}-{n}", std::process::id());
        let s = Session { c, id };
        // A server whose sessions are shared (one process, as chdb's) may
        // hold the tables of an earlier run.
        s.drop_tables();
        s
    }

    fn run(&self, sql: &str) -> Result<String, StoreError> {
        self.c.execute_in_session(&self.id, sql, LONG)
    }
}

impl Session<'_> {
    fn drop_tables(&self) {
        for t in ["kx_h", "kx_e", "kx_bad", "kx_ids", "kx_x"] {
            let _ = self.run(&format!("DROP TEMPORARY TABLE IF EXISTS {t}"));
        }
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        self.drop_tables();
    }
}

/// The masks of the first 0..=128 bits of a 128-bit key, as a ClickHouse
/// array literal of the high or low halves (`arr[L + 1]`: arrays count
/// from 1).
fn masks(high: bool) -> String {
    let v: Vec<String> = (0..=128u8)
        .map(|l| {
            let m = mask(l);
            (if high { (m >> 64) as u64 } else { m as u64 }).to_string()
        })
        .collect();
    format!("[{}]", v.join(","))
}

/// The first `l` bits of the 128-bit key `hi`:`lo` (SQL over columns or
/// constants; `l` an expression from 0 to 128).
fn trunc_hi(hi: &str, l: &str) -> String {
    format!(
        "bitAnd(toUInt64({hi}), arrayElement({}, {l} + 1))",
        masks(true)
    )
}
fn trunc_lo(lo: &str, l: &str) -> String {
    format!(
        "bitAnd(toUInt64({lo}), arrayElement({}, {l} + 1))",
        masks(false)
    )
}

/// Whether prefix `phi`:`plo`/`L` of `view` is a pinned family root or an
/// ancestor of one (these always stay nodes of their own).
fn pinned() -> String {
    let v4 = (aguri::label::V4_MAPPED as u64).to_string();
    let port = |version: u64| (version << 56).to_string();
    format!(
        "((view < 2 AND L <= 96 AND phi = 0 AND plo = {}) OR (view >= 2 AND L <= 8 AND plo = 0 AND \
         (phi = {} OR phi = {})))",
        trunc_lo(&v4, "L"),
        trunc_hi(&port(4), "L"),
        trunc_hi(&port(6), "L")
    )
}

/// A threshold below the true one by a margin (so that a prefix found
/// light here is light by the tree's own floating-point test too).
fn threshold_sql(total: &str, percent: f64) -> String {
    format!("toUInt64(greatest(toUInt64(floor({total} * {percent:e} / 100 * 0.999999)), 1) - 1)")
}

/// Builds `kx_ids` (each summary of the range once: its period `b`,
/// times, totals and whether its entry rows are there exactly once) and
/// `kx_e` (entries summed per period and key, each summary counted once).
fn sums(
    s: &Session,
    probes: &[String],
    from_ns: u64,
    to_ns: u64,
    b: &dyn Fn(&str) -> String,
) -> Result<(u64, u64), StoreError> {
    let w = filter(probes, from_ns, to_ns)?;
    let db = &s.c.url.database;
    // Each id's entry rows added up (the four views together: a copy of a
    // summary's rows adds 4x its totals, and a send cut short only adds
    // rows, so 4x exactly means once).
    s.run(&format!(
        "CREATE TEMPORARY TABLE kx_x ENGINE = Memory AS SELECT id, sum(bytes) AS xb, sum(packets) AS xp \
         FROM {db}.entries WHERE {w} GROUP BY id"
    ))?;
    s.run(&format!(
        "CREATE TEMPORARY TABLE kx_ids ENGINE = Memory AS SELECT id, b, s, e, hb, hp, nb, np, \
         toUInt8(hb < 4611686018427387904 AND hp < 4611686018427387904 AND xb = 4 * hb AND xp = 4 * hp) AS clean, \
         toUInt8(id GLOBAL IN (SELECT id FROM {db}.flows WHERE {w})) AS flows, \
         toFloat64(hb) + toFloat64(nb) AS fb, toFloat64(hp) + toFloat64(np) AS fp FROM \
         (SELECT id, {} AS b, any(start_ns) AS s, any(end_ns) AS e, any(bytes) AS hb, any(packets) AS hp, \
         any(non_ip_bytes) AS nb, any(non_ip_packets) AS np FROM {db}.summaries WHERE {w} GROUP BY id) AS h \
         ANY LEFT JOIN kx_x USING id",
        b("any(start_ns)")
    ))?;
    // The ids whose rows are not there exactly once with their summary:
    // repeated (their summary row is there) or orphans (it never came).
    s.run(
        "CREATE TEMPORARY TABLE kx_bad ENGINE = Memory AS SELECT id FROM kx_x \
         WHERE id NOT IN (SELECT id FROM kx_ids WHERE clean = 1)",
    )?;
    let count = |sql: &str| -> Result<u64, StoreError> { u(Some(s.run(sql)?.trim())) };
    let bad = count("SELECT count() FROM kx_bad")?;
    let repeated = count("SELECT count() FROM kx_bad WHERE id IN (SELECT id FROM kx_ids)")?;
    let rows = |cond: &str| {
        format!(
            "SELECT {} AS b, view, key_hi, key_lo, len, bytes AS bb, packets AS pp FROM {db}.entries WHERE {w}{cond}",
            b("start_ns")
        )
    };
    // The common case, nothing sent twice: every row as it is.
    let body = if bad == 0 {
        rows("")
    } else {
        format!(
            "{} UNION ALL SELECT {} AS b, view, key_hi, key_lo, len, any(bytes) AS bb, any(packets) AS pp \
             FROM {db}.entries WHERE {w} AND id GLOBAL IN (SELECT id FROM kx_bad WHERE id IN (SELECT id FROM kx_ids)) \
             GROUP BY id, view, key_hi, key_lo, len",
            rows(" AND id GLOBAL NOT IN (SELECT id FROM kx_bad)"),
            b("any(start_ns)")
        )
    };
    s.run(&format!(
        "CREATE TEMPORARY TABLE kx_e ENGINE = Memory AS SELECT b, view, key_hi, key_lo, len, sum(bb) AS bb, \
         sum(pp) AS pp FROM ({body}) GROUP BY b, view, key_hi, key_lo, len"
    ))?;
    Ok((repeated, bad - repeated))
}

/// The 2-D view's rows of the range summed per period (each summary once).
fn flows_by(
    s: &Session,
    probes: &[String],
    from_ns: u64,
    to_ns: u64,
    b: &dyn Fn(&str) -> String,
) -> Result<BTreeMap<u64, ByPair>, StoreError> {
    let w = filter(probes, from_ns, to_ns)?;
    let db = &s.c.url.database;
    let cols = "src_hi, src_lo, src_len, dst_hi, dst_lo, dst_len, proto, sport, sport_len, dport, dport_len";
    let body = s.run(&format!(
        "SELECT b, {cols}, sum(bb), sum(pp) FROM (SELECT {} AS b, {cols}, any(bytes) AS bb, any(packets) AS pp \
         FROM {db}.flows WHERE {w} AND id GLOBAL IN (SELECT id FROM kx_ids) GROUP BY id, {cols}) GROUP BY b, {cols} \
         ORDER BY b, {cols} FORMAT TabSeparated",
        b("any(start_ns)")
    ))?;
    let mut flows: BTreeMap<u64, ByPair> = BTreeMap::new();
    for line in body.lines() {
        let v: Vec<&str> = line.split('\t').collect();
        if v.len() != 14 {
            return Err(StoreError::Server(200, "a flows row does not read".into()));
        }
        add_flow_row(flows.entry(u(v.first().copied())?).or_default(), &v)?;
    }
    Ok(flows)
}

/// A period's head: summaries, first start, last end, non-IP and IP
/// totals, and whether every summary with IP traffic has the 2-D view.
struct Head {
    count: u64,
    summary: Summary,
    totals: (u64, u64),
    all_2d: bool,
}

fn heads(s: &Session) -> Result<BTreeMap<u64, Head>, StoreError> {
    let body = s.run(
        "SELECT b, count(), min(s), max(e), sum(nb), sum(np), sum(hb), sum(hp), countIf(hp > 0 AND flows = 0), \
         sum(fb) >= 18446744073709551615 OR sum(fp) >= 18446744073709551615 FROM kx_ids GROUP BY b ORDER BY b \
         FORMAT TabSeparated",
    )?;
    let mut out = BTreeMap::new();
    for line in body.lines() {
        let mut f = line.split('\t');
        let b = u(f.next())?;
        let count = u(f.next())?;
        let mut summary = blank(u(f.next())?, u(f.next())?, Metric::Either, 1.0);
        summary.non_ip_bytes = u(f.next())?;
        summary.non_ip_packets = u(f.next())?;
        let totals = (u(f.next())?, u(f.next())?);
        let all_2d = u(f.next())? == 0;
        if u(f.next())? != 0 {
            return Err(StoreError::Usage(
                "the summaries of a period add up to more than 64 bits can count: choose shorter periods".into(),
            ));
        }
        out.insert(
            b,
            Head {
                count,
                summary,
                totals,
                all_2d,
            },
        );
    }
    Ok(out)
}

/// The summaries of `spec`'s range re-aggregated into its periods at the
/// server, exactly as `kansoku profile --merge` re-aggregates them.
pub fn merge(c: &Client, spec: &MergeSpec) -> Result<(Vec<Summary>, MergeStats), StoreError> {
    if !spec.threshold.is_finite() || spec.threshold < 0.0 || spec.threshold > 100.0 {
        return Err(StoreError::Usage(
            "the threshold is a percent from 0 to 100".into(),
        ));
    }
    let s = Session::new(c);
    let iv = spec.interval_ns;
    let b = move |col: &str| {
        if iv == 0 {
            "toUInt64(0)".to_string()
        } else {
            format!("intDiv({col}, {iv})")
        }
    };
    let (repeated, orphans) = sums(&s, &spec.probes, spec.from_ns, spec.to_ns, &b)?;
    let mut periods = heads(&s)?;
    let mut stats = MergeStats {
        summaries: periods.values().map(|h| h.count).sum(),
        repeated,
        orphans,
        ..Default::default()
    };
    if periods.is_empty() {
        return Ok((Vec::new(), stats));
    }
    stats.keys = u(Some(s.run("SELECT count() FROM kx_e")?.trim()))?;
    // The heavy prefixes: every ancestor (and the key itself) whose sums
    // reach the period's threshold, and the pinned roots' ancestors.
    let pct = spec.threshold;
    let heavy = match spec.metric {
        Metric::Bytes => "sb >= tb",
        Metric::Packets => "sp >= tp",
        Metric::Either => "(sb >= tb OR sp >= tp)",
    };
    let (phi, plo) = (trunc_hi("key_hi", "L"), trunc_lo("key_lo", "L"));
    // A key's prefixes from `start` on: below it, every prefix of a key in
    // a pinned family is the family root or its ancestor (forced heavy, so
    // neither counted nor looked up), which spares 97 of an IPv4 key's 129.
    let start = "toUInt32(if(view < 2, if(key_hi = 0 AND bitShiftRight(key_lo, 32) = 65535 AND len >= 97, 97, 0), \
                 if(bitShiftRight(key_hi, 56) IN (4, 6) AND len >= 9, 9, 0)))";
    let prefixes = format!("arraySlice(range(toUInt32(len + 1)), {start} + 1)");
    s.run(&format!(
        "CREATE TEMPORARY TABLE kx_h ENGINE = Memory AS SELECT b, view, L, phi, plo, toUInt8(1) AS f FROM \
         (SELECT b, view, L, {phi} AS phi, {plo} AS plo, sum(bb) AS sb, sum(pp) AS sp FROM kx_e \
         ARRAY JOIN {prefixes} AS L GROUP BY b, view, L, phi, plo) AS s ALL INNER JOIN \
         (SELECT b, {} AS tb, {} AS tp FROM kx_ids GROUP BY b) AS t USING b WHERE {heavy} OR {}",
        threshold_sql("sum(hb)", pct),
        threshold_sql("sum(hp)", pct),
        pinned()
    ))?;
    // Each key under its first light prefix (or itself, when every prefix
    // of it is heavy); each group one row with what its keys share.
    let (ghi, glo) = (trunc_hi("key_hi", "g"), trunc_lo("key_lo", "g"));
    let body = s.run(&format!(
        "SELECT b, view, sum(bb), sum(pp), groupBitAnd(key_hi), groupBitOr(key_hi), groupBitAnd(key_lo), \
         groupBitOr(key_lo), min(len) FROM (SELECT b, view, key_hi, key_lo, len, any(bb) AS bb, any(pp) AS pp, \
         toUInt16(least(any({start}) + sum(f), len)) AS g FROM (SELECT b, view, key_hi, key_lo, len, bb, pp, L, \
         {phi} AS phi, {plo} AS plo FROM kx_e ARRAY JOIN {prefixes} AS L) AS k ANY LEFT JOIN kx_h \
         USING b, view, L, phi, plo GROUP BY b, view, key_hi, key_lo, len) GROUP BY b, view, g, {ghi}, {glo} \
         ORDER BY b, view FORMAT TabSeparated"
    ))?;
    for line in body.lines() {
        let mut f = line.split('\t');
        let b = u(f.next())?;
        let view = u(f.next())? as usize;
        let (bytes, packets) = (u(f.next())?, u(f.next())?);
        let (and_hi, or_hi, and_lo, or_lo) =
            (u(f.next())?, u(f.next())?, u(f.next())?, u(f.next())?);
        let min_len = u(f.next())?;
        let (Some(h), true) = (periods.get_mut(&b), view < 4) else {
            return Err(StoreError::Server(
                200,
                "a re-aggregated row does not read".into(),
            ));
        };
        let common = ((u128::from(and_hi ^ or_hi)) << 64) | u128::from(and_lo ^ or_lo);
        let len = u64::from(common.leading_zeros()).min(min_len).min(128) as u8;
        let key = ((u128::from(and_hi) << 64) | u128::from(and_lo)) & mask(len);
        let sec = &mut h.summary.sections[view];
        sec.entries.push(Entry {
            prefix: Prefix::new(sec.kind.key_kind(), key, len),
            bytes,
            packets,
        });
        stats.reduced += 1;
    }
    // The 2-D view, where every summary of a period has it.
    if periods.values().any(|h| h.all_2d && h.totals.1 > 0) {
        let mut flows = flows_by(&s, &spec.probes, spec.from_ns, spec.to_ns, &b)?;
        for (b, h) in periods.iter_mut() {
            if let (true, Some(fl)) = (h.all_2d, flows.remove(b)) {
                h.summary.flows = fl.into_values().collect();
            }
        }
    }
    let widest = periods
        .values()
        .flat_map(|h| h.summary.sections.iter().map(|s| s.entries.len()))
        .max()
        .unwrap_or(0);
    let budget = spec.budget.max(2 * widest + 16);
    let mut m = Merger::new(iv, budget, spec.metric, spec.threshold).coarsen(spec.coarsen);
    let mut out = Vec::with_capacity(periods.len());
    for (_, mut h) in periods {
        let sums = seal(&mut h.summary);
        for (kind, (b, p)) in aguri::summary::SectionKind::ALL.into_iter().zip(sums) {
            if (b, p) != h.totals {
                return Err(StoreError::Server(
                    200,
                    format!(
                        "the {} entries of a period add up to {b} bytes {p} packets, its summaries to {} {} \
                         (rows missing or corrupted in the store)",
                        kind.name(),
                        h.totals.0,
                        h.totals.1
                    ),
                ));
            }
        }
        if h.totals == (0, 0) {
            // An empty section's root, which seal adds, is no key.
            for sec in &mut h.summary.sections {
                sec.entries.clear();
            }
        }
        out.extend(
            m.add(&h.summary)
                .map_err(|e| StoreError::Usage(e.to_string()))?,
        );
    }
    out.extend(m.finish());
    Ok((out, stats))
}

/// `kx_e` per bucket of `step_ns` from `from_ns` (the web view's series):
/// one summary per bucket that has any, entries summed at the server and
/// each summary counted once, and how many summaries went in.
pub fn bucketed(
    c: &Client,
    probes: &[String],
    from_ns: u64,
    to_ns: u64,
    step_ns: u64,
) -> Result<(Vec<Summary>, usize), StoreError> {
    let s = Session::new(c);
    let step = step_ns.max(1);
    let b = move |col: &str| format!("intDiv({col} - {from_ns}, {step})");
    sums(&s, probes, from_ns, to_ns, &b)?;
    let mut periods = heads(&s)?;
    if periods.is_empty() {
        return Ok((Vec::new(), 0));
    }
    let count = periods.values().map(|h| h.count).sum::<u64>() as usize;
    let body = s.run(
        "SELECT b, view, key_hi, key_lo, len, bb, pp FROM kx_e ORDER BY b, view, key_hi, key_lo, len \
         FORMAT TabSeparated",
    )?;
    for line in body.lines() {
        let mut f = line.split('\t');
        let Some(h) = periods.get_mut(&u(f.next())?) else {
            continue;
        };
        crate::schema::add_entry_row(&mut h.summary, &mut f)?;
    }
    let mut flows = flows_by(&s, probes, from_ns, to_ns, &b)?;
    let mut out = Vec::with_capacity(periods.len());
    for (k, mut h) in periods {
        seal(&mut h.summary);
        if let Some(fl) = flows.remove(&k) {
            h.summary.flows = fl.into_values().collect();
        }
        out.push(h.summary);
    }
    Ok((out, count))
}
