//! HTTP/2 (RFC 9113) on the client's side, over the `h2` crate: each
//! request a stream on a connection that a task of its own drives (reads
//! frames, writes the ones queued), over TLS when ALPN gave `h2`, or over
//! cleartext TCP with prior knowledge (h2c, RFC 9113 §3.3).
//!
//! A request's times: sent when its HEADERS frame (with END_STREAM: a GET
//! has no body) is queued to the connection, which writes it at its next
//! turn on the same thread; first byte when the response's HEADERS frame
//! has come; last byte at the end of its stream. Each stream has the
//! run's timeout; one that runs out is cancelled (RST_STREAM) and the
//! connection goes on, as HTTP/2 lets a client give up on one request.
//!
//! Models, as h2load's `-c C -m M`: in the closed model, C connections,
//! each carrying M streams at a time (M workers, each sending its next
//! request when its last is answered); in the open model, each request
//! takes a connection with room for another stream or opens one. Without
//! keep-alive, each request opens a connection (TCP, TLS, preface), sends
//! its one stream and closes it: the paper's mode.
//!
//! A connection the server closes, or sends GOAWAY on (nginx does after
//! `keepalive_requests`), takes no new stream: a request that finds it so
//! before it went, or that the server says it did not process (RFC 9113
//! §8.7), goes on another connection, not counted as failed.

use std::cell::{Cell, RefCell};
use std::net::IpAddr;
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use h2::client::SendRequest;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::JoinHandle;
use tokio::time::timeout;

use crate::load::{connect_timed, tls_handshake, ErrorClass, Failure, Record, Shared, Tally};

/// The flow-control windows the client grants (stream and connection),
/// h2load's default (`-w 30 -W 30`, 2^30 - 1): a benchmark should not be
/// held back by its own windows. The data read is given back at once.
const WINDOW: u32 = (1 << 30) - 1;

/// A connection, shared by the requests in flight on it.
pub(crate) struct H2Conn {
    send: SendRequest<Bytes>,
    /// Streams in flight.
    active: Cell<usize>,
    /// It takes no new stream: its driver ended, or a request found it
    /// closed or going away.
    gone: Rc<Cell<bool>>,
    /// The task driving it.
    driver: RefCell<Option<JoinHandle<()>>>,
}

/// How a stream failed.
enum StreamError {
    /// Before the request went: the connection takes no new stream. The
    /// request may go on another.
    NotSent(Failure),
    Failed(Failure),
}

/// An `h2` error's class: I/O errors as TCP's (or TLS's), HTTP/2's own
/// (a frame that breaks the rules, RST_STREAM, GOAWAY with an error) as
/// protocol errors, misuse as local.
fn failure(e: h2::Error) -> Failure {
    let class = match e.get_io() {
        Some(io) => ErrorClass::of(io),
        None if e.reason().is_some() => ErrorClass::Protocol,
        None => ErrorClass::Local,
    };
    Failure {
        class,
        why: format!("HTTP/2: {e}"),
    }
}

/// The server says it did not process the stream, so that it may go again
/// (RFC 9113 §8.7): a GOAWAY without error whose last stream is below it,
/// or RST_STREAM with REFUSED_STREAM.
fn unprocessed(e: &h2::Error) -> bool {
    e.is_remote()
        && ((e.is_go_away() && e.reason() == Some(h2::Reason::NO_ERROR))
            || (e.is_reset() && e.reason() == Some(h2::Reason::REFUSED_STREAM)))
}

/// A new connection for `r`: TCP, TLS for `https://` (whose ALPN must
/// have chosen `h2`), then the preface and SETTINGS.
async fn open(
    sh: &Shared,
    from: Option<IpAddr>,
    r: &mut Record,
    tally: &RefCell<Tally>,
) -> Result<Rc<H2Conn>, Failure> {
    let tcp = connect_timed(sh, from, r).await?;
    match &sh.tls {
        Some(tls) => {
            let s = tls_handshake(sh, tls, tcp, r, tally).await?;
            if s.get_ref().1.alpn_protocol() != Some(b"h2") {
                return Err(Failure {
                    class: ErrorClass::Protocol,
                    why: "the server did not choose h2 in ALPN (no HTTP/2 over TLS)".into(),
                });
            }
            start(sh, s).await
        }
        None => start(sh, tcp).await,
    }
}

