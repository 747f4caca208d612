//! TUN offloads: what the gateway does in place of the network card a TUN
//! opened with `IFF_VNET_HDR` pretends to be (see [`capture::tun`]).
//!
//! Outbound, the kernel hands over one TCP segment of up to 64 KiB, its
//! checksum left partial, where it would otherwise queue some 45 packets of
//! the MTU for 45 reads: [`segment`] cuts it into packets of `gso_size`
//! payload bytes as Linux's `tcp_gso_segment` does (sequence numbers
//! advanced, IPv4 identification counted up, FIN and PSH on the last packet
//! only, CWR on the first only) and completes every checksum, since ESP and
//! AH protect whole packets. Inbound, [`Coalescer`] joins consecutive
//! in-order TCP segments of one flow into one packet written behind a GSO
//! header, as GRO does on a card: the receiving stack walks (and acks) one
//! packet per run instead of one per segment.
//!
//! The header (`struct virtio_net_hdr`, include/uapi/linux/virtio_net.h) is
//! in the host's byte order, a TUN's default (TUNSETVNETLE/BE are for
//! virtio 1.0 guests): flags u8, gso_type u8, hdr_len u16, gso_size u16,
//! csum_start u16, csum_offset u16. With `NEEDS_CSUM`, the checksum field at
//! `csum_start + csum_offset` holds the pseudo-header's sum, and the
//! checksum is the complement of the sum from `csum_start` to the end.
//!
//! Nothing here trusts the header or the packet: a header that does not fit
//! its packet is an [`OffloadError`], counted by the gateway, never a panic
//! (the `offload` fuzz target).

use std::net::IpAddr;

use wire::ipv4::{self, Ipv4Packet};
use wire::ipv6::{self, Ipv6Packet};
use wire::tcp::{self, TcpPacket};
use wire::{checksum, IpProtocol, TcpFlags};

use super::packet::{dst_addr, src_addr};

/// The header's length.
pub const VNET_HDR_LEN: usize = capture::VNET_HDR_LEN;

