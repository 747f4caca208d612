//! The `observe` fuzz target's corpus (fuzz/corpus/observe), replayed
//! through the same check the target runs, each seed also cut at every
//! length and with every byte flipped in turn.

use std::path::Path;

use webbench::observe::fuzz_check;

#[test]
fn the_committed_corpus_replays_cut_and_flipped() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/observe");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let seed = std::fs::read(e.path()).unwrap();
        for cut in 0..=seed.len() {
            fuzz_check(&seed[..cut]);
        }
        let mut flipped = seed.clone();
        for i in 0..seed.len() {
            flipped[i] ^= 0xff;
            fuzz_check(&flipped);
            flipped[i] ^= 0xff;
        }
        n += 1;
    }
    assert!(n >= 7, "seed corpus missing: {n} files");
}