/// The HTTP/2 handshake over `io`, and the task that drives the
/// connection from then on.
async fn start<T>(sh: &Shared, io: T) -> Result<Rc<H2Conn>, Failure>
where
    T: AsyncRead + AsyncWrite + Unpin + 'static,
{
    let mut builder = h2::client::Builder::new();
    builder
        .initial_window_size(WINDOW)
        .initial_connection_window_size(WINDOW)
        .enable_push(false);
    let (send, connection) = match timeout(sh.plan.timeout, builder.handshake::<T, Bytes>(io)).await
    {
        Err(_) => return Err(Failure::timeout()),
        Ok(made) => made.map_err(failure)?,
    };
    let gone = Rc::new(Cell::new(false));
    let flag = Rc::clone(&gone);
    let driver = tokio::task::spawn_local(async move {
        // Its error, if any, reaches the streams in flight, which count it.
        let _ = connection.await;
        flag.set(true);
    });
    Ok(Rc::new(H2Conn {
        send,
        active: Cell::new(0),
        gone,
        driver: RefCell::new(Some(driver)),
    }))
}

/// Closes `c`, the last reference to it: with no stream left and no
/// handle, its driver sends GOAWAY and closes. When it has.
async fn close(sh: &Shared, c: Rc<H2Conn>) -> u64 {
    let driver = c.driver.borrow_mut().take();
    drop(c);
    if let Some(mut d) = driver {
        if timeout(sh.plan.timeout, &mut d).await.is_err() {
            d.abort();
        }
    }
    sh.now()
}

/// One request as a stream on `c`, within the timeout, its times in `r`.
async fn stream(sh: &Shared, c: &H2Conn, r: &mut Record) -> Result<(), StreamError> {
    c.active.set(c.active.get() + 1);
    let out = match timeout(sh.plan.timeout, exchange(sh, c, r)).await {
        Ok(out) => out,
        // Dropping the stream's future resets it (RST_STREAM CANCEL).
        Err(_) => Err(StreamError::Failed(Failure::timeout())),
    };
    c.active.set(c.active.get() - 1);
    if matches!(out, Err(StreamError::NotSent(_))) {
        c.gone.set(true);
    }
    out
}

async fn exchange(sh: &Shared, c: &H2Conn, r: &mut Record) -> Result<(), StreamError> {
    let not_sent = |e| StreamError::NotSent(failure(e));
    let failed = |e| StreamError::Failed(failure(e));
    // Waits while the server's SETTINGS_MAX_CONCURRENT_STREAMS are in use.
    let mut send = c.send.clone().ready().await.map_err(not_sent)?;
    let request = http::Request::builder()
        .uri(sh.uri.clone())
        .header(http::header::USER_AGENT, "kansoku-webbench")
        .header(http::header::ACCEPT, "*/*")
        .body(())
        .map_err(|e| {
            StreamError::Failed(Failure {
                class: ErrorClass::Local,
                why: e.to_string(),
            })
        })?;
    let (response, _) = send.send_request(request, true).map_err(not_sent)?;
    r.request_sent = sh.now();
    let response = response.await.map_err(|e| {
        if unprocessed(&e) {
            not_sent(e)
        } else {
            failed(e)
        }
    })?;
    r.first_byte = sh.now();
    r.status = response.status().as_u16();
    let mut body = response.into_body();
    while let Some(data) = body.data().await {
        let data = data.map_err(failed)?;
        r.body_bytes += data.len() as u64;
        let _ = body.flow_control().release_capacity(data.len());
    }
    r.last_byte = sh.now();
    Ok(())
}

/// A request's number and when it began.
type Pending = (u64, u64);

/// Requests that found their connection gone before they went, waiting
/// for the next connection.
type Carried = Rc<RefCell<Vec<Pending>>>;

fn next(sh: &Shared, carried: &Carried) -> Option<Pending> {
    if let Some(p) = carried.borrow_mut().pop() {
        return Some(p);
    }
    sh.take().map(|k| (k, sh.now()))
}

fn record(sh: &Shared, (k, scheduled): Pending, reused: bool) -> Record {
    Record {
        client: sh.client(k).0,
        scheduled,
        reused,
        ..Record::default()
    }
}

/// One thread's part of a closed-model run: `conns` connections.
pub(crate) async fn closed(sh: Arc<Shared>, conns: usize, tally: Rc<RefCell<Tally>>) {
    let mut tasks = Vec::new();
    for _ in 0..conns {
        let (sh, tally) = (Arc::clone(&sh), Rc::clone(&tally));
        tasks.push(tokio::task::spawn_local(
            async move { lane(&sh, &tally).await },
        ));
    }
    for t in tasks {
        let _ = t.await;
    }
}

