//! The `setkey` target: see `fuzzing::setkey` (crates/fuzzing), which the test
//! suite also replays over fuzz/corpus/setkey/ and fuzz/regressions/setkey/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::setkey(data));
