//! The rule parser on arbitrary text: it must return rules or a located
//! error, never panic; parsed rules print back to text that parses to the
//! same rules (paper syntax).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match filter::RuleSet::parse(text) {
        Ok(set) => {
            if set.syntax() == filter::Syntax::Paper {
                let printed: String = set.rules().iter().map(|r| format!("{r}\n")).collect();
                let again = filter::RuleSet::parse(&printed).expect("printed rules parse");
                assert_eq!(again.len(), set.len());
                for (a, b) in again.rules().iter().zip(set.rules()) {
                    assert_eq!(
                        (a.id, a.action, a.src, a.dst, a.proto, a.src_port, a.dst_port),
                        (b.id, b.action, b.src, b.dst, b.proto, b.src_port, b.dst_port)
                    );
                }
            }
        }
        Err(e) => assert!(e.line >= 1 && e.column >= 1),
    }
    let _ = filter::PacketKey::parse(text);
});
