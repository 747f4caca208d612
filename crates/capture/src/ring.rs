//! An AF_PACKET socket with a TPACKET_V3 receive ring.
//!
//! Kernel ABI: `linux/if_packet.h` and Documentation/networking/packet_mmap.rst.
//! The ring is `block_nr` blocks of `block_size` bytes shared with the kernel.
//! The kernel fills a block with packets and hands it over by setting
//! `TP_STATUS_USER` in the block's status word (or when `retire_blk_tov`
//! milliseconds pass with a partly filled block); user space reads the
//! packets and gives the block back by writing `TP_STATUS_KERNEL`. Those two
//! steps are [`TpacketRing::acquire_block`] and [`OwnedBlock`]'s drop, named
//! after libpcap's `packet_mmap_acquire`/`packet_mmap_release`.
//!
//! An [`OwnedBlock`] shares the ring's memory, so it can be read on another
//! thread and given back from there once its packets are written: the
//! consumer reads packets where the kernel put them, with no copy (the
//! pipeline's lane decides how many blocks it may hold). The reader takes
//! blocks in ring order and never a block it still holds.
//!
//! Block and packet headers are read from the mapped bytes at the offsets the
//! kernel ABI fixes (below) through checked slices, so a corrupt offset in a
//! block can only end that block's walk, never read outside it.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use wire::LinkType;

use crate::sys::{interface_index, last_error, setsockopt};

// linux/if_packet.h, linux/if_ether.h, linux/socket.h.
const SOL_PACKET: libc::c_int = 263;
const PACKET_RX_RING: libc::c_int = 5;
const PACKET_STATISTICS: libc::c_int = 6;
const PACKET_VERSION: libc::c_int = 10;
const PACKET_FANOUT: libc::c_int = 18;
const TPACKET_V3: libc::c_int = 2;
const ETH_P_ALL: u16 = 0x0003;
const PACKET_FANOUT_HASH: u32 = 0;
const PACKET_FANOUT_FLAG_DEFRAG: u32 = 0x8000;

/// Block status: owned by the kernel.
const TP_STATUS_KERNEL: u32 = 0;
/// Block status: handed to user space.
const TP_STATUS_USER: u32 = 1;
/// Packet status: `tp_vlan_tci` holds a tag the kernel (or the NIC) removed.
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
/// Packet status: `tp_vlan_tpid` holds that tag's TPID.
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;

/// `struct tpacket_block_desc`: version u32, offset_to_priv u32, then
/// `struct tpacket_hdr_v1`: block_status u32 @8, num_pkts u32 @12,
/// offset_to_first_pkt u32 @16, blk_len u32 @20, seq_num u64 @24,
/// ts_first_pkt @32, ts_last_pkt @40.
mod block {
    pub const STATUS: usize = 8;
    pub const NUM_PKTS: usize = 12;
    pub const OFFSET_TO_FIRST_PKT: usize = 16;
    pub const BLK_LEN: usize = 20;
    pub const HEADER_LEN: usize = 48;
}

/// `struct tpacket3_hdr`: tp_next_offset u32 @0, tp_sec u32 @4, tp_nsec u32
/// @8, tp_snaplen u32 @12, tp_len u32 @16, tp_status u32 @20, tp_mac u16 @24,
/// tp_net u16 @26, then `hv1`: tp_rxhash u32 @28, tp_vlan_tci u32 @32,
/// tp_vlan_tpid u16 @36.
mod pkt {
    pub const NEXT_OFFSET: usize = 0;
    pub const SEC: usize = 4;
    pub const NSEC: usize = 8;
    pub const SNAPLEN: usize = 12;
    pub const LEN: usize = 16;
    pub const STATUS: usize = 20;
    pub const MAC: usize = 24;
    pub const VLAN_TCI: usize = 32;
    pub const VLAN_TPID: usize = 36;
    pub const HEADER_LEN: usize = 48;
}

/// How to open a ring.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingConfig {
    /// Interface name (`lo`, `eth0`, a veth).
    pub interface: String,
    /// Bytes of each packet to keep (the kernel cuts the rest, through a
    /// one-instruction BPF program, as libpcap does).
    pub snaplen: u32,
    /// Ring size in bytes (rounded down to whole blocks, at least two).
    pub ring_bytes: usize,
    /// Block size in bytes: a power of two, a multiple of the page size.
    pub block_size: usize,
    /// Milliseconds after which the kernel hands over a partly filled block.
    pub block_timeout_ms: u32,
    /// Join this fanout group (hash mode, defragmented), if any.
    pub fanout_group: Option<u16>,
    /// A classic BPF program the kernel runs on every packet before it
    /// reaches the ring (a tcpdump expression as libpcap compiles it for a
    /// live interface, `bpf::libpcap::compile_live`): what it rejects is
    /// neither copied nor counted, and its return value is the snap length.
    /// `None`: keep every packet, cut at `snaplen`.
    pub filter: Option<Vec<bpf::Insn>>,
}

