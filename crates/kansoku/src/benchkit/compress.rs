//! Compression throughput and ratio per codec and block size, as paper 000
//! measured LZO and zlib (Fig. 4: compression buffers of 4 to 128 KB;
//! Table 1: average ratio of fixed and random payloads at 64 and 1518 bytes).
//!
//! A traffic sample is a pcap byte stream in memory. It is cut into chunks at
//! record boundaries exactly as `trace::write::TraceWriter` cuts its block
//! buffer (the file header alone first; a chunk is closed once it reaches the
//! block size; a record that would overflow it starts the next one), and each
//! chunk goes through the trace crate's own [`ChunkEncoder`], so the figures
//! are those of the writer's compression step. Per-packet compression, the
//! paper's baseline, is the same loop with one record per chunk.
//!
//! The writer's block buffer stops at 64 KiB, the LZ4 frame's largest block.
//! Larger blocks are measured anyway (the paper went to 128 KB): the LZ4
//! encoder then stores each buffer as consecutive 64 KiB frame blocks, so a
//! 128 KiB buffer costs two independent 64 KiB block compressions.

use std::net::{IpAddr, Ipv4Addr};
use std::ops::Range;
use std::time::Instant;

use synth::{FrameSize, PayloadPattern, ProtoMix, Synth, SynthConfig};
use trace::compress::ChunkEncoder;
use trace::format::pcap;
use trace::read::TraceReader;
use trace::{Codec, LinkType, Record};

use super::{mb_per_s, median};

/// The pcap snap length written in sample headers (tcpdump's default).
const SNAPLEN: u32 = 262_144;

/// How the stream is cut into chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Block {
    /// One record per chunk: per-packet compression, paper 000's baseline.
    Packet,
    /// Chunks of about this many bytes, as the writer's block buffer.
    Bytes(usize),
}

impl Block {
    /// `packet` or the size in KiB (`32KiB`), or bytes when not a whole KiB.
    pub fn label(self) -> String {
        match self {
            Block::Packet => "packet".to_string(),
            Block::Bytes(n) if n % 1024 == 0 => format!("{}KiB", n / 1024),
            Block::Bytes(n) => format!("{n}B"),
        }
    }
}

/// A traffic sample: a whole pcap file in memory and where its records lie.
pub struct Traffic {
    /// Short name (`fixed-64`, `random-1518`, `trace`).
    pub name: String,
    /// File header followed by packet records, as the writer emits them.
    pub stream: Vec<u8>,
    /// Byte range of each record in `stream`, in order and contiguous.
    pub records: Vec<Range<usize>>,
}

/// The sample every traffic kind starts as: a nanosecond pcap header.
fn empty(name: &str, link: LinkType, bytes: usize) -> Traffic {
    let mut stream = Vec::with_capacity(bytes + 2048);
    pcap::emit_file_header(&mut stream, link, SNAPLEN, true);
    Traffic {
        name: name.to_string(),
        stream,
        records: Vec::new(),
    }
}

impl Traffic {
    fn push(&mut self, ts: u64, orig_len: u32, data: &[u8]) {
        let start = self.stream.len();
        pcap::emit_record(&mut self.stream, ts, true, orig_len, data);
        self.records.push(start..self.stream.len());
    }

