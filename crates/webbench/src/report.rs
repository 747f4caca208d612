//! A run's results as files and text: every request's record and the
//! server's time series as CSV ([`write_records_csv`], [`write_series_csv`];
//! their columns are in docs/reference.md), and the report `kansoku
//! webbench` prints ([`write_text`]). The JSON report is the results'
//! serde form.

use std::io::{self, Write};
use std::net::IpAddr;

use serde::Serialize;

use crate::session::SessionResult;
use crate::{Record, Results, Step};

/// Every request's record; times are microseconds from the start of its
/// step (the `step` column, 1 for a single run).
pub fn write_records_csv(
    w: &mut impl Write,
    records: &[(usize, &Record)],
    clients: &[IpAddr],
) -> io::Result<()> {
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
pub fn write_series_csv(w: &mut impl Write, s: &SessionResult) -> io::Result<()> {
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

/// What a run was: the text report's first line, and the first fields of
/// the JSON report.
#[derive(Serialize)]
pub struct RunInfo<'a> {
    pub url: &'a str,
    /// The load model as [`crate::session::describe`] says it, or a sweep.
    pub model: &'a str,
    pub protocol: &'a str,
    pub threads: usize,
    pub keep_alive: bool,
    /// How many client addresses the load came from.
    pub clients: usize,
    /// The delay profile the clients' round trips were drawn from.
    pub delay: Option<&'a str>,
}

/// What the delay line under the clients did (the `delay` crate's report,
/// as the text report shows it).
pub struct DelayLineFigures {
    pub held: u64,
    pub late: u64,
    pub lateness_p99_us: u64,
    /// Dropped by the kernel's queue and by the line itself.
    pub dropped: u64,
    pub undelayed: u64,
    pub valid: bool,
    pub cpu_seconds: f64,
}

/// The text report of a run: the first step's results, the delay line,
/// then [`write_session`]'s server-side figures.
pub fn write_text(
    w: &mut dyn Write,
    run: &RunInfo<'_>,
    r: &Results,
    session: &SessionResult,
    line: Option<&DelayLineFigures>,
) -> io::Result<()> {
    writeln!(
        w,
        "webbench: {} ({}; {}; {} threads; {}; {} client addresses{})",
        run.url,
        run.model,
        run.protocol,
        run.threads,
        if run.keep_alive {
            "keep-alive"
        } else {
            "a connection per request"
        },
        run.clients,
        run.delay
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
    if let Some(d) = line {
        writeln!(
            w,
            "  delay line: {} packets held, {} late, lateness p99 {} us; kernel dropped {}, undelayed {}: {}",
            d.held,
            d.late,
            d.lateness_p99_us,
            d.dropped,
            d.undelayed,
            if d.valid { "valid" } else { "INVALID" }
        )?;
    }
    write_session(w, session, line)
}

/// The steps' server-side figures (a table for a sweep), the host's
/// counters and the round-trip check.
pub fn write_session(
    w: &mut dyn Write,
    s: &SessionResult,
    line: Option<&DelayLineFigures>,
) -> io::Result<()> {
    let count = |st: &Step, k: &str| st.host.counters.get(k).copied().unwrap_or(0);
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
