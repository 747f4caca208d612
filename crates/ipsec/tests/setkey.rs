//! setkey files as KAME and FreeBSD write them, cut and corrupted ones.
//! (The `setkey` fuzz target's corpus is replayed by crates/fuzzing's
//! replay test.)

use std::net::IpAddr;

use ipsec::{parse_setkey, AuthAlg, EncAlg, Level, Mode, PolicyAction, PolicyDir, Protocol, Upper};

/// The paper's configuration: host to host, transport mode, keys by hand,
/// ESP with 3DES and no authenticator, AH with HMAC-SHA-1, both ways.
const PAPER: &str = r#"
# Ariga et al.: KAME, keys set by hand
flush;
spdflush;
add 10.1.0.1 10.2.0.1 esp 0x1001 -m transport
    -E 3des-cbc 0x0123456789abcdef0123456789abcdef0123456789abcdef;
add 10.2.0.1 10.1.0.1 esp 0x1002 -m transport -E 3des-cbc "24-byte-key-for-3des-cbc";
add 10.1.0.1 10.2.0.1 ah 0x2001 -A hmac-sha1 0x0102030405060708090a0b0c0d0e0f1011121314;
add -6 2001:db8::1 2001:db8::2 esp 4096 -m tunnel -r 64 -esn -lh 3600 -ls 3000
    -E aes-gcm-16 0x000102030405060708090a0b0c0d0e0f10111213;
add 10.1.0.1 10.2.0.1 esp 0x3001 -E blowfish-cbc 0x0011223344 -A hmac-sha256 "0123456789abcdef0123456789abcdef";
add 10.1.0.1 10.2.0.1 esp 0x3002 -E null;
spdadd 10.1.0.1 10.2.0.1 any -P out ipsec esp/transport//require ah/transport//require;
spdadd 10.0.0.0/8[any] 192.168.0.0/16[443] tcp -P in ipsec esp/tunnel/10.1.0.1-10.2.0.1/unique:2;
spdadd 2001:db8::/32 2001:db8::2 icmp6 -P out discard;
"#;

#[test]
fn the_papers_configuration_reads_as_kame_meant_it() {
    let c = parse_setkey(PAPER).unwrap();
    assert_eq!(c.sas.len(), 6);
    let esp = &c.sas[0];
    assert_eq!(
        (esp.protocol, esp.spi, esp.mode, esp.line),
        (Protocol::Esp, 0x1001, Mode::Transport, 5)
    );
    assert_eq!(esp.src, "10.1.0.1".parse::<IpAddr>().unwrap());
    let (alg, key) = esp.enc.as_ref().unwrap();
    assert_eq!((*alg, key.len()), (EncAlg::TripleDesCbc, 24));
    assert_eq!(key.expose()[..2], [0x01, 0x23]);
    assert!(
        esp.auth.is_none(),
        "ESP without -A: encryption only, as the paper ran it"
    );
    assert_eq!(
        c.sas[1].enc.as_ref().unwrap().1.expose(),
        b"24-byte-key-for-3des-cbc"
    );
    let ah = &c.sas[2];
    assert_eq!(ah.protocol, Protocol::Ah);
    assert_eq!(ah.auth.as_ref().unwrap().0, AuthAlg::HmacSha1_96);
    let gcm = &c.sas[3];
    assert_eq!(
        (
            gcm.mode,
            gcm.replay_window,
            gcm.esn,
            gcm.lifetime_hard,
            gcm.lifetime_soft
        ),
        (Mode::Tunnel, 64, true, Some(3600), Some(3000))
    );
    assert!(gcm.dst.is_ipv6());
    assert_eq!(
        c.sas[4].enc.as_ref().unwrap().1.len(),
        5,
        "Blowfish's variable key"
    );
    assert_eq!(c.sas[5].enc.as_ref().unwrap().0, EncAlg::Null);

    assert_eq!(c.policies.len(), 3);
    let p = &c.policies[0];
    assert_eq!((p.dir, p.upper), (PolicyDir::Out, Upper::Any));
    let PolicyAction::Ipsec(t) = &p.action else {
        panic!("{p:?}")
    };
    assert_eq!(t.len(), 2);
    assert_eq!(
        (t[0].protocol, t[1].protocol),
        (Protocol::Esp, Protocol::Ah)
    );
    assert_eq!(t[0].level, Level::Require);
    let q = &c.policies[1];
    assert_eq!(
        (q.src.len, q.dst.len, q.src_port, q.dst_port),
        (8, 16, None, Some(443))
    );
    assert_eq!(q.upper, Upper::Protocol(6));
    assert!(q.src.contains("10.9.8.7".parse().unwrap()));
    assert!(!q.src.contains("11.0.0.1".parse().unwrap()));
    let PolicyAction::Ipsec(t) = &q.action else {
        panic!("{q:?}")
    };
    assert_eq!(
        t[0].tunnel.unwrap().1,
        "10.2.0.1".parse::<IpAddr>().unwrap()
    );
    assert_eq!(t[0].level, Level::Unique);
    assert_eq!(c.policies[2].action, PolicyAction::Discard);
}

