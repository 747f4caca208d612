//! Reading rule files: the paper's syntax (§3.2) with kansoku's extensions,
//! and ClassBench's rule format.
//!
//! Paper syntax, one pattern a line: `ip filter n type sip dip proto spt dpt`.
//! Extensions: `#` starts a comment; addresses and prefixes may be IPv6;
//! `proto` may be `icmp`, `icmp6` or a number 0–255. Patterns are evaluated
//! in ascending `n` wherever they stand in the file.
//!
//! ClassBench (db_generator output), one rule a line, tab separated:
//! `@SIP/len DIP/len SPLO : SPHI DPLO : DPHI PROTO/MASK FLAGS/MASK`. Line order
//! is priority; every rule passes and its id is its 0-based line index; the
//! flags column is ignored, as every published classifier does.

use core::fmt;
use core::net::{Ipv4Addr, Ipv6Addr};

use crate::rule::{Action, AddrMatch, PortRange, ProtoMatch, Rule, PROTO_ICMP, PROTO_ICMPV6};

/// A rule file that did not parse: where, and what was expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column (in characters).
    pub column: usize,
    pub message: String,
}

/// `LINE:COLUMN: message`; the caller puts the file name in front.
impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}

impl std::error::Error for ParseError {}

/// Which syntax a rule file is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syntax {
    /// `ip filter N ...` (the paper).
    Paper,
    /// `@SIP/len ...` (ClassBench).
    ClassBench,
}

/// Well-known service names for ports, as in router filter languages
/// (Cisco IOS, YAMAHA RT) that the paper's syntax follows.
pub const SERVICES: &[(&str, u16)] = &[
    ("ftpdata", 20),
    ("ftp-data", 20),
    ("ftp", 21),
    ("ssh", 22),
    ("telnet", 23),
    ("smtp", 25),
    ("domain", 53),
    ("dns", 53),
    ("bootps", 67),
    ("bootpc", 68),
    ("tftp", 69),
    ("gopher", 70),
    ("finger", 79),
    ("www", 80),
    ("http", 80),
    ("pop3", 110),
    ("sunrpc", 111),
    ("ident", 113),
    ("nntp", 119),
    ("ntp", 123),
    ("netbios-ns", 137),
    ("netbios-dgm", 138),
    ("netbios-ssn", 139),
    ("imap", 143),
    ("snmp", 161),
    ("snmptrap", 162),
    ("bgp", 179),
    ("ldap", 389),
    ("https", 443),
    ("syslog", 514),
    ("printer", 515),
    ("talk", 517),
    ("route", 520),
    ("uucp", 540),
    ("submission", 587),
    ("imaps", 993),
    ("pop3s", 995),
];

/// The port of a service name.
pub fn service_port(name: &str) -> Option<u16> {
    SERVICES.iter().find(|(n, _)| *n == name).map(|&(_, p)| p)
}

/// Guesses the syntax: ClassBench files have lines starting with `@`.
pub fn detect(text: &str) -> Syntax {
    let first = text
        .lines()
        .map(str::trim_start)
        .find(|l| !l.is_empty() && !l.starts_with('#'));
    match first {
        Some(l) if l.starts_with('@') => Syntax::ClassBench,
        _ => Syntax::Paper,
    }
}

/// A word of a line and its 1-based column.
#[derive(Clone, Copy)]
struct Word<'a> {
    text: &'a str,
    column: usize,
}

/// Splits a line into words at spaces and tabs, with columns; `#` ends it
/// when `comments` is set.
fn words(line: &str, comments: bool) -> (Vec<Word<'_>>, usize) {
    let mut out = Vec::new();
    let mut start: Option<(usize, usize)> = None; // (byte, column)
    let mut column = 0;
    let mut end_column = 1;
    for (byte, c) in line.char_indices() {
        column += 1;
        if comments && c == '#' {
            end_column = column;
            if let Some((b, col)) = start.take() {
                out.push(Word {
                    text: &line[b..byte],
                    column: col,
                });
            }
            return (out, end_column);
        }
        if c.is_whitespace() {
            if let Some((b, col)) = start.take() {
                out.push(Word {
                    text: &line[b..byte],
                    column: col,
                });
            }
        } else if start.is_none() {
            start = Some((byte, column));
        }
        end_column = column + 1;
    }
    if let Some((b, col)) = start {
        out.push(Word {
            text: &line[b..],
            column: col,
        });
    }
    (out, end_column)
}

