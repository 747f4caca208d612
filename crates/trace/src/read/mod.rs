//! The trace reader: any pcap or pcapng file, plain or compressed, from a
//! file or a stream, as one stream of [`Record`]s.
//!
//! # Cost model
//!
//! Bytes are read in large chunks (at least 64 KiB, usually about 1 MiB) into
//! one reusable buffer, and every record is a view into that buffer: the
//! per-packet work is a header parse and a bounds check, with no allocation
//! (pcapng options, when a packet has any, are the exception). The buffer
//! grows to hold the largest record seen, capped by the formats' length limits,
//! and its unread tail is moved to the front when the end is reached, which
//! copies less than one record each time. Decompression writes into the same
//! buffer through `Read`; the LZ4 decoder ([`lz4`]) decodes whole blocks
//! straight into it.
//!
//! # Ends of input
//!
//! A stream that ends exactly after a record is a normal end. One that ends
//! inside a record, or a compressed stream that ends early (an LZ4 frame
//! without its end mark, a cut zstd frame or gzip member), is a truncation:
//! [`TraceReader::next_record`] returns `Ok(None)` after the last complete
//! record and [`TraceReader::truncation`] says where. Corrupt compressed data
//! is an [`Error::Compression`] after the records decoded before it.

mod inputs;
pub mod lz4;

pub use inputs::is_being_read;

use std::fs::File;
use std::io::{self, BufReader, ErrorKind, Read};
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::{Corruption, Error, Result, Truncation};
use crate::format::pcap::{self, FileHeader, FileHeaderRepr, RecordHeader, RecordRepr};
use crate::format::pcapng::{self, PacketRepr, BLOCK_HEADER_LEN, MIN_BLOCK_LEN};
use crate::format::{get_u32, Codec, FileFormat};
use crate::record::{
    Interface, Packet, PacketKind, RawBlock, RawOption, Record, Section, TsResolution,
};

/// Size of one read from the source, and of the BufReader under decoders.
const CHUNK: usize = 256 << 10;
/// The reader's buffer starts at this size, and grows to [`FULL_BUF`] as
/// the input turns out to be more than a few reads: a query that reads one
/// chunk of each of 30 files zeroed 30 MiB it never used (a quarter of
/// its time, in page faults).
const INITIAL_BUF: usize = 128 << 10;
/// The size the buffer grows to while the input lasts.
const FULL_BUF: usize = 1 << 20;
/// A read is never issued into less free space than this (one LZ4 block of
/// 64 KiB, so that such blocks are decoded in place).
const MIN_READ: usize = 64 << 10;
/// The most decompressed bytes asked of a decoder at once.
const COMPRESSED_READ: usize = 128 << 10;
/// The most bytes of a plain file or stream read at once. Reads as large as
/// the buffer's free space (up to 1 MiB) sent each byte out of the L2 cache
/// (1 MiB a core here) before the packet's copy into the writer's block
/// took it: a write of 100 MB of fixed-payload frames to zstd took 15-18%
/// longer (wall time, medians of 21 interleaved runs) than with 256 KiB
/// reads. 128 KiB did as well there but made 64-byte frames to LZ4 5%
/// slower (more, shorter reads); 256 KiB left every other write as it was.
const PLAIN_READ: usize = CHUNK;

/// Bytes read from the underlying file or stream, shared with the counting
/// wrapper that sits below any decoder.
#[derive(Debug, Default)]
struct Progress {
    bytes: AtomicU64,
    /// Of those, the bytes a decoder has taken (the rest is read ahead in
    /// its buffer): where in the file it is, for messages.
    consumed: AtomicU64,
    /// The underlying source (not a decoder) returned an error, so an error
    /// surfacing from a decoder is an I/O error, not corruption.
    io_failed: AtomicBool,
}

/// What a read through the index found out about the file, shared between
/// the chunk decoder below the reader and the reader.
#[derive(Debug, Default)]
pub(crate) struct Checks {
    /// Chunks skipped as corrupt.
    pub corrupt: std::sync::Mutex<Vec<Corruption>>,
    /// The read goes to the file's end and the index says the file was not
    /// closed (it has no end entry): its end is a cut.
    pub unclosed: AtomicBool,
    /// The index describes chunks past the file's end, and the file ends
    /// where a chunk does: it was cut after it was written, at a place
    /// the stream cannot tell, whether or not the read goes that far.
    pub shorter: AtomicBool,
    /// How far into the file the chunks decoded so far reach.
    pub file_offset: AtomicU64,
}

