//! The programs a bench runs beside kansoku, and running them: finding
//! them (`which`), running a command to completion (`must`), and a running
//! peer ([`Peer`]) whose standard error is watched for the line saying it
//! listens, that is stopped with SIGINT as a user's Ctrl-C would, and whose
//! CPU time is taken when it ends. tcpdump is the first peer: its command
//! line, the pipe that puts the emulated disk behind it, and its closing
//! lines. Later peers (openssl, wrk, DPDK's testpmd) go here too.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use pipeline::{Error, Result};

use crate::harness::slow_disk::SlowDisk;

/// The first program named `name` on the PATH, or in /usr/sbin or /sbin
/// (where tcpdump and ip live, and which a user's PATH may lack).
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Runs a command to completion and returns its standard output; a
/// failure names the command and says what it printed on standard error.
pub fn run_quiet(cmd: &mut Command) -> std::result::Result<Vec<u8>, String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running {cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(out.stdout)
}

/// [`run_quiet`], its failure an input error.
pub fn must(cmd: &mut Command) -> Result<Vec<u8>> {
    run_quiet(cmd).map_err(Error::input)
}

/// The last line of `out` that is a JSON object (a command's `--json`
/// report), parsed; `what` names the command in the error.
pub fn parse_json(out: &[u8], what: &str) -> Result<serde_json::Value> {
    let text = String::from_utf8_lossy(out);
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or("");
    serde_json::from_str(line).map_err(|e| {
        Error::input(format!(
            "{what}: no JSON report ({e}) in its output: {}",
            text.trim()
        ))
    })
}

/// A count in a JSON report, 0 when absent.
pub fn json_u64(v: &serde_json::Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or(0)
}

/// What a peer says on standard error once it captures: kansoku's capture
/// worker and tcpdump, dumpcap, netsniff-ng (on its standard output, which
/// [`CapturePeer::command`] sends to standard error).
pub const LISTENING: [&str; 3] = ["listening on", "Capturing on", "Running!"];

/// A running peer: the child, a thread collecting its standard error, and
/// for a peer writing to a pipe the thread copying that into a file.
pub struct Peer {
    child: Child,
    stderr: JoinHandle<String>,
    copier: Option<JoinHandle<io::Result<u64>>>,
    ready: mpsc::Receiver<()>,
}

/// How a peer ended.
pub struct Ended {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    /// Everything it printed on standard error.
    pub stderr: String,
    /// The copier's bytes or failure, when there was one.
    pub copied: Option<io::Result<u64>>,
    /// CPU time (user + system, all threads) the peer used, in seconds;
    /// `None` where it could not be read.
    pub cpu_s: Option<f64>,
}

