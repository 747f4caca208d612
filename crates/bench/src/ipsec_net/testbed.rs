//! The bench's test bed: two network namespaces joined by a veth pair,
//! a carrier running in each (kansoku's gateway over a TUN device, or
//! boringtun), each pinned to its own core, and an optional busy loop
//! competing for the sending side's core. Everything here is torn down by
//! drop guards, however the bench ends.

use std::fmt::Write as _;
use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use capture::netns::{wait_ping, Namespace, VethEnd, VethPair};
use pipeline::{Error, Result};
use serde_json::Value;

use crate::harness::peers::{self, Peer};

use super::{Carrier, Config};

/// The veth ends (inside the namespaces, so the names cannot clash).
const VETH_A: &str = "kbi-a";
const VETH_B: &str = "kbi-b";
/// The gateways' TUN devices.
const TUN: &str = "kbi-tun";
const A4: &str = "10.91.0.1";
const B4: &str = "10.91.0.2";
const A6: &str = "fd00:91::1";
const B6: &str = "fd00:91::2";
/// boringtun's inner addresses.
const WA4: &str = "10.92.0.1";
const WB4: &str = "10.92.0.2";
const WA6: &str = "fd00:92::1";
const WB6: &str = "fd00:92::2";
const WG_PORT: u16 = 51820;
/// The gateways' (and boringtun's) nice value; the test ends run at 0.
const GATEWAY_NICE: &str = "-10";
/// The tests' server port (netperf's data port).
pub(super) const PORT: u16 = 12866;

/// The two namespaces and the veth pair between them.
pub(super) struct Pair {
    pub(super) a: Namespace,
    pub(super) b: Namespace,
    pub(super) cpus: [usize; 2],
}

/// A path as the `&str` a command line here takes; a path that is not
/// UTF-8 is an error that names it, not a silent substitute.
fn utf8(p: &Path) -> Result<&str> {
    p.to_str().ok_or_else(|| {
        Error::input(format!(
            "bench ipsec: {} is not UTF-8; run from a path that is",
            p.display()
        ))
    })
}

fn io_err(e: std::io::Error) -> Error {
    Error::input(e.to_string())
}

impl Pair {
    pub(super) fn create(link_rate: Option<&str>) -> Result<Pair> {
        let end = |prefix, dev, v4, v6| VethEnd {
            prefix,
            dev,
            v4,
            v6,
        };
        let VethPair { a, b } =
            VethPair::create(end("kbia", VETH_A, A4, A6), end("kbib", VETH_B, B4, B6)).map_err(
                |e| {
                    Error::input(format!(
                        "{e} (bench ipsec --part link needs root: CAP_SYS_ADMIN and CAP_NET_ADMIN)"
                    ))
                },
            )?;
        let two = std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2;
        let pair = Pair {
            a,
            b,
            cpus: [0, usize::from(two)],
        };
        for (n, dev) in [(&pair.a, VETH_A), (&pair.b, VETH_B)] {
            // ESP from the peer comes in on the veth while the route back to
            // the peer goes into the TUN: loose reverse-path filtering.
            n.exec(&["sysctl", "-qw", "net.ipv4.conf.all.rp_filter=2"])
                .map_err(io_err)?;
            if let Some(rate) = link_rate {
                // A token bucket at the rate, bursts of 64 KB, at most 20 ms
                // queued: a switched Ethernet port's regime.
                n.exec(&[
                    "tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate, "burst",
                    "64kb", "latency", "20ms",
                ])
                .map_err(io_err)?;
            }
        }
        Ok(pair)
    }

