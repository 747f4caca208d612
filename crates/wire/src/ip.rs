//! The IP protocol number registry (IANA "Assigned Internet Protocol Numbers",
//! <https://www.iana.org/assignments/protocol-numbers>), shared by the IPv4
//! Protocol field and the IPv6 Next Header field.

use core::fmt;
use core::ops::Range;

/// An IP protocol / IPv6 next-header number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IpProtocol {
    /// 0: IPv6 hop-by-hop options.
    HopByHop,
    /// 1: ICMP.
    Icmp,
    /// 4: IPv4 in IP (RFC 2003), a tunnel's inner packet.
    Ipv4,
    /// 6: TCP.
    Tcp,
    /// 17: UDP.
    Udp,
    /// 41: IPv6 in IP (RFC 2473), a tunnel's inner packet.
    Ipv6,
    /// 43: IPv6 routing header.
    Ipv6Route,
    /// 44: IPv6 fragment header.
    Ipv6Frag,
    /// 50: Encapsulating Security Payload.
    Esp,
    /// 51: Authentication Header.
    Ah,
    /// 58: ICMPv6.
    Icmpv6,
    /// 59: no next header.
    Ipv6NoNxt,
    /// 60: IPv6 destination options.
    Ipv6Opts,
    /// 132: SCTP.
    Sctp,
    /// Any other number.
    Unknown(u8),
}

impl From<u8> for IpProtocol {
    #[inline]
    fn from(n: u8) -> Self {
        IpProtocol::from_number(n)
    }
}

impl From<IpProtocol> for u8 {
    #[inline]
    fn from(p: IpProtocol) -> u8 {
        p.number()
    }
}

impl IpProtocol {
    /// The registry number.
    #[inline]
    pub const fn number(self) -> u8 {
        match self {
            IpProtocol::HopByHop => 0,
            IpProtocol::Icmp => 1,
            IpProtocol::Ipv4 => 4,
            IpProtocol::Tcp => 6,
            IpProtocol::Udp => 17,
            IpProtocol::Ipv6 => 41,
            IpProtocol::Ipv6Route => 43,
            IpProtocol::Ipv6Frag => 44,
            IpProtocol::Esp => 50,
            IpProtocol::Ah => 51,
            IpProtocol::Icmpv6 => 58,
            IpProtocol::Ipv6NoNxt => 59,
            IpProtocol::Ipv6Opts => 60,
            IpProtocol::Sctp => 132,
            IpProtocol::Unknown(n) => n,
        }
    }

    /// The protocol for a registry number.
    #[inline]
    pub const fn from_number(n: u8) -> IpProtocol {
        match n {
            0 => IpProtocol::HopByHop,
            1 => IpProtocol::Icmp,
            4 => IpProtocol::Ipv4,
            6 => IpProtocol::Tcp,
            17 => IpProtocol::Udp,
            41 => IpProtocol::Ipv6,
            43 => IpProtocol::Ipv6Route,
            44 => IpProtocol::Ipv6Frag,
            50 => IpProtocol::Esp,
            51 => IpProtocol::Ah,
            58 => IpProtocol::Icmpv6,
            59 => IpProtocol::Ipv6NoNxt,
            60 => IpProtocol::Ipv6Opts,
            132 => IpProtocol::Sctp,
            n => IpProtocol::Unknown(n),
        }
    }

    /// Whether the protocol carries 16-bit source and destination ports in its
    /// first four bytes (TCP and UDP; [`PORTS`] is where).
    #[inline]
    pub const fn has_ports(self) -> bool {
        matches!(self, IpProtocol::Tcp | IpProtocol::Udp)
    }
}

/// Where TCP (RFC 9293 §3.1) and UDP (RFC 768) keep their source and
/// destination ports: the first four bytes, in that order.
pub const PORTS: Range<usize> = 0..4;

// The TCP and UDP views agree with [`PORTS`].
const _: () = {
    use crate::{tcp, udp};
    assert!(tcp::field::SRC_PORT.start == PORTS.start && tcp::field::DST_PORT.end == PORTS.end);
    assert!(udp::field::SRC_PORT.start == PORTS.start && udp::field::DST_PORT.end == PORTS.end);
    assert!(tcp::field::SRC_PORT.end == tcp::field::DST_PORT.start);
    assert!(udp::field::SRC_PORT.end == udp::field::DST_PORT.start);
};

/// The bytes [`version`] needs: the first.
pub const VERSION_LEN: usize = 1;

/// The IP version of a packet: the high nibble of its first byte, where IPv4
/// (RFC 791 §3.1, [`crate::ipv4::VERSION`]) and IPv6 (RFC 8200 §3,
/// [`crate::ipv6::VERSION`]) both keep it.
#[inline]
pub const fn version(first_byte: u8) -> u8 {
    first_byte >> 4
}

/// Lower-case names as tcpdump and the filter rules write them; every other
/// protocol prints as its number.
impl fmt::Display for IpProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpProtocol::Tcp => f.write_str("tcp"),
            IpProtocol::Udp => f.write_str("udp"),
            IpProtocol::Icmp => f.write_str("icmp"),
            IpProtocol::Icmpv6 => f.write_str("icmp6"),
            IpProtocol::Esp => f.write_str("esp"),
            IpProtocol::Ah => f.write_str("ah"),
            other => write!(f, "{}", u8::from(*other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip_and_display() {
        for n in 0..=255u8 {
            assert_eq!(u8::from(IpProtocol::from(n)), n);
        }
        assert_eq!(IpProtocol::from(6).to_string(), "tcp");
        assert_eq!(IpProtocol::from(58).to_string(), "icmp6");
        assert_eq!(IpProtocol::from(47).to_string(), "47");
        assert_eq!(IpProtocol::from(43).to_string(), "43");
        for n in 0..=255u8 {
            let p = IpProtocol::from_number(n);
            assert_eq!((p.number(), IpProtocol::from(n)), (n, p));
            assert_eq!(p.has_ports(), n == 6 || n == 17);
        }
    }
}