impl Peer {
    /// Starts `cmd` with standard error watched (and standard input
    /// closed); its standard output is as `cmd` set it.
    pub fn spawn(mut cmd: Command) -> Result<Peer> {
        let mut child = cmd
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Error::input(format!("starting {cmd:?}: {e}")))?;
        let (ready_tx, ready) = mpsc::channel();
        let err = child.stderr.take();
        let stderr = std::thread::spawn(move || {
            let mut all = String::new();
            let Some(err) = err else { return all };
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                if LISTENING.iter().any(|l| line.contains(l)) {
                    let _ = ready_tx.send(());
                }
                all.push_str(&line);
                all.push('\n');
            }
            all
        });
        Ok(Peer {
            child,
            stderr,
            copier: None,
            ready,
        })
    }

    /// Copies the peer's standard output (which must be piped) into a new
    /// file at `path` behind an emulated disk of `bytes_per_sec`: the peer
    /// then blocks in `write` exactly as it would on a slow disk, the
    /// pipe's 64 KiB playing the page cache.
    pub fn pipe_to_slow_disk(&mut self, path: &Path, bytes_per_sec: u64) {
        let out = self.child.stdout.take();
        let path = path.to_path_buf();
        self.copier = Some(std::thread::spawn(move || {
            let Some(out) = out else { return Ok(0) };
            let disk = SlowDisk::new(File::create(&path)?, bytes_per_sec);
            copy_all(out, disk)
        }));
    }

    /// Waits up to `timeout` for the peer to say it listens; if it does not,
    /// it is killed and the error quotes what it said.
    pub fn wait_listening(self, timeout: Duration, name: &str) -> Result<Peer> {
        if self.ready.recv_timeout(timeout).is_ok() {
            return Ok(self);
        }
        let text = self.kill();
        Err(Error::input(format!(
            "{name}: the capture did not start listening: {}",
            text.trim()
        )))
    }

    /// The peer's process id (`ip netns exec` and taskset exec in place:
    /// the program's own).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGINT, as Ctrl-C: the peer drains what it holds, closes its file
    /// and reports. kill(1) rather than kill(2): this crate has no `unsafe`.
    /// The child has not been waited for, so its pid is not reused yet.
    pub fn interrupt(&self) -> Result<()> {
        must(Command::new("kill").args(["-INT", &self.child.id().to_string()])).map(|_| ())
    }

    /// Kills the peer; returns what it said on standard error.
    pub fn kill(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.stderr.join().unwrap_or_default()
    }

    /// Waits for the peer to end (after [`Peer::interrupt`]). The peer must
    /// be the only child ended meanwhile: its CPU time is the growth of the
    /// children's total (`ip netns exec` execs the program in place, so the
    /// child is the peer itself).
    pub fn wait(self) -> Result<Ended> {
        let before = capture::usage::children_cpu_time().ok();
        let out = self
            .child
            .wait_with_output()
            .map_err(|e| Error::input(format!("waiting for a peer: {e}")))?;
        let cpu_s = match (before, capture::usage::children_cpu_time().ok()) {
            (Some(b), Some(a)) => Some(a.saturating_sub(b).as_secs_f64()),
            _ => None,
        };
        let copied = self.copier.map(|h| {
            h.join()
                .unwrap_or_else(|_| Err(io::Error::other("the copy thread panicked")))
        });
        Ok(Ended {
            status: out.status,
            stdout: out.stdout,
            stderr: self.stderr.join().unwrap_or_default(),
            copied,
            cpu_s,
        })
    }
}

/// Copies `from` to `to` until the end, 64 KiB at a time (a pipe's
/// capacity, so each write is what one read of the pipe gave).
fn copy_all(mut from: ChildStdout, mut to: impl Write) -> io::Result<u64> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        to.write_all(&buf[..n])?;
        total += n as u64;
    }
}

/// The capture programs `kansoku bench capture` runs beside kansoku, each
/// as Debian packages it (tcpdump 4.99, dumpcap 4.0 from wireshark-common,
/// netsniff-ng 0.6.8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapturePeer {
    Tcpdump,
    Dumpcap,
    Netsniff,
}

/// How a capture program is run: into a pipe (behind the emulated disk)
/// or into its own file, with a ring of `ring_mib`, and a tcpdump filter
/// expression if one is given.
#[derive(Clone, Copy, Debug)]
pub struct PeerCapture<'a> {
    pub to_pipe: bool,
    pub ring_mib: usize,
    pub expression: Option<&'a str>,
}

