//! The `nfqueue` fuzz target's corpus (fuzz/corpus/nfqueue), replayed
//! through the same check the target runs, each seed also cut at every
//! length and with every byte flipped.

use std::path::Path;

use capture::nfqueue::fuzz_check;

#[test]
fn the_committed_corpus_replays() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/nfqueue");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let seed = std::fs::read(e.path()).unwrap();
        for cut in 0..=seed.len() {
            fuzz_check(&seed[..cut]);
        }
        for i in 0..seed.len() {
            let mut f = seed.clone();
            f[i] ^= 0xff;
            fuzz_check(&f);
        }
        n += 1;
    }
    assert!(n >= 10, "seed corpus missing: {n} files");
}
