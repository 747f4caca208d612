//! `kansoku bench disk` and `kansoku bench compress`: argument checks and
//! printing around the measurements in [`crate::benchkit`].
//!
//! Together they give both sides of paper 000's condition for compressed
//! capture, `T_c > T_d / (1 - r)`: the disk's `T_d` (measured the way paper
//! 003 measured its capture disk) and each codec's `T_c` and `r` per block
//! size and traffic kind. Every table carries a baseline from the same run:
//! memcpy of the same bytes.

use std::io::{self, Write};

use serde_json::{json, Value};
use trace::Codec;

use crate::benchkit::compress::{self, Block, CompressResult, Traffic};
use crate::benchkit::compressor_needed;
use crate::benchkit::disk::{self, DiskConfig};
use crate::cli::{BenchCompressArgs, BenchDiskArgs};
use crate::error::{display_path, CliError, CliResult, EXIT_PROBLEMS};
use crate::{input, signals};

/// Compression ratios for which the needed compressor speed is printed.
const PAPER_RATIOS: [f64; 3] = [0.2, 0.5, 0.9];

/// `kansoku bench disk`.
pub fn disk(args: &BenchDiskArgs) -> CliResult<i32> {
    let meta = std::fs::metadata(&args.dir).map_err(|e| CliError::file(&args.dir, e))?;
    if !meta.is_dir() {
        return Err(CliError::file(
            &args.dir,
            "not a directory (expected --dir DIR)",
        ));
    }
    let cfg = DiskConfig {
        dir: args.dir.clone(),
        size: usize::try_from(args.size << 20)
            .map_err(|_| CliError::input(format!("--size {} MiB is too large here", args.size)))?,
        runs: args.runs as usize,
    };
    let rep = disk::run(&cfg, signals::stop_flag()).map_err(|e| CliError::file(&args.dir, e))?;
    let needed = |td: f64| -> Value {
        let mut m = serde_json::Map::new();
        for r in PAPER_RATIOS {
            m.insert(format!("{r}"), json!(compressor_needed(td, r)));
        }
        Value::Object(m)
    };
    let mut out = io::stdout().lock();
    if args.json {
        let modes: Vec<Value> = rep
            .modes
            .iter()
            .map(|m| {
                json!({
                    "mode": m.mode.name(),
                    "mb_per_s": m.unsupported.is_none().then_some(m.median),
                    "runs_mb_per_s": m.runs,
                    "vs_memcpy": m.unsupported.is_none().then(|| m.median / rep.memcpy),
                    "unsupported": m.unsupported,
                    "tc_needed_mb_per_s": m.unsupported.is_none().then(|| needed(m.median)),
                })
            })
            .collect();
        let v = json!({
            "dir": display_path(&args.dir),
            "size_mib": args.size,
            "runs": args.runs,
            "mb": "10^6 bytes",
            "memcpy_mb_per_s": rep.memcpy,
            "modes": modes,
        });
        writeln!(out, "{v}")?;
        return Ok(0);
    }
    writeln!(
        out,
        "# kansoku bench disk: {}, {} MiB per run, median of {} run(s); MB = 10^6 bytes",
        display_path(&args.dir),
        args.size,
        args.runs
    )?;
    writeln!(out)?;
    writeln!(out, "| mode | MB/s | runs (MB/s) | vs memcpy |")?;
    writeln!(out, "|---|---:|---|---:|")?;
    writeln!(
        out,
        "| memcpy, 1 MiB at a time (baseline) | {:.1} | | 1.000 |",
        rep.memcpy
    )?;
    for m in &rep.modes {
        match &m.unsupported {
            Some(why) => writeln!(out, "| {} | - | {why} | - |", m.mode.name())?,
            None => {
                let runs: Vec<String> = m.runs.iter().map(|r| format!("{r:.1}")).collect();
                writeln!(
                    out,
                    "| {} | {:.1} | {} | {:.3} |",
                    m.mode.name(),
                    m.median,
                    runs.join(" "),
                    m.median / rep.memcpy
                )?;
            }
        }
    }
    writeln!(out)?;
    writeln!(
        out,
        "# Paper 000 eq. (2): compressing before writing pays when T_c > T_d / (1 - r);"
    )?;
    writeln!(
        out,
        "# T_c needed for each measured T_d (the +fsync modes are the sustained disk rate)."
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "| T_d from | T_d MB/s | T_c at r=0.2 | T_c at r=0.5 | T_c at r=0.9 |"
    )?;
    writeln!(out, "|---|---:|---:|---:|---:|")?;
    for m in rep.modes.iter().filter(|m| m.unsupported.is_none()) {
        let tc: Vec<String> = PAPER_RATIOS
            .iter()
            .map(|&r| format!("{:.1}", compressor_needed(m.median, r).unwrap_or(f64::NAN)))
            .collect();
        writeln!(
            out,
            "| {} | {:.1} | {} |",
            m.mode.name(),
            m.median,
            tc.join(" | ")
        )?;
    }
    Ok(0)
}

