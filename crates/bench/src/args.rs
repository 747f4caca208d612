//! The arguments of `kansoku bench`: clap structs the CLI embeds as its
//! `bench` subcommand (`Command::Bench(bench::BenchArgs)`).

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use trace::Codec;

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
    /// Sequential write throughput with and without fsync (Tsukahara et al. Table 5), and the T_c Shimizu et al. 2006 needs.
    Disk(BenchDiskArgs),
    /// Compression throughput and ratio per codec and block size (Shimizu et al. 2006 Fig. 4 and Table 1).
    Compress(BenchCompressArgs),
    /// Capture rate vs offered load per writer configuration in a namespace of its own (Shimizu et al. 2006, §5;
    /// Tsukahara et al. n.d.).
    Capture(BenchCaptureArgs),
    /// IPsec per packet: encap and decap throughput per suite and packet size, beside the same
    /// primitives alone and `openssl speed` (Ariga et al.'s algorithms and today's).
    Ipsec(BenchIpsecArgs),
    /// kansoku webbench beside wrk: the same URL, threads, connections and time (keep-alive), alternating
    /// rounds; requests/s and latency percentiles of both, and kansoku / wrk.
    Web(BenchWebArgs),
    /// MAWI WG 2001's web server experiments against nginx and Apache prefork in a namespace of their own:
    /// experiment 1 (10 KB at 110 requests/s; no delay, 48 ms, the 100-quantile profile; httperf through
    /// kansoku delay) and experiment 2 (2 KB at 13 concurrency steps, no delay and the profile).
    WebPaper(BenchWebPaperArgs),
    /// `kansoku web`'s view JSON for a day of 5-minute summaries and a month of hourly ones, beside
    /// `kansoku profile --merge` of the same files.
    View(BenchViewArgs),
    /// The fleet store: a year of 5-minute summaries from ten probes loaded into ClickHouse (ingest rate),
    /// then the top aggregates of a day, a month and the year by `kansoku store merge` beside
    /// `kansoku profile --merge` of files, and the web view of one probe's month from the store.
    Store(BenchStoreArgs),
    /// `kansoku anon` beside libtrace's traceanon on the same IPv4 trace (whole processes, interleaved rounds),
    /// and Crypto-PAn's addresses per second: batched, block by block, and cached.
    Anon(BenchAnonArgs),
    /// The capture side of `bench capture`, run by it inside its namespace: a ring into a trace
    /// file, optionally one write per packet and behind an emulated slow disk, until SIGINT.
    #[command(hide = true)]
    CaptureWorker(CaptureWorkerArgs),
}

