//! The key index: for each chunk of a trace, a Bloom filter of the
//! addresses (IPv4, IPv6), ports (TCP, UDP) and IP protocols of its
//! packets, kept in a sidecar of its own beside the seek index
//! ([`keys_path`]), and one filter of the whole file read before them.
//! A query in tcpdump's language is turned into a [`KeyQuery`] over these
//! keys; a chunk whose filter says none of its packets can match is not
//! read. The answer stays exact: the full expression is applied to every
//! packet of the chunks that are read, and the filter only decides what
//! is read (it never says "absent" of a key a packet has).
//!
//! # Why a Bloom filter per chunk
//!
//! The question asked of an archive is "the packets of this host (or
//! port) in this hour", and what it costs is the chunks decoded. A filter
//! per chunk answers it where the chunk is, needs nothing but the chunk's
//! own packets to build (a capture writes it as it goes, `kansoku index`
//! adds it to a file in one pass), and its size is chosen chunk by chunk:
//! the writer gathers the chunk's keys and builds a filter of
//! [`BITS_PER_KEY`] bits for each, rounded up to a power of two, then
//! halves it (a Bloom filter of 2^n bits folds into 2^(n-1) by OR-ing its
//! halves, the positions being taken modulo a power of two) while it
//! takes more than [`MAX_SHARE`] of the chunk's stored bytes.
//! Stenographer's sorted key lists with per-file postings answer the same
//! question, but a posting costs a few bytes for every key of every
//! packet, where the filter costs about two. The figures are in
//! bench/archive.md.
//!
//! # Filter layout (all integers little-endian)
//!
//! | offset | size | field                                                  |
//! |-------:|-----:|--------------------------------------------------------|
//! | 0      | 4    | checksum of bytes 4.. (low 32 bits of XXH3-64)         |
//! | 4      | 1    | layout version (1)                                     |
//! | 5      | 1    | hashes per key, k (1-16)                               |
//! | 6      | 1    | log2 of the filter's bits (6-24)                       |
//! | 7      | 1    | reserved, 0                                            |
//! | 8      | 2^(byte 6) / 8 | the bits, as 64-bit words                    |
//!
//! A key is a 64-bit hash of its kind and value ([`key_v4`], [`key_v6`],
//! [`key_port`], [`key_protocol`]); its positions are `h1 + i * h2`
//! modulo the filter's bits for `i < k` (Kirsch and Mitzenmacher's double
//! hashing), `h1` and `h2` the hash's low and high halves.
//!
//! The file's filter has a layout of its own, its bits in checksummed
//! blocks read as a query needs them ([`encode_file_record`],
//! [`FileFilter`]).
//!
//! A chunk holding a packet whose keys cannot all be read (an IP header
//! cut short, a link layer the walk does not know, SCTP's ports) has no
//! filter: every query reads it.

use crate::error::{Error, Result};
use wire::LinkType;

/// Bits a filter keeps for each distinct key at least (before it is
/// rounded up to a power of two): 0.24% false positives with four hashes,
/// 0.05% at the rounding's average of 1.5 times as many bits (with 10
/// bits a key, a host query read nearly twice as many chunks for nothing:
/// bench/archive.md).
pub const BITS_PER_KEY: u64 = 16;
/// Hashes per key.
pub const HASHES: u32 = 4;
/// The most a filter takes of its chunk's stored bytes (1/40, 2.5%): on
/// traffic of tiny packets the filter is folded below [`BITS_PER_KEY`]
/// and answers with more false positives rather than outgrow the trace.
pub const MAX_SHARE: u64 = 40;
/// Bits the file's filter keeps for each distinct key at least: it only
/// decides whether the chunks' filters are read at all.
pub const FILE_BITS_PER_KEY: u64 = 6;
/// The most keys a writer gathers for the file's filter (4 MiB of
/// hashes); a file with more (hundreds of MB of small packets) gets none,
/// and its queries read the chunks' filters.
pub const FILE_MAX_KEYS: usize = 1 << 19;
/// Hashes per key of the file's filter: two random writes a key where
/// four made closing a file of 2^20 keys cost a fifth of writing it.
pub const FILE_HASHES: u32 = 2;
/// Layout version of a filter.
pub const LAYOUT: u8 = 1;
/// A filter's header.
pub const HEADER_LEN: usize = 8;
/// The smallest filter: one 64-bit word.
const MIN_LOG2: u8 = 6;
/// The largest filter (2 MiB): a chunk is at most a few hundred KiB.
const MAX_LOG2: u8 = 24;

/// Kinds of key, hashed with their value.
const V4: u64 = 1 << 56;
const V6: u64 = 2 << 56;
const PORT: u64 = 3 << 56;
const PROTOCOL: u64 = 4 << 56;

/// MurmurHash3's 64-bit finalizer: every input bit moves every output bit,
/// so a key's two 32-bit halves (the positions' start and step) are
/// independent. A one-multiplication hash cost the writer no measurable
/// time less and gave three times the false positives (0.58% of the
/// chunks of a host query against 0.2%: bench/archive.md).
#[inline(always)]
fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// The key of an IPv4 address (as a big-endian integer).
#[inline]
pub fn key_v4(a: u32) -> u64 {
    mix(V4 | u64::from(a))
}

/// The key of an IPv6 address (as a big-endian integer).
#[inline]
pub fn key_v6(a: u128) -> u64 {
    mix(mix(V6 ^ (a >> 64) as u64) ^ a as u64)
}

/// The key of a TCP or UDP port, source or destination.
#[inline]
pub fn key_port(p: u16) -> u64 {
    mix(PORT | u64::from(p))
}

/// The key of an IP protocol (IPv6: the upper layer after extensions).
#[inline]
pub fn key_protocol(p: u8) -> u64 {
    mix(PROTOCOL | u64::from(p))
}

/// The bit positions of key `h` in a filter of `mask + 1` bits.
#[inline(always)]
fn positions(h: u64, k: u32, mask: u32) -> impl Iterator<Item = u32> {
    let (h1, h2) = (h as u32, (h >> 32) as u32 | 1);
    (0..k).map(move |i| h1.wrapping_add(i.wrapping_mul(h2)) & mask)
}

