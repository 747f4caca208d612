//! The pcapng format (draft-ietf-opsawg-pcapng, "PCAP Now Generic (pcapng)
//! Capture File Format").
//!
//! A file is a sequence of blocks (section 3.1), each
//!
//! ```text
//!  0  block type
//!  4  block total length (whole block, multiple of 4)
//!  8  block body, padded to 4 bytes
//! -4  block total length again
//! ```
//!
//! in the byte order of its section, which the Section Header Block's
//! byte-order magic `1a2b3c4d` decides (section 4.1). Options (section 3.5)
//! are `code u16, length u16, value padded to 4` and end with `opt_endofopt`.
//!
//! # Byte order of options
//!
//! [`RawOption`] values are always in little-endian form, because kansoku
//! writes little-endian. When a big-endian section is read, the numeric
//! options whose layout the specification fixes are converted:
//! IDB `if_speed`, `if_tzone`, `if_tsoffset`, `if_txspeed`, `if_rxspeed`;
//! EPB/PB `epb_flags`, `epb_dropcount`, `epb_packetid`, `epb_queue`;
//! ISB `isb_starttime`/`isb_endtime` (two 32-bit halves, each swapped) and
//! the `isb_*` counters; the Private Enterprise Number of custom options.
//! Strings, addresses, hashes and options of unknown layout are kept byte for
//! byte. Raw blocks ([`RawBlock`]) keep the body exactly as in the file and
//! are converted only when written ([`emit_raw_block`]).

use std::fmt;
use std::ops::Range;

use wire::LinkType;

use super::{get_u16, get_u32};
use crate::error::{Error, Result};
use crate::record::{
    Interface, Packet, PacketKind, RawBlock, RawOption, Section, TsResolution, IF_TSRESOL,
};

/// Section Header Block (section 4.1).
pub const BT_SHB: u32 = 0x0a0d_0d0a;
/// Interface Description Block (section 4.2).
pub const BT_IDB: u32 = 0x0000_0001;
/// Obsolete Packet Block (appendix A).
pub const BT_PB: u32 = 0x0000_0002;
/// Simple Packet Block (section 4.4).
pub const BT_SPB: u32 = 0x0000_0003;
/// Name Resolution Block (section 4.5).
pub const BT_NRB: u32 = 0x0000_0004;
/// Interface Statistics Block (section 4.6).
pub const BT_ISB: u32 = 0x0000_0005;
/// Enhanced Packet Block (section 4.3).
pub const BT_EPB: u32 = 0x0000_0006;
/// systemd Journal Export Block (section 4.7 of some drafts; text only).
pub const BT_JOURNAL: u32 = 0x0000_0009;
/// Decryption Secrets Block (section 4.8).
pub const BT_DSB: u32 = 0x0000_000a;
/// Custom Block that may be copied (section 4.9).
pub const BT_CUSTOM: u32 = 0x0000_0bad;
/// Custom Block that must not be copied (section 4.9).
pub const BT_CUSTOM_NOCOPY: u32 = 0x4000_0bad;

/// The byte-order magic of a Section Header Block, read in its own order.
pub const BYTE_ORDER_MAGIC: u32 = 0x1a2b_3c4d;
/// Type and total length: the part of every block read before its body.
pub const BLOCK_HEADER_LEN: usize = 8;
/// Header plus trailing length: the smallest possible block.
pub const MIN_BLOCK_LEN: usize = 12;
/// The longest block a reader accepts. Real blocks hold one packet (at most
/// 256 KiB in practice); a larger length is corruption, and capping it keeps
/// a bad length field from driving a huge allocation.
pub const MAX_BLOCK_LEN: u32 = 64 << 20;

/// `opt_endofopt`.
pub const OPT_ENDOFOPT: u16 = 0;
/// `epb_dropcount` (also used here for the obsolete PB's drops field).
pub const EPB_DROPCOUNT: u16 = 4;

