//! UDP headers (RFC 768) and the checksum over the IPv4 (RFC 768) or IPv6
//! (RFC 8200 §8.1) pseudo-header.

use crate::be16;
use crate::checksum;
use crate::error::{need, Error, Layer, Result};
use crate::ip::IpProtocol;
use core::fmt;
use core::net::IpAddr;

/// Field offsets within the header.
pub mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const CHECKSUM: Range<usize> = 6..8;
}

/// Length of the header.
pub const HEADER_LEN: usize = 8;

/// A zero-copy view of a UDP datagram.
#[derive(Debug, Clone, Copy)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Wraps a buffer without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        UdpPacket { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks that the header is there and the length field is at least 8.
    /// The data may be cut short by a snap length.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        need(Layer::Udp, self.buffer.as_ref(), HEADER_LEN)?;
        let len = usize::from(self.len());
        if len < HEADER_LEN {
            return Err(Error::bad_length(Layer::Udp, len, HEADER_LEN));
        }
        Ok(())
    }

    /// Returns the wrapped buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::SRC_PORT])
    }
    /// Destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::DST_PORT])
    }
    /// Length field (header and data).
    #[inline]
    pub fn len(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::LENGTH])
    }
    /// Whether the length field says there is no data.
    #[inline]
    pub fn is_empty(&self) -> bool {
        usize::from(self.len()) <= HEADER_LEN
    }
    /// Checksum field (0: none was computed, allowed over IPv4 only).
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::CHECKSUM])
    }
    /// The data, up to the length field or what the buffer holds.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        &b[HEADER_LEN..usize::from(self.len()).clamp(HEADER_LEN, b.len())]
    }

    /// Whether the checksum over the pseudo-header and the whole buffer is
    /// right. A zero checksum over IPv4 means "not computed" and passes.
    #[inline]
    pub fn verify_checksum(&self, src: &IpAddr, dst: &IpAddr) -> bool {
        if src.is_ipv4() && self.checksum() == 0 {
            return true;
        }
        let b = self.buffer.as_ref();
        let ph = checksum::pseudo_header(src, dst, IpProtocol::Udp, b.len() as u32);
        checksum::fold(ph + checksum::sum(b)) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, v: u16) {
        self.buffer.as_mut()[field::SRC_PORT].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the destination port.
    pub fn set_dst_port(&mut self, v: u16) {
        self.buffer.as_mut()[field::DST_PORT].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the length field.
    pub fn set_len(&mut self, v: u16) {
        self.buffer.as_mut()[field::LENGTH].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&v.to_be_bytes());
    }
    /// Computes the checksum over the pseudo-header and the whole buffer,
    /// which must hold exactly the datagram. A result of 0 is sent as 0xffff
    /// (RFC 768), since 0 means "no checksum".
    pub fn fill_checksum(&mut self, src: &IpAddr, dst: &IpAddr) {
        self.set_checksum(0);
        let b = self.buffer.as_ref();
        let ph = checksum::pseudo_header(src, dst, IpProtocol::Udp, b.len() as u32);
        let c = !checksum::fold(ph + checksum::sum(b));
        self.set_checksum(if c == 0 { 0xffff } else { c });
    }
}

/// A parsed UDP header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    pub src_port: u16,
    pub dst_port: u16,
    /// Data length (length field minus 8).
    pub payload_len: usize,
}

impl UdpRepr {
    /// Reads a header; the checksum is not verified.
    pub fn parse<T: AsRef<[u8]>>(p: &UdpPacket<T>) -> Result<UdpRepr> {
        p.check_len()?;
        Ok(UdpRepr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            payload_len: usize::from(p.len()) - HEADER_LEN,
        })
    }

    /// Header bytes [`emit`](Self::emit) writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header with a zero checksum; write the data after it, then
    /// call [`UdpPacket::fill_checksum`] on the datagram.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let len = HEADER_LEN + self.payload_len;
        let len16 =
            u16::try_from(len).map_err(|_| Error::bad_length(Layer::Udp, len, HEADER_LEN))?;
        need(Layer::Udp, buf, HEADER_LEN)?;
        let mut p = UdpPacket::new_unchecked(buf);
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_len(len16);
        p.set_checksum(0);
        Ok(())
    }
}

impl fmt::Display for UdpRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "udp {} > {}: length {}",
            self.src_port, self.dst_port, self.payload_len
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;

    // The UDP datagram quoted inside an ICMP port-unreachable captured on
    // Linux loopback (ours): 127.0.0.1:37384 > :5353, "hello udp".
    const LO_UDP: [u8; 17] = [
        0x92, 0x08, 0x14, 0xe9, 0x00, 0x11, 0xfe, 0x24, b'h', b'e', b'l', b'l', b'o', b' ', b'u',
        b'd', b'p',
    ];

    #[test]
    fn parse_and_checksum() {
        let p = UdpPacket::new_checked(&LO_UDP[..]).unwrap();
        let r = UdpRepr::parse(&p).unwrap();
        assert_eq!(
            r,
            UdpRepr {
                src_port: 37384,
                dst_port: 5353,
                payload_len: 9
            }
        );
        assert_eq!(p.payload(), b"hello udp");
        assert_eq!(r.to_string(), "udp 37384 > 5353: length 9");
        // Loopback leaves the checksum partial; compute the real one and check it.
        let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let mut b = LO_UDP;
        let mut q = UdpPacket::new_checked(&mut b[..]).unwrap();
        q.fill_checksum(&lo, &lo);
        assert!(q.verify_checksum(&lo, &lo));
        assert_ne!(q.checksum(), 0);
        let mut h = [0u8; 8];
        r.emit(&mut h).unwrap();
        assert_eq!(h[..6], LO_UDP[..6]);
    }

    #[test]
    fn bad_length() {
        let mut b = LO_UDP;
        b[5] = 7;
        assert!(UdpPacket::new_checked(&b[..]).is_err());
        assert!(UdpRepr {
            src_port: 0,
            dst_port: 0,
            payload_len: 70000
        }
        .emit(&mut [0u8; 8])
        .is_err());
    }
}