/// The keys of one chunk as the writer gathers them: their hashes, each
/// distinct one once as far as a small table of recent keys tells (a
/// flow's addresses, a busy port and the protocols repeat from packet to
/// packet), so that the filter is built at the end at the size its keys
/// need, in one pass over a few hundred bytes.
#[derive(Clone, Debug)]
pub struct ChunkKeys {
    hashes: Vec<u64>,
    /// The last key seen in each of 64 slots (by the hash's low bits).
    recent: [u64; 64],
    /// The most bits a filter may have: one a byte of the chunk.
    max_log2: u8,
    packets: u32,
    /// A packet's keys could not all be read: the chunk gets no filter.
    opaque: bool,
    /// Every chunk's keys so far, for the file's filter; `None` once a
    /// chunk has none (or past [`FILE_MAX_KEYS`]): no file filter then.
    file: Option<Vec<u64>>,
}

impl ChunkKeys {
    /// A builder for chunks of up to `chunk_bytes` bytes.
    pub fn new(chunk_bytes: usize) -> ChunkKeys {
        let bits = (chunk_bytes as u64).next_power_of_two();
        ChunkKeys {
            hashes: Vec::with_capacity(256),
            recent: [0; 64],
            max_log2: (bits.trailing_zeros() as u8).clamp(MIN_LOG2, MAX_LOG2),
            packets: 0,
            opaque: false,
            file: Some(Vec::new()),
        }
    }

    #[inline(always)]
    fn insert(&mut self, h: u64) {
        let slot = &mut self.recent[(h & 63) as usize];
        if *slot != h {
            *slot = h;
            self.hashes.push(h);
        }
    }
    /// Adds the keys of a packet of link type `link`.
    #[inline]
    pub fn add_packet(&mut self, link: LinkType, frame: &[u8]) {
        self.packets += 1;
        if self.opaque {
            return;
        }
        match wire::flow_bits(link, frame) {
            Some(f) => {
                if f.version == 4 {
                    self.insert(key_v4(f.src as u32));
                    self.insert(key_v4(f.dst as u32));
                } else {
                    self.insert(key_v6(f.src));
                    self.insert(key_v6(f.dst));
                }
                self.insert(key_protocol(f.protocol));
                match f.protocol {
                    6 | 17 => {
                        self.insert(key_port(f.src_port));
                        self.insert(key_port(f.dst_port));
                    }
                    // SCTP's ports are not read by the walk, and tcpdump's
                    // `port` matches them.
                    132 => self.opaque = true,
                    _ => {}
                }
            }
            None => self.not_ip(link, frame),
        }
    }

    /// A frame without an IP layer the walk could read: ARP's and RARP's
    /// addresses (tcpdump's `host` matches them), nothing for other
    /// protocols, and no filter for the chunk when the frame says IP but
    /// its header could not be read.
    fn not_ip(&mut self, link: LinkType, frame: &[u8]) {
        const ETHER_HEADER: usize = 14;
        if link != LinkType::Ethernet {
            self.opaque = true;
            return;
        }
        let Some(t) = frame.get(12..14) else {
            self.opaque = true;
            return;
        };
        match u16::from_be_bytes([t[0], t[1]]) {
            0x0806 | 0x8035 => {
                // Ethernet and IPv4 addresses: the sender's at 14, the
                // target's at 24 (RFC 826).
                let arp = &frame[ETHER_HEADER..];
                match (arp.get(4..6), arp.get(14..18), arp.get(24..28)) {
                    (Some([6, 4]), Some(s), Some(t)) => {
                        self.insert(key_v4(u32::from_be_bytes([s[0], s[1], s[2], s[3]])));
                        self.insert(key_v4(u32::from_be_bytes([t[0], t[1], t[2], t[3]])));
                    }
                    _ => self.opaque = true,
                }
            }
            0x0800 | 0x86dd | 0x8100 | 0x88a8 | 0x9100 => self.opaque = true,
            _ => {}
        }
    }

    /// The chunk's filter, the builder left empty for the next chunk:
    /// `None` for a chunk without packets or with a packet whose keys
    /// could not be read. The filter has [`BITS_PER_KEY`] bits for each key
    /// gathered, rounded up to a power of two (at most one a byte of the
    /// chunk).
    pub fn take(&mut self) -> Option<KeyFilter> {
        let had = self.packets > 0 && !self.opaque;
        if self.packets > 0 && self.opaque {
            self.file = None;
        }
        self.packets = 0;
        self.opaque = false;
        self.recent = [0; 64];
        if !had {
            self.hashes.clear();
            return None;
        }
        if let Some(file) = self.file.as_mut() {
            if file.len() + self.hashes.len() <= FILE_MAX_KEYS {
                file.extend_from_slice(&self.hashes);
            } else {
                self.file = None;
            }
        }
        let f = KeyFilter::build(&self.hashes, BITS_PER_KEY, HASHES, self.max_log2);
        self.hashes.clear();
        Some(f)
    }

    /// The file's filter, over every chunk's keys: `None` when a chunk had
    /// no filter of its own (a query must read that chunk whatever the
    /// file's filter says) or the file had too many keys. Built at twice
    /// [`FILE_BITS_PER_KEY`] bits for each key gathered (a flow's keys
    /// recur in many chunks), then halved while it keeps
    /// [`FILE_BITS_PER_KEY`] for each distinct key its bits say it holds.
    pub fn take_file(&mut self) -> Option<KeyFilter> {
        let file = self.file.replace(Vec::new())?;
        if file.is_empty() {
            return None;
        }
        let mut f = KeyFilter::build(&file, 2 * FILE_BITS_PER_KEY, FILE_HASHES, MAX_LOG2);
        let m = (1u64 << f.log2) as f64;
        let set: u32 = f.words.iter().map(|w| w.count_ones()).sum();
        let x = f64::from(set).min(m - 1.0);
        // Swamidass and Baldi's estimate of the distinct keys.
        let keys = (-(m / f64::from(f.hashes)) * (1.0 - x / m).ln()).ceil() as u64;
        while f.log2 > MIN_LOG2 && (1u64 << (f.log2 - 1)) >= FILE_BITS_PER_KEY * keys {
            f.halve();
        }
        Some(f)
    }
}

