//! The trace writer end to end: every codec and format read back by
//! `TraceReader`, the LZ4 frame parsed on its own, crash truncation,
//! windowed reads, rotation, and stock tshark reading the files.

mod common;

use std::path::{Path, PathBuf};

use common::{have_tshark, read_packets, tshark_frame_lens, write_file, Pkt};
use trace::compress::lz4::RAW_FLAG;
use trace::index::{index_path, read_index};
use trace::rotate::{RotateConfig, Rotated, RotatingWriter};
use trace::window::open_window;
use trace::write::{OutputFormat, TraceWriter, WriterConfig};
use trace::{
    Codec, Interface, LinkType, Packet, PacketKind, RawOption, Record, Section, TraceReader,
    TsResolution,
};

const CODECS: [Codec; 4] = [Codec::Lz4, Codec::Zstd, Codec::Gzip, Codec::None];
const FORMATS: [OutputFormat; 2] = [OutputFormat::Pcap, OutputFormat::Pcapng];
const T0: u64 = 1_700_000_000_123_456_789;

struct XorShift(u64);
impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// `n` frames of `len` bytes (`len == 0`: sizes vary from 60 to 1514);
/// `random` fills whole frames with random bytes, else a fixed 0x41 payload
/// after a header that varies per packet.
fn packets(n: usize, len: usize, random: bool, seed: u64) -> Vec<Pkt> {
    let mut rng = XorShift(seed | 1);
    (0..n)
        .map(|i| {
            let l = if len == 0 {
                60 + (rng.next() % 1455) as usize
            } else {
                len
            };
            let data: Vec<u8> = if random {
                (0..l).map(|_| rng.next() as u8).collect()
            } else {
                let mut d = vec![0x41u8; l];
                d[..8].copy_from_slice(&(i as u64).to_be_bytes());
                d
            };
            Pkt {
                link: LinkType::Ethernet,
                // 1.000123 ms apart plus odd nanoseconds, so ns precision matters.
                ts: T0 + i as u64 * 1_000_123 + (i as u64 % 7),
                orig_len: l as u32 + (i as u32 % 3),
                data,
            }
        })
        .collect()
}

fn cfg(format: OutputFormat, codec: Codec) -> WriterConfig {
    WriterConfig {
        format,
        codec,
        nanos: true,
        ..WriterConfig::default()
    }
}

fn read_file(path: &Path) -> Vec<Pkt> {
    read_packets(TraceReader::open(path).unwrap())
}

fn name(format: OutputFormat, codec: Codec) -> String {
    format!("t{}{}", format.extension(), codec.extension())
}

#[test]
fn every_codec_and_format_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let pkts = packets(3000, 0, false, 7);
    for format in FORMATS {
        for codec in CODECS {
            let path = dir.path().join(name(format, codec));
            let stats = write_file(&path, cfg(format, codec), &pkts);
            assert_eq!(stats.packets, 3000);
            assert!(stats.chunks > 10, "{format} {codec}: {stats:?}");
            assert_eq!(
                stats.bytes_out,
                std::fs::metadata(&path).unwrap().len(),
                "{format} {codec}"
            );
            let r = TraceReader::open(&path).unwrap();
            assert_eq!(r.codec(), codec);
            let back = read_packets(r);
            assert_eq!(back.len(), pkts.len(), "{format} {codec}");
            assert!(back == pkts, "{format} {codec}: packets differ");
            let ix = read_index(&index_path(&path)).unwrap();
            assert_eq!(ix.codec, codec);
            assert_eq!(ix.entries.len() as u64, stats.chunks + 1);
            assert!(ix.entries[0].is_metadata());
            // A closed file's index ends with the end entry.
            assert!(ix.entries.last().unwrap().is_end());
            assert_eq!(
                ix.entries.iter().map(|e| u64::from(e.packets)).sum::<u64>(),
                3000
            );
            let total: u64 = ix.entries.iter().map(|e| e.decomp_len).sum();
            assert_eq!(total, stats.bytes_in);
        }
    }
}

