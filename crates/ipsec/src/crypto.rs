//! The keyed primitives of one SA, chosen by measurement (benches/primitives.rs,
//! ARCHITECTURE.md): AES-GCM and ChaCha20-Poly1305 from ring (4.6x and 3.5x
//! RustCrypto's on this CPU), HMAC-SHA-1 and HMAC-SHA-256 from RustCrypto
//! (its SHA-1 uses the SHA instructions, ring's does not: 4x), and the CBC
//! ciphers ring lacks (AES, 3DES, Blowfish) from RustCrypto.
//!
//! An SA is keyed once: the cipher's key schedule and the HMAC's inner and
//! outer pads are computed when the SA is installed and cloned for each
//! packet. [`Keying::PerPacket`] redoes them for every packet instead, as
//! KAME-era code did; the bench uses it to show what that cost.

use cbc::cipher::block_padding::NoPadding;
use cbc::cipher::{BlockDecryptMut, BlockEncryptMut, InnerIvInit, KeyInit};
use hmac::Mac;
use subtle::ConstantTimeEq;

use crate::config::{AuthAlg, EncAlg, Key};

/// When the key schedule and the HMAC pads are computed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Keying {
    /// Once per SA (what kansoku does).
    #[default]
    PerSa,
    /// For every packet, as KAME-era stacks did (`--legacy-per-packet-keys`).
    PerPacket,
}

/// A CBC block cipher with its key schedule.
#[derive(Clone)]
pub(crate) enum Block {
    Aes128(aes::Aes128),
    Aes192(aes::Aes192),
    Aes256(aes::Aes256),
    Tdes(des::TdesEde3),
    Blowfish(Box<blowfish::Blowfish>),
}

#[derive(Clone, Copy)]
enum Dir {
    Encrypt,
    Decrypt,
}

fn cbc_run<C>(cipher: C, iv: &[u8], buf: &mut [u8], dir: Dir) -> bool
where
    C: cbc::cipher::BlockCipher
        + cbc::cipher::BlockEncryptMut
        + cbc::cipher::BlockDecryptMut
        + Clone,
{
    let len = buf.len();
    match dir {
        Dir::Encrypt => match cbc::Encryptor::<C>::inner_iv_slice_init(cipher, iv) {
            Ok(e) => e.encrypt_padded_mut::<NoPadding>(buf, len).is_ok(),
            Err(_) => false,
        },
        Dir::Decrypt => match cbc::Decryptor::<C>::inner_iv_slice_init(cipher, iv) {
            Ok(d) => d.decrypt_padded_mut::<NoPadding>(buf).is_ok(),
            Err(_) => false,
        },
    }
}

impl Block {
    /// Encrypts or decrypts `buf`, a whole number of blocks, in CBC mode.
    fn apply(&self, iv: &[u8], buf: &mut [u8], dir: Dir) -> bool {
        match self {
            Block::Aes128(c) => cbc_run(c.clone(), iv, buf, dir),
            Block::Aes192(c) => cbc_run(c.clone(), iv, buf, dir),
            Block::Aes256(c) => cbc_run(c.clone(), iv, buf, dir),
            Block::Tdes(c) => cbc_run(c.clone(), iv, buf, dir),
            Block::Blowfish(c) => cbc_run((**c).clone(), iv, buf, dir),
        }
    }

    fn new(alg: EncAlg, key: &[u8]) -> Option<Block> {
        Some(match (alg, key.len()) {
            (EncAlg::AesCbc, 16) => Block::Aes128(aes::Aes128::new_from_slice(key).ok()?),
            (EncAlg::AesCbc, 24) => Block::Aes192(aes::Aes192::new_from_slice(key).ok()?),
            (EncAlg::AesCbc, 32) => Block::Aes256(aes::Aes256::new_from_slice(key).ok()?),
            (EncAlg::TripleDesCbc, 24) => Block::Tdes(des::TdesEde3::new_from_slice(key).ok()?),
            (EncAlg::BlowfishCbc, _) => {
                Block::Blowfish(Box::new(blowfish::Blowfish::new_from_slice(key).ok()?))
            }
            _ => return None,
        })
    }
}

/// ESP's cipher for one SA. One per SA, built once and never moved on a
/// packet's path, so the CBC variant's size costs nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Cipher {
    Null,
    Cbc {
        alg: EncAlg,
        block: Block,
        /// The key, kept only for [`Keying::PerPacket`].
        key: Option<Key>,
    },
    Aead {
        key: ring::aead::LessSafeKey,
        salt: [u8; 4],
    },
}

/// Why an SA's keys cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyError(pub String);

