//! A streaming reader of LZ4 frames (LZ4 Frame Format Description 1.6.x),
//! written for the trace reader's two needs that `lz4_flex::frame::FrameDecoder`
//! does not meet:
//!
//! - A frame that stops at a block boundary without its end mark is how a
//!   writer killed by SIGKILL leaves its file. `FrameDecoder` reports that as
//!   a clean end of file; this decoder returns `UnexpectedEof` ("lz4 frame
//!   ended without its end mark") after the last complete block, so the
//!   reader can say the file was cut.
//! - Speed: when the caller's buffer has room for a whole block, an
//!   independent block is decompressed straight into it, and a block that
//!   lies whole in the `BufRead` buffer is decompressed from there, so the
//!   hot path makes no copy besides the decompression itself.
//!
//! Linked blocks (which may reference the previous 64 KiB), block and
//! content checksums (xxHash32), the content size field, concatenated frames
//! and skippable frames are handled. Dictionary ids are refused.
//!
//! Errors: a cut stream is `ErrorKind::UnexpectedEof`; corrupt data is
//! `ErrorKind::InvalidData`; errors of the underlying reader pass through.

use std::io::{self, BufRead, ErrorKind, Read};

use xxhash_rust::xxh32::{xxh32, Xxh32};

/// LZ4 frame magic number (little-endian on disk: `04 22 4d 18`).
pub const MAGIC: u32 = 0x184d_2204;
/// Skippable frames have magics `0x184d2a50` to `0x184d2a5f`.
const SKIPPABLE_MASK: u32 = 0xffff_fff0;
const SKIPPABLE: u32 = 0x184d_2a50;
/// The window a linked block may reference.
const WINDOW: usize = 64 * 1024;

/// Flags of the frame descriptor (section "Frame Descriptor").
const FLG_VERSION_MASK: u8 = 0xc0;
const FLG_VERSION_01: u8 = 0x40;
const FLG_BLOCK_INDEP: u8 = 0x20;
const FLG_BLOCK_CHECKSUM: u8 = 0x10;
const FLG_CONTENT_SIZE: u8 = 0x08;
const FLG_CONTENT_CHECKSUM: u8 = 0x04;
const FLG_RESERVED: u8 = 0x02;
const FLG_DICT_ID: u8 = 0x01;

#[derive(Clone, Copy, Debug)]
struct FrameInfo {
    block_max: usize,
    independent: bool,
    block_checksum: bool,
    content_checksum: bool,
    content_size: Option<u64>,
}

fn cut(what: &str) -> io::Error {
    io::Error::new(ErrorKind::UnexpectedEof, what.to_string())
}

fn corrupt(what: String) -> io::Error {
    io::Error::new(ErrorKind::InvalidData, what)
}

/// Reads exactly `buf.len()` bytes; `Ok(false)` if the stream was at its
/// end before the first byte, `UnexpectedEof` (with `what`) if it ended after.
fn read_full<R: BufRead>(r: &mut R, buf: &mut [u8], what: &str) -> io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(cut(what)),
            Ok(n) => got += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Decompresses a stream of LZ4 frames.
pub struct Lz4Decoder<R: BufRead> {
    r: R,
    frame: Option<FrameInfo>,
    /// Decoded bytes not yet handed out: `dst[dst_pos..dst_end]`.
    dst: Vec<u8>,
    dst_pos: usize,
    dst_end: usize,
    /// The last (up to) 64 KiB of output, for linked blocks.
    window: Vec<u8>,
    /// A compressed block (and its checksum) that did not lie whole in the
    /// `BufRead` buffer.
    src: Vec<u8>,
    hasher: Xxh32,
    content_len: u64,
}

impl<R: BufRead> Lz4Decoder<R> {
    /// A decoder reading frames from `r`.
    pub fn new(r: R) -> Lz4Decoder<R> {
        Lz4Decoder {
            r,
            frame: None,
            dst: Vec::new(),
            dst_pos: 0,
            dst_end: 0,
            window: Vec::new(),
            src: Vec::new(),
            hasher: Xxh32::new(0),
            content_len: 0,
        }
    }

