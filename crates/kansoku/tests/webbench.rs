//! `kansoku webbench` against a real HTTP server (python3's http.server,
//! HTTP/1.1 with keep-alive, on a loopback port of its own): request
//! counts, connections with and without keep-alive, the open model's rate,
//! round-robin client addresses, per-request records in order, bad URLs;
//! and, as root, a delay line under the clients whose round trip the
//! connect times show.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use common::*;
use serde_json::Value;

struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// python3's http.server on 127.0.0.1, a free port, serving `dir`
/// (HTTP/1.1, so connections stay open when asked).
fn server(dir: &std::path::Path) -> Server {
    std::fs::write(dir.join("index.html"), vec![b'x'; 2048]).unwrap();
    let script = format!(
        "import http.server, functools, sys\n\
         class H(http.server.SimpleHTTPRequestHandler):\n\
         \x20   protocol_version = 'HTTP/1.1'\n\
         \x20   def log_message(self, *a): pass\n\
         h = functools.partial(H, directory={:?})\n\
         s = http.server.ThreadingHTTPServer(('127.0.0.1', 0), h)\n\
         print(s.server_address[1], flush=True)\n\
         s.serve_forever()\n",
        p(dir)
    );
    let mut child = Command::new("python3")
        .args(["-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line.trim().parse().unwrap();
    Server { child, port }
}

fn webbench(args: &[&str]) -> (Value, std::process::Output) {
    let mut all = vec!["webbench"];
    all.extend_from_slice(args);
    all.push("--json");
    let out = run(&all);
    assert!(
        out.status.success(),
        "webbench {args:?}: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    (serde_json::from_slice(&out.stdout).unwrap(), out)
}

#[test]
fn a_closed_run_answers_every_request_on_the_connections_it_should() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path());
    let url = format!("http://127.0.0.1:{}/index.html", s.port);
    // A connection per request.
    let (v, _) = webbench(&[&url, "-c", "4", "-n", "200", "-t", "2"]);
    let r = &v["results"];
    assert_eq!(r["answered"], 200, "{v}");
    assert_eq!(r["ok"], 200);
    assert_eq!(r["connections"], 200);
    assert_eq!(r["body_bytes"], 200 * 2048);
    assert_eq!(r["status"]["200"], 200);
    assert!(r["errors"].as_object().unwrap().is_empty(), "{v}");
    assert!(r["latency"]["p50_ms"].as_f64().unwrap() > 0.0);
    // Keep-alive: four connections carry them all.
    let (v, _) = webbench(&[&url, "-c", "4", "-n", "200", "-t", "2", "--keep-alive"]);
    assert_eq!(v["results"]["answered"], 200, "{v}");
    assert_eq!(v["results"]["connections"], 4, "{v}");
}

#[test]
fn records_are_in_order_and_clients_take_turns() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path());
    let url = format!("http://127.0.0.1:{}/index.html", s.port);
    let csv = dir.path().join("records.csv");
    webbench(&[
        &url,
        "-c",
        "3",
        "-n",
        "50",
        "--clients",
        "5",
        "--records",
        p(&csv),
    ]);
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    assert!(lines
        .next()
        .unwrap()
        .starts_with("client,scheduled_us,connect_start_us"));
    let mut per_client = std::collections::BTreeMap::<String, u32>::new();
    let mut n = 0;
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        *per_client.entry(f[0].to_string()).or_default() += 1;
        let t: Vec<u64> = f[2..8].iter().map(|x| x.parse().unwrap()).collect();
        assert!(
            t.windows(2).all(|w| w[0] <= w[1]),
            "times out of order: {l}"
        );
        assert!(t[0] >= f[1].parse::<u64>().unwrap(), "{l}");
        assert_eq!(f[8], "200");
        n += 1;
    }
    assert_eq!(n, 50);
    let expect: std::collections::BTreeMap<String, u32> =
        (2..7).map(|i| (format!("127.0.0.{i}"), 10)).collect();
    assert_eq!(per_client, expect);
}

#[test]
fn an_open_run_starts_requests_at_its_rate() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path());
    let url = format!("http://127.0.0.1:{}/index.html", s.port);
    for poisson in [false, true] {
        let mut args = vec![url.as_str(), "--rate", "200", "-d", "2s"];
        if poisson {
            args.push("--poisson");
        }
        let (v, _) = webbench(&args);
        let answered = v["results"]["answered"].as_u64().unwrap();
        // 400 scheduled in two seconds (Poisson: within four deviations).
        let (lo, hi) = if poisson { (320, 480) } else { (395, 405) };
        assert!(
            (lo..=hi).contains(&answered),
            "poisson {poisson}: {answered} answered: {v}"
        );
    }
}

