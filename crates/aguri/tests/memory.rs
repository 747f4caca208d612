//! Memory is bounded by the exact keys (or the node budget): ten million
//! packets with random addresses and ports leave the resident set where a
//! hundred thousand left it.

use std::net::IpAddr;

use aguri::{FlowKey, ProfilerConfig};

/// The process's resident set in KiB (Linux), if it can be read.
fn rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn ten_million_random_packets_stay_within_the_budget() {
    let mut p = ProfilerConfig::default().build().unwrap();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut feed = |p: &mut aguri::Profiler, n: u64| {
        let mut packets = 0u64;
        for i in 0..n {
            let r = next();
            let (src, dst): (IpAddr, IpAddr) = if r & 7 == 0 {
                let s = u128::from(next()) << 64 | u128::from(r);
                (IpAddr::V6(s.into()), IpAddr::V6((s ^ 0xffff).into()))
            } else {
                (
                    IpAddr::V4((r as u32).into()),
                    IpAddr::V4(((r >> 32) as u32).into()),
                )
            };
            let k = FlowKey {
                src,
                dst,
                protocol: [6, 17, 1][(r % 3) as usize],
                src_port: (r >> 16) as u16,
                dst_port: (r >> 40) as u16,
            };
            // One interval: everything in one summary, the worst case.
            assert!(p.add(i, &k, 64 + (r % 1400) as u32).is_none());
            packets += 1;
        }
        packets
    };
    // Warm up to the budget, then measure what ten million more cost.
    feed(&mut p, 100_000);
    let before = rss_kib();
    let n = feed(&mut p, 10_000_000);
    let after = rss_kib();
    let s = p.finish().pop().unwrap();
    assert_eq!(s.sections[0].packets, n + 100_000);
    if let (Some(b), Some(a)) = (before, after) {
        // The README states it: the resident set grows by less than 16 MiB.
        assert!(
            a.saturating_sub(b) < 16 * 1024,
            "RSS grew from {b} KiB to {a} KiB"
        );
        assert!(a < 64 * 1024, "RSS is {a} KiB");
    }
}
