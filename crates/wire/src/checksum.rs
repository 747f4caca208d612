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
pub fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
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
