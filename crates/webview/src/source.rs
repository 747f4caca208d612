//! Where the view's summaries come from: [`DirSource`], a directory of
//! summary files (a `profile -w DIR/` output or a `--archive DIR` of
//! 5-minute, hourly and daily summaries), and [`MemorySource`], summaries
//! held in memory. Both implement [`aguri::source::DataSource`], the
//! interface the view asks; the fleet store in ClickHouse implements it
//! too.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use aguri::source::{Catalog, DataSource, LevelInfo, SourceError};
use aguri::Summary;

/// A directory of summary files, read again when files change.
pub struct DirSource {
    root: PathBuf,
    state: Mutex<State>,
    /// How long a scan of the directory is trusted.
    rescan: Duration,
}

struct Cached {
    stamp: (SystemTime, u64),
    parsed: Result<Vec<Arc<Summary>>, String>,
}

#[derive(Default)]
struct State {
    files: HashMap<PathBuf, Cached>,
    index: Arc<Index>,
    scanned: Option<Instant>,
}

#[derive(Default)]
struct Index {
    /// Coarsest first.
    levels: Vec<Level>,
    problems: Vec<String>,
}

struct Level {
    name: String,
    interval_ns: u64,
    /// Sorted by start.
    summaries: Vec<Arc<Summary>>,
}

impl Level {
    /// The level of `summaries` (none if there are none), sorted by start;
    /// its interval is their median length.
    fn of(name: String, mut summaries: Vec<Arc<Summary>>) -> Option<Level> {
        if summaries.is_empty() {
            return None;
        }
        summaries.sort_by_key(|s| (s.start_ns, s.end_ns));
        let mut lengths: Vec<u64> = summaries
            .iter()
            .map(|s| s.end_ns.saturating_sub(s.start_ns))
            .collect();
        lengths.sort_unstable();
        Some(Level {
            name,
            interval_ns: lengths[lengths.len() / 2].max(1),
            summaries,
        })
    }

    fn info(&self) -> LevelInfo {
        LevelInfo {
            name: self.name.clone(),
            interval_s: self.interval_ns.div_ceil(1_000_000_000),
            summaries: self.summaries.len(),
            first_ns: self.summaries.first().map_or(0, |s| s.start_ns),
            last_ns: self.summaries.iter().map(|s| s.end_ns).max().unwrap_or(0),
        }
    }
}

/// A catalog of `levels` (finest first).
fn catalog(source: String, levels: Vec<LevelInfo>, problems: Vec<String>) -> Catalog {
    Catalog {
        source,
        probes: Vec::new(),
        first_ns: levels.iter().map(|l| l.first_ns).min().unwrap_or(0),
        last_ns: levels.iter().map(|l| l.last_ns).max().unwrap_or(0),
        levels,
        problems,
    }
}

/// Files whose names start with a dot are being written (the summary
/// writer writes `.NAME.tmp` and renames it) or are not ours.
fn is_candidate(p: &Path) -> bool {
    let Some(name) = p.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    !name.starts_with('.') && !name.ends_with('~') && !name.ends_with(".json")
}

impl DirSource {
    /// A source over `root`, which must be a directory.
    pub fn open(root: &Path) -> Result<DirSource, SourceError> {
        if !root.is_dir() {
            return Err(SourceError(format!("{}: not a directory", root.display())));
        }
        let s = DirSource {
            root: root.to_path_buf(),
            state: Mutex::new(State::default()),
            rescan: Duration::from_millis(500),
        };
        s.index()?;
        Ok(s)
    }

