//! File rotation as tcpdump's `-C`, `-G` and `-W` do it, decided on packet
//! timestamps so that offline conversion rotates the same way as capture,
//! and an archive's disk limit (`--max-total`, as n2disk's).
//!
//! tcpdump(8): with `-C file_size`, "before writing a raw packet to a
//! savefile, check whether the file is currently larger than file_size and,
//! if so, close the current savefile and open a new one. Savefiles after the
//! first savefile will have the name specified with the -w flag, with a
//! number after it, starting at 1 and continuing upward. The units of
//! file_size are millions of bytes (1,000,000 bytes, not 1,048,576 bytes)."
//! With `-G rotate_seconds`, the name is a strftime(3) pattern expanded at
//! each rotation; with both, the number restarts at each new period.
//!
//! Three differences, all deliberate: the number (five digits, zero-padded)
//! goes before the name's trace extensions, so that every file's name still
//! says its format (`x.pcap.lz4`, `x-00001.pcap.lz4`, `x-00002.pcap.lz4`,
//! where tcpdump makes `x.pcap.lz41`); the `-G` clock is the packets' own
//! timestamps, formatted in UTC (reproducible, independent of the host's
//! zone); and a name without a time pattern gets the period's start time
//! before its extensions (`x-%Y%m%d%H%M%S.pcap`) instead of each period
//! overwriting the last. The size checked for `-C` is the bytes already
//! written to the file, which trails the records given by at most one block.
//!
//! An archive keeps what its disk holds: `-W N` keeps the newest N files
//! of the rotation and `--max-total` the newest that fit in a number of
//! bytes (their seek indexes counted), deleting the oldest at each new
//! file. tcpdump's `-W` overwrites its files in a ring of names instead,
//! which leaves a directory whose names no longer follow time; and with
//! `-G` it exits after N files. The files of the rotation are this run's
//! and those an earlier run of the same name left in the directory (a
//! capture restarted over weeks keeps one limit); other files are never
//! touched, nor the file being written, nor a file this process reads.
//! Every deletion is reported ([`RotatingWriter::on_delete`]) and counted.
//!
//! Every file is a complete trace with its own header and index: pcapng
//! sections and interfaces seen so far are written again at the top of each
//! new file.

use std::fs::File;
use std::path::{Path, PathBuf};

use wire::LinkType;

use crate::error::{Error, Result};
use crate::index::sidecars;
use crate::read::is_being_read;
use crate::record::{Interface, Record, Section};
use crate::write::{split_extension, TraceWriter, WriteStats, WriterConfig};

/// When to start a new file, and how many to keep.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RotateConfig {
    /// `-C`: start a new file once the current one is larger than this many
    /// bytes.
    pub max_bytes: Option<u64>,
    /// `-G`: start a new file once a packet is this many seconds after the
    /// first packet of the current file.
    pub interval_secs: Option<u64>,
    /// `-W`: keep the newest this many files of the rotation, deleting the
    /// oldest.
    pub max_files: Option<u64>,
    /// `--max-total`: keep the rotation's files within this many bytes,
    /// their sidecars (seek and key indexes) included, deleting the oldest.
    pub max_total_bytes: Option<u64>,
}

impl RotateConfig {
    /// From tcpdump's units: `-C` in millions of bytes, `-G` in seconds.
    pub fn tcpdump(c_millions: Option<u64>, g_seconds: Option<u64>) -> RotateConfig {
        RotateConfig {
            max_bytes: c_millions.map(|m| m.saturating_mul(1_000_000)),
            interval_secs: g_seconds,
            ..RotateConfig::default()
        }
    }

    /// Whether files are ever deleted.
    pub fn deletes(&self) -> bool {
        self.max_files.is_some() || self.max_total_bytes.is_some()
    }

