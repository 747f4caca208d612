//! One zstd frame per file (RFC 8878), flushed at every chunk boundary.
//!
//! `ZSTD_e_flush` ends the current block so that everything given so far can
//! be decoded; the frame stays open. A file cut short after a flush is a frame
//! without its last block, which decoders (and tshark) read up to the cut.
//! A zstd frame cannot be entered in the middle, so windowed reads decode it
//! from the start and stop after the last chunk they need.

use ::zstd::zstd_safe::{self, CCtx, CParameter, InBuffer, OutBuffer};

use crate::error::{Error, Result};

use super::ChunkReport;

/// The fastest level accepted (zstd's `--fast=7`).
pub const MIN_LEVEL: i32 = -7;
/// The strongest level zstd offers.
pub const MAX_LEVEL: i32 = 22;

/// A streaming zstd compressor writing one frame.
pub struct ZstdChunkEncoder {
    cctx: CCtx<'static>,
}

impl ZstdChunkEncoder {
    /// A compressor at `level`; `checksum` ends the frame with its content
    /// checksum.
    pub fn new(level: i32, checksum: bool) -> Result<ZstdChunkEncoder> {
        let mut cctx = CCtx::create();
        cctx.set_parameter(CParameter::CompressionLevel(level))
            .map_err(|c| zstd_error("setting the level", c))?;
        // The frame's content checksum (XXH64, RFC 8878 3.1.1): any reader
        // of a closed file finds a flipped byte that decodes into other
        // bytes, which without it 96 of 100 single-byte flips did.
        cctx.set_parameter(CParameter::ChecksumFlag(checksum))
            .map_err(|c| zstd_error("setting the checksum flag", c))?;
        Ok(ZstdChunkEncoder { cctx })
    }

    /// Compresses `chunk` and flushes, so the chunk is decodable.
    pub fn encode_chunk(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<ChunkReport> {
        let mut input = InBuffer::around(chunk);
        out.reserve(zstd_safe::compress_bound(chunk.len()) + 64);
        loop {
            if out.capacity() - out.len() < 64 {
                out.reserve(64 * 1024);
            }
            let pos = out.len();
            let mut output = OutBuffer::around_pos(out, pos);
            let left = self
                .cctx
                .compress_stream2(
                    &mut output,
                    &mut input,
                    zstd_safe::zstd_sys::ZSTD_EndDirective::ZSTD_e_flush,
                )
                .map_err(|c| zstd_error("compressing", c))?;
            if left == 0 && input.pos() == chunk.len() {
                return Ok(ChunkReport {
                    blocks: 1,
                    ..ChunkReport::default()
                });
            }
        }
    }

    /// Ends the frame.
    pub fn finish(&mut self, out: &mut Vec<u8>) -> Result<()> {
        loop {
            if out.capacity() - out.len() < 64 {
                out.reserve(1024);
            }
            let pos = out.len();
            let mut output = OutBuffer::around_pos(out, pos);
            let left = self
                .cctx
                .end_stream(&mut output)
                .map_err(|c| zstd_error("ending the frame", c))?;
            if left == 0 {
                return Ok(());
            }
        }
    }
}

fn zstd_error(doing: &str, code: usize) -> Error {
    Error::Compression {
        codec: "zstd",
        what: format!("{doing}: {}", zstd_safe::get_error_name(code)),
    }
}
