//! A copy of `src/slice.rs` as it was before the slicer read through the
//! protocol views (commit fa660aa), kept only so that `main.rs` can compare
//! the new slicer's every answer with the old one's. Changed from the
//! original: `crate::` paths name `wire::`, the shared result types
//! (`NetworkInfo`, `FiveTuple`, `FlowBits`) are wire's own, their Display impls
//! are free functions, `be16`/`be32` are local, and the unit tests are left out.
//! Do not edit the logic: it is the reference.

#![allow(dead_code)]

use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use wire::null;
use wire::vlan::MAX_TAGS;
use wire::{
    Error, ErrorKind, FiveTuple, FlowBits, IpProtocol, Layer, LinkType, NetworkInfo, SliceError,
    TcpFlags,
};

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// The most IPv6 extension headers walked before giving up; real traffic
/// carries at most three or four (RFC 8200 §4.1 lists the usual order).
pub const MAX_IPV6_EXTENSIONS: usize = 8;

/// The old `impl Display for NetworkInfo`.
pub fn network_info_to_string(n: &NetworkInfo) -> String {
    struct D<'a>(&'a NetworkInfo);
    impl fmt::Display for D<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            let s = self.0;
            let ip = if s.version == 6 { "IP6" } else { "IP" };
            write!(
                f,
                "{ip} {} > {}: {} ttl {}",
                s.src, s.dst, s.protocol, s.ttl
            )?;
            if s.is_fragment {
                write!(
                    f,
                    " frag offset {}{}",
                    s.frag_offset,
                    if s.more_fragments { "+" } else { "" }
                )?;
            }
            Ok(())
        }
    }
    D(n).to_string()
}

/// The old `impl Display for FiveTuple`.
pub fn five_tuple_to_string(t: &FiveTuple) -> String {
    let sa = core::net::SocketAddr::new(t.src, t.src_port);
    let da = core::net::SocketAddr::new(t.dst, t.dst_port);
    format!("{} {sa} > {da}", t.protocol)
}

const NONE: u32 = u32::MAX;
const FRAG: u8 = 1;
const MORE_FRAGS: u8 = 2;

/// The layers of one frame, as found by [`slice`]. Cheap to copy; borrows the frame.
#[derive(Clone, Copy, Debug)]
pub struct Slice<'a> {
    frame: &'a [u8],
    vlans: [u16; MAX_TAGS],
    vlan_count: u8,
    /// 0 when there is no IP layer.
    ip_version: u8,
    protocol: u8,
    ttl: u8,
    frag_flags: u8,
    frag_offset: u16,
    /// Offset of the IP header.
    l3: u32,
    /// Offset of the upper-layer header after any IPv6 extension headers.
    l4: u32,
    /// End of the IP packet in the frame: the smaller of its length field and the frame.
    end: u32,
    payload: u32,
    error: Option<Error>,
}

