//! Trace writing throughput against the `lz4` CLI, in the same run.
//!
//! For each traffic kind (fixed-payload 1518-byte frames, random 1518, random
//! 64) about 200 MB of pcap is built in memory and written to a temp file.
//! Then, at block sizes 16, 32 and 64 KiB, this prints the median of 5 runs,
//! in MB/s of uncompressed input, of:
//!
//! - `lz4 -1 -B<bytes> -BI -c INPUT > /dev/null` (the C reference; with and
//!   without its default content checksum),
//! - kansoku's `TraceWriter` (lz4) writing the same packets to `io::sink()`,
//! - the same writer with codec `none` (the floor: record copy only),
//! - the LZ4 frame encoder alone, with and without content checksum (the
//!   cost that decided to leave the checksum off),
//!
//! and once at 32 KiB, zstd and gzip at their default level 1 and at 3/6.
//! Run: `cargo bench -p trace --bench write` (set `KANSOKU_BENCH_MB` to
//! change the size).

use std::io::{self, Write};
use std::process::{Command, Stdio};
use std::time::Instant;

use trace::compress::lz4::Lz4FrameEncoder;
use trace::format::pcap;
use trace::write::{TraceWriter, WriterConfig};
use trace::{Codec, LinkType};

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn fill(&mut self, b: &mut [u8]) {
        for c in b.chunks_mut(8) {
            let v = self.next().to_le_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
    }
}

/// An Ethernet/IPv4/UDP frame of `len` bytes; flows and IP ids vary per
/// packet, the payload is a fixed byte or random.
fn frame(rng: &mut XorShift, n: u64, len: usize, random: bool, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&[0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00]);
    let ip_len = (len - 14) as u16;
    out.extend_from_slice(&[0x45, 0]);
    out.extend_from_slice(&ip_len.to_be_bytes());
    out.extend_from_slice(&(n as u16).to_be_bytes());
    out.extend_from_slice(&[0x40, 0, 64, 17, 0, 0, 10, 0, (n >> 8) as u8, n as u8]);
    out.extend_from_slice(&[192, 168, 1, (n % 251) as u8]);
    out.extend_from_slice(&((1024 + n % 4096) as u16).to_be_bytes());
    out.extend_from_slice(&53u16.to_be_bytes());
    out.extend_from_slice(&(ip_len - 20).to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    let start = out.len();
    out.resize(len, 0x41);
    if random {
        rng.fill(&mut out[start..]);
    }
}

/// A plain nanosecond pcap of about `bytes` bytes.
fn make_pcap(bytes: usize, len: usize, random: bool) -> Vec<u8> {
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let mut out = Vec::with_capacity(bytes + 4096);
    pcap::emit_file_header(&mut out, LinkType::Ethernet, 262_144, true);
    let mut f = Vec::new();
    let mut n = 0u64;
    while out.len() < bytes {
        frame(&mut rng, n, len, random, &mut f);
        pcap::emit_record(
            &mut out,
            1_700_000_000_000_000_000 + n * 1_234,
            true,
            len as u32,
            &f,
        );
        n += 1;
    }
    out
}

