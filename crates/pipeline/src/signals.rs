//! SIGINT, SIGTERM and SIGHUP stop long jobs cleanly: the pipeline's loops
//! poll the stop flag and close their output files properly before exiting,
//! and print their statistics.
//!
//! The signals are handled on a thread of their own (signal-hook's
//! iterator), not in the handler:
//! - the first sets the stop flag;
//! - another within [`GRACE`] of the first is ignored with a note: `timeout`
//!   signals its child and then the child's process group, and a quick
//!   second Ctrl-C is common, and neither means "lose the tail";
//! - a later one sets the abort flag: a live capture stops draining its
//!   queue (what was left is counted as dropped by kansoku, the accounting
//!   stays exact), the files are closed as they are, with every completed
//!   block readable, and the statistics printed; if the job has still not
//!   ended [`LAST_RESORT`] after that, the process exits with 130.
//!
//! `capture --rules` turns SIGHUP into a request to re-read the rules
//! ([`reload_flag`]); everywhere else SIGHUP stops the job like SIGINT.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

/// A second signal this soon after the first is taken for the same request.
pub const GRACE: Duration = Duration::from_secs(2);
/// After an abort, how long the job may take to close its files before the
/// process exits without them.
pub const LAST_RESORT: Duration = Duration::from_secs(5);

static STOP: OnceLock<Arc<AtomicBool>> = OnceLock::new();
static ABORT: AtomicBool = AtomicBool::new(false);
static RELOAD: AtomicBool = AtomicBool::new(false);
/// SIGHUP requests a reload (set by `capture --rules`) instead of a stop.
static HUP_RELOADS: AtomicBool = AtomicBool::new(false);

fn name(sig: i32) -> &'static str {
    match sig {
        SIGINT => "SIGINT",
        SIGTERM => "SIGTERM",
        SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

/// Installs the signal thread. Without it (registration failed, which it
/// does only for forbidden signals) the job still runs; it just cannot stop
/// cleanly.
pub fn install() {
    let stop = Arc::clone(STOP.get_or_init(|| Arc::new(AtomicBool::new(false))));
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
        return;
    };
    let spawned = std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut first: Option<Instant> = None;
            for sig in signals.forever() {
                if sig == SIGHUP && HUP_RELOADS.load(Ordering::Relaxed) {
                    RELOAD.store(true, Ordering::Relaxed);
                    continue;
                }
                match first {
                    None => {
                        first = Some(Instant::now());
                        stop.store(true, Ordering::Relaxed);
                    }
                    Some(t) if t.elapsed() < GRACE => eprintln!(
                        "kansoku: {} {:.0} ms after the first: ignored, already stopping (one more after {} s aborts)",
                        name(sig),
                        t.elapsed().as_secs_f64() * 1e3,
                        GRACE.as_secs()
                    ),
                    Some(_) if !ABORT.load(Ordering::Relaxed) => {
                        eprintln!(
                            "kansoku: {} again: aborting; what was written stays readable",
                            name(sig)
                        );
                        ABORT.store(true, Ordering::Relaxed);
                        std::thread::spawn(|| {
                            std::thread::sleep(LAST_RESORT);
                            eprintln!(
                                "kansoku: still not done {} s after the abort: exiting now",
                                LAST_RESORT.as_secs()
                            );
                            std::process::exit(130);
                        });
                    }
                    Some(_) => {}
                }
            }
        });
    if spawned.is_err() {
        // No thread to act on them: the signals at least still stop the job.
        for sig in [SIGINT, SIGTERM, SIGHUP] {
            let _ =
                signal_hook::flag::register(sig, Arc::clone(STOP.get_or_init(Default::default)));
        }
    }
}

/// The flag: set once a stop was requested.
pub fn stop_flag() -> &'static AtomicBool {
    static NEVER: AtomicBool = AtomicBool::new(false);
    STOP.get().map_or(&NEVER, |f| f.as_ref())
}

/// Set on an abort: a signal more than [`GRACE`] after the one that
/// stopped the job.
pub fn abort_flag() -> &'static AtomicBool {
    &ABORT
}

/// The same flag, shared, for work that outlives a borrow (the web
/// benchmark's threads).
pub fn stop_shared() -> Arc<AtomicBool> {
    STOP.get()
        .map_or_else(|| Arc::new(AtomicBool::new(false)), Arc::clone)
}

/// SIGHUP as a request to reload (`capture --rules`): from this call on,
/// each SIGHUP sets the flag (cleared by whoever serves it) instead of
/// stopping the job.
pub fn reload_flag() -> &'static AtomicBool {
    HUP_RELOADS.store(true, Ordering::Relaxed);
    &RELOAD
}