#[test]
fn microsecond_pcap_truncates_timestamps() {
    let dir = tempfile::tempdir().unwrap();
    let pkts = packets(50, 100, false, 3);
    let path = dir.path().join("us.pcap.lz4");
    let c = WriterConfig {
        nanos: false,
        ..WriterConfig::default()
    };
    write_file(&path, c, &pkts);
    let back = read_file(&path);
    for (a, b) in pkts.iter().zip(&back) {
        assert_eq!(b.ts, a.ts / 1000 * 1000);
        assert_eq!(b.data, a.data);
    }
}

/// pcapng to pcapng keeps sections, interfaces, options, comments and
/// unknown blocks, and splits metadata into chunks of its own.
#[test]
fn pcapng_records_keep_options_and_comments() {
    let dir = tempfile::tempdir().unwrap();
    let s1 = Section {
        major: 1,
        minor: 0,
        options: vec![
            RawOption::comment("first section"),
            RawOption {
                code: 4,
                value: b"kansoku".to_vec(),
            },
        ],
    };
    let mut i0 = Interface::new(LinkType::Ethernet, 65535, TsResolution::NANO);
    i0.options.push(RawOption {
        code: 2,
        value: b"eth0".to_vec(),
    });
    i0.options.push(RawOption {
        code: 9,
        value: vec![9],
    });
    let mut i1 = Interface::new(LinkType::Raw, 0, TsResolution::MICRO);
    i1.options.push(RawOption::comment("raw ip"));
    let s2 = Section {
        major: 1,
        minor: 0,
        options: vec![],
    };
    let comment = vec![
        RawOption::comment("hello"),
        RawOption {
            code: 2,
            value: vec![1, 0, 0, 0],
        },
    ];
    let body = 7u32.to_le_bytes().to_vec();
    let data: Vec<Vec<u8>> = (0..400)
        .map(|i| vec![(i % 251) as u8; 200 + i % 50])
        .collect();

    for codec in CODECS {
        let path = dir.path().join(format!("ng{}", codec.extension()));
        let mut w = TraceWriter::create(&path, cfg(OutputFormat::Pcapng, codec)).unwrap();
        let mut expect: Vec<String> = Vec::new();
        let put = |w: &mut TraceWriter<std::fs::File>, r: Record, e: &mut Vec<String>| {
            w.write_record(&r).unwrap();
            e.push(format!("{r:?}"));
        };
        put(&mut w, Record::Section(&s1), &mut expect);
        put(&mut w, Record::Interface(&i0), &mut expect);
        put(&mut w, Record::Interface(&i1), &mut expect);
        for (k, d) in data.iter().enumerate() {
            let p = Packet {
                interface: (k % 2) as u32,
                link_type: if k % 2 == 0 {
                    LinkType::Ethernet
                } else {
                    LinkType::Raw
                },
                ts: if k % 2 == 0 {
                    T0 + k as u64
                } else {
                    T0 / 1000 + k as u64
                },
                tsresol: if k % 2 == 0 {
                    TsResolution::NANO
                } else {
                    TsResolution::MICRO
                },
                orig_len: d.len() as u32 + 10,
                data: d,
                options: if k % 50 == 0 { &comment } else { &[] },
                kind: PacketKind::Enhanced,
            };
            put(&mut w, Record::Packet(p), &mut expect);
            if k == 200 {
                put(
                    &mut w,
                    Record::Block(trace::RawBlock {
                        block_type: 0x0000_0004,
                        body: &body,
                        little_endian: true,
                    }),
                    &mut expect,
                );
                put(&mut w, Record::Section(&s2), &mut expect);
                put(&mut w, Record::Interface(&i0), &mut expect);
                put(&mut w, Record::Interface(&i1), &mut expect);
            }
        }
        let stats = w.finish().unwrap();
        assert_eq!(stats.dropped_records, 0);
        let mut r = TraceReader::open(&path).unwrap();
        let mut got = Vec::new();
        while let Some(rec) = r.next_record().unwrap() {
            got.push(format!("{rec:?}"));
        }
        assert_eq!(got.len(), expect.len(), "{codec}");
        for (g, e) in got.iter().zip(&expect) {
            assert_eq!(g, e, "{codec}");
        }
        let ix = read_index(&index_path(&path)).unwrap();
        let meta: Vec<bool> = ix.entries.iter().map(|e| e.is_metadata()).collect();
        assert!(meta[0]);
        // The NRB, second SHB and its IDBs form one metadata chunk mid-file.
        assert_eq!(meta.iter().filter(|m| **m).count(), 2, "{codec}: {meta:?}");
    }
}