mod field {
    // SHB body (offsets within the body).
    pub const SHB_BOM: usize = 0;
    pub const SHB_MAJOR: usize = 4;
    pub const SHB_MINOR: usize = 6;
    pub const SHB_OPTIONS: usize = 16;
    // IDB body.
    pub const IDB_LINK_TYPE: usize = 0;
    pub const IDB_SNAPLEN: usize = 4;
    pub const IDB_OPTIONS: usize = 8;
    // EPB body.
    pub const EPB_INTERFACE: usize = 0;
    pub const EPB_TS_HIGH: usize = 4;
    pub const EPB_TS_LOW: usize = 8;
    pub const EPB_CAPLEN: usize = 12;
    pub const EPB_ORIG_LEN: usize = 16;
    pub const EPB_DATA: usize = 20;
    // Obsolete PB body: interface u16 and drops u16 replace the EPB's u32.
    pub const PB_DROPS: usize = 2;
    // SPB body.
    pub const SPB_ORIG_LEN: usize = 0;
    pub const SPB_DATA: usize = 4;
    // ISB body.
    pub const ISB_OPTIONS: usize = 12;
    // DSB body.
    pub const DSB_SECRETS_LEN: usize = 4;
    pub const DSB_DATA: usize = 8;
}

/// Rounds `n` up to a multiple of 4.
#[inline(always)]
pub fn pad4(n: usize) -> usize {
    (n + 3) & !3
}

/// The byte order of a Section Header Block from its first 12 bytes: `Some(true)`
/// for big-endian, `None` if the bytes are not an SHB.
pub fn section_byte_order(head: &[u8]) -> Option<bool> {
    if head.len() < MIN_BLOCK_LEN || get_u32(head, 0, false) != BT_SHB {
        return None;
    }
    match get_u32(head, 8, false) {
        BYTE_ORDER_MAGIC => Some(false),
        m if m.swap_bytes() == BYTE_ORDER_MAGIC => Some(true),
        _ => None,
    }
}

/// A zero-copy view of one whole block, in a known byte order.
#[derive(Debug, Clone, Copy)]
pub struct Block<T: AsRef<[u8]>> {
    buffer: T,
    big_endian: bool,
}

impl<T: AsRef<[u8]>> Block<T> {
    /// Wraps a buffer without checks; accessors may panic on a short one.
    pub fn new_unchecked(buffer: T, big_endian: bool) -> Block<T> {
        Block { buffer, big_endian }
    }

    /// Wraps a buffer that starts with a block, after [`Block::check_len`].
    pub fn new_checked(buffer: T, big_endian: bool, offset: u64) -> Result<Block<T>> {
        let b = Block::new_unchecked(buffer, big_endian);
        b.check_len(offset)?;
        Ok(b)
    }

    /// Checks the total length (at least 12, a multiple of 4, at most
    /// [`MAX_BLOCK_LEN`], within the buffer) and that the trailing length
    /// repeats it. `offset` is the block's place in the stream, for errors.
    pub fn check_len(&self, offset: u64) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < MIN_BLOCK_LEN {
            return Err(Error::format(
                offset,
                format!(
                    "pcapng block needs at least {MIN_BLOCK_LEN} bytes, {} there",
                    b.len()
                ),
            ));
        }
        let total = check_total_len(self.total_len(), offset)?;
        if total > b.len() {
            return Err(Error::format(
                offset,
                format!("pcapng block needs {total} bytes, {} there", b.len()),
            ));
        }
        let trailing = get_u32(b, total - 4, self.big_endian);
        if trailing as usize != total {
            return Err(Error::format(
                offset + total as u64 - 4,
                format!(
                    "pcapng block trailing length {trailing} differs from its total length {total}"
                ),
            ));
        }
        Ok(())
    }

    /// Block type.
    pub fn block_type(&self) -> u32 {
        get_u32(self.buffer.as_ref(), 0, self.big_endian)
    }

    /// Block total length field.
    pub fn total_len(&self) -> u32 {
        get_u32(self.buffer.as_ref(), 4, self.big_endian)
    }

    /// The body between the two length fields.
    pub fn body(&self) -> &[u8] {
        &self.buffer.as_ref()[BLOCK_HEADER_LEN..self.total_len() as usize - 4]
    }
}

/// Whether a block total length field is one the reader takes: at least
/// 12, a multiple of 4, at most [`MAX_BLOCK_LEN`] (without the error
/// [`check_total_len`] makes, for a search that refuses most offsets).
#[inline]
pub fn total_len_ok(total: u32) -> bool {
    (total as usize) >= MIN_BLOCK_LEN && total.is_multiple_of(4) && total <= MAX_BLOCK_LEN
}

