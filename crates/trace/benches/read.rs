//! Reader throughput beside its baselines, measured in the same run:
//!
//! - plain pcap: `cat FILE > /dev/null` vs `TraceReader` over FILE (target: within 2x);
//! - LZ4 pcap:   `lz4 -d -c FILE.lz4 > /dev/null` vs `TraceReader` over FILE.lz4, for a file
//!   made by the lz4 CLI and for the same packets as kansoku writes them
//!   (target: within 1.5x).
//!
//! Two traces of about 200 MB (`KANSOKU_BENCH_MB` changes it) of 1518-byte
//! Ethernet frames, one with a fixed payload and one with random payloads,
//! are generated in a temporary directory. The LZ4 files are made by the
//! `lz4` CLI as kansoku's writer makes them (level 1, independent 64 KiB
//! blocks: `lz4 -1 -BI -B4`), or by lz4_flex when the CLI is missing. Every
//! figure is the median of 5 runs, with the files in the page cache.
//!
//! Run: `cargo bench -p trace --bench read`.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use trace::format::pcap;
use trace::write::{TraceWriter, WriterConfig};
use trace::{LinkType, Record, TraceReader};

const FRAME: usize = 1518;
const RUNS: usize = 5;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time(mut f: impl FnMut()) -> Duration {
    let mut runs = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let t = Instant::now();
        f();
        runs.push(t.elapsed());
    }
    median(runs)
}

/// Writes a pcap of `bytes` total size: Ethernet/IPv4/UDP headers, then a
/// payload that is either a fixed pattern or xorshift random bytes.
fn generate(path: &Path, bytes: usize, random: bool) {
    let mut w = BufWriter::with_capacity(1 << 20, File::create(path).unwrap());
    let mut out = Vec::with_capacity(1 << 20);
    pcap::emit_file_header(&mut out, LinkType::Ethernet, 65535, false);
    let mut frame = vec![0u8; FRAME];
    frame[12] = 0x08; // EtherType IPv4
    frame[14] = 0x45;
    frame[23] = 17; // UDP
    for (i, b) in frame[42..].iter_mut().enumerate() {
        *b = b"kansoku fixed payload "[i % 22];
    }
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut written = 0;
    let mut n: u64 = 0;
    while written < bytes {
        if random {
            for chunk in frame[42..].chunks_mut(8) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let le = x.to_le_bytes();
                chunk.copy_from_slice(&le[..chunk.len()]);
            }
        }
        pcap::emit_record(
            &mut out,
            1_700_000_000_000_000_000 + n * 12_000,
            false,
            FRAME as u32,
            &frame,
        );
        n += 1;
        written += FRAME + pcap::RECORD_HEADER_LEN;
        if out.len() > (1 << 20) - 2048 {
            w.write_all(&out).unwrap();
            out.clear();
        }
    }
    w.write_all(&out).unwrap();
    w.flush().unwrap();
}

fn compress_lz4(src: &Path, dst: &Path) -> &'static str {
    let cli = Command::new("lz4")
        .args(["-q", "-f", "-1", "-BI", "-B4"])
        .arg(src)
        .arg(dst)
        .status();
    if matches!(cli, Ok(s) if s.success()) {
        return "lz4 CLI -1 -BI -B4";
    }
    use lz4_flex::frame::{BlockMode, BlockSize, FrameEncoder, FrameInfo};
    let info = FrameInfo::new()
        .block_size(BlockSize::Max64KB)
        .block_mode(BlockMode::Independent);
    let mut e = FrameEncoder::with_frame_info(info, BufWriter::new(File::create(dst).unwrap()));
    std::io::copy(&mut File::open(src).unwrap(), &mut e).unwrap();
    e.finish().unwrap().flush().unwrap();
    "lz4_flex FrameEncoder (64 KiB independent blocks)"
}

