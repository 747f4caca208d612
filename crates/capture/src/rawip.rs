//! Whole IP packets for an IPsec gateway's outer side: ESP and AH received
//! with their IP header, ESP in UDP (RFC 3948), and complete IPv4/IPv6
//! packets sent as they are.
//!
//! Receiving ([`RawIpReceiver`]) uses raw IP sockets, one per family and
//! protocol. The kernel hands them every packet of that protocol addressed
//! to this host (unicast, or broadcast and multicast it belongs to), from any
//! interface, after its own checks and after reassembling fragments (IPv4 and
//! IPv6 alike: a receiver never sees a fragment). The kernel's own handling
//! goes on beside: an ESP/AH handler (esp4, ah4, ...), if loaded, drops the
//! packet for want of a kernel SA (`XfrmInNoStates`); with none loaded, an
//! open raw socket for the protocol is what keeps the kernel from answering
//! ICMP "protocol unreachable".
//!
//! - IPv4 raw sockets deliver the IPv4 header (with options) and the payload.
//!   After reassembly the header's total length is the whole packet's, its
//!   fragment offset and MF flag are 0.
//! - IPv6 raw sockets deliver only what follows the extension headers. The
//!   receiver asks for the rest as ancillary data (source from the address,
//!   `IPV6_PKTINFO` destination, `IPV6_HOPLIMIT`, `IPV6_FLOWINFO` traffic
//!   class and flow label, and the hop-by-hop, destination-options and
//!   routing headers in packet order) and rebuilds the packet in front of the
//!   payload: the bytes that came in, as the kernel holds them (after
//!   reassembly, without the fragment header; a routing header only with no
//!   segments left, else the packet is forwarded, not delivered). That is
//!   all AH's ICV covers.
//!   An AF_PACKET socket would give the header as is, but also fragments not
//!   reassembled, packets for other hosts and no protocol filter.
//!
//! ESP in UDP ([`UdpEncap`]) needs no raw socket: an ordinary UDP socket on
//! port 4500 receives the UDP payload (an ESP packet, a non-ESP marker and
//! IKE, or a one-byte keepalive) with its source and destination address.
//!
//! Sending ([`RawIpSender`]) uses `IPPROTO_RAW` sockets, which take the IP
//! header from the packet (IPv4: `IP_HDRINCL`; IPv6: the same semantics,
//! implied by `IPPROTO_RAW`). For IPv4 the kernel fills in the header
//! checksum and total length, and the identification and source address
//! when they are 0; an IPv6 header goes out unchanged. Size limits (checked
//! on Linux 6.18, see tests/ipsec_os.rs):
//!
//! - A packet longer than the outgoing device's MTU fails at once with
//!   `EMSGSIZE` ([`SendFault::TooBig`]), both families, DF or not.
//! - A packet within the device MTU but longer than a smaller path MTU (a
//!   route's `mtu`, or one learned from ICMP) is fragmented by the kernel if
//!   it is IPv4 with DF clear. IPv4 with DF set, and IPv6 (which only its
//!   source may fragment), are not sent; the send fails with `EMSGSIZE` too.
//!   [`path_mtu`] tells the caller the size that would have passed.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use wire::{ipv4, ipv6, IpProtocol};

use crate::sys;

/// The NAT traversal port of RFC 3948.
pub const NAT_T_PORT: u16 = 4500;

/// Bytes of ancillary data an IPv6 receive can carry: pktinfo, hop limit,
/// flow info and four extension headers of the largest size (2048 bytes).
const CONTROL_LEN: usize = 4 * (2048 + 16) + 256;

/// Extension headers an IPv6 receive rebuilds at most (hop-by-hop, two
/// destination options, routing, with room to spare).
const MAX_EXTENSIONS: usize = 8;

fn too_long(len: usize, room: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("received a packet of {len} bytes, longer than the buffer ({room})"),
    )
}

fn bad_packet(why: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, why)
}

/// Receives one IP protocol's packets addressed to this host, each with its
/// IP header (rebuilt for IPv6: see the module docs).
#[derive(Debug)]
pub struct RawIpReceiver {
    fd: OwnedFd,
    v6: bool,
    protocol: u8,
    /// Ancillary data of an IPv6 receive.
    control: Vec<u8>,
}