    /// Checks that limits are positive, and that a limit on the files has
    /// files to limit.
    pub fn validate(&self) -> Result<()> {
        if self.max_bytes == Some(0) {
            return Err(Error::Config("-C file size must be at least 1".into()));
        }
        if self.interval_secs == Some(0) {
            return Err(Error::Config(
                "-G interval must be at least 1 second".into(),
            ));
        }
        if self.max_files == Some(0) {
            return Err(Error::Config("-W must keep at least 1 file".into()));
        }
        if self.max_total_bytes == Some(0) {
            return Err(Error::Config("--max-total must be at least 1 byte".into()));
        }
        if self.deletes() && self.max_bytes.is_none() && self.interval_secs.is_none() {
            return Err(Error::Config(
                "-W and --max-total need -C or -G: without a rotation there is one file".into(),
            ));
        }
        Ok(())
    }
}

/// The time patterns expanded in names.
const PATTERNS: &[u8] = b"YmdHMSjs";

/// Whether `name` holds a time pattern that [`expand_time`] replaces.
pub fn has_time_pattern(name: &str) -> bool {
    let b = name.as_bytes();
    b.windows(2)
        .any(|w| w[0] == b'%' && PATTERNS.contains(&w[1]))
}

/// Expands `%Y %m %d %H %M %S %j %s %%` in `pattern` for `ts_nanos` (UTC);
/// other `%` sequences are kept as they are.
pub fn expand_time(pattern: &str, ts_nanos: u64) -> String {
    let secs = ts_nanos / 1_000_000_000;
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    let yday = days - days_from_civil(y, 1, 1) + 1;
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.peek().copied() {
            Some('Y') => out.push_str(&format!("{y:04}")),
            Some('m') => out.push_str(&format!("{m:02}")),
            Some('d') => out.push_str(&format!("{d:02}")),
            Some('H') => out.push_str(&format!("{:02}", rem / 3600)),
            Some('M') => out.push_str(&format!("{:02}", rem % 3600 / 60)),
            Some('S') => out.push_str(&format!("{:02}", rem % 60)),
            Some('j') => out.push_str(&format!("{yday:03}")),
            Some('s') => out.push_str(&secs.to_string()),
            Some('%') => out.push('%'),
            _ => {
                out.push('%');
                continue;
            }
        }
        chars.next();
    }
    out
}

/// Days since 1970-01-01 to a proleptic Gregorian date (H. Hinnant's
/// `civil_from_days`, for days >= 0).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// The inverse of [`civil_from_days`] for years >= 1970.
fn days_from_civil(y: u64, m: u64, d: u64) -> u64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A file the rotation deleted (`-W`, `--max-total`).
#[derive(Clone, Debug)]
pub struct Deleted {
    pub path: PathBuf,
    /// Bytes freed: the file and its seek index.
    pub bytes: u64,
    /// What this run wrote to it; `None` for a file an earlier run left.
    pub written: Option<WriteStats>,
}

/// What a rotation wrote: the files still there, with their counters, and
/// those it deleted.
#[derive(Debug, Default)]
pub struct Rotated {
    pub files: Vec<(PathBuf, WriteStats)>,
    pub deleted: Vec<Deleted>,
}

/// A file of the rotation, oldest first: one this run wrote (its counters)
/// or one an earlier run left.
struct Member {
    path: PathBuf,
    written: Option<WriteStats>,
}

/// Receives each deletion as it happens.
pub type DeleteNotice = Box<dyn FnMut(&Deleted, &str) + Send>;

/// A writer that starts a new trace file as `-C`/`-G` say, and keeps as
/// many as `-W`/`--max-total` say.
pub struct RotatingWriter {
    /// The name before its trace extensions (with `-G`, a time pattern)
    /// and the extensions.
    stem: String,
    extension: String,
    cfg: WriterConfig,
    rot: RotateConfig,
    cur: Option<(PathBuf, TraceWriter<File>)>,
    /// Timestamp that started the current `-G` period.
    period_start: u64,
    /// `-C` count within the period (0: the plain name).
    count: u64,
    /// Finished files still on disk, oldest first; `None` until the first
    /// file, when an earlier run's files are looked for.
    done: Option<Vec<Member>>,
    deleted: Vec<Deleted>,
    notice: Option<DeleteNotice>,
    /// pcapng section and interfaces to write again in each new file.
    section: Option<Section>,
    ifaces: Vec<Interface>,
    /// Non-packet records seen before the first file was opened.
    early_blocks: Vec<(u32, Vec<u8>, bool)>,
}

