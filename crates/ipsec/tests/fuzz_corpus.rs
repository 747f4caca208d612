//! The `ipsec_inbound` fuzz target's seed corpus (fuzz/corpus/ipsec_inbound),
//! made and checked as the target does: valid ESP and AH packets of every
//! SA in `ipsec::fuzzing::SAS`, clear packets, fragments, cut and flipped
//! ones. `KANSOKU_WRITE_CORPUS=1` writes the seeds anew (the keys are fixed,
//! so they keep matching); crates/fuzzing's replay test replays the
//! committed corpus.

use std::path::{Path, PathBuf};

use ipsec::fuzzing;
use ipsec::{Inbound, Outbound, Reject};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/ipsec_inbound")
}

fn udp4(n: usize) -> Vec<u8> {
    let len = 28 + n;
    let mut p = vec![
        0x45,
        0,
        (len >> 8) as u8,
        len as u8,
        0,
        1,
        0,
        0,
        64,
        17,
        0,
        0,
        10,
        1,
        0,
        1,
        10,
        2,
        0,
        1,
    ];
    let c = !fold(
        p.chunks(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
            .sum(),
    );
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p.extend_from_slice(&[0x30, 0x39, 0, 53, ((8 + n) >> 8) as u8, (8 + n) as u8, 0, 0]);
    p.extend((0..n).map(|i| i as u8));
    p
}

fn tcp6(n: usize) -> Vec<u8> {
    let pl = 20 + n;
    let mut p = vec![0x60, 0, 0, 0, (pl >> 8) as u8, pl as u8, 6, 64];
    let mut a = [0u8; 16];
    a[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    a[15] = 1;
    p.extend_from_slice(&a);
    a[15] = 2;
    p.extend_from_slice(&a);
    p.extend_from_slice(&[
        0, 80, 4, 210, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0,
    ]);
    p.extend((0..n).map(|i| i as u8));
    p
}

fn fold(mut s: u32) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// Seeds: what the fuzzer starts from (first byte 0: inbound, 1: outbound).
fn seeds() -> Vec<Vec<u8>> {
    let mut e = fuzzing::engine();
    let mut out = Vec::new();
    for p in [udp4(0), udp4(33), udp4(600), tcp6(0), tcp6(100)] {
        let mut w = Vec::new();
        if e.outbound(&p, &mut w) == Ok(Outbound::Protected) {
            out.push([&[0u8][..], &w].concat());
        }
        out.push([&[1u8][..], &p].concat());
        out.push([&[0u8][..], &p].concat());
    }
    // Each SA by itself: ESP/AH packets whose SPI matches one SA only.
    for (i, line) in fuzzing::SAS
        .lines()
        .filter(|l| l.starts_with("add"))
        .enumerate()
    {
        let cfg = ipsec::parse_setkey(line).unwrap();
        let mut one = ipsec::Engine::new(&cfg, Default::default()).unwrap();
        let p = if line.contains("2001:db8") {
            tcp6(40 + i)
        } else {
            udp4(40 + i)
        };
        let mut w = Vec::new();
        one.outbound(&p, &mut w).unwrap();
        out.push([&[0u8][..], &w].concat());
    }
    out
}

/// What the fuzz target asserts, on one input.
fn replay(data: &[u8]) {
    let Some((&dir, pkt)) = data.split_first() else {
        return;
    };
    let mut e = fuzzing::engine();
    let mut out = Vec::new();
    if dir & 2 != 0 {
        let mut pb = ipsec::PacketBuf::new();
        pb.set(pkt);
        if dir & 1 == 0 {
            if let Ok(Inbound::Decapsulated) = e.inbound_buf(&mut pb) {
                assert!(matches!(pb.as_slice().first().map(|b| b >> 4), Some(4 | 6)));
            }
        } else if let Ok(Outbound::Protected) = e.outbound_buf(&mut pb) {
            let r = fuzzing::engine().inbound_buf(&mut pb);
            assert!(
                matches!(r, Ok(Inbound::Decapsulated) | Err(Reject::Dummy)),
                "{r:?}"
            );
        }
        return;
    }
    if dir & 1 == 0 {
        if let Ok(Inbound::Decapsulated) = e.inbound(pkt, &mut out) {
            assert!(matches!(out.first().map(|b| b >> 4), Some(4 | 6)));
        }
    } else if let Ok(Outbound::Protected) = e.outbound(pkt, &mut out) {
        let mut back = Vec::new();
        let r = fuzzing::engine().inbound(&out, &mut back);
        assert!(
            matches!(r, Ok(Inbound::Decapsulated) | Err(Reject::Dummy)),
            "{r:?}"
        );
    }
}

#[test]
fn seeds_decapsulate_and_survive_cuts_and_flips() {
    let seeds = seeds();
    let mut decapsulated = 0;
    for s in &seeds {
        if s[0] == 0 {
            let mut e = fuzzing::engine();
            let mut out = Vec::new();
            if e.inbound(&s[1..], &mut out) == Ok(Inbound::Decapsulated) {
                decapsulated += 1;
            }
        }
        for cut in 0..s.len() {
            replay(&s[..cut]);
            let mut t = s[..cut].to_vec();
            if let Some(d) = t.first_mut() {
                *d |= 2;
            }
            replay(&t);
        }
        for i in 1..s.len() {
            let mut f = s.clone();
            f[i] ^= 0x80;
            replay(&f);
            f[0] |= 2;
            replay(&f);
        }
    }
    // Every SA's own packet and the five bundle/ESP packets decapsulate.
    assert!(decapsulated >= 14, "only {decapsulated} seeds decapsulated");
    if std::env::var_os("KANSOKU_WRITE_CORPUS").is_some() {
        std::fs::create_dir_all(corpus()).unwrap();
        for (i, s) in seeds.iter().enumerate() {
            std::fs::write(corpus().join(format!("seed-{i:02}")), s).unwrap();
        }
    }
}
