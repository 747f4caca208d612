//! The `compressed` target: see `fuzzing::compressed` (crates/fuzzing), which the test
//! suite also replays over fuzz/corpus/compressed/ and fuzz/regressions/compressed/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::compressed(data));
