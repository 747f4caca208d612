//! Sending frames out of an interface: an AF_PACKET socket and `sendmmsg(2)`,
//! many frames per system call.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// Frames per `sendmmsg` call at most.
pub const MAX_BATCH: usize = 64;

/// An AF_PACKET socket bound to one interface, for sending whole frames.
pub struct PacketSender {
    fd: OwnedFd,
}

impl PacketSender {
    /// Opens the socket and binds it to `interface`. Needs CAP_NET_RAW.
    pub fn open(interface: &str) -> io::Result<PacketSender> {
        let name = CString::new(interface).map_err(|_| {
            io::Error::new(io::ErrorKind::InvalidInput, "interface name contains NUL")
        })?;
        // SAFETY: `name` is a valid NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{interface}: no such interface"),
            ));
        }
        // Protocol 0: this socket sends only; it receives nothing.
        let fd = crate::sys::socket_raw(libc::AF_PACKET, libc::SOCK_RAW, 0).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("socket(AF_PACKET) (sending needs root or CAP_NET_RAW): {e}"),
            )
        })?;
        // SAFETY: sockaddr_ll is plain old data; all-zero is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: `sll` is a valid sockaddr_ll of the size passed.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r != 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("bind to {interface}: {e}"),
            ));
        }
        Ok(PacketSender { fd })
    }

    /// Sends up to [`MAX_BATCH`] frames in one system call; returns how many
    /// the kernel took (the rest should be offered again). A full device
    /// queue (`ENOBUFS`, `EAGAIN`) takes nothing and is not an error.
    pub fn send_batch(&self, frames: &[&[u8]]) -> io::Result<usize> {
        let n = frames.len().min(MAX_BATCH);
        if n == 0 {
            return Ok(0);
        }
        let mut iov = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; MAX_BATCH];
        // SAFETY: mmsghdr is plain old data; all-zero (null pointers, zero
        // lengths) is a valid value, filled in below.
        let mut msgs: [libc::mmsghdr; MAX_BATCH] = unsafe { std::mem::zeroed() };
        for (v, f) in iov.iter_mut().zip(&frames[..n]) {
            v.iov_base = f.as_ptr() as *mut libc::c_void;
            v.iov_len = f.len();
        }
        let base = iov.as_mut_ptr();
        for (i, m) in msgs[..n].iter_mut().enumerate() {
            m.msg_hdr.msg_iov = base.wrapping_add(i);
            m.msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: `msgs[..n]` point at `iov[..n]`, which point at the caller's
        // frames; all outlive the call and the kernel only reads them.
        let r =
            unsafe { libc::sendmmsg(self.fd.as_raw_fd(), msgs.as_mut_ptr(), n as libc::c_uint, 0) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::ENOBUFS) | Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(0),
                _ => Err(io::Error::new(e.kind(), format!("sendmmsg: {e}"))),
            };
        }
        Ok(r as usize)
    }
}
