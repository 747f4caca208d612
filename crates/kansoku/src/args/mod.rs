//! Command-line arguments, a module per group of commands. Flags follow
//! tcpdump where a user would reach for them (`-r`, `-w`, `-c`, `-C`, `-G`).

mod analysis;
mod ipsec;
mod web;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

pub use analysis::*;
pub use ipsec::*;
pub use pipeline::cli::{
    AnonArgs, CaptureArgs, ExpressionArgs, GenerateArgs, LastExpressionArgs, OutputArgs,
    ProfileArgs, StoreAction, StoreArgs, SummaryFormatArg, VerifyArgs,
};
pub use synth::cli::PatternArgs;
pub use web::*;

/// kansoku (観測): capture, store, filter and profile network traffic.
#[derive(Debug, Parser)]
#[command(name = "kansoku", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

impl Command {
    /// Whether this command was told not to check indexed traces' chunks
    /// (`--no-verify`); commands that read no trace never are.
    pub fn no_verify(&self) -> bool {
        let verify = match self {
            Command::Read(a) => &a.verify,
            Command::Stats(a) => &a.verify,
            Command::Generate(a) => &a.verify,
            Command::Profile(a) => &a.verify,
            Command::Filter(a) => match &a.command {
                None => &a.run.verify,
                Some(FilterCommand::Run(r)) => &r.verify,
                Some(_) => return false,
            },
            Command::Ipsec(a) => match &a.command {
                IpsecCommand::Encap(t) | IpsecCommand::Decap(t) => &t.verify,
                IpsecCommand::Gateway(_) => return false,
            },
            _ => return false,
        };
        verify.no_verify
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print a trace's packets, one line each, or convert it with -w.
    Read(ReadArgs),
    /// Make a trace fit to publish: Crypto-PAn addresses, payload removed, checksums kept right (`anon --policy`).
    Anon(AnonArgs),
    /// Summarize a trace: packets, bytes, duration, link types, protocol mix, compression.
    Stats(StatsArgs),
    /// Write a trace's seek index (FILE.kidx) anew from the trace: after the index was lost or damaged, or for a
    /// file another tool compressed (gzip members, independent LZ4 blocks, zstd).
    Index(IndexArgs),
    /// Capture packets live from an interface (AF_PACKET, TPACKET_V3 ring) into a trace, or print them.
    Capture(CaptureArgs),
    /// Send traffic out of an interface at an exact packet or bit rate: a built-in pattern, or a trace replayed.
    Generate(GenerateArgs),
    /// Write a synthetic trace (fixed or random payloads, 64–1518-byte frames, TCP/UDP/ICMP, IPv4/IPv6, VLAN tags).
    Synth(SynthArgs),
    /// Filter packets with rules (`ip filter N pass|reject SIP DIP PROTO SPT DPT`, or ClassBench); explain, lint, match.
    Filter(FilterArgs),
    /// Profile traffic as aguri does: top source/destination prefixes and protocol:port ranges per interval.
    Profile(ProfileArgs),
    /// Benchmarks against a baseline measured in the same run: `bench filter` (the engines and the paper's cost
    /// model), `bench disk`, `bench compress`, `bench capture` (capture rate vs offered load).
    Bench(bench::BenchArgs),
    /// IPsec in userspace (ESP, AH; setkey SA files): protect or check a trace's packets, or run unmodified
    /// programs' traffic through kansoku's ESP/AH (`ipsec gateway`).
    Ipsec(IpsecArgs),
    /// Plot aguri summaries: total traffic and the top aggregates over time (SVG, PNG or HTML).
    Plot(PlotArgs),
    /// Serve an agurim-like view of a directory of summaries: stacked series of bytes and packets, zoom,
    /// drill-down, a JSON API (`kansoku web DIR`, then open http://127.0.0.1:8080/).
    Web(WebArgs),
    /// The fleet store in ClickHouse: `store init`, `store status`, `store export -w DIR`.
    Store(StoreArgs),
    /// Put a round-trip time per client address on real packets (NFQUEUE, held verdicts), as netem or dummynet
    /// would, for any program: `kansoku delay --clients 100 --profile lognormal:median=48ms,sigma=1 -- CMD`.
    Delay(DelayArgs),
    /// Benchmark a web server as real clients load it: many source addresses, each with its own round trip
    /// (--delay), closed or open model, per-request times, latency percentiles without coordinated omission.
    Webbench(webbench::cli::WebbenchArgs),
    /// Print a completion script for a shell: `kansoku completions bash > /etc/bash_completion.d/kansoku`.
    Completions(CompletionsArgs),
    /// Print kansoku's manual page (roff), generated from these definitions: `kansoku man > kansoku.1`.
    Man,
}

#[derive(Debug, Args)]
pub struct ReadArgs {
    #[command(flatten)]
    pub verify: VerifyArgs,
    /// Trace to read: pcap or pcapng, plain or gzip/zstd/lz4 compressed ("-" for standard input).
    #[arg(short = 'r', value_name = "FILE")]
    pub read: PathBuf,
    /// Stop after this many packets.
    #[arg(short = 'c', value_name = "COUNT")]
    pub count: Option<u64>,
    /// Only packets at or after this time (epoch seconds like 1795317433.5, or RFC 3339).
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Only packets before this time (epoch seconds or RFC 3339).
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
    /// Print one JSON object per packet instead of text.
    #[arg(long)]
    pub json: bool,
    /// How to print times: seconds since the epoch, or RFC 3339 in UTC.
    #[arg(long, value_enum, default_value_t = TimeFormat::Epoch)]
    pub time: TimeFormat,
    /// Write the packets to a trace instead of printing them (convert or recompress).
    #[command(flatten)]
    pub out: OutputArgs,
    /// The packets to read: tcpdump's filter expression.
    #[command(flatten)]
    pub select: ExpressionArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TimeFormat {
    Epoch,
    Rfc3339,
}

impl From<TimeFormat> for pipeline::sink::lines::TimeFormat {
    fn from(t: TimeFormat) -> Self {
        match t {
            TimeFormat::Epoch => Self::Epoch,
            TimeFormat::Rfc3339 => Self::Rfc3339,
        }
    }
}

#[derive(Debug, Args)]
pub struct IndexArgs {
    /// Traces to index.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<std::path::PathBuf>,
}

#[derive(Debug, Args)]
pub struct StatsArgs {
    #[command(flatten)]
    pub verify: VerifyArgs,
    /// Traces to summarize.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// The packets to count: tcpdump's filter expression.
    #[command(flatten)]
    pub select: LastExpressionArgs,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SynthArgs {
    /// Number of packets.
    #[arg(short = 'c', long, default_value_t = 10_000)]
    pub count: u64,
    #[command(flatten)]
    pub pattern: PatternArgs,
    /// Packets per second of trace time (sets the timestamp step).
    #[arg(long, default_value_t = 1_000_000.0)]
    pub rate: f64,
    /// Time of the first packet (epoch seconds or RFC 3339); default 2026-01-01T00:00:00Z.
    #[arg(long)]
    pub start: Option<String>,
    /// Print the closing summary as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub out: OutputArgs,
}

/// `kansoku completions SHELL`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete in.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}
