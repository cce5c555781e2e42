//! Round-trip statistics as ping prints them (min/avg/max/mdev) and as a
//! latency study wants them (p50/p90/p99).

use serde::Serialize;

/// A summary of round-trip times, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct RttSummary {
    /// Smallest.
    pub min: f64,
    /// Mean.
    pub avg: f64,
    /// Largest.
    pub max: f64,
    /// Standard deviation (ping's `mdev`: the root of the mean square minus
    /// the squared mean).
    pub mdev: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
}

impl RttSummary {
    /// The summary of `rtts_ns` (nanoseconds, any order); `None` when empty.
    /// Percentiles are the nearest rank: the smallest sample with at least
    /// a fraction p of them at or below it, `rtts[ceil(n·p) - 1]` (the
    /// median of two is the smaller, as of four the second).
    pub fn of(rtts_ns: &[u64]) -> Option<RttSummary> {
        if rtts_ns.is_empty() {
            return None;
        }
        let mut v: Vec<f64> = rtts_ns.iter().map(|&x| x as f64 / 1000.0).collect();
        v.sort_by(f64::total_cmp);
        let n = v.len() as f64;
        let avg = v.iter().sum::<f64>() / n;
        let sq = v.iter().map(|x| x * x).sum::<f64>() / n;
        let q = |p: f64| xk_stats::nearest_rank(&v, p).unwrap_or(f64::NAN);
        Some(RttSummary {
            min: v[0],
            avg,
            max: v[v.len() - 1],
            mdev: (sq - avg * avg).max(0.0).sqrt(),
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_matches_hand_computed_values() {
        assert_eq!(RttSummary::of(&[]), None);
        let s = RttSummary::of(&[3000, 1000, 2000, 4000]).unwrap();
        assert_eq!((s.min, s.avg, s.max), (1.0, 2.5, 4.0));
        assert!((s.mdev - 1.25f64.sqrt()).abs() < 1e-9, "{s:?}");
        // Nearest rank: the median of four is the second.
        assert_eq!((s.p50, s.p90, s.p99), (2.0, 4.0, 4.0));
        let hundred: Vec<u64> = (1..=100).map(|i| i * 1000).collect();
        let s = RttSummary::of(&hundred).unwrap();
        assert_eq!((s.p50, s.p90, s.p99), (50.0, 90.0, 99.0));
        let two = RttSummary::of(&[580_000, 498_000]).unwrap();
        assert_eq!(two.p50, 498.0, "the median of two is the smaller, not the larger");
    }
}
