//! `webbench`: the delay-aware web server benchmark (S6; paper 004,
//! chapter 3). An HTTP load generator whose clients come from many source
//! addresses, so that a delay line (the `delay` crate) can give each its
//! own round trip, with per-request timings and latency percentiles free
//! of coordinated omission.
//!
//! - [`http1`]: the request, and a push parser for responses (fuzzed).
//! - [`load`]: the generator: closed and open models over event-loop
//!   threads, records, results.

#![forbid(unsafe_code)]

pub mod http1;
pub mod load;

pub use load::{ErrorClass, Model, Plan, Record, Results, Target};
