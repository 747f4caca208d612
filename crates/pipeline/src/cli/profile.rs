//! `kansoku profile`'s options: the profiler stage and where its summaries go.

use std::path::PathBuf;

use aguri::Metric;
use clap::{Args, ValueEnum};

use super::{ExpressionArgs, StoreOpts, VerifyArgs};

/// `kansoku profile`: aguri summaries of a trace, or re-aggregation of summaries.
#[derive(Debug, Args)]
pub struct ProfileArgs {
    #[command(flatten)]
    pub verify: VerifyArgs,
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
    #[arg(long, value_enum, default_value_t = Metric::Either, conflicts_with_all = ["bytes", "packets"])]
    pub metric: Metric,
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
    /// The packets to profile: tcpdump's filter expression.
    #[command(flatten)]
    pub select: ExpressionArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SummaryFormatArg {
    Kansoku,
    Aguri2,
    Aguri3,
}
