//! The classic libpcap file format (draft-ietf-opsawg-pcap, "PCAP Capture
//! File Format").
//!
//! ```text
//! File header (section 4), 24 bytes:        Packet record (section 5), 16 bytes + data:
//!  0  magic number                           0  timestamp (seconds)
//!  4  major version (2) | minor version (4)  4  timestamp (µs or ns)
//!  8  reserved 1 (thiszone)                  8  captured packet length
//! 12  reserved 2 (sigfigs)                  12  original packet length
//! 16  snaplen                               16  packet data, captured length bytes
//! 20  FCS len | F | reserved | link type
//! ```
//!
//! The magic number tells both the byte order of every other field and the
//! timestamp unit: `a1b2c3d4` microseconds, `a1b23c4d` nanoseconds, read in
//! the writer's byte order. kansoku always writes little-endian.

use std::fmt;

use wire::LinkType;

use super::{get_u16, get_u32};
use crate::error::{Error, Result};

/// Magic number of a file with microsecond timestamps.
pub const MAGIC_MICROS: u32 = 0xa1b2_c3d4;
/// Magic number of a file with nanosecond timestamps.
pub const MAGIC_NANOS: u32 = 0xa1b2_3c4d;
/// Length of the file header.
pub const FILE_HEADER_LEN: usize = 24;
/// Length of a packet record header.
pub const RECORD_HEADER_LEN: usize = 16;
/// The largest captured length a reader accepts. libpcap's own limit is
/// 256 KiB; this is far above any real link, and keeps a corrupt length field
/// from making the reader allocate gigabytes.
pub const MAX_CAPLEN: u32 = 256 << 20;

/// Bit of the link-type field that says an FCS length is present
/// (libpcap `LT_FCS_LENGTH_PRESENT`).
const FCS_PRESENT: u32 = 0x0400_0000;

mod field {
    use std::ops::Range;
    pub const MAGIC: Range<usize> = 0..4;
    pub const MAJOR: usize = 4;
    pub const MINOR: usize = 6;
    pub const SNAPLEN: usize = 16;
    pub const LINK_TYPE: usize = 20;

    pub const TS_SEC: usize = 0;
    pub const TS_FRAC: usize = 4;
    pub const CAPLEN: usize = 8;
    pub const ORIG_LEN: usize = 12;
}

/// The byte order and timestamp unit a magic number announces, or `None` for
/// a number that is not a pcap magic. `head` holds the first four bytes.
pub fn detect_magic(head: [u8; 4]) -> Option<(bool, bool)> {
    // Returns (nanos, big_endian).
    match u32::from_le_bytes(head) {
        MAGIC_MICROS => Some((false, false)),
        MAGIC_NANOS => Some((true, false)),
        m if m.swap_bytes() == MAGIC_MICROS => Some((false, true)),
        m if m.swap_bytes() == MAGIC_NANOS => Some((true, true)),
        _ => None,
    }
}

/// A zero-copy view of a pcap file header.
#[derive(Debug, Clone, Copy)]
pub struct FileHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> FileHeader<T> {
    /// Wraps a buffer without checking its length; accessors may panic if it
    /// is shorter than [`FILE_HEADER_LEN`].
    pub fn new_unchecked(buffer: T) -> FileHeader<T> {
        FileHeader { buffer }
    }

    /// Wraps a buffer after checking that it holds a whole header.
    pub fn new_checked(buffer: T) -> Result<FileHeader<T>> {
        let h = FileHeader::new_unchecked(buffer);
        h.check_len()?;
        Ok(h)
    }

    /// Checks that the buffer holds a whole header.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < FILE_HEADER_LEN {
            return Err(Error::format(
                0,
                format!("pcap file header needs {FILE_HEADER_LEN} bytes, {len} there"),
            ));
        }
        Ok(())
    }

    /// The four magic bytes as stored.
    pub fn magic_bytes(&self) -> [u8; 4] {
        let b = self.buffer.as_ref();
        let mut m = [0u8; 4];
        m.copy_from_slice(&b[field::MAGIC]);
        m
    }

    /// Whether the file is big-endian (false as well for a bad magic).
    pub fn big_endian(&self) -> bool {
        detect_magic(self.magic_bytes()).is_some_and(|(_, be)| be)
    }

    /// Whether timestamps are in nanoseconds.
    pub fn nanos(&self) -> bool {
        detect_magic(self.magic_bytes()).is_some_and(|(ns, _)| ns)
    }

    /// Major version (2).
    pub fn major(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::MAJOR, self.big_endian())
    }

    /// Minor version (4).
    pub fn minor(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::MINOR, self.big_endian())
    }

    /// Snap length.
    pub fn snaplen(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::SNAPLEN, self.big_endian())
    }

    /// The whole link-type field, FCS bits included.
    pub fn link_type_field(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::LINK_TYPE, self.big_endian())
    }

    /// The link type (the low 16 bits of the link-type field).
    pub fn link_type(&self) -> LinkType {
        LinkType::from_code((self.link_type_field() & 0xffff) as u16)
    }

    /// Length of the FCS at the end of each packet in 16-bit words, when the
    /// file says (the F bit and the top four bits of the link-type field).
    pub fn fcs_len(&self) -> Option<u8> {
        let f = self.link_type_field();
        (f & FCS_PRESENT != 0).then_some((f >> 28) as u8)
    }
}

