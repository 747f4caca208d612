//! Block compression for trace files.
//!
//! The writer hands each completed *chunk* (whole records, normally one block
//! buffer's worth) to a [`ChunkEncoder`], which appends bytes that make the
//! chunk decodable on its own or, for zstd, decodable once everything before it
//! has been read. The layout of each codec follows Shimizu et al. 2006's finding that
//! compressing fixed-size blocks of packets, never single packets, is what
//! raises the loss-free capture rate:
//!
//! - [`lz4`]: one LZ4 frame per file with independent blocks; a block that
//!   does not shrink is stored raw with the frame format's uncompressed flag
//!   (the paper's future work, "store a block raw when it does not compress").
//! - [`zstd`]: one zstd frame, flushed at every chunk boundary.
//! - [`gzip`]: one gzip member per chunk (RFC 1952 §2.2 allows many members).
//! - none: the chunk's bytes as they are.
//!
//! With more than one compression thread, the writer hands chunks to a
//! pool of threads (`pool.rs`), each with its own encoder, and writes the results in
//! order. That needs chunks that do not depend on the encoder's state: true
//! of LZ4 (independent blocks, no content checksum), gzip members and plain
//! bytes, so those files are byte for byte the ones one thread writes. A
//! zstd chunk continues the frame's compressor state, so zstd gets a single
//! compression thread (see `write::TraceWriter`'s `threads`).

pub mod economy;
pub mod gzip;
pub mod lz4;
pub(crate) mod pool;
pub mod zstd;

use crate::error::{Error, Result};
use crate::format::Codec;

/// What encoding one chunk produced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChunkReport {
    /// Codec blocks written (LZ4 blocks, zstd flushes, gzip members, plain chunks).
    pub blocks: u64,
    /// Of those, blocks stored uncompressed.
    pub raw_blocks: u64,
    /// Of those, blocks stored uncompressed without trying the compressor
    /// ([`economy`]: compression did not pay).
    pub skipped_blocks: u64,
    /// Nanoseconds the compressor took (0 when it was not run).
    pub encode_ns: u64,
}

/// The default level of each codec when none is given.
///
/// zstd and gzip default to their fastest level (1): Shimizu et al. 2006 measured that
/// a slow compressor (zlib) made loss-free capture *worse*, and its condition
/// for a gain, `T_c > T_d / (1 - r)`, favours compressor speed over ratio.
pub fn default_level(codec: Codec) -> Option<i32> {
    match codec {
        Codec::Zstd | Codec::Gzip => Some(1),
        Codec::Lz4 | Codec::None => None,
    }
}

/// Checks that `level` is valid for `codec`.
pub fn check_level(codec: Codec, level: Option<i32>) -> Result<()> {
    let Some(l) = level else { return Ok(()) };
    let ok = match codec {
        // lz4_flex has a single (fast) level, which is what `lz4 -1` means.
        Codec::Lz4 => l == 1,
        Codec::Zstd => (zstd::MIN_LEVEL..=zstd::MAX_LEVEL).contains(&l),
        Codec::Gzip => (0..=9).contains(&l),
        Codec::None => false,
    };
    if ok {
        Ok(())
    } else {
        let range = match codec {
            Codec::Lz4 => "1".to_string(),
            Codec::Zstd => format!("{}..={}", zstd::MIN_LEVEL, zstd::MAX_LEVEL),
            Codec::Gzip => "0..=9".to_string(),
            Codec::None => "no level".to_string(),
        };
        Err(Error::Config(format!(
            "level {l} is not valid for {codec} (expected {range})"
        )))
    }
}

/// A codec's encoder, turning chunks into the bytes of one file.
pub enum ChunkEncoder {
    /// Plain bytes.
    None,
    /// One LZ4 frame.
    Lz4(lz4::Lz4FrameEncoder),
    /// One zstd frame.
    Zstd(zstd::ZstdChunkEncoder),
    /// One gzip member per chunk.
    Gzip(gzip::GzipChunkEncoder),
}

