//! The `store_answer` target: see `fuzzing::store_answer` (crates/fuzzing), which the test
//! suite also replays over fuzz/corpus/store_answer/ and fuzz/regressions/store_answer/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::store_answer(data));
