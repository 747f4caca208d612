//! `kansoku delay`: the delay line itself is `webbench::cli::run_delay`;
//! here is `delay profile`, which builds an RTT profile from the
//! handshakes in a capture taken at a server.

use std::io::{self, Write};
use std::time::Duration;

use delay::handshake::{cdf_text, ServerFilter, Tracker};
use pipeline::{display_path, signals, Consumer, Control, Error, Flow, Report, TraceSource};
use trace::Record;

use crate::args::{DelayArgs, DelayProfileArgs, DelayTool};

pub fn run(args: &DelayArgs) -> pipeline::Result<Report> {
    match &args.tool {
        Some(DelayTool::Profile(a)) => profile_from_pcap(a),
        None => webbench::cli::run_delay(&args.run, signals::stop_flag()),
    }
}

/// Gives each packet of a trace to the handshake tracker.
struct Handshakes(Tracker);

impl Consumer<TraceSource> for Handshakes {
    fn consume(&mut self, rec: Record<'_>) -> pipeline::Result<Flow> {
        if let Record::Packet(p) = rec {
            self.0.frame(p.link_type, p.ts_nanos(), p.data);
        }
        Ok(Flow::Continue)
    }
}

fn profile_from_pcap(args: &DelayProfileArgs) -> pipeline::Result<Report> {
    let server = args
        .server
        .as_deref()
        .map(ServerFilter::parse)
        .transpose()
        .map_err(|e| Error::usage(format!("--server: {e}")))?
        .unwrap_or_default();
    let mut source = TraceSource::open(&args.from_pcap)?;
    let mut h = Handshakes(Tracker::new(server));
    let report = pipeline::run(&mut source, &mut h, Control::new(signals::stop_flag()));
    let rtts: Vec<Duration> = h.0.rtts().iter().map(|r| r.1).collect();
    let Some(text) = cdf_text(&rtts, &display_path(&args.from_pcap)) else {
        return Err(Error::input(format!(
            "{}: no TCP handshakes (a SYN-ACK, then the ACK that completes it) in {} TCP segments",
            display_path(&args.from_pcap),
            h.0.segments
        )));
    };
    let written = match &args.output {
        Some(path) => {
            std::fs::write(path, &text).map_err(|e| Error::output(display_path(path), &e))
        }
        None => io::stdout()
            .lock()
            .write_all(text.as_bytes())
            .map_err(|e| Error::output("standard output", &e)),
    };
    let mut report = report;
    if let Err(e) = written {
        report.failed(e);
    }
    let mut also = String::new();
    if h.0.ambiguous > 0 {
        also += &format!(
            ", {} left out: the SYN-ACK was sent more than once and the ACK has no timestamps to \
             say which copy it answers",
            h.0.ambiguous
        );
    }
    if h.0.dropped > 0 {
        also += &format!(", {} half-open ones given up for want of room", h.0.dropped);
    }
    eprintln!("kansoku: {} handshakes{also}", rtts.len());
    Ok(report)
}
