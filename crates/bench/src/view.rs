//! `kansoku bench view`: how long `kansoku web` takes to answer a view, beside
//! `kansoku profile --merge` of the same summaries in the same run.
//!
//! Two data sets, written by the profiler from synthetic traffic with a
//! long tail (Zipf-distributed hosts in a few hundred networks, so that
//! summaries hold as many entries as a real link's): a day of 5-minute
//! summaries, and a month of hourly ones (an archive's `hourly/`). For each,
//! the view's JSON over the whole range is fetched over HTTP from a server
//! started on loopback for the bench (cold: opening the directory, which
//! parses every file, and the first request; then the median of the
//! rounds, files cached and checked for changes). Where clickhouse-server is
//! installed, the same summaries are also loaded into a fleet store of the
//! bench's own (the ingest rate is printed) and the view is timed from it., and `kansoku profile --merge`
//! (a process of the running binary) re-aggregates the same files.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use aguri::{FlowKey, ProfilerConfig, Summary};
use pipeline::{Error, Report, Result};
use rand::{Rng, SeedableRng};

use crate::args::BenchViewArgs;
use crate::harness::stats::median;
use crate::harness::table::{header, row, Align};

pub(crate) const NS: u64 = 1_000_000_000;
/// 2026-10-01 00:00:00 UTC.
pub(crate) const T0: u64 = 1_790_812_800 * NS;

/// Summaries of `intervals` intervals of `interval_s` seconds, `per` packets each.
pub(crate) fn make(interval_s: u64, intervals: u64, per: u64, seed: u64) -> Vec<Summary> {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut p = ProfilerConfig {
        interval_ns: interval_s * NS,
        ..Default::default()
    }
    .build()
    .expect("a valid profiler");
    // Zipf-like: host rank r is drawn with weight 1/r.
    let hosts = 20_000u32;
    let cdf: Vec<f64> = {
        let mut acc = 0.0;
        let mut v: Vec<f64> = (1..=hosts)
            .map(|r| {
                acc += 1.0 / f64::from(r);
                acc
            })
            .collect();
        let total = acc;
        v.iter_mut().for_each(|x| *x /= total);
        v
    };
    let host = |rng: &mut rand::rngs::SmallRng| -> u32 {
        let u: f64 = rng.gen();
        cdf.partition_point(|&c| c < u) as u32
    };
    // Host h lives in network h % 400, a /20 somewhere in the address space.
    let addr = |h: u32| -> std::net::IpAddr {
        let net = (h % 400).wrapping_mul(2_654_435_761) & 0xffff_f000;
        std::net::Ipv4Addr::from(net | (h / 400 % 4096)).into()
    };
    let mut out = Vec::new();
    let step = interval_s * NS / per;
    for i in 0..intervals * per {
        let (s, d) = (host(&mut rng), host(&mut rng));
        let k = FlowKey {
            src: addr(s),
            dst: addr(d.wrapping_add(7)),
            protocol: if s % 5 == 0 { 17 } else { 6 },
            src_port: if s % 3 == 0 {
                443
            } else {
                rng.gen_range(1024..65535)
            },
            dst_port: [80, 443, 53, 22, 8080][(d % 5) as usize],
        };
        out.extend(p.add(T0 + i * step, &k, rng.gen_range(60..1500)));
    }
    out.extend(p.finish());
    out
}

fn write(dir: &Path, sums: &[Summary]) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::output(dir.display().to_string(), &e))?;
    for s in sums {
        let f = dir.join(aguri::summary::file_stamp(s.start_ns) + ".agr");
        std::fs::write(&f, s.to_string())
            .map_err(|e| Error::output(f.display().to_string(), &e))?;
    }
    Ok(())
}

