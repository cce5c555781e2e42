//! Deterministic key sets for demultiplexing benchmarks (experiments E4, E5).

/// SplitMix64, a small deterministic generator (benchmarks and tests only; the
/// protocol crates take their generator from the caller).
#[derive(Clone, Debug)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next 64 pseudo-random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (n > 0), slightly biased for huge `n`; fine for shuffles.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// `n` distinct pseudo-random keys of `K` bytes, in random order.
///
/// Distinctness comes from embedding the index in the key's low bytes (as a
/// real demux key embeds a port or a slot number); the remaining bytes are
/// random. Keys shorter than 4 bytes are not supported.
pub fn distinct_keys<const K: usize>(n: usize, seed: u64) -> Vec<[u8; K]> {
    assert!(K >= 4 && n <= u32::MAX as usize, "keys need 4 bytes to be distinct");
    let mut rng = SplitMix64(seed);
    let mut out: Vec<[u8; K]> = (0..n)
        .map(|i| {
            let mut k = [0u8; K];
            for chunk in k.chunks_mut(8) {
                let r = rng.next_u64().to_le_bytes();
                chunk.copy_from_slice(&r[..chunk.len()]);
            }
            k[..4].copy_from_slice(&(i as u32).to_le_bytes());
            k
        })
        .collect();
    shuffle(&mut out, &mut rng);
    out
}

/// Fisher–Yates shuffle.
pub fn shuffle<T>(v: &mut [T], rng: &mut SplitMix64) {
    for i in (1..v.len()).rev() {
        v.swap(i, rng.below(i + 1));
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    #[test]
    fn keys_are_distinct_and_deterministic() {
        let a = super::distinct_keys::<7>(10_000, 3);
        assert_eq!(a.iter().collect::<HashSet<_>>().len(), 10_000);
        assert_eq!(a, super::distinct_keys::<7>(10_000, 3));
    }
}
