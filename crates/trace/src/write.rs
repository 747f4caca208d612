//! The trace writer: records in, one compressed pcap or pcapng file out.
//!
//! Records are appended to a block buffer; when it holds `block_size` bytes
//! (never splitting a record) the block becomes a *chunk*: it is compressed,
//! written to the sink in one `write`, and then described by one entry in
//! the sidecar seek index ([`crate::index`]), whose entries are written in
//! batches, at every [`TraceWriter::flush_block`] and at the end. Shimizu et
//! al. 2006 found that compressing blocks of packets, not single packets, is what
//! makes compression pay.
//!
//! Crash safety follows from that order: the file only ever grows by whole
//! chunks, and each chunk is decodable once it is in the file (an LZ4 frame
//! of independent blocks, a zstd frame flushed at each chunk, gzip members),
//! so a writer killed at any point leaves a trace readable up to its last
//! complete chunk. [`TraceWriter::finish`] writes the end of the stream.
//!
//! The file header (pcap header, or pcapng SHB and IDBs) is a chunk of its
//! own, and in pcapng every later run of non-packet blocks starts a new chunk
//! flagged as metadata, so a windowed read ([`crate::window`]) can replay all
//! metadata before the packets it decodes.
//!
//! With [`WriterConfig::threads`] of 2 or more, chunks are encoded by a pool
//! of compression threads while the caller goes on gathering records; the
//! caller still writes each chunk, in order, in one `write` followed by its
//! index entry, so the file, the index and the crash guarantee are the same
//! as with one thread.

use std::fmt;
use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::str::FromStr;

use wire::LinkType;

use crate::compress::economy::Economy;
use crate::compress::pool::{Done, EncoderPool, Job, Work};
use crate::compress::{check_level, ChunkEncoder, ChunkReport};
use crate::error::{Error, Result};
use crate::format::{pcap, pcapng, Codec};
use crate::index::{self, IndexEntry, IndexWriter, FLAG_END, FLAG_METADATA, FLAG_RAW};
use crate::keys::{ChunkKeys, KeyFilter};
use crate::record::{Interface, Packet, PacketKind, Record, Section, TsResolution};

mod coalesced;
use coalesced::Coalesced;

/// The trace format inside the compression.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum OutputFormat {
    /// Classic pcap, little-endian, version 2.4.
    #[default]
    Pcap,
    /// pcapng, little-endian.
    Pcapng,
}

impl OutputFormat {
    /// The file-name extension (`.pcap`, `.pcapng`).
    pub fn extension(self) -> &'static str {
        match self {
            OutputFormat::Pcap => ".pcap",
            OutputFormat::Pcapng => ".pcapng",
        }
    }
}

/// What a file's name says of its contents: the format and the codec, each
/// if the name says it. `x.pcap.lz4`: pcap, LZ4; `x.pcapng`: pcapng,
/// uncompressed (a trace extension with no codec after it says "none");
/// `x.gz`: gzip, format not said; `x`, `x.trace` or `-`: nothing.
pub fn named(path: &Path) -> (Option<OutputFormat>, Option<Codec>) {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let (_, format, codec) = trace_extensions(&name);
    let codec = codec.or(format.map(|_| Codec::None));
    (format, codec)
}

/// The extensions ending the lowercased name `lower`: the codec's (last)
/// and the format's before it, and how many bytes come before them.
fn trace_extensions(lower: &str) -> (usize, Option<OutputFormat>, Option<Codec>) {
    let (rest, codec) = CODEC_EXTENSIONS
        .into_iter()
        .find_map(|(ext, c)| lower.strip_suffix(ext).map(|r| (r, Some(c))))
        .unwrap_or((lower, None));
    let (rest, format) = FORMAT_EXTENSIONS
        .into_iter()
        .find_map(|(ext, f)| rest.strip_suffix(ext).map(|r| (r, Some(f))))
        .unwrap_or((rest, None));
    (rest.len(), format, codec)
}

/// The codecs' file name extensions, as [`named`] reads them.
const CODEC_EXTENSIONS: [(&str, Codec); 4] = [
    (".lz4", Codec::Lz4),
    (".zst", Codec::Zstd),
    (".zstd", Codec::Zstd),
    (".gz", Codec::Gzip),
];

/// The formats' file name extensions, as [`named`] reads them.
const FORMAT_EXTENSIONS: [(&str, OutputFormat); 5] = [
    (".pcap", OutputFormat::Pcap),
    (".cap", OutputFormat::Pcap),
    (".dmp", OutputFormat::Pcap),
    (".pcapng", OutputFormat::Pcapng),
    (".ntar", OutputFormat::Pcapng),
];

/// A file name split before the extensions [`named`] reads (`x.pcap.lz4`:
/// `x` and `.pcap.lz4`; `x.pcapng`: `x` and `.pcapng`; `x`: `x` and ``),
/// so that a rotation can number its files and keep their format's name
/// last.
pub fn split_extension(name: &str) -> (&str, &str) {
    // ASCII lowercasing keeps every byte where it was: the stem's length
    // in the lowercased name is a char boundary of `name`.
    let (stem, _, _) = trace_extensions(&name.to_ascii_lowercase());
    name.split_at(stem)
}

impl fmt::Display for OutputFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OutputFormat::Pcap => "pcap",
            OutputFormat::Pcapng => "pcapng",
        })
    }
}

impl FromStr for OutputFormat {
    type Err = Error;
    fn from_str(s: &str) -> Result<OutputFormat> {
        match s {
            "pcap" => Ok(OutputFormat::Pcap),
            "pcapng" => Ok(OutputFormat::Pcapng),
            _ => Err(Error::Config(format!(
                "unknown output format {s:?} (expected pcap or pcapng)"
            ))),
        }
    }
}

/// The smallest block buffer.
pub const MIN_BLOCK_SIZE: usize = 4 * 1024;
/// The largest block buffer: the LZ4 frame's largest block (BD code 4).
pub const MAX_BLOCK_SIZE: usize = 64 * 1024;
/// The default block buffer: 32 KiB, Shimizu et al. 2006's buffer size.
///
/// Measured with `cargo bench -p trace --bench write` (lz4, 200 MB of pcap
/// per traffic kind, 2-core EPYC VM), input MB/s and output/input size at
/// 16 / 32 / 64 KiB:
/// fixed-payload 1518-byte frames 6538 / 6971 / 7359 MB/s, size 0.0205 /
/// 0.0187 / 0.0178; random 1518-byte frames 3669 / 3740 / 3896 MB/s, size
/// 0.986 / 0.985 / 0.984; random 64-byte frames 1181 / 1194 / 1051 MB/s.
/// 64 KiB gains 5% on fixed traffic but loses 12% on small packets (scans
/// and floods, the traffic that must not be dropped); 32 KiB is within 5%
/// of the best everywhere and halves what a crash can lose and what a
/// windowed read over-reads, so it is the default.
pub const DEFAULT_BLOCK_SIZE: usize = 32 * 1024;
/// zstd's block: its largest (`ZSTD_BLOCKSIZE_MAX`), the largest chunk a
/// zstd file takes and its default.
///
/// A zstd chunk ends in a flush, which ends a block and builds its entropy
/// tables anew; at 32 KiB that per-block work made a write of 100 MB of
/// fixed-payload frames take 1.39 times as long as `zstd -1`'s, which cuts
/// 128 KiB blocks (wall time, `bench/trace-integrity.sh`). CPU time of the
/// same write: 62 ms at 32 KiB, 52 ms at 64 KiB, 47 ms at 128 KiB, against
/// 57-59 ms of `zstd -1 --single-thread`. A zstd frame is decoded from its
/// start whatever the chunks (a windowed read gains nothing from small
/// ones) and a damaged chunk ends what can be read of it, so the larger
/// chunk costs reading nothing; what a crash can lose is bounded by the
/// idle flush.
pub const ZSTD_BLOCK_SIZE: usize = 128 * 1024;

