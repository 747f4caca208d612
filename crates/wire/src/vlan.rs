//! IEEE 802.1Q VLAN tags (IEEE 802.1Q-2018 §9.6), also used stacked as
//! 802.1ad "QinQ" with TPID 0x88a8 for the outer (service) tag, or the
//! pre-standard 0x9100 ([`EtherType::is_vlan_tpid`] names all three).
//!
//! In a frame the tag's TPID sits where the EtherType would be; the 4 bytes
//! viewed here are what follows it: the Tag Control Information (PCP, DEI,
//! VID) and the EtherType of what comes next.

use crate::error::{need, Layer, Result};
use crate::ethernet::EtherType;
use core::fmt;

/// Field offsets within the tag body (after the TPID).
pub mod field {
    use core::ops::Range;
    pub const TCI: Range<usize> = 0..2;
    pub const ETHERTYPE: Range<usize> = 2..4;
}

/// Length of the tag body that follows a TPID.
pub const HEADER_LEN: usize = 4;

/// The most tags [`crate::slice`] records; deeper stacks are an error.
pub const MAX_TAGS: usize = 8;

/// A zero-copy view of a VLAN tag body (TCI + inner EtherType).
#[derive(Debug, Clone, Copy)]
pub struct VlanTag<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VlanTag<T> {
    /// Wraps a buffer without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        VlanTag { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let t = Self::new_unchecked(buffer);
        t.check_len()?;
        Ok(t)
    }

    /// Checks that the buffer holds the 4-byte tag body.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        need(Layer::Vlan, self.buffer.as_ref(), HEADER_LEN)
    }

    #[inline]
    fn tci(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::TCI];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Priority Code Point (3 bits).
    #[inline]
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }

    /// Drop Eligible Indicator.
    #[inline]
    pub fn dei(&self) -> bool {
        self.tci() & 0x1000 != 0
    }

    /// VLAN identifier (12 bits).
    #[inline]
    pub fn vid(&self) -> u16 {
        self.tci() & 0x0fff
    }

    /// EtherType of what follows the tag.
    #[inline]
    pub fn ethertype(&self) -> EtherType {
        let b = &self.buffer.as_ref()[field::ETHERTYPE];
        EtherType::from(u16::from_be_bytes([b[0], b[1]]))
    }

    /// Everything after the tag.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VlanTag<T> {
    /// Sets PCP, DEI and VID at once (VID is masked to 12 bits, PCP to 3).
    pub fn set_tci(&mut self, pcp: u8, dei: bool, vid: u16) {
        let tci = (u16::from(pcp & 7) << 13) | (u16::from(dei) << 12) | (vid & 0x0fff);
        self.buffer.as_mut()[field::TCI].copy_from_slice(&tci.to_be_bytes());
    }

    /// Sets the inner EtherType.
    pub fn set_ethertype(&mut self, t: EtherType) {
        self.buffer.as_mut()[field::ETHERTYPE].copy_from_slice(&u16::from(t).to_be_bytes());
    }
}

/// A parsed VLAN tag body.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VlanRepr {
    /// Priority Code Point, 0..=7.
    pub pcp: u8,
    /// Drop Eligible Indicator.
    pub dei: bool,
    /// VLAN id, 0..=4095.
    pub vid: u16,
    /// EtherType of what follows.
    pub ethertype: EtherType,
}

impl VlanRepr {
    /// Reads a checked tag.
    pub fn parse<T: AsRef<[u8]>>(tag: &VlanTag<T>) -> Result<VlanRepr> {
        tag.check_len()?;
        Ok(VlanRepr {
            pcp: tag.pcp(),
            dei: tag.dei(),
            vid: tag.vid(),
            ethertype: tag.ethertype(),
        })
    }

    /// Bytes [`emit`](Self::emit) writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the tag body at the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        need(Layer::Vlan, buf, HEADER_LEN)?;
        let mut t = VlanTag::new_unchecked(buf);
        t.set_tci(self.pcp, self.dei, self.vid);
        t.set_ethertype(self.ethertype);
        Ok(())
    }
}

impl fmt::Display for VlanRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "vlan {}, p {}{}, type {}",
            self.vid,
            self.pcp,
            if self.dei { ", dei" } else { "" },
            self.ethertype
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Hand-decoded from Wireshark's sample capture "vlan.cap" (first frame):
    // TPID 8100, TCI 0x0020 = priority 0, VLAN 32, then EtherType 0x0800.
    const TAG: [u8; 4] = [0x00, 0x20, 0x08, 0x00];

    #[test]
    fn parse_tag() {
        let r = VlanRepr::parse(&VlanTag::new_checked(&TAG[..]).unwrap()).unwrap();
        assert_eq!(
            r,
            VlanRepr {
                pcp: 0,
                dei: false,
                vid: 32,
                ethertype: EtherType::Ipv4
            }
        );
        assert_eq!(r.to_string(), "vlan 32, p 0, type ipv4");
    }

    #[test]
    fn emit_all_fields() {
        let r = VlanRepr {
            pcp: 5,
            dei: true,
            vid: 0xabc,
            ethertype: EtherType::Ipv6,
        };
        let mut b = [0u8; 4];
        r.emit(&mut b).unwrap();
        assert_eq!(b, [0xba, 0xbc, 0x86, 0xdd]);
        assert_eq!(
            VlanRepr::parse(&VlanTag::new_checked(&b[..]).unwrap()).unwrap(),
            r
        );
    }
}
