//! Ethernet II frames (IEEE 802.3-2018 §3.1.1, the "Type" interpretation of the
//! Length/Type field). EtherType values: IEEE registry, as listed at
//! <https://www.iana.org/assignments/ieee-802-numbers>.

use crate::error::{need, Layer, Result};
use core::fmt;

/// Field offsets within the header.
pub mod field {
    use core::ops::Range;
    pub const DESTINATION: Range<usize> = 0..6;
    pub const SOURCE: Range<usize> = 6..12;
    pub const ETHERTYPE: Range<usize> = 12..14;
}

/// Length of the Ethernet II header (no FCS: captures do not carry it).
pub const HEADER_LEN: usize = 14;

/// An EtherType.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EtherType {
    /// 0x0800.
    Ipv4,
    /// 0x0806.
    Arp,
    /// 0x8100: an IEEE 802.1Q customer VLAN tag follows.
    Vlan,
    /// 0x88a8: an IEEE 802.1ad service VLAN tag (QinQ outer tag) follows.
    QinQ,
    /// 0x86dd.
    Ipv6,
    /// 0x9100: the pre-standard QinQ TPID that some switches still send for
    /// the outer tag (not in the IEEE registry; Linux's `ETH_P_QINQ1`,
    /// tcpdump's "802.1Q-9100"). A VLAN tag follows, as after 0x8100.
    QinQLegacy,
    /// Any other value (including 802.3 length values below 0x0600).
    Unknown(u16),
}

impl EtherType {
    /// The registry value.
    #[inline]
    pub const fn code(self) -> u16 {
        match self {
            EtherType::Ipv4 => 0x0800,
            EtherType::Arp => 0x0806,
            EtherType::Vlan => 0x8100,
            EtherType::QinQ => 0x88a8,
            EtherType::Ipv6 => 0x86dd,
            EtherType::QinQLegacy => 0x9100,
            EtherType::Unknown(v) => v,
        }
    }

    /// The EtherType for a registry value.
    #[inline]
    pub const fn from_code(v: u16) -> EtherType {
        match v {
            0x0800 => EtherType::Ipv4,
            0x0806 => EtherType::Arp,
            0x8100 => EtherType::Vlan,
            0x88a8 => EtherType::QinQ,
            0x86dd => EtherType::Ipv6,
            0x9100 => EtherType::QinQLegacy,
            v => EtherType::Unknown(v),
        }
    }

    /// Whether a VLAN tag ([`crate::vlan`]) follows: 802.1Q, 802.1ad, or the
    /// pre-standard 0x9100.
    #[inline]
    pub const fn is_vlan_tpid(self) -> bool {
        matches!(
            self,
            EtherType::Vlan | EtherType::QinQ | EtherType::QinQLegacy
        )
    }
}

impl From<u16> for EtherType {
    #[inline]
    fn from(v: u16) -> Self {
        EtherType::from_code(v)
    }
}

impl From<EtherType> for u16 {
    #[inline]
    fn from(t: EtherType) -> u16 {
        t.code()
    }
}

impl fmt::Display for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EtherType::Ipv4 => f.write_str("ipv4"),
            EtherType::Arp => f.write_str("arp"),
            EtherType::Vlan => f.write_str("802.1q"),
            EtherType::QinQ => f.write_str("802.1ad"),
            EtherType::Ipv6 => f.write_str("ipv6"),
            EtherType::QinQLegacy => f.write_str("802.1q-9100"),
            EtherType::Unknown(v) => write!(f, "0x{v:04x}"),
        }
    }
}

/// A 48-bit MAC address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct EthernetAddress(pub [u8; 6]);

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

