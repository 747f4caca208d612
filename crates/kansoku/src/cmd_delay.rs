//! `kansoku delay`: the command-line side of the `delay` crate. It turns
//! the flags into each client's round trip, runs the delay line (and a
//! program beside it, if given) until the program ends, the time is up or
//! a signal comes, and prints what the line did. An invalid run (a packet
//! dropped or let through undelayed) exits 1.

use std::io::{self, Write};
use std::net::IpAddr;
use std::process::{Child, Command};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use delay::handshake::{cdf_text, ServerFilter, Tracker};
use delay::profile::fmt_ms;
use delay::{DelayConfig, DelayReport, Profile, Running, Shaping};
use pipeline::{display_path, Consumer, Control, Error, Flow, Report, TraceSource};
use serde::Serialize;
use trace::Record;
use webbench::observe::Window;
use webbench::tap::Tap;

use crate::args::{DelayArgs, DelayProfileArgs, DelayRunArgs, DelayTool};
use crate::signals;

#[derive(Serialize)]
struct ClientRtt {
    addr: IpAddr,
    rtt_ms: f64,
}

#[derive(Serialize)]
struct Output<'a> {
    profile: String,
    clients: Vec<ClientRtt>,
    command_status: Option<i32>,
    delay_line: &'a DelayReport,
    /// The server's view (--observe).
    #[serde(skip_serializing_if = "Option::is_none")]
    server: Option<&'a Window>,
}