/// The buffer under a decoder, counting what the decoder consumes.
struct Consumed<R> {
    inner: BufReader<R>,
    progress: Arc<Progress>,
}

impl<R: Read> Read for Consumed<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress
            .consumed
            .fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

impl<R: Read> io::BufRead for Consumed<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.inner.fill_buf()
    }

    fn consume(&mut self, n: usize) {
        self.progress
            .consumed
            .fetch_add(n as u64, Ordering::Relaxed);
        self.inner.consume(n);
    }
}

struct Counted<R> {
    inner: R,
    progress: Arc<Progress>,
    /// Whether `inner` is the underlying source (its errors are I/O
    /// errors), not a decoder.
    source: bool,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.inner.read(buf) {
            Ok(n) => {
                self.progress.bytes.fetch_add(n as u64, Ordering::Relaxed);
                Ok(n)
            }
            Err(e) => {
                if self.source && e.kind() != ErrorKind::Interrupted {
                    self.progress.io_failed.store(true, Ordering::Relaxed);
                }
                Err(e)
            }
        }
    }
}

/// Where the reader is in the file's structure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// pcap: the file header is next (then Section is yielded).
    PcapHeader,
    /// pcap: the interface derived from the header is next.
    PcapInterface,
    /// pcap: packet records.
    PcapRecords,
    /// pcapng: blocks.
    Blocks,
    /// The end, a truncation or an error was reached.
    Done,
}

/// Reads pcap and pcapng traces, plain or compressed, one record at a time.
///
/// ```no_run
/// # fn main() -> trace::Result<()> {
/// use trace::{read::TraceReader, Record};
/// let mut r = TraceReader::open("trace.pcap.lz4".as_ref())?;
/// let mut bytes = 0;
/// while let Some(rec) = r.next_record()? {
///     if let Record::Packet(p) = rec {
///         bytes += p.data.len();
///     }
/// }
/// if let Some(t) = r.truncation() {
///     eprintln!("warning: {t}");
/// }
/// # Ok(()) }
/// ```
pub struct TraceReader {
    src: Box<dyn Read + Send>,
    codec: Codec,
    format: FileFormat,
    progress: Arc<Progress>,
    /// Unread bytes are `buf[pos..end]`; `buf[0]` is at stream offset `base`.
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    base: u64,
    /// The source returned its end.
    eof: bool,
    /// The compressed stream ended early (what was cut), or `None`.
    cut: Option<&'static str>,
    truncation: Option<Truncation>,
    state: State,
    section: Section,
    interfaces: Vec<Interface>,
    /// Byte order of the current pcapng section, or of the pcap file.
    big_endian: bool,
    /// pcap: timestamps are nanoseconds.
    nanos: bool,
    /// The current packet's options (pcapng).
    options: Vec<RawOption>,
    /// The most bytes asked of the source at once. Decoders drop the output
    /// of a call that ends in an error, so compressed reads are kept to
    /// about one zstd block (128 KiB) to lose as little as possible before
    /// corrupt data; plain reads [`PLAIN_READ`], to stay in cache.
    max_read: usize,
    /// A read through the index: skipped chunks, and where in the file.
    checks: Option<Arc<Checks>>,
    /// The source said it has nothing for now (`WouldBlock`): the reader
    /// returns `None` without ending, and goes on at the next call.
    waiting: bool,
    /// The file being read, registered so that no writer of this process
    /// truncates it.
    reading: Option<inputs::Reading>,
}

impl std::fmt::Debug for TraceReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceReader")
            .field("codec", &self.codec)
            .field("format", &self.format)
            .field("offset", &self.offset())
            .field("truncation", &self.truncation)
            .finish_non_exhaustive()
    }
}

