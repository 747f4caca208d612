//! The fleet store: the summaries of many probes in ClickHouse, over its
//! HTTP interface ([`client`]), in tables whose rows carry each summary's
//! id so that a summary sent twice is counted once ([`schema`]), sent from
//! a local spool that survives crashes and outages ([`spool`]), and read
//! back by the web view ([`source`]) and `kansoku store export`. [`local`]
//! runs a private ClickHouse server for benchmarks and tests.

#![forbid(unsafe_code)]

pub mod client;
pub mod local;
pub mod rollup;
pub mod schema;
pub mod source;
pub mod spool;

pub use client::{valid_identifier, valid_name, Client, Credentials, StoreError, StoreUrl};
pub use rollup::{merge, MergeSpec, MergeStats};
pub use schema::{init, insert, insert_many, read, summary_id, Stored, SCHEMA_VERSION};
pub use source::StoreSource;
pub use spool::{SendStats, Sender, Spool};
