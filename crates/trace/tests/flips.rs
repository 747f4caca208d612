//! Single-byte flips of a kansoku trace in each codec and format: each is
//! found (a read error, a cut or a corrupt chunk reported), or lands where
//! it changes no packet; none reads back cleanly with different packet
//! bytes. As written by default (an index with a checksum per chunk, read
//! through it), and without an index, where the stream's own checks do it:
//! gzip's CRC-32 per member, zstd's content checksum, LZ4's block checksums
//! (all with `--checksums`).

mod common;

use std::path::Path;

use common::{read_to_end, write_file, xorshift, Pkt};
use trace::window::open_checked;
use trace::write::{OutputFormat, WriterConfig};
use trace::{Codec, LinkType, TraceReader};

/// The packets of a full read, and whether it was clean (no error, no
/// truncation, no corrupt chunk): what `kansoku read` would exit 0 on.
fn clean_read(r: trace::Result<TraceReader>) -> (Vec<Pkt>, bool) {
    match r {
        Ok(r) => {
            let (pkts, end) = read_to_end(r);
            (pkts, end.is_none())
        }
        Err(_) => (Vec::new(), false),
    }
}

/// Half the packets random (stored raw), half compressible.
fn packets(next: &mut impl FnMut() -> u64) -> Vec<Pkt> {
    (0..400u64)
        .map(|i| {
            let len = 60 + (next() % 900) as usize;
            let data = if i % 2 == 0 {
                (0..len).map(|_| next() as u8).collect()
            } else {
                let mut d = vec![0x41u8; len];
                d[..8].copy_from_slice(&i.to_be_bytes());
                d
            };
            Pkt {
                link: LinkType::Ethernet,
                ts: 1_700_000_000_000_000_000 + i * 1_000_000,
                orig_len: len as u32,
                data,
            }
        })
        .collect()
}

/// Writes `pkts` at `path` with `cfg` and flips one byte of the file 1,000
/// times, reading each variant with `read`: a clean read must give the
/// packets written; with `checked` (chunks verified before their bytes are
/// used), a reported one gives only packets that were written, in order (a
/// stream's decoder hands on what it decoded before its checksum fails).
/// Most flips must be found.
fn flip_1000(
    path: &Path,
    cfg: WriterConfig,
    pkts: &[Pkt],
    next: &mut impl FnMut() -> u64,
    checked: bool,
    read: impl Fn(&Path) -> (Vec<Pkt>, bool),
) {
    let what = format!(
        "{} {} (index {}, stream checksums {})",
        cfg.codec, cfg.format, cfg.index, cfg.stream_checksums
    );
    write_file(path, cfg, pkts);
    let file = std::fs::read(path).unwrap();
    let (want, clean) = read(path);
    assert!(clean && want == pkts, "{what}: the unflipped file");
    let (mut found, mut harmless) = (0, 0);
    for _ in 0..1000 {
        let at = (next() % file.len() as u64) as usize;
        let mut bad = file.clone();
        bad[at] ^= 1 + (next() % 255) as u8;
        std::fs::write(path, &bad).unwrap();
        let (got, clean) = read(path);
        if clean {
            assert!(
                got == want,
                "{what}: byte {at} of {} flipped reads back clean with other packets",
                file.len()
            );
            harmless += 1;
        } else {
            found += 1;
            let mut rest = want.iter();
            assert!(
                !checked || got.iter().all(|p| rest.any(|w| w == p)),
                "{what}: byte {at} flipped: packets read that were never written"
            );
        }
    }
    eprintln!("{what}: {found} of 1000 flips found, {harmless} changed no packet");
    assert!(found >= 900, "{what}: {found} found, {harmless} harmless");
}

#[test]
fn no_single_byte_flip_of_a_default_file_reads_back_clean_with_other_packets() {
    let mut next = xorshift(0x2545_f491_4f6c_dd1d);
    let pkts = packets(&mut next);
    let dir = tempfile::tempdir().unwrap();
    for codec in [Codec::Lz4, Codec::Zstd, Codec::Gzip, Codec::None] {
        for format in [OutputFormat::Pcap, OutputFormat::Pcapng] {
            let cfg = WriterConfig {
                format,
                codec,
                nanos: true,
                block_size: 8192,
                ..WriterConfig::default()
            };
            // Read as every command reads a file: through its index.
            flip_1000(&dir.path().join("f"), cfg, &pkts, &mut next, true, |p| {
                clean_read(open_checked(p).map(|(r, _)| r))
            });
        }
    }
}

#[test]
fn no_single_byte_flip_reads_back_clean_with_other_packets() {
    let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
    let pkts = packets(&mut next);
    let dir = tempfile::tempdir().unwrap();
    for codec in [Codec::Lz4, Codec::Zstd, Codec::Gzip] {
        for format in [OutputFormat::Pcap, OutputFormat::Pcapng] {
            let cfg = WriterConfig {
                format,
                codec,
                nanos: true,
                block_size: 8192,
                index: false,
                stream_checksums: true,
                ..WriterConfig::default()
            };
            // As a stream: the codec's own checks only.
            flip_1000(&dir.path().join("f"), cfg, &pkts, &mut next, false, |p| {
                clean_read(TraceReader::from_read(Box::new(std::io::Cursor::new(
                    std::fs::read(p).unwrap(),
                ))))
            });
        }
    }
}
