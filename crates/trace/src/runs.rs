//! An uncompressed pcap or pcapng file read as runs, each of which can be
//! read, checked and walked on its own, on any thread: what lets two
//! threads share the reading of one file (the profiler's
//! `pipeline::SplitSource`).
//!
//! A file with an index is cut into runs of whole chunks, as its index has
//! them: uncompressed pcap, an index that [`check_index`](crate::window)
//! bears out, closed (an end entry), nothing past it. A plain pcap file
//! without an index (what tcpdump and most tools write) is cut into runs of
//! a fixed length, each holding the records that start in it: a run's first
//! record is found by its headers ([`resync`]), and the last one is read to
//! its end, past the run's. A pcapng file without an index (what dumpcap
//! and tshark write) is cut the same way, a run's first enhanced packet
//! block found by the lengths each block gives at both ends; its first
//! section's header and interfaces must come before its first other block.
//! A run's blocks that hold no packet (statistics, as dumpcap writes at the
//! end; names) are passed over as the reader passes over them, and a run
//! with a block that changes what the packets after it mean (another
//! section or interface), a simple or obsolete packet block, or a packet
//! with options (which the reader parses, and may refuse) is left to the
//! ordinary reader. Anything else (compressed, an indexed pcapng, an index
//! the file does not bear out) is read by [`TraceReader`] as before
//! (`Runs::plan` returns `None`).
//!
//! Nothing here is trusted that the ordinary reader would check. A run's
//! chunks are compared with their checksums (when reads verify and the
//! file has an index), and a run's packets count only if they are whole
//! pcap records or pcapng blocks, walked from the run's first record to its
//! last.
//! [`Runs::walk`] gives the bytes of the file a run's records covered, and
//! its caller takes a run only if it starts exactly where the run before
//! ended: the first run starts after the file header (a pcapng file's
//! section header and interfaces), so by induction every
//! run taken starts at a record boundary and the runs' records are those a
//! reader from the start would walk, however the runs were found. (A
//! header found inside a packet's payload, by chance or because the packet
//! carries a pcap file, gives a run that does not start where the one
//! before ended.) A run that fails is not used: its caller goes on from the
//! end of the last run it took with the ordinary reader, which reports the
//! corrupt chunk, the bad record or the cut exactly as it would have.
//!
//! [`TraceReader`]: crate::TraceReader

use std::fs::File;
use std::io::Read;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::format::pcap::{self, FileHeader, FileHeaderRepr, RecordHeader, RecordRepr};
use crate::format::pcapng::{
    self, Block, PacketRepr, BLOCK_HEADER_LEN, BT_EPB, BT_IDB, BT_PB, BT_SHB, BT_SPB,
};
use crate::format::{get_u32, Codec};
use crate::index::{index_path, read_index, IndexEntry};
use crate::record::TsResolution;
use crate::window::{check_index, Checked};
use wire::LinkType;

/// How the file is cut into runs.
enum Layout {
    /// Whole chunks of the index: each run's chunks.
    Indexed {
        entries: Vec<IndexEntry>,
        runs: Vec<Range<usize>>,
        verify: bool,
    },
    /// No index: run `i` holds the records that start in
    /// `i * run_bytes..(i + 1) * run_bytes`.
    Fixed { run_bytes: u64 },
}

/// The runs of a file, and what reading one needs.
pub struct Runs {
    file: File,
    format: Format,
    layout: Layout,
    len: u64,
}

/// The file's format, as its runs read it.
enum Format {
    Pcap(FileHeaderRepr),
    /// Only without an index (a pcapng file kansoku wrote is read by the
    /// ordinary reader, which checks its chunks).
    Pcapng(Section),
}

/// What walking a pcapng file's packets needs of its first section, whose
/// header and interfaces come before its first other block.
struct Section {
    big_endian: bool,
    /// Each interface's link type and timestamp resolution.
    interfaces: Vec<(LinkType, TsResolution)>,
    /// Interface 0's snap length, which the reader gives the packet parse
    /// (it bounds a simple packet's data).
    if0_snaplen: u32,
    /// Where the first block after the interfaces starts.
    first: usize,
}

/// One packet of a run.
#[derive(Clone, Copy, Debug)]
pub struct RunPacket<'a> {
    pub ts_ns: u64,
    pub orig_len: u32,
    pub data: &'a [u8],
    pub link: LinkType,
}

/// How a run without an index is walked: pcap records or pcapng blocks.
trait Records {
    /// What a record's first bytes say.
    type Head;
    /// Bytes that give a record's length.
    const HEAD: usize;
    /// Where the first record after the file's header starts.
    fn first(&self) -> usize;
    /// The length of the record at `bytes` (at least [`Self::HEAD`] bytes,
    /// the file from offset `at`), and what its head says; `None` where the
    /// reader would refuse it or it is not for a run.
    fn head(&self, bytes: &[u8], at: u64) -> Option<(usize, Self::Head)>;
    /// The packet of the whole record `rec`, at offset `at` (`Some(None)`:
    /// a block that holds none, passed over as the reader passes over it);
    /// `None` as for [`Records::head`].
    fn packet<'a>(
        &self,
        head: &Self::Head,
        rec: &'a [u8],
        at: u64,
    ) -> Option<Option<RunPacket<'a>>>;
    /// The first offset under `before` in `bytes` where a record can
    /// start; `at_end`: `bytes` end where the file does.
    fn resync(&self, bytes: &[u8], before: usize, at_end: bool) -> Option<usize>;
}

impl Records for FileHeaderRepr {
    type Head = RecordRepr;
    const HEAD: usize = pcap::RECORD_HEADER_LEN;

    fn first(&self) -> usize {
        pcap::FILE_HEADER_LEN
    }

    #[inline(always)]
    fn head(&self, bytes: &[u8], at: u64) -> Option<(usize, RecordRepr)> {
        let hdr = RecordHeader::new_unchecked(bytes.get(..Self::HEAD)?);
        let r = RecordRepr::parse(&hdr, self.big_endian, at).ok()?;
        Some((Self::HEAD + r.caplen as usize, r))
    }

