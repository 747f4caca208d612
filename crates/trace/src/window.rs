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
//! - gzip: each chunk is one gzip member (or several, in an index
//!   `kansoku index` joined).
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
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::error::{Corruption, Error, Result};
use crate::format::Codec;
use crate::index::{index_path, read_index, Index, IndexEntry};
use crate::keys::{chunks_digest, select, KeyQuery};
use crate::read::{Checks, TraceReader};

/// The entries of an index that the file bears out.
pub(crate) struct Checked {
    /// How many of the index's entries, from its first, are chunks that
    /// lie whole inside the file (no end entry). A count, not a copy: a
    /// big trace's index is megabytes, and fresh memory is dear.
    pub(crate) whole: usize,
    /// Where the last of them (or the end entry) ends in the file.
    pub(crate) end: u64,
    /// The index ends with an end entry: the file was closed.
    pub(crate) closed: bool,
    /// Entries were left out for lying past the file's end: the file was
    /// cut after they were written, not left by a writer that died (which
    /// writes an entry only after its chunk).
    pub(crate) past_end: bool,
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
    /// With a query the key index can narrow: chunks of the window its
    /// filters ruled out (not read), and chunks read for want of a filter
    /// (none written, or one that could not be trusted).
    pub chunks_skipped_by_keys: u64,
    pub chunks_without_keys: u64,
    /// Why the key index was not used, or not whole, when there was one.
    pub keys_problem: Option<String>,
}

/// A chunk's decompressed length is at most this (a block of packets, or
/// one packet of the largest snap length pcapng allows, with room).
const MAX_CHUNK: u64 = 64 << 20;

