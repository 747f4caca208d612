//! `kansoku capture`: live capture from TPACKET_V3 rings into the trace
//! store (or packet lines), with drop accounting that never hides a loss.
//!
//! Each ring has a lane: the ring thread of [`capture::pipeline`] and a
//! consumer thread that applies the S3 filter (`--rules`), counts the kept
//! packets into an aguri profiler (`--profile`) and writes them. With
//! `--fanout N` there are N rings in one PACKET_FANOUT group, so N cores
//! share the work, and one output file per ring.
//!
//! Accounting, exact at exit and summed over the rings:
//! `kernel_packets = received + kernel_drops` and
//! `received = written + rejected + dropped_kansoku + skipped`.

use std::ffi::OsString;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use aguri::{ProfilerConfig, Summary};
use capture::pipeline;
use capture::privileges::{drop_privileges, User};
use capture::{
    Batch, BatchPacket, CaptureStats, KernelStats, LiveStats, PipelineConfig, RingConfig,
    TpacketRing,
};
use filter::{Action, EngineKind, Filter, PacketKey};
use serde::Serialize;
use trace::{LinkType, Packet, PacketKind, TsResolution};

use crate::cli::{CaptureArgs, TimeFormat};
use crate::cmd_filter::load_rules;
use crate::cmd_profile::Writer as SummaryWriter;
use crate::error::{CliError, CliResult, EXIT_PROBLEMS};
use crate::sink::{Sink, SinkSummary};
use crate::{output, signals};

const NS: u64 = 1_000_000_000;

#[derive(Serialize)]
struct Report<'a> {
    interface: &'a str,
    /// Rings in the fanout group (1 without --fanout).
    rings: usize,
    /// Packets the kernel passed to the sockets (PACKET_STATISTICS tp_packets).
    kernel_packets: u64,
    /// Dropped by the kernel: a ring was full (tp_drops).
    kernel_drops: u64,
    /// Times a ring froze (tp_freeze_q_cnt).
    kernel_freezes: u64,
    /// Taken from the rings.
    received: u64,
    /// Dropped by kansoku: a writer's queue was full.
    dropped_kansoku: u64,
    /// Taken from the ring after -c was reached, not written.
    skipped: u64,
    /// Rejected by the --rules filter (non-IP packets included: no rule matches them).
    rejected: u64,
    /// Kept: written to the trace, printed, or (with --profile and no -w) profiled.
    written: u64,
    /// Packets counted by the --profile profiler (every kept packet).
    #[serde(skip_serializing_if = "Option::is_none")]
    profiled: Option<u64>,
    /// Summary files written by --profile.
    #[serde(skip_serializing_if = "Option::is_none")]
    profile_summaries: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<&'a SinkSummary>,
}

/// The aguri profiler of `--profile` and the directory its summaries go to.
struct Profiling {
    profiler: aguri::Profiler,
    writer: SummaryWriter,
    packets: u64,
    summaries: u64,
}

impl Profiling {
    /// The profiler `--profile-interval` and `--profile-threshold` describe.
    fn profiler(args: &CaptureArgs) -> CliResult<aguri::Profiler> {
        if args.profile_interval == 0 {
            return Err(CliError::input(
                "--profile-interval must be at least 1 second",
            ));
        }
        let interval_ns = args.profile_interval.checked_mul(NS).ok_or_else(|| {
            CliError::input(format!(
                "--profile-interval {} is too long",
                args.profile_interval
            ))
        })?;
        ProfilerConfig {
            interval_ns,
            threshold: args.profile_threshold,
            ..ProfilerConfig::default()
        }
        .build()
        .map_err(|e| CliError::input(format!("--profile: {e}")))
    }

    /// Creates the summary directory `dir`: after `-Z`, so that it belongs
    /// to the user who writes the summaries into it.
    fn new(profiler: aguri::Profiler, dir: &Path) -> CliResult<Profiling> {
        // A trailing separator makes the writer treat DIR as a directory
        // (one file per interval), exactly as `kansoku profile -w DIR/`.
        let writer = SummaryWriter::new(Some(&dir.join("")), false)?;
        Ok(Profiling {
            profiler,
            writer,
            packets: 0,
            summaries: 0,
        })
    }

