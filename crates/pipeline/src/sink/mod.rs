//! Sinks: where packets and summaries go.
//!
//! - [`trace::TraceSink`]: a trace file (rotated, compressed, indexed) or
//!   standard output.
//! - [`summary::SummarySink`]: aguri summaries to standard output, a file,
//!   a directory, or an archive rolled up into hours and days.
//! - [`lines::Printer`]: one text line or JSON object per packet.
//! - [`tx::TxSink`]: the wire, paced (the traffic generator).
//!
//! Packet sinks implement [`PacketSink`].

pub mod fleet;
pub mod lines;
pub mod summary;
pub mod trace;
pub mod tx;

use ::trace::Record;

use crate::error::Result;
use crate::packet::Frame;
use lines::Printer;
use trace::{SinkSummary, TraceSink};

/// Takes the packets a pipeline keeps (or rejects).
pub trait PacketSink {
    /// A record of a trace file: sections, interfaces and other blocks are
    /// given too, so that a converted file keeps them.
    fn record(&mut self, rec: &Record<'_>) -> Result<()>;

    /// A frame of a source without file structure (a ring, synthetic
    /// traffic), with nanosecond times.
    fn frame(&mut self, f: &Frame<'_>) -> Result<()>;

    /// Whether the sink takes nothing more (a generator past its
    /// `--duration`): the run then ends.
    fn done(&self) -> bool {
        false
    }

    /// A live source has nothing more for now: packet lines on a terminal
    /// are flushed. (A trace is not: its blocks are what make it compress.)
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }

    /// The input has been quiet for the idle time (or that long has passed
    /// since the last call): a trace writes its partial block, so that a
    /// kill loses at most that long of a quiet input.
    fn idle(&mut self) -> Result<()> {
        self.flush()
    }
}

/// No sink: the packets are counted by the stages and go nowhere.
#[derive(Clone, Copy, Debug, Default)]
pub struct Discard;

impl PacketSink for Discard {
    fn record(&mut self, _: &Record<'_>) -> Result<()> {
        Ok(())
    }

    fn frame(&mut self, _: &Frame<'_>) -> Result<()> {
        Ok(())
    }
}

impl<S: PacketSink + ?Sized> PacketSink for Box<S> {
    fn record(&mut self, rec: &Record<'_>) -> Result<()> {
        (**self).record(rec)
    }

    fn frame(&mut self, f: &Frame<'_>) -> Result<()> {
        (**self).frame(f)
    }

    fn done(&self) -> bool {
        (**self).done()
    }

    fn flush(&mut self) -> Result<()> {
        (**self).flush()
    }

    fn idle(&mut self) -> Result<()> {
        (**self).idle()
    }
}

/// Where a reading command's packets go: printed, or written to a trace.
pub enum PrintOrTrace {
    Print(Printer),
    Trace(TraceSink),
}

impl PacketSink for PrintOrTrace {
    fn record(&mut self, rec: &Record<'_>) -> Result<()> {
        match self {
            PrintOrTrace::Print(p) => p.record(rec),
            PrintOrTrace::Trace(t) => t.record(rec),
        }
    }

    fn frame(&mut self, f: &Frame<'_>) -> Result<()> {
        match self {
            PrintOrTrace::Print(p) => p.frame(f),
            PrintOrTrace::Trace(t) => t.frame(f),
        }
    }

    fn flush(&mut self) -> Result<()> {
        match self {
            PrintOrTrace::Print(p) => p.flush(),
            PrintOrTrace::Trace(_) => Ok(()),
        }
    }

    fn idle(&mut self) -> Result<()> {
        match self {
            PrintOrTrace::Print(p) => p.idle(),
            PrintOrTrace::Trace(t) => t.idle(),
        }
    }
}

impl PrintOrTrace {
    /// Flushes the lines or closes the trace; for a trace, what it holds.
    pub fn close(self) -> Result<Option<SinkSummary>> {
        match self {
            PrintOrTrace::Print(mut p) => PacketSink::flush(&mut p).map(|_| None),
            PrintOrTrace::Trace(t) => t.finish().map(Some),
        }
    }
}
