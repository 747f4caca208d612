//! Windowed reads: decode only the chunks of a trace that a time window needs.
//!
//! The sidecar index ([`crate::index`]) gives each chunk's place in the file
//! and its first and last packet timestamps. [`open_window`] picks the packet
//! chunks whose `[first, last]` overlaps the window, plus every metadata chunk
//! before the last of them (the file header, pcapng sections and interfaces),
//! decodes just those, and hands their concatenation, which is itself a valid
//! plain trace, to [`TraceReader::from_decompressed`].
//!
//! - lz4: the frame's blocks are independent, so each chunk's blocks are
//!   decoded on their own, raw-flagged blocks copied.
//! - gzip: each chunk is one gzip member.
//! - none: each chunk is a byte range.
//! - zstd: a frame cannot be entered in the middle, so the frame is decoded
//!   from its start and reading stops after the last chunk needed; the
//!   chunks in between are decoded and dropped.
//!
//! The index is checked, never trusted: its entries must tile the file and
//! the decompressed stream without gaps or overlaps, lie inside the file,
//! give each packet chunk a first timestamp no later than its last, and
//! find a chunk's start where they say (a gzip member's magic, LZ4 block
//! headers that add up to the chunk, a zstd block header). An index that
//! fails is ignored and the whole trace read, with the reason in
//! [`WindowStats::index_problem`] for the caller to show. Past the index's
//! last entry (after a crash the index lags the file by a chunk or more)
//! the file is read on to its end, so a windowed read returns what a full
//! read filtered by time returns.
//!
//! Chunks are coarser than the window, so callers still filter packets by
//! timestamp. Without an index the whole trace is read.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom, Take};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::compress::lz4::{self, FLG_BLOCK_CHECKSUM, FLG_OFFSET, MAX_BLOCK, RAW_FLAG};
use crate::error::{Error, Result};
use crate::format::Codec;
use crate::index::{index_path, read_index, Index, IndexEntry};
use crate::read::TraceReader;

/// The entries of an index that the file bears out.
struct Checked {
    /// Chunks that lie whole inside the file, in order (no end entry).
    entries: Vec<IndexEntry>,
    /// Where the last of them (or the end entry) ends in the file.
    end: u64,
    /// Where the last of them ends in the decompressed stream.
    decomp_end: u64,
}

/// What a windowed read touched.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WindowStats {
    /// Whether an index was used (else the whole trace is read).
    pub indexed: bool,
    /// Chunks in the index that lie inside the file.
    pub chunks_total: u64,
    /// Chunks that will be decompressed (for zstd, every chunk up to the
    /// last one needed).
    pub chunks_decoded: u64,
    /// Chunks whose bytes reach the reader.
    pub chunks_selected: u64,
    /// Bytes past the index's last entry, read on to the file's end.
    pub tail_bytes: u64,
    /// Why the index was not used, when there was one.
    pub index_problem: Option<String>,
}

/// A chunk's decompressed length is at most this (a block of packets, or
/// one packet of the largest snap length pcapng allows, with room).
const MAX_CHUNK: u64 = 64 << 20;

