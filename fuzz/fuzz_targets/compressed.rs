//! Fuzzes `TraceReader::from_read`: codec detection, the gzip/zstd/LZ4 decoders
//! (kansoku's own LZ4 frame reader above all) and the formats inside.
#![no_main]

use std::io::Cursor;

use trace::TraceReader;

#[path = "drain.rs"]
mod drain;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(r) = TraceReader::from_read(Box::new(Cursor::new(data.to_vec()))) {
        drain::drain(r);
    }
});
