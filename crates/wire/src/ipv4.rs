//! IPv4 headers (RFC 791 §3.1), with options kept as bytes, fragmentation
//! fields, and the header checksum (RFC 791 §3.1, computed per RFC 1071).

use crate::checksum;
use crate::error::{need, Error, ErrorKind, Layer, Result};
use crate::ip::IpProtocol;
use crate::{be16, be32};
use core::fmt;
use core::net::Ipv4Addr;

/// Field offsets within the header.
pub mod field {
    use core::ops::Range;
    pub const VER_IHL: usize = 0;
    pub const TOS: usize = 1;
    pub const LENGTH: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const FLG_OFF: Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC_ADDR: Range<usize> = 12..16;
    pub const DST_ADDR: Range<usize> = 16..20;
}

/// The version nibble of every IPv4 header.
pub const VERSION: u8 = 4;
/// Length of a header without options.
pub const HEADER_LEN: usize = 20;
/// Longest options field (IHL 15).
pub const MAX_OPTIONS_LEN: usize = 40;

/// A zero-copy view of an IPv4 packet.
#[derive(Debug, Clone, Copy)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wraps a buffer without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv4Packet { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks the version, that IHL and total length are at least 20, and that
    /// the whole header (options included) is in the buffer. The payload may be
    /// cut short (a snap length); [`payload`](Self::payload) returns what is there.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        need(Layer::Ipv4, b, HEADER_LEN)?;
        if self.version() != VERSION {
            return Err(Error {
                layer: Layer::Ipv4,
                offset: 0,
                kind: ErrorKind::BadVersion {
                    found: self.version(),
                },
            });
        }
        let hl = self.header_len();
        if hl < HEADER_LEN {
            return Err(Error::bad_length(Layer::Ipv4, hl, HEADER_LEN));
        }
        need(Layer::Ipv4, b, hl)?;
        let tl = usize::from(self.total_len());
        // A total length of 0 is what Linux records for TCP segmentation
        // offload; it is read as "the rest of the buffer", as Wireshark does.
        if tl != 0 && tl < hl {
            return Err(Error::bad_length(Layer::Ipv4, tl, hl));
        }
        Ok(())
    }

    /// Returns the wrapped buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Version nibble.
    #[inline]
    pub fn version(&self) -> u8 {
        crate::ip::version(self.buffer.as_ref()[field::VER_IHL])
    }

    /// Header length in bytes (IHL × 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    /// The type-of-service byte (DSCP and ECN).
    #[inline]
    pub fn tos(&self) -> u8 {
        self.buffer.as_ref()[field::TOS]
    }

    /// Total length field.
    #[inline]
    pub fn total_len(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::LENGTH])
    }

    /// Identification.
    #[inline]
    pub fn ident(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::IDENT])
    }

    /// The flags and fragment offset field, whole: the three getters below
    /// read it alike, so that the compiler loads it once for all of them.
    #[inline]
    fn flags_and_offset(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::FLG_OFF])
    }

    /// The Don't Fragment flag.
    #[inline]
    pub fn dont_frag(&self) -> bool {
        self.flags_and_offset() & 0x4000 != 0
    }

    /// The More Fragments flag.
    #[inline]
    pub fn more_frags(&self) -> bool {
        self.flags_and_offset() & 0x2000 != 0
    }

    /// Fragment offset in bytes (the field counts 8-byte units).
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        (self.flags_and_offset() & 0x1fff) << 3
    }

    /// Time to live.
    #[inline]
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// Protocol of the payload.
    #[inline]
    pub fn protocol(&self) -> IpProtocol {
        IpProtocol::from(self.buffer.as_ref()[field::PROTOCOL])
    }

    /// Header checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::CHECKSUM])
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(be32(&self.buffer.as_ref()[field::SRC_ADDR]))
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(be32(&self.buffer.as_ref()[field::DST_ADDR]))
    }

    /// The options bytes (empty for IHL 5).
    #[inline]
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }

    /// Whether the header checksum is right (the header sums to 0xffff).
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        checksum::fold(checksum::sum_words(
            &self.buffer.as_ref()[..self.header_len()],
        )) == 0xffff
    }

    /// The payload: up to the total length, or what the buffer holds if it is
    /// shorter (a snapped capture). Ethernet padding after the packet is left out.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        let tl = usize::from(self.total_len());
        let end = if tl == 0 { b.len() } else { tl.min(b.len()) };
        &b[self.header_len()..end]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Sets version 4 and the header length in bytes (rounded down to 4).
    pub fn set_header_len(&mut self, len: usize) {
        self.buffer.as_mut()[field::VER_IHL] = (VERSION << 4) | ((len / 4) as u8 & 0x0f);
    }
    /// Sets the type-of-service byte.
    pub fn set_tos(&mut self, v: u8) {
        self.buffer.as_mut()[field::TOS] = v;
    }
    /// Sets the total length.
    pub fn set_total_len(&mut self, v: u16) {
        self.buffer.as_mut()[field::LENGTH].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the identification.
    pub fn set_ident(&mut self, v: u16) {
        self.buffer.as_mut()[field::IDENT].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets DF, MF and the fragment offset in bytes (rounded down to 8).
    pub fn set_frag(&mut self, dont_frag: bool, more_frags: bool, offset: u16) {
        let v = (u16::from(dont_frag) << 14) | (u16::from(more_frags) << 13) | (offset >> 3);
        self.buffer.as_mut()[field::FLG_OFF].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the TTL.
    pub fn set_ttl(&mut self, v: u8) {
        self.buffer.as_mut()[field::TTL] = v;
    }
    /// Sets the protocol.
    pub fn set_protocol(&mut self, p: IpProtocol) {
        self.buffer.as_mut()[field::PROTOCOL] = p.into();
    }
    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&a.octets());
    }
    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&a.octets());
    }
    /// Computes and stores the header checksum over the header length.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let hl = self.header_len();
        let c = !checksum::fold(checksum::sum_words(&self.buffer.as_ref()[..hl]));
        self.set_checksum(c);
    }

    /// Sets the total length and the protocol, and the header checksum that
    /// goes with them, as [`set_total_len`](Self::set_total_len),
    /// [`set_protocol`](Self::set_protocol) then
    /// [`fill_checksum`](Self::fill_checksum) would.
    ///
    /// The checksum is summed from the header's other bytes and the new
    /// values as they are in registers, and the fields are stored after:
    /// storing them first and summing the header back from memory right away
    /// reads each freshly stored field with a wider load, which
    /// store-to-load forwarding cannot serve, a stall of tens of cycles per
    /// field (an encapsulation does this for every packet).
    ///
    /// `protocol` is an [`IpProtocol`] or its number, so that a number
    /// copied from another header (a trailer's next header) goes in as it
    /// is, without a conversion each way.
    #[inline]
    pub fn set_len_protocol_and_checksum(&mut self, total_len: u16, protocol: impl Into<u8>) {
        let proto = protocol.into();
        let hl = self.header_len();
        let h = &self.buffer.as_ref()[..hl];
        let word = |i: usize| u64::from(be32(&h[i..]));
        // The header's 32-bit words: the first with the total length as it
        // will be, the third with the protocol as it will be and the
        // checksum as zero.
        let first =
            u32::from_be_bytes([h[field::VER_IHL], h[field::TOS], 0, 0]) | u32::from(total_len);
        let third = u32::from_be_bytes([h[field::TTL], proto, 0, 0]);
        let addresses_and_options = match hl {
            HEADER_LEN => word(field::SRC_ADDR.start) + word(field::DST_ADDR.start),
            _ => checksum::sum_words(&h[field::SRC_ADDR.start..]),
        };
        let acc =
            u64::from(first) + word(field::IDENT.start) + u64::from(third) + addresses_and_options;
        let c = !checksum::fold(acc);
        self.set_total_len(total_len);
        self.buffer.as_mut()[field::PROTOCOL] = proto;
        self.set_checksum(c);
    }
}

