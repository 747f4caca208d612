//! The Authentication Header (RFC 4302 §2): next header, payload length in
//! 32-bit words minus 2 (§2.2), SPI, sequence number and the ICV.

use crate::be32;
use crate::error::{need, Error, Layer, Result};
use crate::ip::IpProtocol;
use core::fmt;

/// Field offsets within the header.
pub mod field {
    use core::ops::Range;
    pub const NXT_HDR: usize = 0;
    /// Payload Len: the header's length in 32-bit words, minus 2.
    pub const LENGTH: usize = 1;
    pub const RESERVED: Range<usize> = 2..4;
    pub const SPI: Range<usize> = 4..8;
    pub const SEQ: Range<usize> = 8..12;
}

/// Length of the fixed part (before the ICV).
pub const HEADER_LEN: usize = 12;

/// A zero-copy view of an AH header and what follows it.
#[derive(Debug, Clone, Copy)]
pub struct AhPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> AhPacket<T> {
    /// Wraps a buffer without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        AhPacket { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks that the header with its ICV, as the length field gives it, is there.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        need(Layer::Ah, b, HEADER_LEN)?;
        let hl = self.header_len();
        if hl < HEADER_LEN {
            return Err(Error::bad_length(Layer::Ah, hl, HEADER_LEN));
        }
        need(Layer::Ah, b, hl)
    }

    /// Next header.
    #[inline]
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.buffer.as_ref()[field::NXT_HDR])
    }
    /// Header length in bytes, ICV included: (Payload Len + 2) × 4.
    #[inline]
    pub fn header_len(&self) -> usize {
        (usize::from(self.buffer.as_ref()[field::LENGTH]) + 2) * 4
    }
    /// Security Parameters Index.
    #[inline]
    pub fn spi(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::SPI])
    }
    /// Sequence number.
    #[inline]
    pub fn seq_number(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::SEQ])
    }
    /// Integrity Check Value (with any padding).
    #[inline]
    pub fn icv(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }
    /// What the header protects, after the ICV.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

/// A parsed AH header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AhRepr<'a> {
    pub next_header: IpProtocol,
    pub spi: u32,
    pub seq_number: u32,
    /// The ICV, a multiple of 4 bytes (of 8 over IPv6, RFC 4302 §3.3.3.2.1).
    pub icv: &'a [u8],
}

impl<'a> AhRepr<'a> {
    /// Reads a header.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &AhPacket<&'a T>) -> Result<AhRepr<'a>> {
        p.check_len()?;
        let b: &'a [u8] = p.buffer.as_ref();
        Ok(AhRepr {
            next_header: p.next_header(),
            spi: p.spi(),
            seq_number: p.seq_number(),
            icv: &b[HEADER_LEN..p.header_len()],
        })
    }

    /// Bytes [`emit`](Self::emit) writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.icv.len()
    }

    /// Writes the header and ICV at the start of `buf`; the ICV must be a
    /// multiple of 4 bytes and at most 1012.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let len = self.buffer_len();
        if self.icv.len() & 3 != 0 || len / 4 - 2 > 255 {
            return Err(Error::bad_length(Layer::Ah, len, HEADER_LEN));
        }
        need(Layer::Ah, buf, len)?;
        buf[field::NXT_HDR] = self.next_header.into();
        buf[field::LENGTH] = (len / 4 - 2) as u8;
        buf[field::RESERVED].copy_from_slice(&[0, 0]);
        buf[field::SPI].copy_from_slice(&self.spi.to_be_bytes());
        buf[field::SEQ].copy_from_slice(&self.seq_number.to_be_bytes());
        buf[HEADER_LEN..len].copy_from_slice(self.icv);
        Ok(())
    }
}

impl fmt::Display for AhRepr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "AH(spi=0x{:08x},seq=0x{:x}): next {}",
            self.spi, self.seq_number, self.next_header
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 4302 §2 layout with HMAC-SHA1-96 (12-byte ICV, RFC 2404), so
    // Payload Len = (12 + 12) / 4 - 2 = 4; hand-encoded, next header TCP.
    const AH: [u8; 24] = [
        0x06, 0x04, 0x00, 0x00, 0x00, 0x00, 0x10, 0x01, 0x00, 0x00, 0x00, 0x02, 0xa1, 0xa2, 0xa3,
        0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac,
    ];

    #[test]
    fn parse_emit() {
        let p = AhPacket::new_checked(&AH[..]).unwrap();
        let r = AhRepr::parse(&p).unwrap();
        assert_eq!(
            (r.next_header, r.spi, r.seq_number, r.icv.len()),
            (IpProtocol::Tcp, 0x1001, 2, 12)
        );
        let mut b = [0u8; 24];
        r.emit(&mut b).unwrap();
        assert_eq!(b, AH);
        assert_eq!(r.to_string(), "AH(spi=0x00001001,seq=0x2): next tcp");
        assert_eq!(
            AhPacket::new_checked(&AH[..20]).unwrap_err().to_string(),
            "ah header truncated at offset 0: 24 bytes needed, 20 there"
        );
    }
}
