//! Replays the fuzz seed corpora (and any crash found by the fuzzers and
//! committed under fuzz/regressions/) through the readers, as the fuzz targets
//! do, so that every CI run checks them without needing cargo-fuzz.

use std::io::Cursor;
use std::path::Path;

use trace::{Record, TraceReader};

fn drain(mut r: TraceReader) -> usize {
    let mut n = 0;
    // The loop ends: every call consumes input or ends the stream.
    while let Ok(Some(rec)) = r.next_record() {
        if let Record::Packet(p) = rec {
            n += p.data.len();
        }
    }
    n
}

fn inputs(dirs: &[&str]) -> Vec<Vec<u8>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut v = Vec::new();
    for d in dirs {
        let Ok(entries) = std::fs::read_dir(root.join(d)) else {
            continue;
        };
        for e in entries.flatten() {
            if e.path().is_file() {
                v.push(std::fs::read(e.path()).expect("read corpus file"));
            }
        }
    }
    v
}

#[test]
fn seed_corpora_and_regressions_read_without_panic() {
    let all = inputs(&[
        "corpus/pcap",
        "corpus/pcapng",
        "corpus/compressed",
        "regressions/pcap",
        "regressions/pcapng",
        "regressions/compressed",
    ]);
    assert!(all.len() >= 9, "seed corpora missing: {} files", all.len());
    let mut readable = 0;
    for bytes in &all {
        if let Ok(r) = TraceReader::from_read(Box::new(Cursor::new(bytes.clone()))) {
            if drain(r) > 0 {
                readable += 1;
            }
        }
        if let Ok(r) = TraceReader::from_decompressed(Box::new(Cursor::new(bytes.clone()))) {
            drain(r);
        }
    }
    // The seeds are real traces: most of them hold packets.
    assert!(
        readable * 2 > all.len(),
        "only {readable} of {} seeds read packets",
        all.len()
    );
}
