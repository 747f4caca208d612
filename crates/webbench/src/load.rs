//! The load generator: requests to one URL from many client addresses, in
//! a closed model (C connections, each sending its next request when the
//! last one is answered) or an open model (requests started at a rate,
//! constant or Poisson, whether or not earlier ones were answered).
//!
//! As wrk does, the work is split over threads, each with an event loop of
//! its own (a tokio current-thread runtime) and its share of the
//! connections or of the rate. Requests are numbered across threads; the
//! k-th goes from client `k mod N`, round-robin, as the paper's generator
//! spread its requests over its 100 addresses.
//!
//! Times: every request records, from the run's start, when its connection
//! was begun and made, when its TLS handshake ended (`https://`), when the
//! request was sent, when the first and last
//! byte of the answer came and when the connection closed (for a fresh
//! connection per request: the server's close, seen as end of file, since
//! an HTTP/1.0-style server closes first). In the open model a request's
//! latency runs from the time it was *scheduled*, not from when it could
//! start: a server that falls behind delays the requests queued behind
//! and that waiting is counted (no coordinated omission).
//!
//! Protocols: HTTP/1.x over TCP (this module's loop, kept as lean as wrk's:
//! the socket read where it lies, no timer per request), HTTP/1.x over TLS
//! (the same loop, generic over the stream, [`crate::tls`]), and HTTP/2
//! over TLS or cleartext ([`crate::http2`]).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::rc::{Rc, Weak};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::{timeout, timeout_at, Instant};
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::http1::{request, ResponseParser};
use crate::tls::{self, TlsOptions};

/// What to ask for.
#[derive(Clone, Debug)]
pub struct Target {
    /// The server's address (the URL's host resolved).
    pub addr: SocketAddr,
    /// The `Host` header (HTTP/2: the `:authority`).
    pub host: String,
    /// The path with its query.
    pub path: String,
    /// `https://`: TLS first.
    pub https: bool,
    /// The host alone (no port, no brackets): the name TLS sends (SNI)
    /// and checks the certificate for.
    pub server_name: String,
}

impl Target {
    /// Parses an `http://` or `https://HOST[:PORT][/PATH]` URL and
    /// resolves its host.
    pub fn parse(url: &str) -> Result<Target, String> {
        let uri: http::Uri = url
            .parse()
            .map_err(|e| format!("{url:?}: not a URL ({e})"))?;
        let https = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            Some(s) => return Err(format!("{url:?}: scheme {s:?} not supported (http, https)")),
            None => return Err(format!("{url:?}: no scheme (expected http://HOST/PATH)")),
        };
        let auth = uri.authority().ok_or_else(|| format!("{url:?}: no host"))?;
        let port = auth.port_u16().unwrap_or(if https { 443 } else { 80 });
        let host = auth.host().trim_start_matches('[').trim_end_matches(']');
        let addr = (host, port)
            .to_socket_addrs()
            .map_err(|e| format!("{url:?}: cannot resolve {host:?}: {e}"))?
            .next()
            .ok_or_else(|| format!("{url:?}: {host:?} has no address"))?;
        let path = uri
            .path_and_query()
            .map_or("/".to_string(), |p| p.as_str().to_string());
        Ok(Target {
            addr,
            host: auth.as_str().to_string(),
            path: if path.is_empty() { "/".into() } else { path },
            https,
            server_name: host.to_string(),
        })
    }

    /// The URL again, as HTTP/2's pseudo-headers take it.
    fn uri(&self) -> Result<http::Uri, String> {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}{}", self.host, self.path)
            .parse()
            .map_err(|e| format!("{}{}: not a URI ({e})", self.host, self.path))
    }
}

/// How requests are started.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Model {
    /// This many connections, each sending a request when its last one is
    /// answered.
    Closed { connections: usize },
    /// Requests per second, evenly spaced or with exponential gaps.
    Open { rate: f64, poisson: bool },
}

/// A run's settings.
#[derive(Clone, Debug)]
pub struct Plan {
    pub target: Target,
    pub model: Model,
    /// Keep connections open between requests (HTTP/1.1, HTTP/2); else
    /// one connection per request, closed by the server (HTTP/1.x) or, once
    /// its one stream is answered, by the client (HTTP/2).
    pub keep_alive: bool,
    /// HTTP/2 instead of HTTP/1.1: over TLS when ALPN gives `h2`, over
    /// cleartext TCP with prior knowledge (h2c) for `http://`.
    pub http2: bool,
    /// HTTP/2: streams in flight on a connection at most (h2load's `-m`).
    pub streams: usize,
    /// `https://`: versions and how the certificate is checked.
    pub tls: TlsOptions,
    /// Stop starting requests after this long.
    pub duration: Option<Duration>,
    /// Stop after this many requests.
    pub requests: Option<u64>,
    /// Source addresses, used round-robin; none: the system's choice.
    pub clients: Vec<IpAddr>,
    /// Event-loop threads.
    pub threads: usize,
    /// Longest a connect, or a wait for the answer, may take.
    pub timeout: Duration,
    /// Keep every request's record.
    pub keep_records: bool,
    /// Pin load thread i to CPU `cpus[i % len]` (none: unpinned).
    pub cpus: Vec<usize>,
}

/// Why a request failed: its class, and what was wrong.
#[derive(Debug)]
pub(crate) struct Failure {
    pub class: ErrorClass,
    pub why: String,
}

