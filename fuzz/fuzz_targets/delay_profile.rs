//! The delay line's CDF file parser on arbitrary bytes: points that rise
//! and end at 1, or an error at a line and column that exist; never a
//! panic (delay::profile::fuzz_check, which the test suite replays).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| delay::profile::fuzz_check(data));