#[test]
fn pcap_output_drops_pcapng_extras_and_rejects_a_second_link_type() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.pcap");
    let mut w = TraceWriter::create(&path, cfg(OutputFormat::Pcap, Codec::None)).unwrap();
    let s = Section::default();
    w.write_record(&Record::Section(&s)).unwrap();
    let i0 = Interface::new(LinkType::Ethernet, 1000, TsResolution::MICRO);
    w.write_record(&Record::Interface(&i0)).unwrap();
    let body = [0u8; 4];
    w.write_record(&Record::Block(trace::RawBlock {
        block_type: 5,
        body: &body,
        little_endian: true,
    }))
    .unwrap();
    let i1 = Interface::new(LinkType::Raw, 1000, TsResolution::MICRO);
    assert!(matches!(
        w.write_record(&Record::Interface(&i1)),
        Err(trace::Error::Config(_))
    ));
    assert!(w
        .write_packet(LinkType::Raw, T0, 4, &[0x45, 0, 0, 4])
        .is_err());
    w.write_packet(LinkType::Ethernet, T0, 60, &[1u8; 60])
        .unwrap();
    // A later section goes on in the file (a directory of traces read as
    // one starts one with each file); only one that says something of
    // itself (a comment) loses it.
    w.write_record(&Record::Section(&s)).unwrap();
    let commented = Section {
        options: vec![trace::RawOption {
            code: 1,
            value: b"site B".to_vec(),
        }],
        ..Section::default()
    };
    w.write_record(&Record::Section(&commented)).unwrap();
    let stats = w.finish().unwrap();
    assert_eq!(stats.dropped_records, 2);
    assert_eq!(read_file(&path).len(), 1);
}

#[test]
fn lz4_sizes_stay_within_bounds() {
    let dir = tempfile::tempdir().unwrap();
    for (random, limit) in [(true, 1.005), (false, 0.2)] {
        let pkts = packets(4000, 1518, random, 11);
        let plain = dir.path().join(format!("p{random}.pcap"));
        let lz = dir.path().join(format!("p{random}.pcap.lz4"));
        write_file(&plain, cfg(OutputFormat::Pcap, Codec::None), &pkts);
        let s = write_file(&lz, cfg(OutputFormat::Pcap, Codec::Lz4), &pkts);
        let (a, b) = (
            std::fs::metadata(&plain).unwrap().len() as f64,
            std::fs::metadata(&lz).unwrap().len() as f64,
        );
        assert!(b / a <= limit, "random={random}: {b} / {a} > {limit}");
        if random {
            assert!(s.raw_blocks > 0 && s.raw_blocks >= s.blocks - 1, "{s:?}");
        } else {
            assert_eq!(s.raw_blocks, 0);
        }
    }
}

/// Parses the LZ4 frame without the library's decoder: one magic, a valid
/// header, blocks of at most 64 KiB each followed by its xxh32, raw-flagged
/// blocks for random data, the EndMark last.
#[test]
fn lz4_file_is_one_frame() {
    let dir = tempfile::tempdir().unwrap();
    for random in [true, false] {
        let pkts = packets(2000, 1518, random, 5);
        let path = dir.path().join("f.pcap.lz4");
        let c = WriterConfig {
            stream_checksums: true,
            ..cfg(OutputFormat::Pcap, Codec::Lz4)
        };
        let s = write_file(&path, c, &pkts);
        let f = std::fs::read(&path).unwrap();
        assert_eq!(&f[..4], &[0x04, 0x22, 0x4d, 0x18]);
        assert_eq!(f[4] & 0xc0, 0x40, "version 01");
        assert_eq!(f[4] & 0x20, 0x20, "independent blocks");
        assert_eq!(f[4] & 0x10, 0x10, "block checksums");
        assert_eq!(f[4] & 0x0c, 0, "no content checksum, no size");
        assert_eq!(f[5], 0x40, "64 KB blocks");
        let hc = (xxhash_rust::xxh32::xxh32(&f[4..6], 0) >> 8) as u8;
        assert_eq!(f[6], hc);
        let mut pos = 7;
        let (mut blocks, mut raw, mut plain) = (0, 0, Vec::new());
        loop {
            let size = u32::from_le_bytes(f[pos..pos + 4].try_into().unwrap());
            pos += 4;
            if size == 0 {
                break;
            }
            let len = (size & !RAW_FLAG) as usize;
            assert!(len <= 65536);
            let body = &f[pos..pos + len];
            if size & RAW_FLAG != 0 {
                raw += 1;
                plain.extend_from_slice(body);
            } else {
                plain.extend_from_slice(&lz4_flex::block::decompress(body, 65536).unwrap());
            }
            blocks += 1;
            pos += len;
            let sum = u32::from_le_bytes(f[pos..pos + 4].try_into().unwrap());
            assert_eq!(sum, xxhash_rust::xxh32::xxh32(body, 0));
            pos += 4;
        }
        assert_eq!(pos, f.len(), "nothing after the EndMark");
        assert_eq!(blocks, s.blocks);
        assert_eq!(raw, s.raw_blocks);
        if random {
            assert!(raw > 0);
        }
        assert_eq!(plain.len() as u64, s.bytes_in);
        assert_eq!(&plain[..4], &0xa1b2_3c4du32.to_le_bytes());
    }
}

