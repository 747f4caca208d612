//! Waiting for any of several descriptors (a TUN device, raw sockets) to
//! become readable, with a timeout, so that a loop over them can also check
//! a stop flag: [`wait_readable`] (`poll(2)`, for a wait now and then) and
//! [`Poller`] (`epoll(7)`, for a loop that waits on the same descriptors
//! thousands of times a second: they are registered once, where `poll`
//! registers and unregisters every one of them on every call, which was a
//! sixth of an IPsec gateway's time under a TCP stream).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
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

/// An epoll instance watching a fixed set of descriptors for reading
/// (level-triggered: a descriptor with data left is reported again).
/// Descriptor `i` of [`Poller::new`] is bit `i` of the [`Ready`] set. A
/// descriptor closed while the poller lives is no longer reported (epoll
/// forgets a file when its last descriptor closes).
#[derive(Debug)]
pub struct Poller {
    ep: OwnedFd,
    n: usize,
}

impl Poller {
    /// Watches `fds` (at most [`MAX_FDS`]).
    pub fn new(fds: &[BorrowedFd<'_>]) -> io::Result<Poller> {
        if fds.len() > MAX_FDS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("Poller: {} descriptors, at most {MAX_FDS}", fds.len()),
            ));
        }
        // SAFETY: epoll_create1 takes a flag and returns a new descriptor
        // or -1.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `ep` is a descriptor epoll_create1 just gave us, owned by
        // nothing else.
        let ep = unsafe { OwnedFd::from_raw_fd(ep) };
        for (i, fd) in fds.iter().enumerate() {
            let mut ev = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: i as u64,
            };
            // SAFETY: both descriptors are open (`fd` is borrowed for the
            // call); `ev` is a valid epoll_event the kernel only reads.
            let r = unsafe {
                libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, fd.as_raw_fd(), &mut ev)
            };
            if r != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(Poller { ep, n: fds.len() })
    }

    /// Waits until a descriptor can be read or `timeout` passes (rounded up
    /// to a millisecond; zero looks and returns). Errors and hang-ups count
    /// as ready, as in [`wait_readable`]; a signal returns nothing ready.
    pub fn wait(&self, timeout: Duration) -> io::Result<Ready> {
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; MAX_FDS];
        let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as libc::c_int;
        let max = self.n.max(1) as libc::c_int;
        // SAFETY: `evs` has room for `max` <= MAX_FDS events, which the
        // kernel writes during the call only.
        let r = unsafe { libc::epoll_wait(self.ep.as_raw_fd(), evs.as_mut_ptr(), max, ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(Ready(0));
            }
            return Err(e);
        }
        let mut ready = 0u64;
        for ev in &evs[..r as usize] {
            let i = ev.u64;
            if i < MAX_FDS as u64 {
                ready |= 1 << i;
            }
        }
        Ok(Ready(ready))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
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

    #[test]
    fn a_poller_reports_what_poll_reports_again_and_again() {
        let (mut a, b) = UnixStream::pair().unwrap();
        let (mut c, d) = UnixStream::pair().unwrap();
        let p = Poller::new(&[b.as_fd(), d.as_fd()]).unwrap();
        let t = Instant::now();
        assert!(!p.wait(Duration::from_millis(30)).unwrap().any());
        assert!(t.elapsed() >= Duration::from_millis(30));
        c.write_all(b"x").unwrap();
        for _ in 0..3 {
            // Level-triggered: unread data is reported every time.
            let r = p.wait(Duration::from_secs(5)).unwrap();
            assert!(!r.is_ready(0) && r.is_ready(1), "{r:?}");
        }
        a.write_all(b"y").unwrap();
        let r = p.wait(Duration::ZERO).unwrap();
        assert!(r.is_ready(0) && r.is_ready(1));
        // A hang-up is readable (a read says end of file).
        drop(a);
        let mut buf = [0u8; 4];
        let _ = (&b).read(&mut buf).unwrap();
        assert!(p.wait(Duration::ZERO).unwrap().is_ready(0));
        let many = vec![b.as_fd(); MAX_FDS + 1];
        assert_eq!(
            Poller::new(&many).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
    }
}
