//! The esp_sa reader on arbitrary text: SAs or a located error, never a
//! panic; every SA it reads has a key its algorithm takes, and what the
//! writer makes of them reads back as the same SAs.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match ipsec::parse_esp_sa(text) {
        Ok(sas) => {
            for sa in &sas {
                if let Some((alg, key)) = &sa.enc {
                    assert!(alg.key_len_ok(key.len()));
                }
                if let Some((alg, key)) = &sa.auth {
                    assert_eq!(key.len(), alg.key_len());
                }
                assert!(sa.spi >= 256);
            }
            let written = ipsec::write_esp_sa(&sas);
            let again = ipsec::parse_esp_sa(&written).expect("what write_esp_sa writes reads back");
            let kept: Vec<_> = sas
                .iter()
                .filter(|sa| ipsec::esp_sa_unwritable(sa).is_none())
                .collect();
            assert_eq!(again.len(), kept.len());
            for (a, b) in again.iter().zip(kept) {
                assert_eq!((a.src, a.dst, a.spi), (b.src, b.dst, b.spi));
                assert_eq!((&a.enc, &a.auth), (&b.enc, &b.auth));
            }
        }
        Err(e) => assert!(e.line >= 1 && e.column >= 1),
    }
});
