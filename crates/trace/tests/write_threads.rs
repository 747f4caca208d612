//! The writer with compression threads (`WriterConfig::threads`): the same
//! records, the same file. Every codec and format is written with one thread
//! and with three and compared: the packets read back, the stats, the index
//! (and a time window read through it) and the bytes of the file; tshark
//! reads threaded files; a writer dropped without `finish` leaves a prefix
//! that its index describes, and a failing sink surfaces as an error.

mod common;

use std::io::{self, Write};

use common::{have_tshark, read_packets, tshark_frame_lens, write_file, xorshift, Pkt};
use trace::index::{index_path, read_index};
use trace::window::open_window;
use trace::write::{CompressWhen, OutputFormat, TraceWriter, WriteStats, WriterConfig};
use trace::{Codec, LinkType, TraceReader};

const CODECS: [Codec; 4] = [Codec::None, Codec::Lz4, Codec::Zstd, Codec::Gzip];
const FORMATS: [OutputFormat; 2] = [OutputFormat::Pcap, OutputFormat::Pcapng];
const T0: u64 = 1_700_000_000_000_000_000;

/// Packets in runs of compressible (fixed payload) and incompressible
/// (random) frames of varied sizes, so LZ4 stores some blocks raw; in pcapng
/// a second link type appears midway, which puts a metadata chunk (its
/// interface) between packet chunks.
fn packets(n: usize, format: OutputFormat) -> Vec<Pkt> {
    let mut rng = xorshift(0x9e37_79b9_7f4a_7c15);
    (0..n)
        .map(|i| {
            let len = 60 + (rng() % 1455) as usize;
            let random = (i / 200) % 2 == 1;
            let mut data: Vec<u8> = if random {
                (0..len).map(|_| rng() as u8).collect()
            } else {
                vec![0x41; len]
            };
            data[..8].copy_from_slice(&(i as u64).to_be_bytes());
            let link = if format == OutputFormat::Pcapng && i % 1000 == 700 {
                LinkType::Raw
            } else {
                LinkType::Ethernet
            };
            Pkt {
                link,
                ts: T0 + i as u64 * 1_000_003,
                orig_len: len as u32 + (i % 5) as u32,
                data,
            }
        })
        .collect()
}

/// The counters without the times (which differ from run to run).
fn untimed(s: &WriteStats) -> WriteStats {
    WriteStats {
        compress_ns: 0,
        write_ns: 0,
        blocked_ns: 0,
        longest_block_ns: 0,
        ..s.clone()
    }
}

fn config(format: OutputFormat, codec: Codec, threads: usize) -> WriterConfig {
    WriterConfig {
        format,
        codec,
        threads,
        // Small blocks: many chunks, many in flight at once.
        block_size: 8192,
        ..WriterConfig::default()
    }
}

fn name(format: OutputFormat, codec: Codec, threads: usize) -> String {
    format!("t{threads}{}{}", format.extension(), codec.extension())
}

