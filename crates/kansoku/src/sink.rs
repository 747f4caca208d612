//! Where `-w` sends packets: a trace file (rotated as tcpdump's -C/-G) or
//! standard output, through the trace store's writer.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use serde::Serialize;
use trace::format::Codec;
use trace::rotate::{RotateConfig, RotatingWriter};
use trace::write::{OutputFormat, TraceWriter, WriteStats, WriterConfig};
use trace::{Record, Section, TsResolution};

use crate::cli::{CompressArg, FormatArg, OutputArgs, PrecisionArg};
use crate::error::{display_path, CliError, CliResult};

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
    pub fn parse(s: &str) -> Result<CompressThreads, String> {
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
    /// (some hundreds and some tens of MB/s per core) get the cores less
    /// the one the capture's consumer runs on, at least 1 and at most 4.
    pub fn resolve(self, codec: Codec) -> usize {
        match (self, codec) {
            (CompressThreads::Count(n), _) => n,
            (CompressThreads::Auto, Codec::Lz4 | Codec::None) => 1,
            (CompressThreads::Auto, Codec::Zstd | Codec::Gzip) => {
                let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
                cores.saturating_sub(1).clamp(1, 4)
            }
        }
    }
}

/// A writer that is opened when the first record arrives, so that pcap
/// output can take its timestamp precision from the input's first interface.
pub struct Sink {
    path: PathBuf,
    config: WriterConfig,
    rotation: RotateConfig,
    precision: Option<PrecisionArg>,
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
#[derive(Debug, Serialize)]
pub struct SinkSummary {
    pub files: Vec<PathBuf>,
    pub packets: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub ratio: f64,
    pub blocks: u64,
    pub raw_blocks: u64,
    pub dropped_records: u64,
}

impl Sink {
    /// Validates the output settings; nothing is created until the first record.
    pub fn new(args: &OutputArgs, path: &Path) -> CliResult<Sink> {
        let mut config = WriterConfig {
            format: match args.format {
                FormatArg::Pcap => OutputFormat::Pcap,
                FormatArg::Pcapng => OutputFormat::Pcapng,
            },
            codec: match args.compress {
                CompressArg::Lz4 => Codec::Lz4,
                CompressArg::Zstd => Codec::Zstd,
                CompressArg::Gzip => Codec::Gzip,
                CompressArg::None => Codec::None,
            },
            level: args.level,
            index: !args.no_index && path.as_os_str() != "-",
            sync: args.sync,
            flush_each_record: args.flush_each_packet,
            ..WriterConfig::default()
        };
        if let Some(mbps) = args.disk_mbps {
            if !(mbps > 0.0 && mbps.is_finite()) {
                return Err(CliError::input("--disk-mbps must be a positive number"));
            }
            config.disk_bytes_per_sec = Some((mbps * 1e6).max(1.0) as u64);
        }
        if let Some(kib) = args.block_size {
            config.block_size = kib.saturating_mul(1024);
        }
        config.threads = args.compress_threads.resolve(config.codec);
        config
            .validate()
            .map_err(|e| CliError::input(e.to_string()))?;
        if path.as_os_str() == "-" && (args.rotate_size.is_some() || args.rotate_seconds.is_some())
        {
            return Err(CliError::input(
                "-C and -G need a file name, not standard output",
            ));
        }
        let rotation = RotateConfig::tcpdump(args.rotate_size, args.rotate_seconds);
        rotation
            .validate()
            .map_err(|e| CliError::input(e.to_string()))?;
        Ok(Sink {
            path: path.to_path_buf(),
            config,
            rotation,
            precision: args.time_precision,
            pending_section: None,
            state: State::Pending,
        })
    }

    fn open(&mut self, tsresol: TsResolution) -> CliResult<()> {
        self.config.nanos = match self.precision {
            Some(PrecisionArg::Nano) => true,
            Some(PrecisionArg::Micro) => false,
            None => tsresol != TsResolution::MICRO,
        };
        self.state = if self.path.as_os_str() == "-" {
            // Write to a duplicate of fd 1 as a File: std's Stdout is line
            // buffered, which would split binary blocks at every 0x0a byte.
            let fd = io::stdout().as_fd().try_clone_to_owned()?;
            let w =
                TraceWriter::new(File::from(fd), self.config.clone()).map_err(|e| self.error(e))?;
            State::Stdout(Box::new(w))
        } else {
            let w = RotatingWriter::new(&self.path, self.config.clone(), self.rotation)
                .map_err(|e| self.error(e))?;
            State::Files(Box::new(w))
        };
        Ok(())
    }

