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
    FilterRunArgs,
};
use crate::signals;

pub fn run(args: &FilterArgs) -> pipeline::Result<Report> {
    match &args.command {
        None => filter_trace(&args.run),
        Some(FilterCommand::Run(a)) => filter_trace(a),
        Some(FilterCommand::Explain(a)) => explain(a),
        Some(FilterCommand::Lint(a)) => lint(a),
        Some(FilterCommand::Match(a)) => match_trace(a),
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
        writeln!(out, "{v}")?;
        return Ok(Report::default());
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
            )?;
        } else if kind == "shadowed" {
            writeln!(out, "{name}:{}: rule {} can never match: rule {} (line {}) matches every packet it would", r.line, r.id, o.id, o.line)?;
        } else {
            writeln!(out, "{name}:{}: rule {} ({}) overlaps rule {} (line {}, {}); rule {} wins where both match", r.line, r.id, r.action, o.id, o.line, o.action, o.id)?;
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
                Some(i) => writeln!(self.out, "{}", self.rules.rules()[*i as usize].id)?,
                None => writeln!(self.out, "none")?,
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
        report.failed(e.into());
    }
    Ok(report)
}
