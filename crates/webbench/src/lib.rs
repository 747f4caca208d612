//! `webbench`: the delay-aware web server benchmark (MAWI WG 2001,
//! chapter 3). An HTTP load generator whose clients come from many source
//! addresses, so that a delay line (the `delay` crate) can give each its
//! own round trip, with per-request timings and latency percentiles free
//! of coordinated omission.
//!
//! - [`http1`]: the request, and a push parser for responses (fuzzed).
//! - [`load`]: the generator: closed and open models over event-loop
//!   threads, records, results.
//! - [`tls`]: `https://`: the rustls client configuration (versions,
//!   certificate checks, ALPN).
//! - [`http2`]: HTTP/2 over TLS or cleartext, each request a stream (the
//!   `h2` crate).
//! - [`observe`]: the server side from its packets, as the paper's ENMA
//!   saw it: connections in progress from SYN to close or reset, arrivals,
//!   TIME_WAIT apart, handshake round trips per client.
//! - [`tap`]: a live capture ring feeding [`observe`].
//! - [`host`]: the kernel's TCP counters, the server's processes and their
//!   CPU time, from `/proc`.
//! - [`session`]: a run or a sweep of runs with the server watched, each
//!   step's client and server figures side by side.

#![forbid(unsafe_code)]

#[cfg(feature = "cli")]
pub mod cli;
pub mod host;
pub mod http1;
pub mod http2;
pub mod load;
pub mod observe;
pub mod report;
pub mod session;
pub mod tap;
pub mod tls;

pub use load::{ErrorClass, Model, Plan, Record, Results, Target};
pub use session::{run_session, SessionPlan, SessionResult, Step};
pub use tls::{TlsOptions, TlsVersions, Verify};
