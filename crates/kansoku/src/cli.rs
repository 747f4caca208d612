//! Command-line arguments. Flags follow tcpdump where a user would reach for
//! them (`-r`, `-w`, `-c`, `-C`, `-G`).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// kansoku (観測): capture, store, filter and profile network traffic.
#[derive(Debug, Parser)]
#[command(name = "kansoku", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print a trace's packets, one line each, or convert it with -w.
    Read(ReadArgs),
    /// Summarize a trace: packets, bytes, duration, link types, protocol mix, compression.
    Stats(StatsArgs),
    /// Capture packets live from an interface (AF_PACKET, TPACKET_V3 ring) into a trace, or print them.
    Capture(CaptureArgs),
    /// Send traffic out of an interface at an exact packet or bit rate: a built-in pattern, or a trace replayed.
    Generate(GenerateArgs),
    /// Write a synthetic trace (fixed or random payloads, 64–1518-byte frames, TCP/UDP/ICMP, IPv4/IPv6, VLAN tags).
    Synth(SynthArgs),
    /// Filter packets with rules (`ip filter N pass|reject SIP DIP PROTO SPT DPT`, or ClassBench); explain, lint, match.
    Filter(FilterArgs),
    /// Benchmarks: `bench filter` (engines and the paper's cost model), `bench disk`, `bench compress`.
    Bench(BenchArgs),
    /// Profile traffic as aguri does: top source/destination prefixes and protocol:port ranges per interval.
    Profile(ProfileArgs),
    /// Plot aguri summaries: total traffic and the top aggregates over time (SVG, PNG or HTML).
    Plot(PlotArgs),
}

#[derive(Debug, Args)]
pub struct ReadArgs {
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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TimeFormat {
    Epoch,
    Rfc3339,
}

#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Traces to summarize.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
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
    /// Output file format.
    #[arg(long, value_enum, default_value_t = FormatArg::Pcap)]
    pub format: FormatArg,
    /// Compression of the output file.
    #[arg(long = "compress", value_enum, default_value_t = CompressArg::Lz4)]
    pub compress: CompressArg,
    /// Compression block (buffer) size in KiB, 4–64.
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
    /// fdatasync after every block (slower; survives power loss, not just a crash).
    #[arg(long)]
    pub sync: bool,
    /// Experiments: write (and compress) each packet on its own, one write() per packet, as libpcap's pcap_dump.
    #[arg(long)]
    pub flush_each_packet: bool,
    /// Experiments: emulate a disk that writes this many MB/s (10^6 bytes), sleeping after each write.
    #[arg(long, value_name = "MB/S")]
    pub disk_mbps: Option<f64>,
    /// Compression threads; the file is the same whatever the number. 1: blocks are compressed on the writing thread; N >= 2: by N threads while it goes on (zstd: by one, its blocks continue one frame). auto (default): 1 for lz4 and none, for zstd and gzip the cores less one, 1 to 4.
    #[arg(long, value_name = "N|auto", default_value = "auto", value_parser = crate::sink::CompressThreads::parse)]
    pub compress_threads: crate::sink::CompressThreads,
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

/// `kansoku filter`: run rules over a trace (`-r`), or one of the subcommands.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct FilterArgs {
    #[command(subcommand)]
    pub command: Option<FilterCommand>,
    #[command(flatten)]
    pub run: FilterRunArgs,
}

