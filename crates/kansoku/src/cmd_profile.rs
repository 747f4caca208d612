//! `kansoku profile`: aguri summaries of a trace (paper 004, chapter 2), and
//! re-aggregation of summaries into longer periods.
//!
//! The profiler itself is the `aguri` crate's stage; this file feeds it the
//! trace's packets and sends its summaries to standard output, one file, a
//! directory (one file per interval), or an archive that keeps 5-minute
//! summaries and rolls them up into hourly and daily ones as time passes.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use aguri::summary::file_stamp;
use aguri::{parse_summaries, Merger, Metric, ProfilerConfig, Summary};
use trace::Record;

use crate::cli::ProfileArgs;
use crate::error::{display_path, CliError, CliResult, EXIT_PROBLEMS};
use crate::progress::Progress;
use crate::{input, signals};

const NS: u64 = 1_000_000_000;
const HOUR_NS: u64 = 3600 * NS;
const DAY_NS: u64 = 86_400 * NS;

/// Where summaries go.
enum Out {
    /// `Stdout`, not its lock, so that a capture thread can own the writer.
    Stdout(io::Stdout),
    /// All summaries one after another, as aguri writes them.
    File(BufWriter<File>, PathBuf),
    /// One file per summary, named by its start time.
    Dir(PathBuf),
}

/// Writes summaries as `kansoku profile -w` does (also used by
/// `kansoku capture --profile`).
pub(crate) struct Writer {
    out: Out,
    json: bool,
}

impl Writer {
    pub(crate) fn new(target: Option<&Path>, json: bool) -> CliResult<Writer> {
        let out = match target {
            None => Out::Stdout(io::stdout()),
            Some(p) if p.as_os_str() == "-" => Out::Stdout(io::stdout()),
            Some(p) if p.as_os_str().to_string_lossy().ends_with('/') || p.is_dir() => {
                fs::create_dir_all(p).map_err(|e| CliError::file(p, e))?;
                Out::Dir(p.to_path_buf())
            }
            Some(p) => Out::File(
                BufWriter::new(File::create(p).map_err(|e| CliError::file(p, e))?),
                p.to_path_buf(),
            ),
        };
        Ok(Writer { out, json })
    }

    fn text(&self, s: &Summary) -> CliResult<String> {
        if self.json {
            let mut t = serde_json::to_string(&s.json()).map_err(io::Error::from)?;
            t.push('\n');
            Ok(t)
        } else {
            Ok(s.to_string())
        }
    }

    pub(crate) fn write(&mut self, s: &Summary) -> CliResult<()> {
        let text = self.text(s)?;
        match &mut self.out {
            Out::Stdout(o) => o.write_all(text.as_bytes())?,
            Out::File(f, p) => f
                .write_all(text.as_bytes())
                .map_err(|e| CliError::file(p, e))?,
            Out::Dir(d) => {
                let ext = if self.json { "json" } else { "agr" };
                let path = d.join(format!("{}.{ext}", file_stamp(s.start_ns)));
                fs::write(&path, text).map_err(|e| CliError::file(&path, e))?;
            }
        }
        Ok(())
    }

    pub(crate) fn finish(self) -> CliResult<()> {
        match self.out {
            Out::Stdout(mut o) => o.flush()?,
            Out::File(mut f, p) => f.flush().map_err(|e| CliError::file(&p, e))?,
            Out::Dir(_) => {}
        }
        Ok(())
    }
}

/// The 5-minute, hourly and daily directories of an archive.
struct Archive {
    base: Writer,
    hourly: Writer,
    daily: Writer,
    hour: Merger,
    day: Merger,
}

impl Archive {
    fn new(dir: &Path, interval_s: u64, a: &ProfileArgs, metric: Metric) -> CliResult<Archive> {
        let name = if interval_s == 300 {
            "5min".to_string()
        } else {
            format!("{interval_s}s")
        };
        let sub = |n: &str| Writer::new(Some(&dir.join(n).join("")), a.json);
        Ok(Archive {
            base: sub(&name)?,
            hourly: sub("hourly")?,
            daily: sub("daily")?,
            hour: Merger::new(HOUR_NS, a.budget, metric, a.threshold),
            day: Merger::new(DAY_NS, a.budget, metric, a.threshold),
        })
    }

    fn add(&mut self, s: &Summary) -> CliResult<()> {
        self.base.write(s)?;
        if let Some(h) = self
            .hour
            .add(s)
            .map_err(|e| CliError::input(e.to_string()))?
        {
            self.hour_done(&h)?;
        }
        Ok(())
    }

    fn hour_done(&mut self, h: &Summary) -> CliResult<()> {
        self.hourly.write(h)?;
        if let Some(d) = self
            .day
            .add(h)
            .map_err(|e| CliError::input(e.to_string()))?
        {
            self.daily.write(&d)?;
        }
        Ok(())
    }

