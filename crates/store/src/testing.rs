//! A throwaway ClickHouse for tests and benches: Debian's
//! `clickhouse-server` (scripts/install-deps.sh installs it) started in a
//! directory of its own, on free loopback ports. Where it is missing the
//! caller is told (`None`), except under CI (`CI` set), where that is a
//! failure.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{Client, Credentials, StoreUrl};

/// `clickhouse-server` on the PATH, or in /usr/sbin (where Debian puts it,
/// which a PATH may lack).
fn server_program() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    on_path
        .into_iter()
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|d| d.join("clickhouse-server"))
        .find(|p| p.is_file())
}

/// Whether clickhouse-server is here; under CI its absence is a failure.
fn available() -> bool {
    let have = server_program().is_some();
    if !have {
        assert!(
            std::env::var_os("CI").is_none(),
            "clickhouse-server is missing under CI: scripts/install-deps.sh installs it"
        );
        eprintln!("skipped: no clickhouse-server here");
    }
    have
}

/// The test user's password.
pub const PASSWORD: &str = "pa55-w0rd";

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A throwaway ClickHouse server: its own directory, free loopback ports, a
/// user `kansoku` with password [`PASSWORD`]; killed (SIGKILL) on drop.
pub struct ClickHouse {
    dir: PathBuf,
    http: u16,
    child: Option<Child>,
}

impl ClickHouse {
    /// None where there is no clickhouse-server (a failure under CI).
    pub fn start(dir: &Path) -> Option<ClickHouse> {
        if !available() {
            return None;
        }
        let mut ch = ClickHouse::configure(dir, free_port(), free_port(), "");
        ch.run();
        Some(ch)
    }

    /// Two servers as the two shards of cluster `fleet` (each knows both;
    /// inserts into a Distributed table reach the shards before they
    /// return), in `dir/a` and `dir/b`.
    pub fn start_cluster(dir: &Path) -> Option<(ClickHouse, ClickHouse)> {
        if !available() {
            return None;
        }
        let ports = [(free_port(), free_port()), (free_port(), free_port())];
        let shard = |tcp: u16| {
            format!(
                "<shard><replica><host>127.0.0.1</host><port>{tcp}</port><user>kansoku</user>\
                 <password>{PASSWORD}</password></replica></shard>"
            )
        };
        let remote = format!(
            "<remote_servers><fleet>{}{}</fleet></remote_servers>",
            shard(ports[0].1),
            shard(ports[1].1)
        );
        let mut v = Vec::new();
        for (name, (http, tcp)) in ["a", "b"].into_iter().zip(ports) {
            let d = dir.join(name);
            let _ = std::fs::create_dir_all(&d);
            let mut ch = ClickHouse::configure(&d, http, tcp, &remote);
            ch.run();
            v.push(ch);
        }
        let b = v.pop()?;
        let a = v.pop()?;
        Some((a, b))
    }

    fn configure(dir: &Path, http: u16, tcp: u16, extra: &str) -> ClickHouse {
        let d = dir.display();
        std::fs::write(
            dir.join("config.xml"),
            format!(
                "<?xml version=\"1.0\"?><yandex><logger><level>warning</level><log>{d}/server.log</log>\
                 <errorlog>{d}/err.log</errorlog></logger><http_port>{http}</http_port><tcp_port>{tcp}</tcp_port>\
                 <listen_host>127.0.0.1</listen_host><path>{d}/data/</path><tmp_path>{d}/tmp/</tmp_path>\
                 <user_files_path>{d}/files/</user_files_path><users_config>{d}/users.xml</users_config>\
                 <default_profile>default</default_profile><default_database>default</default_database>\
                 <mark_cache_size>1073741824</mark_cache_size>{extra}</yandex>"
            ),
        )
        .unwrap();
        std::fs::write(
            dir.join("users.xml"),
            format!("<?xml version=\"1.0\"?><yandex><profiles><default><insert_distributed_sync>1</insert_distributed_sync>\
             </default></profiles><users><kansoku><password>{PASSWORD}</password><networks><ip>127.0.0.1</ip></networks>\
             <profile>default</profile><quota>default</quota></kansoku></users><quotas><default/></quotas></yandex>"),
        )
        .unwrap();
        ClickHouse {
            dir: dir.to_path_buf(),
            http,
            child: None,
        }
    }

    /// Starts (again) the server and waits until it answers.
    pub fn run(&mut self) {
        let child = Command::new(server_program().unwrap_or_else(|| "clickhouse-server".into()))
            .arg(format!("--config-file={}/config.xml", self.dir.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        let c = self.client();
        let t0 = Instant::now();
        while c.execute_bare("SELECT 1").is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "clickhouse did not start"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGKILL, as a crash.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill(); // SIGKILL
            let _ = c.wait();
        }
    }

    /// `http://127.0.0.1:PORT/fleet`.
    pub fn url(&self) -> StoreUrl {
        StoreUrl::parse(&format!("http://127.0.0.1:{}/fleet", self.http)).unwrap()
    }

    pub fn client(&self) -> Client {
        Client::new(self.url(), Some(Credentials::new("kansoku", PASSWORD)))
    }
}

impl Drop for ClickHouse {
    fn drop(&mut self) {
        self.kill();
    }
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
        if !ok {
            assert!(
                std::env::var_os("CI").is_none(),
                "mounting a tmpfs failed under CI (the tests run as root there)"
            );
            eprintln!("skipped: cannot mount a tmpfs here (not root)");
            return None;
        }
        Some(Tmpfs(d))
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
