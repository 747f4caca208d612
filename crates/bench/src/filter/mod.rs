//! `kansoku bench filter`: the filter engines on rule sets and header
//! traces (ns/packet, Mpps, build time, memory, speedup over the linear
//! engine, which is the baseline), and Yamashita and Tsuru 2008's cost model
//! T = T_O + α·T_P fitted over growing prefixes of the first rule set
//! (Tables 2 and 3). Fast and linear must agree on every packet, and linear
//! with a ClassBench trace's FIRSTMATCH column: any difference is a problem
//! in the report (exit code 1).

pub mod dpdk_acl;

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use filter::model::{alpha, fit};
use filter::{Engine, EngineKind, PacketKey, RuleSet};
use pipeline::source::headers::read_all;
use pipeline::{display_path, load_rules, Error, Report, Result};
use serde_json::{json, Value};

use std::path::PathBuf;

use crate::args::{BenchFilterArgs, FilterPeer};
use crate::harness::table::{self, Align};

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
    /// The fast engine answered IPv4 keys with RFC tables (not its trees).
    tables: bool,
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
        tables: matches!(&engine, Engine::Fast(f) if f.tables().is_some()),
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

/// The (rules, trace) pairs of a run: files paired by position (or with the
/// only trace), directories expanded to their `NAME.rules` with
/// `NAME.trace.zst` or `NAME.trace`.
fn pairs(args: &BenchFilterArgs) -> Result<Vec<(PathBuf, PathBuf)>> {
    let files: Vec<&PathBuf> = args.rules.iter().filter(|p| !p.is_dir()).collect();
    if !files.is_empty() && args.trace.len() != 1 && args.trace.len() != files.len() {
        return Err(Error::usage(
            "give one --trace for all rule files, or one per rule file (a --rules directory pairs \
             NAME.rules with NAME.trace.zst itself)",
        ));
    }
    if files.is_empty() && !args.trace.is_empty() {
        return Err(Error::usage(
            "--trace goes with rule files; a --rules directory pairs NAME.rules with NAME.trace.zst",
        ));
    }
    let mut out = Vec::new();
    let mut file_no = 0;
    for r in &args.rules {
        if r.is_dir() {
            let mut names: Vec<PathBuf> = std::fs::read_dir(r)
                .map_err(|e| Error::input(format!("{}: {e}", display_path(r))))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "rules") && p.is_file())
                .collect();
            names.sort();
            if names.is_empty() {
                return Err(Error::input(format!(
                    "{}: no NAME.rules files",
                    display_path(r)
                )));
            }
            for rules in names {
                let trace = ["trace.zst", "trace"]
                    .iter()
                    .map(|x| rules.with_extension(x))
                    .find(|t| t.is_file())
                    .ok_or_else(|| {
                        Error::input(format!(
                            "{}: no trace beside it ({} or .trace)",
                            display_path(&rules),
                            display_path(&rules.with_extension("trace.zst"))
                        ))
                    })?;
                out.push((rules, trace));
            }
        } else {
            let trace = args.trace.get(file_no).unwrap_or(&args.trace[0]);
            out.push((r.clone(), trace.clone()));
            file_no += 1;
        }
    }
    Ok(out)
}

/// Update latency of the fast engine on one set: p50 and p99 of a delete
/// and of an insert, microseconds.
struct UpdateLatency {
    ops: usize,
    delete_us: (f64, f64),
    insert_us: (f64, f64),
    /// Headers classified otherwise than before the updates (each rule
    /// deleted was put back where it was, so the answers must not change).
    changed: usize,
}

