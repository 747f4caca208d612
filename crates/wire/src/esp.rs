//! The ESP header (RFC 4303 §2): Security Parameters Index and sequence
//! number. What follows is ciphertext (and an IV, padding, trailer and ICV
//! whose sizes depend on the SA), so only these 8 bytes are parsed here.

use crate::be32;
use crate::error::{need, Layer, Result};
use core::fmt;

/// Field offsets within the header.
pub mod field {
    use core::ops::Range;
    pub const SPI: Range<usize> = 0..4;
    pub const SEQ: Range<usize> = 4..8;
}

/// Length of SPI plus sequence number.
pub const HEADER_LEN: usize = 8;

/// A zero-copy view of an ESP packet.
#[derive(Debug, Clone, Copy)]
pub struct EspPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EspPacket<T> {
    /// Wraps a buffer without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        EspPacket { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks that SPI and sequence number are there.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        need(Layer::Esp, self.buffer.as_ref(), HEADER_LEN)
    }

    /// Security Parameters Index.
    #[inline]
    pub fn spi(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::SPI])
    }
    /// Sequence number (low 32 bits when ESN is used).
    #[inline]
    pub fn seq_number(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::SEQ])
    }
    /// Everything after the header: IV, ciphertext, trailer, ICV.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EspPacket<T> {
    /// Sets the SPI.
    pub fn set_spi(&mut self, v: u32) {
        self.buffer.as_mut()[field::SPI].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the sequence number.
    pub fn set_seq_number(&mut self, v: u32) {
        self.buffer.as_mut()[field::SEQ].copy_from_slice(&v.to_be_bytes());
    }
}

/// A parsed ESP header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EspRepr {
    pub spi: u32,
    pub seq_number: u32,
}

impl EspRepr {
    /// Reads a checked header.
    pub fn parse<T: AsRef<[u8]>>(p: &EspPacket<T>) -> Result<EspRepr> {
        p.check_len()?;
        Ok(EspRepr {
            spi: p.spi(),
            seq_number: p.seq_number(),
        })
    }

    /// Bytes [`emit`](Self::emit) writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header at the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        need(Layer::Esp, buf, HEADER_LEN)?;
        let mut p = EspPacket::new_unchecked(buf);
        p.set_spi(self.spi);
        p.set_seq_number(self.seq_number);
        Ok(())
    }
}

impl fmt::Display for EspRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ESP(spi=0x{:08x},seq=0x{:x})", self.spi, self.seq_number)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Hand-encoded from the RFC 4303 §2 layout: SPI 0x0a7b4d7c (an SPI must
    // be above 255, RFC 4303 §2.1), sequence number 1 (the first packet of an SA).
    const ESP: [u8; 8] = [0x0a, 0x7b, 0x4d, 0x7c, 0x00, 0x00, 0x00, 0x01];

    #[test]
    fn parse_emit() {
        let r = EspRepr::parse(&EspPacket::new_checked(&ESP[..]).unwrap()).unwrap();
        assert_eq!(
            r,
            EspRepr {
                spi: 0x0a7b4d7c,
                seq_number: 1
            }
        );
        assert_eq!(r.to_string(), "ESP(spi=0x0a7b4d7c,seq=0x1)");
        let mut b = [0u8; 8];
        r.emit(&mut b).unwrap();
        assert_eq!(b, ESP);
        assert!(EspPacket::new_checked(&ESP[..7]).is_err());
    }
}
