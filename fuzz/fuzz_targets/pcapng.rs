//! The `pcapng` target: see `fuzzing::pcapng` (crates/fuzzing), which the test
//! suite also replays over fuzz/corpus/pcapng/ and fuzz/regressions/pcapng/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::pcapng(data));
