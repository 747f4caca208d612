//! `pipeline`: sources → stages → sinks, one loop under every command, and
//! one end-of-run report from which the exit code is decided.
//!
//! ```text
//! sources                      stages                     sinks
//! TraceSource (file, window) ┐
//! SplitSource (two threads)  ┤                          ┌ TraceSink (pcap/pcapng, codecs, -C/-G)
//! SynthSource                ├─► Chain: Stages ────────►├ SummarySink (aguri text/JSON, archive)
//! LaneSource (capture ring)  ┘    filter ─► profile     └ the CLI's packet lines, the sender
//! HeaderSource (ClassBench) ───► filter match / bench
//! ```
//!
//! [`run::run`] takes items from a [`run::Source`] and gives them to a
//! [`run::Consumer`] until the source ends, the consumer is done, a signal
//! asks to stop, or something fails, and returns a [`report::Report`]:
//! packets, bytes, where the input was cut, whether it was interrupted,
//! drops, problems, a bad input, an output failure. The caller closes its
//! sinks (their failures go into the report too) and exits with
//! [`report::Report::exit_code`]. A packet is sliced at most once however
//! many stages look at it ([`stage::Stages`]).

#![forbid(unsafe_code)]

pub mod capture;
pub mod chain;
#[cfg(feature = "cli")]
pub mod cli;
pub mod error;
pub mod expression;
pub mod extract;
pub mod packet;
pub mod progress;
pub mod query;
pub mod report;
pub mod run;
pub mod signals;
pub mod sink;
pub mod source;
pub mod stage;

pub use capture::{run_lanes, CaptureReport, Lane, StoreCounts};
pub use chain::{Chain, ChainCounts};
pub use error::{clip_long_words, display_path, Error, ErrorKind, ExitCode, Result};
pub use expression::Expression;
pub use packet::Frame;
pub use report::{Drops, Report, Truncated};
pub use run::{run, Consumer, Control, Flow, Progress, Source};
pub use sink::fleet::{Fleet, FleetOptions};
pub use sink::summary::{
    for_each_summary, read_summaries, summary_files, Archive, SummaryFormat, SummarySink,
    SummaryTee, SummaryWriter,
};
pub use sink::trace::{CompressThreads, SinkSummary, TraceSettings, TraceSink};
pub use sink::{Discard, PacketSink};
pub use source::headers::{HeaderSource, Headers};
pub use source::lane::{
    run_lane, Batch, BatchPacket, CaptureStats, LaneItem, LaneSource, LiveStats, PipelineConfig,
    Ring,
};
pub use source::split::{Sliced, SplitItem, SplitSource};
pub use source::synth::SynthSource;
pub use source::trace::{TraceSource, Window};
pub use stage::census::{Census, FileStats};
pub use stage::filter::{load_rules, Reloader, RuleSetHits};
pub use stage::ipsec::{load_sa, write_esp_sa, Direction, IpsecCounts, IpsecRun};
pub use stage::profile::{ProfileCounts, ProfileStage};
pub use stage::Stages;
