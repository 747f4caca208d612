//! The packet key the engines classify: addresses, protocol, ports and the
//! two TCP bits that `established` looks at.

use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use wire::{Slice, TcpFlags};

/// The fields of one packet that rules look at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PacketKey {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub protocol: u8,
    /// 0 for protocols without ports (and for non-first fragments).
    pub src_port: u16,
    pub dst_port: u16,
    /// TCP flags (0 for other protocols); only ACK and RST matter.
    pub tcp_flags: u16,
}

impl PacketKey {
    /// An IPv4 key.
    pub fn v4(src: u32, dst: u32, protocol: u8, src_port: u16, dst_port: u16) -> PacketKey {
        PacketKey {
            src: IpAddr::V4(Ipv4Addr::from(src)),
            dst: IpAddr::V4(Ipv4Addr::from(dst)),
            protocol,
            src_port,
            dst_port,
            tcp_flags: 0,
        }
    }

    /// An IPv6 key.
    pub fn v6(
        src: Ipv6Addr,
        dst: Ipv6Addr,
        protocol: u8,
        src_port: u16,
        dst_port: u16,
    ) -> PacketKey {
        PacketKey {
            src: IpAddr::V6(src),
            dst: IpAddr::V6(dst),
            protocol,
            src_port,
            dst_port,
            tcp_flags: 0,
        }
    }

    /// The key of a sliced frame; `None` when it has no IP layer (or a TCP
    /// or UDP header too short for its ports).
    pub fn from_slice(s: &Slice<'_>) -> Option<PacketKey> {
        let t = s.five_tuple()?;
        Some(PacketKey {
            src: t.src,
            dst: t.dst,
            protocol: u8::from(t.protocol),
            src_port: t.src_port,
            dst_port: t.dst_port,
            tcp_flags: s.tcp_flags().map_or(0, TcpFlags::bits),
        })
    }

    /// Whether this is a TCP segment with ACK or RST set, which is what the
    /// paper's `established` means (§3.2).
    pub fn established(&self) -> bool {
        self.protocol == crate::rule::PROTO_TCP
            && self.tcp_flags & (TcpFlags::ACK.bits() | TcpFlags::RST.bits()) != 0
    }

    /// Parses `PROTO SRC[:PORT] > DST[:PORT] [flags LETTERS]`, e.g.
    /// `tcp 10.0.0.1:1234 > 10.0.0.2:25 flags A` or `udp [2001:db8::1]:53 > [2001:db8::2]:53`.
    /// Flag letters are tcpdump's: S F R P U E W, and A or `.` for ACK.
    pub fn parse(text: &str) -> Result<PacketKey, String> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let (proto, src, gt, dst, rest) = match words.as_slice() {
            [p, s, g, d, rest @ ..] => (*p, *s, *g, *d, rest),
            _ => {
                return Err(format!(
                    "expected `PROTO SRC[:PORT] > DST[:PORT] [flags LETTERS]`, found `{text}`"
                ))
            }
        };
        if gt != ">" {
            return Err(format!("expected `>` between the addresses, found `{gt}`"));
        }
        let protocol = match proto {
            "tcp" => 6,
            "udp" => 17,
            "icmp" => 1,
            "icmp6" | "icmpv6" => 58,
            n => n.parse::<u8>().map_err(|_| {
                format!("expected a protocol (tcp, udp, icmp, icmp6 or 0-255), found `{n}`")
            })?,
        };
        let (src, src_port) = parse_endpoint(src)?;
        let (dst, dst_port) = parse_endpoint(dst)?;
        let mut tcp_flags = 0u16;
        match rest {
            [] => {}
            ["flags", letters] => {
                for c in letters.chars() {
                    tcp_flags |= match c {
                        'F' => TcpFlags::FIN,
                        'S' => TcpFlags::SYN,
                        'R' => TcpFlags::RST,
                        'P' => TcpFlags::PSH,
                        'A' | '.' => TcpFlags::ACK,
                        'U' => TcpFlags::URG,
                        'E' => TcpFlags::ECE,
                        'W' => TcpFlags::CWR,
                        c => {
                            return Err(format!(
                                "expected TCP flag letters (SFRPAUEW.), found `{c}`"
                            ))
                        }
                    }
                    .bits();
                }
            }
            other => {
                return Err(format!(
                    "expected `flags LETTERS` or the end, found `{}`",
                    other.join(" ")
                ))
            }
        }
        if (src_port.is_some() || dst_port.is_some()) && protocol != 6 && protocol != 17 {
            return Err(format!("protocol `{proto}` has no ports"));
        }
        if tcp_flags != 0 && protocol != 6 {
            return Err("flags are only for tcp".to_string());
        }
        if src.is_ipv4() != dst.is_ipv4() {
            return Err("the two addresses must both be IPv4 or both IPv6".to_string());
        }
        Ok(PacketKey {
            src,
            dst,
            protocol,
            src_port: src_port.unwrap_or(0),
            dst_port: dst_port.unwrap_or(0),
            tcp_flags,
        })
    }
}