/// The number a file's filter has in place of a chunk's.
pub const FILE_RECORD: u64 = u64::MAX;
/// The file's filter is checked in blocks of this many bytes, each with a
/// checksum of its own, so that a query reads the blocks its keys fall in
/// and not the whole filter: a 55 MB file's filter is about 270 KB, and
/// reading and checking it whole was most of a host query over the files
/// it ruled out (bench/archive.md).
pub const FILE_BLOCK: usize = 4096;
/// The filter layout of the file's filter: bits in checksummed blocks.
pub const LAYOUT_BLOCKED: u8 = 2;
/// The sidecar's last 16 bytes once the writer closed it with a file
/// filter: the record's offset, then this.
pub const FOOTER_MAGIC: [u8; 8] = *b"KKEYFILE";
pub const FOOTER_LEN: usize = 16;

/// What binds a file's filter to its trace: a digest of the seek index's
/// chunk checksums (`crcs`, the end entry left out), as the writer
/// appended them.
pub fn chunks_digest(crcs: impl Iterator<Item = u32>) -> u32 {
    crcs.fold(ChunksDigest::default(), ChunksDigest::with)
        .value()
}

/// [`chunks_digest`] kept as the chunks are appended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunksDigest(u64);

impl Default for ChunksDigest {
    fn default() -> ChunksDigest {
        ChunksDigest(0x9e37_79b9)
    }
}

impl ChunksDigest {
    /// The digest with one more chunk checksum.
    pub fn with(self, crc: u32) -> ChunksDigest {
        ChunksDigest(mix(self.0 ^ u64::from(crc)))
    }

    pub fn value(self) -> u32 {
        self.0 as u32
    }
}

/// A chunk's Bloom filter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyFilter {
    words: Vec<u64>,
    log2: u8,
    hashes: u32,
}

impl KeyFilter {
    /// A filter of `k` hashes holding the keys `hashes`, `bits_per_key`
    /// bits for each rounded up to a power of two (at least one word, at
    /// most 2^`max_log2` bits).
    fn build(hashes: &[u64], bits_per_key: u64, k: u32, max_log2: u8) -> KeyFilter {
        let want = (hashes.len() as u64).saturating_mul(bits_per_key);
        let log2 = (want.next_power_of_two().trailing_zeros() as u8).clamp(MIN_LOG2, max_log2);
        let mut f = KeyFilter {
            words: vec![0; 1 << (log2 - 6)],
            log2,
            hashes: k,
        };
        for &h in hashes {
            f.insert(h);
        }
        f
    }

    /// Whether a packet of the chunk may have key `h` (a false positive
    /// now and then; never a false negative).
    #[inline]
    pub fn may_contain(&self, h: u64) -> bool {
        let mask = ((1u64 << self.log2) - 1) as u32;
        positions(h, self.hashes, mask)
            .all(|b| self.words[(b >> 6) as usize] & (1 << (b & 63)) != 0)
    }

    #[inline(always)]
    fn insert(&mut self, h: u64) {
        let mask = ((1u64 << self.log2) - 1) as u32;
        for b in positions(h, self.hashes, mask) {
            self.words[(b >> 6) as usize] |= 1 << (b & 63);
        }
    }

    /// Halves the filter while it takes more than [`MAX_SHARE`] of
    /// `stored_bytes` (a Bloom filter of 2^n bits folds into 2^(n-1) by
    /// OR-ing its halves, the positions being taken modulo a power of two):
    /// more false positives, never a false negative.
    pub fn fold(&mut self, stored_bytes: u64) {
        let budget_bits = (stored_bytes / MAX_SHARE).saturating_mul(8);
        while self.log2 > MIN_LOG2 && (1u64 << self.log2) > budget_bits {
            self.halve();
        }
    }

    fn halve(&mut self) {
        let n = self.words.len() / 2;
        let (lo, hi) = self.words.split_at_mut(n);
        for (a, b) in lo.iter_mut().zip(hi.iter()) {
            *a |= *b;
        }
        self.words.truncate(n);
        self.log2 -= 1;
    }

    /// The encoded filter's length.
    pub fn encoded_len(&self) -> usize {
        HEADER_LEN + self.words.len() * 8
    }

    /// Appends the encoding (see the module's layout).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&[0, 0, 0, 0, LAYOUT, self.hashes as u8, self.log2, 0]);
        for w in &self.words {
            out.extend_from_slice(&w.to_le_bytes());
        }
        let sum = crate::index::chunk_checksum(&out[start + 4..]);
        out[start..start + 4].copy_from_slice(&sum.to_le_bytes());
    }

    /// Decodes a filter of exactly `b`'s length; damage (a checksum that
    /// fails, a length or field out of range) is an error, never a filter
    /// that says "absent" wrongly.
    pub fn decode(b: &[u8]) -> Result<KeyFilter> {
        let v = view(b, true)?;
        Ok(KeyFilter {
            words: v
                .bits
                .chunks_exact(8)
                .map(|w| u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]))
                .collect(),
            log2: v.log2,
            hashes: v.hashes,
        })
    }
}

/// What a packet must have for a query to match it, as far as the key
/// index can tell: a formula over keys. [`KeyQuery::Any`] is a condition
/// the index cannot check (a negation, a net, a byte offset): every chunk
/// may match it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyQuery {
    Any,
    Key(u64),
    And(Box<KeyQuery>, Box<KeyQuery>),
    Or(Box<KeyQuery>, Box<KeyQuery>),
}

impl KeyQuery {
    /// Both; `Any` drops out.
    pub fn and(self, o: KeyQuery) -> KeyQuery {
        match (self, o) {
            (KeyQuery::Any, x) | (x, KeyQuery::Any) => x,
            (a, b) => KeyQuery::And(Box::new(a), Box::new(b)),
        }
    }

    /// Either; `Any` takes over.
    pub fn or(self, o: KeyQuery) -> KeyQuery {
        match (self, o) {
            (KeyQuery::Any, _) | (_, KeyQuery::Any) => KeyQuery::Any,
            (a, b) => KeyQuery::Or(Box::new(a), Box::new(b)),
        }
    }

