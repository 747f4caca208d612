//! `testkit`: what kansoku's tests share, and only its tests (every crate
//! takes it as a dev-dependency).
//!
//! - One policy for what a test needs and may not find — a program, root,
//!   a data set: [`require`] and its forms [`require_tool`] and
//!   [`require_root`]. Where it is missing the test is skipped with a note;
//!   under CI (`CI` set), where `scripts/install-deps.sh` installs every
//!   tool and the tests run as root, a missing one is a failure, never a
//!   silent pass.
//! - A throwaway ClickHouse ([`clickhouse`], [`clickhouse_cluster`]):
//!   `store::local::LocalServer` under that policy.
//! - A tmpfs of a given size that fills ([`Tmpfs`]).
//! - Network namespaces and the two-namespace veth pair: `capture::netns`'s
//!   [`Namespace`] and [`VethPair`], re-exported, under [`require_root`].

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub use capture::netns::{wait_ping, Namespace, VethEnd, VethPair};
pub use store::local::{find_program, LocalServer as ClickHouse, PASSWORD};

/// Whether the tests run under CI (`CI` set), where nothing may be missing.
pub fn under_ci() -> bool {
    std::env::var_os("CI").is_some()
}

/// The one policy for what a test needs: whether `what` is `present`.
/// When it is not, the test should return; a note says it was skipped
/// here, and under CI the call fails the test instead (scripts/install-
/// deps.sh installs every tool there, and the tests run as root).
pub fn require(what: &str, present: bool) -> bool {
    if !present {
        assert!(
            !under_ci(),
            "{what} is missing under CI: scripts/install-deps.sh installs it, and CI runs as root"
        );
        eprintln!("skipped: {what} is missing here (scripts/install-deps.sh installs it)");
    }
    present
}

/// [`require`] of a program: whether `program` is installed.
pub fn require_tool(program: &str) -> bool {
    require(program, find_program(program).is_some())
}

/// Whether this process runs as root, as network namespaces, veth pairs,
/// raw sockets and mounts need ([`require`]: a failure under CI).
pub fn require_root(what: &str) -> bool {
    require(
        &format!("root (for {what})"),
        capture::privileges::is_root(),
    )
}

/// A throwaway ClickHouse in `dir` (see [`ClickHouse`]), or `None` where
/// clickhouse-server is not installed (a failure under CI). A server that
/// is installed but does not start fails the test.
pub fn clickhouse(dir: &Path) -> Option<ClickHouse> {
    if !require(
        "clickhouse-server",
        store::local::server_program().is_some(),
    ) {
        return None;
    }
    Some(ClickHouse::start(dir).unwrap_or_else(|e| panic!("starting clickhouse-server: {e}")))
}

/// Two throwaway servers as the two shards of cluster `fleet`, in `dir/a`
/// and `dir/b` ([`ClickHouse::start_cluster`]); `None` as [`clickhouse`].
pub fn clickhouse_cluster(dir: &Path) -> Option<(ClickHouse, ClickHouse)> {
    if !require(
        "clickhouse-server",
        store::local::server_program().is_some(),
    ) {
        return None;
    }
    Some(
        ClickHouse::start_cluster(dir)
            .unwrap_or_else(|e| panic!("starting two clickhouse-servers: {e}")),
    )
}

/// A tmpfs of a given size mounted on a new directory (a disk that fills),
/// unmounted on drop. Needs root: None elsewhere, a failure under CI.
pub struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
    pub fn mount(kib: u64) -> Option<Tmpfs> {
        let d = tempfile::tempdir().ok()?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "kansoku-test"])
            .arg(d.path())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        require("a tmpfs mount (root)", ok).then_some(Tmpfs(d))
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }

    /// Fills the file system with one file (`fill`), until it is full.
    pub fn fill(&self) -> PathBuf {
        let f = self.path().join("fill");
        let _ = Command::new("dd")
            .args(["if=/dev/zero", "bs=1M"])
            .arg(format!("of={}", f.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        f
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.0.path()).status();
    }
}
