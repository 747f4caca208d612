//! The gateway's packet work that needs no socket: which TUN packets stay
//! on the TUN's link, ICMP "too big" for a sender, fragmenting an outer
//! packet, and the IP and UDP headers put back in front of ESP in UDP.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use wire::icmp::{self, IcmpPacket};
use wire::icmpv6::{self, Icmpv6Packet};
use wire::ipv4::{self, Ipv4Packet};
use wire::ipv6::{self, Ipv6Packet, Ipv6Repr};
use wire::ipv6ext::{self, Ipv6ExtHeader, Ipv6FragmentRepr};
use wire::udp::{self, UdpPacket};
use wire::IpProtocol;

/// Room in front of a received ESP-in-UDP payload for the IP and UDP
/// headers the engine expects.
pub(super) const UDP_HEAD: usize = 48;

/// Bytes of an IPv4 packet an ICMP error quotes at most (RFC 1812 §4.3.2.3:
/// the error within 576 bytes).
const ICMP4_QUOTE: usize = 576 - 28;

/// Bytes of an IPv6 packet an ICMPv6 error quotes at most (RFC 4443 §2.4:
/// the error within the minimum MTU).
const ICMP6_QUOTE: usize = 1280 - 48;

/// The TTL (IPv6: hop limit) of the packets the gateway builds, Linux's
/// default.
const TTL: u8 = 64;

/// The type of service of the ICMP errors the gateway sends: precedence
/// internetwork control, as Linux sends its own (RFC 1812 §4.3.2.5).
const TOS_NETWORK_CONTROL: u8 = 0xc0;

/// Fragment offsets count 8-byte units, and every fragment but the last
/// carries a multiple of them (RFC 791 §3.2, RFC 8200 §4.5).
const FRAGMENT_UNIT: usize = 8;

/// The largest fragment offset in bytes: the 13-bit field, in units.
const MAX_FRAGMENT_OFFSET: usize = 0x1fff * FRAGMENT_UNIT;

/// The IPv4 MTU every host must take whole (RFC 791 §3.2: 68 octets).
pub(super) const IPV4_MIN_MTU: u32 = 68;

/// The IPv6 minimum link MTU (RFC 8200 §5).
pub(super) const IPV6_MIN_MTU: u32 = 1280;

pub(super) fn version(p: &[u8]) -> u8 {
    p.first().map_or(0, |&b| wire::ip::version(b))
}

