//! Rebuilding a trace's seek index from the trace itself (`kansoku index`).
//!
//! An index entry needs a place where reading can start: a gzip member, an
//! independent LZ4 block (any block of a kansoku file), a zstd block (a
//! windowed read decodes a zstd frame from its start, so any block boundary
//! will do), or for a plain file any record. And it must start at a record:
//! the chunks a windowed read picks are parsed as one trace.
//!
//! 1. The compressed stream is walked block by block (member by member) for
//!    those places: compressed offset and decompressed offset.
//! 2. The trace is read record by record; a place where a record ends is a
//!    usable boundary. Between usable boundaries lie segments, each with its
//!    packets, first and last timestamp, and whether it holds metadata.
//! 3. Segments of one kind are joined up to the writer's chunk size. A
//!    segment holding metadata (the file header, a pcapng section or
//!    interface) is a metadata chunk, which every windowed read replays,
//!    even when packets share it (a file of another tool whose first
//!    compressed block holds the header and packets): its packets are then
//!    decoded with it and filtered by time like any others.
//! 4. The stream is decoded once more for each chunk's checksum, and read
//!    once more for each chunk's key filter ([`crate::keys`]).
//!
//! The new index and key index are written beside the trace under
//! temporary names, synced and renamed over the old ones, so a crash leaves
//! the old index or the new (and a key index of other chunks than the
//! seek index's is never used: its records name their chunks' checksums).
//! It ends with an end entry when the stream ends cleanly; a file cut short
//! gets the chunks before the cut, and windowed reads read the rest.

use std::fs::File;
use std::hash::Hasher;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result, Truncation};
use crate::format::{Codec, FileFormat};
use crate::index::{index_path, IndexEntry, IndexWriter, FLAG_END, FLAG_METADATA, FLAG_RAW};
use crate::keys::{keys_path, ChunkKeys, KeyFilter};
use crate::read::TraceReader;
use crate::record::Record;
use crate::write::DEFAULT_BLOCK_SIZE;

/// What `rebuild` wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rebuilt {
    /// Where the index went.
    pub path: PathBuf,
    pub codec: Codec,
    /// Chunks indexed (no end entry counted).
    pub chunks: u64,
    /// Packets in them.
    pub packets: u64,
    /// The largest chunk's decompressed length: another tool's blocks
    /// rarely end where a record does, and its file gets few, large
    /// chunks that narrow a windowed read little.
    pub largest_chunk: u64,
    /// The stream ends cleanly: the index has an end entry.
    pub closed: bool,
    /// Where the stream was cut, when it was.
    pub truncation: Option<Truncation>,
    /// Why the index stops before the file's end, other than a cut: corrupt
    /// data, bytes after the stream's end.
    pub stopped: Option<String>,
}

/// A place where decoding can start: a compressed and a decompressed
/// offset, and whether the block before it was stored raw.
#[derive(Clone, Copy, Debug)]
struct Cut {
    comp: u64,
    decomp: u64,
    raw: bool,
}

/// The places of a compressed stream, and how it ends.
struct Scan {
    /// Where the first chunk starts (after the LZ4 or zstd frame header).
    start: Cut,
    cuts: Vec<Cut>,
    /// The stream's closing bytes (`[from, to)` in the file), when it has
    /// them whole.
    end: Option<(u64, u64)>,
    /// Why the walk stopped early, other than the file's end.
    stopped: Option<String>,
}

/// A run of records between two usable boundaries.
#[derive(Clone, Copy, Debug, Default)]
struct Seg {
    comp: u64,
    comp_end: u64,
    decomp: u64,
    decomp_end: u64,
    packets: u64,
    first_ts: u64,
    last_ts: u64,
    metadata: bool,
    raw: bool,
}

impl Seg {
    fn starting(at: Cut) -> Seg {
        Seg {
            comp: at.comp,
            comp_end: at.comp,
            decomp: at.decomp,
            decomp_end: at.decomp,
            first_ts: u64::MAX,
            raw: true,
            ..Seg::default()
        }
    }

    fn add(&mut self, packet_ts: Option<u64>) {
        match packet_ts {
            Some(ts) => {
                self.packets += 1;
                self.first_ts = self.first_ts.min(ts);
                self.last_ts = self.last_ts.max(ts);
            }
            None => self.metadata = true,
        }
    }

