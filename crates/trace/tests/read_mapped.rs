//! A plain file read from a mapping of it reads exactly as one read by
//! `read(2)`: the same records, the same end (clean, or cut at any place),
//! the same corrupt chunk named and skipped through an index (where the
//! mapped read goes on by reads), the same tail past an index. Mapping is
//! a process-wide setting, so this file's one test sets it both ways.

mod common;

use std::path::Path;

use common::{read_to_end, write_file, xorshift, Pkt};
use trace::index::{index_path, ENTRY_LEN, HEADER_LEN};
use trace::read::set_map_files;
use trace::window::open_window;
use trace::write::{OutputFormat, WriterConfig};
use trace::{Codec, LinkType, TraceReader};

const T0: u64 = 1_700_000_000_000_000_000;

fn trace(n: usize, seed: u64) -> Vec<Pkt> {
    let mut next = xorshift(seed);
    (0..n)
        .map(|i| {
            let len = 60 + (next() % 1455) as usize;
            Pkt {
                link: LinkType::Ethernet,
                ts: T0 + i as u64 * 1_000_000,
                orig_len: len as u32,
                data: (0..len).map(|_| next() as u8).collect(),
            }
        })
        .collect()
}

type Read = (Vec<Pkt>, Option<String>);

/// `path` read whole (through its index when it has one) and as a stream,
/// each with the mapping on and off; checks the two agree and that the
/// mapping was used when on (and not when off), returns the whole read.
fn both_ways(path: &Path, what: &str) -> Read {
    let mut got: Vec<(Read, Read)> = Vec::new();
    for map in [true, false] {
        set_map_files(map);
        let whole = match open_window(path, None, None) {
            Ok((r, _)) => {
                assert_eq!(r.is_mapped(), map, "{what}: through the index, map {map}");
                read_to_end(r)
            }
            Err(e) => (Vec::new(), Some(format!("open: {e}"))),
        };
        let stream = match TraceReader::open(path) {
            Ok(r) => {
                assert_eq!(r.is_mapped(), map, "{what}: stream, map {map}");
                read_to_end(r)
            }
            Err(e) => (Vec::new(), Some(format!("open: {e}"))),
        };
        got.push((whole, stream));
    }
    set_map_files(true);
    let [(mw, ms), (rw, rs)] = <[(Read, Read); 2]>::try_from(got).unwrap();
    for (how, mapped, read) in [("through the index", &mw, &rw), ("stream", &ms, &rs)] {
        assert!(
            mapped.0 == read.0,
            "{what}: {how}, {} packets mapped, {} read",
            mapped.0.len(),
            read.0.len()
        );
        assert_eq!(mapped.1, read.1, "{what}: {how}");
    }
    mw
}

#[test]
fn a_mapped_file_reads_as_one_read_by_reads() {
    let pkts = trace(1200, 5);
    let dir = tempfile::tempdir().unwrap();
    for format in [OutputFormat::Pcap, OutputFormat::Pcapng] {
        let path = dir.path().join(format!("t{}", format.extension()));
        let cfg = WriterConfig {
            format,
            codec: Codec::None,
            nanos: true,
            block_size: 4096,
            ..WriterConfig::default()
        };
        write_file(&path, cfg, &pkts);
        let bytes = std::fs::read(&path).unwrap();
        let index = std::fs::read(index_path(&path)).unwrap();
        let what = format!("{format:?}");

        // Whole, with its index and without.
        let (got, end) = both_ways(&path, &what);
        assert!(got == pkts && end.is_none(), "{what}: {end:?}");
        std::fs::remove_file(index_path(&path)).unwrap();
        let (got, end) = both_ways(&path, &format!("{what} without its index"));
        assert!(got == pkts && end.is_none(), "{what}: {end:?}");

        // Cut anywhere: in the header, in records, at chunk ends; with the
        // index (which then goes past the file's end) and without.
        let ix = trace::index::parse_index(&index, "t").unwrap();
        let mut cuts: Vec<usize> = vec![0, 3, 4, 17, 40];
        cuts.extend((1..40).map(|k| bytes.len() * k / 40 + k));
        cuts.extend(
            ix.entries
                .iter()
                .map(|e| (e.comp_offset + e.comp_len) as usize),
        );
        for cut in cuts.into_iter().filter(|&c| c < bytes.len()) {
            std::fs::write(&path, &bytes[..cut]).unwrap();
            std::fs::write(index_path(&path), &index).unwrap();
            both_ways(&path, &format!("{what} cut at {cut}"));
            std::fs::remove_file(index_path(&path)).unwrap();
            both_ways(&path, &format!("{what} cut at {cut}, no index"));
        }

        // A corrupt chunk (a flipped byte inside a record's data, and one in
        // a record's header) is named and skipped; the reads go on.
        std::fs::write(index_path(&path), &index).unwrap();
        let chunks = common::packet_chunks(&path);
        assert!(chunks.len() > 20, "{} chunks", chunks.len());
        for (k, at) in [(chunks.len() / 2, 0.5), (1, 0.0), (chunks.len() - 1, 0.9)] {
            let bad = chunks[k];
            let mut b = bytes.clone();
            let i = (bad.comp_offset as f64 + bad.comp_len as f64 * at) as usize;
            b[i] ^= 0x20;
            std::fs::write(&path, &b).unwrap();
            std::fs::write(index_path(&path), &index).unwrap();
            let (got, end) = both_ways(&path, &format!("{what} chunk {k} corrupt at {i}"));
            let end = end.unwrap_or_default();
            assert!(end.contains(&bad.comp_offset.to_string()), "{what}: {end}");
            assert_eq!(
                got.len(),
                pkts.len() - bad.packets as usize,
                "{what}: {end}"
            );
        }

        // An index behind its file (a writer killed between batches of
        // entries): the chunks checked, then the tail as it is.
        std::fs::write(&path, &bytes).unwrap();
        std::fs::write(index_path(&path), &index[..HEADER_LEN + 10 * ENTRY_LEN]).unwrap();
        let (got, _) = both_ways(&path, &format!("{what} with an index behind it"));
        assert!(got == pkts, "{what}: {} packets", got.len());
        // And a corrupt chunk before that tail.
        let mut b = bytes.clone();
        b[(chunks[4].comp_offset + chunks[4].comp_len / 2) as usize] ^= 1;
        std::fs::write(&path, &b).unwrap();
        let (got, end) = both_ways(&path, &format!("{what}: a bad chunk, then a tail"));
        assert_eq!(
            got.len(),
            pkts.len() - chunks[4].packets as usize,
            "{what}: {end:?}"
        );
    }
}
