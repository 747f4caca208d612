//! The seek index: a sidecar file `<trace path>.kidx` beside each trace.
//!
//! It lives outside the compressed stream because anything inside it (an LZ4
//! or zstd skippable frame) makes tshark 4.0 stop reading. The writer makes
//! one entry for each chunk it has written to the trace and appends them in
//! batches ([`IndexWriter::BATCH`], and at every idle flush), always after
//! the chunks they describe, so after a crash the index describes a prefix
//! of the file; a torn last entry is ignored.
//!
//! # Layout (version 2, all integers little-endian)
//!
//! Header, 16 bytes:
//!
//! | offset | size | field                                               |
//! |-------:|-----:|-----------------------------------------------------|
//! | 0      | 4    | magic `KIDX`                                        |
//! | 4      | 2    | version (2)                                         |
//! | 6      | 1    | codec: 0 none, 1 gzip, 2 zstd, 3 lz4                |
//! | 7      | 1    | format: 0 pcap, 1 pcapng                            |
//! | 8      | 4    | entry size in bytes (64)                            |
//! | 12     | 4    | reserved, 0                                         |
//!
//! Then one 64-byte entry per chunk:
//!
//! | offset | size | field                                               |
//! |-------:|-----:|-----------------------------------------------------|
//! | 0      | 8    | compressed offset of the chunk in the trace file    |
//! | 8      | 8    | compressed length                                   |
//! | 16     | 8    | decompressed offset (in the plain pcap/pcapng)      |
//! | 24     | 8    | decompressed length                                 |
//! | 32     | 8    | first packet timestamp, ns since the epoch          |
//! | 40     | 8    | last packet timestamp, ns since the epoch           |
//! | 48     | 4    | packet count                                        |
//! | 52     | 4    | flags: bit 0 raw (stored uncompressed), bit 1 metadata, bit 2 end |
//! | 56     | 4    | checksum of the chunk's decompressed bytes          |
//! | 60     | 4    | checksum of the entry's first 60 bytes              |
//!
//! Both checksums are the low 32 bits of XXH3-64 ([`chunk_checksum`]):
//! as good at catching damage as a CRC-32, and fast enough (tens of GB/s)
//! that checking every chunk costs the writer almost nothing, where
//! CRC-32 cost 7% of an LZ4 write.
//!
//! The entry's own checksum makes a damaged entry (a flipped timestamp that
//! would drop a chunk from a window, an offset pointing elsewhere) an index
//! that is not used, never a silent loss; the chunk's checksum lets a
//! reader check what it decoded. Version 1 (56-byte entries, no checksums)
//! is still read, its entries checked only against the file.
//!
//! A file closed cleanly ends its index with an end entry (flag bit 2): the
//! stream's closing bytes (LZ4's end mark, zstd's last block), no packets,
//! no decompressed bytes. An index without one describes a file that was
//! not closed (a crash, a kill) or a version 1 index.
//!
//! For LZ4 the compressed range covers the chunk's data blocks only; the
//! frame header sits before the first chunk. "First" and "last" are the
//! smallest and largest timestamps in the chunk, so out-of-order packets
//! stay inside the range.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::format::Codec;

/// File magic.
pub const MAGIC: [u8; 4] = *b"KIDX";
/// Layout version written.
pub const VERSION: u16 = 2;
/// Header length.
pub const HEADER_LEN: usize = 16;
/// Entry length (version 2).
pub const ENTRY_LEN: usize = 64;
/// Entry length of version 1.
pub const ENTRY_LEN_V1: usize = 56;
/// Entry flag: every block of the chunk is stored uncompressed.
pub const FLAG_RAW: u32 = 1;
/// Entry flag: the chunk holds metadata (file header, pcapng SHB/IDB/other
/// non-packet blocks) that a windowed read must replay.
pub const FLAG_METADATA: u32 = 2;
/// The checksum an index keeps of a chunk's bytes and of each entry: the
/// low 32 bits of XXH3-64 ([`checksum::xxh3_64`]: the same hash as
/// `twox_hash`'s, by a vector loop the CPU has, chosen at run time).
#[inline]
pub fn chunk_checksum(bytes: &[u8]) -> u32 {
    checksum::xxh3_64(bytes) as u32
}

