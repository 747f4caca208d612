//! `kansoku bench capture`: the capture-loss experiments of Shimizu et al.
//! 2006 (§5, capture rate vs load for libpcap with per-packet and block
//! compression) and Tsukahara et al. n.d. (drops vs offered load),
//! self-contained.
//!
//! The bench makes a network namespace of its own with a veth pair in it
//! ([`Netns`]), and for every configuration and offered load runs this very
//! binary twice inside it: `kansoku bench capture-worker` on one end (or
//! tcpdump, [`crate::harness::peers`]), then `kansoku generate` on the other end
//! sending `--packets` frames at the load. When the generator is done the
//! capture is stopped with SIGINT, which drains the ring and the writer's
//! queue, and the capture rate is what it wrote over what was sent. The
//! namespace (and with it the veth pair) and the capture files are removed
//! afterwards, also when the bench is stopped with Ctrl-C (then the sweep
//! is incomplete, which the report counts as a problem: exit code 1).
//!
//! `--disk-mbps` emulates a disk of that throughput behind every writer
//! ([`crate::harness::slow_disk::SlowDisk`]: writes are serviced one after another
//! at that rate, no cache), so that a fast machine shows the papers'
//! disk-bound regime. For tcpdump the bench reads `tcpdump -w -` from a
//! pipe through the same emulated disk into the file: tcpdump then blocks
//! in `write` exactly as it would on a slow disk (the pipe's 64 KiB play
//! the page cache).
//!
//! The load a point is drawn and judged at is the one that reached the
//! capture's interface (its `rx_packets` over the time the generator
//! sent), not the one asked of the generator: a generator that cannot keep
//! up (it sent less than 95% of the asked rate) is flagged
//! `generator_bound`, since its point says nothing about the capture.
//!
//! A point is loss-free when everything sent was written; the maximum
//! loss-free load of a configuration is the highest achieved load at which
//! it and every lower one lost nothing. With a finite burst of `--packets`
//! frames, buffers (the ring, the writer's queue) hide a slow disk for a
//! while: loss starts when the backlog outgrows them, as in the papers. The
//! queue is sized in bytes (`--queue-mib`, by default as large as the ring),
//! so it hides the same amount of traffic at every load.

pub mod worker;

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pipeline::{display_path, Error, Report, Result};
use serde::Serialize;
use trace::Codec;

use crate::args::{BenchCaptureArgs, Payload, XdpModeArg};
use crate::harness::background::{self, Background};
use crate::harness::netns::Netns;
use crate::harness::peers::{self, json_u64, must, parse_json, Peer, PeerCapture};
use plot::{Chart, ImageKind, LineChart, Series};

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

/// The programs a configuration runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tool {
    /// kansoku's capture worker, writing in this codec.
    Kansoku {
        codec: Codec,
        per_packet: bool,
        /// How the writer gets the ring's blocks.
        lane: LaneKind,
    },
    /// Another capture program ([`peers::CapturePeer`]).
    Peer(peers::CapturePeer),
}

/// How a kansoku configuration's writer gets the ring's blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LaneKind {
    /// The writer reads them in place itself (the default).
    Direct,
    /// A ring thread hands them over in place (`--ring-thread`).
    Queue,
    /// A ring thread copies each into the queue (`--ring-thread --hold-blocks 0`).
    Copy,
    /// No ring: AF_XDP frames in this mode (`--xdp`), read by the writer.
    Xdp(XdpModeArg),
}

/// One configuration compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Config {
    name: &'static str,
    description: &'static str,
    tool: Tool,
}

