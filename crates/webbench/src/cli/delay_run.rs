//! `kansoku delay`: per-client network delay on real packets. The flags
//! become each client's round trip; the delay line (and a program beside
//! it, if given) runs until the program ends, the time is up or a signal
//! comes, and what the line did is printed. An invalid run (a packet
//! dropped or let through undelayed) exits 1.

use std::io::{self, Write};
use std::net::IpAddr;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use delay::profile::fmt_ms;
use delay::{DelayConfig, DelayReport, Profile, Running, Shaping};
use outcome::{Error, Report, Result};
use serde::Serialize;

use super::{clients, fraction, Clients};
use crate::observe::Window;
use crate::tap::Tap;

/// `kansoku delay` (without a tool): the delay line, and a program beside it.
#[derive(Debug, Args)]
pub struct DelayRunArgs {
    /// Client addresses: a count (that many from 127.0.0.2), a range A-B, addresses, or a mix, comma-separated.
    #[arg(long, value_name = "LIST", default_value = "1", value_parser = clients)]
    pub clients: Clients,
    /// Round-trip times: none, const:48ms, lognormal:median=48ms,sigma=1, or cdf:FILE (RTT_MS FRACTION lines);
    /// client i of N gets the quantile at (i + 1/2) / N. Half of it is put on each direction.
    #[arg(long, value_name = "PROFILE", default_value = "none")]
    pub profile: String,
    /// Only traffic with this server (ADDR:PORT, TCP; port 0 for any): by default every packet from or to a client.
    #[arg(long, value_name = "ADDR:PORT")]
    pub server: Option<std::net::SocketAddr>,
    /// Packets the kernel holds in the queue at most; past that they are dropped and the run is invalid.
    #[arg(long, value_name = "PACKETS", default_value_t = 65_536, value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    pub queue_len: u32,
    /// Let packets that find the queue full through undelayed (the run is then reported invalid) instead of dropping them.
    #[arg(long)]
    pub fail_open: bool,
    /// Drop this fraction of packets, each direction (0 to 1).
    #[arg(long, value_name = "FRACTION", default_value_t = 0.0, value_parser = fraction)]
    pub loss: f64,
    /// Each client's link rate, each direction (e.g. 10mbit, 512kbit, 1gbit).
    #[arg(long, value_name = "RATE")]
    #[arg(value_parser = delay::schedule::parse_rate)]
    pub rate: Option<u64>,
    /// A packet released later than this after its due time counts as late.
    #[arg(long, value_name = "DURATION", default_value = "1ms", value_parser = delay::profile::parse_duration)]
    pub late_after: Duration,
    /// Stop after this long (e.g. 30s); by default run until COMMAND ends, or until SIGINT/SIGTERM.
    #[arg(long, value_name = "DURATION", value_parser = delay::profile::parse_duration)]
    pub duration: Option<Duration>,
    /// Pin the delay line's thread to this CPU.
    #[arg(long, value_name = "CPU")]
    pub cpu: Option<usize>,
    /// Watch the server (--server, with its port) from its packets on this interface while the delay runs: its
    /// connections in progress, arrivals, resets and TIME_WAIT over the run less its first tenth (as webbench
    /// --observe does), for a program that cannot say so itself (httperf).
    #[arg(long, value_name = "INTERFACE", requires = "server")]
    pub observe: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// List each client's round trip in the text report.
    #[arg(long)]
    pub list: bool,
    /// A program to run while the delay is on (its output is its own; kansoku's report then goes to stderr).
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

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

/// Runs the delay line (and the program beside it) until the program ends,
/// the time is up or `stop` is set; prints what the line did.
pub fn run_delay(args: &DelayRunArgs, stop: &AtomicBool) -> Result<Report> {
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
    let started = crate::load::unix_ns();
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
    let status = wait(child.as_mut(), args.duration, stop);
    let ended = crate::load::unix_ns().max(started);
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
fn wait(
    mut child: Option<&mut Child>,
    duration: Option<Duration>,
    stop: &AtomicBool,
) -> Option<i32> {
    let start = Instant::now();
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
