//! `kansoku bench capture`: the capture-loss experiment of papers 000 (§5,
//! capture rate vs load for libpcap with per-packet and block compression)
//! and 003 (drops vs offered load), self-contained.
//!
//! The bench makes a network namespace of its own (`ip netns add kbc-PID`)
//! with a veth pair in it, and for every configuration and offered load
//! runs this very binary twice inside it: `kansoku capture` on one end
//! (or tcpdump), then `kansoku generate` on the other end sending
//! `--packets` frames at the load. When the generator is done the capture
//! is stopped with SIGINT, which drains the ring and the writer's queue, and
//! the capture rate is what it wrote over what was sent. The namespace (and
//! with it the veth pair) and the capture files are removed afterwards, also
//! when the bench is stopped with Ctrl-C.
//!
//! `--disk-mbps` emulates a disk of that throughput behind every writer
//! (`trace::write::DiskThrottle`: writes are serviced one after another at
//! that rate, no cache), so that a fast machine shows the papers' disk-bound
//! regime. For tcpdump the bench reads `tcpdump -w -` from a pipe through
//! the same throttle into the file: tcpdump then blocks in `write` exactly
//! as it would on a slow disk (the pipe's 64 KiB play the page cache).
//!
//! A point is loss-free when everything sent was written; the maximum
//! loss-free load of a configuration is the highest load at which it and
//! every lower load lost nothing. With a finite burst of `--packets`
//! frames, buffers (the ring, the writer's queue) hide a slow disk for a
//! while: loss starts when the backlog outgrows them, as in the papers. The
//! queue is sized in bytes (`--queue-mib`, by default as large as the ring),
//! so it hides the same amount of traffic at every load.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use plotters::prelude::*;
use serde::Serialize;
use trace::write::DiskThrottle;

use crate::cli::{BenchCaptureArgs, PayloadArg};
use crate::cmd_plot::load_font;
use crate::error::{display_path, CliError, CliResult};
use crate::signals;

/// How long a capture may take to bind its ring and say it listens.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(15);

/// After the generator is done: time for the last ring block to retire
/// (kansoku's ring hands a block over after 10 ms at the latest) and for
/// frames still in the veth to arrive.
const SETTLE: Duration = Duration::from_millis(300);

/// The same for tcpdump: libpcap retires a TPACKET_V3 block only after the
/// read timeout, which tcpdump sets to 1000 ms; stopped before that, it
/// would neither write nor count the last block's packets.
const SETTLE_TCPDUMP: Duration = Duration::from_millis(1500);

/// One configuration compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Config {
    name: &'static str,
    description: &'static str,
    /// `--compress` of `kansoku capture`; `None` for tcpdump.
    compress: Option<&'static str>,
    per_packet: bool,
}

/// The configurations, in the order they are run and shown. The first,
/// libpcap's pattern, is the baseline the others are compared with.
const CONFIGS: [Config; 7] = [
    Config {
        name: "raw-pkt",
        description: "uncompressed, one write per packet (as pcap_dump)",
        compress: Some("none"),
        per_packet: true,
    },
    Config {
        name: "raw",
        description: "uncompressed, 32 KiB blocks",
        compress: Some("none"),
        per_packet: false,
    },
    Config {
        name: "lz4-pkt",
        description: "lz4, each packet compressed and written alone",
        compress: Some("lz4"),
        per_packet: true,
    },
    Config {
        name: "lz4",
        description: "lz4, 32 KiB blocks",
        compress: Some("lz4"),
        per_packet: false,
    },
    Config {
        name: "gzip",
        description: "gzip level 1, 32 KiB blocks",
        compress: Some("gzip"),
        per_packet: false,
    },
    Config {
        name: "zstd",
        description: "zstd level 1, 32 KiB blocks",
        compress: Some("zstd"),
        per_packet: false,
    },
    Config {
        name: "tcpdump",
        description: "tcpdump -w (libpcap), when installed",
        compress: None,
        per_packet: true,
    },
];