impl Failure {
    pub(crate) fn timeout() -> Failure {
        Failure {
            class: ErrorClass::Timeout,
            why: "no answer within the timeout".into(),
        }
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Failure {
        Failure {
            class: ErrorClass::of(&e),
            why: e.to_string(),
        }
    }
}

/// Why a request failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// The server refused the connection (RST to the SYN).
    Refused,
    /// The connection was reset (or broken) after it was made.
    Reset,
    /// No connection or no whole answer within the timeout.
    Timeout,
    /// The answer broke HTTP's rules, or the connection closed inside it.
    Protocol,
    /// The TLS handshake failed (the certificate was rejected, no version
    /// or cipher in common...), or a TLS record was bad.
    Tls,
    /// A local error (no free port, no route...).
    Local,
}

impl ErrorClass {
    /// The name in results and records (as serde writes it).
    pub fn name(self) -> &'static str {
        match self {
            ErrorClass::Refused => "refused",
            ErrorClass::Reset => "reset",
            ErrorClass::Timeout => "timeout",
            ErrorClass::Protocol => "protocol",
            ErrorClass::Tls => "tls",
            ErrorClass::Local => "local",
        }
    }

    pub(crate) fn of(e: &io::Error) -> ErrorClass {
        // tokio-rustls hands rustls's errors on inside InvalidData.
        if e.get_ref().is_some_and(|inner| inner.is::<rustls::Error>()) {
            return ErrorClass::Tls;
        }
        match e.kind() {
            io::ErrorKind::ConnectionRefused => ErrorClass::Refused,
            io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe => ErrorClass::Reset,
            io::ErrorKind::TimedOut => ErrorClass::Timeout,
            io::ErrorKind::InvalidData | io::ErrorKind::UnexpectedEof => ErrorClass::Protocol,
            _ => ErrorClass::Local,
        }
    }
}

/// One request's times, in microseconds from the run's start (0: not
/// reached), and its outcome.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Record {
    /// Index of the client address.
    pub client: u32,
    /// When the open model scheduled it (the closed model: when it began).
    pub scheduled: u64,
    pub connect_start: u64,
    pub connect_done: u64,
    /// The TLS handshake's end (0: no TLS, or the connection was reused).
    pub tls_done: u64,
    pub request_sent: u64,
    pub first_byte: u64,
    pub last_byte: u64,
    pub close: u64,
    /// 0 when no answer came. HTTP/2: the response HEADERS frame's status;
    /// its first byte is that frame's arrival, its last the end of the
    /// stream.
    pub status: u16,
    pub body_bytes: u64,
    pub error: Option<ErrorClass>,
    /// The connection was reused (keep-alive).
    pub reused: bool,
}

/// Percentiles of one histogram, in milliseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Percentiles {
    pub count: u64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

impl Percentiles {
    fn of(h: &Histogram<u64>) -> Percentiles {
        if h.is_empty() {
            return Percentiles::default();
        }
        let ms = |us: u64| us as f64 / 1e3;
        Percentiles {
            count: h.len(),
            mean_ms: h.mean() / 1e3,
            p50_ms: ms(h.value_at_quantile(0.5)),
            p90_ms: ms(h.value_at_quantile(0.9)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            p999_ms: ms(h.value_at_quantile(0.999)),
            max_ms: ms(h.max()),
        }
    }
}

/// What a run measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Results {
    pub seconds: f64,
    /// Requests answered with any status.
    pub answered: u64,
    /// Of those, with a 2xx or 3xx status.
    pub ok: u64,
    pub requests_per_second: f64,
    /// Connections opened.
    pub connections: u64,
    pub body_bytes: u64,
    /// Failed requests by class.
    pub errors: BTreeMap<String, u64>,
    /// The first failure's message in each class.
    pub first_errors: BTreeMap<String, String>,
    /// TLS handshakes by the version agreed ("1.2", "1.3").
    pub tls_versions: BTreeMap<String, u64>,
    /// Answers by status.
    pub status: BTreeMap<u16, u64>,
    /// From the scheduled time (open) or the request's start (closed) to
    /// the answer's last byte.
    pub latency: Percentiles,
    /// Connect start to connect done.
    pub connect: Percentiles,
    /// Connect done to TLS done (the handshake), for new connections.
    pub tls: Percentiles,
    /// Request sent to first byte.
    pub first_byte: Percentiles,
    /// A connection's life as the client saw it, connect start to close,
    /// for connections that carried one request (the paper's mode).
    pub lifetime: Percentiles,
    /// Connections made after a SYN retransmission or more: connect times
    /// under 1 s, 1-3 s, 3-7 s, 7-15 s and longer (Linux retransmits a SYN
    /// after 1, 3, 7, 15 s: a full accept queue shows here, where the
    /// paper's FreeBSD sent resets).
    pub connect_buckets: [u64; 5],
    /// When the run started, ns since the epoch (the tap's clock).
    pub start_unix_ns: u64,
    /// CPU seconds the load threads used.
    pub generator_cpu_seconds: f64,
    /// Their CPU time over the run's wall time and threads: near 1, the
    /// generator, not the server, set the pace.
    pub generator_busy: f64,
    #[serde(skip)]
    pub records: Vec<Record>,
}

/// A thread's share of the counts.
pub(crate) struct Tally {
    latency: Histogram<u64>,
    lifetime: Histogram<u64>,
    cpu: Duration,
    connect: Histogram<u64>,
    tls: Histogram<u64>,
    first_byte: Histogram<u64>,
    records: Vec<Record>,
    keep: bool,
    connections: u64,
    answered: u64,
    ok: u64,
    body_bytes: u64,
    errors: BTreeMap<ErrorClass, u64>,
    first_errors: BTreeMap<ErrorClass, String>,
    tls_versions: BTreeMap<&'static str, u64>,
    status: BTreeMap<u16, u64>,
    connect_buckets: [u64; 5],
    /// The latest time in any record (us from the start): when the run's
    /// last request ended.
    last: u64,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("constant histogram bounds are valid")
}