/// A parsed IPv4 header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ipv4Repr<'a> {
    pub src_addr: Ipv4Addr,
    pub dst_addr: Ipv4Addr,
    pub protocol: IpProtocol,
    /// Payload length (total length minus header length).
    pub payload_len: usize,
    pub ttl: u8,
    /// DSCP and ECN.
    pub tos: u8,
    pub ident: u16,
    pub dont_frag: bool,
    pub more_frags: bool,
    /// Fragment offset in bytes; a multiple of 8.
    pub frag_offset: u16,
    /// Options, a multiple of 4 bytes, at most 40.
    pub options: &'a [u8],
}

impl<'a> Ipv4Repr<'a> {
    /// Reads a header. The checksum is not verified here (captures made on the
    /// sending host often hold offloaded, unfilled checksums); use
    /// [`Ipv4Packet::verify_checksum`].
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Ipv4Packet<&'a T>) -> Result<Ipv4Repr<'a>> {
        p.check_len()?;
        let b: &'a [u8] = p.buffer.as_ref();
        let hl = p.header_len();
        let tl = usize::from(p.total_len());
        Ok(Ipv4Repr {
            src_addr: p.src_addr(),
            dst_addr: p.dst_addr(),
            protocol: p.protocol(),
            payload_len: if tl == 0 { b.len() - hl } else { tl - hl },
            ttl: p.ttl(),
            tos: p.tos(),
            ident: p.ident(),
            dont_frag: p.dont_frag(),
            more_frags: p.more_frags(),
            frag_offset: p.frag_offset(),
            options: &b[HEADER_LEN..hl],
        })
    }

