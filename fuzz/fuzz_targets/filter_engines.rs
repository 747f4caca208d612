//! Fast against linear: the input's first part is a rule file, the rest are
//! 16-byte packets; both engines must pick the same rule for every packet.
#![no_main]

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use filter::{Engine, EngineKind, PacketKey, RuleSet};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let split = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    let Ok(text) = std::str::from_utf8(&data[..split]) else {
        return;
    };
    let Ok(rules) = RuleSet::parse(text) else {
        return;
    };
    if rules.len() > 200 {
        return;
    }
    let linear = Engine::build(EngineKind::Linear, &rules);
    let fast = Engine::build(EngineKind::Fast, &rules);
    let packets = data.get(split + 1..).unwrap_or(&[]);
    let mut keys = Vec::new();
    for p in packets.chunks_exact(16) {
        let w = |i: usize| u32::from_be_bytes([p[i], p[i + 1], p[i + 2], p[i + 3]]);
        let (src, dst) = if p[15] & 1 == 0 {
            (
                IpAddr::V4(Ipv4Addr::from(w(0))),
                IpAddr::V4(Ipv4Addr::from(w(4))),
            )
        } else {
            // IPv6 addresses built from the same bytes, under 2001:db8::/32.
            let v6 = |x: u32| IpAddr::V6(Ipv6Addr::from((0x2001_0db8u128 << 96) | u128::from(x)));
            (v6(w(0)), v6(w(4)))
        };
        keys.push(PacketKey {
            src,
            dst,
            protocol: p[8],
            src_port: u16::from_be_bytes([p[9], p[10]]),
            dst_port: u16::from_be_bytes([p[11], p[12]]),
            tcp_flags: u16::from(p[13]),
        });
    }
    let mut batch = vec![None; keys.len()];
    fast.classify_batch(&keys, &mut batch);
    for (k, b) in keys.iter().zip(&batch) {
        let want = linear.classify(k);
        assert_eq!(fast.classify(k), want, "{k}");
        assert_eq!(*b, want, "{k}");
    }
});
