//! The aguri family's other formats, read and written beside kansoku's own
//! (`%!AGURI-1.0`, [`crate::summary`]):
//!
//! - **aguri2 `-v`**: `%!AGURI-2.0`, then the four 1-D sections with both
//!   counts, `[src address] BYTES (100.00%)<TAB>PACKETS (100.00%)` and
//!   entries `[NN]<indent>LABEL<TAB>BYTES (OWN%/SUBTREE%)<TAB>PACKETS (...)`
//!   (the NN is aguri2's node index; `*` is IPv4's 0/0, `*::` IPv6's,
//!   `4:6:*` a protocol's ports). aguri2's 2-D lines before the sections
//!   are skipped (their prefixes are the previous interval's).
//! - **aguri3** (what agurim reads and writes): `%!AGURI-2.0`, a header
//!   with `%total:`, then per source × destination flow
//!   `[ N] SRC DST: BYTES (x%)<TAB>PACKETS (y%)` and a line of its protocols,
//!   `<TAB>[6:80:*] 92.80% 77.00% ...`, in percent of the flow's counts.
//!
//! Both take times from the parenthesised `(YYYY/MM/DD HH:MM:SS)` as UTC
//! (run the aguri tools with `TZ=UTC`). kansoku adds `%%NonIP: BYTES
//! PACKETS` to what it writes (the aguri tools skip `%` lines they do not
//! know), so totals read back exactly, non-IP frames included. Reading
//! aguri3 files gives the 1-D sections too: each flow's counts go to its
//! source and destination, and its protocols' shares (whole counts,
//! rounded down) to the port sections, the rest to the family's catch-all.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::flows2d::{agurim_address, parse_agurim_address, parse_proto_spec, Flow, ProtoEntry};
use crate::label::{port_key, KeyKind, Prefix, V4_MAPPED, V4_MAPPED_LEN};
use crate::summary::{
    format_time, nesting, parse_time, parse_u64, perr, share, tokens, ParseError, Partial, Section,
    SectionKind, Summary,
};
use crate::tree::{Entry, Metric};

/// The version line of aguri2 and aguri3 files.
pub const MAGIC2: &str = "%!AGURI-2.0";

/// Which format a file is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `%!AGURI-1.0`, kansoku's own (both counts, exact).
    Kansoku,
    /// aguri2's `-v` output.
    Aguri2,
    /// aguri3's flow records, as agurim reads them.
    Aguri3,
}

/// The format of `text`: `%!AGURI-2.0` files with 1-D sections are aguri2's,
/// others aguri3's; anything else is read as kansoku's (whose reader says
/// what is wrong).
pub fn detect(text: &str) -> Format {
    let first = text.lines().map(str::trim_end).find(|l| !l.is_empty());
    if first != Some(MAGIC2) {
        return Format::Kansoku;
    }
    let sectioned = text.lines().any(|l| {
        SectionKind::ALL
            .iter()
            .any(|k| l.starts_with(&format!("[{}]", k.name())))
    });
    if sectioned {
        Format::Aguri2
    } else {
        Format::Aguri3
    }
}

/// `%StartTime`, `%EndTime`, `%NonIP` and `% criteria` of either format.
fn header(p: &mut Partial, rest: &str, line: usize) -> Result<(), ParseError> {
    let Some((key, value)) = rest.split_once(':') else {
        return Ok(());
    };
    let vcol = key.len() + 3;
    let v = value.trim();
    let time = |v: &str| parse_ctime(v).map_or_else(|| parse_time(v, line, vcol), Ok);
    match key.trim() {
        "%StartTime" => p.start = Some(time(v)?),
        "%EndTime" => p.end = Some(time(v)?),
        "%NonIP" => {
            let t = tokens(value);
            let (Some(&(cb, b)), Some(&(cp, k))) = (t.first(), t.get(1)) else {
                return Err(perr(line, vcol, "bad %%NonIP (expected BYTES PACKETS)"));
            };
            p.non_ip = (
                parse_u64(b, line, key.len() + 1 + cb, "byte count")?,
                parse_u64(k, line, key.len() + 1 + cp, "packet count")?,
            );
        }
        "criteria" => {
            if v.starts_with("byte") {
                p.metric = Metric::Bytes;
            } else if v.starts_with("pkt") {
                p.metric = Metric::Packets;
            }
            // "(threshold 1% for addresses, ...)"
            if let Some(t) = v
                .split_once("threshold ")
                .and_then(|(_, r)| r.split_once('%'))
                .and_then(|(n, _)| n.trim().parse::<f64>().ok())
                .filter(|t| (0.0..=100.0).contains(t) && *t > 0.0)
            {
                p.threshold = t;
            }
        }
        _ => {}
    }
    Ok(())
}

