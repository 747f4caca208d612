//! A network namespace of the bench's own with a veth pair in it: traffic
//! sent into one end comes out of the other and nowhere else, so a bench
//! measures only its own packets and touches no real interface. Needs root
//! (CAP_SYS_ADMIN and CAP_NET_ADMIN). The namespace, and with it the pair,
//! is deleted when the [`Netns`] is dropped, however the bench ends.

use std::ffi::OsStr;
use std::process::Command;

use capture::netns::Namespace;
use pipeline::{Error, Result};

use crate::harness::peers::{must, run_quiet};

/// The bench's network namespace and veth pair, removed when dropped.
#[derive(Debug)]
pub struct Netns {
    /// `kbc-PID-N`: unique on the host while this process lives.
    ns: Namespace,
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
        let ns = Namespace::create("kbc").map_err(|e| {
            Error::input(format!(
                "{e} (bench capture needs root: CAP_SYS_ADMIN and CAP_NET_ADMIN)"
            ))
        })?;
        // From here on, Drop removes the namespace whatever fails.
        let ns = Netns {
            ns,
            tx: "kbc-tx".to_string(),
            rx: "kbc-rx".to_string(),
        };
        ns.exec(&[
            "sysctl",
            "-qw",
            "net.ipv6.conf.all.disable_ipv6=1",
            "net.ipv6.conf.default.disable_ipv6=1",
        ])?;
        let ip = |args: &[&str]| ns.ns.ip(args).map_err(|e| Error::input(e.to_string()));
        ip(&[
            "link", "add", &ns.tx, "type", "veth", "peer", "name", &ns.rx,
        ])?;
        ip(&["link", "set", &ns.tx, "up"])?;
        ip(&["link", "set", &ns.rx, "up"])?;
        Ok(ns)
    }

    pub fn name(&self) -> &str {
        self.ns.name()
    }

    /// Runs `argv` inside the namespace to completion.
    pub fn exec(&self, argv: &[&str]) -> Result<Vec<u8>> {
        must(self.command(argv[0]).args(&argv[1..]))
    }

    /// A command run inside the namespace (`ip netns exec` execs it in
    /// place, so the child's pid is the program's own).
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", self.ns.name()]).arg(program);
        c
    }

    /// [`command`](Self::command), pinned to `cpu` when given (`taskset`
    /// execs the program in place, so its pid is the program's).
    pub fn command_on(&self, cpu: Option<usize>, program: impl AsRef<OsStr>) -> Command {
        match cpu {
            Some(cpu) => {
                let mut c = self.command("taskset");
                c.args(["-c", &cpu.to_string()]).arg(program);
                c
            }
            None => self.command(program),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_have_unique_names_a_veth_pair_and_go_away() {
        if !testkit::require_root("netns") {
            return;
        }
        let a = Netns::create().unwrap();
        let b = Netns::create().unwrap();
        assert_ne!(a.name(), b.name());
        assert!(list().iter().any(|n| n == a.name()) && list().iter().any(|n| n == b.name()));
        let links = String::from_utf8(a.exec(&["ip", "-o", "link"]).unwrap()).unwrap();
        assert!(
            links.contains("kbc-tx@kbc-rx") && links.contains("kbc-rx@kbc-tx"),
            "{links}"
        );
        assert!(
            links.contains("state UP") || links.contains(",UP"),
            "{links}"
        );
        let (na, nb) = (a.name().to_string(), b.name().to_string());
        drop(a);
        drop(b);
        let left = list();
        assert!(!left.contains(&na) && !left.contains(&nb), "{left:?}");
    }
}