thread_local! {
    /// The buffers of readers dropped on this thread, for the next readers:
    /// a query over a directory opens a reader a file, and fresh memory for
    /// each cost it page faults and zeroing (bench/archive.md). Only the
    /// bytes a read filled are ever looked at, so the stale ones do not
    /// matter.
    static SPARE: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Buffers [`SPARE`] keeps at most.
const SPARE_KEPT: usize = 2;

impl Drop for TraceReader {
    fn drop(&mut self) {
        let buf = std::mem::take(&mut self.buf);
        if (INITIAL_BUF..=FULL_BUF).contains(&buf.len()) {
            let _ = SPARE.try_with(|s| {
                let mut s = s.borrow_mut();
                if s.len() < SPARE_KEPT {
                    s.push(buf);
                }
            });
        }
    }
}

impl TraceReader {
    /// Opens a trace file (`-` is standard input), detecting the compression
    /// and then the format by their magic numbers.
    pub fn open(path: &Path) -> Result<TraceReader> {
        if path.as_os_str() == "-" {
            return TraceReader::from_read(Box::new(io::stdin()));
        }
        let f =
            File::open(path).map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
        let meta = f.metadata().ok();
        let r = TraceReader::from_read(Box::new(f))?;
        Ok(match meta {
            Some(m) => r.reading(&m),
            None => r,
        })
    }

    /// Reads a trace from any stream, detecting compression and format.
    pub fn from_read(r: Box<dyn Read + Send>) -> Result<TraceReader> {
        let progress = Arc::new(Progress::default());
        let mut counted = Counted {
            inner: r,
            progress: Arc::clone(&progress),
            source: true,
        };
        let mut head = [0u8; 4];
        let mut got = 0;
        while got < head.len() {
            match counted.read(&mut head[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io("reading the start of the trace", e)),
            }
        }
        let head = &head[..got];
        let codec = Codec::detect(head);
        if codec == Codec::None {
            return TraceReader::start(Box::new(counted), Codec::None, progress, head);
        }
        let raw = Consumed {
            inner: BufReader::with_capacity(CHUNK, io::Cursor::new(head.to_vec()).chain(counted)),
            progress: Arc::clone(&progress),
        };
        let src: Box<dyn Read + Send> = match codec {
            Codec::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(raw)),
            Codec::Zstd => Box::new(
                zstd::stream::read::Decoder::with_buffer(raw)
                    .map_err(|e| Error::io("starting the zstd decoder", e))?,
            ),
            Codec::Lz4 => Box::new(lz4::Lz4Decoder::new(raw)),
            Codec::None => unreachable!("handled above"),
        };
        TraceReader::start(src, codec, progress, &[])
    }

    /// Reads plain pcap or pcapng bytes, with no compression detection.
    pub fn from_decompressed(r: Box<dyn Read + Send>) -> Result<TraceReader> {
        TraceReader::from_decoded(r, Codec::None)
    }

    /// Reads pcap or pcapng bytes already decoded from a `codec` file (a
    /// windowed read's chunks): a cut stream is a truncation and a decoder's
    /// error a compression error, as when the reader decodes the file
    /// itself.
    pub fn from_decoded(r: Box<dyn Read + Send>, codec: Codec) -> Result<TraceReader> {
        let progress = Arc::new(Progress::default());
        let counted = Counted {
            inner: r,
            progress: Arc::clone(&progress),
            source: codec == Codec::None,
        };
        TraceReader::start(Box::new(counted), codec, progress, &[])
    }

    /// Builds the reader with `head` already read from `src`, and detects the
    /// format from the first four decompressed bytes.
    fn start(
        src: Box<dyn Read + Send>,
        codec: Codec,
        progress: Arc<Progress>,
        head: &[u8],
    ) -> Result<TraceReader> {
        let mut buf = SPARE
            .try_with(|s| s.borrow_mut().pop())
            .ok()
            .flatten()
            .unwrap_or_else(|| vec![0u8; INITIAL_BUF]);
        buf[..head.len()].copy_from_slice(head);
        let mut r = TraceReader {
            src,
            codec,
            format: FileFormat::Pcapng,
            progress,
            buf,
            pos: 0,
            end: head.len(),
            base: 0,
            eof: false,
            cut: None,
            truncation: None,
            state: State::Done,
            section: Section::default(),
            interfaces: Vec::new(),
            big_endian: false,
            nanos: false,
            options: Vec::new(),
            max_read: if codec == Codec::None {
                PLAIN_READ
            } else {
                COMPRESSED_READ
            },
            checks: None,
            waiting: false,
            reading: None,
        };
        let avail = r.fill(4)?;
        if avail < 4 {
            let what = match (avail, r.cut) {
                (0, None) => "empty input: not a pcap or pcapng file".to_string(),
                (n, None) => format!("input of {n} bytes is too short for a pcap or pcapng file"),
                (n, Some(c)) => {
                    format!("{c} cut after {n} decompressed bytes, before the trace header")
                }
            };
            return Err(Error::format(0, what));
        }
        let mut magic = [0u8; 4];
        magic.copy_from_slice(&r.buf[..4]);
        if let Some((nanos, big_endian)) = pcap::detect_magic(magic) {
            r.format = FileFormat::Pcap { nanos, big_endian };
            r.big_endian = big_endian;
            r.nanos = nanos;
            r.state = State::PcapHeader;
        } else if u32::from_le_bytes(magic) == pcapng::BT_SHB {
            r.format = FileFormat::Pcapng;
            r.state = State::Blocks;
        } else {
            return Err(Error::format(
                0,
                format!(
                    "not a pcap or pcapng file: magic 0x{:08x} at offset 0",
                    u32::from_be_bytes(magic)
                ),
            ));
        }
        Ok(r)
    }

    /// The compression the input was found to have.
    pub fn codec(&self) -> Codec {
        self.codec
    }

    /// The trace format.
    pub fn format(&self) -> FileFormat {
        self.format
    }

    /// The interfaces of the current section.
    pub fn interfaces(&self) -> &[Interface] {
        &self.interfaces
    }

    /// The current section (pcap: version 2.4, no options).
    pub fn section(&self) -> &Section {
        &self.section
    }

    /// Decompressed bytes consumed so far: the offset of the next record.
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Bytes read from the underlying file or stream so far (ahead of
    /// [`TraceReader::offset`] by what is buffered), for progress bars.
    pub fn compressed_offset(&self) -> u64 {
        match &self.checks {
            Some(c) => c.file_offset.load(Ordering::Relaxed),
            None => self.progress.bytes.load(Ordering::Relaxed),
        }
    }

    /// Chunks found corrupt and skipped so far (a read through the index,
    /// which checks each chunk against its checksum there): the packets of
    /// the other chunks are still read.
    pub fn corruptions(&self) -> Vec<Corruption> {
        self.checks.as_ref().map_or_else(Vec::new, |c| {
            c.corrupt.lock().map(|v| v.clone()).unwrap_or_default()
        })
    }

    /// Registers the file `meta` describes as being read (see
    /// [`is_being_read`]): a file opened by path, or one read through its
    /// index's chunks.
    pub(crate) fn reading(mut self, meta: &std::fs::Metadata) -> TraceReader {
        self.reading = inputs::Reading::register(meta);
        self
    }

    /// Attaches what a read through the index shares with its decoder.
    pub(crate) fn with_checks(mut self, checks: Arc<Checks>) -> TraceReader {
        self.checks = Some(checks);
        self
    }

    /// Whether the section being read is big-endian (a pcap file's magic,
    /// a pcapng section's byte-order magic): what libpcap's compiler needs
    /// to know of a file, besides its link type and snap length.
    pub fn big_endian(&self) -> bool {
        self.big_endian
    }

    /// Whether the last `None` from [`TraceReader::next_record`] means the
    /// input has nothing for now rather than its end: a plain stream whose
    /// source returned `WouldBlock` (a quiet pipe, see
    /// `IdleTicks`). Reading goes on at the next call.
    pub fn is_waiting(&self) -> bool {
        self.waiting && self.state != State::Done
    }

    /// Where and how the input was cut short, once `next_record` has
    /// returned `None` because of it.
    pub fn truncation(&self) -> Option<&Truncation> {
        self.truncation.as_ref()
    }

    /// Makes at least `need` unread bytes available unless the input ends
    /// first; returns how many are available.
    fn fill(&mut self, need: usize) -> Result<usize> {
        while self.end - self.pos < need && !self.eof && !self.waiting {
            if self.buf.len() < FULL_BUF && self.buf.len() - self.end < self.max_read {
                self.buf.resize((self.buf.len() * 2).min(FULL_BUF), 0);
            }
            if self.pos > 0
                && (self.buf.len() - self.pos < need || self.buf.len() - self.end < MIN_READ)
            {
                // Move the unread tail to the front; it is less than one record.
                self.buf.copy_within(self.pos..self.end, 0);
                self.base += self.pos as u64;
                self.end -= self.pos;
                self.pos = 0;
            }
            if self.buf.len() - self.end < MIN_READ {
                // Grow with the data that arrives, doubling, never straight to
                // `need`: a short input whose length field claims a huge record
                // must not make the reader allocate that record. `need` itself
                // is bounded by the formats' record length limits.
                let len = (self.buf.len() * 2).max(self.end + MIN_READ);
                self.buf.resize(len, 0);
            }
            let end = self.end;
            let stop = self.buf.len().min(end.saturating_add(self.max_read));
            match self.src.read(&mut self.buf[end..stop]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end += n,
                Err(e) => self.read_error(e)?,
            }
        }
        Ok(self.end - self.pos)
    }

    /// Sorts a read error: a cut compressed stream ends the input (and is
    /// reported as a truncation), corrupt data is a compression error.
    fn read_error(&mut self, e: io::Error) -> Result<()> {
        if e.kind() == ErrorKind::Interrupted {
            return Ok(());
        }
        if e.kind() == ErrorKind::WouldBlock && self.codec == Codec::None {
            // A plain stream that is quiet for now: nothing is lost, the
            // record in progress stays in the buffer.
            self.waiting = true;
            return Ok(());
        }
        let io_failed = self.progress.io_failed.load(Ordering::Relaxed);
        if self.codec == Codec::None || io_failed {
            return Err(Error::io(format!("reading at offset {}", self.offset()), e));
        }
        if e.kind() == ErrorKind::UnexpectedEof {
            self.eof = true;
            self.cut = Some(match self.codec {
                Codec::Lz4 => "lz4 frame",
                Codec::Zstd => "zstd frame",
                Codec::Gzip => "gzip member",
                Codec::None => "stream",
            });
            return Ok(());
        }
        Err(Error::Compression {
            codec: self.codec.name(),
            what: format!(
                "corrupt data near file offset {} (decompressed offset {}): {e}",
                match &self.checks {
                    // Past an index's chunks, how far the tail was read.
                    Some(c) => c.file_offset.load(Ordering::Relaxed),
                    None => self.progress.consumed.load(Ordering::Relaxed),
                },
                self.offset()
            ),
        })
    }

    /// Ends reading: a clean end if nothing is left over and the stream was
    /// not cut, else a truncation of `what` at the current offset.
    fn finish(&mut self, needed: usize, available: usize, what: &'static str) {
        self.state = State::Done;
        let file_offset = (self.codec != Codec::None).then(|| self.compressed_offset());
        let flag = |f: fn(&Checks) -> &AtomicBool| {
            self.checks
                .as_ref()
                .is_some_and(|c| f(c).load(Ordering::Relaxed))
        };
        let (unclosed, shorter) = (flag(|c| &c.unclosed), flag(|c| &c.shorter));
        let (needed, available, what) = if available > 0 {
            (needed, available, what)
        } else if let Some(c) = self.cut {
            // The stream stopped at a record boundary, but the compressed
            // stream around it was cut; how much is missing is unknown.
            (0, 0, c)
        } else if shorter && self.eof {
            // The chunks the index describes past the file's end are gone,
            // wherever the window ends.
            (0, 0, Truncation::SHORTER_THAN_INDEX)
        } else if unclosed && self.eof {
            // The stream ends cleanly between two chunks, but the writer
            // never closed the file (a gzip member boundary, a plain file).
            (0, 0, Truncation::UNCLOSED)
        } else {
            return;
        };
        self.truncation = Some(Truncation {
            offset: self.offset(),
            file_offset,
            needed: needed as u64,
            available: available as u64,
            what,
        });
    }

    /// The next record, borrowing the reader's buffer; `None` at the end of
    /// the trace (see [`TraceReader::truncation`]). After an error, every
    /// later call returns `None`.
    #[inline]
    pub fn next_record(&mut self) -> Result<Option<Record<'_>>> {
        self.waiting = false;
        match self.step() {
            Ok(step) => Ok(self.view(step)),
            Err(e) => {
                self.state = State::Done;
                Err(e)
            }
        }
    }

    /// The next record for which `keep` is true; the others are passed over
    /// (a time window's reader skips the packets outside it this way).
    #[inline]
    pub fn next_record_where(
        &mut self,
        mut keep: impl FnMut(&Record<'_>) -> bool,
    ) -> Result<Option<Record<'_>>> {
        self.waiting = false;
        loop {
            let step = match self.step() {
                Ok(step) => step,
                Err(e) => {
                    self.state = State::Done;
                    return Err(e);
                }
            };
            if self.view(step.clone()).is_none_or(|r| keep(&r)) {
                return Ok(self.view(step));
            }
        }
    }

    #[inline(always)]
    fn step(&mut self) -> Result<Step> {
        match self.state {
            State::PcapRecords => self.next_pcap_packet(),
            State::Blocks => self.next_block(),
            State::PcapHeader => self.pcap_header(),
            State::PcapInterface => {
                self.state = State::PcapRecords;
                Ok(Step::Interface)
            }
            State::Done => Ok(Step::End),
        }
    }

    /// Turns a step into the record it describes.
    #[inline]
    fn view(&self, step: Step) -> Option<Record<'_>> {
        Some(match step {
            Step::End | Step::Waiting => return None,
            Step::Section => Record::Section(&self.section),
            Step::Interface => Record::Interface(self.interfaces.last()?),
            Step::Packet {
                interface,
                ts,
                orig_len,
                data,
                kind,
            } => {
                let iface = self.interfaces.get(interface as usize)?;
                Record::Packet(Packet {
                    interface,
                    link_type: iface.link_type,
                    ts,
                    tsresol: iface.tsresol,
                    orig_len,
                    data: &self.buf[data],
                    options: &self.options,
                    kind,
                })
            }
            Step::Block {
                block_type,
                body,
                little_endian,
            } => Record::Block(RawBlock {
                block_type,
                body: &self.buf[body],
                little_endian,
            }),
        })
    }

    fn pcap_header(&mut self) -> Result<Step> {
        let avail = self.fill(pcap::FILE_HEADER_LEN)?;
        if avail < pcap::FILE_HEADER_LEN {
            if self.waiting {
                return Ok(Step::Waiting);
            }
            self.finish(pcap::FILE_HEADER_LEN, avail, "pcap file header");
            return Ok(Step::End);
        }
        let h = FileHeader::new_unchecked(&self.buf[self.pos..self.pos + pcap::FILE_HEADER_LEN]);
        let repr = FileHeaderRepr::parse(&h)?;
        self.pos += pcap::FILE_HEADER_LEN;
        let tsresol = if repr.nanos {
            TsResolution::NANO
        } else {
            TsResolution::MICRO
        };
        self.section = Section {
            major: repr.major,
            minor: repr.minor,
            options: Vec::new(),
        };
        self.interfaces = vec![Interface::new(repr.link_type, repr.snaplen, tsresol)];
        self.state = State::PcapInterface;
        Ok(Step::Section)
    }

    /// The pcap hot path: one record header parse and one bounds check.
    /// Always inlined into the caller's loop, so that the step comes back
    /// in registers rather than through memory.
    #[inline(always)]
    fn next_pcap_packet(&mut self) -> Result<Step> {
        const HDR: usize = pcap::RECORD_HEADER_LEN;
        let mut avail = self.end - self.pos;
        if avail < HDR {
            avail = self.fill(HDR)?;
            if avail < HDR {
                if self.waiting {
                    return Ok(Step::Waiting);
                }
                self.finish(HDR, avail, "pcap record header");
                return Ok(Step::End);
            }
        }
        let offset = self.offset();
        let h = RecordHeader::new_unchecked(&self.buf[self.pos..self.pos + HDR]);
        let rec = RecordRepr::parse(&h, self.big_endian, offset)?;
        let total = HDR + rec.caplen as usize;
        if avail < total {
            avail = self.fill(total)?;
            if avail < total {
                if self.waiting {
                    return Ok(Step::Waiting);
                }
                self.finish(total, avail, "pcap record");
                return Ok(Step::End);
            }
        }
        let start = self.pos + HDR;
        self.pos += total;
        Ok(Step::Packet {
            interface: 0,
            ts: rec.ticks(self.nanos),
            orig_len: rec.orig_len,
            data: start..start + rec.caplen as usize,
            kind: PacketKind::Pcap,
        })
    }

    fn next_block(&mut self) -> Result<Step> {
        let mut avail = self.end - self.pos;
        if avail < MIN_BLOCK_LEN {
            avail = self.fill(MIN_BLOCK_LEN)?;
            if avail < MIN_BLOCK_LEN {
                if self.waiting {
                    return Ok(Step::Waiting);
                }
                self.finish(MIN_BLOCK_LEN, avail, "pcapng block header");
                return Ok(Step::End);
            }
        }
        let offset = self.offset();
        // The SHB's type reads the same in both byte orders; its byte-order
        // magic sets the order of the whole section (section 4.1).
        let head = &self.buf[self.pos..self.pos + MIN_BLOCK_LEN];
        if get_u32(head, 0, false) == pcapng::BT_SHB {
            self.big_endian = pcapng::section_byte_order(head).ok_or_else(|| {
                Error::format(offset + 8, "pcapng section header: bad byte-order magic")
            })?;
        }
        let be = self.big_endian;
        let block_type = get_u32(head, 0, be);
        let total = pcapng::check_total_len(get_u32(head, 4, be), offset)?;
        if avail < total {
            avail = self.fill(total)?;
            if avail < total {
                if self.waiting {
                    return Ok(Step::Waiting);
                }
                self.finish(total, avail, "pcapng block");
                return Ok(Step::End);
            }
        }
        let start = self.pos;
        let trailing = get_u32(&self.buf, start + total - 4, be);
        if trailing as usize != total {
            return Err(Error::format(
                offset + total as u64 - 4,
                format!(
                    "pcapng block trailing length {trailing} differs from its total length {total}"
                ),
            ));
        }
        self.pos += total;
        let body = start + BLOCK_HEADER_LEN..start + total - 4;
        match block_type {
            pcapng::BT_EPB | pcapng::BT_SPB | pcapng::BT_PB => {
                self.packet_block(block_type, body, offset)
            }
            pcapng::BT_SHB => {
                self.section = pcapng::parse_section(&self.buf[body], be, offset)?;
                self.interfaces.clear();
                Ok(Step::Section)
            }
            pcapng::BT_IDB => {
                let i = pcapng::parse_interface(&self.buf[body], be, offset)?;
                self.interfaces.push(i);
                Ok(Step::Interface)
            }
            _ => Ok(Step::Block {
                block_type,
                body,
                little_endian: !be,
            }),
        }
    }

    fn packet_block(&mut self, block_type: u32, body: Range<usize>, offset: u64) -> Result<Step> {
        let be = self.big_endian;
        let bytes = &self.buf[body.clone()];
        let if0_snaplen = self.interfaces.first().map_or(0, |i| i.snaplen);
        let p = PacketRepr::parse(block_type, bytes, be, offset, if0_snaplen)?;
        if p.interface as usize >= self.interfaces.len() {
            return Err(Error::format(
                offset,
                format!(
                    "pcapng packet on interface {} but the section has {} interface(s)",
                    p.interface,
                    self.interfaces.len()
                ),
            ));
        }
        self.options.clear();
        if !p.options.is_empty() {
            let opt_off = offset + (BLOCK_HEADER_LEN + p.options.start) as u64;
            pcapng::parse_options(
                &bytes[p.options.clone()],
                block_type,
                be,
                opt_off,
                &mut self.options,
            )?;
        }
        if let Some(d) = p.drops {
            // Keep the obsolete PB's drops field as the EPB option that
            // replaced it, so a conversion to EPB keeps it.
            self.options.push(RawOption {
                code: pcapng::EPB_DROPCOUNT,
                value: u64::from(d).to_le_bytes().to_vec(),
            });
        }
        Ok(Step::Packet {
            interface: p.interface,
            ts: p.ts,
            orig_len: p.orig_len,
            data: body.start + p.data.start..body.start + p.data.end,
            kind: p.kind,
        })
    }
}

/// What `next_record` found, as positions in the buffer, so that the
/// borrowing [`Record`] is built only once the reader's state is updated.
#[derive(Clone)]
enum Step {
    End,
    /// The input has nothing for now (see [`TraceReader::is_waiting`]).
    Waiting,
    Section,
    /// The last interface of the current section.
    Interface,
    Packet {
        interface: u32,
        ts: u64,
        orig_len: u32,
        data: Range<usize>,
        kind: PacketKind,
    },
    Block {
        block_type: u32,
        body: Range<usize>,
        little_endian: bool,
    },
}
