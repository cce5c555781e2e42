//! Least-squares fit of a fixed cost and a per-byte cost to measured
//! (size, time) points: how each δ/ρ pair of the model is calibrated.
//!
//! Every pair of the model is "a constant plus a per-byte slope" (δ_w and
//! ρ_w from the write path, T_0 and ρ_T from the engine's period, δ_0 and
//! ρ_δ from the end-to-end delay), so one ordinary least-squares line is the
//! whole fitting machinery; written here (a dozen lines of sums) rather than
//! pulled from a linear-algebra crate. The residuals are kept so the report
//! can show how well a straight line describes each measurement.

use serde::{Deserialize, Serialize};

/// A fitted line `time = intercept + slope · size` and how well it fits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LineFit {
    /// Fixed cost, seconds (the δ or T_0 of a pair).
    pub intercept: f64,
    /// Per-byte cost, seconds per byte (the ρ of a pair).
    pub slope: f64,
    /// Coefficient of determination (1 is a perfect line; 1 too when every
    /// time is equal and the line goes through them).
    pub r2: f64,
    /// Per point: (size, measured, fitted, measured − fitted).
    pub residuals: Vec<(f64, f64, f64, f64)>,
}

impl LineFit {
    /// The fitted time at `size`.
    pub fn at(&self, size: f64) -> f64 {
        self.intercept + self.slope * size
    }

    /// The largest |residual| / measured over the points with a positive
    /// measurement (0 when there are none).
    pub fn max_relative_residual(&self) -> f64 {
        self.residuals.iter().filter(|r| r.1 > 0.0).map(|r| (r.3 / r.1).abs()).fold(0.0, f64::max)
    }
}

/// Fits `time = intercept + slope · size` to `points` by ordinary least
/// squares. `None` when there are fewer than two distinct sizes or a value
/// is not finite (no line is determined).
///
/// Every point weighs the same in absolute terms, so the longest messages
/// (the largest times) decide the line and a small fixed cost can come out
/// several times too large or negative: prefer [`fit_line_relative`] when
/// the sizes span orders of magnitude.
pub fn fit_line(points: &[(f64, f64)]) -> Option<LineFit> {
    fit_weighted(points, |_| 1.0)
}

/// Fits `time = intercept + slope · size` minimising the sum of squared
/// *relative* residuals, Σ ((y − fit) / y)² — weighted least squares with
/// weights 1/y². Over sizes from 1 B to 64 KB the times differ by orders
/// of magnitude; an unweighted fit lets the 64-KB points set the fixed
/// cost (issue #18's review: a fixed cost fitted 2–3× the times measured
/// at ≤ 1 KB), whereas the model's predictions are judged by their
/// relative error at every size. `None` as for [`fit_line`], and when a
/// time is not positive (it has no relative error).
pub fn fit_line_relative(points: &[(f64, f64)]) -> Option<LineFit> {
    if points.iter().any(|p| p.1.is_nan() || p.1 <= 0.0) {
        return None;
    }
    fit_weighted(points, |y| 1.0 / (y * y))
}

