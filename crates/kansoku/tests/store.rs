//! `kansoku profile --store`, `kansoku store init|status|export` and
//! `kansoku web --store` against a real ClickHouse (store::testing).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;

use common::{kansoku, p};
use testkit::{ClickHouse, PASSWORD};

fn with_creds(c: &mut std::process::Command) -> &mut std::process::Command {
    c.env("KANSOKU_STORE_USER", "kansoku")
        .env("KANSOKU_STORE_PASSWORD", PASSWORD)
}

fn ok(c: &mut std::process::Command) -> String {
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr)
}

/// GET a path from a `kansoku web` at `addr`.
fn get(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut b = String::new();
    s.read_to_string(&mut b).unwrap();
    assert!(b.starts_with("HTTP/1.1 200"), "{path}: {b}");
    b.split_once("\r\n\r\n").unwrap().1.to_string()
}

/// A `kansoku web`, killed when dropped (a failing test leaves none behind).
struct Web(std::process::Child);

impl Drop for Web {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(args: &[&str]) -> (Web, String) {
    let mut c = kansoku();
    with_creds(&mut c);
    let mut web = Web(c
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap());
    let mut err = BufReader::new(web.0.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let addr = line
        .rsplit(" on http://")
        .next()
        .unwrap()
        .trim()
        .trim_end_matches('/')
        .to_string();
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    (web, addr)
}

#[test]
fn profiles_go_to_the_store_and_come_back_as_the_files_say() {
    let dir = tempfile::tempdir().unwrap();
    let Some(ch) = testkit::clickhouse(dir.path()) else {
        return;
    };
    round_trip(&ch.url().to_string(), dir.path(), true);
}

/// A chdb process speaking ClickHouse's HTTP interface (tests/chdb/chdb_server.py).
struct Chdb(std::process::Child);

impl Drop for Chdb {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The same on a current ClickHouse engine: chdb from PyPI
/// (scripts/install-deps.sh installs it) behind a small HTTP shim.
#[test]
fn the_schema_and_queries_work_on_a_current_clickhouse_too() {
    let have = std::process::Command::new("python3")
        .args(["-c", "import chdb"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !testkit::require("chdb (python3 -c 'import chdb')", have) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/chdb/chdb_server.py");
    let mut child = Chdb(
        std::process::Command::new("python3")
            .arg(script)
            .arg(dir.path().join("chdb"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut out = BufReader::new(child.0.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let port = line.trim().rsplit(' ').next().unwrap().to_string();
    round_trip(&format!("http://127.0.0.1:{port}/fleet"), dir.path(), false);
}

/// init, profile --store, status, export (the files again, byte for byte)
/// and the web view (the directory's JSON) against the store at `url`;
/// `auth`: the store checks passwords.
fn round_trip(url: &str, dir: &std::path::Path, auth: bool) {
    let url = url.to_string();
    let trace = dir.join("t.pcap");
    synth(&trace, "20000", &["--ip", "mix"]);
    // Without the schema: a clear error, exit 2; with a wrong password the same.
    let out = with_creds(&mut kansoku())
        .args(["store", "status", "--store", &url])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("store init"));
    ok(with_creds(&mut kansoku()).args(["store", "init", "--store", &url]));
    if auth {
        let out = kansoku()
            .env("KANSOKU_STORE_USER", "kansoku")
            .env("KANSOKU_STORE_PASSWORD", "not-the-password")
            .args(["store", "status", "--store", &url])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("refused the credentials") && !err.contains("not-the-password"),
            "{err}"
        );
    }

    let files = dir.join("files/");
    let spool = dir.join("spool");
    let said = ok(with_creds(&mut kansoku()).args([
        "profile",
        "-r",
        p(&trace),
        "-i",
        "60",
        "--2d",
        "-w",
        p(&files),
        "--store",
        &url,
        "--probe",
        "edge-1",
        "--spool",
        p(&spool),
    ]));
    assert!(said.contains("sent "), "{said}");
    let status = ok(with_creds(&mut kansoku()).args(["store", "status", "--store", &url]));
    assert!(status.contains("| edge-1 |"), "{status}");
    // Exported, the store's summaries are the files, byte for byte.
    let exp = dir.join("exp");
    ok(with_creds(&mut kansoku()).args(["store", "export", "--store", &url, "-w", p(&exp)]));
    assert!(exported_as_written(&files, &exp.join("edge-1")) >= 6);
    // The web view from the store and from the directory: the same JSON.
    let (_w1, a1) = serve(&["web", p(&files), "--listen", "127.0.0.1:0"]);
    let (_w2, a2) = serve(&["web", "--store", &url, "--listen", "127.0.0.1:0"]);
    for q in [
        "view=src",
        "view=dport&threshold=2",
        "view=srcdst",
        "view=dst&step=300",
    ] {
        let path = format!("/api/v1/view?{q}");
        assert_eq!(get(&a1, &path), get(&a2, &path), "{q}");
    }
    assert!(get(&a2, "/api/v1/catalog").contains("\"probes\":[\"edge-1\"]"));
    assert!(get(&a2, "/api/v1/view?probe=edge-1").contains("\"aggregates\""));
    merges_like_the_files(&url, &files);
    another_schema_keeps_the_spool(&url, &trace, dir);
    if auth {
        a_wrong_password_keeps_the_spool(&url, &trace, dir);
    }
}

/// Runs `profile -i 60` of `trace` with `cmd`'s
/// credentials into `dir/NAME/` and the spool `dir/spool-NAME`, against
/// `url`; checks it succeeded and that every summary it made waits in the
/// spool. Its standard error.
fn profile_kept_in_spool(
    mut cmd: std::process::Command,
    url: &str,
    trace: &std::path::Path,
    dir: &std::path::Path,
    name: &str,
) -> String {
    let spool = dir.join(format!("spool-{name}"));
    let out = cmd
        .args(["profile", "-r", p(trace), "-i", "60", "-w"])
        .arg(dir.join(name).join(""))
        .args(["--store", url, "--probe", name, "--spool", p(&spool)])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{err}");
    let made = std::fs::read_dir(dir.join(name)).unwrap().count();
    let waiting = store::Spool::open(&spool).unwrap().pending().unwrap().len();
    assert_eq!(waiting, made, "{err}");
    err
}

/// `profile --store` with a password the store refuses: one warning that
/// never shows the password, exit 0, and every summary in the spool.
fn a_wrong_password_keeps_the_spool(url: &str, trace: &std::path::Path, dir: &std::path::Path) {
    let mut cmd = kansoku();
    cmd.env("KANSOKU_STORE_USER", "kansoku")
        .env("KANSOKU_STORE_PASSWORD", "s3cret-not-this");
    let err = profile_kept_in_spool(cmd, url, trace, dir, "edge-3");
    assert!(!err.contains("s3cret"), "{err}");
    assert_eq!(err.matches("refused the credentials").count(), 1, "{err}");
}

/// A store with a schema of another version: `store` commands refuse it
/// (exit 2), and `profile --store` keeps every summary in its spool.
fn another_schema_keeps_the_spool(url: &str, trace: &std::path::Path, dir: &std::path::Path) {
    let c = store::Client::new(
        store::StoreUrl::parse(url).unwrap(),
        Some(store::Credentials::new("kansoku", PASSWORD)),
    );
    let count = || c.execute("SELECT count() FROM summaries").unwrap();
    let before = count();
    c.insert("schema_version", b"2\n").unwrap();
    let out = with_creds(&mut kansoku())
        .args(["store", "status", "--store", url])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("schema version 2"));
    let mut cmd = kansoku();
    with_creds(&mut cmd);
    let err = profile_kept_in_spool(cmd, url, trace, dir, "edge-2");
    assert_eq!(err.matches("schema version 2").count(), 1, "{err}");
    assert_eq!(
        count(),
        before,
        "nothing went into a store of another schema"
    );
}

/// `store merge` against the store at `url` (which holds the summaries of
/// `files`, probe edge-1): the same text as `profile --merge` of the files.
fn merges_like_the_files(url: &str, files: &std::path::Path) {
    for args in [
        vec![],
        vec!["-i", "120"],
        vec!["-i", "180", "-t", "5", "--metric", "bytes"],
        vec!["-t", "0.5", "--coarsen"],
        vec!["-i", "300", "--format", "aguri3"],
    ] {
        let mut from_store = vec!["store", "merge", "--store", url, "--probe", "edge-1"];
        from_store.extend(&args);
        let out = with_creds(&mut kansoku())
            .args(&from_store)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && said.contains("re-aggregated"),
            "{said}"
        );
        let a = String::from_utf8(out.stdout).unwrap();
        let mut from_files = vec!["profile", "--merge", p(files), "--budget", "262144"];
        from_files.extend(&args);
        let out = kansoku().args(&from_files).output().unwrap();
        assert!(out.status.success());
        let b = String::from_utf8(out.stdout).unwrap();
        assert!(b.len() > 100, "{args:?}");
        assert_eq!(a, b, "{args:?}");
    }
    // Unknown probes: nothing; a hostile one: refused, exit 2.
    let none = with_creds(&mut kansoku())
        .args(["store", "merge", "--store", url, "--probe", "nobody"])
        .output()
        .unwrap();
    assert!(none.status.success() && none.stdout.is_empty());
    let out = with_creds(&mut kansoku())
        .args(["store", "merge", "--store", url, "--probe", "x' OR '1'='1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// A throwaway ClickHouse with kansoku's schema, and its URL.
fn initialized(dir: &std::path::Path) -> Option<(ClickHouse, String)> {
    let ch = testkit::clickhouse(dir)?;
    let url = ch.url().to_string();
    ok(with_creds(&mut kansoku()).args(["store", "init", "--store", &url]));
    Some((ch, url))
}

/// Checks that every file in `files` is in `exported`, byte for byte;
/// how many there are.
fn exported_as_written(files: &std::path::Path, exported: &std::path::Path) -> usize {
    let mut names: Vec<_> = std::fs::read_dir(files)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    for n in &names {
        let a = std::fs::read_to_string(files.join(n)).unwrap();
        let b = std::fs::read_to_string(exported.join(n)).unwrap();
        assert_eq!(a, b, "{n:?}");
    }
    names.len()
}

/// `synth` of `count` frames of 500 flows at 50 frames/s into `trace`.
fn synth(trace: &std::path::Path, count: &str, extra: &[&str]) {
    ok(kansoku()
        .args([
            "synth",
            "-c",
            count,
            "--flows",
            "500",
            "--rate",
            "50",
            "-w",
            p(trace),
        ])
        .args(extra));
}

/// A spool on a full disk: the run says so (the spool named, exit 3), the
/// summaries files are all written, and what reached the spool is whole.
#[test]
fn a_full_spool_disk_is_reported_and_nothing_else_is_lost() {
    let Some(tiny) = testkit::Tmpfs::mount(16) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.pcap");
    synth(&trace, "20000", &[]);
    // A store nobody answers at: everything stays in the spool.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let files = dir.path().join("files/");
    let out = with_creds(&mut kansoku())
        .args(["profile", "-r", p(&trace), "-i", "10", "-w", p(&files)])
        .args([
            "--store",
            &format!("http://127.0.0.1:{port}/fleet"),
            "--spool",
        ])
        .arg(tiny.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("No space left on device") && err.contains(&tiny.path().display().to_string()),
        "{err}"
    );
    // Every interval's file is there (400 s of traffic in 10 s intervals).
    let written = std::fs::read_dir(&files).unwrap().count();
    assert_eq!(written, 40, "{err}");
    // The spool holds whole summaries only.
    let spool = store::Spool::open(tiny.path()).unwrap();
    let waiting = spool.pending().unwrap();
    assert!(
        !waiting.is_empty() && waiting.len() < 40,
        "{}",
        waiting.len()
    );
    for f in &waiting {
        store::Spool::read(f).unwrap();
    }
}

/// kansoku killed (SIGKILL) while it sends, then `store send` and the same
/// run again: every summary of the trace is in the store exactly once.
#[test]
fn kansoku_killed_while_sending_and_run_again_stores_each_summary_once() {
    let dir = tempfile::tempdir().unwrap();
    let Some((ch, url)) = initialized(dir.path()) else {
        return;
    };
    let trace = dir.path().join("t.pcap");
    // 1,000 s of traffic: 1,000 summaries of a second.
    synth(&trace, "50000", &[]);
    let reference = dir.path().join("ref/");
    ok(kansoku().args(["profile", "-r", p(&trace), "-i", "1", "-w", p(&reference)]));
    let want = pipeline::read_summaries(&[reference]).unwrap();
    assert!(want.len() >= 1000, "{}", want.len());
    let spool = dir.path().join("spool");
    let run = |out: &str| {
        let mut c = kansoku();
        with_creds(&mut c);
        c.args([
            "profile",
            "-r",
            p(&trace),
            "-i",
            "1",
            "--probe",
            "k",
            "--store",
            &url,
        ])
        .args(["-w", p(&dir.path().join(out)), "--spool", p(&spool)]);
        c
    };
    let c = ch.client();
    let stored = || -> u64 {
        c.execute("SELECT uniqExact(id) FROM summaries")
            .map(|t| t.trim().parse().unwrap_or(0))
            .unwrap_or(0)
    };
    let mut child = run("run1/")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while stored() == 0 && t0.elapsed() < std::time::Duration::from_secs(60) {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.kill().unwrap(); // SIGKILL, while it sends
    child.wait().unwrap();
    let first = stored();
    assert!(first > 0);
    // What the killed run spooled goes now; then the same run again.
    let said = ok(with_creds(&mut kansoku()).args([
        "store",
        "send",
        "--store",
        &url,
        "--spool",
        p(&spool),
    ]));
    assert!(said.contains("0 still wait"), "{said}");
    let after_send = stored();
    ok(&mut run("run2/"));
    let back = store::read(&c, &["k".to_string()], 0, u64::MAX).unwrap();
    eprintln!(
        "killed with {first} of {} stored, {after_send} after store send, {} after the second run",
        want.len(),
        back.len()
    );
    assert_eq!(back.len(), want.len(), "each summary once");
    for (b, w) in back.iter().zip(&want) {
        assert_eq!(b.summary, *w);
    }
}

/// `kansoku bench store`, small: the store's answers are the files' (the
/// bench fails otherwise) and every figure is printed.
#[test]
fn bench_store_agrees_with_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let out = kansoku()
        .current_dir(dir.path())
        .args([
            "bench",
            "store",
            "--probes",
            "2",
            "--days",
            "3",
            "--pool-days",
            "1",
            "--rounds",
            "1",
        ])
        .args(["--year-files", "--dir", p(&dir.path().join("files"))])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if !testkit::require(
        "clickhouse-server",
        !err.contains("needs clickhouse-server"),
    ) {
        return;
    }
    assert!(out.status.success(), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.matches("yes, text for text").count(), 2, "{text}");
    assert!(
        text.contains("Ingest: ") && text.contains("The web view's JSON"),
        "{text}"
    );
}

/// `store export` of summaries over several days (read a day at a time):
/// every file back, byte for byte, and a range exports only its part.
#[test]
fn an_export_of_several_days_gives_back_every_file() {
    let dir = tempfile::tempdir().unwrap();
    let Some((_ch, url)) = initialized(dir.path()) else {
        return;
    };
    let trace = dir.path().join("t.pcap");
    // 3,000 packets over 2.3 days: 56 hourly summaries on three days.
    ok(kansoku().args([
        "synth",
        "-c",
        "3000",
        "--rate",
        "0.015",
        "--flows",
        "50",
        "-w",
        p(&trace),
    ]));
    let files = dir.path().join("files/");
    ok(with_creds(&mut kansoku())
        .args(["profile", "-r", p(&trace), "-i", "3600", "-w", p(&files)])
        .args([
            "--store",
            &url,
            "--probe",
            "days",
            "--spool",
            p(&dir.path().join("spool")),
        ]));
    let exp = dir.path().join("exp");
    let said =
        ok(with_creds(&mut kansoku()).args(["store", "export", "--store", &url, "-w", p(&exp)]));
    assert!(said.contains("exported 56 summaries"), "{said}");
    assert_eq!(exported_as_written(&files, &exp.join("days")), 56);
    // 2026-01-02 only: 24 summaries.
    let one = dir.path().join("one");
    let said = ok(with_creds(&mut kansoku()).args([
        "store",
        "export",
        "--store",
        &url,
        "-w",
        p(&one),
        "--from",
        "1767312000",
        "--to",
        "1767398400",
    ]));
    assert!(said.contains("exported 24 summaries"), "{said}");
}