/// Stores `src` as kansoku writes traces: one LZ4 frame of independent
/// 32 KiB blocks without a content checksum (the default `WriterConfig`).
fn write_kansoku_lz4(src: &Path, dst: &Path) {
    let mut r = TraceReader::open(src).unwrap();
    let cfg = WriterConfig {
        index: false,
        ..WriterConfig::default()
    };
    let mut w = TraceWriter::create(dst, cfg).unwrap();
    while let Some(rec) = r.next_record().unwrap() {
        w.write_record(&rec).unwrap();
    }
    w.finish().unwrap();
}

fn shell(cmd: &str, file: &Path) -> Duration {
    time(|| {
        let ok = Command::new("sh")
            .arg("-c")
            .arg(format!("{cmd} \"$0\" > /dev/null"))
            .arg(file)
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(ok, "{cmd} failed");
    })
}

fn read_all(file: &Path) -> (u64, u64) {
    let mut r = TraceReader::open(file).unwrap();
    let (mut pkts, mut bytes) = (0u64, 0u64);
    while let Some(rec) = r.next_record().unwrap() {
        if let Record::Packet(p) = rec {
            pkts += 1;
            bytes += p.data.len() as u64;
        }
    }
    assert!(r.truncation().is_none());
    (pkts, bytes)
}

fn row(what: &str, base_name: &str, base: Duration, ours: Duration, size: u64) {
    let mbps = |d: Duration| size as f64 / d.as_secs_f64() / 1e6;
    println!(
        "{what:<28} {base_name:<14} {:>8.1} ms ({:>6.0} MB/s) | kansoku {:>8.1} ms ({:>6.0} MB/s) | ratio {:.2}x",
        base.as_secs_f64() * 1e3,
        mbps(base),
        ours.as_secs_f64() * 1e3,
        mbps(ours),
        ours.as_secs_f64() / base.as_secs_f64()
    );
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not supported.
    let mb: usize = std::env::var("KANSOKU_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let dir = tempfile::tempdir().unwrap();
    for (name, random) in [("fixed payload", false), ("random payload", true)] {
        let plain = dir
            .path()
            .join(format!("{}.pcap", if random { "random" } else { "fixed" }));
        generate(&plain, mb << 20, random);
        let lz = plain.with_extension("pcap.lz4");
        let how = compress_lz4(&plain, &lz);
        let size = std::fs::metadata(&plain).unwrap().len();
        let lz_size = std::fs::metadata(&lz).unwrap().len();
        let (pkts, bytes) = read_all(&plain);
        assert_eq!(read_all(&lz), (pkts, bytes));
        println!(
            "{name}: {pkts} packets, {bytes} captured bytes, pcap {:.1} MB, lz4 {:.1} MB ({how})",
            size as f64 / 1e6,
            lz_size as f64 / 1e6
        );
        let cat = shell("cat", &plain);
        let ours = time(|| {
            std::hint::black_box(read_all(&plain));
        });
        row(&format!("{name}, plain pcap"), "cat", cat, ours, size);
        let lz4d = shell("lz4 -d -c", &lz);
        let ours = time(|| {
            std::hint::black_box(read_all(&lz));
        });
        row(&format!("{name}, pcap.lz4"), "lz4 -d -c", lz4d, ours, size);
        // The same packets as kansoku itself stores them (no content
        // checksum for either side to verify).
        let klz = plain.with_extension("kansoku.pcap.lz4");
        write_kansoku_lz4(&plain, &klz);
        assert_eq!(read_all(&klz), (pkts, bytes));
        let lz4d = shell("lz4 -d -c", &klz);
        let ours = time(|| {
            std::hint::black_box(read_all(&klz));
        });
        row(
            &format!("{name}, kansoku .lz4"),
            "lz4 -d -c",
            lz4d,
            ours,
            size,
        );
        std::fs::remove_file(&plain).unwrap();
        std::fs::remove_file(&lz).unwrap();
        std::fs::remove_file(&klz).unwrap();
    }
}
