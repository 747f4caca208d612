//! The IP headers ESP and AH are inserted behind: where a packet's
//! upper-layer payload starts, and the header fields an encapsulation
//! rewrites (protocol, lengths, the IPv4 checksum).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// IPv6 extension headers that come before ESP/AH in transport mode
/// (hop-by-hop, routing, destination options) and the fragment header.
pub(crate) const HOP_BY_HOP: u8 = 0;
pub(crate) const ROUTING: u8 = 43;
pub(crate) const FRAGMENT: u8 = 44;
pub(crate) const DEST_OPTS: u8 = 60;
pub(crate) const IPV4_IN_IP: u8 = 4;
pub(crate) const IPV6_IN_IP: u8 = 41;
pub(crate) const ESP: u8 = 50;
pub(crate) const AH: u8 = 51;
pub(crate) const UDP: u8 = 17;
pub(crate) const NO_NEXT: u8 = 59;

/// Whether `nh` is one of the IPv6 extension headers [`Layout::parse`]
/// walks past.
pub(crate) fn is_extension(nh: u8) -> bool {
    matches!(nh, HOP_BY_HOP | ROUTING | DEST_OPTS | FRAGMENT)
}

/// Why an IP packet cannot be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Malformed {
    /// Shorter than its header, or than its length field says.
    Truncated,
    /// Not IPv4 or IPv6, or a header length that cannot be.
    BadHeader,
}

/// Where things are in one IP packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub v6: bool,
    /// Bytes of IP header, IPv6 extension headers that precede ESP/AH
    /// included: where ESP or AH goes (transport mode) or is (inbound).
    pub header_len: usize,
    /// The packet's length by its own length field (trailing link padding
    /// excluded).
    pub total_len: usize,
    /// The protocol of what follows `header_len`.
    pub protocol: u8,
    /// Offset of the byte that holds `protocol` (IPv4 header's protocol
    /// field, or the last extension header's next-header field).
    pub protocol_at: usize,
    /// A fragment (IPv4 MF or offset; an IPv6 fragment header).
    pub fragment: bool,
}

impl Layout {
    /// Reads the headers of `p`, whose first byte is the IP version.
    #[inline(always)]
    pub(crate) fn parse(p: &[u8]) -> Result<Layout, Malformed> {
        match p.first().map(|b| b >> 4) {
            Some(4) => {
                if p.len() < 20 {
                    return Err(Malformed::Truncated);
                }
                let ihl = usize::from(p[0] & 0x0f) * 4;
                let total = usize::from(u16::from_be_bytes([p[2], p[3]]));
                if ihl < 20 || total < ihl {
                    return Err(Malformed::BadHeader);
                }
                if p.len() < total {
                    return Err(Malformed::Truncated);
                }
                let frag = u16::from_be_bytes([p[6], p[7]]);
                Ok(Layout {
                    v6: false,
                    header_len: ihl,
                    total_len: total,
                    protocol: p[9],
                    protocol_at: 9,
                    fragment: frag & 0x3fff != 0,
                })
            }
            Some(6) => {
                if p.len() < 40 {
                    return Err(Malformed::Truncated);
                }
                let total = 40 + usize::from(u16::from_be_bytes([p[4], p[5]]));
                if p.len() < total {
                    return Err(Malformed::Truncated);
                }
                let mut next = p[6];
                let mut at = 6;
                let mut off = 40;
                let mut fragment = false;
                // Hop-by-hop, routing and destination options come before
                // ESP/AH; a fragment header is remembered and walked past.
                while is_extension(next) {
                    if off + 8 > total {
                        return Err(Malformed::Truncated);
                    }
                    let len = if next == FRAGMENT {
                        fragment = true;
                        8
                    } else {
                        (usize::from(p[off + 1]) + 1) * 8
                    };
                    if off + len > total {
                        return Err(Malformed::Truncated);
                    }
                    at = off;
                    next = p[off];
                    off += len;
                }
                Ok(Layout {
                    v6: true,
                    header_len: off,
                    total_len: total,
                    protocol: next,
                    protocol_at: at,
                    fragment,
                })
            }
            Some(_) => Err(Malformed::BadHeader),
            None => Err(Malformed::Truncated),
        }
    }

    /// The source address of `p`, the packet this layout was read from
    /// (or that packet with its IP header moved: the addresses stay where
    /// they are in the header).
    ///
    /// Read from the packet when asked, not kept here: kept as an integer
    /// or an `IpAddr`, LLVM stored an address into the layout in pieces (a
    /// `u128` holding an IPv4 address as 1, 8, 4, 2 and 1 bytes) that the
    /// caller's wider read right after could not be forwarded from, a
    /// stall of ~6 ns per packet; a load from the packet is a plain load.
    #[inline(always)]
    pub(crate) fn src(&self, p: &[u8]) -> IpAddr {
        self.addr(p, if self.v6 { 8 } else { 12 })
    }

