//! `kansoku bench ipsec --part link` and `--part dv`: the paper's
//! experiment (paper 002, §2.2 and §2.3) rebuilt in two network
//! namespaces on one machine.
//!
//! ```text
//!  namespace A (CPU 0)                               namespace B (CPU 1)
//!  client ─► TUN ─► gateway A ─► veth A ══ veth B ─► gateway B ─► TUN ─► server
//!                   (kansoku ipsec gateway, ESP/AH, transport mode)
//! ```
//!
//! Each namespace plays one of the paper's hosts: its gateway (`kansoku
//! ipsec gateway`, a child process pinned with taskset) and its end of the
//! test (a thread of this process, [`crate::netperf`]) share one core, as
//! the kernel's IPsec and netperf shared the host's one CPU. The gateway
//! runs at nice -10, the test ends at 0: the kernel's IPsec work runs
//! before the process that caused it, so a sender that outruns it waits
//! for it, as on the paper's hosts. At equal priority the scheduler would
//! split the core evenly between a UDP sender and its gateway, and the
//! sender's datagrams would overflow the TUN's queue: the figure would be
//! the scheduler's, not the gateway's. The tests are netperf's, in the
//! paper's sizes; [`Config`] is what carries them:
//!
//! - `veth`: the bare veth pair, no gateway (the kernel alone);
//! - `none`: the gateways with no SAs, forwarding in the clear: the
//!   paper's NONE. One difference: a gateway in the clear makes one pass
//!   through userspace per packet (the sender's; the receiver's kernel
//!   takes the packet itself), where ESP and AH make two;
//! - `ah` (HMAC-SHA1), `esp` (3DES-CBC without an authenticator, as the
//!   paper ran it), `ah-esp` (that ESP inside AH): the paper's settings;
//! - `esp-aes-gcm-16`, `esp-chacha20-poly1305`, `esp-aes-cbc+hmac-sha256`:
//!   today's;
//! - `boringtun`: a userspace WireGuard tunnel over TUN (boringtun-cli,
//!   one thread, pinned and prioritized like the gateway), the tunnel a user would
//!   otherwise pick.
//!
//! `--link-rate` puts a token bucket (tc tbf) on both veth ends, the
//! paper's 100 Mbit/s Ethernet where the link, not the CPU, caps NONE;
//! `--cpu-hog` runs a busy loop on the sending side's core at the
//! gateway's priority (the paper's "a program computing pi", §2.1, which
//! competed with the kernel's IPsec work for its host's CPU). Gateway CPU time is read from
//! `/proc` around each test.
//!
//! `--part dv` is §2.3: a constant-rate UDP stream (13 Mbit/s of IP
//! packets with 500-byte payloads, about 3,000 packets a second, as the
//! paper's DV) over IPv6, in the clear and with ESP 3DES and ESP Blowfish,
//! each with per-SA keys and with KAME's per-packet keying; per second,
//! the packets and bytes received.
//!
//! Everything made is removed when the bench ends, however it ends: the
//! namespaces (with the veth pair, the TUN devices and the qdiscs in
//! them) by their drop guards, the gateways and boringtun by [`Peer`]'s.

use std::fmt::Write as _;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use capture::netns::{wait_ping, Namespace, VethEnd, VethPair};
use pipeline::{Error, Report, Result};
use serde::Serialize;
use serde_json::{json, Value};

use crate::args::BenchIpsecArgs;
use crate::netperf::{self, Endpoints, Outcome, Side, Test};
use crate::peers::{self, Peer};
use crate::table::{self, Align};
use plot::{Chart, LineChart, Series};

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
const PORT: u16 = 12866;

const K20A: &str = "0x0102030405060708090a0b0c0d0e0f1011121314";
const K20B: &str = "0x1112131415161718191a1b1c1d1e1f2021222324";
const K24A: &str = "0x0102030405060708090a0b0c0d0e0f101112131415161718";
const K24B: &str = "0x2122232425262728292a2b2c2d2e2f303132333435363738";
const K32A: &str = "0x0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20";
const K32B: &str = "0x3132333435363738393a3b3c3d3e3f404142434445464748494a4b4c4d4e4f50";
const K36A: &str = "0x0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021222324";
const K36B: &str = "0x3132333435363738393a3b3c3d3e3f404142434445464748494a4b4c4d4e4f5051525354";

/// What carries a test between the namespaces.
#[derive(Clone, Debug, PartialEq)]
pub enum Carrier {
    Veth,
    /// kansoku's gateways with these SAs (empty: in the clear), keyed per
    /// packet if set.
    Kansoku {
        esp: Option<[String; 2]>,
        ah: Option<[String; 2]>,
        legacy: bool,
    },
    Boringtun,
}

