//! Network namespaces for tests, benches and tools: [`Namespace`] makes one
//! of this process's own and removes it, [`enter`] moves a thread into one
//! (`setns(2)`) so that devices and sockets open there (a descriptor keeps
//! the namespace it was opened in, whichever thread uses it later);
//! [`crate::privileges::is_root`] says whether the process may. [`VethPair`]
//! joins two namespaces by a veth pair with addresses on both ends, as the
//! IPsec tests and benchmarks use them.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

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

/// Namespaces made by this process so far, for unique names.
static MADE: AtomicU32 = AtomicU32::new(0);

/// A network namespace of this process's own (`PREFIX-PID-N`, unique on the
/// host while the process lives) with loopback up, deleted with whatever is
/// in it (veth ends, TUN devices) when dropped. Made with `ip netns add`.
#[derive(Debug)]
pub struct Namespace {
    name: String,
}

impl Namespace {
    pub fn create(prefix: &str) -> io::Result<Namespace> {
        let n = MADE.fetch_add(1, Ordering::Relaxed);
        let name = format!("{prefix}-{}-{n}", std::process::id());
        run(Command::new("ip").args(["netns", "add", &name]))?;
        // From here on, Drop removes the namespace whatever fails.
        let ns = Namespace { name };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `/run/netns/NAME`, for [`enter`].
    pub fn path(&self) -> PathBuf {
        Path::new("/run/netns").join(&self.name)
    }

    /// `f`'s result, run on a thread of its own that has entered this
    /// namespace (only that thread moves); devices and sockets it opens
    /// keep the namespace whichever thread uses them later. A panic in `f`
    /// goes on in the caller.
    pub fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> io::Result<T> {
        let path = self.path();
        std::thread::scope(|s| {
            s.spawn(|| enter(&path).map(|()| f()))
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    }

    /// `ip -n NAME ARGS...` to completion: its standard output.
    pub fn ip(&self, args: &[&str]) -> io::Result<String> {
        run(Command::new("ip").args(["-n", &self.name]).args(args))
    }

    /// `argv` inside the namespace (`ip netns exec` execs it in place, so
    /// a child's pid is the program's own), standard input closed.
    pub fn command(&self, argv: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name])
            .args(argv)
            .stdin(Stdio::null());
        c
    }

    /// [`Namespace::command`] to completion: its standard output.
    pub fn exec(&self, argv: &[&str]) -> io::Result<String> {
        run(&mut self.command(argv))
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        if let Err(e) = run(Command::new("ip").args(["netns", "del", &self.name])) {
            eprintln!("kansoku: removing network namespace {}: {e}", self.name);
        }
    }
}

/// One end of a [`VethPair`]: the prefix of its namespace's name, the
/// device's name, and its addresses (IPv4 in a /24, IPv6 in a /64).
#[derive(Clone, Copy, Debug)]
pub struct VethEnd<'a> {
    pub prefix: &'a str,
    pub dev: &'a str,
    pub v4: &'a str,
    pub v6: &'a str,
}

/// Two network namespaces of this process's own joined by a veth pair (MTU
/// 1500), each end up with its addresses. Dropping it removes both
/// namespaces, and the pair with them.
#[derive(Debug)]
pub struct VethPair {
    pub a: Namespace,
    pub b: Namespace,
}

impl VethPair {
    /// Makes the namespaces and the pair, and returns once both of `b`'s
    /// addresses answer a ping from `a`: IPv6 starts on the pair a second or
    /// two after its carrier is up, and packets sent before that are lost.
    /// IPv6 addresses skip duplicate address detection.
    pub fn create(a: VethEnd<'_>, b: VethEnd<'_>) -> io::Result<VethPair> {
        let pair = VethPair {
            a: Namespace::create(a.prefix)?,
            b: Namespace::create(b.prefix)?,
        };
        pair.a.ip(&[
            "link",
            "add",
            a.dev,
            "type",
            "veth",
            "peer",
            "name",
            b.dev,
            "netns",
            pair.b.name(),
        ])?;
        for (ns, end) in [(&pair.a, a), (&pair.b, b)] {
            ns.ip(&["addr", "add", &format!("{}/24", end.v4), "dev", end.dev])?;
            ns.ip(&[
                "addr",
                "add",
                &format!("{}/64", end.v6),
                "dev",
                end.dev,
                "nodad",
            ])?;
            ns.ip(&["link", "set", end.dev, "up"])?;
        }
        for dst in [b.v4, b.v6] {
            wait_ping(&pair.a, dst, Duration::from_secs(10))?;
        }
        Ok(pair)
    }
}

/// Waits up to `within` for `dst` to answer a ping sent from `from`.
pub fn wait_ping(from: &Namespace, dst: &str, within: Duration) -> io::Result<()> {
    let start = Instant::now();
    while start.elapsed() < within {
        let answered = from
            .command(&["ping", "-c", "1", "-W", "1", dst])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if answered {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(io::Error::new(
        io::ErrorKind::TimedOut,
        format!(
            "{dst} does not answer ping from {} within {} s",
            from.name(),
            within.as_secs()
        ),
    ))
}

/// Runs `cmd` to completion: its standard output, or an error naming the
/// command and saying what it printed.
fn run(cmd: &mut Command) -> io::Result<String> {
    let out = cmd.stdin(Stdio::null()).output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "{cmd:?} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