    /// Synthetic UDP/IPv4 Ethernet frames of `frame_len` bytes whose payload
    /// is one repeated byte (`random` false) or fresh random bytes, until the
    /// stream holds at least `bytes` bytes; made by the `synth` crate as
    /// paper 000's generator made them.
    pub fn synthetic(frame_len: usize, random: bool, bytes: usize) -> Result<Traffic, String> {
        let name = format!("{}-{frame_len}", if random { "random" } else { "fixed" });
        let per = frame_len + pcap::RECORD_HEADER_LEN;
        let mut synth = Synth::new(SynthConfig {
            count: (bytes / per.max(1)) as u64 + 1,
            size: FrameSize::Fixed(frame_len),
            payload: if random {
                PayloadPattern::Random
            } else {
                PayloadPattern::Fixed(0)
            },
            proto: ProtoMix::Udp,
            // One sender and one receiver, as paper 000's generator (a UDP
            // sender aimed at one address); source ports still vary per packet.
            src_net: (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 32),
            dst_net: (IpAddr::V4(Ipv4Addr::new(192, 168, 1, 1)), 32),
            ..SynthConfig::default()
        })
        .map_err(|e| format!("{e:?}"))?;
        let mut t = empty(&name, LinkType::Ethernet, bytes);
        while let Some((ts, frame)) = synth.next_frame() {
            let len = frame.len() as u32;
            t.push(ts, len, frame);
        }
        Ok(t)
    }

    /// The packets of a trace, as the pcap the writer would store (the link
    /// type of the first packet goes in the header), up to `bytes` bytes.
    pub fn from_trace(reader: &mut TraceReader, bytes: usize) -> trace::Result<Traffic> {
        let mut t: Option<Traffic> = None;
        while let Some(rec) = reader.next_record()? {
            if let Record::Packet(p) = rec {
                let t = t.get_or_insert_with(|| empty("trace", p.link_type, bytes));
                t.push(p.ts_nanos(), p.orig_len, p.data);
                if t.stream.len() >= bytes {
                    break;
                }
            }
        }
        Ok(t.unwrap_or_else(|| empty("trace", LinkType::Ethernet, 0)))
    }

    /// Bytes of the file header (the writer's first chunk).
    fn header_len(&self) -> usize {
        self.records.first().map_or(self.stream.len(), |r| r.start)
    }

    /// The chunks the writer would compress, as ranges of `stream`.
    pub fn chunks(&self, block: Block) -> Vec<Range<usize>> {
        // Per packet is the writer's rule with a one-byte buffer: every
        // record reaches the size on its own.
        let size = match block {
            Block::Packet => 1,
            Block::Bytes(n) => n.max(1),
        };
        let head = self.header_len();
        let mut out = Vec::with_capacity(self.records.len() + 1);
        out.push(0..head);
        let mut cur = head;
        for r in &self.records {
            // A record that would overflow a non-empty buffer starts the next chunk.
            if r.end - cur > size && r.start > cur {
                out.push(cur..r.start);
                cur = r.start;
            }
            if r.end - cur >= size {
                out.push(cur..r.end);
                cur = r.end;
            }
        }
        if cur < self.stream.len() {
            out.push(cur..self.stream.len());
        }
        out
    }
}

/// One codec at one block size on one traffic sample.
#[derive(Clone, Debug)]
pub struct CompressResult {
    pub codec: Codec,
    pub block: Block,
    /// MB/s of uncompressed input, median of the runs.
    pub mb_per_s: f64,
    /// Output bytes over input bytes (frame and member headers included).
    pub ratio: f64,
    /// Codec blocks written, and those stored raw (LZ4 only stores raw ones).
    pub blocks: u64,
    pub raw_blocks: u64,
}