/// A record larger than the block size becomes a chunk of its own, over
/// several LZ4 blocks.
#[test]
fn oversized_record_spans_several_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let mut pkts = packets(10, 100, true, 9);
    pkts[5].data = (0..200_000u32).map(|i| (i * 7 % 256) as u8).collect();
    pkts[5].orig_len = 200_000;
    let path = dir.path().join("big.pcap.lz4");
    let c = WriterConfig {
        block_size: 4096,
        snaplen: 0,
        ..cfg(OutputFormat::Pcap, Codec::Lz4)
    };
    let s = write_file(&path, c, &pkts);
    assert_eq!(read_file(&path), pkts);
    let ix = read_index(&index_path(&path)).unwrap();
    let big = ix.entries.iter().find(|e| e.decomp_len > 65536).unwrap();
    assert_eq!(big.packets, 1);
    assert!(s.blocks >= s.chunks + 3, "{s:?}");
}

/// A writer killed at any moment leaves a file readable up to its last
/// complete chunk: cut a copy at each chunk end and in the middle of each
/// chunk.
#[test]
fn truncated_files_read_up_to_the_last_complete_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let pkts = packets(600, 0, false, 13);
    for format in FORMATS {
        for codec in CODECS {
            let path = dir.path().join(name(format, codec));
            let c = WriterConfig {
                block_size: 8192,
                ..cfg(format, codec)
            };
            let mut w = TraceWriter::create(&path, c).unwrap();
            for p in &pkts {
                w.write_packet(p.link, p.ts, p.orig_len, &p.data).unwrap();
            }
            // Simulate the kill: no finish, so no EndMark / frame end.
            w.flush_block().unwrap();
            drop(w);
            let full = std::fs::read(&path).unwrap();
            let ix = read_index(&index_path(&path)).unwrap();
            let cut_path = dir.path().join("cut");
            let mut before = 0usize;
            for e in &ix.entries {
                let end = (e.comp_offset + e.comp_len) as usize;
                let mid = (e.comp_offset + e.comp_len / 2) as usize;
                let with = before + e.packets as usize;
                for (cut, min, max) in [(mid, before, with), (end, with, with)] {
                    std::fs::write(&cut_path, &full[..cut]).unwrap();
                    let r = match TraceReader::open(&cut_path) {
                        Ok(r) => r,
                        // Cut inside the first chunk: no header yet.
                        Err(_) if before == 0 && e.is_metadata() => continue,
                        Err(err) => panic!("{format} {codec} cut {cut}: {err}"),
                    };
                    let mut r = r;
                    let mut got = Vec::new();
                    loop {
                        match r.next_record() {
                            Ok(Some(Record::Packet(p))) => got.push(Pkt {
                                link: p.link_type,
                                ts: p.ts_nanos(),
                                orig_len: p.orig_len,
                                data: p.data.to_vec(),
                            }),
                            Ok(Some(_)) => {}
                            Ok(None) => break,
                            Err(err) => panic!("{format} {codec} cut at {cut}: {err}"),
                        }
                    }
                    assert!(
                        (min..=max).contains(&got.len()),
                        "{format} {codec} cut at {cut}: {} packets, expected {min}..={max}",
                        got.len()
                    );
                    assert!(
                        got[..] == pkts[..got.len()],
                        "{format} {codec} cut at {cut}"
                    );
                }
                before = with;
            }
            assert_eq!(before, pkts.len());
        }
    }
}