#[derive(Debug, Subcommand)]
pub enum FilterCommand {
    /// Filter a trace: per-rule hits, passed and rejected totals (the default with -r).
    Run(FilterRunArgs),
    /// Which rule matches a packet like `tcp 10.0.0.1:1234 > 10.0.0.2:25 flags A`, and which later rules also do.
    Explain(FilterExplainArgs),
    /// Rules that can never match (shadowed) and overlapping rules with different actions.
    Lint(FilterLintArgs),
    /// Classify a ClassBench header trace: one line per header, the id of the first matching rule or `none`.
    Match(FilterMatchArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineArg {
    Linear,
    Fast,
}

#[derive(Debug, Args)]
pub struct FilterRunArgs {
    /// Trace to filter (pcap or pcapng, plain or compressed; "-" for standard input).
    #[arg(short = 'r', value_name = "FILE", required = true)]
    pub read: Option<PathBuf>,
    /// Rule file: the paper's syntax, or ClassBench (lines starting with `@`).
    #[arg(long, value_name = "FILE", required = true)]
    pub rules: Option<PathBuf>,
    /// Also write the rejected packets here (same format options as -w).
    #[arg(long, value_name = "FILE")]
    pub rejected: Option<PathBuf>,
    /// Classifier engine.
    #[arg(long, value_enum, default_value_t = EngineArg::Fast)]
    pub engine: EngineArg,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Write the passed packets here.
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Debug, Args)]
pub struct FilterExplainArgs {
    /// Rule file.
    #[arg(long, value_name = "FILE")]
    pub rules: PathBuf,
    /// The packet: `PROTO SRC[:PORT] > DST[:PORT] [flags LETTERS]` (IPv6 as [addr]:port).
    #[arg(required = true, num_args = 1.., allow_hyphen_values = true, value_name = "PACKET")]
    pub packet: Vec<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct FilterLintArgs {
    /// Rule file.
    #[arg(long, value_name = "FILE")]
    pub rules: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct FilterMatchArgs {
    /// Rule file.
    #[arg(long, value_name = "FILE")]
    pub rules: PathBuf,
    /// Header trace in ClassBench's format (SRC DST SPORT DPORT PROTO ...), plain or zstd ("-" for standard input).
    #[arg(long, value_name = "FILE")]
    pub trace: PathBuf,
    /// Classifier engine.
    #[arg(long, value_enum, default_value_t = EngineArg::Fast)]
    pub engine: EngineArg,
}

/// `kansoku bench`: benchmarks that compare against a baseline measured in the same run.
#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub command: BenchCommand,
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Filter engines: ns/packet, Mpps, build time, memory; the paper's α, T_O and T_P (Tables 2 and 3).
    Filter(BenchFilterArgs),
    /// Sequential write throughput with and without fsync (paper 003 Table 5), and the T_c paper 000 needs.
    Disk(BenchDiskArgs),
    /// Compression throughput and ratio per codec and block size (paper 000 Fig. 4 and Table 1).
    Compress(BenchCompressArgs),
    /// Capture rate vs offered load per writer configuration in a namespace of its own (papers 000 §5 and 003).
    Capture(BenchCaptureArgs),
}

#[derive(Debug, Args)]
pub struct BenchFilterArgs {
    /// Rule files (repeat); each is paired with the --trace of the same position, or with the only one.
    #[arg(long, value_name = "FILE", required = true)]
    pub rules: Vec<PathBuf>,
    /// Header traces (ClassBench format, plain or zstd) or packet traces (pcap/pcapng).
    #[arg(long, value_name = "FILE", required = true)]
    pub trace: Vec<PathBuf>,
    /// Rule-set sizes for the paper's model fit: the first N rules of the first rule file, against its trace.
    #[arg(long, value_delimiter = ',', default_value = "2,9,18,35,71")]
    pub paper_sizes: Vec<usize>,
    /// Use only the first COUNT headers of each trace.
    #[arg(short = 'c', long = "packets", value_name = "COUNT")]
    pub packets: Option<usize>,
    /// Time the fast engine for at least this many seconds per pair (repeating the trace).
    #[arg(long, default_value_t = 1.0)]
    pub min_seconds: f64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `kansoku profile`: aguri summaries of a trace, or re-aggregation of summaries.
#[derive(Debug, Args)]
pub struct ProfileArgs {
    /// Trace to profile: pcap or pcapng, plain or compressed ("-" for standard input).
    #[arg(
        short = 'r',
        value_name = "FILE",
        required_unless_present = "merge",
        conflicts_with = "merge"
    )]
    pub read: Option<PathBuf>,
    /// Re-aggregate these summary files (or directories of them) instead of reading a trace.
    #[arg(long, num_args = 1.., value_name = "FILES")]
    pub merge: Vec<PathBuf>,
    /// Interval length in seconds (summaries aligned to multiples of it); default: one summary of everything
    /// (300 with --archive).
    #[arg(short = 'i', value_name = "SECONDS")]
    pub interval: Option<u64>,
    /// Report entries holding at least this percent of the interval's traffic.
    #[arg(short = 't', value_name = "PERCENT", default_value_t = 1.0)]
    pub threshold: f64,
    /// Shares and the threshold in bytes (the default).
    #[arg(long, conflicts_with = "packets")]
    pub bytes: bool,
    /// Shares and the threshold in packets.
    #[arg(long)]
    pub packets: bool,
    /// Nodes per tree (memory is fixed by it).
    #[arg(long, value_name = "NODES", default_value_t = 4096)]
    pub budget: usize,
    /// Flows counted together in a table in front of the trees (64 bytes each); 0 counts
    /// every packet in the trees, as aguri does. Totals are exact either way.
    #[arg(long, value_name = "FLOWS", default_value_t = aguri::DEFAULT_FLOW_SLOTS)]
    pub flow_slots: usize,
    /// Write the summaries to FILE one after another, or with DIR/ one file per interval named by its start.
    #[arg(short = 'w', value_name = "OUT")]
    pub write: Option<PathBuf>,
    /// Keep 5-minute summaries in DIR/5min and roll them up into DIR/hourly and DIR/daily.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["write", "merge"])]
    pub archive: Option<PathBuf>,
    /// Print or write JSON instead of aguri's text format.
    #[arg(long)]
    pub json: bool,
}

/// `kansoku plot`: draw summaries as the paper's figures.
#[derive(Debug, Args)]
pub struct PlotArgs {
    /// Summary files or directories of them.
    #[arg(required = true, value_name = "SUMMARIES")]
    pub inputs: Vec<PathBuf>,
    /// Which summary to plot.
    #[arg(long, value_enum, default_value_t = PlotView::Src)]
    pub view: PlotView,
    /// How many aggregates to draw besides the total.
    #[arg(long, default_value_t = 7)]
    pub top: usize,
    /// Output file: .svg, .png or .html.
    #[arg(short = 'o', value_name = "OUT")]
    pub output: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlotView {
    Src,
    Dst,
    Sport,
    Dport,
}

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
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<f64>,
    /// Drop root privileges to this user once the capture socket is open (as tcpdump -Z). Output files and
    /// --profile summaries are then created as USER, so their directory must be writable by USER.
    #[arg(short = 'Z', value_name = "USER")]
    pub user: Option<String>,
    /// MiB of packet data the writer's queue holds before kansoku drops packets (and counts them); with --fanout,
    /// each ring has a queue of this size. 0 lets one ring block at a time through.
    #[arg(long, value_name = "MIB", default_value_t = 64)]
    pub queue_mib: usize,
    /// Keep only packets these filter rules pass (`ip filter N pass|reject ...`); rejected ones are counted, not written.
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
    /// Spread packets over N rings by flow hash (PACKET_FANOUT), one thread and one output file each:
    /// -w FILE writes FILE.0, FILE.1, ...; statistics are summed. Needs -w FILE; not with -c or --profile.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub fanout: u16,
    /// Print the final statistics as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// Interface to send on.
    #[arg(short = 'i', value_name = "IFACE")]
    pub interface: String,
    /// Packets to send (default: the whole replayed trace, or until --duration).
    #[arg(short = 'c', long)]
    pub count: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<f64>,
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
}

/// `kansoku bench disk`: sequential write throughput of a directory's file system.
#[derive(Debug, Args)]
pub struct BenchDiskArgs {
    /// Directory to write the test files in (they are removed afterwards).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub dir: PathBuf,
    /// MiB written per run.
    #[arg(long, value_name = "MiB", default_value_t = 512,
          value_parser = clap::value_parser!(u64).range(1..=65536))]
    pub size: u64,
    /// Runs per mode; the median is reported.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=100))]
    pub runs: u64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `kansoku bench compress`: throughput and ratio per traffic kind, codec and block size.