    pub(super) fn sides(&self) -> [(&Namespace, &'static str, usize); 2] {
        [
            (&self.a, VETH_A, self.cpus[0]),
            (&self.b, VETH_B, self.cpus[1]),
        ]
    }
}

/// A running carrier: the processes (their CPU time read by pid) and the
/// addresses the tests use.
pub(super) struct Running {
    pub(super) peers: Vec<(String, Peer)>,
    pub(super) dst4: IpAddr,
    pub(super) dst6: IpAddr,
    /// Files the processes read (removed at the end).
    pub(super) files: Vec<tempfile::NamedTempFile>,
}

/// A file the gateways or boringtun read (owner-only, as it holds keys),
/// removed when dropped.
fn temp_file(what: &str, content: &str) -> Result<tempfile::NamedTempFile> {
    let mut f = tempfile::Builder::new()
        .prefix(&format!("kansoku-bench-{what}-"))
        .tempfile()
        .map_err(io_err)?;
    f.write_all(content.as_bytes()).map_err(io_err)?;
    f.flush().map_err(io_err)?;
    Ok(f)
}

/// The setkey file for both directions and both families.
fn sa_file(esp: &Option<[String; 2]>, ah: &Option<[String; 2]>) -> String {
    let mut s = String::new();
    let mut spi = 0x2000;
    for (a, b) in [(A4, B4), (A6, B6)] {
        for (i, (src, dst)) in [(a, b), (b, a)].into_iter().enumerate() {
            spi += 1;
            if let Some(esp) = esp {
                let _ = writeln!(s, "add {src} {dst} esp {spi:#x} {};", esp[i]);
            }
            if let Some(ah) = ah {
                let _ = writeln!(s, "add {src} {dst} ah {:#x} {};", spi + 0x1000, ah[i]);
            }
        }
    }
    s
}

/// Polls `f` every 50 ms for up to `limit`.
fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn link_up(n: &Namespace, dev: &str) -> bool {
    n.ip(&["link", "show", dev])
        .is_ok_and(|o| o.contains(",UP") || o.contains("<UP"))
}

impl Running {
    pub(super) fn start(pair: &Pair, c: &Config, exe: &Path) -> Result<Running> {
        match &c.carrier {
            Carrier::Veth => Ok(Running {
                peers: Vec::new(),
                dst4: B4.parse().expect("an address"),
                dst6: B6.parse().expect("an address"),
                files: Vec::new(),
            }),
            Carrier::Kansoku { esp, ah, legacy } => {
                let file = temp_file("sa", &sa_file(esp, ah))?;
                let mut run = Running {
                    peers: Vec::new(),
                    dst4: B4.parse().expect("an address"),
                    dst6: B6.parse().expect("an address"),
                    files: Vec::new(),
                };
                let peer_of = [(B4, B6, A4, A6), (A4, A6, B4, B6)];
                for (i, (n, dev, cpu)) in pair.sides().into_iter().enumerate() {
                    let cpu = cpu.to_string();
                    let mut argv = vec![
                        "nice",
                        "-n",
                        GATEWAY_NICE,
                        "taskset",
                        "-c",
                        &cpu,
                        utf8(exe)?,
                        "ipsec",
                        "gateway",
                        "--sa",
                        utf8(file.path())?,
                        "--tun",
                        TUN,
                        "--dev",
                        dev,
                        "--json",
                    ];
                    if *legacy {
                        argv.push("--legacy-per-packet-keys");
                    }
                    let mut cmd = n.command(&argv);
                    cmd.stdout(Stdio::piped());
                    let peer = Peer::spawn(cmd)?;
                    run.peers.push((format!("gateway in {}", n.name()), peer));
                    if !wait_until(Duration::from_secs(10), || link_up(n, TUN)) {
                        let (_, p) = run.peers.pop().expect("just pushed");
                        return Err(Error::input(format!(
                            "bench ipsec: the gateway in {} did not bring {TUN} up: {}",
                            n.name(),
                            p.kill().trim()
                        )));
                    }
                    let (dst4, dst6, src4, src6) = peer_of[i];
                    n.ip(&[
                        "route",
                        "add",
                        &format!("{dst4}/32"),
                        "dev",
                        TUN,
                        "src",
                        src4,
                    ])
                    .map_err(io_err)?;
                    n.ip(&[
                        "-6",
                        "route",
                        "add",
                        &format!("{dst6}/128"),
                        "dev",
                        TUN,
                        "src",
                        src6,
                    ])
                    .map_err(io_err)?;
                }
                run.files.push(file);
                wait_ping(&pair.a, B4, Duration::from_secs(10))
                    .map_err(|e| Error::input(format!("bench ipsec: {e}")))?;
                wait_ping(&pair.a, B6, Duration::from_secs(10))
                    .map_err(|e| Error::input(format!("bench ipsec: {e}")))?;
                Ok(run)
            }
            Carrier::Boringtun => Running::boringtun(pair),
        }
    }

