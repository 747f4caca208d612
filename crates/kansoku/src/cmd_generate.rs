//! `kansoku generate`: send synthetic or replayed traffic out of an
//! interface at an exact packet rate, bit rate, or the trace's recorded
//! timing (the pacing is `pipeline::sink::tx`).

use pipeline::sink::tx::{Pace, TxReport, TxSink};
use pipeline::{Chain, Control, Error, Report, Stages, SynthSource, TraceSource};
use serde::Serialize;
use synth::FrameSize;

use crate::args::GenerateArgs;
use crate::output::print_json;
use pipeline::cli::Selection;
use pipeline::signals;

/// Bytes of the Ethernet frame check sequence, which the device adds.
const FCS_LEN: usize = 4;

#[derive(Serialize)]
struct Json<'a> {
    #[serde(flatten)]
    sent: &'a TxReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    target_pps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    target_mbps: Option<f64>,
}

pub fn run(args: &GenerateArgs) -> pipeline::Result<Report> {
    let pace = match (args.pps, args.mbps, args.recorded_timing) {
        (_, _, true) => Pace::Recorded,
        (Some(p), _, _) if p > 0.0 && p.is_finite() => Pace::Pps(p),
        (_, Some(m), _) if m > 0.0 && m.is_finite() => Pace::Bytes(m * 1e6 / 8.0),
        (None, None, false) => Pace::TopSpeed,
        _ => return Err(Error::usage("--pps and --mbps must be positive numbers")),
    };
    let deadline = args.duration;
    // Open everything before the sender starts its clock.
    let expression = match args.select.for_trace(args.replay.as_deref())? {
        Selection::Listing(l) => return crate::output::print_text(&l),
        Selection::Packets(e) => e,
    };
    if args.replay.is_none() && (expression.is_some() || args.select.dump > 0) {
        return Err(Error::usage(
            "a filter expression selects the packets of a trace to replay: give -r TRACE",
        ));
    }
    let replay = match args.replay.as_deref() {
        Some(p) => Some(TraceSource::open(p)?.with_expression(expression)),
        None => None,
    };
    let synth = match replay {
        Some(_) => None,
        None => {
            if args.count.is_none() && args.duration.is_none() {
                return Err(Error::usage(
                    "generate needs -c COUNT or --duration SECONDS (or -r TRACE)",
                ));
            }
            let mut cfg = args
                .pattern
                .config(args.count.unwrap_or(u64::MAX), 0, 1)
                .map_err(Error::usage)?;
            // On a link, frame sizes count the 4-byte FCS (RFC 2544's 64 to
            // 1518 bytes); the frames handed to the device are 4 bytes shorter.
            cfg.size = match cfg.size {
                FrameSize::Fixed(n) => FrameSize::Fixed(n - FCS_LEN),
                FrameSize::Uniform(a, b) => FrameSize::Uniform(a - FCS_LEN, b - FCS_LEN),
            };
            Some(SynthSource::new(cfg)?)
        }
    };
    let log = args.out.write_sink()?;
    let stop = signals::stop_flag();
    let tx = TxSink::open(&args.interface, pace, deadline, stop, log)?;
    let mut chain = Chain::new(Stages::default(), Some(tx));
    chain.limit = args.count;
    let ctl = Control::new(stop);
    let mut report = match (replay, synth) {
        (Some(mut r), _) => pipeline::run(&mut r, &mut chain, ctl),
        (None, Some(mut s)) => {
            let mut r = pipeline::run(&mut s, &mut chain, ctl);
            // A pattern has no end of its own: a stop ends it normally.
            r.interrupted = None;
            r
        }
        (None, None) => Report::default(),
    };
    let Some(tx) = chain.passed else {
        return Ok(report);
    };
    let sent = match tx.finish() {
        Ok(s) => s,
        Err(e) => {
            report.failed(e);
            return Ok(report);
        }
    };
    if args.json {
        print_json(&Json {
            sent: &sent,
            target_pps: args.pps,
            target_mbps: args.mbps,
        })?;
    } else {
        eprintln!(
            "kansoku: sent {} packets ({} bytes) on {} in {:.3} s: {:.0} packets/s, {:.1} Mbit/s; device queue full {} times",
            sent.packets, sent.bytes, sent.interface, sent.seconds, sent.pps, sent.mbps, sent.queue_full_retries
        );
    }
    Ok(report)
}
