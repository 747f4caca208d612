//! A windowed read gives exactly what a full read filtered by time gives,
//! whatever state the index is in: intact, cut at any entry or inside one
//! (a crash while appending), with a chunk offset or length changed, for
//! another file, or missing; and after the trace itself was cut short.

mod common;

use std::path::Path;

use common::{read_to_end, write_file, xorshift, Pkt};
use proptest::prelude::*;
use trace::index::{index_path, ENTRY_LEN, HEADER_LEN};
use trace::window::open_window;
use trace::write::{OutputFormat, WriterConfig};
use trace::{Codec, LinkType, TraceReader};

const T0: u64 = 1_700_000_000_000_000_000;

fn in_window(p: &[Pkt], since: Option<u64>, until: Option<u64>) -> Vec<Pkt> {
    p.iter()
        .filter(|p| since.is_none_or(|s| p.ts >= s) && until.is_none_or(|u| p.ts <= u))
        .cloned()
        .collect()
}

/// Checks the windowed read of `path` against its full read.
fn same_as_full(path: &Path, since: Option<u64>, until: Option<u64>, what: &str) {
    let full = match TraceReader::open(path) {
        Ok(r) => r,
        Err(e) => {
            // Cut inside the trace's header: no read can start.
            assert!(
                open_window(path, since, until).is_err(),
                "{what}: the full read fails ({e}), the windowed one not"
            );
            return;
        }
    };
    let (full, full_end) = read_to_end(full);
    let (r, ws) = open_window(path, since, until).unwrap_or_else(|e| panic!("{what}: {e}"));
    let (win, win_end) = read_to_end(r);
    let want = in_window(&full, since, until);
    let got = in_window(&win, since, until);
    assert!(
        got == want,
        "{what}: {} packets in the window, {} from the full read ({ws:?})",
        got.len(),
        want.len()
    );
    // A cut or a corrupt stream is reported the same way by both; and an
    // index without its end entry says the file was not closed where the
    // stream itself cannot tell (between gzip members, in a plain file).
    let unclosed = win_end
        .as_deref()
        .is_some_and(|e| e.contains("never closed"));
    let shorter = win_end
        .as_deref()
        .is_some_and(|e| e.contains("past its end"));
    if shorter && full_end.is_none() {
        // A plain file cut at a record's end, gzip at a member's: only the
        // index can tell.
        let ix = trace::index::read_index(&index_path(path)).unwrap();
        let len = std::fs::metadata(path).unwrap().len();
        assert!(
            ix.entries.iter().any(|e| e.comp_offset + e.comp_len > len),
            "{what}: a file said to be shorter than its index is not"
        );
    } else if unclosed && full_end.is_none() {
        let ix = trace::index::read_index(&index_path(path)).unwrap();
        assert!(
            !ix.entries.last().is_some_and(|e| e.is_end()),
            "{what}: a closed file reported as not closed"
        );
    } else {
        assert_eq!(
            win_end.is_some(),
            full_end.is_some(),
            "{what}: {win_end:?} / {full_end:?}"
        );
    }
}

fn trace(n: usize, seed: u64, random: bool) -> Vec<Pkt> {
    let mut next = xorshift(seed);
    (0..n)
        .map(|i| {
            let len = 60 + (next() % 1455) as usize;
            let data = if random {
                (0..len).map(|_| next() as u8).collect()
            } else {
                let mut d = vec![0x41u8; len];
                d[..8].copy_from_slice(&(i as u64).to_be_bytes());
                d
            };
            // A little out of order now and then, as captures from
            // several queues are.
            let jitter = if next().is_multiple_of(10) {
                next() % 3_000_000
            } else {
                0
            };
            Pkt {
                link: LinkType::Ethernet,
                ts: T0 + i as u64 * 1_000_000 - jitter.min(i as u64 * 1_000_000),
                orig_len: len as u32,
                data,
            }
        })
        .collect()
}