fn parse_codec(s: &str) -> CliResult<Codec> {
    match s.trim() {
        "lz4" => Ok(Codec::Lz4),
        "zstd" => Ok(Codec::Zstd),
        "gzip" => Ok(Codec::Gzip),
        other => Err(CliError::input(format!(
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

impl TrafficResult {
    /// Per codec: the knee block size, the best throughput over block sizes,
    /// and the per-packet throughput when measured.
    fn knees(&self, codecs: &[Codec]) -> Vec<(Codec, Option<usize>, f64, Option<f64>)> {
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
                let best = pts.iter().map(|p| p.1).fold(0.0f64, f64::max);
                let pkt = self
                    .rows
                    .iter()
                    .find(|r| r.codec == c && r.block == Block::Packet)
                    .map(|r| r.mb_per_s);
                (c, compress::knee(&pts), best, pkt)
            })
            .collect()
    }
}

/// `kansoku bench compress`.
pub fn compress(args: &BenchCompressArgs) -> CliResult<i32> {
    let codecs = args
        .codecs
        .iter()
        .map(|s| parse_codec(s))
        .collect::<CliResult<Vec<Codec>>>()?;
    if !(args.min_seconds.is_finite() && (0.0..=60.0).contains(&args.min_seconds)) {
        return Err(CliError::input(format!(
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
        samples.push(Traffic::synthetic(len, random, bytes).map_err(CliError::input)?);
    }
    if let Some(path) = &args.read {
        let (mut reader, _) = input::open(path, None, None)?;
        let t = Traffic::from_trace(&mut reader, bytes).map_err(|e| CliError::file(path, e))?;
        if t.records.is_empty() {
            return Err(CliError::file(
                path,
                "no packets (expected a trace with packets)",
            ));
        }
        samples.push(t);
    }

    let mut results = Vec::new();
    for t in &samples {
        let err = |e: trace::Error| CliError::input(format!("{}: {e}", t.name));
        let memcpy = compress::measure(
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
                if signals::stop_requested() {
                    return Err(CliError::Message {
                        message: "bench compress: interrupted".to_string(),
                        code: EXIT_PROBLEMS,
                    });
                }
                rows.push(compress::measure(t, c, b, runs, args.min_seconds).map_err(err)?);
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

    let mut out = io::stdout().lock();
    if args.json {
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
                    .knees(&codecs)
                    .iter()
                    .map(|(c, k, best, pkt)| {
                        json!({
                            "codec": c.name(),
                            "knee_block_bytes": k,
                            "best_mb_per_s": best,
                            "per_packet_mb_per_s": pkt,
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
        writeln!(out, "{v}")?;
        return Ok(0);
    }

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
    for t in &results {
        writeln!(out)?;
        writeln!(
            out,
            "## {}: {} bytes, {} packets; memcpy baseline {:.1} MB/s",
            t.name, t.bytes, t.packets, t.memcpy
        )?;
        writeln!(out)?;
        writeln!(
            out,
            "| codec | block | MB/s | vs memcpy | ratio | raw blocks |"
        )?;
        writeln!(out, "|---|---:|---:|---:|---:|---:|")?;
        for r in &t.rows {
            let raw = if r.codec == Codec::Lz4 && r.blocks > 0 {
                format!("{:.1}%", 100.0 * r.raw_blocks as f64 / r.blocks as f64)
            } else {
                "-".to_string()
            };
            writeln!(
                out,
                "| {} | {} | {:.1} | {:.3} | {:.3} | {raw} |",
                r.codec.name(),
                r.block.label(),
                r.mb_per_s,
                r.mb_per_s / t.memcpy,
                r.ratio
            )?;
        }
    }
    writeln!(out)?;
    writeln!(
        out,
        "# Paper 000 Fig. 4: the block size from which throughput stops rising (first within 5% of the best),"
    )?;
    writeln!(out, "# and how much slower per-packet compression is.")?;
    writeln!(out)?;
    writeln!(
        out,
        "| traffic | codec | knee | best MB/s | per-packet MB/s | best / per-packet |"
    )?;
    writeln!(out, "|---|---|---:|---:|---:|---:|")?;
    for t in &results {
        for (c, k, best, pkt) in t.knees(&codecs) {
            let k = k.map_or("-".to_string(), |n| Block::Bytes(n).label());
            let (p, x) = match pkt {
                Some(p) => (format!("{p:.1}"), format!("{:.1}x", best / p)),
                None => ("-".to_string(), "-".to_string()),
            };
            writeln!(
                out,
                "| {} | {} | {k} | {best:.1} | {p} | {x} |",
                t.name,
                c.name()
            )?;
        }
    }
    Ok(0)
}
