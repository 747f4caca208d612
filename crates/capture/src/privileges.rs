//! Dropping root after the capture socket is open, as `tcpdump -Z`.

use std::ffi::{CStr, CString};
use std::io;
use std::path::Path;

/// A user to switch to, looked up before anything is opened so that a
/// wrong name fails at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    /// The name given on the command line.
    pub name: String,
    /// The login name from the password database (for `initgroups`).
    login: CString,
    /// User id.
    pub uid: libc::uid_t,
    /// Primary group id.
    pub gid: libc::gid_t,
}

impl User {
    /// Looks `name` up in the password database (`getpwnam_r`).
    pub fn lookup(name: &str) -> io::Result<User> {
        let c_name = CString::new(name).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("-Z {name:?}: user name contains NUL"),
            )
        })?;
        let mut pwd: libc::passwd = unsafe_zeroed_passwd();
        let mut buf = vec![0 as libc::c_char; 16 * 1024];
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: all pointers are valid for the sizes given; `result` is set
        // to `&mut pwd` or null, and `pwd`'s strings point into `buf`, which
        // outlives their use below.
        let r = unsafe {
            libc::getpwnam_r(
                c_name.as_ptr(),
                &mut pwd,
                buf.as_mut_ptr(),
                buf.len(),
                &mut result,
            )
        };
        if r != 0 {
            let e = io::Error::from_raw_os_error(r);
            return Err(io::Error::new(
                e.kind(),
                format!("-Z {name}: cannot read the password database: {e}"),
            ));
        }
        if result.is_null() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("-Z {name}: no such user"),
            ));
        }
        // SAFETY: getpwnam_r succeeded, so `pwd.pw_name` is a NUL-terminated
        // string in `buf` (see above).
        let login = unsafe { CStr::from_ptr(pwd.pw_name) }.to_owned();
        Ok(User {
            name: name.to_string(),
            login,
            uid: pwd.pw_uid,
            gid: pwd.pw_gid,
        })
    }
}

/// Switches the process to `user`'s uid, gid and supplementary groups.
/// Call it after the packet socket and ring are set up: they stay usable,
/// while files opened afterwards are created as `user`. On Linux the switch
/// applies to every thread of the process.
pub fn drop_privileges(user: &User) -> io::Result<()> {
    let name = &user.name;
    // Order matters: groups and gid while still root, uid last.
    // SAFETY: plain system calls with valid arguments (`login` is a
    // NUL-terminated string); results are checked.
    unsafe {
        if libc::initgroups(user.login.as_ptr(), user.gid) != 0 {
            return Err(os_error(&format!("-Z {name}: initgroups")));
        }
        if libc::setgid(user.gid) != 0 {
            return Err(os_error(&format!("-Z {name}: setgid")));
        }
        if libc::setuid(user.uid) != 0 {
            return Err(os_error(&format!("-Z {name}: setuid")));
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

/// After [`drop_privileges`]: whether the current user can create the
/// output file `path`, checked now rather than at the first packet, by
/// creating (and at once removing) a probe file of its own beside it.
/// Standard output (`-`) and names whose directory holds strftime fields
/// (`-G`: it exists only once the first file is named) are not checked.
pub fn check_can_create(path: &Path) -> io::Result<()> {
    if path.as_os_str() == "-" {
        return Ok(());
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if dir.to_string_lossy().contains('%') {
        return Ok(());
    }
    let probe = dir.join(format!(".kansoku-{}.probe", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Whether this process runs as root (its effective user id is 0), as
/// network namespaces, veth pairs, raw sockets and mounts need.
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_found_and_a_missing_user_is_named() {
        let root = User::lookup("root").unwrap();
        assert_eq!((root.uid, root.gid), (0, 0));
        let e = User::lookup("no-such-user-xyz").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert_eq!(e.to_string(), "-Z no-such-user-xyz: no such user");
        assert!(User::lookup("a\0b").is_err());
    }
}