impl RawIpReceiver {
    /// A raw IPv4 socket for `protocol` (ESP, AH). Needs CAP_NET_RAW.
    pub fn open_v4(protocol: IpProtocol) -> io::Result<RawIpReceiver> {
        let fd = sys::socket(
            libc::AF_INET,
            libc::SOCK_RAW,
            u8::from(protocol).into(),
            "AF_INET, SOCK_RAW (needs root or CAP_NET_RAW)",
        )?;
        Ok(RawIpReceiver {
            fd,
            v6: false,
            protocol: protocol.number(),
            control: Vec::new(),
        })
    }

    /// A raw IPv6 socket for `protocol`, with the ancillary data that
    /// rebuilds the header turned on. Needs CAP_NET_RAW.
    pub fn open_v6(protocol: IpProtocol) -> io::Result<RawIpReceiver> {
        let fd = sys::socket(
            libc::AF_INET6,
            libc::SOCK_RAW,
            u8::from(protocol).into(),
            "AF_INET6, SOCK_RAW (needs root or CAP_NET_RAW)",
        )?;
        for (opt, what) in [
            (libc::IPV6_RECVPKTINFO, "IPV6_RECVPKTINFO"),
            (libc::IPV6_RECVHOPLIMIT, "IPV6_RECVHOPLIMIT"),
            (libc::IPV6_FLOWINFO, "IPV6_FLOWINFO"),
            (libc::IPV6_RECVHOPOPTS, "IPV6_RECVHOPOPTS"),
            (libc::IPV6_RECVDSTOPTS, "IPV6_RECVDSTOPTS"),
            (libc::IPV6_RECVRTHDR, "IPV6_RECVRTHDR"),
        ] {
            sys::set_int(fd.as_fd(), libc::IPPROTO_IPV6, opt, 1, what)?;
        }
        Ok(RawIpReceiver {
            fd,
            v6: true,
            protocol: protocol.number(),
            control: vec![0; CONTROL_LEN],
        })
    }

    /// Receives only what arrives on `interface` (`SO_BINDTODEVICE`).
    pub fn bind_device(&self, interface: &str) -> io::Result<()> {
        sys::bind_device(self.fd.as_fd(), interface)
    }