    fn is_empty(&self) -> bool {
        self.decomp_end == self.decomp
    }
}

/// Rebuilds the index of the trace at `path` (see the module's text).
pub fn rebuild(path: &Path) -> Result<Rebuilt> {
    let ctx = |what: &str| format!("{what} {}", path.display());
    let file = File::open(path).map_err(|e| Error::io(ctx("opening"), e))?;
    let file_len = file
        .metadata()
        .map_err(|e| Error::io(ctx("reading"), e))?
        .len();
    let mut head = [0u8; 4];
    let n = (&file)
        .take(4)
        .read(&mut head)
        .map_err(|e| Error::io(ctx("reading"), e))?;
    let codec = Codec::detect(&head[..n]);
    let file = File::open(path).map_err(|e| Error::io(ctx("opening"), e))?;
    let scan = match codec {
        Codec::None => None,
        Codec::Gzip => Some(scan_gzip(file, file_len)),
        Codec::Lz4 => Some(scan_lz4(file)?),
        Codec::Zstd => Some(scan_zstd(file)?),
    };
    let (segs, reader_end, format) = segments(path, scan.as_ref())?;
    let chunks = join(&segs);
    let mut sums = checksums(path, codec, &chunks)?;
    let (truncation, read_error) = reader_end;
    let last = chunks.last().map_or_else(
        || scan.as_ref().map_or((0, 0), |s| (s.start.comp, 0)),
        |c| (c.comp_end, c.decomp_end),
    );
    // Closed: the records end at a boundary, the stream's closing bytes
    // follow the last chunk and end the file.
    let closed = truncation.is_none()
        && read_error.is_none()
        && match &scan {
            None => last.0 == file_len,
            Some(s) => {
                s.stopped.is_none() && s.end.is_some_and(|(a, b)| a == last.0 && b == file_len)
            }
        };
    let (filters, file_filter) = key_filters(path, &chunks)?;
    let mut filters = filters.into_iter().peekable();
    let ipath = index_path(path);
    let kpath = keys_path(path);
    let new = |p: &Path| {
        let mut s = p.as_os_str().to_owned();
        s.push(".new");
        PathBuf::from(s)
    };
    let (tmp, ktmp) = (new(&ipath), new(&kpath));
    let mut w = IndexWriter::create(&tmp, codec, matches!(format, FileFormat::Pcapng))?
        .with_keys_at(&ktmp)?;
    let mut packets = 0;
    for (i, (c, sum)) in chunks.iter().zip(sums.drain(..)).enumerate() {
        packets += c.packets;
        let mut flags = if c.metadata { FLAG_METADATA } else { 0 };
        // Plain chunks are stored as they are; LZ4's when all their blocks
        // were (gzip's stored blocks are not looked for).
        if codec == Codec::None || (c.raw && codec == Codec::Lz4) {
            flags |= FLAG_RAW;
        }
        let filter = filters.next_if(|(n, _)| *n == i).map(|(_, mut f)| {
            f.fold(c.comp_end - c.comp);
            f
        });
        w.append_with_keys(
            &IndexEntry {
                comp_offset: c.comp,
                comp_len: c.comp_end - c.comp,
                decomp_offset: c.decomp,
                decomp_len: c.decomp_end - c.decomp,
                first_ts: if c.packets > 0 { c.first_ts } else { 0 },
                last_ts: c.last_ts,
                packets: u32::try_from(c.packets).unwrap_or(u32::MAX),
                flags,
                crc: Some(sum),
            },
            filter.as_ref(),
        )?;
    }
    if closed {
        w.append(&IndexEntry {
            comp_offset: last.0,
            comp_len: file_len - last.0,
            decomp_offset: last.1,
            flags: FLAG_END,
            crc: Some(0),
            ..IndexEntry::default()
        })?;
    }
    // The file's filter only for a file read to its clean end: a cut one
    // has packets no chunk holds.
    w.finish_keys(file_filter.as_ref().filter(|_| closed))?;
    w.sync()?;
    drop(w);
    for (from, to) in [(&ktmp, &kpath), (&tmp, &ipath)] {
        std::fs::rename(from, to).map_err(|e| {
            Error::io(
                format!("renaming {} to {}", from.display(), to.display()),
                e,
            )
        })?;
    }
    let stopped = read_error.or_else(|| scan.and_then(|s| s.stopped));
    Ok(Rebuilt {
        path: ipath,
        codec,
        chunks: chunks.len() as u64,
        packets,
        largest_chunk: chunks
            .iter()
            .map(|c| c.decomp_end - c.decomp)
            .max()
            .unwrap_or(0),
        closed,
        truncation,
        stopped,
    })
}