#[test]
fn keys_never_show_in_debug_output() {
    let c = parse_setkey(PAPER).unwrap();
    let text = format!("{c:?}");
    assert!(text.contains("<24 bytes>"), "{text}");
    for secret in ["0123456789", "24-byte-key", "[1, 35, 69"] {
        assert!(!text.contains(secret), "a key leaked: {secret}");
    }
}

#[test]
fn errors_name_the_line_and_column_and_say_what_was_expected() {
    for (text, at, says) in [
        ("add 10.1.0.1 10.2.0.1 esp 0x1001 -E 3des-cbc 0x0102;", "1:46", "3des-cbc takes 24 bytes"),
        ("add 10.1.0.1 10.2.0.1 esp 0x10 -E null;", "1:27", "reserved"),
        ("add 10.1.0.1 10.2.0.1 ah 0x1001;", "1:1", "needs -A"),
        ("add 10.1.0.1 10.2.0.1 esp 0x1001;", "1:1", "needs -E"),
        ("\nadd 10.1.0.1 ::1 esp 0x1001 -E null;", "2:14", "different IP versions"),
        ("add 10.1.0.1 10.2.0.1 esp 0x1001 -E des-cbc 0x00;", "1:37", "unknown encryption algorithm"),
        (
            "add 10.1.0.1 10.2.0.1 esp 0x1001 -E aes-gcm-16 0x000102030405060708090a0b0c0d0e0f10111213 -A hmac-sha1 0x0102030405060708090a0b0c0d0e0f1011121314;",
            "1:1",
            "authenticates by itself",
        ),
        ("add 10.1.0.1 10.2.0.1 esp 0x1001 -E null", "1:1", "expected `;`"),
        ("add 10.1.0.1 10.2.0.1 esp 0x1001 -E 3des-cbc \"open;", "1:46", "string not closed"),
        ("add 10.1.0.1 10.2.0.1 esp 0x1001 -E 3des-cbc 0x12345;", "1:46", "even number"),
        ("delete 10.1.0.1 10.2.0.1 esp 0x1001;", "1:1", "unknown command"),
        ("spdadd 10.1.0.1 10.2.0.1 any -P sideways none;", "1:33", "in or out"),
        ("spdadd 10.1.0.0/33 10.2.0.1 any -P out none;", "1:8", "prefix length"),
        ("spdadd 10.1.0.1 10.2.0.1 any -P out ipsec esp/tunnel//require;", "1:43", "endpoints"),
        ("add 10.1.0.1 10.2.0.1 esp", "1:1", "expected `;`"),
        ("add 10.1.0.1 10.2.0.1 esp;", "1:26", "found the end"),
    ] {
        let e = parse_setkey(text).expect_err(text);
        let shown = e.to_string();
        assert!(shown.starts_with(&format!("{at}:")), "{text}\n{shown}");
        assert!(shown.contains(says), "{text}\n{shown}");
    }
}

#[test]
fn every_cut_and_every_flipped_byte_is_a_config_or_an_error() {
    let bytes = PAPER.as_bytes();
    for cut in 0..bytes.len() {
        if let Ok(text) = std::str::from_utf8(&bytes[..cut]) {
            match parse_setkey(text) {
                Ok(c) => assert!(c.sas.len() <= 6),
                Err(e) => assert!(e.line >= 1 && e.column >= 1),
            }
        }
    }
    let mut b = bytes.to_vec();
    for i in 0..b.len() {
        for x in [0x01u8, 0x20, 0x80] {
            b[i] ^= x;
            if let Ok(text) = std::str::from_utf8(&b) {
                if let Err(e) = parse_setkey(text) {
                    assert!(e.line >= 1 && e.column >= 1);
                }
            }
            b[i] ^= x;
        }
    }
}
