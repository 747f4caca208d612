//! libpcap's filter compiler, called through a hand-written FFI: the one
//! module of this crate with `unsafe`.
//!
//! Why not the `pcap` crate: it opens savefiles only from paths and file
//! descriptors, its dead handles fix the snap length at 65,535 (so
//! `ret #65535` where tcpdump compiles `ret #262144`), a compiled
//! instruction's fields cannot be read through it, and it binds neither
//! `bpf_filter` nor `bpf_image`; a dozen declarations do the job.
//!
//! [`compile_for_trace`] compiles as `tcpdump -r` does for a file of a
//! given link type, snap length and byte order, on a savefile handle
//! opened on a pcap file header built in memory (`fmemopen`). A dead
//! handle (`pcap_open_dead`) would not do: it takes DLT values where files
//! hold LINKTYPE values (LINKTYPE_RAW 101 is DLT_RAW 12 on Linux), leaves a
//! snap length of 0 as 0 where a file's becomes 262,144, and compiles some
//! link types (BSD loopback) for the host's byte order instead of the
//! file's. [`compile_live`] compiles as `tcpdump -i` does, on a live handle,
//! which is the only way to get libpcap's code for the kernel's VLAN data.
//!
//! Both copy the instructions out and free libpcap's copy at once, so the
//! caller holds plain data. Both are safe to call from any thread: each
//! call opens, uses and closes a handle of its own, and libpcap documents
//! `pcap_compile` as thread-safe since 1.8.0 (pcap_compile(3PCAP); its
//! parser and code generator keep their state on the stack).
//!
//! [`bpf_filter`], [`bpf_image`] and [`bpf_validate`] call libpcap's own
//! interpreter, listing and validator: they are the references this
//! crate's tests check [`Program`], [`image`](crate::image) and
//! [`Program::new`] against, not for use on the packet path.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::fmt;
use std::sync::Mutex;

use crate::{opcode, Insn, Program};

/// libpcap's error buffer size (`PCAP_ERRBUF_SIZE`).
const ERRBUF_SIZE: usize = 256;
/// `pcap_activate`'s generic failure, whose message is in `pcap_geterr`.
const PCAP_ERROR: c_int = -1;

/// An opaque `pcap_t`.
#[repr(C)]
struct Pcap {
    _private: [u8; 0],
}

/// `struct bpf_program`.
#[repr(C)]
struct BpfProgram {
    bf_len: c_uint,
    bf_insns: *mut Insn,
}

#[link(name = "pcap")]
extern "C" {
    fn pcap_fopen_offline(fp: *mut libc::FILE, errbuf: *mut c_char) -> *mut Pcap;
    fn pcap_create(source: *const c_char, errbuf: *mut c_char) -> *mut Pcap;
    fn pcap_set_snaplen(p: *mut Pcap, snaplen: c_int) -> c_int;
    fn pcap_set_buffer_size(p: *mut Pcap, size: c_int) -> c_int;
    fn pcap_activate(p: *mut Pcap) -> c_int;
    fn pcap_statustostr(status: c_int) -> *const c_char;
    fn pcap_compile(
        p: *mut Pcap,
        fp: *mut BpfProgram,
        expr: *const c_char,
        optimize: c_int,
        netmask: u32,
    ) -> c_int;
    fn pcap_geterr(p: *mut Pcap) -> *const c_char;
    fn pcap_freecode(fp: *mut BpfProgram);
    fn pcap_close(p: *mut Pcap);
    #[link_name = "bpf_filter"]
    fn c_bpf_filter(pc: *const Insn, p: *const u8, wirelen: c_uint, buflen: c_uint) -> c_uint;
    #[link_name = "bpf_image"]
    fn c_bpf_image(p: *const Insn, n: c_int) -> *const c_char;
    #[link_name = "bpf_validate"]
    fn c_bpf_validate(f: *const Insn, len: c_int) -> c_int;
}

