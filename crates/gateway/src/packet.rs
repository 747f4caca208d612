//! The gateway's packet work that needs no socket: which TUN packets stay
//! on the TUN's link, ICMP "too big" for a sender, fragmenting an outer
//! packet, and the IP and UDP headers put back in front of ESP in UDP.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use wire::{checksum, IpProtocol};

/// Room in front of a received ESP-in-UDP payload for the IP and UDP
/// headers the engine expects.
pub(super) const UDP_HEAD: usize = 48;

/// Bytes of an IPv4 packet an ICMP error quotes at most (RFC 1812 §4.3.2.3:
/// the error within 576 bytes).
const ICMP4_QUOTE: usize = 576 - 28;

/// Bytes of an IPv6 packet an ICMPv6 error quotes at most (RFC 4443 §2.4:
/// the error within the minimum MTU).
const ICMP6_QUOTE: usize = 1280 - 48;

/// The IPv6 minimum link MTU (RFC 8200 §5).
pub(super) const IPV6_MIN_MTU: u32 = 1280;

pub(super) fn version(p: &[u8]) -> u8 {
    p.first().map_or(0, |b| b >> 4)
}

/// The protocol after the IP header (IPv6: the first next header).
pub(super) fn ip_protocol(p: &[u8]) -> Option<u8> {
    match version(p) {
        4 => p.get(9).copied(),
        6 => p.get(6).copied(),
        _ => None,
    }
}

pub(super) fn src_addr(p: &[u8]) -> Option<IpAddr> {
    match version(p) {
        4 => <[u8; 4]>::try_from(p.get(12..16)?).ok().map(IpAddr::from),
        6 => <[u8; 16]>::try_from(p.get(8..24)?).ok().map(IpAddr::from),
        _ => None,
    }
}

pub(super) fn dst_addr(p: &[u8]) -> Option<IpAddr> {
    match version(p) {
        4 => <[u8; 4]>::try_from(p.get(16..20)?).ok().map(IpAddr::from),
        6 => <[u8; 16]>::try_from(p.get(24..40)?).ok().map(IpAddr::from),
        _ => None,
    }
}

