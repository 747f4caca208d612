//! The parts of a classic BPF opcode, as `<pcap/bpf.h>` and
//! `<linux/filter.h>` name them (without their `BPF_` prefix), and the
//! Linux kernel's ancillary-data offsets (`SKF_AD_*`).
//!
//! An opcode is a class (the low 3 bits) with, depending on the class, a
//! size and a mode (loads), an operation and a source (arithmetic and
//! jumps), or a return value's source.

/// Loads into the accumulator A.
pub const LD: u16 = 0x00;
/// Loads into the index register X.
pub const LDX: u16 = 0x01;
/// Stores A into scratch memory.
pub const ST: u16 = 0x02;
/// Stores X into scratch memory.
pub const STX: u16 = 0x03;
/// Arithmetic on A.
pub const ALU: u16 = 0x04;
/// Jumps.
pub const JMP: u16 = 0x05;
/// Returns: the program's answer.
pub const RET: u16 = 0x06;
/// Register transfers (`tax`, `txa`).
pub const MISC: u16 = 0x07;

/// A 32-bit load.
pub const W: u16 = 0x00;
/// A 16-bit load.
pub const H: u16 = 0x08;
/// An 8-bit load.
pub const B: u16 = 0x10;

/// The constant k.
pub const IMM: u16 = 0x00;
/// The packet at offset k.
pub const ABS: u16 = 0x20;
/// The packet at offset X + k.
pub const IND: u16 = 0x40;
/// Scratch memory word k.
pub const MEM: u16 = 0x60;
/// The packet's length on the wire.
pub const LEN: u16 = 0x80;
/// `4 * (packet[k] & 0xf)`, an IPv4 header's length (LDX only).
pub const MSH: u16 = 0xa0;

/// Addition.
pub const ADD: u16 = 0x00;
/// Subtraction.
pub const SUB: u16 = 0x10;
/// Multiplication.
pub const MUL: u16 = 0x20;
/// Division.
pub const DIV: u16 = 0x30;
/// Bitwise or.
pub const OR: u16 = 0x40;
/// Bitwise and.
pub const AND: u16 = 0x50;
/// Shift left.
pub const LSH: u16 = 0x60;
/// Shift right.
pub const RSH: u16 = 0x70;
/// Negation.
pub const NEG: u16 = 0x80;
/// Remainder.
pub const MOD: u16 = 0x90;
/// Bitwise exclusive or.
pub const XOR: u16 = 0xa0;

/// Unconditional jump by k.
pub const JA: u16 = 0x00;
/// Jump if A == operand.
pub const JEQ: u16 = 0x10;
/// Jump if A > operand.
pub const JGT: u16 = 0x20;
/// Jump if A >= operand.
pub const JGE: u16 = 0x30;
/// Jump if A & operand != 0.
pub const JSET: u16 = 0x40;

/// The operand is the constant k.
pub const K: u16 = 0x00;
/// The operand is X.
pub const X: u16 = 0x08;
/// A return of A.
pub const A: u16 = 0x10;

/// `tax`: X = A.
pub const TAX: u16 = 0x00;
/// `txa`: A = X.
pub const TXA: u16 = 0x80;

/// The most instructions a program may have (`BPF_MAXINSNS`).
pub const MAXINSNS: usize = 4096;
/// The number of scratch memory words (`BPF_MEMWORDS`).
pub const MEMWORDS: u32 = 16;

/// Where the Linux kernel's ancillary data starts: an absolute load at
/// `SKF_AD_OFF + SKF_AD_x` loads item x instead of packet bytes.
pub const SKF_AD_OFF: u32 = (-0x1000i32) as u32;
/// The packet's protocol (`skb->protocol`, an EtherType).
pub const SKF_AD_PROTOCOL: u32 = 0;
/// The packet type (`PACKET_HOST`, `PACKET_OUTGOING`...).
pub const SKF_AD_PKTTYPE: u32 = 4;
/// The receiving interface's index.
pub const SKF_AD_IFINDEX: u32 = 8;
/// The VLAN tag (TCI) the kernel took out of the frame.
pub const SKF_AD_VLAN_TAG: u32 = 44;
/// 1 if the kernel took a VLAN tag out of the frame, else 0.
pub const SKF_AD_VLAN_TAG_PRESENT: u32 = 48;
/// That tag's TPID (0x8100, 0x88a8).
pub const SKF_AD_VLAN_TPID: u32 = 60;
/// The end of the ancillary items the kernel knows (`SKF_AD_MAX`).
pub const SKF_AD_MAX: u32 = 64;

/// The class of `code`.
pub const fn class(code: u16) -> u16 {
    code & 0x07
}
