//! Demultiplexing keys, and deterministic key sets for the demux benchmarks
//! (experiments E4, E5).

/// A demultiplexing key of up to `8 * W` bytes, held as `W` 64-bit words.
///
/// Why words: hashing and comparing whole words is cheap and branch-free, while
/// odd-length byte arrays (`[u8; 7]`, `[u8; 14]`) compile to piecewise copies
/// and compares. Measured with `xpress bench map --raw-keys` against the
/// default: a 14-byte key held as `[u8; 14]` costs about 1.4× more per cache
/// miss at 1M bindings than the same bytes in a `WordKey<2>` (docs/PERF.md).
/// Unused trailing bytes are zero, so `b"ab"` and `b"ab\0"` pack alike: keep
/// one key length per map, as every demultiplexer does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WordKey<const W: usize>([u64; W]);

impl<const W: usize> WordKey<W> {
    /// Packs `bytes` (at most `8 * W`), zero-padded; `None` if too long.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        if bytes.len() > 8 * W {
            return None;
        }
        let mut words = [0u64; W];
        for (w, chunk) in words.iter_mut().zip(bytes.chunks(8)) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            *w = u64::from_le_bytes(b);
        }
        Some(WordKey(words))
    }

    /// A key from its words.
    pub const fn from_words(words: [u64; W]) -> Self {
        WordKey(words)
    }

    /// The words.
    pub const fn words(&self) -> [u64; W] {
        self.0
    }
}

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
    fn word_keys_pack_bytes_and_refuse_long_input() {
        use super::WordKey;
        let k = WordKey::<2>::from_bytes(&[1, 2, 3, 4, 5, 6, 7, 8, 9]).unwrap();
        assert_eq!(k.words(), [u64::from_le_bytes([1, 2, 3, 4, 5, 6, 7, 8]), 9]);
        assert_eq!(WordKey::<1>::from_bytes(&[0; 9]), None);
        assert_ne!(WordKey::<2>::from_bytes(b"abcdefghijklmn"), WordKey::<2>::from_bytes(b"abcdefghijklmo"));
    }

    #[test]
    fn keys_are_distinct_and_deterministic() {
        let a = super::distinct_keys::<7>(10_000, 3);
        assert_eq!(a.iter().collect::<HashSet<_>>().len(), 10_000);
        assert_eq!(a, super::distinct_keys::<7>(10_000, 3));
    }
}
