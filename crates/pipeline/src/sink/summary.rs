//! Where aguri summaries go: standard output, one file (all summaries one
//! after another, as aguri writes them), a directory (one file per
//! interval, named by its start), or an archive that keeps the summaries
//! and rolls them up into hourly and daily ones as time passes.
//! Also the reading side: summary files and directories of them.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use aguri::summary::file_stamp;
use aguri::{parse_summaries, Merger, Metric, Summary};

use crate::error::{display_path, Error, Result};

const NS: u64 = 1_000_000_000;
const HOUR_NS: u64 = 3600 * NS;
const DAY_NS: u64 = 86_400 * NS;

enum Out {
    /// `Stdout`, not its lock, so that a capture thread can own the writer.
    Stdout(io::Stdout),
    File(BufWriter<File>, PathBuf),
    Dir(PathBuf),
}

/// How summaries are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SummaryFormat {
    /// kansoku's text (`%!AGURI-1.0`): both counts, exact, the 2-D view too.
    Kansoku,
    /// One JSON object a line.
    Json,
    /// aguri2's `-v` output (the four 1-D sections with both counts).
    Aguri2,
    /// aguri3's flow records, which agurim reads (needs the 2-D view).
    Aguri3,
}

/// Writes summaries as aguri text, JSON lines, or the aguri tools' formats.
pub struct SummaryWriter {
    out: Out,
    format: SummaryFormat,
    written: u64,
}

impl SummaryWriter {
    /// `None` or `-`: standard output; a path ending in `/` or an existing
    /// directory: one file per summary in it (created if need be); else one file.
    pub fn new(target: Option<&Path>, format: SummaryFormat) -> Result<SummaryWriter> {
        let out = match target {
            None => Out::Stdout(io::stdout()),
            Some(p) if p.as_os_str() == "-" => Out::Stdout(io::stdout()),
            Some(p) if p.as_os_str().to_string_lossy().ends_with('/') || p.is_dir() => {
                fs::create_dir_all(p).map_err(|e| out_error(p, &e))?;
                Out::Dir(p.to_path_buf())
            }
            Some(p) => Out::File(
                BufWriter::new(File::create(p).map_err(|e| out_error(p, &e))?),
                p.to_path_buf(),
            ),
        };
        Ok(SummaryWriter {
            out,
            format,
            written: 0,
        })
    }

    /// A directory of one file per summary.
    pub fn dir(dir: &Path, format: SummaryFormat) -> Result<SummaryWriter> {
        // A trailing separator makes DIR a directory, as `-w DIR/`.
        SummaryWriter::new(Some(&dir.join("")), format)
    }

    fn text(&self, s: &Summary) -> Result<String> {
        match self.format {
            SummaryFormat::Json => {
                let mut t =
                    serde_json::to_string(&s.json()).map_err(|e| Error::input(e.to_string()))?;
                t.push('\n');
                Ok(t)
            }
            SummaryFormat::Kansoku => Ok(s.to_string()),
            SummaryFormat::Aguri2 => Ok(aguri::formats::write_aguri2(s)),
            SummaryFormat::Aguri3 => aguri::formats::write_aguri3(s).ok_or_else(|| {
                Error::usage("aguri3's format holds the 2-D view: profile with --2d")
            }),
        }
    }

    pub fn write(&mut self, s: &Summary) -> Result<()> {
        let text = self.text(s)?;
        match &mut self.out {
            Out::Stdout(o) => o
                .write_all(text.as_bytes())
                .map_err(|e| Error::output("standard output", &e))?,
            Out::File(f, p) => f.write_all(text.as_bytes()).map_err(|e| out_error(p, &e))?,
            Out::Dir(d) => {
                let ext = if self.format == SummaryFormat::Json {
                    "json"
                } else {
                    "agr"
                };
                // Written under a hidden name, then renamed: a reader
                // (`kansoku web`, a cron job) never sees half a summary.
                let name = format!("{}.{ext}", file_stamp(s.start_ns));
                let path = d.join(&name);
                let tmp = d.join(format!(".{name}.tmp"));
                fs::write(&tmp, text).map_err(|e| out_error(&tmp, &e))?;
                fs::rename(&tmp, &path).map_err(|e| out_error(&path, &e))?;
            }
        }
        self.written += 1;
        Ok(())
    }

    /// Summaries written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    pub fn finish(self) -> Result<()> {
        match self.out {
            Out::Stdout(mut o) => o.flush().map_err(|e| Error::output("standard output", &e)),
            Out::File(mut f, p) => f.flush().map_err(|e| out_error(&p, &e)),
            Out::Dir(_) => Ok(()),
        }
    }
}

fn out_error(p: &Path, e: &io::Error) -> Error {
    Error::output(display_path(p), e)
}

/// The base, hourly and daily directories of an archive.
pub struct Archive {
    base: SummaryWriter,
    hourly: SummaryWriter,
    daily: SummaryWriter,
    hour: Merger,
    day: Merger,
}

impl Archive {
    /// `DIR/5min` (or `DIR/{interval}s`), `DIR/hourly`, `DIR/daily`; hours
    /// and days re-aggregated with `budget` nodes, `metric` and `threshold`.
    pub fn new(
        dir: &Path,
        interval_s: u64,
        format: SummaryFormat,
        budget: usize,
        metric: Metric,
        threshold: f64,
    ) -> Result<Archive> {
        let name = if interval_s == 300 {
            "5min".to_string()
        } else {
            format!("{interval_s}s")
        };
        let sub = |n: &str| SummaryWriter::dir(&dir.join(n), format);
        Ok(Archive {
            base: sub(&name)?,
            hourly: sub("hourly")?,
            daily: sub("daily")?,
            hour: Merger::new(HOUR_NS, budget, metric, threshold),
            day: Merger::new(DAY_NS, budget, metric, threshold),
        })
    }

