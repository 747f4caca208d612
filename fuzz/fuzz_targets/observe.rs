//! The `observe` target: see `fuzzing::observe` (crates/fuzzing), which the test
//! suite also replays over fuzz/corpus/observe/ and fuzz/regressions/observe/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::observe(data));