/// Slices `frame` of link type `link`. Never panics, never allocates; the
/// layers that parsed before an error stay available.
#[inline]
pub fn slice(link: LinkType, frame: &[u8]) -> Slice<'_> {
    let mut s = Slice {
        frame,
        vlans: [0; MAX_TAGS],
        vlan_count: 0,
        ip_version: 0,
        protocol: 0,
        ttl: 0,
        frag_flags: 0,
        frag_offset: 0,
        l3: NONE,
        l4: NONE,
        end: 0,
        payload: NONE,
        error: None,
    };
    // Offsets are kept in u32 to keep the struct small; a frame of 4 GiB or
    // more cannot come from any capture format, but is refused rather than
    // mis-sliced.
    if frame.len() >= NONE as usize {
        s.fail(Error::truncated(Layer::Link, 0, frame.len()));
        return s;
    }
    match link {
        LinkType::Ethernet => {
            if frame.len() < 14 {
                return s.failed(Error::truncated(Layer::Ethernet, 14, frame.len()));
            }
            s.ethertype(be16(&frame[12..14]), 14);
        }
        LinkType::LinuxSll => {
            if frame.len() < 16 {
                return s.failed(Error::truncated(Layer::Sll, 16, frame.len()));
            }
            s.ethertype(be16(&frame[14..16]), 16);
        }
        LinkType::LinuxSll2 => {
            if frame.len() < 20 {
                return s.failed(Error::truncated(Layer::Sll2, 20, frame.len()));
            }
            s.ethertype(be16(&frame[0..2]), 20);
        }
        LinkType::Null => {
            if frame.len() < 4 {
                return s.failed(Error::truncated(Layer::Null, 4, frame.len()));
            }
            match null::ip_version(null::NullHeader::new_unchecked(frame).family()) {
                Some(4) => s.ipv4(4),
                Some(_) => s.ipv6(4),
                None => s.payload = 4,
            }
        }
        LinkType::Raw => match frame.first().map(|b| b >> 4) {
            None => s.fail(Error::truncated(Layer::Ip, 1, 0)),
            Some(4) => s.ipv4(0),
            Some(6) => s.ipv6(0),
            Some(v) => s.fail(Error {
                layer: Layer::Ip,
                offset: 0,
                kind: ErrorKind::BadVersion { found: v },
            }),
        },
        LinkType::Ipv4 => s.ipv4(0),
        LinkType::Ipv6 => s.ipv6(0),
        LinkType::Unknown(code) => s.fail(Error {
            layer: Layer::Link,
            offset: 0,
            kind: ErrorKind::UnsupportedLink { code },
        }),
    }
    s
}

/// The flow of a frame as integers: exactly `slice(link, frame).flow_bits()`,
/// for hot paths that need nothing else of the frame (the profiler's).
///
/// The usual frame — Ethernet, then IPv4 without options or IPv6 without
/// extension headers — is read at fixed offsets after one length check,
/// without the bookkeeping `slice` does for the other accessors (VLANs,
/// TTL, fragment flags, the payload offset, errors). Every other frame, and
/// every header field the fast path does not accept as it stands (a
/// total length that does not cover the ports, a next header that is an
/// extension header), goes to `slice`. The two paths give the same answer
/// for every input: `tests/props.rs` checks it on frames built to reach
/// both, and the `slice` fuzz target on arbitrary ones.
#[inline(always)]
pub fn flow_bits(link: LinkType, frame: &[u8]) -> Option<FlowBits> {
    if link == LinkType::Ethernet {
        if let Some(b) = ethernet_flow_bits(frame) {
            return Some(b);
        }
    }
    sliced_flow_bits(link, frame)
}

/// The slow path of [`flow_bits`], kept out of line so that the fast path
/// inlines into its caller (and its result stays in registers).
#[inline(never)]
fn sliced_flow_bits(link: LinkType, frame: &[u8]) -> Option<FlowBits> {
    slice(link, frame).flow_bits()
}

/// The fast path of [`flow_bits`]: `None` means "not the usual frame, ask
/// `slice`", never "no IP layer".
#[inline(always)]
fn ethernet_flow_bits(f: &[u8]) -> Option<FlowBits> {
    // `slice` refuses frames whose offsets do not fit its u32 fields.
    if f.len() >= NONE as usize {
        return None;
    }
    let ports = |h: &[u8], proto: u8, first: bool| {
        if first && IpProtocol::from(proto).has_ports() {
            (be16(&h[0..2]), be16(&h[2..4]))
        } else {
            (0, 0)
        }
    };
    match (f.get(12..14)?, f.get(14)?) {
        // IPv4, header length 5: the ports at 34..38.
        ([0x08, 0x00], 0x45) => {
            let h: &[u8; 38] = f.get(..38)?.try_into().ok()?;
            // The packet must reach past the ports (total length 0, TSO's
            // "use the frame", and shorter lengths go to `slice`).
            if be16(&h[16..18]) < 24 {
                return None;
            }
            let fragment_offset = be16(&h[20..22]) & 0x1fff;
            let (src_port, dst_port) = ports(&h[34..38], h[23], fragment_offset == 0);
            Some(FlowBits {
                version: 4,
                protocol: h[23],
                src: u128::from(be32(&h[26..30])),
                dst: u128::from(be32(&h[30..34])),
                src_port,
                dst_port,
            })
        }
        // IPv6 whose next header is not an extension header: the ports at 54..58.
        ([0x86, 0xdd], v) if v >> 4 == 6 => {
            let h: &[u8; 58] = f.get(..58)?.try_into().ok()?;
            let nh = h[20];
            if matches!(nh, 0 | 43 | 44 | 60) {
                return None;
            }
            // Payload length 0 (a jumbogram) is the frame, which holds the ports.
            let pl = be16(&h[18..20]);
            if pl != 0 && pl < 4 {
                return None;
            }
            let (src_port, dst_port) = ports(&h[54..58], nh, true);
            Some(FlowBits {
                version: 6,
                protocol: nh,
                src: u128::from_be_bytes(h[22..38].try_into().ok()?),
                dst: u128::from_be_bytes(h[38..54].try_into().ok()?),
                src_port,
                dst_port,
            })
        }
        _ => None,
    }
}