/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the checksum is partial (see the module
/// docs).
pub const F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_F_DATA_VALID`: the checksum was checked already.
pub const F_DATA_VALID: u8 = 2;

/// `VIRTIO_NET_HDR_GSO_*`.
pub const GSO_NONE: u8 = 0;
pub const GSO_TCPV4: u8 = 1;
pub const GSO_UDP: u8 = 3;
pub const GSO_TCPV6: u8 = 4;
pub const GSO_UDP_L4: u8 = 5;
/// Or'd into the TCP types: the segment has ECN's CWR set.
pub const GSO_ECN: u8 = 0x80;

/// The most an IPv4 total length or an IPv6 payload length says.
const MAX_LEN: usize = 65_535;

/// TCP's flag bits (RFC 9293 §3.1, RFC 3168 §6.1).
/// The TCP header's byte that holds the flags from CWR to FIN: the low
/// byte of the control bits, which is all GSO and GRO change.
const FLAGS_AT: usize = tcp::field::FLAGS.end - 1;
const FIN: u8 = TcpFlags::FIN.0 as u8;
const SYN: u8 = TcpFlags::SYN.0 as u8;
const RST: u8 = TcpFlags::RST.0 as u8;
const PSH: u8 = TcpFlags::PSH.0 as u8;
const ACK: u8 = TcpFlags::ACK.0 as u8;
const URG: u8 = TcpFlags::URG.0 as u8;
const ECE: u8 = TcpFlags::ECE.0 as u8;
const CWR: u8 = TcpFlags::CWR.0 as u8;

/// Where the TCP checksum is, from the TCP header's start.
const TCP_CHECKSUM_AT: usize = tcp::field::CHECKSUM.start;

/// A `struct virtio_net_hdr`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VnetHdr {
    pub flags: u8,
    pub gso_type: u8,
    pub hdr_len: u16,
    pub gso_size: u16,
    pub csum_start: u16,
    pub csum_offset: u16,
}

impl VnetHdr {
    /// The header at the start of `frame` and the packet after it.
    pub fn parse(frame: &[u8]) -> Option<(VnetHdr, &[u8])> {
        let (h, pkt) = frame.split_first_chunk::<VNET_HDR_LEN>()?;
        let u16_at = |i: usize| u16::from_ne_bytes([h[i], h[i + 1]]);
        Some((
            VnetHdr {
                flags: h[0],
                gso_type: h[1],
                hdr_len: u16_at(2),
                gso_size: u16_at(4),
                csum_start: u16_at(6),
                csum_offset: u16_at(8),
            },
            pkt,
        ))
    }

    /// The header as the kernel reads it.
    pub fn bytes(&self) -> [u8; VNET_HDR_LEN] {
        let mut b = [0u8; VNET_HDR_LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        for (i, v) in [
            self.hdr_len,
            self.gso_size,
            self.csum_start,
            self.csum_offset,
        ]
        .into_iter()
        .enumerate()
        {
            b[2 + 2 * i..4 + 2 * i].copy_from_slice(&v.to_ne_bytes());
        }
        b
    }
}

/// Why a frame read from the TUN could not be turned into packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffloadError {
    /// Shorter than the virtio-net header.
    Truncated,
    /// The partial checksum's place is outside the packet.
    ChecksumPlace,
    /// A GSO type other than TCP over IPv4 or IPv6 (the only ones the
    /// gateway turns on).
    GsoType,
    /// Headers that are not what the GSO type says: IPv4 or IPv6 (without
    /// extension headers) carrying TCP, lengths that agree with the read.
    Headers,
    /// A segment size of zero.
    GsoSize,
}

impl OffloadError {
    /// The name the gateway's report counts it under.
    pub fn name(self) -> &'static str {
        match self {
            OffloadError::Truncated => "truncated",
            OffloadError::ChecksumPlace => "checksum_place",
            OffloadError::GsoType => "gso_type",
            OffloadError::Headers => "headers",
            OffloadError::GsoSize => "gso_size",
        }
    }
}

/// Where a TCP packet's headers are.
#[derive(Clone, Copy, Debug)]
struct Tcp {
    v6: bool,
    /// IP header length (the TCP header's offset).
    ip: usize,
    /// TCP header length.
    tcp: usize,
    /// The packet's length as its IP header says.
    len: usize,
}

impl Tcp {
    /// `p` as IPv4 (not a fragment) or IPv6 (no extension headers)
    /// carrying TCP, its length field within `p`.
    fn parse(p: &[u8]) -> Option<Tcp> {
        let (v6, ip, len) = match wire::ip::version(*p.first()?) {
            ipv4::VERSION => {
                let h = Ipv4Packet::new_checked(p).ok()?;
                if h.protocol() != IpProtocol::Tcp || h.more_frags() || h.frag_offset() != 0 {
                    return None;
                }
                (false, h.header_len(), usize::from(h.total_len()))
            }
            ipv6::VERSION => {
                let h = Ipv6Packet::new_checked(p).ok()?;
                if h.next_header() != IpProtocol::Tcp {
                    return None;
                }
                (
                    true,
                    ipv6::HEADER_LEN,
                    ipv6::HEADER_LEN + usize::from(h.payload_len()),
                )
            }
            _ => return None,
        };
        let tcp = TcpPacket::new_checked(p.get(ip..)?).ok()?.header_len();
        if ip + tcp > len || len > p.len() {
            return None;
        }
        Some(Tcp { v6, ip, tcp, len })
    }

    fn payload(&self) -> usize {
        self.len - self.ip - self.tcp
    }

    /// The unfolded pseudo-header sum for a TCP segment `tcp_len` long.
    fn pseudo(&self, p: &[u8], tcp_len: usize) -> u64 {
        let unspecified = IpAddr::from([0u8; 4]);
        let (s, d) = (
            src_addr(p).unwrap_or(unspecified),
            dst_addr(p).unwrap_or(unspecified),
        );
        checksum::pseudo_header(&s, &d, IpProtocol::Tcp, tcp_len as u32)
    }

    /// Sets the IP length fields of `p` for a packet `len` bytes long, and
    /// the IPv4 header checksum.
    fn set_len(&self, p: &mut [u8], len: usize) {
        if self.v6 {
            Ipv6Packet::new_unchecked(p).set_payload_len((len - ipv6::HEADER_LEN) as u16);
        } else {
            let mut h = Ipv4Packet::new_unchecked(p);
            h.set_len_protocol_and_checksum(len as u16, IpProtocol::Tcp);
        }
    }

    /// Writes the whole TCP checksum of `p` (its length `len`).
    fn fill_checksum(&self, p: &mut [u8]) {
        TcpPacket::new_unchecked(&mut p[self.ip..]).set_checksum(0);
        let sum = self.pseudo(p, p.len() - self.ip) + checksum::sum(&p[self.ip..]);
        TcpPacket::new_unchecked(&mut p[self.ip..]).set_checksum(!checksum::fold(sum));
    }

    /// Whether the TCP checksum of `p` (`self.len` bytes) is right, and
    /// an IPv4 header's.
    fn checksum_ok(&self, p: &[u8]) -> bool {
        if !self.v6 && !Ipv4Packet::new_unchecked(p).verify_checksum() {
            return false;
        }
        let sum = self.pseudo(p, self.len - self.ip) + checksum::sum(&p[self.ip..self.len]);
        checksum::fold(sum) == 0xffff
    }
}

/// Completes the partial checksum of `pkt` in place (see the module docs).
/// A result of 0 is written as 0xffff, as Linux's `skb_checksum_help`
/// does (the same value in one's complement; UDP reads 0 as "none").
pub fn complete_checksum(pkt: &mut [u8], start: u16, offset: u16) -> Result<(), OffloadError> {
    let (start, at) = (usize::from(start), usize::from(start) + usize::from(offset));
    if start > pkt.len() || at + 2 > pkt.len() || at < start {
        return Err(OffloadError::ChecksumPlace);
    }
    let c = match !checksum::fold(checksum::sum(&pkt[start..])) {
        0 => 0xffff,
        c => c,
    };
    pkt[at..at + 2].copy_from_slice(&c.to_be_bytes());
    Ok(())
}

/// Turns one TUN read (`frame`: the virtio-net header, then the packet) into
/// packets with whole checksums, each at most `gso_size` payload bytes for a
/// TCP segment, given in order to `emit`; returns how many. `buf` holds
/// each packet that had to be changed while `emit` has it. An error emits
/// nothing.
pub fn segment(
    frame: &[u8],
    buf: &mut Vec<u8>,
    mut emit: impl FnMut(&[u8]),
) -> Result<usize, OffloadError> {
    let (h, pkt) = VnetHdr::parse(frame).ok_or(OffloadError::Truncated)?;
    let v6 = match h.gso_type & !GSO_ECN {
        GSO_NONE => {
            if h.flags & F_NEEDS_CSUM == 0 {
                emit(pkt);
            } else {
                buf.clear();
                buf.extend_from_slice(pkt);
                complete_checksum(buf, h.csum_start, h.csum_offset)?;
                emit(buf);
            }
            return Ok(1);
        }
        GSO_TCPV4 => false,
        GSO_TCPV6 => true,
        _ => return Err(OffloadError::GsoType),
    };
    let t = Tcp::parse(pkt).ok_or(OffloadError::Headers)?;
    if t.v6 != v6 {
        return Err(OffloadError::Headers);
    }
    let mss = usize::from(h.gso_size);
    if mss == 0 {
        return Err(OffloadError::GsoSize);
    }
    let pkt = &pkt[..t.len];
    let head = t.ip + t.tcp;
    let body = &pkt[head..];
    let seq0 = seq(pkt, &t);
    let id0 = Ipv4Packet::new_unchecked(pkt).ident();
    let flags0 = pkt[t.ip + FLAGS_AT];
    if body.is_empty() {
        // Nothing to cut: the checksums alone, the IPv4 header's too, as
        // for every cut segment (a GSO packet's may be left stale; found
        // by the offload fuzz target).
        buf.clear();
        buf.extend_from_slice(pkt);
        let len = buf.len();
        t.set_len(buf, len);
        t.fill_checksum(buf);
        emit(buf);
        return Ok(1);
    }
    let n = body.len().div_ceil(mss);
    for (i, chunk) in body.chunks(mss).enumerate() {
        buf.clear();
        buf.extend_from_slice(&pkt[..head]);
        buf.extend_from_slice(chunk);
        if !v6 {
            Ipv4Packet::new_unchecked(&mut buf[..]).set_ident(id0.wrapping_add(i as u16));
        }
        let len = buf.len();
        t.set_len(buf, len);
        let seq = seq0.wrapping_add((i * mss) as u32);
        TcpPacket::new_unchecked(&mut buf[t.ip..]).set_seq_number(seq);
        let mut flags = flags0;
        if i + 1 < n {
            flags &= !(FIN | PSH);
        }
        if i > 0 {
            flags &= !CWR;
        }
        buf[t.ip + FLAGS_AT] = flags;
        t.fill_checksum(buf);
        emit(buf);
    }
    Ok(n)
}

/// What [`Coalescer`] hands to the TUN: a header and a packet.
pub type Write<'a> = (VnetHdr, &'a [u8]);

/// Joins consecutive TCP segments of one flow into one GSO packet for a
/// TUN write, as GRO does (Linux's `tcp_gro_receive` rules): the same
/// addresses, ports, IP header (but for lengths, identification and
/// checksum), acknowledgment, window and options; each segment's sequence
/// number right after the last one's data; only ACK (and PSH, which ends
/// the run) set; every segment but the last `gso_size` bytes long; at most
/// 64 KiB. The segments' own checksums are checked first: the joined packet
/// is handed over with its checksum partial, which the kernel takes as
/// good. One run is kept at a time; anything else flushes it.
#[derive(Debug)]
pub struct Coalescer {
    /// The run so far (its first segment's headers, then every payload).
    run: Vec<u8>,
    /// Its segments; 0 when there is no run.
    count: usize,
    at: Option<Tcp>,
    mss: usize,
    next_seq: u32,
    /// A segment shorter than `mss`, or with PSH, ended the run.
    closed: bool,
    /// Segments joined into an earlier one, since [`Coalescer::new`].
    pub joined: u64,
    /// TCP segments whose checksum (or IPv4 header checksum) was wrong:
    /// handed on untouched, for the kernel to drop and count.
    pub bad_checksum: u64,
}

impl Default for Coalescer {
    fn default() -> Self {
        Coalescer::new()
    }
}

impl Coalescer {
    pub fn new() -> Coalescer {
        Coalescer {
            run: Vec::with_capacity(40 + MAX_LEN),
            count: 0,
            at: None,
            mss: 0,
            next_seq: 0,
            closed: false,
            joined: 0,
            bad_checksum: 0,
        }
    }

    /// Takes the packet `p` for the TUN: joins it to the run, or hands the
    /// run and then `p` (or a new run starting with `p`) to `write`.
    pub fn push(&mut self, p: &[u8], mut write: impl FnMut(Write<'_>)) {
        let Some(t) = Tcp::parse(p).filter(|t| t.payload() > 0 && t.len == p.len()) else {
            self.flush(&mut write);
            write((VnetHdr::default(), p));
            return;
        };
        let flags = p[t.ip + FLAGS_AT];
        if flags & (FIN | SYN | RST | URG | ECE | CWR) != 0 || flags & ACK == 0 {
            self.flush(&mut write);
            write((VnetHdr::default(), p));
            return;
        }
        if !t.checksum_ok(p) {
            self.bad_checksum += 1;
            self.flush(&mut write);
            write((VnetHdr::default(), p));
            return;
        }
        if self.joins(&t, p) {
            self.run.extend_from_slice(&p[t.ip + t.tcp..]);
            self.count += 1;
            self.joined += 1;
            self.next_seq = self.next_seq.wrapping_add(t.payload() as u32);
            let at = self.at.as_ref().map_or(0, |a| a.ip) + FLAGS_AT;
            self.run[at] |= flags & PSH;
            self.closed = flags & PSH != 0 || t.payload() < self.mss;
            return;
        }
        self.flush(&mut write);
        self.run.clear();
        self.run.extend_from_slice(p);
        self.count = 1;
        self.at = Some(t);
        self.mss = t.payload();
        self.next_seq = seq(p, &t).wrapping_add(t.payload() as u32);
        self.closed = flags & PSH != 0;
    }

    /// Whether `p` continues the run.
    fn joins(&self, t: &Tcp, p: &[u8]) -> bool {
        let Some(r) = self.at.as_ref().filter(|_| self.count > 0 && !self.closed) else {
            return false;
        };
        let run = &self.run;
        if t.v6 != r.v6 || t.ip != r.ip || t.tcp != r.tcp || t.payload() > self.mss {
            return false;
        }
        // IPv4's total length and IPv6's payload length stay within 16 bits.
        let limit = if r.v6 { 40 + MAX_LEN } else { MAX_LEN };
        if run.len() + t.payload() > limit {
            return false;
        }
        if seq(p, t) != self.next_seq {
            return false;
        }
        // The IP headers but for the fields that differ per packet.
        let same_ip = if t.v6 {
            use ipv6::field::{LENGTH, VER_TC_FLOW};
            p[VER_TC_FLOW] == run[VER_TC_FLOW] && p[LENGTH.end..t.ip] == run[LENGTH.end..t.ip]
        } else {
            use ipv4::field::{CHECKSUM, FLG_OFF, LENGTH, PROTOCOL};
            p[..LENGTH.start] == run[..LENGTH.start]
                && p[FLG_OFF.start..=PROTOCOL] == run[FLG_OFF.start..=PROTOCOL]
                && p[CHECKSUM.end..t.ip] == run[CHECKSUM.end..t.ip]
        };
        // Ports; acknowledgment, data offset, flags but PSH, window,
        // urgent pointer and options (not the checksum).
        use tcp::field::{ACK as ACK_NUMBER, CHECKSUM, DST_PORT, SRC_PORT, WINDOW};
        let (a, b) = (&p[t.ip..t.ip + t.tcp], &run[t.ip..t.ip + t.tcp]);
        same_ip
            && a[SRC_PORT.start..DST_PORT.end] == b[SRC_PORT.start..DST_PORT.end]
            && a[ACK_NUMBER.start..FLAGS_AT] == b[ACK_NUMBER.start..FLAGS_AT]
            && a[FLAGS_AT] & !PSH == b[FLAGS_AT] & !PSH
            && a[WINDOW] == b[WINDOW]
            && a[CHECKSUM.end..] == b[CHECKSUM.end..]
    }

    /// Hands the run to `write`: alone as it came (its checksum checked
    /// here already), or joined behind a GSO header.
    pub fn flush(&mut self, mut write: impl FnMut(Write<'_>)) {
        let (count, Some(t)) = (std::mem::take(&mut self.count), self.at.take()) else {
            return;
        };
        if count == 1 {
            let h = VnetHdr {
                flags: F_DATA_VALID,
                ..VnetHdr::default()
            };
            write((h, &self.run));
            return;
        }
        let len = self.run.len();
        t.set_len(&mut self.run, len);
        let partial = checksum::fold(t.pseudo(&self.run, len - t.ip));
        TcpPacket::new_unchecked(&mut self.run[t.ip..]).set_checksum(partial);
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: if t.v6 { GSO_TCPV6 } else { GSO_TCPV4 },
            hdr_len: (t.ip + t.tcp) as u16,
            gso_size: self.mss as u16,
            csum_start: t.ip as u16,
            csum_offset: TCP_CHECKSUM_AT as u16,
        };
        write((h, &self.run));
    }
}

/// The `offload` fuzz target's body, which the test suite replays on its
/// corpus: the first byte's bit 0 picks [`segment`] (the rest is a TUN
/// read) or [`Coalescer`] (the rest is packets, each behind a 16-bit
/// big-endian length). Panics when a property fails:
/// - every packet [`segment`] gives is whole, its TCP checksum right, and
///   what it cut from a TCP segment joins back into one;
/// - nothing given to a [`Coalescer`] is lost, changed or made up: what it
///   writes alone is what it was given, and what it joins cuts back into
///   exactly the packets that went in.
pub fn replay(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 0 {
        let mut buf = Vec::new();
        let mut segs: Vec<Vec<u8>> = Vec::new();
        let Ok(n) = segment(rest, &mut buf, |p| segs.push(p.to_vec())) else {
            assert!(segs.is_empty(), "a refused read emitted packets");
            return;
        };
        assert_eq!(n, segs.len());
        let gso = VnetHdr::parse(rest).map_or(0, |(h, _)| h.gso_type & !GSO_ECN);
        if gso == GSO_NONE {
            return;
        }
        let mut c = Coalescer::new();
        let mut writes = 0;
        for s in &segs {
            let t = Tcp::parse(s).expect("a segment parses as TCP");
            assert_eq!(t.len, s.len());
            assert!(t.checksum_ok(s), "a segment's checksum is wrong");
            c.push(s, |_| writes += 1);
        }
        c.flush(|_| writes += 1);
        assert_eq!(c.bad_checksum, 0);
        return;
    }
    let mut pkts: Vec<&[u8]> = Vec::new();
    let mut r = rest;
    while let Some((len, tail)) = r.split_first_chunk::<2>() {
        let len = usize::from(u16::from_be_bytes(*len)).min(tail.len());
        pkts.push(&tail[..len]);
        r = &tail[len..];
    }
    let mut c = Coalescer::new();
    let mut out: Vec<Vec<u8>> = Vec::new();
    let back = |(h, q): Write<'_>, out: &mut Vec<Vec<u8>>| {
        if h.gso_type == GSO_NONE {
            out.push(q.to_vec());
            return;
        }
        assert!(q.len() <= 40 + MAX_LEN);
        let frame = [&h.bytes()[..], q].concat();
        let mut buf = Vec::new();
        let n = segment(&frame, &mut buf, |s| out.push(s.to_vec()))
            .expect("a joined packet cuts again");
        assert!(n >= 2);
    };
    for p in &pkts {
        c.push(p, |w| back(w, &mut out));
    }
    c.flush(|w| back(w, &mut out));
    assert_eq!(out.len(), pkts.len(), "packets in and out");
    for (o, p) in out.iter().zip(&pkts) {
        if o[..] == p[..] {
            continue;
        }
        // A joined packet cut again differs only where the kernel's cut
        // would: an IPv4 identification counted up (and so the header
        // checksum), a checksum of zero written as 0xffff or back.
        let t = Tcp::parse(p).expect("only a joined packet changes");
        assert_eq!(o.len(), p.len());
        let (mut o, mut q) = (o.clone(), p.to_vec());
        if !t.v6 {
            for x in [&mut o, &mut q] {
                let mut h = Ipv4Packet::new_unchecked(&mut x[..]);
                h.set_ident(0);
                h.set_checksum(0);
            }
        }
        let c = t.ip + TCP_CHECKSUM_AT;
        let zero = |x: &[u8]| x == [0, 0] || x == [0xff, 0xff];
        if zero(&o[c..c + 2]) && zero(&q[c..c + 2]) {
            q[c..c + 2].copy_from_slice(&o[c..c + 2]);
        }
        assert_eq!(o, q);
    }
}

fn seq(p: &[u8], t: &Tcp) -> u32 {
    TcpPacket::new_unchecked(&p[t.ip..]).seq_number()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TCP packet `payload` bytes long (bytes counting up from `seq`),
    /// with a timestamp option, its checksum whole.
    fn tcp(v6: bool, seq: u32, payload: usize, flags: u8) -> Vec<u8> {
        let ip = if v6 { 40 } else { 20 };
        let len = ip + 32 + payload;
        let mut p = vec![0u8; len];
        if v6 {
            p[0] = 0x60;
            p[4..6].copy_from_slice(&((len - 40) as u16).to_be_bytes());
            p[6] = 6;
            p[7] = 64;
            p[8..24].copy_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
            p[24..40].copy_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        } else {
            p[0] = 0x45;
            p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
            p[4..6].copy_from_slice(&7u16.to_be_bytes());
            p[6] = 0x40;
            p[8] = 64;
            p[9] = 6;
            p[12..16].copy_from_slice(&[10, 0, 0, 1]);
            p[16..20].copy_from_slice(&[10, 0, 0, 2]);
        }
        let t = &mut p[ip..];
        t[0..2].copy_from_slice(&40000u16.to_be_bytes());
        t[2..4].copy_from_slice(&5201u16.to_be_bytes());
        t[4..8].copy_from_slice(&seq.to_be_bytes());
        t[8..12].copy_from_slice(&99u32.to_be_bytes());
        t[12] = 8 << 4;
        t[13] = flags;
        t[14..16].copy_from_slice(&512u16.to_be_bytes());
        t[20..32].copy_from_slice(&[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]);
        for (i, b) in t[32..].iter_mut().enumerate() {
            *b = seq.wrapping_add(i as u32) as u8;
        }
        let tc = Tcp::parse(&p).unwrap();
        if !v6 {
            tc.set_len(&mut p, len);
        }
        tc.fill_checksum(&mut p);
        p
    }

    /// `p` as the kernel hands a TSO segment over: checksum partial.
    fn tso_frame(p: &[u8], mss: u16) -> Vec<u8> {
        let t = Tcp::parse(p).unwrap();
        let mut q = p.to_vec();
        let partial = checksum::fold(t.pseudo(p, p.len() - t.ip));
        q[t.ip + 16..t.ip + 18].copy_from_slice(&partial.to_be_bytes());
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: if t.v6 { GSO_TCPV6 } else { GSO_TCPV4 },
            hdr_len: (t.ip + t.tcp) as u16,
            gso_size: mss,
            csum_start: t.ip as u16,
            csum_offset: 16,
        };
        [&h.bytes()[..], &q].concat()
    }

    fn segments(frame: &[u8]) -> Result<Vec<Vec<u8>>, OffloadError> {
        let mut out = Vec::new();
        let mut buf = Vec::new();
        let n = segment(frame, &mut buf, |p| out.push(p.to_vec()))?;
        assert_eq!(n, out.len());
        Ok(out)
    }

    #[test]
    fn the_header_reads_back_as_written() {
        let h = VnetHdr {
            flags: 1,
            gso_type: 4,
            hdr_len: 72,
            gso_size: 1428,
            csum_start: 40,
            csum_offset: 16,
        };
        let b = h.bytes();
        let frame = [&b[..], &[0x60, 1, 2]].concat();
        assert_eq!(VnetHdr::parse(&frame), Some((h, &[0x60, 1, 2][..])));
        assert_eq!(VnetHdr::parse(&b[..9]), None);
        // Host order, as the kernel writes it.
        assert_eq!(b[4..6], 1428u16.to_ne_bytes());
    }

    #[test]
    fn a_tso_segment_is_cut_as_the_kernel_cuts_it() {
        for v6 in [false, true] {
            // 10,000 bytes in MSS 1,400: 7 full segments and 200 bytes.
            let big = tcp(v6, 0xffff_f000, 10_000, ACK | PSH | FIN | CWR);
            let segs = segments(&tso_frame(&big, 1400)).unwrap();
            assert_eq!(segs.len(), 8, "v6 {v6}");
            let mut data = Vec::new();
            for (i, s) in segs.iter().enumerate() {
                let t = Tcp::parse(s).unwrap();
                assert_eq!(t.len, s.len());
                assert_eq!(t.payload(), if i < 7 { 1400 } else { 200 });
                assert!(t.checksum_ok(s), "segment {i} v6 {v6}");
                // The sequence number wraps past 2^32.
                assert_eq!(seq(s, &t), 0xffff_f000u32.wrapping_add(1400 * i as u32));
                let f = s[t.ip + 13];
                assert_eq!(f & (FIN | PSH) != 0, i == 7, "FIN/PSH on the last only");
                assert_eq!(f & CWR != 0, i == 0, "CWR on the first only");
                assert_ne!(f & ACK, 0);
                if !v6 {
                    assert_eq!(u16::from_be_bytes([s[4], s[5]]), 7 + i as u16);
                    assert_eq!(checksum::checksum(&s[..20]), 0, "header checksum");
                    assert_eq!(u16::from_be_bytes([s[2], s[3]]) as usize, s.len());
                } else {
                    assert_eq!(u16::from_be_bytes([s[4], s[5]]) as usize, s.len() - 40);
                }
                data.extend_from_slice(&s[t.ip + t.tcp..]);
            }
            assert_eq!(data, big[big.len() - 10_000..]);
        }
    }

    #[test]
    fn a_partial_checksum_alone_is_completed() {
        let p = tcp(false, 1, 333, ACK);
        let mut frame = tso_frame(&p, 1400);
        frame[1] = GSO_NONE;
        let segs = segments(&frame).unwrap();
        assert_eq!(segs, std::slice::from_ref(&p));
        // Without NEEDS_CSUM it goes as it is.
        let plain = [&VnetHdr::default().bytes()[..], &p].concat();
        assert_eq!(segments(&plain).unwrap(), [p]);
    }

    #[test]
    fn headers_that_do_not_fit_are_refused_not_trusted() {
        let p = tcp(false, 1, 3000, ACK);
        let good = tso_frame(&p, 1000);
        assert_eq!(segments(&good[..5]), Err(OffloadError::Truncated));
        let mut f = good.clone();
        f[1] = GSO_UDP;
        assert_eq!(segments(&f), Err(OffloadError::GsoType));
        let mut f = good.clone();
        f[1] = GSO_TCPV6;
        assert_eq!(segments(&f), Err(OffloadError::Headers));
        let mut f = good.clone();
        f[4..6].copy_from_slice(&0u16.to_ne_bytes());
        assert_eq!(segments(&f), Err(OffloadError::GsoSize));
        // Cut short: the IP length says more than was read.
        assert_eq!(
            segments(&good[..good.len() - 1]),
            Err(OffloadError::Headers)
        );
        // A checksum place past the end.
        let mut f = good.clone();
        f[1] = GSO_NONE;
        f[6..8].copy_from_slice(&(p.len() as u16).to_ne_bytes());
        assert_eq!(segments(&f), Err(OffloadError::ChecksumPlace));
        // Every cut of a good frame is refused or cut whole, never a panic.
        for n in 0..good.len() {
            let _ = segments(&good[..n]);
        }
    }

    fn coalesce(pkts: &[Vec<u8>]) -> (Vec<(VnetHdr, Vec<u8>)>, Coalescer) {
        let mut c = Coalescer::new();
        let mut out = Vec::new();
        for p in pkts {
            c.push(p, |(h, q)| out.push((h, q.to_vec())));
        }
        c.flush(|(h, q)| out.push((h, q.to_vec())));
        (out, c)
    }

    #[test]
    fn in_order_segments_join_and_cut_back_to_themselves() {
        for v6 in [false, true] {
            let mut pkts: Vec<_> = (0..5)
                .map(|i| tcp(v6, 1000 + 1400 * i, 1400, ACK))
                .collect();
            pkts.push(tcp(v6, 1000 + 1400 * 5, 100, ACK | PSH));
            let (out, c) = coalesce(&pkts);
            assert_eq!(out.len(), 1, "v6 {v6}");
            assert_eq!(c.joined, 5);
            let (h, q) = &out[0];
            assert_eq!(h.gso_size, 1400);
            assert_eq!(h.flags, F_NEEDS_CSUM);
            assert_eq!(h.gso_type, if v6 { GSO_TCPV6 } else { GSO_TCPV4 });
            // Cut again as the kernel would: the same packets, but the IPv4
            // identification (the kernel counts up from the first).
            let frame = [&h.bytes()[..], q].concat();
            let mut back = segments(&frame).unwrap();
            if !v6 {
                for (b, p) in back.iter_mut().zip(&pkts) {
                    b[4..6].copy_from_slice(&p[4..6]);
                    b[10..12].copy_from_slice(&p[10..12]);
                }
            }
            assert_eq!(back, pkts);
        }
    }

    #[test]
    fn what_gro_would_not_join_goes_alone() {
        let a = tcp(false, 1000, 1400, ACK);
        let later = |p: Vec<u8>| vec![a.clone(), p];
        let cases: Vec<(&str, Vec<Vec<u8>>)> = vec![
            ("a gap", later(tcp(false, 1000 + 1401, 1400, ACK))),
            ("SYN", later(tcp(false, 2400, 1400, ACK | SYN))),
            ("FIN", later(tcp(false, 2400, 1400, ACK | FIN))),
            ("a longer segment", later(tcp(false, 2400, 1401, ACK))),
            ("another family", later(tcp(true, 2400, 1400, ACK))),
            ("pure ACK", later(tcp(false, 2400, 0, ACK))),
            ("other ack", {
                let mut p = tcp(false, 2400, 1400, ACK);
                p[28..32].copy_from_slice(&100u32.to_be_bytes());
                let t = Tcp::parse(&p).unwrap();
                t.fill_checksum(&mut p);
                later(p)
            }),
            ("other TTL", {
                let mut p = tcp(false, 2400, 1400, ACK);
                p[8] = 63;
                let t = Tcp::parse(&p).unwrap();
                t.set_len(&mut p, 1452);
                later(p)
            }),
            ("other timestamp", {
                let mut p = tcp(false, 2400, 1400, ACK);
                p[20 + 24] = 9;
                let t = Tcp::parse(&p).unwrap();
                t.fill_checksum(&mut p);
                later(p)
            }),
        ];
        for (what, pkts) in cases {
            let (out, c) = coalesce(&pkts);
            assert_eq!(c.joined, 0, "{what}");
            let plain: Vec<_> = out.iter().map(|(_, q)| q.clone()).collect();
            assert_eq!(plain, pkts, "{what}");
        }
        // After a short segment or PSH the run is over.
        for end in [
            tcp(false, 2400, 700, ACK),
            tcp(false, 2400, 1400, ACK | PSH),
        ] {
            let l = end.len() - 52;
            let next = tcp(false, 2400 + l as u32, 1400, ACK);
            let (out, c) = coalesce(&[a.clone(), end, next]);
            assert_eq!((out.len(), c.joined), (2, 1));
        }
    }

    #[test]
    fn a_bad_checksum_is_left_for_the_kernel() {
        let a = tcp(false, 1000, 1400, ACK);
        let mut b = tcp(false, 2400, 1400, ACK);
        b[100] ^= 1;
        let (out, c) = coalesce(&[a.clone(), b.clone()]);
        assert_eq!(c.bad_checksum, 1);
        assert_eq!(out.len(), 2);
        // The good one alone is marked checked; the bad one is not.
        assert_eq!(
            out[0],
            (
                VnetHdr {
                    flags: F_DATA_VALID,
                    ..VnetHdr::default()
                },
                a
            )
        );
        assert_eq!(out[1], (VnetHdr::default(), b));
    }

    /// The `offload` fuzz target's seed corpus: TSO reads of both
    /// families, cut ones, runs of segments with gaps and flags.
    /// `KANSOKU_WRITE_CORPUS=1` writes them anew.
    fn seeds() -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for v6 in [false, true] {
            let big = tcp(v6, 5, 4000, ACK | PSH);
            let f = tso_frame(&big, 1300);
            out.push([&[0u8][..], &f].concat());
            out.push([&[0u8][..], &f[..f.len() / 2]].concat());
            let mut plain = f.clone();
            plain[1] = GSO_NONE;
            out.push([&[0u8][..], &plain].concat());
            let mut run = vec![1u8];
            for (seq, len, flags) in [
                (100u32, 1000usize, ACK),
                (1100, 1000, ACK),
                (2100, 500, ACK | PSH),
                (2600, 1000, ACK),
                (3700, 1000, ACK),
                (4700, 0, ACK | FIN),
            ] {
                let p = tcp(v6, seq, len, flags);
                run.extend_from_slice(&(p.len() as u16).to_be_bytes());
                run.extend_from_slice(&p);
            }
            out.push(run);
        }
        out
    }

    fn corpus() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/offload")
    }

    #[test]
    fn the_seeds_and_their_cuts_and_flips_replay() {
        for s in seeds() {
            replay(&s);
            for cut in 0..s.len() {
                replay(&s[..cut]);
            }
            for i in 1..s.len() {
                let mut f = s.clone();
                f[i] ^= 0x04;
                replay(&f);
            }
        }
        if std::env::var_os("KANSOKU_WRITE_CORPUS").is_some() {
            std::fs::create_dir_all(corpus()).unwrap();
            for (i, s) in seeds().iter().enumerate() {
                std::fs::write(corpus().join(format!("seed-{i:02}")), s).unwrap();
            }
        }
    }

    #[test]
    fn a_run_stops_at_64_kib() {
        let pkts: Vec<_> = (0..60).map(|i| tcp(false, 1400 * i, 1400, ACK)).collect();
        let (out, _) = coalesce(&pkts);
        assert!(out.len() >= 2);
        for (_, q) in &out {
            assert!(q.len() <= MAX_LEN, "{}", q.len());
        }
        let total: usize = out.iter().map(|(_, q)| q.len() - 52).sum();
        assert_eq!(total, 60 * 1400);
    }
}
