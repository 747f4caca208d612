//! The `http_response` fuzz target's corpus (fuzz/corpus/http_response),
//! replayed through the same check the target runs, each seed also cut at
//! every length.

use std::path::Path;

use webbench::http1::fuzz_check;

#[test]
fn the_committed_corpus_replays() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/http_response");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let seed = std::fs::read(e.path()).unwrap();
        for cut in 0..=seed.len() {
            fuzz_check(&seed[..cut]);
        }
        n += 1;
    }
    assert!(n >= 10, "seed corpus missing: {n} files");
}