/// The key filters of `chunks` (their places in the list, and the
/// filters) and the file's, from a read of the trace's packets: a record
/// belongs to the chunk its first byte is in.
#[allow(clippy::type_complexity)]
fn key_filters(
    path: &Path,
    chunks: &[Seg],
) -> Result<(Vec<(usize, KeyFilter)>, Option<KeyFilter>)> {
    let largest = chunks
        .iter()
        .map(|c| c.decomp_end - c.decomp)
        .max()
        .unwrap_or(0);
    let mut keys = ChunkKeys::new(
        usize::try_from(largest)
            .unwrap_or(usize::MAX)
            .max(DEFAULT_BLOCK_SIZE),
    );
    let mut out = Vec::new();
    let mut r = TraceReader::open(path)?;
    let (mut i, mut start) = (0usize, 0u64);
    // A read error or a cut ends the chunks the index has too.
    while let Ok(Some(rec)) = r.next_record() {
        while i < chunks.len() && start >= chunks[i].decomp_end {
            if let Some(f) = keys.take() {
                out.push((i, f));
            }
            i += 1;
        }
        if i == chunks.len() {
            break;
        }
        if let Record::Packet(p) = rec {
            keys.add_packet(p.link_type, p.data);
        }
        start = r.offset();
    }
    if i < chunks.len() {
        if let Some(f) = keys.take() {
            out.push((i, f));
        }
    }
    let file = keys.take_file();
    Ok((out, file))
}

/// A buffered reader that counts what its user consumed.
struct Counting<R> {
    inner: BufReader<R>,
    consumed: u64,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.consumed += n as u64;
        Ok(n)
    }
}

impl<R: Read> BufRead for Counting<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.inner.fill_buf()
    }

    fn consume(&mut self, n: usize) {
        self.consumed += n as u64;
        self.inner.consume(n);
    }
}

/// Gzip: each member starts afresh.
fn scan_gzip(file: File, file_len: u64) -> Scan {
    let mut src = Counting {
        inner: BufReader::with_capacity(1 << 20, file),
        consumed: 0,
    };
    let start = Cut {
        comp: 0,
        decomp: 0,
        raw: false,
    };
    let (mut cuts, mut decomp, mut stopped) = (Vec::new(), 0u64, None);
    loop {
        match src.fill_buf() {
            Ok([]) => break,
            Ok(_) => {}
            Err(e) => {
                stopped = Some(format!("reading: {e}"));
                break;
            }
        }
        let at = src.consumed;
        let mut member = flate2::bufread::GzDecoder::new(&mut src);
        match io::copy(&mut member, &mut io::sink()) {
            Ok(n) => {
                decomp += n;
                cuts.push(Cut {
                    comp: src.consumed,
                    decomp,
                    raw: false,
                });
            }
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
            Err(e) => {
                stopped = Some(format!("gzip member at file offset {at}: {e}"));
                break;
            }
        }
    }
    let end = cuts
        .last()
        .map(|c| c.comp)
        .filter(|&c| c == file_len && stopped.is_none())
        .map(|c| (c, c));
    Scan {
        start,
        cuts,
        end,
        stopped,
    }
}

/// Reads exactly `buf.len()` bytes; false if the stream ended first.
fn fill(r: &mut impl Read, buf: &mut [u8]) -> Result<bool> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => return Ok(false),
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io("reading the trace", e)),
        }
    }
    Ok(true)
}

fn refuse(what: impl std::fmt::Display) -> Error {
    Error::Config(format!("cannot index this file: {what}"))
}