/// Weighted least squares with weight `w(y)` per point; R² is the
/// weighted one (1 − weighted residual sum / weighted total sum).
fn fit_weighted(points: &[(f64, f64)], w: impl Fn(f64) -> f64) -> Option<LineFit> {
    if points.iter().any(|&(x, y)| !x.is_finite() || !y.is_finite()) {
        return None;
    }
    if points.len() < 2 {
        return None;
    }
    let ws: Vec<f64> = points.iter().map(|p| w(p.1)).collect();
    let sw: f64 = ws.iter().sum();
    if !(sw.is_finite() && sw > 0.0) {
        return None;
    }
    let mx = points.iter().zip(&ws).map(|(p, w)| w * p.0).sum::<f64>() / sw;
    let my = points.iter().zip(&ws).map(|(p, w)| w * p.1).sum::<f64>() / sw;
    // Centred sums: numerically stable when sizes are large (64 KB) and
    // times small (µs).
    let sxx: f64 = points.iter().zip(&ws).map(|(p, w)| w * (p.0 - mx) * (p.0 - mx)).sum();
    let sxy: f64 = points.iter().zip(&ws).map(|(p, w)| w * (p.0 - mx) * (p.1 - my)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    let intercept = my - slope * mx;
    let residuals: Vec<_> = points
        .iter()
        .map(|&(x, y)| {
            let f = intercept + slope * x;
            (x, y, f, y - f)
        })
        .collect();
    let ss_res: f64 = residuals.iter().zip(&ws).map(|(r, w)| w * r.3 * r.3).sum();
    let ss_tot: f64 = points.iter().zip(&ws).map(|(p, w)| w * (p.1 - my) * (p.1 - my)).sum();
    let r2 = if ss_tot > 0.0 { 1.0 - ss_res / ss_tot } else { 1.0 };
    Some(LineFit { intercept, slope, r2, residuals })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_an_exact_line() {
        // Seed 004's write path: δ_w = 392 µs, ρ_w = 279.45 ns/B.
        let pts: Vec<_> =
            [1.0, 1024.0, 8192.0, 65536.0].iter().map(|&l| (l, 392e-6 + 279.45e-9 * l)).collect();
        let f = fit_line(&pts).unwrap();
        assert!((f.intercept - 392e-6).abs() < 1e-12);
        assert!((f.slope - 279.45e-9).abs() < 1e-15);
        assert!((f.r2 - 1.0).abs() < 1e-12);
        assert!(f.max_relative_residual() < 1e-9);
    }

    #[test]
    fn residuals_show_the_noise() {
        // Steps, not a line: least squares gives slope 8/5 and intercept
        // 13 − 1.6 · 1.5 (worked by hand), residuals summing to zero.
        let pts = [(0.0, 11.0), (1.0, 11.0), (2.0, 15.0), (3.0, 15.0)];
        let f = fit_line(&pts).unwrap();
        let sum: f64 = f.residuals.iter().map(|r| r.3).sum();
        assert!(sum.abs() < 1e-12);
        assert!((f.slope - 1.6).abs() < 1e-12, "{}", f.slope);
        assert!((f.intercept - 10.6).abs() < 1e-12);
        assert!(f.r2 > 0.7 && f.r2 < 1.0);
        assert!((f.at(2.0) - 13.8).abs() < 1e-12);
    }

    #[test]
    fn undetermined_lines_are_refused() {
        assert!(fit_line(&[]).is_none());
        assert!(fit_line(&[(1.0, 2.0)]).is_none());
        assert!(fit_line(&[(1.0, 2.0), (1.0, 3.0)]).is_none());
        assert!(fit_line(&[(1.0, 2.0), (2.0, f64::NAN)]).is_none());
        assert!(fit_line_relative(&[(1.0, 2.0), (2.0, 0.0)]).is_none());
    }

    #[test]
    fn relative_fit_recovers_an_exact_line_too() {
        let pts: Vec<_> =
            [1.0, 1024.0, 8192.0, 65536.0].iter().map(|&l| (l, 392e-6 + 279.45e-9 * l)).collect();
        let f = fit_line_relative(&pts).unwrap();
        assert!((f.intercept - 392e-6).abs() < 1e-12);
        assert!((f.slope - 279.45e-9).abs() < 1e-15);
        assert!((f.r2 - 1.0).abs() < 1e-12);
    }

    #[test]
    fn relative_fit_keeps_the_small_messages_fixed_cost() {
        // Two regimes, as the engine's period shows between 1 and 4 KB:
        // 1 µs + 0.5 ns/B up to 1 KB, 3 µs + 1 ns/B beyond. The unweighted
        // line is pulled by the large times and misses the small sizes by
        // tens of per cent; the relative fit spreads the error evenly.
        let pts: Vec<_> = [1.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0]
            .iter()
            .map(|&l: &f64| (l, if l <= 1024.0 { 1e-6 + 0.5e-9 * l } else { 3e-6 + 1e-9 * l }))
            .collect();
        let worst_small =
            |f: &LineFit| f.residuals[..4].iter().map(|r| (r.3 / r.1).abs()).fold(0.0, f64::max);
        let (plain, rel) = (fit_line(&pts).unwrap(), fit_line_relative(&pts).unwrap());
        assert!(worst_small(&plain) > 0.5, "{plain:?}");
        assert!(worst_small(&rel) < 0.5 * worst_small(&plain), "{rel:?}");
        assert!(rel.max_relative_residual() < plain.max_relative_residual());
    }
}