/// The block buffer a codec gets when none is asked for: [`ZSTD_BLOCK_SIZE`]
/// for zstd, [`DEFAULT_BLOCK_SIZE`] for the others.
pub fn default_block_size(codec: Codec) -> usize {
    match codec {
        Codec::Zstd => ZSTD_BLOCK_SIZE,
        Codec::Lz4 | Codec::Gzip | Codec::None => DEFAULT_BLOCK_SIZE,
    }
}

/// The largest block buffer a codec takes: [`ZSTD_BLOCK_SIZE`] for zstd,
/// [`MAX_BLOCK_SIZE`] (LZ4's largest block) for the others.
pub fn max_block_size(codec: Codec) -> usize {
    match codec {
        Codec::Zstd => ZSTD_BLOCK_SIZE,
        Codec::Lz4 | Codec::Gzip | Codec::None => MAX_BLOCK_SIZE,
    }
}

/// tcpdump's default snap length.
pub const DEFAULT_SNAPLEN: u32 = 262_144;
/// The most compression threads a writer starts.
pub const MAX_THREADS: usize = 64;

/// How to write a trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriterConfig {
    /// pcap or pcapng.
    pub format: OutputFormat,
    /// Compression around the trace.
    pub codec: Codec,
    /// Bytes of records gathered before a chunk is compressed and written
    /// ([`MIN_BLOCK_SIZE`]..=[`max_block_size`]; the CLI's default is
    /// [`default_block_size`] of the codec).
    pub block_size: usize,
    /// Codec level; `None` is the codec's default (zstd 1, gzip 1, see
    /// [`crate::compress::default_level`]).
    pub level: Option<i32>,
    /// pcap timestamps in nanoseconds (magic `a1b23c4d`) instead of
    /// microseconds; for pcapng, the resolution of interfaces the writer
    /// makes up itself. On by default: kansoku's captures carry
    /// nanoseconds and tshark, tcpdump and libpcap read both.
    pub nanos: bool,
    /// Longest captured length kept; longer packets are cut (0: no limit).
    /// Also the pcap header's snap length.
    pub snaplen: u32,
    /// Write the seek index sidecar (`<path>.kidx`) beside a file.
    pub index: bool,
    /// With `index`: the key sidecar too ([`crate::keys`]), a Bloom filter
    /// of each chunk's addresses, ports and protocols, so that queries read
    /// only the chunks that can hold a match.
    pub keys: bool,
    /// `fdatasync` the trace after every chunk (file-backed writers only).
    pub sync: bool,
    /// Compression threads (at most [`MAX_THREADS`]). 0 or 1, the default:
    /// chunks are compressed on the thread that writes records. 2 or more:
    /// a pool of that many threads compresses chunks while the caller keeps
    /// gathering records, and the caller writes the results in order (at
    /// most two chunks per thread are in flight; when they are, the caller
    /// waits for the oldest). LZ4, gzip and uncompressed files are byte for
    /// byte those one thread writes. zstd uses one compression thread
    /// whatever the number: its chunks continue one frame's compressor
    /// state, so they cannot be compressed side by side (see
    /// [`TraceWriter`]). [`TraceWriter::stats`] counts what is in the sink,
    /// so it trails by the chunks in flight, and rotation by size
    /// ([`crate::rotate`]) reacts that much later.
    pub threads: usize,
    /// The codec's own checksums in the stream, so that any reader
    /// (tshark, `lz4 -t`, `zstd -t`) finds damage: LZ4 blocks followed by
    /// their xxh32 (the frame's B.Checksum), zstd's content checksum. (gzip
    /// always has its CRC-32 per member.) Off by default: they cost 8-13%
    /// of LZ4 write throughput (xxh32 at ~7 GB/s over every stored byte)
    /// and ~8% of zstd's on compressible traffic, above the 5% that the
    /// index's chunk checksums cost, which cover the same bytes.
    pub stream_checksums: bool,
    /// Whether each chunk is compressed ([`CompressWhen::Always`], the
    /// default) or only while compression pays by Shimizu et al. 2006's condition
    /// ([`CompressWhen::Pays`]; LZ4 only, see [`crate::compress::economy`]).
    pub compress_when: CompressWhen,
    /// Chunks are gathered into writes of at least this many bytes (0: a
    /// write per chunk). A write(2) to a file system has a fixed cost per
    /// call (locks, journal, time stamps) that 32 KiB chunks paid twenty
    /// times a megabyte: on a core that also does the kernel's receive work
    /// a capture lost a fifth of 400,000 frames a second to it. What is
    /// gathered still reaches the file at every idle flush and at the end;
    /// the index is written only after the chunks it describes. Not with
    /// `sync`, which writes and syncs every chunk.
    pub write_bytes: usize,
    /// Gathered chunks wait for [`TraceWriter::release`] (up to four times
    /// `write_bytes`) instead of going out as soon as `write_bytes` is
    /// reached: a live capture's writer calls it once it has given a ring
    /// block back, so that a write the file system makes wait (dirty-page
    /// throttling, a slow disk) never holds the ring.
    pub write_on_release: bool,
    /// A file's writes are made by a thread of their own while the caller
    /// goes on gathering records ([`TraceWriter::create`] only; not with
    /// `sync` or a `write_bytes` of 0). Up to `write_behind_bytes` wait for
    /// it; errors surface at the next write or flush. For copies of traces
    /// (`read -w`), where the write into the page cache is most of the work
    /// and a second core is idle. Not for a live capture: beside the lane
    /// on the capture's core it cost frames (bench/busy-box-results.md).
    /// An idle flush hands the data to the thread without waiting; the
    /// index is written once the file holds the chunks it describes.
    pub write_thread: bool,
    /// The most bytes handed to the write thread and not yet written.
    pub write_behind_bytes: usize,
}

/// Bytes the writer gathers chunks into by default ([`WriterConfig::write_bytes`]).
pub const DEFAULT_WRITE_BYTES: usize = 1 << 20;

/// When the writer runs the compressor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum CompressWhen {
    /// On every chunk (a chunk that does not shrink is still stored raw).
    #[default]
    Always,
    /// While it saves the writer time: `T_c > T_d / (1 - r)`, measured as
    /// the writer goes; otherwise chunks are stored raw without trying,
    /// with a trial now and then. LZ4 only (other codecs always compress).
    Pays,
}

impl Default for WriterConfig {
    fn default() -> Self {
        WriterConfig {
            format: OutputFormat::Pcap,
            codec: Codec::Lz4,
            block_size: DEFAULT_BLOCK_SIZE,
            level: None,
            nanos: true,
            snaplen: DEFAULT_SNAPLEN,
            index: true,
            keys: true,
            sync: false,
            threads: 1,
            stream_checksums: false,
            compress_when: CompressWhen::Always,
            write_bytes: DEFAULT_WRITE_BYTES,
            write_on_release: false,
            write_thread: false,
            write_behind_bytes: 4 * DEFAULT_WRITE_BYTES,
        }
    }
}

