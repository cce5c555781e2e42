//! Order statistics of measured samples: the one median, percentile and
//! spread helper of the workspace.
//!
//! Its own crate, without dependencies beyond `serde`, because everything
//! that summarises samples needs it and those users sit in different layers:
//! the lab (`xk-lab`), the applications' ping summary (`xk-apps`), the
//! driver's pacer and relay reports (`xk-driver`), the load generator and
//! the benchmarks. None of them should depend on another just for a median.
//!
//! # Contract
//!
//! Pure functions over slices: no I/O, no clock, no allocation except
//! [`sorted`]'s result. Three quantile definitions, each named for what it
//! is, because each has a reader who relies on it:
//!
//! * [`quantile`]: linear interpolation between neighbouring ranks (the
//!   median of an even count is the mean of the middle two). For summaries
//!   of repeated measurements (the lab).
//! * [`nearest_rank`]: the smallest sample with at least a fraction `q` of
//!   the samples at or below it, `sorted[ceil(n·q) − 1]`; always a measured
//!   value (the median of two is the smaller). What ping-style summaries
//!   print.
//! * [`closest`]: the sample at the interpolation position rounded,
//!   `sorted[round((n − 1)·q)]`; always a measured value, centred like
//!   [`quantile`] (the driver's timing reports).
//!
//! Each takes samples already sorted ascending; [`sorted`] makes them so.
//!
//! ```
//! let v = xk_stats::sorted([4.0, 1.0, 3.0, 2.0]);
//! assert_eq!(xk_stats::quantile(&v, 0.5), 2.5);
//! assert_eq!(xk_stats::nearest_rank(&v, 0.5), Some(2.0));
//! assert_eq!(xk_stats::closest(&v, 0.5), Some(3.0));
//! assert_eq!(xk_stats::median([3.0, 1.0, 2.0]), 2.0);
//! ```

mod spread;

pub use spread::Spread;

/// The `q`-quantile (0..=1) of sorted samples, interpolating linearly
/// between neighbouring ranks; NaN for none.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = (sorted.len() - 1) as f64 * q.clamp(0.0, 1.0);
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// The nearest-rank `q`-quantile of sorted samples: `sorted[ceil(n·q) − 1]`
/// (the first for `q` = 0); None for none.
pub fn nearest_rank<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    let n = sorted.len();
    let rank = ((n as f64 * q.clamp(0.0, 1.0)).ceil() as usize).clamp(1, n.max(1));
    sorted.get(rank - 1).copied()
}

/// The sample at the rounded interpolation position,
/// `sorted[round((n − 1)·q)]`; None for none.
pub fn closest<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    let last = sorted.len().checked_sub(1)?;
    sorted.get((last as f64 * q.clamp(0.0, 1.0)).round() as usize).copied()
}

/// Sorted copy of the finite samples (NaN and infinities left out).
pub fn sorted(samples: impl IntoIterator<Item = f64>) -> Vec<f64> {
    let mut v: Vec<f64> = samples.into_iter().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    v
}

/// The median of samples (linear: the mean of the middle two of an even
/// count); NaN for none.
pub fn median(samples: impl IntoIterator<Item = f64>) -> f64 {
    quantile(&sorted(samples), 0.5)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_three_definitions_on_hand_computed_cases() {
        let four = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(
            (quantile(&four, 0.5), nearest_rank(&four, 0.5), closest(&four, 0.5)),
            (2.5, Some(2.0), Some(3.0))
        );
        assert_eq!(
            (quantile(&four, 0.0), nearest_rank(&four, 0.0), closest(&four, 0.0)),
            (1.0, Some(1.0), Some(1.0))
        );
        assert_eq!(
            (quantile(&four, 1.0), nearest_rank(&four, 1.0), closest(&four, 1.0)),
            (4.0, Some(4.0), Some(4.0))
        );
        let hundred: Vec<u64> = (1..=100).collect();
        assert_eq!((nearest_rank(&hundred, 0.9), nearest_rank(&hundred, 0.99)), (Some(90), Some(99)));
        assert_eq!(closest(&hundred, 0.99), Some(99));
        assert!(quantile(&[], 0.5).is_nan() && median([]).is_nan());
        assert_eq!((nearest_rank::<u64>(&[], 0.5), closest::<u64>(&[], 0.5)), (None, None));
        assert_eq!(median([3.0, f64::NAN, 1.0]), 2.0, "NaN is left out");
    }

    proptest! {
        /// Every definition stays within the samples, and rises with q.
        #[test]
        fn quantiles_are_within_the_samples_and_monotone(
            mut v in prop::collection::vec(-1e6f64..1e6, 1..50),
            a in 0.0f64..=1.0,
            b in 0.0f64..=1.0,
        ) {
            v.sort_by(f64::total_cmp);
            let (lo, hi) = (a.min(b), a.max(b));
            let (min, max) = (v[0], v[v.len() - 1]);
            for f in [quantile(&v, lo), nearest_rank(&v, lo).unwrap(), closest(&v, lo).unwrap()] {
                prop_assert!(min <= f && f <= max);
            }
            prop_assert!(quantile(&v, lo) <= quantile(&v, hi));
            prop_assert!(nearest_rank(&v, lo) <= nearest_rank(&v, hi));
            prop_assert!(closest(&v, lo) <= closest(&v, hi));
        }
    }
}
