//! [`Program`]: a classic BPF program checked once and run on packets with
//! libpcap's answers.

use std::fmt;

use crate::opcode::*;
use crate::Insn;

/// Why [`Program::new`] refused a program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// The program has no instructions.
    Empty,
    /// The program has more than 4,096 instructions (`BPF_MAXINSNS`).
    TooLong {
        /// How many it has.
        len: usize,
    },
    /// The opcode is not one libpcap's interpreter knows.
    UnknownOpcode,
    /// A load from or store to scratch memory names a word past the 16th.
    ScratchIndex,
    /// A division or remainder by the constant 0.
    DivisionByZero,
    /// A jump to a place that is not an instruction of the program.
    JumpOutOfRange {
        /// Where it goes (an instruction index, which can be past the end).
        target: u64,
        /// How many instructions the program has.
        len: usize,
    },
    /// The last instruction is not a return, so a program could run off
    /// its end.
    NoFinalReturn,
}

/// A program [`Program::new`] refused: the instruction and the reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Invalid {
    /// The index of the instruction at fault (0 for an empty program, 4,096
    /// for the first one too many).
    pub index: usize,
    /// That instruction, if the program has one there.
    pub insn: Option<Insn>,
    /// What is wrong with it.
    pub reason: Reason,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Empty => write!(f, "the program has no instructions"),
            Reason::TooLong { len } => write!(
                f,
                "the program has {len} instructions, more than the {MAXINSNS} a program may have"
            ),
            Reason::UnknownOpcode => write!(f, "unknown opcode"),
            Reason::ScratchIndex => write!(
                f,
                "scratch memory has {MEMWORDS} words, M[0] to M[{}]",
                MEMWORDS - 1
            ),
            Reason::DivisionByZero => write!(f, "division by the constant 0"),
            Reason::JumpOutOfRange { target, len } => write!(
                f,
                "jumps to instruction {target}, but the program ends at instruction {}",
                len.saturating_sub(1)
            ),
            Reason::NoFinalReturn => write!(f, "the last instruction is not a return"),
        }
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.insn {
            Some(insn) => {
                // The instruction as tcpdump -d lists it, without the
                // index and the column padding.
                let image = crate::image(&insn, self.index);
                let text = image.split_once(' ').map_or("", |(_, rest)| rest);
                let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
                write!(f, "instruction {} ({text}): {}", self.index, self.reason)
            }
            None => write!(f, "{}", self.reason),
        }
    }
}

impl std::error::Error for Invalid {}

/// What the Linux kernel keeps beside a packet, which a program for a live
/// socket can load at the `SKF_AD_*` offsets (libpcap compiles such loads
/// for `vlan`, `inbound`, `ifindex` on a live interface). A `None` item
/// makes a load of it reject the packet, as a load past the captured bytes
/// does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Aux {
    /// The VLAN tag (TCI: priority, DEI and VLAN id) the kernel took out of
    /// the frame, or `None` when it took none. `[vlanp]` loads whether there
    /// is one (1 or 0), `[vlan_tci]` the TCI (0 without one): these two
    /// are always answered.
    pub vlan_tci: Option<u16>,
    /// That tag's TPID (0x8100, 0x88a8), `[vlan_tpid]`.
    pub vlan_tpid: Option<u16>,
    /// The packet's protocol as the kernel saw it (an EtherType), `[proto]`.
    pub protocol: Option<u16>,
    /// The packet type (`PACKET_HOST` 0 ... `PACKET_OUTGOING` 4), `[type]`.
    pub pkttype: Option<u8>,
    /// The index of the interface it came in on, `[ifidx]`.
    pub ifindex: Option<u32>,
}

/// An ancillary item a load names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Anc {
    Protocol,
    PktType,
    IfIndex,
    VlanTag,
    VlanTagPresent,
    VlanTpid,
    /// One this crate does not provide (the mark, the CPU, random...).
    Other,
}

