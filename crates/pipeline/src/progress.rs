//! Progress on a terminal for long jobs: a bar over the input file's bytes
//! (or a spinner on a stream), updated every few thousand packets (`pipeline::run::PROGRESS_EVERY`). Nothing is
//! drawn when standard error is not a terminal.

use std::io::IsTerminal;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct TerminalProgress {
    bar: Option<ProgressBar>,
    /// The fleet store's sender, whose counters the line shows.
    store: Option<Arc<store::SendStats>>,
}

/// The fleet store's part of the progress line.
pub fn store_note(s: &store::SendStats) -> String {
    format!(
        " · store: {} sent, {} waiting in the spool{}",
        s.sent.load(Ordering::Relaxed),
        s.waiting.load(Ordering::Relaxed),
        if s.down.load(Ordering::Relaxed) {
            " (the store does not answer)"
        } else {
            ""
        }
    )
}

impl TerminalProgress {
    /// A bar for reading `total` bytes (None: unknown size, a spinner).
    /// `enabled` lets a caller keep the terminal for its own output.
    pub fn new(total: Option<u64>, enabled: bool) -> TerminalProgress {
        if !enabled || !std::io::stderr().is_terminal() {
            return TerminalProgress {
                bar: None,
                store: None,
            };
        }
        let bar = match total {
            Some(n) => {
                ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::stderr_with_hz(4))
                    .with_style(
                        ProgressStyle::with_template(
                            "{bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta} {msg}",
                        )
                        .unwrap_or_else(|_| ProgressStyle::default_bar()),
                    )
            }
            None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(4))
                .with_style(
                    ProgressStyle::with_template("{spinner} {bytes} {bytes_per_sec} {msg}")
                        .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                ),
        };
        bar.enable_steady_tick(Duration::from_millis(250));
        TerminalProgress {
            bar: Some(bar),
            store: None,
        }
    }

    /// Shows the fleet store's counters too.
    pub fn with_store(mut self, store: Option<Arc<store::SendStats>>) -> TerminalProgress {
        self.store = store;
        self
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl crate::run::Progress for TerminalProgress {
    /// Redraws (the pipeline calls it every few thousand items).
    fn tick(&self, packets: u64, position: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(position);
            let store = self.store.as_deref().map(store_note).unwrap_or_default();
            bar.set_message(format!("{packets} packets{store}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_shows_what_waits_for_the_store() {
        let s = store::SendStats::default();
        s.sent.store(12, Ordering::Relaxed);
        s.waiting.store(3, Ordering::Relaxed);
        assert_eq!(store_note(&s), " · store: 12 sent, 3 waiting in the spool");
        s.down.store(true, Ordering::Relaxed);
        assert!(store_note(&s).ends_with("(the store does not answer)"));
    }
}
