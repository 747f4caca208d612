//! The interpreter against libpcap's own (`bpf_filter`): the same return
//! value for every program libpcap compiles from the expression corpus,
//! on every link type, on the sample captures' packets, on generated
//! frames with real headers and random fields, and on random bytes, with
//! the wire length equal to and larger than the captured length.

mod common;

use std::sync::OnceLock;

use bpf::libpcap::{bpf_filter, compile_for_trace};
use bpf::{Insn, Program};
use common::*;
use proptest::prelude::*;

/// A link type, a byte order, and the corpus's programs for them.
type ProgramSet = (u16, bool, Vec<(&'static str, Program)>);

/// Every (link type, byte order) the corpus is compiled for, with its
/// programs. Only NULL headers depend on the byte order.
fn all_programs() -> &'static Vec<ProgramSet> {
    static ALL: OnceLock<Vec<ProgramSet>> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut v = Vec::new();
        for link in LINK_TYPES {
            for big in [false, true] {
                if big && link != NULL {
                    continue;
                }
                v.push((link, big, programs(link, big).0));
            }
        }
        v
    })
}

/// Runs every program of `link` on `data` at each wire length; the first
/// disagreement, if any, as a message. Counts the acceptances.
fn check(
    link: u16,
    big: bool,
    data: &[u8],
    wire_lens: &[u32],
    accepted: &mut [u64],
) -> Result<(), String> {
    let (_, _, progs) = all_programs()
        .iter()
        .find(|(l, b, _)| *l == link && *b == big)
        .expect("a program set for the link type");
    for (i, (expr, prog)) in progs.iter().enumerate() {
        for &wire_len in wire_lens {
            let ours = prog.run(data, wire_len);
            let theirs = bpf_filter(prog, data, wire_len);
            if ours != theirs {
                return Err(format!(
                    "`{expr}` on link type {link} (big-endian: {big}), {} of {wire_len} bytes: \
                     interpreter {ours}, libpcap {theirs}\npacket: {data:02x?}",
                    data.len()
                ));
            }
            if ours != 0 && i < accepted.len() {
                accepted[i] += 1;
            }
        }
    }
    Ok(())
}

/// Each frame on every link type that can carry it.
fn check_everywhere(frame: &[u8], wire_extra: u32, seed: u32) -> Result<(), String> {
    for (link, big, _) in all_programs() {
        let Some(data) = reframe(frame, *link, *big, seed) else {
            continue;
        };
        let len = data.len() as u32;
        check(*link, *big, &data, &[len, len + wire_extra], &mut [])?;
    }
    Ok(())
}

#[test]
fn the_corpus_compiles_and_validates_on_every_link_type() {
    let all = all_programs();
    let ethernet = &all.iter().find(|(l, _, _)| *l == ETHERNET).unwrap().2;
    assert_eq!(
        ethernet.len(),
        EXPRESSIONS.len(),
        "every expression compiles for Ethernet"
    );
    for (link, _, progs) in all {
        let everywhere = EXPRESSIONS
            .iter()
            .filter(|e| compiles_everywhere(e))
            .count();
        assert!(
            progs.len() >= everywhere,
            "link type {link}: {} programs",
            progs.len()
        );
    }
    // protochain's loop is a backward jump, which Program::new takes.
    let chain = compile_for_trace("ip6 protochain 6", ETHERNET, 0, false).unwrap();
    assert!(chain
        .iter()
        .enumerate()
        .any(|(i, insn)| insn.code == 0x05 && (i as u32 + 1).wrapping_add(insn.k) as usize <= i));
}