/// Entry flag: the stream's end; the file was closed cleanly.
pub const FLAG_END: u32 = 4;
/// The sidecar's extension, appended to the trace's full name.
pub const EXTENSION: &str = "kidx";

/// The extensions of every sidecar kansoku may keep beside a trace: the
/// seek index and the key index ([`crate::keys`]).
const SIDECAR_EXTENSIONS: [&str; 2] = [EXTENSION, crate::keys::EXTENSION];

/// The sidecar of extension `ext` beside a trace: `<trace path>.<ext>`.
pub fn sidecar_path(trace: &Path, ext: &str) -> PathBuf {
    let mut s = trace.as_os_str().to_owned();
    s.push(".");
    s.push(ext);
    PathBuf::from(s)
}

/// The sidecar path for a trace: `<trace path>.kidx`.
pub fn index_path(trace: &Path) -> PathBuf {
    sidecar_path(trace, EXTENSION)
}

/// Every sidecar kansoku may keep beside the trace at `trace`. They go
/// where the trace goes (renamed, deleted with it).
pub fn sidecars(trace: &Path) -> [PathBuf; 2] {
    SIDECAR_EXTENSIONS.map(|ext| sidecar_path(trace, ext))
}

/// Whether the file name `name` is a sidecar's, not a trace's.
pub fn is_sidecar(name: &str) -> bool {
    SIDECAR_EXTENSIONS.iter().any(|ext| {
        name.strip_suffix(ext)
            .is_some_and(|rest| rest.ends_with('.'))
    })
}

/// One chunk of a trace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IndexEntry {
    /// Offset of the chunk's bytes in the trace file.
    pub comp_offset: u64,
    /// Length of the chunk's bytes in the trace file.
    pub comp_len: u64,
    /// Offset of the chunk in the decompressed stream.
    pub decomp_offset: u64,
    /// Length of the chunk decompressed.
    pub decomp_len: u64,
    /// Smallest packet timestamp in the chunk (ns); 0 without packets.
    pub first_ts: u64,
    /// Largest packet timestamp in the chunk (ns); 0 without packets.
    pub last_ts: u64,
    /// Packets in the chunk.
    pub packets: u32,
    /// [`FLAG_RAW`], [`FLAG_METADATA`].
    pub flags: u32,
    /// Checksum of the chunk's decompressed bytes ([`chunk_checksum`]; none
    /// in a version 1 index). The end entry's: with a key sidecar, the
    /// digest of the chunks' checksums that binds the file's filter
    /// ([`crate::keys::chunks_digest`]); 0 without one.
    pub crc: Option<u32>,
}

impl IndexEntry {
    /// Whether the chunk holds metadata.
    pub fn is_metadata(&self) -> bool {
        self.flags & FLAG_METADATA != 0
    }

    /// Whether the entry is the stream's end (the file was closed).
    pub fn is_end(&self) -> bool {
        self.flags & FLAG_END != 0
    }

    /// Whether the chunk is stored uncompressed.
    pub fn is_raw(&self) -> bool {
        self.flags & FLAG_RAW != 0
    }

    /// The little-endian encoding (version 2).
    pub fn to_bytes(&self) -> [u8; ENTRY_LEN] {
        let mut b = [0u8; ENTRY_LEN];
        b[0..8].copy_from_slice(&self.comp_offset.to_le_bytes());
        b[8..16].copy_from_slice(&self.comp_len.to_le_bytes());
        b[16..24].copy_from_slice(&self.decomp_offset.to_le_bytes());
        b[24..32].copy_from_slice(&self.decomp_len.to_le_bytes());
        b[32..40].copy_from_slice(&self.first_ts.to_le_bytes());
        b[40..48].copy_from_slice(&self.last_ts.to_le_bytes());
        b[48..52].copy_from_slice(&self.packets.to_le_bytes());
        b[52..56].copy_from_slice(&self.flags.to_le_bytes());
        b[56..60].copy_from_slice(&self.crc.unwrap_or(0).to_le_bytes());
        let own = chunk_checksum(&b[..60]);
        b[60..64].copy_from_slice(&own.to_le_bytes());
        b
    }

