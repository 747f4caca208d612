//! Property: the fast engine returns the linear engine's rule for every
//! packet, on random rule sets with prefixes, ranges, wildcards and
//! overlaps, in both address families. Packets are drawn near rule edges
//! (rule addresses and port bounds, one off either side) so that the edge
//! cases of the tree's cuts are exercised, not just random space.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use filter::fast::SplitBudget;
use filter::{
    Action, AddrMatch, Engine, EngineKind, Fast, PacketKey, PortRange, ProtoMatch, Rule, RuleSet,
};
use proptest::prelude::*;

/// Addresses from a small pool so that rules overlap.
fn v4_pool() -> impl Strategy<Value = u32> {
    prop_oneof![
        (0u32..4, 0u32..4).prop_map(|(a, b)| 0x0a00_0000 | (a << 16) | (b << 6)),
        any::<u32>(),
    ]
}

fn addr(v6: bool) -> impl Strategy<Value = AddrMatch> {
    prop_oneof![
        1 => Just(AddrMatch::Any),
        4 => (v4_pool(), 0u8..=32, any::<u128>(), 0u8..=128).prop_map(move |(a, l, a6, l6)| {
            if v6 {
                AddrMatch::v6(Ipv6Addr::from((0x2001_0db8u128 << 96) | (a6 >> 64) | (u128::from(a) << 32)), l6.max(16))
            } else {
                AddrMatch::v4(Ipv4Addr::from(a), l)
            }
        }),
    ]
}

fn ports() -> impl Strategy<Value = PortRange> {
    prop_oneof![
        Just(PortRange::ANY),
        (0u16..100).prop_map(|p| PortRange { lo: p, hi: p }),
        (0u16..100, 0u16..100).prop_map(|(a, b)| PortRange {
            lo: a.min(b),
            hi: a.max(b)
        }),
        (1024u16..=65535).prop_map(|p| PortRange { lo: p, hi: 65535 }),
    ]
}

fn rule() -> impl Strategy<Value = Rule> {
    (
        any::<bool>(),
        any::<bool>(),
        0u8..6,
        ports(),
        ports(),
        any::<bool>(),
    )
        .prop_flat_map(|(v6, pass, p, sp, dp, dst_any)| {
            let proto = match p {
                0 => ProtoMatch::Any,
                1 => ProtoMatch::Tcp,
                2 => ProtoMatch::Udp,
                3 => ProtoMatch::Established,
                4 => ProtoMatch::Number(1),
                _ => ProtoMatch::Number(6),
            };
            let (sp, dp) = if proto.has_ports() {
                (sp, dp)
            } else {
                (PortRange::ANY, PortRange::ANY)
            };
            (
                addr(v6),
                if dst_any {
                    Just(AddrMatch::Any).boxed()
                } else {
                    addr(v6).boxed()
                },
            )
                .prop_map(move |(src, dst)| Rule {
                    id: 0,
                    action: if pass { Action::Pass } else { Action::Reject },
                    src,
                    dst,
                    proto,
                    src_port: sp,
                    dst_port: dp,
                    line: 0,
                })
        })
}

/// A packet near some rule's edges.
fn packet_near(
    rules: &[Rule],
    pick: usize,
    jitter: [i8; 4],
    proto: u8,
    flags: u16,
    v6: bool,
) -> PacketKey {
    let r = rules.get(pick % rules.len().max(1));
    let a = |m: Option<&AddrMatch>, j: i8| -> IpAddr {
        match (m, v6) {
            (Some(AddrMatch::V4 { addr, len }), false) => {
                let edge = if j < 0 {
                    *addr
                } else {
                    addr | !filter_mask32(*len)
                };
                IpAddr::V4(Ipv4Addr::from(edge.wrapping_add(j as i32 as u32)))
            }
            (Some(AddrMatch::V6 { addr, len }), true) => {
                let edge = if j < 0 {
                    *addr
                } else {
                    addr | !filter_mask128(*len)
                };
                IpAddr::V6(Ipv6Addr::from(edge.wrapping_add(j as i128 as u128)))
            }
            (_, false) => IpAddr::V4(Ipv4Addr::from(0x0a00_0000u32.wrapping_add(j as i32 as u32))),
            (_, true) => IpAddr::V6(Ipv6Addr::from(
                (0x2001_0db8u128 << 96).wrapping_add(j as i128 as u128),
            )),
        }
    };
    let p = |pr: Option<PortRange>, j: i8| -> u16 {
        let pr = pr.unwrap_or(PortRange::ANY);
        let base = if j < 0 { pr.lo } else { pr.hi };
        base.wrapping_add(j as i16 as u16)
    };
    let has_ports = proto == 6 || proto == 17;
    PacketKey {
        src: a(r.map(|r| &r.src), jitter[0]),
        dst: a(r.map(|r| &r.dst), jitter[1]),
        protocol: proto,
        src_port: if has_ports {
            p(r.map(|r| r.src_port), jitter[2])
        } else {
            0
        },
        dst_port: if has_ports {
            p(r.map(|r| r.dst_port), jitter[3])
        } else {
            0
        },
        tcp_flags: if proto == 6 { flags } else { 0 },
    }
}

