//! A private ClickHouse server for benchmarks and tests: Debian's
//! `clickhouse-server` (scripts/install-deps.sh installs it) started in a
//! directory of its own, on free loopback ports, with one user `kansoku`
//! (password [`PASSWORD`]), killed when dropped. `kansoku bench store` and
//! `bench view` measure against one; the tests take theirs through
//! `testkit`, which skips where the server is missing and fails under CI.

use std::io;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{Client, Credentials, StoreUrl};

/// `program`'s path: on the PATH, or in /usr/sbin or /sbin (where Debian
/// puts servers such as clickhouse-server, which a PATH may lack).
pub fn find_program(program: &str) -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    on_path
        .into_iter()
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// `clickhouse-server`'s path ([`find_program`]).
pub fn server_program() -> Option<PathBuf> {
    find_program("clickhouse-server")
}

/// The program, or an error saying it is not installed.
fn program() -> io::Result<PathBuf> {
    server_program().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            "clickhouse-server is not installed (scripts/install-deps.sh installs it)",
        )
    })
}

/// The password of the server's user `kansoku`.
pub const PASSWORD: &str = "pa55-w0rd";

fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A private ClickHouse server: its own directory, free loopback ports, a
/// user `kansoku` with password [`PASSWORD`]; killed (SIGKILL) on drop.
pub struct LocalServer {
    dir: PathBuf,
    http: u16,
    child: Option<Child>,
}

impl LocalServer {
    /// Starts a server in `dir` and waits until it answers; an error of kind
    /// `NotFound` where clickhouse-server is not installed.
    pub fn start(dir: &Path) -> io::Result<LocalServer> {
        program()?;
        let mut ch = LocalServer::configure(dir, free_port()?, free_port()?, "")?;
        ch.run()?;
        Ok(ch)
    }

    /// Two servers as the two shards of cluster `fleet` (each knows both;
    /// inserts into a Distributed table reach the shards before they
    /// return), in `dir/a` and `dir/b`.
    pub fn start_cluster(dir: &Path) -> io::Result<(LocalServer, LocalServer)> {
        program()?;
        let ports = [(free_port()?, free_port()?), (free_port()?, free_port()?)];
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
            std::fs::create_dir_all(&d)?;
            let mut ch = LocalServer::configure(&d, http, tcp, &remote)?;
            ch.run()?;
            v.push(ch);
        }
        let (Some(b), Some(a)) = (v.pop(), v.pop()) else {
            unreachable!("two servers were started")
        };
        Ok((a, b))
    }

    fn configure(dir: &Path, http: u16, tcp: u16, extra: &str) -> io::Result<LocalServer> {
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
        )?;
        std::fs::write(
            dir.join("users.xml"),
            format!("<?xml version=\"1.0\"?><yandex><profiles><default><insert_distributed_sync>1</insert_distributed_sync>\
             </default></profiles><users><kansoku><password>{PASSWORD}</password><networks><ip>127.0.0.1</ip></networks>\
             <profile>default</profile><quota>default</quota></kansoku></users><quotas><default/></quotas></yandex>"),
        )?;
        Ok(LocalServer {
            dir: dir.to_path_buf(),
            http,
            child: None,
        })
    }

    /// Starts (again) the server and waits up to a minute until it answers.
    pub fn run(&mut self) -> io::Result<()> {
        let child = Command::new(program()?)
            .arg(format!("--config-file={}/config.xml", self.dir.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        self.child = Some(child);
        let c = self.client();
        let t0 = Instant::now();
        while c.execute_bare("SELECT 1").is_err() {
            if t0.elapsed() > Duration::from_secs(60) {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "clickhouse-server in {} did not answer within 60 s (its log: {}/err.log)",
                        self.dir.display(),
                        self.dir.display()
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
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

impl Drop for LocalServer {
    fn drop(&mut self) {
        self.kill();
    }
}
