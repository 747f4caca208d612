//! BSD loopback encapsulation, LINKTYPE_NULL
//! (<https://www.tcpdump.org/linktypes/LINKTYPE_NULL.html>): a 4-byte
//! address family in the *capturing host's* byte order, then the packet.
//!
//! The byte order is not recorded, so it is inferred as Wireshark does: every
//! family value is below 65536, so a value with bits in the upper half was
//! written in the other byte order.

use crate::error::{need, Layer, Result};
use core::fmt;

/// Length of the address family word.
pub const HEADER_LEN: usize = 4;

/// AF_INET on every BSD, Linux, macOS and Windows.
pub const AF_INET: u32 = 2;
/// The AF_INET6 values in use: Linux (10), NetBSD/OpenBSD (24), FreeBSD (28), macOS (30).
pub const AF_INET6: [u32; 4] = [10, 24, 28, 30];

/// The IP version an address family stands for, if any.
#[inline]
pub fn ip_version(family: u32) -> Option<u8> {
    match family {
        AF_INET => Some(4),
        10 | 24 | 28 | 30 => Some(6),
        _ => None,
    }
}

/// A zero-copy view of a loopback header.
#[derive(Debug, Clone, Copy)]
pub struct NullHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> NullHeader<T> {
    /// Wraps a buffer without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        NullHeader { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let h = Self::new_unchecked(buffer);
        h.check_len()?;
        Ok(h)
    }

    /// Checks that the 4-byte family word is there.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        need(Layer::Null, self.buffer.as_ref(), HEADER_LEN)
    }

    /// The address family, with the byte order inferred.
    #[inline]
    pub fn family(&self) -> u32 {
        let b = &self.buffer.as_ref()[..4];
        let le = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        if le > 0xffff {
            le.swap_bytes()
        } else {
            le
        }
    }

    /// Everything after the header.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> NullHeader<T> {
    /// Writes the family little-endian, the order of nearly every capturing host today.
    pub fn set_family(&mut self, family: u32) {
        self.buffer.as_mut()[..4].copy_from_slice(&family.to_le_bytes());
    }
}

/// A parsed loopback header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NullRepr {
    /// The address family; values above 0xffff cannot be represented.
    pub family: u32,
}

impl NullRepr {
    /// Reads a checked header.
    pub fn parse<T: AsRef<[u8]>>(h: &NullHeader<T>) -> Result<NullRepr> {
        h.check_len()?;
        Ok(NullRepr { family: h.family() })
    }

    /// Bytes [`emit`](Self::emit) writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header at the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        need(Layer::Null, buf, HEADER_LEN)?;
        NullHeader::new_unchecked(buf).set_family(self.family);
        Ok(())
    }
}

impl fmt::Display for NullRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "loopback family {}", self.family)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_byte_orders() {
        // macOS lo0 capture (little-endian host): AF_INET6 = 30 as 1e 00 00 00.
        let h = NullHeader::new_checked(&[0x1e, 0, 0, 0][..]).unwrap();
        assert_eq!(ip_version(h.family()), Some(6));
        // A big-endian host (old SPARC/PowerPC captures): AF_INET as 00 00 00 02.
        let h = NullHeader::new_checked(&[0, 0, 0, 2][..]).unwrap();
        assert_eq!(NullRepr::parse(&h).unwrap(), NullRepr { family: 2 });
        assert_eq!(ip_version(17), None);
        let mut b = [0u8; 4];
        NullRepr { family: 2 }.emit(&mut b).unwrap();
        assert_eq!(b, [2, 0, 0, 0]);
    }
}
