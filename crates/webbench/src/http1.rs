//! HTTP/1.0 and HTTP/1.1 on the client's side (RFC 9112): the request a
//! benchmark sends, and a response parser fed bytes as they come.
//!
//! The parser is a push parser: [`ResponseParser::feed`] takes what a read
//! returned and says how much of it belonged to the response, so that
//! bytes after it (a pipelined response) stay with the caller. The head is
//! parsed by `httparse` (status line and headers); the body is framed as
//! RFC 9112 §6.3 says: no body for 1xx (skipped, then the real response
//! follows), 204 and 304 and the answer to HEAD; `Transfer-Encoding:
//! chunked` (chunk sizes, extensions and trailers read, the body counted);
//! else `Content-Length`; else until the connection closes (HTTP/1.0
//! style, [`ResponseParser::finish_at_close`]). A response that breaks
//! these rules is an error naming what was wrong, never a panic.

use std::fmt;

/// Header lines a response may have at most.
pub const MAX_HEADERS: usize = 64;
/// The most bytes a head (status line and headers) may take.
pub const MAX_HEAD: usize = 64 * 1024;

/// Why a response cannot be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResponseError {
    /// The status line or a header is malformed (httparse's reason).
    Head(String),
    /// The head is longer than [`MAX_HEAD`].
    HeadTooLong,
    /// `Content-Length` is not a number, or two disagree.
    BadContentLength,
    /// A chunk size line is malformed, or a chunk is not followed by CRLF.
    BadChunk,
    /// The connection closed before the response's end.
    Truncated,
}

impl fmt::Display for ResponseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResponseError::Head(why) => write!(f, "malformed response head: {why}"),
            ResponseError::HeadTooLong => write!(f, "response head over {MAX_HEAD} bytes"),
            ResponseError::BadContentLength => write!(f, "bad Content-Length"),
            ResponseError::BadChunk => write!(f, "malformed chunked body"),
            ResponseError::Truncated => write!(f, "connection closed inside the response"),
        }
    }
}

impl std::error::Error for ResponseError {}

/// How the body ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Body {
    /// This many bytes left.
    Length(u64),
    /// Chunked: where in the chunk grammar.
    Chunked(Chunk),
    /// Until the connection closes.
    UntilClose,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chunk {
    /// Reading a size line (the digits so far, whether an extension began).
    Size {
        size: u64,
        digits: u8,
        ext: bool,
        cr: bool,
    },
    /// Inside a chunk's data, this many bytes left.
    Data(u64),
    /// After the data, expecting CR then LF.
    DataEnd { cr: bool },
    /// Trailer lines after the last chunk (whether the line has content, a CR seen).
    Trailer { any: bool, cr: bool },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Head,
    Body(Body),
    Done,
}

/// What a complete response was.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    /// HTTP/1.x minor version.
    pub minor: u8,
    /// Head bytes and body bytes (chunked: the data only).
    pub head_len: u64,
    pub body_len: u64,
    /// The server will close the connection after it (`Connection: close`,
    /// or HTTP/1.0 without keep-alive, or a body that ends at close).
    pub closes: bool,
}

/// Parses one response (and the 1xx ones before it).
#[derive(Clone, Debug)]
pub struct ResponseParser {
    head_request: bool,
    state: State,
    head: Vec<u8>,
    resp: Response,
}

/// What [`ResponseParser::feed`] made of the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fed {
    /// Bytes of the input that belong to this response.
    pub used: usize,
    /// The response is complete.
    pub done: bool,
    /// The head (of the final response) is complete: the first byte of
    /// the answer has come.
    pub head_done: bool,
}

fn hex(b: u8) -> Option<u64> {
    (b as char).to_digit(16).map(u64::from)
}

impl ResponseParser {
    /// A parser for the answer to a request; `head_request` if it was HEAD.
    pub fn new(head_request: bool) -> ResponseParser {
        ResponseParser {
            head_request,
            state: State::Head,
            head: Vec::new(),
            resp: Response::default(),
        }
    }

