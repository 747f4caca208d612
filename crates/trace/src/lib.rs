//! `trace`: pcap and pcapng traces, read and written plain or compressed.
//!
//! Every trace, whatever its format, is a stream of [`Record`]s: sections,
//! interfaces, packets and other pcapng blocks ([`record`]).
//!
//! - Reading: [`TraceReader`] detects the codec (gzip, zstd, LZ4 frame, none)
//!   and the format (pcap µs/ns in either byte order, pcapng) by magic number
//!   and streams records in constant memory; a file cut short yields its
//!   complete records and a [`Truncation`].
//! - Writing: [`TraceWriter`] gathers records into blocks of 4–64 KiB and
//!   compresses each block as a whole (Shimizu et al. 2006): one LZ4 frame of
//!   independent blocks with raw-stored blocks where compression does not
//!   pay, one zstd frame flushed per block, or gzip members. Each finished
//!   block reaches the file in one write, then its entry in the sidecar seek
//!   [`index`], so a killed writer leaves a file readable to its last block.
//!   [`rotate::RotatingWriter`] adds tcpdump's `-C`/`-G`. With
//!   [`WriterConfig::threads`], blocks are compressed by a pool of threads
//!   and still written in order, one write each: the same file.
//! - Windowed reads: [`window::open_window`] decodes only the blocks whose
//!   time range meets the window; [`window::open_checked`] reads a whole
//!   file through its index, checking every block against its checksum.
//!   [`reindex::rebuild`] writes a file's index anew from the file.
//!
//! The crate does no capture and no printing; it takes and gives records.

#![forbid(unsafe_code)]

pub mod compress;
pub mod error;
pub mod format;
pub mod index;
pub mod keys;
pub mod read;
pub mod record;
pub mod reindex;
pub mod rotate;
pub mod runs;
pub mod time;
pub mod window;
pub mod write;

pub use error::{Corruption, Error, Result, Truncation};
pub use format::{Codec, FileFormat};
pub use read::TraceReader;
pub use record::{
    Interface, Packet, PacketKind, RawBlock, RawOption, Record, Section, TsResolution,
};
pub use wire::LinkType;
pub use write::{OutputFormat, TraceWriter, WriteStats, WriterConfig};