impl Default for RingConfig {
    fn default() -> Self {
        RingConfig {
            interface: String::new(),
            snaplen: 262_144,
            ring_bytes: 32 << 20,
            block_size: 1 << 20,
            block_timeout_ms: 10,
            fanout_group: None,
            filter: None,
        }
    }
}

impl RingConfig {
    /// The block size kansoku picks for a ring of `ring_bytes`: a sixteenth
    /// of the ring, a power of two from 256 KiB to 1 MiB. Many blocks keep
    /// most of the ring open to the kernel while the ring thread copies one
    /// out (with two blocks, half the ring is closed to it then, and a burst
    /// drops packets that libpcap's eight 256 KiB blocks of a 2 MiB ring
    /// take: `kansoku bench capture -B 2`, bench/capture-results.md). 256 KiB
    /// is libpcap's TPACKET_V3 block and holds a 64 KiB packet from `lo`
    /// whole; 1 MiB blocks, once the ring is large, cost fewer hand-overs.
    pub fn auto_block_size(ring_bytes: usize) -> usize {
        let sixteenth = (ring_bytes / 16).max(1);
        // The largest power of two not above a sixteenth, within the range.
        let p = 1usize << (usize::BITS - 1 - sixteenth.leading_zeros());
        p.clamp(256 << 10, 1 << 20)
    }