/// One configuration at one offered load.
#[derive(Clone, Debug, Serialize)]
pub struct Point {
    /// Offered load asked of the generator, packets per second.
    pub load_pps: f64,
    /// Load the generator achieved.
    pub sent_pps: f64,
    pub sent: u64,
    /// Packets in the file.
    pub written: u64,
    /// Packets the kernel dropped (ring full).
    pub kernel_drops: u64,
    /// Packets the capture dropped itself (writer queue full); tcpdump has none.
    pub dropped_writer: u64,
    /// Captured frames beyond those sent (stray traffic on the veth).
    pub extra: u64,
    /// Saved over sent, in [0, 1].
    pub capture_rate: f64,
    /// Bytes of the file.
    pub file_bytes: u64,
    /// CPU time (user + system, all threads) the capture process used from
    /// its start to its exit, in seconds (getrusage of the ended child);
    /// `None` where it could not be read.
    pub cpu_s: Option<f64>,
    /// That CPU time per packet written, in microseconds.
    pub cpu_us_per_packet: Option<f64>,
}

impl Point {
    fn loss_free(&self) -> bool {
        self.written >= self.sent && self.kernel_drops == 0 && self.dropped_writer == 0
    }
}

#[derive(Debug, Serialize)]
struct ConfigResult {
    config: &'static str,
    description: &'static str,
    points: Vec<Point>,
    /// Highest load at which this and every lower load lost nothing.
    max_loss_free_pps: Option<f64>,
}

#[derive(Debug, Serialize)]
struct Report<'a> {
    size: &'a str,
    payload: &'static str,
    packets_per_point: u64,
    disk_mbps: Option<f64>,
    ring_mib: usize,
    /// kansoku's writer queue, MiB of packet data.
    queue_mib: usize,
    /// The configuration the others are compared with.
    baseline: &'static str,
    configs: Vec<ConfigResult>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    notes: Vec<String>,
}

pub fn run(args: &BenchCaptureArgs) -> CliResult<i32> {
    let configs = select_configs(&args.configs)?;
    let mut loads = args.loads.clone();
    if loads.is_empty() || loads.iter().any(|l| !(*l > 0.0 && l.is_finite())) {
        return Err(CliError::input(
            "--loads must be positive packet rates (expected e.g. 10000,20000)",
        ));
    }
    loads.sort_by(f64::total_cmp);
    loads.dedup();
    if args.packets == 0 {
        return Err(CliError::input("--packets must be at least 1"));
    }
    if let Some(m) = args.disk_mbps {
        if !(m > 0.0 && m.is_finite()) {
            return Err(CliError::input("--disk-mbps must be a positive number"));
        }
    }
    let (size, payload) = frame_args(&args.size, args.payload)?;
    if let Some(plot) = &args.plot {
        plot_kind(plot)?;
    }
    let exe = std::env::current_exe().map_err(|e| CliError::input(format!("own binary: {e}")))?;
    let mut notes = Vec::new();
    let tcpdump = which("tcpdump");
    let configs: Vec<Config> = configs
        .into_iter()
        .filter(|c| {
            if c.compress.is_none() && tcpdump.is_none() {
                notes.push("tcpdump is not installed: its row is left out".to_string());
                return false;
            }
            true
        })
        .collect();

    let work = WorkDir::create(args.dir.as_deref())?;
    let ns = Netns::create()?;
    let mut results: Vec<ConfigResult> = configs
        .iter()
        .map(|c| ConfigResult {
            config: c.name,
            description: c.description,
            points: Vec::new(),
            max_loss_free_pps: None,
        })
        .collect();
    let env = PointEnv {
        exe: &exe,
        ns: &ns,
        dir: &work.path,
        args,
        size: &size,
        payload,
        tcpdump: tcpdump.as_deref(),
    };
    'sweep: for (c, result) in configs.iter().zip(&mut results) {
        for &load in &loads {
            if signals::stop_requested() {
                break 'sweep;
            }
            let p = run_point(&env, c, load)?;
            eprintln!(
                "kansoku: {:<8} {:>9.0} pps offered, {:>9.0} sent: {} of {} written ({:.4}), {} kernel drops, {} writer drops",
                c.name, load, p.sent_pps, p.written, p.sent, p.capture_rate, p.kernel_drops, p.dropped_writer
            );
            result.points.push(p);
        }
        result.max_loss_free_pps = max_loss_free(&result.points);
    }
    drop(ns);
    drop(work);
    if signals::stop_requested() {
        notes.push("stopped early (interrupted): the sweep is incomplete".to_string());
    }
    let report = Report {
        size: &args.size,
        payload: if args.size == "worm" {
            "worm"
        } else {
            match args.payload {
                PayloadArg::Fixed => "fixed",
                PayloadArg::Random => "random",
                PayloadArg::Worm => "worm",
            }
        },
        packets_per_point: args.packets,
        disk_mbps: args.disk_mbps,
        ring_mib: args.buffer_mib,
        queue_mib: args.queue_mib,
        baseline: CONFIGS[0].name,
        configs: results,
        notes,
    };
    if let Some(plot) = &args.plot {
        draw_plot(plot, &report)?;
    }
    let mut o = io::stdout().lock();
    if args.json {
        serde_json::to_writer(&mut o, &report).map_err(io::Error::from)?;
        writeln!(o)?;
    } else {
        write_table(&mut o, &report, &loads)?;
    }
    Ok(0)
}