impl Cipher {
    pub(crate) fn new(alg: EncAlg, key: &Key, keying: Keying) -> Result<Cipher, KeyError> {
        let k = key.expose();
        let bad = || KeyError(format!("{}: a key of {} is not usable", alg.name(), key));
        match alg {
            EncAlg::Null => Ok(Cipher::Null),
            EncAlg::AesCbc | EncAlg::TripleDesCbc | EncAlg::BlowfishCbc => Ok(Cipher::Cbc {
                alg,
                block: Block::new(alg, k).ok_or_else(bad)?,
                key: (keying == Keying::PerPacket).then(|| key.clone()),
            }),
            EncAlg::AesGcm16 | EncAlg::ChaCha20Poly1305 => {
                let (k, s) = k.split_at(k.len().checked_sub(4).ok_or_else(bad)?);
                let algorithm = match (alg, k.len()) {
                    (EncAlg::AesGcm16, 16) => &ring::aead::AES_128_GCM,
                    (EncAlg::AesGcm16, 32) => &ring::aead::AES_256_GCM,
                    (EncAlg::ChaCha20Poly1305, 32) => &ring::aead::CHACHA20_POLY1305,
                    (EncAlg::AesGcm16, 24) => {
                        return Err(KeyError(
                            "aes-gcm-16 with a 192-bit key: ring offers AES-GCM with 128- and \
                             256-bit keys only"
                                .into(),
                        ))
                    }
                    _ => return Err(bad()),
                };
                let key = ring::aead::UnboundKey::new(algorithm, k).map_err(|_| bad())?;
                let mut salt = [0u8; 4];
                salt.copy_from_slice(s);
                Ok(Cipher::Aead {
                    key: ring::aead::LessSafeKey::new(key),
                    salt,
                })
            }
        }
    }

    /// Bytes of IV on the wire.
    pub(crate) fn iv_len(&self) -> usize {
        match self {
            Cipher::Null => 0,
            Cipher::Cbc { alg, .. } => cbc_block_len(*alg),
            Cipher::Aead { .. } => 8,
        }
    }

    /// What the payload, padding, pad length and next header are aligned to.
    pub(crate) fn align(&self) -> usize {
        match self {
            Cipher::Cbc { alg, .. } => cbc_block_len(*alg),
            // RFC 4303 §2.4: the trailer ends on a 4-byte boundary.
            Cipher::Null | Cipher::Aead { .. } => 4,
        }
    }

    /// Bytes of ICV the cipher adds itself (the AEADs' tag).
    pub(crate) fn tag_len(&self) -> usize {
        match self {
            Cipher::Aead { .. } => 16,
            _ => 0,
        }
    }

    pub(crate) fn is_aead(&self) -> bool {
        matches!(self, Cipher::Aead { .. })
    }

    /// CBC: encrypts `buf` (whole blocks) with `iv`. No-op for null.
    pub(crate) fn cbc_encrypt(&self, iv: &[u8], buf: &mut [u8]) -> bool {
        match self {
            Cipher::Null => true,
            Cipher::Cbc { alg, block, key } => match key {
                Some(k) => {
                    Block::new(*alg, k.expose()).is_some_and(|b| b.apply(iv, buf, Dir::Encrypt))
                }
                None => block.apply(iv, buf, Dir::Encrypt),
            },
            Cipher::Aead { .. } => false,
        }
    }

    /// CBC: decrypts `buf` (whole blocks) with `iv`. No-op for null.
    pub(crate) fn cbc_decrypt(&self, iv: &[u8], buf: &mut [u8]) -> bool {
        match self {
            Cipher::Null => true,
            Cipher::Cbc { alg, block, key } => match key {
                Some(k) => {
                    Block::new(*alg, k.expose()).is_some_and(|b| b.apply(iv, buf, Dir::Decrypt))
                }
                None => block.apply(iv, buf, Dir::Decrypt),
            },
            Cipher::Aead { .. } => false,
        }
    }

    /// AEAD: encrypts `buf` in place and writes the 16-byte tag to `tag`;
    /// `false` if it could not (not an AEAD).
    ///
    /// The tag is copied straight from ring's result, as ring stored it (16
    /// bytes at once): moved through an `Option` first, it was read back in
    /// pieces at other offsets, which store-to-load forwarding cannot serve
    /// from that one store, a stall on every packet.
    pub(crate) fn seal(&self, iv: &[u8; 8], aad: &[u8], buf: &mut [u8], tag: &mut [u8]) -> bool {
        let Cipher::Aead { key, salt } = self else {
            return false;
        };
        match key.seal_in_place_separate_tag(nonce(salt, iv), ring::aead::Aad::from(aad), buf) {
            Ok(t) => {
                tag.copy_from_slice(t.as_ref());
                true
            }
            Err(_) => false,
        }
    }

    /// AEAD: checks the tag (constant time, in ring) and decrypts in place.
    pub(crate) fn open(&self, iv: &[u8; 8], aad: &[u8], buf: &mut [u8], tag: &[u8]) -> bool {
        let Cipher::Aead { key, salt } = self else {
            return false;
        };
        let Ok(tag) = <[u8; 16]>::try_from(tag) else {
            return false;
        };
        key.open_in_place_separate_tag(
            nonce(salt, iv),
            ring::aead::Aad::from(aad),
            ring::aead::Tag::from(tag),
            buf,
            0..,
        )
        .is_ok()
    }
}

fn nonce(salt: &[u8; 4], iv: &[u8; 8]) -> ring::aead::Nonce {
    let mut n = [0u8; 12];
    n[..4].copy_from_slice(salt);
    n[4..].copy_from_slice(iv);
    ring::aead::Nonce::assume_unique_for_key(n)
}

