//! `kansoku bench store`: a fleet's year in the store beside the same
//! summaries as files.
//!
//! `--probes` probes of `--days` days of 5-minute summaries (10 and 365: a
//! million summaries) go into a ClickHouse of the bench's own (the ingest
//! rate is printed). Each probe's traffic is the view bench's long-tailed
//! synthetic link; to keep generation short, each probe profiles
//! `--pool-days` days and the year repeats them, shifted in time (every
//! summary is still its own, with its own id and times). Then the top
//! aggregates (the whole re-aggregation at 1%) of a day, a month and the
//! year, all probes together: `kansoku store merge` at the server beside
//! `kansoku profile --merge` of files, both whole processes, medians of
//! `--rounds`. The files are what an operator keeps: 5-minute files for
//! the day and the month (one directory a day), and for the year the daily
//! roll-ups an archive keeps (a year of 5-minute files, a million files and
//! some 250M entries, would be read into memory whole by `--merge`). The
//! day's and the month's outputs must be the same text; the year's totals
//! the same. Last, the web view's JSON for a month of one probe from the
//! store (the target: under a second).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use aguri::{Metric, Summary};
use pipeline::{Error, Report, Result};

use crate::args::BenchStoreArgs;
use crate::harness::stats::median;
use crate::harness::table::{header, row, Align};
use crate::view::{make, time_view, NS, T0};

const DAY: u64 = 86_400 * NS;

fn io(what: &str) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::output(what, &e)
}

fn store_err(e: store::StoreError) -> Error {
    Error::input(e.to_string())
}

/// `s` moved later by `by_ns`.
fn shifted(s: &Summary, by_ns: u64) -> Summary {
    let mut s = s.clone();
    s.start_ns += by_ns;
    s.end_ns += by_ns;
    s
}

fn day_dir(root: &Path, day: u64) -> PathBuf {
    let stamp = aguri::summary::file_stamp(T0 + day * DAY);
    root.join("5min").join(&stamp[..8])
}

/// Runs `kansoku ARGS -w OUT` `rounds` times: the wall seconds, and what
/// it wrote.
fn timed(
    exe: &Path,
    args: &[String],
    out_file: &Path,
    rounds: usize,
    env: &[(&str, &str)],
) -> Result<(Vec<f64>, String)> {
    let mut secs = Vec::new();
    for _ in 0..rounds.max(1) {
        let t = Instant::now();
        let o = Command::new(exe)
            .args(args)
            .arg("-w")
            .arg(out_file)
            .envs(env.iter().copied())
            .output()
            .map_err(io("kansoku"))?;
        secs.push(t.elapsed().as_secs_f64());
        if !o.status.success() {
            return Err(Error::input(format!(
                "kansoku {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&o.stderr).trim()
            )));
        }
    }
    let text = std::fs::read_to_string(out_file).map_err(io("the merged summaries"))?;
    Ok((secs, text))
}

/// Bytes and packets of every summary in `text`, added up.
fn totals(text: &str) -> Result<(u64, u64, usize)> {
    let v = aguri::summary::parse_summaries(text).map_err(|e| Error::input(e.to_string()))?;
    Ok((
        v.iter().map(Summary::total_bytes).sum(),
        v.iter().map(Summary::total_packets).sum(),
        v.iter().map(|s| s.sections[0].entries.len()).sum(),
    ))
}

