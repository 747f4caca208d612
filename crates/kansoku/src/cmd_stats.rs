//! `kansoku stats`: what is in a trace, and how well it is stored.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::Path;

use serde::Serialize;
use trace::format::{Codec, FileFormat};
use trace::index::{index_path, read_index};
use trace::Record;
use wire::IpProtocol;

use crate::cli::StatsArgs;
use crate::error::{display_path, CliError, CliResult, EXIT_PROBLEMS};
use crate::progress::Progress;
use crate::{input, signals, time};

#[derive(Debug, Default, Serialize)]
struct InterfaceStats {
    section: u32,
    id: u32,
    link_type: String,
    snaplen: u32,
    packets: u64,
    bytes: u64,
}

#[derive(Debug, Default, Serialize)]
struct IndexStats {
    chunks: usize,
    packet_chunks: usize,
    raw_chunks: usize,
    raw_share: f64,
}

#[derive(Debug, Default, Serialize)]
struct FileStats {
    file: String,
    format: String,
    codec: String,
    file_bytes: Option<u64>,
    decompressed_bytes: u64,
    /// File bytes over decompressed bytes (out/in, the paper's r).
    compression_ratio: Option<f64>,
    packets: u64,
    captured_bytes: u64,
    wire_bytes: u64,
    /// Packets cut by the snap length (captured < on the wire).
    snapped_packets: u64,
    first_ns: Option<u64>,
    last_ns: Option<u64>,
    first: Option<String>,
    last: Option<String>,
    duration_s: f64,
    sections: u32,
    interfaces: Vec<InterfaceStats>,
    /// Packets per network and transport protocol (and tagging, and layers that did not parse).
    protocols: BTreeMap<String, u64>,
    other_blocks: u64,
    index: Option<IndexStats>,
    warning: Option<String>,
}

pub fn run(args: &StatsArgs) -> CliResult<i32> {
    let mut code = 0;
    let mut all = Vec::new();
    for path in &args.files {
        let s = file_stats(path)?;
        if s.warning.is_some() {
            code = EXIT_PROBLEMS;
        }
        if !args.json {
            print_text(&s)?;
        }
        all.push(s);
    }
    if args.json {
        let mut o = io::stdout().lock();
        if all.len() == 1 {
            serde_json::to_writer_pretty(&mut o, &all[0]).map_err(io::Error::from)?;
        } else {
            serde_json::to_writer_pretty(&mut o, &all).map_err(io::Error::from)?;
        }
        writeln!(o)?;
    }
    Ok(code)
}

fn file_stats(path: &Path) -> CliResult<FileStats> {
    let name = display_path(path);
    let (mut reader, _) = input::open(path, None, None)?;
    let mut s = FileStats {
        file: name.clone(),
        file_bytes: input::file_size(path),
        ..FileStats::default()
    };
    let progress = Progress::new(s.file_bytes, true);
    let mut iface_base = 0usize; // index in s.interfaces of the current section's interface 0
    let mut read_error = None;
    loop {
        if signals::stop_requested() {
            s.warning = Some("interrupted; the figures cover the part read".into());
            break;
        }
        let position = reader.compressed_offset();
        let rec = match reader.next_record() {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                read_error = Some(e);
                break;
            }
        };
        match rec {
            Record::Section(_) => {
                s.sections += 1;
                iface_base = s.interfaces.len();
            }
            Record::Interface(i) => s.interfaces.push(InterfaceStats {
                section: s.sections.saturating_sub(1),
                id: (s.interfaces.len() - iface_base) as u32,
                link_type: i.link_type.to_string(),
                snaplen: i.snaplen,
                ..InterfaceStats::default()
            }),
            Record::Block(_) => s.other_blocks += 1,
            Record::Packet(p) => {
                s.packets += 1;
                progress.tick(s.packets, position);
                let caplen = u64::from(p.caplen());
                s.captured_bytes += caplen;
                s.wire_bytes += u64::from(p.orig_len);
                if caplen < u64::from(p.orig_len) {
                    s.snapped_packets += 1;
                }
                let ts = p.ts_nanos();
                s.first_ns = Some(s.first_ns.map_or(ts, |f| f.min(ts)));
                s.last_ns = Some(s.last_ns.map_or(ts, |l| l.max(ts)));
                if let Some(i) = s.interfaces.get_mut(iface_base + p.interface as usize) {
                    i.packets += 1;
                    i.bytes += caplen;
                }
                count_protocols(&mut s.protocols, &p);
            }
        }
    }
    progress.finish();
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
    if let Some(fb) = s
        .file_bytes
        .filter(|_| s.decompressed_bytes > 0 && reader.codec() != Codec::None)
    {
        s.compression_ratio = Some(fb as f64 / s.decompressed_bytes as f64);
    }
    if let (Some(f), Some(l)) = (s.first_ns, s.last_ns) {
        s.first = Some(time::format_rfc3339(f));
        s.last = Some(time::format_rfc3339(l));
        s.duration_s = (l - f) as f64 / 1e9;
    }
    if path.as_os_str() != "-" {
        let ipath = index_path(path);
        if ipath.exists() {
            let idx = read_index(&ipath).map_err(|e| CliError::file(&ipath, e))?;
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
    if let Some(e) = read_error {
        return Err(CliError::input(format!("{name}: {e}")));
    }
    if let Some(t) = reader.truncation() {
        eprintln!("kansoku: {name}: warning: {t}");
        s.warning = Some(t.to_string());
    }
    Ok(s)
}

fn count_protocols(m: &mut BTreeMap<String, u64>, p: &trace::Packet) {
    let sl = wire::slice(p.link_type, p.data);
    let mut bump = |k: &str| *m.entry(k.to_string()).or_insert(0) += 1;
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

fn print_text(s: &FileStats) -> CliResult<()> {
    let mut o = io::stdout().lock();
    writeln!(o, "{}", s.file)?;
    writeln!(o, "  format:       {}, compression: {}", s.format, s.codec)?;
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
