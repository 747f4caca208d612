//! The `bpf_expression` target: see `fuzzing::bpf_expression` (crates/fuzzing), which the test
//! suite also replays over fuzz/corpus/bpf_expression/ and fuzz/regressions/bpf_expression/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::bpf_expression(data));