/// A parsed pcap file header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileHeaderRepr {
    /// Timestamps in nanoseconds rather than microseconds.
    pub nanos: bool,
    /// The file is big-endian.
    pub big_endian: bool,
    /// Major version (2).
    pub major: u16,
    /// Minor version (4).
    pub minor: u16,
    /// Snap length.
    pub snaplen: u32,
    /// Link type, without the FCS bits.
    pub link_type: LinkType,
    /// FCS length in 16-bit words, if the file gives one.
    pub fcs_len: Option<u8>,
}

impl FileHeaderRepr {
    /// Parses a header, rejecting an unknown magic or a major version other than 2.
    pub fn parse<T: AsRef<[u8]>>(h: &FileHeader<T>) -> Result<FileHeaderRepr> {
        h.check_len()?;
        let magic = h.magic_bytes();
        let Some((nanos, big_endian)) = detect_magic(magic) else {
            return Err(Error::format(
                0,
                format!("not a pcap file: magic 0x{:08x}", u32::from_be_bytes(magic)),
            ));
        };
        if h.major() != 2 {
            return Err(Error::format(
                4,
                format!("pcap version {}.{} (expected 2.4)", h.major(), h.minor()),
            ));
        }
        Ok(FileHeaderRepr {
            nanos,
            big_endian,
            major: h.major(),
            minor: h.minor(),
            snaplen: h.snaplen(),
            link_type: h.link_type(),
            fcs_len: h.fcs_len(),
        })
    }

    /// The encoded length.
    pub fn buffer_len(&self) -> usize {
        FILE_HEADER_LEN
    }

    /// Appends this header in little-endian order (the version and FCS fields
    /// as given; `big_endian` is ignored).
    pub fn emit(&self, out: &mut Vec<u8>) {
        let magic = if self.nanos {
            MAGIC_NANOS
        } else {
            MAGIC_MICROS
        };
        out.extend_from_slice(&magic.to_le_bytes());
        out.extend_from_slice(&self.major.to_le_bytes());
        out.extend_from_slice(&self.minor.to_le_bytes());
        out.extend_from_slice(&[0u8; 8]);
        out.extend_from_slice(&self.snaplen.to_le_bytes());
        let mut lt = u32::from(self.link_type.code());
        if let Some(fcs) = self.fcs_len {
            lt |= FCS_PRESENT | (u32::from(fcs & 0xf) << 28);
        }
        out.extend_from_slice(&lt.to_le_bytes());
    }
}

impl fmt::Display for FileHeaderRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pcap {}.{} {} {} link {} snaplen {}",
            self.major,
            self.minor,
            if self.big_endian { "BE" } else { "LE" },
            if self.nanos { "ns" } else { "µs" },
            self.link_type,
            self.snaplen
        )
    }
}

/// Appends a little-endian pcap file header, version 2.4.
pub fn emit_file_header(out: &mut Vec<u8>, link_type: LinkType, snaplen: u32, nanos: bool) {
    FileHeaderRepr {
        nanos,
        big_endian: false,
        major: 2,
        minor: 4,
        snaplen,
        link_type,
        fcs_len: None,
    }
    .emit(out);
}

/// A zero-copy view of a packet record header. Its byte order is the file's,
/// so every getter takes it.
#[derive(Debug, Clone, Copy)]
pub struct RecordHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> RecordHeader<T> {
    /// Wraps a buffer without checking its length.
    pub fn new_unchecked(buffer: T) -> RecordHeader<T> {
        RecordHeader { buffer }
    }

    /// Wraps a buffer after checking that it holds a whole record header;
    /// `offset` is where it starts in the stream, for the error.
    pub fn new_checked(buffer: T, offset: u64) -> Result<RecordHeader<T>> {
        let h = RecordHeader::new_unchecked(buffer);
        h.check_len(offset)?;
        Ok(h)
    }