    /// Reads the next frame header, skipping skippable frames. `Ok(false)`
    /// at a clean end of the stream.
    fn start_frame(&mut self) -> io::Result<bool> {
        loop {
            let mut magic = [0u8; 4];
            if !read_full(&mut self.r, &mut magic, "lz4 frame header")? {
                return Ok(false);
            }
            let magic = u32::from_le_bytes(magic);
            if magic & SKIPPABLE_MASK == SKIPPABLE {
                let mut size = [0u8; 4];
                if !read_full(&mut self.r, &mut size, "lz4 skippable frame")? {
                    return Err(cut("lz4 skippable frame"));
                }
                let mut left = u64::from(u32::from_le_bytes(size));
                while left > 0 {
                    let avail = self.r.fill_buf()?;
                    if avail.is_empty() {
                        return Err(cut("lz4 skippable frame"));
                    }
                    let n = avail.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                    self.r.consume(n);
                    left -= n as u64;
                }
                continue;
            }
            if magic != MAGIC {
                return Err(corrupt(format!(
                    "not an lz4 frame: magic 0x{magic:08x} (expected 0x{MAGIC:08x})"
                )));
            }
            // FLG, BD, then optional content size (8) and dictionary id (4), then HC.
            let mut desc = [0u8; 2 + 8 + 4 + 1];
            if !read_full(&mut self.r, &mut desc[..2], "lz4 frame header")? {
                return Err(cut("lz4 frame header"));
            }
            let (flg, bd) = (desc[0], desc[1]);
            if flg & FLG_VERSION_MASK != FLG_VERSION_01 || flg & FLG_RESERVED != 0 {
                return Err(corrupt(format!(
                    "lz4 frame: unsupported FLG byte 0x{flg:02x}"
                )));
            }
            if flg & FLG_DICT_ID != 0 {
                return Err(corrupt("lz4 frame: dictionaries are not supported".into()));
            }
            let block_max = match (bd >> 4) & 7 {
                4 => 64 << 10,
                5 => 256 << 10,
                6 => 1 << 20,
                7 => 4 << 20,
                n => {
                    return Err(corrupt(format!(
                        "lz4 frame: invalid block maximum size code {n}"
                    )))
                }
            };
            if bd & 0x8f != 0 {
                return Err(corrupt(format!(
                    "lz4 frame: reserved BD bits set (0x{bd:02x})"
                )));
            }
            let extra = if flg & FLG_CONTENT_SIZE != 0 { 8 } else { 0 };
            if !read_full(&mut self.r, &mut desc[2..2 + extra + 1], "lz4 frame header")? {
                return Err(cut("lz4 frame header"));
            }
            let hc = desc[2 + extra];
            let want = (xxh32(&desc[..2 + extra], 0) >> 8) as u8;
            if hc != want {
                return Err(corrupt(format!(
                    "lz4 frame: header checksum 0x{hc:02x}, computed 0x{want:02x}"
                )));
            }
            let content_size = (extra == 8).then(|| {
                let mut b = [0u8; 8];
                b.copy_from_slice(&desc[2..10]);
                u64::from_le_bytes(b)
            });
            self.frame = Some(FrameInfo {
                block_max,
                independent: flg & FLG_BLOCK_INDEP != 0,
                block_checksum: flg & FLG_BLOCK_CHECKSUM != 0,
                content_checksum: flg & FLG_CONTENT_CHECKSUM != 0,
                content_size,
            });
            self.window.clear();
            self.hasher.reset(0);
            self.content_len = 0;
            return Ok(true);
        }
    }

    /// Handles the end mark: content size and checksum.
    fn end_frame(&mut self, f: FrameInfo) -> io::Result<()> {
        if f.content_checksum {
            let mut c = [0u8; 4];
            if !read_full(&mut self.r, &mut c, "lz4 content checksum")? {
                return Err(cut("lz4 content checksum"));
            }
            let want = u32::from_le_bytes(c);
            let got = self.hasher.digest();
            if want != got {
                return Err(corrupt(format!(
                    "lz4 content checksum 0x{want:08x}, computed 0x{got:08x}"
                )));
            }
        }
        if let Some(size) = f.content_size {
            if size != self.content_len {
                return Err(corrupt(format!(
                    "lz4 frame holds {} bytes, its header says {size}",
                    self.content_len
                )));
            }
        }
        self.frame = None;
        Ok(())
    }

