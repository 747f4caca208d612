//! Rewriting one captured frame for publication: every address replaced
//! where it hides (link, network, the headers quoted in ICMP errors, ARP,
//! neighbour discovery, IPv4 options, IPv6 routing and home-address
//! options, tunnels' inner headers), the payload cut, zeroed or kept, and
//! the checksums brought along.
//!
//! The walk stops at the first header it cannot read whole (a truncated
//! capture, a malformed packet, a protocol it does not know): what follows
//! is payload to it, handled by the payload policy, so that under the
//! default policy no byte it has not understood is published. Checksums
//! are updated incrementally (RFC 1624) for each rewritten 16-bit word, so
//! that a checksum that was right stays right even when the capture does
//! not hold the whole datagram; IPv4 header checksums are computed again.

use wire::LinkType;

use crate::cryptopan::CryptoPan;
use crate::policy::{MacPolicy, PayloadPolicy};

/// What the rewrite did to a frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rewrite {
    /// Bytes kept of the captured ones (the record's new captured length;
    /// its length on the wire is unchanged).
    pub kept: usize,
    /// The walk stopped at a header it could not read whole: the bytes from
    /// there on were treated as payload.
    pub stopped_early: bool,
}

/// Counters over a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AnonCounts {
    pub packets: u64,
    pub ipv4_addresses: u64,
    pub ipv6_addresses: u64,
    pub mac_addresses: u64,
    /// Frames whose walk stopped at a header it could not read whole.
    pub stopped_early: u64,
    /// Payload bytes cut or zeroed.
    pub payload_bytes_removed: u64,
}

/// Anonymises frames with one key and one policy.
pub struct Anonymizer {
    pan: CryptoPan,
    mac: MacPolicy,
    mac_key: aes::Aes128,
    payload: PayloadPolicy,
    pub counts: AnonCounts,
}

/// The label the MAC hash's key is derived with.
const MAC_KEY_LABEL: &[u8; 16] = b"kansoku mac hash";

const ETH_IPV4: u16 = 0x0800;
const ETH_IPV6: u16 = 0x86dd;
const ETH_ARP: u16 = 0x0806;
const ETH_VLAN: [u16; 3] = [0x8100, 0x88a8, 0x9100];

const IP_ICMP: u8 = 1;
const IP_IPIP: u8 = 4;
const IP_TCP: u8 = 6;
const IP_UDP: u8 = 17;
const IP_IPV6: u8 = 41;
const IP_GRE: u8 = 47;
const IP_ESP: u8 = 50;
const IP_AH: u8 = 51;
const IP_ICMPV6: u8 = 58;
const IP_SCTP: u8 = 132;

/// How deep tunnels and quoted headers nest before the rest is payload.
const MAX_DEPTH: u8 = 4;

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// RFC 1624 eqn. 3, `HC' = ~(~HC + ~m + m')`: the checksum `hc` after the
/// 16-bit words of `old` became those of `new` (equal lengths, even offsets
/// in the summed data). The complements of `old`'s words add up to one
/// 0xffff a word less their sum.
fn update(hc: u16, old: &[u8], new: &[u8]) -> u16 {
    use wire::checksum::{fold, sum};
    let words = old.len().div_ceil(2) as u64;
    !fold(u64::from(!hc) + 0xffff * words - sum(old) + sum(new))
}

