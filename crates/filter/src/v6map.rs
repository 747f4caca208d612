//! ClassBench's IPv4 rule sets and header traces, mapped to IPv6.
//!
//! ClassBench generates IPv4 sets only, and the public IPv6 generator
//! (ClassBench-ng) has no header traces. kansoku derives IPv6 sets from the
//! IPv4 ones by a mapping that keeps every rule's shape, so that the same
//! families (ACL, firewall, IP chain) are measured in both families:
//!
//! - An IPv4 address `a` becomes the host `2001:db8:HHHH:LLLL:IID` where
//!   `HHHH:LLLL` are `a`'s 32 bits (in the documentation prefix of RFC 3849,
//!   one /32 as an operator's allocation is) and the 64-bit interface id is
//!   `mix(a)`, SplitMix64's finaliser of `a`: a fixed, reversible scrambling,
//!   so that host addresses are spread over the low half as SLAAC's and
//!   privacy addresses are.
//! - A prefix `a/len` becomes `2001:db8:a/(32 + len)` for `0 < len < 32`
//!   (the site's subnets: /33 to /63), the host `a/128` for `len = 32`, and
//!   stays a wildcard (`::/0`) for `len = 0`.
//! - Protocols 1 (ICMP) and 58 (ICMPv6) swap places (ClassBench's sets use
//!   both numbers: a one-way map would make two protocols one); ports and
//!   every other protocol are kept, and the TCP-flags column is written as `0x0000/0x0000`
//!   (kansoku and DPDK ignore it).
//!
//! The mapping is one-to-one and keeps the prefix order (`p` contains `q`
//! exactly when their images do), and a header matches a rule exactly when
//! its image matches the rule's image: the first match of every header is
//! the same rule in both families. The exact answers of a mapped trace are
//! computed afresh by the linear engine (`kansoku filter v6`), and that they
//! equal the IPv4 trace's is checked as it is written.
//!
//! The text is ClassBench's with IPv6 prefixes, as ClassBench-ng writes it
//! and DPDK's `dpdk-test-acl --ipv6` reads it; traces carry the addresses as
//! text (`SRC DST SPORT DPORT PROTO FIRSTMATCH`).

use core::fmt::Write as _;
use core::net::{IpAddr, Ipv6Addr};

use crate::rule::{AddrMatch, ProtoMatch, Rule, PROTO_ICMP, PROTO_ICMPV6};
use crate::{PacketKey, RuleSet};

/// The site prefix every mapped address is in: 2001:db8::/32.
const SITE: u128 = 0x2001_0db8 << 96;

