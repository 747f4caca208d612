//! `kansoku delay` end to end, each test in a network namespace of its own
//! (its iptables rules, its loopback): an HTTP server on 127.0.0.1, curl
//! from client address 127.0.0.2 through the delay line, and what curl
//! measures (`-w`) against the profile; a queue too small for the load
//! makes the run invalid; rules are gone after SIGINT, and after SIGKILL
//! once the next run has started. Root only: skipped with a note elsewhere,
//! required where `CI` is set. Bad input needs no root.

mod common;

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use capture::netns::Namespace;
use common::*;
use serde_json::Value;
use testkit::require_root;

/// A child killed when dropped.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const PORT: &str = "8080";

/// An HTTP server (python3's http.server) on 127.0.0.1:8080 in `ns`,
/// serving `dir`; with `tls`, HTTPS with a self-signed certificate.
fn server(ns: &Namespace, dir: &std::path::Path, tls: bool) -> Guard {
    std::fs::write(dir.join("index.html"), "hello\n").unwrap();
    let script = if tls {
        let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
        let ok = Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-days",
                "1",
            ])
            .args([
                "-subj",
                "/CN=localhost",
                "-keyout",
                p(&key),
                "-out",
                p(&cert),
            ])
            .stderr(Stdio::null())
            .status()
            .unwrap()
            .success();
        assert!(ok, "openssl req");
        format!(
            "import http.server, ssl, functools\n\
             h = functools.partial(http.server.SimpleHTTPRequestHandler, directory={dir:?})\n\
             s = http.server.ThreadingHTTPServer(('127.0.0.1', {PORT}), h)\n\
             c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n\
             c.load_cert_chain({cert:?}, {key:?})\n\
             s.socket = c.wrap_socket(s.socket, server_side=True)\n\
             s.serve_forever()\n",
            dir = p(dir),
            cert = p(&cert),
            key = p(&key)
        )
    } else {
        format!(
            "import http.server, functools\n\
             h = functools.partial(http.server.SimpleHTTPRequestHandler, directory={dir:?})\n\
             http.server.ThreadingHTTPServer(('127.0.0.1', {PORT}), h).serve_forever()\n",
            dir = p(dir)
        )
    };
    let child = ns
        .command(&["python3", "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let g = Guard(child);
    // Wait until it accepts connections.
    let deadline = Instant::now() + Duration::from_secs(10);
    while ns
        .command(&["bash", "-c", &format!("exec 3<>/dev/tcp/127.0.0.1/{PORT}")])
        .stderr(Stdio::null())
        .status()
        .map_or(true, |s| !s.success())
    {
        assert!(Instant::now() < deadline, "the test server did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    g
}

fn kansoku_in(ns: &Namespace, args: &[&str]) -> Command {
    let mut argv = vec![env!("CARGO_BIN_EXE_kansoku")];
    argv.extend_from_slice(args);
    ns.command(&argv)
}

fn output(mut c: Command) -> Output {
    c.output().unwrap()
}

fn json_of(out: &Output) -> Value {
    // With a command, the report is on stderr, after the command's lines.
    let text = String::from_utf8_lossy(&out.stderr);
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| {
            panic!(
                "no JSON report; stdout: {}\nstderr: {text}",
                String::from_utf8_lossy(&out.stdout)
            )
        });
    serde_json::from_str(line).unwrap()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// curl's connect, TLS-done and first-byte times (ms) for `n` requests
/// from 127.0.0.2 through a delay line with `profile`.
fn curl_times(ns: &Namespace, url: &str, n: usize, profile: &str) -> (Vec<[f64; 3]>, Value) {
    let curl = format!(
        "for i in $(seq {n}); do curl -sk -o /dev/null --tlsv1.3 --interface 127.0.0.2 \
         -w '%{{time_connect}} %{{time_appconnect}} %{{time_starttransfer}}\\n' {url} || exit 1; done"
    );
    let out = output(kansoku_in(
        ns,
        &[
            "delay",
            "--clients",
            "127.0.0.2",
            "--profile",
            profile,
            "--server",
            &format!("127.0.0.1:{PORT}"),
            "--json",
            "--",
            "sh",
            "-c",
            &curl,
        ],
    ));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "kansoku delay: {:?}\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let times = text
        .lines()
        .map(|l| {
            let v: Vec<f64> = l
                .split_whitespace()
                .map(|x| x.parse::<f64>().unwrap() * 1e3)
                .collect();
            [v[0], v[1], v[2]]
        })
        .collect::<Vec<_>>();
    assert_eq!(times.len(), n, "{text}");
    (times, json_of(&out))
}

#[test]
fn a_constant_50ms_profile_is_what_curl_measures() {
    if !require_root("kansoku delay") {
        return;
    }
    let ns = Namespace::create("kdl").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let _srv = server(&ns, dir.path(), false);
    let (times, report) = curl_times(
        &ns,
        &format!("http://127.0.0.1:{PORT}/index.html"),
        5,
        "const:50ms",
    );
    let connect = median(times.iter().map(|t| t[0]).collect());
    let first_byte = median(times.iter().map(|t| t[2]).collect());
    // The handshake takes one round trip, the request another.
    assert!(
        (connect - 50.0).abs() <= 2.0,
        "connect {connect} ms: {times:?}"
    );
    assert!(
        (first_byte - 100.0).abs() <= 4.0,
        "first byte {first_byte} ms: {times:?}"
    );
    let d = &report["delay_line"];
    assert_eq!(d["valid"], true, "{report}");
    assert_eq!(d["undelayed"], 0);
    assert_eq!(d["queue_dropped"], 0);
    // Every packet of the five connections went through the line both ways.
    assert!(d["held"].as_u64().unwrap() >= 5 * 8, "{report}");
    assert_eq!(d["held"], d["rule_packets"], "{report}");
    assert_eq!(report["clients"][0]["rtt_ms"], 50.0);
}

#[test]
fn tls_1_3_adds_one_round_trip_before_the_first_byte() {
    if !require_root("kansoku delay") {
        return;
    }
    let ns = Namespace::create("kdl").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let _srv = server(&ns, dir.path(), true);
    let url = format!("https://127.0.0.1:{PORT}/index.html");
    // The server's own handshake work (python's TLS) is measured apart,
    // through the same line with no delay, and taken off.
    let (base, _) = curl_times(&ns, &url, 5, "none");
    let (times, report) = curl_times(&ns, &url, 5, "const:50ms");
    let m = |v: &[[f64; 3]], i: usize| median(v.iter().map(|t| t[i]).collect());
    let connect = m(&times, 0);
    let tls = m(&times, 1) - m(&base, 1);
    let first_byte = m(&times, 2) - m(&base, 2);
    assert!(
        (connect - 50.0).abs() <= 2.0,
        "connect {connect} ms: {times:?}"
    );
    // TLS 1.3: the handshake's round trip, then the request's.
    assert!(
        (tls - 100.0).abs() <= 4.0,
        "TLS done {tls} ms beyond the undelayed: {times:?} {base:?}"
    );
    assert!(
        (first_byte - 150.0).abs() <= 6.0,
        "first byte {first_byte} ms beyond the undelayed: {times:?} {base:?}"
    );
    assert_eq!(report["delay_line"]["valid"], true, "{report}");
}

#[test]
fn a_queue_too_small_for_the_load_makes_the_run_invalid() {
    if !require_root("kansoku delay") {
        return;
    }
    let ns = Namespace::create("kdl").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let _srv = server(&ns, dir.path(), false);
    // Twenty connections at once from twenty clients; the kernel may hold
    // two packets.
    let curls = format!(
        "for i in $(seq 2 21); do curl -s -o /dev/null --max-time 20 --interface 127.0.0.$i \
         http://127.0.0.1:{PORT}/index.html & done; wait"
    );
    for (extra, field) in [(None, "queue_dropped"), (Some("--fail-open"), "undelayed")] {
        let mut args = vec![
            "delay",
            "--clients",
            "20",
            "--profile",
            "const:40ms",
            "--queue-len",
            "2",
            "--json",
        ];
        args.extend(extra);
        args.extend(["--", "sh", "-c", &curls]);
        let out = output(kansoku_in(&ns, &args));
        let r = json_of(&out);
        assert_eq!(out.status.code(), Some(1), "{r}");
        let d = &r["delay_line"];
        assert_eq!(d["valid"], false, "{r}");
        assert!(d[field].as_u64().unwrap() > 0, "{field}: {r}");
        assert!(!d["problems"].as_array().unwrap().is_empty());
    }
}

/// The rules and user chains of every table, without counters, for
/// comparing before and after (a table that a run made exist, empty, is
/// no rule left behind).
fn ruleset(ns: &Namespace) -> String {
    let mut s = String::new();
    for tool in ["iptables-save", "ip6tables-save"] {
        s += &ns.exec(&[tool]).unwrap_or_default();
    }
    s.lines()
        .filter(|l| l.starts_with("-A") || (l.starts_with(':') && l.contains(" - ")))
        .map(|l| l.split(" [").next().unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn no_rule_is_left_after_sigint_or_after_sigkill_and_a_rerun() {
    if !require_root("kansoku delay") {
        return;
    }
    let ns = Namespace::create("kdl").unwrap();
    let before = ruleset(&ns);
    let wait_for_rules = |c: &mut Child| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !ruleset(&ns).contains("KSKDELAY-") {
            assert!(c.try_wait().unwrap().is_none(), "kansoku delay ended early");
            assert!(Instant::now() < deadline, "no rules appeared");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let args = [
        "delay",
        "--clients",
        "10",
        "--profile",
        "const:10ms",
        "--duration",
        "30s",
    ];
    // SIGINT: the run cleans up itself.
    let mut c = kansoku_in(&ns, &args)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_rules(&mut c);
    let _ = Command::new("kill")
        .args(["-INT", &c.id().to_string()])
        .status();
    let status = c.wait().unwrap();
    assert!(status.code().is_some(), "{status:?}");
    assert_eq!(ruleset(&ns), before);
    // SIGKILL: the rules stay until the next run removes them.
    let mut c = Guard(
        kansoku_in(&ns, &args)
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for_rules(&mut c.0);
    c.0.kill().unwrap();
    c.0.wait().unwrap();
    assert!(
        ruleset(&ns).contains("KSKDELAY-"),
        "a killed run leaves its rules"
    );
    let out = output(kansoku_in(
        &ns,
        &[
            "delay",
            "--clients",
            "1",
            "--profile",
            "const:1ms",
            "--duration",
            "100ms",
        ],
    ));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(ruleset(&ns), before);
}

#[test]
fn bad_profiles_and_flags_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let cdf = dir.path().join("rtt.cdf");
    std::fs::write(&cdf, "# rtt_ms fraction\n10 0.5\n-4 1\n").unwrap();
    let cases: Vec<(Vec<String>, String)> = vec![
        (
            vec!["--profile".into(), format!("cdf:{}", p(&cdf))],
            format!("{}:3:1", p(&cdf)),
        ),
        (
            vec!["--profile".into(), "const:-5ms".into()],
            "negative".into(),
        ),
        (
            vec!["--profile".into(), "lognormal:median=48ms".into()],
            "sigma".into(),
        ),
        (vec!["--profile".into(), "const:5".into()], "unit".into()),
        (
            vec!["--clients".into(), "127.0.0.9-127.0.0.2".into()],
            "range".into(),
        ),
        (vec!["--rate".into(), "fast".into()], "rate".into()),
        (vec!["--loss".into(), "2".into()], "fraction".into()),
    ];
    for (args, expect) in cases {
        let mut all = vec!["delay".to_string()];
        all.extend(args.clone());
        let out = kansoku().args(&all).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(&expect), "{args:?}: {err}");
    }
}

#[test]
fn a_capture_at_the_server_gives_back_the_profiles_round_trip() {
    if !require_root("kansoku delay") {
        return;
    }
    let ns = Namespace::create("kdl").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let _srv = server(&ns, dir.path(), false);
    let cap = dir.path().join("server.pcap");
    // The tap on loopback sits between the two halves of the delay: it
    // sees the SYN-ACK leave and the ACK arrive at the server's times.
    // kansoku's own capture takes it (tcpdump 4.99's libpcap here counts
    // the reinjected packets "received by filter" but hands over none).
    let mut tap = Guard(
        kansoku_in(
            &ns,
            &["capture", "-i", "lo", "-w", p(&cap), "--compress", "none"],
        )
        .stderr(Stdio::piped())
        .spawn()
        .unwrap(),
    );
    // Ready once it says it listens.
    let mut err = std::io::BufReader::new(tap.0.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("listening on") {
        line.clear();
        assert!(
            std::io::BufRead::read_line(&mut err, &mut line).unwrap() > 0,
            "the capture ended"
        );
    }
    let curls = format!(
        "for i in $(seq 2 9); do curl -s -o /dev/null --interface 127.0.0.$i http://127.0.0.1:{PORT}/index.html || exit 1; done"
    );
    let out = output(kansoku_in(
        &ns,
        &[
            "delay",
            "--clients",
            "8",
            "--profile",
            "const:30ms",
            "--",
            "sh",
            "-c",
            &curls,
        ],
    ));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::thread::sleep(Duration::from_millis(300));
    let _ = Command::new("kill")
        .args(["-INT", &tap.0.id().to_string()])
        .status();
    let _ = tap.0.wait();
    let mut stats = String::new();
    let _ = std::io::Read::read_to_string(&mut err, &mut stats);
    let size = std::fs::metadata(&cap).map_or(0, |m| m.len());
    let cdf = dir.path().join("rtt.cdf");
    let out = run(&[
        "delay",
        "profile",
        "--from-pcap",
        p(&cap),
        "--server",
        &format!("127.0.0.1:{PORT}"),
        "-o",
        p(&cdf),
    ]);
    assert!(
        out.status.success(),
        "{}; capture: {stats}; {size} bytes",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&cdf).unwrap();
    let points: Vec<(f64, f64)> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let mut f = l.split_whitespace().map(|x| x.parse::<f64>().unwrap());
            (f.next().unwrap(), f.next().unwrap())
        })
        .collect();
    assert_eq!(points.len(), 8, "{text}");
    assert_eq!(points[7].1, 1.0);
    // Never less than the round trip; a late release on a busy machine
    // may add to one, not to the middle of them.
    assert!(points.iter().all(|(rtt, _)| *rtt >= 29.9), "{text}");
    assert!(
        (points[3].0 - 30.0).abs() < 1.0,
        "median {}: {text}",
        points[3].0
    );
    // And the file is a profile kansoku takes.
    let out = output(kansoku_in(
        &ns,
        &[
            "delay",
            "--profile",
            &format!("cdf:{}", p(&cdf)),
            "--clients",
            "1",
            "--duration",
            "0",
        ],
    ));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_capture_without_handshakes_is_an_input_error() {
    let dir = tempfile::tempdir().unwrap();
    let udp = dir.path().join("udp.pcap");
    run_ok(&["synth", "-c", "50", "--proto", "udp", "-w", p(&udp)]);
    let out = run(&["delay", "profile", "--from-pcap", p(&udp)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no TCP handshakes"), "{err}");
    // A real capture with HTTP over loopback has them.
    let out = run_ok(&[
        "delay",
        "profile",
        "--from-pcap",
        p(&data("lo-http-icmp.pcap")),
    ]);
    assert!(String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|l| l.ends_with(" 1")));
}
