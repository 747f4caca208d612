//! SIGINT and SIGTERM stop long jobs cleanly: the pipeline's loops poll the
//! flag and close their output files properly before exiting.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::sync::OnceLock;

static STOP: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// Installs the handlers. A second signal while stopping terminates at once
/// (the conditional-shutdown pattern of signal-hook), so a stuck job can
/// still be interrupted.
pub fn install() {
    let flag = STOP.get_or_init(|| Arc::new(AtomicBool::new(false)));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // Registration fails only for forbidden signals, which these are not;
        // without handlers the job still runs, it just cannot stop cleanly.
        let _ = signal_hook::flag::register_conditional_shutdown(sig, 130, Arc::clone(flag));
        let _ = signal_hook::flag::register(sig, Arc::clone(flag));
    }
}

/// The flag: set once a stop was requested.
pub fn stop_flag() -> &'static AtomicBool {
    static NEVER: AtomicBool = AtomicBool::new(false);
    STOP.get().map_or(&NEVER, |f| f.as_ref())
}

/// The same flag, shared, for work that outlives a borrow (the web
/// benchmark's threads).
pub fn stop_shared() -> Arc<AtomicBool> {
    STOP.get()
        .map_or_else(|| Arc::new(AtomicBool::new(false)), Arc::clone)
}

/// SIGHUP as a request to reload (`capture --rules`): the flag is set on
/// each SIGHUP and cleared by whoever serves it. Installed only by the
/// commands that reload; elsewhere SIGHUP keeps its default.
pub fn reload_flag() -> &'static AtomicBool {
    static RELOAD: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    RELOAD.get_or_init(|| {
        let flag = Arc::new(AtomicBool::new(false));
        let _ = signal_hook::flag::register(signal_hook::consts::SIGHUP, Arc::clone(&flag));
        flag
    })
}