/// SplitMix64's finaliser: the interface id of a mapped host.
fn mix(a: u32) -> u64 {
    let mut z = u64::from(a).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The image of the IPv4 address `a`.
pub fn host(a: u32) -> Ipv6Addr {
    Ipv6Addr::from(SITE | u128::from(a) << 64 | u128::from(mix(a)))
}

/// The image of the IPv4 prefix `a/len` (`len` 0–32).
pub fn prefix(a: u32, len: u8) -> (Ipv6Addr, u8) {
    match len {
        0 => (Ipv6Addr::UNSPECIFIED, 0),
        32.. => (host(a), 128),
        _ => {
            let a = a & (u32::MAX << (32 - len));
            (Ipv6Addr::from(SITE | u128::from(a) << 64), 32 + len)
        }
    }
}

/// The image of a protocol number: ICMP and ICMPv6 swap places.
pub fn protocol(p: u8) -> u8 {
    match p {
        PROTO_ICMP => PROTO_ICMPV6,
        PROTO_ICMPV6 => PROTO_ICMP,
        _ => p,
    }
}

/// The image of a header; `None` for one that is not IPv4.
pub fn key(k: &PacketKey) -> Option<PacketKey> {
    let (IpAddr::V4(s), IpAddr::V4(d)) = (k.src, k.dst) else {
        return None;
    };
    Some(PacketKey {
        src: IpAddr::V6(host(u32::from(s))),
        dst: IpAddr::V6(host(u32::from(d))),
        protocol: protocol(k.protocol),
        ..*k
    })
}

fn write_prefix(out: &mut String, m: &AddrMatch) -> Result<(), String> {
    let (a, len) = match *m {
        AddrMatch::Any => (Ipv6Addr::UNSPECIFIED, 0),
        AddrMatch::V4 { addr, len } => prefix(addr, len),
        AddrMatch::V6 { .. } => return Err(format!("{m} is already IPv6")),
    };
    let _ = write!(out, "{a}/{len}");
    Ok(())
}

/// The image of one rule, as a ClassBench line (without the newline).
pub fn rule_line(r: &Rule) -> Result<String, String> {
    let mut out = String::from("@");
    write_prefix(&mut out, &r.src)?;
    out.push('\t');
    write_prefix(&mut out, &r.dst)?;
    let (v, m) = match r.proto {
        ProtoMatch::Any => (0, 0),
        ProtoMatch::Tcp => (6, 0xff),
        ProtoMatch::Udp => (17, 0xff),
        ProtoMatch::Number(n) => (protocol(n), 0xff),
        ProtoMatch::Established => {
            return Err("`established` has no ClassBench form".to_string());
        }
    };
    let _ = write!(
        out,
        "\t{} : {}\t{} : {}\t0x{v:02X}/0x{m:02X}\t0x0000/0x0000",
        r.src_port.lo, r.src_port.hi, r.dst_port.lo, r.dst_port.hi
    );
    Ok(out)
}

/// The image of a whole IPv4 rule set, as ClassBench text. An error names
/// the first rule that has no image (an IPv6 rule, `established`).
pub fn rules_text(rules: &RuleSet) -> Result<String, String> {
    let mut out = String::with_capacity(rules.len() * 96);
    for r in rules.rules() {
        let line = rule_line(r).map_err(|e| format!("line {}: {e}", r.line))?;
        out.push_str(&line);
        out.push('\n');
    }
    Ok(out)
}

/// A trace line of an IPv6 header: `SRC DST SPORT DPORT PROTO FIRSTMATCH`,
/// the match being a rule index, or the rule count for "no rule" (as
/// ClassBench writes it).
pub fn trace_line(k: &PacketKey, first_match: Option<u32>, n_rules: usize) -> String {
    let m = first_match.map_or(n_rules as u64, u64::from);
    format!(
        "{}\t{}\t{}\t{}\t{}\t{m}",
        k.src, k.dst, k.src_port, k.dst_port, k.protocol
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Engine, EngineKind};

    #[test]
    fn prefixes_nest_as_their_images_do() {
        let (a, l) = prefix(0xc0a8_0100, 24);
        assert_eq!((a.to_string().as_str(), l), ("2001:db8:c0a8:100::", 56));
        let (h, l) = prefix(0xc0a8_0101, 32);
        assert_eq!(l, 128);
        assert!(AddrMatch::v6(a, 56).matches(IpAddr::V6(h)));
        assert!(!AddrMatch::v6(a, 56).matches(IpAddr::V6(host(0xc0a8_0201))));
        assert_eq!(prefix(0xffff_ffff, 0), (Ipv6Addr::UNSPECIFIED, 0));
        // Distinct hosts have distinct images.
        assert_ne!(host(1), host(2));
        assert_ne!(mix(1) & 0xffff, mix(2) & 0xffff);
    }

    #[test]
    fn a_mapped_set_gives_every_header_the_same_first_match() {
        let text = "@10.0.0.0/8\t0.0.0.0/0\t0 : 65535\t80 : 80\t0x06/0xFF\t0x0000/0x0000\n\
                    @10.1.2.3/32\t192.168.0.0/16\t1024 : 65535\t0 : 65535\t0x11/0xFF\t0x0000/0x0200\n\
                    @0.0.0.0/0\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x01/0xFF\t0x0000/0x0000\n\
                    @10.0.0.0/7\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x00/0x00\t0x0000/0x0000\n";
        let v4 = RuleSet::parse(text).unwrap();
        let v6 = RuleSet::parse(&rules_text(&v4).unwrap()).unwrap();
        assert_eq!(v6.len(), v4.len());
        assert!(matches!(v6.rules()[0].src, AddrMatch::V6 { len: 40, .. }));
        assert!(matches!(v6.rules()[1].src, AddrMatch::V6 { len: 128, .. }));
        assert_eq!(v6.rules()[2].proto, ProtoMatch::Number(58));
        let e4 = Engine::build(EngineKind::Linear, &v4);
        let e6 = Engine::build(EngineKind::Fast, &v6);
        let mut seen = [0usize; 5];
        for (i, (s, d, p, sp, dp)) in [
            (0x0a00_0001, 0x0102_0304, 6, 5, 80),
            (0x0a01_0203, 0xc0a8_0505, 17, 2000, 53),
            (0x0a01_0204, 0xc0a8_0505, 17, 2000, 53),
            (0x0b00_0000, 1, 1, 0, 0),
            (0x0b00_0000, 1, 17, 1, 1),
            (0x0c00_0000, 1, 17, 1, 1),
            (0x0b00_0000, 1, 58, 0, 0),
        ]
        .into_iter()
        .enumerate()
        {
            let k4 = PacketKey::v4(s, d, p, sp, dp);
            let k6 = key(&k4).unwrap();
            let m = e4.classify(&k4);
            assert_eq!(e6.classify(&k6), m, "header {i}: {k4} / {k6}");
            seen[m.map_or(4, |m| m as usize)] += 1;
            let (back, want) =
                crate::parse::parse_trace_line(&trace_line(&k6, m, v6.len())).unwrap();
            assert_eq!(back, k6);
            assert_eq!(want, Some(m.map_or(4, u64::from)));
        }
        assert_eq!(
            seen,
            [1, 1, 1, 3, 1],
            "every rule and the default are exercised"
        );
    }

    #[test]
    fn rules_without_an_image_are_refused() {
        let v6 = RuleSet::parse("ip filter 1 pass 2001:db8::/32 * tcp * 80\n").unwrap();
        assert!(rules_text(&v6).unwrap_err().contains("line 1"));
        let est = RuleSet::parse("ip filter 1 pass * * established * *\n").unwrap();
        assert!(rules_text(&est).is_err());
    }
}