/// `a.b.c.d`, `a.b.c.d:p`, `[v6]:p` or a bare IPv6 address.
fn parse_endpoint(s: &str) -> Result<(IpAddr, Option<u16>), String> {
    let bad_port = |p: &str| format!("expected a port 0-65535, found `{p}`");
    if let Some(rest) = s.strip_prefix('[') {
        let (addr, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("expected `]` after the IPv6 address in `{s}`"))?;
        let addr: Ipv6Addr = addr
            .parse()
            .map_err(|_| format!("expected an IPv6 address, found `{addr}`"))?;
        let port = match after {
            "" => None,
            p => Some(
                p.strip_prefix(':')
                    .and_then(|p| p.parse::<u16>().ok())
                    .ok_or_else(|| bad_port(p))?,
            ),
        };
        return Ok((IpAddr::V6(addr), port));
    }
    if let Ok(a) = s.parse::<Ipv6Addr>() {
        return Ok((IpAddr::V6(a), None));
    }
    let (addr, port) = match s.split_once(':') {
        Some((a, p)) => (a, Some(p.parse::<u16>().map_err(|_| bad_port(p))?)),
        None => (s, None),
    };
    let addr: Ipv4Addr = addr
        .parse()
        .map_err(|_| format!("expected an IPv4 address or [IPv6], found `{addr}`"))?;
    Ok((IpAddr::V4(addr), port))
}

/// `tcp 10.0.0.1:1234 > 10.0.0.2:25 flags A.`: the syntax [`PacketKey::parse`] reads.
impl fmt::Display for PacketKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.protocol {
            6 => f.write_str("tcp")?,
            17 => f.write_str("udp")?,
            1 => f.write_str("icmp")?,
            58 => f.write_str("icmp6")?,
            n => write!(f, "{n}")?,
        }
        let ports = self.protocol == 6 || self.protocol == 17;
        for (i, (a, p)) in [(self.src, self.src_port), (self.dst, self.dst_port)]
            .into_iter()
            .enumerate()
        {
            f.write_str(if i == 0 { " " } else { " > " })?;
            match (a, ports) {
                (IpAddr::V6(a), true) => write!(f, "[{a}]:{p}")?,
                (a, true) => write!(f, "{a}:{p}")?,
                (a, false) => write!(f, "{a}")?,
            }
        }
        if self.protocol == 6 && self.tcp_flags != 0 {
            f.write_str(" flags ")?;
            for (bit, c) in [
                (0x02, 'S'),
                (0x01, 'F'),
                (0x04, 'R'),
                (0x08, 'P'),
                (0x10, 'A'),
                (0x20, 'U'),
                (0x40, 'E'),
                (0x80, 'W'),
            ] {
                if self.tcp_flags & bit != 0 {
                    write!(f, "{c}")?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        let k = PacketKey::parse("tcp 10.0.0.1:1234 > 10.0.0.2:25 flags A").unwrap();
        assert_eq!(k.src_port, 1234);
        assert_eq!(k.dst_port, 25);
        assert!(k.established());
        assert_eq!(k.to_string(), "tcp 10.0.0.1:1234 > 10.0.0.2:25 flags A");
        assert_eq!(PacketKey::parse(&k.to_string()).unwrap(), k);
        let k = PacketKey::parse("udp [2001:db8::1]:53 > [2001:db8::2]:53").unwrap();
        assert!(k.src.is_ipv6());
        assert_eq!(PacketKey::parse(&k.to_string()).unwrap(), k);
        let k = PacketKey::parse("icmp 1.2.3.4 > 5.6.7.8").unwrap();
        assert_eq!((k.protocol, k.src_port), (1, 0));
        assert!(!PacketKey::parse("tcp 1.2.3.4:1 > 5.6.7.8:2 flags S")
            .unwrap()
            .established());
        assert!(PacketKey::parse("tcp 1.2.3.4:1 > 5.6.7.8:2 flags R")
            .unwrap()
            .established());
    }

    #[test]
    fn rejects_bad_packets() {
        for bad in [
            "tcp 1.2.3.4:1 5.6.7.8:2",
            "tcp 1.2.3.4:1 < 5.6.7.8:2",
            "xyz 1.2.3.4 > 5.6.7.8",
            "icmp 1.2.3.4:5 > 5.6.7.8",
            "tcp 1.2.3.4:99999 > 5.6.7.8:1",
            "tcp 1.2.3.4:1 > 5.6.7.8:1 flags Z",
            "tcp 1.2.3.4:1 > [::1]:1",
            "tcp [::1 > [::1]:1",
        ] {
            assert!(PacketKey::parse(bad).is_err(), "{bad}");
        }
    }
}