    /// Makes [`RawIpReceiver::recv`] return `WouldBlock` instead of waiting.
    pub fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        sys::set_nonblocking(self.fd.as_fd(), on)
    }

    /// Asks for a receive buffer of `bytes`: `SO_RCVBUFFORCE` (past
    /// `net.core.rmem_max`; needs CAP_NET_ADMIN), else `SO_RCVBUF` (capped
    /// there). The kernel drops what arrives while it is full.
    pub fn set_recv_buffer(&self, bytes: usize) -> io::Result<()> {
        let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
        let fd = self.fd.as_fd();
        sys::set_int(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            v,
            "SO_RCVBUFFORCE",
        )
        .or_else(|_| sys::set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, v, "SO_RCVBUF"))
    }

    /// Packets the kernel dropped for want of room in this socket's
    /// receive buffer (`SO_MEMINFO`'s drop count, since the socket opened).
    pub fn drops(&self) -> io::Result<u64> {
        // Up to the drop count (SK_MEMINFO_VARS, linux/sock_diag.h, is 9).
        let mut info = [0u32; libc::SK_MEMINFO_DROPS as usize + 1];
        let mut len = std::mem::size_of_val(&info) as libc::socklen_t;
        // SAFETY: `info` and `len` are valid for writing, `len` holds
        // `info`'s size; the kernel writes at most that many bytes.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_MEMINFO,
                info.as_mut_ptr().cast(),
                &mut len,
            )
        };
        if r != 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(e.kind(), format!("SO_MEMINFO: {e}")));
        }
        let at = libc::SK_MEMINFO_DROPS as usize;
        if (len as usize) < (at + 1) * 4 {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "SO_MEMINFO without a drop count",
            ));
        }
        Ok(u64::from(info[at]))
    }

    /// Receives one packet, IP header first, into `buf` and returns its
    /// length. A packet longer than `buf` is consumed and reported as
    /// `InvalidData`; 65,535 bytes (IPv4) or 65,575 (IPv6) always suffice.
    /// System call errors are the kernel's, unwrapped.
    pub fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.v6 {
            return self.recv_v6(buf);
        }
        // SAFETY: `buf` is valid for writing `buf.len()` bytes; no address
        // is asked for.
        let n = unsafe {
            libc::recvfrom(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_TRUNC,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = n as usize;
        if n > buf.len() {
            return Err(too_long(n, buf.len()));
        }
        Ok(n)
    }

    fn recv_v6(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        const H: usize = ipv6::HEADER_LEN;
        let room = buf.len();
        let Some(payload_room) = room.checked_sub(H) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "receive buffer shorter than an IPv6 header",
            ));
        };
        // SAFETY: sockaddr_in6 and msghdr are plain old data; all-zero is
        // a valid value (null pointers, zero lengths), filled in below.
        let mut src: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        let mut iov = libc::iovec {
            iov_base: buf[H..].as_mut_ptr().cast(),
            iov_len: payload_room,
        };
        msg.msg_name = (&mut src as *mut libc::sockaddr_in6).cast();
        msg.msg_namelen = std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = self.control.as_mut_ptr().cast();
        msg.msg_controllen = self.control.len() as _;
        // SAFETY: `msg` points at `src`, `iov` (which points into `buf`) and
        // `self.control`, all valid for writing the sizes given and alive
        // for the call.
        let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, libc::MSG_TRUNC) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = n as usize;
        if n > payload_room {
            return Err(too_long(H + n, room));
        }
        if msg.msg_flags & libc::MSG_CTRUNC != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "IPv6 receive: ancillary data cut short",
            ));
        }
        let control = &self.control[..];
        let control_len = msg.msg_controllen as usize;
        let mut dst = None;
        let mut hop_limit = 0u8;
        let mut flowinfo = 0u32;
        let mut exts = [0u8; MAX_EXTENSIONS];
        let mut n_exts = 0;
        let mut ext_len = 0usize;
        for (level, kind, data) in sys::Cmsgs::new(control, control_len) {
            if level != libc::IPPROTO_IPV6 {
                continue;
            }
            match kind {
                // struct in6_pktinfo: the address, then the interface index.
                libc::IPV6_PKTINFO => {
                    dst = data
                        .get(..16)
                        .and_then(|a| <[u8; 16]>::try_from(a).ok())
                        .map(Ipv6Addr::from);
                }
                libc::IPV6_HOPLIMIT => {
                    if let Some(b) = data.get(..4) {
                        let v = i32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
                        hop_limit = v.clamp(0, 255) as u8;
                    }
                }
                // The header's first 32 bits without the version, as sent
                // (network order); only present when not 0.
                libc::IPV6_FLOWINFO => {
                    if let Some(b) = data.get(..4) {
                        flowinfo = u32::from_be_bytes([b[0], b[1], b[2], b[3]]) & 0x0fff_ffff;
                    }
                }
                _ => {
                    let Some(ext) = extension(kind) else { continue };
                    // The header's bytes: next header, length in 8-octet
                    // units not counting the first, then the rest.
                    if data.len() < 8 || data.len() != (usize::from(data[1]) + 1) * 8 {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            "IPv6 receive: malformed extension header in ancillary data",
                        ));
                    }
                    if n_exts == MAX_EXTENSIONS {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            "IPv6 receive: too many extension headers",
                        ));
                    }
                    exts[n_exts] = ext.number();
                    n_exts += 1;
                    ext_len += data.len();
                }
            }
        }
        let Some(dst) = dst else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "IPv6 receive: no destination address (IPV6_PKTINFO)",
            ));
        };
        let total = H + ext_len + n;
        if total > room {
            return Err(too_long(total, room));
        }
        let payload_len = u16::try_from(ext_len + n).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "IPv6 receive: jumbogram (payload over 65,535 bytes)",
            )
        })?;
        if ext_len > 0 {
            buf.copy_within(H..H + n, H + ext_len);
            // The chain as the kernel held it: each header names the next
            // one given, the last names the protocol.
            let mut at = H;
            let mut i = 0;
            for (level, kind, data) in sys::Cmsgs::new(control, control_len) {
                if level != libc::IPPROTO_IPV6 || extension(kind).is_none() || i == n_exts {
                    continue;
                }
                // The same messages as above: they fit in `ext_len`.
                buf[at..at + data.len()].copy_from_slice(data);
                buf[at] = if i + 1 < n_exts {
                    exts[i + 1]
                } else {
                    self.protocol
                };
                at += data.len();
                i += 1;
            }
        }
        let next = if n_exts > 0 { exts[0] } else { self.protocol };
        buf[ipv6::field::VER_TC_FLOW].copy_from_slice(&((6u32 << 28) | flowinfo).to_be_bytes());
        buf[ipv6::field::LENGTH].copy_from_slice(&payload_len.to_be_bytes());
        buf[ipv6::field::NXT_HDR] = next;
        buf[ipv6::field::HOP_LIMIT] = hop_limit;
        buf[ipv6::field::SRC_ADDR].copy_from_slice(&src.sin6_addr.s6_addr);
        buf[ipv6::field::DST_ADDR].copy_from_slice(&dst.octets());
        Ok(total)
    }
}