#[test]
fn windowed_reads_decode_only_needed_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let pkts = packets(5000, 0, false, 17);
    for format in FORMATS {
        for codec in CODECS {
            let path = dir.path().join(name(format, codec));
            let c = WriterConfig {
                block_size: 16384,
                ..cfg(format, codec)
            };
            let stats = write_file(&path, c, &pkts);
            let since = pkts[2000].ts + 1;
            let until = pkts[2600].ts;
            let (r, ws) = open_window(&path, Some(since), Some(until)).unwrap();
            let want: Vec<Pkt> = pkts
                .iter()
                .filter(|p| p.ts >= since && p.ts <= until)
                .cloned()
                .collect();
            let got: Vec<Pkt> = read_packets(r)
                .into_iter()
                .filter(|p| p.ts >= since && p.ts <= until)
                .collect();
            assert_eq!(got.len(), 600);
            assert!(got == want, "{format} {codec}");
            assert!(ws.indexed);
            assert_eq!(ws.chunks_total, stats.chunks);
            // 600 of 5000 packets, plus the header chunk and at most two
            // partly covered chunks.
            let per_chunk = 5000.0 / (stats.chunks - 1) as f64;
            let most = (600.0 / per_chunk).ceil() as u64 + 3;
            assert!(
                ws.chunks_selected <= most,
                "{format} {codec}: {ws:?}, {most}"
            );
            if codec == Codec::Zstd {
                assert!(ws.chunks_decoded < stats.chunks * 7 / 10, "{ws:?}");
            } else {
                assert_eq!(ws.chunks_decoded, ws.chunks_selected);
            }
            // An empty window yields no packets; no window yields all.
            let (r, _) = open_window(&path, Some(T0 - 10), Some(T0 - 5)).unwrap();
            assert!(read_packets(r).is_empty());
            let (r, ws) = open_window(&path, None, None).unwrap();
            assert_eq!(read_packets(r), pkts);
            assert_eq!(ws.chunks_selected, stats.chunks);
        }
    }
    // Without an index the whole file is read.
    let path = dir.path().join("noindex.pcap.lz4");
    write_file(
        &path,
        WriterConfig {
            index: false,
            ..cfg(OutputFormat::Pcap, Codec::Lz4)
        },
        &pkts,
    );
    assert!(!index_path(&path).exists());
    let (r, ws) = open_window(&path, Some(pkts[10].ts), Some(pkts[20].ts)).unwrap();
    assert!(!ws.indexed);
    assert_eq!(read_packets(r).len(), 5000);
}

#[test]
fn rotation_by_size_numbers_files_before_their_extensions() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("out.pcap.lz4");
    let pkts = packets(2500, 1000, true, 19);
    let mut w = RotatingWriter::new(
        &base,
        cfg(OutputFormat::Pcap, Codec::Lz4),
        RotateConfig {
            max_bytes: Some(1_000_000),
            ..RotateConfig::default()
        },
    )
    .unwrap();
    for p in &pkts {
        w.write_packet(p.link, p.ts, p.orig_len, &p.data).unwrap();
    }
    let files = w.finish().unwrap().files;
    // About 2.5 MB of random data in files just over 1 MB each.
    assert_eq!(files.len(), 3, "{files:?}");
    let names: Vec<PathBuf> = files.iter().map(|(p, _)| p.clone()).collect();
    // The number goes before the extensions, which keep saying the format.
    assert_eq!(
        names,
        vec![
            base.clone(),
            dir.path().join("out-00001.pcap.lz4"),
            dir.path().join("out-00002.pcap.lz4"),
        ]
    );
    let mut all = Vec::new();
    for (p, s) in &files {
        assert!(s.bytes_out < 1_000_000 + 40_000, "{p:?} {s:?}");
        assert!(index_path(p).exists());
        all.extend(read_file(p));
    }
    assert!(all == pkts);
}

