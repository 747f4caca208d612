//! The `rules` target: see `fuzzing::rules` (crates/fuzzing), which the test
//! suite also replays over fuzz/corpus/rules/ and fuzz/regressions/rules/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::rules(data));