#[derive(Debug, Args)]
pub struct BenchAnonArgs {
    /// Packets of the trace.
    #[arg(long, default_value_t = 1_000_000)]
    pub packets: u64,
    /// Flows active at once in the trace (`kansoku synth --flows`), addresses drawn from all of IPv4.
    #[arg(long, default_value_t = 20_000)]
    pub flows: u64,
    /// Distinct addresses timed through Crypto-PAn without the cache.
    #[arg(long, default_value_t = 2_000_000)]
    pub addresses: u32,
    /// Rounds; medians are printed.
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// Directory for the trace and the outputs (default: the temp directory).
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct BenchFilterArgs {
    /// Rule files (repeat); each is paired with the --trace of the same position, or with the only one.
    /// A directory stands for every NAME.rules in it, each with its NAME.trace.zst (or NAME.trace).
    #[arg(long, value_name = "FILE|DIR", required = true)]
    pub rules: Vec<PathBuf>,
    /// Header traces (ClassBench format, plain or zstd) or packet traces (pcap/pcapng).
    #[arg(long, value_name = "FILE")]
    pub trace: Vec<PathBuf>,
    /// Measure a peer on the same rules and headers, its figures beside kansoku's: `dpdk`, DPDK's
    /// ACL library through dpdk-test-acl (ClassBench rule files of one family: IPv4, or IPv6 in its --ipv6 mode).
    #[arg(long, value_enum)]
    pub peer: Option<FilterPeer>,
    /// Seconds the linear engine (the baseline) may take per rule set; when a pass over the whole
    /// trace would take longer, it classifies an evenly spaced sample, and the output says so.
    #[arg(long, default_value_t = 10.0, value_parser = seconds)]
    pub linear_seconds: f64,
    /// Rules deleted and put back, one at a time, on each set's built fast engine, for the update
    /// latency table (p50 and p99 of each operation); 0 skips it.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub updates: u64,
    /// Rule-set sizes for the paper's model fit: the first N rules of the first rule file, against its trace.
    #[arg(long, value_delimiter = ',', default_value = "2,9,18,35,71")]
    pub paper_sizes: Vec<usize>,
    /// Use only the first COUNT headers of each trace.
    #[arg(short = 'c', long = "packets", value_name = "COUNT")]
    pub packets: Option<u64>,
    /// Time the fast engine for at least this many seconds per pair (repeating the trace).
    #[arg(long, default_value_t = 1.0)]
    pub min_seconds: f64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// A filter engine measured beside kansoku's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FilterPeer {
    Dpdk,
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

/// A load `bench capture --background` keeps the box busy with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackgroundLoad {
    /// A process spinning on the capture's CPU.
    Spin,
    /// A writer of 512 MB files with fsync in a loop, on the captures' file system.
    FsyncWriter,
    /// `xz -6` of random data pinned on each CPU.
    CpuHogs,
    /// A small C build in a loop: two `cc -O2` jobs (as `make -j2`), writing their objects in --dir.
    Build,
}

/// Payload bytes of the generated frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Payload {
    /// One byte value repeated (compressible).
    Fixed,
    /// Random bytes (incompressible).
    Random,
    /// The paper's 418-byte UDP worm packet (sets its own size).
    Worm,
}

impl Payload {
    /// The name `kansoku generate --payload` takes.
    pub fn name(self) -> &'static str {
        match self {
            Payload::Fixed => "fixed",
            Payload::Random => "random",
            Payload::Worm => "worm",
        }
    }
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
    #[arg(long, value_enum, default_value_t = Payload::Fixed)]
    pub payload: Payload,
    /// Configurations to compare (default all): raw-pkt, raw, lz4-pkt, lz4, gzip, zstd, tcpdump.
    #[arg(long, value_delimiter = ',')]
    pub configs: Vec<String>,
    /// Emulate a disk of this many MB/s behind every writer (the papers' disk-bound regime).
    #[arg(long, value_name = "MB/S")]
    pub disk_mbps: Option<f64>,
    /// Capture ring size in MiB (kansoku -B; tcpdump gets the same).
    #[arg(short = 'B', long, value_name = "MIB", default_value_t = 8)]
    pub buffer_mib: usize,
    /// kansoku's ring block size in KiB (kansoku capture --ring-block-kib); default a sixteenth of the ring.
    #[arg(long, value_name = "KIB")]
    pub ring_block_kib: Option<usize>,
    /// kansoku's writer queue in MiB of packet data (kansoku capture --queue-mib); the default, as the ring,
    /// keeps a burst of --packets from simply vanishing into memory.
    #[arg(long, value_name = "MIB", default_value_t = 8)]
    pub queue_mib: usize,
    /// Directory for the capture files (removed after each point); default: the temp directory.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Pin every capture (kansoku's, tcpdump's ...) to this CPU, and the generator to another, as the issue's
    /// "each tool pinned to one core".
    #[arg(long, value_name = "CPU")]
    pub capture_cpu: Option<usize>,
    /// Put the kernel's receive work for the capture's interface on the capture's CPU (RPS on the receiving
    /// veth), as a NIC queue's interrupt would on a real host; pins as --capture-cpu (default the last CPU).
    #[arg(long)]
    pub kernel_rx_on_capture_core: bool,
    /// Keep each point's capture file (in DIR/kansoku-bench-capture-PID/, named in the JSON's `file`), to check
    /// the written counts against the files.
    #[arg(long)]
    pub keep_files: bool,
    /// Draw capture rate vs load to this file (.svg or .png).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// A tcpdump filter expression every capture runs in the kernel (kansoku and its peers alike); a point's rate
    /// then counts the sent frames it matches (those of the generator's own log of the same frames).
    #[arg(long, value_name = "EXPRESSION")]
    pub expression: Option<String>,
    /// Keep the box busy while every point runs (each load in a session of its own, started 3 s before the
    /// first point): spin (the capture's CPU), fsync-writer (512 MB files with fsync, in --dir), cpu-hogs (xz -6
    /// on each CPU), build (two `cc -O2` jobs in a loop). Several run together: `--background fsync-writer,cpu-hogs`.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "LOADS")]
    pub background: Vec<BackgroundLoad>,
    /// Run the sweep this many times, the configurations' order rotating from round to round; the table gives
    /// each point's median round, and each round's loss beside it.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=99))]
    pub rounds: u64,
}

