//! The `nfqueue` target: see `fuzzing::nfqueue` (crates/fuzzing), which the test
//! suite also replays over fuzz/corpus/nfqueue/ and fuzz/regressions/nfqueue/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::nfqueue(data));