#[test]
fn the_interpreter_gives_libpcaps_answer_on_the_sample_captures() {
    let packets = sample_packets();
    assert!(packets.len() >= 40, "{} sample packets", packets.len());
    let (ethernet, _) = programs(ETHERNET, false);
    let mut accepted = vec![0u64; ethernet.len()];
    let mut runs = 0usize;
    for (n, (link, p)) in packets.iter().enumerate() {
        let caplen = p.data.len() as u32;
        let wire = [p.wire_len, caplen, caplen + 100];
        if *link == ETHERNET {
            check(ETHERNET, false, &p.data, &wire, &mut accepted).unwrap();
            // The same packet on every other link type, and cut short.
            check_everywhere(&p.data, 60, n as u32).unwrap();
            for cut in [14, 20, 34, 40, 54, 60] {
                if cut < p.data.len() {
                    check_everywhere(&p.data[..cut], p.wire_len - cut as u32, n as u32).unwrap();
                }
            }
        } else {
            check(*link, false, &p.data, &wire, &mut []).unwrap();
        }
        runs += 1;
    }
    assert!(runs == packets.len());
    // The captures exercise the corpus: expressions about their traffic
    // accept some of their packets.
    for expr in [
        "tcp port 18080",
        "vlan 7",
        "vlan 100 and vlan 8",
        "icmp6",
        "ip6 and tcp",
        "tcp[tcpflags] & tcp-syn != 0",
        "host ::1",
    ] {
        let i = ethernet.iter().position(|(e, _)| *e == expr).unwrap();
        assert!(
            accepted[i] > 0,
            "`{expr}` accepted none of the sample packets"
        );
    }
}

/// A byte from a list of interesting ones, or any.
fn pick<T: Clone + std::fmt::Debug + 'static>(
    values: Vec<T>,
    any: BoxedStrategy<T>,
) -> BoxedStrategy<T> {
    prop_oneof![3 => proptest::sample::select(values), 1 => any].boxed()
}

fn ipv4_addr() -> BoxedStrategy<[u8; 4]> {
    pick(
        vec![
            [127, 0, 0, 1],
            [10, 0, 0, 1],
            [198, 18, 7, 1],
            [198, 18, 7, 2],
            [198, 19, 8, 2],
            [224, 0, 0, 1],
            [255, 255, 255, 255],
            [0, 0, 0, 0],
        ],
        any::<[u8; 4]>().boxed(),
    )
}

fn ipv6_addr() -> BoxedStrategy<[u8; 16]> {
    let mut one = [0u8; 16];
    one[15] = 1;
    let mut ll = [0u8; 16];
    ll[0] = 0xfe;
    ll[1] = 0x80;
    ll[15] = 7;
    let mut mc = [0u8; 16];
    mc[0] = 0xff;
    mc[1] = 2;
    mc[15] = 0x16;
    pick(vec![one, ll, mc], any::<[u8; 16]>().boxed())
}

fn port() -> BoxedStrategy<u16> {
    pick(
        vec![
            80, 22, 53, 18080, 40000, 40500, 41000, 41001, 39999, 47000, 1024, 1025, 1, 0, 443,
        ],
        any::<u16>().boxed(),
    )
}

/// A transport header and payload for protocol `proto`.
fn transport(proto: u8) -> BoxedStrategy<Vec<u8>> {
    let payload = proptest::collection::vec(any::<u8>(), 0..48);
    match proto {
        6 => (
            port(),
            port(),
            any::<[u8; 8]>(),
            5u8..=15,
            pick(
                vec![0x02u8, 0x12, 0x10, 0x18, 0x11, 0x04],
                any::<u8>().boxed(),
            ),
            any::<[u8; 6]>(),
            payload,
        )
            .prop_map(|(s, d, seq, off, flags, rest, pl)| {
                let mut v = Vec::new();
                v.extend(s.to_be_bytes());
                v.extend(d.to_be_bytes());
                v.extend(seq);
                v.push(off << 4);
                v.push(flags);
                v.extend(rest);
                v.resize(usize::from(off) * 4, 0);
                v.extend(pl);
                v
            })
            .boxed(),
        17 => (port(), port(), any::<u16>(), payload)
            .prop_map(|(s, d, sum, pl)| {
                let mut v = Vec::new();
                v.extend(s.to_be_bytes());
                v.extend(d.to_be_bytes());
                v.extend((8 + pl.len() as u16).to_be_bytes());
                v.extend(sum.to_be_bytes());
                v.extend(pl);
                v
            })
            .boxed(),
        1 | 58 => (
            pick(
                if proto == 1 {
                    vec![0u8, 3, 8, 11]
                } else {
                    vec![128, 129, 135, 1]
                },
                any::<u8>().boxed(),
            ),
            any::<u8>(),
            payload,
        )
            .prop_map(|(t, c, pl)| {
                let mut v = vec![t, c, 0, 0, 0, 0, 0, 0];
                v.extend(pl);
                v
            })
            .boxed(),
        _ => payload.boxed(),
    }
}

