//! `kansoku filter` (run, explain, lint, match) and `kansoku bench filter`:
//! the command-line side of the `filter` crate.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::time::Instant;

use filter::model::{alpha, fit};
use filter::{Action, Engine, EngineKind, Filter, Finding, PacketKey, RuleSet};
use serde_json::json;
use trace::Record;

use crate::cli::{
    BenchArgs, BenchCommand, BenchFilterArgs, EngineArg, FilterArgs, FilterCommand,
    FilterExplainArgs, FilterLintArgs, FilterMatchArgs, FilterRunArgs,
};
use crate::error::{display_path, CliError, CliResult, EXIT_PROBLEMS};
use crate::sink::Sink;
use crate::{input, signals};

pub fn run(args: &FilterArgs) -> CliResult<i32> {
    match &args.command {
        None => filter_trace(&args.run),
        Some(FilterCommand::Run(a)) => filter_trace(a),
        Some(FilterCommand::Explain(a)) => explain(a),
        Some(FilterCommand::Lint(a)) => lint(a),
        Some(FilterCommand::Match(a)) => match_trace(a),
    }
}

pub fn bench(args: &BenchArgs) -> CliResult<i32> {
    match &args.command {
        BenchCommand::Filter(a) => bench_filter(a),
        // main.rs sends these to cmd_bench; kept here so the match stays total.
        BenchCommand::Disk(a) => crate::cmd_bench::disk(a),
        BenchCommand::Compress(a) => crate::cmd_bench::compress(a),
        BenchCommand::Capture(a) => crate::cmd_bench_capture::run(a),
    }
}

fn engine_kind(e: EngineArg) -> EngineKind {
    match e {
        EngineArg::Linear => EngineKind::Linear,
        EngineArg::Fast => EngineKind::Fast,
    }
}

/// Reads and parses a rule file; errors read `FILE:LINE:COLUMN: what`.
/// Reads and parses a rule file (the paper's syntax or ClassBench), with
/// `FILE:LINE:COLUMN` errors.
pub(crate) fn load_rules(path: &Path) -> CliResult<RuleSet> {
    let text = std::fs::read_to_string(path).map_err(|e| CliError::file(path, e))?;
    RuleSet::parse(&text).map_err(|e| CliError::input(format!("{}:{e}", display_path(path))))
}

fn rule_json(rules: &RuleSet, i: usize) -> serde_json::Value {
    let r = &rules.rules()[i];
    json!({"id": r.id, "line": r.line, "action": r.action.to_string(), "rule": r.to_string()})
}

fn filter_trace(args: &FilterRunArgs) -> CliResult<i32> {
    let (Some(read), Some(rules_path)) = (&args.read, &args.rules) else {
        return Err(CliError::input("filter needs -r FILE and --rules FILE"));
    };
    let rules = load_rules(rules_path)?;
    let mut filter = Filter::new(rules, engine_kind(args.engine));
    let mut passed = args
        .out
        .write
        .as_deref()
        .map(|p| Sink::new(&args.out, p))
        .transpose()?;
    let mut rejected = args
        .rejected
        .as_deref()
        .map(|p| Sink::new(&args.out, p))
        .transpose()?;
    let (mut reader, _) = input::open(read, None, None)?;
    let mut non_ip = filter::Hits::default();
    let mut read_error = None;
    loop {
        if signals::stop_requested() {
            break;
        }
        let rec = match reader.next_record() {
            Ok(Some(rec)) => rec,
            Ok(None) => break,
            Err(e) => {
                read_error = Some(e);
                break;
            }
        };
        let Record::Packet(p) = &rec else {
            // Sections and interfaces go to both outputs.
            for sink in [&mut passed, &mut rejected].into_iter().flatten() {
                sink.write(&rec)?;
            }
            continue;
        };
        let bytes = u64::from(p.orig_len);
        let slice = wire::slice(p.link_type, p.data);
        let action = match PacketKey::from_slice(&slice) {
            Some(key) => filter.apply(&key, bytes).action,
            None => {
                // Not IP: no `ip filter` rule can match it; the default rule rejects it.
                non_ip.packets += 1;
                non_ip.bytes += bytes;
                Action::Reject
            }
        };
        let sink = match action {
            Action::Pass => &mut passed,
            Action::Reject => &mut rejected,
        };
        if let Some(sink) = sink {
            sink.write(&rec)?;
        }
    }
    for sink in [passed, rejected].into_iter().flatten() {
        sink.finish()?;
    }
    report_run(&filter, non_ip, args.json)?;
    if let Some(e) = read_error {
        eprintln!("kansoku: {}: {e}", display_path(read));
        return Ok(EXIT_PROBLEMS);
    }
    Ok(0)
}

