//! The `anon` target: see `fuzzing::anon` (crates/fuzzing), which the test
//! suite also replays over fuzz/corpus/anon/ and fuzz/regressions/anon/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::anon(data));
