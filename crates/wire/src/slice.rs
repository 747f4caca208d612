//! The one entry point the rest of kansoku uses: [`slice`] finds the layers of
//! a captured frame in a single pass and records where they are.
//!
//! It reads every header through that protocol's view (`EthernetFrame`,
//! `VlanTag`, `Ipv4Packet`, ...), whose `check_len` gives the errors `slice`
//! reports, and dispatches on the registries (`EtherType`, `IpProtocol`,
//! `LinkType`); the type fields it dispatches on are read as numbers at the
//! views' `field` offsets (see `Slice::ethertype` for why). Header layouts and
//! protocol numbers are written down once, in the protocol modules, and
//! nowhere here.
//!
//! Cost model: every header is bounds-checked once, on the way down; the
//! fields that callers ask for (addresses, ports, flags) are read lazily from
//! the frame by the accessors, so the hot path writes only a few offsets and
//! bytes into a `Copy` struct on the stack. No allocation, no panics: every
//! index below is preceded by a length check on the same range.

use crate::ah::{self, AhPacket};
use crate::be16;
use crate::error::{need, Error, ErrorKind, Layer, SliceError};
use crate::esp::{self, EspPacket};
use crate::ethernet::{self, EtherType, EthernetFrame};
use crate::icmp::{self, IcmpPacket};
use crate::icmpv6::{self, Icmpv6Packet};
use crate::ip::{self, IpProtocol};
use crate::ipv4::{self, Ipv4Packet};
use crate::ipv6::{self, Ipv6Packet};
use crate::ipv6ext::{self, Ipv6ExtHeader, Ipv6FragmentHeader};
use crate::link::LinkType;
use crate::null::{self, NullHeader};
use crate::sll::{self, Sll2Header, SllHeader};
use crate::tcp::{self, TcpFlags, TcpPacket};
use crate::udp::{self, UdpPacket};
use crate::vlan::{self, VlanTag, MAX_TAGS};
use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The most IPv6 extension headers walked before giving up; real traffic
/// carries at most three or four (RFC 8200 §4.1 lists the usual order).
pub const MAX_IPV6_EXTENSIONS: usize = 8;

/// What the network layer of a frame says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NetworkInfo {
    /// 4 or 6.
    pub version: u8,
    pub src: IpAddr,
    pub dst: IpAddr,
    /// The upper-layer protocol after any IPv6 extension headers (or the
    /// extension header where the walk stopped on an error).
    pub protocol: IpProtocol,
    /// TTL (IPv4) or hop limit (IPv6).
    pub ttl: u8,
    /// Whether this is a fragment (MF set or a non-zero offset).
    pub is_fragment: bool,
    /// Fragment offset in bytes.
    pub frag_offset: u16,
    /// The More Fragments flag.
    pub more_fragments: bool,
}

impl fmt::Display for NetworkInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ip = if self.version == ipv6::VERSION {
            "IP6"
        } else {
            "IP"
        };
        write!(
            f,
            "{ip} {} > {}: {} ttl {}",
            self.src, self.dst, self.protocol, self.ttl
        )?;
        if self.is_fragment {
            write!(
                f,
                " frag offset {}{}",
                self.frag_offset,
                if self.more_fragments { "+" } else { "" }
            )?;
        }
        Ok(())
    }
}

/// The classic flow key. Ports are 0 for protocols without ports and for
/// fragments other than the first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FiveTuple {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub protocol: IpProtocol,
    pub src_port: u16,
    pub dst_port: u16,
}

/// `tcp 10.0.0.1:1234 > 192.168.1.1:80`, IPv6 addresses in brackets.
impl fmt::Display for FiveTuple {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sa = core::net::SocketAddr::new(self.src, self.src_port);
        let da = core::net::SocketAddr::new(self.dst, self.dst_port);
        write!(f, "{} {sa} > {da}", self.protocol)
    }
}