fn err(line: usize, column: usize, message: impl Into<String>) -> ParseError {
    ParseError {
        line,
        column,
        message: message.into(),
    }
}

/// Parses a file in the paper's syntax. The rules come back sorted by `n`.
/// A rule's destination must be of its source's family (or either a
/// wildcard): IPv4 and IPv6 cannot both match one packet.
fn check_families(
    src: &AddrMatch,
    dst: &AddrMatch,
    line: usize,
    column: usize,
    what: &str,
) -> Result<(), ParseError> {
    match (src, dst) {
        (AddrMatch::V4 { .. }, AddrMatch::V6 { .. }) | (AddrMatch::V6 { .. }, AddrMatch::V4 { .. }) => {
            Err(err(
                line,
                column,
                format!("expected {what} of the same family as the source (IPv4 and IPv6 cannot both match one packet)"),
            ))
        }
        _ => Ok(()),
    }
}

pub fn parse_paper(text: &str) -> Result<Vec<Rule>, ParseError> {
    const FIELDS: [&str; 9] = [
        "`ip`",
        "`filter`",
        "a rule number 0-4294967295",
        "`pass` or `reject`",
        "a source address (`*`, a.b.c.d, a.b.c.d/m or IPv6)",
        "a destination address (`*`, a.b.c.d, a.b.c.d/m or IPv6)",
        "a protocol (`*`, tcp, udp, established, icmp, icmp6 or 0-255)",
        "a source port (`*`, p, p1-p2 or a service name)",
        "a destination port (`*`, p, p1-p2 or a service name)",
    ];
    let mut rules: Vec<Rule> = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let lineno = index + 1;
        let (w, end) = words(line, true);
        if w.is_empty() {
            continue;
        }
        if w.len() < FIELDS.len() {
            return Err(err(
                lineno,
                end,
                format!("expected {}, found the end of the line", FIELDS[w.len()]),
            ));
        }
        if let Some(extra) = w.get(FIELDS.len()) {
            return Err(err(
                lineno,
                extra.column,
                format!("expected the end of the line, found `{}`", extra.text),
            ));
        }
        let bad = |i: usize| {
            err(
                lineno,
                w[i].column,
                format!("expected {}, found `{}`", FIELDS[i], w[i].text),
            )
        };
        if w[0].text != "ip" {
            return Err(bad(0));
        }
        if w[1].text != "filter" {
            return Err(bad(1));
        }
        let id: u32 = w[2].text.parse().map_err(|_| bad(2))?;
        let action = match w[3].text {
            "pass" => Action::Pass,
            "reject" => Action::Reject,
            _ => return Err(bad(3)),
        };
        let src = parse_addr(w[4].text)
            .map_err(|m| err(lineno, w[4].column, m.unwrap_or_else(|| bad(4).message)))?;
        let dst = parse_addr(w[5].text)
            .map_err(|m| err(lineno, w[5].column, m.unwrap_or_else(|| bad(5).message)))?;
        let proto = match w[6].text {
            "*" => ProtoMatch::Any,
            "tcp" => ProtoMatch::Tcp,
            "udp" => ProtoMatch::Udp,
            "established" => ProtoMatch::Established,
            "icmp" => ProtoMatch::Number(PROTO_ICMP),
            "icmp6" | "icmpv6" => ProtoMatch::Number(PROTO_ICMPV6),
            t => ProtoMatch::Number(t.parse().map_err(|_| bad(6))?),
        };
        let mut ports = [PortRange::ANY; 2];
        for (slot, i) in ports.iter_mut().zip([7, 8]) {
            let word = w[i];
            let range = parse_ports(word.text)
                .map_err(|m| err(lineno, word.column, m.unwrap_or_else(|| bad(i).message)))?;
            if !range.is_any() && !proto.has_ports() {
                return Err(err(
                    lineno,
                    word.column,
                    format!(
                        "expected `*`: protocol `{}` has no ports (ports need tcp, udp or established)",
                        w[6].text
                    ),
                ));
            }
            *slot = range;
        }
        check_families(&src, &dst, lineno, w[5].column, "an address")?;
        if let Some(prev) = rules.iter().find(|r| r.id == id) {
            return Err(err(
                lineno,
                w[2].column,
                format!(
                    "duplicate rule number {id} (first used on line {})",
                    prev.line
                ),
            ));
        }
        rules.push(Rule {
            id,
            action,
            src,
            dst,
            proto,
            src_port: ports[0],
            dst_port: ports[1],
            line: lineno,
        });
    }
    // The paper's rules are "arranged in ascending order of their numbers";
    // we sort, so that a rule's place in the file does not matter.
    rules.sort_by_key(|r| r.id);
    Ok(rules)
}

