//! Wireshark's esp_sa and `ip xfrm state` output: setkey SAs written as
//! esp_sa and read back, tshark 4.0 decrypting with a written table, xfrm
//! output for every algorithm, format detection, cut and corrupted files,
//! keys kept out of messages, and the fuzz seed corpora (fuzz/corpus/esp_sa,
//! fuzz/corpus/xfrm) replayed as the fuzz targets do.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use ipsec::config::DEFAULT_REPLAY_WINDOW;
use ipsec::{
    esp_sa_unwritable, parse_esp_sa, parse_setkey, parse_xfrm_state, read_sa_file, sa_format,
    write_esp_sa, AuthAlg, EncAlg, Mode, Protocol, Sa, SaFormat,
};

/// The SAs of tests/data/esp_sa_check.pcap (tests/data/make_esp_pcap.py
/// encrypts one packet with each ESP SA but 0x1003), and two that esp_sa
/// cannot hold.
const ESP_SA_CHECK: &str = r#"
add 10.1.0.1 10.2.0.1 esp 0x1001 -E 3des-cbc 0x0123456789abcdef0123456789abcdef0123456789abcdef
    -A hmac-sha1 0x0102030405060708090a0b0c0d0e0f1011121314;
add 10.1.0.1 10.2.0.1 esp 0x1002 -m tunnel -E aes-gcm-16 0x000102030405060708090a0b0c0d0e0fcafebabe;
add 10.1.0.1 10.2.0.1 esp 0x1003 -E chacha20-poly1305
    0x000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1fdeadbeef;
add 10.1.0.1 10.2.0.1 esp 0x1004 -E aes-cbc 0x101112131415161718191a1b1c1d1e1f
    -A hmac-sha256 0x202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f;
add 10.1.0.1 10.2.0.1 esp 0x1005 -E blowfish-cbc 0x404142434445464748494a4b4c4d4e4f;
add 10.1.0.1 10.2.0.1 esp 0x1006 -E null -A hmac-sha1 0x5051525354555657585960616263646566676869;
add -6 2001:db8::1 2001:db8::2 esp 0x1007
    -E aes-cbc 0x707172737475767778797a7b7c7d7e7f808182838485868788898a8b8c8d8e8f;
add 10.1.0.1 10.2.0.1 ah 0x2001 -A hmac-sha1 0x6162636465666768696a6b6c6d6e6f7071727374;
add 10.1.0.1 10.2.0.1 esp 0x3001 -E blowfish-cbc 0x0011223344 -esn;
"#;

/// Every key of ESP_SA_CHECK and XFRM, in hex, to look for where none
/// should be.
const KEYS: [&str; 12] = [
    "0123456789abcdef0123456789abcdef0123456789abcdef",
    "0102030405060708090a0b0c0d0e0f1011121314",
    "000102030405060708090a0b0c0d0e0fcafebabe",
    "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1fdeadbeef",
    "101112131415161718191a1b1c1d1e1f",
    "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f",
    "404142434445464748494a4b4c4d4e4f",
    "5051525354555657585960616263646566676869",
    "707172737475767778797a7b7c7d7e7f808182838485868788898a8b8c8d8e8f",
    "6162636465666768696a6b6c6d6e6f7071727374",
    "0011223344",
    "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7",
];

/// Panics if `text` holds 10 or more hex digits in a row of any key.
fn assert_no_key(text: &str) {
    let lower = text.to_ascii_lowercase();
    for k in KEYS {
        for w in k.as_bytes().windows(10) {
            let w = std::str::from_utf8(w).unwrap();
            assert!(!lower.contains(w), "a key shows: {w} in {text}");
        }
    }
}

/// What esp_sa carries of an SA: addresses, protocol, SPI, algorithms and
/// keys.
type Carried = (
    IpAddr,
    IpAddr,
    Protocol,
    u32,
    Option<(EncAlg, Vec<u8>)>,
    Option<(AuthAlg, Vec<u8>)>,
);

fn carried(sa: &Sa) -> Carried {
    (
        sa.src,
        sa.dst,
        sa.protocol,
        sa.spi,
        sa.enc.as_ref().map(|(a, k)| (*a, k.expose().to_vec())),
        sa.auth.as_ref().map(|(a, k)| (*a, k.expose().to_vec())),
    )
}