/// Checks `index` against the trace `file` of `file_len` bytes; the entries
/// that lie whole inside the file (after a crash the file may have lost
/// the chunks of the last entries), or why the index cannot be used.
fn check_index(
    index: &Index,
    file: &File,
    file_len: u64,
    lz4_sums: bool,
) -> std::result::Result<Checked, String> {
    let mut entries = Vec::with_capacity(index.entries.len());
    let (mut comp_end, mut decomp_end) = (None::<u64>, 0u64);
    for (i, e) in index.entries.iter().enumerate() {
        let Some(end) = e.comp_offset.checked_add(e.comp_len) else {
            return Err(format!(
                "entry {i}: offset {} + length {} overflows",
                e.comp_offset, e.comp_len
            ));
        };
        if end > file_len {
            // The file ends inside or before this chunk: after a crash or a
            // cut, it and every later one are not there (the read goes on
            // from the last whole chunk instead). A later entry inside the
            // file means this one is wrong.
            if let Some(j) = index.entries[i + 1..]
                .iter()
                .position(|l| l.comp_offset.saturating_add(l.comp_len) <= file_len)
            {
                return Err(format!(
                    "entry {i} ends at file offset {end}, past the file's end ({file_len}), \
                     but entry {} lies inside it",
                    i + 1 + j
                ));
            }
            if i == 0 {
                return Err(format!(
                    "its first chunk ends at file offset {end}, past the file's end ({file_len})"
                ));
            }
            break;
        }
        match comp_end {
            None if e.comp_offset > 64 => {
                return Err(format!(
                    "entry 0 starts at file offset {}, past any stream header",
                    e.comp_offset
                ))
            }
            Some(c) if e.comp_offset != c => {
                return Err(format!(
                    "entry {i} starts at file offset {}, the previous chunk ends at {c}",
                    e.comp_offset
                ))
            }
            _ => {}
        }
        if e.is_end() {
            if i + 1 != index.entries.len() || e.decomp_len != 0 || e.packets != 0 {
                return Err(format!(
                    "entry {i}: an end entry that is not the last, or holds data"
                ));
            }
            if e.decomp_offset != decomp_end {
                return Err(format!(
                    "the end entry is at decompressed offset {}, the last chunk ends at {decomp_end}",
                    e.decomp_offset
                ));
            }
            if end != file_len {
                return Err(format!(
                    "the file goes on for {} bytes past its closing end",
                    file_len - end
                ));
            }
            comp_end = Some(end);
            break;
        }
        if e.decomp_offset != decomp_end {
            return Err(format!(
                "entry {i} starts at decompressed offset {}, the previous chunk ends at {decomp_end}",
                e.decomp_offset
            ));
        }
        if e.comp_len == 0 || e.decomp_len == 0 || e.decomp_len > MAX_CHUNK {
            return Err(format!(
                "entry {i}: {} bytes in the file, {} decompressed",
                e.comp_len, e.decomp_len
            ));
        }
        if e.packets > 0 && e.first_ts > e.last_ts {
            return Err(format!(
                "entry {i}: first timestamp {} after the last {}",
                e.first_ts, e.last_ts
            ));
        }
        if e.is_metadata() && e.packets > 0 {
            return Err(format!(
                "entry {i}: a metadata chunk with {} packets",
                e.packets
            ));
        }
        check_chunk_start(index.codec, file, e, i == 0, lz4_sums)
            .map_err(|why| format!("entry {i}: at file offset {}, {why}", e.comp_offset))?;
        comp_end = Some(end);
        decomp_end = e.decomp_offset + e.decomp_len;
        entries.push(*e);
    }
    Ok(Checked {
        entries,
        end: comp_end.unwrap_or(0),
        decomp_end,
    })
}

/// Whether the file has a chunk of `codec` starting where `e` says.
fn check_chunk_start(
    codec: Codec,
    file: &File,
    e: &IndexEntry,
    first: bool,
    lz4_sums: bool,
) -> std::result::Result<(), String> {
    let at = |off: u64, buf: &mut [u8]| {
        file.read_exact_at(buf, off)
            .map_err(|err| format!("unreadable: {err}"))
    };
    match codec {
        Codec::None => Ok(()),
        Codec::Gzip => {
            let mut m = [0u8; 3];
            at(e.comp_offset, &mut m)?;
            if m == [0x1f, 0x8b, 8] {
                Ok(())
            } else {
                Err(format!("no gzip member (bytes {m:02x?})"))
            }
        }
        Codec::Lz4 => {
            // The chunk's blocks must add up to its length exactly.
            let (mut pos, end) = (e.comp_offset, e.comp_offset + e.comp_len);
            let mut decoded = 0u64;
            while pos < end {
                let mut h = [0u8; 4];
                at(pos, &mut h)?;
                let size = u32::from_le_bytes(h);
                let len = u64::from(size & !RAW_FLAG);
                if size == 0 || len > MAX_BLOCK as u64 {
                    return Err(format!(
                        "no lz4 block at file offset {pos} (size field {size:#x})"
                    ));
                }
                if size & RAW_FLAG != 0 {
                    decoded += len;
                }
                pos += 4 + len + if lz4_sums { 4 } else { 0 };
            }
            if pos != end || decoded > e.decomp_len {
                return Err("its lz4 blocks do not end where the chunk does".to_string());
            }
            Ok(())
        }
        Codec::Zstd => {
            if first {
                // The frame header, whose magic open_window has checked.
                return Ok(());
            }
            // A block header (RFC 8878 3.1.1.2): type 3 is reserved, and
            // no block holds more than 128 KiB.
            let mut h = [0u8; 3];
            at(e.comp_offset, &mut h)?;
            let v = u32::from(h[0]) | u32::from(h[1]) << 8 | u32::from(h[2]) << 16;
            let (kind, size) = ((v >> 1) & 3, v >> 3);
            if kind == 3 || size > 128 * 1024 {
                return Err(format!("no zstd block (header {h:02x?})"));
            }
            Ok(())
        }
    }
}

