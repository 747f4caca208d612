//! Waiting for any of several descriptors (a TUN device, raw sockets) to
//! become readable, with a timeout, so that a loop over them can also check
//! a stop flag.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::Duration;

/// Descriptors one [`wait_readable`] call can watch at most.
pub const MAX_FDS: usize = 64;

/// Which of the descriptors given to [`wait_readable`] are ready: bit `i`
/// stands for `fds[i]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ready(u64);

impl Ready {
    /// Whether `fds[i]` is ready.
    pub fn is_ready(self, i: usize) -> bool {
        i < MAX_FDS && self.0 & (1 << i) != 0
    }

    /// Whether any descriptor is ready (false after a timeout or a signal).
    pub fn any(self) -> bool {
        self.0 != 0
    }
}

/// Waits with `poll(2)` until one of `fds` can be read or `timeout` passes
/// (rounded up to a millisecond). A descriptor with an error or a hang-up
/// pending counts as ready: reading it reports the error. A signal ends the
/// wait early with nothing ready. More than [`MAX_FDS`] descriptors is
/// `InvalidInput`.
pub fn wait_readable(fds: &[BorrowedFd<'_>], timeout: Duration) -> io::Result<Ready> {
    if fds.len() > MAX_FDS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "wait_readable: {} descriptors, at most {MAX_FDS}",
                fds.len()
            ),
        ));
    }
    let mut pfds = [libc::pollfd {
        fd: -1,
        events: 0,
        revents: 0,
    }; MAX_FDS];
    for (p, fd) in pfds.iter_mut().zip(fds) {
        p.fd = fd.as_raw_fd();
        p.events = libc::POLLIN;
    }
    let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as libc::c_int;
    // SAFETY: `pfds[..fds.len()]` is a valid array of that many pollfds,
    // which the kernel reads and writes during the call only.
    let r = unsafe { libc::poll(pfds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(Ready(0));
        }
        return Err(e);
    }
    let mut ready = 0u64;
    for (i, p) in pfds[..fds.len()].iter().enumerate() {
        if p.revents != 0 {
            ready |= 1 << i;
        }
    }
    Ok(Ready(ready))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;
    use std::time::Instant;

    #[test]
    fn ready_descriptors_are_named_and_a_timeout_returns_none() {
        let (mut a, b) = UnixStream::pair().unwrap();
        let (_c, d) = UnixStream::pair().unwrap();
        let t = Instant::now();
        let r = wait_readable(&[b.as_fd(), d.as_fd()], Duration::from_millis(30)).unwrap();
        assert!(!r.any());
        assert!(t.elapsed() >= Duration::from_millis(30));
        a.write_all(b"x").unwrap();
        let r = wait_readable(&[d.as_fd(), b.as_fd()], Duration::from_secs(5)).unwrap();
        assert!(r.any() && !r.is_ready(0) && r.is_ready(1) && !r.is_ready(64));
        let many = vec![b.as_fd(); MAX_FDS + 1];
        let e = wait_readable(&many, Duration::ZERO).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}
