//! The profiler stage: aguri's [`aguri::Profiler`] and where its summaries go.

use aguri::{Profiler, ProfilerConfig, Summary};
use wire::Slice;

use crate::error::{Error, Result};
use crate::packet::Frame;
use crate::sink::summary::SummarySink;

/// The interval length given with `flag` (`-i`, `--profile-interval`), in
/// nanoseconds: at least one second.
pub fn interval_ns(seconds: u64, flag: &str) -> Result<u64> {
    if seconds == 0 {
        return Err(Error::usage(format!("{flag} must be at least 1 second")));
    }
    seconds
        .checked_mul(1_000_000_000)
        .ok_or_else(|| Error::usage(format!("{flag} {seconds} is too long")))
}

/// Counts packets into summaries, one per interval, written as they close.
pub struct ProfileStage {
    profiler: Profiler,
    sink: SummarySink,
    packets: u64,
}

/// What a profiler did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProfileCounts {
    pub packets: u64,
    pub summaries: u64,
}

impl ProfileStage {
    /// A profiler of `cfg` writing into `sink`.
    pub fn new(cfg: ProfilerConfig, sink: SummarySink) -> Result<ProfileStage> {
        let profiler = cfg.build().map_err(|e| Error::usage(e.to_string()))?;
        Ok(ProfileStage {
            profiler,
            sink,
            packets: 0,
        })
    }

    /// Counts one packet, its flow read by the profiler's own fast path.
    #[inline]
    pub fn frame(&mut self, f: &Frame<'_>) -> Result<()> {
        self.packets += 1;
        let done = self
            .profiler
            .add_frame(f.link_type, f.ts_ns, f.orig_len, f.data);
        self.write(done)
    }

    /// Counts one packet another stage has sliced: its flow from that slice.
    #[inline]
    pub fn sliced(&mut self, f: &Frame<'_>, s: &Slice<'_>) -> Result<()> {
        self.packets += 1;
        let done = self
            .profiler
            .add_bits(f.ts_ns, s.flow_bits().as_ref(), f.orig_len);
        self.write(done)
    }

    #[inline]
    fn write(&mut self, done: Option<Summary>) -> Result<()> {
        match done {
            Some(s) => self.sink.add(&s),
            None => Ok(()),
        }
    }

    /// Closes the current interval if `now_ns` lies past it.
    pub fn advance(&mut self, now_ns: u64) -> Result<()> {
        match self.profiler.advance(now_ns) {
            Some(s) => self.sink.add(&s),
            None => Ok(()),
        }
    }

    /// Writes the last, partial interval and closes the summary output.
    pub fn finish(mut self) -> Result<ProfileCounts> {
        if let Some(s) = self.profiler.finish() {
            self.sink.add(&s)?;
        }
        let summaries = self.sink.written();
        self.sink.finish()?;
        Ok(ProfileCounts {
            packets: self.packets,
            summaries,
        })
    }
}