    /// Decodes a version 2 entry, `None` when its checksum fails.
    pub fn from_bytes(b: &[u8; ENTRY_LEN]) -> Option<IndexEntry> {
        let own = u32::from_le_bytes([b[60], b[61], b[62], b[63]]);
        if chunk_checksum(&b[..60]) != own {
            return None;
        }
        let mut e = IndexEntry::from_v1(b[..ENTRY_LEN_V1].try_into().ok()?);
        e.crc = Some(u32::from_le_bytes([b[56], b[57], b[58], b[59]]));
        Some(e)
    }

    /// Decodes a version 1 entry from exactly [`ENTRY_LEN_V1`] bytes.
    pub fn from_v1(b: &[u8; ENTRY_LEN_V1]) -> IndexEntry {
        let u64_at = |o: usize| {
            let mut v = [0u8; 8];
            v.copy_from_slice(&b[o..o + 8]);
            u64::from_le_bytes(v)
        };
        let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        IndexEntry {
            comp_offset: u64_at(0),
            comp_len: u64_at(8),
            decomp_offset: u64_at(16),
            decomp_len: u64_at(24),
            first_ts: u64_at(32),
            last_ts: u64_at(40),
            packets: u32_at(48),
            flags: u32_at(52),
            crc: None,
        }
    }
}

/// A trace's index as read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Index {
    /// The trace's codec.
    pub codec: Codec,
    /// Whether the trace is pcapng (else pcap).
    pub pcapng: bool,
    /// Chunks in file order.
    pub entries: Vec<IndexEntry>,
    /// Whether a torn last entry (an interrupted append) was ignored.
    pub torn: bool,
    /// The layout's version (1 has no checksums and no end entry).
    pub version: u16,
}

fn codec_code(c: Codec) -> u8 {
    match c {
        Codec::None => 0,
        Codec::Gzip => 1,
        Codec::Zstd => 2,
        Codec::Lz4 => 3,
    }
}

fn codec_from_code(c: u8) -> Option<Codec> {
    match c {
        0 => Some(Codec::None),
        1 => Some(Codec::Gzip),
        2 => Some(Codec::Zstd),
        3 => Some(Codec::Lz4),
        _ => None,
    }
}

/// The 16-byte header for a trace of `codec` and format.
pub fn header(codec: Codec, pcapng: bool) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[0..4].copy_from_slice(&MAGIC);
    h[4..6].copy_from_slice(&VERSION.to_le_bytes());
    h[6] = codec_code(codec);
    h[7] = u8::from(pcapng);
    h[8..12].copy_from_slice(&(ENTRY_LEN as u32).to_le_bytes());
    h
}

/// Parses an index from its bytes; `name` is used in error messages.
pub fn parse_index(bytes: &[u8], name: &str) -> Result<Index> {
    let mut index = parse_header(bytes, name)?;
    let body = &bytes[HEADER_LEN..];
    let entry_len = entry_len(index.version);
    let whole = body.len() - body.len() % entry_len;
    parse_entries(&body[..whole], &mut index, 0, name)?;
    index.torn = whole < body.len();
    Ok(index)
}

/// An entry's length in a layout `version` that [`parse_header`] accepted.
fn entry_len(version: u16) -> usize {
    if version == 1 {
        ENTRY_LEN_V1
    } else {
        ENTRY_LEN
    }
}

