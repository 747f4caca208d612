//! gzip output as one member per chunk (RFC 1952 §2.2: "A gzip file consists
//! of a series of members"), so that a windowed read can start decoding at
//! any chunk and a file cut short keeps every complete member.
//!
//! One raw deflate stream ([`flate2::Compress`]) is reset for every member
//! instead of building a new encoder, which would allocate its window and
//! hash tables again for each chunk.

use flate2::{Compress, Compression, Crc, FlushCompress, Status};

use crate::error::{Error, Result};

use super::ChunkReport;

/// Member header (RFC 1952 §2.3): ID1 ID2, CM = 8 (deflate), no flags,
/// MTIME 0 (unknown), XFL 0, OS 255 (unknown).
const MEMBER_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];

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

    /// Appends `chunk` as one complete gzip member.
    pub fn encode_chunk(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<ChunkReport> {
        out.extend_from_slice(&MEMBER_HEADER);
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
        let mut crc = Crc::new();
        crc.update(chunk);
        out.extend_from_slice(&crc.sum().to_le_bytes());
        // ISIZE is the input size modulo 2^32 (RFC 1952 §2.3.1).
        out.extend_from_slice(&(chunk.len() as u32).to_le_bytes());
        Ok(ChunkReport {
            blocks: 1,
            raw_blocks: 0,
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
}