    /// The response so far (complete once `feed` said `done`).
    pub fn response(&self) -> Response {
        self.resp
    }

    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Feeds bytes that arrived.
    pub fn feed(&mut self, mut input: &[u8]) -> Result<Fed, ResponseError> {
        let mut used = 0;
        loop {
            match self.state {
                State::Done => break,
                State::Head if self.head.is_empty() => {
                    // The usual case: the whole head in one read, parsed
                    // where it lies, nothing copied.
                    match self.parse_head(input)? {
                        Some(head_len) => {
                            used += head_len;
                            input = &input[head_len..];
                        }
                        None => {
                            let take = input.len().min(MAX_HEAD + 4);
                            self.head.extend_from_slice(&input[..take]);
                            if self.head.len() > MAX_HEAD {
                                return Err(ResponseError::HeadTooLong);
                            }
                            used += take;
                            break;
                        }
                    }
                }
                State::Head => {
                    // A head split over reads: gathered, parsed again.
                    let before = self.head.len();
                    let take = input.len().min(MAX_HEAD + 4 - before.min(MAX_HEAD + 4));
                    self.head.extend_from_slice(&input[..take]);
                    let head = std::mem::take(&mut self.head);
                    let parsed = self.parse_head(&head);
                    self.head = head;
                    match parsed? {
                        Some(head_len) => {
                            let consumed = head_len - before;
                            used += consumed;
                            input = &input[consumed..];
                            self.head.clear();
                        }
                        None => {
                            if self.head.len() > MAX_HEAD {
                                return Err(ResponseError::HeadTooLong);
                            }
                            used += take;
                            break;
                        }
                    }
                }
                State::Body(body) => {
                    let (n, next) = self.body(body, input)?;
                    used += n;
                    input = &input[n..];
                    self.state = next;
                    if input.is_empty() || self.state == State::Done {
                        break;
                    }
                }
            }
        }
        let head_done = !matches!(self.state, State::Head);
        Ok(Fed {
            used,
            done: self.state == State::Done,
            head_done,
        })
    }

    /// The connection closed: a body that runs until close ends here;
    /// anything else unfinished is truncated.
    pub fn finish_at_close(&mut self) -> Result<Response, ResponseError> {
        match self.state {
            State::Done => Ok(self.resp),
            State::Body(Body::UntilClose) => {
                self.state = State::Done;
                Ok(self.resp)
            }
            _ => Err(ResponseError::Truncated),
        }
    }

    /// Tries the head at the start of `buf`: its length when complete.
    fn parse_head(&mut self, buf: &[u8]) -> Result<Option<usize>, ResponseError> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut r = httparse::Response::new(&mut headers);
        let len = match r.parse(buf) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(e) => return Err(ResponseError::Head(e.to_string())),
        };
        let status = r.code.unwrap_or(0);
        let minor = r.version.unwrap_or(1);
        let mut length: Option<u64> = None;
        let mut chunked = false;
        let mut close = minor == 0;
        for h in r.headers.iter() {
            let v = std::str::from_utf8(h.value).unwrap_or("").trim();
            if h.name.eq_ignore_ascii_case("content-length") {
                let n: u64 = v.parse().map_err(|_| ResponseError::BadContentLength)?;
                if length.is_some_and(|l| l != n) {
                    return Err(ResponseError::BadContentLength);
                }
                length = Some(n);
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = v
                    .rsplit(',')
                    .next()
                    .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"));
            } else if h.name.eq_ignore_ascii_case("connection") {
                for token in v.split(',').map(str::trim) {
                    if token.eq_ignore_ascii_case("close") {
                        close = true;
                    } else if token.eq_ignore_ascii_case("keep-alive") && minor == 0 {
                        close = false;
                    }
                }
            }
        }
        self.resp.head_len += len as u64;
        if (100..200).contains(&status) && status != 101 {
            // An interim response: the final one follows.
            return Ok(Some(len));
        }
        self.resp.status = status;
        self.resp.minor = minor;
        self.resp.closes = close;
        let no_body = self.head_request || status == 204 || status == 304 || status == 101;
        self.state = if no_body {
            State::Done
        } else if chunked {
            State::Body(Body::Chunked(Chunk::Size {
                size: 0,
                digits: 0,
                ext: false,
                cr: false,
            }))
        } else if let Some(n) = length {
            if n == 0 {
                State::Done
            } else {
                State::Body(Body::Length(n))
            }
        } else {
            self.resp.closes = true;
            State::Body(Body::UntilClose)
        };
        Ok(Some(len))
    }

    /// Consumes body bytes: how many, and the state after them.
    fn body(&mut self, body: Body, input: &[u8]) -> Result<(usize, State), ResponseError> {
        match body {
            Body::UntilClose => {
                self.resp.body_len += input.len() as u64;
                Ok((input.len(), State::Body(Body::UntilClose)))
            }
            Body::Length(left) => {
                let n = (input.len() as u64).min(left);
                self.resp.body_len += n;
                let next = if n == left {
                    State::Done
                } else {
                    State::Body(Body::Length(left - n))
                };
                Ok((n as usize, next))
            }
            Body::Chunked(mut c) => {
                let mut i = 0;
                while i < input.len() {
                    let b = input[i];
                    c = match c {
                        Chunk::Size {
                            size,
                            digits,
                            ext,
                            cr,
                        } => {
                            if cr {
                                if b != b'\n' || digits == 0 {
                                    return Err(ResponseError::BadChunk);
                                }
                                i += 1;
                                if size == 0 {
                                    Chunk::Trailer {
                                        any: false,
                                        cr: false,
                                    }
                                } else {
                                    Chunk::Data(size)
                                }
                            } else if b == b'\r' {
                                i += 1;
                                Chunk::Size {
                                    size,
                                    digits,
                                    ext,
                                    cr: true,
                                }
                            } else if ext {
                                i += 1;
                                Chunk::Size {
                                    size,
                                    digits,
                                    ext,
                                    cr,
                                }
                            } else if b == b';' || b == b' ' || b == b'\t' {
                                i += 1;
                                Chunk::Size {
                                    size,
                                    digits,
                                    ext: true,
                                    cr,
                                }
                            } else {
                                let d = hex(b).ok_or(ResponseError::BadChunk)?;
                                if digits >= 15 {
                                    return Err(ResponseError::BadChunk);
                                }
                                i += 1;
                                Chunk::Size {
                                    size: size * 16 + d,
                                    digits: digits + 1,
                                    ext,
                                    cr,
                                }
                            }
                        }
                        Chunk::Data(left) => {
                            let n = ((input.len() - i) as u64).min(left);
                            self.resp.body_len += n;
                            i += n as usize;
                            if n == left {
                                Chunk::DataEnd { cr: false }
                            } else {
                                Chunk::Data(left - n)
                            }
                        }
                        Chunk::DataEnd { cr } => {
                            i += 1;
                            match (cr, b) {
                                (false, b'\r') => Chunk::DataEnd { cr: true },
                                (true, b'\n') => Chunk::Size {
                                    size: 0,
                                    digits: 0,
                                    ext: false,
                                    cr: false,
                                },
                                _ => return Err(ResponseError::BadChunk),
                            }
                        }
                        Chunk::Trailer { any, cr } => {
                            i += 1;
                            if cr {
                                if b != b'\n' {
                                    return Err(ResponseError::BadChunk);
                                }
                                if !any {
                                    return Ok((i, State::Done));
                                }
                                Chunk::Trailer {
                                    any: false,
                                    cr: false,
                                }
                            } else if b == b'\r' {
                                Chunk::Trailer { any, cr: true }
                            } else {
                                Chunk::Trailer {
                                    any: true,
                                    cr: false,
                                }
                            }
                        }
                    };
                }
                Ok((i, State::Body(Body::Chunked(c))))
            }
        }
    }
}

