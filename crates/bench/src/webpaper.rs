//! `kansoku bench web-paper`: MAWI WG 2001's two web server experiments
//! (chapter 3) against nginx and Apache prefork, each started from Debian's
//! packages in a network namespace of this run's own, on a port of its own.
//!
//! - Experiment 1: a 10 KB file at 110 requests/s (open model), 100 client
//!   addresses, one connection per request, with no delay, a constant 48 ms
//!   and the 100-quantile profile (runs 1-1, 1-2, 1-5), and httperf through
//!   `kansoku delay` with no delay and 48 ms (runs 1-3, 1-4). Each row: the
//!   connections in progress at the server (from its packets, as ENMA) beside
//!   Little's law's prediction.
//! - Experiment 2: a 2 KB file at fixed concurrency, the paper's 13 steps
//!   (3 minutes each, 1 minute between), with no delay and with the
//!   profile: request rate, arrival rate, connections in progress, reset
//!   rate, accept-queue overflows, connect times per step.
//!
//! Every run is a `kansoku webbench` (or `kansoku delay -- httperf`) child
//! inside the namespace, so the delay line's iptables rules and the tap on
//! `lo` are the namespace's; its JSON is read back. The server's limits, the
//! kernel's `somaxconn` and the versions are printed with the tables.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use capture::netns::Namespace;
use pipeline::{Error, Report, Result};
use serde_json::Value;

use crate::args::{BenchWebPaperArgs, WebServer};
use plot::{Chart, LineChart, Series};

/// A web server running in the namespace, stopped when dropped: SIGTERM to
/// its master (which stops its workers), then SIGKILL to whatever is left
/// in the namespace, so that nothing outlives the run.
struct Server {
    name: &'static str,
    child: Child,
    port: u16,
    /// Its version and limits, in words.
    setup: String,
    ns: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let pid = self.child.id().to_string();
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Ok(o) = std::process::Command::new("ip")
            .args(["netns", "pids", &self.ns])
            .output()
        {
            for p in String::from_utf8_lossy(&o.stdout).split_whitespace() {
                let _ = std::process::Command::new("kill")
                    .args(["-KILL", p])
                    .status();
            }
        }
    }
}

fn input(what: &str, e: impl std::fmt::Display) -> Error {
    Error::input(format!("bench web-paper: {what}: {e}"))
}

fn version(ns: &Namespace, argv: &[&str]) -> String {
    ns.command(argv)
        .stderr(Stdio::piped())
        .output()
        .map(|o| {
            let t = format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            t.lines().next().unwrap_or("").trim().to_string()
        })
        .unwrap_or_default()
}

/// Writes a server's configuration to `conf` and starts `argv` in `ns`
/// (its name and version read by `version_argv`), in a process group of its
/// own: Apache ends by signalling its whole group, which would otherwise
/// stop this bench. `setup` says, after the version, how it is set up.
fn start(
    ns: &Namespace,
    name: &'static str,
    conf: (&Path, String),
    argv: &[&str],
    version_argv: &[&str],
    port: u16,
    setup: &str,
) -> Result<Server> {
    let (path, text) = conf;
    std::fs::write(path, text).map_err(|e| input(&path.display().to_string(), e))?;
    let child = ns
        .command(argv)
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| {
            input(
                &format!("{} (scripts/install-deps.sh installs it)", argv[0]),
                e,
            )
        })?;
    Ok(Server {
        name,
        child,
        port,
        ns: ns.name().to_string(),
        setup: format!("{}{setup}", version(ns, version_argv)),
    })
}

