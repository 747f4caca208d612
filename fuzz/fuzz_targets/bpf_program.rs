//! The `bpf_program` target: see `fuzzing::bpf_program` (crates/fuzzing), which the test
//! suite also replays over fuzz/corpus/bpf_program/ and fuzz/regressions/bpf_program/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::bpf_program(data));