/// The ctime part of an aguri time, `Thu May 22 21:00:00 2014 (...)`, as
/// UTC: what agurim reads (its parenthesised copy has been seen wrong,
/// `(1970/01/01 09:00:00)`, in published output).
fn parse_ctime(v: &str) -> Option<u64> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let mut t = v.split_whitespace();
    let (_, mon, day, clock, year) = (t.next()?, t.next()?, t.next()?, t.next()?, t.next()?);
    let m = MONTHS.iter().position(|&x| x == mon)? as u32 + 1;
    let d: u32 = day.parse().ok().filter(|d| (1..=31).contains(d))?;
    let y: i64 = year.parse().ok().filter(|y| (1970..=9999).contains(y))?;
    let mut c = clock.split(':');
    let mut num = |max: u64| c.next()?.parse::<u64>().ok().filter(|&n| n <= max);
    let (hh, mm, ss) = (num(23)?, num(59)?, num(60)?);
    let days = u64::try_from(crate::summary::days_from_civil(y, m, d)).ok()?;
    (days * 86_400 + hh * 3600 + mm * 60 + ss).checked_mul(1_000_000_000)
}

/// An aguri2 label as a kansoku prefix.
fn aguri2_label(kind: KeyKind, t: &str) -> Option<Prefix> {
    match kind {
        KeyKind::Address => parse_agurim_address(t),
        KeyKind::Port if t == "*" => Some(Prefix::new(KeyKind::Port, 0, 0)),
        KeyKind::Port => match t.strip_suffix(":*") {
            Some(vp) => {
                let (v, p) = vp.split_once(':')?;
                Some(Prefix::new(
                    KeyKind::Port,
                    port_key(v.parse().ok()?, p.parse().ok()?, 0),
                    16,
                ))
            }
            None => Prefix::parse(KeyKind::Port, t).ok(),
        },
    }
}

/// Reads aguri2 `-v` output.
pub fn parse_aguri2(text: &str) -> Result<Vec<Summary>, ParseError> {
    let mut out = Vec::new();
    let mut cur: Option<Partial> = None;
    let mut last = 0;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        last = line;
        let l = raw.trim_end();
        if l == MAGIC2 {
            if let Some(p) = cur.take() {
                out.push(p.finish(line)?);
            }
            let mut p = Partial::new(line);
            p.metric = Metric::Either;
            cur = Some(p);
            continue;
        }
        if l.trim().is_empty() || l.starts_with('#') {
            continue;
        }
        let Some(p) = cur.as_mut() else {
            return Err(perr(
                line,
                1,
                format!("expected '{MAGIC2}' to open a summary"),
            ));
        };
        if let Some(rest) = l.strip_prefix('%') {
            header(p, rest, line)?;
            continue;
        }
        let Some(rest) = l.strip_prefix('[') else {
            if p.sections.is_empty() && l.starts_with(' ') {
                continue; // the protocols of a 2-D line
            }
            return Err(perr(line, 1, "expected a section or an entry ([...])"));
        };
        let Some((name, after)) = rest.split_once(']') else {
            return Err(perr(line, 1, "bad line (expected [NAME] or [NN] ENTRY)"));
        };
        let col0 = name.len() + 3;
        if let Some(&kind) = SectionKind::ALL.iter().find(|k| k.name() == name) {
            let n = p.sections.len();
            if SectionKind::ALL.get(n) != Some(&kind) {
                return Err(perr(line, 2, format!("section [{name}] out of place")));
            }
            let t = tokens(after);
            let (Some(&(cb, b)), Some(&(cp, k))) = (t.first(), t.get(2)) else {
                return Err(perr(
                    line,
                    col0,
                    format!(
                        "[{name}] lacks its totals (expected BYTES (100.00%) PACKETS (100.00%))"
                    ),
                ));
            };
            p.open_section(line, kind, (col0 + cb - 1, b), (col0 + cp - 1, k))?;
            continue;
        }
        if !name.trim().bytes().all(|b| b.is_ascii_digit()) || name.trim().is_empty() {
            return Err(perr(line, 2, format!("unknown section [{name}]")));
        }
        let Some((_, sec)) = p.sections.last_mut() else {
            continue; // aguri2's 2-D summary comes before the sections
        };
        let t = tokens(after);
        let (Some(&(cl, label)), Some(&(cb, b)), Some(&(cp, k))) = (t.first(), t.get(1), t.get(3))
        else {
            return Err(perr(
                line,
                col0,
                "short entry (expected LABEL BYTES (OWN%) PACKETS (OWN%))",
            ));
        };
        let prefix = aguri2_label(sec.kind.key_kind(), label).ok_or_else(|| {
            perr(
                line,
                col0 + cl - 1,
                format!("bad label '{label}' for [{}]", sec.kind.name()),
            )
        })?;
        sec.entries.push(Entry {
            prefix,
            bytes: parse_u64(b, line, col0 + cb - 1, "byte count")?,
            packets: parse_u64(k, line, col0 + cp - 1, "packet count")?,
        });
    }
    match cur {
        Some(p) => out.push(p.finish(last + 1)?),
        None => {
            return Err(perr(
                last.max(1),
                1,
                format!("no summary (expected '{MAGIC2}')"),
            ))
        }
    }
    Ok(out)
}

