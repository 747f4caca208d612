//! What the key index can check of a tcpdump expression: the hosts, ports
//! and protocols a packet must have for the expression to accept it, as a
//! [`KeyQuery`] over the keys `trace::keys` records per chunk.
//!
//! The query only decides which chunks are read; libpcap's program, run
//! on every packet read, decides which packets are kept. So the one rule
//! here is that a query never rules out a chunk holding a packet the
//! expression accepts: every primitive is read as a condition *implied*
//! by pcap-filter(7)'s meaning of it, and whatever is not understood
//! whole (a negation, a net, a byte offset, a name to resolve, `ether`,
//! `portrange`, `proto N`, a word this reader does not know) is
//! [`KeyQuery::Any`], which rules nothing out. `vlan`, `mpls`, `pppoes` and
//! `geneve` move the offsets of the primitives after them, so an
//! expression with any of them is `Any` as a whole; so is one this reader
//! cannot parse.
//!
//! The grammar is pcap-filter(7)'s: `not` (`!`) binds tightest, `and`
//! (`&&`) and `or` (`||`) have equal precedence and associate left to
//! right, and a bare value after `and`/`or` takes the qualifiers of the
//! primitive before it (`host a or b`, `port 80 or 443`).
//!
//! What each primitive implies:
//! - `[ip|ip6] [src|dst] host ADDR`, `[src|dst] ADDR`, `net ADDR/32` (or
//!   `/128`): the address ADDR (libpcap's `host` also matches ARP's and
//!   RARP's addresses, which the key index records);
//! - `[tcp|udp] [src|dst] port N`: the port N (and the protocol);
//! - `tcp`, `udp`, `icmp`, `icmp6`: the protocol (libpcap looks at IPv4's
//!   protocol and at IPv6's next header, through a fragment header; the
//!   index records the upper layer after every extension header, which is
//!   the same protocol in each case libpcap accepts).

use std::net::IpAddr;

use trace::keys::{key_port, key_protocol, key_v4, key_v6, KeyQuery};

/// The key query `text` (a tcpdump expression) implies; `Any` when it
/// implies nothing the index can check.
pub fn key_query(text: &str) -> KeyQuery {
    let tokens = tokenize(text);
    if tokens
        .iter()
        .any(|t| matches!(t.as_str(), "vlan" | "mpls" | "pppoes" | "pppoed" | "geneve"))
    {
        return KeyQuery::Any;
    }
    let mut p = Parser {
        tokens: &tokens,
        at: 0,
    };
    match p.expr() {
        Some(q) if p.at == tokens.len() => q,
        _ => KeyQuery::Any,
    }
}

/// Words, parentheses and the operator symbols, lowercased.
fn tokenize(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    let flush = |word: &mut String, out: &mut Vec<String>| {
        if !word.is_empty() {
            out.push(std::mem::take(word).to_ascii_lowercase());
        }
    };
    while i < chars.len() {
        let c = chars[i];
        let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
        if two == "&&" || two == "||" {
            flush(&mut word, &mut out);
            out.push(if two == "&&" { "and" } else { "or" }.into());
            i += 2;
            continue;
        }
        match c {
            c if c.is_whitespace() => flush(&mut word, &mut out),
            '(' | ')' => {
                flush(&mut word, &mut out);
                out.push(c.to_string());
            }
            // `!=` is a comparison (an arithmetic primitive), `!` alone a
            // negation.
            '!' if chars.get(i + 1) != Some(&'=') => {
                flush(&mut word, &mut out);
                out.push("not".into());
            }
            c => word.push(c),
        }
        i += 1;
    }
    flush(&mut word, &mut out);
    out
}

/// A primitive's qualifiers, for a bare value after it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Host,
    Port,
}

