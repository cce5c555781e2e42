//! The Internet checksum (RFC 1071) as XTP 4.0 uses it: over the XTP bytes only,
//! no pseudo-header (digest §4.1).
//!
//! The fast routines add wide words as plain integers and fold at the end.
//! That is the same sum: since 2^16 ≡ 1 (mod 2^16 − 1), a 32- or 64-bit word is
//! congruent to the sum of its 16-bit words, and folding the total with
//! end-around carry gives the one's-complement sum (zero only when every word
//! is zero, as with the 16-bit loop). Short inputs use 64-bit big-endian words
//! in two 128-bit accumulators; long inputs (packets carrying data) use sixteen
//! independent 64-bit lanes of 32-bit little-endian words, a shape the compiler
//! turns into SIMD adds, and swap the folded result's bytes at the end — the
//! one's-complement sum is byte-order independent (RFC 1071 §2(B)). The naive
//! routine adds 16-bit words one by one; property tests hold all of them equal.

/// One's-complement sum of `data` as big-endian 16-bit words (odd final byte
/// padded with a zero low byte), folded to 16 bits but not complemented.
pub fn ones_complement_sum(data: &[u8]) -> u16 {
    if data.len() >= LANES_FROM { sum_lanes(data) } else { sum_words(data) }
}

/// Below this length the lane routine's set-up and reduction cost more than
/// they save (measured: 64 B is faster with 64-bit words, 256 B with lanes).
const LANES_FROM: usize = 192;

/// Sixteen 64-bit lanes of 32-bit little-endian words. A lane overflows only
/// after 2^32 words (16 GiB), far beyond any datagram.
fn sum_lanes(data: &[u8]) -> u16 {
    let mut acc = [0u64; 16];
    let mut chunks = data.chunks_exact(64);
    for c in &mut chunks {
        for (lane, w) in acc.iter_mut().zip(c.chunks_exact(4)) {
            *lane += u64::from(u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
        }
    }
    let mut total: u128 = acc.iter().map(|&x| u128::from(x)).sum();
    let mut rest = chunks.remainder();
    while rest.len() >= 4 {
        total += u128::from(u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]));
        rest = &rest[4..];
    }
    let mut tail = [0u8; 4];
    tail[..rest.len()].copy_from_slice(rest);
    total += u128::from(u32::from_le_bytes(tail));
    fold(total).swap_bytes()
}

/// 64-bit big-endian words in two 128-bit accumulators.
fn sum_words(data: &[u8]) -> u16 {
    let word = |b: &[u8]| u128::from(u64::from_be_bytes(b.try_into().unwrap_or([0; 8])));
    // Two accumulators so consecutive adds do not wait on each other's carry.
    let (mut a, mut b) = (0u128, 0u128);
    let mut chunks = data.chunks_exact(32);
    for c in &mut chunks {
        a += word(&c[0..8]) + word(&c[8..16]);
        b += word(&c[16..24]) + word(&c[24..32]);
    }
    let mut rest = chunks.remainder();
    while rest.len() >= 8 {
        a += word(&rest[..8]);
        rest = &rest[8..];
    }
    let mut tail = [0u8; 8];
    tail[..rest.len()].copy_from_slice(rest);
    b += word(&tail);
    fold(a + b)
}

/// Folds a sum of 64-bit words to 16 bits with end-around carry.
fn fold(x: u128) -> u16 {
    let mut x = (x >> 64) + (x & u128::from(u64::MAX));
    x = (x >> 64) + (x & u128::from(u64::MAX));
    let mut y = x as u64;
    y = (y >> 32) + (y & 0xffff_ffff);
    y = (y >> 32) + (y & 0xffff_ffff);
    y = (y >> 16) + (y & 0xffff);
    y = (y >> 16) + (y & 0xffff);
    y as u16
}

/// One's-complement addition of two folded sums.
pub fn add(a: u16, b: u16) -> u16 {
    let s = u32::from(a) + u32::from(b);
    ((s >> 16) + (s & 0xffff)) as u16
}

/// The checksum to store: the complement of the one's-complement sum.
pub fn checksum(data: &[u8]) -> u16 {
    !ones_complement_sum(data)
}

/// The textbook RFC 1071 loop, 16 bits at a time (reference for tests and the
/// baseline of the checksum benchmark).
pub fn checksum_naive(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut i = 0;
    while i + 1 < data.len() {
        sum += u32::from(u16::from_be_bytes([data[i], data[i + 1]]));
        i += 2;
    }
    if i < data.len() {
        sum += u32::from(data[i]) << 8;
    }
    while sum > 0xffff {
        sum = (sum >> 16) + (sum & 0xffff);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: bytes 00 01 f2 03 f4 f5 f6 f7 sum to 0xddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(ones_complement_sum(&data), 0xddf2);
        assert_eq!(checksum(&data), !0xddf2);
        assert_eq!(checksum_naive(&data), !0xddf2);
        assert_eq!(checksum(&[]), 0xffff);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 5_000, ..ProptestConfig::default() })]
        #[test]
        fn fast_equals_naive(data in prop::collection::vec(any::<u8>(), 0..2000)) {
            prop_assert_eq!(checksum(&data), checksum_naive(&data));
            // Both wide routines on every length, not only their own range.
            prop_assert_eq!(!sum_lanes(&data), checksum_naive(&data));
            prop_assert_eq!(!sum_words(&data), checksum_naive(&data));
        }

        #[test]
        fn fast_equals_naive_on_saturated_words(n in 0usize..600, fill in prop_oneof![Just(0xffu8), Just(0xfe), Just(0)]) {
            let data = vec![fill; n];
            prop_assert_eq!(checksum(&data), checksum_naive(&data));
            prop_assert_eq!(!sum_lanes(&data), checksum_naive(&data));
        }
    }
}
