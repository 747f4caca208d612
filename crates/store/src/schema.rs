//! The store's tables, their rows, and reading summaries back.
//!
//! Every summary has an id (a hash of its probe and its text); its rows in
//! every table carry the id, and the tables are `ReplacingMergeTree`s whose
//! sorting key holds it, so a summary sent twice is stored once after
//! merges, and every query groups by the id and the row's key with `any()`,
//! which makes it exact before merges too. A summary's row in `summaries`
//! is written last: entries without it are never read (a send cut short is
//! sent again whole). Counts are `UInt64`, exact; addresses are two `UInt64`
//! halves and a length (18.16 has no IPv6 type), ports the 32-bit
//! `version:protocol:port` key in `key_lo`'s high half as the profiler keeps
//! them.
//!
//! The schema works on ClickHouse 18.16 (Debian's) and on current releases.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use aguri::flows2d::{Flow, PortRange, ProtoEntry, ProtoSpec};
use aguri::label::{KeyKind, Prefix};
use aguri::summary::SectionKind;
use aguri::{Entry, Metric, Summary};

use crate::client::{valid_name, Client, StoreError};

/// The schema this kansoku writes and reads.
pub const SCHEMA_VERSION: u32 = 1;

fn ddl(db: &str) -> Vec<String> {
    let rmt = |order: &str| {
        format!("ENGINE = ReplacingMergeTree() PARTITION BY toYYYYMM(day) ORDER BY ({order})")
    };
    vec![
        format!("CREATE DATABASE IF NOT EXISTS {db}"),
        format!("CREATE TABLE IF NOT EXISTS {db}.schema_version (version UInt32) ENGINE = TinyLog"),
        format!(
            "CREATE TABLE IF NOT EXISTS {db}.summaries (id String, probe String, day Date, start_ns UInt64, \
             end_ns UInt64, metric UInt8, threshold Float64, non_ip_bytes UInt64, non_ip_packets UInt64, \
             bytes UInt64, packets UInt64) {}",
            rmt("probe, start_ns, id")
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {db}.entries (id String, probe String, day Date, start_ns UInt64, \
             view UInt8, key_hi UInt64, key_lo UInt64, len UInt8, bytes UInt64, packets UInt64) {}",
            rmt("probe, start_ns, id, view, key_hi, key_lo, len")
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {db}.flows (id String, probe String, day Date, start_ns UInt64, \
             src_hi UInt64, src_lo UInt64, src_len UInt8, dst_hi UInt64, dst_lo UInt64, dst_len UInt8, \
             proto Int16, sport UInt16, sport_len UInt8, dport UInt16, dport_len UInt8, bytes UInt64, packets UInt64) {}",
            rmt("probe, start_ns, id, src_hi, src_lo, src_len, dst_hi, dst_lo, dst_len, proto, sport, sport_len, dport, dport_len")
        ),
    ]
}

/// Creates the database and the tables (`kansoku store init`); idempotent.
pub fn init(c: &Client) -> Result<(), StoreError> {
    let db = &c.url.database;
    for s in ddl(db) {
        c.execute_bare(&s)?;
    }
    let have = c.execute("SELECT max(version), count() FROM schema_version")?;
    let mut f = have.split_whitespace();
    let (v, n) = (f.next().unwrap_or("0"), f.next().unwrap_or("0"));
    if n == "0" {
        c.insert("schema_version", format!("{SCHEMA_VERSION}\n").as_bytes())?;
    } else if v != SCHEMA_VERSION.to_string() {
        return Err(StoreError::Schema(format!(
            "{}: the store has schema version {v}; this kansoku writes version {SCHEMA_VERSION}",
            c.url
        )));
    }
    Ok(())
}

