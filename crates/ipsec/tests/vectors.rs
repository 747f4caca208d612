//! Byte for byte against the RFCs' sample packets: RFC 3602 §4 cases 5–8
//! (whole AES-CBC ESP packets, transport and tunnel mode) and RFC 7634
//! Appendix A (ChaCha20-Poly1305 ESP in tunnel mode). RFC 2202 case 5 (HMAC-SHA-1-96)
//! is a unit test in src/crypto.rs. Each is built by
//! `Engine::outbound` from the original packet, with the RFC's IV, sequence
//! number and outer IP identification, and must equal the RFC's packet; and
//! `Engine::inbound` must give the original back. The vectors were
//! transcribed into tests/data/rfc and checked against second sources.

use std::collections::HashMap;
use std::path::Path;

use ipsec::{parse_setkey, Engine, Inbound, Options, Outbound, Protocol};

fn vector(name: &str) -> HashMap<String, Vec<u8>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/rfc")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(": "))
        .filter_map(|(k, v)| Some((k.to_string(), hex(v.trim())?)))
        .collect()
}

fn hex(s: &str) -> Option<Vec<u8>> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

fn ip4(b: &[u8]) -> String {
    format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3])
}

fn hexs(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Builds the packet the RFC shows and takes it apart again.
fn check(name: &str, mode: &str, alg: &str, key_field: &str) {
    let v = vector(name);
    let spi = u32::from_be_bytes(v["spi"][..4].try_into().unwrap());
    let seq = u32::from_be_bytes(v["seq"][..4].try_into().unwrap());
    let conf = format!(
        "add {} {} esp {spi:#x} -m {mode} -E {alg} 0x{};",
        ip4(&v["src"]),
        ip4(&v["dst"]),
        hexs(&v[key_field])
    );
    // A gateway-to-gateway tunnel needs its policy: which inner packets go
    // into it (RFC 7634's; RFC 3602's tunnels are host to host).
    let conf = match (v.get("inner_src"), v.get("inner_dst")) {
        (Some(is), Some(id)) => format!(
            "{conf}\nspdadd {} {} any -P out ipsec esp/tunnel/{}-{}/require;\n\
             spdadd {} {} any -P in ipsec esp/tunnel/{}-{}/require;",
            ip4(is),
            ip4(id),
            ip4(&v["src"]),
            ip4(&v["dst"]),
            ip4(is),
            ip4(id),
            ip4(&v["src"]),
            ip4(&v["dst"])
        ),
        _ => conf,
    };
    let cfg = parse_setkey(&conf).unwrap();
    let mut tx = Engine::new(&cfg, Options::default()).unwrap();
    let sa = tx.sa_mut(Protocol::Esp, spi).unwrap();
    sa.set_next_iv(&v["iv"]);
    sa.set_next_seq(u64::from(seq));
    let want = &v["esp_packet"];
    tx.set_next_ip_id(u16::from_be_bytes([want[4], want[5]]));
    let mut out = Vec::new();
    assert_eq!(
        tx.outbound(&v["plain_packet"], &mut out),
        Ok(Outbound::Protected)
    );
    assert_eq!(hexs(&out), hexs(want), "{name}: the RFC's packet");

    let mut rx = Engine::new(&cfg, Options::default()).unwrap();
    let mut back = Vec::new();
    assert_eq!(rx.inbound(want, &mut back), Ok(Inbound::Decapsulated));
    assert_eq!(
        hexs(&back),
        hexs(&v["plain_packet"]),
        "{name}: the original back"
    );
    let c = rx.sas()[0].counters();
    assert_eq!(
        (c.packets, c.bytes),
        (
            1,
            v["plain_packet"].len() as u64 - if mode == "transport" { 20 } else { 0 }
        )
    );
}

#[test]
fn rfc3602_case5_transport() {
    check("rfc3602-case5.txt", "transport", "aes-cbc", "key");
}

#[test]
fn rfc3602_case6_transport() {
    check("rfc3602-case6.txt", "transport", "aes-cbc", "key");
}

#[test]
fn rfc3602_case7_tunnel() {
    check("rfc3602-case7.txt", "tunnel", "aes-cbc", "key");
}

#[test]
fn rfc3602_case8_tunnel() {
    check("rfc3602-case8.txt", "tunnel", "aes-cbc", "key");
}

#[test]
fn rfc7634_appendix_a_chacha20_poly1305() {
    check(
        "rfc7634-appendix-a.txt",
        "tunnel",
        "chacha20-poly1305",
        "keymat",
    );
}