#[test]
fn setkey_sas_written_as_esp_sa_read_back_the_same() {
    let cfg = parse_setkey(ESP_SA_CHECK).unwrap();
    let text = write_esp_sa(&cfg.sas);
    let back = parse_esp_sa(&text).unwrap();
    let writable: Vec<&Sa> = cfg
        .sas
        .iter()
        .filter(|sa| esp_sa_unwritable(sa).is_none())
        .collect();
    assert_eq!(writable.len(), 6, "{text}");
    assert_eq!(back.len(), writable.len());
    for (b, a) in back.iter().zip(&writable) {
        assert_eq!(carried(b), carried(a));
        // What esp_sa does not carry comes back as documented.
        assert_eq!(
            (
                b.mode,
                b.replay_window,
                b.esn,
                b.lifetime_hard,
                b.reqid,
                b.encap_udp
            ),
            (
                Mode::Transport,
                DEFAULT_REPLAY_WINDOW,
                false,
                None,
                None,
                None
            )
        );
    }
    // Each SA is a row or a comment saying why not: none dropped silently.
    let comments: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("# not written"))
        .collect();
    assert_eq!(comments.len(), 3, "{text}");
    assert!(comments[0].contains("0x00001003") && comments[0].contains("ChaCha20-Poly1305"));
    assert!(comments[1].contains("AH SA 0x00002001") && comments[1].contains("ESP SAs only"));
    assert!(comments[2].contains("0x00003001") && comments[2].contains("16-byte Blowfish"));
    assert_eq!(
        cfg.sas
            .iter()
            .filter(|sa| esp_sa_unwritable(sa).is_some())
            .count(),
        3
    );
}

#[test]
fn rows_are_wiresharks_own_strings() {
    let cfg = parse_setkey(ESP_SA_CHECK).unwrap();
    let text = write_esp_sa(&cfg.sas);
    let rows: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(
        rows,
        [
            r#""IPv4","10.1.0.1","10.2.0.1","0x00001001","TripleDES-CBC [RFC2451]","0x0123456789abcdef0123456789abcdef0123456789abcdef","HMAC-SHA-1-96 [RFC2404]","0x0102030405060708090a0b0c0d0e0f1011121314""#,
            r#""IPv4","10.1.0.1","10.2.0.1","0x00001002","AES-GCM with 16 octet ICV [RFC4106]","0x000102030405060708090a0b0c0d0e0fcafebabe","NULL","""#,
            r#""IPv4","10.1.0.1","10.2.0.1","0x00001004","AES-CBC [RFC3602]","0x101112131415161718191a1b1c1d1e1f","HMAC-SHA-256-128 [RFC4868]","0x202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f""#,
            r#""IPv4","10.1.0.1","10.2.0.1","0x00001005","BLOWFISH-CBC [RFC2451]","0x404142434445464748494a4b4c4d4e4f","NULL","""#,
            r#""IPv4","10.1.0.1","10.2.0.1","0x00001006","NULL","","HMAC-SHA-1-96 [RFC2404]","0x5051525354555657585960616263646566676869""#,
            r#""IPv6","2001:db8::1","2001:db8::2","0x00001007","AES-CBC [RFC3602]","0x707172737475767778797a7b7c7d7e7f808182838485868788898a8b8c8d8e8f","NULL","""#,
        ]
    );
    let esn = parse_setkey(
        "add 10.1.0.1 10.2.0.1 esp 0x1001 -esn -E aes-cbc 0x101112131415161718191a1b1c1d1e1f;",
    )
    .unwrap();
    let t = write_esp_sa(&esn.sas);
    assert!(
        t.contains("# 0x00001001 uses 64-bit sequence numbers (ESN)"),
        "{t}"
    );
    assert_eq!(parse_esp_sa(&t).unwrap().len(), 1);
}

/// Whether tshark runs here. Without it the test skips, except under CI,
/// where scripts/install-deps.sh installs it and its absence is a failure.
fn have_tshark() -> bool {
    testkit::require_tool("tshark")
}

