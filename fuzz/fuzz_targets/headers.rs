//! The header-trace reader (`filter match`, `bench filter`) on arbitrary
//! bytes: ClassBench text, zstd-compressed or not, or a packet trace. It
//! must give batches of keys, a located error, or a cut, never panic; every
//! batch is at most `BATCH` keys with one expected result per key (text).
#![no_main]

use std::io::Cursor;

use libfuzzer_sys::fuzz_target;
use pipeline::source::headers::BATCH;
use pipeline::{HeaderSource, Report, Source};

fuzz_target!(|data: &[u8]| {
    let Ok(mut src) = HeaderSource::from_read(Box::new(Cursor::new(data.to_vec())), "fuzz", 4, None)
    else {
        return;
    };
    let text = src.has_expected();
    while let Ok(Some(h)) = src.next() {
        assert!(!h.keys.is_empty() && h.keys.len() <= BATCH);
        if text {
            assert_eq!(h.expected.len(), h.keys.len());
            assert!(h.expected.iter().flatten().all(|&m| m < 4));
        }
    }
    let mut report = Report::default();
    src.close(&mut report);
});
