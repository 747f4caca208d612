//! Network tests of netperf's kinds, kansoku's own, for `kansoku bench
//! ipsec`: [`Test::TcpStream`] and [`Test::UdpStream`] (bulk transfer:
//! throughput received; for UDP, what was sent and lost too),
//! [`Test::TcpRr`] and [`Test::UdpRr`] (request/response: transactions per
//! second), and [`Test::UdpRate`], a constant-rate UDP stream (the paper's
//! DV video). The paper ran netperf 2.x; these follow its definitions:
//! payload bytes (not headers) over the test's time; request/response is
//! one transaction in flight, the client waiting for each response.
//!
//! Beyond netperf, every test also measures time per second: each stream
//! message and datagram carries the time it was sent (both ends share the
//! host's monotonic clock, whatever namespace they run in), so the
//! receiver knows the one-way delay of each (for TCP, of each whole
//! message, socket buffers included), and the mean absolute difference of
//! consecutive delays, the jitter (RFC 3393's IP delay variation); a
//! request/response client times each round trip.
//!
//! Each end is a thread of this process, put into its network namespace
//! ([`capture::netns::enter`]) and pinned to its core (the paper's two
//! hosts) before it opens its socket. The server binds first; the client
//! starts once the server is ready. UDP request/response, where a lost
//! datagram would stall netperf for good, gives up on a response after
//! [`RR_TIMEOUT`] and counts the transaction as lost.
//!
//! Every wait is bounded: a test ends at its time plus a few seconds of
//! grace whatever the network does, or at the stop flag.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::Serialize;
use socket2::{Domain, Protocol, Socket, Type};

/// How long a UDP request/response client waits for a response before it
/// counts the transaction as lost and sends the next request.
pub const RR_TIMEOUT: Duration = Duration::from_millis(50);

/// How long a receiver waits for more after the sender stopped.
const DRAIN: Duration = Duration::from_millis(300);

/// Grace past a test's time before it is cut short whatever happens.
const GRACE: Duration = Duration::from_secs(5);

/// Bytes of a message's header: the send time (ns since the test's start)
/// and a sequence number. Messages shorter than this carry what fits.
const STAMP: usize = 16;

/// One test and its parameters (sizes in bytes).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Test {
    /// `msg`-byte writes for the whole time; socket buffers of `buf` at
    /// both ends (netperf's -m, -s and -S).
    TcpStream {
        msg: usize,
        buf: usize,
    },
    /// `msg`-byte datagrams as fast as the sender's socket takes them;
    /// buffers of `buf` at both ends.
    UdpStream {
        msg: usize,
        buf: usize,
    },
    /// A `req`-byte request, a `resp`-byte response, one at a time.
    TcpRr {
        req: usize,
        resp: usize,
    },
    UdpRr {
        req: usize,
        resp: usize,
    },
    /// `payload`-byte datagrams at `ip_bits_per_s` counting IP packets
    /// (payload, UDP and IP headers).
    UdpRate {
        payload: usize,
        ip_bits_per_s: f64,
    },
}

impl Test {
    /// The test as netperf names it, with its sizes.
    pub fn name(&self) -> String {
        match *self {
            Test::TcpStream { msg, buf } => format!("TCP_STREAM {msg} B, buffers {buf}"),
            Test::UdpStream { msg, buf } => format!("UDP_STREAM {msg} B, buffers {buf}"),
            Test::TcpRr { req, resp } => format!("TCP_RR {req}/{resp}"),
            Test::UdpRr { req, resp } => format!("UDP_RR {req}/{resp}"),
            Test::UdpRate {
                payload,
                ip_bits_per_s,
            } => format!("UDP {payload} B at {:.1} Mbit/s", ip_bits_per_s / 1e6),
        }
    }

    pub fn is_stream(&self) -> bool {
        matches!(
            self,
            Test::TcpStream { .. } | Test::UdpStream { .. } | Test::UdpRate { .. }
        )
    }
}

/// Where one end of a test runs.
#[derive(Clone, Debug, Default)]
pub struct Side {
    /// The network namespace (`/run/netns/NAME`); `None`: this process's.
    pub netns: Option<PathBuf>,
    /// The CPU its thread is pinned to; `None`: wherever the kernel puts it.
    pub cpu: Option<usize>,
}

