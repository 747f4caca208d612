//! CPU time of child processes, for benchmarks that compare a capture's cost
//! with another tool's (`kansoku bench capture` against tcpdump), and
//! pinning a thread to a core (`kansoku bench ipsec`'s two "hosts").

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

/// Pins the calling thread, and only it, to CPU `cpu` (`sched_setaffinity`
/// on thread id 0, the caller). Fails if the CPU does not exist or is not
/// allowed to this process.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    confine_current_thread(&[cpu])
}

/// The CPUs the calling thread may run on (`sched_getaffinity`), in order.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: an all-zero cpu_set_t is the empty set (plain integers).
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable cpu_set_t of the size given; pid 0
    // is the calling thread.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: every index is below CPU_SETSIZE, inside `set`.
    Ok((0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// Confines the calling thread to `cpus` (`sched_setaffinity`); threads and
/// processes it starts afterwards inherit the set. Fails on an empty set, a
/// CPU beyond the kernel's set, or one not allowed to this process.
pub fn confine_current_thread(cpus: &[usize]) -> io::Result<()> {
    if cpus.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "no CPU to run on",
        ));
    }
    // SAFETY: an all-zero cpu_set_t is the empty set (plain integers).
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CPU {cpu} is beyond the kernel's CPU set"),
            ));
        }
        // SAFETY: `cpu` is below CPU_SETSIZE, checked above.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size given; pid 0 is the
    // calling thread.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    if r != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("confining to CPUs {cpus:?}: {e}"),
        ));
    }
    Ok(())
}

/// Sets the calling thread's nice value (`setpriority` on its thread id:
/// Linux keeps one per thread). Lowering it below 0 needs CAP_SYS_NICE.
pub fn set_current_thread_nice(nice: i32) -> io::Result<()> {
    // SAFETY: gettid has no arguments and cannot fail.
    let tid = unsafe { libc::gettid() };
    // SAFETY: setpriority with plain integer arguments; `tid` is this
    // thread's id.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The clock ticks of `/proc/PID/stat` per second: USER_HZ, which Linux
/// fixes at 100 on every architecture kansoku builds for.
const USER_HZ: u64 = 100;

/// A process's CPU time from `/proc/PID/stat`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcessCpu {
    /// User + system time of the process, all its threads.
    pub own: Duration,
    /// User + system time of its children that ended and that it waited
    /// for (cutime + cstime).
    pub reaped_children: Duration,
}

/// Reads utime, stime, cutime and cstime (fields 14 to 17) from the text of
/// a `/proc/PID/stat` file. The command name, field 2, is in parentheses
/// and may hold spaces and parentheses: fields count from after its last
/// closing one. `None` when the text does not have them.
pub fn parse_stat_cpu(stat: &str) -> Option<ProcessCpu> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Field 3 (the state) is the first after the name: field n is n - 3.
    let tick = |n: usize| f.get(n - 3).and_then(|v| v.parse::<i64>().ok());
    let d = |t: i64| Duration::from_millis(t.max(0) as u64 * 1000 / USER_HZ);
    Some(ProcessCpu {
        own: d(tick(14)?) + d(tick(15)?),
        reaped_children: d(tick(16)?) + d(tick(17)?),
    })
}

/// The CPU times of process `pid` so far (see [`ProcessCpu`]).
pub fn process_cpu(pid: u32) -> io::Result<ProcessCpu> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path)?;
    parse_stat_cpu(&stat).ok_or_else(|| io::Error::other(format!("{path}: CPU fields unreadable")))
}

/// The CPU time (user + system, all threads) that process `pid` has used so
/// far, from `/proc/PID/stat`.
pub fn process_cpu_time(pid: u32) -> io::Result<Duration> {
    process_cpu(pid).map(|c| c.own)
}

/// CPU time the calling thread has used so far (CLOCK_THREAD_CPUTIME_ID,
/// nanosecond resolution): what a thread reports of its own cost. Read
/// through the `cpu-time` crate, as the trace writer reads its own.
pub fn thread_cpu_time() -> io::Result<Duration> {
    cpu_time::ThreadTime::try_now().map(|t| t.as_duration())
}

/// The calling thread's id (`gettid(2)`), for [`thread_waits`].
pub fn current_thread_id() -> u32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() as u32 }
}

/// Whether thread `tid` of this process is off the CPU by its own doing:
/// asleep, waiting on a disk, or stopped (`S`, `D`, `T`, `t` in field 3 of
/// `/proc/self/task/TID/stat`), rather than running or waiting for a CPU
/// (`R`). `None` when that cannot be read or the thread has exited. A thread that waits could use
/// no time it is given; one that is runnable could.
pub fn thread_waits(tid: u32) -> Option<bool> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    stat_state_waits(&stat)
}