/// A fresh directory for a test.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kansoku-ipsec-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn tshark_decrypts_with_the_esp_sa_file_we_write() {
    if !have_tshark() {
        return;
    }
    let home = scratch("tshark-home");
    let profile = home.join(".config/wireshark");
    std::fs::create_dir_all(&profile).unwrap();
    let cfg = parse_setkey(ESP_SA_CHECK).unwrap();
    std::fs::write(profile.join("esp_sa"), write_esp_sa(&cfg.sas)).unwrap();
    let pcap = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/esp_sa_check.pcap");
    let out = Command::new("tshark")
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .args(["-n", "-r"])
        .arg(&pcap)
        .args([
            "-o",
            "esp.enable_encryption_decode:TRUE",
            "-o",
            "esp.enable_authentication_check:TRUE",
            "-o",
            "data.show_as_text:TRUE",
            "-T",
            "fields",
            "-e",
            "esp.spi",
            "-e",
            "udp.srcport",
            "-e",
            "esp.icv_good",
            "-e",
            "data.text",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stderr}");
    // tshark reports a table it cannot load on stderr and goes on.
    for bad in ["esp_sa", "ESP SAs", "UAT", "rror", "nvalid"] {
        assert!(!stderr.contains(bad), "tshark complained: {stderr}");
    }
    // Decrypted (the UDP port is the SPI's low 16 bits), the ICV checked
    // where there is one.
    let text = "kansoku esp_sa check";
    let want = [
        format!("0x00001001\t4097\t1\t{text}"),
        format!("0x00001002\t4098\t1\t{text}"),
        format!("0x00001004\t4100\t1\t{text}"),
        format!("0x00001005\t4101\t\t{text}"),
        format!("0x00001006\t4102\t1\t{text}"),
        format!("0x00001007\t4103\t\t{text}"),
    ];
    assert_eq!(stdout.lines().collect::<Vec<_>>(), want, "{stderr}");
    let _ = std::fs::remove_dir_all(&home);
}

#[test]
fn esp_sa_rows_of_other_writers_and_later_wiresharks() {
    let text = concat!(
        "# This file is automatically generated, DO NOT MODIFY.\n",
        "\"IPv4\",\"10.1.0.1\",\"10.2.0.1\",\"4097\",\"AES-CBC [RFC3602]\",\"0X101112131415161718191a1b1c1d1e1\",\"HMAC-SHA-1-96 [RFC2404]\",\"20-byte-secret-key!!\"\r\n",
        "  \"IPv6\" , \"2001:db8::1\",\"2001:db8::2\",\"010001\",\"NULL\",\"0x\",\"NULL\",\n",
        "\"Any\",\"10.1.0.1\",\"10.2.0.1\",\"0x00001003\",\"ChaCha20 with Poly1305 [RFC7634]\",\"0x000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1fdeadbeef\",\"NULL\",\"\",\"64-bit\",\"0\"\n",
        "\"IPv4\",\"10.1.0.1\",\"10.2.0.1\",\"0x1004\",\"AES-CBC \\x5bRFC3602]\",\"\\x30x1011121314151617\\061\\x38191a1b1c1d1e1f\",\"NULL\",\"\"\n",
    );
    let sas = parse_esp_sa(text).unwrap();
    assert_eq!(sas.len(), 4);
    // An odd number of hex digits has a 0 put in front, as Wireshark does.
    let (alg, k) = sas[0].enc.as_ref().unwrap();
    assert_eq!((*alg, k.len(), k.expose()[0]), (EncAlg::AesCbc, 16, 0x01));
    assert_eq!(sas[0].spi, 4097);
    assert_eq!(
        sas[0].auth.as_ref().unwrap().1.expose(),
        b"20-byte-secret-key!!"
    );
    assert_eq!(sas[0].line, 2);
    // Octal SPI, `0x` as no key.
    assert_eq!((sas[1].spi, sas[1].dst.is_ipv6()), (0o10001, true));
    assert_eq!(sas[1].enc.as_ref().unwrap().0, EncAlg::Null);
    assert!(sas[1].auth.is_none());
    assert_eq!(sas[2].enc.as_ref().unwrap().0, EncAlg::ChaCha20Poly1305);
    assert!(sas[2].esn);
    // Escapes as epan/uat.c writes them.
    assert_eq!(sas[3].enc.as_ref().unwrap().1.expose()[..2], [0x10, 0x11]);
    assert_eq!(sas[3].enc.as_ref().unwrap().0, EncAlg::AesCbc);
}

