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
use webbench::{Model, Plan, Record, Results, Target, TlsOptions, Verify};

use crate::args::WebbenchArgs;
use crate::signals;

#[derive(Serialize)]
struct Output<'a> {
    url: &'a str,
    model: String,
    protocol: String,
    threads: usize,
    keep_alive: bool,
    clients: usize,
    delay: Option<String>,
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
        if let Err(e) = write_records(path, &all, &clients) {
            report.failed(Error::output(display_path(path), &e));
        }
    }
    if let Some(path) = &args.series {
        if let Err(e) = write_series(path, &session) {
            report.failed(Error::output(display_path(path), &e));
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
    let out = Output {
        url: &args.url,
        model: if session.steps.len() > 1 {
            format!("closed, a sweep of {} steps", session.steps.len())
        } else {
            describe(&model)
        },
        protocol,
        threads,
        keep_alive: args.keep_alive,
        clients: clients.len(),
        delay: profile.as_ref().map(|p| p.to_string()),
        results,
        delay_line: delay.as_ref(),
        session: &session,
    };
    if let Err(e) = print(&mut io::stdout().lock(), &out, args.json) {
        report.failed(Error::stdout(e));
    }
    Ok(report)
}

/// Every request's record; times are microseconds from the start of its
/// step (the `step` column, 1 for a single run).
fn write_records(path: &Path, records: &[(usize, &Record)], clients: &[IpAddr]) -> io::Result<()> {
    let mut w = BufWriter::new(File::create(path)?);
    writeln!(
        w,
        "client,scheduled_us,connect_start_us,connect_done_us,tls_done_us,request_sent_us,first_byte_us,last_byte_us,close_us,status,body_bytes,reused,error,step"
    )?;
    for (step, r) in records {
        let client = clients
            .get(r.client as usize)
            .map_or_else(String::new, |a| a.to_string());
        writeln!(
            w,
            "{client},{},{},{},{},{},{},{},{},{},{},{},{},{step}",
            r.scheduled,
            r.connect_start,
            r.connect_done,
            r.tls_done,
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

/// The server's time series as CSV, one row per interval.
fn write_series(path: &Path, s: &SessionResult) -> io::Result<()> {
    let mut w = BufWriter::new(File::create(path)?);
    writeln!(
        w,
        "seconds,in_progress_mean,in_progress_max,time_wait_mean,arrivals,arrival_rate,closes,resets_by_server,resets_by_client,refused,syn_retransmits,mean_lifetime_ms"
    )?;
    for (t, x) in &s.series {
        writeln!(
            w,
            "{t:.3},{:.3},{},{:.1},{},{:.3},{},{},{},{},{},{:.3}",
            x.mean_in_progress,
            x.max_in_progress,
            x.mean_time_wait,
            x.arrivals,
            x.arrival_rate,
            x.closes,
            x.resets_by_server,
            x.resets_by_client,
            x.refused,
            x.syn_retransmits,
            x.mean_lifetime_ms
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
        "webbench: {} ({}; {}; {} threads; {}; {} client addresses{})",
        out.url,
        out.model,
        out.protocol,
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
    for (class, why) in &r.first_errors {
        writeln!(w, "  first {class} error: {why}")?;
    }
    if !r.tls_versions.is_empty() {
        let versions: Vec<String> = r
            .tls_versions
            .iter()
            .map(|(v, n)| format!("{n} TLS {v}"))
            .collect();
        writeln!(w, "  handshakes: {}", versions.join(", "))?;
    }
    writeln!(
        w,
        "  {:<11} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "ms", "mean", "p50", "p90", "p99", "p99.9", "max"
    )?;
    for (name, p) in [
        ("latency", &r.latency),
        ("connect", &r.connect),
        ("tls", &r.tls),
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
    print_session(w, out.session, out.delay_line)
}

/// The steps' server-side figures (a table for a sweep), the host's
/// counters and the round-trip check.
fn print_session(
    w: &mut dyn Write,
    s: &SessionResult,
    line: Option<&DelayReport>,
) -> io::Result<()> {
    let count = |st: &webbench::Step, k: &str| st.host.counters.get(k).copied().unwrap_or(0);
    if s.steps.len() > 1 {
        writeln!(
            w,
            "  {:>6} {:>9} {:>7} {:>9} {:>9} {:>9} {:>7} {:>9} {:>9} {:>6}",
            "conns",
            "req/s",
            "errors",
            "arrive/s",
            "in prog",
            "Little",
            "resets",
            "ovflows",
            "connect",
            "gen"
        )?;
        for st in &s.steps {
            let r = &st.results;
            let errors: u64 = r.errors.values().sum();
            let (arr, prog, resets) = st
                .server
                .as_ref()
                .map_or((f64::NAN, f64::NAN, f64::NAN), |x| {
                    (x.arrival_rate, x.mean_in_progress, x.reset_rate)
                });
            writeln!(
                w,
                "  {:>6} {:>9.1} {:>7} {:>9.1} {:>9.1} {:>9.1} {:>7.4} {:>9} {:>8.1}ms {:>5.0}%",
                st.connections,
                r.requests_per_second,
                errors,
                arr,
                prog,
                st.little.as_ref().map_or(f64::NAN, |l| l.predicted),
                resets,
                count(st, "TcpExt:ListenOverflows"),
                r.connect.mean_ms,
                r.generator_busy * 100.0
            )?;
        }
    } else if let Some(st) = s.steps.first() {
        if let (Some(x), Some(l)) = (&st.server, &st.little) {
            writeln!(
                w,
                "  server (steady {:.1} s): in progress {:.2} (max {}), Little's law {:.2} (arrivals {:.1}/s x lifetime {:.2} ms; measured/predicted {:.3}); TIME_WAIT {:.1}",
                x.seconds,
                x.mean_in_progress,
                x.max_in_progress,
                l.predicted,
                x.arrival_rate,
                st.results.lifetime.mean_ms,
                l.ratio,
                x.mean_time_wait
            )?;
            writeln!(
                w,
                "  server: {} arrived, {} closed, resets {} by the server ({} refused) and {} by clients (rate {:.4}), {} SYNs sent again",
                x.arrivals,
                x.closes,
                x.resets_by_server,
                x.refused,
                x.resets_by_client,
                x.reset_rate,
                x.syn_retransmits
            )?;
        }
        let b = &st.results.connect_buckets;
        writeln!(
            w,
            "  connect times: {} under 1 s, {} 1-3 s, {} 3-7 s, {} 7-15 s, {} longer",
            b[0], b[1], b[2], b[3], b[4]
        )?;
        writeln!(
            w,
            "  kernel: ListenOverflows {}, ListenDrops {}, TCPSynRetrans {}, OutRsts {} (somaxconn {})",
            count(st, "TcpExt:ListenOverflows"),
            count(st, "TcpExt:ListenDrops"),
            count(st, "TcpExt:TCPSynRetrans"),
            count(st, "Tcp:OutRsts"),
            st.host.somaxconn.map_or_else(|| "?".into(), |n| n.to_string())
        )?;
    }
    if let Some(st) = s.steps.last() {
        let gen: f64 = s
            .steps
            .iter()
            .map(|x| x.results.generator_cpu_seconds)
            .sum();
        let server: f64 = s.steps.iter().map(|x| x.host.cpu_seconds).sum();
        let busy = s
            .steps
            .iter()
            .map(|x| x.results.generator_busy)
            .fold(0.0, f64::max);
        writeln!(
            w,
            "  CPU s: generator {gen:.2} (busiest step {:.0}% of its threads{}), server {server:.2} (pids {:?}){}",
            busy * 100.0,
            if busy > 0.9 { ": GENERATOR-BOUND" } else { "" },
            st.host.pids,
            line.map_or_else(String::new, |d| format!(", delay line {:.2}", d.cpu_seconds))
        )?;
    }
    if let Some(r) = &s.rtt {
        writeln!(
            w,
            "  round trips at the server: {} handshakes, |seen - given| p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
            r.handshakes, r.error_p50_ms, r.error_p99_ms, r.error_max_ms
        )?;
    }
    if let Some(t) = &s.tap {
        writeln!(
            w,
            "  tap on {}: {} packets, {} dropped",
            t.interface, t.packets, t.drops
        )?;
    }
    Ok(())
}
