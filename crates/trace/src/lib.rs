//! `trace`: pcap and pcapng traces, read and written plain or compressed.

pub mod error;
pub mod record;

pub use error::{Error, Result, Truncation};
pub use record::{Interface, Packet, PacketKind, RawBlock, RawOption, Record, Section, TsResolution};
pub use wire::LinkType;