    /// Whether the index can narrow a read at all.
    pub fn narrows(&self) -> bool {
        !matches!(self, KeyQuery::Any)
    }

    /// Whether a chunk with `filter` may hold a matching packet; a chunk
    /// without one (`None`) always may.
    pub fn may_match(&self, filter: Option<&KeyFilter>) -> bool {
        match filter {
            Some(f) => self.may_match_with(&|h| f.may_contain(h)),
            None => true,
        }
    }

    /// Whether a chunk whose filter says `contains` of each key may hold a
    /// matching packet.
    pub fn may_match_with(&self, contains: &impl Fn(u64) -> bool) -> bool {
        match self {
            KeyQuery::Any => true,
            KeyQuery::Key(h) => contains(*h),
            KeyQuery::And(a, b) => a.may_match_with(contains) && b.may_match_with(contains),
            KeyQuery::Or(a, b) => a.may_match_with(contains) || b.may_match_with(contains),
        }
    }
}

/// The key sidecar's extension, appended to the trace's full name beside
/// the seek index's `.kidx`.
pub const EXTENSION: &str = "kkeys";
/// The sidecar's magic and layout version.
pub const MAGIC: [u8; 4] = *b"KKEY";
/// Version 2 keeps the file's filter in checksummed blocks
/// ([`FILE_BLOCK`]); version 1 checked it whole.
pub const VERSION: u16 = 2;
/// The sidecar's header: magic, version, 2 bytes reserved.
pub const FILE_HEADER_LEN: usize = 8;
/// A record's header: its checksum, the filter's length, the chunk's
/// number (its entry's place in the seek index) and the chunk's checksum
/// (the entry's), 4 bytes reserved.
pub const RECORD_HEADER_LEN: usize = 24;

/// The key sidecar's first bytes: magic, version, 2 bytes reserved.
pub fn file_header() -> [u8; FILE_HEADER_LEN] {
    let v = VERSION.to_le_bytes();
    [MAGIC[0], MAGIC[1], MAGIC[2], MAGIC[3], v[0], v[1], 0, 0]
}

/// The key sidecar of a trace: `<trace path>.kkeys`.
///
/// It is a file of its own, not more fields of the seek index, so that
/// the readers that want only time (a window, a split read) read the 64
/// bytes of each entry and not the filters, about 30 times as many; and a
/// seek index without it (an older writer, `--no-index`) serves time as
/// before. Each record names the chunk by its place in the seek index and
/// by the chunk's checksum there, so a filter is used only for the chunk
/// it was made of: a stale, damaged or foreign sidecar costs reads, never
/// packets.
pub fn keys_path(trace: &std::path::Path) -> std::path::PathBuf {
    crate::index::sidecar_path(trace, EXTENSION)
}

/// Encodes one record: a chunk's filter.
pub fn encode_record(out: &mut Vec<u8>, chunk: u64, chunk_crc: u32, f: &KeyFilter) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&(f.encoded_len() as u32).to_le_bytes());
    out.extend_from_slice(&chunk.to_le_bytes());
    out.extend_from_slice(&chunk_crc.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    f.encode(out);
    let sum = crate::index::chunk_checksum(&out[start + 4..]);
    out[start..start + 4].copy_from_slice(&sum.to_le_bytes());
}

/// Encodes the file's filter `f`, bound to its seek index by `digest`
/// ([`chunks_digest`]): the record header (its checksum covering the
/// header, the filter's header and the block table, not the bits), the
/// filter's header (layout [`LAYOUT_BLOCKED`]), one checksum for each
/// [`FILE_BLOCK`] bytes of bits, then the bits.
pub fn encode_file_record(out: &mut Vec<u8>, digest: u32, f: &KeyFilter) {
    let bytes = f.words.len() * 8;
    let blocks = bytes.div_ceil(FILE_BLOCK);
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&((HEADER_LEN + 4 * blocks + bytes) as u32).to_le_bytes());
    out.extend_from_slice(&FILE_RECORD.to_le_bytes());
    out.extend_from_slice(&digest.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&[0, 0, 0, 0, LAYOUT_BLOCKED, f.hashes as u8, f.log2, 0]);
    let table = out.len();
    out.resize(table + 4 * blocks, 0);
    let bits = out.len();
    for w in &f.words {
        out.extend_from_slice(&w.to_le_bytes());
    }
    for i in 0..blocks {
        let end = (bits + (i + 1) * FILE_BLOCK).min(out.len());
        let sum = crate::index::chunk_checksum(&out[bits + i * FILE_BLOCK..end]);
        out[table + 4 * i..table + 4 * i + 4].copy_from_slice(&sum.to_le_bytes());
    }
    let sum = crate::index::chunk_checksum(&out[start + 4..bits]);
    out[start..start + 4].copy_from_slice(&sum.to_le_bytes());
}

/// Bytes that can be read at an offset: a sidecar file, or its bytes in
/// memory (tests, the fuzz target).
pub trait ReadAt {
    /// Fills `buf` from byte `at`; an error where the bytes are not all
    /// there.
    fn read_at(&self, buf: &mut [u8], at: u64) -> std::io::Result<()>;
}

impl ReadAt for std::fs::File {
    fn read_at(&self, buf: &mut [u8], at: u64) -> std::io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(self, buf, at)
    }
}

