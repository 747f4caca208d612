//! `filter`, `profile` and `plot`.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use filter::EngineKind;

use super::{ExpressionArgs, OutputArgs};

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
    Run(Box<FilterRunArgs>),
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
    #[arg(long, value_enum, default_value_t = EngineKind::Fast)]
    pub engine: EngineKind,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Write the passed packets here.
    #[command(flatten)]
    pub out: OutputArgs,
    /// The packets the rules see: tcpdump's filter expression, applied first.
    #[command(flatten)]
    pub select: ExpressionArgs,
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
    #[arg(long, value_enum, default_value_t = EngineKind::Fast)]
    pub engine: EngineKind,
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
    #[arg(long, value_enum, default_value_t = plot::Style::Stacked)]
    pub style: plot::Style,
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
    /// The traces on this host (a file or a directory archive): the page offers each aggregate's packets.
    #[arg(long, value_name = "DIR")]
    pub traces: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlotView {
    Src,
    Dst,
    Sport,
    Dport,
}
