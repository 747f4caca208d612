//! Crypto-PAn (Xu, Fan, Ammar and Moon, "Prefix-preserving IP address
//! anonymization", ICNP 2002): bit `i` of the anonymised address is bit `i`
//! of the original flipped by the first bit of AES over the original's
//! first `i` bits, padded to 128 bits with the key's pad. Two addresses that
//! share a `k`-bit prefix therefore share one after anonymisation, and
//! nothing else about them is kept.
//!
//! The key is 32 bytes: the AES-128 key, then 16 bytes that the AES key
//! encrypts into the pad, as the reference implementation (Jinliang Fan's
//! `panonymizer`) does. IPv4 follows the reference byte for byte: the
//! 32-bit prefix sits in the block's first four bytes and the pad fills the
//! rest. IPv6 is the same construction over 128 bits, as yacryptopan and
//! cryptopANT compute it.
//!
//! Speed: the AES inputs of an address depend only on the address, so its
//! 32 (IPv4) or 128 (IPv6) blocks are encrypted as one batch, which the
//! `aes` crate pipelines through the CPU's AES instructions (chosen at run
//! time). A small direct-mapped cache of recent IPv4 results serves the
//! locality of real traffic.

use aes::cipher::generic_array::GenericArray;
use aes::cipher::{BlockEncrypt, KeyInit};
use aes::Aes128;

/// Bytes of a Crypto-PAn key: the AES key, then the pad's plaintext.
pub const KEY_LEN: usize = 32;

/// One AES block.
type Block = GenericArray<u8, aes::cipher::consts::U16>;

/// Entries of the IPv4 result cache (a power of two).
const CACHE_ENTRIES: usize = 1 << 16;

/// A Crypto-PAn key, ready to anonymise addresses.
#[derive(Clone)]
pub struct CryptoPan {
    aes: Aes128,
    /// The pad: AES of the key's second half, as a big-endian number.
    pad: u128,
    /// Recent IPv4 results: (address + 1, image), 0 for empty (no address
    /// is stored as 0, so an empty slot never matches).
    cache: Vec<(u64, u32)>,
    /// 32 blocks of the pad: an IPv4 address's AES inputs differ from it
    /// in their first four bytes only.
    ipv4_template: [Block; 32],
    /// Lookups served from the cache, and computed.
    pub hits: u64,
    pub misses: u64,
}

impl std::fmt::Debug for CryptoPan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key and the pad stay out of logs.
        f.debug_struct("CryptoPan").finish_non_exhaustive()
    }
}

impl CryptoPan {
    /// A key of exactly [`KEY_LEN`] bytes.
    pub fn new(key: &[u8; KEY_LEN]) -> CryptoPan {
        let aes = Aes128::new(GenericArray::from_slice(&key[..16]));
        let mut pad = GenericArray::clone_from_slice(&key[16..]);
        aes.encrypt_block(&mut pad);
        let pad_bytes: [u8; 16] = pad.into();
        CryptoPan {
            aes,
            pad: u128::from_be_bytes(pad_bytes),
            ipv4_template: [GenericArray::from(pad_bytes); 32],
            cache: vec![(0, 0); CACHE_ENTRIES],
            hits: 0,
            misses: 0,
        }
    }

    /// The image of an IPv4 address (as a big-endian number).
    pub fn ipv4(&mut self, addr: u32) -> u32 {
        // Fibonacci hashing spreads neighbouring addresses over the cache.
        let slot = (u64::from(addr).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 48) as usize
            & (CACHE_ENTRIES - 1);
        let tag = u64::from(addr) + 1;
        if self.cache[slot].0 == tag {
            self.hits += 1;
            return self.cache[slot].1;
        }
        self.misses += 1;
        let image = self.ipv4_uncached(addr);
        self.cache[slot] = (tag, image);
        image
    }