/// Validates a block total length field: at least 12, a multiple of 4, at
/// most [`MAX_BLOCK_LEN`]. Returns it as `usize`.
pub fn check_total_len(total: u32, offset: u64) -> Result<usize> {
    if !total_len_ok(total) {
        return Err(Error::format(
            offset + 4,
            format!(
                "pcapng block total length {total} is invalid (a multiple of 4 from {MIN_BLOCK_LEN} to {MAX_BLOCK_LEN})"
            ),
        ));
    }
    Ok(total as usize)
}

/// How a numeric option value is laid out, for byte-order conversion.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Layout {
    Bytes,
    U32,
    U64,
    /// A timestamp as two 32-bit halves, high first (EPB format).
    TsPair,
    /// A custom option: Private Enterprise Number, then opaque data.
    Pen,
}

fn option_layout(block_type: u32, code: u16) -> Layout {
    match (block_type, code) {
        // Custom options (section 3.5.1) in any block.
        (_, 2988 | 2989 | 19372 | 19373) => Layout::Pen,
        // IDB (section 4.2): if_speed, if_tzone, if_tsoffset, if_txspeed, if_rxspeed.
        (BT_IDB, 8 | 14 | 16 | 17) => Layout::U64,
        (BT_IDB, 10) => Layout::U32,
        // EPB (section 4.3.1) and the obsolete PB: flags, dropcount, packetid, queue.
        (BT_EPB | BT_PB, 2 | 6) => Layout::U32,
        (BT_EPB | BT_PB, 4 | 5) => Layout::U64,
        // ISB (section 4.6.1): start/end time, then 64-bit counters.
        (BT_ISB, 2 | 3) => Layout::TsPair,
        (BT_ISB, 4..=8) => Layout::U64,
        _ => Layout::Bytes,
    }
}

/// Converts a big-endian option value of a known layout to little-endian in
/// place; values of the wrong length are left as they are.
fn option_to_le(layout: Layout, v: &mut [u8]) {
    match (layout, v.len()) {
        (Layout::U32, 4) | (Layout::U64, 8) => v.reverse(),
        (Layout::TsPair, 8) => {
            v[..4].reverse();
            v[4..].reverse();
        }
        (Layout::Pen, n) if n >= 4 => v[..4].reverse(),
        _ => {}
    }
}

/// Parses the options in `bytes` (the tail of a body of `block_type`) into
/// `out`, converting known numeric values of a big-endian section to
/// little-endian. Stops at `opt_endofopt` or when fewer than 4 bytes remain
/// (padding). `offset` is the stream offset of `bytes[0]`.
pub fn parse_options(
    bytes: &[u8],
    block_type: u32,
    big_endian: bool,
    offset: u64,
    out: &mut Vec<RawOption>,
) -> Result<()> {
    let mut at = 0usize;
    while bytes.len() - at >= 4 {
        let code = get_u16(bytes, at, big_endian);
        let len = usize::from(get_u16(bytes, at + 2, big_endian));
        if code == OPT_ENDOFOPT {
            break;
        }
        let start = at + 4;
        if len > bytes.len() - start {
            return Err(Error::format(
                offset + at as u64,
                format!(
                    "pcapng option {code} needs {len} bytes, {} left in the block",
                    bytes.len() - start
                ),
            ));
        }
        let mut value = bytes[start..start + len].to_vec();
        if big_endian {
            option_to_le(option_layout(block_type, code), &mut value);
        }
        out.push(RawOption { code, value });
        // The last option's padding may be missing in sloppy files; `min`
        // keeps the loop in bounds either way.
        at = (start + pad4(len)).min(bytes.len());
    }
    Ok(())
}

/// Parses a Section Header Block body. `offset` is the block's stream offset.
pub fn parse_section(body: &[u8], big_endian: bool, offset: u64) -> Result<Section> {
    let body_off = offset + BLOCK_HEADER_LEN as u64;
    if body.len() < field::SHB_OPTIONS {
        return Err(Error::format(
            body_off,
            format!(
                "pcapng section header body needs 16 bytes, {} there",
                body.len()
            ),
        ));
    }
    if get_u32(body, field::SHB_BOM, big_endian) != BYTE_ORDER_MAGIC {
        return Err(Error::format(
            body_off,
            "pcapng section header: bad byte-order magic",
        ));
    }
    let major = get_u16(body, field::SHB_MAJOR, big_endian);
    let minor = get_u16(body, field::SHB_MINOR, big_endian);
    if major != 1 {
        return Err(Error::format(
            body_off + field::SHB_MAJOR as u64,
            format!("pcapng version {major}.{minor} (expected 1.0)"),
        ));
    }
    let mut options = Vec::new();
    parse_options(
        &body[field::SHB_OPTIONS..],
        BT_SHB,
        big_endian,
        body_off + field::SHB_OPTIONS as u64,
        &mut options,
    )?;
    Ok(Section {
        major,
        minor,
        options,
    })
}

