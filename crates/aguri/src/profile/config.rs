//! The profiler's settings: their defaults, the checks that refuse
//! settings that cannot work, and the [`Profiler`] they build (counting
//! inline, or on the trees' own thread when the host has a second CPU).

use core::fmt;

use crate::tree::{Metric, MIN_BUDGET};

use super::counter::{batch_for, Counter};
use super::counting::{InlineCounts, CHUNK, PACKET_BATCH};
use super::Profiler;

/// aguri's usual node budget per tree.
pub const DEFAULT_BUDGET: usize = 4096;
/// Flows the flow table in front of the trees holds by default (one
/// 64-byte slot each: 4 MiB, well inside a server's L3 cache). See
/// `aguri::flows`: on the benchmark's active-flows trace (16,384 flows
/// at once) every flow reaches the trees once, and on its heavy-tailed
/// trace (100,000 flows drawn at random) one packet in seven pushes a
/// flow out, against one in three with 32,768 slots (1.4x the speed there,
/// the same on active-flows; 131,072 slots, 8 MiB, were slower on
/// active-flows). bench/profile-throughput.md has the figures.
pub const DEFAULT_FLOW_SLOTS: usize = 64 * 1024;
/// The default threshold, in percent of the interval's total.
pub const DEFAULT_THRESHOLD: f64 = 1.0;

/// A profiler's settings. [`build`](Self::build) checks them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProfilerConfig {
    /// Interval length in nanoseconds; 0 makes one summary of everything.
    pub interval_ns: u64,
    /// Nodes per tree, with `exact_keys: 0`.
    pub budget: usize,
    /// Keys each of the four views counts exactly in an interval before
    /// it collapses what it holds ([`crate::exact`]: 32 bytes a key, and as
    /// much again to sort them when the summary is made; by default
    /// [`DEFAULT_EXACT_KEYS`]); 0: aguri's trees of `budget` nodes with LRU
    /// reclaim instead.
    pub exact_keys: usize,
    /// Percent of the interval's total an entry needs to be reported.
    pub threshold: f64,
    /// What the threshold and the shares are measured in.
    pub metric: Metric,
    /// Slots of the flow table in front of the trees (`aguri::flows`);
    /// 0 counts every packet in the trees directly, as aguri does.
    pub flow_slots: usize,
    /// Entries of the 5-tuple table behind the 2-D view (source ×
    /// destination with protocols, [`crate::flows2d`]); 0: no 2-D view.
    pub pairs: usize,
    /// aguri2's coarsening ([`PatriciaTree::aggregate_with`](crate::tree::PatriciaTree::aggregate_with)): thresholds
    /// scaled by prefix length, similar siblings merged.
    pub coarsen: bool,
    /// Count in the flow table and the trees on a thread of their own
    /// (when the host has a second CPU), beside the thread that reads and
    /// slices packets; the summaries are the same either way.
    pub tree_thread: bool,
    /// The flow table's hash seed. `None`: a random one for each table, so
    /// that nobody can aim traffic at its slots. The table decides the
    /// order in which the views see their keys (a flow is counted when it
    /// leaves), and aguri's trees (`exact_keys: 0`), or an exact store
    /// that has collapsed, give summaries that depend on that order below
    /// the threshold's margin; so a run that must be repeatable byte for
    /// byte (`profile -r FILE` takes one from the file's first bytes) gives
    /// a seed. Aimed traffic costs no count, only the table's help: each
    /// packet then counted in the trees, as under a flood of new flows.
    pub table_seed: Option<u64>,
}

impl Default for ProfilerConfig {
    fn default() -> Self {
        ProfilerConfig {
            interval_ns: 0,
            budget: DEFAULT_BUDGET,
            exact_keys: DEFAULT_EXACT_KEYS,
            threshold: DEFAULT_THRESHOLD,
            metric: Metric::Either,
            flow_slots: DEFAULT_FLOW_SLOTS,
            pairs: 0,
            coarsen: false,
            tree_thread: true,
            table_seed: None,
        }
    }
}

/// Keys each view counts exactly in an interval by default: 4 MiB a view
/// at most (64 bytes a key with the room to sort them), taken only as
/// keys come; an interval with fewer than half as many distinct keys in a
/// view is counted exactly. A smaller buffer stays in the caches: a flood
/// of new addresses took 0.238 s with 65,536 against 0.268 with 262,144.
pub const DEFAULT_EXACT_KEYS: usize = 64 * 1024;

/// Entries of the 5-tuple table behind the 2-D view by default (about
/// 80 bytes each: 20 MiB).
pub const DEFAULT_PAIRS: usize = 256 * 1024;

/// A setting that cannot work.
#[derive(Clone, Debug, PartialEq)]
pub enum ConfigError {
    /// The threshold is not within 0..=100 percent.
    Threshold(f64),
    /// The node budget is below [`MIN_BUDGET`].
    Budget(usize),
    /// Exact keys set, but below [`MIN_EXACT_KEYS`].
    ExactKeys(usize),
}

/// The fewest exact keys accepted (other than 0).
pub const MIN_EXACT_KEYS: usize = crate::exact::MIN_CAP;

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Threshold(t) => {
                write!(f, "bad threshold {t}% (expected 0 to 100)")
            }
            ConfigError::Budget(b) => {
                write!(
                    f,
                    "node budget {b} is too small (expected at least {MIN_BUDGET})"
                )
            }
            ConfigError::ExactKeys(k) => {
                write!(
                    f,
                    "{k} exact keys are too few (expected 0, or at least {MIN_EXACT_KEYS})"
                )
            }
        }
    }
}

impl std::error::Error for ConfigError {}

impl ProfilerConfig {
    /// Checks the settings.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(0.0..=100.0).contains(&self.threshold) {
            return Err(ConfigError::Threshold(self.threshold));
        }
        if self.budget < MIN_BUDGET {
            return Err(ConfigError::Budget(self.budget));
        }
        if self.exact_keys > 0 && self.exact_keys < MIN_EXACT_KEYS {
            return Err(ConfigError::ExactKeys(self.exact_keys));
        }
        Ok(())
    }

    /// The profiler these settings describe.
    pub fn build(self) -> Result<Profiler, ConfigError> {
        self.validate()?;
        let second_cpu = std::thread::available_parallelism().is_ok_and(|n| n.get() > 1);
        let counter = if self.tree_thread && second_cpu {
            Counter::on_thread(self)
        } else {
            Counter::Inline {
                behind: Box::new(InlineCounts::new(self)),
                finished: None,
            }
        };
        // Held before the first count: where the table starts counts.
        let batch = match &counter {
            Counter::Inline { .. } => CHUNK,
            Counter::Thread { tuner, .. } => batch_for(tuner.cut),
        };
        Ok(Profiler {
            counter,
            batch,
            pending: Vec::with_capacity(PACKET_BATCH),
            cfg: self,
            current: None,
            non_ip: (0, 0),
            closed_by_time: false,
            closing: None,
        })
    }
}
