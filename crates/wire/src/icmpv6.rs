//! ICMPv6 (RFC 4443 §2.1): type, code, and a checksum that covers the IPv6
//! pseudo-header (RFC 4443 §2.3, RFC 8200 §8.1). Echo messages (§4) carry an
//! identifier and sequence number in the first 4 body bytes.

use crate::checksum;
use crate::error::{need, Layer, Result};
use crate::ip::IpProtocol;
use crate::{be16, be32};
use core::fmt;
use core::net::IpAddr;

/// Field offsets within the header.
pub mod field {
    use core::ops::Range;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Range<usize> = 2..4;
    pub const REST: Range<usize> = 4..8;
}

/// Length of the header including the 4 type-specific bytes.
pub const HEADER_LEN: usize = 8;

/// Echo request type.
pub const ECHO_REQUEST: u8 = 128;
/// Packet too big type; the rest of header is the MTU (RFC 4443 §3.2).
pub const PACKET_TOO_BIG: u8 = 2;

/// Whether an ICMPv6 type is an error message: types below 128 (RFC 4443
/// §2.1).
#[inline]
pub const fn is_error(msg_type: u8) -> bool {
    msg_type < ECHO_REQUEST
}
/// Echo reply type.
pub const ECHO_REPLY: u8 = 129;

/// A zero-copy view of an ICMPv6 message.
#[derive(Debug, Clone, Copy)]
pub struct Icmpv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv6Packet<T> {
    /// Wraps a buffer without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        Icmpv6Packet { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks that the 8-byte header is there.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        need(Layer::Icmpv6, self.buffer.as_ref(), HEADER_LEN)
    }

    /// Message type.
    #[inline]
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }
    /// Message code.
    #[inline]
    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }
    /// Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::CHECKSUM])
    }
    /// The 4 type-specific bytes after the checksum.
    #[inline]
    pub fn rest_of_header(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::REST])
    }
    /// Echo identifier.
    #[inline]
    pub fn echo_ident(&self) -> u16 {
        (self.rest_of_header() >> 16) as u16
    }
    /// Echo sequence number.
    #[inline]
    pub fn echo_seq_no(&self) -> u16 {
        self.rest_of_header() as u16
    }
    /// The body after the 8-byte header.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
    /// Whether the checksum over the pseudo-header and the whole buffer is right.
    #[inline]
    pub fn verify_checksum(&self, src: &IpAddr, dst: &IpAddr) -> bool {
        let b = self.buffer.as_ref();
        let ph = checksum::pseudo_header(src, dst, IpProtocol::Icmpv6, b.len() as u32);
        checksum::fold(ph + checksum::sum(b)) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv6Packet<T> {
    /// Sets the type.
    pub fn set_msg_type(&mut self, v: u8) {
        self.buffer.as_mut()[field::TYPE] = v;
    }
    /// Sets the code.
    pub fn set_code(&mut self, v: u8) {
        self.buffer.as_mut()[field::CODE] = v;
    }
    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the rest of header.
    pub fn set_rest_of_header(&mut self, v: u32) {
        self.buffer.as_mut()[field::REST].copy_from_slice(&v.to_be_bytes());
    }
    /// Computes the checksum over the pseudo-header and the whole buffer.
    pub fn fill_checksum(&mut self, src: &IpAddr, dst: &IpAddr) {
        self.set_checksum(0);
        let b = self.buffer.as_ref();
        let ph = checksum::pseudo_header(src, dst, IpProtocol::Icmpv6, b.len() as u32);
        let c = !checksum::fold(ph + checksum::sum(b));
        self.set_checksum(c);
    }
}

/// A parsed ICMPv6 header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Icmpv6Repr {
    pub msg_type: u8,
    pub code: u8,
    /// The 4 type-specific bytes; for echo, identifier << 16 | sequence.
    pub rest_of_header: u32,
}

impl Icmpv6Repr {
    /// An echo request or reply header.
    pub const fn echo(request: bool, ident: u16, seq_no: u16) -> Icmpv6Repr {
        Icmpv6Repr {
            msg_type: if request { ECHO_REQUEST } else { ECHO_REPLY },
            code: 0,
            rest_of_header: (ident as u32) << 16 | seq_no as u32,
        }
    }

    /// Reads a header; the checksum is not verified.
    pub fn parse<T: AsRef<[u8]>>(p: &Icmpv6Packet<T>) -> Result<Icmpv6Repr> {
        p.check_len()?;
        Ok(Icmpv6Repr {
            msg_type: p.msg_type(),
            code: p.code(),
            rest_of_header: p.rest_of_header(),
        })
    }

    /// Header bytes [`emit`](Self::emit) writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header with a zero checksum; write the body, then call
    /// [`Icmpv6Packet::fill_checksum`].
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        need(Layer::Icmpv6, buf, HEADER_LEN)?;
        let mut p = Icmpv6Packet::new_unchecked(buf);
        p.set_msg_type(self.msg_type);
        p.set_code(self.code);
        p.set_checksum(0);
        p.set_rest_of_header(self.rest_of_header);
        Ok(())
    }
}

impl fmt::Display for Icmpv6Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.msg_type {
            ECHO_REQUEST | ECHO_REPLY => write!(
                f,
                "ICMP6 echo {}, id {}, seq {}",
                if self.msg_type == ECHO_REQUEST {
                    "request"
                } else {
                    "reply"
                },
                self.rest_of_header >> 16,
                self.rest_of_header & 0xffff
            ),
            t => write!(f, "ICMP6 type {t} code {}", self.code),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv6Addr;

    // Echo request ::1 > ::1 captured with tcpdump on Linux loopback (ours);
    // the kernel filled the checksum 0x992b over the pseudo-header.
    const LO_ECHO6: [u8; 31] = *b"\x80\x00\x99\x2b\x12\x34\x00\x01kansoku-ping-0123456789";

    #[test]
    fn parse_echo_and_verify() {
        let lo = IpAddr::V6(Ipv6Addr::LOCALHOST);
        let p = Icmpv6Packet::new_checked(&LO_ECHO6[..]).unwrap();
        assert!(p.verify_checksum(&lo, &lo));
        let r = Icmpv6Repr::parse(&p).unwrap();
        assert_eq!(r, Icmpv6Repr::echo(true, 0x1234, 1));
        let mut b = LO_ECHO6;
        r.emit(&mut b).unwrap();
        Icmpv6Packet::new_unchecked(&mut b[..]).fill_checksum(&lo, &lo);
        assert_eq!(b, LO_ECHO6);
        assert_eq!(r.to_string(), "ICMP6 echo request, id 4660, seq 1");
    }
}