    /// The destination address of `p`, as [`Layout::src`].
    #[inline(always)]
    pub(crate) fn dst(&self, p: &[u8]) -> IpAddr {
        self.addr(p, if self.v6 { 24 } else { 16 })
    }

    #[inline(always)]
    fn addr(&self, p: &[u8], at: usize) -> IpAddr {
        if self.v6 {
            let mut b = [0u8; 16];
            b.copy_from_slice(&p[at..at + 16]);
            IpAddr::V6(Ipv6Addr::from(b))
        } else {
            IpAddr::V4(Ipv4Addr::new(p[at], p[at + 1], p[at + 2], p[at + 3]))
        }
    }
}

/// The Internet checksum of `data` (RFC 1071), as `wire`'s, with
/// [`header_sum`] and [`fold`].
pub(crate) fn checksum(data: &[u8]) -> u16 {
    !fold(header_sum(data))
}

/// The unfolded one's complement sum of `data` (an IP header: a multiple
/// of four bytes long, though any length is summed right), four bytes at a
/// time. A 32-bit word is worth the sum of its two 16-bit halves modulo
/// 2^16 - 1 (2^16 is 1), so the folded sum is `wire`'s. An IPv4 header
/// without options, the usual one, is five words added outright: this is
/// done three times per packet encapsulated and decapsulated, where
/// `wire`'s general sum (8 bytes a step, 16-bit words) took ~80
/// instructions.
fn header_sum(data: &[u8]) -> u64 {
    let word = |w: &[u8]| u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
    if let Ok(h) = <&[u8; 20]>::try_from(data) {
        return word(&h[..4])
            + word(&h[4..8])
            + word(&h[8..12])
            + word(&h[12..16])
            + word(&h[16..]);
    }
    let mut words = data.chunks_exact(4);
    let acc: u64 = words.by_ref().map(word).sum();
    acc + wire::checksum::sum(words.remainder())
}

/// `wire`'s fold (to 16 bits, end-around carry), in a fixed number of
/// steps rather than a loop whose count depends on the data: each step
/// keeps the value modulo 2^16 - 1 and never makes a nonzero value zero,
/// and after these four it is at most 0xffff, which is the one value
/// `wire`'s loop ends with too.
fn fold(acc: u64) -> u16 {
    let a = (acc & 0xffff_ffff) + (acc >> 32);
    let a = (a & 0xffff) + (a >> 16);
    let a = (a & 0xffff) + (a >> 16);
    let a = (a & 0xffff) + (a >> 16);
    a as u16
}

/// Sets the length field(s) of the IP packet `p` (IPv4 total length and
/// checksum; IPv6 payload length) to its length.
pub(crate) fn fix_lengths(p: &mut [u8], v6: bool, ipv4_header_len: usize) {
    set_protocol_and_lengths(p, v6, ipv4_header_len, None);
}

/// [`fix_lengths`], with the byte at `protocol.0` set to `protocol.1`: the
/// IPv6 next-header field ESP or AH followed, or the IPv4 protocol field
/// (byte 9, [`Layout::protocol_at`]).
///
/// The IPv4 checksum is summed from the header's other bytes and the new
/// values as they are in registers, and the fields are stored after:
/// storing them first and summing the header back from memory right away
/// read each freshly stored field with a wider load, which store-to-load
/// forwarding cannot serve, a stall of tens of cycles per field and per
/// packet.
pub(crate) fn set_protocol_and_lengths(
    p: &mut [u8],
    v6: bool,
    ipv4_header_len: usize,
    protocol: Option<(usize, u8)>,
) {
    let len = p.len();
    if v6 {
        if let Some((at, nh)) = protocol {
            p[at] = nh;
        }
        let pl = (len - 40) as u16;
        p[4..6].copy_from_slice(&pl.to_be_bytes());
        return;
    }
    debug_assert!(protocol.is_none_or(|(at, _)| at == 9));
    let total = len as u16;
    let h = &p[..ipv4_header_len];
    let proto = protocol.map_or(h[9], |(_, nh)| nh);
    // The header's 32-bit words: the first with the total length as it
    // will be, the third with the protocol as it will be and the checksum
    // as zero.
    let first = u32::from_be_bytes([h[0], h[1], 0, 0]) | u32::from(total);
    let third = u32::from_be_bytes([h[8], proto, 0, 0]);
    let word = |i: usize| u64::from(u32::from_be_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]));
    let addresses_and_options = match h.len() {
        20 => word(12) + word(16),
        _ => header_sum(&h[12..]),
    };
    let acc = u64::from(first) + word(4) + u64::from(third) + addresses_and_options;
    let c = !fold(acc);
    p[2..4].copy_from_slice(&total.to_be_bytes());
    p[9] = proto;
    p[10..12].copy_from_slice(&c.to_be_bytes());
}

