//! What is in a trace and how well it is stored: the figures of
//! `kansoku stats`, counted record by record.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::Serialize;
use trace::format::{Codec, FileFormat};
use trace::index::{index_path, read_index};
use trace::Record;
use wire::IpProtocol;

use crate::error::{Error, Result};
use crate::run::{Consumer, Flow, Source};
use crate::source::trace::TraceSource;

#[derive(Debug, Default, Serialize)]
pub struct InterfaceStats {
    pub section: u32,
    pub id: u32,
    pub link_type: String,
    pub snaplen: u32,
    pub packets: u64,
    pub bytes: u64,
}

#[derive(Debug, Default, Serialize)]
pub struct IndexStats {
    pub chunks: usize,
    pub packet_chunks: usize,
    pub raw_chunks: usize,
    pub raw_share: f64,
}

#[derive(Debug, Default, Serialize)]
pub struct FileStats {
    pub file: String,
    pub format: String,
    pub codec: String,
    pub file_bytes: Option<u64>,
    pub decompressed_bytes: u64,
    /// File bytes over decompressed bytes (out/in, the paper's r).
    pub compression_ratio: Option<f64>,
    pub packets: u64,
    pub captured_bytes: u64,
    pub wire_bytes: u64,
    /// Packets cut by the snap length (captured < on the wire).
    pub snapped_packets: u64,
    pub first_ns: Option<u64>,
    pub last_ns: Option<u64>,
    pub first: Option<String>,
    pub last: Option<String>,
    pub duration_s: f64,
    pub sections: u32,
    pub interfaces: Vec<InterfaceStats>,
    /// Packets per network and transport protocol (and tagging, and layers that did not parse).
    pub protocols: BTreeMap<String, u64>,
    pub other_blocks: u64,
    pub index: Option<IndexStats>,
    pub warning: Option<String>,
    /// The filter expression the packets were selected by, if any: the
    /// figures above are those of the packets it kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expression: Option<String>,
    /// Packets the expression rejected (not in the figures above).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unmatched_packets: Option<u64>,
}

/// Counts a trace's records into [`FileStats`].
#[derive(Default)]
pub struct Census {
    s: FileStats,
    /// Index in `s.interfaces` of the current section's interface 0.
    iface_base: usize,
}

impl fmt::Display for FileStats {
    /// The figures as `kansoku stats` prints them, a line each.
    fn fmt(&self, o: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self;
        writeln!(o, "{}", s.file)?;
        writeln!(o, "  format:       {}, compression: {}", s.format, s.codec)?;
        if let (Some(e), Some(n)) = (&s.expression, s.unmatched_packets) {
            writeln!(
                o,
                "  expression:   `{e}`: the packets it keeps ({n} others left out)"
            )?;
        }
        if let Some(fb) = s.file_bytes {
            write!(
                o,
                "  size:         {fb} bytes on disk, {} decompressed",
                s.decompressed_bytes
            )?;
            if let Some(r) = s.compression_ratio {
                write!(o, " (ratio {r:.3}, {:.2}x)", 1.0 / r.max(f64::MIN_POSITIVE))?;
            }
            writeln!(o)?;
        }
        if let Some(i) = &s.index {
            writeln!(
                o,
                "  blocks:       {} chunks, {} of {} packet chunks stored raw ({:.1}%)",
                i.chunks,
                i.raw_chunks,
                i.packet_chunks,
                i.raw_share * 100.0
            )?;
        }
        writeln!(
            o,
            "  packets:      {} ({} bytes captured, {} on the wire, {} cut by snaplen)",
            s.packets, s.captured_bytes, s.wire_bytes, s.snapped_packets
        )?;
        if let (Some(f), Some(l)) = (&s.first, &s.last) {
            writeln!(o, "  time:         {f} .. {l} ({:.3} s)", s.duration_s)?;
        }
        writeln!(o, "  sections:     {}", s.sections)?;
        for i in &s.interfaces {
            writeln!(
                o,
                "  interface {}.{}: {} snaplen {}: {} packets, {} bytes",
                i.section, i.id, i.link_type, i.snaplen, i.packets, i.bytes
            )?;
        }
        if !s.protocols.is_empty() {
            let mix: Vec<String> = s
                .protocols
                .iter()
                .map(|(k, v)| {
                    format!(
                        "{k} {v} ({:.1}%)",
                        *v as f64 * 100.0 / s.packets.max(1) as f64
                    )
                })
                .collect();
            writeln!(o, "  protocols:    {}", mix.join(", "))?;
        }
        if s.other_blocks > 0 {
            writeln!(o, "  other blocks: {}", s.other_blocks)?;
        }
        Ok(())
    }
}