/// A configuration of `--part link` (or `--part dv`).
#[derive(Clone, Debug)]
pub struct Config {
    pub name: String,
    /// The paper's label for it, when it has one.
    pub paper: Option<&'static str>,
    pub carrier: Carrier,
}

fn kansoku(esp: Option<(&str, &str)>, ah: Option<(&str, &str)>, legacy: bool) -> Carrier {
    Carrier::Kansoku {
        esp: esp.map(|(a, b)| [a.to_string(), b.to_string()]),
        ah: ah.map(|(a, b)| [a.to_string(), b.to_string()]),
        legacy,
    }
}

/// Every configuration `--part link` knows, in the order it reports them.
pub fn link_configs() -> Vec<Config> {
    let c = |name: &str, paper, carrier| Config {
        name: name.to_string(),
        paper,
        carrier,
    };
    let ah1 = format!("-A hmac-sha1 {K20A}");
    let ah2 = format!("-A hmac-sha1 {K20B}");
    let des1 = format!("-E 3des-cbc {K24A}");
    let des2 = format!("-E 3des-cbc {K24B}");
    let ah = Some((ah1.as_str(), ah2.as_str()));
    let des = Some((des1.as_str(), des2.as_str()));
    vec![
        c("veth", None, Carrier::Veth),
        c("none", Some("NONE"), kansoku(None, None, false)),
        c("ah", Some("AH"), kansoku(None, ah, false)),
        c("esp", Some("ESP"), kansoku(des, None, false)),
        c("ah-esp", Some("AH/ESP"), kansoku(des, ah, false)),
        c(
            "esp-aes-gcm-16",
            None,
            kansoku(
                Some((
                    &format!("-E aes-gcm-16 {K20A}"),
                    &format!("-E aes-gcm-16 {K20B}"),
                )),
                None,
                false,
            ),
        ),
        c(
            "esp-chacha20-poly1305",
            None,
            kansoku(
                Some((
                    &format!("-E chacha20-poly1305 {K36A}"),
                    &format!("-E chacha20-poly1305 {K36B}"),
                )),
                None,
                false,
            ),
        ),
        c(
            "esp-aes-cbc+hmac-sha256",
            None,
            kansoku(
                Some((
                    &format!("-E aes-cbc 0x{} -A hmac-sha256 {K32A}", &K32A[2..34]),
                    &format!("-E aes-cbc 0x{} -A hmac-sha256 {K32B}", &K32B[2..34]),
                )),
                None,
                false,
            ),
        ),
        c("boringtun", None, Carrier::Boringtun),
    ]
}

/// `--part dv`'s configurations: the clear, and ESP with 3DES and with
/// Blowfish (192-bit keys, as the paper's Table 8), keyed per SA and per
/// packet.
pub fn dv_configs() -> Vec<Config> {
    let bf = |k: &str| format!("-E blowfish-cbc {}", &k[..50]);
    let mut v = vec![Config {
        name: "none".into(),
        paper: Some("NONE"),
        carrier: kansoku(None, None, false),
    }];
    for legacy in [false, true] {
        let suffix = if legacy { "-per-packet-keys" } else { "" };
        v.push(Config {
            name: format!("esp-3des-cbc{suffix}"),
            paper: (!legacy).then_some("ESP 1"),
            carrier: kansoku(
                Some((
                    &format!("-E 3des-cbc {K24A}"),
                    &format!("-E 3des-cbc {K24B}"),
                )),
                None,
                legacy,
            ),
        });
        v.push(Config {
            name: format!("esp-blowfish-cbc{suffix}"),
            paper: (!legacy).then_some("ESP 2"),
            carrier: kansoku(Some((&bf(K24A), &bf(K24B))), None, legacy),
        });
    }
    v
}

/// The paper's tests (§2.2, Tables 3-5), by `--tests` name.
pub fn link_tests(names: &[String]) -> Result<Vec<(&'static str, Test)>> {
    let all: [(&str, Test); 7] = [
        (
            "tcp-stream",
            Test::TcpStream {
                msg: 4096,
                buf: 57344,
            },
        ),
        (
            "tcp-stream",
            Test::TcpStream {
                msg: 4096,
                buf: 32768,
            },
        ),
        (
            "udp-stream",
            Test::UdpStream {
                msg: 4096,
                buf: 32768,
            },
        ),
        (
            "udp-stream",
            Test::UdpStream {
                msg: 1024,
                buf: 32768,
            },
        ),
        ("tcp-rr", Test::TcpRr { req: 1, resp: 1 }),
        ("udp-rr", Test::UdpRr { req: 1, resp: 1 }),
        ("udp-rr", Test::UdpRr { req: 516, resp: 4 }),
    ];
    for n in names {
        if !all.iter().any(|(k, _)| k == n) {
            return Err(Error::usage(format!(
                "--tests: unknown test {n:?} (tcp-stream, udp-stream, tcp-rr, udp-rr)"
            )));
        }
    }
    Ok(all
        .into_iter()
        .filter(|(k, _)| names.iter().any(|n| n == k))
        .collect())
}

