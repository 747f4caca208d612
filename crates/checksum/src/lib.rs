//! XXH3-64 (seed 0, the default secret): the checksum the trace store keeps
//! of every chunk and checks on every read of an indexed trace.
//!
//! [`xxh3_64`] gives exactly what `twox_hash::XxHash3_64::oneshot` gives, for
//! every input (the tests compare them over every length up to 5 KiB at
//! several alignments, and on random inputs). Inputs of up to 240 bytes go to
//! `twox_hash` itself. Longer ones, the chunks of a trace (32 KiB to 64 MiB),
//! take an AVX-512 or an AVX2 path when the CPU has one, chosen at run time.
//!
//! Why not `twox_hash` alone: its AVX2 loop adds every 64-byte stripe into one
//! set of accumulators, so each stripe waits for the last one's addition, and
//! it has no AVX-512 loop; `xxhash-rust` has one but picks it when it is
//! compiled (`-C target-feature`), not on the machine that runs it. The sum
//! into the accumulators is modular addition, so a 1,024-byte block's stripes
//! can be summed in independent partial sums and added before the block's
//! scramble with the same result: on this project's machines (AMD EPYC,
//! Zen 5) 116-124 GB/s with AVX-512 and 75-78 GB/s with AVX2, against
//! `twox_hash`'s 54-57 GB/s, in L1 and L2 (`cargo bench -p checksum`). That
//! was 16% of the CPU of `kansoku profile -r` on an indexed trace.

// Off x86-64 every input goes to `twox_hash`, and the vector loops' constants
// and helpers are not used.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code, unused_variables))]

/// The default secret of XXH3 (192 bytes).
const SECRET: [u8; 192] = [
    0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
    0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
    0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
    0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
    0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
    0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
    0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
    0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
    0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
    0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
    0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
    0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
];

const PRIME32_1: u64 = 0x9E37_79B1;
const PRIME32_2: u64 = 0x85EB_CA77;
const PRIME32_3: u64 = 0xC2B2_AE3D;
const PRIME64_1: u64 = 0x9E37_79B1_85EB_CA87;
const PRIME64_2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const PRIME64_3: u64 = 0x1656_67B1_9E37_79F9;
const PRIME64_4: u64 = 0x85EB_CA77_C2B2_AE63;
const PRIME64_5: u64 = 0x27D4_EB2F_1656_67C5;
const PRIME_MX1: u64 = 0x1656_6791_9E37_79F9;

/// The accumulators' start.
const INIT: [u64; 8] = [
    PRIME32_3, PRIME64_1, PRIME64_2, PRIME64_3, PRIME64_4, PRIME32_2, PRIME64_5, PRIME32_1,
];

/// Bytes a stripe consumes, and stripes a block: a block is followed by a
/// scramble of the accumulators.
const STRIPE: usize = 64;
const BLOCK: usize = 1024;
/// Where the scramble's key and the last stripe's key start in the secret,
/// and where the merge's does.
const SCRAMBLE_KEY: usize = SECRET.len() - STRIPE;
const LAST_KEY: usize = SECRET.len() - STRIPE - 7;
const MERGE_KEY: usize = 11;

/// The longest input hashed by `twox_hash` itself (XXH3's short paths).
const SHORT: usize = 240;

/// Which loop hashes long inputs here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// `twox_hash` (no AVX2 or AVX-512, or not x86-64).
    Portable,
    /// 256-bit vectors.
    Avx2,
    /// 512-bit vectors.
    Avx512,
}

/// The fastest loop this CPU runs (detection is cached by `std`).
pub fn path() -> Path {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return Path::Avx512;
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            return Path::Avx2;
        }
    }
    Path::Portable
}

/// XXH3-64 of `bytes` with seed 0 and the default secret.
#[inline]
pub fn xxh3_64(bytes: &[u8]) -> u64 {
    if bytes.len() <= SHORT {
        return twox_hash::XxHash3_64::oneshot(bytes);
    }
    xxh3_64_with(path(), bytes)
}

