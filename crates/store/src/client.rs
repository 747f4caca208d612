//! ClickHouse's HTTP interface, as a small blocking client: a statement
//! in the body of a POST, or `INSERT ... FORMAT TabSeparated` in the URL and
//! the rows in the body. Credentials go in an `Authorization: Basic` header
//! and nowhere else: never in a URL, a message, or `Debug` output.

use std::fmt;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use base64::Engine as _;

/// Where the store is: `http://HOST:PORT/DATABASE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreUrl {
    pub host: String,
    pub port: u16,
    pub database: String,
}

/// A database or cluster name as it goes into a statement unquoted: a
/// letter or `_`, then letters, digits and `_`; at most 64.
pub fn valid_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// A database name, a probe name: letters, digits, `_`, `-`, `.`; 1 to 64
/// of them, not starting with `.` or `-`. Such a name is safe inside single
/// quotes or as an identifier in a statement.
pub fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && !s.starts_with(['.', '-'])
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

impl StoreUrl {
    /// Parses `http://HOST:PORT/DB` (the port defaults to 8123, the
    /// database to `kansoku`).
    pub fn parse(s: &str) -> Result<StoreUrl, StoreError> {
        let bad = |why: &str| {
            StoreError::Usage(format!(
                "--store {s:?}: {why} (expected http://HOST:PORT/DATABASE)"
            ))
        };
        let rest = s
            .strip_prefix("http://")
            .ok_or_else(|| bad("only http:// is spoken"))?;
        let (hostport, db) = rest.split_once('/').unwrap_or((rest, ""));
        let db = if db.is_empty() {
            "kansoku"
        } else {
            db.trim_end_matches('/')
        };
        if !valid_identifier(db) {
            return Err(bad(
                "a database is a letter or _, then letters, digits and _",
            ));
        }
        let (host, port) = match hostport.rsplit_once(':') {
            _ if hostport.starts_with('[') && hostport.ends_with(']') => (hostport, 8123),
            Some((h, p)) if !h.ends_with(':') || h.starts_with('[') => {
                (h, p.parse::<u16>().map_err(|_| bad("bad port"))?)
            }
            _ => (hostport, 8123),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() || host.contains(['@', '/', '?', '#', ' ']) {
            return Err(bad(
                "bad host (credentials go in the environment, not the URL)",
            ));
        }
        Ok(StoreUrl {
            host: host.to_string(),
            port,
            database: db.to_string(),
        })
    }
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "http://[{}]:{}/{}", self.host, self.port, self.database)
        } else {
            write!(f, "http://{}:{}/{}", self.host, self.port, self.database)
        }
    }
}

/// A user and password; `Debug` shows the user only.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub user: String,
    password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Credentials {{ user: {:?}, password: <hidden> }}",
            self.user
        )
    }
}

impl Credentials {
    pub fn new(user: impl Into<String>, password: impl Into<String>) -> Credentials {
        Credentials {
            user: user.into(),
            password: password.into(),
        }
    }

    /// From `KANSOKU_STORE_USER` and `KANSOKU_STORE_PASSWORD`, or from
    /// `file` (first line `USER:PASSWORD`); none: ClickHouse's `default`
    /// user without a password.
    pub fn from_env_or_file(
        file: Option<&std::path::Path>,
    ) -> Result<Option<Credentials>, StoreError> {
        if let Some(f) = file {
            let text = std::fs::read_to_string(f)
                .map_err(|e| StoreError::Usage(format!("{}: {e}", f.display())))?;
            let line = text.lines().next().unwrap_or("");
            let (u, p) = line.split_once(':').ok_or_else(|| {
                StoreError::Usage(format!(
                    "{}: expected USER:PASSWORD on the first line",
                    f.display()
                ))
            })?;
            return Ok(Some(Credentials::new(u, p)));
        }
        match std::env::var("KANSOKU_STORE_USER") {
            Ok(u) if !u.is_empty() => Ok(Some(Credentials::new(
                u,
                std::env::var("KANSOKU_STORE_PASSWORD").unwrap_or_default(),
            ))),
            _ => Ok(None),
        }
    }

    fn header(&self) -> String {
        let raw = format!("{}:{}", self.user, self.password);
        format!(
            "Authorization: Basic {}\r\n",
            base64::engine::general_purpose::STANDARD.encode(raw)
        )
    }
}

