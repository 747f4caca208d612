//! `kansoku store`'s options: the fleet store in ClickHouse.

use std::path::PathBuf;

use aguri::Metric;
use clap::{Args, Subcommand};

use super::SummaryFormatArg;

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

#[derive(Debug, Subcommand)]
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
        #[arg(long, value_enum, default_value_t = Metric::Either)]
        metric: Metric,
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