/// The extension header an IPv6 control message type carries.
fn extension(kind: libc::c_int) -> Option<IpProtocol> {
    match kind {
        libc::IPV6_HOPOPTS => Some(IpProtocol::HopByHop),
        libc::IPV6_DSTOPTS => Some(IpProtocol::Ipv6Opts),
        libc::IPV6_RTHDR => Some(IpProtocol::Ipv6Route),
        _ => None,
    }
}

impl AsRawFd for RawIpReceiver {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for RawIpReceiver {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// What a failed [`RawIpSender::send`] means, for a gateway's counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SendFault {
    /// Longer than the device or path MTU allows (`EMSGSIZE`; see the
    /// module docs).
    TooBig,
    /// No route to the destination (`ENETUNREACH`, `EHOSTUNREACH`).
    NoRoute,
    /// A full socket or device queue (`ENOBUFS`, `EAGAIN`): drop or retry.
    QueueFull,
    /// Not a well-formed IP packet (refused here as `InvalidInput`, or
    /// `EINVAL` from the kernel).
    BadPacket,
    /// Anything else (`EPERM` from a firewall rule, ...).
    Other,
}

impl SendFault {
    /// The fault `e` (an error of [`RawIpSender::send`]) stands for.
    pub fn of(e: &io::Error) -> SendFault {
        match e.raw_os_error() {
            Some(libc::EMSGSIZE) => SendFault::TooBig,
            Some(libc::ENETUNREACH) | Some(libc::EHOSTUNREACH) => SendFault::NoRoute,
            Some(libc::ENOBUFS) | Some(libc::EAGAIN) => SendFault::QueueFull,
            Some(libc::EINVAL) => SendFault::BadPacket,
            Some(_) => SendFault::Other,
            None if e.kind() == io::ErrorKind::InvalidInput => SendFault::BadPacket,
            None => SendFault::Other,
        }
    }
}

/// Sends complete IPv4 and IPv6 packets, header included, each to the
/// destination its header names (see the module docs for what the kernel
/// changes and for size limits).
#[derive(Debug)]
pub struct RawIpSender {
    v4: Option<OwnedFd>,
    v6: Option<OwnedFd>,
}

impl RawIpSender {
    /// Opens an `IPPROTO_RAW` socket for each family, in the calling
    /// thread's network namespace. A family the kernel lacks
    /// (`EAFNOSUPPORT`) is left out and sending to it fails. Needs
    /// CAP_NET_RAW.
    pub fn open() -> io::Result<RawIpSender> {
        let open = |family, what| match sys::socket_raw(family, libc::SOCK_RAW, libc::IPPROTO_RAW) {
            Ok(fd) => Ok(Some(fd)),
            Err(e) if e.raw_os_error() == Some(libc::EAFNOSUPPORT) => Ok(None),
            Err(e) => Err(sys::context(e, what)),
        };
        let sender = RawIpSender {
            v4: open(
                libc::AF_INET,
                "AF_INET, IPPROTO_RAW (needs root or CAP_NET_RAW)",
            )?,
            v6: open(
                libc::AF_INET6,
                "AF_INET6, IPPROTO_RAW (needs root or CAP_NET_RAW)",
            )?,
        };
        if sender.v4.is_none() && sender.v6.is_none() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "raw IP sockets: neither IPv4 nor IPv6 is available",
            ));
        }
        Ok(sender)
    }

    /// Sends every packet out of `interface` only (`SO_BINDTODEVICE`).
    pub fn bind_device(&self, interface: &str) -> io::Result<()> {
        for fd in self.v4.iter().chain(&self.v6) {
            sys::bind_device(fd.as_fd(), interface)?;
        }
        Ok(())
    }

    /// Makes [`RawIpSender::send`] fail with `EAGAIN` instead of waiting
    /// for room in the socket's buffer.
    pub fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        for fd in self.v4.iter().chain(&self.v6) {
            sys::set_nonblocking(fd.as_fd(), on)?;
        }
        Ok(())
    }

    /// Sends one complete packet; the version nibble picks the family and
    /// the header's destination the route. The header must be whole and
    /// its length field must match `packet.len()` (else `InvalidInput`).
    /// System call errors are the kernel's, unwrapped; [`SendFault::of`]
    /// sorts them.
    pub fn send(&self, packet: &[u8]) -> io::Result<()> {
        let (fd, dst) = match packet.first().map(|b| b >> 4) {
            Some(ipv4::VERSION) => {
                let dst = check_v4(packet)?;
                (&self.v4, SocketAddr::new(IpAddr::V4(dst), 0))
            }
            Some(ipv6::VERSION) => {
                let dst = check_v6(packet)?;
                (&self.v6, SocketAddr::new(IpAddr::V6(dst), 0))
            }
            _ => return Err(bad_packet("not an IPv4 or IPv6 packet")),
        };
        let Some(fd) = fd else {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "this host has no raw socket of the packet's IP version",
            ));
        };
        let (ss, len) = sys::to_sockaddr(dst);
        // SAFETY: `packet` and `ss` are valid for reading the lengths given;
        // the kernel only reads them.
        let r = unsafe {
            libc::sendto(
                fd.as_raw_fd(),
                packet.as_ptr().cast(),
                packet.len(),
                0,
                (&ss as *const libc::sockaddr_storage).cast(),
                len,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        if r as usize != packet.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("raw send took {r} of {} bytes", packet.len()),
            ));
        }
        Ok(())
    }
}

