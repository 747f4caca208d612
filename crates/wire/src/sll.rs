//! Linux "cooked" capture headers, written by libpcap for `-i any` and for
//! devices without a link header.
//!
//! Version 1: <https://www.tcpdump.org/linktypes/LINKTYPE_LINUX_SLL.html> (16 bytes).
//! Version 2: <https://www.tcpdump.org/linktypes/LINKTYPE_LINUX_SLL2.html> (20 bytes).
//! In both, the protocol field holds an EtherType for the link types kansoku
//! meets (ARPHRD_ETHER, ARPHRD_LOOPBACK, tunnels); other values stay `Unknown`.

use crate::error::{need, Layer, Result};
use crate::ethernet::EtherType;
use core::fmt;

/// Field offsets within an SLL (v1) header.
pub mod field {
    use core::ops::Range;
    pub const PACKET_TYPE: Range<usize> = 0..2;
    pub const ARPHRD: Range<usize> = 2..4;
    pub const ADDR_LEN: Range<usize> = 4..6;
    pub const ADDR: Range<usize> = 6..14;
    pub const PROTOCOL: Range<usize> = 14..16;
}

/// Field offsets within an SLL2 header.
pub mod field2 {
    use core::ops::Range;
    pub const PROTOCOL: Range<usize> = 0..2;
    pub const RESERVED: Range<usize> = 2..4;
    pub const IFINDEX: Range<usize> = 4..8;
    pub const ARPHRD: Range<usize> = 8..10;
    pub const PACKET_TYPE: usize = 10;
    pub const ADDR_LEN: usize = 11;
    pub const ADDR: Range<usize> = 12..20;
}

/// Length of an SLL (v1) header.
pub const HEADER_LEN: usize = 16;
/// Length of an SLL2 header.
pub const SLL2_HEADER_LEN: usize = 20;

#[inline]
fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

/// A zero-copy view of a Linux cooked capture v1 header.
#[derive(Debug, Clone, Copy)]
pub struct SllHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> SllHeader<T> {
    /// Wraps a buffer without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        SllHeader { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let h = Self::new_unchecked(buffer);
        h.check_len()?;
        Ok(h)
    }

    /// Checks that the 16-byte header is there.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        need(Layer::Sll, self.buffer.as_ref(), HEADER_LEN)
    }

    /// Packet type (0 to us, 1 broadcast, 2 multicast, 3 to someone else, 4 sent by us).
    #[inline]
    pub fn packet_type(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::PACKET_TYPE])
    }

    /// The ARPHRD_ device type.
    #[inline]
    pub fn arphrd(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::ARPHRD])
    }

    /// Link-layer address length as recorded (may exceed the 8 bytes kept).
    #[inline]
    pub fn addr_len(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::ADDR_LEN])
    }

    /// The 8-byte link-layer address field (only `addr_len` bytes are meaningful).
    #[inline]
    pub fn addr(&self) -> [u8; 8] {
        let mut a = [0; 8];
        a.copy_from_slice(&self.buffer.as_ref()[field::ADDR]);
        a
    }

    /// Protocol type (an EtherType here).
    #[inline]
    pub fn protocol(&self) -> EtherType {
        EtherType::from(be16(&self.buffer.as_ref()[field::PROTOCOL]))
    }

    /// Everything after the header.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> SllHeader<T> {
    /// Sets the packet type.
    pub fn set_packet_type(&mut self, v: u16) {
        self.buffer.as_mut()[field::PACKET_TYPE].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the ARPHRD_ type.
    pub fn set_arphrd(&mut self, v: u16) {
        self.buffer.as_mut()[field::ARPHRD].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the address length.
    pub fn set_addr_len(&mut self, v: u16) {
        self.buffer.as_mut()[field::ADDR_LEN].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the 8-byte address field.
    pub fn set_addr(&mut self, a: [u8; 8]) {
        self.buffer.as_mut()[field::ADDR].copy_from_slice(&a);
    }
    /// Sets the protocol type.
    pub fn set_protocol(&mut self, t: EtherType) {
        self.buffer.as_mut()[field::PROTOCOL].copy_from_slice(&u16::from(t).to_be_bytes());
    }
}

/// A parsed SLL (v1) header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SllRepr {
    pub packet_type: u16,
    pub arphrd: u16,
    pub addr_len: u16,
    pub addr: [u8; 8],
    pub protocol: EtherType,
}

impl SllRepr {
    /// Reads a checked header.
    pub fn parse<T: AsRef<[u8]>>(h: &SllHeader<T>) -> Result<SllRepr> {
        h.check_len()?;
        Ok(SllRepr {
            packet_type: h.packet_type(),
            arphrd: h.arphrd(),
            addr_len: h.addr_len(),
            addr: h.addr(),
            protocol: h.protocol(),
        })
    }

    /// Bytes [`emit`](Self::emit) writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header at the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        need(Layer::Sll, buf, HEADER_LEN)?;
        let mut h = SllHeader::new_unchecked(buf);
        h.set_packet_type(self.packet_type);
        h.set_arphrd(self.arphrd);
        h.set_addr_len(self.addr_len);
        h.set_addr(self.addr);
        h.set_protocol(self.protocol);
        Ok(())
    }
}