    /// [`CryptoPan::ipv4`] without the cache: the cost of an address seen
    /// for the first time. An IPv4 block's last 12 bytes are the pad's,
    /// whatever the address: only the first four are written per block.
    pub fn ipv4_uncached(&self, addr: u32) -> u32 {
        let mut blocks = self.ipv4_template;
        let first4 = (self.pad >> 96) as u32;
        for (pos, block) in blocks.iter_mut().enumerate() {
            let prefix = if pos == 0 { 0 } else { u32::MAX << (32 - pos) };
            let input = (addr & prefix) | (first4 & !prefix);
            block[..4].copy_from_slice(&input.to_be_bytes());
        }
        self.aes.encrypt_blocks(&mut blocks);
        let mut flips = 0u32;
        for (pos, block) in blocks.iter().enumerate() {
            flips |= u32::from(block[0] >> 7) << (31 - pos);
        }
        addr ^ flips
    }

    /// [`CryptoPan::ipv4_uncached`] the way the reference implementation
    /// computes it: each of the 32 blocks encrypted alone, after the
    /// previous one. The same image; the benchmark's baseline for the
    /// batch.
    pub fn ipv4_block_by_block(&self, addr: u32) -> u32 {
        let mut flips = 0u32;
        let first4 = (self.pad >> 96) as u32;
        for pos in 0..32 {
            let prefix = if pos == 0 { 0 } else { u32::MAX << (32 - pos) };
            let input = (u128::from((addr & prefix) | (first4 & !prefix)) << 96)
                | (self.pad & (u128::MAX >> 32));
            let mut block = GenericArray::from(input.to_be_bytes());
            self.aes.encrypt_block(&mut block);
            flips |= u32::from(block[0] >> 7) << (31 - pos);
        }
        addr ^ flips
    }

    /// The image of an IPv6 address (as a big-endian number).
    pub fn ipv6(&self, addr: u128) -> u128 {
        addr ^ self.flips(addr)
    }

    /// The flip bits of `addr`: bit `i` (from the most significant) is the
    /// first bit of AES over the first `i` bits of `addr` followed by the
    /// pad's remaining bits.
    fn flips(&self, addr: u128) -> u128 {
        let mut blocks = [Block::default(); 128];
        for (pos, block) in blocks.iter_mut().enumerate() {
            // The first `pos` bits of the address; `pos` 0 takes none (a
            // shift by 128 would overflow).
            let prefix = if pos == 0 {
                0
            } else {
                u128::MAX << (128 - pos)
            };
            let input = (addr & prefix) | (self.pad & !prefix);
            *block = GenericArray::from(input.to_be_bytes());
        }
        self.aes.encrypt_blocks(&mut blocks);
        let mut flips = 0u128;
        for (pos, block) in blocks.iter().enumerate() {
            flips |= u128::from(block[0] >> 7) << (127 - pos);
        }
        flips
    }

    /// 16 bytes the key determines and no address image reveals: the key
    /// of the MAC address hash ([`crate::MacPolicy::Hash`]). AES of a fixed
    /// block that Crypto-PAn's inputs never take (they all end in the pad's
    /// bits, and this block is not derived from the pad).
    pub fn derived_key(&self, label: &[u8; 16]) -> [u8; 16] {
        let mut block = GenericArray::clone_from_slice(label);
        self.aes.encrypt_block(&mut block);
        block.into()
    }
}

/// Reads a key file's text: 64 hexadecimal digits (surrounding white space
/// allowed), the 32 bytes of [`CryptoPan::new`]. Anything else is refused,
/// never padded or cut.
pub fn parse_key(text: &str) -> Result<[u8; KEY_LEN], String> {
    let hex = text.trim();
    if hex.len() != 2 * KEY_LEN {
        return Err(format!(
            "a Crypto-PAn key is {} hexadecimal digits (32 bytes: the AES key, then the pad); this one has {} characters",
            2 * KEY_LEN,
            hex.chars().count()
        ));
    }
    let mut key = [0u8; KEY_LEN];
    for (i, pair) in hex.as_bytes().chunks(2).enumerate() {
        let digit = |c: u8| (c as char).to_digit(16);
        match (digit(pair[0]), digit(pair[1])) {
            (Some(h), Some(l)) => key[i] = (h * 16 + l) as u8,
            _ => {
                return Err(format!(
                    "a Crypto-PAn key is hexadecimal digits; character {} is not one",
                    2 * i + 1 + usize::from(digit(pair[0]).is_some())
                ))
            }
        }
    }
    Ok(key)
}

