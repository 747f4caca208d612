//! `kansoku bench filter`: the filter engines on rule sets and header
//! traces (ns/packet, Mpps, build time, memory, speedup over the linear
//! engine, which is the baseline), and paper 001's cost model
//! T = T_O + α·T_P fitted over growing prefixes of the first rule set
//! (Tables 2 and 3). Fast and linear must agree on every packet, and linear
//! with a ClassBench trace's FIRSTMATCH column: any difference is a problem
//! in the report (exit code 1).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use filter::model::{alpha, fit};
use filter::{Engine, EngineKind, PacketKey, RuleSet};
use pipeline::source::headers::read_all;
use pipeline::{display_path, load_rules, Error, Report, Result};
use serde_json::{json, Value};

use crate::args::BenchFilterArgs;
use crate::table::{self, Align};

/// The CPU clock from /proc/cpuinfo, in GHz, to turn ns into cycles.
fn cpu_ghz() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("cpu MHz"))?;
    line.split(':')
        .nth(1)?
        .trim()
        .parse::<f64>()
        .ok()
        .map(|mhz| mhz / 1000.0)
}

/// One engine on one (rules, headers) pair.
struct Measured {
    build_s: f64,
    memory: usize,
    ns_per_packet: f64,
    results: Vec<Option<u32>>,
}

/// Builds `kind` and classifies `keys` in batches, repeating the whole trace
/// until `min_seconds` have passed (at least once).
fn measure(kind: EngineKind, rules: &RuleSet, keys: &[PacketKey], min_seconds: f64) -> Measured {
    let t = Instant::now();
    let engine = Engine::build(kind, rules);
    let build_s = t.elapsed().as_secs_f64();
    let mut results = vec![None; keys.len()];
    let mut passes = 0u64;
    let t = Instant::now();
    loop {
        for (k, o) in keys.chunks(1024).zip(results.chunks_mut(1024)) {
            engine.classify_batch(k, o);
        }
        passes += 1;
        if t.elapsed().as_secs_f64() >= min_seconds || keys.is_empty() {
            break;
        }
    }
    let elapsed = t.elapsed().as_secs_f64();
    let packets = (keys.len() as u64 * passes).max(1) as f64;
    Measured {
        build_s,
        memory: engine.memory_bytes(),
        ns_per_packet: elapsed * 1e9 / packets,
        results,
    }
}

/// A point of the paper's model: a prefix of the first rule set, its size,
/// its α, and the ns/packet of each engine (in [`EngineKind::ALL`] order).
struct PaperPoint {
    label: String,
    n: usize,
    alpha: f64,
    ns: [f64; 2],
}

