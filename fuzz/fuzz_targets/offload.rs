//! The gateway's TUN offloads on arbitrary bytes: a TUN read cut into
//! packets, or packets joined for a TUN write (the first byte picks);
//! the properties are `pipeline::gateway::offload::replay`'s.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pipeline::gateway::offload::replay(data));
