//! The web benchmark's server-side observer (ENMA's connection tracking) on
//! arbitrary frames: no panic, and its counts stay consistent
//! (webbench::observe::fuzz_check, which the test suite replays).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| webbench::observe::fuzz_check(data));