    /// The index, scanning the directory again if the last scan is old.
    fn index(&self) -> Result<Arc<Index>, SourceError> {
        let mut st = self
            .state
            .lock()
            .map_err(|_| SourceError("the directory index is unusable".into()))?;
        if let Some(t) = st.scanned {
            if t.elapsed() < self.rescan {
                return Ok(st.index.clone());
            }
        }
        let mut groups: Vec<(String, Vec<PathBuf>)> = Vec::new();
        let mut top = Vec::new();
        let entries = fs::read_dir(&self.root)
            .map_err(|e| SourceError(format!("{}: {e}", self.root.display())))?;
        for e in entries.flatten() {
            let p = e.path();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                let Some(name) = p.file_name().and_then(|n| n.to_str()) else {
                    continue;
                };
                if name.starts_with('.') {
                    continue;
                }
                let mut files: Vec<PathBuf> = match fs::read_dir(&p) {
                    Ok(rd) => rd
                        .flatten()
                        .filter(|f| f.file_type().is_ok_and(|t| t.is_file()))
                        .map(|f| f.path())
                        .filter(|f| is_candidate(f))
                        .collect(),
                    Err(_) => continue,
                };
                files.sort();
                groups.push((name.to_string(), files));
            } else if ft.is_file() && is_candidate(&p) {
                top.push(p);
            }
        }
        top.sort();
        if !top.is_empty() {
            groups.push((".".to_string(), top));
        }
        let mut seen = HashMap::new();
        let mut problems = Vec::new();
        let warned: std::collections::HashSet<String> = st.index.problems.iter().cloned().collect();
        let mut levels = Vec::new();
        for (name, files) in groups {
            let mut all: Vec<(Arc<Summary>, PathBuf)> = Vec::new();
            for f in files {
                let Ok(meta) = fs::metadata(&f) else { continue };
                let stamp = (
                    meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                    meta.len(),
                );
                let cached = match st.files.remove(&f) {
                    Some(c) if c.stamp == stamp => c,
                    _ => {
                        let c = Cached {
                            stamp,
                            parsed: read_file(&f),
                        };
                        if let Err(e) = &c.parsed {
                            // Said once per version of the file; the others are served.
                            eprintln!("kansoku web: {e} (file skipped; the others are served)");
                        }
                        c
                    }
                };
                match &cached.parsed {
                    Ok(v) => all.extend(v.iter().map(|s| (s.clone(), f.clone()))),
                    Err(e) => problems.push(e.clone()),
                }
                seen.insert(f, cached);
            }
            // Within a level, a summary overlapping an earlier one (a copy
            // of a file, say) would count its time twice: it is left out,
            // and said.
            all.sort_by(|a, b| {
                (a.0.start_ns, a.0.end_ns, &a.1).cmp(&(b.0.start_ns, b.0.end_ns, &b.1))
            });
            let mut kept: Vec<Arc<Summary>> = Vec::with_capacity(all.len());
            let mut last: Option<(u64, PathBuf)> = None;
            for (s, f) in all {
                match &last {
                    Some((end, prev)) if s.start_ns < *end => {
                        let why = format!(
                            "{}: a summary from {} overlaps one in {} (left out: each moment counts once)",
                            f.display(),
                            aguri::summary::format_time(s.start_ns),
                            prev.display()
                        );
                        if !warned.contains(&why) {
                            eprintln!("kansoku web: {why}");
                        }
                        problems.push(why);
                    }
                    _ => {
                        last = Some((s.end_ns.max(s.start_ns + 1), f));
                        kept.push(s);
                    }
                }
            }
            levels.extend(Level::of(name, kept));
        }
        levels.sort_by_key(|l| std::cmp::Reverse(l.interval_ns));
        st.files = seen;
        st.index = Arc::new(Index { levels, problems });
        st.scanned = Some(Instant::now());
        Ok(st.index.clone())
    }
}

/// A summary file's summaries, or `FILE:LINE:COLUMN: why`.
pub fn read_file(f: &Path) -> Result<Vec<Arc<Summary>>, String> {
    let bytes = fs::read(f).map_err(|e| format!("{}: {e}", f.display()))?;
    let text = std::str::from_utf8(&bytes).map_err(|e| {
        let before = &bytes[..e.valid_up_to()];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let col = before.len()
            - before
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |i| i + 1)
            + 1;
        format!("{}:{line}:{col}: not UTF-8 text", f.display())
    })?;
    let v = aguri::parse_summaries(text).map_err(|e| format!("{}:{e}", f.display()))?;
    if v.is_empty() {
        return Err(format!("{}:1:1: no aguri summary in the file", f.display()));
    }
    Ok(v.into_iter().map(Arc::new).collect())
}

impl DataSource for DirSource {
    fn catalog(&self) -> Result<Catalog, SourceError> {
        let idx = self.index()?;
        let levels = idx.levels.iter().rev().map(Level::info).collect();
        Ok(catalog(
            self.root.display().to_string(),
            levels,
            idx.problems.clone(),
        ))
    }

    fn summaries(
        &self,
        probes: &[String],
        from_ns: u64,
        to_ns: u64,
        step_ns: u64,
    ) -> Result<Vec<Arc<Summary>>, SourceError> {
        one_probe(probes)?;
        let idx = self.index()?;
        Ok(pick(&idx.levels, from_ns, to_ns, step_ns))
    }
}

/// A source of one probe's summaries is asked for no probe in particular.
fn one_probe(probes: &[String]) -> Result<(), SourceError> {
    match probes {
        [] => Ok(()),
        _ => Err(SourceError(
            "this source holds one probe's summaries: there is no probe to choose".into(),
        )),
    }
}

/// Summaries held in memory, one level: for tests, and for a program that
/// makes its summaries itself.
pub struct MemorySource {
    level: Vec<Level>,
}

impl MemorySource {
    pub fn new(summaries: Vec<Summary>) -> MemorySource {
        let all = summaries.into_iter().map(Arc::new).collect();
        MemorySource {
            level: Level::of(".".into(), all).into_iter().collect(),
        }
    }
}

impl DataSource for MemorySource {
    fn catalog(&self) -> Result<Catalog, SourceError> {
        let levels = self.level.iter().map(Level::info).collect();
        Ok(catalog("memory".into(), levels, Vec::new()))
    }

