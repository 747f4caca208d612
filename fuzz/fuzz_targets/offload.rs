//! The `offload` target: see `fuzzing::offload` (crates/fuzzing), which the test
//! suite also replays over fuzz/corpus/offload/ and fuzz/regressions/offload/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::offload(data));