impl Anc {
    fn of(k: u32) -> Anc {
        match k.wrapping_sub(SKF_AD_OFF) {
            SKF_AD_PROTOCOL => Anc::Protocol,
            SKF_AD_PKTTYPE => Anc::PktType,
            SKF_AD_IFINDEX => Anc::IfIndex,
            SKF_AD_VLAN_TAG => Anc::VlanTag,
            SKF_AD_VLAN_TAG_PRESENT => Anc::VlanTagPresent,
            SKF_AD_VLAN_TPID => Anc::VlanTpid,
            _ => Anc::Other,
        }
    }

    #[inline]
    fn value(self, aux: &Aux) -> Option<u32> {
        match self {
            Anc::Protocol => aux.protocol.map(u32::from),
            Anc::PktType => aux.pkttype.map(u32::from),
            Anc::IfIndex => aux.ifindex,
            Anc::VlanTag => Some(u32::from(aux.vlan_tci.unwrap_or(0))),
            Anc::VlanTagPresent => Some(u32::from(aux.vlan_tci.is_some())),
            Anc::VlanTpid => aux.vlan_tpid.map(u32::from),
            Anc::Other => None,
        }
    }
}

/// A decoded instruction. Jump targets are absolute instruction indexes,
/// checked when the program was built. A load followed by a comparison of
/// A with a constant is also decoded as one fused operation, which does
/// both (A is still set) and jumps where the comparison would; the
/// comparison keeps its own place for jumps that land on it.
#[derive(Clone, Copy, Debug)]
enum Op {
    RetK(u32),
    RetA,
    LdW(u32),
    LdH(u32),
    LdB(u32),
    LdWInd(u32),
    LdHInd(u32),
    LdBInd(u32),
    LdAnc(Anc),
    LdLen,
    LdxLen,
    LdImm(u32),
    LdxImm(u32),
    LdMem(u8),
    LdxMem(u8),
    LdxMsh(u32),
    St(u8),
    Stx(u8),
    Ja(u16),
    /// A jump backwards, which libpcap compiles for `protochain`.
    JaBack(u16),
    JeqK {
        k: u32,
        t: u16,
        f: u16,
    },
    JgtK {
        k: u32,
        t: u16,
        f: u16,
    },
    JgeK {
        k: u32,
        t: u16,
        f: u16,
    },
    JsetK {
        k: u32,
        t: u16,
        f: u16,
    },
    JeqX {
        t: u16,
        f: u16,
    },
    JgtX {
        t: u16,
        f: u16,
    },
    JgeX {
        t: u16,
        f: u16,
    },
    JsetX {
        t: u16,
        f: u16,
    },
    AddK(u32),
    SubK(u32),
    MulK(u32),
    DivK(u32),
    ModK(u32),
    AndK(u32),
    OrK(u32),
    XorK(u32),
    LshK(u32),
    RshK(u32),
    AddX,
    SubX,
    MulX,
    DivX,
    ModX,
    AndX,
    OrX,
    XorX,
    LshX,
    RshX,
    Neg,
    Tax,
    Txa,
    // Fused: a load, then a jump on A against k.
    LdWJeq {
        off: u32,
        k: u32,
        t: u16,
        f: u16,
    },
    LdHJeq {
        off: u32,
        k: u32,
        t: u16,
        f: u16,
    },
    LdBJeq {
        off: u32,
        k: u32,
        t: u16,
        f: u16,
    },
    LdHJset {
        off: u32,
        k: u32,
        t: u16,
        f: u16,
    },
    LdBJset {
        off: u32,
        k: u32,
        t: u16,
        f: u16,
    },
    LdHIndJeq {
        off: u32,
        k: u32,
        t: u16,
        f: u16,
    },
    LdBIndJeq {
        off: u32,
        k: u32,
        t: u16,
        f: u16,
    },
    LdBIndJset {
        off: u32,
        k: u32,
        t: u16,
        f: u16,
    },
    LdLenJge {
        k: u32,
        t: u16,
        f: u16,
    },
    LdLenJgt {
        k: u32,
        t: u16,
        f: u16,
    },
}

