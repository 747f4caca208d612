//! An AF_PACKET socket with a TPACKET_V3 receive ring.
//!
//! Kernel ABI: `linux/if_packet.h` and Documentation/networking/packet_mmap.rst.
//! The ring is `block_nr` blocks of `block_size` bytes shared with the kernel.
//! The kernel fills a block with packets and hands it over by setting
//! `TP_STATUS_USER` in the block's status word (or when `retire_blk_tov`
//! milliseconds pass with a partly filled block); user space reads the
//! packets and gives the block back by writing `TP_STATUS_KERNEL`. Those two
//! steps are [`TpacketRing::acquire_block`] and [`BlockGuard`]'s drop, named
//! after libpcap's `packet_mmap_acquire`/`packet_mmap_release`.
//!
//! Block and packet headers are read from the mapped bytes at the offsets the
//! kernel ABI fixes (below) through checked slices, so a corrupt offset in a
//! block can only end that block's walk, never read outside it.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use wire::LinkType;

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
    map: *mut u8,
    map_len: usize,
    block_size: usize,
    block_nr: usize,
    next_block: usize,
    link_type: LinkType,
    stats: KernelStats,
}

// SAFETY: the mapping is owned by this value alone and only touched through
// `&mut self`; moving it to another thread moves that exclusive ownership.
unsafe impl Send for TpacketRing {}

fn last_error(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

fn setsockopt<T>(
    fd: &OwnedFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
    what: &str,
) -> io::Result<()> {
    // SAFETY: `value` points to a live `T` of the size passed.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(last_error(what))
    }
}

/// `ARPHRD_LOOPBACK`.
const ARPHRD_LOOPBACK: u16 = 772;

/// The classic BPF program a capture socket runs in the kernel: keep
/// `snaplen` bytes of each packet; on a loopback device, first drop the
/// packets whose type is `PACKET_OUTGOING`. A packet sent on `lo` is seen
/// by packet sockets once as it leaves and once as it comes back in, so
/// without this every packet would be captured twice. libpcap drops the
/// outgoing copy too, but in user space, after the kernel has counted it;
/// rejected here in the kernel's filter, the copy is never counted in
/// PACKET_STATISTICS, so the kernel's count stays the count of packets.
fn capture_filter(snaplen: u32, loopback: bool) -> Vec<libc::sock_filter> {
    const BPF_LD_B_ABS: u16 = 0x30;
    const BPF_JEQ_K: u16 = 0x15;
    const BPF_RET_K: u16 = 0x06;
    // SKF_AD_OFF + SKF_AD_PKTTYPE: the ancillary load of skb->pkt_type.
    const PKTTYPE: u32 = 0xffff_f000 + 4;
    const PACKET_OUTGOING: u32 = 4;
    let ins = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let mut prog = Vec::with_capacity(4);
    if loopback {
        prog.push(ins(BPF_LD_B_ABS, 0, 0, PKTTYPE));
        // Outgoing: fall through to `ret #0`; else skip it.
        prog.push(ins(BPF_JEQ_K, 0, 1, PACKET_OUTGOING));
        prog.push(ins(BPF_RET_K, 0, 0, 0));
    }
    prog.push(ins(BPF_RET_K, 0, 0, snaplen));
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

fn attach_capture_filter(fd: &OwnedFd, snaplen: u32, loopback: bool) -> io::Result<()> {
    attach_filter(fd, &capture_filter(snaplen, loopback))
}

/// Attaches the one-instruction classic BPF program `ret #keep`: the kernel
/// keeps `keep` bytes of each packet (0 drops every packet before it is
/// counted or queued).
fn attach_return_filter(fd: &OwnedFd, keep: u32) -> io::Result<()> {
    attach_filter(fd, &capture_filter(keep, false))
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
        let name = CString::new(cfg.interface.as_str()).map_err(|_| {
            io::Error::new(io::ErrorKind::InvalidInput, "interface name contains NUL")
        })?;
        // SAFETY: `name` is a valid NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            return Err(last_error(&format!("{}: no such interface", cfg.interface)));
        }
        // Protocol 0: the socket receives nothing until `bind` names the
        // interface and ETH_P_ALL; created with ETH_P_ALL it would take
        // packets from every interface meanwhile (libpcap does the same).
        // SAFETY: plain socket(2) call; the result is checked before use.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(last_error(
                "socket(AF_PACKET) (capturing needs root or CAP_NET_RAW)",
            ));
        }
        // SAFETY: `raw` is a new descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
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
        attach_capture_filter(&fd, cfg.snaplen, loopback)?;

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
            map: map.cast(),
            map_len,
            block_size: cfg.block_size,
            block_nr,
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
        self.map_len
    }

    /// The status word of block `i`, shared with the kernel.
    fn status(&self, i: usize) -> &AtomicU32 {
        debug_assert!(i < self.block_nr);
        // SAFETY: block `i` lies inside the mapping (i < block_nr), its
        // status word is 4-byte aligned (blocks are page aligned), and the
        // kernel only ever accesses it atomically as well.
        unsafe { AtomicU32::from_ptr(self.map.add(i * self.block_size + block::STATUS).cast()) }
    }

    /// Waits up to `timeout` for the next block to be handed to user space
    /// (libpcap's `packet_mmap_acquire`). `None` on timeout or a signal.
    pub fn acquire_block(&mut self, timeout: Duration) -> io::Result<Option<BlockGuard<'_>>> {
        let i = self.next_block;
        if self.status(i).load(Ordering::Acquire) & TP_STATUS_USER == 0 {
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
            if self.status(i).load(Ordering::Acquire) & TP_STATUS_USER == 0 {
                return Ok(None);
            }
        }
        self.next_block = (i + 1) % self.block_nr;
        // SAFETY: the block is owned by user space until the guard writes
        // TP_STATUS_KERNEL (the Acquire load above orders our reads after
        // the kernel's writes); it lies inside the mapping.
        let bytes = unsafe {
            std::slice::from_raw_parts(self.map.add(i * self.block_size), self.block_size)
        };
        Ok(Some(BlockGuard {
            ring: self,
            index: i,
            bytes,
        }))
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