impl<'a> Slice<'a> {
    #[cold]
    fn fail(&mut self, e: Error) {
        self.error = Some(e);
    }

    #[cold]
    fn failed(mut self, e: Error) -> Slice<'a> {
        self.error = Some(e);
        self
    }

    /// Follows VLAN tags from an EtherType at `off` (the offset after it).
    #[inline(always)]
    fn ethertype(&mut self, mut et: u16, mut off: usize) {
        let f = self.frame;
        // 0x9100 is the pre-standard QinQ TPID some switches still send.
        while et == 0x8100 || et == 0x88a8 || et == 0x9100 {
            if f.len() < off + 4 {
                return self.fail(Error::truncated(Layer::Vlan, 4, f.len() - off).at(off));
            }
            let n = usize::from(self.vlan_count);
            if n == MAX_TAGS {
                return self.fail(Error {
                    layer: Layer::Vlan,
                    offset: off,
                    kind: ErrorKind::TooDeep { limit: MAX_TAGS },
                });
            }
            self.vlans[n] = be16(&f[off..off + 2]) & 0x0fff;
            self.vlan_count += 1;
            et = be16(&f[off + 2..off + 4]);
            off += 4;
        }
        match et {
            0x0800 => self.ipv4(off),
            0x86dd => self.ipv6(off),
            // ARP, LLDP, 802.3 length values...: no network layer, not an error.
            _ => self.payload = off as u32,
        }
    }

    /// IPv4 at `off` (<= frame length), RFC 791 §3.1.
    #[inline(always)]
    fn ipv4(&mut self, off: usize) {
        let f = self.frame;
        let b = &f[off..];
        if b.len() < 20 {
            return self.fail(Error::truncated(Layer::Ipv4, 20, b.len()).at(off));
        }
        if b[0] >> 4 != 4 {
            return self.fail(Error {
                layer: Layer::Ipv4,
                offset: off,
                kind: ErrorKind::BadVersion { found: b[0] >> 4 },
            });
        }
        let hl = usize::from(b[0] & 0x0f) * 4;
        if hl < 20 {
            return self.fail(Error::bad_length(Layer::Ipv4, hl, 20).at(off));
        }
        if b.len() < hl {
            return self.fail(Error::truncated(Layer::Ipv4, hl, b.len()).at(off));
        }
        let tl = usize::from(be16(&b[2..4]));
        // Total length 0 is Linux's record of a TSO super-packet: use the frame.
        let end = if tl == 0 {
            f.len()
        } else if tl < hl {
            return self.fail(Error::bad_length(Layer::Ipv4, tl, hl).at(off));
        } else {
            (off + tl).min(f.len())
        };
        let fo = be16(&b[6..8]);
        let frag_offset = (fo & 0x1fff) << 3;
        self.ip_version = 4;
        self.l3 = off as u32;
        self.end = end as u32;
        self.ttl = b[8];
        self.frag_offset = frag_offset;
        self.frag_flags =
            if fo & 0x3fff != 0 { FRAG } else { 0 } | if fo & 0x2000 != 0 { MORE_FRAGS } else { 0 };
        self.transport(off + hl, b[9], frag_offset == 0);
    }

    /// IPv6 at `off` (<= frame length), RFC 8200 §3–4.
    #[inline(always)]
    fn ipv6(&mut self, off: usize) {
        let f = self.frame;
        let b = &f[off..];
        if b.len() < 40 {
            return self.fail(Error::truncated(Layer::Ipv6, 40, b.len()).at(off));
        }
        if b[0] >> 4 != 6 {
            return self.fail(Error {
                layer: Layer::Ipv6,
                offset: off,
                kind: ErrorKind::BadVersion { found: b[0] >> 4 },
            });
        }
        let pl = usize::from(be16(&b[4..6]));
        // Payload length 0 is a jumbogram (RFC 2675): use the frame.
        let end = if pl == 0 {
            f.len()
        } else {
            (off + 40 + pl).min(f.len())
        };
        self.ip_version = 6;
        self.l3 = off as u32;
        self.end = end as u32;
        self.ttl = b[7];
        let mut nh = b[6];
        let mut at = off + 40;
        // Invariant: at <= end, so `end - at` below cannot underflow.
        for _ in 0..MAX_IPV6_EXTENSIONS {
            match nh {
                0 | 43 | 60 => {
                    self.protocol = nh;
                    if end - at < 2 {
                        return self.fail(Error::truncated(Layer::Ipv6Ext, 2, end - at).at(at));
                    }
                    let len = (usize::from(f[at + 1]) + 1) * 8;
                    if end - at < len {
                        return self.fail(Error::truncated(Layer::Ipv6Ext, len, end - at).at(at));
                    }
                    nh = f[at];
                    at += len;
                }
                44 => {
                    self.protocol = nh;
                    if end - at < 8 {
                        return self.fail(Error::truncated(Layer::Ipv6Ext, 8, end - at).at(at));
                    }
                    let fo = be16(&f[at + 2..at + 4]);
                    self.frag_offset = fo & 0xfff8;
                    self.frag_flags = FRAG | if fo & 1 != 0 { MORE_FRAGS } else { 0 };
                    nh = f[at];
                    at += 8;
                }
                _ => return self.transport(at, nh, self.frag_offset == 0),
            }
        }
        self.protocol = nh;
        self.fail(Error {
            layer: Layer::Ipv6Ext,
            offset: at,
            kind: ErrorKind::TooDeep {
                limit: MAX_IPV6_EXTENSIONS,
            },
        })
    }

    /// The upper layer at `at` (<= self.end). Only its header is checked;
    /// a non-first fragment has none.
    #[inline(always)]
    fn transport(&mut self, at: usize, proto: u8, first_fragment: bool) {
        self.protocol = proto;
        self.l4 = at as u32;
        if !first_fragment {
            self.payload = at as u32;
            return;
        }
        let f = self.frame;
        let avail = self.end as usize - at;
        let (layer, need) = match proto {
            6 => {
                if avail < 20 {
                    return self.fail(Error::truncated(Layer::Tcp, 20, avail).at(at));
                }
                let hl = usize::from(f[at + 12] >> 4) * 4;
                if hl < 20 {
                    return self.fail(Error::bad_length(Layer::Tcp, hl, 20).at(at));
                }
                (Layer::Tcp, hl)
            }
            17 => {
                if avail >= 8 {
                    let len = usize::from(be16(&f[at + 4..at + 6]));
                    if len < 8 {
                        return self.fail(Error::bad_length(Layer::Udp, len, 8).at(at));
                    }
                }
                (Layer::Udp, 8)
            }
            1 => (Layer::Icmp, 8),
            58 => (Layer::Icmpv6, 8),
            50 => (Layer::Esp, 8),
            51 => {
                if avail < 12 {
                    return self.fail(Error::truncated(Layer::Ah, 12, avail).at(at));
                }
                (Layer::Ah, (usize::from(f[at + 1]) + 2) * 4)
            }
            _ => {
                self.payload = at as u32;
                return;
            }
        };
        if avail < need {
            return self.fail(Error::truncated(layer, need, avail).at(at));
        }
        self.payload = (at + need) as u32;
    }

    /// The frame that was sliced.
    pub fn frame(&self) -> &'a [u8] {
        self.frame
    }

    /// Length of the frame that was sliced.
    pub fn frame_len(&self) -> usize {
        self.frame.len()
    }

    /// VLAN ids, outermost first.
    pub fn vlans(&self) -> &[u16] {
        &self.vlans[..usize::from(self.vlan_count).min(MAX_TAGS)]
    }

    /// Offset of the IP header, if there is one.
    pub fn network_offset(&self) -> Option<usize> {
        (self.ip_version != 0).then_some(self.l3 as usize)
    }

    /// Offset of the upper-layer header (after IPv6 extension headers), if the
    /// IP header and extension headers parsed.
    pub fn transport_offset(&self) -> Option<usize> {
        (self.l4 != NONE).then_some(self.l4 as usize)
    }

    /// The IP addresses as big-endian integers (IPv4 in the low 32 bits).
    #[inline]
    fn addresses(&self) -> Option<(u128, u128)> {
        let l3 = self.l3 as usize;
        match self.ip_version {
            4 => {
                let b = self.frame.get(l3 + 12..l3 + 20)?;
                Some((u128::from(be32(&b[..4])), u128::from(be32(&b[4..]))))
            }
            6 => {
                let b: &[u8; 32] = self.frame.get(l3 + 8..l3 + 40)?.try_into().ok()?;
                let (s, d) = b.split_at(16);
                Some((
                    u128::from_be_bytes(s.try_into().ok()?),
                    u128::from_be_bytes(d.try_into().ok()?),
                ))
            }
            _ => None,
        }
    }

    /// The IP layer.
    pub fn network(&self) -> Option<NetworkInfo> {
        let (s, d) = self.addresses()?;
        let (src, dst) = if self.ip_version == 4 {
            // `addresses` puts an IPv4 address in the low 32 bits.
            let v4 = |a: u128| IpAddr::V4(Ipv4Addr::from(a as u32));
            (v4(s), v4(d))
        } else {
            (IpAddr::V6(Ipv6Addr::from(s)), IpAddr::V6(Ipv6Addr::from(d)))
        };
        Some(NetworkInfo {
            version: self.ip_version,
            src,
            dst,
            protocol: IpProtocol::from(self.protocol),
            ttl: self.ttl,
            is_fragment: self.frag_flags & FRAG != 0,
            frag_offset: self.frag_offset,
            more_fragments: self.frag_flags & MORE_FRAGS != 0,
        })
    }

    /// The upper-layer header bytes, if this is a first fragment (or not a
    /// fragment) and at least `n` of them are inside the IP packet.
    #[inline]
    fn l4_bytes(&self, n: usize) -> Option<&'a [u8]> {
        if self.l4 == NONE || self.frag_offset != 0 {
            return None;
        }
        let at = self.l4 as usize;
        self.frame
            .get(at..(self.end as usize).max(at))
            .filter(|b| b.len() >= n)
    }

    /// The five-tuple. Ports are 0 for protocols without ports and for
    /// non-first fragments. For TCP and UDP the ports are read whenever the
    /// first four header bytes are present, even if the rest of the header was
    /// cut off (as BPF does); [`error`](Self::error) still reports the cut.
    /// `None` without an IP layer, or when TCP/UDP ports are missing.
    pub fn five_tuple(&self) -> Option<FiveTuple> {
        let n = self.network()?;
        let (src_port, dst_port) = if n.protocol.has_ports() && self.frag_offset == 0 {
            let b = self.l4_bytes(4)?;
            (be16(&b[0..2]), be16(&b[2..4]))
        } else {
            (0, 0)
        };
        Some(FiveTuple {
            src: n.src,
            dst: n.dst,
            protocol: n.protocol,
            src_port,
            dst_port,
        })
    }

    /// The network layer's addresses and protocol with the ports when the
    /// five-tuple has them (else 0), as integers: the same facts as
    /// [`network`](Self::network) and [`five_tuple`](Self::five_tuple)
    /// together, read straight from the frame. `None` without an IP layer.
    #[inline]
    pub fn flow_bits(&self) -> Option<FlowBits> {
        let (src, dst) = self.addresses()?;
        let ports = if IpProtocol::from(self.protocol).has_ports() {
            self.l4_bytes(4)
        } else {
            None
        };
        let (src_port, dst_port) = ports.map_or((0, 0), |b| (be16(&b[0..2]), be16(&b[2..4])));
        Some(FlowBits {
            version: self.ip_version,
            protocol: self.protocol,
            src,
            dst,
            src_port,
            dst_port,
        })
    }

    /// TCP flags, for a TCP first fragment whose flags byte is present.
    pub fn tcp_flags(&self) -> Option<TcpFlags> {
        if self.protocol != 6 || self.ip_version == 0 {
            return None;
        }
        let b = self.l4_bytes(14)?;
        Some(TcpFlags::from_bits_truncate(be16(&b[12..14])))
    }

    /// ICMP or ICMPv6 type and code.
    pub fn icmp(&self) -> Option<(u8, u8)> {
        let icmp = match self.ip_version {
            4 => self.protocol == 1,
            6 => self.protocol == 58,
            _ => false,
        };
        if !icmp {
            return None;
        }
        let b = self.l4_bytes(2)?;
        Some((b[0], b[1]))
    }

    /// For ESP and AH: the protocol and the SPI.
    pub fn ipsec_spi(&self) -> Option<(IpProtocol, u32)> {
        match (self.ip_version != 0, self.protocol) {
            (true, 50) => self.l4_bytes(4).map(|b| (IpProtocol::Esp, be32(&b[0..4]))),
            (true, 51) => self.l4_bytes(8).map(|b| (IpProtocol::Ah, be32(&b[4..8]))),
            _ => None,
        }
    }

    /// Offset in the frame of the transport payload, or of the payload of the
    /// last layer that parsed (the IP payload for other protocols and for
    /// non-first fragments, the link payload for non-IP frames). `None` when
    /// the first layer failed.
    pub fn payload_offset(&self) -> Option<usize> {
        (self.payload != NONE).then_some(self.payload as usize)
    }

    /// The first truncated or malformed layer.
    pub fn error(&self) -> Option<SliceError> {
        self.error
    }
}

