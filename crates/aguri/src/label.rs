//! Keys and labels: what a tree node stands for, and how aguri writes it.
//!
//! Every key is a bit string held left-aligned in a `u128` (bit 0 is the most
//! significant bit), so prefixes of addresses and of port keys are handled by
//! the same code. Two key spaces:
//!
//! - Addresses, 128 bits. IPv6 addresses are themselves; an IPv4 address
//!   `a.b.c.d` is the IPv4-mapped `::ffff:a.b.c.d` (RFC 4291 §2.5.5.2), so one
//!   tree holds both families and every IPv4 prefix lies under
//!   `::ffff:0:0/96`, written `0.0.0.0/0`. Labels follow the paper:
//!   `150.65.0.0/16`, `0.0.0.0/2`, a host without a length (`10.0.0.1`),
//!   and `2001:db8::/32` for IPv6.
//! - Port keys, 32 bits: IP version (8), protocol (8), port (16). The paper
//!   writes them `4:6:80` (IPv4, TCP, port 80); a port range is
//!   `4:6:1024/6` (ports 1024–2047: six of the port's sixteen bits fixed),
//!   a protocol range `4:0/3:0` (IPv4 protocols 0–31, any port), and a
//!   version range `0/5:0:0`. Protocols without ports use port 0 (`4:1:0`).

use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Which key space a prefix lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyKind {
    /// 128-bit addresses (IPv4 mapped into IPv6).
    Address,
    /// 32-bit `version:protocol:port` keys.
    Port,
}

impl KeyKind {
    /// Key length in bits.
    pub const fn width(self) -> u8 {
        match self {
            KeyKind::Address => 128,
            KeyKind::Port => 32,
        }
    }
}

/// The IPv4-mapped prefix `::ffff:0:0/96`, as a left-aligned key.
pub const V4_MAPPED: u128 = 0xffff << 32;
/// Its length.
pub const V4_MAPPED_LEN: u8 = 96;

/// The mask of the first `len` bits.
#[inline]
pub const fn mask(len: u8) -> u128 {
    if len == 0 {
        0
    } else if len >= 128 {
        u128::MAX
    } else {
        u128::MAX << (128 - len as u32)
    }
}

/// The address key of `addr`.
#[inline]
pub fn address_key(addr: IpAddr) -> u128 {
    match addr {
        IpAddr::V4(a) => V4_MAPPED | u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

/// The port key of (IP version, protocol, port).
#[inline]
pub const fn port_key(version: u8, protocol: u8, port: u16) -> u128 {
    ((version as u128) << 120) | ((protocol as u128) << 112) | ((port as u128) << 96)
}

/// A prefix in one of the key spaces: the first `len` bits of `key` (the
/// rest are zero).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Prefix {
    pub kind: KeyKind,
    pub key: u128,
    pub len: u8,
}

impl Prefix {
    /// The prefix of `key`'s first `len` bits (`len` is capped at the width).
    pub fn new(kind: KeyKind, key: u128, len: u8) -> Prefix {
        let len = len.min(kind.width());
        Prefix {
            kind,
            key: key & mask(len),
            len,
        }
    }

    /// Whether this is the root of its key space or of an address family
    /// in it (`::/0`, IPv4's `0.0.0.0/0`, `0/0:0:0`, `4:0:0/8`, `6:0:0/8`):
    /// a catch-all, never an aggregate of its own.
    pub fn is_catch_all(&self) -> bool {
        match self.kind {
            KeyKind::Address => {
                self.len == 0 || (self.len == V4_MAPPED_LEN && self.key == V4_MAPPED)
            }
            KeyKind::Port => {
                self.len == 0
                    || (self.len == 8
                        && (self.key == port_key(4, 0, 0) || self.key == port_key(6, 0, 0)))
            }
        }
    }

    /// Whether `other` lies inside this prefix (or is it).
    pub fn contains(&self, other: &Prefix) -> bool {
        self.kind == other.kind
            && self.len <= other.len
            && (self.key ^ other.key) & mask(self.len) == 0
    }

    /// Parses a label as [`Display`](fmt::Display) writes it.
    pub fn parse(kind: KeyKind, text: &str) -> Result<Prefix, LabelError> {
        match kind {
            KeyKind::Address => parse_address(text),
            KeyKind::Port => parse_port(text),
        }
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            KeyKind::Address => {
                if self.len >= V4_MAPPED_LEN && self.key & mask(V4_MAPPED_LEN) == V4_MAPPED {
                    let a = Ipv4Addr::from(self.key as u32);
                    let len = self.len - V4_MAPPED_LEN;
                    if len == 32 {
                        write!(f, "{a}")
                    } else {
                        write!(f, "{a}/{len}")
                    }
                } else {
                    let a = Ipv6Addr::from(self.key);
                    if self.len == 128 {
                        write!(f, "{a}")
                    } else {
                        write!(f, "{a}/{}", self.len)
                    }
                }
            }
            KeyKind::Port => {
                let version = (self.key >> 120) as u8;
                let proto = (self.key >> 112) as u8;
                let port = (self.key >> 96) as u16;
                match self.len {
                    32.. => write!(f, "{version}:{proto}:{port}"),
                    16..=31 => write!(f, "{version}:{proto}:{port}/{}", self.len - 16),
                    8..=15 => write!(f, "{version}:{proto}/{}:0", self.len - 8),
                    _ => write!(f, "{version}/{}:0:0", self.len),
                }
            }
        }
    }
}

/// Why a label did not parse; the message says what was expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabelError {
    /// Byte offset in the label where the problem is.
    pub offset: usize,
    pub message: String,
}

impl fmt::Display for LabelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for LabelError {}

