//! `reindex::rebuild` writes the index the writer wrote, byte for byte, for
//! every codec and format; a rebuilt index gives windowed reads that equal
//! full reads filtered by time, for any chunk size, after a cut, and for
//! files other tools compressed.

mod common;

use std::io::Write;
use std::path::Path;

use common::{read_to_end, write_file, xorshift, Pkt};
use proptest::prelude::*;
use trace::index::index_path;
use trace::reindex::rebuild;
use trace::window::open_window;
use trace::write::{OutputFormat, WriterConfig};
use trace::{Codec, LinkType, TraceReader};

const T0: u64 = 1_700_000_000_000_000_000;

fn packets(n: usize, seed: u64) -> Vec<Pkt> {
    let mut next = xorshift(seed);
    (0..n)
        .map(|i| {
            let len = 60 + (next() % 1455) as usize;
            let data = if next().is_multiple_of(2) {
                (0..len).map(|_| next() as u8).collect()
            } else {
                vec![(i % 251) as u8; len]
            };
            Pkt {
                link: LinkType::Ethernet,
                ts: T0 + i as u64 * 1_000_000,
                orig_len: len as u32,
                data,
            }
        })
        .collect()
}

/// A windowed read through the index equals the full read filtered by
/// time, the index is used, and a narrow window decodes less than all.
fn windows_agree(path: &Path, n: usize, what: &str) {
    let (full, _) = read_to_end(TraceReader::open(path).unwrap());
    for (a, b) in [(0.1, 0.12), (0.5, 0.9), (0.0, 1.0)] {
        let since = T0 + (a * n as f64) as u64 * 1_000_000;
        let until = T0 + (b * n as f64) as u64 * 1_000_000;
        let (r, ws) = open_window(path, Some(since), Some(until)).unwrap();
        assert!(
            ws.index_problem.is_none(),
            "{what}: rebuilt index refused: {ws:?}"
        );
        let (got, _) = read_to_end(r);
        let keep = |p: &&Pkt| p.ts >= since && p.ts <= until;
        let want: Vec<&Pkt> = full.iter().filter(keep).collect();
        let got: Vec<&Pkt> = got.iter().filter(keep).collect();
        assert!(got == want, "{what}: window {a}..{b}: {ws:?}");
    }
}

#[test]
fn the_writers_indexes_are_rebuilt_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let pkts = packets(3000, 7);
    for codec in [Codec::Lz4, Codec::Zstd, Codec::Gzip, Codec::None] {
        for format in [OutputFormat::Pcap, OutputFormat::Pcapng] {
            let path = dir.path().join("t");
            let cfg = WriterConfig {
                format,
                codec,
                nanos: true,
                ..WriterConfig::default()
            };
            write_file(&path, cfg, &pkts);
            let written = std::fs::read(index_path(&path)).unwrap();
            let keys = trace::keys::keys_path(&path);
            let written_keys = std::fs::read(&keys).unwrap();
            std::fs::remove_file(index_path(&path)).unwrap();
            std::fs::remove_file(&keys).unwrap();
            let r = rebuild(&path).unwrap();
            assert!(
                r.closed && r.truncation.is_none() && r.stopped.is_none(),
                "{r:?}"
            );
            assert_eq!(r.packets, 3000);
            let rebuilt = std::fs::read(index_path(&path)).unwrap();
            assert!(
                rebuilt == written,
                "{codec} {format}: {} bytes rebuilt, {} written",
                rebuilt.len(),
                written.len()
            );
            // The key index too: the same filters of the same chunks.
            assert!(
                std::fs::read(&keys).unwrap() == written_keys,
                "{codec} {format}: key index differs"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn a_rebuilt_index_reads_as_the_file_does(
        n in 1usize..2000,
        seed in any::<u64>(),
        codec in 0usize..4,
        pcapng in any::<bool>(),
        block_kib in 4usize..=64,
        cut in proptest::option::of(0.2f64..1.0),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let codec = [Codec::Lz4, Codec::Zstd, Codec::Gzip, Codec::None][codec];
        let format = if pcapng { OutputFormat::Pcapng } else { OutputFormat::Pcap };
        let path = dir.path().join("t");
        let cfg = WriterConfig {
            format,
            codec,
            nanos: true,
            block_size: block_kib * 1024,
            ..WriterConfig::default()
        };
        write_file(&path, cfg, &packets(n, seed));
        if let Some(f) = cut {
            let bytes = std::fs::read(&path).unwrap();
            std::fs::write(&path, &bytes[..(bytes.len() as f64 * f) as usize]).unwrap();
        }
        let what = format!("{codec} {format} n={n} block={block_kib}K cut={cut:?}");
        match rebuild(&path) {
            Ok(r) => {
                // A cut file is never taken for a closed one.
                if r.closed {
                    prop_assert!(cut.is_none() || read_to_end(TraceReader::open(&path).unwrap()).1.is_none(), "{what}: {r:?}");
                }
                windows_agree(&path, n, &what);
            }
            // A file cut inside its header has nothing to index.
            Err(e) => prop_assert!(cut.is_some(), "{what}: {e}"),
        }
    }
}

#[test]
fn other_tools_files_are_indexed_or_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let pkts = packets(3000, 11);
    let plain = dir.path().join("plain.pcap");
    let cfg = WriterConfig {
        format: OutputFormat::Pcap,
        codec: Codec::None,
        index: false,
        ..WriterConfig::default()
    };
    write_file(&plain, cfg, &pkts);
    let bytes = std::fs::read(&plain).unwrap();
    // zstd's and gzip's own streams, LZ4 frames of independent blocks.
    let zst = dir.path().join("z.pcap.zst");
    std::fs::write(&zst, zstd::encode_all(&bytes[..], 1).unwrap()).unwrap();
    let gz = dir.path().join("g.pcap.gz");
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(&bytes).unwrap();
    std::fs::write(&gz, e.finish().unwrap()).unwrap();
    for (name, mode) in [
        ("i.pcap.lz4", lz4_flex::frame::BlockMode::Independent),
        ("l.pcap.lz4", lz4_flex::frame::BlockMode::Linked),
    ] {
        let info = lz4_flex::frame::FrameInfo::new()
            .block_size(lz4_flex::frame::BlockSize::Max64KB)
            .block_mode(mode)
            .content_checksum(true);
        let mut e = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
        e.write_all(&bytes).unwrap();
        std::fs::write(dir.path().join(name), e.finish().unwrap()).unwrap();
    }
    for name in ["z.pcap.zst", "g.pcap.gz", "i.pcap.lz4"] {
        let path = dir.path().join(name);
        let r = rebuild(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(r.closed && r.packets == 3000, "{name}: {r:?}");
        windows_agree(&path, 3000, name);
        // The whole read through it checks out too.
        let (pkts_read, end) = read_to_end(trace::window::open_checked(&path).unwrap().0);
        assert!(
            end.is_none() && pkts_read == pkts_read_plain(&plain),
            "{name}: {end:?}"
        );
    }
    let err = rebuild(&dir.path().join("l.pcap.lz4"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("linked"), "{err}");
    assert!(!index_path(&dir.path().join("l.pcap.lz4")).exists());
}

fn pkts_read_plain(path: &Path) -> Vec<Pkt> {
    read_to_end(TraceReader::open(path).unwrap()).0
}
