//! `kansoku profile`: aguri summaries of a trace (MAWI WG 2001, chapter 2), and
//! re-aggregation of summaries into longer periods. The profiler is the
//! pipeline's profile stage; its summaries go to standard output, one file,
//! a directory (one file per interval), or an archive (5 minutes, hours, days).

use aguri::{Metric, ProfilerConfig};
use pipeline::stage::profile::interval_ns;
use pipeline::{
    read_summaries, Archive, Chain, Control, Discard, Error, ProfileStage, Report, SplitSource,
    Stages, SummaryFormat, SummarySink, SummaryWriter, TraceSource,
};

use crate::fleet;

use crate::args::{MetricArg, ProfileArgs, SummaryFormatArg};
use crate::progress::Progress;
use crate::signals;

/// The flow table's seed for a trace file: a hash of its length and its
/// first 64 KiB, so that the same file gives the same summaries on every
/// run (see [`ProfilerConfig::table_seed`]); `None` (a random seed) for
/// standard input, a pipe or device, or a file that cannot be read
/// (opening it says why).
fn file_seed(path: &std::path::Path) -> Option<u64> {
    use std::hash::Hasher;
    use std::io::Read;
    if path.as_os_str() == "-" {
        return None;
    }
    // Only a regular file: a pipe's first bytes, read here, would be
    // lost to the profile.
    let meta = std::fs::metadata(path).ok().filter(|m| m.is_file())?;
    let len = meta.len();
    let f = std::fs::File::open(path).ok()?;
    let mut head = Vec::with_capacity(64 << 10);
    f.take(64 << 10).read_to_end(&mut head).ok()?;
    // SipHash with its fixed keys: the same on every run.
    let mut h = std::hash::DefaultHasher::new();
    h.write_u64(len);
    h.write(&head);
    Some(h.finish())
}

/// Whether `profile -r` counts on a thread of its own
/// ([`ProfilerConfig::tree_thread`]), given whether the file is read on two
/// threads (`split`) and the 2-D view's size.
///
/// A split read keeps both CPUs busy reading already, and a third busy
/// thread did worse than counting on the reading thread: on this kind of
/// virtual machine the host's scheduler packs a woken thread onto the CPU
/// of the thread that woke it, and `perf sched` of a split read with the
/// counting thread showed a thread waiting to run while the other CPU sat
/// idle for 19-21 ms of a 150 ms run. Counting on the reading thread
/// (identical summaries; the same build with and without the counting
/// thread): indexed traces 0.134 against 0.147 s (active
/// flows) and 0.117 against 0.126 (new flows), the same without an index
/// (0.129 against 0.132), 0.150 against 0.160 at `-i 10`. The 2-D view
/// doubles what is counted for each flow, and there the counting thread
/// still pays: 0.223 against 0.228 s, 0.482 against 0.536 with new flows
/// (bench/profile-throughput.md).
fn tree_thread(split: bool, pairs: usize) -> bool {
    !split || pairs > 0
}

/// Where `profile -r` reads its packets from.
#[allow(clippy::large_enum_variant)] // one, for the whole run
enum Input {
    Split(SplitSource),
    Plain(TraceSource),
}

