//! Shared by the reader fuzz targets: drain every record and look at it.
//! The reader must end (Ok(None) or an error) without panicking, hanging or
//! allocating without bound.

use trace::{Record, TraceReader};

pub fn drain(mut r: TraceReader) {
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
}
