//! `kansoku bench web`: kansoku's load generator beside wrk, against the
//! same URL with the same threads, connections and time, in alternating
//! rounds (the one that goes first changes each round, so a slow spell of
//! the host falls on both), HTTP/1.1 keep-alive as wrk runs. Each round
//! gives requests/s and latency percentiles for both, and kansoku / wrk;
//! the figure is the median of the rounds' ratios. Both tools' threads are
//! confined to the same CPUs (by default the upper half of those allowed),
//! the rest left to the server: on a small host three busy threads (two
//! generator threads and a server worker) otherwise land wherever the
//! scheduler puts them, and runs of either tool fell into a fast and a slow
//! mode (~69,000 and ~55,000 requests/s) from one run to the next.

use std::io::Write;
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use pipeline::{Error, Report, Result};
use serde::Serialize;
use webbench::{Model, Plan, Target};

use crate::args::BenchWebArgs;

/// One tool's figures in one round.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Figures {
    pub requests_per_second: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

#[derive(Clone, Debug, Serialize)]
struct Round {
    kansoku: Figures,
    wrk: Figures,
    ratio: f64,
}

/// A latency as wrk prints it (`812.00us`, `1.26ms`, `2.00s`), in ms.
fn wrk_ms(s: &str) -> Option<f64> {
    let (num, scale) = if let Some(n) = s.strip_suffix("us") {
        (n, 1e-3)
    } else if let Some(n) = s.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix("m") {
        (n, 60e3)
    } else {
        (s.strip_suffix('s')?, 1e3)
    };
    num.parse::<f64>().ok().map(|v| v * scale)
}

/// Requests/s and the 50% and 99% latencies of `wrk --latency` output.
pub fn parse_wrk(text: &str) -> Option<Figures> {
    let mut f = Figures::default();
    let mut seen = 0;
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            ["Requests/sec:", v] => {
                f.requests_per_second = v.parse().ok()?;
                seen |= 1;
            }
            ["50%", v] => {
                f.p50_ms = wrk_ms(v)?;
                seen |= 2;
            }
            ["99%", v] => {
                f.p99_ms = wrk_ms(v)?;
                seen |= 4;
            }
            _ => {}
        }
    }
    (seen == 7).then_some(f)
}

