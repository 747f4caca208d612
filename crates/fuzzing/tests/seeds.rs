//! The seed corpora of the `index` and `window` targets (fuzz/corpus/index,
//! fuzz/corpus/window), made from real traces that kansoku's writer writes
//! with their indexes: every codec, pcap and pcapng, stream checksums on
//! and off, the index intact, torn (a crash while appending, so the read
//! goes on past it), converted to version 1 (whose entries carry no
//! checksums, so the fuzzer can change them freely), or missing.
//! `KANSOKU_WRITE_CORPUS=1` writes them anew.

use std::path::{Path, PathBuf};

use trace::index::{index_path, ENTRY_LEN, ENTRY_LEN_V1, HEADER_LEN};
use trace::window::open_window;
use trace::write::{OutputFormat, WriterConfig};
use trace::{Codec, LinkType, Record, TraceWriter};

const T0: u64 = 1_700_000_000_000_000_000;

/// A trace and its index as kansoku writes them.
struct Written {
    trace: Vec<u8>,
    index: Vec<u8>,
}

/// `n` small UDP-over-IPv4 frames (DNS-sized), 1 ms apart, written with 4 KiB chunks.
fn write(codec: Codec, format: OutputFormat, sums: bool, n: u32) -> Written {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t");
    let cfg = WriterConfig {
        format,
        codec,
        block_size: trace::write::MIN_BLOCK_SIZE,
        stream_checksums: sums,
        ..WriterConfig::default()
    };
    let mut w = TraceWriter::create(&path, cfg).unwrap();
    for i in 0..n {
        let payload = 18 + (i % 3) as usize;
        let mut f = vec![0u8; 42 + payload];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[16..18].copy_from_slice(&((28 + payload) as u16).to_be_bytes());
        f[22] = 64;
        f[23] = 17;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 0, 0, 2]);
        f[34..36].copy_from_slice(&(4000 + (i % 5) as u16).to_be_bytes());
        f[36..38].copy_from_slice(&53u16.to_be_bytes());
        f[38..40].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
        f[42..46].copy_from_slice(&i.to_be_bytes());
        f[46..].fill(b'a' + (i % 26) as u8);
        let ts = T0 + u64::from(i) * 1_000_000;
        w.write_packet(LinkType::Ethernet, ts, f.len() as u32, &f)
            .unwrap();
    }
    w.finish().unwrap();
    Written {
        trace: std::fs::read(&path).unwrap(),
        index: std::fs::read(index_path(&path)).unwrap(),
    }
}

/// A version 2 index as version 1: the entries without their checksums.
fn to_v1(index: &[u8]) -> Vec<u8> {
    let mut v = index[..HEADER_LEN].to_vec();
    v[4..6].copy_from_slice(&1u16.to_le_bytes());
    v[8..12].copy_from_slice(&(ENTRY_LEN_V1 as u32).to_le_bytes());
    for e in index[HEADER_LEN..].chunks_exact(ENTRY_LEN) {
        v.extend_from_slice(&e[..ENTRY_LEN_V1]);
    }
    v
}

