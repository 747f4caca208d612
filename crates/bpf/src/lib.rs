//! `bpf`: tcpdump's filter language (pcap-filter(7)) for kansoku.
//!
//! A user who knows `tcpdump -r FILE 'tcp port 80'` should be able to give
//! kansoku the same expression and get the same packets. Writing a second
//! compiler for that language would give a second answer to some
//! expression, so this crate does not: libpcap's own compiler turns the
//! expression into a classic BPF program ([`libpcap::compile_for_trace`]
//! for a trace, as `tcpdump -r` compiles it; [`libpcap::compile_live`] for
//! an interface, as `tcpdump -i` does, with the kernel's VLAN data), and
//! kansoku takes it from there:
//!
//! - [`Program`]: the instructions checked once by `bpf_validate`'s rules
//!   and decoded into a form that runs faster than libpcap's own
//!   interpreter, with libpcap's answer on every packet ([`Program::run`]),
//!   or with the data the Linux kernel keeps beside a packet, such as the
//!   VLAN tag it took out of the frame ([`Program::run_with_aux`]). A
//!   program that does not validate is refused with the instruction and
//!   the reason ([`Invalid`]); one that does never panics, whatever the
//!   packet.
//! - [`image`] and [`dump`]: the program listed byte for byte as
//!   `tcpdump -d`, `-dd` and `-ddd` list it, so a user can compare the two.
//!
//! Why the interpreter is ours and the compiler is not: the compiler runs
//! once per expression and interface and is libpcap's to get right; the
//! interpreter runs on every packet, where libpcap's `bpf_filter` would cost
//! a call into C per packet and a `switch` per instruction. Ours checks
//! each jump once, when the program is built, fuses each load with the
//! comparison that follows it, and keeps comparisons as branches the CPU
//! can predict: 1.2-1.6x libpcap's speed on a realistic mix of frames
//! (`bench/bpf-results.md`), in safe code. Its answers are checked against
//! `bpf_filter`'s on real captures and generated packets, for every link
//! type kansoku reads (`tests/differential.rs`).
//!
//! ```
//! // `tcpdump -r FILE 'tcp port 80'` for an Ethernet pcap file (LINKTYPE 1).
//! let insns = bpf::libpcap::compile_for_trace("tcp port 80", 1, 0, false)?;
//! let program = bpf::Program::new(&insns)?;
//! assert!(program.dump(1).starts_with("(000) ldh      [12]\n"));
//! let not_ip = [0u8; 60];
//! assert_eq!(program.run(&not_ip, 60), 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Only [`libpcap`], the calls into the C library, uses `unsafe`.

#![deny(unsafe_code)]

// The calls into libpcap, each `unsafe` block with its SAFETY argument.
#[allow(unsafe_code)]
pub mod libpcap;
mod listing;
pub mod opcode;
mod program;

pub use listing::{dump, image};
pub use program::{Aux, Invalid, Program, Reason};

/// One classic BPF instruction, laid out as C's `struct bpf_insn` (libpcap)
/// and `struct sock_filter` (Linux), so a slice of them can be handed to
/// either as it is.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Insn {
    /// The opcode: class, size, mode, operation and source bits
    /// ([`opcode`]).
    pub code: u16,
    /// For a conditional jump, how many instructions to skip when the
    /// condition holds.
    pub jt: u8,
    /// For a conditional jump, how many instructions to skip when it does
    /// not.
    pub jf: u8,
    /// The constant operand: an offset, a value, a jump distance.
    pub k: u32,
}

// struct bpf_insn's size and alignment, which the FFI and the kernel rely on.
const _: () = assert!(std::mem::size_of::<Insn>() == 8 && std::mem::align_of::<Insn>() == 4);

impl Insn {
    /// A statement, as C's `BPF_STMT(code, k)`.
    pub const fn stmt(code: u16, k: u32) -> Insn {
        Insn {
            code,
            jt: 0,
            jf: 0,
            k,
        }
    }

    /// A jump, as C's `BPF_JUMP(code, k, jt, jf)`.
    pub const fn jump(code: u16, k: u32, jt: u8, jf: u8) -> Insn {
        Insn { code, jt, jf, k }
    }
}
