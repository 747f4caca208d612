//! gzip output as one member per chunk (RFC 1952 §2.2: "A gzip file consists
//! of a series of members"), so that a windowed read can start decoding at
//! any chunk and a file cut short keeps every complete member.
//!
//! One raw deflate stream ([`flate2::Compress`]) is reset for every member
//! instead of building a new encoder, which would allocate its window and
//! hash tables again for each chunk.
//!
//! A chunk that deflate does not shrink (random payload, already compressed
//! or encrypted traffic) is written as stored blocks (RFC 1951 §3.2.4):
//! its bytes as they are, 5 bytes of framing per 65,535, so gzip output is
//! never larger than the input plus its framing, as `gzip` itself does.

use flate2::{Compress, Compression, Crc, FlushCompress, Status};

use crate::error::{Error, Result};

use super::ChunkReport;

/// Member header (RFC 1952 §2.3): ID1 ID2, CM = 8 (deflate), no flags,
/// MTIME 0 (unknown), XFL 0, OS 255 (unknown).
const MEMBER_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];

/// The most a stored deflate block holds (its LEN is 16 bits).
const STORED_MAX: usize = 65_535;

/// The size of `len` bytes as stored deflate blocks (at least one block,
/// so that an empty chunk is still a complete stream).
fn stored_size(len: usize) -> usize {
    len + 5 * len.div_ceil(STORED_MAX).max(1)
}

/// Appends `chunk` as a deflate stream of stored blocks.
fn store(chunk: &[u8], out: &mut Vec<u8>) {
    out.reserve(stored_size(chunk.len()));
    let mut blocks = chunk.chunks(STORED_MAX).peekable();
    if blocks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
        return;
    }
    while let Some(b) = blocks.next() {
        // BFINAL on the last, BTYPE 00; the stream is byte-aligned at each
        // block's start, so the 3 header bits and their padding fill one byte.
        out.push(u8::from(blocks.peek().is_none()));
        let len = b.len() as u16;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(b);
    }
}

/// A gzip compressor writing one member per chunk.
pub struct GzipChunkEncoder {
    deflate: Compress,
}

impl GzipChunkEncoder {
    /// A compressor at `level` (0..=9).
    pub fn new(level: i32) -> GzipChunkEncoder {
        let level = u32::try_from(level.clamp(0, 9)).unwrap_or(1);
        GzipChunkEncoder {
            deflate: Compress::new(Compression::new(level), false),
        }
    }

    /// Appends `chunk` as one complete gzip member: deflated, or stored
    /// when deflate would not make it smaller.
    pub fn encode_chunk(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<ChunkReport> {
        out.extend_from_slice(&MEMBER_HEADER);
        let body = out.len();
        self.deflate.reset();
        let start_in = self.deflate.total_in();
        // Stored deflate blocks cost 5 bytes per 64 KiB; the extra slack
        // covers the worst case in one pass for typical inputs.
        out.reserve(chunk.len() + chunk.len() / 8 + 64);
        loop {
            let consumed = (self.deflate.total_in() - start_in) as usize;
            let rest = chunk.get(consumed..).unwrap_or(&[]);
            if out.capacity() - out.len() < 64 {
                out.reserve(chunk.len() / 4 + 1024);
            }
            let status = self
                .deflate
                .compress_vec(rest, out, FlushCompress::Finish)
                .map_err(|e| Error::Compression {
                    codec: "gzip",
                    what: e.to_string(),
                })?;
            if status == Status::StreamEnd {
                break;
            }
        }
        let stored = out.len() - body >= stored_size(chunk.len());
        if stored {
            out.truncate(body);
            store(chunk, out);
        }
        let mut crc = Crc::new();
        crc.update(chunk);
        out.extend_from_slice(&crc.sum().to_le_bytes());
        // ISIZE is the input size modulo 2^32 (RFC 1952 §2.3.1).
        out.extend_from_slice(&(chunk.len() as u32).to_le_bytes());
        Ok(ChunkReport {
            blocks: 1,
            raw_blocks: u64::from(stored),
            ..ChunkReport::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn members_concatenate_to_the_input() {
        let mut enc = GzipChunkEncoder::new(1);
        let mut out = Vec::new();
        enc.encode_chunk(b"hello hello hello ", &mut out).unwrap();
        let first = out.len();
        enc.encode_chunk(&[9u8; 100_000], &mut out).unwrap();
        let mut back = Vec::new();
        flate2::read::MultiGzDecoder::new(&out[..])
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(&back[..18], b"hello hello hello ");
        assert_eq!(back.len(), 100_018);
        // The second member decodes on its own.
        let mut second = Vec::new();
        flate2::read::GzDecoder::new(&out[first..])
            .read_to_end(&mut second)
            .unwrap();
        assert_eq!(second, vec![9u8; 100_000]);
    }

    fn gunzip(b: &[u8]) -> Vec<u8> {
        let mut back = Vec::new();
        flate2::read::MultiGzDecoder::new(b)
            .read_to_end(&mut back)
            .unwrap();
        back
    }

    #[test]
    fn what_deflate_cannot_shrink_is_stored_and_never_grows_past_its_framing() {
        use rand::{RngCore, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        for len in [0, 1, 100, 65_534, 65_535, 65_536, 200_000] {
            let mut chunk = vec![0u8; len];
            rng.fill_bytes(&mut chunk);
            for level in [0, 1, 6, 9] {
                let mut enc = GzipChunkEncoder::new(level);
                let mut out = Vec::new();
                let r = enc.encode_chunk(&chunk, &mut out).unwrap();
                assert!(out.len() <= 10 + stored_size(len) + 8, "{len} at {level}");
                // Tiny chunks deflate to fewer bytes than a stored block's
                // framing; past that, random bytes are stored.
                if len >= 100 {
                    assert_eq!(r.raw_blocks, 1, "{len} bytes at level {level}");
                    assert_eq!(out.len(), 10 + stored_size(len) + 8, "{len} at {level}");
                }
                assert_eq!(gunzip(&out), chunk, "{len} at {level}");
            }
        }
        // Compressible input is still deflated.
        let mut out = Vec::new();
        let r = GzipChunkEncoder::new(1)
            .encode_chunk(&[b'a'; 50_000], &mut out)
            .unwrap();
        assert_eq!(r.raw_blocks, 0);
        assert!(out.len() < 1_000);
        // A stored member among deflated ones.
        let mut noise = vec![0u8; 70_000];
        rng.fill_bytes(&mut noise);
        let mut enc = GzipChunkEncoder::new(1);
        let mut out = Vec::new();
        for c in [&b"abc abc abc abc"[..], &noise, b"", b"xyz"] {
            enc.encode_chunk(c, &mut out).unwrap();
        }
        assert_eq!(
            gunzip(&out),
            [&b"abc abc abc abc"[..], &noise, b"xyz"].concat()
        );
    }
}
