//! Quick speed check of both engines on ClassBench sets (a development aid;
//! `kansoku bench filter` is the full benchmark):
//! `cargo run --release -p filter --example speed -- ../shared/data/classbench acl1_1k fw1_1k`

use std::io::Read;
use std::time::Instant;

use filter::{Engine, EngineKind, RuleSet};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((dir, names)) = args.split_first() else {
        eprintln!("usage: speed DIR NAME...");
        std::process::exit(2);
    };
    for name in names {
        let rules =
            RuleSet::parse(&std::fs::read_to_string(format!("{dir}/{name}.rules")).unwrap())
                .unwrap();
        let mut text = String::new();
        zstd::Decoder::new(std::fs::File::open(format!("{dir}/{name}.trace.zst")).unwrap())
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        let keys: Vec<_> = text
            .lines()
            .map(|l| filter::parse::parse_trace_line(l).unwrap().0)
            .collect();
        let mut ns = [0.0; 2];
        for (e, kind) in EngineKind::ALL.iter().enumerate() {
            let t = Instant::now();
            let engine = Engine::build(*kind, &rules);
            let build = t.elapsed();
            let n = if *kind == EngineKind::Linear {
                50_000
            } else {
                keys.len()
            };
            let mut out = vec![None; 1024];
            let t = Instant::now();
            for chunk in keys[..n].chunks(1024) {
                engine.classify_batch(chunk, &mut out);
            }
            ns[e] = t.elapsed().as_secs_f64() * 1e9 / n as f64;
            let t = Instant::now();
            let mut hits = 0u64;
            for k in &keys[..n] {
                hits += u64::from(engine.classify(k).is_some());
            }
            let single = t.elapsed().as_secs_f64() * 1e9 / n as f64;
            println!("  one at a time: {single:.1} ns/packet ({hits} matched)");
            let stats = match &engine {
                Engine::Fast(f) => format!("{:?}\n  {:?}", f.stats()[0], f.tables()),
                _ => String::new(),
            };
            println!(
                "{name} {}: build {build:?}, {:.1} ns/packet, memory {} KiB {stats}",
                kind.name(),
                ns[e],
                engine.memory_bytes() / 1024
            );
        }
        println!("{name}: speedup {:.1}x", ns[0] / ns[1]);
    }
}