/// LZ4: the frame's blocks, which must be independent.
fn scan_lz4(file: File) -> Result<Scan> {
    let mut r = BufReader::with_capacity(1 << 20, file);
    let mut h = [0u8; 7];
    if !fill(&mut r, &mut h)? {
        return Err(refuse("its LZ4 frame header is cut short"));
    }
    let (flg, bd) = (h[4], h[5]);
    if flg >> 6 != 1 {
        return Err(refuse(format!(
            "LZ4 frame version {} (FLG {flg:#04x})",
            flg >> 6
        )));
    }
    if flg & 0x20 == 0 {
        return Err(refuse(
            "its LZ4 blocks are linked (each needs the one before), so no read can start between them; \
             rewrite it with `kansoku read -r FILE -w NEW.lz4`",
        ));
    }
    let block_sums = flg & 0x10 != 0;
    let content_sum = flg & 0x04 != 0;
    let extra = if flg & 0x08 != 0 { 8 } else { 0 } + if flg & 0x01 != 0 { 4 } else { 0 };
    // Header so far: magic, FLG, BD, and one byte that is HC when there
    // are no optional fields.
    let mut skip = vec![0u8; extra];
    if !fill(&mut r, &mut skip)? {
        return Err(refuse("its LZ4 frame header is cut short"));
    }
    let max_block = match (bd >> 4) & 7 {
        4 => 64 << 10,
        5 => 256 << 10,
        6 => 1 << 20,
        7 => 4 << 20,
        v => return Err(refuse(format!("LZ4 block size code {v}"))),
    };
    let header_len = 7 + extra as u64;
    let start = Cut {
        comp: header_len,
        decomp: 0,
        raw: false,
    };
    let (mut pos, mut decomp) = (header_len, 0u64);
    let (mut cuts, mut end, mut stopped) = (Vec::new(), None, None);
    let mut body = Vec::new();
    let mut out = vec![0u8; max_block];
    loop {
        let mut size = [0u8; 4];
        if !fill(&mut r, &mut size)? {
            break;
        }
        let size = u32::from_le_bytes(size);
        if size == 0 {
            let mut sum = [0u8; 4];
            if !content_sum || fill(&mut r, &mut sum)? {
                let len = if content_sum { 8 } else { 4 };
                end = Some((pos, pos + len));
                let mut more = [0u8; 1];
                if fill(&mut r, &mut more)? {
                    stopped = Some(format!(
                        "bytes after the LZ4 frame's end at file offset {}",
                        pos + len
                    ));
                }
            }
            break;
        }
        let raw = size & 0x8000_0000 != 0;
        let len = (size & 0x7fff_ffff) as usize;
        if len > max_block {
            stopped = Some(format!(
                "an LZ4 block of {len} bytes at file offset {pos}, above the frame's {max_block}"
            ));
            break;
        }
        body.resize(len + if block_sums { 4 } else { 0 }, 0);
        if !fill(&mut r, &mut body)? {
            break;
        }
        let n = if raw {
            len
        } else {
            match lz4_flex::block::decompress_into(&body[..len], &mut out) {
                Ok(n) => n,
                Err(e) => {
                    stopped = Some(format!("corrupt LZ4 block at file offset {pos}: {e}"));
                    break;
                }
            }
        };
        pos += 4 + body.len() as u64;
        decomp += n as u64;
        cuts.push(Cut {
            comp: pos,
            decomp,
            raw,
        });
    }
    Ok(Scan {
        start,
        cuts,
        end,
        stopped,
    })
}

