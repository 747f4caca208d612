//! The options of the commands on a live interface: `capture` (the ring
//! source, its lanes and stages) and `generate` (the transmit sink).

use std::path::PathBuf;
use std::time::Duration;

use std::ffi::OsString;
use std::path::Path;

use aguri::ProfilerConfig;
use clap::Args;

use crate::error::{Error, Result};
use crate::stage::profile::interval_ns;

use super::{ExpressionArgs, OutputArgs, StoreOpts, VerifyArgs};
use synth::cli::PatternArgs;

#[derive(Debug, Args)]
pub struct CaptureArgs {
    /// Interface to capture on.
    #[arg(short = 'i', value_name = "IFACE")]
    pub interface: String,
    /// Bytes to keep of each packet (the kernel cuts the rest).
    #[arg(short = 's', value_name = "SNAPLEN", default_value_t = 262_144)]
    pub snaplen: u32,
    /// Ring buffer size in MiB.
    #[arg(short = 'B', value_name = "MIB", default_value_t = 32)]
    pub buffer_mib: usize,
    /// Ring block size in KiB (a power of two); the kernel hands over a block when it is full or
    /// after 10 ms. Default: a sixteenth of the ring, from 256 KiB to 1 MiB.
    #[arg(long, value_name = "KIB")]
    pub ring_block_kib: Option<usize>,
    /// Stop after this many packets.
    #[arg(short = 'c', value_name = "COUNT")]
    pub count: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    pub duration: Option<Duration>,
    /// Drop root privileges to this user once the capture socket is open (as tcpdump -Z). Output files and
    /// --profile summaries are then created as USER, so their directory must be writable by USER.
    #[arg(short = 'Z', value_name = "USER")]
    pub user: Option<String>,
    /// MiB of packet data the writer's queue holds before kansoku drops packets (and counts them); with --fanout,
    /// each ring has a queue of this size. 0 lets one ring block at a time through.
    #[arg(long, value_name = "MIB", default_value_t = 64)]
    pub queue_mib: usize,
    /// Keep only packets these filter rules pass (`ip filter N pass|reject ...`); rejected ones are counted, not written.
    /// SIGHUP reads the file again: each ring uses the new rules from its next batch, no packet is lost, and the
    /// statistics count each rule set (generation) apart. A file that does not parse leaves the rules as they were.
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
    /// Profile the kept packets as `kansoku profile` does, one summary file per interval in this directory.
    #[arg(long, value_name = "DIR")]
    pub profile: Option<PathBuf>,
    /// Length of a --profile interval.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 300,
        requires = "profile"
    )]
    pub profile_interval: u64,
    /// Percent of an interval's traffic a --profile entry needs to be listed.
    #[arg(
        long,
        value_name = "PERCENT",
        default_value_t = 1.0,
        requires = "profile"
    )]
    pub profile_threshold: f64,
    /// Also send every --profile summary to a fleet store (`http://HOST:8123/DB`), through a spool (see
    /// `kansoku profile --store`).
    #[arg(long, value_name = "URL", requires = "profile")]
    pub store: Option<String>,
    #[command(flatten)]
    pub store_opts: StoreOpts,
    /// Spread packets over N rings by flow hash (PACKET_FANOUT), one thread and one output file each:
    /// -w FILE writes FILE.0, FILE.1, ...; statistics are summed. Needs -w FILE; not with -c or --profile.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub fanout: u16,
    /// Print the final statistics as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub out: OutputArgs,
    /// The packets to capture: tcpdump's filter expression, compiled by libpcap for the interface and run by
    /// the kernel on every ring, so that packets it rejects are never copied.
    #[command(flatten)]
    pub select: ExpressionArgs,
}