    fn finish(mut self) -> CliResult<()> {
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

enum Sink {
    Plain(Writer),
    Archive(Box<Archive>),
}

impl Sink {
    fn add(&mut self, s: &Summary) -> CliResult<()> {
        match self {
            Sink::Plain(w) => w.write(s),
            Sink::Archive(a) => a.add(s),
        }
    }

    fn finish(self) -> CliResult<()> {
        match self {
            Sink::Plain(w) => w.finish(),
            Sink::Archive(a) => a.finish(),
        }
    }
}

pub fn run(args: &ProfileArgs) -> CliResult<i32> {
    let metric = if args.packets {
        Metric::Packets
    } else {
        Metric::Bytes
    };
    let interval_s = match (args.interval, &args.archive) {
        (Some(0), _) => return Err(CliError::input("-i must be at least 1 second")),
        (Some(i), _) => i,
        (None, Some(_)) => 300,
        (None, None) => 0,
    };
    let interval_ns = interval_s
        .checked_mul(NS)
        .ok_or_else(|| CliError::input(format!("-i {interval_s} is too long")))?;
    let cfg = ProfilerConfig {
        interval_ns,
        budget: args.budget,
        threshold: args.threshold,
        metric,
        flow_slots: args.flow_slots,
    };
    cfg.validate().map_err(|e| CliError::input(e.to_string()))?;
    let mut sink = match &args.archive {
        Some(dir) => Sink::Archive(Box::new(Archive::new(dir, interval_s, args, metric)?)),
        None => Sink::Plain(Writer::new(args.write.as_deref(), args.json)?),
    };
    if !args.merge.is_empty() {
        let mut summaries = read_summaries(&args.merge)?;
        let merged = aguri::merge_all(
            &mut summaries,
            interval_ns,
            args.budget,
            metric,
            args.threshold,
        )
        .map_err(|e| CliError::input(e.to_string()))?;
        for s in &merged {
            sink.add(s)?;
        }
        sink.finish()?;
        return Ok(0);
    }
    let Some(path) = args.read.as_deref() else {
        return Err(CliError::input(
            "give a trace with -r or summaries with --merge",
        ));
    };
    profile_trace(path, cfg, sink)
}

fn profile_trace(path: &Path, cfg: ProfilerConfig, mut sink: Sink) -> CliResult<i32> {
    let name = display_path(path);
    let mut profiler = cfg.build().map_err(|e| CliError::input(e.to_string()))?;
    let (mut reader, _) = input::open(path, None, None)?;
    let progress = Progress::new(input::file_size(path), true);
    let mut packets = 0u64;
    let mut read_error = None;
    let mut interrupted = false;
    loop {
        if signals::stop_requested() {
            interrupted = true;
            break;
        }
        let position = reader.compressed_offset();
        let rec = match reader.next_record() {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                read_error = Some(e);
                break;
            }
        };
        if let Record::Packet(p) = rec {
            packets += 1;
            progress.tick(packets, position);
            if let Some(s) = profiler.add_frame(p.link_type, p.ts_nanos(), p.orig_len, p.data) {
                sink.add(&s)?;
            }
        }
    }
    progress.finish();
    // What was read is summarized and written before any error is reported.
    if let Some(s) = profiler.finish() {
        sink.add(&s)?;
    }
    sink.finish()?;
    if let Some(e) = read_error {
        return Err(CliError::input(format!("{name}: {e}")));
    }
    let mut code = 0;
    if let Some(t) = reader.truncation() {
        eprintln!("kansoku: {name}: warning: {t}");
        code = EXIT_PROBLEMS;
    }
    if interrupted {
        eprintln!("kansoku: {name}: interrupted; the summaries cover the part read");
        code = EXIT_PROBLEMS;
    }
    Ok(code)
}

/// The summary files named, directories expanded to their files in name order.
pub fn summary_files(inputs: &[PathBuf]) -> CliResult<Vec<PathBuf>> {
    let mut files = Vec::new();
    for p in inputs {
        if p.is_dir() {
            let mut v: Vec<PathBuf> = fs::read_dir(p)
                .map_err(|e| CliError::file(p, e))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.is_file())
                .collect();
            v.sort();
            files.extend(v);
        } else {
            files.push(p.clone());
        }
    }
    Ok(files)
}

/// Every summary in `inputs`; errors name FILE:LINE:COLUMN.
pub fn read_summaries(inputs: &[PathBuf]) -> CliResult<Vec<Summary>> {
    let mut all = Vec::new();
    for f in summary_files(inputs)? {
        let bytes = fs::read(&f).map_err(|e| CliError::file(&f, e))?;
        let text = String::from_utf8(bytes).map_err(|e| {
            CliError::file(
                &f,
                format!(
                    "byte {}: not UTF-8 text (expected an aguri summary)",
                    e.utf8_error().valid_up_to()
                ),
            )
        })?;
        let v = parse_summaries(&text)
            .map_err(|e| CliError::input(format!("{}:{e}", display_path(&f))))?;
        all.extend(v);
    }
    Ok(all)
}