/// nginx as Debian configures it (worker_processes auto, 768 connections a
/// worker), logging off, serving `root` on 127.0.0.1:`port`.
fn nginx(ns: &Namespace, dir: &Path, root: &Path, port: u16) -> Result<Server> {
    let conf = dir.join("nginx.conf");
    let text = format!(
        "worker_processes auto;\npid \"{d}/nginx.pid\";\nerror_log \"{d}/nginx-error.log\";\n\
         events {{ worker_connections 768; }}\n\
         http {{ access_log off; sendfile on; default_type application/octet-stream;\n\
         server {{ listen 127.0.0.1:{port} backlog=511; root \"{r}\"; }} }}\n",
        d = dir.display(),
        r = root.display()
    );
    let c = conf.to_string_lossy();
    start(
        ns,
        "nginx",
        (&conf, text),
        &["nginx", "-c", &c, "-g", "daemon off;"],
        &["nginx", "-v"],
        port,
        ": worker_processes auto (one per core), worker_connections 768, listen backlog 511",
    )
}

/// Apache 2.4 with the prefork MPM and Apache 1.3's defaults, the paper's
/// kind of server: 5 processes at the start, 5 to 10 spare, at most 150,
/// listen backlog 511, no keep-alive.
fn apache(ns: &Namespace, dir: &Path, root: &Path, port: u16) -> Result<Server> {
    let conf = dir.join("httpd.conf");
    let m = "/usr/lib/apache2/modules";
    let text = format!(
        "ServerRoot \"{d}\"\nDefaultRuntimeDir \"{d}\"\nPidFile \"{d}/httpd.pid\"\nErrorLog \"{d}/apache-error.log\"\n\
         LogLevel warn\nLoadModule mpm_prefork_module {m}/mod_mpm_prefork.so\n\
         LoadModule authz_core_module {m}/mod_authz_core.so\nUser www-data\nGroup www-data\n\
         ServerName localhost\nListen 127.0.0.1:{port}\nListenBacklog 511\nStartServers 5\n\
         MinSpareServers 5\nMaxSpareServers 10\nMaxRequestWorkers 150\nMaxConnectionsPerChild 0\n\
         KeepAlive Off\nDocumentRoot \"{r}\"\n<Directory \"{r}\">\n  Require all granted\n</Directory>\n",
        d = dir.display(),
        r = root.display()
    );
    let c = conf.to_string_lossy();
    start(
        ns,
        "apache",
        (&conf, text),
        &["apache2", "-f", &c, "-DFOREGROUND"],
        &["apache2", "-v"],
        port,
        ", prefork: StartServers 5, Min/MaxSpareServers 5/10, MaxRequestWorkers 150, ListenBacklog 511, KeepAlive Off (Apache 1.3's defaults)",
    )
}