/// A test's two ends: the server listens on `server_addr`.
#[derive(Clone, Debug)]
pub struct Endpoints {
    pub client: Side,
    pub server: Side,
    pub server_addr: SocketAddr,
}

/// One second of a test, as the measuring end saw it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Second {
    /// Payload received (streams) or carried both ways (request/response),
    /// Mbit/s.
    pub mbit_s: f64,
    /// Messages or datagrams received, or transactions completed.
    pub count: u64,
    /// Mean one-way delay (streams) or round-trip time (request/response),
    /// ms.
    pub delay_ms: Option<f64>,
    /// Mean absolute difference of consecutive delays, ms.
    pub jitter_ms: Option<f64>,
}

/// What a test measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Outcome {
    pub test: String,
    /// From the first send to the last receive.
    pub seconds: f64,
    /// Payload received per second (streams), or carried both ways
    /// (request/response).
    pub mbit_s: f64,
    /// UDP streams: payload the sender's socket took per second.
    pub sent_mbit_s: Option<f64>,
    /// UDP: the share of datagrams sent (or transactions) that never came.
    pub loss: Option<f64>,
    /// Request/response: transactions per second.
    pub transactions_per_s: Option<f64>,
    /// Messages, datagrams or transactions counted.
    pub count: u64,
    pub delay_ms: Option<f64>,
    pub jitter_ms: Option<f64>,
    pub per_second: Vec<Second>,
}

/// Per-second accumulation of bytes, counts and delays.
struct Meter {
    base: Instant,
    secs: Vec<Acc>,
    total: Acc,
    last_delay: Option<f64>,
    first: Option<Instant>,
    last: Option<Instant>,
}

#[derive(Clone, Copy, Default)]
struct Acc {
    bytes: u64,
    count: u64,
    delay_sum: f64,
    delay_n: u64,
    ipdv_sum: f64,
    ipdv_n: u64,
}

impl Acc {
    fn add(&mut self, bytes: u64, counted: bool, delay: Option<f64>, ipdv: Option<f64>) {
        self.bytes += bytes;
        self.count += u64::from(counted);
        if let Some(d) = delay {
            self.delay_sum += d;
            self.delay_n += 1;
        }
        if let Some(j) = ipdv {
            self.ipdv_sum += j;
            self.ipdv_n += 1;
        }
    }

    fn delay_ms(&self) -> Option<f64> {
        (self.delay_n > 0).then(|| self.delay_sum / self.delay_n as f64 * 1e3)
    }

    fn jitter_ms(&self) -> Option<f64> {
        (self.ipdv_n > 0).then(|| self.ipdv_sum / self.ipdv_n as f64 * 1e3)
    }
}

impl Meter {
    fn new(base: Instant) -> Meter {
        Meter {
            base,
            secs: Vec::new(),
            total: Acc::default(),
            last_delay: None,
            first: None,
            last: None,
        }
    }

    /// `bytes` arrived at `now`; `counted`: a whole message, datagram or
    /// transaction ended with them; `delay` in seconds.
    fn record(&mut self, now: Instant, bytes: u64, counted: bool, delay: Option<f64>) {
        let i = now.saturating_duration_since(self.base).as_secs() as usize;
        if self.secs.len() <= i {
            self.secs.resize(i + 1, Acc::default());
        }
        let ipdv = match (delay, self.last_delay) {
            (Some(d), Some(l)) => Some((d - l).abs()),
            _ => None,
        };
        if delay.is_some() {
            self.last_delay = delay;
        }
        self.secs[i].add(bytes, counted, delay, ipdv);
        self.total.add(bytes, counted, delay, ipdv);
        self.first.get_or_insert(now);
        self.last = Some(now);
    }

    /// The outcome over `seconds`, the whole seconds' series (the last
    /// second, usually partial, left out).
    fn outcome(&self, test: &Test, seconds: f64) -> Outcome {
        let whole = (seconds.floor() as usize).max(1).min(self.secs.len());
        Outcome {
            test: test.name(),
            seconds,
            mbit_s: if seconds > 0.0 {
                self.total.bytes as f64 * 8.0 / seconds / 1e6
            } else {
                0.0
            },
            count: self.total.count,
            delay_ms: self.total.delay_ms(),
            jitter_ms: self.total.jitter_ms(),
            per_second: self.secs[..whole]
                .iter()
                .map(|a| Second {
                    mbit_s: a.bytes as f64 * 8.0 / 1e6,
                    count: a.count,
                    delay_ms: a.delay_ms(),
                    jitter_ms: a.jitter_ms(),
                })
                .collect(),
            ..Outcome::default()
        }
    }
}