    /// Decodes the next block into `out` if `direct` (and `out` has
    /// `block_max` bytes of room), else into `self.dst`. Returns the number of
    /// bytes decoded, or `None` after an end mark.
    fn next_block(&mut self, f: FrameInfo, out: &mut [u8]) -> io::Result<Option<(usize, bool)>> {
        let mut hdr = [0u8; 4];
        if !read_full(&mut self.r, &mut hdr, "lz4 block header")? {
            return Err(cut("lz4 frame ended without its end mark"));
        }
        let word = u32::from_le_bytes(hdr);
        if word == 0 {
            self.end_frame(f)?;
            return Ok(None);
        }
        let raw = word & 0x8000_0000 != 0;
        let len = (word & 0x7fff_ffff) as usize;
        if len > f.block_max {
            return Err(corrupt(format!(
                "lz4 block of {len} bytes exceeds the frame's maximum {}",
                f.block_max
            )));
        }
        let total = len + if f.block_checksum { 4 } else { 0 };

        // Take the block from the BufRead buffer when it lies whole there,
        // else gather it into `src`.
        let direct = f.independent && out.len() >= f.block_max;
        let in_place = self.r.fill_buf()?.len() >= total;
        if !in_place {
            self.src.resize(total, 0);
            let mut got = 0;
            while got < total {
                match self.r.read(&mut self.src[got..total]) {
                    Ok(0) => return Err(cut("lz4 block")),
                    Ok(n) => got += n,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
        }
        let block: &[u8] = if in_place {
            // fill_buf returns the same buffered bytes again without reading.
            &self.r.fill_buf()?[..total]
        } else {
            &self.src[..total]
        };
        let (data, checksum) = block.split_at(len);
        if f.block_checksum {
            let want = u32::from_le_bytes([checksum[0], checksum[1], checksum[2], checksum[3]]);
            let got = xxh32(data, 0);
            if want != got {
                return Err(corrupt(format!(
                    "lz4 block checksum 0x{want:08x}, computed 0x{got:08x}"
                )));
            }
        }
        if !direct && self.dst.len() < f.block_max {
            self.dst.resize(f.block_max, 0);
        }
        let target: &mut [u8] = if direct {
            &mut out[..f.block_max]
        } else {
            &mut self.dst[..f.block_max]
        };
        let n = if raw {
            target[..len].copy_from_slice(data);
            len
        } else if f.independent || self.window.is_empty() {
            crate::compress::lz4::decompress_block(data, target)
                .map_err(|e| corrupt(format!("lz4 block: {e}")))?
        } else {
            lz4_flex::block::decompress_into_with_dict(data, target, &self.window)
                .map_err(|e| corrupt(format!("lz4 block: {e}")))?
        };
        if in_place {
            self.r.consume(total);
        }
        let produced = &target[..n];
        if f.content_checksum {
            self.hasher.update(produced);
        }
        if !f.independent {
            // Keep the last 64 KiB of output as the next block's dictionary.
            self.window.extend_from_slice(produced);
            if self.window.len() > WINDOW {
                let excess = self.window.len() - WINDOW;
                self.window.drain(..excess);
            }
        }
        self.content_len += n as u64;
        Ok(Some((n, direct)))
    }
}

impl<R: BufRead> Read for Lz4Decoder<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        loop {
            if self.dst_pos < self.dst_end {
                let n = (self.dst_end - self.dst_pos).min(out.len());
                out[..n].copy_from_slice(&self.dst[self.dst_pos..self.dst_pos + n]);
                self.dst_pos += n;
                return Ok(n);
            }
            let f = match self.frame {
                Some(f) => f,
                None => {
                    if !self.start_frame()? {
                        return Ok(0);
                    }
                    continue;
                }
            };
            match self.next_block(f, out)? {
                None => continue,
                Some((0, _)) => continue,
                Some((n, true)) => return Ok(n),
                Some((n, false)) => {
                    self.dst_pos = 0;
                    self.dst_end = n;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufReader, Write};

    fn encode(data: &[u8], independent: bool, checksums: bool) -> Vec<u8> {
        use lz4_flex::frame::{BlockMode, BlockSize, FrameEncoder, FrameInfo};
        let info = FrameInfo::new()
            .block_size(BlockSize::Max64KB)
            .block_mode(if independent {
                BlockMode::Independent
            } else {
                BlockMode::Linked
            })
            .block_checksums(checksums)
            .content_checksum(checksums);
        let mut e = FrameEncoder::with_frame_info(info, Vec::new());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn sample(n: usize) -> Vec<u8> {
        (0..n)
            .map(|i| ((i * 7) % 251) as u8 ^ (i / 1000) as u8)
            .collect()
    }

    fn decode(bytes: &[u8], chunk: usize) -> io::Result<Vec<u8>> {
        let mut d = Lz4Decoder::new(BufReader::with_capacity(4096, bytes));
        let mut out = Vec::new();
        let mut buf = vec![0u8; chunk];
        loop {
            let n = d.read(&mut buf)?;
            if n == 0 {
                return Ok(out);
            }
            out.extend_from_slice(&buf[..n]);
        }
    }

    #[test]
    fn decodes_lz4_flex_frames_of_every_mode() {
        let data = sample(300_000);
        for (indep, sums) in [(true, false), (true, true), (false, false), (false, true)] {
            let enc = encode(&data, indep, sums);
            for chunk in [1000, 70_000, 1 << 20] {
                assert_eq!(
                    decode(&enc, chunk).unwrap(),
                    data,
                    "indep {indep} sums {sums}"
                );
            }
        }
    }

    #[test]
    fn concatenated_and_skippable_frames() {
        let a = sample(100_000);
        let mut enc = encode(&a, true, false);
        enc.extend_from_slice(&0x184d_2a53u32.to_le_bytes());
        enc.extend_from_slice(&5u32.to_le_bytes());
        enc.extend_from_slice(b"hello");
        enc.extend_from_slice(&encode(b"tail", false, true));
        let mut want = a.clone();
        want.extend_from_slice(b"tail");
        assert_eq!(decode(&enc, 1 << 20).unwrap(), want);
    }

    #[test]
    fn missing_end_mark_is_unexpected_eof_after_the_data() {
        let data = sample(200_000);
        let enc = encode(&data, true, false);
        // Drop the 4-byte end mark: every block is still there.
        let cut_frame = &enc[..enc.len() - 4];
        let mut d = Lz4Decoder::new(BufReader::new(cut_frame));
        let mut out = Vec::new();
        let err = d.read_to_end(&mut out).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::UnexpectedEof);
        assert_eq!(out, data);
    }

    #[test]
    fn every_cut_is_eof_or_error_never_a_panic() {
        let data = sample(150_000);
        for sums in [false, true] {
            let enc = encode(&data, false, sums);
            for cut_at in (0..enc.len()).step_by(97) {
                let r = decode(&enc[..cut_at], 1 << 20);
                if cut_at > 0 {
                    let e = r.unwrap_err();
                    assert_eq!(e.kind(), ErrorKind::UnexpectedEof, "cut at {cut_at}: {e}");
                }
            }
        }
    }

    #[test]
    fn corrupt_checksums_and_headers_are_invalid_data() {
        let data = sample(100_000);
        let mut enc = encode(&data, true, true);
        enc[4] ^= 0x01; // FLG: now says "dictionary id"; header checksum fails too
        assert_eq!(
            decode(&enc, 4096).unwrap_err().kind(),
            ErrorKind::InvalidData
        );
        let mut enc = encode(&data, true, true);
        let mid = enc.len() / 2;
        enc[mid] ^= 0xff;
        assert_eq!(
            decode(&enc, 4096).unwrap_err().kind(),
            ErrorKind::InvalidData
        );
    }
}