    /// boringtun-cli in each namespace (one thread, pinned), keyed with
    /// `wg`, the peers' endpoints on the veth (IPv4), inner addresses of
    /// their own.
    pub(super) fn boringtun(pair: &Pair) -> Result<Running> {
        let bt = boringtun_cli().ok_or_else(|| {
            Error::input("bench ipsec: boringtun-cli not found (scripts/install-deps.sh --bench installs it)")
        })?;
        let wg = peers::which("wg").ok_or_else(|| {
            Error::input("bench ipsec: wg not found (apt install wireguard-tools; scripts/install-deps.sh --bench)")
        })?;
        let key = || -> Result<(String, String)> {
            let private = String::from_utf8_lossy(&peers::must(Command::new(&wg).arg("genkey"))?)
                .trim()
                .to_string();
            let mut child = Command::new(&wg)
                .arg("pubkey")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .map_err(|e| Error::input(format!("wg pubkey: {e}")))?;
            if let Some(mut i) = child.stdin.take() {
                i.write_all(private.as_bytes()).map_err(io_err)?;
            }
            let out = child.wait_with_output().map_err(io_err)?;
            Ok((
                private,
                String::from_utf8_lossy(&out.stdout).trim().to_string(),
            ))
        };
        let keys = [key()?, key()?];
        // UAPI sockets are files (/var/run/wireguard/NAME.sock), shared by
        // every namespace: names of this process's own.
        let pid = std::process::id() % 100_000;
        let names = [format!("kbw{pid}a"), format!("kbw{pid}b")];
        let inner = [(WA4, WA6), (WB4, WB6)];
        let outer = [A4, B4];
        let mut run = Running {
            peers: Vec::new(),
            dst4: WB4.parse().expect("an address"),
            dst6: WB6.parse().expect("an address"),
            files: Vec::new(),
        };
        for (i, (n, _, cpu)) in pair.sides().into_iter().enumerate() {
            let name = &names[i];
            let cpu = cpu.to_string();
            let mut cmd = n.command(&[
                "nice",
                "-n",
                GATEWAY_NICE,
                "taskset",
                "-c",
                &cpu,
                utf8(&bt)?,
                name,
                "--foreground",
                "--threads",
                "1",
                "--disable-drop-privileges",
            ]);
            cmd.stdout(Stdio::null());
            let peer = Peer::spawn(cmd)?;
            run.peers.push((format!("boringtun in {}", n.name()), peer));
            let sock = PathBuf::from(format!("/var/run/wireguard/{name}.sock"));
            if !wait_until(Duration::from_secs(10), || sock.exists()) {
                let (_, p) = run.peers.pop().expect("just pushed");
                return Err(Error::input(format!(
                    "bench ipsec: boringtun in {} did not start: {}",
                    n.name(),
                    p.kill().trim()
                )));
            }
            let key = temp_file("wg-key", &keys[i].0)?;
            let other = 1 - i;
            let port = WG_PORT.to_string();
            let endpoint = format!("{}:{WG_PORT}", outer[other]);
            let allowed = format!("{}/32,{}/128", inner[other].0, inner[other].1);
            n.exec(&[
                utf8(&wg)?,
                "set",
                name,
                "private-key",
                utf8(key.path())?,
                "listen-port",
                &port,
                "peer",
                &keys[other].1,
                "endpoint",
                &endpoint,
                "allowed-ips",
                &allowed,
            ])
            .map_err(io_err)?;
            run.files.push(key);
            let ip = |args: &[&str]| n.ip(args).map(|_| ()).map_err(io_err);
            ip(&["addr", "add", &format!("{}/24", inner[i].0), "dev", name])?;
            ip(&[
                "addr",
                "add",
                &format!("{}/64", inner[i].1),
                "dev",
                name,
                "nodad",
            ])?;
            ip(&["link", "set", name, "mtu", "1420", "up"])?;
        }
        wait_ping(&pair.a, WB4, Duration::from_secs(10))
            .map_err(|e| Error::input(format!("bench ipsec: {e}")))?;
        wait_ping(&pair.a, WB6, Duration::from_secs(10))
            .map_err(|e| Error::input(format!("bench ipsec: {e}")))?;
        Ok(run)
    }