/// A zero-copy view of an Ethernet II frame.
#[derive(Debug, Clone, Copy)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps a buffer without checking it; accessors may panic on a short one.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        EthernetFrame { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// Checks that the buffer holds the whole header; after this no accessor panics.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        need(Layer::Ethernet, self.buffer.as_ref(), HEADER_LEN)
    }

    /// Returns the wrapped buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Destination MAC address.
    #[inline]
    pub fn dst_addr(&self) -> EthernetAddress {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::DESTINATION]);
        EthernetAddress(a)
    }

    /// Source MAC address.
    #[inline]
    pub fn src_addr(&self) -> EthernetAddress {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::SOURCE]);
        EthernetAddress(a)
    }

    /// The EtherType (or 802.3 length).
    #[inline]
    pub fn ethertype(&self) -> EtherType {
        let b = &self.buffer.as_ref()[field::ETHERTYPE];
        EtherType::from(u16::from_be_bytes([b[0], b[1]]))
    }

    /// Everything after the header.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination MAC address.
    pub fn set_dst_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&a.0);
    }

    /// Sets the source MAC address.
    pub fn set_src_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&a.0);
    }

    /// Sets the EtherType.
    pub fn set_ethertype(&mut self, t: EtherType) {
        self.buffer.as_mut()[field::ETHERTYPE].copy_from_slice(&u16::from(t).to_be_bytes());
    }

    /// Everything after the header, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
}

/// A parsed Ethernet II header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    pub src_addr: EthernetAddress,
    pub dst_addr: EthernetAddress,
    pub ethertype: EtherType,
}

impl EthernetRepr {
    /// Reads the header of a checked frame.
    pub fn parse<T: AsRef<[u8]>>(frame: &EthernetFrame<T>) -> Result<EthernetRepr> {
        frame.check_len()?;
        Ok(EthernetRepr {
            src_addr: frame.src_addr(),
            dst_addr: frame.dst_addr(),
            ethertype: frame.ethertype(),
        })
    }

    /// Bytes [`emit`](Self::emit) writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header at the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        need(Layer::Ethernet, buf, HEADER_LEN)?;
        let mut f = EthernetFrame::new_unchecked(buf);
        f.set_dst_addr(self.dst_addr);
        f.set_src_addr(self.src_addr);
        f.set_ethertype(self.ethertype);
        Ok(())
    }
}

impl fmt::Display for EthernetRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ethernet {} > {} type {}",
            self.src_addr, self.dst_addr, self.ethertype
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A frame captured on Linux loopback with tcpdump (ICMP echo to
    // 127.0.0.1); loopback frames carry all-zero MAC addresses.
    const LO_ICMP: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x08, 0x00, 0x45, 0x00];

    #[test]
    fn parse_loopback_frame() {
        let f = EthernetFrame::new_checked(&LO_ICMP[..]).unwrap();
        let r = EthernetRepr::parse(&f).unwrap();
        assert_eq!(r.ethertype, EtherType::Ipv4);
        assert_eq!(r.src_addr, EthernetAddress([0; 6]));
        assert_eq!(f.payload(), &[0x45, 0x00]);
        assert_eq!(
            r.to_string(),
            "ethernet 00:00:00:00:00:00 > 00:00:00:00:00:00 type ipv4"
        );
    }

    #[test]
    fn emit_matches_bytes() {
        let r = EthernetRepr {
            dst_addr: EthernetAddress([0xff; 6]),
            src_addr: EthernetAddress([0x02, 0, 0, 0, 0, 1]),
            ethertype: EtherType::Arp,
        };
        let mut buf = [0u8; 14];
        r.emit(&mut buf).unwrap();
        assert_eq!(
            buf,
            [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x06]
        );
    }

    #[test]
    fn ethertypes_round_trip_and_name_the_tag_protocols() {
        for v in 0..=u16::MAX {
            let t = EtherType::from(v);
            assert_eq!(u16::from(t), v);
            assert_eq!((t.code(), EtherType::from_code(v)), (v, t));
            assert_eq!(t.is_vlan_tpid(), matches!(v, 0x8100 | 0x88a8 | 0x9100));
            assert_eq!(
                matches!(t, EtherType::Unknown(_)),
                t.to_string().starts_with("0x")
            );
        }
        assert_eq!(EtherType::from(0x9100), EtherType::QinQLegacy);
        assert_eq!(EtherType::QinQLegacy.to_string(), "802.1q-9100");
        assert_eq!(EtherType::from(0x9200).to_string(), "0x9200");
    }

    #[test]
    fn short_frame_is_an_error() {
        let e = EthernetFrame::new_checked(&LO_ICMP[..13]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "ethernet header truncated at offset 0: 14 bytes needed, 13 there"
        );
        assert!(EthernetRepr {
            src_addr: Default::default(),
            dst_addr: Default::default(),
            ethertype: EtherType::Ipv4
        }
        .emit(&mut [0u8; 10])
        .is_err());
    }
}
