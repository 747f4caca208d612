//! `kansoku capture`: live capture from TPACKET_V3 rings into the trace
//! store (or packet lines), with drop accounting that never hides a loss.
//!
//! Each ring has a lane (`pipeline::run_lanes`): the ring thread, and a
//! consumer thread running the pipeline's chain: the filter
//! (`--rules`), the aguri profiler on the kept packets (`--profile`), and
//! the trace writer or the packet lines. With `--fanout N` there are N rings
//! in one PACKET_FANOUT group, so N cores share the work, and one output
//! file per ring. The accounting is `pipeline::CaptureReport`'s.

use std::time::Duration;

use capture::privileges::{check_can_create, drop_privileges, User};
use capture::{RingConfig, TpacketRing};
use filter::{EngineKind, Filter};
use pipeline::sink::lines::{Printer, TimeFormat};
use pipeline::{
    load_rules, run_lanes, CaptureReport, CaptureStats, Chain, Error, Lane, PipelineConfig,
    ProfileStage, Reloader, Report, Stages, SummarySink, SummaryWriter,
};

use crate::args::CaptureArgs;
use pipeline::cli::LiveSelection;
use pipeline::signals;
use pipeline::sink::PrintOrTrace;

pub fn run(args: &CaptureArgs) -> pipeline::Result<Report> {
    let n = usize::from(args.fanout);
    // The expression's program runs in the kernel on every ring.
    let (expression, kernel_filter) =
        match args.select.for_interface(&args.interface, args.snaplen)? {
            LiveSelection::Listing(l) => return crate::output::print_text(&l),
            LiveSelection::Packets {
                expression,
                program,
            } => (expression, program),
        };
    let expression_text = expression.map(|e| e.text().to_string());
    args.check(n)?;
    // Everything that can be checked is checked before the rings open.
    let filter = args
        .rules
        .as_deref()
        .map(load_rules)
        .transpose()?
        .map(|r| Filter::new(r, EngineKind::Fast));
    // SIGHUP re-reads the rule file; each ring takes the new rules between
    // two batches.
    // (The handler is in place before the capture says it is listening.)
    let reload_request = args.rules.is_some().then(signals::reload_flag);
    let (mut reloader, lane_rules) = match args.rules.as_deref() {
        Some(path) => {
            let (r, sides) = Reloader::new(path, EngineKind::Fast, n);
            (Some(r), sides)
        }
        None => (None, Vec::new()),
    };
    // One side a ring; none at all without --rules.
    let mut lane_rules = lane_rules.into_iter();
    let profile = args
        .profile
        .is_some()
        .then(|| args.profiler_config())
        .transpose()?;
    let user = args
        .user
        .as_deref()
        .map(User::lookup)
        .transpose()
        .map_err(|e| Error::usage(e.to_string()))?;
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
        filter: kernel_filter,
        ..RingConfig::default()
    };
    let mut lanes = Vec::with_capacity(n);
    // Output files are created at the first packet, after -Z, as tcpdump
    // creates its savefiles after dropping privileges: every file of a run,
    // rotated ones included, then belongs to the same user.
    for i in 0..n {
        let out = match args.out.write.as_deref() {
            Some(p) if n > 1 => {
                PrintOrTrace::Trace(args.out.live_sink(&pipeline::cli::lane_path(p, i))?)
            }
            Some(p) => PrintOrTrace::Trace(args.out.live_sink(p)?),
            None => PrintOrTrace::Print(Printer::new(false, TimeFormat::Epoch)),
        };
        let print = args.profile.is_none() || args.out.write.is_some();
        let ring =
            TpacketRing::open(&ring_cfg).map_err(|e| Error::usage(format!("capture: {e}")))?;
        let stages = Stages {
            filter: filter.clone(),
            profile: None,
            reload: lane_rules.next(),
        };
        let chain = Chain::new(stages, print.then_some(out));
        lanes.push(Lane { ring, chain });
    }
    if let Some(user) = &user {
        drop_privileges(user).map_err(|e| Error::usage(e.to_string()))?;
        if let Some(p) = args.out.write.as_deref() {
            check_can_create(p).map_err(|e| {
                Error::usage(format!(
                    "user {} (-Z) cannot create the output file here (expected a directory it can write): {e}",
                    user.name
                ))
            })?;
        }
    }
    let mut fleet = None;
    if let (Some(cfg), Some(dir)) = (profile, args.profile.as_deref()) {
        // The summary directory is created after -Z, so that it belongs to
        // the user who writes the summaries into it.
        let mut sink =
            SummarySink::Plain(SummaryWriter::dir(dir, pipeline::SummaryFormat::Kansoku)?);
        if let Some(url) = &args.store {
            let (f, s) = pipeline::Fleet::start(url, &args.store_opts.fleet(), sink)?;
            sink = s;
            fleet = Some(f);
        }
        lanes[0].chain.stages.profile = Some(ProfileStage::new(cfg, sink)?);
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
        duration: args.duration,
        queue_bytes: args.queue_mib.saturating_mul(1 << 20),
        // The profiler closes its intervals on time even when traffic stops.
        heartbeat: args.profile.is_some().then_some(Duration::from_secs(1)),
        idle_flush: args.out.idle_flush(),
        // The writer reads each block where the kernel wrote it; a rescuer
        // copies blocks into the queue only while the writer is stalled.
        direct: true,
        ..PipelineConfig::default()
    };
    let reload = reloader.as_mut().zip(reload_request);
    let store_stats = fleet.as_ref().map(|f| f.stats());
    let note = move || {
        store_stats
            .as_deref()
            .map(pipeline::progress::store_note)
            .unwrap_or_default()
    };
    let (stats, mut report) = run_lanes(
        &mut lanes,
        &cfg,
        signals::stop_flag(),
        signals::abort_flag(),
        reload,
        &note,
    );
    finish(args, lanes, stats, fleet, &mut report, expression_text)?;
    Ok(report)
}