struct Parser<'a> {
    tokens: &'a [String],
    at: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&str> {
        self.tokens.get(self.at).map(String::as_str)
    }

    /// expr: term (("and" | "or") term)*, left to right.
    fn expr(&mut self) -> Option<KeyQuery> {
        let (mut q, mut last) = self.term(None)?;
        while let Some(op) = self.peek() {
            let and = match op {
                "and" => true,
                "or" => false,
                _ => break,
            };
            self.at += 1;
            let (t, kind) = self.term(last)?;
            last = kind;
            q = if and { q.and(t) } else { q.or(t) };
        }
        Some(q)
    }

    /// term: "not" term | "(" expr ")" | primitive. `inherit` is the kind
    /// of the primitive just before, for a bare value.
    fn term(&mut self, inherit: Option<Kind>) -> Option<(KeyQuery, Option<Kind>)> {
        match self.peek()? {
            "not" => {
                self.at += 1;
                // What a negation implies is not a key: read everything.
                self.term(None)?;
                Some((KeyQuery::Any, None))
            }
            "(" => {
                self.at += 1;
                let q = self.expr()?;
                (self.peek()? == ")").then_some(())?;
                self.at += 1;
                Some((q, None))
            }
            ")" | "and" | "or" => None,
            _ => {
                let start = self.at;
                while let Some(t) = self.peek() {
                    if matches!(t, "and" | "or" | ")" | "(" | "not") {
                        break;
                    }
                    self.at += 1;
                }
                Some(primitive(&self.tokens[start..self.at], inherit))
            }
        }
    }
}

/// The condition one primitive's words imply, and its kind for a bare
/// value after it.
fn primitive(words: &[String], inherit: Option<Kind>) -> (KeyQuery, Option<Kind>) {
    let w: Vec<&str> = words.iter().map(String::as_str).collect();
    match w.as_slice() {
        [p @ ("tcp" | "udp" | "icmp" | "icmp6")] => (protocol(p), None),
        [v] if inherit.is_some() => match (inherit, address(v), port(v)) {
            (Some(Kind::Host), Some(a), _) => (a, inherit),
            (Some(Kind::Port), _, Some(p)) => (p, inherit),
            _ => (KeyQuery::Any, None),
        },
        _ => {
            // [proto] [dir] [type] value
            let mut rest = w.as_slice();
            let mut proto = None;
            if let [p @ ("ip" | "ip6" | "tcp" | "udp"), tail @ ..] = rest {
                proto = Some(*p);
                rest = tail;
            }
            if let ["src" | "dst", tail @ ..] = rest {
                rest = tail;
            }
            match (proto, rest) {
                (None | Some("ip" | "ip6"), ["host", v] | [v]) => match address(v) {
                    Some(a) => (a, Some(Kind::Host)),
                    None => (KeyQuery::Any, None),
                },
                (None | Some("ip" | "ip6"), ["net", v]) => match whole_net(v) {
                    Some(a) => (a, Some(Kind::Host)),
                    None => (KeyQuery::Any, None),
                },
                (None | Some("ip" | "ip6"), ["port", v]) => match port(v) {
                    Some(p) => (p, Some(Kind::Port)),
                    None => (KeyQuery::Any, None),
                },
                (Some(t @ ("tcp" | "udp")), ["port", v]) => match port(v) {
                    Some(p) => (protocol(t).and(p), Some(Kind::Port)),
                    None => (KeyQuery::Any, None),
                },
                _ => (KeyQuery::Any, None),
            }
        }
    }
}

fn protocol(name: &str) -> KeyQuery {
    KeyQuery::Key(key_protocol(match name {
        "tcp" => 6,
        "udp" => 17,
        "icmp" => 1,
        _ => 58,
    }))
}

/// The key of an address written as numbers (a name would need libpcap's
/// resolver: not narrowed).
fn address(v: &str) -> Option<KeyQuery> {
    Some(KeyQuery::Key(match v.parse::<IpAddr>().ok()? {
        IpAddr::V4(a) => key_v4(u32::from(a)),
        IpAddr::V6(a) => key_v6(u128::from(a)),
    }))
}

