//! `kansoku bench compress`: compression throughput and ratio per codec and
//! block size, as Shimizu et al. 2006 measured LZO and zlib (Fig. 4: compression
//! buffers of 4 to 128 KB; Table 1: average ratio of fixed and random
//! payloads at 64 and 1518 bytes). Every table carries a baseline from the
//! same run: memcpy of the same bytes.
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

use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr};
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use pipeline::{display_path, Consumer, Control, Error, Flow, Report, Result, TraceSource};
use serde_json::{json, Value};
use synth::{FrameSize, PayloadPattern, ProtoMix, Synth, SynthConfig};
use trace::compress::ChunkEncoder;
use trace::format::pcap;
use trace::{Codec, LinkType, Record};

use crate::args::BenchCompressArgs;
use crate::harness::stats::{mb_per_s, median};
use crate::harness::table::{self, Align};

/// The pcap snap length written in sample headers (tcpdump's default).
const SNAPLEN: u32 = 262_144;

/// How the stream is cut into chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Block {
    /// One record per chunk: per-packet compression, Shimizu et al. 2006's baseline.
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

/// Gathers the packets of a trace into a sample, until it holds `bytes`.
struct Gather {
    sample: Option<Traffic>,
    bytes: usize,
}

impl Consumer<TraceSource> for Gather {
    fn consume(&mut self, rec: Record<'_>) -> Result<Flow> {
        let Record::Packet(p) = rec else {
            return Ok(Flow::Continue);
        };
        let bytes = self.bytes;
        let t = self
            .sample
            .get_or_insert_with(|| empty("trace", p.link_type, bytes));
        t.push(p.ts_nanos(), p.orig_len, p.data);
        Ok(if t.stream.len() >= bytes {
            Flow::Stop
        } else {
            Flow::Continue
        })
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
    /// Shimizu et al. 2006's generator made them.
    pub fn synthetic(frame_len: usize, random: bool, bytes: usize) -> Result<Traffic> {
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
            // One sender and one receiver, as Shimizu et al. 2006's generator (a UDP
            // sender aimed at one address); source ports still vary per packet.
            src_net: (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 32),
            dst_net: (IpAddr::V4(Ipv4Addr::new(192, 168, 1, 1)), 32),
            ..SynthConfig::default()
        })
        .map_err(|e| Error::usage(format!("{name}: {e:?}")))?;
        let mut t = empty(&name, LinkType::Ethernet, bytes);
        while let Some((ts, frame)) = synth.next_frame() {
            let len = frame.len() as u32;
            t.push(ts, len, frame);
        }
        Ok(t)
    }

    /// The packets of the trace at `path`, as the pcap the writer would
    /// store (the link type of the first packet goes in the header), up to
    /// `bytes` bytes; with the reading's report (a cut file, a stop).
    pub fn from_trace(path: &Path, bytes: usize, stop: &AtomicBool) -> Result<(Traffic, Report)> {
        let mut source = TraceSource::open(path)?;
        let mut g = Gather {
            sample: None,
            bytes,
        };
        let mut report = pipeline::run(&mut source, &mut g, Control::new(stop));
        if let Some(e) = report.read_error.take() {
            return Err(e);
        }
        let t = g
            .sample
            .unwrap_or_else(|| empty("trace", LinkType::Ethernet, 0));
        Ok((t, report))
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
            let mut enc = ChunkEncoder::new(codec, None, false)?;
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

fn parse_codec(s: &str) -> Result<Codec> {
    match s.trim() {
        "lz4" => Ok(Codec::Lz4),
        "zstd" => Ok(Codec::Zstd),
        "gzip" => Ok(Codec::Gzip),
        other => Err(Error::usage(format!(
            "--codecs: unknown codec {other:?} (expected lz4, zstd or gzip)"
        ))),
    }
}

/// One traffic sample's results.
struct TrafficResult {
    name: String,
    bytes: usize,
    packets: usize,
    memcpy: f64,
    rows: Vec<CompressResult>,
}

/// Per codec: the knee block size, the best throughput over block sizes,
/// and the per-packet throughput when measured.
struct Knee {
    codec: Codec,
    knee: Option<usize>,
    best: f64,
    per_packet: Option<f64>,
}

impl TrafficResult {
    fn knees(&self, codecs: &[Codec]) -> Vec<Knee> {
        codecs
            .iter()
            .map(|&c| {
                let pts: Vec<(usize, f64)> = self
                    .rows
                    .iter()
                    .filter(|r| r.codec == c)
                    .filter_map(|r| match r.block {
                        Block::Bytes(n) => Some((n, r.mb_per_s)),
                        Block::Packet => None,
                    })
                    .collect();
                Knee {
                    codec: c,
                    knee: knee(&pts),
                    best: pts.iter().map(|p| p.1).fold(0.0f64, f64::max),
                    per_packet: self
                        .rows
                        .iter()
                        .find(|r| r.codec == c && r.block == Block::Packet)
                        .map(|r| r.mb_per_s),
                }
            })
            .collect()
    }
}

/// The report of a bench stopped by a signal.
fn interrupted() -> Report {
    Report {
        problems: vec!["bench compress: interrupted".to_string()],
        ..Report::default()
    }
}

/// `kansoku bench compress`: measures every sample, then prints the tables
/// (or JSON) to `out`.
pub fn run(args: &BenchCompressArgs, stop: &AtomicBool, out: &mut dyn Write) -> Result<Report> {
    let codecs = args
        .codecs
        .iter()
        .map(|s| parse_codec(s))
        .collect::<Result<Vec<Codec>>>()?;
    if !(args.min_seconds.is_finite() && (0.0..=60.0).contains(&args.min_seconds)) {
        return Err(Error::usage(format!(
            "--min-seconds {} is out of range (expected 0 to 60)",
            args.min_seconds
        )));
    }
    let bytes = (args.mb * 1_000_000) as usize;
    let runs = args.runs as usize;
    let mut blocks: Vec<Block> = args
        .block_sizes
        .iter()
        .map(|&k| Block::Bytes(k as usize * 1024))
        .collect();
    blocks.sort_by_key(|b| match b {
        Block::Bytes(n) => *n,
        Block::Packet => 0,
    });
    blocks.dedup();

    let mut samples = Vec::new();
    for (len, random) in [(64, false), (1518, false), (64, true), (1518, true)] {
        samples.push(Traffic::synthetic(len, random, bytes)?);
    }
    let mut report = Report::default();
    if let Some(path) = &args.read {
        let (t, r) = Traffic::from_trace(path, bytes, stop)?;
        if r.interrupted.is_some() {
            return Ok(interrupted());
        }
        if t.records.is_empty() {
            return Err(Error::file(
                path,
                "no packets (expected a trace with packets)",
            ));
        }
        // A cut file still gives a sample; the report says where it was cut.
        report = r;
        samples.push(t);
    }

    let mut results = Vec::new();
    for t in &samples {
        let err = |e: trace::Error| Error::input(format!("{}: {e}", t.name));
        let memcpy = measure(
            t,
            Codec::None,
            Block::Bytes(32 * 1024),
            runs,
            args.min_seconds,
        )
        .map_err(err)?
        .mb_per_s;
        let mut rows = Vec::new();
        for &c in &codecs {
            // Per packet is the paper's baseline for LZO and zlib; lz4 and
            // gzip stand in for them.
            let per_packet = matches!(c, Codec::Lz4 | Codec::Gzip);
            for &b in per_packet.then_some(Block::Packet).iter().chain(&blocks) {
                if stop.load(Ordering::Relaxed) {
                    return Ok(interrupted());
                }
                rows.push(measure(t, c, b, runs, args.min_seconds).map_err(err)?);
            }
        }
        results.push(TrafficResult {
            name: t.name.clone(),
            bytes: t.stream.len(),
            packets: t.records.len(),
            memcpy,
            rows,
        });
    }
    if args.json {
        print_json(out, args, &codecs, &results).map_err(Error::stdout)?;
    } else {
        print_tables(out, args, &codecs, &results).map_err(Error::stdout)?;
    }
    Ok(report)
}

fn print_json(
    out: &mut dyn Write,
    args: &BenchCompressArgs,
    codecs: &[Codec],
    results: &[TrafficResult],
) -> io::Result<()> {
    let traffic: Vec<Value> = results
        .iter()
        .map(|t| {
            let rows: Vec<Value> = t
                .rows
                .iter()
                .map(|r| {
                    json!({
                        "codec": r.codec.name(),
                        "block": r.block.label(),
                        "block_bytes": match r.block { Block::Bytes(n) => Some(n), Block::Packet => None },
                        "mb_per_s": r.mb_per_s,
                        "vs_memcpy": r.mb_per_s / t.memcpy,
                        "ratio": r.ratio,
                        "blocks": r.blocks,
                        "raw_blocks": r.raw_blocks,
                        "raw_block_share": (r.codec == Codec::Lz4 && r.blocks > 0)
                            .then(|| r.raw_blocks as f64 / r.blocks as f64),
                    })
                })
                .collect();
            let knees: Vec<Value> = t
                .knees(codecs)
                .iter()
                .map(|k| {
                    json!({
                        "codec": k.codec.name(),
                        "knee_block_bytes": k.knee,
                        "best_mb_per_s": k.best,
                        "per_packet_mb_per_s": k.per_packet,
                    })
                })
                .collect();
            json!({
                "name": t.name,
                "bytes": t.bytes,
                "packets": t.packets,
                "memcpy_mb_per_s": t.memcpy,
                "rows": rows,
                "knees": knees,
            })
        })
        .collect();
    let v = json!({
        "mb": args.mb,
        "runs": args.runs,
        "trace": args.read.as_ref().map(|p| display_path(p)),
        "traffic": traffic,
    });
    writeln!(out, "{v}")
}

fn print_tables(
    out: &mut dyn Write,
    args: &BenchCompressArgs,
    codecs: &[Codec],
    results: &[TrafficResult],
) -> io::Result<()> {
    writeln!(
        out,
        "# kansoku bench compress: {} MB of pcap per traffic kind, median of {} run(s) of >= {} s;",
        args.mb, args.runs, args.min_seconds
    )?;
    writeln!(
        out,
        "# MB/s of uncompressed input (MB = 10^6 bytes), one core, default levels (zstd 1, gzip 1);"
    )?;
    writeln!(
        out,
        "# ratio = output/input. Blocks above 64 KiB are stored as 64 KiB LZ4 frame blocks (the frame's largest)."
    )?;
    for t in results {
        writeln!(out)?;
        writeln!(
            out,
            "## {}: {} bytes, {} packets; memcpy baseline {:.1} MB/s",
            t.name, t.bytes, t.packets, t.memcpy
        )?;
        writeln!(out)?;
        table::header(
            out,
            &[
                ("codec", Align::Left),
                ("block", Align::Right),
                ("MB/s", Align::Right),
                ("vs memcpy", Align::Right),
                ("ratio", Align::Right),
                ("raw blocks", Align::Right),
            ],
        )?;
        for r in &t.rows {
            let raw = if r.codec == Codec::Lz4 && r.blocks > 0 {
                format!("{:.1}%", 100.0 * r.raw_blocks as f64 / r.blocks as f64)
            } else {
                "-".to_string()
            };
            table::row(
                out,
                &[
                    r.codec.name().to_string(),
                    r.block.label(),
                    format!("{:.1}", r.mb_per_s),
                    format!("{:.3}", r.mb_per_s / t.memcpy),
                    format!("{:.3}", r.ratio),
                    raw,
                ],
            )?;
        }
    }
    writeln!(out)?;
    writeln!(
        out,
        "# Shimizu et al. 2006, Fig. 4: the block size from which throughput stops rising (first within 5% of the best),"
    )?;
    writeln!(out, "# and how much slower per-packet compression is.")?;
    writeln!(out)?;
    table::header(
        out,
        &[
            ("traffic", Align::Left),
            ("codec", Align::Left),
            ("knee", Align::Right),
            ("best MB/s", Align::Right),
            ("per-packet MB/s", Align::Right),
            ("best / per-packet", Align::Right),
        ],
    )?;
    for t in results {
        for k in t.knees(codecs) {
            let (p, x) = match k.per_packet {
                Some(p) => (format!("{p:.1}"), format!("{:.1}x", k.best / p)),
                None => ("-".to_string(), "-".to_string()),
            };
            table::row(
                out,
                &[
                    t.name.clone(),
                    k.codec.name().to_string(),
                    k.knee.map_or("-".to_string(), |n| Block::Bytes(n).label()),
                    format!("{:.1}", k.best),
                    p,
                    x,
                ],
            )?;
        }
    }
    Ok(())
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

    #[test]
    fn a_trace_sample_holds_the_files_packets_up_to_the_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.pcap");
        let src = Traffic::synthetic(200, false, 20_000).unwrap();
        std::fs::write(&path, &src.stream).unwrap();
        let never = AtomicBool::new(false);
        let (all, r) = Traffic::from_trace(&path, 1 << 20, &never).unwrap();
        assert_eq!(all.stream, src.stream);
        assert_eq!(r.exit_code(), pipeline::ExitCode::Ok);
        let (part, _) = Traffic::from_trace(&path, 5_000, &never).unwrap();
        assert!(part.stream.len() >= 5_000 && part.stream.len() < 5_000 + 216);
        assert_eq!(part.records, src.records[..part.records.len()]);
        // A file cut inside a record: the sample holds the whole records,
        // and the report says where the file was cut.
        std::fs::write(&path, &src.stream[..src.stream.len() - 10]).unwrap();
        let (cut, r) = Traffic::from_trace(&path, 1 << 20, &never).unwrap();
        assert_eq!(cut.records.len(), src.records.len() - 1);
        assert_eq!(r.exit_code(), pipeline::ExitCode::Problems);
    }

    fn args(codecs: &str, json: bool) -> BenchCompressArgs {
        BenchCompressArgs {
            read: None,
            codecs: codecs.split(',').map(str::to_string).collect(),
            block_sizes: vec![8, 64],
            mb: 1,
            runs: 1,
            min_seconds: 0.0,
            json,
        }
    }

    #[test]
    fn prints_tables_with_the_memcpy_baseline() {
        let mut out = Vec::new();
        let never = AtomicBool::new(false);
        run(&args("lz4", false), &never, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("memcpy baseline"), "{text}");
        assert!(text.contains("| codec | block | MB/s | vs memcpy | ratio | raw blocks |\n|---|---:|---:|---:|---:|---:|\n| lz4 | packet |"), "{text}");
        assert!(text.contains("| traffic | codec | knee | best MB/s | per-packet MB/s | best / per-packet |\n|---|---|---:|---:|---:|---:|\n"), "{text}");
        assert!(text.contains("| fixed-64 | lz4 |"), "{text}");
    }

    #[test]
    fn json_has_rows_and_knees_per_sample() {
        let mut out = Vec::new();
        let never = AtomicBool::new(false);
        run(&args("zstd,lz4", true), &never, &mut out).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        let t = &v["traffic"][0];
        assert_eq!(t["name"], "fixed-64");
        // zstd: two sizes; lz4: per packet and two sizes.
        assert_eq!(t["rows"].as_array().unwrap().len(), 5);
        assert_eq!(t["knees"].as_array().unwrap().len(), 2);
        assert!(t["rows"][0]["raw_block_share"].is_null());
        assert!(t["rows"][2]["raw_block_share"].is_number());
    }

    #[test]
    fn bad_codecs_are_usage_errors_and_a_stop_a_problem() {
        let never = AtomicBool::new(false);
        let e = run(&args("lzo", false), &never, &mut Vec::new()).unwrap_err();
        assert_eq!(e.kind, pipeline::ErrorKind::Usage);
        assert!(e.message.contains("unknown codec \"lzo\""), "{e}");
        let mut out = Vec::new();
        let r = run(&args("lz4", false), &AtomicBool::new(true), &mut out).unwrap();
        assert_eq!(r.exit_code(), pipeline::ExitCode::Problems);
        assert!(out.is_empty());
    }
}