/// Runs `test` for `secs` seconds between `ep`'s ends; the stop flag ends
/// it early (what was measured so far is the outcome).
pub fn run(test: &Test, ep: &Endpoints, secs: f64, stop: &AtomicBool) -> io::Result<Outcome> {
    let done = AtomicBool::new(false);
    let ctx = Ctx {
        test: *test,
        addr: ep.server_addr,
        duration: Duration::from_secs_f64(secs.max(0.05)),
        stop,
        done: &done,
    };
    let ctx = &ctx;
    let (ready_tx, ready_rx) = mpsc::channel::<io::Result<()>>();
    std::thread::scope(|s| {
        let server = s.spawn(move || {
            on_side(&ep.server, || match Server::open(ctx) {
                Ok(srv) => {
                    let _ = ready_tx.send(Ok(()));
                    srv.serve(ctx)
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(io::Error::new(e.kind(), e.to_string())));
                    Err(e)
                }
            })
        });
        let ready = ready_rx
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| Err(io::Error::other("the server did not start")));
        if let Err(e) = ready {
            done.store(true, Ordering::Relaxed);
            let _ = server.join();
            return Err(e);
        }
        let client = s.spawn(move || {
            let r = on_side(&ep.client, || client(ctx));
            ctx.done.store(true, Ordering::Relaxed);
            r
        });
        let c = client
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the client thread panicked")));
        done.store(true, Ordering::Relaxed);
        let sv = server
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the server thread panicked")));
        combine(test, c?, sv?)
    })
}

/// What both ends share.
struct Ctx<'a> {
    test: Test,
    addr: SocketAddr,
    duration: Duration,
    stop: &'a AtomicBool,
    /// The client has finished.
    done: &'a AtomicBool,
}

impl Ctx<'_> {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// What the client knows at the end.
struct ClientEnd {
    start: Instant,
    end: Instant,
    /// Datagrams and payload bytes sent (UDP streams).
    sent: u64,
    sent_bytes: u64,
    /// Request/response: its meter and lost transactions.
    rr: Option<(Meter, u64)>,
}

/// What the server knows at the end.
struct ServerEnd {
    meter: Option<Meter>,
}

fn combine(test: &Test, c: ClientEnd, s: ServerEnd) -> io::Result<Outcome> {
    if let Some((meter, lost)) = c.rr {
        let seconds = c.end.duration_since(c.start).as_secs_f64();
        let mut o = meter.outcome(test, seconds);
        o.transactions_per_s = Some(o.count as f64 / seconds.max(1e-9));
        if matches!(test, Test::UdpRr { .. }) {
            let tried = o.count + lost;
            o.loss = Some(if tried == 0 {
                0.0
            } else {
                lost as f64 / tried as f64
            });
        }
        return Ok(o);
    }
    let meter = s
        .meter
        .ok_or_else(|| io::Error::other("the server measured nothing"))?;
    let last = meter.last.unwrap_or(c.end).max(c.end);
    let seconds = last.duration_since(c.start).as_secs_f64();
    let mut o = meter.outcome(test, seconds);
    if matches!(test, Test::UdpStream { .. } | Test::UdpRate { .. }) {
        o.sent_mbit_s = Some(c.sent_bytes as f64 * 8.0 / seconds.max(1e-9) / 1e6);
        o.loss = Some(if c.sent == 0 {
            0.0
        } else {
            1.0 - (o.count.min(c.sent) as f64 / c.sent as f64)
        });
    }
    Ok(o)
}

/// Runs `f` on this thread after moving it into `side`'s namespace and
/// pinning it to `side`'s CPU. The thread is one of [`run`]'s own, ended
/// after `f`, so neither change outlives the test.
fn on_side<T>(side: &Side, f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    if let Some(ns) = &side.netns {
        capture::netns::enter(ns)?;
    }
    if let Some(cpu) = side.cpu {
        capture::usage::pin_current_thread(cpu)?;
    }
    f()
}