/// The index a header describes, with no entries yet.
fn parse_header(bytes: &[u8], name: &str) -> Result<Index> {
    let bad = |what: String| Error::Format {
        offset: 0,
        what: format!("{name}: {what}"),
    };
    let Some(h) = bytes.get(..HEADER_LEN) else {
        return Err(bad(format!(
            "index header cut short ({} bytes, {HEADER_LEN} needed)",
            bytes.len()
        )));
    };
    if h[0..4] != MAGIC {
        return Err(bad(format!(
            "not a kansoku index (magic {:02x?}, expected \"KIDX\")",
            &h[0..4]
        )));
    }
    let version = u16::from_le_bytes([h[4], h[5]]);
    if version != 1 && version != VERSION {
        return Err(bad(format!(
            "index version {version} (expected 1 or {VERSION})"
        )));
    }
    let codec = codec_from_code(h[6]).ok_or_else(|| bad(format!("unknown codec code {}", h[6])))?;
    let got = u32::from_le_bytes([h[8], h[9], h[10], h[11]]) as usize;
    let want = entry_len(version);
    if got != want {
        return Err(bad(format!(
            "entry size {got} (version {version} has {want})"
        )));
    }
    Ok(Index {
        codec,
        pcapng: h[7] != 0,
        entries: Vec::new(),
        torn: false,
        version,
    })
}

/// Appends the entries of `body`, whole entries of `index`'s layout whose
/// first is entry `first` of the file, to `index`.
fn parse_entries(body: &[u8], index: &mut Index, first: usize, name: &str) -> Result<()> {
    let entry_len = entry_len(index.version);
    for (i, c) in body.chunks_exact(entry_len).enumerate() {
        let e = if index.version == 1 {
            c.try_into().ok().map(IndexEntry::from_v1)
        } else {
            c.try_into().ok().and_then(IndexEntry::from_bytes)
        };
        match e {
            Some(e) => index.entries.push(e),
            None => {
                let i = first + i;
                return Err(Error::Format {
                    offset: (HEADER_LEN + i * entry_len) as u64,
                    what: format!("{name}: entry {i} fails its checksum"),
                });
            }
        }
    }
    Ok(())
}

/// Reads the index at `path` (the sidecar itself, see [`index_path`]).
/// A torn last entry, left by a crash during its append, is ignored.
///
/// The file is read `READ_BLOCK` entries at a time into one small
/// buffer, not whole: a 1.6 GB trace has a 3.2 MB index, and on a virtual
/// machine whose page faults are dear, reading it into fresh memory before
/// parsing it cost a millisecond and a half of `profile -r`'s start
/// (bench/profile-throughput.md).
pub fn read_index(path: &Path) -> Result<Index> {
    let name = path.display().to_string();
    let io = |e| Error::io(format!("reading {name}"), e);
    let mut f = File::open(path).map_err(|e| Error::io(format!("opening {name}"), e))?;
    let mut head = [0u8; HEADER_LEN];
    let got = read_full(&mut f, &mut head).map_err(io)?;
    let mut index = parse_header(&head[..got], &name)?;
    let entry_len = entry_len(index.version);
    // The file's length is a hint only: a writer may be appending to it.
    let hint = f
        .metadata()
        .map_or(0, |m| m.len())
        .saturating_sub(HEADER_LEN as u64);
    index
        .entries
        .reserve((hint / entry_len as u64).min(1 << 24) as usize);
    let mut buf = vec![0u8; READ_BLOCK * entry_len];
    let (mut held, mut first) = (0, 0);
    loop {
        // The buffer holds a multiple of an entry and less than one is
        // left over, so there is always room.
        let want = buf.len() - held;
        let got = read_full(&mut f, &mut buf[held..]).map_err(io)?;
        held += got;
        let whole = held - held % entry_len;
        parse_entries(&buf[..whole], &mut index, first, &name)?;
        first += whole / entry_len;
        buf.copy_within(whole..held, 0);
        held -= whole;
        if got < want {
            break; // the file's end
        }
    }
    index.torn = held > 0;
    Ok(index)
}

/// The entries [`read_index_head`] reads: a trace's metadata chunks (a
/// pcap file header, a pcapng section's header and interfaces) come
/// before its first chunk of packets.
pub const HEAD_ENTRIES: usize = 8;

/// The header and the first [`HEAD_ENTRIES`] entries (fewer in a shorter
/// index) of the index `f`, for a reader that wants a file's first times
/// or its metadata chunks, not every entry.
pub fn read_index_head(f: &File) -> Result<Index> {
    let mut head = Vec::with_capacity(HEADER_LEN + HEAD_ENTRIES * ENTRY_LEN);
    f.take((HEADER_LEN + HEAD_ENTRIES * ENTRY_LEN) as u64)
        .read_to_end(&mut head)
        .map_err(|e| Error::io("reading an index's first entries", e))?;
    parse_index(&head, "")
}

