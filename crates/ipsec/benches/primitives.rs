//! Which crate each primitive comes from, by measurement: the same primitive
//! from ring and from RustCrypto over 1,408-byte buffers (about an ESP payload on
//! a 1,500-byte MTU, and whole cipher blocks), in the same run, median of seven rounds. Prints MB/s
//! for each and the ratio; the winners are the ones `crypto.rs` uses
//! (ARCHITECTURE.md quotes a run).
//!
//! `cargo bench -p ipsec --bench primitives`

use std::hint::black_box;
use std::time::Instant;

const LEN: usize = 1408;
const ROUNDS: usize = 7;

/// Median MB/s of `f` run over `LEN` bytes, enough times for ~50 ms a round.
fn rate(mut f: impl FnMut(&mut [u8])) -> f64 {
    let mut buf = vec![0x5au8; LEN];
    let mut n = 1usize;
    loop {
        let t = Instant::now();
        for _ in 0..n {
            f(black_box(&mut buf));
        }
        if t.elapsed().as_millis() >= 50 {
            break;
        }
        n *= 2;
    }
    let mut r: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..n {
                f(black_box(&mut buf));
            }
            (n * LEN) as f64 / t.elapsed().as_secs_f64() / 1e6
        })
        .collect();
    r.sort_by(f64::total_cmp);
    r[ROUNDS / 2]
}

fn row(what: &str, ring: f64, rc: f64) {
    println!(
        "{what:<28} ring {ring:>9.0} MB/s   RustCrypto {rc:>9.0} MB/s   ring/RustCrypto {:.2}x",
        ring / rc
    );
}

fn main() {
    use aes_gcm::aead::{AeadInPlace, KeyInit};
    use hmac::Mac;
    let key = [7u8; 32];
    let nonce = [1u8; 12];

    let rk = ring::aead::LessSafeKey::new(
        ring::aead::UnboundKey::new(&ring::aead::AES_128_GCM, &key[..16]).unwrap(),
    );
    let ring_gcm = rate(|b| {
        let n = ring::aead::Nonce::assume_unique_for_key(nonce);
        let tag = rk
            .seal_in_place_separate_tag(n, ring::aead::Aad::from([0u8; 8]), b)
            .unwrap();
        black_box(tag.as_ref()[0]);
    });
    let rc = aes_gcm::Aes128Gcm::new_from_slice(&key[..16]).unwrap();
    let rc_gcm = rate(|b| {
        black_box(
            rc.encrypt_in_place_detached((&nonce).into(), &[0u8; 8], b)
                .unwrap(),
        );
    });
    row("aes-128-gcm seal", ring_gcm, rc_gcm);

    let rk = ring::aead::LessSafeKey::new(
        ring::aead::UnboundKey::new(&ring::aead::CHACHA20_POLY1305, &key).unwrap(),
    );
    let ring_cc = rate(|b| {
        let n = ring::aead::Nonce::assume_unique_for_key(nonce);
        let tag = rk
            .seal_in_place_separate_tag(n, ring::aead::Aad::from([0u8; 8]), b)
            .unwrap();
        black_box(tag.as_ref()[0]);
    });
    let rc = chacha20poly1305::ChaCha20Poly1305::new_from_slice(&key).unwrap();
    let rc_cc = rate(|b| {
        black_box(
            rc.encrypt_in_place_detached((&nonce).into(), &[0u8; 8], b)
                .unwrap(),
        );
    });
    row("chacha20-poly1305 seal", ring_cc, rc_cc);

    let rk = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, &key[..20]);
    let ring_h1 = rate(|b| {
        black_box(ring::hmac::sign(&rk, b));
    });
    let rc = <hmac::Hmac<sha1::Sha1> as Mac>::new_from_slice(&key[..20]).unwrap();
    let rc_h1 = rate(|b| {
        let mut m = rc.clone();
        m.update(b);
        black_box(m.finalize());
    });
    row("hmac-sha1", ring_h1, rc_h1);

    let rk = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key);
    let ring_h2 = rate(|b| {
        black_box(ring::hmac::sign(&rk, b));
    });
    let rc = <hmac::Hmac<sha2::Sha256> as Mac>::new_from_slice(&key).unwrap();
    let rc_h2 = rate(|b| {
        let mut m = rc.clone();
        m.update(b);
        black_box(m.finalize());
    });
    row("hmac-sha256", ring_h2, rc_h2);

    // Only RustCrypto has these: printed for scale.
    use cbc::cipher::{BlockEncryptMut, KeyIvInit};
    let iv = [3u8; 16];
    let aes = rate(|b| {
        let e = cbc::Encryptor::<aes::Aes128>::new_from_slices(&key[..16], &iv).unwrap();
        black_box(
            e.encrypt_padded_mut::<cbc::cipher::block_padding::NoPadding>(b, LEN)
                .unwrap(),
        );
    });
    let des3 = rate(|b| {
        let e = cbc::Encryptor::<des::TdesEde3>::new_from_slices(&key[..24], &iv[..8]).unwrap();
        black_box(
            e.encrypt_padded_mut::<cbc::cipher::block_padding::NoPadding>(b, LEN)
                .unwrap(),
        );
    });
    let bf = rate(|b| {
        let e =
            cbc::Encryptor::<blowfish::Blowfish>::new_from_slices(&key[..16], &iv[..8]).unwrap();
        black_box(
            e.encrypt_padded_mut::<cbc::cipher::block_padding::NoPadding>(b, LEN)
                .unwrap(),
        );
    });
    use cbc::cipher::InnerIvInit;
    let k_aes = aes::Aes128::new_from_slice(&key[..16]).unwrap();
    let aes_kept = rate(|b| {
        let e = cbc::Encryptor::<aes::Aes128>::inner_iv_slice_init(k_aes.clone(), &iv).unwrap();
        black_box(
            e.encrypt_padded_mut::<cbc::cipher::block_padding::NoPadding>(b, LEN)
                .unwrap(),
        );
    });
    let k_des = des::TdesEde3::new_from_slice(&key[..24]).unwrap();
    let des3_kept = rate(|b| {
        let e =
            cbc::Encryptor::<des::TdesEde3>::inner_iv_slice_init(k_des.clone(), &iv[..8]).unwrap();
        black_box(
            e.encrypt_padded_mut::<cbc::cipher::block_padding::NoPadding>(b, LEN)
                .unwrap(),
        );
    });
    let k_bf = blowfish::Blowfish::new_from_slice(&key[..16]).unwrap();
    let bf_kept = rate(|b| {
        let e = cbc::Encryptor::<blowfish::Blowfish>::inner_iv_slice_init(k_bf.clone(), &iv[..8])
            .unwrap();
        black_box(
            e.encrypt_padded_mut::<cbc::cipher::block_padding::NoPadding>(b, LEN)
                .unwrap(),
        );
    });
    println!("aes-128-cbc (RustCrypto)     {aes_kept:>9.0} MB/s key kept, {aes:>9.0} MB/s key schedule each packet");
    println!("3des-cbc (RustCrypto)        {des3_kept:>9.0} MB/s key kept, {des3:>9.0} MB/s key schedule each packet");
    println!("blowfish-cbc (RustCrypto)    {bf_kept:>9.0} MB/s key kept, {bf:>9.0} MB/s key schedule each packet");
}
