//! The `ipsec_inbound` target: see `fuzzing::ipsec_inbound` (crates/fuzzing), which the test
//! suite also replays over fuzz/corpus/ipsec_inbound/ and fuzz/regressions/ipsec_inbound/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::ipsec_inbound(data));