impl Drop for TpacketRing {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the region mapped in `open`; no slice into
        // it outlives `self` (guards borrow the ring).
        unsafe {
            libc::munmap(self.map.cast(), self.map_len);
        }
    }
}

/// A ring block owned by user space; dropping it gives the block back to
/// the kernel (libpcap's `packet_mmap_release`).
pub struct BlockGuard<'r> {
    ring: &'r TpacketRing,
    index: usize,
    bytes: &'r [u8],
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4)
        .map(|s| u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    b.get(at..at + 2).map(|s| u16::from_ne_bytes([s[0], s[1]]))
}

impl<'r> BlockGuard<'r> {
    /// The packets of the block, in arrival order.
    pub fn packets(&self) -> BlockPackets<'_> {
        let b = self.bytes;
        let num = u32_at(b, block::NUM_PKTS).unwrap_or(0);
        let first = u32_at(b, block::OFFSET_TO_FIRST_PKT).unwrap_or(0) as usize;
        let len = (u32_at(b, block::BLK_LEN).unwrap_or(0) as usize).min(b.len());
        BlockPackets {
            block: &b[..len],
            offset: if first >= block::HEADER_LEN {
                first
            } else {
                usize::MAX
            },
            left: num,
        }
    }
}

impl Drop for BlockGuard<'_> {
    fn drop(&mut self) {
        self.ring
            .status(self.index)
            .store(TP_STATUS_KERNEL, Ordering::Release);
    }
}

/// Iterator over the packets of one block. A header that points outside the
/// block ends the walk.
pub struct BlockPackets<'a> {
    block: &'a [u8],
    offset: usize,
    left: u32,
}

impl<'a> Iterator for BlockPackets<'a> {
    type Item = RingPacket<'a>;

    fn next(&mut self) -> Option<RingPacket<'a>> {
        if self.left == 0 {
            return None;
        }
        let h = self
            .block
            .get(self.offset..self.offset.checked_add(pkt::HEADER_LEN)?)?;
        let snaplen = u32_at(h, pkt::SNAPLEN)? as usize;
        let mac = usize::from(u16_at(h, pkt::MAC)?);
        let start = self.offset.checked_add(mac)?;
        let data = self.block.get(start..start.checked_add(snaplen)?)?;
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
            ts_ns: u64::from(u32_at(h, pkt::SEC)?) * 1_000_000_000
                + u64::from(u32_at(h, pkt::NSEC)?),
            orig_len: u32_at(h, pkt::LEN)?,
            data,
            vlan,
        };
        self.left -= 1;
        let next = u32_at(h, pkt::NEXT_OFFSET)? as usize;
        self.offset = if next == 0 {
            usize::MAX
        } else {
            self.offset.checked_add(next)?
        };
        Some(p)
    }
}