/// Makes the connected server the entry to a cluster (`kansoku store init
/// --distributed CLUSTER --local DB`): in the URL's database, a
/// `schema_version` of its own and `Distributed` tables over `local` (the
/// database `init` made on every shard), sharded by the summary id, so a
/// summary's rows all land on one shard and every query stays exact.
pub fn init_distributed(c: &Client, cluster: &str, local: &str) -> Result<(), StoreError> {
    for n in [cluster, local] {
        if !crate::client::valid_identifier(n) {
            return Err(StoreError::Usage(format!(
                "{n:?}: a cluster or database is a letter or _, then letters, digits and _"
            )));
        }
    }
    // A summary's rows must be on its shard before the spool lets it go:
    // Distributed inserts are asynchronous unless the user's profile says.
    let sync = c.execute_bare(
        "SELECT value FROM system.settings WHERE name IN ('insert_distributed_sync', \
         'distributed_foreground_insert') FORMAT TabSeparated",
    )?;
    if !sync.lines().any(|v| v.trim() == "1") {
        return Err(StoreError::Usage(format!(
            "{}: set insert_distributed_sync = 1 in the profile of kansoku's user, so that a summary is on its shard \
             before the spool lets it go",
            c.url
        )));
    }
    let db = &c.url.database;
    if db == local {
        return Err(StoreError::Usage(
            "the Distributed tables need a database of their own, not the shards' one".into(),
        ));
    }
    c.execute_bare(&format!("CREATE DATABASE IF NOT EXISTS {db}"))?;
    c.execute_bare(&format!(
        "CREATE TABLE IF NOT EXISTS {db}.schema_version (version UInt32) ENGINE = TinyLog"
    ))?;
    for t in ["summaries", "entries", "flows"] {
        c.execute_bare(&format!(
            "CREATE TABLE IF NOT EXISTS {db}.{t} AS {local}.{t} \
             ENGINE = Distributed({cluster}, {local}, {t}, cityHash64(id))"
        ))?;
    }
    let have = c.execute("SELECT count() FROM schema_version")?;
    if have.trim() == "0" {
        c.insert("schema_version", format!("{SCHEMA_VERSION}\n").as_bytes())?;
    }
    check(c)
}

/// Checks the store is initialized with this schema.
pub fn check(c: &Client) -> Result<(), StoreError> {
    match c.execute("SELECT max(version) FROM schema_version") {
        Ok(v) if v.trim() == SCHEMA_VERSION.to_string() => Ok(()),
        Ok(v) => Err(StoreError::Schema(format!(
            "{}: the store has schema version {}; this kansoku reads version {SCHEMA_VERSION} (`kansoku store init` on an empty database)",
            c.url,
            v.trim()
        ))),
        Err(StoreError::Server(_, m)) if m.contains("Code: 60") || m.contains("Code: 81") => {
            Err(StoreError::Schema(format!(
                "{}: no kansoku schema there (run `kansoku store init`)",
                c.url
            )))
        }
        Err(e) => Err(e),
    }
}

/// A summary's id: its probe and its exact text, hashed.
pub fn summary_id(probe: &str, s: &Summary) -> String {
    let text = s.to_string();
    let data = format!("{probe}\n{text}");
    let (a, b) = (
        xxhash_rust::xxh64::xxh64(data.as_bytes(), 0),
        xxhash_rust::xxh64::xxh64(data.as_bytes(), 0x9e37_79b9_7f4a_7c15),
    );
    format!("{a:016x}{b:016x}")
}

fn day(ns: u64) -> String {
    // YYYYMMDD.HHMMSS -> YYYY-MM-DD
    let st = aguri::summary::file_stamp(ns);
    format!("{}-{}-{}", &st[0..4], &st[4..6], &st[6..8])
}

fn metric_code(m: Metric) -> u8 {
    match m {
        Metric::Bytes => 0,
        Metric::Packets => 1,
        Metric::Either => 2,
    }
}

/// The rows of one summary for each table, tab-separated.
pub struct Rows {
    pub summaries: String,
    pub entries: String,
    pub flows: String,
}