    fn add(&mut self, s: &Summary) -> Result<()> {
        self.base.write(s)?;
        if let Some(h) = self.hour.add(s).map_err(|e| Error::input(e.to_string()))? {
            self.hour_done(&h)?;
        }
        Ok(())
    }

    fn hour_done(&mut self, h: &Summary) -> Result<()> {
        self.hourly.write(h)?;
        if let Some(d) = self.day.add(h).map_err(|e| Error::input(e.to_string()))? {
            self.daily.write(&d)?;
        }
        Ok(())
    }

    fn finish(mut self) -> Result<()> {
        if let Some(h) = self.hour.finish() {
            self.hour_done(&h)?;
        }
        if let Some(d) = self.day.finish() {
            self.daily.write(&d)?;
        }
        self.base.finish()?;
        self.hourly.finish()?;
        self.daily.finish()
    }
}

/// Something else each summary is handed to, after the files (the fleet
/// store's spool).
pub type SummaryTee = Box<dyn FnMut(&Summary) -> Result<()> + Send>;

/// Where a profiler's summaries go.
pub enum SummarySink {
    Plain(SummaryWriter),
    Archive(Box<Archive>),
    /// A sink, and a tee each summary also goes to.
    Tee(Box<SummarySink>, SummaryTee),
}

impl SummarySink {
    pub fn add(&mut self, s: &Summary) -> Result<()> {
        match self {
            SummarySink::Plain(w) => w.write(s),
            SummarySink::Archive(a) => a.add(s),
            SummarySink::Tee(inner, tee) => {
                inner.add(s)?;
                tee(s)
            }
        }
    }

    /// Summaries written (the base ones, for an archive).
    pub fn written(&self) -> u64 {
        match self {
            SummarySink::Plain(w) => w.written(),
            SummarySink::Archive(a) => a.base.written(),
            SummarySink::Tee(inner, _) => inner.written(),
        }
    }

    pub fn finish(self) -> Result<()> {
        match self {
            SummarySink::Plain(w) => w.finish(),
            SummarySink::Archive(a) => a.finish(),
            SummarySink::Tee(inner, _) => inner.finish(),
        }
    }
}

/// Writes the store's summaries `v` as WRITE/PROBE/YYYYMMDD.HHMMSS.agr
/// (`kansoku store export`); `written` holds the files of this export so
/// far, so that two summaries starting in the same second get two files.
pub fn export_by_probe(
    write: &std::path::Path,
    v: &[store::Stored],
    written: &mut std::collections::HashSet<std::path::PathBuf>,
) -> Result<()> {
    for st in v {
        // Probe names were checked when read: never a path of their own.
        let dir = write.join(&st.probe);
        std::fs::create_dir_all(&dir).map_err(|e| Error::output(display_path(&dir), &e))?;
        // Two summaries starting in the same second get two files (a file
        // from an earlier export is replaced).
        let stamp = file_stamp(st.summary.start_ns);
        let mut f = dir.join(format!("{stamp}.agr"));
        let mut k = 1;
        while written.contains(&f) {
            f = dir.join(format!("{stamp}.{k}.agr"));
            k += 1;
        }
        std::fs::write(&f, st.summary.to_string())
            .map_err(|e| Error::output(display_path(&f), &e))?;
        written.insert(f);
    }
    Ok(())
}

/// The summary files named, directories expanded to their files in name order.
pub fn summary_files(inputs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for p in inputs {
        if p.is_dir() {
            let mut v: Vec<PathBuf> = fs::read_dir(p)
                .map_err(|e| Error::file(p, e))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.is_file())
                .collect();
            if v.is_empty() {
                return Err(Error::input(format!(
                    "{}: an empty directory, no summary files in it",
                    display_path(p)
                )));
            }
            v.sort();
            files.extend(v);
        } else {
            files.push(p.clone());
        }
    }
    Ok(files)
}

/// Every summary in `inputs`; errors name FILE:LINE:COLUMN.
pub fn read_summaries(inputs: &[PathBuf]) -> Result<Vec<Summary>> {
    let mut all = Vec::new();
    for_each_summary(inputs, |v| {
        all.extend(v);
        Ok(())
    })?;
    Ok(all)
}

/// Hands each file's summaries in `inputs` to `f`, one file at a time (so
/// that a year of files need not be held at once); errors as
/// [`read_summaries`].
pub fn for_each_summary(
    inputs: &[PathBuf],
    mut f: impl FnMut(Vec<Summary>) -> Result<()>,
) -> Result<()> {
    for file in summary_files(inputs)? {
        let text = crate::error::read_text(&file)?;
        let v = parse_summaries(&text)
            .map_err(|e| Error::input(format!("{}:{e}", display_path(&file))))?;
        if v.is_empty() {
            return Err(Error::input(format!(
                "{}: no aguri summary in the file{}",
                display_path(&file),
                if text.trim().is_empty() {
                    " (it is empty)"
                } else {
                    ""
                }
            )));
        }
        f(v)?;
    }
    Ok(())
}