    /// Checks the settings before any socket is opened.
    pub fn validate(&self) -> io::Result<()> {
        let bad = |m: String| Err(io::Error::new(io::ErrorKind::InvalidInput, m));
        if self.interface.is_empty() || self.interface.len() >= libc::IFNAMSIZ {
            return bad(format!("bad interface name '{}'", self.interface));
        }
        if !self.block_size.is_power_of_two() || !(4096..=(64 << 20)).contains(&self.block_size) {
            return bad(format!(
                "ring block size {} must be a power of two from 4 KiB to 64 MiB",
                self.block_size
            ));
        }
        if self.ring_bytes / self.block_size < 2 {
            return bad(format!(
                "ring of {} bytes holds fewer than two {}-byte blocks",
                self.ring_bytes, self.block_size
            ));
        }
        if self.snaplen == 0 {
            return bad("snaplen must be at least 1".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod config_tests {
    use super::RingConfig;

    #[test]
    fn automatic_blocks_are_a_sixteenth_of_the_ring_within_bounds() {
        let kib = |r: usize| RingConfig::auto_block_size(r) >> 10;
        // A small ring gets libpcap's 256 KiB blocks (8 of them in 2 MiB).
        assert_eq!(kib(2 << 20), 256);
        assert_eq!(kib(4 << 20), 256);
        assert_eq!(kib(8 << 20), 512);
        assert_eq!(kib(16 << 20), 1024);
        // A large ring keeps 1 MiB blocks.
        assert_eq!(kib(32 << 20), 1024);
        assert_eq!(kib(1 << 30), 1024);
        // Not a power of two: rounded down.
        assert_eq!(kib(12 << 20), 512);
    }
}

/// Kernel counters of a ring (`struct tpacket_stats_v3`), summed over reads
/// (each read resets the kernel's counters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelStats {
    /// Packets the kernel passed to this socket, dropped ones included.
    pub packets: u64,
    /// Packets the kernel dropped because the ring was full.
    pub drops: u64,
    /// Times the ring was frozen (every block owned by user space).
    pub freeze_count: u64,
}

/// One packet in a ring block, borrowed from the mapped memory.
#[derive(Clone, Copy, Debug)]
pub struct RingPacket<'a> {
    /// Timestamp, nanoseconds since the epoch.
    pub ts_ns: u64,
    /// Length on the wire (the tag the kernel removed not included).
    pub orig_len: u32,
    /// The captured bytes from the link-layer header on.
    pub data: &'a [u8],
    /// A VLAN tag the kernel removed from the frame: (TPID, TCI).
    pub vlan: Option<(u16, u16)>,
}

/// An open AF_PACKET socket with its mapped TPACKET_V3 ring.
pub struct TpacketRing {
    fd: OwnedFd,
    mem: Arc<Memory>,
    next_block: usize,
    link_type: LinkType,
    stats: KernelStats,
}

/// Where a ring's bytes live.
enum Backing {
    /// The kernel's ring, mapped; unmapped when the last user is gone.
    Mapped,
    /// Heap memory laid out as the kernel lays out a ring ([`SimRing`]).
    Heap(#[allow(dead_code)] Vec<u64>),
}

/// A ring's memory, shared by the ring and every block user space holds
/// ([`OwnedBlock`]), so that a block can be read on another thread, and
/// outlive the ring, without a copy.
///
/// The kernel and user space own each block in turn: the kernel writes a
/// block only while its status word says `TP_STATUS_KERNEL`, user space
/// reads it only from the moment the status says `TP_STATUS_USER` until it
/// writes `TP_STATUS_KERNEL` back. `held` marks the blocks user space holds,
/// so that the reader, coming round the ring, never takes a block it
/// already holds (its status still says user).
struct Memory {
    base: *mut u8,
    len: usize,
    block_size: usize,
    block_nr: usize,
    held: Box<[AtomicBool]>,
    backing: Backing,
}

// SAFETY: the memory is shared with the kernel, which follows the ownership
// protocol above; within the process, a block's bytes are read only by the
// one `OwnedBlock` holding it (shared `&[u8]` reads), the status words only
// atomically, and `SimRing` writes only blocks that no one holds and whose
// status gives them to the "kernel". Nothing else touches the bytes, so the
// value may be sent to and shared between threads.
unsafe impl Send for Memory {}
// SAFETY: as above.
unsafe impl Sync for Memory {}

impl Memory {
    fn new(base: *mut u8, block_size: usize, block_nr: usize, backing: Backing) -> Memory {
        Memory {
            base,
            len: block_size * block_nr,
            block_size,
            block_nr,
            held: (0..block_nr).map(|_| AtomicBool::new(false)).collect(),
            backing,
        }
    }

    /// The status word of block `i`, shared with the kernel.
    fn status(&self, i: usize) -> &AtomicU32 {
        assert!(i < self.block_nr);
        // SAFETY: block `i` lies inside the memory (i < block_nr), its
        // status word is 4-byte aligned (blocks are page aligned, or 8-byte
        // aligned on the heap, and the word is at offset 8), and the kernel
        // only ever accesses it atomically as well.
        unsafe { AtomicU32::from_ptr(self.base.add(i * self.block_size + block::STATUS).cast()) }
    }

    /// Whether block `i` is held by user space.
    fn is_held(&self, i: usize) -> bool {
        self.held[i].load(Ordering::Acquire)
    }

    /// Whether the status of block `i` gives it to user space.
    fn is_users(&self, i: usize) -> bool {
        self.status(i).load(Ordering::Acquire) & TP_STATUS_USER != 0
    }

    /// Whether the kernel has handed block `i` over and user space has not
    /// taken it yet.
    fn is_ready(&self, i: usize) -> bool {
        !self.is_held(i) && self.is_users(i)
    }

    /// How many blocks from `i` on, in ring order, are ready.
    fn ready_from(&self, i: usize) -> usize {
        (0..self.block_nr)
            .map(|k| (i + k) % self.block_nr)
            .take_while(|&b| self.is_ready(b))
            .count()
    }

    /// Takes block `i` for user space if it is ready.
    fn take(self: &Arc<Memory>, i: usize) -> Option<OwnedBlock> {
        if !self.is_ready(i) {
            return None;
        }
        self.held[i].store(true, Ordering::Relaxed);
        Some(OwnedBlock {
            mem: Arc::clone(self),
            index: i,
        })
    }
}

impl Drop for Memory {
    fn drop(&mut self) {
        if let Backing::Mapped = self.backing {
            // SAFETY: unmaps exactly the region mapped in `open`; every
            // block (the only thing that reads it) holds this memory alive,
            // so nothing refers to it any more.
            unsafe {
                libc::munmap(self.base.cast(), self.len);
            }
        }
    }
}

/// `ARPHRD_LOOPBACK`.
const ARPHRD_LOOPBACK: u16 = 772;

/// The classic BPF program a capture socket runs in the kernel: keep
/// `snaplen` bytes of each packet, or what the program `filter` says; on a
/// loopback device, first drop the
/// packets whose type is `PACKET_OUTGOING`. A packet sent on `lo` is seen
/// by packet sockets once as it leaves and once as it comes back in, so
/// without this every packet would be captured twice. libpcap drops the
/// outgoing copy too, but in user space, after the kernel has counted it;
/// rejected here in the kernel's filter, the copy is never counted in
/// PACKET_STATISTICS, so the kernel's count stays the count of packets.
fn capture_filter(
    snaplen: u32,
    loopback: bool,
    filter: Option<&[bpf::Insn]>,
) -> Vec<libc::sock_filter> {
    const BPF_LD_B_ABS: u16 = 0x30;
    const BPF_JEQ_K: u16 = 0x15;
    const BPF_RET_K: u16 = 0x06;
    // SKF_AD_OFF + SKF_AD_PKTTYPE: the ancillary load of skb->pkt_type.
    const PKTTYPE: u32 = 0xffff_f000 + 4;
    const PACKET_OUTGOING: u32 = 4;
    let ins = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let mut prog = Vec::with_capacity(4 + filter.map_or(0, <[_]>::len));
    if loopback {
        prog.push(ins(BPF_LD_B_ABS, 0, 0, PKTTYPE));
        // Outgoing: fall through to `ret #0`; else skip it. Jumps are
        // relative, so a program after these three runs unchanged.
        prog.push(ins(BPF_JEQ_K, 0, 1, PACKET_OUTGOING));
        prog.push(ins(BPF_RET_K, 0, 0, 0));
    }
    match filter {
        Some(f) => prog.extend(f.iter().map(|i| ins(i.code, i.jt, i.jf, i.k))),
        None => prog.push(ins(BPF_RET_K, 0, 0, snaplen)),
    }
    prog
}

/// Attaches the classic BPF program `filter` to the socket.
fn attach_filter(fd: &OwnedFd, filter: &[libc::sock_filter]) -> io::Result<()> {
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut libc::sock_filter,
    };
    setsockopt(
        fd,
        libc::SOL_SOCKET,
        libc::SO_ATTACH_FILTER,
        &prog,
        "SO_ATTACH_FILTER",
    )
}

fn attach_capture_filter(
    fd: &OwnedFd,
    snaplen: u32,
    loopback: bool,
    filter: Option<&[bpf::Insn]>,
) -> io::Result<()> {
    let prog = capture_filter(snaplen, loopback, filter);
    // The kernel's limit (BPF_MAXINSNS); said here, not as EINVAL.
    if prog.len() > 4096 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "the filter program has {} instructions; the kernel takes at most 4096",
                prog.len()
            ),
        ));
    }
    attach_filter(fd, &prog)
}

