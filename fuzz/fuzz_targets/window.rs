//! The `window` target: see `fuzzing::window` (crates/fuzzing), which the test
//! suite also replays over fuzz/corpus/window/ and fuzz/regressions/window/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::window(data));
