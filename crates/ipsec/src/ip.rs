//! The IP headers ESP and AH are inserted behind: where a packet's
//! upper-layer payload starts, and the header fields an encapsulation
//! rewrites (protocol, lengths, the IPv4 checksum). Every header is read
//! and written through `wire`'s views and named by its registry.

use std::net::IpAddr;

use wire::ipv4::{self, Ipv4Packet};
use wire::ipv6::{self, Ipv6Packet};
use wire::ipv6ext::{self, Ipv6ExtHeader};
use wire::{ErrorKind, IpProtocol};

/// The protocol numbers the engine compares a packet's bytes against, from
/// `wire`'s registry: [`Layout::protocol`] is kept as the byte it is.
pub(crate) mod proto {
    use wire::IpProtocol;
    pub(crate) const TCP: u8 = IpProtocol::Tcp.number();
    pub(crate) const UDP: u8 = IpProtocol::Udp.number();
    pub(crate) const SCTP: u8 = IpProtocol::Sctp.number();
    pub(crate) const ESP: u8 = IpProtocol::Esp.number();
    pub(crate) const AH: u8 = IpProtocol::Ah.number();
    pub(crate) const IPV4: u8 = IpProtocol::Ipv4.number();
    pub(crate) const IPV6: u8 = IpProtocol::Ipv6.number();
    pub(crate) const NO_NEXT: u8 = IpProtocol::Ipv6NoNxt.number();
}

/// Why an IP packet cannot be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Malformed {
    /// Shorter than its header, or than its length field says.
    Truncated,
    /// Not IPv4 or IPv6, or a header length that cannot be.
    BadHeader,
}

