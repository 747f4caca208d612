//! The summary reader on arbitrary bytes: it must return summaries or an
//! error, never panic; what it accepts must write back to text that reads
//! back to the same summaries.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(summaries) = aguri::parse_summaries(text) {
        let written: String = summaries.iter().map(|s| s.to_string()).collect();
        let back = aguri::parse_summaries(&written).expect("written summaries read back");
        assert_eq!(back, summaries);
    }
});