#[derive(Debug, Args)]
pub struct GenerateArgs {
    #[command(flatten)]
    pub verify: VerifyArgs,
    /// Interface to send on.
    #[arg(short = 'i', value_name = "IFACE")]
    pub interface: String,
    /// Packets to send (default: the whole replayed trace, or until --duration).
    #[arg(short = 'c', long)]
    pub count: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    pub duration: Option<Duration>,
    /// Send at this many packets per second.
    #[arg(long, conflicts_with = "mbps")]
    pub pps: Option<f64>,
    /// Send at this many megabits per second of frame bytes (no preamble or gap).
    #[arg(long)]
    pub mbps: Option<f64>,
    /// Replay this trace (pcap or pcapng, any compression) instead of a built-in pattern.
    #[arg(short = 'r', value_name = "FILE")]
    pub replay: Option<PathBuf>,
    /// With -r: send each packet at its recorded time offset.
    #[arg(long, requires = "replay")]
    pub recorded_timing: bool,
    /// The built-in pattern. Here --size counts the frame on the wire, FCS included (64–1518, as RFC 2544).
    #[command(flatten)]
    pub pattern: PatternArgs,
    /// Print the closing report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also write every frame sent, stamped with its send time, to -w FILE.
    #[command(flatten)]
    pub out: OutputArgs,
    /// With -r: the packets to replay, by tcpdump's filter expression.
    #[command(flatten)]
    pub select: ExpressionArgs,
}

/// Seconds as a number (`2.5`), finite, from 0 to a year: a usage error,
/// never a panic, otherwise (Duration::from_secs_f64 panics on
/// `1e300`, `-1` and `NaN`).
fn parse_seconds(s: &str) -> std::result::Result<Duration, String> {
    const YEAR: f64 = 365.0 * 86400.0;
    match s.parse::<f64>() {
        Ok(v) if (0.0..=YEAR).contains(&v) => {
            Duration::try_from_secs_f64(v).map_err(|e| format!("{s:?}: {e}"))
        }
        _ => Err(format!("{s:?}: a number of seconds from 0 to {YEAR}")),
    }
}

/// `FILE.i`: the output of ring `i` under --fanout.
pub fn lane_path(path: &Path, i: usize) -> PathBuf {
    let mut s = OsString::from(path.as_os_str());
    s.push(format!(".{i}"));
    PathBuf::from(s)
}

impl CaptureArgs {
    /// The profiler `--profile-interval` and `--profile-threshold` describe.
    pub fn profiler_config(&self) -> Result<ProfilerConfig> {
        let args = self;
        let cfg = ProfilerConfig {
            interval_ns: interval_ns(args.profile_interval, "--profile-interval")?,
            threshold: args.profile_threshold,
            ..ProfilerConfig::default()
        };
        cfg.validate()
            .map_err(|e| Error::usage(format!("--profile: {e}")))?;
        Ok(cfg)
    }

    /// What cannot be checked by clap: `--fanout n` with what it needs.
    pub fn check(&self, n: usize) -> Result<()> {
        let args = self;
        if n == 0 {
            return Err(Error::usage("--fanout must be at least 1"));
        }
        if n > 1 {
            // One writer per ring: each needs a file of its own, and a count or
            // a profile would need the rings to agree on an order they lack.
            if args
                .out
                .write
                .as_deref()
                .is_none_or(|p| p.as_os_str() == "-")
            {
                return Err(Error::usage(
                    "--fanout needs -w FILE (each ring writes FILE.0, FILE.1, ...)",
                ));
            }
            if args.count.is_some() || args.profile.is_some() {
                return Err(Error::usage(
                    "--fanout does not work with -c or --profile (stop with --duration or Ctrl-C)",
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::parse_seconds;
    use std::time::Duration;

    #[test]
    fn seconds_are_numbers_from_zero_to_a_year() {
        assert_eq!(parse_seconds("2.5"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_seconds("0"), Ok(Duration::ZERO));
        for bad in ["-1", "NaN", "inf", "1e300", "1e8", "", "2s"] {
            assert!(parse_seconds(bad).is_err(), "{bad}");
        }
    }
}