impl WriterConfig {
    /// Checks the block size, the level and the thread count.
    pub fn validate(&self) -> Result<()> {
        if self.threads > MAX_THREADS {
            return Err(Error::Config(format!(
                "{} compression threads is too many (expected 0..={MAX_THREADS})",
                self.threads
            )));
        }
        let max = max_block_size(self.codec);
        if !(MIN_BLOCK_SIZE..=max).contains(&self.block_size) {
            return Err(Error::Config(format!(
                "block size {} is out of range for {} (expected {MIN_BLOCK_SIZE}..={max} bytes)",
                self.block_size, self.codec
            )));
        }
        check_level(self.codec, self.level)
    }
}

/// What a writer did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Packets written.
    pub packets: u64,
    /// Uncompressed bytes (the plain pcap/pcapng stream).
    pub bytes_in: u64,
    /// Bytes written to the file.
    pub bytes_out: u64,
    /// Chunks written (each has an index entry).
    pub chunks: u64,
    /// Codec blocks stored uncompressed.
    pub raw_blocks: u64,
    /// Codec blocks written (LZ4 blocks, zstd flushes, gzip members, plain chunks).
    pub blocks: u64,
    /// Records the output format cannot hold (pcapng-only blocks and extra
    /// sections written to pcap), dropped.
    pub dropped_records: u64,
    /// Codec blocks stored raw without trying the compressor, because
    /// compression did not pay ([`CompressWhen::Pays`]).
    pub skipped_blocks: u64,
    /// Bytes given to the compressor, what it made of them, and the
    /// nanoseconds it took: its throughput and ratio.
    pub compressed_in: u64,
    pub compressed_out: u64,
    pub compress_ns: u64,
    /// Nanoseconds the trace's writes took (for `bytes_out`): the writer's
    /// throughput.
    pub write_ns: u64,
    /// Nanoseconds the writer's caller spent blocked on the file system:
    /// in writes of the trace and of its index, in syncs, and waiting for
    /// the write thread to take a write. A capture's ring fills while its
    /// writer is blocked.
    pub blocked_ns: u64,
    /// The longest of those blocks, in nanoseconds: the longest stall the
    /// file system made the writer's caller wait.
    pub longest_block_ns: u64,
    /// Of `blocked_ns`, the nanoseconds in `fsync`/`fdatasync` (`--sync`).
    pub sync_ns: u64,
}

impl std::ops::AddAssign<&WriteStats> for WriteStats {
    /// Sums the counters of several files (rotation, one file per ring).
    fn add_assign(&mut self, o: &WriteStats) {
        self.packets += o.packets;
        self.bytes_in += o.bytes_in;
        self.bytes_out += o.bytes_out;
        self.chunks += o.chunks;
        self.raw_blocks += o.raw_blocks;
        self.blocks += o.blocks;
        self.dropped_records += o.dropped_records;
        self.skipped_blocks += o.skipped_blocks;
        self.compressed_in += o.compressed_in;
        self.compressed_out += o.compressed_out;
        self.compress_ns += o.compress_ns;
        self.write_ns += o.write_ns;
        self.blocked_ns += o.blocked_ns;
        self.longest_block_ns = self.longest_block_ns.max(o.longest_block_ns);
        self.sync_ns += o.sync_ns;
    }
}

/// What the current chunk holds.
#[derive(Clone, Copy, Debug, Default)]
struct ChunkState {
    packets: u32,
    first_ts: u64,
    last_ts: u64,
    metadata: bool,
    /// Checksum of the chunk's bytes, for its index entry.
    crc: u32,
}

/// What the writer keeps of a chunk while a compression thread encodes it.
#[derive(Clone, Copy, Debug)]
struct ChunkMeta {
    /// Bytes of stream header (the LZ4 frame's) before the encoded chunk.
    header_len: usize,
    chunk: ChunkState,
}

/// Writes one trace to a sink.
///
/// Dropping a writer without [`finish`](TraceWriter::finish) leaves what a
/// crash would: everything up to the last completed chunk. With compression
/// threads, the chunks already handed to them are waited for and written,
/// in order; the records not yet in a chunk are not.
///
/// # Compression threads and zstd
///
/// zstd output stays one frame with several threads, written by one
/// compression thread in order (the file is the one a single thread writes).
/// The alternatives were checked and rejected:
/// - a zstd frame per chunk would let chunks be compressed side by side,
///   but tshark 4.0 (Debian 12) cannot read a file of a few hundred
///   concatenated zstd (or LZ4) frames: it reads some, then takes compressed
///   bytes for pcap records ("appears to be damaged or corrupt ... File has
///   367936898-byte packet"), while a two-frame file reads fine;
/// - zstd's own threads (`ZSTD_c_nbWorkers`) parallelise jobs of at least
///   512 KiB, but every chunk ends with a flush, and `ZSTD_compressStream2`
///   returns from a flush only once everything given so far is compressed
///   and written out: one chunk's job (32 or 128 KiB) at a time, so no
///   gain, and the crash guarantee needs that flush per chunk.
///
/// So a thread count above one moves zstd compression off the caller's
/// thread but gives it one core; for more than one core of compression,
/// use LZ4 or gzip.
pub struct TraceWriter<W: Write> {
    sink: Coalesced<W>,
    cfg: WriterConfig,
    index: Option<IndexWriter>,
    sync: Option<fn(&W) -> io::Result<()>>,
    enc: ChunkEncoder,
    /// Records of the current chunk, uncompressed.
    block: Vec<u8>,
    /// Bytes of the chunk being written, reused.
    out: Vec<u8>,
    chunk: ChunkState,
    /// Whether the codec's stream header has been written.
    begun: bool,
    comp_offset: u64,
    decomp_offset: u64,
    stats: WriteStats,
    /// pcap: the link type of the header written.
    pcap_link: Option<LinkType>,
    /// pcap: whether a section has been seen (later ones are dropped).
    pcap_section_seen: bool,
    /// pcapng: whether a section header has been written.
    section_open: bool,
    /// pcapng: link type and resolution of the current section's interfaces.
    ifaces: Vec<(LinkType, TsResolution)>,
    /// The compression threads, when `cfg.threads` is 2 or more.
    pool: Option<EncoderPool<ChunkMeta>>,
    /// A chunk failed to encode or write: later chunks are not written,
    /// which would leave a hole in the file.
    failed: bool,
    /// Whether compression pays, with [`CompressWhen::Pays`] on a codec
    /// that can store chunks raw.
    economy: Option<Economy>,
    /// With a write thread: index entries of chunks the file may not hold
    /// yet, in order; each goes to the index once it does.
    held_entries: std::collections::VecDeque<(IndexEntry, Option<KeyFilter>)>,
    /// With a key sidecar: the current chunk's keys, and the filters of
    /// chunks flushed but not yet written, in order.
    keys: Option<ChunkKeys>,
    filters: std::collections::VecDeque<Option<KeyFilter>>,
}