#[test]
fn urls_that_cannot_be_used_are_input_errors() {
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    for (url, expect) in [
        (format!("http://127.0.0.1:{port}/"), "cannot connect"),
        ("not a url".to_string(), "not a URL"),
        ("ftp://127.0.0.1/".to_string(), "scheme"),
        ("http://no-such-host.invalid/".to_string(), "resolve"),
    ] {
        let out = run(&["webbench", &url, "-n", "1"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{url}: {err}");
        assert!(err.contains(expect), "{url}: {err}");
    }
    for rate in ["0", "-5", "nan", "2e7"] {
        let out = run(&["webbench", "http://127.0.0.1:1/", &format!("--rate={rate}")]);
        assert_eq!(out.status.code(), Some(2), "--rate {rate}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("at most 10,000,000"));
    }
    let out = run(&["webbench", "http://127.0.0.1:1/", "--delay", "const:5ms"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--clients"));
}

#[test]
fn a_delay_line_under_the_clients_shows_in_the_connect_times() {
    if !capture::netns::can_run("webbench --delay") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path());
    let url = format!("http://127.0.0.1:{}/index.html", s.port);
    let (v, _) = webbench(&[
        &url,
        "-c",
        "2",
        "-n",
        "20",
        "--clients",
        "4",
        "--delay",
        "const:20ms",
    ]);
    let connect = v["results"]["connect"]["p50_ms"].as_f64().unwrap();
    assert!(
        (connect - 20.0).abs() <= 2.0,
        "connect p50 {connect} ms: {v}"
    );
    // The request and the answer take another round trip.
    assert!(
        v["results"]["latency"]["p50_ms"].as_f64().unwrap() >= 40.0,
        "{v}"
    );
    assert_eq!(v["delay_line"]["valid"], true, "{v}");
    assert_eq!(v["results"]["answered"], 20);
}

#[test]
fn a_server_that_never_answers_times_out_each_request_in_bounded_time() {
    // Connections queue in the listener's backlog and are never answered.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://127.0.0.1:{}/", silent.local_addr().unwrap().port());
    let start = std::time::Instant::now();
    let (v, _) = webbench(&[
        &url,
        "-c",
        "2",
        "-n",
        "4",
        "-t",
        "1",
        "--timeout",
        "200ms",
        "--keep-alive",
    ]);
    let took = start.elapsed();
    assert_eq!(v["results"]["errors"]["timeout"], 4, "{v}");
    assert_eq!(v["results"]["answered"], 0);
    // Two rounds of two requests, each cut between 200 and 250 ms (the
    // watchdog looks every quarter of the timeout), plus start-up.
    assert!(took < std::time::Duration::from_secs(3), "{took:?}");
    drop(silent);
}

#[test]
fn bench_web_runs_wrk_beside_and_gives_the_ratio() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path());
    let url = format!("http://127.0.0.1:{}/index.html", s.port);
    let out = run(&[
        "bench", "web", &url, "-t", "1", "-c", "4", "-d", "1", "--rounds", "2", "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rounds = v["rounds"].as_array().unwrap();
    assert_eq!(rounds.len(), 2, "{v}");
    for r in rounds {
        let (k, w) = (&r["kansoku"], &r["wrk"]);
        assert!(k["requests_per_second"].as_f64().unwrap() > 0.0, "{v}");
        assert!(w["requests_per_second"].as_f64().unwrap() > 0.0, "{v}");
        assert!(k["p99_ms"].as_f64().unwrap() >= k["p50_ms"].as_f64().unwrap());
        let ratio =
            k["requests_per_second"].as_f64().unwrap() / w["requests_per_second"].as_f64().unwrap();
        assert!((r["ratio"].as_f64().unwrap() - ratio).abs() < 1e-9);
    }
    assert!(v["median_ratio"].as_f64().unwrap() > 0.0);
}

#[test]
fn a_sweep_runs_one_step_per_connection_count() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path());
    let url = format!("http://127.0.0.1:{}/index.html", s.port);
    let (v, _) = webbench(&[&url, "-c", "1,3", "-d", "1s", "--cooldown", "200ms"]);
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{v}");
    assert_eq!(
        (
            steps[0]["connections"].as_u64(),
            steps[1]["connections"].as_u64()
        ),
        (Some(1), Some(3))
    );
    for st in steps {
        let r = &st["results"];
        assert!(r["answered"].as_u64().unwrap() > 0, "{st}");
        assert!(r["errors"].as_object().unwrap().is_empty(), "{st}");
        // Each request had its own connection, closed by the server.
        assert_eq!(r["connections"], r["answered"]);
        assert!(r["lifetime"]["count"].as_u64().unwrap() > 0, "{st}");
        assert!(r["generator_cpu_seconds"].as_f64().unwrap() > 0.0, "{st}");
    }
    // The second step began after the first and the cooldown.
    let gap = steps[1]["results"]["start_unix_ns"].as_u64().unwrap()
        - steps[0]["results"]["start_unix_ns"].as_u64().unwrap();
    assert!(gap >= 1_200_000_000, "{gap} ns");
    // A bad list is a usage error.
    let bad = run(&["webbench", &url, "-c", "1,0"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn the_server_side_seen_from_its_packets_agrees_with_the_clients_and_littles_law() {
    if !capture::netns::can_run("webbench --observe") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path());
    let url = format!("http://127.0.0.1:{}/index.html", s.port);
    let series = dir.path().join("series.csv");
    let rtts = dir.path().join("rtts.cdf");
    let (v, _) = webbench(&[
        &url,
        "--rate",
        "60",
        "-d",
        "4s",
        "--clients",
        "6",
        "--delay",
        "const:30ms",
        "--observe",
        "lo",
        "--series",
        p(&series),
        "--server-rtts",
        p(&rtts),
    ]);
    let st = &v["steps"][0];
    let (r, x, l) = (&st["results"], &st["server"], &st["little"]);
    assert!(r["errors"].as_object().unwrap().is_empty(), "{v}");
    let answered = r["answered"].as_u64().unwrap();
    assert!(answered >= 200, "{v}");
    // Every connection the clients made, the tap saw arrive and close, in
    // the steady window's share: ~60/s.
    let rate = x["arrival_rate"].as_f64().unwrap();
    assert!((rate - 60.0).abs() < 6.0, "arrivals {rate}/s: {v}");
    assert_eq!(x["resets_by_server"], 0, "{v}");
    assert_eq!(x["resets_by_client"], 0, "{v}");
    // Each connection lives about two round trips (handshake, request):
    // about 60/s x 60 ms = 3.6 at the server, as Little's law predicts from
    // the clients' own lifetimes.
    let measured = l["measured"].as_f64().unwrap();
    let ratio = l["ratio"].as_f64().unwrap();
    assert!(
        (2.5..6.0).contains(&measured),
        "in progress {measured}: {v}"
    );
    assert!(
        (0.9..=1.1).contains(&ratio),
        "measured / predicted {ratio}: {v}"
    );
    // The server closed first: its connections wait in TIME_WAIT, apart.
    assert!(x["mean_time_wait"].as_f64().unwrap() > 10.0, "{v}");
    // Handshake round trips at the server: the profile's 30 ms.
    let rtt = &v["rtt"];
    assert_eq!(rtt["handshakes"].as_u64(), Some(answered), "{v}");
    assert!(rtt["error_p50_ms"].as_f64().unwrap() < 1.0, "{v}");
    assert_eq!(v["tap"]["drops"], 0, "{v}");
    // The series has a row per second; the CDF reads back as a profile.
    let rows = std::fs::read_to_string(&series).unwrap();
    assert!(rows.lines().count() >= 5, "{rows}");
    let cdf = std::fs::read_to_string(&rtts).unwrap();
    let points: Vec<(f64, f64)> = cdf
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let mut w = l.split_whitespace().map(|x| x.parse::<f64>().unwrap());
            (w.next().unwrap(), w.next().unwrap())
        })
        .collect();
    let median = points.iter().find(|(_, f)| *f >= 0.5).unwrap().0;
    assert!((median - 30.0).abs() < 1.0, "median {median}: {cdf}");
}

#[test]
fn bench_web_paper_runs_experiment_1_against_nginx_and_leaves_nothing_behind() {
    if !capture::netns::can_run("bench web-paper") {
        return;
    }
    if Command::new("nginx").arg("-v").output().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "nginx is missing: scripts/install-deps.sh installs it"
        );
        eprintln!("skipping: no nginx");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let profile = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/web-rtt.cdf");
    let out = run(&[
        "bench",
        "web-paper",
        "--servers",
        "nginx",
        "--experiments",
        "1",
        "--exp1-seconds",
        "3",
        "--profile",
        p(&profile),
        "--out",
        p(dir.path()),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for run in [
        "1-1 kansoku",
        "1-2 kansoku",
        "1-5 kansoku",
        "1-3 httperf",
        "1-4 httperf",
    ] {
        assert!(text.contains(run), "{run}: {text}");
    }
    let v: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("web-paper.json")).unwrap()).unwrap();
    let rows = v["servers"][0]["experiment_1"].as_array().unwrap();
    let in_progress = |i: usize| {
        rows[i]["report"]["steps"][0]["little"]["measured"]
            .as_f64()
            .unwrap()
    };
    // The paper's point: a delay holds more connections at the server, and
    // the spread profile more than a constant delay with the same median.
    assert!(in_progress(1) > 5.0 * in_progress(0).max(0.1), "{v}");
    assert!(in_progress(2) > in_progress(1), "{v}");
    // Nothing of the run is left: its namespace is gone.
    let ns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let ns = String::from_utf8_lossy(&ns.stdout);
    assert!(!ns.lines().any(|l| l.starts_with("kwp-")), "{ns}");
}