#[test]
fn esp_sa_errors_name_the_line_and_column_and_say_what_was_expected() {
    let row = |f: [&str; 8]| format!("\"{}\"", f.join("\",\""));
    let ok = [
        "IPv4",
        "10.1.0.1",
        "10.2.0.1",
        "0x00001001",
        "AES-CBC [RFC3602]",
        "0x101112131415161718191a1b1c1d1e1f",
        "HMAC-SHA-1-96 [RFC2404]",
        "0x0102030405060708090a0b0c0d0e0f1011121314",
    ];
    parse_esp_sa(&row(ok)).unwrap();
    let with = |i: usize, v: &'static str| {
        let mut f = ok;
        f[i] = v;
        row(f)
    };
    for (text, at, says) in [
        (with(0, "IPv5"), "1:1", "expected IPv4 or IPv6"),
        (with(1, "10.1.*.*"), "1:8", "wildcard"),
        (with(2, "10.2.0.0/16"), "1:19", "wildcard or prefix"),
        (with(2, "2001:db8::2"), "1:19", "Protocol is IPv4"),
        (with(3, "0x0000100*"), "1:30", "wildcard SPI"),
        (with(3, "0x10"), "1:30", "reserved"),
        (with(3, "0xfffffffff"), "1:30", "expected an SPI"),
        (
            with(4, "DES-CBC [RFC2405]"),
            "1:43",
            "not a cipher kansoku has",
        ),
        (with(4, "AES-CBC"), "1:43", "unknown Encryption"),
        (
            with(5, "0x1011"),
            "1:63",
            "AES-CBC [RFC3602] takes 16, 24 or 32 bytes, this key has 2",
        ),
        (with(5, "0x10zz"), "1:63", "hex digits"),
        (
            with(6, "HMAC-MD5-96 [RFC2403]"),
            "1:100",
            "not an integrity algorithm kansoku has",
        ),
        (
            with(7, "0x0102"),
            "1:126",
            "hmac-sha1 takes a 20-byte key, this one has 2",
        ),
        (
            with(4, "AES-GCM with 16 octet ICV [RFC4106]"),
            "1:81",
            "takes 20, 28 or 36 bytes",
        ),
        (
            format!("{},\"64-bit\",\"0\",\"x\"", row(ok)),
            "1:184",
            "more fields",
        ),
        (
            format!("{},\"65-bit\"", row(ok)),
            "1:171",
            "32-bit or 64-bit",
        ),
        (
            "\"IPv4\",\"10.1.0.1\"".to_string(),
            "1:18",
            "expected 8 fields",
        ),
        ("\"IPv4\" \"10.1.0.1\"".to_string(), "1:8", "expected `,`"),
        ("\"IPv4\",10.1.0.1".to_string(), "1:8", "double-quoted"),
        ("\n\n\"IPv4\",\"10.1.0.1".to_string(), "3:8", "not closed"),
    ] {
        let e = parse_esp_sa(&text).expect_err(&text);
        let shown = e.to_string();
        assert!(shown.starts_with(&format!("{at}:")), "{text}\n{shown}");
        assert!(shown.contains(says), "{text}\n{shown}");
        assert_no_key(&shown);
    }
    let gcm_with_auth = {
        let mut f = ok;
        f[4] = "AES-GCM with 16 octet ICV [RFC4106]";
        f[5] = "0x000102030405060708090a0b0c0d0e0fcafebabe";
        row(f)
    };
    let e = parse_esp_sa(&gcm_with_auth).unwrap_err().to_string();
    assert!(e.starts_with("1:126:") && e.contains("must be NULL"), "{e}");
}

/// `ip xfrm state` as iproute2 6.1 prints it, one entry per algorithm.
const XFRM: &str = "src 10.1.0.1 dst 10.2.0.1
\tproto esp spi 0x00001001 reqid 1 mode transport
\treplay-window 32 flag af-unspec
\tauth-trunc hmac(sha1) 0x0102030405060708090a0b0c0d0e0f1011121314 96
\tenc cbc(des3_ede) 0x0123456789abcdef0123456789abcdef0123456789abcdef
\tanti-replay context: seq 0x0, oseq 0x0, bitmap 0x00000000
\tsel src 0.0.0.0/0 dst 0.0.0.0/0 
src 10.1.0.1 dst 10.2.0.1
\tproto esp spi 0x00001002 reqid 2 mode tunnel
\treplay-window 0 flag af-unspec esn
\taead rfc4106(gcm(aes)) 0x000102030405060708090a0b0c0d0e0fcafebabe 128
\tanti-replay esn context:
\t seq-hi 0x0, seq 0x0, oseq-hi 0x0, oseq 0x0
\t replay_window 128, bitmap-length 4
\t 00000000 00000000 00000000 00000000 
\tsel src 0.0.0.0/0 dst 0.0.0.0/0 
src 2001:db8::1 dst 2001:db8::2
\tproto esp spi 0x00001003 reqid 0 mode transport
\treplay-window 32 
\taead rfc7539esp(chacha20,poly1305) 0x000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1fdeadbeef 128
\tanti-replay context: seq 0x0, oseq 0x0, bitmap 0x00000000
\tsel src ::/0 dst ::/0 
src 10.1.0.1 dst 10.2.0.1
\tproto esp spi 0x00001004 reqid 4 mode transport
\treplay-window 32 flag af-unspec
\tauth-trunc hmac(sha256) 0x202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f 128
\tenc cbc(aes) 0x101112131415161718191a1b1c1d1e1f
\tencap type espinudp sport 4500 dport 4501 addr 0.0.0.0
\tanti-replay context: seq 0x0, oseq 0x0, bitmap 0x00000000
\tsel src 0.0.0.0/0 dst 0.0.0.0/0 
src 10.1.0.1 dst 10.2.0.1
\tproto esp spi 0x00001005 reqid 5 mode transport
\treplay-window 0 
\tenc cbc(blowfish) 0x0011223344
\tanti-replay context: seq 0x0, oseq 0x0, bitmap 0x00000000
\tsel src 0.0.0.0/0 dst 0.0.0.0/0 
src 10.1.0.1 dst 10.2.0.1
\tproto esp spi 0x00001006 reqid 6 mode transport
\treplay-window 32 
\tauth-trunc hmac(sha1) 0x5051525354555657585960616263646566676869 96
\tenc ecb(cipher_null) 
\tanti-replay context: seq 0x0, oseq 0x0, bitmap 0x00000000
\tsel src 0.0.0.0/0 dst 0.0.0.0/0 
";