impl ChunkEncoder {
    /// An encoder for `codec` at `level` (the codec's default when `None`);
    /// `checksums`: the codec's own checksums in the stream (LZ4 blocks
    /// followed by their xxh32, zstd's content checksum).
    pub fn new(codec: Codec, level: Option<i32>, checksums: bool) -> Result<ChunkEncoder> {
        check_level(codec, level)?;
        let level = level.or(default_level(codec));
        Ok(match codec {
            Codec::None => ChunkEncoder::None,
            Codec::Lz4 => ChunkEncoder::Lz4(lz4::Lz4FrameEncoder::new(false, checksums)),
            Codec::Zstd => {
                ChunkEncoder::Zstd(zstd::ZstdChunkEncoder::new(level.unwrap_or(1), checksums)?)
            }
            Codec::Gzip => ChunkEncoder::Gzip(gzip::GzipChunkEncoder::new(level.unwrap_or(1))),
        })
    }

    /// The codec's name, for errors.
    pub fn name(&self) -> &'static str {
        match self {
            ChunkEncoder::None => "none",
            ChunkEncoder::Lz4(_) => "lz4",
            ChunkEncoder::Zstd(_) => "zstd",
            ChunkEncoder::Gzip(_) => "gzip",
        }
    }

    /// Appends what the stream needs before its first chunk (the LZ4 frame
    /// header); the writer puts it in the same write as the first chunk.
    pub fn begin(&mut self, out: &mut Vec<u8>) {
        if let ChunkEncoder::Lz4(e) = self {
            e.begin(out);
        }
    }

    /// Appends the encoding of `chunk` to `out`.
    pub fn encode_chunk(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<ChunkReport> {
        match self {
            ChunkEncoder::None => {
                out.extend_from_slice(chunk);
                Ok(ChunkReport {
                    blocks: 1,
                    raw_blocks: 1,
                    ..ChunkReport::default()
                })
            }
            ChunkEncoder::Lz4(e) => timed(|| Ok(e.encode_chunk(chunk, out))),
            ChunkEncoder::Zstd(e) => timed(|| e.encode_chunk(chunk, out)),
            ChunkEncoder::Gzip(e) => timed(|| e.encode_chunk(chunk, out)),
        }
    }

    /// Whether [`store_chunk`](Self::store_chunk) can leave the compressor
    /// out: LZ4, whose frame has uncompressed blocks. (zstd chunks continue
    /// one compressor state and gzip members are not worth the exception.)
    pub fn can_store(&self) -> bool {
        matches!(self, ChunkEncoder::Lz4(_))
    }

    /// Appends `chunk` stored uncompressed, without running the compressor,
    /// where the codec can ([`can_store`](Self::can_store)); otherwise
    /// encodes it.
    pub fn store_chunk(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<ChunkReport> {
        match self {
            ChunkEncoder::Lz4(e) => Ok(e.store_chunk(chunk, out)),
            _ => self.encode_chunk(chunk, out),
        }
    }

    /// Appends what ends the stream (LZ4 EndMark, zstd's last block).
    pub fn finish(&mut self, out: &mut Vec<u8>) -> Result<()> {
        match self {
            ChunkEncoder::Lz4(e) => {
                e.finish(out);
                Ok(())
            }
            ChunkEncoder::Zstd(e) => e.finish(out),
            ChunkEncoder::None | ChunkEncoder::Gzip(_) => Ok(()),
        }
    }
}

/// Runs an encoding and puts the CPU time it took in its report: the
/// thread's own clock, not the wall clock, so that a preempted thread does
/// not make the compressor look slow (on a loaded 2-core machine one
/// chunk's wall time was 40 times its CPU time). The wall clock stands in
/// where the thread clock cannot be read.
fn timed(f: impl FnOnce() -> Result<ChunkReport>) -> Result<ChunkReport> {
    let cpu = cpu_time::ThreadTime::try_now().ok();
    let wall = std::time::Instant::now();
    let mut r = f()?;
    let took = cpu
        .and_then(|t| t.try_elapsed().ok())
        .unwrap_or_else(|| wall.elapsed());
    // At least 1: 0 means "the compressor did not run".
    r.encode_ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX).max(1);
    Ok(r)
}
