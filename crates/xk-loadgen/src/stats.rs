//! Miss times (τ_i − t_i) and inter-arrival times, kept in a fixed-size
//! log-linear histogram so that a run of millions of requests costs no
//! allocation while it runs: exact below 2,048 ns, 64 buckets per power of
//! two above (under 1.6 % error). Mean and maximum are exact.

use serde::{Deserialize, Serialize};

const LINEAR: u64 = 2048;
const SUB_BITS: u32 = 6;
const SUB: usize = 1 << SUB_BITS;
/// Powers of two from 2^11 to 2^63.
const EXP_FIRST: u32 = 11;
const BUCKETS: usize = LINEAR as usize + (64 - EXP_FIRST as usize) * SUB;

/// A histogram of nanosecond values.
#[derive(Clone)]
pub struct Histogram {
    counts: Box<[u64]>,
    n: u64,
    sum: u128,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { counts: vec![0; BUCKETS].into_boxed_slice(), n: 0, sum: 0, max: 0 }
    }
}

fn index(v: u64) -> usize {
    if v < LINEAR {
        return v as usize;
    }
    let e = 63 - v.leading_zeros();
    let sub = ((v >> (e - SUB_BITS)) as usize) & (SUB - 1);
    LINEAR as usize + (e - EXP_FIRST) as usize * SUB + sub
}

/// The least value of bucket `i`.
fn lower(i: usize) -> u64 {
    if i < LINEAR as usize {
        return i as u64;
    }
    let k = i - LINEAR as usize;
    let e = EXP_FIRST + (k / SUB) as u32;
    ((SUB + k % SUB) as u64) << (e - SUB_BITS)
}

impl Histogram {
    /// Reads what recording `v` will write, so that the next
    /// [`Histogram::record`] finds it in the cache.
    #[inline]
    pub fn touch(&self, v: u64) {
        std::hint::black_box((self.counts[index(v)], self.n, self.sum, self.max));
    }

    /// Records one value.
    #[inline]
    pub fn record(&mut self, v: u64) {
        self.counts[index(v)] += 1;
        self.n += 1;
        self.sum += u128::from(v);
        self.max = self.max.max(v);
    }

    /// Records `now − t` for every `t` in `ts` that is not after `now`
    /// (the miss times of a batch executed together, which share their
    /// τ = `now`); returns how many were after `now` (not recorded).
    ///
    /// Equal to calling [`Histogram::record`] for each, but the sum and
    /// the maximum are kept once per batch (from the times' sum and
    /// least), not per value: at 64 requests per GSO call the per-value
    /// 128-bit addition and maximum were part of the adapter's overhead
    /// against the floor (docs/LOADGEN.md, Session 14).
    #[inline]
    pub fn record_since(&mut self, now: u64, ts: impl Iterator<Item = u64>) -> u64 {
        let (mut k, mut early, mut sum_t, mut least) = (0u64, 0u64, 0u128, u64::MAX);
        for t in ts {
            if t > now {
                early += 1;
                continue;
            }
            self.counts[index(now - t)] += 1;
            k += 1;
            sum_t += u128::from(t);
            least = least.min(t);
        }
        if k > 0 {
            self.n += k;
            self.sum += u128::from(k) * u128::from(now) - sum_t;
            self.max = self.max.max(now - least);
        }
        early
    }

    /// Adds another histogram's values.
    pub fn merge(&mut self, o: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(o.counts.iter()) {
            *a += b;
        }
        self.n += o.n;
        self.sum += o.sum;
        self.max = self.max.max(o.max);
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// The value at quantile `q` (bucket's lower bound; 0 when empty).
    pub fn quantile(&self, q: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let want = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut acc = 0;
        for (i, c) in self.counts.iter().enumerate() {
            acc += c;
            if acc >= want {
                return lower(i).min(self.max);
            }
        }
        self.max
    }

    /// Share of values above `v`.
    pub fn share_above(&self, v: u64) -> f64 {
        if self.n == 0 {
            return 0.0;
        }
        let above: u64 = self.counts[index(v) + 1..].iter().sum();
        above as f64 / self.n as f64
    }

    /// The summary.
    pub fn summary(&self, late_ns: u64) -> Summary {
        Summary {
            n: self.n,
            mean_ns: if self.n == 0 { 0.0 } else { self.sum as f64 / self.n as f64 },
            median_ns: self.quantile(0.5),
            p90_ns: self.quantile(0.9),
            p99_ns: self.quantile(0.99),
            p999_ns: self.quantile(0.999),
            max_ns: self.max,
            late_ns,
            late_share: self.share_above(late_ns),
            cdf: self.cdf(),
        }
    }

    /// The cumulative distribution at every non-empty bucket, thinned to at
    /// most ~60 points evenly spread in probability (for plots).
    pub fn cdf(&self) -> Vec<(u64, f64)> {
        let mut out = Vec::new();
        if self.n == 0 {
            return out;
        }
        let mut acc = 0u64;
        let mut last_p = -1.0;
        for (i, c) in self.counts.iter().enumerate() {
            if *c == 0 {
                continue;
            }
            acc += c;
            let p = acc as f64 / self.n as f64;
            if p - last_p >= 1.0 / 60.0 || acc == self.n {
                out.push((lower(i), p));
                last_p = p;
            }
        }
        out
    }
}

/// What a histogram says, for reports.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Summary {
    /// Values.
    pub n: u64,
    /// Mean (VZ for miss times).
    pub mean_ns: f64,
    /// Median.
    pub median_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// Maximum.
    pub max_ns: u64,
    /// The bound above which a value counts as late.
    pub late_ns: u64,
    /// Share of values above `late_ns`.
    pub late_share: f64,
    /// Cumulative distribution: (ns, share at or below).
    pub cdf: Vec<(u64, f64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_within_the_bucket_error() {
        let mut h = Histogram::default();
        for v in 1..=100_000u64 {
            h.record(v * 10);
        }
        let s = h.summary(500_000);
        assert!((s.mean_ns - 500_005.0).abs() < 1e-6);
        for (q, want) in [(0.5, 500_000.0), (0.99, 990_000.0)] {
            let got = h.quantile(q) as f64;
            assert!((got - want).abs() / want < 0.02, "q{q}: {got} vs {want}");
        }
        assert_eq!(s.max_ns, 1_000_000);
        assert!((s.late_share - 0.5).abs() < 0.02, "{}", s.late_share);
        assert_eq!(h.quantile(0.0), 10);
        let mut small = Histogram::default();
        small.record(17);
        assert_eq!(small.quantile(0.5), 17);
        for v in [0, 1, 2047, 2048, 4095, 1 << 40, u64::MAX] {
            assert!(lower(index(v)) <= v, "{v}");
        }
    }

    #[test]
    fn a_batch_records_what_single_records_do() {
        let (mut one, mut many) = (Histogram::default(), Histogram::default());
        let now = 1_000_000u64;
        let ts = [3u64, 999_990, 500_000, 1_000_000, 7, 999_000];
        for t in ts {
            one.record(now - t);
        }
        // Two times after `now` are counted, not recorded.
        let early = many.record_since(now, ts.into_iter().chain([now + 1, u64::MAX]));
        assert_eq!(early, 2);
        assert_eq!((many.n, many.sum, many.max), (one.n, one.sum, one.max));
        assert_eq!(many.counts, one.counts);
        assert_eq!(many.record_since(now, std::iter::empty()), 0);
        assert_eq!(many.n, 6);
    }
}