    #[inline(always)]
    fn packet<'a>(&self, r: &RecordRepr, rec: &'a [u8], _: u64) -> Option<Option<RunPacket<'a>>> {
        let res = if self.nanos {
            TsResolution::NANO
        } else {
            TsResolution::MICRO
        };
        Some(Some(RunPacket {
            ts_ns: res.ticks_to_nanos(r.ticks(self.nanos)),
            orig_len: r.orig_len,
            data: rec.get(Self::HEAD..)?,
            link: self.link_type,
        }))
    }

    fn resync(&self, bytes: &[u8], before: usize, at_end: bool) -> Option<usize> {
        resync(bytes, before, at_end, self.big_endian, self.nanos)
    }
}

/// An enhanced packet block's fixed part: its header, interface, time,
/// captured and original lengths.
const EPB_FIXED: usize = BLOCK_HEADER_LEN + 20;

/// The blocks holding no packet that a run's first block may be found
/// among: statistics, names, decryption secrets, a journal entry, custom
/// blocks (a run walks over any block but a section, an interface or a
/// packet block other than an enhanced one, as the reader does).
const PASSED_OVER: [u32; 6] = [
    pcapng::BT_ISB,
    pcapng::BT_NRB,
    pcapng::BT_DSB,
    pcapng::BT_JOURNAL,
    pcapng::BT_CUSTOM,
    pcapng::BT_CUSTOM_NOCOPY,
];

impl Records for Section {
    /// The block's type.
    type Head = u32;
    const HEAD: usize = BLOCK_HEADER_LEN;

    fn first(&self) -> usize {
        self.first
    }

    /// A block that changes what the packets after it mean (a new section
    /// or interface), or a packet block other than an enhanced one (a
    /// simple packet has no time), is left to the ordinary reader, which
    /// reads it as it always does. Others (statistics, as dumpcap writes
    /// at a file's end; names; secrets; custom blocks) hold no packet and
    /// are passed over, as the reader passes over them, once their length
    /// is one it takes.
    #[inline(always)]
    fn head(&self, bytes: &[u8], _: u64) -> Option<(usize, u32)> {
        let be = self.big_endian;
        let kind = get_u32(bytes, 0, be);
        if matches!(kind, BT_SHB | BT_IDB | BT_SPB | BT_PB) {
            return None;
        }
        let total = get_u32(bytes, 4, be);
        pcapng::total_len_ok(total).then_some((total as usize, kind))
    }

    #[inline(always)]
    fn packet<'a>(&self, kind: &u32, rec: &'a [u8], at: u64) -> Option<Option<RunPacket<'a>>> {
        let be = self.big_endian;
        // `rec` is the whole block, of the length `head` checked: what is
        // left of `Block::check_len` is its trailing length (the whole
        // check again here cost pcapng 4%, 0.130 against 0.125 s).
        let total = rec.len();
        if get_u32(rec, total - 4, be) as usize != total {
            return None;
        }
        if *kind != BT_EPB {
            return Some(None);
        }
        let body = rec.get(BLOCK_HEADER_LEN..total - 4)?;
        let p = PacketRepr::parse(BT_EPB, body, be, at, self.if0_snaplen).ok()?;
        // The reader parses a packet's options and may refuse them; here
        // they would only cost the walk, and a packet with options is
        // left to the reader.
        if !p.options.is_empty() {
            return None;
        }
        let &(link, res) = self.interfaces.get(p.interface as usize)?;
        Some(Some(RunPacket {
            ts_ns: res.ticks_to_nanos(p.ts),
            orig_len: p.orig_len,
            data: body.get(p.data)?,
            link,
        }))
    }

    fn resync(&self, bytes: &[u8], before: usize, at_end: bool) -> Option<usize> {
        (0..before.min(bytes.len())).find(|&o| self.chain_at(bytes, o, at_end))
    }
}

impl Section {
    /// Whether a run's first block can start at `bytes[o..]`, judged as
    /// [`chain_at`] judges pcap records: it and the [`CHAIN`] - 1 blocks
    /// after it of a length the reader accepts that their trailing length
    /// repeats, each an enhanced packet block (on an interface of the
    /// section, with no more bytes captured than sent or than the block
    /// holds) or a block that holds no packet ([`PASSED_OVER`]).
    fn chain_at(&self, bytes: &[u8], mut o: usize, at_end: bool) -> bool {
        let be = self.big_endian;
        for k in 0..CHAIN {
            if k > 0 && at_end && o == bytes.len() {
                return true;
            }
            let Some(h) = bytes.get(o..o + BLOCK_HEADER_LEN) else {
                return false;
            };
            // The length checked as the reader checks it, without the
            // error message it makes: most offsets tried are refused here.
            let total = get_u32(h, 4, be);
            if !pcapng::total_len_ok(total) {
                return false;
            }
            let total = total as usize;
            let fits = match get_u32(h, 0, be) {
                BT_EPB => bytes.get(o..o + EPB_FIXED).is_some_and(|h| {
                    let (caplen, orig_len) = (get_u32(h, 20, be), get_u32(h, 24, be));
                    (get_u32(h, 8, be) as usize) < self.interfaces.len()
                        && caplen <= orig_len
                        && caplen as usize <= total.saturating_sub(EPB_FIXED + 4)
                }),
                kind => PASSED_OVER.contains(&kind),
            };
            if !fits {
                return false;
            }
            match bytes.get(o + total - 4..o + total) {
                Some(t) if get_u32(t, 0, be) as usize == total => o += total,
                _ => return false,
            }
        }
        true
    }