/// `probe` must be a [`valid_name`].
pub fn rows(probe: &str, s: &Summary) -> Result<(String, Rows), StoreError> {
    if !valid_name(probe) {
        return Err(StoreError::Usage(format!(
            "probe name {probe:?}: letters, digits, _, - and ., at most 64"
        )));
    }
    let id = summary_id(probe, s);
    let d = day(s.start_ns);
    let head = format!("{id}\t{probe}\t{d}\t{}", s.start_ns);
    let mut entries = String::new();
    for (v, sec) in s.sections.iter().enumerate() {
        for e in &sec.entries {
            let _ = writeln!(
                entries,
                "{head}\t{v}\t{}\t{}\t{}\t{}\t{}",
                (e.prefix.key >> 64) as u64,
                e.prefix.key as u64,
                e.prefix.len,
                e.bytes,
                e.packets
            );
        }
    }
    let mut flows = String::new();
    let port = |r: PortRange| format!("{}\t{}", r.port, r.len);
    for f in &s.flows {
        let pair = format!(
            "{head}\t{}\t{}\t{}\t{}\t{}\t{}",
            (f.src.key >> 64) as u64,
            f.src.key as u64,
            f.src.len,
            (f.dst.key >> 64) as u64,
            f.dst.key as u64,
            f.dst.len
        );
        let _ = writeln!(flows, "{pair}\t-1\t0\t0\t0\t0\t{}\t{}", f.bytes, f.packets);
        for e in &f.protos {
            let proto = e.spec.proto.map_or(256, i16::from);
            let _ = writeln!(
                flows,
                "{pair}\t{proto}\t{}\t{}\t{}\t{}",
                port(e.spec.sport),
                port(e.spec.dport),
                e.bytes,
                e.packets
            );
        }
    }
    let summaries = format!(
        "{id}\t{probe}\t{d}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\n",
        s.start_ns,
        s.end_ns,
        metric_code(s.metric),
        s.threshold,
        s.non_ip_bytes,
        s.non_ip_packets,
        s.sections[0].bytes,
        s.sections[0].packets
    );
    Ok((
        id,
        Rows {
            summaries,
            entries,
            flows,
        },
    ))
}

/// Stores one summary: entries and flows first, its `summaries` row last.
pub fn insert(c: &Client, probe: &str, s: &Summary) -> Result<String, StoreError> {
    let mut ids = insert_many(c, &[(probe, s)])?;
    Ok(ids.pop().unwrap_or_default())
}

/// Stores summaries (each of its probe) in one insert per table: all their
/// entries and flows first, their `summaries` rows last.
pub fn insert_many(c: &Client, batch: &[(&str, &Summary)]) -> Result<Vec<String>, StoreError> {
    let (mut e, mut f, mut h) = (String::new(), String::new(), String::new());
    let mut ids = Vec::with_capacity(batch.len());
    for (probe, s) in batch {
        let (id, r) = rows(probe, s)?;
        e.push_str(&r.entries);
        f.push_str(&r.flows);
        h.push_str(&r.summaries);
        ids.push(id);
    }
    if !e.is_empty() {
        c.insert("entries", e.as_bytes())?;
    }
    if !f.is_empty() {
        c.insert("flows", f.as_bytes())?;
    }
    if !h.is_empty() {
        c.insert("summaries", h.as_bytes())?;
    }
    Ok(ids)
}

/// The `WHERE` of a range of some probes (names validated, times numbers).
pub(crate) fn filter(probes: &[String], from_ns: u64, to_ns: u64) -> Result<String, StoreError> {
    let mut w = format!("start_ns >= {from_ns} AND start_ns < {to_ns}");
    if !probes.is_empty() {
        let mut list = Vec::new();
        for p in probes {
            if !valid_name(p) {
                return Err(StoreError::Usage(format!(
                    "probe name {p:?} is not a valid name"
                )));
            }
            list.push(format!("'{p}'"));
        }
        let _ = write!(w, " AND probe IN ({})", list.join(", "));
    }
    Ok(w)
}

pub(crate) fn u(t: Option<&str>) -> Result<u64, StoreError> {
    t.and_then(|x| x.parse().ok())
        .ok_or_else(|| StoreError::Server(200, "a row the store returned does not read".into()))
}

/// A summary with times, metric and threshold, and no entries yet.
pub(crate) fn blank(start_ns: u64, end_ns: u64, metric: Metric, threshold: f64) -> Summary {
    let mut s = Summary::empty(start_ns, end_ns, metric, threshold);
    for sec in &mut s.sections {
        sec.entries.clear();
    }
    s
}

/// Adds an `entries` row (after its first column: view, key halves,
/// length, bytes, packets) to its section of `s`.
pub(crate) fn add_entry_row<'a>(
    s: &mut Summary,
    f: &mut impl Iterator<Item = &'a str>,
) -> Result<(), StoreError> {
    let view = u(f.next())? as usize;
    let key = (u128::from(u(f.next())?) << 64) | u128::from(u(f.next())?);
    let len = u(f.next())? as u8;
    let (bytes, packets) = (u(f.next())?, u(f.next())?);
    if let Some(sec) = s.sections.get_mut(view) {
        sec.entries.push(Entry {
            prefix: Prefix::new(sec.kind.key_kind(), key, len),
            bytes,
            packets,
        });
    }
    Ok(())
}