impl fmt::Display for SllRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "sll pkttype {} arphrd {} type {}",
            self.packet_type, self.arphrd, self.protocol
        )
    }
}

/// A zero-copy view of a Linux cooked capture v2 header.
#[derive(Debug, Clone, Copy)]
pub struct Sll2Header<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Sll2Header<T> {
    /// Wraps a buffer without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        Sll2Header { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let h = Self::new_unchecked(buffer);
        h.check_len()?;
        Ok(h)
    }

    /// Checks that the 20-byte header is there.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        need(Layer::Sll2, self.buffer.as_ref(), SLL2_HEADER_LEN)
    }

    /// Protocol type (an EtherType here).
    #[inline]
    pub fn protocol(&self) -> EtherType {
        EtherType::from(be16(&self.buffer.as_ref()[field2::PROTOCOL]))
    }

    /// Interface index the packet was seen on.
    #[inline]
    pub fn ifindex(&self) -> u32 {
        let b = &self.buffer.as_ref()[field2::IFINDEX];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// The ARPHRD_ device type.
    #[inline]
    pub fn arphrd(&self) -> u16 {
        be16(&self.buffer.as_ref()[field2::ARPHRD])
    }

    /// Packet type, as in v1.
    #[inline]
    pub fn packet_type(&self) -> u8 {
        self.buffer.as_ref()[field2::PACKET_TYPE]
    }

    /// Link-layer address length as recorded.
    #[inline]
    pub fn addr_len(&self) -> u8 {
        self.buffer.as_ref()[field2::ADDR_LEN]
    }

    /// The 8-byte link-layer address field.
    #[inline]
    pub fn addr(&self) -> [u8; 8] {
        let mut a = [0; 8];
        a.copy_from_slice(&self.buffer.as_ref()[field2::ADDR]);
        a
    }

    /// Everything after the header.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[SLL2_HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Sll2Header<T> {
    /// Sets the protocol type and clears the reserved field.
    pub fn set_protocol(&mut self, t: EtherType) {
        let b = self.buffer.as_mut();
        b[field2::PROTOCOL].copy_from_slice(&u16::from(t).to_be_bytes());
        b[field2::RESERVED].copy_from_slice(&[0, 0]);
    }
    /// Sets the interface index.
    pub fn set_ifindex(&mut self, v: u32) {
        self.buffer.as_mut()[field2::IFINDEX].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the ARPHRD_ type.
    pub fn set_arphrd(&mut self, v: u16) {
        self.buffer.as_mut()[field2::ARPHRD].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the packet type.
    pub fn set_packet_type(&mut self, v: u8) {
        self.buffer.as_mut()[field2::PACKET_TYPE] = v;
    }
    /// Sets the address length.
    pub fn set_addr_len(&mut self, v: u8) {
        self.buffer.as_mut()[field2::ADDR_LEN] = v;
    }
    /// Sets the 8-byte address field.
    pub fn set_addr(&mut self, a: [u8; 8]) {
        self.buffer.as_mut()[field2::ADDR].copy_from_slice(&a);
    }
}

/// A parsed SLL2 header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sll2Repr {
    pub protocol: EtherType,
    pub ifindex: u32,
    pub arphrd: u16,
    pub packet_type: u8,
    pub addr_len: u8,
    pub addr: [u8; 8],
}

impl Sll2Repr {
    /// Reads a checked header.
    pub fn parse<T: AsRef<[u8]>>(h: &Sll2Header<T>) -> Result<Sll2Repr> {
        h.check_len()?;
        Ok(Sll2Repr {
            protocol: h.protocol(),
            ifindex: h.ifindex(),
            arphrd: h.arphrd(),
            packet_type: h.packet_type(),
            addr_len: h.addr_len(),
            addr: h.addr(),
        })
    }

    /// Bytes [`emit`](Self::emit) writes.
    pub const fn buffer_len(&self) -> usize {
        SLL2_HEADER_LEN
    }

    /// Writes the header at the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        need(Layer::Sll2, buf, SLL2_HEADER_LEN)?;
        let mut h = Sll2Header::new_unchecked(buf);
        h.set_protocol(self.protocol);
        h.set_ifindex(self.ifindex);
        h.set_arphrd(self.arphrd);
        h.set_packet_type(self.packet_type);
        h.set_addr_len(self.addr_len);
        h.set_addr(self.addr);
        Ok(())
    }
}

