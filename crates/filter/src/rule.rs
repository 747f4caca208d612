//! The rule model: one filter pattern of the paper's §3.2,
//! `ip filter n type sip dip proto spt dpt`, and the reference meaning of
//! "a packet matches a pattern" that every engine must reproduce.

use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::key::PacketKey;

/// What happens to a packet that matches: the paper's `type` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    Pass,
    Reject,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Action::Pass => "pass",
            Action::Reject => "reject",
        })
    }
}

/// An address pattern: `*`, an address, or an address with a prefix length.
/// The address is stored with its host bits cleared, so that matching is the
/// paper's `(IP & mask) == pattern` (Fig. 2, conditions (1) and (2)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AddrMatch {
    Any,
    V4 { addr: u32, len: u8 },
    V6 { addr: u128, len: u8 },
}

/// The mask of an IPv4 prefix of `len` bits (0–32).
pub(crate) fn mask32(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len.min(32)))
    }
}

/// The mask of an IPv6 prefix of `len` bits (0–128).
pub(crate) fn mask128(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len.min(128)))
    }
}

impl AddrMatch {
    /// An IPv4 prefix; host bits are cleared.
    pub fn v4(addr: Ipv4Addr, len: u8) -> AddrMatch {
        let len = len.min(32);
        AddrMatch::V4 {
            addr: u32::from(addr) & mask32(len),
            len,
        }
    }

    /// An IPv6 prefix; host bits are cleared.
    pub fn v6(addr: Ipv6Addr, len: u8) -> AddrMatch {
        let len = len.min(128);
        AddrMatch::V6 {
            addr: u128::from(addr) & mask128(len),
            len,
        }
    }

    /// Whether `ip` is inside the pattern. An IPv4 pattern never matches an
    /// IPv6 address and the other way round; `*` matches both.
    pub fn matches(&self, ip: IpAddr) -> bool {
        match (*self, ip) {
            (AddrMatch::Any, _) => true,
            (AddrMatch::V4 { addr, len }, IpAddr::V4(a)) => u32::from(a) & mask32(len) == addr,
            (AddrMatch::V6 { addr, len }, IpAddr::V6(a)) => u128::from(a) & mask128(len) == addr,
            _ => false,
        }
    }
}

impl fmt::Display for AddrMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            AddrMatch::Any => f.write_str("*"),
            AddrMatch::V4 { addr, len: 32 } => write!(f, "{}", Ipv4Addr::from(addr)),
            AddrMatch::V4 { addr, len } => write!(f, "{}/{len}", Ipv4Addr::from(addr)),
            AddrMatch::V6 { addr, len: 128 } => write!(f, "{}", Ipv6Addr::from(addr)),
            AddrMatch::V6 { addr, len } => write!(f, "{}/{len}", Ipv6Addr::from(addr)),
        }
    }
}

/// A protocol pattern: the paper's `*`, `tcp`, `udp`, `established`, and
/// the extension: any protocol number (`icmp` is 1, `icmp6` is 58).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProtoMatch {
    Any,
    Tcp,
    Udp,
    /// TCP with ACK or RST set: a segment of an established connection
    /// (the paper's §3.2 "checks the ack and rst bits").
    Established,
    Number(u8),
}

/// IP protocol numbers.
pub const PROTO_ICMP: u8 = 1;
pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;
pub const PROTO_ICMPV6: u8 = 58;

impl ProtoMatch {
    /// Whether a packet of protocol `proto` with TCP flags `established`
    /// (ACK or RST set) matches.
    pub fn matches(&self, proto: u8, established: bool) -> bool {
        match *self {
            ProtoMatch::Any => true,
            ProtoMatch::Tcp => proto == PROTO_TCP,
            ProtoMatch::Udp => proto == PROTO_UDP,
            ProtoMatch::Established => proto == PROTO_TCP && established,
            ProtoMatch::Number(n) => proto == n,
        }
    }

    /// Whether port patterns make sense: the protocol is TCP or UDP.
    pub fn has_ports(&self) -> bool {
        match *self {
            ProtoMatch::Tcp | ProtoMatch::Udp | ProtoMatch::Established => true,
            ProtoMatch::Number(n) => n == PROTO_TCP || n == PROTO_UDP,
            ProtoMatch::Any => false,
        }
    }
}

impl fmt::Display for ProtoMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ProtoMatch::Any => f.write_str("*"),
            ProtoMatch::Tcp => f.write_str("tcp"),
            ProtoMatch::Udp => f.write_str("udp"),
            ProtoMatch::Established => f.write_str("established"),
            ProtoMatch::Number(PROTO_ICMP) => f.write_str("icmp"),
            ProtoMatch::Number(PROTO_ICMPV6) => f.write_str("icmp6"),
            ProtoMatch::Number(n) => write!(f, "{n}"),
        }
    }
}

/// An inclusive port range; `*` is 0–65535.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PortRange {
    pub lo: u16,
    pub hi: u16,
}

impl PortRange {
    pub const ANY: PortRange = PortRange {
        lo: 0,
        hi: u16::MAX,
    };

    pub fn is_any(&self) -> bool {
        *self == PortRange::ANY
    }

    pub fn contains(&self, port: u16) -> bool {
        self.lo <= port && port <= self.hi
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_any() {
            f.write_str("*")
        } else if self.lo == self.hi {
            write!(f, "{}", self.lo)
        } else {
            write!(f, "{}-{}", self.lo, self.hi)
        }
    }
}

/// One filter pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Rule {
    /// The paper's `n` (rules are evaluated in ascending `n`), or the 0-based
    /// line index of a ClassBench rule.
    pub id: u32,
    pub action: Action,
    pub src: AddrMatch,
    pub dst: AddrMatch,
    pub proto: ProtoMatch,
    pub src_port: PortRange,
    pub dst_port: PortRange,
    /// The 1-based line of the rule in its file, for messages.
    pub line: usize,
}

impl Rule {
    /// The reference meaning of a match, written as plainly as the paper's
    /// Fig. 2: every field must agree. Ports are compared with the key's
    /// ports, which are 0 for packets of protocols without ports.
    pub fn matches(&self, key: &PacketKey) -> bool {
        self.src.matches(key.src)
            && self.dst.matches(key.dst)
            && self.proto.matches(key.protocol, key.established())
            && self.src_port.contains(key.src_port)
            && self.dst_port.contains(key.dst_port)
    }
}

/// `ip filter N pass SIP DIP PROTO SPT DPT`, the paper's syntax.
impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ip filter {} {} {} {} {} {} {}",
            self.id, self.action, self.src, self.dst, self.proto, self.src_port, self.dst_port
        )
    }
}
