//! Moving a thread into a network namespace (`setns(2)`), for tests and
//! tools that open devices and sockets inside one: a descriptor keeps the
//! namespace it was opened in, whichever thread uses it later.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

/// Moves the calling thread, and only it, into the network namespace at
/// `path` (`/run/netns/NAME` for one made by `ip netns add NAME`). Needs
/// CAP_SYS_ADMIN. The other threads of the process stay where they are;
/// a thread made only for this and then ended leaves no trace.
pub fn enter(path: &Path) -> io::Result<()> {
    let ns = File::open(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    // SAFETY: setns(2) on a descriptor we own for the call; it changes only
    // this thread's namespace and touches no memory of ours.
    let r = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
    if r != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("setns {}: {e}", path.display()),
        ));
    }
    Ok(())
}
