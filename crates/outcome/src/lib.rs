//! What a kansoku command ends with: the [`Error`] that stops it, the
//! [`Report`] of what it did, and the one place where the exit code is
//! decided from them ([`Report::exit_code`]).
//!
//! Every crate that runs a job for the command line (`pipeline`, `plot`,
//! `gateway`, `webbench`, `bench`) returns these, so that an error reads and
//! exits the same whichever crate found it. The crate has no dependencies:
//! it sits below all of them.

#![forbid(unsafe_code)]

pub mod error;
pub mod report;

pub use error::{clip_long_words, display_path, Error, ErrorKind, ExitCode, Result};
pub use report::{Drops, Report, Truncated};