/// A flow's fields as plain integers, for hot paths that hash, compare or
/// aggregate flows and have no use for [`IpAddr`]: what
/// [`Slice::flow_bits`] returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowBits {
    /// 4 or 6.
    pub version: u8,
    /// The upper-layer protocol number, as in [`NetworkInfo::protocol`].
    pub protocol: u8,
    /// The source address as a big-endian integer (IPv4 in the low 32 bits).
    pub src: u128,
    /// The destination address, likewise.
    pub dst: u128,
    /// 0 where [`Slice::five_tuple`] has none (no ports in the protocol, a
    /// later fragment, or the ports cut off). For ICMP over IPv4 and ICMPv6
    /// over IPv6, both are `type << 8 | code` ([`Slice::icmp`]), as aguri
    /// keys ICMP (an echo request is port 2048), so that echo, unreachable
    /// and time-exceeded can be told apart.
    pub src_port: u16,
    pub dst_port: u16,
}

/// The port of an ICMP message in a flow: `type << 8 | code`.
#[inline(always)]
pub fn icmp_port(msg_type: u8, code: u8) -> u16 {
    u16::from(msg_type) << 8 | u16::from(code)
}

const NONE: u32 = u32::MAX;
/// `ip_version` when there is no IP layer.
const NO_IP: u8 = 0;
const FRAG: u8 = 1;
const MORE_FRAGS: u8 = 2;

