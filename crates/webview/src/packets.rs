//! "Packets of this aggregate in this range": the tcpdump expression an
//! aggregate stands for, and the extraction of its packets from an archive
//! of traces on the same host (`kansoku web --traces DIR`).
//!
//! The expression is built from the parsed label's numbers, never from the
//! request's text. It selects what the profiler counted under the label as
//! closely as tcpdump's language can say it: addresses and nets exactly,
//! TCP, UDP and SCTP ports as `port`/`portrange`, ICMP's type and code
//! (which aguri keys as a port) by their bytes; an IPv6 protocol is the
//! header's next header (`ip6 proto`), where the profiler follows
//! extension headers.

use core::net::{Ipv4Addr, Ipv6Addr};

use aguri::label::{mask, KeyKind, Prefix, V4_MAPPED, V4_MAPPED_LEN};

use crate::view::ViewKind;

/// Extracts packets from the archive: the tcpdump expression, the window
/// `[since_ns, until_ns)` and the most bytes the pcap file may have. The
/// CLI gives it (the webview crate reads no traces itself).
pub type Archive = std::sync::Arc<dyn Fn(&Extraction) -> Result<Extract, String> + Send + Sync>;

/// What an [`Archive`] is asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Extraction {
    pub expression: String,
    pub since_ns: u64,
    pub until_ns: u64,
    pub limit: usize,
}

/// What an [`Archive`] answers: a pcap file, its packets, and why it holds
/// fewer than matched, if it does.
#[derive(Clone, Debug, Default)]
pub struct Extract {
    pub pcap: Vec<u8>,
    pub packets: u64,
    pub cut: Option<String>,
}

/// The most bytes of one answer (the CLI's `read -r DIR` takes the rest).
pub const MAX_PCAP: usize = 256 << 20;

/// The expression of the aggregate `drill` (and `dst`, for source ×
/// destination) of `view`; `None` for a label no packet can have (a port
/// on a protocol without ports, an IP version other than 4 and 6).
pub fn expression(view: ViewKind, drill: &Prefix, dst: Option<&Prefix>) -> Option<String> {
    let parts = match (view, dst) {
        (ViewKind::Src, _) => vec![address("src", drill)],
        (ViewKind::Dst, _) => vec![address("dst", drill)],
        (ViewKind::Sport, _) => vec![port("src", drill)?],
        (ViewKind::Dport, _) => vec![port("dst", drill)?],
        (ViewKind::Srcdst, d) => {
            if d.is_some_and(|d| family(d) & family(drill) == 0) {
                // An IPv4 source and an IPv6 destination: no packet.
                return None;
            }
            let mut v = vec![address("src", drill)];
            v.extend(d.map(|d| address("dst", d)));
            v
        }
    };
    let parts: Vec<String> = parts.into_iter().filter(|p| !p.is_empty()).collect();
    Some(parts.join(" and "))
}

/// The IP versions of the addresses under `p`: 1 for IPv4, 2 for IPv6.
fn family(p: &Prefix) -> u8 {
    let v4 = Prefix::new(KeyKind::Address, V4_MAPPED, V4_MAPPED_LEN);
    if v4.contains(p) {
        1
    } else if p.contains(&v4) {
        3
    } else {
        2
    }
}

/// `ip and src net 10.1.0.0/16`, `ip6 and dst host 2001:db8::1` (the
/// version first: `net` and `host` alone take ARP's addresses too, which
/// the profiler does not count); IPv4 as aguri maps it (under
/// `::ffff:0:0/96`); a prefix above that holds IPv4 too.
fn address(dir: &str, p: &Prefix) -> String {
    if family(p) == 1 {
        let a = Ipv4Addr::from((p.key & 0xffff_ffff) as u32);
        return match p.len - V4_MAPPED_LEN {
            0 => "ip".into(),
            32 => format!("ip and {dir} host {a}"),
            l => format!("ip and {dir} net {a}/{l}"),
        };
    }
    let a = Ipv6Addr::from(p.key);
    let v6 = match p.len {
        0 => "ip6".to_string(),
        128 => format!("ip6 and {dir} host {a}"),
        l => format!("ip6 and {dir} net {a}/{l}"),
    };
    if family(p) == 3 {
        format!("({v6} or ip)")
    } else {
        v6
    }
}

