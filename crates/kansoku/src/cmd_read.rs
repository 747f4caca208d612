//! `kansoku read`: print packets, or convert/recompress a trace with -w.

use std::io::{self, IsTerminal};

use pipeline::{Chain, Control, Report, Stages, TraceSource, Window};
use trace::time::parse_time;

use crate::args::ReadArgs;
use pipeline::sink::lines::Printer;

use crate::output::report_summary;
use pipeline::cli::Selection;
use pipeline::progress::TerminalProgress;
use pipeline::signals;
use pipeline::sink::PrintOrTrace;
use pipeline::source::dir::run_dir;

pub fn run(args: &ReadArgs) -> pipeline::Result<Report> {
    let expression = match args.select.for_trace(Some(&args.read))? {
        Selection::Listing(l) => return crate::output::print_text(&l),
        Selection::Packets(e) => e,
    };
    let time = |t: &Option<String>| t.as_deref().map(parse_time).transpose();
    let window = Window {
        since: time(&args.since).map_err(pipeline::Error::usage)?,
        until: time(&args.until).map_err(pipeline::Error::usage)?,
    };
    let out = match args.out.write_sink()? {
        Some(t) => PrintOrTrace::Trace(t),
        None => PrintOrTrace::Print(Printer::new(args.json, args.time.into())),
    };
    if args.read.is_dir() {
        // A directory of traces, read as one in time order.
        let mut chain = Chain::new(Stages::default(), Some(out));
        chain.limit = args.count;
        let r = run_dir(
            &args.read,
            window,
            expression.as_ref(),
            &mut chain,
            signals::stop_flag(),
        );
        return close(chain.passed, r?, args.json);
    }
    let mut source = TraceSource::open_selected(&args.read, window, expression)?;
    // From a pipe: a quiet input's partial block reaches the file (or its
    // lines the terminal) within the idle time.
    source.idle_every(args.out.idle_flush());
    // Keep the terminal for the packet lines when they go to it.
    let printing = matches!(out, PrintOrTrace::Print(_));
    let progress = TerminalProgress::new(source.size(), !printing || !io::stdout().is_terminal());
    let mut chain = Chain::new(Stages::default(), Some(out));
    chain.limit = args.count;
    let ctl = Control {
        stop: signals::stop_flag(),
        progress: Some(&progress),
    };
    let report = pipeline::run(&mut source, &mut chain, ctl);
    progress.finish();
    let report = close(chain.passed, report, args.json)?;
    let name = pipeline::display_path(&args.read);
    match source.window_stats() {
        Some(w) if w.indexed && source.windowed() => eprintln!(
            "kansoku: {name}: index: decompressed {} of {} blocks for the time window{}",
            w.chunks_decoded,
            w.chunks_total,
            if w.tail_bytes > 0 {
                format!(", and the {} bytes past its last block", w.tail_bytes)
            } else {
                String::new()
            }
        ),
        // An index that did not fit is a warning in the report.
        Some(w) if source.windowed() && w.index_problem.is_none() => {
            eprintln!("kansoku: {name}: no seek index; read the whole trace for the time window")
        }
        _ => {}
    }
    Ok(report)
}

/// Closes the output before anything is reported: nothing written is lost.
fn close(out: Option<PrintOrTrace>, mut report: Report, json: bool) -> pipeline::Result<Report> {
    if let Some(out) = out {
        let closed = out
            .close()
            .and_then(|s| s.map_or(Ok(()), |s| report_summary(&s, json)));
        if let Err(e) = closed {
            report.failed(e);
        }
    }
    Ok(report)
}
