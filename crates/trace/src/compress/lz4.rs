//! One LZ4 frame per file, written block by block.
//!
//! The layout follows the LZ4 Frame Format Description (lz4_Frame_format.md,
//! v1.6.x): magic `0x184D2204`, a frame descriptor (FLG, BD, HC), data blocks
//! each prefixed by a little-endian `u32` size, and an EndMark `0x00000000`.
//! Every block is independent (FLG.B.Indep = 1), so a windowed read can decode
//! any block without the ones before it. A block whose compressed form is not
//! smaller than its input is stored raw by setting the size field's high bit,
//! the format's "uncompressed block" flag; this keeps incompressible traffic
//! at raw-write cost and size, which is Shimizu et al. 2006's future work.
//!
//! Each block is followed by its xxh32 (FLG.B.Checksum), so a flipped bit
//! in the file is found by any reader (tshark, `lz4 -t`, kansoku) instead of
//! decoding into different packet bytes: without it, 28 of 100 single-byte
//! flips of a trace read back "fine".
//!
//! Stock tools (tshark/Wireshark 4.0, `lz4 -d`) read the result because it is
//! a single standard frame; a file cut short by a crash is a frame without its
//! EndMark, which decoders read up to the last complete block.

use crate::error::{Error, Result};

use super::ChunkReport;

/// Frame magic number (§ General Structure of LZ4 Frame format), little-endian.
pub const MAGIC: u32 = 0x184D_2204;
/// The largest block this writer produces: BD code 4, "64 KB".
pub const MAX_BLOCK: usize = 64 * 1024;
/// Size-field bit that marks a block stored uncompressed (§ Data Blocks).
pub const RAW_FLAG: u32 = 0x8000_0000;
/// FLG: version `01` (bits 7-6) and B.Indep (bit 5).
const FLG_BASE: u8 = 0b0110_0000;
/// FLG bit 2: a content checksum follows the EndMark.
const FLG_CONTENT_CHECKSUM: u8 = 0b0000_0100;
/// FLG bit 4: each data block is followed by its xxh32.
pub const FLG_BLOCK_CHECKSUM: u8 = 0b0001_0000;
/// Offset of FLG in the frame.
pub const FLG_OFFSET: u64 = 4;
/// BD: block maximum size code 4 (64 KB) in bits 6-4.
const BD_64K: u8 = 4 << 4;

/// Builds the 7-byte frame header: magic, FLG, BD and the header checksum
/// HC = (xxh32(FLG..BD, seed 0) >> 8) & 0xFF (§ Frame Descriptor).
pub fn frame_header(content_checksum: bool, block_checksums: bool) -> [u8; 7] {
    let mut flg = FLG_BASE;
    if content_checksum {
        flg |= FLG_CONTENT_CHECKSUM;
    }
    if block_checksums {
        flg |= FLG_BLOCK_CHECKSUM;
    }
    let descriptor = [flg, BD_64K];
    let hc = ((xxhash_rust::xxh32::xxh32(&descriptor, 0) >> 8) & 0xFF) as u8;
    let m = MAGIC.to_le_bytes();
    [m[0], m[1], m[2], m[3], flg, BD_64K, hc]
}

/// Writes one LZ4 frame as a sequence of chunks.
pub struct Lz4FrameEncoder {
    /// Reused output buffer of the block compressor, sized for a full block.
    scratch: Vec<u8>,
    /// xxh32 of all content, when the frame carries a content checksum.
    checksum: Option<xxhash_rust::xxh32::Xxh32>,
    /// Whether each block is followed by its xxh32.
    block_checksums: bool,
}

impl Lz4FrameEncoder {
    /// An encoder; `content_checksum` adds the frame's optional xxh32 of the
    /// whole content after the EndMark.
    ///
    /// The writer leaves it off. Measured by `benches/write.rs` at 32 KiB
    /// blocks, the encoder alone runs at 11907 MB/s on fixed-payload
    /// traffic without it and 5667 MB/s with it (random 1518-byte frames:
    /// 3939 against 2913), so it would halve the writer's headroom; and a
    /// file cut short by a crash has no checksum anyway. Block integrity is
    /// left to the decoder's bounds checks and the reader's record checks.
    ///
    /// `block_checksums` follows each block with the xxh32 of its stored
    /// bytes, which the writer turns on: it hashes the compressed bytes, a
    /// fraction of the content on compressible traffic.
    pub fn new(content_checksum: bool, block_checksums: bool) -> Lz4FrameEncoder {
        Lz4FrameEncoder {
            scratch: vec![0; lz4_flex::block::get_maximum_output_size(MAX_BLOCK)],
            checksum: content_checksum.then(|| xxhash_rust::xxh32::Xxh32::new(0)),
            block_checksums,
        }
    }

