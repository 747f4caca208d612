//! The `xfrm` target: see `fuzzing::xfrm` (crates/fuzzing), which the test
//! suite also replays over fuzz/corpus/xfrm/ and fuzz/regressions/xfrm/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::xfrm(data));
