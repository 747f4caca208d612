//! The HTTP side: a fixed set of routes, the page's assets compiled into the
//! binary, the JSON API. Nothing here touches the file system: a path is
//! matched against the routes, never joined to a directory.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, CACHE_CONTROL, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
pub use hyper::Method;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde::Serialize;

use crate::packets::{expression, Archive, Extraction, MAX_PCAP};
use crate::params::{BadRequest, Params};
use crate::view::{answer, Query, ViewError};
use crate::{Catalog, DataSource};

const INDEX_HTML: &str = include_str!("../assets/index.html");
const APP_JS: &str = include_str!("../assets/app.js");
const APP_CSS: &str = include_str!("../assets/app.css");

/// The content security policy of every answer: the page runs only its own
/// script and style, and talks only to this server.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                   connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

type Answer = Response<Full<Bytes>>;

fn respond(status: StatusCode, kind: &'static str, body: impl Into<Bytes>) -> Answer {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(kind));
    h.insert("content-security-policy", HeaderValue::from_static(CSP));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn json<T: Serialize>(status: StatusCode, v: &T) -> Answer {
    match serde_json::to_vec(v) {
        Ok(b) => respond(status, "application/json", b),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    }
}

fn error(status: StatusCode, message: &str) -> Answer {
    #[derive(Serialize)]
    struct E<'a> {
        error: &'a str,
    }
    let body = serde_json::to_vec(&E { error: message }).unwrap_or_default();
    respond(status, "application/json", body)
}

fn bad(e: &BadRequest) -> Answer {
    error(StatusCode::BAD_REQUEST, &e.0)
}

/// The catalog, and whether the page may offer an aggregate's packets.
#[derive(Serialize)]
struct CatalogAnswer<'a> {
    #[serde(flatten)]
    catalog: &'a Catalog,
    traces: bool,
}

/// `/api/v1/packets`: the packets of the aggregate `drill` of `view` in
/// `[from, to)`, as a pcap file out of the archive of traces.
fn packets(archive: Option<&Archive>, params: &Params) -> Answer {
    let Some(archive) = archive else {
        return error(
            StatusCode::NOT_FOUND,
            "no archive of traces here (kansoku web --traces DIR)",
        );
    };
    let q = match Query::from_params(params) {
        Ok(q) => q,
        Err(e) => return bad(&e),
    };
    let (Some(drill), Some(from), Some(to)) = (q.drill, q.from, q.to) else {
        return bad(&BadRequest::new(
            "drill, from and to: the aggregate's label and its range",
        ));
    };
    let Some(expression) = expression(q.view, &drill, q.drill_dst.as_ref()) else {
        return bad(&BadRequest::new("drill: no packet has this label"));
    };
    // One extraction at a time: the others' views stay answered.
    static EXTRACTING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = match EXTRACTING.try_lock() {
        Ok(g) => g,
        // An extraction that failed on the way holds nothing to protect.
        Err(std::sync::TryLockError::Poisoned(g)) => g.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => {
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                "another extraction is running: try again when it ends",
            )
        }
    };
    let x = Extraction {
        expression,
        since_ns: from * 1_000_000_000,
        until_ns: to * 1_000_000_000,
        limit: MAX_PCAP,
    };
    let got = match archive(&x) {
        Ok(got) => got,
        Err(e) => return error(StatusCode::SERVICE_UNAVAILABLE, &e),
    };
    let mut r = respond(StatusCode::OK, "application/vnd.tcpdump.pcap", got.pcap);
    let h = r.headers_mut();
    let name = format!(
        "attachment; filename=\"kansoku-{}-{from}-{to}.pcap\"",
        q.view.name()
    );
    let said = [
        ("content-disposition", name),
        ("x-kansoku-expression", x.expression),
        ("x-kansoku-packets", got.packets.to_string()),
        ("x-kansoku-cut", got.cut.unwrap_or_default()),
    ];
    for (k, v) in said {
        if let Ok(v) = HeaderValue::from_str(&v) {
            if !v.is_empty() {
                h.insert(k, v);
            }
        }
    }
    r
}