/// Seeds by name.
type Seeds = Vec<(&'static str, Vec<u8>)>;

/// The `index` target's seeds and the `window` target's.
fn seeds() -> (Seeds, Seeds) {
    let lz4 = write(Codec::Lz4, OutputFormat::Pcap, false, 200);
    let zstd = write(Codec::Zstd, OutputFormat::Pcapng, false, 200);
    let gzip = write(Codec::Gzip, OutputFormat::Pcap, false, 200);
    let plain = write(Codec::None, OutputFormat::Pcap, false, 70);
    let sums = write(Codec::Lz4, OutputFormat::Pcapng, true, 150);
    let zsums = write(Codec::Zstd, OutputFormat::Pcap, true, 150);
    // Cut after two entries and inside the third: the index lags the file.
    let torn = &lz4.index[..HEADER_LEN + 2 * ENTRY_LEN + 23];
    let input = fuzzing::window_input;
    let window = vec![
        (
            "lz4-pcap-middle",
            input(Some(&lz4.index), 80, 170, &lz4.trace),
        ),
        (
            "zstd-pcapng-all",
            input(Some(&zstd.index), 255, 255, &zstd.trace),
        ),
        (
            "gzip-pcap-late",
            input(Some(&gzip.index), 200, 255, &gzip.trace),
        ),
        (
            "none-pcap-early",
            input(Some(&plain.index), 255, 60, &plain.trace),
        ),
        (
            "lz4-pcapng-checksums",
            input(Some(&sums.index), 100, 140, &sums.trace),
        ),
        (
            "zstd-pcap-checksums",
            input(Some(&zsums.index), 30, 90, &zsums.trace),
        ),
        ("lz4-pcap-index-torn", input(Some(torn), 0, 100, &lz4.trace)),
        (
            "lz4-pcap-index-v1",
            input(Some(&to_v1(&lz4.index)), 120, 254, &lz4.trace),
        ),
        (
            "zstd-pcapng-index-v1",
            input(Some(&to_v1(&zstd.index)), 90, 130, &zstd.trace),
        ),
        ("gzip-pcap-no-index", input(None, 255, 255, &gzip.trace)),
    ];
    let index = vec![
        ("lz4-pcap", lz4.index.clone()),
        ("zstd-pcapng", zstd.index.clone()),
        ("lz4-pcapng-checksums", sums.index.clone()),
        ("lz4-pcap-v1", to_v1(&lz4.index)),
        ("lz4-pcap-torn", torn.to_vec()),
    ];
    (index, window)
}

fn corpus(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

#[test]
fn the_index_and_window_seeds_come_from_real_traces() {
    let (index, window) = seeds();
    for (name, bytes) in &index {
        let ix = trace::index::parse_index(bytes, name).unwrap();
        assert!(ix.entries.len() >= 2, "{name}: {ix:?}");
        fuzzing::index(bytes);
    }
    // Each windowed seed reads packets, through its index where it has one.
    for (name, bytes) in &window {
        assert!(bytes.len() < 8 * 1024, "{name}: {} bytes", bytes.len());
        let n = u16::from_le_bytes([bytes[0], bytes[1]]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        let (ix, tr) = if n == fuzzing::NO_INDEX {
            (None, &bytes[4..])
        } else {
            let (i, t) = bytes[4..].split_at(usize::from(n));
            (Some(i), t)
        };
        std::fs::write(&path, tr).unwrap();
        if let Some(i) = ix {
            std::fs::write(index_path(&path), i).unwrap();
        }
        let (mut r, ws) = open_window(&path, Some(T0), None).unwrap();
        assert_eq!(ws.indexed, ix.is_some(), "{name}: {ws:?}");
        assert_eq!(ws.index_problem, None, "{name}");
        let mut packets = 0;
        while let Some(rec) = r.next_record().unwrap() {
            packets += usize::from(matches!(rec, Record::Packet(_)));
        }
        assert!(packets > 50, "{name}: {packets} packets");
        fuzzing::window(bytes);
    }
    if std::env::var_os("KANSOKU_WRITE_CORPUS").is_some() {
        for (target, seeds) in [("index", &index), ("window", &window)] {
            std::fs::create_dir_all(corpus(target)).unwrap();
            for (name, bytes) in seeds {
                std::fs::write(corpus(target).join(name), bytes).unwrap();
            }
        }
    }
}

/// The `split` target's seeds (fuzz/corpus/split): a plain pcap and its
/// index, read in runs of one chunk or of two, checked or not, intact, with
/// a byte changed in a run of either thread (the ordinary reader takes over
/// there and reports it) or in the first chunk (not split), or with a
/// record's length changed in a file read unchecked (the runs no longer end
/// on records); the same pcap without its index, intact and with the
/// record's length changed; and the same packets as pcapng without an index
/// (as dumpcap writes it), intact, with statistics blocks between packets
/// (passed over), and with a block's trailing length changed.
#[test]
fn the_split_seeds_come_from_a_real_trace() {
    let plain = write(Codec::None, OutputFormat::Pcap, false, 150);
    let ix = trace::index::parse_index(&plain.index, "seed").unwrap();
    assert!(ix.entries.len() >= 4, "{ix:?}");
    let flip = |chunk: usize| {
        let e = &ix.entries[chunk];
        let mut t = plain.trace.clone();
        t[(e.comp_offset + e.comp_len / 2) as usize] ^= 0x10;
        t
    };
    let third = &ix.entries[2];
    // The first record of the third chunk: its captured length, shorter.
    let mut bad_len = plain.trace.clone();
    bad_len[third.comp_offset as usize + 8] -= 4;
    let input = |run: u8, verify: bool, trace: &[u8]| {
        fuzzing::window_input(Some(&plain.index), run, u8::from(!verify), trace)
    };
    let unindexed = |run: u8, trace: &[u8]| fuzzing::window_input(None, run, 0, trace);
    let ng = write(Codec::None, OutputFormat::Pcapng, false, 150).trace;
    // The pcapng file's blocks' offsets, and the file with a statistics
    // block after every fifth, or with the tenth's trailing length changed.
    let mut at = vec![0];
    while let Some(&o) = at.last().filter(|&&o| o < ng.len()) {
        at.push(o + u32::from_le_bytes(ng[o + 4..o + 8].try_into().unwrap()) as usize);
    }
    let mut with_isb = ng[..at[2]].to_vec();
    for (k, w) in at[2..].windows(2).enumerate() {
        with_isb.extend_from_slice(&ng[w[0]..w[1]]);
        if k % 5 == 4 {
            let isb = trace::RawBlock {
                block_type: trace::format::pcapng::BT_ISB,
                body: &[0; 12],
                little_endian: true,
            };
            trace::format::pcapng::emit_raw_block(&mut with_isb, &isb).unwrap();
        }
    }
    let mut bad_trailer = ng.clone();
    bad_trailer[at[at.len() / 2] - 4] ^= 4;
    let split = vec![
        ("chunks-checked", input(0, true, &plain.trace)),
        ("pairs-unchecked", input(20, false, &plain.trace)),
        // Runs of one chunk each: run 2 is the reading thread's, run 3 the
        // helper's, run 0 the one read before the split begins.
        ("corrupt-chunk-checked", input(0, true, &flip(2))),
        ("corrupt-helper-chunk-checked", input(0, true, &flip(3))),
        ("corrupt-first-chunk-checked", input(0, true, &flip(0))),
        ("record-length-unchecked", input(0, false, &bad_len)),
        // Without the index: runs of 513 and 257 bytes found by their
        // records' headers, intact and with a record's length changed.
        ("unindexed", unindexed(2, &plain.trace)),
        ("unindexed-record-length", unindexed(1, &bad_len)),
        ("pcapng-unindexed", unindexed(2, &ng)),
        ("pcapng-statistics", unindexed(2, &with_isb)),
        ("pcapng-trailing-length", unindexed(2, &bad_trailer)),
    ];
    for (name, bytes) in &split {
        assert!(bytes.len() < 16 * 1024, "{name}: {} bytes", bytes.len());
        let want = match *name {
            // Not split: the ordinary reader from the start.
            "corrupt-first-chunk-checked" => None,
            "unindexed" | "pcapng-unindexed" | "pcapng-statistics" => Some(false),
            _ => Some(
                name.starts_with("corrupt") || name.contains("record") || name.contains("trailing"),
            ),
        };
        assert_eq!(fuzzing::split_read(bytes), want, "{name}");
    }
    if std::env::var_os("KANSOKU_WRITE_CORPUS").is_some() {
        std::fs::create_dir_all(corpus("split")).unwrap();
        for (name, bytes) in &split {
            std::fs::write(corpus("split").join(name), bytes).unwrap();
        }
    }
}
