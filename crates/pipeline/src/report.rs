//! The end-of-run report: [`outcome::report`], re-exported, and the trace
//! reader's truncation as one.

pub use outcome::report::*;

/// A trace reader's truncation of the file named `name`.
pub fn truncated(name: &str, t: &trace::Truncation) -> Truncated {
    Truncated::new(name, t.offset, t.to_string())
}
