//! What the pipeline reads and writes: `--no-verify` ([`VerifyArgs`]), `-w`
//! and its settings ([`OutputArgs`]), and the fleet store beside a run's
//! summaries ([`StoreOpts`]).

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use trace::format::Codec;
use trace::rotate::RotateConfig;
use trace::write::{CompressWhen, OutputFormat, WriterConfig};

use crate::error::Error;
use crate::sink::fleet::FleetOptions;
use crate::sink::trace::{CompressThreads, TraceSettings, TraceSink};

/// Whether reads check an indexed trace's chunks: on the commands that read
/// traces, and only there.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// Do not check the chunks of an indexed trace against the checksums in its index (faster reads; corrupt
    /// data then goes unnoticed where the codec itself does not catch it).
    #[arg(long)]
    pub no_verify: bool,
}

/// Where and how to write a trace.
#[derive(Debug, Args)]
pub struct OutputArgs {
    /// Write packets to this trace ("-" for standard output).
    #[arg(short = 'w', value_name = "FILE")]
    pub write: Option<PathBuf>,
    /// Output file format. Default: as the file's name says (x.pcapng, x.pcapng.zst), else pcap.
    #[arg(long, value_enum)]
    pub format: Option<OutputFormat>,
    /// Compression of the output file. Default: as the file's name says (x.pcap.lz4, .zst, .gz; x.pcap: none), else lz4.
    #[arg(long = "compress", value_enum)]
    pub compress: Option<Codec>,
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
    /// With -C or -G: keep the newest N files of the rotation, deleting the oldest (and their indexes) as each
    /// new one starts; files an earlier run of the same name left count too. Each deletion is logged.
    #[arg(short = 'W', value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub rotate_files: Option<u64>,
    /// With -C or -G: keep the rotation's files within SIZE bytes (K, M, G, T: powers of 1000; KiB, MiB, GiB,
    /// TiB: of 1024), deleting the oldest as each new one starts, as n2disk's disk limit. Each deletion is logged.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub max_total: Option<u64>,
    /// Do not write the seek index beside the trace (nor the key index).
    #[arg(long)]
    pub no_index: bool,
    /// Do not write the key index (`.kkeys`: the addresses, ports and protocols of each chunk, which let a
    /// query in tcpdump's language read only the chunks that can hold a match); the seek index still serves
    /// time windows.
    #[arg(long)]
    pub no_keys: bool,
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
    pub compress_when: Option<CompressWhen>,
}

/// A size in bytes: a whole number with an optional unit (`500M`, `2GiB`,
/// `1.5T`), at least 1 byte.
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "m" | "mb" => 1_000_000,
        "g" | "gb" => 1_000_000_000,
        "t" | "tb" => 1_000_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        _ => return Err(format!("{s:?}: a size such as 500M, 20G or 2TiB")),
    };
    let bytes = num
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .map(|v| v * scale as f64)
        .filter(|b| (1.0..1.8e19).contains(b))
        .ok_or_else(|| format!("{s:?}: a size from 1 byte to 18 EB, such as 500M, 20G or 2TiB"))?;
    Ok(bytes as u64)
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
        let flag_format = self.format;
        let flag_codec = self.compress;
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
            keys: !self.no_keys,
            sync: self.sync,
            stream_checksums: self.checksums,
            compress_when: self.compress_when.unwrap_or(when),
            ..WriterConfig::default()
        };
        writer.block_size = self.block_size.map_or_else(
            || trace::write::default_block_size(writer.codec),
            |kib| kib.saturating_mul(1024),
        );
        Ok(TraceSettings {
            writer,
            compress_threads: self.compress_threads,
            rotation: RotateConfig {
                max_files: self.rotate_files,
                max_total_bytes: self.max_total,
                ..RotateConfig::tcpdump(self.rotate_size, self.rotate_seconds)
            },
            nanos: self.time_precision.map(|p| p == PrecisionArg::Nano),
        })
    }

    /// A sink for `path` with these settings.
    pub fn sink(&self, path: &Path) -> Result<TraceSink, Error> {
        let mut settings = self.settings(path)?;
        settings.writer.write_thread = true;
        TraceSink::new(path, &settings)
    }

    /// A sink for a live capture's `path`: compression only while it pays,
    /// unless `--compress-when` says otherwise.
    /// Its writes stay on the lane's thread: a write thread beside it on
    /// the capture's core lost frames where the lane alone lost none
    /// (bench/busy-box-results.md).
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
pub enum PrecisionArg {
    Micro,
    Nano,
}

/// How to reach the fleet store, besides its URL.
#[derive(Debug, Args)]
pub struct StoreOpts {
    /// A file whose first line is USER:PASSWORD for the store (instead of the environment).
    #[arg(long, value_name = "FILE")]
    pub store_credentials: Option<PathBuf>,
    /// This probe's name in the store (letters, digits, _, -, .); default: the host name.
    #[arg(long, value_name = "NAME")]
    pub probe: Option<String>,
    /// Where summaries wait for the store (default: ~/.local/state/kansoku/spool).
    #[arg(long, value_name = "DIR")]
    pub spool: Option<PathBuf>,
}

impl StoreOpts {
    pub fn fleet(&self) -> FleetOptions<'_> {
        FleetOptions {
            credentials: self.store_credentials.as_deref(),
            probe: self.probe.as_deref(),
            spool: self.spool.as_deref(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_take_decimal_and_binary_units() {
        assert_eq!(parse_size("500M"), Ok(500_000_000));
        assert_eq!(parse_size("2TiB"), Ok(2 << 40));
        assert_eq!(parse_size("1.5g"), Ok(1_500_000_000));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("7 MB"), Ok(7_000_000));
        for bad in [
            "",
            "0",
            "0.4",
            "M",
            "-1G",
            "1e3",
            "20 parsecs",
            "99999999999T",
            "1..2G",
        ] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
    }
}