/// A GET (or HEAD) request for `path` on `host`, HTTP/1.1, kept alive (the
/// default of HTTP/1.1) or with `Connection: close`. Nothing else: every
/// header is work for the server measured (nginx looks each one up), and a
/// request as short as wrk's puts the two on the same footing.
pub fn request(method: &str, host: &str, path: &str, keep_alive: bool) -> Vec<u8> {
    format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\n{}\r\n",
        if keep_alive {
            ""
        } else {
            "Connection: close\r\n"
        }
    )
    .into_bytes()
}

/// What the `http_response` fuzz target and the corpus replay check: any
/// bytes, fed whole and fed one byte at a time, give the same answer, and
/// a complete response never claims more than it was given.
pub fn fuzz_check(data: &[u8]) {
    let whole = {
        let mut p = ResponseParser::new(false);
        p.feed(data).map(|f| (f, p.response()))
    };
    let mut p = ResponseParser::new(false);
    let mut used = 0;
    let mut bytewise = None;
    for (i, b) in data.iter().enumerate() {
        match p.feed(std::slice::from_ref(b)) {
            Ok(f) => {
                used += f.used;
                if f.done {
                    bytewise = Some(Ok((i + 1, p.response())));
                    break;
                }
            }
            Err(e) => {
                bytewise = Some(Err(e));
                break;
            }
        }
    }
    match (whole, bytewise) {
        (Ok((f, r)), Some(Ok((n, r2)))) => {
            assert!(f.done);
            assert_eq!(f.used, n);
            assert_eq!(r, r2);
            assert!(r.head_len + r.body_len <= data.len() as u64);
        }
        (Ok((f, _)), None) => {
            assert!(!f.done);
            assert_eq!(f.used, used);
        }
        // An error found whole is found byte by byte (a head error may be
        // found on a shorter prefix, with the same kind).
        (Err(a), Some(Err(b))) => {
            assert_eq!(std::mem::discriminant(&a), std::mem::discriminant(&b))
        }
        (a, b) => panic!("whole {a:?}, byte by byte {b:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(bytes: &[u8]) -> Result<(Fed, Response), ResponseError> {
        let mut p = ResponseParser::new(false);
        let f = p.feed(bytes)?;
        Ok((f, p.response()))
    }

    #[test]
    fn a_content_length_body_ends_where_it_says() {
        let r = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1";
        let (f, resp) = parse_all(r).unwrap();
        assert!(f.done && f.head_done);
        assert_eq!(f.used, r.len() - 8);
        assert_eq!((resp.status, resp.body_len, resp.closes), (200, 5, false));
    }

    #[test]
    fn chunked_bodies_with_extensions_and_trailers() {
        let r = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-T: 1\r\n\r\nrest";
        let (f, resp) = parse_all(r).unwrap();
        assert!(f.done);
        assert_eq!(f.used, r.len() - 4);
        assert_eq!(resp.body_len, 31);
        // One byte at a time, the same.
        fuzz_check(r);
    }

    #[test]
    fn interim_responses_are_skipped_and_bodyless_ones_end_at_the_head() {
        let r = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n";
        let (f, resp) = parse_all(r).unwrap();
        assert!(f.done);
        assert_eq!(resp.status, 204);
        let mut p = ResponseParser::new(true);
        let f = p
            .feed(b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n")
            .unwrap();
        assert!(f.done);
    }

    #[test]
    fn a_body_without_length_runs_until_close() {
        let mut p = ResponseParser::new(false);
        let f = p.feed(b"HTTP/1.0 200 OK\r\n\r\nabc").unwrap();
        assert!(f.head_done && !f.done);
        let r = p.finish_at_close().unwrap();
        assert_eq!((r.body_len, r.closes, r.minor), (3, true, 0));
        let mut p = ResponseParser::new(false);
        p.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
            .unwrap();
        assert_eq!(p.finish_at_close(), Err(ResponseError::Truncated));
    }

    #[test]
    fn connection_headers_decide_whether_the_server_closes() {
        let (_, r) =
            parse_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
                .unwrap();
        assert!(r.closes);
        let (_, r) =
            parse_all(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n")
                .unwrap();
        assert!(!r.closes);
    }

    #[test]
    fn malformed_responses_are_errors() {
        for (bad, kind) in [
            (&b"HTTP/1.1 2x0 OK\r\n\r\n"[..], "head"),
            (b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", "length"),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                "length",
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                "chunk",
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab",
                "chunk",
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff1\r\n",
                "chunk",
            ),
        ] {
            let e = parse_all(bad).unwrap_err();
            let s = e.to_string();
            assert!(
                match kind {
                    "head" => matches!(e, ResponseError::Head(_)),
                    "length" => e == ResponseError::BadContentLength,
                    _ => e == ResponseError::BadChunk,
                },
                "{bad:?}: {s}"
            );
        }
        let mut long = b"HTTP/1.1 200 OK\r\n".to_vec();
        while long.len() <= MAX_HEAD + 10 {
            long.extend_from_slice(b"X-A: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
        }
        let e = parse_all(&long).unwrap_err();
        assert!(
            matches!(e, ResponseError::HeadTooLong | ResponseError::Head(_)),
            "{e}"
        );
    }

    #[test]
    fn every_cut_and_flipped_byte_of_a_response_is_handled() {
        let r = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
        for cut in 0..=r.len() {
            fuzz_check(&r[..cut]);
        }
        for i in 0..r.len() {
            let mut f = r.to_vec();
            f[i] ^= 0x20;
            fuzz_check(&f);
        }
    }

    #[test]
    fn random_mutations_agree_whole_and_byte_by_byte() {
        use rand::{Rng, SeedableRng};
        let seeds: [&[u8]; 3] = [
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
            b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok",
        ];
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        for _ in 0..5000 {
            let mut v = seeds[rng.gen_range(0..seeds.len())].to_vec();
            for _ in 0..rng.gen_range(1..4) {
                if v.is_empty() {
                    break;
                }
                let i = rng.gen_range(0..v.len());
                match rng.gen_range(0..3) {
                    0 => v[i] = rng.gen(),
                    1 => {
                        v.remove(i);
                    }
                    _ => v.insert(i, b"\r\n:0aZ; "[rng.gen_range(0..8)]),
                }
            }
            fuzz_check(&v);
        }
    }

    #[test]
    fn requests_say_their_connection_mode() {
        let r = String::from_utf8(request("GET", "127.0.0.1:80", "/x", false)).unwrap();
        assert!(r.starts_with("GET /x HTTP/1.1\r\nHost: 127.0.0.1:80\r\n"));
        assert!(r.ends_with("Connection: close\r\n\r\n"));
        // Kept alive: HTTP/1.1's default, nothing but the host, as wrk asks.
        let k = String::from_utf8(request("GET", "127.0.0.1:80", "/x", true)).unwrap();
        assert_eq!(k, "GET /x HTTP/1.1\r\nHost: 127.0.0.1:80\r\n\r\n");
    }
}
