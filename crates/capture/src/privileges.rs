//! Dropping root after the capture socket is open, as `tcpdump -Z`.

use std::ffi::{CStr, CString};
use std::io;

/// Switches the process to `user`'s uid, gid and supplementary groups.
/// Call it after the packet socket and ring are set up: they stay usable,
/// while files opened afterwards are created as `user`.
pub fn drop_privileges(user: &str) -> io::Result<()> {
    let name = CString::new(user)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "user name contains NUL"))?;
    let mut pwd: libc::passwd = unsafe_zeroed_passwd();
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: all pointers are valid for the sizes given; `result` is set to
    // `&mut pwd` or null, and `pwd`'s strings point into `buf`, which
    // outlives their use below.
    let r = unsafe {
        libc::getpwnam_r(
            name.as_ptr(),
            &mut pwd,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        )
    };
    if r != 0 || result.is_null() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("-Z {user}: no such user"),
        ));
    }
    // SAFETY: `pwd.pw_name` is a NUL-terminated string in `buf` (see above).
    let pw_name = unsafe { CStr::from_ptr(pwd.pw_name) }.to_owned();
    let (uid, gid) = (pwd.pw_uid, pwd.pw_gid);
    // Order matters: groups and gid while still root, uid last.
    // SAFETY: plain system calls with valid arguments; results are checked.
    unsafe {
        if libc::initgroups(pw_name.as_ptr(), gid) != 0 {
            return Err(os_error(&format!("-Z {user}: initgroups")));
        }
        if libc::setgid(gid) != 0 {
            return Err(os_error(&format!("-Z {user}: setgid")));
        }
        if libc::setuid(uid) != 0 {
            return Err(os_error(&format!("-Z {user}: setuid")));
        }
    }
    Ok(())
}

fn unsafe_zeroed_passwd() -> libc::passwd {
    // SAFETY: passwd is plain old data (integers and pointers); all-zero is
    // a valid value that getpwnam_r overwrites.
    unsafe { std::mem::zeroed() }
}

fn os_error(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}
