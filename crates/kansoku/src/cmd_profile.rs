//! `kansoku profile`: aguri summaries of a trace (MAWI WG 2001, chapter 2), and
//! re-aggregation of summaries into longer periods. The profiler is the
//! pipeline's profile stage; its summaries go to standard output, one file,
//! a directory (one file per interval), or an archive (5 minutes, hours, days).

use aguri::{Metric, ProfilerConfig};
use pipeline::stage::profile::interval_ns;
use pipeline::{
    read_summaries, Archive, Chain, Control, Discard, Error, ProfileStage, Report, SplitSource,
    Stages, SummaryFormat, SummarySink, SummaryWriter, TraceSource, Window,
};

use crate::args::{ProfileArgs, SummaryFormatArg};
use pipeline::cli::Selection;
use pipeline::progress::TerminalProgress;
use pipeline::signals;
use pipeline::source::dir::run_dir;

/// Where `profile -r` reads its packets from.
#[allow(clippy::large_enum_variant)] // one, for the whole run
enum Input {
    Split(SplitSource),
    Plain(TraceSource),
    /// A directory of traces, in time order.
    Dir(Option<pipeline::Expression>),
}

pub fn run(args: &ProfileArgs) -> pipeline::Result<Report> {
    let expression = match args.select.for_trace(args.read.as_deref())? {
        Selection::Listing(l) => return crate::output::print_text(&l),
        Selection::Packets(e) => e,
    };
    if !args.merge.is_empty() && expression.is_some() {
        return Err(Error::usage(
            "a filter expression selects packets; --merge reads summaries",
        ));
    }
    let metric = match (args.bytes, args.packets, args.metric) {
        (true, _, _) | (_, _, Metric::Bytes) => Metric::Bytes,
        (_, true, _) | (_, _, Metric::Packets) => Metric::Packets,
        (_, _, Metric::Either) => Metric::Either,
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
        table_seed: args
            .read
            .as_deref()
            .and_then(pipeline::stage::profile::file_seed),
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
        let (f, s) = pipeline::Fleet::start(url, &args.store_opts.fleet(), sink)?;
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
    // indexed) is read on two threads, the rest on one; with a filter
    // expression, on one, which runs it over every packet.
    let split = match (&expression, path.is_dir()) {
        (None, false) => SplitSource::open(path),
        _ => None,
    };
    let mut input = match split {
        Some(s) => Input::Split(s),
        None if path.is_dir() => Input::Dir(expression),
        None => Input::Plain(TraceSource::open_selected(
            path,
            Default::default(),
            expression,
        )?),
    };
    let cfg = ProfilerConfig {
        tree_thread: pipeline::stage::profile::tree_thread(
            matches!(input, Input::Split(_)),
            cfg.pairs,
        ),
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
        Input::Dir(_) => None,
    };
    let progress = TerminalProgress::new(size, true).with_store(fleet.as_ref().map(|f| f.stats()));
    let ctl = Control {
        stop: signals::stop_flag(),
        progress: Some(&progress),
    };
    let mut report = match &mut input {
        Input::Split(s) => pipeline::run(s, &mut chain, ctl),
        Input::Plain(s) => pipeline::run(s, &mut chain, ctl),
        Input::Dir(e) => run_dir(path, Window::default(), e.as_ref(), &mut chain, ctl.stop)?,
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