/// `*`, an address, or `address/len`. `Err(None)` is "not an address at
/// all"; `Err(Some(m))` a more precise complaint.
fn parse_addr(t: &str) -> Result<AddrMatch, Option<String>> {
    if t == "*" {
        return Ok(AddrMatch::Any);
    }
    let (addr, len) = match t.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (t, None),
    };
    if let Ok(a) = addr.parse::<Ipv4Addr>() {
        let len = match len {
            None => 32,
            Some(l) => match l.parse::<u8>() {
                Ok(n) if n <= 32 => n,
                _ => {
                    return Err(Some(format!(
                        "expected a prefix length 0-32 after `/`, found `{l}`"
                    )))
                }
            },
        };
        return Ok(AddrMatch::v4(a, len));
    }
    if let Ok(a) = addr.parse::<Ipv6Addr>() {
        let len = match len {
            None => 128,
            Some(l) => match l.parse::<u8>() {
                Ok(n) if n <= 128 => n,
                _ => {
                    return Err(Some(format!(
                        "expected a prefix length 0-128 after `/`, found `{l}`"
                    )))
                }
            },
        };
        return Ok(AddrMatch::v6(a, len));
    }
    Err(None)
}

/// `*`, `p`, `p1-p2` or a service name.
fn parse_ports(t: &str) -> Result<PortRange, Option<String>> {
    if t == "*" {
        return Ok(PortRange::ANY);
    }
    if let Some(p) = service_port(t) {
        return Ok(PortRange { lo: p, hi: p });
    }
    let port = |s: &str| -> Result<u16, Option<String>> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(None);
        }
        s.parse::<u16>()
            .map_err(|_| Some(format!("expected a port 0-65535, found `{s}`")))
    };
    match t.split_once('-') {
        Some((a, b)) => {
            let (lo, hi) = (port(a)?, port(b)?);
            if lo > hi {
                return Err(Some(format!("expected p1 <= p2 in the range `{t}`")));
            }
            Ok(PortRange { lo, hi })
        }
        None => {
            let p = port(t).map_err(|e| {
                e.or_else(|| Some(format!("expected a port, a range p1-p2 or a service name (smtp, www, domain, pop3, ...), found `{t}`")))
            })?;
            Ok(PortRange { lo: p, hi: p })
        }
    }
}