/// Everything a point needs besides the configuration and the load.
struct PointEnv<'a> {
    exe: &'a Path,
    ns: &'a Netns,
    dir: &'a Path,
    args: &'a BenchCaptureArgs,
    size: &'a Option<String>,
    payload: &'static str,
    tcpdump: Option<&'a Path>,
}

fn select_configs(names: &[String]) -> CliResult<Vec<Config>> {
    if names.is_empty() {
        return Ok(CONFIGS.to_vec());
    }
    let mut out = Vec::new();
    for n in names {
        let Some(c) = CONFIGS.iter().find(|c| c.name == n.as_str()) else {
            let known: Vec<&str> = CONFIGS.iter().map(|c| c.name).collect();
            return Err(CliError::input(format!(
                "--configs: unknown configuration {n:?} (expected {})",
                known.join(", ")
            )));
        };
        if !out.contains(c) {
            out.push(*c);
        }
    }
    Ok(out)
}

/// `--size` and `--payload` for the generator: `worm` is the paper's
/// 418-byte UDP packet, which sets its own size.
fn frame_args(size: &str, payload: PayloadArg) -> CliResult<(Option<String>, &'static str)> {
    if size == "worm" || payload == PayloadArg::Worm {
        return Ok((None, "worm"));
    }
    match size.parse::<u32>() {
        Ok(n) if (64..=1518).contains(&n) => {}
        _ => {
            return Err(CliError::input(format!(
                "--size {size:?}: expected a frame size 64..=1518 (FCS included) or worm"
            )))
        }
    }
    let p = match payload {
        PayloadArg::Fixed => "fixed",
        PayloadArg::Random => "random",
        PayloadArg::Worm => "worm",
    };
    Ok((Some(size.to_string()), p))
}

/// The highest load such that it and every lower load were loss-free.
fn max_loss_free(points: &[Point]) -> Option<f64> {
    let mut sorted: Vec<&Point> = points.iter().collect();
    sorted.sort_by(|a, b| a.load_pps.total_cmp(&b.load_pps));
    sorted
        .iter()
        .take_while(|p| p.loss_free())
        .last()
        .map(|p| p.load_pps)
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Runs a command to completion; a failure names the command and its stderr.
fn must(cmd: &mut Command) -> CliResult<Vec<u8>> {
    run_quiet(cmd).map_err(CliError::input)
}

fn run_quiet(cmd: &mut Command) -> Result<Vec<u8>, String> {
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

/// The bench's network namespace and veth pair, removed when dropped.
struct Netns {
    name: String,
    /// The generator sends here.
    tx: String,
    /// The capture listens here.
    rx: String,
}

impl Netns {
    fn create() -> CliResult<Netns> {
        let pid = std::process::id();
        // Interface names hold 15 bytes; a pid has at most 7 digits.
        let ns = Netns {
            name: format!("kbc-{pid}"),
            tx: format!("kbc{pid}a"),
            rx: format!("kbc{pid}b"),
        };
        run_quiet(Command::new("ip").args(["netns", "add", &ns.name])).map_err(|e| {
            CliError::input(format!(
                "{e} (bench capture needs root: CAP_SYS_ADMIN and CAP_NET_ADMIN)"
            ))
        })?;
        // From here on, Drop removes the namespace whatever fails.
        let n = &ns.name;
        // No IPv6 (router solicitations, DAD): only the generator's frames.
        ns.exec(&[
            "sysctl",
            "-qw",
            "net.ipv6.conf.all.disable_ipv6=1",
            "net.ipv6.conf.default.disable_ipv6=1",
        ])?;
        must(Command::new("ip").args(["-n", n, "link", "set", "lo", "up"]))?;
        must(Command::new("ip").args([
            "-n", n, "link", "add", &ns.tx, "type", "veth", "peer", "name", &ns.rx,
        ]))?;
        must(Command::new("ip").args(["-n", n, "link", "set", &ns.tx, "up"]))?;
        must(Command::new("ip").args(["-n", n, "link", "set", &ns.rx, "up"]))?;
        Ok(ns)
    }

    fn exec(&self, argv: &[&str]) -> CliResult<Vec<u8>> {
        must(self.command(argv[0]).args(&argv[1..]))
    }

    /// A command run inside the namespace (`ip netns exec` execs it in
    /// place, so the child's pid is the program's own).
    fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name]).arg(program);
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting the namespace deletes the veth pair in it.
        if let Err(e) = run_quiet(Command::new("ip").args(["netns", "del", &self.name])) {
            eprintln!("kansoku: removing network namespace {}: {e}", self.name);
        }
    }
}