/// `kansoku bench capture-worker` (hidden): what `bench capture` runs in its
/// namespace for each kansoku configuration. It says `listening on` on
/// standard error once the ring is open, captures until SIGINT, and prints
/// `written`, `kernel_drops` and `dropped_kansoku` (JSON with --json).
#[derive(Debug, Args)]
pub struct CaptureWorkerArgs {
    /// Interface to capture on.
    #[arg(short = 'i', value_name = "IFACE")]
    pub interface: String,
    /// The trace file to write (pcap, no seek index).
    #[arg(short = 'w', value_name = "FILE")]
    pub write: PathBuf,
    /// Compression of the file.
    #[arg(long = "compress", value_enum, default_value_t = Codec::Lz4)]
    pub compress: Codec,
    /// Write (and compress) each packet on its own, one write() per packet, as libpcap's pcap_dump.
    #[arg(long)]
    pub per_packet: bool,
    /// Emulate a disk that writes this many MB/s (10^6 bytes), sleeping after each write.
    #[arg(long, value_name = "MB/S")]
    pub disk_mbps: Option<f64>,
    /// Stop after this many packets.
    #[arg(short = 'c', value_name = "COUNT")]
    pub count: Option<u64>,
    /// Ring buffer size in MiB.
    #[arg(short = 'B', value_name = "MIB", default_value_t = 8)]
    pub buffer_mib: usize,
    /// MiB of packet data the writer's queue holds before packets are dropped (and counted).
    #[arg(long, value_name = "MIB", default_value_t = 8)]
    pub queue_mib: usize,
    /// Ring block size in KiB (as `kansoku capture --ring-block-kib`); default a sixteenth of the ring.
    #[arg(long, value_name = "KIB")]
    pub ring_block_kib: Option<usize>,
    /// A ring thread hands blocks to the writer through a queue (as `kansoku capture --ring-thread`).
    #[arg(long)]
    pub ring_thread: bool,
    /// With --ring-thread: ring blocks the writer may hold in place (as `kansoku capture --hold-blocks`);
    /// 0 copies every block.
    #[arg(long, value_name = "BLOCKS")]
    pub hold_blocks: Option<usize>,
    /// Receive through AF_XDP in this mode instead of a packet ring (the alternative the ring was
    /// measured against): an XDP program redirects queue 0 into -B MiB of frames.
    #[arg(long, value_enum, value_name = "MODE", conflicts_with_all = ["ring_thread", "hold_blocks", "ring_block_kib"])]
    pub xdp: Option<XdpModeArg>,
    /// Print the final counters as JSON.
    #[arg(long)]
    pub json: bool,
    /// A tcpdump filter expression, compiled by libpcap for the interface and run by the kernel on the ring
    /// (as `kansoku capture -i IF EXPRESSION`).
    #[arg(long, value_name = "EXPRESSION", conflicts_with = "xdp")]
    pub expression: Option<String>,
}

/// Where the capture worker's XDP program runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum XdpModeArg {
    /// On the kernel's receive path, any driver (xdpgeneric).
    Generic,
    /// In the driver (xdpdrv; veth runs it in its NAPI poll).
    Native,
}

