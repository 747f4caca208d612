//! Must-hold: on every ClassBench rule set in shared/data/classbench, both
//! engines return the trace's FIRSTMATCH (an exact answer, checked there by
//! an independent linear scan) for all 1,000,000 headers.

use std::io::Read;
use std::path::PathBuf;

use filter::{Engine, EngineKind, PacketKey, RuleSet, Syntax};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/classbench")
}

fn load(name: &str) -> Option<(RuleSet, Vec<PacketKey>, Vec<Option<u32>>)> {
    let dir = dir();
    if !dir.is_dir() {
        eprintln!("skipping: {} is not here", dir.display());
        return None;
    }
    let text = std::fs::read_to_string(dir.join(format!("{name}.rules"))).unwrap();
    let rules = RuleSet::parse(&text).unwrap();
    assert_eq!(rules.syntax(), Syntax::ClassBench);
    let mut trace = String::new();
    zstd::Decoder::new(std::fs::File::open(dir.join(format!("{name}.trace.zst"))).unwrap())
        .unwrap()
        .read_to_string(&mut trace)
        .unwrap();
    let mut keys = Vec::with_capacity(1_000_000);
    let mut expected = Vec::with_capacity(1_000_000);
    for line in trace.lines() {
        let (key, m) = filter::parse::parse_trace_line(line).unwrap();
        keys.push(key);
        let m = m.expect("FIRSTMATCH column");
        // ClassBench writes an index past the last rule for "no match".
        expected.push(
            u32::try_from(m)
                .ok()
                .filter(|&m| (m as usize) < rules.len()),
        );
    }
    assert_eq!(keys.len(), 1_000_000);
    Some((rules, keys, expected))
}

/// Checks `engine` on every `step`-th header.
fn check(
    name: &str,
    rules: &RuleSet,
    kind: EngineKind,
    keys: &[PacketKey],
    expected: &[Option<u32>],
    step: usize,
) {
    let engine = Engine::build(kind, rules);
    let mut out = vec![None; keys.len()];
    if step == 1 {
        engine.classify_batch(keys, &mut out);
    }
    for i in (0..keys.len()).step_by(step) {
        if step != 1 {
            out[i] = engine.classify(&keys[i]);
        }
        assert_eq!(
            out[i],
            expected[i],
            "{name}, {} engine, header {} ({})",
            kind.name(),
            i + 1,
            keys[i]
        );
        // The ids of imported rules are their line indices.
        if let Some(m) = out[i] {
            assert_eq!(rules.rules()[m as usize].id, m);
        }
    }
}

fn both_engines(name: &str, linear_step: usize) {
    let Some((rules, keys, expected)) = load(name) else {
        return;
    };
    check(name, &rules, EngineKind::Fast, &keys, &expected, 1);
    check(
        name,
        &rules,
        EngineKind::Linear,
        &keys,
        &expected,
        linear_step,
    );
}

#[test]
fn acl1_1k() {
    both_engines("acl1_1k", 1);
}

#[test]
fn fw1_1k() {
    both_engines("fw1_1k", 1);
}

#[test]
fn ipc1_1k() {
    both_engines("ipc1_1k", 1);
}

#[test]
fn acl1_10k() {
    both_engines("acl1_10k", 1);
}