/// The paper's figure for a test, configuration and IP version: Mbit/s
/// for streams, transactions/s for request/response (Tables 3, 4 and 5).
pub fn paper_figure(test: &Test, paper: &str, v6: bool) -> Option<f64> {
    let i = ["NONE", "AH", "ESP", "AH/ESP"]
        .iter()
        .position(|p| *p == paper)?;
    let row: [[f64; 4]; 2] = match *test {
        Test::TcpStream { buf: 57344, .. } => {
            [[60.86, 23.10, 10.87, 7.74], [58.21, 24.20, 10.88, 7.65]]
        }
        Test::TcpStream { buf: 32768, .. } => {
            [[60.57, 23.01, 10.90, 7.75], [58.21, 24.43, 10.90, 7.68]]
        }
        // Table 4 prints AH.1 over IPv4 as "30.73.24"; 30.73 is read.
        Test::UdpStream { msg: 4096, .. } => {
            [[93.98, 30.73, 11.96, 8.98], [93.16, 34.03, 11.94, 9.01]]
        }
        Test::UdpStream { msg: 1024, .. } => {
            [[93.74, 23.83, 11.32, 8.09], [92.37, 25.83, 11.32, 8.12]]
        }
        Test::TcpRr { .. } => [
            [3454.84, 1404.26, 1940.77, 1164.21],
            [3586.17, 1550.57, 2048.07, 1144.48],
        ],
        Test::UdpRr { req: 1, .. } => [
            [3929.57, 1650.64, 2498.62, 1358.40],
            [3955.94, 1657.83, 2446.02, 1339.44],
        ],
        Test::UdpRr { req: 516, .. } => [
            [2559.89, 988.27, 839.26, 575.49],
            [2551.06, 1047.74, 832.67, 576.00],
        ],
        _ => return None,
    };
    Some(row[usize::from(v6)][i])
}

/// The figure a test is judged by: received Mbit/s for streams,
/// transactions/s for request/response.
pub fn figure(o: &Outcome) -> f64 {
    o.transactions_per_s.unwrap_or(o.mbit_s)
}

/// Checks a `--link-rate` value as tc takes it: a number and a unit.
pub fn parse_rate(s: &str) -> std::result::Result<String, String> {
    let s = s.trim().to_ascii_lowercase();
    let unit = ["gbit", "mbit", "kbit", "bit"]
        .into_iter()
        .find(|u| s.ends_with(u))
        .ok_or_else(|| format!("{s:?}: give a rate in bit, kbit, mbit or gbit (e.g. 100mbit)"))?;
    let n = &s[..s.len() - unit.len()];
    match n.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() && n.chars().all(|c| c.is_ascii_digit() || c == '.') => {
            Ok(s)
        }
        _ => Err(format!(
            "{s:?}: give a rate in bit, kbit, mbit or gbit (e.g. 100mbit)"
        )),
    }
}