/// Zstd: one frame's blocks, each fed whole to a streaming decoder to
/// learn where it ends in the decompressed stream.
fn scan_zstd(file: File) -> Result<Scan> {
    use zstd::stream::raw::{Decoder, InBuffer, Operation, OutBuffer};
    let mut r = BufReader::with_capacity(1 << 20, file);
    let mut h = [0u8; 5];
    if !fill(&mut r, &mut h)? {
        return Err(refuse("its zstd frame header is cut short"));
    }
    let fhd = h[4];
    if fhd & 0x08 != 0 {
        return Err(refuse("a zstd frame header with its reserved bit set"));
    }
    let single = fhd & 0x20 != 0;
    let fcs = match fhd >> 6 {
        0 => usize::from(single),
        1 => 2,
        2 => 4,
        _ => 8,
    };
    let dict = [0, 1, 2, 4][usize::from(fhd & 3)];
    let content_sum = fhd & 0x04 != 0;
    let mut rest = vec![0u8; usize::from(!single) + dict + fcs];
    if !fill(&mut r, &mut rest)? {
        return Err(refuse("its zstd frame header is cut short"));
    }
    let mut dec = Decoder::new().map_err(|e| Error::io("starting zstd", e))?;
    let mut out = vec![0u8; 256 << 10];
    // Feeds `bytes` to the decoder; the decompressed bytes they gave.
    let mut feed = |dec: &mut Decoder<'_>, bytes: &[u8]| -> io::Result<u64> {
        let mut input = InBuffer::around(bytes);
        let mut made = 0u64;
        loop {
            let mut o = OutBuffer::around(&mut out[..]);
            dec.run(&mut input, &mut o)?;
            let n = o.pos();
            made += n as u64;
            if input.pos() == bytes.len() && n < out.len() {
                return Ok(made);
            }
        }
    };
    let header = [&h[..], &rest[..]].concat();
    feed(&mut dec, &header).map_err(|e| refuse(format!("zstd frame header: {e}")))?;
    // The first chunk takes the frame header in (as the writer's does):
    // a read of a zstd trace always starts at the frame's start.
    let start = Cut {
        comp: 0,
        decomp: 0,
        raw: false,
    };
    let (mut pos, mut decomp) = (header.len() as u64, 0u64);
    let (mut cuts, mut end, mut stopped) = (Vec::new(), None, None);
    let mut block = Vec::new();
    loop {
        let mut bh = [0u8; 3];
        if !fill(&mut r, &mut bh)? {
            break;
        }
        let v = u32::from(bh[0]) | u32::from(bh[1]) << 8 | u32::from(bh[2]) << 16;
        let (last, kind, size) = (v & 1 != 0, (v >> 1) & 3, (v >> 3) as usize);
        let body = match kind {
            1 => 1,
            3 => {
                stopped = Some(format!("a reserved zstd block type at file offset {pos}"));
                break;
            }
            _ => size,
        };
        if size > 128 << 10 {
            stopped = Some(format!(
                "a zstd block of {size} bytes at file offset {pos}, above 128 KiB"
            ));
            break;
        }
        block.clear();
        block.extend_from_slice(&bh);
        block.resize(3 + body, 0);
        if !fill(&mut r, &mut block[3..])? {
            break;
        }
        let made = match feed(&mut dec, &block) {
            Ok(n) => n,
            Err(e) => {
                stopped = Some(format!("corrupt zstd block at file offset {pos}: {e}"));
                break;
            }
        };
        // An empty last block (kansoku's writer ends so) is, with the
        // checksum, the stream's closing bytes; any other ends a chunk.
        let closing = if last && made == 0 {
            pos + block.len() as u64
        } else {
            decomp += made;
            pos += block.len() as u64;
            cuts.push(Cut {
                comp: pos,
                decomp,
                raw: kind == 0,
            });
            pos
        };
        if last {
            let mut sum = [0u8; 4];
            if !content_sum || fill(&mut r, &mut sum)? {
                let len = if content_sum { 4 } else { 0 };
                end = Some((pos, closing + len));
                let mut more = [0u8; 1];
                if fill(&mut r, &mut more)? {
                    stopped = Some(format!(
                        "bytes after the zstd frame's end at file offset {}",
                        closing + len
                    ));
                }
            }
            break;
        }
    }
    Ok(Scan {
        start,
        cuts,
        end,
        stopped,
    })
}