#[test]
fn three_threads_write_what_one_thread_writes() {
    let dir = tempfile::tempdir().unwrap();
    for format in FORMATS {
        let pkts = packets(3000, format);
        for codec in CODECS {
            let what = format!("{format} {codec}");
            let one = dir.path().join(name(format, codec, 1));
            let three = dir.path().join(name(format, codec, 3));
            let s1 = write_file(&one, config(format, codec, 1), &pkts);
            let s3 = write_file(&three, config(format, codec, 3), &pkts);

            // The same records, in the same order.
            assert!(
                read_packets(TraceReader::open(&three).unwrap()) == pkts,
                "{what}: packets differ"
            );
            assert!(read_packets(TraceReader::open(&one).unwrap()) == pkts);

            // The same counters, and the file is the size they say.
            assert_eq!(s3.packets, 3000, "{what}");
            assert_eq!(untimed(&s3), untimed(&s1), "{what}");
            assert!(s3.chunks > 100, "{what}: {s3:?}");
            assert_eq!(
                s3.bytes_out,
                std::fs::metadata(&three).unwrap().len(),
                "{what}"
            );
            if codec == Codec::Lz4 {
                assert!(
                    s3.raw_blocks > 0 && s3.raw_blocks < s3.blocks,
                    "{what}: {s3:?}"
                );
            }

            // Every chunk is listed, back to back, covering the plain stream,
            // then the stream's end, up to the file's end.
            let ix = read_index(&index_path(&three)).unwrap();
            assert_eq!(ix.entries.len() as u64, s3.chunks + 1, "{what}");
            let end = ix.entries.last().unwrap();
            assert!(end.is_end(), "{what}");
            assert_eq!(
                end.comp_offset + end.comp_len,
                std::fs::metadata(&three).unwrap().len(),
                "{what}"
            );
            let mut comp = ix.entries[0].comp_offset;
            let mut decomp = 0;
            for e in &ix.entries {
                assert_eq!(e.comp_offset, comp, "{what}");
                assert_eq!(e.decomp_offset, decomp, "{what}");
                comp += e.comp_len;
                decomp += e.decomp_len;
            }
            assert_eq!(decomp, s3.bytes_in, "{what}");
            assert_eq!(
                ix.entries.iter().map(|e| u64::from(e.packets)).sum::<u64>(),
                3000
            );
            if format == OutputFormat::Pcapng {
                // The interface of the second link type, between packets.
                let mid = ix.entries[1..].iter().filter(|e| e.is_metadata()).count();
                assert!(mid >= 1, "{what}");
            }

            // LZ4 blocks, gzip members and plain chunks do not depend on one
            // another, and zstd keeps one compression thread: the files and
            // their indexes are byte for byte the single-threaded ones.
            assert!(
                std::fs::read(&three).unwrap() == std::fs::read(&one).unwrap(),
                "{what}: files differ"
            );
            assert!(
                std::fs::read(index_path(&three)).unwrap()
                    == std::fs::read(index_path(&one)).unwrap(),
                "{what}: indexes differ"
            );

            // A time window read through the index.
            let (since, until) = (pkts[1100].ts, pkts[1450].ts);
            let (r, ws) = open_window(&three, Some(since), Some(until)).unwrap();
            assert!(ws.indexed, "{what}");
            assert!(ws.chunks_selected < s3.chunks / 2, "{what}: {ws:?}");
            let got: Vec<Pkt> = read_packets(r)
                .into_iter()
                .filter(|p| (since..=until).contains(&p.ts))
                .collect();
            assert!(got[..] == pkts[1100..=1450], "{what}: window differs");
        }
    }
}

#[test]
fn one_write_per_packet_with_threads_matches_one_thread() {
    // libpcap's pattern (a chunk per packet, as `bench capture`'s -pkt
    // configurations write) with threads: flush_block after every packet
    // hands each tiny chunk to a thread and waits for it to be written.
    let dir = tempfile::tempdir().unwrap();
    let pkts = packets(500, OutputFormat::Pcap);
    for codec in CODECS {
        let mut stats = Vec::new();
        for threads in [1, 4] {
            let path = dir.path().join(name(OutputFormat::Pcap, codec, threads));
            // A block ended after every packet: one chunk each.
            let mut w =
                TraceWriter::create(&path, config(OutputFormat::Pcap, codec, threads)).unwrap();
            for p in &pkts {
                w.write_packet(p.link, p.ts, p.orig_len, &p.data).unwrap();
                w.flush_block().unwrap();
            }
            stats.push(w.finish().unwrap());
            assert!(read_packets(TraceReader::open(&path).unwrap()) == pkts);
        }
        assert_eq!(untimed(&stats[0]), untimed(&stats[1]), "{codec}");
        assert_eq!(stats[1].chunks, 501, "{codec}");
    }
}

#[test]
fn dropped_threaded_writer_leaves_an_indexed_prefix() {
    let dir = tempfile::tempdir().unwrap();
    for format in FORMATS {
        let pkts = packets(2000, format);
        for codec in CODECS {
            let what = format!("{format} {codec}");
            let path = dir.path().join(name(format, codec, 3));
            let mut w = TraceWriter::create(&path, config(format, codec, 3)).unwrap();
            for p in &pkts {
                w.write_packet(p.link, p.ts, p.orig_len, &p.data).unwrap();
            }
            // No finish and no flush: what a crash leaves, minus the chunks
            // the compression threads had (the drop writes those).
            drop(w);
            let len = std::fs::metadata(&path).unwrap().len();
            let ix = read_index(&index_path(&path)).unwrap();
            let listed: u64 = ix.entries.iter().map(|e| u64::from(e.packets)).sum();
            assert!(listed > 1500 && listed <= 2000, "{what}: {listed}");
            let last = ix.entries.last().unwrap();
            // The file is exactly the chunks listed (no end of stream).
            assert_eq!(last.comp_offset + last.comp_len, len, "{what}");
            let got = read_packets(TraceReader::open(&path).unwrap());
            assert_eq!(got.len() as u64, listed, "{what}");
            assert!(got[..] == pkts[..got.len()], "{what}");
            let (r, ws) = open_window(&path, None, None).unwrap();
            assert_eq!(ws.chunks_total, ix.entries.len() as u64, "{what}");
            assert!(read_packets(r)[..] == pkts[..got.len()], "{what}");
        }
    }
}

