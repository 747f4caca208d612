//! `kansoku webbench` against a real HTTP server (python3's http.server,
//! HTTP/1.1 with keep-alive, on a loopback port of its own): request
//! counts, connections with and without keep-alive, the open model's rate,
//! round-robin client addresses, per-request records in order, bad URLs;
//! and, as root, a delay line under the clients whose round trip the
//! connect times show. HTTPS against the same server wrapped in python's
//! ssl (a certificate from a CA made by openssl): TLS 1.2 and 1.3, the
//! handshake's times, certificates rejected and trusted. HTTP/2 against
//! nginx (over TLS with ALPN h2, and h2c), whose access log says which
//! protocol it spoke; and servers that answer with garbage.

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
    server_with(dir, None)
}

/// The same, over TLS with `certs`' server certificate (python's ssl
/// allows TLS 1.2 and 1.3).
fn server_with(dir: &std::path::Path, certs: Option<&Certs>) -> Server {
    std::fs::write(dir.join("index.html"), vec![b'x'; 2048]).unwrap();
    let tls = certs.map_or_else(String::new, |c| {
        format!(
            "import ssl\n\
             c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n\
             c.load_cert_chain({:?}, {:?})\n\
             s.socket = c.wrap_socket(s.socket, server_side=True)\n",
            p(&c.cert),
            p(&c.key)
        )
    });
    let script = format!(
        "import http.server, functools, sys\n\
         class H(http.server.SimpleHTTPRequestHandler):\n\
         \x20   protocol_version = 'HTTP/1.1'\n\
         \x20   def log_message(self, *a): pass\n\
         h = functools.partial(H, directory={:?})\n\
         s = http.server.ThreadingHTTPServer(('127.0.0.1', 0), h)\n\
         {tls}\
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
    // Answers longer than a read (the load thread's buffer is 64 KiB,
    // shared by its connections) are each whole, on the connections that
    // carried the ones before.
    std::fs::write(dir.path().join("big.bin"), vec![b'y'; 300_001]).unwrap();
    let big = format!("http://127.0.0.1:{}/big.bin", s.port);
    let (v, _) = webbench(&[&big, "-c", "4", "-n", "40", "-t", "2", "--keep-alive"]);
    let r = &v["results"];
    assert_eq!(r["answered"], 40, "{v}");
    assert_eq!(r["body_bytes"], 40 * 300_001, "{v}");
    assert_eq!(r["connections"], 4, "{v}");
    assert!(r["errors"].as_object().unwrap().is_empty(), "{v}");
}

#[test]
fn records_are_in_order_and_clients_take_turns() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path());
    let url = format!("http://127.0.0.1:{}/index.html", s.port);
    let csv = dir.path().join("records.csv");
    let (v, _) = webbench(&[
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
    // The run's time ends with its last request, here the last close
    // (the latest time in any record), not with the threads' teardown.
    let latest = text
        .lines()
        .skip(1)
        .flat_map(|l| {
            l.split(',')
                .skip(1)
                .take(8)
                .map(|f| f.parse::<u64>().unwrap())
        })
        .max()
        .unwrap();
    let seconds = v["results"]["seconds"].as_f64().unwrap();
    assert!(
        (seconds * 1e6 - latest as f64).abs() < 2.0,
        "seconds {seconds}, latest record time {latest} us"
    );
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
        // No TLS: tls_done is 0; the other times in order.
        assert_eq!(f[4], "0", "{l}");
        let t: Vec<u64> = [2, 3, 5, 6, 7, 8]
            .iter()
            .map(|&i| f[i].parse().unwrap())
            .collect();
        assert!(
            t.windows(2).all(|w| w[0] <= w[1]),
            "times out of order: {l}"
        );
        assert!(t[0] >= f[1].parse::<u64>().unwrap(), "{l}");
        assert_eq!(f[9], "200");
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
    if !testkit::require_root("webbench --delay") {
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
    // Both tools ran on the upper half of the CPUs (at least one).
    // The CPUs allowed to this process (`nproc` reads the same affinity
    // mask as the bench; available_parallelism also weighs cgroup quotas).
    let nproc = std::process::Command::new("nproc").output().unwrap();
    let n: usize = String::from_utf8_lossy(&nproc.stdout)
        .trim()
        .parse()
        .unwrap();
    let cpus: Vec<u64> = v["generator_cpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap())
        .collect();
    assert_eq!(cpus.len(), (n - n / 2), "{v}");
    assert!(cpus.iter().all(|&c| (c as usize) < 4096), "{v}");
    // A CPU the process may not use is refused before anything runs.
    let bad = run(&[
        "bench",
        "web",
        &url,
        "--generator-cpus",
        "4095",
        "-d",
        "1",
        "--rounds",
        "1",
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("CPU 4095"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
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
    if !testkit::require_root("webbench --observe") {
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
    if !testkit::require_root("bench web-paper") {
        return;
    }
    if !testkit::require_tool("nginx") {
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
    let name = text
        .split_whitespace()
        .skip_while(|w| *w != "Namespace")
        .nth(1)
        .map(|w| w.trim_end_matches(';').to_string())
        .unwrap_or_else(|| panic!("no namespace named: {text}"));
    assert!(name.starts_with("kwp-"), "{name}");
    let ns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let ns = String::from_utf8_lossy(&ns.stdout);
    assert!(
        !ns.lines()
            .any(|l| l.split_whitespace().next() == Some(name.as_str())),
        "{name} is left: {ns}"
    );
    // Nor any of its servers (a process can outlive its namespace's name).
    let conf = dir.path().canonicalize().unwrap().join("nginx.conf");
    let left = Command::new("pgrep")
        .args(["-f", p(&conf)])
        .output()
        .unwrap();
    assert!(
        left.stdout.is_empty(),
        "nginx left: {}",
        String::from_utf8_lossy(&left.stdout)
    );
}

/// A CA and a server certificate it signed for 127.0.0.1 and localhost
/// (webpki wants the name in subjectAltName, and a leaf that is no CA),
/// made by openssl.
struct Certs {
    ca: std::path::PathBuf,
    cert: std::path::PathBuf,
    key: std::path::PathBuf,
}

fn certs(dir: &std::path::Path) -> Certs {
    let f = |name: &str| dir.join(name);
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .output()
            .expect("openssl (scripts/install-deps.sh installs it)");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    let (ca_key, csr, ext) = (f("ca.key"), f("server.csr"), f("server.ext"));
    let c = Certs {
        ca: f("ca.pem"),
        cert: f("cert.pem"),
        key: f("key.pem"),
    };
    openssl(
        &[
            &["req", "-x509"][..],
            &ec,
            &["-days", "1", "-subj", "/CN=kansoku test CA"],
            &["-keyout", p(&ca_key), "-out", p(&c.ca)],
        ]
        .concat(),
    );
    openssl(
        &[
            &["req"][..],
            &ec,
            &[
                "-subj",
                "/CN=localhost",
                "-keyout",
                p(&c.key),
                "-out",
                p(&csr),
            ],
        ]
        .concat(),
    );
    std::fs::write(
        &ext,
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        p(&csr),
        "-CA",
        p(&c.ca),
        "-CAkey",
        p(&ca_key),
        "-set_serial",
        "1",
        "-days",
        "1",
        "-extfile",
        p(&ext),
        "-out",
        p(&c.cert),
    ]);
    c
}

/// The records CSV's rows, split.
fn rows(csv: &std::path::Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(csv).unwrap();
    let mut lines = text.lines();
    assert!(lines.next().unwrap().starts_with(
        "client,scheduled_us,connect_start_us,connect_done_us,tls_done_us,request_sent_us"
    ));
    lines
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

#[test]
fn https_answers_every_request_and_times_the_handshake() {
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let s = server_with(dir.path(), Some(&c));
    let url = format!("https://127.0.0.1:{}/index.html", s.port);
    let csv = dir.path().join("records.csv");
    let (v, _) = webbench(&[
        &url,
        "-k",
        "-c",
        "4",
        "-n",
        "60",
        "-t",
        "2",
        "--records",
        p(&csv),
    ]);
    let r = &v["results"];
    assert_eq!(v["protocol"], "HTTP/1.1 over TLS", "{v}");
    assert_eq!(r["answered"], 60, "{v}");
    assert_eq!(r["ok"], 60);
    assert_eq!(r["status"]["200"], 60);
    assert_eq!(r["body_bytes"], 60 * 2048);
    assert_eq!(r["connections"], 60);
    assert!(r["errors"].as_object().unwrap().is_empty(), "{v}");
    // A handshake per connection, each timed; python's ssl and rustls
    // agree on TLS 1.3 when both are offered.
    assert_eq!(r["tls"]["count"], 60, "{v}");
    assert!(r["tls"]["p50_ms"].as_f64().unwrap() > 0.0, "{v}");
    assert_eq!(r["tls_versions"], serde_json::json!({"1.3": 60}), "{v}");
    let rows = rows(&csv);
    assert_eq!(rows.len(), 60);
    for f in &rows {
        let t = |i: usize| f[i].parse::<u64>().unwrap();
        let (connect_done, tls_done, request_sent) = (t(3), t(4), t(5));
        assert!(
            connect_done > 0 && connect_done <= tls_done && tls_done <= request_sent,
            "tls_done not between connect_done and request_sent: {f:?}"
        );
        assert_eq!((f[9].as_str(), f[10].as_str()), ("200", "2048"), "{f:?}");
    }
    // Keep-alive: two connections, two handshakes, all answered.
    let (v, _) = webbench(&[&url, "-k", "-c", "2", "-n", "40", "-t", "1", "--keep-alive"]);
    let r = &v["results"];
    assert_eq!(r["answered"], 40, "{v}");
    assert_eq!(r["connections"], 2, "{v}");
    assert_eq!(r["tls"]["count"], 2, "{v}");
    // Answers longer than a TLS connection's 16 KiB read buffer.
    std::fs::write(dir.path().join("big.bin"), vec![b'y'; 100_003]).unwrap();
    let big = format!("https://127.0.0.1:{}/big.bin", s.port);
    let (v, _) = webbench(&[&big, "-k", "-c", "2", "-n", "20", "-t", "1", "--keep-alive"]);
    let r = &v["results"];
    assert_eq!(r["answered"], 20, "{v}");
    assert_eq!(r["body_bytes"], 20 * 100_003, "{v}");
    assert_eq!(r["connections"], 2, "{v}");
}

#[test]
fn tls_1_2_and_1_3_are_each_agreed_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let s = server_with(dir.path(), Some(&c));
    let url = format!("https://127.0.0.1:{}/index.html", s.port);
    for version in ["1.2", "1.3"] {
        let (v, _) = webbench(&[&url, "-k", "-c", "2", "-n", "10", "--tls-version", version]);
        let r = &v["results"];
        assert_eq!(r["answered"], 10, "{version}: {v}");
        assert_eq!(r["body_bytes"], 10 * 2048, "{version}: {v}");
        assert_eq!(r["tls_versions"], serde_json::json!({ version: 10 }), "{v}");
    }
    let out = run(&["webbench", &url, "-k", "--tls-version", "1.1"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn an_untrusted_certificate_is_a_tls_error_and_cacert_trusts_its_ca() {
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let s = server_with(dir.path(), Some(&c));
    let url = format!("https://127.0.0.1:{}/index.html", s.port);
    // Mozilla's roots do not know the test CA: every handshake fails, and
    // failed requests are results (exit 0), as refused connections are.
    let (v, _) = webbench(&[&url, "-c", "2", "-n", "6"]);
    let r = &v["results"];
    assert_eq!(r["answered"], 0, "{v}");
    assert_eq!(r["errors"], serde_json::json!({"tls": 6}), "{v}");
    let why = r["first_errors"]["tls"].as_str().unwrap();
    assert!(why.contains("certificate"), "{why}");
    let (v, _) = webbench(&[&url, "-c", "2", "-n", "6", "--cacert", p(&c.ca)]);
    assert_eq!(v["results"]["answered"], 6, "{v}");
    assert_eq!(v["results"]["ok"], 6, "{v}");
    // The CA is for the issuer, not the server's own certificate's key: a
    // file of the wrong certificate does not help.
    let (v, _) = webbench(&[&url, "-n", "2", "--cacert", p(&c.cert)]);
    assert_eq!(v["results"]["errors"]["tls"], 2, "{v}");
    // Bad flags: input and usage errors.
    for (args, expect) in [
        (
            vec![url.as_str(), "--cacert", "/no/such.pem"],
            "/no/such.pem",
        ),
        (vec![url.as_str(), "--cacert", p(&c.key)], "no certificate"),
        (vec!["http://127.0.0.1:1/", "-k"], "https://"),
        (
            vec!["http://127.0.0.1:1/", "--http2", "--streams", "4"],
            "--keep-alive",
        ),
        (vec!["http://127.0.0.1:1/", "--streams", "4"], "--http2"),
        (
            vec![url.as_str(), "-k", "--cacert", p(&c.ca)],
            "cannot be used",
        ),
    ] {
        let mut all = vec!["webbench"];
        all.extend(args);
        let out = run(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{all:?}: {err}");
        assert!(err.contains(expect), "{all:?}: {err}");
    }
}

struct Nginx {
    child: Child,
    dir: std::path::PathBuf,
    /// HTTP/2 over TLS (ALPN h2).
    tls: u16,
    /// HTTP/2 cleartext (prior knowledge).
    h2c: u16,
    /// h2c, GOAWAY after every 20 requests on a connection.
    goaway: u16,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Nginx {
    /// Its access log: the port, protocol, status and body bytes of each
    /// request it answered.
    fn log(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.join("access.log"))
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

/// nginx (one process, no master, as the user running the test) on three
/// free loopback ports, serving `page.bin` of `size` bytes.
fn nginx(dir: &std::path::Path, c: &Certs, size: usize) -> Nginx {
    let root = dir.join("www");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("page.bin"), vec![b'h'; size]).unwrap();
    let ports: Vec<u16> = {
        let l: Vec<_> = (0..3)
            .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
            .collect();
        l.iter().map(|l| l.local_addr().unwrap().port()).collect()
    };
    let d = p(dir);
    let temp: String = ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"]
        .iter()
        .map(|t| format!("    {t}_temp_path {d}/{t};\n"))
        .collect();
    let conf = format!(
        "worker_processes 1;\nmaster_process off;\ndaemon off;\n\
         error_log {d}/error.log warn;\npid {d}/nginx.pid;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n\
         {temp}\
         \x20   log_format proto '$server_port $server_protocol $status $body_bytes_sent';\n\
         \x20   access_log {d}/access.log proto;\n\
         \x20   server {{\n\
         \x20       listen 127.0.0.1:{} ssl http2;\n\
         \x20       listen 127.0.0.1:{} http2;\n\
         \x20       ssl_certificate {};\n\
         \x20       ssl_certificate_key {};\n\
         \x20       ssl_protocols TLSv1.2 TLSv1.3;\n\
         \x20       root {};\n\
         \x20   }}\n\
         \x20   server {{\n\
         \x20       listen 127.0.0.1:{} http2;\n\
         \x20       keepalive_requests 20;\n\
         \x20       root {};\n\
         \x20   }}\n\
         }}\n",
        ports[0],
        ports[1],
        p(&c.cert),
        p(&c.key),
        p(&root),
        ports[2],
        p(&root)
    );
    let conf_path = dir.join("nginx.conf");
    std::fs::write(&conf_path, conf).unwrap();
    let child = Command::new("nginx")
        .args(["-p", d, "-c", p(&conf_path)])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nginx (scripts/install-deps.sh installs nginx-light)");
    let n = Nginx {
        child,
        dir: dir.to_path_buf(),
        tls: ports[0],
        h2c: ports[1],
        goaway: ports[2],
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    for port in &ports {
        while std::net::TcpStream::connect(("127.0.0.1", *port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "nginx did not start: {}",
                std::fs::read_to_string(dir.join("error.log")).unwrap_or_default()
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    n
}

#[test]
fn http2_over_tls_and_cleartext_in_both_models() {
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let size = 5000;
    let n = nginx(dir.path(), &c, size);
    let tls = format!("https://127.0.0.1:{}/page.bin", n.tls);
    let h2c = format!("http://127.0.0.1:{}/page.bin", n.h2c);
    let answered = |v: &Value| v["results"]["answered"].as_u64().unwrap();
    let clean = |v: &Value| {
        let r = &v["results"];
        assert!(r["errors"].as_object().unwrap().is_empty(), "{v}");
        assert_eq!(r["ok"], r["answered"], "{v}");
        assert_eq!(
            r["body_bytes"].as_u64().unwrap(),
            answered(v) * size as u64,
            "{v}"
        );
    };
    let mut total = 0;
    // Over TLS, closed model, keep-alive: four connections carry them all
    // (h2load -c 4 -m 1).
    let (v, _) = webbench(&[
        &tls,
        "--cacert",
        p(&c.ca),
        "--http2",
        "-c",
        "4",
        "-n",
        "200",
        "-t",
        "2",
        "--keep-alive",
    ]);
    assert_eq!(
        v["protocol"], "HTTP/2 over TLS, 1 stream a connection",
        "{v}"
    );
    assert_eq!(answered(&v), 200, "{v}");
    clean(&v);
    let r = &v["results"];
    assert_eq!(r["status"]["200"], 200, "{v}");
    assert_eq!(r["connections"], 4, "{v}");
    assert_eq!(r["tls_versions"], serde_json::json!({"1.3": 4}), "{v}");
    assert!(r["tls"]["p50_ms"].as_f64().unwrap() > 0.0, "{v}");
    assert!(r["first_byte"]["p50_ms"].as_f64().unwrap() > 0.0, "{v}");
    total += 200;
    // A connection per request (the paper's mode): each its handshakes
    // and one stream; the records' times in order.
    let csv = dir.path().join("h2.csv");
    let (v, _) = webbench(&[
        &tls,
        "-k",
        "--http2",
        "-c",
        "2",
        "-n",
        "30",
        "--tls-version",
        "1.2",
        "--records",
        p(&csv),
    ]);
    assert_eq!(answered(&v), 30, "{v}");
    clean(&v);
    assert_eq!(v["results"]["connections"], 30, "{v}");
    assert_eq!(
        v["results"]["tls_versions"],
        serde_json::json!({"1.2": 30}),
        "{v}"
    );
    for f in rows(&csv) {
        let t: Vec<u64> = f[2..9].iter().map(|x| x.parse().unwrap()).collect();
        assert!(t[0] > 0 && t.windows(2).all(|w| w[0] <= w[1]), "{f:?}");
        assert_eq!(f[9], "200");
    }
    total += 30;
    // Cleartext (h2c), eight streams at a time on each of two connections.
    let (v, _) = webbench(&[
        &h2c,
        "--http2",
        "-c",
        "2",
        "-n",
        "300",
        "-t",
        "1",
        "--keep-alive",
        "--streams",
        "8",
    ]);
    assert_eq!(answered(&v), 300, "{v}");
    clean(&v);
    assert_eq!(v["results"]["connections"], 2, "{v}");
    assert_eq!(v["results"]["tls"]["count"], 0, "{v}");
    total += 300;
    // The open model, requests spread over kept connections, and a
    // connection per request.
    for args in [vec![h2c.as_str(), "--keep-alive"], vec![tls.as_str(), "-k"]] {
        let mut all = args.clone();
        all.extend(["--http2", "--rate", "100", "-d", "1s", "-t", "1"]);
        let (v, _) = webbench(&all);
        let a = answered(&v);
        assert!((95..=105).contains(&a), "{args:?}: {v}");
        clean(&v);
        let conns = v["results"]["connections"].as_u64().unwrap();
        if args.contains(&"--keep-alive") {
            assert!(conns < 10, "{args:?}: {conns} connections: {v}");
        } else {
            assert_eq!(conns, a, "{v}");
        }
        total += a;
    }
    // nginx says each of them came to it over HTTP/2.
    let log = n.log();
    assert_eq!(log.len() as u64, total, "{log:?}");
    for l in &log {
        assert!(l.ends_with(&format!("HTTP/2.0 200 {size}")), "{l}");
    }
}

#[test]
fn http2_requests_go_on_a_new_connection_when_the_server_sends_goaway() {
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let n = nginx(dir.path(), &c, 100);
    let url = format!("http://127.0.0.1:{}/page.bin", n.goaway);
    // nginx ends each connection after 20 requests with GOAWAY: the
    // requests that found theirs going away go on the next, none failed.
    for streams in ["1", "4"] {
        let (v, _) = webbench(&[
            &url,
            "--http2",
            "-c",
            "2",
            "-n",
            "200",
            "-t",
            "1",
            "--keep-alive",
            "--streams",
            streams,
        ]);
        let r = &v["results"];
        assert_eq!(r["answered"], 200, "--streams {streams}: {v}");
        assert!(r["errors"].as_object().unwrap().is_empty(), "{v}");
        assert!(r["connections"].as_u64().unwrap() >= 10, "{v}");
    }
    let (v, _) = webbench(&[&url, "--http2", "--rate", "200", "-d", "1s", "--keep-alive"]);
    assert!(
        v["results"]["errors"].as_object().unwrap().is_empty(),
        "{v}"
    );
    assert!(v["results"]["connections"].as_u64().unwrap() >= 9, "{v}");
}

/// A server that answers every connection with `garbage`, then reads
/// until the client gives up (so that the garbage, not a closed
/// connection, is what the client sees).
fn garbage_server(garbage: &'static [u8]) -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            std::thread::spawn(move || {
                let _ = std::io::Write::write_all(&mut s, garbage);
                let _ = std::io::copy(&mut s, &mut std::io::sink());
            });
        }
    });
    port
}

#[test]
fn servers_that_answer_garbage_give_errors_not_panics() {
    let junk: &'static [u8] =
        b"\x00\x00\x12\x04\x00\x00\x00\x00\x00HTTP/1.1 200 OK\r\n\r\n\xff\xfe";
    let port = garbage_server(junk);
    for (url, flags, class) in [
        (
            format!("http://127.0.0.1:{port}/"),
            vec!["--http2"],
            "protocol",
        ),
        (format!("https://127.0.0.1:{port}/"), vec!["-k"], "tls"),
        (
            format!("https://127.0.0.1:{port}/"),
            vec!["-k", "--http2"],
            "tls",
        ),
    ] {
        let mut args = vec![url.as_str(), "-n", "4", "-c", "2", "--timeout", "2s"];
        args.extend(flags.iter());
        let (v, out) = webbench(&args);
        let r = &v["results"];
        assert_eq!(r["answered"], 0, "{args:?}: {v}");
        assert_eq!(r["errors"][class], 4, "{args:?}: {v}");
        assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    }
}