    /// Header bytes [`emit`](Self::emit) writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.options.len()
    }

    /// Writes the header (with its checksum) at the start of `buf`. Fails if
    /// the options are not a multiple of 4 up to 40 bytes, if the total length
    /// does not fit 16 bits, or if `buf` is short.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let hl = self.buffer_len();
        if self.options.len() & 3 != 0 || self.options.len() > MAX_OPTIONS_LEN {
            return Err(Error::bad_length(Layer::Ipv4, hl, HEADER_LEN));
        }
        let tl = u16::try_from(hl + self.payload_len)
            .map_err(|_| Error::bad_length(Layer::Ipv4, hl + self.payload_len, hl))?;
        need(Layer::Ipv4, buf, hl)?;
        let mut p = Ipv4Packet::new_unchecked(&mut buf[..hl]);
        p.set_header_len(hl);
        p.set_tos(self.tos);
        p.set_total_len(tl);
        p.set_ident(self.ident);
        p.set_frag(self.dont_frag, self.more_frags, self.frag_offset);
        p.set_ttl(self.ttl);
        p.set_protocol(self.protocol);
        p.set_src_addr(self.src_addr);
        p.set_dst_addr(self.dst_addr);
        p.buffer[HEADER_LEN..hl].copy_from_slice(self.options);
        p.fill_checksum();
        Ok(())
    }
}