/// Closes every output (whatever happened: nothing written is lost) and
/// prints the capture's accounting.
fn finish(
    args: &CaptureArgs,
    lanes: Vec<Lane<TpacketRing, PrintOrTrace>>,
    stats: Vec<CaptureStats>,
    fleet: Option<pipeline::Fleet>,
    report: &mut Report,
    expression: Option<String>,
) -> pipeline::Result<()> {
    let mut r =
        CaptureReport::close_lanes(&args.interface, lanes, &stats, report, PrintOrTrace::close);
    r.expression = expression;
    // The last summaries are in the spool once the lanes are closed.
    r.store = fleet.map(pipeline::Fleet::finish);
    if let Some(c) = &r.store {
        pipeline::sink::fleet::not_spooled(c, report);
    }
    if let Some(c) = r.store.as_ref().filter(|c| c.waiting > 0 && !args.json) {
        eprintln!(
            "kansoku: {} summaries wait in the spool {}; a later run with --store sends them",
            c.waiting, c.spool
        );
    }
    if signals::abort_flag().load(std::sync::atomic::Ordering::Relaxed) {
        eprintln!(
            "kansoku: aborted: the packets still queued were not written (counted as dropped by kansoku)"
        );
    }
    if args.json {
        // Packet lines own standard output when there is no -w.
        let to_stdout = args
            .out
            .write
            .as_deref()
            .is_some_and(|p| p.as_os_str() != "-");
        if to_stdout {
            return crate::output::print_json(&r);
        }
        eprintln!(
            "{}",
            serde_json::to_string(&r).map_err(|e| Error::output("standard error", &e.into()))?
        );
        return Ok(());
    }
    eprintln!("kansoku: {}", r.describe());
    if let Some(summary) = &r.output {
        eprintln!("kansoku: {}", summary.describe());
    }
    for g in &r.rule_sets {
        eprintln!("kansoku: {}", g.describe());
    }
    if let (Some(p), Some(n)) = (r.profiled, r.profile_summaries) {
        eprintln!("kansoku: profiled {p} packets into {n} summaries");
    }
    Ok(())
}