/// Why the store did not do what was asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreError {
    /// A bad URL, name or file: nothing was sent.
    Usage(String),
    /// No connection, or it broke: try again later.
    Unreachable(String),
    /// The server refused the credentials.
    Auth(String),
    /// The server answered with an error (its code and first line).
    Server(u16, String),
    /// The store's schema is not the one this kansoku writes.
    Schema(String),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Usage(m) => f.write_str(m),
            StoreError::Unreachable(m) => write!(f, "the store is unreachable: {m}"),
            StoreError::Auth(m) => write!(f, "the store refused the credentials: {m}"),
            StoreError::Server(c, m) => write!(f, "the store answered {c}: {m}"),
            StoreError::Schema(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for StoreError {}

impl StoreError {
    /// Whether waiting and sending again may help.
    pub fn transient(&self) -> bool {
        matches!(self, StoreError::Unreachable(_) | StoreError::Server(..))
    }
}

/// The longest answer read (a view's query asks for far less).
const MAX_ANSWER: usize = 2 << 30;

/// A connection-per-request client.
#[derive(Clone, Debug)]
pub struct Client {
    pub url: StoreUrl,
    creds: Option<Credentials>,
    timeout: Duration,
}

/// Percent-encodes a URL parameter value.
fn encode(s: &str) -> String {
    let mut o = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            o.push(b as char);
        } else {
            o.push_str(&format!("%{b:02X}"));
        }
    }
    o
}

impl Client {
    pub fn new(url: StoreUrl, creds: Option<Credentials>) -> Client {
        Client {
            url,
            creds,
            timeout: Duration::from_secs(30),
        }
    }

    /// Runs a statement (its text from this crate's templates only) and
    /// returns the answer's body.
    pub fn execute(&self, sql: &str) -> Result<String, StoreError> {
        self.post(
            &format!("/?database={}", encode(&self.url.database)),
            sql.as_bytes(),
        )
    }

    /// Runs a statement in server session `session` (whose temporary
    /// tables it sees), waiting for the answer up to `timeout`.
    pub fn execute_in_session(
        &self,
        session: &str,
        sql: &str,
        timeout: Duration,
    ) -> Result<String, StoreError> {
        let target = format!(
            "/?database={}&session_id={}&session_timeout=3600",
            encode(&self.url.database),
            encode(session)
        );
        self.post_within(&target, sql.as_bytes(), timeout)
    }

    /// Runs a statement with no database selected (to create it).
    pub fn execute_bare(&self, sql: &str) -> Result<String, StoreError> {
        self.post("/", sql.as_bytes())
    }

    /// Inserts tab-separated `rows` into `table`.
    pub fn insert(&self, table: &str, rows: &[u8]) -> Result<(), StoreError> {
        let q = format!("INSERT INTO {table} FORMAT TabSeparated");
        let target = format!(
            "/?database={}&query={}",
            encode(&self.url.database),
            encode(&q)
        );
        self.post(&target, rows).map(|_| ())
    }

    fn post(&self, target: &str, body: &[u8]) -> Result<String, StoreError> {
        self.post_within(target, body, self.timeout)
    }