/// Attaches the one-instruction classic BPF program `ret #keep`: the kernel
/// keeps `keep` bytes of each packet (0 drops every packet before it is
/// counted or queued).
fn attach_return_filter(fd: &OwnedFd, keep: u32) -> io::Result<()> {
    attach_filter(fd, &capture_filter(keep, false, None))
}

/// The link type of `interface`, from its ARPHRD hardware type
/// (SIOCGIFHWADDR, which, unlike sysfs, answers for the caller's network
/// namespace), and whether it is a loopback device.
fn interface_link_type(fd: &OwnedFd, interface: &str) -> io::Result<(LinkType, bool)> {
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    // The name was checked to be shorter than IFNAMSIZ, so a NUL follows it.
    for (d, s) in req.ifr_name.iter_mut().zip(interface.as_bytes()) {
        *d = *s as libc::c_char;
    }
    // SAFETY: SIOCGIFHWADDR reads the name from and writes the hardware
    // address into the ifreq we pass, which lives across the call.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFHWADDR, &mut req) };
    if r != 0 {
        return Err(last_error(&format!("{interface}: no such interface")));
    }
    // SAFETY: after SIOCGIFHWADDR the union holds `ifru_hwaddr`.
    let family = unsafe { req.ifr_ifru.ifru_hwaddr.sa_family };
    match family {
        // ARPHRD_ETHER, and ARPHRD_LOOPBACK whose frames carry a zeroed Ethernet header.
        1 => Ok((LinkType::Ethernet, false)),
        ARPHRD_LOOPBACK => Ok((LinkType::Ethernet, true)),
        other => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("{interface}: hardware type {other} is not Ethernet-framed (only Ethernet and loopback are supported)"),
        )),
    }
}

