//! `kansoku filter` (run, explain, lint, match): the command-line side of
//! the `filter` crate. Rules are loaded by the pipeline's filter stage;
//! `kansoku bench filter` is in the bench crate.

use std::io::{self, BufWriter, Write};

use filter::{Engine, Explanation, Filter, PacketKey, RuleSet};
use pipeline::{
    load_rules, Chain, Consumer, Control, Error, Flow, HeaderSource, Headers, Report, Stages,
    TraceSink,
};

use crate::args::{
    FilterArgs, FilterCommand, FilterExplainArgs, FilterLintArgs, FilterMatchArgs, FilterRunArgs,
    FilterV6Args,
};
use pipeline::cli::Selection;
use pipeline::signals;
use pipeline::source::dir::run_path;

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

fn filter_trace(args: &FilterRunArgs) -> pipeline::Result<Report> {
    let expression = match args.select.for_trace(args.read.as_deref())? {
        Selection::Listing(l) => return crate::output::print_text(&l),
        Selection::Packets(e) => e,
    };
    let (Some(read), Some(rules_path)) = (&args.read, &args.rules) else {
        return Err(Error::usage("filter needs -r FILE and --rules FILE"));
    };
    let rules = load_rules(rules_path)?;
    let stages = Stages {
        filter: Some(Filter::new(rules, args.engine)),
        profile: None,
        reload: None,
    };
    let mut chain: Chain<TraceSink> = Chain::new(stages, args.out.write_sink()?);
    chain.rejected = args
        .rejected
        .as_deref()
        .map(|p| args.out.sink(p))
        .transpose()?;
    let (window, stop) = (Default::default(), signals::stop_flag());
    let mut report = run_path(read, window, expression.as_ref(), &mut chain, stop)?;
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
    if as_json {
        return crate::output::print_json(&filter.report().json());
    }
    print_text(&filter.report())
}

/// A report's text on standard output.
fn print_text(text: &impl std::fmt::Display) -> pipeline::Result<()> {
    let mut out = io::stdout().lock();
    write!(out, "{text}")
        .and_then(|()| out.flush())
        .map_err(Error::stdout)
}

fn explain(args: &FilterExplainArgs) -> pipeline::Result<Report> {
    let rules = load_rules(&args.rules)?;
    let text = args.packet.join(" ");
    let key = PacketKey::parse(&text).map_err(|e| Error::usage(format!("packet `{text}`: {e}")))?;
    let explanation = Explanation::new(&rules, key);
    if args.json {
        crate::output::print_json(&explanation.json())?;
    } else {
        print_text(&explanation)?;
    }
    Ok(Report::default())
}

fn lint(args: &FilterLintArgs) -> pipeline::Result<Report> {
    let rules = load_rules(&args.rules)?;
    let findings = filter::lint(rules.rules());
    let name = pipeline::display_path(&args.rules);
    let mut out = io::stdout().lock();
    for f in &findings {
        if args.json {
            writeln!(out, "{}", f.json(&rules))
        } else {
            writeln!(out, "{}", f.describe(&rules, &name))
        }
        .map_err(Error::stdout)?;
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
        engine: Engine::build(args.engine, &rules),
        results: vec![None; pipeline::source::headers::BATCH],
        out: BufWriter::with_capacity(64 * 1024, io::stdout().lock()),
    };
    let mut report = pipeline::run(&mut source, &mut m, Control::new(signals::stop_flag()));
    if let Err(e) = m.out.flush() {
        report.failed(Error::stdout(e));
    }
    Ok(report)
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
    let answers = filter::report::linear_answers(&v6, &keys6);
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