/// Sets each section's totals to what its entries add up to (giving an
/// empty section its root) and returns them.
pub(crate) fn seal(s: &mut Summary) -> [(u64, u64); 4] {
    let mut sums = [(0, 0); 4];
    for (sec, sum) in s.sections.iter_mut().zip(&mut sums) {
        *sum = sec.entries.iter().fold((0u64, 0u64), |a, e| {
            (a.0.saturating_add(e.bytes), a.1.saturating_add(e.packets))
        });
        (sec.bytes, sec.packets) = *sum;
        if sec.entries.is_empty() {
            sec.entries.push(Entry {
                prefix: Prefix::new(sec.kind.key_kind(), 0, 0),
                bytes: 0,
                packets: 0,
            });
        }
    }
    sums
}

/// A summary's flows by source and destination.
pub(crate) type ByPair = BTreeMap<(u128, u8, u128, u8), Flow>;

/// Adds a `flows` row (a key, then src hi, lo, len, dst hi, lo, len,
/// proto, sport, sport len, dport, dport len, bytes, packets) to `pairs`:
/// proto -1 is the flow's own counts, others a protocol entry.
pub(crate) fn add_flow_row(pairs: &mut ByPair, v: &[&str]) -> Result<(), StoreError> {
    let n = |i: usize| u(v.get(i).copied());
    let src = Prefix::new(
        KeyKind::Address,
        (u128::from(n(1)?) << 64) | u128::from(n(2)?),
        n(3)? as u8,
    );
    let dst = Prefix::new(
        KeyKind::Address,
        (u128::from(n(4)?) << 64) | u128::from(n(5)?),
        n(6)? as u8,
    );
    let proto: i16 = v
        .get(7)
        .and_then(|x| x.parse().ok())
        .ok_or_else(|| StoreError::Server(200, "a flows row does not read".into()))?;
    let f = pairs
        .entry((src.key, src.len, dst.key, dst.len))
        .or_insert_with(|| Flow {
            src,
            dst,
            bytes: 0,
            packets: 0,
            protos: Vec::new(),
        });
    let (bytes, packets) = (n(12)?, n(13)?);
    if proto < 0 {
        f.bytes = bytes;
        f.packets = packets;
    } else {
        f.protos.push(ProtoEntry {
            spec: ProtoSpec {
                proto: u8::try_from(proto).ok(),
                sport: PortRange::new(n(8)? as u16, n(9)? as u8),
                dport: PortRange::new(n(10)? as u16, n(11)? as u8),
            },
            bytes,
            packets,
        });
    }
    Ok(())
}

/// One stored summary: its probe and itself.
pub struct Stored {
    pub id: String,
    pub probe: String,
    pub summary: Summary,
}

