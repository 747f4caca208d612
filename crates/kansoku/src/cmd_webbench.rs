//! `kansoku webbench`: the command-line side of the `webbench` crate (and
//! of `delay`, whose line it runs under the clients when `--delay` is
//! given). A URL that cannot be reached is an input error (exit 2) before
//! any load; failed requests during the run are results, counted by class
//! (a certificate the client rejects among them: `tls` errors, exit 0, as
//! a refused connection); an invalid delay line (a packet dropped or
//! undelayed) exits 1.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::{IpAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use delay::{DelayConfig, DelayReport, Profile, Running};
use pipeline::{display_path, Error, Report};
use serde::Serialize;
use webbench::session::{describe, SessionPlan, SessionResult};
use webbench::{report, Model, Plan, Record, Results, Target, TlsOptions, Verify};

use crate::args::WebbenchArgs;
use crate::signals;

#[derive(Serialize)]
struct Output<'a> {
    /// What the run was: the report's first line, the JSON's first fields.
    #[serde(flatten)]
    run: report::RunInfo<'a>,
    /// The first (or only) step's results.
    results: &'a Results,
    delay_line: Option<&'a DelayReport>,
    /// Every step, with the server's view (--observe) and the host's counters.
    #[serde(flatten)]
    session: &'a SessionResult,
}

pub fn run(args: &WebbenchArgs) -> pipeline::Result<Report> {
    let target = Target::parse(&args.url).map_err(Error::input)?;
    if !target.https && (args.tls_version.is_some() || args.insecure || args.cacert.is_some()) {
        return Err(Error::usage(
            "--tls-version, --insecure and --cacert are for https:// URLs",
        ));
    }
    let streams = args.streams.unwrap_or(1) as usize;
    if streams > 1 && !args.keep_alive {
        return Err(Error::usage(
            "--streams needs --keep-alive (without it a connection carries one request)",
        ));
    }
    let tls = TlsOptions {
        versions: args.tls_version.unwrap_or_default(),
        verify: match (&args.cacert, args.insecure) {
            (Some(path), _) => {
                Verify::Roots(webbench::tls::load_pem_certificates(path).map_err(Error::input)?)
            }
            (None, true) => Verify::Insecure,
            (None, false) => Verify::WebPkiRoots,
        },
    };
    let protocol = match (args.http2, target.https) {
        (false, false) => "HTTP/1.1".to_string(),
        (false, true) => "HTTP/1.1 over TLS".to_string(),
        (true, https) => format!(
            "HTTP/2 {}, {streams} stream{} a connection",
            if https { "over TLS" } else { "cleartext (h2c)" },
            if streams == 1 { "" } else { "s" }
        ),
    };
    let steps: Vec<Model> = match (args.rate, &args.connections) {
        (Some(rate), _) => vec![Model::Open {
            rate,
            poisson: args.poisson,
        }],
        (None, Some(list)) => list
            .iter()
            .map(|&c| Model::Closed {
                connections: c as usize,
            })
            .collect(),
        (None, None) => vec![Model::Closed { connections: 10 }],
    };
    let model = steps[0];
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
        http2: args.http2,
        streams,
        tls,
        duration,
        requests: args.requests,
        clients: clients.clone(),
        threads,
        timeout,
        keep_records: args.records.is_some(),
        cpus: args.cpus.clone().unwrap_or_default(),
    };
    let rtts = profile
        .as_ref()
        .map_or_else(Vec::new, |p| p.assign(&clients));
    let line = if profile.is_some() {
        let cfg = DelayConfig {
            clients: rtts.clone(),
            server: Some(plan.target.addr),
            queue_len: args.queue_len,
            cpu: args.delay_cpu,
            ..DelayConfig::default()
        };
        Some(Running::spawn(&cfg).map_err(|e| Error::input(e.to_string()))?)
    } else {
        None
    };
    let session = SessionPlan {
        plan,
        steps,
        cooldown: args.cooldown,
        observe: args.observe.clone(),
        interval: args.interval,
        rtts,
    };
    let session = webbench::run_session(&session, signals::stop_shared());
    let delay = line.map(Running::stop);
    let session = session.map_err(|e| Error::input(format!("webbench: {e}")))?;
    let Some(results) = session.steps.first().map(|s| &s.results) else {
        // Stopped before the first step began.
        return Ok(Report::default());
    };

    let mut report = Report {
        packets: delay.as_ref().map_or(0, |d| d.received),
        ..Report::default()
    };
    if let Some(d) = &delay {
        report.problems.extend(d.problems.iter().cloned());
    }
    report.problems.extend(session.problems.iter().cloned());
    if let Some(path) = &args.records {
        let all: Vec<(usize, &Record)> = session
            .steps
            .iter()
            .enumerate()
            .flat_map(|(i, s)| s.results.records.iter().map(move |r| (i + 1, r)))
            .collect();
        if let Err(e) = write_csv(path, |w| report::write_records_csv(w, &all, &clients)) {
            report.failed(Error::writing(path, e));
        }
    }
    if let Some(path) = &args.series {
        if let Err(e) = write_csv(path, |w| report::write_series_csv(w, &session)) {
            report.failed(Error::writing(path, e));
        }
    }
    if let Some(path) = &args.server_rtts {
        let rtts: Vec<Duration> = session
            .server_rtts_us
            .iter()
            .map(|&us| Duration::from_micros(u64::from(us)))
            .collect();
        match delay::handshake::cdf_text(&rtts, "the server's view") {
            Some(text) => {
                if let Err(e) = std::fs::write(path, text) {
                    report.failed(Error::output(display_path(path), &e));
                }
            }
            None => report
                .problems
                .push("the server saw no handshake: no round trips to write".into()),
        }
    }
    let model = if session.steps.len() > 1 {
        format!("closed, a sweep of {} steps", session.steps.len())
    } else {
        describe(&model)
    };
    let delay_profile = profile.as_ref().map(|p| p.to_string());
    let out = Output {
        run: report::RunInfo {
            url: &args.url,
            model: &model,
            protocol: &protocol,
            threads,
            keep_alive: args.keep_alive,
            clients: clients.len(),
            delay: delay_profile.as_deref(),
        },
        results,
        delay_line: delay.as_ref(),
        session: &session,
    };
    if let Err(e) = print(&mut io::stdout().lock(), &out, args.json) {
        report.failed(Error::stdout(e));
    }
    Ok(report)
}

/// A CSV file written through a buffer by `write`.
fn write_csv(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> io::Result<()> {
    let mut w = BufWriter::new(File::create(path)?);
    write(&mut w)?;
    w.flush()
}

fn print(w: &mut dyn Write, out: &Output<'_>, json: bool) -> io::Result<()> {
    if json {
        serde_json::to_writer(&mut *w, out).map_err(io::Error::from)?;
        return writeln!(w);
    }
    let line = out.delay_line.map(|d| report::DelayLineFigures {
        held: d.held,
        late: d.late,
        lateness_p99_us: d.lateness.p99_us,
        dropped: d.queue_dropped + d.user_dropped,
        undelayed: d.undelayed,
        valid: d.valid,
        cpu_seconds: d.cpu_seconds,
    });
    report::write_text(w, &out.run, out.results, out.session, line.as_ref())
}