    fn add(&mut self, link: LinkType, p: &BatchPacket<'_>) -> CliResult<()> {
        self.packets += 1;
        match self.profiler.add_frame(link, p.ts_ns, p.orig_len, p.data) {
            Some(s) => self.write(&s),
            None => Ok(()),
        }
    }

    /// Closes the current interval if `now_ns` lies past it.
    fn advance(&mut self, now_ns: u64) -> CliResult<()> {
        match self.profiler.advance(now_ns) {
            Some(s) => self.write(&s),
            None => Ok(()),
        }
    }

    fn write(&mut self, s: &Summary) -> CliResult<()> {
        self.summaries += 1;
        self.writer.write(s)
    }

    /// Writes the last, partial interval; returns (packets, summaries).
    fn finish(mut self) -> CliResult<(u64, u64)> {
        if let Some(s) = self.profiler.finish() {
            self.write(&s)?;
        }
        self.writer.finish()?;
        Ok((self.packets, self.summaries))
    }
}

/// One ring and what consumes its packets.
struct Lane {
    ring: TpacketRing,
    sink: Option<Sink>,
    filter: Option<Filter>,
    profile: Option<Profiling>,
}

/// A lane's counters, read by the progress line while the lane runs.
#[derive(Default)]
struct Counters {
    live: LiveStats,
    written: AtomicU64,
    rejected: AtomicU64,
}

/// `FILE.i`: the output of ring `i` under --fanout.
fn lane_path(path: &Path, i: usize) -> PathBuf {
    let mut s = OsString::from(path.as_os_str());
    s.push(format!(".{i}"));
    PathBuf::from(s)
}

