//! Where summaries are kept, as the readers of summaries see it: the
//! [`DataSource`] interface (a catalog, and the summaries of a time range at
//! a resolution) and the types of its answers.
//!
//! A reader (the web view, `kansoku plot`) asks a source for the summaries
//! of a time range at a resolution; it never sees files or queries. A
//! directory of summary files (`webview::DirSource`) and the fleet store in
//! ClickHouse (`store::StoreSource`) implement the same calls.

use std::sync::Arc;

use serde::Serialize;

use crate::Summary;

/// One resolution of a source: summaries of about the same length.
#[derive(Clone, Debug, Serialize)]
pub struct LevelInfo {
    /// `5min`, `hourly`, `daily`, or `.` for files directly in the directory.
    pub name: String,
    /// The typical length of its summaries (their median), in seconds.
    pub interval_s: u64,
    pub summaries: usize,
    pub first_ns: u64,
    pub last_ns: u64,
}

/// What a source holds.
#[derive(Clone, Debug, Serialize)]
pub struct Catalog {
    /// What the source is (a directory's path, a store's address).
    pub source: String,
    /// The probes it holds summaries of; empty for a single-probe source.
    pub probes: Vec<String>,
    /// Finest level first.
    pub levels: Vec<LevelInfo>,
    /// Start of the first and end of the last summary (0, 0 when empty).
    pub first_ns: u64,
    pub last_ns: u64,
    /// Inputs that could not be read, each `FILE:LINE:COLUMN: why`.
    pub problems: Vec<String>,
}

/// Why a source could not answer.
#[derive(Clone, Debug)]
pub struct SourceError(pub String);

impl std::fmt::Display for SourceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SourceError {}

/// The summaries of a range added up at the source, one per bucket that
/// has any: each holds its bucket's entries (and flows) with equal keys
/// summed, starts at its first summary's start and ends at its last one's
/// end; `count` is how many summaries went in.
pub struct Bucketed {
    pub summaries: Vec<Arc<Summary>>,
    pub count: usize,
}

/// A store of summaries the view can show.
pub trait DataSource: Send + Sync + 'static {
    /// What the source holds now (summaries written since the last call
    /// included).
    fn catalog(&self) -> Result<Catalog, SourceError>;

    /// The summaries of `probes` (all of them when empty) that start in
    /// `[from_ns, to_ns)`, sorted by start, from the coarsest level whose
    /// summaries are no longer than `step_ns` (the finest if none is), and
    /// from finer levels where that one has nothing: each moment is
    /// counted once.
    fn summaries(
        &self,
        probes: &[String],
        from_ns: u64,
        to_ns: u64,
        step_ns: u64,
    ) -> Result<Vec<Arc<Summary>>, SourceError>;

    /// The same summaries added up per bucket of `step_ns` from `from_ns`
    /// at the source (a database does it where the data is), if the source
    /// can and every summary lies in one bucket; `None`: the view adds
    /// them up itself. The view's answer is the same either way.
    fn bucketed(
        &self,
        _probes: &[String],
        _from_ns: u64,
        _to_ns: u64,
        _step_ns: u64,
    ) -> Result<Option<Bucketed>, SourceError> {
        Ok(None)
    }
}