fn domain(addr: &SocketAddr) -> Domain {
    match addr.ip() {
        IpAddr::V4(_) => Domain::IPV4,
        IpAddr::V6(_) => Domain::IPV6,
    }
}

/// A socket with the test's buffers.
fn socket(ctx: &Ctx, ty: Type) -> io::Result<Socket> {
    let proto = if ty == Type::STREAM {
        Protocol::TCP
    } else {
        Protocol::UDP
    };
    let s = Socket::new(domain(&ctx.addr), ty, Some(proto))?;
    s.set_reuse_address(true)?;
    if let Test::TcpStream { buf, .. } | Test::UdpStream { buf, .. } = ctx.test {
        s.set_send_buffer_size(buf)?;
        s.set_recv_buffer_size(buf)?;
    }
    if ty == Type::STREAM {
        if let Test::TcpRr { .. } = ctx.test {
            s.set_nodelay(true)?;
        }
    }
    Ok(s)
}

/// Nanoseconds since `base`, as a message carries it.
fn stamp(base: Instant, at: Instant) -> u64 {
    at.saturating_duration_since(base).as_nanos() as u64
}

/// The delay of a message stamped `sent` (ns since `base`) that arrived
/// at `now`, in seconds; `None` for a stamp from the future (corrupted).
fn delay_of(base: Instant, sent: u64, now: Instant) -> Option<f64> {
    let now = stamp(base, now);
    (sent <= now).then(|| (now - sent) as f64 / 1e9)
}

fn head(buf: &mut [u8], base: Instant, seq: u64) {
    let t = stamp(base, Instant::now()).to_be_bytes();
    let s = seq.to_be_bytes();
    let n = buf.len().min(8);
    buf[..n].copy_from_slice(&t[..n]);
    if buf.len() >= STAMP {
        buf[8..STAMP].copy_from_slice(&s);
    }
}

fn read_stamp(buf: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(buf.get(..8)?.try_into().ok()?))
}

enum Server {
    Tcp(Socket, Instant),
    Udp(UdpSocket, Instant),
}

impl Server {
    fn open(ctx: &Ctx) -> io::Result<Server> {
        let base = Instant::now();
        match ctx.test {
            Test::TcpStream { .. } | Test::TcpRr { .. } => {
                let s = socket(ctx, Type::STREAM)?;
                s.bind(&ctx.addr.into())?;
                s.listen(1)?;
                s.set_nonblocking(true)?;
                Ok(Server::Tcp(s, base))
            }
            _ => {
                let s = socket(ctx, Type::DGRAM)?;
                s.bind(&ctx.addr.into())?;
                let u: UdpSocket = s.into();
                u.set_read_timeout(Some(Duration::from_millis(50)))?;
                Ok(Server::Udp(u, base))
            }
        }
    }

    fn serve(self, ctx: &Ctx) -> io::Result<ServerEnd> {
        match self {
            Server::Tcp(listener, opened) => {
                let limit = opened + ctx.duration + GRACE + Duration::from_secs(5);
                let conn = loop {
                    match listener.accept() {
                        Ok((c, _)) => break c,
                        Err(e) if e.kind() == ErrorKind::WouldBlock => {
                            if ctx.stopped() || ctx.done.load(Ordering::Relaxed) {
                                return Ok(ServerEnd { meter: None });
                            }
                            if Instant::now() > limit {
                                return Err(io::Error::new(
                                    ErrorKind::TimedOut,
                                    "no connection came",
                                ));
                            }
                            std::thread::sleep(Duration::from_millis(2));
                        }
                        Err(e) => return Err(e),
                    }
                };
                conn.set_nonblocking(false)?;
                if let Test::TcpRr { .. } = ctx.test {
                    conn.set_nodelay(true)?;
                }
                let conn: TcpStream = conn.into();
                conn.set_read_timeout(Some(Duration::from_millis(100)))?;
                conn.set_write_timeout(Some(GRACE))?;
                match ctx.test {
                    Test::TcpStream { msg, .. } => tcp_stream_server(ctx, conn, msg, opened),
                    Test::TcpRr { req, resp } => tcp_rr_server(ctx, conn, req, resp, limit),
                    _ => unreachable!("TCP servers serve TCP tests"),
                }
            }
            Server::Udp(sock, opened) => match ctx.test {
                Test::UdpRr { req, resp } => udp_rr_server(ctx, sock, req, resp, opened),
                _ => udp_stream_server(ctx, sock, opened),
            },
        }
    }
}