/// The configurations, in the order they are run and shown. The first,
/// libpcap's pattern, is the baseline the others are compared with.
const CONFIGS: [Config; 13] = [
    Config {
        name: "raw-pkt",
        description: "uncompressed, one write per packet (as pcap_dump)",
        tool: Tool::Kansoku {
            codec: Codec::None,
            per_packet: true,
            lane: LaneKind::Direct,
        },
    },
    Config {
        name: "raw",
        description: "uncompressed, 32 KiB blocks",
        tool: Tool::Kansoku {
            codec: Codec::None,
            per_packet: false,
            lane: LaneKind::Direct,
        },
    },
    Config {
        name: "lz4-pkt",
        description: "lz4, each packet compressed and written alone",
        tool: Tool::Kansoku {
            codec: Codec::Lz4,
            per_packet: true,
            lane: LaneKind::Direct,
        },
    },
    Config {
        name: "lz4",
        description: "lz4, 32 KiB blocks",
        tool: Tool::Kansoku {
            codec: Codec::Lz4,
            per_packet: false,
            lane: LaneKind::Direct,
        },
    },
    Config {
        name: "lz4-queue",
        description: "lz4, a ring thread hands blocks in place to the writer, copies the oldest when it falls behind",
        tool: Tool::Kansoku {
            codec: Codec::Lz4,
            per_packet: false,
            lane: LaneKind::Queue,
        },
    },
    Config {
        name: "lz4-copy",
        description: "lz4, a ring thread copies every block into the writer's queue (kansoku 0.1)",
        tool: Tool::Kansoku {
            codec: Codec::Lz4,
            per_packet: false,
            lane: LaneKind::Copy,
        },
    },
    Config {
        name: "xdp-generic",
        description: "lz4, AF_XDP instead of the ring: generic XDP (on the kernel's receive path) redirects frames",
        tool: Tool::Kansoku {
            codec: Codec::Lz4,
            per_packet: false,
            lane: LaneKind::Xdp(XdpModeArg::Generic),
        },
    },
    Config {
        name: "xdp-native",
        description: "lz4, AF_XDP instead of the ring: native XDP (in the driver; veth's NAPI poll) redirects frames",
        tool: Tool::Kansoku {
            codec: Codec::Lz4,
            per_packet: false,
            lane: LaneKind::Xdp(XdpModeArg::Native),
        },
    },
    Config {
        name: "gzip",
        description: "gzip level 1, 32 KiB blocks",
        tool: Tool::Kansoku {
            codec: Codec::Gzip,
            per_packet: false,
            lane: LaneKind::Direct,
        },
    },
    Config {
        name: "zstd",
        description: "zstd level 1, 32 KiB blocks",
        tool: Tool::Kansoku {
            codec: Codec::Zstd,
            per_packet: false,
            lane: LaneKind::Direct,
        },
    },
    Config {
        name: "tcpdump",
        description: "tcpdump -w (libpcap), when installed",
        tool: Tool::Peer(peers::CapturePeer::Tcpdump),
    },
    Config {
        name: "dumpcap",
        description: "dumpcap -w (Wireshark's capture engine, libpcap), when installed",
        tool: Tool::Peer(peers::CapturePeer::Dumpcap),
    },
    Config {
        name: "netsniff",
        description: "netsniff-ng --out (its own mmap ring), when installed",
        tool: Tool::Peer(peers::CapturePeer::Netsniff),
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
    /// Packets the capture's interface received during the point
    /// (`rx_packets`), and that over the generator's sending time: the load
    /// the capture was offered, as the points are drawn and judged.
    pub received: u64,
    pub received_pps: f64,
    /// The generator sent under 95% of the asked load: the point measures
    /// the generator, not the capture.
    pub generator_bound: bool,
    /// The point's capture file, kept with `--keep-files`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
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
    /// kansoku's own account of its ring: blocks read in place, blocks
    /// copied, times the kernel found the ring full (freezes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ring: Option<RingUse>,
}

/// How a kansoku capture used its ring at one point.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct RingUse {
    pub blocks_in_place: u64,
    pub blocks_copied: u64,
    pub kernel_freezes: u64,
    /// Of the copied blocks, those the rescuer copied from a stalled
    /// writer; the longest stall it saw (sampled every 2 ms, 0 under 5 ms).
    pub blocks_rescued: u64,
    pub longest_stall_ms: f64,
    /// The writer's time blocked on the file system, and its longest block.
    pub blocked_ms: f64,
    pub longest_block_ms: f64,
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
    /// One point a load: with several rounds, the median round's.
    points: Vec<Point>,
    /// With `--rounds` above 1: every round's points, in round order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    rounds: Vec<Vec<Point>>,
    /// Highest load at which this and every lower load lost nothing.
    max_loss_free_pps: Option<f64>,
}

#[derive(Debug, Serialize)]
struct Results<'a> {
    size: &'a str,
    payload: &'static str,
    packets_per_point: u64,
    disk_mbps: Option<f64>,
    ring_mib: usize,
    /// kansoku's writer queue, MiB of packet data.
    queue_mib: usize,
    /// The CPU the captures were pinned to, and whether the kernel's
    /// receive work was put on it too (RPS).
    #[serde(skip_serializing_if = "Option::is_none")]
    capture_cpu: Option<usize>,
    kernel_rx_on_capture_core: bool,
    /// The configuration the others are compared with.
    baseline: &'static str,
    /// The loads that kept the box busy (`--background`), and the rounds.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    background: Vec<&'static str>,
    rounds: u64,
    configs: Vec<ConfigResult>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    notes: Vec<String>,
}

