//! The `headers` target: see `fuzzing::headers` (crates/fuzzing), which the test
//! suite also replays over fuzz/corpus/headers/ and fuzz/regressions/headers/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::headers(data));
