//! A TUN device: the IP packets the kernel routes into it are read one per
//! call, and packets written to it enter the kernel as if received on it.
//!
//! Kernel ABI: `linux/if_tun.h` and Documentation/networking/tuntap.rst.
//! The device is opened `IFF_TUN | IFF_NO_PI`: each read or write is one
//! bare IPv4 or IPv6 packet, with no link header and no packet-information
//! prefix (the kernel takes the family from the version nibble). The
//! interface ioctls (MTU, flags) go through an AF_INET datagram socket made
//! with the device, so they reach its network namespace from any thread.
//!
//! [`Tun::open_offload`] adds `IFF_VNET_HDR` and turns on the checksum and
//! TCP segmentation offloads (`TUNSETOFFLOAD`): every read and write then
//! starts with a 10-byte `struct virtio_net_hdr`, a read may hold a TCP
//! segment of up to 64 KiB with its checksum left partial, and a write may
//! hand the kernel such a segment. Cutting and joining segments is the
//! reader's (`gateway::offload`).

use std::ffi::CStr;
use std::fs::{File, OpenOptions};
use std::io::{self, IoSlice, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;

use wire::{ipv4, ipv6};

use crate::sys;

const CLONE_DEVICE: &str = "/dev/net/tun";

/// An open TUN device. Dropping it deletes the device, unless it was made
/// persistent beforehand (`ip tuntap add mode tun NAME`).
#[derive(Debug)]
pub struct Tun {
    file: File,
    /// AF_INET datagram socket in the device's namespace, for `SIOCSIF*`.
    ctl: OwnedFd,
    name: String,
    /// Opened with `IFF_VNET_HDR` and the offloads.
    vnet: bool,
}

/// The virtio-net header in front of every packet of a TUN opened with
/// [`Tun::open_offload`] (`struct virtio_net_hdr`, the kernel's default
/// size).
pub const VNET_HDR_LEN: usize = 10;

/// The offloads [`Tun::open_offload`] turns on: the kernel may leave TCP
/// and UDP checksums partial and hand over TCP segments of up to 64 KiB,
/// IPv4 and IPv6, ECN's CWR included.
const OFFLOADS: libc::c_uint =
    libc::TUN_F_CSUM | libc::TUN_F_TSO4 | libc::TUN_F_TSO6 | libc::TUN_F_TSO_ECN;

/// An `ifreq` naming `name`, the rest zero.
fn ifreq(name: &str) -> io::Result<libc::ifreq> {
    if name.len() >= libc::IFNAMSIZ || name.contains('\0') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{name:?}: not an interface name (at most {} bytes, no NUL)",
                libc::IFNAMSIZ - 1
            ),
        ));
    }
    // SAFETY: ifreq is plain old data (a name and a union of integers,
    // sockaddrs and a pointer); all-zero is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    Ok(ifr)
}

impl Tun {
    /// Creates the TUN device `name` in the calling thread's network
    /// namespace, or attaches to a persistent one of that name. A name with
    /// `%d` (`ipsec%d`), or an empty one (`tun%d`), is numbered by the
    /// kernel; [`Tun::name`] gives the result. The device starts down, with
    /// no address. Needs CAP_NET_ADMIN. Blocking until
    /// [`Tun::set_nonblocking`].
    pub fn open(name: &str) -> io::Result<Tun> {
        Tun::open_with(name, false)
    }

    /// As [`Tun::open`], with the virtio-net header and the checksum and
    /// TCP segmentation offloads (see the module docs): reads return
    /// [`VNET_HDR_LEN`] header bytes and then a packet of up to 64 KiB, and
    /// writes go through [`Tun::write_vnet`].
    pub fn open_offload(name: &str) -> io::Result<Tun> {
        Tun::open_with(name, true)
    }

