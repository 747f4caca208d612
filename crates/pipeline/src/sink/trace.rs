//! Where `-w` sends packets: a trace file (rotated as tcpdump's -C/-G) or
//! standard output, through the trace store's writer.

use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use serde::Serialize;
use trace::format::Codec;
use trace::rotate::{RotateConfig, Rotated, RotatingWriter};
use trace::write::{TraceWriter, WriteStats, WriterConfig};
use trace::{Record, Section, TsResolution};

use crate::error::{display_path, write_error, Error, Result};
use crate::packet::Frame;
use crate::sink::PacketSink;

/// `--compress-threads`: how many threads compress blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompressThreads {
    /// Chosen by codec, see [`CompressThreads::resolve`].
    Auto,
    /// This many (0 and 1: on the writing thread).
    Count(usize),
}

impl CompressThreads {
    /// Parses `auto` or a number of threads.
    pub fn parse(s: &str) -> std::result::Result<CompressThreads, String> {
        if s == "auto" {
            return Ok(CompressThreads::Auto);
        }
        match s.parse::<usize>() {
            Ok(n) if n <= trace::write::MAX_THREADS => Ok(CompressThreads::Count(n)),
            _ => Err(format!(
                "expected auto or a number of threads 0..={}",
                trace::write::MAX_THREADS
            )),
        }
    }

    /// The writer's thread count. `auto` gives lz4 and uncompressed output
    /// one thread: lz4 compresses at several GB/s on one core (see
    /// `trace::write::DEFAULT_BLOCK_SIZE`), faster than a 10 GbE link, so
    /// handing blocks over would cost more than it frees. zstd and gzip
    /// (some hundreds and some tens of MB/s per core) get more: gzip the
    /// cores less the one the capture's consumer runs on, at least 1 (the
    /// writing thread itself) and at most 4; zstd, whose frame has one
    /// compressor, a thread of its own wherever there is a second core.
    pub fn resolve(self, codec: Codec) -> usize {
        match (self, codec) {
            (CompressThreads::Count(n), _) => n,
            (CompressThreads::Auto, Codec::Lz4 | Codec::None) => 1,
            // One frame, one compressor: a thread of its own beside the
            // writing thread wherever there is a second core, as `zstd -1`
            // does (its default is one worker beside the main thread).
            // Inline on 2 cores a write of 1518-byte frames took 1.15 times
            // as long as `zstd -1`'s; with the thread, 1.0 (fixed payload)
            // and 0.89 (random 64-byte frames).
            (CompressThreads::Auto, Codec::Zstd) => cores().min(2),
            (CompressThreads::Auto, Codec::Gzip) => cores().saturating_sub(1).clamp(1, 4),
        }
    }
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// How to write a trace: the writer's settings, rotation, and the pcap
/// timestamp precision (`None`: as the input's first interface).
#[derive(Clone, Debug)]
pub struct TraceSettings {
    pub writer: WriterConfig,
    pub compress_threads: CompressThreads,
    pub rotation: RotateConfig,
    pub nanos: Option<bool>,
}

/// A writer that is opened when the first record arrives, so that pcap
/// output can take its timestamp precision from the input's first interface.
pub struct TraceSink {
    path: PathBuf,
    config: WriterConfig,
    rotation: RotateConfig,
    nanos: Option<bool>,
    /// A section header that came before the first interface or packet.
    pending_section: Option<Section>,
    state: State,
}

enum State {
    Pending,
    Files(Box<RotatingWriter>),
    Stdout(Box<TraceWriter<File>>),
}

/// What was written, for the closing summary.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SinkSummary {
    pub files: Vec<PathBuf>,
    pub packets: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub ratio: f64,
    pub blocks: u64,
    pub raw_blocks: u64,
    pub dropped_records: u64,
    /// Blocks stored raw without trying the compressor: it did not pay
    /// (`--compress-when pays`, the default of a live capture).
    pub skipped_blocks: u64,
    /// What the compressor was given and made of it, and the time it and
    /// the writes took: the figures of Shimizu et al. 2006's condition.
    pub compressed_in: u64,
    pub compressed_out: u64,
    pub compress_ns: u64,
    pub write_ns: u64,
    /// Nanoseconds the writer was blocked on the file system (writes of the
    /// trace and its index, syncs, waits for the write thread), the longest
    /// single block, and the part in syncs: where a capture's writer stalls.
    pub blocked_ns: u64,
    pub longest_block_ns: u64,
    pub sync_ns: u64,
    /// Files `-W`/`--max-total` deleted, and the bytes that freed (their
    /// seek indexes included); what this run wrote to them is counted
    /// above, their names are not in `files`.
    pub deleted_files: u64,
    pub deleted_bytes: u64,
    /// Derived: the compressor's throughput (MB/s of input), the writes'
    /// (MB/s written), the ratio of what was compressed, and whether
    /// compressing saved time by the condition T_c > T_d / (1 - r).
    pub compress_mb_s: f64,
    pub write_mb_s: f64,
    pub compress_ratio: f64,
    pub compression_pays: bool,
}

