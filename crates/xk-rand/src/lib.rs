//! Seeded randomness: one master seed, named independent streams.
//!
//! # Contract
//!
//! Protocol and framework crates never ask the OS for randomness. They are
//! handed an [`Rng`] (or a seed) by their caller. A simulation prints its
//! master seed; every component derives its own stream from that seed and a
//! label ([`Rng::derive`]), so adding a component does not shift the numbers
//! another one draws, and the same seed always gives the same run.
//!
//! The generator is xoshiro256++ (Blackman & Vigna), seeded through SplitMix64.
//! It is fast and statistically strong, and not cryptographic: where the digest
//! asks for unpredictable keys (G20) the driver seeds it from the OS.

/// A deterministic pseudo-random generator (xoshiro256++).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rng {
    s: [u64; 4],
}

/// SplitMix64 step: used to expand seeds.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// FNV-1a of a label, to turn stream names into numbers.
fn fnv1a(label: &str) -> u64 {
    label.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

impl Rng {
    /// A generator from a 64-bit seed.
    pub fn new(seed: u64) -> Rng {
        let mut st = seed;
        let s = [splitmix(&mut st), splitmix(&mut st), splitmix(&mut st), splitmix(&mut st)];
        Rng { s }
    }

    /// An independent generator for the stream named `label` under `seed`.
    pub fn derive(seed: u64, label: &str) -> Rng {
        let mut st = seed ^ fnv1a(label).rotate_left(17);
        Rng::new(splitmix(&mut st))
    }

    /// A child generator for `label`, derived from this generator's next output.
    pub fn fork(&mut self, label: &str) -> Rng {
        let seed = self.next_u64();
        Rng::derive(seed, label)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let out = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        out
    }

    /// The next 32 random bits.
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// Uniform in `[0, 1)` with 53 bits of precision.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `[0, n)` without modulo bias (Lemire's method); `n > 0`.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "below(0)");
        loop {
            let m = u128::from(self.next_u64()) * u128::from(n);
            let low = m as u64;
            if low >= n.wrapping_neg() % n {
                return (m >> 64) as u64;
            }
        }
    }

    /// Uniform in `[lo, hi]` (inclusive).
    pub fn range_inclusive(&mut self, lo: u64, hi: u64) -> u64 {
        assert!(lo <= hi);
        if lo == 0 && hi == u64::MAX {
            return self.next_u64();
        }
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `p` (clamped to `[0, 1]`).
    pub fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        if p >= 1.0 {
            return true;
        }
        self.unit() < p
    }

    /// Standard normal sample (Box–Muller; one of the pair is discarded to keep
    /// the generator state simple to reason about).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.unit(); // (0, 1]
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (2.0 * core::f64::consts::PI * u2).cos()
    }

    /// Pareto sample with scale `xm > 0` and shape `alpha > 0`.
    pub fn pareto(&mut self, xm: f64, alpha: f64) -> f64 {
        let u = 1.0 - self.unit(); // (0, 1]
        xm / u.powf(1.0 / alpha)
    }

    /// Fills `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let b = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&b[..chunk.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_different_labels_differ() {
        let a: Vec<u64> = (0..4)
            .map({
                let mut r = Rng::derive(7, "link0");
                move |_| r.next_u64()
            })
            .collect();
        let b: Vec<u64> = (0..4)
            .map({
                let mut r = Rng::derive(7, "link0");
                move |_| r.next_u64()
            })
            .collect();
        let c = Rng::derive(7, "link1").next_u64();
        assert_eq!(a, b);
        assert_ne!(a[0], c);
    }

    #[test]
    fn moments_are_plausible() {
        let mut r = Rng::new(1);
        let n = 200_000;
        let mean_u: f64 = (0..n).map(|_| r.unit()).sum::<f64>() / n as f64;
        assert!((mean_u - 0.5).abs() < 0.005, "{mean_u}");
        let xs: Vec<f64> = (0..n).map(|_| r.normal()).collect();
        let m = xs.iter().sum::<f64>() / n as f64;
        let v = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n as f64;
        assert!(m.abs() < 0.01 && (v - 1.0).abs() < 0.02, "normal mean {m} var {v}");
        let hits = (0..n).filter(|_| r.chance(0.3)).count() as f64 / n as f64;
        assert!((hits - 0.3).abs() < 0.005, "{hits}");
        for _ in 0..1000 {
            assert!(r.below(7) < 7);
            assert!(r.pareto(2.0, 3.0) >= 2.0);
        }
    }
}