/// A sink that takes `left` bytes and then fails every write.
struct FailingSink {
    left: usize,
}

impl Write for FailingSink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.len() > self.left {
            return Err(io::Error::other("disk full"));
        }
        self.left -= buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_failing_sink_surfaces_as_an_error_with_threads() {
    let pkts = packets(2000, OutputFormat::Pcap);
    for codec in CODECS {
        let sink = FailingSink { left: 100_000 };
        let mut w = TraceWriter::new(sink, config(OutputFormat::Pcap, codec, 3)).unwrap();
        let mut failed = false;
        for p in &pkts {
            if let Err(e) = w.write_packet(p.link, p.ts, p.orig_len, &p.data) {
                assert!(e.to_string().contains("disk full"), "{codec}: {e}");
                failed = true;
                break;
            }
        }
        if failed {
            // Later calls fail too rather than write after a hole.
            assert!(w.flush_block().is_err(), "{codec}");
        } else {
            let e = w.finish().unwrap_err();
            assert!(e.to_string().contains("disk full"), "{codec}: {e}");
        }
    }
}

#[test]
fn too_many_threads_is_a_config_error() {
    let cfg = WriterConfig {
        threads: 1000,
        ..WriterConfig::default()
    };
    assert!(cfg.validate().is_err());
    assert!(TraceWriter::new(io::sink(), cfg).is_err());
}

#[test]
fn tshark_reads_threaded_lz4_and_zstd() {
    if !have_tshark() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for format in FORMATS {
        // 20,000 packets, some 15 MB: far more than tshark's read buffer,
        // so a stream it cannot follow would show.
        let pkts = packets(20_000, format);
        for codec in [Codec::Lz4, Codec::Zstd] {
            let path = dir.path().join(name(format, codec, 3));
            let cfg = WriterConfig {
                block_size: trace::write::DEFAULT_BLOCK_SIZE,
                ..config(format, codec, 3)
            };
            write_file(&path, cfg, &pkts);
            let lens = tshark_frame_lens(&path).unwrap_or_else(|e| panic!("{format} {codec}: {e}"));
            let want: Vec<u32> = pkts.iter().map(|p| p.orig_len).collect();
            assert_eq!(lens.len(), want.len(), "{format} {codec}");
            assert!(lens == want, "{format} {codec}: lengths differ");
        }
    }
}

/// `CompressWhen::Pays`: incompressible runs are stored raw without trying
/// the compressor, compressible ones compressed; with one thread or three,
/// every packet reads back, from kansoku and from tshark, and the file is
/// one LZ4 frame.
#[test]
fn compression_steps_aside_where_it_does_not_pay() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = xorshift(7);
    let random: Vec<Pkt> = (0..4000)
        .map(|i| Pkt {
            link: LinkType::Ethernet,
            ts: T0 + i * 1000,
            orig_len: 1514,
            data: (0..1514).map(|_| rng() as u8).collect(),
        })
        .collect();
    let fixed: Vec<Pkt> = (0..4000)
        .map(|i| Pkt {
            link: LinkType::Ethernet,
            ts: T0 + i * 1000,
            orig_len: 1514,
            data: vec![(i % 7) as u8; 1514],
        })
        .collect();
    for threads in [1, 3] {
        for (kind, pkts) in [("random", &random), ("fixed", &fixed)] {
            let what = format!("{kind}, {threads} threads");
            let path = dir.path().join(format!("{kind}{threads}.pcap.lz4"));
            let cfg = WriterConfig {
                codec: Codec::Lz4,
                threads,
                compress_when: CompressWhen::Pays,
                ..WriterConfig::default()
            };
            let s = write_file(&path, cfg, pkts);
            assert!(
                read_packets(TraceReader::open(&path).unwrap()) == *pkts,
                "{what}"
            );
            assert_eq!(
                s.bytes_out,
                std::fs::metadata(&path).unwrap().len(),
                "{what}"
            );
            if kind == "random" {
                // The compressor ran on the trials only.
                assert!(s.skipped_blocks * 10 >= s.blocks * 8, "{what}: {s:?}");
                assert!(s.compressed_in * 5 < s.bytes_in, "{what}: {s:?}");
            } else {
                assert!(s.bytes_out * 5 < s.bytes_in, "{what}: {s:?}");
                assert!(s.compress_ns > 0 && s.write_ns > 0, "{what}: {s:?}");
            }
            if have_tshark() {
                let lens =
                    tshark_frame_lens(&path).unwrap_or_else(|e| panic!("{what}: tshark: {e}"));
                assert_eq!(lens.len(), pkts.len(), "{what}: tshark");
            }
        }
    }
}