impl TpacketRing {
    /// Opens the socket, sets up and maps the ring, and binds it to the
    /// interface. Needs CAP_NET_RAW.
    pub fn open(cfg: &RingConfig) -> io::Result<TpacketRing> {
        cfg.validate()?;
        let ifindex = interface_index(&cfg.interface)?;
        // Protocol 0: the socket receives nothing until `bind` names the
        // interface and ETH_P_ALL; created with ETH_P_ALL it would take
        // packets from every interface meanwhile (libpcap does the same).
        let fd = crate::sys::socket_raw(libc::AF_PACKET, libc::SOCK_RAW, 0).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("socket(AF_PACKET) (capturing needs root or CAP_NET_RAW): {e}"),
            )
        })?;
        let (link_type, loopback) = interface_link_type(&fd, &cfg.interface)?;
        setsockopt(
            &fd,
            SOL_PACKET,
            PACKET_VERSION,
            &TPACKET_V3,
            "PACKET_VERSION TPACKET_V3",
        )?;

        // Cut packets to the snap length in the kernel; on loopback also
        // drop the outgoing copy (every packet sent on `lo` comes back in).
        attach_capture_filter(&fd, cfg.snaplen, loopback, cfg.filter.as_deref())?;

        let block_nr = cfg.ring_bytes / cfg.block_size;
        // tpacket_req3: block size, block count, frame size, frame count,
        // retire_blk_tov, sizeof_priv, feature_req_word. V3 ignores frames
        // but checks that they tile the blocks.
        let frame_size: u32 = 2048;
        let req: [u32; 7] = [
            cfg.block_size as u32,
            block_nr as u32,
            frame_size,
            (cfg.block_size / frame_size as usize * block_nr) as u32,
            cfg.block_timeout_ms,
            0,
            0,
        ];
        setsockopt(&fd, SOL_PACKET, PACKET_RX_RING, &req, "PACKET_RX_RING")?;
        let map_len = cfg.block_size * block_nr;
        // SAFETY: maps the ring the kernel just allocated for this socket;
        // the result is checked against MAP_FAILED.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_LOCKED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        let map = if map == libc::MAP_FAILED {
            // MAP_LOCKED fails without the memlock limit to match; the ring
            // works unlocked, only a little less predictably.
            // SAFETY: as above.
            let m = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    map_len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED | libc::MAP_POPULATE,
                    fd.as_raw_fd(),
                    0,
                )
            };
            if m == libc::MAP_FAILED {
                return Err(last_error("mmap of the packet ring"));
            }
            m
        } else {
            map
        };
        let ring = TpacketRing {
            fd,
            mem: Arc::new(Memory::new(
                map.cast(),
                cfg.block_size,
                block_nr,
                Backing::Mapped,
            )),
            next_block: 0,
            link_type,
            stats: KernelStats::default(),
        };

        // SAFETY: sockaddr_ll is plain old data; all-zero is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_ALL.to_be();
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: `sll` is a valid sockaddr_ll of the size passed.
        let r = unsafe {
            libc::bind(
                ring.fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(last_error(&format!("bind to {}", cfg.interface)));
        }
        if let Some(group) = cfg.fanout_group {
            let arg: u32 =
                u32::from(group) | ((PACKET_FANOUT_HASH | PACKET_FANOUT_FLAG_DEFRAG) << 16);
            setsockopt(&ring.fd, SOL_PACKET, PACKET_FANOUT, &arg, "PACKET_FANOUT")?;
        }
        Ok(ring)
    }

    /// The link type of the packets.
    pub fn link_type(&self) -> LinkType {
        self.link_type
    }

    /// Ring size in bytes.
    pub fn ring_bytes(&self) -> usize {
        self.mem.len
    }

    /// Blocks in the ring.
    pub fn block_count(&self) -> usize {
        self.mem.block_nr
    }

    /// Blocks the kernel has filled that wait to be taken: how far the
    /// reader is behind.
    pub fn ready_blocks(&self) -> usize {
        self.mem.ready_from(self.next_block)
    }

    /// Waits up to `timeout` for the next block to be handed to user space
    /// (libpcap's `packet_mmap_acquire`), and holds it until the returned
    /// block is dropped, on whatever thread. `None` on timeout or a signal,
    /// and when the next block is still held (every block is): blocks are
    /// handed over in ring order, so the reader waits for that one.
    pub fn acquire_block(&mut self, timeout: Duration) -> io::Result<Option<OwnedBlock>> {
        let i = self.next_block;
        if self.mem.is_held(i) {
            // User space holds the whole ring; wait a little for a release
            // rather than spin (poll would return at once: the block's
            // status says "user").
            std::thread::sleep(timeout.min(Duration::from_millis(1)));
            return Ok(None);
        }
        if !self.mem.is_users(i) {
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN | libc::POLLERR,
                revents: 0,
            };
            let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
            // SAFETY: one valid pollfd.
            let r = unsafe { libc::poll(&mut pfd, 1, ms) };
            if r < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    return Ok(None);
                }
                return Err(io::Error::new(
                    e.kind(),
                    format!("poll on the packet ring: {e}"),
                ));
            }
        }
        let block = self.mem.take(i);
        if block.is_some() {
            self.next_block = (i + 1) % self.mem.block_nr;
        }
        Ok(block)
    }

    /// Stops the kernel from passing packets to this socket (a filter that
    /// accepts nothing), so that after the ring is drained the kernel's
    /// counters and what was read agree exactly.
    pub fn stop_receiving(&mut self) -> io::Result<()> {
        attach_return_filter(&self.fd, 0)
    }

    /// Reads and sums the kernel's counters (each read resets them).
    pub fn kernel_stats(&mut self) -> io::Result<KernelStats> {
        let mut v = [0u32; 3];
        let mut len = std::mem::size_of_val(&v) as libc::socklen_t;
        // SAFETY: `v` has room for `len` bytes, which the kernel updates.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                SOL_PACKET,
                PACKET_STATISTICS,
                v.as_mut_ptr().cast(),
                &mut len,
            )
        };
        if r != 0 {
            return Err(last_error("PACKET_STATISTICS"));
        }
        self.stats.packets += u64::from(v[0]);
        self.stats.drops += u64::from(v[1]);
        self.stats.freeze_count += u64::from(v[2]);
        Ok(self.stats)
    }
}

/// A ring block held by user space, readable on any thread; dropping it
/// gives the block back to the kernel (libpcap's `packet_mmap_release`).
pub struct OwnedBlock {
    mem: Arc<Memory>,
    index: usize,
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4)
        .map(|s| u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    b.get(at..at + 2).map(|s| u16::from_ne_bytes([s[0], s[1]]))
}

impl OwnedBlock {
    /// The block's bytes.
    fn bytes(&self) -> &[u8] {
        let m = &self.mem;
        // SAFETY: the block lies inside the memory, and user space owns it
        // (status "user", marked held) until `self` is dropped: neither the
        // kernel nor `SimRing` writes it meanwhile.
        unsafe { std::slice::from_raw_parts(m.base.add(self.index * m.block_size), m.block_size) }
    }