impl fmt::Display for Ipv4Repr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "IP {} > {}: {} ttl {} len {}",
            self.src_addr, self.dst_addr, self.protocol, self.ttl, self.payload_len
        )?;
        if self.more_frags || self.frag_offset != 0 {
            write!(
                f,
                " frag offset {}{}",
                self.frag_offset,
                if self.more_frags { "+" } else { "" }
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The worked example of the IPv4 header checksum article on Wikipedia
    // ("IPv4 header checksum", calculation example): checksum b861.
    const WIKI: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];

    // ICMP port unreachable captured with tcpdump on Linux loopback (ours):
    // TOS 0xc0, ident 0x9a00, no DF, and a quoted UDP datagram after it.
    const LO_ICMP_UNREACH: [u8; 20] = [
        0x45, 0xc0, 0x00, 0x41, 0x9a, 0x00, 0x00, 0x00, 0x40, 0x01, 0xe1, 0xf9, 0x7f, 0, 0, 1,
        0x7f, 0, 0, 1,
    ];

    /// RFC 3602 §4 case 5: the outer header of the ESP packet carries
    /// total length 0x7c, protocol 50 and checksum f9a5. The same header
    /// as it was before ESP went in (length 0x54 and ICMP, checksum
    /// zeroed) gets those three fields in one step.
    #[test]
    fn length_protocol_and_checksum_of_rfc3602_case_5() {
        let want = [
            0x45, 0x00, 0x00, 0x7c, 0x08, 0xf2, 0x00, 0x00, 0x40, 0x32, 0xf9, 0xa5, 0xc0, 0xa8,
            0x7b, 0x03, 0xc0, 0xa8, 0x7b, 0x64,
        ];
        let mut h = want;
        h[field::LENGTH].copy_from_slice(&0x54u16.to_be_bytes());
        h[field::PROTOCOL] = 1;
        h[field::CHECKSUM].fill(0);
        let mut p = Ipv4Packet::new_checked(&mut h[..]).unwrap();
        p.set_len_protocol_and_checksum(0x7c, IpProtocol::Esp);
        assert!(p.verify_checksum());
        assert_eq!(h, want);
    }

    /// Summing first and storing after gives the bytes that storing the
    /// fields then summing the header back gives, options included.
    #[test]
    fn length_protocol_and_checksum_as_a_plain_recomputation_gives_them() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        };
        for hl in [HEADER_LEN, HEADER_LEN + 4, HEADER_LEN + MAX_OPTIONS_LEN] {
            let mut h = [0u8; HEADER_LEN + MAX_OPTIONS_LEN];
            h.iter_mut().for_each(|b| *b = next());
            let (len, proto) = (u16::from_be_bytes([next(), next()]), next());
            let mut want = Ipv4Packet::new_unchecked(h);
            want.set_header_len(hl);
            let mut got = want;
            want.set_total_len(len);
            want.set_protocol(IpProtocol::from(proto));
            want.fill_checksum();
            got.set_len_protocol_and_checksum(len, IpProtocol::from(proto));
            assert_eq!(got.into_inner(), want.into_inner(), "header length {hl}");
        }
    }

    #[test]
    fn wikipedia_checksum_example() {
        let p = Ipv4Packet::new_checked(&WIKI[..]).unwrap();
        assert!(p.verify_checksum());
        let r = Ipv4Repr::parse(&p).unwrap();
        assert_eq!(r.src_addr, Ipv4Addr::new(192, 168, 0, 1));
        assert_eq!(r.dst_addr, Ipv4Addr::new(192, 168, 0, 199));
        assert_eq!(
            (r.protocol, r.ttl, r.payload_len, r.dont_frag),
            (IpProtocol::Udp, 64, 0x73 - 20, true)
        );
        let mut out = [0u8; 20];
        r.emit(&mut out).unwrap();
        assert_eq!(out, WIKI);
    }

    #[test]
    fn loopback_capture() {
        let p = Ipv4Packet::new_checked(&LO_ICMP_UNREACH[..]).unwrap();
        assert!(p.verify_checksum());
        let r = Ipv4Repr::parse(&p).unwrap();
        assert_eq!(
            (r.tos, r.ident, r.dont_frag, r.protocol),
            (0xc0, 0x9a00, false, IpProtocol::Icmp)
        );
        assert_eq!(
            r.to_string(),
            "IP 127.0.0.1 > 127.0.0.1: icmp ttl 64 len 45"
        );
    }

    #[test]
    fn fragments_and_options() {
        let opts = [0x94, 0x04, 0x00, 0x00]; // Router Alert (RFC 2113)
        let r = Ipv4Repr {
            src_addr: Ipv4Addr::new(10, 0, 0, 1),
            dst_addr: Ipv4Addr::new(10, 0, 0, 2),
            protocol: IpProtocol::Udp,
            payload_len: 8,
            ttl: 1,
            tos: 0,
            ident: 7,
            dont_frag: false,
            more_frags: true,
            frag_offset: 1480,
            options: &opts,
        };
        let mut b = [0u8; 32];
        r.emit(&mut b).unwrap();
        assert_eq!(b[0], 0x46);
        assert_eq!(&b[6..8], &[0x20, 0xb9]); // MF + 185 units of 8
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(Ipv4Repr::parse(&p).unwrap(), r);
        assert_eq!(p.payload().len(), 8);
        assert!(r.to_string().ends_with("frag offset 1480+"));
    }

    #[test]
    fn malformed() {
        let mut b = WIKI;
        b[0] = 0x44;
        assert_eq!(
            Ipv4Packet::new_checked(&b[..]).unwrap_err().kind,
            ErrorKind::BadLength { value: 16, min: 20 }
        );
        b[0] = 0x65;
        assert_eq!(
            Ipv4Packet::new_checked(&b[..]).unwrap_err().kind,
            ErrorKind::BadVersion { found: 6 }
        );
        b[0] = 0x46;
        assert_eq!(
            Ipv4Packet::new_checked(&b[..]).unwrap_err().kind,
            ErrorKind::Truncated {
                needed: 24,
                had: 20
            }
        );
        assert!(Ipv4Packet::new_checked(&WIKI[..12]).is_err());
    }
}