/// `Tue Nov 14 22:14:00 2023 (2023/11/14 22:14:00)`: whole seconds, as the
/// aguri tools write and read them.
fn aguri_time(ns: u64) -> String {
    format_time(ns - ns % 1_000_000_000)
}

fn avg_rate(s: &Summary) -> String {
    let secs = s.end_ns.saturating_sub(s.start_ns) as f64 / 1e9;
    if secs <= 0.0 {
        return String::new();
    }
    let bps = s.total_bytes() as f64 * 8.0 / secs;
    let pps = s.total_packets() as f64 / secs;
    let (v, u) = if bps > 1e9 {
        (bps / 1e9, "G")
    } else if bps > 1e6 {
        (bps / 1e6, "M")
    } else if bps > 1e3 {
        (bps / 1e3, "K")
    } else {
        (bps, "")
    };
    format!("%AvgRate: {v:.2}{u}bps {pps:.2}pps\n")
}

/// Bytes and packets of IPv4 (within `0.0.0.0/0`) in the source section.
fn v4_counts(s: &Summary) -> (u64, u64) {
    let v4 = Prefix::new(KeyKind::Address, V4_MAPPED, V4_MAPPED_LEN);
    s.sections[0]
        .entries
        .iter()
        .filter(|e| v4.contains(&e.prefix))
        .fold((0, 0), |a, e| (a.0 + e.bytes, a.1 + e.packets))
}

/// One summary as aguri2 `-v` prints it (and `%%NonIP`).
pub fn write_aguri2(s: &Summary) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{MAGIC2}");
    let _ = writeln!(o, "%%StartTime: {}", aguri_time(s.start_ns));
    let _ = writeln!(o, "%%EndTime:   {}", aguri_time(s.end_ns));
    o.push_str(&avg_rate(s));
    let (b4, p4) = v4_counts(s);
    let (b, p) = (s.sections[0].bytes, s.sections[0].packets);
    let _ = writeln!(
        o,
        "%IPv4/IPv6/total: {b4}/{}/{b} bytes  {p4}/{}/{p} packets",
        b - b4,
        p - p4
    );
    let _ = writeln!(o, "%%NonIP: {} {}", s.non_ip_bytes, s.non_ip_packets);
    o.push('\n');
    for sec in &s.sections {
        let _ = writeln!(
            o,
            "[{}] {} (100.00%)\t{} (100.00%)",
            sec.kind.name(),
            sec.bytes,
            sec.packets
        );
        let (_, sub_b) = nesting(&sec.entries, Metric::Bytes);
        let (_, sub_p) = nesting(&sec.entries, Metric::Packets);
        for (i, e) in sec.entries.iter().enumerate() {
            if e.bytes == 0 && e.packets == 0 {
                continue;
            }
            let p = &e.prefix;
            let (indent, full, label) = match p.kind {
                KeyKind::Address if p.len >= V4_MAPPED_LEN && p.key >> 32 == V4_MAPPED >> 32 => (
                    usize::from(p.len - V4_MAPPED_LEN).div_ceil(2),
                    p.len == 128,
                    agurim_address(p),
                ),
                KeyKind::Address => (
                    usize::from(p.len).div_ceil(8),
                    p.len == 128,
                    agurim_address(p),
                ),
                KeyKind::Port => {
                    let label = if p.len == 0 {
                        "*".to_string()
                    } else if p.len == 16 {
                        format!("{}:{}:*", p.key >> 120, (p.key >> 112) as u8)
                    } else {
                        p.to_string()
                    };
                    (usize::from(p.len.saturating_sub(16)), p.len == 32, label)
                }
            };
            let pct = |own: u64, sub: u64, total: u64| {
                if full {
                    format!("{:.2}%", share(own, total))
                } else {
                    format!("{:.2}%/{:.2}%", share(own, total), share(sub, total))
                }
            };
            let _ = writeln!(
                o,
                "[{:2}]{:indent$}{label}\t{} ({})\t{} ({})",
                i,
                "",
                e.bytes,
                pct(e.bytes, sub_b[i], sec.bytes),
                e.packets,
                pct(e.packets, sub_p[i], sec.packets),
            );
        }
    }
    o.push('\n');
    o
}

