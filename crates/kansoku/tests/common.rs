//! Helpers shared by the integration tests: running the real binary, reading
//! traces back, and asking tshark (an independent implementation) what it sees.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use trace::read::TraceReader;
use trace::{Interface, PacketKind, RawOption, Record, Section, TsResolution};
use wire::LinkType;

pub fn kansoku() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kansoku"))
}

/// Runs kansoku with `args`; returns its output (any exit code).
pub fn run(args: &[&str]) -> Output {
    kansoku().args(args).output().expect("run kansoku")
}

/// Runs kansoku and insists on exit code 0.
pub fn run_ok(args: &[&str]) -> Output {
    let out = run(args);
    assert!(
        out.status.success(),
        "kansoku {args:?} failed with {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

pub fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data")
        .join(name)
}

pub fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// A record with its bytes owned, for comparing whole traces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owned {
    Section(Section),
    Interface(Interface),
    Packet {
        interface: u32,
        link_type: LinkType,
        ts: u64,
        tsresol: TsResolution,
        orig_len: u32,
        data: Vec<u8>,
        options: Vec<RawOption>,
        kind: PacketKind,
    },
    Block {
        block_type: u32,
        body: Vec<u8>,
    },
}

/// Every record of a trace, and whether the reader reported it cut short.
pub fn read_all(path: &Path) -> (Vec<Owned>, bool) {
    let mut r = TraceReader::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let mut v = Vec::new();
    while let Some(rec) = r
        .next_record()
        .unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
    {
        v.push(match rec {
            Record::Section(s) => Owned::Section(s.clone()),
            Record::Interface(i) => Owned::Interface(i.clone()),
            Record::Packet(p) => Owned::Packet {
                interface: p.interface,
                link_type: p.link_type,
                ts: p.ts,
                tsresol: p.tsresol,
                orig_len: p.orig_len,
                data: p.data.to_vec(),
                options: p.options.to_vec(),
                kind: p.kind,
            },
            Record::Block(b) => Owned::Block {
                block_type: b.block_type,
                body: b.body.to_vec(),
            },
        });
    }
    (v, r.truncation().is_some())
}

/// A packet as tshark sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharkPacket {
    pub ts_ns: u64,
    pub len: u32,
    pub caplen: u32,
    pub interface: u32,
    pub data: Vec<u8>,
}

pub fn tshark_available() -> bool {
    Command::new("tshark")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Reads `path` with tshark: every frame's timestamp, lengths, interface
/// and bytes. Returns the packets and tshark's exit status (non-zero when it
/// met a cut-short file, after printing the packets before the cut).
pub fn tshark_read(path: &Path) -> (Vec<SharkPacket>, bool, String) {
    assert!(
        tshark_available(),
        "tshark is not installed: run scripts/install-deps.sh (the test command does)"
    );
    let out = Command::new("tshark")
        .args(["-n", "-r", p(path), "-T", "ek", "-x"])
        .output()
        .expect("run tshark");
    let mut packets = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if !line.starts_with("{\"timestamp\"") {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(line).expect("tshark ek json");
        let layers = &v["layers"];
        let frame = &layers["frame"];
        let field = |name: &str| -> String {
            let f = &frame[name];
            f.as_str()
                .map(str::to_string)
                .unwrap_or_else(|| f[0].as_str().unwrap_or_default().to_string())
        };
        let raw = layers["frame_raw"].as_str().unwrap_or_default();
        let data = (0..raw.len() / 2)
            .map(|i| u8::from_str_radix(&raw[2 * i..2 * i + 2], 16).expect("hex"))
            .collect();
        packets.push(SharkPacket {
            ts_ns: parse_epoch(&field("frame_frame_time_epoch")),
            len: field("frame_frame_len").parse().expect("frame.len"),
            caplen: field("frame_frame_cap_len").parse().expect("frame.cap_len"),
            interface: field("frame_frame_interface_id").parse().unwrap_or(0),
            data,
        });
    }
    (
        packets,
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn parse_epoch(s: &str) -> u64 {
    let (secs, frac) = s.split_once('.').unwrap_or((s, "0"));
    let mut frac = frac.to_string();
    frac.truncate(9);
    while frac.len() < 9 {
        frac.push('0');
    }
    secs.parse::<u64>().expect("secs") * 1_000_000_000 + frac.parse::<u64>().expect("frac")
}

/// The packets of a trace as kansoku's reader gives them, in tshark's terms.
pub fn packets_of(records: &[Owned]) -> Vec<SharkPacket> {
    let mut section_if_base = 0u32;
    let mut interfaces = 0u32;
    let mut v = Vec::new();
    for r in records {
        match r {
            Owned::Section(_) => section_if_base = interfaces,
            Owned::Interface(_) => interfaces += 1,
            Owned::Packet {
                interface,
                ts,
                tsresol,
                orig_len,
                data,
                ..
            } => v.push(SharkPacket {
                ts_ns: tsresol.ticks_to_nanos(*ts),
                len: *orig_len,
                caplen: data.len() as u32,
                interface: section_if_base + interface,
                data: data.clone(),
            }),
            Owned::Block { .. } => {}
        }
    }
    v
}

/// The host's network namespaces, as `ip netns list` prints them (benches
/// must leave none of theirs behind).
pub fn namespaces() -> String {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// tcpdump's view of the packets of `path`: one line per packet with its
/// time and bytes (times in microseconds, which is what tcpdump writes
/// whatever the file it read; kansoku keeps nanoseconds where it read them).
pub fn tcpdump_dump(path: &Path) -> String {
    let out = Command::new("tcpdump")
        .args([
            "-r",
            p(path),
            "-nn",
            "-tt",
            "--time-stamp-precision=micro",
            "-xx",
        ])
        .stderr(std::process::Stdio::null())
        .output()
        .expect("tcpdump");
    assert!(out.status.success(), "tcpdump -r {}", path.display());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A `kansoku web`, killed and waited for when dropped (a failing test
/// leaves none behind).
pub struct WebServer {
    pub child: std::process::Child,
    pub addr: std::net::SocketAddr,
    /// What it printed before serving.
    pub log: String,
}

impl Drop for WebServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `kansoku web ARGS --listen 127.0.0.1:0`, once it serves.
pub fn web_server(args: &[&str]) -> WebServer {
    use std::io::BufRead;
    let child = kansoku()
        .arg("web")
        .args(args)
        .args(["--listen", "127.0.0.1:0"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start kansoku web");
    // Owned by the WebServer at once: dropped on any panic.
    let mut srv = WebServer {
        child,
        addr: "127.0.0.1:0".parse().unwrap(),
        log: String::new(),
    };
    let mut err = std::io::BufReader::new(srv.child.stderr.take().unwrap());
    loop {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            panic!("kansoku web ended: {}", srv.log);
        }
        srv.log.push_str(&line);
        if let Some(rest) = line.split("on http://").nth(1) {
            srv.addr = rest.trim().trim_end_matches('/').parse().unwrap();
            // Drain the rest so the server never blocks on its stderr.
            std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
            return srv;
        }
    }
}

/// (status, head, body) of a raw HTTP/1.1 request for `target`.
pub fn http(addr: std::net::SocketAddr, method: &str, target: &[u8]) -> (u16, String, Vec<u8>) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    let mut req = Vec::new();
    req.extend_from_slice(method.as_bytes());
    req.push(b' ');
    req.extend_from_slice(target);
    req.extend_from_slice(b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    s.write_all(&req).unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).unwrap();
    let head_end = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("an HTTP answer");
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, head, buf[head_end + 4..].to_vec())
}