impl CapturePeer {
    pub fn name(self) -> &'static str {
        match self {
            CapturePeer::Tcpdump => "tcpdump",
            CapturePeer::Dumpcap => "dumpcap",
            CapturePeer::Netsniff => "netsniff-ng",
        }
    }

    /// Where it is installed, if it is.
    pub fn program(self) -> Option<PathBuf> {
        which(self.name())
    }

    /// Whether it can write its capture to standard output, for the
    /// emulated disk (`--disk-mbps`). netsniff-ng prints its messages there
    /// too, so it cannot.
    pub fn can_pipe(self) -> bool {
        self != CapturePeer::Netsniff
    }

    /// The command capturing on `interface` into `file` (or, `to_pipe`, to
    /// standard output) with a ring of `ring_mib` MiB, inside `ns`, pinned
    /// to `cpu` when given.
    pub fn command(
        self,
        ns: &crate::harness::netns::Netns,
        cpu: Option<usize>,
        interface: &str,
        file: &Path,
        how: &PeerCapture<'_>,
    ) -> Result<Command> {
        let PeerCapture {
            to_pipe,
            ring_mib,
            expression,
        } = *how;
        let program = self
            .program()
            .ok_or_else(|| Error::input(format!("{} is not installed", self.name())))?;
        let out: &std::ffi::OsStr = if to_pipe {
            "-".as_ref()
        } else {
            file.as_os_str()
        };
        let cmd = match self {
            CapturePeer::Tcpdump => {
                let mut cmd = ns.command_on(cpu, program);
                tcpdump_args(&mut cmd, interface, file, to_pipe, ring_mib);
                cmd.args(expression);
                return Ok(cmd);
            }
            CapturePeer::Dumpcap => {
                let mut cmd = ns.command_on(cpu, program);
                cmd.args(["-i", interface, "-q", "-s", "262144", "-B"])
                    .arg(ring_mib.to_string())
                    .arg("-w")
                    .arg(out);
                if let Some(e) = expression {
                    cmd.args(["-f", e]);
                }
                cmd
            }
            CapturePeer::Netsniff => {
                // Through sh, which execs it (the pid stays netsniff-ng's,
                // for SIGINT and its CPU time) with its standard output,
                // where it says it runs and its counts, on standard error.
                let mut cmd = ns.command_on(cpu, "sh");
                cmd.args(["-c", "exec \"$0\" \"$@\" >&2"])
                    .arg(program)
                    .args(["--in", interface, "--silent", "--ring-size"])
                    .arg(format!("{ring_mib}MiB"))
                    .arg("--out")
                    .arg(out);
                if let Some(e) = expression {
                    cmd.args(["--filter", e]);
                }
                cmd
            }
        };
        let mut cmd = cmd;
        if to_pipe {
            cmd.stdout(Stdio::piped());
        } else {
            cmd.stdout(Stdio::null());
        }
        Ok(cmd)
    }

    /// From its closing lines: the packets it says it wrote (where it says
    /// so) and the packets the kernel dropped. `None` when the lines are not
    /// there.
    pub fn counts(self, stderr: &str) -> Option<(Option<u64>, u64)> {
        match self {
            CapturePeer::Tcpdump => tcpdump_counts(stderr).map(|(w, d)| (Some(w), d)),
            CapturePeer::Dumpcap => dumpcap_counts(stderr),
            CapturePeer::Netsniff => netsniff_counts(stderr),
        }
    }
}

/// dumpcap's closing lines: `Packets captured: N` and `Packets
/// received/dropped on interface 'X': R/D (...)`.
pub fn dumpcap_counts(stderr: &str) -> Option<(Option<u64>, u64)> {
    let captured = stderr.lines().find_map(|l| {
        l.trim()
            .strip_prefix("Packets captured:")
            .and_then(|n| n.trim().parse::<u64>().ok())
    })?;
    let dropped = stderr
        .lines()
        .find_map(|l| {
            let rest = l
                .trim()
                .strip_prefix("Packets received/dropped on interface")?;
            let counts = rest.rsplit_once("': ")?.1.split_whitespace().next()?;
            counts.split_once('/')?.1.parse::<u64>().ok()
        })
        .unwrap_or(0);
    Some((Some(captured), dropped))
}

/// netsniff-ng's closing lines: `N  packets incoming (M unread on exit)`,
/// `N  packets passed filter`, `N  packets failed filter (out of space)`:
/// the last are its drops (the ring was full).
pub fn netsniff_counts(stderr: &str) -> Option<(Option<u64>, u64)> {
    let count = |what: &str| {
        stderr.lines().find_map(|l| {
            let (n, rest) = l.trim().split_once(char::is_whitespace)?;
            rest.trim()
                .starts_with(what)
                .then(|| n.parse::<u64>().ok())
                .flatten()
        })
    };
    count("packets passed filter")?;
    Some((None, count("packets failed filter").unwrap_or(0)))
}

/// tcpdump's arguments for a capture on `interface` with a ring of
/// `ring_mib` MiB, writing `file` itself, or with `to_pipe` its standard
/// output (for [`Peer::pipe_to_slow_disk`]). `-Z root`: Debian's tcpdump
/// would otherwise switch to its own user.
pub fn tcpdump_args(
    cmd: &mut Command,
    interface: &str,
    file: &Path,
    to_pipe: bool,
    ring_mib: usize,
) {
    cmd.args(["-i", interface, "-n", "-s", "262144", "-Z", "root", "-w"]);
    if to_pipe {
        cmd.arg("-").stdout(Stdio::piped());
    } else {
        cmd.arg(file).stdout(Stdio::null());
    }
    cmd.arg("-B").arg((ring_mib * 1024).to_string());
}

