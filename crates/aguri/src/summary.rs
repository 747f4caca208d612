//! Summaries and aguri's text format, written and read back.
//!
//! ```text
//! %!AGURI-1.0
//! %%StartTime: Sun Nov 22 03:00:00 2026 (2026/11/22 03:00:00)
//! %%EndTime: Sun Nov 22 03:05:00 2026 (2026/11/22 03:05:00)
//! %AvgRate: 10.24Mbps 1000.00pps
//! %%Threshold: 1% of bytes
//! %%NonIP: 0 0
//!
//! [src address] 384000000 300000 (100.00%)
//! ::/0<TAB>0 0 (0.00%/100.00%)
//!  0.0.0.0/0<TAB>2000000 1000 (0.52%/100.00%)
//!   150.65.0.0/16<TAB>115200000 90000 (30.00%/30.00%)
//! ...
//! [dst address] ...
//! [ip:proto:srcport] ...
//! [ip:proto:dstport] ...
//! ```
//!
//! (`<TAB>` is a tab.) As in aguri, a file may hold many summaries one after another, each
//! opening with `%!AGURI-1.0`; entries are in preorder, indented one space
//! per enclosing entry, with their own share and their subtree's share.
//! Unlike aguri, every count line carries both exact integer counts, bytes
//! then packets, so summaries can be re-aggregated without rounding; times
//! are UTC and keep their fraction of a second. The reader checks that the
//! entries of a section add up to its header and that the four sections
//! agree, which catches truncated and corrupted files.

use core::fmt::{self, Write as _};

use serde::Serialize;

use crate::label::{KeyKind, Prefix};
use crate::tree::{Entry, Metric};

/// The first line of every summary.
pub const MAGIC: &str = "%!AGURI-1.0";

/// Which of the four summaries a section is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SectionKind {
    SrcAddress,
    DstAddress,
    SrcPort,
    DstPort,
}

impl SectionKind {
    /// The four, in file order.
    pub const ALL: [SectionKind; 4] = [
        SectionKind::SrcAddress,
        SectionKind::DstAddress,
        SectionKind::SrcPort,
        SectionKind::DstPort,
    ];

    /// The section's name in brackets, as aguri writes it.
    pub const fn name(self) -> &'static str {
        match self {
            SectionKind::SrcAddress => "src address",
            SectionKind::DstAddress => "dst address",
            SectionKind::SrcPort => "ip:proto:srcport",
            SectionKind::DstPort => "ip:proto:dstport",
        }
    }

    /// The key space of its labels.
    pub const fn key_kind(self) -> KeyKind {
        match self {
            SectionKind::SrcAddress | SectionKind::DstAddress => KeyKind::Address,
            SectionKind::SrcPort | SectionKind::DstPort => KeyKind::Port,
        }
    }
}

/// One of the four summaries of a period.
#[derive(Clone, Debug, PartialEq)]
pub struct Section {
    pub kind: SectionKind,
    /// Everything counted in the period.
    pub bytes: u64,
    pub packets: u64,
    /// The reported prefixes in preorder; they add up to the totals.
    pub entries: Vec<Entry>,
}

/// The profile of one period.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// Nanoseconds since the Unix epoch.
    pub start_ns: u64,
    pub end_ns: u64,
    /// What the shares and the threshold are measured in.
    pub metric: Metric,
    /// The threshold, in percent.
    pub threshold: f64,
    /// Frames without an IP layer: counted here so that totals are exact.
    pub non_ip_bytes: u64,
    pub non_ip_packets: u64,
    /// In the order of [`SectionKind::ALL`].
    pub sections: [Section; 4],
    /// The 2-D view (source × destination, each with its protocols and
    /// ports), as aguri3 makes it; empty when it was not made.
    pub flows: Vec<crate::flows2d::Flow>,
}

impl Summary {
    /// The summary of a period without a packet: every section holds only
    /// its root, with nothing in it. Written for an interval in which no
    /// packet came, so that a gap in the traffic is a gap in the files and
    /// the plots, not a line drawn through it.
    pub fn empty(start_ns: u64, end_ns: u64, metric: Metric, threshold: f64) -> Summary {
        let section = |kind: SectionKind| Section {
            kind,
            bytes: 0,
            packets: 0,
            entries: vec![Entry {
                prefix: Prefix::new(kind.key_kind(), 0, 0),
                bytes: 0,
                packets: 0,
            }],
        };
        Summary {
            start_ns,
            end_ns,
            metric,
            threshold,
            non_ip_bytes: 0,
            non_ip_packets: 0,
            sections: SectionKind::ALL.map(section),
            flows: Vec::new(),
        }
    }

