//! What the writer tests share: a packet as written and as read back, and
//! writing and reading a whole file of them.

use std::path::Path;

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
