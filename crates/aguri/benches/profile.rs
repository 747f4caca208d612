//! Profiling throughput on one core, on a trace already in memory, beside
//! the cost of merely iterating over the same packets in the same process.
//!
//! Each trace is laid out as a capture file read into memory holds it: every
//! packet's bytes one after another in one buffer. Two traces of Ethernet
//! frames made with `synth` (random addresses in the generator's prefixes,
//! ephemeral source ports, common destination ports):
//! - `heavy-tailed`: 2,000,000 packets drawn independently from 100,000
//!   distinct flows with a heavy-tailed popularity (flow rank drawn as u^4:
//!   a few flows carry most packets, as on real links, but with no temporal
//!   locality beyond popularity, so about half the packets still bring a
//!   key that is not in the source or destination tree and reclaim runs
//!   all the time);
//! - `active-flows`: 2,000,000 packets from flows that start and end, as on
//!   a real link: 16,384 flows are active at any time, each packet comes
//!   from one of them at random, and a flow that has sent its length
//!   (Pareto, shape 1.2, at least 2 packets; the bench prints how often a
//!   flow starts) is replaced by a new one with a new source address and
//!   port. Eight times as many sources are active as a tree's leaves can
//!   hold;
//! - `uniform`: 2,000,000 packets each with a fresh random source address
//!   (10.0.0.0/8) and source port: the worst case, every packet a new key in
//!   two of the four trees, so every packet walks and reclaims.
//!
//! For each: `iterate` sums the frames' lengths (touching every packet),
//! `slice` also finds each frame's IP addresses, protocol and ports with
//! `wire::flow_bits` (what the profiler reads of a frame),
//! and `profile` slices and counts every packet in the four trees with the
//! default budget (4096 nodes each) and one summary at the end. The
//! `pre-sliced keys` line profiles keys sliced beforehand: the profiler's
//! own cost, with the default flow table and without it (`flow_slots: 0`,
//! every packet counted in the trees, as aguri does). Each figure is the
//! median of 7 runs (the machines are shared: a median is what another run
//! will see). Run with `cargo bench -p aguri`.

use std::hint::black_box;
use std::time::Instant;

use aguri::{FlowKey, ProfilerConfig};
use synth::{FrameSize, IpVersion, PayloadPattern, ProtoMix, Synth, SynthConfig};
use wire::LinkType;

const PACKETS: usize = 2_000_000;

fn frames(count: u64, seed: u64) -> Vec<Vec<u8>> {
    let mut s = Synth::new(SynthConfig {
        count,
        size: FrameSize::Fixed(96),
        payload: PayloadPattern::Fixed(0),
        proto: ProtoMix::Mix,
        ip: IpVersion::V4,
        seed,
        ..SynthConfig::default()
    })
    .expect("synth config");
    let mut v = Vec::new();
    while let Some((_, f)) = s.next_frame() {
        v.push(f.to_vec());
    }
    v
}

/// A trace in memory as a capture file read into memory holds it: every
/// packet's bytes one after another in one buffer (so the packets of one
/// flow are copies at different places, as on a real link), and for each
/// packet its timestamp, length on the wire and where its bytes are.
struct Trace {
    data: Vec<u8>,
    packets: Vec<(u64, u32, u32)>,
}

/// The captured length of every frame (`FrameSize::Fixed(96)`).
const CAPLEN: usize = 96;

impl Trace {
    /// Lays out `order` (indices into `frames`) one packet after another.
    fn new(frames: &[Vec<u8>], order: impl Iterator<Item = usize>) -> Trace {
        let mut data = Vec::with_capacity(PACKETS * CAPLEN);
        let mut packets = Vec::with_capacity(PACKETS);
        for (i, f) in order.enumerate() {
            let frame = &frames[f];
            assert_eq!(frame.len(), CAPLEN);
            packets.push((i as u64 * 1000, wire_len(i), data.len() as u32));
            data.extend_from_slice(frame);
        }
        Trace { data, packets }
    }

    #[inline]
    fn frame(&self, at: u32) -> &[u8] {
        &self.data[at as usize..at as usize + CAPLEN]
    }
}

fn heavy_tailed() -> Trace {
    let frames = frames(100_000, 1);
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let order = (0..PACKETS).map(|_| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // u^4 puts most draws on the first flows: a heavy tail.
        let u = (x >> 11) as f64 / (1u64 << 53) as f64;
        let f = ((u * u * u * u) * frames.len() as f64) as usize;
        f.min(frames.len() - 1)
    });
    Trace::new(&frames, order)
}

/// Builds one of the traces.
type MakeTrace = fn() -> Trace;

/// Flows active at once in the `active-flows` trace.
const ACTIVE: usize = 16_384;