    /// All packets of the period, IP or not.
    pub fn total_packets(&self) -> u64 {
        self.sections[0].packets.saturating_add(self.non_ip_packets)
    }

    /// All bytes of the period, IP or not.
    pub fn total_bytes(&self) -> u64 {
        self.sections[0].bytes.saturating_add(self.non_ip_bytes)
    }

    /// The section of `kind`.
    pub fn section(&self, kind: SectionKind) -> &Section {
        &self.sections[kind as usize]
    }

    /// A serializable view with labels as text and shares in percent.
    pub fn json(&self) -> SummaryJson {
        SummaryJson {
            start_ns: self.start_ns,
            end_ns: self.end_ns,
            metric: self.metric,
            threshold: self.threshold,
            non_ip_bytes: self.non_ip_bytes,
            non_ip_packets: self.non_ip_packets,
            sections: self
                .sections
                .iter()
                .map(|s| SectionJson {
                    kind: s.kind,
                    bytes: s.bytes,
                    packets: s.packets,
                    entries: s
                        .entries
                        .iter()
                        .map(|e| EntryJson {
                            label: e.prefix.to_string(),
                            bytes: e.bytes,
                            packets: e.packets,
                            share: share(
                                self.metric.value(e.bytes, e.packets),
                                self.metric.value(s.bytes, s.packets),
                            ),
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

/// [`Summary::json`]'s view.
#[derive(Debug, Serialize)]
pub struct SummaryJson {
    pub start_ns: u64,
    pub end_ns: u64,
    pub metric: Metric,
    pub threshold: f64,
    pub non_ip_bytes: u64,
    pub non_ip_packets: u64,
    pub sections: Vec<SectionJson>,
}

#[derive(Debug, Serialize)]
pub struct SectionJson {
    pub kind: SectionKind,
    pub bytes: u64,
    pub packets: u64,
    pub entries: Vec<EntryJson>,
}

#[derive(Debug, Serialize)]
pub struct EntryJson {
    pub label: String,
    pub bytes: u64,
    pub packets: u64,
    /// Percent of the section's total in the summary's metric.
    pub share: f64,
}

pub(crate) fn share(part: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        part as f64 * 100.0 / total as f64
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{MAGIC}")?;
        writeln!(f, "%%StartTime: {}", format_time(self.start_ns))?;
        writeln!(f, "%%EndTime: {}", format_time(self.end_ns))?;
        let secs = self.end_ns.saturating_sub(self.start_ns) as f64 / 1e9;
        let (bps, pps) = if secs > 0.0 {
            (
                self.total_bytes() as f64 * 8.0 / secs,
                self.total_packets() as f64 / secs,
            )
        } else {
            (0.0, 0.0)
        };
        writeln!(f, "%AvgRate: {} {pps:.2}pps", format_rate(bps))?;
        let metric = match self.metric {
            Metric::Bytes => "bytes",
            Metric::Packets => "packets",
            Metric::Either => "bytes or packets",
        };
        writeln!(f, "%%Threshold: {}% of {metric}", self.threshold)?;
        writeln!(f, "%%NonIP: {} {}", self.non_ip_bytes, self.non_ip_packets)?;
        for s in &self.sections {
            writeln!(f)?;
            let total = self.metric.value(s.bytes, s.packets);
            writeln!(
                f,
                "[{}] {} {} ({:.2}%)",
                s.kind.name(),
                s.bytes,
                s.packets,
                if total == 0 { 0.0 } else { 100.0 }
            )?;
            let (depth, subtree) = nesting(&s.entries, self.metric);
            for ((e, d), sub) in s.entries.iter().zip(depth).zip(subtree) {
                let mut line = String::new();
                for _ in 0..d {
                    line.push(' ');
                }
                let _ = write!(
                    line,
                    "{}\t{} {} ({:.2}%/{:.2}%)",
                    e.prefix,
                    e.bytes,
                    e.packets,
                    share(self.metric.value(e.bytes, e.packets), total),
                    share(sub, total)
                );
                writeln!(f, "{line}")?;
            }
        }
        if !self.flows.is_empty() {
            let (tb, tp) = (self.sections[0].bytes, self.sections[0].packets);
            writeln!(f)?;
            writeln!(f, "[{FLOWS}] {tb} {tp}")?;
            for fl in &self.flows {
                writeln!(
                    f,
                    "{} {}\t{} {} ({:.2}%/{:.2}%)",
                    fl.src,
                    fl.dst,
                    fl.bytes,
                    fl.packets,
                    share(fl.bytes, tb),
                    share(fl.packets, tp)
                )?;
                let mut line = String::from("\t");
                if fl.protos.is_empty() {
                    line.push('-');
                }
                for (i, e) in fl.protos.iter().enumerate() {
                    let sep = if i == 0 { "" } else { " " };
                    let _ = write!(
                        line,
                        "{sep}[{}] {} {}",
                        crate::flows2d::ExactSpec(e.spec),
                        e.bytes,
                        e.packets
                    );
                }
                writeln!(f, "{line}")?;
            }
        }
        Ok(())
    }
}

/// The name of the 2-D section, after the four.
pub const FLOWS: &str = "src dst";

/// Each entry's depth (enclosing entries) and its subtree's count.
pub(crate) fn nesting(entries: &[Entry], metric: Metric) -> (Vec<usize>, Vec<u64>) {
    let mut depth = Vec::with_capacity(entries.len());
    let mut sub: Vec<u64> = entries
        .iter()
        .map(|e| metric.value(e.bytes, e.packets))
        .collect();
    let mut stack: Vec<usize> = Vec::new();
    let pop = |stack: &mut Vec<usize>, sub: &mut Vec<u64>| {
        if let Some(i) = stack.pop() {
            if let Some(&p) = stack.last() {
                sub[p] = sub[p].saturating_add(sub[i]);
            }
        }
    };
    for (i, e) in entries.iter().enumerate() {
        while let Some(&top) = stack.last() {
            if entries[top].prefix.contains(&e.prefix) {
                break;
            }
            pop(&mut stack, &mut sub);
        }
        depth.push(stack.len());
        stack.push(i);
    }
    while !stack.is_empty() {
        pop(&mut stack, &mut sub);
    }
    (depth, sub)
}

fn format_rate(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.2}Gbps", bps / 1e9)
    } else if bps >= 1e6 {
        format!("{:.2}Mbps", bps / 1e6)
    } else if bps >= 1e3 {
        format!("{:.2}Kbps", bps / 1e3)
    } else {
        format!("{bps:.2}bps")
    }
}

const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// `Sun Nov 22 03:17:13 2026 (2026/11/22 03:17:13.5)`: aguri's ctime form,
/// then the exact time (UTC) that the reader uses.
pub fn format_time(ns: u64) -> String {
    let secs = ns / 1_000_000_000;
    let frac = ns % 1_000_000_000;
    let days = secs / 86_400;
    let (y, m, d) = civil_from_days(days as i64);
    let s = secs % 86_400;
    let (hh, mm, ss) = (s / 3600, s / 60 % 60, s % 60);
    let mut exact = format!("{y:04}/{m:02}/{d:02} {hh:02}:{mm:02}:{ss:02}");
    if frac != 0 {
        let digits = format!("{frac:09}");
        exact.push('.');
        exact.push_str(digits.trim_end_matches('0'));
    }
    format!(
        "{} {} {d:02} {hh:02}:{mm:02}:{ss:02} {y:04} ({exact})",
        WEEKDAYS[(days % 7) as usize],
        MONTHS[(m as usize).clamp(1, 12) - 1]
    )
}

/// A compact UTC stamp for file names: `20261122.031713`.
pub fn file_stamp(ns: u64) -> String {
    let secs = ns / 1_000_000_000;
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let s = secs % 86_400;
    format!(
        "{y:04}{m:02}{d:02}.{:02}{:02}{:02}",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

// Howard Hinnant's civil calendar algorithms (public domain).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

pub(crate) fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Where and why a summary file did not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line and column.
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}

impl std::error::Error for ParseError {}

pub(crate) fn perr(line: usize, column: usize, message: impl Into<String>) -> ParseError {
    ParseError {
        line,
        column,
        message: message.into(),
    }
}

/// The exact time in `... (YYYY/MM/DD HH:MM:SS[.FRACTION])`.
pub(crate) fn parse_time(text: &str, line: usize, column: usize) -> Result<u64, ParseError> {
    let bad = |col: usize| {
        perr(
            line,
            col,
            format!("bad time '{text}' (expected ... (YYYY/MM/DD HH:MM:SS) as aguri writes it)"),
        )
    };
    let open = text.rfind('(').ok_or_else(|| bad(column))?;
    let inner = text[open + 1..]
        .strip_suffix(')')
        .ok_or_else(|| bad(column + text.len()))?;
    let at = column + open + 1;
    let (date, clock) = inner.split_once(' ').ok_or_else(|| bad(at))?;
    let mut dp = date.splitn(3, '/');
    let (clock, frac) = clock.split_once('.').unwrap_or((clock, ""));
    let mut cp = clock.splitn(3, ':');
    let num = |it: &mut core::str::SplitN<'_, char>, max: u64| -> Result<u64, ParseError> {
        it.next()
            .filter(|s| !s.is_empty() && s.len() <= 4 && s.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|s| s.parse::<u64>().ok())
            .filter(|&n| n <= max)
            .ok_or_else(|| bad(at))
    };
    let y = num(&mut dp, 9999)?;
    let mo = num(&mut dp, 12)?;
    let d = num(&mut dp, 31)?;
    let hh = num(&mut cp, 23)?;
    let mi = num(&mut cp, 59)?;
    let ss = num(&mut cp, 60)?;
    if y < 1970 || mo == 0 || d == 0 || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(bad(at));
    }
    let mut frac_ns = 0u64;
    for (i, b) in frac.bytes().enumerate() {
        frac_ns += u64::from(b - b'0') * 10u64.pow(8 - i as u32);
    }
    let days = days_from_civil(y as i64, mo as u32, d as u32);
    let secs = (days as u64) * 86_400 + hh * 3600 + mi * 60 + ss;
    secs.checked_mul(1_000_000_000)
        .and_then(|n| n.checked_add(frac_ns))
        .ok_or_else(|| bad(at))
}

pub(crate) fn parse_u64(
    tok: &str,
    line: usize,
    column: usize,
    what: &str,
) -> Result<u64, ParseError> {
    if tok.is_empty() || !tok.bytes().all(|b| b.is_ascii_digit()) {
        return Err(perr(
            line,
            column,
            format!("bad {what} '{tok}' (expected a whole number)"),
        ));
    }
    tok.parse().map_err(|_| {
        perr(
            line,
            column,
            format!(
                "{what} '{tok}' is too large (expected at most {})",
                u64::MAX
            ),
        )
    })
}

/// Whitespace-separated tokens with their 1-based columns.
pub(crate) fn tokens(line: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in line.char_indices() {
        if c.is_whitespace() {
            if let Some(s) = start.take() {
                out.push((s + 1, &line[s..i]));
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        out.push((s + 1, &line[s..]));
    }
    out
}

pub(crate) struct Partial {
    pub(crate) line: usize,
    pub(crate) start: Option<u64>,
    pub(crate) end: Option<u64>,
    pub(crate) metric: Metric,
    pub(crate) threshold: f64,
    pub(crate) non_ip: (u64, u64),
    pub(crate) sections: Vec<(usize, Section)>,
    /// The 2-D section: its line and totals, and its flows.
    pub(crate) flows: Option<(usize, u64, u64)>,
    pub(crate) flow_list: Vec<crate::flows2d::Flow>,
}

impl Partial {
    pub(crate) fn new(line: usize) -> Partial {
        Partial {
            line,
            start: None,
            end: None,
            metric: Metric::Bytes,
            threshold: crate::profile::DEFAULT_THRESHOLD,
            non_ip: (0, 0),
            sections: Vec::new(),
            flows: None,
            flow_list: Vec::new(),
        }
    }

    /// Starts section `kind` on `line`, whose totals are the tokens `b` and
    /// `k` (each with its column).
    pub(crate) fn open_section(
        &mut self,
        line: usize,
        kind: SectionKind,
        (cb, b): (usize, &str),
        (ck, k): (usize, &str),
    ) -> Result<(), ParseError> {
        let bytes = parse_u64(b, line, cb, "byte count")?;
        let packets = parse_u64(k, line, ck, "packet count")?;
        self.sections.push((
            line,
            Section {
                kind,
                bytes,
                packets,
                entries: Vec::new(),
            },
        ));
        Ok(())
    }

    /// Checks the summary is whole and consistent. `at` is the line after it.
    pub(crate) fn finish(self, at: usize) -> Result<Summary, ParseError> {
        let start = self
            .start
            .ok_or_else(|| perr(self.line, 1, "summary has no %%StartTime line"))?;
        let end = self
            .end
            .ok_or_else(|| perr(self.line, 1, "summary has no %%EndTime line"))?;
        if end < start {
            return Err(perr(self.line, 1, "%%EndTime is before %%StartTime"));
        }
        if self.sections.len() < 4 {
            let missing = SectionKind::ALL[self.sections.len()].name();
            return Err(perr(
                at,
                1,
                format!(
                    "summary is truncated: section [{missing}] is missing (expected 4 sections)"
                ),
            ));
        }
        for (line, s) in &self.sections {
            let mut b = 0u64;
            let mut p = 0u64;
            for e in &s.entries {
                match (b.checked_add(e.bytes), p.checked_add(e.packets)) {
                    (Some(nb), Some(np)) => (b, p) = (nb, np),
                    _ => {
                        return Err(perr(
                            *line,
                            1,
                            format!(
                                "entries of [{}] add up to more than 64 bits can count",
                                s.kind.name()
                            ),
                        ))
                    }
                }
            }
            if (b, p) != (s.bytes, s.packets) {
                return Err(perr(
                    *line,
                    1,
                    format!(
                        "entries of [{}] add up to {b} bytes {p} packets, but its header says {} bytes {} packets (truncated or corrupted)",
                        s.kind.name(),
                        s.bytes,
                        s.packets
                    ),
                ));
            }
        }
        let (line0, first) = &self.sections[0];
        for (line, s) in &self.sections[1..] {
            if (s.bytes, s.packets) != (first.bytes, first.packets) {
                return Err(perr(
                    *line,
                    1,
                    format!(
                        "[{}] counts {} bytes {} packets but [{}] on line {line0} counts {} bytes {} packets (expected every section to count the same packets)",
                        s.kind.name(),
                        s.bytes,
                        s.packets,
                        first.kind.name(),
                        first.bytes,
                        first.packets
                    ),
                ));
            }
        }
        if let Some((line, b, k)) = self.flows {
            let (mut fb, mut fp) = (0u64, 0u64);
            for f in &self.flow_list {
                fb = fb.saturating_add(f.bytes);
                fp = fp.saturating_add(f.packets);
            }
            if (fb, fp) != (b, k)
                || (b, k) != (self.sections[0].1.bytes, self.sections[0].1.packets)
            {
                return Err(perr(
                    line,
                    1,
                    format!("the flows of [{FLOWS}] add up to {fb} bytes {fp} packets; its header says {b} bytes {k} packets and [src address] {} {} (truncated or corrupted)", self.sections[0].1.bytes, self.sections[0].1.packets),
                ));
            }
        }
        let flows = self.flow_list;
        let mut it = self.sections.into_iter().map(|(_, s)| s);
        let (Some(a), Some(b), Some(c), Some(d)) = (it.next(), it.next(), it.next(), it.next())
        else {
            return Err(perr(at, 1, "summary is truncated (expected 4 sections)"));
        };
        Ok(Summary {
            start_ns: start,
            end_ns: end,
            metric: self.metric,
            threshold: self.threshold,
            non_ip_bytes: self.non_ip.0,
            non_ip_packets: self.non_ip.1,
            sections: [a, b, c, d],
            flows,
        })
    }
}

/// Reads every summary in `text` (one file's contents), in any of the
/// formats [`crate::formats`] knows: kansoku's (`%!AGURI-1.0`), aguri2's
/// `-v` output, or aguri3's flow records (`%!AGURI-2.0`).
pub fn parse_summaries(text: &str) -> Result<Vec<Summary>, ParseError> {
    let parsed = match crate::formats::detect(text) {
        crate::formats::Format::Kansoku => parse_all(text),
        crate::formats::Format::Aguri2 => crate::formats::parse_aguri2(text),
        crate::formats::Format::Aguri3 => crate::formats::parse_aguri3(text),
    };
    parsed.map_err(|mut e| {
        // A file cut in the middle of a line fails on its last line: say so.
        let lines = text.lines().count();
        if !text.is_empty() && !text.ends_with('\n') && e.line >= lines {
            e.message = format!("file is truncated in its last line: {}", e.message);
        }
        e
    })
}

fn parse_all(text: &str) -> Result<Vec<Summary>, ParseError> {
    let mut out = Vec::new();
    let mut cur: Option<Partial> = None;
    let mut last_line = 0;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        last_line = line;
        let l = raw.trim_end();
        if l == MAGIC {
            if let Some(p) = cur.take() {
                out.push(p.finish(line)?);
            }
            cur = Some(Partial::new(line));
            continue;
        }
        if l.trim().is_empty() {
            continue;
        }
        let Some(p) = cur.as_mut() else {
            return Err(perr(
                line,
                1,
                format!("expected '{MAGIC}' to open a summary"),
            ));
        };
        if let Some(rest) = l.strip_prefix('%') {
            if !p.sections.is_empty() {
                return Err(perr(
                    line,
                    1,
                    "header line after the sections began (expected an entry)",
                ));
            }
            parse_header(p, rest, line)?;
            continue;
        }
        if let Some(rest) = l.strip_prefix('[') {
            let Some((name, counts)) = rest.split_once(']') else {
                return Err(perr(
                    line,
                    1,
                    "bad section header (expected [NAME] BYTES PACKETS)",
                ));
            };
            let n = p.sections.len();
            if name == FLOWS && n == 4 && p.flows.is_none() {
                let toks = tokens(counts);
                let (Some(&(cb, b)), Some(&(cp, pk))) = (toks.first(), toks.get(1)) else {
                    return Err(perr(
                        line,
                        FLOWS.len() + 3,
                        format!("[{FLOWS}] lacks its totals"),
                    ));
                };
                let col0 = FLOWS.len() + 3;
                p.flows = Some((
                    line,
                    parse_u64(b, line, col0 + cb - 1, "byte count")?,
                    parse_u64(pk, line, col0 + cp - 1, "packet count")?,
                ));
                continue;
            }
            let Some(&kind) = SectionKind::ALL.get(n) else {
                return Err(perr(line, 2, format!("unexpected section [{name}] (expected 4 sections, then '{MAGIC}' or the end)")));
            };
            if name != kind.name() {
                return Err(perr(
                    line,
                    2,
                    format!("section [{name}] out of place (expected [{}])", kind.name()),
                ));
            }
            let col0 = name.len() + 3;
            let toks = tokens(counts);
            let (Some(&(cb, b)), Some(&(cp, pk))) = (toks.first(), toks.get(1)) else {
                return Err(perr(
                    line,
                    col0,
                    format!("section [{name}] lacks its totals (expected [{name}] BYTES PACKETS)"),
                ));
            };
            p.open_section(line, kind, (col0 + cb - 1, b), (col0 + cp - 1, pk))?;
            continue;
        }
        if p.flows.is_some() {
            parse_flow_line(p, l, line)?;
            continue;
        }
        let Some((_, sec)) = p.sections.last_mut() else {
            return Err(perr(
                line,
                1,
                "entry before any section (expected [src address] first)",
            ));
        };
        let toks = tokens(l);
        let (Some(&(cl, label)), Some(&(cb, b)), Some(&(cp, pk))) =
            (toks.first(), toks.get(1), toks.get(2))
        else {
            return Err(perr(
                line,
                1,
                "short entry (expected LABEL BYTES PACKETS (OWN%/SUBTREE%))",
            ));
        };
        let prefix = Prefix::parse(sec.kind.key_kind(), label)
            .map_err(|e| perr(line, cl + e.offset, e.message))?;
        let bytes = parse_u64(b, line, cb, "byte count")?;
        let packets = parse_u64(pk, line, cp, "packet count")?;
        if let Some(&(c, t)) = toks.get(3) {
            if !(t.starts_with('(') && l.ends_with(')')) {
                return Err(perr(
                    line,
                    c,
                    format!("bad shares '{t}' (expected (OWN%/SUBTREE%))"),
                ));
            }
        }
        sec.entries.push(Entry {
            prefix,
            bytes,
            packets,
        });
    }
    match cur {
        Some(p) => out.push(p.finish(last_line + 1)?),
        None => {
            return Err(perr(
                last_line.max(1),
                1,
                format!("no summary found (expected a file starting with '{MAGIC}')"),
            ))
        }
    }
    Ok(out)
}

/// A line of the 2-D section: `SRC DST<TAB>BYTES PACKETS (x%/y%)`, or its
/// protocols, `<TAB>[6:80:*] BYTES PACKETS ...` (`<TAB>-` for none).
fn parse_flow_line(p: &mut Partial, l: &str, line: usize) -> Result<(), ParseError> {
    use crate::flows2d::{parse_proto_spec, Flow, ProtoEntry};
    if let Some(rest) = l.strip_prefix('\t') {
        let Some(f) = p.flow_list.last_mut() else {
            return Err(perr(line, 1, "protocols before any flow"));
        };
        if rest == "-" {
            return Ok(());
        }
        let toks = tokens(rest);
        // What the flow's protocol lines so far hold, this one's added below.
        let (mut sb, mut sp) = f.protos.iter().fold((0u64, 0u64), |a, e| {
            (a.0.saturating_add(e.bytes), a.1.saturating_add(e.packets))
        });
        for chunk in toks.chunks(3) {
            let [(cs, spec), (cb, b), (cp, k)] = chunk else {
                return Err(perr(
                    line,
                    2,
                    "short protocol entry (expected [SPEC] BYTES PACKETS)",
                ));
            };
            let parsed = spec
                .strip_prefix('[')
                .and_then(|x| x.strip_suffix(']'))
                .and_then(parse_proto_spec)
                .ok_or_else(|| perr(line, cs + 1, format!("bad protocol '{spec}'")))?;
            let bytes = parse_u64(b, line, cb + 1, "byte count")?;
            let packets = parse_u64(k, line, cp + 1, "packet count")?;
            sb = sb.saturating_add(bytes);
            sp = sp.saturating_add(packets);
            f.protos.push(ProtoEntry {
                spec: parsed,
                bytes,
                packets,
            });
        }
        if sb > f.bytes || sp > f.packets || sb == u64::MAX || sp == u64::MAX {
            return Err(perr(line, 2, "the protocols hold more than their flow"));
        }
        return Ok(());
    }
    let toks = tokens(l);
    let (Some(&(cs, src)), Some(&(cd, dst)), Some(&(cb, b)), Some(&(cp, k))) =
        (toks.first(), toks.get(1), toks.get(2), toks.get(3))
    else {
        return Err(perr(line, 1, "short flow (expected SRC DST BYTES PACKETS)"));
    };
    let addr = |t: &str, c: usize| {
        Prefix::parse(KeyKind::Address, t).map_err(|e| perr(line, c + e.offset, e.message))
    };
    let flow = Flow {
        src: addr(src, cs)?,
        dst: addr(dst, cd)?,
        bytes: parse_u64(b, line, cb, "byte count")?,
        packets: parse_u64(k, line, cp, "packet count")?,
        protos: Vec::new(),
    };
    p.flow_list.push(flow);
    Ok(())
}

fn parse_header(p: &mut Partial, rest: &str, line: usize) -> Result<(), ParseError> {
    let (key, value) = match rest.split_once(':') {
        Some((k, v)) => (k, v),
        None => return Ok(()),
    };
    let vcol = key.len() + 3;
    let v = value.trim();
    match key {
        "%StartTime" => p.start = Some(parse_time(v, line, vcol)?),
        "%EndTime" => p.end = Some(parse_time(v, line, vcol)?),
        "%Threshold" => {
            let bad = || {
                perr(
                    line,
                    vcol,
                    format!(
                        "bad threshold '{v}' (expected PERCENT% of bytes|packets|bytes or packets)"
                    ),
                )
            };
            let (pct, metric) = v.split_once("% of ").ok_or_else(bad)?;
            p.threshold = pct
                .parse::<f64>()
                .ok()
                .filter(|t| (0.0..=100.0).contains(t))
                .ok_or_else(bad)?;
            p.metric = match metric {
                "bytes" => Metric::Bytes,
                "packets" => Metric::Packets,
                "bytes or packets" => Metric::Either,
                _ => return Err(bad()),
            };
        }
        "%NonIP" => {
            let toks = tokens(v);
            let (Some(&(_, b)), Some(&(_, pk))) = (toks.first(), toks.get(1)) else {
                return Err(perr(
                    line,
                    vcol,
                    "bad %%NonIP line (expected BYTES PACKETS)",
                ));
            };
            p.non_ip = (
                parse_u64(b, line, vcol, "byte count")?,
                parse_u64(pk, line, vcol, "packet count")?,
            );
        }
        // %AvgRate and anything else aguri may write is informational.
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{FlowKey, ProfilerConfig};

    fn sample() -> Summary {
        let mut p = ProfilerConfig::default().build().unwrap();
        let k = |s: &str, d: &str, pr: u8, sp: u16, dp: u16| FlowKey {
            src: s.parse().unwrap(),
            dst: d.parse().unwrap(),
            protocol: pr,
            src_port: sp,
            dst_port: dp,
        };
        for i in 0..500u32 {
            let src = format!("150.65.{}.{}", i % 7, i % 251);
            p.add(
                1_795_317_600_000_000_000 + u64::from(i) * 1_000_003,
                &k(&src, "10.0.0.1", 6, 1024 + (i % 3000) as u16, 80),
                40 + i,
            );
            p.add(
                1_795_317_600_000_000_000 + u64::from(i) * 1_000_003,
                &k("2001:db8::5", "2001:db8::9", 58, 0, 0),
                100,
            );
        }
        p.finish().pop().unwrap()
    }

    #[test]
    fn round_trips() {
        let s = sample();
        let text = s.to_string();
        assert!(text.starts_with("%!AGURI-1.0\n%%StartTime: "), "{text}");
        assert!(
            text.contains("%%Threshold: 1% of bytes or packets\n"),
            "{text}"
        );
        let back = parse_summaries(&text).unwrap();
        assert_eq!(back, vec![s.clone()]);
        // Two summaries in one file.
        let two = format!("{text}{text}");
        assert_eq!(parse_summaries(&two).unwrap(), vec![s.clone(), s]);
    }

    #[test]
    fn times_keep_their_fraction() {
        for ns in [
            0u64,
            951_782_400_000_000_000,
            1_795_317_433_483_032_138,
            1_795_317_433_500_000_000,
        ] {
            let t = format_time(ns);
            assert_eq!(parse_time(&t, 1, 1).unwrap(), ns, "{t}");
        }
        assert_eq!(
            format_time(1_795_317_433_500_000_000),
            "Sun Nov 22 03:17:13 2026 (2026/11/22 03:17:13.5)"
        );
        assert_eq!(file_stamp(1_795_317_433_500_000_000), "20261122.031713");
    }

    #[test]
    fn truncated_files_are_errors() {
        let text = sample().to_string();
        let lines: Vec<&str> = text.lines().collect();
        for cut in 1..lines.len() - 1 {
            let t = lines[..cut].join("\n");
            let e = parse_summaries(&t);
            // A cut that ends exactly between entries of the last section is
            // caught by the totals; every cut is caught somehow.
            assert!(e.is_err(), "cut at line {cut} was accepted");
        }
    }

    #[test]
    fn a_flow_whose_protocols_hold_more_than_it_is_refused() {
        let mut s = Summary::empty(0, 1_000_000_000, Metric::Either, 1.0);
        let root = Prefix::new(KeyKind::Address, 0, 0);
        for sec in &mut s.sections {
            sec.bytes = 100;
            sec.packets = 1;
            sec.entries[0].bytes = 100;
            sec.entries[0].packets = 1;
        }
        s.flows.push(crate::flows2d::Flow {
            src: root,
            dst: root,
            bytes: 100,
            packets: 1,
            protos: Vec::new(),
        });
        let text = s.to_string();
        assert_eq!(parse_summaries(&text).unwrap()[0], s);
        // Two protocol lines of 100 bytes each under a 100-byte flow.
        let two = text.replace("\t-\n", "\t[6:80:*] 100 1\n\t[6:81:*] 100 1\n");
        let e = parse_summaries(&two).unwrap_err();
        assert!(e.message.contains("more than their flow"), "{e}");
        let huge = text.replace("\t-\n", "\t[6:80:*] 18446744073709551615 0 [6:81:*] 1 0\n");
        assert!(parse_summaries(&huge).is_err());
    }

    /// Port ranges from 0 and protocol 0, which agurim's format writes as
    /// `*`, come back as they were from kansoku's.
    #[test]
    fn ranges_from_port_zero_and_protocol_zero_read_back_the_same() {
        use crate::flows2d::{PortRange, ProtoEntry, ProtoSpec};
        let mut s = Summary::empty(0, 1_000_000_000, Metric::Either, 1.0);
        let root = Prefix::new(KeyKind::Address, 0, 0);
        for sec in &mut s.sections {
            sec.bytes = 300;
            sec.packets = 3;
            sec.entries[0].bytes = 300;
            sec.entries[0].packets = 3;
        }
        let entry = |proto, sport, dport| ProtoEntry {
            spec: ProtoSpec {
                proto,
                sport,
                dport,
            },
            bytes: 100,
            packets: 1,
        };
        s.flows.push(crate::flows2d::Flow {
            src: root,
            dst: root,
            bytes: 300,
            packets: 3,
            protos: vec![
                entry(Some(6), PortRange::new(0, 6), PortRange::exact(80)),
                entry(Some(17), PortRange::exact(53), PortRange::new(0, 1)),
                entry(Some(0), PortRange::ANY, PortRange::ANY),
            ],
        });
        let text = s.to_string();
        assert!(
            text.contains("[6:0-1023:80]") && text.contains("[0:*:*]"),
            "{text}"
        );
        assert_eq!(parse_summaries(&text).unwrap()[0], s);
    }

    #[test]
    fn corrupted_counts_name_the_line() {
        let text = sample().to_string();
        let bad = text.replacen("\t", "\t9", 1);
        let e = parse_summaries(&bad).unwrap_err();
        assert!(e.message.contains("add up to"), "{e}");
        let bad = text.replacen("[dst address]", "[dst adress]", 1);
        let e = parse_summaries(&bad).unwrap_err();
        assert!(e.message.contains("expected [dst address]"), "{e}");
        let e = parse_summaries("hello\n").unwrap_err();
        assert_eq!((e.line, e.column), (1, 1));
        let bad = text.replacen("(2026/11/22", "(2026/13/22", 1);
        assert!(parse_summaries(&bad)
            .unwrap_err()
            .message
            .contains("bad time"));
    }
}