/// Waits until something accepts on 127.0.0.1:`port` in `ns`.
fn wait_ready(ns: &Namespace, port: u16) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let ok = ns
            .command(&["bash", "-c", &format!("exec 3<>/dev/tcp/127.0.0.1/{port}")])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(Error::input(format!(
                "bench web-paper: nothing listens on 127.0.0.1:{port} after 15 s"
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs `kansoku ARGS` in `ns` and reads the JSON object on the last line
/// of `stream` (stdout, or stderr for `kansoku delay -- COMMAND`).
fn kansoku_json(ns: &Namespace, args: &[String], on_stderr: bool) -> Result<(Value, String)> {
    let exe = std::env::current_exe().map_err(|e| input("own executable", e))?;
    let exe = exe
        .to_str()
        .ok_or_else(|| input("own executable", "its path is not UTF-8"))?;
    let mut argv: Vec<&str> = vec![exe];
    argv.extend(args.iter().map(String::as_str));
    let out = ns
        .command(&argv)
        .output()
        .map_err(|e| input("kansoku", e))?;
    let (json, other) = if on_stderr {
        (&out.stderr, &out.stdout)
    } else {
        (&out.stdout, &out.stderr)
    };
    let text = String::from_utf8_lossy(json);
    let line = text.lines().rev().find(|l| l.starts_with('{'));
    match line.and_then(|l| serde_json::from_str(l).ok()) {
        Some(v) => Ok((v, String::from_utf8_lossy(other).into_owned())),
        None => Err(Error::input(format!(
            "bench web-paper: kansoku {} gave no report (exit {:?}): {}{}",
            args.join(" "),
            out.status.code(),
            text.trim(),
            String::from_utf8_lossy(other).trim()
        ))),
    }
}

fn f(v: &Value, path: &[&str]) -> f64 {
    let mut x = v;
    for p in path {
        x = &x[*p];
    }
    x.as_f64().unwrap_or(f64::NAN)
}

/// A number from httperf's output: the word after `key`, the `n`-th.
fn httperf_figure(text: &str, key: &str, n: usize) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|rest| rest.split_whitespace().nth(n))
        .and_then(|w| w.parse().ok())
        .unwrap_or(f64::NAN)
}

/// The delays of the runs: `(label, --delay value)`.
fn delays(profile: &Path) -> [(&'static str, Option<String>); 3] {
    [
        ("none", None),
        ("const 48 ms", Some("const:48ms".into())),
        (
            "100-quantile profile",
            Some(format!("cdf:{}", profile.display())),
        ),
    ]
}

fn experiment_1(
    a: &BenchWebPaperArgs,
    ns: &Namespace,
    s: &Server,
    dir: &Path,
    out: &mut dyn Write,
    report: &mut Report,
    stop: &AtomicBool,
) -> Result<Value> {
    let url = format!("http://127.0.0.1:{}/10k.html", s.port);
    writeln!(
        out,
        "\n### Experiment 1, {}: 10 KB, 110 requests/s, 100 clients, a connection per request, {} s a run\n",
        s.name, a.exp1_seconds
    ).map_err(Error::stdout)?;
    writeln!(out, "| run | delay | req/s | errors | lifetime ms (client) | in progress at the server | max | Little's law, client's lifetimes | measured / predicted | Little's law, server's log | resets | delay line |").map_err(Error::stdout)?;
    writeln!(
        out,
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    )
    .map_err(Error::stdout)?;
    let mut rows = Vec::new();
    let runs = [("1-1", 0), ("1-2", 1), ("1-5", 2)];
    for (run, d) in runs {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let (label, delay) = &delays(&a.profile)[d];
        let rtts = dir.join(format!("exp1-{}-{run}-server-rtts.cdf", s.name));
        let mut args: Vec<String> = vec![
            "webbench".into(),
            url.clone(),
            "--rate".into(),
            "110".into(),
            "--clients".into(),
            "100".into(),
            "-d".into(),
            format!("{}s", a.exp1_seconds),
            "--observe".into(),
            "lo".into(),
            "--json".into(),
            "--series".into(),
            dir.join(format!("exp1-{}-{run}-series.csv", s.name))
                .to_string_lossy()
                .into_owned(),
        ];
        if let Some(d) = delay {
            args.extend([
                "--delay".into(),
                d.clone(),
                "--server-rtts".into(),
                rtts.to_string_lossy().into_owned(),
            ]);
        }
        let (v, _) = kansoku_json(ns, &args, false)?;
        let step = &v["steps"][0];
        let errors: u64 = v["results"]["errors"]
            .as_object()
            .map_or(0, |m| m.values().filter_map(Value::as_u64).sum());
        let valid = v["delay_line"]["valid"].as_bool();
        if valid == Some(false) {
            report
                .problems
                .push(format!("{} run {run}: the delay line was invalid", s.name));
        }
        writeln!(
            out,
            "| {run} kansoku | {label} | {:.1} | {errors} | {:.1} | {:.2} | {} | {:.2} | {:.3} | {:.2} | {} | {} |",
            // Answered over the run's asked length (the clients' own
            // figure counts the last answers' wait too).
            f(&v, &["results", "answered"]) / a.exp1_seconds as f64,
            f(&v, &["results", "lifetime", "mean_ms"]),
            f(step, &["little", "measured"]),
            step["server"]["max_in_progress"],
            f(step, &["little", "predicted"]),
            f(step, &["little", "ratio"]),
            f(step, &["server", "littles_law"]),
            f(step, &["server", "resets_by_server"]) + f(step, &["server", "resets_by_client"]),
            match valid {
                None => "-",
                Some(true) => "valid",
                Some(false) => "INVALID",
            }
        ).map_err(Error::stdout)?;
        rows.push(serde_json::json!({"run": run, "delay": label, "tool": "kansoku", "report": v}));
    }
    if a.no_httperf {
        return Ok(Value::Array(rows));
    }
    // httperf (runs 1-3, 1-4): one source address, 127.0.0.1, delayed as
    // a client by kansoku delay; the server watched by the same tap.
    let conns = (110 * a.exp1_seconds).to_string();
    for (run, profile) in [("1-3", "none"), ("1-4", "const:48ms")] {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let args: Vec<String> = [
            "delay",
            "--clients",
            "127.0.0.1",
            "--profile",
            profile,
            "--server",
            &format!("127.0.0.1:{}", s.port),
            "--observe",
            "lo",
            "--json",
            "--",
            "httperf",
            "--server",
            "127.0.0.1",
            "--port",
            &s.port.to_string(),
            "--uri",
            "/10k.html",
            "--rate",
            "110",
            "--num-conns",
            &conns,
            "--timeout",
            "10",
            "--hog",
        ]
        .iter()
        .map(|x| x.to_string())
        .collect();
        let (v, text) = kansoku_json(ns, &args, true)?;
        let lifetime = httperf_figure(&text, "Connection time [ms]: min", 2);
        let rate = httperf_figure(&text, "Request rate:", 0);
        let errors = httperf_figure(&text, "Errors: total", 0);
        let srv = &v["server"];
        let predicted = f(srv, &["arrival_rate"]) * lifetime / 1e3;
        let measured = f(srv, &["mean_in_progress"]);
        writeln!(
            out,
            "| {run} httperf | {} | {rate:.1} | {errors} | {lifetime:.1} | {measured:.2} | {} | {predicted:.2} | {:.3} | {:.2} | {} | {} |",
            if profile == "none" { "none" } else { "const 48 ms" },
            srv["max_in_progress"],
            measured / predicted,
            f(srv, &["littles_law"]),
            f(srv, &["resets_by_server"]) + f(srv, &["resets_by_client"]),
            if v["delay_line"]["valid"].as_bool() == Some(true) { "valid" } else { "INVALID" }
        ).map_err(Error::stdout)?;
        rows.push(serde_json::json!({"run": run, "delay": profile, "tool": "httperf", "report": v, "httperf": text}));
    }
    Ok(Value::Array(rows))
}

fn experiment_2(
    a: &BenchWebPaperArgs,
    ns: &Namespace,
    s: &Server,
    dir: &Path,
    out: &mut dyn Write,
    stop: &AtomicBool,
) -> Result<Value> {
    let url = format!("http://127.0.0.1:{}/2k.html", s.port);
    let steps: Vec<String> = a.steps.iter().map(u64::to_string).collect();
    let mut all = Vec::new();
    for (run, d) in [("2-1", 0), ("2-2", 2)] {
        // A run begins after the cooldown too: the connections the last
        // one left (in the accept queue, in TIME_WAIT) must not end, or be
        // reset, inside this run's first step.
        webbench::session::idle(Duration::from_secs(a.cooldown_seconds), stop);
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let (label, delay) = &delays(&a.profile)[d];
        writeln!(
            out,
            "\n### Experiment 2, {}, run {run} ({label}): 2 KB, fixed concurrency, {} s a step, {} s between\n",
            s.name, a.step_seconds, a.cooldown_seconds
        ).map_err(Error::stdout)?;
        let mut args: Vec<String> = vec![
            "webbench".into(),
            url.clone(),
            "-c".into(),
            steps.join(","),
            "-d".into(),
            format!("{}s", a.step_seconds),
            "--cooldown".into(),
            format!("{}s", a.cooldown_seconds),
            "--clients".into(),
            "100".into(),
            "--observe".into(),
            "lo".into(),
            "--json".into(),
            "--series".into(),
            dir.join(format!("exp2-{}-{run}-series.csv", s.name))
                .to_string_lossy()
                .into_owned(),
        ];
        if let Some(d) = delay {
            args.extend(["--delay".into(), d.clone()]);
        }
        let (v, _) = kansoku_json(ns, &args, false)?;
        writeln!(out, "| connections | req/s | arrivals/s | in progress | Little's law | reset rate | resets (server/client) | ListenOverflows | connect p50 / p99 ms | connects > 1 s | errors | generator busy |").map_err(Error::stdout)?;
        writeln!(
            out,
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        )
        .map_err(Error::stdout)?;
        for st in v["steps"].as_array().into_iter().flatten() {
            let errors: u64 = st["results"]["errors"]
                .as_object()
                .map_or(0, |m| m.values().filter_map(Value::as_u64).sum());
            let slow: u64 = st["results"]["connect_buckets"]
                .as_array()
                .map_or(0, |b| b.iter().skip(1).filter_map(Value::as_u64).sum());
            writeln!(
                out,
                "| {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.4} | {}/{} | {} | {:.1} / {:.1} | {slow} | {errors} | {:.0}% |",
                st["connections"],
                f(st, &["results", "requests_per_second"]),
                f(st, &["server", "arrival_rate"]),
                f(st, &["little", "measured"]),
                f(st, &["little", "predicted"]),
                f(st, &["server", "reset_rate"]),
                st["server"]["resets_by_server"],
                st["server"]["resets_by_client"],
                st["host"]["counters"]["TcpExt:ListenOverflows"],
                f(st, &["results", "connect", "p50_ms"]),
                f(st, &["results", "connect", "p99_ms"]),
                f(st, &["results", "generator_busy"]) * 100.0,
            ).map_err(Error::stdout)?;
        }
        all.push(serde_json::json!({"run": run, "delay": label, "report": v}));
    }
    Ok(Value::Array(all))
}

/// The delay line's precision under load (the check, not the
/// paper's): requests at `rate` per second of the 10 KB file, a connection
/// each, from 100 clients with the profile's round trips, and the round
/// trip the server saw on each handshake against the one its client was
/// given.
fn rtt_check(
    a: &BenchWebPaperArgs,
    ns: &Namespace,
    s: &Server,
    out: &mut dyn Write,
    report: &mut Report,
) -> Result<Value> {
    let url = format!("http://127.0.0.1:{}/10k.html", s.port);
    let args: Vec<String> = [
        "webbench",
        &url,
        "--rate",
        &a.rtt_rate.to_string(),
        "--clients",
        "100",
        "-d",
        &format!("{}s", a.rtt_seconds),
        "--delay",
        &format!("cdf:{}", a.profile.display()),
        "--observe",
        "lo",
        "--json",
    ]
    .iter()
    .map(|x| x.to_string())
    .collect();
    let (v, _) = kansoku_json(ns, &args, false)?;
    let d = &v["delay_line"];
    let seconds = f(&v, &["results", "seconds"]);
    let pps = f(d, &["received"]) / seconds;
    let r = &v["rtt"];
    writeln!(
        out,
        "\n### The delay line's precision, {}: {} requests/s of 10 KB, 100 clients with the profile, {} s\n",
        s.name,
        a.rtt_rate,
        a.rtt_seconds
    ).map_err(Error::stdout)?;
    writeln!(
        out,
        "| packets/s through the line, the load's seconds | the run's (drain included) | handshakes | seen - given p50 ms | p99 ms | max ms | line lateness p99 us | late (> 1 ms) | tap drops | delay line |"
    ).map_err(Error::stdout)?;
    writeln!(out, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|").map_err(Error::stdout)?;
    writeln!(
        out,
        "| {:.0} | {pps:.0} | {} | {:.3} | {:.3} | {:.3} | {} | {} | {} | {} |",
        f(d, &["received"]) / a.rtt_seconds as f64,
        r["handshakes"],
        f(r, &["error_p50_ms"]),
        f(r, &["error_p99_ms"]),
        f(r, &["error_max_ms"]),
        d["lateness"]["p99_us"],
        d["late"],
        v["tap"]["drops"],
        if d["valid"].as_bool() == Some(true) {
            "valid"
        } else {
            "INVALID"
        }
    )
    .map_err(Error::stdout)?;
    if d["valid"].as_bool() != Some(true) {
        report.problems.push(format!(
            "{}: the precision run's delay line was invalid",
            s.name
        ));
    }
    Ok(v)
}

/// The top of a y axis: a little above the largest value.
fn top(values: impl Iterator<Item = f64>) -> f64 {
    let m = values.filter(|v| v.is_finite()).fold(0.0, f64::max);
    if m <= 0.0 {
        1.0
    } else {
        m * 1.1
    }
}

fn chart<'a>(
    title: String,
    x: std::ops::Range<f64>,
    y: f64,
    xd: &'a str,
    yd: &'a str,
    series: Vec<Series>,
) -> LineChart<'a> {
    LineChart {
        title,
        x,
        y: 0.0..y,
        x_desc: Some(xd),
        y_desc: Some(yd),
        x_labels: None,
        x_label_formatter: None,
        y_label_area: 60,
        series,
    }
}

/// Experiment 1's connections in progress over time, a line per run
/// (Fig. 3.7's panels in one chart).
fn plot_exp1(rows: &Value, server: &str, dir: &Path) -> Result<PathBuf> {
    let mut series = Vec::new();
    let mut x1: f64 = 1.0;
    for (i, r) in rows.as_array().into_iter().flatten().enumerate() {
        let points: Vec<(f64, f64)> = r["report"]["series"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| Some((p[0].as_f64()?, p[1]["mean_in_progress"].as_f64()?)))
            .collect();
        if points.is_empty() {
            continue;
        }
        x1 = x1.max(points.last().map_or(1.0, |p| p.0));
        let label = format!(
            "{} {} ({})",
            r["run"].as_str().unwrap_or(""),
            r["tool"].as_str().unwrap_or(""),
            r["delay"].as_str().unwrap_or("")
        );
        series.push(Series::new(label, points, i));
    }
    let y = top(series.iter().flat_map(|s| s.points.iter().map(|p| p.1)));
    let path = dir.join(format!("exp1-{server}-in-progress.svg"));
    chart(
        format!(
            "Experiment 1, {server}: connections in progress at the server (110 requests/s, 10 KB)"
        ),
        0.0..x1,
        y,
        "seconds",
        "connections in progress",
        series,
    )
    .draw_file(&path)?;
    Ok(path)
}

/// Experiment 2 over the concurrency steps: connections in progress and
/// request rate, and the reset rate, for both runs.
fn plot_exp2(runs: &Value, server: &str, dir: &Path) -> Result<Vec<PathBuf>> {
    let mut paths = Vec::new();
    type Pick = fn(&Value) -> f64;
    let figures: [(&str, &str, Pick); 3] = [
        (
            "in-progress",
            "connections in progress at the server",
            |st| f(st, &["little", "measured"]),
        ),
        ("requests", "requests/s", |st| {
            f(st, &["results", "requests_per_second"])
        }),
        ("resets", "resets per connection arrived", |st| {
            f(st, &["server", "reset_rate"])
        }),
    ];
    for (name, what, pick) in figures {
        let mut series = Vec::new();
        let mut x1: f64 = 1.0;
        for (i, r) in runs.as_array().into_iter().flatten().enumerate() {
            let points: Vec<(f64, f64)> = r["report"]["steps"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|st| Some((st["connections"].as_f64()?, pick(st))))
                .filter(|p| p.1.is_finite())
                .collect();
            x1 = x1.max(points.last().map_or(1.0, |p| p.0));
            let mut s = Series::new(
                format!(
                    "{} ({})",
                    r["run"].as_str().unwrap_or(""),
                    r["delay"].as_str().unwrap_or("")
                ),
                points,
                i,
            );
            s.markers = true;
            series.push(s);
        }
        let y = top(series.iter().flat_map(|s| s.points.iter().map(|p| p.1)));
        let path = dir.join(format!("exp2-{server}-{name}.svg"));
        chart(
            format!("Experiment 2, {server}: {what} (2 KB, fixed concurrency)"),
            0.0..x1,
            y,
            "concurrent connections of the generator",
            what,
            series,
        )
        .draw_file(&path)?;
        paths.push(path);
    }
    Ok(paths)
}

/// The points of a CDF file (RTT_MS FRACTION lines).
fn cdf_points(path: &Path) -> Vec<(f64, f64)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let mut w = l.split_whitespace().map(|x| x.parse::<f64>().ok());
            Some((w.next()??, w.next()??))
        })
        .collect()
}

