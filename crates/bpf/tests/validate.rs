//! Program::new: truncated and corrupted programs are refused with the
//! instruction and the reason; it agrees with libpcap's `bpf_validate` on
//! every program of known opcodes; it never panics, and no program it
//! accepts panics or runs away on any bytes.

mod common;

use bpf::libpcap::{bpf_validate, compile_for_trace, defined_in_libpcap};
use bpf::opcode::*;
use bpf::{Insn, Invalid, Program, Reason};
use common::*;
use proptest::prelude::*;

/// Program::new's refusal, which libpcap's bpf_validate shares except
/// where Program::new is stricter: opcodes bpf_filter does not know, and
/// the kernel's limit of 4,096 instructions (libpcap has none).
fn refused(insns: &[Insn]) -> Invalid {
    let e = Program::new(insns).expect_err("refused");
    let stricter = matches!(e.reason, Reason::UnknownOpcode | Reason::TooLong { .. });
    assert!(!bpf_validate(insns) || stricter, "libpcap accepts what {e}");
    e
}

#[test]
fn truncated_programs_are_refused_with_the_reason() {
    let insns = compile_for_trace("tcp port 80 or udp port 53", ETHERNET, 0, false).unwrap();
    assert!(Program::new(&insns).is_ok());
    let e = refused(&[]);
    assert_eq!((e.index, e.reason), (0, Reason::Empty));
    assert_eq!(e.to_string(), "the program has no instructions");
    // Cut before its end, the program either jumps past its new end or
    // ends in something other than a return.
    for cut in 1..insns.len() {
        let e = refused(&insns[..cut]);
        match e.reason {
            Reason::JumpOutOfRange { target, len } => {
                assert_eq!(len, cut);
                assert!(target >= cut as u64, "{e}");
                let at = insns[e.index];
                assert_eq!(e.insn, Some(at));
                assert!(
                    e.to_string()
                        .starts_with(&format!("instruction {} (j", e.index)),
                    "{e}"
                );
                assert!(
                    e.to_string().contains(&format!(
                        "jumps to instruction {target}, but the program ends at instruction {}",
                        cut - 1
                    )),
                    "{e}"
                );
            }
            Reason::NoFinalReturn => {
                assert_eq!(e.index, cut - 1);
                assert!(
                    e.to_string()
                        .ends_with("the last instruction is not a return"),
                    "{e}"
                );
            }
            other => panic!("cut to {cut}: {other:?}"),
        }
    }
}

#[test]
fn corrupted_programs_are_refused_with_the_instruction_and_the_reason() {
    let good = compile_for_trace("host 10.0.0.1 and not port 22", ETHERNET, 0, false).unwrap();
    let with = |i: usize, insn: Insn| {
        let mut p = good.clone();
        p[i] = insn;
        p
    };
    let e = refused(&with(3, Insn::stmt(0x0e, 0)));
    assert_eq!((e.index, e.reason), (3, Reason::UnknownOpcode));
    assert_eq!(e.to_string(), "instruction 3 (unimp 0xe): unknown opcode");
    let e = refused(&with(2, Insn::stmt(ST, 16)));
    assert_eq!((e.index, e.reason), (2, Reason::ScratchIndex));
    assert_eq!(
        e.to_string(),
        "instruction 2 (st M[16]): scratch memory has 16 words, M[0] to M[15]"
    );
    let e = refused(&with(4, Insn::stmt(LDX | MEM, 99)));
    assert_eq!((e.index, e.reason), (4, Reason::ScratchIndex));
    let e = refused(&with(1, Insn::stmt(ALU | DIV | K, 0)));
    assert_eq!(
        e.to_string(),
        "instruction 1 (div #0): division by the constant 0"
    );
    let e = refused(&with(1, Insn::stmt(ALU | MOD | K, 0)));
    assert_eq!(e.reason, Reason::DivisionByZero);
    let n = good.len();
    let e = refused(&with(0, Insn::jump(JMP | JEQ | K, 0x800, 0, 200)));
    assert_eq!(
        e.reason,
        Reason::JumpOutOfRange {
            target: 201,
            len: n
        }
    );
    assert_eq!(e.to_string(), format!("instruction 0 (jeq #0x800 jt 1 jf 201): jumps to instruction 201, but the program ends at instruction {}", n - 1));
    let e = refused(&with(0, Insn::stmt(JMP | JA, n as u32 - 1)));
    assert_eq!(
        e.reason,
        Reason::JumpOutOfRange {
            target: n as u64,
            len: n
        }
    );
    let e = refused(&with(n - 1, Insn::stmt(LD | IMM, 1)));
    assert_eq!((e.index, e.reason), (n - 1, Reason::NoFinalReturn));
    // Too long: 4,097 returns.
    let e = refused(&vec![Insn::stmt(RET | K, 0); 4097]);
    assert_eq!((e.index, e.reason), (4096, Reason::TooLong { len: 4097 }));
    assert!(Program::new(&vec![Insn::stmt(RET | K, 0); 4096]).is_ok());
    // Opcodes bpf_validate lets through but bpf_filter aborts on.
    for code in [
        RET | X,
        MISC | 0x40,
        LD | H | IMM,
        LD | H | MEM,
        ALU | NEG | X,
        ST | 0x08,
    ] {
        let e = Program::new(&[Insn::stmt(code, 0), Insn::stmt(RET | K, 0)]).unwrap_err();
        assert_eq!((e.index, e.reason), (0, Reason::UnknownOpcode), "{code:#x}");
    }
}