    /// Bytes of the block the kernel filled (its `blk_len`).
    pub fn len(&self) -> usize {
        (u32_at(self.bytes(), block::BLK_LEN).unwrap_or(0) as usize).min(self.mem.block_size)
    }

    /// Whether the block holds no packet bytes.
    pub fn is_empty(&self) -> bool {
        self.len() <= block::HEADER_LEN
    }

    /// The block's size in the ring.
    pub fn capacity(&self) -> usize {
        self.mem.block_size
    }

    /// Where the walk of the block's packets starts.
    pub fn cursor(&self) -> BlockCursor {
        let b = self.bytes();
        let first = u32_at(b, block::OFFSET_TO_FIRST_PKT).unwrap_or(0) as usize;
        BlockCursor {
            offset: if first >= block::HEADER_LEN {
                first
            } else {
                usize::MAX
            },
            left: u32_at(b, block::NUM_PKTS).unwrap_or(0),
        }
    }

    /// The packet at `cursor`, which moves on to the next; `None` at the end
    /// of the block, or where a header points outside it.
    pub fn next_packet(&self, cursor: &mut BlockCursor) -> Option<RingPacket<'_>> {
        let b = self.bytes();
        let len = (u32_at(b, block::BLK_LEN).unwrap_or(0) as usize).min(b.len());
        next_in_block(&b[..len], cursor)
    }

    /// The packets of the block, in arrival order.
    pub fn packets(&self) -> BlockPackets<'_> {
        BlockPackets {
            block: self,
            cursor: self.cursor(),
        }
    }

    /// The packets a walk of the block finds (the kernel's count, unless a
    /// header is corrupt).
    pub fn count(&self) -> u32 {
        let mut c = self.cursor();
        let mut n = 0;
        while self.next_packet(&mut c).is_some() {
            n += 1;
        }
        n
    }
}

impl Drop for OwnedBlock {
    fn drop(&mut self) {
        // The status first: once `held` is clear the reader may look at the
        // block again, and must then see the kernel's status (or newer).
        self.mem
            .status(self.index)
            .store(TP_STATUS_KERNEL, Ordering::Release);
        self.mem.held[self.index].store(false, Ordering::Release);
    }
}

/// A position in a block's walk ([`OwnedBlock::next_packet`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockCursor {
    offset: usize,
    left: u32,
}

/// Iterator over the packets of one block. A header that points outside the
/// block ends the walk.
pub struct BlockPackets<'a> {
    block: &'a OwnedBlock,
    cursor: BlockCursor,
}

impl<'a> Iterator for BlockPackets<'a> {
    type Item = RingPacket<'a>;

    fn next(&mut self) -> Option<RingPacket<'a>> {
        self.block.next_packet(&mut self.cursor)
    }
}

/// The packet of `block` (cut to its `blk_len`) at `c`, moving `c` on.
fn next_in_block<'a>(block: &'a [u8], c: &mut BlockCursor) -> Option<RingPacket<'a>> {
    if c.left == 0 {
        return None;
    }
    let h = block.get(c.offset..c.offset.checked_add(pkt::HEADER_LEN)?)?;
    let snaplen = u32_at(h, pkt::SNAPLEN)? as usize;
    let mac = usize::from(u16_at(h, pkt::MAC)?);
    let start = c.offset.checked_add(mac)?;
    let data = block.get(start..start.checked_add(snaplen)?)?;
    let status = u32_at(h, pkt::STATUS)?;
    let vlan = (status & TP_STATUS_VLAN_VALID != 0).then(|| {
        let tci = u32_at(h, pkt::VLAN_TCI).unwrap_or(0) as u16;
        let tpid = if status & TP_STATUS_VLAN_TPID_VALID != 0 {
            u16_at(h, pkt::VLAN_TPID).unwrap_or(0x8100)
        } else {
            0x8100
        };
        (tpid, tci)
    });
    let p = RingPacket {
        ts_ns: u64::from(u32_at(h, pkt::SEC)?) * 1_000_000_000 + u64::from(u32_at(h, pkt::NSEC)?),
        orig_len: u32_at(h, pkt::LEN)?,
        data,
        vlan,
    };
    c.left -= 1;
    let next = u32_at(h, pkt::NEXT_OFFSET)? as usize;
    c.offset = if next == 0 {
        usize::MAX
    } else {
        c.offset.checked_add(next)?
    };
    Some(p)
}

/// A ring in heap memory that test code fills as the kernel fills a
/// TPACKET_V3 ring: packets go only into the next block in ring order, and
/// only once user space has given it back (else they are counted as
/// dropped, as the kernel counts them); the block is then handed over. It
/// lets what reads rings (the pipeline's lane) be tested without root or
/// an interface, on exactly the blocks and the ownership protocol of a
/// real ring.
pub struct SimRing {
    mem: Arc<Memory>,
    fill: usize,
    read: usize,
    stats: KernelStats,
}

/// Bytes from a packet's header to its frame in a [`SimRing`] block: the
/// 48-byte `tpacket3_hdr` and a `sockaddr_ll`, rounded up (the kernel's
/// `tp_mac` is about the same).
const SIM_MAC_OFFSET: usize = 80;