/// The two namespaces and the veth pair between them.
struct Pair {
    a: Namespace,
    b: Namespace,
    cpus: [usize; 2],
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
    fn create(link_rate: Option<&str>) -> Result<Pair> {
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

    fn sides(&self) -> [(&Namespace, &'static str, usize); 2] {
        [
            (&self.a, VETH_A, self.cpus[0]),
            (&self.b, VETH_B, self.cpus[1]),
        ]
    }
}

/// A running carrier: the processes (their CPU time read by pid) and the
/// addresses the tests use.
struct Running {
    peers: Vec<(String, Peer)>,
    dst4: IpAddr,
    dst6: IpAddr,
    /// Files the processes read (removed at the end).
    files: Vec<tempfile::NamedTempFile>,
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
    fn start(pair: &Pair, c: &Config, exe: &Path) -> Result<Running> {
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
    fn boringtun(pair: &Pair) -> Result<Running> {
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
    fn cpu(&self) -> Vec<f64> {
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
    fn stop(mut self) -> Result<Vec<Value>> {
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
struct Hog {
    stop: std::sync::Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Hog {
    fn start(cpu: usize) -> Hog {
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

/// One test's result.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub config: String,
    pub ip: u8,
    pub test: String,
    #[serde(skip)]
    pub kind: Option<Test>,
    #[serde(skip)]
    pub paper_label: Option<&'static str>,
    pub outcome: Outcome,
    /// CPU used by each side's gateway (or boringtun) during the test, as
    /// a share of one core.
    pub carrier_cpu: Vec<f64>,
}

/// Runs the configurations' tests; progress on standard error.
#[allow(clippy::too_many_arguments)]
fn run_matrix(
    pair: &Pair,
    configs: &[Config],
    tests: &[(&'static str, Test)],
    families: &[u8],
    seconds: f64,
    hog: bool,
    stop: &AtomicBool,
    gateways: &mut Vec<Value>,
) -> Result<Vec<Row>> {
    let exe = std::env::current_exe()
        .map_err(|e| Error::input(format!("bench ipsec: where is kansoku? {e}")))?;
    let mut rows = Vec::new();
    for c in configs {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let running = Running::start(pair, c, &exe)?;
        let hog = hog.then(|| Hog::start(pair.cpus[0]));
        for &ip in families {
            for (_, t) in tests {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let dst = if ip == 6 { running.dst6 } else { running.dst4 };
                let ep = Endpoints {
                    client: Side {
                        netns: Some(pair.a.path()),
                        cpu: Some(pair.cpus[0]),
                    },
                    server: Side {
                        netns: Some(pair.b.path()),
                        cpu: Some(pair.cpus[1]),
                    },
                    server_addr: SocketAddr::new(dst, PORT),
                };
                let before = running.cpu();
                let t0 = Instant::now();
                let o = netperf::run(t, &ep, seconds, stop).map_err(|e| {
                    Error::input(format!(
                        "bench ipsec: {} over {} IPv{ip}: {e}",
                        t.name(),
                        c.name
                    ))
                })?;
                let wall = t0.elapsed().as_secs_f64();
                let after = running.cpu();
                let carrier_cpu = before
                    .iter()
                    .zip(&after)
                    .map(|(b, a)| (a - b) / wall)
                    .collect();
                eprintln!(
                    "bench ipsec: {:<24} IPv{ip} {:<32} {:>10.2} {}",
                    c.name,
                    t.name(),
                    figure(&o),
                    if t.is_stream() { "Mbit/s" } else { "trans/s" }
                );
                rows.push(Row {
                    config: c.name.clone(),
                    ip,
                    test: t.name(),
                    kind: Some(*t),
                    paper_label: c.paper,
                    outcome: o,
                    carrier_cpu,
                });
            }
        }
        drop(hog);
        for mut g in running.stop()? {
            g["config"] = json!(c.name);
            gateways.push(g);
        }
    }
    Ok(rows)
}

/// `--link-rate`, checked.
fn link_rate(args: &BenchIpsecArgs) -> Result<Option<String>> {
    args.link_rate
        .as_deref()
        .map(parse_rate)
        .transpose()
        .map_err(Error::usage)
}

/// Makes the namespaces (with the link rate), runs the tests of every
/// configuration in them, removes them: the rows, the gateways' reports,
/// and the problems those show.
fn measure(
    configs: &[Config],
    tests: &[(&'static str, Test)],
    families: &[u8],
    rate: Option<&str>,
    args: &BenchIpsecArgs,
    stop: &AtomicBool,
) -> Result<(Vec<Row>, Vec<Value>, Vec<String>)> {
    let pair = Pair::create(rate)?;
    let mut gateways = Vec::new();
    let rows = run_matrix(
        &pair,
        configs,
        tests,
        families,
        args.seconds,
        args.cpu_hog,
        stop,
        &mut gateways,
    )?;
    drop(pair);
    let problems = gateway_problems(&gateways);
    Ok((rows, gateways, problems))
}

/// `--part link`.
pub fn run_link(args: &BenchIpsecArgs, stop: &AtomicBool, out: &mut dyn Write) -> Result<Report> {
    let all = link_configs();
    let configs = choose(&all, args.configs.as_deref())?;
    let tests = link_tests(&args.tests)?;
    let families = families(&args.families)?;
    let rate = link_rate(args)?;
    let estimate = configs.len() * families.len() * tests.len();
    eprintln!(
        "bench ipsec: {estimate} tests of {} s: about {:.0} minutes",
        args.seconds,
        (estimate as f64 * (args.seconds + 0.5) + configs.len() as f64 * 3.0) / 60.0
    );
    let (rows, gateways, problems) =
        measure(&configs, &tests, &families, rate.as_deref(), args, stop)?;
    let checks = link_checks(&rows);
    if args.json {
        writeln!(
            out,
            "{}",
            json!({
                "part": "link",
                "seconds": args.seconds,
                "link_rate": rate,
                "cpu_hog": args.cpu_hog,
                "results": rows,
                "checks": checks,
                "gateways": gateways,
            })
        )
        .map_err(Error::stdout)?;
    } else {
        write_link_tables(out, &rows, &families, rate.as_deref(), args.cpu_hog)?;
        writeln!(out, "\n## The paper's findings, here\n").map_err(Error::stdout)?;
        for c in &checks {
            writeln!(
                out,
                "- {}: {}",
                c["claim"].as_str().unwrap_or(""),
                c["verdict"].as_str().unwrap_or("")
            )
            .map_err(Error::stdout)?;
        }
    }
    if let Some(dir) = &args.plot_dir {
        plot_link(dir, &rows)?;
    }
    let interrupted = stop
        .load(Ordering::Relaxed)
        .then(|| "bench ipsec".to_string());
    Ok(Report {
        interrupted,
        problems,
        ..Report::default()
    })
}

/// What the gateways' reports show went wrong. Kernel drops at the TUN and
/// at the receivers are part of a measurement (a saturated gateway drops).
/// A packet refused as corrupt (ICV, padding, malformed) can be one too,
/// now and then: under loss, the receiving kernel may join the fragments
/// of two datagrams whose 16-bit IPv4 identifications repeated within its
/// 30-second reassembly timeout (RFC 4963), and the ICV catches the result;
/// such refusals are noted on standard error. More than one packet in
/// 10,000 of an SA refused so is a problem: a bug, not chance.
fn gateway_problems(gateways: &[Value]) -> Vec<String> {
    let mut v = Vec::new();
    for g in gateways {
        for sa in g["sas"].as_array().into_iter().flatten() {
            let bad = sa["integrity_failed"].as_u64().unwrap_or(0)
                + sa["padding_failed"].as_u64().unwrap_or(0)
                + sa["malformed"].as_u64().unwrap_or(0);
            if bad == 0 {
                continue;
            }
            let packets = sa["packets"].as_u64().unwrap_or(0);
            let what = format!(
                "bench ipsec: {}: SA {} refused {bad} of {packets} packets as corrupt",
                g["config"], sa["spi"]
            );
            if bad.saturating_mul(10_000) > packets {
                v.push(what);
            } else {
                eprintln!(
                    "{what} (fragments of different datagrams joined by the receiving \
                     kernel after IPv4 identifications repeated; the ICV caught them)"
                );
            }
        }
    }
    v
}

fn choose(all: &[Config], names: Option<&[String]>) -> Result<Vec<Config>> {
    let Some(names) = names else {
        return Ok(all.to_vec());
    };
    let mut v = Vec::new();
    for n in names {
        let c = all.iter().find(|c| &c.name == n).ok_or_else(|| {
            Error::usage(format!(
                "--configs: unknown configuration {n:?} ({})",
                all.iter()
                    .map(|c| c.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        v.push(c.clone());
    }
    Ok(v)
}

fn families(f: &[u8]) -> Result<Vec<u8>> {
    if f.is_empty() || f.iter().any(|&x| x != 4 && x != 6) {
        return Err(Error::usage("--families: 4, 6 or 4,6"));
    }
    let mut v = f.to_vec();
    v.dedup();
    Ok(v)
}

fn find<'a>(rows: &'a [Row], config: &str, ip: u8, test: &Test) -> Option<&'a Row> {
    rows.iter()
        .find(|r| r.config == config && r.ip == ip && r.kind.as_ref() == Some(test))
}

/// The paper's findings checked against this run's figures.
fn link_checks(rows: &[Row]) -> Vec<Value> {
    let mut checks = Vec::new();
    let mut tests: Vec<Test> = Vec::new();
    for r in rows {
        if let Some(t) = r.kind {
            if !tests.contains(&t) {
                tests.push(t);
            }
        }
    }
    let fig = |c: &str, ip, t: &Test| find(rows, c, ip, t).map(|r| figure(&r.outcome));
    for t in tests.iter().filter(|t| t.is_stream()) {
        for ip in [4u8, 6] {
            let v: Vec<Option<f64>> = ["none", "ah", "esp", "ah-esp"]
                .iter()
                .map(|c| fig(c, ip, t))
                .collect();
            if let [Some(n), Some(a), Some(e), Some(ae)] = v[..] {
                let holds = n > a && a > e && e >= ae * 0.97;
                checks.push(json!({
                    "claim": format!("{} IPv{ip}: NONE > AH > ESP >= AH/ESP ({n:.1} > {a:.1} > {e:.1} >= {ae:.1}, AH/ESP within 3%)", t.name()),
                    "holds": holds,
                    "verdict": if holds { "holds" } else { "does not hold" },
                }));
            }
        }
        for c in ["none", "ah", "esp", "ah-esp", "esp-aes-gcm-16"] {
            if let (Some(a), Some(b)) = (fig(c, 4, t), fig(c, 6, t)) {
                let r = b / a;
                let holds = (0.85..=1.15).contains(&r);
                checks.push(json!({
                    "claim": format!("{} {c}: IPv6 / IPv4 = {r:.2} (within 15%)", t.name()),
                    "holds": holds,
                    "verdict": if holds { "holds" } else { "does not hold" },
                }));
            }
        }
    }
    for t in tests.iter().filter(|t| matches!(t, Test::TcpStream { .. })) {
        for ip in [4u8, 6] {
            if let (Some(g), Some(b)) = (fig("esp-aes-gcm-16", ip, t), fig("boringtun", ip, t)) {
                let holds = g >= b;
                checks.push(json!({
                    "claim": format!("{} IPv{ip}: ESP aes-gcm-16 {g:.1} >= boringtun {b:.1} Mbit/s", t.name()),
                    "holds": holds,
                    "verdict": if holds { "holds" } else { "does not hold" },
                }));
            }
        }
    }
    for t in tests.iter().filter(|t| !t.is_stream()) {
        for ip in [4u8, 6] {
            if let (Some(a), Some(e)) = (fig("ah", ip, t), fig("esp", ip, t)) {
                checks.push(json!({
                    "claim": format!("{} IPv{ip}: the paper found ESP faster than AH in TCP_RR and UDP_RR 1/1; here ESP {e:.0}, AH {a:.0} trans/s", t.name()),
                    "holds": Value::Null,
                    "verdict": if e > a { "ESP faster (as the paper)" } else { "AH faster (not as the paper)" },
                }));
            }
        }
    }
    checks
}

fn write_link_tables(
    out: &mut dyn Write,
    rows: &[Row],
    families: &[u8],
    rate: Option<&str>,
    hog: bool,
) -> Result<()> {
    writeln!(
        out,
        "# bench ipsec, part (b): the paper's tests between two namespaces{}{}\n",
        rate.map_or(String::new(), |r| format!(", link {r}")),
        if hog {
            ", CPU hog on the sender's core"
        } else {
            ""
        }
    )
    .map_err(Error::stdout)?;
    let mut tests: Vec<Test> = Vec::new();
    for r in rows {
        if let Some(t) = r.kind {
            if !tests.contains(&t) {
                tests.push(t);
            }
        }
    }
    let mut configs: Vec<&str> = Vec::new();
    for r in rows {
        if !configs.contains(&r.config.as_str()) {
            configs.push(&r.config);
        }
    }
    for t in &tests {
        let unit = if t.is_stream() { "Mbit/s" } else { "trans/s" };
        writeln!(out, "\n## {}\n", t.name()).map_err(Error::stdout)?;
        let mut cols: Vec<(String, Align)> = vec![("config".into(), Align::Left)];
        for ip in families {
            cols.push((format!("IPv{ip} {unit}"), Align::Right));
            cols.push(("/ NONE".into(), Align::Right));
            cols.push(("paper / NONE".into(), Align::Right));
            if matches!(t, Test::UdpStream { .. } | Test::UdpRr { .. }) {
                cols.push(("loss".into(), Align::Right));
            }
            cols.push((
                if t.is_stream() { "delay ms" } else { "RTT ms" }.into(),
                Align::Right,
            ));
            cols.push(("jitter ms".into(), Align::Right));
            cols.push(("CPU A/B".into(), Align::Right));
        }
        let cols_ref: Vec<(&str, Align)> = cols.iter().map(|(n, a)| (n.as_str(), *a)).collect();
        table::header(out, &cols_ref).map_err(Error::stdout)?;
        for c in &configs {
            let mut cells = vec![c.to_string()];
            for &ip in families {
                let r = find(rows, c, ip, t);
                let none = find(rows, "none", ip, t).map(|r| figure(&r.outcome));
                let paper = r.and_then(|r| r.paper_label).and_then(|p| {
                    Some(paper_figure(t, p, ip == 6)? / paper_figure(t, "NONE", ip == 6)?)
                });
                match r {
                    Some(r) => {
                        let f = figure(&r.outcome);
                        cells.push(format!("{f:.2}"));
                        cells.push(
                            none.filter(|n| *n > 0.0)
                                .map_or("n/a".into(), |n| format!("{:.2}", f / n)),
                        );
                        cells.push(paper.map_or("".into(), |p| format!("{p:.2}")));
                        if matches!(t, Test::UdpStream { .. } | Test::UdpRr { .. }) {
                            cells.push(
                                r.outcome
                                    .loss
                                    .map_or("".into(), |l| format!("{:.1}%", l * 100.0)),
                            );
                        }
                        cells.push(r.outcome.delay_ms.map_or("".into(), |d| format!("{d:.3}")));
                        cells.push(r.outcome.jitter_ms.map_or("".into(), |d| format!("{d:.3}")));
                        cells.push(
                            r.carrier_cpu
                                .iter()
                                .map(|c| format!("{:.0}%", c * 100.0))
                                .collect::<Vec<_>>()
                                .join("/"),
                        );
                    }
                    None => {
                        let n = if matches!(t, Test::UdpStream { .. } | Test::UdpRr { .. }) {
                            7
                        } else {
                            6
                        };
                        cells.extend(std::iter::repeat_n(String::new(), n));
                    }
                }
            }
            table::row(out, &cells).map_err(Error::stdout)?;
        }
    }
    Ok(())
}

/// Per-second lines, one chart per test and IP version.
fn plot_link(dir: &Path, rows: &[Row]) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::output(pipeline::display_path(dir), &e))?;
    let mut keys: Vec<(u8, Test)> = Vec::new();
    for r in rows {
        if let Some(t) = r.kind {
            if !keys.contains(&(r.ip, t)) {
                keys.push((r.ip, t));
            }
        }
    }
    for (ip, t) in keys {
        let series: Vec<Series> = rows
            .iter()
            .filter(|r| r.ip == ip && r.kind == Some(t))
            .enumerate()
            .map(|(i, r)| {
                let pts = r
                    .outcome
                    .per_second
                    .iter()
                    .enumerate()
                    .map(|(s, x)| {
                        let y = if t.is_stream() {
                            x.mbit_s
                        } else {
                            x.count as f64
                        };
                        (s as f64 + 1.0, y)
                    })
                    .collect();
                Series::new(r.config.clone(), pts, i)
            })
            .collect();
        let file = dir.join(format!("ipsec-{}-v{ip}.svg", slug(&t.name())));
        draw(
            &t.name(),
            ip,
            &series,
            if t.is_stream() {
                "Mbit/s received"
            } else {
                "transactions/s"
            },
            &file,
        )?;
    }
    Ok(())
}

fn slug(s: &str) -> String {
    let mut o = String::new();
    for ch in s.chars() {
        if ch.is_ascii_alphanumeric() {
            o.push(ch.to_ascii_lowercase());
        } else if !o.ends_with('-') {
            o.push('-');
        }
    }
    o.trim_matches('-').to_string()
}

fn draw(title: &str, ip: u8, series: &[Series], y_desc: &str, file: &Path) -> Result<()> {
    let xmax = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(1.0f64, f64::max);
    let ymax = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0f64, f64::max);
    LineChart {
        title: format!("{title}, IPv{ip}, per second"),
        x: 0.0..xmax + 1.0,
        y: 0.0..(ymax * 1.15).max(1.0),
        x_desc: Some("second"),
        y_desc: Some(y_desc),
        x_labels: None,
        x_label_formatter: None,
        y_label_area: 70,
        series: series.to_vec(),
    }
    .draw_file(file)
    .map_err(crate::chart_error)
}

/// `--part dv`.
pub fn run_dv(args: &BenchIpsecArgs, stop: &AtomicBool, out: &mut dyn Write) -> Result<Report> {
    let all = dv_configs();
    let configs = choose(&all, args.configs.as_deref())?;
    let test = Test::UdpRate {
        payload: 500,
        ip_bits_per_s: args.dv_mbit * 1e6,
    };
    let rate = link_rate(args)?;
    let (rows, gateways, problems) =
        measure(&configs, &[("dv", test)], &[6], rate.as_deref(), args, stop)?;
    if args.json {
        writeln!(
            out,
            "{}",
            json!({"part": "dv", "seconds": args.seconds, "test": test.name(), "results": rows, "gateways": gateways})
        ).map_err(Error::stdout)?;
    } else {
        writeln!(
            out,
            "# bench ipsec, part (c): a DV-like stream ({}) over IPv6\n",
            test.name()
        )
        .map_err(Error::stdout)?;
        writeln!(
            out,
            "The paper (Fig. 13-14): ESP about 30% below NONE; Blowfish about 20% below 3DES.\n"
        )
        .map_err(Error::stdout)?;
        table::header(
            out,
            &[
                ("config", Align::Left),
                ("Mbit/s", Align::Right),
                ("/ NONE", Align::Right),
                ("packets/s", Align::Right),
                ("loss", Align::Right),
                ("delay ms", Align::Right),
                ("jitter ms", Align::Right),
                ("gateway CPU A/B", Align::Right),
            ],
        )
        .map_err(Error::stdout)?;
        let none = rows
            .iter()
            .find(|r| r.config == "none")
            .map(|r| r.outcome.mbit_s);
        for r in &rows {
            let o = &r.outcome;
            table::row(
                out,
                &[
                    r.config.clone(),
                    format!("{:.2}", o.mbit_s),
                    none.filter(|n| *n > 0.0)
                        .map_or("n/a".into(), |n| format!("{:.2}", o.mbit_s / n)),
                    format!("{:.0}", o.count as f64 / o.seconds.max(1e-9)),
                    o.loss.map_or("".into(), |l| format!("{:.2}%", l * 100.0)),
                    o.delay_ms.map_or("".into(), |d| format!("{d:.3}")),
                    o.jitter_ms.map_or("".into(), |d| format!("{d:.3}")),
                    r.carrier_cpu
                        .iter()
                        .map(|c| format!("{:.1}%", c * 100.0))
                        .collect::<Vec<_>>()
                        .join("/"),
                ],
            )
            .map_err(Error::stdout)?;
        }
        writeln!(out, "\n## Per second: packets received / bytes received\n")
            .map_err(Error::stdout)?;
        let mut cols = vec![("second".to_string(), Align::Right)];
        cols.extend(rows.iter().map(|r| (r.config.clone(), Align::Right)));
        let cols_ref: Vec<(&str, Align)> = cols.iter().map(|(n, a)| (n.as_str(), *a)).collect();
        table::header(out, &cols_ref).map_err(Error::stdout)?;
        let secs = rows
            .iter()
            .map(|r| r.outcome.per_second.len())
            .max()
            .unwrap_or(0);
        for s in 0..secs {
            let mut cells = vec![(s + 1).to_string()];
            for r in &rows {
                cells.push(r.outcome.per_second.get(s).map_or(String::new(), |x| {
                    format!("{} / {:.0}", x.count, x.mbit_s * 1e6 / 8.0)
                }));
            }
            table::row(out, &cells).map_err(Error::stdout)?;
        }
    }
    if let Some(dir) = &args.plot_dir {
        std::fs::create_dir_all(dir).map_err(|e| Error::output(pipeline::display_path(dir), &e))?;
        let series: Vec<Series> = rows
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let pts = r
                    .outcome
                    .per_second
                    .iter()
                    .enumerate()
                    .map(|(s, x)| (s as f64 + 1.0, x.count as f64))
                    .collect();
                Series::new(r.config.clone(), pts, i)
            })
            .collect();
        draw(
            &test.name(),
            6,
            &series,
            "packets received/s",
            &dir.join("ipsec-dv-v6.svg"),
        )?;
    }
    Ok(Report {
        interrupted: stop
            .load(Ordering::Relaxed)
            .then(|| "bench ipsec".to_string()),
        problems,
        ..Report::default()
    })
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn the_paper_figures_are_its_tables() {
        let t = Test::UdpStream {
            msg: 4096,
            buf: 32768,
        };
        assert_eq!(paper_figure(&t, "NONE", false), Some(93.98));
        assert_eq!(paper_figure(&t, "AH/ESP", false), Some(8.98));
        assert_eq!(
            paper_figure(&Test::TcpRr { req: 1, resp: 1 }, "ESP", true),
            Some(2048.07)
        );
        assert_eq!(paper_figure(&t, "boringtun", false), None);
        assert_eq!(
            link_tests(&["tcp-rr".into(), "udp-stream".into()])
                .unwrap()
                .len(),
            3
        );
        assert!(link_tests(&["tcp-maerts".into()]).is_err());
    }

    #[test]
    fn rates_are_checked_before_they_reach_tc() {
        assert_eq!(parse_rate("100mbit").unwrap(), "100mbit");
        assert_eq!(parse_rate("1.5Gbit").unwrap(), "1.5gbit");
        for bad in [
            "",
            "mbit",
            "100",
            "-1mbit",
            "1e3mbit",
            "100mbit; rm",
            "0mbit",
        ] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn checks_see_the_paper_ordering() {
        let t = Test::UdpStream {
            msg: 4096,
            buf: 32768,
        };
        let row = |c: &str, ip, mbit| Row {
            config: c.into(),
            ip,
            test: t.name(),
            kind: Some(t),
            paper_label: None,
            outcome: Outcome {
                mbit_s: mbit,
                ..Outcome::default()
            },
            carrier_cpu: vec![],
        };
        let rows = vec![
            row("none", 4, 900.0),
            row("ah", 4, 500.0),
            row("esp", 4, 90.0),
            row("ah-esp", 4, 89.0),
            row("none", 6, 800.0),
        ];
        let c = link_checks(&rows);
        assert_eq!(c[0]["holds"], true, "{c:?}");
        assert!(c.iter().any(|x| x["claim"]
            .as_str()
            .unwrap()
            .contains("none: IPv6 / IPv4 = 0.89")
            && x["holds"] == true));
        let rows = vec![
            row("none", 4, 900.0),
            row("ah", 4, 50.0),
            row("esp", 4, 90.0),
            row("ah-esp", 4, 89.0),
        ];
        assert_eq!(link_checks(&rows)[0]["holds"], false);
    }
}
