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