/// Parses an Interface Description Block body; `if_tsresol` sets the
/// resolution (default 10^-6).
pub fn parse_interface(body: &[u8], big_endian: bool, offset: u64) -> Result<Interface> {
    let body_off = offset + BLOCK_HEADER_LEN as u64;
    if body.len() < field::IDB_OPTIONS {
        return Err(Error::format(
            body_off,
            format!(
                "pcapng interface description body needs 8 bytes, {} there",
                body.len()
            ),
        ));
    }
    let link_type = LinkType::from_code(get_u16(body, field::IDB_LINK_TYPE, big_endian));
    let snaplen = get_u32(body, field::IDB_SNAPLEN, big_endian);
    let mut options = Vec::new();
    parse_options(
        &body[field::IDB_OPTIONS..],
        BT_IDB,
        big_endian,
        body_off + field::IDB_OPTIONS as u64,
        &mut options,
    )?;
    let tsresol = options
        .iter()
        .find(|o| o.code == IF_TSRESOL)
        .and_then(|o| o.value.first())
        .map_or(TsResolution::MICRO, |&b| TsResolution(b));
    Ok(Interface {
        link_type,
        snaplen,
        tsresol,
        options,
    })
}

/// A parsed packet block (EPB, SPB or obsolete PB), with ranges into its body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketRepr {
    /// Interface id (0 for an SPB).
    pub interface: u32,
    /// Timestamp in ticks of the interface's resolution (0 for an SPB).
    pub ts: u64,
    /// Original length.
    pub orig_len: u32,
    /// Captured bytes, as a range of the body.
    pub data: Range<usize>,
    /// Options, as a range of the body (empty for an SPB).
    pub options: Range<usize>,
    /// Which block it was.
    pub kind: PacketKind,
    /// The obsolete PB's drops count, unless it was `0xffff` (unknown).
    pub drops: Option<u16>,
}

impl PacketRepr {
    /// Parses the body of a packet block of `block_type` (EPB, PB or SPB).
    /// `if0_snaplen` is the snap length of interface 0, which bounds an SPB's
    /// captured data (section 4.4). `offset` is the block's stream offset.
    #[inline]
    pub fn parse(
        block_type: u32,
        body: &[u8],
        big_endian: bool,
        offset: u64,
        if0_snaplen: u32,
    ) -> Result<PacketRepr> {
        let body_off = offset + BLOCK_HEADER_LEN as u64;
        if block_type == BT_SPB {
            if body.len() < field::SPB_DATA {
                return Err(Error::format(
                    body_off,
                    "pcapng simple packet block body too short",
                ));
            }
            let orig_len = get_u32(body, field::SPB_ORIG_LEN, big_endian);
            let mut caplen = (orig_len as usize).min(body.len() - field::SPB_DATA);
            if if0_snaplen != 0 {
                caplen = caplen.min(if0_snaplen as usize);
            }
            return Ok(PacketRepr {
                interface: 0,
                ts: 0,
                orig_len,
                data: field::SPB_DATA..field::SPB_DATA + caplen,
                options: body.len()..body.len(),
                kind: PacketKind::Simple,
                drops: None,
            });
        }
        if body.len() < field::EPB_DATA {
            return Err(Error::format(
                body_off,
                format!(
                    "pcapng packet block body needs 20 bytes, {} there",
                    body.len()
                ),
            ));
        }
        let (interface, kind, drops) = if block_type == BT_PB {
            let drops = get_u16(body, field::PB_DROPS, big_endian);
            (
                u32::from(get_u16(body, field::EPB_INTERFACE, big_endian)),
                PacketKind::Obsolete,
                (drops != 0xffff).then_some(drops),
            )
        } else {
            (
                get_u32(body, field::EPB_INTERFACE, big_endian),
                PacketKind::Enhanced,
                None,
            )
        };
        let ts = (u64::from(get_u32(body, field::EPB_TS_HIGH, big_endian)) << 32)
            | u64::from(get_u32(body, field::EPB_TS_LOW, big_endian));
        let caplen = get_u32(body, field::EPB_CAPLEN, big_endian) as usize;
        let orig_len = get_u32(body, field::EPB_ORIG_LEN, big_endian);
        let room = body.len() - field::EPB_DATA;
        if caplen > room {
            return Err(Error::format(
                body_off + field::EPB_CAPLEN as u64,
                format!("pcapng packet captured length {caplen} exceeds its block ({room} bytes)"),
            ));
        }
        let data_end = field::EPB_DATA + caplen;
        let opt_start = (field::EPB_DATA + pad4(caplen)).min(body.len());
        Ok(PacketRepr {
            interface,
            ts,
            orig_len,
            data: field::EPB_DATA..data_end,
            options: opt_start..body.len(),
            kind,
            drops,
        })
    }
}