/// One summary's flows as aguri3 writes them; `None` if it has no 2-D view.
pub fn write_aguri3(s: &Summary) -> Option<String> {
    if s.flows.is_empty() && s.sections[0].packets > 0 {
        return None;
    }
    let mut o = String::new();
    let _ = writeln!(o, "\n{MAGIC2}");
    let _ = writeln!(o, "%%StartTime: {}", aguri_time(s.start_ns));
    let _ = writeln!(o, "%%EndTime: {}", aguri_time(s.end_ns));
    let (tb, tp) = (s.sections[0].bytes, s.sections[0].packets);
    if s.end_ns > s.start_ns {
        o.push_str(&avg_rate(s));
        let _ = writeln!(o, "%total: {tb} bytes  {tp} packets");
    }
    let criteria = match s.metric {
        Metric::Bytes => "byte counter",
        Metric::Packets => "pkt counter",
        Metric::Either => "combination",
    };
    let t = s.threshold;
    let _ = writeln!(
        o,
        "% criteria: {criteria} (threshold {t}% for addresses, {}% for protocol)",
        t * 4.0
    );
    let _ = writeln!(o, "%%NonIP: {} {}", s.non_ip_bytes, s.non_ip_packets);
    o.push('\n');
    // Largest first, bytes and packets weighed alike (aguri3's order).
    let weight = |f: &Flow| -> f64 {
        let per = if tp == 0 { 0.0 } else { tb as f64 / tp as f64 };
        (f.bytes as f64).max(f.packets as f64 * per)
    };
    let mut order: Vec<&Flow> = s.flows.iter().collect();
    order.sort_by(|a, b| weight(b).total_cmp(&weight(a)));
    for (i, f) in order.iter().enumerate() {
        let _ = writeln!(
            o,
            "[{:2}] {} {}: {} ({:.2}%)\t{} ({:.2}%)",
            i + 1,
            agurim_address(&f.src),
            agurim_address(&f.dst),
            f.bytes,
            share(f.bytes, tb),
            f.packets,
            share(f.packets, tp)
        );
        o.push('\t');
        if f.protos.is_empty() {
            o.push_str("[*:*:*] 100.00% 100.00%");
        }
        for e in &f.protos {
            let _ = write!(
                o,
                "[{}] {:.2}% {:.2}% ",
                e.spec,
                share(e.bytes, f.bytes),
                share(e.packets, f.packets)
            );
        }
        o.push('\n');
    }
    Some(o)
}

/// An aguri3 summary being read: its header, flows, and `%total` (line, bytes, packets).
type Block = (Partial, Vec<Flow>, Option<(usize, u64, u64)>);