/// The base both ends stamp against: the process's first use of it. Both
/// ends are threads of one process, and `Instant` is the host's monotonic
/// clock, the same in every namespace.
fn base() -> Instant {
    static BASE: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

fn tcp_stream_server(
    ctx: &Ctx,
    mut conn: TcpStream,
    msg: usize,
    opened: Instant,
) -> io::Result<ServerEnd> {
    let limit = opened + ctx.duration + GRACE + GRACE;
    let mut meter = Meter::new(opened);
    let mut buf = vec![0u8; msg.max(1) * 4];
    // Bytes into the current message, and its first 8 (the stamp).
    let mut into = 0usize;
    let mut first = [0u8; 8];
    loop {
        if ctx.stopped() || Instant::now() > limit {
            break;
        }
        let n = match conn.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == ErrorKind::ConnectionReset => break,
            Err(e) => return Err(e),
        };
        let now = Instant::now();
        // Walk the read through message boundaries: a completed message's
        // delay counts at its last byte.
        let mut at = 0;
        let mut ended = Vec::new();
        while at < n {
            if into < 8 {
                let k = (8 - into).min(n - at);
                first[into..into + k].copy_from_slice(&buf[at..at + k]);
            }
            let k = (msg - into).min(n - at);
            at += k;
            into += k;
            if into == msg {
                into = 0;
                ended.push(u64::from_be_bytes(first));
            }
        }
        if ended.is_empty() {
            meter.record(now, n as u64, false, None);
        } else {
            let last = ended.len() - 1;
            for (i, sent) in ended.into_iter().enumerate() {
                let bytes = if i == last { n as u64 } else { 0 };
                meter.record(now, bytes, true, delay_of(base(), sent, now));
            }
        }
    }
    Ok(ServerEnd { meter: Some(meter) })
}

