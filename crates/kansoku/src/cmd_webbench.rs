//! `kansoku webbench`: the command-line side of the `webbench` crate (and
//! of `delay`, whose line it runs under the clients when `--delay` is
//! given). A URL that cannot be reached is an input error (exit 2) before
//! any load; failed requests during the run are results, counted by class;
//! an invalid delay line (a packet dropped or undelayed) exits 1.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::{IpAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use delay::{DelayConfig, DelayReport, Profile, Running};
use pipeline::{display_path, Error, Report};
use serde::Serialize;
use webbench::{Model, Plan, Record, Results, Target};

use crate::args::WebbenchArgs;
use crate::signals;

#[derive(Serialize)]
struct Output<'a> {
    url: &'a str,
    model: String,
    threads: usize,
    keep_alive: bool,
    clients: usize,
    delay: Option<String>,
    results: &'a Results,
    delay_line: Option<&'a DelayReport>,
}

pub fn run(args: &WebbenchArgs) -> pipeline::Result<Report> {
    let target = Target::parse(&args.url).map_err(Error::input)?;
    let model = match (args.rate, args.connections) {
        (Some(rate), _) => Model::Open {
            rate,
            poisson: args.poisson,
        },
        (None, c) => Model::Closed {
            connections: c.unwrap_or(10) as usize,
        },
    };
    let duration = match (args.duration, args.requests) {
        (Some(d), _) => Some(d),
        (None, Some(_)) => None,
        (None, None) => Some(Duration::from_secs(10)),
    };
    let timeout = args.timeout;
    let clients: Vec<IpAddr> = args.clients.as_ref().map_or_else(Vec::new, |c| c.0.clone());
    let profile = args
        .delay
        .as_deref()
        .map(Profile::parse)
        .transpose()
        .map_err(|e| Error::input(e.to_string()))?;
    if profile.is_some() && clients.is_empty() {
        return Err(Error::usage(
            "--delay needs --clients (the addresses it delays)",
        ));
    }
    let threads = args.threads.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get()),
        |t| t as usize,
    );
    // Can the server be reached at all? A clear error before any load.
    if let Err(e) = TcpStream::connect_timeout(&target.addr, timeout.min(Duration::from_secs(5))) {
        return Err(Error::input(format!(
            "{}: cannot connect to {}: {e}",
            args.url, target.addr
        )));
    }
    let plan = Plan {
        target,
        model,
        keep_alive: args.keep_alive,
        duration,
        requests: args.requests,
        clients: clients.clone(),
        threads,
        timeout,
        keep_records: args.records.is_some(),
    };
    let line = match &profile {
        Some(p) => Some(
            Running::spawn(&DelayConfig {
                clients: p.assign(&clients),
                server: Some(plan.target.addr),
                queue_len: args.queue_len,
                ..DelayConfig::default()
            })
            .map_err(|e| Error::input(e.to_string()))?,
        ),
        None => None,
    };
    let results = webbench::load::run(&plan, signals::stop_shared());
    let delay = line.map(Running::stop);
    let results = results.map_err(|e| Error::input(format!("webbench: {e}")))?;

    let mut report = Report {
        packets: delay.as_ref().map_or(0, |d| d.received),
        ..Report::default()
    };
    if let Some(d) = &delay {
        report.problems.extend(d.problems.iter().cloned());
    }
    if let Some(path) = &args.records {
        if let Err(e) = write_records(path, &results.records, &clients) {
            report.failed(Error::output(display_path(path), &e));
        }
    }
    let out = Output {
        url: &args.url,
        model: match model {
            Model::Closed { connections } => format!("closed, {connections} connections"),
            Model::Open { rate, poisson } => {
                format!(
                    "open, {rate}/s {}",
                    if poisson { "Poisson" } else { "constant" }
                )
            }
        },
        threads,
        keep_alive: args.keep_alive,
        clients: clients.len(),
        delay: profile.as_ref().map(|p| p.to_string()),
        results: &results,
        delay_line: delay.as_ref(),
    };
    if let Err(e) = print(&mut io::stdout().lock(), &out, args.json) {
        report.failed(e.into());
    }
    Ok(report)
}

fn write_records(path: &Path, records: &[Record], clients: &[IpAddr]) -> io::Result<()> {
    let mut w = BufWriter::new(File::create(path)?);
    writeln!(
        w,
        "client,scheduled_us,connect_start_us,connect_done_us,request_sent_us,first_byte_us,last_byte_us,close_us,status,body_bytes,reused,error"
    )?;
    for r in records {
        let client = clients
            .get(r.client as usize)
            .map_or_else(String::new, |a| a.to_string());
        writeln!(
            w,
            "{client},{},{},{},{},{},{},{},{},{},{},{}",
            r.scheduled,
            r.connect_start,
            r.connect_done,
            r.request_sent,
            r.first_byte,
            r.last_byte,
            r.close,
            r.status,
            r.body_bytes,
            r.reused,
            r.error.map_or("", |e| e.name())
        )?;
    }
    w.flush()
}

fn print(w: &mut dyn Write, out: &Output<'_>, json: bool) -> io::Result<()> {
    if json {
        serde_json::to_writer(&mut *w, out).map_err(io::Error::from)?;
        return writeln!(w);
    }
    let r = out.results;
    writeln!(
        w,
        "webbench: {} ({}; {} threads; {}; {} client addresses{})",
        out.url,
        out.model,
        out.threads,
        if out.keep_alive {
            "keep-alive"
        } else {
            "a connection per request"
        },
        out.clients,
        out.delay
            .as_ref()
            .map_or_else(String::new, |d| format!(", delay {d}"))
    )?;
    let errors: u64 = r.errors.values().sum();
    writeln!(
        w,
        "  {} answered ({} 2xx/3xx) in {:.2} s: {:.1} requests/s; {} connections; {} body bytes; errors {}{}",
        r.answered,
        r.ok,
        r.seconds,
        r.requests_per_second,
        r.connections,
        r.body_bytes,
        errors,
        if errors > 0 {
            format!(" {:?}", r.errors)
        } else {
            String::new()
        }
    )?;
    writeln!(
        w,
        "  {:<11} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "ms", "mean", "p50", "p90", "p99", "p99.9", "max"
    )?;
    for (name, p) in [
        ("latency", &r.latency),
        ("connect", &r.connect),
        ("first byte", &r.first_byte),
    ] {
        writeln!(
            w,
            "  {name:<11} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3}",
            p.mean_ms, p.p50_ms, p.p90_ms, p.p99_ms, p.p999_ms, p.max_ms
        )?;
    }
    if let Some(d) = out.delay_line {
        writeln!(
            w,
            "  delay line: {} packets held, {} late, lateness p99 {} us; kernel dropped {}, undelayed {}: {}",
            d.held,
            d.late,
            d.lateness.p99_us,
            d.queue_dropped + d.user_dropped,
            d.undelayed,
            if d.valid { "valid" } else { "INVALID" }
        )?;
    }
    Ok(())
}