/// An IPv4 packet's destination, if its header is whole and its total
/// length is the packet's.
fn check_v4(p: &[u8]) -> io::Result<Ipv4Addr> {
    let ihl = usize::from(p.first().map_or(0, |b| b & 0x0f)) * 4;
    if p.len() < ipv4::HEADER_LEN || ihl < ipv4::HEADER_LEN || ihl > p.len() {
        return Err(bad_packet("IPv4 header cut short"));
    }
    let total = u16::from_be_bytes([
        p[ipv4::field::LENGTH.start],
        p[ipv4::field::LENGTH.start + 1],
    ]);
    if usize::from(total) != p.len() {
        return Err(bad_packet("IPv4 total length is not the packet's length"));
    }
    let mut a = [0u8; 4];
    a.copy_from_slice(&p[ipv4::field::DST_ADDR]);
    Ok(Ipv4Addr::from(a))
}

/// An IPv6 packet's destination, if its header is whole and its payload
/// length is the rest of the packet (no jumbograms).
fn check_v6(p: &[u8]) -> io::Result<Ipv6Addr> {
    if p.len() < ipv6::HEADER_LEN {
        return Err(bad_packet("IPv6 header cut short"));
    }
    let len = u16::from_be_bytes([
        p[ipv6::field::LENGTH.start],
        p[ipv6::field::LENGTH.start + 1],
    ]);
    if usize::from(len) + ipv6::HEADER_LEN != p.len() {
        return Err(bad_packet(
            "IPv6 payload length is not the rest of the packet",
        ));
    }
    let mut a = [0u8; 16];
    a.copy_from_slice(&p[ipv6::field::DST_ADDR]);
    Ok(Ipv6Addr::from(a))
}

/// The path MTU towards `dst` as the calling thread's network namespace
/// knows it (its route, or what ICMP "too big" taught it): the largest
/// packet [`RawIpSender::send`] can send there unfragmented.
pub fn path_mtu(dst: IpAddr) -> io::Result<u32> {
    path_mtu_via(dst, None)
}

