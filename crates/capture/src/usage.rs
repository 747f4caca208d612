//! CPU time of child processes, for benchmarks that compare a capture's cost
//! with another tool's (`kansoku bench capture` against tcpdump).

use std::io;
use std::mem::MaybeUninit;
use std::time::Duration;

/// User plus system CPU time of every child of this process that has ended
/// and been waited for, all of its threads included (`getrusage`
/// `RUSAGE_CHILDREN`, microsecond resolution). The difference across one
/// `wait` is that child's CPU time, when no other child is waited for in
/// between.
pub fn children_cpu_time() -> io::Result<Duration> {
    let mut ru = MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `ru` is valid for writes of one `rusage`, which getrusage
    // fills completely when it returns 0.
    let r = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, ru.as_mut_ptr()) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: getrusage returned 0, so it initialized `ru` (and an
    // all-zero `rusage` is a valid value anyway: plain integers).
    let ru = unsafe { ru.assume_init() };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    Ok(tv(ru.ru_utime) + tv(ru.ru_stime))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_child_shows_in_the_difference() {
        let before = children_cpu_time().unwrap();
        // A child that burns about 0.2 s of CPU in a shell loop.
        let status = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"])
            .status()
            .unwrap();
        assert!(status.success());
        let spent = children_cpu_time().unwrap() - before;
        assert!(spent > Duration::from_millis(5), "{spent:?}");
    }
}
