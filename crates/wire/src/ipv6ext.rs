//! IPv6 extension headers (RFC 8200 §4): the generic
//! type-length form shared by hop-by-hop options (§4.3), routing (§4.4) and
//! destination options (§4.6), and the fixed 8-byte fragment header (§4.5).

use crate::error::{need, Error, Layer, Result};
use crate::ip::IpProtocol;
use crate::{be16, be32};
use core::fmt;

/// Field offsets within an extension header: the first two are shared by all
/// of them, the last two are the fragment header's.
pub mod field {
    use core::ops::Range;
    pub const NXT_HDR: usize = 0;
    /// Hdr Ext Len: the header's length in 8-byte units, minus 1 (reserved,
    /// and 0, in the fragment header).
    pub const LENGTH: usize = 1;
    /// Where the options or routing data of a generic header begin.
    pub const DATA: usize = 2;
    /// Fragment header: offset in 8-byte units, 2 reserved bits, the M flag.
    pub const FRAG_OFF_M: Range<usize> = 2..4;
    /// Fragment header: identification.
    pub const IDENT: Range<usize> = 4..8;
}

/// The shortest extension header; every one is a multiple of 8 bytes.
pub const HEADER_LEN: usize = 8;
/// Length of the fragment header.
pub const FRAGMENT_HEADER_LEN: usize = 8;
/// Longest generic extension header: Hdr Ext Len 255 gives (255 + 1) × 8.
pub const MAX_HEADER_LEN: usize = 2048;

/// Whether `p` is one of the extension headers [`crate::slice`] walks
/// through: hop-by-hop, routing, fragment, destination options.
#[inline]
pub const fn is_walked(p: u8) -> bool {
    matches!(
        IpProtocol::from_number(p),
        IpProtocol::HopByHop | IpProtocol::Ipv6Route | IpProtocol::Ipv6Frag | IpProtocol::Ipv6Opts
    )
}

/// A zero-copy view of a hop-by-hop, routing or destination options header.
#[derive(Debug, Clone, Copy)]
pub struct Ipv6ExtHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6ExtHeader<T> {
    /// Wraps a buffer without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv6ExtHeader { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let h = Self::new_unchecked(buffer);
        h.check_len()?;
        Ok(h)
    }

    /// Checks that the whole header, as its length field gives it, is there.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        need(Layer::Ipv6Ext, b, field::DATA)?;
        need(Layer::Ipv6Ext, b, self.header_len())
    }

    /// The next header.
    #[inline]
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.buffer.as_ref()[field::NXT_HDR])
    }

    /// Header length in bytes: (Hdr Ext Len + 1) × 8.
    #[inline]
    pub fn header_len(&self) -> usize {
        (usize::from(self.buffer.as_ref()[field::LENGTH]) + 1) * 8
    }

    /// The header's contents after its first two bytes (options, or the
    /// routing type, segments left and data).
    #[inline]
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::DATA..self.header_len()]
    }

    /// Everything after the header.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

/// A parsed hop-by-hop, routing or destination options header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ipv6ExtRepr<'a> {
    pub next_header: IpProtocol,
    /// Contents after the first two bytes; 6 + 8k bytes long.
    pub data: &'a [u8],
}

impl<'a> Ipv6ExtRepr<'a> {
    /// Reads a header.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(h: &Ipv6ExtHeader<&'a T>) -> Result<Ipv6ExtRepr<'a>> {
        h.check_len()?;
        let b: &'a [u8] = h.buffer.as_ref();
        Ok(Ipv6ExtRepr {
            next_header: h.next_header(),
            data: &b[field::DATA..h.header_len()],
        })
    }

    /// Bytes [`emit`](Self::emit) writes.
    pub const fn buffer_len(&self) -> usize {
        field::DATA + self.data.len()
    }

    /// Writes the header at the start of `buf`; `data` must be 6 + 8k bytes, k < 256.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let len = self.buffer_len();
        if len & 7 != 0 || len > MAX_HEADER_LEN {
            return Err(Error::bad_length(Layer::Ipv6Ext, len, HEADER_LEN));
        }
        need(Layer::Ipv6Ext, buf, len)?;
        buf[field::NXT_HDR] = self.next_header.into();
        buf[field::LENGTH] = (len / 8 - 1) as u8;
        buf[field::DATA..len].copy_from_slice(self.data);
        Ok(())
    }
}

impl fmt::Display for Ipv6ExtRepr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ipv6 ext len {} next {}",
            self.buffer_len(),
            self.next_header
        )
    }
}

