//! The engine both ways: every algorithm, IPv4 and IPv6, transport and
//! tunnel, AH+ESP bundles and ESP in UDP come back as they went in; and
//! every way a packet can be wrong (replayed, too old, flipped, cut,
//! fragmented, padded wrongly, expired, against policy) is refused with its
//! counted reason, never a panic.

use ipsec::{parse_setkey, Engine, Inbound, Keying, Options, Outbound, Protocol, Reject};

const K20: &str = "0x0102030405060708090a0b0c0d0e0f1011121314";
const K24: &str = "0x0102030405060708090a0b0c0d0e0f101112131415161718";
const K32: &str = "0x0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20";
const K36: &str = "0x0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021222324";

/// The algorithm part of an `add` line, and the protocol.
fn suites() -> Vec<(&'static str, String)> {
    vec![
        ("esp", "-E null".to_string()),
        ("esp", format!("-E 3des-cbc {K24}")),
        ("esp", format!("-E 3des-cbc {K24} -A hmac-sha1 {K20}")),
        (
            "esp",
            "-E blowfish-cbc 0x0011223344 -A hmac-sha256 ".to_string() + K32,
        ),
        (
            "esp",
            format!("-E aes-cbc 0x{} -A hmac-sha1 {K20}", &K32[2..34]),
        ),
        ("esp", format!("-E aes-cbc {K32} -A hmac-sha256 {K32}")),
        ("esp", format!("-E aes-gcm-16 {}", &K36[..42])),
        ("esp", format!("-E aes-gcm-16 {K36}")),
        ("esp", format!("-E chacha20-poly1305 {K36}")),
        ("ah", format!("-A hmac-sha1 {K20}")),
        ("ah", format!("-A hmac-sha256 {K32}")),
    ]
}

/// An IPv4 UDP packet from `src` to `dst` with `n` bytes of payload.
fn udp4(src: [u8; 4], dst: [u8; 4], n: usize, seed: u8) -> Vec<u8> {
    let len = 28 + n;
    let mut p = vec![
        0x45,
        0x10,
        (len >> 8) as u8,
        len as u8,
        0x12,
        0x34,
        0x40,
        0,
        64,
        17,
        0,
        0,
    ];
    p.extend_from_slice(&src);
    p.extend_from_slice(&dst);
    let c = checksum(&p);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p.extend_from_slice(&[
        0x30,
        0x39,
        0x00,
        0x35,
        ((8 + n) >> 8) as u8,
        (8 + n) as u8,
        0,
        0,
    ]);
    p.extend((0..n).map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed)));
    p
}

/// An IPv6 TCP packet with `n` bytes of payload.
fn tcp6(src: u8, dst: u8, n: usize, seed: u8) -> Vec<u8> {
    let pl = 20 + n;
    let mut p = vec![0x60, 0x0a, 0xbc, 0xde, (pl >> 8) as u8, pl as u8, 6, 63];
    let mut a = [0u8; 16];
    a[0] = 0x20;
    a[1] = 0x01;
    a[2] = 0x0d;
    a[3] = 0xb8;
    a[15] = src;
    p.extend_from_slice(&a);
    a[15] = dst;
    p.extend_from_slice(&a);
    p.extend_from_slice(&[
        0x04, 0xd2, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0,
    ]);
    p.extend((0..n).map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed)));
    p
}

/// The SA's two hosts.
fn hosts(v6: bool) -> (&'static str, &'static str) {
    if v6 {
        ("2001:db8::1", "2001:db8::2")
    } else {
        ("10.1.0.1", "10.2.0.1")
    }
}

/// A packet from the first host to the second: TCP over IPv6, UDP over
/// IPv4, `n` bytes of payload.
fn packet(v6: bool, n: usize, seed: u8) -> Vec<u8> {
    if v6 {
        tcp6(1, 2, n, seed)
    } else {
        udp4([10, 1, 0, 1], [10, 2, 0, 1], n, seed)
    }
}