    fn post_within(
        &self,
        target: &str,
        body: &[u8],
        timeout: Duration,
    ) -> Result<String, StoreError> {
        let addr = (self.url.host.as_str(), self.url.port)
            .to_socket_addrs()
            .map_err(|e| StoreError::Unreachable(format!("{}: {e}", self.url)))?
            .next()
            .ok_or_else(|| StoreError::Unreachable(format!("{}: no address", self.url)))?;
        let unreachable = |e: std::io::Error| StoreError::Unreachable(format!("{}: {e}", self.url));
        let mut s =
            TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(unreachable)?;
        s.set_read_timeout(Some(timeout)).map_err(unreachable)?;
        s.set_write_timeout(Some(timeout)).map_err(unreachable)?;
        let mut head = format!(
            "POST {target} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.url.host,
            body.len()
        );
        if let Some(c) = &self.creds {
            head.push_str(&c.header());
        }
        head.push_str("\r\n");
        // A server that refuses a request (a wrong password) may answer and
        // close before it has read the body: a failed write, or a reset
        // after the answer, still leaves the answer to read.
        let sent = s.write_all(head.as_bytes()).and_then(|_| s.write_all(body));
        let mut buf = Vec::new();
        let mut chunk = [0u8; 64 * 1024];
        let read = loop {
            match s.read(&mut chunk) {
                Ok(0) => break Ok(()),
                Ok(_) if buf.len() > MAX_ANSWER => {
                    return Err(StoreError::Server(
                        200,
                        format!("an answer longer than {MAX_ANSWER} bytes: ask for less"),
                    ))
                }
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        if buf.is_empty() {
            sent.map_err(unreachable)?;
            read.map_err(unreachable)?;
        }
        let (code, text) = parse_answer(&buf)
            .ok_or_else(|| StoreError::Unreachable(format!("{}: not an HTTP answer", self.url)))?;
        match code {
            200 => Ok(text),
            401 | 403 | 516 => Err(StoreError::Auth(first_line(&text))),
            c if text.contains("Code: 192")
                || text.contains("Code: 193")
                || text.contains("Code: 194") =>
            {
                Err(StoreError::Auth(format!("{c}: {}", first_line(&text))))
            }
            c => Err(StoreError::Server(c, first_line(&text))),
        }
    }
}

/// An HTTP answer's status and body (dechunked, as text), or `None` if the
/// bytes are not one.
pub fn parse_answer(buf: &[u8]) -> Option<(u16, String)> {
    let mut headers = [httparse::EMPTY_HEADER; 128];
    let mut resp = httparse::Response::new(&mut headers);
    let n = match resp.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        _ => return None,
    };
    let code = resp.code?;
    let chunked = resp.headers.iter().any(|h| {
        h.name.eq_ignore_ascii_case("transfer-encoding")
            && String::from_utf8_lossy(h.value).contains("chunked")
    });
    let length = resp
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
        .and_then(|h| {
            std::str::from_utf8(h.value)
                .ok()?
                .trim()
                .parse::<usize>()
                .ok()
        });
    let raw = &buf[n..];
    // A body cut short is no answer: the request is tried again.
    let body = match (chunked, length) {
        (true, _) => dechunk(raw)?,
        (false, Some(len)) if raw.len() >= len => raw[..len].to_vec(),
        (false, Some(_)) => return None,
        (false, None) => raw.to_vec(),
    };
    Some((code, String::from_utf8_lossy(&body).to_string()))
}

/// The first line of a message, at most 300 characters.
fn first_line(t: &str) -> String {
    let l = t.lines().next().unwrap_or("").trim();
    l.chars().take(300).collect()
}

/// A chunked body's data (ClickHouse answers SELECTs chunked); `None` if
/// it is cut before its last, empty chunk.
fn dechunk(mut raw: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    while let Some(eol) = raw.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&raw[..eol]).ok().and_then(|s| {
            usize::from_str_radix(s.split(';').next().unwrap_or("").trim(), 16).ok()
        })?;
        raw = &raw[eol + 2..];
        if size == 0 {
            return Some(out);
        }
        if raw.len() < size {
            return None;
        }
        out.extend_from_slice(&raw[..size]);
        raw = raw.get(size + 2..)?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_names_and_secrets() {
        let u = StoreUrl::parse("http://127.0.0.1:18123/fleet").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.database.as_str()),
            ("127.0.0.1", 18123, "fleet")
        );
        assert_eq!(StoreUrl::parse("http://db").unwrap().port, 8123);
        assert_eq!(StoreUrl::parse("http://[::1]:9/x").unwrap().host, "::1");
        assert_eq!(StoreUrl::parse("http://[::1]/x").unwrap().port, 8123);
        assert!(
            StoreUrl::parse("http://h/my-db").is_err() && StoreUrl::parse("http://h/2024").is_err()
        );
        for bad in [
            "https://h/x",
            "http://u:p@h:1/x",
            "http://h:99999/x",
            "http://h:1/x;DROP",
            "http://h:1/a.b",
            "ftp://h",
        ] {
            assert!(StoreUrl::parse(bad).is_err(), "{bad}");
        }
        assert!(
            valid_name("probe-1.tokyo")
                && !valid_name("a'b")
                && !valid_name("")
                && !valid_name(".x")
        );
        let c = Credentials::new("kansoku", "hunter2");
        assert!(!format!("{c:?}").contains("hunter2"));
        assert_eq!(encode("a b/'"), "a%20b%2F%27");
        assert_eq!(
            dechunk(b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n").unwrap(),
            b"abcde"
        );
        assert_eq!(dechunk(b"3\r\nabc\r\n2\r\nde"), None, "cut short");
        assert!(parse_answer(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc").is_none());
        assert_eq!(
            parse_answer(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"),
            Some((200, "abc".into()))
        );
    }
}