impl SimRing {
    /// A ring of `block_nr` blocks of `block_size` bytes (rounded up to a
    /// multiple of 8; at least 2 blocks of 128 bytes).
    pub fn new(block_size: usize, block_nr: usize) -> SimRing {
        let block_size = block_size.max(128).next_multiple_of(8);
        let block_nr = block_nr.max(2);
        let mut heap = vec![0u64; block_size / 8 * block_nr];
        let base = heap.as_mut_ptr().cast::<u8>();
        SimRing {
            mem: Arc::new(Memory::new(base, block_size, block_nr, Backing::Heap(heap))),
            fill: 0,
            read: 0,
            stats: KernelStats::default(),
        }
    }

    /// Blocks in the ring.
    pub fn block_count(&self) -> usize {
        self.mem.block_nr
    }

    /// Blocks filled that wait to be taken.
    pub fn ready_blocks(&self) -> usize {
        self.mem.ready_from(self.read)
    }

    /// Whether the next block to fill is the "kernel's" (user space gave
    /// it back): a [`SimRing::deliver`] now would store its packets.
    pub fn has_room(&self) -> bool {
        let m = &self.mem;
        !m.is_held(self.fill) && !m.is_users(self.fill)
    }

    /// As the kernel when a block fills: writes as many of `packets` as fit
    /// into the next block, and hands it to user space. Returns how many
    /// were written (the rest are left to the caller); 0 when user space
    /// still holds that block, and then every one of `packets` is counted
    /// as dropped (and the ring as frozen once).
    pub fn deliver(&mut self, packets: &[RingPacket<'_>]) -> usize {
        let i = self.fill;
        if !self.has_room() {
            self.stats.packets += packets.len() as u64;
            self.stats.drops += packets.len() as u64;
            self.stats.freeze_count += 1;
            return 0;
        }
        let m = &self.mem;
        // SAFETY: block `i` lies inside the memory; its status gives it to
        // the "kernel" and no `OwnedBlock` holds it, so no one else reads or
        // writes it until the status is set to "user" below.
        let b =
            unsafe { std::slice::from_raw_parts_mut(m.base.add(i * m.block_size), m.block_size) };
        let put = |b: &mut [u8], at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        let mut at = block::HEADER_LEN;
        let mut written = 0;
        let mut last_header = None;
        for p in packets {
            let end = at + SIM_MAC_OFFSET + p.data.len();
            if end > b.len() {
                break;
            }
            b[at..at + SIM_MAC_OFFSET].fill(0);
            put(b, at + pkt::SEC, (p.ts_ns / 1_000_000_000) as u32);
            put(b, at + pkt::NSEC, (p.ts_ns % 1_000_000_000) as u32);
            put(b, at + pkt::SNAPLEN, p.data.len() as u32);
            put(b, at + pkt::LEN, p.orig_len);
            let mut status = 0;
            if let Some((tpid, tci)) = p.vlan {
                status = TP_STATUS_VLAN_VALID | TP_STATUS_VLAN_TPID_VALID;
                put(b, at + pkt::VLAN_TCI, u32::from(tci));
                b[at + pkt::VLAN_TPID..at + pkt::VLAN_TPID + 2]
                    .copy_from_slice(&tpid.to_ne_bytes());
            }
            put(b, at + pkt::STATUS, status);
            b[at + pkt::MAC..at + pkt::MAC + 2]
                .copy_from_slice(&(SIM_MAC_OFFSET as u16).to_ne_bytes());
            b[at + SIM_MAC_OFFSET..end].copy_from_slice(p.data);
            let next = end.next_multiple_of(16);
            if let Some(prev) = last_header {
                put(b, prev + pkt::NEXT_OFFSET, (at - prev) as u32);
            }
            last_header = Some(at);
            written += 1;
            at = next;
        }
        put(b, block::NUM_PKTS, written as u32);
        put(b, block::OFFSET_TO_FIRST_PKT, block::HEADER_LEN as u32);
        put(b, block::BLK_LEN, at.min(b.len()) as u32);
        self.stats.packets += written as u64;
        self.fill = (i + 1) % m.block_nr;
        m.status(i).store(TP_STATUS_USER, Ordering::Release);
        written
    }

    /// The next block handed to user space, held until dropped; `None` when
    /// there is none yet or user space holds it already.
    pub fn acquire_block(&mut self) -> Option<OwnedBlock> {
        let block = self.mem.take(self.read)?;
        self.read = (self.read + 1) % self.mem.block_nr;
        Some(block)
    }

    /// The "kernel's" counters: packets offered, and dropped for want of a
    /// free block.
    pub fn kernel_stats(&self) -> KernelStats {
        self.stats
    }

    /// Overwrites the `next_offset` of the first packet of the next block
    /// to be handed over, as a corrupt block would have it (for tests of
    /// the walk's bounds).
    pub fn corrupt_next_block(&mut self, next_offset: u32) {
        let i = self.read;
        let m = &self.mem;
        if m.is_held(i) {
            return;
        }
        // SAFETY: block `i` lies inside the memory and no `OwnedBlock` holds
        // it; the test owns both sides of this simulated ring.
        let b =
            unsafe { std::slice::from_raw_parts_mut(m.base.add(i * m.block_size), m.block_size) };
        let at = block::HEADER_LEN + pkt::NEXT_OFFSET;
        b[at..at + 4].copy_from_slice(&next_offset.to_ne_bytes());
    }
}

#[cfg(test)]
mod sim_tests {
    use super::*;