impl fmt::Display for PacketRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pcapng {:?} packet if {} ts {} caplen {} len {}",
            self.kind,
            self.interface,
            self.ts,
            self.data.len(),
            self.orig_len
        )
    }
}

/// Starts a little-endian block of `block_type`; returns where it begins.
fn begin_block(out: &mut Vec<u8>, block_type: u32) -> usize {
    let start = out.len();
    out.extend_from_slice(&block_type.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    start
}

/// Pads the body to 4 bytes, appends the trailing length and patches the
/// leading one.
fn end_block(out: &mut Vec<u8>, start: usize) {
    out.resize(start + pad4(out.len() - start), 0);
    let total = u32::try_from(out.len() - start + 4).unwrap_or(u32::MAX);
    out.extend_from_slice(&total.to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&total.to_le_bytes());
}

/// Appends options little-endian, then `opt_endofopt` if there were any.
/// `opt_endofopt` entries in the list and values longer than 65535 bytes
/// (which the 16-bit length cannot describe) are left out.
pub fn emit_options(out: &mut Vec<u8>, options: &[RawOption]) {
    let mut any = false;
    for o in options {
        let Ok(len) = u16::try_from(o.value.len()) else {
            continue;
        };
        if o.code == OPT_ENDOFOPT {
            continue;
        }
        out.extend_from_slice(&o.code.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&o.value);
        out.resize(out.len() + pad4(o.value.len()) - o.value.len(), 0);
        any = true;
    }
    if any {
        out.extend_from_slice(&[0u8; 4]);
    }
}

/// Appends a little-endian Section Header Block with section length -1
/// (unknown), as a streaming writer must.
pub fn emit_section(out: &mut Vec<u8>, s: &Section) {
    let start = begin_block(out, BT_SHB);
    out.extend_from_slice(&BYTE_ORDER_MAGIC.to_le_bytes());
    // The blocks this module emits are pcapng 1.0, whatever version the
    // section came from (a pcap file's implicit section says 2.4, the pcap
    // version, which pcapng readers reject).
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&(-1i64).to_le_bytes());
    emit_options(out, &s.options);
    end_block(out, start);
}

/// Appends a little-endian Interface Description Block with `i.options`;
/// `if_tsresol` is added from `i.tsresol` when the options lack it and the
/// resolution is not the default microseconds.
pub fn emit_interface(out: &mut Vec<u8>, i: &Interface) {
    let start = begin_block(out, BT_IDB);
    out.extend_from_slice(&i.link_type.code().to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&i.snaplen.to_le_bytes());
    if i.tsresol != TsResolution::MICRO && !i.options.iter().any(|o| o.code == IF_TSRESOL) {
        let mut opts = i.options.clone();
        opts.push(RawOption {
            code: IF_TSRESOL,
            value: vec![i.tsresol.0],
        });
        emit_options(out, &opts);
    } else {
        emit_options(out, &i.options);
    }
    end_block(out, start);
}