/// Reads and parses a rule file; errors read `FILE:LINE:COLUMN: what`.
pub fn run(args: &CaptureArgs) -> CliResult<i32> {
    let n = usize::from(args.fanout);
    if n == 0 {
        return Err(CliError::input("--fanout must be at least 1"));
    }
    if n > 1 {
        // One writer per ring: each needs a file of its own, and a count or
        // a profile would need the rings to agree on an order they lack.
        if args
            .out
            .write
            .as_deref()
            .is_none_or(|p| p.as_os_str() == "-")
        {
            return Err(CliError::input(
                "--fanout needs -w FILE (each ring writes FILE.0, FILE.1, ...)",
            ));
        }
        if args.count.is_some() || args.profile.is_some() {
            return Err(CliError::input(
                "--fanout does not work with -c or --profile (stop with --duration or Ctrl-C)",
            ));
        }
    }
    let filter = args
        .rules
        .as_deref()
        .map(load_rules)
        .transpose()?
        .map(|r| Filter::new(r, EngineKind::Fast));
    // Everything that can be checked is checked before the rings open.
    let profiler = args
        .profile
        .is_some()
        .then(|| Profiling::profiler(args))
        .transpose()?;
    let user = args
        .user
        .as_deref()
        .map(User::lookup)
        .transpose()
        .map_err(|e| CliError::input(e.to_string()))?;
    let ring_cfg = RingConfig {
        interface: args.interface.clone(),
        snaplen: args.snaplen,
        ring_bytes: args.buffer_mib.saturating_mul(1 << 20),
        block_size: match args.ring_block_kib {
            Some(kib) => kib.saturating_mul(1024),
            None => RingConfig::auto_block_size(args.buffer_mib.saturating_mul(1 << 20)),
        },
        // The group id only has to be unique among this host's capturers.
        fanout_group: (n > 1).then(|| (std::process::id() & 0xffff) as u16),
        ..RingConfig::default()
    };
    let mut lanes = Vec::with_capacity(n);
    // Output files are created at the first packet, after -Z, as tcpdump
    // creates its savefiles after dropping privileges: every file of a run,
    // rotated ones included, then belongs to the same user.
    for i in 0..n {
        let sink = match args.out.write.as_deref() {
            Some(p) if n > 1 => Some(Sink::new(&args.out, &lane_path(p, i))?),
            Some(p) => Some(Sink::new(&args.out, p)?),
            None => None,
        };
        let ring =
            TpacketRing::open(&ring_cfg).map_err(|e| CliError::input(format!("capture: {e}")))?;
        lanes.push(Lane {
            ring,
            sink,
            filter: filter.clone(),
            profile: None,
        });
    }
    if let Some(user) = &user {
        drop_privileges(user).map_err(|e| CliError::input(e.to_string()))?;
        if let Some(p) = args.out.write.as_deref() {
            check_can_create(p, user)?;
        }
    }
    if let (Some(p), Some(dir)) = (profiler, args.profile.as_deref()) {
        lanes[0].profile = Some(Profiling::new(p, dir)?);
    }
    let link_type = lanes[0].ring.link_type();
    // As tcpdump: from here on, every packet on the interface is captured.
    eprintln!(
        "kansoku: listening on {}, link-type {link_type}, snapshot length {} bytes, ring {} MiB{}",
        args.interface,
        args.snaplen,
        lanes[0].ring.ring_bytes() >> 20,
        if n > 1 {
            format!(", fanout over {n} rings")
        } else {
            String::new()
        }
    );
    let cfg = PipelineConfig {
        count: args.count,
        duration: args.duration.map(Duration::from_secs_f64),
        queue_bytes: args.queue_mib.saturating_mul(1 << 20),
        // The profiler closes its intervals on time even when traffic stops.
        heartbeat: args.profile.is_some().then_some(Duration::from_secs(1)),
        ..PipelineConfig::default()
    };
    // Set by Ctrl-C, or when any ring stops, so that all stop together.
    let stop = AtomicBool::new(false);
    let done = AtomicBool::new(false);
    let print = args.out.write.is_none() && args.profile.is_none();
    let counters: Vec<Counters> = (0..n).map(|_| Counters::default()).collect();
    let results: Vec<(CaptureStats, io::Result<()>)> = std::thread::scope(|s| {
        let watch = s.spawn(|| watch(&counters, &stop, &done));
        let handles: Vec<_> = lanes
            .iter_mut()
            .zip(&counters)
            .map(|(lane, c)| {
                let (cfg, stop) = (&cfg, &stop);
                s.spawn(move || {
                    let r = run_lane(lane, c, cfg, stop, link_type, print);
                    stop.store(true, Ordering::Relaxed);
                    r
                })
            })
            .collect();
        let results = handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    (
                        CaptureStats::default(),
                        Err(io::Error::other("a capture thread panicked")),
                    )
                })
            })
            .collect();
        done.store(true, Ordering::Relaxed);
        let _ = watch.join();
        results
    });
    // Close the files whatever happened: nothing written is lost.
    let mut summaries = Vec::new();
    let mut profiled = None;
    let mut written = 0;
    let mut rejected = 0;
    let mut close_error = None;
    for c in &counters {
        written += c.written.load(Ordering::Relaxed);
        rejected += c.rejected.load(Ordering::Relaxed);
    }
    for lane in lanes {
        if let Some(sink) = lane.sink {
            match sink.finish() {
                Ok(s) => summaries.push(s),
                Err(e) => close_error = close_error.or(Some(e)),
            }
        }
        if let Some(p) = lane.profile {
            match p.finish() {
                Ok(x) => profiled = Some(x),
                Err(e) => close_error = close_error.or(Some(e)),
            }
        }
    }
    let mut stats = CaptureStats::default();
    let mut first_error = None;
    for (s, r) in results {
        stats = add_stats(&stats, &s);
        if let Err(e) = r {
            first_error = first_error.or(Some(e));
        }
    }
    if let Some(e) = first_error {
        if e.kind() == io::ErrorKind::BrokenPipe {
            return Err(CliError::BrokenPipe);
        }
        return Err(CliError::input(format!(
            "capture on {}: {e}",
            args.interface
        )));
    }
    if let Some(e) = close_error {
        return Err(e);
    }
    let summary = merge_summaries(summaries);
    let report_data = Report {
        interface: &args.interface,
        rings: n,
        kernel_packets: stats.kernel.packets,
        kernel_drops: stats.kernel.drops,
        kernel_freezes: stats.kernel.freeze_count,
        received: stats.received,
        dropped_kansoku: stats.dropped_queue,
        skipped: stats.skipped,
        rejected,
        written: summary.as_ref().map_or(written, |x| x.packets),
        profiled: profiled.map(|p| p.0),
        profile_summaries: profiled.map(|p| p.1),
        output: summary.as_ref(),
    };
    report(args, &report_data)?;
    Ok(if stats.kernel.drops > 0 || stats.dropped_queue > 0 {
        EXIT_PROBLEMS
    } else {
        0
    })
}