fn checksum(h: &[u8]) -> u16 {
    let mut s: u32 = h
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

fn set_checksum(p: &mut [u8]) {
    p[10..12].copy_from_slice(&[0, 0]);
    let c = checksum(&p[..20]);
    p[10..12].copy_from_slice(&c.to_be_bytes());
}

fn engines(conf: &str) -> (Engine, Engine) {
    let cfg = parse_setkey(conf).unwrap_or_else(|e| panic!("{conf}: {e}"));
    (
        Engine::new(&cfg, Options::default()).unwrap(),
        Engine::new(&cfg, Options::default()).unwrap(),
    )
}

/// The outer protocol an outbound packet carries, and its IP version.
fn outer(p: &[u8]) -> (u8, u8) {
    match p[0] >> 4 {
        4 => (p[9], 4),
        _ => (p[6], 6),
    }
}

#[test]
fn every_suite_both_versions_both_modes_comes_back() {
    for (proto, algs) in suites() {
        for mode in ["transport", "tunnel"] {
            for v6 in [false, true] {
                let (s, d) = hosts(v6);
                let conf = format!("add {s} {d} {proto} 0x1234 -m {mode} {algs};");
                let (mut tx, mut rx) = engines(&conf);
                for n in [0usize, 1, 7, 64, 1400] {
                    let p = packet(v6, n, n as u8);
                    let mut wire = Vec::new();
                    assert_eq!(
                        tx.outbound(&p, &mut wire),
                        Ok(Outbound::Protected),
                        "{conf} n={n}"
                    );
                    let want = if proto == "esp" { 50 } else { 51 };
                    assert_eq!(outer(&wire), (want, if v6 { 6 } else { 4 }), "{conf}");
                    if algs != "-E null" && proto == "esp" && n >= 64 {
                        // The payload is not visible on the wire.
                        assert!(
                            !wire.windows(16).any(|w| w == &p[p.len() - 16..]),
                            "{conf}: plaintext on the wire"
                        );
                    }
                    let mut back = Vec::new();
                    assert_eq!(
                        rx.inbound(&wire, &mut back),
                        Ok(Inbound::Decapsulated),
                        "{conf} n={n}"
                    );
                    assert_eq!(back, p, "{conf} n={n}");
                }
                let c = rx.sas()[0].counters();
                assert_eq!(c.packets, 5, "{conf}");
            }
        }
    }
}

#[test]
fn bundles_put_ah_around_esp_and_come_back() {
    for v6 in [false, true] {
        let (s, d) = hosts(v6);
        let conf = format!(
            "add {s} {d} esp 0x1001 -E 3des-cbc {K24};
             add {s} {d} ah 0x2001 -A hmac-sha1 {K20};
             spdadd {s} {d} any -P out ipsec esp/transport//require ah/transport//require;
             spdadd {s} {d} any -P in ipsec esp/transport//require ah/transport//require;"
        );
        let (mut tx, mut rx) = engines(&conf);
        let p = packet(v6, 300, 1);
        let mut wire = Vec::new();
        tx.outbound(&p, &mut wire).unwrap();
        let (proto, _) = outer(&wire);
        assert_eq!(proto, 51, "AH outside");
        let ah_at = if v6 { 40 } else { 20 };
        assert_eq!(wire[ah_at], 50, "ESP inside AH");
        let mut back = Vec::new();
        assert_eq!(rx.inbound(&wire, &mut back), Ok(Inbound::Decapsulated));
        assert_eq!(back, p);
        // Without the ESP SA's part the inbound policy is not satisfied:
        // AH alone over the same packet is refused.
        let conf_ah = format!("add {s} {d} ah 0x2001 -A hmac-sha1 {K20};");
        let (mut ah_only, _) = engines(&conf_ah);
        let mut w2 = Vec::new();
        ah_only.outbound(&p, &mut w2).unwrap();
        let (_, mut rx) = engines(&conf);
        assert_eq!(rx.inbound(&w2, &mut back), Err(Reject::PolicyMismatch));
    }
}

#[test]
fn esp_in_udp_carries_esp_behind_port_4500() {
    for v6 in [false, true] {
        let (s, d) = hosts(v6);
        let conf = format!("add {s} {d} esp 0x1001 -E aes-gcm-16 {};", &K36[..42]);
        let mut cfg = parse_setkey(&conf).unwrap();
        cfg.sas[0].encap_udp = Some((4500, 4500));
        let mut tx = Engine::new(&cfg, Options::default()).unwrap();
        let mut rx = Engine::new(&cfg, Options::default()).unwrap();
        let p = packet(v6, 100, 3);
        let mut wire = Vec::new();
        tx.outbound(&p, &mut wire).unwrap();
        let u = if v6 { 40 } else { 20 };
        assert_eq!(outer(&wire).0, 17);
        assert_eq!(&wire[u..u + 4], &[0x11, 0x94, 0x11, 0x94]);
        assert_eq!(
            usize::from(u16::from_be_bytes([wire[u + 4], wire[u + 5]])),
            wire.len() - u
        );
        let mut back = Vec::new();
        assert_eq!(rx.inbound(&wire, &mut back), Ok(Inbound::Decapsulated));
        assert_eq!(back, p);
        // IKE on the same port (non-ESP marker) passes as it is.
        let mut ike = wire[..u + 8].to_vec();
        ike.extend_from_slice(&[0, 0, 0, 0, 1, 2, 3, 4]);
        let l = ike.len();
        if v6 {
            ike[4..6].copy_from_slice(&((l - 40) as u16).to_be_bytes());
        } else {
            ike[2..4].copy_from_slice(&(l as u16).to_be_bytes());
            set_checksum(&mut ike);
        }
        assert_eq!(rx.inbound(&ike, &mut back), Ok(Inbound::Clear));
        assert_eq!(rx.totals().udp_not_esp, 1);
    }
}

fn seq_packets(conf: &str, n: u32) -> (Engine, Vec<Vec<u8>>) {
    let (mut tx, rx) = engines(conf);
    let out = (0..n)
        .map(|i| {
            let mut w = Vec::new();
            tx.outbound(&udp4([10, 1, 0, 1], [10, 2, 0, 1], 40, i as u8), &mut w)
                .unwrap();
            w
        })
        .collect();
    (rx, out)
}

#[test]
fn replayed_old_and_reordered_packets() {
    let conf = format!(
        "add 10.1.0.1 10.2.0.1 esp 0x1001 -r 32 -E aes-gcm-16 {};",
        &K36[..42]
    );
    let (mut rx, w) = seq_packets(&conf, 100);
    let mut out = Vec::new();
    // 1..=10 in order, then 10 again: replayed.
    for p in &w[..10] {
        assert_eq!(rx.inbound(p, &mut out), Ok(Inbound::Decapsulated));
    }
    assert_eq!(rx.inbound(&w[9], &mut out), Err(Reject::Replayed));
    // 60, then 40 (inside the 32-packet window, reordered): accepted.
    assert_eq!(rx.inbound(&w[59], &mut out), Ok(Inbound::Decapsulated));
    assert_eq!(rx.inbound(&w[39], &mut out), Ok(Inbound::Decapsulated));
    assert_eq!(rx.inbound(&w[39], &mut out), Err(Reject::Replayed));
    // 20 is 40 behind 60: too old.
    assert_eq!(rx.inbound(&w[19], &mut out), Err(Reject::TooOld));
    let c = rx.sas()[0].counters();
    assert_eq!((c.packets, c.replay, c.replay_window), (12, 2, 1));
    let r: Vec<_> = rx.rejects().filter(|(_, n)| *n > 0).collect();
    assert_eq!(r, vec![(Reject::Replayed, 2), (Reject::TooOld, 1)]);
}

#[test]
fn encryption_only_esp_has_no_window_but_checks_padding() {
    // Without integrity RFC 4303 §3.4.3 leaves anti-replay off: a replay
    // passes (nothing could tell it from a forgery anyway).
    let conf = "add 10.1.0.1 10.2.0.1 esp 0x1001 -E null;";
    let (mut rx, w) = seq_packets(conf, 3);
    let mut out = Vec::new();
    assert_eq!(rx.inbound(&w[0], &mut out), Ok(Inbound::Decapsulated));
    assert_eq!(rx.inbound(&w[0], &mut out), Ok(Inbound::Decapsulated));
    // Null encryption shows the trailer: break the padding (1, 2, ...).
    let mut bad = w[1].clone();
    let n = bad.len();
    let pad = usize::from(bad[n - 2]);
    assert!(pad > 0, "40 + 8 + 2 bytes pad to 52");
    bad[n - 3] ^= 0x40;
    assert_eq!(rx.inbound(&bad, &mut out), Err(Reject::Padding));
    // A pad length longer than the payload.
    let mut bad = w[2].clone();
    bad[n - 2] = 250;
    assert_eq!(rx.inbound(&bad, &mut out), Err(Reject::Padding));
    assert_eq!(rx.sas()[0].counters().padding_failed, 2);
}

#[test]
fn every_flipped_byte_is_refused_and_nothing_panics() {
    for (proto, algs) in suites() {
        if algs == "-E null" || algs.starts_with("-E 3des-cbc 0x") && !algs.contains("-A") {
            continue; // no integrity: flips inside the ciphertext go unseen
        }
        let conf = format!("add 10.1.0.1 10.2.0.1 {proto} 0x1234 -r 0 {algs};");
        let (mut tx, mut rx) = engines(&conf);
        let p = udp4([10, 1, 0, 1], [10, 2, 0, 1], 50, 9);
        let mut wire = Vec::new();
        tx.outbound(&p, &mut wire).unwrap();
        let mut out = Vec::new();
        // Any flipped bit: the IPv4 header's checksum, the SPI, the ICV
        // or the ciphertext no longer agree.
        for i in 0..wire.len() {
            let mut w = wire.clone();
            w[i] ^= 0x01;
            assert!(
                rx.inbound(&w, &mut out).is_err(),
                "{conf}: flip at {i} accepted"
            );
        }
        if proto == "ah" {
            // AH leaves out TOS, TTL and the checksum (RFC 4302 §3.3.3.1):
            // a router may change them; not the identification.
            let mut w = wire.clone();
            w[1] = 0xb8;
            w[8] = 3;
            set_checksum(&mut w);
            assert_eq!(
                rx.inbound(&w, &mut out),
                Ok(Inbound::Decapsulated),
                "{conf}"
            );
            assert_eq!(out[20..], p[20..]);
            let mut w = wire.clone();
            w[5] ^= 1;
            set_checksum(&mut w);
            assert_eq!(rx.inbound(&w, &mut out), Err(Reject::Integrity), "{conf}");
        }
        for cut in 0..wire.len() {
            assert!(
                rx.inbound(&wire[..cut], &mut out).is_err(),
                "{conf}: cut at {cut}"
            );
        }
        // The original still passes (the window is off: -r 0).
        assert_eq!(
            rx.inbound(&wire, &mut out),
            Ok(Inbound::Decapsulated),
            "{conf}"
        );
    }
}

#[test]
fn unknown_spi_and_garbage() {
    let conf = format!(
        "add 10.1.0.1 10.2.0.1 esp 0x1001 -E aes-gcm-16 {};",
        &K36[..42]
    );
    let (mut tx, mut rx) = engines(&conf);
    let mut w = Vec::new();
    tx.outbound(&udp4([10, 1, 0, 1], [10, 2, 0, 1], 10, 0), &mut w)
        .unwrap();
    w[23] ^= 1; // SPI
    let mut out = Vec::new();
    assert_eq!(rx.inbound(&w, &mut out), Err(Reject::NoSa));
    for junk in [&[][..], &[0x45][..], &[0x60; 39][..], &[0x99; 60][..]] {
        assert_eq!(rx.inbound(junk, &mut out), Err(Reject::Malformed));
        assert_eq!(tx.outbound(junk, &mut out), Err(Reject::Malformed));
    }
}

/// Splits an IPv4 packet into fragments of `size` payload bytes.
fn fragment4(p: &[u8], size: usize) -> Vec<Vec<u8>> {
    let body = &p[20..];
    body.chunks(size)
        .enumerate()
        .map(|(i, c)| {
            let mut f = p[..20].to_vec();
            let off = i * size / 8;
            let more = (i + 1) * size < body.len();
            let fl = (off as u16) | if more { 0x2000 } else { 0 };
            f[6..8].copy_from_slice(&fl.to_be_bytes());
            let len = 20 + c.len();
            f[2..4].copy_from_slice(&(len as u16).to_be_bytes());
            f[10..12].copy_from_slice(&[0, 0]);
            let cs = checksum(&f);
            f[10..12].copy_from_slice(&cs.to_be_bytes());
            f.extend_from_slice(c);
            f
        })
        .collect()
}

/// Splits an IPv6 packet (no extension headers) with a fragment header.
fn fragment6(p: &[u8], size: usize, id: u32) -> Vec<Vec<u8>> {
    let nh = p[6];
    let body = &p[40..];
    body.chunks(size)
        .enumerate()
        .map(|(i, c)| {
            let mut f = p[..40].to_vec();
            f[6] = 44;
            let off = (i * size) as u16;
            let more = (i + 1) * size < body.len();
            f.extend_from_slice(&[nh, 0]);
            f.extend_from_slice(&(off | u16::from(more)).to_be_bytes());
            f.extend_from_slice(&id.to_be_bytes());
            f.extend_from_slice(c);
            let pl = (f.len() - 40) as u16;
            f[4..6].copy_from_slice(&pl.to_be_bytes());
            f
        })
        .collect()
}

#[test]
fn fragments_are_reassembled_before_decapsulation() {
    for v6 in [false, true] {
        let (s, d) = hosts(v6);
        let conf = format!(
            "add {s} {d} esp 0x1001 -E aes-cbc 0x{} -A hmac-sha1 {K20};",
            &K32[2..34]
        );
        let (mut tx, mut rx) = engines(&conf);
        let mut p = packet(v6, 1000, 5);
        if !v6 {
            p[6] = 0; // no DF: this packet is fragmented on its way
            set_checksum(&mut p);
        }
        let mut wire = Vec::new();
        tx.outbound(&p, &mut wire).unwrap();
        let mut frags = if v6 {
            fragment6(&wire, 400, 77)
        } else {
            fragment4(&wire, 400)
        };
        assert_eq!(frags.len(), 3);
        frags.swap(0, 2); // out of order
        let mut out = Vec::new();
        assert_eq!(rx.inbound(&frags[0], &mut out), Ok(Inbound::Held));
        assert_eq!(
            rx.inbound(&frags[0], &mut out),
            Ok(Inbound::Held),
            "a duplicate"
        );
        assert_eq!(rx.inbound(&frags[1], &mut out), Ok(Inbound::Held));
        assert_eq!(rx.inbound(&frags[2], &mut out), Ok(Inbound::Decapsulated));
        assert_eq!(out, p);
        assert_eq!(rx.totals().reassembled, 1);
        // Overlapping fragments: the datagram is dropped.
        let f = if v6 {
            fragment6(&wire, 400, 78)
        } else {
            fragment4(&wire, 400)
        };
        assert_eq!(rx.inbound(&f[0], &mut out), Ok(Inbound::Held));
        let mut overlap = f[1].clone();
        if v6 {
            overlap[42..44].copy_from_slice(&(392u16 | 1).to_be_bytes());
        } else {
            overlap[6..8].copy_from_slice(&(0x2000u16 | 49).to_be_bytes());
            set_checksum(&mut overlap);
        }
        assert_eq!(rx.inbound(&overlap, &mut out), Err(Reject::Fragment));
        assert_eq!(rx.fragments_waiting(), 0);
        // Every cut of a fragment: refused or held, never a panic.
        for cut in 0..f[1].len() {
            let _ = rx.inbound(&f[1][..cut], &mut out);
        }
    }
}

#[test]
fn outbound_fragments_cannot_take_transport_mode() {
    let conf = format!(
        "add 10.1.0.1 10.2.0.1 esp 0x1001 -E aes-gcm-16 {};",
        &K36[..42]
    );
    let (mut tx, _) = engines(&conf);
    let p = udp4([10, 1, 0, 1], [10, 2, 0, 1], 1000, 5);
    let f = fragment4(&p, 400);
    let mut out = Vec::new();
    assert_eq!(tx.outbound(&f[0], &mut out), Err(Reject::Fragment));
}

#[test]
fn policies_discard_bypass_and_require() {
    let conf = format!(
        "add 10.1.0.1 10.2.0.1 esp 0x1001 -E aes-gcm-16 {k};
         spdadd 10.1.0.1 10.2.0.1[53] udp -P out none;
         spdadd 10.1.0.1 10.2.0.0/16 udp -P out ipsec esp/transport//require;
         spdadd 10.1.0.1 10.3.0.0/16 any -P out ipsec esp/transport//require;
         spdadd 10.9.0.0/16 10.2.0.1 any -P out discard;
         spdadd 10.1.0.1 10.2.0.1 any -P in ipsec esp/transport//require;",
        k = &K36[..42]
    );
    let (mut tx, mut rx) = engines(&conf);
    let mut out = Vec::new();
    let mut p = udp4([10, 1, 0, 1], [10, 2, 0, 1], 10, 0);
    assert_eq!(
        tx.outbound(&p, &mut out),
        Ok(Outbound::Bypass),
        "port 53: none"
    );
    p[23] = 54;
    assert_eq!(tx.outbound(&p, &mut out), Ok(Outbound::Protected));
    assert_eq!(
        rx.inbound(&p, &mut out),
        Err(Reject::PolicyMismatch),
        "clear where ESP is required"
    );
    let p3 = udp4([10, 1, 0, 1], [10, 3, 0, 1], 10, 0);
    assert_eq!(tx.outbound(&p3, &mut out), Err(Reject::NoSaForPolicy));
    let p9 = udp4([10, 9, 0, 1], [10, 2, 0, 1], 10, 0);
    assert_eq!(tx.outbound(&p9, &mut out), Err(Reject::PolicyDiscard));
    let p4 = udp4([10, 4, 0, 1], [10, 4, 0, 2], 10, 0);
    assert_eq!(
        tx.outbound(&p4, &mut out),
        Ok(Outbound::Bypass),
        "no policy covers it"
    );
}

#[test]
fn lifetimes_and_sequence_exhaustion() {
    let conf = format!(
        "add 10.1.0.1 10.2.0.1 esp 0x1001 -lh 10 -ls 5 -E aes-gcm-16 {};",
        &K36[..42]
    );
    let (mut tx, _) = engines(&conf);
    let p = udp4([10, 1, 0, 1], [10, 2, 0, 1], 10, 0);
    let mut out = Vec::new();
    tx.set_now(1000);
    assert!(tx.outbound(&p, &mut out).is_ok());
    tx.set_now(1006);
    assert!(tx.outbound(&p, &mut out).is_ok());
    assert!(tx.sas()[0].soft_expired());
    tx.set_now(1010);
    assert_eq!(tx.outbound(&p, &mut out), Err(Reject::Expired));

    let (mut tx, _) = engines(&conf.replace("-lh 10 -ls 5 ", ""));
    tx.sa_mut(Protocol::Esp, 0x1001)
        .unwrap()
        .set_next_seq(u64::from(u32::MAX));
    assert!(tx.outbound(&p, &mut out).is_ok(), "the last number");
    assert_eq!(tx.outbound(&p, &mut out), Err(Reject::SeqOverflow));
    // With ESN the count goes on past 2^32, and the receiver follows.
    let esn = format!(
        "add 10.1.0.1 10.2.0.1 esp 0x1001 -esn -E aes-gcm-16 {};",
        &K36[..42]
    );
    let (mut tx, mut rx) = engines(&esn);
    let start = u64::from(u32::MAX) - 2;
    tx.sa_mut(Protocol::Esp, 0x1001)
        .unwrap()
        .set_next_seq(start);
    // The receiver has seen up to just below: its window is near the wrap.
    rx.sa_mut(Protocol::Esp, 0x1001)
        .unwrap()
        .set_window_top(start - 1);
    for _ in 0..6 {
        let mut w = Vec::new();
        tx.outbound(&p, &mut w).unwrap();
        assert_eq!(rx.inbound(&w, &mut out), Ok(Inbound::Decapsulated));
    }
    assert_eq!(rx.sas()[0].sequence().1, start + 5);
}

#[test]
fn per_packet_keying_gives_the_same_packets() {
    for (proto, algs) in suites() {
        let conf = format!("add 10.1.0.1 10.2.0.1 {proto} 0x1234 {algs};");
        let cfg = parse_setkey(&conf).unwrap();
        let mut a = Engine::new(&cfg, Options::default()).unwrap();
        let mut b = Engine::new(
            &cfg,
            Options {
                keying: Keying::PerPacket,
            },
        )
        .unwrap();
        let p = udp4([10, 1, 0, 1], [10, 2, 0, 1], 200, 1);
        let (mut wa, mut wb) = (Vec::new(), Vec::new());
        for (e, w) in [(&mut a, &mut wa), (&mut b, &mut wb)] {
            e.sa_mut(
                if proto == "ah" {
                    Protocol::Ah
                } else {
                    Protocol::Esp
                },
                0x1234,
            )
            .unwrap()
            .set_next_iv(&[0x42; 16][..if algs.contains("aes-cbc") { 16 } else { 8 }]);
            e.outbound(&p, w).unwrap();
        }
        assert_eq!(wa, wb, "{conf}");
        let mut out = Vec::new();
        assert_eq!(
            b.inbound(&wa, &mut out),
            Ok(Inbound::Decapsulated),
            "{conf}"
        );
    }
}

/// The in-place path (`outbound_buf`, `inbound_buf`) gives the copying
/// path's packets, byte for byte, and takes back either's.
#[test]
fn in_place_and_copying_paths_agree() {
    use ipsec::PacketBuf;
    let mut n = 0;
    for (proto, algs) in suites() {
        for mode in ["transport", "tunnel"] {
            for udp in ["", " -udp-encap 4500 4500"] {
                if proto == "ah" && !udp.is_empty() {
                    continue;
                }
                for v6 in [false, true] {
                    let (s, d) = hosts(v6);
                    let conf = format!("add {s} {d} {proto} 0x1234 -m {mode}{udp} {algs};");
                    let (mut copy, mut rx_copy) = engines(&conf);
                    let (mut inplace, mut rx_inplace) = engines(&conf);
                    let p_proto = if proto == "ah" {
                        Protocol::Ah
                    } else {
                        Protocol::Esp
                    };
                    let mut pb = PacketBuf::new();
                    for len in [0usize, 1, 31, 600, 1400] {
                        let p = packet(v6, len, 3);
                        let iv = [0x5au8; 16];
                        let ivn = if algs.contains("aes-cbc") { 16 } else { 8 };
                        copy.sa_mut(p_proto, 0x1234)
                            .unwrap()
                            .set_next_iv(&iv[..ivn]);
                        inplace
                            .sa_mut(p_proto, 0x1234)
                            .unwrap()
                            .set_next_iv(&iv[..ivn]);
                        let mut wire = Vec::new();
                        assert_eq!(
                            copy.outbound(&p, &mut wire),
                            Ok(Outbound::Protected),
                            "{conf}"
                        );
                        pb.set(&p);
                        assert_eq!(
                            inplace.outbound_buf(&mut pb),
                            Ok(Outbound::Protected),
                            "{conf}"
                        );
                        assert_eq!(pb.as_slice(), &wire[..], "{conf} len {len}");
                        // Each receiver takes the other path's packet.
                        let mut back = Vec::new();
                        assert_eq!(
                            rx_copy.inbound(pb.as_slice(), &mut back),
                            Ok(Inbound::Decapsulated),
                            "{conf}"
                        );
                        assert_eq!(back, p, "{conf}");
                        pb.set(&wire);
                        assert_eq!(
                            rx_inplace.inbound_buf(&mut pb),
                            Ok(Inbound::Decapsulated),
                            "{conf}"
                        );
                        assert_eq!(pb.as_slice(), &p[..], "{conf} len {len}");
                        // A replay through the in-place path is refused too.
                        if proto == "esp"
                            && (algs.contains("-A")
                                || algs.contains("gcm")
                                || algs.contains("chacha"))
                        {
                            pb.set(&wire);
                            assert_eq!(
                                rx_inplace.inbound_buf(&mut pb),
                                Err(Reject::Replayed),
                                "{conf}"
                            );
                        }
                        // Every cut and flip: refused, never a panic.
                        if len == 31 {
                            for i in 0..wire.len() {
                                let mut w = wire.clone();
                                w[i] ^= 0x04;
                                pb.set(&w);
                                let _ = rx_inplace.inbound_buf(&mut pb);
                                pb.set(&wire[..i]);
                                assert!(
                                    rx_inplace.inbound_buf(&mut pb).is_err(),
                                    "{conf}: cut at {i}"
                                );
                            }
                        }
                        n += 1;
                    }
                }
            }
        }
    }
    assert!(n > 300, "{n}");
}

/// Packets for several SAs, in turn and out of turn (two of them with the
/// same SPI, told apart by destination, and one for no SA): the in-place
/// path, which remembers its last choice of SA each way, gives each packet
/// the copying path's bytes and takes it back with the right SA.
#[test]
fn in_place_path_follows_packets_from_sa_to_sa() {
    use ipsec::PacketBuf;
    let k2 = format!("0x{}", "a5".repeat(20));
    let conf = format!(
        "add 10.1.0.1 10.2.0.1 esp 0x1001 -E aes-gcm-16 {};\n\
         add 10.1.0.1 10.3.0.1 esp 0x1001 -E aes-gcm-16 {k2};\n\
         add 10.1.0.1 10.4.0.1 esp 0x2002 -E chacha20-poly1305 {K36};",
        &K36[..42]
    );
    let (mut copy, mut rx_copy) = engines(&conf);
    let (mut inplace, mut rx_inplace) = engines(&conf);
    let mut pb = PacketBuf::new();
    let order = [2u8, 2, 3, 2, 4, 4, 9, 3, 3, 9, 9, 2, 4, 3, 2];
    for (i, &host) in order.iter().enumerate() {
        let p = udp4([10, 1, 0, 1], [10, host, 0, 1], 40 + i, i as u8);
        let mut wire = Vec::new();
        let r = copy.outbound(&p, &mut wire);
        pb.set(&p);
        assert_eq!(inplace.outbound_buf(&mut pb), r, "packet {i} to .{host}");
        if host == 9 {
            assert_eq!(r, Ok(Outbound::Bypass));
            assert_eq!(pb.as_slice(), &p[..]);
            continue;
        }
        assert_eq!(r, Ok(Outbound::Protected));
        assert_eq!(pb.as_slice(), &wire[..], "packet {i} to .{host}");
        assert_eq!(
            rx_inplace.inbound_buf(&mut pb),
            Ok(Inbound::Decapsulated),
            "packet {i} to .{host}"
        );
        assert_eq!(pb.as_slice(), &p[..], "packet {i} to .{host}");
        let mut back = Vec::new();
        assert_eq!(rx_copy.inbound(&wire, &mut back), Ok(Inbound::Decapsulated));
        assert_eq!(back, p);
    }
    // Each SA counted its own packets, both ways and on both paths.
    let counts =
        |e: &Engine| -> Vec<u64> { e.sas().iter().map(|s| s.counters().packets).collect() };
    for e in [&copy, &inplace, &rx_copy, &rx_inplace] {
        assert_eq!(counts(e), [5, 4, 3]);
    }
}

/// ESP may carry IPv6 destination options before the upper layer (RFC 4303
/// §3.1.1): after decapsulation both paths walk past them, so an inbound
/// policy that discards UDP to port 53 refuses the packet and one that
/// discards TCP, or UDP to another port, lets it in. (The in-place path
/// reads the header again only then; otherwise it takes the next header as
/// the protocol.)
#[test]
fn destination_options_inside_esp_are_walked_past_on_both_paths() {
    use ipsec::PacketBuf;
    // IPv6, then ESP with null encryption (SPI, sequence number, payload,
    // padding, pad length, next header = destination options), carrying
    // destination options (8 bytes: UDP next) and a UDP datagram.
    let udp = [
        0x30u8, 0x39, 0x00, 0x35, 0, 12, 0, 0, b'd', b'a', b't', b'a',
    ];
    let mut esp = vec![0, 0, 0x12, 0x34, 0, 0, 0, 1];
    esp.extend_from_slice(&[17, 0, 1, 4, 0, 0, 0, 0]);
    esp.extend_from_slice(&udp);
    // 8 + 12 + 2 bytes of payload and trailer: padding to 4.
    esp.extend_from_slice(&[1, 2, 2, 60]);
    let pl = esp.len();
    let mut p = vec![0x60, 0, 0, 0, (pl >> 8) as u8, pl as u8, 50, 64];
    let mut a = [0u8; 16];
    a[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    a[15] = 1;
    p.extend_from_slice(&a);
    a[15] = 2;
    p.extend_from_slice(&a);
    p.extend_from_slice(&esp);
    // What comes back: the IPv6 header with destination options next.
    let mut want = p[..40].to_vec();
    want[6] = 60;
    let inner = 8 + udp.len();
    want[4..6].copy_from_slice(&(inner as u16).to_be_bytes());
    want.extend_from_slice(&esp[8..8 + inner]);
    for (dport, upper, accepted) in [
        ("53", "udp", false),
        ("any", "udp", false),
        ("54", "udp", true),
        ("any", "tcp", true),
    ] {
        let conf = format!(
            "add 2001:db8::1 2001:db8::2 esp 0x1234 -m transport -E null;\n\
             spdadd 2001:db8::1 2001:db8::2[{dport}] {upper} -P in discard;"
        );
        let (mut copy, mut inplace) = engines(&conf);
        let mut out = Vec::new();
        let r = copy.inbound(&p, &mut out);
        let mut pb = PacketBuf::new();
        pb.set(&p);
        let r_in = inplace.inbound_buf(&mut pb);
        assert_eq!(r, r_in, "{upper} {dport}");
        if accepted {
            assert_eq!(r, Ok(Inbound::Decapsulated), "{upper} {dport}");
            assert_eq!(out, want, "{upper} {dport}");
            assert_eq!(pb.as_slice(), &want[..], "{upper} {dport}");
        } else {
            assert_eq!(r, Err(Reject::PolicyDiscard), "{upper} {dport}");
        }
    }
}
