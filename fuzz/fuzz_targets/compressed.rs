//! Fuzzes `TraceReader::from_read`: codec detection, the gzip/zstd/LZ4 decoders
//! (kansoku's own LZ4 frame reader above all) and the formats inside.
//! Every record is drained and looked at; the reader must end (Ok(None) or
//! an error) without panicking, hanging or allocating without bound.
#![no_main]

use std::io::Cursor;

use trace::{Record, TraceReader};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(mut r) = TraceReader::from_read(Box::new(Cursor::new(data.to_vec()))) else {
        return;
    };
    let mut sum = 0usize;
    while let Ok(Some(rec)) = r.next_record() {
        sum += match rec {
            Record::Packet(p) => p.data.len() + p.options.len() + p.ts_nanos() as usize % 2,
            Record::Block(b) => b.body.len(),
            Record::Interface(i) => i.options.len(),
            Record::Section(s) => s.options.len(),
        };
    }
    std::hint::black_box((sum, r.truncation(), r.offset()));
});
