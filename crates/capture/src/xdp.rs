//! AF_XDP receive: an XDP program on one interface queue redirects every
//! frame into this process's memory (the UMEM) through an `XSKMAP`, and
//! the frames are read from a ring of descriptors shared with the kernel.
//!
//! Kernel ABI: `linux/if_xdp.h`, `linux/bpf.h`, `linux/if_link.h`, and
//! Documentation/networking/af_xdp.rst. No libbpf or libxdp: the program
//! is the six instructions libbpf's default AF_XDP program compiles to
//! (`bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS)`), loaded with
//! `bpf(2)` and attached with a BPF link, which the kernel detaches when
//! its descriptor closes, so a crash leaves nothing on the interface.
//!
//! It is here as the alternative `kansoku capture`'s TPACKET_V3 ring was
//! measured against (`kansoku bench capture`'s `xdp-generic` and
//! `xdp-native` configurations; ARCHITECTURE.md, "Reading the ring"):
//!
//! - **Generic mode** runs the program on the kernel's receive path, after
//!   the socket buffer is built, where a packet socket's tap would run;
//!   **native mode** runs it in the driver before any socket buffer exists
//!   (for veth, in its NAPI poll).
//! - Frames are *copied* into the UMEM unless the driver supports zero
//!   copy (veth does not; [`XdpSocket::zero_copy`] says which it got).
//! - A redirected frame never reaches the stack, nor a packet socket on the
//!   same interface; a frame the socket has no room for is dropped and
//!   counted in [`XdpStats`] (XDP_STATISTICS), not passed on.
//! - Descriptors carry no timestamp; [`XdpSocket::receive`] stamps a batch
//!   with the time it was taken from the ring.
//!
//! Setup order (the kernel's, and libbpf's `xsk_socket__create`): UMEM,
//! ring sizes, ring mappings, fill ring filled, bind, map slot, program
//! attached. Descriptors are checked against the UMEM before a frame is
//! read: a bad one is skipped and counted, never followed.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::poll::wait_readable;
use crate::sys::{getsockopt, last_error, setsockopt};

/// Where the XDP program runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XdpMode {
    /// On the kernel's receive path, for any driver (`xdpgeneric`).
    Generic,
    /// In the driver, before a socket buffer exists (`xdpdrv`).
    Native,
}

impl XdpMode {
    pub fn name(self) -> &'static str {
        match self {
            XdpMode::Generic => "generic",
            XdpMode::Native => "native",
        }
    }

    /// `XDP_FLAGS_SKB_MODE` or `XDP_FLAGS_DRV_MODE`.
    fn link_flags(self) -> u32 {
        match self {
            XdpMode::Generic => 1 << 1,
            XdpMode::Native => 1 << 2,
        }
    }
}

/// An AF_XDP socket's settings.
#[derive(Clone, Debug)]
pub struct XdpConfig {
    pub interface: String,
    /// The receive queue (veth has one, 0).
    pub queue: u32,
    pub mode: XdpMode,
    /// Bytes of UMEM for frames in flight: rounded down to a power of two
    /// count of [`XdpConfig::frame_size`] frames, at least 64.
    pub umem_bytes: usize,
    /// Bytes per UMEM frame, 2048 or 4096: the longest frame received is
    /// this less 256 bytes of XDP headroom (1792 or 3840).
    pub frame_size: u32,
}

impl Default for XdpConfig {
    fn default() -> Self {
        XdpConfig {
            interface: String::new(),
            queue: 0,
            mode: XdpMode::Generic,
            umem_bytes: 8 << 20,
            frame_size: 2048,
        }
    }
}

impl XdpConfig {
    /// Frames in the UMEM (and entries of each ring).
    pub fn frames(&self) -> io::Result<u32> {
        if self.frame_size != 2048 && self.frame_size != 4096 {
            return Err(invalid(format!(
                "AF_XDP frame size {}: 2048 or 4096",
                self.frame_size
            )));
        }
        let n = self.umem_bytes / self.frame_size as usize;
        if n < 64 {
            return Err(invalid(format!(
                "AF_XDP memory of {} bytes: at least 64 frames of {}",
                self.umem_bytes, self.frame_size
            )));
        }
        let n = 1usize << n.ilog2();
        u32::try_from(n.min(1 << 20)).map_err(|_| invalid("AF_XDP memory too large".into()))
    }

