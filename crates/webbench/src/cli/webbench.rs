//! `kansoku webbench`: HTTP load from many client addresses. A URL that
//! cannot be reached is an input error (exit 2) before any load; failed
//! requests during the run are results, counted by class (a certificate the
//! client rejects among them: `tls` errors, exit 0, as a refused
//! connection); an invalid delay line (a packet dropped or undelayed) exits
//! 1.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::{IpAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use delay::{DelayConfig, DelayReport, Profile, Running};
use outcome::{display_path, Error, Report, Result};
use serde::Serialize;

use super::{clients, series_interval, tls_version, Clients};
use crate::session::{describe, SessionPlan, SessionResult};
use crate::{report, Model, Plan, Record, Results, Target, TlsOptions, TlsVersions, Verify};

/// `kansoku webbench`: HTTP load from many client addresses.
#[derive(Debug, Args)]
pub struct WebbenchArgs {
    /// The page to ask for (`http://` or `https://HOST[:PORT]/PATH`).
    pub url: String,
    /// Closed model: this many connections, each asking again when answered (default 10 without --rate); a
    /// comma-separated list runs a sweep, one step per count (e.g. 1,10,50,100,200,500,800,900,1000), each -d long.
    #[arg(short = 'c', long, value_name = "N[,N...]", conflicts_with = "rate", value_delimiter = ',', value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub connections: Option<Vec<u64>>,
    /// Idle time between a sweep's steps (the paper: 1m).
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = delay::profile::parse_duration)]
    pub cooldown: Duration,
    /// Open model: start this many requests a second, answered or not; latency counts from the scheduled time.
    #[arg(long, value_name = "PER_SECOND", value_parser = crate::load::parse_rate)]
    pub rate: Option<f64>,
    /// Open model: exponential gaps between requests (Poisson arrivals) instead of even ones.
    #[arg(long, requires = "rate")]
    pub poisson: bool,
    /// Stop starting requests after this long (default 10s unless --requests).
    #[arg(short = 'd', long, value_name = "DURATION", value_parser = delay::profile::parse_duration)]
    pub duration: Option<Duration>,
    /// Stop after this many requests.
    #[arg(short = 'n', long, value_name = "N")]
    pub requests: Option<u64>,
    /// Keep connections open between requests; default: one connection per request, closed by the server
    /// (HTTP/2: by the client, once its one stream is answered).
    #[arg(long)]
    pub keep_alive: bool,
    /// HTTP/2: over TLS with ALPN h2 for https://, with prior knowledge (h2c) for http://. Each request a stream.
    #[arg(long)]
    pub http2: bool,
    /// HTTP/2 with --keep-alive: streams in flight on a connection at most (h2load's -m).
    #[arg(long, value_name = "M", requires = "http2", value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub streams: Option<u64>,
    /// https: only this TLS version (1.2 or 1.3); by default both are offered and the server chooses.
    #[arg(long, value_name = "VERSION", value_parser = tls_version)]
    pub tls_version: Option<TlsVersions>,
    /// https: accept any certificate (a self-signed test server); the handshake's signatures are still checked.
    #[arg(short = 'k', long, conflicts_with = "cacert")]
    pub insecure: bool,
    /// https: trust the CA certificates in this PEM file instead of Mozilla's roots (webpki-roots).
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<std::path::PathBuf>,
    /// Client source addresses, used round-robin: a count (that many from 127.0.0.2), a range A-B, or a list.
    #[arg(long, value_name = "LIST", value_parser = clients)]
    pub clients: Option<Clients>,
    /// Give each client its own round trip on real packets (a delay line, root): const:48ms,
    /// lognormal:median=48ms,sigma=1, cdf:FILE. Client i of N gets the (i + 1/2) / N quantile.
    #[arg(long, value_name = "PROFILE")]
    pub delay: Option<String>,
    /// Packets the delay line's queue holds at most.
    #[arg(long, value_name = "PACKETS", default_value_t = 65_536)]
    pub queue_len: u32,
    /// Event-loop threads (default: the cores).
    #[arg(short = 't', long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=256))]
    pub threads: Option<u64>,
    /// Longest a connect, or a wait for an answer, may take.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = delay::profile::parse_duration)]
    pub timeout: Duration,
    /// Write every request's times (microseconds from the start) to this CSV file.
    #[arg(long, value_name = "FILE")]
    pub records: Option<std::path::PathBuf>,
    /// Watch the server from its packets on this interface (root; its namespace's lo, or the interface its
    /// packets cross), as the paper's ENMA did: connections in progress from SYN to close or reset, arrivals,
    /// resets, TIME_WAIT, handshake round trips per client.
    #[arg(long, value_name = "INTERFACE")]
    pub observe: Option<String>,
    /// The server's time series' interval (with --observe).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = series_interval)]
    pub interval: Duration,
    /// Write the server's time series (one row per --interval) to this CSV file (with --observe).
    #[arg(long, value_name = "FILE", requires = "observe")]
    pub series: Option<std::path::PathBuf>,
    /// Write the handshake round trips the server saw as a CDF file (RTT_MS FRACTION, with --observe).
    #[arg(long, value_name = "FILE", requires = "observe")]
    pub server_rtts: Option<std::path::PathBuf>,
    /// Pin the load threads to these CPUs (thread i to the i-th, round-robin), e.g. 1 or 0,1.
    #[arg(long, value_name = "CPU[,CPU...]", value_delimiter = ',')]
    pub cpus: Option<Vec<usize>>,
    /// Pin the delay line's thread to this CPU.
    #[arg(long, value_name = "CPU", requires = "delay")]
    pub delay_cpu: Option<usize>,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
}

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

/// Runs `kansoku webbench`: the load (a sweep of steps, or one), behind a
/// delay line if asked, until done or `stop`; prints the results.
pub fn run_webbench(args: &WebbenchArgs, stop: Arc<AtomicBool>) -> Result<Report> {
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
                Verify::Roots(crate::tls::load_pem_certificates(path).map_err(Error::input)?)
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
    let session = crate::run_session(&session, stop);
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