/// After `-Z`: fails now, before capturing, if `user` cannot create the
/// output file `path` (its directory is not writable by `user`), rather than
/// at the first packet. Probes with a file of its own, removed at once.
fn check_can_create(path: &Path, user: &User) -> CliResult<()> {
    if path.as_os_str() == "-" {
        return Ok(());
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    // With -G the name may hold strftime fields, the directory too: it
    // exists only once the first file is named.
    if dir.to_string_lossy().contains('%') {
        return Ok(());
    }
    let probe = dir.join(format!(".kansoku-{}.probe", std::process::id()));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(CliError::file(
            dir,
            format!(
                "user {} (-Z) cannot create the output file here (expected a directory it can write): {e}",
                user.name
            ),
        )),
    }
}

/// Runs one ring's pipeline; its consumer filters, profiles and writes.
fn run_lane(
    lane: &mut Lane,
    counters: &Counters,
    cfg: &PipelineConfig,
    stop: &AtomicBool,
    link_type: LinkType,
    print: bool,
) -> (CaptureStats, io::Result<()>) {
    let Lane {
        ring,
        sink,
        filter,
        profile,
    } = lane;
    let Counters {
        live,
        written,
        rejected,
    } = counters;
    // `Stdout`, not its lock: the writer thread needs a `Send` handle.
    let mut out = BufWriter::with_capacity(64 * 1024, io::stdout());
    pipeline::run(ring, cfg, stop, live, |batch: &Batch| {
        let mut kept = 0u64;
        let mut rej = 0u64;
        for p in batch.iter() {
            if let Some(f) = filter.as_mut() {
                if !passes(f, link_type, &p) {
                    rej += 1;
                    continue;
                }
            }
            kept += 1;
            if let Some(pr) = profile.as_mut() {
                pr.add(link_type, &p).map_err(to_io)?;
            }
            if let Some(sink) = sink.as_mut() {
                sink.write_packet(link_type, p.ts_ns, p.orig_len, p.data)
                    .map_err(to_io)?;
            } else if print {
                let pkt = Packet {
                    interface: 0,
                    link_type,
                    ts: p.ts_ns,
                    tsresol: TsResolution::NANO,
                    orig_len: p.orig_len,
                    data: p.data,
                    options: &[],
                    kind: PacketKind::Pcap,
                };
                output::write_text(&mut out, &pkt, TimeFormat::Epoch)?;
            }
        }
        // A heartbeat: every packet before the watermark has been counted.
        if let (Some(pr), Some(w)) = (profile.as_mut(), batch.watermark_ns()) {
            pr.advance(w).map_err(to_io)?;
        }
        if print {
            out.flush()?;
        }
        written.fetch_add(kept, Ordering::Relaxed);
        rejected.fetch_add(rej, Ordering::Relaxed);
        Ok(())
    })
}

/// The S3 filter's verdict. A packet that is not IP matches no `ip filter`
/// rule, so the default rule rejects it.
#[inline]
fn passes(f: &mut Filter, link_type: LinkType, p: &BatchPacket<'_>) -> bool {
    match PacketKey::from_slice(&wire::slice(link_type, p.data)) {
        Some(key) => f.apply(&key, u64::from(p.orig_len)).action == Action::Pass,
        None => false,
    }
}