fn filter_mask32(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    }
}

fn filter_mask128(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len))
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn fast_equals_linear(
        rules in prop::collection::vec(rule(), 0..120),
        packets in prop::collection::vec(
            (any::<usize>(), any::<[i8; 4]>(), prop::sample::select(vec![1u8, 6, 17, 47, 58]), prop::sample::select(vec![0u16, 0x02, 0x10, 0x04, 0x12]), any::<bool>()),
            1..200,
        ),
    ) {
        let rules: Vec<Rule> = rules.into_iter().enumerate().map(|(i, mut r)| { r.id = i as u32; r }).collect();
        let set = RuleSet::from_rules(rules);
        let linear = Engine::build(EngineKind::Linear, &set);
        let fast = Engine::build(EngineKind::Fast, &set);
        // No budget: every group is split as far as the candidates go (the
        // trees alone, where `fast` may answer IPv4 keys with RFC tables).
        let split = Fast::with_budget(set.rules(), SplitBudget { per_rule: 0, base: 0 });
        let keys: Vec<PacketKey> = packets
            .iter()
            .map(|&(pick, j, proto, flags, v6)| packet_near(set.rules(), pick, j.map(|x| x % 3), proto, flags, v6))
            .collect();
        let mut batch = vec![None; keys.len()];
        fast.classify_batch(&keys, &mut batch);
        let mut split_batch = vec![None; keys.len()];
        split.classify_batch(&keys, &mut split_batch);
        for (k, (b, w)) in keys.iter().zip(split_batch.iter().zip(&batch)) {
            prop_assert_eq!(b, w, "batched packet {} (split engine)", k);
        }
        for (k, b) in keys.iter().zip(&batch) {
            let want = linear.classify(k);
            prop_assert_eq!(fast.classify(k), want, "packet {}", k);
            prop_assert_eq!(*b, want, "batched packet {}", k);
            prop_assert_eq!(split.classify(k), want, "packet {} (split engine)", k);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Must-hold: after every step of a random sequence of inserts and
    /// deletes, the updated fast engine (never rebuilt) gives the linear
    /// engine's answer, IPv4 and IPv6, also when built split as far as it
    /// goes.
    #[test]
    fn updates_keep_fast_equal_to_linear(
        initial in prop::collection::vec(rule(), 0..60),
        steps in prop::collection::vec((any::<bool>(), any::<usize>(), rule()), 1..40),
        packets in prop::collection::vec(
            (any::<usize>(), any::<[i8; 4]>(), prop::sample::select(vec![1u8, 6, 17, 47, 58]), prop::sample::select(vec![0u16, 0x02, 0x10, 0x04, 0x12]), any::<bool>()),
            1..60,
        ),
        tight in any::<bool>(),
    ) {
        let initial: Vec<Rule> = initial.into_iter().enumerate().map(|(i, mut r)| { r.id = i as u32; r }).collect();
        let mut linear = Engine::build(EngineKind::Linear, &RuleSet::from_rules(initial.clone()));
        let mut fast = if tight {
            Engine::Fast(Fast::with_budget(&initial, SplitBudget { per_rule: 0, base: 0 }))
        } else {
            Engine::build(EngineKind::Fast, &RuleSet::from_rules(initial.clone()))
        };
        let mut rules = initial;
        for (step, &(insert, pos, rule)) in steps.iter().enumerate() {
            if insert || rules.is_empty() {
                let at = pos % (rules.len() + 1);
                prop_assert!(linear.insert(at, rule));
                prop_assert!(fast.insert(at, rule));
                rules.insert(at, rule);
            } else {
                let at = pos % rules.len();
                let want = rules.remove(at);
                prop_assert_eq!(linear.delete(at), Some(want));
                prop_assert_eq!(fast.delete(at), Some(want));
            }
            prop_assert!(!fast.insert(rules.len() + 1, rule), "insert past the end");
            prop_assert!(fast.delete(rules.len()).is_none(), "delete past the end");
            let keys: Vec<PacketKey> = packets
                .iter()
                .map(|&(pick, j, proto, flags, v6)| packet_near(&rules, pick, j.map(|x| x % 3), proto, flags, v6))
                .collect();
            let mut batch = vec![None; keys.len()];
            fast.classify_batch(&keys, &mut batch);
            for (k, b) in keys.iter().zip(&batch) {
                let want = linear.classify(k);
                prop_assert_eq!(fast.classify(k), want, "step {}, packet {}", step, k);
                prop_assert_eq!(*b, want, "step {}, batched packet {}", step, k);
            }
        }
    }
}