impl fmt::Display for Sll2Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "sll2 ifindex {} pkttype {} arphrd {} type {}",
            self.ifindex, self.packet_type, self.arphrd, self.protocol
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Hand-decoded from a `tcpdump -i any` capture on Linux (libpcap < 1.10
    // writes SLL v1): an outgoing (type 4) frame on an Ethernet device with
    // MAC 52:54:00:12:34:56, carrying IPv4.
    const SLL: [u8; 16] = [
        0, 4, 0, 1, 0, 6, 0x52, 0x54, 0, 0x12, 0x34, 0x56, 0, 0, 0x08, 0x00,
    ];
    // The same packet as libpcap >= 1.10 writes it in SLL2 on interface 2.
    const SLL2: [u8; 20] = [
        8, 0, 0, 0, 0, 0, 0, 2, 0, 1, 4, 6, 0x52, 0x54, 0, 0x12, 0x34, 0x56, 0, 0,
    ];

    #[test]
    fn parse_v1() {
        let r = SllRepr::parse(&SllHeader::new_checked(&SLL[..]).unwrap()).unwrap();
        assert_eq!(
            (r.packet_type, r.arphrd, r.addr_len, r.protocol),
            (4, 1, 6, EtherType::Ipv4)
        );
        assert_eq!(&r.addr[..6], &[0x52, 0x54, 0, 0x12, 0x34, 0x56]);
        let mut b = [0u8; 16];
        r.emit(&mut b).unwrap();
        assert_eq!(b, SLL);
    }

    #[test]
    fn parse_v2() {
        let r = Sll2Repr::parse(&Sll2Header::new_checked(&SLL2[..]).unwrap()).unwrap();
        assert_eq!(
            (r.protocol, r.ifindex, r.arphrd, r.packet_type, r.addr_len),
            (EtherType::Ipv4, 2, 1, 4, 6)
        );
        let mut b = [0u8; 20];
        r.emit(&mut b).unwrap();
        assert_eq!(b, SLL2);
        assert_eq!(r.to_string(), "sll2 ifindex 2 pkttype 4 arphrd 1 type ipv4");
    }

    #[test]
    fn truncated() {
        let e = Sll2Header::new_checked(&SLL2[..19]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "sll2 header truncated at offset 0: 20 bytes needed, 19 there"
        );
    }
}