/// Entries [`read_index`] reads at a time.
const READ_BLOCK: usize = 1024;

/// Reads until `buf` is full or the file ends; how many bytes were read.
fn read_full(f: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Appends entries to a sidecar, one unbuffered write each, so that an entry
/// is in the file as soon as the chunk it describes is; and, when asked,
/// the chunks' key filters to the key sidecar ([`crate::keys`]) beside it.
pub struct IndexWriter {
    file: File,
    path: PathBuf,
    /// Entries not yet written: appended in batches of
    /// [`IndexWriter::BATCH`], not a `write` each.
    pending: Vec<u8>,
    /// Entries appended so far: the next entry's chunk number.
    appended: u64,
    /// The digest of the chunk checksums appended so far
    /// ([`crate::keys::chunks_digest`]), kept with a key sidecar: the file's
    /// filter and the end entry carry it.
    digest: crate::keys::ChunksDigest,
    /// The key sidecar, its records not yet written, and its length.
    keys: Option<(File, PathBuf, Vec<u8>)>,
    keys_len: u64,
}

impl IndexWriter {
    /// Creates (truncates) the sidecar at `path` and writes its header.
    pub fn create(path: &Path, codec: Codec, pcapng: bool) -> Result<IndexWriter> {
        let mut file =
            File::create(path).map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
        file.write_all(&header(codec, pcapng))
            .map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
        Ok(IndexWriter {
            file,
            path: path.to_path_buf(),
            pending: Vec::with_capacity(IndexWriter::BATCH * ENTRY_LEN),
            appended: 0,
            digest: crate::keys::ChunksDigest::default(),
            keys: None,
            keys_len: 0,
        })
    }

    /// Also writes the key sidecar of the trace at `trace`
    /// ([`crate::keys::keys_path`]), created (truncated) now.
    pub fn with_keys(self, trace: &Path) -> Result<IndexWriter> {
        self.with_keys_at(&crate::keys::keys_path(trace))
    }

    /// Also writes a key sidecar at `path` (a temporary name, renamed
    /// into place once whole: `kansoku index`).
    pub fn with_keys_at(mut self, path: &Path) -> Result<IndexWriter> {
        let path = path.to_path_buf();
        let mut file = File::create(&path)
            .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
        let head = crate::keys::file_header();
        file.write_all(&head)
            .map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
        self.keys_len = head.len() as u64;
        self.keys = Some((file, path, Vec::new()));
        Ok(self)
    }

    /// Entries gathered before they are written (4 KiB). A `write` per
    /// entry made LZ4 writes of compressible traffic cost 25% more CPU
    /// than without an index (a 64-byte system call for every 32 KiB
    /// chunk). An index behind its file loses nothing: reads go on past
    /// its last entry to the file's end, and one without an end entry says
    /// the file was not closed. The writer flushes it at every idle flush
    /// and at the end, and after every chunk when it syncs.
    pub const BATCH: usize = 64;

    /// Appends one entry; written with the batch it completes, or at the
    /// next [`flush`](IndexWriter::flush).
    pub fn append(&mut self, e: &IndexEntry) -> Result<()> {
        self.append_with_keys(e, None)
    }

    /// Appends one entry and its chunk's key filter (with a key sidecar).
    pub fn append_with_keys(
        &mut self,
        e: &IndexEntry,
        filter: Option<&crate::keys::KeyFilter>,
    ) -> Result<()> {
        if let (Some((_, _, pending)), Some(f)) = (self.keys.as_mut(), filter) {
            crate::keys::encode_record(pending, self.appended, e.crc.unwrap_or(0), f);
        }
        let mut e = *e;
        if self.keys.is_some() {
            if e.is_end() {
                // The end entry carries the digest that binds the file's
                // filter: a query the filter rules out reads this entry,
                // not every entry's checksum (`window::open_query`).
                e.crc = Some(self.digest.value());
            } else {
                self.digest = self.digest.with(e.crc.unwrap_or(0));
            }
        }
        self.appended += 1;
        self.pending.extend_from_slice(&e.to_bytes());
        if self.pending.len() >= IndexWriter::BATCH * ENTRY_LEN {
            self.flush()?;
        }
        Ok(())
    }

    /// Whether the next [`append`](IndexWriter::append) writes a batch.
    pub fn batch_due(&self) -> bool {
        self.pending.len() + ENTRY_LEN >= IndexWriter::BATCH * ENTRY_LEN
    }

    /// Writes the entries appended so far (the key filters first: an
    /// entry without its filter costs a read, a filter without its entry
    /// is never used).
    pub fn flush(&mut self) -> Result<()> {
        if let Some((file, path, pending)) = self.keys.as_mut() {
            if !pending.is_empty() {
                let r = file.write_all(pending);
                self.keys_len += pending.len() as u64;
                pending.clear();
                r.map_err(|err| Error::io(format!("writing {}", path.display()), err))?;
            }
        }
        if self.pending.is_empty() {
            return Ok(());
        }
        let r = self.file.write_all(&self.pending);
        self.pending.clear();
        r.map_err(|err| Error::io(format!("writing {}", self.path.display()), err))
    }

    /// Closes the key sidecar with the file's filter (`file`, over every
    /// chunk's keys) and the footer that finds it, after every entry: a
    /// query reads it first, and the chunks' filters only when it may
    /// match. It is bound to the seek index by the digest of its chunk
    /// checksums.
    pub fn finish_keys(&mut self, file: Option<&crate::keys::KeyFilter>) -> Result<()> {
        self.flush()?;
        let (Some(f), Some(_)) = (file, self.keys.as_ref()) else {
            return Ok(());
        };
        let at = self.keys_len;
        let digest = self.digest.value();
        if let Some((_, _, pending)) = self.keys.as_mut() {
            crate::keys::encode_file_record(pending, digest, f);
            pending.extend_from_slice(&at.to_le_bytes());
            pending.extend_from_slice(&crate::keys::FOOTER_MAGIC);
        }
        self.flush()
    }

    /// Writes the entries appended so far and flushes the sidecar to disk.
    pub fn sync(&mut self) -> Result<()> {
        self.flush()?;
        if let Some((file, path, _)) = self.keys.as_mut() {
            file.sync_data()
                .map_err(|e| Error::io(format!("syncing {}", path.display()), e))?;
        }
        self.file
            .sync_data()
            .map_err(|e| Error::io(format!("syncing {}", self.path.display()), e))
    }
}

impl Drop for IndexWriter {
    /// The entries of chunks already in the file, as far as they go (a
    /// writer dropped on an error); an error cannot be reported here, and
    /// an index behind its file is read as such.
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_torn_tail() {
        let e = IndexEntry {
            comp_offset: 7,
            comp_len: 100,
            decomp_offset: 24,
            decomp_len: 32768,
            first_ts: 1_700_000_000_000_000_001,
            last_ts: 1_700_000_000_999_999_999,
            packets: 21,
            flags: FLAG_RAW,
            crc: Some(0xdead_beef),
        };
        let mut b = header(Codec::Lz4, false).to_vec();
        b.extend_from_slice(&e.to_bytes());
        b.extend_from_slice(&e.to_bytes()[..30]);
        let ix = parse_index(&b, "t").unwrap();
        assert_eq!(ix.codec, Codec::Lz4);
        assert!(!ix.pcapng);
        assert_eq!(ix.entries, vec![e]);
        assert!(ix.torn);
        // Any flipped bit of an entry fails its checksum.
        for byte in HEADER_LEN..HEADER_LEN + ENTRY_LEN {
            let mut bad = b.clone();
            bad[byte] ^= 0x10;
            let err = parse_index(&bad, "t").unwrap_err().to_string();
            assert!(err.contains("entry 0 fails its checksum"), "{byte}: {err}");
        }
    }

    #[test]
    fn a_file_read_a_block_at_a_time_is_what_its_bytes_parse_to() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.kidx");
        let entry = |i: u64| IndexEntry {
            comp_offset: 24 + i * 1000,
            comp_len: 1000,
            decomp_offset: 24 + i * 1000,
            decomp_len: 1000,
            first_ts: i,
            last_ts: i + 1,
            packets: 2,
            flags: FLAG_RAW,
            crc: Some(i as u32),
        };
        // Around the reads' block: none, one, a block less one, a block, a
        // block and one, several; each whole and with a torn tail.
        for n in [
            0,
            1,
            READ_BLOCK - 1,
            READ_BLOCK,
            READ_BLOCK + 1,
            2 * READ_BLOCK + 500,
        ] {
            for torn in [0, 1, 30, ENTRY_LEN - 1] {
                let mut b = header(Codec::None, false).to_vec();
                for i in 0..n {
                    b.extend_from_slice(&entry(i as u64).to_bytes());
                }
                b.extend_from_slice(&entry(n as u64).to_bytes()[..torn]);
                std::fs::write(&path, &b).unwrap();
                let read = read_index(&path).unwrap();
                let parsed = parse_index(&b, "t").unwrap();
                assert_eq!(read.entries.len(), n, "{n} {torn}");
                assert_eq!(read.entries, parsed.entries, "{n} {torn}");
                assert_eq!(read.torn, torn > 0, "{n} {torn}");
                assert_eq!(read.codec, Codec::None);
                if n > READ_BLOCK {
                    // An entry in a later block that fails its checksum is
                    // named, with its offset, as the whole parse names it.
                    let at = HEADER_LEN + READ_BLOCK * ENTRY_LEN + 9;
                    b[at] ^= 1;
                    std::fs::write(&path, &b).unwrap();
                    let want = parse_index(&b, "t").unwrap_err();
                    let got = read_index(&path).unwrap_err();
                    let msg = format!("entry {READ_BLOCK} fails its checksum");
                    assert!(got.to_string().contains(&msg), "{got}");
                    assert!(want.to_string().contains(&msg), "{want}");
                    let off = |e: &Error| match e {
                        Error::Format { offset, .. } => *offset,
                        other => panic!("{other}"),
                    };
                    assert_eq!(off(&got), off(&want));
                }
            }
        }
        // A header cut short, or none at all.
        for cut in [0, 4, HEADER_LEN - 1] {
            std::fs::write(&path, &header(Codec::None, false)[..cut]).unwrap();
            let err = read_index(&path).unwrap_err().to_string();
            assert!(err.contains("index header cut short"), "{cut}: {err}");
        }
    }

    #[test]
    fn version_1_indexes_are_still_read() {
        let e = IndexEntry {
            comp_offset: 7,
            comp_len: 100,
            decomp_len: 500,
            packets: 3,
            first_ts: 5,
            last_ts: 9,
            ..IndexEntry::default()
        };
        let mut b = header(Codec::Gzip, true).to_vec();
        b[4..6].copy_from_slice(&1u16.to_le_bytes());
        b[8..12].copy_from_slice(&(ENTRY_LEN_V1 as u32).to_le_bytes());
        b.extend_from_slice(&e.to_bytes()[..ENTRY_LEN_V1]);
        let ix = parse_index(&b, "t").unwrap();
        assert_eq!(ix.entries, vec![e]);
        assert!(!ix.torn);
        // A version 2 header with version 1 entries is refused.
        let mut v2 = header(Codec::Gzip, true).to_vec();
        v2[8..12].copy_from_slice(&(ENTRY_LEN_V1 as u32).to_le_bytes());
        assert!(parse_index(&v2, "t").is_err());
    }

    #[test]
    fn bad_headers_are_errors() {
        assert!(parse_index(b"KIDX", "t").is_err());
        assert!(parse_index(&[0u8; 16], "t").is_err());
        let mut h = header(Codec::Gzip, true);
        h[6] = 9;
        assert!(parse_index(&h, "t").is_err());
    }

    #[test]
    fn sidecar_name_appends_extension() {
        assert_eq!(
            index_path(Path::new("/x/a.pcap.lz4")),
            PathBuf::from("/x/a.pcap.lz4.kidx")
        );
    }
}
