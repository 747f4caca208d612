//! The one loop under every command: take an item from a source, hand it to
//! a consumer, until the source ends, the consumer is done, a stop is
//! requested, or something fails; then close the source into a [`Report`].

use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::Result;
use crate::report::Report;

/// Where a run's items come from: a trace file, a header trace, synthetic
/// traffic, a capture ring's lane.
pub trait Source {
    /// What one step yields; it may borrow the source's buffer.
    type Item<'a>
    where
        Self: 'a;

    /// How the source is named in messages (a file name, an interface).
    fn name(&self) -> &str;

    /// The next item; `Ok(None)` at the end (a truncated input also ends
    /// here, and says so in [`Source::close`]). An error is a bad input.
    fn next(&mut self) -> Result<Option<Self::Item<'_>>>;

    /// Bytes of the input consumed so far, for a progress bar.
    fn position(&self) -> u64 {
        0
    }

    /// Whether the last `None` from [`Source::next`] means "nothing for
    /// now" (a quiet pipe or capture, or the idle time has passed while
    /// items flow) rather than the end: the run then tells the consumer
    /// ([`Consumer::idle`]), checks its stop flag, and goes on.
    fn waiting(&self) -> bool {
        false
    }

    /// At the end: the source's part of the report (packets, bytes,
    /// where the input was cut).
    fn close(&mut self, report: &mut Report);
}

/// Whether the run goes on after an item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// The consumer has what it wanted (`-c COUNT`).
    Stop,
}

/// What the items of source `S` are given to.
pub trait Consumer<S: Source + ?Sized> {
    fn consume(&mut self, item: S::Item<'_>) -> Result<Flow>;

    /// The source has been quiet for the idle time, or that long has
    /// passed since the last call: a trace output writes its partial block
    /// (so a kill loses at most that long of input), printed lines are
    /// flushed.
    fn idle(&mut self) -> Result<()> {
        Ok(())
    }
}

/// Items between two progress updates: the per-item cost stays a mask test.
pub const PROGRESS_EVERY: u64 = 8192;

/// Progress on a terminal; called every [`PROGRESS_EVERY`] items.
pub trait Progress {
    fn tick(&self, items: u64, position: u64);
}

/// How a run is steered from outside.
#[derive(Clone, Copy)]
pub struct Control<'a> {
    /// Set by SIGINT or SIGTERM: the run stops before its next item and
    /// reports that it was interrupted.
    pub stop: &'a AtomicBool,
    pub progress: Option<&'a dyn Progress>,
}

impl<'a> Control<'a> {
    /// A run that only `stop` ends early.
    pub fn new(stop: &'a AtomicBool) -> Control<'a> {
        Control {
            stop,
            progress: None,
        }
    }
}

/// Runs `source` into `consumer`. Errors do not escape: a bad input, a
/// failed output or an interruption end the run and are written into the
/// report, after which the caller closes its outputs (so that what was
/// written stays readable) and takes the exit code from the report.
#[inline]
pub fn run<S, C>(source: &mut S, consumer: &mut C, ctl: Control<'_>) -> Report
where
    S: Source,
    C: Consumer<S>,
{
    let mut report = Report::default();
    let mut items = 0u64;
    // The last step gave no item.
    let mut quiet = false;
    loop {
        if quiet {
            if !source.waiting() {
                break;
            }
            quiet = false;
            if let Err(e) = consumer.idle() {
                report.failed(e);
                break;
            }
        }
        if ctl.stop.load(Ordering::Relaxed) {
            report.interrupted = Some(source.name().to_string());
            break;
        }
        // Where the input stands, read before the item borrows the source.
        let tick = (items + 1).is_multiple_of(PROGRESS_EVERY);
        let position = if tick { source.position() } else { 0 };
        let item = match source.next() {
            Ok(Some(item)) => item,
            // The end, or nothing for now: decided at the loop's top, where
            // the source is no longer borrowed by the step.
            Ok(None) => {
                quiet = true;
                continue;
            }
            Err(e) => {
                report.failed(e);
                break;
            }
        };
        items += 1;
        if tick {
            if let Some(p) = ctl.progress {
                p.tick(items, position);
            }
        }
        match consumer.consume(item) {
            Ok(Flow::Continue) => {}
            Ok(Flow::Stop) => {
                // A consumer that stopped because of the signal (a sender
                // between two frames) was interrupted all the same.
                if ctl.stop.load(Ordering::Relaxed) {
                    report.interrupted = Some(source.name().to_string());
                }
                break;
            }
            Err(e) => {
                report.failed(e);
                break;
            }
        }
    }
    source.close(&mut report);
    report
}
