//! `kansoku synth`: write a synthetic trace.

use pipeline::{Chain, Control, Error, Report, Stages, SynthSource};
use trace::time;

use crate::args::SynthArgs;
use crate::output::report_summary;
use pipeline::progress::TerminalProgress;
use pipeline::signals;

/// 2026-01-01T00:00:00Z, the default time of the first packet.
const DEFAULT_START_NS: u64 = 1_767_225_600_000_000_000;

pub fn run(args: &SynthArgs) -> pipeline::Result<Report> {
    let Some(sink) = args.out.write_sink()? else {
        return Err(Error::usage(
            "synth needs -w FILE (or -w - for standard output)",
        ));
    };
    if !(args.rate > 0.0 && args.rate.is_finite()) {
        return Err(Error::usage(format!(
            "bad --rate {} (expected packets per second > 0)",
            args.rate
        )));
    }
    let start_ns = match &args.start {
        Some(t) => time::parse_time(t).map_err(Error::usage)?,
        None => DEFAULT_START_NS,
    };
    let interval_ns = (1e9 / args.rate).round().max(1.0) as u64;
    let cfg = args
        .pattern
        .config(args.count, start_ns, interval_ns)
        .map_err(Error::usage)?;
    let mut source = SynthSource::new(cfg)?;
    let progress = TerminalProgress::new(Some(args.count), true);
    let mut chain = Chain::new(Stages::default(), Some(sink));
    let ctl = Control {
        stop: signals::stop_flag(),
        progress: Some(&progress),
    };
    let mut report = pipeline::run(&mut source, &mut chain, ctl);
    progress.finish();
    if let Some(sink) = chain.passed {
        if let Err(e) = sink.finish().and_then(|s| report_summary(&s, args.json)) {
            report.failed(e);
        }
    }
    // Synthetic traffic has no file to be cut short of: a stop is its end.
    report.interrupted = None;
    Ok(report)
}