impl Tally {
    fn new(keep: bool) -> Tally {
        Tally {
            latency: histogram(),
            lifetime: histogram(),
            cpu: Duration::ZERO,
            connect: histogram(),
            tls: histogram(),
            first_byte: histogram(),
            records: Vec::new(),
            keep,
            connections: 0,
            answered: 0,
            ok: 0,
            body_bytes: 0,
            errors: BTreeMap::new(),
            first_errors: BTreeMap::new(),
            tls_versions: BTreeMap::new(),
            status: BTreeMap::new(),
            connect_buckets: [0; 5],
            last: 0,
        }
    }

    pub(crate) fn add(&mut self, r: &Record) {
        self.last = self.last.max(
            [
                r.connect_done,
                r.request_sent,
                r.first_byte,
                r.last_byte,
                r.close,
            ]
            .into_iter()
            .max()
            .unwrap_or(0),
        );
        if r.connect_done > 0 && !r.reused {
            self.connections += 1;
            let us = r.connect_done.saturating_sub(r.connect_start).max(1);
            self.connect.saturating_record(us);
            self.connect_buckets[connect_bucket(us)] += 1;
            if r.tls_done > 0 {
                self.tls
                    .saturating_record(r.tls_done.saturating_sub(r.connect_done).max(1));
            }
        }
        match r.error {
            Some(e) => *self.errors.entry(e).or_default() += 1,
            None => {
                self.answered += 1;
                *self.status.entry(r.status).or_default() += 1;
                if (200..400).contains(&r.status) {
                    self.ok += 1;
                }
                self.body_bytes += r.body_bytes;
                self.latency
                    .saturating_record((r.last_byte - r.scheduled).max(1));
                if !r.reused && r.close >= r.connect_start && r.connect_start > 0 {
                    self.lifetime
                        .saturating_record((r.close - r.connect_start).max(1));
                }
                if r.first_byte >= r.request_sent {
                    self.first_byte
                        .saturating_record((r.first_byte - r.request_sent).max(1));
                }
            }
        }
        if self.keep {
            self.records.push(*r);
        }
    }

    /// Counts `r`, failed as `f` says.
    pub(crate) fn fail(&mut self, r: &mut Record, f: Failure) {
        r.error = Some(f.class);
        self.first_errors.entry(f.class).or_insert(f.why);
        self.add(r);
    }

    /// Counts a TLS handshake that agreed on `version`.
    pub(crate) fn handshake(&mut self, version: &'static str) {
        *self.tls_versions.entry(version).or_default() += 1;
    }

    fn merge(&mut self, o: Tally) {
        let _ = self.latency.add(&o.latency);
        let _ = self.connect.add(&o.connect);
        let _ = self.tls.add(&o.tls);
        let _ = self.first_byte.add(&o.first_byte);
        let _ = self.lifetime.add(&o.lifetime);
        self.cpu += o.cpu;
        self.last = self.last.max(o.last);
        for (a, b) in self.connect_buckets.iter_mut().zip(o.connect_buckets) {
            *a += b;
        }
        self.records.extend(o.records);
        self.connections += o.connections;
        self.answered += o.answered;
        self.ok += o.ok;
        self.body_bytes += o.body_bytes;
        for (k, v) in o.errors {
            *self.errors.entry(k).or_default() += v;
        }
        for (k, v) in o.first_errors {
            self.first_errors.entry(k).or_insert(v);
        }
        for (k, v) in o.tls_versions {
            *self.tls_versions.entry(k).or_default() += v;
        }
        for (k, v) in o.status {
            *self.status.entry(k).or_default() += v;
        }
    }
}

/// The bucket of a connect time in µs: under 1 s, 1-3, 3-7, 7-15 s, beyond.
fn connect_bucket(us: u64) -> usize {
    const EDGES: [u64; 4] = [1_000_000, 3_000_000, 7_000_000, 15_000_000];
    EDGES.iter().take_while(|&&e| us >= e).count()
}

/// The TLS side of a run: the connector (its configuration offering the
/// protocol's ALPN) and the server's name.
pub(crate) struct Tls {
    connector: TlsConnector,
    name: rustls::pki_types::ServerName<'static>,
}

#[cfg(test)]
#[test]
fn connect_times_fall_in_one_bucket_each() {
    let b: Vec<usize> = [
        1,
        999_999,
        1_000_000,
        1_000_447,
        2_999_999,
        3_000_000,
        7_000_000,
        15_000_000,
        u64::MAX,
    ]
    .iter()
    .map(|&us| connect_bucket(us))
    .collect();
    assert_eq!(b, [0, 0, 1, 1, 1, 2, 3, 4, 4]);
}

/// A rate of requests a second, as flags give it: above 0, at most
/// 10,000,000.
pub fn parse_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 10_000_000.0 => Ok(v),
        _ => Err(format!("{s:?}: above 0 and at most 10,000,000")),
    }
}