    fn open_with(name: &str, vnet: bool) -> io::Result<Tun> {
        let mut ifr = ifreq(name)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(CLONE_DEVICE)
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("{CLONE_DEVICE} (a TUN device needs CAP_NET_ADMIN): {e}"),
                )
            })?;
        let mut flags = libc::IFF_TUN | libc::IFF_NO_PI;
        if vnet {
            flags |= libc::IFF_VNET_HDR;
        }
        ifr.ifr_ifru.ifru_flags = flags as libc::c_short;
        // SAFETY: TUNSETIFF reads and writes one `struct ifreq`, which `ifr` is.
        let r = unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF as _, &mut ifr) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(e.kind(), format!("TUNSETIFF {name:?}: {e}")));
        }
        // SAFETY: the kernel wrote the device's name back into `ifr_name`,
        // NUL-terminated within IFNAMSIZ (the array was zeroed beforehand).
        let actual = unsafe { CStr::from_ptr(ifr.ifr_name.as_ptr()) };
        let name = actual.to_string_lossy().into_owned();
        if vnet {
            // SAFETY: TUNSETOFFLOAD takes its argument by value, an unsigned
            // int of TUN_F_* flags.
            let r = unsafe {
                libc::ioctl(
                    file.as_raw_fd(),
                    libc::TUNSETOFFLOAD as _,
                    libc::c_ulong::from(OFFLOADS),
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                return Err(io::Error::new(
                    e.kind(),
                    format!("TUNSETOFFLOAD {name:?}: {e}"),
                ));
            }
        }
        let ctl = sys::socket(
            libc::AF_INET,
            libc::SOCK_DGRAM,
            0,
            "AF_INET, for interface ioctls",
        )?;
        Ok(Tun {
            file,
            ctl,
            name,
            vnet,
        })
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether packets carry the virtio-net header ([`Tun::open_offload`]).
    pub fn has_vnet_hdr(&self) -> bool {
        self.vnet
    }

    /// Sets the device's MTU (`SIOCSIFMTU`). IPv6 needs at least 1280.
    pub fn set_mtu(&self, mtu: u32) -> io::Result<()> {
        let mut ifr = ifreq(&self.name)?;
        ifr.ifr_ifru.ifru_mtu = libc::c_int::try_from(mtu)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("MTU {mtu}")))?;
        // SAFETY: SIOCSIFMTU reads one `struct ifreq`, which `ifr` is.
        let r = unsafe { libc::ioctl(self.ctl.as_raw_fd(), libc::SIOCSIFMTU as _, &ifr) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("{}: setting MTU {mtu}: {e}", self.name),
            ));
        }
        Ok(())
    }

    /// Sets how many packets the kernel queues for the reader
    /// (`SIOCSIFTXQLEN`; the TUN's ring is resized to it). A packet routed
    /// into a full queue is dropped and counted in the device's `tx_dropped`.
    pub fn set_tx_queue_len(&self, packets: u32) -> io::Result<()> {
        let mut ifr = ifreq(&self.name)?;
        // `ifr_qlen` is the union's int, which libc names `ifru_ifindex`.
        ifr.ifr_ifru.ifru_ifindex = libc::c_int::try_from(packets).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("queue of {packets} packets"),
            )
        })?;
        // SAFETY: SIOCSIFTXQLEN reads one `struct ifreq`, which `ifr` is.
        let r = unsafe { libc::ioctl(self.ctl.as_raw_fd(), libc::SIOCSIFTXQLEN as _, &ifr) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("{}: setting the queue to {packets} packets: {e}", self.name),
            ));
        }
        Ok(())
    }

    /// Brings the device up (`SIOCGIFFLAGS`, then `SIOCSIFFLAGS` with
    /// `IFF_UP`). Addresses and routes are the caller's (`ip addr add`).
    pub fn set_up(&self) -> io::Result<()> {
        let mut ifr = ifreq(&self.name)?;
        // SAFETY: SIOCGIFFLAGS reads and writes one `struct ifreq`, which `ifr` is.
        let r = unsafe { libc::ioctl(self.ctl.as_raw_fd(), libc::SIOCGIFFLAGS as _, &mut ifr) };
        if r >= 0 {
            // SAFETY: SIOCGIFFLAGS filled the union's `ifru_flags`.
            let flags = unsafe { ifr.ifr_ifru.ifru_flags };
            ifr.ifr_ifru.ifru_flags = flags | libc::IFF_UP as libc::c_short;
            // SAFETY: SIOCSIFFLAGS reads one `struct ifreq`, which `ifr` is.
            let r = unsafe { libc::ioctl(self.ctl.as_raw_fd(), libc::SIOCSIFFLAGS as _, &ifr) };
            if r >= 0 {
                return Ok(());
            }
        }
        let e = io::Error::last_os_error();
        Err(io::Error::new(
            e.kind(),
            format!("{}: setting it up: {e}", self.name),
        ))
    }

    /// Makes [`Tun::read`] and [`Tun::write`] return `WouldBlock` instead of
    /// waiting; wait with [`crate::poll::wait_readable`].
    pub fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        sys::set_nonblocking(self.file.as_fd(), on)
    }

    /// Reads one IP packet into `buf` and returns its length. `buf` should
    /// hold the MTU: the kernel cuts a longer packet to the buffer and drops
    /// the rest, which is reported here as `InvalidData` (the header's
    /// length field says more than was read).
    /// With the virtio-net header, `buf` gets the header and then the
    /// packet, and should hold [`VNET_HDR_LEN`] + 65,535 bytes.
    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        let n = (&self.file).read(buf)?;
        let skip = if self.vnet { VNET_HDR_LEN } else { 0 };
        if n == buf.len() && n > skip {
            if let Some(len) = header_len_field(&buf[skip..n]).filter(|&len| len > n - skip) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{}: a packet of {len} bytes, longer than the buffer ({n}), was cut",
                        self.name
                    ),
                ));
            }
        }
        Ok(n)
    }

    /// Writes one IP packet. The kernel rejects a packet whose first nibble
    /// is neither 4 nor 6 (`EINVAL`); the IP layer drops other bad ones
    /// later, as if they had come off a wire. On a TUN with the virtio-net
    /// header, the packet goes behind an empty one (no offload asked).
    pub fn write(&self, packet: &[u8]) -> io::Result<()> {
        if self.vnet {
            return self.write_vnet(&[0; VNET_HDR_LEN], packet);
        }
        let n = (&self.file).write(packet)?;
        if n != packet.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("{}: wrote {n} of {} bytes", self.name, packet.len()),
            ));
        }
        Ok(())
    }

    /// Writes one packet behind its virtio-net header, in one `writev`
    /// (on a TUN opened with [`Tun::open_offload`]; on another the header
    /// would be read as the start of the packet). The kernel
    /// refuses a header that does not fit the packet (`EINVAL`).
    pub fn write_vnet(&self, hdr: &[u8; VNET_HDR_LEN], packet: &[u8]) -> io::Result<()> {
        let n = (&self.file).write_vectored(&[IoSlice::new(hdr), IoSlice::new(packet)])?;
        if n != hdr.len() + packet.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!(
                    "{}: wrote {n} of {} bytes",
                    self.name,
                    hdr.len() + packet.len()
                ),
            ));
        }
        Ok(())
    }
}