pub fn run(a: &BenchStoreArgs, stop: &AtomicBool, out: &mut dyn Write) -> Result<Report> {
    let tmp = tempfile::tempdir().map_err(io("a temporary directory"))?;
    let root = a.dir.clone().unwrap_or_else(|| tmp.path().join("files"));
    let exe = std::env::current_exe().map_err(io("this program's path"))?;
    let chdir = tempfile::tempdir().map_err(io("a temporary directory"))?;
    let ch = store::local::LocalServer::start(chdir.path()).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::usage(
            "bench store needs clickhouse-server (scripts/install-deps.sh installs it)",
        ),
        _ => Error::input(format!("bench store: {e}")),
    })?;
    let c = ch.client();
    store::init(&c).map_err(store_err)?;
    let url = ch.url().to_string();
    let env = [
        ("KANSOKU_STORE_USER", "kansoku"),
        ("KANSOKU_STORE_PASSWORD", store::local::PASSWORD),
    ];
    let (probes, days) = (a.probes.max(1), a.days.max(1));
    let pool_days = a.pool_days.clamp(1, days);
    let per_day = 288u64;
    eprintln!("bench store: profiling {pool_days} days of {probes} probes …");
    let pools: Vec<Vec<Summary>> = (0..probes)
        .map(|p| {
            let mut v = make(300, pool_days * per_day, 2000, 100 + p);
            v.retain(|s| s.start_ns < T0 + pool_days * DAY);
            v
        })
        .collect();
    let name = |p: u64| format!("probe-{p:02}");
    // The summary of probe p at 5-minute slot i of the year.
    let at = |p: u64, i: u64| -> Option<Summary> {
        let pool = &pools[p as usize];
        let k = i % pool.len() as u64;
        pool.get(k as usize)
            .map(|s| shifted(s, (i / pool.len() as u64) * pool_days * DAY))
    };
    let slots = days * per_day;

    // Into the store, oldest first, as probes would send them.
    eprintln!("bench store: {} summaries into the store …", slots * probes);
    let t = Instant::now();
    let (mut sent, mut rows) = (0u64, 0u64);
    let mut batch: Vec<(String, Summary)> = Vec::new();
    for i in 0..slots {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(Error::input("interrupted"));
        }
        for p in 0..probes {
            if let Some(s) = at(p, i) {
                rows += s
                    .sections
                    .iter()
                    .map(|x| x.entries.len() as u64)
                    .sum::<u64>();
                batch.push((name(p), s));
            }
        }
        if batch.len() >= 2048 || i + 1 == slots {
            let b: Vec<(&str, &Summary)> = batch.iter().map(|(p, s)| (p.as_str(), s)).collect();
            store::insert_many(&c, &b).map_err(store_err)?;
            let before = sent;
            sent += batch.len() as u64;
            batch.clear();
            let tenth = (slots * probes / 10).max(1);
            if before / tenth != sent / tenth {
                eprintln!("bench store: {sent} in");
            }
        }
    }
    let ingest_s = t.elapsed().as_secs_f64();
    // The server merges the parts of a large load for a while; measuring
    // then would measure the merges too.
    let t = Instant::now();
    while t.elapsed().as_secs() < 900 {
        let busy = c
            .execute("SELECT count() FROM system.merges")
            .map_err(store_err)?;
        if busy.trim() == "0" {
            break;
        }
        std::thread::sleep(std::time::Duration::from_secs(2));
    }
    let settle_s = t.elapsed().as_secs_f64();

    // The files: 5-minute ones (the first month's, or all with
    // --year-files) and daily roll-ups for all.
    let month_days = days.min(30);
    let five_days = if a.year_files { days } else { month_days };
    eprintln!("bench store: writing {five_days} days of 5-minute files and {days} days of daily roll-ups …");
    for d in 0..five_days {
        let dir = day_dir(&root, d);
        std::fs::create_dir_all(&dir).map_err(io("the bench's files"))?;
        for i in d * per_day..(d + 1) * per_day {
            for p in 0..probes {
                if let Some(s) = at(p, i) {
                    let stamp = aguri::summary::file_stamp(s.start_ns);
                    std::fs::write(dir.join(format!("{}.{stamp}.agr", name(p))), s.to_string())
                        .map_err(io("the bench's files"))?;
                }
            }
        }
    }
    let daily = root.join("daily");
    std::fs::create_dir_all(&daily).map_err(io("the bench's files"))?;
    for p in 0..probes {
        // A day rolled up as an archive does (the default budget), once
        // per pool day; the year's days repeat them.
        let rolled: Vec<Summary> = (0..pool_days)
            .filter_map(|d| {
                let mut v: Vec<Summary> = (d * per_day..(d + 1) * per_day)
                    .filter_map(|i| at(p, i))
                    .collect();
                aguri::merge_all(&mut v, DAY, aguri::DEFAULT_BUDGET, Metric::Either, 1.0)
                    .ok()
                    .and_then(|mut m| m.pop())
            })
            .collect();
        for d in 0..days {
            let Some(s) = rolled.get((d % pool_days) as usize) else {
                continue;
            };
            let s = shifted(s, (d / pool_days) * pool_days * DAY);
            let stamp = aguri::summary::file_stamp(s.start_ns);
            std::fs::write(
                daily.join(format!("{}.{}.agr", name(p), &stamp[..8])),
                s.to_string(),
            )
            .map_err(io("the bench's files"))?;
        }
    }

    writeln!(
        out,
        "A fleet store of {probes} probes x {days} days of 5-minute summaries ({} summaries, {rows} entry rows) \
         in ClickHouse {} on loopback, beside the same summaries as files; whole processes, medians of {} rounds.\n",
        sent,
        c.execute("SELECT version()").map_err(store_err)?.trim(),
        a.rounds
    ).map_err(Error::stdout)?;
    writeln!(
        out,
        "Ingest: {:.0} summaries/s ({:.0} entry rows/s), batches of 2048 over HTTP; the server's background \
         merges of the load then took {settle_s:.0} s more (the queries below ran after them).\n",
        sent as f64 / ingest_s,
        rows as f64 / ingest_s
    ).map_err(Error::stdout)?;
    header(
        out,
        &[
            ("top aggregates of", Align::Left),
            ("summaries", Align::Right),
            ("files", Align::Left),
            ("profile --merge s", Align::Right),
            ("store merge s", Align::Right),
            ("store / files", Align::Right),
            ("same answer", Align::Left),
        ],
    )
    .map_err(Error::stdout)?;
    let mut failures = Vec::new();
    let scratch = tmp.path().join("out");
    std::fs::create_dir_all(&scratch).map_err(io("a temporary directory"))?;
    let month_dirs: Vec<String> = (0..month_days)
        .map(|d| day_dir(&root, d).display().to_string())
        .collect();
    let year_dirs: Vec<String> = (0..five_days)
        .map(|d| day_dir(&root, d).display().to_string())
        .collect();
    let mut cases: Vec<(String, u64, Vec<String>, &str, bool)> = vec![
        (
            "a day".into(),
            DAY,
            vec![day_dir(&root, 0).display().to_string()],
            "5-minute",
            true,
        ),
        (
            format!("{month_days} days"),
            month_days * DAY,
            month_dirs,
            "5-minute",
            true,
        ),
        (
            format!("{days} days"),
            days * DAY,
            vec![daily.display().to_string()],
            "daily roll-up",
            false,
        ),
    ];
    if a.year_files && days > month_days {
        cases.insert(
            2,
            (
                format!("{days} days"),
                days * DAY,
                year_dirs,
                "5-minute",
                true,
            ),
        );
    }
    for (what, span, inputs, kind, exact) in cases {
        // A year of files is read once (a minute or more a round).
        let rounds = if inputs.len() > 31 { 1 } else { a.rounds };
        let mut fargs = vec!["profile".to_string(), "--merge".into()];
        fargs.extend(inputs.iter().cloned());
        fargs.extend(["--budget".into(), "262144".into()]);
        let (fs, ftext) = timed(&exe, &fargs, &scratch.join("files.agr"), rounds, &env)?;
        let sargs: Vec<String> = [
            "store",
            "merge",
            "--store",
            &url,
            "--from",
            &(T0 / NS).to_string(),
            "--to",
            &((T0 + span) / NS).to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let (ss, stext) = timed(&exe, &sargs, &scratch.join("store.agr"), a.rounds, &env)?;
        let same = if exact {
            ftext == stext
        } else {
            let (f, s) = (totals(&ftext)?, totals(&stext)?);
            (f.0, f.1) == (s.0, s.1)
        };
        if !same {
            failures.push(what.clone());
        }
        let (m, s) = (median(&fs), median(&ss));
        let n = if exact {
            span / DAY * per_day * probes
        } else {
            span / DAY * probes
        };
        row(
            out,
            &[
                what,
                n.to_string(),
                format!("{kind} files"),
                format!("{m:.2}"),
                format!("{s:.2}"),
                format!("{:.2}", s / m),
                if !same {
                    "NO".to_string()
                } else if exact {
                    "yes, text for text".to_string()
                } else {
                    "totals (the roll-ups fold each day first)".to_string()
                },
            ],
        )
        .map_err(Error::stdout)?;
    }
    // The web view of one probe's month, from the store.
    let src = store::StoreSource::open(ch.client()).map_err(store_err)?;
    let q = format!(
        "/api/v1/view?view=src&from={}&to={}&step=3600&probe={}",
        T0 / NS,
        (T0 + month_days * DAY) / NS,
        name(0)
    );
    let (first, web, size) = time_view(Arc::new(src), &q, a.rounds)?;
    let w = median(&web);
    writeln!(
        out,
        "\nThe web view's JSON for {month_days} days of one probe ({} summaries, hourly buckets) from the store: \
         {w:.0} ms (first {first:.0} ms), {} KiB; target under 1000 ms.",
        month_days * per_day,
        size / 1024
    ).map_err(Error::stdout)?;
    if w > 1000.0 {
        eprintln!("bench store: the month's view took {w:.0} ms, over its target of 1000 ms");
    }
    let mut report = Report::default();
    if !failures.is_empty() {
        report.failed(Error::input(format!(
            "the store's answer differs from the files' for: {}",
            failures.join(", ")
        )));
    }
    Ok(report)
}
