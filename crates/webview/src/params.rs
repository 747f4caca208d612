//! A request's query string, checked before anything reads it: percent
//! escapes decoded, UTF-8 required, each name once, only the names a route
//! takes. Values are then parsed into typed fields ([`crate::view::Query`]);
//! no text of a request is ever used as a path or a query.

use std::fmt;

/// A query string longer than this is refused.
pub const MAX_QUERY: usize = 4096;

/// A request that is refused with 400 and this message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadRequest(pub String);

impl BadRequest {
    pub fn new(m: impl Into<String>) -> BadRequest {
        BadRequest(m.into())
    }
}

impl fmt::Display for BadRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Decoded name/value pairs.
#[derive(Debug, Default)]
pub struct Params {
    pairs: Vec<(String, String)>,
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// `%XX` and `+` decoded; the result must be UTF-8.
fn decode(raw: &str) -> Result<String, BadRequest> {
    let b = raw.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let v = b
                    .get(i + 1)
                    .and_then(|&h| hex(h))
                    .zip(b.get(i + 2).and_then(|&l| hex(l)))
                    .ok_or_else(|| BadRequest::new("a bad percent escape in the query"))?;
                out.push(v.0 << 4 | v.1);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| BadRequest::new("the query is not UTF-8"))
}

fn printable(s: &str) -> String {
    let mut t: String = s.chars().take(40).filter(|c| !c.is_control()).collect();
    if s.chars().count() > 40 {
        t.push('…');
    }
    t
}

impl Params {
    /// Parses the query string of a request (without the `?`).
    pub fn parse(query: &str) -> Result<Params, BadRequest> {
        if query.len() > MAX_QUERY {
            return Err(BadRequest::new(format!(
                "the query is longer than {MAX_QUERY} bytes"
            )));
        }
        let mut pairs: Vec<(String, String)> = Vec::new();
        for part in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').unwrap_or((part, ""));
            let (k, v) = (decode(k)?, decode(v)?);
            if pairs.iter().any(|(n, _)| *n == k) {
                return Err(BadRequest::new(format!(
                    "'{}' is given twice",
                    printable(&k)
                )));
            }
            pairs.push((k, v));
        }
        Ok(Params { pairs })
    }

    /// Refuses names other than `names`.
    pub fn only(&self, names: &[&str]) -> Result<(), BadRequest> {
        match self
            .pairs
            .iter()
            .find(|(k, _)| !names.contains(&k.as_str()))
        {
            Some((k, _)) => Err(BadRequest::new(format!(
                "unknown parameter '{}' (known: {})",
                printable(k),
                names.join(", ")
            ))),
            None => Ok(()),
        }
    }

    /// The value of `name`, if given; at most 200 characters.
    pub fn get(&self, name: &str) -> Result<Option<&str>, BadRequest> {
        match self.pairs.iter().find(|(k, _)| k == name) {
            Some((_, v)) if v.len() > 200 => Err(BadRequest::new(format!("{name}: too long"))),
            Some((_, v)) => Ok(Some(v.as_str())),
            None => Ok(None),
        }
    }

    /// `v` as a decimal integer of at most 19 digits.
    pub fn integer(&self, name: &str, v: &str) -> Result<u64, BadRequest> {
        if v.is_empty() || v.len() > 19 || !v.bytes().all(|b| b.is_ascii_digit()) {
            return Err(BadRequest::new(format!(
                "{name}: a whole number expected, not '{}'",
                printable(v)
            )));
        }
        v.parse()
            .map_err(|_| BadRequest::new(format!("{name}: out of range")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_and_refuses_what_is_not_clean() {
        let p = Params::parse("view=src&drill=10.0.0.0%2F8&x=a+b").unwrap();
        assert_eq!(p.get("drill").unwrap(), Some("10.0.0.0/8"));
        assert_eq!(p.get("x").unwrap(), Some("a b"));
        assert!(p.only(&["view", "drill"]).is_err());
        assert!(Params::parse("a=1&a=2").is_err());
        assert!(Params::parse("a=%ff%fe").is_err(), "not UTF-8");
        assert!(Params::parse("a=%f").is_err());
        assert!(Params::parse("a=%zz").is_err());
        assert!(Params::parse(&"a".repeat(MAX_QUERY + 1)).is_err());
        let p = Params::parse("from=12x").unwrap();
        assert!(p.integer("from", "12x").is_err());
        assert!(p.integer("from", "99999999999999999999").is_err());
        assert_eq!(p.integer("from", "42").unwrap(), 42);
    }
}
