//! Header traces for the filter: ClassBench's text format (`SRC DST SPORT
//! DPORT PROTO ... FIRSTMATCH`, plain or zstd-compressed), or the IP packets
//! of a pcap/pcapng trace, as batches of [`PacketKey`]s.
//!
//! A text trace is read line by line; its last line without a newline is a
//! cut file (reported with its offset, the line left out), and so is a zstd
//! stream that ends inside a frame.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use filter::PacketKey;
use trace::read::TraceReader;
use trace::Record;

use crate::error::{display_path, Error, Result};
use crate::report::{Report, Truncated};
use crate::run::Source;
use crate::source::trace::TraceSource;

/// Keys handed over per step: enough to amortize the engine's batch walk.
pub const BATCH: usize = 4096;

/// zstd's frame magic.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// One step of a header trace.
#[derive(Clone, Copy, Debug)]
pub struct Headers<'a> {
    pub keys: &'a [PacketKey],
    /// For ClassBench traces: the index of the first rule each header
    /// matches (its FIRSTMATCH column), `None` where it names no rule of
    /// the set. Empty for packet traces.
    pub expected: &'a [Option<u32>],
}

/// Bytes read from the file, under any decoder.
struct Counted<R> {
    inner: R,
    bytes: Arc<AtomicU64>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bytes.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

enum Input {
    Text {
        lines: Box<dyn BufRead + Send>,
        /// Bytes of text read (the decompressed offset).
        offset: u64,
        line_no: u64,
        /// Bytes of the file read (compressed, when it is).
        file_bytes: Arc<AtomicU64>,
        compressed: bool,
        line: String,
    },
    Packets(Box<TraceSource>),
}

impl Input {
    fn text(lines: Box<dyn BufRead + Send>, file_bytes: Arc<AtomicU64>, compressed: bool) -> Input {
        Input::Text {
            lines,
            offset: 0,
            line_no: 0,
            file_bytes,
            compressed,
            line: String::new(),
        }
    }
}

/// Whether a file's first bytes look like ClassBench text (a digit, then
/// printable ASCII) rather than a binary trace, whose magic numbers are not
/// ASCII. A text trace with a bad line is then an error naming the line.
fn is_text(head: &[u8]) -> bool {
    head.first().is_some_and(u8::is_ascii_digit)
        && head
            .iter()
            .take(64)
            .all(|b| b.is_ascii_graphic() || b.is_ascii_whitespace())
}

/// A header trace as a [`Source`] of [`Headers`] batches.
pub struct HeaderSource {
    input: Input,
    name: String,
    n_rules: usize,
    limit: Option<u64>,
    keys: Vec<PacketKey>,
    expected: Vec<Option<u32>>,
    headers: u64,
    truncation: Option<Truncated>,
}

impl HeaderSource {
    /// Opens `path` ("-" is standard input): ClassBench text (plain or
    /// zstd) or a packet trace, told apart by their first bytes.
    /// FIRSTMATCH values are checked against `n_rules`; at most `limit`
    /// headers are read.
    pub fn open(path: &Path, n_rules: usize, limit: Option<u64>) -> Result<HeaderSource> {
        let raw: Box<dyn Read + Send> = if path.as_os_str() == "-" {
            Box::new(io::stdin())
        } else {
            Box::new(File::open(path).map_err(|e| Error::file(path, e))?)
        };
        HeaderSource::from_read(raw, &display_path(path), n_rules, limit)
    }

    /// A header trace read from `raw`, named `name` in messages.
    pub fn from_read(
        raw: Box<dyn Read + Send>,
        name: &str,
        n_rules: usize,
        limit: Option<u64>,
    ) -> Result<HeaderSource> {
        let fail = |e: io::Error| Error::input(format!("{name}: {e}"));
        let bytes = Arc::new(AtomicU64::new(0));
        let mut raw = BufReader::new(Counted {
            inner: raw,
            bytes: Arc::clone(&bytes),
        });
        let head = raw.fill_buf().map_err(fail)?;
        let compressed = head.starts_with(&ZSTD_MAGIC);
        let input = if compressed {
            let z = zstd::Decoder::with_buffer(raw).map_err(fail)?;
            Input::text(Box::new(BufReader::new(z)), bytes, true)
        } else if is_text(head) {
            Input::text(Box::new(raw), bytes, false)
        } else {
            let reader = TraceReader::from_read(Box::new(raw))
                .map_err(|e| Error::input(format!("{name}: {e}")))?;
            Input::Packets(Box::new(TraceSource::from_reader(reader, name)))
        };
        Ok(HeaderSource {
            input,
            name: name.to_string(),
            n_rules,
            limit,
            keys: Vec::with_capacity(BATCH),
            expected: Vec::with_capacity(BATCH),
            headers: 0,
            truncation: None,
        })
    }

