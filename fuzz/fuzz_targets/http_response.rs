//! The web benchmark's HTTP/1.x response parser on arbitrary bytes: fed
//! whole or a byte at a time it gives the same answer, and a complete
//! response never claims more bytes than it was given; never a panic
//! (webbench::http1::fuzz_check, which the test suite replays).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| webbench::http1::fuzz_check(data));
