//! `filter`, `profile` and `plot`.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

use super::OutputArgs;

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
    /// Map a ClassBench IPv4 rule set and its trace to IPv6 (2001:db8::/32; see ARCHITECTURE.md), the trace's
    /// answers computed by the linear engine: writes DIR/NAME_v6.rules and DIR/NAME_v6.trace.zst.
    V6(FilterV6Args),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MetricArg {
    Bytes,
    Packets,
    Either,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineArg {
    Linear,
    Fast,
}

#[derive(Debug, Args)]
pub struct FilterRunArgs {
    #[command(flatten)]
    pub verify: super::VerifyArgs,
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
    /// The packet: `PROTO SRC[:PORT] > DST[:PORT] [flags LETTERS]` (IPv6 as `[addr]:port`).
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

#[derive(Debug, Args)]
pub struct FilterV6Args {
    /// ClassBench rule file (IPv4).
    #[arg(long, value_name = "FILE")]
    pub rules: PathBuf,
    /// Its header trace (plain or zstd); when it carries FIRSTMATCH answers, the IPv6 answers must equal them.
    #[arg(long, value_name = "FILE")]
    pub trace: PathBuf,
    /// Directory for NAME_v6.rules and NAME_v6.trace.zst (created if missing).
    #[arg(long, short = 'o', value_name = "DIR", default_value = ".")]
    pub out: PathBuf,
}

/// `kansoku profile`: aguri summaries of a trace, or re-aggregation of summaries.
#[derive(Debug, Args)]
pub struct ProfileArgs {
    #[command(flatten)]
    pub verify: super::VerifyArgs,
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
    /// What the threshold counts: an entry is kept when its bytes reach it, its packets, or either (as aguri2
    /// does, so that a flood of small packets shows; the default). Shares are printed in packets for `packets`,
    /// in bytes otherwise.
    #[arg(long, value_enum, default_value_t = MetricArg::Either, conflicts_with_all = ["bytes", "packets"])]
    pub metric: MetricArg,
    /// Short for --metric bytes.
    #[arg(long, conflicts_with = "packets")]
    pub bytes: bool,
    /// Short for --metric packets.
    #[arg(long)]
    pub packets: bool,
    /// Keys each view (source, destination, source port, destination port) counts exactly in an interval: every
    /// key is kept and aggregated when the summary is made, so entries are exact (4 MiB a view at most, taken only
    /// as keys come). Beyond half of KEYS distinct keys (a flood of new addresses) a view collapses what it holds
    /// into the subtrees that hold half the threshold so far, and goes on; totals stay exact. 0: aguri's trees of
    /// --budget nodes with LRU reclaim instead.
    #[arg(long, value_name = "KEYS", default_value_t = aguri::DEFAULT_EXACT_KEYS)]
    pub exact_keys: usize,
    /// Nodes per tree with --exact-keys 0 (memory is fixed by it), and in --merge.
    #[arg(long, value_name = "NODES", default_value_t = 4096)]
    pub budget: usize,
    /// Flows counted together in a table in front of the trees, at most (64 bytes each; it
    /// grows to this as flows come); 0 counts every packet in the trees, as aguri does.
    /// Totals are exact either way.
    #[arg(long, value_name = "FLOWS", default_value_t = aguri::DEFAULT_FLOW_SLOTS)]
    pub flow_slots: usize,
    /// Write the summaries to FILE one after another, or with DIR/ one file per interval named by its start.
    #[arg(short = 'w', value_name = "OUT")]
    pub write: Option<PathBuf>,
    /// Keep 5-minute summaries in DIR/5min and roll them up into DIR/hourly and DIR/daily.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["write", "merge"])]
    pub archive: Option<PathBuf>,
    /// Print or write JSON instead of aguri's text format.
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// Also make the 2-D view, source × destination with each pair's protocols and ports, as aguri3 does (a
    /// table of up to 262,144 5-tuples an interval, 20 MiB; when full, detail goes first, never counts).
    #[arg(long = "2d")]
    pub two_d: bool,
    /// aguri2's coarsening: the threshold scaled by prefix length (an IPv4 /8 needs 8 times it, a /16 4 times, a
    /// /24 once; ports alike) and siblings with similar counts merged into their parent; fewer, coarser entries.
    #[arg(long)]
    pub coarsen: bool,
    /// Also send every summary to a fleet store (ClickHouse's HTTP interface, `http://HOST:8123/DB`), through a
    /// spool that keeps what the store cannot take yet. User and password: KANSOKU_STORE_USER and
    /// KANSOKU_STORE_PASSWORD, or --store-credentials.
    #[arg(long, value_name = "URL", conflicts_with = "merge")]
    pub store: Option<String>,
    #[command(flatten)]
    pub store_opts: StoreOpts,
    /// Write kansoku's format (both counts, exact), aguri2's `-v` output, or aguri3's flow records, which agurim
    /// reads (implies --2d).
    #[arg(long, value_enum, default_value_t = SummaryFormatArg::Kansoku)]
    pub format: SummaryFormatArg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SummaryFormatArg {
    Kansoku,
    Aguri2,
    Aguri3,
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
    /// Stacked areas of bits/s and packets/s side by side, as agurim draws them (what no top aggregate holds is
    /// the `other` band), or lines of the total and the top aggregates in the summaries' metric.
    #[arg(long, value_enum, default_value_t = PlotStyle::Stacked)]
    pub style: PlotStyle,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlotStyle {
    Stacked,
    Lines,
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

/// `kansoku store`: the fleet store in ClickHouse.
#[derive(Debug, Args)]
pub struct StoreArgs {
    #[command(subcommand)]
    pub action: StoreAction,
    /// The store: `http://HOST:PORT/DATABASE` (ClickHouse's HTTP interface).
    #[arg(long, value_name = "URL", global = true)]
    pub store: Option<String>,
    /// A file whose first line is USER:PASSWORD (default: KANSOKU_STORE_USER and KANSOKU_STORE_PASSWORD).
    #[arg(long, value_name = "FILE", global = true)]
    pub store_credentials: Option<PathBuf>,
}

/// Which of the store's summaries: probes and a range of start times.
#[derive(Debug, Args)]
pub struct StoreRange {
    /// Only these probes (repeat); default all (added together by `merge`).
    #[arg(long = "probe", value_name = "NAME")]
    pub probes: Vec<String>,
    /// Only summaries starting at or after this time (seconds since 1970).
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    pub from: u64,
    /// Only summaries starting before this time (seconds since 1970).
    #[arg(long, value_name = "SECONDS")]
    pub to: Option<u64>,
}

impl StoreRange {
    /// The range in nanoseconds.
    pub fn ns(&self) -> (u64, u64) {
        (
            self.from.saturating_mul(1_000_000_000),
            self.to
                .map_or(u64::MAX, |t| t.saturating_mul(1_000_000_000)),
        )
    }
}

#[derive(Debug, clap::Subcommand)]
pub enum StoreAction {
    /// Create the database and the tables (idempotent; refuses a store of another schema version).
    Init {
        /// Make this server the entry to cluster CLUSTER: Distributed tables over --local DB (which `store init`
        /// made on every shard), sharded by summary id.
        #[arg(long, value_name = "CLUSTER", requires = "local")]
        distributed: Option<String>,
        /// The shards' database, with --distributed.
        #[arg(long, value_name = "DB")]
        local: Option<String>,
    },
    /// The probes in the store: summaries, first and last times.
    Status,
    /// Re-aggregate the store's summaries at the server, as `profile --merge` does with files: any probes, any
    /// range, any interval, folded at the threshold (the server sums and folds; a few hundred rows per period
    /// come back).
    Merge {
        #[command(flatten)]
        range: StoreRange,
        /// Interval length in seconds (summaries aligned to multiples of it); default: one summary of everything.
        #[arg(short = 'i', value_name = "SECONDS")]
        interval: Option<u64>,
        /// Report entries holding at least this percent of the interval's traffic.
        #[arg(short = 't', value_name = "PERCENT", default_value_t = 1.0)]
        threshold: f64,
        /// What the threshold counts (as `profile --metric`).
        #[arg(long, value_enum, default_value_t = MetricArg::Either)]
        metric: MetricArg,
        /// aguri2's coarsening (as `profile --coarsen`).
        #[arg(long)]
        coarsen: bool,
        /// Write the summaries to FILE (default: standard output).
        #[arg(short = 'w', value_name = "FILE")]
        write: Option<PathBuf>,
        /// JSON instead of aguri's text format.
        #[arg(long, conflicts_with = "format")]
        json: bool,
        /// kansoku's format, aguri2's `-v` output or aguri3's flow records.
        #[arg(long, value_enum, default_value_t = SummaryFormatArg::Kansoku)]
        format: SummaryFormatArg,
    },
    /// Send what waits in the spool (after an outage, without profiling anything): exit 0 when it is empty,
    /// 1 when summaries still wait.
    Send {
        /// The spool (default: ~/.local/state/kansoku/spool).
        #[arg(long, value_name = "DIR")]
        spool: Option<PathBuf>,
        /// How long to keep trying while the store does not take them, in seconds.
        #[arg(long, value_name = "SECONDS", default_value_t = 60)]
        wait: u64,
    },
    /// Write the store's summaries out as files, DIR/PROBE/YYYYMMDD.HHMMSS.agr.
    Export {
        /// Output directory.
        #[arg(short = 'w', value_name = "DIR")]
        write: PathBuf,
        #[command(flatten)]
        range: StoreRange,
    },
}

/// `kansoku web`: summaries in a browser.
#[derive(Debug, Args)]
pub struct WebArgs {
    /// A directory of summaries: `profile -w DIR/` output, or an archive (`--archive DIR`: 5min, hourly, daily).
    /// Files written while it runs are shown without a restart.
    #[arg(
        value_name = "DIR",
        required_unless_present = "store",
        conflicts_with = "store"
    )]
    pub dir: Option<PathBuf>,
    /// Serve a fleet store instead (`http://HOST:PORT/DATABASE`), with a probe selector.
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    /// A file whose first line is USER:PASSWORD for the store.
    #[arg(long, value_name = "FILE")]
    pub store_credentials: Option<PathBuf>,
    /// Address and port to listen on (loopback unless told otherwise; port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR:PORT")]
    pub listen: std::net::SocketAddr,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlotView {
    Src,
    Dst,
    Sport,
    Dport,
}