impl Consumer<TraceSource> for Census {
    #[inline]
    fn consume(&mut self, rec: Record<'_>) -> Result<Flow> {
        let s = &mut self.s;
        match rec {
            Record::Section(_) => {
                s.sections += 1;
                self.iface_base = s.interfaces.len();
            }
            Record::Interface(i) => s.interfaces.push(InterfaceStats {
                section: s.sections.saturating_sub(1),
                id: (s.interfaces.len() - self.iface_base) as u32,
                link_type: i.link_type.to_string(),
                snaplen: i.snaplen,
                ..InterfaceStats::default()
            }),
            Record::Block(_) => s.other_blocks += 1,
            Record::Packet(p) => {
                s.packets += 1;
                let caplen = u64::from(p.caplen());
                s.captured_bytes += caplen;
                s.wire_bytes += u64::from(p.orig_len);
                if caplen < u64::from(p.orig_len) {
                    s.snapped_packets += 1;
                }
                let ts = p.ts_nanos();
                s.first_ns = Some(s.first_ns.map_or(ts, |f| f.min(ts)));
                s.last_ns = Some(s.last_ns.map_or(ts, |l| l.max(ts)));
                if let Some(i) = s.interfaces.get_mut(self.iface_base + p.interface as usize) {
                    i.packets += 1;
                    i.bytes += caplen;
                }
                count_protocols(&mut s.protocols, &wire::slice(p.link_type, p.data));
            }
        }
        Ok(Flow::Continue)
    }
}

impl Census {
    /// The figures, with what the reader knows of the file (format, codec,
    /// sizes) and the seek index beside `path`, if any. `format_time`
    /// writes the first and last packet times.
    pub fn finish(
        self,
        source: &TraceSource,
        path: &Path,
        format_time: impl Fn(u64) -> String,
    ) -> Result<FileStats> {
        let mut s = self.s;
        let reader = source.reader();
        s.file = source.name().to_string();
        s.file_bytes = source.size();
        s.format = match reader.format() {
            FileFormat::Pcap { nanos, big_endian } => format!(
                "pcap ({}, {})",
                if nanos { "ns" } else { "µs" },
                if big_endian {
                    "big-endian"
                } else {
                    "little-endian"
                }
            ),
            FileFormat::Pcapng => "pcapng".to_string(),
        };
        s.codec = reader.codec().to_string();
        s.decompressed_bytes = reader.offset();
        if let Some(e) = source.expression() {
            s.expression = Some(e.text().to_string());
            s.unmatched_packets = Some(source.unmatched());
        }
        if let Some(fb) = s
            .file_bytes
            .filter(|_| s.decompressed_bytes > 0 && reader.codec() != Codec::None)
        {
            s.compression_ratio = Some(fb as f64 / s.decompressed_bytes as f64);
        }
        if let (Some(f), Some(l)) = (s.first_ns, s.last_ns) {
            s.first = Some(format_time(f));
            s.last = Some(format_time(l));
            s.duration_s = (l - f) as f64 / 1e9;
        }
        if path.as_os_str() != "-" {
            let ipath = index_path(path);
            if ipath.exists() {
                let idx = read_index(&ipath).map_err(|e| Error::file(&ipath, e))?;
                let packet_chunks = idx.entries.iter().filter(|e| !e.is_metadata()).count();
                let raw_chunks = idx
                    .entries
                    .iter()
                    .filter(|e| !e.is_metadata() && e.is_raw())
                    .count();
                s.index = Some(IndexStats {
                    chunks: idx.entries.len(),
                    packet_chunks,
                    raw_chunks,
                    raw_share: if packet_chunks == 0 {
                        0.0
                    } else {
                        raw_chunks as f64 / packet_chunks as f64
                    },
                });
            }
        }
        Ok(s)
    }
}

fn count_protocols(m: &mut BTreeMap<String, u64>, sl: &wire::Slice<'_>) {
    // A key is allocated once, when it is first seen, not per packet.
    let mut bump = |k: &str| match m.get_mut(k) {
        Some(n) => *n += 1,
        None => {
            m.insert(k.to_string(), 1);
        }
    };
    if !sl.vlans().is_empty() {
        bump("vlan-tagged");
    }
    match sl.five_tuple() {
        Some(ft) => {
            bump(if ft.src.is_ipv4() { "ipv4" } else { "ipv6" });
            match ft.protocol {
                IpProtocol::Tcp => bump("tcp"),
                IpProtocol::Udp => bump("udp"),
                IpProtocol::Icmp => bump("icmp"),
                IpProtocol::Icmpv6 => bump("icmp6"),
                _ => bump("other-transport"),
            }
        }
        None => bump("non-ip"),
    }
    if sl.error().is_some() {
        bump("malformed-or-truncated");
    }
}