/// The names in `dir` that are traces (no index sidecars), sorted.
fn trace_names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !trace::index::is_sidecar(n))
        .collect();
    v.sort();
    v
}

/// Writes `pkts` through a rotation of one file per `per_file` packets
/// (-C 1,000 bytes: more than a file's headers, less than a chunk), logging
/// each deletion.
fn rotate(base: &Path, rot: RotateConfig, pkts: &[Pkt], per_file: usize) -> (Rotated, Vec<String>) {
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut w = RotatingWriter::new(
        base,
        cfg(OutputFormat::Pcap, Codec::Lz4),
        RotateConfig {
            max_bytes: Some(1_000),
            ..rot
        },
    )
    .unwrap();
    let l = log.clone();
    w.on_delete(Box::new(move |d, why| {
        l.lock()
            .unwrap()
            .push(format!("{} {why}", d.path.display()))
    }));
    for chunk in pkts.chunks(per_file) {
        for p in chunk {
            w.write_packet(p.link, p.ts, p.orig_len, &p.data).unwrap();
        }
        // The next packet sees a file past -C and starts the next one.
        w.flush_block().unwrap();
    }
    let r = w.finish().unwrap();
    let log = log.lock().unwrap().clone();
    (r, log)
}

#[test]
fn w_keeps_the_newest_files_and_counts_what_it_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("a.pcap.lz4");
    // An earlier run's file of the rotation, and a file of another name.
    std::fs::write(dir.path().join("a-00042.pcap.lz4"), b"old").unwrap();
    std::fs::write(dir.path().join("notes-00001.pcap.lz4"), b"keep").unwrap();
    let pkts = packets(100, 200, true, 5);
    let rot = RotateConfig {
        max_files: Some(3),
        ..RotateConfig::default()
    };
    let (r, log) = rotate(&base, rot, &pkts, 10);
    assert_eq!(
        trace_names(dir.path()),
        [
            "a-00007.pcap.lz4",
            "a-00008.pcap.lz4",
            "a-00009.pcap.lz4",
            "notes-00001.pcap.lz4"
        ]
    );
    // Ten files written, seven deleted, and the earlier run's one first.
    assert_eq!(r.files.len(), 3);
    assert_eq!(r.deleted.len(), 8, "{log:?}");
    assert!(r.deleted[0].path.ends_with("a-00042.pcap.lz4"));
    assert!(r.deleted[0].written.is_none());
    assert!(r.deleted[1].path.ends_with("a.pcap.lz4"));
    assert_eq!(log.len(), 8);
    assert!(log.iter().all(|l| l.contains("-W 3")), "{log:?}");
    // Every packet was written once, to a file kept or one deleted.
    let written: u64 = r.files.iter().map(|(_, s)| s.packets).sum::<u64>()
        + r.deleted
            .iter()
            .filter_map(|d| d.written.as_ref())
            .map(|s| s.packets)
            .sum::<u64>();
    assert_eq!(written, 100);
    let kept: Vec<Pkt> = r.files.iter().flat_map(|(p, _)| read_file(p)).collect();
    assert!(kept == pkts[70..]);
    // The deleted files' indexes went with them.
    assert!(!index_path(&base).exists());
    assert!(index_path(&dir.path().join("a-00009.pcap.lz4")).exists());
}

#[test]
fn max_total_keeps_the_rotation_within_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("b.pcapng");
    let pkts = packets(200, 1000, true, 7);
    // Each file about 20 packets of 1,000 random bytes, 21 KB.
    let limit = 100_000;
    let rot = RotateConfig {
        max_total_bytes: Some(limit),
        ..RotateConfig::default()
    };
    let (r, log) = rotate(&base, rot, &pkts, 20);
    let on_disk: u64 = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(on_disk <= limit, "{on_disk} bytes on disk");
    assert!(r.files.len() >= 3 && !r.deleted.is_empty(), "{log:?}");
    assert!(
        log.iter().all(|l| l.contains("--max-total 100000")),
        "{log:?}"
    );
    // The newest files are the ones kept, and whole.
    let kept: Vec<Pkt> = r.files.iter().flat_map(|(p, _)| read_file(p)).collect();
    assert!(kept == pkts[pkts.len() - kept.len()..]);
    assert_eq!(kept.len(), r.files.len() * 20);
    // A second run counts the first one's files, the oldest first, but
    // never deletes a file this process reads (its six files' names
    // stop short of the first run's oldest kept one).
    let first = r.files[0].0.clone();
    assert!(first.ends_with("b-00006.pcapng"), "{first:?}");
    let reader = TraceReader::open(&first).unwrap();
    let (r2, _) = rotate(&base, rot, &pkts[..120], 20);
    assert!(first.exists() && r2.deleted.iter().all(|d| d.path != first));
    assert!(
        r2.deleted.iter().any(|d| d.written.is_none()),
        "{:?}",
        r2.deleted
    );
    drop(reader);
}

