//! The Internet checksum (RFC 1071) as XTP 4.0 uses it: over the XTP bytes only,
//! no pseudo-header (digest §4.1).
//!
//! The fast routine reads 64-bit big-endian words and adds them as plain
//! integers into 128-bit accumulators. That is the same sum: since
//! 2^16 ≡ 1 (mod 2^16 − 1), a 64-bit word is congruent to the sum of its four
//! 16-bit words, and folding the total with end-around carry gives the
//! one's-complement sum (zero only when every word is zero, as with the 16-bit
//! loop). The naive routine adds 16-bit words one by one; property tests hold
//! the two equal.

/// One's-complement sum of `data` as big-endian 16-bit words (odd final byte
/// padded with a zero low byte), folded to 16 bits but not complemented.
pub fn ones_complement_sum(data: &[u8]) -> u16 {
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
        }

        #[test]
        fn fast_equals_naive_on_saturated_words(n in 0usize..600, fill in prop_oneof![Just(0xffu8), Just(0xfe), Just(0)]) {
            let data = vec![fill; n];
            prop_assert_eq!(checksum(&data), checksum_naive(&data));
        }
    }
}