/// Compresses `t` chunk by chunk with `codec` at its default level, `runs`
/// times; each run repeats the whole stream until `min_secs` have passed.
pub fn measure(
    t: &Traffic,
    codec: Codec,
    block: Block,
    runs: usize,
    min_secs: f64,
) -> trace::Result<CompressResult> {
    let chunks = t.chunks(block);
    let mut out = Vec::with_capacity(256 * 1024);
    let mut speeds = Vec::new();
    let mut first: Option<(u64, u64, u64)> = None;
    for _ in 0..runs.max(1) {
        let mut bytes_in = 0u64;
        let start = Instant::now();
        loop {
            let mut enc = ChunkEncoder::new(codec, None)?;
            let (mut written, mut blocks, mut raw) = (0u64, 0u64, 0u64);
            enc.begin(&mut out);
            for c in &chunks {
                // The ranges come from `chunks`, so they lie inside the stream.
                let rep = enc.encode_chunk(&t.stream[c.clone()], &mut out)?;
                blocks += rep.blocks;
                raw += rep.raw_blocks;
                // The writer hands `out` to write() and reuses it.
                written += out.len() as u64;
                out.clear();
            }
            enc.finish(&mut out)?;
            written += out.len() as u64;
            out.clear();
            bytes_in += t.stream.len() as u64;
            first.get_or_insert((written, blocks, raw));
            if start.elapsed().as_secs_f64() >= min_secs {
                break;
            }
        }
        speeds.push(mb_per_s(bytes_in, start.elapsed().as_secs_f64()));
    }
    let (written, blocks, raw_blocks) = first.unwrap_or_default();
    Ok(CompressResult {
        codec,
        block,
        mb_per_s: median(&speeds),
        ratio: if t.stream.is_empty() {
            0.0
        } else {
            written as f64 / t.stream.len() as f64
        },
        blocks,
        raw_blocks,
    })
}

/// The smallest block size from which throughput stops rising: the first
/// whose throughput is within 5% of the best, over `(size, MB/s)` points.
pub fn knee(points: &[(usize, f64)]) -> Option<usize> {
    let best = points.iter().map(|p| p.1).fold(0.0f64, f64::max);
    let mut sorted: Vec<(usize, f64)> = points.to_vec();
    sorted.sort_by_key(|p| p.0);
    sorted.iter().find(|p| p.1 >= 0.95 * best).map(|p| p.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_follow_the_writer_and_cover_the_stream() {
        let t = Traffic::synthetic(1518, true, 200_000).unwrap();
        for block in [Block::Packet, Block::Bytes(4096), Block::Bytes(131072)] {
            let c = t.chunks(block);
            assert_eq!(c[0], 0..pcap::FILE_HEADER_LEN);
            for w in c.windows(2) {
                assert_eq!(w[0].end, w[1].start);
            }
            assert_eq!(c.last().unwrap().end, t.stream.len());
            if let Block::Bytes(n) = block {
                // Only the last chunk may fall short; none exceeds the size.
                for r in &c[1..c.len() - 1] {
                    assert!(r.len() <= n && r.len() + 1534 > n, "{r:?}");
                }
            }
        }
        assert_eq!(t.chunks(Block::Packet).len(), t.records.len() + 1);
    }

    #[test]
    fn fixed_payload_compresses_and_random_does_not() {
        let fixed = Traffic::synthetic(1518, false, 300_000).unwrap();
        let random = Traffic::synthetic(1518, true, 300_000).unwrap();
        let f = measure(&fixed, Codec::Lz4, Block::Bytes(32768), 1, 0.0).unwrap();
        let r = measure(&random, Codec::Lz4, Block::Bytes(32768), 1, 0.0).unwrap();
        assert!(f.ratio < 0.1, "{f:?}");
        assert!(r.ratio > 0.9 && r.ratio < 1.01, "{r:?}");
        // At most the 24-byte file header chunk stays raw.
        assert!(f.raw_blocks <= 1, "{f:?}");
        let per_packet = measure(&random, Codec::Lz4, Block::Packet, 1, 0.0).unwrap();
        assert!(
            per_packet.raw_blocks * 10 > per_packet.blocks * 9,
            "{per_packet:?}"
        );
        // 128 KiB buffers become two 64 KiB LZ4 frame blocks each.
        let big = measure(&fixed, Codec::Lz4, Block::Bytes(131072), 1, 0.0).unwrap();
        assert!(big.blocks >= 2 * (fixed.stream.len() as u64 / 131072));
    }

    #[test]
    fn knee_is_first_size_near_the_best() {
        let p = [(4096, 100.0), (8192, 180.0), (16384, 196.0), (32768, 200.0)];
        assert_eq!(knee(&p), Some(16384));
        assert_eq!(knee(&[]), None);
    }
}
