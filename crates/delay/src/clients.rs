//! Client address lists: `100` (that many loopback addresses from
//! 127.0.0.2), `127.0.0.2-127.0.0.101` (a range), `10.0.0.1,10.0.0.7`, or
//! any mix of ranges and addresses separated by commas.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The most client addresses a list may name.
pub const MAX_CLIENTS: usize = 65_536;

/// The first loopback client address (127.0.0.1 is left to servers).
pub const FIRST_LOOPBACK: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

/// Parses a client list (see the module docs); the error says what was
/// expected.
pub fn parse_clients(spec: &str) -> Result<Vec<IpAddr>, String> {
    let spec = spec.trim();
    if let Ok(n) = spec.parse::<usize>() {
        if n == 0 || n > MAX_CLIENTS {
            return Err(format!("{n} clients: between 1 and {MAX_CLIENTS}"));
        }
        let first = u32::from(FIRST_LOOPBACK);
        return Ok((0..n as u32)
            .map(|i| IpAddr::V4(Ipv4Addr::from(first + i)))
            .collect());
    }
    let mut out = Vec::new();
    for item in spec.split(',') {
        let item = item.trim();
        let addr = |s: &str| {
            s.trim()
                .parse::<IpAddr>()
                .map_err(|_| format!("{s:?} is not an IP address (in {spec:?})"))
        };
        match item.split_once('-') {
            None => out.push(addr(item)?),
            Some((a, b)) => {
                let (a, b) = (addr(a)?, addr(b)?);
                let (lo, hi, v4) = match (a, b) {
                    (IpAddr::V4(a), IpAddr::V4(b)) => {
                        (u128::from(u32::from(a)), u128::from(u32::from(b)), true)
                    }
                    (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b), false),
                    _ => return Err(format!("{item:?}: a range of one IP version")),
                };
                if hi < lo {
                    return Err(format!("{item:?}: the range ends before it starts"));
                }
                if hi - lo >= MAX_CLIENTS as u128 {
                    return Err(format!("{item:?}: more than {MAX_CLIENTS} addresses"));
                }
                for x in lo..=hi {
                    out.push(if v4 {
                        IpAddr::V4(Ipv4Addr::from(x as u32))
                    } else {
                        IpAddr::V6(Ipv6Addr::from(x))
                    });
                }
            }
        }
        if out.len() > MAX_CLIENTS {
            return Err(format!("more than {MAX_CLIENTS} client addresses"));
        }
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(dup) = out.iter().find(|a| !seen.insert(**a)) {
        return Err(format!("{dup} is named twice"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_ranges_and_lists() {
        let v = parse_clients("100").unwrap();
        assert_eq!(v.len(), 100);
        assert_eq!(v[0], IpAddr::from([127, 0, 0, 2]));
        assert_eq!(v[99], IpAddr::from([127, 0, 0, 101]));
        let v = parse_clients("127.0.0.250-127.0.1.3, 10.0.0.1").unwrap();
        assert_eq!(v.len(), 11);
        assert_eq!(v[10], IpAddr::from([10, 0, 0, 1]));
        assert_eq!(parse_clients("fd00::1-fd00::3").unwrap().len(), 3);
        for bad in [
            "0",
            "70000",
            "1.2.3",
            "127.0.0.5-127.0.0.1",
            "127.0.0.1-::1",
            "1.1.1.1,1.1.1.1",
            "",
            "10.0.0.0-10.1.0.0",
        ] {
            assert!(parse_clients(bad).is_err(), "{bad}");
        }
    }
}