fn codec_of(i: u8) -> Codec {
    [Codec::Lz4, Codec::Zstd, Codec::Gzip, Codec::None][usize::from(i % 4)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn a_windowed_read_is_a_full_read_filtered_by_time(
        n in 1usize..2500,
        seed in any::<u64>(),
        random in any::<bool>(),
        codec in 0u8..4,
        pcapng in any::<bool>(),
        block_kib in 4usize..=64,
        since_at in proptest::option::of(0.0f64..1.1),
        span in proptest::option::of(0.0f64..0.5),
        cut_entry in any::<prop::sample::Index>(),
        flip in any::<prop::sample::Index>(),
        flip_to in 1u8..=255,
        cut_file in 0.3f64..1.0,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let codec = codec_of(codec);
        let format = if pcapng { OutputFormat::Pcapng } else { OutputFormat::Pcap };
        let path = dir.path().join("t");
        let pkts = trace(n, seed, random);
        let cfg = WriterConfig {
            format,
            codec,
            nanos: true,
            block_size: block_kib * 1024,
            ..WriterConfig::default()
        };
        write_file(&path, cfg, &pkts);
        let end = T0 + n as u64 * 1_000_000;
        let since = since_at.map(|f| T0 + (f * (end - T0) as f64) as u64);
        let until = span.map(|s| since.unwrap_or(T0) + (s * (end - T0) as f64) as u64);
        let what = format!("{format} {codec} n={n} block={block_kib}K since={since:?} until={until:?}");
        let ipath = index_path(&path);
        let index = std::fs::read(&ipath).unwrap();
        let entries = (index.len() - HEADER_LEN) / ENTRY_LEN;

        same_as_full(&path, since, until, &format!("{what}, index intact"));

        // Cut at an entry, and inside one (a torn append).
        let k = cut_entry.index(entries + 1);
        std::fs::write(&ipath, &index[..HEADER_LEN + ENTRY_LEN * k]).unwrap();
        same_as_full(&path, since, until, &format!("{what}, index cut to {k} entries"));
        std::fs::write(&ipath, &index[..(HEADER_LEN + ENTRY_LEN * k + 23).min(index.len())]).unwrap();
        same_as_full(&path, since, until, &format!("{what}, index torn after {k} entries"));

        // Any byte of an entry changed: a timestamp, an offset, a length.
        let e = flip.index(entries.max(1)).min(entries.saturating_sub(1));
        let field = flip.index(ENTRY_LEN);
        let at = HEADER_LEN + ENTRY_LEN * e + field;
        let mut bad = index.clone();
        if at < bad.len() {
            bad[at] ^= flip_to;
        }
        std::fs::write(&ipath, &bad).unwrap();
        same_as_full(&path, since, until, &format!("{what}, index byte {at} flipped"));

        // The index header damaged, or missing.
        let mut bad = index.clone();
        bad[6] ^= 0x7f;
        std::fs::write(&ipath, &bad).unwrap();
        same_as_full(&path, since, until, &format!("{what}, index header damaged"));
        std::fs::remove_file(&ipath).unwrap();
        same_as_full(&path, since, until, &format!("{what}, no index"));

        // The trace cut short under its whole index (a crash, or a copy
        // that stopped).
        std::fs::write(&ipath, &index).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let keep = (bytes.len() as f64 * cut_file) as usize;
        std::fs::write(&path, &bytes[..keep]).unwrap();
        same_as_full(&path, since, until, &format!("{what}, trace cut to {keep} of {} bytes", bytes.len()));
    }
}

/// `pkts` written with `codec` in 4 KiB chunks, to a file in a directory
/// that lasts as long as the first value.
fn small_chunks(codec: Codec, pkts: &[Pkt]) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t");
    let cfg = WriterConfig {
        codec,
        nanos: true,
        block_size: 4096,
        ..WriterConfig::default()
    };
    write_file(&path, cfg, pkts);
    (dir, path)
}