/// A validated classic BPF program, ready to run on packets.
///
/// [`Program::new`] applies `bpf_validate`'s rules (libpcap's, which the
/// kernel's extend), and is stricter in two ways: every opcode must be one
/// libpcap's interpreter knows, where `bpf_validate` lets some through
/// that make `bpf_filter` abort the process; and a program has at most
/// 4,096 instructions, the kernel's limit, which libpcap's userland
/// validator does not set. [`Program::run`] then gives `bpf_filter`'s
/// answer on every packet, its jumps checked once and for all.
#[derive(Clone, Debug)]
pub struct Program {
    insns: Box<[Insn]>,
    ops: Box<[Op]>,
}

/// How many backward jumps a run may take beyond one per captured byte
/// before it gives up and rejects the packet (see [`Program::run`]).
const LOOP_ALLOWANCE: usize = 256;

impl Program {
    /// Checks `insns` and decodes them, or says which instruction is wrong
    /// and why: the program must have 1 to 4,096 instructions of opcodes
    /// libpcap's interpreter knows, every jump must land on one of them, the
    /// last must be a return, scratch memory words go from 0 to 15, and no
    /// division or remainder is by the constant 0.
    ///
    /// Conditional jumps only go forward. An unconditional `ja` may go
    /// backward, as `bpf_validate` allows (its 32-bit offset wraps): libpcap
    /// compiles `ip6 protochain` to such a loop. [`run`](Self::run) bounds
    /// those loops.
    pub fn new(insns: &[Insn]) -> Result<Program, Invalid> {
        validate(insns)?;
        let ops = decode(insns);
        Ok(Program {
            insns: insns.into(),
            ops,
        })
    }

    /// The instructions, as given to [`new`](Self::new).
    pub fn insns(&self) -> &[Insn] {
        &self.insns
    }

    /// The program listed as `tcpdump -d` (`level` 0 or 1), `-dd` (2) or
    /// `-ddd` (3 and more) lists it: see [`dump`](crate::dump).
    pub fn dump(&self, level: u8) -> String {
        crate::dump(&self.insns, level)
    }

    /// Runs the program on `packet`, the captured bytes of a packet that
    /// was `wire_len` bytes long on the wire, and returns what it returns:
    /// 0 rejects the packet, anything else accepts it (tcpdump's programs
    /// return the snap length). The answer is libpcap's `bpf_filter`'s:
    ///
    /// - `len` loads `wire_len`; loads of packet data are bounded by the
    ///   captured bytes, and one past them ends the program with 0;
    /// - a division or remainder by an X of 0 ends it with 0;
    /// - a shift by X of 32 or more gives 0;
    /// - a load of the kernel's ancillary data (`[vlanp]`, `[ifidx]`...)
    ///   ends it with 0: there is none (see [`run_with_aux`](Self::run_with_aux)).
    ///
    /// Where libpcap's C is undefined, this is defined: scratch memory
    /// starts at 0; a shift by a constant of 32 or more gives 0 (as one by
    /// X does; libpcap's compiler refuses to emit one); and a program that
    /// has taken more backward jumps than the packet has captured bytes
    /// (plus 256) is stopped with 0 where libpcap would loop on. libpcap's
    /// own loops (`protochain`) move at least 8 bytes into the packet per
    /// round, so they end long before.
    #[inline]
    pub fn run(&self, packet: &[u8], wire_len: u32) -> u32 {
        exec(&self.ops, packet, wire_len, None)
    }

    /// [`run`](Self::run) for a packet the Linux kernel delivered, with the
    /// data it keeps beside it: what a program for a live socket reads at
    /// the `SKF_AD_*` offsets, answered as the kernel answers them (a load
    /// of any size gives the whole item). A load of an item `aux` does not
    /// have, or of one this crate does not provide (`[mark]`, `[cpu]`,
    /// `[random]`...), rejects the packet. libpcap's own fallback for a
    /// program the kernel refuses (`pcap_filter_with_aux_data`) answers
    /// only byte loads of `[vlanp]` and `[vlan_tci]`, the latter without
    /// the priority bits; the programs libpcap compiles load them as bytes
    /// and mask the VLAN id out, so they get the same answers here.
    #[inline]
    pub fn run_with_aux(&self, packet: &[u8], wire_len: u32, aux: &Aux) -> u32 {
        exec(&self.ops, packet, wire_len, Some(aux))
    }
}

