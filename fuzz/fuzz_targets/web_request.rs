//! The `web_request` target: see `fuzzing::web_request` (crates/fuzzing), which the test
//! suite also replays over fuzz/corpus/web_request/ and fuzz/regressions/web_request/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::web_request(data));
