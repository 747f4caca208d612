//! The `key_index` target: see `fuzzing::key_index` (crates/fuzzing), which
//! the test suite also replays over fuzz/corpus/key_index/ and
//! fuzz/regressions/key_index/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::key_index(data));