impl XdpModeArg {
    pub fn name(self) -> &'static str {
        self.mode().name()
    }

    pub fn mode(self) -> capture::xdp::XdpMode {
        match self {
            XdpModeArg::Generic => capture::xdp::XdpMode::Generic,
            XdpModeArg::Native => capture::xdp::XdpMode::Native,
        }
    }
}

/// Which of `bench ipsec`'s experiments to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum IpsecPart {
    /// (a) Per-packet cost: encap and decap beside the primitives alone and openssl speed.
    Packet,
    /// (b) The paper's netperf tests between two namespaces through kansoku's gateways (and the bare
    /// veth, and boringtun).
    Link,
    /// (c) The paper's DV stream: constant-rate UDP over IPv6, ESP 3DES against ESP Blowfish.
    Dv,
}

/// `kansoku bench ipsec`: what ESP and AH cost, per packet and between two hosts.
#[derive(Debug, Args)]
pub struct BenchIpsecArgs {
    /// The experiment.
    #[arg(long, value_enum, default_value = "packet")]
    pub part: IpsecPart,
    /// IP packet sizes in bytes.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "64,128,256,512,1024,1400,1500"
    )]
    pub sizes: Vec<usize>,
    /// Suites to measure (default: all): ah-hmac-sha1, ah-hmac-sha256, esp-3des-cbc, esp-blowfish-cbc,
    /// esp-3des-cbc+hmac-sha1, esp-aes-cbc+hmac-sha256, esp-aes-gcm-16, esp-chacha20-poly1305, esp-null.
    #[arg(long, value_delimiter = ',')]
    pub suites: Option<Vec<String>>,
    /// Time each figure for at least this long (rounds of 2,048 packets; the median is reported).
    #[arg(long, default_value_t = 0.3)]
    pub min_seconds: f64,
    /// Do not run `openssl speed` beside.
    #[arg(long)]
    pub no_openssl: bool,
    /// link, dv: seconds per test (the paper's 60; the whole link matrix is 126 tests).
    #[arg(long, default_value_t = 60.0, value_parser = seconds)]
    pub seconds: f64,
    /// link, dv: cap both veth ends at this rate with tc tbf (e.g. 100mbit, the paper's Ethernet).
    #[arg(long, value_name = "RATE")]
    pub link_rate: Option<String>,
    /// link, dv: a busy loop on the sending side's core (the paper's CPU-contention test).
    #[arg(long)]
    pub cpu_hog: bool,
    /// link: veth, none, ah, esp, ah-esp, esp-aes-gcm-16, esp-chacha20-poly1305, esp-aes-cbc+hmac-sha256,
    /// boringtun (default: all). dv: none, esp-3des-cbc, esp-blowfish-cbc, esp-3des-cbc-per-packet-keys,
    /// esp-blowfish-cbc-per-packet-keys.
    #[arg(long, value_delimiter = ',')]
    pub configs: Option<Vec<String>>,
    /// link: the tests (TCP_STREAM 4096 B x buffers 57344 and 32768; UDP_STREAM 4096 and 1024 B x 32768;
    /// TCP_RR 1/1; UDP_RR 1/1 and 516/4).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "tcp-stream,udp-stream,tcp-rr,udp-rr"
    )]
    pub tests: Vec<String>,
    /// link: IP versions.
    #[arg(long, value_delimiter = ',', default_value = "4,6")]
    pub families: Vec<u8>,
    /// dv: the stream's rate in Mbit/s of IP packets (500-byte payloads).
    #[arg(long, default_value_t = 13.0, value_parser = seconds)]
    pub dv_mbit: f64,
    /// link, dv: write per-second charts (SVG) into this directory.
    #[arg(long, value_name = "DIR")]
    pub plot_dir: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// A positive, finite number of at most an hour's seconds (or Mbit/s).
fn seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 3600.0 => Ok(v),
        _ => Err(format!("{s:?}: a number above 0 and at most 3600")),
    }
}

