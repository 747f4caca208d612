//! Where packets are written (`-w` and its options) and the synthetic
//! traffic pattern (`synth`, `generate`).

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use pipeline::{CompressThreads, Error, TraceSettings, TraceSink};
use trace::format::Codec;
use trace::rotate::RotateConfig;
use trace::write::{CompressWhen, OutputFormat, WriterConfig};

/// The synthetic traffic pattern shared by `synth` and `generate`.
#[derive(Debug, Args)]
pub struct PatternArgs {
    /// Frame size in bytes (64–1518), or a range MIN-MAX for uniformly random sizes.
    #[arg(long, default_value = "64")]
    pub size: String,
    /// Payload bytes: one byte value repeated (compressible), random (incompressible), or the paper's 418-byte worm packet.
    #[arg(long, value_enum, default_value_t = PayloadArg::Random)]
    pub payload: PayloadArg,
    /// Transport protocol, or a mix of all three.
    #[arg(long, value_enum, default_value_t = ProtoArg::Mix)]
    pub proto: ProtoArg,
    /// IP version, or a mix of both.
    #[arg(long, value_enum, default_value_t = IpArg::V4)]
    pub ip: IpArg,
    /// VLAN ids to tag frames with, outermost first (e.g. 100,7 for 802.1ad over 802.1Q).
    #[arg(long, value_delimiter = ',')]
    pub vlan: Vec<u16>,
    /// Source addresses are random inside this prefix.
    #[arg(long, default_value = "10.0.0.0/8")]
    pub src_net: String,
    /// Destination addresses are random inside this prefix.
    #[arg(long, default_value = "192.168.1.0/24")]
    pub dst_net: String,
    /// Seed for the pseudo-random generator (same seed, same traffic).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Frames come from this many flows active at once, each a 5-tuple carrying a heavy-tailed number of frames
    /// (Pareto, shape 1.2, at least 2) before a new one takes its place, as on a real link; 0: every frame's
    /// addresses and ports are new.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub flows: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PayloadArg {
    Fixed,
    Random,
    Worm,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProtoArg {
    Tcp,
    Udp,
    Icmp,
    Mix,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum IpArg {
    #[value(name = "4")]
    V4,
    #[value(name = "6")]
    V6,
    Mix,
}

/// Where and how to write a trace.
#[derive(Debug, Args)]
pub struct OutputArgs {
    /// Write packets to this trace ("-" for standard output).
    #[arg(short = 'w', value_name = "FILE")]
    pub write: Option<PathBuf>,
    /// Output file format. Default: as the file's name says (x.pcapng, x.pcapng.zst), else pcap.
    #[arg(long, value_enum)]
    pub format: Option<FormatArg>,
    /// Compression of the output file. Default: as the file's name says (x.pcap.lz4, .zst, .gz; x.pcap: none), else lz4.
    #[arg(long = "compress", value_enum)]
    pub compress: Option<CompressArg>,
    /// Compression block (buffer) size in KiB: 4–64, zstd 4–128. Default: 32, zstd 128 (its own block size).
    #[arg(long, value_name = "KIB")]
    pub block_size: Option<usize>,
    /// Compression level (zstd 1–22, gzip 0–9; ignored for lz4 and none).
    #[arg(long)]
    pub level: Option<i32>,
    /// Timestamp precision of pcap output (default: as the input).
    #[arg(long, value_enum)]
    pub time_precision: Option<PrecisionArg>,
    /// Start a new file when this one exceeds SIZE millions of bytes (as tcpdump -C).
    #[arg(short = 'C', value_name = "SIZE")]
    pub rotate_size: Option<u64>,
    /// Start a new file every SECONDS of packet time (as tcpdump -G); strftime fields in the name are expanded.
    #[arg(short = 'G', value_name = "SECONDS")]
    pub rotate_seconds: Option<u64>,
    /// Do not write the seek index beside the trace.
    #[arg(long)]
    pub no_index: bool,
    /// Put the codec's own checksums in the stream (LZ4 block checksums, zstd's content checksum), so tshark, lz4 -t and zstd -t find damage too; costs 8-13% of write speed (the seek index's checksums cover kansoku's reads without it).
    #[arg(long)]
    pub checksums: bool,
    /// fdatasync after every block (slower; survives power loss, not just a crash).
    #[arg(long)]
    pub sync: bool,
    /// Write a partly filled block once the input (a pipe, a capture) has been quiet this many seconds, and at
    /// least this often while it flows, so a kill loses at most this long of input; 0: only full blocks.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0, value_parser = parse_idle)]
    pub idle_flush: f64,
    /// Compression threads; the file is the same whatever the number. 1: blocks are compressed on the writing thread; N >= 2: by N threads while it goes on (zstd: by one, its blocks continue one frame). auto (default): 1 for lz4 and none, for gzip the cores less one, 1 to 4, for zstd 2 where there are two cores (one compression thread beside the writing one, as zstd -1).
    #[arg(long, value_name = "N|auto", default_value = "auto", value_parser = CompressThreads::parse)]
    pub compress_threads: CompressThreads,
    /// When lz4 runs: always, or only while it saves the writer time by Shimizu et al. 2006's condition
    /// T_c > T_d / (1 - r) (compressor and write speed and ratio measured as it goes; blocks are stored raw without
    /// trying otherwise, with a trial now and then; the statistics say which and why). Default: pays for a live
    /// capture, always elsewhere.
    #[arg(long, value_enum)]
    pub compress_when: Option<CompressWhenArg>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompressWhenArg {
    Always,
    Pays,
}

fn parse_idle(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=3600.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "{s:?}: seconds from 0 to 3600 (0: only full blocks are written)"
        )),
    }
}