    fn summaries(
        &self,
        probes: &[String],
        from_ns: u64,
        to_ns: u64,
        step_ns: u64,
    ) -> Result<Vec<Arc<Summary>>, SourceError> {
        one_probe(probes)?;
        Ok(pick(&self.level, from_ns, to_ns, step_ns))
    }
}

/// The summaries starting in `[from, to)`: the coarsest level no coarser
/// than `step` first, then finer ones where it has nothing.
fn pick(levels: &[Level], from: u64, to: u64, step: u64) -> Vec<Arc<Summary>> {
    let usable = levels
        .iter()
        .position(|l| l.interval_ns <= step)
        .unwrap_or(levels.len().saturating_sub(1));
    // Time already covered, as sorted disjoint [start, end) spans.
    let mut covered: Vec<(u64, u64)> = Vec::new();
    let mut out = Vec::new();
    for level in levels.iter().skip(usable) {
        let lo = level.summaries.partition_point(|s| s.start_ns < from);
        let hi = level.summaries.partition_point(|s| s.start_ns < to);
        let mut taken = Vec::new();
        for s in &level.summaries[lo..hi] {
            let overlaps = {
                let i = covered.partition_point(|c| c.1 <= s.start_ns);
                i < covered.len() && covered[i].0 < s.end_ns.max(s.start_ns + 1)
            };
            if !overlaps {
                taken.push((s.start_ns, s.end_ns.max(s.start_ns + 1)));
                out.push(s.clone());
            }
        }
        covered.extend(taken);
        covered.sort_unstable();
        // Merge touching spans so the search above stays right.
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(covered.len());
        for c in covered {
            match merged.last_mut() {
                Some(m) if c.0 <= m.1 => m.1 = m.1.max(c.1),
                _ => merged.push(c),
            }
        }
        covered = merged;
    }
    out.sort_by_key(|s| (s.start_ns, s.end_ns));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use aguri::Metric;

    fn level(name: &str, interval: u64, starts: &[u64]) -> Level {
        Level {
            name: name.into(),
            interval_ns: interval,
            summaries: starts
                .iter()
                .map(|&s| Arc::new(Summary::empty(s, s + interval, Metric::Either, 1.0)))
                .collect(),
        }
    }

    #[test]
    fn coarse_levels_first_and_finer_ones_fill_what_they_lack() {
        // Hours 0 and 1 rolled up; hour 2 only as 5-minute summaries.
        let levels = vec![
            level("hourly", 3600, &[0, 3600]),
            level("5min", 300, &(0..36).map(|i| i * 300).collect::<Vec<_>>()),
        ];
        let got = pick(&levels, 0, 3 * 3600, 3600);
        let starts: Vec<u64> = got.iter().map(|s| s.start_ns).collect();
        let mut want = vec![0, 3600];
        want.extend((24..36).map(|i| i * 300));
        assert_eq!(starts, want);
        // A step finer than an hour takes the 5-minute summaries only.
        let got = pick(&levels, 0, 3 * 3600, 300);
        assert_eq!(got.len(), 36);
        // A range within the second hour.
        let got = pick(&levels, 3600, 7200, 86_400);
        assert_eq!(got.len(), 1);
    }

    #[test]
    fn a_copy_of_a_file_is_not_counted_twice() {
        let dir = tempfile::tempdir().unwrap();
        let s = Summary::empty(0, 300_000_000_000, Metric::Either, 1.0);
        let t = Summary::empty(300_000_000_000, 600_000_000_000, Metric::Either, 1.0);
        fs::write(dir.path().join("a.agr"), s.to_string()).unwrap();
        fs::write(dir.path().join("a.agr.bak"), s.to_string()).unwrap();
        fs::write(dir.path().join("b.agr"), t.to_string()).unwrap();
        let src = DirSource::open(dir.path()).unwrap();
        let cat = src.catalog().unwrap();
        assert_eq!(cat.levels[0].summaries, 2);
        assert_eq!(cat.problems.len(), 1, "{:?}", cat.problems);
        assert!(cat.problems[0].contains("a.agr.bak") && cat.problems[0].contains("overlaps"));
        assert_eq!(
            src.summaries(&[], 0, u64::MAX, 300_000_000_000)
                .unwrap()
                .len(),
            2
        );
    }

    #[test]
    fn a_bad_file_is_skipped_and_named_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let s = Summary::empty(0, 300_000_000_000, Metric::Either, 1.0);
        fs::write(dir.path().join("a.agr"), s.to_string()).unwrap();
        fs::write(
            dir.path().join("b.agr"),
            "%!AGURI-1.0\n%%StartTime: nonsense\n",
        )
        .unwrap();
        fs::write(dir.path().join(".c.agr.tmp"), "half a file").unwrap();
        let src = DirSource::open(dir.path()).unwrap();
        let cat = src.catalog().unwrap();
        assert_eq!(cat.levels.len(), 1);
        assert_eq!(cat.levels[0].summaries, 1);
        assert_eq!(cat.problems.len(), 1, "{:?}", cat.problems);
        assert!(cat.problems[0].contains("b.agr:2:"), "{}", cat.problems[0]);
    }
}
