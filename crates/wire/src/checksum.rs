//! The Internet checksum (RFC 1071) and the pseudo-headers of RFC 793 §3.1 /
//! RFC 768 (IPv4) and RFC 8200 §8.1 (IPv6).
//!
//! Sums are kept unfolded in a `u64` so that callers can add several pieces
//! (pseudo-header, header, payload) and fold once at the end.

use crate::ip::IpProtocol;
use core::net::IpAddr;

/// Adds `data` as big-endian 16-bit words to an unfolded one's-complement sum.
/// An odd final byte is padded with a zero byte (RFC 1071 §4.1).
pub fn sum(data: &[u8]) -> u64 {
    // Eight bytes at a time: the carries collect in the upper bits of the u64
    // and fold out at the end, so the loop has no carry handling. The sum of
    // four words per step fits comfortably until inputs of many terabytes.
    let mut acc: u64 = 0;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        acc += u64::from(u16::from_be_bytes([c[0], c[1]]))
            + u64::from(u16::from_be_bytes([c[2], c[3]]))
            + u64::from(u16::from_be_bytes([c[4], c[5]]))
            + u64::from(u16::from_be_bytes([c[6], c[7]]));
    }
    let mut pairs = chunks.remainder().chunks_exact(2);
    for p in &mut pairs {
        acc += u64::from(u16::from_be_bytes([p[0], p[1]]));
    }
    if let [last] = pairs.remainder() {
        acc += u64::from(*last) << 8;
    }
    acc
}

/// Folds an unfolded sum to 16 bits (without complementing it).
///
/// In a fixed number of steps rather than a loop whose count depends on the
/// data: each step keeps the value modulo 2^16 - 1 and never makes a nonzero
/// value zero, and after these four any `u64` is at most 0xffff.
#[inline]
pub fn fold(acc: u64) -> u16 {
    let a = (acc & 0xffff_ffff) + (acc >> 32);
    let a = (a & 0xffff) + (a >> 16);
    let a = (a & 0xffff) + (a >> 16);
    let a = (a & 0xffff) + (a >> 16);
    a as u16
}

/// The unfolded sum of `data` as [`sum`] gives it, read four bytes at a time:
/// a 32-bit word is worth the sum of its two 16-bit halves modulo 2^16 - 1,
/// so the folded sums agree. Meant for IP headers, whose length is a
/// multiple of four; any length is summed right. An IPv4 header without
/// options, the usual one, is five words added outright, where [`sum`]'s
/// general loop takes some 80 instructions.
#[inline]
pub fn sum_words(data: &[u8]) -> u64 {
    let word = |w: &[u8]| u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
    if let Ok(h) = <&[u8; 20]>::try_from(data) {
        return word(&h[..4])
            + word(&h[4..8])
            + word(&h[8..12])
            + word(&h[12..16])
            + word(&h[16..]);
    }
    let mut words = data.chunks_exact(4);
    let acc: u64 = words.by_ref().map(word).sum();
    acc + sum(words.remainder())
}

/// The checksum field value for `data`: the complement of its folded sum.
pub fn checksum(data: &[u8]) -> u16 {
    !fold(sum(data))
}

/// The unfolded sum of the pseudo-header for an upper-layer `length` bytes long.
///
/// IPv4 (RFC 793 §3.1): source, destination, zero, protocol, length.
/// IPv6 (RFC 8200 §8.1): source, destination, 32-bit length, next header.
/// Both add up to the same words, so one function covers both; mixed families
/// are summed as given.
pub fn pseudo_header(src: &IpAddr, dst: &IpAddr, protocol: IpProtocol, length: u32) -> u64 {
    let addr = |a: &IpAddr| match a {
        IpAddr::V4(a) => sum(&a.octets()),
        IpAddr::V6(a) => sum(&a.octets()),
    };
    addr(src)
        + addr(dst)
        + u64::from(u8::from(protocol))
        + u64::from(length >> 16)
        + u64::from(length & 0xffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: the bytes 00 01 f2 03 f4 f5 f6 f7 sum to ddf2 (folded).
        assert_eq!(
            fold(sum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7])),
            0xddf2
        );
    }

    /// The fixed-step fold gives what folding until nothing carries gives,
    /// on the edges of each step and on many values in between.
    #[test]
    fn fold_in_four_steps_is_the_loop() {
        let looped = |mut a: u64| {
            while a > 0xffff {
                a = (a & 0xffff) + (a >> 16);
            }
            a as u16
        };
        let mut seed = 0x0123_4567_89ab_cdefu64;
        let mut edges = vec![
            0,
            1,
            0xffff,
            0x1_0000,
            0x1_fffe,
            0xffff_ffff,
            0x1_0000_0000,
            u64::MAX,
        ];
        edges.extend((0..100_000).map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed >> (seed % 64)
        }));
        for a in edges {
            assert_eq!(fold(a), looped(a), "{a:#x}");
        }
    }

    #[test]
    fn sum_by_words_is_sum() {
        // RFC 1071 §3's example, and the RFC 3602 case 5 outer header
        // (checksum f9a5, zeroed here), then every length up to 100.
        let rfc1071 = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum_words(&rfc1071)), 0xddf2);
        let h = [
            0x45, 0x00, 0x00, 0x7c, 0x08, 0xf2, 0x00, 0x00, 0x40, 0x32, 0, 0, 0xc0, 0xa8, 0x7b,
            0x03, 0xc0, 0xa8, 0x7b, 0x64,
        ];
        assert_eq!(!fold(sum_words(&h)), 0xf9a5);
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for len in 0..100 {
            for fill in [None, Some(0u8), Some(0xff)] {
                let data: Vec<u8> = (0..len)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        fill.unwrap_or(seed as u8)
                    })
                    .collect();
                assert_eq!(fold(sum_words(&data)), fold(sum(&data)), "{data:?}");
            }
        }
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(sum(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
        // Sizes around the 8-byte stride give the same answer as the plain loop.
        let data: Vec<u8> = (0..=40u8).map(|i| i.wrapping_mul(37)).collect();
        for n in 0..data.len() {
            let naive: u64 = data[..n]
                .chunks(2)
                .map(|c| u64::from(c[0]) << 8 | u64::from(*c.get(1).unwrap_or(&0)))
                .sum();
            assert_eq!(fold(sum(&data[..n])), fold(naive), "n={n}");
        }
    }
}