fn tcp_rr_server(
    ctx: &Ctx,
    mut conn: TcpStream,
    req: usize,
    resp: usize,
    limit: Instant,
) -> io::Result<ServerEnd> {
    let mut r = vec![0u8; req];
    let w = vec![0u8; resp];
    let mut got = 0;
    loop {
        if ctx.stopped() || Instant::now() > limit {
            break;
        }
        match conn.read(&mut r[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == ErrorKind::ConnectionReset => break,
            Err(e) => return Err(e),
        }
        if got == req {
            got = 0;
            conn.write_all(&w)?;
        }
    }
    Ok(ServerEnd { meter: None })
}

fn udp_stream_server(ctx: &Ctx, sock: UdpSocket, opened: Instant) -> io::Result<ServerEnd> {
    let limit = opened + ctx.duration + GRACE + GRACE;
    let mut meter = Meter::new(opened);
    let mut buf = vec![0u8; 65536];
    let mut idle_since: Option<Instant> = None;
    loop {
        let now = Instant::now();
        if ctx.stopped() || now > limit {
            break;
        }
        if ctx.done.load(Ordering::Relaxed) {
            let since = *idle_since.get_or_insert(now);
            if now.duration_since(since) > DRAIN {
                break;
            }
        }
        match sock.recv(&mut buf) {
            Ok(n) => {
                let now = Instant::now();
                idle_since = None;
                let delay = read_stamp(&buf[..n]).and_then(|s| delay_of(base(), s, now));
                meter.record(now, n as u64, true, delay);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(ServerEnd { meter: Some(meter) })
}

fn udp_rr_server(
    ctx: &Ctx,
    sock: UdpSocket,
    req: usize,
    resp: usize,
    opened: Instant,
) -> io::Result<ServerEnd> {
    let limit = opened + ctx.duration + GRACE + GRACE;
    let mut buf = vec![0u8; req.max(1) + 64];
    let mut w = vec![0u8; resp.max(1)];
    while !ctx.stopped() && !ctx.done.load(Ordering::Relaxed) && Instant::now() < limit {
        match sock.recv_from(&mut buf) {
            Ok((n, from)) if n > 0 => {
                // The response carries the request's first byte: the client
                // tells a late response from the one it waits for.
                w[0] = buf[0];
                if let Err(e) = sock.send_to(&w[..resp], from) {
                    if !transient(&e) {
                        return Err(e);
                    }
                }
            }
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(ServerEnd { meter: None })
}

/// A send error that passes: a full queue, or an ICMP error a connected
/// UDP socket reports for an earlier datagram.
fn transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::WouldBlock
            | ErrorKind::Interrupted
            | ErrorKind::ConnectionRefused
            | ErrorKind::TimedOut
    ) || e.raw_os_error() == Some(libc::ENOBUFS)
        || e.raw_os_error() == Some(libc::EMSGSIZE)
        || e.raw_os_error() == Some(libc::EHOSTUNREACH)
}

fn client(ctx: &Ctx) -> io::Result<ClientEnd> {
    match ctx.test {
        Test::TcpStream { msg, .. } => tcp_stream_client(ctx, msg),
        Test::TcpRr { req, resp } => tcp_rr_client(ctx, req, resp),
        Test::UdpStream { msg, .. } => udp_send(ctx, msg, None),
        Test::UdpRate {
            payload,
            ip_bits_per_s,
        } => {
            let ip = payload
                + 8
                + match ctx.addr {
                    SocketAddr::V4(_) => 20,
                    SocketAddr::V6(_) => 40,
                };
            let interval = Duration::from_secs_f64(ip as f64 * 8.0 / ip_bits_per_s.max(1.0));
            udp_send(ctx, payload, Some(interval))
        }
        Test::UdpRr { req, resp } => udp_rr_client(ctx, req, resp),
    }
}

fn connect(ctx: &Ctx) -> io::Result<TcpStream> {
    let s = socket(ctx, Type::STREAM)?;
    s.connect_timeout(&ctx.addr.into(), Duration::from_secs(10))?;
    let s: TcpStream = s.into();
    s.set_write_timeout(Some(GRACE))?;
    s.set_read_timeout(Some(GRACE))?;
    Ok(s)
}

fn tcp_stream_client(ctx: &Ctx, msg: usize) -> io::Result<ClientEnd> {
    let mut conn = connect(ctx)?;
    let mut m = vec![0x5au8; msg.max(1)];
    let start = Instant::now();
    let end_at = start + ctx.duration;
    let mut seq = 0u64;
    while Instant::now() < end_at && !ctx.stopped() {
        head(&mut m, base(), seq);
        seq += 1;
        conn.write_all(&m)?;
    }
    let end = Instant::now();
    conn.shutdown(std::net::Shutdown::Write)?;
    Ok(ClientEnd {
        start,
        end,
        sent: seq,
        sent_bytes: seq * msg as u64,
        rr: None,
    })
}

fn tcp_rr_client(ctx: &Ctx, req: usize, resp: usize) -> io::Result<ClientEnd> {
    let mut conn = connect(ctx)?;
    conn.set_nodelay(true)?;
    let w = vec![1u8; req.max(1)];
    let mut r = vec![0u8; resp.max(1)];
    let start = Instant::now();
    let mut meter = Meter::new(start);
    let end_at = start + ctx.duration;
    while Instant::now() < end_at && !ctx.stopped() {
        let t0 = Instant::now();
        conn.write_all(&w[..req])?;
        conn.read_exact(&mut r[..resp])?;
        let now = Instant::now();
        meter.record(
            now,
            (req + resp) as u64,
            true,
            Some(now.duration_since(t0).as_secs_f64()),
        );
    }
    let end = Instant::now();
    let _ = conn.shutdown(std::net::Shutdown::Write);
    Ok(ClientEnd {
        start,
        end,
        sent: 0,
        sent_bytes: 0,
        rr: Some((meter, 0)),
    })
}

fn udp_client_socket(ctx: &Ctx) -> io::Result<UdpSocket> {
    let s = socket(ctx, Type::DGRAM)?;
    s.connect(&ctx.addr.into())?;
    Ok(s.into())
}

/// A UDP stream: as fast as the socket takes it, or one datagram per
/// `interval` on an absolute schedule (a late sender catches up).
fn udp_send(ctx: &Ctx, payload: usize, interval: Option<Duration>) -> io::Result<ClientEnd> {
    let sock = udp_client_socket(ctx)?;
    let mut m = vec![0x5au8; payload.max(1)];
    let start = Instant::now();
    let end_at = start + ctx.duration;
    let (mut sent, mut bytes, mut seq) = (0u64, 0u64, 0u64);
    loop {
        let now = Instant::now();
        if now >= end_at || ctx.stopped() {
            break;
        }
        if let Some(iv) = interval {
            let due = start + iv.mul_f64(seq as f64);
            if due > now {
                std::thread::sleep(due - now);
            }
        }
        head(&mut m, base(), seq);
        seq += 1;
        match sock.send(&m) {
            Ok(n) => {
                sent += 1;
                bytes += n as u64;
            }
            Err(e) if transient(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(ClientEnd {
        start,
        end: Instant::now(),
        sent,
        sent_bytes: bytes,
        rr: None,
    })
}

fn udp_rr_client(ctx: &Ctx, req: usize, resp: usize) -> io::Result<ClientEnd> {
    let sock = udp_client_socket(ctx)?;
    let mut w = vec![0u8; req.max(1)];
    let mut r = vec![0u8; resp.max(1) + 64];
    let start = Instant::now();
    let mut meter = Meter::new(start);
    let end_at = start + ctx.duration;
    let mut lost = 0u64;
    let mut id = 0u8;
    while Instant::now() < end_at && !ctx.stopped() {
        id = id.wrapping_add(1);
        w[0] = id;
        let t0 = Instant::now();
        match sock.send(&w[..req.max(1)]) {
            Ok(_) => {}
            Err(e) if transient(&e) => {
                lost += 1;
                continue;
            }
            Err(e) => return Err(e),
        }
        let deadline = t0 + RR_TIMEOUT;
        let answered = loop {
            let now = Instant::now();
            if now >= deadline {
                break false;
            }
            sock.set_read_timeout(Some(deadline - now))?;
            match sock.recv(&mut r) {
                Ok(n) if n > 0 && r[0] == id => break true,
                Ok(_) => {}
                Err(e) if transient(&e) => {}
                Err(e) => return Err(e),
            }
        };
        if answered {
            let now = Instant::now();
            meter.record(
                now,
                (req + resp) as u64,
                true,
                Some(now.duration_since(t0).as_secs_f64()),
            );
        } else {
            lost += 1;
        }
    }
    Ok(ClientEnd {
        start,
        end: Instant::now(),
        sent: 0,
        sent_bytes: 0,
        rr: Some((meter, lost)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both ends in this process's namespace, on loopback.
    fn local(port: u16, v6: bool) -> Endpoints {
        let ip: IpAddr = if v6 {
            "::1".parse().unwrap()
        } else {
            "127.0.0.1".parse().unwrap()
        };
        Endpoints {
            client: Side::default(),
            server: Side::default(),
            server_addr: SocketAddr::new(ip, port),
        }
    }

    fn ipv6_loopback() -> bool {
        UdpSocket::bind("[::1]:0").is_ok()
    }

    #[test]
    fn streams_carry_bytes_and_measure_their_delay() {
        let stop = AtomicBool::new(false);
        for (i, t) in [
            Test::TcpStream {
                msg: 4096,
                buf: 57344,
            },
            Test::UdpStream {
                msg: 1024,
                buf: 32768,
            },
        ]
        .into_iter()
        .enumerate()
        {
            let o = run(&t, &local(39410 + i as u16, false), 1.2, &stop).unwrap();
            assert!(o.mbit_s > 1.0, "{o:?}");
            assert!(o.count > 100, "{o:?}");
            assert!((1.0..3.0).contains(&o.seconds), "{o:?}");
            assert_eq!(o.per_second.len(), 1, "{o:?}");
            let d = o.delay_ms.unwrap();
            assert!(d > 0.0 && d < 1000.0, "{o:?}");
            assert!(o.jitter_ms.is_some(), "{o:?}");
            // The series adds up to (nearly) the whole: the partial last
            // second is left out of it.
            let series: f64 = o.per_second.iter().map(|s| s.mbit_s).sum();
            assert!(series <= o.mbit_s * o.seconds + 1e-6, "{o:?}");
            if let Test::UdpStream { .. } = t {
                let loss = o.loss.unwrap();
                assert!((0.0..=1.0).contains(&loss), "{o:?}");
                assert!(
                    o.sent_mbit_s.unwrap() >= o.mbit_s * (1.0 - loss) * 0.99,
                    "{o:?}"
                );
            } else {
                assert_eq!(o.loss, None);
            }
        }
    }

    #[test]
    fn request_response_counts_transactions_one_at_a_time() {
        let stop = AtomicBool::new(false);
        let v6 = ipv6_loopback();
        for (i, t) in [
            Test::TcpRr { req: 1, resp: 1 },
            Test::UdpRr { req: 1, resp: 1 },
            Test::UdpRr { req: 516, resp: 4 },
        ]
        .into_iter()
        .enumerate()
        {
            let o = run(&t, &local(39420 + i as u16, v6), 0.5, &stop).unwrap();
            let tps = o.transactions_per_s.unwrap();
            assert!(tps > 100.0, "{o:?}");
            let (req, resp) = match t {
                Test::TcpRr { req, resp } | Test::UdpRr { req, resp } => (req, resp),
                _ => unreachable!(),
            };
            // Payload both ways per transaction, and one round trip each:
            // the mean round trip times the rate is at most one second.
            let per = o.mbit_s * 1e6 / 8.0 / tps;
            assert!((per - (req + resp) as f64).abs() < 0.01, "{o:?}");
            assert!(o.delay_ms.unwrap() * tps <= 1000.0 * 1.01, "{o:?}");
            if let Test::UdpRr { .. } = t {
                assert!(o.loss.unwrap() < 0.01, "{o:?}");
            }
        }
    }

    #[test]
    fn a_constant_rate_stream_keeps_its_rate() {
        let stop = AtomicBool::new(false);
        let t = Test::UdpRate {
            payload: 500,
            ip_bits_per_s: 4e6,
        };
        let o = run(&t, &local(39430, false), 2.0, &stop).unwrap();
        // 4 Mbit/s of 528-byte IP packets: 947 a second; the payload rate
        // is 500/528 of the IP rate.
        let pps = o.count as f64 / o.seconds;
        assert!((pps - 947.0).abs() < 947.0 * 0.05, "{pps} {o:?}");
        assert!((o.mbit_s - 4.0 * 500.0 / 528.0).abs() < 0.2, "{o:?}");
        // Each second too (a late sender catches up on its schedule; a
        // loaded machine may leave it behind for a while).
        for s in &o.per_second {
            assert!((s.count as f64 - 947.0).abs() < 947.0 * 0.2, "{o:?}");
        }
        assert!(o.loss.unwrap() < 0.01, "{o:?}");
    }

    #[test]
    fn a_missing_server_or_a_stop_ends_a_test_without_hanging() {
        let stop = AtomicBool::new(false);
        // Nobody can bind this address: the server fails, and says so.
        let ep = Endpoints {
            server_addr: "192.0.2.1:39440".parse().unwrap(),
            ..local(0, false)
        };
        let t0 = Instant::now();
        assert!(run(&Test::TcpRr { req: 1, resp: 1 }, &ep, 0.2, &stop).is_err());
        // A stop before the start: the test returns at once with little.
        stop.store(true, Ordering::Relaxed);
        let o = run(
            &Test::UdpRr { req: 1, resp: 1 },
            &local(39441, false),
            30.0,
            &stop,
        )
        .unwrap();
        assert_eq!(o.count, 0);
        assert!(t0.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn delays_come_from_stamps_and_bad_stamps_are_not_delays() {
        let b = base();
        let later = b + Duration::from_millis(5);
        assert_eq!(delay_of(b, 1_000_000, later), Some(0.004));
        assert_eq!(delay_of(b, u64::MAX, later), None);
        let mut m = [0u8; 20];
        head(&mut m, b, 7);
        assert!(read_stamp(&m).is_some());
        assert_eq!(u64::from_be_bytes(m[8..16].try_into().unwrap()), 7);
        assert_eq!(read_stamp(&m[..7]), None);
        let mut one = [0u8; 1];
        head(&mut one, b, 7);
    }
}