/// `ip -s xfrm state`: an AH SA with lifetimes, and an ESP SA whose
/// integrity is `auth` (not `auth-trunc`).
const XFRM_STATS: &str = "src 10.1.0.1 dst 10.2.0.1
\tproto ah spi 0x00002001(8193) reqid 7(0x00000007) mode transport
\treplay-window 64 seq 0x00000000 flag  (0x00000000)
\tauth-trunc hmac(sha1) 0x6162636465666768696a6b6c6d6e6f7071727374 (160 bits) 96
\tanti-replay context: seq 0x0, oseq 0x0, bitmap 0x00000000
\tsel src 0.0.0.0/0 dst 0.0.0.0/0 uid 0
\tlifetime config:
\t  limit: soft (INF)(bytes), hard (INF)(bytes)
\t  limit: soft (INF)(packets), hard (INF)(packets)
\t  expire add: soft 3000(sec), hard 3600(sec)
\t  expire use: soft 0(sec), hard 0(sec)
\tlifetime current:
\t  0(bytes), 0(packets)
\t  add 2024-05-01 12:00:00 use -
\tstats:
\t  replay-window 0 replay 0 failed 0
src 10.1.0.1 dst 10.2.0.1
\tproto esp spi 0x00001008(4104) reqid 0(0x00000000) mode tunnel
\treplay-window 32 seq 0x00000000 flag af-unspec (0x00100000)
\tauth hmac(sha1) 0x0102030405060708090a0b0c0d0e0f1011121314 (160 bits)
\tenc cbc(aes) 0x707172737475767778797a7b7c7d7e7f808182838485868788898a8b8c8d8e8f (256 bits)
\tencap espinudp 4500 4500 0.0.0.0
\tlastused 2024-05-01 12:00:01
\tanti-replay context: seq 0x0, oseq 0x0, bitmap 0x00000000
\tsel src 0.0.0.0/0 dst 0.0.0.0/0 uid 0
\tlifetime config:
\t  limit: soft (INF)(bytes), hard (INF)(bytes)
\t  limit: soft (INF)(packets), hard (INF)(packets)
\t  expire add: soft 0(sec), hard 0(sec)
\t  expire use: soft 0(sec), hard 0(sec)
\tlifetime current:
\t  84(bytes), 1(packets)
\t  add 2024-05-01 12:00:00 use 2024-05-01 12:00:01
\tstats:
\t  replay-window 0 replay 0 failed 0
";