    /// Checks that the buffer holds a whole record header.
    #[inline]
    pub fn check_len(&self, offset: u64) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < RECORD_HEADER_LEN {
            return Err(Error::format(
                offset,
                format!("pcap record header needs {RECORD_HEADER_LEN} bytes, {len} there"),
            ));
        }
        Ok(())
    }

    /// Seconds since the epoch.
    #[inline]
    pub fn ts_sec(&self, big_endian: bool) -> u32 {
        get_u32(self.buffer.as_ref(), field::TS_SEC, big_endian)
    }

    /// Microseconds or nanoseconds within the second.
    #[inline]
    pub fn ts_frac(&self, big_endian: bool) -> u32 {
        get_u32(self.buffer.as_ref(), field::TS_FRAC, big_endian)
    }

    /// Captured length.
    #[inline]
    pub fn caplen(&self, big_endian: bool) -> u32 {
        get_u32(self.buffer.as_ref(), field::CAPLEN, big_endian)
    }

    /// Original length on the wire.
    #[inline]
    pub fn orig_len(&self, big_endian: bool) -> u32 {
        get_u32(self.buffer.as_ref(), field::ORIG_LEN, big_endian)
    }
}

/// A parsed packet record header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordRepr {
    /// Seconds since the epoch.
    pub ts_sec: u32,
    /// Microseconds or nanoseconds within the second.
    pub ts_frac: u32,
    /// Captured length.
    pub caplen: u32,
    /// Original length.
    pub orig_len: u32,
}

/// The error of a record whose captured length is over [`MAX_CAPLEN`].
#[cold]
#[inline(never)]
fn absurd_caplen(offset: u64, caplen: u32) -> Error {
    Error::format(
        offset + field::CAPLEN as u64,
        format!("pcap record captured length {caplen} is absurd (limit {MAX_CAPLEN})"),
    )
}

impl RecordRepr {
    /// Parses a record header. A captured length above [`MAX_CAPLEN`] is a
    /// format error; one above the original length is accepted, as some
    /// tools write that.
    ///
    /// Always inlined: every packet of a pcap file comes through here, and
    /// a call that returns the parsed header through memory cost the
    /// profiler's reading thread more than the parse (the error is made
    /// out of line).
    #[inline(always)]
    pub fn parse<T: AsRef<[u8]>>(
        h: &RecordHeader<T>,
        big_endian: bool,
        offset: u64,
    ) -> Result<RecordRepr> {
        h.check_len(offset)?;
        let r = RecordRepr {
            ts_sec: h.ts_sec(big_endian),
            ts_frac: h.ts_frac(big_endian),
            caplen: h.caplen(big_endian),
            orig_len: h.orig_len(big_endian),
        };
        if r.caplen > MAX_CAPLEN {
            return Err(absurd_caplen(offset, r.caplen));
        }
        Ok(r)
    }

    /// The timestamp in ticks of the file's unit (µs or ns).
    #[inline]
    pub fn ticks(&self, nanos: bool) -> u64 {
        let per_sec = if nanos { 1_000_000_000 } else { 1_000_000 };
        u64::from(self.ts_sec) * per_sec + u64::from(self.ts_frac)
    }

    /// The encoded header length.
    pub fn buffer_len(&self) -> usize {
        RECORD_HEADER_LEN
    }

    /// Appends this header little-endian.
    pub fn emit(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.ts_sec.to_le_bytes());
        out.extend_from_slice(&self.ts_frac.to_le_bytes());
        out.extend_from_slice(&self.caplen.to_le_bytes());
        out.extend_from_slice(&self.orig_len.to_le_bytes());
    }
}

impl fmt::Display for RecordRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pcap record ts {}.{} caplen {} len {}",
            self.ts_sec, self.ts_frac, self.caplen, self.orig_len
        )
    }
}