/// A writer killed between two batches of index entries leaves an index
/// behind its file, with no end entry: every packet is still read (the
/// entries, then the tail), and the file is said to be cut even where the
/// stream ends cleanly (gzip members, a plain file), windowed or not.
#[test]
fn an_index_behind_its_file_reads_everything_and_says_the_file_was_not_closed() {
    let pkts = trace(1500, 7, true);
    for codec in [Codec::Gzip, Codec::None, Codec::Lz4, Codec::Zstd] {
        let (_dir, path) = small_chunks(codec, &pkts);
        // The file as a kill after chunk 20 leaves it: the stream up to
        // its last chunk's end (no LZ4 end mark, no zstd frame end), and
        // the index's first batch of 10 entries.
        let index = std::fs::read(index_path(&path)).unwrap();
        let ix = trace::index::parse_index(&index, "t").unwrap();
        let last = ix.entries.iter().rev().find(|e| !e.is_end()).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let stream_end = usize::try_from(last.comp_offset + last.comp_len).unwrap();
        std::fs::write(&path, &bytes[..stream_end]).unwrap();
        std::fs::write(index_path(&path), &index[..HEADER_LEN + 10 * ENTRY_LEN]).unwrap();
        for (since, until) in [(None, None), (Some(T0 + 1_400_000_000), None)] {
            let (r, ws) = open_window(&path, since, until).unwrap();
            assert!(ws.indexed && ws.tail_bytes > 0, "{codec}: {ws:?}");
            let (got, end) = read_to_end(r);
            assert_eq!(
                in_window(&got, since, None),
                in_window(&pkts, since, None),
                "{codec} from {since:?}"
            );
            let end = end.unwrap_or_default();
            assert!(end.contains("cut short"), "{codec}: {end:?}");
        }
    }
}

/// A file cut after it was written, exactly where a chunk ends, under an
/// index that goes on past it: the stream ends cleanly there for gzip and
/// a plain file, and a window after the cut reads no chunk near it, yet
/// every read says the file was cut (found by the property above: a
/// window past the cut once ended quietly).
#[test]
fn a_file_cut_at_a_chunk_end_under_its_index_is_said_to_be_cut() {
    let pkts = trace(1559, 1_396_461_520_021_930_812, false);
    for codec in [Codec::Lz4, Codec::Zstd, Codec::Gzip, Codec::None] {
        let (_dir, path) = small_chunks(codec, &pkts);
        let ix = trace::index::read_index(&index_path(&path)).unwrap();
        let k = ix.entries.len() / 3;
        let mid = &ix.entries[k];
        let before: usize = ix.entries[..=k].iter().map(|e| e.packets as usize).sum();
        let cut = usize::try_from(mid.comp_offset + mid.comp_len).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let after = T0 + (before as u64 + 100) * 1_000_000;
        for (since, until) in [
            (None, None),
            (Some(after), None),
            (None, Some(T0 + 5_000_000)),
        ] {
            let what = format!("{codec} cut at {cut}, window {since:?}..{until:?}");
            let (r, ws) = open_window(&path, since, until).unwrap();
            assert!(ws.indexed && ws.tail_bytes == 0, "{what}: {ws:?}");
            let (got, end) = read_to_end(r);
            // Before the cut, the window's packets; after it, none.
            assert_eq!(
                in_window(&got, since, until),
                in_window(&pkts[..before], since, until),
                "{what}"
            );
            let end = end.unwrap_or_default();
            assert!(end.contains("past its end"), "{what}: {end:?}");
            same_as_full(&path, since, until, &what);
        }
    }
}

/// An uncompressed file is read through its index in runs of whole chunks,
/// each checked in place: a corrupt chunk deep inside a run is cut out,
/// named, and the chunks after it in the same run are delivered.
#[test]
fn a_bad_chunk_inside_a_run_of_raw_chunks_is_cut_out_and_the_rest_delivered() {
    let pkts = trace(1500, 11, true);
    let (_dir, path) = small_chunks(Codec::None, &pkts);
    let ix = trace::index::read_index(&index_path(&path)).unwrap();
    let chunks: Vec<_> = ix
        .entries
        .iter()
        .filter(|e| !e.is_end() && e.packets > 0)
        .collect();
    // 4 KiB chunks and runs of up to 256 KiB: the middle one is inside a run.
    assert!(chunks.len() > 20, "{} chunks", chunks.len());
    let k = chunks.len() / 2;
    let bad = chunks[k];
    let before: usize = chunks[..k].iter().map(|e| e.packets as usize).sum();
    let lost = bad.packets as usize;
    let mut bytes = std::fs::read(&path).unwrap();
    let at = usize::try_from(bad.comp_offset + bad.comp_len / 2).unwrap();
    bytes[at] ^= 0x20;
    std::fs::write(&path, &bytes).unwrap();
    let (r, ws) = open_window(&path, None, None).unwrap();
    assert!(ws.indexed, "{ws:?}");
    let (got, end) = read_to_end(r);
    let mut want = pkts[..before].to_vec();
    want.extend_from_slice(&pkts[before + lost..]);
    assert_eq!(got.len(), want.len());
    assert!(got == want, "the packets around the bad chunk differ");
    let end = end.unwrap_or_default();
    assert!(end.contains(&bad.comp_offset.to_string()), "{end}");
}