impl TraceWriter<File> {
    /// Creates the trace at `path` and, when `cfg.index` is set, its sidecar
    /// index `<path>.kidx` (a stale sidecar is removed when it is not).
    pub fn create(path: &Path, cfg: WriterConfig) -> Result<Self> {
        cfg.validate()?;
        if crate::read::is_being_read(path) {
            return Err(Error::io(
                format!("creating {}", path.display()),
                io::Error::other(
                    "it is a trace this process is reading: writing it would destroy it",
                ),
            ));
        }
        let file =
            File::create(path).map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
        let ipath = index::index_path(path);
        let kpath = crate::keys::keys_path(path);
        // A stale sidecar of an earlier file of this name is removed.
        let remove = |p: &Path| match std::fs::remove_file(p) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io(format!("removing {}", p.display()), e)),
        };
        let index = if cfg.index {
            let ix = IndexWriter::create(&ipath, cfg.codec, cfg.format == OutputFormat::Pcapng)?;
            if cfg.keys {
                Some(ix.with_keys(path)?)
            } else {
                remove(&kpath)?;
                Some(ix)
            }
        } else {
            remove(&ipath)?;
            remove(&kpath)?;
            None
        };
        let keys = cfg.index && cfg.keys;
        let sync = cfg.sync;
        let mut w = TraceWriter::new(file, cfg)?;
        w.index = index;
        if keys {
            w.keys = Some(ChunkKeys::new(w.cfg.block_size));
        }
        if sync {
            w.sync = Some(File::sync_data);
        } else if w.cfg.write_thread {
            w.sink
                .start_thread(w.cfg.write_behind_bytes)
                .map_err(|e| Error::io("starting the trace's write thread", e))?;
        }
        Ok(w)
    }
}

