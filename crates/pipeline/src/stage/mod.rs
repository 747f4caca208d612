//! Stages: what is done to each packet between its source and its sinks.
//!
//! [`Stages`] holds the filter and the profiler of a run. A
//! packet goes through the filter first; the profiler counts what the
//! filter keeps. A packet is parsed once: the filter's slice is handed to
//! the profiler; a profiler alone reads the flow with `wire::flow_bits`,
//! its measured fast path; with no stage, nothing is parsed.

pub mod census;
pub mod filter;
pub mod ipsec;
pub mod profile;

use ::filter::{Action, Filter};

use crate::error::Result;
use crate::packet::Frame;
use crate::stage::filter::LaneRules;
use crate::stage::profile::ProfileStage;

/// The filter and the profiler of a run, either or both absent.
#[derive(Default)]
pub struct Stages {
    pub filter: Option<Filter>,
    pub profile: Option<ProfileStage>,
    /// Where a reloaded rule set arrives (live captures with `--rules`).
    pub reload: Option<LaneRules>,
}

impl Stages {
    /// The filter's verdict on `frame` (Pass without a filter), after
    /// which the profiler counts it if it was kept.
    #[inline(always)]
    pub fn packet(&mut self, frame: Frame<'_>) -> Result<Action> {
        match (&mut self.filter, &mut self.profile) {
            (None, None) => Ok(Action::Pass),
            (None, Some(p)) => p.frame(&frame).map(|_| Action::Pass),
            (Some(f), profile) => {
                let slice = wire::slice(frame.link_type, frame.data);
                let action = f.apply_slice(&slice, u64::from(frame.orig_len)).action;
                if let (Action::Pass, Some(p)) = (action, profile) {
                    p.sliced(&frame, &slice)?;
                }
                Ok(action)
            }
        }
    }

    /// Whether there is no stage: every packet passes, unparsed.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.filter.is_none() && self.profile.is_none()
    }

    /// Between two batches of a live source: a reloaded rule set, if one
    /// waits, takes over from here.
    #[inline]
    pub fn batch_end(&mut self) {
        if let Some(r) = &mut self.reload {
            r.swap_in(&mut self.filter);
        }
    }

    /// A live source's heartbeat: every packet before `now_ns` has been seen.
    pub fn watermark(&mut self, now_ns: u64) -> Result<()> {
        match self.profile.as_mut() {
            Some(p) => p.advance(now_ns),
            None => Ok(()),
        }
    }
}
