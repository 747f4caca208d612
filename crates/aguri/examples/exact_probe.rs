//! One view's cost per new key: aguri's tree (4,096 nodes, LRU reclaim)
//! beside the exact store (`aguri::exact`), on 1.2 million random IPv4
//! addresses in a /8 and IPv6 addresses in fd00::/16, each aggregated at
//! 1% (either count), three rounds each (the first exact round pays for its
//! buffers' first pages). `cargo run --release -p aguri --example exact_probe [KEYS]`.

use aguri::exact::ExactCounts;
use aguri::label::{KeyKind, V4_MAPPED, V4_MAPPED_LEN};
use aguri::{Metric, PatriciaTree};
use std::time::Instant;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(1_200_000);
    let mut s = 0x9e3779b97f4a7c15u64;
    let mut r = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let v4: Vec<(u128, u64)> = (0..n)
        .map(|_| {
            let x = r();
            (
                V4_MAPPED | u128::from(0x0a00_0000 | (x as u32 & 0x00ff_ffff)),
                64 + x % 1400,
            )
        })
        .collect();
    let v6: Vec<(u128, u64)> = (0..n)
        .map(|_| {
            let x = r();
            let y = r();
            (
                (0xfd00u128 << 112) | ((u128::from(x) << 64 | u128::from(y)) >> 16),
                64 + x % 1400,
            )
        })
        .collect();
    let pins = [(V4_MAPPED, V4_MAPPED_LEN)];
    for (name, keys) in [("v4 /8", &v4), ("v6 fd00::/16", &v6)] {
        let mut e = ExactCounts::new(KeyKind::Address, 1 << 21, &pins, Metric::Either, 1.0);
        for _ in 0..3 {
            let t0 = Instant::now();
            let mut t = PatriciaTree::new(KeyKind::Address, 4096, &pins);
            for &(k, b) in keys.iter() {
                t.add(k, b, 1);
            }
            let e1 = t.aggregate(Metric::Either, 1.0);
            let tt = t0.elapsed();
            let t0 = Instant::now();
            for &(k, b) in keys.iter() {
                e.add(k, b, 1);
            }
            let ta = t0.elapsed();
            let e2 = e.summarize(Metric::Either, 1.0, false);
            let te = t0.elapsed();
            println!("{name}: tree {:.1} ns/key ({} entries) exact add {:.1} total {:.1} ns/key ({} entries)", tt.as_nanos() as f64 / n as f64, e1.len(), ta.as_nanos() as f64 / n as f64, te.as_nanos() as f64 / n as f64, e2.len());
        }
    }
}
