//! IPv6 fixed headers (RFC 8200 §3). Extension headers are in
//! [`crate::ipv6ext`].

use crate::error::{need, Error, ErrorKind, Layer, Result};
use crate::ip::IpProtocol;
use crate::{be16, be32};
use core::fmt;
use core::net::Ipv6Addr;

/// Field offsets within the fixed header.
pub mod field {
    use core::ops::Range;
    pub const VER_TC_FLOW: Range<usize> = 0..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const NXT_HDR: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC_ADDR: Range<usize> = 8..24;
    pub const DST_ADDR: Range<usize> = 24..40;
}

/// The version nibble of every IPv6 header.
pub const VERSION: u8 = 6;
/// Length of the fixed header.
pub const HEADER_LEN: usize = 40;

/// A zero-copy view of an IPv6 packet.
#[derive(Debug, Clone, Copy)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

#[inline]
fn addr(b: &[u8]) -> Ipv6Addr {
    let mut a = [0u8; 16];
    a.copy_from_slice(b);
    Ipv6Addr::from(a)
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wraps a buffer without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv6Packet { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks that the 40-byte header is there and the version is 6. The
    /// payload may be cut short by a snap length.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        need(Layer::Ipv6, self.buffer.as_ref(), HEADER_LEN)?;
        if self.version() != VERSION {
            return Err(Error {
                layer: Layer::Ipv6,
                offset: 0,
                kind: ErrorKind::BadVersion {
                    found: self.version(),
                },
            });
        }
        Ok(())
    }

    /// Returns the wrapped buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline]
    fn word0(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::VER_TC_FLOW])
    }

    /// Version nibble.
    #[inline]
    pub fn version(&self) -> u8 {
        crate::ip::version(self.buffer.as_ref()[field::VER_TC_FLOW.start])
    }

    /// Traffic class.
    #[inline]
    pub fn traffic_class(&self) -> u8 {
        (self.word0() >> 20) as u8
    }

    /// Flow label (20 bits).
    #[inline]
    pub fn flow_label(&self) -> u32 {
        self.word0() & 0x000f_ffff
    }

    /// Payload length field (extension headers included).
    #[inline]
    pub fn payload_len(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::LENGTH])
    }

    /// Next header.
    #[inline]
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.buffer.as_ref()[field::NXT_HDR])
    }

    /// Hop limit.
    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv6Addr {
        addr(&self.buffer.as_ref()[field::SRC_ADDR])
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv6Addr {
        addr(&self.buffer.as_ref()[field::DST_ADDR])
    }

    /// The payload up to the payload length, or what the buffer holds. A
    /// payload length of 0 (a jumbogram, RFC 2675) is read as the rest.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        let pl = usize::from(self.payload_len());
        let end = if pl == 0 {
            b.len()
        } else {
            (HEADER_LEN + pl).min(b.len())
        };
        &b[HEADER_LEN..end]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Sets version 6, traffic class and flow label.
    pub fn set_ver_tc_flow(&mut self, traffic_class: u8, flow_label: u32) {
        let w = (u32::from(VERSION) << 28)
            | (u32::from(traffic_class) << 20)
            | (flow_label & 0x000f_ffff);
        self.buffer.as_mut()[field::VER_TC_FLOW].copy_from_slice(&w.to_be_bytes());
    }
    /// Sets the payload length.
    pub fn set_payload_len(&mut self, v: u16) {
        self.buffer.as_mut()[field::LENGTH].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the next header.
    pub fn set_next_header(&mut self, p: IpProtocol) {
        self.buffer.as_mut()[field::NXT_HDR] = p.into();
    }
    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, v: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = v;
    }
    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&a.octets());
    }
    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&a.octets());
    }
}

/// A parsed IPv6 fixed header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    pub src_addr: Ipv6Addr,
    pub dst_addr: Ipv6Addr,
    pub next_header: IpProtocol,
    /// Payload length, extension headers included.
    pub payload_len: u16,
    pub hop_limit: u8,
    pub traffic_class: u8,
    /// Flow label, 20 bits.
    pub flow_label: u32,
}

impl Ipv6Repr {
    /// Reads a checked header.
    pub fn parse<T: AsRef<[u8]>>(p: &Ipv6Packet<T>) -> Result<Ipv6Repr> {
        p.check_len()?;
        Ok(Ipv6Repr {
            src_addr: p.src_addr(),
            dst_addr: p.dst_addr(),
            next_header: p.next_header(),
            payload_len: p.payload_len(),
            hop_limit: p.hop_limit(),
            traffic_class: p.traffic_class(),
            flow_label: p.flow_label(),
        })
    }

    /// Bytes [`emit`](Self::emit) writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header at the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        need(Layer::Ipv6, buf, HEADER_LEN)?;
        let mut p = Ipv6Packet::new_unchecked(buf);
        p.set_ver_tc_flow(self.traffic_class, self.flow_label);
        p.set_payload_len(self.payload_len);
        p.set_next_header(self.next_header);
        p.set_hop_limit(self.hop_limit);
        p.set_src_addr(self.src_addr);
        p.set_dst_addr(self.dst_addr);
        Ok(())
    }
}

impl fmt::Display for Ipv6Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "IP6 {} > {}: next {} hlim {} len {}",
            self.src_addr, self.dst_addr, self.next_header, self.hop_limit, self.payload_len
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // UDP to ::1 port 5354 captured with tcpdump on Linux loopback (ours);
    // flow label 0xb5cf6, payload length 18, hop limit 64.
    const LO_UDP6: [u8; 40] = [
        0x60, 0x0b, 0x5c, 0xf6, 0x00, 0x12, 0x11, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
    ];

    #[test]
    fn parse_loopback_capture() {
        let p = Ipv6Packet::new_checked(&LO_UDP6[..]).unwrap();
        let r = Ipv6Repr::parse(&p).unwrap();
        assert_eq!(
            (r.flow_label, r.traffic_class, r.payload_len),
            (0xb5cf6, 0, 18)
        );
        assert_eq!((r.next_header, r.hop_limit), (IpProtocol::Udp, 64));
        assert_eq!(r.src_addr, Ipv6Addr::LOCALHOST);
        let mut b = [0u8; 40];
        r.emit(&mut b).unwrap();
        assert_eq!(b, LO_UDP6);
        assert_eq!(r.to_string(), "IP6 ::1 > ::1: next udp hlim 64 len 18");
    }

    #[test]
    fn wrong_version() {
        let mut b = LO_UDP6;
        b[0] = 0x45;
        assert_eq!(
            Ipv6Packet::new_checked(&b[..]).unwrap_err().kind,
            ErrorKind::BadVersion { found: 4 }
        );
        assert_eq!(
            Ipv6Packet::new_checked(&b[..39]).unwrap_err().to_string(),
            "ipv6 header truncated at offset 0: 40 bytes needed, 39 there"
        );
    }
}