/// Reads aguri3 (agurim) flow records; the 1-D sections are made from them.
pub fn parse_aguri3(text: &str) -> Result<Vec<Summary>, ParseError> {
    let mut out = Vec::new();
    let mut cur: Option<Block> = None;
    let mut lines = text.lines().enumerate().peekable();
    let mut last = 0;
    while let Some((i, raw)) = lines.next() {
        let line = i + 1;
        last = line;
        let l = raw.trim_end();
        if l == MAGIC2 {
            if let Some(c) = cur.take() {
                out.push(finish3(c, line)?);
            }
            let mut p = Partial::new(line);
            p.metric = Metric::Either;
            cur = Some((p, Vec::new(), None));
            continue;
        }
        if l.trim().is_empty() || l.starts_with('#') {
            continue;
        }
        let Some((p, flows, total)) = cur.as_mut() else {
            return Err(perr(
                line,
                1,
                format!("expected '{MAGIC2}' to open a summary"),
            ));
        };
        if let Some(rest) = l.strip_prefix('%') {
            if let Some(t) = rest.strip_prefix("total:") {
                let tk = tokens(t);
                let (Some(&(cb, b)), Some(&(cp, k))) = (tk.first(), tk.get(2)) else {
                    return Err(perr(
                        line,
                        8,
                        "bad %total (expected BYTES bytes PACKETS packets)",
                    ));
                };
                *total = Some((
                    line,
                    parse_u64(b, line, 7 + cb, "byte count")?,
                    parse_u64(k, line, 7 + cp, "packet count")?,
                ));
                continue;
            }
            header(p, rest, line)?;
            continue;
        }
        let Some(rest) = l.strip_prefix('[') else {
            return Err(perr(
                line,
                1,
                "expected a flow ([N] SRC DST: BYTES (x%) PACKETS (y%))",
            ));
        };
        let Some((rank, after)) = rest.split_once(']') else {
            return Err(perr(line, 1, "bad flow (expected [N] SRC DST: ...)"));
        };
        let col0 = rank.len() + 3;
        let t = tokens(after);
        let (Some(&(cs, src)), Some(&(cd, dst)), Some(&(cb, b)), Some(&(cp, k))) =
            (t.first(), t.get(1), t.get(2), t.get(4))
        else {
            return Err(perr(
                line,
                col0,
                "short flow (expected SRC DST: BYTES (x%) PACKETS (y%))",
            ));
        };
        let Some(dst) = dst.strip_suffix(':') else {
            return Err(perr(
                line,
                col0 + cd - 1,
                "expected ':' after the destination",
            ));
        };
        let bad = |c: usize, w: &str| perr(line, col0 + c - 1, format!("bad address '{w}'"));
        let src_p = parse_agurim_address(src).ok_or_else(|| bad(cs, src))?;
        let dst_p = parse_agurim_address(dst).ok_or_else(|| bad(cd, dst))?;
        let bytes = parse_u64(b, line, col0 + cb - 1, "byte count")?;
        let packets = parse_u64(k, line, col0 + cp - 1, "packet count")?;
        // The protocols, on the next line.
        let Some((j, praw)) = lines.next() else {
            return Err(perr(
                line + 1,
                1,
                "file is truncated: a flow without its protocol line",
            ));
        };
        last = j + 1;
        let mut protos = Vec::new();
        let (mut sb, mut sp) = (0u64, 0u64);
        // `[spec] b% p% ` entries: each parsed within its own piece of the
        // line (linear in the line's length).
        let lead = praw.len() - praw.trim_start().len();
        let body = praw.trim();
        if !body.is_empty() && !body.starts_with('[') {
            return Err(perr(j + 1, lead + 1, "expected [PROTO:SPORT:DPORT] B% P%"));
        }
        let mut col = lead + 1;
        for piece in body.split('[').skip(1) {
            let Some((spec, tail)) = piece.split_once(']') else {
                return Err(perr(
                    j + 1,
                    col,
                    "bad protocol entry (expected [PROTO:SPORT:DPORT] B% P%)",
                ));
            };
            let parsed = parse_proto_spec(spec)
                .ok_or_else(|| perr(j + 1, col + 1, format!("bad protocol '{spec}'")))?;
            let tt = tokens(tail);
            if tt.len() != 2 {
                return Err(perr(
                    j + 1,
                    col,
                    "a protocol entry takes two shares (B% P%)",
                ));
            }
            let pct = |n: usize| -> Result<f64, ParseError> {
                let (c, w) = tt[n];
                w.strip_suffix('%')
                    .and_then(|x| x.parse::<f64>().ok())
                    .filter(|x| (0.0..=100.0).contains(x))
                    .ok_or_else(|| {
                        perr(j + 1, col + spec.len() + 1 + c, format!("bad share '{w}'"))
                    })
            };
            let (pb, pp) = (pct(0)?, pct(1)?);
            // Whole counts, never more than the flow has left.
            let eb = ((pb * bytes as f64 / 100.0) as u64).min(bytes - sb);
            let ep = ((pp * packets as f64 / 100.0) as u64).min(packets - sp);
            sb += eb;
            sp += ep;
            protos.push(ProtoEntry {
                spec: parsed,
                bytes: eb,
                packets: ep,
            });
            col += 1 + piece.len();
        }
        if protos.len() == 1 && protos[0].spec.proto.is_none() && (sb, sp) == (bytes, packets) {
            protos.clear(); // "[*:*:*] 100.00% 100.00%": nothing known
        }
        flows.push(Flow {
            src: src_p,
            dst: dst_p,
            bytes,
            packets,
            protos,
        });
    }
    match cur {
        Some(c) => out.push(finish3(c, last + 1)?),
        None => {
            return Err(perr(
                last.max(1),
                1,
                format!("no summary (expected '{MAGIC2}')"),
            ))
        }
    }
    Ok(out)
}

