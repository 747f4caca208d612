//! XXH3-64 of a trace's chunks (32 KiB, the writer's default, and 256 KiB,
//! a read's piece), by this crate's fastest path for the CPU beside
//! `twox_hash`, the crate it stands in front of, and each vector path on
//! its own; GB/s side by side at the end, all measured in the same process.

use checksum::{path, xxh3_64, xxh3_64_with, Path};
use criterion::{black_box, criterion_group, Criterion, Throughput};
use std::time::Instant;

fn input(n: usize) -> Vec<u8> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    for n in [32 << 10, 256 << 10] {
        let b = input(n);
        let mut g = c.benchmark_group(format!("xxh3_{}k", n >> 10));
        g.throughput(Throughput::Bytes(n as u64));
        g.bench_function("baseline_twox_hash", |x| {
            x.iter(|| twox_hash::XxHash3_64::oneshot(black_box(&b)))
        });
        g.bench_function("checksum", |x| x.iter(|| xxh3_64(black_box(&b))));
        g.finish();
    }
}

/// Median GB/s of 9 timings of `f` over `b`.
fn gbps(b: &[u8], f: &dyn Fn(&[u8]) -> u64) -> f64 {
    let rounds = (1usize << 31) / b.len() / 8;
    let mut v: Vec<f64> = (0..9)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..rounds {
                black_box(f(black_box(b)));
            }
            (b.len() * rounds) as f64 / t.elapsed().as_secs_f64() / 1e9
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[4]
}

fn summary() {
    println!(
        "\nsummary (same process, one core, medians of 9; path here: {:?}):",
        path()
    );
    for n in [32usize << 10, 256 << 10] {
        let b = input(n);
        let base = gbps(&b, &|b| twox_hash::XxHash3_64::oneshot(b));
        let best = gbps(&b, &|b| xxh3_64(b));
        let avx2 = gbps(&b, &|b| xxh3_64_with(Path::Avx2, b));
        let avx512 = gbps(&b, &|b| xxh3_64_with(Path::Avx512, b));
        println!(
            "  {:>3} KiB: twox_hash {base:6.1} GB/s | checksum {best:6.1} GB/s ({:.2}x) | avx2 {avx2:6.1} | avx512 {avx512:6.1}",
            n >> 10,
            best / base
        );
    }
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    summary();
}