impl ReadAt for [u8] {
    fn read_at(&self, buf: &mut [u8], at: u64) -> std::io::Result<()> {
        let src = usize::try_from(at)
            .ok()
            .and_then(|a| self.get(a..a.checked_add(buf.len())?))
            .ok_or(std::io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

/// The file's filter as its record's header and block table describe it,
/// its bits read a block at a time as keys are asked of it
/// ([`FileFilter::may_contain`]), each block checked against its checksum.
#[derive(Debug)]
pub struct FileFilter<'s, S: ReadAt + ?Sized> {
    source: &'s S,
    /// The digest of the seek index the filter was made with.
    pub digest: u32,
    /// Where the record starts: the chunks' records end there.
    pub record_at: u64,
    hashes: u32,
    log2: u8,
    /// Where the bits start in the source, and each block's checksum.
    bits_at: u64,
    sums: Vec<u32>,
    /// The blocks read so far: their number and bytes, `None` for a block
    /// that could not be read or failed its checksum.
    blocks: std::cell::RefCell<Vec<(usize, Option<Vec<u8>>)>>,
    /// A block was damaged (its keys were taken as present).
    pub damaged: std::cell::Cell<bool>,
}

/// What is wrong with a file filter's record, as an error.
fn bad_file_record(what: &str) -> Error {
    Error::Format {
        offset: 0,
        what: format!("key index: the file's filter: {what}"),
    }
}

impl<'s, S: ReadAt + ?Sized> FileFilter<'s, S> {
    /// The file's filter of the sidecar `source` (`len` bytes), found by
    /// its footer; `Ok(None)` when the sidecar has none (a writer that did
    /// not close it, or a file with too many keys). Reads the footer, the
    /// record's header and the block table, and checks them.
    pub fn open(source: &'s S, len: u64) -> Result<Option<FileFilter<'s, S>>> {
        let mut foot = [0u8; FOOTER_LEN];
        let Some(foot_at) = len.checked_sub(FOOTER_LEN as u64) else {
            return Ok(None);
        };
        if source.read_at(&mut foot, foot_at).is_err() || foot[8..] != FOOTER_MAGIC {
            return Ok(None);
        }
        let at = u64::from_le_bytes([
            foot[0], foot[1], foot[2], foot[3], foot[4], foot[5], foot[6], foot[7],
        ]);
        let head_len = (RECORD_HEADER_LEN + HEADER_LEN) as u64;
        if at < FILE_HEADER_LEN as u64 || at.saturating_add(head_len) > foot_at {
            return Err(bad_file_record(&format!("its footer points to byte {at}")));
        }
        let mut head = [0u8; RECORD_HEADER_LEN + HEADER_LEN];
        source
            .read_at(&mut head, at)
            .map_err(|e| bad_file_record(&e.to_string()))?;
        let u32_at =
            |o: usize| u32::from_le_bytes([head[o], head[o + 1], head[o + 2], head[o + 3]]);
        let (layout, hashes, log2) = (head[28], u32::from(head[29]), head[30]);
        if head[8..16] != FILE_RECORD.to_le_bytes() || layout != LAYOUT_BLOCKED {
            return Err(bad_file_record(&format!(
                "chunk field {:02x?}, layout {layout}",
                &head[8..16]
            )));
        }
        if !(1..=16).contains(&hashes) || !(MIN_LOG2..=MAX_LOG2).contains(&log2) {
            return Err(bad_file_record(&format!("{hashes} hashes, 2^{log2} bits")));
        }
        let bytes = (1usize << log2) / 8;
        let blocks = bytes.div_ceil(FILE_BLOCK);
        let body = HEADER_LEN + 4 * blocks + bytes;
        if u32_at(4) as usize != body || at + (RECORD_HEADER_LEN + body) as u64 != foot_at {
            return Err(bad_file_record(&format!(
                "{} bytes for 2^{log2} bits",
                u32_at(4)
            )));
        }
        let mut covered = head[4..].to_vec();
        covered.resize(head.len() - 4 + 4 * blocks, 0);
        source
            .read_at(&mut covered[head.len() - 4..], at + head_len)
            .map_err(|e| bad_file_record(&e.to_string()))?;
        if crate::index::chunk_checksum(&covered) != u32_at(0) {
            return Err(bad_file_record("fails its checksum"));
        }
        let sums = covered[head.len() - 4..]
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        Ok(Some(FileFilter {
            source,
            digest: u32_at(16),
            record_at: at,
            hashes,
            log2,
            bits_at: at + head_len + 4 * blocks as u64,
            sums,
            blocks: std::cell::RefCell::new(Vec::new()),
            damaged: std::cell::Cell::new(false),
        }))
    }

    /// Whether the file may have key `h`; a key whose bits lie in a damaged
    /// block may (and [`FileFilter::damaged`] says so).
    pub fn may_contain(&self, h: u64) -> bool {
        let mask = ((1u64 << self.log2) - 1) as u32;
        positions(h, self.hashes, mask).all(|b| self.bit(b))
    }

    fn bit(&self, b: u32) -> bool {
        let byte = (b >> 3) as usize;
        let (block, within) = (byte / FILE_BLOCK, byte % FILE_BLOCK);
        let mut blocks = self.blocks.borrow_mut();
        let i = match blocks.iter().position(|(n, _)| *n == block) {
            Some(i) => i,
            None => {
                let total = (1usize << self.log2) / 8;
                let mut buf = vec![0u8; (total - block * FILE_BLOCK).min(FILE_BLOCK)];
                let at = self.bits_at + (block * FILE_BLOCK) as u64;
                let good = self.source.read_at(&mut buf, at).is_ok()
                    && crate::index::chunk_checksum(&buf) == self.sums[block];
                blocks.push((block, good.then_some(buf)));
                blocks.len() - 1
            }
        };
        match &blocks[i].1 {
            Some(bytes) => bytes[within] & (1 << (b & 7)) != 0,
            None => {
                self.damaged.set(true);
                true
            }
        }
    }
}

/// A filter as it lies in a sidecar's bytes, read where it is.
#[derive(Clone, Copy, Debug)]
pub struct FilterView<'a> {
    bits: &'a [u8],
    log2: u8,
    hashes: u32,
}

impl FilterView<'_> {
    /// As [`KeyFilter::may_contain`]: the words are little-endian, so bit
    /// `b` is bit `b % 8` of byte `b / 8`.
    #[inline]
    pub fn may_contain(&self, h: u64) -> bool {
        let mask = ((1u64 << self.log2) - 1) as u32;
        positions(h, self.hashes, mask).all(|b| self.bits[(b >> 3) as usize] & (1 << (b & 7)) != 0)
    }
}

/// Checks a filter's encoding (as [`KeyFilter::decode`]) without copying
/// its bits; its own checksum only where `sum` asks (a sidecar's record
/// has a checksum over the filter already: checking both was a tenth of a
/// host query's time).
fn view(b: &[u8], sum: bool) -> Result<FilterView<'_>> {
    let bad = |what: &str| Error::Format {
        offset: 0,
        what: format!("key filter: {what}"),
    };
    if b.len() < HEADER_LEN + 8 {
        return Err(bad("cut short"));
    }
    let own = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    if sum && crate::index::chunk_checksum(&b[4..]) != own {
        return Err(bad("fails its checksum"));
    }
    let (layout, hashes, log2) = (b[4], u32::from(b[5]), b[6]);
    if layout != LAYOUT {
        return Err(bad(&format!("layout {layout} (expected {LAYOUT})")));
    }
    if !(1..=16).contains(&hashes) || !(MIN_LOG2..=MAX_LOG2).contains(&log2) {
        return Err(bad(&format!("{hashes} hashes, 2^{log2} bits")));
    }
    if b.len() != HEADER_LEN + (1usize << log2) / 8 {
        return Err(bad(&format!("{} bytes for 2^{log2} bits", b.len())));
    }
    Ok(FilterView {
        bits: &b[HEADER_LEN..],
        log2,
        hashes,
    })
}

