//! The `delay_profile` fuzz target's corpus (fuzz/corpus/delay_profile),
//! replayed through the same check the target runs.

use std::path::Path;

#[test]
fn the_committed_corpus_replays() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/delay_profile");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        delay::profile::fuzz_check(&std::fs::read(e.path()).unwrap());
        n += 1;
    }
    assert!(n >= 10, "seed corpus missing: {n} files");
}
