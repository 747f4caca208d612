//! The `ip xfrm state` reader on arbitrary text: SAs or a located error,
//! never a panic; every SA it reads has keys its algorithms take, a cipher
//! if it is ESP and none if it is AH. read_sa_file, which picks the format,
//! never panics either.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match ipsec::parse_xfrm_state(text) {
        Ok(sas) => {
            for sa in &sas {
                match (&sa.protocol, &sa.enc) {
                    (ipsec::Protocol::Esp, Some((alg, key))) => assert!(alg.key_len_ok(key.len())),
                    (ipsec::Protocol::Ah, None) => assert!(sa.auth.is_some()),
                    _ => panic!("{sa:?}"),
                }
                if let Some((alg, key)) = &sa.auth {
                    assert_eq!(key.len(), alg.key_len());
                }
                assert!(sa.spi >= 256);
            }
        }
        Err(e) => assert!(e.line >= 1 && e.column >= 1),
    }
    if let Err(e) = ipsec::read_sa_file(text) {
        assert!(e.line >= 1 && e.column >= 1);
    }
});