impl<W: Write> TraceWriter<W> {
    /// A writer to any sink, without an index (benches write to `io::sink()`).
    pub fn new(sink: W, cfg: WriterConfig) -> Result<Self> {
        cfg.validate()?;
        let enc = ChunkEncoder::new(cfg.codec, cfg.level, cfg.stream_checksums)?;
        let pool = if cfg.threads >= 2 {
            // zstd chunks continue one compressor state: one thread (see
            // the type's documentation).
            let workers = if cfg.codec == Codec::Zstd {
                1
            } else {
                cfg.threads
            };
            let encoders = (0..workers)
                .map(|_| ChunkEncoder::new(cfg.codec, cfg.level, cfg.stream_checksums))
                .collect::<Result<Vec<_>>>()?;
            Some(EncoderPool::new(encoders, 2 * cfg.threads)?)
        } else {
            None
        };
        let economy =
            (cfg.compress_when == CompressWhen::Pays && enc.can_store()).then(Economy::default);
        Ok(TraceWriter {
            economy,
            held_entries: std::collections::VecDeque::new(),
            keys: None,
            filters: std::collections::VecDeque::new(),
            sink: Coalesced::new(
                sink,
                if cfg.sync { 0 } else { cfg.write_bytes },
                cfg.write_on_release,
            ),
            block: Vec::with_capacity(cfg.block_size + 2048),
            out: Vec::with_capacity(cfg.block_size + cfg.block_size / 8 + 64),
            cfg,
            index: None,
            sync: None,
            enc,
            chunk: ChunkState::default(),
            begun: false,
            comp_offset: 0,
            decomp_offset: 0,
            stats: WriteStats::default(),
            pcap_link: None,
            pcap_section_seen: false,
            section_open: false,
            ifaces: Vec::new(),
            pool,
            failed: false,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &WriterConfig {
        &self.cfg
    }

    /// Counters so far; `bytes_out` counts bytes already in the sink.
    pub fn stats(&self) -> &WriteStats {
        &self.stats
    }

    /// Writes one record. For pcap output, pcapng-only blocks and sections
    /// after the first are dropped (counted in `dropped_records`), and an
    /// interface or packet whose link type differs from the first one is an
    /// [`Error::Config`]: a pcap file has a single link type.
    pub fn write_record(&mut self, rec: &Record) -> Result<()> {
        match (self.cfg.format, rec) {
            (OutputFormat::Pcap, Record::Section(s)) => {
                // A later section goes on in the same file; only what it
                // says of itself (its options) has no place in pcap. A
                // directory of traces read as one starts a section with
                // each file, and leaves nothing out.
                if self.pcap_section_seen && !s.options.is_empty() {
                    self.stats.dropped_records += 1;
                }
                self.pcap_section_seen = true;
                Ok(())
            }
            (OutputFormat::Pcap, Record::Interface(i)) => {
                self.pcap_header(i.link_type, i.snaplen)?;
                Ok(())
            }
            (OutputFormat::Pcap, Record::Packet(p)) => {
                self.pcap_header(p.link_type, 0)?;
                self.pcap_packet(p.ts_nanos(), p.orig_len, p.data)
            }
            (OutputFormat::Pcap, Record::Block(_)) => {
                self.stats.dropped_records += 1;
                Ok(())
            }
            (OutputFormat::Pcapng, Record::Section(s)) => self.ng_section(s),
            (OutputFormat::Pcapng, Record::Interface(i)) => self.ng_interface(i),
            (OutputFormat::Pcapng, Record::Packet(p)) => {
                self.ng_ensure_section()?;
                if p.interface as usize >= self.ifaces.len() {
                    if self.ifaces.is_empty() && p.interface == 0 {
                        let i = Interface::new(p.link_type, self.cfg.snaplen, p.tsresol);
                        self.ng_interface(&i)?;
                    } else {
                        return Err(Error::Config(format!(
                            "packet on interface {} but the section has {} interfaces",
                            p.interface,
                            self.ifaces.len()
                        )));
                    }
                }
                let mut p = *p;
                p.data = self.cut(p.data);
                self.put_record(Some(p.ts_nanos()), Some((p.link_type, p.data)), |out| {
                    pcapng::emit_packet(out, &p);
                    Ok(())
                })
            }
            (OutputFormat::Pcapng, Record::Block(b)) => {
                self.ng_ensure_section()?;
                match self.put_record(None, None, |out| pcapng::emit_raw_block(out, b)) {
                    // A big-endian block of a layout the emitter cannot
                    // convert is skipped, like a pcapng extra in pcap output.
                    Err(Error::Format { .. }) => {
                        self.stats.dropped_records += 1;
                        Ok(())
                    }
                    r => r,
                }
            }
        }
    }

    /// Writes one packet, making up a header (pcap) or a section and an
    /// interface for `link_type` (pcapng) on first use; for generators and
    /// live capture.
    pub fn write_packet(
        &mut self,
        link_type: LinkType,
        ts_nanos: u64,
        orig_len: u32,
        data: &[u8],
    ) -> Result<()> {
        match self.cfg.format {
            OutputFormat::Pcap => {
                if self.pcap_link != Some(link_type) {
                    self.pcap_header(link_type, 0)?;
                }
                self.pcap_packet(ts_nanos, orig_len, data)
            }
            OutputFormat::Pcapng => {
                self.ng_ensure_section()?;
                let tsresol = if self.cfg.nanos {
                    TsResolution::NANO
                } else {
                    TsResolution::MICRO
                };
                let id = match self.ifaces.iter().position(|&x| x == (link_type, tsresol)) {
                    Some(id) => id,
                    None => {
                        // emit_interface adds if_tsresol for nanoseconds.
                        let i = Interface::new(link_type, self.cfg.snaplen, tsresol);
                        self.ng_interface(&i)?;
                        self.ifaces.len() - 1
                    }
                };
                let p = Packet {
                    interface: u32::try_from(id).unwrap_or(u32::MAX),
                    link_type,
                    ts: tsresol.nanos_to_ticks(ts_nanos),
                    tsresol,
                    orig_len,
                    data: self.cut(data),
                    options: &[],
                    kind: PacketKind::Enhanced,
                };
                self.put_record(Some(ts_nanos), Some((link_type, p.data)), |out| {
                    pcapng::emit_packet(out, &p);
                    Ok(())
                })
            }
        }
    }

    /// Writes the chunks gathered so far if they make a write of
    /// [`WriterConfig::write_bytes`] ([`WriterConfig::write_on_release`]).
    pub fn release(&mut self) -> Result<()> {
        self.sink
            .release()
            .map_err(|e| Error::io("writing the trace", e))
    }

    /// Compresses and writes the records buffered so far as a chunk, so that
    /// they survive a crash; callers use it to bound latency. With a write
    /// thread the chunk is handed to it, not waited for: in the file once
    /// the thread has written it (a stalled disk holds it in memory).
    pub fn flush_block(&mut self) -> Result<()> {
        if !self.block.is_empty() {
            self.flush_chunk(self.block.len())?;
        }
        self.collect(true)?;
        if self.sink.threaded() {
            // On its way to the file: the caller does not wait for a
            // stalled disk (a capture's ring would fill meanwhile).
            self.sink
                .send()
                .map_err(|e| Error::io("flushing the trace", e))?;
            self.index_written()?;
        } else {
            self.sink
                .flush()
                .map_err(|e| Error::io("flushing the trace", e))?;
        }
        // The index catches up with the file (it is written in batches).
        let t = std::time::Instant::now();
        if let Some(ix) = self.index.as_mut() {
            ix.flush()?;
        }
        self.blocked_since(t, false);
        Ok(())
    }

    /// Writes the last chunk and the end of the stream (LZ4 EndMark, the
    /// zstd frame's end) and returns the counters. A trace with no records
    /// still gets a header (Ethernet for pcap) so that it is a valid file.
    pub fn finish(mut self) -> Result<WriteStats> {
        match self.cfg.format {
            OutputFormat::Pcap if self.pcap_link.is_none() => {
                self.pcap_header(LinkType::Ethernet, 0)?
            }
            OutputFormat::Pcapng => self.ng_ensure_section()?,
            _ => {}
        }
        if !self.block.is_empty() {
            self.flush_chunk(self.block.len())?;
        }
        if self.pool.is_some() {
            // The end of a zstd frame belongs to the thread that holds the
            // frame's state; for the other codecs any encoder writes it.
            self.submit(Work::End, Vec::new(), ChunkState::default())?;
            self.collect(true)?;
        } else {
            let mut out = std::mem::take(&mut self.out);
            out.clear();
            self.begin_into(&mut out);
            let r = self
                .enc
                .finish(&mut out)
                .and_then(|()| self.write_end(&out));
            self.out = out;
            r?;
        }
        if self.sync.is_some() {
            self.sync_all()?;
        }
        let waits = self.sink.waits;
        self.stats.blocked_ns = waits.total_ns;
        self.stats.longest_block_ns = waits.longest_ns;
        Ok(std::mem::take(&mut self.stats))
    }

    /// Syncs the trace and its index (`--sync`), counting the time.
    fn sync_all(&mut self) -> Result<()> {
        let t = std::time::Instant::now();
        if let Some(sync) = self.sync {
            sync(&self.sink.inner).map_err(|e| Error::io("syncing the trace", e))?;
        }
        if let Some(ix) = self.index.as_mut() {
            ix.sync()?;
        }
        self.blocked_since(t, true);
        Ok(())
    }

    /// Counts the time since `t` as blocked on the file system (a sync, or
    /// a write of the index), with the sink's own writes and waits.
    fn blocked_since(&mut self, t: std::time::Instant, sync: bool) {
        let ns = self.sink.waits.since(t);
        if sync {
            self.stats.sync_ns += ns;
        }
    }

    /// Cuts `data` to the snap length.
    fn cut<'d>(&self, data: &'d [u8]) -> &'d [u8] {
        let snap = self.cfg.snaplen as usize;
        if snap != 0 && data.len() > snap {
            &data[..snap]
        } else {
            data
        }
    }

    /// Writes the pcap file header as the first chunk, or checks that
    /// `link_type` matches the one written.
    fn pcap_header(&mut self, link_type: LinkType, iface_snaplen: u32) -> Result<()> {
        match self.pcap_link {
            Some(l) if l == link_type => Ok(()),
            Some(l) => Err(Error::Config(format!(
                "pcap holds one link type: {l} was written, {link_type} cannot follow (use pcapng)"
            ))),
            None => {
                self.pcap_link = Some(link_type);
                let snaplen = match (self.cfg.snaplen, iface_snaplen) {
                    (0, 0) => DEFAULT_SNAPLEN,
                    (0, s) => s,
                    (s, _) => s,
                };
                let nanos = self.cfg.nanos;
                self.put_metadata(|out| {
                    pcap::emit_file_header(out, link_type, snaplen, nanos);
                    Ok(())
                })?;
                self.flush_chunk(self.block.len())
            }
        }
    }

    fn pcap_packet(&mut self, ts_nanos: u64, orig_len: u32, data: &[u8]) -> Result<()> {
        let data = self.cut(data);
        let nanos = self.cfg.nanos;
        let link = self.pcap_link.unwrap_or(LinkType::Ethernet);
        self.put_record(Some(ts_nanos), Some((link, data)), |out| {
            pcap::emit_record(out, ts_nanos, nanos, orig_len, data);
            Ok(())
        })
    }

    fn ng_ensure_section(&mut self) -> Result<()> {
        if self.section_open {
            return Ok(());
        }
        self.ng_section(&Section {
            major: 1,
            minor: 0,
            options: Vec::new(),
        })
    }

    fn ng_section(&mut self, s: &Section) -> Result<()> {
        self.section_open = true;
        self.ifaces.clear();
        self.put_metadata(|out| {
            pcapng::emit_section(out, s);
            Ok(())
        })
    }

    fn ng_interface(&mut self, i: &Interface) -> Result<()> {
        self.ng_ensure_section()?;
        self.ifaces.push((i.link_type, i.tsresol));
        self.put_metadata(|out| {
            pcapng::emit_interface(out, i);
            Ok(())
        })
    }

    fn put_metadata(&mut self, emit: impl FnOnce(&mut Vec<u8>) -> Result<()>) -> Result<()> {
        self.put_record(None, None, emit)
    }

    /// Appends one record to the block: a packet with its timestamp, or
    /// metadata with `None`. A record never straddles two chunks; one that
    /// does not fit flushes the chunk before it, and one larger than the
    /// block size becomes a chunk of its own.
    fn put_record(
        &mut self,
        ts: Option<u64>,
        packet: Option<(LinkType, &[u8])>,
        emit: impl FnOnce(&mut Vec<u8>) -> Result<()>,
    ) -> Result<()> {
        let metadata = ts.is_none();
        if !self.block.is_empty() && self.chunk.metadata != metadata {
            self.flush_chunk(self.block.len())?;
        }
        let start = self.block.len();
        if let Err(e) = emit(&mut self.block) {
            self.block.truncate(start);
            return Err(e);
        }
        if self.block.len() > self.cfg.block_size && start > 0 {
            // The new record does not fit: the records before it are the
            // chunk, and the new one starts the next.
            self.flush_chunk(start)?;
        }
        self.chunk.metadata = metadata;
        if let Some(ts) = ts {
            let c = &mut self.chunk;
            if c.packets == 0 {
                c.first_ts = ts;
                c.last_ts = ts;
            } else {
                c.first_ts = c.first_ts.min(ts);
                c.last_ts = c.last_ts.max(ts);
            }
            c.packets = c.packets.saturating_add(1);
            self.stats.packets += 1;
        }
        if let (Some(k), Some((link, data))) = (self.keys.as_mut(), packet) {
            k.add_packet(link, data);
        }
        // Metadata needs no flush of its own: the next packet flushes it.
        if self.block.len() >= self.cfg.block_size {
            self.flush_chunk(self.block.len())?;
        }
        Ok(())
    }

    /// Writes `block[..len]` as one chunk: encode, one write, then its index
    /// entry; the rest of the block moves to the front. With compression
    /// threads the chunk is handed to them instead, and whatever chunks they
    /// have finished are written, in order.
    fn flush_chunk(&mut self, len: usize) -> Result<()> {
        let mut c = std::mem::take(&mut self.chunk);
        if let Some(k) = self.keys.as_mut() {
            self.filters.push_back(k.take());
        }
        // The index checksum is taken here, on the writer's thread, while
        // the chunk is still in this core's cache. With a zstd compression
        // thread it was taken there, beside the encoding, and on
        // fixed-payload frames (which compress so fast that the checksum is
        // a tenth of that thread's work) the index made a write 12.8% slower
        // than `--no-index`; here it costs what it saves the compression
        // thread, which was the slower one (bench/trace-integrity.sh).
        if self.index.is_some() {
            c.crc = crate::index::chunk_checksum(&self.block[..len]);
        }
        let compress = self.economy.as_mut().is_none_or(Economy::compress_next);
        if self.pool.is_some() {
            let cap = self.cfg.block_size + 2048;
            let mut input = self.pool.as_mut().map_or_else(Vec::new, |p| p.buffer(cap));
            if len == self.block.len() {
                // The usual case: the whole block is the chunk; hand it over
                // and gather the next one in a recycled buffer.
                std::mem::swap(&mut input, &mut self.block);
            } else {
                input.extend_from_slice(&self.block[..len]);
                self.block.drain(..len);
            }
            let work = if compress { Work::Chunk } else { Work::Store };
            self.submit(work, input, c)?;
            return self.collect(false);
        }
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        let header_len = self.begin_into(&mut out);
        if matches!(self.enc, ChunkEncoder::None) && header_len == 0 && len == self.block.len() {
            // Uncompressed, the block is the chunk as the file takes it:
            // handed over as it is, not copied.
            std::mem::swap(&mut out, &mut self.block);
            let rep = ChunkReport {
                blocks: 1,
                raw_blocks: 1,
                ..ChunkReport::default()
            };
            let r = self.write_chunk(&mut out, 0, len, c, rep);
            self.out = out;
            return r;
        }
        let chunk = &self.block[..len];
        let encoded = if compress {
            self.enc.encode_chunk(chunk, &mut out)
        } else {
            self.enc.store_chunk(chunk, &mut out)
        };
        let r = encoded.and_then(|rep| self.write_chunk(&mut out, header_len, len, c, rep));
        self.out = out;
        if len == self.block.len() {
            self.block.clear();
        } else {
            self.block.drain(..len);
        }
        r
    }

    /// Appends the stream header to the empty `out` if it has not been
    /// written yet, and returns its length.
    fn begin_into(&mut self, out: &mut Vec<u8>) -> usize {
        if self.begun {
            return 0;
        }
        self.enc.begin(out);
        self.begun = true;
        out.len()
    }

    /// The single `write` of an encoded chunk (`out`, of which the first
    /// `header_len` bytes are the stream header), then its index entry.
    fn write_chunk(
        &mut self,
        out: &mut Vec<u8>,
        header_len: usize,
        len: usize,
        c: ChunkState,
        rep: ChunkReport,
    ) -> Result<()> {
        let out_len = out.len();
        let t = std::time::Instant::now();
        // Through to the file while the economy has no measure of it yet.
        let through = self.economy.as_ref().is_some_and(|e| !e.write_measured());
        self.sink.put_owned(out, through).map_err(|e| {
            Error::io(
                format!(
                    "writing chunk {} at file offset {}",
                    self.stats.chunks, self.comp_offset
                ),
                e,
            )
        })?;
        if let Some(sync) = self.sync {
            let ts = std::time::Instant::now();
            sync(&self.sink.inner).map_err(|e| Error::io("syncing the trace", e))?;
            self.blocked_since(ts, true);
        }
        let write_ns = coalesced::elapsed_ns(t);
        let stored = out_len - header_len;
        if rep.encode_ns > 0 {
            self.stats.compressed_in += len as u64;
            self.stats.compressed_out += stored as u64;
            self.stats.compress_ns += rep.encode_ns;
        }
        self.stats.write_ns += write_ns;
        self.stats.skipped_blocks += rep.skipped_blocks;
        if let Some(e) = self.economy.as_mut() {
            // What the file took: the writes that reached it, not the
            // chunks gathered in memory.
            if let Some((bytes, ns)) = self.sink.last_write.take() {
                e.wrote(bytes, ns);
            }
            if rep.encode_ns > 0 {
                e.compressed(len, stored, rep.encode_ns);
            }
        }
        let mut flags = if c.metadata { FLAG_METADATA } else { 0 };
        if rep.blocks > 0 && rep.raw_blocks == rep.blocks {
            flags |= FLAG_RAW;
        }
        let entry = IndexEntry {
            comp_offset: self.comp_offset + header_len as u64,
            comp_len: (out_len - header_len) as u64,
            decomp_offset: self.decomp_offset,
            decomp_len: len as u64,
            first_ts: c.first_ts,
            last_ts: c.last_ts,
            packets: c.packets,
            flags,
            crc: Some(c.crc),
        };
        self.comp_offset += out_len as u64;
        self.decomp_offset += len as u64;
        self.stats.bytes_in += len as u64;
        self.stats.bytes_out += out_len as u64;
        self.stats.chunks += 1;
        self.stats.blocks += rep.blocks;
        self.stats.raw_blocks += rep.raw_blocks;
        let filter = self.filters.pop_front().flatten().map(|mut f| {
            f.fold(entry.comp_len);
            f
        });
        if self.index.is_some() && self.sink.threaded() {
            // The entry waits until the file holds the chunk: the caller
            // does not wait for the thread.
            self.held_entries.push_back((entry, filter));
            return self.index_written();
        }
        if let Some(ix) = self.index.as_mut() {
            if ix.batch_due() {
                // The entries go after the chunks they describe.
                self.sink
                    .drain()
                    .map_err(|e| Error::io("writing the trace", e))?;
            }
            let t = std::time::Instant::now();
            ix.append_with_keys(&entry, filter.as_ref())?;
            let synced = self.sync.is_some();
            if synced {
                ix.sync()?;
            }
            self.blocked_since(t, synced);
        }
        Ok(())
    }

    /// With a write thread: appends the held index entries of the chunks
    /// the file now holds.
    fn index_written(&mut self) -> Result<()> {
        let Some(ix) = self.index.as_mut() else {
            return Ok(());
        };
        let written = self
            .sink
            .confirmed()
            .map_err(|e| Error::io("writing the trace", e))?;
        let t = std::time::Instant::now();
        while let Some((e, f)) = self
            .held_entries
            .front()
            .filter(|(e, _)| e.comp_offset + e.comp_len <= written)
        {
            ix.append_with_keys(e, f.as_ref())?;
            self.held_entries.pop_front();
        }
        self.blocked_since(t, false);
        Ok(())
    }

    /// Writes the end of the stream, then the index's end entry, which
    /// says the file was closed and where its last bytes are.
    fn write_end(&mut self, out: &[u8]) -> Result<()> {
        self.sink
            .write_all(out)
            .and_then(|()| self.sink.flush())
            .map_err(|e| Error::io("writing the end of the trace", e))?;
        let end = IndexEntry {
            comp_offset: self.comp_offset,
            comp_len: out.len() as u64,
            decomp_offset: self.decomp_offset,
            flags: FLAG_END,
            crc: Some(0),
            ..IndexEntry::default()
        };
        self.comp_offset += out.len() as u64;
        self.stats.bytes_out += out.len() as u64;
        // Every chunk is in the file now (the flush above waited for it).
        self.index_written()?;
        let file = self.keys.as_mut().and_then(ChunkKeys::take_file);
        if let Some(ix) = self.index.as_mut() {
            ix.append(&end)?;
            ix.finish_keys(file.as_ref())?;
        }
        Ok(())
    }

    /// Hands a job to the compression threads; the stream header goes in
    /// front of the first job's output, as [`flush_chunk`](Self::flush_chunk)
    /// puts it in the first chunk's write.
    fn submit(&mut self, work: Work, input: Vec<u8>, chunk: ChunkState) -> Result<()> {
        if self.failed {
            return Err(failed_before());
        }
        let cap = self.cfg.block_size + self.cfg.block_size / 8 + 64;
        let mut out = self.pool.as_mut().map_or_else(Vec::new, |p| p.buffer(cap));
        let header_len = self.begin_into(&mut out);
        let job = Job {
            work,
            input,
            out,
            meta: ChunkMeta { header_len, chunk },
        };
        match self.pool.as_mut() {
            Some(p) => p.submit(job).inspect_err(|_| self.failed = true),
            None => Ok(()),
        }
    }

    /// Writes the chunks the compression threads have finished, in order:
    /// those ready now, waiting only while too many are in flight; with
    /// `all`, every chunk handed over. Without threads there is nothing to
    /// do.
    fn collect(&mut self, all: bool) -> Result<()> {
        loop {
            let Some(pool) = self.pool.as_mut() else {
                return Ok(());
            };
            if self.failed {
                return Err(failed_before());
            }
            let wait = all || pool.is_full();
            let Done { mut job, result } = match pool.next(wait) {
                Ok(Some(d)) => d,
                Ok(None) => return Ok(()),
                Err(e) => {
                    self.failed = true;
                    return Err(e);
                }
            };
            let r = result.and_then(|rep| match job.work {
                Work::Chunk | Work::Store => self.write_chunk(
                    &mut job.out,
                    job.meta.header_len,
                    job.input.len(),
                    job.meta.chunk,
                    rep,
                ),
                Work::End => self.write_end(&job.out),
            });
            if let Some(pool) = self.pool.as_mut() {
                pool.recycle(job.input);
                pool.recycle(job.out);
            }
            if let Err(e) = r {
                self.failed = true;
                return Err(e);
            }
        }
    }
}

impl<W: Write> Drop for TraceWriter<W> {
    /// Writes the chunks already handed to compression threads, as a crash
    /// after their writes would leave them; errors cannot be reported here.
    fn drop(&mut self) {
        if self.pool.is_some() && !self.failed {
            let _ = self.collect(true);
        }
    }
}

fn failed_before() -> Error {
    Error::Config("an earlier chunk failed; the trace writer stopped".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_says_format_and_codec() {
        let n = |s: &str| named(Path::new(s));
        use Codec::*;
        use OutputFormat::*;
        assert_eq!(n("x.pcap"), (Some(Pcap), Some(None)));
        assert_eq!(n("dir.d/X.PCAP.LZ4"), (Some(Pcap), Some(Lz4)));
        assert_eq!(n("x.pcapng.zst"), (Some(Pcapng), Some(Zstd)));
        assert_eq!(n("x.pcapng.zstd"), (Some(Pcapng), Some(Zstd)));
        assert_eq!(n("x.cap.gz"), (Some(Pcap), Some(Gzip)));
        assert_eq!(n("x.ntar"), (Some(Pcapng), Some(None)));
        assert_eq!(n("x.gz"), (Option::None, Some(Gzip)));
        assert_eq!(n("cap-%H%M.pcap.lz4"), (Some(Pcap), Some(Lz4)));
        assert_eq!(n("x"), (Option::None, Option::None));
        assert_eq!(n("x.trace"), (Option::None, Option::None));
        assert_eq!(n("-"), (Option::None, Option::None));
        assert_eq!(n(".pcap"), (Some(Pcap), Some(None)));
        // Only the end of the name counts.
        assert_eq!(n("x.pcap.old"), (Option::None, Option::None));
        // A rotation numbers the name before the extensions `named` reads.
        assert_eq!(split_extension("d.x/A.Pcap.LZ4"), ("d.x/A", ".Pcap.LZ4"));
        assert_eq!(split_extension("x.pcapng"), ("x", ".pcapng"));
        assert_eq!(split_extension("x.gz"), ("x", ".gz"));
        assert_eq!(split_extension("x.pcap.old"), ("x.pcap.old", ""));
        assert_eq!(split_extension("x"), ("x", ""));
        assert_eq!(split_extension("cap-%H.cap.zstd"), ("cap-%H", ".cap.zstd"));
        assert_eq!(n("x.lz4.pcap"), (Some(Pcap), Some(None)));
    }

    /// Keeps the writes that reach it, for the test to look at later.
    #[derive(Clone, Default)]
    struct Writes(std::sync::Arc<std::sync::Mutex<(Vec<u8>, Vec<usize>)>>);

    impl Write for Writes {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            let mut w = self.0.lock().unwrap();
            w.0.extend_from_slice(b);
            w.1.push(b.len());
            Ok(b.len())
        }
        /// One write of every buffer, as `writev(2)` to a file.
        fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
            let mut w = self.0.lock().unwrap();
            let n = bufs.iter().map(|b| b.len()).sum();
            for b in bufs {
                w.0.extend_from_slice(b);
            }
            w.1.push(n);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn frame(i: u32) -> Vec<u8> {
        (0..600u32)
            .map(|j| (i.wrapping_mul(31) ^ j) as u8)
            .collect()
    }

    #[test]
    fn chunks_are_gathered_into_large_writes_with_the_same_bytes() {
        let write = |write_bytes: usize| {
            let cfg = WriterConfig {
                codec: Codec::None,
                block_size: 4096,
                write_bytes,
                ..WriterConfig::default()
            };
            let sink = Writes::default();
            let mut w = TraceWriter::new(sink.clone(), cfg).unwrap();
            for i in 0..400 {
                w.write_packet(LinkType::Ethernet, u64::from(i), 600, &frame(i))
                    .unwrap();
            }
            w.finish().unwrap();
            let got = sink.0.lock().unwrap().clone();
            got
        };
        let each = write(0);
        let gathered = write(64 << 10);
        assert_eq!(each.0, gathered.0);
        // A write per 4 KiB chunk against a write per 64 KiB or so.
        assert!(each.1.len() > 50, "{}", each.1.len());
        assert!(gathered.1.len() * 10 < each.1.len(), "{:?}", gathered.1);
        let (last, full) = gathered.1.split_last().unwrap();
        assert!(full.iter().all(|&n| n >= 64 << 10), "{:?}", gathered.1);
        assert!(*last > 0);
    }

    #[test]
    fn the_index_never_describes_bytes_the_file_does_not_hold_yet() {
        for write_thread in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("t.pcap.lz4");
            let cfg = WriterConfig {
                block_size: 4096,
                write_bytes: 256 << 10,
                write_thread,
                ..WriterConfig::default()
            };
            let mut w = TraceWriter::create(&path, cfg).unwrap();
            let ipath = index::index_path(&path);
            let mut checked = 0;
            for i in 0..3000 {
                w.write_packet(LinkType::Ethernet, u64::from(i), 600, &frame(i))
                    .unwrap();
                if i % 50 == 0 {
                    let file_len = std::fs::metadata(&path).unwrap().len();
                    let ix = index::read_index(&ipath).unwrap();
                    if let Some(e) = ix.entries.last() {
                        assert!(
                            e.comp_offset + e.comp_len <= file_len,
                            "entry {e:?} past {file_len}"
                        );
                        checked += 1;
                    }
                }
            }
            // Batches of entries were written while chunks were still gathered.
            assert!(checked > 10, "{checked}");
            w.finish().unwrap();
            let ix = index::read_index(&ipath).unwrap();
            let file_len = std::fs::metadata(&path).unwrap().len();
            let last = ix.entries.last().unwrap();
            assert_eq!(last.comp_offset + last.comp_len, file_len);
        }
    }

    #[test]
    fn a_write_thread_writes_the_same_file_and_index() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, codec: Codec, write_thread: bool| {
            let path = dir.path().join(name);
            let cfg = WriterConfig {
                codec,
                block_size: 4096,
                write_bytes: 64 << 10,
                write_thread,
                ..WriterConfig::default()
            };
            let mut w = TraceWriter::create(&path, cfg).unwrap();
            for i in 0..2000 {
                w.write_packet(LinkType::Ethernet, u64::from(i), 600, &frame(i))
                    .unwrap();
                if i % 700 == 0 {
                    w.flush_block().unwrap();
                }
            }
            let stats = w.finish().unwrap();
            assert_eq!(stats.packets, 2000);
            (
                std::fs::read(&path).unwrap(),
                std::fs::read(index::index_path(&path)).unwrap(),
            )
        };
        for codec in [Codec::None, Codec::Lz4, Codec::Zstd] {
            let ext = match codec {
                Codec::None => "pcap",
                Codec::Lz4 => "pcap.lz4",
                _ => "pcap.zst",
            };
            let inline = write(&format!("a.{ext}"), codec, false);
            let threaded = write(&format!("b.{ext}"), codec, true);
            assert!(inline.0.len() > 10_000, "{codec}");
            assert!(inline == threaded, "{codec}: the files or indexes differ");
        }
    }