    /// The first section of a pcapng file whose first bytes are `bytes`:
    /// its header, then its interfaces; `None` if they do not parse or do
    /// not end in `bytes`, or there is no interface.
    fn parse(bytes: &[u8]) -> Option<Section> {
        let be = pcapng::section_byte_order(bytes)?;
        let block = |o: usize| Block::new_checked(bytes.get(o..)?, be, o as u64).ok();
        let shb = block(0)?;
        if shb.block_type() != BT_SHB {
            return None;
        }
        pcapng::parse_section(shb.body(), be, 0).ok()?;
        let mut o = shb.total_len() as usize;
        let mut interfaces = Vec::new();
        let mut if0_snaplen = 0;
        loop {
            let idb = block(o)?;
            if idb.block_type() != BT_IDB {
                break;
            }
            let i = pcapng::parse_interface(idb.body(), be, o as u64).ok()?;
            if interfaces.is_empty() {
                if0_snaplen = i.snaplen;
            }
            interfaces.push((i.link_type, i.tsresol));
            o += idb.total_len() as usize;
        }
        (!interfaces.is_empty()).then_some(Section {
            big_endian: be,
            interfaces,
            if0_snaplen,
            first: o,
        })
    }
}

/// Bytes of a run read at a time (for an indexed run, whole chunks, or one
/// chunk when it is longer, checked as soon as read): a piece that stays in
/// a core's cache between its read and its walk or check.
const PIECE: usize = 256 << 10;

/// Bytes read past a fixed run's end with it, so that its last record
/// (a full Ethernet frame or less) takes no second read.
const SLACK: u64 = 2048;

/// The most of a pcapng file's start read for its section's header and
/// interfaces.
const SECTION_BYTES: usize = 64 << 10;

/// Records a header found by [`resync`] must lead in a chain.
const CHAIN: usize = 4;

/// Whether a record can start at `bytes[o..]`, judged by the headers of the
/// record there and of the [`CHAIN`] - 1 after it, all in `bytes` (fewer
/// only if they end exactly at its end and that is the file's, `at_end`):
/// each with a fraction of a second under a second, a captured length no
/// more than the original, an original length of 1 byte to 1 MiB (a
/// length the reader accepts), and a time within a day of the first's.
/// Stricter than the reader, on purpose: a true boundary it refuses costs a
/// run read again by the ordinary reader, never a packet.
fn chain_at(bytes: &[u8], mut o: usize, at_end: bool, big_endian: bool, nanos: bool) -> bool {
    const HDR: usize = pcap::RECORD_HEADER_LEN;
    let unit = if nanos { 1_000_000_000 } else { 1_000_000 };
    let mut first_sec = None;
    for k in 0..CHAIN {
        if k > 0 && at_end && o == bytes.len() {
            return true;
        }
        let Some(h) = bytes.get(o..o + HDR) else {
            return false;
        };
        // The fields read directly: a header refused here is the common
        // case, and the reader's parse makes an error message of it.
        let h = RecordHeader::new_unchecked(h);
        let (sec, frac) = (h.ts_sec(big_endian), h.ts_frac(big_endian));
        let (caplen, orig_len) = (h.caplen(big_endian), h.orig_len(big_endian));
        let first = *first_sec.get_or_insert(sec);
        // (1 MiB is under the reader's largest captured length.)
        if frac >= unit
            || caplen > orig_len
            || orig_len == 0
            || orig_len > 1 << 20
            || sec.abs_diff(first) > 86_400
        {
            return false;
        }
        o += HDR + caplen as usize;
        if o > bytes.len() {
            return false;
        }
    }
    true
}

/// The first offset under `before` in `bytes` where `chain_at` finds a
/// record can start; `at_end`: `bytes` end where the file does.
pub fn resync(
    bytes: &[u8],
    before: usize,
    at_end: bool,
    big_endian: bool,
    nanos: bool,
) -> Option<usize> {
    (0..before.min(bytes.len())).find(|&o| chain_at(bytes, o, at_end, big_endian, nanos))
}