/// One record of a sidecar: a chunk's number, its checksum, its filter.
#[derive(Clone, Copy, Debug)]
pub struct KeyRecord<'a> {
    pub chunk: u64,
    pub chunk_crc: u32,
    pub filter: FilterView<'a>,
}

/// The records of a sidecar's bytes, in order, as far as they can be
/// trusted: damage ends them where it is, described in
/// [`KeyRecords::problem`] (never an error: the chunks without a filter
/// are read), and a torn last record (a writer interrupted, or still
/// writing) in [`KeyRecords::torn`].
#[derive(Debug)]
pub struct KeyRecords<'a> {
    bytes: &'a [u8],
    at: usize,
    pub problem: Option<String>,
    pub torn: bool,
}

/// The records of the sidecar `bytes`.
pub fn records(bytes: &[u8]) -> KeyRecords<'_> {
    let mut r = KeyRecords {
        bytes,
        at: FILE_HEADER_LEN,
        problem: None,
        torn: false,
    };
    match bytes.get(..FILE_HEADER_LEN) {
        Some(h) if h[..4] == MAGIC && u16::from_le_bytes([h[4], h[5]]) == VERSION => {}
        Some(h) if h[..4] == MAGIC => {
            r.problem = Some(format!(
                "key index version {} (this kansoku reads {VERSION})",
                u16::from_le_bytes([h[4], h[5]])
            ));
            r.at = bytes.len();
        }
        _ => {
            r.problem = Some("not a kansoku key index".into());
            r.at = bytes.len();
        }
    }
    r
}

impl<'a> Iterator for KeyRecords<'a> {
    type Item = KeyRecord<'a>;

    fn next(&mut self) -> Option<KeyRecord<'a>> {
        let (bytes, at) = (self.bytes, self.at);
        if at >= bytes.len() {
            return None;
        }
        if bytes.len() - at == FOOTER_LEN && bytes[at + 8..] == FOOTER_MAGIC {
            self.at = bytes.len();
            return None;
        }
        let Some(h) = bytes.get(at..at + RECORD_HEADER_LEN) else {
            self.torn = true;
            self.at = bytes.len();
            return None;
        };
        if h[8..16] == FILE_RECORD.to_le_bytes() {
            // The file's filter, last: checked as a query reads it.
            self.at = bytes.len();
            match FileFilter::open(bytes, bytes.len() as u64) {
                Ok(Some(_)) => {}
                Ok(None) => self.torn = true,
                Err(e) => self.problem = Some(format!("the record at byte {at}: {e}")),
            }
            return None;
        }
        let u32_at = |o: usize| u32::from_le_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
        let len = u32_at(4) as usize;
        let Some(body) = bytes.get(at + 4..at + RECORD_HEADER_LEN + len) else {
            self.torn = true;
            self.at = bytes.len();
            return None;
        };
        self.at = bytes.len();
        if crate::index::chunk_checksum(body) != u32_at(0) {
            self.problem = Some(format!("the record at byte {at} fails its checksum"));
            return None;
        }
        let filter = match view(&body[RECORD_HEADER_LEN - 4..], false) {
            Ok(f) => f,
            Err(e) => {
                self.problem = Some(format!("the record at byte {at}: {e}"));
                return None;
            }
        };
        self.at = at + RECORD_HEADER_LEN + len;
        Some(KeyRecord {
            chunk: u64::from_le_bytes([h[8], h[9], h[10], h[11], h[12], h[13], h[14], h[15]]),
            chunk_crc: u32_at(16),
            filter,
        })
    }
}

/// Which of a trace's chunks a query must read, by its key sidecar.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selection {
    /// Per chunk (in the seek index's order): whether a packet of it may
    /// match; `true` for every chunk without a filter it can trust.
    pub may_match: Vec<bool>,
    /// Chunks with a filter that rules them out, and chunks without one.
    pub ruled_out: u64,
    pub without_filter: u64,
    /// What was wrong with the sidecar (missing, damaged, another
    /// version), if anything.
    pub problem: Option<String>,
}