/// XXH3-64 of `bytes` by the loop `path`, or by `twox_hash` when the CPU
/// does not have it (tests and the benchmark compare the paths).
pub fn xxh3_64_with(path: Path, bytes: &[u8]) -> u64 {
    if bytes.len() > SHORT {
        #[cfg(target_arch = "x86_64")]
        match path {
            Path::Avx512 if std::arch::is_x86_feature_detected!("avx512f") => {
                // SAFETY: the CPU has AVX-512F (checked just above), and the
                // input is longer than a stripe.
                return unsafe { x86::long_avx512(bytes) };
            }
            Path::Avx2 if std::arch::is_x86_feature_detected!("avx2") => {
                // SAFETY: the CPU has AVX2 (checked just above), and the
                // input is longer than a stripe.
                return unsafe { x86::long_avx2(bytes) };
            }
            _ => {}
        }
    }
    twox_hash::XxHash3_64::oneshot(bytes)
}

/// How many whole blocks come before the last, partial or whole, one; and
/// how many whole stripes that one has before the last stripe (which is
/// always the input's last 64 bytes, read again).
#[inline(always)]
fn shape(len: usize) -> (usize, usize) {
    let blocks = (len - 1) / BLOCK;
    (blocks, (len - 1 - blocks * BLOCK) / STRIPE)
}

