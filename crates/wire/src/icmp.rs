//! ICMP for IPv4 (RFC 792): type, code, checksum over the message, and the
//! 4-byte "rest of header" that holds the echo identifier and sequence.

use crate::checksum;
use crate::error::{need, Layer, Result};
use crate::{be16, be32};
use core::fmt;

/// Field offsets within the header.
pub mod field {
    use core::ops::Range;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Range<usize> = 2..4;
    pub const REST: Range<usize> = 4..8;
}

/// Length of the header (type, code, checksum, rest of header).
pub const HEADER_LEN: usize = 8;

/// Echo reply type.
pub const ECHO_REPLY: u8 = 0;
/// Destination unreachable type.
pub const DEST_UNREACHABLE: u8 = 3;
/// Source quench type (deprecated by RFC 6633, still an error to quote).
pub const SOURCE_QUENCH: u8 = 4;
/// Redirect type.
pub const REDIRECT: u8 = 5;
/// Echo request type.
pub const ECHO_REQUEST: u8 = 8;
/// Time exceeded type.
pub const TIME_EXCEEDED: u8 = 11;
/// Parameter problem type.
pub const PARAMETER_PROBLEM: u8 = 12;
/// Destination unreachable's code "fragmentation needed and DF set", whose
/// rest of header carries the next-hop MTU in its low 16 bits (RFC 1191 §4).
pub const CODE_FRAG_NEEDED: u8 = 4;

/// Whether an ICMP type is an error message (RFC 792; RFC 1122 §3.2.2
/// lists them), which is never answered with another.
#[inline]
pub const fn is_error(msg_type: u8) -> bool {
    matches!(
        msg_type,
        DEST_UNREACHABLE | SOURCE_QUENCH | REDIRECT | TIME_EXCEEDED | PARAMETER_PROBLEM
    )
}

/// A zero-copy view of an ICMP message.
#[derive(Debug, Clone, Copy)]
pub struct IcmpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> IcmpPacket<T> {
    /// Wraps a buffer without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        IcmpPacket { buffer }
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
        need(Layer::Icmp, self.buffer.as_ref(), HEADER_LEN)
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
    /// Echo identifier (meaningful for echo request/reply).
    #[inline]
    pub fn echo_ident(&self) -> u16 {
        (self.rest_of_header() >> 16) as u16
    }
    /// Echo sequence number (meaningful for echo request/reply).
    #[inline]
    pub fn echo_seq_no(&self) -> u16 {
        self.rest_of_header() as u16
    }
    /// The message body after the 8-byte header.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
    /// Whether the checksum over the whole buffer is right.
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        checksum::fold(checksum::sum(self.buffer.as_ref())) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> IcmpPacket<T> {
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
    /// Computes the checksum over the whole buffer (the message).
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(self.buffer.as_ref());
        self.set_checksum(c);
    }
}

/// A parsed ICMP header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IcmpRepr {
    pub msg_type: u8,
    pub code: u8,
    /// The 4 type-specific bytes; for echo, identifier << 16 | sequence.
    pub rest_of_header: u32,
}

impl IcmpRepr {
    /// An echo request or reply header.
    pub const fn echo(request: bool, ident: u16, seq_no: u16) -> IcmpRepr {
        IcmpRepr {
            msg_type: if request { ECHO_REQUEST } else { ECHO_REPLY },
            code: 0,
            rest_of_header: (ident as u32) << 16 | seq_no as u32,
        }
    }

    /// Reads a header; the checksum is not verified.
    pub fn parse<T: AsRef<[u8]>>(p: &IcmpPacket<T>) -> Result<IcmpRepr> {
        p.check_len()?;
        Ok(IcmpRepr {
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
    /// [`IcmpPacket::fill_checksum`] on the message.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        need(Layer::Icmp, buf, HEADER_LEN)?;
        let mut p = IcmpPacket::new_unchecked(buf);
        p.set_msg_type(self.msg_type);
        p.set_code(self.code);
        p.set_checksum(0);
        p.set_rest_of_header(self.rest_of_header);
        Ok(())
    }
}

impl fmt::Display for IcmpRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.msg_type {
            ECHO_REQUEST | ECHO_REPLY => write!(
                f,
                "ICMP echo {}, id {}, seq {}",
                if self.msg_type == ECHO_REQUEST {
                    "request"
                } else {
                    "reply"
                },
                self.rest_of_header >> 16,
                self.rest_of_header & 0xffff
            ),
            t => write!(f, "ICMP type {t} code {}", self.code),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Echo request captured with tcpdump on Linux loopback (ours):
    // id 0x1234, seq 1, body "kansoku-ping-0123456789", checksum 0x1187.
    const LO_ECHO: [u8; 31] = *b"\x08\x00\x11\x87\x12\x34\x00\x01kansoku-ping-0123456789";

    #[test]
    fn parse_echo() {
        let p = IcmpPacket::new_checked(&LO_ECHO[..]).unwrap();
        assert!(p.verify_checksum());
        let r = IcmpRepr::parse(&p).unwrap();
        assert_eq!(r, IcmpRepr::echo(true, 0x1234, 1));
        assert_eq!((p.echo_ident(), p.echo_seq_no()), (0x1234, 1));
        assert_eq!(r.to_string(), "ICMP echo request, id 4660, seq 1");
        let mut b = LO_ECHO;
        r.emit(&mut b).unwrap();
        IcmpPacket::new_unchecked(&mut b[..]).fill_checksum();
        assert_eq!(b, LO_ECHO);
    }
}
