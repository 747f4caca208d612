//! Slicing throughput on a batch of mixed frames (IPv4/IPv6, TCP/UDP/ICMP,
//! VLAN-tagged), beside a baseline that only reads each frame's EtherType:
//! the cost of touching the packets at all. Both run in the same process, and
//! their Mpps are printed side by side at the end. `slice_unusual` takes the
//! paths the mix does not (QinQ 0x9100, IPv4 options, IPv6 extension headers,
//! ESP, fragments, ARP); the `flow_bits_*` pair is the profiler's call, through
//! `slice` and through the fast path.

use criterion::{black_box, criterion_group, Criterion, Throughput};
use std::time::Instant;
use wire::{slice, LinkType};

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Frames captured with tcpdump on Linux loopback (see fuzz/corpus/slice),
/// plus VLAN-tagged and padded 64-byte variants.
fn frames() -> Vec<Vec<u8>> {
    let syn4 = hex("00000000000000000000000008004500003c3a544000400602667f0000017f000001b77e46a0d180d49400000000a002ffd7fe3000000204ffd70402080a756c6b7b000000000103030a");
    let ack4 = hex("0000000000000000000000000800450000343a5540004006026d7f0000017f000001b77e46a0d180d49547f3728280100040fe2800000101080a756c6b7b0d3e4878");
    let udp4 = hex("000000000000000000000000080045000025d0ee400040116bd77f0000017f000001920814e90011fe2468656c6c6f20756470");
    let icmp4 = hex("0000000000000000000000000800450000339f93400040019d347f0000017f00000108001187123400016b616e736f6b752d70696e672d30313233343536373839");
    let udp6 = hex("00000000000000000000000086dd600b5cf6001211400000000000000000000000000000000100000000000000000000000000000001e86d14ea0012002568656c6c6f2075647036");
    let rst6 = hex("00000000000000000000000086dd600f497b00140640000000000000000000000000000000010000000000000000000000000000000146a19638000000009bd5e92350140000001c0000");
    let echo6 = hex("00000000000000000000000086dd600a67af001f3a4000000000000000000000000000000001000000000000000000000000000000018000992b123400016b616e736f6b752d70696e672d30313233343536373839");
    // A minimal Ethernet/IPv4/TCP frame padded to the 64-byte minimum.
    let mut tcp64 = ack4[..54].to_vec();
    tcp64[16..18].copy_from_slice(&40u16.to_be_bytes());
    tcp64[46] = 0x50;
    tcp64.resize(64, 0);
    let vlan = |f: &[u8], tags: &[&str]| {
        let mut v = f[..12].to_vec();
        for t in tags {
            v.extend_from_slice(&hex(t));
        }
        v.extend_from_slice(&f[12..]);
        v
    };
    vec![
        tcp64.clone(),
        syn4,
        ack4.clone(),
        udp4.clone(),
        icmp4,
        udp6.clone(),
        rst6,
        echo6,
        tcp64,
        vlan(&ack4, &["8100000a"]),
        vlan(&udp6, &["88a80064", "810000c8"]),
        vlan(&udp4, &["81000014"]),
    ]
}

/// The paths the mix does not take: the pre-standard QinQ TPID 0x9100,
/// IPv4 options, IPv6 extension headers (hop-by-hop, then a fragment
/// header), ESP, a non-first fragment, and ARP.
fn unusual_frames() -> Vec<Vec<u8>> {
    let f = frames();
    let (ack4, udp4, udp6) = (&f[2], &f[3], &f[5]);
    let mut out = Vec::new();
    // 0x9100 outer tag 30, 802.1Q inner tag 40.
    let mut qinq = ack4[..12].to_vec();
    qinq.extend_from_slice(&hex("9100001e81000028"));
    qinq.extend_from_slice(&ack4[12..]);
    out.push(qinq);
    // IPv4 with a Router Alert option (RFC 2113): IHL 6.
    let mut opts = udp4[..34].to_vec();
    opts[14] = 0x46;
    let tl = u16::from_be_bytes([opts[16], opts[17]]) + 4;
    opts[16..18].copy_from_slice(&tl.to_be_bytes());
    opts.extend_from_slice(&hex("94040000"));
    opts.extend_from_slice(&udp4[34..]);
    out.push(opts);
    // IPv6, hop-by-hop (Router Alert, RFC 2711), then a first fragment header.
    let mut ext = udp6[..54].to_vec();
    ext[20] = 0;
    ext.extend_from_slice(&hex("2c00050200000100"));
    ext.extend_from_slice(&hex("1100000112345678"));
    ext.extend_from_slice(&udp6[54..]);
    let pl = (ext.len() - 54) as u16;
    ext[18..20].copy_from_slice(&pl.to_be_bytes());
    out.push(ext);
    // ESP over IPv6 (the UDP bytes read as SPI and sequence number).
    let mut esp = udp6.clone();
    esp[20] = 50;
    out.push(esp);
    // A non-first IPv4 fragment.
    let mut frag = udp4.clone();
    frag[20..22].copy_from_slice(&[0x20, 0xb9]);
    out.push(frag);
    // ARP (RFC 826 layout): no network layer.
    out.push(hex("ffffffffffff00070daff454080600010800060400010007"));
    out
}

