//! A directory is a trace: the files a rotation made (`capture -C`/`-G`,
//! any codec and format mixed), read one after another in time order as one
//! trace, the files a time window cannot touch left unopened by the times
//! their index records.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use trace::index::{index_path, read_index, read_index_head};
use trace::{Record, TraceReader};

use crate::error::{display_path, Error, Result};
use crate::expression::Expression;
use crate::report::Report;
use crate::run::{run, Consumer, Control};
use crate::source::trace::{TraceSource, Window};

/// A trace file of a directory and the times of its packets, as far as
/// they are known without reading it whole.
struct Member {
    path: PathBuf,
    /// First and last packet times (ns) from the index; the first packet's
    /// time alone without one.
    first_ns: u64,
    last_ns: Option<u64>,
}

/// The times the index of `path` records: the smallest first and the
/// largest last packet time of its chunks. Without a time window only the
/// order of the files is wanted, and the first chunk of packets gives it
/// (`whole` false: only [`read_index_head`]'s entries are read, not the
/// index of every chunk, which a query over a directory read twice).
fn indexed_times(path: &Path, whole: bool) -> Option<(u64, u64)> {
    let index = if whole {
        read_index(&index_path(path)).ok()?
    } else {
        read_index_head(&std::fs::File::open(index_path(path)).ok()?).ok()?
    };
    let with_packets = || index.entries.iter().filter(|e| e.packets > 0);
    Some((
        with_packets().map(|e| e.first_ts).min()?,
        with_packets().map(|e| e.last_ts).max()?,
    ))
}

/// The time of the first packet of the trace at `path`; `None` for a file
/// that is not a trace kansoku reads, or one without packets (`u64::MAX`
/// then: it sorts last).
fn first_packet_ns(path: &Path) -> Option<u64> {
    let mut reader = TraceReader::open(path).ok()?;
    loop {
        match reader.next_record() {
            Ok(Some(Record::Packet(p))) => return Some(p.ts_nanos()),
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => return Some(u64::MAX),
        }
    }
}

/// The traces of the directory `dir` in time order (of their first
/// packets; by name where two start together). Index files, hidden files
/// and subdirectories are passed over; a file that is not a trace is named
/// in `left_out`.
fn members(dir: &Path, window: Window, left_out: &mut Vec<String>) -> Result<Vec<Member>> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::file(dir, e))?;
    let mut members = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::file(dir, e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let p = entry.path();
        if name.starts_with('.') || trace::index::is_sidecar(&name) || !p.is_file() {
            continue;
        }
        let (first_ns, last_ns) = match indexed_times(&p, !window.is_all()) {
            Some((first, last)) => (first, Some(last)),
            None => match first_packet_ns(&p) {
                Some(first) => (first, None),
                None => {
                    left_out.push(format!(
                        "{}: not a trace kansoku reads, left out",
                        display_path(&p)
                    ));
                    continue;
                }
            },
        };
        members.push(Member {
            path: p,
            first_ns,
            last_ns,
        });
    }
    members.sort_by(|a, b| {
        a.first_ns
            .cmp(&b.first_ns)
            .then_with(|| a.path.cmp(&b.path))
    });
    Ok(members)
}

/// The traces `path` names: itself, or a directory's in time order; with a
/// time window, without the files whose index says all their packets fall
/// outside it (they are not opened at all).
pub fn trace_paths_in(
    path: &Path,
    window: Window,
    left_out: &mut Vec<String>,
) -> Result<Vec<PathBuf>> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    Ok(members(path, window, left_out)?
        .into_iter()
        .filter(|m| {
            window.until.is_none_or(|u| m.first_ns < u)
                && m.last_ns
                    .is_none_or(|last| window.since.is_none_or(|s| last >= s))
        })
        .map(|m| m.path)
        .collect())
}

/// Runs `consumer` over every trace `paths` holds, one after another, each
/// opened by `open`: one run as far as the consumer can tell (its sinks,
/// its intervals and its count go on from file to file), one report. A
/// stop, or a file that cannot be read on, ends the run there.
pub fn run_traces<C: Consumer<TraceSource>>(
    paths: &[PathBuf],
    mut open: impl FnMut(&Path) -> Result<TraceSource>,
    consumer: &mut C,
    ctl: Control<'_>,
) -> Result<Report> {
    let mut report = Report::default();
    for path in paths {
        let mut source = open(path)?;
        let r = run(&mut source, consumer, ctl);
        let stop = r.read_error.is_some() || r.interrupted.is_some() || r.output_error.is_some();
        report.absorb(r);
        if stop {
            break;
        }
    }
    Ok(report)
}

/// Runs `consumer` over the directory `dir` as one trace: its traces in
/// time order ([`trace_paths_in`]), each through `window` and `expression`.
/// Files that are not traces are named in the report's warnings.
pub fn run_dir<C: Consumer<TraceSource>>(
    dir: &Path,
    window: Window,
    expression: Option<&Expression>,
    consumer: &mut C,
    stop: &AtomicBool,
) -> Result<Report> {
    let mut left_out = Vec::new();
    let paths = trace_paths_in(dir, window, &mut left_out)?;
    if paths.is_empty() && window.is_all() {
        return Err(Error::input(format!(
            "{}: no traces in the directory",
            display_path(dir)
        )));
    }
    let open = |p: &Path| TraceSource::open_selected(p, window, expression.cloned());
    let mut report = run_traces(&paths, open, consumer, Control::new(stop))?;
    report.warnings.extend(left_out);
    Ok(report)
}

/// Runs `consumer` over the trace at `path`: a file, standard input, or a
/// directory read as one trace ([`run_dir`]).
pub fn run_path<C: Consumer<TraceSource>>(
    path: &Path,
    window: Window,
    expression: Option<&Expression>,
    consumer: &mut C,
    stop: &AtomicBool,
) -> Result<Report> {
    if path.is_dir() {
        return run_dir(path, window, expression, consumer, stop);
    }
    let mut source = TraceSource::open_selected(path, window, expression.cloned())?;
    Ok(run(&mut source, consumer, Control::new(stop)))
}

/// The traces of every path in `paths`, a directory's in time order
/// ([`trace_paths_in`]).
pub fn expand(paths: &[PathBuf], left_out: &mut Vec<String>) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        out.extend(trace_paths_in(p, Window::default(), left_out)?);
    }
    Ok(out)
}
