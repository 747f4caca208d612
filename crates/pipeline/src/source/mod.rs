//! Sources: where a run's items come from.
//!
//! - [`trace::TraceSource`]: a trace file or standard input, optionally a
//!   time window of it (the seek index picks the blocks).
//! - [`headers::HeaderSource`]: a ClassBench header trace (or a packet
//!   trace's IP headers) as batches of filter keys.
//! - [`synth::SynthSource`]: synthetic traffic.
//! - [`split::SplitSource`]: an uncompressed pcap file (indexed or not) or
//!   pcapng file (not indexed) read on two threads, its packets handed over
//!   as flows, for the profiler.
//! - [`lane::LaneSource`]: a capture ring's packets, handed over by the
//!   ring thread of [`lane::run_lane`].
//!
//! A trace replayed on the wire (`kansoku generate -r`) is a
//! [`trace::TraceSource`] into the sender sink.

pub mod dir;
pub mod headers;
pub mod lane;
pub mod split;
pub mod synth;
pub mod trace;