/// tcpdump's closing lines: `N packets captured`, `N packets received by
/// filter`, `N packets dropped by kernel`. Captured packets are the ones
/// handed to pcap_dump, i.e. written. Returns (written, kernel drops).
pub fn tcpdump_counts(stderr: &str) -> Option<(u64, u64)> {
    let count = |suffix: &str| {
        stderr.lines().find_map(|l| {
            l.trim()
                .strip_suffix(suffix)
                .and_then(|n| n.trim().parse::<u64>().ok())
        })
    };
    Some((
        count("packets captured")?,
        count("packets dropped by kernel").unwrap_or(0),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dumpcap_and_netsniff_closing_lines_are_read() {
        let d = "Capturing on 'ptb'\nFile: /tmp/dc.pcap\nPackets captured: 4990\n\
                 Packets received/dropped on interface 'ptb': 5000/10 (pcap:10/dumpcap:0/flushed:0/ps_ifdrop:0) (99.8%)\n";
        assert_eq!(dumpcap_counts(d), Some((Some(4990), 10)));
        assert_eq!(dumpcap_counts("dumpcap: error"), None);
        let n = "Running! Hang up with ^C!\n\n        5000  packets incoming (0 unread on exit)\n\
                 4900  packets passed filter\n         100  packets failed filter (out of space)\n\
                 2.0000% packet droprate\n";
        assert_eq!(netsniff_counts(n), Some((None, 100)));
        assert_eq!(netsniff_counts("Cannot open interface"), None);
    }

    #[test]
    fn tcpdump_closing_lines_are_read() {
        let s = "listening on x\n1234 packets captured\n1300 packets received by filter\n66 packets dropped by kernel\n";
        assert_eq!(tcpdump_counts(s), Some((1234, 66)));
        assert_eq!(tcpdump_counts("tcpdump: error"), None);
    }

    #[test]
    fn which_finds_sh_and_not_a_made_up_name() {
        assert!(which("sh").is_some_and(|p| p.is_file()));
        assert_eq!(which("kansoku-no-such-program"), None);
    }

    #[test]
    fn must_says_what_failed() {
        assert_eq!(must(Command::new("echo").arg("hi")).unwrap(), b"hi\n");
        let e = must(Command::new("sh").args(["-c", "echo oops >&2; exit 3"])).unwrap_err();
        assert!(e.message.contains("oops"), "{e}");
        assert!(must(&mut Command::new("kansoku-no-such-program")).is_err());
    }

    #[test]
    fn the_last_json_line_is_the_report() {
        let v = parse_json(b"noise\n{\"written\": 5}\n", "capture").unwrap();
        assert_eq!(json_u64(&v, "written"), 5);
        assert_eq!(json_u64(&v, "missing"), 0);
        let e = parse_json(b"no json", "generate").unwrap_err();
        assert!(e.message.starts_with("generate: no JSON report"), "{e}");
    }

    #[test]
    fn a_peer_is_ready_when_it_listens_and_stops_on_sigint() {
        // A stand-in peer: says it listens, writes until SIGINT, then
        // reports on its way out.
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            "trap 'echo 3 packets captured >&2; exit 0' INT; echo listening on test >&2; \
             while :; do echo x; sleep 0.05; done",
        ])
        .stdout(Stdio::piped());
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("out");
        let mut peer = Peer::spawn(cmd).unwrap();
        peer.pipe_to_slow_disk(&file, 1_000_000);
        let peer = peer.wait_listening(Duration::from_secs(10), "sh").unwrap();
        std::thread::sleep(Duration::from_millis(200));
        peer.interrupt().unwrap();
        let end = peer.wait().unwrap();
        assert!(end.status.success(), "{}", end.stderr);
        assert_eq!(tcpdump_counts(&end.stderr), Some((3, 0)));
        let copied = end.copied.unwrap().unwrap();
        assert!(copied >= 2, "{copied}");
        assert_eq!(std::fs::read(&file).unwrap().len() as u64, copied);
        assert!(end.cpu_s.is_some());
    }

    #[test]
    fn a_peer_that_never_listens_is_killed_and_quoted() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo no such device >&2; exec sleep 30"]);
        let e = Peer::spawn(cmd)
            .unwrap()
            .wait_listening(Duration::from_millis(300), "tcpdump")
            .err()
            .unwrap();
        assert!(
            e.message
                .contains("did not start listening: no such device"),
            "{e}"
        );
    }
}