    /// The longest frame a UMEM frame holds.
    pub fn max_frame(&self) -> u32 {
        self.frame_size - XDP_PACKET_HEADROOM
    }
}

/// The kernel's counters for one socket (`XDP_STATISTICS`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XdpStats {
    /// Frames dropped: no free UMEM frame (the fill ring was empty), or a
    /// frame longer than a UMEM frame.
    pub rx_dropped: u64,
    /// Frames dropped because the receive ring was full.
    pub rx_ring_full: u64,
    /// Of `rx_dropped`, those for want of a free frame.
    pub rx_fill_ring_empty: u64,
    /// Descriptors the kernel found invalid.
    pub rx_invalid_descs: u64,
}

impl XdpStats {
    /// Frames the socket lost, all causes.
    pub fn lost(&self) -> u64 {
        self.rx_dropped + self.rx_ring_full
    }
}

/// Room the kernel keeps before each frame in a UMEM frame
/// (`XDP_PACKET_HEADROOM`).
const XDP_PACKET_HEADROOM: u32 = 256;

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// A shared mapping, unmapped when dropped.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory; the rings in it are accessed
// through atomics and volatile reads by the one owner of the socket.
unsafe impl Send for Mapping {}

impl Mapping {
    /// `len` bytes of anonymous memory (the UMEM), page-aligned.
    fn anonymous(len: usize) -> io::Result<Mapping> {
        // SAFETY: a fresh private mapping; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(last_error("mmap of the AF_XDP memory"));
        }
        Ok(Mapping { ptr: p.cast(), len })
    }

    /// One of the socket's rings, at page offset `pgoff`.
    fn ring(fd: &OwnedFd, len: usize, pgoff: libc::off_t, what: &str) -> io::Result<Mapping> {
        // SAFETY: maps a ring the kernel allocated for this socket; the
        // result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                pgoff,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(last_error(&format!("mmap of the AF_XDP {what} ring")));
        }
        Ok(Mapping { ptr: p.cast(), len })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what was mapped; nothing refers to it
        // once its owner is dropped.
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

/// One single-producer single-consumer ring shared with the kernel: the
/// producer and consumer indexes (free-running, masked by `size - 1`) and
/// the entries. The kernel stores its index with release order after
/// writing entries; this side loads it with acquire order before reading
/// them, and the same the other way (`net/xdp/xsk_queue.h`).
struct Ring {
    map: Mapping,
    producer: usize,
    consumer: usize,
    flags: usize,
    desc: usize,
    size: u32,
}

impl Ring {
    fn new(map: Mapping, off: &libc::xdp_ring_offset, size: u32, entry: usize) -> io::Result<Ring> {
        let fits = |o: u64, n: usize, align: usize| {
            usize::try_from(o).is_ok_and(|o| o.is_multiple_of(align) && o + n <= map.len)
        };
        let desc_bytes = size as usize * entry;
        if !(fits(off.producer, 4, 4)
            && fits(off.consumer, 4, 4)
            && fits(off.flags, 4, 4)
            && fits(off.desc, desc_bytes, 8))
        {
            return Err(io::Error::other(
                "AF_XDP ring offsets from the kernel do not fit the ring",
            ));
        }
        Ok(Ring {
            producer: off.producer as usize,
            consumer: off.consumer as usize,
            flags: off.flags as usize,
            desc: off.desc as usize,
            map,
            size,
        })
    }

    fn index(&self, at: usize) -> &AtomicU32 {
        // SAFETY: `at` was checked to lie in the mapping with 4-byte
        // alignment; the kernel updates the word concurrently, so it is
        // only ever accessed atomically.
        unsafe { &*self.map.ptr.add(at).cast::<AtomicU32>() }
    }