/// [`thread_waits`] of the text of a stat file.
fn stat_state_waits(stat: &str) -> Option<bool> {
    match stat[stat.rfind(')')? + 1..].split_whitespace().next()? {
        // Exited, its entry not yet gone: as if it could not be read.
        "Z" | "X" | "x" => None,
        state => Some(matches!(state, "S" | "D" | "T" | "t" | "I")),
    }
}

#[cfg(test)]
mod stat_tests {
    use super::*;

    #[test]
    fn stat_cpu_fields_count_from_the_last_parenthesis() {
        let stat = "1234 (nginx: worker (x)) S 1 1234 1234 0 -1 4194368 100 0 0 0 250 50 7 3 20 0 1 0 100 0 0";
        let c = parse_stat_cpu(stat).unwrap();
        assert_eq!(c.own, Duration::from_millis(3000));
        assert_eq!(c.reaped_children, Duration::from_millis(100));
        assert_eq!(parse_stat_cpu("1 (x) S 1"), None);
        assert_eq!(parse_stat_cpu("no parenthesis"), None);
        assert_eq!(parse_stat_cpu("1 (x) S 1 2 3 4 5 6 7 8 9 10 x 1 1 1"), None);
        // This very process can be read.
        assert!(process_cpu(std::process::id()).is_ok());
    }

    #[test]
    fn a_sleeping_thread_waits_and_a_running_one_does_not() {
        assert_eq!(stat_state_waits("7 (a) b) S 1 2"), Some(true));
        assert_eq!(stat_state_waits("7 (x) D 1"), Some(true));
        assert_eq!(stat_state_waits("7 (x) R 1"), Some(false));
        assert_eq!(stat_state_waits("7 (x)"), None);
        // The calling thread runs as it reads its own state.
        assert_eq!(thread_waits(current_thread_id()), Some(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            tx.send(current_thread_id()).unwrap();
            let _ = done_rx.recv();
        });
        let tid = rx.recv().unwrap();
        // It blocks in recv soon after sending.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while thread_waits(tid) != Some(true) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(thread_waits(tid), Some(true));
        done_tx.send(()).unwrap();
        t.join().unwrap();
        // The join returns as the thread exits; its entry in /proc may stay
        // a moment longer (state Z or X, also None).
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while thread_waits(tid).is_some() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(thread_waits(tid), None, "a thread that ended");
        assert_eq!(stat_state_waits("7 (x) Z 1"), None);
    }
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

    #[test]
    fn a_pinned_thread_runs_where_it_was_put_and_its_time_counts() {
        let pid = std::process::id();
        let before = process_cpu_time(pid).unwrap();
        // Busy on CPU 0 until the process's CPU time has grown by 50 ms (or
        // 10 s pass: a loaded machine gives the thread less than its wall
        // time): the reading follows the work.
        let (cpu, grew) = std::thread::spawn(move || {
            pin_current_thread(0).unwrap();
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            let mut grew = false;
            while std::time::Instant::now() < deadline && !grew {
                for _ in 0..100_000 {
                    std::hint::black_box(0u64);
                }
                grew = process_cpu_time(pid).unwrap() >= before + Duration::from_millis(50);
            }
            // SAFETY: sched_getcpu has no arguments and no preconditions.
            (unsafe { libc::sched_getcpu() }, grew)
        })
        .join()
        .unwrap();
        assert_eq!(cpu, 0);
        assert!(grew, "the CPU time did not grow with 10 s of work");
        assert!(pin_current_thread(libc::CPU_SETSIZE as usize).is_err());
        // Raising a thread's nice value needs no privilege; it is the
        // thread's own (19 is the lowest priority there is).
        let nice = std::thread::spawn(|| {
            set_current_thread_nice(19).unwrap();
            // SAFETY: plain integer arguments; 0 is the calling thread.
            unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
        })
        .join()
        .unwrap();
        assert_eq!(nice, 19);
        assert!(process_cpu_time(u32::MAX).is_err());
    }

    #[test]
    fn a_confined_thread_and_its_children_keep_to_the_set() {
        let all = allowed_cpus().unwrap();
        assert!(!all.is_empty());
        let last = *all.last().unwrap();
        let (own, childs) = std::thread::spawn(move || {
            confine_current_thread(&[last]).unwrap();
            // A thread started from it inherits the set.
            let child = std::thread::spawn(|| allowed_cpus().unwrap())
                .join()
                .unwrap();
            (allowed_cpus().unwrap(), child)
        })
        .join()
        .unwrap();
        assert_eq!(own, vec![last]);
        assert_eq!(childs, vec![last]);
        // The caller's own set is untouched.
        assert_eq!(allowed_cpus().unwrap(), all);
        assert!(confine_current_thread(&[]).is_err());
        assert!(confine_current_thread(&[libc::CPU_SETSIZE as usize]).is_err());
    }
}
