//! The `slice` target: see `fuzzing::slice` (crates/fuzzing), which the test
//! suite also replays over fuzz/corpus/slice/ and fuzz/regressions/slice/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::slice(data));