#[test]
fn xfrm_state_output_reads_for_every_algorithm() {
    let sas = parse_xfrm_state(XFRM).unwrap();
    let got: Vec<_> = sas
        .iter()
        .map(|sa| {
            (
                sa.spi,
                sa.enc.as_ref().map(|(a, k)| (*a, k.len())),
                sa.auth.as_ref().map(|(a, k)| (*a, k.len())),
                sa.mode,
                sa.replay_window,
                sa.esn,
                sa.reqid,
                sa.encap_udp,
                sa.line,
            )
        })
        .collect();
    use EncAlg::*;
    use Mode::*;
    assert_eq!(
        got,
        [
            (
                0x1001,
                Some((TripleDesCbc, 24)),
                Some((AuthAlg::HmacSha1_96, 20)),
                Transport,
                32,
                false,
                Some(1),
                None,
                1
            ),
            (
                0x1002,
                Some((AesGcm16, 20)),
                None,
                Tunnel,
                128,
                true,
                Some(2),
                None,
                8
            ),
            (
                0x1003,
                Some((ChaCha20Poly1305, 36)),
                None,
                Transport,
                32,
                false,
                None,
                None,
                17
            ),
            (
                0x1004,
                Some((AesCbc, 16)),
                Some((AuthAlg::HmacSha256_128, 32)),
                Transport,
                32,
                false,
                Some(4),
                Some((4500, 4501)),
                23
            ),
            (
                0x1005,
                Some((BlowfishCbc, 5)),
                None,
                Transport,
                0,
                false,
                Some(5),
                None,
                31
            ),
            (
                0x1006,
                Some((Null, 0)),
                Some((AuthAlg::HmacSha1_96, 20)),
                Transport,
                32,
                false,
                Some(6),
                None,
                37
            ),
        ]
    );
    assert!(sas[2].src.is_ipv6());
    assert_eq!(
        sas[0].enc.as_ref().unwrap().1.expose()[..3],
        [0x01, 0x23, 0x45]
    );
    // The same SAs as setkey's.
    let setkey = parse_setkey(ESP_SA_CHECK).unwrap();
    for i in [0, 1, 3, 5] {
        assert_eq!(carried(&sas[i]), carried(&setkey.sas[i]));
    }

    let stats = parse_xfrm_state(XFRM_STATS).unwrap();
    assert_eq!(stats.len(), 2);
    let ah = &stats[0];
    assert_eq!(
        (
            ah.protocol,
            ah.spi,
            ah.reqid,
            ah.replay_window,
            ah.lifetime_soft,
            ah.lifetime_hard
        ),
        (Protocol::Ah, 0x2001, Some(7), 64, Some(3000), Some(3600))
    );
    assert!(ah.enc.is_none());
    let esp = &stats[1];
    assert_eq!(esp.auth.as_ref().unwrap().0, AuthAlg::HmacSha1_96);
    assert_eq!(
        (esp.encap_udp, esp.reqid, esp.lifetime_hard, esp.mode),
        (Some((4500, 4500)), None, None, Mode::Tunnel)
    );
    assert_eq!(esp.enc.as_ref().unwrap().1.len(), 32);
}

