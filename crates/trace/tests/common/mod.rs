//! What the writer tests share: a packet as written and as read back,
//! writing and reading a whole file of them, and reading one with tshark.
//! Each test binary uses a part of it.
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

use trace::write::{TraceWriter, WriteStats, WriterConfig};
use trace::{LinkType, Record, TraceReader};

/// One packet as written and as read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pkt {
    pub link: LinkType,
    pub ts: u64,
    pub orig_len: u32,
    pub data: Vec<u8>,
}

/// A small deterministic generator (xorshift64) for test traffic.
pub fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// Writes `pkts` to `path` with `cfg` and finishes the file.
pub fn write_file(path: &Path, cfg: WriterConfig, pkts: &[Pkt]) -> WriteStats {
    let mut w = TraceWriter::create(path, cfg).unwrap();
    for p in pkts {
        w.write_packet(p.link, p.ts, p.orig_len, &p.data).unwrap();
    }
    w.finish().unwrap()
}

/// Every packet `r` gives, timestamps in nanoseconds.
pub fn read_packets(mut r: TraceReader) -> Vec<Pkt> {
    let mut out = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        if let Record::Packet(p) = rec {
            out.push(Pkt {
                link: p.link_type,
                ts: p.ts_nanos(),
                orig_len: p.orig_len,
                data: p.data.to_vec(),
            });
        }
    }
    out
}

/// The packets `r` gives up to its end or its first error, and how it
/// ended: `None` for a clean end, else the truncation or the error (what
/// `kansoku read` exits non-zero on).
pub fn read_to_end(mut r: TraceReader) -> (Vec<Pkt>, Option<String>) {
    let mut out = Vec::new();
    loop {
        match r.next_record() {
            Ok(Some(Record::Packet(p))) => out.push(Pkt {
                link: p.link_type,
                ts: p.ts_nanos(),
                orig_len: p.orig_len,
                data: p.data.to_vec(),
            }),
            Ok(Some(_)) => {}
            Ok(None) => {
                // Chunks skipped as corrupt come first: they are the worse news.
                let end = r
                    .corruptions()
                    .first()
                    .map(|c| c.to_string())
                    .or_else(|| r.truncation().map(|t| t.to_string()));
                return (out, end);
            }
            Err(e) => return (out, Some(e.to_string())),
        }
    }
}

/// Whether tshark is here; where it is not, the tests that need it say so
/// and skip, except under CI, where it is a failure ([`testkit::require`]).
pub fn have_tshark() -> bool {
    testkit::require_tool("tshark")
}

/// The length on the wire of every packet tshark reads from `path`, in
/// order, or what tshark said when it could not read the file.
pub fn tshark_frame_lens(path: &Path) -> Result<Vec<u32>, String> {
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(path)
        .args(["-T", "fields", "-e", "frame.len"])
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().parse().map_err(|e| format!("{l:?}: {e}")))
        .collect()
}