/// `net ADDR/32` and `net ADDR/128` are hosts; other nets are not
/// narrowed.
fn whole_net(v: &str) -> Option<KeyQuery> {
    let (a, len) = v.split_once('/')?;
    let addr = a.parse::<IpAddr>().ok()?;
    let full = if addr.is_ipv4() { "32" } else { "128" };
    (len == full).then(|| address(a)).flatten()
}

/// A port written as a number (a service name is not narrowed).
fn port(v: &str) -> Option<KeyQuery> {
    let p: u16 = v.parse().ok()?;
    Some(KeyQuery::Key(key_port(p)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(a: &str) -> KeyQuery {
        address(a).unwrap()
    }

    fn port_q(p: u16) -> KeyQuery {
        KeyQuery::Key(key_port(p))
    }

    #[test]
    fn hosts_ports_and_protocols_are_keys() {
        assert_eq!(key_query("host 10.0.0.1"), host("10.0.0.1"));
        assert_eq!(key_query("ip6 src host 2001:db8::1"), host("2001:db8::1"));
        assert_eq!(key_query("dst 192.168.1.1"), host("192.168.1.1"));
        assert_eq!(key_query("net 10.1.2.3/32"), host("10.1.2.3"));
        assert_eq!(key_query("port 53"), port_q(53));
        assert_eq!(
            key_query("tcp dst port 80"),
            protocol("tcp").and(port_q(80))
        );
        assert_eq!(key_query("icmp6"), protocol("icmp6"));
        assert_eq!(
            key_query("host 10.0.0.1 && (port 22 || port 443)"),
            host("10.0.0.1").and(port_q(22).or(port_q(443)))
        );
    }

    #[test]
    fn bare_values_take_the_qualifiers_before_them() {
        assert_eq!(
            key_query("host 10.0.0.1 or 10.0.0.2"),
            host("10.0.0.1").or(host("10.0.0.2"))
        );
        assert_eq!(key_query("port 80 or 443"), port_q(80).or(port_q(443)));
        // A protocol's name is not a value.
        assert_eq!(
            key_query("host 10.0.0.1 and udp"),
            host("10.0.0.1").and(protocol("udp"))
        );
        // After a parenthesis nothing is inherited here; an address alone
        // is a host (any qualifier libpcap would carry over to it names a
        // subset of that host's packets, or is refused).
        assert_eq!(
            key_query("(host 10.0.0.1) or 10.0.0.2"),
            host("10.0.0.1").or(host("10.0.0.2"))
        );
        assert_eq!(key_query("(port 80) or 443"), KeyQuery::Any);
    }

    #[test]
    fn and_and_or_associate_left_to_right() {
        // pcap-filter(7): `a or b and c` is `(a or b) and c`.
        assert_eq!(
            key_query("host 10.0.0.1 or host 10.0.0.2 and port 80"),
            host("10.0.0.1").or(host("10.0.0.2")).and(port_q(80))
        );
    }

    #[test]
    fn what_the_index_cannot_check_reads_everything() {
        for e in [
            "not host 10.0.0.1",
            "! port 80",
            "net 10.0.0.0/8",
            "host example.com",
            "port http",
            "portrange 1-1024",
            "ether host 00:11:22:33:44:55",
            "ip proto 51",
            "ip6 proto 0",
            "less 100",
            "ip[2:2] > 100",
            "tcp[tcpflags] & tcp-syn != 0",
            "vlan and host 10.0.0.1",
            "host 10.0.0.1 and (",
            "",
            "ip",
            "arp",
            "src or dst host 10.0.0.1",
        ] {
            assert_eq!(key_query(e), KeyQuery::Any, "{e:?}");
        }
        // A condition that cannot be checked drops out of a conjunction.
        assert_eq!(key_query("host 10.0.0.1 and less 100"), host("10.0.0.1"));
        assert_eq!(key_query("host 10.0.0.1 and not port 22"), host("10.0.0.1"));
        assert_eq!(key_query("host 10.0.0.1 or less 100"), KeyQuery::Any);
    }
}