fn report_run(filter: &Filter, non_ip: filter::Hits, as_json: bool) -> CliResult<()> {
    let rules = filter.rules();
    let c = filter.counters();
    let mut pass = filter::Hits::default();
    let mut reject = non_ip;
    for (r, h) in rules.rules().iter().zip(&c.rules) {
        let t = if r.action == Action::Pass {
            &mut pass
        } else {
            &mut reject
        };
        t.packets += h.packets;
        t.bytes += h.bytes;
    }
    reject.packets += c.default.packets;
    reject.bytes += c.default.bytes;
    let mut out = BufWriter::new(io::stdout().lock());
    if as_json {
        let per_rule: Vec<_> = rules
            .rules()
            .iter()
            .zip(&c.rules)
            .enumerate()
            .map(|(i, (_, h))| {
                let mut v = rule_json(rules, i);
                v["packets"] = h.packets.into();
                v["bytes"] = h.bytes.into();
                v
            })
            .collect();
        let v = json!({
            "engine": filter.engine().kind().name(),
            "rules": per_rule,
            "default": {"packets": c.default.packets, "bytes": c.default.bytes},
            "non_ip": {"packets": non_ip.packets, "bytes": non_ip.bytes},
            "passed": {"packets": pass.packets, "bytes": pass.bytes},
            "rejected": {"packets": reject.packets, "bytes": reject.bytes},
        });
        writeln!(out, "{v}")?;
    } else {
        writeln!(
            out,
            "{:>10} {:>7} {:>12} {:>14}  rule",
            "id", "action", "packets", "bytes"
        )?;
        for (r, h) in rules.rules().iter().zip(&c.rules) {
            writeln!(
                out,
                "{:>10} {:>7} {:>12} {:>14}  {r}",
                r.id,
                r.action.to_string(),
                h.packets,
                h.bytes
            )?;
        }
        writeln!(
            out,
            "{:>10} {:>7} {:>12} {:>14}  (no rule matched)",
            "default", "reject", c.default.packets, c.default.bytes
        )?;
        if non_ip.packets > 0 {
            writeln!(
                out,
                "{:>10} {:>7} {:>12} {:>14}  (not IP)",
                "non-ip", "reject", non_ip.packets, non_ip.bytes
            )?;
        }
        writeln!(
            out,
            "passed {} packets ({} bytes), rejected {} packets ({} bytes)",
            pass.packets, pass.bytes, reject.packets, reject.bytes
        )?;
    }
    out.flush()?;
    Ok(())
}

fn explain(args: &FilterExplainArgs) -> CliResult<i32> {
    let rules = load_rules(&args.rules)?;
    let text = args.packet.join(" ");
    let key =
        PacketKey::parse(&text).map_err(|e| CliError::input(format!("packet `{text}`: {e}")))?;
    let linear = Engine::build(EngineKind::Linear, &rules);
    let first = linear.classify(&key);
    // Every later rule that also matches is shadowed by the first for this packet.
    let later: Vec<usize> = match first {
        Some(f) => (f as usize + 1..rules.len())
            .filter(|&i| rules.rules()[i].matches(&key))
            .collect(),
        None => Vec::new(),
    };
    let mut out = io::stdout().lock();
    if args.json {
        let v = json!({
            "packet": key.to_string(),
            "action": rules.action(first).to_string(),
            "first": first.map(|f| rule_json(&rules, f as usize)),
            "also": later.iter().map(|&i| rule_json(&rules, i)).collect::<Vec<_>>(),
        });
        writeln!(out, "{v}")?;
        return Ok(0);
    }
    writeln!(out, "packet: {key}")?;
    match first {
        Some(f) => {
            let r = &rules.rules()[f as usize];
            writeln!(
                out,
                "{}: line {}: {r}",
                r.action.to_string().to_uppercase(),
                r.line
            )?;
        }
        None => writeln!(out, "REJECT: no rule matches (the default rule)")?,
    }
    for i in later {
        let r = &rules.rules()[i];
        writeln!(out, "  also matches, shadowed here: line {}: {r}", r.line)?;
    }
    Ok(0)
}

fn lint(args: &FilterLintArgs) -> CliResult<i32> {
    let rules = load_rules(&args.rules)?;
    let findings = filter::lint(rules.rules());
    let name = display_path(&args.rules);
    let mut out = io::stdout().lock();
    for f in &findings {
        let (kind, rule, other) = match *f {
            Finding::Shadowed { rule, by } => ("shadowed", rule, by),
            Finding::Conflict { rule, earlier } => ("conflict", rule, earlier),
        };
        let (r, o) = (&rules.rules()[rule], &rules.rules()[other]);
        if args.json {
            writeln!(
                out,
                "{}",
                json!({"kind": kind, "rule": rule_json(&rules, rule), "by": rule_json(&rules, other)})
            )?;
        } else if kind == "shadowed" {
            writeln!(out, "{name}:{}: rule {} can never match: rule {} (line {}) matches every packet it would", r.line, r.id, o.id, o.line)?;
        } else {
            writeln!(out, "{name}:{}: rule {} ({}) overlaps rule {} (line {}, {}); rule {} wins where both match", r.line, r.id, r.action, o.id, o.line, o.action, o.id)?;
        }
    }
    Ok(if findings.is_empty() {
        0
    } else {
        EXIT_PROBLEMS
    })
}

