//! Errors that end a command: [`outcome::error`], re-exported, and the
//! conversions of the trace crate's errors and of text files into them.

use std::path::Path;

pub use outcome::error::*;

/// A trace writer's error about `path`: I/O failures are output failures,
/// anything else (settings) a usage error.
pub fn write_error(path: &Path, e: trace::Error) -> Error {
    match e {
        trace::Error::Io { context, source } => {
            Error::output(format!("{}: {context}", display_path(path)), &source)
        }
        other => Error::usage(format!("{}: {other}", display_path(path))),
    }
}

/// Reads a text file (rules, SA files, summaries): an error names the file,
/// and the line and column of a byte that is not UTF-8.
pub fn read_text(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).map_err(|e| Error::file(path, e))?;
    String::from_utf8(bytes).map_err(|e| {
        let at = wire::text::NotUtf8::locate(e.as_bytes(), e.utf8_error().valid_up_to());
        Error::input(format!("{}:{at}", display_path(path)))
    })
}