impl TraceSink {
    /// Checks the settings; nothing is created until the first record.
    pub fn new(path: &Path, s: &TraceSettings) -> Result<TraceSink> {
        let stdout = path.as_os_str() == "-";
        let mut config = s.writer.clone();
        config.threads = s.compress_threads.resolve(config.codec);
        // No sidecar beside standard output or a device (`-w /dev/full`).
        let special = std::fs::metadata(path).is_ok_and(|m| !m.is_file());
        config.index &= !stdout && !special;
        config.validate().map_err(|e| Error::usage(e.to_string()))?;
        if stdout && s.rotation != RotateConfig::default() {
            return Err(Error::usage(
                "-C and -G need a file name, not standard output",
            ));
        }
        s.rotation
            .validate()
            .map_err(|e| Error::usage(e.to_string()))?;
        Ok(TraceSink {
            path: path.to_path_buf(),
            config,
            rotation: s.rotation,
            nanos: s.nanos,
            pending_section: None,
            state: State::Pending,
        })
    }

    fn open(&mut self, tsresol: TsResolution) -> Result<()> {
        self.config.nanos = self.nanos.unwrap_or(tsresol != TsResolution::MICRO);
        self.state = if self.path.as_os_str() == "-" {
            // Write to a duplicate of fd 1 as a File: std's Stdout is line
            // buffered, which would split binary blocks at every 0x0a byte.
            let fd = io::stdout()
                .as_fd()
                .try_clone_to_owned()
                .map_err(|e| Error::output("standard output", &e))?;
            let w = TraceWriter::new(File::from(fd), self.config.clone())
                .map_err(|e| write_error(&self.path, e))?;
            State::Stdout(Box::new(w))
        } else {
            let mut w = RotatingWriter::new(&self.path, self.config.clone(), self.rotation)
                .map_err(|e| write_error(&self.path, e))?;
            w.on_delete(Box::new(|d, why| {
                eprintln!(
                    "kansoku: deleted {} ({} bytes): {why}",
                    display_path(&d.path),
                    d.bytes
                )
            }));
            State::Files(Box::new(w))
        };
        Ok(())
    }

    #[inline]
    fn write_opened(&mut self, rec: &Record) -> Result<()> {
        let r = match &mut self.state {
            State::Files(w) => w.write_record(rec),
            State::Stdout(w) => w.write_record(rec),
            State::Pending => Ok(()),
        };
        r.map_err(|e| write_error(&self.path, e))
    }

    /// Ends the current block now, so that a reader of the file sees every
    /// packet given so far (a one-packet block each time, if called per packet).
    pub fn flush_block(&mut self) -> Result<()> {
        let r = match &mut self.state {
            State::Files(w) => w.flush_block(),
            State::Stdout(w) => w.flush_block(),
            State::Pending => Ok(()),
        };
        r.map_err(|e| write_error(&self.path, e))
    }

