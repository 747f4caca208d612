//! Packets as lines of text or JSON objects, one per packet: what `kansoku
//! read` prints, and `kansoku capture` without `-w`.

use std::io::{self, BufWriter, Stdout, Write};
use std::net::IpAddr;

use serde::Serialize;
use trace::time;
use trace::{Packet, Record};
use wire::{IpProtocol, Slice};

use crate::error::{Error, Result};
use crate::packet::Frame;
use crate::sink::PacketSink;

/// How times are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeFormat {
    /// Seconds since the epoch with nanoseconds, as `tcpdump -tt --nano`.
    Epoch,
    /// RFC 3339 in UTC.
    Rfc3339,
}

/// Packet lines on standard output.
pub struct Printer {
    out: BufWriter<Stdout>,
    json: bool,
    time: TimeFormat,
}

impl Printer {
    pub fn new(json: bool, time: TimeFormat) -> Printer {
        Printer {
            out: BufWriter::with_capacity(64 * 1024, io::stdout()),
            json,
            time,
        }
    }

    fn packet(&mut self, p: &Packet<'_>) -> Result<()> {
        let r = if self.json {
            write_json(&mut self.out, p)
        } else {
            write_text(&mut self.out, p, self.time)
        };
        r.map_err(Error::stdout)
    }

    pub fn flush(&mut self) -> Result<()> {
        self.out.flush().map_err(Error::stdout)
    }
}

impl PacketSink for Printer {
    fn record(&mut self, rec: &Record<'_>) -> Result<()> {
        match rec {
            Record::Packet(p) => self.packet(p),
            _ => Ok(()),
        }
    }

    fn frame(&mut self, f: &Frame<'_>) -> Result<()> {
        self.packet(&f.packet())
    }

    fn flush(&mut self) -> Result<()> {
        self.out.flush().map_err(Error::stdout)
    }
}

/// Writes `pkt` as one text line:
/// `TIME [if N] [vlan A,B] PROTO SRC:PORT > DST:PORT [FLAGS] len LEN [(captured CAPLEN)] [problem]`.
pub fn write_text(out: &mut impl Write, pkt: &Packet, time_format: TimeFormat) -> io::Result<()> {
    let s = wire::slice(pkt.link_type, pkt.data);
    match time_format {
        // Written in place, not through a String: this is the per-packet path.
        TimeFormat::Epoch => {
            let ns = pkt.ts_nanos();
            write!(out, "{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)?
        }
        TimeFormat::Rfc3339 => write!(out, "{}", time::format_rfc3339(pkt.ts_nanos()))?,
    }
    if pkt.interface != 0 {
        write!(out, " if {}", pkt.interface)?;
    }
    let vlans = s.vlans();
    if !vlans.is_empty() {
        out.write_all(b" vlan ")?;
        for (i, v) in vlans.iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            write!(out, "{v}")?;
        }
    }
    match s.five_tuple() {
        Some(ft) => {
            if has_ports(ft.protocol) {
                // `tcp 10.0.0.1:1234 > 10.0.0.2:80`, IPv6 addresses in brackets.
                write!(out, " {ft}")?;
            } else {
                write!(out, " {} {} > {}", ft.protocol, ft.src, ft.dst)?;
            }
            if let Some(flags) = s.tcp_flags() {
                write!(out, " {flags}")?;
            }
            if let Some((ty, code)) = s.icmp() {
                write!(out, " type {ty} code {code}")?;
            }
        }
        None => write!(out, " {}", pkt.link_type)?,
    }
    write!(out, " len {}", pkt.orig_len)?;
    if pkt.caplen() != pkt.orig_len {
        write!(out, " (captured {})", pkt.caplen())?;
    }
    if let Some(e) = s.error() {
        write!(out, " [{e}]")?;
    }
    out.write_all(b"\n")
}

fn has_ports(p: IpProtocol) -> bool {
    matches!(p, IpProtocol::Tcp | IpProtocol::Udp)
}

#[derive(Serialize)]
struct JsonPacket<'a> {
    ts_ns: u64,
    time: String,
    interface: u32,
    link_type: String,
    len: u32,
    caplen: u32,
    #[serde(skip_serializing_if = "<[u16]>::is_empty")]
    vlans: &'a [u16],
    #[serde(skip_serializing_if = "Option::is_none")]
    protocol: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    src: Option<IpAddr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dst: Option<IpAddr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    src_port: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dst_port: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tcp_flags: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    icmp_type: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    icmp_code: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    payload_offset: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    problem: Option<String>,
}

/// Writes `pkt` as one JSON object on its own line.
pub fn write_json(out: &mut impl Write, pkt: &Packet) -> io::Result<()> {
    let s: Slice = wire::slice(pkt.link_type, pkt.data);
    let ft = s.five_tuple();
    let ports = ft.filter(|f| has_ports(f.protocol));
    let icmp = s.icmp();
    let j = JsonPacket {
        ts_ns: pkt.ts_nanos(),
        time: time::format_rfc3339(pkt.ts_nanos()),
        interface: pkt.interface,
        link_type: pkt.link_type.to_string(),
        len: pkt.orig_len,
        caplen: pkt.caplen(),
        vlans: s.vlans(),
        protocol: ft.map(|f| f.protocol.to_string()),
        src: ft.map(|f| f.src),
        dst: ft.map(|f| f.dst),
        src_port: ports.map(|f| f.src_port),
        dst_port: ports.map(|f| f.dst_port),
        tcp_flags: s.tcp_flags().map(|f| f.to_string()),
        icmp_type: icmp.map(|i| i.0),
        icmp_code: icmp.map(|i| i.1),
        payload_offset: s.payload_offset(),
        problem: s.error().map(|e| e.to_string()),
    };
    serde_json::to_writer(&mut *out, &j).map_err(io::Error::from)?;
    out.write_all(b"\n")
}
