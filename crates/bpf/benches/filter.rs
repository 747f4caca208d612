//! ns/packet of `Program::run` beside libpcap's own interpreter
//! (`bpf_filter`, what `pcap_offline_filter` calls) running the same
//! program on the same packets, for three expressions over a mix of
//! realistic frames; and beside reading each frame's EtherType, the cost of
//! touching the packets at all. All measured in the same process; the
//! summary at the end gives medians of 9 timings.
//!
//! `cargo bench -p bpf --bench filter`

use std::time::Instant;

use bpf::libpcap::{bpf_filter, compile_for_trace};
use bpf::Program;
use criterion::{black_box, criterion_group, Criterion, Throughput};

const EXPRESSIONS: [&str; 3] = [
    "tcp port 80 or udp port 53",
    "host 10.0.0.1 and not port 22",
    "vlan and tcp",
];

/// A seeded generator, so the frames are the same every run.
struct Rng(rand::rngs::SmallRng);

impl Rng {
    fn next(&mut self) -> u64 {
        rand::RngCore::next_u64(&mut self.0)
    }
    fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.next() as usize % v.len()]
    }
}

/// A mix of frames as a busy link carries them, headers filled in, cut at
/// 128 bytes as a capture with a small snap length keeps them (the
/// programs read headers only): 45% IPv4 TCP, 20% IPv4 UDP, 15% IPv6
/// (TCP, UDP, ICMPv6), 10% 802.1Q-tagged IPv4 TCP or UDP, 5% ICMP, 5%
/// ARP. Ports and addresses are drawn so every program accepts some.
fn frames(n: usize) -> Vec<(Vec<u8>, u32)> {
    let mut r = Rng(rand::SeedableRng::seed_from_u64(0x9e37_79b9_7f4a_7c15));
    let ports = [80u16, 443, 22, 53, 8080, 18080, 40000, 51234, 123, 25];
    let hosts = [
        [10, 0, 0, 1],
        [10, 0, 0, 2],
        [192, 168, 1, 7],
        [198, 18, 7, 1],
        [172, 16, 0, 9],
    ];
    (0..n)
        .map(|_| {
            let kind = r.next() % 100;
            let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
            if (80..90).contains(&kind) {
                f.extend([0x81, 0x00, 0x00, r.pick(&[7u8, 100, 8])]);
            }
            let wire = r.pick(&[64u32, 64, 64, 128, 576, 1500, 1518]);
            let (v6, proto) = match kind {
                0..=44 | 80..=84 => (false, 6u8),
                45..=64 | 85..=89 => (false, 17),
                65..=74 => (true, r.pick(&[6u8, 17])),
                75..=79 => (true, 58),
                90..=94 => (false, 1),
                _ => {
                    f.extend([0x08, 0x06]);
                    f.extend([0, 1, 8, 0, 6, 4, 0, 1]);
                    f.resize(60, 0);
                    return (f, 60);
                }
            };
            if v6 {
                f.extend([0x86, 0xdd, 0x60, 0, 0, 0, 0, 40, proto, 64]);
                f.extend([0x20, 0x01, 0x0d, 0xb8]);
                f.extend([0; 11]);
                f.push(r.next() as u8);
                f.extend([0x20, 0x01, 0x0d, 0xb8]);
                f.extend([0; 11]);
                f.push(1);
            } else {
                f.extend([
                    0x08, 0x00, 0x45, 0, 0, 100, 0x12, 0x34, 0x40, 0, 64, proto, 0, 0,
                ]);
                f.extend(r.pick(&hosts));
                f.extend(r.pick(&hosts));
            }
            f.extend(r.pick(&ports).to_be_bytes());
            f.extend(r.pick(&ports).to_be_bytes());
            f.extend([0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
            f.resize(128.min(wire as usize), 0xab);
            (f, wire)
        })
        .collect()
}

fn touch(frames: &Frames) -> u32 {
    frames
        .iter()
        .map(|(f, _)| u32::from(f.get(12).copied().unwrap_or(0)))
        .sum()
}

fn ours(p: &Program, frames: &Frames) -> u32 {
    frames
        .iter()
        .map(|(f, w)| u32::from(p.run(f, *w) != 0))
        .sum()
}

fn libpcap(p: &Program, frames: &Frames) -> u32 {
    frames
        .iter()
        .map(|(f, w)| u32::from(bpf_filter(p, f, *w) != 0))
        .sum()
}

fn program(expr: &str) -> Program {
    Program::new(&compile_for_trace(expr, 1, 0, false).expect("compiles")).expect("validates")
}

const N: usize = 1 << 14;

fn bench(c: &mut Criterion) {
    let frames = frames(N);
    let mut g = c.benchmark_group("bpf");
    g.throughput(Throughput::Elements(N as u64));
    g.bench_function("baseline_touch", |b| b.iter(|| touch(black_box(&frames))));
    for expr in EXPRESSIONS {
        let p = program(expr);
        g.bench_function(format!("{expr}/libpcap"), |b| {
            b.iter(|| libpcap(black_box(&p), black_box(&frames)))
        });
        g.bench_function(format!("{expr}/kansoku"), |b| {
            b.iter(|| ours(black_box(&p), black_box(&frames)))
        });
    }
    g.finish();
}

/// The frames with their lengths on the wire.
type Frames = [(Vec<u8>, u32)];

/// A pass over the frames that counts something.
type Pass<'a> = &'a dyn Fn(&Frames) -> u32;

/// ns/packet of one timing of `f` over the frames.
fn time(frames: &Frames, f: Pass<'_>) -> f64 {
    let rounds = 100;
    let t = Instant::now();
    for _ in 0..rounds {
        black_box(f(black_box(frames)));
    }
    t.elapsed().as_nanos() as f64 / (rounds * frames.len()) as f64
}

/// Medians of 9 timings of each of `fs`, taken in turn (a round times
/// each once), so a busy moment of the machine weighs on all alike.
fn medians<const K: usize>(frames: &Frames, fs: [Pass<'_>; K]) -> [f64; K] {
    let rounds: Vec<[f64; K]> = (0..9).map(|_| fs.map(|f| time(frames, f))).collect();
    std::array::from_fn(|i| {
        let mut t: Vec<f64> = rounds.iter().map(|r| r[i]).collect();
        t.sort_by(f64::total_cmp);
        t[4]
    })
}

fn summary() {
    let frames = frames(N);
    println!("\nsummary ({N} frames, same process, one core, medians of 9 interleaved timings):");
    let [touched] = medians(&frames, [&touch]);
    println!("  baseline, read each frame's EtherType: {touched:.2} ns/packet");
    for expr in EXPRESSIONS {
        let p = program(expr);
        let accepted = ours(&p, &frames);
        assert_eq!(accepted, libpcap(&p, &frames), "the same answers");
        let [theirs, mine] = medians(&frames, [&|f| libpcap(&p, f), &|f| ours(&p, f)]);
        println!(
            "  {expr:<32} ({:>2} insns, {:>5.1}% accepted): libpcap {theirs:6.2} ns/packet | kansoku {mine:6.2} ns/packet ({:.2}x libpcap's speed)",
            p.insns().len(),
            100.0 * f64::from(accepted) / N as f64,
            theirs / mine
        );
    }
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    summary();
}
