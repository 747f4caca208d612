//! One line per packet, as text or as a JSON object.

use std::io::{self, Write};
use std::net::IpAddr;

use serde::Serialize;
use trace::Packet;
use wire::{IpProtocol, Slice};

use crate::cli::TimeFormat;
use crate::time;

/// Writes `pkt` as one text line:
/// `TIME [if N] [vlan A,B] PROTO SRC:PORT > DST:PORT [FLAGS] len LEN [(captured CAPLEN)] [problem]`.
pub fn write_text(out: &mut impl Write, pkt: &Packet, time_format: TimeFormat) -> io::Result<()> {
    let s = wire::slice(pkt.link_type, pkt.data);
    match time_format {
        TimeFormat::Epoch => write!(out, "{}", time::format_epoch(pkt.ts_nanos()))?,
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