/// `bpf_validate`'s rules, with the known opcodes those of `bpf_filter`.
fn validate(insns: &[Insn]) -> Result<(), Invalid> {
    let len = insns.len();
    let fail = |index: usize, reason: Reason| Invalid {
        index,
        insn: insns.get(index).copied(),
        reason,
    };
    if len == 0 {
        return Err(fail(0, Reason::Empty));
    }
    if len > MAXINSNS {
        return Err(fail(MAXINSNS, Reason::TooLong { len }));
    }
    for (i, insn) in insns.iter().enumerate() {
        let Some(op) = decode_one(i, insn) else {
            return Err(fail(i, Reason::UnknownOpcode));
        };
        let k = insn.k;
        let out_of_range = |target: u64| fail(i, Reason::JumpOutOfRange { target, len });
        match op {
            Op::LdMem(_) | Op::LdxMem(_) | Op::St(_) | Op::Stx(_) if k >= MEMWORDS => {
                return Err(fail(i, Reason::ScratchIndex));
            }
            Op::DivK(0) | Op::ModK(0) => return Err(fail(i, Reason::DivisionByZero)),
            Op::Ja(_) | Op::JaBack(_) => {
                // As bpf_validate computes it: the offset wraps, so a
                // backward jump is one that wraps into the program.
                let target = (i as u32).wrapping_add(1).wrapping_add(k);
                if target as usize >= len {
                    return Err(out_of_range(i as u64 + 1 + u64::from(k)));
                }
            }
            Op::JeqK { .. }
            | Op::JgtK { .. }
            | Op::JgeK { .. }
            | Op::JsetK { .. }
            | Op::JeqX { .. }
            | Op::JgtX { .. }
            | Op::JgeX { .. }
            | Op::JsetX { .. } => {
                for off in [insn.jt, insn.jf] {
                    let target = i as u64 + 1 + u64::from(off);
                    if target >= len as u64 {
                        return Err(out_of_range(target));
                    }
                }
            }
            _ => {}
        }
    }
    if class(insns[len - 1].code) != RET {
        return Err(fail(len - 1, Reason::NoFinalReturn));
    }
    Ok(())
}