/// Now, in ns since the epoch: the clock of captured packets, on which a
/// run's steps and the tap's windows meet.
pub fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// What the threads share.
pub(crate) struct Shared {
    pub(crate) plan: Plan,
    request: Vec<u8>,
    /// The timeout in microseconds.
    timeout_us: u64,
    start: Instant,
    deadline: Option<Instant>,
    next: AtomicU64,
    stop: Arc<AtomicBool>,
    /// `https://`: how connections begin.
    pub(crate) tls: Option<Tls>,
    /// HTTP/2: the URL, for the request's pseudo-headers.
    pub(crate) uri: http::Uri,
}

impl Shared {
    pub(crate) fn micros(&self, t: Instant) -> u64 {
        (t.saturating_duration_since(self.start).as_micros() as u64).max(1)
    }

    pub(crate) fn now(&self) -> u64 {
        self.micros(Instant::now())
    }

    /// The next request's number, if the run goes on.
    pub(crate) fn take(&self) -> Option<u64> {
        if self.stop.load(Ordering::Relaxed) || self.deadline.is_some_and(|d| Instant::now() >= d) {
            return None;
        }
        let k = self.next.fetch_add(1, Ordering::Relaxed);
        match self.plan.requests {
            Some(max) if k >= max => None,
            _ => Some(k),
        }
    }

    pub(crate) fn client(&self, k: u64) -> (u32, Option<IpAddr>) {
        let n = self.plan.clients.len() as u64;
        if n == 0 {
            return (0, None);
        }
        let i = (k % n) as u32;
        (i, Some(self.plan.clients[i as usize]))
    }
}

/// Opens a connection from `from` (a source address, port chosen at
/// connect time so that each client address has the whole port range
/// towards the server).
async fn connect(to: SocketAddr, from: Option<IpAddr>) -> io::Result<TcpStream> {
    let domain = socket2::Domain::for_address(to);
    // Non-blocking from its creation (SOCK_NONBLOCK): two fcntl calls a
    // connection fewer, which counts when hundreds connect as a run starts.
    let s = socket2::Socket::new(
        domain,
        socket2::Type::STREAM.nonblocking(),
        Some(socket2::Protocol::TCP),
    )?;
    s.set_nodelay(true)?;
    if let Some(a) = from {
        // Without it, bind picks the port before it knows the server, and
        // one client address runs out of ports at 28,000 connections.
        capture::sockopt::bind_address_no_port(std::os::fd::AsFd::as_fd(&s))?;
        s.bind(&SocketAddr::new(a, 0).into())?;
    }
    let socket = TcpSocket::from_std_stream(std::net::TcpStream::from(s));
    socket.connect(to).await
}

/// A new TCP connection for `r`, within the timeout, its times in `r`.
pub(crate) async fn connect_timed(
    sh: &Shared,
    from: Option<IpAddr>,
    r: &mut Record,
) -> io::Result<TcpStream> {
    r.connect_start = sh.now();
    let stream = match timeout(sh.plan.timeout, connect(sh.plan.target.addr, from)).await {
        Ok(made) => made?,
        Err(_) => return Err(io::ErrorKind::TimedOut.into()),
    };
    r.connect_done = sh.now();
    Ok(stream)
}

/// The TLS handshake on a new connection, within the timeout; its end in
/// `r`, the version agreed in `tally`. A failure is a `tls` error unless
/// the connection itself failed (reset, timeout).
pub(crate) async fn tls_handshake(
    sh: &Shared,
    tls: &Tls,
    tcp: TcpStream,
    r: &mut Record,
    tally: &RefCell<Tally>,
) -> Result<TlsStream<TcpStream>, Failure> {
    match timeout(
        sh.plan.timeout,
        tls.connector.connect(tls.name.clone(), tcp),
    )
    .await
    {
        Err(_) => Err(Failure::timeout()),
        Ok(Err(e)) => Err(Failure {
            class: match ErrorClass::of(&e) {
                // The server hung up inside the handshake: it refused it.
                ErrorClass::Protocol | ErrorClass::Local => ErrorClass::Tls,
                c => c,
            },
            why: format!("TLS handshake: {e}"),
        }),
        Ok(Ok(s)) => {
            r.tls_done = sh.now();
            tally
                .borrow_mut()
                .handshake(tls::version_name(s.get_ref().1.protocol_version()));
            Ok(s)
        }
    }
}

/// A plain connection, and what the thread's watchdog knows of it.
struct Conn {
    stream: TcpStream,
    /// When the request in flight must have its answer (microseconds from
    /// the start; 0 when none is in flight).
    deadline: Cell<u64>,
    /// The watchdog shut the connection down: the request timed out.
    expired: Cell<bool>,
}

/// An HTTP/1.x connection: plain TCP, timed out by the watchdog, or TLS,
/// timed out by a timer on each read (TLS costs far more than a timer).
enum H1Conn {
    Plain(Rc<Conn>),
    /// With the buffer its plaintext is read into (a TLS read holds its
    /// buffer across waits, so it cannot be the thread's).
    Tls(Box<(TlsStream<TcpStream>, Vec<u8>)>),
}

/// A thread's connections, for its watchdog.
type Watched = Rc<RefCell<Vec<Weak<Conn>>>>;