fn ip_proto() -> BoxedStrategy<u8> {
    pick(vec![6, 17, 1, 58, 47, 50], any::<u8>().boxed())
}

/// An IPv4 packet: header (options, fragments, lengths sometimes odd),
/// then a transport header for its protocol.
fn ipv4() -> BoxedStrategy<Vec<u8>> {
    (
        ip_proto(),
        ipv4_addr(),
        ipv4_addr(),
        pick(vec![5u8], (0u8..16).boxed()),
        any::<u8>(),
        pick(
            vec![0u16, 0x4000, 0x2000, 0x2001, 0x0010],
            any::<u16>().boxed(),
        ),
        any::<bool>(),
        pick(vec![0x45u8], any::<u8>().boxed()),
        pick(vec![0u8], any::<u8>().boxed()),
    )
        .prop_flat_map(|(proto, src, dst, ihl, ttl, frag, fix_len, vers, tos)| {
            transport(proto).prop_map(move |l4| {
                let hlen = usize::from(ihl.max(5)) * 4;
                let total = (hlen + l4.len()) as u16;
                let mut v = vec![if vers == 0x45 { 0x40 | ihl } else { vers }, tos];
                v.extend(if fix_len { total } else { total ^ 0x55 }.to_be_bytes());
                v.extend([0x12, 0x34]);
                v.extend(frag.to_be_bytes());
                v.extend([ttl, proto, 0, 0]);
                v.extend(src);
                v.extend(dst);
                v.resize(hlen, 1);
                v.extend(l4);
                v
            })
        })
        .boxed()
}

/// An IPv6 packet, sometimes with extension headers before the transport.
fn ipv6() -> BoxedStrategy<Vec<u8>> {
    (
        ip_proto(),
        ipv6_addr(),
        ipv6_addr(),
        proptest::collection::vec(pick(vec![0u8, 43, 44, 60, 51], any::<u8>().boxed()), 0..3),
        any::<u8>(),
    )
        .prop_flat_map(|(proto, src, dst, exts, hlim)| {
            transport(proto).prop_map(move |l4| {
                // Extension headers, each naming the next, all 8 bytes
                // long: a length field of 0 (in 8-byte units past the
                // first; AH's in 4-byte units, minus 2).
                let mut chain = Vec::new();
                for i in 0..exts.len() {
                    let next = exts.get(i + 1).copied().unwrap_or(proto);
                    chain.extend([next, 0, 0, 0, 0, 0, 0, 0]);
                }
                let first = exts.first().copied().unwrap_or(proto);
                let mut v = vec![0x60, 0, 0, 0];
                v.extend(((chain.len() + l4.len()) as u16).to_be_bytes());
                v.extend([first, hlim]);
                v.extend(src);
                v.extend(dst);
                v.extend(chain);
                v.extend(l4);
                v
            })
        })
        .boxed()
}

fn mac() -> BoxedStrategy<[u8; 6]> {
    pick(
        vec![
            [2, 0, 0, 0, 0, 1],
            [2, 0, 0, 0, 0, 2],
            [0xff; 6],
            [0x33, 0x33, 0, 0, 0, 0x16],
            [1, 0, 0x5e, 0, 0, 1],
            [0; 6],
        ],
        any::<[u8; 6]>().boxed(),
    )
}

