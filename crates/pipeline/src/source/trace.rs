//! A trace file (or standard input) as a source of records, optionally cut
//! to a time window, decompressing only the blocks the seek index says
//! overlap it.

use std::io::{self, Read};
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use trace::keys::KeyQuery;
use trace::read::TraceReader;
use trace::window::{open_query, WindowStats};
use trace::Record;

use crate::error::{display_path, Error, Result};
use crate::expression::{Expression, Selector};
use crate::report::Report;
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

/// Whether trace reads verify chunk checksums.
pub(crate) fn verifying() -> bool {
    VERIFY.load(Ordering::Relaxed)
}

/// Sets whether trace reads verify chunk checksums from now on.
pub fn set_verify(on: bool) {
    VERIFY.store(on, Ordering::Relaxed);
}

/// Standard input that, once idle ticks are on, returns `WouldBlock` when
/// it has been quiet for the idle time, and once per idle time while data
/// flows, so that the run can write out its partial block; the reader keeps
/// its place and goes on at the next call.
struct TickingStdin {
    stdin: io::Stdin,
    /// The idle time in nanoseconds; 0 while ticks are off.
    every: Arc<AtomicU64>,
    last_tick: Instant,
}

impl Read for TickingStdin {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let every = self.every.load(Ordering::Relaxed);
        if every == 0 {
            return self.stdin.read(buf);
        }
        let every = Duration::from_nanos(every);
        let tick = |t: &mut Instant| {
            *t = Instant::now();
            Err(io::Error::from(io::ErrorKind::WouldBlock))
        };
        let since = self.last_tick.elapsed();
        if since >= every {
            return tick(&mut self.last_tick);
        }
        let ready = capture::poll::wait_readable(&[self.stdin.as_fd()], every - since)?;
        if ready.any() {
            self.stdin.read(buf)
        } else {
            // The idle time passed with nothing to read (or a signal came:
            // the run's loop checks its stop flag either way).
            tick(&mut self.last_tick)
        }
    }
}