/// An IPv4 or IPv6 header, read through `wire`'s views.
enum Ip<'a> {
    V4(Ipv4Packet<&'a [u8]>),
    V6(Ipv6Packet<&'a [u8]>),
}

impl<'a> Ip<'a> {
    fn new(p: &'a [u8]) -> Option<Ip<'a>> {
        match version(p) {
            ipv4::VERSION => Ipv4Packet::new_checked(p).ok().map(Ip::V4),
            ipv6::VERSION => Ipv6Packet::new_checked(p).ok().map(Ip::V6),
            _ => None,
        }
    }
}

/// The protocol after the IP header (IPv6: the first next header).
pub(super) fn ip_protocol(p: &[u8]) -> Option<IpProtocol> {
    match Ip::new(p)? {
        Ip::V4(ip) => Some(ip.protocol()),
        Ip::V6(ip) => Some(ip.next_header()),
    }
}

pub(super) fn src_addr(p: &[u8]) -> Option<IpAddr> {
    match Ip::new(p)? {
        Ip::V4(ip) => Some(ip.src_addr().into()),
        Ip::V6(ip) => Some(ip.src_addr().into()),
    }
}

pub(super) fn dst_addr(p: &[u8]) -> Option<IpAddr> {
    match Ip::new(p)? {
        Ip::V4(ip) => Some(ip.dst_addr().into()),
        Ip::V6(ip) => Some(ip.dst_addr().into()),
    }
}

pub(super) fn dont_fragment(p: &[u8]) -> bool {
    Ipv4Packet::new_checked(p).is_ok_and(|ip| ip.dont_frag())
}

/// Whether a packet read from the TUN belongs to the TUN's own link: IPv6
/// to or from a link-local address, from the unspecified address, or to a
/// link- or interface-scope multicast group; IPv4 from 0.0.0.0 or to
/// 224.0.0.0/24 or the broadcast address.
pub(super) fn link_local(p: &[u8]) -> bool {
    match (src_addr(p), dst_addr(p)) {
        (Some(IpAddr::V6(s)), Some(IpAddr::V6(d))) => {
            let ll = |a: &Ipv6Addr| a.segments()[0] & 0xffc0 == 0xfe80;
            let scope = |a: &Ipv6Addr| a.octets()[0] == 0xff && a.octets()[1] & 0x0f <= 2;
            ll(&s) || ll(&d) || s.is_unspecified() || scope(&d)
        }
        (Some(IpAddr::V4(s)), Some(IpAddr::V4(d))) => {
            s.is_unspecified() || d.is_broadcast() || d.octets()[..3] == [224, 0, 0]
        }
        _ => false,
    }
}

/// Whether the packet is an ICMP(v6) error, which is never answered with
/// one (RFC 1122 §3.2.2, RFC 4443 §2.4).
pub(super) fn is_icmp_error(p: &[u8]) -> bool {
    // The type is the first byte of both ICMPs.
    const _: () = assert!(icmp::field::TYPE == icmpv6::field::TYPE);
    let msg_type = |payload: &[u8]| payload.get(icmp::field::TYPE).copied();
    match Ip::new(p) {
        Some(Ip::V4(ip)) => {
            ip.protocol() == IpProtocol::Icmp
                && msg_type(&p[ip.header_len()..]).is_some_and(icmp::is_error)
        }
        Some(Ip::V6(ip)) => {
            ip.next_header() == IpProtocol::Icmpv6
                && msg_type(&p[ipv6::HEADER_LEN..]).is_some_and(icmpv6::is_error)
        }
        None => false,
    }
}

/// ICMP "fragmentation needed" (type 3, code 4, RFC 1191) for `inner` with
/// next-hop MTU `mtu`, from its destination to its source, into `out`.
/// `Some(false)` for an ICMP error (not answered), `None` if `inner` is
/// not whole IPv4.
pub(super) fn icmp4_too_big(inner: &[u8], mtu: u32, out: &mut Vec<u8>) -> Option<bool> {
    let (Some(IpAddr::V4(src)), Some(IpAddr::V4(dst))) = (src_addr(inner), dst_addr(inner)) else {
        return None;
    };
    if is_icmp_error(inner) {
        return Some(false);
    }
    let quote = &inner[..inner.len().min(ICMP4_QUOTE)];
    let total = (ipv4::HEADER_LEN + icmp::HEADER_LEN + quote.len()) as u16;
    out.clear();
    out.resize(ipv4::HEADER_LEN + icmp::HEADER_LEN, 0);
    out.extend_from_slice(quote);
    let mut ip = Ipv4Packet::new_unchecked(&mut out[..ipv4::HEADER_LEN]);
    ip.set_header_len(ipv4::HEADER_LEN);
    ip.set_tos(TOS_NETWORK_CONTROL);
    ip.set_ttl(TTL);
    ip.set_src_addr(dst);
    ip.set_dst_addr(src);
    ip.set_len_protocol_and_checksum(total, IpProtocol::Icmp);
    let mut m = IcmpPacket::new_unchecked(&mut out[ipv4::HEADER_LEN..]);
    m.set_msg_type(icmp::DEST_UNREACHABLE);
    m.set_code(icmp::CODE_FRAG_NEEDED);
    m.set_rest_of_header(mtu.min(u32::from(u16::MAX)));
    m.fill_checksum();
    Some(true)
}

/// ICMPv6 "packet too big" (type 2, RFC 4443 §3.2) for `inner` with MTU
/// `mtu`, from its destination to its source, into `out`. As
/// [`icmp4_too_big`] otherwise.
pub(super) fn icmp6_too_big(inner: &[u8], mtu: u32, out: &mut Vec<u8>) -> Option<bool> {
    let (Some(src @ IpAddr::V6(s)), Some(dst @ IpAddr::V6(d))) = (src_addr(inner), dst_addr(inner))
    else {
        return None;
    };
    if is_icmp_error(inner) {
        return Some(false);
    }
    let quote = &inner[..inner.len().min(ICMP6_QUOTE)];
    let len = (icmpv6::HEADER_LEN + quote.len()) as u16;
    out.clear();
    out.resize(ipv6::HEADER_LEN + icmpv6::HEADER_LEN, 0);
    out.extend_from_slice(quote);
    ipv6_header(d, s, IpProtocol::Icmpv6, len).emit(out).ok()?;
    let mut m = Icmpv6Packet::new_unchecked(&mut out[ipv6::HEADER_LEN..]);
    m.set_msg_type(icmpv6::PACKET_TOO_BIG);
    m.set_code(0);
    m.set_rest_of_header(mtu);
    // From the inner destination to the inner source.
    m.fill_checksum(&dst, &src);
    Some(true)
}

/// The IPv6 header of a packet the gateway sends.
fn ipv6_header(src: Ipv6Addr, dst: Ipv6Addr, next_header: IpProtocol, len: u16) -> Ipv6Repr {
    Ipv6Repr {
        src_addr: src,
        dst_addr: dst,
        next_header,
        payload_len: len,
        hop_limit: TTL,
        traffic_class: 0,
        flow_label: 0,
    }
}

/// Splits the IPv4 packet `p` into fragments of at most `mtu` bytes (RFC
/// 791), each built in `buf` and given to `emit`; `id` stands in for an
/// identification of 0. Options without the copy flag go in the first
/// fragment only. False if `p` is not whole IPv4 or `mtu` leaves no room.
pub(super) fn fragment_v4(
    p: &[u8],
    mtu: usize,
    id: u16,
    buf: &mut Vec<u8>,
    mut emit: impl FnMut(&[u8]),
) -> bool {
    // Option types (RFC 791 §3.1): end of list, no operation, and the flag
    // of those copied into every fragment.
    const OPT_END: u8 = 0;
    const OPT_NOP: u8 = 1;
    const OPT_COPIED: u8 = 0x80;
    let Ok(ip) = Ipv4Packet::new_checked(p) else {
        return false;
    };
    let hl = ip.header_len();
    if usize::from(ip.total_len()) != p.len() {
        return false;
    }
    // Later fragments' header: the fixed part and the copied options.
    let mut later = [0u8; ipv4::HEADER_LEN + ipv4::MAX_OPTIONS_LEN];
    later[..ipv4::HEADER_LEN].copy_from_slice(&p[..ipv4::HEADER_LEN]);
    let mut later_len = ipv4::HEADER_LEN;
    let mut i = ipv4::HEADER_LEN;
    while i < hl {
        match p[i] {
            OPT_END => break,
            OPT_NOP => i += 1,
            t => {
                let l = usize::from(*p.get(i + 1).unwrap_or(&0));
                if l < 2 || i + l > hl {
                    return false;
                }
                if t & OPT_COPIED != 0 {
                    later[later_len..later_len + l].copy_from_slice(&p[i..i + l]);
                    later_len += l;
                }
                i += l;
            }
        }
    }
    let later_len = later_len.div_ceil(4) * 4;
    Ipv4Packet::new_unchecked(&mut later[..]).set_header_len(later_len);
    let (base_off, base_mf) = (usize::from(ip.frag_offset()), ip.more_frags());
    let id = match ip.ident() {
        0 => id.max(1),
        n => n,
    };
    if mtu < later_len.max(hl) + FRAGMENT_UNIT {
        return false;
    }
    let mut at = hl;
    while at < p.len() {
        let h: &[u8] = if at == hl {
            &p[..hl]
        } else {
            &later[..later_len]
        };
        let room = (mtu - h.len()) & !(FRAGMENT_UNIT - 1);
        let len = room.min(p.len() - at);
        let last = at + len == p.len();
        let off = base_off + (at - hl);
        if off > MAX_FRAGMENT_OFFSET {
            return false;
        }
        buf.clear();
        buf.extend_from_slice(h);
        buf.extend_from_slice(&p[at..at + len]);
        let total = buf.len() as u16;
        let mut f = Ipv4Packet::new_unchecked(&mut buf[..]);
        f.set_total_len(total);
        f.set_ident(id);
        // DF is cleared: these are the fragments.
        f.set_frag(false, !last || base_mf, off as u16);
        f.fill_checksum();
        emit(buf);
        at += len;
    }
    true
}

/// Splits the IPv6 packet `p` into fragments of at most `mtu` bytes (RFC
/// 8200 §4.5): the unfragmentable part (the header, hop-by-hop and routing
/// headers, destination options before a routing header) in each, then a
/// fragment header with identification `id`. Each is built in `buf` and
/// given to `emit`. False if `p` is not whole IPv6, is a fragment already,
/// or `mtu` leaves no room.
pub(super) fn fragment_v6(
    p: &[u8],
    mtu: usize,
    id: u32,
    buf: &mut Vec<u8>,
    mut emit: impl FnMut(&[u8]),
) -> bool {
    let Some(ip) = Ipv6Packet::new_checked(p)
        .ok()
        .filter(|ip| usize::from(ip.payload_len()) + ipv6::HEADER_LEN == p.len())
    else {
        return false;
    };
    let (mut next, mut next_at, mut at) =
        (ip.next_header(), ipv6::field::NXT_HDR, ipv6::HEADER_LEN);
    loop {
        let routing_follows = next == IpProtocol::Ipv6Opts
            && p.get(at + ipv6ext::field::NXT_HDR)
                .copied()
                .map(IpProtocol::from)
                == Some(IpProtocol::Ipv6Route);
        if !(next == IpProtocol::HopByHop || next == IpProtocol::Ipv6Route || routing_follows) {
            break;
        }
        let Some(ext) = p.get(at..).and_then(|e| Ipv6ExtHeader::new_checked(e).ok()) else {
            return false;
        };
        next = ext.next_header();
        next_at = at + ipv6ext::field::NXT_HDR;
        at += ext.header_len();
    }
    let frag_len = ipv6ext::FRAGMENT_HEADER_LEN;
    if next == IpProtocol::Ipv6Frag || mtu < at + frag_len + FRAGMENT_UNIT {
        return false;
    }
    let room = (mtu - at - frag_len) & !(FRAGMENT_UNIT - 1);
    let mut off = at;
    while off < p.len() {
        let len = room.min(p.len() - off);
        let last = off + len == p.len();
        let fo = off - at;
        if fo > MAX_FRAGMENT_OFFSET {
            return false;
        }
        buf.clear();
        buf.extend_from_slice(&p[..at]);
        buf[next_at] = IpProtocol::Ipv6Frag.into();
        buf.resize(at + frag_len, 0);
        let f = Ipv6FragmentRepr {
            next_header: next,
            frag_offset: fo as u16,
            more_frags: !last,
            ident: id,
        };
        if f.emit(&mut buf[at..]).is_err() {
            return false;
        }
        buf.extend_from_slice(&p[off..off + len]);
        let pl = (buf.len() - ipv6::HEADER_LEN) as u16;
        Ipv6Packet::new_unchecked(&mut buf[..]).set_payload_len(pl);
        emit(buf);
        off += len;
    }
    true
}

/// Puts the IP and UDP headers of a datagram from `src` to `dst` port
/// `dport` in front of its `len`-byte payload at `buf[UDP_HEAD..]`; returns
/// where the packet starts. `None` for mixed families or a payload too long.
pub(super) fn udp_headers(
    buf: &mut [u8],
    len: usize,
    src: SocketAddr,
    dst: IpAddr,
    dport: u16,
) -> Option<usize> {
    let ulen = u16::try_from(udp::HEADER_LEN + len).ok()?;
    let at = UDP_HEAD - udp::HEADER_LEN;
    let mut u = UdpPacket::new_unchecked(&mut buf[at..UDP_HEAD]);
    u.set_src_port(src.port());
    u.set_dst_port(dport);
    u.set_len(ulen);
    u.set_checksum(0);
    match (src.ip(), dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let start = at - ipv4::HEADER_LEN;
            let total = u16::try_from(ipv4::HEADER_LEN + udp::HEADER_LEN + len).ok()?;
            let mut h = Ipv4Packet::new_unchecked(&mut buf[start..at]);
            h.set_header_len(ipv4::HEADER_LEN);
            h.set_tos(0);
            h.set_ident(0);
            h.set_frag(false, false, 0);
            h.set_ttl(TTL);
            h.set_src_addr(s);
            h.set_dst_addr(d);
            h.set_len_protocol_and_checksum(total, IpProtocol::Udp);
            Some(start)
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let start = at - ipv6::HEADER_LEN;
            ipv6_header(s, d, IpProtocol::Udp, ulen)
                .emit(&mut buf[start..at])
                .ok()?;
            Some(start)
        }
        _ => None,
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use ipsec::frag::{Reassembler, Step};
    use wire::icmp::IcmpPacket;
    use wire::icmpv6::Icmpv6Packet;
    use wire::ipv4::Ipv4Packet;

    pub(crate) use ipsec::fuzzing::{ipv4_packet as v4, ipv6_packet as v6};

    #[test]
    fn icmp_frag_needed_quotes_the_packet_back_to_its_sender() {
        let inner = v4(6, true, &[], 1480);
        let mut out = Vec::new();
        assert_eq!(icmp4_too_big(&inner, 1438, &mut out), Some(true));
        assert_eq!(out.len(), 576);
        let ip = Ipv4Packet::new_checked(&out[..]).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!(
            (ip.src_addr().octets(), ip.dst_addr().octets()),
            ([10, 0, 0, 2], [10, 0, 0, 1])
        );
        let icmp = IcmpPacket::new_checked(ip.payload()).unwrap();
        assert!(icmp.verify_checksum());
        assert_eq!((icmp.msg_type(), icmp.code()), (3, 4));
        assert_eq!(icmp.rest_of_header(), 1438);
        assert_eq!(icmp.payload(), &inner[..548]);
        // A short packet is quoted whole; an ICMP error is not answered.
        let short = v4(17, true, &[], 12);
        assert_eq!(icmp4_too_big(&short, 1000, &mut out), Some(true));
        assert_eq!(&out[28..], &short[..]);
        let mut err = v4(1, true, &[], 36);
        err[20] = 3;
        assert_eq!(icmp4_too_big(&err, 1000, &mut out), Some(false));
        assert_eq!(icmp4_too_big(&[0x45, 0, 0], 1000, &mut out), None);
    }

    #[test]
    fn icmpv6_packet_too_big_fits_the_minimum_mtu() {
        let inner = v6(6, &[], 1500);
        let mut out = Vec::new();
        assert_eq!(icmp6_too_big(&inner, 1422, &mut out), Some(true));
        assert_eq!(out.len(), 1280);
        assert_eq!(usize::from(u16::from_be_bytes([out[4], out[5]])), 1240);
        let (s, d) = (src_addr(&out).unwrap(), dst_addr(&out).unwrap());
        assert_eq!(
            (s, d),
            (dst_addr(&inner).unwrap(), src_addr(&inner).unwrap())
        );
        let icmp = Icmpv6Packet::new_checked(&out[40..]).unwrap();
        assert!(icmp.verify_checksum(&s, &d));
        assert_eq!(
            (icmp.msg_type(), icmp.code(), icmp.rest_of_header()),
            (2, 0, 1422)
        );
        assert_eq!(&out[48..], &inner[..1232]);
        let mut err = v6(58, &[], 48);
        err[40] = 1;
        assert_eq!(icmp6_too_big(&err, 1280, &mut out), Some(false));
        assert_eq!(icmp6_too_big(&inner[..30], 1280, &mut out), None);
    }

    /// Fragments `p` with `frag` at `mtu`, checks each, and puts them back
    /// together (in reverse order) with the reassembler.
    fn round_trip(p: &[u8], mtu: usize, v6: bool) -> (Vec<u8>, usize) {
        let mut buf = Vec::new();
        let mut frags: Vec<Vec<u8>> = Vec::new();
        let ok = if v6 {
            fragment_v6(p, mtu, 0xabcd, &mut buf, |f| frags.push(f.to_vec()))
        } else {
            fragment_v4(p, mtu, 0xabcd, &mut buf, |f| frags.push(f.to_vec()))
        };
        assert!(ok);
        for f in &frags {
            assert!(f.len() <= mtu, "{} > {mtu}", f.len());
            if !v6 {
                assert!(Ipv4Packet::new_checked(&f[..]).unwrap().verify_checksum());
            }
        }
        let mut r = Reassembler::new(crate::REASSEMBLY_SLOTS);
        let mut whole = Vec::new();
        let n = frags.len();
        for (i, f) in frags.iter().rev().enumerate() {
            let want = if i + 1 == n { Step::Done } else { Step::Held };
            assert_eq!(r.add(f, 0, &mut whole), want);
        }
        (whole, n)
    }

    #[test]
    fn fragments_of_an_outer_packet_reassemble_to_it() {
        // IPv4 with a copied option (security, 130) and one that is not
        // (record route, 7): both in the first fragment, the copied one in
        // every fragment.
        let opts = [130, 4, 0, 0, 7, 3, 4, 1];
        let p = v4(50, false, &opts, 3000);
        let (whole, n) = round_trip(&p, 1500, false);
        assert_eq!(n, 3);
        assert_eq!(whole, p);
        let mut buf = Vec::new();
        let mut later = Vec::new();
        fragment_v4(&p, 1500, 1, &mut buf, |f| later.push(f.to_vec()));
        assert_eq!(later[1][0] & 0x0f, 6);
        assert_eq!(&later[1][20..24], &opts[..4]);
        // An identification of 0 gets one.
        let mut z = v4(50, false, &[], 2000);
        z[4..6].fill(0);
        let mut frags = Vec::new();
        fragment_v4(&z, 1000, 7, &mut buf, |f| frags.push(f.to_vec()));
        assert!(frags.iter().all(|f| f[4..6] == [0, 7]));
        // IPv6, with a hop-by-hop header that stays in front.
        let hbh = [50, 0, 1, 4, 0, 0, 0, 0];
        let p = v6(0, &hbh, 4000);
        let (whole, n) = round_trip(&p, 1280, true);
        assert_eq!(n, 4);
        assert_eq!(whole, p);
        let p = v6(50, &[], 1500);
        assert_eq!(round_trip(&p, 1280, true).0, p);
        // No room, not whole, or a fragment already: refused.
        assert!(!fragment_v4(&p, 1500, 1, &mut buf, |_| {}));
        assert!(!fragment_v4(
            &v4(50, false, &[], 100),
            24,
            1,
            &mut buf,
            |_| {}
        ));
        assert!(!fragment_v6(&p[..100], 1280, 1, &mut buf, |_| {}));
        assert!(!fragment_v6(
            &v6(44, &[50, 0, 0, 1, 0, 0, 0, 1], 64),
            1280,
            1,
            &mut buf,
            |_| {}
        ));
        assert!(!fragment_v6(&p, 40, 1, &mut buf, |_| {}));
    }

    #[test]
    fn the_tuns_own_link_stays_on_it() {
        let mut p = v6(58, &[], 8);
        assert!(!link_local(&p));
        for (at, addr) in [
            (8, "fe80::1"),
            (24, "fe80::2"),
            (8, "::"),
            (24, "ff02::16"),
            (24, "ff01::1"),
        ] {
            let mut q = p.clone();
            q[at..at + 16].copy_from_slice(&addr.parse::<Ipv6Addr>().unwrap().octets());
            assert!(link_local(&q), "{addr}");
        }
        p[24..40].copy_from_slice(&"ff05::1".parse::<Ipv6Addr>().unwrap().octets());
        assert!(!link_local(&p));
        let p = v4(17, false, &[], 8);
        assert!(!link_local(&p));
        for (at, addr) in [(12, [0, 0, 0, 0]), (16, [224, 0, 0, 251]), (16, [255; 4])] {
            let mut q = p.clone();
            q[at..at + 4].copy_from_slice(&addr);
            assert!(link_local(&q), "{addr:?}");
        }
        assert!(!link_local(&[]) && !link_local(&[0x45]));
    }

    #[test]
    fn esp_in_udp_gets_its_headers_back() {
        let mut buf = vec![0u8; UDP_HEAD + 100];
        let src: SocketAddr = "10.0.0.1:4500".parse().unwrap();
        let start = udp_headers(&mut buf, 100, src, "10.0.0.2".parse().unwrap(), 4500).unwrap();
        let ip = Ipv4Packet::new_checked(&buf[start..]).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!(
            (usize::from(ip.total_len()), ip.payload().len()),
            (128, 108)
        );
        assert_eq!(&ip.payload()[..6], &[0x11, 0x94, 0x11, 0x94, 0, 108]);
        let src: SocketAddr = "[fd00::1]:1234".parse().unwrap();
        let start = udp_headers(&mut buf, 100, src, "fd00::2".parse().unwrap(), 4500).unwrap();
        assert_eq!(start, 0);
        assert_eq!((buf[6], &buf[4..6]), (17, &[0u8, 108][..]));
        assert_eq!(
            udp_headers(&mut buf, 100, src, "10.0.0.2".parse().unwrap(), 1),
            None
        );
    }
}