fn add_stats(a: &CaptureStats, b: &CaptureStats) -> CaptureStats {
    CaptureStats {
        kernel: KernelStats {
            packets: a.kernel.packets + b.kernel.packets,
            drops: a.kernel.drops + b.kernel.drops,
            freeze_count: a.kernel.freeze_count + b.kernel.freeze_count,
        },
        received: a.received + b.received,
        delivered: a.delivered + b.delivered,
        dropped_queue: a.dropped_queue + b.dropped_queue,
        skipped: a.skipped + b.skipped,
    }
}

/// One summary for all the rings' outputs.
fn merge_summaries(mut v: Vec<SinkSummary>) -> Option<SinkSummary> {
    let mut all = v.pop()?;
    for s in v.into_iter().rev() {
        let mut files = s.files;
        files.append(&mut all.files);
        all.files = files;
        all.packets += s.packets;
        all.bytes_in += s.bytes_in;
        all.bytes_out += s.bytes_out;
        all.blocks += s.blocks;
        all.raw_blocks += s.raw_blocks;
        all.dropped_records += s.dropped_records;
    }
    all.ratio = if all.bytes_in == 0 {
        1.0
    } else {
        all.bytes_out as f64 / all.bytes_in as f64
    };
    Some(all)
}

fn to_io(e: CliError) -> io::Error {
    match e {
        CliError::BrokenPipe => io::Error::from(io::ErrorKind::BrokenPipe),
        CliError::Message { message, .. } => io::Error::other(message),
    }
}

/// Until `done`: passes Ctrl-C on to the rings, and once a second on a
/// terminal prints what the capture has seen so far.
fn watch(lanes: &[Counters], stop: &AtomicBool, done: &AtomicBool) {
    let progress = io::stderr().is_terminal();
    let sum = |f: &dyn Fn(&Counters) -> &AtomicU64| -> u64 {
        lanes.iter().map(|l| f(l).load(Ordering::Relaxed)).sum()
    };
    let mut ticks = 0u32;
    while !done.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(10));
        if signals::stop_requested() {
            stop.store(true, Ordering::Relaxed);
        }
        ticks += 1;
        if !progress || !ticks.is_multiple_of(100) {
            continue;
        }
        eprint!(
            "\r{} received, {} dropped by the kernel, {} dropped by kansoku, {} rejected, {} written   ",
            sum(&|l| &l.live.received),
            sum(&|l| &l.live.kernel_drops),
            sum(&|l| &l.live.dropped_queue),
            sum(&|l| &l.rejected),
            sum(&|l| &l.written)
        );
    }
    if progress {
        eprint!("\r\x1b[K");
    }
}

fn report(args: &CaptureArgs, r: &Report<'_>) -> CliResult<()> {
    if args.json {
        // Packet lines own standard output when there is no -w.
        let text = serde_json::to_string(r).map_err(io::Error::from)?;
        if args
            .out
            .write
            .as_deref()
            .is_some_and(|p| p.as_os_str() != "-")
        {
            let mut o = io::stdout().lock();
            writeln!(o, "{text}")?;
        } else {
            eprintln!("{text}");
        }
        return Ok(());
    }
    eprintln!(
        "kansoku: {} packets received by the kernel on {}, {} dropped by the kernel ({} ring freezes), \
         {} taken from the ring, {} dropped by kansoku (writer queue full), {} rejected by the rules, {} written",
        r.kernel_packets,
        r.interface,
        r.kernel_drops,
        r.kernel_freezes,
        r.received,
        r.dropped_kansoku,
        r.rejected,
        r.written
    );
    if let Some(summary) = r.output {
        eprintln!("kansoku: {}", summary.describe());
    }
    if let (Some(p), Some(n)) = (r.profiled, r.profile_summaries) {
        eprintln!("kansoku: profiled {p} packets into {n} summaries");
    }
    Ok(())
}