/// A checksum field at `at` in `buf`, if captured, updated for `old` → `new`.
/// `udp`: a zero field means "no checksum" and stays zero, and a computed
/// zero is sent as all ones (RFC 768).
fn patch_checksum(buf: &mut [u8], at: usize, old: &[u8], new: &[u8], udp: bool) {
    if at + 2 > buf.len() || old == new {
        return;
    }
    let hc = be16(buf, at);
    if udp && hc == 0 {
        return;
    }
    let mut v = update(hc, old, new);
    if udp && v == 0 {
        v = 0xffff;
    }
    buf[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// Where a transport checksum sits, for a protocol whose checksum covers
/// the IP pseudo-header: (offset in its header, UDP's zero rule).
fn pseudo_checksum_at(protocol: u8) -> Option<(usize, bool)> {
    match protocol {
        IP_TCP => Some((16, false)),
        IP_UDP => Some((6, true)),
        IP_ICMPV6 => Some((2, false)),
        _ => None,
    }
}

/// The rewrites of the addresses a transport checksum's pseudo-header
/// holds: the old bytes and the new, in pseudo-header order (source, then
/// destination; 8 bytes for IPv4, 32 for IPv6).
struct Pseudo {
    old: [u8; 32],
    new: [u8; 32],
    len: usize,
}

impl Pseudo {
    /// The pseudo-header addresses `src` and `dst` (old, new) of one length.
    fn new(src: (&[u8], &[u8]), dst: (&[u8], &[u8])) -> Pseudo {
        let n = src.0.len();
        let mut p = Pseudo {
            old: [0; 32],
            new: [0; 32],
            len: 2 * n,
        };
        p.old[..n].copy_from_slice(src.0);
        p.old[n..2 * n].copy_from_slice(dst.0);
        p.new[..n].copy_from_slice(src.1);
        p.new[n..2 * n].copy_from_slice(dst.1);
        p
    }
}

impl Anonymizer {
    pub fn new(pan: CryptoPan, mac: MacPolicy, payload: PayloadPolicy) -> Anonymizer {
        use aes::cipher::KeyInit;
        let key = pan.derived_key(MAC_KEY_LABEL);
        Anonymizer {
            pan,
            mac,
            mac_key: aes::Aes128::new(aes::cipher::generic_array::GenericArray::from_slice(&key)),
            payload,
            counts: AnonCounts::default(),
        }
    }

    /// The Crypto-PAn key's cache figures: (hits, misses).
    pub fn cache(&self) -> (u64, u64) {
        (self.pan.hits, self.pan.misses)
    }

    /// Anonymises the IPv4 address at `buf[at..at + 4]`.
    fn ipv4_at(&mut self, buf: &mut [u8], at: usize) {
        let a = u32::from_be_bytes(buf[at..at + 4].try_into().expect("4 bytes"));
        buf[at..at + 4].copy_from_slice(&self.pan.ipv4(a).to_be_bytes());
        self.counts.ipv4_addresses += 1;
    }

    /// Anonymises the IPv6 address at `buf[at..at + 16]`.
    fn ipv6_at(&mut self, buf: &mut [u8], at: usize) {
        let a = u128::from_be_bytes(buf[at..at + 16].try_into().expect("16 bytes"));
        buf[at..at + 16].copy_from_slice(&self.pan.ipv6(a).to_be_bytes());
        self.counts.ipv6_addresses += 1;
    }

    /// Applies the MAC policy to the 6 bytes at `at` (a link-layer address
    /// of another length is zeroed).
    fn mac_at(&mut self, buf: &mut [u8], at: usize, len: usize) {
        self.counts.mac_addresses += 1;
        let field = &mut buf[at..at + len];
        if len != 6 || self.mac == MacPolicy::Zero {
            field.fill(0);
            return;
        }
        // Broadcast names no station.
        if field.iter().all(|&b| b == 0xff) {
            return;
        }
        use aes::cipher::BlockEncrypt;
        let mut block = aes::cipher::generic_array::GenericArray::default();
        block[..6].copy_from_slice(field);
        self.mac_key.encrypt_block(&mut block);
        // The original's group (multicast) bit, and the locally
        // administered bit set: the image names no vendor.
        let group = field[0] & 0x01;
        field.copy_from_slice(&block[..6]);
        field[0] = (field[0] & 0xfc) | 0x02 | group;
    }

    /// Rewrites the captured frame `buf` of link type `link` in place; the
    /// caller keeps `buf[..kept]`.
    pub fn frame(&mut self, link: LinkType, buf: &mut [u8]) -> Rewrite {
        self.counts.packets += 1;
        let mut w = Walk { stopped: false };
        let end = match link {
            LinkType::Ethernet => self.ethernet(buf, 0, &mut w),
            LinkType::LinuxSll if buf.len() >= 16 => {
                let n = usize::from(be16(buf, 4)).min(8);
                self.mac_at(buf, 6, n);
                self.ethertype(buf, 16, be16(buf, 14), 0, &mut w)
            }
            LinkType::LinuxSll2 if buf.len() >= 20 => {
                let n = usize::from(buf[11]).min(8);
                self.mac_at(buf, 12, n);
                self.ethertype(buf, 20, be16(buf, 0), 0, &mut w)
            }
            LinkType::Null if buf.len() >= 4 => {
                // The address family in the capturing host's byte order.
                let family = u32::from_le_bytes(buf[..4].try_into().expect("4 bytes"));
                let family = if family > 0xffff {
                    family.swap_bytes()
                } else {
                    family
                };
                match family {
                    2 => self.ipv4(buf, 4, 0, &mut w),
                    24 | 28 | 30 => self.ipv6(buf, 4, 0, &mut w),
                    _ => w.stop(4),
                }
            }
            LinkType::Raw | LinkType::Ipv4 | LinkType::Ipv6 => self.ip(buf, 0, 0, &mut w),
            _ => w.stop(0),
        };
        self.finish(buf, end, w.stopped)
    }

    /// Applies the payload policy to `buf[end..]`.
    fn finish(&mut self, buf: &mut [u8], end: usize, stopped: bool) -> Rewrite {
        let end = end.min(buf.len());
        let rest = buf.len() - end;
        if stopped {
            self.counts.stopped_early += 1;
        }
        let kept = match self.payload {
            PayloadPolicy::Keep => buf.len(),
            PayloadPolicy::Zero => {
                buf[end..].fill(0);
                self.counts.payload_bytes_removed += rest as u64;
                buf.len()
            }
            PayloadPolicy::Strip => {
                self.counts.payload_bytes_removed += rest as u64;
                end
            }
        };
        Rewrite {
            kept,
            stopped_early: stopped,
        }
    }

    fn ethernet(&mut self, buf: &mut [u8], at: usize, w: &mut Walk) -> usize {
        if buf.len() < at + 14 {
            // A MAC address cut short is still zeroed; the rest goes.
            let n = buf.len().saturating_sub(at).min(12);
            buf[at..at + n].fill(0);
            return w.stop(at);
        }
        self.mac_at(buf, at, 6);
        self.mac_at(buf, at + 6, 6);
        let mut t = at + 12;
        let mut ethertype = be16(buf, t);
        while ETH_VLAN.contains(&ethertype) {
            if buf.len() < t + 6 {
                return w.stop(t + 2);
            }
            t += 4;
            ethertype = be16(buf, t);
        }
        self.ethertype(buf, t + 2, ethertype, 0, w)
    }

    fn ethertype(
        &mut self,
        buf: &mut [u8],
        at: usize,
        ethertype: u16,
        depth: u8,
        w: &mut Walk,
    ) -> usize {
        match ethertype {
            ETH_IPV4 => self.ipv4(buf, at, depth, w),
            ETH_IPV6 => self.ipv6(buf, at, depth, w),
            ETH_ARP => self.arp(buf, at, w),
            _ => w.stop(at),
        }
    }

    fn ip(&mut self, buf: &mut [u8], at: usize, depth: u8, w: &mut Walk) -> usize {
        match buf.get(at).map(|b| b >> 4) {
            Some(4) => self.ipv4(buf, at, depth, w),
            Some(6) => self.ipv6(buf, at, depth, w),
            _ => w.stop(at),
        }
    }

    fn arp(&mut self, buf: &mut [u8], at: usize, w: &mut Walk) -> usize {
        if buf.len() < at + 8 {
            return w.stop(at);
        }
        let (hlen, plen) = (usize::from(buf[at + 4]), usize::from(buf[at + 5]));
        let end = at + 8 + 2 * (hlen + plen);
        if buf.len() < end || !(plen == 4 || plen == 16) {
            return w.stop(at);
        }
        let ptype = be16(buf, at + 2);
        let mut p = at + 8;
        for _ in 0..2 {
            self.mac_at(buf, p, hlen);
            p += hlen;
            match (ptype, plen) {
                (ETH_IPV4, 4) => self.ipv4_at(buf, p),
                (ETH_IPV6, 16) => self.ipv6_at(buf, p),
                _ => buf[p..p + plen].fill(0),
            }
            p += plen;
        }
        end
    }

    fn ipv4(&mut self, buf: &mut [u8], at: usize, depth: u8, w: &mut Walk) -> usize {
        if buf.len() < at + 20 || buf[at] >> 4 != 4 {
            return w.stop(at);
        }
        let ihl = usize::from(buf[at] & 0x0f) * 4;
        if ihl < 20 || buf.len() < at + ihl {
            // The addresses are there; the options are not whole.
            return w.stop(at);
        }
        let old: [u8; 8] = buf[at + 12..at + 20].try_into().expect("8 bytes");
        self.ipv4_at(buf, at + 12);
        self.ipv4_at(buf, at + 16);
        self.ipv4_options(buf, at + 20, at + ihl);
        // The header checksum, computed again.
        buf[at + 10..at + 12].fill(0);
        let c = wire::checksum::checksum(&buf[at..at + ihl]);
        buf[at + 10..at + 12].copy_from_slice(&c.to_be_bytes());
        let pseudo = Pseudo::new(
            (&old[..4], &buf[at + 12..at + 16]),
            (&old[4..], &buf[at + 16..at + 20]),
        );
        let frag = be16(buf, at + 6);
        let protocol = buf[at + 9];
        let total = usize::from(be16(buf, at + 2));
        let t = at + ihl;
        // A datagram's end, where the capture holds it (Ethernet pads short
        // frames: the padding is not the datagram's).
        let limit = if total >= ihl {
            (at + total).min(buf.len())
        } else {
            buf.len()
        };
        if frag & 0x1fff != 0 {
            // A later fragment: no transport header, all payload.
            return t;
        }
        self.transport(buf, t, limit, protocol, &pseudo, depth, w)
    }

    /// IPv4 options that carry addresses: record route, loose and strict
    /// source routes, and time stamps with addresses.
    fn ipv4_options(&mut self, buf: &mut [u8], mut p: usize, end: usize) {
        while p < end {
            let kind = buf[p];
            match kind {
                0 => break,
                1 => {
                    p += 1;
                    continue;
                }
                _ => {}
            }
            if p + 1 >= end {
                break;
            }
            let len = usize::from(buf[p + 1]);
            if len < 2 || p + len > end {
                // A malformed option list: its bytes are zeroed rather than
                // trusted (the header checksum is computed after).
                buf[p..end].fill(0);
                break;
            }
            match kind {
                7 | 131 | 137 => {
                    let mut a = p + 3;
                    while a + 4 <= p + len {
                        self.ipv4_at(buf, a);
                        a += 4;
                    }
                }
                68 if len >= 4 => {
                    let flags = buf[p + 3] & 0x0f;
                    if flags == 1 || flags == 3 {
                        let mut a = p + 4;
                        while a + 8 <= p + len {
                            self.ipv4_at(buf, a);
                            a += 8;
                        }
                    }
                }
                _ => {}
            }
            p += len;
        }
    }

    fn ipv6(&mut self, buf: &mut [u8], at: usize, depth: u8, w: &mut Walk) -> usize {
        if buf.len() < at + 40 || buf[at] >> 4 != 6 {
            return w.stop(at);
        }
        let address =
            |b: &[u8], a: usize| -> [u8; 16] { b[a..a + 16].try_into().expect("16 bytes") };
        let old_src = address(buf, at + 8);
        let mut old_dst = address(buf, at + 24);
        self.ipv6_at(buf, at + 8);
        self.ipv6_at(buf, at + 24);
        let mut new_dst = address(buf, at + 24);
        let payload_len = usize::from(be16(buf, at + 4));
        let limit = if payload_len > 0 {
            (at + 40 + payload_len).min(buf.len())
        } else {
            buf.len()
        };
        let mut next = buf[at + 6];
        let mut p = at + 40;
        loop {
            match next {
                0 | 43 | 60 => {
                    if buf.len() < p + 8 {
                        return w.stop(p);
                    }
                    let len = (usize::from(buf[p + 1]) + 1) * 8;
                    if buf.len() < p + len {
                        return w.stop(p);
                    }
                    if next == 43 {
                        if let Some((old, new)) = self.routing(buf, p, len) {
                            // The pseudo-header's destination is the
                            // route's last.
                            (old_dst, new_dst) = (old, new);
                        }
                    } else {
                        self.ipv6_options(buf, p + 2, p + len);
                    }
                    next = buf[p];
                    p += len;
                }
                44 => {
                    if buf.len() < p + 8 {
                        return w.stop(p);
                    }
                    let offset = be16(buf, p + 2) & 0xfff8;
                    next = buf[p];
                    p += 8;
                    if offset != 0 {
                        return p;
                    }
                }
                _ => break,
            }
        }
        let pseudo = Pseudo::new((&old_src, &buf[at + 8..at + 24]), (&old_dst, &new_dst));
        self.transport(buf, p, limit, next, &pseudo, depth, w)
    }

    /// A routing header's addresses (types 0 and 2, and the segment routing
    /// header, type 4); returns the final destination's old and new bytes
    /// when segments are left.
    fn routing(&mut self, buf: &mut [u8], p: usize, len: usize) -> Option<([u8; 16], [u8; 16])> {
        let kind = buf[p + 2];
        let left = buf[p + 3];
        let (first, count) = match kind {
            0 | 2 => (p + 8, (len - 8) / 16),
            4 => (p + 8, (len - 8) / 16),
            _ => {
                // Compressed (RPL) and unknown routing types: their bytes
                // may hold addresses in a form this walk does not read.
                buf[p + 4..p + len].fill(0);
                return None;
            }
        };
        let final_at = match kind {
            4 => first,
            _ => first + 16 * count.saturating_sub(1),
        };
        let address =
            |b: &[u8]| -> [u8; 16] { b[final_at..final_at + 16].try_into().expect("16 bytes") };
        let old = (left > 0 && count > 0).then(|| address(buf));
        for i in 0..count {
            self.ipv6_at(buf, first + 16 * i);
        }
        old.map(|o| (o, address(buf)))
    }

    /// Hop-by-hop and destination options: the home address option (201)
    /// carries an address.
    fn ipv6_options(&mut self, buf: &mut [u8], mut p: usize, end: usize) {
        while p < end {
            let kind = buf[p];
            if kind == 0 {
                p += 1;
                continue;
            }
            if p + 2 > end {
                break;
            }
            let len = usize::from(buf[p + 1]);
            if p + 2 + len > end {
                break;
            }
            if kind == 201 && len == 16 {
                self.ipv6_at(buf, p + 2);
            }
            p += 2 + len;
        }
    }

    /// The transport header at `t` (the datagram ends at `limit`): its
    /// pseudo-header checksum brought along, its addresses (ICMP errors,
    /// neighbour discovery) rewritten; returns where its payload starts.
    #[allow(clippy::too_many_arguments)]
    fn transport(
        &mut self,
        buf: &mut [u8],
        t: usize,
        limit: usize,
        protocol: u8,
        pseudo: &Pseudo,
        depth: u8,
        w: &mut Walk,
    ) -> usize {
        if let Some((at, udp)) = pseudo_checksum_at(protocol) {
            let n = pseudo.len;
            patch_checksum(buf, t + at, &pseudo.old[..n], &pseudo.new[..n], udp);
        }
        let have = limit.saturating_sub(t);
        match protocol {
            // A TCP header quoted in an ICMP error is its first 8 bytes
            // (ports and sequence number), all that RFC 792 asks to quote.
            IP_TCP if depth > 0 && (8..20).contains(&have) => t + 8,
            IP_TCP => {
                if have < 20 {
                    return w.stop(t);
                }
                let len = usize::from(buf[t + 12] >> 4) * 4;
                if len < 20 || have < len {
                    return w.stop(t);
                }
                self.tcp_options(buf, t, len);
                t + len
            }
            IP_UDP => {
                if have < 8 {
                    return w.stop(t);
                }
                t + 8
            }
            IP_ICMP => self.icmp(buf, t, limit, depth, w),
            IP_ICMPV6 => self.icmpv6(buf, t, limit, depth, w),
            IP_IPIP | IP_IPV6 if depth < MAX_DEPTH => {
                // A tunnel: the inner packet's headers are headers too.
                if protocol == IP_IPIP {
                    self.ipv4(buf, t, depth + 1, w)
                } else {
                    self.ipv6(buf, t, depth + 1, w)
                }
            }
            IP_GRE if depth < MAX_DEPTH => {
                if have < 4 {
                    return w.stop(t);
                }
                let flags = be16(buf, t);
                // Checksum, key and sequence number fields (RFC 2890); a
                // GRE checksum is not brought along (the inner rewrite
                // would change it): it is rare and left as it was.
                let len =
                    4 + 4 * usize::from((flags >> 15 & 1) + (flags >> 13 & 1) + (flags >> 12 & 1));
                let ethertype = be16(buf, t + 2);
                match ethertype {
                    ETH_IPV4 | ETH_IPV6 if have >= len => {
                        self.ethertype(buf, t + len, ethertype, depth + 1, w)
                    }
                    0x6558 if have >= len => self.ethernet(buf, t + len, w),
                    _ => w.stop(t),
                }
            }
            IP_ESP if have >= 8 => t + 8,
            IP_AH if have >= 12 => {
                let len = (usize::from(buf[t + 1]) + 2) * 4;
                if have < len {
                    return w.stop(t);
                }
                // The next header behind AH, its checksum's pseudo-header
                // the same.
                self.transport(buf, t + len, limit, buf[t], pseudo, depth, w)
            }
            IP_SCTP if have >= 12 => t + 12,
            _ => w.stop(t),
        }
    }

    /// TCP options: Multipath TCP's (kind 30) can carry addresses
    /// (ADD_ADDR); their contents are zeroed, the checksum brought along.
    fn tcp_options(&mut self, buf: &mut [u8], t: usize, len: usize) {
        let mut p = t + 20;
        let end = t + len;
        while p < end {
            match buf[p] {
                0 => break,
                1 => {
                    p += 1;
                    continue;
                }
                _ => {}
            }
            if p + 2 > end {
                break;
            }
            let olen = usize::from(buf[p + 1]);
            if olen < 2 || p + olen > end {
                break;
            }
            if buf[p] == 30 && olen > 2 {
                // Whole 16-bit words from the option's start, so that the
                // update lines up with the checksum's words.
                let (from, to) = ((p - t) & !1, (p + olen - t + 1) & !1);
                let old = buf[t + from..(t + to).min(end)].to_vec();
                buf[p + 2..p + olen].fill(0);
                let new = buf[t + from..(t + to).min(end)].to_vec();
                patch_checksum(buf, t + 16, &old, &new, false);
            }
            p += olen;
        }
    }

    fn icmp(&mut self, buf: &mut [u8], t: usize, limit: usize, depth: u8, w: &mut Walk) -> usize {
        if limit < t + 8 {
            return w.stop(t);
        }
        let kind = buf[t];
        match kind {
            // Destination unreachable, source quench, redirect, time
            // exceeded, parameter problem: the offending datagram's header
            // follows, and its addresses are the ones that matter most.
            3 | 4 | 5 | 11 | 12 if depth < MAX_DEPTH => {
                let old = buf[t..limit].to_vec();
                if kind == 5 {
                    self.ipv4_at(buf, t + 4);
                }
                let mut inner = Walk { stopped: false };
                let end = self.ipv4(buf, t + 8, depth + 1, &mut inner).min(limit);
                // The quoted datagram's payload (beyond its transport
                // header's first bytes) is payload here too.
                self.icmp_checksum(buf, t, &old, limit);
                end.max(t + 8)
            }
            _ => t + 8,
        }
    }

    /// The ICMP (or ICMPv6) checksum of the message at `t` (which ends at
    /// `limit`), updated for the words that differ from `old`.
    fn icmp_checksum(&mut self, buf: &mut [u8], t: usize, old: &[u8], limit: usize) {
        let new = buf[t..limit].to_vec();
        patch_checksum(buf, t + 2, old, &new, false);
    }

    fn icmpv6(&mut self, buf: &mut [u8], t: usize, limit: usize, depth: u8, w: &mut Walk) -> usize {
        if limit < t + 8 {
            return w.stop(t);
        }
        let kind = buf[t];
        // Echo and the messages this walk leaves alone: an 8-byte header,
        // then payload, nothing rewritten (and the message not copied).
        if !matches!(kind, 1..=4 | 130..=137 | 143) {
            return t + 8;
        }
        let old = buf[t..limit].to_vec();
        let end = match kind {
            // Errors: the offending packet follows.
            1..=4 if depth < MAX_DEPTH => {
                let mut inner = Walk { stopped: false };
                self.ipv6(buf, t + 8, depth + 1, &mut inner)
                    .min(limit)
                    .max(t + 8)
            }
            // MLD queries and reports (v1): a multicast address.
            130..=132 if limit >= t + 24 => {
                self.ipv6_at(buf, t + 8);
                t + 24
            }
            // MLDv2 reports: records of a group and its sources.
            143 => self.mldv2(buf, t, limit),
            // Router solicitation and advertisement: options.
            133 => self.nd_options(buf, t + 8, limit),
            134 if limit >= t + 16 => self.nd_options(buf, t + 16, limit),
            // Neighbour solicitation and advertisement: a target, options.
            135 | 136 if limit >= t + 24 => {
                self.ipv6_at(buf, t + 8);
                self.nd_options(buf, t + 24, limit)
            }
            // Redirect: a target and a destination, options.
            137 if limit >= t + 40 => {
                self.ipv6_at(buf, t + 8);
                self.ipv6_at(buf, t + 24);
                self.nd_options(buf, t + 40, limit)
            }
            _ => t + 8,
        };
        self.icmp_checksum(buf, t, &old, limit);
        end
    }

    fn mldv2(&mut self, buf: &mut [u8], t: usize, limit: usize) -> usize {
        let records = usize::from(be16(buf, t + 6));
        let mut p = t + 8;
        for _ in 0..records {
            if limit < p + 20 {
                break;
            }
            let aux = usize::from(buf[p + 1]) * 4;
            let sources = usize::from(be16(buf, p + 2));
            let end = p + 20 + 16 * sources + aux;
            if limit < end {
                break;
            }
            self.ipv6_at(buf, p + 4);
            for s in 0..sources {
                self.ipv6_at(buf, p + 20 + 16 * s);
            }
            buf[p + 20 + 16 * sources..end].fill(0);
            p = end;
        }
        p
    }

    /// Neighbour discovery options from `p` to `limit`: link-layer
    /// addresses by the MAC policy, prefixes and DNS servers by Crypto-PAn,
    /// a redirected packet's header as a quoted one; the contents of
    /// options it does not know are zeroed.
    fn nd_options(&mut self, buf: &mut [u8], mut p: usize, limit: usize) -> usize {
        while p + 8 <= limit {
            let kind = buf[p];
            let len = usize::from(buf[p + 1]) * 8;
            if len == 0 || p + len > limit {
                break;
            }
            match kind {
                1 | 2 => self.mac_at(buf, p + 2, (len - 2).min(6)),
                3 if len >= 32 => self.ipv6_at(buf, p + 16),
                4 => {
                    let mut inner = Walk { stopped: false };
                    let end = self
                        .ipv6(buf, p + 8, MAX_DEPTH - 1, &mut inner)
                        .min(p + len);
                    buf[end..p + len].fill(0);
                }
                5 => {} // MTU
                25 => {
                    let mut a = p + 8;
                    while a + 16 <= p + len {
                        self.ipv6_at(buf, a);
                        a += 16;
                    }
                }
                _ => buf[p + 2..p + len].fill(0),
            }
            p += len;
        }
        p
    }
}

/// Where a walk stopped early.
struct Walk {
    stopped: bool,
}

impl Walk {
    /// The walk cannot read the header at `at`: everything from there on is
    /// payload.
    fn stop(&mut self, at: usize) -> usize {
        self.stopped = true;
        at
    }
}