/// A UDP packet from 10.0.0.(i % 50 + 1) to 192.0.2.1, port 53.
fn udp(i: u32) -> Pkt {
    let mut d = vec![0u8; 12];
    d.extend_from_slice(&0x0800u16.to_be_bytes());
    d.extend_from_slice(&[0x45, 0, 0, 60, 0, 0, 0, 0, 64, 17, 0, 0]);
    d.extend_from_slice(&[10, 0, 0, (i % 50 + 1) as u8, 192, 0, 2, 1]);
    let sum: u32 = d[14..34]
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    let sum = !(((sum & 0xffff) + (sum >> 16)) as u16);
    d[24..26].copy_from_slice(&sum.to_be_bytes());
    d.extend_from_slice(&[0x30, 0x39, 0, 53, 0, 40, 0, 0]);
    d.extend_from_slice(&[0xab; 32]);
    Pkt {
        link: LinkType::Ethernet,
        ts: T0 + u64::from(i) * 1000,
        orig_len: d.len() as u32,
        data: d,
    }
}

/// A closed file whose file filter rules a query out is read by its
/// header chunk alone, through the end entry's digest rather than the
/// whole seek index; a query it may match reads the chunks that may hold
/// one; another file's key sidecar in its place is not believed (the
/// digests differ): the chunks are read and the run says why.
#[test]
fn a_file_its_file_filter_rules_out_is_read_by_its_header_alone() {
    use trace::keys::{key_v4, keys_path, KeyQuery};
    use trace::window::open_query;
    let pkts: Vec<Pkt> = (0..3000).map(udp).collect();
    let absent = KeyQuery::Key(key_v4(0x0a00_0063));
    let present = KeyQuery::Key(key_v4(0x0a00_0007));
    for codec in [Codec::Lz4, Codec::Zstd, Codec::Gzip, Codec::None] {
        let (_dir, path) = small_chunks(codec, &pkts);
        let (r, ws) = open_query(&path, None, None, &absent, true).unwrap();
        assert_eq!(read_to_end(r).0.len(), 0, "{codec:?}: {ws:?}");
        assert_eq!(ws.chunks_decoded, 1, "{codec:?}: {ws:?}");
        assert!(ws.chunks_skipped_by_keys > 10, "{codec:?}: {ws:?}");
        assert!(ws.keys_problem.is_none(), "{codec:?}: {ws:?}");
        let (r, ws) = open_query(&path, None, None, &present, true).unwrap();
        let got = read_to_end(r).0;
        let want = pkts.iter().filter(|p| p.data[29] == 7).count();
        assert_eq!(got.iter().filter(|p| p.data[29] == 7).count(), want);
        assert!(ws.chunks_decoded > 1, "{codec:?}: {ws:?}");
        let (_other_dir, other) = small_chunks(codec, &pkts[500..1500]);
        std::fs::copy(keys_path(&other), keys_path(&path)).unwrap();
        let (r, ws) = open_query(&path, None, None, &absent, true).unwrap();
        let (got, cut) = read_to_end(r);
        assert_eq!((got.len(), cut), (3000, None), "{codec:?}");
        assert!(ws.chunks_decoded > 10, "{codec:?}: {ws:?}");
        assert!(ws.keys_problem.is_some(), "{codec:?}: {ws:?}");
    }
}