/// What libpcap said when it could not compile an expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CompileError {
    /// `pcap_compile` refused the expression: libpcap's message, such as
    /// "can't parse filter expression: syntax error" or "no VLAN support
    /// for Linux cooked v2".
    Expression(String),
    /// The handle to compile on could not be opened: for an interface,
    /// libpcap's status and message ("That device is not up", "No such
    /// device exists (...)"), without the interface's name, which the
    /// caller adds.
    Open(String),
}

impl CompileError {
    /// libpcap's words.
    pub fn message(&self) -> &str {
        match self {
            CompileError::Expression(m) | CompileError::Open(m) => m,
        }
    }
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for CompileError {}

/// A `pcap_t` closed when dropped.
struct Handle(*mut Pcap);

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: the pointer came non-null from pcap_fopen_offline or
        // pcap_create, and this is its only owner, so it is closed once.
        unsafe { pcap_close(self.0) }
    }
}

impl Handle {
    /// libpcap's last error on this handle.
    fn error(&self) -> String {
        // SAFETY: the handle is open; pcap_geterr returns a pointer to the
        // handle's NUL-terminated error buffer, read before any other call.
        unsafe { text(pcap_geterr(self.0)) }
    }

    /// Compiles `expr` as tcpdump does (optimized, netmask 0: tcpdump
    /// looks the netmask up only with `-f`), copies the program out and
    /// frees libpcap's.
    fn compile(&self, expr: &str) -> Result<Vec<Insn>, CompileError> {
        let expr = CString::new(expr)
            .map_err(|_| CompileError::Expression("the expression holds a NUL byte".to_string()))?;
        let mut prog = BpfProgram {
            bf_len: 0,
            bf_insns: std::ptr::null_mut(),
        };
        // SAFETY: the handle is open, `prog` is a valid bpf_program to
        // fill in, `expr` a NUL-terminated string that outlives the call.
        let status = unsafe { pcap_compile(self.0, &mut prog, expr.as_ptr(), 1, 0) };
        if status < 0 {
            return Err(CompileError::Expression(self.error()));
        }
        let insns = if prog.bf_insns.is_null() {
            Vec::new()
        } else {
            // SAFETY: on success, bf_insns points to bf_len instructions
            // that libpcap allocated; struct bpf_insn has Insn's layout
            // (repr(C): u16, u8, u8, u32). They are copied before the free.
            unsafe { std::slice::from_raw_parts(prog.bf_insns, prog.bf_len as usize) }.to_vec()
        };
        // SAFETY: `prog` was filled in by a successful pcap_compile and is
        // freed once; pcap_freecode leaves it empty.
        unsafe { pcap_freecode(&mut prog) };
        Ok(insns)
    }
}

