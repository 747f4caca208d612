//! Progress on a terminal for long jobs: a bar over the input file's bytes
//! (or a spinner on a stream), updated every few thousand packets (`pipeline::run::PROGRESS_EVERY`). Nothing is
//! drawn when standard error is not a terminal.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A bar for reading `total` bytes (None: unknown size, a spinner).
    /// `enabled` lets a caller keep the terminal for its own output.
    pub fn new(total: Option<u64>, enabled: bool) -> Progress {
        if !enabled || !std::io::stderr().is_terminal() {
            return Progress { bar: None };
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
        Progress { bar: Some(bar) }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl pipeline::Progress for Progress {
    /// Redraws (the pipeline calls it every few thousand items).
    fn tick(&self, packets: u64, position: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(position);
            bar.set_message(format!("{packets} packets"));
        }
    }
}