/// The answer to one request.
pub fn route(
    src: &dyn DataSource,
    archive: Option<&Archive>,
    method: &Method,
    path: &str,
    query: Option<&str>,
) -> Answer {
    if method != Method::GET && method != Method::HEAD {
        let mut r = error(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD");
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let params = match Params::parse(query.unwrap_or("")) {
        Ok(p) => p,
        Err(e) => return bad(&e),
    };
    match path {
        // The page takes the view's parameters: it reads them itself.
        "/" | "/index.html" => match Query::from_params(&params) {
            Ok(_) => respond(StatusCode::OK, "text/html; charset=utf-8", INDEX_HTML),
            Err(e) => bad(&e),
        },
        "/app.js" => respond(StatusCode::OK, "text/javascript; charset=utf-8", APP_JS),
        "/app.css" => respond(StatusCode::OK, "text/css; charset=utf-8", APP_CSS),
        "/api/v1/catalog" => match params.only(&[]) {
            Err(e) => bad(&e),
            Ok(()) => match src.catalog() {
                Ok(c) => json(
                    StatusCode::OK,
                    &CatalogAnswer {
                        catalog: &c,
                        traces: archive.is_some(),
                    },
                ),
                Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, &e.0),
            },
        },
        "/api/v1/view" => {
            let q = match Query::from_params(&params) {
                Ok(q) => q,
                Err(e) => return bad(&e),
            };
            let cat = match src.catalog() {
                Ok(c) => c,
                Err(e) => return error(StatusCode::SERVICE_UNAVAILABLE, &e.0),
            };
            match answer(src, &cat, &q) {
                Ok(a) => json(StatusCode::OK, &a),
                Err(ViewError::Bad(e)) => bad(&e),
                Err(ViewError::Source(e)) => error(StatusCode::SERVICE_UNAVAILABLE, &e.0),
            }
        }
        "/api/v1/packets" => packets(archive, &params),
        _ => error(StatusCode::NOT_FOUND, "no such page"),
    }
}

async fn handle(
    src: Arc<dyn DataSource>,
    archive: Option<Archive>,
    req: Request<Incoming>,
) -> Result<Answer, Infallible> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let query = req.uri().query().map(str::to_string);
    // Views are computed off the I/O threads.
    let head = method == Method::HEAD;
    let answer = tokio::task::spawn_blocking(move || {
        route(&*src, archive.as_ref(), &method, &path, query.as_deref())
    })
    .await
    .unwrap_or_else(|_| error(StatusCode::SERVICE_UNAVAILABLE, "the view failed"));
    if head {
        let (parts, _) = answer.into_parts();
        return Ok(Response::from_parts(parts, Full::new(Bytes::new())));
    }
    Ok(answer)
}

/// Serves `src` on `listen` until `stop` is set; `ready` is told the
/// address bound (port 0 picks a free one).
pub fn serve(
    src: Arc<dyn DataSource>,
    archive: Option<Archive>,
    listen: SocketAddr,
    stop: &'static AtomicBool,
    ready: impl FnOnce(SocketAddr),
) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(4)
        .enable_io()
        .enable_time()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen).await?;
        ready(listener.local_addr()?);
        while !stop.load(Ordering::Relaxed) {
            let accepted =
                tokio::time::timeout(Duration::from_millis(200), listener.accept()).await;
            let Ok(accepted) = accepted else { continue };
            let (stream, _) = match accepted {
                Ok(s) => s,
                // Out of descriptors and the like: wait a little, go on.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let (src, archive) = (src.clone(), archive.clone());
            tokio::spawn(async move {
                let service = service_fn(move |req| handle(src.clone(), archive.clone(), req));
                let _ = http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(Duration::from_secs(10))
                    .max_buf_size(64 * 1024)
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
        Ok(())
    })
}