/// Deletes `ops` rules spread over the set and puts each back where it was,
/// timing each operation on the built engine (no rebuild).
fn update_latency(
    rules: &RuleSet,
    keys: &[PacketKey],
    before: &[Option<u32>],
    ops: usize,
) -> UpdateLatency {
    let mut engine = Engine::build(EngineKind::Fast, rules);
    let n = rules.len();
    let (mut del, mut ins) = (Vec::new(), Vec::new());
    if n > 0 {
        // A fixed stride through the set (coprime with n), so the rules
        // touched are spread over it and the run repeats.
        let stride = (1..n)
            .rev()
            .step_by(7)
            .find(|s| gcd(*s, n) == 1)
            .unwrap_or(1);
        let mut at = 0;
        for _ in 0..ops {
            at = (at + stride) % n;
            let t = Instant::now();
            let rule = engine.delete(at);
            del.push(t.elapsed().as_secs_f64() * 1e6);
            let Some(rule) = rule else { break };
            let t = Instant::now();
            engine.insert(at, rule);
            ins.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    let mut after = vec![None; keys.len()];
    for (k, o) in keys.chunks(1024).zip(after.chunks_mut(1024)) {
        engine.classify_batch(k, o);
    }
    let changed = after.iter().zip(before).filter(|(a, b)| a != b).count();
    UpdateLatency {
        ops: del.len(),
        delete_us: p50_p99(&mut del),
        insert_us: p50_p99(&mut ins),
        changed,
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The median and the 99th percentile (nearest rank).
fn p50_p99(v: &mut [f64]) -> (f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0);
    }
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    (at(0.5), at(0.99))
}

/// A set's short name: its rule file's name without `.rules`.
fn set_name(path: &std::path::Path) -> String {
    let name = path
        .file_name()
        .map_or_else(|| display_path(path), |n| n.to_string_lossy().into_owned());
    name.strip_suffix(".rules").unwrap_or(&name).to_string()
}

/// How the linear engine is run on a set: every header, or every `step`-th
/// when a full pass is projected to take more than the budget.
fn linear_step(rules: &RuleSet, keys: &[PacketKey], budget_s: f64) -> (usize, f64) {
    let probe = keys.len().min(2_000);
    if probe == 0 {
        return (1, 0.0);
    }
    let engine = Engine::build(EngineKind::Linear, rules);
    let t = Instant::now();
    let mut hits = 0usize;
    for k in &keys[..probe] {
        hits += usize::from(engine.classify(k).is_some());
    }
    std::hint::black_box(hits);
    let projected = t.elapsed().as_secs_f64() / probe as f64 * keys.len() as f64;
    let step = (projected / budget_s).ceil().max(1.0) as usize;
    (step, projected)
}

/// The CPU this thread last ran on (/proc/self/stat's 39th field), where the
/// peer is pinned so that both run on one core.
fn current_cpu() -> usize {
    std::fs::read_to_string("/proc/thread-self/stat")
        .ok()
        .and_then(|s| {
            // The command name (field 2) may hold spaces: count after ')'.
            let rest = s.rsplit_once(')')?.1;
            rest.split_whitespace().nth(36)?.parse().ok()
        })
        .unwrap_or(0)
}

/// `kansoku bench filter`: one table row per engine and (rules, trace)
/// pair as it is measured (and the peer's, with `--peer`), then the model's
/// fit (and JSON of both with `--json`), to `out`.
pub fn run(args: &BenchFilterArgs, stop: &AtomicBool, out: &mut dyn Write) -> Result<Report> {
    let pairs = pairs(args)?;
    let ghz = cpu_ghz();
    let mut report = Report::default();
    let mut rows = Vec::new();
    writeln!(out, "# kansoku bench filter (single core; fast engine timed for >= {} s, the linear baseline once over the trace or a sample of it)", args.min_seconds).map_err(Error::stdout)?;
    if let Some(g) = ghz {
        writeln!(out, "# CPU clock from /proc/cpuinfo: {g:.3} GHz").map_err(Error::stdout)?;
    }
    if args.peer == Some(FilterPeer::Dpdk) {
        writeln!(
            out,
            "# peer: DPDK's ACL library ({}, batches of 256, 3 passes, on this core)",
            dpdk_acl::PROGRAM
        )
        .map_err(Error::stdout)?;
    }
    for (r, t) in &pairs {
        writeln!(
            out,
            "# {}: {} with {}",
            set_name(r),
            display_path(r),
            display_path(t)
        )
        .map_err(Error::stdout)?;
    }
    writeln!(out).map_err(Error::stdout)?;
    let peer_col = args.peer.is_some();
    let mut columns = vec![
        "set",
        "rules",
        "headers",
        "α",
        "engine",
        "build ms",
        "memory KiB",
        "ns/packet",
        "Mpps",
        "vs linear",
    ];
    if peer_col {
        columns.push("vs dpdk");
    }
    table::header_all(out, &columns, Align::Left).map_err(Error::stdout)?;
    let mut paper_points: Vec<PaperPoint> = Vec::new();
    // Said after the table, which a line inside would break.
    let mut notes: Vec<String> = Vec::new();
    let mut updates: Vec<(String, usize, UpdateLatency)> = Vec::new();
    let scratch = tempfile::tempdir()
        .map_err(|e| Error::output("a temporary directory for the rule sets' updates", &e))?;
    'pairs: for (i, (rules_path, trace_path)) in pairs.iter().enumerate() {
        let rules = load_rules(rules_path)?;
        let (keys, expected) = read_all(trace_path, rules.len(), args.packets)?;
        let name = set_name(rules_path);
        // The paper's experiment: growing prefixes of the first rule set.
        let mut sets: Vec<(String, RuleSet)> = Vec::new();
        if i == 0 {
            for &n in &args.paper_sizes {
                if n > 0 && n < rules.len() {
                    sets.push((format!("{name} first {n}"), rules.truncated(n)));
                }
            }
        }
        let paper_count = sets.len();
        let classbench = rules.syntax() == filter::Syntax::ClassBench;
        sets.push((name.clone(), rules));
        for (j, (label, set)) in sets.iter().enumerate() {
            if stop.load(Ordering::Relaxed) {
                report.problems.push(
                    "bench filter: interrupted; the tables cover the rule sets measured"
                        .to_string(),
                );
                break 'pairs;
            }
            let whole = j == paper_count;
            let fast = measure(EngineKind::Fast, set, &keys, args.min_seconds);
            let (step, projected) = linear_step(set, &keys, args.linear_seconds);
            let sample: Vec<PacketKey> = keys.iter().step_by(step).copied().collect();
            let lin = measure(EngineKind::Linear, set, &sample, 0.0);
            if step > 1 {
                notes.push(format!("{label}: a linear pass over all {} headers would take about {projected:.0} s; the linear engine classified one header in {step} ({} headers), and its rate, α and agreement with the fast engine are of those", keys.len(), sample.len()));
            }
            let a = alpha(&lin.results, set.len());
            let mismatches = lin
                .results
                .iter()
                .zip(fast.results.iter().step_by(step))
                .filter(|(l, f)| l != f)
                .count();
            // The oracle applies to the whole rule set only.
            let (oracle_fast, oracle_lin) = match (&expected, whole) {
                (Some(e), true) => (
                    e.iter().zip(&fast.results).filter(|(e, f)| e != f).count(),
                    e.iter()
                        .step_by(step)
                        .zip(&lin.results)
                        .filter(|(e, l)| e != l)
                        .count(),
                ),
                _ => (0, 0),
            };
            if mismatches + oracle_fast + oracle_lin > 0 {
                report.problems.push(format!("{label}: {mismatches} packets where fast and linear differ, {oracle_lin} where linear differs from the trace's FIRSTMATCH, {oracle_fast} where fast does"));
            }
            if whole && args.updates > 0 {
                let u = update_latency(set, &keys, &fast.results, args.updates as usize);
                if u.changed > 0 {
                    report.problems.push(format!("{label}: {} headers classified otherwise after deleting and re-inserting {} rules", u.changed, u.ops));
                }
                updates.push((label.clone(), set.len(), u));
            }
            let peer = if whole && args.peer == Some(FilterPeer::Dpdk) {
                if !classbench {
                    report.problems.push(format!(
                        "{label}: --peer dpdk needs a ClassBench rule file; not measured"
                    ));
                    None
                } else {
                    let trace = scratch.path().join(format!("{name}.trace"));
                    let run = dpdk_acl::is_v6(set).and_then(|v6| {
                        let n = dpdk_acl::write_trace(&keys, v6, &trace)
                            .map_err(|e| format!("writing {}: {e}", trace.display()))?;
                        dpdk_acl::run(rules_path, &trace, set.len(), n, v6, current_cpu())
                    });
                    match run {
                        Ok(r) => Some(r),
                        Err(e) => {
                            report.problems.push(format!("{label}: {e}"));
                            None
                        }
                    }
                }
            } else {
                None
            };
            let lin_name = if step > 1 {
                format!("linear (1 in {step})")
            } else {
                "linear".to_string()
            };
            let mut first_row = true;
            for (m, kind, engine) in [
                (&lin, EngineKind::Linear, lin_name.as_str()),
                (&fast, EngineKind::Fast, "fast"),
            ] {
                let mut cells = vec![
                    if first_row {
                        label.clone()
                    } else {
                        String::new()
                    },
                    if first_row {
                        set.len().to_string()
                    } else {
                        String::new()
                    },
                    if first_row {
                        keys.len().to_string()
                    } else {
                        String::new()
                    },
                    if first_row {
                        format!("{a:.2}")
                    } else {
                        String::new()
                    },
                    if m.tables {
                        format!("{engine} (RFC)")
                    } else {
                        engine.to_string()
                    },
                    format!("{:.2}", m.build_s * 1e3),
                    format!("{:.0}", m.memory as f64 / 1024.0),
                    format!("{:.1}", m.ns_per_packet),
                    format!("{:.2}", 1e3 / m.ns_per_packet),
                    format!("{:.1}x", lin.ns_per_packet / m.ns_per_packet),
                ];
                if peer_col {
                    cells.push(peer.as_ref().map_or(String::new(), |p| {
                        format!("{:.2}x", p.ns_per_packet / m.ns_per_packet)
                    }));
                }
                table::row(out, &cells).map_err(Error::stdout)?;
                first_row = false;
                rows.push(json!({
                    "rules": label, "rules_file": display_path(rules_path), "n": set.len(),
                    "trace": display_path(trace_path), "packets": keys.len(),
                    "alpha": a, "engine": kind.name(), "rfc_tables": m.tables, "sample_step": if kind == EngineKind::Linear { step } else { 1 },
                    "build_s": m.build_s, "memory_bytes": m.memory,
                    "ns_per_packet": m.ns_per_packet, "mpps": 1e3 / m.ns_per_packet,
                    "speedup_vs_linear": lin.ns_per_packet / m.ns_per_packet,
                }));
            }
            if let Some(p) = &peer {
                let cells = vec![
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    format!("dpdk ({})", p.alg),
                    "-".to_string(),
                    p.memory
                        .map_or("-".to_string(), |b| format!("{:.0}", b as f64 / 1024.0)),
                    format!("{:.1}", p.ns_per_packet),
                    format!("{:.2}", 1e3 / p.ns_per_packet),
                    format!("{:.1}x", lin.ns_per_packet / p.ns_per_packet),
                    String::new(),
                ];
                table::row(out, &cells).map_err(Error::stdout)?;
                rows.push(json!({
                    "rules": label, "rules_file": display_path(rules_path), "n": set.len(),
                    "trace": display_path(trace_path), "packets": keys.len(), "engine": "dpdk",
                    "alg": p.alg, "memory_bytes": p.memory, "ns_per_packet": p.ns_per_packet,
                    "mpps": 1e3 / p.ns_per_packet, "speedup_vs_linear": lin.ns_per_packet / p.ns_per_packet,
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
    if !notes.is_empty() {
        writeln!(out).map_err(Error::stdout)?;
        for n in &notes {
            writeln!(out, "- {n}").map_err(Error::stdout)?;
        }
    }
    if !updates.is_empty() {
        writeln!(out).map_err(Error::stdout)?;
        writeln!(out, "## Updates: the fast engine, each rule deleted and put back in place, no rebuild (µs per operation)").map_err(Error::stdout)?;
        writeln!(out).map_err(Error::stdout)?;
        table::header_all(
            out,
            &[
                "set",
                "rules",
                "operations",
                "delete p50",
                "delete p99",
                "insert p50",
                "insert p99",
                "answers after",
            ],
            Align::Left,
        )
        .map_err(Error::stdout)?;
        for (label, n, u) in &updates {
            table::row(
                out,
                &[
                    label.clone(),
                    n.to_string(),
                    u.ops.to_string(),
                    format!("{:.1}", u.delete_us.0),
                    format!("{:.1}", u.delete_us.1),
                    format!("{:.1}", u.insert_us.0),
                    format!("{:.1}", u.insert_us.1),
                    if u.changed == 0 {
                        "unchanged".to_string()
                    } else {
                        format!("{} changed", u.changed)
                    },
                ],
            )
            .map_err(Error::stdout)?;
            rows.push(json!({
                "rules": label, "n": n, "engine": "fast", "update_ops": u.ops,
                "delete_p50_us": u.delete_us.0, "delete_p99_us": u.delete_us.1,
                "insert_p50_us": u.insert_us.0, "insert_p99_us": u.insert_us.1, "changed_after": u.changed,
            }));
        }
    }
    let fits = print_fits(out, &paper_points, ghz)?;
    if args.json {
        writeln!(out, "{}", json!({"results": rows, "fits": fits})).map_err(Error::stdout)?;
    }
    out.flush().map_err(Error::stdout)?;
    Ok(report)
}

/// The paper's model fitted per engine over the prefixes (at least two),
/// as a table; returns the fits as JSON.
fn print_fits(out: &mut dyn Write, points: &[PaperPoint], ghz: Option<f64>) -> Result<Vec<Value>> {
    let mut fits = Vec::new();
    if points.len() < 2 {
        return Ok(fits);
    }
    writeln!(out).map_err(Error::stdout)?;
    writeln!(out, "## The paper's model T = T_O + α·T_P (Tables 2 and 3), least squares over the rule-set sizes above").map_err(Error::stdout)?;
    writeln!(out).map_err(Error::stdout)?;
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
    )
    .map_err(Error::stdout)?;
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
        )
        .map_err(Error::stdout)?;
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
            peer: None,
            linear_seconds: 10.0,
            updates: 50,
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
        assert!(text.contains("| set | rules | headers | α | engine | build ms | memory KiB | ns/packet | Mpps | vs linear |\n|---|---|---|---|---|---|---|---|---|---|\n"), "{text}");
        // The files are named once, above the table; a set's name, size and
        // trace length only on its first row.
        assert!(
            text.contains(&format!(
                "# cb: {} with {}\n",
                display_path(&rules),
                display_path(&trace)
            )),
            "{text}"
        );
        assert!(text.contains("| cb first 1 | 1 | 3 | "), "{text}");
        // The fast engine answers this small set with its RFC tables.
        assert!(text.contains("\n| | | | | fast (RFC) | "), "{text}");
        // One prefix and the whole set: no model fit from a single point.
        assert!(!text.contains("## The paper's model"), "{text}");
        let last = text.lines().last().unwrap();
        let v: Value = serde_json::from_str(last).unwrap();
        // Two engines on the prefix and on the set, then the set's updates:
        // 50 deletes and re-inserts of its 2 rules, answers unchanged.
        assert_eq!(v["results"].as_array().unwrap().len(), 5);
        assert_eq!(v["results"][3]["packets"], 3);
        assert_eq!(v["results"][3]["rfc_tables"], true);
        assert_eq!(v["results"][4]["update_ops"], 50);
        assert_eq!(v["results"][4]["changed_after"], 0);
        assert!(v["results"][4]["insert_p99_us"].as_f64().unwrap() > 0.0);
        assert!(text.contains("## Updates: the fast engine"), "{text}");
        assert!(text.contains("\n| cb | 2 | 50 | "), "{text}");
        assert!(text.contains(" | unchanged |\n"), "{text}");
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
            r.problems[0].ends_with("0 packets where fast and linear differ, 1 where linear differs from the trace's FIRSTMATCH, 1 where fast does"),
            "{:?}",
            r.problems
        );
    }

    #[test]
    fn a_directory_pairs_each_rule_file_with_its_trace() {
        let dir = tempfile::tempdir().unwrap();
        let (rules, trace) = pair(dir.path(), false);
        // Two sets: cb.rules with cb.trace, and a copy with a zstd trace.
        std::fs::rename(&trace, dir.path().join("cb.trace")).unwrap();
        std::fs::copy(&rules, dir.path().join("second.rules")).unwrap();
        let plain = std::fs::read(dir.path().join("cb.trace")).unwrap();
        std::fs::write(
            dir.path().join("second.trace.zst"),
            zstd::encode_all(&plain[..], 1).unwrap(),
        )
        .unwrap();
        let mut a = args(dir.path(), dir.path(), false);
        a.trace.clear();
        a.paper_sizes.clear();
        let mut out = Vec::new();
        let r = run(&a, &AtomicBool::new(false), &mut out).unwrap();
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("\n| cb | 2 | 3 | "), "{text}");
        assert!(text.contains("\n| second | 2 | 3 | "), "{text}");
        // A rule file without its trace is an error that names it.
        std::fs::write(
            dir.path().join("third.rules"),
            "@0.0.0.0/0\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x00/0x00\n",
        )
        .unwrap();
        let e = run(&a, &AtomicBool::new(false), &mut Vec::new()).unwrap_err();
        assert!(e.message.contains("third.rules: no trace beside it"), "{e}");
        // A --trace beside only a directory is a usage error.
        a.trace.push(dir.path().join("cb.trace"));
        let e = run(&a, &AtomicBool::new(false), &mut Vec::new()).unwrap_err();
        assert_eq!(e.kind, pipeline::ErrorKind::Usage);
    }

    #[test]
    fn a_slow_linear_pass_is_sampled_and_said() {
        let dir = tempfile::tempdir().unwrap();
        let (rules, _) = pair(dir.path(), false);
        // 3,000 headers, every one matching rule 1 (FIRSTMATCH 1).
        let line = "167772161\t3232235777\t53\t53\t17\t1\n";
        let trace = dir.path().join("many.trace");
        std::fs::write(&trace, line.repeat(3000)).unwrap();
        let mut a = args(&rules, &trace, false);
        a.paper_sizes.clear();
        // A budget no pass can meet: the smallest sample the probe allows.
        a.linear_seconds = 1e-12;
        let mut out = Vec::new();
        let r = run(&a, &AtomicBool::new(false), &mut out).unwrap();
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        let text = String::from_utf8(out).unwrap();
        let step = text
            .split("| linear (1 in ")
            .nth(1)
            .and_then(|s| s.split(')').next())
            .and_then(|s| s.parse::<usize>().ok())
            .unwrap_or_else(|| panic!("no sampled linear row: {text}"));
        assert!(step > 1, "{text}");
        assert!(
            text.contains(&format!(
                "the linear engine classified one header in {step} ({} headers)",
                3000_usize.div_ceil(step)
            )),
            "{text}"
        );
    }

    /// The peer itself on a ClassBench set (under CI dpdk-test-acl must be
    /// installed: scripts/install-deps.sh does).
    #[test]
    fn dpdk_is_measured_beside_the_engines() {
        if !testkit::require(
            dpdk_acl::PROGRAM,
            crate::harness::peers::which(dpdk_acl::PROGRAM).is_some(),
        ) {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let (rules, trace) = pair(dir.path(), false);
        let mut a = args(&rules, &trace, true);
        a.paper_sizes.clear();
        a.peer = Some(FilterPeer::Dpdk);
        let mut out = Vec::new();
        let r = run(&a, &AtomicBool::new(false), &mut out).unwrap();
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("| vs linear | vs dpdk |"), "{text}");
        let v: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        let d = v["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["engine"] == "dpdk")
            .unwrap_or_else(|| panic!("no dpdk row: {text}"));
        assert!(d["ns_per_packet"].as_f64().unwrap() > 0.0, "{d}");
        assert!(d["memory_bytes"].as_u64().unwrap() > 0, "{d}");
        // A rule file in the paper's syntax cannot go to DPDK: said, not hidden.
        std::fs::write(&rules, "ip filter 1 pass * * * * *\n").unwrap();
        let r = run(&a, &AtomicBool::new(false), &mut Vec::new()).unwrap();
        assert!(
            r.problems
                .iter()
                .any(|p| p.contains("--peer dpdk needs a ClassBench rule file")),
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
