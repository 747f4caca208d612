//! Every fuzz target's committed inputs, replayed through its body so that
//! each test run checks them without nightly or cargo-fuzz: the seed corpus
//! (fuzz/corpus/<target>/, which must not be empty) and the inputs that once
//! crashed it (fuzz/regressions/<target>/, if any). Each input is also
//! replayed cut short and with bytes flipped (deterministically), which
//! walks the error paths the seeds alone do not reach.
//!
//! The targets are the `[[bin]]`s of fuzz/Cargo.toml; each must have a body
//! in `fuzzing::TARGETS`, a fuzz_targets/ file that calls it, and a seed
//! corpus.

use std::collections::BTreeSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// The `name`s of fuzz/Cargo.toml's `[[bin]]` tables.
fn bins() -> Vec<String> {
    let toml = std::fs::read_to_string(fuzz_dir().join("Cargo.toml")).expect("fuzz/Cargo.toml");
    let mut out = Vec::new();
    let mut in_bin = false;
    for line in toml.lines().map(str::trim) {
        if line.starts_with('[') {
            in_bin = line == "[[bin]]";
        } else if in_bin {
            if let Some(v) = line.strip_prefix("name") {
                let v = v.trim_start().strip_prefix('=').expect("name = \"...\"");
                out.push(v.trim().trim_matches('"').to_string());
            }
        }
    }
    out
}

/// The files directly in `dir` (none if it does not exist), sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

/// Inputs up to this long are replayed cut at every length and with every
/// byte flipped; longer ones at a sample of lengths and bytes.
const SMALL: usize = 256;

/// What an input is replayed as: itself, cut short, and with bytes flipped.
fn variants(input: &[u8]) -> Vec<(String, Vec<u8>)> {
    let n = input.len();
    let mut out = vec![("whole".to_string(), input.to_vec())];
    let cuts: BTreeSet<usize> = if n <= SMALL {
        (0..n).collect()
    } else {
        (0..16)
            .map(|k| n * k / 16)
            .chain([1, 2, 3, n - 1])
            .collect()
    };
    for cut in cuts {
        out.push((format!("cut to {cut} bytes"), input[..cut].to_vec()));
    }
    // xorshift64, seeded by the length: the same flips every run.
    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ n as u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let flips: Vec<(usize, u8)> = if n <= SMALL {
        (0..n).map(|i| (i, 0xff)).collect()
    } else {
        (0..48)
            .map(|k| {
                // The first bytes (headers, lengths) often, the rest spread.
                let at = if k < 8 { k } else { next() as usize % n };
                (at, (next() % 255 + 1) as u8)
            })
            .collect()
    };
    for (at, mask) in flips {
        let mut f = input.to_vec();
        f[at] ^= mask;
        out.push((format!("byte {at} ^ {mask:#04x}"), f));
    }
    out
}

#[test]
fn every_target_has_a_body_a_target_file_and_a_seed_corpus() {
    let bins = bins();
    assert!(bins.len() >= 19, "fuzz/Cargo.toml lists only {bins:?}");
    let bodies: BTreeSet<&str> = fuzzing::TARGETS.iter().map(|(n, _)| *n).collect();
    let mut problems = Vec::new();
    for t in &bins {
        if !bodies.contains(t.as_str()) {
            problems.push(format!("{t}: no body in fuzzing::TARGETS"));
        }
        let file = fuzz_dir().join(format!("fuzz_targets/{t}.rs"));
        match std::fs::read_to_string(&file) {
            Ok(src) if src.contains(&format!("fuzzing::{t}(data)")) => {}
            Ok(_) => problems.push(format!("{}: does not call fuzzing::{t}", file.display())),
            Err(e) => problems.push(format!("{}: {e}", file.display())),
        }
        let corpus = files(&fuzz_dir().join("corpus").join(t));
        if corpus
            .iter()
            .all(|f| std::fs::metadata(f).map_or(0, |m| m.len()) == 0)
        {
            problems.push(format!("{t}: no seed corpus in fuzz/corpus/{t}/"));
        }
    }
    for b in &bodies {
        if !bins.iter().any(|t| t == b) {
            problems.push(format!("{b}: a body without a [[bin]] in fuzz/Cargo.toml"));
        }
    }
    // Every file in fuzz_targets/ is a target, and every folder of
    // regressions belongs to one.
    for f in files(&fuzz_dir().join("fuzz_targets")) {
        let stem = f.file_stem().unwrap().to_string_lossy().into_owned();
        if !bins.contains(&stem) {
            problems.push(format!("{}: not a [[bin]] of fuzz/Cargo.toml", f.display()));
        }
    }
    if let Ok(entries) = std::fs::read_dir(fuzz_dir().join("regressions")) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if e.path().is_dir() && !bins.contains(&name) {
                problems.push(format!("fuzz/regressions/{name}/: no such target"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_corpus_and_regression_replays_whole_cut_and_flipped() {
    let bins = bins();
    let mut failures = Vec::new();
    let mut replayed = 0usize;
    // The panics are caught and listed at the end; the default hook still
    // prints each one's message and place.
    for (target, body) in fuzzing::TARGETS {
        if !bins.iter().any(|t| t == target) {
            continue;
        }
        let mut inputs = files(&fuzz_dir().join("corpus").join(target));
        inputs.extend(files(&fuzz_dir().join("regressions").join(target)));
        for file in inputs {
            let bytes = std::fs::read(&file).expect("reading a corpus file");
            for (what, input) in variants(&bytes) {
                replayed += 1;
                if catch_unwind(AssertUnwindSafe(|| body(&input))).is_err() {
                    failures.push(format!("{target}: {}, {what}", file.display()));
                }
            }
        }
    }
    eprintln!("{replayed} inputs replayed");
    assert!(
        failures.is_empty(),
        "{} inputs panicked:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
