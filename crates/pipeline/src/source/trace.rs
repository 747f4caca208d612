//! A trace file (or standard input) as a source of records, optionally cut
//! to a time window, decompressing only the blocks the seek index says
//! overlap it.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use trace::read::TraceReader;
use trace::window::{open_window_with, WindowStats};
use trace::Record;

use crate::error::{display_path, Error, Result};
use crate::report::{Report, Truncated};
use crate::run::Source;

/// Packets at or after `since` and before `until`, nanoseconds since the epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Window {
    pub since: Option<u64>,
    pub until: Option<u64>,
}

impl Window {
    pub fn is_all(&self) -> bool {
        self.since.is_none() && self.until.is_none()
    }

    fn contains(&self, ts: u64) -> bool {
        self.since.is_none_or(|s| ts >= s) && self.until.is_none_or(|u| ts < u)
    }
}

/// Whether reads check each chunk of an indexed trace against its checksum
/// (the default; `--no-verify` turns it off for the process).
static VERIFY: AtomicBool = AtomicBool::new(true);

/// Sets whether trace reads verify chunk checksums from now on.
pub fn set_verify(on: bool) {
    VERIFY.store(on, Ordering::Relaxed);
}

/// Records of a trace: sections, interfaces, other blocks, and the packets
/// inside the window.
pub struct TraceSource {
    reader: TraceReader,
    name: String,
    window: Window,
    window_stats: Option<WindowStats>,
    size: Option<u64>,
    packets: u64,
    bytes: u64,
}

impl TraceSource {
    /// Opens `path` ("-" is standard input): every record.
    pub fn open(path: &Path) -> Result<TraceSource> {
        TraceSource::open_window(path, Window::default())
    }

    /// Opens `path` for the packets inside `window`. With a window and a
    /// seekable file, only the blocks the index says overlap the window
    /// are decompressed.
    pub fn open_window(path: &Path, window: Window) -> Result<TraceSource> {
        if let (Some(s), Some(u)) = (window.since, window.until) {
            if u <= s {
                return Err(Error::usage("--until must be later than --since"));
            }
        }
        let stdin = path.as_os_str() == "-";
        let verify = VERIFY.load(Ordering::Relaxed);
        // A file is read through its index when it has one: only the
        // chunks a window needs, each checked against its checksum.
        let (reader, window_stats) = if !stdin && (verify || !window.is_all()) {
            let (r, s) = open_window_with(path, window.since, window.until, verify)
                .map_err(|e| Error::file(path, e))?;
            (r, Some(s))
        } else {
            (
                TraceReader::open(path).map_err(|e| Error::file(path, e))?,
                None,
            )
        };
        Ok(TraceSource {
            reader,
            name: display_path(path),
            window,
            window_stats,
            size: file_size(path),
            packets: 0,
            bytes: 0,
        })
    }

    /// Every record of an open reader, named `name` in messages.
    pub fn from_reader(reader: TraceReader, name: &str) -> TraceSource {
        TraceSource {
            reader,
            name: name.to_string(),
            window: Window::default(),
            window_stats: None,
            size: None,
            packets: 0,
            bytes: 0,
        }
    }

    /// The reader, for what it knows of the file (format, codec, offsets).
    pub fn reader(&self) -> &TraceReader {
        &self.reader
    }

    /// How the file was read through its index (for a file, not a stream).
    pub fn window_stats(&self) -> Option<&WindowStats> {
        self.window_stats.as_ref()
    }

    /// Whether a time window was asked for.
    pub fn windowed(&self) -> bool {
        !self.window.is_all()
    }

    /// The file's size in bytes (None for a stream).
    pub fn size(&self) -> Option<u64> {
        self.size
    }
}

impl Source for TraceSource {
    type Item<'a> = Record<'a>;

    fn name(&self) -> &str {
        &self.name
    }

    #[inline(always)]
    fn next(&mut self) -> Result<Option<Record<'_>>> {
        let window = self.window;
        let rec = if window.is_all() {
            self.reader.next_record()
        } else {
            self.reader.next_record_where(|r| match r {
                Record::Packet(p) => window.contains(p.ts_nanos()),
                _ => true,
            })
        }
        .map_err(|e| Error::input(format!("{}: {e}", self.name)))?;
        if let Some(Record::Packet(p)) = &rec {
            self.packets += 1;
            self.bytes += u64::from(p.orig_len);
        }
        Ok(rec)
    }

    fn position(&self) -> u64 {
        self.reader.compressed_offset()
    }

    fn close(&mut self, report: &mut Report) {
        report.packets += self.packets;
        report.bytes += self.bytes;
        if let Some(t) = self.reader.truncation() {
            report.truncation = Some(Truncated::of_trace(&self.name, t));
        }
        for c in self.reader.corruptions() {
            report.problems.push(format!("{}: {c}", self.name));
        }
        if let Some(why) = self
            .window_stats
            .as_ref()
            .and_then(|w| w.index_problem.as_ref())
        {
            report.warnings.push(format!(
                "{}: warning: index ignored ({why}); read the whole trace{}",
                self.name,
                if VERIFY.load(Ordering::Relaxed) {
                    ", its chunks unchecked"
                } else {
                    ""
                }
            ));
        }
    }
}

/// The size of the regular file behind `path`, for a progress bar.
pub fn file_size(path: &Path) -> Option<u64> {
    if path.as_os_str() == "-" {
        return None;
    }
    std::fs::metadata(path)
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.len())
}
