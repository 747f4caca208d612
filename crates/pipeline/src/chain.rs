//! The consumer most commands run: the stages, then the sinks for what the
//! filter passed and what it rejected.

use filter::Action;
use trace::Record;

use crate::error::Result;
use crate::packet::Frame;
use crate::run::{Consumer, Flow};
use crate::sink::PacketSink;
use crate::source::lane::{LaneItem, LaneSource};
use crate::source::split::{SplitItem, SplitSource};
use crate::source::synth::SynthSource;
use crate::source::trace::TraceSource;
use crate::stage::Stages;

/// Packets through [`Stages`] into a sink for the passed ones and one for
/// the rejected ones (either may be absent). Records that are not packets
/// (sections, interfaces) go to both sinks, so that each output is a
/// complete trace.
pub struct Chain<S> {
    pub stages: Stages,
    pub passed: Option<S>,
    pub rejected: Option<S>,
    /// Stop after this many packets taken from the source (`-c`).
    pub limit: Option<u64>,
    /// Packets taken, and how many the filter rejected.
    pub counts: ChainCounts,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChainCounts {
    pub taken: u64,
    pub passed: u64,
    pub rejected: u64,
}

impl<S: PacketSink> Chain<S> {
    /// Tells the sinks the input is quiet (see [`PacketSink::idle`]).
    fn idle_sinks(&mut self) -> Result<()> {
        for s in [&mut self.passed, &mut self.rejected].into_iter().flatten() {
            s.idle()?;
        }
        Ok(())
    }

    pub fn new(stages: Stages, passed: Option<S>) -> Chain<S> {
        Chain {
            stages,
            passed,
            rejected: None,
            limit: None,
            counts: ChainCounts::default(),
        }
    }

    /// Whether `-c` has been reached; otherwise counts one more packet.
    #[inline]
    fn take(&mut self) -> bool {
        if self.limit.is_some_and(|l| self.counts.taken >= l) {
            return false;
        }
        self.counts.taken += 1;
        true
    }

    /// The sink for `action`, counting it.
    #[inline]
    fn sink(&mut self, action: Action) -> Option<&mut S> {
        match action {
            Action::Pass => {
                self.counts.passed += 1;
                self.passed.as_mut()
            }
            Action::Reject => {
                self.counts.rejected += 1;
                self.rejected.as_mut()
            }
        }
    }

    /// One frame of a source without file structure.
    #[inline]
    pub fn frame(&mut self, f: Frame<'_>) -> Result<Flow> {
        self.packet(|| f, |s| s.frame(&f))
    }

    /// A packet through the stages, then written by `write` to the sink
    /// the filter's verdict picks.
    #[inline(always)]
    fn packet<'f>(
        &mut self,
        f: impl FnOnce() -> Frame<'f>,
        write: impl FnOnce(&mut S) -> Result<()>,
    ) -> Result<Flow> {
        if !self.take() {
            return Ok(Flow::Stop);
        }
        let action = if self.stages.is_empty() {
            Action::Pass
        } else {
            self.stages.packet(f())?
        };
        if let Some(s) = self.sink(action) {
            write(s)?;
            if s.done() {
                return Ok(Flow::Stop);
            }
        }
        Ok(Flow::Continue)
    }
}

impl<S: PacketSink> Consumer<TraceSource> for Chain<S> {
    #[inline(always)]
    fn consume(&mut self, rec: Record<'_>) -> Result<Flow> {
        let Record::Packet(p) = &rec else {
            for s in [&mut self.passed, &mut self.rejected].into_iter().flatten() {
                s.record(&rec)?;
            }
            return Ok(Flow::Continue);
        };
        self.packet(|| Frame::of(p), |s| s.record(&rec))
    }

    fn idle(&mut self) -> Result<()> {
        self.idle_sinks()
    }
}

/// A split read's packets come sliced to their flows: only the profiler can
/// take them, so a chain with a filter or a packet output is an error (the
/// split source is opened only for a chain of the profiler alone).
impl<S: PacketSink> Consumer<SplitSource> for Chain<S> {
    #[inline(always)]
    fn consume(&mut self, item: SplitItem<'_>) -> Result<Flow> {
        let s = match item {
            SplitItem::Record(rec) => {
                return <Self as Consumer<TraceSource>>::consume(self, rec);
            }
            SplitItem::Packet(s) => s,
        };
        if !self.take() {
            return Ok(Flow::Stop);
        }
        match (&self.stages.filter, &mut self.stages.profile, &self.passed) {
            (None, Some(p), None) => {
                self.counts.passed += 1;
                p.split(&s)?;
                Ok(Flow::Continue)
            }
            _ => Err(crate::Error::usage(
                "a trace read on two threads goes to the profiler alone",
            )),
        }
    }
}

impl<S: PacketSink> Consumer<SynthSource> for Chain<S> {
    #[inline]
    fn consume(&mut self, f: Frame<'_>) -> Result<Flow> {
        self.frame(f)
    }
}

impl<S: PacketSink> Consumer<LaneSource<'_>> for Chain<S> {
    #[inline]
    fn consume(&mut self, item: LaneItem<'_>) -> Result<Flow> {
        match item {
            LaneItem::Frame(f) => self.frame(f),
            LaneItem::BatchEnd { watermark } => {
                self.stages.batch_end();
                if let Some(ns) = watermark {
                    self.stages.watermark(ns)?;
                }
                for s in [&mut self.passed, &mut self.rejected].into_iter().flatten() {
                    s.flush()?;
                }
                Ok(Flow::Continue)
            }
        }
    }

    fn idle(&mut self) -> Result<()> {
        self.idle_sinks()
    }
}
