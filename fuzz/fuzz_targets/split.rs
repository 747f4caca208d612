//! The `split` target: see `fuzzing::split` (crates/fuzzing), which the test
//! suite also replays over fuzz/corpus/split/ and fuzz/regressions/split/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::split(data));
