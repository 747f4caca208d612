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
//! Chunks are coarser than the window, so callers still filter packets by
//! timestamp. Without an index (or with one that does not match the file),
//! the whole trace is read.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom, Take};
use std::path::{Path, PathBuf};

use crate::compress::lz4;
use crate::error::{Error, Result};
use crate::format::Codec;
use crate::index::{index_path, read_index, IndexEntry};
use crate::read::TraceReader;

/// What a windowed read touched.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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
    let full = || -> Result<(TraceReader, WindowStats)> {
        Ok((TraceReader::open(path)?, WindowStats::default()))
    };
    let ipath = index_path(path);
    let index = match read_index(&ipath) {
        Ok(ix) => ix,
        Err(Error::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => return full(),
        Err(e) => return Err(e),
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
    if Codec::detect(&head[..head_len]) != index.codec {
        // The sidecar belongs to another file that had this name.
        return full();
    }
    // After a crash the index can describe chunks the file lost; only whole
    // chunks inside the file count.
    let entries: Vec<IndexEntry> = index
        .entries
        .iter()
        .take_while(|e| {
            e.comp_offset
                .checked_add(e.comp_len)
                .is_some_and(|end| end <= file_len)
        })
        .copied()
        .collect();
    let overlaps = |e: &IndexEntry| {
        !e.is_metadata()
            && e.packets > 0
            && !matches!(since_ns, Some(s) if e.last_ts < s)
            && !matches!(until_ns, Some(u) if e.first_ts > u)
    };
    let last_needed = entries.iter().rposition(overlaps);
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
    };
    let reader: Box<dyn Read + Send> = if index.codec == Codec::Zstd {
        let last = selected.back().map_or(0, |(i, _)| *i);
        stats.chunks_decoded = if selected.is_empty() {
            0
        } else {
            last as u64 + 1
        };
        let end = selected
            .back()
            .map_or(0, |(_, e)| e.comp_offset + e.comp_len);
        file.seek(SeekFrom::Start(0))
            .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        Box::new(ZstdWindow::new(file.take(end), selected, path)?)
    } else {
        Box::new(ChunkReader {
            file,
            codec: index.codec,
            chunks: selected,
            buf: Vec::new(),
            pos: 0,
            path: path.to_path_buf(),
        })
    };
    Ok((TraceReader::from_decompressed(reader)?, stats))
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
            Codec::Lz4 => lz4::decode_blocks(&comp, e.comp_offset, &mut self.buf)?,
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
    fn new(
        src: Take<File>,
        chunks: VecDeque<(usize, IndexEntry)>,
        path: &Path,
    ) -> Result<ZstdWindow> {
        let dec = zstd::stream::read::Decoder::new(src)
            .map_err(|e| Error::io(format!("starting zstd on {}", path.display()), e))?
            .single_frame();
        Ok(ZstdWindow {
            dec,
            pos: 0,
            ranges: chunks
                .iter()
                .map(|(_, e)| {
                    (
                        e.decomp_offset,
                        e.decomp_offset.saturating_add(e.decomp_len),
                    )
                })
                .collect(),
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
