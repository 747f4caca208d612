//! `kansoku web`: an agurim-like view of aguri summaries in a browser.
//!
//! - [`source`]: [`DirSource`], a directory of summary files read again as
//!   they change, and [`MemorySource`]; both serve the summaries through
//!   [`aguri::source::DataSource`].
//! - [`view`]: a view's query and its answer: the aggregates of a range,
//!   re-aggregated at a threshold, as per-bucket series that add up exactly.
//! - [`params`]: request parameters, checked before use.
//! - [`server`]: the HTTP server (hyper), the JSON API and the page, whose
//!   assets are compiled in.
//! - [`packets`]: an aggregate's tcpdump expression, for its packets out
//!   of an archive of traces on the same host.
//!
//! The JSON API (`GET`, answers `application/json`; 400 with `{"error"}`
//! for a bad parameter, 503 when the source cannot answer):
//!
//! - `/api/v1/catalog`: the source, its levels (`5min`, `hourly` ...: name,
//!   interval, count, first and last times), problems with its files.
//! - `/api/v1/view?view=src|dst|sport|dport&from=S&to=S&step=S&threshold=P&drill=LABEL`:
//!   every parameter optional (the last day, a step for about 300 buckets,
//!   1%, no drill-down). See [`view::ViewAnswer`] for the answer.
//! - `/api/v1/packets?view=V&from=S&to=S&drill=LABEL`: the aggregate's
//!   packets in `[from, to)` as a pcap file (`application/vnd.tcpdump.pcap`,
//!   at most [`packets::MAX_PCAP`] bytes; headers `x-kansoku-expression`,
//!   `x-kansoku-packets`, `x-kansoku-cut`), when the server was given an
//!   archive (404 otherwise; the catalog's `traces` says which).

#![forbid(unsafe_code)]

pub mod packets;
pub mod params;
pub mod server;
pub mod source;
pub mod view;

pub use aguri::source::{Bucketed, Catalog, DataSource, LevelInfo, SourceError};
pub use packets::{Archive, Extract, Extraction};
pub use server::serve;
pub use source::{DirSource, MemorySource};
pub use view::{answer, Query, ViewAnswer, ViewKind};