/// A header trace: keys and, for ClassBench traces, the expected first match.
struct Headers {
    keys: Vec<PacketKey>,
    expected: Option<Vec<Option<u32>>>,
}

/// Opens `path` as text, through zstd when it starts with zstd's magic.
fn open_text(path: &Path) -> CliResult<Box<dyn BufRead>> {
    let raw: Box<dyn Read> = if path.as_os_str() == "-" {
        Box::new(io::stdin())
    } else {
        Box::new(File::open(path).map_err(|e| CliError::file(path, e))?)
    };
    let mut raw = BufReader::new(raw);
    let head = raw.fill_buf().map_err(|e| CliError::file(path, e))?;
    if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        let z = zstd::Decoder::with_buffer(raw).map_err(|e| CliError::file(path, e))?;
        Ok(Box::new(BufReader::new(z)))
    } else {
        Ok(Box::new(raw))
    }
}

/// Whether a file holds a ClassBench text trace rather than packets.
fn is_text_trace(path: &Path) -> CliResult<bool> {
    let mut r = open_text(path)?;
    let head = r.fill_buf().map_err(|e| CliError::file(path, e))?;
    Ok(!head.is_empty()
        && head
            .iter()
            .take(64)
            .all(|b| b.is_ascii_digit() || b.is_ascii_whitespace()))
}

fn read_class_bench(path: &Path, limit: Option<usize>, n_rules: usize) -> CliResult<Headers> {
    let r = open_text(path)?;
    let name = display_path(path);
    let mut keys = Vec::new();
    let mut expected = Vec::new();
    for (i, line) in r.lines().enumerate() {
        if limit.is_some_and(|l| keys.len() >= l) {
            break;
        }
        let line = line.map_err(|e| CliError::input(format!("{name}:{}: {e}", i + 1)))?;
        if line.trim().is_empty() {
            continue;
        }
        let (key, m) = filter::parse::parse_trace_line(&line)
            .map_err(|e| CliError::input(format!("{name}:{}: {e}", i + 1)))?;
        keys.push(key);
        expected.push(
            m.and_then(|m| u32::try_from(m).ok())
                .filter(|&m| (m as usize) < n_rules),
        );
    }
    Ok(Headers {
        keys,
        expected: Some(expected),
    })
}

/// ClassBench text, or the IP packets of a pcap/pcapng trace.
fn read_headers(path: &Path, limit: Option<usize>, n_rules: usize) -> CliResult<Headers> {
    if path.as_os_str() != "-" && is_text_trace(path)? {
        return read_class_bench(path, limit, n_rules);
    }
    let (mut reader, _) = input::open(path, None, None)?;
    let mut keys = Vec::new();
    while limit.is_none_or(|l| keys.len() < l) {
        match reader.next_record() {
            Ok(Some(Record::Packet(p))) => {
                if let Some(k) = PacketKey::from_slice(&wire::slice(p.link_type, p.data)) {
                    keys.push(k);
                }
            }
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(e) => return Err(CliError::file(path, e)),
        }
    }
    Ok(Headers {
        keys,
        expected: None,
    })
}

fn match_trace(args: &FilterMatchArgs) -> CliResult<i32> {
    let rules = load_rules(&args.rules)?;
    let h = read_class_bench(&args.trace, None, rules.len())?;
    let engine = Engine::build(engine_kind(args.engine), &rules);
    let mut out = BufWriter::with_capacity(64 * 1024, io::stdout().lock());
    let mut results = vec![None; 4096];
    for chunk in h.keys.chunks(4096) {
        engine.classify_batch(chunk, &mut results);
        for m in &results[..chunk.len()] {
            match m {
                Some(i) => writeln!(out, "{}", rules.rules()[*i as usize].id)?,
                None => writeln!(out, "none")?,
            }
        }
    }
    out.flush()?;
    Ok(0)
}

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

