//! Socket options that neither std nor socket2 exposes.

use std::io;
use std::os::fd::BorrowedFd;

use crate::sys;

/// `IP_BIND_ADDRESS_NO_PORT` (linux/in.h).
const IP_BIND_ADDRESS_NO_PORT: libc::c_int = 24;

/// Lets a socket bound to an address with port 0 take its port at connect
/// time (`IP_BIND_ADDRESS_NO_PORT`), when the kernel knows the destination:
/// one source address can then open a connection per free port *per
/// destination*, not one per port in all.
pub fn bind_address_no_port(fd: BorrowedFd<'_>) -> io::Result<()> {
    sys::set_int(
        fd,
        libc::IPPROTO_IP,
        IP_BIND_ADDRESS_NO_PORT,
        1,
        "IP_BIND_ADDRESS_NO_PORT",
    )
}