/// Fig. 3.6's check: the round trips the server saw (run 1-5's handshakes)
/// against the profile, as CDFs over log10 of the round trip.
fn plot_rtt_overlay(
    profile: &Path,
    seen: &Path,
    server: &str,
    dir: &Path,
) -> Result<Option<PathBuf>> {
    let seen = cdf_points(seen);
    if seen.is_empty() {
        return Ok(None);
    }
    let log = |v: Vec<(f64, f64)>| -> Vec<(f64, f64)> {
        v.into_iter()
            .filter(|p| p.0 > 0.0)
            .map(|(ms, q)| (ms.log10(), q))
            .collect()
    };
    let prof = log(cdf_points(profile));
    let seen = log(seen);
    let (x0, x1) = prof
        .iter()
        .chain(&seen)
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let fmt = |x: &f64| {
        format!("{:.3}", 10f64.powf(*x))
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    };
    let path = dir.join(format!("rtt-overlay-{server}.svg"));
    let mut c = chart(
        format!("Round trips: the profile and what {server} saw (SYN-ACK to ACK), run 1-5"),
        x0.floor()..x1.ceil(),
        1.02,
        "round trip (ms, log scale)",
        "fraction",
        vec![
            Series::new("profile (bench/web-rtt.cdf)", prof, 0),
            Series::new("seen at the server, 100 clients", seen, 1),
        ],
    );
    c.x_label_formatter = Some(&fmt);
    c.draw_file(&path)?;
    Ok(Some(path))
}