/// The operation of instruction `i`, or `None` for an opcode libpcap's
/// interpreter does not know. Its jump targets are only meaningful once
/// [`validate`] has checked them.
fn decode_one(i: usize, insn: &Insn) -> Option<Op> {
    // Targets fit in u16 once validated: at most 4,096 instructions.
    let to = |off: u8| (i + 1 + usize::from(off)) as u16;
    let (k, t, f) = (insn.k, to(insn.jt), to(insn.jf));
    let mem = (k & 0xf) as u8;
    let abs = |op: fn(u32) -> Op| {
        if k >= SKF_AD_OFF {
            Op::LdAnc(Anc::of(k))
        } else {
            op(k)
        }
    };
    Some(match insn.code {
        c if c == RET | K => Op::RetK(k),
        c if c == RET | A => Op::RetA,
        c if c == LD | W | ABS => abs(Op::LdW),
        c if c == LD | H | ABS => abs(Op::LdH),
        c if c == LD | B | ABS => abs(Op::LdB),
        c if c == LD | W | IND => Op::LdWInd(k),
        c if c == LD | H | IND => Op::LdHInd(k),
        c if c == LD | B | IND => Op::LdBInd(k),
        c if c == LD | W | LEN => Op::LdLen,
        c if c == LDX | W | LEN => Op::LdxLen,
        c if c == LD | IMM => Op::LdImm(k),
        c if c == LDX | IMM => Op::LdxImm(k),
        c if c == LDX | MSH | B => Op::LdxMsh(k),
        c if c == LD | MEM => Op::LdMem(mem),
        c if c == LDX | MEM => Op::LdxMem(mem),
        c if c == ST => Op::St(mem),
        c if c == STX => Op::Stx(mem),
        c if c == JMP | JA => {
            let target = (i as u32).wrapping_add(1).wrapping_add(k);
            if target as usize > i {
                Op::Ja(target as u16)
            } else {
                Op::JaBack(target as u16)
            }
        }
        c if c == JMP | JEQ | K => Op::JeqK { k, t, f },
        c if c == JMP | JGT | K => Op::JgtK { k, t, f },
        c if c == JMP | JGE | K => Op::JgeK { k, t, f },
        c if c == JMP | JSET | K => Op::JsetK { k, t, f },
        c if c == JMP | JEQ | X => Op::JeqX { t, f },
        c if c == JMP | JGT | X => Op::JgtX { t, f },
        c if c == JMP | JGE | X => Op::JgeX { t, f },
        c if c == JMP | JSET | X => Op::JsetX { t, f },
        c if c == ALU | ADD | K => Op::AddK(k),
        c if c == ALU | SUB | K => Op::SubK(k),
        c if c == ALU | MUL | K => Op::MulK(k),
        c if c == ALU | DIV | K => Op::DivK(k),
        c if c == ALU | MOD | K => Op::ModK(k),
        c if c == ALU | AND | K => Op::AndK(k),
        c if c == ALU | OR | K => Op::OrK(k),
        c if c == ALU | XOR | K => Op::XorK(k),
        // A constant shift of 32 or more gives 0, as one by X does.
        c if (c == ALU | LSH | K || c == ALU | RSH | K) && k >= 32 => Op::AndK(0),
        c if c == ALU | LSH | K => Op::LshK(k),
        c if c == ALU | RSH | K => Op::RshK(k),
        c if c == ALU | ADD | X => Op::AddX,
        c if c == ALU | SUB | X => Op::SubX,
        c if c == ALU | MUL | X => Op::MulX,
        c if c == ALU | DIV | X => Op::DivX,
        c if c == ALU | MOD | X => Op::ModX,
        c if c == ALU | AND | X => Op::AndX,
        c if c == ALU | OR | X => Op::OrX,
        c if c == ALU | XOR | X => Op::XorX,
        c if c == ALU | LSH | X => Op::LshX,
        c if c == ALU | RSH | X => Op::RshX,
        c if c == ALU | NEG => Op::Neg,
        c if c == MISC | TAX => Op::Tax,
        c if c == MISC | TXA => Op::Txa,
        _ => return None,
    })
}

/// Decodes validated instructions, one operation per instruction, then
/// fuses each load with a comparison that follows it.
fn decode(insns: &[Insn]) -> Box<[Op]> {
    let mut ops: Vec<Op> = insns
        .iter()
        .enumerate()
        // Every opcode is known once validated.
        .map(|(i, insn)| decode_one(i, insn).unwrap_or(Op::RetK(0)))
        .collect();
    for i in 0..ops.len().saturating_sub(1) {
        let fused = match (ops[i], ops[i + 1]) {
            (Op::LdW(off), Op::JeqK { k, t, f }) => Op::LdWJeq { off, k, t, f },
            (Op::LdH(off), Op::JeqK { k, t, f }) => Op::LdHJeq { off, k, t, f },
            (Op::LdB(off), Op::JeqK { k, t, f }) => Op::LdBJeq { off, k, t, f },
            (Op::LdH(off), Op::JsetK { k, t, f }) => Op::LdHJset { off, k, t, f },
            (Op::LdB(off), Op::JsetK { k, t, f }) => Op::LdBJset { off, k, t, f },
            (Op::LdHInd(off), Op::JeqK { k, t, f }) => Op::LdHIndJeq { off, k, t, f },
            (Op::LdBInd(off), Op::JeqK { k, t, f }) => Op::LdBIndJeq { off, k, t, f },
            (Op::LdBInd(off), Op::JsetK { k, t, f }) => Op::LdBIndJset { off, k, t, f },
            (Op::LdLen, Op::JgeK { k, t, f }) => Op::LdLenJge { k, t, f },
            (Op::LdLen, Op::JgtK { k, t, f }) => Op::LdLenJgt { k, t, f },
            _ => continue,
        };
        ops[i] = fused;
    }
    ops.into_boxed_slice()
}