impl From<wire::Error> for Malformed {
    fn from(e: wire::Error) -> Malformed {
        match e.kind {
            ErrorKind::Truncated { .. } => Malformed::Truncated,
            _ => Malformed::BadHeader,
        }
    }
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
    /// The protocol of what follows `header_len`, the byte as it is in the
    /// packet ([`proto`] names the numbers). Kept as an `IpProtocol`, the
    /// engine converted it from the byte and back for every packet it
    /// encapsulated and decapsulated, ~2 ns each way beside ESP-null.
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
        let Some(&first) = p.first() else {
            return Err(Malformed::Truncated);
        };
        match wire::ip::version(first) {
            ipv4::VERSION => {
                // The view's getters after the checks this layout needs, not
                // `new_checked`: it accepts a total length of 0 (a capture's
                // segmentation offload) that a packet to encapsulate or
                // decapsulate may not have, and its extra checks (the
                // version again, the header against the buffer before the
                // total length) cost ~1 ns per packet here, measured. The
                // property test below holds this to `new_checked`'s reading.
                if p.len() < ipv4::HEADER_LEN {
                    return Err(Malformed::Truncated);
                }
                let ip = Ipv4Packet::new_unchecked(p);
                let (header_len, total_len) = (ip.header_len(), usize::from(ip.total_len()));
                if header_len < ipv4::HEADER_LEN || total_len < header_len {
                    return Err(Malformed::BadHeader);
                }
                if p.len() < total_len {
                    return Err(Malformed::Truncated);
                }
                Ok(Layout {
                    v6: false,
                    header_len,
                    total_len,
                    protocol: p[ipv4::field::PROTOCOL],
                    protocol_at: ipv4::field::PROTOCOL,
                    // Both from the one flags field: no branch between.
                    fragment: ip.more_frags() | (ip.frag_offset() != 0),
                })
            }
            ipv6::VERSION => {
                let ip = Ipv6Packet::new_checked(p)?;
                let total = ipv6::HEADER_LEN + usize::from(ip.payload_len());
                if p.len() < total {
                    return Err(Malformed::Truncated);
                }
                let mut next = p[ipv6::field::NXT_HDR];
                let mut at = ipv6::field::NXT_HDR;
                let mut off = ipv6::HEADER_LEN;
                let mut fragment = false;
                // Hop-by-hop, routing and destination options come before
                // ESP/AH; a fragment header is remembered and walked past.
                while ipv6ext::is_walked(next) {
                    if off + ipv6ext::HEADER_LEN > total {
                        return Err(Malformed::Truncated);
                    }
                    let ext = Ipv6ExtHeader::new_unchecked(&p[off..total]);
                    let len = if next == IpProtocol::Ipv6Frag.number() {
                        fragment = true;
                        ipv6ext::FRAGMENT_HEADER_LEN
                    } else {
                        ext.header_len()
                    };
                    if off + len > total {
                        return Err(Malformed::Truncated);
                    }
                    at = off + ipv6ext::field::NXT_HDR;
                    next = p[off + ipv6ext::field::NXT_HDR];
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
            _ => Err(Malformed::BadHeader),
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
        if self.v6 {
            Ipv6Packet::new_unchecked(p).src_addr().into()
        } else {
            Ipv4Packet::new_unchecked(p).src_addr().into()
        }
    }

    /// The destination address of `p`, as [`Layout::src`].
    #[inline(always)]
    pub(crate) fn dst(&self, p: &[u8]) -> IpAddr {
        if self.v6 {
            Ipv6Packet::new_unchecked(p).dst_addr().into()
        } else {
            Ipv4Packet::new_unchecked(p).dst_addr().into()
        }
    }
}

/// Whether the IPv4 header of `p` (a packet [`Layout::parse`] read) has a
/// right checksum.
#[inline(always)]
pub(crate) fn ipv4_checksum_ok(p: &[u8]) -> bool {
    Ipv4Packet::new_unchecked(p).verify_checksum()
}

/// Sets the length field(s) of the IP packet `p` (IPv4 total length and
/// checksum; IPv6 payload length) to its length.
#[inline]
pub(crate) fn fix_lengths(p: &mut [u8], v6: bool) {
    set_protocol_and_lengths(p, v6, None);
}

/// [`fix_lengths`], with the byte at `protocol.0` set to `protocol.1`: the
/// IPv6 next-header field ESP or AH followed, or the IPv4 protocol field
/// ([`Layout::protocol_at`]).
#[inline]
pub(crate) fn set_protocol_and_lengths(p: &mut [u8], v6: bool, protocol: Option<(usize, u8)>) {
    let len = p.len();
    if v6 {
        if let Some((at, nh)) = protocol {
            p[at] = nh;
        }
        let mut ip = Ipv6Packet::new_unchecked(p);
        ip.set_payload_len((len - ipv6::HEADER_LEN) as u16);
        return;
    }
    debug_assert!(protocol.is_none_or(|(at, _)| at == ipv4::field::PROTOCOL));
    let proto = protocol.map_or_else(|| p[ipv4::field::PROTOCOL], |(_, nh)| nh);
    let mut ip = Ipv4Packet::new_unchecked(p);
    ip.set_len_protocol_and_checksum(len as u16, proto);
}

/// The UDP checksum of a UDP header and payload over IPv6 (or IPv4), with
/// its pseudo-header; 0 is sent as 0xffff (RFC 768).
pub(crate) fn udp_checksum(src: IpAddr, dst: IpAddr, udp: &[u8]) -> u16 {
    use wire::checksum::{fold, pseudo_header, sum};
    let acc = pseudo_header(&src, &dst, IpProtocol::Udp, udp.len() as u32) + sum(udp);
    match !fold(acc) {
        0 => 0xffff,
        c => c,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_and_their_refusals() {
        let mut v6 = vec![0u8; 48];
        v6[0] = 0x60;
        v6[4..6].copy_from_slice(&8u16.to_be_bytes());
        v6[6] = IpProtocol::Ipv6Opts.into();
        v6[40] = IpProtocol::Udp.into(); // next header after the options
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

    use proptest::prelude::*;
    use wire::ipv6ext::{Ipv6ExtHeader, Ipv6FragmentHeader};

    proptest! {
        /// Layout keeps the protocol as the packet's byte: read through
        /// `wire`'s views, it names the same protocol, and the lengths,
        /// fragment flag and addresses are the views' too.
        #[test]
        fn layout_is_what_the_views_read(
            v6 in any::<bool>(),
            fit in any::<bool>(),
            mut p in proptest::collection::vec(any::<u8>(), 0..160),
        ) {
            if let Some(first) = p.first_mut() {
                *first = if v6 { 0x60 | (*first & 0x0f) } else { 0x40 | (*first & 0x0f) };
            }
            // Half the packets say their own length, so that most parse.
            if fit && !v6 && p.len() >= ipv4::HEADER_LEN {
                let len = p.len() as u16;
                Ipv4Packet::new_unchecked(&mut p[..]).set_total_len(len);
            }
            if fit && v6 && p.len() >= ipv6::HEADER_LEN {
                let len = (p.len() - ipv6::HEADER_LEN) as u16;
                Ipv6Packet::new_unchecked(&mut p[..]).set_payload_len(len);
            }
            let Ok(l) = Layout::parse(&p) else { return Ok(()) };
            if v6 {
                let ip = Ipv6Packet::new_checked(&p[..]).unwrap();
                prop_assert_eq!(l.total_len, ipv6::HEADER_LEN + usize::from(ip.payload_len()));
                prop_assert_eq!(l.src(&p), IpAddr::from(ip.src_addr()));
                prop_assert_eq!(l.dst(&p), IpAddr::from(ip.dst_addr()));
                // The walk through the extension headers, by their views.
                let (mut next, mut at) = (ip.next_header(), ipv6::HEADER_LEN);
                while ipv6ext::is_walked(next.number()) {
                    let rest = &p[at..l.total_len];
                    (next, at) = match next {
                        IpProtocol::Ipv6Frag => {
                            prop_assert!(l.fragment);
                            let f = Ipv6FragmentHeader::new_checked(rest).unwrap();
                            (f.next_header(), at + ipv6ext::FRAGMENT_HEADER_LEN)
                        }
                        _ => {
                            let ext = Ipv6ExtHeader::new_checked(rest).unwrap();
                            (ext.next_header(), at + ext.header_len())
                        }
                    };
                }
                prop_assert_eq!((IpProtocol::from(l.protocol), l.header_len), (next, at));
            } else {
                let ip = Ipv4Packet::new_checked(&p[..]).unwrap();
                prop_assert_eq!(IpProtocol::from(l.protocol), ip.protocol());
                prop_assert_eq!(l.protocol_at, ipv4::field::PROTOCOL);
                prop_assert_eq!((l.header_len, l.total_len), (ip.header_len(), usize::from(ip.total_len())));
                prop_assert_eq!(l.fragment, ip.more_frags() || ip.frag_offset() != 0);
                prop_assert_eq!(l.src(&p), IpAddr::from(ip.src_addr()));
                prop_assert_eq!(l.dst(&p), IpAddr::from(ip.dst_addr()));
            }
        }
    }
}