#[test]
fn backward_jumps_are_taken_and_their_loops_end() {
    // protochain's loop, as libpcap compiles it, runs.
    let insns = compile_for_trace("ip6 protochain 6", ETHERNET, 0, false).unwrap();
    assert!(bpf_validate(&insns));
    let p = Program::new(&insns).unwrap();
    let mut frame = vec![0u8; 12];
    frame.extend([0x86, 0xdd, 0x60, 0, 0, 0, 0, 28, 0, 64]);
    frame.extend([0u8; 32]);
    // Hop-by-hop, then a destination options header, then TCP.
    frame.extend([60, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0]);
    frame.extend([0u8; 20]);
    assert_ne!(p.run(&frame, frame.len() as u32), 0);
    frame[54] = 17;
    assert_eq!(p.run(&frame, frame.len() as u32), 0);
    // A loop for ever: `ja` to itself, and a loop that only ends when a
    // counter in scratch memory wraps. Both end, rejecting the packet.
    let spin = [Insn::stmt(JMP | JA, u32::MAX), Insn::stmt(RET | K, 1)];
    assert_eq!(Program::new(&spin).unwrap().run(&[0; 64], 64), 0);
    let count = [
        Insn::stmt(LD | MEM, 0),
        Insn::stmt(ALU | ADD | K, 1),
        Insn::stmt(ST, 0),
        Insn::jump(JMP | JEQ | K, 10, 1, 0),
        Insn::stmt(JMP | JA, -5i32 as u32),
        Insn::stmt(RET | A, 0),
    ];
    let p = Program::new(&count).unwrap();
    // Ten rounds fit in the allowance even of an empty packet; 1,000 do
    // not, on 10 bytes.
    assert_eq!(p.run(&[], 0), 10);
    let mut long = count;
    long[3] = Insn::jump(JMP | JEQ | K, 1000, 1, 0);
    assert_eq!(Program::new(&long).unwrap().run(&[0; 10], 10), 0);
    assert_eq!(Program::new(&long).unwrap().run(&[0; 1000], 1000), 1000);
}

/// An instruction of a known opcode most of the time, with operands that
/// are often in range.
fn insn() -> impl Strategy<Value = Insn> {
    let known: Vec<u16> = (0..=0xffu16)
        .filter(|&c| {
            Program::new(&[Insn::stmt(c, 1), Insn::stmt(RET | K, 0)]).is_ok() || c == JMP | JA
        })
        .collect();
    let code = prop_oneof![8 => proptest::sample::select(known), 1 => any::<u16>()];
    let k = prop_oneof![4 => 0u32..80, 1 => Just(0xffff_f000u32 + 48), 1 => any::<u32>()];
    (code, 0u8..6, 0u8..6, k).prop_map(|(code, jt, jf, k)| Insn { code, jt, jf, k })
}

fn program() -> impl Strategy<Value = Vec<Insn>> {
    (proptest::collection::vec(insn(), 0..40), any::<u32>()).prop_map(|(mut v, r)| {
        if r % 4 != 0 {
            v.push(Insn::stmt(if r % 2 == 0 { RET | A } else { RET | K }, r));
        }
        v
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    /// Program::new never panics; it accepts exactly what bpf_validate
    /// accepts among programs of known opcodes; and what it accepts runs
    /// on any bytes without panicking, through run and run_with_aux.
    #[test]
    fn new_never_panics_and_what_it_accepts_runs_on_any_bytes(
        insns in program(),
        packet in proptest::collection::vec(any::<u8>(), 0..100),
        wire_len in any::<u32>(),
        tci in any::<Option<u16>>(),
    ) {
        match Program::new(&insns) {
            Ok(p) => {
                prop_assert!(bpf_validate(&insns));
                let _ = p.run(&packet, wire_len);
                let aux = bpf::Aux { vlan_tci: tci, ifindex: Some(3), ..bpf::Aux::default() };
                let _ = p.run_with_aux(&packet, wire_len, &aux);
            }
            Err(e) => {
                prop_assert!(!bpf_validate(&insns) || e.reason == Reason::UnknownOpcode, "{}", e);
                prop_assert!(!e.to_string().is_empty());
            }
        }
    }

    /// Any instructions at all, not only plausible ones.
    #[test]
    fn new_never_panics_on_arbitrary_instructions(
        raw in proptest::collection::vec((any::<u16>(), any::<u8>(), any::<u8>(), any::<u32>()), 0..64),
        packet in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let insns: Vec<Insn> = raw.into_iter().map(|(code, jt, jf, k)| Insn { code, jt, jf, k }).collect();
        if let Ok(p) = Program::new(&insns) {
            let _ = p.run(&packet, packet.len() as u32);
        }
    }
}

#[test]
fn random_programs_give_libpcaps_answer_where_libpcap_is_defined() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    );
    let bytes = proptest::collection::vec(any::<u8>(), 0..80);
    let (mut compared, mut accepted) = (0, 0);
    for _ in 0..40_000 {
        let insns = program().new_tree(&mut runner).unwrap().current();
        let Ok(p) = Program::new(&insns) else {
            continue;
        };
        if !defined_in_libpcap(&insns) {
            continue;
        }
        for _ in 0..4 {
            let packet = bytes.new_tree(&mut runner).unwrap().current();
            for wire_len in [packet.len() as u32, 1500] {
                let ours = p.run(&packet, wire_len);
                assert_eq!(
                    ours,
                    bpf::libpcap::bpf_filter(&p, &packet, wire_len),
                    "{}on {packet:02x?}",
                    p.dump(1)
                );
                accepted += usize::from(ours != 0);
                compared += 1;
            }
        }
    }
    eprintln!("{compared} runs compared, {accepted} accepted");
    assert!(
        compared > 5_000 && accepted > 500,
        "{compared} runs compared, {accepted} accepted"
    );
}
