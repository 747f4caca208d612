//! NFQUEUE netlink messages on arbitrary bytes: packets whose payloads lie
//! inside the datagram, or an error; never a panic
//! (capture::nfqueue::fuzz_check, which the test suite replays).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| capture::nfqueue::fuzz_check(data));