fn active_flows() -> Trace {
    let frames = frames(400_000, 3);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    // Pareto lengths, shape 1.2 and scale 2 (heavy-tailed, as flow sizes
    // on real links are), capped so that one flow cannot fill the trace.
    let length = |r: u64| {
        let u = ((r >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
        (2.0 / u.powf(1.0 / 1.2)).ceil().min(100_000.0) as u64
    };
    let mut started = 0usize;
    let mut active: Vec<(usize, u64)> = (0..ACTIVE)
        .map(|i| {
            started += 1;
            (i, length(next()))
        })
        .collect();
    let mut order = Vec::with_capacity(PACKETS);
    for _ in 0..PACKETS {
        let j = (next() % ACTIVE as u64) as usize;
        order.push(active[j].0 % frames.len());
        active[j].1 -= 1;
        if active[j].1 == 0 {
            active[j] = (started, length(next()));
            started += 1;
        }
    }
    println!(
        "active-flows: {} flows started, one every {:.1} packets",
        started,
        PACKETS as f64 / (started - ACTIVE) as f64
    );
    Trace::new(&frames, order.into_iter())
}

fn uniform() -> Trace {
    let frames = frames(PACKETS as u64, 2);
    Trace::new(&frames, 0..PACKETS)
}

/// Lengths on the wire spread over 64..1518 bytes; the frames themselves
/// are short (headers and a little payload, as a 96-byte snap length keeps),
/// so that two million of them fit in memory.
fn wire_len(i: usize) -> u32 {
    64 + (i as u32).wrapping_mul(7919) % 1455
}

/// Seconds `f` takes, the median of 7 runs.
fn median_of<F: FnMut() -> u64>(mut f: F) -> f64 {
    let mut secs: Vec<f64> = (0..7)
        .map(|_| {
            let t = Instant::now();
            black_box(f());
            t.elapsed().as_secs_f64()
        })
        .collect();
    secs.sort_by(f64::total_cmp);
    secs[secs.len() / 2]
}

fn run(name: &str, t: &Trace) {
    let n = t.packets.len() as f64;
    let iterate = median_of(|| {
        let mut sum = 0u64;
        for &(ts, len, at) in &t.packets {
            let frame = t.frame(at);
            sum = sum.wrapping_add(ts ^ u64::from(len) ^ u64::from(frame[0]));
        }
        sum
    });
    let slice = median_of(|| {
        let mut sum = 0u64;
        for &(_, len, at) in &t.packets {
            if let Some(k) = wire::flow_bits(LinkType::Ethernet, t.frame(at)) {
                sum = sum.wrapping_add(u64::from(len) ^ u64::from(k.src_port) ^ k.src as u64);
            }
        }
        sum
    });
    let keys: Vec<(u64, u32, FlowKey)> = t
        .packets
        .iter()
        .filter_map(|&(ts, len, at)| {
            FlowKey::of(&wire::slice(LinkType::Ethernet, t.frame(at))).map(|k| (ts, len, k))
        })
        .collect();
    let keys_iter = median_of(|| {
        let mut sum = 0u64;
        for (ts, len, k) in &keys {
            sum = sum.wrapping_add(ts ^ u64::from(*len) ^ u64::from(k.src_port));
        }
        sum
    });
    let keys_profile_with = |cfg: ProfilerConfig| {
        median_of(|| {
            let mut p = cfg.build().expect("config");
            for (ts, len, k) in &keys {
                if let Some(s) = p.add(*ts, k, *len) {
                    black_box(s);
                }
            }
            let s = p.finish().pop().expect("one summary");
            s.sections[0].entries.len() as u64
        })
    };
    let keys_profile = keys_profile_with(ProfilerConfig::default());
    let keys_trees = keys_profile_with(ProfilerConfig {
        flow_slots: 0,
        ..ProfilerConfig::default()
    });
    let frames_profile_with = |cfg: ProfilerConfig| {
        median_of(|| {
            let mut p = cfg.build().expect("config");
            for &(ts, len, at) in &t.packets {
                if let Some(s) = p.add_frame(LinkType::Ethernet, ts, len, t.frame(at)) {
                    black_box(s);
                }
            }
            let s = p.finish().pop().expect("one summary");
            s.sections[0].entries.len() as u64
        })
    };
    let profile = frames_profile_with(ProfilerConfig::default());
    let profile_one = frames_profile_with(ProfilerConfig {
        tree_thread: false,
        ..ProfilerConfig::default()
    });
    let mpps = |secs: f64| n / secs / 1e6;
    println!(
        "{name:>12}: iterate {:7.1} Mpps | iterate+slice {:6.1} Mpps | slice+profile {:6.1} Mpps ({:.0} ns/packet, {:.2}x the iterate+slice time) | on one thread {:6.1} Mpps ({:.0} ns/packet)",
        mpps(iterate),
        mpps(slice),
        mpps(profile),
        profile / n * 1e9,
        profile / slice,
        mpps(profile_one),
        profile_one / n * 1e9
    );
    println!(
        "{:>12}  pre-sliced keys: iterate {:7.1} Mpps | profile {:6.1} Mpps ({:.0} ns/packet) | without the flow table {:6.1} Mpps ({:.0} ns/packet)",
        "",
        mpps(keys_iter),
        mpps(keys_profile),
        keys_profile / n * 1e9,
        mpps(keys_trees),
        keys_trees / n * 1e9
    );
}

fn main() {
    // `cargo test --benches` runs this with --bench absent: keep it quick then.
    if !std::env::args().any(|a| a == "--bench") {
        println!("profile bench: run with `cargo bench -p aguri`");
        return;
    }
    println!(
        "aguri profiler, {PACKETS} packets in memory, default settings: the trees counted on a thread of \
         their own when there is a second CPU ({} here); `on one thread`: all on the caller's",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    // `cargo bench -p aguri -- --bench NAME...` runs only the traces named.
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let traces: [(&str, MakeTrace); 3] = [
        ("heavy-tailed", heavy_tailed),
        ("active-flows", active_flows),
        ("uniform", uniform),
    ];
    for (name, make) in traces {
        if only.is_empty() || only.iter().any(|o| o == name) {
            run(name, &make());
        }
    }
}