#[test]
fn xfrm_errors_name_the_line_and_column_and_say_what_kansoku_cannot_do() {
    let entry = |lines: &str| {
        format!(
            "src 10.1.0.1 dst 10.2.0.1\n\tproto esp spi 0x00001001 reqid 1 mode transport\n{lines}"
        )
    };
    let des3 = "\tenc cbc(des3_ede) 0x0123456789abcdef0123456789abcdef0123456789abcdef\n";
    for (text, at, says) in [
        (entry("\tauth-trunc hmac(sha1) 0x0102030405060708090a0b0c0d0e0f1011121314 128\n"), "3:67", "truncated to 128 bits"),
        (entry("\tauth hmac(sha256) 0x202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f\n"), "3:7", "96 bits"),
        (entry("\tauth-trunc hmac(md5) 0x01020304050607080910111213141516 96\n"), "3:13", "kansoku does hmac(sha1) and hmac(sha256)"),
        (entry("\tenc cbc(des) 0x0102030405060708\n"), "3:6", "cipher `cbc(des)`"),
        (entry("\tenc cbc(aes) 0x0011223344\n"), "3:15", "aes-cbc takes 16, 24 or 32 bytes, this key has 5"),
        (entry("\tenc cbc(aes) 0x0011223\n"), "3:15", "whole bytes"),
        (entry("\taead rfc4106(gcm(aes)) 0x000102030405060708090a0b0c0d0e0fcafebabe 64\n"), "3:68", "64-bit ICV"),
        (entry("\taead rfc4106(gcm(aes)) 0x000102030405060708090a0b0c0d0e0fcafebabe\n"), "3:67", "a length in bits, found the end"),
        (entry("\tenc cbc(aes) <<Keys hidden>>\n"), "3:15", "nokeys"),
        (entry("\tcomp deflate\n"), "3:2", "IPComp"),
        (entry(&format!("{des3}\tencap type espintcp sport 4500 dport 4500 addr 0.0.0.0\n")), "4:13", "ESP in TCP"),
        (entry(&format!("{des3}\tencap type espinudp-nonike sport 4500 dport 4500 addr 0.0.0.0\n")), "4:13", "non-IKE"),
        (entry(&format!("{des3}\t  limit: soft 1000(bytes), hard (INF)(bytes)\n")), "4:16", "seconds only"),
        (entry(&format!("{des3}\t  expire use: soft 0(sec), hard 60(sec)\n")), "4:11", "first use"),
        (entry(&format!("{des3}\tfrobnicate 1\n")), "4:2", "unknown line"),
        (entry(""), "2:2", "needs a cipher"),
        (entry(&format!("{des3}\taead rfc4106(gcm(aes)) 0x000102030405060708090a0b0c0d0e0fcafebabe 128\n")), "4:2", "a second cipher"),
        ("src 10.1.0.1 dst 10.2.0.1\n\tproto comp spi 0x00001001 reqid 1 mode transport\n".into(), "2:8", "kansoku does esp and ah"),
        ("src 10.1.0.1 dst 10.2.0.1\n\tproto esp spi 0x00001001 reqid 1 mode beet\n".into(), "2:40", "mode `beet`"),
        ("src 10.1.0.1 dst 10.2.0.1\n\tproto esp spi 0x00000010 reqid 1 mode transport\n".into(), "2:16", "reserved"),
        ("src 10.1.0.1 dst 10.2.0.1\n\treplay-window 32\n".into(), "1:1", "no `proto"),
        ("src 10.1.0.1 dst 2001:db8::1\n".into(), "1:18", "different IP versions"),
        ("src 10.0.0.0/8 dst 10.2.0.0/16\n\tdir out priority 0\n".into(), "1:5", "ip xfrm policy"),
        ("\tproto esp spi 0x00001001 reqid 1 mode transport\n".into(), "1:2", "expected `src ADDRESS dst ADDRESS`"),
        (
            "src 10.1.0.1 dst 10.2.0.1\n\tproto ah spi 0x00002001 reqid 1 mode transport\n\tenc cbc(aes) 0x101112131415161718191a1b1c1d1e1f\n".into(),
            "3:2",
            "AH does not encrypt",
        ),
        (
            "src 10.1.0.1 dst 10.2.0.1\n\tproto esp spi 0x00001002 reqid 1 mode transport\n\taead rfc4106(gcm(aes)) 0x000102030405060708090a0b0c0d0e0fcafebabe 128\n\tauth-trunc hmac(sha1) 0x0102030405060708090a0b0c0d0e0f1011121314 96\n".into(),
            "4:2",
            "authenticates by itself",
        ),
    ] {
        let e = parse_xfrm_state(&text).expect_err(&text);
        let shown = e.to_string();
        assert!(shown.starts_with(&format!("{at}:")), "{text}\n{shown}");
        assert!(shown.contains(says), "{text}\n{shown}");
        assert_no_key(&shown);
    }
}

#[test]
fn the_format_is_told_by_the_first_word() {
    let esp_sa = write_esp_sa(&parse_setkey(ESP_SA_CHECK).unwrap().sas);
    for (text, format, sas) in [
        (ESP_SA_CHECK, SaFormat::Setkey, 9),
        (esp_sa.as_str(), SaFormat::EspSa, 6),
        (XFRM, SaFormat::Xfrm, 6),
        (XFRM_STATS, SaFormat::Xfrm, 2),
        ("", SaFormat::Setkey, 0),
        ("# nothing\n\n", SaFormat::Setkey, 0),
    ] {
        assert_eq!(sa_format(text), format, "{text}");
        assert_eq!(read_sa_file(text).unwrap().sas.len(), sas, "{text}");
    }
    let c = read_sa_file(
        "# policies too\nspdadd 10.1.0.1 10.2.0.1 any -P out ipsec esp/transport//require;\n",
    )
    .unwrap();
    assert_eq!(c.policies.len(), 1);
    let e = read_sa_file("route add default;\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown command `route`"), "{e}");
}

#[test]
fn keys_never_show_in_debug_output_or_errors() {
    let esp_sa = write_esp_sa(&parse_setkey(ESP_SA_CHECK).unwrap().sas);
    for text in [esp_sa.as_str(), XFRM, XFRM_STATS] {
        let c = read_sa_file(text).unwrap();
        let debug = format!("{c:?}");
        assert!(debug.contains("bytes>"), "{debug}");
        assert_no_key(&debug);
    }
}