impl RotatingWriter {
    /// A writer whose files are named after `path` (see the module docs).
    /// No file is created before the first packet, whose time names it.
    pub fn new(path: &Path, cfg: WriterConfig, rot: RotateConfig) -> Result<RotatingWriter> {
        cfg.validate()?;
        rot.validate()?;
        let template = path
            .to_str()
            .ok_or_else(|| Error::Config(format!("{} is not valid UTF-8", path.display())))?;
        let (stem, extension) = split_extension(template);
        let mut stem = stem.to_string();
        if rot.interval_secs.is_some() && !has_time_pattern(&stem) {
            stem.push_str("-%Y%m%d%H%M%S");
        }
        Ok(RotatingWriter {
            stem,
            extension: extension.to_string(),
            cfg,
            rot,
            cur: None,
            period_start: 0,
            count: 0,
            done: None,
            deleted: Vec::new(),
            notice: None,
            section: None,
            ifaces: Vec::new(),
            early_blocks: Vec::new(),
        })
    }

    /// Calls `notice` with each file `-W`/`--max-total` deletes, and why.
    pub fn on_delete(&mut self, notice: DeleteNotice) {
        self.notice = Some(notice);
    }

    /// The name of the file for the current period and count.
    fn file_name(&self) -> PathBuf {
        let mut name = if self.rot.interval_secs.is_some() {
            expand_time(&self.stem, self.period_start)
        } else {
            self.stem.clone()
        };
        if self.count > 0 {
            name.push_str(&format!("-{:05}", self.count));
        }
        name.push_str(&self.extension);
        PathBuf::from(name)
    }

    /// Closes the current file, if any, opens the next one, and deletes
    /// what `-W`/`--max-total` no longer keep.
    fn open_next(&mut self) -> Result<()> {
        let path = self.file_name();
        let done = match self.done.take() {
            Some(d) => d,
            None if self.rot.deletes() => earlier_members(&self.stem, &self.extension, &path),
            None => Vec::new(),
        };
        let done = self.done.insert(done);
        if let Some((p, w)) = self.cur.take() {
            let stats = w.finish()?;
            done.push(Member {
                path: p,
                written: Some(stats),
            });
        }
        // An earlier run's file of the same name is about to be replaced.
        done.retain(|m| m.path != path);
        let mut w = TraceWriter::create(&path, self.cfg.clone())?;
        if let Some(s) = &self.section {
            w.write_record(&Record::Section(s))?;
        }
        for i in &self.ifaces {
            w.write_record(&Record::Interface(i))?;
        }
        for (block_type, body, little_endian) in self.early_blocks.drain(..) {
            w.write_record(&Record::Block(crate::record::RawBlock {
                block_type,
                body: &body,
                little_endian,
            }))?;
        }
        self.cur = Some((path, w));
        self.keep_within_limits();
        Ok(())
    }

