//! The `esp_sa` target: see `fuzzing::esp_sa` (crates/fuzzing), which the test
//! suite also replays over fuzz/corpus/esp_sa/ and fuzz/regressions/esp_sa/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::esp_sa(data));
