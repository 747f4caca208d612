//! pcap and pcapng on-disk formats: parse and emit.
//!
//! [`pcap`] is the classic libpcap format (draft-ietf-opsawg-pcap), [`pcapng`]
//! the block-based next-generation format (draft-ietf-opsawg-pcapng). Both
//! modules hold zero-copy views over byte buffers, parsed representations and
//! `emit_*` functions that append a little-endian encoding to a `Vec<u8>`.
//! Reading a whole stream is the job of [`crate::read`].

use std::fmt;

pub mod pcap;
pub mod pcapng;

/// The compression around a trace file, detected by magic on input and chosen
/// by the user on output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Codec {
    /// Plain pcap or pcapng bytes.
    #[default]
    None,
    /// gzip (RFC 1952), possibly several members.
    Gzip,
    /// Zstandard frames (RFC 8878).
    Zstd,
    /// LZ4 frames (the LZ4 Frame Format Description, v1.6.x).
    Lz4,
}

impl Codec {
    /// The file-name extension that marks this codec (`""` for none).
    pub fn extension(self) -> &'static str {
        match self {
            Codec::None => "",
            Codec::Gzip => ".gz",
            Codec::Zstd => ".zst",
            Codec::Lz4 => ".lz4",
        }
    }

    /// The lowercase name, as used on the command line and in messages.
    pub fn name(self) -> &'static str {
        match self {
            Codec::None => "none",
            Codec::Gzip => "gzip",
            Codec::Zstd => "zstd",
            Codec::Lz4 => "lz4",
        }
    }

    /// The codec whose magic number starts `head`, if any (gzip `1f 8b`,
    /// zstd `28 b5 2f fd`, LZ4 frame `04 22 4d 18`).
    pub fn detect(head: &[u8]) -> Codec {
        match head {
            [0x1f, 0x8b, ..] => Codec::Gzip,
            [0x28, 0xb5, 0x2f, 0xfd, ..] => Codec::Zstd,
            [0x04, 0x22, 0x4d, 0x18, ..] => Codec::Lz4,
            _ => Codec::None,
        }
    }
}

impl fmt::Display for Codec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether `head`, a file's first bytes, starts a trace kansoku reads: a
/// compressed stream (by [`Codec::detect`]), a pcap file header (either
/// byte order and timestamp unit) or a pcapng section header. Commands that
/// take other files too (`kansoku anon` and summaries) tell them apart by
/// it.
pub fn starts_a_trace(head: &[u8]) -> bool {
    let Some(&magic) = head.first_chunk::<4>() else {
        return Codec::detect(head) != Codec::None;
    };
    Codec::detect(head) != Codec::None
        || pcap::detect_magic(magic).is_some()
        || u32::from_le_bytes(magic) == pcapng::BT_SHB
}

/// The trace format inside any compression.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileFormat {
    /// Classic pcap, with nanosecond or microsecond timestamps, in either byte order.
    Pcap {
        /// Whether timestamps are in nanoseconds (magic `a1b23c4d`).
        nanos: bool,
        /// Whether the file was written big-endian.
        big_endian: bool,
    },
    /// pcapng (each section has its own byte order).
    Pcapng,
}

impl fmt::Display for FileFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileFormat::Pcap { nanos, big_endian } => write!(
                f,
                "pcap ({}, {})",
                if *nanos { "ns" } else { "µs" },
                if *big_endian {
                    "big-endian"
                } else {
                    "little-endian"
                }
            ),
            FileFormat::Pcapng => f.write_str("pcapng"),
        }
    }
}

/// Reads a `u16` at `off` in the given byte order. The caller has checked
/// that `off + 2 <= b.len()`.
#[inline(always)]
pub(crate) fn get_u16(b: &[u8], off: usize, big_endian: bool) -> u16 {
    let v = [b[off], b[off + 1]];
    if big_endian {
        u16::from_be_bytes(v)
    } else {
        u16::from_le_bytes(v)
    }
}

/// Reads a `u32` at `off` in the given byte order. The caller has checked
/// that `off + 4 <= b.len()`.
#[inline(always)]
pub(crate) fn get_u32(b: &[u8], off: usize, big_endian: bool) -> u32 {
    let mut v = [0u8; 4];
    v.copy_from_slice(&b[off..off + 4]);
    if big_endian {
        u32::from_be_bytes(v)
    } else {
        u32::from_le_bytes(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codec_detection_and_names() {
        assert_eq!(Codec::detect(&[0x1f, 0x8b, 8, 0]), Codec::Gzip);
        assert_eq!(Codec::detect(&[0x28, 0xb5, 0x2f, 0xfd]), Codec::Zstd);
        assert_eq!(Codec::detect(&[0x04, 0x22, 0x4d, 0x18]), Codec::Lz4);
        assert_eq!(Codec::detect(&[0xd4, 0xc3, 0xb2, 0xa1]), Codec::None);
        assert_eq!(Codec::detect(&[0x1f]), Codec::None);
        assert_eq!(Codec::Lz4.to_string(), "lz4");
        assert_eq!(Codec::Zstd.extension(), ".zst");
        assert_eq!(Codec::None.extension(), "");
    }

    #[test]
    fn byte_order_getters() {
        let b = [1, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(get_u16(&b, 0, false), 0x0201);
        assert_eq!(get_u16(&b, 0, true), 0x0102);
        assert_eq!(get_u32(&b, 4, true), 0x0506_0708);
    }

    #[test]
    fn a_trace_is_told_from_text_by_its_first_bytes() {
        for head in [
            &[0xd4, 0xc3, 0xb2, 0xa1][..],
            &[0xa1, 0xb2, 0xc3, 0xd4],
            &[0x4d, 0x3c, 0xb2, 0xa1],
            &[0xa1, 0xb2, 0x3c, 0x4d],
            &[0x0a, 0x0d, 0x0d, 0x0a, 0x1c],
            &[0x1f, 0x8b],
            &[0x28, 0xb5, 0x2f, 0xfd],
            &[0x04, 0x22, 0x4d, 0x18],
        ] {
            assert!(starts_a_trace(head), "{head:02x?}");
        }
        for head in [&b"%!AGURI-1.0\n"[..], b"", b"\x1f", b"\xd4\xc3\xb2"] {
            assert!(!starts_a_trace(head), "{head:02x?}");
        }
    }
}