/// Appends a packet: an Enhanced Packet Block (for EPB, pcap and obsolete PB
/// packets, options kept) or a Simple Packet Block for [`PacketKind::Simple`].
/// `p.ts` is written as is, in ticks of the interface's resolution.
pub fn emit_packet(out: &mut Vec<u8>, p: &Packet) {
    let caplen = u32::try_from(p.data.len()).unwrap_or(u32::MAX);
    if p.kind == PacketKind::Simple {
        let start = begin_block(out, BT_SPB);
        out.extend_from_slice(&p.orig_len.to_le_bytes());
        out.extend_from_slice(p.data);
        end_block(out, start);
        return;
    }
    let start = begin_block(out, BT_EPB);
    out.extend_from_slice(&p.interface.to_le_bytes());
    out.extend_from_slice(&((p.ts >> 32) as u32).to_le_bytes());
    out.extend_from_slice(&(p.ts as u32).to_le_bytes());
    out.extend_from_slice(&caplen.to_le_bytes());
    out.extend_from_slice(&p.orig_len.to_le_bytes());
    out.extend_from_slice(p.data);
    out.resize(out.len() + pad4(p.data.len()) - p.data.len(), 0);
    emit_options(out, p.options);
    end_block(out, start);
}

/// Appends a block kansoku does not interpret, little-endian.
///
/// A little-endian body is copied. A big-endian body is converted when its
/// layout is known: ISB (interface id, timestamp, options), NRB (records,
/// options), DSB (secrets type and length, data, options) and the systemd
/// journal block (text only). Any other big-endian body cannot be converted
/// safely and is an error; the writer warns and skips the block.
pub fn emit_raw_block(out: &mut Vec<u8>, b: &RawBlock) -> Result<()> {
    if b.little_endian {
        let start = begin_block(out, b.block_type);
        out.extend_from_slice(b.body);
        end_block(out, start);
        return Ok(());
    }
    let body = convert_body_to_le(b.block_type, b.body)?;
    let start = begin_block(out, b.block_type);
    out.extend_from_slice(&body);
    end_block(out, start);
    Ok(())
}