/// The conditions of a port label `VERSION:PROTOCOL:PORT` with its length.
fn port(dir: &str, p: &Prefix) -> Option<String> {
    let k = (p.key >> 96) as u32;
    let field = |start: u8, width: u8| -> (u32, u32, bool) {
        // The field's values the prefix allows: [lo, hi], and whether all.
        let fixed = p.len.saturating_sub(start).min(width);
        let m = (mask(fixed) >> (128 - u32::from(width))) as u32;
        let v = (k >> (32 - start - width)) & ((1 << width) - 1);
        (v & m, (v & m) | (!m & ((1 << width) - 1)), fixed == 0)
    };
    let (v_lo, v_hi, _) = field(0, 8);
    let versions: Vec<u32> = [4, 6]
        .into_iter()
        .filter(|v| (v_lo..=v_hi).contains(v))
        .collect();
    let mut out = Vec::new();
    let version = match versions[..] {
        [] => return None,
        [v] => {
            out.push(if v == 4 { "ip" } else { "ip6" }.to_string());
            Some(v)
        }
        _ => None,
    };
    let (p_lo, p_hi, any_protocol) = field(8, 8);
    let (o_lo, o_hi, any_port) = field(16, 16);
    if any_protocol {
        return Some(out.join(" and "));
    }
    let Some(version) = version else {
        // The protocol fixed, the version not: both versions' headers.
        return Some(format!(
            "(ip[9] >= {p_lo} and ip[9] <= {p_hi} or ip6[6] >= {p_lo} and ip6[6] <= {p_hi})"
        ));
    };
    let (proto, proto_byte) = if version == 4 {
        ("ip proto", "ip[9]")
    } else {
        ("ip6 proto", "ip6[6]")
    };
    if p_lo == p_hi {
        out.push(format!("{proto} {p_lo}"));
    } else {
        out.push(format!("{proto_byte} >= {p_lo} and {proto_byte} <= {p_hi}"));
        return Some(out.join(" and "));
    }
    if any_port {
        return Some(out.join(" and "));
    }
    match (version, p_lo) {
        (_, 6 | 17 | 132) if o_lo == o_hi => out.push(format!("{dir} port {o_lo}")),
        (_, 6 | 17 | 132) => out.push(format!("{dir} portrange {o_lo}-{o_hi}")),
        // ICMP's type and code, as aguri keys them (type × 256 + code).
        (4, 1) | (6, 58) => {
            let at = if version == 4 {
                "icmp[0:2]"
            } else {
                "icmp6[0:2]"
            };
            if o_lo == o_hi {
                out.push(format!("{at} == {o_lo}"));
            } else {
                out.push(format!("{at} >= {o_lo} and {at} <= {o_hi}"));
            }
        }
        // A protocol without ports is keyed at port 0.
        _ if o_lo == 0 => {}
        _ => return None,
    }
    Some(out.join(" and "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expr(view: ViewKind, label: &str) -> Option<String> {
        let kind = match view {
            ViewKind::Sport | ViewKind::Dport => KeyKind::Port,
            _ => KeyKind::Address,
        };
        let (a, b) = match label.split_once(' ') {
            Some((a, b)) => (a, Some(b)),
            None => (label, None),
        };
        let a = Prefix::parse(kind, a).unwrap();
        let b = b.map(|b| Prefix::parse(kind, b).unwrap());
        expression(view, &a, b.as_ref())
    }

    #[test]
    fn labels_become_the_expressions_of_their_packets() {
        use ViewKind::*;
        let cases = [
            (Src, "10.1.0.0/16", "ip and src net 10.1.0.0/16"),
            (Dst, "192.0.2.7", "ip and dst host 192.0.2.7"),
            (Src, "0.0.0.0/0", "ip"),
            (Src, "2001:db8::/32", "ip6 and src net 2001:db8::/32"),
            (Dst, "2001:db8::1", "ip6 and dst host 2001:db8::1"),
            (Src, "::/0", "(ip6 or ip)"),
            (Src, "::/1", "(ip6 and src net ::/1 or ip)"),
            (
                Srcdst,
                "10.0.0.0/8 10.1.0.0/16",
                "ip and src net 10.0.0.0/8 and ip and dst net 10.1.0.0/16",
            ),
            (Dport, "4:6:80", "ip and ip proto 6 and dst port 80"),
            (
                Sport,
                "6:17:1024/6",
                "ip6 and ip6 proto 17 and src portrange 1024-2047",
            ),
            (Dport, "4:1:2048", "ip and ip proto 1 and icmp[0:2] == 2048"),
            (
                Dport,
                "6:58:32768/8",
                "ip6 and ip6 proto 58 and icmp6[0:2] >= 32768 and icmp6[0:2] <= 33023",
            ),
            (Dport, "4:47:0", "ip and ip proto 47"),
            (Dport, "4:0/3:0", "ip and ip[9] >= 0 and ip[9] <= 31"),
            (Dport, "4:6:0/0", "ip and ip proto 6"),
            (Dport, "4:0/0:0", "ip"),
            (Dport, "0/0:0:0", ""),
        ];
        for (view, label, want) in cases {
            assert_eq!(expr(view, label).as_deref(), Some(want), "{label}");
        }
        // A port on a protocol without ports, a version no packet has,
        // an IPv4 source with an IPv6 destination.
        assert_eq!(expr(Dport, "4:47:80"), None);
        assert_eq!(expr(Srcdst, "10.0.0.0/8 2001:db8::/32"), None);
        assert_eq!(
            expr(Srcdst, "::/0 2001:db8::/32").as_deref(),
            Some("(ip6 or ip) and ip6 and dst net 2001:db8::/32")
        );
        assert_eq!(expr(Dport, "5:6:80"), None);
    }
}
