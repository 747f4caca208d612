//! The `summary` target: see `fuzzing::summary` (crates/fuzzing), which the test
//! suite also replays over fuzz/corpus/summary/ and fuzz/regressions/summary/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::summary(data));
