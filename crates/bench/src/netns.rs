//! A network namespace of the bench's own with a veth pair in it: traffic
//! sent into one end comes out of the other and nowhere else, so a bench
//! measures only its own packets and touches no real interface. Needs root
//! (CAP_SYS_ADMIN and CAP_NET_ADMIN). The namespace, and with it the pair,
//! is deleted when the [`Netns`] is dropped, however the bench ends.

use std::ffi::OsStr;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use pipeline::{Error, Result};

use crate::peers::{must, run_quiet};

/// Namespaces made by this process so far, for unique names.
static MADE: AtomicU32 = AtomicU32::new(0);

/// The bench's network namespace and veth pair, removed when dropped.
#[derive(Debug)]
pub struct Netns {
    /// `kbc-PID-N`: unique on the host while this process lives.
    pub name: String,
    /// The generator sends here.
    pub tx: String,
    /// The capture listens here.
    pub rx: String,
}

impl Netns {
    /// Makes the namespace with loopback up, IPv6 off (no router
    /// solicitations or DAD: only the bench's own frames on the pair), and
    /// the veth pair up. The pair lives inside the namespace, so its names
    /// cannot clash with the host's interfaces.
    pub fn create() -> Result<Netns> {
        let pid = std::process::id();
        let n = MADE.fetch_add(1, Ordering::Relaxed);
        let ns = Netns {
            name: format!("kbc-{pid}-{n}"),
            tx: "kbc-tx".to_string(),
            rx: "kbc-rx".to_string(),
        };
        run_quiet(Command::new("ip").args(["netns", "add", &ns.name])).map_err(|e| {
            Error::input(format!(
                "{e} (bench capture needs root: CAP_SYS_ADMIN and CAP_NET_ADMIN)"
            ))
        })?;
        // From here on, Drop removes the namespace whatever fails.
        let n = &ns.name;
        ns.exec(&[
            "sysctl",
            "-qw",
            "net.ipv6.conf.all.disable_ipv6=1",
            "net.ipv6.conf.default.disable_ipv6=1",
        ])?;
        must(Command::new("ip").args(["-n", n, "link", "set", "lo", "up"]))?;
        must(Command::new("ip").args([
            "-n", n, "link", "add", &ns.tx, "type", "veth", "peer", "name", &ns.rx,
        ]))?;
        must(Command::new("ip").args(["-n", n, "link", "set", &ns.tx, "up"]))?;
        must(Command::new("ip").args(["-n", n, "link", "set", &ns.rx, "up"]))?;
        Ok(ns)
    }

    /// Runs `argv` inside the namespace to completion.
    pub fn exec(&self, argv: &[&str]) -> Result<Vec<u8>> {
        must(self.command(argv[0]).args(&argv[1..]))
    }

    /// A command run inside the namespace (`ip netns exec` execs it in
    /// place, so the child's pid is the program's own).
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name]).arg(program);
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting the namespace deletes the veth pair in it.
        if let Err(e) = run_quiet(Command::new("ip").args(["netns", "del", &self.name])) {
            eprintln!("kansoku: removing network namespace {}: {e}", self.name);
        }
    }
}

/// The host's network namespaces, as `ip netns list` names them.
pub fn list() -> Vec<String> {
    run_quiet(Command::new("ip").args(["netns", "list"]))
        .map(|out| {
            String::from_utf8_lossy(&out)
                .lines()
                .filter_map(|l| l.split_whitespace().next().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether tests that need root (network namespaces, veth pairs, raw
/// sockets) can run. CI runs as root and must run them; elsewhere they
/// are skipped with a note naming `what`. For the tests of every crate
/// (kansoku's tests/common.rs can call it too).
pub fn can_run(what: &str) -> bool {
    let root = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false);
    if !root {
        assert!(
            std::env::var_os("CI").is_none(),
            "{what} tests need root, and CI runs as root"
        );
        eprintln!("skipping: {what} tests need root");
    }
    root
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_have_unique_names_a_veth_pair_and_go_away() {
        if !can_run("netns") {
            return;
        }
        let a = Netns::create().unwrap();
        let b = Netns::create().unwrap();
        assert_ne!(a.name, b.name);
        assert!(list().contains(&a.name) && list().contains(&b.name));
        let links = String::from_utf8(a.exec(&["ip", "-o", "link"]).unwrap()).unwrap();
        assert!(
            links.contains("kbc-tx@kbc-rx") && links.contains("kbc-rx@kbc-tx"),
            "{links}"
        );
        assert!(
            links.contains("state UP") || links.contains(",UP"),
            "{links}"
        );
        let (na, nb) = (a.name.clone(), b.name.clone());
        drop(a);
        drop(b);
        let left = list();
        assert!(!left.contains(&na) && !left.contains(&nb), "{left:?}");
    }
}