/// Parses a ClassBench rule file. Rule `i` (0-based line index among the
/// rules) has id `i`, passes, and is evaluated `i`-th.
pub fn parse_classbench(text: &str) -> Result<Vec<Rule>, ParseError> {
    let mut rules = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let lineno = index + 1;
        let (w, end) = words(line, false);
        let Some(first) = w.first() else { continue };
        let Some(src_text) = first.text.strip_prefix('@') else {
            return Err(err(
                lineno,
                first.column,
                format!("expected `@` and a source prefix, found `{}`", first.text),
            ));
        };
        // SIP DIP LO : HI LO : HI PROTO/MASK FLAGS/MASK = 10 words.
        const NEED: [&str; 10] = [
            "a source prefix",
            "a destination prefix",
            "a source port",
            "`:`",
            "a source port",
            "a destination port",
            "`:`",
            "a destination port",
            "a protocol value/mask",
            "a flags value/mask",
        ];
        if w.len() < NEED.len() {
            return Err(err(
                lineno,
                end,
                format!("expected {}, found the end of the line", NEED[w.len()]),
            ));
        }
        if let Some(extra) = w.get(NEED.len()) {
            return Err(err(
                lineno,
                extra.column,
                format!("expected the end of the line, found `{}`", extra.text),
            ));
        }
        // IPv4 as ClassBench writes it; IPv6 as ClassBench-ng and DPDK's
        // test-acl (`--ipv6`) write it. A /0 matches every packet.
        let prefix = |text: &str, column: usize| -> Result<AddrMatch, ParseError> {
            let bad = || {
                err(
                    lineno,
                    column,
                    format!(
                        "expected an IPv4 prefix a.b.c.d/len or an IPv6 prefix x:x::x/len, found `{text}`"
                    ),
                )
            };
            let (a, l) = text.split_once('/').ok_or_else(bad)?;
            let l: u8 = l.parse().map_err(|_| bad())?;
            let m = if let Ok(a) = a.parse::<Ipv4Addr>() {
                (l <= 32).then(|| AddrMatch::v4(a, l))
            } else if let Ok(a) = a.parse::<Ipv6Addr>() {
                (l <= 128).then(|| AddrMatch::v6(a, l))
            } else {
                None
            };
            let m = m.ok_or_else(bad)?;
            Ok(if l == 0 { AddrMatch::Any } else { m })
        };
        let src = prefix(src_text, first.column + 1)?;
        let dst = prefix(w[1].text, w[1].column)?;
        check_families(&src, &dst, lineno, w[1].column, "a prefix")?;
        for i in [3, 6] {
            if w[i].text != ":" {
                return Err(err(
                    lineno,
                    w[i].column,
                    format!("expected `:`, found `{}`", w[i].text),
                ));
            }
        }
        let port = |i: usize| -> Result<u16, ParseError> {
            w[i].text.parse().map_err(|_| {
                err(
                    lineno,
                    w[i].column,
                    format!("expected a port 0-65535, found `{}`", w[i].text),
                )
            })
        };
        let range = |a: usize, b: usize| -> Result<PortRange, ParseError> {
            let (lo, hi) = (port(a)?, port(b)?);
            if lo > hi {
                return Err(err(
                    lineno,
                    w[a].column,
                    format!("expected a low port <= the high port, found {lo} : {hi}"),
                ));
            }
            Ok(PortRange { lo, hi })
        };
        let src_port = range(2, 4)?;
        let dst_port = range(5, 7)?;
        let hex = |s: &str| {
            s.strip_prefix("0x")
                .or_else(|| s.strip_prefix("0X"))
                .and_then(|h| u16::from_str_radix(h, 16).ok())
        };
        let pw = w[8];
        let proto = match pw.text.split_once('/').map(|(v, m)| (hex(v), hex(m))) {
            Some((Some(_), Some(0))) => ProtoMatch::Any,
            Some((Some(6), Some(0xff))) => ProtoMatch::Tcp,
            Some((Some(17), Some(0xff))) => ProtoMatch::Udp,
            Some((Some(v), Some(0xff))) if v <= 0xff => ProtoMatch::Number(v as u8),
            _ => {
                return Err(err(
                    lineno,
                    pw.column,
                    format!(
                        "expected a protocol 0xVV/0xFF or 0x00/0x00, found `{}`",
                        pw.text
                    ),
                ))
            }
        };
        let fw = w[9];
        if fw
            .text
            .split_once('/')
            .is_none_or(|(v, m)| hex(v).is_none() || hex(m).is_none())
        {
            return Err(err(
                lineno,
                fw.column,
                format!("expected TCP flags 0xVVVV/0xMMMM, found `{}`", fw.text),
            ));
        }
        let id = u32::try_from(rules.len()).map_err(|_| err(lineno, 1, "too many rules"))?;
        rules.push(Rule {
            id,
            action: Action::Pass,
            src,
            dst,
            proto,
            src_port,
            dst_port,
            line: lineno,
        });
    }
    Ok(rules)
}