impl Runs {
    /// The runs of `path`, each whole chunks of at least `run_bytes` (the
    /// last may be shorter) or, without an index, `run_bytes` of the file,
    /// or `None` when the file is not one this applies to (see the
    /// module's text). `verify`: each chunk is compared with its checksum
    /// as it is read.
    pub fn plan(path: &Path, verify: bool, run_bytes: u64) -> Option<Runs> {
        let sidecar = index_path(path);
        let index = match sidecar.try_exists() {
            Ok(false) => None,
            Ok(true) => Some(read_index(&sidecar).ok()?),
            Err(_) => return None,
        };
        if index
            .as_ref()
            .is_some_and(|i| i.codec != Codec::None || i.pcapng)
        {
            return None;
        }
        // Only a regular file, and known to be one before it is opened:
        // opening a named pipe would wait for its writer, and its first
        // bytes, read here, would be lost to the reader after.
        if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
            return None;
        }
        let mut file = File::open(path).ok()?;
        let meta = file.metadata().ok()?;
        if !meta.is_file() {
            return None;
        }
        let len = meta.len();
        let mut head = [0u8; pcap::FILE_HEADER_LEN];
        file.read_exact(&mut head).ok()?;
        if index.is_none() && get_u32(&head, 0, false) == BT_SHB {
            // A pcapng file: its section's header and interfaces, which
            // come first (dumpcap and tshark write them so).
            let mut start = vec![0u8; (len as usize).min(SECTION_BYTES)];
            file.read_exact_at(&mut start, 0).ok()?;
            let section = Section::parse(&start)?;
            let layout = Layout::Fixed {
                run_bytes: run_bytes.max(section.first as u64 + 1),
            };
            return Some(Runs {
                file,
                format: Format::Pcapng(section),
                layout,
                len,
            });
        }
        // (A compressed file's magic is no pcap magic: the parse refuses it.)
        let header = FileHeaderRepr::parse(&FileHeader::new_unchecked(&head[..])).ok()?;
        let Some(index) = index else {
            let layout = Layout::Fixed {
                run_bytes: run_bytes.max(pcap::FILE_HEADER_LEN as u64 + 1),
            };
            return Some(Runs {
                file,
                format: Format::Pcap(header),
                layout,
                len,
            });
        };
        let Checked {
            whole,
            end,
            closed,
            past_end,
        } = check_index(&index, &file, len, false, &|_| true).ok()?;
        // An end entry that holds bytes would leave them to no run (a
        // stream read, unchecked, reads them).
        let empty_end = index
            .entries
            .last()
            .is_some_and(|e| e.is_end() && e.comp_len == 0);
        let mut entries = index.entries;
        entries.truncate(whole);
        let whole = closed && empty_end && !past_end && end == len;
        let plain = entries
            .iter()
            .all(|e| e.comp_offset == e.decomp_offset && e.comp_len == e.decomp_len);
        let first = entries.first()?;
        if !whole || !plain || first.comp_offset != 0 || first.comp_len < head.len() as u64 {
            return None;
        }
        let mut runs = Vec::new();
        let (mut start, mut bytes) = (0, 0);
        for (i, e) in entries.iter().enumerate() {
            bytes += e.comp_len;
            if bytes >= run_bytes {
                runs.push(start..i + 1);
                (start, bytes) = (i + 1, 0);
            }
        }
        if start < entries.len() {
            runs.push(start..entries.len());
        }
        Some(Runs {
            file,
            format: Format::Pcap(header),
            layout: Layout::Indexed {
                entries,
                runs,
                verify,
            },
            len,
        })
    }

    /// Whether the file is pcapng.
    pub fn pcapng(&self) -> bool {
        matches!(self.format, Format::Pcapng(_))
    }

    /// Whether the runs are the index's chunks.
    pub fn indexed(&self) -> bool {
        matches!(self.layout, Layout::Indexed { .. })
    }

    /// How many runs.
    pub fn len(&self) -> usize {
        match &self.layout {
            Layout::Indexed { runs, .. } => runs.len(),
            Layout::Fixed { run_bytes } => self.len.div_ceil(*run_bytes) as usize,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The longest run, in bytes (a fixed run's last record may go past it).
    pub fn longest(&self) -> u64 {
        (0..self.len())
            .map(|i| {
                let s = self.span(i);
                s.end - s.start
            })
            .max()
            .unwrap_or(0)
    }

    /// The file's length.
    pub fn file_len(&self) -> u64 {
        self.len
    }

    /// Whether the file is longer now than when it was planned (its runs
    /// end where it ended then).
    pub fn grew(&self) -> bool {
        self.file.metadata().is_ok_and(|m| m.len() > self.len)
    }

    /// The packets in the file, as its index counts them; `None` without
    /// an index.
    pub fn packet_count(&self) -> Option<u64> {
        match &self.layout {
            Layout::Indexed { entries, .. } => {
                Some(entries.iter().map(|e| u64::from(e.packets)).sum())
            }
            Layout::Fixed { .. } => None,
        }
    }

    /// Where run `i` starts in the file, and where it ends: its chunks, or
    /// without an index the bytes its records start in.
    pub fn span(&self, i: usize) -> Range<u64> {
        match &self.layout {
            Layout::Indexed { entries, runs, .. } => {
                let r = &runs[i];
                let first = &entries[r.start];
                let last = &entries[r.end - 1];
                first.comp_offset..last.comp_offset + last.comp_len
            }
            Layout::Fixed { run_bytes } => {
                let start = i as u64 * run_bytes;
                start..(start + run_bytes).min(self.len)
            }
        }
    }

    /// Reads run `i` into `buf`, checks it and gives each of its packets to
    /// `each`: the bytes of the file its records cover, or `None` (and
    /// possibly some packets given, to be dropped) if the read failed, a
    /// chunk does not match its checksum, a record header does not parse
    /// or a record is cut, or, without an index, no record could be found
    /// to start in it. The caller takes the run only if it starts where the
    /// run before it ended (see the module's text).
    #[inline]
    pub fn walk(
        &self,
        i: usize,
        buf: &mut Vec<u8>,
        mut each: impl FnMut(RunPacket<'_>),
    ) -> Option<Range<u64>> {
        match self.layout {
            Layout::Indexed { .. } => {
                let whole = self.pieces(i, buf, |bytes, base| self.packets(bytes, base, &mut each));
                whole.then(|| self.span(i))
            }
            Layout::Fixed { .. } => match &self.format {
                Format::Pcap(h) => self.walk_fixed(h, i, buf, each),
                Format::Pcapng(s) => self.walk_fixed(s, i, buf, each),
            },
        }
    }

    /// [`walk`](Self::walk) without an index. The run is read a [`PIECE`]
    /// at a time into `buf`, a window that slides along it: a run is longer
    /// than a core's cache, and a buffer of its length is written cold.
    #[inline]
    fn walk_fixed<R: Records>(
        &self,
        rec: &R,
        i: usize,
        buf: &mut Vec<u8>,
        mut each: impl FnMut(RunPacket<'_>),
    ) -> Option<Range<u64>> {
        let span = self.span(i);
        let nominal = (span.end - span.start) as usize;
        // The run's bytes to the file's end, from its start.
        let rest = (self.len - span.start) as usize;
        // `buf` holds the run's bytes from `at` on: `fill` reads from `from`
        // to a piece past it, and on to `need` at least (None past the
        // file's end: the ordinary reader says what is wrong there).
        let mut at = 0;
        let fill = |buf: &mut Vec<u8>, from: usize, need: usize| -> Option<()> {
            let to = need
                .max((from + PIECE).min(nominal) + SLACK as usize)
                .min(rest);
            if need > to {
                return None;
            }
            buf.resize(to - from, 0);
            self.file.read_exact_at(buf, span.start + from as u64).ok()
        };
        fill(buf, 0, 0)?;
        let mut o = if i == 0 {
            rec.first()
        } else {
            // A run's first record starts in its first piece, or the run is
            // left to the ordinary reader (a record over 256 KiB long).
            let at_end = buf.len() == rest;
            rec.resync(buf, nominal.min(PIECE), at_end)?
        };
        // (The first run covers the file's header, as an indexed file's.)
        let first = if i == 0 { 0 } else { span.start + o as u64 };
        while o < nominal {
            if o + R::HEAD > at + buf.len() {
                fill(buf, o, o + R::HEAD)?;
                at = o;
            }
            let offset = span.start + o as u64;
            let (n, head) = rec.head(&buf[o - at..], offset)?;
            let end = o + n;
            if end > at + buf.len() {
                fill(buf, o, end)?;
                at = o;
            }
            if let Some(p) = rec.packet(&head, &buf[o - at..end - at], offset)? {
                each(p);
            }
            o = end;
        }
        Some(first..span.start + o as u64)
    }

    /// Reads run `i` of an indexed file a [`PIECE`] of whole chunks at a
    /// time into `buf`, checks each piece's chunks against their checksums
    /// (when verifying) while the piece is in the core's cache, and gives it
    /// to `piece` with its offset in the file; false as soon as a read
    /// fails, a chunk does not match (the ordinary reader, going on from
    /// here, says which and why) or `piece` says false. False without an
    /// index.
    fn pieces(
        &self,
        i: usize,
        buf: &mut Vec<u8>,
        mut piece: impl FnMut(&[u8], u64) -> bool,
    ) -> bool {
        let Layout::Indexed {
            entries,
            runs,
            verify,
        } = &self.layout
        else {
            return false;
        };
        let span = self.span(i);
        // A run is whole chunks, each at most 64 MiB (checked with the
        // index), and a chunk whole records (the writer's and `reindex`'s
        // chunks end where a record does; a run whose pieces do not is
        // refused by `packets`, and read by the ordinary reader).
        let chunks = &entries[runs[i].clone()];
        // Room for a piece, without clearing: `resize` then writes zeros
        // only where the buffer grows, not over every run's first piece.
        buf.reserve(PIECE.saturating_sub(buf.len()));
        let (mut at, mut k) = (0u64, 0);
        while k < chunks.len() {
            let (first, mut len) = (k, 0usize);
            while k < chunks.len() && (k == first || len + chunks[k].comp_len as usize <= PIECE) {
                len += chunks[k].comp_len as usize;
                k += 1;
            }
            buf.resize(len, 0);
            if self.file.read_exact_at(buf, span.start + at).is_err() {
                return false;
            }
            if *verify {
                let mut o = 0;
                for e in &chunks[first..k] {
                    let n = e.comp_len as usize;
                    if let Some(want) = e.crc {
                        if crate::index::chunk_checksum(&buf[o..o + n]) != want {
                            return false;
                        }
                    }
                    o += n;
                }
            }
            if !piece(buf, span.start + at) {
                return false;
            }
            at += len as u64;
        }
        true
    }

    /// Run `i` of an indexed file, read and checked whole into `buf`; false
    /// as [`pieces`](Self::pieces) is.
    #[cfg(test)]
    fn read(&self, i: usize, buf: &mut Vec<u8>) -> bool {
        let mut whole = Vec::new();
        let ok = self.pieces(i, buf, |bytes, _| {
            whole.extend_from_slice(bytes);
            true
        });
        *buf = whole;
        ok
    }

    /// Gives each packet in `bytes`, the file's bytes from offset `start`
    /// (a piece of a run of an indexed file), to `each`; false (and possibly
    /// some packets given) if the bytes are not whole records ending at
    /// their end or a record header does not parse: the caller drops what it
    /// was given and goes on with the ordinary reader.
    #[inline]
    fn packets(&self, bytes: &[u8], start: u64, mut each: impl FnMut(RunPacket<'_>)) -> bool {
        let Format::Pcap(h) = &self.format else {
            return false;
        };
        let mut o = if start == 0 { h.first() } else { 0 };
        while o < bytes.len() {
            let at = start + o as u64;
            let Some((n, r)) = h.head(&bytes[o..], at) else {
                return false;
            };
            let Some(p) = bytes.get(o..o + n).and_then(|rec| h.packet(&r, rec, at)) else {
                return false;
            };
            if let Some(p) = p {
                each(p);
            }
            o += n;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LinkType, OutputFormat, TraceWriter, WriterConfig};

    /// A plain indexed pcap of `n` packets of 100-1100 bytes, 4 KiB chunks.
    fn trace(path: &Path, n: u64) {
        let cfg = WriterConfig {
            codec: Codec::None,
            format: OutputFormat::Pcap,
            block_size: crate::write::MIN_BLOCK_SIZE.max(4096),
            ..WriterConfig::default()
        };
        let mut w = TraceWriter::create(path, cfg).unwrap();
        for i in 0..n {
            let len = 100 + (i * 7919 % 1000) as usize;
            w.write_packet(
                LinkType::Ethernet,
                1_000 + i * 10,
                len as u32,
                &vec![i as u8; len],
            )
            .unwrap();
        }
        w.finish().unwrap();
    }

    #[test]
    fn runs_tile_the_file_and_give_every_packet_once() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.pcap");
        trace(&path, 3_000);
        let runs = Runs::plan(&path, true, 16 << 10).unwrap();
        assert!(runs.len() > 20, "{} runs", runs.len());
        let (mut at, mut seen, mut buf) = (0, 0u64, Vec::new());
        for i in 0..runs.len() {
            let span = runs.span(i);
            assert_eq!(span.start, at);
            at = span.end;
            assert!(runs.read(i, &mut buf));
            assert!(runs.packets(&buf, span.start, |p| {
                assert_eq!(p.ts_ns, 1_000 + seen * 10);
                assert_eq!(p.data.len(), p.orig_len as usize);
                assert!(p.data.iter().all(|&b| b == seen as u8));
                seen += 1;
            }));
        }
        assert_eq!((at, seen), (runs.file_len(), 3_000));
    }

    #[test]
    fn a_run_that_is_not_whole_records_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.pcap");
        trace(&path, 500);
        let runs = Runs::plan(&path, true, 16 << 10).unwrap();
        let mut buf = Vec::new();
        assert!(runs.read(1, &mut buf));
        let n = buf.len();
        // The last record cut, a piece of a header after it, a bad header.
        assert!(!runs.packets(&buf[..n - 1], runs.span(1).start, |_| {}));
        buf.extend_from_slice(&[0; 5]);
        assert!(!runs.packets(&buf, runs.span(1).start, |_| {}));
        buf.truncate(n);
        buf[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(!runs.packets(&buf, runs.span(1).start, |_| {}));
        // A byte changed: the chunk's checksum no longer matches.
        let mut bytes = std::fs::read(&path).unwrap();
        let mid = (runs.span(2).start + runs.span(2).end) / 2;
        bytes[mid as usize] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let runs = Runs::plan(&path, true, 16 << 10).unwrap();
        assert!(runs.read(1, &mut buf));
        assert!(!runs.read(2, &mut buf));
        let unchecked = Runs::plan(&path, false, 16 << 10).unwrap();
        assert!(unchecked.read(2, &mut buf));
    }

    #[test]
    fn a_run_longer_than_a_piece_is_read_and_checked_piece_by_piece() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.pcap");
        trace(&path, 6_000);
        let runs = Runs::plan(&path, true, 1 << 20).unwrap();
        let span = runs.span(1);
        assert!(span.end - span.start > 3 * PIECE as u64, "{span:?}");
        let bytes = std::fs::read(&path).unwrap();
        let mut buf = Vec::new();
        assert!(runs.read(1, &mut buf));
        assert_eq!(buf, bytes[span.start as usize..span.end as usize]);
        // Walked, every packet of the run is given, from a buffer that holds
        // a piece, not the run.
        let (mut walked, mut n) = (Vec::new(), 0);
        assert_eq!(runs.walk(1, &mut walked, |_| n += 1), Some(span.clone()));
        assert!(walked.capacity() <= PIECE, "{}", walked.capacity());
        let mut whole = 0;
        assert!(runs.packets(&buf, span.start, |_| whole += 1));
        assert_eq!(n, whole);
        // A byte changed in the run's first, a middle or its last piece: the
        // run is refused, the runs before it are not.
        let bad = tmp.path().join("bad.pcap");
        std::fs::copy(
            tmp.path().join("t.pcap.kidx"),
            tmp.path().join("bad.pcap.kidx"),
        )
        .unwrap();
        for at in [span.start + 1, (span.start + span.end) / 2, span.end - 1] {
            let mut changed = bytes.clone();
            changed[at as usize] ^= 0x40;
            std::fs::write(&bad, &changed).unwrap();
            let runs = Runs::plan(&bad, true, 1 << 20).unwrap();
            assert!(runs.read(0, &mut buf));
            assert!(!runs.read(1, &mut buf), "a byte changed at {at}");
            let unchecked = Runs::plan(&bad, false, 1 << 20).unwrap();
            assert!(unchecked.read(1, &mut buf));
            assert_eq!(buf, changed[span.start as usize..span.end as usize]);
        }
    }

    /// Walks every run of `runs`, as `SplitSource` takes them; the packets
    /// (first byte of each), or `None` at the first run that does not
    /// start where the one before ended.
    fn walk_all(runs: &Runs) -> Option<Vec<u8>> {
        let (mut at, mut seen, mut buf) = (0, Vec::new(), Vec::new());
        for i in 0..runs.len() {
            let mut got = Vec::new();
            let span = runs.walk(i, &mut buf, |p| got.push(p.data[0]))?;
            if span.start != at {
                return None;
            }
            at = span.end;
            seen.extend(got);
        }
        assert_eq!(at, runs.file_len());
        Some(seen)
    }

    /// A pcapng file of `n` packets of 100-1100 bytes on two interfaces
    /// (Ethernet, raw IP), packet `i` filled with `i as u8`; `between(i,
    /// out)` may add blocks after packet `i`.
    fn pcapng_bytes(n: u64, mut between: impl FnMut(u64, &mut Vec<u8>)) -> Vec<u8> {
        use crate::record::{Interface, Packet, PacketKind};
        let mut out = Vec::new();
        let section = crate::record::Section {
            major: 1,
            minor: 0,
            options: Vec::new(),
        };
        pcapng::emit_section(&mut out, &section);
        for link_type in [LinkType::Ethernet, LinkType::from_code(101)] {
            let i = Interface {
                link_type,
                snaplen: 0,
                tsresol: TsResolution::MICRO,
                options: Vec::new(),
            };
            pcapng::emit_interface(&mut out, &i);
        }
        for i in 0..n {
            let len = 100 + (i * 7919 % 1000) as usize;
            let data = vec![i as u8; len];
            let p = Packet {
                interface: (i % 2) as u32,
                link_type: LinkType::Ethernet,
                ts: 1_000 + i * 10,
                tsresol: TsResolution::MICRO,
                orig_len: len as u32 + 4,
                data: &data,
                options: &[],
                kind: PacketKind::Enhanced,
            };
            pcapng::emit_packet(&mut out, &p);
            between(i, &mut out);
        }
        out
    }

    #[test]
    fn a_pcapng_file_without_an_index_is_cut_where_its_blocks_start() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.pcapng");
        let bytes = pcapng_bytes(3_000, |_, _| {});
        std::fs::write(&path, &bytes).unwrap();
        let runs = Runs::plan(&path, true, 16 << 10).unwrap();
        assert!(runs.pcapng() && !runs.indexed());
        assert!(runs.len() > 20, "{} runs", runs.len());
        // Every packet once, in order, with its time (microseconds), its
        // lengths and its interface's link type.
        let (mut at, mut seen, mut buf) = (0, 0u64, Vec::new());
        for i in 0..runs.len() {
            let span = runs
                .walk(i, &mut buf, |p| {
                    assert_eq!(p.ts_ns, (1_000 + seen * 10) * 1_000);
                    assert_eq!(p.orig_len as usize, p.data.len() + 4);
                    assert!(p.data.iter().all(|&b| b == seen as u8));
                    let link = [LinkType::Ethernet, LinkType::from_code(101)][seen as usize % 2];
                    assert_eq!(p.link, link);
                    seen += 1;
                })
                .unwrap();
            assert_eq!(span.start, at, "run {i}");
            at = span.end;
        }
        assert_eq!((at, seen), (runs.file_len(), 3_000));
        // Big-endian files, and a start the plan cannot read, are planned
        // or not as the reader would take them: a section without an
        // interface is not planned.
        let mut none = Vec::new();
        pcapng::emit_section(
            &mut none,
            &crate::record::Section {
                major: 1,
                minor: 0,
                options: Vec::new(),
            },
        );
        std::fs::write(&path, &none).unwrap();
        assert!(Runs::plan(&path, true, 16 << 10).is_none());
    }

    /// The offset of the first block of `kind` at or after `from` in a
    /// little-endian pcapng file's bytes.
    fn find_block(bytes: &[u8], kind: u32, from: usize) -> usize {
        let mut o = 0;
        loop {
            let t = u32::from_le_bytes(bytes[o..o + 4].try_into().unwrap());
            if t == kind && o >= from {
                return o;
            }
            o += u32::from_le_bytes(bytes[o + 4..o + 8].try_into().unwrap()) as usize;
        }
    }

    #[test]
    fn a_pcapng_run_with_a_block_that_is_not_a_plain_packet_is_left_to_the_reader() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.pcapng");
        // Whether each run can be taken: walked, and starting where the
        // one before it ended (a block a run's search for its start passed
        // over is in no run).
        let walked = |bytes: &[u8]| -> Vec<bool> {
            std::fs::write(&path, bytes).unwrap();
            let runs = Runs::plan(&path, true, 16 << 10).unwrap();
            let mut buf = Vec::new();
            let spans: Vec<_> = (0..runs.len())
                .map(|i| runs.walk(i, &mut buf, |_| {}))
                .collect();
            (0..spans.len())
                .map(|i| match (&spans[i], i.checked_sub(1).map(|j| &spans[j])) {
                    (Some(s), Some(Some(b))) => s.start == b.end,
                    (Some(s), None) => s.start == 0,
                    _ => false,
                })
                .collect()
        };
        let clean = walked(&pcapng_bytes(3_000, |_, _| {}));
        assert!(clean.iter().all(|&w| w));
        // A second section, a packet with an option, a packet whose
        // trailing length differs, a simple packet block: the run holding
        // it is refused (the ordinary reader reads it), and runs far from it
        // are not. A statistics block is passed over, and its run taken.
        let isb = |out: &mut Vec<u8>| {
            let b = crate::record::RawBlock {
                block_type: pcapng::BT_ISB,
                body: &[0; 12],
                little_endian: true,
            };
            pcapng::emit_raw_block(out, &b).unwrap();
        };
        let shb = |out: &mut Vec<u8>| {
            let section = crate::record::Section {
                major: 1,
                minor: 0,
                options: Vec::new(),
            };
            pcapng::emit_section(out, &section);
        };
        // A 60-byte packet of `kind`, with `options`.
        let packet = |out: &mut Vec<u8>, kind, options: &[crate::record::RawOption]| {
            let p = crate::record::Packet {
                interface: 0,
                link_type: LinkType::Ethernet,
                ts: 1,
                tsresol: TsResolution::MICRO,
                orig_len: 60,
                data: &[0; 60],
                options,
                kind,
            };
            pcapng::emit_packet(out, &p);
        };
        use crate::record::PacketKind::{Enhanced, Simple};
        let note = [crate::record::RawOption {
            code: 1,
            value: b"note".to_vec(),
        }];
        let with_option = |out: &mut Vec<u8>| packet(out, Enhanced, &note);
        let bad_trailer = |out: &mut Vec<u8>| {
            packet(out, Enhanced, &[]);
            let n = out.len();
            out[n - 4] ^= 4;
        };
        let simple = |out: &mut Vec<u8>| packet(out, Simple, &[]);
        type Add<'a> = &'a dyn Fn(&mut Vec<u8>);
        let blocks: [Add; 4] = [&shb, &with_option, &bad_trailer, &simple];
        for (k, add) in blocks.iter().enumerate() {
            let w = walked(&pcapng_bytes(3_000, |i, out| {
                if i == 1_500 {
                    add(out)
                }
            }));
            let refused: Vec<usize> = (0..w.len()).filter(|&i| !w[i]).collect();
            assert!(
                !refused.is_empty() && refused.len() <= 2,
                "block {k}: {refused:?}"
            );
            assert!(w[0] && w[w.len() - 1], "block {k}: {w:?}");
        }
        let mut with_isb = pcapng_bytes(3_000, |i, out| {
            if i % 100 == 50 {
                isb(out)
            }
        });
        assert!(walked(&with_isb).iter().all(|&w| w));
        // Its length must be one the reader takes, at both ends: here its
        // trailing length (it is 24 bytes long) says 28.
        let n = with_isb.len();
        let at = find_block(&with_isb, pcapng::BT_ISB, n / 2);
        assert_eq!(with_isb[at + 20], 24);
        with_isb[at + 20] ^= 4;
        assert!(!walked(&with_isb).iter().all(|&w| w));
    }

    #[test]
    fn a_file_without_an_index_is_cut_where_its_records_start() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.pcap");
        trace(&path, 3_000);
        std::fs::remove_file(index_path(&path)).unwrap();
        let runs = Runs::plan(&path, true, 16 << 10).unwrap();
        assert!(!runs.indexed() && runs.packet_count().is_none());
        assert!(runs.len() > 20, "{} runs", runs.len());
        let seen = walk_all(&runs).expect("every run starts where the one before ended");
        let want: Vec<u8> = (0..3_000u64).map(|i| i as u8).collect();
        assert_eq!(seen, want);
        // A run whose bytes hold no record's start cannot be walked.
        let mut buf = Vec::new();
        let huge = Runs::plan(&path, true, 30).unwrap();
        assert!((1..huge.len()).any(|i| huge.walk(i, &mut buf, |_| {}).is_none()));
    }

    #[test]
    fn a_run_longer_than_a_piece_is_walked_through_a_window_that_slides() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.pcap");
        trace(&path, 8_000);
        std::fs::remove_file(index_path(&path)).unwrap();
        let runs = Runs::plan(&path, true, 1 << 20).unwrap();
        assert!(runs.len() >= 4 && runs.span(1).end - runs.span(1).start > 3 * PIECE as u64);
        let seen = walk_all(&runs).expect("every run starts where the one before ended");
        let want: Vec<u8> = (0..8_000u64).map(|i| i as u8).collect();
        assert_eq!(seen, want);
        let mut buf = Vec::new();
        // The records' starts, from the file's header on.
        let bytes = std::fs::read(&path).unwrap();
        let mut starts = vec![];
        let mut o = pcap::FILE_HEADER_LEN;
        while o < bytes.len() {
            starts.push(o);
            o += pcap::RECORD_HEADER_LEN
                + u32::from_le_bytes(bytes[o + 8..o + 12].try_into().unwrap()) as usize;
        }
        // A bad record header in run 1 past its first piece: the run is
        // refused, the one before it is not.
        let span = runs.span(1);
        let late = span.start as usize + 2 * PIECE;
        let bad = *starts.iter().find(|&&s| s > late).unwrap();
        let mut changed = bytes.clone();
        changed[bad + 8..bad + 12].copy_from_slice(&u32::MAX.to_le_bytes());
        std::fs::write(&path, &changed).unwrap();
        let runs = Runs::plan(&path, true, 1 << 20).unwrap();
        assert!(runs.walk(0, &mut buf, |_| {}).is_some());
        assert!(runs.walk(1, &mut buf, |_| {}).is_none());
        // The file cut in a record of its last run, past its first piece.
        let last = runs.len() - 1;
        let cut = *starts
            .iter()
            .rev()
            .find(|&&s| s > runs.span(last).start as usize + PIECE + 100)
            .unwrap()
            + 30;
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let runs = Runs::plan(&path, true, 1 << 20).unwrap();
        let last = runs.len() - 1;
        assert!(runs.span(last).end - runs.span(last).start > PIECE as u64);
        assert!(runs.walk(last - 1, &mut buf, |_| {}).is_some());
        assert!(runs.walk(last, &mut buf, |_| {}).is_none());
        // Intact again: walked with the same buffer, it holds a piece, not
        // a run.
        std::fs::write(&path, &bytes).unwrap();
        let runs = Runs::plan(&path, true, 1 << 20).unwrap();
        assert_eq!(walk_all(&runs).unwrap(), want);
        let mut buf = Vec::new();
        assert!(runs.walk(1, &mut buf, |_| {}).is_some());
        assert!(buf.capacity() < PIECE + (64 << 10), "{}", buf.capacity());
    }

    #[test]
    fn a_named_pipe_is_not_planned_nor_opened() {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo failed");
        // Opening it would wait for a writer that never comes.
        let (tx, rx) = std::sync::mpsc::channel();
        let path = fifo.clone();
        std::thread::spawn(move || tx.send(Runs::plan(&path, true, 4096).is_none()));
        let got = rx.recv_timeout(std::time::Duration::from_secs(10));
        if got.is_err() {
            // Let the planning thread's open return before failing.
            let _ = std::fs::OpenOptions::new().write(true).open(&fifo);
        }
        assert_eq!(got, Ok(true));
    }

    #[test]
    fn record_headers_inside_a_packet_do_not_pass_for_a_runs_start() {
        // Packets that each carry a chain of pcap records filling them to
        // their end, as a capture of a pcap file's download would.
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.pcap");
        let cfg = WriterConfig {
            codec: Codec::None,
            format: OutputFormat::Pcap,
            ..WriterConfig::default()
        };
        let mut w = TraceWriter::create(&path, cfg).unwrap();
        let mut inner = Vec::new();
        for k in 0..25u32 {
            inner.extend_from_slice(&1_700_000_000u32.to_le_bytes());
            inner.extend_from_slice(&k.to_le_bytes());
            inner.extend_from_slice(&40u32.to_le_bytes());
            inner.extend_from_slice(&40u32.to_le_bytes());
            inner.extend_from_slice(&[k as u8 + 1; 40]);
        }
        for i in 0..400u64 {
            w.write_packet(LinkType::Ethernet, 1_000 + i, inner.len() as u32, &inner)
                .unwrap();
        }
        w.finish().unwrap();
        std::fs::remove_file(index_path(&path)).unwrap();
        let runs = Runs::plan(&path, true, 4096).unwrap();
        // Each run but the first finds its start inside a packet; the
        // caller sees that it does not follow on from the run before.
        assert_eq!(walk_all(&runs), None);
        let mut buf = Vec::new();
        let spans: Vec<Range<u64>> = (0..runs.len())
            .map(|i| runs.walk(i, &mut buf, |_| {}).expect("a walk"))
            .collect();
        let misplaced = spans.windows(2).filter(|w| w[1].start != w[0].end).count();
        assert!(
            misplaced > spans.len() / 2,
            "{misplaced} of {}",
            spans.len()
        );
    }

    #[test]
    fn compressed_files_and_index_mismatches_are_not_planned() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.pcap.lz4");
        let mut w = TraceWriter::create(&path, WriterConfig::default()).unwrap();
        w.write_packet(LinkType::Ethernet, 1, 60, &[0; 60]).unwrap();
        w.finish().unwrap();
        assert!(Runs::plan(&path, true, 4096).is_none());
        let plain = tmp.path().join("p.pcap");
        trace(&plain, 100);
        assert!(Runs::plan(&plain, true, 4096).is_some_and(|r| r.indexed()));
        // An index the file does not bear out.
        let bytes = std::fs::read(&plain).unwrap();
        std::fs::write(&plain, &bytes[..bytes.len() - 10]).unwrap();
        assert!(Runs::plan(&plain, true, 4096).is_none());
        // No index: runs of the file's bytes.
        std::fs::remove_file(index_path(&plain)).unwrap();
        assert!(Runs::plan(&plain, true, 4096).is_some_and(|r| !r.indexed()));
        // Not pcap.
        std::fs::write(&plain, b"not a capture at all, but long enough").unwrap();
        assert!(Runs::plan(&plain, true, 4096).is_none());
    }
}