fn cbc_block_len(alg: EncAlg) -> usize {
    match alg {
        EncAlg::AesCbc => 16,
        _ => 8,
    }
}

/// An HMAC with its pads computed, or the key to compute them per packet.
#[derive(Clone)]
pub(crate) enum Integrity {
    Sha1 {
        mac: hmac::Hmac<sha1::Sha1>,
        key: Option<Key>,
    },
    Sha256 {
        mac: hmac::Hmac<sha2::Sha256>,
        key: Option<Key>,
    },
}

/// The longest ICV kansoku computes (HMAC-SHA-256-128).
pub(crate) const MAX_ICV: usize = 16;

impl Integrity {
    pub(crate) fn new(alg: AuthAlg, key: &Key, keying: Keying) -> Result<Integrity, KeyError> {
        let keep = (keying == Keying::PerPacket).then(|| key.clone());
        let bad = || KeyError(format!("{}: a key of {} is not usable", alg.name(), key));
        Ok(match alg {
            AuthAlg::HmacSha1_96 => Integrity::Sha1 {
                mac: <hmac::Hmac<sha1::Sha1> as Mac>::new_from_slice(key.expose())
                    .map_err(|_| bad())?,
                key: keep,
            },
            AuthAlg::HmacSha256_128 => Integrity::Sha256 {
                mac: <hmac::Hmac<sha2::Sha256> as Mac>::new_from_slice(key.expose())
                    .map_err(|_| bad())?,
                key: keep,
            },
        })
    }

    /// ICV length on the wire (the truncated HMAC).
    pub(crate) fn icv_len(&self) -> usize {
        match self {
            Integrity::Sha1 { .. } => 12,
            Integrity::Sha256 { .. } => 16,
        }
    }

    /// The truncated HMAC of the concatenation of `parts`, into `out`
    /// (its first [`Integrity::icv_len`] bytes).
    pub(crate) fn compute(&self, parts: &[&[u8]], out: &mut [u8; MAX_ICV]) {
        fn run<M: Mac + Clone + KeyInit>(
            mac: &M,
            key: &Option<Key>,
            parts: &[&[u8]],
            out: &mut [u8],
        ) {
            let mut m = match key {
                Some(k) => match <M as Mac>::new_from_slice(k.expose()) {
                    Ok(m) => m,
                    Err(_) => mac.clone(),
                },
                None => mac.clone(),
            };
            for p in parts {
                m.update(p);
            }
            let full = m.finalize().into_bytes();
            let n = out.len().min(full.len());
            out[..n].copy_from_slice(&full[..n]);
        }
        let n = self.icv_len();
        match self {
            Integrity::Sha1 { mac, key } => run(mac, key, parts, &mut out[..n]),
            Integrity::Sha256 { mac, key } => run(mac, key, parts, &mut out[..n]),
        }
    }

    /// Whether `icv` is the ICV of `parts`, compared in constant time.
    pub(crate) fn verify(&self, parts: &[&[u8]], icv: &[u8]) -> bool {
        let mut want = [0u8; MAX_ICV];
        self.compute(parts, &mut want);
        let n = self.icv_len();
        icv.len() == n && bool::from(want[..n].ct_eq(icv))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// RFC 2202 test case 5: HMAC-SHA-1 with truncation to 96 bits.
    #[test]
    fn rfc2202_case5_hmac_sha1_96() {
        for keying in [Keying::PerSa, Keying::PerPacket] {
            let i =
                Integrity::new(AuthAlg::HmacSha1_96, &Key::new(vec![0x0c; 20]), keying).unwrap();
            let mut out = [0u8; MAX_ICV];
            i.compute(&[b"Test With ", b"Truncation"], &mut out);
            assert_eq!(out[..12], hex("4c1a03424b55e07fe7f27be1")[..]);
            assert!(i.verify(&[b"Test With Truncation"], &hex("4c1a03424b55e07fe7f27be1")));
            assert!(!i.verify(&[b"Test With Truncation"], &hex("4c1a03424b55e07fe7f27be0")));
            assert!(!i.verify(&[b"Test With Truncation"], &hex("4c1a03424b55e07fe7f27b")));
        }
    }

    /// RFC 3602 §4 case 1: one AES-128-CBC block.
    #[test]
    fn rfc3602_case1_aes_cbc() {
        for keying in [Keying::PerSa, Keying::PerPacket] {
            let key = Key::new(hex("06a9214036b8a15b512e03d534120006"));
            let c = Cipher::new(EncAlg::AesCbc, &key, keying).unwrap();
            let iv = hex("3dafba429d9eb430b422da802c9fac41");
            let mut b = b"Single block msg".to_vec();
            assert!(c.cbc_encrypt(&iv, &mut b));
            assert_eq!(b, hex("e353779c1079aeb82708942dbe77181a"));
            assert!(c.cbc_decrypt(&iv, &mut b));
            assert_eq!(b, b"Single block msg");
            let mut odd = vec![0u8; 15];
            assert!(!c.cbc_encrypt(&iv, &mut odd), "not a whole block");
        }
    }
}