thread_local! {
    /// The sidecar's bytes, read into memory kept from file to file: a
    /// directory of a few dozen traces has a few dozen sidecars, and fresh
    /// memory for each cost more than reading them (page faults).
    static SIDECAR: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The chunks of the trace at `trace`, whose seek index entries' chunk
/// checksums are `crcs` (`None` for a chunk no filter may rule out) and
/// whose entries' digest is `digest` ([`chunks_digest`]), that `query`
/// must read by its key sidecar. The file's filter is read first: when it
/// rules the whole file out, the chunks' filters are not read at all.
pub fn select(
    trace: &std::path::Path,
    crcs: &[Option<u32>],
    digest: u32,
    query: &KeyQuery,
) -> Selection {
    let mut sel = Selection {
        may_match: vec![true; crcs.len()],
        without_filter: crcs.len() as u64,
        ..Selection::default()
    };
    let path = keys_path(trace);
    let file = std::fs::File::open(&path).and_then(|f| Ok((f.metadata()?.len(), f)));
    let (len, mut file) = match file {
        Ok(x) => x,
        Err(e) => {
            sel.problem = Some(if e.kind() == std::io::ErrorKind::NotFound {
                "no key index".to_string()
            } else {
                format!("{}: {e}", path.display())
            });
            return sel;
        }
    };
    let file_filter = FileFilter::open(&file, len);
    let (ruled_out, chunks_end) = match &file_filter {
        Ok(Some(f)) if f.digest == digest => {
            let out = !query.may_match_with(&|h| f.may_contain(h));
            if f.damaged.get() {
                sel.problem = Some(format!(
                    "{}: a block of the file's filter is damaged",
                    path.display()
                ));
            }
            (out, f.record_at)
        }
        Ok(Some(f)) => (false, f.record_at),
        Ok(None) => (false, len),
        Err(e) => {
            sel.problem = Some(format!("{}: {e}", path.display()));
            (false, len)
        }
    };
    if ruled_out {
        for (m, c) in sel.may_match.iter_mut().zip(crcs) {
            *m = c.is_none();
        }
        sel.ruled_out = crcs.iter().filter(|c| c.is_some()).count() as u64;
        sel.without_filter -= sel.ruled_out;
        return sel;
    }
    SIDECAR.with(|buf| {
        let mut buf = buf.borrow_mut();
        buf.clear();
        let read = {
            use std::io::Read;
            (&mut file).take(chunks_end).read_to_end(&mut buf)
        };
        if let Err(e) = read {
            sel.problem = Some(format!("{}: {e}", path.display()));
            return;
        }
        let mut recs = records(&buf);
        let mut stale = 0u64;
        for r in recs.by_ref() {
            let Some(i) = usize::try_from(r.chunk).ok().filter(|&i| i < crcs.len()) else {
                continue;
            };
            // A filter made of another chunk (a stale sidecar, or another
            // file's) is not used.
            if crcs[i] != Some(r.chunk_crc) {
                stale += 1;
                continue;
            }
            let m = query.may_match_with(&|h| r.filter.may_contain(h));
            sel.may_match[i] = m;
            sel.ruled_out += u64::from(!m);
            sel.without_filter -= 1;
        }
        sel.problem = recs.problem.or(sel.problem.take()).or_else(|| {
            (stale > 0).then(|| format!("{stale} filters made of other chunks than the trace's"))
        });
    });
    sel
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter_of(keys: &[u64], chunk_bytes: usize) -> KeyFilter {
        let mut b = ChunkKeys::new(chunk_bytes);
        for &k in keys {
            b.insert(k);
        }
        b.packets = 1;
        b.take().unwrap()
    }

    #[test]
    fn a_filter_never_forgets_a_key_and_is_sized_by_its_keys() {
        let keys: Vec<u64> = (0..500u32).map(|i| key_v4(0x0a00_0000 + i * 7)).collect();
        // Repeats from packet to packet are gathered once.
        let twice: Vec<u64> = keys.iter().flat_map(|&k| [k, k]).collect();
        let f = filter_of(&twice, 32 * 1024);
        // 500 keys at 16 bits: 8,000, rounded up to 8,192 bits.
        assert_eq!(f.log2, 13);
        assert!(keys.iter().all(|&k| f.may_contain(k)));
        let absent = (0..100_000u32)
            .filter(|i| f.may_contain(key_v4(0xc000_0000 + i)))
            .count();
        assert!(absent < 500, "{absent} false positives in 100,000");
        // No more bits than the chunk has bytes.
        assert_eq!(filter_of(&keys, 1024).log2, 10);
        // The stored size caps it: 40 KB stored leaves 1 KB of filter.
        let mut g = filter_of(&keys, 32 * 1024);
        g.fold(40_000);
        assert!(g.encoded_len() <= 1_000 + HEADER_LEN, "{}", g.encoded_len());
        assert!(keys.iter().all(|&k| g.may_contain(k)));
    }

    #[test]
    fn encoding_round_trips_and_damage_is_refused() {
        let f = filter_of(&[key_port(80), key_v6(1), key_protocol(6)], 4096);
        let mut b = Vec::new();
        f.encode(&mut b);
        assert_eq!(b.len(), f.encoded_len());
        assert_eq!(KeyFilter::decode(&b).unwrap(), f);
        for cut in 0..b.len() {
            assert!(KeyFilter::decode(&b[..cut]).is_err(), "cut at {cut}");
        }
        for i in 0..b.len() {
            let mut d = b.clone();
            d[i] ^= 0x10;
            assert!(KeyFilter::decode(&d).is_err(), "byte {i} flipped");
        }
    }

    #[test]
    fn queries_keep_what_may_match() {
        let f = filter_of(&[key_v4(1), key_port(80)], 4096);
        let host = KeyQuery::Key(key_v4(1));
        let other = KeyQuery::Key(key_v4(2));
        let port = KeyQuery::Key(key_port(80));
        assert!(host.clone().and(port.clone()).may_match(Some(&f)));
        assert!(!host.clone().and(other.clone()).may_match(Some(&f)));
        assert!(other.clone().or(port).may_match(Some(&f)));
        assert!(!other.clone().and(KeyQuery::Any).may_match(Some(&f)));
        assert!(other.clone().or(KeyQuery::Any).may_match(Some(&f)));
        assert!(other.may_match(None));
        assert!(!KeyQuery::Any.narrows());
    }

    #[test]
    fn a_sidecar_keeps_what_it_can_trust() {
        let f = filter_of(&[key_v4(9)], 4096);
        let mut b = file_header().to_vec();
        encode_record(&mut b, 0, 11, &f);
        let one = b.len();
        encode_record(&mut b, 2, 22, &f);
        let all: Vec<(u64, u32)> = records(&b).map(|r| (r.chunk, r.chunk_crc)).collect();
        assert_eq!(all, [(0, 11), (2, 22)]);
        let r = records(&b).next().unwrap();
        assert!(r.filter.may_contain(key_v4(9)) && !r.filter.may_contain(key_v4(10)));
        // Cut anywhere in the second record: the first stands, torn.
        for cut in one + 1..b.len() {
            let mut r = records(&b[..cut]);
            assert_eq!(r.by_ref().count(), 1, "cut at {cut}");
            assert!(r.torn && r.problem.is_none(), "cut at {cut}");
        }
        // A flipped byte in the second record: the first stands, and the
        // damage is said (or the record reads as torn: a longer length).
        for i in one..b.len() {
            let mut d = b.clone();
            d[i] ^= 1;
            let mut r = records(&d);
            assert_eq!(r.by_ref().count(), 1, "byte {i}");
            assert!(r.problem.is_some() || r.torn, "byte {i}");
        }
        let mut v9 = MAGIC.to_vec();
        v9.extend_from_slice(&[9, 0, 0, 0]);
        assert!(records(&v9).problem.unwrap().contains("version 9"));
        assert!(records(b"").problem.is_some());
    }

    #[test]
    fn the_file_filter_is_read_and_checked_by_the_blocks_a_query_needs() {
        // 2^17 bits: four blocks.
        let keys: Vec<u64> = (0..8000).map(key_v4).collect();
        let f = KeyFilter::build(&keys, 16, FILE_HASHES, MAX_LOG2);
        assert_eq!(f.log2, 17);
        let mut b = file_header().to_vec();
        encode_record(&mut b, 0, 11, &filter_of(&[key_v4(1)], 4096));
        let at = b.len() as u64;
        encode_file_record(&mut b, 77, &f);
        b.extend_from_slice(&at.to_le_bytes());
        b.extend_from_slice(&FOOTER_MAGIC);
        let len = b.len() as u64;
        let ff = FileFilter::open(&b[..], len).unwrap().unwrap();
        assert_eq!((ff.digest, ff.record_at), (77, at));
        assert!(keys.iter().all(|&k| ff.may_contain(k)));
        let absent = (10_000..20_000)
            .filter(|&a| !ff.may_contain(key_v4(a)))
            .count();
        assert!(absent > 9_000, "{absent}");
        // One key asks for at most two blocks.
        let one = FileFilter::open(&b[..], len).unwrap().unwrap();
        one.may_contain(key_v4(5));
        assert!((1..=2).contains(&one.blocks.borrow().len()));
        // The chunks' records end where the file's begins.
        let mut r = records(&b);
        assert_eq!(r.by_ref().map(|r| r.chunk).collect::<Vec<_>>(), [0]);
        assert!(r.problem.is_none() && !r.torn);
        // A flipped bit in the bits: the keys of its block read as present,
        // and the filter says it is damaged; elsewhere still absent.
        let bits_at = at as usize + RECORD_HEADER_LEN + HEADER_LEN + 4 * 4;
        let mut d = b.clone();
        d[bits_at + FILE_BLOCK + 7] ^= 0x10;
        let ff = FileFilter::open(&d[..], len).unwrap().unwrap();
        assert!(keys.iter().all(|&k| ff.may_contain(k)));
        assert!(ff.damaged.get());
        assert!((10_000..20_000).any(|a| !ff.may_contain(key_v4(a))));
        // A flipped byte in the header or the block table: refused.
        for i in at as usize..bits_at {
            let mut d = b.clone();
            d[i] ^= 0x04;
            assert!(FileFilter::open(&d[..], len).is_err(), "byte {i}");
            let mut r = records(&d);
            assert_eq!(r.by_ref().count(), 1, "byte {i}");
            assert!(r.problem.is_some(), "byte {i}");
        }
        // Cut anywhere: no file filter, or an error; never a panic.
        for cut in 0..b.len() {
            let r = FileFilter::open(&b[..cut], cut as u64);
            assert!(!matches!(r, Ok(Some(_))), "cut at {cut}");
        }
    }

    #[test]
    fn selection_uses_only_the_filters_of_the_chunks_they_were_made_of() {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("t.pcap");
        let mut b = file_header().to_vec();
        for (chunk, crc) in [(0, 10), (1, 11), (2, 12), (7, 17)] {
            encode_record(
                &mut b,
                chunk,
                crc,
                &filter_of(&[key_port(chunk as u16)], 4096),
            );
        }
        std::fs::write(keys_path(&trace), &b).unwrap();
        let q = KeyQuery::Key(key_port(1));
        // Chunk 2's entry has another checksum (rewritten since); chunk 3
        // has no record; chunk 7 is past the index.
        let crcs = [Some(10), Some(11), Some(99), Some(13)];
        let s = select(&trace, &crcs, 0, &q);
        assert_eq!(s.may_match, [false, true, true, true]);
        assert_eq!((s.ruled_out, s.without_filter), (1, 2));
        assert_eq!(
            s.problem.as_deref(),
            Some("1 filters made of other chunks than the trace's")
        );
        std::fs::remove_file(keys_path(&trace)).unwrap();
        let s = select(&trace, &crcs, 0, &q);
        assert_eq!(s.may_match, [true; 4]);
        assert_eq!(s.problem.as_deref(), Some("no key index"));
    }

    #[test]
    fn arp_addresses_are_keys_and_a_cut_ip_header_leaves_no_filter() {
        let mut arp = vec![0xff; 12];
        arp.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
        arp.extend_from_slice(&[2; 6]);
        arp.extend_from_slice(&[10, 0, 0, 1]);
        arp.extend_from_slice(&[0; 6]);
        arp.extend_from_slice(&[10, 0, 0, 2]);
        let mut b = ChunkKeys::new(4096);
        b.add_packet(LinkType::Ethernet, &arp);
        let f = b.take().unwrap();
        assert!(f.may_contain(key_v4(0x0a00_0001)) && f.may_contain(key_v4(0x0a00_0002)));
        let mut cut = vec![0; 12];
        cut.extend_from_slice(&[0x08, 0x00, 0x45, 0]);
        b.add_packet(LinkType::Ethernet, &cut);
        assert!(b.take().is_none());
        // A frame of another protocol (LLDP) adds nothing and hides nothing.
        let mut lldp = vec![0; 12];
        lldp.extend_from_slice(&[0x88, 0xcc, 0, 0]);
        b.add_packet(LinkType::Ethernet, &lldp);
        assert!(b.take().is_some());
    }
}
