//! The records a trace is made of, independent of its file format.
//!
//! A pcap file is one section with one interface; a pcapng file is one or
//! more sections, each with its own interfaces. Readers turn both into the
//! same stream of [`Record`]s and writers take that stream back, so that a
//! conversion keeps everything the target format can hold.

use wire::LinkType;

/// A pcapng option (or any TLV-style option) kept as code and raw value.
///
/// Values are stored as they would be written in little-endian order for
/// numeric options; readers of big-endian files convert the options they
/// know the layout of (see the reader) and keep others byte for byte.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawOption {
    /// Option code (`opt_comment` is 1).
    pub code: u16,
    /// Option value without padding.
    pub value: Vec<u8>,
}

/// pcapng `opt_comment`.
pub const OPT_COMMENT: u16 = 1;
/// pcapng IDB `if_name`.
pub const IF_NAME: u16 = 2;
/// pcapng IDB `if_tsresol`.
pub const IF_TSRESOL: u16 = 9;

impl RawOption {
    /// A comment option (`opt_comment`, code 1).
    pub fn comment(text: &str) -> RawOption {
        RawOption {
            code: OPT_COMMENT,
            value: text.as_bytes().to_vec(),
        }
    }
}

/// Timestamp resolution, encoded as pcapng's `if_tsresol` byte: with the high
/// bit clear, a tick is 10^-n seconds; with it set, 2^-n seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TsResolution(pub u8);

impl TsResolution {
    /// Microseconds, the pcap default and the pcapng default.
    pub const MICRO: TsResolution = TsResolution(6);
    /// Nanoseconds.
    pub const NANO: TsResolution = TsResolution(9);

    /// Converts ticks at this resolution to nanoseconds since the epoch,
    /// truncating finer resolutions. Saturates instead of overflowing.
    #[inline]
    pub fn ticks_to_nanos(self, ticks: u64) -> u64 {
        // The two resolutions of nearly every file, without a power.
        if self == TsResolution::NANO {
            return ticks;
        }
        if self == TsResolution::MICRO {
            return ticks.saturating_mul(1000);
        }
        let n = u32::from(self.0 & 0x7f);
        if self.0 & 0x80 == 0 {
            if n <= 9 {
                ticks.saturating_mul(10u64.pow(9 - n))
            } else {
                // n is at most 127; 10^(n-9) may not fit in u64, in which
                // case every timestamp is below one nanosecond.
                10u64.checked_pow(n - 9).map_or(0, |d| ticks / d)
            }
        } else {
            // ticks / 2^n seconds = ticks * 1e9 / 2^n ns, computed in u128.
            let ns = (u128::from(ticks) * 1_000_000_000u128) >> n.min(127);
            u64::try_from(ns).unwrap_or(u64::MAX)
        }
    }

    /// Converts nanoseconds since the epoch to ticks at this resolution
    /// (exact for the decimal resolutions up to nanoseconds).
    pub fn nanos_to_ticks(self, nanos: u64) -> u64 {
        let n = u32::from(self.0 & 0x7f);
        if self.0 & 0x80 == 0 {
            if n <= 9 {
                nanos / 10u64.pow(9 - n)
            } else {
                10u64
                    .checked_pow(n - 9)
                    .map_or(u64::MAX, |m| nanos.saturating_mul(m))
            }
        } else {
            let t = (u128::from(nanos) << n.min(127)) / 1_000_000_000u128;
            u64::try_from(t).unwrap_or(u64::MAX)
        }
    }
}

impl Default for TsResolution {
    fn default() -> Self {
        TsResolution::MICRO
    }
}

/// The start of a section: pcapng's Section Header Block. A pcap file has
/// one implicit section with no options.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Section {
    /// Format version (pcap 2.4, pcapng 1.0).
    pub major: u16,
    /// Minor version.
    pub minor: u16,
    /// Section options (comments, shb_hardware, shb_os, shb_userappl, ...).
    pub options: Vec<RawOption>,
}

/// A capture interface: pcapng's Interface Description Block, or the link
/// type, snap length and resolution of a pcap file header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    /// Link-layer header type of every packet on this interface.
    pub link_type: LinkType,
    /// Maximum captured length (0: no limit).
    pub snaplen: u32,
    /// Resolution of the packets' timestamps (from `if_tsresol`).
    pub tsresol: TsResolution,
    /// All IDB options, `if_tsresol` included, as read.
    pub options: Vec<RawOption>,
}

impl Interface {
    /// An interface with no options.
    pub fn new(link_type: LinkType, snaplen: u32, tsresol: TsResolution) -> Interface {
        Interface {
            link_type,
            snaplen,
            tsresol,
            options: Vec::new(),
        }
    }
}

/// How a packet was stored, so that a pcapng-to-pcapng conversion keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketKind {
    /// A pcap record.
    Pcap,
    /// pcapng Enhanced Packet Block.
    Enhanced,
    /// pcapng Simple Packet Block (no timestamp, interface 0).
    Simple,
    /// pcapng obsolete Packet Block.
    Obsolete,
}

/// One captured packet, borrowing its bytes from the reader's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    /// Index of the interface within the current section.
    pub interface: u32,
    /// Link type of that interface, copied here for convenience.
    pub link_type: LinkType,
    /// Timestamp in ticks of `tsresol` since 1970-01-01 00:00:00 UTC.
    pub ts: u64,
    /// Resolution of `ts`, copied from the interface.
    pub tsresol: TsResolution,
    /// Length of the packet on the wire (>= `data.len()` in a valid file).
    pub orig_len: u32,
    /// The captured bytes; `data.len()` is the captured length.
    pub data: &'a [u8],
    /// Packet options (EPB `epb_flags`, comments, ...), in file order.
    pub options: &'a [RawOption],
    /// The block the packet came from.
    pub kind: PacketKind,
}

impl Packet<'_> {
    /// Timestamp in nanoseconds since the epoch.
    #[inline]
    pub fn ts_nanos(&self) -> u64 {
        self.tsresol.ticks_to_nanos(self.ts)
    }

    /// Captured length.
    pub fn caplen(&self) -> u32 {
        // A reader never yields more than u32::MAX captured bytes; the
        // length fields it came from are 32 bits wide.
        u32::try_from(self.data.len()).unwrap_or(u32::MAX)
    }
}

/// A pcapng block kansoku does not interpret (Name Resolution, Interface
/// Statistics, Decryption Secrets, custom blocks ...), kept so that a
/// pcapng-to-pcapng conversion writes it again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawBlock<'a> {
    /// Block type.
    pub block_type: u32,
    /// Block body between the length fields, in the byte order of the file it
    /// came from (`little_endian` says which).
    pub body: &'a [u8],
    /// Whether `body` is little-endian.
    pub little_endian: bool,
}

/// One item of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record<'a> {
    /// A new section begins; the interfaces of the previous one are gone.
    Section(&'a Section),
    /// A new interface in the current section; its id is the number of
    /// interfaces announced before it in this section.
    Interface(&'a Interface),
    /// A packet.
    Packet(Packet<'a>),
    /// Any other pcapng block.
    Block(RawBlock<'a>),
}