pub fn run(a: &BenchWebPaperArgs, stop: &AtomicBool, out: &mut dyn Write) -> Result<Report> {
    if !a.profile.is_file() {
        return Err(Error::input(format!(
            "{}: no such profile (bench/web-rtt.cdf in the repository)",
            a.profile.display()
        )));
    }
    let profile = a
        .profile
        .canonicalize()
        .map_err(|e| input(&a.profile.display().to_string(), e))?;
    let a = &BenchWebPaperArgs {
        profile,
        ..a.clone()
    };
    let spread = delay::Profile::parse(&format!("cdf:{}", a.profile.display()))
        .map_err(|e| input("profile", e))?;
    // The directory the servers' configurations and files are written to:
    // --out, or a new private one (removed at the end, on every path).
    let tmp;
    let dir = match &a.out {
        Some(d) => {
            std::fs::create_dir_all(d).map_err(|e| input(&d.display().to_string(), e))?;
            d.canonicalize()
                .map_err(|e| input(&d.display().to_string(), e))?
        }
        None => {
            tmp = tempfile::Builder::new()
                .prefix("kansoku-web-paper-")
                .tempdir()
                .map_err(|e| input("temporary directory", e))?;
            tmp.path().to_path_buf()
        }
    };
    // The paths go into the servers' configuration files, quoted.
    match dir.to_str() {
        Some(d) if !d.contains(['"', '\\', '\n', '\r']) => {}
        _ => {
            return Err(Error::usage(format!(
                "{}: a directory whose path has no quote, backslash or line break (it goes into the servers' configurations)",
                dir.display()
            )))
        }
    }
    let ns = Namespace::create("kwp").map_err(|e| input("network namespace (root)", e))?;
    std::fs::create_dir_all(&dir).map_err(|e| input(&dir.display().to_string(), e))?;
    // The servers run as www-data (Apache) and read the files from here.
    let www = dir.join("www");
    std::fs::create_dir_all(&www).map_err(|e| input("www", e))?;
    let fill = |n: usize| {
        (0..n)
            .map(|i| b"kansoku-paper004-"[i % 17])
            .collect::<Vec<u8>>()
    };
    std::fs::write(www.join("10k.html"), fill(10 * 1024)).map_err(|e| input("10k.html", e))?;
    std::fs::write(www.join("2k.html"), fill(2 * 1024)).map_err(|e| input("2k.html", e))?;
    for p in [&dir, &www] {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755));
    }
    let clients: Vec<std::net::IpAddr> = (0..100u8)
        .map(|i| std::net::IpAddr::from([127, 0, 0, 2 + i]))
        .collect();
    let mut rtts: Vec<f64> = spread
        .assign(&clients)
        .iter()
        .map(|(_, d)| d.as_secs_f64() * 1e3)
        .collect();
    rtts.sort_by(f64::total_cmp);
    let mean = rtts.iter().sum::<f64>() / rtts.len() as f64;
    let median = (rtts[49] + rtts[50]) / 2.0;
    let somaxconn = ns
        .exec(&["cat", "/proc/sys/net/core/somaxconn"])
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    writeln!(
        out,
        "# bench web-paper: MAWI WG 2001's experiments 1 and 2 on this host\n\nNamespace {}; kernel: somaxconn {somaxconn} (the namespace's); \
         profile: {} (its 100 clients' round trips: {:.1} to {:.1} ms, median {median:.1} ms, mean {mean:.1} ms, \
         mean/median {:.2}); files in {}",
        ns.name(),
        a.profile.display(),
        rtts[0],
        rtts[99],
        mean / median,
        dir.display()
    ).map_err(Error::stdout)?;
    let mut report = Report::default();
    let mut results = Vec::new();
    let base = 18_000 + (std::process::id() % 1000) as u16 * 2;
    for (i, name) in a.servers.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let port = base + i as u16;
        let server = match name {
            WebServer::Nginx => nginx(&ns, &dir, &www, port)?,
            WebServer::Apache => apache(&ns, &dir, &www, port)?,
        };
        wait_ready(&ns, port)?;
        writeln!(out, "\n## {}\n\n{}", server.name, server.setup).map_err(Error::stdout)?;
        let mut r = serde_json::json!({"server": server.name, "setup": server.setup});
        let mut plots = Vec::new();
        if a.experiments.contains(&1) {
            let rows = experiment_1(a, &ns, &server, &dir, out, &mut report, stop)?;
            if a.out.is_some() {
                plots.push(plot_exp1(&rows, server.name, &dir)?);
                let seen = dir.join(format!("exp1-{}-1-5-server-rtts.cdf", server.name));
                plots.extend(plot_rtt_overlay(&a.profile, &seen, server.name, &dir)?);
            }
            r["experiment_1"] = rows;
        }
        if a.experiments.contains(&3) && !stop.load(Ordering::Relaxed) {
            r["rtt_check"] = rtt_check(a, &ns, &server, out, &mut report)?;
        }
        if a.experiments.contains(&2) {
            let runs = experiment_2(a, &ns, &server, &dir, out, stop)?;
            if a.out.is_some() {
                plots.extend(plot_exp2(&runs, server.name, &dir)?);
            }
            r["experiment_2"] = runs;
        }
        if !plots.is_empty() {
            writeln!(out, "\nPlots:").map_err(Error::stdout)?;
            for p in &plots {
                writeln!(out, "- {}", p.display()).map_err(Error::stdout)?;
            }
        }
        results.push(r);
    }
    if stop.load(Ordering::Relaxed) {
        report.problems.push("stopped before the end".into());
    }
    if let Some(d) = &a.out {
        let path: PathBuf = d.join("web-paper.json");
        std::fs::write(
            &path,
            serde_json::to_vec(&serde_json::json!({"somaxconn": somaxconn, "servers": results}))
                .unwrap_or_default(),
        )
        .map_err(|e| Error::output(path.display().to_string(), &e))?;
    }
    Ok(report)
}