/// A new random key as [`parse_key`] reads it (64 hex digits and a line
/// end), from the operating system's generator.
pub fn new_key_text() -> String {
    use rand::RngCore;
    let mut key = [0u8; KEY_LEN];
    rand::rngs::OsRng.fill_bytes(&mut key);
    let mut text: String = key.iter().map(|b| format!("{b:02x}")).collect();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    /// The reference implementation's sample key.
    const REFERENCE_KEY: [u8; 32] = [
        21, 34, 23, 141, 51, 164, 207, 128, 19, 10, 91, 22, 73, 144, 125, 16, 216, 152, 143, 131,
        121, 121, 101, 39, 98, 87, 76, 45, 42, 132, 34, 2,
    ];

    fn v4(pan: &mut CryptoPan, a: &str) -> String {
        Ipv4Addr::from(pan.ipv4(a.parse::<Ipv4Addr>().unwrap().into())).to_string()
    }

    #[test]
    fn the_reference_sample_maps_as_published() {
        let mut pan = CryptoPan::new(&REFERENCE_KEY);
        // From the reference implementation's sample trace (raw and
        // sanitised), the pair the literature quotes first.
        assert_eq!(v4(&mut pan, "24.5.0.80"), "100.9.15.210");
        // Cached or not, the same image.
        assert_eq!(v4(&mut pan, "24.5.0.80"), "100.9.15.210");
        assert_eq!(pan.hits, 1);
    }

    #[test]
    fn every_pair_of_the_reference_sample_and_its_ipv6_images_hold() {
        let mut pan = CryptoPan::new(&REFERENCE_KEY);
        let mut checked = 0;
        for line in include_str!("reference-sample.txt").lines() {
            let Some((from, to)) = line.split_once(' ').filter(|_| !line.starts_with('#')) else {
                continue;
            };
            let image = match from.parse::<std::net::IpAddr>().unwrap() {
                std::net::IpAddr::V4(a) => Ipv4Addr::from(pan.ipv4(a.into())).to_string(),
                std::net::IpAddr::V6(a) => Ipv6Addr::from(pan.ipv6(a.into())).to_string(),
            };
            assert_eq!(image, to, "{from}");
            checked += 1;
        }
        assert_eq!(checked, 76);
    }

    #[test]
    fn pycryptopans_vectors_hold_for_ipv4_and_ipv6() {
        // The vectors pycryptopan and yacryptopan print for the key 0..31.
        let key: [u8; 32] = std::array::from_fn(|i| i as u8);
        let mut pan = CryptoPan::new(&key);
        assert_eq!(v4(&mut pan, "192.0.2.1"), "2.90.93.17");
        let a: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let image = Ipv6Addr::from(pan.ipv6(a.into()));
        assert_eq!(
            image,
            "dd92:2c44:3fc0:ff1e:7ff9:c7f0:8180:7e00"
                .parse::<Ipv6Addr>()
                .unwrap()
        );
    }

    proptest::proptest! {
        #[test]
        fn prefixes_are_preserved_exactly(a: u32, b: u32, c: u128, d: u128) {
            let mut pan = CryptoPan::new(&REFERENCE_KEY);
            let common = (a ^ b).leading_zeros();
            let (x, y) = (pan.ipv4(a), pan.ipv4(b));
            proptest::prop_assert_eq!((x ^ y).leading_zeros(), common);
            let common6 = (c ^ d).leading_zeros();
            proptest::prop_assert_eq!((pan.ipv6(c) ^ pan.ipv6(d)).leading_zeros(), common6);
            proptest::prop_assert_eq!(pan.ipv4_uncached(a), x);
            proptest::prop_assert_eq!(pan.ipv4_block_by_block(a), x);
        }
    }

    #[test]
    fn keys_are_64_hex_digits_and_nothing_else() {
        let text = new_key_text();
        let key = parse_key(&text).unwrap();
        assert_eq!(parse_key(&format!("  {}  \n", text.trim())).unwrap(), key);
        assert!(parse_key(&text[..62])
            .unwrap_err()
            .contains("64 hexadecimal digits"));
        assert!(parse_key(&format!("{}00", text.trim())).is_err());
        let bad = format!("zz{}", &text.trim()[2..]);
        assert!(parse_key(&bad).unwrap_err().contains("character 1"));
        assert!(parse_key("").is_err());
        // Two keys drawn are not the same.
        assert_ne!(parse_key(&new_key_text()).unwrap(), key);
    }
}