pub fn run(args: &ProfileArgs) -> pipeline::Result<Report> {
    let metric = match (args.bytes, args.packets, args.metric) {
        (true, _, _) | (_, _, MetricArg::Bytes) => Metric::Bytes,
        (_, true, _) | (_, _, MetricArg::Packets) => Metric::Packets,
        (_, _, MetricArg::Either) => Metric::Either,
    };
    let interval_s = match (args.interval, &args.archive) {
        (Some(i), _) => i,
        (None, Some(_)) => 300,
        (None, None) => 0,
    };
    let interval_ns = match interval_s {
        0 if args.interval.is_none() => 0,
        s => interval_ns(s, "-i")?,
    };
    let cfg = ProfilerConfig {
        interval_ns,
        budget: args.budget,
        exact_keys: args.exact_keys,
        threshold: args.threshold,
        metric,
        flow_slots: args.flow_slots,
        pairs: if args.two_d || args.format == SummaryFormatArg::Aguri3 {
            aguri::DEFAULT_PAIRS
        } else {
            0
        },
        coarsen: args.coarsen,
        tree_thread: true,
        table_seed: args.read.as_deref().and_then(file_seed),
    };
    let format = match (args.json, args.format) {
        (true, _) => SummaryFormat::Json,
        (_, SummaryFormatArg::Kansoku) => SummaryFormat::Kansoku,
        (_, SummaryFormatArg::Aguri2) => SummaryFormat::Aguri2,
        (_, SummaryFormatArg::Aguri3) => SummaryFormat::Aguri3,
    };
    cfg.validate().map_err(|e| Error::usage(e.to_string()))?;
    let mut sink = match &args.archive {
        Some(dir) => SummarySink::Archive(Box::new(Archive::new(
            dir,
            interval_s,
            format,
            args.budget,
            metric,
            args.threshold,
        )?)),
        None => SummarySink::Plain(SummaryWriter::new(args.write.as_deref(), format)?),
    };
    // The fleet store: every summary also to the spool.
    let mut fleet = None;
    if let Some(url) = &args.store {
        let (f, s) = fleet::Fleet::start(url, &args.store_opts, sink)?;
        sink = s;
        fleet = Some(f);
    }
    if !args.merge.is_empty() {
        let mut merger = aguri::Merger::new(interval_ns, args.budget, metric, args.threshold)
            .coarsen(args.coarsen);
        let merged = if interval_ns == 0 {
            // One period: the order does not matter, so the files stream
            // through the merger and a year of them is never held at once.
            let mut out = Vec::new();
            pipeline::for_each_summary(&args.merge, |v| {
                for s in &v {
                    out.extend(merger.add(s).map_err(|e| Error::input(e.to_string()))?);
                }
                Ok(())
            })?;
            out.extend(merger.finish());
            out
        } else {
            let mut summaries = read_summaries(&args.merge)?;
            aguri::merge_with(&mut summaries, merger).map_err(|e| Error::input(e.to_string()))?
        };
        let mut report = Report::default();
        for s in &merged {
            if let Err(e) = sink.add(s) {
                report.failed(e);
                break;
            }
        }
        if let Err(e) = sink.finish() {
            report.failed(e);
        }
        return Ok(report);
    }
    let Some(path) = args.read.as_deref() else {
        return Err(Error::usage(
            "give a trace with -r or summaries with --merge",
        ));
    };
    // An uncompressed pcap file (indexed or not) or pcapng file (not
    // indexed) is read on two threads, the rest on one.
    let mut input = match SplitSource::open(path) {
        Some(s) => Input::Split(s),
        None => Input::Plain(TraceSource::open(path)?),
    };
    let cfg = ProfilerConfig {
        tree_thread: tree_thread(matches!(input, Input::Split(_)), cfg.pairs),
        ..cfg
    };
    let stages = Stages {
        filter: None,
        profile: Some(ProfileStage::new(cfg, sink)?),
        reload: None,
    };
    let mut chain: Chain<Discard> = Chain::new(stages, None);
    let size = match &input {
        Input::Split(s) => s.size(),
        Input::Plain(s) => s.size(),
    };
    let progress = Progress::new(size, true).with_store(fleet.as_ref().map(|f| f.stats()));
    let ctl = Control {
        stop: signals::stop_flag(),
        progress: Some(&progress),
    };
    let mut report = match &mut input {
        Input::Split(s) => pipeline::run(s, &mut chain, ctl),
        Input::Plain(s) => pipeline::run(s, &mut chain, ctl),
    };
    progress.finish();
    // What was read is summarized and written before anything is reported.
    if let Some(p) = chain.stages.profile {
        if let Err(e) = p.finish() {
            report.failed(e);
        }
    }
    if let Some(f) = fleet {
        f.finish_and_say(&mut report);
    }
    Ok(report)
}