    fn error(&self, e: impl std::fmt::Display) -> CliError {
        CliError::input(format!("{}: {e}", display_path(&self.path)))
    }

    /// Writes one record (sections, interfaces and other blocks too).
    pub fn write(&mut self, rec: &Record) -> CliResult<()> {
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

    fn write_opened(&mut self, rec: &Record) -> CliResult<()> {
        let r = match &mut self.state {
            State::Files(w) => w.write_record(rec),
            State::Stdout(w) => w.write_record(rec),
            State::Pending => Ok(()),
        };
        r.map_err(|e| self.error(e))
    }

    /// Writes a packet with a default header (generators).
    pub fn write_packet(
        &mut self,
        link_type: wire::LinkType,
        ts_ns: u64,
        orig_len: u32,
        data: &[u8],
    ) -> CliResult<()> {
        if matches!(self.state, State::Pending) {
            self.open(TsResolution::NANO)?;
        }
        let r = match &mut self.state {
            State::Files(w) => w.write_packet(link_type, ts_ns, orig_len, data),
            State::Stdout(w) => w.write_packet(link_type, ts_ns, orig_len, data),
            State::Pending => Ok(()),
        };
        r.map_err(|e| self.error(e))
    }

    /// Closes the output properly (end mark, index) and says what was written.
    pub fn finish(self) -> CliResult<SinkSummary> {
        let written: Vec<(PathBuf, WriteStats)> = match self.state {
            State::Pending => return Ok(SinkSummary::empty()),
            State::Files(w) => w
                .finish()
                .map_err(|e| CliError::input(format!("{}: {e}", display_path(&self.path))))?,
            State::Stdout(w) => vec![(
                self.path.clone(),
                w.finish()
                    .map_err(|e| CliError::input(format!("{}: {e}", display_path(&self.path))))?,
            )],
        };
        let mut stats = WriteStats::default();
        for (_, s) in &written {
            stats.packets += s.packets;
            stats.bytes_in += s.bytes_in;
            stats.bytes_out += s.bytes_out;
            stats.blocks += s.blocks;
            stats.raw_blocks += s.raw_blocks;
            stats.dropped_records += s.dropped_records;
        }
        let files = written.into_iter().map(|(p, _)| p).collect();
        Ok(SinkSummary {
            files,
            packets: stats.packets,
            bytes_in: stats.bytes_in,
            bytes_out: stats.bytes_out,
            ratio: if stats.bytes_in == 0 {
                1.0
            } else {
                stats.bytes_out as f64 / stats.bytes_in as f64
            },
            blocks: stats.blocks,
            raw_blocks: stats.raw_blocks,
            dropped_records: stats.dropped_records,
        })
    }
}

impl SinkSummary {
    fn empty() -> SinkSummary {
        SinkSummary {
            files: Vec::new(),
            packets: 0,
            bytes_in: 0,
            bytes_out: 0,
            ratio: 1.0,
            blocks: 0,
            raw_blocks: 0,
            dropped_records: 0,
        }
    }

    /// Prints the closing summary: as JSON on standard output (on standard
    /// error when the trace itself went to standard output), else as a line
    /// on standard error.
    pub fn report(&self, json: bool) -> CliResult<()> {
        let trace_on_stdout = self.files.iter().any(|p| p.as_os_str() == "-");
        if !json {
            eprintln!("kansoku: {}", self.describe());
        } else if trace_on_stdout {
            eprintln!("{}", serde_json::to_string(self).map_err(io::Error::from)?);
        } else {
            let mut o = io::stdout().lock();
            serde_json::to_writer(&mut o, self).map_err(io::Error::from)?;
            writeln!(o)?;
        }
        Ok(())
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
        if self.blocks > 0 {
            s.push_str(&format!(
                ", {} of {} blocks stored raw",
                self.raw_blocks, self.blocks
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
}