/// The summaries of `probes` (all when empty) starting in `[from_ns, to_ns)`,
/// each once, sorted by start (then probe).
pub fn read(
    c: &Client,
    probes: &[String],
    from_ns: u64,
    to_ns: u64,
) -> Result<Vec<Stored>, StoreError> {
    let w = filter(probes, from_ns, to_ns)?;
    let heads = c.execute(&format!(
        "SELECT id, any(probe), any(start_ns), any(end_ns), any(metric), any(threshold), any(non_ip_bytes), \
         any(non_ip_packets), any(bytes), any(packets) FROM summaries WHERE {w} GROUP BY id FORMAT TabSeparated"
    ))?;
    let mut out: BTreeMap<String, Stored> = BTreeMap::new();
    for line in heads.lines() {
        let mut f = line.split('\t');
        let id = f.next().unwrap_or("").to_string();
        let probe = f.next().unwrap_or("").to_string();
        if !valid_name(&probe) {
            return Err(StoreError::Server(
                200,
                format!("the store holds a summary of a probe named {probe:?}, not a probe name"),
            ));
        }
        let start = u(f.next())?;
        let end = u(f.next())?;
        let metric = match f.next() {
            Some("0") => Metric::Bytes,
            Some("1") => Metric::Packets,
            _ => Metric::Either,
        };
        let threshold: f64 = f.next().and_then(|x| x.parse().ok()).unwrap_or(1.0);
        let mut s = blank(start, end, metric, threshold);
        s.non_ip_bytes = u(f.next())?;
        s.non_ip_packets = u(f.next())?;
        // The IP totals, which the entries read below must add up to.
        s.sections[0].bytes = u(f.next())?;
        s.sections[0].packets = u(f.next())?;
        out.insert(
            id.clone(),
            Stored {
                id,
                probe,
                summary: s,
            },
        );
    }
    if out.is_empty() {
        return Ok(Vec::new());
    }
    let body = c.execute(&format!(
        "SELECT id, view, key_hi, key_lo, len, any(bytes), any(packets) FROM entries WHERE {w} \
         GROUP BY id, view, key_hi, key_lo, len ORDER BY id, view, key_hi, key_lo, len FORMAT TabSeparated"
    ))?;
    for line in body.lines() {
        let mut f = line.split('\t');
        let id = f.next().unwrap_or("");
        let Some(st) = out.get_mut(id) else { continue };
        add_entry_row(&mut st.summary, &mut f)?;
    }
    let body = c.execute(&format!(
        "SELECT id, src_hi, src_lo, src_len, dst_hi, dst_lo, dst_len, proto, sport, sport_len, dport, dport_len, \
         any(bytes), any(packets) FROM flows WHERE {w} GROUP BY id, src_hi, src_lo, src_len, dst_hi, dst_lo, \
         dst_len, proto, sport, sport_len, dport, dport_len ORDER BY id, src_hi, src_lo, src_len, dst_hi, dst_lo, \
         dst_len, proto, sport, sport_len, dport, dport_len FORMAT TabSeparated"
    ))?;
    let mut flows: HashMap<String, ByPair> = HashMap::new();
    for line in body.lines() {
        let v: Vec<&str> = line.split('\t').collect();
        if v.len() != 14 {
            return Err(StoreError::Server(200, "a flows row does not read".into()));
        }
        if !out.contains_key(v[0]) {
            continue;
        }
        add_flow_row(flows.entry(v[0].to_string()).or_default(), &v)?;
    }
    let mut v: Vec<Stored> = out.into_values().collect();
    for st in &mut v {
        let want = (st.summary.sections[0].bytes, st.summary.sections[0].packets);
        for (kind, (b, p)) in SectionKind::ALL.into_iter().zip(seal(&mut st.summary)) {
            if (b, p) != want {
                return Err(StoreError::Server(
                    200,
                    format!(
                        "summary {} ({}): its {} entries add up to {b} bytes {p} packets, its row says {} {} \
                         (rows missing or corrupted in the store)",
                        st.id,
                        st.probe,
                        kind.name(),
                        want.0,
                        want.1
                    ),
                ));
            }
        }
        if let Some(fl) = flows.remove(&st.id) {
            st.summary.flows = fl.into_values().collect();
            // The writer's order: largest protocol entries first.
            for f in &mut st.summary.flows {
                f.protos.sort_by(|a, b| {
                    (b.bytes, b.packets, a.spec).cmp(&(a.bytes, a.packets, b.spec))
                });
            }
        }
    }
    v.sort_by(|a, b| (a.summary.start_ns, &a.probe).cmp(&(b.summary.start_ns, &b.probe)));
    Ok(v)
}

/// A probe in the store: its name, summaries, first start, last end (ns)
/// and the median length of its summaries (ns).
pub type ProbeInfo = (String, u64, u64, u64, u64);

/// Probes with their summary counts, first start and last end.
pub fn probes(c: &Client) -> Result<Vec<ProbeInfo>, StoreError> {
    let body = c.execute(
        "SELECT probe, count(), min(s), max(e), toUInt64(median(e - s)) FROM (SELECT id, any(probe) AS probe, \
         any(start_ns) AS s, any(end_ns) AS e FROM summaries GROUP BY id) GROUP BY probe ORDER BY probe FORMAT TabSeparated",
    )?;
    let mut out = Vec::new();
    for line in body.lines() {
        let mut f = line.split('\t');
        let name = f.next().unwrap_or("").to_string();
        out.push((name, u(f.next())?, u(f.next())?, u(f.next())?, u(f.next())?));
    }
    Ok(out)
}