    fn producer(&self) -> &AtomicU32 {
        self.index(self.producer)
    }

    fn consumer(&self) -> &AtomicU32 {
        self.index(self.consumer)
    }

    fn flags(&self) -> &AtomicU32 {
        self.index(self.flags)
    }

    /// Entry `i` (masked) as a pointer to `T`.
    fn entry<T>(&self, i: u32) -> *mut T {
        let slot = (i & (self.size - 1)) as usize;
        // SAFETY: the descriptor array was checked to hold `size` entries
        // of this size, 8-byte aligned.
        unsafe { self.map.ptr.add(self.desc).cast::<T>().add(slot) }
    }
}

/// `XDP_RING_NEED_WAKEUP` in a ring's flags.
const XDP_RING_NEED_WAKEUP: u32 = 1;

/// bpf(2) commands and types used (`linux/bpf.h`).
const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_LINK_DETACH: libc::c_long = 34;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;

/// `bpf(cmd, attr)`: a new descriptor (or 0 for commands that return none).
fn bpf(cmd: libc::c_long, attr: &mut [u64; 18], what: &str) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a zeroed `union bpf_attr` (144 bytes) with the
    // command's fields set; pointers in it point to live memory of the
    // caller for the duration of the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr.as_mut_ptr(),
            std::mem::size_of_val(attr) as libc::c_uint,
        )
    };
    if r < 0 {
        return Err(last_error(what));
    }
    Ok(r)
}