/// Records of a trace: sections, interfaces, other blocks, and the packets
/// inside the window.
pub struct TraceSource {
    reader: TraceReader,
    /// Standard input's idle ticks (see [`TraceSource::idle_every`]).
    ticks: Option<Arc<AtomicU64>>,
    name: String,
    window: Window,
    window_stats: Option<WindowStats>,
    size: Option<u64>,
    packets: u64,
    bytes: u64,
    /// The packets a filter expression selects, if one was given.
    selector: Option<Selector>,
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
        TraceSource::open_as(path, window, &KeyQuery::Any, VERIFY.load(Ordering::Relaxed))
    }

    /// Opens `path` for the packets inside `window` that `expression`
    /// accepts. With an index, only the chunks the window and the key
    /// index say may hold such a packet are decompressed
    /// ([`crate::query`]); the expression is then applied to every packet
    /// read, so the answer is the same as a full read's.
    pub fn open_selected(
        path: &Path,
        window: Window,
        expression: Option<Expression>,
    ) -> Result<TraceSource> {
        let query = expression
            .as_ref()
            .map_or(KeyQuery::Any, |e| crate::query::key_query(e.text()));
        let verify = VERIFY.load(Ordering::Relaxed);
        Ok(TraceSource::open_as(path, window, &query, verify)?.with_expression(expression))
    }

    /// Opens `path` for every record, its chunks checked against the
    /// index (`verify`) or not, whatever `--no-verify` said.
    pub fn open_verify(path: &Path, verify: bool) -> Result<TraceSource> {
        TraceSource::open_as(path, Window::default(), &KeyQuery::Any, verify)
    }

    fn open_as(path: &Path, window: Window, query: &KeyQuery, verify: bool) -> Result<TraceSource> {
        if let (Some(s), Some(u)) = (window.since, window.until) {
            if u <= s {
                return Err(Error::usage("--until must be later than --since"));
            }
        }
        let stdin = path.as_os_str() == "-";
        let mut ticks = None;
        // A file is read through its index when it has one: only the
        // chunks a window needs, each checked against its checksum.
        let (reader, window_stats) = if !stdin && (verify || !window.is_all() || query.narrows()) {
            let (r, s) = open_query(path, window.since, window.until, query, verify)
                .map_err(|e| Error::file(path, e))?;
            (r, Some(s))
        } else if stdin {
            let every = Arc::new(AtomicU64::new(0));
            let input = TickingStdin {
                stdin: io::stdin(),
                every: Arc::clone(&every),
                last_tick: Instant::now(),
            };
            ticks = Some(every);
            (
                TraceReader::from_read(Box::new(input)).map_err(|e| Error::file(path, e))?,
                None,
            )
        } else {
            (
                TraceReader::open(path).map_err(|e| Error::file(path, e))?,
                None,
            )
        };
        Ok(TraceSource {
            reader,
            ticks,
            name: display_path(path),
            window,
            window_stats,
            size: file_size(path),
            packets: 0,
            bytes: 0,
            selector: None,
        })
    }

    /// Every record of an open reader, named `name` in messages.
    pub fn from_reader(reader: TraceReader, name: &str) -> TraceSource {
        TraceSource {
            reader,
            ticks: None,
            name: name.to_string(),
            window: Window::default(),
            window_stats: None,
            size: None,
            packets: 0,
            bytes: 0,
            selector: None,
        }
    }

    /// Only the packets `expression` accepts (tcpdump's filter language,
    /// compiled by libpcap for each interface of the trace); `None` keeps
    /// every packet.
    pub fn with_expression(mut self, expression: Option<Expression>) -> TraceSource {
        self.selector = expression.map(Selector::new);
        self
    }

    /// The filter expression packets are selected by, if any.
    pub fn expression(&self) -> Option<&Expression> {
        self.selector.as_ref().map(Selector::expression)
    }

    /// Packets the filter expression rejected so far.
    pub fn unmatched(&self) -> u64 {
        self.selector.as_ref().map_or(0, |s| s.unmatched)
    }

    /// The reader, for what it knows of the file (format, codec, offsets).
    pub fn reader(&self) -> &TraceReader {
        &self.reader
    }

    /// How the file was read through its index (for a file, not a stream).
    pub fn window_stats(&self) -> Option<&WindowStats> {
        self.window_stats.as_ref()
    }

    /// Has the run's consumer told ([`Consumer::idle`](crate::Consumer::idle))
    /// when standard input has been quiet for `every`, and once per `every`
    /// while it flows, so that a trace written from a pipe loses at most
    /// that long of input to a kill. Only a plain (uncompressed) stream can
    /// pause so: a decoder would lose its place. `None` turns it off.
    pub fn idle_every(&self, every: Option<Duration>) {
        if let Some(t) = &self.ticks {
            let ns = match every {
                Some(d) if self.reader.codec() == trace::Codec::None => {
                    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1)
                }
                _ => 0,
            };
            t.store(ns, Ordering::Relaxed);
        }
    }

    /// Whether a time window was asked for.
    pub fn windowed(&self) -> bool {
        !self.window.is_all()
    }

    /// Passes over the records that end at or before offset `to` of the
    /// decompressed stream, uncounted: a reader that takes over from
    /// another at a record boundary (see [`super::split::SplitSource`]).
    pub(crate) fn skip_to(&mut self, to: u64) -> Result<()> {
        while self.reader.offset() < to {
            let rec = self
                .reader
                .next_record()
                .map_err(|e| Error::input(format!("{}: {e}", self.name)))?;
            if rec.is_none() {
                break;
            }
        }
        Ok(())
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
        let rec = match &mut self.selector {
            None if window.is_all() => self.reader.next_record(),
            None => self.reader.next_record_where(|r| match r {
                Record::Packet(p) => window.contains(p.ts_nanos()),
                _ => true,
            }),
            Some(selector) => {
                // Every section record ends a call, so the byte order read
                // here is the one of the interfaces described in it.
                let big_endian = self.reader.big_endian();
                self.reader.next_record_where(|r| match r {
                    Record::Packet(p) if !window.contains(p.ts_nanos()) => false,
                    r => selector.keep(r, big_endian),
                })
            }
        }
        .map_err(|e| Error::input(format!("{}: {e}", self.name)))?;
        if let Some(e) = self.selector.as_mut().and_then(Selector::take_failure) {
            return Err(e.context(&self.name));
        }
        if let Some(Record::Packet(p)) = &rec {
            self.packets += 1;
            self.bytes += u64::from(p.orig_len);
        }
        Ok(rec)
    }

    fn position(&self) -> u64 {
        self.reader.compressed_offset()
    }

    fn waiting(&self) -> bool {
        self.reader.is_waiting()
    }

    fn close(&mut self, report: &mut Report) {
        report.packets += self.packets;
        report.bytes += self.bytes;
        if let Some(t) = self.reader.truncation() {
            report.truncation = Some(crate::report::truncated(&self.name, t));
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
        if let Some(w) = self.window_stats.as_ref() {
            if let Some(why) = &w.keys_problem {
                report.warnings.push(format!(
                    "{}: warning: key index not used ({why}); {} chunks read without it",
                    self.name, w.chunks_without_keys
                ));
            }
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