#[derive(Debug, Args)]
pub struct BenchCompressArgs {
    /// Also measure this trace's packets (pcap or pcapng, plain or compressed), up to --mb of them.
    #[arg(short = 'r', value_name = "FILE")]
    pub read: Option<PathBuf>,
    /// Codecs to measure.
    #[arg(long, value_delimiter = ',', default_value = "lz4,zstd,gzip")]
    pub codecs: Vec<String>,
    /// Block (compression buffer) sizes in KiB; a per-packet row is added for lz4 and gzip.
    #[arg(long, value_delimiter = ',', default_value = "4,8,16,32,64,128",
          value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub block_sizes: Vec<u64>,
    /// MB of pcap per traffic kind.
    #[arg(long, value_name = "MB", default_value_t = 32,
          value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub mb: u64,
    /// Runs per measurement; the median is reported.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=100))]
    pub runs: u64,
    /// Repeat the sample within a run until this many seconds have passed.
    #[arg(long, default_value_t = 0.2)]
    pub min_seconds: f64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `kansoku bench capture`: capture rate vs offered load, per writer configuration.
#[derive(Debug, Args)]
pub struct BenchCaptureArgs {
    /// Offered loads, packets per second.
    #[arg(long, value_delimiter = ',', default_value = "10000,20000,40000,80000")]
    pub loads: Vec<f64>,
    /// Packets sent per configuration and load.
    #[arg(short = 'c', long, default_value_t = 50_000)]
    pub packets: u64,
    /// Frame size on the wire, FCS included (64–1518), or worm for the paper's 418-byte UDP worm packet.
    #[arg(long, default_value = "1518")]
    pub size: String,
    /// Payload bytes: one byte value repeated (compressible) or random.
    #[arg(long, value_enum, default_value_t = PayloadArg::Fixed)]
    pub payload: PayloadArg,
    /// Configurations to compare (default all): raw-pkt, raw, lz4-pkt, lz4, gzip, zstd, tcpdump.
    #[arg(long, value_delimiter = ',')]
    pub configs: Vec<String>,
    /// Emulate a disk of this many MB/s behind every writer (the papers' disk-bound regime).
    #[arg(long, value_name = "MB/S")]
    pub disk_mbps: Option<f64>,
    /// Capture ring size in MiB (kansoku -B; tcpdump gets the same).
    #[arg(short = 'B', long, value_name = "MIB", default_value_t = 8)]
    pub buffer_mib: usize,
    /// kansoku's writer queue in MiB of packet data (kansoku capture --queue-mib); the default, as the ring,
    /// keeps a burst of --packets from simply vanishing into memory.
    #[arg(long, value_name = "MIB", default_value_t = 8)]
    pub queue_mib: usize,
    /// Directory for the capture files (removed after each point); default: the temp directory.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Draw capture rate vs load to this file (.svg or .png).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}
