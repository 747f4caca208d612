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
    /// Offset (in the decompressed stream) where the incomplete record
    /// starts, or where the stream stopped at a record boundary.
    pub offset: u64,
    /// Where the compressed file ends or was cut (its bytes read), for a
    /// compressed file; `None` for a plain one, whose offsets are the same.
    pub file_offset: Option<u64>,
    /// Bytes that record needed (0: the stream stopped between records).
    pub needed: u64,
    /// Bytes that were there.
    pub available: u64,
    /// What was being read (`pcap record header`, `pcapng block`), or
    /// what was cut (`lz4 frame`, or `file that was not closed`).
    pub what: &'static str,
}

impl Truncation {
    /// What a file is cut in when its index says it was never closed.
    pub const UNCLOSED: &'static str = "file that was not closed";
    /// What a file is cut in when its index describes chunks past its end.
    pub const SHORTER_THAN_INDEX: &'static str = "file shorter than its index";
}

impl fmt::Display for Truncation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = match self.file_offset {
            Some(c) => format!("file offset {c} (decompressed offset {})", self.offset),
            None => format!("offset {}", self.offset),
        };
        if self.what == Truncation::UNCLOSED {
            write!(
                f,
                "{at}: file cut short: its writer never closed it (its index has no end entry); read up to the last complete packet"
            )
        } else if self.what == Truncation::SHORTER_THAN_INDEX {
            write!(
                f,
                "{at}: file cut short: its index describes chunks past its end (it lost them after they were written); read up to the last complete packet"
            )
        } else if self.needed == 0 {
            write!(
                f,
                "{at}: file cut short: the {} ends early, between two records; read up to the last complete packet",
                self.what
            )
        } else {
            write!(
                f,
                "{at}: file cut short in a {} ({} bytes needed, {} there); read up to the last complete packet",
                self.what, self.needed, self.available
            )
        }
    }
}

/// A chunk of a compressed trace that did not decode, or decoded to bytes
/// other than the ones its index entry's checksum was taken of. The read
/// skips it and goes on with the next chunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Corruption {
    /// The chunk's number in the index.
    pub chunk: u64,
    /// Where the chunk starts in the file, and its length there.
    pub file_offset: u64,
    pub file_len: u64,
    /// Where the chunk starts in the decompressed stream.
    pub decomp_offset: u64,
    /// Packets the index says were lost with it (with everything after it,
    /// when the stream cannot be decoded past it).
    pub packets: u64,
    /// What was wrong.
    pub what: String,
}

impl fmt::Display for Corruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "corrupt data at file offset {} (chunk {}, {} bytes, decompressed offset {}): {}; {} packets skipped",
            self.file_offset, self.chunk, self.file_len, self.decomp_offset, self.what, self.packets
        )
    }
}