/// `kansoku bench filter`: one table row per engine and (rules, trace)
/// pair as it is measured, then the model's fit (and JSON of both with
/// `--json`), to `out`.
pub fn run(args: &BenchFilterArgs, stop: &AtomicBool, out: &mut dyn Write) -> Result<Report> {
    if args.trace.len() != 1 && args.trace.len() != args.rules.len() {
        return Err(Error::usage(
            "give one --trace for all --rules, or one per --rules",
        ));
    }
    let ghz = cpu_ghz();
    let mut report = Report::default();
    let mut rows = Vec::new();
    writeln!(out, "# kansoku bench filter (single core; fast engine timed for >= {} s, linear once over the trace)", args.min_seconds)?;
    if let Some(g) = ghz {
        writeln!(out, "# CPU clock from /proc/cpuinfo: {g:.3} GHz")?;
    }
    writeln!(out)?;
    table::header_all(
        out,
        &[
            "rules",
            "N",
            "trace",
            "packets",
            "α",
            "engine",
            "build ms",
            "memory KiB",
            "ns/packet",
            "Mpps",
            "speedup vs linear",
        ],
        Align::Left,
    )?;
    let mut paper_points: Vec<PaperPoint> = Vec::new();
    'pairs: for (i, rules_path) in args.rules.iter().enumerate() {
        let trace_path = args.trace.get(i).unwrap_or(&args.trace[0]);
        let rules = load_rules(rules_path)?;
        let (keys, expected) = read_all(trace_path, rules.len(), args.packets)?;
        // The paper's experiment: growing prefixes of the first rule set.
        let mut sets: Vec<(String, RuleSet)> = Vec::new();
        if i == 0 {
            for &n in &args.paper_sizes {
                if n < rules.len() {
                    sets.push((
                        format!("{} first {n}", display_path(rules_path)),
                        rules.truncated(n),
                    ));
                }
            }
        }
        let paper_count = sets.len();
        sets.push((display_path(rules_path), rules));
        for (j, (label, set)) in sets.iter().enumerate() {
            if stop.load(Ordering::Relaxed) {
                report.problems.push(
                    "bench filter: interrupted; the tables cover the rule sets measured"
                        .to_string(),
                );
                break 'pairs;
            }
            let lin = measure(EngineKind::Linear, set, &keys, 0.0);
            let fast = measure(EngineKind::Fast, set, &keys, args.min_seconds);
            let a = alpha(&lin.results, set.len());
            let mismatches = lin
                .results
                .iter()
                .zip(&fast.results)
                .filter(|(l, f)| l != f)
                .count();
            // The oracle applies to the whole rule set only.
            let oracle_misses = match (&expected, j == paper_count) {
                (Some(e), true) => e.iter().zip(&lin.results).filter(|(e, l)| e != l).count(),
                _ => 0,
            };
            if mismatches + oracle_misses > 0 {
                report.problems.push(format!("{label}: {mismatches} packets where fast and linear differ, {oracle_misses} where linear differs from the trace's FIRSTMATCH"));
            }
            for (m, kind) in [(&lin, EngineKind::Linear), (&fast, EngineKind::Fast)] {
                table::row(
                    out,
                    &[
                        label.clone(),
                        set.len().to_string(),
                        display_path(trace_path),
                        keys.len().to_string(),
                        format!("{a:.2}"),
                        kind.name().to_string(),
                        format!("{:.2}", m.build_s * 1e3),
                        format!("{:.0}", m.memory as f64 / 1024.0),
                        format!("{:.1}", m.ns_per_packet),
                        format!("{:.2}", 1e3 / m.ns_per_packet),
                        format!("{:.1}x", lin.ns_per_packet / m.ns_per_packet),
                    ],
                )?;
                rows.push(json!({
                    "rules": label, "n": set.len(), "trace": display_path(trace_path), "packets": keys.len(),
                    "alpha": a, "engine": kind.name(), "build_s": m.build_s, "memory_bytes": m.memory,
                    "ns_per_packet": m.ns_per_packet, "mpps": 1e3 / m.ns_per_packet,
                    "speedup_vs_linear": lin.ns_per_packet / m.ns_per_packet,
                }));
            }
            if i == 0 && j < paper_count {
                paper_points.push(PaperPoint {
                    label: label.clone(),
                    n: set.len(),
                    alpha: a,
                    ns: [lin.ns_per_packet, fast.ns_per_packet],
                });
            }
        }
    }
    let fits = print_fits(out, &paper_points, ghz)?;
    if args.json {
        writeln!(out, "{}", json!({"results": rows, "fits": fits}))?;
    }
    out.flush()?;
    Ok(report)
}

