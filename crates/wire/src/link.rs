//! Link-layer header types: the LINKTYPE_* registry shared by pcap and pcapng
//! (<https://www.tcpdump.org/linktypes.html>, draft-ietf-opsawg-pcaplinktype).

use core::fmt;

/// A link-layer header type as stored in a pcap file header or a pcapng
/// Interface Description Block.
///
/// Only the types kansoku slices are named; every other value is kept as
/// `Unknown(n)` so that it survives a round trip through any reader and writer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinkType {
    /// LINKTYPE_NULL (0): BSD loopback, a 4-byte host-order address family.
    Null,
    /// LINKTYPE_ETHERNET (1): Ethernet II / IEEE 802.3.
    Ethernet,
    /// LINKTYPE_RAW (101): a raw IPv4 or IPv6 packet, the version nibble tells which.
    Raw,
    /// LINKTYPE_LINUX_SLL (113): Linux "cooked" capture, version 1.
    LinuxSll,
    /// LINKTYPE_IPV4 (228): a raw IPv4 packet.
    Ipv4,
    /// LINKTYPE_IPV6 (229): a raw IPv6 packet.
    Ipv6,
    /// LINKTYPE_LINUX_SLL2 (276): Linux "cooked" capture, version 2.
    LinuxSll2,
    /// Any other registry value.
    Unknown(u16),
}

impl LinkType {
    /// The registry number.
    pub const fn code(self) -> u16 {
        match self {
            LinkType::Null => 0,
            LinkType::Ethernet => 1,
            LinkType::Raw => 101,
            LinkType::LinuxSll => 113,
            LinkType::Ipv4 => 228,
            LinkType::Ipv6 => 229,
            LinkType::LinuxSll2 => 276,
            LinkType::Unknown(n) => n,
        }
    }

    /// The link type for a registry number.
    pub const fn from_code(code: u16) -> LinkType {
        match code {
            0 => LinkType::Null,
            1 => LinkType::Ethernet,
            101 => LinkType::Raw,
            113 => LinkType::LinuxSll,
            228 => LinkType::Ipv4,
            229 => LinkType::Ipv6,
            276 => LinkType::LinuxSll2,
            n => LinkType::Unknown(n),
        }
    }
}

impl From<u16> for LinkType {
    fn from(code: u16) -> Self {
        LinkType::from_code(code)
    }
}

impl From<LinkType> for u16 {
    fn from(lt: LinkType) -> Self {
        lt.code()
    }
}

impl fmt::Display for LinkType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkType::Null => f.write_str("NULL"),
            LinkType::Ethernet => f.write_str("EN10MB"),
            LinkType::Raw => f.write_str("RAW"),
            LinkType::LinuxSll => f.write_str("LINUX_SLL"),
            LinkType::Ipv4 => f.write_str("IPV4"),
            LinkType::Ipv6 => f.write_str("IPV6"),
            LinkType::LinuxSll2 => f.write_str("LINUX_SLL2"),
            LinkType::Unknown(n) => write!(f, "LINKTYPE_{n}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for code in 0..=u16::MAX {
            assert_eq!(LinkType::from_code(code).code(), code);
        }
    }
}
