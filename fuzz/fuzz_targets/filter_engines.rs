//! The `filter_engines` target: see `fuzzing::filter_engines` (crates/fuzzing), which the test
//! suite also replays over fuzz/corpus/filter_engines/ and fuzz/regressions/filter_engines/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::filter_engines(data));