/// The paper's model fitted per engine over the prefixes (at least two),
/// as a table; returns the fits as JSON.
fn print_fits(out: &mut dyn Write, points: &[PaperPoint], ghz: Option<f64>) -> Result<Vec<Value>> {
    let mut fits = Vec::new();
    if points.len() < 2 {
        return Ok(fits);
    }
    writeln!(out)?;
    writeln!(out, "## The paper's model T = T_O + α·T_P (Tables 2 and 3), least squares over the rule-set sizes above")?;
    writeln!(out)?;
    table::header_all(
        out,
        &[
            "engine",
            "T_O ns",
            "T_P ns",
            "T_O cycles",
            "T_P cycles",
            "T_P / 3.9 (paper's best)",
            "residuals ns (per size)",
        ],
        Align::Left,
    )?;
    for (e, kind) in EngineKind::ALL.iter().enumerate() {
        let pts: Vec<(f64, f64)> = points.iter().map(|p| (p.alpha, p.ns[e])).collect();
        let Some(f) = fit(&pts) else { continue };
        let cyc = |ns: f64| ghz.map_or("-".to_string(), |g| format!("{:.2}", ns * g));
        let ratio = ghz.map_or("-".to_string(), |g| format!("{:.2}", f.t_p * g / 3.9));
        let res: Vec<String> = f.residuals.iter().map(|r| format!("{r:+.2}")).collect();
        table::row(
            out,
            &[
                kind.name().to_string(),
                format!("{:.2}", f.t_o),
                format!("{:.3}", f.t_p),
                cyc(f.t_o),
                cyc(f.t_p),
                ratio,
                res.join(" "),
            ],
        )?;
        fits.push(json!({"engine": kind.name(), "t_o_ns": f.t_o, "t_p_ns": f.t_p, "ghz": ghz, "residuals_ns": f.residuals,
            "points": points.iter().map(|p| json!({"rules": p.label, "n": p.n, "alpha": p.alpha, "ns": p.ns[e]})).collect::<Vec<_>>()}));
    }
    Ok(fits)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// Two ClassBench rules and three headers with their FIRSTMATCH column
    /// (the last one wrong when `wrong_oracle`).
    fn pair(dir: &Path, wrong_oracle: bool) -> (std::path::PathBuf, std::path::PathBuf) {
        let rules = dir.join("cb.rules");
        std::fs::write(
            &rules,
            "@10.0.0.0/8\t0.0.0.0/0\t0 : 65535\t80 : 80\t0x06/0xFF\t0x0000/0x0000\t\n\
             @0.0.0.0/0\t192.168.0.0/16\t0 : 65535\t0 : 65535\t0x00/0x00\t0x0000/0x0000\t\n",
        )
        .unwrap();
        let last = if wrong_oracle { 0 } else { 2 };
        let trace = dir.join("t.trace");
        std::fs::write(
            &trace,
            format!("167772161\t16843009\t1234\t80\t6\t0\n167772161\t3232235777\t53\t53\t17\t1\n16843009\t16843009\t0\t0\t1\t{last}\n"),
        )
        .unwrap();
        (rules, trace)
    }

    fn args(rules: &Path, trace: &Path, json: bool) -> BenchFilterArgs {
        BenchFilterArgs {
            rules: vec![rules.to_path_buf()],
            trace: vec![trace.to_path_buf()],
            paper_sizes: vec![1],
            packets: None,
            min_seconds: 0.0,
            json,
        }
    }

    #[test]
    fn a_table_row_per_engine_and_json_at_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let (rules, trace) = pair(dir.path(), false);
        let mut out = Vec::new();
        let never = AtomicBool::new(false);
        let r = run(&args(&rules, &trace, true), &never, &mut out).unwrap();
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("| rules | N | trace | packets | α | engine | build ms | memory KiB | ns/packet | Mpps | speedup vs linear |\n|---|---|---|---|---|---|---|---|---|---|---|\n"), "{text}");
        assert!(text.contains("| fast |"), "{text}");
        assert!(text.contains(" first 1 | 1 | "), "{text}");
        // One prefix and the whole set: no model fit from a single point.
        assert!(!text.contains("## The paper's model"), "{text}");
        let last = text.lines().last().unwrap();
        let v: Value = serde_json::from_str(last).unwrap();
        assert_eq!(v["results"].as_array().unwrap().len(), 4);
        assert_eq!(v["results"][3]["packets"], 3);
    }

    #[test]
    fn the_model_is_fitted_over_two_prefixes() {
        let dir = tempfile::tempdir().unwrap();
        let (rules, trace) = pair(dir.path(), false);
        // A third rule so that the prefixes of 1 and 2 rules are both fitted.
        let mut text = std::fs::read_to_string(&rules).unwrap();
        text.push_str("@0.0.0.0/0\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x00/0x00\t0x0000/0x0000\t\n");
        std::fs::write(&rules, text).unwrap();
        let mut a = args(&rules, &trace, false);
        a.paper_sizes = vec![1, 2];
        let mut out = Vec::new();
        run(&a, &AtomicBool::new(false), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("| engine | T_O ns | T_P ns | T_O cycles | T_P cycles | T_P / 3.9 (paper's best) | residuals ns (per size) |\n|---|---|---|---|---|---|---|\n| linear |"), "{text}");
    }

    #[test]
    fn a_wrong_firstmatch_is_a_problem() {
        let dir = tempfile::tempdir().unwrap();
        let (rules, trace) = pair(dir.path(), true);
        let r = run(
            &args(&rules, &trace, false),
            &AtomicBool::new(false),
            &mut Vec::new(),
        )
        .unwrap();
        assert_eq!(r.exit_code(), pipeline::ExitCode::Problems);
        assert!(
            r.problems[0].ends_with("0 packets where fast and linear differ, 1 where linear differs from the trace's FIRSTMATCH"),
            "{:?}",
            r.problems
        );
    }

    #[test]
    fn unpaired_traces_and_bad_rules_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let (rules, trace) = pair(dir.path(), false);
        let mut a = args(&rules, &trace, false);
        a.trace.push(trace.clone());
        let e = run(&a, &AtomicBool::new(false), &mut Vec::new()).unwrap_err();
        assert_eq!(e.kind, pipeline::ErrorKind::Usage);
        std::fs::write(&rules, "ip filter x\n").unwrap();
        let e = run(
            &args(&rules, &trace, false),
            &AtomicBool::new(false),
            &mut Vec::new(),
        )
        .unwrap_err();
        assert_eq!(e.kind, pipeline::ErrorKind::Input);
        assert!(e.message.starts_with(&display_path(&rules)), "{e}");
    }
}