/// Checks `index` against the trace `file` of `file_len` bytes; the entries
/// that lie whole inside the file (after a crash the file may have lost
/// the chunks of the last entries), or why the index cannot be used.
///
/// Every entry's fields are checked against the others; the file's bytes
/// at a chunk's start only where `read(i)` says chunk `i` will be read (a
/// read of a few chunks of a large file made a system call for each of
/// the others: 50,000 for a host's packets in 1.6 GB).
pub(crate) fn check_index(
    index: &Index,
    file: &File,
    file_len: u64,
    lz4_sums: bool,
    read: &dyn Fn(usize) -> bool,
) -> std::result::Result<Checked, String> {
    let mut whole = 0;
    let (mut comp_end, mut decomp_end) = (None::<u64>, 0u64);
    let mut closed = false;
    let mut past_end = false;
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
            past_end = true;
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
            if index.codec == Codec::Lz4 {
                // LZ4's end mark.
                let mut m = [0xffu8; 4];
                if e.comp_len < 4
                    || file.read_exact_at(&mut m, e.comp_offset).is_err()
                    || m != [0; 4]
                {
                    return Err(format!(
                        "the end entry at file offset {} finds no lz4 end mark",
                        e.comp_offset
                    ));
                }
            }
            comp_end = Some(end);
            closed = true;
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
        if read(i) {
            check_chunk_start(index.codec, file, e, i == 0, lz4_sums)
                .map_err(|why| format!("entry {i}: at file offset {}, {why}", e.comp_offset))?;
        }
        comp_end = Some(end);
        decomp_end = e.decomp_offset + e.decomp_len;
        whole = i + 1;
    }
    Ok(Checked {
        whole,
        end: comp_end.unwrap_or(0),
        closed,
        past_end,
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
/// (both inclusive, nanoseconds since the epoch; `None` is unbounded),
/// checking each chunk read against its checksum in the index.
///
/// The reader may yield packets outside the window from the same chunks;
/// filter by timestamp.
pub fn open_window(
    path: &Path,
    since_ns: Option<u64>,
    until_ns: Option<u64>,
) -> Result<(TraceReader, WindowStats)> {
    open_window_with(path, since_ns, until_ns, true)
}

/// A full read of `path` through its index, when it has one that fits:
/// every chunk checked against its checksum, a corrupt chunk skipped (and
/// reported by [`TraceReader::corruptions`]) with the packets of the
/// others still read, and a file whose index has no end entry reported as
/// cut. Without an index, or with one that does not fit (the reason in
/// [`WindowStats::index_problem`]), the file is read as a stream.
pub fn open_checked(path: &Path) -> Result<(TraceReader, WindowStats)> {
    open_window_with(path, None, None, true)
}

/// [`open_window`], with the chunks' checksums compared (`verify`) or not.
pub fn open_window_with(
    path: &Path,
    since_ns: Option<u64>,
    until_ns: Option<u64>,
    verify: bool,
) -> Result<(TraceReader, WindowStats)> {
    open_query(path, since_ns, until_ns, &KeyQuery::Any, verify)
}

/// [`open_window_with`], reading only the chunks of the window whose key
/// filters ([`crate::keys`]) say they may hold a packet `query` matches:
/// the chunks without a filter are read, and so is everything when the
/// trace has no key index. The reader may yield packets the query does not
/// match; the caller applies its full expression to each.
pub fn open_query(
    path: &Path,
    since_ns: Option<u64>,
    until_ns: Option<u64>,
    query: &KeyQuery,
    verify: bool,
) -> Result<(TraceReader, WindowStats)> {
    let full = |problem: Option<String>| -> Result<(TraceReader, WindowStats)> {
        let stats = WindowStats {
            index_problem: problem,
            ..WindowStats::default()
        };
        Ok((TraceReader::open(path)?, stats))
    };
    if query.narrows() {
        if let Some(ruled_out) = ruled_out_by_file_filter(path, query, verify) {
            return ruled_out;
        }
    }
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
    let meta = file
        .metadata()
        .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    if !meta.is_file() {
        return full(Some(format!("{} is not a regular file", path.display())));
    }
    let file_len = meta.len();
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
    let lz4_sums = lz4_block_sums(&file, codec);
    let everything = since_ns.is_none() && until_ns.is_none();
    let in_time = |e: &IndexEntry| {
        everything
            || (e.packets > 0
                && !matches!(since_ns, Some(s) if e.last_ts < s)
                && !matches!(until_ns, Some(u) if e.first_ts > u))
    };
    // Packets of a metadata chunk (where another tool's compressed block
    // holds the file header and packets, and `kansoku index` could not
    // part them) count like any others. With a key index, a packet chunk
    // is read where its filter may hold a match, or where it has none.
    let keys = query.narrows().then(|| {
        let crcs: Vec<Option<u32>> = index
            .entries
            .iter()
            .map(|e| if e.is_metadata() { None } else { e.crc })
            .collect();
        let digest = chunks_digest(
            index
                .entries
                .iter()
                .filter(|e| !e.is_end())
                .map(|e| e.crc.unwrap_or(0)),
        );
        select(path, &crcs, digest, query)
    });
    let may_match = |i: usize| keys.as_ref().is_none_or(|k| k.may_match[i]);
    let read = |i: usize| {
        let e = &index.entries[i];
        e.is_metadata() || (in_time(e) && may_match(i))
    };
    let Checked {
        whole,
        end: indexed_end,
        closed,
        past_end,
    } = match check_index(&index, &file, file_len, lz4_sums, &read) {
        Ok(c) => c,
        Err(why) => return full(Some(format!("{}: {why}", ipath.display()))),
    };
    let entries = &index.entries[..whole];
    if entries.is_empty() {
        // Nothing indexed is in the file: a full read is the same thing.
        return full(None);
    }
    let overlaps = |i: usize, e: &IndexEntry| in_time(e) && may_match(i);
    // Past the last whole entry the file is read to its end: chunks the
    // index has not caught up with, and the stream's end.
    let tail = file_len - indexed_end;
    let last_needed = if tail > 0 {
        Some(entries.len())
    } else {
        entries
            .iter()
            .enumerate()
            .rposition(|(i, e)| overlaps(i, e))
    };
    let selected: Vec<bool> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            if e.is_metadata() {
                overlaps(i, e) || !matches!(last_needed, Some(l) if i >= l)
            } else {
                overlaps(i, e)
            }
        })
        .collect();
    let n_selected = selected.iter().filter(|s| **s).count() as u64;
    let mut stats = WindowStats {
        indexed: true,
        chunks_total: entries.len() as u64,
        chunks_decoded: n_selected,
        chunks_selected: n_selected,
        tail_bytes: tail,
        index_problem: None,
        chunks_skipped_by_keys: keys.as_ref().map_or(0, |k| k.ruled_out),
        chunks_without_keys: keys.as_ref().map_or(0, |k| k.without_filter),
        keys_problem: keys.as_ref().and_then(|k| k.problem.clone()),
    };
    let checks = Arc::new(Checks::default());
    // The read goes to the file's end and the writer did not close the
    // file (no end entry): its end is a cut, even where the stream cannot
    // tell (gzip between members, a plain file). The writer appends its
    // entries in batches, so after a crash the index is usually behind the
    // file: a tail past it counts too for gzip and plain files. An LZ4 or
    // zstd stream read into a tail judges its own end (its end mark), so a
    // complete stream whose index lacks the end entry (`kansoku index` of
    // a file with bytes past its frame, a kill between the end mark and
    // the end entry) is not called cut. Nor is a file cut short after it
    // was written (entries past its end): there the records judge.
    let stream_cannot_tell = matches!(index.codec, Codec::Gzip | Codec::None);
    let to_the_end = if tail > 0 {
        stream_cannot_tell && !past_end
    } else {
        selected.last() == Some(&true)
    };
    if past_end {
        // Cut after it was written: where the cut falls at a chunk's end,
        // or a record's in a tail the stream cannot judge, no stream says
        // so, and a window that ends before it would not get there anyway.
        checks.shorter.store(true, Ordering::Relaxed);
    } else if to_the_end && !closed && index.version >= 2 {
        checks.unclosed.store(true, Ordering::Relaxed);
    }
    // Zstd decodes every chunk up to the last one needed; the others are
    // read only where selected.
    let chunks: VecDeque<Chunk> = entries
        .iter()
        .zip(&selected)
        .enumerate()
        .filter(|(_, (_, s))| index.codec == Codec::Zstd || **s)
        .map(|(n, (e, s))| Chunk {
            n,
            entry: *e,
            selected: *s,
        })
        .collect();
    let reader: Box<dyn Read + Send> = if index.codec == Codec::Zstd {
        // Every chunk up to the last one needed is decoded.
        let last = if tail > 0 {
            Some(entries.len() - 1)
        } else {
            selected.iter().rposition(|s| *s)
        };
        let chunks: VecDeque<Chunk> = chunks.into_iter().take(last.map_or(0, |l| l + 1)).collect();
        stats.chunks_decoded = chunks.len() as u64;
        let end = if tail > 0 {
            file_len
        } else {
            chunks
                .back()
                .map_or(0, |c| c.entry.comp_offset + c.entry.comp_len)
        };
        file.seek(SeekFrom::Start(0))
            .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        Box::new(ZstdWindow::new(
            file.take(end),
            chunks,
            tail > 0,
            Checker {
                checks: Arc::clone(&checks),
                verify,
            },
            path,
        )?)
    } else {
        let check = Checker {
            checks: Arc::clone(&checks),
            verify,
        };
        let chunks = ChunkReader::new(file, index.codec, lz4_sums, chunks, check, path);
        if tail > 0 {
            // A descriptor of its own: a clone's shares the chunks' file
            // offset, and gzip's decoder reads its first bytes at once.
            let mut rest = File::open(path)
                .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
            rest.seek(SeekFrom::Start(indexed_end))
                .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
            let rest = BufReader::new(Tally {
                inner: rest,
                at: indexed_end,
                checks: Arc::clone(&checks),
            });
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
    let reader = TraceReader::from_decoded(reader, index.codec)?
        .with_checks(checks)
        .reading(&meta);
    Ok((reader, stats))
}

/// The read of a closed pcap file whose key sidecar's file filter rules
/// `query` out, made without reading its seek index whole: its header,
/// first entries and end entry are read, the end entry's digest of the
/// chunks' checksums checked against the filter's, and only the leading
/// metadata chunks (the file header) are decoded. `None` where any of it
/// is missing or does not agree (an older index, a file not closed, a
/// pcapng file, whose interfaces may come later, a damaged block of the
/// filter): the whole index is read then, as before. Over an archive of
/// 29 files of 55 MB it took a host query from 14.4 to 12.8 ms: reading
/// and checking the 110 KB index was a quarter of the time a file the
/// filter rules out cost (bench/archive.md).
fn ruled_out_by_file_filter(
    path: &Path,
    query: &KeyQuery,
    verify: bool,
) -> Option<Result<(TraceReader, WindowStats)>> {
    use crate::index::{read_index_head, ENTRY_LEN, HEADER_LEN};
    let ix = File::open(index_path(path)).ok()?;
    let body = ix.metadata().ok()?.len().checked_sub(HEADER_LEN as u64)?;
    if body % ENTRY_LEN as u64 != 0 || body < 2 * ENTRY_LEN as u64 {
        return None;
    }
    let n = usize::try_from(body / ENTRY_LEN as u64).ok()?;
    let index = read_index_head(&ix).ok()?;
    let mut last = [0u8; ENTRY_LEN];
    ix.read_exact_at(&mut last, HEADER_LEN as u64 + body - ENTRY_LEN as u64)
        .ok()?;
    let end = IndexEntry::from_bytes(&last).filter(|e| e.is_end())?;
    if index.version < 2 || index.pcapng {
        return None;
    }
    let meta: Vec<IndexEntry> = index
        .entries
        .iter()
        .take_while(|e| e.is_metadata())
        .copied()
        .collect();
    if meta.is_empty() || meta.len() == index.entries.len() {
        return None;
    }
    let keys = File::open(crate::keys::keys_path(path)).ok()?;
    let keys_len = keys.metadata().ok()?.len();
    let filter = crate::keys::FileFilter::open(&keys, keys_len).ok()??;
    if Some(filter.digest) != end.crc
        || query.may_match_with(&|h| filter.may_contain(h))
        || filter.damaged.get()
    {
        return None;
    }
    let mut file = File::open(path).ok()?;
    let meta_data = file.metadata().ok()?;
    let mut magic = [0u8; 4];
    let got = read_up_to(&mut file, &mut magic).ok()?;
    let closed_at = end.comp_offset.checked_add(end.comp_len)?;
    if Codec::detect(&magic[..got]) != index.codec || closed_at != meta_data.len() {
        return None;
    }
    // The metadata chunks lie one after another from the stream header.
    let mut at = meta[0].comp_offset;
    if at > 64 {
        return None;
    }
    for e in &meta {
        if e.comp_offset != at || e.comp_len == 0 || e.decomp_len > MAX_CHUNK {
            return None;
        }
        at = at
            .checked_add(e.comp_len)
            .filter(|&a| a <= end.comp_offset)?;
    }
    let lz4_sums = lz4_block_sums(&file, index.codec);
    let chunks: VecDeque<Chunk> = meta
        .iter()
        .enumerate()
        .map(|(n, e)| Chunk {
            n,
            entry: *e,
            selected: true,
        })
        .collect();
    let stats = WindowStats {
        indexed: true,
        chunks_total: n as u64 - 1,
        chunks_decoded: meta.len() as u64,
        chunks_selected: meta.len() as u64,
        tail_bytes: 0,
        index_problem: None,
        chunks_skipped_by_keys: (n - meta.len()) as u64,
        chunks_without_keys: meta.len() as u64,
        keys_problem: None,
    };
    let checks = Arc::new(Checks::default());
    let check = Checker {
        checks: Arc::clone(&checks),
        verify,
    };
    let reader: Box<dyn Read + Send> = if index.codec == Codec::Zstd {
        let start = file.seek(SeekFrom::Start(0));
        let window = start.map_err(|e| Error::io(format!("reading {}", path.display()), e));
        match window.and_then(|_| ZstdWindow::new(file.take(at), chunks, false, check, path)) {
            Ok(w) => Box::new(w),
            Err(e) => return Some(Err(e)),
        }
    } else {
        Box::new(ChunkReader::new(
            file,
            index.codec,
            lz4_sums,
            chunks,
            check,
            path,
        ))
    };
    Some(
        TraceReader::from_decoded(reader, index.codec)
            .map(|r| (r.with_checks(checks).reading(&meta_data), stats)),
    )
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

/// An indexed chunk, and whether its bytes go to the reader.
#[derive(Clone, Copy, Debug)]
struct Chunk {
    n: usize,
    entry: IndexEntry,
    selected: bool,
}

/// Checks decoded chunks against their checksums and keeps the record of
/// what was skipped.
struct Checker {
    checks: Arc<Checks>,
    verify: bool,
}

impl Checker {
    /// Whether `c` decoded to `bytes` is what was written; if not, it is
    /// recorded as corrupt.
    fn accept(&self, c: &Chunk, bytes: &[u8]) -> bool {
        let e = &c.entry;
        let what = if bytes.len() as u64 != e.decomp_len {
            format!(
                "decoded to {} bytes, the index says {}",
                bytes.len(),
                e.decomp_len
            )
        } else {
            match e.crc {
                Some(want) if self.verify => {
                    let got = crate::index::chunk_checksum(bytes);
                    if got == want {
                        return true;
                    }
                    format!("its bytes decoded have checksum {got:08x}, the index says {want:08x}")
                }
                _ => return true,
            }
        };
        self.corrupt(c, what, u64::from(e.packets));
        false
    }

    fn corrupt(&self, c: &Chunk, what: String, packets: u64) {
        let e = &c.entry;
        if let Ok(mut v) = self.checks.corrupt.lock() {
            v.push(Corruption {
                chunk: c.n as u64,
                file_offset: e.comp_offset,
                file_len: e.comp_len,
                decomp_offset: e.decomp_offset,
                packets,
                what,
            });
        }
    }

    fn reached(&self, file_offset: u64) {
        self.checks
            .file_offset
            .store(file_offset, Ordering::Relaxed);
    }
}

/// Counts the tail's bytes into the reader's file offset.
struct Tally {
    inner: File,
    at: u64,
    checks: Arc<Checks>,
}

impl Read for Tally {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.at += n as u64;
        self.checks.file_offset.store(self.at, Ordering::Relaxed);
        Ok(n)
    }
}

/// Decodes selected chunks one at a time (lz4, gzip, none); a chunk that
/// does not decode, or not to its checksum, is skipped: the chunks are
/// independent, so the next one decodes on its own.
struct ChunkReader {
    file: File,
    codec: Codec,
    /// LZ4 blocks are followed by their checksums.
    lz4_sums: bool,
    chunks: VecDeque<Chunk>,
    /// The chunk's bytes in the file, then decoded.
    comp: Vec<u8>,
    buf: Vec<u8>,
    pos: usize,
    check: Checker,
    path: PathBuf,
}

/// Whether the LZ4 frame of `file` carries a checksum after each block
/// (its FLG byte); never for another codec.
fn lz4_block_sums(file: &File, codec: Codec) -> bool {
    let mut flg = [0u8; 1];
    codec == Codec::Lz4
        && file.read_exact_at(&mut flg, FLG_OFFSET).is_ok()
        && flg[0] & FLG_BLOCK_CHECKSUM != 0
}

impl ChunkReader {
    /// Reads `chunks` of the `codec` file `file` at `path`, each checked by
    /// `check`.
    fn new(
        file: File,
        codec: Codec,
        lz4_sums: bool,
        chunks: VecDeque<Chunk>,
        check: Checker,
        path: &Path,
    ) -> ChunkReader {
        ChunkReader {
            file,
            codec,
            lz4_sums,
            chunks,
            comp: Vec::new(),
            buf: Vec::new(),
            pos: 0,
            check,
            path: path.to_path_buf(),
        }
    }

    /// Decodes the next good chunk into `buf`; false at the end.
    fn next_chunk(&mut self) -> io::Result<bool> {
        loop {
            let Some(c) = self.chunks.pop_front() else {
                return Ok(false);
            };
            let e = c.entry;
            // comp_len was checked against the file's length.
            self.comp.resize(e.comp_len as usize, 0);
            self.file
                .read_exact_at(&mut self.comp, e.comp_offset)
                .map_err(|err| {
                    io::Error::new(
                        err.kind(),
                        format!(
                            "reading chunk {} at file offset {} of {}: {err}",
                            c.n,
                            e.comp_offset,
                            self.path.display()
                        ),
                    )
                })?;
            self.check.reached(e.comp_offset + e.comp_len);
            self.pos = 0;
            let decoded = match self.codec {
                Codec::None => {
                    std::mem::swap(&mut self.comp, &mut self.buf);
                    Ok(())
                }
                Codec::Lz4 => {
                    self.buf.clear();
                    lz4::decode_blocks(&self.comp, e.comp_offset, self.lz4_sums, &mut self.buf)
                        .map_err(|err| match err {
                            Error::Compression { what, .. } => what,
                            other => other.to_string(),
                        })
                }
                Codec::Gzip => {
                    self.buf.clear();
                    flate2::read::MultiGzDecoder::new(&self.comp[..])
                        .take(e.decomp_len.saturating_add(1))
                        .read_to_end(&mut self.buf)
                        .map(|_| ())
                        .map_err(|err| format!("gzip: {err}"))
                }
                // Zstd goes through ZstdWindow.
                Codec::Zstd => Err("zstd chunks cannot be decoded alone".to_string()),
            };
            match decoded {
                Err(why) => self.check.corrupt(&c, why, u64::from(e.packets)),
                Ok(()) if self.check.accept(&c, &self.buf) => return Ok(true),
                Ok(()) => {}
            }
            self.buf.clear();
        }
    }

    /// An uncompressed file's chunks straight into `out`: as many whole
    /// chunks as fit, contiguous in the file, in one read, checked in place
    /// and a bad one cut out. Saves a copy of every byte and most system
    /// calls (a 1.6 GB trace of 32 KiB chunks: `profile -r F -i 60` 0.38 ->
    /// 0.32 s, medians of 5). `None` when the next chunk does not fit in
    /// `out` (the caller goes through `buf`); `Some(0)` at the end.
    fn read_raw_into(&mut self, out: &mut [u8]) -> io::Result<Option<usize>> {
        loop {
            let Some(first) = self.chunks.front() else {
                return Ok(Some(0));
            };
            let start = first.entry.comp_offset;
            let mut end = start;
            let mut n = 0;
            for c in &self.chunks {
                let e = &c.entry;
                if e.comp_offset != end || end - start + e.comp_len > out.len() as u64 {
                    break;
                }
                end += e.comp_len;
                n += 1;
            }
            if n == 0 {
                return Ok(None);
            }
            let run = &mut out[..(end - start) as usize];
            self.file.read_exact_at(run, start).map_err(|err| {
                io::Error::new(
                    err.kind(),
                    format!(
                        "reading chunks {}.. at file offset {start} of {}: {err}",
                        first.n,
                        self.path.display()
                    ),
                )
            })?;
            self.check.reached(end);
            let mut kept = 0;
            let mut at = 0;
            for c in self.chunks.drain(..n) {
                let len = c.entry.comp_len as usize;
                if self.check.accept(&c, &out[at..at + len]) {
                    if kept != at {
                        out.copy_within(at..at + len, kept);
                    }
                    kept += len;
                }
                at += len;
            }
            if kept > 0 {
                return Ok(Some(kept));
            }
        }
    }
}

impl Read for ChunkReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.codec == Codec::None && self.pos == self.buf.len() {
            if let Some(n) = self.read_raw_into(out)? {
                return Ok(n);
            }
        }
        while self.pos == self.buf.len() {
            if !self.next_chunk()? {
                return Ok(0);
            }
        }
        let n = out.len().min(self.buf.len() - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Decodes a zstd frame from its start, chunk by chunk, passing on only the
/// selected chunks that match their checksums; then, with a tail, the rest
/// of the frame. A chunk the decoder fails on ends the read: a zstd frame
/// cannot be entered again after it.
struct ZstdWindow {
    dec: zstd::stream::read::Decoder<'static, BufReader<Take<File>>>,
    chunks: VecDeque<Chunk>,
    /// After the chunks, the rest of the frame is passed on.
    tail: bool,
    buf: Vec<u8>,
    pos: usize,
    check: Checker,
    /// The decoder failed: nothing more can be read.
    failed: bool,
}

impl ZstdWindow {
    fn new(
        src: Take<File>,
        chunks: VecDeque<Chunk>,
        tail: bool,
        check: Checker,
        path: &Path,
    ) -> Result<ZstdWindow> {
        let dec = zstd::stream::read::Decoder::new(src)
            .map_err(|e| Error::io(format!("starting zstd on {}", path.display()), e))?
            .single_frame();
        Ok(ZstdWindow {
            dec,
            chunks,
            tail,
            buf: Vec::new(),
            pos: 0,
            check,
            failed: false,
        })
    }

    /// Decodes chunks until a selected good one is in `buf`; false when
    /// the chunks are done.
    fn next_chunk(&mut self) -> bool {
        while let Some(c) = self.chunks.pop_front() {
            let e = c.entry;
            self.buf.clear();
            self.pos = 0;
            let got = (&mut self.dec)
                .take(e.decomp_len)
                .read_to_end(&mut self.buf);
            self.check.reached(e.comp_offset + e.comp_len);
            if let Err(err) = got {
                // Everything from here on is lost.
                let lost = u64::from(e.packets)
                    + self
                        .chunks
                        .iter()
                        .map(|c| u64::from(c.entry.packets))
                        .sum::<u64>();
                self.check.corrupt(
                    &c,
                    format!("zstd: {err}; the frame cannot be decoded past it"),
                    lost,
                );
                self.failed = true;
                self.buf.clear();
                return false;
            }
            if c.selected && self.check.accept(&c, &self.buf) {
                return true;
            }
            if self.buf.len() as u64 != e.decomp_len {
                // The frame ended early: nothing follows.
                let lost: u64 = self
                    .chunks
                    .iter()
                    .filter(|c| c.selected)
                    .map(|c| u64::from(c.entry.packets))
                    .sum();
                if !c.selected || lost > 0 {
                    self.check.corrupt(
                        &c,
                        format!(
                            "zstd: the frame ends {} bytes into a chunk of {}",
                            self.buf.len(),
                            e.decomp_len
                        ),
                        lost,
                    );
                }
                self.failed = true;
                self.buf.clear();
                return false;
            }
            // Not needed, or skipped as corrupt.
            self.buf.clear();
        }
        false
    }
}

impl Read for ZstdWindow {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.pos < self.buf.len() {
                let n = out.len().min(self.buf.len() - self.pos);
                out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
                self.pos += n;
                return Ok(n);
            }
            if self.failed {
                return Ok(0);
            }
            if self.next_chunk() {
                continue;
            }
            if self.failed || !self.tail {
                return Ok(0);
            }
            return self.dec.read(out);
        }
    }
}