/// The merge of the accumulators into the hash.
#[inline(always)]
fn merge(acc: &[u64; 8], len: usize) -> u64 {
    let word = |o: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&SECRET[o..o + 8]);
        u64::from_le_bytes(w)
    };
    let mut r = (len as u64).wrapping_mul(PRIME64_1);
    for i in 0..4 {
        let k = MERGE_KEY + 16 * i;
        let x = u128::from(acc[2 * i] ^ word(k)) * u128::from(acc[2 * i + 1] ^ word(k + 8));
        r = r.wrapping_add((x as u64) ^ ((x >> 64) as u64));
    }
    r ^= r >> 37;
    r = r.wrapping_mul(PRIME_MX1);
    r ^ (r >> 32)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{merge, shape, INIT, LAST_KEY, PRIME32_1, SCRAMBLE_KEY, SECRET, STRIPE};
    use std::arch::x86_64::*;

    /// One stripe into accumulators: lane `i` gains the product of the two
    /// halves of `data ^ key` and lane `i ^ 1`'s data.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn stripe512(acc: __m512i, data: __m512i, key: __m512i) -> __m512i {
        let dk = _mm512_xor_si512(data, key);
        let product = _mm512_mul_epu32(dk, _mm512_srli_epi64::<32>(dk));
        let swapped = _mm512_shuffle_epi32::<0b01_00_11_10>(data);
        _mm512_add_epi64(acc, _mm512_add_epi64(product, swapped))
    }

    /// XXH3-64's long path over 512-bit vectors: each block's 16 stripes
    /// are summed in four partial accumulators (one chain of additions
    /// through all 16 is what holds a single set back).
    ///
    /// # Safety
    /// The CPU must have AVX-512F; `input` must be longer than 64 bytes.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn long_avx512(input: &[u8]) -> u64 {
        let len = input.len();
        assert!(len > STRIPE);
        let (blocks, stripes) = shape(len);
        let (p, s) = (input.as_ptr(), SECRET.as_ptr());
        let at = |o: usize| {
            debug_assert!(o + 64 <= len);
            // SAFETY: 64 bytes at `p + o`, `o + 64 <= len`: a block's
            // stripes end at `blocks * BLOCK <= len - 1`, the last block's
            // `stripes` end at `len - 1`, and the last stripe is `len - 64..`.
            unsafe { _mm512_loadu_si512(p.add(o).cast()) }
        };
        let key = |o: usize| {
            debug_assert!(o + 64 <= SECRET.len());
            // SAFETY: the secret's loads end at 184 (key 15), 192 (the
            // scramble's) and 185 (the last stripe's), of 192.
            unsafe { _mm512_loadu_si512(s.add(o).cast()) }
        };
        let k: [__m512i; 16] = std::array::from_fn(|i| key(8 * i));
        let scramble_key = key(SCRAMBLE_KEY);
        let prime = _mm512_set1_epi64(PRIME32_1 as i64);
        // SAFETY: INIT is 64 bytes.
        let mut acc = unsafe { _mm512_loadu_si512(INIT.as_ptr().cast()) };
        let zero = _mm512_setzero_si512();
        for b in 0..blocks {
            let o = b * super::BLOCK;
            let (mut a0, mut a1, mut a2, mut a3) = (acc, zero, zero, zero);
            let mut i = 0;
            while i < 16 {
                a0 = stripe512(a0, at(o + 64 * i), k[i]);
                a1 = stripe512(a1, at(o + 64 * i + 64), k[i + 1]);
                a2 = stripe512(a2, at(o + 64 * i + 128), k[i + 2]);
                a3 = stripe512(a3, at(o + 64 * i + 192), k[i + 3]);
                i += 4;
            }
            acc = _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3));
            acc = _mm512_xor_si512(acc, _mm512_srli_epi64::<47>(acc));
            acc = _mm512_xor_si512(acc, scramble_key);
            let lo = _mm512_mul_epu32(acc, prime);
            let hi = _mm512_mul_epu32(_mm512_srli_epi64::<32>(acc), prime);
            acc = _mm512_add_epi64(lo, _mm512_slli_epi64::<32>(hi));
        }
        let o = blocks * super::BLOCK;
        for (i, k) in k.iter().enumerate().take(stripes) {
            acc = stripe512(acc, at(o + 64 * i), *k);
        }
        acc = stripe512(acc, at(len - STRIPE), key(LAST_KEY));
        let mut out = [0u64; 8];
        // SAFETY: `out` is 64 writable bytes.
        unsafe { _mm512_storeu_si512(out.as_mut_ptr().cast(), acc) };
        merge(&out, len)
    }

    /// Half a stripe (32 bytes) into four lanes, as [`stripe512`].
    #[inline]
    #[target_feature(enable = "avx2")]
    fn stripe256(acc: __m256i, data: __m256i, key: __m256i) -> __m256i {
        let dk = _mm256_xor_si256(data, key);
        let product = _mm256_mul_epu32(dk, _mm256_srli_epi64::<32>(dk));
        let swapped = _mm256_shuffle_epi32::<0b01_00_11_10>(data);
        _mm256_add_epi64(acc, _mm256_add_epi64(product, swapped))
    }

    /// The block's scramble of four lanes.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn scramble256(acc: __m256i, key: __m256i, prime: __m256i) -> __m256i {
        let a = _mm256_xor_si256(acc, _mm256_srli_epi64::<47>(acc));
        let a = _mm256_xor_si256(a, key);
        let lo = _mm256_mul_epu32(a, prime);
        let hi = _mm256_mul_epu32(_mm256_srli_epi64::<32>(a), prime);
        _mm256_add_epi64(lo, _mm256_slli_epi64::<32>(hi))
    }

    /// XXH3-64's long path over 256-bit vectors (lanes 0-3 and 4-7): each
    /// block's stripes are summed in two partial accumulators.
    ///
    /// # Safety
    /// The CPU must have AVX2; `input` must be longer than 64 bytes.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn long_avx2(input: &[u8]) -> u64 {
        let len = input.len();
        assert!(len > STRIPE);
        let (blocks, stripes) = shape(len);
        let (p, s) = (input.as_ptr(), SECRET.as_ptr());
        let at = |o: usize| {
            debug_assert!(o + 32 <= len);
            // SAFETY: 32 bytes at `p + o`, within the input as in
            // `long_avx512`: a stripe's second half ends where it does.
            unsafe { _mm256_loadu_si256(p.add(o).cast()) }
        };
        let key = |o: usize| {
            debug_assert!(o + 32 <= SECRET.len());
            // SAFETY: within the secret, as in `long_avx512`.
            unsafe { _mm256_loadu_si256(s.add(o).cast()) }
        };
        let prime = _mm256_set1_epi64x(PRIME32_1 as i64);
        // SAFETY: INIT is 64 bytes, two 32-byte loads.
        let (mut lo, mut hi) = unsafe {
            (
                _mm256_loadu_si256(INIT.as_ptr().cast()),
                _mm256_loadu_si256(INIT.as_ptr().add(4).cast()),
            )
        };
        let zero = _mm256_setzero_si256();
        for b in 0..blocks {
            let o = b * super::BLOCK;
            let (mut l0, mut h0, mut l1, mut h1) = (lo, hi, zero, zero);
            let mut i = 0;
            while i < 16 {
                l0 = stripe256(l0, at(o + 64 * i), key(8 * i));
                h0 = stripe256(h0, at(o + 64 * i + 32), key(8 * i + 32));
                l1 = stripe256(l1, at(o + 64 * i + 64), key(8 * i + 8));
                h1 = stripe256(h1, at(o + 64 * i + 96), key(8 * i + 40));
                i += 2;
            }
            lo = scramble256(_mm256_add_epi64(l0, l1), key(SCRAMBLE_KEY), prime);
            hi = scramble256(_mm256_add_epi64(h0, h1), key(SCRAMBLE_KEY + 32), prime);
        }
        let o = blocks * super::BLOCK;
        for i in 0..stripes {
            lo = stripe256(lo, at(o + 64 * i), key(8 * i));
            hi = stripe256(hi, at(o + 64 * i + 32), key(8 * i + 32));
        }
        lo = stripe256(lo, at(len - STRIPE), key(LAST_KEY));
        hi = stripe256(hi, at(len - 32), key(LAST_KEY + 32));
        let mut out = [0u64; 8];
        // SAFETY: `out` is 64 writable bytes, two 32-byte stores.
        unsafe {
            _mm256_storeu_si256(out.as_mut_ptr().cast(), lo);
            _mm256_storeu_si256(out.as_mut_ptr().add(4).cast(), hi);
        }
        merge(&out, len)
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    fn all_paths_agree(input: &[u8]) {
        let want = twox_hash::XxHash3_64::oneshot(input);
        assert_eq!(xxh3_64(input), want, "default path, {} bytes", input.len());
        for p in [Path::Portable, Path::Avx2, Path::Avx512] {
            assert_eq!(xxh3_64_with(p, input), want, "{p:?}, {} bytes", input.len());
        }
    }

    #[test]
    fn every_length_to_5_kib_at_three_alignments_is_twox_hash() {
        let b = bytes(5200, 7);
        for n in 0..=5120 {
            for off in [0, 1, 13] {
                all_paths_agree(&b[off..off + n]);
            }
        }
    }

    #[test]
    fn chunk_sized_inputs_are_twox_hash() {
        for (n, seed) in [
            (32 << 10, 1),
            ((32 << 10) + 1, 2),
            (1 << 20, 3),
            ((1 << 20) - 63, 4),
        ] {
            all_paths_agree(&bytes(n, seed));
        }
        // Constant inputs, where a lane's sum could hide a swapped lane.
        all_paths_agree(&[0u8; 4096]);
        all_paths_agree(&[0xffu8; 4099]);
    }

    #[test]
    fn this_machine_takes_a_vector_path() {
        // The project's machines (and CI) are x86-64 with AVX-512; a build
        // that lost the dispatch would still be correct but slow.
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            assert_ne!(path(), Path::Portable);
        }
    }

    proptest::proptest! {
        #[test]
        fn random_inputs_are_twox_hash(v in proptest::collection::vec(proptest::num::u8::ANY, 0..9000)) {
            all_paths_agree(&v);
        }
    }
}
