//! The `delay_profile` target: see `fuzzing::delay_profile` (crates/fuzzing), which the test
//! suite also replays over fuzz/corpus/delay_profile/ and fuzz/regressions/delay_profile/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::delay_profile(data));