    /// Deletes the oldest finished files while the rotation holds more
    /// files than `-W` or more bytes than `--max-total` (counting the new
    /// file at the size it may grow to: `-C` or the largest file so far,
    /// whichever is more, since a file passes `-C` by up to a block).
    fn keep_within_limits(&mut self) {
        let Some(done) = self.done.as_mut() else {
            return;
        };
        let size = |p: &Path| {
            let file = std::fs::metadata(p).map_or(0, |m| m.len());
            let side = sidecars(p).map(|s| std::fs::metadata(s).map_or(0, |m| m.len()));
            file + side.iter().sum::<u64>()
        };
        let mut sizes: Vec<u64> = done.iter().map(|m| size(&m.path)).collect();
        let reserve = self
            .rot
            .max_bytes
            .unwrap_or(0)
            .max(sizes.iter().copied().max().unwrap_or(0));
        let mut total: u64 = sizes.iter().sum::<u64>() + reserve;
        let mut i = 0;
        while i < done.len() {
            // The file being written counts as one.
            let too_many = self
                .rot
                .max_files
                .is_some_and(|n| done.len() as u64 + 1 > n);
            let too_big = self.rot.max_total_bytes.is_some_and(|t| total > t);
            if !too_many && !too_big {
                break;
            }
            if is_being_read(&done[i].path) {
                i += 1;
                continue;
            }
            let why = if too_many {
                format!(
                    "-W {} keeps the newest files",
                    self.rot.max_files.unwrap_or(0)
                )
            } else {
                format!(
                    "--max-total {} bytes keeps the newest files",
                    self.rot.max_total_bytes.unwrap_or(0)
                )
            };
            match std::fs::remove_file(&done[i].path) {
                // Gone already (removed by hand): nothing left to free.
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    // Kept, and named; the next file is tried.
                    if let Some(n) = self.notice.as_mut() {
                        let d = Deleted {
                            path: done[i].path.clone(),
                            bytes: 0,
                            written: None,
                        };
                        n(&d, &format!("could not be deleted ({e}); {why}"));
                    }
                    i += 1;
                    continue;
                }
            }
            let m = done.remove(i);
            let bytes = sizes.remove(i);
            for s in sidecars(&m.path) {
                let _ = std::fs::remove_file(s);
            }
            total = total.saturating_sub(bytes);
            let d = Deleted {
                path: m.path,
                bytes,
                written: m.written,
            };
            if let Some(n) = self.notice.as_mut() {
                n(&d, &why);
            }
            self.deleted.push(d);
        }
    }

    /// Opens or rotates the file as a packet at `ts` requires.
    fn before_packet(&mut self, ts: u64) -> Result<()> {
        let Some((_, w)) = &self.cur else {
            self.period_start = ts;
            return self.open_next();
        };
        if let Some(g) = self.rot.interval_secs {
            if ts.saturating_sub(self.period_start) >= g.saturating_mul(1_000_000_000) {
                self.period_start = ts;
                self.count = 0;
                return self.open_next();
            }
        }
        if let Some(c) = self.rot.max_bytes {
            if w.stats().bytes_out > c {
                self.count += 1;
                return self.open_next();
            }
        }
        Ok(())
    }

    /// Writes one record, rotating first if it is a packet that calls for it.
    pub fn write_record(&mut self, rec: &Record) -> Result<()> {
        match rec {
            Record::Packet(p) => {
                self.before_packet(p.ts_nanos())?;
            }
            Record::Section(s) => {
                self.section = Some((*s).clone());
                self.ifaces.clear();
            }
            Record::Interface(i) => self.ifaces.push((*i).clone()),
            Record::Block(b) => {
                if self.cur.is_none() {
                    self.early_blocks
                        .push((b.block_type, b.body.to_vec(), b.little_endian));
                }
            }
        }
        match &mut self.cur {
            Some((_, w)) => w.write_record(rec),
            None => Ok(()),
        }
    }

    /// Writes one packet (see [`TraceWriter::write_packet`]).
    pub fn write_packet(
        &mut self,
        link_type: LinkType,
        ts_nanos: u64,
        orig_len: u32,
        data: &[u8],
    ) -> Result<()> {
        self.before_packet(ts_nanos)?;
        match &mut self.cur {
            Some((_, w)) => w.write_packet(link_type, ts_nanos, orig_len, data),
            None => Ok(()),
        }
    }

    /// Writes the current file's gathered chunks if they make a write
    /// ([`TraceWriter::release`]).
    pub fn release(&mut self) -> Result<()> {
        match &mut self.cur {
            Some((_, w)) => w.release(),
            None => Ok(()),
        }
    }

    /// Writes the records buffered in the current file as a chunk.
    pub fn flush_block(&mut self) -> Result<()> {
        match &mut self.cur {
            Some((_, w)) => w.flush_block(),
            None => Ok(()),
        }
    }

    /// Files finished so far (and not deleted) and the current one, in
    /// order.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.done
            .iter()
            .flatten()
            .map(|m| m.path.clone())
            .chain(self.cur.iter().map(|(p, _)| p.clone()))
            .collect()
    }

    /// Finishes the current file and returns every file this run wrote
    /// that is still there, with its counters, and those deleted. With no
    /// packets at all, one file named for the current time is written so
    /// that the output exists.
    pub fn finish(mut self) -> Result<Rotated> {
        if self.cur.is_none() {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
            self.period_start = now;
            self.open_next()?;
        }
        let mut files: Vec<(PathBuf, WriteStats)> = self
            .done
            .take()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|m| Some((m.path, m.written?)))
            .collect();
        if let Some((p, w)) = self.cur.take() {
            let stats = w.finish()?;
            files.push((p, stats));
        }
        Ok(Rotated {
            files,
            deleted: self.deleted,
        })
    }
}