/// X + k as a packet offset; past any packet if it does not fit.
#[inline(always)]
fn ind(x: u32, k: u32) -> usize {
    (x as usize).saturating_add(k as usize)
}

#[inline(always)]
fn word(p: &[u8], at: usize) -> Option<u32> {
    p.get(at..)
        .and_then(|s| s.first_chunk::<4>())
        .map(|b| u32::from_be_bytes(*b))
}

#[inline(always)]
fn half(p: &[u8], at: usize) -> Option<u32> {
    p.get(at..)
        .and_then(|s| s.first_chunk::<2>())
        .map(|b| u32::from(u16::from_be_bytes(*b)))
}

#[inline(always)]
fn byte(p: &[u8], at: usize) -> Option<u32> {
    p.get(at).map(|&b| u32::from(b))
}

/// The interpreter: `bpf_filter`'s semantics over decoded operations.
#[inline(always)]
fn exec(ops: &[Op], p: &[u8], wire_len: u32, aux: Option<&Aux>) -> u32 {
    // A failed load ends the program with 0, as in bpf_filter.
    macro_rules! load {
        ($e:expr) => {
            match $e {
                Some(v) => v,
                None => return 0,
            }
        };
    }
    // A conditional jump, as a real branch. Left alone, LLVM computes the
    // target with a conditional move, and the one indirect jump that
    // dispatches every operation then predicts its target without the
    // comparisons' outcomes in the branch history: it missed on nearly
    // every data-dependent step, and the interpreter ran at 0.6-0.8x
    // libpcap's speed (whose `switch` gcc compiles with branches). An
    // empty black_box in each arm is a side effect the compiler cannot
    // execute on both paths, so the branch stays; it emits no instruction
    // (bench/bpf-results.md).
    macro_rules! branch {
        ($cond:expr, $t:expr, $f:expr) => {
            if $cond {
                std::hint::black_box(());
                usize::from($t)
            } else {
                std::hint::black_box(());
                usize::from($f)
            }
        };
    }
    let mut a: u32 = 0;
    let mut x: u32 = 0;
    let mut mem = [0u32; MEMWORDS as usize];
    let mut loops = p.len().saturating_add(LOOP_ALLOWANCE);
    let mut pc = 0usize;
    loop {
        // Always an instruction: jumps were checked, and the last one
        // returns. Should that ever not hold, the packet is rejected.
        let Some(&op) = ops.get(pc) else {
            return 0;
        };
        pc += 1;
        match op {
            Op::RetK(k) => return k,
            Op::RetA => return a,
            Op::LdW(k) => a = load!(word(p, k as usize)),
            Op::LdH(k) => a = load!(half(p, k as usize)),
            Op::LdB(k) => a = load!(byte(p, k as usize)),
            Op::LdWInd(k) => a = load!(word(p, ind(x, k))),
            Op::LdHInd(k) => a = load!(half(p, ind(x, k))),
            Op::LdBInd(k) => a = load!(byte(p, ind(x, k))),
            Op::LdAnc(item) => a = load!(aux.and_then(|aux| item.value(aux))),
            Op::LdLen => a = wire_len,
            Op::LdxLen => x = wire_len,
            Op::LdImm(k) => a = k,
            Op::LdxImm(k) => x = k,
            Op::LdMem(m) => a = mem[usize::from(m) & 0xf],
            Op::LdxMem(m) => x = mem[usize::from(m) & 0xf],
            Op::LdxMsh(k) => x = (load!(byte(p, k as usize)) & 0xf) << 2,
            Op::St(m) => mem[usize::from(m) & 0xf] = a,
            Op::Stx(m) => mem[usize::from(m) & 0xf] = x,
            Op::Ja(t) => pc = usize::from(t),
            Op::JaBack(t) => {
                if loops == 0 {
                    return 0;
                }
                loops -= 1;
                pc = usize::from(t);
            }
            Op::JeqK { k, t, f } => pc = branch!(a == k, t, f),
            Op::JgtK { k, t, f } => pc = branch!(a > k, t, f),
            Op::JgeK { k, t, f } => pc = branch!(a >= k, t, f),
            Op::JsetK { k, t, f } => pc = branch!(a & k != 0, t, f),
            Op::JeqX { t, f } => pc = branch!(a == x, t, f),
            Op::JgtX { t, f } => pc = branch!(a > x, t, f),
            Op::JgeX { t, f } => pc = branch!(a >= x, t, f),
            Op::JsetX { t, f } => pc = branch!(a & x != 0, t, f),
            Op::AddK(k) => a = a.wrapping_add(k),
            Op::SubK(k) => a = a.wrapping_sub(k),
            Op::MulK(k) => a = a.wrapping_mul(k),
            Op::DivK(k) => a = a.checked_div(k).unwrap_or(0),
            Op::ModK(k) => a = a.checked_rem(k).unwrap_or(0),
            Op::AndK(k) => a &= k,
            Op::OrK(k) => a |= k,
            Op::XorK(k) => a ^= k,
            Op::LshK(k) => a = a.checked_shl(k).unwrap_or(0),
            Op::RshK(k) => a = a.checked_shr(k).unwrap_or(0),
            Op::AddX => a = a.wrapping_add(x),
            Op::SubX => a = a.wrapping_sub(x),
            Op::MulX => a = a.wrapping_mul(x),
            Op::DivX => a = load!(a.checked_div(x)),
            Op::ModX => a = load!(a.checked_rem(x)),
            Op::AndX => a &= x,
            Op::OrX => a |= x,
            Op::XorX => a ^= x,
            Op::LshX => a = a.checked_shl(x).unwrap_or(0),
            Op::RshX => a = a.checked_shr(x).unwrap_or(0),
            Op::Neg => a = a.wrapping_neg(),
            Op::Tax => x = a,
            Op::Txa => a = x,
            Op::LdWJeq { off, k, t, f } => {
                a = load!(word(p, off as usize));
                pc = branch!(a == k, t, f);
            }
            Op::LdHJeq { off, k, t, f } => {
                a = load!(half(p, off as usize));
                pc = branch!(a == k, t, f);
            }
            Op::LdBJeq { off, k, t, f } => {
                a = load!(byte(p, off as usize));
                pc = branch!(a == k, t, f);
            }
            Op::LdHJset { off, k, t, f } => {
                a = load!(half(p, off as usize));
                pc = branch!(a & k != 0, t, f);
            }
            Op::LdBJset { off, k, t, f } => {
                a = load!(byte(p, off as usize));
                pc = branch!(a & k != 0, t, f);
            }
            Op::LdHIndJeq { off, k, t, f } => {
                a = load!(half(p, ind(x, off)));
                pc = branch!(a == k, t, f);
            }
            Op::LdBIndJeq { off, k, t, f } => {
                a = load!(byte(p, ind(x, off)));
                pc = branch!(a == k, t, f);
            }
            Op::LdBIndJset { off, k, t, f } => {
                a = load!(byte(p, ind(x, off)));
                pc = branch!(a & k != 0, t, f);
            }
            Op::LdLenJge { k, t, f } => {
                a = wire_len;
                pc = branch!(a >= k, t, f);
            }
            Op::LdLenJgt { k, t, f } => {
                a = wire_len;
                pc = branch!(a > k, t, f);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_stay_small() {
        assert!(std::mem::size_of::<Op>() <= 16);
    }
}
