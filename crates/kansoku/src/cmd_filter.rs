//! `kansoku filter` (run, explain, lint, match): the command-line side of
//! the `filter` crate. Rules are loaded by the pipeline's filter stage;
//! `kansoku bench filter` is in the bench crate.

use std::io::{self, BufWriter, Write};

use filter::{Engine, EngineKind, Filter, Finding, PacketKey, RuleSet};
use pipeline::{
    load_rules, Chain, Consumer, Control, Error, Flow, HeaderSource, Headers, Report, Stages,
    TraceSink,
};
use serde_json::json;

use crate::args::{
    EngineArg, FilterArgs, FilterCommand, FilterExplainArgs, FilterLintArgs, FilterMatchArgs,
    FilterRunArgs, FilterV6Args,
};
use crate::signals;

pub fn run(args: &FilterArgs) -> pipeline::Result<Report> {
    match &args.command {
        None => filter_trace(&args.run),
        Some(FilterCommand::Run(a)) => filter_trace(a),
        Some(FilterCommand::Explain(a)) => explain(a),
        Some(FilterCommand::Lint(a)) => lint(a),
        Some(FilterCommand::Match(a)) => match_trace(a),
        Some(FilterCommand::V6(a)) => to_v6(a),
    }
}

fn engine_kind(e: EngineArg) -> EngineKind {
    match e {
        EngineArg::Linear => EngineKind::Linear,
        EngineArg::Fast => EngineKind::Fast,
    }
}

fn rule_json(rules: &RuleSet, i: usize) -> serde_json::Value {
    let r = &rules.rules()[i];
    json!({"id": r.id, "line": r.line, "action": r.action.to_string(), "rule": r.to_string()})
}

fn filter_trace(args: &FilterRunArgs) -> pipeline::Result<Report> {
    let (Some(read), Some(rules_path)) = (&args.read, &args.rules) else {
        return Err(Error::usage("filter needs -r FILE and --rules FILE"));
    };
    let rules = load_rules(rules_path)?;
    let stages = Stages {
        filter: Some(Filter::new(rules, engine_kind(args.engine))),
        profile: None,
        reload: None,
    };
    let mut chain: Chain<TraceSink> = Chain::new(stages, args.out.write_sink()?);
    chain.rejected = args
        .rejected
        .as_deref()
        .map(|p| args.out.sink(p))
        .transpose()?;
    let mut source = pipeline::TraceSource::open(read)?;
    let mut report = pipeline::run(&mut source, &mut chain, Control::new(signals::stop_flag()));
    for sink in [chain.passed, chain.rejected].into_iter().flatten() {
        if let Err(e) = sink.finish() {
            report.failed(e);
        }
    }
    if let Some(f) = &chain.stages.filter {
        if let Err(e) = report_run(f, args.json) {
            report.failed(e);
        }
    }
    Ok(report)
}

fn report_run(filter: &Filter, as_json: bool) -> pipeline::Result<()> {
    let rules = filter.rules();
    let c = filter.counters();
    let (pass, reject) = filter.totals();
    let non_ip = c.non_ip;
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
        writeln!(out, "{v}").map_err(Error::stdout)?;
    } else {
        writeln!(
            out,
            "{:>10} {:>7} {:>12} {:>14}  rule",
            "id", "action", "packets", "bytes"
        )
        .map_err(Error::stdout)?;
        for (r, h) in rules.rules().iter().zip(&c.rules) {
            writeln!(
                out,
                "{:>10} {:>7} {:>12} {:>14}  {r}",
                r.id,
                r.action.to_string(),
                h.packets,
                h.bytes
            )
            .map_err(Error::stdout)?;
        }
        writeln!(
            out,
            "{:>10} {:>7} {:>12} {:>14}  (no rule matched)",
            "default", "reject", c.default.packets, c.default.bytes
        )
        .map_err(Error::stdout)?;
        if non_ip.packets > 0 {
            writeln!(
                out,
                "{:>10} {:>7} {:>12} {:>14}  (not IP)",
                "non-ip", "reject", non_ip.packets, non_ip.bytes
            )
            .map_err(Error::stdout)?;
        }
        writeln!(
            out,
            "passed {} packets ({} bytes), rejected {} packets ({} bytes)",
            pass.packets, pass.bytes, reject.packets, reject.bytes
        )
        .map_err(Error::stdout)?;
    }
    out.flush().map_err(Error::stdout)?;
    Ok(())
}