/// [`path_mtu`] out of `device` only, as a sender bound to it
/// ([`RawIpSender::bind_device`]) is routed: routes through other devices
/// (a TUN's route to the same address) are passed over.
pub fn path_mtu_via(dst: IpAddr, device: Option<&str>) -> io::Result<u32> {
    let (family, level, opt) = match dst {
        IpAddr::V4(_) => (libc::AF_INET, libc::IPPROTO_IP, libc::IP_MTU),
        IpAddr::V6(_) => (libc::AF_INET6, libc::IPPROTO_IPV6, libc::IPV6_MTU),
    };
    let fd = sys::socket(family, libc::SOCK_DGRAM, 0, "SOCK_DGRAM, for the path MTU")?;
    if let Some(device) = device {
        sys::bind_device(fd.as_fd(), device)?;
    }
    let (ss, len) = sys::to_sockaddr(SocketAddr::new(dst, NAT_T_PORT));
    // SAFETY: `ss` is a valid sockaddr of `len` bytes; connecting a UDP
    // socket only looks the route up, nothing is sent.
    let r = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&ss as *const libc::sockaddr_storage).cast(),
            len,
        )
    };
    if r != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("route to {dst}: {e}")));
    }
    let mtu = sys::get_int(fd.as_fd(), level, opt, "path MTU")?;
    Ok(mtu.max(0) as u32)
}

/// One datagram received by [`UdpEncap::recv`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Datagram {
    /// Payload bytes at the start of the buffer.
    pub len: usize,
    /// The sender's address and port (the NAT's, behind one).
    pub src: SocketAddr,
    /// The address it was sent to (useful for a socket bound to the
    /// wildcard address).
    pub dst: IpAddr,
    /// The interface it came in on.
    pub ifindex: u32,
}

/// A UDP socket for ESP in UDP (RFC 3948), usually on port [`NAT_T_PORT`].
/// It receives and sends the UDP payload: an ESP packet (first four bytes,
/// the SPI, not 0), a non-ESP marker (four zero bytes) and an IKE message,
/// or a one-byte 0xFF NAT keepalive. One family per socket: an IPv6 one is
/// `IPV6_V6ONLY`.
#[derive(Debug)]
pub struct UdpEncap {
    fd: OwnedFd,
    local: SocketAddr,
}

