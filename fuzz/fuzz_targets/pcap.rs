//! The `pcap` target: see `fuzzing::pcap` (crates/fuzzing), which the test
//! suite also replays over fuzz/corpus/pcap/ and fuzz/regressions/pcap/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::pcap(data));
