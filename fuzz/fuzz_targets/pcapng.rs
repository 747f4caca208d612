//! Fuzzes the pcapng path of `TraceReader`: plain bytes, no codec detection.
#![no_main]

use std::io::Cursor;

use trace::TraceReader;

#[path = "drain.rs"]
mod drain;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(r) = TraceReader::from_decompressed(Box::new(Cursor::new(data.to_vec()))) {
        drain::drain(r);
    }
});