/// A NUL-terminated C string as text (empty if null).
///
/// # Safety
/// `p` is null or points to a NUL-terminated string valid for the call.
unsafe fn text(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: the caller's promise.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// The text libpcap wrote into an error buffer.
fn errbuf_text(buf: &[c_char; ERRBUF_SIZE]) -> String {
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The 24-byte header of a pcap file of this link type (a LINKTYPE_ value,
/// as in a file), snap length and byte order.
fn pcap_header(link_type: u16, snaplen: u32, big_endian: bool) -> [u8; 24] {
    let fields: [u32; 6] = [
        0xa1b2_c3d4,
        // Version 2.4, the two 16-bit halves of one word in file order.
        0,
        0, // thiszone
        0, // sigfigs
        snaplen,
        u32::from(link_type),
    ];
    let mut h = [0u8; 24];
    for (i, v) in fields.iter().enumerate() {
        let b = if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        h[i * 4..i * 4 + 4].copy_from_slice(&b);
    }
    let (major, minor) = if big_endian {
        (2u16.to_be_bytes(), 4u16.to_be_bytes())
    } else {
        (2u16.to_le_bytes(), 4u16.to_le_bytes())
    };
    h[4..6].copy_from_slice(&major);
    h[6..8].copy_from_slice(&minor);
    h
}

/// Compiles `expr` as `tcpdump -r FILE expr` does for a pcap file of
/// `link_type` (a LINKTYPE_ value, as pcap and pcapng files hold it), snap
/// length `snaplen` (0: none, which libpcap makes 262,144) and byte order
/// (`big_endian`), and returns the instructions. An empty expression
/// accepts every packet.
pub fn compile_for_trace(
    expr: &str,
    link_type: u16,
    snaplen: u32,
    big_endian: bool,
) -> Result<Vec<Insn>, CompileError> {
    let mut header = pcap_header(link_type, snaplen, big_endian);
    let mut errbuf = [0 as c_char; ERRBUF_SIZE];
    // SAFETY: `header` is a live 24-byte buffer that outlives the stream
    // (the handle that owns the stream is closed before this function
    // returns); the mode is a NUL-terminated string.
    let fp = unsafe {
        libc::fmemopen(
            header.as_mut_ptr().cast::<c_void>(),
            header.len(),
            c"r".as_ptr(),
        )
    };
    if fp.is_null() {
        return Err(CompileError::Open(format!(
            "fmemopen: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: `fp` is an open stream over the header, `errbuf` is
    // PCAP_ERRBUF_SIZE bytes. On success the handle owns the stream and
    // closes it; on failure it does not (savefile.c), so it is closed here.
    let p = unsafe { pcap_fopen_offline(fp, errbuf.as_mut_ptr()) };
    if p.is_null() {
        // SAFETY: the stream is open and no one else owns it.
        unsafe { libc::fclose(fp) };
        return Err(CompileError::Open(errbuf_text(&errbuf)));
    }
    let handle = Handle(p);
    let insns = handle.compile(expr);
    // Closed before `header`, which the stream reads, goes.
    drop(handle);
    insns
}

/// Compiles `expr` as `tcpdump -i interface expr` does: on a live handle
/// for the interface (created, given the snap length, activated, then
/// closed once the program is copied out), so that for an Ethernet
/// interface `vlan` reads the tag the kernel takes out of the frame
/// (`[vlanp]`, `[vlan_tci]`), and the program is the one tcpdump attaches
/// to its socket. Needs the rights a capture needs (CAP_NET_RAW); a snap
/// length of 0 is libpcap's default, 262,144. A program for an interface
/// libpcap captures in cooked mode (`any`) is the compiled one, before
/// libpcap's rewriting of it for the kernel.
pub fn compile_live(expr: &str, interface: &str, snaplen: u32) -> Result<Vec<Insn>, CompileError> {
    let name = CString::new(interface)
        .map_err(|_| CompileError::Open("the interface name holds a NUL byte".to_string()))?;
    let mut errbuf = [0 as c_char; ERRBUF_SIZE];
    // SAFETY: `name` is NUL-terminated, `errbuf` PCAP_ERRBUF_SIZE bytes.
    let p = unsafe { pcap_create(name.as_ptr(), errbuf.as_mut_ptr()) };
    if p.is_null() {
        return Err(CompileError::Open(errbuf_text(&errbuf)));
    }
    let handle = Handle(p);
    // As tcpdump's -s: out of range, including 0, is libpcap's default.
    let snaplen = c_int::try_from(snaplen).unwrap_or(0);
    // SAFETY: the handle is created and not yet activated, as these
    // setters require; they only record the values.
    let set = unsafe {
        let s = pcap_set_snaplen(handle.0, snaplen);
        if s != 0 {
            s
        } else {
            // A small ring: the handle only lives to compile the program.
            pcap_set_buffer_size(handle.0, 1 << 20)
        }
    };
    if set != 0 {
        return Err(CompileError::Open(status_text(&handle, set)));
    }
    // SAFETY: the handle is created and configured.
    let status = unsafe { pcap_activate(handle.0) };
    if status < 0 {
        return Err(CompileError::Open(status_text(&handle, status)));
    }
    handle.compile(expr)
}

/// An activation's failure in tcpdump's words: libpcap's message for a
/// generic error; else its status, with the message when there is one.
fn status_text(handle: &Handle, status: c_int) -> String {
    let message = handle.error();
    // SAFETY: pcap_statustostr returns a NUL-terminated string for any
    // status (a static one, or a thread-local buffer for unknown ones).
    let status_text = unsafe { text(pcap_statustostr(status)) };
    if status == PCAP_ERROR && !message.is_empty() {
        message
    } else if message.is_empty() || message == status_text {
        status_text
    } else {
        format!("{status_text} ({message})")
    }
}

/// libpcap's own interpreter, `bpf_filter`, on `packet` (the captured
/// bytes of a packet `wire_len` bytes long on the wire): the reference
/// [`Program::run`] is tested against. Not for the packet path (a call
/// into C per packet). Taking a [`Program`] makes the call sound: its
/// opcodes are those `bpf_filter` knows (others abort the process), its
/// jumps land inside it and its scratch memory indexes are in range. Two
/// differences with `run` remain: libpcap's scratch memory starts
/// uninitialized, and a program that loops for ever runs for ever.
pub fn bpf_filter(program: &Program, packet: &[u8], wire_len: u32) -> u32 {
    let insns = program.insns();
    // A buffer over 4 GiB is offered as its first 4 GiB.
    let buflen = c_uint::try_from(packet.len()).unwrap_or(c_uint::MAX);
    // SAFETY: `insns` is a validated program (see above) of Insn, which
    // has struct bpf_insn's layout; bpf_filter reads at most `buflen`
    // bytes of `packet`, checking every load against it.
    unsafe { c_bpf_filter(insns.as_ptr(), packet.as_ptr(), wire_len, buflen) }
}

/// libpcap's `bpf_image` keeps its answer in a static buffer.
static IMAGE: Mutex<()> = Mutex::new(());

/// libpcap's own `bpf_image` of instruction `insn` at index `n`: the
/// reference [`image`](crate::image) is tested against.
pub fn bpf_image(insn: &Insn, n: usize) -> String {
    let n = c_int::try_from(n).unwrap_or(c_int::MAX);
    let _guard = IMAGE.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: bpf_image reads one instruction and returns its static
    // buffer, NUL-terminated; the lock keeps other threads from writing
    // it until it is copied.
    unsafe { text(c_bpf_image(insn, n)) }
}

/// Whether libpcap's interpreter is defined on `insns` (and ends), so that
/// [`bpf_filter`]'s answer is one to compare with: no read
/// of scratch memory (libpcap leaves it uninitialized), no backward jump
/// (it could loop for ever there), no constant shift past 31 bits
/// (undefined in its C).
pub fn defined_in_libpcap(insns: &[Insn]) -> bool {
    insns.iter().enumerate().all(|(i, insn)| {
        let c = insn.code;
        let backward = c == opcode::JMP | opcode::JA
            && (i as u32).wrapping_add(1).wrapping_add(insn.k) as usize <= i;
        let mem_read = c == opcode::LD | opcode::MEM || c == opcode::LDX | opcode::MEM;
        let wide_shift =
            (c == opcode::ALU | opcode::LSH || c == opcode::ALU | opcode::RSH) && insn.k >= 32;
        !(backward || mem_read || wide_shift)
    })
}

/// Whether libpcap's own `bpf_validate` accepts `insns`: the reference
/// [`Program::new`] is tested against (it accepts a subset: see there).
pub fn bpf_validate(insns: &[Insn]) -> bool {
    let Ok(len) = c_int::try_from(insns.len()) else {
        return false;
    };
    // SAFETY: bpf_validate reads `len` instructions from the pointer.
    unsafe { c_bpf_validate(insns.as_ptr(), len) != 0 }
}