/// One of the closed model's connections, opened again each time it ends
/// while the run goes on.
async fn lane(sh: &Arc<Shared>, tally: &Rc<RefCell<Tally>>) {
    let carried: Carried = Rc::default();
    while let Some(first) = next(sh, &carried) {
        let mut r = record(sh, first, false);
        let conn = match open(sh, sh.client(first.0).1, &mut r, tally).await {
            Ok(c) => c,
            Err(f) => {
                tally.borrow_mut().fail(&mut r, f);
                continue;
            }
        };
        if !sh.plan.keep_alive {
            let out = stream(sh, &conn, &mut r).await;
            r.close = close(sh, conn).await;
            count(tally, r, out);
            continue;
        }
        let mut opener = Some((first, r));
        let mut workers = Vec::new();
        for _ in 0..sh.plan.streams.max(1) {
            let (sh, tally, conn, carried) = (
                Arc::clone(sh),
                Rc::clone(tally),
                Rc::clone(&conn),
                Rc::clone(&carried),
            );
            let opener = opener.take();
            workers.push(tokio::task::spawn_local(async move {
                worker(&sh, &conn, opener, &carried, &tally).await
            }));
        }
        for w in workers {
            let _ = w.await;
        }
    }
}

/// One stream at a time on `conn`, until the run ends or `conn` does.
async fn worker(
    sh: &Shared,
    conn: &H2Conn,
    mut opener: Option<(Pending, Record)>,
    carried: &Carried,
    tally: &RefCell<Tally>,
) {
    loop {
        let (p, mut r) = match opener.take() {
            Some(first) => first,
            None => match next(sh, carried) {
                Some(p) => (p, record(sh, p, true)),
                None => return,
            },
        };
        match stream(sh, conn, &mut r).await {
            Ok(()) => tally.borrow_mut().add(&r),
            // The connection went away under a request that had not gone:
            // it goes on the next. (One that opened the connection failed
            // with it: else a server that refuses every stream would be
            // asked forever.)
            Err(StreamError::NotSent(_)) if r.reused => {
                carried.borrow_mut().push(p);
                return;
            }
            Err(StreamError::NotSent(f) | StreamError::Failed(f)) => {
                tally.borrow_mut().fail(&mut r, f);
                if conn.gone.get() {
                    return;
                }
            }
        }
    }
}

fn count(tally: &RefCell<Tally>, mut r: Record, out: Result<(), StreamError>) {
    match out {
        Ok(()) => tally.borrow_mut().add(&r),
        Err(StreamError::NotSent(f) | StreamError::Failed(f)) => tally.borrow_mut().fail(&mut r, f),
    }
}

/// The open model's connections on a thread (with keep-alive).
#[derive(Clone, Default)]
pub(crate) struct Pool(Rc<RefCell<Vec<Rc<H2Conn>>>>);

impl Pool {
    /// A connection with room for another stream.
    fn pick(&self, streams: usize) -> Option<Rc<H2Conn>> {
        let mut conns = self.0.borrow_mut();
        conns.retain(|c| !c.gone.get());
        conns.iter().find(|c| c.active.get() < streams).cloned()
    }
}

/// One request of the open model, scheduled at `scheduled`.
pub(crate) async fn open_request(
    sh: &Shared,
    k: u64,
    scheduled: u64,
    pool: &Pool,
    tally: &RefCell<Tally>,
) {
    let keep_alive = sh.plan.keep_alive;
    loop {
        let pooled = if keep_alive {
            pool.pick(sh.plan.streams.max(1))
        } else {
            None
        };
        let mut r = record(sh, (k, scheduled), pooled.is_some());
        let conn = match pooled {
            Some(c) => c,
            None => match open(sh, sh.client(k).1, &mut r, tally).await {
                Ok(c) => {
                    if keep_alive {
                        pool.0.borrow_mut().push(Rc::clone(&c));
                    }
                    c
                }
                Err(f) => {
                    tally.borrow_mut().fail(&mut r, f);
                    return;
                }
            },
        };
        let out = stream(sh, &conn, &mut r).await;
        if !keep_alive {
            r.close = close(sh, conn).await;
        }
        if matches!(out, Err(StreamError::NotSent(_))) && r.reused {
            // Its connection went away: another, or a new one.
            continue;
        }
        return count(tally, r, out);
    }
}