/// Times requests out without a timer per request (wrk sets none either):
/// every quarter of the timeout it shuts down the connections whose
/// request is overdue, which ends their pending read. A request's timeout
/// is thus between 1 and 1.25 times the one asked.
async fn watchdog(sh: Arc<Shared>, watched: Watched) {
    let tick = (sh.plan.timeout / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
    loop {
        tokio::time::sleep(tick).await;
        let now = sh.now();
        watched.borrow_mut().retain(|w| {
            let Some(c) = w.upgrade() else {
                return false;
            };
            let d = c.deadline.get();
            if d != 0 && now > d && !c.expired.get() {
                c.expired.set(true);
                let _ = socket2::SockRef::from(&c.stream).shutdown(std::net::Shutdown::Both);
            }
            true
        });
    }
}

/// A new HTTP/1.x connection for `r`: TCP, then TLS for `https://`.
async fn open_h1(
    sh: &Shared,
    from: Option<IpAddr>,
    r: &mut Record,
    tally: &RefCell<Tally>,
    watched: &Watched,
) -> Result<H1Conn, Failure> {
    let stream = connect_timed(sh, from, r).await?;
    if let Some(tls) = &sh.tls {
        let s = tls_handshake(sh, tls, stream, r, tally).await?;
        return Ok(H1Conn::Tls(Box::new((s, vec![0; TLS_READ]))));
    }
    let c = Rc::new(Conn {
        stream,
        deadline: Cell::new(0),
        expired: Cell::new(false),
    });
    watched.borrow_mut().push(Rc::downgrade(&c));
    Ok(H1Conn::Plain(c))
}

/// One request on `conn` (or a new connection); the connection back if it
/// may be used again.
async fn exchange(
    sh: &Shared,
    k: u64,
    scheduled: u64,
    conn: Option<H1Conn>,
    tally: &RefCell<Tally>,
    watched: &Watched,
) -> Option<H1Conn> {
    let (client, from) = sh.client(k);
    let mut r = Record {
        client,
        scheduled,
        reused: conn.is_some(),
        ..Record::default()
    };
    let conn = match conn {
        Some(c) => c,
        None => match open_h1(sh, from, &mut r, tally, watched).await {
            Ok(c) => c,
            Err(f) => {
                tally.borrow_mut().fail(&mut r, f);
                return None;
            }
        },
    };
    let (outcome, conn) = match conn {
        H1Conn::Plain(c) => {
            c.deadline.set(sh.now() + sh.timeout_us);
            let outcome = answer(sh, &mut PlainWire(&c), &mut r).await;
            c.deadline.set(0);
            (outcome, H1Conn::Plain(c))
        }
        H1Conn::Tls(mut s) => {
            let (stream, buf) = &mut *s;
            let mut w = TlsWire {
                stream,
                buf,
                deadline: Instant::now() + sh.plan.timeout,
                expired: false,
            };
            let outcome = answer(sh, &mut w, &mut r).await;
            (outcome, H1Conn::Tls(s))
        }
    };
    let (keep, failure) = match outcome {
        Ok(keep) => (keep, None),
        Err(Answer::Expired) => (false, Some(Failure::timeout())),
        Err(Answer::Failed(e)) => (false, Some(Failure::from(e))),
    };
    if !keep {
        r.close = r.close.max(sh.now());
    }
    match failure {
        None => tally.borrow_mut().add(&r),
        Some(f) => tally.borrow_mut().fail(&mut r, f),
    }
    keep.then_some(conn)
}

/// A byte stream an HTTP/1.x exchange runs over. Generic, not a trait
/// object: the plain path compiles to the same code as if it were written
/// for `TcpStream` alone.
trait Wire {
    /// Reads what has come, waiting for it if nothing has, and hands it
    /// to `f` (an empty slice at the end of the stream); what `f` gave,
    /// and whether the read filled the buffer (more may be waiting).
    async fn read_with<R>(&mut self, f: impl FnMut(&[u8]) -> R) -> io::Result<(R, bool)>;
    /// Writes all of `bytes`.
    async fn write_all(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// The request's time ran out (the read or write that failed was cut).
    fn expired(&self) -> bool;
    /// The answer is complete and nothing is left to read: forget stale
    /// readiness.
    fn settle(&mut self);
}

/// The buffer a TLS connection's plaintext is read into.
const TLS_READ: usize = 16 * 1024;

thread_local! {
    /// The buffer every plain connection of a load thread reads into, as
    /// wrk's threads do: a read is made only once the socket is readable,
    /// and the bytes are parsed before the next wait. A buffer per
    /// connection (64 KiB each, 51 MiB at 800 connections) was written
    /// cold on every answer and faulted in page by page as the run began.
    static READ_BUF: RefCell<Box<[u8]>> = RefCell::new(vec![0; 64 * 1024].into_boxed_slice());
}

/// Plain TCP: read and written where readiness says, as wrk does.
struct PlainWire<'a>(&'a Conn);

impl Wire for PlainWire<'_> {
    async fn read_with<R>(&mut self, mut f: impl FnMut(&[u8]) -> R) -> io::Result<(R, bool)> {
        let s = &self.0.stream;
        loop {
            s.readable().await?;
            let read = READ_BUF
                .with_borrow_mut(|buf| s.try_read(buf).map(|n| (f(&buf[..n]), n == buf.len())));
            match read {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                r => return r,
            }
        }
    }

    async fn write_all(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        let s = &self.0.stream;
        while !bytes.is_empty() {
            s.writable().await?;
            match s.try_write(bytes) {
                Ok(n) => bytes = &bytes[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn expired(&self) -> bool {
        self.0.expired.get()
    }

    fn settle(&mut self) {
        // The socket is empty (no answer comes before the next request):
        // forget its stale readiness now, so that the next wait does not
        // begin with a read that finds nothing, one system call a request
        // (wrk makes none). The kernel signals anything that arrives later
        // anew.
        let _ = self.0.stream.try_io(tokio::io::Interest::READABLE, || {
            Err::<(), _>(io::ErrorKind::WouldBlock.into())
        });
    }
}

/// TLS: each read and write bounded by the request's deadline.
struct TlsWire<'a> {
    stream: &'a mut TlsStream<TcpStream>,
    buf: &'a mut [u8],
    deadline: Instant,
    expired: bool,
}

impl Wire for TlsWire<'_> {
    async fn read_with<R>(&mut self, mut f: impl FnMut(&[u8]) -> R) -> io::Result<(R, bool)> {
        let n = match timeout_at(self.deadline, self.stream.read(self.buf)).await {
            // A server that closes without close_notify (most HTTP/1.0
            // style servers, python's among them) ends a body that runs
            // until close; a cut response is still seen as cut by the
            // parser, which knows the length it expected.
            Ok(Err(e)) if e.kind() == io::ErrorKind::UnexpectedEof => 0,
            Ok(r) => r?,
            Err(_) => {
                self.expired = true;
                return Err(io::ErrorKind::TimedOut.into());
            }
        };
        Ok((f(&self.buf[..n]), n == self.buf.len()))
    }

    async fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        let s = &mut *self.stream;
        let written = timeout_at(self.deadline, async move {
            s.write_all(bytes).await?;
            s.flush().await
        })
        .await;
        written.unwrap_or_else(|_| {
            self.expired = true;
            Err(io::ErrorKind::TimedOut.into())
        })
    }

    fn expired(&self) -> bool {
        self.expired
    }

    fn settle(&mut self) {}
}

/// Why an answer was not had.
enum Answer {
    /// The request's time ran out.
    Expired,
    Failed(io::Error),
}

/// Sends the request and reads the answer; whether the connection may
/// carry another request. A read cut short by the timeout is `Expired`.
async fn answer<W: Wire>(sh: &Shared, w: &mut W, r: &mut Record) -> Result<bool, Answer> {
    let failed = |e: io::Error, w: &W| {
        if w.expired() {
            Answer::Expired
        } else {
            Answer::Failed(e)
        }
    };
    let invalid = |e| Answer::Failed(io::Error::new(io::ErrorKind::InvalidData, e));
    if let Err(e) = w.write_all(&sh.request).await {
        return Err(failed(e, w));
    }
    r.request_sent = sh.now();
    let mut p = ResponseParser::new(false);
    loop {
        // What came is parsed where it was read (`None` at the end).
        let (fed, full) = match w.read_with(|b| (!b.is_empty()).then(|| p.feed(b))).await {
            Ok(x) => x,
            Err(e) => return Err(failed(e, w)),
        };
        let now = sh.now();
        if w.expired() {
            return Err(Answer::Expired);
        }
        let Some(fed) = fed else {
            let resp = p.finish_at_close().map_err(invalid)?;
            r.last_byte = now;
            r.close = now;
            r.status = resp.status;
            r.body_bytes = resp.body_len;
            return Ok(false);
        };
        if r.first_byte == 0 {
            r.first_byte = now;
        }
        let fed = fed.map_err(invalid)?;
        if fed.done {
            r.last_byte = now;
            let resp = p.response();
            r.status = resp.status;
            r.body_bytes = resp.body_len;
            if sh.plan.keep_alive && !resp.closes {
                if !full {
                    w.settle();
                }
                return Ok(true);
            }
            // The server closes: wait for its FIN (end of file), so that
            // the close is its, as the paper's HTTP/1.0 server's was.
            while matches!(w.read_with(|b| !b.is_empty()).await, Ok((true, _))) {}
            r.close = sh.now();
            return Ok(false);
        }
    }
}

/// One thread's part of a closed-model run: `conns` connection loops.
async fn closed(sh: Arc<Shared>, conns: usize, tally: Rc<RefCell<Tally>>) {
    if sh.plan.http2 {
        return crate::http2::closed(sh, conns, tally).await;
    }
    let watched: Watched = Rc::default();
    let dog = tokio::task::spawn_local(watchdog(Arc::clone(&sh), Rc::clone(&watched)));
    // Connections still open when their loop ends are closed after the
    // thread's last answer, as wrk leaves its own open: their closes (and
    // the server's, which they cause) are not the requests' work.
    let ended: Rc<RefCell<Vec<H1Conn>>> = Rc::default();
    let mut tasks = Vec::new();
    for _ in 0..conns {
        let (sh, tally, watched) = (Arc::clone(&sh), Rc::clone(&tally), Rc::clone(&watched));
        let ended = Rc::clone(&ended);
        tasks.push(tokio::task::spawn_local(async move {
            let mut conn = None;
            while let Some(k) = sh.take() {
                let now = sh.now();
                conn = exchange(&sh, k, now, conn.take(), &tally, &watched).await;
            }
            ended.borrow_mut().extend(conn);
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    dog.abort();
    drop(ended);
}

/// One thread's part of an open-model run: `rate` requests a second.
async fn open(sh: Arc<Shared>, rate: f64, poisson: bool, seed: u64, tally: Rc<RefCell<Tally>>) {
    let watched: Watched = Rc::default();
    let dog = tokio::task::spawn_local(watchdog(Arc::clone(&sh), Rc::clone(&watched)));
    let mut rng = SmallRng::seed_from_u64(seed);
    let idle: Rc<RefCell<Vec<H1Conn>>> = Rc::default();
    let pool = crate::http2::Pool::default();
    let mut at = sh.start;
    let mut tasks = Vec::new();
    while let Some(k) = sh.take() {
        let gap = if poisson {
            -(1.0 - rng.gen::<f64>()).ln() / rate
        } else {
            1.0 / rate
        };
        tokio::time::sleep_until(at).await;
        let scheduled = sh.micros(at);
        at += Duration::from_secs_f64(gap);
        let (sh, tally) = (Arc::clone(&sh), Rc::clone(&tally));
        if sh.plan.http2 {
            let pool = pool.clone();
            tasks.push(tokio::task::spawn_local(async move {
                crate::http2::open_request(&sh, k, scheduled, &pool, &tally).await;
            }));
        } else {
            let (idle, watched) = (Rc::clone(&idle), Rc::clone(&watched));
            tasks.push(tokio::task::spawn_local(async move {
                let conn = if sh.plan.keep_alive {
                    idle.borrow_mut().pop()
                } else {
                    None
                };
                if let Some(c) = exchange(&sh, k, scheduled, conn, &tally, &watched).await {
                    idle.borrow_mut().push(c);
                }
            }));
        }
        tasks.retain(|t| !t.is_finished());
    }
    for t in tasks {
        let _ = t.await;
    }
    dog.abort();
}

/// How long a load thread spins before it sleeps, when answers come to it
/// close together.
const SPIN: Duration = Duration::from_micros(5);

/// Other load threads awake, per CPU they share, at which a thread that
/// runs out of work sleeps without spinning. Measured with both tools'
/// threads on one CPU (`bench web`, nginx's worker on the other), medians
/// of kansoku / wrk: never spinning there, 0.99 at 2 threads and 10
/// connections; spinning whatever the others do, 1.06 there but 0.95 at
/// 8 threads and 800 connections; a limit of 1, 0.97-1.00 and 0.98-0.99;
/// of 2, 1.10 and 0.98 (3 threads, 30 connections: 1.04 against 1.01).
const AWAKE_PER_CPU: usize = 2;

/// Answers come close together when the thread's sleeps have lasted less
/// than this on average (in ns).
const CLOSE_TOGETHER_NS: u64 = 50_000;

/// Whether a load thread should spin before it sleeps: a moving mean of
/// how long its sleeps last, the spin itself not counted.
#[derive(Clone, Copy, Debug)]
struct Spinner {
    mean_sleep_ns: u64,
}

impl Spinner {
    /// A thread starts without spinning, until its sleeps show it busy.
    const START: Spinner = Spinner {
        mean_sleep_ns: u64::MAX / 16,
    };

    fn spins(self) -> bool {
        self.mean_sleep_ns < CLOSE_TOGETHER_NS
    }

    /// A sleep of `ns` ended; the mean weighs the last eight most.
    fn slept(self, ns: u64) -> Spinner {
        let m = self.mean_sleep_ns;
        Spinner {
            mean_sleep_ns: m - m / 8 + ns.min(u64::MAX / 16) / 8,
        }
    }
}

thread_local! {
    static SPINNER: Cell<Spinner> = const { Cell::new(Spinner::START) };
    /// When the thread's last spin ended (it then went to sleep).
    static SPUN: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Spin, then sleep: when a load thread runs out of work while answers
/// are coming close together, it spins for [`SPIN`] before it waits in
/// `epoll_wait`. An answer that arrives during the spin finds the thread
/// awake, so the server that sends it does not pay for waking the
/// generator: on a host shared with the server (loopback, the usual
/// case), each wake-up costs the server's core a few microseconds in
/// the kernel, which is where a generator sleeping after every answer
/// lost ~3% of the server's rate beside wrk (a slower client that sleeps
/// less). An answer that arrives during the spin waits at most 5 us for
/// it to end; a thread whose sleeps are long (a low open-model rate, a
/// delay) never spins. Nor does a thread while [`AWAKE_PER_CPU`] other
/// load threads a CPU are awake (`awake`, `cpus`): its spin would only
/// keep them, with answers waiting, off the CPUs.
fn spin_before_parking(rt: &mut tokio::runtime::Builder, awake: Arc<AtomicUsize>, cpus: usize) {
    let parked = Arc::clone(&awake);
    rt.on_thread_park(move || {
        parked.fetch_sub(1, Ordering::Relaxed);
        let others_leave_a_cpu = || parked.load(Ordering::Relaxed) < AWAKE_PER_CPU * cpus;
        if SPINNER.get().spins() && others_leave_a_cpu() {
            let begun = Instant::now();
            // The clock read every 32 pauses (a microsecond or so): a read
            // each time made the spin a stream of clock reads.
            while begun.elapsed() < SPIN && others_leave_a_cpu() {
                for _ in 0..32 {
                    std::hint::spin_loop();
                }
            }
        }
        SPUN.set(Some(Instant::now()));
    });
    rt.on_thread_unpark(move || {
        awake.fetch_add(1, Ordering::Relaxed);
        if let Some(spun) = SPUN.take() {
            SPINNER.set(SPINNER.get().slept(spun.elapsed().as_nanos() as u64));
        }
    });
}

/// How many CPUs the load threads can run on: the distinct CPUs they are
/// pinned to, or those allowed to the calling thread, which they inherit.
fn cpus_for_load(pinned: &[usize]) -> usize {
    if pinned.is_empty() {
        capture::usage::allowed_cpus().map_or(1, |c| c.len().max(1))
    } else {
        let mut c = pinned.to_vec();
        c.sort_unstable();
        c.dedup();
        c.len()
    }
}

#[test]
fn the_cpus_for_load_are_the_distinct_pinned_ones_or_those_allowed() {
    assert_eq!(cpus_for_load(&[1, 1, 0, 1]), 2);
    assert_eq!(cpus_for_load(&[3]), 1);
    assert_eq!(
        cpus_for_load(&[]),
        capture::usage::allowed_cpus().unwrap().len()
    );
}

#[test]
fn threads_spin_only_while_answers_come_close_together() {
    let mut s = Spinner::START;
    assert!(!s.spins());
    for _ in 0..400 {
        s = s.slept(2_000);
    }
    assert!(s.spins(), "{s:?}");
    // Sleeps of a millisecond (an open model at a low rate) end it.
    for _ in 0..20 {
        s = s.slept(1_000_000);
    }
    assert!(!s.spins(), "{s:?}");
    // One long sleep among short ones does not.
    for _ in 0..100 {
        s = s.slept(1_000);
    }
    let s = s.slept(200_000);
    assert!(s.spins(), "{s:?}");
}

/// Runs `plan` until its duration or request count is reached, or `stop`
/// is set.
pub fn run(plan: &Plan, stop: Arc<AtomicBool>) -> io::Result<Results> {
    let threads = plan.threads.max(1);
    let invalid = |e: String| io::Error::new(io::ErrorKind::InvalidInput, e);
    let tls = if plan.target.https {
        let alpn: &[u8] = if plan.http2 { b"h2" } else { b"http/1.1" };
        Some(Tls {
            connector: TlsConnector::from(tls::client_config(&plan.tls, alpn).map_err(invalid)?),
            name: tls::server_name(&plan.target.server_name).map_err(invalid)?,
        })
    } else {
        None
    };
    let uri = plan.target.uri().map_err(invalid)?;
    let start = Instant::now();
    let start_unix_ns = unix_ns();
    let shared = Shared {
        tls,
        uri,
        request: request("GET", &plan.target.host, &plan.target.path, plan.keep_alive),
        timeout_us: plan.timeout.as_micros() as u64,
        plan: plan.clone(),
        start,
        deadline: plan.duration.map(|d| start + d),
        next: AtomicU64::new(0),
        stop,
    };
    let shared = Arc::new(shared);
    // Load threads awake (each starts so), and the CPUs they share.
    let awake = Arc::new(AtomicUsize::new(threads));
    let cpus = cpus_for_load(&plan.cpus);
    let mut handles = Vec::new();
    for t in 0..threads {
        let sh = Arc::clone(&shared);
        let awake = Arc::clone(&awake);
        let share = move |total: usize| total / threads + usize::from(t < total % threads);
        let model = plan.model;
        handles.push(
            std::thread::Builder::new()
                .name(format!("webbench-{t}"))
                .spawn(move || -> io::Result<Tally> {
                    let mut rt = tokio::runtime::Builder::new_current_thread();
                    spin_before_parking(&mut rt, awake, cpus);
                    let rt = rt.enable_all().build()?;
                    let local = tokio::task::LocalSet::new();
                    if !sh.plan.cpus.is_empty() {
                        capture::usage::pin_current_thread(sh.plan.cpus[t % sh.plan.cpus.len()])?;
                    }
                    let tally = Rc::new(RefCell::new(Tally::new(sh.plan.keep_records)));
                    local.block_on(&rt, async {
                        match model {
                            Model::Closed { connections } => {
                                closed(sh, share(connections), Rc::clone(&tally)).await
                            }
                            Model::Open { rate, poisson } => {
                                open(
                                    sh,
                                    rate / threads as f64,
                                    poisson,
                                    t as u64 + 1,
                                    Rc::clone(&tally),
                                )
                                .await
                            }
                        }
                    });
                    let mut tally = Rc::try_unwrap(tally)
                        .map_or_else(|_| Tally::new(false), RefCell::into_inner);
                    tally.cpu = capture::usage::thread_cpu_time().unwrap_or_default();
                    Ok(tally)
                })?,
        );
    }
    let mut total = Tally::new(plan.keep_records);
    for h in handles {
        match h.join() {
            Ok(Ok(t)) => total.merge(t),
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(io::Error::other("a load thread panicked")),
        }
    }
    // The run lasted until its last request ended (an answer, an error, a
    // close): the threads' teardown after it (closing kept-alive
    // connections, joining) is not the requests' time, as wrk's rate does
    // not count its own.
    let elapsed = start.elapsed().as_secs_f64();
    let seconds = if total.last > 0 {
        (total.last as f64 / 1e6).min(elapsed)
    } else {
        elapsed
    };
    let mut records = std::mem::take(&mut total.records);
    records.sort_by_key(|r| r.scheduled);
    Ok(Results {
        seconds,
        answered: total.answered,
        ok: total.ok,
        requests_per_second: total.answered as f64 / seconds,
        connections: total.connections,
        body_bytes: total.body_bytes,
        errors: total
            .errors
            .iter()
            .map(|(k, v)| (k.name().to_string(), *v))
            .collect(),
        first_errors: total
            .first_errors
            .iter()
            .map(|(k, v)| (k.name().to_string(), v.clone()))
            .collect(),
        tls_versions: total
            .tls_versions
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect(),
        status: total.status.clone(),
        latency: Percentiles::of(&total.latency),
        connect: Percentiles::of(&total.connect),
        tls: Percentiles::of(&total.tls),
        first_byte: Percentiles::of(&total.first_byte),
        lifetime: Percentiles::of(&total.lifetime),
        connect_buckets: total.connect_buckets,
        start_unix_ns,
        generator_cpu_seconds: total.cpu.as_secs_f64(),
        generator_busy: total.cpu.as_secs_f64() / (elapsed * threads as f64).max(1e-9),
        records,
    })
}