    /// Whether the trace carries expected results (ClassBench text).
    pub fn has_expected(&self) -> bool {
        matches!(self.input, Input::Text { .. })
    }

    fn room(&self) -> usize {
        let left = self
            .limit
            .map_or(u64::MAX, |l| l.saturating_sub(self.headers));
        BATCH.min(usize::try_from(left).unwrap_or(BATCH))
    }

    /// Fills the batch from a text trace.
    fn fill_text(&mut self, want: usize) -> Result<()> {
        let Input::Text {
            lines,
            offset,
            line_no,
            file_bytes,
            compressed,
            line,
        } = &mut self.input
        else {
            return Ok(());
        };
        while self.keys.len() < want && self.truncation.is_none() {
            line.clear();
            let n = match lines.read_line(line) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof && *compressed => {
                    self.truncation = Some(Truncated {
                        name: self.name.clone(),
                        offset: file_bytes.load(Ordering::Relaxed),
                        message: format!(
                            "offset {}: zstd stream cut short after line {line_no} ({e}); read up to the last complete line",
                            file_bytes.load(Ordering::Relaxed)
                        ),
                    });
                    break;
                }
                Err(e) => return Err(Error::input(format!("{}:{}: {e}", self.name, *line_no + 1))),
            };
            let start = *offset;
            *offset += n as u64;
            *line_no += 1;
            if !line.ends_with('\n') {
                self.truncation = Some(Truncated {
                    name: self.name.clone(),
                    offset: start,
                    message: format!(
                        "offset {start}: file cut short in line {line_no} (no end of line); read up to the last complete line"
                    ),
                });
                break;
            }
            if line.trim().is_empty() {
                continue;
            }
            let (key, m) = filter::parse::parse_trace_line(line)
                .map_err(|e| Error::input(format!("{}:{line_no}: {e}", self.name)))?;
            self.keys.push(key);
            self.expected.push(
                m.and_then(|m| u32::try_from(m).ok())
                    .filter(|&m| (m as usize) < self.n_rules),
            );
        }
        Ok(())
    }

    /// Fills the batch with the keys of a packet trace's IP packets.
    fn fill_packets(&mut self, want: usize) -> Result<()> {
        let Input::Packets(src) = &mut self.input else {
            return Ok(());
        };
        while self.keys.len() < want {
            match src.next()? {
                Some(Record::Packet(p)) => {
                    let s = wire::slice(p.link_type, p.data);
                    if let Some(k) = PacketKey::from_slice(&s) {
                        self.keys.push(k);
                    }
                }
                Some(_) => {}
                None => break,
            }
        }
        Ok(())
    }
}

impl Source for HeaderSource {
    type Item<'a> = Headers<'a>;

    fn name(&self) -> &str {
        &self.name
    }

    fn next(&mut self) -> Result<Option<Headers<'_>>> {
        self.keys.clear();
        self.expected.clear();
        let want = self.room();
        if want == 0 {
            return Ok(None);
        }
        match self.input {
            Input::Text { .. } => self.fill_text(want)?,
            Input::Packets(_) => self.fill_packets(want)?,
        }
        if self.keys.is_empty() {
            return Ok(None);
        }
        self.headers += self.keys.len() as u64;
        Ok(Some(Headers {
            keys: &self.keys,
            expected: &self.expected,
        }))
    }

    fn position(&self) -> u64 {
        match &self.input {
            Input::Text { file_bytes, .. } => file_bytes.load(Ordering::Relaxed),
            Input::Packets(s) => s.position(),
        }
    }

    fn close(&mut self, report: &mut Report) {
        report.packets += self.headers;
        match &mut self.input {
            Input::Packets(s) => {
                let mut r = Report::default();
                s.close(&mut r);
                report.truncation = r.truncation;
            }
            Input::Text { .. } => report.truncation = self.truncation.take(),
        }
    }
}

/// The FIRSTMATCH of every header of a ClassBench trace (None for a packet trace).
pub type Expected = Option<Vec<Option<u32>>>;

/// Every header of `path` at once (up to `limit`), for benchmarks that
/// time the classification alone. A cut file is an error here.
pub fn read_all(
    path: &Path,
    n_rules: usize,
    limit: Option<u64>,
) -> Result<(Vec<PacketKey>, Expected)> {
    let mut src = HeaderSource::open(path, n_rules, limit)?;
    let mut keys = Vec::new();
    let mut expected = Vec::new();
    while let Some(h) = src.next()? {
        keys.extend_from_slice(h.keys);
        expected.extend_from_slice(h.expected);
    }
    let has_expected = src.has_expected();
    let mut r = Report::default();
    src.close(&mut r);
    if let Some(t) = r.truncation {
        return Err(Error::input(t.to_string()));
    }
    Ok((keys, has_expected.then_some(expected)))
}