/// The files an earlier run of the rotation named `stem` + `extension`
/// left beside it (`next`, about to be written, apart), oldest first (by
/// modification time, then name): the names the rotation makes, with any
/// number and any time in place of the time pattern.
fn earlier_members(stem: &str, extension: &str, next: &Path) -> Vec<Member> {
    let stem_path = Path::new(stem);
    let dir = match stem_path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let Some(pattern) = stem_path.file_name().and_then(|n| n.to_str()) else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut found: Vec<(std::time::SystemTime, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let name = name.to_str()?;
            let stem_of = name.strip_suffix(extension)?;
            if !is_rotation_name(pattern.as_bytes(), stem_of.as_bytes()) {
                return None;
            }
            let meta = e.metadata().ok().filter(|m| m.is_file())?;
            let path = dir.join(name);
            (path != next).then(|| (meta.modified().unwrap_or(std::time::UNIX_EPOCH), path))
        })
        .collect();
    found.sort();
    found
        .into_iter()
        .map(|(_, path)| Member {
            path,
            written: None,
        })
        .collect()
}

/// Whether `name` (extensions removed) is one the rotation's `pattern`
/// makes: each time field a run of digits, `%%` a `%`, other bytes as they
/// are, then optionally `-` and the file's number.
fn is_rotation_name(pattern: &[u8], name: &[u8]) -> bool {
    match pattern {
        [] => {
            name.is_empty()
                || name
                    .strip_prefix(b"-")
                    .is_some_and(|n| !n.is_empty() && n.iter().all(u8::is_ascii_digit))
        }
        [b'%', b'%', rest @ ..] => name
            .strip_prefix(b"%")
            .is_some_and(|n| is_rotation_name(rest, n)),
        [b'%', f, rest @ ..] if PATTERNS.contains(f) => {
            let digits = name.iter().take_while(|b| b.is_ascii_digit()).count();
            (1..=digits).any(|k| is_rotation_name(rest, &name[k..]))
        }
        [c, rest @ ..] => name.first() == Some(c) && is_rotation_name(rest, &name[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_patterns_expand_in_utc() {
        // 2024-02-29 13:05:09 UTC = 1709211909 s.
        let ts = 1_709_211_909_123_456_789;
        assert_eq!(
            expand_time("t-%Y%m%d-%H%M%S.pcap", ts),
            "t-20240229-130509.pcap"
        );
        assert_eq!(expand_time("%j %s %% %q", ts), "060 1709211909 % %q");
        assert_eq!(expand_time("%Y-%m-%d", 0), "1970-01-01");
        assert!(has_time_pattern("a%H"));
        assert!(!has_time_pattern("a%q%"));
    }

    #[test]
    fn civil_dates_round_trip() {
        for days in [0u64, 59, 60, 365, 10_957, 19_782, 20_000, 100_000] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
    }

    #[test]
    fn zero_limits_are_rejected() {
        assert!(RotateConfig::tcpdump(Some(0), None).validate().is_err());
        assert!(RotateConfig::tcpdump(None, Some(0)).validate().is_err());
        assert_eq!(
            RotateConfig::tcpdump(Some(2), None).max_bytes,
            Some(2_000_000)
        );
    }
}