/// An Ethernet frame: addresses, 0 to 2 VLAN tags, then IPv4, IPv6, ARP,
/// MPLS over IPv4, or another EtherType with random bytes.
fn ethernet_frame() -> BoxedStrategy<Vec<u8>> {
    let tag = (
        pick(vec![0x8100u16, 0x88a8, 0x9100], any::<u16>().boxed()),
        pick(vec![7u16, 8, 100, 0], any::<u16>().boxed()),
    );
    let l3 = prop_oneof![
        4 => ipv4().prop_map(|p| (0x0800u16, p)),
        3 => ipv6().prop_map(|p| (0x86dd, p)),
        1 => proptest::collection::vec(any::<u8>(), 28).prop_map(|p| (0x0806, p)),
        1 => (pick(vec![100u32, 5], any::<u32>().boxed()), any::<bool>(), ipv4()).prop_map(|(label, two, ip)| {
            // One or two labels, the last with the bottom-of-stack bit.
            let mut v = Vec::new();
            if two {
                v.extend(((label << 12) | 64).to_be_bytes());
            }
            v.extend(((label << 12) | 0x100 | 64).to_be_bytes());
            v.extend(ip);
            (0x8847, v)
        }),
        1 => (any::<u16>(), proptest::collection::vec(any::<u8>(), 0..64)),
    ];
    (mac(), mac(), proptest::collection::vec(tag, 0..=2), l3)
        .prop_map(|(dst, src, tags, (ethertype, l3))| {
            let mut v = Vec::new();
            v.extend(dst);
            v.extend(src);
            for (tpid, tci) in tags {
                v.extend(tpid.to_be_bytes());
                v.extend(tci.to_be_bytes());
            }
            v.extend(ethertype.to_be_bytes());
            v.extend(l3);
            v
        })
        .boxed()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    /// Generated frames, whole or cut anywhere, on every link type.
    #[test]
    fn the_interpreter_gives_libpcaps_answer_on_generated_frames(
        frame in ethernet_frame(),
        cut in any::<proptest::sample::Index>(),
        whole in any::<bool>(),
        extra in 0u32..2000,
        seed in any::<u32>(),
    ) {
        let data = if whole { &frame[..] } else { &frame[..cut.index(frame.len() + 1)] };
        let r = check_everywhere(data, extra, seed);
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }

    /// Random bytes, as a frame of every link type.
    #[test]
    fn the_interpreter_gives_libpcaps_answer_on_random_bytes(
        data in proptest::collection::vec(any::<u8>(), 0..160),
        extra in 0u32..2000,
    ) {
        for (link, big, _) in all_programs() {
            let len = data.len() as u32;
            let r = check(*link, *big, &data, &[len, len + extra], &mut []);
            prop_assert!(r.is_ok(), "{}", r.unwrap_err());
        }
    }
}

#[test]
fn every_expression_accepts_some_generated_frames_and_rejects_others() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, TestRunner};
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        proptest::test_runner::TestRng::deterministic_rng(
            proptest::test_runner::RngAlgorithm::ChaCha,
        ),
    );
    let (ethernet, _) = programs(ETHERNET, false);
    let mut accepted = vec![0u64; ethernet.len()];
    let frames = 4000;
    for _ in 0..frames {
        let frame = ethernet_frame().new_tree(&mut runner).unwrap().current();
        let len = frame.len() as u32;
        check(ETHERNET, false, &frame, &[len], &mut accepted).unwrap();
    }
    for ((expr, _), n) in ethernet.iter().zip(&accepted) {
        if expr.is_empty() {
            assert_eq!(*n, frames);
            continue;
        }
        assert!(
            *n > 0 && *n < frames,
            "`{expr}` accepted {n} of {frames} generated frames"
        );
    }
}