/// Parses one line of a ClassBench header trace: `SRC DST SPORT DPORT PROTO
/// [more columns]`, IPv4 addresses as unsigned 32-bit decimal integers (as
/// ClassBench writes them) or IPv6 addresses as text (as DPDK's test-acl
/// reads them with `--ipv6`). Returns the key and, when present, the sixth
/// column (the trace's FIRSTMATCH).
pub fn parse_trace_line(line: &str) -> Result<(crate::PacketKey, Option<u64>), String> {
    let mut it = line.split_whitespace();
    let mut word = |what: &str| -> Result<&str, String> {
        it.next()
            .ok_or_else(|| format!("expected {what}, found the end of the line"))
    };
    let number = |t: &str, what: &str| -> Result<u64, String> {
        t.parse::<u64>()
            .map_err(|_| format!("expected {what}, found `{t}`"))
    };
    let src_text = word("a source address")?;
    let dst_text = word("a destination address")?;
    let sp = number(word("a source port")?, "a source port")?;
    let dp = number(word("a destination port")?, "a destination port")?;
    let proto = number(word("a protocol")?, "a protocol")?;
    let sp = u16::try_from(sp).map_err(|_| format!("source port {sp} is above 65535"))?;
    let dp = u16::try_from(dp).map_err(|_| format!("destination port {dp} is above 65535"))?;
    let proto = u8::try_from(proto).map_err(|_| format!("protocol {proto} is above 255"))?;
    let expected = it.next().and_then(|t| t.parse::<u64>().ok());
    let v6 = src_text.contains(':');
    if v6 != dst_text.contains(':') {
        return Err(format!(
            "expected two addresses of one family, found `{src_text}` and `{dst_text}`"
        ));
    }
    if v6 {
        let addr = |t: &str, what: &str| -> Result<Ipv6Addr, String> {
            t.parse()
                .map_err(|_| format!("expected {what} (IPv6), found `{t}`"))
        };
        let src = addr(src_text, "a source address")?;
        let dst = addr(dst_text, "a destination address")?;
        return Ok((crate::PacketKey::v6(src, dst, proto, sp, dp), expected));
    }
    let addr = |t: &str, what: &str| -> Result<u32, String> {
        let a = number(t, &format!("{what} (unsigned 32-bit integer)"))?;
        u32::try_from(a).map_err(|_| format!("{what} {a} is above 2^32-1"))
    };
    let src = addr(src_text, "source address")?;
    let dst = addr(dst_text, "destination address")?;
    Ok((crate::PacketKey::v4(src, dst, proto, sp, dp), expected))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_have_columns() {
        let (w, end) = words("  ip\tfilter 1 # x", true);
        let cols: Vec<(&str, usize)> = w.iter().map(|w| (w.text, w.column)).collect();
        assert_eq!(cols, [("ip", 3), ("filter", 6), ("1", 13)]);
        assert_eq!(end, 15);
    }

    #[test]
    fn classbench_line() {
        let r = parse_classbench("@56.232.240.197/32\t226.39.219.96/32\t0 : 65535\t1708 : 1708\t0x06/0xFF\t0x1000/0x1000\t\n").unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(
            r[0].to_string(),
            "ip filter 0 pass 56.232.240.197 226.39.219.96 tcp * 1708"
        );
        let e = parse_classbench("@1.2.3.4/32 1.2.3.4/33 0 : 1 0 : 1 0x06/0xFF 0/0").unwrap_err();
        assert_eq!((e.line, e.column), (1, 13));
        let r =
            parse_classbench("@2001:db8::/32\t::/0\t0 : 65535\t53 : 53\t0x11/0xFF\t0x0000/0x0000")
                .unwrap();
        assert_eq!(
            r[0].to_string(),
            "ip filter 0 pass 2001:db8::/32 * udp * 53"
        );
        let e =
            parse_classbench("@2001:db8::/32 10.0.0.0/8 0 : 1 0 : 1 0x06/0xFF 0/0").unwrap_err();
        assert!(e.message.contains("same family"), "{e}");
        let e = parse_classbench("@2001:db8::/129 ::/0 0 : 1 0 : 1 0x06/0xFF 0/0").unwrap_err();
        assert_eq!((e.line, e.column), (1, 2));
        let e =
            parse_classbench("@1.2.3.4/32 1.2.3.4/32 0 : 1 0 : 1 0x06/0x0F 0x0/0x0").unwrap_err();
        assert!(e.message.contains("protocol"), "{e}");
    }

    #[test]
    fn trace_line() {
        let (k, m) = parse_trace_line("3728906279\t1625423786\t22530\t1521\t6\t1574").unwrap();
        assert_eq!(k.src.to_string(), "222.66.152.39");
        assert_eq!(
            (k.src_port, k.dst_port, k.protocol, m),
            (22530, 1521, 6, Some(1574))
        );
        let (k, m) = parse_trace_line("2001:db8::1 2001:db8:0:1::2 53 1024 17 3").unwrap();
        assert_eq!(k.dst.to_string(), "2001:db8:0:1::2");
        assert_eq!(
            (k.src_port, k.dst_port, k.protocol, m),
            (53, 1024, 17, Some(3))
        );
        assert!(parse_trace_line("2001:db8::1 167772161 53 1024 17").is_err());
        assert!(parse_trace_line("2001:db8::g 2001:db8::1 53 1024 17").is_err());
        assert!(parse_trace_line("4294967296 1 1 1 6").is_err());
        assert!(parse_trace_line("1 1 1").is_err());
    }
}