/// GET `target`; the body's length, or why not.
fn get(addr: SocketAddr, target: &str) -> std::result::Result<usize, String> {
    let mut s = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(120)))
        .map_err(|e| e.to_string())?;
    write!(
        s,
        "GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).map_err(|e| e.to_string())?;
    if !buf.starts_with(b"HTTP/1.1 200") {
        let head = String::from_utf8_lossy(&buf[..buf.len().min(300)]).to_string();
        return Err(format!("{target}: {head}"));
    }
    Ok(buf.len())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

pub fn run(a: &BenchViewArgs, _stop: &AtomicBool, out: &mut dyn Write) -> Result<Report> {
    let tmp = tempfile::tempdir().map_err(|e| Error::output("a temporary directory", &e))?;
    let root = a.dir.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    let day = root.join("day-5min");
    let month = root.join("month-hourly");
    eprintln!("bench view: writing a day of 5-minute summaries and a month of hourly ones …");
    write(&day, &make(300, 288, 2000, 1))?;
    write(&month, &make(3600, 24 * 30, 6000, 2))?;
    let exe = std::env::current_exe().map_err(|e| Error::output("this program's path", &e))?;
    let chdir = tempfile::tempdir().map_err(|e| Error::output("a temporary directory", &e))?;
    // The store's rows only where clickhouse-server is installed; one that is
    // installed but does not start is an error, not a silent omission.
    let clickhouse = match store::local::LocalServer::start(chdir.path()) {
        Ok(ch) => Some(ch),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("bench view: {e}: no rows from a fleet store");
            None
        }
        Err(e) => return Err(Error::input(format!("bench view: {e}"))),
    };
    writeln!(
        out,
        "`kansoku web`'s view JSON (whole range, view src, over HTTP on loopback) beside `kansoku profile --merge` \
         of the same files; medians of {} rounds.\n",
        a.rounds
    ).map_err(Error::stdout)?;
    header(
        out,
        &[
            ("data", Align::Left),
            ("summaries", Align::Right),
            ("entries", Align::Right),
            ("profile --merge ms", Align::Right),
            ("web cold ms", Align::Right),
            ("web ms", Align::Right),
            ("JSON KiB", Align::Right),
            ("web / merge", Align::Right),
            ("target ms", Align::Right),
        ],
    )
    .map_err(Error::stdout)?;
    for (name, dir, target_ms, step) in [
        ("a day of 5-minute summaries", &day, 200.0, 300),
        ("a month of hourly summaries", &month, 1000.0, 3600),
    ] {
        let files = std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0);
        let entries: usize = std::fs::read_dir(dir)
            .map_err(|e| Error::output(dir.display().to_string(), &e))?
            .flatten()
            .map(|f| {
                std::fs::read_to_string(f.path())
                    .map(|t| t.lines().filter(|l| l.contains('\t')).count())
                    .unwrap_or(0)
            })
            .sum();
        // The baseline: the CLI re-aggregating the files into one summary.
        let mut merge = Vec::new();
        for _ in 0..a.rounds {
            let t = Instant::now();
            let st = Command::new(&exe)
                .args(["profile", "--merge"])
                .arg(dir)
                .args(["-w", "/dev/null"])
                .status()
                .map_err(|e| Error::output("kansoku profile --merge", &e))?;
            if !st.success() {
                return Err(Error::input(format!(
                    "kansoku profile --merge failed: {st}"
                )));
            }
            merge.push(ms(t.elapsed()));
        }
        // The server, on a port of its own, for this directory.
        // Cold: opening the directory reads and parses every file.
        let t = Instant::now();
        let src = webview::DirSource::open(dir).map_err(|e| Error::input(e.to_string()))?;
        let open_ms = ms(t.elapsed());
        let from = T0 / NS;
        let to = dir_end(dir, from)?;
        let q = format!("/api/v1/view?view=src&from={from}&to={to}&step={step}");
        let (first, web, size) = time_view(Arc::new(src), &q, a.rounds)?;
        let first = open_ms + first;
        let (m, w) = (median(&merge), median(&web));
        row(
            out,
            &[
                name.to_string(),
                files.to_string(),
                entries.to_string(),
                format!("{m:.1}"),
                format!("{first:.1}"),
                format!("{w:.1}"),
                format!("{}", size / 1024),
                format!("{:.3}", w / m),
                format!("{target_ms:.0}"),
            ],
        )
        .map_err(Error::stdout)?;
        if w > target_ms {
            eprintln!(
                "bench view: {name}: the view took {w:.1} ms, over its target of {target_ms:.0} ms"
            );
        }
        // The same summaries in a fleet store (a ClickHouse of the bench's
        // own, when clickhouse-server is installed).
        if let Some(ch) = &clickhouse {
            let mut url = ch.url();
            url.database = format!("bench_{step}");
            let c = store::Client::new(
                url,
                Some(store::Credentials::new("kansoku", store::local::PASSWORD)),
            );
            store::init(&c).map_err(|e| Error::input(e.to_string()))?;
            let parsed: Vec<aguri::Summary> = pipeline::read_summaries(&[dir.to_path_buf()])?;
            let t = Instant::now();
            for chunk in parsed.chunks(256) {
                let batch: Vec<(&str, &aguri::Summary)> =
                    chunk.iter().map(|s| ("bench", s)).collect();
                store::insert_many(&c, &batch).map_err(|e| Error::input(e.to_string()))?;
            }
            let ingest = parsed.len() as f64 / t.elapsed().as_secs_f64();
            let src = store::StoreSource::open(c).map_err(|e| Error::input(e.to_string()))?;
            let (first, web, size) = time_view(Arc::new(src), &q, a.rounds)?;
            let sw = median(&web);
            row(
                out,
                &[
                    format!("{name}, from the store ({ingest:.0} summaries/s in)"),
                    files.to_string(),
                    entries.to_string(),
                    format!("{m:.1}"),
                    format!("{first:.1}"),
                    format!("{sw:.1}"),
                    format!("{}", size / 1024),
                    format!("{:.3}", sw / m),
                    format!("{target_ms:.0}"),
                ],
            )
            .map_err(Error::stdout)?;
        }
    }
    Ok(Report::default())
}

/// Serves `src` on a loopback port and times `q`: the first answer, then
/// `rounds` more; (first ms, the rounds' ms, the answer's size).
pub(crate) fn time_view(
    src: Arc<dyn webview::DataSource>,
    q: &str,
    rounds: usize,
) -> Result<(f64, Vec<f64>, usize)> {
    let stop: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
    let (tx, rx) = mpsc::channel();
    let server = std::thread::spawn(move || {
        webview::serve(
            src,
            None,
            "127.0.0.1:0".parse().expect("an address"),
            stop,
            |addr| {
                let _ = tx.send(addr);
            },
        )
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(30))
        .map_err(|_| Error::input("the web view did not start"))?;
    let t = Instant::now();
    let size = get(addr, q).map_err(Error::input)?;
    let first = ms(t.elapsed());
    let mut web = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        get(addr, q).map_err(Error::input)?;
        web.push(ms(t.elapsed()));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = server.join();
    Ok((first, web, size))
}

/// The end of the last summary in `dir`, in seconds (rounded up).
fn dir_end(dir: &Path, from: u64) -> Result<u64> {
    let src = webview::DirSource::open(dir).map_err(|e| Error::input(e.to_string()))?;
    let cat = webview::DataSource::catalog(&src).map_err(|e| Error::input(e.to_string()))?;
    Ok(cat.last_ns.div_ceil(NS).max(from + 1))
}