    /// CPU seconds each process has used so far.
    pub(super) fn cpu(&self) -> Vec<f64> {
        self.peers
            .iter()
            .map(|(_, p)| {
                capture::usage::process_cpu_time(p.pid())
                    .map(|d| d.as_secs_f64())
                    .unwrap_or(f64::NAN)
            })
            .collect()
    }

    /// Stops the processes (SIGINT) and collects the gateways' reports;
    /// a process that failed is an error.
    pub(super) fn stop(mut self) -> Result<Vec<Value>> {
        let mut reports = Vec::new();
        for (_, p) in &self.peers {
            p.interrupt()?;
        }
        for (what, p) in std::mem::take(&mut self.peers) {
            let ended = p.wait()?;
            if what.starts_with("gateway") {
                if !ended.status.success() {
                    return Err(Error::input(format!(
                        "bench ipsec: the {what} failed ({}): {}",
                        ended.status,
                        ended.stderr.trim()
                    )));
                }
                reports.push(peers::parse_json(&ended.stdout, &what)?);
            }
        }
        Ok(reports)
    }
}

/// A carrier left behind by an error (a failed test, a peer that did not
/// start) is killed: its namespace is about to go, and a process in a
/// deleted namespace would live on unseen.
impl Drop for Running {
    fn drop(&mut self) {
        for (_, p) in self.peers.drain(..) {
            let _ = p.kill();
        }
    }
}

/// boringtun-cli on the PATH or where `cargo install` puts it.
fn boringtun_cli() -> Option<PathBuf> {
    peers::which("boringtun-cli").or_else(|| {
        let home = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))?;
        let p = home.join("bin/boringtun-cli");
        p.is_file().then_some(p)
    })
}

/// A busy loop pinned to a core until dropped.
pub(super) struct Hog {
    pub(super) stop: std::sync::Arc<AtomicBool>,
    pub(super) thread: Option<std::thread::JoinHandle<()>>,
}

impl Hog {
    pub(super) fn start(cpu: usize) -> Hog {
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            let _ = capture::usage::pin_current_thread(cpu);
            let _ =
                capture::usage::set_current_thread_nice(GATEWAY_NICE.parse().expect("a number"));
            let mut x = 0u64;
            while !s.load(Ordering::Relaxed) {
                for _ in 0..10_000 {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            }
        });
        Hog {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{dv_configs, link_configs};
    use super::*;

    #[test]
    fn sa_files_parse_for_every_configuration() {
        for c in link_configs().into_iter().chain(dv_configs()) {
            if let Carrier::Kansoku { esp, ah, .. } = &c.carrier {
                let text = sa_file(esp, ah);
                let conf = ipsec::config::parse_setkey(&text)
                    .unwrap_or_else(|e| panic!("{}: {e}", c.name));
                let per = usize::from(esp.is_some()) + usize::from(ah.is_some());
                assert_eq!(conf.sas.len(), per * 4, "{}", c.name);
            }
        }
    }
}