pub fn run(args: &DelayArgs) -> pipeline::Result<Report> {
    match &args.tool {
        Some(DelayTool::Profile(a)) => profile_from_pcap(a),
        None => delay(&args.run),
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

fn delay(args: &DelayRunArgs) -> pipeline::Result<Report> {
    let profile = Profile::parse(&args.profile).map_err(|e| Error::input(e.to_string()))?;
    let rtts = profile.assign(&args.clients.0);
    let cfg = DelayConfig {
        clients: rtts.clone(),
        server: args.server,
        queue_len: args.queue_len,
        fail_open: args.fail_open,
        shaping: Shaping {
            loss: args.loss,
            rate_bps: args.rate,
            seed: 1,
        },
        late_after: args.late_after,
        cpu: args.cpu,
    };
    let line = Running::spawn(&cfg).map_err(|e| Error::input(e.to_string()))?;
    let started = webbench::load::unix_ns();
    let tap = match (&args.observe, args.server) {
        (Some(ifc), Some(server)) => {
            Some(Tap::watch(ifc, server, started).map_err(|e| Error::input(e.to_string()))?)
        }
        _ => None,
    };
    let mut child = match args.command.split_first() {
        Some((prog, rest)) => match Command::new(prog).args(rest).spawn() {
            Ok(c) => Some(c),
            Err(e) => {
                drop(line);
                return Err(Error::input(format!("{prog}: {e}")));
            }
        },
        None => None,
    };
    let status = wait(child.as_mut(), args.duration);
    let ended = webbench::load::unix_ns().max(started);
    let (seen, tap_failed) = match tap.map(Tap::stop) {
        Some(Ok(s)) => (Some(s), None),
        Some(Err(e)) => (None, Some(format!("the tap's figures are lost: {e}"))),
        None => (None, None),
    };
    let delay = line.stop();

    let mut report = Report {
        packets: delay.received,
        ..Report::default()
    };
    if let Some(c) = status {
        if c != 0 {
            report
                .problems
                .push(format!("{}: exited with {c}", args.command[0]));
        }
    }
    report.problems.extend(delay.problems.iter().cloned());
    report.problems.extend(tap_failed);
    let server = seen.as_ref().map(|s| {
        report.problems.extend(s.problems());
        s.observer.steady(started, ended)
    });
    let out = Output {
        profile: profile.to_string(),
        clients: rtts
            .iter()
            .map(|(a, d)| ClientRtt {
                addr: *a,
                rtt_ms: d.as_secs_f64() * 1e3,
            })
            .collect(),
        command_status: status,
        delay_line: &delay,
        server: server.as_ref(),
    };
    // With a program's output on stdout, the report goes to stderr.
    let (printed, stream) = if child.is_some() {
        let printed = print(&mut io::stderr().lock(), &out, args, &profile);
        (printed, "standard error")
    } else {
        let printed = print(&mut io::stdout().lock(), &out, args, &profile);
        (printed, "standard output")
    };
    if let Err(e) = printed {
        report.failed(Error::output(stream, &e));
    }
    Ok(report)
}

/// Waits for the child to end, the time to pass, or a stop signal; the
/// child's exit code (a child still running is stopped first).
fn wait(mut child: Option<&mut Child>, duration: Option<Duration>) -> Option<i32> {
    let start = Instant::now();
    let stop = signals::stop_flag();
    loop {
        if let Some(c) = child.as_deref_mut() {
            if let Ok(Some(s)) = c.try_wait() {
                return Some(s.code().unwrap_or(128));
            }
        }
        let timed_out = duration.is_some_and(|d| start.elapsed() >= d);
        if timed_out || stop.load(Ordering::Relaxed) {
            return child.map(|c| {
                let _ = c.kill();
                c.wait().ok().and_then(|s| s.code()).unwrap_or(128)
            });
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn print(
    w: &mut dyn Write,
    out: &Output<'_>,
    args: &DelayRunArgs,
    profile: &Profile,
) -> io::Result<()> {
    if args.json {
        serde_json::to_writer(&mut *w, out).map_err(io::Error::from)?;
        return writeln!(w);
    }
    let mut rtts: Vec<f64> = out.clients.iter().map(|c| c.rtt_ms).collect();
    rtts.sort_by(f64::total_cmp);
    let mean = rtts.iter().sum::<f64>() / rtts.len() as f64;
    let d = out.delay_line;
    writeln!(
        w,
        "delay: {} clients, {profile} (median {}, mean {}): RTT min {:.3} ms, median {:.3} ms, mean {mean:.3} ms, max {:.3} ms",
        rtts.len(),
        fmt_ms(profile.median()),
        fmt_ms(profile.mean()),
        rtts[0],
        rtts[rtts.len() / 2],
        rtts[rtts.len() - 1],
    )?;
    if args.list {
        for c in &out.clients {
            writeln!(w, "  {:<40} {:>10.3} ms", c.addr, c.rtt_ms)?;
        }
    }
    writeln!(
        w,
        "delay line (queue {}): {} packets received, {} held, {} late (over {}), lateness p50 {} us, p99 {} us, max {} us; \
         {} lost, {} not a client's, {} unreadable; most held at once {}",
        d.queue,
        d.received,
        d.held,
        d.late,
        fmt_ms(args.late_after),
        d.lateness.p50_us,
        d.lateness.p99_us,
        d.lateness.max_us,
        d.lost,
        d.not_ours,
        d.unreadable,
        d.max_held
    )?;
    writeln!(
        w,
        "kernel: rules queued {}, dropped (queue full) {}, dropped (socket full) {}, undelayed {}: {}",
        d.rule_packets.map_or_else(|| "?".to_string(), |n| n.to_string()),
        d.queue_dropped,
        d.user_dropped,
        d.undelayed,
        if d.valid { "valid" } else { "INVALID" }
    )?;
    if let Some(x) = out.server {
        writeln!(
            w,
            "server (last {:.1} s): in progress {:.2} (max {}), arrivals {:.1}/s x lifetime {:.2} ms = {:.2}; {} closed, resets {} by the server, {} by clients; TIME_WAIT {:.1}",
            x.seconds,
            x.mean_in_progress,
            x.max_in_progress,
            x.arrival_rate,
            x.mean_lifetime_ms,
            x.littles_law,
            x.closes,
            x.resets_by_server,
            x.resets_by_client,
            x.mean_time_wait
        )?;
    }
    Ok(())
}
