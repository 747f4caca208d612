//! The `index` target: see `fuzzing::index` (crates/fuzzing), which the test
//! suite also replays over fuzz/corpus/index/ and fuzz/regressions/index/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::index(data));