fn explain(args: &FilterExplainArgs) -> pipeline::Result<Report> {
    let rules = load_rules(&args.rules)?;
    let text = args.packet.join(" ");
    let key = PacketKey::parse(&text).map_err(|e| Error::usage(format!("packet `{text}`: {e}")))?;
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
        writeln!(out, "{v}").map_err(Error::stdout)?;
        return Ok(Report::default());
    }
    writeln!(out, "packet: {key}").map_err(Error::stdout)?;
    match first {
        Some(f) => {
            let r = &rules.rules()[f as usize];
            writeln!(
                out,
                "{}: line {}: {r}",
                r.action.to_string().to_uppercase(),
                r.line
            )
            .map_err(Error::stdout)?;
        }
        None => {
            writeln!(out, "REJECT: no rule matches (the default rule)").map_err(Error::stdout)?
        }
    }
    for i in later {
        let r = &rules.rules()[i];
        writeln!(out, "  also matches, shadowed here: line {}: {r}", r.line)
            .map_err(Error::stdout)?;
    }
    Ok(Report::default())
}

fn lint(args: &FilterLintArgs) -> pipeline::Result<Report> {
    let rules = load_rules(&args.rules)?;
    let findings = filter::lint(rules.rules());
    let name = pipeline::display_path(&args.rules);
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
            ).map_err(Error::stdout)?;
        } else if kind == "shadowed" {
            writeln!(out, "{name}:{}: rule {} can never match: rule {} (line {}) matches every packet it would", r.line, r.id, o.id, o.line).map_err(Error::stdout)?;
        } else {
            writeln!(out, "{name}:{}: rule {} ({}) overlaps rule {} (line {}, {}); rule {} wins where both match", r.line, r.id, r.action, o.id, o.line, o.action, o.id).map_err(Error::stdout)?;
        }
    }
    let mut report = Report::default();
    if !findings.is_empty() {
        report
            .problems
            .push(format!("{name}: {} findings", findings.len()));
    }
    Ok(report)
}

/// `filter match`: one line per header, the id of the first matching rule or `none`.
struct Matcher<'r, W: Write> {
    rules: &'r RuleSet,
    engine: Engine,
    results: Vec<Option<u32>>,
    out: W,
}

impl<W: Write> Consumer<HeaderSource> for Matcher<'_, W> {
    fn consume(&mut self, h: Headers<'_>) -> pipeline::Result<Flow> {
        let results = &mut self.results[..h.keys.len()];
        self.engine.classify_batch(h.keys, results);
        for m in results.iter() {
            match m {
                Some(i) => writeln!(self.out, "{}", self.rules.rules()[*i as usize].id)
                    .map_err(Error::stdout)?,
                None => writeln!(self.out, "none").map_err(Error::stdout)?,
            }
        }
        Ok(Flow::Continue)
    }
}

fn match_trace(args: &FilterMatchArgs) -> pipeline::Result<Report> {
    let rules = load_rules(&args.rules)?;
    let mut source = HeaderSource::open(&args.trace, rules.len(), None)?;
    let mut m = Matcher {
        rules: &rules,
        engine: Engine::build(engine_kind(args.engine), &rules),
        results: vec![None; pipeline::source::headers::BATCH],
        out: BufWriter::with_capacity(64 * 1024, io::stdout().lock()),
    };
    let mut report = pipeline::run(&mut source, &mut m, Control::new(signals::stop_flag()));
    if let Err(e) = m.out.flush() {
        report.failed(Error::stdout(e));
    }
    Ok(report)
}