/// Opens `path` for reading the packets between `since_ns` and `until_ns`
/// (both inclusive, nanoseconds since the epoch; `None` is unbounded).
///
/// The reader may yield packets outside the window from the same chunks;
/// filter by timestamp.
pub fn open_window(
    path: &Path,
    since_ns: Option<u64>,
    until_ns: Option<u64>,
) -> Result<(TraceReader, WindowStats)> {
    let full = |problem: Option<String>| -> Result<(TraceReader, WindowStats)> {
        let stats = WindowStats {
            index_problem: problem,
            ..WindowStats::default()
        };
        Ok((TraceReader::open(path)?, stats))
    };
    let ipath = index_path(path);
    let index = match read_index(&ipath) {
        Ok(ix) => ix,
        Err(Error::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
            return full(None)
        }
        Err(e) => return full(Some(e.to_string())),
    };
    let mut file =
        File::open(path).map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    let file_len = file
        .metadata()
        .map_err(|e| Error::io(format!("reading {}", path.display()), e))?
        .len();
    let mut head = [0u8; 4];
    let head_len = read_up_to(&mut file, &mut head)
        .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    let codec = Codec::detect(&head[..head_len]);
    if codec != index.codec {
        return full(Some(format!(
            "{}: the index is for a {} file, this one is {}",
            ipath.display(),
            index.codec,
            codec
        )));
    }
    // Whether LZ4 blocks carry their checksums (the frame's FLG).
    let mut flg = [0u8; 1];
    let lz4_sums = codec == Codec::Lz4
        && file.read_exact_at(&mut flg, FLG_OFFSET).is_ok()
        && flg[0] & FLG_BLOCK_CHECKSUM != 0;
    let Checked {
        entries,
        end: indexed_end,
        decomp_end,
    } = match check_index(&index, &file, file_len, lz4_sums) {
        Ok(c) => c,
        Err(why) => return full(Some(format!("{}: {why}", ipath.display()))),
    };
    let overlaps = |e: &IndexEntry| {
        !e.is_metadata()
            && e.packets > 0
            && !matches!(since_ns, Some(s) if e.last_ts < s)
            && !matches!(until_ns, Some(u) if e.first_ts > u)
    };
    if entries.is_empty() {
        // Nothing indexed is in the file: a full read is the same thing.
        return full(None);
    }
    // Past the last whole entry the file is read to its end: chunks the
    // index has not caught up with, and the stream's end.
    let tail = file_len - indexed_end;
    let last_needed = if tail > 0 {
        Some(entries.len())
    } else {
        entries.iter().rposition(overlaps)
    };
    let selected: VecDeque<(usize, IndexEntry)> = entries
        .iter()
        .enumerate()
        .filter(|(i, e)| {
            if e.is_metadata() {
                !matches!(last_needed, Some(l) if *i >= l)
            } else {
                overlaps(e)
            }
        })
        .map(|(i, e)| (i, *e))
        .collect();
    let mut stats = WindowStats {
        indexed: true,
        chunks_total: entries.len() as u64,
        chunks_decoded: selected.len() as u64,
        chunks_selected: selected.len() as u64,
        tail_bytes: tail,
        index_problem: None,
    };
    let reader: Box<dyn Read + Send> = if index.codec == Codec::Zstd {
        let last = if tail > 0 {
            entries.len() - 1
        } else {
            selected.back().map_or(0, |(i, _)| *i)
        };
        stats.chunks_decoded = if selected.is_empty() && tail == 0 {
            0
        } else {
            last as u64 + 1
        };
        let end = if tail > 0 {
            file_len
        } else {
            selected
                .back()
                .map_or(0, |(_, e)| e.comp_offset + e.comp_len)
        };
        let mut ranges: VecDeque<(u64, u64)> = selected
            .iter()
            .map(|(_, e)| (e.decomp_offset, e.decomp_offset + e.decomp_len))
            .collect();
        if tail > 0 {
            ranges.push_back((decomp_end, u64::MAX));
        }
        file.seek(SeekFrom::Start(0))
            .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        Box::new(ZstdWindow::new(file.take(end), ranges, path)?)
    } else {
        let chunks = ChunkReader {
            file,
            codec: index.codec,
            lz4_sums,
            chunks: selected,
            buf: Vec::new(),
            pos: 0,
            path: path.to_path_buf(),
        };
        if tail > 0 {
            // A descriptor of its own: a clone's shares the chunks' file
            // offset, and gzip's decoder reads its first bytes at once.
            let mut rest = File::open(path)
                .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
            rest.seek(SeekFrom::Start(indexed_end))
                .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
            let rest = BufReader::new(rest);
            let tail: Box<dyn Read + Send> = match index.codec {
                Codec::None => Box::new(rest),
                Codec::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(rest)),
                // The tail's blocks continue the frame whose header is
                // at the file's start: decode them as a frame of their own
                // under a copy of it.
                _ => {
                    let mut header = vec![0u8; entries[0].comp_offset as usize];
                    let f = &chunks.file;
                    f.read_exact_at(&mut header, 0)
                        .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
                    Box::new(crate::read::lz4::Lz4Decoder::new(BufReader::new(
                        io::Cursor::new(header).chain(rest),
                    )))
                }
            };
            Box::new(chunks.chain(tail))
        } else {
            Box::new(chunks)
        }
    };
    Ok((TraceReader::from_decoded(reader, index.codec)?, stats))
}