/// `f` on every cut of `text` and on `text` with each byte flipped three
/// ways: a value or a located error, never a panic, never a key in an error.
fn cut_and_flip(text: &str, f: impl Fn(&str) -> Result<usize, ipsec::ParseError>) {
    let check = |t: &str| match f(t) {
        Ok(_) => {}
        Err(e) => {
            assert!(e.line >= 1 && e.column >= 1, "{e:?}");
            assert_no_key(&e.to_string());
        }
    };
    let bytes = text.as_bytes();
    for cut in 0..bytes.len() {
        if let Ok(t) = std::str::from_utf8(&bytes[..cut]) {
            check(t);
        }
    }
    let mut b = bytes.to_vec();
    for i in 0..b.len() {
        for x in [0x01u8, 0x20, 0x80] {
            b[i] ^= x;
            if let Ok(t) = std::str::from_utf8(&b) {
                check(t);
            }
            b[i] ^= x;
        }
    }
}

#[test]
fn every_cut_and_every_flipped_byte_is_sas_or_an_error() {
    let esp_sa = write_esp_sa(&parse_setkey(ESP_SA_CHECK).unwrap().sas);
    cut_and_flip(&esp_sa, |t| parse_esp_sa(t).map(|s| s.len()));
    cut_and_flip(XFRM, |t| parse_xfrm_state(t).map(|s| s.len()));
    cut_and_flip(XFRM_STATS, |t| read_sa_file(t).map(|c| c.sas.len()));
}

/// Random edits of the sample files (deterministic): bytes replaced,
/// inserted and deleted, lines swapped; each result replayed as the fuzz
/// targets do.
#[test]
fn random_edits_are_sas_or_errors() {
    let esp_sa = write_esp_sa(&parse_setkey(ESP_SA_CHECK).unwrap().sas);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        usize::try_from(seed % n.max(1) as u64).unwrap()
    };
    let alphabet = b"\"\\,x0fF9 \t\n#:/()*.-";
    for text in [esp_sa.as_str(), XFRM, XFRM_STATS] {
        for _ in 0..3000 {
            let mut b = text.as_bytes().to_vec();
            for _ in 0..1 + next(4) {
                let i = next(b.len());
                match next(4) {
                    0 => b[i] = alphabet[next(alphabet.len())],
                    1 => b.insert(i, alphabet[next(alphabet.len())]),
                    2 => {
                        b.remove(i);
                    }
                    _ => {
                        let lines: Vec<&[u8]> = b.split(|&c| c == b'\n').collect();
                        let (x, y) = (next(lines.len()), next(lines.len()));
                        let mut l: Vec<Vec<u8>> = lines.iter().map(|l| l.to_vec()).collect();
                        l.swap(x, y);
                        b = l.join(&b'\n');
                    }
                }
                if b.is_empty() {
                    break;
                }
            }
            if let Ok(t) = std::str::from_utf8(&b) {
                replay(t);
                for r in [parse_esp_sa(t).map(|_| ()), parse_xfrm_state(t).map(|_| ())] {
                    if let Err(e) = r {
                        assert!(e.line >= 1 && e.column >= 1);
                        assert_no_key(&e.to_string());
                    }
                }
            }
        }
    }
}

/// What the fuzz targets check of one input.
fn replay(text: &str) {
    if let Ok(sas) = parse_esp_sa(text) {
        let again = parse_esp_sa(&write_esp_sa(&sas)).unwrap();
        let writable: Vec<&Sa> = sas
            .iter()
            .filter(|s| esp_sa_unwritable(s).is_none())
            .collect();
        assert_eq!(again.len(), writable.len());
        for (a, b) in again.iter().zip(writable) {
            assert_eq!(carried(a), carried(b));
        }
    }
    if let Ok(sas) = parse_xfrm_state(text) {
        for sa in &sas {
            if let Some((a, k)) = &sa.enc {
                assert!(a.key_len_ok(k.len()));
            }
            assert!(sa.spi >= 256);
        }
    }
    let _ = read_sa_file(text);
}

#[test]
fn seed_corpora_and_regressions_parse_without_panic() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    for target in ["esp_sa", "xfrm"] {
        let mut n = 0;
        for dir in [format!("corpus/{target}"), format!("regressions/{target}")] {
            let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
                continue;
            };
            for e in entries.flatten() {
                let bytes = std::fs::read(e.path()).unwrap();
                if let Ok(text) = std::str::from_utf8(&bytes) {
                    replay(text);
                }
                n += 1;
            }
        }
        assert!(n >= 3, "{target}: seed corpus missing: {n} files");
    }
}