impl UdpEncap {
    /// Binds to `addr` (`0.0.0.0:4500`, `[::]:4500`, one address; port 0
    /// picks a free one) in the calling thread's network namespace.
    pub fn bind(addr: SocketAddr) -> io::Result<UdpEncap> {
        let (family, what) = match addr {
            SocketAddr::V4(_) => (libc::AF_INET, "AF_INET, SOCK_DGRAM"),
            SocketAddr::V6(_) => (libc::AF_INET6, "AF_INET6, SOCK_DGRAM"),
        };
        let fd = sys::socket(family, libc::SOCK_DGRAM, libc::IPPROTO_UDP, what)?;
        if addr.is_ipv6() {
            sys::set_int(
                fd.as_fd(),
                libc::IPPROTO_IPV6,
                libc::IPV6_V6ONLY,
                1,
                "IPV6_V6ONLY",
            )?;
            sys::set_int(
                fd.as_fd(),
                libc::IPPROTO_IPV6,
                libc::IPV6_RECVPKTINFO,
                1,
                "IPV6_RECVPKTINFO",
            )?;
        } else {
            sys::set_int(
                fd.as_fd(),
                libc::IPPROTO_IP,
                libc::IP_PKTINFO,
                1,
                "IP_PKTINFO",
            )?;
        }
        let (ss, len) = sys::to_sockaddr(addr);
        // SAFETY: `ss` is a valid sockaddr of `len` bytes; the kernel only reads it.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&ss as *const libc::sockaddr_storage).cast(),
                len,
            )
        };
        if r != 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(e.kind(), format!("bind UDP {addr}: {e}")));
        }
        // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
        let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        // SAFETY: `ss` and `len` are valid for writing; `len` holds `ss`'s size.
        let r = unsafe {
            libc::getsockname(
                fd.as_raw_fd(),
                (&mut ss as *mut libc::sockaddr_storage).cast(),
                &mut len,
            )
        };
        let local = match (r, sys::from_sockaddr(&ss, len)) {
            (0, Some(a)) => a,
            _ => addr,
        };
        Ok(UdpEncap { fd, local })
    }

    /// The address bound to, with the port the kernel picked for port 0.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Makes [`UdpEncap::recv`] and [`UdpEncap::send_to`] return
    /// `WouldBlock` instead of waiting.
    pub fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        sys::set_nonblocking(self.fd.as_fd(), on)
    }

    /// Receives one datagram's payload into `buf`. A payload longer than
    /// `buf` is consumed and reported as `InvalidData`. System call errors
    /// are the kernel's, unwrapped.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Datagram> {
        // SAFETY: sockaddr_storage and msghdr are plain old data; all-zero
        // is a valid value (null pointers, zero lengths), filled in below.
        let mut src: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        let mut control = [0u8; 128];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        msg.msg_name = (&mut src as *mut libc::sockaddr_storage).cast();
        msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = control.len() as _;
        // SAFETY: `msg` points at `src`, `iov` (which points at `buf`) and
        // `control`, all valid for writing the sizes given and alive for
        // the call.
        let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, libc::MSG_TRUNC) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = n as usize;
        if n > buf.len() {
            return Err(too_long(n, buf.len()));
        }
        let Some(src) = sys::from_sockaddr(&src, msg.msg_namelen) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "UDP receive: no IP source address",
            ));
        };
        let mut dst = None;
        let mut ifindex = 0;
        for (level, kind, data) in sys::Cmsgs::new(&control, msg.msg_controllen as usize) {
            match (level, kind) {
                // struct in_pktinfo: ifindex, local address, header destination.
                (libc::IPPROTO_IP, libc::IP_PKTINFO) if data.len() >= 12 => {
                    ifindex = u32::from_ne_bytes([data[0], data[1], data[2], data[3]]);
                    dst = Some(IpAddr::from([data[8], data[9], data[10], data[11]]));
                }
                // struct in6_pktinfo: destination, then ifindex.
                (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO) if data.len() >= 20 => {
                    let mut a = [0u8; 16];
                    a.copy_from_slice(&data[..16]);
                    dst = Some(IpAddr::from(a));
                    ifindex = u32::from_ne_bytes([data[16], data[17], data[18], data[19]]);
                }
                _ => {}
            }
        }
        let dst = dst.unwrap_or(self.local.ip());
        Ok(Datagram {
            len: n,
            src,
            dst,
            ifindex,
        })
    }

    /// Sends `payload` to `dst` from the bound port, with the source
    /// address the kernel picks for the route.
    pub fn send_to(&self, payload: &[u8], dst: SocketAddr) -> io::Result<()> {
        self.send(payload, dst, None)
    }

    /// Sends `payload` to `dst` from `src`, one of this host's addresses
    /// (`IP_PKTINFO`/`IPV6_PKTINFO`): a socket bound to the wildcard
    /// address answers a peer from the address the peer wrote to
    /// ([`Datagram::dst`]), as NAT-T needs, where the kernel's choice might
    /// be another.
    pub fn send_from(&self, payload: &[u8], src: IpAddr, dst: SocketAddr) -> io::Result<()> {
        self.send(payload, dst, Some(src))
    }

    fn send(&self, payload: &[u8], dst: SocketAddr, src: Option<IpAddr>) -> io::Result<()> {
        let (ss, len) = sys::to_sockaddr(dst);
        let mut iov = libc::iovec {
            iov_base: payload.as_ptr() as *mut libc::c_void,
            iov_len: payload.len(),
        };
        // SAFETY: msghdr is plain old data; all-zero (null pointers, zero
        // lengths) is a valid value, filled in below.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = (&ss as *const libc::sockaddr_storage) as *mut libc::c_void;
        msg.msg_namelen = len;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        // Room for one control message of either pktinfo, aligned for cmsghdr.
        let mut control = [0u64; 8];
        if let Some(src) = src {
            let (level, kind, data_len) = match (src, self.local) {
                (IpAddr::V4(_), SocketAddr::V4(_)) => (
                    libc::IPPROTO_IP,
                    libc::IP_PKTINFO,
                    std::mem::size_of::<libc::in_pktinfo>(),
                ),
                (IpAddr::V6(_), SocketAddr::V6(_)) => (
                    libc::IPPROTO_IPV6,
                    libc::IPV6_PKTINFO,
                    std::mem::size_of::<libc::in6_pktinfo>(),
                ),
                _ => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!(
                            "source {src} is not of the socket's family ({})",
                            self.local
                        ),
                    ))
                }
            };
            // SAFETY: CMSG_SPACE and CMSG_LEN are arithmetic only.
            let (space, cmsg_len) = unsafe {
                (
                    libc::CMSG_SPACE(data_len as libc::c_uint) as usize,
                    libc::CMSG_LEN(data_len as libc::c_uint) as usize,
                )
            };
            debug_assert!(space <= std::mem::size_of_val(&control));
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = space as _;
            // SAFETY: `msg` has `space` bytes of control buffer, enough for
            // one cmsghdr and `data_len` bytes of data (the sizes above fit
            // `control`, 64 bytes aligned for cmsghdr), so CMSG_FIRSTHDR
            // returns a pointer to its start and CMSG_DATA one inside it;
            // the pktinfo is written unaligned.
            unsafe {
                let cmsg = libc::CMSG_FIRSTHDR(&msg);
                (*cmsg).cmsg_level = level;
                (*cmsg).cmsg_type = kind;
                (*cmsg).cmsg_len = cmsg_len as _;
                let data = libc::CMSG_DATA(cmsg);
                match src {
                    IpAddr::V4(a) => std::ptr::write_unaligned(
                        data.cast::<libc::in_pktinfo>(),
                        libc::in_pktinfo {
                            ipi_ifindex: 0,
                            ipi_spec_dst: libc::in_addr {
                                s_addr: u32::from_ne_bytes(a.octets()),
                            },
                            ipi_addr: libc::in_addr { s_addr: 0 },
                        },
                    ),
                    IpAddr::V6(a) => std::ptr::write_unaligned(
                        data.cast::<libc::in6_pktinfo>(),
                        libc::in6_pktinfo {
                            ipi6_addr: libc::in6_addr {
                                s6_addr: a.octets(),
                            },
                            ipi6_ifindex: 0,
                        },
                    ),
                }
            }
        }
        // SAFETY: `msg` points at `ss`, `iov` (which points at `payload`)
        // and `control`, all valid for the lengths given and alive for the
        // call; the kernel only reads them.
        let r = unsafe { libc::sendmsg(self.fd.as_raw_fd(), &msg, 0) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl AsRawFd for UdpEncap {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for UdpEncap {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(total: u16, ihl: u8) -> Vec<u8> {
        let mut p = vec![0u8; usize::from(total)];
        p[0] = 0x40 | ihl;
        p[2..4].copy_from_slice(&total.to_be_bytes());
        p[16..20].copy_from_slice(&[192, 0, 2, 9]);
        p
    }

    #[test]
    fn headers_are_checked_before_sending() {
        assert_eq!(check_v4(&v4(28, 5)).unwrap(), Ipv4Addr::new(192, 0, 2, 9));
        let mut long = v4(28, 5);
        long.push(0);
        for bad in [v4(28, 4), v4(28, 8), long, vec![0x45; 19], vec![]] {
            assert_eq!(
                check_v4(&bad).unwrap_err().kind(),
                io::ErrorKind::InvalidInput
            );
        }
        let mut p = vec![0u8; 48];
        p[0] = 0x60;
        p[4..6].copy_from_slice(&8u16.to_be_bytes());
        p[39] = 1;
        assert_eq!(check_v6(&p).unwrap(), "::1".parse::<Ipv6Addr>().unwrap());
        assert!(check_v6(&p[..47]).is_err());
        assert!(check_v6(&p[..39]).is_err());
    }

    #[test]
    fn faults_are_sorted_for_counting() {
        let os = io::Error::from_raw_os_error;
        assert_eq!(SendFault::of(&os(libc::EMSGSIZE)), SendFault::TooBig);
        assert_eq!(SendFault::of(&os(libc::ENETUNREACH)), SendFault::NoRoute);
        assert_eq!(SendFault::of(&os(libc::ENOBUFS)), SendFault::QueueFull);
        assert_eq!(SendFault::of(&os(libc::EPERM)), SendFault::Other);
        assert_eq!(SendFault::of(&bad_packet("x")), SendFault::BadPacket);
    }

    #[test]
    fn a_sender_refuses_what_is_not_ip_without_a_system_call() {
        // The check comes before the socket is needed.
        let s = RawIpSender { v4: None, v6: None };
        for bad in [&[][..], &[0x20; 40][..], &[0x45, 0, 0, 20][..]] {
            let e = s.send(bad).unwrap_err();
            assert_eq!(SendFault::of(&e), SendFault::BadPacket, "{e}");
        }
        let e = s.send(&v4(20, 5)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Unsupported);
    }
}