/// 4096 frames cycling through the mix, so the batch does not fit a single
/// cache line pattern but stays in L2, as a capture ring's recent frames do.
fn batch() -> Vec<Vec<u8>> {
    frames().into_iter().cycle().take(4096).collect()
}

#[inline(never)]
fn slice_all(batch: &[Vec<u8>]) -> u64 {
    let mut acc = 0u64;
    for f in batch {
        let s = slice(LinkType::Ethernet, f);
        // Consume what a filter would: the five-tuple and the flags.
        if let Some(t) = s.five_tuple() {
            acc = acc.wrapping_add(u64::from(t.src_port ^ t.dst_port));
        }
        acc = acc.wrapping_add(u64::from(s.tcp_flags().map_or(0, |f| f.bits())));
    }
    acc
}

/// Sums what `flow` finds in every frame of the batch.
#[inline(always)]
fn sum_flows(batch: &[Vec<u8>], flow: impl Fn(&[u8]) -> Option<wire::FlowBits>) -> u64 {
    let mut acc = 0u64;
    for f in batch {
        if let Some(b) = flow(f) {
            acc = acc.wrapping_add(b.src as u64 ^ u64::from(b.src_port ^ b.dst_port));
        }
    }
    acc
}

/// The flow as integers, as the profiler takes it: `slice(..).flow_bits()`.
#[inline(never)]
fn slice_flow_bits(batch: &[Vec<u8>]) -> u64 {
    sum_flows(batch, |f| slice(LinkType::Ethernet, f).flow_bits())
}

/// The same through `wire::flow_bits`, with its fast path for the usual frame.
#[inline(never)]
fn fast_flow_bits(batch: &[Vec<u8>]) -> u64 {
    sum_flows(batch, |f| wire::flow_bits(LinkType::Ethernet, f))
}

#[inline(never)]
fn ethertype_only(batch: &[Vec<u8>]) -> u64 {
    let mut acc = 0u64;
    for f in batch {
        if let Some(b) = f.get(12..14) {
            acc = acc.wrapping_add(u64::from(u16::from_be_bytes([b[0], b[1]])));
        }
    }
    acc
}

fn bench(c: &mut Criterion) {
    let b = batch();
    let mut g = c.benchmark_group("slice");
    g.throughput(Throughput::Elements(b.len() as u64));
    g.bench_function("baseline_ethertype_only", |x| {
        x.iter(|| ethertype_only(black_box(&b)))
    });
    g.bench_function("slice_mixed", |x| x.iter(|| slice_all(black_box(&b))));
    let typical: Vec<Vec<u8>> = std::iter::repeat_n(frames()[0].clone(), 4096).collect();
    g.bench_function("slice_eth_ipv4_tcp_64", |x| {
        x.iter(|| slice_all(black_box(&typical)))
    });
    let unusual: Vec<Vec<u8>> = unusual_frames().into_iter().cycle().take(4096).collect();
    g.bench_function("slice_unusual", |x| {
        x.iter(|| slice_all(black_box(&unusual)))
    });
    g.bench_function("flow_bits_via_slice_mixed", |x| {
        x.iter(|| slice_flow_bits(black_box(&b)))
    });
    g.bench_function("flow_bits_mixed", |x| {
        x.iter(|| fast_flow_bits(black_box(&b)))
    });
    g.finish();
}

/// Mpps of `f` over `rounds` passes of the batch.
fn mpps(b: &[Vec<u8>], f: fn(&[Vec<u8>]) -> u64) -> f64 {
    let rounds = 2000;
    let t = Instant::now();
    for _ in 0..rounds {
        black_box(f(black_box(b)));
    }
    (b.len() * rounds) as f64 / t.elapsed().as_secs_f64() / 1e6
}

fn summary() {
    let b = batch();
    let typical: Vec<Vec<u8>> = std::iter::repeat_n(frames()[0].clone(), 4096).collect();
    let base = mpps(&b, ethertype_only);
    let mixed = mpps(&b, slice_all);
    let tcp64 = mpps(&typical, slice_all);
    let bits_slow = mpps(&b, slice_flow_bits);
    let bits_fast = mpps(&b, fast_flow_bits);
    println!("\nsummary (same process, one core):");
    println!("  baseline, read the EtherType only : {base:8.1} Mpps");
    println!("  slice, mixed frames               : {mixed:8.1} Mpps ({:.2}x the baseline's time per frame)", base / mixed);
    println!("  slice, Ethernet/IPv4/TCP 64 bytes : {tcp64:8.1} Mpps (requirement: >= 20)");
    println!("  flow bits via slice, mixed frames : {bits_slow:8.1} Mpps");
    println!("  wire::flow_bits, mixed frames     : {bits_fast:8.1} Mpps ({:.2}x the time of slice(..).flow_bits())", bits_slow / bits_fast);
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    summary();
}