/// One line in the spirit of tcpdump:
/// `vlan 10 IP 10.0.0.1:1234 > 192.168.1.1:80: tcp [S.] length 64`.
impl fmt::Display for Slice<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for v in self.vlans() {
            write!(f, "vlan {v} ")?;
        }
        match (self.network(), self.five_tuple()) {
            (Some(n), t) => {
                let ip = if n.version == 6 { "IP6" } else { "IP" };
                match t {
                    Some(t) if n.protocol.has_ports() && !(n.is_fragment && n.frag_offset != 0) => {
                        let sa = core::net::SocketAddr::new(t.src, t.src_port);
                        let da = core::net::SocketAddr::new(t.dst, t.dst_port);
                        write!(f, "{ip} {sa} > {da}: {}", n.protocol)?;
                    }
                    _ => write!(f, "{ip} {} > {}: {}", n.src, n.dst, n.protocol)?,
                }
                if let Some(fl) = self.tcp_flags() {
                    write!(f, " {fl}")?;
                }
                if let Some((t, c)) = self.icmp() {
                    write!(f, " type {t} code {c}")?;
                }
                if let Some((_, spi)) = self.ipsec_spi() {
                    write!(f, " spi 0x{spi:08x}")?;
                }
                if n.is_fragment {
                    write!(
                        f,
                        " frag offset {}{}",
                        n.frag_offset,
                        if n.more_fragments { "+" } else { "" }
                    )?;
                }
            }
            (None, _) => f.write_str("non-ip")?,
        }
        write!(f, " length {}", self.frame.len())?;
        if let Some(e) = self.error {
            write!(f, " [{e}]")?;
        }
        Ok(())
    }
}