    /// Appends the frame header.
    pub fn begin(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(&frame_header(self.checksum.is_some(), self.block_checksums));
    }

    /// Appends `chunk` as one or more blocks of at most [`MAX_BLOCK`] bytes.
    pub fn encode_chunk(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> ChunkReport {
        let mut report = ChunkReport::default();
        if let Some(h) = self.checksum.as_mut() {
            h.update(chunk);
        }
        for block in chunk.chunks(MAX_BLOCK) {
            report.blocks += 1;
            // compress_into only fails when the output is too small; scratch
            // holds get_maximum_output_size(MAX_BLOCK), so the Err arm (kept
            // for safety) stores the block raw like an incompressible one.
            let n = lz4_flex::block::compress_into(block, &mut self.scratch).unwrap_or(usize::MAX);
            let stored = if n < block.len() {
                // n < block.len() <= 64 KiB, so it fits in 31 bits.
                out.extend_from_slice(&(n as u32).to_le_bytes());
                &self.scratch[..n]
            } else {
                report.raw_blocks += 1;
                out.extend_from_slice(&(block.len() as u32 | RAW_FLAG).to_le_bytes());
                block
            };
            out.extend_from_slice(stored);
            if self.block_checksums {
                out.extend_from_slice(&xxhash_rust::xxh32::xxh32(stored, 0).to_le_bytes());
            }
        }
        report
    }

    /// Appends `chunk` as uncompressed blocks, without running the
    /// compressor: what the writer does when compression does not pay
    /// ([`super::economy`]).
    pub fn store_chunk(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> ChunkReport {
        let mut report = ChunkReport::default();
        if let Some(h) = self.checksum.as_mut() {
            h.update(chunk);
        }
        for block in chunk.chunks(MAX_BLOCK) {
            report.blocks += 1;
            report.raw_blocks += 1;
            report.skipped_blocks += 1;
            // A block is at most MAX_BLOCK (64 KiB): its length fits in 31 bits.
            out.extend_from_slice(&(block.len() as u32 | RAW_FLAG).to_le_bytes());
            out.extend_from_slice(block);
            if self.block_checksums {
                out.extend_from_slice(&xxhash_rust::xxh32::xxh32(block, 0).to_le_bytes());
            }
        }
        report
    }

    /// Appends the EndMark and, if enabled, the content checksum.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(&0u32.to_le_bytes());
        if let Some(h) = self.checksum.take() {
            out.extend_from_slice(&h.digest().to_le_bytes());
        }
    }
}

/// Decodes a run of data blocks (no frame header) from `src`, appending the
/// content to `out`; stops at an EndMark or at the end of `src`.
///
/// Blocks must be independent and at most [`MAX_BLOCK`] bytes decoded, each
/// followed by its xxh32 when `checksums` (the frame's FLG.B.Checksum),
/// which is verified: the layout [`Lz4FrameEncoder`] writes. `offset` is
/// the file offset of `src`, for error messages.
pub fn decode_blocks(src: &[u8], offset: u64, checksums: bool, out: &mut Vec<u8>) -> Result<()> {
    let mut pos = 0usize;
    while pos < src.len() {
        let at = offset + pos as u64;
        let Some(size) = src.get(pos..pos + 4) else {
            return Err(lz4_error(at, "block size field cut short"));
        };
        let size = u32::from_le_bytes([size[0], size[1], size[2], size[3]]);
        pos += 4;
        if size == 0 {
            return Ok(());
        }
        let len = (size & !RAW_FLAG) as usize;
        if len > MAX_BLOCK {
            return Err(lz4_error(
                at,
                format!("block of {len} bytes is larger than the 64 KiB maximum"),
            ));
        }
        let Some(body) = src.get(pos..pos + len) else {
            return Err(lz4_error(
                at,
                format!(
                    "block needs {len} bytes, {} there",
                    src.len().saturating_sub(pos)
                ),
            ));
        };
        pos += len;
        if checksums {
            let Some(c) = src.get(pos..pos + 4) else {
                return Err(lz4_error(at, "block checksum cut short"));
            };
            let want = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            let got = xxhash_rust::xxh32::xxh32(body, 0);
            if got != want {
                return Err(lz4_error(
                    at,
                    format!("block checksum {want:08x}, computed {got:08x}: the block is corrupt"),
                ));
            }
            pos += 4;
        }
        if size & RAW_FLAG != 0 {
            out.extend_from_slice(body);
        } else {
            let start = out.len();
            out.resize(start + MAX_BLOCK, 0);
            match decompress_block(body, &mut out[start..]) {
                Ok(n) => out.truncate(start + n),
                Err(e) => {
                    out.truncate(start);
                    return Err(lz4_error(at, e));
                }
            }
        }
    }
    Ok(())
}

/// Decompresses one independent LZ4 block into `dst`, returning the bytes
/// written; corrupt or oversized input is an error, never out-of-bounds
/// access.
///
/// This uses the reference C implementation's `LZ4_decompress_safe` (made
/// for untrusted input, fuzzed upstream) rather than lz4_flex: on the
/// long overlapping matches of repetitive traffic (a fixed payload, a worm)
/// lz4_flex 0.11 and 0.14 decode at about 2.5 GB/s where liblz4 reaches
/// 23 GB/s on this machine, while on random data both run at 12-13 GB/s.
/// Compression stays with lz4_flex, which is as fast as liblz4 on
/// repetitive data and faster on incompressible data.
pub(crate) fn decompress_block(src: &[u8], dst: &mut [u8]) -> std::io::Result<usize> {
    // LZ4 blocks are at most 4 MiB; a larger buffer only means more room.
    let capacity = i32::try_from(dst.len()).unwrap_or(i32::MAX);
    lz4::block::decompress_to_buffer(src, Some(capacity), dst)
}

fn lz4_error(offset: u64, what: impl std::fmt::Display) -> Error {
    Error::Compression {
        codec: "lz4",
        what: format!("block at file offset {offset}: {what}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_matches_reference_bytes() {
        // `lz4 -BI -B4 --no-frame-crc` (lz4 1.9.4) writes 04 22 4d 18 60 40 82
        // for independent 64 KB blocks without content checksum.
        assert_eq!(
            frame_header(false, false),
            [0x04, 0x22, 0x4d, 0x18, 0x60, 0x40, 0x82]
        );
        // With block checksums (`lz4 -BI -B4 -BX --no-frame-crc`): FLG 0x70.
        assert_eq!(frame_header(false, true)[4], 0x70);
    }

    #[test]
    fn incompressible_block_is_raw_and_round_trips() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let data: Vec<u8> = (0..5000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let mut enc = Lz4FrameEncoder::new(false, false);
        let mut out = Vec::new();
        let r = enc.encode_chunk(&data, &mut out);
        assert_eq!(
            r,
            ChunkReport {
                blocks: 1,
                raw_blocks: 1,

                ..ChunkReport::default()
            }
        );
        assert_eq!(
            u32::from_le_bytes([out[0], out[1], out[2], out[3]]),
            5000 | RAW_FLAG
        );
        let r = enc.encode_chunk(&[7u8; 70_000], &mut out);
        assert_eq!(
            r,
            ChunkReport {
                blocks: 2,
                raw_blocks: 0,

                ..ChunkReport::default()
            }
        );
        // Stored without trying: raw blocks whatever the content.
        let r = enc.store_chunk(&[7u8; 70_000], &mut out);
        assert_eq!((r.blocks, r.raw_blocks, r.skipped_blocks), (2, 2, 2));
        enc.finish(&mut out);
        let mut back = Vec::new();
        decode_blocks(&out, 0, false, &mut back).unwrap();
        assert_eq!(&back[..5000], &data[..]);
        assert_eq!(&back[5000..75_000], &[7u8; 70_000][..]);
        assert_eq!(&back[75_000..], &[7u8; 70_000][..]);
        // With block checksums, every flipped byte is caught.
        let mut enc = Lz4FrameEncoder::new(false, true);
        let mut out = Vec::new();
        enc.encode_chunk(&data[..3000], &mut out);
        enc.encode_chunk(&[7u8; 3000], &mut out);
        let mut back = Vec::new();
        decode_blocks(&out, 0, true, &mut back).unwrap();
        assert_eq!(back, [&data[..3000], &[7u8; 3000][..]].concat());
        let whole = back;
        for i in 0..out.len() {
            let mut bad = out.clone();
            bad[i] ^= 0x01;
            let mut back = Vec::new();
            // An error, or a run that ends early (a size turned EndMark);
            // never the whole length with other bytes.
            if decode_blocks(&bad, 0, true, &mut back).is_ok() {
                assert!(back.len() != whole.len() || back == whole, "byte {i}");
            }
        }
    }

    #[test]
    fn corrupt_blocks_are_errors_not_panics() {
        let mut back = Vec::new();
        for sums in [false, true] {
            assert!(decode_blocks(&[1, 2], 0, sums, &mut back).is_err());
            assert!(decode_blocks(&[0xff, 0xff, 0x01, 0x00], 0, sums, &mut back).is_err());
            assert!(decode_blocks(&[10, 0, 0, 0, 0xf0, 1, 2], 0, sums, &mut back).is_err());
            assert!(decode_blocks(&[3, 0, 0, 0, 0xf0, 1, 2], 0, sums, &mut back).is_err());
        }
        assert!(decode_blocks(&[2, 0, 0, 0, 0x10, 0x41, 1, 2, 3], 0, true, &mut back).is_err());
    }
}