    /// Closes the output properly (end mark, index) and says what was written.
    pub fn finish(self) -> Result<SinkSummary> {
        let written = match self.state {
            State::Pending => return Ok(SinkSummary::default().with_ratio()),
            State::Files(w) => w.finish().map_err(|e| write_error(&self.path, e))?,
            State::Stdout(w) => Rotated {
                files: vec![(
                    self.path.clone(),
                    w.finish().map_err(|e| write_error(&self.path, e))?,
                )],
                deleted: Vec::new(),
            },
        };
        let mut s = SinkSummary::default();
        for (path, stats) in written.files {
            s.add(&SinkSummary::of(path, &stats));
        }
        for d in written.deleted {
            let mut of = d
                .written
                .map(|w| SinkSummary::of(d.path, &w))
                .unwrap_or_default();
            of.files.clear();
            of.deleted_files = 1;
            of.deleted_bytes = d.bytes;
            s.add(&of);
        }
        Ok(s)
    }
}

impl PacketSink for TraceSink {
    /// Writes one record (sections, interfaces and other blocks too).
    #[inline]
    fn record(&mut self, rec: &Record) -> Result<()> {
        if matches!(self.state, State::Pending) {
            let tsresol = match rec {
                Record::Interface(i) => i.tsresol,
                Record::Packet(p) => p.tsresol,
                Record::Section(s) => {
                    // The precision comes from the first interface: wait for it.
                    self.pending_section = Some((*s).clone());
                    return Ok(());
                }
                Record::Block(_) => TsResolution::MICRO,
            };
            self.open(tsresol)?;
            if let Some(section) = self.pending_section.take() {
                self.write_opened(&Record::Section(&section))?;
            }
        }
        self.write_opened(rec)
    }

    /// Writes a packet with a default header (captures, generators).
    fn frame(&mut self, f: &Frame<'_>) -> Result<()> {
        if matches!(self.state, State::Pending) {
            self.open(TsResolution::NANO)?;
        }
        let r = match &mut self.state {
            State::Files(w) => w.write_packet(f.link_type, f.ts_ns, f.orig_len, f.data),
            State::Stdout(w) => w.write_packet(f.link_type, f.ts_ns, f.orig_len, f.data),
            State::Pending => Ok(()),
        };
        r.map_err(|e| write_error(&self.path, e))
    }

    /// The end of a capture's batch (its ring block given back): chunks
    /// gathered for a write go out now, not while the ring is held.
    fn flush(&mut self) -> Result<()> {
        let r = match &mut self.state {
            State::Files(w) => w.release(),
            State::Stdout(w) => w.release(),
            State::Pending => Ok(()),
        };
        r.map_err(|e| write_error(&self.path, e))
    }

    /// The input is quiet: the partial block is written (as its own chunk),
    /// so a kill now loses nothing given so far.
    fn idle(&mut self) -> Result<()> {
        self.flush_block()
    }
}

impl SinkSummary {
    fn of(path: PathBuf, s: &WriteStats) -> SinkSummary {
        SinkSummary {
            files: vec![path],
            packets: s.packets,
            bytes_in: s.bytes_in,
            bytes_out: s.bytes_out,
            ratio: 0.0,
            blocks: s.blocks,
            raw_blocks: s.raw_blocks,
            dropped_records: s.dropped_records,
            skipped_blocks: s.skipped_blocks,
            compressed_in: s.compressed_in,
            compressed_out: s.compressed_out,
            compress_ns: s.compress_ns,
            write_ns: s.write_ns,
            blocked_ns: s.blocked_ns,
            longest_block_ns: s.longest_block_ns,
            sync_ns: s.sync_ns,
            ..SinkSummary::default()
        }
        .with_ratio()
    }

