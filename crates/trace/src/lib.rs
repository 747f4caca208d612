//! `trace`: pcap and pcapng traces, read and written plain or compressed.

pub mod error;
pub mod record;

// -- formats and reading (owner: reader) --
pub mod format;
pub mod read;
pub use format::{Codec, FileFormat};
pub use read::TraceReader;
// -- end formats and reading --

// -- compression, writing, index, rotation, windowed reads (owner: writer) --
pub mod compress;
pub mod index;
pub mod rotate;
pub mod window;
pub mod write;
pub use write::{OutputFormat, TraceWriter, WriteStats, WriterConfig};
// -- end writing --

pub use error::{Error, Result, Truncation};
pub use record::{
    Interface, Packet, PacketKind, RawBlock, RawOption, Record, Section, TsResolution,
};
pub use wire::LinkType;