/// `kansoku bench capture`: the sweep, then its table (or JSON) to `out`
/// and the plot to `-o`. A sweep cut short by `stop` is reported as far as
/// it went, and is a problem in the returned report.
pub fn run(args: &BenchCaptureArgs, stop: &AtomicBool, out: &mut dyn Write) -> Result<Report> {
    let configs = select_configs(&args.configs)?;
    let mut loads = args.loads.clone();
    if loads.is_empty() || loads.iter().any(|l| !(*l > 0.0 && l.is_finite())) {
        return Err(Error::usage(
            "--loads must be positive packet rates (expected e.g. 10000,20000)",
        ));
    }
    loads.sort_by(f64::total_cmp);
    loads.dedup();
    if args.packets == 0 {
        return Err(Error::usage("--packets must be at least 1"));
    }
    if let Some(m) = args.disk_mbps {
        crate::harness::slow_disk::check_mbps(m)?;
    }
    let (size, payload) = frame_args(&args.size, args.payload)?;
    if let Some(plot) = &args.plot {
        ImageKind::of(plot)?;
    }
    let exe = std::env::current_exe().map_err(|e| Error::input(format!("own binary: {e}")))?;
    let mut notes = Vec::new();
    let configs: Vec<Config> = configs
        .into_iter()
        .filter(|c| match c.tool {
            Tool::Peer(p) if p.program().is_none() => {
                notes.push(format!("{} is not installed: its row is left out", p.name()));
                false
            }
            Tool::Kansoku {
                lane: LaneKind::Xdp(_),
                ..
            } if args.expression.is_some() => {
                notes.push(format!(
                    "{}: an XDP socket takes no socket filter: its row is left out",
                    c.name
                ));
                false
            }
            Tool::Kansoku {
                lane: LaneKind::Xdp(_),
                ..
            } => match capture::xdp::available() {
                Ok(()) => true,
                Err(why) => {
                    notes.push(format!("{}: no AF_XDP here ({why}): its row is left out", c.name));
                    false
                }
            },
            Tool::Peer(p) if args.disk_mbps.is_some() && !p.can_pipe() => {
                notes.push(format!(
                    "{} prints its messages on standard output, where the emulated disk would read its capture: its row is left out",
                    p.name()
                ));
                false
            }
            _ => true,
        })
        .collect();

    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let capture_cpu = match (args.capture_cpu, args.kernel_rx_on_capture_core) {
        (Some(c), _) if c >= cpus => {
            return Err(Error::usage(format!(
                "--capture-cpu {c}: this machine has CPUs 0 to {}",
                cpus - 1
            )))
        }
        (Some(c), _) => Some(c),
        // The last CPU, the generator on the first.
        (None, true) => Some(cpus - 1),
        (None, false) => None,
    };
    if args.kernel_rx_on_capture_core && cpus < 2 {
        return Err(Error::usage(
            "--kernel-rx-on-capture-core needs two CPUs: one for the generator, one for the capture",
        ));
    }
    let generator_cpu = capture_cpu.filter(|_| cpus > 1).map(|c| (c + 1) % cpus);
    let work = WorkDir::create(args.dir.as_deref(), args.keep_files)?;
    let ns = Netns::create()?;
    if args.kernel_rx_on_capture_core {
        // RPS: the receiving veth's packets are processed (protocol stack,
        // AF_PACKET delivery into the rings) on the capture's CPU, as a NIC
        // queue's interrupt would have them on a real host.
        let cpu = capture_cpu.unwrap_or(0);
        let path = format!("/sys/class/net/{}/queues/rx-0/rps_cpus", ns.rx);
        ns.exec(&[
            "sh",
            "-c",
            &format!("echo {:x} > {path}", 1u64 << cpu.min(63)),
        ])?;
    }
    let mut results: Vec<ConfigResult> = configs
        .iter()
        .map(|c| ConfigResult {
            config: c.name,
            description: c.description,
            points: Vec::new(),
            rounds: Vec::new(),
            max_loss_free_pps: None,
        })
        .collect();
    let mut env = PointEnv {
        exe: &exe,
        ns: &ns,
        dir: &work.path,
        args,
        size: &size,
        payload,
        capture_cpu,
        generator_cpu,
        matching: None,
    };
    if let Some(e) = &args.expression {
        let m = matching_frames(&env, e)?;
        notes.push(format!(
            "expression `{e}`: {m} of the {} frames a point sends match it; rates are of those",
            args.packets
        ));
        env.matching = Some(m);
    }
    let env = env;
    let mut background = Background::start(&args.background, &work.path, capture_cpu, cpus)?;
    if !background.is_empty() {
        std::thread::sleep(background::WARMUP);
    }
    let rounds = usize::try_from(args.rounds).unwrap_or(1).max(1);
    for r in &mut results {
        r.rounds = vec![Vec::new(); rounds];
    }
    'sweep: for round in 0..rounds {
        // Rotated from round to round, so that no configuration always
        // follows the same one (a file system's writeback, a warm cache).
        let mut order: Vec<usize> = (0..configs.len()).collect();
        order.rotate_left(round % configs.len().max(1));
        for i in order {
            let c = &configs[i];
            for &load in &loads {
                if stop.load(Ordering::Relaxed) {
                    break 'sweep;
                }
                background.check()?;
                let p = run_point(&env, c, load)?;
                eprintln!(
                    "kansoku: {}{:<11} {:>9.0} pps offered, {:>9.0} sent: {} of {} written ({:.4}), {} kernel drops, {} writer drops",
                    if rounds > 1 { format!("round {} ", round + 1) } else { String::new() },
                    c.name, load, p.sent_pps, p.written, p.sent, p.capture_rate, p.kernel_drops, p.dropped_writer
                );
                results[i].rounds[round].push(p);
            }
        }
    }
    drop(background);
    for r in &mut results {
        r.points = median_points(&r.rounds, &loads);
        if rounds == 1 {
            r.rounds.clear();
        }
        // Also for a configuration whose sweep a stop cut short.
        r.max_loss_free_pps = max_loss_free(&r.points);
    }
    drop(ns);
    drop(work);
    let mut report = Report::default();
    if stop.load(Ordering::Relaxed) {
        notes.push("stopped early (interrupted): the sweep is incomplete".to_string());
        report
            .problems
            .push("bench capture: interrupted; the sweep is incomplete".to_string());
    }
    let results = Results {
        size: &args.size,
        payload: if args.size == "worm" {
            "worm"
        } else {
            args.payload.name()
        },
        packets_per_point: args.packets,
        disk_mbps: args.disk_mbps,
        ring_mib: args.buffer_mib,
        queue_mib: args.queue_mib,
        capture_cpu,
        kernel_rx_on_capture_core: args.kernel_rx_on_capture_core,
        baseline: CONFIGS[0].name,
        background: args.background.iter().map(|b| b.name()).collect(),
        rounds: args.rounds,
        configs: results,
        notes,
    };
    if let Some(plot) = &args.plot {
        chart(&results).draw_file(plot)?;
    }
    if args.json {
        serde_json::to_writer(&mut *out, &results).map_err(|e| Error::stdout(e.into()))?;
        writeln!(out).map_err(Error::stdout)?;
    } else {
        write_table(out, &results, &loads).map_err(Error::stdout)?;
    }
    Ok(report)
}