/// The UDP checksum of a UDP header and payload over IPv6 (or IPv4), with
/// its pseudo-header; 0 is sent as 0xffff (RFC 768).
pub(crate) fn udp_checksum(src: IpAddr, dst: IpAddr, udp: &[u8]) -> u16 {
    use wire::checksum::{fold, pseudo_header, sum};
    let acc = pseudo_header(&src, &dst, wire::IpProtocol::Udp, udp.len() as u32) + sum(udp);
    match !fold(acc) {
        0 => 0xffff,
        c => c,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_checksum_of_a_known_header() {
        // RFC 3602 case 5's outer header carries checksum f9a5.
        let mut h = [
            0x45, 0x00, 0x00, 0x7c, 0x08, 0xf2, 0x00, 0x00, 0x40, 0x32, 0, 0, 0xc0, 0xa8, 0x7b,
            0x03, 0xc0, 0xa8, 0x7b, 0x64,
        ];
        assert_eq!(checksum(&h), 0xf9a5);
        h[10..12].copy_from_slice(&0xf9a5u16.to_be_bytes());
        assert_eq!(checksum(&h), 0);
    }

    /// Setting the fields then summing the header (what fix_lengths did)
    /// and summing first then setting them give the same bytes, options
    /// included.
    #[test]
    fn lengths_protocol_and_checksum_as_a_plain_recomputation_gives_them() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        };
        for ihl in [5usize, 6, 15] {
            for len in [ihl * 4, ihl * 4 + 1, 1400, 65_535] {
                let mut p: Vec<u8> = (0..len).map(|_| next()).collect();
                p[0] = 0x40 | ihl as u8;
                let nh = next();
                for protocol in [None, Some((9, nh))] {
                    let mut want = p.clone();
                    if let Some((at, nh)) = protocol {
                        want[at] = nh;
                    }
                    want[2..4].copy_from_slice(&(len as u16).to_be_bytes());
                    want[10..12].copy_from_slice(&[0, 0]);
                    let c = checksum(&want[..ihl * 4]);
                    want[10..12].copy_from_slice(&c.to_be_bytes());
                    let mut got = p.clone();
                    set_protocol_and_lengths(&mut got, false, ihl * 4, protocol);
                    assert_eq!(got, want, "ihl {ihl} len {len} {protocol:?}");
                    assert_eq!(checksum(&got[..ihl * 4]), 0);
                }
            }
        }
    }

    #[test]
    fn fold_in_four_steps_is_wires() {
        let mut seed = 0x0123_4567_89ab_cdefu64;
        let mut edges = vec![
            0,
            1,
            0xffff,
            0x1_0000,
            0x1_fffe,
            0xffff_ffff,
            0x1_0000_0000,
            u64::MAX,
        ];
        edges.extend((0..100_000).map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed >> (seed % 64)
        }));
        for a in edges {
            assert_eq!(fold(a), wire::checksum::fold(a), "{a:#x}");
        }
    }

    #[test]
    fn checksum_by_words_is_wires() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for len in 0..100 {
            for fill in [None, Some(0u8), Some(0xff)] {
                let data: Vec<u8> = (0..len)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        fill.unwrap_or(seed as u8)
                    })
                    .collect();
                assert_eq!(checksum(&data), wire::checksum::checksum(&data), "{data:?}");
            }
        }
    }

    #[test]
    fn layouts_and_their_refusals() {
        let mut v6 = vec![0u8; 48];
        v6[0] = 0x60;
        v6[4..6].copy_from_slice(&8u16.to_be_bytes());
        v6[6] = DEST_OPTS;
        v6[40] = 17; // next header after the options: UDP
        let l = Layout::parse(&v6).unwrap();
        assert_eq!(
            (l.header_len, l.protocol, l.protocol_at, l.fragment),
            (48, 17, 40, false)
        );
        assert_eq!(Layout::parse(&v6[..47]), Err(Malformed::Truncated));
        v6[0] = 0x70;
        assert_eq!(Layout::parse(&v6), Err(Malformed::BadHeader));
        assert_eq!(Layout::parse(&[]), Err(Malformed::Truncated));
        let mut v4 = vec![0x45u8; 20];
        v4[2..4].copy_from_slice(&19u16.to_be_bytes());
        assert_eq!(Layout::parse(&v4), Err(Malformed::BadHeader));
    }
}