#[test]
fn limits_need_a_rotation_and_a_positive_count() {
    let base = RotateConfig::tcpdump(Some(1), None);
    for bad in [
        RotateConfig {
            max_files: Some(0),
            ..base
        },
        RotateConfig {
            max_total_bytes: Some(0),
            ..base
        },
        RotateConfig {
            max_files: Some(2),
            ..RotateConfig::default()
        },
    ] {
        assert!(bad.validate().is_err(), "{bad:?}");
    }
    assert!(RotateConfig {
        max_files: Some(2),
        ..base
    }
    .validate()
    .is_ok());
}

#[test]
fn rotation_by_time_uses_packet_timestamps() {
    let dir = tempfile::tempdir().unwrap();
    // 2023-11-14 22:13:20 UTC, one packet every 2 s for 70 s.
    let t0 = 1_700_000_000_000_000_000u64;
    let pkts: Vec<Pkt> = (0..35u64)
        .map(|i| Pkt {
            link: LinkType::Ethernet,
            ts: t0 + i * 2_000_000_000,
            orig_len: 60,
            data: vec![i as u8; 60],
        })
        .collect();
    for (pattern, with_size) in [("cap-%Y%m%d-%H%M%S.pcapng", false), ("cap.pcapng", true)] {
        let base = dir.path().join(pattern);
        let mut w = RotatingWriter::new(
            &base,
            cfg(OutputFormat::Pcapng, Codec::Zstd),
            RotateConfig {
                max_bytes: with_size.then_some(1),
                interval_secs: Some(30),
                ..RotateConfig::default()
            },
        )
        .unwrap();
        for p in &pkts {
            w.write_packet(p.link, p.ts, p.orig_len, &p.data).unwrap();
            // Make -C see the bytes: one chunk per packet.
            w.flush_block().unwrap();
        }
        let files = w.finish().unwrap().files;
        let names: Vec<String> = files
            .iter()
            .map(|(p, _)| p.file_name().unwrap().to_str().unwrap().to_string())
            .collect();
        if with_size {
            // -C 1 byte with -G: each packet after the first in a period
            // starts a new numbered file; the count restarts each period.
            assert_eq!(names[0], "cap-20231114221320.pcapng");
            assert_eq!(names[1], "cap-20231114221320-00001.pcapng");
            assert_eq!(names[15], "cap-20231114221350.pcapng");
            assert_eq!(names.len(), 35);
        } else {
            assert_eq!(
                names,
                vec![
                    "cap-20231114-221320.pcapng",
                    "cap-20231114-221350.pcapng",
                    "cap-20231114-221420.pcapng"
                ]
            );
            let counts: Vec<usize> = files.iter().map(|(p, _)| read_file(p).len()).collect();
            assert_eq!(counts, vec![15, 15, 5]);
        }
        let mut all = Vec::new();
        for (p, _) in &files {
            all.extend(read_file(p));
        }
        assert!(all == pkts);
    }
}

/// Stock tshark (Wireshark 4.0) reads every codec's single-stream output.
#[test]
fn tshark_reads_every_codec() {
    if !have_tshark() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut pkts = packets(1500, 0, false, 23);
    pkts.extend(packets(1500, 1518, true, 29).into_iter().map(|mut p| {
        p.ts += 10_000_000_000;
        p
    }));
    for format in FORMATS {
        for codec in CODECS {
            let path = dir.path().join(name(format, codec));
            write_file(&path, cfg(format, codec), &pkts);
            let lens = tshark_frame_lens(&path).unwrap_or_else(|e| panic!("{format} {codec}: {e}"));
            assert_eq!(lens.len(), pkts.len(), "{format} {codec}");
        }
    }
}