    fn with_ratio(mut self) -> SinkSummary {
        self.ratio = if self.bytes_in == 0 {
            1.0
        } else {
            self.bytes_out as f64 / self.bytes_in as f64
        };
        let mb_s = |bytes: u64, ns: u64| {
            if ns == 0 {
                0.0
            } else {
                bytes as f64 * 1e3 / ns as f64
            }
        };
        self.compress_mb_s = mb_s(self.compressed_in, self.compress_ns);
        self.write_mb_s = mb_s(self.bytes_out, self.write_ns);
        self.compress_ratio = if self.compressed_in == 0 {
            1.0
        } else {
            self.compressed_out as f64 / self.compressed_in as f64
        };
        self.compression_pays = self.compressed_in > 0
            && self.write_mb_s > 0.0
            && self.compress_mb_s * (1.0 - self.compress_ratio) > self.write_mb_s;
        self
    }

    /// Adds another output's figures (rotated files, one file per ring).
    pub fn add(&mut self, o: &SinkSummary) {
        self.files.extend(o.files.iter().cloned());
        self.packets += o.packets;
        self.bytes_in += o.bytes_in;
        self.bytes_out += o.bytes_out;
        self.blocks += o.blocks;
        self.raw_blocks += o.raw_blocks;
        self.dropped_records += o.dropped_records;
        self.skipped_blocks += o.skipped_blocks;
        self.compressed_in += o.compressed_in;
        self.compressed_out += o.compressed_out;
        self.compress_ns += o.compress_ns;
        self.write_ns += o.write_ns;
        self.blocked_ns += o.blocked_ns;
        self.longest_block_ns = self.longest_block_ns.max(o.longest_block_ns);
        self.sync_ns += o.sync_ns;
        self.deleted_files += o.deleted_files;
        self.deleted_bytes += o.deleted_bytes;
        *self = std::mem::take(self).with_ratio();
    }

    /// `written 1000 packets to out.pcap.lz4: 1518000 -> 301234 bytes (ratio 0.198), 3 of 47 blocks stored raw`.
    pub fn describe(&self) -> String {
        let names: Vec<String> = self.files.iter().map(|p| display_path(p)).collect();
        let mut s = format!(
            "written {} packets to {}: {} -> {} bytes (ratio {:.3})",
            self.packets,
            if names.is_empty() {
                "(nothing)".to_string()
            } else {
                names.join(", ")
            },
            self.bytes_in,
            self.bytes_out,
            self.ratio
        );
        if self.deleted_files > 0 {
            s.push_str(&format!(
                "; {} older files deleted ({} bytes) to keep within -W/--max-total",
                self.deleted_files, self.deleted_bytes
            ));
        }
        if self.blocks > 0 {
            s.push_str(&format!(
                ", {} of {} blocks stored raw",
                self.raw_blocks, self.blocks
            ));
        }
        if self.skipped_blocks > 0 {
            s.push_str(&format!(
                " ({} without trying the compressor)",
                self.skipped_blocks
            ));
        }
        if self.compressed_in > 0 && self.write_ns > 0 {
            // Shimizu et al. 2006's condition, on the run's figures.
            let need = if self.compress_ratio < 1.0 {
                format!("{:.0} MB/s", self.write_mb_s / (1.0 - self.compress_ratio))
            } else {
                "never (nothing saved)".to_string()
            };
            s.push_str(&format!(
                "; the compressor ran at {:.0} MB/s to ratio {:.3} on the blocks it tried, the writes at {:.0} MB/s: \
                 compressing saves time when the compressor is faster than {need}, so it {}",
                self.compress_mb_s,
                self.compress_ratio,
                self.write_mb_s,
                if self.compression_pays { "paid" } else { "did not pay" }
            ));
        }
        if self.dropped_records > 0 {
            s.push_str(&format!(
                "; {} pcapng records the output format cannot hold were left out",
                self.dropped_records
            ));
        }
        s
    }

    /// Whether the trace itself went to standard output.
    pub fn on_stdout(&self) -> bool {
        self.files.iter().any(|p| p.as_os_str() == "-")
    }
}