/// Rewrites a big-endian body of a known block type little-endian.
fn convert_body_to_le(block_type: u32, body: &[u8]) -> Result<Vec<u8>> {
    let short = |need: usize| {
        Error::format(
            0,
            format!(
                "pcapng block type 0x{block_type:08x}: body needs {need} bytes, {} there",
                body.len()
            ),
        )
    };
    let mut out = Vec::with_capacity(body.len() + 4);
    let opts_from = match block_type {
        BT_ISB => {
            if body.len() < field::ISB_OPTIONS {
                return Err(short(field::ISB_OPTIONS));
            }
            for off in [0, 4, 8] {
                out.extend_from_slice(&get_u32(body, off, true).to_le_bytes());
            }
            field::ISB_OPTIONS
        }
        BT_DSB => {
            if body.len() < field::DSB_DATA {
                return Err(short(field::DSB_DATA));
            }
            let len = get_u32(body, field::DSB_SECRETS_LEN, true) as usize;
            let end = field::DSB_DATA.saturating_add(pad4(len));
            if end > body.len() {
                return Err(short(end));
            }
            for off in [0, 4] {
                out.extend_from_slice(&get_u32(body, off, true).to_le_bytes());
            }
            out.extend_from_slice(&body[field::DSB_DATA..end]);
            end
        }
        BT_NRB => {
            // Records (section 4.5): type u16, length u16, value padded,
            // ending with nrb_record_end. The values are addresses and
            // names, which have no byte order.
            let mut at = 0usize;
            loop {
                if body.len() - at < 4 {
                    return Err(short(at + 4));
                }
                let rtype = get_u16(body, at, true);
                let len = usize::from(get_u16(body, at + 2, true));
                let end = at + 4 + pad4(len);
                if end > body.len() {
                    return Err(short(end));
                }
                out.extend_from_slice(&rtype.to_le_bytes());
                out.extend_from_slice(&(len as u16).to_le_bytes());
                out.extend_from_slice(&body[at + 4..end]);
                at = end;
                if rtype == 0 {
                    break;
                }
            }
            at
        }
        BT_JOURNAL => return Ok(body.to_vec()),
        _ => {
            return Err(Error::format(
                0,
                format!(
                    "pcapng block type 0x{block_type:08x} from a big-endian section has an unknown layout and cannot be rewritten little-endian"
                ),
            ))
        }
    };
    let mut options = Vec::new();
    parse_options(&body[opts_from..], block_type, true, 0, &mut options)?;
    emit_options(&mut out, &options);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An SHB as Wireshark 4.0 writes it on x86-64 (little-endian, version
    /// 1.0, section length -1, no options), 28 bytes.
    const WIRESHARK_SHB: [u8; 28] = [
        0x0a, 0x0d, 0x0d, 0x0a, 0x1c, 0, 0, 0, 0x4d, 0x3c, 0x2b, 0x1a, 1, 0, 0, 0, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1c, 0, 0, 0,
    ];

    #[test]
    fn section_header_bytes() {
        assert_eq!(section_byte_order(&WIRESHARK_SHB), Some(false));
        let b = Block::new_checked(&WIRESHARK_SHB[..], false, 0).unwrap();
        assert_eq!(b.block_type(), BT_SHB);
        let s = parse_section(b.body(), false, 0).unwrap();
        assert_eq!((s.major, s.minor), (1, 0));
        assert!(s.options.is_empty());
        let mut out = Vec::new();
        emit_section(&mut out, &s);
        assert_eq!(out, WIRESHARK_SHB);
    }

    #[test]
    fn block_length_checks() {
        let mut b = WIRESHARK_SHB;
        b[24] = 0x20; // trailing length differs
        assert!(Block::new_checked(&b[..], false, 0).is_err());
        let mut b = WIRESHARK_SHB;
        b[4] = 0x1d; // not a multiple of 4
        assert!(Block::new_checked(&b[..], false, 0).is_err());
        assert!(check_total_len(MAX_BLOCK_LEN + 4, 0).is_err());
        assert!(check_total_len(8, 0).is_err());
        assert_eq!(check_total_len(12, 0).unwrap(), 12);
    }

    #[test]
    fn big_endian_options_become_little_endian() {
        // if_speed = 10^9 (u64) and if_name "eth0", big-endian.
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&8u16.to_be_bytes());
        bytes.extend_from_slice(&8u16.to_be_bytes());
        bytes.extend_from_slice(&1_000_000_000u64.to_be_bytes());
        bytes.extend_from_slice(&2u16.to_be_bytes());
        bytes.extend_from_slice(&4u16.to_be_bytes());
        bytes.extend_from_slice(b"eth0");
        bytes.extend_from_slice(&[0; 4]);
        let mut opts = Vec::new();
        parse_options(&bytes, BT_IDB, true, 0, &mut opts).unwrap();
        assert_eq!(opts[0].value, 1_000_000_000u64.to_le_bytes());
        assert_eq!(opts[1].value, b"eth0");
        assert_eq!(opts.len(), 2);
    }

    #[test]
    fn option_overrunning_its_block_is_an_error() {
        let bytes = [1, 0, 9, 0, b'a', b'b', b'c', b'd'];
        let mut opts = Vec::new();
        let e = parse_options(&bytes, BT_EPB, false, 40, &mut opts).unwrap_err();
        assert!(matches!(e, Error::Format { offset: 40, .. }), "{e}");
    }

    #[test]
    fn isb_big_endian_is_converted() {
        let mut body = Vec::new();
        body.extend_from_slice(&1u32.to_be_bytes());
        body.extend_from_slice(&2u32.to_be_bytes());
        body.extend_from_slice(&3u32.to_be_bytes());
        body.extend_from_slice(&4u16.to_be_bytes()); // isb_ifrecv
        body.extend_from_slice(&8u16.to_be_bytes());
        body.extend_from_slice(&77u64.to_be_bytes());
        body.extend_from_slice(&[0; 4]);
        let mut out = Vec::new();
        emit_raw_block(
            &mut out,
            &RawBlock {
                block_type: BT_ISB,
                body: &body,
                little_endian: false,
            },
        )
        .unwrap();
        let b = Block::new_checked(&out[..], false, 0).unwrap();
        assert_eq!(get_u32(b.body(), 0, false), 1);
        assert_eq!(get_u32(b.body(), 8, false), 3);
        assert_eq!(b.body()[16..24], 77u64.to_le_bytes());
        // An unknown big-endian block cannot be converted.
        let unknown = RawBlock {
            block_type: 0x1234,
            body: &[0, 0, 0, 1],
            little_endian: false,
        };
        assert!(emit_raw_block(&mut out, &unknown).is_err());
    }

    #[test]
    fn spb_is_bounded_by_snaplen_and_body() {
        let mut body = 100u32.to_le_bytes().to_vec();
        body.extend_from_slice(&[7u8; 64]);
        let p = PacketRepr::parse(BT_SPB, &body, false, 0, 0).unwrap();
        assert_eq!(p.data, 4..68);
        let p = PacketRepr::parse(BT_SPB, &body, false, 0, 10).unwrap();
        assert_eq!(p.data, 4..14);
        assert_eq!(p.orig_len, 100);
    }
}