/// Hand-written programs for the rules that compiled expressions seldom
/// reach: loads at and past the end, indirect loads whose offset wraps,
/// division and remainder by an X of 0, shifts of 32 and more, `len`.
#[test]
fn edge_rules_give_libpcaps_answer() {
    use bpf::opcode::*;
    let ret_a = Insn::stmt(RET | A, 0);
    let programs: Vec<Vec<Insn>> = vec![
        vec![Insn::stmt(LD | W | ABS, 0), ret_a],
        vec![Insn::stmt(LD | H | ABS, 3), ret_a],
        vec![Insn::stmt(LD | B | ABS, 4), ret_a],
        vec![Insn::stmt(LD | W | ABS, u32::MAX - 1), ret_a],
        vec![
            Insn::stmt(LDX | IMM, u32::MAX),
            Insn::stmt(LD | B | IND, 1),
            ret_a,
        ],
        vec![
            Insn::stmt(LDX | IMM, u32::MAX),
            Insn::stmt(LD | W | IND, 2),
            ret_a,
        ],
        vec![Insn::stmt(LDX | IMM, 2), Insn::stmt(LD | H | IND, 2), ret_a],
        vec![
            Insn::stmt(LDX | MSH | B, 0),
            Insn::stmt(MISC | TXA, 0),
            ret_a,
        ],
        vec![
            Insn::stmt(LDX | MSH | B, 5),
            Insn::stmt(MISC | TXA, 0),
            ret_a,
        ],
        vec![
            Insn::stmt(LD | IMM, 7),
            Insn::stmt(LDX | IMM, 0),
            Insn::stmt(ALU | DIV | X, 0),
            Insn::stmt(RET | K, 9),
        ],
        vec![
            Insn::stmt(LD | IMM, 7),
            Insn::stmt(LDX | IMM, 0),
            Insn::stmt(ALU | MOD | X, 0),
            Insn::stmt(RET | K, 9),
        ],
        vec![
            Insn::stmt(LD | IMM, 7),
            Insn::stmt(LDX | IMM, 32),
            Insn::stmt(ALU | LSH | X, 0),
            Insn::stmt(ALU | ADD | K, 1),
            ret_a,
        ],
        vec![
            Insn::stmt(LD | IMM, 7),
            Insn::stmt(LDX | IMM, 31),
            Insn::stmt(ALU | LSH | X, 0),
            ret_a,
        ],
        vec![
            Insn::stmt(LD | IMM, 0x8000_0000),
            Insn::stmt(LDX | IMM, 33),
            Insn::stmt(ALU | RSH | X, 0),
            Insn::stmt(ALU | ADD | K, 1),
            ret_a,
        ],
        vec![
            Insn::stmt(LD | IMM, 0x8000_0000),
            Insn::stmt(ALU | NEG, 0),
            ret_a,
        ],
        vec![
            Insn::stmt(LD | IMM, 5),
            Insn::stmt(ALU | SUB | K, 9),
            Insn::stmt(ALU | MUL | K, 3),
            Insn::stmt(ALU | MOD | K, 1000),
            ret_a,
        ],
        vec![
            Insn::stmt(LD | W | LEN, 0),
            Insn::stmt(LDX | W | LEN, 0),
            Insn::stmt(ALU | ADD | X, 0),
            ret_a,
        ],
        vec![
            Insn::stmt(LD | W | LEN, 0),
            Insn::jump(JMP | JGT | K, 60, 0, 1),
            Insn::stmt(RET | K, 1),
            Insn::stmt(RET | K, 2),
        ],
        vec![
            Insn::stmt(LD | IMM, 3),
            Insn::stmt(ST, 15),
            Insn::stmt(LDX | MEM, 15),
            Insn::stmt(MISC | TXA, 0),
            Insn::stmt(ALU | XOR | X, 0),
            ret_a,
        ],
        vec![
            Insn::stmt(LD | B | ABS, SKF_AD_OFF + SKF_AD_VLAN_TAG_PRESENT),
            Insn::stmt(RET | K, 1),
        ],
        vec![
            Insn::stmt(LD | H | ABS, SKF_AD_OFF + SKF_AD_PKTTYPE),
            Insn::stmt(RET | K, 1),
        ],
        vec![
            Insn::stmt(JMP | JA, 1),
            Insn::stmt(RET | K, 1),
            Insn::stmt(RET | K, 2),
        ],
    ];
    let packets: Vec<Vec<u8>> = vec![
        vec![],
        vec![0x45],
        vec![0x45, 1, 2, 3],
        (0..64).collect(),
        vec![0xff; 6],
    ];
    for insns in &programs {
        let prog = Program::new(insns).unwrap_or_else(|e| panic!("{insns:?}: {e}"));
        for p in &packets {
            for wire_len in [p.len() as u32, 61, 1500, u32::MAX] {
                assert_eq!(
                    prog.run(p, wire_len),
                    bpf_filter(&prog, p, wire_len),
                    "{}on {p:02x?} of {wire_len} bytes",
                    prog.dump(1)
                );
            }
        }
    }
}
