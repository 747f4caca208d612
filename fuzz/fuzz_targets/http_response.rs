//! The `http_response` target: see `fuzzing::http_response` (crates/fuzzing), which the test
//! suite also replays over fuzz/corpus/http_response/ and fuzz/regressions/http_response/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::http_response(data));