/// The layers of one frame, as found by [`slice()`]. Cheap to copy; borrows the frame.
#[derive(Clone, Copy, Debug)]
pub struct Slice<'a> {
    frame: &'a [u8],
    vlans: [u16; MAX_TAGS],
    vlan_count: u8,
    /// `NO_IP` when there is no IP layer.
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
        ip_version: NO_IP,
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
        // The EtherType fields are read as numbers (see `ethertype`).
        LinkType::Ethernet => match EthernetFrame::new_unchecked(frame).check_len() {
            Ok(()) => s.ethertype(
                be16(&frame[ethernet::field::ETHERTYPE]),
                ethernet::HEADER_LEN,
            ),
            Err(e) => s.fail(e),
        },
        LinkType::LinuxSll => match SllHeader::new_unchecked(frame).check_len() {
            Ok(()) => s.ethertype(be16(&frame[sll::field::PROTOCOL]), sll::HEADER_LEN),
            Err(e) => s.fail(e),
        },
        LinkType::LinuxSll2 => match Sll2Header::new_unchecked(frame).check_len() {
            Ok(()) => s.ethertype(be16(&frame[sll::field2::PROTOCOL]), sll::SLL2_HEADER_LEN),
            Err(e) => s.fail(e),
        },
        LinkType::Null => match NullHeader::new_checked(frame) {
            // `ip_version` knows 4 and 6 only.
            Ok(h) => match null::ip_version(h.family()) {
                Some(ipv4::VERSION) => s.ipv4(null::HEADER_LEN),
                Some(_) => s.ipv6(null::HEADER_LEN),
                None => s.payload = null::HEADER_LEN as u32,
            },
            Err(e) => s.fail(e),
        },
        LinkType::Raw => match frame.first().map(|&b| ip::version(b)) {
            None => s.fail(Error::truncated(Layer::Ip, ip::VERSION_LEN, 0)),
            Some(ipv4::VERSION) => s.ipv4(0),
            Some(ipv6::VERSION) => s.ipv6(0),
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

/// Where the fast path finds the usual frame's IP header: after Ethernet.
const USUAL_IP: usize = ethernet::HEADER_LEN;
/// The ports of IPv4 without options, and the bytes the fast path reads.
const USUAL_V4_PORTS: usize = USUAL_IP + ipv4::HEADER_LEN;
const USUAL_V4_LEN: usize = USUAL_V4_PORTS + ip::PORTS.end;
/// The ports of IPv6 without extension headers, and the bytes read.
const USUAL_V6_PORTS: usize = USUAL_IP + ipv6::HEADER_LEN;
const USUAL_V6_LEN: usize = USUAL_V6_PORTS + ip::PORTS.end;
/// The first byte of IPv4 without options: version 4, IHL 5 (IHL counts
/// 4-byte words).
const V4_WITHOUT_OPTIONS: u8 = (ipv4::VERSION << 4) | (ipv4::HEADER_LEN / 4) as u8;
const ICMP: u8 = IpProtocol::Icmp.number();
const ICMPV6: u8 = IpProtocol::Icmpv6.number();
const ETHERTYPE_IPV4: u16 = EtherType::Ipv4.code();
const ETHERTYPE_IPV6: u16 = EtherType::Ipv6.code();

/// The ports at the start of a TCP or UDP header (`b` holds at least
/// [`ip::PORTS`]); the two keep them alike, so the TCP view reads both.
#[inline(always)]
fn ports(b: &[u8]) -> (u16, u16) {
    let t = TcpPacket::new_unchecked(b);
    (t.src_port(), t.dst_port())
}

/// The fast path of [`flow_bits`]: `None` means "not the usual frame, ask
/// `slice`", never "no IP layer".
#[inline(always)]
fn ethernet_flow_bits(f: &[u8]) -> Option<FlowBits> {
    // `slice` refuses frames whose offsets do not fit its u32 fields.
    if f.len() >= NONE as usize {
        return None;
    }
    // `l4` holds at least the four bytes of TCP's and UDP's ports, so the
    // two of an ICMP type and code too.
    let ports = |l4: &[u8], proto: u8, icmp: u8, first: bool| {
        if !first {
            (0, 0)
        } else if IpProtocol::from(proto).has_ports() {
            ports(l4)
        } else if proto == icmp {
            let p = icmp_port(l4[0], l4[1]);
            (p, p)
        } else {
            (0, 0)
        }
    };
    // The type fields are read as numbers, as in `slice` (see `ethertype`).
    match (be16(f.get(ethernet::field::ETHERTYPE)?), f.get(USUAL_IP)?) {
        (ETHERTYPE_IPV4, &V4_WITHOUT_OPTIONS) => {
            let h: &[u8; USUAL_V4_LEN] = f.get(..USUAL_V4_LEN)?.try_into().ok()?;
            let ip = Ipv4Packet::new_unchecked(&h[USUAL_IP..USUAL_V4_PORTS]);
            // The packet must reach past the ports (total length 0, TSO's
            // "use the frame", and shorter lengths go to `slice`).
            if usize::from(ip.total_len()) < ipv4::HEADER_LEN + ip::PORTS.end {
                return None;
            }
            let protocol = h[USUAL_IP + ipv4::field::PROTOCOL];
            let first = ip.frag_offset() == 0;
            let (src_port, dst_port) = ports(&h[USUAL_V4_PORTS..], protocol, ICMP, first);
            Some(FlowBits {
                version: ipv4::VERSION,
                protocol,
                src: u128::from(u32::from(ip.src_addr())),
                dst: u128::from(u32::from(ip.dst_addr())),
                src_port,
                dst_port,
            })
        }
        // IPv6 whose next header is not an extension header.
        (ETHERTYPE_IPV6, &v) if ip::version(v) == ipv6::VERSION => {
            let h: &[u8; USUAL_V6_LEN] = f.get(..USUAL_V6_LEN)?.try_into().ok()?;
            let ip = Ipv6Packet::new_unchecked(&h[USUAL_IP..USUAL_V6_PORTS]);
            let nh = h[USUAL_IP + ipv6::field::NXT_HDR];
            if ipv6ext::is_walked(nh) {
                return None;
            }
            // Payload length 0 (a jumbogram) is the frame, which holds the ports.
            let pl = usize::from(ip.payload_len());
            if pl != 0 && pl < ip::PORTS.end {
                return None;
            }
            let (src_port, dst_port) = ports(&h[USUAL_V6_PORTS..], nh, ICMPV6, true);
            Some(FlowBits {
                version: ipv6::VERSION,
                protocol: nh,
                src: u128::from(ip.src_addr()),
                dst: u128::from(ip.dst_addr()),
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

    /// Follows VLAN tags from the EtherType `et` that ends at `off`.
    ///
    /// The EtherType is carried as its number, read at the views' field
    /// offset: matched as `EtherType::from_code(et)` right where it is used,
    /// it compiles to compares on the number, whereas the views'
    /// `EtherType`, turned back into a number, can leave a dead compare
    /// chain for every header (and `IpProtocol`, a call and two jump tables:
    /// 25 to 40 more instructions a frame, measured). The IP protocol and
    /// next header fields are read the same way.
    #[inline(always)]
    fn ethertype(&mut self, mut et: u16, mut off: usize) {
        let f = self.frame;
        loop {
            match EtherType::from_code(et) {
                EtherType::Ipv4 => return self.ipv4(off),
                EtherType::Ipv6 => return self.ipv6(off),
                // 802.1Q, 802.1ad or 0x9100: a tag, read below.
                t if t.is_vlan_tpid() => {}
                // ARP, LLDP, 802.3 length values...: no network layer, not an error.
                _ => return self.payload = off as u32,
            }
            let b = &f[off..];
            let tag = match VlanTag::new_checked(b) {
                Ok(t) => t,
                Err(e) => return self.fail(e.at(off)),
            };
            let n = usize::from(self.vlan_count);
            if n == MAX_TAGS {
                return self.fail(Error {
                    layer: Layer::Vlan,
                    offset: off,
                    kind: ErrorKind::TooDeep { limit: MAX_TAGS },
                });
            }
            self.vlans[n] = tag.vid();
            self.vlan_count += 1;
            et = be16(&b[vlan::field::ETHERTYPE]);
            off += vlan::HEADER_LEN;
        }
    }

    /// IPv4 at `off` (<= frame length), RFC 791 §3.1.
    #[inline(always)]
    fn ipv4(&mut self, off: usize) {
        let f = self.frame;
        let b = &f[off..];
        let p = Ipv4Packet::new_unchecked(b);
        // Version, IHL, the header in the frame, a total length of 0 or at
        // least the header.
        if let Err(e) = p.check_len() {
            return self.fail(e.at(off));
        }
        let tl = usize::from(p.total_len());
        // Total length 0 is Linux's record of a TSO super-packet: use the frame.
        let end = if tl == 0 {
            f.len()
        } else {
            (off + tl).min(f.len())
        };
        let frag_offset = p.frag_offset();
        let more_frags = p.more_frags();
        self.ip_version = ipv4::VERSION;
        self.l3 = off as u32;
        self.end = end as u32;
        self.ttl = p.ttl();
        self.frag_offset = frag_offset;
        self.frag_flags = if more_frags || frag_offset != 0 {
            FRAG
        } else {
            0
        } | if more_frags { MORE_FRAGS } else { 0 };
        // The protocol as its number, like the EtherType (see `ethertype`).
        self.transport(
            off + p.header_len(),
            b[ipv4::field::PROTOCOL],
            frag_offset == 0,
        );
    }

    /// IPv6 at `off` (<= frame length), RFC 8200 §3–4.
    #[inline(always)]
    fn ipv6(&mut self, off: usize) {
        let f = self.frame;
        let b = &f[off..];
        let p = Ipv6Packet::new_unchecked(b);
        // Version, and the fixed header in the frame.
        if let Err(e) = p.check_len() {
            return self.fail(e.at(off));
        }
        let pl = usize::from(p.payload_len());
        // Payload length 0 is a jumbogram (RFC 2675): use the frame.
        let end = if pl == 0 {
            f.len()
        } else {
            (off + ipv6::HEADER_LEN + pl).min(f.len())
        };
        self.ip_version = ipv6::VERSION;
        self.l3 = off as u32;
        self.end = end as u32;
        self.ttl = p.hop_limit();
        // The next header is read as its number, like the EtherType (see
        // `ethertype`), here and in every extension header.
        let mut nh = b[ipv6::field::NXT_HDR];
        let mut at = off + ipv6::HEADER_LEN;
        // Invariant: at <= end, so `f[at..end]` below cannot panic.
        for _ in 0..MAX_IPV6_EXTENSIONS {
            match IpProtocol::from_number(nh) {
                IpProtocol::HopByHop | IpProtocol::Ipv6Route | IpProtocol::Ipv6Opts => {
                    self.protocol = nh;
                    let h = Ipv6ExtHeader::new_unchecked(&f[at..end]);
                    if let Err(e) = h.check_len() {
                        return self.fail(e.at(at));
                    }
                    nh = f[at + ipv6ext::field::NXT_HDR];
                    at += h.header_len();
                }
                IpProtocol::Ipv6Frag => {
                    self.protocol = nh;
                    let h = Ipv6FragmentHeader::new_unchecked(&f[at..end]);
                    if let Err(e) = h.check_len() {
                        return self.fail(e.at(at));
                    }
                    self.frag_offset = h.frag_offset();
                    self.frag_flags = FRAG | if h.more_frags() { MORE_FRAGS } else { 0 };
                    nh = f[at + ipv6ext::field::NXT_HDR];
                    at += ipv6ext::FRAGMENT_HEADER_LEN;
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
        let b = &self.frame[at..self.end as usize];
        // The header's length, once its view has checked it.
        let header = match IpProtocol::from_number(proto) {
            IpProtocol::Tcp => {
                let p = TcpPacket::new_unchecked(b);
                p.check_len().map(|()| p.header_len())
            }
            IpProtocol::Udp => UdpPacket::new_unchecked(b)
                .check_len()
                .map(|()| udp::HEADER_LEN),
            IpProtocol::Icmp => IcmpPacket::new_unchecked(b)
                .check_len()
                .map(|()| icmp::HEADER_LEN),
            IpProtocol::Icmpv6 => Icmpv6Packet::new_unchecked(b)
                .check_len()
                .map(|()| icmpv6::HEADER_LEN),
            IpProtocol::Esp => EspPacket::new_unchecked(b)
                .check_len()
                .map(|()| esp::HEADER_LEN),
            // The length field is taken as it stands once the fixed part is
            // there: unlike `AhPacket::check_len`, a length below the fixed
            // part (Payload Len 0) is not refused.
            IpProtocol::Ah => need(Layer::Ah, b, ah::HEADER_LEN).and_then(|()| {
                let hl = AhPacket::new_unchecked(b).header_len();
                need(Layer::Ah, b, hl).map(|()| hl)
            }),
            _ => {
                self.payload = at as u32;
                return;
            }
        };
        match header {
            Ok(len) => self.payload = (at + len) as u32,
            Err(e) => self.fail(e.at(at)),
        }
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
        (self.ip_version != NO_IP).then_some(self.l3 as usize)
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
            ipv4::VERSION => {
                let p = Ipv4Packet::new_unchecked(self.frame.get(l3..l3 + ipv4::HEADER_LEN)?);
                Some((
                    u128::from(u32::from(p.src_addr())),
                    u128::from(u32::from(p.dst_addr())),
                ))
            }
            ipv6::VERSION => {
                let p = Ipv6Packet::new_unchecked(self.frame.get(l3..l3 + ipv6::HEADER_LEN)?);
                Some((u128::from(p.src_addr()), u128::from(p.dst_addr())))
            }
            _ => None,
        }
    }

    /// The IP layer.
    pub fn network(&self) -> Option<NetworkInfo> {
        let (s, d) = self.addresses()?;
        let (src, dst) = if self.ip_version == ipv4::VERSION {
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
            ports(self.l4_bytes(ip::PORTS.end)?)
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
        let l4 = if IpProtocol::from(self.protocol).has_ports() {
            self.l4_bytes(ip::PORTS.end)
        } else {
            None
        };
        let (src_port, dst_port) = match (l4, self.icmp()) {
            (Some(l4), _) => ports(l4),
            (None, Some((t, c))) => (icmp_port(t, c), icmp_port(t, c)),
            (None, None) => (0, 0),
        };
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
        if IpProtocol::from(self.protocol) != IpProtocol::Tcp || self.ip_version == NO_IP {
            return None;
        }
        let b = self.l4_bytes(tcp::field::FLAGS.end)?;
        Some(TcpPacket::new_unchecked(b).flags())
    }

    /// The TCP header and what follows it up to the IP packet's end, if this
    /// is TCP (not a later fragment) and its header is whole.
    pub fn tcp(&self) -> Option<TcpPacket<&'a [u8]>> {
        if IpProtocol::from(self.protocol) != IpProtocol::Tcp || self.ip_version == NO_IP {
            return None;
        }
        TcpPacket::new_checked(self.l4_bytes(tcp::HEADER_LEN)?).ok()
    }

    /// ICMP or ICMPv6 type and code.
    pub fn icmp(&self) -> Option<(u8, u8)> {
        match (self.ip_version, IpProtocol::from(self.protocol)) {
            (ipv4::VERSION, IpProtocol::Icmp) => {
                let p = IcmpPacket::new_unchecked(self.l4_bytes(icmp::field::CODE + 1)?);
                Some((p.msg_type(), p.code()))
            }
            (ipv6::VERSION, IpProtocol::Icmpv6) => {
                let p = Icmpv6Packet::new_unchecked(self.l4_bytes(icmpv6::field::CODE + 1)?);
                Some((p.msg_type(), p.code()))
            }
            _ => None,
        }
    }

    /// For ESP and AH: the protocol and the SPI.
    pub fn ipsec_spi(&self) -> Option<(IpProtocol, u32)> {
        if self.ip_version == NO_IP {
            return None;
        }
        match IpProtocol::from(self.protocol) {
            IpProtocol::Esp => self
                .l4_bytes(esp::field::SPI.end)
                .map(|b| (IpProtocol::Esp, EspPacket::new_unchecked(b).spi())),
            IpProtocol::Ah => self
                .l4_bytes(ah::field::SPI.end)
                .map(|b| (IpProtocol::Ah, AhPacket::new_unchecked(b).spi())),
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
                let ip = if n.version == ipv6::VERSION {
                    "IP6"
                } else {
                    "IP"
                };
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes a hex string of a captured frame.
    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    // Frames captured with `tcpdump -i lo` on Debian 12 (ours, see the seed
    // corpus in fuzz/corpus/slice): loopback is Ethernet with zero MACs.
    const SYN_V4: &str = "00000000000000000000000008004500003c3a544000400602667f0000017f000001b77e46a0d180d49400000000a002ffd7fe3000000204ffd70402080a756c6b7b000000000103030a";
    const ICMP_UNREACH: &str = "000000000000000000000000080045c000419a0000004001e1f97f0000017f00000103032e7e0000000045000025d0ee400040116bd77f0000017f000001920814e90011fe2468656c6c6f20756470";
    const UDP_V6: &str = "00000000000000000000000086dd600b5cf6001211400000000000000000000000000000000100000000000000000000000000000001e86d14ea0012002568656c6c6f2075647036";
    const RST_V6: &str = "00000000000000000000000086dd600f497b00140640000000000000000000000000000000010000000000000000000000000000000146a19638000000009bd5e92350140000001c0000";
    const ECHO6: &str = "00000000000000000000000086dd600a67af001f3a4000000000000000000000000000000001000000000000000000000000000000018000992b123400016b616e736f6b752d70696e672d30313233343536373839";

    #[test]
    fn tcp_syn_v4() {
        let f = hex(SYN_V4);
        let s = slice(LinkType::Ethernet, &f);
        assert_eq!(s.error(), None);
        let t = s.five_tuple().unwrap();
        assert_eq!(t.to_string(), "tcp 127.0.0.1:46974 > 127.0.0.1:18080");
        assert_eq!(s.tcp_flags(), Some(TcpFlags::SYN));
        let tcp = s.tcp().unwrap();
        assert_eq!(
            (tcp.dst_port(), tcp.timestamps()),
            (18080, Some((0x756c_6b7b, 0)))
        );
        assert_eq!(s.payload_offset(), Some(74));
        assert_eq!(s.network().unwrap().ttl, 64);
        assert_eq!(
            s.to_string(),
            "IP 127.0.0.1:46974 > 127.0.0.1:18080: tcp [S] length 74"
        );
    }

    #[test]
    fn icmp_and_v6() {
        let f = hex(ICMP_UNREACH);
        let s = slice(LinkType::Ethernet, &f);
        assert_eq!((s.icmp(), s.payload_offset()), (Some((3, 3)), Some(42)));
        assert_eq!(s.five_tuple().unwrap().src_port, 0);
        let f = hex(UDP_V6);
        let s = slice(LinkType::Ethernet, &f);
        assert_eq!(
            s.five_tuple().unwrap().to_string(),
            "udp [::1]:59501 > [::1]:5354"
        );
        assert_eq!(&f[s.payload_offset().unwrap()..], b"hello udp6");
        let f = hex(RST_V6);
        assert_eq!(
            slice(LinkType::Ethernet, &f)
                .tcp_flags()
                .unwrap()
                .to_string(),
            "[R.]"
        );
        let f = hex(ECHO6);
        let s = slice(LinkType::Ethernet, &f);
        assert_eq!(
            (s.icmp(), s.network().unwrap().protocol),
            (Some((128, 0)), IpProtocol::Icmpv6)
        );
    }

    #[test]
    fn other_link_types_reach_the_same_packet() {
        let f = hex(SYN_V4);
        let ip = &f[14..];
        let want = slice(LinkType::Ethernet, &f).five_tuple();
        for (lt, hdr) in [
            (LinkType::Raw, vec![]),
            (LinkType::Ipv4, vec![]),
            (LinkType::Null, vec![2, 0, 0, 0]),
            (LinkType::Null, vec![0, 0, 0, 2]),
            (LinkType::LinuxSll, hex("00000001000600000000000000000800")),
            (
                LinkType::LinuxSll2,
                hex("0800000000000001000100060000000000000000"),
            ),
        ] {
            let frame = [hdr.as_slice(), ip].concat();
            let s = slice(lt, &frame);
            assert_eq!(s.five_tuple(), want, "{lt}");
            assert_eq!(s.payload_offset(), Some(hdr.len() + 60), "{lt}");
        }
    }

    #[test]
    fn vlans_stack_and_cap() {
        let f = hex(SYN_V4);
        // 802.1ad outer tag 100, 802.1Q inner tag 200, as a QinQ switch sends them.
        let tagged = [&f[..12], &hex("88a80064810000c8")[..], &f[12..]].concat();
        let s = slice(LinkType::Ethernet, &tagged);
        assert_eq!(s.vlans(), &[100, 200]);
        assert_eq!(s.five_tuple(), slice(LinkType::Ethernet, &f).five_tuple());
        let mut deep = f[..12].to_vec();
        for i in 0..9u8 {
            deep.extend_from_slice(&[0x81, 0, 0, i]);
        }
        deep.extend_from_slice(&f[12..]);
        let s = slice(LinkType::Ethernet, &deep);
        assert_eq!(s.vlans().len(), MAX_TAGS);
        assert_eq!(
            s.error().unwrap().kind,
            ErrorKind::TooDeep { limit: MAX_TAGS }
        );
    }

    #[test]
    fn truncation_keeps_the_layers_above() {
        let f = hex(SYN_V4);
        let s = slice(LinkType::Ethernet, &f[..26]);
        assert_eq!(
            s.error().unwrap().to_string(),
            "ipv4 header truncated at offset 14: 20 bytes needed, 12 there"
        );
        assert!(s.network().is_none());
        // TCP cut after the ports: the five-tuple survives, the flags do not.
        let s = slice(LinkType::Ethernet, &f[..40]);
        assert_eq!(
            s.error().unwrap().to_string(),
            "tcp header truncated at offset 34: 20 bytes needed, 6 there"
        );
        assert_eq!(s.five_tuple().unwrap().dst_port, 18080);
        assert_eq!(s.tcp_flags(), None);
        assert!(s.tcp().is_none());
        // Options cut off.
        let e = slice(LinkType::Ethernet, &f[..60]).error().unwrap();
        assert_eq!(
            (e.layer, e.needed(), e.had(), e.offset),
            (Layer::Tcp, 40, 26, 34)
        );
    }

    #[test]
    fn non_ip_and_unknown_link() {
        // A hand-encoded ARP request (RFC 826 layout); only the EtherType matters.
        let arp = hex("ffffffffffff00070daff454080600010800060400010007");
        let s = slice(LinkType::Ethernet, &arp);
        assert_eq!(
            (s.network(), s.error(), s.payload_offset()),
            (None, None, Some(14))
        );
        let s = slice(LinkType::Unknown(147), &arp);
        assert_eq!(
            s.error().unwrap().to_string(),
            "link type 147 not supported"
        );
        assert_eq!(
            slice(LinkType::Raw, &[0x55]).error().unwrap().kind,
            ErrorKind::BadVersion { found: 5 }
        );
    }

    #[test]
    fn fragments() {
        let mut f = hex(ICMP_UNREACH);
        // Non-first fragment: offset 185 units, MF set.
        f[20..22].copy_from_slice(&[0x20, 0xb9]);
        let s = slice(LinkType::Ethernet, &f);
        let n = s.network().unwrap();
        assert!(n.is_fragment && n.more_fragments);
        assert_eq!(n.frag_offset, 1480);
        assert_eq!((s.icmp(), s.payload_offset()), (None, Some(34)));
        assert_eq!(s.five_tuple().unwrap().src_port, 0);
    }

    #[test]
    fn ipv6_extension_walk() {
        let f = hex(UDP_V6);
        // Insert hop-by-hop (Router Alert, RFC 2711) then a first fragment header.
        let mut p = f[..54].to_vec();
        p[20] = 0; // next header: hop-by-hop
        p.extend_from_slice(&hex("2c00050200000100")); // HBH -> fragment
        p.extend_from_slice(&hex("1100000112345678")); // fragment -> UDP, offset 0, M
        p.extend_from_slice(&f[54..]);
        let pl = (p.len() - 54) as u16;
        p[18..20].copy_from_slice(&pl.to_be_bytes());
        let s = slice(LinkType::Ethernet, &p);
        assert_eq!(s.error(), None);
        let n = s.network().unwrap();
        assert_eq!(
            (n.protocol, n.is_fragment, n.more_fragments),
            (IpProtocol::Udp, true, true)
        );
        assert_eq!(s.five_tuple().unwrap().dst_port, 5354);
        assert_eq!(s.transport_offset(), Some(70));
        // Routing header (43) with a length running past the packet.
        let mut q = p.clone();
        q[54] = 43;
        q[55] = 200;
        let e = slice(LinkType::Ethernet, &q).error().unwrap();
        assert_eq!((e.layer, e.offset, e.needed()), (Layer::Ipv6Ext, 54, 1608));
    }

    #[test]
    fn esp_and_ah_stop_the_walk() {
        let mut f = hex(UDP_V6);
        f[20] = 50;
        let s = slice(LinkType::Ethernet, &f);
        assert_eq!(s.ipsec_spi(), Some((IpProtocol::Esp, 0xe86d14ea)));
        assert_eq!(s.five_tuple().unwrap().protocol.to_string(), "esp");
        assert_eq!(s.payload_offset(), Some(62));
        f[20] = 51;
        // The UDP bytes read as AH: payload length 0x14 -> (20+2)*4 = 88 > 18 bytes there.
        let e = slice(LinkType::Ethernet, &f).error().unwrap();
        assert_eq!(e.layer, Layer::Ah);
    }
}