fn bpf_fd(cmd: libc::c_long, attr: &mut [u64; 18], what: &str) -> io::Result<OwnedFd> {
    let fd = bpf(cmd, attr, what)?;
    let fd = i32::try_from(fd).map_err(|_| io::Error::other(format!("{what}: bad descriptor")))?;
    // SAFETY: the kernel returned a new descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Two u32 fields as one word of `bpf_attr` (little-endian layout).
fn pair(lo: u32, hi: u32) -> u64 {
    u64::from(lo) | (u64::from(hi) << 32)
}

/// The XSKMAP: queue index to socket, `entries` slots.
fn create_xskmap(entries: u32) -> io::Result<OwnedFd> {
    let mut a = [0u64; 18];
    a[0] = pair(BPF_MAP_TYPE_XSKMAP, 4); // map_type, key_size
    a[1] = pair(4, entries); // value_size, max_entries
    bpf_fd(BPF_MAP_CREATE, &mut a, "bpf(BPF_MAP_CREATE XSKMAP)")
}

/// The program: `return bpf_redirect_map(&map, ctx->rx_queue_index,
/// XDP_PASS);` (libbpf's default AF_XDP program since Linux 5.3: a queue
/// without a socket passes its frames on to the stack).
fn program(map: BorrowedFd<'_>) -> [u64; 6] {
    let insn = |code: u8, regs: u8, off: i16, imm: i32| {
        u64::from(code)
            | (u64::from(regs) << 8)
            | (u64::from(off as u16) << 16)
            | (u64::from(imm as u32) << 32)
    };
    [
        insn(0x61, 0x12, 16, 0), // r2 = *(u32 *)(r1 + 16): rx_queue_index
        insn(0x18, 0x11, 0, map.as_raw_fd()), // r1 = map (ld_imm64, BPF_PSEUDO_MAP_FD)
        0,                       // ... its upper half
        insn(0xb7, 0x03, 0, 2),  // r3 = XDP_PASS
        insn(0x85, 0x00, 0, 51), // call bpf_redirect_map
        insn(0x95, 0x00, 0, 0),  // exit
    ]
}

fn load_program(map: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    let insns = program(map);
    let license = b"GPL\0";
    let mut log = vec![0u8; 4096];
    let mut a = [0u64; 18];
    a[0] = pair(BPF_PROG_TYPE_XDP, insns.len() as u32); // prog_type, insn_cnt
    a[1] = insns.as_ptr() as u64;
    a[2] = license.as_ptr() as u64;
    a[3] = pair(1, log.len() as u32); // log_level, log_size
    a[4] = log.as_mut_ptr() as u64;
    let name = b"kansoku_xsk";
    let mut n = [0u8; 16];
    n[..name.len()].copy_from_slice(name);
    a[6] = u64::from_le_bytes(n[..8].try_into().unwrap_or_default());
    a[7] = u64::from_le_bytes(n[8..].try_into().unwrap_or_default());
    bpf_fd(BPF_PROG_LOAD, &mut a, "bpf(BPF_PROG_LOAD)").map_err(|e| {
        let end = log.iter().position(|b| *b == 0).unwrap_or(log.len());
        let log = String::from_utf8_lossy(&log[..end]);
        io::Error::new(e.kind(), format!("{e} (verifier: {})", log.trim()))
    })
}

/// Whether this kernel makes AF_XDP sockets (`CONFIG_XDP_SOCKETS`), and
/// this process may: why not, if it cannot.
pub fn available() -> Result<(), String> {
    crate::sys::socket(libc::AF_XDP, libc::SOCK_RAW, 0, "AF_XDP")
        .map(drop)
        .map_err(|e| e.to_string())
}

/// An AF_XDP socket receiving one interface queue, with its program
/// attached; dropping it detaches the program and frees the memory.
pub struct XdpSocket {
    // Dropped in this order: the link (the program leaves the interface),
    // the program and map, the rings, the socket, then the UMEM.
    link: OwnedFd,
    _program: OwnedFd,
    _map: OwnedFd,
    rx: Ring,
    fill: Ring,
    _completion: Ring,
    fd: OwnedFd,
    umem: Mapping,
    frame_size: u32,
    /// This side's copies of the indexes it owns.
    rx_consumer: u32,
    fill_producer: u32,
    /// Frames to give back to the fill ring.
    returned: Vec<u64>,
    /// Descriptors skipped as outside the UMEM.
    bad_descs: u64,
    zero_copy: bool,
    mode: XdpMode,
}

impl XdpSocket {
    /// Opens the socket, its memory and rings, binds it to the queue, and
    /// attaches the program in `cfg.mode`. Needs root (CAP_NET_ADMIN,
    /// CAP_BPF, CAP_NET_RAW).
    pub fn open(cfg: &XdpConfig) -> io::Result<XdpSocket> {
        let frames = cfg.frames()?;
        let ifindex = crate::sys::interface_index(&cfg.interface)?;
        let fd = crate::sys::socket(libc::AF_XDP, libc::SOCK_RAW, 0, "AF_XDP")?;
        let umem = Mapping::anonymous(frames as usize * cfg.frame_size as usize)?;
        let reg = libc::xdp_umem_reg {
            addr: umem.ptr as u64,
            len: umem.len as u64,
            chunk_size: cfg.frame_size,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        setsockopt(&fd, libc::SOL_XDP, libc::XDP_UMEM_REG, &reg, "XDP_UMEM_REG")?;
        let entries = frames as libc::c_int;
        // The fill and completion rings are needed even to receive only.
        for (opt, what) in [
            (libc::XDP_UMEM_FILL_RING, "XDP_UMEM_FILL_RING"),
            (libc::XDP_UMEM_COMPLETION_RING, "XDP_UMEM_COMPLETION_RING"),
            (libc::XDP_RX_RING, "XDP_RX_RING"),
        ] {
            setsockopt(&fd, libc::SOL_XDP, opt, &entries, what)?;
        }
        // SAFETY: xdp_mmap_offsets is plain old data; all-zero is valid.
        let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
        let len = getsockopt(
            &fd,
            libc::SOL_XDP,
            libc::XDP_MMAP_OFFSETS,
            &mut off,
            "XDP_MMAP_OFFSETS",
        )?;
        if len != std::mem::size_of_val(&off) {
            return Err(io::Error::other(
                "XDP_MMAP_OFFSETS: a kernel older than 5.4 (no ring flags)",
            ));
        }
        // Every ring is mapped before bind (Linux 6.1 refuses it after).
        let desc = std::mem::size_of::<libc::xdp_desc>();
        let addr = std::mem::size_of::<u64>();
        let map = |o: &libc::xdp_ring_offset, esize: usize, pgoff: libc::off_t, what: &str| {
            let len = o.desc as usize + frames as usize * esize;
            Ring::new(Mapping::ring(&fd, len, pgoff, what)?, o, frames, esize)
        };
        let rx = map(&off.rx, desc, libc::XDP_PGOFF_RX_RING, "receive")?;
        let fill = map(
            &off.fr,
            addr,
            libc::XDP_UMEM_PGOFF_FILL_RING as libc::off_t,
            "fill",
        )?;
        let completion = map(
            &off.cr,
            addr,
            libc::XDP_UMEM_PGOFF_COMPLETION_RING as libc::off_t,
            "completion",
        )?;
        // Every frame goes to the fill ring: the kernel takes one for each
        // frame it receives, and the reader gives it back once read.
        for i in 0..frames {
            // SAFETY: slot `i` of the fill ring, which nothing else writes
            // before the producer index below publishes it.
            unsafe {
                fill.entry::<u64>(i)
                    .write_volatile(u64::from(i) * u64::from(cfg.frame_size));
            }
        }
        fill.producer().store(frames, Ordering::Release);

        let sxdp = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: 0, // zero copy where the driver can, else copy
            sxdp_ifindex: ifindex,
            sxdp_queue_id: cfg.queue,
            sxdp_shared_umem_fd: 0,
        };
        bind_retrying(&fd, &sxdp, &cfg.interface, cfg.queue)?;
        let zero_copy = xdp_options(&fd)? & 1 != 0;

        let map = create_xskmap(cfg.queue + 1)?;
        let key = cfg.queue;
        let value = fd.as_raw_fd() as u32;
        let mut a = [0u64; 18];
        a[0] = u64::from(map.as_raw_fd() as u32);
        a[1] = &key as *const u32 as u64;
        a[2] = &value as *const u32 as u64;
        bpf(
            BPF_MAP_UPDATE_ELEM,
            &mut a,
            "bpf(BPF_MAP_UPDATE_ELEM XSKMAP)",
        )?;
        let program = load_program(map.as_fd())?;
        let mut a = [0u64; 18];
        a[0] = pair(program.as_raw_fd() as u32, ifindex); // prog_fd, target_ifindex
        a[1] = pair(BPF_XDP, cfg.mode.link_flags()); // attach_type, flags
        let link = bpf_fd(BPF_LINK_CREATE, &mut a, "bpf(BPF_LINK_CREATE)").map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "attaching the XDP program to {} in {} mode: {e}",
                    cfg.interface,
                    cfg.mode.name()
                ),
            )
        })?;
        Ok(XdpSocket {
            link,
            _program: program,
            _map: map,
            rx,
            fill,
            _completion: completion,
            fd,
            umem,
            frame_size: cfg.frame_size,
            rx_consumer: 0,
            fill_producer: frames,
            returned: Vec::with_capacity(frames as usize),
            bad_descs: 0,
            zero_copy,
            mode: cfg.mode,
        })
    }

    /// Whether the driver gave zero copy (else frames are copied in).
    pub fn zero_copy(&self) -> bool {
        self.zero_copy
    }

    pub fn mode(&self) -> XdpMode {
        self.mode
    }

    /// Descriptors skipped for pointing outside the memory (never seen
    /// from a working kernel).
    pub fn bad_descriptors(&self) -> u64 {
        self.bad_descs
    }

    /// Waits up to `timeout` for frames, then calls `each(frame, ts_ns)`
    /// for every frame waiting, at most `max`, in order, and gives their
    /// memory back to the kernel. `ts_ns` is the time (Unix epoch,
    /// nanoseconds) the batch was taken. Returns how many frames were read;
    /// an error of `each` ends the batch there, its frames still returned.
    pub fn receive<E>(
        &mut self,
        timeout: Duration,
        max: usize,
        mut each: impl FnMut(&[u8], u64) -> Result<(), E>,
    ) -> io::Result<Result<usize, E>> {
        let mut ready = self.waiting();
        if ready == 0 {
            let deadline = Instant::now() + timeout;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                match wait_readable(&[self.fd.as_fd()], left) {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(Ok(0)),
                    Err(e) => return Err(e),
                }
                ready = self.waiting();
                if ready > 0 || left.is_zero() {
                    break;
                }
            }
            if ready == 0 {
                return Ok(Ok(0));
            }
        }
        let n = (ready as usize).min(max.max(1)) as u32;
        let ts = wall_clock_ns();
        let mut failed = None;
        let mut read = 0;
        for k in 0..n {
            // SAFETY: slots between the consumer and the producer index
            // the kernel published are written and not touched again until
            // the consumer index moves past them.
            let d = unsafe {
                self.rx
                    .entry::<libc::xdp_desc>(self.rx_consumer.wrapping_add(k))
                    .read_volatile()
            };
            self.returned.push(d.addr & !u64::from(self.frame_size - 1));
            read += 1;
            match self.frame(&d) {
                None => self.bad_descs += 1,
                Some(frame) => {
                    if let Err(e) = each(frame, ts) {
                        failed = Some(e);
                        break;
                    }
                }
            }
        }
        self.rx_consumer = self.rx_consumer.wrapping_add(read as u32);
        self.rx
            .consumer()
            .store(self.rx_consumer, Ordering::Release);
        self.refill();
        Ok(match failed {
            Some(e) => Err(e),
            None => Ok(read),
        })
    }

    /// Frames the kernel has put on the receive ring and not yet read.
    fn waiting(&self) -> u32 {
        self.rx
            .producer()
            .load(Ordering::Acquire)
            .wrapping_sub(self.rx_consumer)
    }

    /// The frame a descriptor names, if it lies inside the memory.
    fn frame(&self, d: &libc::xdp_desc) -> Option<&[u8]> {
        let start = usize::try_from(d.addr).ok()?;
        let end = start.checked_add(d.len as usize)?;
        if end > self.umem.len
            || d.len as u64 + (d.addr & u64::from(self.frame_size - 1)) > u64::from(self.frame_size)
        {
            return None;
        }
        // SAFETY: the range lies inside the UMEM mapping, in a frame the
        // kernel handed over and gets back only in `refill`, after the
        // borrow ends.
        Some(unsafe { std::slice::from_raw_parts(self.umem.ptr.add(start), d.len as usize) })
    }

    /// Gives the frames read back to the fill ring, and wakes the kernel
    /// if it asks to be (zero-copy drivers only).
    fn refill(&mut self) {
        if self.returned.is_empty() {
            return;
        }
        let size = self.fill.size;
        let free = size
            - self
                .fill_producer
                .wrapping_sub(self.fill.consumer().load(Ordering::Acquire));
        // Every frame is in exactly one place, so there is always room.
        let n = (free as usize).min(self.returned.len());
        for (k, addr) in self.returned.drain(..n).enumerate() {
            // SAFETY: a free slot of the fill ring (between the kernel's
            // consumer index and this side's producer index plus `free`).
            unsafe {
                self.fill
                    .entry::<u64>(self.fill_producer.wrapping_add(k as u32))
                    .write_volatile(addr);
            }
        }
        self.fill_producer = self.fill_producer.wrapping_add(n as u32);
        self.fill
            .producer()
            .store(self.fill_producer, Ordering::Release);
        if self.fill.flags().load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP != 0 {
            // SAFETY: a zero-length non-blocking receive, the kernel's
            // documented wakeup; its result does not matter.
            unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    std::ptr::null_mut(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                );
            }
        }
    }

    /// The kernel's counters for this socket.
    pub fn statistics(&self) -> io::Result<XdpStats> {
        // SAFETY: xdp_statistics is plain old data; all-zero is valid.
        let mut s: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        getsockopt(
            &self.fd,
            libc::SOL_XDP,
            libc::XDP_STATISTICS,
            &mut s,
            "XDP_STATISTICS",
        )?;
        Ok(XdpStats {
            rx_dropped: s.rx_dropped,
            rx_ring_full: s.rx_ring_full,
            rx_fill_ring_empty: s.rx_fill_ring_empty_descs,
            rx_invalid_descs: s.rx_invalid_descs,
        })
    }

    /// Takes the program off the interface: from here on frames go to the
    /// stack, and what is on the ring is all there will be.
    pub fn detach(&mut self) -> io::Result<()> {
        // A link detaches its program when asked (BPF_LINK_DETACH), and
        // its descriptor stays open until the socket is dropped.
        let mut a = [0u64; 18];
        a[0] = u64::from(self.link.as_raw_fd() as u32);
        bpf(BPF_LINK_DETACH, &mut a, "bpf(BPF_LINK_DETACH)").map(|_| ())
    }
}