/// Appends a little-endian packet record: header and data. Microsecond
/// output truncates the nanoseconds; seconds past 2106 saturate.
pub fn emit_record(out: &mut Vec<u8>, ts_nanos: u64, nanos: bool, orig_len: u32, data: &[u8]) {
    let sec = ts_nanos / 1_000_000_000;
    let sub = (ts_nanos % 1_000_000_000) as u32;
    RecordRepr {
        ts_sec: u32::try_from(sec).unwrap_or(u32::MAX),
        ts_frac: if nanos { sub } else { sub / 1000 },
        caplen: u32::try_from(data.len()).unwrap_or(u32::MAX),
        orig_len,
    }
    .emit(out);
    out.extend_from_slice(data);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The header tcpdump 4.99 writes for `tcpdump -i eth0 -w x.pcap` on
    /// x86-64 (little-endian, µs, snaplen 262144, Ethernet).
    const TCPDUMP_HEADER: [u8; 24] = [
        0xd4, 0xc3, 0xb2, 0xa1, 0x02, 0x00, 0x04, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x00, 0x04,
        0x00, 0x01, 0x00, 0x00, 0x00,
    ];

    #[test]
    fn parses_tcpdump_header() {
        let h = FileHeader::new_checked(&TCPDUMP_HEADER[..]).unwrap();
        let r = FileHeaderRepr::parse(&h).unwrap();
        assert!(!r.nanos && !r.big_endian);
        assert_eq!((r.major, r.minor, r.snaplen), (2, 4, 262_144));
        assert_eq!(r.link_type, LinkType::Ethernet);
        assert_eq!(r.fcs_len, None);
        let mut out = Vec::new();
        emit_file_header(&mut out, LinkType::Ethernet, 262_144, false);
        assert_eq!(out, TCPDUMP_HEADER);
    }

    #[test]
    fn big_endian_nanos_and_fcs_bits() {
        // A big-endian nanosecond header with FCS length 2 words and link type 105.
        let mut b = vec![0xa1, 0xb2, 0x3c, 0x4d, 0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0];
        b.extend_from_slice(&1500u32.to_be_bytes());
        b.extend_from_slice(&(0x2400_0069u32).to_be_bytes());
        let r = FileHeaderRepr::parse(&FileHeader::new_checked(&b[..]).unwrap()).unwrap();
        assert!(r.nanos && r.big_endian);
        assert_eq!(r.link_type, LinkType::Unknown(105));
        assert_eq!(r.fcs_len, Some(2));
        assert_eq!(r.snaplen, 1500);
        let mut out = Vec::new();
        r.emit(&mut out);
        let back = FileHeaderRepr::parse(&FileHeader::new_checked(&out[..]).unwrap()).unwrap();
        assert_eq!(
            back,
            FileHeaderRepr {
                big_endian: false,
                ..r
            }
        );
    }

    #[test]
    fn rejects_short_and_bad_headers() {
        assert!(FileHeader::new_checked(&TCPDUMP_HEADER[..23]).is_err());
        let mut bad = TCPDUMP_HEADER;
        bad[0] = 0;
        let e = FileHeaderRepr::parse(&FileHeader::new_checked(&bad[..]).unwrap()).unwrap_err();
        assert!(e.to_string().contains("magic 0x00c3b2a1"), "{e}");
        let mut v3 = TCPDUMP_HEADER;
        v3[4] = 3;
        assert!(FileHeaderRepr::parse(&FileHeader::new_checked(&v3[..]).unwrap()).is_err());
    }

    #[test]
    fn record_round_trip_and_truncation_of_micros() {
        let mut out = Vec::new();
        emit_record(&mut out, 1_700_000_000_123_456_789, false, 60, b"abc");
        let h = RecordHeader::new_checked(&out[..], 0).unwrap();
        let r = RecordRepr::parse(&h, false, 0).unwrap();
        assert_eq!(r.ts_sec, 1_700_000_000);
        assert_eq!(r.ts_frac, 123_456);
        assert_eq!((r.caplen, r.orig_len), (3, 60));
        assert_eq!(r.ticks(false), 1_700_000_000_123_456);
        assert_eq!(&out[RECORD_HEADER_LEN..], b"abc");

        out.clear();
        emit_record(&mut out, 1_700_000_000_123_456_789, true, 3, b"abc");
        let r = RecordRepr::parse(&RecordHeader::new_unchecked(&out[..]), false, 0).unwrap();
        assert_eq!(r.ticks(true), 1_700_000_000_123_456_789);
    }

    #[test]
    fn absurd_caplen_is_an_error_with_offset() {
        let mut out = Vec::new();
        RecordRepr {
            ts_sec: 0,
            ts_frac: 0,
            caplen: MAX_CAPLEN + 1,
            orig_len: 0,
        }
        .emit(&mut out);
        let e = RecordRepr::parse(&RecordHeader::new_unchecked(&out[..]), false, 100).unwrap_err();
        assert!(matches!(e, Error::Format { offset: 108, .. }), "{e}");
        assert!(RecordHeader::new_checked(&out[..15], 0).is_err());
    }
}