/// Walks the records of a plain little-endian pcap made by `make_pcap`.
fn for_each_packet(p: &[u8], mut f: impl FnMut(u64, u32, &[u8])) {
    let mut pos = pcap::FILE_HEADER_LEN;
    while pos + pcap::RECORD_HEADER_LEN <= p.len() {
        let h = &p[pos..pos + 16];
        let u = |o: usize| u32::from_le_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
        let ts = u64::from(u(0)) * 1_000_000_000 + u64::from(u(4));
        let cap = u(8) as usize;
        let data = &p[pos + 16..pos + 16 + cap];
        f(ts, u(12), data);
        pos += 16 + cap;
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Median MB/s of `input_len` bytes over 5 runs of `f`.
fn rate(input_len: usize, mut f: impl FnMut()) -> f64 {
    let runs = (0..5)
        .map(|_| {
            let t = Instant::now();
            f();
            input_len as f64 / 1e6 / t.elapsed().as_secs_f64()
        })
        .collect();
    median(runs)
}

fn write_all(p: &[u8], cfg: &WriterConfig) -> (u64, u64, u64) {
    let mut w = TraceWriter::new(io::sink(), cfg.clone()).expect("writer");
    for_each_packet(p, |ts, orig, data| {
        w.write_packet(LinkType::Ethernet, ts, orig, data)
            .expect("write");
    });
    let s = w.finish().expect("finish");
    (s.bytes_out, s.raw_blocks, s.blocks)
}

fn lz4_cli(input: &std::path::Path, block: usize, crc: bool) -> u64 {
    let mut c = Command::new("lz4");
    c.arg("-1").arg(format!("-B{block}")).arg("-BI").arg("-c");
    if !crc {
        c.arg("--no-frame-crc");
    }
    let out = c
        .arg(input)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("lz4 CLI");
    assert!(out.success(), "lz4 failed");
    0
}

fn lz4_cli_size(input: &std::path::Path, block: usize) -> u64 {
    let out = Command::new("lz4")
        .arg("-1")
        .arg(format!("-B{block}"))
        .arg("-BI")
        .arg("--no-frame-crc")
        .arg("-c")
        .arg(input)
        .stderr(Stdio::null())
        .output()
        .expect("lz4 CLI");
    out.stdout.len() as u64
}

fn main() {
    let mb: usize = std::env::var("KANSOKU_BENCH_MB")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let have_cli = Command::new("lz4").arg("-V").output().is_ok();
    let dir = tempfile::tempdir().expect("tempdir");
    println!(
        "trace write bench: {mb} MB of pcap per kind, MB/s of uncompressed input, median of 5"
    );
    for (name, len, random) in [
        ("fixed-1518", 1518usize, false),
        ("random-1518", 1518, true),
        ("random-64", 64, true),
    ] {
        let p = make_pcap(mb * 1_000_000, len, random);
        let input = dir.path().join(format!("{name}.pcap"));
        std::fs::write(&input, &p).expect("write input");
        // The floor: copying the bytes once, 64 KiB at a time, into a
        // reused buffer written to io::sink().
        let mut buf = Vec::with_capacity(64 * 1024);
        let mut sink = io::sink();
        let copy = rate(p.len(), || {
            for c in p.chunks(64 * 1024) {
                buf.clear();
                buf.extend_from_slice(c);
                sink.write_all(std::hint::black_box(&buf)).expect("sink");
            }
        });
        println!(
            "\n{name}: {} bytes; raw copy to io::sink {copy:.0} MB/s",
            p.len()
        );
        println!(
            "  block   lz4-CLI  CLI-nocrc   kansoku  ratio(k/CLI-nocrc)  none-writer  enc-only  enc+xxh32  size-k/plain  size-CLI/plain  raw-blocks"
        );
        for block in [16 * 1024, 32 * 1024, 64 * 1024] {
            let (cli, cli_nocrc, cli_size) = if have_cli {
                (
                    rate(p.len(), || {
                        lz4_cli(&input, block, true);
                    }),
                    rate(p.len(), || {
                        lz4_cli(&input, block, false);
                    }),
                    lz4_cli_size(&input, block),
                )
            } else {
                (f64::NAN, f64::NAN, 0)
            };
            let cfg = WriterConfig {
                block_size: block,
                nanos: true,
                ..WriterConfig::default()
            };
            let mut size = (0, 0, 0);
            let k = rate(p.len(), || size = write_all(&p, &cfg));
            let none_cfg = WriterConfig {
                codec: Codec::None,
                ..cfg.clone()
            };
            let none = rate(p.len(), || {
                write_all(&p, &none_cfg);
            });
            let enc = |checksum: bool| {
                rate(p.len(), || {
                    let mut e = Lz4FrameEncoder::new(checksum, true);
                    let mut out = Vec::with_capacity(block * 2);
                    e.begin(&mut out);
                    for c in p.chunks(block) {
                        out.clear();
                        e.encode_chunk(c, &mut out);
                    }
                    e.finish(&mut out);
                    std::hint::black_box(&out);
                })
            };
            let (enc_plain, enc_sum) = (enc(false), enc(true));
            println!(
                "  {:>3}K  {cli:>8.0}  {cli_nocrc:>9.0}  {k:>8.0}  {:>18.2}  {none:>11.0}  {enc_plain:>8.0}  {enc_sum:>9.0}  {:>12.4}  {:>14.4}  {}/{}",
                block / 1024,
                k / cli_nocrc,
                size.0 as f64 / p.len() as f64,
                cli_size as f64 / p.len() as f64,
                size.1,
                size.2,
            );
        }
        for (codec, level) in [
            (Codec::Zstd, 1),
            (Codec::Zstd, 3),
            (Codec::Gzip, 1),
            (Codec::Gzip, 6),
        ] {
            let cfg = WriterConfig {
                codec,
                level: Some(level),
                nanos: true,
                ..WriterConfig::default()
            };
            let mut size = (0, 0, 0);
            let r = rate(p.len(), || size = write_all(&p, &cfg));
            println!(
                "  32K {codec} level {level}: {r:.0} MB/s, size {:.4} of plain",
                size.0 as f64 / p.len() as f64
            );
        }
    }
}