/// The packet length an IP header states, if `p` starts with one.
fn header_len_field(p: &[u8]) -> Option<usize> {
    let be16 = |r: std::ops::Range<usize>| {
        let b = p.get(r)?;
        Some(usize::from(u16::from_be_bytes([b[0], b[1]])))
    };
    match p.first()? >> 4 {
        ipv4::VERSION => be16(ipv4::field::LENGTH),
        ipv6::VERSION => Some(be16(ipv6::field::LENGTH)? + ipv6::HEADER_LEN),
        _ => None,
    }
}

impl AsRawFd for Tun {
    fn as_raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
}

impl AsFd for Tun {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_or_nul_names_are_refused_before_any_system_call() {
        for bad in ["0123456789abcdef", "a\0b"] {
            let e = Tun::open(bad).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
        }
        assert!(ifreq("0123456789abcde").is_ok());
    }

    #[test]
    fn a_cut_packet_is_known_by_its_length_field() {
        let mut v4 = [0u8; 20];
        v4[0] = 0x45;
        v4[2..4].copy_from_slice(&1028u16.to_be_bytes());
        assert_eq!(header_len_field(&v4), Some(1028));
        let mut v6 = [0u8; 40];
        v6[0] = 0x60;
        v6[4..6].copy_from_slice(&8u16.to_be_bytes());
        assert_eq!(header_len_field(&v6), Some(48));
        assert_eq!(header_len_field(&v6[..5]), None);
        assert_eq!(header_len_field(&[0x20, 0, 0, 0]), None);
        assert_eq!(header_len_field(&[]), None);
    }
}
