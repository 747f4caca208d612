//! `kansoku stats`: what is in a trace, and how well it is stored.

use std::io::{self, Write};

use pipeline::{Census, Control, Error, Report, TraceSource};
use trace::time;

use crate::args::StatsArgs;
use pipeline::progress::TerminalProgress;
use pipeline::signals;

pub fn run(args: &StatsArgs) -> pipeline::Result<Report> {
    let mut report = Report::default();
    let mut all = Vec::new();
    let expression = args.select.expression()?;
    // A directory's traces, each apart, in time order.
    let files = pipeline::source::dir::expand(&args.files, &mut report.warnings)?;
    for path in &files {
        let mut source = TraceSource::open_selected(path, Default::default(), expression.clone())?;
        let progress = TerminalProgress::new(source.size(), true);
        let mut census = Census::default();
        let ctl = Control {
            stop: signals::stop_flag(),
            progress: Some(&progress),
        };
        let r = pipeline::run(&mut source, &mut census, ctl);
        progress.finish();
        let mut s = census.finish(&source, path, time::format_rfc3339)?;
        if r.interrupted.is_some() {
            s.warning = Some("interrupted; the figures cover the part read".into());
        }
        if let Some(t) = &r.truncation {
            s.warning = Some(t.message.clone());
        }
        let stop = r.read_error.is_some() || r.interrupted.is_some();
        report.absorb(r);
        // The figures of what was read are shown, also of a file whose
        // reading was stopped; the files after it are not read.
        if !args.json {
            write!(io::stdout().lock(), "{s}").map_err(Error::stdout)?;
        }
        all.push(s);
        if stop {
            break;
        }
    }
    if args.json {
        let mut o = io::stdout().lock();
        if all.len() == 1 {
            serde_json::to_writer_pretty(&mut o, &all[0]).map_err(|e| Error::stdout(e.into()))?;
        } else {
            serde_json::to_writer_pretty(&mut o, &all).map_err(|e| Error::stdout(e.into()))?;
        }
        writeln!(o).map_err(Error::stdout)?;
    }
    Ok(report)
}