/// The directory the capture files go to, removed when dropped.
struct WorkDir {
    path: PathBuf,
}

impl WorkDir {
    fn create(parent: Option<&Path>) -> CliResult<WorkDir> {
        let parent = parent.map_or_else(std::env::temp_dir, Path::to_path_buf);
        let path = parent.join(format!("kansoku-bench-capture-{}", std::process::id()));
        std::fs::create_dir_all(&path).map_err(|e| CliError::file(&path, e))?;
        Ok(WorkDir { path })
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A running capture: the child, a thread collecting its stderr, and for
/// tcpdump the thread copying its output to the file.
struct RunningCapture {
    child: Child,
    stderr: std::thread::JoinHandle<String>,
    copier: Option<std::thread::JoinHandle<io::Result<u64>>>,
}

impl RunningCapture {
    /// SIGINT, as Ctrl-C: the capture drains its ring and queue, closes
    /// the file and reports. kill(1) rather than kill(2): this crate has
    /// no `unsafe`. The child has not been waited for, so its pid is not
    /// reused yet.
    fn interrupt(&self) -> CliResult<()> {
        must(Command::new("kill").args(["-INT", &self.child.id().to_string()])).map(|_| ())
    }

    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_capture(env: &PointEnv, c: &Config, file: &Path) -> CliResult<RunningCapture> {
    let a = env.args;
    let mut cmd;
    match (c.compress, env.tcpdump) {
        (Some(codec), _) => {
            cmd = env.ns.command(env.exe);
            cmd.args(["capture", "-i", &env.ns.rx, "--json", "--no-index"])
                .arg("-B")
                .arg(a.buffer_mib.to_string())
                .arg("--queue-mib")
                .arg(a.queue_mib.to_string())
                .args(["--compress", codec, "-w"])
                .arg(file)
                .stdout(Stdio::piped());
            if c.per_packet {
                cmd.arg("--flush-each-packet");
            }
            if let Some(m) = a.disk_mbps {
                cmd.arg("--disk-mbps").arg(m.to_string());
            }
        }
        (None, Some(tcpdump)) => {
            cmd = env.ns.command(tcpdump);
            // -Z root: Debian's tcpdump would otherwise switch to its own
            // user. With an emulated disk, -w - so that the bench can put
            // the disk behind it; without one tcpdump writes its file itself,
            // as kansoku does, so that their CPU times compare.
            cmd.args(["-i", &env.ns.rx, "-n", "-s", "262144", "-Z", "root", "-w"]);
            if a.disk_mbps.is_some() {
                cmd.arg("-").stdout(Stdio::piped());
            } else {
                cmd.arg(file).stdout(Stdio::null());
            }
            cmd.arg("-B").arg((a.buffer_mib * 1024).to_string());
        }
        (None, None) => return Err(CliError::input("tcpdump is not installed")),
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| CliError::input(format!("starting {cmd:?}: {e}")))?;
    let (ready_tx, ready_rx) = mpsc::channel();
    let err = child.stderr.take();
    let stderr = std::thread::spawn(move || {
        let mut all = String::new();
        let Some(err) = err else { return all };
        for line in BufReader::new(err).lines() {
            let Ok(line) = line else { break };
            if line.contains("listening on") {
                let _ = ready_tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let copier = if c.compress.is_none() && a.disk_mbps.is_some() {
        let out = child.stdout.take();
        let file = file.to_path_buf();
        let disk = a
            .disk_mbps
            .map(|m| DiskThrottle::new((m * 1e6).max(1.0) as u64));
        Some(std::thread::spawn(move || {
            copy_through_disk(out, &file, disk)
        }))
    } else {
        None
    };
    let running = RunningCapture {
        child,
        stderr,
        copier,
    };
    if ready_rx.recv_timeout(LISTEN_TIMEOUT).is_err() {
        let name = c.name;
        let RunningCapture { stderr, .. } = {
            let mut r = running;
            let _ = r.child.kill();
            let _ = r.child.wait();
            r
        };
        let text = stderr.join().unwrap_or_default();
        return Err(CliError::input(format!(
            "{name}: the capture did not start listening: {}",
            text.trim()
        )));
    }
    Ok(running)
}

/// tcpdump's output, through the emulated disk, into the file.
fn copy_through_disk(
    out: Option<std::process::ChildStdout>,
    file: &Path,
    mut disk: Option<DiskThrottle>,
) -> io::Result<u64> {
    let Some(mut out) = out else { return Ok(0) };
    let mut f = std::fs::File::create(file)?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = match out.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        f.write_all(&buf[..n])?;
        if let Some(d) = disk.as_mut() {
            d.wrote(n);
        }
        total += n as u64;
    }
}

fn run_point(env: &PointEnv, c: &Config, load: f64) -> CliResult<Point> {
    let file = env.dir.join(format!("{}-{load}.pcap", c.name));
    let capture = start_capture(env, c, &file)?;
    let mut gen = env.ns.command(env.exe);
    gen.args(["generate", "-i", &env.ns.tx, "--proto", "udp", "--json"])
        .arg("-c")
        .arg(env.args.packets.to_string())
        .arg("--pps")
        .arg(load.to_string())
        .args(["--payload", env.payload]);
    if let Some(size) = env.size {
        gen.args(["--size", size]);
    }
    let sent = match must(&mut gen).and_then(|out| parse_json(&out, "generate")) {
        Ok(v) => v,
        Err(e) => {
            capture.kill();
            return Err(e);
        }
    };
    std::thread::sleep(if c.compress.is_some() {
        SETTLE
    } else {
        SETTLE_TCPDUMP
    });
    if let Err(e) = capture.interrupt() {
        capture.kill();
        return Err(e);
    }
    let RunningCapture {
        child,
        stderr,
        copier,
    } = capture;
    // The capture is the only child waited for here: the difference is its
    // own CPU time (all threads; `ip netns exec` execs it in place).
    let cpu_before = capture::usage::children_cpu_time().ok();
    let out = child
        .wait_with_output()
        .map_err(|e| CliError::input(format!("{}: waiting for the capture: {e}", c.name)))?;
    let cpu_s = match (cpu_before, capture::usage::children_cpu_time().ok()) {
        (Some(b), Some(a)) => Some(a.saturating_sub(b).as_secs_f64()),
        _ => None,
    };
    let err_text = stderr.join().unwrap_or_default();
    let copied = copier.map(|h| h.join());
    let (written, kernel_drops, dropped_writer) = if c.compress.is_some() {
        // Exit 1 means "drops happened", which is what is measured here.
        if !matches!(out.status.code(), Some(0 | 1)) {
            return Err(CliError::input(format!(
                "{}: capture failed ({}): {}",
                c.name,
                out.status,
                err_text.trim()
            )));
        }
        let s = parse_json(&out.stdout, "capture")?;
        (
            json_u64(&s, "written"),
            json_u64(&s, "kernel_drops"),
            json_u64(&s, "dropped_kansoku"),
        )
    } else {
        match copied {
            // No emulated disk: tcpdump wrote the file itself.
            None | Some(Ok(Ok(_))) => {}
            Some(Ok(Err(e))) => {
                return Err(CliError::input(format!(
                    "tcpdump: writing {}: {e}",
                    display_path(&file)
                )))
            }
            _ => return Err(CliError::input("tcpdump: the copy thread failed")),
        }
        tcpdump_counts(&err_text).ok_or_else(|| {
            CliError::input(format!(
                "tcpdump: no packet counts in its output: {}",
                err_text.trim()
            ))
        })?
    };
    let file_bytes = std::fs::metadata(&file).map_or(0, |m| m.len());
    let _ = std::fs::remove_file(&file);
    let n_sent = json_u64(&sent, "packets");
    Ok(Point {
        load_pps: load,
        sent_pps: sent["pps"].as_f64().unwrap_or(0.0),
        sent: n_sent,
        written,
        kernel_drops,
        dropped_writer,
        extra: written.saturating_sub(n_sent),
        capture_rate: if n_sent == 0 {
            0.0
        } else {
            written.min(n_sent) as f64 / n_sent as f64
        },
        file_bytes,
        cpu_s,
        cpu_us_per_packet: cpu_s
            .filter(|_| written > 0)
            .map(|c| c * 1e6 / written as f64),
    })
}

fn parse_json(out: &[u8], what: &str) -> CliResult<serde_json::Value> {
    let text = String::from_utf8_lossy(out);
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or("");
    serde_json::from_str(line).map_err(|e| {
        CliError::input(format!(
            "{what}: no JSON report ({e}) in its output: {}",
            text.trim()
        ))
    })
}

fn json_u64(v: &serde_json::Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or(0)
}

/// tcpdump's closing lines: `N packets captured`, `N packets received by
/// filter`, `N packets dropped by kernel`. Captured packets are the ones
/// handed to pcap_dump, i.e. written. Returns (written, kernel drops, 0).
fn tcpdump_counts(stderr: &str) -> Option<(u64, u64, u64)> {
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
        0,
    ))
}

fn write_table(o: &mut impl Write, r: &Report, loads: &[f64]) -> io::Result<()> {
    writeln!(
        o,
        "capture rate (written/sent), {} frames, {} payload, {} packets per point, ring {} MiB, queue {} MiB, {}",
        r.size,
        r.payload,
        r.packets_per_point,
        r.ring_mib,
        r.queue_mib,
        match r.disk_mbps {
            Some(m) => format!("emulated disk {m} MB/s"),
            None => "no disk limit".to_string(),
        }
    )?;
    write!(o, "{:<9}", "pps")?;
    for l in loads {
        write!(o, " {l:>8.0}")?;
    }
    writeln!(o, "  {:>13}  {:>8}", "max loss-free", "vs base")?;
    let base = r.configs.iter().find(|c| c.config == r.baseline);
    for c in &r.configs {
        write!(o, "{:<9}", c.config)?;
        for l in loads {
            match c.points.iter().find(|p| p.load_pps == *l) {
                Some(p) => write!(o, " {:>8.4}", p.capture_rate)?,
                None => write!(o, " {:>8}", "-")?,
            }
        }
        let lf = c
            .max_loss_free_pps
            .map_or_else(|| "none".to_string(), |v| format!("{v:.0}"));
        let ratio = match (c.max_loss_free_pps, base.and_then(|b| b.max_loss_free_pps)) {
            (Some(v), Some(b)) if b > 0.0 => format!("{:.2}x", v / b),
            _ => "-".to_string(),
        };
        writeln!(o, "  {lf:>13}  {ratio:>8}")?;
    }
    writeln!(
        o,
        "CPU time of the capture process per packet written, microseconds (user + system, all threads)"
    )?;
    for c in &r.configs {
        write!(o, "{:<9}", c.config)?;
        for l in loads {
            match c
                .points
                .iter()
                .find(|p| p.load_pps == *l)
                .and_then(|p| p.cpu_us_per_packet)
            {
                Some(v) => write!(o, " {v:>8.2}")?,
                None => write!(o, " {:>8}", "-")?,
            }
        }
        writeln!(o)?;
    }
    for c in &r.configs {
        writeln!(o, "  {}: {}", c.config, c.description)?;
    }
    for n in &r.notes {
        writeln!(o, "note: {n}")?;
    }
    Ok(())
}

fn plot_kind(path: &Path) -> CliResult<&'static str> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("svg") => Ok("svg"),
        Some("png") => Ok("png"),
        _ => Err(CliError::input(format!(
            "{}: unknown plot type (expected .svg or .png)",
            display_path(path)
        ))),
    }
}

fn draw_plot(path: &Path, r: &Report) -> CliResult<()> {
    load_font()?;
    let title = format!(
        "Capture rate vs offered load ({} frames, {} payload{})",
        r.size,
        r.payload,
        r.disk_mbps
            .map_or_else(String::new, |m| format!(", disk {m} MB/s"))
    );
    let fail = |e: String| CliError::input(format!("{}: {e}", display_path(path)));
    match plot_kind(path)? {
        "svg" => draw(
            SVGBackend::new(path, (1024, 640)).into_drawing_area(),
            r,
            &title,
        )
        .map_err(fail),
        _ => draw(
            BitMapBackend::new(path, (1024, 640)).into_drawing_area(),
            r,
            &title,
        )
        .map_err(fail),
    }
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    r: &Report,
    title: &str,
) -> Result<(), String> {
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    root.fill(&WHITE).map_err(e)?;
    let x1 = r
        .configs
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.load_pps))
        .fold(1.0f64, f64::max)
        * 1.05;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x1, 0.0..1.05)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc("offered load (packets/s)")
        .y_desc("capture rate (written/sent)")
        .draw()
        .map_err(e)?;
    for (i, c) in r.configs.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let style = ShapeStyle::from(&color).stroke_width(2);
        let pts: Vec<(f64, f64)> = c
            .points
            .iter()
            .map(|p| (p.load_pps, p.capture_rate))
            .collect();
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), style))
            .map_err(e)?
            .label(c.config)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 4, style.filled())))
            .map_err(e)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerLeft)
        .draw()
        .map_err(e)?;
    root.present().map_err(|x| x.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(load: f64, sent: u64, written: u64) -> Point {
        Point {
            load_pps: load,
            sent_pps: load,
            sent,
            written,
            kernel_drops: 0,
            dropped_writer: sent - written.min(sent),
            extra: 0,
            capture_rate: written as f64 / sent as f64,
            file_bytes: 0,
            cpu_s: None,
            cpu_us_per_packet: None,
        }
    }

    #[test]
    fn max_loss_free_stops_at_the_first_loss() {
        let pts = [point(30.0, 10, 10), point(10.0, 10, 10), point(20.0, 10, 9)];
        assert_eq!(max_loss_free(&pts), Some(10.0));
        assert_eq!(max_loss_free(&[point(10.0, 10, 3)]), None);
        assert_eq!(max_loss_free(&[]), None);
    }

    #[test]
    fn tcpdump_closing_lines_are_read() {
        let s = "listening on x\n1234 packets captured\n1300 packets received by filter\n66 packets dropped by kernel\n";
        assert_eq!(tcpdump_counts(s), Some((1234, 66, 0)));
        assert_eq!(tcpdump_counts("tcpdump: error"), None);
    }

    #[test]
    fn configs_are_selected_by_name_in_order_given() {
        let c = select_configs(&["lz4".into(), "raw-pkt".into()]).unwrap();
        assert_eq!(
            c.iter().map(|c| c.name).collect::<Vec<_>>(),
            ["lz4", "raw-pkt"]
        );
        assert!(select_configs(&["lz5".into()]).is_err());
        assert_eq!(select_configs(&[]).unwrap().len(), CONFIGS.len());
    }

    #[test]
    fn frame_sizes_are_checked() {
        assert_eq!(
            frame_args("worm", PayloadArg::Fixed).unwrap(),
            (None, "worm")
        );
        assert_eq!(
            frame_args("1518", PayloadArg::Fixed).unwrap(),
            (Some("1518".into()), "fixed")
        );
        assert!(frame_args("63", PayloadArg::Fixed).is_err());
        assert!(frame_args("big", PayloadArg::Random).is_err());
    }
}