fn bench_filter(args: &BenchFilterArgs) -> CliResult<i32> {
    if args.trace.len() != 1 && args.trace.len() != args.rules.len() {
        return Err(CliError::input(
            "give one --trace for all --rules, or one per --rules",
        ));
    }
    let ghz = cpu_ghz();
    let mut out = io::stdout().lock();
    let mut problems = 0usize;
    let mut rows = Vec::new();
    let mut fits = Vec::new();
    writeln!(out, "# kansoku bench filter (single core; fast engine timed for >= {} s, linear once over the trace)", args.min_seconds)?;
    if let Some(g) = ghz {
        writeln!(out, "# CPU clock from /proc/cpuinfo: {g:.3} GHz")?;
    }
    writeln!(out)?;
    writeln!(out, "| rules | N | trace | packets | α | engine | build ms | memory KiB | ns/packet | Mpps | speedup vs linear |")?;
    writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|")?;
    let mut paper_points: Vec<(String, usize, f64, [f64; 2])> = Vec::new();
    for (i, rules_path) in args.rules.iter().enumerate() {
        let trace_path = args.trace.get(i).unwrap_or(&args.trace[0]);
        let rules = load_rules(rules_path)?;
        let headers = read_headers(trace_path, args.packets, rules.len())?;
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
            let lin = measure(EngineKind::Linear, set, &headers.keys, 0.0);
            let fast = measure(EngineKind::Fast, set, &headers.keys, args.min_seconds);
            let a = alpha(&lin.results, set.len());
            let mismatches = lin
                .results
                .iter()
                .zip(&fast.results)
                .filter(|(l, f)| l != f)
                .count();
            // The oracle applies to the whole rule set only.
            let oracle_misses = match (&headers.expected, j == paper_count) {
                (Some(e), true) => e.iter().zip(&lin.results).filter(|(e, l)| e != l).count(),
                _ => 0,
            };
            if mismatches + oracle_misses > 0 {
                eprintln!("kansoku: {label}: {mismatches} packets where fast and linear differ, {oracle_misses} where linear differs from the trace's FIRSTMATCH");
                problems += 1;
            }
            for (m, kind) in [(&lin, EngineKind::Linear), (&fast, EngineKind::Fast)] {
                writeln!(
                    out,
                    "| {label} | {} | {} | {} | {a:.2} | {} | {:.2} | {:.0} | {:.1} | {:.2} | {:.1}x |",
                    set.len(),
                    display_path(trace_path),
                    headers.keys.len(),
                    kind.name(),
                    m.build_s * 1e3,
                    m.memory as f64 / 1024.0,
                    m.ns_per_packet,
                    1e3 / m.ns_per_packet,
                    lin.ns_per_packet / m.ns_per_packet,
                )?;
                rows.push(json!({
                    "rules": label, "n": set.len(), "trace": display_path(trace_path), "packets": headers.keys.len(),
                    "alpha": a, "engine": kind.name(), "build_s": m.build_s, "memory_bytes": m.memory,
                    "ns_per_packet": m.ns_per_packet, "mpps": 1e3 / m.ns_per_packet,
                    "speedup_vs_linear": lin.ns_per_packet / m.ns_per_packet,
                }));
            }
            if i == 0 && j < paper_count {
                paper_points.push((
                    label.clone(),
                    set.len(),
                    a,
                    [lin.ns_per_packet, fast.ns_per_packet],
                ));
            }
        }
    }
    if paper_points.len() >= 2 {
        writeln!(out)?;
        writeln!(out, "## The paper's model T = T_O + α·T_P (Tables 2 and 3), least squares over the rule-set sizes above")?;
        writeln!(out)?;
        writeln!(out, "| engine | T_O ns | T_P ns | T_O cycles | T_P cycles | T_P / 3.9 (paper's best) | residuals ns (per size) |")?;
        writeln!(out, "|---|---|---|---|---|---|---|")?;
        for (e, kind) in EngineKind::ALL.iter().enumerate() {
            let pts: Vec<(f64, f64)> = paper_points.iter().map(|p| (p.2, p.3[e])).collect();
            let Some(f) = fit(&pts) else { continue };
            let cyc = |ns: f64| ghz.map_or("-".to_string(), |g| format!("{:.2}", ns * g));
            let ratio = ghz.map_or("-".to_string(), |g| format!("{:.2}", f.t_p * g / 3.9));
            let res: Vec<String> = f.residuals.iter().map(|r| format!("{r:+.2}")).collect();
            writeln!(
                out,
                "| {} | {:.2} | {:.3} | {} | {} | {} | {} |",
                kind.name(),
                f.t_o,
                f.t_p,
                cyc(f.t_o),
                cyc(f.t_p),
                ratio,
                res.join(" ")
            )?;
            fits.push(json!({"engine": kind.name(), "t_o_ns": f.t_o, "t_p_ns": f.t_p, "ghz": ghz, "residuals_ns": f.residuals,
                "points": paper_points.iter().map(|p| json!({"rules": p.0, "n": p.1, "alpha": p.2, "ns": p.3[e]})).collect::<Vec<_>>()}));
        }
    }
    if args.json {
        writeln!(out, "{}", json!({"results": rows, "fits": fits}))?;
    }
    out.flush()?;
    Ok(if problems > 0 { EXIT_PROBLEMS } else { 0 })
}