/// `kansoku bench web`: kansoku's load generator against wrk's.
#[derive(Debug, Args)]
pub struct BenchWebArgs {
    /// The page both ask for (`http://HOST[:PORT]/PATH`), e.g. a 10 KB file nginx serves.
    pub url: String,
    /// Threads of each tool.
    #[arg(short = 't', long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=256))]
    pub threads: u64,
    /// Connections of each tool (keep-alive).
    #[arg(short = 'c', long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub connections: u64,
    /// Seconds a run.
    #[arg(short = 'd', long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub seconds: u64,
    /// Rounds (each runs both tools; who goes first alternates).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=100))]
    pub rounds: u64,
    /// CPUs both tools' threads are confined to, e.g. 1 or 2,3, or `all` (not confined). Default: the
    /// upper half of the CPUs this command may use (at least one), the rest left to the server, so that
    /// neither tool's threads take the server's CPU from it and the runs measure the server, not where
    /// the scheduler happened to put three busy threads on two cores.
    #[arg(long, value_name = "CPU[,CPU...]|all")]
    pub generator_cpus: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// A web server `bench web-paper` starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WebServer {
    /// nginx (Debian's nginx-light), as Debian configures it.
    Nginx,
    /// Apache 2.4 with the prefork MPM, set to Apache 1.3's defaults.
    Apache,
}

/// `kansoku bench web-paper`: MAWI WG 2001's experiments 1 and 2.
#[derive(Clone, Debug, Args)]
pub struct BenchWebPaperArgs {
    /// Servers to run, in order.
    #[arg(long, value_delimiter = ',', default_value = "nginx,apache")]
    pub servers: Vec<WebServer>,
    /// Experiments to run: 1, 2, and 3, the delay line's precision under load (the round trips the server saw
    /// against those given, at --rtt-rate requests/s).
    #[arg(long, value_delimiter = ',', default_value = "1,3,2", value_parser = clap::value_parser!(u8).range(1..=3))]
    pub experiments: Vec<u8>,
    /// Requests/s of experiment 3 (2000 of 10 KB, a connection each: about 20,000 packets/s through the line).
    #[arg(long, default_value_t = 2000.0, value_parser = webbench::load::parse_rate)]
    pub rtt_rate: f64,
    /// Seconds of experiment 3.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub rtt_seconds: u64,
    /// The profile of experiment 1's run 1-5 and of experiment 2's run 2-2 (RTT_MS FRACTION lines).
    #[arg(long, value_name = "FILE", default_value = "bench/web-rtt.cdf")]
    pub profile: PathBuf,
    /// Seconds of each experiment-1 run (the paper: 100,000 requests at 110/s, about 900).
    #[arg(long, default_value_t = 900, value_parser = clap::value_parser!(u64).range(2..=86_400))]
    pub exp1_seconds: u64,
    /// Experiment 2's concurrency steps.
    #[arg(long, value_delimiter = ',', default_value = "1,10,50,100,200,500,800,900,1000,1100,1200,1500,2000", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub steps: Vec<u64>,
    /// Seconds of each experiment-2 step (the paper: 180).
    #[arg(long, default_value_t = 180, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub step_seconds: u64,
    /// Seconds between experiment-2 steps (the paper: 60).
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(0..=86_400))]
    pub cooldown_seconds: u64,
    /// Leave out httperf (runs 1-3 and 1-4).
    #[arg(long)]
    pub no_httperf: bool,
    /// Keep the series CSVs, the server's round trips and web-paper.json here.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct BenchStoreArgs {
    /// Probes.
    #[arg(long, default_value_t = 10)]
    pub probes: u64,
    /// Days of 5-minute summaries per probe.
    #[arg(long, default_value_t = 365)]
    pub days: u64,
    /// Days each probe profiles; the rest of the year repeats them, shifted in time.
    #[arg(long, default_value_t = 2)]
    pub pool_days: u64,
    /// Rounds per measurement (medians are printed).
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Keep the summary files in this directory (default: a temporary one).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Also write every day's 5-minute files (a million files, some 10 GB, for a year of ten probes) and time
    /// `profile --merge` of all of them (one round).
    #[arg(long)]
    pub year_files: bool,
}

#[derive(Debug, Args)]
pub struct BenchViewArgs {
    /// Rounds per measurement (medians are printed).
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// Keep the summaries in this directory (default: a temporary one).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}