/// The 1-D sections of an aguri3 summary's flows; checks `%total`.
fn finish3((mut p, flows, total): Block, at: usize) -> Result<Summary, ParseError> {
    let mut maps: [BTreeMap<(u128, u8), (u64, u64)>; 4] = Default::default();
    let (mut tb, mut tp) = (0u64, 0u64);
    let add = |m: &mut BTreeMap<(u128, u8), (u64, u64)>, pr: Prefix, b: u64, k: u64| {
        let c = m.entry((pr.key, pr.len)).or_insert((0, 0));
        c.0 = c.0.saturating_add(b);
        c.1 = c.1.saturating_add(k);
    };
    for f in &flows {
        tb = tb.saturating_add(f.bytes);
        tp = tp.saturating_add(f.packets);
        add(&mut maps[0], f.src, f.bytes, f.packets);
        add(&mut maps[1], f.dst, f.bytes, f.packets);
        let v4 = Prefix::new(KeyKind::Address, V4_MAPPED, V4_MAPPED_LEN).contains(&f.src);
        let version = if v4 { 4 } else { 6 };
        let (mut rb, mut rp) = (f.bytes, f.packets);
        for e in &f.protos {
            rb -= e.bytes.min(rb);
            rp -= e.packets.min(rp);
            let (proto, len) = match e.spec.proto {
                None => (0, 8),
                Some(n) => (n, 16),
            };
            let side = |r: crate::flows2d::PortRange| {
                let l = if len == 8 { 8 } else { 16 + r.len };
                Prefix::new(KeyKind::Port, port_key(version, proto, r.port), l)
            };
            add(&mut maps[2], side(e.spec.sport), e.bytes, e.packets);
            add(&mut maps[3], side(e.spec.dport), e.bytes, e.packets);
        }
        let catch_all = Prefix::new(KeyKind::Port, port_key(version, 0, 0), 8);
        add(&mut maps[2], catch_all, rb, rp);
        add(&mut maps[3], catch_all, rb, rp);
    }
    if let Some((line, b, k)) = total {
        if (b, k) != (tb, tp) {
            return Err(perr(
                line,
                1,
                format!("the flows add up to {tb} bytes {tp} packets, but %total says {b} bytes {k} packets (truncated or corrupted)"),
            ));
        }
    }
    for (kind, m) in SectionKind::ALL.into_iter().zip(maps) {
        let mut entries: Vec<Entry> = m
            .into_iter()
            .filter(|(_, (b, k))| *b > 0 || *k > 0)
            .map(|((key, len), (b, k))| Entry {
                prefix: Prefix::new(kind.key_kind(), key, len),
                bytes: b,
                packets: k,
            })
            .collect();
        if entries.is_empty() {
            entries.push(Entry {
                prefix: Prefix::new(kind.key_kind(), 0, 0),
                bytes: 0,
                packets: 0,
            });
        }
        p.sections.push((
            p.line,
            Section {
                kind,
                bytes: tb,
                packets: tp,
                entries,
            },
        ));
    }
    let mut s = p.finish(at)?;
    s.flows = flows;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// aguri2 -v output (necoma/aguri2 built here, `TZ=UTC aguri2 -r t.pcap -s 60 -v`), cut.
    const AGURI2: &str = "%!AGURI-2.0
%%StartTime: Tue Nov 14 22:14:00 2023 (2023/11/14 22:14:00)
%%EndTime:   Tue Nov 14 22:15:00 2023 (2023/11/14 22:15:00)
%AvgRate: 336.64Kbps 40.00pps
%IPv4/IPv6/total: 2291892/232920/2524812 bytes  2220/180/2400 packets

[src address] 2524812 (100.00%)\t2400 (100.00%)
[ 1]             10.1.0.0/25\t48830 (1.93%/3.36%)\t63 (2.62%/15.17%)
[ 0]                10.1.0.53\t36066 (1.43%)\t301 (12.54%)
[12]                203.0.113.10\t2206996 (87.41%)\t1856 (77.33%)
[ 0]                2001:db8:1::10\t232920 (9.23%)\t180 (7.50%)
%LRU hits: 81.29% (1951/2400)  reclaimed: 0
[dst address] 2524812 (100.00%)\t2400 (100.00%)
[ 1]        10.1.0.0/16\t2291892 (90.77%/90.77%)\t2220 (92.50%/92.50%)
[ 4]*::\t232920 (9.23%/9.23%)\t180 (7.50%/7.50%)
[ip:proto:srcport] 2524812 (100.00%)\t2400 (100.00%)
[ 2]4:6:*\t2291892 (90.77%/90.77%)\t2220 (92.50%/92.50%)
[ 4]                6:6:443\t232920 (9.23%)\t180 (7.50%)
[ip:proto:dstport] 2524812 (100.00%)\t2400 (100.00%)
[35]*\t0 (0.00%/100.00%)\t0 (0.00%/100.00%)
[ 5]4:6:*\t2291892 (90.77%/90.77%)\t2220 (92.50%/92.50%)
[ 7]6:6:*\t232920 (9.23%/9.23%)\t180 (7.50%/7.50%)
%LRU hits: 75.17% (1804/2400)  reclaimed: 684

#epoch=0 flow_matrix: 14x9=126 ports: 6x9
";

    /// aguri3 output (necoma/agurim built here, `TZ=UTC aguri3 -r t.pcap -i 60`), cut.
    const AGURI3: &str = "
%!AGURI-2.0
%%StartTime: Tue Nov 14 22:14:00 2023 (2023/11/14 22:14:00)
%%EndTime: Tue Nov 14 22:15:00 2023 (2023/11/14 22:15:00)
%AvgRate: 336.64Kbps 40.00pps
%total: 1881298 bytes  1270 packets
% criteria: combination (threshold 1% for addresses, 4% for protocol)
%input odflows: IPv4:736 IPv6:4
%aggregated in 0 ms

[ 1] 203.0.113.10 10.1.2.3: 1816800 (71.96%)\t1200 (50.00%)
\t[6:80:50001] 26.83% 26.83% [6:80:50003] 26.67% 26.67% [6:80:50000] 23.33% 23.33% [6:80:50002] 23.17% 23.17% 
[ 2] 2001:db8:1::10 2001:db8:2::3: 60818 (2.41%)\t47 (1.96%)
\t[6:443:*] 100.00% 100.00% 
[ 9] 10.1.0.53 192.0.2.0/24: 3680 (0.19%)\t0 (1.62%)
\t[17:53:*] 94.87% 94.87% [17:53:49975] 5.13% 5.13% 
[36] * *: 0 (0.00%)\t23 (0.96%)
\t[*:*:*] 100.00% 100.00%
";

    /// Published agurim output (2014; necoma/NECOMAtter, tools/agurim_bot.py),
    /// with its older criteria line and its wrong parenthesised end time.
    const PUBLISHED: &str = "%!AGURI-2.0
%%StartTime: Thu May 22 20:39:00 2014 (2014/05/22 20:39:00)
%%EndTime: Thu May 22 21:00:00 2014 (1970/01/01 09:00:00)
%AvgRate: 345.40Mbps 126938.85pps
% criteria: pkt counter (1 % for addresses, 1 % for protocol data)

[ 1] 203.178.148.19 *: 2465148971 (4.53%)       41081309 (25.68%)
        [1:2048:2048] 100.00% 100.00%
";

    #[test]
    fn published_agurim_output_reads() {
        let s = &parse_aguri3(PUBLISHED).unwrap()[0];
        assert_eq!(s.metric, Metric::Packets);
        assert_eq!(s.end_ns - s.start_ns, 21 * 60 * 1_000_000_000);
        assert_eq!(
            (s.total_bytes(), s.total_packets()),
            (2_465_148_971, 41_081_309)
        );
        let f = &s.flows[0];
        assert_eq!(
            (agurim_address(&f.src), agurim_address(&f.dst)),
            ("203.178.148.19".into(), "*".into())
        );
        assert_eq!(f.protos[0].spec.to_string(), "1:2048:2048");
        assert_eq!(s.sections[3].entries[0].prefix.to_string(), "4:1:2048");
        // agurim.c's own examples of record lines (aguri2-era spacing; its
        // `2001:df0:2ed:::13:` is no address, a host prints as `...::13:`).
        let lines = "%!AGURI-2.0\n%%StartTime: Thu May 22 20:39:00 2014 (x)\n%%EndTime: Thu May 22 21:00:00 2014 (x)\n\
                     [ 8] 10.178.141.0/24 *: 21817049 (3.19%) 17852 (1.21%)\n [6:80:*]92.8% 77.0% [6:443:49152-49279]1.9% 4.6%\n\
                     [39] *:: 2001:df0:2ed::13: 979274 (0.15%)  901 (0.06%)\n [6:80:*]92.8% 77.0% [6:443:*]6.3% 11.1% [*:*:*]0.6% 9.7%\n";
        let s = &parse_aguri3(lines).unwrap()[0];
        assert_eq!(s.flows.len(), 2);
        assert_eq!(s.flows[1].dst.to_string(), "2001:df0:2ed::13");
        assert_eq!(s.flows[0].protos[1].spec.to_string(), "6:443:49152-49279");
    }

    #[test]
    fn aguri2_v_output_reads_with_both_counts() {
        assert_eq!(detect(AGURI2), Format::Aguri2);
        let s = &parse_aguri2(AGURI2).unwrap()[0];
        assert_eq!((s.total_bytes(), s.total_packets()), (2_524_812, 2400));
        let src = &s.sections[0];
        assert_eq!(src.entries.len(), 4);
        assert_eq!(src.entries[0].prefix.to_string(), "10.1.0.0/25");
        assert_eq!(s.sections[3].entries[0].prefix.to_string(), "0/0:0:0");
        assert_eq!(s.sections[3].entries[2].prefix.to_string(), "6:6:0/0");
        assert_eq!(s.start_ns, 1_700_000_040 * 1_000_000_000);
        // Written as aguri2 and read back: the same summary.
        // (aguri2 leaves out entries that hold nothing.)
        let back = parse_aguri2(&write_aguri2(s)).unwrap();
        let nonzero = |x: &Summary| -> Vec<Vec<Entry>> {
            x.sections
                .iter()
                .map(|sec| {
                    sec.entries
                        .iter()
                        .copied()
                        .filter(|e| e.bytes > 0 || e.packets > 0)
                        .collect()
                })
                .collect()
        };
        assert_eq!(nonzero(&back[0]), nonzero(s));
        // A corrupted count is an error on the section's line.
        let bad = AGURI2.replace("36066 (1.43%)", "36067 (1.43%)");
        let e = parse_aguri2(&bad).unwrap_err();
        assert_eq!(e.line, 7, "{e}");
    }

    #[test]
    fn aguri3_flows_read_and_give_the_1d_sections() {
        assert_eq!(detect(AGURI3), Format::Aguri3);
        let text = AGURI3.to_string();
        let v = parse_aguri3(&text).unwrap();
        let s = &v[0];
        assert_eq!(s.flows.len(), 4);
        assert_eq!((s.total_bytes(), s.total_packets()), (1_881_298, 1270));
        for sec in &s.sections {
            let sum = sec
                .entries
                .iter()
                .fold((0, 0), |a, e| (a.0 + e.bytes, a.1 + e.packets));
            assert_eq!(sum, (1_881_298, 1270));
        }
        assert_eq!(s.flows[0].protos.len(), 4);
        assert_eq!(s.flows[0].protos[0].spec.to_string(), "6:80:50001");
        assert!(s.flows[3].protos.is_empty());
        assert_eq!(s.threshold, 1.0);
        // Written and read back: the same flows and sections.
        let again = parse_aguri3(&write_aguri3(s).unwrap()).unwrap();
        assert_eq!(again[0].sections[0], s.sections[0]);
        assert_eq!(again[0].flows.len(), 4);
        // The wrong total, a truncated file, a bad address: errors with their line.
        let e = parse_aguri3(&text.replace("1881298 bytes", "1881299 bytes")).unwrap_err();
        assert_eq!(e.line, 6, "{e}");
        let cut = &text[..text.find("\t[6:443").unwrap()];
        assert!(parse_aguri3(cut).unwrap_err().message.contains("truncated"));
        let e = parse_aguri3(&text.replace("10.1.0.53", "10.1.0.530")).unwrap_err();
        assert_eq!((e.line, e.column), (15, 6), "{e}");
    }
}
