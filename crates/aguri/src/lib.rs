//! `aguri`: an aggregation-based traffic profiler, after AGURI (MAWI WG 2001, chapter 2).
//!
//! The profiler keeps four summaries of the traffic of each interval —
//! source address, destination address, `version:protocol:srcport` and
//! `version:protocol:dstport` — in Patricia trees whose node count is fixed
//! ([`tree`]): when a tree is full, its least-recently-used leaf is folded
//! into its parent, so memory does not grow with traffic and nothing counted
//! is lost. At the end of an interval, prefixes and port ranges holding at
//! least the threshold's share (1% by default) become the summary's entries;
//! smaller ones are folded into their parents ([`tree::PatriciaTree::aggregate`]).
//!
//! - [`profile`]: the stage. [`ProfilerConfig::build`] makes a [`Profiler`];
//!   it takes packets ([`Profiler::add_frame`], or [`Profiler::add`] with a
//!   [`FlowKey`]) and gives back one [`Summary`] per interval.
//! - `flows`: a fixed flow table in front of the trees, so that a flow's
//!   packets reach them as one update (counts exact, memory fixed).
//! - [`summary`]: summaries and aguri's text format (`%!AGURI-1.0`), written
//!   with `Display` and read back by [`parse_summaries`], with exact counts.
//! - [`merge`]: re-aggregation of summaries into longer periods.
//! - [`label`]: keys and the paper's labels (`150.65.0.0/16`, `4:6:1024/6`).
//!
//! The stage knows nothing of files or sockets: a trace reader, a capture
//! ring or a generator feeds it, and the caller decides where summaries go.
//! Its one `unsafe` block is the flow table's cache prefetch (`flows::fetch`).

#![deny(unsafe_code)]

pub mod exact;
mod flows;
pub mod flows2d;
pub mod formats;
pub mod label;
pub mod merge;
pub mod profile;
#[cfg(test)]
mod reference;
pub mod series;
pub mod source;
pub mod summary;
pub mod tree;

pub use label::{KeyKind, Prefix};
pub use merge::{merge_all, merge_with, MergeError, Merger};
pub use profile::{
    ConfigError, FlowKey, Profiler, ProfilerConfig, DEFAULT_BUDGET, DEFAULT_EXACT_KEYS,
    DEFAULT_FLOW_SLOTS, DEFAULT_PAIRS, DEFAULT_THRESHOLD, MIN_EXACT_KEYS,
};
pub use series::{top_series, Series};
pub use summary::{parse_summaries, ParseError, Section, SectionKind, Summary};
pub use tree::{Entry, Metric, PatriciaTree};