    fn frame(n: u8, len: usize) -> Vec<u8> {
        vec![n; len]
    }

    fn packet(data: &[u8], ts_ns: u64) -> RingPacket<'_> {
        RingPacket {
            ts_ns,
            orig_len: data.len() as u32 + 10,
            data,
            vlan: None,
        }
    }

    #[test]
    fn blocks_carry_their_packets_and_go_back_to_the_kernel_when_dropped() {
        let mut ring = SimRing::new(4096, 3);
        let (a, b) = (frame(1, 60), frame(2, 1000));
        let mut tagged = packet(&a, 3_000_000_007);
        tagged.vlan = Some((0x88a8, 0x0123));
        assert_eq!(ring.deliver(&[packet(&a, 5), packet(&b, 6), tagged]), 3);
        let block = ring.acquire_block().expect("handed over");
        assert_eq!(block.count(), 3);
        let got: Vec<RingPacket> = block.packets().collect();
        assert_eq!(
            (got[0].ts_ns, got[0].orig_len, got[0].data),
            (5, 70, &a[..])
        );
        assert_eq!((got[1].ts_ns, got[1].data.len()), (6, 1000));
        assert_eq!(got[2].ts_ns, 3_000_000_007);
        assert_eq!(got[2].vlan, Some((0x88a8, 0x0123)));
        // Nothing more yet.
        assert!(ring.acquire_block().is_none());
        // A cursor walks the same packets, one at a time.
        let mut c = block.cursor();
        assert_eq!(block.next_packet(&mut c).map(|p| p.ts_ns), Some(5));
        drop(got);
        // The block can be read on another thread, after the ring is gone.
        let (tx, rx) = std::sync::mpsc::channel();
        tx.send(block).unwrap();
        let t = std::thread::spawn(move || rx.recv().unwrap().count());
        assert_eq!(t.join().unwrap(), 3);
    }

    #[test]
    fn a_held_block_is_never_taken_twice_nor_written_over() {
        let mut ring = SimRing::new(256, 2);
        let data = frame(7, 40);
        assert_eq!(ring.deliver(&[packet(&data, 1)]), 1);
        assert_eq!(ring.deliver(&[packet(&data, 2)]), 1);
        let first = ring.acquire_block().unwrap();
        let second = ring.acquire_block().unwrap();
        // Coming round the ring: the first block is still held.
        assert!(ring.acquire_block().is_none());
        // The "kernel" finds no free block: the packets are dropped, counted.
        assert_eq!(ring.deliver(&[packet(&data, 3), packet(&data, 4)]), 0);
        assert_eq!(ring.kernel_stats().drops, 2);
        assert_eq!(first.packets().next().map(|p| p.ts_ns), Some(1));
        drop(first);
        assert_eq!(ring.deliver(&[packet(&data, 5)]), 1);
        let third = ring.acquire_block().unwrap();
        assert_eq!(third.packets().next().map(|p| p.ts_ns), Some(5));
        assert_eq!(second.packets().next().map(|p| p.ts_ns), Some(2));
        let k = ring.kernel_stats();
        assert_eq!((k.packets, k.drops, k.freeze_count), (5, 2, 1));
    }

    #[test]
    fn a_block_holds_what_fits_and_says_how_many() {
        let mut ring = SimRing::new(1024, 2);
        let data = frame(9, 300);
        let many: Vec<RingPacket> = (0..5).map(|i| packet(&data, i)).collect();
        let n = ring.deliver(&many);
        assert!((1..5).contains(&n), "{n}");
        assert_eq!(ring.acquire_block().unwrap().count() as usize, n);
    }

    #[test]
    fn a_corrupt_offset_ends_the_walk_inside_the_block() {
        let data = frame(3, 100);
        for bad in [1u32, 7, 200, 1 << 20, u32::MAX] {
            let mut ring = SimRing::new(4096, 2);
            ring.deliver(&[packet(&data, 1), packet(&data, 2), packet(&data, 3)]);
            ring.corrupt_next_block(bad);
            let block = ring.acquire_block().unwrap();
            // The first packet is whole; the walk ends or goes on only
            // through bytes inside the block, never past them.
            let got: Vec<RingPacket> = block.packets().collect();
            assert!(!got.is_empty() && got.len() <= 3, "{bad}: {}", got.len());
            assert_eq!(got[0].data, &data[..]);
        }
    }
}