/// Reads into `buf` until it is full or the file ends.
fn read_up_to(f: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Decodes selected chunks one at a time (lz4, gzip, none).
struct ChunkReader {
    file: File,
    codec: Codec,
    /// LZ4 blocks are followed by their checksums.
    lz4_sums: bool,
    chunks: VecDeque<(usize, IndexEntry)>,
    buf: Vec<u8>,
    pos: usize,
    path: PathBuf,
}

impl ChunkReader {
    fn next_chunk(&mut self) -> Result<bool> {
        let Some((n, e)) = self.chunks.pop_front() else {
            return Ok(false);
        };
        let ctx = || format!("reading chunk {n} of {}", self.path.display());
        self.file
            .seek(SeekFrom::Start(e.comp_offset))
            .map_err(|err| Error::io(ctx(), err))?;
        // comp_len was checked against the file's length.
        let mut comp = Vec::new();
        (&mut self.file)
            .take(e.comp_len)
            .read_to_end(&mut comp)
            .map_err(|err| Error::io(ctx(), err))?;
        self.buf.clear();
        self.pos = 0;
        match self.codec {
            Codec::None => self.buf = comp,
            Codec::Lz4 => lz4::decode_blocks(&comp, e.comp_offset, self.lz4_sums, &mut self.buf)?,
            Codec::Gzip => {
                flate2::read::GzDecoder::new(&comp[..])
                    .take(e.decomp_len.saturating_add(1))
                    .read_to_end(&mut self.buf)
                    .map_err(|err| Error::Compression {
                        codec: "gzip",
                        what: format!("chunk {n} at file offset {}: {err}", e.comp_offset),
                    })?;
            }
            // Zstd goes through ZstdWindow.
            Codec::Zstd => return Err(Error::Config("zstd chunks cannot be decoded alone".into())),
        }
        if let Some(want) = e.crc {
            let got = crate::index::chunk_checksum(&self.buf);
            if got != want {
                return Err(Error::Compression {
                    codec: self.codec.name(),
                    what: format!(
                        "chunk {n} at file offset {} is corrupt: its {} bytes decoded have checksum \
                         {got:08x}, the index says {want:08x}",
                        e.comp_offset,
                        self.buf.len()
                    ),
                });
            }
        }
        if self.buf.len() as u64 != e.decomp_len {
            return Err(Error::Compression {
                codec: self.codec.name(),
                what: format!(
                    "chunk {n} at file offset {} decoded to {} bytes, the index says {}",
                    e.comp_offset,
                    self.buf.len(),
                    e.decomp_len
                ),
            });
        }
        Ok(true)
    }
}

impl Read for ChunkReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.buf.len() {
            if !self.next_chunk().map_err(io::Error::other)? {
                return Ok(0);
            }
        }
        let n = out.len().min(self.buf.len() - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Decodes a zstd frame from its start, passing on only the selected
/// chunks' decompressed ranges.
struct ZstdWindow {
    dec: zstd::stream::read::Decoder<'static, BufReader<Take<File>>>,
    /// Position in the decompressed stream.
    pos: u64,
    /// Decompressed ranges still to pass on, in order.
    ranges: VecDeque<(u64, u64)>,
    scratch: Vec<u8>,
}

impl ZstdWindow {
    fn new(src: Take<File>, ranges: VecDeque<(u64, u64)>, path: &Path) -> Result<ZstdWindow> {
        let dec = zstd::stream::read::Decoder::new(src)
            .map_err(|e| Error::io(format!("starting zstd on {}", path.display()), e))?
            .single_frame();
        Ok(ZstdWindow {
            dec,
            pos: 0,
            ranges,
            scratch: vec![0; 64 * 1024],
        })
    }
}

impl Read for ZstdWindow {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        loop {
            let Some(&(start, end)) = self.ranges.front() else {
                return Ok(0);
            };
            if self.pos >= end {
                self.ranges.pop_front();
                continue;
            }
            if out.is_empty() {
                return Ok(0);
            }
            let (buf, want) = if self.pos < start {
                // Skip bytes of chunks that are not needed.
                let k = (start - self.pos).min(self.scratch.len() as u64) as usize;
                (&mut self.scratch[..k], false)
            } else {
                let k = (end - self.pos).min(out.len() as u64) as usize;
                (&mut out[..k], true)
            };
            let n = self.dec.read(buf)?;
            if n == 0 && end == u64::MAX {
                return Ok(0);
            }
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "zstd stream ended at decompressed offset {} before the indexed chunk ending at {end}",
                        self.pos
                    ),
                ));
            }
            self.pos += n as u64;
            if want {
                return Ok(n);
            }
        }
    }
}