/// Reads the trace's records and splits them at the usable boundaries:
/// the places of `scan` where a record ends, or for a plain file (no
/// scan) record ends where the kind changes or a chunk's worth has
/// gathered. Also how the read ended (a cut, an error) and the format.
#[allow(clippy::type_complexity)]
fn segments(
    path: &Path,
    scan: Option<&Scan>,
) -> Result<(Vec<Seg>, (Option<Truncation>, Option<String>), FileFormat)> {
    let mut r = TraceReader::open(path)?;
    let format = r.format();
    let start = scan.map_or(
        Cut {
            comp: 0,
            decomp: 0,
            raw: false,
        },
        |s| s.start,
    );
    let cuts: &[Cut] = scan.map_or(&[], |s| &s.cuts);
    let mut segs = Vec::new();
    let mut seg = Seg::starting(start);
    // The first place not yet passed, and the raw flags of the places in
    // the segment.
    let (mut ci, mut all_raw) = (0usize, true);
    let mut record_start = 0u64;
    let error = loop {
        let kind = match r.next_record() {
            Ok(Some(Record::Packet(p))) => Some(p.ts_nanos()),
            Ok(Some(_)) => None,
            Ok(None) => break None,
            Err(e) => break Some(e.to_string()),
        };
        let end = r.offset();
        if end == record_start && record_start > 0 {
            // No bytes of its own (pcap's interface, from the file header
            // before it): it goes with the record before.
            continue;
        }
        if scan.is_none() {
            // A plain file: a boundary before a record of the other kind,
            // or one that would take the chunk past the writer's size.
            let other_kind = kind.is_none() != (seg.packets == 0 && seg.metadata);
            if !seg.is_empty() && (other_kind || end - seg.decomp > DEFAULT_BLOCK_SIZE as u64) {
                seg.comp_end = record_start;
                seg.decomp_end = record_start;
                segs.push(seg);
                seg = Seg::starting(Cut {
                    comp: record_start,
                    decomp: record_start,
                    raw: false,
                });
            }
            seg.add(kind);
            seg.comp_end = end;
            seg.decomp_end = end;
        } else {
            seg.add(kind);
            // Places inside this record cannot be used.
            while ci < cuts.len() && cuts[ci].decomp < end {
                all_raw &= cuts[ci].raw;
                ci += 1;
            }
            if ci < cuts.len() && cuts[ci].decomp == end && end > seg.decomp {
                // Several places may share an offset (empty blocks): the
                // last of them ends the segment.
                while ci + 1 < cuts.len() && cuts[ci + 1].decomp == end {
                    all_raw &= cuts[ci].raw;
                    ci += 1;
                }
                let c = cuts[ci];
                seg.comp_end = c.comp;
                seg.decomp_end = c.decomp;
                seg.raw = all_raw && c.raw;
                segs.push(seg);
                seg = Seg::starting(c);
                all_raw = true;
                ci += 1;
            }
        }
        record_start = end;
    };
    if scan.is_none() && !seg.is_empty() && error.is_none() && r.truncation().is_none() {
        segs.push(seg);
    }
    Ok((segs, (r.truncation().cloned(), error), format))
}

/// Joins neighbouring segments of one kind into chunks of about the
/// writer's size.
fn join(segs: &[Seg]) -> Vec<Seg> {
    let mut chunks: Vec<Seg> = Vec::new();
    for s in segs {
        match chunks.last_mut() {
            Some(c)
                if c.metadata == s.metadata
                    && (c.decomp_end - c.decomp) + (s.decomp_end - s.decomp)
                        <= DEFAULT_BLOCK_SIZE as u64
                    && c.comp_end == s.comp =>
            {
                c.comp_end = s.comp_end;
                c.decomp_end = s.decomp_end;
                c.packets += s.packets;
                c.first_ts = c.first_ts.min(s.first_ts);
                c.last_ts = c.last_ts.max(s.last_ts);
                c.raw &= s.raw;
            }
            _ => chunks.push(*s),
        }
    }
    chunks
}

/// The checksum of each chunk's decompressed bytes, decoding the stream
/// once more.
fn checksums(path: &Path, codec: Codec, chunks: &[Seg]) -> Result<Vec<u32>> {
    let file = File::open(path).map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    let raw = BufReader::with_capacity(1 << 20, file);
    let mut src: Box<dyn Read> = match codec {
        Codec::None => Box::new(raw),
        Codec::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(raw)),
        Codec::Zstd => Box::new(
            zstd::stream::read::Decoder::with_buffer(raw)
                .map_err(|e| Error::io("starting zstd", e))?,
        ),
        Codec::Lz4 => Box::new(crate::read::lz4::Lz4Decoder::new(raw)),
    };
    let mut sums = Vec::with_capacity(chunks.len());
    let mut pos = 0u64;
    let mut buf = vec![0u8; 256 << 10];
    for c in chunks {
        // Chunks tile the stream from its start.
        let mut h = twox_hash::XxHash3_64::default();
        let mut left = c.decomp_end - c.decomp;
        debug_assert_eq!(pos, c.decomp);
        while left > 0 {
            let k = left.min(buf.len() as u64) as usize;
            if !fill(&mut src, &mut buf[..k])? {
                return Err(Error::Compression {
                    codec: codec.name(),
                    what: "the stream ended early on the second read".into(),
                });
            }
            h.write(&buf[..k]);
            left -= k as u64;
        }
        pos = c.decomp_end;
        sums.push(h.finish() as u32);
    }
    Ok(sums)
}