impl OutputArgs {
    /// How long a quiet input may leave a partial block unwritten.
    pub fn idle_flush(&self) -> Option<std::time::Duration> {
        (self.idle_flush > 0.0).then(|| std::time::Duration::from_secs_f64(self.idle_flush))
    }

    /// The trace writer's settings for a file at `path`: the format and
    /// codec its name says ([`trace::write::named`]) unless the flags say
    /// them, the flags' defaults (pcap, lz4) where neither does; a flag
    /// that contradicts the name is a usage error.
    pub fn settings(&self, path: &Path) -> Result<TraceSettings, Error> {
        self.settings_with(path, CompressWhen::Always)
    }

    /// [`settings`](Self::settings) with `when` where `--compress-when`
    /// is not given.
    pub fn settings_with(&self, path: &Path, when: CompressWhen) -> Result<TraceSettings, Error> {
        let (named_format, named_codec) = trace::write::named(path);
        let flag_format = self.format.map(|f| match f {
            FormatArg::Pcap => OutputFormat::Pcap,
            FormatArg::Pcapng => OutputFormat::Pcapng,
        });
        let flag_codec = self.compress.map(|c| match c {
            CompressArg::Lz4 => Codec::Lz4,
            CompressArg::Zstd => Codec::Zstd,
            CompressArg::Gzip => Codec::Gzip,
            CompressArg::None => Codec::None,
        });
        let shown = path.display();
        if let (Some(n), Some(f)) = (named_format, flag_format) {
            if n != f {
                return Err(Error::usage(format!(
                    "{shown}: the name says {n} and --format says {f}; name the file for the format \
                     (x{} for {f}) or leave --format out",
                    f.extension()
                )));
            }
        }
        if let (Some(n), Some(c)) = (named_codec, flag_codec) {
            if n != c {
                let says = |c: Codec| match c {
                    Codec::None => "no compression".to_string(),
                    c => c.name().to_string(),
                };
                return Err(Error::usage(format!(
                    "{shown}: the name says {} and --compress says {}; name the file for the codec \
                     (x.pcap{} for {}) or leave --compress out",
                    says(n),
                    says(c),
                    c.extension(),
                    says(c)
                )));
            }
        }
        let mut writer = WriterConfig {
            format: named_format.or(flag_format).unwrap_or(OutputFormat::Pcap),
            codec: named_codec.or(flag_codec).unwrap_or(Codec::Lz4),
            level: self.level,
            index: !self.no_index,
            sync: self.sync,
            stream_checksums: self.checksums,
            compress_when: match self.compress_when {
                Some(CompressWhenArg::Always) => CompressWhen::Always,
                Some(CompressWhenArg::Pays) => CompressWhen::Pays,
                None => when,
            },
            ..WriterConfig::default()
        };
        writer.block_size = self.block_size.map_or_else(
            || trace::write::default_block_size(writer.codec),
            |kib| kib.saturating_mul(1024),
        );
        Ok(TraceSettings {
            writer,
            compress_threads: self.compress_threads,
            rotation: RotateConfig::tcpdump(self.rotate_size, self.rotate_seconds),
            nanos: self.time_precision.map(|p| p == PrecisionArg::Nano),
        })
    }

    /// A sink for `path` with these settings.
    pub fn sink(&self, path: &Path) -> Result<TraceSink, Error> {
        TraceSink::new(path, &self.settings(path)?)
    }

    /// A sink for a live capture's `path`: compression only while it pays,
    /// unless `--compress-when` says otherwise.
    pub fn live_sink(&self, path: &Path) -> Result<TraceSink, Error> {
        let mut settings = self.settings_with(path, CompressWhen::Pays)?;
        settings.writer.write_on_release = true;
        TraceSink::new(path, &settings)
    }

    /// The sink of `-w`, if given.
    pub fn write_sink(&self) -> Result<Option<TraceSink>, Error> {
        self.write.as_deref().map(|p| self.sink(p)).transpose()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    Pcap,
    Pcapng,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompressArg {
    Lz4,
    Zstd,
    Gzip,
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PrecisionArg {
    Micro,
    Nano,
}