fn err(offset: usize, message: String) -> LabelError {
    LabelError { offset, message }
}

/// `TEXT` or `TEXT/LEN`, with LEN at most `max`; returns the text, the
/// length if given, and the offset of the length.
fn split_len(text: &str, max: u8, at: usize) -> Result<(&str, Option<u8>), LabelError> {
    match text.split_once('/') {
        None => Ok((text, None)),
        Some((t, l)) => {
            let off = at + t.len() + 1;
            let len: u8 = l.parse().ok().filter(|&n| n <= max).ok_or_else(|| {
                err(
                    off,
                    format!("bad prefix length '{l}' (expected 0 to {max})"),
                )
            })?;
            Ok((t, Some(len)))
        }
    }
}

fn parse_address(text: &str) -> Result<Prefix, LabelError> {
    let (addr, _) = split_len(text, 128, 0)?;
    if let Ok(a) = addr.parse::<Ipv4Addr>() {
        let (_, len) = split_len(text, 32, 0)?;
        let len = len.unwrap_or(32);
        return Ok(Prefix::new(
            KeyKind::Address,
            address_key(IpAddr::V4(a)),
            V4_MAPPED_LEN + len,
        ));
    }
    if let Ok(a) = addr.parse::<Ipv6Addr>() {
        let (_, len) = split_len(text, 128, 0)?;
        return Ok(Prefix::new(
            KeyKind::Address,
            u128::from(a),
            len.unwrap_or(128),
        ));
    }
    Err(err(
        0,
        format!("bad address '{addr}' (expected an IPv4 or IPv6 address, optionally /LEN)"),
    ))
}

fn parse_port(text: &str) -> Result<Prefix, LabelError> {
    let mut fields = text.splitn(3, ':');
    let (Some(v), Some(p), Some(port)) = (fields.next(), fields.next(), fields.next()) else {
        return Err(err(
            0,
            format!("bad port label '{text}' (expected VERSION:PROTOCOL:PORT like 4:6:80)"),
        ));
    };
    let p_at = v.len() + 1;
    let port_at = p_at + p.len() + 1;
    let (v, v_len) = split_len(v, 7, 0)?;
    let (p, p_len) = split_len(p, 7, p_at)?;
    let (port, port_len) = split_len(port, 15, port_at)?;
    let number = |s: &str, at: usize, max: u32, what: &str| -> Result<u32, LabelError> {
        s.parse::<u32>()
            .ok()
            .filter(|&n| n <= max)
            .ok_or_else(|| err(at, format!("bad {what} '{s}' (expected 0 to {max})")))
    };
    let version = number(v, 0, 255, "IP version")?;
    let proto = number(p, p_at, 255, "protocol")?;
    let portn = number(port, port_at, 65535, "port")?;
    // The first field with a length says how long the prefix is; the fields
    // after it are masked away, as the writer prints them as 0.
    let len = match (v_len, p_len, port_len) {
        (Some(l), _, _) => l,
        (None, Some(l), _) => 8 + l,
        (None, None, Some(l)) => 16 + l,
        (None, None, None) => 32,
    };
    Ok(Prefix::new(
        KeyKind::Port,
        port_key(version as u8, proto as u8, portn as u16),
        len,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(kind: KeyKind, s: &str) {
        let p = Prefix::parse(kind, s).unwrap_or_else(|e| panic!("{s}: {e}"));
        assert_eq!(p.to_string(), s);
    }

    #[test]
    fn paper_labels_round_trip() {
        for s in [
            "150.65.0.0/16",
            "0.0.0.0/2",
            "0.0.0.0/0",
            "202.240.0.0/12",
            "203.178.136.0/21",
            "10.0.0.1",
            "::/0",
            "2001:db8::/32",
            "2001:db8::1",
        ] {
            round(KeyKind::Address, s);
        }
        for s in [
            "4:6:80",
            "4:6:1024/6",
            "4:1:0",
            "4:0/3:0",
            "4:6:0/0",
            "4:6:49152/2",
            "6:58:0",
            "6:17:53",
            "0/0:0:0",
        ] {
            round(KeyKind::Port, s);
        }
    }

    #[test]
    fn prefixes_mean_what_the_paper_says() {
        let p = Prefix::parse(KeyKind::Port, "4:6:1024/6").unwrap();
        assert_eq!(p.len, 22);
        let inside = Prefix::new(KeyKind::Port, port_key(4, 6, 2047), 32);
        let outside = Prefix::new(KeyKind::Port, port_key(4, 6, 2048), 32);
        assert!(p.contains(&inside));
        assert!(!p.contains(&outside));
        let jaist = Prefix::parse(KeyKind::Address, "150.65.0.0/16").unwrap();
        let host = Prefix::new(
            KeyKind::Address,
            address_key("150.65.3.4".parse().unwrap()),
            128,
        );
        assert!(jaist.contains(&host));
        // Host bits are masked away.
        assert_eq!(
            Prefix::parse(KeyKind::Address, "150.65.1.1/16").unwrap(),
            jaist
        );
    }

    #[test]
    fn bad_labels_say_what_was_expected() {
        for (kind, s) in [
            (KeyKind::Address, "150.65.0.0/33"),
            (KeyKind::Address, "150.65.0/16"),
            (KeyKind::Address, ""),
            (KeyKind::Port, "4:6"),
            (KeyKind::Port, "4:6:65536"),
            (KeyKind::Port, "4:6:80/16"),
            (KeyKind::Port, "4:x:80"),
        ] {
            let e = Prefix::parse(kind, s).unwrap_err();
            assert!(e.message.contains("expected"), "{s}: {e}");
        }
    }
}