    #[test]
    fn the_time_blocked_on_the_file_is_counted_with_its_longest_stall_and_syncs() {
        let dir = tempfile::tempdir().unwrap();
        for (sync, write_thread) in [(false, false), (false, true), (true, false)] {
            let path = dir.path().join(format!("t-{sync}-{write_thread}.pcap.lz4"));
            let cfg = WriterConfig {
                block_size: 4096,
                write_bytes: 16 << 10,
                sync,
                write_thread,
                ..WriterConfig::default()
            };
            let mut w = TraceWriter::create(&path, cfg).unwrap();
            for i in 0..500 {
                w.write_packet(LinkType::Ethernet, u64::from(i), 600, &frame(i))
                    .unwrap();
            }
            let s = w.finish().unwrap();
            assert!(s.blocked_ns > 0, "{sync} {write_thread}: {s:?}");
            assert!(
                s.longest_block_ns > 0 && s.longest_block_ns <= s.blocked_ns,
                "{s:?}"
            );
            assert!(s.sync_ns <= s.blocked_ns, "{s:?}");
            assert_eq!(s.sync_ns > 0, sync, "{s:?}");
        }
    }

    /// Writes 1 MiB of packets with a write thread holding up to `behind`
    /// bytes into a FIFO whose reader starts reading only after a pause
    /// (a stalled disk): whether the caller's last write returned before
    /// the reader started, and whether every byte arrived.
    fn write_into_a_stalled_fifo(behind: usize) -> (bool, bool) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stalled.pcap");
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap();
        assert!(made.success());
        let reading = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (path, reading) = (path.clone(), reading.clone());
            std::thread::spawn(move || {
                let mut f = File::open(&path).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(500));
                reading.store(true, std::sync::atomic::Ordering::SeqCst);
                let mut all = Vec::new();
                io::Read::read_to_end(&mut f, &mut all).unwrap();
                all
            })
        };
        let cfg = WriterConfig {
            codec: Codec::None,
            index: false,
            write_bytes: 64 << 10,
            write_thread: true,
            write_behind_bytes: behind,
            ..WriterConfig::default()
        };
        let mut w = TraceWriter::create(&path, cfg).unwrap();
        for i in 0..1700 {
            w.write_packet(LinkType::Ethernet, u64::from(i), 600, &frame(i))
                .unwrap();
        }
        w.flush_block().unwrap();
        let ahead = !reading.load(std::sync::atomic::Ordering::SeqCst);
        let stats = w.finish().unwrap();
        let all = reader.join().unwrap();
        (
            ahead,
            all.len() as u64 == stats.bytes_out && stats.packets == 1700,
        )
    }

    #[test]
    fn a_stalled_file_holds_the_writes_in_memory_up_to_the_budget() {
        // 8 MiB behind: the caller never waits for the stalled reader.
        assert_eq!(write_into_a_stalled_fifo(8 << 20), (true, true));
        // 128 KiB behind: it waits once that much is held, and the pause
        // is over before its last write returns. Nothing is lost either way.
        assert_eq!(write_into_a_stalled_fifo(128 << 10), (false, true));
    }

    #[test]
    fn a_failed_write_on_the_write_thread_is_an_error_not_a_silent_loss() {
        // /dev/full takes no byte: every write fails with ENOSPC.
        let full = Path::new("/dev/full");
        let cfg = WriterConfig {
            codec: Codec::None,
            index: false,
            write_bytes: 64 << 10,
            write_thread: true,
            ..WriterConfig::default()
        };
        let mut w = TraceWriter::create(full, cfg).unwrap();
        let mut failed = None;
        for i in 0..2000 {
            if let Err(e) = w.write_packet(LinkType::Ethernet, u64::from(i), 600, &frame(i)) {
                failed = Some(e);
                break;
            }
        }
        let e = match failed {
            Some(e) => e,
            None => w.finish().expect_err("the writes failed"),
        };
        assert!(e.to_string().contains("No space left"), "{e}");
    }
}