/// A zero-copy view of an IPv6 fragment header.
#[derive(Debug, Clone, Copy)]
pub struct Ipv6FragmentHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6FragmentHeader<T> {
    /// Wraps a buffer without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv6FragmentHeader { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let h = Self::new_unchecked(buffer);
        h.check_len()?;
        Ok(h)
    }

    /// Checks that the 8 bytes are there.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        need(Layer::Ipv6Ext, self.buffer.as_ref(), FRAGMENT_HEADER_LEN)
    }

    /// The next header.
    #[inline]
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.buffer.as_ref()[field::NXT_HDR])
    }

    /// Fragment offset in bytes.
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::FRAG_OFF_M]) & 0xfff8
    }

    /// The M (more fragments) flag.
    #[inline]
    pub fn more_frags(&self) -> bool {
        be16(&self.buffer.as_ref()[field::FRAG_OFF_M]) & 1 != 0
    }

    /// Identification.
    #[inline]
    pub fn ident(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::IDENT])
    }
}

/// A parsed IPv6 fragment header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ipv6FragmentRepr {
    pub next_header: IpProtocol,
    /// Offset in bytes, a multiple of 8.
    pub frag_offset: u16,
    pub more_frags: bool,
    pub ident: u32,
}

impl Ipv6FragmentRepr {
    /// Reads a checked header.
    pub fn parse<T: AsRef<[u8]>>(h: &Ipv6FragmentHeader<T>) -> Result<Ipv6FragmentRepr> {
        h.check_len()?;
        Ok(Ipv6FragmentRepr {
            next_header: h.next_header(),
            frag_offset: h.frag_offset(),
            more_frags: h.more_frags(),
            ident: h.ident(),
        })
    }

    /// Bytes [`emit`](Self::emit) writes.
    pub const fn buffer_len(&self) -> usize {
        FRAGMENT_HEADER_LEN
    }

    /// Writes the header at the start of `buf`; the offset is rounded down to 8.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        need(Layer::Ipv6Ext, buf, FRAGMENT_HEADER_LEN)?;
        buf[field::NXT_HDR] = self.next_header.into();
        buf[field::LENGTH] = 0;
        let v = (self.frag_offset & 0xfff8) | u16::from(self.more_frags);
        buf[field::FRAG_OFF_M].copy_from_slice(&v.to_be_bytes());
        buf[field::IDENT].copy_from_slice(&self.ident.to_be_bytes());
        Ok(())
    }
}

impl fmt::Display for Ipv6FragmentRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "frag (0x{:08x}:{}{}) next {}",
            self.ident,
            self.frag_offset,
            if self.more_frags { "+" } else { "" },
            self.next_header
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 8200 §4.3 / RFC 2711: a hop-by-hop header with a Router Alert
    // option (type 5, length 2, value 0 = MLD) and a PadN of 0 bytes (01 00),
    // next header ICMPv6, as every MLD report carries it.
    const HBH_ROUTER_ALERT: [u8; 8] = [0x3a, 0x00, 0x05, 0x02, 0x00, 0x00, 0x01, 0x00];

    // A second fragment, hand-encoded from RFC 8200 §4.5: next header UDP,
    // offset 1448 bytes (181 units), M set, identification 0xdeadbeef.
    const FRAG: [u8; 8] = [0x11, 0x00, 0x05, 0xa9, 0xde, 0xad, 0xbe, 0xef];

    #[test]
    fn hop_by_hop() {
        let h = Ipv6ExtHeader::new_checked(&HBH_ROUTER_ALERT[..]).unwrap();
        let r = Ipv6ExtRepr::parse(&h).unwrap();
        assert_eq!(r.next_header, IpProtocol::Icmpv6);
        assert_eq!(r.data, &HBH_ROUTER_ALERT[2..]);
        let mut b = [0u8; 8];
        r.emit(&mut b).unwrap();
        assert_eq!(b, HBH_ROUTER_ALERT);
        let mut long = HBH_ROUTER_ALERT;
        long[1] = 1;
        assert_eq!(
            Ipv6ExtHeader::new_checked(&long[..])
                .unwrap_err()
                .to_string(),
            "ipv6 extension header truncated at offset 0: 16 bytes needed, 8 there"
        );
    }

    #[test]
    fn fragment() {
        let r =
            Ipv6FragmentRepr::parse(&Ipv6FragmentHeader::new_checked(&FRAG[..]).unwrap()).unwrap();
        assert_eq!(
            r,
            Ipv6FragmentRepr {
                next_header: IpProtocol::Udp,
                frag_offset: 1448,
                more_frags: true,
                ident: 0xdeadbeef
            }
        );
        let mut b = [0u8; 8];
        r.emit(&mut b).unwrap();
        assert_eq!(b, FRAG);
        assert_eq!(r.to_string(), "frag (0xdeadbeef:1448+) next udp");
    }
}