fn wrk(a: &BenchWebArgs) -> Result<Figures> {
    let out = Command::new("wrk")
        .args([
            "-t",
            &a.threads.to_string(),
            "-c",
            &a.connections.to_string(),
        ])
        .args(["-d", &format!("{}s", a.seconds), "--latency", &a.url])
        .output()
        .map_err(|e| Error::input(format!("wrk: {e} (scripts/install-deps.sh installs it)")))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(Error::input(format!(
            "wrk failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    parse_wrk(&text).ok_or_else(|| Error::input(format!("wrk's output not understood:\n{text}")))
}

fn kansoku(a: &BenchWebArgs, target: &Target, stop: &AtomicBool) -> Result<Figures> {
    let plan = Plan {
        target: target.clone(),
        model: Model::Closed {
            connections: a.connections as usize,
        },
        keep_alive: true,
        http2: false,
        streams: 1,
        tls: webbench::TlsOptions::default(),
        duration: Some(Duration::from_secs(a.seconds)),
        requests: None,
        clients: Vec::new(),
        threads: a.threads as usize,
        timeout: Duration::from_secs(10),
        keep_records: false,
        cpus: Vec::new(),
    };
    let flag = Arc::new(AtomicBool::new(
        stop.load(std::sync::atomic::Ordering::Relaxed),
    ));
    let r = webbench::load::run(&plan, flag).map_err(|e| Error::input(format!("webbench: {e}")))?;
    let errors: u64 = r.errors.values().sum();
    if errors > 0 || r.answered == 0 {
        return Err(Error::input(format!(
            "{}: {} answered, errors {:?}",
            a.url, r.answered, r.errors
        )));
    }
    Ok(Figures {
        requests_per_second: r.requests_per_second,
        p50_ms: r.latency.p50_ms,
        p99_ms: r.latency.p99_ms,
    })
}

/// The CPUs the generators get: `all`, a list (each allowed to this
/// process), or by default the upper half of the allowed ones.
pub fn generator_cpus(
    spec: Option<&str>,
    allowed: &[usize],
) -> std::result::Result<Vec<usize>, String> {
    match spec {
        Some("all") => Ok(allowed.to_vec()),
        Some(list) => {
            let mut cpus = Vec::new();
            for part in list.split(',') {
                let cpu: usize = part
                    .trim()
                    .parse()
                    .map_err(|_| format!("--generator-cpus: {part:?} is not a CPU number"))?;
                if !allowed.contains(&cpu) {
                    return Err(format!(
                        "--generator-cpus: CPU {cpu} is not one this process may use ({allowed:?})"
                    ));
                }
                if !cpus.contains(&cpu) {
                    cpus.push(cpu);
                }
            }
            Ok(cpus)
        }
        None => Ok(allowed[allowed.len() / 2..].to_vec()),
    }
}

/// Confines the calling thread, and so both tools' threads, to `cpus`
/// while it lives; puts back the set it had (`before`).
struct Confined(Vec<usize>);

impl Confined {
    fn to(cpus: &[usize], before: &[usize]) -> Result<Confined> {
        capture::usage::confine_current_thread(cpus).map_err(|e| {
            Error::input(format!(
                "confining the load generator to CPUs {cpus:?}: {e}"
            ))
        })?;
        Ok(Confined(before.to_vec()))
    }
}

impl Drop for Confined {
    fn drop(&mut self) {
        let _ = capture::usage::confine_current_thread(&self.0);
    }
}

pub fn run(a: &BenchWebArgs, stop: &AtomicBool, out: &mut dyn Write) -> Result<Report> {
    let target = Target::parse(&a.url).map_err(Error::input)?;
    let allowed = capture::usage::allowed_cpus()
        .map_err(|e| Error::input(format!("the CPUs this process may use: {e}")))?;
    let cpus = generator_cpus(a.generator_cpus.as_deref(), &allowed).map_err(Error::input)?;
    let _confined = Confined::to(&cpus, &allowed)?;
    let cpu_list = cpus
        .iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let mut rounds = Vec::new();
    for i in 0..a.rounds {
        let (k, w) = if i % 2 == 0 {
            let k = kansoku(a, &target, stop)?;
            (k, wrk(a)?)
        } else {
            let w = wrk(a)?;
            (kansoku(a, &target, stop)?, w)
        };
        let ratio = k.requests_per_second / w.requests_per_second.max(f64::MIN_POSITIVE);
        rounds.push(Round {
            kansoku: k,
            wrk: w,
            ratio,
        });
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
    }
    let mut ratios: Vec<f64> = rounds.iter().map(|r| r.ratio).collect();
    ratios.sort_by(f64::total_cmp);
    let median = ratios.get(ratios.len() / 2).copied().unwrap_or(0.0);
    if a.json {
        serde_json::to_writer(
            &mut *out,
            &serde_json::json!({
                "url": a.url, "threads": a.threads, "connections": a.connections,
                "seconds": a.seconds, "generator_cpus": cpus, "rounds": rounds,
                "median_ratio": median,
            }),
        )
        .map_err(|e| Error::stdout(e.into()))?;
        writeln!(out).map_err(Error::stdout)?;
        return Ok(Report::default());
    }
    writeln!(
        out,
        "# bench web: kansoku webbench beside wrk, {} threads, {} connections, keep-alive, {} s a run\n\n{}\n\n\
         Both tools' threads on CPU {cpu_list} (of {}).\n",
        a.threads,
        a.connections,
        a.seconds,
        a.url,
        allowed.len()
    ).map_err(Error::stdout)?;
    writeln!(out, "| round | kansoku req/s | wrk req/s | kansoku / wrk | kansoku p50 / p99 ms | wrk p50 / p99 ms |").map_err(Error::stdout)?;
    writeln!(out, "|---:|---:|---:|---:|---:|---:|").map_err(Error::stdout)?;
    for (i, r) in rounds.iter().enumerate() {
        writeln!(
            out,
            "| {} | {:.0} | {:.0} | {:.2} | {:.3} / {:.3} | {:.3} / {:.3} |",
            i + 1,
            r.kansoku.requests_per_second,
            r.wrk.requests_per_second,
            r.ratio,
            r.kansoku.p50_ms,
            r.kansoku.p99_ms,
            r.wrk.p50_ms,
            r.wrk.p99_ms
        )
        .map_err(Error::stdout)?;
    }
    writeln!(out, "\nmedian kansoku / wrk: {median:.2}").map_err(Error::stdout)?;
    Ok(Report::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generators_get_the_upper_half_or_what_is_asked() {
        assert_eq!(generator_cpus(None, &[0, 1]), Ok(vec![1]));
        assert_eq!(generator_cpus(None, &[0]), Ok(vec![0]));
        assert_eq!(generator_cpus(None, &[0, 1, 2, 3, 4]), Ok(vec![2, 3, 4]));
        assert_eq!(generator_cpus(Some("all"), &[0, 1]), Ok(vec![0, 1]));
        assert_eq!(generator_cpus(Some("1,0,1"), &[0, 1]), Ok(vec![1, 0]));
        assert!(generator_cpus(Some("2"), &[0, 1]).is_err());
        assert!(generator_cpus(Some("x"), &[0, 1]).is_err());
        assert!(generator_cpus(Some(""), &[0, 1]).is_err());
    }

    #[test]
    fn wrk_output_is_read() {
        let text = "Running 5s test @ http://127.0.0.1:18081/10k.html\n  2 threads and 50 connections\n\
                    \x20 Thread Stats   Avg      Stdev     Max   +/- Stdev\n    Latency     1.29ms  231.62us   9.62ms   89.12%\n\
                    \x20 Latency Distribution\n     50%    1.26ms\n     75%    1.36ms\n     90%    1.51ms\n     99%  812.00us\n\
                    \x20 195874 requests in 5.00s, 1.93GB read\nRequests/sec:  39174.98\nTransfer/sec:    386.41MB\n";
        let f = parse_wrk(text).unwrap();
        assert_eq!(f.requests_per_second, 39174.98);
        assert!((f.p50_ms - 1.26).abs() < 1e-9);
        assert!((f.p99_ms - 0.812).abs() < 1e-9);
        assert!(parse_wrk("Requests/sec: 1\n").is_none());
        assert_eq!(wrk_ms("2.00s"), Some(2000.0));
        assert_eq!(wrk_ms("1.5m"), Some(90_000.0));
        assert_eq!(wrk_ms("x"), None);
    }
}
