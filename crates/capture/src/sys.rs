//! System calls shared by the TUN device and the IP sockets: socket
//! creation, integer options, non-blocking mode, socket addresses.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// `socket(2)` with `SOCK_CLOEXEC`; the error is the kernel's, unwrapped.
pub(crate) fn socket_raw(
    domain: libc::c_int,
    ty: libc::c_int,
    protocol: libc::c_int,
) -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call; the result is checked before use.
    let raw = unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, protocol) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a new descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// [`socket_raw`] with `what` naming the socket in the error.
pub(crate) fn socket(
    domain: libc::c_int,
    ty: libc::c_int,
    protocol: libc::c_int,
    what: &str,
) -> io::Result<OwnedFd> {
    socket_raw(domain, ty, protocol).map_err(|e| context(e, what))
}

/// `e` with `socket(what): ` before its message, its kind kept.
pub(crate) fn context(e: io::Error, what: &str) -> io::Error {
    io::Error::new(e.kind(), format!("socket({what}): {e}"))
}

/// `setsockopt(2)` with an `int` value; `what` names the option in the error.
pub(crate) fn set_int(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
    what: &str,
) -> io::Result<()> {
    setsockopt(&fd, level, name, &value, &format!("setsockopt({what})"))
}

/// `getsockopt(2)` of an `int` value.
pub(crate) fn get_int(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    what: &str,
) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` and `len` are valid for writing, `len` holds `value`'s size.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if r != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("getsockopt({what}): {e}")));
    }
    Ok(value)
}

/// Sets or clears `O_NONBLOCK`.
pub(crate) fn set_nonblocking(fd: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    // SAFETY: F_GETFL on a descriptor we borrow; no memory is passed.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    let flags = if on {
        flags | libc::O_NONBLOCK
    } else {
        flags & !libc::O_NONBLOCK
    };
    // SAFETY: F_SETFL with an int argument; no memory is passed.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `addr` as a `sockaddr_storage` and the length of the family's sockaddr.
pub(crate) fn to_sockaddr(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than sockaddr_in and aligned for it.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo().to_be(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than sockaddr_in6 and aligned for it.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

/// The address in `ss` (`len` bytes filled by the kernel), if it is IPv4 or IPv6.
pub(crate) fn from_sockaddr(
    ss: &libc::sockaddr_storage,
    len: libc::socklen_t,
) -> Option<SocketAddr> {
    let len = len as usize;
    match libc::c_int::from(ss.ss_family) {
        libc::AF_INET if len >= std::mem::size_of::<libc::sockaddr_in>() => {
            // SAFETY: the family says `ss` holds a sockaddr_in, and it is aligned for one.
            let sin =
                unsafe { &*(ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes()),
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 if len >= std::mem::size_of::<libc::sockaddr_in6>() => {
            // SAFETY: the family says `ss` holds a sockaddr_in6, and it is aligned for one.
            let sin6 =
                unsafe { &*(ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                u32::from_be(sin6.sin6_flowinfo),
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// `SO_BINDTODEVICE`: the socket sends and receives through `interface` only.
pub(crate) fn bind_device(fd: BorrowedFd<'_>, interface: &str) -> io::Result<()> {
    if interface.is_empty() || interface.len() >= libc::IFNAMSIZ || interface.contains('\0') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{interface:?}: not an interface name"),
        ));
    }
    // SAFETY: the name's bytes are valid for the length passed; the kernel
    // copies at most that many and adds the terminating NUL itself.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_BINDTODEVICE,
            interface.as_ptr().cast(),
            interface.len() as libc::socklen_t,
        )
    };
    if r != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("SO_BINDTODEVICE {interface}: {e}"),
        ));
    }
    Ok(())
}

/// The control messages in the first `len` bytes of a `recvmsg(2)` control
/// buffer: (level, type, data). Read through checked slices, so any buffer
/// only ends the walk early.
pub(crate) struct Cmsgs<'a> {
    buf: &'a [u8],
    off: usize,
}

impl<'a> Cmsgs<'a> {
    pub(crate) fn new(buf: &'a [u8], len: usize) -> Cmsgs<'a> {
        Cmsgs {
            buf: &buf[..len.min(buf.len())],
            off: 0,
        }
    }
}

/// `CMSG_ALIGN`: control messages start at multiples of `size_t`.
fn cmsg_align(n: usize) -> usize {
    n.next_multiple_of(std::mem::size_of::<usize>())
}

impl<'a> Iterator for Cmsgs<'a> {
    type Item = (libc::c_int, libc::c_int, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let header = std::mem::size_of::<libc::cmsghdr>();
        let rest = self.buf.get(self.off..)?;
        if rest.len() < header {
            return None;
        }
        // SAFETY: `rest` holds at least `header` bytes; cmsghdr is plain old
        // data, read unaligned.
        let h: libc::cmsghdr = unsafe { std::ptr::read_unaligned(rest.as_ptr().cast()) };
        let len = h.cmsg_len as usize;
        let data = rest.get(cmsg_align(header)..len)?;
        self.off = self.off.checked_add(cmsg_align(len))?;
        Some((h.cmsg_level, h.cmsg_type, data))
    }
}

/// The last OS error with `what` before its message, its kind kept.
pub(crate) fn last_error(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// The index of network interface `name` (`if_nametoindex(3)`), or the
/// OS's error naming it.
pub(crate) fn interface_index(name: &str) -> io::Result<u32> {
    let c = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name contains NUL"))?;
    // SAFETY: `c` is a valid NUL-terminated string.
    let ifindex = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if ifindex == 0 {
        return Err(last_error(&format!("{name}: no such interface")));
    }
    Ok(ifindex)
}

/// `setsockopt(2)` with any plain value; `what` names it in the error.
pub(crate) fn setsockopt<T>(
    fd: &impl AsRawFd,
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

/// `getsockopt(2)` into a plain value: the length the kernel wrote.
pub(crate) fn getsockopt<T>(
    fd: &impl AsRawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &mut T,
    what: &str,
) -> io::Result<usize> {
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `value` points to a live `T` with room for `len` bytes, which
    // the kernel writes (T is plain old data).
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (value as *mut T).cast(),
            &mut len,
        )
    };
    if r == 0 {
        Ok(len as usize)
    } else {
        Err(last_error(what))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_addresses_go_there_and_back() {
        for a in [
            "192.0.2.7:4500".parse::<SocketAddr>().unwrap(),
            "[2001:db8::1]:500".parse().unwrap(),
            SocketAddr::V6(SocketAddrV6::new("fe80::1".parse().unwrap(), 9, 0x12345, 3)),
        ] {
            let (ss, len) = to_sockaddr(a);
            assert_eq!(from_sockaddr(&ss, len), Some(a));
            assert_eq!(from_sockaddr(&ss, len - 1), None);
        }
    }
}