/// The first match of every key by the linear engine (the reference),
/// spread over the cores.
fn linear_answers(rules: &RuleSet, keys: &[PacketKey]) -> Vec<Option<u32>> {
    let engine = Engine::build(EngineKind::Linear, rules);
    let mut out = vec![None; keys.len()];
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = keys.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        for (k, o) in keys.chunks(chunk).zip(out.chunks_mut(chunk)) {
            let engine = &engine;
            s.spawn(move || engine.classify_batch(k, o));
        }
    });
    out
}

/// `kansoku filter v6`: a ClassBench set and its trace in IPv6
/// (`filter::v6map`), the answers made by the linear engine.
fn to_v6(args: &FilterV6Args) -> pipeline::Result<Report> {
    let rules = load_rules(&args.rules)?;
    let text = filter::v6map::rules_text(&rules)
        .map_err(|e| Error::input(format!("{}: {e}", pipeline::display_path(&args.rules))))?;
    let v6 = RuleSet::parse(&text)
        .map_err(|e| Error::input(format!("the IPv6 image of the rules does not parse: {e}")))?;
    let (keys, expected) = pipeline::source::headers::read_all(&args.trace, rules.len(), None)?;
    let keys6: Vec<PacketKey> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| {
            filter::v6map::key(k).ok_or_else(|| {
                Error::input(format!(
                    "{}: header {} is not IPv4 ({k})",
                    pipeline::display_path(&args.trace),
                    i + 1
                ))
            })
        })
        .collect::<pipeline::Result<_>>()?;
    let t = std::time::Instant::now();
    let answers = linear_answers(&v6, &keys6);
    let secs = t.elapsed().as_secs_f64();
    if let Some(expected) = &expected {
        // The mapping keeps every first match: a difference is a defect in
        // the mapping or an engine, not a property of the set.
        if let Some(i) = (0..keys.len()).find(|&i| answers[i] != expected[i]) {
            let show = |m: Option<u32>| m.map_or("no rule".to_string(), |m| format!("rule {m}"));
            return Err(Error::input(format!(
                "header {} ({}): the IPv4 trace says {}, the linear engine on the IPv6 set {}",
                i + 1,
                keys[i],
                show(expected[i]),
                show(answers[i])
            )));
        }
    }
    let name = args
        .rules
        .file_stem()
        .and_then(|s| s.to_str())
        .ok_or_else(|| Error::usage("--rules needs a file name"))?;
    std::fs::create_dir_all(&args.out).map_err(|e| Error::writing(&args.out, e))?;
    let rules_out = args.out.join(format!("{name}_v6.rules"));
    let trace_out = args.out.join(format!("{name}_v6.trace.zst"));
    std::fs::write(&rules_out, &text).map_err(|e| Error::writing(&rules_out, e))?;
    let trace_error = |e| Error::writing(&trace_out, e);
    let file = std::fs::File::create(&trace_out).map_err(trace_error)?;
    let mut z = zstd::Encoder::new(file, 9).map_err(trace_error)?;
    {
        let mut w = BufWriter::with_capacity(1 << 16, &mut z);
        for (k, m) in keys6.iter().zip(&answers) {
            writeln!(w, "{}", filter::v6map::trace_line(k, *m, v6.len())).map_err(trace_error)?;
        }
        w.flush().map_err(trace_error)?;
    }
    z.finish().map_err(trace_error)?;
    eprintln!(
        "kansoku: {}: {} rules; {}: {} headers, answers by the linear engine in {secs:.1} s{}",
        pipeline::display_path(&rules_out),
        v6.len(),
        pipeline::display_path(&trace_out),
        keys6.len(),
        if expected.is_some() {
            ", every one equal to the IPv4 trace's"
        } else {
            ""
        }
    );
    Ok(Report::default())
}
