//! The setkey parser on arbitrary text: a configuration or a located error,
//! never a panic; every key it accepts has a length its algorithm takes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match ipsec::parse_setkey(text) {
        Ok(c) => {
            for sa in &c.sas {
                if let Some((alg, key)) = &sa.enc {
                    assert!(alg.key_len_ok(key.len()));
                }
                if let Some((alg, key)) = &sa.auth {
                    assert_eq!(key.len(), alg.key_len());
                }
                assert!(sa.spi >= 256);
            }
        }
        Err(e) => assert!(e.line >= 1 && e.column >= 1),
    }
});
