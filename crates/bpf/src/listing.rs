//! tcpdump's listings of a program: libpcap's `bpf_image` (bpf_image.c)
//! and `bpf_dump` (bpf_dump.c), ported line by line so the output is
//! byte-identical, `printf` conversions included (`%d` of an unsigned
//! field prints it as a signed int, as C does).

use std::fmt::Write as _;

use crate::opcode::*;
use crate::Insn;

/// libpcap's names for the kernel's ancillary offsets, as `bpf_image`
/// prints them (`[vlanp]`), by `(k - SKF_AD_OFF) / 4`.
const ANCILLARY: [&str; 16] = [
    "proto",
    "type",
    "ifidx",
    "nla",
    "nlan",
    "mark",
    "queue",
    "hatype",
    "rxhash",
    "cpu",
    "xor_x",
    "vlan_tci",
    "vlanp",
    "poff",
    "random",
    "vlan_tpid",
];

/// The operand of an absolute load: `[k]`, or the ancillary item's name.
fn abs_operand(k: u32) -> String {
    let item = k.wrapping_sub(SKF_AD_OFF);
    if k >= SKF_AD_OFF && item < SKF_AD_MAX && item.is_multiple_of(4) {
        if let Some(name) = ANCILLARY.get(item as usize / 4) {
            return format!("[{name}]");
        }
    }
    format!("[{}]", k as i32)
}

/// Instruction `insn` at index `n` as libpcap's `bpf_image` gives it, which
/// is one line of `tcpdump -d` (without the newline): for example
/// `(002) jeq      #0x800           jt 3\tjf 5`. Jump targets are printed as
/// absolute indexes; an opcode libpcap does not know prints as
/// `unimp 0x...`.
pub fn image(insn: &Insn, n: usize) -> String {
    let k = insn.k;
    // C's `%d` of an unsigned 32-bit value.
    let d = k as i32;
    let n32 = n as i32;
    let (op, operand): (&str, String) = match insn.code {
        c if c == RET | K => ("ret", format!("#{d}")),
        c if c == RET | A => ("ret", String::new()),
        c if c == LD | W | ABS => ("ld", abs_operand(k)),
        c if c == LD | H | ABS => ("ldh", abs_operand(k)),
        c if c == LD | B | ABS => ("ldb", abs_operand(k)),
        c if c == LD | W | LEN => ("ld", "#pktlen".to_string()),
        c if c == LD | W | IND => ("ld", format!("[x + {d}]")),
        c if c == LD | H | IND => ("ldh", format!("[x + {d}]")),
        c if c == LD | B | IND => ("ldb", format!("[x + {d}]")),
        c if c == LD | IMM => ("ld", format!("#0x{k:x}")),
        c if c == LDX | IMM => ("ldx", format!("#0x{k:x}")),
        c if c == LDX | MSH | B => ("ldxb", format!("4*([{d}]&0xf)")),
        c if c == LD | MEM => ("ld", format!("M[{d}]")),
        c if c == LDX | MEM => ("ldx", format!("M[{d}]")),
        c if c == ST => ("st", format!("M[{d}]")),
        c if c == STX => ("stx", format!("M[{d}]")),
        // `n + 1 + p->k`: unsigned arithmetic, printed with %d.
        c if c == JMP | JA => (
            "ja",
            format!("{}", (n as u32).wrapping_add(1).wrapping_add(k) as i32),
        ),
        c if c == JMP | JGT | K => ("jgt", format!("#0x{k:x}")),
        c if c == JMP | JGE | K => ("jge", format!("#0x{k:x}")),
        c if c == JMP | JEQ | K => ("jeq", format!("#0x{k:x}")),
        c if c == JMP | JSET | K => ("jset", format!("#0x{k:x}")),
        c if c == JMP | JGT | X => ("jgt", "x".to_string()),
        c if c == JMP | JGE | X => ("jge", "x".to_string()),
        c if c == JMP | JEQ | X => ("jeq", "x".to_string()),
        c if c == JMP | JSET | X => ("jset", "x".to_string()),
        c if c == ALU | ADD | X => ("add", "x".to_string()),
        c if c == ALU | SUB | X => ("sub", "x".to_string()),
        c if c == ALU | MUL | X => ("mul", "x".to_string()),
        c if c == ALU | DIV | X => ("div", "x".to_string()),
        c if c == ALU | MOD | X => ("mod", "x".to_string()),
        c if c == ALU | AND | X => ("and", "x".to_string()),
        c if c == ALU | OR | X => ("or", "x".to_string()),
        c if c == ALU | XOR | X => ("xor", "x".to_string()),
        c if c == ALU | LSH | X => ("lsh", "x".to_string()),
        c if c == ALU | RSH | X => ("rsh", "x".to_string()),
        c if c == ALU | ADD | K => ("add", format!("#{d}")),
        c if c == ALU | SUB | K => ("sub", format!("#{d}")),
        c if c == ALU | MUL | K => ("mul", format!("#{d}")),
        c if c == ALU | DIV | K => ("div", format!("#{d}")),
        c if c == ALU | MOD | K => ("mod", format!("#{d}")),
        c if c == ALU | AND | K => ("and", format!("#0x{k:x}")),
        c if c == ALU | OR | K => ("or", format!("#0x{k:x}")),
        c if c == ALU | XOR | K => ("xor", format!("#0x{k:x}")),
        c if c == ALU | LSH | K => ("lsh", format!("#{d}")),
        c if c == ALU | RSH | K => ("rsh", format!("#{d}")),
        c if c == ALU | NEG => ("neg", String::new()),
        c if c == MISC | TAX => ("tax", String::new()),
        c if c == MISC | TXA => ("txa", String::new()),
        c => ("unimp", format!("0x{c:x}")),
    };
    if class(insn.code) == JMP && insn.code & 0xf0 != JA {
        format!(
            "({n:03}) {op:<8} {operand:<16} jt {}\tjf {}",
            n32.wrapping_add(1).wrapping_add(i32::from(insn.jt)),
            n32.wrapping_add(1).wrapping_add(i32::from(insn.jf)),
        )
    } else {
        format!("({n:03}) {op:<8} {operand}")
    }
}

/// `insns` listed as `tcpdump -d` (`level` 0 or 1), `-dd` (2) or `-ddd` (3
/// or more) prints a program, line for line (libpcap's `bpf_dump`): one
/// [`image`] a line; a C array of `{ code, jt, jf, k }`; or the count
/// followed by the four fields in decimal, a line each. Every line ends
/// with a newline.
pub fn dump(insns: &[Insn], level: u8) -> String {
    let mut out = String::with_capacity(insns.len() * 48 + 8);
    // Writing to a String does not fail.
    if level > 2 {
        let _ = writeln!(out, "{}", insns.len() as i32);
        for i in insns {
            let _ = writeln!(out, "{} {} {} {}", i.code, i.jt, i.jf, i.k);
        }
    } else if level > 1 {
        for i in insns {
            let _ = writeln!(
                out,
                "{{ 0x{:x}, {}, {}, 0x{:08x} }},",
                i.code, i.jt, i.jf, i.k
            );
        }
    } else {
        for (n, i) in insns.iter().enumerate() {
            out.push_str(&image(i, n));
            out.push('\n');
        }
    }
    out
}
