//! Single-byte flips of a kansoku trace in each codec and format: each is
//! found (a read error or a cut reported), or lands where it changes no
//! packet; none reads back cleanly with different packet bytes. Without an
//! index, so the stream's own checks do it: gzip's CRC-32 per member,
//! zstd's content checksum, LZ4's block checksums (all with `--checksums`).

mod common;

use common::{read_to_end, write_file, Pkt};
use trace::write::{OutputFormat, WriterConfig};
use trace::{Codec, LinkType, TraceReader};

/// The packets of `bytes` read in full, and whether the read was clean (no
/// error, no truncation): what `kansoku read` would exit 0 on.
fn read(bytes: Vec<u8>) -> (Vec<Pkt>, bool) {
    match TraceReader::from_read(Box::new(std::io::Cursor::new(bytes))) {
        Ok(r) => {
            let (pkts, end) = read_to_end(r);
            (pkts, end.is_none())
        }
        Err(_) => (Vec::new(), false),
    }
}

#[test]
fn no_single_byte_flip_reads_back_clean_with_other_packets() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    // Half the packets random (stored raw), half compressible.
    let pkts: Vec<Pkt> = (0..400u64)
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
        .collect();
    let dir = tempfile::tempdir().unwrap();
    for codec in [Codec::Lz4, Codec::Zstd, Codec::Gzip] {
        for format in [OutputFormat::Pcap, OutputFormat::Pcapng] {
            let path = dir.path().join("f");
            let cfg = WriterConfig {
                format,
                codec,
                nanos: true,
                block_size: 8192,
                index: false,
                stream_checksums: true,
                ..WriterConfig::default()
            };
            write_file(&path, cfg, &pkts);
            let file = std::fs::read(&path).unwrap();
            let (want, clean) = read(file.clone());
            assert!(
                clean && want == pkts,
                "{codec} {format}: the unflipped file"
            );
            let (mut found, mut harmless) = (0, 0);
            for _ in 0..1000 {
                let at = (next() % file.len() as u64) as usize;
                let mut bad = file.clone();
                bad[at] ^= 1 + (next() % 255) as u8;
                let (got, clean) = read(bad);
                if !clean {
                    found += 1;
                } else {
                    assert!(
                        got == want,
                        "{codec} {format}: byte {at} of {} flipped reads back clean with other packets",
                        file.len()
                    );
                    harmless += 1;
                }
            }
            eprintln!(
                "{codec} {format}: {found} of 1000 flips found, {harmless} changed no packet"
            );
            assert!(
                found >= 900,
                "{codec} {format}: {found} found, {harmless} harmless"
            );
        }
    }
}