/// Binds, retrying for a while on EBUSY: a socket just closed on the same
/// queue is torn down by a kernel worker a little later.
fn bind_retrying(
    fd: &OwnedFd,
    sxdp: &libc::sockaddr_xdp,
    interface: &str,
    queue: u32,
) -> io::Result<()> {
    let mut tries = 0;
    loop {
        // SAFETY: `sxdp` is a valid sockaddr_xdp of the size passed.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (sxdp as *const libc::sockaddr_xdp).cast(),
                std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
            )
        };
        if r == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EBUSY) && tries < 30 {
            tries += 1;
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        return Err(io::Error::new(
            e.kind(),
            format!("binding an AF_XDP socket to {interface} queue {queue}: {e}"),
        ));
    }
}

/// `XDP_OPTIONS`: bit 0 set when the socket runs in zero-copy mode.
fn xdp_options(fd: &OwnedFd) -> io::Result<u32> {
    let mut v = 0u32;
    getsockopt(fd, libc::SOL_XDP, libc::XDP_OPTIONS, &mut v, "XDP_OPTIONS")?;
    Ok(v)
}

/// The wall clock, nanoseconds since the Unix epoch.
fn wall_clock_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_a_power_of_two_of_frames_within_bounds() {
        let c = |umem_bytes, frame_size| XdpConfig {
            umem_bytes,
            frame_size,
            ..XdpConfig::default()
        };
        assert_eq!(c(8 << 20, 2048).frames().unwrap(), 4096);
        assert_eq!(c((8 << 20) + 4096, 2048).frames().unwrap(), 4096);
        assert_eq!(c(12 << 20, 4096).frames().unwrap(), 2048);
        assert!(c(64 * 2048 - 1, 2048).frames().is_err());
        assert!(c(1 << 20, 1024).frames().is_err());
        assert_eq!(c(8 << 20, 2048).max_frame(), 1792);
    }

    #[test]
    fn the_program_reads_the_queue_and_redirects_through_the_map() {
        // SAFETY: descriptor 7 is only borrowed to build instructions.
        let fd = unsafe { BorrowedFd::borrow_raw(7) };
        let p = program(fd);
        let bytes: Vec<u8> = p.iter().flat_map(|w| w.to_le_bytes()).collect();
        assert_eq!(&bytes[..8], &[0x61, 0x12, 0x10, 0, 0, 0, 0, 0]);
        assert_eq!(&bytes[8..16], &[0x18, 0x11, 0, 0, 7, 0, 0, 0]);
        assert_eq!(&bytes[16..24], &[0; 8]);
        assert_eq!(&bytes[24..32], &[0xb7, 0x03, 0, 0, 2, 0, 0, 0]);
        assert_eq!(&bytes[32..40], &[0x85, 0, 0, 0, 51, 0, 0, 0]);
        assert_eq!(&bytes[40..48], &[0x95, 0, 0, 0, 0, 0, 0, 0]);
    }
}