pub(super) fn dont_fragment(p: &[u8]) -> bool {
    p.get(6).is_some_and(|b| b & 0x40 != 0)
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
    match version(p) {
        4 => {
            let hl = usize::from(p[0] & 0x0f) * 4;
            p.get(9) == Some(&1) && p.get(hl).is_some_and(|t| matches!(t, 3 | 4 | 5 | 11 | 12))
        }
        6 => p.get(6) == Some(&58) && p.get(40).is_some_and(|t| *t < 128),
        _ => false,
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
    let total = (20 + 8 + quote.len()) as u16;
    out.clear();
    out.extend_from_slice(&[0x45, 0xc0]);
    out.extend_from_slice(&total.to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0, 64, 1, 0, 0]);
    out.extend_from_slice(&dst.octets());
    out.extend_from_slice(&src.octets());
    let c = checksum::checksum(&out[..20]);
    out[10..12].copy_from_slice(&c.to_be_bytes());
    out.extend_from_slice(&[3, 4, 0, 0, 0, 0]);
    out.extend_from_slice(&(mtu.min(65_535) as u16).to_be_bytes());
    out.extend_from_slice(quote);
    let c = checksum::checksum(&out[20..]);
    out[22..24].copy_from_slice(&c.to_be_bytes());
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
    let len = (8 + quote.len()) as u16;
    out.clear();
    out.extend_from_slice(&[0x60, 0, 0, 0]);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&[58, 64]);
    out.extend_from_slice(&d.octets());
    out.extend_from_slice(&s.octets());
    out.extend_from_slice(&[2, 0, 0, 0]);
    out.extend_from_slice(&mtu.to_be_bytes());
    out.extend_from_slice(quote);
    // From the inner destination to the inner source.
    let sum = checksum::pseudo_header(&dst, &src, IpProtocol::Icmpv6, u32::from(len))
        + checksum::sum(&out[40..]);
    out[42..44].copy_from_slice(&(!checksum::fold(sum)).to_be_bytes());
    Some(true)
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
    let hl = usize::from(p.first().map_or(0, |b| b & 0x0f)) * 4;
    if hl < 20 || p.len() < hl || usize::from(u16::from_be_bytes([p[2], p[3]])) != p.len() {
        return false;
    }
    // Later fragments' header: the fixed part and the copied options.
    let mut later = [0u8; 60];
    later[..20].copy_from_slice(&p[..20]);
    let mut later_len = 20;
    let mut i = 20;
    while i < hl {
        match p[i] {
            0 => break,
            1 => i += 1,
            t => {
                let l = usize::from(*p.get(i + 1).unwrap_or(&0));
                if l < 2 || i + l > hl {
                    return false;
                }
                if t & 0x80 != 0 {
                    later[later_len..later_len + l].copy_from_slice(&p[i..i + l]);
                    later_len += l;
                }
                i += l;
            }
        }
    }
    let later_len = later_len.div_ceil(4) * 4;
    later[0] = 0x40 | (later_len / 4) as u8;
    let flags = u16::from_be_bytes([p[6], p[7]]);
    let (base_off, base_mf) = (usize::from(flags & 0x1fff) * 8, flags & 0x2000 != 0);
    let id = match u16::from_be_bytes([p[4], p[5]]) {
        0 => id.max(1),
        n => n,
    };
    if mtu < later_len.max(hl) + 8 {
        return false;
    }
    let mut at = hl;
    while at < p.len() {
        let h: &[u8] = if at == hl {
            &p[..hl]
        } else {
            &later[..later_len]
        };
        let room = (mtu - h.len()) & !7;
        let len = room.min(p.len() - at);
        let last = at + len == p.len();
        let off = base_off + (at - hl);
        if off > 0x1fff * 8 {
            return false;
        }
        buf.clear();
        buf.extend_from_slice(h);
        buf.extend_from_slice(&p[at..at + len]);
        let total = buf.len() as u16;
        buf[2..4].copy_from_slice(&total.to_be_bytes());
        buf[4..6].copy_from_slice(&id.to_be_bytes());
        let mf = if last && !base_mf { 0 } else { 0x2000 };
        buf[6..8].copy_from_slice(&(mf | (off / 8) as u16).to_be_bytes());
        buf[10..12].fill(0);
        let c = checksum::checksum(&buf[..h.len()]);
        buf[10..12].copy_from_slice(&c.to_be_bytes());
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
    if p.len() < 40 || usize::from(u16::from_be_bytes([p[4], p[5]])) + 40 != p.len() {
        return false;
    }
    let (mut next, mut next_at, mut at) = (p[6], 6, 40);
    loop {
        let routing_follows = next == 60 && p.get(at) == Some(&43);
        if !(next == 0 || next == 43 || routing_follows) {
            break;
        }
        let Some(&l) = p.get(at + 1) else {
            return false;
        };
        let l = (usize::from(l) + 1) * 8;
        if at + l > p.len() {
            return false;
        }
        next = p[at];
        next_at = at;
        at += l;
    }
    if next == 44 || mtu < at + 8 + 8 {
        return false;
    }
    let room = (mtu - at - 8) & !7;
    let mut off = at;
    while off < p.len() {
        let len = room.min(p.len() - off);
        let last = off + len == p.len();
        let fo = off - at;
        if fo > 0x1fff * 8 {
            return false;
        }
        buf.clear();
        buf.extend_from_slice(&p[..at]);
        buf[next_at] = 44;
        buf.extend_from_slice(&[next, 0]);
        buf.extend_from_slice(&((fo as u16) | u16::from(!last)).to_be_bytes());
        buf.extend_from_slice(&id.to_be_bytes());
        buf.extend_from_slice(&p[off..off + len]);
        let pl = (buf.len() - 40) as u16;
        buf[4..6].copy_from_slice(&pl.to_be_bytes());
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
    let ulen = u16::try_from(8 + len).ok()?;
    let udp = UDP_HEAD - 8;
    buf[udp..udp + 2].copy_from_slice(&src.port().to_be_bytes());
    buf[udp + 2..udp + 4].copy_from_slice(&dport.to_be_bytes());
    buf[udp + 4..udp + 6].copy_from_slice(&ulen.to_be_bytes());
    buf[udp + 6..udp + 8].fill(0);
    match (src.ip(), dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let start = udp - 20;
            let total = u16::try_from(20 + 8 + len).ok()?;
            let h = &mut buf[start..udp];
            h[..12].copy_from_slice(&[0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0]);
            h[2..4].copy_from_slice(&total.to_be_bytes());
            h[12..16].copy_from_slice(&s.octets());
            h[16..20].copy_from_slice(&d.octets());
            let c = checksum::checksum(h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            Some(start)
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let start = udp - 40;
            let h = &mut buf[start..udp];
            h[..8].copy_from_slice(&[0x60, 0, 0, 0, 0, 0, 17, 64]);
            h[4..6].copy_from_slice(&ulen.to_be_bytes());
            h[8..24].copy_from_slice(&s.octets());
            h[24..40].copy_from_slice(&d.octets());
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
