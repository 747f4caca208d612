//! Errors of reading and writing traces.

use std::fmt;
use std::io;

/// What went wrong, and at which byte offset of the (decompressed) stream.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The underlying file or stream failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done (`reading`, `writing block 12` ...).
        context: String,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// The bytes are not a valid trace at `offset`.
    #[error("offset {offset}: {what}")]
    Format {
        /// Byte offset in the decompressed stream where the problem is.
        offset: u64,
        /// What was wrong and what was expected.
        what: String,
    },
    /// The compressed stream around the trace is corrupt.
    #[error("{codec} stream: {what}")]
    Compression {
        /// `lz4`, `zstd` or `gzip`.
        codec: &'static str,
        /// What the decoder reported.
        what: String,
    },
    /// A setting given to a writer or reader is not valid.
    #[error("invalid setting: {0}")]
    Config(String),
}

impl Error {
    /// An I/O error with its context.
    pub fn io(context: impl Into<String>, source: io::Error) -> Error {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    /// A format error at `offset`.
    pub fn format(offset: u64, what: impl fmt::Display) -> Error {
        Error::Format {
            offset,
            what: what.to_string(),
        }
    }
}

/// Result with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// A file that ended in the middle of a record or block: reading stops at
/// the last complete record and reports this instead of an error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Truncation {
    /// Offset (in the decompressed stream) where the incomplete record starts.
    pub offset: u64,
    /// Bytes that record needed.
    pub needed: u64,
    /// Bytes that were there.
    pub available: u64,
    /// What was being read (`pcap record header`, `pcapng block`, `lz4 block`).
    pub what: &'static str,
}

impl fmt::Display for Truncation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "offset {}: file cut short in a {} ({} bytes needed, {} there); read up to the last complete packet",
            self.offset, self.what, self.needed, self.available
        )
    }
}