/// Everything a point needs besides the configuration and the load.
struct PointEnv<'a> {
    exe: &'a Path,
    ns: &'a Netns,
    dir: &'a Path,
    args: &'a BenchCaptureArgs,
    size: &'a Option<String>,
    payload: &'static str,
    /// The CPU every capture runs on, and the generator's (another one).
    capture_cpu: Option<usize>,
    generator_cpu: Option<usize>,
    /// With --expression: how many of the frames a point sends it matches.
    matching: Option<u64>,
}

/// How many of the frames a point sends match `expression`: the generator
/// sends the same frames every time (its pattern is seeded), so one run of
/// it, logged to a file, counted by `kansoku stats`, says it for every point.
fn matching_frames(env: &PointEnv, expression: &str) -> Result<u64> {
    let log = env.dir.join("sent.pcap");
    let mut gen = generate_command(env, 0.0);
    gen.arg("-w")
        .arg(&log)
        .args(["--compress", "none", "--no-index"]);
    must(&mut gen)?;
    let mut stats = Command::new(env.exe);
    stats
        .arg("stats")
        .arg(&log)
        .args(["--json", "--", expression]);
    // `stats --json` prints one document over several lines.
    let v: serde_json::Value = serde_json::from_slice(&must(&mut stats)?)
        .map_err(|e| Error::input(format!("kansoku stats --json: {e}")))?;
    let _ = std::fs::remove_file(&log);
    Ok(json_u64(&v, "packets"))
}

fn select_configs(names: &[String]) -> Result<Vec<Config>> {
    if names.is_empty() {
        return Ok(CONFIGS.to_vec());
    }
    let mut out = Vec::new();
    for n in names {
        let Some(c) = CONFIGS.iter().find(|c| c.name == n.as_str()) else {
            let known: Vec<&str> = CONFIGS.iter().map(|c| c.name).collect();
            return Err(Error::usage(format!(
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
fn frame_args(size: &str, payload: Payload) -> Result<(Option<String>, &'static str)> {
    if size == "worm" || payload == Payload::Worm {
        return Ok((None, "worm"));
    }
    match size.parse::<u32>() {
        Ok(n) if (64..=1518).contains(&n) => {}
        _ => {
            return Err(Error::usage(format!(
                "--size {size:?}: expected a frame size 64..=1518 (FCS included) or worm"
            )))
        }
    }
    Ok((Some(size.to_string()), payload.name()))
}

/// The highest achieved load (at the capture's interface) such that it and
/// every lower one were loss-free.
/// For each load, the point of the median round by capture rate (the
/// lower of the middle two for an even count), in load order.
fn median_points(rounds: &[Vec<Point>], loads: &[f64]) -> Vec<Point> {
    loads
        .iter()
        .filter_map(|l| {
            let mut at: Vec<&Point> = rounds
                .iter()
                .flat_map(|r| r.iter().filter(|p| p.load_pps == *l))
                .collect();
            at.sort_by(|a, b| a.capture_rate.total_cmp(&b.capture_rate));
            at.get(at.len().saturating_sub(1) / 2).map(|p| (*p).clone())
        })
        .collect()
}

fn max_loss_free(points: &[Point]) -> Option<f64> {
    let mut sorted: Vec<&Point> = points.iter().collect();
    sorted.sort_by(|a, b| a.received_pps.total_cmp(&b.received_pps));
    sorted
        .iter()
        .take_while(|p| p.loss_free())
        .last()
        .map(|p| p.received_pps)
}

/// Packets the interface `dev` of the bench's namespace has received.
fn rx_packets(ns: &Netns, dev: &str) -> Result<u64> {
    let path = format!("/sys/class/net/{dev}/statistics/rx_packets");
    let out = ns.exec(&["cat", &path])?;
    String::from_utf8_lossy(&out)
        .trim()
        .parse()
        .map_err(|_| Error::input(format!("{path}: not a count")))
}

/// The packets in a capture file another program wrote.
fn packets_in(path: &Path) -> Result<u64> {
    let mut r = trace::TraceReader::open(path)
        .map_err(|e| Error::input(format!("{}: {e}", display_path(path))))?;
    let mut n = 0;
    while let Some(rec) = r
        .next_record()
        .map_err(|e| Error::input(format!("{}: {e}", display_path(path))))?
    {
        if matches!(rec, trace::Record::Packet(_)) {
            n += 1;
        }
    }
    Ok(n)
}

/// A point below this share of the asked load is generator-bound.
const GENERATOR_BOUND: f64 = 0.95;

/// The directory the capture files go to, removed when dropped unless
/// its files are kept.
struct WorkDir {
    path: PathBuf,
    keep: bool,
}

impl WorkDir {
    fn create(parent: Option<&Path>, keep: bool) -> Result<WorkDir> {
        let parent = parent.map_or_else(std::env::temp_dir, Path::to_path_buf);
        let path = parent.join(format!("kansoku-bench-capture-{}", std::process::id()));
        std::fs::create_dir_all(&path).map_err(|e| Error::output(display_path(&path), &e))?;
        Ok(WorkDir { path, keep })
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Starts configuration `c`'s capture into `file` and waits until it listens.
fn start_capture(env: &PointEnv, c: &Config, file: &Path) -> Result<Peer> {
    let a = env.args;
    let mut peer = match c.tool {
        Tool::Kansoku {
            codec,
            per_packet,
            lane,
        } => {
            let mut cmd = env.ns.command_on(env.capture_cpu, env.exe);
            cmd.args(["bench", "capture-worker", "-i", &env.ns.rx, "--json"])
                .arg("-B")
                .arg(a.buffer_mib.to_string())
                .arg("--queue-mib")
                .arg(a.queue_mib.to_string())
                .args(["--compress", codec.name(), "-w"])
                .arg(file)
                .stdout(Stdio::piped());
            if per_packet {
                cmd.arg("--per-packet");
            }
            match lane {
                LaneKind::Direct => {}
                LaneKind::Queue => {
                    cmd.arg("--ring-thread");
                }
                LaneKind::Copy => {
                    cmd.args(["--ring-thread", "--hold-blocks", "0"]);
                }
                LaneKind::Xdp(mode) => {
                    cmd.args(["--xdp", mode.name()]);
                }
            }
            if let (Some(k), false) = (a.ring_block_kib, matches!(lane, LaneKind::Xdp(_))) {
                cmd.arg("--ring-block-kib").arg(k.to_string());
            }
            if let Some(m) = a.disk_mbps {
                cmd.arg("--disk-mbps").arg(m.to_string());
            }
            if let Some(e) = &a.expression {
                cmd.arg("--expression").arg(e);
            }
            Peer::spawn(cmd)?
        }
        Tool::Peer(p) => {
            // With an emulated disk, to standard output so that the bench
            // can put the disk behind it; without one the program writes
            // its file itself, as kansoku does, so that CPU times compare.
            let cmd = p.command(
                env.ns,
                env.capture_cpu,
                &env.ns.rx,
                file,
                &PeerCapture {
                    to_pipe: a.disk_mbps.is_some(),
                    ring_mib: a.buffer_mib,
                    expression: a.expression.as_deref(),
                },
            )?;
            let mut peer = Peer::spawn(cmd)?;
            if let Some(m) = a.disk_mbps {
                peer.pipe_to_slow_disk(file, (m * 1e6).max(1.0) as u64);
            }
            peer
        }
    };
    peer = peer.wait_listening(LISTEN_TIMEOUT, c.name)?;
    Ok(peer)
}

/// `kansoku generate`'s arguments for `--packets` frames at `load`.
fn generate_command(env: &PointEnv, load: f64) -> Command {
    let mut gen = env.ns.command_on(env.generator_cpu, env.exe);
    gen.args(["generate", "-i", &env.ns.tx, "--proto", "udp", "--json"])
        .arg("-c")
        .arg(env.args.packets.to_string())
        .args(["--payload", env.payload]);
    // Load 0: as fast as it can (the log of the frames a point sends).
    if load > 0.0 {
        gen.arg("--pps").arg(load.to_string());
    }
    if let Some(size) = env.size {
        gen.args(["--size", size]);
    }
    gen
}

fn run_point(env: &PointEnv, c: &Config, load: f64) -> Result<Point> {
    let file = env.dir.join(format!("{}-{load}.pcap", c.name));
    let capture = start_capture(env, c, &file)?;
    let rx0 = match rx_packets(env.ns, &env.ns.rx) {
        Ok(n) => n,
        Err(e) => {
            capture.kill();
            return Err(e);
        }
    };
    let sent =
        match must(&mut generate_command(env, load)).and_then(|out| parse_json(&out, "generate")) {
            Ok(v) => v,
            Err(e) => {
                capture.kill();
                return Err(e);
            }
        };
    std::thread::sleep(match c.tool {
        Tool::Kansoku { .. } => SETTLE,
        Tool::Peer(_) => SETTLE_TCPDUMP,
    });
    // Read before the capture stops: what reached the interface while the
    // generator sent (the settle time lets the last frames arrive).
    let rx1 = rx_packets(env.ns, &env.ns.rx);
    if let Err(e) = capture.interrupt() {
        capture.kill();
        return Err(e);
    }
    let received = rx1?.saturating_sub(rx0);
    let end = capture.wait().map_err(|e| e.context(c.name))?;
    let mut ring = None;
    let (written, kernel_drops, dropped_writer) = match c.tool {
        Tool::Kansoku { .. } => {
            // Exit 1 means "drops happened", which is what is measured here.
            if !matches!(end.status.code(), Some(0 | 1)) {
                return Err(Error::input(format!(
                    "{}: capture failed ({}): {}",
                    c.name,
                    end.status,
                    end.stderr.trim()
                )));
            }
            let s = parse_json(&end.stdout, "capture")?;
            ring = s.get("ring_blocks_in_place").map(|_| RingUse {
                blocks_in_place: json_u64(&s, "ring_blocks_in_place"),
                blocks_copied: json_u64(&s, "ring_blocks_copied"),
                kernel_freezes: json_u64(&s, "kernel_freezes"),
                blocks_rescued: json_u64(&s, "ring_blocks_rescued"),
                longest_stall_ms: s["lanes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|l| l["longest_stall_ms"].as_f64())
                    .fold(0.0, f64::max),
                blocked_ms: json_u64(&s, "blocked_ns") as f64 / 1e6,
                longest_block_ms: json_u64(&s, "longest_block_ns") as f64 / 1e6,
            });
            (
                json_u64(&s, "written"),
                json_u64(&s, "kernel_drops"),
                json_u64(&s, "dropped_kansoku"),
            )
        }
        Tool::Peer(p) => {
            if let Some(Err(e)) = end.copied {
                return Err(Error::output(
                    format!("{}: writing {}", p.name(), display_path(&file)),
                    &e,
                ));
            }
            let (said, drops) = p.counts(&end.stderr).ok_or_else(|| {
                Error::input(format!(
                    "{}: no packet counts in its output: {}",
                    p.name(),
                    end.stderr.trim()
                ))
            })?;
            // What is in the file is what was written: counted there, and
            // checked against what the program says it captured.
            let in_file = packets_in(&file)?;
            if said.is_some_and(|n| n != in_file) {
                return Err(Error::input(format!(
                    "{}: says it captured {} packets, its file holds {in_file}",
                    p.name(),
                    said.unwrap_or(0)
                )));
            }
            (in_file, drops, 0)
        }
    };
    let file_bytes = std::fs::metadata(&file).map_or(0, |m| m.len());
    let kept = if env.args.keep_files {
        Some(file)
    } else {
        let _ = std::fs::remove_file(&file);
        None
    };
    // With an expression, what should be in the file is what it matches.
    let n_sent = match env.matching {
        Some(m) => m,
        None => json_u64(&sent, "packets"),
    };
    let cpu_s = end.cpu_s;
    let sent_pps = sent["pps"].as_f64().unwrap_or(0.0);
    let seconds = sent["seconds"].as_f64().unwrap_or(0.0);
    Ok(Point {
        load_pps: load,
        sent_pps,
        sent: n_sent,
        received,
        received_pps: if seconds > 0.0 {
            received as f64 / seconds
        } else {
            0.0
        },
        generator_bound: sent_pps < load * GENERATOR_BOUND,
        file: kept,
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
        ring,
    })
}

/// A configuration's name and one cell per asked load: `cell` of its point
/// there, `-` where it has no point or `cell` nothing to say.
fn write_cells(
    o: &mut dyn Write,
    c: &ConfigResult,
    loads: &[f64],
    cell: impl Fn(&Point) -> Option<String>,
) -> io::Result<()> {
    write!(o, "{:<11}", c.config)?;
    for l in loads {
        let text = c
            .points
            .iter()
            .find(|p| p.load_pps == *l)
            .and_then(&cell)
            .unwrap_or_else(|| "-".to_string());
        write!(o, " {text:>8}")?;
    }
    Ok(())
}

fn write_table(o: &mut dyn Write, r: &Results, loads: &[f64]) -> io::Result<()> {
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
    if let Some(cpu) = r.capture_cpu {
        writeln!(
            o,
            "captures pinned to CPU {cpu}{}",
            if r.kernel_rx_on_capture_core {
                ", the kernel's receive work for their interface on it too (RPS)"
            } else {
                ""
            }
        )?;
    }
    write!(o, "{:<11}", "pps")?;
    for l in loads {
        write!(o, " {l:>8.0}")?;
    }
    writeln!(o, "  {:>13}  {:>8}", "max loss-free", "vs base")?;
    let base = r.configs.iter().find(|c| c.config == r.baseline);
    for c in &r.configs {
        write_cells(o, c, loads, |p| Some(format!("{:.4}", p.capture_rate)))?;
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
        "load at the capture's interface, packets/s (rx_packets over the sending time; * generator-bound: it sent under 95% of the asked load)"
    )?;
    for c in &r.configs {
        write_cells(o, c, loads, |p| {
            let bound = if p.generator_bound { "*" } else { "" };
            Some(format!("{:.0}{bound}", p.received_pps))
        })?;
        writeln!(o)?;
    }
    writeln!(
        o,
        "CPU time of the capture process per packet written, microseconds (user + system, all threads)"
    )?;
    for c in &r.configs {
        write_cells(o, c, loads, |p| {
            p.cpu_us_per_packet.map(|v| format!("{v:.2}"))
        })?;
        writeln!(o)?;
    }
    let with_waits: Vec<&ConfigResult> = r
        .configs
        .iter()
        .filter(|c| c.points.iter().any(|p| p.ring.is_some()))
        .collect();
    if !with_waits.is_empty() {
        writeln!(
            o,
            "kansoku's waits: longest stall of its writer on a ring block / longest write, ms (median round)"
        )?;
    }
    for c in with_waits {
        write_cells(o, c, loads, |p| {
            p.ring
                .as_ref()
                .map(|u| format!("{:.0}/{:.0}", u.longest_stall_ms, u.longest_block_ms))
        })?;
        writeln!(o)?;
    }
    if r.rounds > 1 {
        writeln!(
            o,
            "loss % in each of {} rounds at each load (the rows above are the median round's)",
            r.rounds
        )?;
        for c in &r.configs {
            write!(o, "{:<11}", c.config)?;
            for l in loads {
                let each: Vec<String> = c
                    .rounds
                    .iter()
                    .filter_map(|round| round.iter().find(|p| p.load_pps == *l))
                    .map(|p| format!("{:.2}", 100.0 * (1.0 - p.capture_rate)))
                    .collect();
                write!(o, " {:>8}", each.join("/"))?;
            }
            writeln!(o)?;
        }
    }
    for c in &r.configs {
        writeln!(o, "  {}: {}", c.config, c.description)?;
    }
    if !r.background.is_empty() {
        writeln!(o, "background: {}", r.background.join(" + "))?;
    }
    for n in &r.notes {
        writeln!(o, "note: {n}")?;
    }
    Ok(())
}

/// Capture rate against the load that reached the capture's interface, a
/// line per configuration, its maximum loss-free load in its legend entry.
fn chart(r: &Results) -> LineChart<'static> {
    let x1 = r
        .configs
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.received_pps))
        .fold(1.0f64, f64::max)
        * 1.05;
    let series = r
        .configs
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut pts: Vec<(f64, f64)> = c
                .points
                .iter()
                .map(|p| (p.received_pps, p.capture_rate))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            let bound = c.points.iter().filter(|p| p.generator_bound).count();
            let label = format!(
                "{}: max loss-free {}{}",
                c.config,
                c.max_loss_free_pps
                    .map_or_else(|| "none".to_string(), |v| format!("{v:.0} pps")),
                if bound > 0 {
                    format!(", {bound} generator-bound")
                } else {
                    String::new()
                }
            );
            Series {
                markers: true,
                ..Series::new(label, pts, i)
            }
        })
        .collect();
    LineChart {
        title: format!(
            "Capture rate vs offered load ({} frames, {} payload{})",
            r.size,
            r.payload,
            r.disk_mbps
                .map_or_else(String::new, |m| format!(", disk {m} MB/s"))
        ),
        x: 0.0..x1,
        y: 0.0..1.05,
        x_desc: Some("load at the capture's interface (packets/s)"),
        y_desc: Some("capture rate (written/sent)"),
        x_labels: None,
        x_label_formatter: None,
        y_label_area: 60,
        series,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(load: f64, sent: u64, written: u64) -> Point {
        Point {
            load_pps: load,
            sent_pps: load,
            sent,
            received: sent,
            received_pps: load,
            generator_bound: false,
            file: None,
            written,
            kernel_drops: 0,
            dropped_writer: sent - written.min(sent),
            extra: 0,
            capture_rate: written as f64 / sent as f64,
            file_bytes: 0,
            cpu_s: None,
            cpu_us_per_packet: None,
            ring: None,
        }
    }

    #[test]
    fn each_load_takes_its_median_round() {
        let rounds = vec![
            vec![point(10.0, 10, 10), point(20.0, 10, 5)],
            vec![point(10.0, 10, 7), point(20.0, 10, 9)],
            vec![point(10.0, 10, 9), point(20.0, 10, 6)],
        ];
        let m = median_points(&rounds, &[10.0, 20.0, 30.0]);
        let written: Vec<(f64, u64)> = m.iter().map(|p| (p.load_pps, p.written)).collect();
        assert_eq!(written, [(10.0, 9), (20.0, 6)]);
        // Two rounds: the lower of the two, never a loss hidden.
        let m = median_points(&rounds[..2], &[10.0]);
        assert_eq!(m[0].written, 7);
    }

    #[test]
    fn max_loss_free_stops_at_the_first_loss() {
        let pts = [point(30.0, 10, 10), point(10.0, 10, 10), point(20.0, 10, 9)];
        assert_eq!(max_loss_free(&pts), Some(10.0));
        assert_eq!(max_loss_free(&[point(10.0, 10, 3)]), None);
        assert_eq!(max_loss_free(&[]), None);
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
        assert_eq!(frame_args("worm", Payload::Fixed).unwrap(), (None, "worm"));
        assert_eq!(
            frame_args("1518", Payload::Fixed).unwrap(),
            (Some("1518".into()), "fixed")
        );
        assert!(frame_args("63", Payload::Fixed).is_err());
        assert!(frame_args("big", Payload::Random).is_err());
    }

    fn results() -> Results<'static> {
        Results {
            size: "1518",
            payload: "fixed",
            packets_per_point: 10,
            disk_mbps: Some(2.0),
            ring_mib: 8,
            queue_mib: 8,
            capture_cpu: None,
            kernel_rx_on_capture_core: false,
            baseline: "raw-pkt",
            background: vec![],
            rounds: 1,
            configs: vec![
                ConfigResult {
                    config: "raw-pkt",
                    description: CONFIGS[0].description,
                    points: vec![point(1000.0, 10, 10), point(2000.0, 10, 5)],
                    rounds: vec![],
                    max_loss_free_pps: Some(1000.0),
                },
                ConfigResult {
                    config: "lz4",
                    description: CONFIGS[3].description,
                    points: vec![
                        point(1000.0, 10, 10),
                        Point {
                            generator_bound: true,
                            ..point(2000.0, 10, 10)
                        },
                    ],
                    rounds: vec![],
                    max_loss_free_pps: Some(2000.0),
                },
            ],
            notes: vec!["tcpdump is not installed: its row is left out".into()],
        }
    }

    #[test]
    fn the_table_compares_with_the_baseline() {
        let mut o = Vec::new();
        write_table(&mut o, &results(), &[1000.0, 2000.0]).unwrap();
        let text = String::from_utf8(o).unwrap();
        assert_eq!(
            text,
            "capture rate (written/sent), 1518 frames, fixed payload, 10 packets per point, ring 8 MiB, queue 8 MiB, emulated disk 2 MB/s\n\
             pps             1000     2000  max loss-free   vs base\n\
             raw-pkt       1.0000   0.5000           1000     1.00x\n\
             lz4           1.0000   1.0000           2000     2.00x\n\
             load at the capture's interface, packets/s (rx_packets over the sending time; * generator-bound: it sent under 95% of the asked load)\n\
             raw-pkt         1000     2000\n\
             lz4             1000    2000*\n\
             CPU time of the capture process per packet written, microseconds (user + system, all threads)\n\
             raw-pkt            -        -\n\
             lz4                -        -\n  \
             raw-pkt: uncompressed, one write per packet (as pcap_dump)\n  \
             lz4: lz4, 32 KiB blocks\n\
             note: tcpdump is not installed: its row is left out\n"
        );
    }

    #[test]
    fn the_json_keeps_its_fields_and_the_plot_its_lines() {
        let v = serde_json::to_value(results()).unwrap();
        assert_eq!(v["baseline"], "raw-pkt");
        assert_eq!(v["configs"][1]["max_loss_free_pps"], 2000.0);
        assert_eq!(v["configs"][0]["points"][1]["written"], 5);
        assert!(v["configs"][0]["points"][0]["cpu_s"].is_null());
        let c = chart(&results());
        assert_eq!(c.series.len(), 2);
        assert!(c.title.ends_with("disk 2 MB/s)"), "{}", c.title);
        let svg = c.to_svg().unwrap();
        assert!(svg.contains("raw-pkt") && svg.contains("capture rate"));
    }

    #[test]
    fn bad_arguments_are_usage_errors() {
        let args = |f: &dyn Fn(&mut BenchCaptureArgs)| {
            let mut a = BenchCaptureArgs {
                loads: vec![1000.0],
                packets: 10,
                size: "1518".into(),
                payload: Payload::Fixed,
                configs: vec![],
                disk_mbps: None,
                buffer_mib: 8,
                ring_block_kib: None,
                queue_mib: 8,
                capture_cpu: None,
                kernel_rx_on_capture_core: false,
                dir: None,
                keep_files: false,
                expression: None,
                background: vec![],
                rounds: 1,
                plot: None,
                json: false,
            };
            f(&mut a);
            a
        };
        let never = AtomicBool::new(false);
        for a in [
            args(&|a| a.loads = vec![0.0]),
            args(&|a| a.configs = vec!["lz5".into()]),
            args(&|a| a.size = "9000".into()),
            args(&|a| a.disk_mbps = Some(-1.0)),
            args(&|a| a.plot = Some("x.gif".into())),
            args(&|a| a.packets = 0),
        ] {
            let e = run(&a, &never, &mut Vec::new()).unwrap_err();
            assert_eq!(e.kind, pipeline::ErrorKind::Usage, "{a:?}: {e}");
        }
    }
}
